//! macOS: `O_NOFOLLOW_ANY` where the kernel has it, the component walk otherwise; no
//! `O_PATH`, no `O_TMPFILE`; state and config under `~/Library/Application Support`.
//!
//! Checked here by cross-compilation only (`cargo clippy --target aarch64-apple-darwin`);
//! no macOS machine has run the suite yet.

use super::{DirWatch, Open};
use rustix::fd::{BorrowedFd, OwnedFd};
use rustix::fs::{Mode, OFlags};
use std::ffi::OsStr;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

pub const RESOLVER: &str =
    "openat O_NOFOLLOW_ANY (plain names only), else component walk (openat O_NOFOLLOW per name)";
/// The polling watcher: only where the notify watcher (FSEvents with a flush barrier,
/// [`super::notify_watch`]) cannot start.
pub const WATCHER: &str = super::portable::WATCHER;
pub const TRASH: &str = "the user's Trash (NSFileManager trashItemAtURL, from a staging directory ferret made), \
else ferret's own";
pub const NOTIFY_WATCHER: bool = true;
pub const FREEDESKTOP_TRASH: bool = false;
pub const SKIPPED_NAMES: &[&str] = &[".DS_Store"];

static NO_NOFOLLOW_ANY: AtomicBool = AtomicBool::new(false);

/// One `openat(dir, rel, O_NOFOLLOW_ANY)`: the kernel refuses a symlink in any
/// component. `rel` holds only plain names (checked by the caller), so with no link
/// followed and no `..`, what opens is beneath `dir`. `None` on a kernel without the
/// flag (before macOS 11 it is `EINVAL`): the caller walks the components.
pub fn open_beneath(
    dir: BorrowedFd<'_>,
    rel: &Path,
    _names: &[&OsStr],
    how: Open,
) -> Option<io::Result<OwnedFd>> {
    if NO_NOFOLLOW_ANY.load(Ordering::Relaxed) {
        return None;
    }
    let mode = match how {
        Open::Dir => OFlags::RDONLY | OFlags::DIRECTORY,
        Open::Read | Open::Probe => OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY,
    };
    let rel = if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    };
    match rustix::fs::openat(
        dir,
        rel,
        mode | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NOFOLLOW_ANY,
        Mode::empty(),
    ) {
        Ok(fd) => Some(Ok(fd)),
        Err(rustix::io::Errno::INVAL) => {
            NO_NOFOLLOW_ANY.store(true, Ordering::Relaxed);
            None
        }
        Err(e) => Some(Err(e.into())),
    }
}

pub fn open_unnamed(_dir: BorrowedFd<'_>) -> Option<OwnedFd> {
    None
}

pub fn link_unnamed(
    _fd: BorrowedFd<'_>,
    _dir: BorrowedFd<'_>,
    _name: &OsStr,
) -> Option<io::Result<()>> {
    None
}

/// Not copied yet (Finder tags, quarantine): a replaced file loses them.
pub fn copy_xattrs(_from: BorrowedFd<'_>, _to: BorrowedFd<'_>) {}

unsafe extern "C" {
    /// libmalloc: frees what the zones hold unused, up to `goal` bytes (0: all).
    fn malloc_zone_pressure_relief(zone: *mut std::ffi::c_void, goal: usize) -> usize;
}

pub fn release_memory() {
    // SAFETY: a null zone means every zone; the call only returns free pages.
    unsafe {
        malloc_zone_pressure_relief(std::ptr::null_mut(), 0);
    }
}

pub fn steady_allocator() {}

pub fn limit_self(memory: u64, cpu_seconds: u64) -> std::io::Result<()> {
    use rustix::process::{Resource, Rlimit, setrlimit};
    setrlimit(
        Resource::Cpu,
        Rlimit {
            current: Some(cpu_seconds),
            maximum: Some(cpu_seconds + 1),
        },
    )?;
    // Darwin ignores RLIMIT_AS; RLIMIT_DATA bounds the heap where it is enforced.
    let _ = setrlimit(
        Resource::Data,
        Rlimit {
            current: Some(memory),
            maximum: Some(memory),
        },
    );
    let _ = setrlimit(
        Resource::Core,
        Rlimit {
            current: Some(0),
            maximum: Some(0),
        },
    );
    Ok(())
}

/// HFS+ stamps files to the second (APFS to the nanosecond, but a volume's format is
/// not asked here): one second.
pub fn stamp_tick_ns() -> i128 {
    1_000_000_000
}

pub fn config_dir_in_home(home: &Path) -> PathBuf {
    home.join("Library/Application Support/ferret")
}

pub fn state_dir_in_home(home: &Path) -> PathBuf {
    home.join("Library/Application Support/ferret/state")
}

/// The whole Application Support folder of ferret (config and state) and the user's
/// Trash.
pub fn protected_in_home(home: &Path) -> Vec<PathBuf> {
    vec![
        home.join("Library/Application Support/ferret"),
        home.join(".Trash"),
    ]
}

/// The polling watcher, the fallback when FSEvents cannot be used: FSEvents delivers
/// its events from a thread of its own, after the write that caused them returned, so
/// it is used only with its flush barrier ([`super::notify_watch`]), which needs a
/// cookie directory; without one the portable watcher, which looks when the search
/// asks, keeps the index's "never stale" promise.
pub fn watcher() -> Result<Box<dyn DirWatch>, String> {
    Ok(super::portable::poll_watcher())
}

/// The user's Trash through `NSFileManager`. The path it is given is one ferret made
/// (its staging directory and the item's own name); the object got there by a
/// `renameat` between handles, so nothing an agent can race is resolved by path here.
/// Checked by cross-compilation only: that Finder shows the item, and where its
/// "Put Back" leads (the staging directory it came from, gone by then), only a Mac can
/// show.
struct MacTrash;

pub fn os_trash() -> Option<Box<dyn super::OsTrash>> {
    Some(Box::new(MacTrash))
}

impl super::OsTrash for MacTrash {
    fn name(&self) -> &'static str {
        "macOS Trash"
    }

    /// The home volume's Trash (where an item staged in the state directory goes when
    /// that is on the home volume; another volume's `.Trashes` is not looked in).
    fn dir(&self) -> Option<PathBuf> {
        std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(|h| PathBuf::from(h).join(".Trash"))
    }

    fn put(&self, staged: &Path) -> io::Result<PathBuf> {
        use objc2_foundation::{NSFileManager, NSString, NSURL};
        // A symbolic link stays in ferret's trash (the caller's fallback): whether
        // trashItemAtURL moves a link or what it points to is not documented, and only
        // the link may ever move.
        let st = rustix::fs::lstat(staged)?;
        if rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Symlink {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "symbolic links are kept in ferret's trash on macOS",
            ));
        }
        let path = staged.to_str().ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "the staged path is not UTF-8")
        })?;
        objc2::rc::autoreleasepool(|_| {
            let url = NSURL::fileURLWithPath(&NSString::from_str(path));
            let manager = NSFileManager::defaultManager();
            let mut resulting = None;
            manager
                .trashItemAtURL_resultingItemURL_error(&url, Some(&mut resulting))
                .map_err(|e| io::Error::other(e.localizedDescription().to_string()))?;
            let now = resulting
                .and_then(|u| u.path())
                .map(|p| PathBuf::from(p.to_string()))
                .ok_or_else(|| io::Error::other("the Trash did not say where the item went"))?;
            Ok(now)
        })
    }
}

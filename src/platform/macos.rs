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
pub const NOTIFY_WATCHER: bool = true;
pub const TRASH: &str = "ferret's own (in the state directory)";
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

//! Linux: `openat2`, `O_TMPFILE`, inotify, glibc's allocator knobs, the XDG layout.

use super::{DirWatch, Open, WatchEvent, WatchKey};
use rustix::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, Mode, OFlags};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

pub const RESOLVER: &str = "openat2 (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)";
pub const WATCHER: &str = "inotify (one watch per directory walked)";
/// inotify is used directly (the notify watcher only under `FERRET_PORTABLE=1`).
pub const NOTIFY_WATCHER: bool = false;
pub const TRASH: &str = "freedesktop home trash (~/.local/share/Trash), else ferret's own";

/// No OS trash behind a path API: the freedesktop home trash is used by handle.
pub fn os_trash() -> Option<Box<dyn super::OsTrash>> {
    None
}
pub const FREEDESKTOP_TRASH: bool = true;
pub const SKIPPED_NAMES: &[&str] = &[];

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `openat2(dir, rel, mode | O_CLOEXEC | O_NOFOLLOW, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS
/// | RESOLVE_NO_MAGICLINKS)`; `None` once the kernel has said it has no `openat2`.
pub fn open_beneath(
    dir: BorrowedFd<'_>,
    rel: &Path,
    _names: &[&OsStr],
    how: Open,
) -> Option<io::Result<OwnedFd>> {
    use rustix::fs::{ResolveFlags, openat2};
    use std::sync::atomic::{AtomicBool, Ordering};
    static NO_OPENAT2: AtomicBool = AtomicBool::new(false);
    if NO_OPENAT2.load(Ordering::Relaxed) {
        return None;
    }
    // openat2 refuses O_PATH with any flag but O_CLOEXEC, O_DIRECTORY, O_NOFOLLOW.
    let mode = match how {
        Open::Probe => OFlags::PATH,
        Open::Read => OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY,
        Open::Dir => OFlags::RDONLY | OFlags::DIRECTORY,
    };
    let rel = if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    };
    match openat2(
        dir,
        rel,
        mode | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    ) {
        Ok(fd) => Some(Ok(fd)),
        Err(rustix::io::Errno::NOSYS) => {
            NO_OPENAT2.store(true, Ordering::Relaxed);
            None
        }
        Err(e) => Some(Err(e.into())),
    }
}

pub fn open_unnamed(dir: BorrowedFd<'_>) -> Option<OwnedFd> {
    rustix::fs::openat(
        dir,
        ".",
        OFlags::WRONLY | OFlags::TMPFILE | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
    .ok()
}

/// Links through `/proc/self/fd`, else `AT_EMPTY_PATH` (which needs a capability).
pub fn link_unnamed(
    fd: BorrowedFd<'_>,
    dir: BorrowedFd<'_>,
    name: &OsStr,
) -> Option<io::Result<()>> {
    let proc_path = format!("/proc/self/fd/{}", fd.as_raw_fd());
    match rustix::fs::linkat(
        rustix::fs::CWD,
        proc_path.as_str(),
        dir,
        name,
        AtFlags::SYMLINK_FOLLOW,
    ) {
        Ok(()) => Some(Ok(())),
        Err(e) if e == rustix::io::Errno::EXIST => Some(Err(e.into())),
        Err(_) => match rustix::fs::linkat(fd, "", dir, name, AtFlags::EMPTY_PATH) {
            Ok(()) => Some(Ok(())),
            Err(e) if e == rustix::io::Errno::EXIST => Some(Err(e.into())),
            Err(_) => None,
        },
    }
}

pub fn copy_xattrs(from: BorrowedFd<'_>, to: BorrowedFd<'_>) {
    let mut names = vec![0u8; 4096];
    let Ok(n) = rustix::fs::flistxattr(from, &mut names[..]) else {
        return;
    };
    for name in names[..n].split(|&b| b == 0).filter(|n| !n.is_empty()) {
        let Ok(name) =
            std::ffi::CStr::from_bytes_with_nul(&[name, &[0]].concat()).map(|c| c.to_owned())
        else {
            continue;
        };
        let mut value = vec![0u8; 64 * 1024];
        if let Ok(len) = rustix::fs::fgetxattr(from, name.as_c_str(), &mut value[..]) {
            let _ = rustix::fs::fsetxattr(
                to,
                name.as_c_str(),
                &value[..len],
                rustix::fs::XattrFlags::empty(),
            );
        }
    }
}

pub fn release_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

pub fn die_with_parent(parent: Option<u32>) -> std::io::Result<()> {
    use rustix::process::{Signal, getppid, set_parent_process_death_signal};
    set_parent_process_death_signal(Some(Signal::KILL))?;
    // The parent may have died before the line above: then the child has already been
    // handed to another (init or a subreaper), and no signal will come.
    if let Some(parent) = parent {
        let now = getppid().map(|p| p.as_raw_nonzero().get());
        if now.and_then(|p| u32::try_from(p).ok()) != Some(parent) {
            return Err(std::io::Error::other("the parent process has ended"));
        }
    }
    Ok(())
}

pub fn limit_self(memory: u64, cpu_seconds: u64) -> std::io::Result<()> {
    use rustix::process::{Resource, Rlimit, setrlimit};
    let set = |r, n: u64| {
        setrlimit(
            r,
            Rlimit {
                current: Some(n),
                maximum: Some(n),
            },
        )
    };
    set(Resource::As, memory)?;
    // The hard limit one second later: SIGXCPU first, then SIGKILL.
    setrlimit(
        Resource::Cpu,
        Rlimit {
            current: Some(cpu_seconds),
            maximum: Some(cpu_seconds + 1),
        },
    )?;
    set(Resource::Core, 0)?;
    Ok(())
}

pub fn steady_allocator() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets tuning parameters of the allocator; both are set before
    // the server starts its threads.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 * 1024);
        if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
            libc::mallopt(libc::M_ARENA_MAX, 1);
        }
    }
}

/// How coarse file timestamps can be: the kernel stamps files from its coarse clock
/// (one scheduler tick), so two writes within one tick may leave the same stamp.
pub fn stamp_tick_ns() -> i128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_getres writes one timespec it is given.
    let ok = unsafe { libc::clock_getres(libc::CLOCK_REALTIME_COARSE, &mut ts) } == 0;
    let tick = i128::from(ts.tv_sec) * 1_000_000_000 + i128::from(ts.tv_nsec);
    if ok && tick > 0 {
        // A tick's margin on top (the stamp may lag the clock by up to one).
        2 * tick
    } else {
        20_000_000
    }
}

pub fn config_dir_in_home(home: &Path) -> PathBuf {
    home.join(".config/ferret")
}

pub fn state_dir_in_home(home: &Path) -> PathBuf {
    home.join(".local/state/ferret")
}

pub fn protected_in_home(_home: &Path) -> Vec<PathBuf> {
    Vec::new()
}

/// inotify, used directly (the `inotify` crate): one watch per directory the index walk
/// entered, added by the directory handle's `/proc/self/fd` name, never by a path.
struct Inotify {
    inotify: Mutex<inotify::Inotify>,
    watches: inotify::Watches,
    dirs: Mutex<HashMap<inotify::WatchDescriptor, WatchKey>>,
}

pub fn watcher() -> Result<Box<dyn DirWatch>, String> {
    let inotify = inotify::Inotify::init().map_err(|e| format!("inotify is unavailable ({e})"))?;
    Ok(Box::new(Inotify {
        watches: inotify.watches(),
        inotify: Mutex::new(inotify),
        dirs: Mutex::new(HashMap::new()),
    }))
}

impl DirWatch for Inotify {
    fn add(&self, dir: BorrowedFd<'_>, key: WatchKey) -> Result<(), String> {
        use inotify::WatchMask;
        let mask = WatchMask::MODIFY
            | WatchMask::ATTRIB
            | WatchMask::CLOSE_WRITE
            | WatchMask::CREATE
            | WatchMask::DELETE
            | WatchMask::MOVED_FROM
            | WatchMask::MOVED_TO
            | WatchMask::DELETE_SELF
            | WatchMask::MOVE_SELF
            | WatchMask::ONLYDIR
            | WatchMask::EXCL_UNLINK;
        let name = format!("/proc/self/fd/{}", dir.as_raw_fd());
        match self.watches.clone().add(&name, mask) {
            Ok(wd) => {
                lock(&self.dirs).insert(wd, key);
                Ok(())
            }
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::NOSPC.raw_os_error()) => Err(
                "the inotify watch limit is reached (raise fs.inotify.max_user_watches)"
                    .to_string(),
            ),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(format!(
                "directories cannot be watched ({e}; is /proc mounted?)"
            )),
            Err(_) => Ok(()),
        }
    }

    fn drain(&self, sink: &mut dyn FnMut(WatchEvent)) -> Result<(), String> {
        use inotify::EventMask;
        let mut buf = [0u8; 64 * 1024];
        let mut inotify = lock(&self.inotify);
        loop {
            let events = match inotify.read_events(&mut buf) {
                Ok(ev) => ev,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("the watcher failed ({e})")),
            };
            let mut any = false;
            for ev in events {
                any = true;
                let mask = ev.mask;
                if mask.contains(EventMask::Q_OVERFLOW) {
                    sink(WatchEvent::Lost);
                    continue;
                }
                let mut dirs = lock(&self.dirs);
                if mask.contains(EventMask::IGNORED) {
                    dirs.remove(&ev.wd);
                    continue;
                }
                let Some(key) = dirs.get(&ev.wd).cloned() else {
                    continue;
                };
                drop(dirs);
                let structural = EventMask::CREATE
                    | EventMask::DELETE
                    | EventMask::MOVED_FROM
                    | EventMask::MOVED_TO
                    | EventMask::DELETE_SELF
                    | EventMask::MOVE_SELF;
                let Some(name) = ev.name else {
                    sink(WatchEvent::Itself(key));
                    continue;
                };
                if mask.intersects(structural) || mask.contains(EventMask::ISDIR) {
                    sink(WatchEvent::Names(key, name.to_os_string()));
                } else {
                    sink(WatchEvent::Written(key, name.to_os_string()));
                }
            }
            if !any {
                return Ok(());
            }
        }
    }

    fn wait(&self, timeout: Duration) {
        let fd = {
            let inotify = lock(&self.inotify);
            inotify.as_fd().try_clone_to_owned()
        };
        let Ok(fd) = fd else {
            std::thread::sleep(timeout);
            return;
        };
        let mut fds = [rustix::event::PollFd::new(
            &fd,
            rustix::event::PollFlags::IN,
        )];
        let timeout = rustix::time::Timespec {
            tv_sec: timeout.as_secs() as _,
            tv_nsec: timeout.subsec_nanos() as _,
        };
        let _ = rustix::event::poll(&mut fds, Some(&timeout));
    }
}

//! The portable code paths: what every POSIX system has, used where the kernel offers
//! nothing better and on Linux under `FERRET_PORTABLE=1` (so CI runs them).

use super::{DirWatch, Open, WatchEvent, WatchKey};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, Mode, OFlags};
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::io;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

pub const RESOLVER: &str = "component walk (openat O_NOFOLLOW per name from the root handle)";
pub const WATCHER: &str =
    "polling (each watched directory re-read through its handle at every search; at most 512)";

/// Opens `names` beneath `dir`, one `openat(O_NOFOLLOW)` per name from the handle
/// before it: a symbolic link anywhere fails the open (`ELOOP`, or `ENOTDIR` for a
/// directory expected), `..` never reaches here, so nothing outside `dir` is reached.
pub fn open_beneath(dir: BorrowedFd<'_>, names: &[&OsStr], how: Open) -> io::Result<OwnedFd> {
    let dirs = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
    let Some((last, parents)) = names.split_last() else {
        return Ok(rustix::fs::openat(
            dir,
            ".",
            final_flags(how, dirs),
            Mode::empty(),
        )?);
    };
    let mut held: Option<OwnedFd> = None;
    for name in parents {
        let at = held.as_ref().map_or(dir, |f| f.as_fd());
        held = Some(rustix::fs::openat(at, *name, dirs, Mode::empty())?);
    }
    let at = held.as_ref().map_or(dir, |f| f.as_fd());
    let fd = rustix::fs::openat(at, *last, final_flags(how, dirs), Mode::empty())?;
    super::refuse_link(fd, how)
}

fn final_flags(how: Open, dirs: OFlags) -> OFlags {
    match how {
        Open::Dir => dirs,
        Open::Read => {
            OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC | OFlags::NOFOLLOW
        }
        Open::Probe => probe_flags(),
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn probe_flags() -> OFlags {
    OFlags::PATH | OFlags::CLOEXEC | OFlags::NOFOLLOW
}

/// No `O_PATH` here: a read-only non-blocking open stands in (it needs read permission).
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn probe_flags() -> OFlags {
    OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC | OFlags::NOFOLLOW
}

/// Past this many watched directories the poll watcher gives up (it holds a handle for
/// each, and re-reads them all at every search): searches then walk.
pub const MAX_POLLED_DIRS: usize = 512;

/// [`MAX_POLLED_DIRS`], or a quarter of the process's descriptor limit when that is
/// lower (macOS starts processes with 256): the handles held must leave the tools room.
fn max_polled_dirs() -> usize {
    let soft = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    soft.map_or(MAX_POLLED_DIRS, |n| {
        MAX_POLLED_DIRS.min(usize::try_from(n / 4).unwrap_or(MAX_POLLED_DIRS))
    })
}

/// A file's stamp as the poll watcher compares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Snap {
    ino: u64,
    mode: u32,
    uid: u32,
    gid: u32,
    size: i64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Snap {
    #[allow(clippy::unnecessary_cast)]
    fn of(st: &rustix::fs::Stat) -> Snap {
        Snap {
            ino: st.st_ino as u64,
            mode: st.st_mode as u32,
            uid: st.st_uid as u32,
            gid: st.st_gid as u32,
            size: st.st_size as i64,
            mtime: (st.st_mtime as i64, st.st_mtime_nsec as i64),
            ctime: (st.st_ctime as i64, st.st_ctime_nsec as i64),
        }
    }

    /// The later of its mtime and ctime, in nanoseconds since the epoch.
    fn stamp_ns(&self) -> i128 {
        let ns = |(s, n): (i64, i64)| i128::from(s) * 1_000_000_000 + i128::from(n);
        ns(self.mtime).max(ns(self.ctime))
    }

    fn is_dir(&self) -> bool {
        rustix::fs::FileType::from_raw_mode(self.mode as _) == rustix::fs::FileType::Directory
    }

    /// Stamped so shortly before `seen` (when it was looked at, in nanoseconds since
    /// the epoch) that a later change in the same clock tick could leave the stamp as it
    /// is: file times come from a coarse clock ([`super::stamp_tick_ns`]).
    fn recent(&self, seen: i128) -> bool {
        let ns = |(s, n): (i64, i64)| i128::from(s) * 1_000_000_000 + i128::from(n);
        let tick = super::stamp_tick_ns();
        ns(self.mtime) + tick > seen || ns(self.ctime) + tick > seen
    }
}

struct Polled {
    fd: OwnedFd,
    key: WatchKey,
    names: HashMap<OsString, Snap>,
    /// When `names` was taken (nanoseconds since the epoch, read before listing).
    seen: i128,
}

/// The portable watcher: no kernel notification at all. Each directory the index walk
/// entered is held open, and every drain (every search, and twice a second in the
/// background) re-reads its names and their stamps through that handle and reports
/// the differences as the same hints inotify gives: a name that came or went (or
/// changed type, inode or a directory's permissions) makes its directory's subtree be
/// walked again; a file whose size, mtime or ctime moved is read again. A file changed
/// within a clock tick of a look would not show a second change in the same tick: the
/// look waits the tick out and looks again (Linux: a few milliseconds), or, where that
/// would take long (a filesystem stamping to the second), reports the file written again
/// at the next look. Since a search drains
/// first, a change made before it began is seen by it: the index's promise holds with no
/// event ever lost (there is no queue to overflow).
pub struct PollWatch {
    dirs: Mutex<Vec<Polled>>,
    draining: Mutex<()>,
}

fn now_ns() -> i128 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The names in directory `fd` and their stamps (not following links); `None` when it
/// cannot be read (gone, or no longer readable).
fn snapshot(fd: BorrowedFd<'_>) -> Option<HashMap<OsString, Snap>> {
    // A handle of its own to read from (the one held may be an `O_PATH` handle, which
    // cannot list, and a shared one would share its position).
    let listing = rustix::fs::openat(
        fd,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::empty(),
    )
    .ok()?;
    let mut dir = rustix::fs::Dir::new(listing).ok()?;
    let mut out = HashMap::new();
    while let Some(e) = dir.read() {
        let e = e.ok()?;
        let name = e.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        #[cfg(unix)]
        let name = {
            use std::os::unix::ffi::OsStrExt;
            OsStr::from_bytes(name).to_os_string()
        };
        if let Ok(st) = rustix::fs::statat(fd, &name, AtFlags::SYMLINK_NOFOLLOW) {
            out.insert(name, Snap::of(&st));
        }
    }
    Some(out)
}

/// Past this wait for timestamps to settle a look does not wait, and a file stamped
/// too recently is reported written again at the next look instead.
const MAX_SETTLE_NS: i128 = 50_000_000;

/// A snapshot of directory `fd` that later changes can be told from: when a file in it
/// was stamped less than a clock tick before the look, a second write in the same tick
/// would leave the same stamp, so the look waits out the tick (when short) and looks
/// again. Returns the snapshot and when it was taken.
fn settled(fd: BorrowedFd<'_>) -> Option<(HashMap<OsString, Snap>, i128)> {
    let tick = super::stamp_tick_ns();
    let mut seen = now_ns();
    let mut names = snapshot(fd)?;
    for _ in 0..2 {
        let latest = names
            .values()
            .filter(|s| !s.is_dir())
            .map(Snap::stamp_ns)
            .max()
            .unwrap_or(0);
        let wait = latest + tick - seen;
        if wait <= 0 || wait > MAX_SETTLE_NS {
            break;
        }
        std::thread::sleep(Duration::from_nanos(wait as u64));
        seen = now_ns();
        names = snapshot(fd)?;
    }
    Some((names, seen))
}

/// A poll watcher; see [`PollWatch`].
pub fn poll_watcher() -> Box<dyn DirWatch> {
    Box::new(PollWatch {
        dirs: Mutex::new(Vec::new()),
        draining: Mutex::new(()),
    })
}

impl DirWatch for PollWatch {
    fn add(&self, dir: BorrowedFd<'_>, key: WatchKey) -> Result<(), String> {
        let fd = dir
            .try_clone_to_owned()
            .map_err(|e| format!("directories cannot be watched ({e})"))?;
        let Some((names, seen)) = settled(fd.as_fd()) else {
            return Ok(());
        };
        let mut dirs = lock(&self.dirs);
        if let Some(p) = dirs.iter_mut().find(|p| p.key == key) {
            *p = Polled {
                fd,
                key,
                names,
                seen,
            };
            return Ok(());
        }
        let max = max_polled_dirs();
        if dirs.len() >= max {
            return Err(format!(
                "the polling watcher keeps at most {max} directories (a quarter of the open-file limit, 512 at most)"
            ));
        }
        dirs.push(Polled {
            fd,
            key,
            names,
            seen,
        });
        Ok(())
    }

    fn drain(&self, sink: &mut dyn FnMut(WatchEvent)) -> Result<(), String> {
        // One drain at a time, from the look to the last event handed over: a second
        // search draining meanwhile must not find nothing new and answer before the
        // first has applied what it found (as inotify's queue is read under one lock).
        let _one = lock(&self.draining);
        // Events are handed over once the handles' lock is let go: the index may add a
        // directory from a thread that holds its own lock.
        let mut events = Vec::new();
        self.look(&mut |e| events.push(e));
        for e in events {
            sink(e);
        }
        Ok(())
    }

    fn wait(&self, timeout: Duration) {
        std::thread::sleep(timeout);
    }
}

impl PollWatch {
    fn look(&self, sink: &mut dyn FnMut(WatchEvent)) {
        let mut dirs = lock(&self.dirs);
        dirs.retain_mut(|p| {
            let gone = rustix::fs::fstat(&p.fd).map_or(true, |st| st.st_nlink == 0);
            let now = if gone { None } else { settled(p.fd.as_fd()) };
            let Some((now, seen)) = now else {
                sink(WatchEvent::Itself(p.key.clone()));
                return false;
            };
            for (name, old) in &p.names {
                match now.get(name) {
                    None => sink(WatchEvent::Names(p.key.clone(), name.clone())),
                    Some(new) if new.ino != old.ino || new.is_dir() != old.is_dir() => {
                        sink(WatchEvent::Names(p.key.clone(), name.clone()))
                    }
                    Some(new) if new.is_dir() => {
                        if (new.mode, new.uid, new.gid) != (old.mode, old.uid, old.gid) {
                            sink(WatchEvent::Names(p.key.clone(), name.clone()))
                        }
                    }
                    Some(new) => {
                        if new != old || old.recent(p.seen) {
                            sink(WatchEvent::Written(p.key.clone(), name.clone()))
                        }
                    }
                }
            }
            for name in now.keys() {
                if !p.names.contains_key(name) {
                    sink(WatchEvent::Names(p.key.clone(), name.clone()));
                }
            }
            p.names = now;
            p.seen = seen;
            true
        });
    }
}

/// What `ferret config` calls the trash under `FERRET_PORTABLE=1`.
pub const TRASH: &str = "fake OS trash (FERRET_PORTABLE): staged by handle in the state directory, then moved into \
$XDG_DATA_HOME/ferret-os-trash (else ~/.local/share/ferret-os-trash); else ferret's own";

/// The name of the directory standing for the user's trash in portable mode.
pub const FAKE_TRASH_NAME: &str = "ferret-os-trash";

/// The fake OS trash of `FERRET_PORTABLE=1`: a directory standing for the user's trash,
/// so that the staging, journalling and restoring macOS's Trash goes through run (and
/// are tested) on Linux. Like the macOS Trash it takes a staged path, keeps the item's
/// name, and resolves a clash its own way (`name 2`, `name 3`, … before the
/// extension), and says where the item ended up.
pub struct FakeTrash {
    dir: std::path::PathBuf,
}

impl FakeTrash {
    pub fn from_env(env: super::Env<'_>) -> Option<FakeTrash> {
        super::fake_os_trash_dir(env).map(|dir| FakeTrash { dir })
    }
}

/// `name` with ` n` put before its extension (`a.txt` → `a 2.txt`), as Finder does.
fn numbered(name: &str, n: u32) -> String {
    match name.rfind('.') {
        Some(i) if i > 0 => format!("{} {n}{}", &name[..i], &name[i..]),
        _ => format!("{name} {n}"),
    }
}

impl super::OsTrash for FakeTrash {
    fn name(&self) -> &'static str {
        "fake OS trash"
    }

    fn dir(&self) -> Option<std::path::PathBuf> {
        Some(self.dir.clone())
    }

    fn put(&self, staged: &std::path::Path) -> io::Result<std::path::PathBuf> {
        let bad = || io::Error::new(io::ErrorKind::InvalidInput, "not a staged path");
        let name = staged.file_name().and_then(OsStr::to_str).ok_or_else(bad)?;
        let parent = staged.parent().ok_or_else(bad)?;
        std::fs::create_dir_all(&self.dir)?;
        let open = |p: &std::path::Path| {
            rustix::fs::open(
                p,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )
        };
        let trash = open(&self.dir)?;
        let _ = rustix::fs::fchmod(&trash, Mode::from_raw_mode(0o700));
        let from = open(parent)?;
        for n in 1..10_000u32 {
            let to = if n == 1 {
                name.to_string()
            } else {
                numbered(name, n)
            };
            match rustix::fs::renameat_with(
                &from,
                name,
                &trash,
                to.as_str(),
                rustix::fs::RenameFlags::NOREPLACE,
            ) {
                Ok(()) => return Ok(self.dir.join(to)),
                Err(e) if e == rustix::io::Errno::EXIST => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "no free name in the fake OS trash",
        ))
    }
}

/// Systems with no implementation of their own: the portable paths throughout.
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
pub mod other {
    use super::super::{DirWatch, Open};
    use rustix::fd::{BorrowedFd, OwnedFd};
    use std::ffi::OsStr;
    use std::io;
    use std::path::{Path, PathBuf};

    pub const RESOLVER: &str = super::RESOLVER;
    pub const WATCHER: &str = super::WATCHER;
    pub const NOTIFY_WATCHER: bool = false;
    pub const TRASH: &str = "ferret's own (in the state directory)";
    pub const FREEDESKTOP_TRASH: bool = true;
    pub fn os_trash() -> Option<Box<dyn super::super::OsTrash>> {
        None
    }
    pub const SKIPPED_NAMES: &[&str] = &[];

    pub fn open_beneath(
        _: BorrowedFd<'_>,
        _: &Path,
        _: &[&OsStr],
        _: Open,
    ) -> Option<io::Result<OwnedFd>> {
        None
    }
    pub fn open_unnamed(_: BorrowedFd<'_>) -> Option<OwnedFd> {
        None
    }
    pub fn link_unnamed(_: BorrowedFd<'_>, _: BorrowedFd<'_>, _: &OsStr) -> Option<io::Result<()>> {
        None
    }
    pub fn copy_xattrs(_: BorrowedFd<'_>, _: BorrowedFd<'_>) {}
    pub fn release_memory() {}
    pub fn steady_allocator() {}
    pub fn limit_self(_memory: u64, _cpu_seconds: u64) -> std::io::Result<()> {
        Ok(())
    }
    pub fn stamp_tick_ns() -> i128 {
        1_000_000_000
    }
    pub fn config_dir_in_home(home: &Path) -> PathBuf {
        home.join(".config/ferret")
    }
    pub fn state_dir_in_home(home: &Path) -> PathBuf {
        home.join(".local/state/ferret")
    }
    pub fn protected_in_home(_: &Path) -> Vec<PathBuf> {
        Vec::new()
    }
    pub fn watcher() -> Result<Box<dyn DirWatch>, String> {
        Ok(super::poll_watcher())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(w: &dyn DirWatch) -> Vec<WatchEvent> {
        let mut v = Vec::new();
        w.drain(&mut |e| v.push(e)).unwrap();
        v
    }

    #[test]
    fn the_poll_watcher_reports_names_writes_and_a_vanished_directory() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir(t.path().join("d")).unwrap();
        std::fs::write(t.path().join("d/old"), "1").unwrap();
        let root = std::fs::File::open(t.path()).unwrap();
        let d = open_beneath(root.as_fd(), &[OsStr::new("d")], Open::Probe).unwrap();
        let w = poll_watcher();
        let key: WatchKey = (0, "d".into());
        w.add(d.as_fd(), key.clone()).unwrap();
        drop(d);
        std::fs::write(t.path().join("d/new"), "x").unwrap();
        let ev = events(&*w);
        assert!(
            ev.contains(&WatchEvent::Names(key.clone(), "new".into())),
            "{ev:?}"
        );
        std::fs::write(t.path().join("d/old"), "22").unwrap();
        let ev = events(&*w);
        assert!(
            ev.contains(&WatchEvent::Written(key.clone(), "old".into())),
            "{ev:?}"
        );
        std::fs::remove_dir_all(t.path().join("d")).unwrap();
        let ev = events(&*w);
        assert!(ev.contains(&WatchEvent::Itself(key.clone())), "{ev:?}");
    }
}

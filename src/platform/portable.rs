//! The portable code paths: what every POSIX system has, used where the kernel offers
//! nothing better and on Linux under `FERRET_PORTABLE=1` (so CI runs them).

use super::Open;
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{Mode, OFlags};
use std::ffi::OsStr;
use std::io;

pub const RESOLVER: &str = "component walk (openat O_NOFOLLOW per name from the root handle)";
pub const WATCHER: &str = "none (searches walk; the index spares reads by stamp)";

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
    pub const TRASH: &str = "ferret's own (in the state directory)";
    pub const FREEDESKTOP_TRASH: bool = true;
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
        Err("no file watcher on this platform".to_string())
    }
}

//! Platform code: the one kernel facility the sandbox uses where it exists and does
//! without elsewhere. Linux's `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` opens a
//! path beneath a directory in one syscall, refusing any symlink on the way.

use cap_std::fs::Dir;
use rustix::fd::OwnedFd;
use std::io;
use std::path::Path;

/// Opens `rel` beneath `dir` with no symlink anywhere on the way, for reading (or as an
/// `O_PATH` handle). `None` where the kernel has no `openat2`: the caller falls back.
pub fn open_beneath_no_links(
    dir: &Dir,
    rel: &Path,
    path_only: bool,
) -> Option<io::Result<std::fs::File>> {
    use rustix::fs::OFlags;
    // openat2 refuses O_PATH with any flag but O_CLOEXEC, O_DIRECTORY, O_NOFOLLOW.
    let mode = if path_only {
        OFlags::PATH
    } else {
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY
    };
    beneath(dir, rel, mode).map(|r| r.map(std::fs::File::from))
}

/// Opens directory `rel` beneath `dir` for listing, with no symlink anywhere on the way.
/// `None` where the kernel has no `openat2`: the caller falls back.
pub fn open_dir_beneath_no_links(dir: &Dir, rel: &Path) -> Option<io::Result<OwnedFd>> {
    use rustix::fs::OFlags;
    let rel = if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    };
    beneath(dir, rel, OFlags::RDONLY | OFlags::DIRECTORY)
}

/// `openat2(dir, rel, mode | O_CLOEXEC | O_NOFOLLOW, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS
/// | RESOLVE_NO_MAGICLINKS)`; `None` once the kernel has said it has no `openat2`.
#[cfg(target_os = "linux")]
fn beneath(dir: &Dir, rel: &Path, mode: rustix::fs::OFlags) -> Option<io::Result<OwnedFd>> {
    use rustix::fs::{Mode, OFlags, ResolveFlags, openat2};
    use std::sync::atomic::{AtomicBool, Ordering};
    static NO_OPENAT2: AtomicBool = AtomicBool::new(false);
    if NO_OPENAT2.load(Ordering::Relaxed) {
        return None;
    }
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

#[cfg(not(target_os = "linux"))]
fn beneath(_dir: &Dir, _rel: &Path, _mode: rustix::fs::OFlags) -> Option<io::Result<OwnedFd>> {
    None
}

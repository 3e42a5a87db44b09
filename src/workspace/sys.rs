//! Platform code: the one kernel facility the sandbox uses where it exists and does
//! without elsewhere. Linux's `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` opens a
//! path beneath a directory in one syscall, refusing any symlink on the way.

use cap_std::fs::Dir;
use std::io;
use std::path::Path;

/// Opens `rel` beneath `dir` with no symlink anywhere on the way, for reading (or as an
/// `O_PATH` handle). `None` where the kernel has no `openat2`: the caller falls back.
#[cfg(target_os = "linux")]
pub fn open_beneath_no_links(
    dir: &Dir,
    rel: &Path,
    path_only: bool,
) -> Option<io::Result<std::fs::File>> {
    use rustix::fs::{Mode, OFlags, ResolveFlags, openat2};
    use std::sync::atomic::{AtomicBool, Ordering};
    static NO_OPENAT2: AtomicBool = AtomicBool::new(false);
    if NO_OPENAT2.load(Ordering::Relaxed) {
        return None;
    }
    // openat2 refuses O_PATH with any flag but O_CLOEXEC, O_DIRECTORY, O_NOFOLLOW.
    let mode = if path_only {
        OFlags::PATH
    } else {
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY
    };
    match openat2(
        dir,
        rel,
        mode | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    ) {
        Ok(fd) => Some(Ok(std::fs::File::from(fd))),
        Err(rustix::io::Errno::NOSYS) => {
            NO_OPENAT2.store(true, Ordering::Relaxed);
            None
        }
        Err(e) => Some(Err(e.into())),
    }
}

#[cfg(not(target_os = "linux"))]
pub fn open_beneath_no_links(
    _dir: &Dir,
    _rel: &Path,
    _path_only: bool,
) -> Option<io::Result<std::fs::File>> {
    None
}

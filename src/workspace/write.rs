//! Changing files, only ever through directory handles from [`super::resolve`].
//!
//! A file is replaced in three steps that the change journal brackets (see
//! `history`): [`stage`] writes the new content to a temporary file with a name the
//! journal recorded beforehand, [`commit`] renames it over the file, [`discard`] removes
//! it. A crash leaves the old file or the new one, never a mix, and the named temporary
//! file is found and removed by recovery on the next start.
//!
//! The new file keeps the old one's owner and group where the process may set them, its
//! permission bits without setuid/setgid (the kernel clears them on a write, and a
//! content change must not keep a privilege the new content never had), and its
//! extended attributes (best effort).

use cap_std::fs::Dir;
use rustix::fs::{AtFlags, FlockOperation, Mode, OFlags, RenameFlags};
use std::ffi::OsStr;
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};

/// Whether `name` is one of ferret's temporary files (a name no tool result shows).
pub fn is_temp_name(name: &OsStr) -> bool {
    let n = name.as_encoded_bytes();
    n.starts_with(b".ferret-") && n.ends_with(b".tmp")
}

/// Writes `content` to a new file `temp` in `dir` (which must not exist), shaped like
/// `like` (owner, group, mode less setuid/setgid, xattrs), and makes it durable.
///
/// Where the filesystem allows (Linux `O_TMPFILE`), the content is written to an
/// unnamed file that gets the name `temp` only once complete and synced: whatever
/// stands at a temporary name of ferret's holds exactly the content staged (a process
/// killed mid-write leaves nothing), so recovery can tell ferret's temp from anything
/// else by its hash alone. Elsewhere it is written under its name directly.
pub fn stage(
    dir: &Dir,
    temp: &OsStr,
    content: &[u8],
    like: Option<std::os::fd::BorrowedFd<'_>>,
) -> io::Result<()> {
    if let Some(done) = stage_unnamed(dir, temp, content, like) {
        return done;
    }
    if let Some(done) = stage_via_staging(dir, temp, content, like) {
        return done;
    }
    stage_named(dir, temp, content, like)
}

/// [`stage`] through an unnamed file (see [`crate::platform::open_unnamed`]); `None`
/// when the platform, the filesystem (or the lack of `/proc`) does not allow it and
/// nothing was made.
fn stage_unnamed(
    dir: &Dir,
    temp: &OsStr,
    content: &[u8],
    like: Option<std::os::fd::BorrowedFd<'_>>,
) -> Option<io::Result<()>> {
    let fd: OwnedFd = crate::platform::open_unnamed(dir.as_fd())?;
    let mut f = std::fs::File::from(fd);
    let written = (|| {
        f.write_all(content)?;
        if let Some(like) = like {
            copy_shape(like, f.as_fd())?;
        } else {
            rustix::fs::fchmod(&f, Mode::from_raw_mode(0o644))?;
        }
        f.sync_all()
    })();
    if let Err(e) = written {
        return Some(Err(e));
    }
    crate::platform::link_unnamed(f.as_fd(), dir.as_fd(), temp)
}

/// Staging areas registered by the histories of this process (see [`add_staging`]).
static STAGING: std::sync::Mutex<Vec<std::path::PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Registers a ferret-private directory (in a state directory, this process's own) where
/// [`stage`] writes content first where there is no unnamed file (macOS, portable mode):
/// the file is complete and synced there, then renamed (never replacing) to its
/// temporary name beside its target, so a process killed mid-write leaves a partial file
/// only in the staging area, never at a name in the workspace.
pub fn add_staging(dir: &std::path::Path) {
    let mut s = STAGING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !s.iter().any(|d| d == dir) {
        s.push(dir.to_path_buf());
    }
}

/// Forgets a staging area (its history's process is ending).
pub fn remove_staging(dir: &std::path::Path) {
    let mut s = STAGING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    s.retain(|d| d != dir);
}

/// [`stage`] through a registered staging area on the same filesystem as `dir`; `None`
/// when there is none (nothing was made).
fn stage_via_staging(
    dir: &Dir,
    temp: &OsStr,
    content: &[u8],
    like: Option<std::os::fd::BorrowedFd<'_>>,
) -> Option<io::Result<()>> {
    let dev = identity(dir).ok()?.0;
    let areas = STAGING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    let area = areas.iter().find_map(|p| {
        let d = Dir::open_ambient_dir(p, cap_std::ambient_authority()).ok()?;
        (identity(&d).ok()?.0 == dev).then_some(d)
    })?;
    let scratch = OsStr::new(temp);
    // Anything wrong on the staging side (the area gone: another history of this
    // process ended; the disk full there) leaves the caller to stage in place.
    stage_named(&area, scratch, content, like).ok()?;
    match move_noreplace(&area, scratch, dir, temp) {
        Ok(()) => Some(Ok(())),
        Err(e) => {
            discard(&area, scratch);
            // The temporary name taken: an error, as staging in place would meet. Else
            // (another filesystem after all: a mount inside the root; the area gone)
            // the caller stages in place.
            (e.kind() == io::ErrorKind::AlreadyExists).then_some(Err(e))
        }
    }
}

fn stage_named(
    dir: &Dir,
    temp: &OsStr,
    content: &[u8],
    like: Option<std::os::fd::BorrowedFd<'_>>,
) -> io::Result<()> {
    let fd: OwnedFd = rustix::fs::openat(
        dir,
        temp,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    let result = (|| {
        let mut f = std::fs::File::from(fd);
        f.write_all(content)?;
        if let Some(like) = like {
            copy_shape(like, f.as_fd())?;
        } else {
            rustix::fs::fchmod(&f, Mode::from_raw_mode(0o644))?;
        }
        f.sync_all()
    })();
    if result.is_err() {
        let _ = rustix::fs::unlinkat(dir, temp, AtFlags::empty());
    }
    result
}

fn copy_shape(from: std::os::fd::BorrowedFd, to: std::os::fd::BorrowedFd) -> io::Result<()> {
    let st = rustix::fs::fstat(from)?;
    // Owner first: fchown clears setuid/setgid itself, and chmod afterwards sets the bits.
    let owner = rustix::fs::fchown(
        to,
        Some(rustix::fs::Uid::from_raw(st.st_uid)),
        Some(rustix::fs::Gid::from_raw(st.st_gid)),
    );
    if owner.is_err() {
        // Not permitted to give the file away (not root): keep the group at least.
        let _ = rustix::fs::fchown(to, None, Some(rustix::fs::Gid::from_raw(st.st_gid)));
    }
    let mode = (st.st_mode as u32) & 0o1777; // no setuid (0o4000), no setgid (0o2000)
    rustix::fs::fchmod(to, Mode::from_raw_mode(mode as _))?;
    copy_xattrs(from, to);
    Ok(())
}

fn copy_xattrs(from: std::os::fd::BorrowedFd, to: std::os::fd::BorrowedFd) {
    crate::platform::copy_xattrs(from, to)
}

/// Renames `temp` over `name` in `dir`, then makes the directory entry durable (best
/// effort: the change stands once the rename is done).
pub fn commit(dir: &Dir, temp: &OsStr, name: &OsStr) -> io::Result<()> {
    rustix::fs::renameat(dir, temp, dir, name)?;
    sync_dir(dir);
    Ok(())
}

/// Gives the temporary file `temp` in `dir` (one [`stage`] just made) the permission
/// bits `mode` (no setuid or setgid), through a handle: a link put at its name is not
/// followed.
pub fn set_mode(dir: &Dir, temp: &OsStr, mode: u32) -> io::Result<()> {
    let f = rustix::fs::openat(
        dir,
        temp,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    rustix::fs::fchmod(&f, Mode::from_raw_mode((mode & 0o1777) as _))?;
    Ok(())
}

/// Removes a temporary file, if it is there.
pub fn discard(dir: &Dir, temp: &OsStr) {
    let _ = rustix::fs::unlinkat(dir, temp, AtFlags::empty());
}

/// fsyncs a directory (best effort).
pub fn sync_dir(dir: &Dir) {
    if let Ok(fd) = rustix::fs::openat(
        dir,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) && let Err(e) = rustix::fs::fsync(&fd)
    {
        tracing::warn!(error = %e, "could not fsync a directory after a change");
    }
}

/// Moves `from_name` in `from` to `to_name` in `to`, refusing to replace anything at the
/// destination (`renameat2(RENAME_NOREPLACE)`; elsewhere a check then a rename).
pub fn move_noreplace(from: &Dir, from_name: &OsStr, to: &Dir, to_name: &OsStr) -> io::Result<()> {
    match rustix::fs::renameat_with(from, from_name, to, to_name, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        // INVAL/NOSYS: Linux without it; NOTSUP: a macOS volume without RENAME_EXCL.
        Err(e)
            if e == rustix::io::Errno::INVAL
                || e == rustix::io::Errno::NOSYS
                || e == rustix::io::Errno::NOTSUP =>
        {
            // A filesystem without RENAME_NOREPLACE: check, then rename.
            match rustix::fs::statat(to, to_name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(_) => Err(io::Error::from(io::ErrorKind::AlreadyExists)),
                Err(_) => Ok(rustix::fs::renameat(from, from_name, to, to_name)?),
            }
        }
        Err(e) => Err(e.into()),
    }
}

/// The device and inode of what stands at `name` in `dir` (not following a link).
pub fn identity_at(dir: &Dir, name: &OsStr) -> io::Result<(u64, u64)> {
    let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
    Ok(crate::platform::file_id(&st))
}

/// The device and inode of an open file.
pub fn identity(fd: &impl AsFd) -> io::Result<(u64, u64)> {
    let st = rustix::fs::fstat(fd)?;
    Ok(crate::platform::file_id(&st))
}

/// Takes an exclusive `flock` on an open file, waiting up to `wait`. `Ok(false)` when it
/// stayed held by someone else that long.
pub fn lock(fd: &impl AsFd, wait: std::time::Duration) -> io::Result<bool> {
    let until = std::time::Instant::now() + wait;
    loop {
        match rustix::fs::flock(fd, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(true),
            Err(e) if e == rustix::io::Errno::WOULDBLOCK => {
                if std::time::Instant::now() >= until {
                    return Ok(false);
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

//! Opening what lives in the state directory as what it must be.
//!
//! The state directory may sit where another user of the machine can place things
//! before ferret first makes it (`$TMPDIR/ferret` without `HOME`), or be reached by a
//! workspace that was pointed at it. At every name ferret opens there, something else
//! may stand: a FIFO (an ordinary open blocks forever), a symbolic link (a write lands
//! elsewhere, a read shows a secret), a directory, a huge file. So every file is opened
//! with `O_NOFOLLOW | O_NONBLOCK` (blocking is cleared once it is known to be a regular
//! file), and refused unless it is a regular file; every directory is made with mode
//! 0700 and used only if it is a real directory (not a link), and the state directory
//! itself only if this user owns it.

use crate::error::{ErrorCode, ToolError};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

/// The journal is read whole by a new process: past this it is refused rather than
/// read (about a million changes; ordinary use stays far below).
pub const JOURNAL_MAX_BYTES: u64 = 1 << 30;

/// A backup is read back only up to this (ferret backs up the files it edits, far
/// smaller): a huge file put at a backup's name is refused, not read into memory.
pub const BACKUP_MAX_BYTES: u64 = 1 << 30;

/// What to do about a state file that is not what it must be.
pub const HINT: &str = "ferret's state directory holds something it did not put there: move that name aside \
     (or choose another state directory with --state-dir / FERRET_STATE_DIR); ferret never follows a link, \
     reads a FIFO or writes a directory there";

/// Opens `path` with `opts`, never following a link at its last name and never blocking
/// on a FIFO or device, and only if it is a regular file. The file returned blocks as
/// usual.
pub fn open_regular(path: &Path, opts: &mut OpenOptions) -> std::io::Result<File> {
    opts.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC);
    let file = opts.open(path).map_err(|e| {
        // O_NOFOLLOW on a link: ELOOP, which says nothing to a person.
        if e.raw_os_error() == Some(libc::ELOOP) {
            // No path in it: callers say which file, and errors reach the agent.
            std::io::Error::other("it is a symbolic link, not a file ferret wrote")
        } else {
            e
        }
    })?;
    let md = file.metadata()?;
    if !md.file_type().is_file() {
        return Err(std::io::Error::other("it is not a regular file"));
    }
    let flags = rustix::fs::fcntl_getfl(&file)?;
    rustix::fs::fcntl_setfl(&file, flags - rustix::fs::OFlags::NONBLOCK)?;
    Ok(file)
}

/// Makes the directory `path` (mode 0700) if it is not there, and checks it is a real
/// directory: not a link, not a file.
pub fn ensure_dir(path: &Path) -> std::io::Result<()> {
    match std::fs::DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    is_real_dir(path)
}

/// Whether `path` is a directory itself (a link to one is not).
pub fn is_real_dir(path: &Path) -> std::io::Result<()> {
    let md = std::fs::symlink_metadata(path)?;
    if md.file_type().is_dir() {
        Ok(())
    } else if md.file_type().is_symlink() {
        // No path in these: the callers name the place (and the agent may read them).
        Err(std::io::Error::other(
            "it is a symbolic link, not a directory ferret made",
        ))
    } else {
        Err(std::io::Error::other("it is not a directory"))
    }
}

/// Whether the state directory `path` is a real directory this user owns, in a folder
/// this user (or root) owns: one another user made (or can replace) would let them read
/// the backups or forge the journal.
pub fn check_state_dir(path: &Path) -> std::io::Result<()> {
    is_real_dir(path)?;
    let md = std::fs::symlink_metadata(path)?;
    let me = rustix::process::geteuid().as_raw();
    if md.uid() != me {
        return Err(std::io::Error::other(format!(
            "{} belongs to another user (uid {}), not to this one (uid {me})",
            path.display(),
            md.uid()
        )));
    }
    // The folder holding it must be this user's or root's: the owner of the folder can
    // rename the state directory away and put their own in its place.
    if let Some(parent) = path.parent() {
        let pmd = std::fs::metadata(parent)?;
        if pmd.uid() != me && pmd.uid() != 0 {
            return Err(std::io::Error::other(format!(
                "{} is in {}, which belongs to another user (uid {}): they could replace it",
                path.display(),
                parent.display(),
                pmd.uid()
            )));
        }
    }
    Ok(())
}

/// Reads a backup the journal names: a regular file only, never followed, never a
/// FIFO.
pub fn read_backup(path: &Path) -> Result<Vec<u8>, ToolError> {
    use std::io::Read;
    let err = |e: std::io::Error| {
        tracing::warn!(path = %path.display(), error = %e, "cannot read a backup");
        ToolError::new(
            ErrorCode::IoError,
            format!("cannot read the change's backup in the state directory: {e}"),
        )
        .with_hint(HINT)
    };
    let f = open_regular(path, OpenOptions::new().read(true)).map_err(err)?;
    let size = f.metadata().map_err(err)?.len();
    if size > BACKUP_MAX_BYTES {
        return Err(err(std::io::Error::other(format!(
            "it is {size} bytes, over the {BACKUP_MAX_BYTES} ferret reads back"
        ))));
    }
    let mut out = Vec::new();
    f.take(BACKUP_MAX_BYTES)
        .read_to_end(&mut out)
        .map_err(err)?;
    Ok(out)
}

/// The error for a state file that cannot be used: names the file, says what to do.
pub fn state_file_err(what: &str, path: &Path, e: &std::io::Error) -> ToolError {
    // The path goes to the log (stderr, the person's), not into the answer: the agent
    // reads it, and a host path (`/home/<user>/...`) is not its to know (round 19).
    tracing::warn!(path = %path.display(), error = %e, "{what} in the state directory");
    ToolError::new(
        ErrorCode::IoError,
        format!("{what} in the state directory: {e}"),
    )
    .with_hint(HINT)
}

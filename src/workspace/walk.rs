//! What the search engine's walker needs: a directory opened beneath its root with no
//! symlink on the way ([`Workspace::open_dir_found`]), small files read through a
//! directory handle ([`read_small_at`], for ignore files), and the one race-free way to
//! open a file it found ([`Workspace::open_found`]).

use super::{Workspace, WsPath};
use crate::error::{ErrorCode, ToolError, ToolResult};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{Mode, OFlags};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// Whether the open file holds exactly `bytes` (its size, then its content read in
/// blocks: no copy of the file is made).
fn holds_exactly(fd: BorrowedFd<'_>, bytes: &[u8]) -> bool {
    if rustix::fs::fstat(fd).map_or(true, |st| st.st_size as u64 != bytes.len() as u64) {
        return false;
    }
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 0usize;
    while at < bytes.len() {
        let want = (bytes.len() - at).min(buf.len());
        match rustix::io::pread(fd, &mut buf[..want], at as u64) {
            Ok(0) | Err(_) => return false,
            Ok(n) => {
                if buf[..n] != bytes[at..at + n] {
                    return false;
                }
                at += n;
            }
        }
    }
    true
}

impl Workspace {
    /// Opens a file a walk found at `rel` under root `root`, for reading, race-free:
    /// [`crate::platform::open_beneath`] refuses any symlink anywhere in the path
    /// (Linux: one `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`; macOS:
    /// `O_NOFOLLOW_ANY`; elsewhere one `openat(O_NOFOLLOW)` per component), so a
    /// directory swapped for a symlink after the walk listed it cannot redirect the open
    /// (walks never follow symlinks anyway). `path_only` opens a handle only to confirm
    /// the file and stat it (`O_PATH` where there is one).
    pub fn open_found(
        &self,
        root: usize,
        rel: &Path,
        path_only: bool,
    ) -> io::Result<std::fs::File> {
        let dir = &self.roots[root].dir;
        let how = if path_only {
            crate::platform::Open::Probe
        } else {
            crate::platform::Open::Read
        };
        crate::platform::open_beneath(dir.as_fd(), rel, how).map(std::fs::File::from)
    }

    /// Opens directory `rel` under root `root` for listing: beneath the root, with no
    /// symlink anywhere on the way ([`crate::platform::open_beneath`]). Names read from it are names in a
    /// directory inside the sandbox, however the tree changes afterwards.
    pub fn open_dir_found(&self, root: usize, rel: &Path) -> io::Result<OwnedFd> {
        let dir = &self.roots[root].dir;
        crate::platform::open_beneath(dir.as_fd(), rel, crate::platform::Open::Dir)
    }

    /// Refuses (`CONFLICT`) when the directory `dir`, opened for a change of the file
    /// `rel` (of root `root`), is no longer the one its path leads to: a change computed
    /// while its folder was moved (by a person's approved `move`, another process, or
    /// `rm`) would land at the folder's new place (under `.github/`, in the trash) while
    /// its receipt and journal name the old one. Checked after the change is staged,
    /// just before it lands.
    pub fn still_holds(
        &self,
        dir: &impl AsFd,
        root: usize,
        rel: &Path,
        shown: &str,
    ) -> ToolResult<()> {
        let parent = rel.parent().unwrap_or(Path::new(""));
        let now = self.open_dir_found(root, parent).ok();
        let same = now.is_some_and(
            |fd| match (rustix::fs::fstat(&fd), rustix::fs::fstat(dir)) {
                (Ok(a), Ok(b)) => crate::platform::file_id(&a) == crate::platform::file_id(&b),
                _ => false,
            },
        );
        if same {
            return Ok(());
        }
        Err(ToolError::new(
            ErrorCode::Conflict,
            format!(
                "the folder of {} was moved, replaced or deleted during the call; nothing was changed",
                super::shown_in_prose(shown)
            ),
        )
        .with_hint("look where the folder is now (glob, list_directory), then change the file there"))
    }

    /// Refuses (`CONFLICT`) when the entry `name` in `dir` is no longer the open `file`
    /// a change read: a person's editor saves by renaming a new file over the old one,
    /// so their save, made while the change was computed, would be replaced by it and
    /// kept nowhere (the lock only holds other ferret changes back).
    /// With `before`, the file must also still hold exactly those bytes: a save that
    /// writes into the same file (truncate and write) keeps its inode.
    pub fn still_the_file(
        &self,
        dir: &impl AsFd,
        name: &std::ffi::OsStr,
        file: &impl AsFd,
        before: Option<&[u8]>,
        shown: &str,
    ) -> ToolResult<()> {
        let stat = |fd: BorrowedFd<'_>, at: Option<&std::ffi::OsStr>| {
            match at {
                Some(n) => rustix::fs::statat(fd, n, rustix::fs::AtFlags::SYMLINK_NOFOLLOW),
                None => rustix::fs::fstat(fd),
            }
            .ok()
            .map(|st| crate::platform::file_id(&st))
        };
        let now = stat(dir.as_fd(), Some(name));
        if now.is_some()
            && now == stat(file.as_fd(), None)
            && before.is_none_or(|b| holds_exactly(file.as_fd(), b))
        {
            return Ok(());
        }
        Err(ToolError::new(
            ErrorCode::Conflict,
            format!(
                "{} was replaced by another program while this change was being made; nothing was changed",
                super::shown_in_prose(shown)
            ),
        )
        .with_hint("read it again, then make the change on what it holds now"))
    }

    /// Confirms names a walk listed, one by one, more cheaply than [`open_found`] each:
    /// a name is confirmed when it is a regular file (not followed) in a directory opened
    /// beneath its root with no symlink on the way — one `openat2` per directory, kept
    /// for the names after it, and one `fstatat` per name. The same guarantee: a
    /// directory swapped for a link mid-walk confirms none of the names listed through it.
    ///
    /// [`open_found`]: Workspace::open_found
    pub fn confirmer(&self) -> Confirmer<'_> {
        Confirmer {
            ws: self,
            dirs: std::collections::HashMap::new(),
        }
    }

    /// The absolute path of a real (symlink-free) workspace path: for records that
    /// name it (the trash's original location) and checks against absolute paths, never
    /// for opening it.
    pub fn abs_path(&self, real: &WsPath) -> PathBuf {
        let root = &self.roots[real.root];
        if real.is_root() {
            root.canonical.clone()
        } else {
            root.canonical.join(&real.rel)
        }
    }

    /// For walks: whether an entry below the walk's base (root-relative `rel`) is denied
    /// or skipped, checking only the entry itself (its directories were checked, and
    /// pruned, on the way down).
    /// A file whose extension `allowed_extensions` does not serve is left out too: a
    /// walk must not read (grep) or name (glob) what a read would refuse.
    /// A file at a name a folder deny rule lists (`.git/`, `.aws/`: a worktree's `.git`
    /// file names a path outside the root) is left out as the named path's check
    /// refuses it: the deny rules match whatever the entry's type.
    pub fn walk_excludes(&self, rel: &Path, is_dir: bool) -> bool {
        self.walk_exclude.matches_leaf(rel, is_dir)
            || (!is_dir && (!self.extension_allowed(rel) || self.deny.matches_leaf(rel, true)))
    }

    /// Whether a file named `rel` is served by `allowed_extensions` (empty: every
    /// extension). Compared lowercased; a name without an extension has "".
    pub fn extension_allowed(&self, rel: &Path) -> bool {
        if self.allowed_extensions.is_empty() {
            return true;
        }
        let ext = rel
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        self.allowed_extensions.contains(&ext)
    }
}

/// See [`Workspace::confirmer`].
pub struct Confirmer<'w> {
    ws: &'w Workspace,
    /// Directories opened so far (None: would not open), a few hundred at most.
    dirs: std::collections::HashMap<(usize, PathBuf), Option<std::fs::File>>,
}

impl Confirmer<'_> {
    /// Whether `rel` under root `root` is a regular file reached without a symlink.
    pub fn is_file(&mut self, root: usize, rel: &Path) -> bool {
        let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) else {
            return false;
        };
        if self.dirs.len() >= 256 {
            self.dirs.clear();
        }
        let key = (root, parent.to_path_buf());
        let ws = self.ws;
        let dir = self.dirs.entry(key).or_insert_with(|| {
            let at = if parent.as_os_str().is_empty() {
                Path::new(".")
            } else {
                parent
            };
            ws.open_found(root, at, true).ok()
        });
        let Some(dir) = dir else {
            return false;
        };
        rustix::fs::statat(&*dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|st| rustix::fs::FileType::from_raw_mode(st.st_mode).is_file())
    }
}

/// Reads the regular file `rel` (plain names, none of them a symlink: each is opened with
/// `O_NOFOLLOW` from the handle before it) beneath directory handle `dir`. `None` when
/// it is missing, not a regular file, larger than `max` bytes, or unreadable: for ignore
/// files, which are advisory, so what cannot be read safely is not read.
pub fn read_small_at(dir: BorrowedFd<'_>, rel: &Path, max: u64) -> Option<Vec<u8>> {
    read_capped_at(dir, rel, max)?.ok()
}

/// [`read_small_at`], telling a file over `max` bytes (`Some(Err(its size))`: not read)
/// from one that is missing or unreadable (`None`), so a caller can say which.
pub fn read_capped_at(dir: BorrowedFd<'_>, rel: &Path, max: u64) -> Option<Result<Vec<u8>, u64>> {
    let dirs = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
    let names: Vec<_> = rel.components().collect();
    let (last, parents) = names.split_last()?;
    let mut held: Option<OwnedFd> = None;
    for c in parents {
        let std::path::Component::Normal(name) = c else {
            return None;
        };
        let at = held.as_ref().map_or(dir, |f| f.as_fd());
        held = Some(rustix::fs::openat(at, *name, dirs, Mode::empty()).ok()?);
    }
    let std::path::Component::Normal(name) = last else {
        return None;
    };
    let at = held.as_ref().map_or(dir, |f| f.as_fd());
    // NONBLOCK: a FIFO planted under an ignore file's name must not hang the walk.
    let fd = rustix::fs::openat(
        at,
        *name,
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY,
        Mode::empty(),
    )
    .ok()?;
    let st = rustix::fs::fstat(&fd).ok()?;
    if !rustix::fs::FileType::from_raw_mode(st.st_mode).is_file() {
        return None;
    }
    if st.st_size as u64 > max {
        return Some(Err(st.st_size as u64));
    }
    let mut buf = Vec::with_capacity(st.st_size as usize);
    // One byte more than allowed tells a file that grew since the stat.
    std::fs::File::from(fd)
        .take(max.saturating_add(1))
        .read_to_end(&mut buf)
        .ok()?;
    if buf.len() as u64 > max {
        return Some(Err(buf.len() as u64));
    }
    Some(Ok(buf))
}

/// `path` without the leading `prefix` directory. The walker builds every path by
/// joining names onto its start, so a byte comparison does what `Path::strip_prefix`'s
/// component walk does, in a fraction of the time (it runs for every entry).
pub fn strip<'p>(path: &'p Path, prefix: &Path) -> Option<&'p Path> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let (p, pre) = (path.as_os_str().as_bytes(), prefix.as_os_str().as_bytes());
        let pre = pre.strip_suffix(b"/").unwrap_or(pre);
        if pre.is_empty() {
            return path.strip_prefix("/").ok();
        }
        match p.strip_prefix(pre) {
            Some([]) => Some(Path::new("")),
            Some([b'/', rest @ ..]) => Some(Path::new(std::ffi::OsStr::from_bytes(rest))),
            _ => None,
        }
    }
    #[cfg(not(unix))]
    {
        path.strip_prefix(prefix).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::strip;
    use std::path::Path;

    #[test]
    fn strip_agrees_with_path_strip_prefix() {
        for (p, pre) in [
            ("/a/b/c", "/a"),
            ("/a/b", "/a/b"),
            ("/ab/c", "/a"),
            ("/a/b/", "/a/"),
            ("/x", "/"),
            ("/a", "/b"),
        ] {
            assert_eq!(
                strip(Path::new(p), Path::new(pre)),
                Path::new(p).strip_prefix(pre).ok(),
                "{p} {pre}"
            );
        }
    }
}

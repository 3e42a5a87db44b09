//! What the search engine's walker needs: where to start (an absolute path: the `ignore`
//! walker lists directories by path), how to name what it finds relative to a root, and
//! the one race-free way to open what it found ([`Workspace::open_found`]).

use super::{Workspace, WsPath};
use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

impl Workspace {
    /// Opens a file a walk found at `rel` under root `root`, for reading: one syscall,
    /// race-free. On Linux `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` refuses any
    /// symlink anywhere in the path, so a directory swapped for a symlink after the walk
    /// listed it cannot redirect the open (walks never follow symlinks anyway). `path_only`
    /// opens an `O_PATH` handle: enough to confirm the file and stat it, without reading.
    pub fn open_found(
        &self,
        root: usize,
        rel: &Path,
        path_only: bool,
    ) -> io::Result<std::fs::File> {
        let dir = &self.roots[root].dir;
        if let Some(opened) = super::sys::open_beneath_no_links(dir, rel, path_only) {
            return opened;
        }
        // Elsewhere: cap-std keeps the open beneath the root; the final component is not
        // followed.
        let _ = path_only;
        let mut opts = OpenOptions::new();
        opts.read(true).follow(FollowSymlinks::No);
        #[cfg(unix)]
        {
            use cap_std::fs::OpenOptionsExt;
            opts.custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32);
        }
        dir.open_with(rel, &opts).map(File::into_std)
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

    /// The absolute path of a real (symlink-free) workspace path, for the walker, which
    /// lists directories by path. What it lists is opened through [`open_found`].
    ///
    /// [`open_found`]: Workspace::open_found
    pub fn walk_start(&self, real: &WsPath) -> PathBuf {
        let root = &self.roots[real.root];
        if real.is_root() {
            root.canonical.clone()
        } else {
            root.canonical.join(&real.rel)
        }
    }

    /// The root-relative form of a path the walker produced under root `root`.
    pub fn walk_rel<'p>(&self, root: usize, abs: &'p Path) -> Option<&'p Path> {
        strip(abs, &self.roots[root].canonical)
    }

    /// For walks: whether an entry below the walk's base (root-relative `rel`) is denied
    /// or skipped, checking only the entry itself (its directories were checked, and
    /// pruned, on the way down).
    pub fn walk_excludes(&self, rel: &Path, is_dir: bool) -> bool {
        self.walk_exclude.matches_leaf(rel, is_dir)
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

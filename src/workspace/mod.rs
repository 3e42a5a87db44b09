//! The workspace sandbox: every path a tool touches goes through here.
//!
//! A tool never opens a path string. It hands the agent's path to [`Workspace::resolve`],
//! which checks it lexically (no `..`, inside a root, not too deep, not denied) and
//! returns a [`WsPath`]; it then asks the workspace to open that `WsPath`. Opening:
//!
//! 1. resolves symlinks *beneath the root* with cap-std (`openat2(RESOLVE_BENEATH)` on
//!    Linux), so a symlink leading outside fails as `PATH_ESCAPE` instead of being
//!    followed;
//! 2. checks the deny and extension rules again on the real name, so an innocent-looking
//!    symlink to `.env` is denied;
//! 3. opens that real name one component at a time without following symlinks, so what
//!    is opened is exactly the object whose name passed the checks — a directory swapped
//!    for a symlink between the check and the open makes the open fail, never escape.
//!
//! The one place an ambient (non-sandboxed) path call is made is
//! [`std::fs::canonicalize`], to name the target of an absolute symlink that cap-std
//! refuses; its answer is only ever used as a name to open beneath the root.

pub mod patterns;
pub mod resolve;
pub mod write;

use crate::config::Config;
use crate::error::{ErrorCode, ToolError, ToolResult};
use cap_fs_ext::{DirExt, FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, File, Metadata, OpenOptions};
use patterns::PatternSet;
pub use resolve::Resolved;
use std::io;
use std::path::{Component, Path, PathBuf};

pub use cap_std::fs::{Dir as SandboxDir, File as SandboxFile, Metadata as SandboxMetadata};

/// One workspace root: a directory handle that cannot be escaped, and its names.
#[derive(Debug)]
pub struct Root {
    /// Short name used to prefix result paths when there are several roots.
    pub name: String,
    /// The root as given on the command line, made absolute.
    pub path: PathBuf,
    /// The root with every symlink resolved.
    pub canonical: PathBuf,
    dir: Dir,
}

/// A path inside the workspace that passed the lexical checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WsPath {
    root: usize,
    /// Relative to the root, normalized: no `.`, no `..`, no leading `/`; empty for the
    /// root itself.
    rel: PathBuf,
}

impl WsPath {
    pub fn rel(&self) -> &Path {
        &self.rel
    }

    pub fn root_index(&self) -> usize {
        self.root
    }

    pub fn join(&self, name: impl AsRef<Path>) -> WsPath {
        WsPath {
            root: self.root,
            rel: self.rel.join(name),
        }
    }

    pub fn is_root(&self) -> bool {
        self.rel.as_os_str().is_empty()
    }
}

/// The kind of filesystem object, as tools report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EntryType {
    File,
    Directory,
    Symlink,
    Other,
}

impl EntryType {
    pub fn as_str(self) -> &'static str {
        match self {
            EntryType::File => "file",
            EntryType::Directory => "directory",
            EntryType::Symlink => "symlink",
            EntryType::Other => "other",
        }
    }

    pub fn of(ft: &cap_std::fs::FileType) -> EntryType {
        if ft.is_symlink() {
            EntryType::Symlink
        } else if ft.is_dir() {
            EntryType::Directory
        } else if ft.is_file() {
            EntryType::File
        } else {
            EntryType::Other
        }
    }
}

/// The sandbox. Cheap to share (`Arc<Workspace>`); all methods take `&self`.
#[derive(Debug)]
pub struct Workspace {
    roots: Vec<Root>,
    deny: PatternSet,
    skip: PatternSet,
    /// skip then deny, in one matcher: what a walk leaves out, one lookup per entry.
    walk_exclude: PatternSet,
    confirm: PatternSet,
    allowed_extensions: Vec<String>,
    max_path_depth: usize,
}

impl Workspace {
    /// Opens the roots. `roots` must be non-empty existing directories.
    pub fn new(config: &Config) -> anyhow::Result<Workspace> {
        let mut roots: Vec<Root> = Vec::new();
        let given = if config.roots.is_empty() {
            vec![std::env::current_dir()?]
        } else {
            config.roots.clone()
        };
        for r in given {
            let path = std::path::absolute(&r)?;
            let canonical = std::fs::canonicalize(&path)
                .map_err(|e| anyhow::anyhow!("root {}: {e}", path.display()))?;
            if !canonical.is_dir() {
                anyhow::bail!("root {} is not a directory", path.display());
            }
            let dir = Dir::open_ambient_dir(&canonical, cap_std::ambient_authority())
                .map_err(|e| anyhow::anyhow!("cannot open root {}: {e}", canonical.display()))?;
            let base = canonical
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "root".into());
            let mut name = base.clone();
            let mut n = 2;
            while roots.iter().any(|x| x.name == name) {
                name = format!("{base}-{n}");
                n += 1;
            }
            roots.push(Root {
                name,
                path,
                canonical,
                dir,
            });
        }
        let deny = PatternSet::new(config.deny_patterns())
            .map_err(|e| anyhow::anyhow!("deny patterns: {}", e.message))?;
        let skip = PatternSet::new(config.skip_patterns())
            .map_err(|e| anyhow::anyhow!("skip patterns: {}", e.message))?;
        let walk_exclude = PatternSet::new(config.skip_patterns().chain(config.deny_patterns()))
            .map_err(|e| anyhow::anyhow!("skip/deny patterns: {}", e.message))?;
        let confirm = PatternSet::new(config.confirm.iter().map(String::as_str))
            .map_err(|e| anyhow::anyhow!("confirm patterns: {}", e.message))?;
        Ok(Workspace {
            roots,
            deny,
            skip,
            walk_exclude,
            confirm,
            allowed_extensions: config
                .allowed_extensions
                .iter()
                .map(|e| e.trim_start_matches('.').to_ascii_lowercase())
                .collect(),
            max_path_depth: config.max_path_depth,
        })
    }

    pub fn roots(&self) -> &[Root] {
        &self.roots
    }

    /// The roots' canonical paths (what the state directory's id is made from).
    pub fn canonical_roots(&self) -> Vec<PathBuf> {
        self.roots.iter().map(|r| r.canonical.clone()).collect()
    }

    /// The workspace path of an absolute path inside a root (whole components compared).
    pub fn locate(&self, abs: &Path) -> Option<WsPath> {
        self.locate_absolute(abs)
            .map(|(root, rel)| WsPath { root, rel })
    }

    /// The root directory itself, as a path.
    pub fn root_path(&self, i: usize) -> WsPath {
        WsPath {
            root: i,
            rel: PathBuf::new(),
        }
    }

    pub fn root_of(&self, p: &WsPath) -> &Root {
        &self.roots[p.root]
    }

    /// Whether a path met in a walk from `base` is noise to leave out. Skip rules only
    /// apply below `base`: noise stays readable and listable when named.
    pub fn is_skipped(&self, p: &WsPath, base: &WsPath, is_dir: bool) -> bool {
        self.skip.matches_below(&p.rel, &base.rel, is_dir)
    }

    /// Whether changing `p` needs the user's confirmation (the `confirm` list).
    pub fn needs_confirmation(&self, p: &WsPath, is_dir: bool) -> bool {
        self.confirm.matches(&p.rel, is_dir)
    }

    /// Whether a path is a secret. Walks use this to leave entries out.
    pub fn is_denied(&self, p: &WsPath, is_dir: bool) -> bool {
        self.deny.matches(&p.rel, is_dir)
    }

    /// The name a result uses for `p`: relative to its root, `/`-separated, prefixed by the
    /// root's name when there are several roots; `.` for the single root itself.
    pub fn display(&self, p: &WsPath) -> String {
        let rel = p.rel.to_string_lossy().replace('\\', "/");
        if self.roots.len() > 1 {
            if rel.is_empty() {
                self.roots[p.root].name.clone()
            } else {
                format!("{}/{}", self.roots[p.root].name, rel)
            }
        } else if rel.is_empty() {
            ".".into()
        } else {
            rel
        }
    }

    /// Checks a path as the agent wrote it, without touching the filesystem except to
    /// name an absolute path given through a symlinked alias of a root.
    pub fn resolve(&self, input: &str) -> ToolResult<WsPath> {
        if input.is_empty() {
            return Err(
                ToolError::invalid("path is empty").with_hint("use \".\" for the workspace root")
            );
        }
        if input.contains('\0') {
            return Err(ToolError::invalid("path contains a NUL byte"));
        }
        let path = Path::new(input);
        if path.components().any(|c| c == Component::ParentDir) {
            return Err(ToolError::new(
                ErrorCode::PathTraversal,
                format!("{input}: `..` is not allowed in paths"),
            )
            .with_hint("name the path from the workspace root instead"));
        }
        let (root, rel) = if path.is_absolute() {
            self.locate_absolute(path)
                .ok_or_else(|| self.escape_error(input))?
        } else {
            let rel = normalize(path);
            match (self.roots.len() > 1, rel.components().next()) {
                (true, Some(Component::Normal(first))) => {
                    match self.roots.iter().position(|r| r.name.as_str() == first) {
                        Some(i) => (i, rel.strip_prefix(first).unwrap_or(&rel).to_path_buf()),
                        None => (0, rel),
                    }
                }
                _ => (0, rel),
            }
        };
        let p = WsPath { root, rel };
        self.check_name(&p, input, None)?;
        Ok(p)
    }

    /// The absolute path's root and relative part, comparing whole components (so
    /// `/allowed_evil` is not inside `/allowed`).
    fn locate_absolute(&self, path: &Path) -> Option<(usize, PathBuf)> {
        let normalized = normalize(path);
        for (i, r) in self.roots.iter().enumerate() {
            for base in [&r.path, &r.canonical] {
                if let Ok(rest) = normalized.strip_prefix(base) {
                    return Some((i, rest.to_path_buf()));
                }
            }
        }
        // No ambient look-up of an agent's path: a root is known by the name it was
        // given and by its canonical name (macOS /tmp and /private/tmp), nothing else.
        None
    }

    fn escape_error(&self, input: &str) -> ToolError {
        let roots: Vec<String> = self
            .roots
            .iter()
            .map(|r| r.path.display().to_string())
            .collect();
        ToolError::new(
            ErrorCode::PathEscape,
            format!("{input} is outside the workspace"),
        )
        .with_hint(format!(
            "only paths inside the workspace root(s) can be used: {}",
            roots.join(", ")
        ))
    }

    /// Depth, deny and extension rules on a name. `is_dir` is `None` when the type is not
    /// known yet (then both readings are checked).
    fn check_name(&self, p: &WsPath, shown: &str, is_dir: Option<bool>) -> ToolResult<()> {
        let depth = p.rel.components().count();
        if self.max_path_depth > 0 && depth > self.max_path_depth {
            return Err(ToolError::new(
                ErrorCode::PathTooDeep,
                format!(
                    "{shown} is {depth} levels deep; the limit is {}",
                    self.max_path_depth
                ),
            ));
        }
        let denied = match is_dir {
            Some(d) => self.deny.matches(&p.rel, d),
            None => self.deny.matches_any_type(&p.rel),
        };
        if denied {
            return Err(denied_error(shown));
        }
        if is_dir == Some(false) && !self.allowed_extensions.is_empty() {
            let ext = p
                .rel
                .extension()
                .map(|e| e.to_string_lossy().to_ascii_lowercase())
                .unwrap_or_default();
            if !self.allowed_extensions.contains(&ext) {
                return Err(ToolError::new(
                    ErrorCode::ExtensionDenied,
                    format!("{shown}: extension {ext:?} is not allowed"),
                )
                .with_hint(format!(
                    "allowed extensions: {}",
                    self.allowed_extensions.join(", ")
                )));
            }
        }
        Ok(())
    }

    /// Walks `p` to its real path beneath the root (see [`resolve`]) and checks the
    /// rules on the real name: deny before every component is looked at, depth and
    /// extension once the type is known. `follow` says whether a final symlink is
    /// followed (reading it) or is itself the object (deleting it).
    pub fn entry(&self, p: &WsPath, follow: bool) -> ToolResult<Resolved> {
        let shown = self.display(p);
        let root = &self.roots[p.root];
        let deny = &self.deny;
        let r = resolve::walk(root, p.root, &p.rel, follow, &|rel| {
            deny.matches_any_type(rel)
        })
        .map_err(|e| {
            e.into_tool_error(&shown, |real| {
                self.display(&WsPath {
                    root: p.root,
                    rel: real.to_path_buf(),
                })
            })
        })?;
        let named = if r.real.rel == p.rel {
            shown
        } else {
            format!("{shown} (-> {})", self.display(&r.real))
        };
        match &r.meta {
            Some(m) => self.check_name(&r.real, &named, Some(m.is_dir()))?,
            None => self.check_name(&r.real, &named, None)?,
        }
        Ok(r)
    }

    /// The real name of `p` beneath its root, every symlink resolved. `Ok(None)` when it
    /// does not exist.
    pub fn real_path(&self, p: &WsPath) -> ToolResult<Option<WsPath>> {
        let r = self.entry(p, true)?;
        Ok(r.meta.is_some().then_some(r.real))
    }

    /// What stands at `p`, following symlinks within the workspace; `None` if nothing.
    /// Returns the real path too.
    pub fn stat(&self, p: &WsPath) -> ToolResult<Option<(WsPath, Metadata)>> {
        let r = self.entry(p, true)?;
        Ok(r.meta.map(|m| (r.real, m)))
    }

    /// What stands at `p` itself, not following a final symlink: for listings.
    pub fn lstat(&self, p: &WsPath) -> ToolResult<Option<Metadata>> {
        Ok(self.entry(p, false)?.meta)
    }

    /// Opens a regular file for reading. Never blocks on a FIFO. Returns the resolution
    /// too: its `parent` handle is where a change to the file is made.
    pub fn open_file(&self, p: &WsPath) -> ToolResult<(File, Metadata, Resolved)> {
        let shown = self.display(p);
        let r = self.entry(p, true)?;
        let (Some(meta), Some(dir), Some(name)) = (&r.meta, &r.parent, r.name()) else {
            return Err(not_found(&shown));
        };
        if meta.is_dir() {
            return Err(
                ToolError::new(ErrorCode::IsADirectory, format!("{shown} is a directory"))
                    .with_hint("use list_directory for directories"),
            );
        }
        if !meta.is_file() {
            return Err(ToolError::invalid(format!(
                "{shown} is not a regular file (a FIFO, socket or device); it is not read"
            )));
        }
        let mut opts = OpenOptions::new();
        opts.read(true).follow(FollowSymlinks::No);
        #[cfg(unix)]
        {
            use cap_std::fs::OpenOptionsExt;
            // A FIFO swapped in after the type check must not hang the call.
            opts.custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32);
        }
        let file = dir
            .open_with(name, &opts)
            .map_err(|e| raced_or_io(&shown, &e))?;
        let meta = file.metadata().map_err(|e| ToolError::io(&shown, &e))?;
        if !meta.is_file() {
            return Err(ToolError::invalid(format!("{shown} is not a regular file")));
        }
        Ok((file, meta, r))
    }

    /// Opens a regular file and takes an exclusive lock on it for a read-modify-write:
    /// edits of one file, by any number of ferret processes, apply one after another.
    /// The lock is on the file's inode, and a change replaces the inode, so once the lock
    /// is held the name is checked to still lead to the locked inode; if a change landed
    /// meanwhile the file is opened again. Waits up to `wait` for another editor.
    pub fn open_file_locked(
        &self,
        p: &WsPath,
        wait: std::time::Duration,
    ) -> ToolResult<(File, Metadata, Resolved)> {
        let shown = self.display(p);
        for _ in 0..1000 {
            let (file, meta, r) = self.open_file(p)?;
            if !write::lock(&file, wait).map_err(|e| ToolError::io(&shown, &e))? {
                return Err(ToolError::new(
                    ErrorCode::Conflict,
                    format!("{shown} is being changed by another process"),
                )
                .with_hint("retry in a moment"));
            }
            let (Some(dir), Some(name)) = (&r.parent, r.name()) else {
                return Err(not_found(&shown));
            };
            let mine = write::identity(&file).map_err(|e| ToolError::io(&shown, &e))?;
            if write::identity_at(dir, name).ok() == Some(mine) {
                return Ok((file, meta, r));
            }
        }
        Err(ToolError::new(
            ErrorCode::Conflict,
            format!("{shown} kept changing while it was being opened"),
        )
        .with_hint("retry in a moment"))
    }

    /// Whether the directory `at` (from [`Workspace::entry`]) holds, at any depth, an
    /// entry the deny rules match: deleting it would take secrets or VCS internals along.
    /// Walks handles without following links; `check` is called per directory (for the
    /// call's deadline).
    pub fn holds_denied(
        &self,
        at: &Resolved,
        check: &dyn Fn() -> ToolResult<()>,
    ) -> ToolResult<bool> {
        let shown = self.display(&at.real);
        let (Some(parent), Some(name)) = (&at.parent, at.name()) else {
            return Ok(false);
        };
        let dir = parent
            .open_dir_nofollow(name)
            .map_err(|e| raced_or_io(&shown, &e))?;
        let mut stack = vec![(dir, at.real.rel.clone())];
        while let Some((dir, rel)) = stack.pop() {
            check()?;
            let entries = dir.entries().map_err(|e| ToolError::io(&shown, &e))?;
            for entry in entries {
                let entry = entry.map_err(|e| ToolError::io(&shown, &e))?;
                let ft = entry.file_type().map_err(|e| ToolError::io(&shown, &e))?;
                let here = rel.join(entry.file_name());
                if self.deny.matches(&here, ft.is_dir()) {
                    return Ok(true);
                }
                if ft.is_dir() {
                    let sub = dir
                        .open_dir_nofollow(entry.file_name())
                        .map_err(|e| raced_or_io(&shown, &e))?;
                    stack.push((sub, here));
                }
            }
        }
        Ok(false)
    }

    /// Opens a directory for listing.
    pub fn open_dir(&self, p: &WsPath) -> ToolResult<Dir> {
        let shown = self.display(p);
        let r = self.entry(p, true)?;
        let Some(meta) = &r.meta else {
            return Err(not_found(&shown));
        };
        if !meta.is_dir() {
            return Err(ToolError::new(
                ErrorCode::NotADirectory,
                format!("{shown} is not a directory"),
            )
            .with_hint("use read_file or get_file_info for files"));
        }
        let Some(dir) = r.parent else {
            return Err(not_found(&shown));
        };
        match r.real.rel.file_name() {
            None => Ok(dir),
            Some(name) => dir
                .open_dir_nofollow(name)
                .map_err(|e| raced_or_io(&shown, &e)),
        }
    }
}

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
        #[cfg(target_os = "linux")]
        {
            use rustix::fs::{Mode, OFlags, ResolveFlags, openat2};
            use std::sync::atomic::{AtomicBool, Ordering};
            static NO_OPENAT2: AtomicBool = AtomicBool::new(false);
            if !NO_OPENAT2.load(Ordering::Relaxed) {
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
                    Ok(fd) => return Ok(std::fs::File::from(fd)),
                    Err(rustix::io::Errno::NOSYS) => NO_OPENAT2.store(true, Ordering::Relaxed),
                    Err(e) => return Err(e.into()),
                }
            }
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

/// The error for a name that matches a deny rule. It reads the same whether or not the
/// object exists.
pub(crate) fn denied_error(shown: &str) -> ToolError {
    ToolError::new(
        ErrorCode::DeniedPattern,
        format!("{shown} matches a deny pattern (secrets and VCS internals are never accessible)"),
    )
    .with_hint("this path cannot be read, listed or changed through ferret; ask the user if it is really needed")
}

/// An I/O error met while walking or opening; a directory that turned into a symlink
/// under us (ELOOP, ENOTDIR from an O_NOFOLLOW open) is named as the race it is.
pub(crate) fn raced_or_io(shown: &str, e: &io::Error) -> ToolError {
    if is_loop(e) || e.kind() == io::ErrorKind::NotADirectory {
        ToolError::new(
            ErrorCode::IoError,
            format!(
                "{shown} changed while it was being opened (a directory became a symbolic link)"
            ),
        )
        .with_hint("retry the call")
    } else {
        ToolError::io(shown, e)
    }
}

fn not_found(shown: &str) -> ToolError {
    ToolError::new(
        ErrorCode::NotFound,
        format!("{shown}: no such file or directory"),
    )
    .with_hint(
        "check the path with glob or list_directory; paths are relative to the workspace root",
    )
}

fn is_loop(e: &io::Error) -> bool {
    e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error())
}

/// Drops `.` components and a leading `/` or prefix; `..` never reaches here.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::RootDir if path.is_absolute() => out.push("/"),
            _ => {}
        }
    }
    out
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

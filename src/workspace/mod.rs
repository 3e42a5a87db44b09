//! The workspace sandbox: every path a tool touches goes through here.
//!
//! A tool never opens a path string. It hands the agent's path to [`Workspace::resolve`]
//! (`path.rs`), which checks it lexically (no `..`, inside a root, not too deep, not
//! denied) and returns a [`WsPath`]; it then asks the workspace to open that `WsPath`
//! (`open.rs`), which walks it with [`resolve::walk`]: component by component over
//! directory handles, symlinks read and spliced in, the deny rules checked on each real
//! name before it is looked at, nothing outside the root ever opened. What comes back
//! are handles beneath the root; changes are made through them ([`write`]).
//!
//! Searches open each directory they list, and each file they read, beneath the root's
//! handle with no symlink on the way (`walk.rs`, through [`crate::platform::open_beneath`]:
//! one `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` on Linux), and read names through
//! the directory's handle. No agent's path string
//! reaches an ambient syscall.

mod open;
mod path;
pub mod patterns;
pub mod resolve;
mod serial;
mod walk;
pub mod write;

pub(crate) use open::{denied_error, raced_or_io};
pub use walk::{read_capped_at, read_small_at, strip};

use crate::config::Config;
use crate::error::{ErrorCode, SetupError, ToolError};
use cap_std::fs::Dir;
pub use open::{DenyChange, MadeDirs};
use patterns::PatternSet;
pub use resolve::Resolved;
use std::path::{Path, PathBuf};

pub use cap_std::fs::{Dir as SandboxDir, File as SandboxFile, Metadata as SandboxMetadata};

/// How long a change waits for another process changing the same file (see
/// [`Workspace::open_file_locked`]).
pub const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

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
    /// Deny patterns for ferret's state and the OS trash inside a root (see
    /// [`protected_dirs`]).
    protected: Vec<String>,
    /// The same places as (root, path under it): nothing new may be made at a name on
    /// the way to one (a link moved to `.local/state` would move ferret's state there).
    protected_at: Vec<(usize, PathBuf)>,
    /// The deny rules as written (the user's and the workspace's): which folder names
    /// they guard the contents of (`**/.kube/config` guards what `.kube` holds).
    deny_rules: Vec<String>,
}

impl Workspace {
    /// Opens the roots. `roots` must be non-empty existing directories.
    pub fn new(config: &Config) -> Result<Workspace, SetupError> {
        let mut roots: Vec<Root> = Vec::new();
        let root_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| SetupError::Root { path, source }
        };
        let given = if config.roots.is_empty() {
            vec![std::env::current_dir().map_err(root_err(Path::new(".")))?]
        } else {
            config.roots.clone()
        };
        for r in given {
            let path = std::path::absolute(&r).map_err(root_err(&r))?;
            let canonical = std::fs::canonicalize(&path).map_err(root_err(&path))?;
            if !canonical.is_dir() {
                return Err(SetupError::RootNotADirectory(path));
            }
            let dir = Dir::open_ambient_dir(&canonical, cap_std::ambient_authority())
                .map_err(root_err(&canonical))?;
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
        let bad = |list: &'static str| {
            move |e: crate::error::ToolError| SetupError::Patterns {
                list,
                message: e.message,
            }
        };
        // ferret's own state and the OS trash, wherever they lie in a root: denied by
        // their real (canonical) names, so also through a link or another spelling.
        let protected_at = protected_in_roots(config, &roots);
        let protected = protected_patterns(config, &roots);
        // A workspace's own ferret.toml never stops ferret: should a list with its
        // additions not build (narrow.rs compiles them as here, so this is a last
        // resort), they are dropped with a warning and the user's rules built alone.
        let build = |drop_workspace: bool| {
            let ours =
                |p: &&str| !drop_workspace || !config.workspace_patterns.iter().any(|w| w == p);
            let deny_all = || {
                config
                    .deny_patterns()
                    .filter(ours)
                    .chain(protected.iter().map(String::as_str))
            };
            let deny = PatternSet::new_caseless(deny_all()).map_err(bad("deny"))?;
            let skip = PatternSet::new(config.skip_patterns().filter(ours)).map_err(bad("skip"))?;
            let walk_exclude = PatternSet::mixed(config.skip_patterns().filter(ours), deny_all())
                .map_err(bad("skip/deny"))?;
            let confirm =
                PatternSet::new_caseless(config.confirm.iter().map(String::as_str).filter(ours))
                    .map_err(bad("confirm"))?;
            Ok::<_, SetupError>((deny, skip, walk_exclude, confirm))
        };
        let (deny, skip, walk_exclude, confirm) = match build(false) {
            Err(e) if !config.workspace_patterns.is_empty() => {
                eprintln!(
                    "ferret: warning: the patterns the workspace's ferret.toml adds to deny_extra, \
                     skip_extra and confirm were dropped: {}",
                    crate::error::echo(&e.to_string())
                );
                build(true)?
            }
            r => r?,
        };
        // A root nested in another at a name the rules guard (`--root ws --root
        // ws/.github`, `ws/.docker`): its paths are matched from itself, where `.github/`
        // is not in them, so changes under it went unasked and secrets read. Refused
        // rather than half-guarded.
        let nesting = |deny: &PatternSet, confirm: &PatternSet, drop_workspace: bool| {
            let ours =
                |p: &&str| !drop_workspace || !config.workspace_patterns.iter().any(|w| w == p);
            for outer in &roots {
                for inner in &roots {
                    let Ok(rel) = inner.canonical.strip_prefix(&outer.canonical) else {
                        continue;
                    };
                    // A rule anchored at a root (`/private/`, `config/master.yml`) means one
                    // place from the inner root and another from the outer: one file, two
                    // verdicts, by the spelling.
                    if !rel.as_os_str().is_empty()
                        && let Some(rule) = config
                            .deny_patterns()
                            .chain(config.confirm.iter().map(String::as_str))
                            .filter(ours)
                            .find(|r| anchored(r))
                    {
                        return Err(SetupError::NestedAnchored {
                            inner: inner.path.clone(),
                            outer: outer.path.clone(),
                            rule: rule.to_string(),
                        });
                    }
                    let mut at = PathBuf::new();
                    for c in rel.components() {
                        at.push(c);
                        // The folder itself, or a rule with folders in it naming this one
                        // (`.docker/config.json` guards a file under a root at `.docker`).
                        let name = c.as_os_str();
                        let list = if deny.matches(&at, true)
                            || config
                                .deny_patterns()
                                .filter(ours)
                                .any(|r| names_folder(r, name))
                        {
                            "deny"
                        } else if confirm.matches_any_type(&at)
                            || config
                                .confirm
                                .iter()
                                .map(String::as_str)
                                .filter(ours)
                                .any(|r| names_folder(r, name))
                        {
                            "confirm"
                        } else {
                            continue;
                        };
                        return Err(SetupError::RootAtGuardedName {
                            inner: inner.path.clone(),
                            outer: outer.path.clone(),
                            list,
                        });
                    }
                }
            }
            Ok::<(), SetupError>(())
        };
        // A workspace's ferret.toml never stops ferret here either: should its additions
        // make nested roots refused (an anchored rule, a rule naming the inner root's
        // folder), they are dropped with a warning and the user's rules judged alone
        // (round 19: one line in a repository stopped every run on nested roots).
        let (deny, skip, walk_exclude, confirm) = match nesting(&deny, &confirm, false) {
            Ok(()) => (deny, skip, walk_exclude, confirm),
            Err(e) if !config.workspace_patterns.is_empty() => {
                let sets = build(true)?;
                nesting(&sets.0, &sets.3, true)?;
                eprintln!(
                    "ferret: warning: the patterns the workspace's ferret.toml adds to deny_extra, \
                     skip_extra and confirm were dropped: {}",
                    crate::error::echo(&e.to_string())
                );
                sets
            }
            Err(e) => return Err(e),
        };
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
            protected,
            protected_at,
            deny_rules: config.deny_patterns().map(str::to_string).collect(),
        })
    }

    /// Whether a deny rule guards something inside a folder of this name (`.kube` for
    /// `**/.kube/config`, `.docker` for `**/.docker/config.json`): a link put at such a
    /// name makes what it leads to hold those names.
    pub fn names_denied_folder(&self, name: &std::ffi::OsStr) -> bool {
        self.deny_rules.iter().any(|r| names_folder(r, name))
    }

    /// What decides, beyond the settings, which names are denied: the deny rules match
    /// any case, and ferret's state and the OS trash are denied where they lie in a
    /// root. A stored index made under other rules is not used (it may list them).
    pub fn rules_id(&self) -> Vec<String> {
        // "any-type": since round 26 a file at a folder rule's name is denied too; an
        // index made before may hold such files.
        std::iter::once("deny-caseless-any-type".to_string())
            .chain(self.protected.iter().cloned())
            .collect()
    }

    pub fn roots(&self) -> &[Root] {
        &self.roots
    }

    /// Whether `real` (a real path, links resolved up to its last component) is or holds
    /// another root: a root nested inside another one (`--root ws --root ws/sub/deep`).
    /// Deleting or moving `real` whole would delete or move that root.
    pub fn holds_root(&self, real: &WsPath) -> bool {
        let Some(base) = self.roots.get(real.root) else {
            return false;
        };
        let here = base.canonical.join(&real.rel);
        self.roots
            .iter()
            .enumerate()
            .any(|(i, r)| i != real.root && r.canonical.starts_with(&here))
    }

    /// Refuses (`CONFLICT`) when a root no longer stands where ferret found it at start.
    /// What was checked of the roots at start (no root nested at a guarded name, like
    /// `.github`, nor under anchored rules) and every deny rule matched on a path
    /// relative to a root hold only while the roots stay where they were: a person
    /// moving `ws/sub` to `ws/.github/sub` under a running server had every change
    /// through the inner root land in `.github` unasked (round 18), and another server
    /// of the agent's, rooted above, moving this one's root to `~/.kube` had this one
    /// read and write `~/.kube/config` as `config` (round 22). Every call is refused
    /// then, reads too, until the person restarts ferret.
    pub fn roots_in_place(&self) -> Result<(), ToolError> {
        for r in &self.roots {
            let here = std::fs::canonicalize(&r.path).ok();
            let same = here.as_deref() == Some(r.canonical.as_path())
                && match (rustix::fs::stat(&r.canonical), rustix::fs::fstat(&r.dir)) {
                    (Ok(a), Ok(b)) => crate::platform::file_id(&a) == crate::platform::file_id(&b),
                    _ => false,
                };
            if !same {
                return Err(ToolError::new(
                    ErrorCode::Conflict,
                    format!(
                        "the root {} was moved since ferret started; nothing was read or changed",
                        r.name
                    ),
                )
                .with_hint(
                    "the user must restart ferret on the roots where they are now: what is denied is judged from where they stand",
                ));
            }
        }
        Ok(())
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

    /// The deepest a path may be, in components (0: no limit).
    pub fn max_path_depth(&self) -> usize {
        self.max_path_depth
    }

    /// Root `i` with every symlink resolved.
    pub fn root_canonical(&self, i: usize) -> &Path {
        &self.roots[i].canonical
    }

    pub fn root_of(&self, p: &WsPath) -> &Root {
        &self.roots[p.root]
    }

    /// Whether a path met in a walk from `base` is noise to leave out. Skip rules only
    /// apply below `base`: noise stays readable and listable when named.
    pub fn is_skipped(&self, p: &WsPath, base: &WsPath, is_dir: bool) -> bool {
        self.skip.matches_below(&p.rel, &base.rel, is_dir)
    }

    /// Whether changing `p` needs the user's confirmation (the `confirm` list), whatever
    /// the entry is: a link or a file at a name a directory rule lists (`.github/`) asks
    /// as the directory would, or an agent could make a link named `.github` unasked and
    /// then write under `.github/workflows/` through it. `_is_dir` is what the caller
    /// knows of the entry; the answer does not depend on it.
    pub fn needs_confirmation(&self, p: &WsPath, _is_dir: bool) -> bool {
        self.confirm.matches_any_type(&p.rel)
    }

    /// Whether a path is a secret. Walks use this to leave entries out. Whatever the
    /// entry's type, as a named path is judged: a file named `.git` (a worktree's) is
    /// as denied as the folder. `_is_dir` is what the caller knows of the entry.
    pub fn is_denied(&self, p: &WsPath, _is_dir: bool) -> bool {
        self.deny.matches_any_type(&p.rel)
    }

    /// [`Workspace::display`] as the text a model reads gives it ([`shown`]): for the
    /// names in error messages, hints and warnings, which follow the rules of results.
    pub fn shown_name(&self, p: &WsPath) -> String {
        shown(&self.display(p)).into_owned()
    }

    /// The name a result uses for `p`, in JSON (the text form is [`shown`] of it): relative
    /// to its root, `/`-separated, prefixed by the root's name when there are several
    /// roots; `.` for the single root itself. It is the exact name, except when that
    /// could be read as something else: a name that is not UTF-8, or one with a
    /// component starting with `"`, is given quoted ([`quote`]). Passed back to any tool
    /// ([`Workspace::resolve`]), it names this same object and no other. A `\` is a
    /// character of the name, never a separator.
    pub fn display(&self, p: &WsPath) -> String {
        let rel = p.rel.as_os_str().as_encoded_bytes();
        let mut full: Vec<u8> = Vec::with_capacity(rel.len() + 16);
        if self.roots.len() > 1 {
            full.extend_from_slice(self.roots[p.root].name.as_bytes());
            if !rel.is_empty() {
                full.push(b'/');
            }
        } else if rel.is_empty() {
            full.push(b'.');
        }
        full.extend_from_slice(rel);
        reference(&full)
    }
}

/// Directories no tool may see into, whatever the settings: ferret's state (backups,
/// journals, its trash, indexes: `--state-dir`, `$XDG_STATE_HOME/ferret`,
/// `~/.local/state/ferret`) and the freedesktop home trash (`$XDG_DATA_HOME/Trash`,
/// `~/.local/share/Trash`), by their canonical names (a missing tail is appended to its
/// nearest existing directory's canonical name).
pub fn protected_dirs(config: &Config) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(d) = &config.state_dir {
        dirs.extend(std::path::absolute(d).ok());
    }
    // The audit log: an agent must not read or rewrite the record of what it did.
    if let Some(f) = &config.audit_log {
        dirs.extend(std::path::absolute(f).ok());
    }
    dirs.extend(crate::platform::protected_defaults(
        &crate::platform::process_env,
    ));
    let mut out: Vec<PathBuf> = dirs.iter().map(|d| canonical_lenient(d)).collect();
    out.sort();
    out.dedup();
    out
}

/// Whether a rule is anchored at the root it is matched from (gitignore's rule: a `/`
/// at its start or in its middle), rather than matching at any depth.
fn anchored(rule: &str) -> bool {
    let r = rule.trim_start_matches('!').trim_end_matches('/');
    !r.starts_with("**/") && r.contains('/')
}

/// Whether the rule `rule` has folders in it (a `/` before its last name) one of which
/// is `name` (as a glob, any case): nested at that name, a root's paths would miss it.
fn names_folder(rule: &str, name: &std::ffi::OsStr) -> bool {
    let rule = rule.trim_start_matches('!');
    let Some((dirs, _)) = rule.trim_end_matches('/').rsplit_once('/') else {
        // A rule of one name (`.env`, `*.pem`, `.github/`) matches that name anywhere,
        // a nested root's paths included; the folder itself is checked by the caller.
        return false;
    };
    let name = name.to_string_lossy();
    dirs.split('/')
        .filter(|d| !d.is_empty() && *d != "**")
        .any(|d| {
            globset::GlobBuilder::new(d)
                .case_insensitive(true)
                .build()
                .is_ok_and(|g| g.compile_matcher().is_match(name.as_ref()))
        })
}

/// The canonical name of `p`, resolving what exists of it and appending the rest.
pub fn canonical_lenient(p: &Path) -> PathBuf {
    let mut existing = p.to_path_buf();
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    loop {
        if let Ok(c) = std::fs::canonicalize(&existing) {
            return rest.iter().rev().fold(c, |acc, n| acc.join(n));
        }
        match (existing.file_name(), existing.parent()) {
            (Some(n), Some(parent)) => {
                rest.push(n.to_os_string());
                existing = parent.to_path_buf();
            }
            _ => return p.to_path_buf(),
        }
    }
}

/// Each protected place that lies strictly inside a root: (root index, path under it).
fn protected_in_roots(config: &Config, roots: &[Root]) -> Vec<(usize, PathBuf)> {
    let mut out = Vec::new();
    for dir in protected_dirs(config) {
        for (i, r) in roots.iter().enumerate() {
            if let Ok(rel) = dir.strip_prefix(&r.canonical)
                && !rel.as_os_str().is_empty()
            {
                out.push((i, rel.to_path_buf()));
            }
        }
    }
    out
}

/// Deny patterns, anchored at a root, for each protected directory inside one. A root
/// that lies inside a protected directory is denied whole (`*`).
fn protected_patterns(config: &Config, roots: &[Root]) -> Vec<String> {
    let mut out = Vec::new();
    for dir in protected_dirs(config) {
        for r in roots {
            if let Ok(rel) = dir.strip_prefix(&r.canonical) {
                if rel.as_os_str().is_empty() {
                    out.push("*".to_string());
                } else {
                    // No trailing `/`: the audit log is a file, and a file standing where
                    // a protected directory would be is denied too.
                    out.push(format!("/{}", glob_escape(&rel.to_string_lossy())));
                }
            } else if r.canonical.starts_with(&dir) {
                out.push("*".to_string());
            }
        }
    }
    out
}

/// The longest name (one path component) ferret makes, in bytes: Linux's `NAME_MAX`,
/// and what APFS takes in UTF-8 (NTFS takes 255 UTF-16 units, never fewer bytes' worth).
pub const NAME_MAX: usize = 255;

/// A literal name as a gitignore pattern: every glob metacharacter escaped.
fn glob_escape(s: &str) -> String {
    let mut e = String::with_capacity(s.len() + 4);
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '\\' | '!' | '#') {
            e.push('\\');
        }
        e.push(c);
    }
    e
}

/// Refuses a change to the workspace-relative name `rel` when it is not UTF-8: such a
/// name is read (its reference form quotes the bytes) but not changed, since the undo
/// journal, backups and trash records carry names as UTF-8. Checked before anything is
/// written (a backup, a staging folder, a directory), so a refusal leaves no trace.
/// Nor is a name with a component longer than [`NAME_MAX`] bytes made: no filesystem
/// takes it, and found only at the last `openat` it left the folders made on the way
/// (round 24).
pub fn changeable_name(rel: &std::path::Path) -> crate::error::ToolResult<()> {
    if let Some(long) = rel.iter().find(|c| c.as_encoded_bytes().len() > NAME_MAX) {
        return Err(crate::error::ToolError::new(
            crate::error::ErrorCode::InvalidArgument,
            format!(
                "{}: a name in it is {} bytes long, over the {NAME_MAX} bytes a filesystem takes; nothing was changed",
                reference(rel.as_os_str().as_encoded_bytes()),
                long.as_encoded_bytes().len()
            ),
        )
        .with_hint("shorten the name; no file can have it here"));
    }
    if rel.to_str().is_some() {
        return Ok(());
    }
    Err(crate::error::ToolError::new(
        crate::error::ErrorCode::InvalidArgument,
        format!(
            "{} is not a UTF-8 name: ferret reads such names but does not change, move, delete or create \
             them (its undo journal records names as UTF-8); nothing was changed",
            reference(rel.as_os_str().as_encoded_bytes())
        ),
    )
    .with_hint(
        "read_file and get_file_info work on it as it is; to change it, have the person rename it to a \
         UTF-8 name outside ferret (mv, or convmv -f latin1 -t utf8), then use that name",
    ))
}

/// The JSON (reference) form of a `/`-separated name given as bytes: the exact name when
/// it is UTF-8 and no component starts with `"`; otherwise [`quote`]d, so that it reads
/// back ([`unquote_path`]) as these bytes and cannot be taken for another name.
pub fn reference(name: &[u8]) -> String {
    match std::str::from_utf8(name) {
        Ok(s) if !starts_quoted(s) => s.to_string(),
        _ => quote(name),
    }
}

/// Whether some component of `s` starts with `"`: such a string is read as quoted.
fn starts_quoted(s: &str) -> bool {
    s.split('/').any(|c| c.starts_with('"'))
}

/// A character that is shown escaped in a quoted name: one that could pass for the
/// text's structure or hide what the name is. The rule is by what is plain, not by a
/// list of the odd: a name is shown as it is only if every character is ASCII graphic or
/// a space, or a non-ASCII letter or digit ([`char::is_alphanumeric`]) that is neither
/// invisible nor shaped like `/`, `\` or `"` ([`LOOKALIKE_LETTERS`]). Everything else
/// (controls, format and direction characters, combining marks, symbols, punctuation,
/// whitespace other than a space, U+FFFD, tags) is odd, so that the NFD `cafe\u{301}.txt`
/// never reads like the NFC `café.txt`.
fn odd(c: char) -> bool {
    if c.is_ascii() {
        return !(c.is_ascii_graphic() || c == ' ');
    }
    !c.is_alphanumeric() || LOOKALIKE_LETTERS.contains(&c)
}

/// Letters (by [`char::is_alphanumeric`]) that are invisible, or drawn as a `/`, `\` or
/// `"`: shown escaped all the same.
const LOOKALIKE_LETTERS: &[char] = &[
    // Hangul fillers: letters that draw nothing
    '\u{115F}', '\u{1160}', '\u{3164}', '\u{FFA0}',
    // Khmer inherent vowels (invisible)
    '\u{17B4}', '\u{17B5}',
    // `/`-shaped: katakana NO (and its half-width form), CJK strokes, Coptic esh,
    // the upper half of the vertical kana repeat mark
    '\u{30CE}', '\u{FF89}', '\u{4E3F}', '\u{2CC6}', '\u{3033}', '\u{3035}',
    // `\`-shaped
    '\u{4E40}', '\u{4E36}',
    // `"`-shaped modifier letters (double prime, double apostrophe)
    '\u{02BA}', '\u{02EE}',
];

/// Whether a name must be shown quoted in text: it could be taken for another name or
/// for the text's own structure.
fn needs_quotes(s: &str) -> bool {
    s.contains('\\')
        || s.chars().any(odd)
        || s.split('/')
            .any(|c| c.starts_with('"') || c.starts_with(' ') || c.ends_with(' '))
}

/// `name` quoted and escaped as a Rust string literal escapes (`\\`, `\"`, `\n`,
/// `\u{202e}`), plus `\xNN` for each byte that is not UTF-8: `"a\\b.txt"`. Only `\`, `"`
/// and [odd](odd) characters are escaped; the rest is as it is.
pub fn quote(name: &[u8]) -> String {
    let mut q = String::with_capacity(name.len() + 8);
    q.push('"');
    for chunk in name.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '\\' || c == '"' {
                q.push('\\');
                q.push(c);
            } else if odd(c) {
                q.extend(c.escape_default());
            } else {
                q.push(c);
            }
        }
        for b in chunk.invalid() {
            q.push_str(&format!("\\x{b:02x}"));
        }
    }
    q.push('"');
    q
}

/// Reads a path as ferret writes names: `/`-separated components, where a component
/// starting with `"` opens a quoted part ([`quote`]) running to its closing `"`, which
/// must end the path or be followed by `/`. `None` when a quoted part is malformed.
/// A path without a component starting with `"` is returned as it is.
pub fn unquote_path(input: &str) -> Option<Vec<u8>> {
    if !starts_quoted(input) {
        return Some(input.as_bytes().to_vec());
    }
    let mut out = Vec::with_capacity(input.len());
    let mut chars = input.chars().peekable();
    let mut at_start = true;
    while let Some(c) = chars.next() {
        if c == '"' && at_start {
            loop {
                match chars.next()? {
                    '"' => break,
                    '\\' => match chars.next()? {
                        '\\' => out.push(b'\\'),
                        '"' => out.push(b'"'),
                        '\'' => out.push(b'\''),
                        'n' => out.push(b'\n'),
                        'r' => out.push(b'\r'),
                        't' => out.push(b'\t'),
                        '0' => out.push(0),
                        'x' => {
                            let hex: String = [chars.next()?, chars.next()?].iter().collect();
                            out.push(u8::from_str_radix(&hex, 16).ok()?);
                        }
                        'u' => {
                            if chars.next()? != '{' {
                                return None;
                            }
                            let mut hex = String::new();
                            loop {
                                match chars.next()? {
                                    '}' => break,
                                    h if h.is_ascii_hexdigit() && hex.len() < 6 => hex.push(h),
                                    _ => return None,
                                }
                            }
                            let c = char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?;
                            out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                        }
                        _ => return None,
                    },
                    c => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
                }
            }
            // A quoted part ends its component.
            match chars.peek() {
                None | Some('/') => {}
                Some(_) => return None,
            }
            at_start = false;
            continue;
        }
        out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
        at_start = c == '/';
    }
    Some(out)
}

/// A path as the text a model reads shows it: as it is, unless it could be taken for
/// another name or for the text's own structure: a `\` (a character of a name, never a
/// separator: `a\b.txt` is not `a/b.txt`), a control character (a newline would start a
/// line of its own: a file named `x\n[FILE] /etc/passwd`), a character changing the
/// text's direction or of zero width, a look-alike of `/`, `\` or `"` (U+2215, U+FF0F…),
/// whitespace other than a space, a space at either end of a component, a component
/// starting with `"`, a `:` followed by digits and then `:` or the end (`config.py:12:x`
/// and `a:3` read as a grep line or a count in every output), or U+FFFD; in short, any character but ASCII graphic, a space, or a
/// non-ASCII letter or digit that is neither invisible nor shaped like `/`, `\` or `"`
/// (see `odd`). Those are shown [`quote`]d: `"a\\b.txt"`. `path` is a
/// name as [`Workspace::display`] gives it; one already quoted is shown as it is. Either
/// form, passed back, names the same object.
pub fn shown(path: &str) -> std::borrow::Cow<'_, str> {
    if path.starts_with('"') || !(needs_quotes(path) || numbered(path, b":")) {
        path.into()
    } else {
        quote(path.as_bytes()).into()
    }
}

/// [`shown`] for a name set in prose (a question the person answers, a history line): a
/// name holding a space is quoted as well, so that where it ends is never in doubt
/// (`deleting ".github/ok. Nothing here is on the confirm list"`, not the name running
/// into ferret's own words). Passed back, it names the same object.
pub fn shown_in_prose(path: &str) -> std::borrow::Cow<'_, str> {
    if path.contains(' ') && !path.starts_with('"') {
        quote(path.as_bytes()).into()
    } else {
        shown(path)
    }
}

/// Whether `path` holds one of `seps` followed by digits and then one of `seps` or its
/// end: `b.rs:7:x` and `a:3` (with `:`), `b-7-x` (with `-`), what grep's lines
/// (`path:line:text`, `path-line-text`) and counts (`path:count`) look like.
fn numbered(path: &str, seps: &[u8]) -> bool {
    let b = path.as_bytes();
    b.iter().enumerate().any(|(i, &c)| {
        if !seps.contains(&c) {
            return false;
        }
        let digits = b[i + 1..].iter().take_while(|d| d.is_ascii_digit()).count();
        digits > 0 && (i + 1 + digits == b.len() || seps.contains(&b[i + 1 + digits]))
    })
}

/// [`shown`] for a line that goes on with `:N:` or `-N-` (grep's `path:line:text`): a
/// path that itself holds a `:` or `-` followed by digits and then `:`, `-` or its end
/// (`b.rs:7:x`) is quoted as well, so that no line can be read as another file's hit.
pub fn shown_in_line(path: &str) -> std::borrow::Cow<'_, str> {
    if numbered(path, b":-") && !path.starts_with('"') {
        quote(path.as_bytes()).into()
    } else {
        shown(path)
    }
}

#[cfg(test)]
mod shown_tests {
    use super::{reference, shown, shown_in_line, unquote_path};

    #[test]
    fn plain_names_are_shown_as_they_are() {
        for n in [
            "a.txt",
            "dir/b c.rs",
            "ünïcødé/日本.md",
            "a\"b",
            "tab-less name.txt",
        ] {
            assert_eq!(shown(n), n);
        }
    }

    #[test]
    fn names_that_could_pass_for_structure_are_quoted_and_escaped() {
        assert_eq!(shown("x\n[FILE] /etc/passwd"), "\"x\\n[FILE] /etc/passwd\"");
        assert_eq!(shown("a\rb"), "\"a\\rb\"");
        assert_eq!(shown("\u{1b}[31mred"), "\"\\u{1b}[31mred\"");
        assert_eq!(shown("bad\u{FFFD}.txt"), "\"bad\\u{fffd}.txt\"");
        assert_eq!(shown("evil\u{202E}txt.exe"), "\"evil\\u{202e}txt.exe\"");
        assert_eq!(shown("q\"\n"), "\"q\\\"\\n\"");
        // One line, whatever the name.
        assert!(!shown("a\nb\n\nc").contains('\n'));
    }

    #[test]
    fn names_that_could_be_taken_for_another_are_quoted() {
        assert_eq!(shown("a\\b.txt"), "\"a\\\\b.txt\"");
        assert_eq!(shown("a\u{2215}b.txt"), "\"a\\u{2215}b.txt\"");
        assert_eq!(shown("a\u{FF0F}b.txt"), "\"a\\u{ff0f}b.txt\"");
        assert_eq!(shown("a.txt "), "\"a.txt \"");
        assert_eq!(shown("dir /a.txt"), "\"dir /a.txt\"");
        assert_eq!(shown("a\u{200B}.txt"), "\"a\\u{200b}.txt\"");
        // already quoted (a reference form): as it is
        assert_eq!(shown("\"\\\"x\\\"\""), "\"\\\"x\\\"\"");
    }

    #[test]
    fn every_rendering_reads_back_as_its_name_and_no_other() {
        let names: Vec<Vec<u8>> = [
            &b"a\\b.txt"[..],
            b"a/b.txt",
            b"\"a\\\\b.txt\"",
            b"\"a\\b.txt\"",
            b"dir/\"x\"",
            b"dir/\"x",
            b"x\"",
            b"a.txt ",
            b" a.txt",
            b"a\nb",
            b"bad\xff\xfe.txt",
            "a\u{2215}b.txt".as_bytes(),
            "a\u{FF0F}b.txt".as_bytes(),
            "a\u{FFFD}.txt".as_bytes(),
            b"\\x41",
            b"q\\u{41}",
            b".",
            b"plain/name.rs",
        ]
        .iter()
        .map(|n| n.to_vec())
        .collect();
        let mut seen = std::collections::HashSet::new();
        for n in &names {
            let json = reference(n);
            let text = shown(&json).into_owned();
            assert_eq!(unquote_path(&json).as_deref(), Some(&n[..]), "{json}");
            assert_eq!(unquote_path(&text).as_deref(), Some(&n[..]), "{text}");
            assert!(seen.insert(json.clone()), "two names render as {json}");
            if text != json {
                assert!(seen.insert(text.clone()), "two names render as {text}");
            }
        }
        for bad in [
            "\"abc",
            "\"a\\q\"",
            "\"a\"b",
            "\"\\u{110000}\"",
            "\"\\xZZ\"",
        ] {
            assert_eq!(unquote_path(bad), None, "{bad}");
        }
    }

    #[test]
    fn grep_lines_quote_paths_that_look_numbered() {
        assert_eq!(shown_in_line("b.rs:7:x"), "\"b.rs:7:x\"");
        assert_eq!(shown_in_line("a.txt-3-x"), "\"a.txt-3-x\"");
        assert_eq!(shown_in_line("a:12"), "\"a:12\"");
        assert_eq!(shown_in_line("file-2.txt"), "file-2.txt");
        assert_eq!(shown_in_line("src/main.rs"), "src/main.rs");
    }
}

//! Path resolution beneath a root, one component at a time, over directory handles.
//!
//! This is the only place a workspace path becomes an open object. Each component is
//! looked at through the handle of the directory that holds it (`fstatat` with
//! `AT_SYMLINK_NOFOLLOW`), directories are entered with `openat(O_NOFOLLOW)`, and a
//! symbolic link is read (`readlinkat`) and its target spliced into the components still
//! to walk. Nothing is ever resolved by the kernel from a path string, and no ambient
//! (non-handle) syscall is made, so:
//!
//! - the deny rules are checked on the real name of every component *before* it is
//!   looked at: a link to `.env`, to `.ssh/`, or through `../<root>/.env` is denied,
//!   whether or not its target exists — no answer reveals whether a secret exists;
//! - a link that leaves the root is followed only lexically while it retraces the root's
//!   own canonical path (whose components are real directories, not links); anything
//!   else outside is `PATH_ESCAPE`, and nothing outside is ever opened;
//! - the handles returned are the directories that were checked: a directory swapped
//!   for a symlink after the walk cannot redirect what the caller does with them.

use super::{Root, WsPath};
use crate::error::{ErrorCode, ToolError};
use cap_fs_ext::DirExt;
use cap_std::fs::{Dir, Metadata};
use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Component, Path, PathBuf};

/// How many symlinks one resolution may pass through before it is called a loop
/// (Linux's own limit).
const MAX_SYMLINK_HOPS: usize = 40;

/// The outcome of walking a workspace path.
#[derive(Debug)]
pub struct Resolved {
    /// The real path: every symlink on the way resolved (the final one too when followed).
    pub real: WsPath,
    /// The directory that holds `real`, opened beneath the root (the root itself for a
    /// root). `None` when more than the final component is missing.
    pub parent: Option<Dir>,
    /// What stands at `real` (a final symlink not followed is reported as a symlink);
    /// `None` when nothing does.
    pub meta: Option<Metadata>,
}

impl Resolved {
    /// The final component's name; `None` for a root.
    pub fn name(&self) -> Option<&OsStr> {
        self.real.rel.file_name()
    }
}

enum Tok {
    Up,
    Name(OsString),
}

fn toks(path: &Path) -> impl Iterator<Item = Tok> + '_ {
    path.components().filter_map(|c| match c {
        Component::Normal(n) => Some(Tok::Name(n.to_os_string())),
        Component::ParentDir => Some(Tok::Up),
        _ => None,
    })
}

/// Why a walk failed, before it becomes a [`ToolError`] (the caller knows how to name
/// the path).
pub enum WalkError {
    /// The real name (so far) matches a deny rule.
    Denied(PathBuf),
    /// The path leads outside the root through a symlink.
    Escape,
    /// Too many symlinks.
    Loop,
    /// A component that must be a directory is not one.
    NotADirectory(PathBuf),
    /// The tree changed during the walk (a directory became a link), or another I/O error.
    Io(io::Error),
}

/// Walks `rel` beneath `root`. `denied(path)` says whether a real name (any type) is a
/// secret; it is asked before each component is looked at.
pub fn walk(
    root: &Root,
    root_index: usize,
    rel: &Path,
    follow_final: bool,
    denied: &dyn Fn(&Path) -> bool,
) -> Result<Resolved, WalkError> {
    let canon: Vec<OsString> = root
        .canonical
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            _ => None,
        })
        .collect();
    let mut queue: VecDeque<Tok> = toks(rel).collect();
    // Directories entered below the root, in step with `names` (the final name, once
    // reached, has no entry here).
    let mut stack: Vec<Dir> = Vec::new();
    let mut names = PathBuf::new();
    let mut depth = 0usize;
    // Where a link led above the root: the absolute components, lexically.
    let mut outside: Option<Vec<OsString>> = None;
    let mut missing = false;
    let mut meta: Option<Metadata> = None;
    let mut hops = 0usize;

    while let Some(tok) = queue.pop_front() {
        if let Some(abs) = &mut outside {
            match tok {
                Tok::Up => {
                    abs.pop();
                }
                // Back down only along the root's own canonical path.
                Tok::Name(n) if abs.len() < canon.len() && canon[abs.len()] == n => {
                    abs.push(n);
                    if abs.len() == canon.len() {
                        outside = None;
                    }
                }
                Tok::Name(_) => return Err(WalkError::Escape),
            }
            continue;
        }
        match tok {
            Tok::Up => {
                if missing {
                    // `missing/..` does not exist either (the kernel would say ENOENT).
                    break;
                }
                if depth == 0 {
                    if canon.is_empty() {
                        continue; // `/..` is `/`
                    }
                    outside = Some(canon[..canon.len() - 1].to_vec());
                } else {
                    names.pop();
                    stack.pop();
                    depth -= 1;
                }
            }
            Tok::Name(n) => {
                let here = names.join(&n);
                if denied(&here) {
                    return Err(WalkError::Denied(here));
                }
                if missing {
                    names = here;
                    depth += 1;
                    continue;
                }
                let cur = stack.last().unwrap_or(&root.dir);
                let m = match cur.symlink_metadata(&n) {
                    Ok(m) => m,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {
                        missing = true;
                        names = here;
                        depth += 1;
                        continue;
                    }
                    Err(e) => return Err(WalkError::Io(e)),
                };
                let last = queue.is_empty();
                if m.is_symlink() && (!last || follow_final) {
                    hops += 1;
                    if hops > MAX_SYMLINK_HOPS {
                        return Err(WalkError::Loop);
                    }
                    let target = cur.read_link_contents(&n).map_err(WalkError::Io)?;
                    let mut spliced: Vec<Tok> = Vec::new();
                    if target.is_absolute() {
                        // A link to the root by the name it was given (an alias of its
                        // canonical path) counts as a link to the root.
                        let target = match target.strip_prefix(&root.path) {
                            Ok(rest) => root.canonical.join(rest),
                            Err(_) => target,
                        };
                        stack.clear();
                        names = PathBuf::new();
                        depth = 0;
                        if !canon.is_empty() {
                            outside = Some(Vec::new());
                        }
                        spliced.extend(toks(&target));
                    } else {
                        spliced.extend(toks(&target));
                    }
                    for t in spliced.into_iter().rev() {
                        queue.push_front(t);
                    }
                    continue;
                }
                if last {
                    names = here;
                    depth += 1;
                    meta = Some(m);
                } else if m.is_dir() {
                    // Not following: a swap since the fstatat fails here (ELOOP/ENOTDIR).
                    let d = cur.open_dir_nofollow(&n).map_err(WalkError::Io)?;
                    stack.push(d);
                    names = here;
                    depth += 1;
                } else {
                    return Err(WalkError::NotADirectory(here));
                }
            }
        }
    }
    if outside.is_some() {
        return Err(WalkError::Escape);
    }
    let real = WsPath {
        root: root_index,
        rel: names,
    };
    if real.is_root() {
        let d = root.dir.try_clone().map_err(WalkError::Io)?;
        let m = d.dir_metadata().map_err(WalkError::Io)?;
        return Ok(Resolved {
            real,
            parent: Some(d),
            meta: Some(m),
        });
    }
    // The parent is open when every component but the last exists.
    let parent = if stack.len() + 1 == depth {
        Some(match stack.pop() {
            Some(d) => d,
            None => root.dir.try_clone().map_err(WalkError::Io)?,
        })
    } else {
        None
    };
    Ok(Resolved { real, parent, meta })
}

impl WalkError {
    /// The error a tool returns, naming the path as the agent gave it (`shown`).
    pub fn into_tool_error(self, shown: &str, display_real: impl Fn(&Path) -> String) -> ToolError {
        match self {
            WalkError::Denied(real) => {
                let real = display_real(&real);
                // The real name only when it says something (a link to itself is one name).
                if real == shown {
                    super::denied_error(shown)
                } else {
                    super::denied_error(&format!("{shown} (-> {real})"))
                }
            }
            WalkError::Escape => ToolError::new(
                ErrorCode::PathEscape,
                format!("{shown} leads outside the workspace through a symbolic link"),
            )
            .with_hint("symbolic links are followed only while they stay inside the workspace"),
            WalkError::Loop => ToolError::new(
                ErrorCode::IoError,
                format!("{shown}: too many levels of symbolic links (a link that leads back to itself, or a chain over 40 long)"),
            )
            .with_hint("it names no file: list its directory to see the link, then delete it or point it elsewhere"),
            WalkError::NotADirectory(p) => ToolError::new(
                ErrorCode::NotADirectory,
                format!("{shown}: {} is not a directory", display_real(&p)),
            ),
            WalkError::Io(e) => super::raced_or_io(shown, &e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    struct T {
        _tmp: tempfile::TempDir,
        root: Root,
        outside: PathBuf,
    }

    fn tree() -> T {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let r = base.join("r");
        std::fs::create_dir_all(r.join("d/e")).unwrap();
        std::fs::create_dir_all(base.join("out")).unwrap();
        std::fs::write(r.join("d/e/f.txt"), "f").unwrap();
        std::fs::write(r.join(".env"), "s").unwrap();
        symlink("d/e/f.txt", r.join("to_f")).unwrap();
        symlink("to_f", r.join("chain")).unwrap();
        symlink("../r/d", r.join("round")).unwrap();
        symlink("../out", r.join("out_rel")).unwrap();
        symlink(base.join("out"), r.join("out_abs")).unwrap();
        symlink(r.join("d"), r.join("in_abs")).unwrap();
        symlink("d/../.env", r.join("dotdot_env")).unwrap();
        symlink("nothere", r.join("dangling")).unwrap();
        symlink("l2", r.join("l1")).unwrap();
        symlink("l1", r.join("l2")).unwrap();
        let dir = Dir::open_ambient_dir(&r, cap_std::ambient_authority()).unwrap();
        T {
            root: Root {
                name: "r".into(),
                path: r.clone(),
                canonical: r,
                dir,
            },
            outside: base.join("out"),
            _tmp: tmp,
        }
    }

    fn never(_: &Path) -> bool {
        false
    }

    fn real(t: &T, p: &str, follow: bool) -> PathBuf {
        match walk(&t.root, 0, Path::new(p), follow, &never) {
            Ok(r) => r.real.rel,
            Err(_) => panic!("{p} did not resolve"),
        }
    }

    fn fails(t: &T, p: &str) -> WalkError {
        match walk(&t.root, 0, Path::new(p), true, &never) {
            Ok(r) => panic!("{p} resolved to {:?}", r.real.rel),
            Err(e) => e,
        }
    }

    #[test]
    fn a_plain_path_is_its_own_real_path() {
        let t = tree();
        let r = walk(&t.root, 0, Path::new("d/e/f.txt"), true, &never)
            .ok()
            .unwrap();
        assert_eq!(r.real.rel, Path::new("d/e/f.txt"));
        assert!(r.meta.unwrap().is_file());
        assert!(r.parent.is_some());
    }

    #[test]
    fn links_are_followed_to_the_real_name() {
        let t = tree();
        assert_eq!(real(&t, "chain", true), Path::new("d/e/f.txt"));
        assert_eq!(real(&t, "round/e/f.txt", true), Path::new("d/e/f.txt"));
        assert_eq!(real(&t, "in_abs/e", true), Path::new("d/e"));
        assert_eq!(real(&t, "dotdot_env", true), Path::new(".env"));
    }

    #[test]
    fn a_final_link_is_kept_when_not_followed() {
        let t = tree();
        let r = walk(&t.root, 0, Path::new("chain"), false, &never)
            .ok()
            .unwrap();
        assert_eq!(r.real.rel, Path::new("chain"));
        assert!(r.meta.unwrap().is_symlink());
    }

    #[test]
    fn links_out_of_the_root_escape() {
        let t = tree();
        assert!(matches!(fails(&t, "out_rel"), WalkError::Escape));
        assert!(matches!(fails(&t, "out_abs/x"), WalkError::Escape));
        assert!(t.outside.exists());
    }

    #[test]
    fn missing_names_resolve_lexically_without_a_parent_past_the_first() {
        let t = tree();
        let r = walk(&t.root, 0, Path::new("dangling"), true, &never)
            .ok()
            .unwrap();
        assert_eq!(r.real.rel, Path::new("nothere"));
        assert!(r.meta.is_none() && r.parent.is_some());
        let r = walk(&t.root, 0, Path::new("no/such"), true, &never)
            .ok()
            .unwrap();
        assert!(r.meta.is_none() && r.parent.is_none());
    }

    #[test]
    fn deny_is_asked_on_real_names_before_looking() {
        let t = tree();
        let asked = std::cell::RefCell::new(Vec::new());
        let deny = |p: &Path| {
            asked.borrow_mut().push(p.to_path_buf());
            p == Path::new(".env")
        };
        let e = walk(&t.root, 0, Path::new("dotdot_env"), true, &deny)
            .err()
            .unwrap();
        assert!(matches!(e, WalkError::Denied(p) if p == Path::new(".env")));
        assert!(asked.borrow().contains(&PathBuf::from("d")));
    }

    #[test]
    fn loops_and_files_in_the_middle_fail() {
        let t = tree();
        assert!(matches!(fails(&t, "l1"), WalkError::Loop));
        assert!(matches!(
            fails(&t, "d/e/f.txt/x"),
            WalkError::NotADirectory(_)
        ));
    }
}

//! Paths as an agent writes them, checked lexically before anything is opened: no `..`,
//! inside a root (whole components compared), not too deep, not denied, an allowed
//! extension. The result is a [`WsPath`]; only [`super::open`] turns one into an object.

use super::{Workspace, WsPath, denied_error};
use crate::error::{ErrorCode, ToolError, ToolResult};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

impl Workspace {
    /// Checks a path as the agent wrote it, without touching the filesystem except to
    /// name an absolute path given through a symlinked alias of a root.
    pub fn resolve(&self, given: &str) -> ToolResult<WsPath> {
        // The path as errors echo it: the agent's string, shown as names are.
        let input = &*super::shown(given);
        if given.is_empty() {
            return Err(
                ToolError::invalid("path is empty").with_hint("use \".\" for the workspace root")
            );
        }
        // Names as ferret shows them: a component starting with `"` is quoted (see
        // `super::quote`); everything below checks the name it stands for.
        let unquoted = super::unquote_path(given).ok_or_else(|| {
            ToolError::invalid(format!(
                "{input}: a path component starting with `\"` is read as a quoted name, and this one does not end its quote or has an unknown escape"
            ))
            .with_hint(
                "give the path exactly as ferret showed it (e.g. \"a\\\\b.txt\"); inside quotes escape `\\` and `\"` as \\\\ and \\\", other characters as \\u{..}",
            )
        })?;
        if unquoted.contains(&0) {
            return Err(ToolError::invalid("path contains a NUL byte"));
        }
        let path: &Path = Path::new(std::ffi::OsStr::from_bytes(&unquoted));
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
    pub(super) fn locate_absolute(&self, path: &Path) -> Option<(usize, PathBuf)> {
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
    /// For a change about to create `real` as a file (or, `is_dir`, a directory): the
    /// name rules a read of it will apply once it exists, the extension above all, which
    /// a path that does not exist yet escapes in [`Workspace::entry`] (its type is not
    /// known there). Checked before anything is made, dry runs included.
    pub fn check_new(&self, real: &WsPath, is_dir: bool) -> ToolResult<()> {
        let shown = self.shown_name(real);
        // A name on the way to ferret's state, config or the trash (when a root holds
        // them, as a root that holds HOME does) is not made anew: a link put at
        // `.local/state` or `.local` would send ferret's backups or the trash wherever it
        // leads, outside the root or into a place the agent reads.
        if self
            .protected_at
            .iter()
            .any(|(root, rel)| *root == real.root && rel.starts_with(&real.rel) && *rel != real.rel)
        {
            return Err(ToolError::new(
                ErrorCode::DeniedPattern,
                format!(
                    "{shown} is on the way to a place ferret keeps for itself (its state, its config or the trash); nothing new is made there"
                ),
            )
            .with_hint("choose another name; if the directory should exist, make it outside ferret"));
        }
        self.check_name(real, &shown, Some(is_dir))
    }

    /// Refuses (`DENIED_PATTERN`) moving or deleting `real` when it is, or holds, a
    /// place ferret keeps for itself (its state, its config, the home trash; when a root
    /// holds them, as a root that holds HOME does), known or not yet made. Round 19:
    /// `.config` and `.local` moved away could not be moved back (nothing new is made on
    /// the way to those places), and a yes to moving `.local` made the home trash
    /// readable at its new name. `verb`: "moved" or "deleted".
    pub fn check_keeps(&self, real: &WsPath, verb: &str) -> ToolResult<()> {
        if self
            .protected_at
            .iter()
            .any(|(root, rel)| *root == real.root && rel.starts_with(&real.rel))
        {
            let shown = self.shown_name(real);
            return Err(ToolError::new(
                ErrorCode::DeniedPattern,
                format!(
                    "{shown} holds a place ferret keeps for itself (its state, its config or the trash); it is not {verb} through ferret"
                ),
            )
            .with_hint("change the entries inside it instead; the user can do this outside ferret"));
        }
        Ok(())
    }

    /// The `settle` of [`Workspace::make_parents`] for a change that was (`asked`) or was
    /// not asked about: the place it really goes, named by the walk that opened it, must
    /// need no question the change did not ask. Otherwise `CONFLICT` and nothing made:
    /// a directory on the way turned into a link to a confirm-listed place during the
    /// call (another process, or another of the agent's own calls).
    pub fn unasked<'a>(
        &'a self,
        asked: bool,
        spelled: &'a WsPath,
    ) -> impl Fn(&WsPath) -> ToolResult<()> + 'a {
        move |real| {
            if asked || !self.needs_confirmation(real, false) {
                return Ok(());
            }
            Err(ToolError::new(
                ErrorCode::Conflict,
                format!(
                    "{} now leads to {}, which is on the confirm list (a directory on the way changed during the call); nothing was changed",
                    self.shown_name(spelled),
                    super::shown_in_prose(&self.display(real))
                ),
            )
            .with_hint("call again: the change will be asked about"))
        }
    }

    pub(super) fn check_name(
        &self,
        p: &WsPath,
        shown: &str,
        is_dir: Option<bool>,
    ) -> ToolResult<()> {
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
        // Whatever the type (a file named `.git` is denied as the folder is), as the
        // resolver and the walks judge it.
        let denied = self.deny.matches_any_type(&p.rel);
        if denied {
            return Err(denied_error(shown));
        }
        if is_dir == Some(false) && !self.extension_allowed(&p.rel) {
            let ext = p
                .rel
                .extension()
                .map(|e| e.to_string_lossy().to_ascii_lowercase())
                .unwrap_or_default();
            {
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
}

/// Drops `.` components and a leading `/` or prefix; `..` never reaches here.
pub(super) fn normalize(path: &Path) -> PathBuf {
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

#[cfg(test)]
mod tests {
    use super::normalize;
    use std::path::Path;

    #[test]
    fn normalize_drops_dots_and_keeps_the_root() {
        assert_eq!(normalize(Path::new("./a/./b/")), Path::new("a/b"));
        assert_eq!(normalize(Path::new("/x/./y")), Path::new("/x/y"));
        assert_eq!(normalize(Path::new(".")), Path::new(""));
        assert_eq!(normalize(Path::new("a//b")), Path::new("a/b"));
    }
}

//! Opening what a [`WsPath`] names: every open goes through [`resolve::walk`], checks the
//! rules on the real name, and hands out handles beneath the root (see the module doc of
//! [`super`]).
//!
//! [`resolve::walk`]: super::resolve::walk

use super::resolve::{self, Resolved};
use super::{Workspace, WsPath, write};
use crate::error::{ErrorCode, ToolError, ToolResult};
use cap_fs_ext::{DirExt, FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, File, Metadata, OpenOptions};
use std::io;

impl Workspace {
    /// The folder the link at `p` leads to, resolved (followed, inside a root, not
    /// denied); `None` when `p` is no link or leads to anything else. A link to a folder
    /// moved puts what that folder holds under its new name, so moves judge it by that
    /// folder.
    pub fn linked_dir(&self, p: &WsPath) -> Option<Resolved> {
        self.entry(p, true)
            .ok()
            .filter(|r| r.meta.as_ref().is_some_and(|m| m.is_dir()))
    }

    /// A digest of what the link at `p` leads to now, walked afresh from its name: where
    /// (a real path, or the error that ends the walk: nothing there, outside, denied) and
    /// the state of what stands there ([`Workspace::state_stamp`]). A move of a link pins
    /// it: a link that led nowhere when asked about, whose folder was then made or moved
    /// in, or a link swapped for another, no longer gives the same digest (round 22).
    pub fn link_leads(&self, p: &WsPath, check: &dyn Fn() -> ToolResult<()>) -> ToolResult<u64> {
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        match self.entry(p, true) {
            Ok(r) => {
                h.update(&(r.real.root_index() as u64).to_le_bytes());
                h.update(r.real.rel().as_os_str().as_encoded_bytes());
                h.update(&[0]);
                match self.state_stamp(&r, check)? {
                    Some(stamp) => h.update(&stamp.to_le_bytes()),
                    None => h.update(b"nothing"),
                }
            }
            Err(e) => {
                h.update(b"\0refused\0");
                h.update(e.code.as_str().as_bytes());
            }
        }
        Ok(h.digest())
    }

    /// Walks `p` to its real path beneath the root (see [`resolve`]) and checks the
    /// rules on the real name: deny before every component is looked at, depth and
    /// extension once the type is known. `follow` says whether a final symlink is
    /// followed (reading it) or is itself the object (deleting it).
    pub fn entry(&self, p: &WsPath, follow: bool) -> ToolResult<Resolved> {
        let shown = self.shown_name(p);
        let root = &self.roots[p.root];
        let deny = &self.deny;
        let r = resolve::walk(root, p.root, &p.rel, follow, &|rel| {
            deny.matches_any_type(rel)
        })
        .map_err(|e| {
            e.into_tool_error(&shown, |real| {
                self.shown_name(&WsPath {
                    root: p.root,
                    rel: real.to_path_buf(),
                })
            })
        })?;
        let named = if r.real.rel == p.rel {
            shown
        } else {
            format!("{shown} (-> {})", self.shown_name(&r.real))
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
        let shown = self.shown_name(p);
        let r = self.entry(p, true)?;
        // The root has no parent to open it from: a directory, not a missing file.
        if r.real.is_root() {
            return Err(
                ToolError::new(ErrorCode::IsADirectory, format!("{shown} is a directory"))
                    .with_hint("use list_directory for directories"),
            );
        }
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
        let shown = self.shown_name(p);
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
        Ok(self.holds(at, &self.deny, check)?.is_some())
    }

    /// The first entry on the confirm list that the directory `at` holds at any depth,
    /// if any: deleting or moving it changes that entry, which asks as changing it
    /// would, and the question names it.
    pub fn holds_confirm_listed(
        &self,
        at: &Resolved,
        check: &dyn Fn() -> ToolResult<()>,
    ) -> ToolResult<Option<WsPath>> {
        Ok(self.holds(at, &self.confirm, check)?.map(|rel| WsPath {
            root: at.real.root,
            rel,
        }))
    }

    /// The first entry on the confirm list that moving the directory `at` to `to`
    /// moves, if any: one inside it now, or one its entries become at `to` (an
    /// anchored pattern), named where it would stand.
    pub fn move_holds_confirm_listed(
        &self,
        at: &Resolved,
        to: &WsPath,
        check: &dyn Fn() -> ToolResult<()>,
    ) -> ToolResult<Option<WsPath>> {
        if let Some(held) = self.holds_confirm_listed(at, check)? {
            return Ok(Some(held));
        }
        let shown = self.shown_name(&at.real);
        let (Some(parent), Some(name)) = (&at.parent, at.name()) else {
            return Ok(None);
        };
        let dir = parent
            .open_dir_nofollow(name)
            .map_err(|e| raced_or_io(&shown, &e))?;
        Ok(self
            .tree_holds(dir, to.rel.clone(), &shown, &self.confirm, check)?
            .map(|rel| WsPath { root: to.root, rel }))
    }

    /// How moving the directory `at` to `to` would change what the deny rules guard,
    /// if it would: an entry that would stand at a name they match where it does not
    /// now (`k/config` moved as `.kube` becomes `.kube/config`: a secret's name made by
    /// a move), or one they match now that would stand at a name they do not (`.docker`
    /// moved as `dock` makes `.docker/config.json` readable as `dock/config.json`: a
    /// secret given away by a move, round 24). Walked through handles, never following
    /// a link, within `check` and `max_path_depth`.
    ///
    /// With `look_at_denied` false (a dry run), the entries the rules guard now are
    /// passed over unlooked at, so the answer is the same whatever secrets the folder
    /// holds (round 25: a dry run's `DENIED_PATTERN` told which `.kube` held `config`);
    /// the real run then refuses what would give one away.
    pub fn move_changes_denied(
        &self,
        at: &Resolved,
        to: &WsPath,
        look_at_denied: bool,
        check: &dyn Fn() -> ToolResult<()>,
    ) -> ToolResult<Option<DenyChange>> {
        let shown = self.shown_name(&at.real);
        let (Some(parent), Some(name)) = (&at.parent, at.name()) else {
            return Ok(None);
        };
        let dir = parent
            .open_dir_nofollow(name)
            .map_err(|e| raced_or_io(&shown, &e))?;
        let mut stack = vec![(dir, std::path::PathBuf::new())];
        while let Some((dir, here)) = stack.pop() {
            check()?;
            for entry in dir.entries().map_err(|e| ToolError::io(&shown, &e))? {
                let entry = entry.map_err(|e| ToolError::io(&shown, &e))?;
                let ft = entry.file_type().map_err(|e| ToolError::io(&shown, &e))?;
                let here = here.join(entry.file_name());
                let old = at.real.rel.join(&here);
                let new = to.rel.join(&here);
                let (was, would) = if ft.is_dir() {
                    (self.deny.matches(&old, true), self.deny.matches(&new, true))
                } else {
                    (
                        self.deny.matches_any_type(&old),
                        self.deny.matches_any_type(&new),
                    )
                };
                // What the rules guard now is judged before its depth is: the levels of
                // a hidden `.git` are nothing the agent may learn (round 25).
                if was {
                    if look_at_denied && !would {
                        return Ok(Some(DenyChange::Exposes));
                    }
                    // A denied folder is asked about as a whole (holds_denied).
                    continue;
                }
                let limit = self.max_path_depth();
                if limit > 0 && to.rel.join(&here).components().count() > limit {
                    return Err(ToolError::new(
                        ErrorCode::PathTooDeep,
                        format!("{shown} holds entries deeper than {limit} levels once moved: ferret cannot check what they are"),
                    )
                    .with_hint("move it outside ferret, or raise max_path_depth"));
                }
                // Nor is a link inside put at a name whose contents a deny rule guards,
                // as a link moved itself is not: what is written through it later lands
                // where the agent reads it (round 23: `w/prod -> ../data` moved as
                // `deploy/prod`, under a rule `deploy/prod/creds.txt`).
                let guarded_link = ft.is_symlink()
                    && here
                        .file_name()
                        .is_some_and(|n| self.names_denied_folder(n));
                if would || guarded_link {
                    return Ok(Some(DenyChange::Makes(WsPath {
                        root: to.root,
                        rel: new,
                    })));
                }
                // Nor does a move carry a file `allowed_extensions` does not serve to a
                // name of its own: no tool shows it, and no tool makes it (round 24).
                if !ft.is_dir() && !self.extension_allowed(&new) {
                    return Ok(Some(DenyChange::Unserved));
                }
                if ft.is_dir() {
                    let sub = dir
                        .open_dir_nofollow(entry.file_name())
                        .map_err(|e| raced_or_io(&shown, &e))?;
                    stack.push((sub, here));
                }
            }
        }
        Ok(None)
    }

    /// The first entry on the confirm list the directory `dir` (anywhere: the trash)
    /// would hold were it at `rel` in a root, relative to that root: restoring it
    /// changes that entry.
    pub fn tree_holds_confirm_listed(
        &self,
        dir: Dir,
        rel: &std::path::Path,
        shown: &str,
        check: &dyn Fn() -> ToolResult<()>,
    ) -> ToolResult<Option<std::path::PathBuf>> {
        self.tree_holds(dir, rel.to_path_buf(), shown, &self.confirm, check)
    }

    /// Whether the directory `dir` (anywhere: the trash) would hold an entry the deny
    /// rules match were it at `rel` in a root: restoring it brings secrets or VCS
    /// internals back, which asks as moving such a folder does.
    pub fn tree_holds_denied(
        &self,
        dir: Dir,
        rel: &std::path::Path,
        shown: &str,
        check: &dyn Fn() -> ToolResult<()>,
    ) -> ToolResult<bool> {
        Ok(self
            .tree_holds(dir, rel.to_path_buf(), shown, &self.deny, check)?
            .is_some())
    }

    fn holds(
        &self,
        at: &Resolved,
        set: &super::PatternSet,
        check: &dyn Fn() -> ToolResult<()>,
    ) -> ToolResult<Option<std::path::PathBuf>> {
        let shown = self.shown_name(&at.real);
        let (Some(parent), Some(name)) = (&at.parent, at.name()) else {
            return Ok(None);
        };
        let dir = parent
            .open_dir_nofollow(name)
            .map_err(|e| raced_or_io(&shown, &e))?;
        self.tree_holds(dir, at.real.rel.clone(), &shown, set, check)
    }

    fn tree_holds(
        &self,
        dir: Dir,
        rel: std::path::PathBuf,
        shown: &str,
        set: &super::PatternSet,
        check: &dyn Fn() -> ToolResult<()>,
    ) -> ToolResult<Option<std::path::PathBuf>> {
        let shown = shown.to_string();
        let mut stack = vec![(dir, rel)];
        while let Some((dir, rel)) = stack.pop() {
            check()?;
            let entries = dir.entries().map_err(|e| ToolError::io(&shown, &e))?;
            for entry in entries {
                let entry = entry.map_err(|e| ToolError::io(&shown, &e))?;
                let ft = entry.file_type().map_err(|e| ToolError::io(&shown, &e))?;
                let here = rel.join(entry.file_name());
                // ferret's own staging file of a change in flight is no secret (it is
                // denied so no agent reads or feeds it): it does not make a delete ask.
                // The change then finds its folder gone and is refused, unchanged.
                let for_deny = std::ptr::eq(set, &self.deny);
                if ft.is_file()
                    && for_deny
                    && super::write::is_temp_name(entry.file_name().as_os_str())
                {
                    continue;
                }
                // A denied entry is judged before anything else, and never named, walked
                // or measured by any other rule: what the agent is told must not depend
                // on it beyond the one reason "holds secrets" (round 25: a confirm-listed
                // destination named `.github/s/.env.production`, and the depth limit
                // counted the levels of a hidden `.git`).
                if self.deny.matches_any_type(&here) {
                    if for_deny {
                        return Ok(Some(here));
                    }
                    continue;
                }
                // A tree nested past the depth limit cannot be vouched for: its names are
                // past what any tool may address, and each level checked costs the whole
                // path again (10 000 levels took minutes).
                let limit = self.max_path_depth();
                if limit > 0 && here.components().count() > limit {
                    return Err(ToolError::new(
                        ErrorCode::PathTooDeep,
                        format!(
                            "{shown} holds entries deeper than {limit} levels below the root: ferret cannot check what they are"
                        ),
                    )
                    .with_hint("delete or move it outside ferret, or raise max_path_depth"));
                }
                // Whatever the entry is: a link or a file at a name a directory rule
                // lists (`.github`) counts as the directory would.
                if set.matches_any_type(&here) {
                    return Ok(Some(here));
                }
                if ft.is_dir() {
                    let sub = dir
                        .open_dir_nofollow(entry.file_name())
                        .map_err(|e| raced_or_io(&shown, &e))?;
                    stack.push((sub, here));
                }
            }
        }
        Ok(None)
    }

    /// A digest of the state of what stands at `at` (from [`Workspace::entry`], not
    /// followed): its device, inode, size, mode and times, and for a directory those of
    /// every entry at any depth, with their names. Any write, rename, addition or removal
    /// inside changes it (a change time moves with every one). What a question is pinned
    /// to (`Ctx::pin`); `None` when nothing stands there.
    // The stat fields' types differ from one OS to another: the casts are not all no-ops.
    #[allow(clippy::unnecessary_cast)]
    pub fn state_stamp(
        &self,
        at: &Resolved,
        check: &dyn Fn() -> ToolResult<()>,
    ) -> ToolResult<Option<u64>> {
        use rustix::fs::{AtFlags, statat};
        let shown = self.shown_name(&at.real);
        let (Some(parent), Some(name)) = (&at.parent, at.name()) else {
            return Ok(None);
        };
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        let add =
            |h: &mut xxhash_rust::xxh3::Xxh3, rel: &std::path::Path, st: &rustix::fs::Stat| {
                let (dev, ino) = crate::platform::file_id(st);
                h.update(rel.as_os_str().as_encoded_bytes());
                h.update(&[0]);
                for v in [
                    dev,
                    ino,
                    st.st_size as u64,
                    st.st_mode as u64,
                    st.st_mtime as u64,
                    st.st_mtime_nsec as u64,
                    st.st_ctime as u64,
                    st.st_ctime_nsec as u64,
                ] {
                    h.update(&v.to_le_bytes());
                }
            };
        let Ok(st) = statat(parent, name, AtFlags::SYMLINK_NOFOLLOW) else {
            return Ok(None);
        };
        add(&mut h, std::path::Path::new(""), &st);
        if rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory {
            let dir = parent
                .open_dir_nofollow(name)
                .map_err(|e| raced_or_io(&shown, &e))?;
            let mut stack = vec![(dir, std::path::PathBuf::new())];
            while let Some((dir, rel)) = stack.pop() {
                check()?;
                let mut names = Vec::new();
                for entry in dir.entries().map_err(|e| ToolError::io(&shown, &e))? {
                    names.push(entry.map_err(|e| ToolError::io(&shown, &e))?.file_name());
                }
                // In one order whatever order the directory lists them in.
                names.sort();
                for n in names {
                    let here = rel.join(&n);
                    let limit = self.max_path_depth();
                    if limit > 0 && here.components().count() > limit {
                        return Err(ToolError::new(
                            ErrorCode::PathTooDeep,
                            format!("{shown} holds entries deeper than {limit} levels: ferret cannot check what they are"),
                        )
                        .with_hint("move it outside ferret, or raise max_path_depth"));
                    }
                    let Ok(st) = statat(&dir, n.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) else {
                        // Gone meanwhile: a change, as the digest says.
                        h.update(b"\0gone");
                        continue;
                    };
                    add(&mut h, &here, &st);
                    if rustix::fs::FileType::from_raw_mode(st.st_mode)
                        == rustix::fs::FileType::Directory
                    {
                        let sub = dir
                            .open_dir_nofollow(&n)
                            .map_err(|e| raced_or_io(&shown, &e))?;
                        stack.push((sub, here));
                    }
                }
            }
        }
        Ok(Some(h.digest()))
    }

    /// Calls `each(place, target)` for every symbolic link at any depth in the directory
    /// `at` (from [`Workspace::entry`]): `place` relative to `at`, `target` the link's
    /// words. Walks handles, never following a link; `check` is called per directory (the
    /// call's deadline). A tree deeper than `max_path_depth` cannot be walked and is an
    /// error, as is anything that stops the walk: a caller refuses rather than guess.
    /// Returns the walked directory's (device, inode), for the caller to check that what
    /// it then changes is what was walked; `None` if `at` has no parent (a root).
    pub fn for_each_link_below(
        &self,
        at: &Resolved,
        check: &dyn Fn() -> ToolResult<()>,
        each: &mut dyn FnMut(&std::path::Path, &std::path::Path) -> ToolResult<()>,
    ) -> ToolResult<Option<(u64, u64)>> {
        let shown = self.shown_name(&at.real);
        let (Some(parent), Some(name)) = (&at.parent, at.name()) else {
            return Ok(None);
        };
        let dir = parent
            .open_dir_nofollow(name)
            .map_err(|e| raced_or_io(&shown, &e))?;
        let id = rustix::fs::fstat(&dir)
            .map(|st| crate::platform::file_id(&st))
            .map_err(|e| ToolError::io(&shown, &e.into()))?;
        let base = at.real.rel.components().count();
        let limit = self.max_path_depth();
        let mut stack = vec![(dir, std::path::PathBuf::new())];
        while let Some((dir, rel)) = stack.pop() {
            check()?;
            let entries = dir.entries().map_err(|e| ToolError::io(&shown, &e))?;
            for entry in entries {
                let entry = entry.map_err(|e| ToolError::io(&shown, &e))?;
                let ft = entry.file_type().map_err(|e| ToolError::io(&shown, &e))?;
                let here = rel.join(entry.file_name());
                if limit > 0 && base + here.components().count() > limit {
                    return Err(ToolError::new(
                        ErrorCode::PathTooDeep,
                        format!(
                            "{shown} holds entries deeper than {limit} levels below the root: ferret cannot check what they are"
                        ),
                    )
                    .with_hint("move it outside ferret, or raise max_path_depth"));
                }
                if ft.is_symlink() {
                    let target = dir
                        .read_link_contents(entry.file_name())
                        .map_err(|e| raced_or_io(&shown, &e))?;
                    each(&here, &target)?;
                } else if ft.is_dir() {
                    let sub = dir
                        .open_dir_nofollow(entry.file_name())
                        .map_err(|e| raced_or_io(&shown, &e))?;
                    stack.push((sub, here));
                }
            }
        }
        Ok(Some(id))
    }

    /// Opens a directory for listing.
    pub fn open_dir(&self, p: &WsPath) -> ToolResult<Dir> {
        Ok(self.open_dir_real(p)?.0)
    }

    /// [`Workspace::open_dir`], also giving the directory's real name (every symlink on
    /// the way resolved, by the same walk that opened it): the rules for what is inside
    /// are judged on that name, never on a spelling through a link.
    pub fn open_dir_real(&self, p: &WsPath) -> ToolResult<(Dir, WsPath)> {
        let shown = self.shown_name(p);
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
            None => Ok((dir, r.real)),
            Some(name) => {
                let d = dir
                    .open_dir_nofollow(name)
                    .map_err(|e| raced_or_io(&shown, &e))?;
                Ok((d, r.real))
            }
        }
    }
}

/// Directories a change made on its way, removed again (each if still empty) unless the
/// change lands: a refused write or move leaves no trace. They are found from the handle
/// of the innermost, up, wherever they are now: a refusal because the folder was moved
/// (under `.github/`, say) would otherwise leave them there.
pub struct MadeDirs {
    innermost: Option<rustix::fd::OwnedFd>,
    names: Vec<std::ffi::OsString>,
}

impl MadeDirs {
    /// The change landed: its directories stay (its receipt names them).
    pub fn keep(mut self) {
        self.names.clear();
    }
}

impl Drop for MadeDirs {
    fn drop(&mut self) {
        let Some(mut here) = self.innermost.take() else {
            return;
        };
        for name in self.names.iter().rev() {
            let Ok(id) = super::write::identity(&here) else {
                return;
            };
            let Ok(up) = rustix::fs::openat(
                &here,
                "..",
                rustix::fs::OFlags::RDONLY
                    | rustix::fs::OFlags::DIRECTORY
                    | rustix::fs::OFlags::CLOEXEC,
                rustix::fs::Mode::empty(),
            ) else {
                return;
            };
            // Only the directory made, if it still has its name (and is empty: the
            // call fails otherwise).
            let same =
                rustix::fs::statat(&up, name.as_os_str(), rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
                    .is_ok_and(|st| crate::platform::file_id(&st) == id);
            if !same
                || rustix::fs::unlinkat(&up, name.as_os_str(), rustix::fs::AtFlags::REMOVEDIR)
                    .is_err()
            {
                return;
            }
            here = up;
        }
    }
}

impl Workspace {
    /// Removes the directories `dirs` (relative to root `root`, outermost first), the
    /// innermost first, each only if it is still at that path and empty; stops at the
    /// first that is not.
    pub fn remove_empty_dirs(&self, root: usize, dirs: &[std::path::PathBuf]) {
        for rel in dirs.iter().rev() {
            let Ok(at) = self.entry(&self.root_path(root).join(rel), false) else {
                break;
            };
            let (Some(dir), Some(name)) = (&at.parent, at.name()) else {
                break;
            };
            if at.real.rel() != rel.as_path()
                || rustix::fs::unlinkat(dir, name, rustix::fs::AtFlags::REMOVEDIR).is_err()
            {
                break;
            }
        }
    }

    /// Guards the directories `made` (relative to a root, outermost first, as
    /// [`Workspace::make_parents`] gives them) of which `innermost` is the last.
    pub fn made_dirs(&self, innermost: Option<&Dir>, made: &[std::path::PathBuf]) -> MadeDirs {
        let innermost = match (innermost, made.is_empty()) {
            (Some(d), false) => rustix::io::fcntl_dupfd_cloexec(d, 0).ok(),
            _ => None,
        };
        MadeDirs {
            innermost,
            names: made
                .iter()
                .filter_map(|p| p.file_name().map(|n| n.to_os_string()))
                .collect(),
        }
    }

    /// For creating `p`: the directory that will hold it, opened beneath the root, with
    /// the directories missing on the way created one by one through the handle of the
    /// one before (`mkdirat`, then an `O_NOFOLLOW` open, so a name swapped for a symlink
    /// in between is refused, not followed). Every new name is checked against the rules
    /// before it is made. Returns the resolution of `p` (its `parent` is the directory)
    /// and the directories created, outermost first, relative to the root.
    ///
    /// `settle` is called with the real name `p` will have, resolved by the same walk
    /// that opened the directory it will go in, before anything is made: a caller
    /// refuses there what the rules would have asked about had that name been seen when
    /// the question was settled (a directory on the way may have been swapped for a
    /// link since), so a refused change leaves no new directory behind either. `is_dir`:
    /// whether `p` will be a directory (a moved folder, a folder undo puts back), whose
    /// name the rules judge as a directory's; the final name is judged before anything
    /// is made (round 24: a folder moved into a new parent under `allowed_extensions`
    /// was refused for its name's "extension" after the parent was made).
    pub fn make_parents(
        &self,
        p: &WsPath,
        is_dir: bool,
        settle: &dyn Fn(&WsPath) -> ToolResult<()>,
    ) -> ToolResult<(Resolved, Vec<std::path::PathBuf>)> {
        super::changeable_name(&p.rel)?;
        let shown = self.shown_name(p);
        let r = self.entry(p, true)?;
        if r.parent.is_some() {
            settle(&r.real)?;
            return Ok((r, Vec::new()));
        }
        // The nearest ancestor that exists, as it really is.
        let mut missing: Vec<std::ffi::OsString> = Vec::new();
        let mut at = p.clone();
        let (base_real, mut dir) = loop {
            let Some(name) = at.rel.file_name().map(|n| n.to_os_string()) else {
                return Err(not_found(&shown));
            };
            missing.push(name);
            at = WsPath {
                root: at.root,
                rel: at.rel.parent().map(|q| q.to_path_buf()).unwrap_or_default(),
            };
            let up = self.entry(&at, true)?;
            match &up.meta {
                // Opened from the handle of the same walk that named it (a second walk
                // by name could be led elsewhere by a link swapped in between, and the
                // real name would then not be where the directories are made).
                Some(m) if m.is_dir() => {
                    let here = self.shown_name(&at);
                    let dir = match (&up.parent, up.real.rel.file_name()) {
                        (Some(d), Some(name)) => d
                            .open_dir_nofollow(name)
                            .map_err(|e| raced_or_io(&here, &e))?,
                        (Some(d), None) => d.try_clone().map_err(|e| ToolError::io(&here, &e))?,
                        (None, _) => return Err(not_found(&here)),
                    };
                    break (up.real.clone(), dir);
                }
                Some(_) => {
                    return Err(ToolError::new(
                        ErrorCode::NotADirectory,
                        format!("{} is not a directory", self.shown_name(&at)),
                    ));
                }
                None => continue,
            }
        };
        // `missing` holds the final name first; create the others, outermost first.
        let mut whole = base_real.clone();
        for name in missing.iter().rev() {
            whole = whole.join(name);
        }
        self.check_name(&whole, &shown, Some(is_dir))?;
        settle(&whole)?;
        let mut created = Vec::new();
        // What this call made so far, removed again if a later step fails (a full disk
        // refusing the third folder of `x/y/z/new.txt` left `x/y`, unjournalled: round
        // 30). Handed on, kept, once every folder stands: the caller guards them then.
        let mut made: Option<MadeDirs> = None;
        let mut real = base_real;
        while missing.len() > 1 {
            let Some(name) = missing.pop() else { break };
            real = real.join(&name);
            // The rules a new directory's name meets, the way to ferret's own places
            // included (a `.local` made here would be on the way to `.local/state`).
            self.check_new(&real, true)?;
            let here = self.shown_name(&real);
            let ours =
                match rustix::fs::mkdirat(&dir, &name, rustix::fs::Mode::from_raw_mode(0o755)) {
                    Ok(()) => {
                        created.push(real.rel.clone());
                        true
                    }
                    // Made by someone else meanwhile: used if it is a real directory.
                    Err(rustix::io::Errno::EXIST) => false,
                    Err(e) => return Err(ToolError::io(&here, &e.into())),
                };
            dir = dir
                .open_dir_nofollow(&name)
                .map_err(|e| raced_or_io(&here, &e))?;
            if ours {
                if let Some(before) = made.take() {
                    before.keep();
                }
                made = Some(self.made_dirs(Some(&dir), &created));
            }
        }
        let Some(name) = missing.pop() else {
            return Err(not_found(&shown));
        };
        let real = real.join(&name);
        let meta = match dir.symlink_metadata(&name) {
            Ok(m) => Some(m),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(ToolError::io(&shown, &e)),
        };
        if let Some(made) = made {
            made.keep();
        }
        Ok((
            Resolved {
                real,
                parent: Some(dir),
                meta,
            },
            created,
        ))
    }
}

/// What a move would do to the deny rules' hold on what a folder holds
/// ([`Workspace::move_changes_denied`]).
#[derive(Debug)]
pub enum DenyChange {
    /// An entry would stand at this denied name: refused as writing there is.
    Makes(WsPath),
    /// An entry the rules guard now would stand at a name they do not: its contents
    /// would be readable. Its name is not given (it is a secret's).
    Exposes,
    /// A file `allowed_extensions` does not serve would stand at a new name. Its name is
    /// not given (no tool shows it).
    Unserved,
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

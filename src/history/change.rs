//! The changes themselves — replacing a file, trashing, removing, restoring — each
//! bracketed by the journal: `begin` before the workspace is touched, a mark after.
//!
//! Every one works on directory handles from the workspace's resolver; the journal's
//! records (temporary file names, trash names, inodes, hashes) are what recovery and undo
//! go by, never anything an agent could write.

use super::journal::{Action, Entry, Locked, Outcome, TrashRecord};
use super::trash::{Kind, Trash};
use super::{History, stamp};
use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::workspace::{Workspace, WsPath, write};
use cap_std::fs::Dir;
use sha2::{Digest, Sha256};
use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::fd::BorrowedFd;

/// Regular files up to this size are hashed when trashed, and the hash checked before
/// they are restored; larger ones are identified by device and inode alone.
const HASH_TRASHED_UP_TO: u64 = 256 * 1024 * 1024;

/// A delete done: its change id, the trash it went to, for an OS trash its name, and
/// what the result should say (the OS trash refused it, say).
pub struct Trashed {
    pub id: u64,
    pub kind: Kind,
    pub os_name: Option<&'static str>,
    pub note: Option<String>,
}

/// The object a delete moves: its directory's handle, its name there, its real path.
struct Staged<'a> {
    dir: &'a Dir,
    name: &'a OsStr,
    real: &'a WsPath,
    shown: &'a str,
}

impl History {
    /// Replaces (or creates) the file `name` in `dir` with `content`, shaped like `like`
    /// (the open old file), journalled as `entry`. `guard` runs with the journal locked, before the
    /// change begins: it can refuse (an undo already done by someone else). `placed`
    /// runs once the content is staged, just before it lands: it refuses when `dir` is
    /// no longer where the change is recorded ([`Workspace::still_holds`]).
    ///
    /// [`Workspace::still_holds`]: crate::workspace::Workspace::still_holds
    #[allow(clippy::too_many_arguments)]
    pub fn replace(
        &self,
        dir: &Dir,
        name: &OsStr,
        like: Option<BorrowedFd<'_>>,
        content: &[u8],
        mut entry: Entry,
        guard: impl FnOnce(&Locked) -> ToolResult<()>,
        placed: &dyn Fn() -> ToolResult<()>,
    ) -> ToolResult<u64> {
        let shown = entry.path.clone();
        let temp = format!(".ferret-{}.tmp", stamp());
        entry.temp = Some(temp.clone());
        let id = self.write_journal(|j| {
            guard(j)?;
            j.begin(entry, self.lease())
        })?;
        let temp = OsString::from(temp);
        let done = write::stage(dir, &temp, content, like)
            .map_err(|e| ToolError::io(&shown, &e))
            .and_then(|()| {
                die_here_in_tests();
                pause_here_in_tests();
                placed()?;
                write::commit(dir, &temp, name).map_err(|e| ToolError::io(&shown, &e))
            });
        self.finish(id, done.inspect_err(|_| write::discard(dir, &temp)))
    }

    /// Creates the file `name` in `dir` with `content`, never over anything that stands
    /// there (even something that appeared a moment ago), journalled as `entry`.
    /// `placed` runs once the content is staged, just before it lands (see
    /// [`History::replace`]).
    pub fn create(
        &self,
        dir: &Dir,
        name: &OsStr,
        content: &[u8],
        mut entry: Entry,
        placed: &dyn Fn() -> ToolResult<()>,
    ) -> ToolResult<u64> {
        let shown = entry.path.clone();
        let temp = format!(".ferret-{}.tmp", stamp());
        entry.temp = Some(temp.clone());
        let id = self.write_journal(|j| j.begin(entry, self.lease()))?;
        let temp = OsString::from(temp);
        // A refusal of `placed` rides out as an I/O error and is taken back below.
        let refused: std::cell::Cell<Option<ToolError>> = std::cell::Cell::new(None);
        let done = write::stage(dir, &temp, content, None)
            .and_then(|()| {
                pause_here_in_tests();
                placed().map_err(|e| {
                    refused.set(Some(e));
                    std::io::Error::other("refused before it landed")
                })
            })
            .and_then(|()| write::move_noreplace(dir, &temp, dir, name))
            .map(|()| write::sync_dir(dir));
        self.finish(
            id,
            done.map_err(|e| {
                write::discard(dir, &temp);
                if let Some(r) = refused.take() {
                    return r;
                }
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    ToolError::new(
                        ErrorCode::AlreadyExists,
                        format!(
                            "{shown} appeared while it was being created; it was left as it is"
                        ),
                    )
                    .with_hint("read it, then pass overwrite: true to replace it")
                } else {
                    ToolError::io(&shown, &e)
                }
            }),
        )
    }

    /// Moves the entry `from_name` in `from` to `to_name` in `to` (journalled as
    /// `entry`, whose `moved` record names the object by device and inode). Without
    /// `replace` nothing standing at the destination is replaced, even something that
    /// appeared a moment ago. The object that arrived must be the one recorded; if the
    /// source name was swapped for another object in between, it is moved back and the
    /// move refused. `guard` runs with the journal locked, before the change begins.
    #[allow(clippy::too_many_arguments)]
    pub fn move_entry(
        &self,
        from: &Dir,
        from_name: &OsStr,
        to: &Dir,
        to_name: &OsStr,
        replace: bool,
        entry: Entry,
        guard: impl FnOnce(&Locked) -> ToolResult<()>,
    ) -> ToolResult<u64> {
        let shown = entry.path.clone();
        let want = entry.moved.as_ref().map(|m| (m.dev, m.ino));
        let to_shown = entry
            .moved
            .as_ref()
            .map(|m| m.to_path.clone())
            .unwrap_or_default();
        let id = self.write_journal(|j| {
            guard(j)?;
            j.begin(entry, self.lease())
        })?;
        let moved = if replace {
            rustix::fs::renameat(from, from_name, to, to_name).map_err(std::io::Error::from)
        } else {
            write::move_noreplace(from, from_name, to, to_name)
        };
        if let Err(e) = moved {
            let err = match e.raw_os_error() {
                _ if e.kind() == std::io::ErrorKind::AlreadyExists => ToolError::new(
                    ErrorCode::AlreadyExists,
                    format!("something now stands at {to_shown}; nothing was moved"),
                )
                .with_hint("pass overwrite: true to replace a file there, or choose another destination"),
                Some(n) if n == rustix::io::Errno::XDEV.raw_os_error() => ToolError::new(
                    ErrorCode::IoError,
                    format!("{shown} and {to_shown} are on different filesystems; nothing was moved"),
                )
                .with_hint("move within one filesystem, or write the file anew with write_file and delete the old one"),
                _ => ToolError::io(&shown, &e),
            };
            self.settle(id, Outcome::Aborted, Some(err.message.clone()))?;
            return Err(err);
        }
        if write::identity_at(to, to_name).ok() != want {
            let back = write::move_noreplace(to, to_name, from, from_name);
            self.settle(
                id,
                Outcome::Aborted,
                Some("changed while being moved".into()),
            )?;
            if let Err(e) = back {
                tracing::error!(error = %e, "could not put back an entry swapped during a move");
            }
            return Err(ToolError::new(
                ErrorCode::Conflict,
                format!("{shown} changed while it was being moved; nothing was moved"),
            )
            .with_hint("retry the call"));
        }
        write::sync_dir(to);
        write::sync_dir(from);
        self.settle(id, Outcome::Committed, None)?;
        Ok(id)
    }

    /// Removes the file `name` in `dir` (an undo of a create), journalled as `entry`;
    /// `guard` runs with the journal locked, before the change begins.
    pub fn unlink(
        &self,
        dir: &Dir,
        name: &OsStr,
        entry: Entry,
        guard: impl FnOnce(&Locked) -> ToolResult<()>,
    ) -> ToolResult<u64> {
        let shown = entry.path.clone();
        let id = self.write_journal(|j| {
            guard(j)?;
            j.begin(entry, self.lease())
        })?;
        let done = rustix::fs::unlinkat(dir, name, rustix::fs::AtFlags::empty())
            .map(|()| write::sync_dir(dir))
            .map_err(|e| ToolError::io(&shown, &e.into()));
        self.finish(id, done)
    }

    /// Moves the entry `name` in `dir` (real path `real`) to the trash: when `use_os`,
    /// the OS trash behind [`crate::platform::OsTrash`] where there is one (macOS; the
    /// fake one of portable mode), else the freedesktop home trash when usable for this
    /// object; otherwise (or when the OS trash refused it) ferret's.
    pub fn trash(
        &self,
        dir: &Dir,
        name: &OsStr,
        real: &WsPath,
        ws: &Workspace,
        use_os: bool,
    ) -> ToolResult<Trashed> {
        let shown = ws.display(real);
        crate::workspace::changeable_name(real.rel())?;
        let st = rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| ToolError::io(&shown, &e.into()))?;
        let kind = rustix::fs::FileType::from_raw_mode(st.st_mode);
        let is_dir = kind == rustix::fs::FileType::Directory;
        let is_file = kind == rustix::fs::FileType::RegularFile;
        let hash = if is_file && (st.st_size as u64) <= HASH_TRASHED_UP_TO {
            Some(hash_at(dir, name).map_err(|e| ToolError::io(&shown, &e))?)
        } else {
            None
        };
        // Just before it moves: its folder still where its path leads (one moved under
        // `.github/` meanwhile would have its entry trashed from there unasked).
        ws.still_holds(dir, real.root_index(), real.rel(), &shown)?;
        let os = use_os
            .then(|| crate::platform::os_trash(&crate::platform::process_env))
            .flatten();
        if let Some(os) = &os {
            self.made()?;
            let ferret = Trash::ferret(&self.dir)?;
            if ferret.dev == crate::platform::file_id(&st).0 {
                let rec = TrashRecord {
                    kind: Kind::Os,
                    dir: std::path::PathBuf::new(),
                    name: String::new(),
                    dev: crate::platform::file_id(&st).0,
                    ino: crate::platform::file_id(&st).1,
                    sha256: hash.clone(),
                    is_dir,
                };
                let staged = Staged {
                    dir,
                    name,
                    real,
                    shown: &shown,
                };
                if let Some(done) = self.trash_via_os(&**os, &ferret, &staged, rec)? {
                    return Ok(done);
                }
            }
        }
        let home = (use_os && os.is_none())
            .then(|| Trash::home(|p| self.inside_roots(p)))
            .flatten()
            .filter(|t| t.dev == crate::platform::file_id(&st).0);
        let mut trashes = Vec::new();
        trashes.extend(home);
        self.made()?;
        trashes.push(Trash::ferret(&self.dir)?);
        let mut last_err = None;
        for trash in trashes {
            let abs = ws.abs_path(real);
            let stamp = stamp();
            // The journal records the name before the trash's `.trashinfo` is made, so a
            // process killed in between leaves nothing recovery does not clear.
            let mut claimed = None;
            for n in 1..10_000u32 {
                let Some(tname) = trash.candidate(name, &stamp, n) else {
                    continue;
                };
                let mut entry =
                    Entry::new(Action::Delete, shown.clone(), real.root_index(), real.rel());
                entry.trash = Some(TrashRecord {
                    kind: trash.kind,
                    dir: match trash.kind {
                        Kind::Home | Kind::Os => trash.base.clone(),
                        Kind::Ferret => std::path::PathBuf::new(),
                    },
                    name: tname.clone(),
                    dev: crate::platform::file_id(&st).0,
                    ino: crate::platform::file_id(&st).1,
                    sha256: hash.clone(),
                    is_dir,
                });
                let id = self.write_journal(|j| j.begin(entry, self.lease()))?;
                match trash.claim(&tname, &abs) {
                    Ok(true) => {
                        claimed = Some((tname, id));
                        break;
                    }
                    Ok(false) => {
                        self.settle(id, Outcome::Aborted, Some("trash name taken".into()))?;
                    }
                    Err(e) => {
                        self.settle(id, Outcome::Aborted, Some(e.message.clone()))?;
                        return Err(e);
                    }
                }
            }
            let Some((tname, id)) = claimed else {
                return Err(ToolError::new(
                    ErrorCode::IoError,
                    "no free name in the trash",
                ));
            };
            die_after_trashinfo_in_tests();
            match write::move_noreplace(dir, name, &trash.files, OsStr::new(&tname)) {
                Ok(()) => {}
                Err(e) => {
                    trash.forget(&tname);
                    self.settle(id, Outcome::Aborted, Some(e.to_string()))?;
                    // Another filesystem (a bind mount): try the next trash.
                    if e.raw_os_error() == Some(rustix::io::Errno::XDEV.raw_os_error()) {
                        last_err = Some(e);
                        continue;
                    }
                    return Err(ToolError::io(&shown, &e));
                }
            }
            // The object moved must be the one recorded; if the name was swapped for
            // another object in between, put it back and refuse.
            let moved = write::identity_at(&trash.files, OsStr::new(&tname));
            if moved.as_ref().ok() != Some(&crate::platform::file_id(&st)) {
                let back = write::move_noreplace(&trash.files, OsStr::new(&tname), dir, name);
                trash.forget(&tname);
                self.settle(
                    id,
                    Outcome::Aborted,
                    Some("changed while being deleted".into()),
                )?;
                if let Err(e) = back {
                    tracing::error!(error = %e, trash = %tname, "could not put back an entry swapped during a delete");
                }
                return Err(ToolError::new(
                    ErrorCode::Conflict,
                    format!("{shown} changed while it was being deleted; nothing was deleted"),
                )
                .with_hint("retry the call"));
            }
            write::sync_dir(dir);
            self.settle(id, Outcome::Committed, None)?;
            return Ok(Trashed {
                id,
                kind: trash.kind,
                os_name: None,
                note: None,
            });
        }
        // A rename across mounts fails with EXDEV before the kernel looks at whether the
        // source is read-only: name the real cause when it is.
        if rustix::fs::fstatvfs(dir)
            .is_ok_and(|v| v.f_flag.contains(rustix::fs::StatVfsMountFlags::RDONLY))
        {
            return Err(ToolError::io(
                &shown,
                &std::io::Error::from(std::io::ErrorKind::ReadOnlyFilesystem),
            ));
        }
        let e = last_err.unwrap_or_else(|| std::io::Error::other("no trash"));
        Err(ToolError::new(
            ErrorCode::IoError,
            format!("cannot move {shown} to a trash ({e}): the trash is on another filesystem"),
        )
        .with_hint("put the state directory (--state-dir) on the same filesystem as the workspace"))
    }

    /// The OS-trash delete: the object is moved by handle (`renameat`, never replacing)
    /// into a fresh staging directory ferret makes in its own trash folder (on the
    /// object's filesystem: checked by the caller), checked to be the object recorded,
    /// and only then is that staged path, which no agent influenced, handed to the OS
    /// trash. The journal's entry names the staging place until the OS says where the
    /// object went; its mark then names that. If the OS trash refuses, the object moves
    /// on to ferret's own trash (nothing lost) and the result says so. `None` when the
    /// staging move could not be made across filesystems (the caller tries the other
    /// trashes, which say why).
    fn trash_via_os(
        &self,
        os: &dyn crate::platform::OsTrash,
        ferret: &Trash,
        at: &Staged<'_>,
        mut rec: TrashRecord,
    ) -> ToolResult<Option<Trashed>> {
        let shown = at.shown;
        let sub = format!("{}.staging", stamp());
        let staging_err = |e: &std::io::Error| super::journal::io_err("trash staging folder", e);
        rustix::fs::mkdirat(
            &ferret.files,
            sub.as_str(),
            rustix::fs::Mode::from_raw_mode(0o700),
        )
        .map_err(|e| staging_err(&e.into()))?;
        let staging = match cap_fs_ext::DirExt::open_dir_nofollow(&ferret.files, &sub) {
            Ok(d) => d,
            Err(e) => {
                let _ = ferret.files.remove_dir(&sub);
                return Err(staging_err(&e));
            }
        };
        let drop_staging = || {
            let _ = ferret.files.remove_dir(&sub);
        };
        // The item keeps its own name in the trash (a person sees it there); a name
        // that is not UTF-8 cannot be handed to the OS's API and is staged as `item`.
        let sname = at
            .name
            .to_str()
            .filter(|s| !s.is_empty())
            .unwrap_or("item")
            .to_string();
        let staged_path = self.dir.join("trash").join(&sub).join(&sname);
        rec.dir = staged_path
            .parent()
            .map(std::path::Path::to_path_buf)
            .unwrap_or_default();
        rec.name = sname.clone();
        let want = (rec.dev, rec.ino);
        let mut entry = Entry::new(
            Action::Delete,
            shown.to_string(),
            at.real.root_index(),
            at.real.rel(),
        );
        entry.trash = Some(rec.clone());
        let id = self.write_journal(|j| j.begin(entry, self.lease()))?;
        if let Err(e) = write::move_noreplace(at.dir, at.name, &staging, OsStr::new(&sname)) {
            self.settle(id, Outcome::Aborted, Some(e.to_string()))?;
            drop_staging();
            if e.raw_os_error() == Some(rustix::io::Errno::XDEV.raw_os_error()) {
                return Ok(None);
            }
            return Err(ToolError::io(shown, &e));
        }
        // The object moved must be the one recorded; if the name was swapped for
        // another object in between, put it back and refuse.
        if write::identity_at(&staging, OsStr::new(&sname)).ok() != Some(want) {
            let back = write::move_noreplace(&staging, OsStr::new(&sname), at.dir, at.name);
            self.settle(
                id,
                Outcome::Aborted,
                Some("changed while being deleted".into()),
            )?;
            match back {
                Ok(()) => drop_staging(),
                Err(e) => {
                    tracing::error!(error = %e, staged = %staged_path.display(), "could not put back an entry swapped during a delete")
                }
            }
            return Err(ToolError::new(
                ErrorCode::Conflict,
                format!("{shown} changed while it was being deleted; nothing was deleted"),
            )
            .with_hint("retry the call"));
        }
        write::sync_dir(at.dir);
        // A process killed here leaves the object staged: recovery finds it there by
        // the entry's record (committed; undo brings it back from there).
        die_here_in_tests();
        let put = os.put(&staged_path);
        let as_ferret = |tname: String| {
            let mut to = rec.clone();
            to.kind = Kind::Ferret;
            to.dir = std::path::PathBuf::new();
            to.name = tname;
            to
        };
        let (rec, kind, note) = match put {
            Ok(now) => {
                let mut to = rec.clone();
                to.dir = now
                    .parent()
                    .map(std::path::Path::to_path_buf)
                    .unwrap_or_default();
                to.name = now
                    .file_name()
                    .and_then(OsStr::to_str)
                    .unwrap_or_default()
                    .to_string();
                // A trash inside a root (a root at the home folder holds ~/.Trash) is
                // not used, as the freedesktop one is not: the entry moves on, by
                // handle and checked to be the same object, to ferret's trash.
                let inside = std::fs::canonicalize(&to.dir).is_ok_and(|c| self.inside_roots(&c));
                let moved_on = inside
                    .then(|| Trash::os_at(&to.dir))
                    .flatten()
                    .map(|t| move_on(&t.files, OsStr::new(&to.name), ferret, want, &sname));
                match moved_on {
                    Some(Ok(tname)) => (
                        as_ferret(tname),
                        Kind::Ferret,
                        Some(format!(
                            "the {} lies inside the workspace; the entry is in ferret's trash instead",
                            os.name()
                        )),
                    ),
                    Some(Err(e)) => {
                        tracing::error!(error = %e, "an item put in an OS trash inside the workspace could not be moved on to ferret's trash");
                        (to, Kind::Os, None)
                    }
                    None => (to, Kind::Os, None),
                }
            }
            // Refused: the object is still staged, in ferret's own trash folder; it
            // moves on to the trash proper under a name of ferret's.
            Err(e) => match move_on(&staging, OsStr::new(&sname), ferret, want, &sname) {
                Ok(tname) => (
                    as_ferret(tname),
                    Kind::Ferret,
                    Some(format!(
                        "the {} refused it ({e}); it is in ferret's trash instead",
                        os.name()
                    )),
                ),
                Err(e2) => {
                    tracing::error!(error = %e, then = %e2, "the OS trash refused an item that could not be moved on to ferret's trash");
                    let note = format!(
                        "the {} refused it ({e}) and it could not be moved on ({e2}); it was left in ferret's staging folder, where undo finds it",
                        os.name()
                    );
                    // The journal keeps the staging place (undo restores from it); the
                    // result says where the entry is: in ferret's trash folder.
                    (rec.clone(), Kind::Ferret, Some(note))
                }
            },
        };
        die_after_put_in_tests();
        self.write_journal(|j| j.settle_trashed(id, rec, note.clone()))?;
        drop_staging();
        Ok(Some(Trashed {
            id,
            kind,
            os_name: (kind == Kind::Os).then(|| os.name()),
            note,
        }))
    }

    /// Removes the entry `name` in `dir` for good (journalled, not undoable).
    pub fn remove(
        &self,
        dir: &Dir,
        name: &OsStr,
        real: &WsPath,
        shown: &str,
        is_dir: bool,
    ) -> ToolResult<u64> {
        let entry = Entry::new(
            Action::DeletePermanent,
            shown.to_string(),
            real.root_index(),
            real.rel(),
        );
        let id = self.write_journal(|j| j.begin(entry, self.lease()))?;
        let done = if is_dir {
            dir.remove_dir_all(name)
        } else {
            dir.remove_file(name)
        };
        self.finish(id, done.map_err(|e| ToolError::io(shown, &e)))
    }

    /// Brings the object deleted by `target` back from the trash to the directory `dir`
    /// (opened beneath the root, the real parent of `target.rel`), as `name`. It must
    /// still be the object recorded (inode, and hash for files); nothing standing at the
    /// destination is replaced. `guard` runs with the journal locked, before the change.
    pub fn restore(
        &self,
        target: &Entry,
        dir: &Dir,
        name: &OsStr,
        guard: impl FnOnce(&Locked) -> ToolResult<()>,
    ) -> ToolResult<u64> {
        let rec = target.trash.as_ref().ok_or_else(|| {
            ToolError::new(
                ErrorCode::IoError,
                format!("change {} has no trash record", target.id),
            )
        })?;
        let trash = self.open_trash(rec)?;
        let gone = || {
            ToolError::new(
                ErrorCode::Conflict,
                format!(
                    "{} is no longer in the trash as it was deleted (emptied, restored, or changed there)",
                    target.path
                ),
            )
        };
        let tname = OsStr::new(&rec.name);
        match write::identity_at(&trash.files, tname) {
            Ok(id) if id == (rec.dev, rec.ino) => {}
            _ => return Err(gone()),
        }
        if let Some(h) = &rec.sha256
            && hash_at(&trash.files, tname).ok().as_ref() != Some(h)
        {
            return Err(gone());
        }
        let mut entry = Entry::new(Action::Undo, target.path.clone(), target.root, &target.rel);
        entry.undoes = Some(target.id);
        entry.trash = Some(rec.clone());
        let id = self.write_journal(|j| {
            guard(j)?;
            j.begin(entry, self.lease())
        })?;
        let moved = write::move_noreplace(&trash.files, tname, dir, name).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                ToolError::new(
                    ErrorCode::Conflict,
                    format!(
                        "something now stands at {}; the deleted entry was not restored over it",
                        target.path
                    ),
                )
                .with_hint("move or delete what is there first, then undo again")
            } else {
                ToolError::io(&target.path, &e)
            }
        });
        let id = self.finish(id, moved)?;
        write::sync_dir(dir);
        trash.forget(&rec.name);
        self.drop_staging_folder(rec);
        Ok(id)
    }

    /// Removes the staging folder `rec` names once empty (an entry a killed process
    /// left staged, restored from there): only a `*.staging` folder of ferret's own
    /// trash, and only if nothing is in it.
    pub(super) fn drop_staging_folder(&self, rec: &TrashRecord) {
        let ours = rec.kind == Kind::Os
            && rec.dir.parent() == Some(self.dir.join("trash").as_path())
            && rec
                .dir
                .file_name()
                .and_then(OsStr::to_str)
                .is_some_and(|n| n.ends_with(".staging"));
        if ours
            && let Ok(t) = Trash::ferret(&self.dir)
            && let Some(n) = rec.dir.file_name()
        {
            let _ = t.files.remove_dir(n);
        }
    }

    /// The trashed directory `rec` names, opened without following a link (`None` for
    /// a file, or one no longer there): what restoring it would bring back.
    pub fn trashed_dir(&self, rec: &TrashRecord) -> Option<Dir> {
        if !rec.is_dir {
            return None;
        }
        let trash = self.open_trash(rec).ok()?;
        cap_fs_ext::DirExt::open_dir_nofollow(&trash.files, &rec.name).ok()
    }

    fn open_trash(&self, rec: &TrashRecord) -> ToolResult<Trash> {
        match rec.kind {
            Kind::Ferret => Trash::ferret(&self.dir),
            Kind::Os => Trash::os_at(&rec.dir).ok_or_else(|| {
                ToolError::new(
                    ErrorCode::Conflict,
                    "the system trash folder the entry was put in is no longer there",
                )
                .with_hint("restore it from the system trash by hand, if it is still there")
            }),
            Kind::Home if !rec.dir.as_os_str().is_empty() => {
                Trash::home_at(&rec.dir).ok_or_else(|| {
                    ToolError::new(ErrorCode::Conflict, "the system trash is no longer there")
                })
            }
            Kind::Home => Trash::home(|_| false).ok_or_else(|| {
                ToolError::new(ErrorCode::Conflict, "the system trash is no longer there")
            }),
        }
    }

    pub(super) fn settle(&self, id: u64, outcome: Outcome, note: Option<String>) -> ToolResult<()> {
        self.write_journal(|j| j.settle(id, outcome, note))
    }

    /// Marks `id` committed if the change succeeded, aborted (and returns the error) if
    /// not.
    fn finish(&self, id: u64, done: ToolResult<()>) -> ToolResult<u64> {
        match done {
            Ok(()) => {
                self.settle(id, Outcome::Committed, None)?;
                Ok(id)
            }
            Err(e) => {
                self.settle(id, Outcome::Aborted, Some(e.message.clone()))?;
                Err(e)
            }
        }
    }
}

/// Moves the object `name` in `from` into ferret's trash under a fresh name of ferret's,
/// if it is still the object `want` (device, inode), never replacing anything; the name
/// it got.
fn move_on(
    from: &Dir,
    name: &OsStr,
    ferret: &Trash,
    want: (u64, u64),
    base: &str,
) -> std::io::Result<String> {
    if write::identity_at(from, name)? != want {
        return Err(std::io::Error::other("another object stands at its name"));
    }
    let tname = format!(
        "{}_{}",
        stamp(),
        super::trash::fit_name(base, super::trash::STAMPED_NAME_MAX)
    );
    write::move_noreplace(from, name, &ferret.files, OsStr::new(&tname))?;
    Ok(tname)
}

/// A delete through the OS trash that a killed process left pending with its object no
/// longer where it was being staged: the object is looked for, by device and inode, in
/// the folder the OS trash puts items in (the process had handed it over) and in
/// ferret's own trash (the OS trash had refused it); the record of where it is, if
/// found. Only names that could be the item's are looked at (the OS trash's `name 2.ext`
/// forms, ferret's `STAMP_name`).
pub(super) fn found_after_staging(h: &History, e: &Entry) -> Option<TrashRecord> {
    let rec = e.trash.as_ref()?;
    if e.action != Action::Delete || !e.group.is_empty() || rec.kind != Kind::Os {
        return None;
    }
    let want = (rec.dev, rec.ino);
    let staged = Trash::os_at(&rec.dir)
        .and_then(|t| write::identity_at(&t.files, OsStr::new(&rec.name)).ok());
    if staged == Some(want) {
        return None;
    }
    let stem = std::path::Path::new(&rec.name)
        .file_stem()
        .and_then(OsStr::to_str)
        .unwrap_or(&rec.name)
        .to_string();
    let os_dir = crate::platform::os_trash(&crate::platform::process_env).and_then(|t| t.dir());
    if let Some(t) = os_dir.as_deref().and_then(Trash::os_at)
        && let Some(name) = find_by_identity(&t.files, want, |n| n.starts_with(&stem))
    {
        let mut to = rec.clone();
        to.dir = t.base.clone();
        to.name = name;
        h.drop_staging_folder(rec);
        return Some(to);
    }
    let ferret = Trash::ferret(&h.dir).ok()?;
    let suffix = format!(
        "_{}",
        super::trash::fit_name(&rec.name, super::trash::STAMPED_NAME_MAX)
    );
    let name = find_by_identity(&ferret.files, want, |n| n.ends_with(&suffix))?;
    let mut to = rec.clone();
    to.kind = Kind::Ferret;
    to.dir = std::path::PathBuf::new();
    to.name = name;
    h.drop_staging_folder(rec);
    Some(to)
}

/// The name in `dir`, among those `fits`, of the object `want` (not following links).
fn find_by_identity(dir: &Dir, want: (u64, u64), fits: impl Fn(&str) -> bool) -> Option<String> {
    let rd = dir.entries().ok()?;
    rd.flatten().find_map(|e| {
        let name = e.file_name().into_string().ok()?;
        (fits(&name) && write::identity_at(dir, OsStr::new(&name)).ok() == Some(want))
            .then_some(name)
    })
}

/// Test hook: dies here, as a SIGKILL would, once a change's new content is staged and
/// before it lands (recovery tests). Only the environment ferret was started with sets
/// it; nothing an agent sends does.
pub(super) fn die_here_in_tests() {
    if std::env::var_os("FERRET_TEST_DIE_AFTER_STAGED")
        .is_some_and(|v| v != "put" && v != "trashinfo" && !v.to_string_lossy().starts_with("land"))
    {
        std::process::abort();
    }
}

/// Test hook: with `FERRET_TEST_PAUSE_AFTER_STAGED=MS` (the environment of the person
/// running ferret), a change waits that long once its content is staged, before its last
/// checks and its rename: a test moves a folder or saves a file in that window, surely.
/// With `FERRET_TEST_PAUSED_MARK=PATH` too, it first makes the file PATH (a path of the
/// test's own, never one an agent gave): the test acts once it sees the file, however
/// long a loaded machine took to get there.
pub fn pause_here_in_tests() {
    pause_if_set("FERRET_TEST_PAUSE_AFTER_STAGED");
}

/// Sleeps the milliseconds the variable `var` gives (10 s at most), first marking the
/// pause at `FERRET_TEST_PAUSED_MARK` if that is set; nothing when `var` is unset.
fn pause_if_set(var: &str) {
    if let Some(ms) = std::env::var(var).ok().and_then(|v| v.parse::<u64>().ok()) {
        if let Some(mark) = std::env::var_os("FERRET_TEST_PAUSED_MARK") {
            let _ = std::fs::write(mark, b"paused\n");
        }
        std::thread::sleep(std::time::Duration::from_millis(ms.min(10_000)));
    }
}

/// Test hook: with `FERRET_TEST_PAUSE_BEFORE_RENAME=MS`, a move or delete waits that
/// long after its last checks, holding what it holds, just before its rename (marking
/// the pause as [`pause_here_in_tests`] does): a test races a write in that window.
pub fn pause_before_rename_in_tests() {
    pause_if_set("FERRET_TEST_PAUSE_BEFORE_RENAME");
}

/// Test hook: with `FERRET_TEST_DIE_AFTER_STAGED=landN`, dies once a group's first N
/// files have landed (renamed or removed) and before the rest.
pub(super) fn die_after_landed_in_tests(n: usize) {
    if std::env::var_os("FERRET_TEST_DIE_AFTER_STAGED").is_some_and(|v| v == *format!("land{n}")) {
        std::process::abort();
    }
}

/// Test hook: with `FERRET_TEST_DIE_AFTER_STAGED=put`, dies once a delete's object has
/// left ferret's staging folder (into the OS trash, or ferret's when refused) and before
/// the journal says where it went.
fn die_after_put_in_tests() {
    if std::env::var_os("FERRET_TEST_DIE_AFTER_STAGED").is_some_and(|v| v == "put") {
        std::process::abort();
    }
}

/// Test hook: with `FERRET_TEST_DIE_AFTER_STAGED=trashinfo`, dies once a delete has
/// written its `.trashinfo` in the freedesktop trash and before the object is moved.
fn die_after_trashinfo_in_tests() {
    if std::env::var_os("FERRET_TEST_DIE_AFTER_STAGED").is_some_and(|v| v == "trashinfo") {
        std::process::abort();
    }
}

/// Settles a change whose process died before marking it, from what is on disk, and
/// names the files it left as they were because they held content ferret did not write.
/// Nothing is ever written over such content: a group is rolled forward only for files
/// still holding exactly what they held before it (see [`super::group`]); a single-file
/// change is never rolled forward (only its temporary file is removed).
pub(super) fn settle_orphan(
    h: &History,
    ws: &Workspace,
    e: &Entry,
) -> (Outcome, String, Vec<String>) {
    if !e.group.is_empty() {
        return super::group::settle_orphan_group(ws, e);
    }
    let (outcome, mut note, foreign_temp) = settle_single(h, ws, e);
    let mut conflicted = if note == LEFT_ALONE {
        vec![e.path.clone()]
    } else {
        Vec::new()
    };
    if let Some(t) = foreign_temp {
        note.push_str(&format!(
            "; {t} (at the name of its temporary file) holds content ferret did not stage there: left as it is"
        ));
        conflicted.push(t);
    }
    (outcome, note, conflicted)
}

/// Whether the temporary file `temp` in `dir` is still ferret's own: a regular file
/// (not followed) whose bytes hash to exactly the content staged there (`staged`, as
/// the journal recorded it). Anything else (rewritten, replaced, a link, a FIFO, or
/// nothing recorded to compare with) is not ferret's to rename or remove.
pub(super) fn own_temp(dir: &Dir, temp: &OsStr, staged: Option<&str>) -> bool {
    let Some(staged) = staged else {
        return false;
    };
    let regular = rustix::fs::statat(dir, temp, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|st| rustix::fs::FileType::from_raw_mode(st.st_mode).is_file());
    regular && hash_at(dir, temp).is_ok_and(|h| h == staged)
}

/// The path results show for the temporary file `temp` beside `path`.
pub(super) fn temp_shown(path: &str, temp: &str) -> String {
    std::path::Path::new(path)
        .with_file_name(temp)
        .display()
        .to_string()
}

/// The note of a single-file change whose file holds neither its old nor its new
/// content: kept (undoable, with `force`, from its backup), the file left as it is.
const LEFT_ALONE: &str =
    "recovered: the file holds content ferret did not write (changed since); left as it is";

/// Settles a single-file change; the third value names a file standing at the name of
/// its temporary file that is not what ferret staged (left as it is).
fn settle_single(h: &History, ws: &Workspace, e: &Entry) -> (Outcome, String, Option<String>) {
    let mut foreign = None;
    let (outcome, note) = settle_single_inner(h, ws, e, &mut foreign);
    (outcome, note, foreign)
}

fn settle_single_inner(
    h: &History,
    ws: &Workspace,
    e: &Entry,
    foreign: &mut Option<String>,
) -> (Outcome, String) {
    let wp = ws.root_path(e.root).join(&e.rel);
    // Only the directory that really held the file: one swapped for a link since is
    // not looked into.
    let at = ws
        .entry(&wp, false)
        .ok()
        .filter(|r| r.real.rel() == e.rel.as_path());
    let parent = at.as_ref().and_then(|r| r.parent.as_ref());
    // A temporary file an edit (or an undo of one) left beside the file: the change had
    // not landed (the rename consumes it). Removed only if it is still ferret's own
    // (holds exactly what was staged): whatever else stands at that name (the temp
    // rewritten, a person's file put there) is left, and reported.
    let mut temp_left = false;
    if let (Some(dir), Some(temp)) = (parent, &e.temp)
        && write::is_temp_name(OsStr::new(temp))
        && write::identity_at(dir, OsStr::new(temp)).is_ok()
    {
        if own_temp(dir, OsStr::new(temp), e.sha256_after.as_deref()) {
            temp_left = true;
            write::discard(dir, OsStr::new(temp));
        } else {
            *foreign = Some(temp_shown(&e.path, temp));
        }
    }
    let here_identity = || {
        parent
            .zip(e.rel.file_name())
            .and_then(|(d, n)| write::identity_at(d, n).ok())
    };
    match (e.action, &e.trash) {
        // A move, or the undo of one (which moves the object back): landed if the object
        // recorded stands at the destination.
        (Action::Move, _) | (Action::Undo, None) if e.moved.is_some() => {
            let Some(m) = &e.moved else {
                return (Outcome::Aborted, "recovered: a malformed entry".into());
            };
            let there = ws
                .entry(&ws.root_path(m.to_root).join(&m.to_rel), false)
                .ok()
                .and_then(|r| {
                    let name = r.name()?.to_os_string();
                    write::identity_at(r.parent.as_ref()?, &name).ok()
                });
            if there == Some((m.dev, m.ino)) {
                (
                    Outcome::Committed,
                    "recovered: the entry had been moved".into(),
                )
            } else {
                (
                    Outcome::Aborted,
                    "recovered: the entry had not been moved; rolled back".into(),
                )
            }
        }
        (Action::Edit | Action::Create | Action::Undo, None) => {
            let now = parent
                .zip(e.rel.file_name())
                .and_then(|(d, n)| hash_at(d, n).ok());
            // An undo of a create writes nothing: it landed if the file is gone. Nothing
            // is written either way: the file keeps whatever it holds now.
            let landed = !temp_left
                && match &e.sha256_after {
                    Some(after) => now.as_ref() == Some(after),
                    None => e.action == Action::Undo && here_identity().is_none(),
                };
            let as_before =
                now == e.sha256_before || (e.action == Action::Create && here_identity().is_none());
            if landed {
                (
                    Outcome::Committed,
                    "recovered: the change had landed".into(),
                )
            } else if temp_left || as_before || e.backup_path.is_none() {
                (
                    Outcome::Aborted,
                    "recovered: the change had not landed; rolled back".into(),
                )
            } else {
                (Outcome::Committed, LEFT_ALONE.into())
            }
        }
        (Action::Delete, Some(rec)) => {
            let trash = h.open_trash(rec).ok();
            let in_trash = trash
                .as_ref()
                .and_then(|t| write::identity_at(&t.files, OsStr::new(&rec.name)).ok());
            if in_trash == Some((rec.dev, rec.ino)) {
                (
                    Outcome::Committed,
                    "recovered: the entry had been moved to the trash".into(),
                )
            } else {
                if let Some(t) = trash {
                    t.forget_orphan(&rec.name, &ws.abs_path(&ws.root_path(e.root).join(&e.rel)));
                }
                if rec.kind == Kind::Os {
                    // Not where it was being staged: either it never left the
                    // workspace, or the OS trash had taken it when the process died.
                    return (
                        Outcome::Aborted,
                        "recovered: the entry was not in ferret's staging folder; it was not deleted, or it is in the system trash"
                            .into(),
                    );
                }
                (
                    Outcome::Aborted,
                    "recovered: the entry had not been moved; rolled back".into(),
                )
            }
        }
        (Action::Undo, Some(rec)) => {
            if here_identity() == Some((rec.dev, rec.ino)) {
                if let Ok(t) = h.open_trash(rec) {
                    t.forget(&rec.name);
                }
                (
                    Outcome::Committed,
                    "recovered: the entry had been restored".into(),
                )
            } else {
                (
                    Outcome::Aborted,
                    "recovered: the entry had not been restored; rolled back".into(),
                )
            }
        }
        (Action::DeletePermanent, _) => {
            if here_identity().is_none() {
                (
                    Outcome::Committed,
                    "recovered: the entry had been removed".into(),
                )
            } else {
                (
                    Outcome::Aborted,
                    "recovered: the entry was (at least partly) still there".into(),
                )
            }
        }
        (Action::Move | Action::Patch, _)
        | (Action::Delete, None)
        | (Action::Edit | Action::Create, Some(_)) => {
            (Outcome::Aborted, "recovered: a malformed entry".into())
        }
    }
}

/// SHA-256 of the regular file `name` in `dir`, opened without following a link.
pub fn hash_at(dir: &Dir, name: &OsStr) -> std::io::Result<String> {
    let fd = rustix::fs::openat(
        dir,
        name,
        rustix::fs::OFlags::RDONLY
            | rustix::fs::OFlags::NOFOLLOW
            | rustix::fs::OFlags::NONBLOCK
            | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    let mut f = std::fs::File::from(fd);
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex::encode(h.finalize()))
}

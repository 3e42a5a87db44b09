//! Many files changed as one all-or-nothing step (apply_patch, and its undo).
//!
//! The protocol, each step durable before the next:
//! 1. `begin`: one journal entry naming every file, its temporary file, backup and
//!    hashes, before anything is written;
//! 2. every new content staged in its temporary file beside its file (fsynced);
//! 3. a `staged` mark;
//! 4. the renames (and removals), in order;
//! 5. `committed`.
//!
//! A failure before the `staged` mark removes the temporary files: nothing landed. A
//! failure after it, in this process, puts back what landed from the old contents held
//! in memory. A process killed after the mark is finished by recovery (every new content
//! is on disk, so each remaining rename is done); killed before it, rolled back. Either
//! way a group is never left half-applied.

use super::change::{own_temp, temp_shown};
use super::journal::{Entry, GroupOp, Locked, OpKind, Outcome};
use super::{History, stamp};
use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::workspace::{Workspace, write};
use cap_std::fs::{Dir, File};
use std::ffi::{OsStr, OsString};
use std::os::fd::AsFd;

/// One file of a group, ready to commit.
pub struct Planned {
    /// Its journal record (`temp` is filled in by [`History::apply_group`]).
    pub op: GroupOp,
    /// The directory that holds it, opened beneath the root.
    pub dir: Dir,
    pub name: OsString,
    /// The new content (Replace, Create).
    pub content: Option<Vec<u8>>,
    /// The old content (Replace, Remove), to put back if the group fails.
    pub before: Option<Vec<u8>>,
    /// The old file, open (Replace): the new one takes its owner, mode and xattrs, and
    /// its lock is held until the group is done.
    pub old: Option<File>,
}

impl History {
    /// Applies `planned` as one group journalled as `entry` (its `group` is filled in
    /// here). `guard` runs with the journal locked, before the group begins.
    ///
    /// `placed` runs for each file once everything is staged, before anything lands: it
    /// refuses when the file's directory is no longer where the change is recorded
    /// ([`Workspace::still_holds`]).
    pub fn apply_group(
        &self,
        mut planned: Vec<Planned>,
        mut entry: Entry,
        guard: impl FnOnce(&Locked) -> ToolResult<()>,
        placed: &dyn Fn(&Planned) -> ToolResult<()>,
    ) -> ToolResult<u64> {
        let base = stamp();
        for (i, p) in planned.iter_mut().enumerate() {
            if p.op.kind != OpKind::Remove {
                p.op.temp = Some(format!(".ferret-{base}-{i}.tmp"));
            }
            if let Some(old) = &p.old {
                p.op.mode = rustix::fs::fstat(old).ok().map(|st| mode_bits(&st));
            }
        }
        entry.group = planned.iter().map(|p| p.op.clone()).collect();
        let id = self.write_journal(|j| {
            guard(j)?;
            j.begin(entry, self.lease())
        })?;

        // Stage every new content.
        for i in 0..planned.len() {
            let p = &planned[i];
            let (Some(temp), Some(content)) = (&p.op.temp, &p.content) else {
                continue;
            };
            // Shaped like the file it replaces, or for a move's new file like its source
            // (the remove that names it): a 0600 file moved by a patch became 0644.
            let like = p
                .old
                .as_ref()
                .or_else(|| {
                    planned
                        .iter()
                        .find(|r| r.op.moved_by == Some(i))
                        .and_then(|r| r.old.as_ref())
                })
                .map(|f| f.as_fd());
            let staged =
                write::stage(&p.dir, OsStr::new(temp), content, like).and_then(|()| {
                    match (like, p.op.mode) {
                        (None, Some(mode)) => write::set_mode(&p.dir, OsStr::new(temp), mode),
                        _ => Ok(()),
                    }
                });
            if let Err(e) = staged {
                discard_temps(&planned);
                let err = ToolError::io(&p.op.path, &e);
                self.settle(id, Outcome::Aborted, Some(err.message.clone()))?;
                return Err(err);
            }
        }
        self.write_journal(|j| j.settle(id, Outcome::Staged, None))?;
        super::change::die_here_in_tests();
        // The race tests' pause comes before the last checks of where the files land,
        // as edit's and write_file's does: what moves during it must be caught (round
        // 19: after them, a folder moved in the pause took a patch's file along).
        super::change::pause_here_in_tests();
        if let Some(err) = planned.iter().find_map(|p| placed(p).err()) {
            discard_temps(&planned);
            self.settle(id, Outcome::Aborted, Some(err.message.clone()))?;
            return Err(err);
        }

        // Each old file as the checks above found it: looked at again just before its
        // own rename or removal (the checks of the files after it take time: a big
        // file's bytes are read again, and a person's save to a file to be removed
        // landed meanwhile and was removed, kept nowhere).
        let seen: Vec<_> = planned
            .iter()
            .map(|p| p.old.as_ref().and_then(status))
            .collect();
        // The renames and removals, in order; on a failure, back out what landed.
        for i in 0..planned.len() {
            if let Err(err) =
                still_as_checked(&planned[i], seen[i]).and_then(|()| land(&planned[i]))
            {
                for p in planned[..i].iter().rev() {
                    if let Err(e) = put_back(p) {
                        tracing::error!(path = %p.op.path, error = %e, "could not put back a file of a failed group");
                    }
                }
                discard_temps(&planned[i..]);
                self.settle(id, Outcome::Aborted, Some(err.message.clone()))?;
                return Err(err);
            }
            super::change::die_after_landed_in_tests(i + 1);
        }
        for p in &planned {
            write::sync_dir(&p.dir);
        }
        self.settle(id, Outcome::Committed, None)?;
        Ok(id)
    }
}

/// What tells a file's content changed without reading it: its identity, size and
/// times (a write moves the change time).
type Status = ((u64, u64), u64, (i64, i64), (i64, i64));

#[allow(clippy::unnecessary_cast)] // the stat fields' types differ from one OS to another
fn status(f: &File) -> Option<Status> {
    let st = rustix::fs::fstat(f).ok()?;
    Some((
        crate::platform::file_id(&st),
        st.st_size as u64,
        (st.st_mtime as i64, st.st_mtime_nsec as i64),
        (st.st_ctime as i64, st.st_ctime_nsec as i64),
    ))
}

/// A file's permission bits, without setuid and setgid (as [`write::stage`] copies them).
#[allow(clippy::unnecessary_cast)] // st_mode's type differs from one OS to another
fn mode_bits(st: &rustix::fs::Stat) -> u32 {
    (st.st_mode as u32) & 0o1777
}

/// Refuses (`CONFLICT`) when the old file of `p` is no longer at its name, or changed
/// since the checks (`seen`).
fn still_as_checked(p: &Planned, seen: Option<Status>) -> ToolResult<()> {
    let Some(old) = &p.old else {
        return Ok(());
    };
    let here = write::identity_at(&p.dir, &p.name).ok();
    let now = status(old);
    if seen.is_some() && now == seen && here == seen.map(|s| s.0) {
        return Ok(());
    }
    Err(ToolError::new(
        ErrorCode::Conflict,
        format!(
            "{} was changed by another program while the patch was being applied; nothing was changed",
            crate::workspace::shown_in_prose(&p.op.path)
        ),
    )
    .with_hint("read it again, then make the patch on what it holds now"))
}

fn land(p: &Planned) -> ToolResult<()> {
    let temp = p.op.temp.as_deref().map(OsStr::new);
    let done = match (p.op.kind, temp) {
        (OpKind::Replace, Some(t)) => {
            rustix::fs::renameat(&p.dir, t, &p.dir, &p.name).map_err(std::io::Error::from)
        }
        (OpKind::Create, Some(t)) => write::move_noreplace(&p.dir, t, &p.dir, &p.name),
        (OpKind::Remove, _) => rustix::fs::unlinkat(&p.dir, &p.name, rustix::fs::AtFlags::empty())
            .map_err(std::io::Error::from),
        _ => Err(std::io::Error::other(
            "a group file without its staged content",
        )),
    };
    done.map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            ToolError::new(
                ErrorCode::Conflict,
                format!(
                    "{} appeared while the patch was being applied; nothing was changed",
                    p.op.path
                ),
            )
            .with_hint("read it, then make the patch update it instead of adding it")
        } else {
            ToolError::io(&p.op.path, &e)
        }
    })
}

/// Undoes one landed file of a failed group, from the old content held in memory, if
/// the file still holds what the group wrote there (else it is left as it is).
fn put_back(p: &Planned) -> std::io::Result<()> {
    let now = super::change::hash_at(&p.dir, &p.name).ok();
    if now != p.op.sha256_after {
        return Err(std::io::Error::other(
            "changed since the group wrote it; left as it is",
        ));
    }
    let temp = OsString::from(format!(".ferret-{}.tmp", stamp()));
    match (p.op.kind, &p.before) {
        (OpKind::Create, _) => rustix::fs::unlinkat(&p.dir, &p.name, rustix::fs::AtFlags::empty())
            .map_err(std::io::Error::from),
        (OpKind::Replace, Some(before)) => {
            write::stage(&p.dir, &temp, before, p.old.as_ref().map(|f| f.as_fd()))?;
            write::commit(&p.dir, &temp, &p.name)
        }
        (OpKind::Remove, Some(before)) => {
            write::stage(&p.dir, &temp, before, p.old.as_ref().map(|f| f.as_fd()))?;
            write::move_noreplace(&p.dir, &temp, &p.dir, &p.name)
        }
        _ => Ok(()),
    }
}

fn discard_temps(planned: &[Planned]) {
    for p in planned {
        if let Some(t) = &p.op.temp {
            write::discard(&p.dir, OsStr::new(t));
        }
    }
}

/// Settles a group whose process died before marking it: finished if every new content
/// was staged, rolled back if not. Finishing never writes over content ferret did not
/// write: a file is rolled forward only if it still holds exactly what it held before
/// the group (or is already as the group leaves it); one changed since (edited, deleted,
/// replaced by a link) is left as it is, and named in the third value, which the journal
/// records and `history` shows.
pub(super) fn settle_orphan_group(ws: &Workspace, e: &Entry) -> (Outcome, String, Vec<String>) {
    let mut opened = Vec::new();
    for op in &e.group {
        // Only the directory that really held the file: one swapped for a link since is
        // not written through.
        let at = ws
            .entry(&ws.root_path(op.root).join(&op.rel), false)
            .ok()
            .filter(|r| r.real.rel() == op.rel.as_path());
        let place = at.and_then(|r| Some((r.parent?, op.rel.file_name()?.to_os_string())));
        opened.push((op, place));
    }
    // Staged files at the temporary names that are not what ferret staged there (the
    // temp rewritten, a person's file put at its name): never renamed, never removed.
    let mut foreign = Vec::new();
    if !e.staged {
        for (op, place) in &opened {
            if let (Some((dir, _)), Some(t)) = (place, &op.temp)
                && write::is_temp_name(OsStr::new(t))
                && write::identity_at(dir, OsStr::new(t)).is_ok()
            {
                if own_temp(dir, OsStr::new(t), op.sha256_after.as_deref()) {
                    write::discard(dir, OsStr::new(t));
                } else {
                    foreign.push(temp_shown(&op.path, t));
                }
            }
        }
        let mut note = "recovered: the group was not fully staged; nothing had landed, rolled back"
            .to_string();
        if !foreign.is_empty() {
            note.push_str(&format!(
                "; left as they are (content ferret did not stage there): {}",
                foreign.join(", ")
            ));
        }
        return (Outcome::Aborted, note, foreign);
    }
    let mut conflicted = Vec::new();
    // A move's two halves are settled as one: its source is removed only once its
    // destination holds exactly the moved content (rolled forward, or already there).
    // So every removal waits until the rest is settled. An entry written before moves
    // were paired names no pair: each of its removals then waits for every file the
    // group creates.
    let unpaired = !e.group.iter().any(|op| op.moved_by.is_some());
    let mut landed = vec![false; opened.len()];
    let mut held = Vec::new();
    let removes = |i: &usize| opened[*i].0.kind == OpKind::Remove;
    let order: Vec<usize> = (0..opened.len())
        .filter(|i| !removes(i))
        .chain((0..opened.len()).filter(removes))
        .collect();
    for i in order {
        let (op, place) = &opened[i];
        let Some((dir, name)) = place else {
            conflicted.push(op.path.clone());
            continue;
        };
        let other_half_landed = match op.moved_by {
            _ if op.kind != OpKind::Remove => true,
            Some(j) => landed.get(j).copied().unwrap_or(false),
            None if unpaired => opened
                .iter()
                .zip(&landed)
                .all(|((o, _), l)| o.kind != OpKind::Create || *l),
            None => true,
        };
        let temp = op
            .temp
            .as_deref()
            .map(OsStr::new)
            .filter(|t| write::is_temp_name(t));
        // What the file holds now: its hash (a regular file, not followed), `None` if
        // nothing is there, or something else (a link, a directory, unreadable).
        let now = match write::identity_at(dir, name) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(None),
            _ => super::change::hash_at(dir, name).ok().map(Some),
        };
        let after = Some(op.sha256_after.clone());
        let before = Some(op.sha256_before.clone());
        let temp_there = temp.is_some_and(|t| write::identity_at(dir, t).is_ok());
        // The staged content, rolled forward only if it is exactly what was staged.
        let staged_here = temp.is_some_and(|t| own_temp(dir, t, op.sha256_after.as_deref()));
        if temp_there
            && !staged_here
            && let Some(t) = op.temp.as_deref()
        {
            foreign.push(temp_shown(&op.path, t));
        }
        let done: Result<(), ()> =
            if now == after || (op.kind == OpKind::Remove && now == Some(None)) {
                // Already as the group leaves it.
                Ok(())
            } else if now != before || (op.kind != OpKind::Remove && !staged_here) {
                // Changed since (or its new content is gone): not ferret's to overwrite.
                Err(())
            } else if !other_half_landed {
                // The source of a move whose destination did not get its content: kept,
                // as it is, so the content is still in the tree.
                held.push(op.path.clone());
                Err(())
            } else {
                match (op.kind, temp) {
                    (OpKind::Replace, Some(t)) => {
                        rustix::fs::renameat(dir, t, dir, name.as_os_str()).map_err(|_| ())
                    }
                    (OpKind::Create, Some(t)) => {
                        write::move_noreplace(dir, t, dir, name).map_err(|_| ())
                    }
                    (OpKind::Remove, _) => {
                        rustix::fs::unlinkat(dir, name.as_os_str(), rustix::fs::AtFlags::empty())
                            .map_err(|_| ())
                    }
                    _ => Err(()),
                }
            };
        // The staged content, if still beside the file and ferret's own: not kept.
        if let Some(t) = temp
            && staged_here
        {
            write::discard(dir, t);
        }
        if done.is_err() {
            conflicted.push(op.path.clone());
        }
        landed[i] = done.is_ok();
        write::sync_dir(dir);
    }
    for f in &foreign {
        if !conflicted.contains(f) {
            conflicted.push(f.clone());
        }
    }
    let changed: Vec<&String> = conflicted.iter().filter(|c| !held.contains(c)).collect();
    let mut note = if changed.is_empty() {
        "recovered: the group was staged; finished it".to_string()
    } else {
        format!(
            "recovered: the group was staged; finished it but for {} file(s) changed since (content ferret did \
             not write), left as they are: {}",
            changed.len(),
            changed
                .iter()
                .map(|c| c.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    if !held.is_empty() {
        note.push_str(&format!(
            "; not removed, as the other half of its move did not land: {}",
            held.join(", ")
        ));
    }
    (Outcome::Committed, note, conflicted)
}

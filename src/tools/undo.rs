//! `undo`: revert a change from the journal (by default the last one not yet undone).
//!
//! An edit is undone only if the file still holds what the edit wrote; otherwise the
//! answer is `CONFLICT` with a diff, and `force` first backs up the current content, so
//! nothing is ever lost. A delete is undone by moving exactly the object the journal
//! recorded (same inode, same content) back from the trash into the directory that held
//! it, opened beneath the root without a symlink on the way, and never over something
//! standing there. A create is undone by removing the file only if it still holds what
//! was written (and the directories made for it, when empty). The undo is itself journalled; the check that a change is not already
//! undone and the undo's own journal entry are made under one journal lock, so two
//! undos, in any number of processes, never restore one change twice.

use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::history::{Action, Entry, History, Locked, Writers, sha256};
use crate::tool::{Annotations, Ctx, Tool, ToolMeta};
use crate::workspace::shown;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::os::fd::AsFd;

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// A change_id (default: your last).
    #[serde(default)]
    #[schemars(with = "u64")]
    pub id: Option<u64>,
    #[serde(default)]
    pub force: bool,
    #[serde(default)]
    pub dry_run: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// The change undone.
    pub undone: u64,
    pub action: String,
    pub path: String,
    /// The diff from the current content to the restored one.
    pub diff: String,
    /// The content this undo replaced was kept (absent otherwise). Where it is kept is
    /// the host's business: no path is sent.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub backed_up: bool,
    /// The journal id of this undo (absent on a dry run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change_id: Option<u64>,
    /// A dry run of a change that would ask the user first: the question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub would_ask: Option<String>,
    pub dry_run: bool,
}

pub struct Undo;

/// Refuses when `target` was undone, or is being undone, by anyone (run with the
/// journal locked, just before the undo begins).
fn not_undone(target: u64) -> impl FnOnce(&Locked) -> ToolResult<()> {
    move |journal| {
        if journal.undone(target)? {
            return Err(already_undone(target));
        }
        Ok(())
    }
}

/// [`not_undone`], then each folder the undo lands in must still be where it is
/// recorded ([`crate::workspace::Workspace::still_holds`]): checked with the journal
/// locked, just before the change.
fn not_undone_in<'a>(
    target: u64,
    ws: &'a crate::workspace::Workspace,
    places: Vec<(&'a cap_std::fs::Dir, usize, &'a std::path::Path, &'a str)>,
) -> impl FnOnce(&Locked) -> ToolResult<()> + 'a {
    move |journal| {
        not_undone(target)(journal)?;
        for (dir, root, rel, shown) in places {
            ws.still_holds(dir, root, rel, shown)?;
        }
        Ok(())
    }
}

fn already_undone(id: u64) -> ToolError {
    ToolError::new(
        ErrorCode::Conflict,
        format!("change {id} was already undone"),
    )
}

/// The walk that opened the file an undo changes must have reached it at its recorded
/// place, no link on the way: the check on an earlier walk does not cover a folder on
/// the way swapped for a link (to `.github`, say) before this one (attacker pass 12).
fn opened_in_place(
    at: &crate::workspace::Resolved,
    rel: &std::path::Path,
    path: &str,
) -> ToolResult<()> {
    if at.real.rel() == rel {
        Ok(())
    } else {
        Err(conflict(format!(
            "a directory on the way to {path} is now a symbolic link; nothing was undone"
        )))
    }
}

fn conflict(msg: String) -> ToolError {
    ToolError::new(ErrorCode::Conflict, msg)
}

/// Asks as changing these paths directly would: an undo is a change like any other, so
/// one that rewrites, removes or brings back an entry on the confirm list (a directory:
/// or holding one) needs the user's confirmation as that change would. `paths`: root,
/// real path, whether a directory, and the directory's handle (to look inside).
fn ask_confirm_listed(
    ctx: &Ctx,
    target: &Entry,
    paths: &[(usize, &std::path::Path, Option<&cap_std::fs::Dir>)],
) -> ToolResult<()> {
    note_confirm_listed(ctx, target, paths)?;
    ctx.ask_noted()
}

/// Notes what [`ask_confirm_listed`] would ask, for the undo's one question.
fn note_confirm_listed(
    ctx: &Ctx,
    target: &Entry,
    paths: &[(usize, &std::path::Path, Option<&cap_std::fs::Dir>)],
) -> ToolResult<()> {
    if let Some(why) = confirm_listed_reason(ctx, target, paths)? {
        ctx.note_question(why);
    }
    Ok(())
}

/// What [`ask_confirm_listed`] would ask, if anything.
fn confirm_listed_reason(
    ctx: &Ctx,
    target: &Entry,
    paths: &[(usize, &std::path::Path, Option<&cap_std::fs::Dir>)],
) -> ToolResult<Option<String>> {
    let ws = ctx.workspace();
    for (root, rel, dir) in paths {
        let wp = ws.root_path(*root).join(rel);
        // What a folder holds is named (round 24).
        let held = match dir {
            Some(d) if !ws.needs_confirmation(&wp, true) => {
                let d = d.try_clone().map_err(|e| ToolError::io(&target.path, &e))?;
                ws.tree_holds_confirm_listed(d, rel, &target.path, &|| ctx.check())?
            }
            _ => None,
        };
        if ws.needs_confirmation(&wp, dir.is_some()) || held.is_some() {
            let holding = held
                .map(|h| {
                    format!(
                        ", which holds {}",
                        crate::workspace::shown_in_prose(&ws.display(&ws.root_path(*root).join(h)))
                    )
                })
                .unwrap_or_default();
            return Ok(Some(format!(
                "undoing change {} ({} of {}), which changes {}{holding} (on the confirm list)",
                target.id,
                target.action.as_str(),
                crate::workspace::shown_in_prose(&target.path),
                crate::workspace::shown_in_prose(&ws.display(&wp))
            )));
        }
    }
    Ok(None)
}

/// Every path an undo would change, judged as a name (denied, an extension not allowed,
/// too deep, outside): refused before any question, so the person is never asked to
/// confirm an undo that is then refused.
fn refuse_first(ctx: &Ctx, target: &Entry) -> ToolResult<()> {
    let ws = ctx.workspace();
    let mut paths: Vec<(usize, &std::path::Path)> = Vec::new();
    if target.group.is_empty() {
        paths.push((target.root, &target.rel));
    }
    if let Some(m) = &target.moved {
        paths.push((m.to_root, &m.to_rel));
    }
    paths.extend(target.group.iter().map(|op| (op.root, op.rel.as_path())));
    let refused = |e: &crate::error::ToolError| {
        matches!(
            e.code,
            ErrorCode::DeniedPattern
                | ErrorCode::ExtensionDenied
                | ErrorCode::PathTooDeep
                | ErrorCode::PathEscape
                | ErrorCode::PathTraversal
        )
    };
    for (root, rel) in paths {
        // Inside what the client shares now, as a direct change of the path must be
        // (round 29: an undo after the client's roots narrowed rewrote, removed or moved
        // back files outside them, and its conflict diff showed their content).
        ctx.check_scope(
            &ws.root_path(root).join(rel),
            &ws.display(&ws.root_path(root).join(rel)),
        )?;
        match ws.entry(&ws.root_path(root).join(rel), false) {
            Err(e) if refused(&e) => return Err(e),
            Err(_) => {}
            // Nothing there: the undo would make it (a move back, a delete restored
            // from the trash), and what it makes must be servable once made, as a
            // direct change's new name must (its extension above all).
            Ok(r) if r.meta.is_none() => {
                let is_dir = match (&target.trash, &target.moved) {
                    (Some(t), _) => t.is_dir,
                    (None, Some(m)) => ws
                        .stat(&ws.root_path(m.to_root).join(&m.to_rel))
                        .ok()
                        .flatten()
                        .is_some_and(|(_, meta)| meta.is_dir()),
                    (None, None) => false,
                };
                if let Err(e) = ws.check_new(&r.real, is_dir)
                    && refused(&e)
                {
                    return Err(e);
                }
            }
            Ok(_) => {}
        }
    }
    Ok(())
}

/// A dry run's note of the question a real undo would ask (the first one).
fn preview(out: &mut Output, asked: ToolResult<()>) -> ToolResult<()> {
    if let Some(q) = super::would_ask(asked)? {
        out.would_ask.get_or_insert(q);
    }
    Ok(())
}

/// An undo is never undone (undoing it again would be a redo, with its own conflicts):
/// the answer says so, and names where the content a forced undo overwrote was saved.
fn undo_of_undo(e: &Entry) -> ToolError {
    let mut msg = format!(
        "change {} is an undo (of change {}), which cannot be undone",
        e.id,
        e.undoes.map_or_else(|| "?".to_string(), |u| u.to_string())
    );
    if let Some(b) = &e.backup_path {
        msg.push_str(&format!(
            "; the content it overwrote in {} is saved at {}",
            shown(&e.path),
            b.display()
        ));
    }
    for op in &e.group {
        if let Some(b) = &op.backup_path {
            msg.push_str(&format!(
                "; the content it overwrote in {} is saved at {}",
                shown(&op.path),
                b.display()
            ));
        }
    }
    ToolError::invalid(msg).with_hint(
        "to have overwritten content back, the person copies it from the backup the message names; to redo the \
         original change, make it again",
    )
}

/// Brings a deleted entry back from the trash.
fn undo_delete(ctx: &Ctx, history: &History, target: &Entry, out: &mut Output) -> ToolResult<()> {
    let ws = ctx.workspace();
    let wp = ws.root_path(target.root).join(&target.rel);
    let at = ws.entry(&wp, false)?;
    if at.real.rel() != target.rel {
        return Err(conflict(format!(
            "a directory on the way to {} is now a symbolic link; nothing was restored",
            target.path
        ))
        .with_hint("put the directory back as it was, then undo again"));
    }
    if at.meta.is_some() {
        return Err(conflict(format!(
            "something now stands at {}; the deleted entry was not restored over it",
            target.path
        ))
        .with_hint("move or delete what is there first, then undo again"));
    }
    let (Some(dir), Some(name)) = (&at.parent, at.name()) else {
        return Err(
            conflict(format!("the directory that held {} is gone", target.path))
                .with_hint("create the directory again, then undo"),
        );
    };
    let trashed = target
        .trash
        .as_ref()
        .and_then(|rec| history.trashed_dir(rec));
    // A folder brought back holding what the deny rules guard asks, as moving such a
    // folder does (its entries stay guarded where they return; a dry run does not look).
    // Round 27: a restore asked only when its confirm list did, so a folder whose
    // entries became denied after its delete came back unasked.
    let holds = match &trashed {
        Some(d) => {
            let d = d.try_clone().map_err(|e| ToolError::io(&target.path, &e))?;
            super::holds_secrets(out.dry_run, || {
                ws.tree_holds_denied(d, &target.rel, &target.path, &|| ctx.check())
            })?
        }
        None => None,
    };
    if let Some(holds) = holds {
        ctx.note_question(format!(
            "undoing change {} restores {}, {holds}",
            target.id,
            crate::workspace::shown_in_prose(&target.path)
        ));
    }
    let asked = ask_confirm_listed(ctx, target, &[(target.root, &target.rel, trashed.as_ref())]);
    if out.dry_run {
        return preview(out, asked);
    }
    asked?;
    let ws = ctx.workspace();
    // One at a time with every ferret process's moves (see workspace::serial): a link
    // restored into a directory while that directory's move walks its links, after the
    // walk passed its folder, was carried to where it leads outside. Waiting, the
    // restore then finds its folder moved (the guard) and is refused.
    let _serial = ws.moves_serial(&[target.root], crate::workspace::LOCK_WAIT, &|| ctx.check())?;
    let guard = not_undone_in(
        target.id,
        ws,
        vec![(dir, target.root, &target.rel, &target.path)],
    );
    out.change_id = Some(history.restore(target, dir, name, guard)?);
    Ok(())
}

/// The journal entry for undoing `target`, which finds `current` where the change left
/// its content. Refused (`lost` says what would be lost, followed by the diff) if the
/// content changed since, unless `force`, when what is there now is backed up first.
/// `None` on a dry run, which stops here.
fn undo_entry(
    ctx: &Ctx,
    history: &History,
    target: &Entry,
    current: Option<&[u8]>,
    lost: String,
    force: bool,
    out: &mut Output,
) -> ToolResult<Option<Entry>> {
    let unchanged = current.map(sha256) == target.sha256_after;
    if !unchanged && !force {
        return Err(conflict(format!("{lost}:\n{}", out.diff))
            .with_hint("pass force: true to undo anyway; the current content is backed up first"));
    }
    if !unchanged && let Some(cur) = current {
        ask_force(
            ctx,
            history,
            target,
            (target.root, &target.rel, &target.path),
            target.sha256_after.as_deref(),
            &sha256(cur),
        )?;
    }
    // Every reason noted so far (another's change, the confirm list, this overwrite),
    // in one question, before anything is written.
    let asked = ctx.ask_noted();
    if out.dry_run {
        preview(out, asked)?;
        return Ok(None);
    }
    asked?;
    let mut entry = Entry::new(Action::Undo, target.path.clone(), target.root, &target.rel);
    entry.undoes = Some(target.id);
    entry.sha256_before = current.map(sha256);
    if !unchanged && let Some(cur) = current {
        let b = history.backup(target.root, &target.rel, cur)?;
        out.backed_up = true;
        entry.backup_path = Some(b);
    }
    Ok(Some(entry))
}

/// `force` overriding a conflict overwrites content the change undone did not write:
/// unless every change to the file since (from `from`, what the change undone left
/// there) is the caller's own, each over exactly what the one before left, and the last
/// left exactly what is there now (`now`, its hash), it asks as undoing another's change
/// asks (the person confirms; without an answer nothing changes). An outside edit under
/// the caller's own later edit is asked about too: going back past it loses it. What it
/// overwrites is backed up either way.
fn ask_force(
    ctx: &Ctx,
    history: &History,
    target: &Entry,
    (root, rel, path): (usize, &std::path::Path, &str),
    from: Option<&str>,
    now: &str,
) -> ToolResult<()> {
    let caller = ctx.session().owner();
    let mine = |e: &Entry| e.by.as_ref().is_some_and(|o| o.owned_by(&caller));
    let who = match history.writers_since((root, rel), target.id, from, Some(now), mine)? {
        Writers::Own => return Ok(()),
        Writers::Other(e) => match &e.by {
            Some(o) => format!("change {} made by {}", e.id, o.describe()),
            None => format!("change {} made by an unknown caller", e.id),
        },
        Writers::Outside => {
            "no change ferret recorded, at least in part (an outside editor, or another program)"
                .to_string()
        }
    };
    ctx.note_question(format!(
        "force-undoing change {} ({} of {}), which overwrites {} as written by {who}, not by this \
         session (what is there now is backed up first)",
        target.id,
        target.action.as_str(),
        shown(&target.path),
        shown(path)
    ));
    Ok(())
}

/// Removes a file a create made, if it still holds what was written (or, forced, after
/// backing up what it holds now), and the directories made for it that are empty.
fn undo_create(
    ctx: &Ctx,
    history: &History,
    target: &Entry,
    force: bool,
    out: &mut Output,
) -> ToolResult<()> {
    let ws = ctx.workspace();
    let wp = ws.root_path(target.root).join(&target.rel);
    let probe = ws.entry(&wp, false)?;
    if probe.real.rel() != target.rel {
        return Err(conflict(format!(
            "a directory on the way to {} is now a symbolic link; nothing was removed",
            target.path
        )));
    }
    match &probe.meta {
        Some(m) if m.is_file() => {}
        Some(_) => return Err(conflict(format!("{} is no longer a file", target.path))),
        None => {
            return Err(conflict(format!(
                "{} is already gone; there is nothing to undo",
                target.path
            )));
        }
    }
    // Held (locked) until the file is removed.
    let (_locked, current, at, _held) = super::read_locked(ctx, &wp, &target.path)?;
    opened_in_place(&at, &target.rel, &target.path)?;
    // Bounded like every change's diff (a 64 MiB file's lines are not diffed whole).
    let (now, charset) = super::diff_text(&current);
    out.diff = super::unified_diff(
        &now,
        "",
        &super::with_charset(
            format!("a/{} (now)", crate::workspace::shown_in_prose(&target.path)),
            charset.as_deref(),
        ),
        "/dev/null (removed)",
        3,
    );
    let lost = format!(
        "{} was changed after change {} created it; removing it would lose that",
        target.path, target.id
    );
    note_confirm_listed(ctx, target, &[(target.root, &target.rel, None)])?;
    let Some(entry) = undo_entry(ctx, history, target, Some(&current), lost, force, out)? else {
        return Ok(());
    };
    let (Some(dir), Some(name)) = (&at.parent, at.name()) else {
        return Err(conflict(format!(
            "the directory that held {} is gone",
            target.path
        )));
    };
    let ws = ctx.workspace();
    let guard = not_undone_in(
        target.id,
        ws,
        vec![(dir, target.root, &target.rel, &target.path)],
    );
    out.change_id = Some(history.unlink(dir, name, entry, guard)?);
    ctx.workspace()
        .remove_empty_dirs(target.root, &target.created_dirs);
    Ok(())
}

/// Moves a moved object back, exactly it (same device and inode), to where it was,
/// never over anything standing there; then puts back the file it replaced, if any.
fn undo_move(ctx: &Ctx, history: &History, target: &Entry, out: &mut Output) -> ToolResult<()> {
    let ws = ctx.workspace();
    let Some(m) = &target.moved else {
        return Err(conflict(format!("change {} has no move record", target.id)));
    };
    let to = ws.entry(&ws.root_path(m.to_root).join(&m.to_rel), false)?;
    let here = to
        .parent
        .as_ref()
        .zip(to.name())
        .and_then(|(d, n)| crate::workspace::write::identity_at(d, n).ok());
    if to.real.rel() != m.to_rel || here != Some((m.dev, m.ino)) {
        return Err(conflict(format!(
            "{} is no longer what change {} moved there; nothing was moved back",
            m.to_path, target.id
        ))
        .with_hint("move it back by hand if it is still somewhere else"));
    }
    let from = ws.entry(&ws.root_path(target.root).join(&target.rel), false)?;
    if from.real.rel() != target.rel {
        return Err(conflict(format!(
            "a directory on the way to {} is now a symbolic link; nothing was moved back",
            target.path
        )));
    }
    if from.meta.is_some() {
        return Err(conflict(format!(
            "something now stands at {}; nothing was moved back over it",
            target.path
        ))
        .with_hint("move or delete what is there first, then undo again"));
    }
    // Moving back is a move: what holds ferret's own places (its state, config, the
    // trash, the audit log) is not moved (round 20: an undo moved back the folder
    // holding this run's audit log, which the agent then read and erased).
    ws.check_keeps(&to.real, "moved")?;
    // No link in what moves may come to lead outside.
    let walked = super::move_path::links_stay_inside(
        ctx,
        &to,
        &crate::workspace::shown_in_prose(&m.to_path),
        &from.real,
        &crate::workspace::shown_in_prose(&target.path),
    )?;
    if walked.is_some_and(|id| id != (m.dev, m.ino)) {
        return Err(conflict(format!(
            "{} was replaced while it was being checked; nothing was moved back",
            m.to_path
        )));
    }
    let (Some(from_dir), Some(from_name)) = (&from.parent, from.name()) else {
        return Err(
            conflict(format!("the directory that held {} is gone", target.path))
                .with_hint("create the directory again, then undo"),
        );
    };
    let (Some(to_dir), Some(to_name)) = (&to.parent, to.name()) else {
        return Err(conflict(format!("{} is gone", m.to_path)));
    };
    // Names as every receipt gives them: quoted when odd, so a name cannot forge a line.
    out.diff = format!(
        "{} -> {}\n",
        crate::workspace::shown_in_prose(&m.to_path),
        crate::workspace::shown_in_prose(&target.path)
    );
    let moved_dir = if to.meta.as_ref().is_some_and(|m| m.is_dir()) {
        Some(
            cap_fs_ext::DirExt::open_dir_nofollow(to_dir, to_name)
                .map_err(|e| ToolError::io(&m.to_path, &e))?,
        )
    } else {
        None
    };
    // Moving a folder back is a move of that folder, judged as `move` judges one (round
    // 19: an undo put a folder holding a secret at a name no rule denies, unasked, and
    // made `.docker/config.json` from a folder the agent had filled): what it holds as
    // it stands now, stamped before these walks and checked again just before the
    // rename, so what is added meanwhile is never moved back unjudged or unasked.
    let check = || ctx.check();
    let checked_stamp = match &moved_dir {
        Some(_) => Some(ws.state_stamp(&to, &check)?.unwrap_or_default()),
        None => None,
    };
    // A link to a folder moved back puts what that folder holds under the old name as
    // surely as the folder would, so it is judged, asked about and pinned by that
    // folder, as `move` judges one (round 21: the undo of such a move took along a
    // workflow written into the folder while the person read its question).
    let linked = if to.meta.as_ref().is_some_and(|m| m.is_symlink()) {
        ws.linked_dir(&ws.root_path(m.to_root).join(&m.to_rel))
    } else {
        None
    };
    let is_link = to.meta.as_ref().is_some_and(|m| m.is_symlink());
    // No link, whatever it leads to now (round 22: one leading nowhere is a folder's
    // once the agent makes one there).
    if is_link
        && let Some(name) = from.real.rel().file_name()
        && ws.names_denied_folder(name)
    {
        return Err(crate::workspace::denied_error(&ws.shown_name(&from.real)).with_hint(
            "a link is not put back at a name whose contents ferret keeps private; move it elsewhere by hand",
        ));
    }
    let linked_dir = match &linked {
        Some(l) => match (&l.parent, l.name()) {
            (Some(d), Some(n)) => Some(
                cap_fs_ext::DirExt::open_dir_nofollow(d, n)
                    .map_err(|e| ToolError::io(&m.to_path, &e))?,
            ),
            _ => None,
        },
        None => None,
    };
    // What a link leads to, walked afresh from its name: a folder and all it holds, a
    // file, or nothing (checked again after the wait, and pinned when asked).
    let linked_stamp = if is_link {
        Some(ws.link_leads(&to.real, &check)?)
    } else {
        None
    };
    // What the entry moved back carries: the folder itself, or the one a link leads to.
    let holder = if moved_dir.is_some() {
        Some(&to)
    } else {
        linked.as_ref()
    };
    let holder_dir = moved_dir.as_ref().or(linked_dir.as_ref());
    // Said in every reason: the entry is a link, and where it leads.
    let link_said = match &linked {
        Some(l) => format!(
            " ({} is a link to {})",
            crate::workspace::shown_in_prose(&m.to_path),
            crate::workspace::shown_in_prose(&ws.display(&l.real))
        ),
        None if is_link => format!(
            " ({} is a link to no folder now)",
            crate::workspace::shown_in_prose(&m.to_path)
        ),
        None => String::new(),
    };
    if let Some(h) = holder {
        match ws.move_changes_denied(h, &from.real, !out.dry_run, &check)? {
            Some(crate::workspace::DenyChange::Makes(made)) => {
                return Err(crate::workspace::denied_error(&ws.shown_name(&made)).with_hint(
                    "moved back, the folder would put a file at a name ferret keeps private; move that file out of it first",
                ));
            }
            Some(crate::workspace::DenyChange::Unserved) => {
                return Err(super::move_path::unserved_error(
                    &crate::workspace::shown_in_prose(&m.to_path),
                ));
            }
            Some(crate::workspace::DenyChange::Exposes) => {
                return Err(super::move_path::exposes_error(
                    &crate::workspace::shown_in_prose(&m.to_path),
                    &crate::workspace::shown_in_prose(&target.path),
                )
                .with_hint("the user can move it back outside ferret"));
            }
            None => {}
        }
    }
    let mut why: Vec<String> = confirm_listed_reason(
        ctx,
        target,
        &[
            (m.to_root, &m.to_rel, holder_dir),
            (target.root, &target.rel, holder_dir),
        ],
    )?
    .into_iter()
    .map(|r| format!("{r}{link_said}"))
    .collect();
    if let Some(h) = holder
        && let Some(holds) = super::holds_secrets(out.dry_run, || ws.holds_denied(h, &check))?
    {
        why.push(format!(
            "undoing change {} moves {} back to {}, {holds}{link_said}",
            target.id,
            crate::workspace::shown_in_prose(&m.to_path),
            crate::workspace::shown_in_prose(&target.path)
        ));
    }
    // The yes approves the folder as it stands now, or the one the link leads to.
    if let Some(stamp) = checked_stamp {
        ctx.pin(&m.to_path, stamp)?;
    }
    if let Some(stamp) = linked_stamp {
        ctx.pin(&format!("what {} leads to", m.to_path), stamp)?;
    }
    for w in why {
        ctx.note_question(w);
    }
    let asked = ctx.ask_noted();
    if out.dry_run {
        return preview(out, asked);
    }
    asked?;
    let mut entry = Entry::new(Action::Undo, m.to_path.clone(), m.to_root, &m.to_rel);
    entry.undoes = Some(target.id);
    entry.moved = Some(crate::history::MoveRecord {
        to_path: target.path.clone(),
        to_root: target.root,
        to_rel: target.rel.clone(),
        dev: m.dev,
        ino: m.ino,
    });
    // The race tests' pause: what changes during it must be caught below.
    crate::history::change::pause_here_in_tests();
    // Walked again one at a time with every ferret process's moves, up to the rename
    // (see workspace::serial): after the question, which may wait for a person.
    let _serial = ctx.workspace().moves_serial(
        &[m.to_root, target.root],
        crate::workspace::LOCK_WAIT,
        &|| ctx.check(),
    )?;
    let again = super::move_path::links_stay_inside(
        ctx,
        &to,
        &crate::workspace::shown_in_prose(&m.to_path),
        &from.real,
        &crate::workspace::shown_in_prose(&target.path),
    )?;
    if again != walked {
        return Err(conflict(format!(
            "{} was replaced while it was being checked; nothing was moved back",
            m.to_path
        )));
    }
    let linked_changed = match linked_stamp {
        Some(stamp) => ws.link_leads(&to.real, &check)? != stamp,
        None => false,
    };
    let changed = match checked_stamp {
        Some(stamp) => ws.state_stamp(&to, &check)? != Some(stamp),
        None => false,
    };
    if linked_changed || changed {
        return Err(conflict(format!(
            "{} changed while the undo was being checked; nothing was moved back",
            crate::workspace::shown_in_prose(&m.to_path)
        ))
        .with_hint("call again: it is then judged (and asked about) as it stands"));
    }
    let ws = ctx.workspace();
    let guard = not_undone_in(
        target.id,
        ws,
        vec![
            (to_dir, m.to_root, &m.to_rel, &m.to_path),
            (from_dir, target.root, &target.rel, &target.path),
        ],
    );
    let id = history.move_entry(to_dir, to_name, from_dir, from_name, false, entry, guard)?;
    out.change_id = Some(id);
    // The directories the move made at its destination, if nothing else is in them.
    ctx.workspace()
        .remove_empty_dirs(m.to_root, &target.created_dirs);
    // The file the move replaced comes back from its backup.
    if let Some(b) = &target.backup_path {
        let _held = hold_backup(ctx, b, &m.to_path)?;
        let content = history.read_backup(b).map_err(|mut e| {
            e.message = format!("moved back, but {}", e.message);
            e
        })?;
        let mut entry = Entry::new(Action::Undo, m.to_path.clone(), m.to_root, &m.to_rel);
        entry.undoes = Some(target.id);
        entry.sha256_after = Some(sha256(&content));
        let placed = || {
            ctx.workspace()
                .still_holds(to_dir, m.to_root, &m.to_rel, &m.to_path)
        };
        history.create(to_dir, to_name, &content, entry, &placed)?;
        out.diff.push_str(&format!(
            "{} restored from its backup\n",
            crate::workspace::shown_in_prose(&m.to_path),
        ));
    }
    Ok(())
}

/// Reverts a whole patch as one group: every file must still hold what the patch left
/// (else `CONFLICT` naming them; `force` goes on, and what it replaces is backed up).
fn undo_group(
    ctx: &Ctx,
    history: &History,
    target: &Entry,
    force: bool,
    out: &mut Output,
) -> ToolResult<()> {
    use crate::history::OpKind;
    use crate::history::group::Planned;
    let ws = ctx.workspace();
    let mut changed = Vec::new();
    // What a forced undo would overwrite: (root, real path, shown path), what the patch
    // left there, hash now.
    let mut overwritten = Vec::new();
    let mut planned = Vec::new();
    // The memory the files read and the backups restored hold, until they are written.
    let mut held = Vec::new();
    // Which planned file undoes which of the patch's (by index), to pair a move's halves.
    let mut undone_by = std::collections::HashMap::new();
    // The folders made on the way to files made anew (their patch deleted them, and the
    // folders were gone since).
    let mut made = Vec::new();
    for (i, op) in target.group.iter().enumerate().rev() {
        let mut made_here = Vec::new();
        let wp = ws.root_path(op.root).join(&op.rel);
        let at = ws.entry(&wp, false)?;
        if at.real.rel() != op.rel {
            return Err(conflict(format!(
                "a directory on the way to {} is now a symbolic link; nothing was undone",
                op.path
            )));
        }
        let (current, old) = match &at.meta {
            Some(m) if m.is_file() => {
                let (file, buf, opened, hold) = super::read_locked(ctx, &wp, &op.path)?;
                opened_in_place(&opened, &op.rel, &op.path)?;
                held.push(hold);
                (Some(buf), Some(file))
            }
            Some(_) => return Err(conflict(format!("{} is no longer a file", op.path))),
            None => (None, None),
        };
        let now = current.as_deref().map(sha256);
        let as_left = match op.kind {
            OpKind::Replace | OpKind::Create => now.is_some() && now == op.sha256_after,
            OpKind::Remove => current.is_none(),
        };
        if !as_left {
            changed.push(op.path.clone());
            if let Some(h) = &now {
                overwritten.push((
                    (op.root, op.rel.clone(), op.path.clone()),
                    op.sha256_after.clone(),
                    h.clone(),
                ));
            }
        }
        let mut restore = |b: &Option<std::path::PathBuf>| -> ToolResult<Vec<u8>> {
            let b = b.as_ref().ok_or_else(|| {
                conflict(format!(
                    "the patch was made with backups off, so the old content of {} was not kept; it cannot be undone",
                    op.path
                ))
            })?;
            held.push(hold_backup(ctx, b, &op.path)?);
            history.read_backup_as(b, op.sha256_before.as_deref())
        };
        // The inverse of this file's change.
        let (kind, content) = match (op.kind, &current) {
            (OpKind::Replace, Some(_)) => (OpKind::Replace, Some(restore(&op.backup_path)?)),
            (OpKind::Replace, None) => (OpKind::Create, Some(restore(&op.backup_path)?)),
            (OpKind::Create, Some(_)) => (OpKind::Remove, None),
            (OpKind::Create, None) => continue, // already gone
            (OpKind::Remove, None) => (OpKind::Create, Some(restore(&op.backup_path)?)),
            (OpKind::Remove, Some(_)) => (OpKind::Replace, Some(restore(&op.backup_path)?)),
        };
        let (now_text, now_cs) = super::diff_text(current.as_deref().unwrap_or_default());
        let (then, then_cs) = super::diff_text(content.as_deref().unwrap_or_default());
        out.diff.push_str(&super::unified_diff(
            &now_text,
            &then,
            &super::with_charset(format!("a/{} (now)", shown(&op.path)), now_cs.as_deref()),
            &super::with_charset(
                format!("b/{} (restored)", shown(&op.path)),
                then_cs.as_deref(),
            ),
            3,
        ));
        let at = if kind == OpKind::Create {
            // The recorded place itself, by the walk that opens its directory: a
            // directory on the way made a link since the check above is refused too.
            let recorded = |real: &crate::workspace::WsPath| {
                if real.rel() == op.rel {
                    Ok(())
                } else {
                    Err(conflict(format!(
                        "a directory on the way to {} is now a symbolic link; nothing was undone",
                        op.path
                    )))
                }
            };
            let (at, created) = ws.make_parents(&wp, false, &recorded)?;
            // Removed again if the undo does not land, named in its record if it does.
            made.push(ws.made_dirs(at.parent.as_ref(), &created));
            made_here = created;
            at
        } else {
            at
        };
        let (Some(dir), Some(name)) = (at.parent, op.rel.file_name().map(|n| n.to_os_string()))
        else {
            return Err(conflict(format!(
                "the directory that held {} is gone",
                op.path
            )));
        };
        let backup_path = match (&current, as_left) {
            (Some(c), false) => Some(history.backup(op.root, &op.rel, c)?),
            _ => None,
        };
        out.backed_up |= backup_path.is_some();
        undone_by.insert(i, planned.len());
        planned.push(Planned {
            op: crate::history::GroupOp {
                kind,
                path: op.path.clone(),
                root: op.root,
                rel: op.rel.clone(),
                temp: None,
                backup_path,
                sha256_before: now,
                sha256_after: content.as_deref().map(sha256),
                created_dirs: std::mem::take(&mut made_here),
                moved_by: None,
                // A file made anew takes the mode the patch found it with.
                mode: op.mode,
            },
            dir,
            name,
            content,
            before: current,
            old,
        });
    }
    // The undo of a move is a move back: the removal at the patch's destination is
    // settled with the restore at its source, as the patch's own halves were.
    for (i, op) in target.group.iter().enumerate() {
        if let Some(j) = op.moved_by
            && let (Some(&back), Some(&from)) = (undone_by.get(&i), undone_by.get(&j))
            && planned[from].op.kind == OpKind::Remove
        {
            planned[from].op.moved_by = Some(back);
        }
    }
    if !changed.is_empty() && !force {
        return Err(conflict(format!(
            "{} changed after patch {}; undoing it would lose that",
            changed.join(", "),
            target.id
        ))
        .with_hint("pass force: true to undo anyway; what is there now is backed up first"));
    }
    for ((root, rel, path), from, now) in &overwritten {
        ask_force(
            ctx,
            history,
            target,
            (*root, rel, path),
            from.as_deref(),
            now,
        )?;
    }
    // What a forced undo overwrites is saved first; the receipt says so, never where (a
    // host path). `undo` of this undo names the backups for the person.
    if planned.iter().any(|p| p.op.backup_path.is_some()) {
        out.backed_up = true;
    }
    let paths: Vec<_> = target
        .group
        .iter()
        .map(|op| (op.root, op.rel.as_path(), None))
        .collect();
    let asked = ask_confirm_listed(ctx, target, &paths);
    if out.dry_run {
        return preview(out, asked);
    }
    asked?;
    let mut entry = Entry::new(Action::Undo, target.path.clone(), target.root, &target.rel);
    entry.undoes = Some(target.id);
    let placed = super::group_placed(ctx.workspace());
    out.change_id = Some(history.apply_group(planned, entry, not_undone(target.id), &placed)?);
    for m in made {
        m.keep();
    }
    for op in target.group.iter().filter(|op| op.kind == OpKind::Create) {
        ctx.workspace().remove_empty_dirs(op.root, &op.created_dirs);
    }
    Ok(())
}

/// Puts an edited file's earlier content back.
fn undo_edit(
    ctx: &Ctx,
    history: &History,
    target: &Entry,
    force: bool,
    out: &mut Output,
) -> ToolResult<()> {
    let ws = ctx.workspace();
    let backup_path = target.backup_path.as_ref().ok_or_else(|| {
        conflict(format!(
            "change {} ({} of {}) was made with backups off (backup_enabled = false), so the content it \
             replaced was not kept; it cannot be undone",
            target.id,
            target.action.as_str(),
            target.path
        ))
        .with_hint("turn backups on (backup_enabled = true, the default) for edits that can be undone")
    })?;
    let _restored_held = hold_backup(ctx, backup_path, &target.path)?;
    let restored = history.read_backup_as(backup_path, target.sha256_before.as_deref())?;
    let wp = ws.root_path(target.root).join(&target.rel);
    let probe = ws.entry(&wp, false)?;
    if probe.real.rel() != target.rel {
        return Err(conflict(format!(
            "a directory on the way to {} is now a symbolic link; nothing was restored",
            target.path
        )));
    }
    // Locked from the comparison to the write: an edit racing the undo lands before or
    // after it, never in between.
    let (locked, at) = match &probe.meta {
        Some(m) if m.is_file() => {
            let (file, buf, at, hold) = super::read_locked(ctx, &wp, &target.path)?;
            opened_in_place(&at, &target.rel, &target.path)?;
            (Some((file, buf, hold)), at)
        }
        Some(_) => {
            return Err(conflict(format!("{} is no longer a file", target.path)));
        }
        None => (None, probe),
    };
    let current = locked.as_ref().map(|(_, b, _)| b.as_slice());
    // Each side decoded as read_file reads it, its charset named (the bytes restored
    // are the backup's, exactly).
    let (now, now_cs) = super::diff_text(current.unwrap_or_default());
    let (then, then_cs) = super::diff_text(&restored);
    out.diff = super::unified_diff(
        &now,
        &then,
        &super::with_charset(
            format!("a/{} (now)", shown(&target.path)),
            now_cs.as_deref(),
        ),
        &super::with_charset(
            format!("b/{} (restored)", shown(&target.path)),
            then_cs.as_deref(),
        ),
        3,
    );
    let what = if current.is_none() {
        "was deleted"
    } else {
        "was changed"
    };
    let lost = format!(
        "{} {what} after change {}; undoing would lose that",
        target.path, target.id
    );
    note_confirm_listed(ctx, target, &[(target.root, &target.rel, None)])?;
    let Some(mut entry) = undo_entry(ctx, history, target, current, lost, force, out)? else {
        return Ok(());
    };
    entry.sha256_after = Some(sha256(&restored));
    let (Some(dir), Some(name)) = (&at.parent, at.name()) else {
        return Err(conflict(format!(
            "the directory that held {} is gone",
            target.path
        )));
    };
    let like = locked.as_ref().map(|(f, _, _)| f.as_fd());
    let ws = ctx.workspace();
    let placed = || {
        ws.still_holds(dir, at.real.root_index(), at.real.rel(), &target.path)?;
        match &locked {
            Some((f, b, _)) => ws.still_the_file(dir, name, f, Some(b), &target.path),
            None => Ok(()),
        }
    };
    // As an edit's: no move takes the folder between its last check and its rename.
    let _serial = ws.writes_serial(dir, crate::workspace::LOCK_WAIT, &|| ctx.check())?;
    out.change_id = Some(history.replace(
        dir,
        name,
        like,
        &restored,
        entry,
        not_undone(target.id),
        &placed,
    )?);
    Ok(())
}

impl Tool for Undo {
    type Params = Params;
    type Output = Output;

    fn meta(&self) -> ToolMeta {
        ToolMeta {
            name: "undo",
            title: "Undo a change",
            description: "Undo your session's last change, or change id (another's asks for confirmation). CONFLICT if \
the file changed since; force overrides, backing up what is there. dry_run previews.",
            annotations: Annotations::WRITE,
            served_by_default: true,
        }
    }

    fn run(&self, ctx: &Ctx, p: Params) -> ToolResult<Output> {
        let dry_run = p.dry_run || ctx.config().dry_run;
        // A dry run settles nothing: recovery of a killed process's change writes.
        let history = if dry_run {
            ctx.history_read()?
        } else {
            ctx.history()?
        };
        let caller = ctx.session().owner();
        let mine = |e: &Entry| e.by.as_ref().is_some_and(|o| o.owned_by(&caller));
        let (target, undone) = match history.undo_target(p.id, mine)? {
            Some((e, _)) if e.action == Action::Undo => return Err(undo_of_undo(&e)),
            Some((e, undone)) => (e, undone),
            None => {
                return Err(match p.id {
                    Some(id) => ToolError::new(
                        ErrorCode::NotFound,
                        format!("no change with id {id} in the journal"),
                    )
                    .with_hint("list the changes with `ferret history`"),
                    None => ToolError::new(
                        ErrorCode::NotFound,
                        "there is no change to undo among yours",
                    )
                    .with_hint(
                        "undo without an id reverts only this session's changes; to undo another's, pass its id \
                         (`ferret history` lists them), which asks the user",
                    ),
                });
            }
        };
        let target = &target;
        if undone {
            return Err(already_undone(target.id));
        }
        if target.pending {
            return Err(conflict(format!(
                "change {} is still under way in another process",
                target.id
            ))
            .with_hint("retry in a moment"));
        }
        ctx.set_audit_path(target.path.clone());
        // The change a question about this undo names is the one undone after the yes:
        // `undo` with no id picks the latest, and a change made while the person read
        // the question would be the one undone, unasked.
        ctx.pin(&format!("the change to undo ({})", target.id), target.id)?;
        refuse_first(ctx, target)?;
        // Someone else's change (another session, the person, or unknown): only by its id,
        // and only if the user says so.
        // Asked with every other reason the undo finds, in one question (each kind asks
        // what it noted before it changes anything).
        if !mine(target) {
            let who = target
                .by
                .as_ref()
                .map_or_else(|| "an unknown caller".to_string(), |o| o.describe());
            ctx.note_question(format!(
                "undoing change {} ({} of {}), made by {who}, not by this session",
                target.id,
                target.action.as_str(),
                crate::workspace::shown_in_prose(&target.path)
            ));
        }
        let mut out = Output {
            undone: target.id,
            action: target.action.as_str().to_string(),
            path: target.path.clone(),
            diff: String::new(),
            backed_up: false,
            change_id: None,
            would_ask: None,
            dry_run,
        };
        match target.action {
            Action::Edit => undo_edit(ctx, history, target, p.force, &mut out)?,
            Action::Create => undo_create(ctx, history, target, p.force, &mut out)?,
            Action::Move => undo_move(ctx, history, target, &mut out)?,
            Action::Patch => undo_group(ctx, history, target, p.force, &mut out)?,
            Action::Delete => undo_delete(ctx, history, target, &mut out)?,
            Action::DeletePermanent => {
                return Err(conflict(format!(
                    "change {} deleted {} permanently; it cannot be undone",
                    target.id, target.path
                )));
            }
            Action::Undo => return Err(undo_of_undo(target)),
        }
        Ok(out)
    }

    fn render(&self, o: &Output) -> String {
        if o.dry_run {
            return format!(
                "Would undo change {} ({} of {}):\n{}{}",
                o.undone,
                o.action,
                shown(&o.path),
                super::render_would_ask(o.would_ask.as_ref()),
                o.diff
            );
        }
        let mut s = if o.action == "delete" {
            format!(
                "Undid change {}: {} is back from the trash.\n",
                o.undone,
                shown(&o.path)
            )
        } else {
            format!(
                "Undid change {} ({} of {}).\n",
                o.undone,
                o.action,
                shown(&o.path)
            )
        };
        if o.backed_up {
            // Never the backup's host path: an agent cannot reach it, and it tells the
            // host's layout. It is in the state directory, by the journal's entry.
            s.push_str("The content it replaced is backed up in ferret's state directory.\n");
        }
        s.push_str(&o.diff);
        s
    }
}

/// Takes from the shared memory budget what reading the backup at `b` (of the file
/// `shown`) will hold, by the backup's size (the read itself refuses anything but a
/// regular file).
fn hold_backup(
    ctx: &Ctx,
    b: &std::path::Path,
    shown: &str,
) -> ToolResult<crate::search::cost::Permit<'static>> {
    use crate::search::cost;
    let size = std::fs::symlink_metadata(b).map_or(0, |m| m.len());
    // A backup of a file in another encoding is decoded for the diff: its text held too
    // (measured in blocks, as the read itself opens it: a regular file, no link).
    let text = crate::history::safe::open_regular(b, std::fs::OpenOptions::new().read(true))
        .ok()
        .and_then(|f| crate::text::measure(f, size, size).ok())
        .filter(|m| m.decoded)
        .map_or(0, |m| m.text);
    cost::hold(
        cost::file_weight(size, cost::copies::READ)
            .saturating_add(cost::file_weight(text, cost::copies::DECODED)),
        &crate::workspace::shown_in_prose(shown),
        ctx.control(),
    )
}

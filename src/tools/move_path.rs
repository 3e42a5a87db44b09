//! `move`: rename a file or directory, within a root or across roots, journalled and
//! undoable.
//!
//! Both ends are resolved beneath their roots and the move is one `renameat` between the
//! two parent directories' handles: `RENAME_NOREPLACE` unless `overwrite`, so nothing is
//! replaced that the agent did not ask to replace, not even a file that appeared a
//! moment ago. `overwrite` replaces a file only (its content is backed up first). A final
//! symlink is moved as the link. The object moved is recorded by device and inode; undo
//! moves exactly it back, and puts a replaced file's content back.

use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::history::{Action, Entry, MoveRecord, sha256};
use crate::tool::{Annotations, Ctx, Tool, ToolMeta};
use crate::workspace::EntryType;
use crate::workspace::shown;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::os::fd::AsFd;

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    pub source: String,
    pub destination: String,
    #[serde(default)]
    pub overwrite: bool,
    #[serde(default)]
    pub dry_run: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    pub source: String,
    pub destination: String,
    #[serde(rename = "type")]
    pub kind: EntryType,
    /// The file the move replaced (overwrite) was kept, so undo can restore it. Where it is kept is the host's business: no path is sent.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub backed_up: bool,
    /// Directories created for the destination, outermost first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub created_dirs: Vec<String>,
    /// The undo journal's id for this change (absent on a dry run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change_id: Option<u64>,
    /// A dry run of a change that would ask the user first: the question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub would_ask: Option<String>,
    pub dry_run: bool,
}

pub struct Move;

impl Tool for Move {
    type Params = Params;
    type Output = Output;

    fn meta(&self) -> ToolMeta {
        ToolMeta {
            name: "move",
            title: "Move or rename",
            description: "Move or rename a file or directory; destination is the new path, not a folder to move into. Replaces nothing unless overwrite (files only). Undo reverts; dry_run previews.",
            annotations: Annotations::WRITE,
            served_by_default: true,
        }
    }

    fn run(&self, ctx: &Ctx, p: Params) -> ToolResult<Output> {
        let ws = ctx.workspace();
        let src = ctx.resolve(&p.source)?;
        let dst = ctx.resolve(&p.destination)?;
        let src_shown = ws.display(&src);
        let dst_shown = ws.display(&dst);
        ctx.set_audit_path(src_shown.clone());
        ctx.set_audit_paths(vec![dst_shown.clone()]);
        // In messages, a name ends where it visibly ends (quoted when odd or spaced).
        let src_said = crate::workspace::shown_in_prose(&src_shown).into_owned();
        let dst_said = crate::workspace::shown_in_prose(&dst_shown).into_owned();
        if src.is_root() || dst.is_root() {
            return Err(ToolError::invalid(
                "a workspace root cannot be moved or replaced",
            ));
        }
        let from = ws.entry(&src, false)?;
        let Some(meta) = &from.meta else {
            return Err(ToolError::new(
                ErrorCode::NotFound,
                format!("{src_said}: no such file or directory"),
            ));
        };
        let kind = EntryType::of(&meta.file_type());
        // `d/y.txt/` names a directory: moving a file there would make the file `d/y.txt`
        // (the slash is dropped when the path is resolved), which is not what was said.
        let said_dir = p.destination.ends_with('/') || p.destination.ends_with("/.");
        let into_dir = ws
            .entry(&dst, false)
            .ok()
            .and_then(|t| t.meta)
            .is_some_and(|m| m.is_dir());
        // (An existing directory is refused below with the path that moves into it.)
        if said_dir && !meta.is_dir() && !into_dir {
            return Err(ToolError::invalid(format!(
                "the destination {dst_said}/ ends with a slash, which names a directory, and {src_said} is a file"
            ))
            .with_hint(format!(
                "to move it into that directory, pass destination {}/{}; to rename it, drop the slash",
                dst_shown.trim_end_matches('/'),
                src_shown.rsplit('/').next().unwrap_or(&src_shown)
            )));
        }
        let to = ws.entry(&dst, false)?;
        // What the move makes must be servable once made (a file's extension). An
        // existing directory there is refused below with the path that would do it.
        if !to.meta.as_ref().is_some_and(|m| m.is_dir()) {
            ws.check_new(&to.real, meta.is_dir())?;
        }
        // A link to a secret is treated as the secret, at either end: not moved, not
        // replaced.
        for (at, p) in [(&from, &src), (&to, &dst)] {
            if at.meta.as_ref().is_some_and(|m| m.is_symlink())
                && let Err(e) = ws.entry(p, true)
                && e.code == ErrorCode::DeniedPattern
            {
                return Err(e);
            }
        }
        ws.check_keeps(&from.real, "moved")?;
        if ws.holds_root(&from.real) || (to.meta.is_some() && ws.holds_root(&to.real)) {
            return Err(ToolError::invalid(format!(
                "{} holds another workspace root; a root cannot be moved or replaced",
                if ws.holds_root(&from.real) {
                    &src_said
                } else {
                    &dst_said
                }
            ))
            .with_hint("move the entries inside it instead"));
        }
        if to.real == from.real {
            return Err(ToolError::invalid(format!(
                "{src_said} and {dst_said} are the same entry; nothing was moved"
            )));
        }
        if to.real.root_index() == from.real.root_index()
            && to.real.rel().starts_with(from.real.rel())
        {
            return Err(ToolError::invalid(format!(
                "{dst_said} is inside {src_said}: a directory cannot be moved into itself"
            )));
        }
        // A relative link means something else where it lands: a move must not make one
        // lead out of the workspace (an escape the person's own tools would follow),
        // neither the entry moved nor any link inside a moved directory.
        let walked = links_stay_inside(ctx, &from, &src_said, &to.real, &dst_said)?;
        // `mv a.txt docs/` habits: a destination that is a directory is not where a
        // move goes into; say the path that would do it.
        let into = || {
            let name = src_shown.rsplit('/').next().unwrap_or(&src_shown);
            let inside = format!("{}/{name}", dst_shown.trim_end_matches('/'));
            ToolError::new(
                ErrorCode::AlreadyExists,
                format!(
                    "{} is an existing directory; nothing was moved (destination is the new path itself)",
                    shown(&dst_shown),
                ),
            )
            .with_hint(format!(
                "to move it into that directory, pass destination {}; overwrite replaces files only, never a directory",
                shown(&inside)
            ))
        };
        // `move a A` on a volume that folds case or Unicode normalisation (macOS): `A`
        // is `a` itself, found by another spelling: a rename, not a replacement.
        let respelled = to.meta.is_some()
            && match (&from.parent, from.name(), &to.parent, to.name()) {
                (Some(fd), Some(fname), Some(td), Some(tname)) => {
                    crate::platform::same_entry_by_another_name(
                        fd.as_fd(),
                        fname,
                        td.as_fd(),
                        tname,
                    )
                }
                _ => false,
            };
        // Two hard links of one file: a rename between them does nothing (POSIX), so a
        // "move" would report a change that never happened.
        if to.meta.is_some()
            && !respelled
            && let (Some(fd), Some(fname), Some(td), Some(tname)) =
                (&from.parent, from.name(), &to.parent, to.name())
            && let (Ok(a), Ok(b)) = (
                rustix::fs::statat(fd, fname, rustix::fs::AtFlags::SYMLINK_NOFOLLOW),
                rustix::fs::statat(td, tname, rustix::fs::AtFlags::SYMLINK_NOFOLLOW),
            )
            && crate::platform::file_id(&a) == crate::platform::file_id(&b)
        {
            return Err(ToolError::new(
                ErrorCode::AlreadyExists,
                format!("{src_said} and {dst_said} are hard links of one file; nothing was moved"),
            )
            .with_hint("to keep one name only, delete the other with file_delete"));
        }
        let replacing = match &to.meta {
            None => false,
            Some(_) if respelled => false,
            Some(m) if m.is_dir() => return Err(into()),
            Some(_) if !p.overwrite => {
                return Err(ToolError::new(
                    ErrorCode::AlreadyExists,
                    format!("{dst_said} already exists; nothing was moved"),
                )
                .with_hint("choose another destination, or pass overwrite: true to replace a file there (it is backed up first)"));
            }
            Some(m) if m.is_file() && kind == EntryType::File => true,
            Some(_) if kind != EntryType::File => {
                return Err(ToolError::new(
                    ErrorCode::AlreadyExists,
                    format!("{dst_said} exists, and {src_said} is not a file: overwrite replaces a file with a file only"),
                )
                .with_hint("delete or move what is there first"));
            }
            Some(_) => {
                return Err(ToolError::new(
                    ErrorCode::AlreadyExists,
                    format!("{dst_said} exists and is not a file; overwrite replaces files only"),
                )
                .with_hint("delete or move what is there first"));
            }
        };
        let dry_run = p.dry_run || ctx.config().dry_run;
        let mut out = Output {
            source: src_shown.clone(),
            destination: dst_shown.clone(),
            kind,
            backed_up: false,
            created_dirs: Vec::new(),
            change_id: None,
            would_ask: None,
            dry_run,
        };
        // A directory as the walks below see it (what it holds: secrets, names on the
        // confirm list, names it would make denied), checked again once this move has
        // waited its turn (`moves_serial`) and just before the rename: something added
        // into it meanwhile (a patch of this agent's, another process's move) was moved
        // along unjudged (round 19: a `config` landed in `kube` during the wait, and the
        // move made `.kube/config`).
        let checked_stamp = if meta.is_dir() {
            Some(ws.state_stamp(&from, &|| ctx.check())?.unwrap_or_default())
        } else {
            None
        };
        // A link to a folder puts what that folder holds under its new name as surely as
        // moving the folder: `latest -> proj/notes` renamed `.kube` made `.kube/config`
        // (round 20). Its names are judged from the folder it leads to.
        let leads_to_dir = if meta.is_symlink() {
            ws.linked_dir(&src)
        } else {
            None
        };
        let holder = if meta.is_dir() {
            Some(&from)
        } else {
            leads_to_dir.as_ref()
        };
        // Nor is a link put at a name whose contents a deny rule guards: what the
        // person's tools write there later (kubectl's `~/.kube/config`) lands in the
        // folder it leads to, which the agent reads and writes under that folder's own
        // name, and what the agent writes there is the person's config (round 21: a
        // link to an empty folder moved as `.kube`). Whatever it leads to now: a link
        // leading nowhere, or to a file, leads to a folder once the agent makes one
        // there (round 22).
        if meta.is_symlink()
            && let Some(name) = to.real.rel().file_name()
            && ws.names_denied_folder(name)
        {
            return Err(ToolError::new(
                ErrorCode::DeniedPattern,
                format!(
                    "{src_said} is a link, and {dst_said} is a name whose contents ferret keeps private; nothing was moved"
                ),
            )
            .with_hint("a link is not put at such a name; choose another name"));
        }
        // What a link leads to, walked afresh from its name and stamped (checked again
        // after the wait, below): the folder and all it holds, a file, or nothing.
        let linked_stamp = if meta.is_symlink() {
            Some(ws.link_leads(&from.real, &|| ctx.check())?)
        } else {
            None
        };
        // The real names, and the destination as spelled (`.github` may be a link
        // elsewhere), as write_file and apply_patch ask.
        // The source as spelled too: moving `.github/workflows/ci.yml` away through a link
        // `.github -> docs` takes it from that name, as a delete would (round 21).
        // What a moved folder holds is named in the question (round 24: "moving d to e
        // (on the confirm list)" named neither the listed entry nor why).
        let held_listed = match holder {
            Some(h) => ws.move_holds_confirm_listed(h, &to.real, &|| ctx.check())?,
            None => None,
        };
        let confirm_listed = ws.needs_confirmation(&from.real, meta.is_dir())
            || ws.needs_confirmation(&src, meta.is_dir())
            || ws.needs_confirmation(&to.real, meta.is_dir())
            || ws.needs_confirmation(&dst, meta.is_dir())
            || ws.needs_confirmation(&to.real, holder.is_some())
            || held_listed.is_some();
        // A secret's name is not made by a move, of the entry or of what a moved
        // directory holds (`k/config` moved as `.kube`): refused as writing there is.
        // Nor is a secret given away: one the rules guard by its folder's name
        // (`.docker/config.json`) would be readable once the folder is renamed, so no
        // yes can let that through (round 24).
        if let Some(h) = holder {
            match ws.move_changes_denied(h, &to.real, !dry_run, &|| ctx.check())? {
                Some(crate::workspace::DenyChange::Makes(made)) => {
                    return Err(crate::workspace::denied_error(&ws.shown_name(&made)).with_hint(
                        "the moved folder would put a file at a name ferret keeps private; choose another destination",
                    ));
                }
                Some(crate::workspace::DenyChange::Unserved) => {
                    return Err(unserved_error(&src_said));
                }
                Some(crate::workspace::DenyChange::Exposes) => {
                    return Err(exposes_error(&src_said, &dst_said).with_hint(
                        "keep the folder where its secrets stay guarded (the same name in another folder), \
                         or ask the user to move it outside ferret",
                    ));
                }
                None => {}
            }
        }
        // Every reason to ask, in one question: a yes to the first alone used to let
        // the others through unread.
        let mut why = Vec::new();
        if confirm_listed {
            // A link says so, and where it leads (round 20: "moving l1 to .github" hid
            // that l1 leads to docs, whose files every later change then reached
            // unasked).
            let link = match &from.parent {
                Some(d) if meta.is_symlink() => d
                    .read_link_contents(from.name().unwrap_or_default())
                    .map(|t| {
                        // What it leads to now, if nothing: a folder made there later
                        // is what the name then shows (round 22).
                        let nothing = match ws.entry(&from.real, true) {
                            Ok(r) if r.meta.is_some() => "",
                            _ => " (nothing there now)",
                        };
                        format!(
                            ", a link to {}{nothing}",
                            crate::workspace::shown_in_prose(&t.to_string_lossy())
                        )
                    })
                    .unwrap_or_default(),
                _ => String::new(),
            };
            let holding = held_listed
                .as_ref()
                .map(|h| {
                    format!(
                        ", which holds {}",
                        crate::workspace::shown_in_prose(&ws.display(h))
                    )
                })
                .unwrap_or_default();
            why.push(format!(
                "moving {}{link} to {}{}{holding} (on the confirm list)",
                crate::workspace::shown_in_prose(&ws.display(&from.real)),
                crate::workspace::shown_in_prose(&ws.display(&to.real)),
                super::write_file::through(ws, &dst, &to.real)
            ));
        }
        if meta.is_dir()
            && let Some(holds) =
                super::holds_secrets(dry_run, || ws.holds_denied(&from, &|| ctx.check()))?
        {
            why.push(format!(
                "moving {}, {holds}",
                crate::workspace::shown_in_prose(&ws.display(&from.real))
            ));
        }
        // What the person is asked about is pinned: the file or tree as it stands now
        // (checked again just before the rename). Rewritten, or added to, while they
        // read the question, it is not what they approved moving.
        let mut pinned = None;
        let mut asked = Ok(());
        if !why.is_empty() {
            let stamp = match checked_stamp {
                Some(s) => s,
                None => ws.state_stamp(&from, &|| ctx.check())?.unwrap_or_default(),
            };
            ctx.pin(&ws.display(&from.real), stamp)?;
            // And where it lands (checked again at the rename: `checked` below).
            super::pin_place(ctx, &to.real)?;
            // And for a link, what the folder it leads to holds (round 21: a workflow
            // written there while the person read the question landed under the yes).
            // Even where it leads nowhere: a folder made or moved there meanwhile would
            // go along under the yes (round 22).
            if let Some(ls) = linked_stamp {
                ctx.pin(&format!("what {} leads to", ws.display(&from.real)), ls)?;
            }
            pinned = Some(stamp);
            asked = ctx.confirm(&why.join("; "), false);
        }
        if dry_run {
            out.would_ask = super::would_ask(asked)?;
            return Ok(out);
        }
        asked?;
        // A source the journal cannot name is refused before anything is made (the
        // destination's name is checked where its directories would be).
        crate::workspace::changeable_name(from.real.rel())?;
        let history = ctx.history()?;
        // Where the destination leads at the rename, by the walk that opens its
        // directory: one on the way may have been swapped for a link since the question
        // was settled (by another process, or by another of the agent's own calls).
        let unasked = ws.unasked(confirm_listed, &dst);
        let checked = to.real.clone();
        let settle = |real: &crate::workspace::WsPath| -> ToolResult<()> {
            unasked(real)?;
            // Every other check (links inside, holds, names) was made on `checked`.
            if *real != checked {
                return Err(ToolError::new(
                    ErrorCode::Conflict,
                    format!(
                        "{dst_said} now leads to {} (a directory on the way changed during the call); nothing was moved",
                        crate::workspace::shown_in_prose(&ws.display(real))
                    ),
                )
                .with_hint("call again"));
            }
            ws.check_new(real, meta.is_dir())?;
            if !confirm_listed
                && meta.is_dir()
                && ws
                    .move_holds_confirm_listed(&from, real, &|| ctx.check())?
                    .is_some()
            {
                return unasked_holds(ws, &dst, real);
            }
            Ok(())
        };
        let (to, created) = ws.make_parents(&dst, meta.is_dir(), &settle)?;
        // Removed again if the move is refused.
        let made = ws.made_dirs(to.parent.as_ref(), &created);
        out.created_dirs = created
            .iter()
            .map(|rel| ws.display(&ws.root_path(dst.root_index()).join(rel)))
            .collect();
        let (Some(from_dir), Some(from_name)) = (&from.parent, from.name()) else {
            return Err(ToolError::new(
                ErrorCode::NotFound,
                format!("{src_said} is gone"),
            ));
        };
        let (Some(to_dir), Some(to_name)) = (&to.parent, to.name()) else {
            return Err(ToolError::new(
                ErrorCode::NotFound,
                format!("no place to put {dst_said}"),
            ));
        };
        // A file moved, and a file replaced, are locked as an edit locks the file it
        // changes, until the rename: an edit (of any ferret process) in flight lands
        // first, and one that starts waits. Unlocked, an edit's rename landed after the
        // move and brought the file back at its old name, or replaced the file the move
        // brought in, which was then nowhere.
        // The files first, then the tree: every change takes its locks in that order
        // (an edit holds its file, then waits its turn in the tree until no move is
        // between its last look and its rename; round 22), and the two files in path
        // order. Taken the other way round, a move and an edit of one file each waited
        // for the other until their time ran out.
        let src_key = (from.real.root_index(), from.real.rel().to_path_buf());
        let dst_key = (to.real.root_index(), to.real.rel().to_path_buf());
        let mut source_lock = None;
        let mut replaced_lock = None;
        for source in if src_key <= dst_key {
            [true, false]
        } else {
            [false, true]
        } {
            if source && meta.is_file() {
                source_lock = Some(
                    ws.open_file_locked(&from.real, crate::workspace::LOCK_WAIT)?
                        .0,
                );
            } else if !source && replacing {
                replaced_lock = Some(ws.open_file_locked(&to.real, crate::workspace::LOCK_WAIT)?);
            }
        }
        let _source_lock = source_lock;
        // Moves (and deletes) of every ferret process on this tree one at a time from
        // here to their rename, and a moved directory's links walked again under that:
        // two parallel moves, one of a directory holding a link into a folder, the other
        // of that folder up a level, each passed its own walk and together planted a
        // link leading outside; and a link moved into a big directory by another process
        // during its walk was never judged at the directory's new place.
        let _serial = ws.moves_serial(
            &[from.real.root_index(), to.real.root_index()],
            crate::workspace::LOCK_WAIT,
            &|| ctx.check(),
        )?;
        let walked = if meta.is_dir() {
            links_stay_inside(ctx, &from, &src_said, &to.real, &dst_said)?
        } else {
            walked
        };
        crate::history::change::pause_here_in_tests();
        let linked_changed = match linked_stamp {
            Some(stamp) => ws.link_leads(&from.real, &|| ctx.check())? != stamp,
            None => false,
        };
        let changed = match pinned.or(checked_stamp) {
            Some(stamp) => ws.state_stamp(&from, &|| ctx.check())? != Some(stamp),
            None => false,
        };
        if linked_changed || changed {
            return Err(ToolError::new(
                ErrorCode::Conflict,
                format!("{src_said} changed while the move was being checked; nothing was moved"),
            )
            .with_hint("call again: the user is then asked about what it holds now"));
        }
        let st = rustix::fs::statat(from_dir, from_name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| ToolError::io(&src_said, &e.into()))?;
        // The directory moved is the one whose links were checked (the rename moves the
        // object recorded here, and fails if another took its name).
        if walked.is_some_and(|id| id != crate::platform::file_id(&st)) {
            return Err(ToolError::new(
                ErrorCode::Conflict,
                format!("{src_said} was replaced while it was being checked; nothing was moved"),
            )
            .with_hint("retry the move"));
        }
        let mut entry = Entry::new(
            Action::Move,
            ws.display(&from.real),
            from.real.root_index(),
            from.real.rel(),
        );
        entry.moved = Some(MoveRecord {
            to_path: ws.display(&to.real),
            to_root: to.real.root_index(),
            to_rel: to.real.rel().to_path_buf(),
            dev: crate::platform::file_id(&st).0,
            ino: crate::platform::file_id(&st).1,
        });
        entry.created_dirs = created;
        // The file replaced: locked, and what it held (with its share of the budget),
        // kept until the rename to check it still holds that.
        let mut replaced = None;
        if let Some((file, meta, _)) = replaced_lock {
            // The file about to be replaced, read through its own handle, locked until
            // it is replaced (another move onto it, or an edit of it, waits).
            let held = super::hold_file(
                ctx,
                meta.len(),
                crate::search::cost::copies::READ,
                &dst_shown,
            )?;
            let before = super::read_whole(&file, meta.len(), &dst_shown)?;
            let b = history.backup(to.real.root_index(), to.real.rel(), &before)?;
            out.backed_up = true;
            entry.backup_path = Some(b);
            entry.sha256_before = Some(sha256(&before));
            replaced = Some((file, before, held));
        }
        crate::history::change::pause_before_rename_in_tests();
        out.change_id = Some(history.move_entry(
            from_dir,
            from_name,
            to_dir,
            to_name,
            // A respelling renames over the entry's own other name: a plain rename (the
            // object arriving is checked to be the one recorded).
            replacing || respelled,
            entry,
            // With the journal locked, just before the rename: both folders still where
            // their paths lead (one moved under `.github/` meanwhile, or trashed, would
            // take the entry there under a receipt naming the old place).
            |_| {
                ws.still_holds(
                    from_dir,
                    from.real.root_index(),
                    from.real.rel(),
                    &src_shown,
                )?;
                ws.still_holds(to_dir, to.real.root_index(), to.real.rel(), &dst_shown)?;
                // The file replaced still holds what was backed up (a person's save
                // into it meanwhile would be replaced, kept nowhere).
                match &replaced {
                    Some((f, before, _)) => {
                        ws.still_the_file(to_dir, to_name, f, Some(before), &dst_shown)
                    }
                    None => Ok(()),
                }
            },
        )?);
        made.keep();
        Ok(out)
    }

    fn render(&self, o: &Output) -> String {
        let verb = if o.dry_run { "Would move" } else { "Moved" };
        let mut s = format!(
            "{verb} {} {} to {}",
            o.kind.as_str(),
            shown(&o.source),
            shown(&o.destination)
        );
        if o.backed_up {
            s.push_str(" (replacing a file, backed up)");
        }
        if !o.created_dirs.is_empty() {
            let dirs: Vec<_> = o.created_dirs.iter().map(|d| shown(d)).collect();
            s.push_str(&format!("; new directories: {}", dirs.join(", ")));
        }
        if let Some(id) = o.change_id {
            s.push_str(&format!("; change {id}, undo with undo"));
        }
        s.push('.');
        if o.would_ask.is_some() {
            s.push('\n');
            s.push_str(super::render_would_ask(o.would_ask.as_ref()).trim_end());
        }
        s
    }
}

/// Refuses a move of `from` to `to` that would make a symbolic link lead outside the
/// root, or to a name the deny rules match, that did not before: `from` itself if it is
/// a link, or every link at any depth inside it if it is a directory (walked through
/// handles, never following a link, within the call's deadline; a walk that cannot
/// finish refuses). Each link is judged by its words at its new place against its old
/// one. Returns the walked directory's identity, for the caller to check it is what
/// moves. Undo's move back is checked the same way.
pub(crate) fn links_stay_inside(
    ctx: &Ctx,
    from: &crate::workspace::Resolved,
    from_said: &str,
    to: &crate::workspace::WsPath,
    to_said: &str,
) -> ToolResult<Option<(u64, u64)>> {
    use std::path::Path;
    let ws = ctx.workspace();
    let Some(meta) = &from.meta else {
        return Ok(None);
    };
    let old_base = from.real.rel();
    let new_base = to.rel();
    let root = to.root_index();
    let judge = |here: &Path, target: &Path| -> ToolResult<()> {
        let (old, new) = if here.as_os_str().is_empty() {
            (old_base.to_path_buf(), new_base.to_path_buf())
        } else {
            (old_base.join(here), new_base.join(here))
        };
        let link_said = if here.as_os_str().is_empty() {
            from_said.to_string()
        } else {
            crate::workspace::shown_in_prose(&format!(
                "{}/{}",
                from_said.trim_end_matches('/'),
                here.to_string_lossy()
            ))
            .into_owned()
        };
        let target_said = crate::workspace::shown_in_prose(&target.to_string_lossy()).into_owned();
        let is_the_link = here.as_os_str().is_empty();
        // Where it leads before and after: by its words, then through the links on the
        // way there as they stand (a link passing through `y/` leads wherever `y` does).
        // A place inside the moved directory's new name is looked up at its old name
        // (the directory is not there yet).
        let was = lead(ws, from.real.root_index(), &old, target, None);
        let would = lead(ws, root, &new, target, Some((root, new_base, old_base)));
        // The moved entry itself, a link that would lead outside, is refused whatever
        // it did before: put at a name other links pass through (`a/y` for a link
        // `a/L -> y/data.txt`), it would make them lead outside too. A link inside a
        // moved directory is refused only if it did not lead there before (an absolute
        // link out of a virtualenv keeps its meaning wherever it moves).
        let escapes = match (&would, &was) {
            // Renamed within its folder, it leads where it leads now: followed through
            // the sandbox, which resolves each `..` where the kernel would.
            (Lead::Unknown, _) if old.parent() == new.parent() => {
                // Only when the sandbox can follow it to its last name: a `..` after a
                // name that does not exist yet (`nonexist/../../x`) is resolved by
                // nothing today, and leads outside once a folder of that name is made
                // (round 19). (Its last name may be missing: that changes nothing of
                // where it leads.)
                is_the_link
                    && (!climbs_through_folders(ws, from.real.root_index(), &old, target)
                        || ws
                            .entry(&ws.root_path(from.real.root_index()).join(&old), true)
                            .is_err_and(|e| {
                                matches!(
                                    e.code,
                                    ErrorCode::PathEscape
                                        | ErrorCode::PathTraversal
                                        | ErrorCode::DeniedPattern
                                )
                            }))
            }
            (Lead::Unknown, _) => true,
            (Lead::Outside, Lead::Outside) => is_the_link,
            (Lead::Outside, _) => true,
            _ => false,
        };
        if escapes {
            return Err(ToolError::new(
                ErrorCode::PathEscape,
                format!(
                    "{link_said} is a link to {target_said}, which from {to_said} would lead outside the workspace; nothing was moved"
                ),
            )
            .with_hint(if is_the_link {
                "ferret moves no link that leads outside the workspace (or that it cannot follow); make a new link with the target you mean, or ask the user to move it"
            } else {
                "move the directory to a place at the same depth, or first delete or move that link (or make it absolute)"
            }));
        }
        // Where it leads must not become a secret.
        let denied = matches!(would, Lead::Denied) && (is_the_link || !matches!(was, Lead::Denied));
        if denied {
            return Err(ToolError::new(
                ErrorCode::DeniedPattern,
                format!(
                    "{link_said} is a link to {target_said}, which from {to_said} would lead to a name ferret keeps private; nothing was moved"
                ),
            )
            .with_hint("first delete that link or make it lead elsewhere"));
        }
        Ok(())
    };
    if meta.is_symlink() {
        let (Some(dir), Some(name)) = (&from.parent, from.name()) else {
            return Ok(None);
        };
        let target = dir
            .read_link_contents(name)
            .map_err(|e| ToolError::io(from_said, &e))?;
        judge(Path::new(""), &target)?;
        return Ok(None);
    }
    if !meta.is_dir() {
        return Ok(None);
    }
    ws.for_each_link_below(from, &|| ctx.check(), &mut |here, target| {
        judge(here, target)
    })
}

/// Where a link leads, for a move's judgement.
enum Lead {
    /// Somewhere in the workspace that is not denied (or nowhere yet: dangling).
    Inside,
    /// Outside every root: by its words, or through a link on the way.
    Outside,
    /// To a name the deny rules match (through links on the way or not).
    Denied,
    /// Its words cannot tell (a `..` after a name climbs from wherever that name leads).
    Unknown,
}

/// Where a link at `link` (a real path in root `root`) with target `target` leads: by
/// its words to a place in some root (a place above its own root may lie in another
/// root: `--root ws --root ws/sub`), then through the links on the way as they stand.
/// `moving`: (root, new, old) of a directory about to move from `old` to `new`; a place
/// under `new` is looked up under `old`.
fn lead(
    ws: &crate::workspace::Workspace,
    root: usize,
    link: &std::path::Path,
    target: &std::path::Path,
    moving: Option<(usize, &std::path::Path, &std::path::Path)>,
) -> Lead {
    use std::path::{Component, PathBuf};
    let place = match leads_inside(link, target) {
        None => return Lead::Unknown,
        Some(true) => match lands_at(link, target) {
            Some(rel) => Some(ws.root_path(root).join(rel)),
            None => return Lead::Unknown,
        },
        // Above its root, or absolute: as an absolute path (the `..`s all come first,
        // and climb real directories from the link's real place).
        Some(false) => {
            let mut abs: PathBuf = if target.is_absolute() {
                PathBuf::from("/")
            } else {
                let mut base = ws.root_canonical(root).to_path_buf();
                if let Some(parent) = link.parent() {
                    base.push(parent);
                }
                base
            };
            for c in target.components() {
                match c {
                    Component::Normal(n) => abs.push(n),
                    Component::ParentDir => {
                        if !abs.pop() {
                            return Lead::Outside;
                        }
                    }
                    Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
                }
            }
            ws.locate(&abs)
        }
    };
    let Some(mut place) = place else {
        return Lead::Outside;
    };
    if let Some((r, new, old)) = moving
        && place.root_index() == r
        && let Ok(rest) = place.rel().strip_prefix(new)
    {
        place = ws.root_path(r).join(old.join(rest));
    }
    if ws.is_denied(&place, false) || ws.is_denied(&place, true) {
        return Lead::Denied;
    }
    match ws.entry(&place, true) {
        Err(e) if matches!(e.code, ErrorCode::PathEscape | ErrorCode::PathTraversal) => {
            Lead::Outside
        }
        Err(e) if e.code == ErrorCode::DeniedPattern => Lead::Denied,
        Ok(r) if ws.is_denied(&r.real, false) || ws.is_denied(&r.real, true) => Lead::Denied,
        _ => Lead::Inside,
    }
}

/// Whether every `..` in the target of a link at `link` (its real place in root
/// `root`) climbs out of a folder that exists now, followed through the sandbox, and
/// never above the root: then where it leads is settled by what stands today. A `..`
/// after a name that does not exist (`nonexist/../../x`) is resolved by nothing, and
/// leads wherever the folder made later at that name puts it (round 19: outside).
fn climbs_through_folders(
    ws: &crate::workspace::Workspace,
    root: usize,
    link: &std::path::Path,
    target: &std::path::Path,
) -> bool {
    use std::path::{Component, PathBuf};
    let mut at: PathBuf = link.parent().map(PathBuf::from).unwrap_or_default();
    for c in target.components() {
        match c {
            Component::Normal(n) => at.push(n),
            Component::CurDir => {}
            Component::ParentDir => {
                let Ok(r) = ws.entry(&ws.root_path(root).join(&at), true) else {
                    return false;
                };
                if !r.meta.is_some_and(|m| m.is_dir()) || r.real.root_index() != root {
                    return false;
                }
                match r.real.rel().parent() {
                    Some(p) => at = p.to_path_buf(),
                    None => return false,
                }
            }
            Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    true
}

/// Where a link at `link` with target `target` leads, relative to the root, by its
/// words, when they lead inside ([`leads_inside`] is `Some(true)`).
fn lands_at(link: &std::path::Path, target: &std::path::Path) -> Option<std::path::PathBuf> {
    use std::path::Component;
    if leads_inside(link, target) != Some(true) {
        return None;
    }
    let mut at: Vec<&std::ffi::OsStr> = link
        .parent()
        .map(|p| p.iter().collect())
        .unwrap_or_default();
    for c in target.components() {
        match c {
            Component::Normal(n) => at.push(n),
            Component::ParentDir => {
                at.pop()?;
            }
            _ => {}
        }
    }
    Some(at.iter().collect())
}

/// Whether a link at `link` (its real place, relative to its root) whose target is
/// `target` leads somewhere under the root, by its words: an absolute target never does;
/// a relative one as long as its `..`s never climb above the root. `None` when words
/// cannot tell: a `..` after a name climbs from wherever that name leads (a link).
fn leads_inside(link: &std::path::Path, target: &std::path::Path) -> Option<bool> {
    use std::path::Component;
    let mut depth = link.parent().map_or(0, |p| p.components().count());
    let mut named = false;
    for c in target.components() {
        match c {
            Component::Normal(_) => {
                depth += 1;
                named = true;
            }
            Component::CurDir => {}
            Component::ParentDir if named => return None,
            Component::ParentDir => match depth.checked_sub(1) {
                Some(d) => depth = d,
                None => return Some(false),
            },
            Component::RootDir | Component::Prefix(_) => return Some(false),
        }
    }
    Some(true)
}

/// The refusal of a directory move whose destination changed during the call so that it
/// would now put a confirm-listed name in place unasked.
fn unasked_holds(
    ws: &crate::workspace::Workspace,
    dst: &crate::workspace::WsPath,
    real: &crate::workspace::WsPath,
) -> ToolResult<()> {
    Err(ToolError::new(
        ErrorCode::Conflict,
        format!(
            "{} now leads to {}, where the directory would put a name on the confirm list (a directory on the way changed during the call); nothing was changed",
            ws.shown_name(dst),
            crate::workspace::shown_in_prose(&ws.display(real))
        ),
    )
    .with_hint("call again: the change will be asked about"))
}

/// The refusal of a folder move that would give away what the deny rules guard by the
/// folder's name (`.docker` moved as `dock`): `DENIED_PATTERN`, as reading the secret
/// is. The secret is not named; the folder was named by the caller.
pub(super) fn exposes_error(src_said: &str, dst_said: &str) -> ToolError {
    ToolError::new(
        ErrorCode::DeniedPattern,
        format!(
            "{src_said} holds secrets or VCS internals that the deny rules guard by where they stand; at {dst_said} they \
             would no longer be guarded (secrets and VCS internals are never accessible), so nothing was moved"
        ),
    )
}

/// The refusal of a folder move that would carry files `allowed_extensions` does not
/// serve to new names: no tool shows them, so none makes them either.
pub(super) fn unserved_error(src_said: &str) -> ToolError {
    ToolError::new(
        ErrorCode::ExtensionDenied,
        format!(
            "{src_said} holds files of extensions this server does not serve (allowed_extensions); ferret does not \
             move what it cannot show, so nothing was moved"
        ),
    )
    .with_hint("move the files it serves one by one, or ask the user to move the folder")
}

#[cfg(test)]
mod tests {
    use super::leads_inside;
    use std::path::Path;

    #[test]
    fn a_links_words_lead_inside_or_not() {
        let at = |l: &str, t: &str| leads_inside(Path::new(l), Path::new(t));
        assert_eq!(at("a/b/c/l", "../../../etc/passwd"), Some(true));
        assert_eq!(at("notes.txt", "../../../etc/passwd"), Some(false));
        assert_eq!(at("a/l", "/etc/passwd"), Some(false));
        assert_eq!(at("a/l", "./../b"), Some(true));
        // A `..` after a name climbs from where the name leads: words cannot tell.
        assert_eq!(at("l", "x/../y"), None);
        assert_eq!(at("sub/l", "inc/foo/../../x"), None);
    }
}

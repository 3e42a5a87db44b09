//! `file_delete`: delete a file or directory safely: to the trash, undoable.
//!
//! By default the entry goes to the user's trash (where a person's file manager shows it):
//! the freedesktop home trash on Linux, macOS's Trash (through a staging folder ferret
//! makes, see `history::trash`), the fake OS trash under `FERRET_PORTABLE=1`; where that
//! is unusable (another filesystem, inside the workspace, none, refused), to ferret's own
//! trash folder in the state directory. Either way it is moved by
//! `renameat` between directory handles (see `history::trash`), and undo restores it by
//! the journal's record. `permanent: true` removes it for good
//! and needs the user's confirmation. A root is never deleted; secrets never match, a
//! link to a secret is treated as the secret, and a directory holding denied entries, or
//! entries on the confirm list, is deleted only with the user's confirmation.

use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::history::trash::Kind;
use crate::tool::{Annotations, Ctx, Tool, ToolMeta};
use crate::workspace::EntryType;
use crate::workspace::shown;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    pub path: String,
    #[serde(default)]
    pub permanent: bool,
    #[serde(default)]
    pub dry_run: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    pub path: String,
    #[serde(rename = "type")]
    pub kind: EntryType,
    pub permanent: bool,
    /// `os` (the system trash) or `ferret` (ferret's trash folder); absent when permanent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trash: Option<String>,
    /// Which system trash, where it is reached through the OS (`macOS Trash`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trash_name: Option<String>,
    /// Something the delete wants said: the system trash refused the entry, so it is in
    /// ferret's trash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The undo journal's id for this change (absent on a dry run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change_id: Option<u64>,
    /// A dry run of a change that would ask the user first: the question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub would_ask: Option<String>,
    pub dry_run: bool,
}

pub struct FileDelete;

impl Tool for FileDelete {
    type Params = Params;
    type Output = Output;

    fn meta(&self) -> ToolMeta {
        ToolMeta {
            name: "file_delete",
            title: "Delete safely",
            description: "Delete a file or directory to the trash (undo restores it); permanent skips it, asking \
for confirmation. dry_run previews.",
            annotations: Annotations::WRITE,
            served_by_default: true,
        }
    }

    fn run(&self, ctx: &Ctx, p: Params) -> ToolResult<Output> {
        let ws = ctx.workspace();
        let wp = ctx.resolve(&p.path)?;
        let shown = ws.display(&wp);
        // In messages, a name ends where it visibly ends (quoted when odd or spaced).
        let said = crate::workspace::shown_in_prose(&shown).into_owned();
        ctx.set_audit_path(shown.clone());
        if wp.is_root() {
            return Err(ToolError::invalid(format!(
                "{said} is a workspace root; a root is never deleted"
            )));
        }
        // The entry itself, not what a symlink points to: deleting a link deletes the
        // link. Its directory is a handle opened beneath the root: the move to the trash
        // happens there, whatever the path names now.
        let at = ws.entry(&wp, false)?;
        ws.check_keeps(&at.real, "deleted")?;
        if ws.holds_root(&at.real) {
            return Err(ToolError::invalid(format!(
                "{said} holds another workspace root; a root is never deleted"
            ))
            .with_hint("delete the entries inside it instead"));
        }
        let meta = at.meta.as_ref().ok_or_else(|| {
            ToolError::io(&said, &std::io::Error::from(std::io::ErrorKind::NotFound))
        })?;
        let kind = EntryType::of(&meta.file_type());
        let is_dir = kind == EntryType::Directory;
        // The object named now, before any question (see below).
        let named = match (&at.parent, at.name()) {
            (Some(d), Some(n)) => rustix::fs::statat(d, n, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
                .ok()
                .map(|st| crate::platform::file_id(&st)),
            _ => None,
        };
        if kind == EntryType::Symlink
            && let Err(e) = ws.entry(&wp, true)
            && e.code == ErrorCode::DeniedPattern
        {
            // A link to a secret is treated as the secret: not listed, not touched.
            return Err(e);
        }
        let dry_run = p.dry_run || ctx.config().dry_run;
        let mut out = Output {
            path: shown.clone(),
            kind,
            permanent: p.permanent,
            trash: None,
            trash_name: None,
            note: None,
            change_id: None,
            would_ask: None,
            dry_run,
        };
        // Names in a question the person answers are quoted when odd, as in every
        // answer: a file's name must not read as ferret's own words.
        // The real name: a question asks about what changes, not a spelling through a link.
        let real_shown = ws.display(&at.real);
        let q = crate::workspace::shown_in_prose(&real_shown);
        // Every reason to ask, in one question (a yes to the first alone used to let the
        // others through unread); a dry run asks no one, and says what it would ask.
        // A directory as the walks below see it, checked again once this delete has
        // waited its turn and just before it goes, asked about or not: an entry added
        // into it meanwhile (a patch of the agent's own, another process's move) went
        // along unjudged and unasked (round 19).
        let checked_stamp = if is_dir {
            Some(ws.state_stamp(&at, &|| ctx.check())?.unwrap_or_default())
        } else {
            None
        };
        let pinned = std::cell::Cell::new(checked_stamp);
        let asked = (|| {
            let mut why = Vec::new();
            // The real entry, or the name as spelled (through a link `.github -> docs`).
            if ws.needs_confirmation(&at.real, is_dir) || ws.needs_confirmation(&wp, is_dir) {
                why.push(format!(
                    "deleting {q} (on the confirm list){}",
                    super::write_file::through(ws, &wp, &at.real)
                ));
            }
            // A directory takes what it holds along: an entry on the confirm list inside
            // asks as deleting it alone would.
            if is_dir && let Some(held) = ws.holds_confirm_listed(&at, &|| ctx.check())? {
                why.push(format!(
                    "deleting {q}, which holds {} (on the confirm list)",
                    crate::workspace::shown_in_prose(&ws.display(&held))
                ));
            }
            if is_dir
                && let Some(holds) =
                    super::holds_secrets(dry_run, || ws.holds_denied(&at, &|| ctx.check()))?
            {
                why.push(format!(
                    "deleting {q}, {holds} (entries matching the deny patterns, which ferret never touches one by one)"
                ));
            }
            let permanent = p.permanent && !ctx.config().allow_permanent_delete;
            if permanent {
                why.push(format!("permanently deleting {q}"));
            }
            if why.is_empty() {
                return Ok(());
            }
            // What is asked about is pinned: the file or tree as it stands now. Changed
            // while the person reads the question, it is not what they approved deleting.
            let stamp = match checked_stamp {
                Some(s) => s,
                None => ws.state_stamp(&at, &|| ctx.check())?.unwrap_or_default(),
            };
            ctx.pin(&real_shown, stamp)?;
            pinned.set(Some(stamp));
            let what = why.join("; ");
            if permanent {
                ctx.confirm_permanent(&what)
            } else {
                ctx.confirm(&what, false)
            }
        })();
        if dry_run {
            out.would_ask = super::would_ask(asked)?;
            return Ok(out);
        }
        asked?;
        let history = ctx.history()?;
        // A file is locked as an edit locks it, until it is gone: an edit in flight lands
        // first (its rename would otherwise bring the file back at its name once it was
        // trashed), and one that starts waits, then finds it gone.
        // (A link, a directory, a FIFO: nothing edits them.)
        // The file first, then the tree, as every change takes them (see move).
        let _lock = if kind == EntryType::File {
            Some(
                ws.open_file_locked(&at.real, crate::workspace::LOCK_WAIT)?
                    .0,
            )
        } else {
            None
        };
        // One at a time with every ferret process's moves (see workspace::serial).
        let _serial = ws.moves_serial(
            &[at.real.root_index()],
            crate::workspace::LOCK_WAIT,
            &|| ctx.check(),
        )?;
        let (Some(dir), Some(name)) = (&at.parent, at.name()) else {
            return Err(ToolError::io(
                &said,
                &std::io::Error::from(std::io::ErrorKind::NotFound),
            ));
        };
        // What stands at the name now is what was named when the question was asked:
        // while a person answered, a parallel call could move something else there (a
        // file nobody asked about, then deleted for good).
        // (For good only: a delete to the trash can be undone, and a ferret edit that
        // lands first, while this call waits for the file's lock, makes a new inode of
        // the same file, which that delete then rightly takes.)
        crate::history::change::pause_here_in_tests();
        match rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW) {
            _ if !p.permanent => {}
            Ok(st) if Some(crate::platform::file_id(&st)) == named => {}
            _ => {
                return Err(ToolError::new(
                    ErrorCode::Conflict,
                    format!("{said} was replaced while the call ran (or the question waited); nothing was deleted"),
                )
                .with_hint("look at what is there now, then delete it again if it is still meant"));
            }
        }
        // Still what was checked (and what the person approved), looked at again with
        // moves held: a file an agent's parallel call moved into the folder after the
        // last look would be gone for good, or trashed unasked.
        if let Some(stamp) = pinned.get()
            && (p.permanent || is_dir)
            && ws.state_stamp(&at, &|| ctx.check())? != Some(stamp)
        {
            return Err(ToolError::new(
                ErrorCode::Conflict,
                format!("{said} changed while the call ran (or the question waited); nothing was deleted"),
            )
            .with_hint("look at what is there now, then delete it again if it is still meant"));
        }
        if p.permanent {
            ws.still_holds(dir, at.real.root_index(), at.real.rel(), &shown)?;
            out.change_id = Some(history.remove(dir, name, &at.real, &shown, is_dir)?);
        } else {
            let done = history.trash(dir, name, &at.real, ws, ctx.config().use_os_trash)?;
            out.change_id = Some(done.id);
            out.trash = Some(
                match done.kind {
                    Kind::Home | Kind::Os => "os",
                    Kind::Ferret => "ferret",
                }
                .to_string(),
            );
            out.trash_name = done.os_name.map(str::to_string);
            out.note = done.note;
        }
        Ok(out)
    }

    fn render(&self, o: &Output) -> String {
        match (o.dry_run, o.permanent) {
            (true, _) => format!(
                "Would delete: {}{}{}",
                shown(&o.path),
                if o.permanent { " (permanently)" } else { "" },
                match &o.would_ask {
                    Some(_) => format!(
                        "\n{}",
                        super::render_would_ask(o.would_ask.as_ref()).trim_end()
                    ),
                    None => String::new(),
                }
            ),
            (false, true) => format!(
                "Deleted {} permanently (change {}).",
                shown(&o.path),
                o.change_id.unwrap_or_default()
            ),
            (false, false) => format!(
                "Moved {} to {} (change {}; undo brings it back).{}",
                shown(&o.path),
                match (o.trash.as_deref(), &o.trash_name) {
                    (Some("os"), Some(n)) => format!("the system trash ({n})"),
                    (Some("os"), None) => "the system trash".to_string(),
                    _ => "the ferret trash".to_string(),
                },
                o.change_id.unwrap_or_default(),
                match &o.note {
                    Some(n) => format!("\nNote: {n}."),
                    None => String::new(),
                }
            ),
        }
    }
}

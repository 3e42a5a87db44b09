//! `undo`: revert a change from the journal (by default the last one not yet undone).
//!
//! An edit is undone only if the file still holds what the edit wrote; otherwise the
//! answer is `CONFLICT` with a diff, and `force` first backs up the current content, so
//! nothing is ever lost. The undo is itself journalled. The journal stays locked for the
//! whole operation, so two undos can never restore the same change twice.

use crate::context::Ctx;
use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::history::{Entry, sha256};
use crate::registry::{Annotations, Tool, ToolMeta};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::io::Read;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// The change to undo (its change_id); default: the last change that can still be
    /// undone (permanent deletes cannot).
    #[serde(default)]
    #[schemars(with = "u64")]
    pub id: Option<u64>,
    /// Undo even if the file changed since: its current content is backed up first.
    #[serde(default)]
    pub force: bool,
    /// Show what would be restored without writing.
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
    /// Where the content replaced by a forced undo was saved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backup: Option<String>,
    /// The journal id of this undo (absent on a dry run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change_id: Option<u64>,
    pub dry_run: bool,
}

pub struct Undo;

/// The journal entry recording the undo of `target`.
fn undo_entry(
    target: &Entry,
    backup_path: Option<std::path::PathBuf>,
    sha256_before: Option<String>,
    sha256_after: Option<String>,
) -> Entry {
    Entry {
        id: 0,
        action: "undo".into(),
        path: target.path.clone(),
        root: target.root,
        rel: target.rel.clone(),
        backup_path,
        trash_location: None,
        trash: None,
        timestamp: crate::audit::now_rfc3339(),
        sha256_before,
        sha256_after,
        undoes: Some(target.id),
    }
}

/// Brings a deleted entry back from the trash, refusing to overwrite what stands there now.
fn undo_delete(
    ctx: &Ctx,
    target: &Entry,
    entries: &[Entry],
    dry_run: bool,
) -> ToolResult<(Option<Entry>, Output)> {
    let ws = ctx.workspace();
    let wp = ws.root_path(target.root).join(&target.rel);
    if ws.lstat(&wp).ok().flatten().is_some() {
        return Err(ToolError::new(
            ErrorCode::Conflict,
            format!(
                "something now stands at {}; the deleted entry was not restored over it",
                target.path
            ),
        )
        .with_hint("move or delete what is there first, then undo again"));
    }
    let location = target.trash_location.as_ref().ok_or_else(|| {
        ToolError::new(
            ErrorCode::IoError,
            format!("change {} has no trash location", target.id),
        )
    })?;
    let mut out = Output {
        undone: target.id,
        action: target.action.clone(),
        path: target.path.clone(),
        diff: String::new(),
        backup: None,
        change_id: None,
        dry_run,
    };
    if dry_run {
        return Ok((None, out));
    }
    match target.trash.as_deref() {
        Some("os") => crate::tools::file_delete::restore_os(location, &target.path)?,
        _ => {
            let (dir, name) = ws.parent_of(&wp).map_err(|_| {
                ToolError::new(
                    ErrorCode::Conflict,
                    format!("the directory that held {} is gone", target.path),
                )
            })?;
            let (Some(trash_dir), Some(trash_name)) = (location.parent(), location.file_name())
            else {
                return Err(ToolError::new(
                    ErrorCode::IoError,
                    "bad trash location in the journal",
                ));
            };
            let src = cap_std::fs::Dir::open_ambient_dir(trash_dir, cap_std::ambient_authority())
                .map_err(|e| ToolError::io(&target.path, &e))?;
            src.rename(trash_name, &dir, name).map_err(|e| {
                ToolError::new(
                    ErrorCode::IoError,
                    format!("cannot restore {} from ferret's trash: {e}", target.path),
                )
            })?;
        }
    }
    out.change_id = Some(entries.last().map_or(1, |l| l.id + 1));
    let entry = undo_entry(target, None, None, None);
    Ok((Some(entry), out))
}

impl Tool for Undo {
    type Params = Params;
    type Output = Output;

    fn meta(&self) -> ToolMeta {
        ToolMeta {
            name: "undo",
            title: "Undo a change",
            description: "Undo the last change made through ferret (or the change with the given id). Refuses with \
CONFLICT if the file was changed since, showing the difference; force: true undoes anyway after backing up the \
current content.",
            annotations: Annotations::WRITE,
        }
    }

    fn run(&self, ctx: &Ctx, p: Params) -> ToolResult<Output> {
        let history = ctx.history()?;
        let ws = ctx.workspace();
        let dry_run = p.dry_run || ctx.config().dry_run;
        history.with_journal(|entries| {
            let undone: Vec<u64> = entries.iter().filter_map(|e| e.undoes).collect();
            let target = match p.id {
                Some(id) => entries
                    .iter()
                    .find(|e| e.id == id && e.action != "undo")
                    .ok_or_else(|| {
                        ToolError::new(
                            ErrorCode::NotFound,
                            format!("no change with id {id} in the journal"),
                        )
                        .with_hint("list the changes with `ferret history`")
                    })?,
                None => entries
                    .iter()
                    .rev()
                    .find(|e| {
                        !matches!(e.action.as_str(), "undo" | "delete_permanent")
                            && !undone.contains(&e.id)
                    })
                    .ok_or_else(|| {
                        ToolError::new(ErrorCode::NotFound, "there is no change to undo")
                    })?,
            };
            if undone.contains(&target.id) {
                return Err(ToolError::new(
                    ErrorCode::Conflict,
                    format!("change {} was already undone", target.id),
                ));
            }
            ctx.set_audit_path(target.path.clone());
            match target.action.as_str() {
                "edit" => {}
                "delete" => return undo_delete(ctx, target, entries, dry_run),
                "delete_permanent" => {
                    return Err(ToolError::new(
                        ErrorCode::Conflict,
                        format!(
                            "change {} deleted {} permanently; it cannot be undone",
                            target.id, target.path
                        ),
                    ));
                }
                other => {
                    return Err(ToolError::invalid(format!(
                        "change {} is a {other}, which cannot be undone",
                        target.id
                    )));
                }
            }
            let backup_path = target.backup_path.as_ref().ok_or_else(|| {
                ToolError::new(
                    ErrorCode::IoError,
                    format!("change {} has no backup", target.id),
                )
            })?;
            let restored = std::fs::read(backup_path).map_err(|e| {
                ToolError::new(
                    ErrorCode::IoError,
                    format!("cannot read the backup {}: {e}", backup_path.display()),
                )
            })?;
            let wp = ws.root_path(target.root).join(&target.rel);
            let (current, perms) = match ws.stat(&wp)? {
                Some((_, m)) if m.is_file() => {
                    let (file, meta, _) = ws.open_file(&wp)?;
                    let mut buf = Vec::new();
                    (&file)
                        .read_to_end(&mut buf)
                        .map_err(|e| ToolError::io(&target.path, &e))?;
                    (Some(buf), Some(meta.permissions()))
                }
                Some(_) => {
                    return Err(ToolError::new(
                        ErrorCode::Conflict,
                        format!("{} is no longer a file", target.path),
                    ));
                }
                None => (None, None),
            };
            let current_text = current
                .as_deref()
                .map(String::from_utf8_lossy)
                .unwrap_or_default();
            let diff = similar::TextDiff::from_lines(
                current_text.as_ref(),
                String::from_utf8_lossy(&restored).as_ref(),
            )
            .unified_diff()
            .context_radius(3)
            .header(
                &format!("a/{} (now)", target.path),
                &format!("b/{} (restored)", target.path),
            )
            .to_string();
            let unchanged = current.as_deref().map(sha256) == target.sha256_after;
            if !unchanged && !p.force {
                let what = if current.is_none() {
                    "was deleted"
                } else {
                    "was changed"
                };
                return Err(ToolError::new(
                    ErrorCode::Conflict,
                    format!(
                        "{} {what} after change {}; undoing would lose that:\n{diff}",
                        target.path, target.id
                    ),
                )
                .with_hint(
                    "pass force: true to undo anyway; the current content is backed up first",
                ));
            }
            let mut out = Output {
                undone: target.id,
                action: target.action.clone(),
                path: target.path.clone(),
                diff,
                backup: None,
                change_id: None,
                dry_run,
            };
            if dry_run {
                return Ok((None, out));
            }
            if !unchanged && let Some(cur) = &current {
                out.backup = Some(
                    history
                        .backup(target.root, &target.rel, cur)?
                        .display()
                        .to_string(),
                );
            }
            ws.replace_file(&wp, &restored, perms)?;
            out.change_id = Some(entries.last().map_or(1, |l| l.id + 1));
            let entry = undo_entry(
                target,
                out.backup.as_ref().map(Into::into),
                current.as_deref().map(sha256),
                Some(sha256(&restored)),
            );
            Ok((Some(entry), out))
        })
    }

    fn render(&self, o: &Output) -> String {
        if o.dry_run {
            return format!(
                "Would undo change {} ({} of {}):\n{}",
                o.undone, o.action, o.path, o.diff
            );
        }
        let mut s = if o.action == "delete" {
            format!(
                "Undid change {}: {} is back from the trash.\n",
                o.undone, o.path
            )
        } else {
            format!("Undid change {} ({} of {}).\n", o.undone, o.action, o.path)
        };
        if let Some(b) = &o.backup {
            s.push_str(&format!("The content it replaced is saved at {b}.\n"));
        }
        s.push_str(&o.diff);
        s
    }
}

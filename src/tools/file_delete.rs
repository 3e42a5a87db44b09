//! `file_delete`: delete a file or directory safely: to the trash, undoable.
//!
//! By default the entry goes to the operating system's trash (freedesktop on Linux,
//! the Finder's on macOS, the recycle bin on Windows, through the `trash` crate); where
//! that is unusable, to ferret's own trash folder in the state directory, moved there by
//! `renameat` between sandboxed directory handles. `permanent: true` removes it for good
//! and needs the user's confirmation. A root is never deleted; secrets never match.

use crate::context::Ctx;
use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::history::{Entry, History};
use crate::registry::{Annotations, Tool, ToolMeta};
use crate::workspace::EntryType;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// File or directory to delete, relative to the workspace root.
    pub path: String,
    /// Remove it for good instead of moving it to the trash (needs the user's confirmation).
    #[serde(default)]
    pub permanent: bool,
    /// Say what would be deleted without deleting.
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
    /// The undo journal's id for this change (absent on a dry run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change_id: Option<u64>,
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
            description: "Delete a file or a directory (whole) by moving it to the trash; undo brings it back. \
permanent: true deletes for good and needs the user's confirmation. dry_run shows what would be deleted.",
            annotations: Annotations::WRITE,
        }
    }

    fn run(&self, ctx: &Ctx, p: Params) -> ToolResult<Output> {
        let ws = ctx.workspace();
        let wp = ctx.resolve(&p.path)?;
        let shown = ws.display(&wp);
        ctx.set_audit_path(shown.clone());
        // The entry itself, not what a symlink points to: deleting a link deletes the link.
        let meta = ws.lstat(&wp)?.ok_or_else(|| {
            ToolError::io(&shown, &std::io::Error::from(std::io::ErrorKind::NotFound))
        })?;
        if wp.is_root() {
            return Err(ToolError::invalid(format!(
                "{shown} is a workspace root; a root is never deleted"
            )));
        }
        let kind = EntryType::of(&meta.file_type());
        let is_dir = kind == EntryType::Directory;
        if ws.needs_confirmation(&wp, is_dir) {
            ctx.confirm(&format!("deleting {shown} (on the confirm list)"), false)?;
        }
        if p.permanent {
            ctx.confirm(
                &format!("permanently deleting {shown}"),
                ctx.config().allow_permanent_delete,
            )?;
        }
        let dry_run = p.dry_run || ctx.config().dry_run;
        let mut out = Output {
            path: shown.clone(),
            kind,
            permanent: p.permanent,
            trash: None,
            change_id: None,
            dry_run,
        };
        if dry_run {
            return Ok(out);
        }
        let history = ctx.history()?;
        let (dir, name) = ws.parent_of(&wp)?;
        let io = |e: std::io::Error| ToolError::io(&shown, &e);
        let (action, trash, location) = if p.permanent {
            if is_dir {
                dir.remove_dir_all(name)
            } else {
                dir.remove_file(name)
            }
            .map_err(io)?;
            ("delete_permanent", None, None)
        } else {
            let abs = ws.walk_start(&wp);
            match ctx.config().use_os_trash.then(|| os_trash(&abs)).flatten() {
                Some(id) => ("delete", Some("os"), Some(id)),
                None => {
                    let trash_dir = history.trash_dir()?;
                    let dest_name = History::trash_name(&name.to_string_lossy());
                    let dest = cap_std::fs::Dir::open_ambient_dir(
                        &trash_dir,
                        cap_std::ambient_authority(),
                    )
                    .map_err(io)?;
                    dir.rename(name, &dest, &dest_name).map_err(|e| {
                        ToolError::new(
                            ErrorCode::IoError,
                            format!("cannot move {shown} to ferret's trash ({e}); the OS trash was unusable too"),
                        )
                        .with_hint("put the state directory (--state-dir) on the same filesystem as the workspace")
                    })?;
                    ("delete", Some("ferret"), Some(trash_dir.join(dest_name)))
                }
            }
        };
        out.trash = trash.map(String::from);
        out.change_id = Some(history.append(Entry {
            id: 0,
            action: action.into(),
            path: shown,
            root: wp.root_index(),
            rel: wp.rel().to_path_buf(),
            backup_path: None,
            trash_location: location,
            trash: trash.map(String::from),
            timestamp: crate::audit::now_rfc3339(),
            sha256_before: None,
            sha256_after: None,
            undoes: None,
        })?);
        Ok(out)
    }

    fn render(&self, o: &Output) -> String {
        match (o.dry_run, o.permanent) {
            (true, _) => format!(
                "Would delete: {}{}",
                o.path,
                if o.permanent { " (permanently)" } else { "" }
            ),
            (false, true) => format!(
                "Deleted {} permanently (change {}).",
                o.path,
                o.change_id.unwrap_or_default()
            ),
            (false, false) => format!(
                "Moved {} to the {} trash (change {}; undo brings it back).",
                o.path,
                if o.trash.as_deref() == Some("os") {
                    "system"
                } else {
                    "ferret"
                },
                o.change_id.unwrap_or_default()
            ),
        }
    }
}

use os::os_trash;
pub use os::restore_os;

/// The OS trash, where it can be listed and restored from: freedesktop (Linux, the BSDs)
/// and Windows. macOS's trash takes files but cannot give them back, so there ferret uses
/// its own trash, which undo can restore.
#[cfg(any(
    target_os = "windows",
    all(
        unix,
        not(target_os = "macos"),
        not(target_os = "ios"),
        not(target_os = "android")
    )
))]
mod os {
    use crate::error::{ErrorCode, ToolError, ToolResult};
    use std::path::{Path, PathBuf};

    /// Moves `abs` to the OS trash and returns the trash item's id, or `None` when there
    /// is no usable OS trash (the caller falls back to ferret's).
    pub fn os_trash(abs: &Path) -> Option<PathBuf> {
        let parent = abs.parent()?.to_path_buf();
        let name = abs.file_name()?.to_os_string();
        if let Err(e) = trash::delete(abs) {
            tracing::info!(error = %e, "the OS trash is unusable; using ferret's");
            return None;
        }
        // Find the item just trashed, to restore exactly it on undo.
        let items = trash::os_limited::list().ok()?;
        items
            .into_iter()
            .filter(|i| i.original_parent == parent && i.name == name)
            .max_by_key(|i| i.time_deleted)
            .map(|i| PathBuf::from(i.id))
            .or_else(|| Some(PathBuf::new()))
    }

    /// Restores an item from the OS trash by id, never over something that stands there.
    pub fn restore_os(id: &Path, shown: &str) -> ToolResult<()> {
        let items = trash::os_limited::list().map_err(|e| {
            ToolError::new(ErrorCode::IoError, format!("cannot list the trash: {e}"))
        })?;
        let item = items
            .into_iter()
            .find(|i| Path::new(&i.id) == id)
            .ok_or_else(|| {
                ToolError::new(
                    ErrorCode::Conflict,
                    format!("{shown} is no longer in the trash (emptied or restored)"),
                )
            })?;
        trash::os_limited::restore_all([item]).map_err(|e| match e {
            trash::Error::RestoreCollision { .. } => ToolError::new(
                ErrorCode::Conflict,
                format!("something now stands at {shown}; it was not overwritten"),
            ),
            e => ToolError::new(
                ErrorCode::IoError,
                format!("cannot restore {shown} from the trash: {e}"),
            ),
        })
    }
}

#[cfg(not(any(
    target_os = "windows",
    all(
        unix,
        not(target_os = "macos"),
        not(target_os = "ios"),
        not(target_os = "android")
    )
)))]
mod os {
    use crate::error::{ErrorCode, ToolError, ToolResult};
    use std::path::{Path, PathBuf};

    pub fn os_trash(_abs: &Path) -> Option<PathBuf> {
        None
    }

    pub fn restore_os(_id: &Path, shown: &str) -> ToolResult<()> {
        Err(ToolError::new(
            ErrorCode::IoError,
            format!("{shown}: this system's trash cannot be restored from"),
        ))
    }
}

//! `get_file_info`: metadata without the content.

use crate::error::{ToolError, ToolResult};
use crate::tool::{Annotations, Ctx, Tool, ToolMeta};
use crate::tools::human_size;
use crate::workspace::EntryType;
use crate::workspace::shown;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    pub path: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    pub path: String,
    /// Size in bytes; 0 for a directory.
    pub size: u64,
    /// Last modification, RFC 3339.
    pub modified: String,
    /// Creation time, RFC 3339; absent where the filesystem does not record it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
    /// Last access, RFC 3339; absent where the filesystem does not record it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accessed: Option<String>,
    /// What it is; symlinks are followed (see `symlink`).
    #[serde(rename = "type")]
    pub kind: EntryType,
    /// Unix permission bits in octal, like "0644".
    pub permissions: String,
    pub readonly: bool,
    /// Whether the path itself is a symbolic link (to `target`).
    pub symlink: bool,
    /// Where the symbolic link leads, relative to the workspace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

pub struct GetFileInfo;

impl Tool for GetFileInfo {
    type Params = Params;
    type Output = Output;

    fn meta(&self) -> ToolMeta {
        ToolMeta {
            name: "get_file_info",
            title: "File metadata",
            description: "Size, type, times, permissions and symlink target, without reading.",
            annotations: Annotations::READ_ONLY,
            served_by_default: true,
        }
    }

    fn run(&self, ctx: &Ctx, p: Params) -> ToolResult<Output> {
        let ws = ctx.workspace();
        let wp = ctx.resolve(&p.path)?;
        let shown = ws.display(&wp);
        ctx.set_audit_path(shown.clone());
        let (real, meta) = ws.stat(&wp)?.ok_or_else(|| {
            ToolError::io(
                &ws.shown_name(&wp),
                &std::io::Error::from(std::io::ErrorKind::NotFound),
            )
        })?;
        let symlink = real != wp;
        let time = |t: std::io::Result<cap_std::time::SystemTime>| {
            t.ok()
                .map(|t| humantime::format_rfc3339_seconds(t.into_std()).to_string())
        };
        let kind = EntryType::of(&meta.file_type());
        Ok(Output {
            // A directory's own size is the filesystem's bookkeeping of its entries (on
            // tmpfs 20 bytes each, on btrfs the names' lengths): it would count the
            // denied entries its listing hides (round 28). As `list_directory`, no size.
            size: if kind == EntryType::Directory {
                0
            } else {
                meta.len()
            },
            modified: time(meta.modified()).unwrap_or_default(),
            created: time(meta.created()),
            accessed: time(meta.accessed()),
            kind,
            permissions: permissions(&meta),
            readonly: meta.permissions().readonly(),
            symlink,
            target: symlink.then(|| ws.display(&real)),
            path: shown,
        })
    }

    fn render(&self, o: &Output) -> String {
        let size = if o.kind == EntryType::Directory {
            String::new()
        } else {
            format!("  size: {} ({} bytes)\n", human_size(o.size), o.size)
        };
        let mut s = format!(
            "{}\n  type: {}\n{size}  modified: {}\n",
            shown(&o.path),
            o.kind.as_str(),
            o.modified
        );
        if let Some(c) = &o.created {
            s.push_str(&format!("  created: {c}\n"));
        }
        if let Some(a) = &o.accessed {
            s.push_str(&format!("  accessed: {a}\n"));
        }
        s.push_str(&format!(
            "  permissions: {}{}\n",
            o.permissions,
            if o.readonly { " (read-only)" } else { "" }
        ));
        if let Some(t) = &o.target {
            s.push_str(&format!("  symlink to: {}\n", shown(t)));
        }
        s
    }
}

#[cfg(unix)]
fn permissions(meta: &cap_std::fs::Metadata) -> String {
    use cap_std::fs::PermissionsExt;
    format!("{:04o}", meta.permissions().mode() & 0o7777)
}

#[cfg(not(unix))]
fn permissions(meta: &cap_std::fs::Metadata) -> String {
    if meta.permissions().readonly() {
        "0444"
    } else {
        "0644"
    }
    .to_string()
}

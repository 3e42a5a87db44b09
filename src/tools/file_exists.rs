//! `file_exists`: whether something stands at a path, and what.
//!
//! A denied path answers `DENIED_PATTERN` whether or not it exists, so the tool is no
//! oracle for which secrets a workspace holds.

use crate::error::ToolResult;
use crate::tool::{Annotations, Ctx, Tool, ToolMeta};
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
    pub exists: bool,
    /// What it is (symlinks are followed); absent when it does not exist.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<EntryType>,
}

pub struct FileExists;

impl Tool for FileExists {
    type Params = Params;
    type Output = Output;

    fn meta(&self) -> ToolMeta {
        ToolMeta {
            name: "file_exists",
            title: "Check a path exists",
            description: "Whether a path exists, as a file or a directory. Cheaper than reading or listing.",
            annotations: Annotations::READ_ONLY,
            served_by_default: true,
        }
    }

    fn run(&self, ctx: &Ctx, p: Params) -> ToolResult<Output> {
        let ws = ctx.workspace();
        let wp = ctx.resolve(&p.path)?;
        let shown = ws.display(&wp);
        ctx.set_audit_path(shown.clone());
        // A name longer than any filesystem allows does not exist: said so, not an I/O
        // error.
        let too_long = wp
            .rel()
            .iter()
            .any(|c| c.len() > crate::workspace::NAME_MAX);
        let found = if too_long { None } else { ws.stat(&wp)? };
        Ok(Output {
            path: shown,
            exists: found.is_some(),
            kind: found.map(|(_, m)| EntryType::of(&m.file_type())),
        })
    }

    fn render(&self, o: &Output) -> String {
        match o.kind {
            Some(EntryType::Directory) => format!("{} exists (directory)", shown(&o.path)),
            Some(EntryType::File) => format!("{} exists (file)", shown(&o.path)),
            Some(_) => format!("{} exists (special file)", shown(&o.path)),
            None => format!("{} does not exist", shown(&o.path)),
        }
    }
}

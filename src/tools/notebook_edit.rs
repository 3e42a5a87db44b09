//! `notebook_edit`: replace, insert or delete one cell of a Jupyter notebook, keeping
//! every other byte of the file (see [`super::notebook`]), through the same locked read,
//! version check, confirm list, backup, journal and atomic write as `edit`; `undo`
//! reverts it.

use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::search::cost;
use crate::tool::{Annotations, Ctx, Tool, ToolMeta};
use crate::tools::human_size;
use crate::tools::notebook::{self, Change, Mode};
use crate::workspace::shown;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EditMode {
    #[default]
    Replace,
    Insert,
    Delete,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CellType {
    Code,
    Markdown,
    Raw,
}

impl CellType {
    fn as_str(self) -> &'static str {
        match self {
            CellType::Code => "code",
            CellType::Markdown => "markdown",
            CellType::Raw => "raw",
        }
    }
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    pub path: String,
    /// insert: after it.
    #[serde(default)]
    #[schemars(with = "String")]
    pub cell_id: Option<String>,
    /// 0-based; insert: the new index.
    #[serde(default)]
    #[schemars(with = "u64")]
    pub cell_index: Option<u64>,
    // Absent is "" (delete takes none); no schema default, which costs every client tokens.
    #[serde(default)]
    #[schemars(with = "String")]
    pub new_source: Option<String>,
    #[serde(default)]
    #[schemars(with = "CellType")]
    pub cell_type: Option<CellType>,
    #[serde(default)]
    pub edit_mode: EditMode,
    #[serde(default)]
    #[schemars(with = "String")]
    pub expected_version: Option<String>,
    #[serde(default)]
    pub dry_run: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    pub path: String,
    #[serde(skip)]
    #[schemars(skip)]
    pub edit_mode: EditMode,
    /// The cell changed (insert: the new cell's index).
    pub cell_index: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cell_id: Option<String>,
    /// Cells after the change (for the rendering).
    #[serde(skip)]
    #[schemars(skip)]
    pub cells: u64,
    /// Unified diff of the file's JSON.
    pub diff: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub backed_up: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change_id: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub would_ask: Option<String>,
    pub dry_run: bool,
}

pub struct NotebookEdit;

impl Tool for NotebookEdit {
    type Params = Params;
    type Output = Output;

    fn meta(&self) -> ToolMeta {
        ToolMeta {
            name: "notebook_edit",
            title: "Edit notebook",
            description: "Replace, insert or delete one .ipynb cell (cell_id or cell_index); other bytes kept, \
its outputs cleared. undo reverts.",
            annotations: Annotations::WRITE,
            served_by_default: true,
        }
    }

    fn run(&self, ctx: &Ctx, p: Params) -> ToolResult<Output> {
        let ws = ctx.workspace();
        let wp = ctx.resolve(&p.path)?;
        let shown = ws.display(&wp);
        ctx.set_audit_path(shown.clone());
        let max = ctx.config().max_edit_file_size;
        let (file, before, at, _held) = super::read_locked_within(
            ctx,
            &wp,
            &shown,
            &|size| {
                if max > 0 && size > max {
                    return Err(ToolError::new(
                        ErrorCode::FileTooLarge,
                        format!(
                            "{shown} is {}, over the {} edit limit",
                            human_size(size),
                            human_size(max)
                        ),
                    ));
                }
                Ok(())
            },
            // The text, its value, the new text and the value it must read back as.
            super::Hold::copies(cost::copies::EDIT.saturating_add(4))
                .decoded(cost::copies::DECODED),
        )?;
        if let Some(v) = &p.expected_version {
            super::edit::check_version(ctx, v, &before, &shown)?;
        }
        let text = utf8_notebook(&before, &shown)?;
        // Counted before it is parsed, and the parse's weight held: the notebook, the
        // notebook changed as a value, and the new text parsed back.
        let values = notebook::values(text).ok_or_else(|| notebook::too_many_values(&shown))?;
        let _parsed = notebook::hold_parse(values, 3, &shown, ctx.control())?;
        let nb = notebook::parse(text).ok_or_else(|| notebook::refuse(&shown, text))?;
        let cells = nb["cells"].as_array().map_or(&[][..], Vec::as_slice);
        ctx.check()?;

        let mode = match p.edit_mode {
            EditMode::Replace => Mode::Replace,
            EditMode::Insert => Mode::Insert,
            EditMode::Delete => Mode::Delete,
        };
        let index = which_cell(&p, cells, mode, &shown)?;
        let new_source = p.new_source.clone().unwrap_or_default();
        if mode == Mode::Delete && !new_source.is_empty() {
            return Err(ToolError::invalid(
                "new_source is given with edit_mode delete: delete takes no source",
            )
            .with_hint("to change the cell's source use edit_mode replace"));
        }
        let new_id = fresh_id(cells, &shown, index);
        let changed = notebook::change(
            text,
            &nb,
            &Change {
                mode,
                index,
                source: &new_source,
                cell_type: p.cell_type.map(CellType::as_str),
                new_id: &new_id,
            },
        )?;
        if changed.text == text {
            return Err(ToolError::invalid(format!(
                "cell {index} already holds that source: nothing would change"
            )));
        }
        let diff = super::unified_diff(
            text,
            &changed.text,
            &format!("a/{}", crate::workspace::shown(&shown)),
            &format!("b/{}", crate::workspace::shown(&shown)),
            2,
        );
        // It reads back as the JSON meant (a safety net: JSON escapes NUL, and a
        // notebook starts with "{").
        crate::text::check_reads_back(
            Some((&before, text)),
            changed.text.as_bytes(),
            &changed.text,
        )
        .map_err(|u| super::edit::unwritable(&shown, &u, &crate::text::Codec::UTF8, "changed"))?;
        let out = |backed_up, change_id, would_ask, dry_run| Output {
            path: shown.clone(),
            edit_mode: p.edit_mode,
            cell_index: index as u64,
            cell_id: changed.id.clone(),
            cells: changed.cells as u64,
            diff: diff.clone(),
            backed_up,
            change_id,
            would_ask,
            dry_run,
        };
        if p.dry_run || ctx.config().dry_run {
            let asked = super::edit::confirm_listed(ctx, &at, &wp, "editing");
            return Ok(out(false, None, super::would_ask(asked)?, true));
        }
        let (backup, id) = super::edit::replace_file(
            ctx,
            &at,
            &wp,
            &file,
            &before,
            changed.text.as_bytes(),
            "editing",
        )?;
        Ok(out(backup.is_some(), Some(id), None, false))
    }

    fn render(&self, o: &Output) -> String {
        let what = match o.edit_mode {
            EditMode::Replace => "replaced",
            EditMode::Insert => "inserted",
            EditMode::Delete => "deleted",
        };
        let id = o
            .cell_id
            .as_ref()
            .map(|i| format!(" (id {:?})", i))
            .unwrap_or_default();
        let head = if o.dry_run {
            format!(
                "Would have {what} cell {}{id} of {} ({} cells after):\n",
                o.cell_index,
                shown(&o.path),
                o.cells
            )
        } else {
            format!(
                "{} cell {}{id} of {} ({} cells now; {}; change {}, undo with undo):\n",
                capital(what),
                o.cell_index,
                shown(&o.path),
                o.cells,
                if o.backed_up {
                    "backed up"
                } else {
                    "no backup, backups are off: this change cannot be undone"
                },
                o.change_id.unwrap_or_default()
            )
        };
        format!(
            "{head}{}{}",
            super::render_would_ask(o.would_ask.as_ref()),
            o.diff
        )
    }
}

fn capital(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// The cell a call names: by id or index (not both unless they agree); an insert's
/// place (after the id; at the index; first when neither is given).
fn which_cell(
    p: &Params,
    cells: &[serde_json::Value],
    mode: Mode,
    shown: &str,
) -> ToolResult<usize> {
    let n = cells.len();
    let by_id = match &p.cell_id {
        Some(id) => match crate::tools::notebook::find_id(cells, id)[..] {
            [i] => Some(i),
            [] => {
                let quoted: String = id.chars().take(64).collect();
                return Err(ToolError::new(
                    ErrorCode::NotFound,
                    format!(
                        "{} has no cell with id {quoted:?}",
                        crate::workspace::shown_in_prose(shown)
                    ),
                )
                .with_hint("read the notebook with read_file to see its cells' ids, or name the cell by cell_index"));
            }
            [a, b, ..] => {
                return Err(ToolError::invalid(format!(
                    "cell_id names more than one cell: cells {a} and {b} (one by its id as stored, one by its id as read_file shows it)"
                ))
                .with_hint("name the cell by cell_index"));
            }
        },
        None => None,
    };
    let by_index = p
        .cell_index
        .map(|i| usize::try_from(i).unwrap_or(usize::MAX));
    let top = if mode == Mode::Insert {
        n
    } else {
        n.saturating_sub(1)
    };
    if let Some(i) = by_index
        && (i > top || (mode != Mode::Insert && n == 0))
    {
        return Err(ToolError::new(
            ErrorCode::NotFound,
            format!(
                "{} has {n} cells (indexes from 0); there is no cell_index {i}",
                crate::workspace::shown_in_prose(shown)
            ),
        )
        .with_hint(if mode == Mode::Insert {
            format!("insert at a cell_index from 0 to {n} ({n} appends)")
        } else {
            "read the notebook with read_file to see its cells".to_string()
        }));
    }
    match (by_id, by_index, mode) {
        (Some(a), Some(b), Mode::Insert) if a + 1 != b => Err(both()),
        (Some(a), Some(b), Mode::Replace | Mode::Delete) if a != b => Err(both()),
        (Some(a), _, Mode::Insert) => Ok(a + 1),
        (Some(a), _, _) => Ok(a),
        (None, Some(b), _) => Ok(b),
        (None, None, Mode::Insert) => Ok(0),
        (None, None, _) => Err(ToolError::invalid("name the cell: cell_id or cell_index")
            .with_hint("read the notebook with read_file to see its cells")),
    }
}

fn both() -> ToolError {
    ToolError::invalid("cell_id and cell_index name different cells").with_hint("give one of them")
}

/// An id for a new cell (8 hex digits, as Jupyter makes them), unused in `cells`.
fn fresh_id(cells: &[serde_json::Value], shown: &str, index: usize) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    (0u32..)
        .map(|n| {
            let mut h = crate::history::version_of(format!("{now}:{shown}:{index}:{n}").as_bytes());
            h.truncate(8);
            h
        })
        .find(|id| !cells.iter().any(|c| c["id"].as_str() == Some(id)))
        .unwrap_or_default()
}

/// A notebook's text: nbformat stores notebooks as UTF-8 JSON without a byte-order mark,
/// so a notebook in another encoding (or with a BOM, which Jupyter's JSON reader refuses)
/// is refused with the reason, never rewritten in UTF-8 or in its own encoding.
fn utf8_notebook<'a>(before: &'a [u8], shown: &str) -> ToolResult<&'a str> {
    let decoded = || crate::text::decode(before).and_then(|d| d.codec.label());
    let why = match std::str::from_utf8(before) {
        Ok(t) if !t.starts_with('\u{FEFF}') => return Ok(t),
        Ok(_) => "starts with a byte-order mark (UTF-8 with BOM)".to_string(),
        Err(_) => match decoded() {
            Some(label) => format!("is {label} text, not UTF-8"),
            None => {
                return Err(ToolError::new(
                    ErrorCode::BinaryFile,
                    format!("{shown} is not text, so not a notebook"),
                )
                .with_hint("notebook_edit changes .ipynb notebooks (nbformat 4)"));
            }
        },
    };
    Err(ToolError::new(
        ErrorCode::InvalidArgument,
        format!(
            "{} {why}: a notebook is UTF-8 JSON (nbformat), and Jupyter would not read it as one; nothing was changed",
            crate::workspace::shown_in_prose(shown)
        ),
    )
    .with_hint("read_file shows it as text; convert it to UTF-8 with write_file (encoding utf-8), then use notebook_edit, or change it with edit"))
}

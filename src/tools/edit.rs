//! `edit`: replace an exact string in a file, atomically, with a backup and an undo entry.
//!
//! The file keeps its line endings (an `old_string` written with `\n` matches a CRLF file
//! and its replacement is written with `\r\n`), its UTF-8 BOM (the BOM is bytes before
//! the text, never part of a match) and its permissions; an edit through a symlink
//! inside the workspace changes the target and leaves the link.

use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::history::{Action, Entry, sha256};
use crate::tool::{Annotations, Ctx, Tool, ToolMeta};
use crate::tools::human_size;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::os::fd::AsFd;

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// File to edit, relative to the workspace root.
    pub path: String,
    /// The exact text to replace, with enough context to occur once.
    pub old_string: String,
    /// The text to put in its place.
    pub new_string: String,
    /// Replace every occurrence instead of requiring exactly one.
    #[serde(default)]
    pub replace_all: bool,
    /// Show the change without writing it.
    #[serde(default)]
    pub dry_run: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    pub path: String,
    /// Occurrences replaced.
    pub replacements: usize,
    /// Unified diff of the change, 3 lines of context.
    pub diff: String,
    /// Where the previous content was saved (absent on a dry run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backup: Option<String>,
    /// The undo journal's id for this change (absent on a dry run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change_id: Option<u64>,
    pub dry_run: bool,
}

pub struct Edit;

impl Tool for Edit {
    type Params = Params;
    type Output = Output;

    fn meta(&self) -> ToolMeta {
        ToolMeta {
            name: "edit",
            title: "Edit a file",
            description: "Change a file by replacing an exact string. Read the file first; old_string must match \
exactly (whitespace included) and occur once, unless replace_all is true: give enough surrounding lines to make \
it unique. Returns a unified diff. The old content is backed up and the change can be undone with undo; set \
dry_run to preview. Keeps line endings, BOM and permissions.",
            annotations: Annotations::WRITE,
            served_by_default: true,
        }
    }

    fn run(&self, ctx: &Ctx, p: Params) -> ToolResult<Output> {
        if p.old_string.is_empty() {
            return Err(ToolError::invalid("old_string is empty")
                .with_hint("to add text, include a neighbouring line in old_string and repeat it in new_string"));
        }
        if p.old_string == p.new_string {
            return Err(ToolError::invalid(
                "old_string and new_string are the same: nothing would change",
            ));
        }
        let ws = ctx.workspace();
        let wp = ctx.resolve(&p.path)?;
        let shown = ws.display(&wp);
        ctx.set_audit_path(shown.clone());
        // Locked until the change is made: a concurrent edit of the same file, in this
        // process or another, applies on top of this one instead of overwriting it.
        let (file, meta, at) = ws.open_file_locked(&wp, crate::workspace::LOCK_WAIT)?;
        let real = at.real.clone();
        let max = ctx.config().max_edit_file_size;
        if max > 0 && meta.len() > max {
            return Err(ToolError::new(
                ErrorCode::FileTooLarge,
                format!(
                    "{shown} is {}, over the {} edit limit",
                    human_size(meta.len()),
                    human_size(max)
                ),
            ));
        }
        let mut before = Vec::with_capacity(meta.len() as usize);
        (&file)
            .read_to_end(&mut before)
            .map_err(|e| ToolError::io(&shown, &e))?;
        let (bom, text) = match before.strip_prefix(b"\xEF\xBB\xBF") {
            Some(rest) => (&before[..3], rest),
            None => (&before[..0], &before[..]),
        };
        let text = std::str::from_utf8(text).map_err(|_| {
            ToolError::new(
                ErrorCode::BinaryFile,
                format!("{shown} is not UTF-8 text; edit changes text files"),
            )
        })?;

        let (old, new) = adapt_line_endings(text, &p.old_string, &p.new_string);
        let hits: Vec<usize> = text.match_indices(old.as_str()).map(|(i, _)| i).collect();
        if hits.is_empty() {
            return Err(no_match(text, &p.old_string, &shown));
        }
        if hits.len() > 1 && !p.replace_all {
            let lines: Vec<String> = hits.iter().map(|&i| line_of(text, i).to_string()).collect();
            return Err(ToolError::new(
                ErrorCode::NotUnique,
                format!("old_string occurs {} times in {shown} (lines {})", hits.len(), lines.join(", ")),
            )
            .with_hint("add surrounding lines to old_string so it occurs once, or set replace_all to change every one"));
        }
        let after_text = text.replace(old.as_str(), &new);
        let mut after = Vec::with_capacity(bom.len() + after_text.len());
        after.extend_from_slice(bom);
        after.extend_from_slice(after_text.as_bytes());

        let diff = similar::TextDiff::from_lines(text, after_text.as_str())
            .unified_diff()
            .context_radius(3)
            .header(&format!("a/{shown}"), &format!("b/{shown}"))
            .to_string();
        let dry_run = p.dry_run || ctx.config().dry_run;
        if dry_run {
            return Ok(Output {
                path: shown,
                replacements: hits.len(),
                diff,
                backup: None,
                change_id: None,
                dry_run,
            });
        }

        if ws.needs_confirmation(&real, false) {
            ctx.confirm(&format!("editing {shown} (on the confirm list)"), false)?;
        }
        let history = ctx.history()?;
        let backup = if ctx.config().backup_enabled {
            Some(history.backup(real.root_index(), real.rel(), &before)?)
        } else {
            None
        };
        let mut entry = Entry::new(
            Action::Edit,
            ws.display(&real),
            real.root_index(),
            real.rel(),
        );
        entry.backup_path = backup.clone();
        entry.sha256_before = Some(sha256(&before));
        entry.sha256_after = Some(sha256(&after));
        let (Some(dir), Some(name)) = (&at.parent, at.name()) else {
            return Err(ToolError::new(
                ErrorCode::NotFound,
                format!("{shown} is gone"),
            ));
        };
        let id = history.replace(dir, name, Some(file.as_fd()), &after, entry, |_| Ok(()))?;
        Ok(Output {
            path: shown,
            replacements: hits.len(),
            diff,
            backup: backup.map(|b| b.display().to_string()),
            change_id: Some(id),
            dry_run: false,
        })
    }

    fn render(&self, o: &Output) -> String {
        let head = if o.dry_run {
            format!(
                "Would edit {} ({} replacement{}):\n",
                o.path,
                o.replacements,
                plural(o.replacements)
            )
        } else {
            format!(
                "Edited {} ({} replacement{}; backup: {}; change {}, undo with undo):\n",
                o.path,
                o.replacements,
                plural(o.replacements),
                o.backup
                    .as_deref()
                    .unwrap_or("none, backups are off: this edit cannot be undone"),
                o.change_id.unwrap_or_default()
            )
        };
        format!("{head}{}", o.diff)
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// In a file whose lines end with CRLF, an `old_string` written with bare `\n` means CRLF:
/// match and replace with CRLF so the file stays CRLF.
fn adapt_line_endings(text: &str, old: &str, new: &str) -> (String, String) {
    let crlf = text.contains("\r\n");
    if crlf && old.contains('\n') && !old.contains("\r\n") && !text.contains(old) {
        (
            old.replace('\n', "\r\n"),
            new.replace("\r\n", "\n").replace('\n', "\r\n"),
        )
    } else if crlf && !new.contains("\r\n") && new.contains('\n') && old.contains("\r\n") {
        (old.to_string(), new.replace('\n', "\r\n"))
    } else {
        (old.to_string(), new.to_string())
    }
}

/// 1-based line of byte offset `at`.
fn line_of(text: &str, at: usize) -> usize {
    memchr::memchr_iter(b'\n', &text.as_bytes()[..at]).count() + 1
}

fn no_match(text: &str, old: &str, shown: &str) -> ToolError {
    let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let err = ToolError::new(
        ErrorCode::NoMatch,
        format!("old_string was not found in {shown}"),
    );
    let wanted = squash(old);
    if !wanted.is_empty() && squash(text).contains(&wanted) {
        return err.with_hint("the text is there but differs in whitespace (indentation, tabs or line breaks); read the file and copy it exactly");
    }
    let first = old
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    if !first.is_empty()
        && let Some(i) = text.lines().position(|l| l.contains(first))
    {
        return err.with_hint(format!(
            "its first line appears at line {}, but what follows differs; read the file around there and copy the text exactly",
            i + 1
        ));
    }
    err.with_hint("read the file first and copy old_string exactly from it")
}

#[cfg(test)]
mod tests {
    use super::adapt_line_endings;

    fn adapt(text: &str, old: &str, new: &str) -> (String, String) {
        adapt_line_endings(text, old, new)
    }

    #[test]
    fn lf_strings_match_a_crlf_file_and_write_crlf() {
        let (old, new) = adapt("a\r\nb\r\nc\r\n", "a\nb", "x\ny\nz");
        assert_eq!(old, "a\r\nb");
        assert_eq!(new, "x\r\ny\r\nz");
    }

    #[test]
    fn an_lf_file_is_left_alone() {
        assert_eq!(
            adapt("a\nb\n", "a\nb", "x\ny"),
            ("a\nb".into(), "x\ny".into())
        );
    }

    #[test]
    fn crlf_strings_in_a_crlf_file_keep_crlf_in_the_replacement() {
        let (old, new) = adapt("a\r\nb\r\n", "a\r\nb", "x\ny");
        assert_eq!((old.as_str(), new.as_str()), ("a\r\nb", "x\r\ny"));
    }

    #[test]
    fn a_one_line_string_is_not_changed() {
        assert_eq!(adapt("a\r\nb\r\n", "a", "x"), ("a".into(), "x".into()));
    }

    #[test]
    fn an_lf_string_that_matches_as_is_in_a_mixed_file_is_kept() {
        // the file has both; the LF text is there verbatim, so it is what is meant
        assert_eq!(
            adapt("a\nb\r\nc\r\n", "a\nb", "x\ny"),
            ("a\nb".into(), "x\ny".into())
        );
    }
}

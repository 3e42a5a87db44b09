//! `search_files` (seed 001, kept exactly): regex search with a glob filter, context
//! lines and a cap on files; seed 001's text format.
//!
//! ```text
//! Found N matching files:
//!
//! ## path/to/file.md
//! Line 42:   context line before
//! Line 43: > matching line with pattern
//! Line 44:   context line after
//! ```

use crate::error::{ToolError, ToolResult};
use crate::search::sink::Line;
use crate::search::{self, GrepMode, GrepQuery, WalkOptions};
use crate::tool::{Annotations, Ctx, Tool, ToolMeta};
use crate::workspace::shown;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Regex pattern to search for.
    pub pattern: String,
    /// Glob pattern to filter files (e.g. "*.md", "Projects/**").
    #[serde(default)]
    #[schemars(with = "String")]
    pub file_pattern: Option<String>,
    /// Number of lines before/after each match (default 2).
    #[serde(default = "two")]
    pub context_lines: usize,
    /// Maximum files to return (default 10).
    #[serde(default = "ten")]
    pub max_results: usize,
}

fn two() -> usize {
    2
}
fn ten() -> usize {
    10
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct FileMatches {
    pub path: String,
    pub lines: Vec<Line>,
    /// Matching lines in this file beyond those shown (each file shows at most 100
    /// lines of matches and context).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub more_matches: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    pub files: Vec<FileMatches>,
    /// Matching files in all.
    pub file_count: u64,
    pub truncated: bool,
    /// Files not searched and why, ignore files not used (see grep).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Set when the search reached its time limit: the matches are those of the files
    /// searched until then (`truncated` is set too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<crate::tools::Incomplete>,
}

pub struct SearchFiles;

impl Tool for SearchFiles {
    type Params = Params;
    type Output = Output;

    fn meta(&self) -> ToolMeta {
        ToolMeta {
            name: "search_files",
            title: "Search files (regex, with excerpts)",
            description: "Search file contents using regex patterns. Returns matching file paths with excerpts \
showing context around matches.",
            annotations: Annotations::READ_ONLY,
            served_by_default: false,
        }
    }

    fn run(&self, ctx: &Ctx, p: Params) -> ToolResult<Output> {
        if p.pattern.is_empty() {
            return Err(ToolError::invalid("pattern is empty"));
        }
        let bases = crate::tools::search_bases(ctx, None)?;
        let q = GrepQuery {
            pattern: p.pattern,
            before: p.context_lines,
            after: p.context_lines,
            mode: GrepMode::Content,
            needed: p.max_results,
            file_units: true,
            ..GrepQuery::default()
        };
        let opts = WalkOptions {
            dirs: false,
            no_ignore: false,
            types: Vec::new(),
            include_hidden: false,
            globs: p
                .file_pattern
                .into_iter()
                .filter(|g| !g.trim().is_empty())
                .collect(),
        };
        let found = search::grep(&ctx.search_env(), &bases, &opts, &q).map_err(|e| {
            if e.code == crate::error::ErrorCode::InvalidRegex {
                // search_files has no fixed_strings: a hint that fits this tool.
                e.with_hint("escape the special characters to match them literally: \\( \\[ \\. \\* \\+ \\?")
            } else {
                e
            }
        })?;
        ctx.count_files(found.files_searched);
        ctx.count_read(found.bytes_read);
        ctx.set_engine(found.engine);
        let incomplete = crate::tools::incomplete(
            ctx,
            found.out_of_time,
            found.file_count > 0,
            found.files_searched,
        )?;
        let take = if p.max_results == 0 {
            usize::MAX
        } else {
            p.max_results
        };
        let files: Vec<FileMatches> = found
            .files
            .into_iter()
            .take(take)
            .map(|f| {
                let shown = f.lines.iter().filter(|l| l.is_match).count() as u64;
                FileMatches {
                    path: f.path,
                    more_matches: f.count.saturating_sub(shown),
                    lines: f.lines,
                }
            })
            .collect();
        ctx.charge_bytes(
            files
                .iter()
                .flat_map(|f| &f.lines)
                .map(|l| l.text.len() as u64)
                .sum(),
        )?;
        Ok(Output {
            truncated: (files.len() as u64) < found.file_count || incomplete.is_some(),
            files,
            file_count: found.file_count,
            warnings: ctx.control().warnings.list(),
            incomplete,
        })
    }

    fn render(&self, o: &Output) -> String {
        // The true total, as seed 001's example implies; what is shown follows.
        let mut s = format!("Found {} matching files:\n", o.file_count);
        for f in &o.files {
            s.push_str(&format!("\n## {}\n", shown(&f.path)));
            for l in &f.lines {
                let mark = if l.is_match { '>' } else { ' ' };
                s.push_str(&format!(
                    "Line {}: {mark} {}\n",
                    l.line,
                    crate::tools::escape_breaks(&l.text)
                ));
            }
            if f.more_matches > 0 {
                s.push_str(&format!(
                    "(… {} more matching lines in this file not shown; search it with grep and an offset)\n",
                    f.more_matches
                ));
            }
        }
        if let Some(i) = &o.incomplete {
            s.push('\n');
            s.push_str(&crate::tools::render_incomplete(i));
        } else if o.truncated {
            s.push_str(&format!(
                "\n(Showing the first {} of {} matching files; raise max_results to see more.)\n",
                o.files.len(),
                o.file_count
            ));
        }
        // After seed 001's format, only when there is something to say.
        if !o.warnings.is_empty() {
            s.push('\n');
            s.push_str(&crate::tools::render_warnings(&o.warnings));
        }
        s
    }
}

//! `file_search` (seed 002, kept exactly): case-insensitive substring search that stops
//! at 50 matches; seed 002's markdown format.
//!
//! ```text
//! Found 3 matches for "TODO":
//!
//! - `README.md:12`: // TODO: Add setup instructions
//! ```

use crate::error::{ToolError, ToolResult};
use crate::search::{self, GrepMode, GrepQuery, WalkOptions};
use crate::tool::{Annotations, Ctx, Tool, ToolMeta};
use crate::workspace::shown;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Seed 002: stop searching after 50 matches.
pub const MAX_MATCHES: usize = 50;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// The text string to search for.
    pub query: String,
    /// The directory to search in (default: project root).
    #[serde(default)]
    #[schemars(with = "String")]
    pub path: Option<String>,
    /// Whether to perform a case-insensitive search (default: true).
    #[serde(default = "yes")]
    pub ignore_case: bool,
    /// Optional glob pattern to restrict files (e.g. '*.md').
    #[serde(default)]
    #[schemars(with = "String")]
    pub include: Option<String>,
    /// Search hidden files and directories too (default: true, as seed 002 leaves out
    /// only `.git` and gitignored files: `.github/workflows/ci.yml` and `.eslintrc` are
    /// configurations). Secrets are never searched either way.
    #[serde(default = "yes")]
    pub include_hidden: bool,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Match {
    pub path: String,
    pub line: u64,
    /// The matching line, trimmed.
    pub text: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    pub query: String,
    pub matches: Vec<Match>,
    /// Stopped at 50 matches: there are more.
    pub truncated: bool,
    /// Files not searched and why, ignore files not used (see grep).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Set when the search reached its time limit: the matches are those of the files
    /// searched until then (`truncated` is set too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<crate::tools::Incomplete>,
}

pub struct FileSearch;

impl Tool for FileSearch {
    type Params = Params;
    type Output = Output;

    fn meta(&self) -> ToolMeta {
        ToolMeta {
            name: "file_search",
            title: "Search Project Content",
            description: "Perform a recursive text search throughout the project directory. Use this to find \
strings in READMEs, Dockerfiles, configurations, or other non-Go source files.",
            annotations: Annotations::READ_ONLY,
            served_by_default: false,
        }
    }

    fn run(&self, ctx: &Ctx, p: Params) -> ToolResult<Output> {
        if p.query.is_empty() {
            return Err(ToolError::invalid("query is empty"));
        }
        let path = p.path.as_deref().filter(|s| !s.is_empty());
        let bases = crate::tools::search_bases(ctx, Some(path.unwrap_or(".")))?;
        let q = GrepQuery {
            pattern: p.query.clone(),
            fixed_strings: true,
            ignore_case: p.ignore_case,
            mode: GrepMode::Content,
            needed: MAX_MATCHES,
            ..GrepQuery::default()
        };
        let opts = WalkOptions {
            dirs: false,
            no_ignore: false,
            types: Vec::new(),
            include_hidden: p.include_hidden,
            globs: p
                .include
                .into_iter()
                .filter(|g| !g.trim().is_empty())
                .collect(),
        };
        let found = search::grep(&ctx.search_env(), &bases, &opts, &q)?;
        ctx.count_files(found.files_searched);
        ctx.count_read(found.bytes_read);
        ctx.set_engine(found.engine);
        let incomplete = crate::tools::incomplete(
            ctx,
            found.out_of_time,
            found.match_count > 0,
            found.files_searched,
        )?;
        let total = found.match_count;
        let matches: Vec<Match> = found
            .files
            .into_iter()
            .flat_map(|f| {
                let path = f.path;
                f.lines.into_iter().map(move |l| Match {
                    path: path.clone(),
                    line: l.line,
                    text: l.text.trim().to_string(),
                })
            })
            .take(MAX_MATCHES)
            .collect();
        ctx.charge_bytes(matches.iter().map(|m| m.text.len() as u64).sum())?;
        Ok(Output {
            query: p.query,
            truncated: (matches.len() as u64) < total || incomplete.is_some(),
            matches,
            warnings: ctx.control().warnings.list(),
            incomplete,
        })
    }

    fn render(&self, o: &Output) -> String {
        // After seed 002's format, only when there is something to say.
        let notes = if o.warnings.is_empty() {
            String::new()
        } else {
            format!("\n{}", crate::tools::render_warnings(&o.warnings))
        };
        if o.matches.is_empty() {
            return format!("No matches found for {:?}.{notes}", o.query);
        }
        let mut s = format!("Found {} matches for {:?}:\n\n", o.matches.len(), o.query);
        for m in &o.matches {
            s.push_str(&format!(
                "- `{}:{}`: {}\n",
                shown(&m.path),
                m.line,
                crate::tools::escape_breaks(&m.text)
            ));
        }
        if let Some(i) = &o.incomplete {
            s.push('\n');
            s.push_str(&crate::tools::render_incomplete(i));
        } else if o.truncated {
            s.push_str(&format!(
                "\n(Stopped at {MAX_MATCHES} matches; narrow the query, path or include to see the rest.)\n"
            ));
        }
        s.push_str(&notes);
        s
    }
}

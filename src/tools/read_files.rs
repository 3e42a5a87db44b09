//! `read_files`: several files in one call, each read as `read_file` reads it (the same
//! limits, the same budget, the same version), with a file that is missing, denied or
//! too large reported in its place rather than failing the call. Globs expand as `glob`
//! expands them.

use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::tool::{Annotations, Ctx, Tool, ToolMeta};
use crate::tools::{glob, read_file};
use crate::workspace::shown;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Files one call reads at most.
const MAX_FILES: usize = 50;

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Files to read, relative to the workspace root; a glob ("src/**/*.rs") reads every
    /// file it matches.
    pub paths: Vec<String>,
    /// Lines read from each file at most (default 400; 0 for whole files within the size
    /// limit).
    #[serde(default = "default_lines", alias = "limit")]
    pub max_lines_each: u64,
    /// First line to read in each file, 1-based.
    #[serde(default)]
    #[schemars(with = "u64")]
    pub offset: Option<u64>,
}

fn default_lines() -> u64 {
    400
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct FileRead {
    pub path: String,
    /// The file as read_file returns it (absent on an error).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<read_file::Output>,
    /// Why this file was not read (the rest were).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolError>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    pub files: Vec<FileRead>,
    /// Files that could not be read.
    pub errors: usize,
    /// More files matched than one call reads.
    pub truncated: bool,
    /// Files not read because the output budget (max_output_chars) was spent: read them
    /// in another call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<String>,
}

pub struct ReadFiles;

impl Tool for ReadFiles {
    type Params = Params;
    type Output = Output;

    fn meta(&self) -> ToolMeta {
        ToolMeta {
            name: "read_files",
            title: "Read several files",
            description: "Read several files in one call: paths, or globs (\"src/**/*.rs\"), up to 50 files, each \
with line numbers and its version, at most max_lines_each lines (default 400) from offset. A file that is missing, \
denied or too large is reported in its place; the others are still read.",
            annotations: Annotations::READ_ONLY,
            served_by_default: true,
        }
    }

    fn run(&self, ctx: &Ctx, p: Params) -> ToolResult<Output> {
        if p.paths.is_empty() {
            return Err(
                ToolError::invalid("paths is empty").with_hint("name at least one file or glob")
            );
        }
        // Expand globs in order, without repeats.
        let mut names: Vec<String> = Vec::new();
        let mut truncated = false;
        for path in &p.paths {
            if path.contains(['*', '?', '[', '{']) {
                let found = glob::Glob.run(
                    ctx,
                    glob::Params {
                        pattern: path.clone(),
                        path: None,
                        max_results: MAX_FILES + 1,
                        include_hidden: false,
                        sort: glob::Sort::Path,
                        no_ignore: false,
                        dirs: false,
                    },
                )?;
                truncated |= found.truncated;
                for f in found.files {
                    if !names.contains(&f) {
                        names.push(f);
                    }
                }
            } else if !names.contains(path) {
                names.push(path.clone());
            }
        }
        if names.len() > MAX_FILES {
            names.truncate(MAX_FILES);
            truncated = true;
        }
        let mut files = Vec::with_capacity(names.len());
        // One budget for the whole answer, shared out file by file.
        let mut room = ctx.output_budget();
        let mut left_out = Vec::new();
        for name in names {
            ctx.check()?;
            if room.is_some_and(|r| r < 1000) {
                left_out.push(name);
                continue;
            }
            let params = read_file::Params {
                path: name.clone(),
                encoding: read_file::Encoding::Utf8,
                max_lines: None,
                offset: p.offset,
                limit: (p.max_lines_each > 0).then_some(p.max_lines_each),
            };
            match read_file::read(ctx, params, room.map(|r| r.saturating_sub(200))) {
                Ok(o) => files.push(FileRead {
                    path: o.path.clone(),
                    file: Some(o),
                    error: None,
                }),
                // Out of budget or time: the call is over, and says so.
                Err(e)
                    if matches!(
                        e.code,
                        ErrorCode::RoundLimitExceeded | ErrorCode::Timeout | ErrorCode::Cancelled
                    ) =>
                {
                    return Err(e);
                }
                Err(e) => files.push(FileRead {
                    path: name,
                    file: None,
                    error: Some(e),
                }),
            }
            if let (Some(r), Some(last)) = (room.as_mut(), files.last()) {
                let spent = last.file.as_ref().map_or(200, |f| {
                    f.content.len() + 8 * f.content.lines().count() + 200
                });
                *r = r.saturating_sub(spent);
            }
        }
        let errors = files.iter().filter(|f| f.error.is_some()).count();
        Ok(Output {
            files,
            errors,
            truncated,
            left_out,
        })
    }

    fn render(&self, o: &Output) -> String {
        let mut s = String::new();
        for f in &o.files {
            s.push_str(&format!("==> {} <==\n", shown(&f.path)));
            match (&f.file, &f.error) {
                (Some(file), _) => s.push_str(&read_file::ReadFile.render(file)),
                (None, Some(e)) => {
                    s.push_str(&e.render());
                    s.push('\n');
                }
                (None, None) => {}
            }
            if !s.ends_with('\n') {
                s.push('\n');
            }
        }
        if o.truncated {
            s.push_str(&format!(
                "[more files matched than one call reads ({MAX_FILES}); narrow the globs]\n"
            ));
        }
        if !o.left_out.is_empty() {
            s.push_str(&format!(
                "[not read, to keep within the output budget (max_output_chars): {}; read them in another call]\n",
                o.left_out.join(", ")
            ));
        }
        s
    }
}

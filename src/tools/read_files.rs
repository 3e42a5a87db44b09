//! `read_files`: several files in one call, each read as `read_file` reads it (the same
//! limits, the same budget, the same version), with a file that is missing, denied or
//! too large reported in its place rather than failing the call. A file over
//! `max_file_size` is too large unless an `offset` asks for a part of it, as in
//! `read_file`: never answered with its first `max_lines_each` lines instead. Globs expand as `glob`
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
    /// Names as reported; one naming nothing is a glob.
    pub paths: Vec<String>,
    /// 0: whole files.
    #[serde(default = "default_lines")]
    pub max_lines_each: u64,
    /// First line, 1-based.
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
            title: "Read files",
            description: "Read up to 50 files (names, or globs like \"src/**/*.rs\"), numbered, with versions; failures are reported in place.",
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
        // Said once, for the call, with read_files' own words (round 30: each file
        // failed it in place, its hint sending to the input schema).
        if p.offset == Some(0) {
            return Err(
                ToolError::invalid("offset is 1-based: the first line is 1").with_hint(
                    "give offset 1 or more (the line each file is read from), or leave it out to read from the first line",
                ),
            );
        }
        // Expand globs in order, without repeats. An entry is a name first: one that
        // exists as written (or is quoted, as ferret shows odd names) is read as that
        // object and no other, `[` and all; only an entry that names nothing is a glob.
        // An entry that reaches no file is an error in its place, never silence.
        // Each with the error that stands in its place, for an entry that reached no file.
        let mut names: Vec<(String, Option<ToolError>)> = Vec::new();
        let has =
            |names: &[(String, Option<ToolError>)], n: &str| names.iter().any(|(m, _)| m == n);
        let mut truncated = false;
        for path in &p.paths {
            if !is_glob(ctx, path) {
                if !has(&names, path) {
                    names.push((path.clone(), None));
                }
                continue;
            }
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
            );
            let found = match found {
                Ok(f) => f,
                Err(e) if stops_the_call(&e) => return Err(e),
                Err(e) => {
                    names.push((path.clone(), Some(as_glob(path, e))));
                    continue;
                }
            };
            truncated |= found.truncated;
            if found.files.is_empty() {
                // What the walk could not look at is said (a path past the system's
                // limit, an ignore file not used): "no file matches" alone would be false.
                let met = if found.warnings.is_empty() {
                    String::new()
                } else {
                    format!(" among the files looked at ({})", found.warnings.join("; "))
                };
                names.push((
                    path.clone(),
                    Some(ToolError::new(
                        ErrorCode::NotFound,
                        format!(
                            "{}: no such file, and no file matches it as a glob{met}",
                            shown(path)
                        ),
                    )
                    .with_hint("check the name with glob or list_directory; pass a name as ferret reported it")),
                ));
            }
            for f in found.files {
                if !has(&names, &f) {
                    names.push((f, None));
                }
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
        for (name, missed) in names {
            ctx.check()?;
            if let Some(e) = missed {
                files.push(FileRead {
                    path: name,
                    file: None,
                    error: Some(in_place(e).escaped()),
                });
                continue;
            }
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
            // Over max_file_size without an offset: read_file's FILE_TOO_LARGE in its
            // place, not silently the file's first lines.
            match read_file::read_from_start_as_whole(
                ctx,
                params,
                room.map(|r| r.saturating_sub(200)),
            ) {
                Ok(o) => files.push(FileRead {
                    path: o.path.clone(),
                    file: Some(o),
                    error: None,
                }),
                // Out of budget or time: the call is over, and says so.
                Err(e) if stops_the_call(&e) => return Err(e),
                Err(e) => files.push(FileRead {
                    path: name,
                    file: None,
                    error: Some(in_place(e).escaped()),
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
                (Some(file), _) => s.push_str(&unforgeable(&read_file::ReadFile.render(file))),
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
                o.left_out
                    .iter()
                    .map(|n| shown(n).into_owned())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        s
    }
}

/// Out of budget or time: the call is over, and says so.
fn stops_the_call(e: &ToolError) -> bool {
    matches!(
        e.code,
        ErrorCode::RoundLimitExceeded | ErrorCode::Timeout | ErrorCode::Cancelled
    )
}

/// Whether an entry of `paths` is read as a glob: it has a glob character, is not
/// written quoted (a quoted name is a name), and names nothing as it is written. An
/// entry that exists, or that the workspace refuses as a name (outside, secret), is read
/// as a name, so the answer is about that object.
fn is_glob(ctx: &Ctx, path: &str) -> bool {
    if !path.contains(['*', '?', '[', '{']) || path.split('/').any(|c| c.starts_with('"')) {
        return false;
    }
    // A name the workspace refuses as written (outside, `..`) is read as that name, and
    // refused as one: never a glob, whose errors would talk about globs. (Lexically: a
    // client's narrower roots judge the names a glob finds, not the glob.)
    let Ok(wp) = ctx.workspace().resolve(path) else {
        return false;
    };
    match ctx.workspace().entry(&wp, false) {
        Ok(r) => r.meta.is_none(),
        Err(e) => matches!(e.code, ErrorCode::NotFound | ErrorCode::NotADirectory),
    }
}

/// A glob's error, said as read_files' own: the entry named no file, and as a glob it
/// failed; the hint speaks of read_files' parameters (it has no `path`).
fn as_glob(entry: &str, mut e: ToolError) -> ToolError {
    e.message = format!(
        "{}: no file has this name, and as a glob: {}",
        shown(entry),
        e.message
    );
    if e.code == ErrorCode::InvalidGlob {
        e.hint = Some(
            "globs look like src/**/*.rs or *.{ts,tsx}, named from the workspace root (no `..`, no leading /); \
             with several roots, start with the root's name"
                .to_string(),
        );
    }
    e
}

/// A file's error as it stands in read_files' answer: with a hint (the call path only
/// adds one to the call's own error), and one that names read_files' parameters.
fn in_place(mut e: ToolError) -> ToolError {
    match e.code {
        ErrorCode::BinaryFile => {
            e.hint = Some(
                "read_files reads text; read this file alone with read_file and encoding \"base64\" for its \
                 bytes"
                    .to_string(),
            );
        }
        // A file no line range can read (UTF-16 over the size limit, a line over the
        // budget): read_file's way, said as read_file's (round 30: it was rewritten to
        // offset and max_lines_each, which fail the same way).
        ErrorCode::FileTooLarge if e.hint.as_deref().is_some_and(|h| h.contains("base64")) => {
            e.hint = Some(format!(
                "no offset or max_lines_each reads this file as text; read it alone with read_file: {}",
                e.hint.as_deref().unwrap_or_default()
            ));
        }
        ErrorCode::FileTooLarge if e.hint.as_deref().is_some_and(|h| h.contains("limit")) => {
            e.hint = Some(
                "read it in parts: offset and max_lines_each (e.g. offset 1, max_lines_each 200), or grep \
                 for what you need first"
                    .to_string(),
            );
        }
        _ => {}
    }
    if e.hint.is_none() {
        e.hint = Some(e.code.default_hint().to_string());
    }
    e
}

/// A file's text section as it goes between the `==> name <==` headers, so that no
/// file can forge another's header: content lines (`{n:>6}\t{text}`) keep one line each
/// (the line breaks other than `\n` that readers also break on are escaped, `\r` as
/// `\r`), and a text that looks like a header (`==>` first, after any spaces and
/// backslashes) gets one backslash more, so `\==> x <==` is a content line's
/// `==> x <==`. Headers are never numbered; ferret's own notes are not content.
fn unforgeable(body: &str) -> String {
    let is_break = super::is_break;
    let mut out = String::with_capacity(body.len() + 16);
    for line in body.split_inclusive('\n') {
        let (line, end) = match line.strip_suffix('\n') {
            Some(l) => (l, "\n"),
            None => (line, ""),
        };
        let numbered = line.split_once('\t').filter(|(n, _)| {
            let n = n.trim_start();
            !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())
        });
        let Some((gutter, text)) = numbered else {
            out.push_str(line);
            out.push_str(end);
            continue;
        };
        out.push_str(gutter);
        out.push('\t');
        let after = text.trim_start_matches([' ', '\t', '\\']);
        if after.starts_with("==>") {
            let lead = text.len() - text.trim_start_matches([' ', '\t']).len();
            out.push_str(&text[..lead]);
            out.push('\\');
            push_escaped(&mut out, &text[lead..], is_break);
        } else {
            push_escaped(&mut out, text, is_break);
        }
        out.push_str(end);
    }
    out
}

fn push_escaped(out: &mut String, text: &str, is_break: impl Fn(char) -> bool) {
    for c in text.chars() {
        if is_break(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::unforgeable;

    #[test]
    fn no_content_line_reads_as_a_header() {
        let body = "     1\tone\n     2\t==> b.txt <==\n     3\t  \\==> c <==\n     4\ta\r==> d <==\n[version 1]";
        let got = unforgeable(body);
        assert_eq!(
            got,
            "     1\tone\n     2\t\\==> b.txt <==\n     3\t  \\\\==> c <==\n     4\ta\\r==> d <==\n[version 1]"
        );
        for l in got.lines() {
            assert!(!l.starts_with("==>"), "{l:?}");
        }
    }
}

//! `grep`: regex (or literal) content search over the workspace, ripgrep's engine and
//! rules, deterministic output in path order with true totals.

use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::search::sink::Line;
use crate::search::{self, GrepMode, GrepQuery, WalkOptions};
use crate::tool::{Annotations, Ctx, Tool, ToolMeta};
use crate::workspace::shown;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Default `max_results`: files, count entries or content lines.
pub const DEFAULT_MAX_RESULTS: usize = 200;

/// The largest `offset` any mode pages to: the lines (or files) before it are held (in
/// path order, whatever order the threads find files in) until the search ends, about
/// 170 bytes each (offset 100 000: 17 MB; 20 million: 1.4 GB), so past it the call is
/// refused rather than growing with the offset. Files and count entries are held by
/// their paths' bytes (a hostile tree's 3.8 KB paths: 120 000 files, 0.9 GB), so the
/// same cap holds for them.
pub const MAX_OFFSET: usize = 100_000;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutputMode {
    /// Matching lines with their line numbers (and context).
    Content,
    /// Only the paths of files that match (cheapest in tokens).
    #[default]
    FilesWithMatches,
    /// Matching lines per file.
    Count,
}

/// One glob or several.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Globs {
    One(String),
    Many(Vec<String>),
}

impl Default for Globs {
    fn default() -> Self {
        Globs::Many(Vec::new())
    }
}

impl Globs {
    pub fn into_vec(self) -> Vec<String> {
        match self {
            Globs::One(s) if s.trim().is_empty() => Vec::new(),
            Globs::One(s) => vec![s],
            Globs::Many(v) => v,
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    // Rust regex syntax (the description says regex).
    pub pattern: String,
    #[serde(default)]
    #[schemars(with = "String")]
    pub path: Option<String>,
    /// "*.rs", "src/**"; "!x" excludes.
    #[serde(default)]
    pub glob: Globs,
    #[serde(default)]
    pub ignore_case: bool,
    /// Literal pattern.
    #[serde(default)]
    pub fixed_strings: bool,
    /// Matches may span lines.
    #[serde(default)]
    pub multiline: bool,
    #[serde(default)]
    #[schemars(with = "u64")]
    pub context: Option<usize>,
    #[serde(default)]
    #[schemars(with = "u64")]
    pub context_before: Option<usize>,
    #[serde(default)]
    #[schemars(with = "u64")]
    pub context_after: Option<usize>,
    #[serde(default)]
    pub output_mode: OutputMode,
    /// Default 200; 0: all.
    #[serde(default)]
    #[schemars(with = "u64")]
    pub max_results: Option<usize>,
    #[serde(default)]
    pub offset: usize,
    #[serde(default)]
    pub include_hidden: bool,
    // Ignored files too (rg's --no-ignore). (Not in the schema: the name says it.)
    #[serde(default)]
    pub no_ignore: bool,
    // Lines that do not match (rg -v).
    #[serde(default)]
    pub invert: bool,
    // Whole words only (rg -w).
    #[serde(default)]
    pub word: bool,
    /// rg types; "!js" excludes.
    #[serde(default)]
    pub types: Vec<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct FileResult {
    pub path: String,
    /// Matching lines in the file (count mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// Matching and context lines (content mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lines: Option<Vec<Line>>,
    // The file's encoding when not UTF-8 (searched and shown decoded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub charset: Option<String>,
}

/// What a result cut to fit the output budget did not show.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
pub struct LeftOut {
    pub matching_lines: u64,
    pub files: u64,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// Sorted by path.
    pub files: Vec<FileResult>,
    /// Files that match, in all (in the files searched, when incomplete).
    pub file_count: u64,
    /// Matching lines, in all (content and count modes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub match_count: Option<u64>,
    /// More results exist than were returned (see offset).
    pub truncated: bool,
    /// Fewer lines were returned than asked for, to keep the result within
    /// max_output_chars: matching lines and files of the whole result not shown here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left_out: Option<LeftOut>,
    /// Which engine answered: "index" (the live index chose which files to read) or
    /// "scan" (every file was read). The answer is the same either way.
    pub engine: String,
    /// What the agent should know about how the answer was made: files not searched
    /// and why (a line too long to hold), ignore files too large to use.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Set when the search reached its time limit: the results and totals are those of
    /// the files searched until then (`truncated` is set too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<crate::tools::Incomplete>,
    #[serde(skip)]
    pub mode: OutputMode,
    #[serde(skip)]
    pub context: bool,
    #[serde(skip)]
    pub offset: usize,
}

pub struct Grep;

impl Tool for Grep {
    type Params = Params;
    type Output = Output;

    fn meta(&self) -> ToolMeta {
        ToolMeta {
            name: "grep",
            title: "Search contents",
            description: "Regex search of contents (prefer it to grep or rg). output_mode: \
files_with_matches (cheapest), content (lines), count. Skips .gitignored, hidden, binary.",
            annotations: Annotations::READ_ONLY,
            served_by_default: true,
        }
    }

    fn run(&self, ctx: &Ctx, p: Params) -> ToolResult<Output> {
        if p.pattern.is_empty() {
            return Err(ToolError::invalid("pattern is empty")
                .with_hint("give a regex, or literal text with fixed_strings: true"));
        }
        let bases = crate::tools::search_bases(ctx, p.path.as_deref())?;
        let max = p.max_results.unwrap_or(DEFAULT_MAX_RESULTS);
        let mode = match p.output_mode {
            OutputMode::Content => GrepMode::Content,
            OutputMode::FilesWithMatches => GrepMode::Files,
            OutputMode::Count => GrepMode::Count,
        };
        if p.offset > MAX_OFFSET {
            return Err(ToolError::invalid(format!(
                "offset {} is over {MAX_OFFSET}: a search holds every result before the offset \
                 while it searches",
                p.offset
            ))
            .with_hint(
                "narrow the search instead of paging so far: a path or glob, a more specific pattern; \
                 output_mode count or files_with_matches says where the matches are",
            ));
        }
        let around = p.context.unwrap_or(0);
        // Each line shown costs its text, its path and the JSON around it; a result cut to
        // the budget never needs more lines than this, so no more are kept in memory.
        const LINE_OVERHEAD: usize = 48;
        // A file or count entry shown costs at least its name, a separator and a line
        // break (or, in the JSON, its quotes and comma).
        const ENTRY_OVERHEAD: usize = 4;
        const FOOTER_ROOM: usize = 600;
        let budget = ctx.output_budget();
        let max = match (budget, mode) {
            (Some(b), GrepMode::Content) => {
                let fit = b / LINE_OVERHEAD + 1;
                if max == 0 { fit } else { max.min(fit) }
            }
            // "All" files under a budget is what the budget can show: held beyond it,
            // every matching file of a hostile tree stayed in memory by its path.
            (Some(b), _) => {
                let fit = b / ENTRY_OVERHEAD + 1;
                if max == 0 { fit } else { max.min(fit) }
            }
            _ => max,
        };
        // Context past what the budget can show is never shown, only held: 740 000 lines
        // asked before a match made the search hold 64 MiB of them, give the file up
        // and miss its match (round 30). Without a budget (`--full`), all is kept.
        let context_fit = |n: usize| match budget {
            Some(b) => n.min(b / LINE_OVERHEAD + 1),
            None => n,
        };
        let q = GrepQuery {
            pattern: p.pattern,
            fixed_strings: p.fixed_strings,
            ignore_case: p.ignore_case,
            multiline: p.multiline,
            before: context_fit(p.context_before.unwrap_or(around)),
            after: context_fit(p.context_after.unwrap_or(around)),
            mode,
            needed: if max == 0 {
                0
            } else {
                p.offset.saturating_add(max)
            },
            file_units: false,
            invert: p.invert,
            word: p.word,
        };
        let opts = WalkOptions {
            dirs: false,
            include_hidden: p.include_hidden,
            globs: p.glob.into_vec(),
            no_ignore: p.no_ignore,
            types: p.types,
        };
        let found = search::grep(&ctx.search_env(), &bases, &opts, &q)?;
        ctx.count_files(found.files_searched);
        ctx.count_read(found.bytes_read);
        ctx.set_engine(found.engine);
        let incomplete = crate::tools::incomplete(
            ctx,
            found.out_of_time,
            found.file_count > 0,
            found.files_searched,
        )?;
        let take = if max == 0 { usize::MAX } else { max };

        let mut left_out = None;
        let (files, truncated) = if mode == GrepMode::Content {
            let mut skip = p.offset;
            let mut left = take;
            let mut files = Vec::new();
            let mut room = budget.map(|b| b.saturating_sub(FOOTER_ROOM));
            let mut cut = false;
            'files: for f in found.files {
                if left == 0 {
                    break;
                }
                let n = f.lines.len();
                if skip >= n {
                    skip -= n;
                    continue;
                }
                let mut lines: Vec<Line> = Vec::new();
                for l in f.lines.into_iter().skip(skip).take(left) {
                    if let Some(r) = room.as_mut() {
                        let cost = f.path.len() + l.text.len() + LINE_OVERHEAD;
                        // Whole lines only: one that does not fit ends the page.
                        if cost > *r {
                            cut = true;
                            if !lines.is_empty() {
                                files.push(FileResult {
                                    path: f.path.clone(),
                                    count: None,
                                    lines: Some(lines),
                                    charset: f.encoding.clone(),
                                });
                            }
                            break 'files;
                        }
                        *r -= cost;
                    }
                    lines.push(l);
                }
                skip = 0;
                left -= lines.len();
                files.push(FileResult {
                    path: f.path,
                    count: None,
                    lines: Some(lines),
                    charset: f.encoding,
                });
            }
            // Asked for more than fits (or for all): what was left out, by the true totals.
            let asked_more = p.max_results.unwrap_or(DEFAULT_MAX_RESULTS);
            if cut || (budget.is_some() && (asked_more == 0 || asked_more > take) && found.capped) {
                let shown_matches: u64 = files
                    .iter()
                    .flat_map(|f| f.lines.iter().flatten())
                    .filter(|l| l.is_match)
                    .count() as u64;
                left_out = Some(LeftOut {
                    matching_lines: found.match_count.saturating_sub(shown_matches),
                    files: found.file_count.saturating_sub(files.len() as u64),
                });
            }
            let shown: usize = files
                .iter()
                .map(|f| f.lines.as_ref().map_or(0, Vec::len))
                .sum();
            let truncated = left_out.is_some()
                || found.capped
                || (p.offset + shown) < found.line_count as usize;
            (files, truncated)
        } else {
            let files: Vec<FileResult> = found
                .files
                .into_iter()
                .skip(p.offset)
                .take(take)
                .map(|f| FileResult {
                    path: f.path,
                    count: (mode == GrepMode::Count).then_some(f.count),
                    lines: None,
                    charset: f.encoding,
                })
                .collect();
            let truncated = (p.offset + files.len()) < found.file_count as usize;
            (files, truncated)
        };
        // The first results were kept short for their paths' bytes and none reached the
        // offset: there are results there, but not held. Say so, not "nothing at offset".
        if found.short && files.is_empty() && incomplete.is_none() && p.offset > 0 {
            return Err(ToolError::new(
                ErrorCode::FileTooLarge,
                format!(
                    "the matching files' paths are too long to hold {} results at once, so offset {} \
                     cannot be reached; {} files match in all",
                    p.offset.saturating_add(take.min(MAX_OFFSET)),
                    p.offset,
                    found.file_count
                ),
            )
            .with_hint("narrow path or glob to the part of the tree you want, then page within it"));
        }
        let bytes: usize = files
            .iter()
            .map(|f| {
                f.path.len()
                    + f.lines
                        .as_ref()
                        .map_or(0, |l| l.iter().map(|l| l.text.len()).sum())
            })
            .sum();
        ctx.charge_bytes(bytes as u64)?;
        Ok(Output {
            files,
            file_count: found.file_count,
            match_count: (mode != GrepMode::Files).then_some(found.match_count),
            truncated: truncated || incomplete.is_some(),
            left_out,
            engine: found.engine.to_string(),
            warnings: ctx.control().warnings.list(),
            incomplete,
            mode: p.output_mode,
            context: q.before + q.after > 0,
            offset: p.offset,
        })
    }

    fn render(&self, o: &Output) -> String {
        render(o)
    }
}

/// ripgrep's look: `path:line:text` for matches, `path-line-text` for context, `--`
/// between groups that are not contiguous.
pub fn render(o: &Output) -> String {
    let mut s = crate::tools::render_warnings(&o.warnings);
    if o.files.is_empty() && o.file_count == 0 {
        s.push_str("No matches found.");
        return s;
    }
    if o.files.is_empty() && o.incomplete.is_none() {
        // An offset past the last result: say so, rather than an empty answer.
        s.push_str(&format!(
            "Nothing at offset {}: {} matching files in all; pass a smaller offset.\n",
            o.offset, o.file_count
        ));
        return s;
    }
    match o.mode {
        OutputMode::FilesWithMatches => {
            for f in &o.files {
                s.push_str(&shown(&f.path));
                s.push('\n');
            }
        }
        OutputMode::Count => {
            for f in &o.files {
                s.push_str(&format!("{}:{}\n", shown(&f.path), f.count.unwrap_or(0)));
            }
        }
        OutputMode::Content => {
            let mut first_group = true;
            for f in &o.files {
                let path = crate::workspace::shown_in_line(&f.path);
                let mut prev: Option<u64> = None;
                for l in f.lines.iter().flatten() {
                    let gap = prev.is_none_or(|p| l.line != p + 1);
                    if gap && o.context && !first_group {
                        s.push_str("--\n");
                    }
                    first_group = false;
                    let sep = if l.is_match { ':' } else { '-' };
                    s.push_str(&format!(
                        "{path}{sep}{}{sep}{}\n",
                        l.line,
                        crate::tools::escape_breaks(&l.text)
                    ));
                    prev = Some(l.line);
                }
            }
        }
    }
    let decoded: Vec<String> = o
        .files
        .iter()
        .filter_map(|f| Some(format!("{} ({})", shown(&f.path), f.charset.as_ref()?)))
        .collect();
    if !decoded.is_empty() {
        s.push_str(&format!("[decoded: {}]\n", decoded.join(", ")));
    }
    if let Some(i) = &o.incomplete {
        // The totals are the files searched so far: no page of a whole answer to offer.
        s.push_str(&crate::tools::render_incomplete(i));
    } else if o.truncated {
        let (unit, shown) = match o.mode {
            OutputMode::Content => (
                "lines",
                o.files
                    .iter()
                    .map(|f| f.lines.as_ref().map_or(0, Vec::len))
                    .sum(),
            ),
            _ => ("files", o.files.len()),
        };
        match (&o.left_out, o.match_count) {
            (Some(l), Some(total)) => s.push_str(&format!(
                "[cut to fit the output budget (max_output_chars): showing lines {}-{} of {total} matching lines in {} files; \
{} matching lines and {} files left out. Pass offset {} for more, narrow path or glob, or use output_mode count \
to see where they are]\n",
                o.offset + 1,
                o.offset + shown,
                o.file_count,
                l.matching_lines,
                l.files,
                o.offset + shown
            )),
            _ => s.push_str(&format!(
                "[truncated: showing {unit} {}-{} ({} matching files in all); pass offset {} for more]\n",
                o.offset + 1,
                o.offset + shown,
                o.file_count,
                o.offset + shown
            )),
        }
    }
    s
}

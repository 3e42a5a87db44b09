//! The search engine used by `grep`, `glob`, `search_files` and `file_search`: a
//! parallel walk over directory handles with ripgrep's ignore rules (`walker.rs`) and,
//! for content search, ripgrep's searcher (`grep-searcher`, `grep-regex`).
//!
//! - The walk honours `.gitignore`, `.ignore` and `.git/info/exclude` also outside a git
//!   repository, skips hidden entries unless asked, never follows symlinks, prunes
//!   denied and skipped directories, and only ever yields regular files: FIFOs, sockets
//!   and devices are never opened.
//! - Each directory is listed, and each file opened, through the workspace
//!   ([`Workspace::open_found`]), beneath the root with no symlink on the way, so a tree
//!   changing under the walk cannot lead a search outside.
//! - Files with a NUL byte are binary and contribute nothing (ripgrep's rule for files
//!   found by walking). Files over `search_max_file_size` are skipped.
//! - Cancellation and the call's deadline are checked before every file and on every
//!   read, so a stop takes effect within one buffer (64 KiB) of work per thread. A
//!   search past its deadline returns what it found in the files searched until then
//!   ([`until_deadline`]): the tool marks the answer incomplete, and fails with
//!   `TIMEOUT` only when it found nothing. A cancelled search is an error.
//! - Results are collected in path order with bounded memory ([`collect::TopN`]), so the
//!   output is identical from run to run whatever the thread timing.
//!
//! The regex engine is Rust's `regex`, which runs in time linear in the input: no pattern
//! can make a search take exponential time (no ReDoS).
//!
//! [`Workspace::open_found`]: crate::workspace::Workspace::open_found

pub mod collect;
pub mod cost;
pub mod index;
pub mod live;
pub mod plan;
pub mod quads;
pub mod sink;
pub mod store;
mod walker;
pub use walker::{DirRules, IgnoreRules};

use crate::control::{Control, Progress};
use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::workspace::{Workspace, WsPath};
use collect::{Key, TopN};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, SearcherBuilder};
use ignore::overrides::{Override, OverrideBuilder};
use sink::{FileSink, Line, Record};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

/// Where a search starts: a directory to walk or a single file.
#[derive(Debug, Clone)]
pub struct Base {
    pub wp: WsPath,
    pub is_file: bool,
}

/// What a search needs of the call it runs in: the sandbox, the call's control
/// (cancellation, deadline, progress) and the size limit for searched files.
pub struct SearchEnv<'a> {
    pub workspace: &'a Workspace,
    pub control: &'a Control,
    /// Files larger than this are skipped (0: no limit).
    pub max_file_size: u64,
    /// Lines longer than this are cut around the match (0: never).
    pub max_columns: usize,
    /// The live index, when there is one: files it rules out are not read, and the
    /// walk itself is skipped while its watcher vouches for its list.
    pub index: Option<&'a live::Live>,
}

/// What every walk takes.
#[derive(Debug, Clone, Default)]
pub struct WalkOptions {
    pub include_hidden: bool,
    /// ripgrep `-g` globs: a file must match one of the positive ones (if any) and none
    /// of the `!` ones.
    pub globs: Vec<String>,
    /// Visit the directories entered too (with [`Found::is_dir`] set).
    pub dirs: bool,
    /// Ignore files (`.gitignore`, `.ignore`, `.git/info/exclude`) are not read: rg's
    /// `--no-ignore`. The sandbox's deny and skip rules still hold.
    pub no_ignore: bool,
    /// rg's file type names: a file must be of one of the plain ones (if any) and of
    /// none of the `!` ones.
    pub types: Vec<String>,
}

/// The warning for a file over `search_max_file_size`: named, not searched, in every mode.
fn over_size(shown: &str, max_size: u64) -> String {
    format!(
        "{shown}: not searched: over search_max_file_size ({max_size} bytes); read it with read_file \
and an offset (a UTF-16 file, read as text only whole: with encoding base64, offset and limit counting bytes), \
or the person raises search_max_file_size"
    )
}

/// A regular file met by a walk (or, when asked, a directory it entered).
pub struct Found<'a> {
    pub root: usize,
    /// Relative to the root.
    pub rel: &'a Path,
    /// Relative to the walk's base, for glob matching.
    pub rel_to_base: &'a Path,
    pub is_dir: bool,
    /// Set when the file comes from the index's list and the watcher saw no write to
    /// it since it was indexed: its content is the one indexed.
    pub listed: Option<&'a index::Listed>,
}

impl Found<'_> {
    /// Its place in the result order.
    pub fn key(&self) -> Key {
        (self.root, self.rel.to_path_buf())
    }

    pub fn ws_path(&self, ws: &crate::workspace::Workspace) -> WsPath {
        ws.root_path(self.root).join(self.rel)
    }
}

/// Outcome of a visit: go on, or stop the whole walk.
pub type Go = bool;

/// Walks every base in parallel, calling a visitor (one per thread, made by `mk`) for
/// each regular file that passes the sandbox's rules. Fails with `CANCELLED` or
/// `TIMEOUT` when stopped that way.
pub fn walk<'s, M, V>(env: &SearchEnv, bases: &[Base], opts: &WalkOptions, mk: M) -> ToolResult<()>
where
    M: Fn() -> V + Sync,
    V: FnMut(&Found) -> Go + Send + 's,
{
    let ws = env.workspace;
    let types = types(&opts.types)?;
    for base in bases {
        let overrides = overrides(&opts.globs)?;
        if base.is_file {
            // A file named explicitly is searched even if ignored or hidden (as rg does);
            // the deny list was applied when its name was resolved.
            let name = PathBuf::from(base.wp.rel().file_name().unwrap_or_default());
            mk()(&Found {
                root: base.wp.root_index(),
                rel: base.wp.rel(),
                rel_to_base: &name,
                is_dir: false,
                listed: None,
            });
            continue;
        }
        let walker = walker::Walker {
            ws,
            env,
            root: base.wp.root_index(),
            base: base.wp.rel(),
            hidden: !opts.include_hidden,
            no_ignore: opts.no_ignore,
            types: types.as_ref(),
            dirs: opts.dirs,
            overrides: &overrides,
        };
        if walker.run(threads(), &mk).is_err() {
            // A visitor asked to stop, or the call was stopped: the check below tells.
            env.control.check()?;
            return Ok(());
        }
        env.control.check()?;
    }
    env.control.check()
}

/// Visits every file a walk of `bases` would, from the live index's list when its
/// watcher vouches for it, else by walking. Returns the engine that answered, and
/// whether the call's time ran out before the visit ended (see [`until_deadline`]):
/// the files visited until then were visited, the rest were not.
pub fn visit_files<'s, M, V>(
    env: &SearchEnv,
    bases: &[Base],
    opts: &WalkOptions,
    mk: M,
) -> ToolResult<(&'static str, bool)>
where
    M: Fn() -> V + Sync,
    V: FnMut(&Found) -> Go + Send + 's,
{
    // The index lists what ignore files leave: a walk that reads none walks.
    if let Some(live) = env
        .index
        .filter(|_| !opts.no_ignore && opts.types.is_empty())
    {
        let view = live.view(env)?;
        env.control.check()?;
        if let Some(done) = live::walk_listed(env, &view, bases, opts, &mk) {
            let out_of_time = until_deadline(done)?;
            if !out_of_time {
                live.count_listed();
            }
            return Ok(("index", out_of_time));
        }
    }
    let out_of_time = until_deadline(walk(env, bases, opts, mk))?;
    Ok(("scan", out_of_time))
}

/// How a search's walk ended: `Ok(false)` when it ran to the end, `Ok(true)` when the
/// call's time ran out first (what was found until then stands, and the tool says its
/// answer is incomplete, or fails with `TIMEOUT` if it found nothing), the error when it
/// was cancelled or failed otherwise. Only the walk's end is read so: a deadline passed
/// before the walk began (waiting for admission, loading the index) is the error.
pub fn until_deadline(walked: ToolResult<()>) -> ToolResult<bool> {
    match walked {
        Ok(()) => Ok(false),
        Err(e) if e.code == ErrorCode::Timeout => Ok(true),
        Err(e) => Err(e),
    }
}

fn threads() -> usize {
    std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(12)
}

/// rg's file types (`rust`, `!js`) as the `ignore` crate's matcher; `None` for none.
fn types(names: &[String]) -> ToolResult<Option<ignore::types::Types>> {
    if names.is_empty() {
        return Ok(None);
    }
    // Each name given adds its globs again (`all` adds every type's): a call may not
    // make the matcher big by repeating them.
    const MAX_TYPES: usize = 64;
    let names: std::collections::BTreeSet<&str> = names.iter().map(String::as_str).collect();
    if names.len() > MAX_TYPES {
        return Err(ToolError::invalid(format!(
            "{} file types given; at most {MAX_TYPES}",
            names.len()
        ))
        .with_hint("name fewer types, or filter with glob"));
    }
    let mut b = ignore::types::TypesBuilder::new();
    b.add_defaults();
    for n in names {
        match n.strip_prefix('!') {
            Some(n) => b.negate(n),
            None => b.select(n),
        };
    }
    b.build().map(Some).map_err(|e| {
        ToolError::invalid(format!("{e}"))
            .with_hint("file types are rg's: rust, py, js, ts, go, c, cpp, java, md, json, toml…")
    })
}

/// `-g` globs, matched against paths relative to the walk's start.
fn overrides(globs: &[String]) -> ToolResult<Override> {
    cost::check_globs(globs)?;
    // A `..` component matches nothing (paths are matched below the walk's start): a
    // refusal, as `glob` gives, not a silent empty answer (round 28).
    if let Some(g) = globs
        .iter()
        .find(|g| g.trim_start_matches('!').split('/').any(|c| c == ".."))
    {
        return Err(ToolError::new(
            ErrorCode::InvalidGlob,
            format!(
                "glob {g:?} has a `..` component, which matches nothing: a glob matches paths below                  the directory searched"
            ),
        )
        .with_hint("search from the directory above instead (path), and drop the `../` from the glob"));
    }
    let mut b = OverrideBuilder::new(".");
    for g in globs {
        // In NFC, as the names are when matched: `café` finds an NFD `café` on disk.
        b.add(&crate::workspace::patterns::nfc_str(g))
            .map_err(|e| {
                ToolError::new(ErrorCode::InvalidGlob, format!("invalid glob {g:?}: {e}"))
                    .with_hint("globs look like *.rs, src/**, {a,b}.txt, !*.min.js")
            })?;
    }
    b.build()
        .map_err(|e| ToolError::new(ErrorCode::InvalidGlob, e.to_string()))
}

/// What a content search looks for and how.
#[derive(Debug, Clone, Default)]
pub struct GrepQuery {
    pub pattern: String,
    pub fixed_strings: bool,
    pub ignore_case: bool,
    pub multiline: bool,
    pub before: usize,
    pub after: usize,
    pub mode: GrepMode,
    /// Units of output that may be shown (offset + max_results; 0: all).
    pub needed: usize,
    /// Count files rather than lines as the units of `needed` (seed 001's max_results is
    /// a number of files); each file then keeps at most [`PER_FILE_LINES`] lines, and
    /// says how many matching lines it did not show.
    pub file_units: bool,
    /// Lines that do not match are the matches (rg's `-v`).
    pub invert: bool,
    /// Matches only as whole words (rg's `-w`).
    pub word: bool,
}

/// Lines (matches and context) one file may contribute when files are the unit: ten
/// files stay under ~100 KB for a model to read.
pub const PER_FILE_LINES: usize = 100;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum GrepMode {
    #[default]
    Files,
    Count,
    Content,
}

/// One file's contribution.
#[derive(Debug, Clone)]
pub struct FileHits {
    pub path: String,
    pub count: u64,
    pub lines: Vec<Line>,
    /// The file's encoding when it was searched decoded (not UTF-8: "windows-1252",
    /// "utf-16le").
    pub encoding: Option<String>,
}

#[derive(Debug, Clone)]
pub struct GrepOutcome {
    /// The first files in path order (enough to fill `needed`).
    pub files: Vec<FileHits>,
    /// Files with at least one match, in all.
    pub file_count: u64,
    /// Matching lines, in all (not counted in `Files` mode, which stops at a file's
    /// first match).
    pub match_count: u64,
    /// Output lines kept, in all (content mode).
    pub line_count: u64,
    /// Some output was not kept (beyond what can be shown): the result is truncated
    /// even if the kept lines seem to fit.
    pub capped: bool,
    pub files_searched: u64,
    /// Which engine answered: `index` (the live index chose the files to read) or
    /// `scan` (every file was read).
    pub engine: &'static str,
    /// The call's time ran out before every file was searched: the outcome is what the
    /// files searched until then hold (see [`until_deadline`]).
    pub out_of_time: bool,
    /// Bytes of the files opened to be searched (their sizes), for the audit record.
    pub bytes_read: u64,
    /// `files` is shorter than `needed` for the bytes of the paths it would hold
    /// ([`collect::PATH_UNIT`]): still the first files in path order, but fewer.
    pub short: bool,
}

/// Builds the matcher; an invalid pattern is `INVALID_REGEX` with the parser's account
/// of where it went wrong.
pub fn matcher(q: &GrepQuery) -> ToolResult<RegexMatcher> {
    cost::check_pattern(&q.pattern, q.fixed_strings)?;
    let mut b = RegexMatcherBuilder::new();
    b.size_limit(cost::REGEX_SIZE_LIMIT)
        .dfa_size_limit(cost::DFA_SIZE_LIMIT)
        .case_insensitive(q.ignore_case)
        .fixed_strings(q.fixed_strings)
        .multi_line(q.multiline)
        .word(q.word)
        .dot_matches_new_line(q.multiline);
    if !q.multiline {
        b.line_terminator(Some(b'\n'));
    }
    let invalid = |e: &dyn std::fmt::Display| {
        ToolError::new(ErrorCode::InvalidRegex, format!("invalid regex {:?}: {e}", shorten(&q.pattern)))
            .with_hint(
                "escape special characters (\\( \\[ \\. \\*) or set fixed_strings to search for the text as it is",
            )
    };
    if !q.fixed_strings {
        // Parsed as the user wrote it first, so an error shows their pattern, not the
        // wrapped one the matcher builds.
        regex_syntax::ParserBuilder::new()
            .case_insensitive(q.ignore_case)
            .multi_line(q.multiline)
            .build()
            .parse(&q.pattern)
            .map_err(|e| invalid(&e))?;
    }
    b.build(&q.pattern).map_err(|e| {
        let text = e.to_string();
        if text.contains("size limit") {
            ToolError::new(
                ErrorCode::InvalidRegex,
                format!(
                    "the regex {:?} would compile to more than {} MiB",
                    shorten(&q.pattern),
                    cost::REGEX_SIZE_LIMIT >> 20
                ),
            )
            .with_hint(
                "use smaller repetition counts ({1000} nested in {1000} multiplies), fewer alternatives, or a literal with fixed_strings",
            )
        } else {
            invalid(&e)
        }
    })
}

/// A pattern as an error message may quote it: its first 200 characters.
fn shorten(p: &str) -> String {
    match p.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &p[..i]),
        None => p.to_string(),
    }
}

/// The most memory one file's search may hold for a single line (or, with `multiline`,
/// the whole file); a file needing more is skipped like an unreadable one.
const LINE_HEAP_LIMIT: usize = 64 * 1024 * 1024;

/// The most bytes a multiline search with a Unicode word boundary searches as one buffer
/// when the file has non-ASCII text (see [`slow_on_non_ascii`]).
pub const SLOW_BUFFER_MAX: u64 = 256 << 10;

/// Whether the regex's fast engine (the lazy DFA) gives up on non-ASCII text for this
/// pattern: a Unicode word boundary (`\\b`, `\\B`, `\\<`…) does, and then one search of
/// one buffer runs on a slow engine that cannot be stopped (a multiline count over one
/// 63 MB file of non-ASCII words answered TIMEOUT after 83 s). A buffer is the whole
/// file for a multiline search, else 64 KiB and at least one line.
pub fn slow_on_non_ascii(q: &GrepQuery) -> bool {
    if q.fixed_strings {
        return false;
    }
    regex_syntax::ParserBuilder::new()
        .case_insensitive(q.ignore_case)
        .multi_line(q.multiline)
        .build()
        .parse(&q.pattern)
        .is_ok_and(|h| h.properties().look_set().contains_word_unicode())
}

/// Whether searching `file` would put more than [`SLOW_BUFFER_MAX`] bytes holding
/// non-ASCII text in one buffer: any non-ASCII byte when the file is one buffer
/// (`whole`, multiline), else a line that long with one. Read in bounded pieces
/// (without moving the file's position) with the deadline checked between them; `None`
/// when stopped or unreadable.
fn slow_buffer(file: &std::fs::File, whole: bool, control: &Control) -> Option<bool> {
    long_buffer(file, whole, SLOW_BUFFER_MAX, true, control)
}

/// Whether searching `file` would put more than `limit` bytes in one buffer (the file,
/// when `whole`; else a line), counting only buffers holding non-ASCII text when
/// `non_ascii_only`. Read in bounded pieces (without moving the file's position) with
/// the deadline checked between them; `None` when stopped or unreadable.
fn long_buffer(
    file: &std::fs::File,
    whole: bool,
    limit: u64,
    non_ascii_only: bool,
    control: &Control,
) -> Option<bool> {
    if whole && !non_ascii_only {
        return file.metadata().ok().map(|m| m.len() > limit);
    }
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; 256 << 10];
    let (mut at, mut line, mut non_ascii) = (0u64, 0u64, false);
    loop {
        if control.stopped() {
            return None;
        }
        let n = match file.read_at(&mut buf, at) {
            Ok(0) => return Some(false),
            Ok(n) => n,
            Err(_) => return None,
        };
        let chunk = &buf[..n];
        at += n as u64;
        if whole {
            if !chunk.is_ascii() {
                return Some(true);
            }
            continue;
        }
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', chunk).chain(std::iter::once(n)) {
            let piece = &chunk[start.min(end)..end];
            line += piece.len() as u64;
            non_ascii |= !non_ascii_only || !piece.is_ascii();
            if non_ascii && line > limit {
                return Some(true);
            }
            if end < n {
                (line, non_ascii) = (0, false);
            }
            start = end + 1;
        }
    }
}

/// The encoding a file that is not UTF-8 is searched in, and the bytes its BOM takes:
/// UTF-16 by its BOM, else what [`crate::text::detect_legacy`] finds in its first bytes.
/// The index ([`index`]) reads files by the same rule.
pub(crate) fn text_encoding(file: &std::fs::File) -> Option<(&'static encoding_rs::Encoding, u64)> {
    use std::os::unix::fs::FileExt;
    let mut head = vec![0u8; crate::text::DETECT_MAX];
    let mut got = 0;
    while got < head.len() {
        match file.read_at(&mut head[got..], got as u64) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    head.truncate(got);
    if let Some(c) = crate::text::bom(&head) {
        return Some((c.encoding, c.bom_bytes().len() as u64));
    }
    let whole = file.metadata().is_ok_and(|m| m.len() <= got as u64);
    crate::text::detect_legacy(&head, whole).map(|e| (e, 0))
}

/// Runs a content search.
pub fn grep(
    env: &SearchEnv,
    bases: &[Base],
    opts: &WalkOptions,
    q: &GrepQuery,
) -> ToolResult<GrepOutcome> {
    // The request's shape is judged, and its memory admitted, before any work.
    cost::check_globs(&opts.globs)?;
    let matcher = matcher(q)?;
    let glob_bytes = opts.globs.iter().map(String::len).sum();
    // The kept results' paths count too, twice (the key and the path shown), up to
    // their bound (unbounded results are the command line's, which asked for all).
    let paths = match q.needed {
        0 => 0,
        n => 2 * collect::paths_bound(n) as u64,
    };
    let _admitted = cost::admit(
        cost::weight_compiled(
            q.pattern.len(),
            glob_bytes,
            threads(),
            cost::compiled_weight(&q.pattern, q.fixed_strings),
        ) + paths,
        env.control,
    )?;
    let ws = env.workspace;
    let max_size = env.max_file_size;
    let top: Mutex<TopN<FileHits>> = Mutex::new(TopN::metered_copies(q.needed, 2));
    let file_count = AtomicU64::new(0);
    let match_count = AtomicU64::new(0);
    let line_count = AtomicU64::new(0);
    let searched = AtomicU64::new(0);
    let bytes_read = AtomicU64::new(0);
    let capped = AtomicBool::new(false);
    let stop = env.control.cancel.clone();
    let deadline = env.control.deadline;
    let context = q.mode == GrepMode::Content;
    let slow = slow_on_non_ascii(q);
    let heavy = cost::heavy_buffer_max(&q.pattern, q.fixed_strings);
    // The index rules files out by what they hold and lists what ignore files leave:
    // neither helps an inverted search or one past the ignore files.
    let unindexed;
    let env = if q.invert || opts.no_ignore || !opts.types.is_empty() {
        unindexed = SearchEnv {
            index: None,
            ..*env
        };
        &unindexed
    } else {
        env
    };
    // The view first (events applied, the list refreshed if need be), then the
    // candidates from the postings that refresh left.
    let view = env.index.map(|live| live.view(env)).transpose()?;
    let candidates = env.index.map(|live| {
        live.candidates(&plan::plan(
            &q.pattern,
            q.fixed_strings,
            q.ignore_case,
            q.multiline,
        ))
    });
    let (view, candidates) = (&view, &candidates);
    // Index load and refresh are phases of the call too: past the deadline, stop here.
    env.control.check()?;

    let visitor = || {
        // Counting lines costs a pass over every byte; only content mode shows them.
        let mut builder = SearcherBuilder::new();
        builder
            .line_number(context)
            .binary_detection(BinaryDetection::quit(b'\x00'))
            .multi_line(q.multiline)
            .invert_match(q.invert)
            .before_context(if context { q.before } else { 0 })
            .after_context(if context { q.after } else { 0 })
            // One line is held whole in memory; a multi-gigabyte line must not be.
            .heap_limit(Some(LINE_HEAP_LIMIT));
        let mut searcher = builder.build();
        let matcher = matcher.clone();
        let bytes_read = &bytes_read;
        let (top, file_count, match_count, line_count, searched, capped) = (
            &top,
            &file_count,
            &match_count,
            &line_count,
            &searched,
            &capped,
        );
        let stop = stop.clone();
        let mut skipped = Tally::new(searched);
        move |found: &Found| {
            // Listed, unwritten since indexed, and ruled out: it would open (it did when
            // indexed, and nothing touched it since), so it counts as searched, unread.
            if let (Some(l), Some(c)) = (found.listed, candidates)
                && !c.may_match(l)
            {
                // A method, so the closure takes the whole tally (and its Drop) along.
                skipped.one();
                return !stop.is_cancelled();
            }
            let record = match q.mode {
                GrepMode::Files => Record::First,
                GrepMode::Count => Record::Count,
                GrepMode::Content => {
                    let wanted = crate::error::lock(top).wants(&found.key());
                    if wanted && q.file_units {
                        Record::Lines(PER_FILE_LINES)
                    } else if wanted {
                        Record::Lines(if q.needed == 0 { usize::MAX } else { q.needed })
                    } else {
                        Record::Count
                    }
                }
            };
            let file = match ws.open_found(found.root, found.rel, false) {
                Ok(f) => f,
                Err(e) => {
                    if walker::is_too_long(&e) {
                        env.control
                            .warn(walker::too_long(ws, found.root, found.rel));
                    }
                    return true;
                }
            };
            let n = searched.fetch_add(1, Ordering::Relaxed) + 1;
            let size = file.metadata().map_or(0, |m| m.len());
            // A file over the size limit is not searched, in every mode alike: a
            // files_with_matches search stops at its first match and would never read far
            // enough to find it over the limit, so it is judged by its size first (one
            // that grows past the limit while read is caught by the guarded reader below).
            if max_size > 0 && size > max_size {
                env.control
                    .warn(over_size(&ws.shown_name(&found.ws_path(ws)), max_size));
                return !stop.is_cancelled();
            }
            // The index knows this very content holds no match: counted, not read.
            if let (Some(v), Some(c)) = (view, candidates)
                && index::rules_out(&v.files, c, found, &file)
            {
                return !stop.is_cancelled();
            }
            // What the audit record says the call read: at most the file's size (a
            // files_with_matches search may stop sooner).
            bytes_read.fetch_add(size, Ordering::Relaxed);
            // A file big enough to hold a long line (or, multiline, held whole) first
            // takes what its search may hold from the pool all searches share.
            // One buffer the fast engine gives up on is searched by a slow one that
            // cannot be stopped: past 1 MiB of non-ASCII text it is not searched, and
            // the result says so and how to search it.
            if slow && size > SLOW_BUFFER_MAX {
                match slow_buffer(&file, q.multiline, env.control) {
                    None => return !env.control.stopped(),
                    Some(true) => {
                        env.control.warn(format!(
                            "{}: not searched: a Unicode word boundary (\\b) over {} of non-ASCII text runs on a \
slow engine that cannot be stopped at the deadline (at most {} KiB are searched so); use (?-u:\\b) for ASCII word \
boundaries, or search a smaller file",
                            ws.shown_name(&found.ws_path(ws)),
                            if q.multiline {
                                format!("a {} KiB file (multiline holds it whole)", size >> 10)
                            } else {
                                "a line".to_string()
                            },
                            SLOW_BUFFER_MAX >> 10
                        ));
                        return true;
                    }
                    Some(false) => {}
                }
            }
            // A pattern whose states explode runs on an engine that cannot be stopped
            // once the fast one gives up: a buffer too long for it is not searched
            // (round 24), and the answer says so and how to search it.
            if let Some(max) = heavy
                && size > max
            {
                match long_buffer(&file, q.multiline, max, false, env.control) {
                    None => return !env.control.stopped(),
                    Some(true) => {
                        env.control.warn(format!(
                            "{}: not searched: the pattern's classes and counted repetitions over {} would run on \
a slow engine that cannot be stopped at the deadline (with this pattern at most {} KiB are searched at once); use \
smaller counts or + and *, a literal part of the text, or search a smaller file",
                            ws.shown_name(&found.ws_path(ws)),
                            if q.multiline {
                                format!("a {} KiB file (multiline holds it whole)", size >> 10)
                            } else {
                                "a line this long".to_string()
                            },
                            max >> 10
                        ));
                        return true;
                    }
                    Some(false) => {}
                }
            }
            // The searcher's buffer grows by doubling, up to the heap limit.
            let hold = size.saturating_mul(2).min(LINE_HEAP_LIMIT as u64);
            // Waited for a moment only: a search does not wait behind one big file while
            // the files after it could answer (round 24: five calls holding the pool
            // made a tree's grep answer TIMEOUT with nothing, though its small files
            // matched). Passed over, the answer says so.
            let pooled = if hold > cost::BIG_LINE_FROM {
                let until = Some(Instant::now() + cost::LINE_WAIT);
                match cost::LINES.take_within(hold, cost::LINE_POOL, until, env.control) {
                    Ok(p) => Some(p),
                    Err(e) if e.code == ErrorCode::Timeout && !env.control.stopped() => {
                        env.control.warn(format!(
                            "{}: not searched: its long lines need {} MiB of the {} MiB that searches of long lines \
share, and other searches hold it now; search it again alone in a moment, or read it in parts with read_file",
                            ws.shown_name(&found.ws_path(ws)),
                            hold.div_ceil(1 << 20),
                            cost::LINE_POOL >> 20
                        ));
                        return true;
                    }
                    Err(_) => return false,
                }
            } else {
                None
            };
            let mut sink = FileSink::new(&matcher, record, env.max_columns);
            let guarded = |at: u64| {
                use std::io::{Seek, SeekFrom};
                (&file).seek(SeekFrom::Start(at))?;
                Ok::<_, io::Error>(Guarded {
                    inner: &file,
                    read: 0,
                    limit: max_size,
                    stop: &stop,
                    deadline,
                })
            };
            // UTF-8 is searched as it is read (checked on the way); a file that is not
            // is searched again decoded (crate::text): UTF-16 with a BOM, or the legacy
            // encoding its first bytes show. One that decodes in none is searched as
            // bytes, as ripgrep would.
            let mut encoding = None;
            let mut result = guarded(0).and_then(|r| {
                searcher.search_reader(&matcher, crate::text::Utf8Check::new(r), &mut sink)
            });
            if result.as_ref().is_err_and(crate::text::is_not_utf8) {
                if let Some((enc, skip)) = text_encoding(&file) {
                    sink = FileSink::new(&matcher, record, env.max_columns);
                    result = guarded(skip).and_then(|r| {
                        searcher.search_reader(
                            &matcher,
                            crate::text::DecodeReader::new(r, enc),
                            &mut sink,
                        )
                    });
                    encoding = Some(enc.name().to_ascii_lowercase());
                }
                if encoding.is_none() || result.as_ref().is_err_and(crate::text::is_not_utf8) {
                    sink = FileSink::new(&matcher, record, env.max_columns);
                    result =
                        guarded(0).and_then(|r| searcher.search_reader(&matcher, r, &mut sink));
                    encoding = None;
                }
            }
            if pooled.is_some() {
                // The searcher keeps its buffer at its largest: a fresh one gives back
                // what the long line took, with the pool's share.
                searcher = builder.build();
                drop(pooled);
            }
            // A file over the size limit is passed over, and the answer says so: a
            // search with no match must not hide that the file holding it was not read.
            if let Err(e) = &result
                && e.to_string().contains("search size limit")
            {
                env.control
                    .warn(over_size(&ws.shown_name(&found.ws_path(ws)), max_size));
            }
            if let Err(e) = &result
                && e.to_string().contains("allocation limit")
            {
                // With context asked, the lines held around a match may be what passed
                // the limit, not one line: the warning says both and the way out of each.
                let context = context && q.before + q.after > 0;
                env.control.warn(format!(
                    "{}: not searched: {} over {} MiB (the most a search holds in memory{}); {}\
read its bytes in parts with read_file, encoding base64 (offset and limit count bytes)",
                    ws.shown_name(&found.ws_path(ws)),
                    if context {
                        "a line of it, or the lines of context asked around a match, come to"
                    } else {
                        "it has a line"
                    },
                    LINE_HEAP_LIMIT >> 20,
                    if q.multiline {
                        ", and a multiline search holds the whole file"
                    } else {
                        ""
                    },
                    if context {
                        "ask for less context (context, context_before, context_after), or "
                    } else {
                        ""
                    }
                ));
            }
            if n.is_multiple_of(1024) {
                env.control.progress(Progress {
                    files_searched: n,
                    matches: match_count.load(Ordering::Relaxed),
                });
            }
            if result.is_err() || sink.binary || sink.match_count == 0 {
                // unreadable, too large, stopped, binary, or no match
                return !stop.is_cancelled();
            }
            if sink.capped || (q.mode == GrepMode::Content && record == Record::Count) {
                capped.store(true, Ordering::Relaxed);
            }
            file_count.fetch_add(1, Ordering::Relaxed);
            match_count.fetch_add(sink.match_count, Ordering::Relaxed);
            line_count.fetch_add(sink.lines.len() as u64, Ordering::Relaxed);
            let weight = if q.mode == GrepMode::Content && !q.file_units {
                sink.lines.len()
            } else {
                1
            };
            let hits = FileHits {
                path: ws.display(&found.ws_path(ws)),
                count: sink.match_count,
                lines: sink.lines,
                encoding,
            };
            crate::error::lock(top).insert(found.key(), weight, hits);
            true
        }
    };
    let out_of_time = match view
        .as_ref()
        .and_then(|v| live::walk_listed(env, v, bases, opts, visitor))
    {
        Some(done) => {
            let out_of_time = until_deadline(done)?;
            if let Some(live) = env.index
                && !out_of_time
            {
                live.count_listed();
            }
            out_of_time
        }
        None => until_deadline(walk(env, bases, opts, visitor))?,
    };
    let top = top
        .into_inner()
        .map_err(|_| ToolError::new(ErrorCode::IoError, "a search thread panicked"))?;
    let short = top.short();
    let files = top.into_sorted().map(|(_, v)| v).collect();
    Ok(GrepOutcome {
        files,
        file_count: file_count.into_inner(),
        match_count: match_count.into_inner(),
        line_count: line_count.into_inner(),
        capped: capped.into_inner(),
        files_searched: searched.into_inner(),
        engine: if view.is_some() { "index" } else { "scan" },
        out_of_time,
        short,
        bytes_read: bytes_read.into_inner(),
    })
}

/// A count a search thread keeps to itself and adds to the shared one when it ends.
/// Each of the kernel tree's 78 000 ruled-out files was counted on one atomic shared by
/// the threads: an indexed search with no candidate took 2.7 ms through MCP, 1.5 ms with
/// a count per thread (side by side, same index).
struct Tally<'a> {
    n: u64,
    to: &'a AtomicU64,
}

impl<'a> Tally<'a> {
    fn new(to: &'a AtomicU64) -> Tally<'a> {
        Tally { n: 0, to }
    }

    fn one(&mut self) {
        self.n += 1;
    }
}

impl Drop for Tally<'_> {
    fn drop(&mut self) {
        self.to.fetch_add(self.n, Ordering::Relaxed);
    }
}

/// A reader that stops a search when the call is cancelled or out of time, and refuses
/// files larger than the search size limit (0: none).
struct Guarded<'a, R> {
    inner: R,
    read: u64,
    limit: u64,
    stop: &'a crate::control::CancelToken,
    deadline: Option<Instant>,
}

impl<R: Read> Read for Guarded<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.stop.is_cancelled() || self.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(io::Error::other("search stopped"));
        }
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        if self.limit > 0 && self.read > self.limit {
            return Err(io::Error::other("file over the search size limit"));
        }
        Ok(n)
    }
}

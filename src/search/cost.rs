//! What a search may cost, decided before any work starts.
//!
//! A request's memory must follow its size limits, not its shape: a 4 MB glob of
//! 300 000 brace alternatives, a 3 MB literal or a nested repetition `(a{1000}){1000}`
//! each cost hundreds of megabytes to compile, and eight at once gigabytes. So:
//! - **shape caps** ([`check_pattern`], [`check_globs`]): pattern length, alternation
//!   branches, glob length, count and brace alternatives, each refused with its own
//!   error code and a hint before anything is parsed or compiled;
//! - **compile caps** ([`REGEX_SIZE_LIMIT`], [`DFA_SIZE_LIMIT`]): what the regex engine may
//!   build (ripgrep's defaults are 100 MB and 1 GB per thread);
//! - **admission** ([`admit`]): every search takes a weight, its estimated working
//!   memory, from one process-wide budget, and waits (until its deadline) while the
//!   searches running hold it;
//! - **big lines** ([`LinePool`]): a file whose search may hold a long line (or, with
//!   `multiline`, the file) in memory takes that much from a process-wide pool first,
//!   so concurrent searches of huge lines queue instead of adding up.

use crate::control::Control;
use crate::error::{ErrorCode, ToolError, ToolResult};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// The longest pattern (regex or literal) a search takes. A search for a whole
/// function's text fits; a multi-megabyte pattern is a request for memory, not a search.
pub const MAX_PATTERN_BYTES: usize = 64 * 1024;

/// The most alternation branches (`a|b|c`) in one regex.
pub const MAX_ALTERNATIVES: usize = 4096;

/// The longest single glob (a path is at most 4096 bytes).
pub const MAX_GLOB_BYTES: usize = 4096;

/// The most globs one request gives (include and exclude lists together).
pub const MAX_GLOBS: usize = 256;

/// All the globs of one request, in bytes.
pub const MAX_GLOBS_TOTAL_BYTES: usize = 64 * 1024;

/// The most `{a,b}` alternatives in one glob (globset compiles each into the glob's
/// regex).
pub const MAX_BRACE_ALTERNATIVES: usize = 1024;

/// The compiled regex's size limit (grep-regex's `size_limit`): a nested repetition
/// such as `(a{1000}){1000}` is refused when compiling it would pass this.
pub const REGEX_SIZE_LIMIT: usize = 16 << 20;

/// The lazy DFA's cache per search thread (grep-regex's `dfa_size_limit`; the regex
/// crate's own default is 2 MiB); past it the cache is cleared and refilled, or a slower
/// engine takes over: slower, never larger.
pub const DFA_SIZE_LIMIT: usize = 4 << 20;

/// The memory all searches running at once may be admitted with, by their estimates.
pub const SEARCH_BUDGET: u64 = 512 << 20;

/// Lines (or, multiline, whole files) over this many bytes may be held in memory only
/// with a share of the [`LinePool`]; smaller ones cost a thread's 64 KiB buffer or so.
pub const BIG_LINE_FROM: u64 = 1 << 20;

/// The memory all searches at once may hold for long lines.
pub const LINE_POOL: u64 = 256 << 20;

/// The longest a search waits for the [`LINE_POOL`] for one file before it passes over
/// that file (and says so) and goes on with the others.
pub const LINE_WAIT: Duration = Duration::from_secs(1);

fn too_big(code: ErrorCode, what: String, hint: &str) -> ToolError {
    ToolError::new(code, what).with_hint(hint.to_string())
}

/// Refuses a pattern whose size or shape would cost more than a search may: over
/// [`MAX_PATTERN_BYTES`] (`INVALID_ARGUMENT`), or a regex with more than
/// [`MAX_ALTERNATIVES`] branches (`INVALID_REGEX`). Checked before it is parsed.
pub fn check_pattern(pattern: &str, fixed_strings: bool) -> ToolResult<()> {
    if pattern.len() > MAX_PATTERN_BYTES {
        return Err(too_big(
            ErrorCode::InvalidArgument,
            format!(
                "the pattern is {} bytes; patterns are at most {MAX_PATTERN_BYTES} bytes",
                pattern.len()
            ),
            "search for a distinctive part of the text (one line of it), then read the file around the match",
        ));
    }
    if fixed_strings {
        return Ok(());
    }
    // The parse is cheap next to compiling (and bounded by the length above); a
    // pattern that does not parse is reported by the matcher with its position.
    let Ok(ast) = regex_syntax::ast::parse::Parser::new().parse(pattern) else {
        return Ok(());
    };
    let weight = regex_weight(&ast);
    if weight > MAX_REGEX_WEIGHT {
        return Err(too_big(
            ErrorCode::InvalidRegex,
            format!(
                "the regex would compile to about {weight} states (each class or literal times the \
                 repetitions around it); at most {MAX_REGEX_WEIGHT} are allowed"
            ),
            "use + or * instead of large counted repetitions ({n} copies of \\w each compile a Unicode class), \
             or search for a literal part and read around the matches",
        ));
    }
    // Even a buffer of 64 KiB (the searcher's least) on the slow engine must stay
    // within [`HEAVY_WORK`]: past this many positions it would not.
    let positions = class_positions(&ast);
    if positions > MAX_CLASS_POSITIONS {
        return Err(too_big(
            ErrorCode::InvalidRegex,
            format!(
                "the regex has {positions} class positions (each class or . times the counted repetitions \
                 around it); at most {MAX_CLASS_POSITIONS} are allowed"
            ),
            "use + or * instead of large counted repetitions (.{3000} is 3 000 positions, .* one), \
             or search for a literal part and read around the matches",
        ));
    }
    let branches = alternatives(&ast);
    if branches > MAX_ALTERNATIVES {
        return Err(too_big(
            ErrorCode::InvalidRegex,
            format!(
                "the regex has {branches} alternatives (a|b|…); at most {MAX_ALTERNATIVES} are allowed"
            ),
            "search for what the alternatives have in common, or split the search into several smaller ones",
        ));
    }
    Ok(())
}

/// The most a regex's estimated compiled size ([`regex_weight`]) may be. Ordinary
/// patterns weigh hundreds to tens of thousands (`\w+` 300, `(?:\w{50}){4}` 60 000); the
/// attacker pass's 4 000 alternatives of `\w{N}x\p{Lu}` (under every other cap) weigh
/// about 30 million, and each took 2-3 s and ~125 MB to be refused at the compile limit.
pub const MAX_REGEX_WEIGHT: u64 = 1_000_000;

/// A regex's compiled size, estimated from its syntax before anything is built: a
/// Unicode or Perl class weighs 300 (the UTF-8 automaton of `\w` is hundreds of states),
/// `.` 10, a literal 1, and a counted repetition multiplies what it repeats by its count
/// (the compiler makes that many copies). Saturating; the parser's nesting limit bounds
/// the recursion.
pub fn regex_weight(ast: &regex_syntax::ast::Ast) -> u64 {
    use regex_syntax::ast::{Ast, RepetitionKind, RepetitionRange};
    match ast {
        Ast::Empty(_) | Ast::Flags(_) | Ast::Assertion(_) => 0,
        Ast::Literal(_) => 1,
        Ast::Dot(_) => 10,
        Ast::ClassUnicode(_) | Ast::ClassPerl(_) => 300,
        Ast::ClassBracketed(c) => 1 + set_weight(&c.kind),
        Ast::Repetition(r) => {
            let times = match &r.op.kind {
                RepetitionKind::ZeroOrOne | RepetitionKind::ZeroOrMore => 1,
                RepetitionKind::OneOrMore => 2,
                RepetitionKind::Range(RepetitionRange::Exactly(n)) => u64::from(*n),
                RepetitionKind::Range(RepetitionRange::AtLeast(n)) => u64::from(*n) + 1,
                RepetitionKind::Range(RepetitionRange::Bounded(_, m)) => u64::from(*m),
            };
            regex_weight(&r.ast).saturating_mul(times.max(1))
        }
        Ast::Group(g) => regex_weight(&g.ast),
        Ast::Alternation(a) => a
            .asts
            .iter()
            .fold(0u64, |n, x| n.saturating_add(regex_weight(x))),
        Ast::Concat(c) => c
            .asts
            .iter()
            .fold(0u64, |n, x| n.saturating_add(regex_weight(x))),
    }
}

/// The most work one buffer's search may take on the slowest engine, counted as the
/// pattern's [`class_positions`] times the buffer's bytes. The regex crate's lazy DFA
/// gives up on patterns whose states explode (`[a-m].{3000}[\x00-\x08]`,
/// `a[ab]{3000}c`) and hands the buffer to an engine that takes time in proportion to
/// that product and cannot be stopped before it ends (5-20 ns per unit measured: a
/// 4 MB multiline file took 60 s of CPU, a 2 MB line more than 100 s, each call answered
/// `TIMEOUT` with its thread still running and its memory held, so 33 of them kept every
/// search out for minutes, round 24). 2^28 units are a second or a few; a buffer over
/// it is not searched and the answer says so (see `search::heavy_buffer`).
pub const HEAVY_WORK: u64 = 1 << 28;

/// The most [`class_positions`] a regex may have: a 64 KiB buffer (the searcher's
/// least) times this is [`HEAVY_WORK`].
pub const MAX_CLASS_POSITIONS: u64 = HEAVY_WORK / (64 << 10);

/// How many positions of a regex can be alive at once in the slow engine, per byte: each
/// class, `.` or alternation counts one, and so does a literal under a counted
/// repetition, times the counted repetitions around it (a literal outside one is matched
/// as a string, never a set of positions). `\w+` and `foo.*bar` count 1,
/// `\d{4}-\d{2}-\d{2}` 8, `[a-m].{3000}` 3 001, `a{2999}b` 2 999 (round 25: counted as
/// none, it ran for minutes over long runs of `a`). Saturating.
pub fn class_positions(ast: &regex_syntax::ast::Ast) -> u64 {
    positions(ast, false)
}

/// [`class_positions`] of `ast`, `repeated` when a counted repetition is around it.
fn positions(ast: &regex_syntax::ast::Ast, repeated: bool) -> u64 {
    use regex_syntax::ast::{Ast, RepetitionKind, RepetitionRange};
    match ast {
        Ast::Empty(_) | Ast::Flags(_) | Ast::Assertion(_) => 0,
        Ast::Literal(_) => u64::from(repeated),
        Ast::Dot(_) | Ast::ClassUnicode(_) | Ast::ClassPerl(_) | Ast::ClassBracketed(_) => 1,
        Ast::Repetition(r) => {
            let times = match &r.op.kind {
                RepetitionKind::ZeroOrOne
                | RepetitionKind::ZeroOrMore
                | RepetitionKind::OneOrMore => 1,
                RepetitionKind::Range(RepetitionRange::Exactly(n))
                | RepetitionKind::Range(RepetitionRange::AtLeast(n))
                | RepetitionKind::Range(RepetitionRange::Bounded(_, n)) => u64::from(*n),
            };
            positions(&r.ast, repeated || times > 1).saturating_mul(times.max(1))
        }
        Ast::Group(g) => positions(&g.ast, repeated),
        Ast::Alternation(a) => a
            .asts
            .iter()
            .fold(0u64, |n, x| n.saturating_add(positions(x, repeated)))
            .max(1),
        Ast::Concat(c) => c
            .asts
            .iter()
            .fold(0u64, |n, x| n.saturating_add(positions(x, repeated))),
    }
}

/// The longest buffer (a line, or with `multiline` a whole file) a search for `pattern`
/// may give the regex engine at once within [`HEAVY_WORK`]; `None` when any buffer the
/// search holds is within it (every pattern of at most 4 positions: the heap limit caps
/// buffers at 64 MiB).
pub fn heavy_buffer_max(pattern: &str, fixed_strings: bool) -> Option<u64> {
    if fixed_strings {
        return None;
    }
    let ast = regex_syntax::ast::parse::Parser::new()
        .parse(pattern)
        .ok()?;
    let positions = class_positions(&ast);
    (positions > 4).then(|| HEAVY_WORK / positions)
}

fn set_weight(set: &regex_syntax::ast::ClassSet) -> u64 {
    use regex_syntax::ast::ClassSet;
    match set {
        ClassSet::Item(i) => item_weight(i),
        ClassSet::BinaryOp(op) => set_weight(&op.lhs).saturating_add(set_weight(&op.rhs)),
    }
}

fn item_weight(item: &regex_syntax::ast::ClassSetItem) -> u64 {
    use regex_syntax::ast::ClassSetItem;
    match item {
        ClassSetItem::Empty(_) | ClassSetItem::Literal(_) | ClassSetItem::Range(_) => 1,
        ClassSetItem::Ascii(_) => 1,
        ClassSetItem::Unicode(_) | ClassSetItem::Perl(_) => 300,
        ClassSetItem::Bracketed(b) => set_weight(&b.kind),
        ClassSetItem::Union(u) => u
            .items
            .iter()
            .fold(0u64, |n, i| n.saturating_add(item_weight(i))),
    }
}

/// Alternation branches in a regex, nested ones included.
fn alternatives(ast: &regex_syntax::ast::Ast) -> usize {
    use regex_syntax::ast::Ast;
    // Iterative: the parser's nesting limit bounds depth, but a loop needs no reasoning.
    let mut stack = vec![ast];
    let mut n = 0usize;
    while let Some(a) = stack.pop() {
        match a {
            Ast::Alternation(alt) => {
                n += alt.asts.len();
                stack.extend(alt.asts.iter());
            }
            Ast::Concat(c) => stack.extend(c.asts.iter()),
            Ast::Group(g) => stack.push(&g.ast),
            Ast::Repetition(r) => stack.push(&r.ast),
            _ => {}
        }
    }
    n
}

/// Refuses globs whose number, length or brace alternatives pass the caps above
/// (`INVALID_GLOB`). Checked before any is compiled.
pub fn check_globs<S: AsRef<str>>(globs: &[S]) -> ToolResult<()> {
    if globs.len() > MAX_GLOBS {
        return Err(too_big(
            ErrorCode::InvalidGlob,
            format!(
                "{} globs given; at most {MAX_GLOBS} are allowed",
                globs.len()
            ),
            "use fewer, broader globs (src/**, *.{rs,toml}) or a narrower path",
        ));
    }
    let total: usize = globs.iter().map(|g| g.as_ref().len()).sum();
    if total > MAX_GLOBS_TOTAL_BYTES {
        return Err(too_big(
            ErrorCode::InvalidGlob,
            format!("the globs take {total} bytes; at most {MAX_GLOBS_TOTAL_BYTES} are allowed"),
            "use fewer, broader globs (src/**, *.{rs,toml}) or a narrower path",
        ));
    }
    for g in globs {
        check_glob(g.as_ref())?;
    }
    Ok(())
}

/// One glob's caps: [`MAX_GLOB_BYTES`] and [`MAX_BRACE_ALTERNATIVES`].
pub fn check_glob(g: &str) -> ToolResult<()> {
    if g.len() > MAX_GLOB_BYTES {
        return Err(too_big(
            ErrorCode::InvalidGlob,
            format!(
                "a glob of {} bytes; globs are at most {MAX_GLOB_BYTES} bytes",
                g.len()
            ),
            "use a shorter glob: wildcards (*, **, ?) rather than spelled-out names",
        ));
    }
    // Commas inside braces, and the braces themselves: escaped ones counted too, which
    // only errs towards refusing a glob that is absurd anyway.
    let (mut depth, mut alts) = (0usize, 0usize);
    for b in g.bytes() {
        match b {
            b'{' => {
                depth += 1;
                alts += 1;
            }
            b'}' => depth = depth.saturating_sub(1),
            b',' if depth > 0 => alts += 1,
            _ => {}
        }
    }
    if alts > MAX_BRACE_ALTERNATIVES {
        return Err(too_big(
            ErrorCode::InvalidGlob,
            format!(
                "a glob with {alts} {{a,b}} alternatives; at most {MAX_BRACE_ALTERNATIVES} are allowed"
            ),
            "use a wildcard for what the alternatives share (*.{ts,tsx} rather than every name), or several calls",
        ));
    }
    Ok(())
}

/// A weighted semaphore over a fixed amount of memory: [`Budget::take`] waits until
/// the weight fits, the returned [`Permit`] gives it back when dropped.
pub struct Budget {
    total: u64,
    used: Mutex<u64>,
    freed: Condvar,
}

impl Budget {
    pub const fn new(total: u64) -> Budget {
        Budget {
            total,
            used: Mutex::new(0),
            freed: Condvar::new(),
        }
    }

    /// Takes `weight` (at most the whole budget: one request may always run alone),
    /// waiting while it does not fit. Fails with `CANCELLED` or `TIMEOUT` when the call
    /// is stopped while it waits.
    pub fn take(&self, weight: u64, control: &Control) -> ToolResult<Permit<'_>> {
        let weight = weight.min(self.total);
        let mut used = crate::error::lock(&self.used);
        while *used + weight > self.total {
            control.check()?;
            // Woken by a release; a short timeout also notices a cancel or deadline.
            let wait = control
                .deadline
                .map_or(Duration::from_millis(50), |d| {
                    d.saturating_duration_since(Instant::now())
                        .min(Duration::from_millis(50))
                })
                .max(Duration::from_millis(1));
            used = self
                .freed
                .wait_timeout(used, wait)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
        *used += weight;
        Ok(Permit {
            budget: self,
            weight,
            mine: None,
        })
    }

    /// Takes `weight` as [`Budget::take`] does, but only while what is held stays within
    /// `ceiling` (at most the total; a weight over it is cut to it, so one request may
    /// still run alone), and waits no later than `until` (then `TIMEOUT`).
    pub fn take_within(
        &self,
        weight: u64,
        ceiling: u64,
        until: Option<Instant>,
        control: &Control,
    ) -> ToolResult<Permit<'_>> {
        let ceiling = ceiling.min(self.total);
        let weight = weight.min(ceiling);
        let mut used = crate::error::lock(&self.used);
        while *used + weight > ceiling {
            control.check()?;
            let now = Instant::now();
            let end = match (control.deadline, until) {
                (Some(d), Some(u)) => Some(d.min(u)),
                (d, u) => d.or(u),
            };
            if end.is_some_and(|e| now >= e) {
                return Err(control.timeout_error());
            }
            let wait = end
                .map_or(Duration::from_millis(50), |e| {
                    e.saturating_duration_since(now)
                        .min(Duration::from_millis(50))
                })
                .max(Duration::from_millis(1));
            used = self
                .freed
                .wait_timeout(used, wait)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
        *used += weight;
        Ok(Permit {
            budget: self,
            weight,
            mine: None,
        })
    }

    /// Takes `weight` only if it fits now, without waiting: for a call that holds more
    /// as it goes and can do with less (a collector that keeps fewer results).
    pub fn try_take(&self, weight: u64) -> Option<Permit<'_>> {
        let mut used = crate::error::lock(&self.used);
        if *used + weight > self.total {
            return None;
        }
        *used += weight;
        Some(Permit {
            budget: self,
            weight,
            mine: None,
        })
    }

    /// What is held now (tests).
    pub fn used(&self) -> u64 {
        *crate::error::lock(&self.used)
    }
}

/// A share of a [`Budget`], given back on drop.
pub struct Permit<'b> {
    budget: &'b Budget,
    weight: u64,
    /// The call's own count of what it holds, when the share is a file hold.
    mine: Option<std::sync::Arc<crate::control::Spent>>,
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        if let Some(m) = &self.mine {
            m.held
                .fetch_sub(self.weight, std::sync::atomic::Ordering::SeqCst);
        }
        let mut used = crate::error::lock(&self.budget.used);
        *used = used.saturating_sub(self.weight);
        drop(used);
        self.budget.freed.notify_all();
    }
}

/// The budget searches are admitted against.
pub static SEARCHES: Budget = Budget::new(SEARCH_BUDGET);

/// The pool long lines are held from.
pub static LINES: Budget = Budget::new(LINE_POOL);

/// What a search with this shape is estimated to hold: its pattern and globs compiled
/// (tens of bytes per byte given), its regex compiled ([`compiled_weight`]), and each
/// thread's lazy DFA cache and buffer. On two cores a plain grep weighs ~20 MiB (25 at
/// once before one waits), on twelve ~60 MiB.
pub fn weight(pattern_bytes: usize, glob_bytes: usize, threads: usize) -> u64 {
    weight_compiled(
        pattern_bytes,
        glob_bytes,
        threads,
        REGEX_SIZE_LIMIT as u64 / 2,
    )
}

/// [`weight`] with what the regex compiles to given (`compiled`).
pub fn weight_compiled(
    pattern_bytes: usize,
    glob_bytes: usize,
    threads: usize,
    compiled: u64,
) -> u64 {
    let per_thread = DFA_SIZE_LIMIT as u64 + (256 << 10);
    (2 << 20)
        + 64 * (pattern_bytes as u64 + glob_bytes as u64)
        + compiled
        + threads as u64 * per_thread
}

/// What compiling a grep pattern is estimated to hold: half the regex size limit, or
/// for a heavy regex its forward and reverse automata (the regex engine builds both),
/// each about 100 bytes per unit of [`regex_weight`] up to [`REGEX_SIZE_LIMIT`]
/// (round 24: greps of `[a-m][\w\s]{300}[\x00-\x08]`, weight ~180 000, compiled near
/// the limit, and eight at once peaked at 287 MB where their weights said 160).
pub fn compiled_weight(pattern: &str, fixed_strings: bool) -> u64 {
    let floor = REGEX_SIZE_LIMIT as u64 / 2;
    if fixed_strings {
        return floor;
    }
    let Ok(ast) = regex_syntax::ast::parse::Parser::new().parse(pattern) else {
        return floor;
    };
    let one = regex_weight(&ast)
        .saturating_mul(100)
        .min(REGEX_SIZE_LIMIT as u64);
    one.saturating_mul(2).max(floor)
}

/// Admits a search of this weight against [`SEARCHES`], waiting for room until the
/// call's deadline.
pub fn admit(weight: u64, control: &Control) -> ToolResult<Permit<'static>> {
    SEARCHES.take(weight, control)
}

/// Of the shared budget, what whole files held by the file tools (edit, write_file,
/// apply_patch, move, undo, read_file, read_files) may take together: the rest,
/// [`FILE_RESERVE`], stays for searches and small calls, so a normal request answers
/// while big files hold the budget.
pub const FILE_CEILING: u64 = SEARCH_BUDGET - FILE_RESERVE;

/// What big file holds leave free of the shared budget.
pub const FILE_RESERVE: u64 = 128 << 20;

/// A hold of at most this much is small: it may use the whole budget, reserve included.
pub const SMALL_HOLD: u64 = 8 << 20;

/// The longest a file tool waits for room before it is refused (its own deadline, when
/// sooner, ends the wait first). Without a deadline (the command line, the library) a
/// call that holds part of the budget and waits for more (a patch of several big files)
/// would otherwise wait forever for another such call.
pub const HOLD_WAIT: Duration = Duration::from_secs(30);

/// The most file tools waiting for room at once; one more is refused at once. A waiter
/// keeps one of the server's call threads (32, `ferret serve`): a flood of big edits
/// queues this many and is refused past them, and a small call still finds a thread.
pub const MAX_HOLD_WAITERS: usize = 8;

/// File tools waiting for room now.
static HOLD_WAITERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// What each file tool holds at its peak, as copies of the file's size (measured: a
/// dry-run `edit` of a 60 MB file peaked at 180 MB over the idle server). One place
/// for the weights; the tools name these, never a number.
pub mod copies {
    /// `edit`: the bytes read, the new text, the new bytes (the diff is bounded by
    /// `tools::DIFF_MAX_BYTES`).
    pub const EDIT: u64 = 3;
    /// `apply_patch`, per updated file beyond the bytes read: the text after each hunk
    /// (built from the one before it) and the new bytes.
    pub const PATCH_UPDATE: u64 = 2;
    /// A whole file read to be changed, compared or backed up (`write_file`'s old
    /// content, `move`'s replaced file, `undo`'s current file and its backup).
    pub const READ: u64 = 1;
    /// `write_file`'s content (and the bytes it is encoded to over a text file), and the
    /// old file it replaces (and the old text kept for the diff).
    pub const WRITE: u64 = 2;
    /// `read_file` and each file of `read_files`: the bytes read, the text, the
    /// numbered lines rendered from it.
    pub const READ_FILE: u64 = 3;
    /// An image `read_file` sends as an image, held until its answer is built: the bytes
    /// read, the base64 (4/3 of them) in the result, its copy in the content block and
    /// the answer serialized (twice over HTTP: measured, then sent).
    pub const IMAGE: u64 = 8;
    /// What a forgiving (line by line) match keeps per line of the file: a span of three
    /// offsets. A file of 64 MiB of empty lines is 64 million lines: 1.5 GiB.
    pub const PER_LINE: u64 = 24;
    /// Copies of its decoded text (UTF-8, measured before the file is read: see
    /// `text::measure`) a change of a file in another encoding (a BOM, UTF-16, a legacy
    /// one) holds beside its bytes: the text, the changed text, and the splice's working
    /// copy (its lines, the hunks encoded, the read-back compared in blocks). A 34 MB
    /// ibm866 file is 66 MB of text: one dry-run edit peaked at 474 MB when charged 102
    /// MiB by its bytes; with the splice's copies gone it peaks at 263 MB, charged 318.
    pub const DECODED_EDIT: u64 = 3;
    /// Copies of its decoded text a whole read (or a diff, or a write over it in its
    /// encoding) holds of a file in another encoding: the text and what is made of it.
    pub const DECODED: u64 = 2;
    /// What re-encoding a changed file keeps per line of it beside the match's spans:
    /// each line's byte range, its text and the new text's (16 bytes each) and the diff.
    pub const SPLICE_PER_LINE: u64 = 64;
    /// What a parsed JSON value holds (a `serde_json::Value` in its array or map, the
    /// vector's spare room, a map entry's key): the attacker's notebook of 2.5 million
    /// numbers took 574 MB for one edit holding three parses of it, ~75 bytes a value.
    pub const PER_JSON_VALUE: u64 = 80;
}

/// A file tool waiting for something other than memory (another call's lock on the
/// file) while it holds content: counted among the [`MAX_HOLD_WAITERS`] as if it waited
/// for room, so a flood of calls queued on one file is refused at once past them instead
/// of each keeping its content. The slot is given back when dropped.
pub struct WaitSlot(());

impl Drop for WaitSlot {
    fn drop(&mut self) {
        HOLD_WAITERS.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Takes one of the [`MAX_HOLD_WAITERS`] slots for a call about to wait on a file's lock
/// holding `held` bytes of the budget (`what` names the file), or refuses it at once with
/// `TIMEOUT` ("the server is busy", nothing changed) when they are all taken.
pub fn wait_slot(held: u64, what: &str, control: &Control) -> ToolResult<WaitSlot> {
    use std::sync::atomic::Ordering;
    if HOLD_WAITERS.fetch_add(1, Ordering::SeqCst) >= MAX_HOLD_WAITERS {
        HOLD_WAITERS.fetch_sub(1, Ordering::SeqCst);
        return Err(busy(held, what, control, true));
    }
    Ok(WaitSlot(()))
}

/// The weight of holding `copies` copies of `bytes` bytes (saturating).
pub fn file_weight(bytes: u64, copies: u64) -> u64 {
    bytes.saturating_mul(copies)
}

/// Takes `weight` bytes of the shared budget ([`SEARCHES`]) for a file tool about to
/// hold a file (`what` names it in the refusal): a big hold only within
/// [`FILE_CEILING`], a small one ([`SMALL_HOLD`]) anywhere in the budget. Waits for room
/// until the call's deadline or [`HOLD_WAIT`], then refuses with `TIMEOUT` saying the
/// server is busy (`CANCELLED` when the call is cancelled). The permit gives the weight
/// back when dropped: keep it while the file's bytes are held.
pub fn hold(weight: u64, what: &str, control: &Control) -> ToolResult<Permit<'static>> {
    let ceiling = if weight <= SMALL_HOLD {
        SEARCH_BUDGET
    } else {
        FILE_CEILING
    };
    let refused = |e: ToolError, queue_full: bool| match e.code {
        ErrorCode::Timeout => busy(weight.min(ceiling), what, control, queue_full),
        _ => e,
    };
    // What the call itself holds already: a big hold that could not fit beside it
    // would wait for room only this call can make (a patch of many big files).
    use std::sync::atomic::Ordering;
    let mine = control.spent.clone();
    let already = mine.held.load(Ordering::SeqCst);
    // (A single hold over the ceiling is cut to it, as `take_within` does: one call
    // alone may always run.)
    if already > 0 && already.saturating_add(weight.min(ceiling)) > ceiling {
        let mib = |b: u64| b.div_ceil(1 << 20);
        return Err(ToolError::new(
            ErrorCode::FileTooLarge,
            format!(
                "{what} needs about {} MiB of memory beside the {} MiB this call holds already, over the {} MiB \
                 that big files may take at once; nothing was changed",
                mib(weight),
                mib(already),
                mib(ceiling)
            ),
        )
        .with_hint("split the change into smaller calls (fewer or smaller files each)"));
    }
    let own = |mut p: Permit<'static>| {
        mine.held.fetch_add(p.weight, Ordering::SeqCst);
        p.mine = Some(mine.clone());
        p
    };
    // Room now: no wait.
    match SEARCHES.take_within(weight, ceiling, Some(Instant::now()), control) {
        Err(e) if e.code == ErrorCode::Timeout => {}
        taken => return taken.map(own).map_err(|e| refused(e, false)),
    }
    if HOLD_WAITERS.fetch_add(1, Ordering::SeqCst) >= MAX_HOLD_WAITERS {
        HOLD_WAITERS.fetch_sub(1, Ordering::SeqCst);
        return Err(refused(control.timeout_error(), true));
    }
    struct Waiting;
    impl Drop for Waiting {
        fn drop(&mut self) {
            HOLD_WAITERS.fetch_sub(1, Ordering::SeqCst);
        }
    }
    let _waiting = Waiting;
    SEARCHES
        .take_within(weight, ceiling, Some(Instant::now() + HOLD_WAIT), control)
        .map(own)
        .map_err(|e| refused(e, false))
}

fn busy(weight: u64, what: &str, control: &Control, queue_full: bool) -> ToolError {
    let mib = |b: u64| b.div_ceil(1 << 20);
    let waited = match control.deadline {
        _ if queue_full => {
            format!("{MAX_HOLD_WAITERS} calls are already waiting, so this one did not")
        }
        Some(d) if d <= Instant::now() + HOLD_WAIT => {
            format!(
                "waited until the call's deadline ({})",
                humantime::format_duration(control.timeout)
            )
        }
        _ => format!("waited {}", humantime::format_duration(HOLD_WAIT)),
    };
    ToolError::new(
        ErrorCode::Timeout,
        format!(
            "the server is busy: {what} needs about {} MiB of memory, and the calls running hold \
             {} MiB of the {} MiB that big files may take at once; {waited}; nothing was changed",
            mib(weight),
            mib(SEARCHES.used()),
            mib(FILE_CEILING),
        ),
    )
    .with_hint(
        "retry in a moment, with fewer big files at once; for a big file, read a range (offset, limit) \
         or find the place with grep first",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::CancelToken;

    fn control(ms: u64) -> Control {
        Control::new(CancelToken::new(), None, Duration::from_millis(ms))
    }

    #[test]
    fn class_positions_count_what_the_slow_engine_keeps_alive() {
        let at =
            |p: &str| class_positions(&regex_syntax::ast::parse::Parser::new().parse(p).unwrap());
        for (p, n) in [
            ("fn main", 0),
            (r"\w+", 1),
            ("foo.*bar", 1),
            (r"\d{4}-\d{2}-\d{2}", 8),
            ("[a-m].{3000}", 3001),
            // Literals under a counted repetition count (round 25), outside one not.
            ("a{2999}b", 2999),
            ("(?:a{2999}|zz)b", 2999),
            ("a(?i:a){1000}b", 1000),
            ("(abc){100}", 300),
            ("x{3}", 3),
        ] {
            assert_eq!(at(p), n, "{p}");
        }
        // Light patterns are never held back; heavy ones get a bound.
        assert_eq!(heavy_buffer_max("fn main", false), None);
        assert_eq!(heavy_buffer_max("a{2999}b", true), None);
        assert_eq!(heavy_buffer_max("a{2999}b", false), Some(HEAVY_WORK / 2999));
    }

    #[test]
    fn a_hold_that_cannot_fit_beside_the_calls_own_is_refused_at_once() {
        let c = control(60_000);
        let first = hold(FILE_CEILING - (4 << 20), "a", &c).unwrap();
        let started = Instant::now();
        let Err(e) = hold(16 << 20, "b", &c) else {
            panic!("a hold past the call's own room was taken");
        };
        assert_eq!(e.code, ErrorCode::FileTooLarge, "{e:?}");
        assert!(started.elapsed() < Duration::from_secs(5));
        drop(first);
        // Given back: the call holds nothing, and the same hold fits.
        assert_eq!(c.spent.held.load(std::sync::atomic::Ordering::SeqCst), 0);
        let again = hold(16 << 20, "b", &c).unwrap();
        drop(again);
    }

    #[test]
    fn a_budget_waits_for_room_and_times_out_at_the_deadline() {
        let b = Budget::new(100);
        let first = b.take(80, &control(0)).unwrap();
        assert_eq!(b.used(), 80);
        // Does not fit beside the first: waits, then TIMEOUT at the deadline.
        let started = Instant::now();
        let e = b.take(30, &control(100)).err().unwrap();
        assert_eq!(e.code, ErrorCode::Timeout);
        assert!(started.elapsed() >= Duration::from_millis(90));
        // A release lets a waiter in.
        std::thread::scope(|s| {
            let w = s.spawn(|| b.take(30, &control(5_000)).map(|p| p.weight));
            std::thread::sleep(Duration::from_millis(50));
            drop(first);
            assert_eq!(w.join().unwrap().unwrap(), 30);
        });
        assert_eq!(b.used(), 0);
        // More than the whole budget: capped to it, so one request may always run.
        let all = b.take(1_000, &control(0)).unwrap();
        assert_eq!(b.used(), 100);
        drop(all);
        // A cancelled waiter stops waiting.
        let _held = b.take(100, &control(0)).unwrap();
        let c = control(0);
        c.cancel.cancel();
        assert_eq!(b.take(1, &c).err().unwrap().code, ErrorCode::Cancelled);
    }

    #[test]
    fn a_ceiling_keeps_room_for_small_takers_and_a_wait_ends_by_its_limit() {
        let b = Budget::new(100);
        // Big takers share 70 of the 100.
        let a = b.take_within(40, 70, None, &control(0)).unwrap();
        let started = Instant::now();
        let until = Some(Instant::now() + Duration::from_millis(100));
        let e = b.take_within(40, 70, until, &control(0)).err().unwrap();
        assert_eq!(e.code, ErrorCode::Timeout);
        assert!(started.elapsed() >= Duration::from_millis(90));
        assert!(started.elapsed() < Duration::from_secs(5));
        // The deadline ends it too, whichever is first.
        let e = b.take_within(40, 70, None, &control(50)).err().unwrap();
        assert_eq!(e.code, ErrorCode::Timeout);
        // A small taker still finds the room above the ceiling.
        let small = b
            .take_within(50, 100, Some(Instant::now()), &control(0))
            .unwrap();
        assert_eq!(b.used(), 90);
        drop(small);
        // Over the ceiling alone: cut to it, so it may run alone.
        drop(a);
        let whole = b
            .take_within(1_000, 70, Some(Instant::now()), &control(0))
            .unwrap();
        assert_eq!(b.used(), 70);
        drop(whole);
        assert_eq!(b.used(), 0);
    }

    #[test]
    fn caps_refuse_each_shape_and_pass_ordinary_ones() {
        assert!(check_pattern(&"a".repeat(MAX_PATTERN_BYTES), true).is_ok());
        assert_eq!(
            check_pattern(&"a".repeat(MAX_PATTERN_BYTES + 1), true)
                .unwrap_err()
                .code,
            ErrorCode::InvalidArgument
        );
        let alts = vec!["ab"; MAX_ALTERNATIVES + 1].join("|");
        assert_eq!(
            check_pattern(&alts, false).unwrap_err().code,
            ErrorCode::InvalidRegex
        );
        // literal text with many `|` is not a regex
        assert!(check_pattern(&alts, true).is_ok());
        // nested alternations count too
        let nested = format!(
            "({})x({})",
            vec!["a"; 3000].join("|"),
            vec!["b"; 3000].join("|")
        );
        assert!(check_pattern(&nested, false).is_err());
        assert!(check_pattern("fn (main|test)\\(", false).is_ok());
        // The attacker pass's shape: under the length and alternative caps, refused by
        // its weight before anything is compiled.
        let heavy: Vec<String> = (0..4000)
            .map(|k| format!("\\w{{{}}}x\\p{{Lu}}", k % 50 + 1))
            .collect();
        let heavy = heavy.join("|");
        assert!(heavy.len() < MAX_PATTERN_BYTES);
        let e = check_pattern(&heavy, false).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidRegex);
        assert!(e.message.contains("states"), "{}", e.message);
        for ordinary in [
            "\\w+",
            "[A-Za-z_][A-Za-z0-9_]{0,63}",
            "(?i)foo|bar",
            "(?:\\w{50}){4}",
            "(\\w+\\s+){1,20}",
            ".{0,200}",
            "EXPORT_SYMBOL_GPL\\(kvm_\\w+_msr",
            "x{3,}y",
        ] {
            assert!(check_pattern(ordinary, false).is_ok(), "{ordinary}");
        }
        assert!(check_globs(&["*.{ts,tsx}", "src/**", "!*.min.js"]).is_ok());
        let braces = format!("*.{{{}}}", vec!["x"; MAX_BRACE_ALTERNATIVES + 1].join(","));
        assert_eq!(
            check_glob(&braces).unwrap_err().code,
            ErrorCode::InvalidGlob
        );
        assert!(check_glob(&"a".repeat(MAX_GLOB_BYTES + 1)).is_err());
        assert!(check_globs(&vec!["*.rs"; MAX_GLOBS + 1]).is_err());
        let long = vec!["a".repeat(1000); 100];
        assert!(check_globs(&long).is_err());
    }
}

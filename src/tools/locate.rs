//! Where an edit applies. The exact text first; when it is not there, in order: the same
//! text with the file's line endings (each line's own, where the file mixes them), the
//! same lines ignoring trailing whitespace, the same lines indented uniformly deeper or
//! shallower, the same text with Unicode punctuation read as its ASCII look-alike (dashes,
//! curly quotes, Unicode spaces, `…`; either side). A fallback is used only when it finds
//! exactly one place (a guess between two places is worse than a miss); the new text is
//! re-indented like the place found. A miss comes with the closest region and a diff of
//! what was expected against what is there, so a model can correct its `old_string` in
//! one step.
//!
//! Line endings are kept per line ([`fit`]): bytes outside the place are never touched;
//! inside it, a line the new text keeps keeps its ending (and, under a forgiving rule,
//! its bytes: trailing whitespace, Unicode punctuation), a replaced line's ending goes to
//! the line that replaces it, an added line takes its neighbour's. A file without a
//! final newline keeps it missing unless the change is at the end of the file and the new
//! text ends with one; a file with a final newline keeps it.
//!
//! Shared by `edit` and `apply_patch`: both say which rule matched.

use schemars::JsonSchema;
use serde::Serialize;
use std::ops::Range;

/// How the text was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// As given.
    Exact,
    /// With the file's line endings (an LF `old_string` in a CRLF file, or the reverse).
    LineEndings,
    /// Line by line, ignoring whitespace at the ends of lines.
    TrailingWhitespace,
    /// Line by line, the whole block indented deeper or shallower by the same amount.
    Indentation,
    /// Unicode dashes, quotes, spaces, … as ASCII.
    Punctuation,
}

impl Rule {
    /// For a person: how the text was matched, when not exactly.
    pub fn describe(self) -> Option<&'static str> {
        match self {
            Rule::Exact => None,
            Rule::LineEndings => Some("with the file's line endings"),
            Rule::TrailingWhitespace => Some("ignoring trailing whitespace"),
            Rule::Indentation => Some("with the block's indentation shifted"),
            Rule::Punctuation => Some("reading Unicode punctuation as ASCII"),
        }
    }
}

/// One place to change: the bytes of the file it covers and what goes there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub range: Range<usize>,
    /// Shared by every place of a replace-all: a million places cost a million pointers,
    /// not a million copies of the new text.
    pub with: std::sync::Arc<str>,
}

/// The most places one edit or hunk may change: what they cost is known before any is
/// built, but a replace-all over a file of one repeated byte would hold one per byte.
pub const MAX_PLACES: usize = 100_000;

/// How many places a `NotUnique` miss names (it gives the total too).
const LINES_NAMED: usize = 20;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    pub rule: Rule,
    /// In file order, not overlapping.
    pub places: Vec<Place>,
}

impl Located {
    /// The length of the text once every place is replaced, without building it.
    pub fn result_len(&self, text_len: usize) -> u64 {
        self.places.iter().fold(text_len as u64, |n, p| {
            n - p.range.len() as u64 + p.with.len() as u64
        })
    }

    /// The text with every place replaced.
    pub fn apply(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for p in &self.places {
            out.push_str(&text[at..p.range.start]);
            out.push_str(&p.with);
            at = p.range.end;
        }
        out.push_str(&text[at..]);
        out
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Miss {
    /// Nowhere, under any rule; the closest region when the file has any text.
    NotFound { closest: Option<Closest> },
    /// In `total` places under `rule` (the first few 1-based first lines), and only one
    /// may change.
    NotUnique {
        rule: Rule,
        lines: Vec<usize>,
        total: usize,
    },
    /// A replace-all over more places than [`MAX_PLACES`].
    TooMany { count: usize },
    /// The text would grow past the edit size limit (`bytes` it would be).
    TooLarge { bytes: u64, limit: u64 },
    /// The call was stopped (its deadline, or a cancel) while the forgiving rules ran:
    /// they compare windows of lines, which on a big file and a long `old_string` is
    /// file × old_string work.
    Stopped,
}

/// How many windows the line-by-line rules try between two looks at the call's stop.
const WINDOWS_PER_CHECK: usize = 1024;
/// How many lines of `old_string` the closest-region score compares: the point is where
/// to look, and with all of them a 10 000-line miss on a 400 000-line file compared 4
/// billion lines (41 s past a 5 s deadline).
const CLOSEST_LINES: usize = 64;
/// Characters of a line the likeness score compares (see [`closest`]).
const LIKENESS_CHARS: usize = 256;
/// Lines scored for likeness between two looks at the call's stop.
const LIKENESS_PER_CHECK: usize = 64;
/// Characters of one line of the closest region's diff shown.
const DIFF_LINE_CHARS: usize = 400;

/// The first `n` characters of `s` (all of it when shorter).
fn prefix(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((at, _)) => &s[..at],
        None => s,
    }
}

/// The region most like `old_string`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Closest {
    /// 1-based, inclusive.
    pub first_line: usize,
    pub last_line: usize,
    /// Unified diff: `-` lines are what was expected, `+` lines what the file has.
    pub diff: String,
    /// The region differs from `old_string` in whitespace only (inside lines, or line
    /// breaks), which no forgiving rule bridges.
    pub whitespace_only: bool,
}

/// Finds `old` in `text` and works out what replaces it. With `replace_all`, every exact
/// (or line-ending) occurrence; the whitespace rules always need exactly one place. The
/// cost is known before anything is built: places are counted first, and a result over
/// `max_len` bytes (or over [`MAX_PLACES`] places) is refused.
pub fn locate(
    text: &str,
    old: &str,
    new: &str,
    replace_all: bool,
    max_len: u64,
    stop: &dyn Fn() -> bool,
) -> Result<Located, Miss> {
    let found = locate_places(text, old, new, replace_all, stop)?;
    let bytes = found.result_len(text.len());
    if bytes > max_len {
        return Err(Miss::TooLarge {
            bytes,
            limit: max_len,
        });
    }
    Ok(found)
}

fn locate_places(
    text: &str,
    old: &str,
    new: &str,
    replace_all: bool,
    stop: &dyn Fn() -> bool,
) -> Result<Located, Miss> {
    let crlf = is_crlf(text);
    let eol = if crlf { "\r\n" } else { "\n" };
    let mut fits = Fits::default();

    // Exact, then with the file's line endings: plain substring searches.
    let mut tried = vec![(Rule::Exact, old.to_string())];
    if old.contains('\n') {
        let other = with_eol(old, eol);
        if other != old {
            tried.push((Rule::LineEndings, other));
        }
    }
    for (rule, needle) in tried {
        // Counted before anything is kept: one byte repeated over a file is that many hits.
        let total = text.matches(needle.as_str()).count();
        if total == 0 {
            continue;
        }
        if total > 1 && !replace_all {
            let lines = text
                .match_indices(needle.as_str())
                .take(LINES_NAMED)
                .map(|(i, _)| line_of(text, i))
                .collect();
            return Err(Miss::NotUnique { rule, lines, total });
        }
        if total == 1
            && !replace_all
            && let Some(miss) = overlapping(text, &needle, rule)
        {
            return Err(miss);
        }
        if total > MAX_PLACES {
            return Err(Miss::TooMany { count: total });
        }
        let mut places = Vec::new();
        for (n, (i, _)) in text.match_indices(needle.as_str()).enumerate() {
            if n % WINDOWS_PER_CHECK == 0 && n > 0 && stop() {
                return Err(Miss::Stopped);
            }
            let range = i..i + needle.len();
            let with = fits.get(text, range.clone(), old, new);
            places.push(Place { range, with });
        }
        return Ok(Located { rule, places });
    }

    // Each line with its own ending, where the file mixes them.
    if old.contains('\n')
        && text.contains('\r')
        && let Some(found) = normalized(
            text,
            old,
            new,
            false,
            replace_all,
            Rule::LineEndings,
            &mut fits,
            stop,
        )?
    {
        return Ok(found);
    }

    // Line by line.
    let lines = Lines::of(text);
    let want = OldLines::of(old);
    if want.lines.iter().all(|l| l.trim().is_empty()) {
        return Err(Miss::NotFound {
            closest: None::<Closest>,
        });
    }
    for rule in [Rule::TrailingWhitespace, Rule::Indentation] {
        let mut found: Vec<(usize, Shift)> = Vec::new();
        for i in 0..lines.len().saturating_sub(want.lines.len() - 1) {
            if i % WINDOWS_PER_CHECK == 0 && stop() {
                return Err(Miss::Stopped);
            }
            if let Some(s) = window_matches(&lines, i, &want.lines, rule) {
                found.push((i, s));
            }
        }
        match found.as_slice() {
            [] => continue,
            [(i, shift)] => {
                let last = i + want.lines.len() - 1;
                let start = lines.spans[*i].start;
                let end = if want.ends_with_newline {
                    lines.spans[last].line_end
                } else {
                    lines.spans[last].content_end
                };
                // Old shifted too, so the lines the new text keeps are seen as kept; those
                // keep the file's bytes (its trailing whitespace).
                let (old, new) = (reindent(old, shift), reindent(new, shift));
                let kept = kept_lines(&text[start..end], &old, &new);
                let with = fit(text, start..end, &old, &kept);
                return Ok(Located {
                    rule,
                    places: vec![Place {
                        range: start..end,
                        with: with.into(),
                    }],
                });
            }
            many => {
                let lines = many.iter().take(LINES_NAMED).map(|(i, _)| i + 1).collect();
                return Err(Miss::NotUnique {
                    rule,
                    lines,
                    total: many.len(),
                });
            }
        }
    }
    // Unicode punctuation read as ASCII, on either side: one place only.
    if let Some(found) = normalized(
        text,
        old,
        new,
        true,
        false,
        Rule::Punctuation,
        &mut fits,
        stop,
    )? {
        return Ok(found);
    }
    let closest = closest(&lines, text, &want.lines, stop);
    if stop() {
        return Err(Miss::Stopped);
    }
    Err(Miss::NotFound { closest })
}

/// Most overlapping places counted for a `NotUnique` miss: each is a search of a window
/// twice the needle's length.
const OVERLAPS_COUNTED: usize = 64;

/// When `needle` occurs once counted end to end, a second place overlapping the first
/// (`x\nx\n` in `A\nx\nx\nx\n`): a miss naming both, since one change needs one place and
/// taking the first would be a guess (round 28: edit and apply_patch changed the first).
/// Every other occurrence starts inside the first one, so only that window is searched.
fn overlapping(text: &str, needle: &str, rule: Rule) -> Option<Miss> {
    let first = text.find(needle)?;
    let mut window_end = first.saturating_add(2 * needle.len()).min(text.len());
    // Sliced below: on a character boundary (the text's end is one).
    while !text.is_char_boundary(window_end) {
        window_end += 1;
    }
    let mut starts = vec![first];
    let mut from = first;
    while starts.len() <= OVERLAPS_COUNTED {
        from += text[from..].chars().next().map_or(1, char::len_utf8);
        if from >= window_end {
            break;
        }
        match text[from..window_end].find(needle) {
            Some(j) => {
                from += j;
                starts.push(from);
            }
            None => break,
        }
    }
    (starts.len() > 1).then(|| Miss::NotUnique {
        rule,
        total: starts.len(),
        lines: starts
            .iter()
            .take(LINES_NAMED)
            .map(|&i| line_of(text, i))
            .collect(),
    })
}

/// The ASCII look-alike of a Unicode punctuation mark or space, if `c` is one.
pub fn ascii_punctuation(c: char) -> Option<&'static str> {
    Some(match c {
        // Hyphen, non-breaking hyphen, figure dash, en dash, em dash, horizontal bar,
        // minus sign, small and full-width hyphen-minus.
        '\u{2010}' | '\u{2011}' | '\u{2012}' | '\u{2013}' | '\u{2014}' | '\u{2015}'
        | '\u{2212}' | '\u{FE63}' | '\u{FF0D}' => "-",
        // Curly single quotes, low and reversed ones, prime.
        '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' | '\u{2032}' => "'",
        // Curly double quotes, low and reversed ones, double prime.
        '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' | '\u{2033}' => "\"",
        // No-break space, the typographic spaces, narrow no-break, medium mathematical,
        // ideographic.
        '\u{00A0}' | '\u{2000}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => " ",
        '\u{2026}' => "...",
        _ => return None,
    })
}

/// `s` with CRLF as LF and, with `punct`, punctuation as ASCII.
fn normalize(s: &str, punct: bool) -> String {
    let lf = s.replace("\r\n", "\n");
    if !punct {
        return lf;
    }
    let mut out = String::with_capacity(lf.len());
    for c in lf.chars() {
        match ascii_punctuation(c) {
            Some(a) => out.push_str(a),
            None => out.push(c),
        }
    }
    out
}

/// Where `pat` (normalized) matches `text` from byte `p`, reading each CRLF as LF and,
/// with `punct`, each punctuation mark as ASCII: `Ok(end)` of the match, or `Err(bytes)`
/// of the text compared before it failed (the work done, for the stop).
fn match_at(text: &str, p: usize, pat: &[u8], punct: bool) -> Result<usize, usize> {
    let bytes = text.as_bytes();
    let mut k = 0;
    let mut buf = [0u8; 4];
    let mut chars = text[p..].char_indices();
    while k < pat.len() {
        let Some((i, c)) = chars.next() else {
            return Err(text.len() - p);
        };
        if c == '\r' && bytes.get(p + i + 1) == Some(&b'\n') {
            continue;
        }
        let rep: &[u8] = match ascii_punctuation(c).filter(|_| punct) {
            Some(a) => a.as_bytes(),
            None => c.encode_utf8(&mut buf).as_bytes(),
        };
        if !pat[k..].starts_with(rep) {
            return Err(i + 1);
        }
        k += rep.len();
    }
    Ok(match chars.next() {
        Some((i, _)) => p + i,
        None => text.len(),
    })
}

/// Bytes compared by a normalized search between two looks at the call's stop.
const COMPARED_PER_CHECK: usize = 1 << 20;

/// A search of `text` for `old` with each CRLF read as LF (and, with `punct`, Unicode
/// punctuation as ASCII), on both sides. `None` when there is no place.
#[allow(clippy::too_many_arguments)]
fn normalized(
    text: &str,
    old: &str,
    new: &str,
    punct: bool,
    replace_all: bool,
    rule: Rule,
    fits: &mut Fits,
    stop: &dyn Fn() -> bool,
) -> Result<Option<Located>, Miss> {
    let pat = normalize(old, punct);
    let pat = pat.as_bytes();
    let Some(&first) = pat.first() else {
        return Ok(None);
    };
    let bytes = text.as_bytes();
    let mut hits: Vec<Range<usize>> = Vec::new();
    let mut total = 0usize;
    let mut lines = Vec::new();
    let mut next = 0;
    let mut buf = [0u8; 4];
    // Each start compared costs up to the length of `old`: the stop is looked at by the
    // bytes compared, not by the starts tried.
    let mut work = 0usize;
    for (p, c) in text.char_indices() {
        work += 1;
        if work >= COMPARED_PER_CHECK {
            work = 0;
            if stop() {
                return Err(Miss::Stopped);
            }
        }
        if p < next || (c == '\r' && bytes.get(p + 1) == Some(&b'\n')) {
            continue;
        }
        let lead = match ascii_punctuation(c).filter(|_| punct) {
            Some(a) => a.as_bytes()[0],
            None => c.encode_utf8(&mut buf).as_bytes()[0],
        };
        if lead != first {
            continue;
        }
        let end = match match_at(text, p, pat, punct) {
            Ok(end) => end,
            Err(compared) => {
                work += compared;
                continue;
            }
        };
        work += end - p;
        total += 1;
        if lines.len() < LINES_NAMED {
            lines.push(line_of(text, p));
        }
        if total == 1 || (replace_all && total <= MAX_PLACES) {
            hits.push(p..end);
        }
        // One change needs one place: a second start inside the first match is another
        // place (`x\nx\n` in `x\nx\nx\n`), so starts are tried past every match's
        // first character. Replacing all takes the matches one after another.
        next = if replace_all { end.max(p + 1) } else { p + 1 };
    }
    if total == 0 {
        return Ok(None);
    }
    if total > 1 && !replace_all {
        return Err(Miss::NotUnique { rule, lines, total });
    }
    if total > MAX_PLACES {
        return Err(Miss::TooMany { count: total });
    }
    let places = hits
        .into_iter()
        .map(|range| {
            let with = if punct {
                // The lines the new text keeps are the file's, not the model's ASCII.
                let kept = kept_lines(&text[range.clone()], old, new);
                fit(text, range.clone(), old, &kept).into()
            } else {
                fits.get(text, range.clone(), old, new)
            };
            Place { range, with }
        })
        .collect();
    Ok(Some(Located { rule, places }))
}

/// Past this many lines (old and new together) lines are matched up by position, not
/// aligned by a diff: what aligning holds per line is not in the memory budget.
const ALIGN_LINES: usize = 20_000;

fn too_many_to_align(old: &str, new: &str) -> bool {
    memchr::memchr_iter(b'\n', old.as_bytes())
        .chain(memchr::memchr_iter(b'\n', new.as_bytes()))
        .nth(ALIGN_LINES)
        .is_some()
}

/// `new` with each line it keeps from `old` (context, aligned line by line) taken from
/// `region`, the file's text that `old` matched line for line: a context line of a
/// forgiving match keeps the file's bytes. Lines added or changed are as given.
fn kept_lines(region: &str, old: &str, new: &str) -> String {
    let old = old.replace("\r\n", "\n");
    let new = new.replace("\r\n", "\n");
    if too_many_to_align(&old, &new) {
        return new;
    }
    let have: Vec<&str> = region
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    let olds: Vec<&str> = old.split('\n').collect();
    let news: Vec<&str> = new.split('\n').collect();
    if have.len() != olds.len() {
        return new;
    }
    let mut out: Vec<&str> = news.clone();
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(200);
    for op in similar::capture_diff_slices_deadline(
        similar::Algorithm::Myers,
        &olds,
        &news,
        Some(deadline),
    ) {
        if let similar::DiffOp::Equal {
            old_index,
            new_index,
            len,
        } = op
        {
            out[new_index..new_index + len].copy_from_slice(&have[old_index..old_index + len]);
        }
    }
    out.join("\n")
}

/// Whether most line breaks in `text` are CRLF.
fn is_crlf(text: &str) -> bool {
    let all = memchr::memchr_iter(b'\n', text.as_bytes()).count();
    let crlf = text.matches("\r\n").count();
    all > 0 && crlf * 2 > all
}

/// `s` with every line break written as `eol`.
fn with_eol(s: &str, eol: &str) -> String {
    let lf = s.replace("\r\n", "\n");
    if eol == "\n" {
        lf
    } else {
        lf.replace('\n', eol)
    }
}

/// Whether the line break at byte `nl` (a `\n`) of `text` is CRLF.
fn crlf_at(text: &str, nl: usize) -> bool {
    nl > 0 && text.as_bytes()[nl - 1] == b'\r'
}

/// The line endings around a place: the breaks inside it, and the ones just before and
/// after it (or the file's majority), which are what decide how new text is ended.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Endings {
    inside: Vec<bool>,
    /// For a line added with no line of the place to follow.
    neighbour: bool,
    /// The place ends the file, which has no final newline.
    open_end: bool,
    /// The place ends the file, which has a final newline.
    closed_end: bool,
}

/// The new texts of a change's places, one per distinct set of endings around them (a
/// replace-all over a file of one ending builds the new text once). Places come in file
/// order: the line breaks around them are looked for once over the file, not once per
/// place (a replace-all over a file with no line break would scan it per place).
#[derive(Default)]
struct Fits {
    made: std::collections::HashMap<Endings, std::sync::Arc<str>>,
    /// The file is scanned for breaks before a place up to here; the last one found.
    before_to: usize,
    before: Option<usize>,
    /// The first break at or after `after_from` (none: no break after it).
    after: Option<(usize, Option<usize>)>,
    /// Whether most of the file's breaks are CRLF, once worked out.
    majority: Option<bool>,
}

impl Fits {
    fn endings(&mut self, text: &str, range: Range<usize>) -> Endings {
        let bytes = text.as_bytes();
        let inside = memchr::memchr_iter(b'\n', &bytes[range.clone()])
            .map(|i| crlf_at(text, range.start + i))
            .collect();
        if range.start < self.before_to {
            self.before_to = 0;
            self.before = None;
        }
        if let Some(i) = memchr::memrchr(b'\n', &bytes[self.before_to..range.start]) {
            self.before = Some(self.before_to + i);
        }
        self.before_to = range.start;
        let after = match self.after {
            Some((from, found)) if from <= range.end && found.is_none_or(|at| at >= range.end) => {
                found
            }
            _ => {
                let found = memchr::memchr(b'\n', &bytes[range.end..]).map(|i| range.end + i);
                self.after = Some((range.end, found));
                found
            }
        };
        let at_end = range.end == text.len();
        let neighbour = match after.or(self.before) {
            Some(nl) => crlf_at(text, nl),
            None => *self.majority.get_or_insert_with(|| is_crlf(text)),
        };
        Endings {
            inside,
            neighbour,
            open_end: at_end && !text.ends_with('\n'),
            closed_end: at_end && text.ends_with('\n'),
        }
    }

    fn get(
        &mut self,
        text: &str,
        range: Range<usize>,
        old: &str,
        new: &str,
    ) -> std::sync::Arc<str> {
        let e = self.endings(text, range);
        if let Some(w) = self.made.get(&e) {
            return w.clone();
        }
        let w: std::sync::Arc<str> = fit_endings(&e, old, new).into();
        self.made.insert(e, w.clone());
        w
    }
}

/// `new` as it goes into the place `range` of `text` that `old` was found at, with line
/// endings kept per line: a line `new` keeps from `old` keeps the file's ending for it;
/// a line that replaces one takes that one's ending; an added line takes the ending of
/// the line before it in the place (or after it, or around the place, or the file's
/// majority). A file without a final newline keeps it missing when the place ends the
/// file and the last line is one the change keeps (context); a file with one keeps it.
pub fn fit(text: &str, range: Range<usize>, old: &str, new: &str) -> String {
    fit_endings(&Fits::default().endings(text, range), old, new)
}

fn fit_endings(e: &Endings, old: &str, new: &str) -> String {
    let old = old.replace("\r\n", "\n");
    let mut new = new.replace("\r\n", "\n");
    // The final newline.
    if e.open_end && old.ends_with('\n') && new.ends_with('\n') {
        let last = |s: &str| {
            s.trim_end_matches('\n')
                .rsplit('\n')
                .next()
                .map(|l| l.trim_end().to_string())
        };
        if last(&old) == last(&new) {
            new.pop();
        }
    }
    if e.closed_end && old.ends_with('\n') && !new.is_empty() && !new.ends_with('\n') {
        new.push('\n');
    }
    if !new.contains('\n') {
        return new;
    }
    let eol = |crlf: bool| if crlf { "\r\n" } else { "\n" };
    // One ending throughout: every break takes it.
    let first = e.inside.first().copied().unwrap_or(e.neighbour);
    let old_breaks = old.matches('\n').count();
    if e.inside.iter().all(|&c| c == first) || old_breaks != e.inside.len() {
        let uniform = if e.inside.iter().all(|&c| c == first) {
            first
        } else {
            e.inside.iter().filter(|&&c| c).count() * 2 > e.inside.len()
        };
        return if uniform {
            new.replace('\n', "\r\n")
        } else {
            new
        };
    }
    // Mixed: the new lines aligned with the old ones (by position past a size).
    if too_many_to_align(&old, &new) {
        let mut out = String::with_capacity(new.len() + e.inside.len());
        for (j, line) in new.split('\n').enumerate() {
            if j > 0 {
                out.push_str(eol(e.inside.get(j - 1).copied().unwrap_or(e.neighbour)));
            }
            out.push_str(line);
        }
        return out;
    }
    let olds: Vec<&str> = old.split('\n').collect();
    let news: Vec<&str> = new.split('\n').collect();
    let n_breaks = news.len() - 1;
    let mut kinds: Vec<Option<bool>> = vec![None; n_breaks];
    let inside = |i: usize| e.inside.get(i).copied();
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(200);
    let ops = similar::capture_diff_slices_deadline(
        similar::Algorithm::Myers,
        &olds,
        &news,
        Some(deadline),
    );
    for op in ops {
        match op {
            similar::DiffOp::Equal {
                old_index,
                new_index,
                len,
            } => {
                for t in 0..len {
                    if let Some(k) = kinds.get_mut(new_index + t) {
                        *k = inside(old_index + t);
                    }
                }
            }
            similar::DiffOp::Delete { .. } => {}
            similar::DiffOp::Insert {
                old_index,
                new_index,
                new_len,
            } => {
                let near = old_index
                    .checked_sub(1)
                    .and_then(inside)
                    .or_else(|| inside(old_index));
                for t in 0..new_len {
                    if let Some(k) = kinds.get_mut(new_index + t) {
                        *k = near;
                    }
                }
            }
            similar::DiffOp::Replace {
                old_index,
                old_len,
                new_index,
                new_len,
            } => {
                for t in 0..new_len {
                    if let Some(k) = kinds.get_mut(new_index + t) {
                        *k = inside(old_index + t.min(old_len.saturating_sub(1)));
                    }
                }
            }
        }
    }
    let mut out = String::with_capacity(new.len() + n_breaks);
    for (j, line) in news.iter().enumerate() {
        out.push_str(line);
        if j < n_breaks {
            let near = kinds[j]
                .or_else(|| kinds[..j].iter().rev().flatten().next().copied())
                .unwrap_or(e.neighbour);
            out.push_str(eol(near));
        }
    }
    out
}

/// 1-based line of byte offset `at`.
pub fn line_of(text: &str, at: usize) -> usize {
    memchr::memchr_iter(b'\n', &text.as_bytes()[..at]).count() + 1
}

#[derive(Debug, Clone, Copy)]
struct Span {
    start: usize,
    /// End of the line's text (before `\r\n` or `\n`).
    content_end: usize,
    /// After its line break.
    line_end: usize,
}

/// The file's lines, by byte spans.
struct Lines<'a> {
    text: &'a str,
    spans: Vec<Span>,
}

/// The lines a line-by-line search of `text` would hold a span for: what a change takes
/// from the memory budget for them (see `search::cost::copies::PER_LINE`).
pub fn lines_in(text: &str) -> u64 {
    lines_in_bytes(text.as_bytes())
}

/// [`lines_in`] over bytes.
pub fn lines_in_bytes(bytes: &[u8]) -> u64 {
    memchr::memchr_iter(b'\n', bytes).count() as u64 + 1
}

impl<'a> Lines<'a> {
    fn of(text: &'a str) -> Lines<'a> {
        // Sized once: what the memory budget was given for it (`lines_in`), not the
        // twice that a doubling vector can reach.
        let mut spans = Vec::with_capacity(usize::try_from(lines_in(text)).unwrap_or(0));
        let mut start = 0;
        for nl in memchr::memchr_iter(b'\n', text.as_bytes()) {
            let content_end = if nl > start && text.as_bytes()[nl - 1] == b'\r' {
                nl - 1
            } else {
                nl
            };
            spans.push(Span {
                start,
                content_end,
                line_end: nl + 1,
            });
            start = nl + 1;
        }
        if start < text.len() {
            spans.push(Span {
                start,
                content_end: text.len(),
                line_end: text.len(),
            });
        }
        Lines { text, spans }
    }

    fn len(&self) -> usize {
        self.spans.len()
    }

    fn get(&self, i: usize) -> &'a str {
        let s = self.spans[i];
        &self.text[s.start..s.content_end]
    }
}

/// `old_string` as lines, line breaks of either kind.
struct OldLines<'a> {
    lines: Vec<&'a str>,
    ends_with_newline: bool,
}

impl<'a> OldLines<'a> {
    fn of(old: &'a str) -> OldLines<'a> {
        let ends_with_newline = old.ends_with('\n');
        let body = old.strip_suffix('\n').unwrap_or(old);
        let body = body.strip_suffix('\r').unwrap_or(body);
        let lines = body
            .split('\n')
            .map(|l| l.strip_suffix('\r').unwrap_or(l))
            .collect();
        OldLines {
            lines,
            ends_with_newline,
        }
    }
}

/// How the place found is indented against `old_string`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Shift {
    None,
    /// The file's lines carry this much more indentation.
    Deeper(String),
    /// The file's lines carry this much less.
    Shallower(String),
}

fn leading_ws(s: &str) -> &str {
    &s[..s.len() - s.trim_start().len()]
}

/// Whether the file's lines from `i` match `want` under `rule`, and with what shift.
fn window_matches(lines: &Lines, i: usize, want: &[&str], rule: Rule) -> Option<Shift> {
    let pairs = || (0..want.len()).map(move |j| (lines.get(i + j).trim_end(), want[j].trim_end()));
    match rule {
        Rule::TrailingWhitespace => pairs().all(|(have, w)| have == w).then_some(Shift::None),
        Rule::Indentation => {
            let (have, w) = pairs().find(|(have, w)| !have.is_empty() || !w.is_empty())?;
            let (hi, wi) = (leading_ws(have), leading_ws(w));
            let shift = if let Some(extra) = hi.strip_prefix(wi).filter(|e| !e.is_empty()) {
                Shift::Deeper(extra.to_string())
            } else if let Some(less) = wi.strip_prefix(hi).filter(|e| !e.is_empty()) {
                Shift::Shallower(less.to_string())
            } else {
                return None;
            };
            let fits = pairs().all(|(have, w)| match (&shift, have.is_empty(), w.is_empty()) {
                (_, true, true) => true,
                (_, true, false) | (_, false, true) => false,
                (Shift::Deeper(extra), _, _) => have.strip_prefix(extra.as_str()) == Some(w),
                (Shift::Shallower(less), _, _) => w.strip_prefix(less.as_str()) == Some(have),
                (Shift::None, _, _) => have == w,
            });
            fits.then_some(shift)
        }
        Rule::Exact | Rule::LineEndings | Rule::Punctuation => None,
    }
}

/// `new` shifted like the place found (line endings as given; [`fit`] ends the lines).
fn reindent(new: &str, shift: &Shift) -> String {
    let lf = new.replace("\r\n", "\n");
    let lines: Vec<String> = lf
        .split('\n')
        .map(|l| match shift {
            _ if l.trim().is_empty() => l.to_string(),
            Shift::None => l.to_string(),
            Shift::Deeper(extra) => format!("{extra}{l}"),
            Shift::Shallower(less) => l.strip_prefix(less.as_str()).unwrap_or(l).to_string(),
        })
        .collect();
    lines.join("\n")
}

/// The region most like `want`: the window with the most equal lines (ignoring
/// surrounding whitespace), or, when no line is equal, the line most like its first
/// non-blank line.
fn closest(lines: &Lines, text: &str, want: &[&str], stop: &dyn Fn() -> bool) -> Option<Closest> {
    if lines.len() == 0 {
        return None;
    }
    let m = want.len().min(lines.len());
    let scored = m.min(CLOSEST_LINES);
    let mut best = (0usize, 0usize);
    for i in 0..=lines.len() - m {
        if i % WINDOWS_PER_CHECK == 0 && stop() {
            return None;
        }
        let score = (0..scored)
            .filter(|&j| {
                let w = want[j].trim();
                !w.is_empty() && lines.get(i + j).trim() == w
            })
            .count();
        if score > best.1 {
            best = (i, score);
        }
    }
    let start = if best.1 > 0 {
        best.0
    } else {
        // No line equal: the line most like the first non-blank one wanted. Capped, so a
        // huge file costs a bounded time.
        // Each comparison is a character diff, quadratic at worst in the lengths: both
        // sides are cut to their first LIKENESS_CHARS characters (a long line's start
        // says enough of where to look), and the stop is looked at as it goes. Whole, a
        // 200 KB `old_string` against 2 MB lines ran 100 s past a 3 s deadline.
        let first = prefix(
            want.iter().find(|l| !l.trim().is_empty())?.trim(),
            LIKENESS_CHARS,
        );
        let mut top = (0usize, 0.0f32);
        for i in 0..lines.len().min(20_000) {
            if i % LIKENESS_PER_CHECK == 0 && stop() {
                return None;
            }
            let have = prefix(lines.get(i).trim(), LIKENESS_CHARS);
            if have.is_empty() {
                continue;
            }
            let r = similar::TextDiff::from_chars(first, have).ratio();
            if r > top.1 {
                top = (i, r);
            }
        }
        if top.1 < 0.5 {
            return None;
        }
        top.0.min(lines.len() - m)
    };
    let last = start + m - 1;
    let found = &text[lines.spans[start].start..lines.spans[last].content_end];
    let expected = want.join("\n");
    let found = found.replace("\r\n", "\n");
    let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let whitespace_only = squash(&expected) == squash(&found);
    let (expected, found) = (format!("{expected}\n"), format!("{found}\n"));
    let diff = similar::TextDiff::from_lines(expected.as_str(), found.as_str())
        .unified_diff()
        .context_radius(2)
        .header("old_string", &format!("lines {}-{}", start + 1, last + 1))
        .to_string();
    // Bounded: the point is where to look, not the whole file (nor a whole long line).
    let mut diff: String = diff
        .lines()
        .take(40)
        .map(|l| match prefix(l, DIFF_LINE_CHARS) {
            cut if cut.len() < l.len() => format!("{cut}…"),
            whole => whole.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    diff.push('\n');
    Some(Closest {
        first_line: start + 1,
        last_line: last + 1,
        diff,
        whitespace_only,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without a size limit (the tools pass theirs).
    fn locate(text: &str, old: &str, new: &str, all: bool) -> Result<Located, Miss> {
        super::locate(text, old, new, all, u64::MAX, &|| false)
    }

    /// Round 28: a text found at two overlapping places is not unique, by every rule
    /// (the exact and punctuation searches counted matches end to end and took the first).
    #[test]
    fn overlapping_places_are_two_places_under_every_rule() {
        let cases: [(&str, &str, Rule); 6] = [
            ("A\nx\nx\nx\nB\n", "x\nx\n", Rule::Exact),
            ("  });\n});\n});\n", "});\n});", Rule::Exact),
            ("aaa", "aa", Rule::Exact),
            ("x....y\n", "\u{2026}", Rule::Punctuation),
            ("A\r\nx\r\nx\r\nx\r\n", "x\nx\n", Rule::LineEndings),
            ("q \u{2014}\u{2014}\u{2014} r\n", "--", Rule::Punctuation),
        ];
        for (text, old, rule) in cases {
            match locate(text, old, "Z", false) {
                Err(Miss::NotUnique { rule: r, total, .. }) => {
                    assert_eq!(r, rule, "{text:?} {old:?}");
                    assert!(total >= 2, "{text:?} {old:?}");
                }
                other => panic!("{text:?} {old:?}: {other:?}"),
            }
        }
        // Each place of an overlapping run is named.
        let Err(Miss::NotUnique { lines, total, .. }) =
            locate("A\nx\nx\nx\nB\n", "x\nx\n", "Z", false)
        else {
            panic!("not unique");
        };
        assert_eq!((lines, total), (vec![2, 3], 2));
        let Err(Miss::NotUnique { lines, total, .. }) = locate("aaaa a", "aaa", "Z", false) else {
            panic!("not unique");
        };
        assert_eq!((lines, total), (vec![1, 1], 2));
        // Adjacent, not overlapping: still two, as before. One place alone still applies,
        // and replace_all still takes the matches one after another.
        assert!(matches!(
            locate("xx", "x", "y", false),
            Err(Miss::NotUnique { total: 2, .. })
        ));
        assert_eq!(
            locate("abcab", "ca", "Z", false)
                .expect("one")
                .apply("abcab"),
            "abZb"
        );
        assert_eq!(
            locate("aaaa", "aa", "b", true).expect("all").apply("aaaa"),
            "bb"
        );
        // Multibyte text around the window's end (a slice there panicked).
        for (text, old) in [
            ("Le café est très chaud.\nLa crème\n", "café"),
            ("日本語の文章。電車が多い。\n", "本語"),
            ("ééé", "é"),
            ("abcé", "ab"),
            ("xyé\n", "xy"),
        ] {
            let r = locate(text, old, "Z", false);
            assert!(
                r.is_ok() || matches!(r, Err(Miss::NotUnique { .. })),
                "{text:?}: {r:?}"
            );
        }
        assert!(matches!(
            locate("éaéaé", "éaé", "Z", false),
            Err(Miss::NotUnique { total: 2, .. })
        ));
        // A long needle is searched in its window only: quick on a big file.
        let needle = "n".repeat(100_000);
        let text = format!("{}{}", "m".repeat(1 << 20), "n".repeat(150_000));
        assert!(matches!(
            locate(&text, &needle, "Z", false),
            Err(Miss::NotUnique { .. })
        ));
    }

    /// The attacker pass: a 1 MB file of one letter, every letter replaced by 8 KiB, built
    /// 8 GB before any limit was checked. The size is known from the count alone now.
    #[test]
    fn a_replace_all_that_would_grow_past_the_limit_is_refused_before_it_is_built() {
        let text = "e".repeat(1 << 20);
        let new = "E".repeat(8192);
        assert_eq!(
            super::locate(&text, "e", &new, true, 64 << 20, &|| false),
            Err(Miss::TooMany { count: 1 << 20 })
        );
        let text = "ab\n".repeat(50_000);
        assert_eq!(
            super::locate(&text, "a", &new, true, 64 << 20, &|| false),
            Err(Miss::TooLarge {
                bytes: 150_000 - 50_000 + 50_000 * 8192,
                limit: 64 << 20
            })
        );
        let grown =
            super::locate(&text, "a", "xyz", true, 64 << 20, &|| false).expect("under the limit");
        assert_eq!(grown.result_len(text.len()), 250_000);
        assert_eq!(grown.apply(&text).len(), 250_000);
    }

    #[test]
    fn a_miss_over_many_places_names_a_few_and_counts_them_all() {
        let text = "x\n".repeat(10_000);
        let Err(Miss::NotUnique { lines, total, .. }) = locate(&text, "x", "y", false) else {
            panic!("not unique");
        };
        assert_eq!(total, 10_000);
        assert_eq!(lines, (1..=LINES_NAMED).collect::<Vec<_>>());
    }

    fn applied(text: &str, old: &str, new: &str) -> (Rule, String) {
        let l = locate(text, old, new, false).expect("located");
        (l.rule, l.apply(text))
    }

    #[test]
    fn exact_first() {
        assert_eq!(
            applied("a\nb\nc\n", "b", "x"),
            (Rule::Exact, "a\nx\nc\n".into())
        );
    }

    #[test]
    fn an_lf_old_string_matches_a_crlf_file_and_writes_crlf() {
        assert_eq!(
            applied("a\r\nb\r\nc\r\n", "a\nb", "x\ny\nz"),
            (Rule::LineEndings, "x\r\ny\r\nz\r\nc\r\n".into())
        );
    }

    #[test]
    fn a_crlf_old_string_matches_an_lf_file() {
        assert_eq!(
            applied("a\nb\n", "a\r\nb", "x"),
            (Rule::LineEndings, "x\n".into())
        );
    }

    #[test]
    fn new_text_in_a_crlf_file_gets_crlf_even_on_an_exact_match() {
        assert_eq!(
            applied("a\r\nb\r\n", "b", "x\ny"),
            (Rule::Exact, "a\r\nx\r\ny\r\n".into())
        );
    }

    #[test]
    fn trailing_whitespace_is_ignored_line_by_line() {
        assert_eq!(
            applied(
                "fn a() {  \n    x();\t\n}\n",
                "fn a() {\n    x();\n}\n",
                "fn a() {\n    y();\n}\n"
            ),
            (Rule::TrailingWhitespace, "fn a() {  \n    y();\n}\n".into())
        );
    }

    #[test]
    fn a_block_indented_deeper_in_the_file_is_found_and_the_new_text_follows() {
        let text = "impl A {\n    fn a() {\n        x();\n    }\n}\n";
        let (rule, out) = applied(
            text,
            "fn a() {\n    x();\n}",
            "fn a() {\n    y();\n\n    z();\n}",
        );
        assert_eq!(rule, Rule::Indentation);
        assert_eq!(
            out,
            "impl A {\n    fn a() {\n        y();\n\n        z();\n    }\n}\n"
        );
    }

    #[test]
    fn a_block_indented_shallower_in_the_file_is_found_too() {
        let text = "if x {\n  go();\n}\n";
        let (rule, out) = applied(
            text,
            "    if x {\n      go();\n    }\n",
            "    if x {\n      stop();\n    }\n",
        );
        assert_eq!(rule, Rule::Indentation);
        assert_eq!(out, "if x {\n  stop();\n}\n");
    }

    #[test]
    fn tabs_against_spaces_is_not_a_uniform_shift() {
        let miss = locate("\tx();\n\ty();\n", "    x();\n    y();\n", "z", false);
        assert!(matches!(miss, Err(Miss::NotFound { .. })), "{miss:?}");
    }

    #[test]
    fn two_equally_good_fuzzy_places_are_not_unique() {
        let text = "a() {\n  x();  \n}\nb() {\n  x(); \n}\n";
        assert_eq!(
            locate(text, "  x();\n", "y", false),
            Err(Miss::NotUnique {
                rule: Rule::TrailingWhitespace,
                lines: vec![2, 5],
                total: 2
            })
        );
    }

    #[test]
    fn exact_duplicates_are_not_unique_unless_all_are_wanted() {
        assert_eq!(
            locate("x\nx\n", "x", "y", false),
            Err(Miss::NotUnique {
                rule: Rule::Exact,
                lines: vec![1, 2],
                total: 2
            })
        );
        assert_eq!(applied_all("x\nx\n", "x", "y"), "y\ny\n");
    }

    fn applied_all(text: &str, old: &str, new: &str) -> String {
        locate(text, old, new, true).expect("located").apply(text)
    }

    #[test]
    fn a_miss_names_the_closest_region_with_a_diff() {
        let text = "one\ntwo\nfn main() {\n    let x = 1;\n    run(x);\n}\nend\n";
        let Err(Miss::NotFound { closest: Some(c) }) = locate(
            text,
            "fn main() {\n    let x = 2;\n    run(x);\n}",
            "z",
            false,
        ) else {
            panic!("expected a miss with a closest region");
        };
        assert_eq!((c.first_line, c.last_line), (3, 6));
        assert!(c.diff.contains("-    let x = 2;"), "{}", c.diff);
        assert!(c.diff.contains("+    let x = 1;"), "{}", c.diff);
    }

    #[test]
    fn a_miss_with_no_equal_line_points_at_the_most_similar_one() {
        let text = "alpha\nfn compute_total(items) {\nomega\n";
        let Err(Miss::NotFound { closest: Some(c) }) =
            locate(text, "fn compute_totals(items) {", "z", false)
        else {
            panic!("expected a closest region");
        };
        assert_eq!(c.first_line, 2);
    }

    #[test]
    fn nothing_alike_gives_no_region() {
        assert_eq!(
            locate("aaa\nbbb\n", "zzzzzzzz", "y", false),
            Err(Miss::NotFound { closest: None })
        );
    }

    #[test]
    fn a_mixed_file_keeps_each_line_ending() {
        let text = "a\r\nb\nc\r\nd\n";
        // Context lines keep theirs; the replaced line takes the one it replaces.
        assert_eq!(
            applied(text, "a\nb\nc\n", "a\nB\nc\n"),
            (Rule::LineEndings, "a\r\nB\nc\r\nd\n".into())
        );
        // An added line takes the ending of the line before it.
        assert_eq!(
            applied(text, "b\nc\n", "b\nnew\nc\n"),
            (Rule::LineEndings, "a\r\nb\nnew\nc\r\nd\n".into())
        );
        assert_eq!(
            applied(text, "a\r\nb\r\n", "A\r\nb\r\n"),
            (Rule::LineEndings, "A\r\nb\nc\r\nd\n".into())
        );
        // Exactly as given, inside one line: the ending of that line.
        assert_eq!(
            applied(text, "c", "c1\nc2"),
            (Rule::Exact, "a\r\nb\nc1\r\nc2\r\nd\n".into())
        );
        // Trailing whitespace forgiven, endings still per line, and a context line keeps
        // the file's bytes (its trailing spaces).
        assert_eq!(
            applied("x  \r\ny\nz\r\n", "x\ny\nz\n", "x\nY\nz\n"),
            (Rule::TrailingWhitespace, "x  \r\nY\nz\r\n".into())
        );
    }

    #[test]
    fn a_missing_final_newline_stays_missing_unless_the_change_is_at_the_end() {
        // Mid-file change whose context reaches the last line.
        assert_eq!(applied("a\nb\nc", "b\nc\n", "B\nc\n").1, "a\nB\nc");
        assert_eq!(applied("a\r\nb\r\nc", "b\nc\n", "B\nc\n").1, "a\r\nB\r\nc");
        // The last line changed, and the new text ends with a newline.
        assert_eq!(applied("a\nb\nc", "b\nc\n", "b\nC\n").1, "a\nb\nC\n");
        // Exact: as given.
        assert_eq!(applied("a\nb\nc", "c", "C").1, "a\nb\nC");
        // A final newline is kept.
        assert_eq!(applied("a\nb\n", "b\n", "B").1, "a\nB\n");
        assert_eq!(applied("a\r\nb\r\n", "b\n", "B").1, "a\r\nB\r\n");
    }

    #[test]
    fn unicode_punctuation_matches_its_ascii_look_alike_either_way() {
        let text = "x = “hi” — it’s 1…2\u{a0}ok\nother\n";
        assert_eq!(
            applied(text, "x = \"hi\" - it's 1...2 ok", "y = 'new'"),
            (Rule::Punctuation, "y = 'new'\nother\n".into())
        );
        // Inside a line: the bytes around are untouched.
        assert_eq!(
            applied(text, "it's 1", "it is 1"),
            (
                Rule::Punctuation,
                "x = “hi” — it is 1…2\u{a0}ok\nother\n".into()
            )
        );
        // The model wrote Unicode where the file has ASCII; the new text goes in as given.
        assert_eq!(
            applied("say \"hi\" - now\n", "say “hi” – now", "say “bye”"),
            (Rule::Punctuation, "say “bye”\n".into())
        );
        // Two places: not a guess.
        assert!(matches!(
            locate("a “q”\nb\na ”q“\n", "a \"q\"", "z", false),
            Err(Miss::NotUnique {
                rule: Rule::Punctuation,
                total: 2,
                ..
            })
        ));
        // Over several lines, with CRLF.
        assert_eq!(
            applied("p — 1\r\nq — 2\r\n", "p - 1\nq - 2\n", "p\nq\n"),
            (Rule::Punctuation, "p\r\nq\r\n".into())
        );
    }

    /// Each start of a normalized search compares up to the length of old_string: a file
    /// of dashes against a long old_string of dashes is file × old_string work, so the stop
    /// is looked at by the bytes compared.
    #[test]
    fn a_punctuation_search_over_a_hostile_file_stops_at_the_deadline() {
        let text = "-".repeat(1 << 22);
        let old = format!("{}x", "–".repeat(1 << 16));
        let t = std::time::Instant::now();
        let deadline = t + std::time::Duration::from_millis(500);
        let r = super::locate(&text, &old, "y", false, u64::MAX, &|| {
            std::time::Instant::now() > deadline
        });
        assert_eq!(r, Err(Miss::Stopped));
        assert!(
            t.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            t.elapsed()
        );
    }

    /// Past ALIGN_LINES the lines are matched up by position: a same-length change over a
    /// big mixed region still keeps every line's ending.
    #[test]
    fn a_big_mixed_region_keeps_its_endings_by_position() {
        let text = "a\r\nb\n".repeat(15_000);
        let old = text.replace("\r\n", "\n");
        let new = format!("A{}", &old[1..]);
        let (rule, out) = applied(&text, &old, &new);
        assert_eq!(rule, Rule::LineEndings);
        assert_eq!(out, format!("A{}", &text[1..]));
    }
}

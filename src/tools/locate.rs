//! Where an edit applies. The exact text first; when it is not there, in order: the same
//! text with the file's line endings, the same lines ignoring trailing whitespace, the
//! same lines indented uniformly deeper or shallower. A fallback is used only when it
//! finds exactly one place (a guess between two places is worse than a miss); the new
//! text is re-indented like the place found and written with the file's line endings. A
//! miss comes with the closest region and a diff of what was expected against what is
//! there, so a model can correct its `old_string` in one step.
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
}

impl Rule {
    /// For a person: how the text was matched, when not exactly.
    pub fn describe(self) -> Option<&'static str> {
        match self {
            Rule::Exact => None,
            Rule::LineEndings => Some("with the file's line endings"),
            Rule::TrailingWhitespace => Some("ignoring trailing whitespace"),
            Rule::Indentation => Some("with the block's indentation shifted"),
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
    let new_eol = with_eol(new, eol);

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
        if total > MAX_PLACES {
            return Err(Miss::TooMany { count: total });
        }
        let hits = text.match_indices(needle.as_str()).map(|(i, _)| i);
        // An exact match in an LF file keeps new as given; otherwise new follows the file.
        let with: std::sync::Arc<str> = if rule == Rule::Exact && !crlf {
            new.into()
        } else {
            new_eol.as_str().into()
        };
        let places = hits
            .map(|i| Place {
                range: i..i + needle.len(),
                with: with.clone(),
            })
            .collect();
        return Ok(Located { rule, places });
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
                let with = reindent(new, shift, eol);
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
    let closest = closest(&lines, text, &want.lines, stop);
    if stop() {
        return Err(Miss::Stopped);
    }
    Err(Miss::NotFound { closest })
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
        Rule::Exact | Rule::LineEndings => None,
    }
}

/// `new` shifted like the place found, with the file's line endings.
fn reindent(new: &str, shift: &Shift, eol: &str) -> String {
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
    lines.join(eol)
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
            (Rule::TrailingWhitespace, "fn a() {\n    y();\n}\n".into())
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
}

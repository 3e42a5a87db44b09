//! Query planning for the trigram index: from a grep pattern, a boolean query over
//! trigrams that every file holding a match must satisfy (Russ Cox, "Regular Expression
//! Matching with a Trigram Index", 2012). The index answers the query with a candidate
//! set; the regex then runs on the candidates only, so a plan may be loose (more
//! candidates) but never wrong (a file with a match left out).
//!
//! The pattern is parsed by `regex-syntax` with grep's own flags, and each HIR node is
//! summarised bottom up as [`Info`]: whether it can match the empty string, the exact set
//! of strings it matches (when small), else the sets of prefixes and suffixes its matches
//! begin and end with, and a query its matches imply. Sets are bounded ([`MAX_SET`]);
//! when one would grow past the bound its strings are turned into trigram conditions
//! and it is cut down, which only loosens the plan.
//!
//! Trigrams are of bytes with ASCII letters folded to lower case, in the index and here
//! alike: one index serves case-sensitive and case-insensitive searches (a
//! case-sensitive one gets a few more candidates, which the regex then rejects).
//! A pattern the parser refuses, or one with no trigram every match must contain (`\w+`,
//! `^`), plans as [`Query::All`]: every file is a candidate, as a scan.

use regex_syntax::hir::{Class, Hir, HirKind};
use std::collections::BTreeSet;

/// Three bytes, ASCII letters folded to lower case.
pub type Trigram = [u8; 3];

/// A condition on a file's set of trigrams.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Query {
    /// Every file.
    All,
    /// Files containing this trigram.
    Has(Trigram),
    /// Files containing these four bytes (folded), where a file's 4-gram filter can
    /// tell (large files, [`super::quads`]); every file otherwise. The trigrams of the
    /// four bytes are required beside it, so the posting lists still do the pruning.
    Has4([u8; 4]),
    And(Vec<Query>),
    Or(Vec<Query>),
}

impl Query {
    pub fn is_all(&self) -> bool {
        matches!(self, Query::All)
    }

    /// Whether a file holding `text` is a candidate: the index's decision, made on the
    /// text itself (for tests and the fuzz target that check plans never miss a match).
    pub fn admits(&self, text: &[u8]) -> bool {
        fn go(q: &Query, g: &BTreeSet<Trigram>, g4: &BTreeSet<[u8; 4]>) -> bool {
            match q {
                Query::All => true,
                Query::Has(t) => g.contains(t),
                Query::Has4(t) => g4.contains(t),
                Query::And(v) => v.iter().all(|q| go(q, g, g4)),
                Query::Or(v) => v.iter().any(|q| go(q, g, g4)),
            }
        }
        let folded: Vec<u8> = text.iter().map(|&b| fold(b)).collect();
        let g4 = folded
            .windows(4)
            .map(|w| [w[0], w[1], w[2], w[3]])
            .collect();
        go(self, &trigrams(text).collect(), &g4)
    }

    /// Whether the query holds for a file whose 4-gram filter is `filter`, taking every
    /// trigram as present (the posting lists decided those).
    pub fn admits_filter(&self, filter: &[u8]) -> bool {
        match self {
            Query::All | Query::Has(_) => true,
            Query::Has4(t) => super::quads::may_hold(filter, super::quads::key(*t)),
            Query::And(v) => v.iter().all(|q| q.admits_filter(filter)),
            Query::Or(v) => v.iter().any(|q| q.admits_filter(filter)),
        }
    }

    /// Whether any part of the query is a 4-gram condition.
    pub fn has_4grams(&self) -> bool {
        match self {
            Query::Has4(_) => true,
            Query::And(v) | Query::Or(v) => v.iter().any(Query::has_4grams),
            Query::All | Query::Has(_) => false,
        }
    }

    fn and(self, other: Query) -> Query {
        match (self, other) {
            (Query::All, q) | (q, Query::All) => q,
            (Query::And(mut a), Query::And(b)) => {
                a.extend(b);
                Query::And(dedup(a))
            }
            (Query::And(mut a), q) | (q, Query::And(mut a)) => {
                a.push(q);
                Query::And(dedup(a))
            }
            (a, b) if a == b => a,
            (a, b) => Query::And(vec![a, b]),
        }
    }

    fn or(self, other: Query) -> Query {
        match (self, other) {
            (Query::All, _) | (_, Query::All) => Query::All,
            (Query::Or(mut a), Query::Or(b)) => {
                a.extend(b);
                Query::Or(dedup(a))
            }
            (Query::Or(mut a), q) | (q, Query::Or(mut a)) => {
                a.push(q);
                Query::Or(dedup(a))
            }
            (a, b) if a == b => a,
            (a, b) => Query::Or(vec![a, b]),
        }
    }

    /// Files containing every trigram and 4-gram of `s` (all files when `s` is shorter
    /// than 3).
    fn contains(s: &[u8]) -> Query {
        let grams: BTreeSet<Trigram> = trigrams(s).collect();
        let quads: BTreeSet<[u8; 4]> = s
            .windows(4)
            .map(|w| [fold(w[0]), fold(w[1]), fold(w[2]), fold(w[3])])
            .collect();
        // Any subset of necessary trigrams is still necessary: a very long literal is
        // checked by a sample, to keep the query small.
        let sample = |n: usize| n.div_ceil(MAX_GRAMS_PER_STRING).max(1);
        let (step, step4) = (sample(grams.len()), sample(quads.len()));
        let q = grams
            .into_iter()
            .step_by(step)
            .fold(Query::All, |q, g| q.and(Query::Has(g)));
        quads
            .into_iter()
            .step_by(step4)
            .fold(q, |q, g| q.and(Query::Has4(g)))
    }

    /// Files containing one of `set`'s strings whole.
    fn contains_one_of(set: &Set) -> Query {
        let mut q: Option<Query> = None;
        for s in set {
            let c = Query::contains(s);
            if c.is_all() {
                return Query::All;
            }
            q = Some(match q {
                None => c,
                Some(q) => q.or(c),
            });
        }
        q.unwrap_or(Query::All)
    }
}

fn dedup(mut v: Vec<Query>) -> Vec<Query> {
    v.sort();
    v.dedup();
    v
}

/// The folded trigrams of `s`, in order (with repeats).
pub fn trigrams(s: &[u8]) -> impl Iterator<Item = Trigram> + '_ {
    s.windows(3).map(|w| [fold(w[0]), fold(w[1]), fold(w[2])])
}

/// How the index and the plan compare bytes: ASCII letters in lower case.
pub fn fold(b: u8) -> u8 {
    b.to_ascii_lowercase()
}

/// Most strings a set may hold before it is cut down.
const MAX_SET: usize = 16;
/// Most characters a class may have and still be expanded into its strings.
const MAX_CLASS: usize = 8;
/// Most trigrams one literal contributes.
const MAX_GRAMS_PER_STRING: usize = 24;

type Set = BTreeSet<Vec<u8>>;

/// What is known of the strings a HIR node matches.
#[derive(Debug, Clone)]
struct Info {
    can_empty: bool,
    /// Exactly the strings it matches (folded), when known and small.
    exact: Option<Set>,
    /// Every match starts with one of these (meaningful when `exact` is None).
    prefix: Set,
    /// Every match ends with one of these (meaningful when `exact` is None).
    suffix: Set,
    /// A condition every file with a match satisfies.
    query: Query,
}

fn one(s: Vec<u8>) -> Set {
    std::iter::once(s).collect()
}

impl Info {
    fn exact(set: Set) -> Info {
        Info {
            can_empty: set.iter().any(Vec::is_empty),
            exact: Some(set),
            prefix: Set::new(),
            suffix: Set::new(),
            query: Query::All,
        }
    }

    fn empty_string() -> Info {
        Info::exact(one(Vec::new()))
    }

    /// Anything at all (one character or many, maybe none).
    fn anything(can_empty: bool) -> Info {
        Info {
            can_empty,
            exact: None,
            prefix: one(Vec::new()),
            suffix: one(Vec::new()),
            query: Query::All,
        }
    }

    fn prefixes(&self) -> &Set {
        self.exact.as_ref().unwrap_or(&self.prefix)
    }

    fn suffixes(&self) -> &Set {
        self.exact.as_ref().unwrap_or(&self.suffix)
    }

    /// Forgets the exact set, keeping what it implied: its strings as prefixes and
    /// suffixes, and "contains one of them" in the query.
    fn drop_exact(&mut self) {
        if let Some(e) = self.exact.take() {
            self.query =
                std::mem::replace(&mut self.query, Query::All).and(Query::contains_one_of(&e));
            self.prefix = e.clone();
            self.suffix = e;
        }
    }

    /// Keeps the sets small: long prefixes and suffixes become trigram conditions and
    /// are cut to two bytes (enough to make trigrams across a later concatenation).
    fn simplify(mut self) -> Info {
        if self.exact.as_ref().is_some_and(|e| e.len() > MAX_SET) {
            self.drop_exact();
        }
        if self.exact.is_some() {
            return self;
        }
        let q = std::mem::replace(&mut self.query, Query::All);
        let q = q
            .and(Query::contains_one_of(&self.prefix))
            .and(Query::contains_one_of(&self.suffix));
        self.query = q;
        self.prefix = cut(&self.prefix, |s, n| s[..n].to_vec());
        self.suffix = cut(&self.suffix, |s, n| s[s.len() - n..].to_vec());
        self
    }
}

/// Each string cut to at most two bytes, then shorter until the set is small enough.
fn cut(set: &Set, keep: impl Fn(&[u8], usize) -> Vec<u8>) -> Set {
    for n in (0..=2).rev() {
        let out: Set = set.iter().map(|s| keep(s, n.min(s.len()))).collect();
        if out.len() <= MAX_SET {
            return out;
        }
    }
    one(Vec::new())
}

fn cross(a: &Set, b: &Set) -> Set {
    let mut out = Set::new();
    for x in a {
        for y in b {
            let mut s = x.clone();
            s.extend_from_slice(y);
            out.insert(s);
        }
    }
    out
}

fn concat(mut x: Info, mut y: Info) -> Info {
    let query = std::mem::replace(&mut x.query, Query::All)
        .and(std::mem::replace(&mut y.query, Query::All));
    if let (Some(xe), Some(ye)) = (&x.exact, &y.exact)
        && xe.len() * ye.len() <= MAX_SET
    {
        let mut i = Info::exact(cross(xe, ye));
        i.query = query;
        return i.simplify();
    }
    let mut query = query;
    // Trigrams across the joint: some suffix of x followed by some prefix of y.
    let (xs, yp) = (x.suffixes(), y.prefixes());
    if xs.len() * yp.len() <= MAX_SET {
        query = query.and(Query::contains_one_of(&cross(xs, yp)));
    }
    for e in [&x.exact, &y.exact].into_iter().flatten() {
        query = query.and(Query::contains_one_of(e));
    }
    let prefix = match &x.exact {
        Some(xe) if xe.len() * y.prefixes().len() <= MAX_SET => cross(xe, y.prefixes()),
        Some(xe) => xe.clone(),
        None if x.can_empty => x.prefix.union(y.prefixes()).cloned().collect(),
        None => x.prefix.clone(),
    };
    let suffix = match &y.exact {
        Some(ye) if x.suffixes().len() * ye.len() <= MAX_SET => cross(x.suffixes(), ye),
        Some(ye) => ye.clone(),
        None if y.can_empty => y.suffix.union(x.suffixes()).cloned().collect(),
        None => y.suffix.clone(),
    };
    Info {
        can_empty: x.can_empty && y.can_empty,
        exact: None,
        prefix,
        suffix,
        query,
    }
    .simplify()
}

fn alternate(mut x: Info, mut y: Info) -> Info {
    if let (Some(xe), Some(ye)) = (&x.exact, &y.exact)
        && xe.len() + ye.len() <= MAX_SET
    {
        let mut i = Info::exact(xe.union(ye).cloned().collect());
        i.query = x.query.or(y.query);
        return i;
    }
    x.drop_exact();
    y.drop_exact();
    Info {
        can_empty: x.can_empty || y.can_empty,
        exact: None,
        prefix: x.prefix.union(&y.prefix).cloned().collect(),
        suffix: x.suffix.union(&y.suffix).cloned().collect(),
        query: x.query.or(y.query),
    }
    .simplify()
}

/// The strings of a small class, folded; None when it has too many characters.
fn class_strings(c: &Class) -> Option<Set> {
    let mut out = Set::new();
    match c {
        Class::Unicode(u) => {
            let n: u32 = u
                .ranges()
                .iter()
                .map(|r| r.end() as u32 - r.start() as u32 + 1)
                .sum();
            if n as usize > MAX_CLASS {
                return None;
            }
            for r in u.ranges() {
                for ch in r.start()..=r.end() {
                    let mut buf = [0; 4];
                    let s = ch.encode_utf8(&mut buf);
                    out.insert(s.bytes().map(fold).collect());
                }
            }
        }
        Class::Bytes(b) => {
            let n: usize = b
                .ranges()
                .iter()
                .map(|r| r.end() as usize - r.start() as usize + 1)
                .sum();
            if n > MAX_CLASS {
                return None;
            }
            for r in b.ranges() {
                for byte in r.start()..=r.end() {
                    out.insert(vec![fold(byte)]);
                }
            }
        }
    }
    Some(out)
}

fn analyze(h: &Hir) -> Info {
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) => Info::empty_string(),
        HirKind::Literal(l) => Info::exact(one(l.0.iter().copied().map(fold).collect())),
        HirKind::Class(c) => match class_strings(c) {
            // An empty class matches nothing: any summary is true of its (no) matches.
            Some(set) if !set.is_empty() => Info::exact(set),
            _ => Info::anything(false),
        },
        HirKind::Capture(c) => analyze(&c.sub),
        HirKind::Repetition(r) => {
            let sub = analyze(&r.sub);
            match (r.min, r.max) {
                (1, Some(1)) => sub,
                // x? : x's strings or nothing, and nothing of x need be present.
                (0, Some(1)) => match sub.exact {
                    Some(mut e) => {
                        e.insert(Vec::new());
                        Info::exact(e)
                    }
                    None => Info::anything(true),
                },
                (0, _) => Info::anything(true),
                // x{n,m}, n ≥ 1: at least one x, so x's start, x's end and x's query.
                _ => {
                    let mut i = sub;
                    i.drop_exact();
                    i.simplify()
                }
            }
        }
        HirKind::Concat(parts) => parts.iter().map(analyze).fold(Info::empty_string(), concat),
        HirKind::Alternation(parts) => {
            let mut it = parts.iter().map(analyze);
            let first = it.next().unwrap_or_else(|| Info::anything(true));
            it.fold(first, alternate)
        }
    }
}

/// The trigram query for a grep pattern with grep's flags.
pub fn plan(pattern: &str, fixed_strings: bool, ignore_case: bool, multiline: bool) -> Query {
    let escaped;
    let pattern = if fixed_strings {
        escaped = regex_syntax::escape(pattern);
        &escaped
    } else {
        pattern
    };
    let parsed = regex_syntax::ParserBuilder::new()
        .case_insensitive(ignore_case)
        .multi_line(multiline)
        .dot_matches_new_line(multiline)
        .build()
        .parse(pattern);
    let Ok(hir) = parsed else {
        return Query::All; // the search reports the error; the plan never does
    };
    let mut info = analyze(&hir);
    if info.can_empty {
        return Query::All;
    }
    info.drop_exact();
    info.query
        .and(Query::contains_one_of(&info.prefix))
        .and(Query::contains_one_of(&info.suffix))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn has(s: &str) -> Query {
        let b = s.as_bytes();
        Query::Has([b[0], b[1], b[2]])
    }

    fn has4(s: &str) -> Query {
        let b = s.as_bytes();
        Query::Has4([b[0], b[1], b[2], b[3]])
    }

    fn and(v: Vec<Query>) -> Query {
        Query::And(dedup(v))
    }

    /// The index's decision on a file holding `text`: its trigrams, and the 4-gram
    /// filter a large file would have (a match must get through both).
    fn eval(q: &Query, text: &str) -> bool {
        let mut f = super::super::quads::Builder::new(text.len() as u64);
        f.add(text.as_bytes());
        q.admits(text.as_bytes()) && q.admits_filter(&f.finish())
    }

    #[test]
    fn a_literal_needs_all_its_trigrams() {
        assert_eq!(
            plan("hello", false, false, false),
            and(vec![
                has("hel"),
                has("ell"),
                has("llo"),
                has4("hell"),
                has4("ello")
            ])
        );
        assert_eq!(
            plan("Hello", false, true, false),
            plan("hello", false, false, false)
        );
        assert_eq!(
            plan("a.b(", true, false, false),
            and(vec![has("a.b"), has(".b("), has4("a.b(")])
        );
    }

    #[test]
    fn patterns_without_a_necessary_trigram_scan_everything() {
        for p in [
            "^", "\\w+", "a", "ab", ".*", "x*", "(abc)?", "[a-z]+", "a|bcd", "(", "\\b",
        ] {
            assert!(
                plan(p, false, false, false).is_all(),
                "{p}: {:?}",
                plan(p, false, false, false)
            );
        }
    }

    #[test]
    fn alternation_and_classes_become_or() {
        let q = plan("foo|bar", false, false, false);
        assert_eq!(q, Query::Or(dedup(vec![has("foo"), has("bar")])));
        let q = plan("ab[cd]e", false, false, false);
        assert!(
            eval(&q, "xxabcex") && eval(&q, "abde") && !eval(&q, "abxe"),
            "{q:?}"
        );
    }

    #[test]
    fn codesearch_examples_hold() {
        // abc(def|ghi)jkl: the joints give trigrams too.
        let q = plan("abc(def|ghi)jkl", false, false, false);
        assert!(eval(&q, "abcdefjkl"));
        assert!(eval(&q, "abcghijkl"));
        assert!(!eval(&q, "abcdefjk"));
        assert!(!eval(&q, "abc def jkl"));
        // (abc+|def)g — `abc+` is "ab", then c's.
        let q = plan("(abc+|def)g", false, false, false);
        assert!(eval(&q, "abcccg") && eval(&q, "defg"));
        assert!(!eval(&q, "abg"));
        // A regex with a rare literal inside wildcards.
        let q = plan("fn\\s+parse_[a-z]+\\(", false, false, false);
        assert!(eval(&q, "pub fn parse_args(x)"));
        assert!(!eval(&q, "pub fn other(x)"));
    }

    /// The property the index relies on: a text with a match always satisfies the plan.
    #[test]
    fn every_text_with_a_match_satisfies_the_plan() {
        let texts = [
            "hello world",
            "HELLO",
            "fn parse_args(x: i32)",
            "abcdefjkl",
            "foo_bar baz",
            "x = y.unwrap();",
            "TODO(ferret): later",
            "ünïcödé ÄBC",
            "a\tb\tc",
            "12345-678",
            "static int __init foo_init(void)",
            "#include <linux/module.h>",
        ];
        let patterns = [
            "hello",
            "(?i)HeLLo",
            "wor.d",
            "o w",
            "parse_\\w+",
            "fn\\s+\\w+\\(",
            "def|ghi",
            "abc(def|ghi)jkl",
            "ba[rz]",
            "unwrap\\(\\)",
            "TODO\\(.*\\)",
            "ÄBC",
            "(?i)äbc",
            "b\\tc",
            "[0-9]{3}-[0-9]+",
            "__init\\b",
            "^#include",
            "module\\.h>$",
            "o{2}",
            "(foo|bar)_(bar|baz)",
            "x+ = y",
            "a.c",
            "[^x]ello",
        ];
        for p in patterns {
            let re = regex::Regex::new(p).expect("valid");
            for ic in [false, true] {
                let q = plan(p, false, ic, false);
                let re_ic = regex::RegexBuilder::new(p)
                    .case_insensitive(ic)
                    .build()
                    .expect("valid");
                for t in texts {
                    if re_ic.is_match(t) || (!ic && re.is_match(t)) {
                        assert!(
                            eval(&q, t),
                            "{p:?} (ic {ic}) matches {t:?} but plan {q:?} rejects it"
                        );
                    }
                }
            }
        }
    }

    /// Random patterns over a small alphabet (so matches are common) against random
    /// texts: whenever the regex matches, the plan must accept.
    #[test]
    fn random_patterns_never_reject_a_text_they_match() {
        use proptest::prelude::*;
        use proptest::test_runner::{Config, TestRunner};
        let atom = prop_oneof![
            "[abcAB]{1,4}",
            Just(".".to_string()),
            Just("[ab]".to_string()),
            Just("[^a]".to_string()),
            Just("\\w".to_string()),
            Just("\\b".to_string()),
            Just("^".to_string()),
        ];
        let pattern = atom.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 1..4).prop_map(|v| v.concat()),
                (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a}|{b})")),
                (
                    inner.clone(),
                    prop_oneof![Just("*"), Just("+"), Just("?"), Just("{2}"), Just("{1,3}")]
                )
                    .prop_map(|(a, r)| format!("({a}){r}")),
            ]
        });
        let mut runner = TestRunner::new(Config::with_cases(3000));
        runner
            .run(
                &(pattern, "[abcAB \n]{0,24}", any::<bool>()),
                |(p, text, ic)| {
                    let re = regex::RegexBuilder::new(&p).case_insensitive(ic).build();
                    if let Ok(re) = re
                        && re.is_match(&text)
                    {
                        let q = plan(&p, false, ic, false);
                        prop_assert!(
                            eval(&q, &text),
                            "{p:?} ic={ic} matches {text:?}; plan {q:?}"
                        );
                    }
                    Ok(())
                },
            )
            .expect("plans hold");
    }
}

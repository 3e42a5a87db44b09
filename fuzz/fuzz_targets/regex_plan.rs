//! Regex parsing and query planning: for any pattern and text, when grep's matcher
//! finds a match in the text, the trigram plan admits the text, and so does the text's
//! 4-gram filter. A plan that left it out would make the index miss a file a scan finds.
#![no_main]

use ferret::search::{GrepMode, GrepQuery, matcher, plan, quads};
use grep_matcher::Matcher;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let (pattern, text) = match rest.iter().position(|&b| b == 0) {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &b""[..]),
    };
    let Ok(pattern) = std::str::from_utf8(pattern) else {
        return;
    };
    let (fixed, icase, multi) = (flags & 1 != 0, flags & 2 != 0, flags & 4 != 0);
    // A whole-word match is still a match of the pattern, so the plan must admit it too.
    let word = flags & 8 != 0;
    let q = plan::plan(pattern, fixed, icase, multi);
    let query = GrepQuery {
        pattern: pattern.to_string(),
        fixed_strings: fixed,
        ignore_case: icase,
        multiline: multi,
        before: 0,
        after: 0,
        mode: GrepMode::Files,
        needed: 0,
        file_units: false,
        invert: false,
        word,
    };
    let Ok(m) = matcher(&query) else {
        return;
    };
    if m.is_match(text).unwrap_or(false) {
        assert!(
            q.admits(text),
            "pattern {pattern:?} (fixed {fixed}, icase {icase}, multiline {multi}) matches \
             {text:?} but its plan {q:?} leaves the text out"
        );
        // Nor may the 4-gram filter a large file gets ([`quads`]).
        let mut f = quads::Builder::new(text.len() as u64);
        f.add(text);
        assert!(
            q.admits_filter(&f.finish()),
            "pattern {pattern:?} matches {text:?} but its filter rules it out"
        );
    }
});

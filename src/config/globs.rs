//! Deny, skip and confirm patterns compiled the one way that both the check of a
//! workspace's own ferret.toml (narrow.rs) and the sandbox (workspace/patterns.rs) use:
//! each pattern brought to Unicode NFC first (as names are before matching), the
//! case-sensitive ones, then the caseless ones, in one gitignore matcher. A pattern the
//! check lets through therefore compiles in the sandbox: `[\u{F900}-\u{F901}]` is a valid
//! range as typed but a reversed one once in NFC, and is refused by both.

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use std::borrow::Cow;

/// `s` in Unicode NFC (a pattern or glob as typed).
pub fn nfc_str(s: &str) -> Cow<'_, str> {
    use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfc_quick};
    if s.is_ascii() || is_nfc_quick(s.chars()) == IsNormalized::Yes {
        Cow::Borrowed(s)
    } else {
        Cow::Owned(s.nfc().collect())
    }
}

/// Why a list of patterns does not compile: the pattern (as typed) when one alone is
/// at fault, and the compiler's message.
#[derive(Debug)]
pub struct BadPattern {
    pub pattern: Option<String>,
    pub message: String,
}

/// Compiles `sensitive` then `caseless` patterns as the sandbox does; `each` sees every
/// pattern in the form compiled (NFC).
pub fn build<'a>(
    sensitive: impl IntoIterator<Item = &'a str>,
    caseless: impl IntoIterator<Item = &'a str>,
    mut each: impl FnMut(&str),
) -> Result<Gitignore, BadPattern> {
    let mut b = GitignoreBuilder::new("");
    let mut add = |b: &mut GitignoreBuilder, p: &str| {
        let n = nfc_str(p);
        each(&n);
        b.add_line(None, &n).map(|_| ()).map_err(|e| BadPattern {
            pattern: Some(p.to_string()),
            message: e.to_string(),
        })
    };
    for p in sensitive {
        add(&mut b, p)?;
    }
    b.case_insensitive(true).map_err(|e| BadPattern {
        pattern: None,
        message: e.to_string(),
    })?;
    for p in caseless {
        add(&mut b, p)?;
    }
    b.build().map_err(|e| BadPattern {
        pattern: None,
        message: e.to_string(),
    })
}

/// Whether one pattern compiles alone, caseless or not, as the sandbox will compile it;
/// the compiler's message when not.
pub fn check_one(p: &str, caseless: bool) -> Result<(), String> {
    let r = if caseless {
        build([], [p], |_| {})
    } else {
        build([p], [], |_| {})
    };
    r.map(|_| ()).map_err(|e| e.message)
}

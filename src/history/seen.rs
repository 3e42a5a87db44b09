//! Content versions, and what this process has shown agents. `read_file` gives every
//! text it returns a version (a short hash of the file's bytes); `edit`, `write_file` and
//! `apply_patch` take it back as `expected_version` and refuse to change a file that no
//! longer holds it, so a change is never applied on top of edits the agent has not seen.
//! [`Seen`] keeps the last contents read (bounded), so the refusal can show what changed
//! since; a process that never read the file (a one-shot CLI call) refuses without it.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// The version of a file's content: the first 16 hex digits of its SHA-256.
pub fn version_of(bytes: &[u8]) -> String {
    let mut h = super::sha256(bytes);
    h.truncate(16);
    h
}

/// Contents kept at most (the oldest go first).
const KEEP_BYTES: usize = 64 * 1024 * 1024;
/// A content over this is not kept.
const KEEP_ONE_AT_MOST: usize = 4 * 1024 * 1024;
/// Contents kept at most, however small: each costs its version and bookkeeping on top
/// of its bytes, so small ones were bounded only by a byte count they barely touched.
const KEEP_COUNT: usize = 4096;

/// Contents recently returned, by version.
#[derive(Default)]
pub struct Seen {
    kept: Mutex<VecDeque<(String, Arc<str>)>>,
}

impl Seen {
    pub fn new() -> Seen {
        Seen::default()
    }

    /// Remembers `text` as the content of version `version`.
    pub fn remember(&self, version: &str, text: &str) {
        if text.len() > KEEP_ONE_AT_MOST {
            return;
        }
        let mut kept = crate::error::lock(&self.kept);
        if kept.iter().any(|(v, _)| v == version) {
            return;
        }
        kept.push_back((version.to_string(), Arc::from(text)));
        while kept.len() > KEEP_COUNT {
            kept.pop_front();
        }
        let mut total: usize = kept.iter().map(|(_, t)| t.len()).sum();
        while total > KEEP_BYTES {
            match kept.pop_front() {
                Some((_, t)) => total -= t.len(),
                None => break,
            }
        }
    }

    /// The content of `version`, if still kept.
    pub fn get(&self, version: &str) -> Option<Arc<str>> {
        crate::error::lock(&self.kept)
            .iter()
            .rev()
            .find(|(v, _)| v == version)
            .map(|(_, t)| t.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_short_and_follow_the_bytes() {
        assert_eq!(version_of(b"a").len(), 16);
        assert_ne!(version_of(b"a"), version_of(b"b"));
        assert_eq!(version_of(b"a"), version_of(b"a"));
    }

    #[test]
    fn contents_are_kept_by_version_within_bounds() {
        let s = Seen::new();
        s.remember("v1", "one");
        assert_eq!(s.get("v1").as_deref(), Some("one"));
        assert_eq!(s.get("v2"), None);
        let big = "x".repeat(KEEP_ONE_AT_MOST + 1);
        s.remember("big", &big);
        assert_eq!(s.get("big"), None, "too big to keep");
        let chunk = "y".repeat(KEEP_ONE_AT_MOST);
        for i in 0..(KEEP_BYTES / KEEP_ONE_AT_MOST + 1) {
            s.remember(&format!("c{i}"), &chunk);
        }
        assert_eq!(s.get("v1"), None, "the oldest went first");
        assert!(s.get("c1").is_some());
        // Small contents are bounded by their count.
        for i in 0..KEEP_COUNT + 10 {
            s.remember(&format!("s{i}"), "tiny");
        }
        assert_eq!(crate::error::lock(&s.kept).len(), KEEP_COUNT);
        assert_eq!(s.get("s0"), None);
        assert!(s.get(&format!("s{}", KEEP_COUNT + 9)).is_some());
    }
}

//! What a glob's bracket classes cost once compiled, weighed from their text before
//! anything compiles them: ignore files (search/walker.rs) and a workspace file's
//! patterns (narrow.rs) are held to the same measure.
//!
//! A class of ASCII members compiles to one byte class, whatever its size. Each
//! non-ASCII member is a UTF-8 sequence of its own in the automaton: measured on the
//! release build (2-core VM), a gitignore line that is one class of n scattered CJK code
//! points costs ~600 bytes a member (1 333 lines of 256 members: 198 MB; 66 lines of
//! 5 000: 182 MB), where a unit of wildcard weight is reckoned at 15 KB. A range with a
//! non-ASCII end compiles to a few UTF-8 ranges (1 333 lines of `[一-龥]*`: 8 MB).

/// Non-ASCII members (a non-ASCII range counting [`RANGE_MEMBERS`]) one unit of wildcard
/// weight pays for: 16 × ~600 bytes, under the 15 KB a unit is reckoned at.
pub const MEMBERS_PER_UNIT: u64 = 16;

/// What a range with a non-ASCII end counts as, in members.
pub const RANGE_MEMBERS: u64 = 4;

/// The most non-ASCII members one class may have (ranges counted as above). No pattern a
/// person writes comes near; a class past it makes the pattern (and an ignore file
/// holding it) not used.
pub const CLASS_MAX_MEMBERS: u64 = 256;

/// The bracket classes of one glob: the largest class's non-ASCII members, and the
/// wildcard weight they add (the `[` itself is counted as a wildcard by the callers).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Classes {
    pub largest: u64,
    pub weight: u64,
}

impl Classes {
    /// Whether a class is past [`CLASS_MAX_MEMBERS`].
    pub fn over(&self) -> bool {
        self.largest > CLASS_MAX_MEMBERS
    }
}

/// Weighs the bracket classes of a glob (gitignore or globset syntax: `[!…]`/`[^…]`
/// negate, a `]` first is a member, `\` escapes). Bytes that are not UTF-8 count as
/// non-ASCII members; an unclosed class is weighed to the end of the line (erring high).
pub fn classes(p: &[u8]) -> Classes {
    let text = String::from_utf8_lossy(p);
    let mut chars = text.chars().peekable();
    let mut out = Classes::default();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '[' => {
                if matches!(chars.peek(), Some('!' | '^')) {
                    chars.next();
                }
                let mut members = 0u64;
                let mut first = true;
                let mut prev: Option<char> = None;
                while let Some(m) = chars.next() {
                    if m == ']' && !first {
                        break;
                    }
                    first = false;
                    let m = if m == '\\' {
                        chars.next().unwrap_or('\\')
                    } else {
                        m
                    };
                    if m == '-'
                        && let (Some(lo), Some(&hi)) = (prev, chars.peek())
                        && hi != ']'
                    {
                        chars.next();
                        if !lo.is_ascii() || !hi.is_ascii() {
                            // `lo` was counted as a member already.
                            members += RANGE_MEMBERS.saturating_sub(u64::from(!lo.is_ascii()));
                        }
                        prev = None;
                        continue;
                    }
                    if !m.is_ascii() {
                        members += 1;
                    }
                    prev = Some(m);
                }
                out.largest = out.largest.max(members);
                out.weight = out
                    .weight
                    .saturating_add(members.div_ceil(MEMBERS_PER_UNIT));
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_weigh_their_non_ascii_members() {
        assert_eq!(classes(b"*.rs"), Classes::default());
        assert_eq!(classes(b"[abcdefghijklmnopqrstuvwxyz]*").weight, 0);
        assert_eq!(classes(b"[a-z0-9]").largest, 0);
        let cjk: String = (0x4e00u32..0x4e00 + 2 * 300)
            .step_by(2)
            .filter_map(char::from_u32)
            .collect();
        for shape in [
            format!("[{cjk}]*"),
            format!("[!{cjk}]"),
            format!("[^{cjk}]x"),
            format!("a/[]{cjk}]/b"),
            format!("[{cjk}"),
        ] {
            let c = classes(shape.as_bytes());
            assert!(c.largest >= 300 && c.over(), "{shape:.20}: {c:?}");
            assert!(c.weight >= 300 / MEMBERS_PER_UNIT, "{shape:.20}: {c:?}");
        }
        // Two classes of 200: each under the cap, both weighed.
        let half: String = cjk.chars().take(200).collect();
        let two = classes(format!("[{half}]/[{half}]").as_bytes());
        assert!(!two.over());
        assert_eq!(two.weight, 2 * 200u64.div_ceil(MEMBERS_PER_UNIT));
        // A non-ASCII range is a few members; an escaped `[` opens nothing.
        assert_eq!(classes("[一-龥]".as_bytes()).largest, RANGE_MEMBERS);
        assert_eq!(classes("\\[一二]".as_bytes()).largest, 0);
        // Bytes that are not UTF-8 count high, never as free.
        assert!(classes(b"[\xff\xfe\xfd]").largest >= 3);
    }
}

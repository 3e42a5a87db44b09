//! Deny and skip pattern sets, in gitignore syntax, matched against root-relative paths.
//!
//! Deny and confirm sets match without regard to case ([`PatternSet::new_caseless`]):
//! on macOS and Windows volumes (and case-folding Linux directories) `.ENV`, `KEY.PEM`
//! and `id_RSA` are the same files as `.env`, `key.pem` and `id_rsa`, and even where they
//! are not, a secret by another case is still a secret. Skip rules keep their case.
//!
//! Every set, and the glob filters of `glob` and `grep`, matches names whatever their
//! Unicode normalisation ([`nfc`]): HFS+ stores names decomposed (NFD), APFS keeps the
//! form they were made in and finds either, and a folder copied from a Mac to Linux
//! keeps its NFD names; `sécret/` typed in NFC is the same folder as its NFD spelling on
//! disk. Patterns and names are both brought to NFC before matching; the name reported
//! is always the one on disk.

use crate::error::{ErrorCode, ToolError};
use ignore::gitignore::Gitignore;
use std::borrow::Cow;
use std::path::{Path, PathBuf};

/// A compiled list of gitignore-style patterns.
#[derive(Clone, Debug)]
pub struct PatternSet {
    matcher: Gitignore,
    prefilter: Prefilter,
}

/// A necessary condition for a match, checked on the file name alone: a gitignore pattern
/// can only match a path whose last component matches the pattern's last component. Most
/// names meet no literal, prefix or suffix of the list, and skip the full matcher (which
/// runs a regex set for patterns like `.env.*` and shares its cache between threads).
#[derive(Clone, Debug, Default)]
struct Prefilter {
    literals: std::collections::HashSet<Vec<u8>>,
    prefixes: Vec<Vec<u8>>,
    suffixes: Vec<Vec<u8>>,
    /// Some pattern's last component is no simple shape: always run the matcher.
    always: bool,
    /// Literals, prefixes and suffixes are ASCII-lowercased, and so is the name.
    caseless: bool,
}

impl Prefilter {
    fn add(&mut self, pattern: &str) {
        let p = pattern.trim();
        if p.is_empty() || p.starts_with('#') || p.starts_with('!') {
            return; // comments and re-allows never make a match
        }
        let p = p.trim_end_matches('/');
        let last = p.rsplit('/').next().unwrap_or(p);
        let meta = |s: &str| s.contains(['*', '?', '[', '{', '\\']);
        if self.caseless && !last.is_ascii() {
            // Unicode case folding (the Kelvin sign is a `k`): no byte shortcut.
            self.always = true;
            return;
        }
        let owned = if self.caseless {
            last.to_ascii_lowercase()
        } else {
            last.to_string()
        };
        let last = owned.as_str();
        if !meta(last) {
            self.literals.insert(last.as_bytes().to_vec());
        } else if let Some(rest) = last.strip_prefix('*').filter(|r| !meta(r)) {
            self.suffixes.push(rest.as_bytes().to_vec());
        } else if let Some(rest) = last.strip_suffix('*').filter(|r| !meta(r)) {
            self.prefixes.push(rest.as_bytes().to_vec());
        } else {
            self.always = true;
        }
    }

    fn may_match(&self, rel: &Path) -> bool {
        if self.always {
            return true;
        }
        let Some(name) = rel.file_name() else {
            return true;
        };
        let lowered;
        let name = if self.caseless {
            if !name.is_ascii() {
                return true; // folding beyond ASCII: let the matcher decide
            }
            lowered = name.as_encoded_bytes().to_ascii_lowercase();
            &lowered[..]
        } else {
            name.as_encoded_bytes()
        };
        self.literals.contains(name)
            || self.suffixes.iter().any(|s| name.ends_with(s))
            || self.prefixes.iter().any(|p| name.starts_with(p))
    }
}

/// `rel` with each non-ASCII character case-folded (simple folding: `c` upper-cased,
/// then lower-cased: `ſ` and `S` give `s`, the Kelvin sign `k`; `İ` gives `i`), bytes that are not
/// UTF-8 kept as they are; `None` when that changes nothing (every ASCII name: the
/// matcher already ignores ASCII case).
fn fold(rel: &Path) -> Option<std::path::PathBuf> {
    let bytes = rel.as_os_str().as_encoded_bytes();
    if bytes.is_ascii() {
        return None;
    }
    let mut out: Vec<u8> = Vec::with_capacity(bytes.len());
    let mut changed = false;
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c.is_ascii() {
                out.push(c as u8);
                continue;
            }
            if c == '\u{130}' {
                // `İ` folds to `i` plus a dot above: taken as the `i` (`İd_rsa`).
                changed = true;
                out.push(b'i');
                continue;
            }
            let mut buf = [0u8; 4];
            for f in c.to_uppercase().flat_map(char::to_lowercase) {
                changed |= f != c;
                out.extend_from_slice(f.encode_utf8(&mut buf).as_bytes());
            }
        }
        out.extend_from_slice(chunk.invalid());
    }
    if !changed {
        return None;
    }
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStringExt;
        Some(std::ffi::OsString::from_vec(out).into())
    }
    #[cfg(not(unix))]
    {
        Some(String::from_utf8_lossy(&out).into_owned().into())
    }
}

pub use crate::config::globs::nfc_str;

/// `rel` with its UTF-8 parts in Unicode NFC (bytes that are not UTF-8 kept as they
/// are); `None` when that changes nothing (every ASCII path, at the cost of one scan).
pub fn nfc(rel: &Path) -> Option<PathBuf> {
    use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfc_quick};
    let bytes = rel.as_os_str().as_encoded_bytes();
    if bytes.is_ascii() {
        return None;
    }
    let mut out: Vec<u8> = Vec::with_capacity(bytes.len());
    let mut changed = false;
    for chunk in bytes.utf8_chunks() {
        let v = chunk.valid();
        if is_nfc_quick(v.chars()) == IsNormalized::Yes {
            out.extend_from_slice(v.as_bytes());
        } else {
            let n: String = v.nfc().collect();
            changed |= n != v;
            out.extend_from_slice(n.as_bytes());
        }
        out.extend_from_slice(chunk.invalid());
    }
    if !changed {
        return None;
    }
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStringExt;
        Some(std::ffi::OsString::from_vec(out).into())
    }
    #[cfg(not(unix))]
    {
        Some(String::from_utf8_lossy(&out).into_owned().into())
    }
}

/// `rel` in NFC, borrowed when it already is.
pub fn nfc_cow(rel: &Path) -> Cow<'_, Path> {
    match nfc(rel) {
        Some(n) => Cow::Owned(n),
        None => Cow::Borrowed(rel),
    }
}

impl PatternSet {
    /// Case-sensitive patterns (skip rules).
    pub fn new<'a>(patterns: impl IntoIterator<Item = &'a str>) -> Result<Self, ToolError> {
        Self::mixed(patterns, [])
    }

    /// Patterns that match whatever the case (deny and confirm rules): `.ENV`, `Id_Rsa`.
    pub fn new_caseless<'a>(
        patterns: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, ToolError> {
        Self::mixed([], patterns)
    }

    /// One matcher over case-sensitive patterns, then caseless ones (a walk's skip then
    /// deny rules, one lookup per entry).
    pub fn mixed<'a>(
        sensitive: impl IntoIterator<Item = &'a str>,
        caseless: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, ToolError> {
        let mut prefilter = Prefilter::default();
        let sensitive: Vec<&str> = sensitive.into_iter().collect();
        let caseless: Vec<&str> = caseless.into_iter().collect();
        // A lowered prefilter is still a necessary condition for case-sensitive
        // patterns: one prefilter for both.
        prefilter.caseless = !caseless.is_empty();
        // Patterns in NFC, as names are brought to before matching: compiled by the
        // function that also checks a workspace's own ferret.toml (config/globs.rs).
        let matcher = crate::config::globs::build(sensitive, caseless, |p| prefilter.add(p))
            .map_err(|e| {
                let message = match e.pattern {
                    Some(p) => format!("bad pattern {p:?}: {}", e.message),
                    None => e.message,
                };
                ToolError::new(ErrorCode::InvalidGlob, message)
            })?;
        Ok(PatternSet { matcher, prefilter })
    }

    /// Whether `rel` (relative to its root) or any directory above it is matched.
    ///
    /// Unlike gitignore, a `!` re-allow applies only at its own level: `!.env.example`
    /// must not re-allow `.aws/.env.example` when `.aws/` is denied.
    pub fn matches(&self, rel: &Path, is_dir: bool) -> bool {
        self.matches_below(rel, Path::new(""), is_dir)
    }

    /// Like [`matches`](Self::matches), but directories at or above `base` do not count:
    /// a walk the agent started inside `node_modules/` lists it.
    pub fn matches_below(&self, rel: &Path, base: &Path, is_dir: bool) -> bool {
        if rel.as_os_str().is_empty() || self.matcher.is_empty() {
            return false;
        }
        if self.matches_below_as_is(rel, base, is_dir) {
            return true;
        }
        // The name in NFC, as the patterns are: `sécret` decomposed on disk.
        let (rel, base) = (nfc_cow(rel), nfc_cow(base));
        if matches!(rel, Cow::Owned(_)) && self.matches_below_as_is(&rel, &base, is_dir) {
            return true;
        }
        // Caseless beyond ASCII: `id_rſa` and `x.Key` (a Kelvin sign) are `id_rsa` and
        // `x.key` once folded, as APFS and NTFS fold them.
        match (self.prefilter.caseless, fold(&rel)) {
            (true, Some(folded)) => {
                let folded = nfc(&folded).unwrap_or(folded);
                let base = fold(&base).unwrap_or_else(|| base.to_path_buf());
                let base = nfc(&base).unwrap_or(base);
                self.matches_below_as_is(&folded, &base, is_dir)
            }
            _ => false,
        }
    }

    fn matches_below_as_is(&self, rel: &Path, base: &Path, is_dir: bool) -> bool {
        let mut ancestor = rel.parent();
        while let Some(a) = ancestor {
            if a.as_os_str().is_empty() || base.starts_with(a) {
                break;
            }
            if self.matcher.matched(a, true).is_ignore() {
                return true;
            }
            ancestor = a.parent();
        }
        self.matcher.matched(rel, is_dir).is_ignore()
    }

    /// Whether `rel` itself is matched, its directories not considered.
    pub fn matches_leaf(&self, rel: &Path, is_dir: bool) -> bool {
        let leaf = |rel: &Path| {
            self.prefilter.may_match(rel) && self.matcher.matched(rel, is_dir).is_ignore()
        };
        if self.matcher.is_empty() {
            return false;
        }
        if leaf(rel) {
            return true;
        }
        let n = nfc(rel);
        if n.as_deref().is_some_and(leaf) {
            return true;
        }
        let rel = n.as_deref().unwrap_or(rel);
        self.prefilter.caseless && fold(rel).is_some_and(|f| leaf(&nfc(&f).unwrap_or(f)))
    }

    /// For a name whose type is not known yet: matched as a file or as a directory.
    pub fn matches_any_type(&self, rel: &Path) -> bool {
        self.matches(rel, false) || self.matches(rel, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{DEFAULT_DENY, DEFAULT_SKIP};

    fn deny() -> PatternSet {
        PatternSet::new(DEFAULT_DENY.iter().copied()).unwrap()
    }

    #[test]
    fn default_deny_blocks_secrets_at_any_depth() {
        let d = deny();
        for p in [
            ".env",
            ".env.local",
            "app/.env.production",
            "certs/server.pem",
            "tls/site.key",
            "home/.ssh/id_rsa",
            "id_ed25519.pub",
            ".npmrc",
            "pkg/.pypirc",
            ".netrc",
            "config/credentials.json",
            ".git/config",
            ".git/objects/ab/cdef",
            ".aws/credentials",
            ".aws/.env.example",
            "deploy/secrets.yaml",
            "infra/terraform.tfstate",
        ] {
            assert!(d.matches(Path::new(p), false), "{p} should be denied");
        }
        assert!(d.matches(Path::new(".git"), true));
    }

    #[test]
    fn default_deny_leaves_ordinary_source_alone() {
        let d = deny();
        for p in [
            "src/tokenizer.rs",
            "auth/password_reset.py",
            "docs/secrets-management.md",
            ".env.example",
            "config/.env.sample",
            "src/keyboard.rs",
            "environment.md",
            "src/token.rs",
            ".gitignore",
            ".github/workflows/ci.yml",
            "credentials_test.go",
        ] {
            assert!(!d.matches(Path::new(p), false), "{p} should be readable");
        }
    }

    #[test]
    fn default_skip_matches_noise_directories_and_binaries() {
        let s = PatternSet::new(DEFAULT_SKIP.iter().copied()).unwrap();
        assert!(s.matches(Path::new("node_modules"), true));
        assert!(s.matches(Path::new("web/node_modules/react/index.js"), false));
        assert!(s.matches(Path::new("target/debug/ferret"), false));
        // build-output names deeper down may be source (the kernel's drivers/target)
        assert!(!s.matches(Path::new("drivers/target/core.c"), false));
        assert!(!s.matches(Path::new("tools/build/Makefile"), false));
        assert!(s.matches(Path::new("lib/foo.so"), false));
        // a file called `build` is not a build directory
        assert!(!s.matches(Path::new("build"), false));
        assert!(!s.matches(Path::new("src/build.rs"), false));
    }

    #[test]
    fn skip_rules_apply_only_below_the_walk_base() {
        let s = PatternSet::new(DEFAULT_SKIP.iter().copied()).unwrap();
        let nm = Path::new("web/node_modules");
        assert!(!s.matches_below(Path::new("web/node_modules/react"), nm, true));
        assert!(s.matches_below(Path::new("web/node_modules/react/node_modules"), nm, true));
        assert!(s.matches_below(Path::new("web/node_modules"), Path::new("web"), true));
        assert!(s.matches_below(Path::new("web/node_modules/lib.so"), nm, false));
    }

    proptest::proptest! {
        /// The prefilter never hides a match: on random names built from the parts of the
        /// default patterns, matches_leaf agrees with the matcher alone.
        #[test]
        fn prefilter_never_hides_a_match(
            dir in "(|src/|a/b/|\\.aws/|node_modules/)",
            name in "(\\.env|\\.env\\.local|\\.env\\.example|id_rsa|id_rsa\\.pub|x\\.pem|target|build|credentials\\.json|config\\.json|config|a\\.tfstate\\.backup|main\\.rs|\\.DS_Store|lib\\.so|[a-z._]{1,8})",
            is_dir in proptest::bool::ANY,
        ) {
            let all: Vec<&str> = DEFAULT_DENY.iter().chain(DEFAULT_SKIP).copied().collect();
            let set = PatternSet::new(all.iter().copied()).unwrap();
            let rel = format!("{dir}{name}");
            let rel = Path::new(&rel);
            proptest::prop_assert_eq!(set.matches_leaf(rel, is_dir), set.matcher.matched(rel, is_dir).is_ignore());
        }
    }

    #[test]
    fn names_match_in_either_unicode_normal_form() {
        let (nfc_e, nfd_e) = ("\u{e9}", "e\u{301}");
        for (pat, name) in [
            (nfc_e, nfd_e),
            (nfd_e, nfc_e),
            (nfc_e, nfc_e),
            (nfd_e, nfd_e),
        ] {
            for set in [
                PatternSet::new([
                    format!("s{pat}cret/**").as_str(),
                    format!("r{pat}sum{pat}.txt").as_str(),
                ])
                .unwrap(),
                PatternSet::new_caseless([
                    format!("s{pat}cret/**").as_str(),
                    format!("r{pat}sum{pat}.txt").as_str(),
                ])
                .unwrap(),
            ] {
                let deep = format!("s{name}cret/a/b.txt");
                assert!(set.matches(Path::new(&deep), false), "{deep:?}");
                let leaf = format!("x/r{name}sum{name}.txt");
                assert!(set.matches(Path::new(&leaf), false), "{leaf:?}");
                assert!(set.matches_leaf(Path::new(&leaf), false), "{leaf:?}");
                assert!(!set.matches(Path::new("secret/a.txt"), false));
            }
            // Caseless and normalisation-less at once: `SÉCRET` decomposed.
            let set = PatternSet::new_caseless([format!("s{pat}cret/").as_str()]).unwrap();
            let upper = if name == nfd_e { "E\u{301}" } else { "\u{c9}" };
            let p = format!("S{upper}CRET/k");
            assert!(set.matches(Path::new(&p), false), "{p:?}");
        }
        assert_eq!(nfc(Path::new("plain/ascii")), None);
        assert_eq!(
            nfc(Path::new("caf\u{65}\u{301}")),
            Some(PathBuf::from("caf\u{e9}"))
        );
    }

    #[test]
    fn user_patterns_extend_deny() {
        let d = PatternSet::new(
            DEFAULT_DENY
                .iter()
                .copied()
                .chain([".obsidian/", ".smarthole/"]),
        )
        .unwrap();
        assert!(d.matches(Path::new("vault/.obsidian/workspace.json"), false));
        assert!(d.matches(Path::new(".smarthole"), true));
        assert!(!d.matches(Path::new("notes/obsidian.md"), false));
    }
}

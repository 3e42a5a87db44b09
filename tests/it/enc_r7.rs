//! Issues 25 and 28 (brief S32A): what a write leaves is what the agent meant. Every
//! text write (edit, apply_patch, write_file, notebook_edit, each also as a dry run)
//! reads its new bytes back the way read_file reads a file (the encoding detected anew)
//! before anything is changed, and refuses with UNREPRESENTABLE when they would read as
//! other text: bytes that look like a BOM, text that tips the detector's guess, an edit
//! that makes a legacy file valid UTF-8, a NUL. A content's own leading U+FEFF survives
//! a round trip; undo's diff of a legacy file is decoded in its charset and names it; a
//! notebook that is not UTF-8 JSON is refused with the reason.

use crate::util::{Ws, call, ok, snapshot, write};
use encoding_rs::{
    Encoding, ISO_8859_2, SHIFT_JIS, UTF_8, UTF_16BE, UTF_16LE, WINDOWS_1250, WINDOWS_1251,
    WINDOWS_1252,
};
use ferret::ErrorCode;
use ferret::text::{Codec, decode, encode};
use serde_json::{Value, json};

/// A file's text in `enc` (with its BOM when `bom`).
fn bytes_of(enc: &'static Encoding, bom: bool, text: &str) -> Vec<u8> {
    encode(&Codec { encoding: enc, bom }, text, false).expect("fixture representable")
}

/// One write of one line: the file (its text in an encoding), the line changed and
/// what it becomes.
struct Case {
    what: &'static str,
    enc: &'static Encoding,
    bom: bool,
    text: String,
    old_line: String,
    new_line: String,
}

impl Case {
    fn new(
        what: &'static str,
        enc: &'static Encoding,
        bom: bool,
        text: &str,
        old: &str,
        new: &str,
    ) -> Case {
        Case {
            what,
            enc,
            bom,
            text: text.to_string(),
            old_line: old.to_string(),
            new_line: new.to_string(),
        }
    }
    fn before(&self) -> Vec<u8> {
        bytes_of(self.enc, self.bom, &self.text)
    }
    fn new_text(&self) -> String {
        self.text.replacen(&self.old_line, &self.new_line, 1)
    }
    /// The bytes a write in the file's own encoding makes (every byte outside the line
    /// as it was: these encodings re-encode the fixtures' text to the same bytes).
    fn naive(&self) -> Vec<u8> {
        bytes_of(self.enc, self.bom, &self.new_text())
    }
    /// Whether those bytes, read as read_file reads them, are other text.
    fn misreads(&self) -> bool {
        decode(&self.naive()).map(|d| d.text) != Some(self.new_text())
    }
}

const FRENCH: &str = "Le caf\u{e9} est tr\u{e8}s chaud.\nLa cr\u{e8}me br\u{fb}l\u{e9}e co\u{fb}te cinq euros.\nNous avons visit\u{e9} la fa\u{e7}ade de l'\u{e9}glise.\n";
/// "Privet mir, eto test, ochen' horoshiy den'" in windows-1251's bytes, as windows-1252
/// shows them: text that tips chardetng's guess.
const CYR_AS_1252: &str = "\u{cf}\u{f0}\u{e8}\u{e2}\u{e5}\u{f2} \u{ec}\u{e8}\u{f0}, \u{fd}\u{f2}\u{ee} \u{f2}\u{e5}\u{f1}\u{f2}, \u{ee}\u{f7}\u{e5}\u{ed}\u{fc} \u{f5}\u{ee}\u{f0}\u{ee}\u{f8}\u{e8}\u{e9} \u{e4}\u{e5}\u{ed}\u{fc} \u{e4}\u{eb}\u{ff} \u{e2}\u{f1}\u{e5}\u{f5} \u{eb}\u{fe}\u{e4}\u{e5}\u{e9} \u{ed}\u{e0} \u{e7}\u{e5}\u{ec}\u{eb}\u{e5}";
const POLISH: &str = "Za\u{17c}\u{f3}\u{142}\u{107} g\u{119}\u{15b}l\u{105} ja\u{17a}\u{144}.\nPchn\u{105}\u{107} w t\u{119} \u{142}\u{f3}d\u{17a} je\u{17c}a.\n\u{141}\u{f3}d\u{17a} p\u{142}ynie po rzece.\n";

/// Writes in many encodings, each of the class: some would read back as other text
/// (those must be refused), others must land exactly.
fn cases() -> Vec<Case> {
    let one_line = "first line\ncaf\u{e9} au lait\nlast line\n";
    let ascii = "hello\nworld\n";
    vec![
        // Bytes that look like a BOM, at the start of a legacy file.
        Case::new(
            "1252 + FF FE",
            WINDOWS_1252,
            false,
            FRENCH,
            "Le caf\u{e9}",
            "\u{ff}\u{fe}Le caf\u{e9}",
        ),
        Case::new(
            "1252 + FE FF",
            WINDOWS_1252,
            false,
            FRENCH,
            "Le caf\u{e9}",
            "\u{fe}\u{ff}Le caf\u{e9}",
        ),
        Case::new(
            "1252 + EF BB BF",
            WINDOWS_1252,
            false,
            FRENCH,
            "Le caf\u{e9}",
            "\u{ef}\u{bb}\u{bf}Le caf\u{e9}",
        ),
        Case::new(
            "1250 + FF FE",
            WINDOWS_1250,
            false,
            POLISH,
            "Za\u{17c}",
            "\u{2d9}\u{163}Za\u{17c}",
        ),
        // An edit of line 2 that leaves a legacy file valid UTF-8 (it would read as "é").
        Case::new(
            "1252 line 2 to UTF-8 look-alike",
            WINDOWS_1252,
            false,
            one_line,
            "caf\u{e9} au lait",
            "caf\u{c3}\u{a9} au lait",
        ),
        // Shift_JIS whose only text becomes UTF-8's bytes for 日本.
        Case::new(
            "sjis to UTF-8 look-alike",
            SHIFT_JIS,
            false,
            "a\n\u{65e5}\u{672c}\u{8a9e}\u{306e}\u{6587}\nb\n",
            "\u{65e5}\u{672c}\u{8a9e}\u{306e}\u{6587}",
            "\u{8b4c}\u{ff65}\u{8b5b}\u{ff6c}",
        ),
        // Text that tips the guess to another single-byte charset.
        Case::new(
            "1252 tipped to 1251",
            WINDOWS_1252,
            false,
            one_line,
            "caf\u{e9} au lait",
            CYR_AS_1252,
        ),
        Case::new(
            "1252 tipped, line 2 of 3",
            WINDOWS_1252,
            false,
            FRENCH,
            "La cr\u{e8}me br\u{fb}l\u{e9}e co\u{fb}te cinq euros.",
            &format!("{CYR_AS_1252} {CYR_AS_1252}"),
        ),
        // A NUL makes any file binary.
        Case::new(
            "1252 + NUL",
            WINDOWS_1252,
            false,
            FRENCH,
            "Le caf\u{e9}",
            "Le\0caf\u{e9}",
        ),
        Case::new(
            "utf-16le + NUL",
            UTF_16LE,
            true,
            "a\r\nb \u{e9}\r\n",
            "b \u{e9}",
            "b\0\u{e9}",
        ),
        Case::new("utf-8 + NUL", UTF_8, false, ascii, "world", "wor\0ld"),
        // Control characters make a legacy file binary.
        Case::new(
            "1252 + control characters",
            WINDOWS_1252,
            false,
            FRENCH,
            "Le caf\u{e9}",
            "Le \u{1}\u{2}\u{3}\u{4} caf\u{e9}",
        ),
        // A leading U+FEFF in a file with no BOM reads as one.
        Case::new(
            "utf-8 + leading U+FEFF",
            UTF_8,
            false,
            ascii,
            "hello",
            "\u{feff}hello",
        ),
        // A file that is UTF-8 but for one byte (read as windows-1252): editing that
        // byte away would leave it UTF-8, reading "café" where "cafÃ©" was written.
        Case::new(
            "utf-8 but one byte, the byte edited away",
            WINDOWS_1252,
            false,
            "caf\u{c3}\u{a9} au lait, cr\u{c3}\u{a8}me\nprix: 5 \u{20ac}\n",
            "5 \u{20ac}",
            "5 EUR",
        ),
        // Mixed line endings in a legacy file: a BOM look-alike on a CRLF line 1.
        Case::new(
            "1252 mixed endings + FF FE",
            WINDOWS_1252,
            false,
            "caf\u{e9}\r\nth\u{e9}\nlait\r\n",
            "caf\u{e9}",
            "\u{ff}\u{fe}caf\u{e9}",
        ),
        // Controls: these read back as meant and are written.
        Case::new(
            "1252 mixed endings, line 2",
            WINDOWS_1252,
            false,
            "caf\u{e9}\r\nth\u{e9}\nlait\r\n",
            "th\u{e9}",
            "tis\u{e2}ne",
        ),
        Case::new(
            "utf-8 BOM + leading U+FEFF",
            UTF_8,
            true,
            ascii,
            "hello",
            "\u{feff}hello",
        ),
        Case::new(
            "utf-16be + leading U+FEFF",
            UTF_16BE,
            true,
            "hello\nw\u{f6}rld\n",
            "hello",
            "\u{feff}hello",
        ),
        Case::new(
            "utf-16le CRLF + leading U+FEFF",
            UTF_16LE,
            true,
            "hello\r\nw\u{f6}rld\r\n",
            "hello",
            "\u{feff}hello",
        ),
        Case::new(
            "1252 plain change",
            WINDOWS_1252,
            false,
            FRENCH,
            "Le caf\u{e9}",
            "Le th\u{e9}",
        ),
        Case::new(
            "1252 made ASCII",
            WINDOWS_1252,
            false,
            one_line,
            "caf\u{e9} au lait",
            "cafe au lait",
        ),
        Case::new(
            "8859-2 plain change",
            ISO_8859_2,
            false,
            POLISH,
            "Za\u{17c}\u{f3}\u{142}\u{107}",
            "\u{17b}\u{f3}\u{142}w",
        ),
        Case::new(
            "1251 plain change",
            WINDOWS_1251,
            false,
            "\u{41f}\u{440}\u{438}\u{432}\u{435}\u{442} \u{43c}\u{438}\u{440}\n\u{43f}\u{43e}\u{43a}\u{430}\n",
            "\u{43f}\u{43e}\u{43a}\u{430}",
            "\u{434}\u{43e} \u{441}\u{432}\u{438}\u{434}\u{430}\u{43d}\u{438}\u{44f}",
        ),
    ]
}

/// The calls that write `c`'s change: edit, apply_patch and write_file, each with
/// `dry_run`.
fn writes(c: &Case, name: &str, dry_run: bool) -> Vec<(&'static str, Value)> {
    let patch = format!(
        "*** Begin Patch\n*** Update File: {name}\n@@\n-{}\n+{}\n*** End Patch\n",
        c.text
            .lines()
            .find(|l| l.contains(&c.old_line))
            .unwrap()
            .trim_end_matches('\r'),
        c.text
            .lines()
            .find(|l| l.contains(&c.old_line))
            .unwrap()
            .trim_end_matches('\r')
            .replacen(&c.old_line, &c.new_line, 1)
    );
    vec![
        (
            "edit",
            json!({"path": name, "old_string": c.old_line, "new_string": c.new_line, "dry_run": dry_run}),
        ),
        ("apply_patch", json!({"patch": patch, "dry_run": dry_run})),
        (
            "write_file",
            json!({"path": name, "content": c.new_text(), "overwrite": true, "dry_run": dry_run}),
        ),
    ]
}

#[test]
fn a_write_that_would_change_how_the_file_reads_is_refused_by_every_tool() {
    let ws = Ws::new();
    let mut refused = Vec::new();
    for (i, c) in cases().iter().enumerate() {
        // One client per case: the calls stay under the per-round request limit.
        let f = ws.ferret();
        let name = format!("f{i}.txt");
        write(&ws.root, &name, c.before());
        // The fixture reads as its text before the change.
        let (r, _) = ok(&f, "read_file", json!({"path": name}));
        assert_eq!(r["content"], c.text.as_str(), "{}: {r}", c.what);
        let misreads = c.misreads();
        for dry_run in [true, false] {
            for (tool, args) in writes(c, &name, dry_run) {
                let before = snapshot(&ws.root);
                let r = call(&f, tool, args.clone());
                if misreads {
                    let e = r.expect_err(&format!("{} {tool} dry_run={dry_run}: written", c.what));
                    assert_eq!(
                        e.code,
                        ErrorCode::Unrepresentable,
                        "{} {tool}: {e:?}",
                        c.what
                    );
                    assert!(e.message.contains("read back as"), "{e:?}");
                    assert!(e.message.contains("nothing was"), "{e:?}");
                    let hint = e.hint.as_deref().unwrap_or_default();
                    assert!(
                        hint.contains("write_file") && hint.contains("utf-8"),
                        "{e:?}"
                    );
                    assert_eq!(
                        snapshot(&ws.root),
                        before,
                        "{} {tool}: nothing changed",
                        c.what
                    );
                    continue;
                }
                let v = r.unwrap_or_else(|e| panic!("{} {tool} dry_run={dry_run}: {e:?}", c.what));
                if dry_run {
                    assert_eq!(snapshot(&ws.root), before, "{} {tool}: a dry run", c.what);
                    continue;
                }
                // Written: every byte outside the change as it was, and it reads back.
                let after = std::fs::read(ws.root.join(&name)).unwrap();
                assert_eq!(after, c.naive(), "{} {tool}: {v}", c.what);
                let (r, _) = ok(&f, "read_file", json!({"path": name}));
                assert_eq!(r["content"], c.new_text().as_str(), "{} {tool}", c.what);
                ok(&f, "undo", json!({}));
                assert_eq!(
                    std::fs::read(ws.root.join(&name)).unwrap(),
                    c.before(),
                    "{}",
                    c.what
                );
            }
        }
        if misreads {
            refused.push(c.what);
        }
    }
    // The class is exercised: BOM look-alikes, a UTF-8 look-alike by line 2, the tipped
    // guesses, NULs, a leading U+FEFF without a BOM.
    for must in [
        "1252 + FF FE",
        "1252 + FE FF",
        "1252 + EF BB BF",
        "1250 + FF FE",
        "1252 line 2 to UTF-8 look-alike",
        "sjis to UTF-8 look-alike",
        "1252 tipped to 1251",
        "1252 tipped, line 2 of 3",
        "1252 + NUL",
        "utf-16le + NUL",
        "utf-8 + NUL",
        "utf-8 + leading U+FEFF",
        "utf-8 but one byte, the byte edited away",
        "1252 mixed endings + FF FE",
        "1252 + control characters",
    ] {
        assert!(
            refused.contains(&must),
            "{must} reads back as meant? refused: {refused:?}"
        );
    }
    assert_eq!(refused.len(), 15, "{refused:?}");
}

#[test]
fn a_contents_own_leading_u_feff_survives_every_bom_path() {
    let ws = Ws::new();
    let f = ws.ferret();
    let files: &[(&str, &'static Encoding, bool)] = &[
        ("le.txt", UTF_16LE, true),
        ("be.txt", UTF_16BE, true),
        ("u8.txt", UTF_8, true),
        ("le_crlf.txt", UTF_16LE, true),
    ];
    for (name, enc, bom) in files {
        let crlf = name.contains("crlf");
        let nl = if crlf { "\r\n" } else { "\n" };
        write(
            &ws.root,
            name,
            bytes_of(enc, *bom, &format!("old{nl}text{nl}")),
        );
        // The agent's content starts with U+FEFF, and a later line does too.
        let content = "\u{feff}hello\n\u{feff}second\nthird\n";
        let (v, _) = ok(
            &f,
            "write_file",
            json!({"path": name, "content": content, "overwrite": true}),
        );
        let want = content.replace('\n', nl);
        // The file's BOM, then the content's own U+FEFF, encoded.
        assert_eq!(
            std::fs::read(ws.root.join(name)).unwrap(),
            bytes_of(enc, *bom, &want),
            "{name}: {v}"
        );
        // Read back whole, and by ranges: each U+FEFF of the text is there once.
        let (r, _) = ok(&f, "read_file", json!({"path": name}));
        assert_eq!(r["content"], want.as_str(), "{name}");
        let (r, _) = ok(&f, "read_file", json!({"path": name, "limit": 1}));
        assert_eq!(r["content"], format!("\u{feff}hello{nl}"), "{name}: {r}");
        let (r, _) = ok(
            &f,
            "read_file",
            json!({"path": name, "offset": 2, "limit": 1}),
        );
        assert_eq!(r["content"], format!("\u{feff}second{nl}"), "{name}: {r}");
        // An edit at the start keeps it too.
        ok(
            &f,
            "edit",
            json!({"path": name, "old_string": "\u{feff}hello", "new_string": "\u{feff}\u{feff}hi"}),
        );
        let want = want.replacen("\u{feff}hello", "\u{feff}\u{feff}hi", 1);
        assert_eq!(
            std::fs::read(ws.root.join(name)).unwrap(),
            bytes_of(enc, *bom, &want),
            "{name}"
        );
        let (r, _) = ok(&f, "read_file", json!({"path": name}));
        assert_eq!(r["content"], want.as_str(), "{name}");
    }
    // A new file (no BOM to keep): a leading U+FEFF would be read as a BOM, so the text
    // write is refused, nothing created; told encoding utf-8, the bytes are written as
    // given (a UTF-8 file with a BOM).
    for content in ["\u{feff}new\n", "\u{feff}"] {
        let before = snapshot(&ws.root);
        for dry_run in [true, false] {
            let e = call(
                &f,
                "write_file",
                json!({"path": "new.txt", "content": content, "dry_run": dry_run}),
            )
            .unwrap_err();
            assert_eq!(e.code, ErrorCode::Unrepresentable, "{e:?}");
            assert!(e.message.contains("byte-order mark"), "{e:?}");
            assert_eq!(snapshot(&ws.root), before);
        }
    }
    ok(
        &f,
        "write_file",
        json!({"path": "new.txt", "content": "\u{feff}new\n", "encoding": "utf-8"}),
    );
    assert_eq!(
        std::fs::read(ws.root.join("new.txt")).unwrap(),
        b"\xEF\xBB\xBFnew\n"
    );
    let (r, _) = ok(&f, "read_file", json!({"path": "new.txt"}));
    assert_eq!(r["content"], "new\n");
    assert_eq!(r["charset"], "utf-8 with BOM");
    // A file that is only a BOM keeps it, and the content's U+FEFF after it; an empty
    // file has no BOM, so there the U+FEFF would be read as one: refused, nothing changed.
    for (name, bytes, enc) in [
        ("only_bom8.txt", &b"\xEF\xBB\xBF"[..], UTF_8),
        ("only_bom16.txt", b"\xFF\xFE", UTF_16LE),
        ("empty.txt", b"", UTF_8),
    ] {
        write(&ws.root, name, bytes);
        let (r, _) = ok(&f, "read_file", json!({"path": name}));
        assert_eq!(r["content"], "", "{name}");
        let args = json!({"path": name, "content": "\u{feff}x\n", "overwrite": true});
        if bytes.is_empty() {
            let e = call(&f, "write_file", args).unwrap_err();
            assert_eq!(e.code, ErrorCode::Unrepresentable, "{e:?}");
            assert_eq!(std::fs::read(ws.root.join(name)).unwrap(), b"");
            continue;
        }
        ok(&f, "write_file", args);
        let mut want = bytes.to_vec();
        want.extend(bytes_of(enc, false, "\u{feff}x\n"));
        assert_eq!(std::fs::read(ws.root.join(name)).unwrap(), want, "{name}");
        let (r, _) = ok(&f, "read_file", json!({"path": name}));
        assert_eq!(r["content"], "\u{feff}x\n", "{name}");
    }
}

#[test]
fn undo_diffs_of_files_in_any_encoding_are_their_text_and_name_the_charset() {
    let ws = Ws::new();
    let f = ws.ferret();
    let jp = "\u{65e5}\u{672c}\u{8a9e}\u{306e}\u{6587}\u{7ae0}\r\n\u{5bff}\u{53f8}\u{3068}\u{5929}\u{3077}\u{3089}\r\n";
    let files: &[(&str, &'static Encoding, bool, &str, &str, &str, &str)] = &[
        (
            "w.txt",
            WINDOWS_1252,
            false,
            FRENCH,
            "Le caf\u{e9}",
            "Le th\u{e9} gla\u{e7}\u{e9}",
            "windows-1252",
        ),
        (
            "j.txt",
            SHIFT_JIS,
            false,
            jp,
            "\u{5bff}\u{53f8}",
            "\u{5929}\u{4e3c}",
            "shift_jis",
        ),
        (
            "u.txt",
            UTF_16LE,
            true,
            "caf\u{e9}\r\nna\u{ef}ve\r\n",
            "na\u{ef}ve",
            "r\u{e9}sum\u{e9}",
            "utf-16le with BOM",
        ),
        (
            "p.txt",
            ISO_8859_2,
            false,
            POLISH,
            "Pchn\u{105}\u{107}",
            "P\u{142}yn\u{105}\u{107}",
            "iso-8859-2",
        ),
    ];
    for (name, enc, bom, text, old, new, charset) in files {
        let before = bytes_of(enc, *bom, text);
        write(&ws.root, name, &before);
        let (r, _) = ok(&f, "read_file", json!({"path": name}));
        assert_eq!(r["charset"], *charset, "{name}");
        ok(
            &f,
            "edit",
            json!({"path": name, "old_string": old, "new_string": new}),
        );
        let old_line = text
            .lines()
            .find(|l| l.contains(old))
            .unwrap()
            .trim_end_matches('\r');
        let new_line = old_line.replacen(old, new, 1);
        for dry_run in [true, false] {
            let (v, _) = ok(&f, "undo", json!({"dry_run": dry_run}));
            let diff = v["diff"].as_str().unwrap();
            // The lines as the file's text, never U+FFFD for its bytes, and the header
            // names the charset each side was decoded from.
            assert!(diff.contains(&format!("-{new_line}")), "{name}: {diff}");
            assert!(diff.contains(&format!("+{old_line}")), "{name}: {diff}");
            assert!(!diff.contains('\u{FFFD}'), "{name}: {diff}");
            assert!(
                diff.contains(&format!("(now, {charset})")),
                "{name}: {diff}"
            );
            assert!(
                diff.contains(&format!("(restored, {charset})")),
                "{name}: {diff}"
            );
        }
        // The bytes restored are the very bytes.
        assert_eq!(std::fs::read(ws.root.join(name)).unwrap(), before, "{name}");
    }
    // A patch that deletes a legacy file shows its text; its undo's diff too.
    let patch = "*** Begin Patch\n*** Delete File: w.txt\n*** End Patch\n";
    let (v, _) = ok(&f, "apply_patch", json!({"patch": patch}));
    let s = v.to_string();
    assert!(s.contains("-Le caf\u{e9} est tr\u{e8}s chaud."), "{s}");
    assert!(!s.contains('\u{FFFD}'), "{s}");
    let (v, _) = ok(&f, "undo", json!({}));
    let diff = v["diff"].as_str().unwrap();
    assert!(
        diff.contains("+Le caf\u{e9} est tr\u{e8}s chaud."),
        "{diff}"
    );
    assert!(diff.contains("(restored, windows-1252)"), "{diff}");
    assert_eq!(
        std::fs::read(ws.root.join("w.txt")).unwrap(),
        bytes_of(WINDOWS_1252, false, FRENCH)
    );
    // Undo of a legacy file's creation (written as raw bytes) shows what is removed.
    let raw = bytes_of(WINDOWS_1252, false, FRENCH);
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(&raw);
    ok(
        &f,
        "write_file",
        json!({"path": "c.txt", "content": b64, "encoding": "base64"}),
    );
    let (v, _) = ok(&f, "undo", json!({}));
    let diff = v["diff"].as_str().unwrap();
    assert!(
        diff.contains("-Le caf\u{e9} est tr\u{e8}s chaud."),
        "{diff}"
    );
    assert!(diff.contains("(now, windows-1252)"), "{diff}");
    assert!(!ws.root.join("c.txt").exists());
}

/// A small nbformat 4 notebook with a non-ASCII cell.
const NOTEBOOK: &str = "{\n \"cells\": [\n  {\n   \"cell_type\": \"markdown\",\n   \"id\": \"a1\",\n   \"metadata\": {},\n   \"source\": [\n    \"# Caf\u{e9} cr\u{e8}me\"\n   ]\n  },\n  {\n   \"cell_type\": \"code\",\n   \"execution_count\": null,\n   \"id\": \"b2\",\n   \"metadata\": {},\n   \"outputs\": [],\n   \"source\": [\n    \"print('na\u{ef}ve')\"\n   ]\n  }\n ],\n \"metadata\": {},\n \"nbformat\": 4,\n \"nbformat_minor\": 5\n}\n";

#[test]
fn a_notebook_that_is_not_utf8_json_is_refused_with_the_reason_and_still_reads() {
    let ws = Ws::new();
    let f = ws.ferret();
    let files: &[(&str, &'static Encoding, bool, &str)] = &[
        ("w.ipynb", WINDOWS_1252, false, "windows-1252"),
        ("le.ipynb", UTF_16LE, true, "utf-16le"),
        ("be.ipynb", UTF_16BE, true, "utf-16be"),
        ("bom.ipynb", UTF_8, true, "byte-order mark"),
    ];
    for (name, enc, bom, why) in files {
        write(&ws.root, name, bytes_of(enc, *bom, NOTEBOOK));
        // read_file reads it (as cells or as text): the cell's words are there.
        let (r, text) = ok(&f, "read_file", json!({"path": name}));
        assert!(text.contains("na\u{ef}ve"), "{name}: {text}");
        assert!(!r.to_string().contains('\u{FFFD}'), "{name}: {r}");
        let before = snapshot(&ws.root);
        for dry_run in [true, false] {
            for args in [
                json!({"path": name, "cell_id": "b2", "new_source": "print(1)", "dry_run": dry_run}),
                json!({"path": name, "cell_index": 0, "edit_mode": "delete", "dry_run": dry_run}),
                json!({"path": name, "cell_id": "a1", "edit_mode": "insert", "new_source": "x", "dry_run": dry_run}),
            ] {
                let e = call(&f, "notebook_edit", args).unwrap_err();
                assert_eq!(e.code, ErrorCode::InvalidArgument, "{name}: {e:?}");
                assert!(e.message.contains(why), "{name}: {e:?}");
                assert!(e.message.contains("UTF-8 JSON"), "{name}: {e:?}");
                assert!(e.message.contains("nothing was changed"), "{name}: {e:?}");
                assert!(
                    e.hint.as_deref().unwrap_or_default().contains("write_file"),
                    "{e:?}"
                );
                assert_eq!(snapshot(&ws.root), before, "{name}");
            }
        }
        // Its text stays editable with edit, in its own encoding.
        ok(
            &f,
            "edit",
            json!({"path": name, "old_string": "na\u{ef}ve", "new_string": "r\u{e9}sum\u{e9}"}),
        );
        assert_eq!(
            std::fs::read(ws.root.join(name)).unwrap(),
            bytes_of(
                enc,
                *bom,
                &NOTEBOOK.replace("na\u{ef}ve", "r\u{e9}sum\u{e9}")
            ),
            "{name}"
        );
    }
    // The same notebook in UTF-8 is edited.
    write(&ws.root, "ok.ipynb", NOTEBOOK);
    ok(
        &f,
        "notebook_edit",
        json!({"path": "ok.ipynb", "cell_id": "b2", "new_source": "print(1)"}),
    );
}

#[test]
fn edits_racing_a_swap_between_encodings_write_text_read_from_the_bytes_replaced() {
    let ws = Ws::new();
    let f = std::sync::Arc::new(ws.ferret());
    let fr = format!("{FRENCH}marker\n");
    let jp =
        "\u{65e5}\u{672c}\u{8a9e}\u{306e}\u{6587}\u{7ae0}\nmarker\n\u{5bff}\u{53f8}\n".to_string();
    let versions = [
        (
            bytes_of(WINDOWS_1252, false, &fr),
            fr.clone(),
            "windows-1252",
        ),
        (bytes_of(SHIFT_JIS, false, &jp), jp.clone(), "shift_jis"),
    ];
    write(&ws.root, "race.txt", &versions[0].0);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // How many swaps the swapper has made: the edits go on until it has made enough
    // (on a loaded machine 40 edits can be over before it is scheduled ten times).
    let swaps = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    // Every state the file may be in: a version, or a version with "marker" edited.
    let allowed: Vec<String> = versions
        .iter()
        .flat_map(|(_, t, _)| [t.clone(), t.replace("marker", "marker edited")])
        .collect();
    let swapper = {
        let (root, stop, versions, allowed, swaps) = (
            ws.root.clone(),
            stop.clone(),
            versions.clone(),
            allowed.clone(),
            swaps.clone(),
        );
        std::thread::spawn(move || {
            let mut seen = 0;
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                // What stands there reads as one of the texts, never a mix.
                let now = std::fs::read(root.join("race.txt")).unwrap();
                let d = decode(&now).expect("the file is always text");
                assert!(
                    allowed.contains(&d.text),
                    "{:?} read as {:?}",
                    d.codec,
                    d.text
                );
                seen += 1;
                swaps.store(seen, std::sync::atomic::Ordering::Relaxed);
                i += 1;
                let tmp = root.join(format!(".swap{i}"));
                std::fs::write(&tmp, &versions[i % 2].0).unwrap();
                std::fs::rename(&tmp, root.join("race.txt")).unwrap();
                std::thread::sleep(std::time::Duration::from_micros(300));
            }
            seen
        })
    };
    let mut landed = 0;
    // 40 edits (the session's round allows 50 calls), each after the swapper has made
    // about one swap per two edits so far: interleaved however the machine schedules.
    for n in 0..40u64 {
        let wait = std::time::Instant::now() + std::time::Duration::from_millis(200);
        while swaps.load(std::sync::atomic::Ordering::Relaxed) < n / 2
            && std::time::Instant::now() < wait
        {
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        let r = call(
            &f,
            "edit",
            json!({"path": "race.txt", "old_string": "marker\n", "new_string": "marker edited\n"}),
        );
        // An edit the swapper replaced the file under is refused (CONFLICT: the file was
        // replaced by another program while it was made), never landed on other bytes.
        let v = match r {
            Ok(v) => v,
            Err(e) => {
                assert!(
                    matches!(e.code, ErrorCode::Conflict | ErrorCode::NoMatch),
                    "{e:?}"
                );
                continue;
            }
        };
        landed += 1;
        // The change was made from, and in, one version's bytes: its diff is that text
        // and the charset named is that version's.
        let diff = v["diff"].as_str().unwrap();
        assert!(!diff.contains('\u{FFFD}'), "{diff}");
        let (_, _, charset) = if diff.contains("caf\u{e9}") {
            &versions[0]
        } else {
            &versions[1]
        };
        if diff.contains("\u{65e5}\u{672c}") || diff.contains("\u{5bff}") {
            assert_eq!(v["charset"], "shift_jis", "{v}");
        } else {
            assert_eq!(v["charset"], *charset, "{v}");
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let seen = swapper.join().unwrap();
    // (Every edit may meet a swap: then none lands, each refused.)
    assert!(seen > 10, "seen {seen}, landed {landed}");
    // Once still, an edit lands byte-exact in the version that stands.
    write(&ws.root, "race.txt", &versions[1].0);
    ok(
        &f,
        "edit",
        json!({"path": "race.txt", "old_string": "marker\n", "new_string": "marker edited\n"}),
    );
    assert_eq!(
        std::fs::read(ws.root.join("race.txt")).unwrap(),
        bytes_of(SHIFT_JIS, false, &jp.replace("marker", "marker edited"))
    );
}

#[test]
fn large_legacy_files_around_the_detectors_window_are_checked_the_same_way() {
    let ws = Ws::new();
    let f = ws.ferret();
    let max = ferret::text::DETECT_MAX;
    for (i, size) in [max - 1, max, max + 1, 3 * max].into_iter().enumerate() {
        // French lines in windows-1252, padded with ASCII to exactly `size` bytes.
        let mut text = String::from("HEAD caf\u{e9}\n");
        while text.len() + FRENCH.len() + 64 < size {
            text.push_str(FRENCH);
        }
        let mut bytes = bytes_of(WINDOWS_1252, false, &text);
        let pad = size - bytes.len() - 1;
        text.push_str(&"x".repeat(pad));
        text.push('\n');
        bytes = bytes_of(WINDOWS_1252, false, &text);
        assert_eq!(bytes.len(), size);
        let name = format!("big{i}.txt");
        write(&ws.root, &name, &bytes);
        // A whole read (within read_file's 1 MiB) and ranged ones name the same charset.
        if size <= max {
            let (r, _) = ok(&f, "read_file", json!({"path": name}));
            assert_eq!(r["charset"], "windows-1252", "{size}");
        }
        let (r, _) = ok(&f, "read_file", json!({"path": name, "limit": 1}));
        assert_eq!(r["content"], "HEAD caf\u{e9}\n", "{size}");
        let (r, _) = ok(
            &f,
            "read_file",
            json!({"path": name, "offset": 2, "limit": 1}),
        );
        assert_eq!(r["charset"], "windows-1252", "{size}");
        // A BOM look-alike at the start is refused, nothing changed.
        let e = call(
            &f,
            "edit",
            json!({"path": name, "old_string": "HEAD caf\u{e9}", "new_string": "\u{ff}\u{fe}HEAD caf\u{e9}"}),
        )
        .unwrap_err();
        assert_eq!(e.code, ErrorCode::Unrepresentable, "{size}: {e:?}");
        assert_eq!(std::fs::read(ws.root.join(&name)).unwrap(), bytes);
        // A plain change lands, every other byte kept, in reasonable time.
        let t = std::time::Instant::now();
        ok(
            &f,
            "edit",
            json!({"path": name, "old_string": "HEAD caf\u{e9}", "new_string": "HEAD th\u{e9}"}),
        );
        assert!(
            t.elapsed() < std::time::Duration::from_secs(10),
            "{size}: {:?}",
            t.elapsed()
        );
        let want = bytes_of(
            WINDOWS_1252,
            false,
            &text.replacen("HEAD caf\u{e9}", "HEAD th\u{e9}", 1),
        );
        assert_eq!(std::fs::read(ws.root.join(&name)).unwrap(), want, "{size}");
    }
}

#[test]
fn a_patch_adding_a_file_that_would_read_as_other_text_changes_nothing() {
    let ws = Ws::new();
    let f = ws.ferret();
    write(&ws.root, "w.txt", bytes_of(WINDOWS_1252, false, FRENCH));
    let before = snapshot(&ws.root);
    for added in ["\u{feff}starts with a BOM", "has a\0NUL", "\u{feff}"] {
        // With an update of another file first: the patch is all or nothing.
        let patch = format!(
            "*** Begin Patch\n*** Update File: w.txt\n@@\n-Le caf\u{e9} est tr\u{e8}s chaud.\n+Le th\u{e9}.\n*** Add File: new.txt\n+{added}\n*** End Patch\n"
        );
        for dry_run in [true, false] {
            let e = call(
                &f,
                "apply_patch",
                json!({"patch": patch, "dry_run": dry_run}),
            )
            .unwrap_err();
            assert_eq!(e.code, ErrorCode::Unrepresentable, "{added:?}: {e:?}");
            assert!(e.message.contains("read back as"), "{e:?}");
            assert_eq!(snapshot(&ws.root), before, "{added:?}");
        }
    }
    // Without them the same patch lands.
    let patch = "*** Begin Patch\n*** Update File: w.txt\n@@\n-Le caf\u{e9} est tr\u{e8}s chaud.\n+Le th\u{e9}.\n*** Add File: new.txt\n+fine \u{e9}\n*** End Patch\n";
    ok(&f, "apply_patch", json!({"patch": patch}));
    assert_eq!(
        std::fs::read(ws.root.join("w.txt")).unwrap(),
        bytes_of(
            WINDOWS_1252,
            false,
            &FRENCH.replace("Le caf\u{e9} est tr\u{e8}s chaud.", "Le th\u{e9}.")
        )
    );
    assert_eq!(
        std::fs::read(ws.root.join("new.txt")).unwrap(),
        "fine \u{e9}\n".as_bytes()
    );
    // A notebook that is no text at all is still BINARY_FILE.
    write(&ws.root, "nul.ipynb", b"{\"cells\": []\x00\x01\xff}");
    let e = call(
        &f,
        "notebook_edit",
        json!({"path": "nul.ipynb", "cell_index": 0, "edit_mode": "insert", "new_source": "x"}),
    )
    .unwrap_err();
    assert_eq!(e.code, ErrorCode::BinaryFile, "{e:?}");
}

#[test]
fn a_conflicts_diff_of_a_legacy_file_is_its_text() {
    let ws = Ws::new();
    let f = ws.ferret();
    for (name, enc, bom) in [("w.txt", WINDOWS_1252, false), ("u.txt", UTF_16LE, true)] {
        write(&ws.root, name, bytes_of(enc, bom, FRENCH));
        let (r, _) = ok(&f, "read_file", json!({"path": name}));
        let version = r["version"].as_str().unwrap().to_string();
        // Changed behind the agent's back.
        let changed = FRENCH.replace("Le caf\u{e9}", "Le th\u{e9}");
        write(&ws.root, name, bytes_of(enc, bom, &changed));
        let e = call(
            &f,
            "edit",
            json!({"path": name, "old_string": "cr\u{e8}me", "new_string": "glace", "expected_version": version}),
        )
        .unwrap_err();
        assert_eq!(e.code, ErrorCode::Conflict, "{e:?}");
        assert!(
            e.message.contains("-Le caf\u{e9} est"),
            "{name}: {}",
            e.message
        );
        assert!(
            e.message.contains("+Le th\u{e9} est"),
            "{name}: {}",
            e.message
        );
        assert!(!e.message.contains('\u{FFFD}'), "{}", e.message);
        assert_eq!(
            std::fs::read(ws.root.join(name)).unwrap(),
            bytes_of(enc, bom, &changed)
        );
    }
}

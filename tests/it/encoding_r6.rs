//! Issue 28, item 2: files in any encoding round-trip (brief E). For windows-1252,
//! Latin-1 bytes, Shift_JIS, UTF-16LE+BOM with CRLF, UTF-16BE+BOM and UTF-8+BOM:
//! read_file shows the text and names the encoding; grep (scan and index) finds a
//! non-ASCII word on the right line; edit and apply_patch change one line and every
//! other byte stays as it was (whole files compared); text the encoding cannot hold is
//! refused with nothing changed; write_file keeps the encoding; undo restores the exact
//! bytes; binary files are still BINARY_FILE.

use crate::util::{Ws, call, code, ok, snapshot, tempdir, write};
use encoding_rs::{Encoding, SHIFT_JIS, UTF_8, UTF_16BE, UTF_16LE, WINDOWS_1252};
use ferret::ErrorCode;
use ferret::config::{Config, Mode};
use ferret::{CancelToken, Ferret};
use serde_json::json;

/// One fixture: a file name, its text, its encoding, whether it has a BOM, the name
/// ferret gives the encoding, a non-ASCII word on line `word_line`, and a line to change
/// into another that the encoding holds.
struct Case {
    name: &'static str,
    text: &'static str,
    enc: &'static Encoding,
    bom: bool,
    shown: &'static str,
    word: &'static str,
    word_line: u64,
    old_line: &'static str,
    new_line: &'static str,
}

const FRENCH: &str = "Le caf\u{e9} est tr\u{e8}s chaud ce matin.\n\
La cr\u{e8}me br\u{fb}l\u{e9}e co\u{fb}te cinq \u{20ac} au d\u{e9}jeuner.\n\
Nous avons visit\u{e9} la fa\u{e7}ade de l'\u{e9}glise, na\u{ef}vement.\n\
Les \u{e9}l\u{e8}ves \u{e9}tudient la litt\u{e9}rature fran\u{e7}aise.\n\
O\u{f9} est la biblioth\u{e8}que? \u{c0} c\u{f4}t\u{e9} du th\u{e9}\u{e2}tre.\n";

const GERMAN: &str = "Gr\u{fc}\u{df}e aus M\u{fc}nchen und K\u{f6}ln.\n\
Die B\u{e4}ume im Stra\u{df}enverkehr sind sch\u{f6}n gr\u{fc}n.\n\
\u{dc}ber die Br\u{fc}cke f\u{e4}hrt ein wei\u{df}er Wagen.\n\
Das M\u{e4}dchen h\u{f6}rt fr\u{f6}hliche Ged\u{e4}chtnism\u{fc}sik.\n\
Er a\u{df} s\u{fc}\u{df}e \u{c4}pfel und \u{f6}de Pr\u{fc}fungen.\n";

const JAPANESE: &str = "\u{65e5}\u{672c}\u{8a9e}\u{306e}\u{6587}\u{7ae0}\u{3092}\u{66f8}\u{304d}\u{307e}\u{3059}\u{3002}\r\n\
\u{6771}\u{4eac}\u{306f}\u{5927}\u{304d}\u{306a}\u{90fd}\u{5e02}\u{3067}\u{3059}\u{3002}\u{96fb}\u{8eca}\u{304c}\u{591a}\u{3044}\u{3067}\u{3059}\u{3002}\r\n\
\u{79c1}\u{306f}\u{5bff}\u{53f8}\u{3068}\u{5929}\u{3077}\u{3089}\u{304c}\u{597d}\u{304d}\u{3067}\u{3059}\u{3002}\r\n\
\u{4eca}\u{65e5}\u{306f}\u{3044}\u{3044}\u{5929}\u{6c17}\u{3067}\u{3059}\u{306d}\u{3002}\u{6563}\u{6b69}\u{3057}\u{307e}\u{3057}\u{3087}\u{3046}\u{3002}\r\n\
\u{3053}\u{308c}\u{306f}\u{30c6}\u{30b9}\u{30c8}\u{306e}\u{30d5}\u{30a1}\u{30a4}\u{30eb}\u{3067}\u{3059}\u{3002}\r\n";

const WIN: &str = "Line one: na\u{ef}ve r\u{e9}sum\u{e9}\r\n\
Line two: \u{3b1}\u{3b2}\u{3b3} \u{4e2d}\u{6587} caf\u{e9}\r\n\
Line three: \u{1f600} emoji\r\n";

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "cp1252.txt",
            text: FRENCH,
            enc: WINDOWS_1252,
            bom: false,
            shown: "windows-1252",
            word: "biblioth\u{e8}que",
            word_line: 5,
            old_line: "Les \u{e9}l\u{e8}ves \u{e9}tudient la litt\u{e9}rature fran\u{e7}aise.",
            new_line: "Les \u{e9}l\u{e8}ves lisent \u{c6}sope \u{2014} \u{ab}vite\u{bb}.",
        },
        Case {
            name: "latin1.txt",
            text: GERMAN,
            enc: WINDOWS_1252,
            bom: false,
            shown: "windows-1252",
            word: "Br\u{fc}cke",
            word_line: 3,
            old_line: "Das M\u{e4}dchen h\u{f6}rt fr\u{f6}hliche Ged\u{e4}chtnism\u{fc}sik.",
            new_line: "Das M\u{e4}dchen \u{f6}ffnet die T\u{fc}r.",
        },
        Case {
            name: "sjis.txt",
            text: JAPANESE,
            enc: SHIFT_JIS,
            bom: false,
            shown: "shift_jis",
            word: "\u{5bff}\u{53f8}",
            word_line: 3,
            old_line: "\u{4eca}\u{65e5}\u{306f}\u{3044}\u{3044}\u{5929}\u{6c17}\u{3067}\u{3059}\u{306d}\u{3002}\u{6563}\u{6b69}\u{3057}\u{307e}\u{3057}\u{3087}\u{3046}\u{3002}",
            new_line: "\u{660e}\u{65e5}\u{306f}\u{96e8}\u{3067}\u{3059}\u{3002}",
        },
        Case {
            name: "utf16le.txt",
            text: WIN,
            enc: UTF_16LE,
            bom: true,
            shown: "utf-16le",
            word: "\u{4e2d}\u{6587}",
            word_line: 2,
            old_line: "Line three: \u{1f600} emoji",
            new_line: "Line three: \u{1f680} r\u{e9}\u{e9}crit",
        },
        Case {
            name: "utf16be.txt",
            text: FRENCH,
            enc: UTF_16BE,
            bom: true,
            shown: "utf-16be",
            word: "biblioth\u{e8}que",
            word_line: 5,
            old_line: "Les \u{e9}l\u{e8}ves \u{e9}tudient la litt\u{e9}rature fran\u{e7}aise.",
            new_line: "Les \u{e9}l\u{e8}ves \u{2192} \u{4e2d}\u{6587}.",
        },
        Case {
            name: "utf8bom.txt",
            text: GERMAN,
            enc: UTF_8,
            bom: true,
            shown: "utf-8",
            word: "Br\u{fc}cke",
            word_line: 3,
            old_line: "Das M\u{e4}dchen h\u{f6}rt fr\u{f6}hliche Ged\u{e4}chtnism\u{fc}sik.",
            new_line: "Das M\u{e4}dchen \u{f6}ffnet die T\u{fc}r \u{2713}.",
        },
    ]
}

/// `text` in `enc` (with its BOM when `bom`), as a file holds it.
fn bytes_of(enc: &'static Encoding, bom: bool, text: &str) -> Vec<u8> {
    let mut out = Vec::new();
    if enc == UTF_16LE {
        if bom {
            out.extend_from_slice(b"\xFF\xFE");
        }
        out.extend(text.encode_utf16().flat_map(u16::to_le_bytes));
    } else if enc == UTF_16BE {
        if bom {
            out.extend_from_slice(b"\xFE\xFF");
        }
        out.extend(text.encode_utf16().flat_map(u16::to_be_bytes));
    } else {
        if bom {
            out.extend_from_slice(b"\xEF\xBB\xBF");
        }
        let (b, _, unmappable) = enc.encode(text);
        assert!(!unmappable, "fixture not representable in {}", enc.name());
        out.extend_from_slice(&b);
    }
    out
}

/// The charset read_file names: the encoding, and "with BOM" when there is one.
fn label(c: &Case) -> String {
    if c.bom {
        format!("{} with BOM", c.shown)
    } else {
        c.shown.to_string()
    }
}

fn setup() -> Ws {
    let ws = Ws::new();
    for c in cases() {
        write(&ws.root, c.name, bytes_of(c.enc, c.bom, c.text));
    }
    ws
}

#[test]
fn read_file_shows_each_encoding_decoded_and_names_it() {
    let ws = setup();
    let f = ws.ferret();
    for c in cases() {
        let (v, text) = ok(&f, "read_file", json!({"path": c.name}));
        assert_eq!(v["content"], c.text, "{}", c.name);
        assert_eq!(v["charset"], label(&c), "{}: {v}", c.name);
        assert!(text.contains(&format!("encoding {}", c.shown)), "{text}");
        assert!(!text.contains('\u{FEFF}'), "the BOM is not shown: {text}");
        // A ranged read shows the same lines.
        let (v, _) = ok(
            &f,
            "read_file",
            json!({"path": c.name, "offset": c.word_line, "limit": 1}),
        );
        let line = c
            .text
            .split_inclusive('\n')
            .nth(c.word_line as usize - 1)
            .unwrap();
        assert_eq!(v["content"], line, "{}", c.name);
        assert_eq!(v["charset"], label(&c), "{}", c.name);
        // The real binary says the same.
        let out = ws.cli(&["read", c.name]);
        let shown = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{}: {shown}", c.name);
        assert!(shown.contains(c.word) && shown.contains(c.shown), "{shown}");
    }
    // read_files too.
    let (v, text) = ok(
        &f,
        "read_files",
        json!({"paths": ["cp1252.txt", "sjis.txt"]}),
    );
    assert!(
        text.contains("encoding windows-1252") && text.contains("encoding shift_jis"),
        "{text}"
    );
    assert!(v.to_string().contains("biblioth\u{e8}que"), "{v}");
    // A UTF-8 file says nothing of encodings.
    write(&ws.root, "plain.txt", "caf\u{e9}\n");
    let (v, text) = ok(&f, "read_file", json!({"path": "plain.txt"}));
    assert!(
        v.get("charset").is_none() && !text.contains("encoding"),
        "{v} {text}"
    );
}

#[test]
fn grep_finds_non_ascii_words_on_the_right_line_scan_and_index() {
    let ws = setup();
    let f = ws.ferret();
    for c in cases() {
        let (v, text) = ok(
            &f,
            "grep",
            json!({"pattern": c.word, "path": c.name, "output_mode": "content"}),
        );
        let files = v["files"].as_array().unwrap();
        assert_eq!(files.len(), 1, "{}: {v}", c.name);
        let l = &files[0]["lines"][0];
        assert_eq!(l["line"], c.word_line, "{}: {v}", c.name);
        let want = c.text.lines().nth(c.word_line as usize - 1).unwrap();
        assert_eq!(
            l["text"].as_str().unwrap().trim_end_matches('\r'),
            want,
            "{}",
            c.name
        );
        if c.enc != UTF_8 {
            assert_eq!(files[0]["charset"], c.shown, "{}: {v}", c.name);
            assert!(text.contains(c.shown), "{text}");
        }
        // The real binary, rg's layout.
        let out = ws.cli(&["grep", c.word, c.name]);
        let shown = String::from_utf8_lossy(&out.stdout);
        assert!(shown.contains(want), "{}: {shown}", c.name);
    }
    // With the trigram index built (and aged past its racy window): never fewer files.
    let mut cfg = Config::defaults(Mode::Cli);
    cfg.roots = vec![ws.root.clone()];
    cfg.state_dir = Some(ws.state.clone());
    let indexed = Ferret::new(cfg).expect("open");
    std::thread::sleep(std::time::Duration::from_millis(150));
    indexed
        .build_index(CancelToken::new(), true)
        .expect("index");
    for c in cases() {
        for pattern in [
            c.word.to_string(),
            format!("(?i){}", c.word.to_uppercase()),
            format!("{}.*", c.word),
        ] {
            let v = call(
                &indexed,
                "grep",
                json!({"pattern": pattern, "output_mode": "content"}),
            )
            .unwrap();
            let files: Vec<&str> = v["files"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|f| f["path"].as_str())
                .collect();
            assert_eq!(v["engine"], "index", "{v}");
            assert!(
                files.contains(&c.name),
                "{pattern}: the index lost {} ({v})",
                c.name
            );
            let scan = call(
                &f,
                "grep",
                json!({"pattern": pattern, "output_mode": "content"}),
            )
            .unwrap();
            assert_eq!(v["files"], scan["files"], "{pattern}");
        }
    }
}

/// The file's bytes with line `old` replaced by `new` in its encoding: what a change of
/// that one line must leave.
fn expected(c: &Case) -> Vec<u8> {
    bytes_of(c.enc, c.bom, &c.text.replacen(c.old_line, c.new_line, 1))
}

#[test]
fn edit_changes_one_line_and_keeps_every_other_byte() {
    let ws = setup();
    let f = ws.ferret();
    for c in cases() {
        let before = std::fs::read(ws.root.join(c.name)).unwrap();
        let (v, text) = ok(
            &f,
            "edit",
            json!({"path": c.name, "old_string": c.old_line, "new_string": c.new_line}),
        );
        let after = std::fs::read(ws.root.join(c.name)).unwrap();
        assert_eq!(after, expected(&c), "{}: {v}", c.name);
        if c.enc != UTF_8 || c.bom {
            assert!(text.contains(c.shown), "{text}");
        }
        // Undo gives back the very bytes.
        ok(&f, "undo", json!({}));
        assert_eq!(
            std::fs::read(ws.root.join(c.name)).unwrap(),
            before,
            "{}",
            c.name
        );
    }
}

#[test]
fn apply_patch_changes_one_line_and_keeps_every_other_byte() {
    let ws = setup();
    let f = ws.ferret();
    for c in cases() {
        let before = std::fs::read(ws.root.join(c.name)).unwrap();
        let patch = format!(
            "*** Begin Patch\n*** Update File: {}\n@@\n-{}\n+{}\n*** End Patch\n",
            c.name, c.old_line, c.new_line
        );
        let (v, _) = ok(&f, "apply_patch", json!({"patch": patch}));
        let after = std::fs::read(ws.root.join(c.name)).unwrap();
        assert_eq!(after, expected(&c), "{}: {v}", c.name);
        ok(&f, "undo", json!({}));
        assert_eq!(
            std::fs::read(ws.root.join(c.name)).unwrap(),
            before,
            "{}",
            c.name
        );
    }
}

#[test]
fn shift_jis_bytes_that_would_encode_differently_are_kept_outside_the_change() {
    let ws = Ws::new();
    // 0xEEEF is U+2170 in NEC's selection of IBM extensions; encoding_rs encodes U+2170
    // as 0xFA40. A re-encoded file would change these bytes on an untouched line.
    let mut b = bytes_of(SHIFT_JIS, false, JAPANESE);
    b.extend_from_slice(b"\xEE\xEF\x82\xA0\r\n");
    b.extend(bytes_of(
        SHIFT_JIS,
        false,
        "\u{6700}\u{5f8c}\u{306e}\u{884c}\r\n",
    ));
    write(&ws.root, "nec.txt", &b);
    let f = ws.ferret();
    let (v, _) = ok(&f, "read_file", json!({"path": "nec.txt"}));
    assert_eq!(v["charset"], "shift_jis", "{v}");
    assert!(
        v["content"].as_str().unwrap().contains("\u{2170}\u{3042}"),
        "{v}"
    );
    let c = &cases()[2];
    ok(
        &f,
        "edit",
        json!({"path": "nec.txt", "old_string": c.old_line, "new_string": c.new_line}),
    );
    let after = std::fs::read(ws.root.join("nec.txt")).unwrap();
    let old = bytes_of(SHIFT_JIS, false, c.old_line);
    let new = bytes_of(SHIFT_JIS, false, c.new_line);
    let at = b.windows(old.len()).position(|w| w == &old[..]).unwrap();
    let mut want = b[..at].to_vec();
    want.extend_from_slice(&new);
    want.extend_from_slice(&b[at + old.len()..]);
    assert_eq!(after, want);
    assert!(
        after.windows(2).any(|w| w == b"\xEE\xEF"),
        "the NEC bytes were kept"
    );
    // replace_all over the whole file likewise.
    ok(
        &f,
        "edit",
        json!({"path": "nec.txt", "old_string": "\u{3067}\u{3059}", "new_string": "\u{3060}", "replace_all": true}),
    );
    let after = std::fs::read(ws.root.join("nec.txt")).unwrap();
    assert!(
        after.windows(4).any(|w| w == b"\xEE\xEF\x82\xA0"),
        "the NEC bytes were kept"
    );
}

#[test]
fn unrepresentable_text_is_refused_and_nothing_changes() {
    let ws = setup();
    let f = ws.ferret();
    let tries: &[(&str, &str, &str)] = &[
        ("cp1252.txt", "caf\u{e9}", "\u{4e2d}\u{6587}"),
        ("latin1.txt", "Br\u{fc}cke", "\u{1f600}"),
        ("latin1.txt", "Br\u{fc}cke", "\u{3b1}"),
        ("sjis.txt", "\u{5bff}\u{53f8}", "\u{1f363}"),
        ("sjis.txt", "\u{5bff}\u{53f8}", "\u{e9}"),
        // A U+FFFD the file did not have is never written, in any encoding.
        ("utf16le.txt", "caf\u{e9}", "caf\u{FFFD}"),
        ("cp1252.txt", "caf\u{e9}", "caf\u{FFFD}"),
    ];
    for (name, old, new) in tries {
        let before = snapshot(&ws.root);
        let e = call(
            &f,
            "edit",
            json!({"path": name, "old_string": old, "new_string": new}),
        )
        .unwrap_err();
        assert_eq!(e.code, ErrorCode::Unrepresentable, "{name} {new}: {e:?}");
        assert!(
            e.hint.as_deref().unwrap_or("").contains("encoding"),
            "{e:?}"
        );
        let patch = format!(
            "*** Begin Patch\n*** Update File: {name}\n@@\n-{}\n+{}\n*** End Patch\n",
            std::fs::read(ws.root.join(name))
                .map(|_| {
                    let v = call(&f, "read_file", json!({"path": name})).unwrap();
                    v["content"]
                        .as_str()
                        .unwrap()
                        .lines()
                        .find(|l| l.contains(old))
                        .unwrap()
                        .trim_end_matches('\r')
                        .to_string()
                })
                .unwrap(),
            new
        );
        let e = call(&f, "apply_patch", json!({"patch": patch})).unwrap_err();
        assert_eq!(e.code, ErrorCode::Unrepresentable, "{name} {new}: {e:?}");
        let e = call(
            &f,
            "write_file",
            json!({"path": name, "content": format!("x {new}\n"), "overwrite": true}),
        )
        .unwrap_err();
        assert_eq!(e.code, ErrorCode::Unrepresentable, "{name} {new}: {e:?}");
        assert_eq!(snapshot(&ws.root), before, "{name}: nothing changed");
    }
    // Told to, write_file writes UTF-8.
    let (v, _) = ok(
        &f,
        "write_file",
        json!({"path": "cp1252.txt", "content": "\u{4e2d}\u{6587}\n", "overwrite": true, "encoding": "utf-8"}),
    );
    assert!(v.get("charset").is_none(), "{v}");
    assert_eq!(
        std::fs::read(ws.root.join("cp1252.txt")).unwrap(),
        "\u{4e2d}\u{6587}\n".as_bytes()
    );
}

#[test]
fn a_file_with_a_literal_replacement_character_stays_writable() {
    let ws = Ws::new();
    let text = "keep \u{FFFD} here\r\nchange me\r\n";
    write(&ws.root, "r16.txt", bytes_of(UTF_16LE, true, text));
    write(&ws.root, "r8.txt", bytes_of(UTF_8, true, text));
    let f = ws.ferret();
    for name in ["r16.txt", "r8.txt"] {
        let (v, _) = ok(&f, "read_file", json!({"path": name}));
        assert_eq!(v["content"], text, "{name}");
        ok(
            &f,
            "edit",
            json!({"path": name, "old_string": "change me", "new_string": "changed \u{FFFD} too"}),
        );
        let enc = if name == "r16.txt" { UTF_16LE } else { UTF_8 };
        assert_eq!(
            std::fs::read(ws.root.join(name)).unwrap(),
            bytes_of(
                enc,
                true,
                &text.replace("change me", "changed \u{FFFD} too")
            )
        );
    }
}

#[test]
fn write_file_over_each_keeps_its_encoding_bom_and_line_endings() {
    let ws = setup();
    let f = ws.ferret();
    for c in cases() {
        let before = std::fs::read(ws.root.join(c.name)).unwrap();
        // The agent writes bare "\n"; a CRLF file keeps CRLF.
        let new = format!("{}\n{}\n", c.new_line, c.word);
        let (v, text) = ok(
            &f,
            "write_file",
            json!({"path": c.name, "content": new, "overwrite": true}),
        );
        let crlf = c.text.contains("\r\n");
        let want_text = if crlf {
            new.replace('\n', "\r\n")
        } else {
            new.clone()
        };
        assert_eq!(
            std::fs::read(ws.root.join(c.name)).unwrap(),
            bytes_of(c.enc, c.bom, &want_text),
            "{}: {v}",
            c.name
        );
        assert_eq!(text.contains("CRLF kept"), crlf, "{}: {text}", c.name);
        if c.enc != UTF_8 || c.bom {
            assert!(v["charset"].as_str().unwrap().starts_with(c.shown), "{v}");
            assert!(text.contains(c.shown), "{text}");
        }
        // It reads back as written.
        let (r, _) = ok(&f, "read_file", json!({"path": c.name}));
        assert_eq!(r["content"], want_text.as_str());
        ok(&f, "undo", json!({}));
        assert_eq!(
            std::fs::read(ws.root.join(c.name)).unwrap(),
            before,
            "{}",
            c.name
        );
    }
}

#[test]
fn binary_files_are_still_binary() {
    let (_t, root) = tempdir();
    let blobs: &[(&str, &[u8])] = &[
        // A PNG cut short of a whole header (a whole one is read as an image).
        ("png.bin", b"\x89PNG\r\n\x1a"),
        ("ctl.bin", b"\x01\x02\x03\x04\x05\x06\x07\x08\x0e\x0f\x10\x11\x12\x13\xe9\xe8\xff\x80"),
        // UTF-16 with a BOM but an unpaired surrogate, or an odd byte.
        ("bad16.txt", b"\xFF\xFEa\x00\x00\xD8b\x00"),
        ("odd16.txt", b"\xFF\xFEa\x00b"),
        // UTF-16 holding a NUL.
        ("nul16.txt", b"\xFF\xFEa\x00\x00\x00"),
        // Shift_JIS-looking bytes cut inside a character, among others that decode.
        ("cut.txt", b"\x93\xfa\x96\x7b\x8c\xea\x82\xcc\x95\xb6\x8f\xcd\x82\xf0\x8f\x91\x82\xab\x82\xdc\x82\xb7\x81\x42\x93\x8c\x8b\x9e\x82"),
    ];
    for (name, b) in blobs {
        write(&root, name, b);
    }
    let f = crate::util::ferret(&root, true, None);
    for (name, _) in blobs {
        let r = call(&f, "read_file", json!({"path": name}));
        if *name == "cut.txt"
            && let Ok(v) = &r
        {
            // If a detector takes it as another legacy encoding, the text must be exact.
            let enc = Encoding::for_label(v["charset"].as_str().unwrap().as_bytes()).unwrap();
            let (back, _, bad) = enc.encode(v["content"].as_str().unwrap());
            assert!(
                !bad && back.as_ref() == std::fs::read(root.join(name)).unwrap(),
                "{v}"
            );
            continue;
        }
        assert_eq!(code(r), ErrorCode::BinaryFile, "{name}");
        let e = call(
            &f,
            "edit",
            json!({"path": name, "old_string": "a", "new_string": "b"}),
        )
        .unwrap_err();
        assert_eq!(e.code, ErrorCode::BinaryFile, "{name}: {e:?}");
    }
}

#[test]
fn links_and_denied_names_are_refused_whatever_the_encoding() {
    let ws = setup();
    let (_o, outside) = tempdir();
    let secret = bytes_of(WINDOWS_1252, false, FRENCH);
    write(&outside, "secret.txt", &secret);
    std::os::unix::fs::symlink(outside.join("secret.txt"), ws.root.join("link.txt")).unwrap();
    write(&ws.root, ".env", bytes_of(WINDOWS_1252, false, FRENCH));
    let f = ws.ferret();
    for name in ["link.txt", ".env"] {
        let want = if name == ".env" {
            ErrorCode::DeniedPattern
        } else {
            ErrorCode::PathEscape
        };
        assert_eq!(
            code(call(&f, "read_file", json!({"path": name}))),
            want,
            "{name}"
        );
        let e = call(
            &f,
            "edit",
            json!({"path": name, "old_string": "caf\u{e9}", "new_string": "the"}),
        );
        assert_eq!(code(e), want, "{name}");
        let e = call(
            &f,
            "write_file",
            json!({"path": name, "content": "x\n", "overwrite": true}),
        );
        assert_eq!(code(e), want, "{name}");
        let v = call(
            &f,
            "grep",
            json!({"pattern": "biblioth\u{e8}que", "output_mode": "files_with_matches"}),
        )
        .unwrap();
        assert!(!v.to_string().contains(name), "{name}: {v}");
    }
    assert_eq!(std::fs::read(outside.join("secret.txt")).unwrap(), secret);
}

#[test]
fn concurrent_edits_of_one_shift_jis_file_both_land_byte_exact() {
    let ws = setup();
    let f = std::sync::Arc::new(ws.ferret());
    let lines: Vec<&str> = JAPANESE.lines().map(|l| l.trim_end_matches('\r')).collect();
    let changes = [
        (lines[0].to_string(), "\u{4e00}\u{884c}\u{76ee}".to_string()),
        (lines[4].to_string(), "\u{4e94}\u{884c}\u{76ee}".to_string()),
    ];
    let handles: Vec<_> = changes
        .iter()
        .cloned()
        .map(|(old, new)| {
            let f = f.clone();
            std::thread::spawn(move || {
                call(
                    &f,
                    "edit",
                    json!({"path": "sjis.txt", "old_string": old, "new_string": new}),
                )
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap().unwrap();
    }
    let mut want = JAPANESE.to_string();
    for (old, new) in &changes {
        want = want.replacen(old.as_str(), new, 1);
    }
    assert_eq!(
        std::fs::read(ws.root.join("sjis.txt")).unwrap(),
        bytes_of(SHIFT_JIS, false, &want)
    );
}

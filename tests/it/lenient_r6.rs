//! Round 6 (issue #28, item 1): `apply_patch` and `edit` accept what models emit. Each
//! leniency through the real binary (`ferret --allow-write call …`), each result compared
//! whole, byte for byte (a change outside the place fails), the rule named, and every
//! ambiguous shape refused with nothing changed.

use crate::util::{Ws, snapshot};
use serde_json::{Value, json};

/// `ferret --allow-write call TOOL ARGS`: the structured result, or the error's code and
/// message.
fn call(ws: &Ws, tool: &str, args: Value) -> Result<Value, (String, String)> {
    let out = ws.cli(&["--allow-write", "call", tool, &args.to_string()]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{tool} {args}: {e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    match v.get("error") {
        Some(err) if !out.status.success() => Err((
            err["code"].as_str().unwrap_or_default().to_string(),
            err["message"].as_str().unwrap_or_default().to_string(),
        )),
        _ => Ok(v),
    }
}

fn bytes(ws: &Ws, rel: &str) -> Vec<u8> {
    std::fs::read(ws.root.join(rel)).expect("read back")
}

/// Applies `patch` to a fresh `f.txt` holding `before`; the file after and the rules.
fn patched(before: &[u8], patch: &str) -> Result<(Vec<u8>, Value), (String, String)> {
    let ws = Ws::new();
    std::fs::write(ws.root.join("f.txt"), before).expect("write");
    let snap = snapshot(&ws.root);
    match call(&ws, "apply_patch", json!({ "patch": patch })) {
        Ok(out) => Ok((bytes(&ws, "f.txt"), out["files"][0]["matches"].clone())),
        Err(e) => {
            assert_eq!(snapshot(&ws.root), snap, "a refused patch changed nothing");
            Err(e)
        }
    }
}

/// Edits a fresh `f.txt` holding `before`; the file after and the rule.
fn edited(before: &[u8], old: &str, new: &str) -> Result<(Vec<u8>, Value), (String, String)> {
    let ws = Ws::new();
    std::fs::write(ws.root.join("f.txt"), before).expect("write");
    let snap = snapshot(&ws.root);
    match call(
        &ws,
        "edit",
        json!({ "path": "f.txt", "old_string": old, "new_string": new }),
    ) {
        Ok(out) => Ok((bytes(&ws, "f.txt"), out["match"].clone())),
        Err(e) => {
            assert_eq!(snapshot(&ws.root), snap, "a refused edit changed nothing");
            Err(e)
        }
    }
}

fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

const BEFORE: &[u8] = b"one\ntwo\nthree\nfour\n";
const AFTER: &[u8] = b"one\nTWO\nthree\nfour\n";
const BODY: &str = "*** Update File: f.txt\n@@\n one\n-two\n+TWO\n three\n";

// --- the patch's shape --------------------------------------------------------------------------

#[test]
fn blank_lines_around_the_end_markers_and_after_end_patch_are_read_as_separators() {
    let variants = [
        format!("*** Begin Patch\n{BODY}\n*** End Patch\n"),
        format!("*** Begin Patch\n{BODY} \n\t\n\n*** End Patch\n"),
        format!("*** Begin Patch\n{BODY}*** End of File\n\n*** End Patch\n"),
        format!("*** Begin Patch\n{BODY}\n*** End of File\n  \n*** End Patch"),
        format!("*** Begin Patch\n{BODY}*** End Patch\n\n   \n\t\n"),
        format!("\n\n*** Begin Patch\n\n{BODY}\n\n*** End Patch\n\n"),
        format!(
            "*** Begin Patch\r\n{}\r\n*** End Patch\r\n\r\n",
            BODY.replace('\n', "\r\n")
        ),
    ];
    for p in &variants {
        let (after, rules) = patched(BEFORE, p).unwrap_or_else(|e| panic!("{p:?}: {e:?}"));
        assert_eq!(show(&after), show(AFTER), "{p:?}");
        assert_eq!(rules, json!(["exact"]), "{p:?}");
    }
}

#[test]
fn indented_markers_are_read_as_markers() {
    let variants = [
        " *** Begin Patch\n *** Update File: f.txt\n@@\n one\n-two\n+TWO\n three\n *** End Patch\n".to_string(),
        "*** Begin Patch\n  *** Update File: f.txt\n  @@\n one\n-two\n+TWO\n three\n\t*** End Patch\n".to_string(),
        "*** Begin Patch\n\t*** Update File: f.txt\n\t@@ one\n-two\n+TWO\n three\n *** End of File\n *** End Patch \n"
            .to_string(),
        "*** Begin Patch \n *** Update File: f.txt\n @@\n one\n-two\n+TWO\n three\n\n *** End Patch\n"
            .replace(" @@\n", "    @@\n"),
    ];
    for p in &variants {
        let (after, rules) = patched(BEFORE, p).unwrap_or_else(|e| panic!("{p:?}: {e:?}"));
        assert_eq!(show(&after), show(AFTER), "{p:?}");
        assert_eq!(rules, json!(["exact"]), "{p:?}");
    }
    // Several files, every marker indented.
    let ws = Ws::new();
    std::fs::write(ws.root.join("f.txt"), BEFORE).expect("write");
    std::fs::write(ws.root.join("gone.txt"), "x\n").expect("write");
    call(
        &ws,
        "apply_patch",
        json!({"patch": "*** Begin Patch\n  *** Add File: new.txt\n+made\n  *** Delete File: gone.txt\n  *** Update File: f.txt\n  *** Move to: moved.txt\n  @@\n-two\n+TWO\n  *** End Patch\n"}),
    )
    .expect("applies");
    assert_eq!(bytes(&ws, "new.txt"), b"made\n");
    assert_eq!(bytes(&ws, "moved.txt"), AFTER);
    assert!(!ws.root.join("gone.txt").exists() && !ws.root.join("f.txt").exists());
}

/// A file that holds patch text: inside a hunk, a line indented by one space is the
/// file's own line (context), however much it looks like a marker.
#[test]
fn a_context_line_that_looks_like_a_marker_is_context() {
    let before = b"intro\n*** Update File: x\n@@ fn a\n*** End Patch\nold\n";
    let p = "*** Begin Patch\n*** Update File: f.txt\n@@\n *** Update File: x\n @@ fn a\n *** End Patch\n-old\n+new\n*** End Patch\n";
    let (after, _) = patched(before, p).expect("applies");
    assert_eq!(
        show(&after),
        "intro\n*** Update File: x\n@@ fn a\n*** End Patch\nnew\n"
    );
}

/// The other side of that rule: a marker indented by one space after a hunk line is the
/// file's own line too. It is read as context, the hunk is not found, nothing changes.
#[test]
fn a_one_space_marker_after_a_hunk_line_is_context_and_the_miss_changes_nothing() {
    let ws = Ws::new();
    std::fs::write(ws.root.join("f.txt"), BEFORE).expect("write");
    std::fs::write(ws.root.join("g.txt"), "g\n").expect("write");
    let snap = snapshot(&ws.root);
    let err = call(
        &ws,
        "apply_patch",
        json!({"patch": format!("*** Begin Patch\n{BODY} *** Update File: g.txt\n@@\n-g\n+G\n*** End Patch\n")}),
    )
    .expect_err("not found");
    assert_eq!(err.0, "NO_MATCH", "{err:?}");
    assert_eq!(snapshot(&ws.root), snap);
}

#[test]
fn a_patch_in_a_heredoc_or_a_fence_is_applied_as_what_is_between_the_markers() {
    let inner = format!("*** Begin Patch\n{BODY}*** End Patch\n");
    let variants = [
        format!("apply_patch <<'EOF'\n{inner}EOF\n"),
        format!("apply_patch <<\"EOF\"\n{inner}EOF"),
        format!("<<EOF\n{inner}EOF\n\n"),
        format!("<<'PATCH'\n{inner}PATCH\n"),
        format!("apply_patch <<'EOF'\n{inner}\nEOF\n"),
        format!("```\n{inner}```\n"),
        format!("```bash\napply_patch <<'EOF'\n{inner}EOF\n```\n"),
        format!("```patch\n<<'EOF'\n{inner}EOF\n```"),
    ];
    for p in &variants {
        let (after, rules) = patched(BEFORE, p).unwrap_or_else(|e| panic!("{p:?}: {e:?}"));
        assert_eq!(show(&after), show(AFTER), "{p:?}");
        assert_eq!(rules, json!(["exact"]), "{p:?}");
    }
}

#[test]
fn an_ambiguous_wrapper_or_text_after_end_patch_is_refused_naming_the_line() {
    let inner = format!("*** Begin Patch\n{BODY}*** End Patch\n");
    let cases = [
        // Not closed, closed by another word, closed then more text.
        (format!("apply_patch <<'EOF'\n{inner}"), "line 1"),
        (format!("<<'EOF'\n{inner}PATCH\n"), "line 1"),
        (format!("<<'EOF'\n{inner}EOF\nrm -rf x\n"), "line 1"),
        (format!("```\n{inner}"), "line 1"),
        // The heredoc's word before its last line: a shell would stop there.
        (format!("<<'EOF'\n{inner}EOF\n{inner}EOF\n"), "line 10"),
        // Text after End Patch: a second patch, a stray closer, words.
        (format!("{inner}{inner}"), "line 9"),
        (format!("{inner}EOF\n"), "line 9"),
        (format!("{inner}done.\n"), "line 9"),
    ];
    for (p, line) in &cases {
        let (code, message) = patched(BEFORE, p).expect_err(p);
        assert_eq!(code, "INVALID_ARGUMENT", "{p:?}");
        assert!(message.contains(line), "{p:?}: {message}");
    }
}

// --- line endings and the final newline ---------------------------------------------------------

#[test]
fn a_mixed_file_keeps_every_line_ending_and_new_lines_take_their_neighbours() {
    let before = b"a\r\nb\nc\r\nd\ne\r\n";
    let cases: [(&str, &[u8]); 4] = [
        // Replaced line takes the ending of the line it replaces; context keeps its own.
        ("@@\n a\n-b\n+B\n c\n", b"a\r\nB\nc\r\nd\ne\r\n"),
        ("@@\n b\n-c\n+C\n d\n", b"a\r\nb\nC\r\nd\ne\r\n"),
        // Added lines take the ending of the line before them.
        (
            "@@\n c\n+c2\n+c3\n d\n",
            b"a\r\nb\nc\r\nc2\r\nc3\r\nd\ne\r\n",
        ),
        // Added at the end of the file: its last line's ending.
        ("@@\n+f\n", b"a\r\nb\nc\r\nd\ne\r\nf\r\n"),
    ];
    for (hunk, want) in cases {
        let p = format!("*** Begin Patch\n*** Update File: f.txt\n{hunk}*** End Patch\n");
        let (after, _) = patched(before, &p).unwrap_or_else(|e| panic!("{hunk:?}: {e:?}"));
        assert_eq!(show(&after), show(want), "{hunk:?}");
    }
    // The same through edit: a context line inside old_string is not re-ended.
    let edits: [(&str, &str, &[u8], &str); 3] = [
        (
            "a\nb\nc\n",
            "a\nB\nc\n",
            b"a\r\nB\nc\r\nd\ne\r\n",
            "line_endings",
        ),
        (
            "b\r\nc\r\nd",
            "b\r\nC\r\nd",
            b"a\r\nb\nC\r\nd\ne\r\n",
            "line_endings",
        ),
        ("d\ne", "d\nd2\ne", b"a\r\nb\nc\r\nd\nd2\ne\r\n", "exact"),
    ];
    for (old, new, want, how) in edits {
        let (after, rule) = edited(before, old, new).unwrap_or_else(|e| panic!("{old:?}: {e:?}"));
        assert_eq!(show(&after), show(want), "{old:?}");
        assert_eq!(rule, json!(how), "{old:?}");
    }
    // A CRLF file: lines added at its end are CRLF, not LF.
    let (after, _) = patched(
        b"x\r\ny\r\n",
        "*** Begin Patch\n*** Update File: f.txt\n@@\n+z\n*** End Patch\n",
    )
    .expect("applies");
    assert_eq!(show(&after), "x\r\ny\r\nz\r\n");
}

#[test]
fn a_missing_final_newline_is_kept_unless_the_change_is_at_the_end() {
    let p = |hunk: &str| format!("*** Begin Patch\n*** Update File: f.txt\n{hunk}*** End Patch\n");
    let cases: [(&[u8], String, &[u8]); 6] = [
        // Mid-file change, context to the last line: still no final newline.
        (b"a\nb\nc", p("@@\n-a\n+A\n b\n c\n"), b"A\nb\nc"),
        (b"a\r\nb\r\nc", p("@@\n a\n-b\n+B\n c\n"), b"a\r\nB\r\nc"),
        (b"a\nb\nc", p("@@\n-b\n+B\n c\n"), b"a\nB\nc"),
        // The last line changed (the new text ends with a newline): it gets one.
        (b"a\nb\nc", p("@@\n b\n-c\n+C\n"), b"a\nb\nC\n"),
        (b"a\nb\nc", p("@@\n+d\n"), b"a\nb\nc\nd\n"),
        // A file with a final newline keeps it.
        (b"a\nb\nc\n", p("@@\n b\n-c\n"), b"a\nb\n"),
    ];
    for (before, patch, want) in &cases {
        let (after, _) = patched(before, patch).unwrap_or_else(|e| panic!("{patch:?}: {e:?}"));
        assert_eq!(show(&after), show(want), "{patch:?}");
    }
    // edit: as given inside the file; a file's final newline is kept.
    let edits: [(&[u8], &str, &str, &[u8]); 4] = [
        (b"a\nb\nc", "b\nc\n", "B\nc\n", b"a\nB\nc"),
        (b"a\nb\nc", "c", "C", b"a\nb\nC"),
        (b"a\nb\nc\n", "c\n", "C", b"a\nb\nC\n"),
        (b"a\r\nb\r\n", "b\r\n", "B", b"a\r\nB\r\n"),
    ];
    for (before, old, new, want) in edits {
        let (after, _) = edited(before, old, new).unwrap_or_else(|e| panic!("{old:?}: {e:?}"));
        assert_eq!(show(&after), show(want), "{old:?}");
    }
}

// --- Unicode punctuation ------------------------------------------------------------------------

#[test]
fn unicode_punctuation_in_the_file_matches_ascii_in_the_patch_and_is_named() {
    let before = "// intro\nlet msg = “it’s a test — really”;\nlet n = 1\u{a0}−\u{2009}2; // wait…\n// end\n";
    let cases = [
        (
            "-let msg = \"it's a test - really\";\n+let msg = \"done\";\n",
            "// intro\nlet msg = \"done\";\nlet n = 1\u{a0}−\u{2009}2; // wait…\n// end\n",
        ),
        (
            "-let n = 1 - 2; // wait...\n+let n = 3;\n",
            "// intro\nlet msg = “it’s a test — really”;\nlet n = 3;\n// end\n",
        ),
        (
            " let msg = \"it's a test - really\";\n-let n = 1 - 2; // wait...\n+let n = 3; // “new”\n",
            "// intro\nlet msg = “it’s a test — really”;\nlet n = 3; // “new”\n// end\n",
        ),
    ];
    for (hunk, want) in cases {
        let p = format!("*** Begin Patch\n*** Update File: f.txt\n@@\n{hunk}*** End Patch\n");
        let (after, rules) =
            patched(before.as_bytes(), &p).unwrap_or_else(|e| panic!("{hunk:?}: {e:?}"));
        assert_eq!(show(&after), want, "{hunk:?}");
        assert_eq!(rules, json!(["punctuation"]), "{hunk:?}");
    }
    // edit, inside a line: only the matched bytes change; the new text goes in as given.
    let (after, rule) =
        edited(before.as_bytes(), "it's a test - really", "it’s “fine”").expect("edits");
    assert_eq!(
        show(&after),
        "// intro\nlet msg = “it’s “fine””;\nlet n = 1\u{a0}−\u{2009}2; // wait…\n// end\n"
    );
    assert_eq!(rule, json!("punctuation"));
}

#[test]
fn unicode_punctuation_in_the_patch_matches_ascii_in_the_file() {
    let before = "a\r\nsay(\"don't - stop...\");\r\nb\r\n";
    let variants = [
        "say(“don’t – stop…”);",
        "say(”don‘t — stop...\");",
        "say(\"don't − stop…\");",
        "say(\"don't\u{a0}- stop...\");",
    ];
    for old in variants {
        let (after, rule) = edited(before.as_bytes(), old, "say(\"go\");").expect(old);
        assert_eq!(show(&after), "a\r\nsay(\"go\");\r\nb\r\n", "{old:?}");
        assert_eq!(rule, json!("punctuation"), "{old:?}");
        let p = format!(
            "*** Begin Patch\n*** Update File: f.txt\n@@\n a\n-{old}\n+say(\"go\");\n b\n*** End Patch\n"
        );
        let (after, rules) = patched(before.as_bytes(), &p).expect(old);
        assert_eq!(show(&after), "a\r\nsay(\"go\");\r\nb\r\n", "{old:?}");
        assert_eq!(rules, json!(["punctuation"]), "{old:?}");
    }
}

/// Structured changes go through the same rules, and name them per hunk.
#[test]
fn structured_patch_edits_use_the_punctuation_rule_too() {
    let ws = Ws::new();
    std::fs::write(ws.root.join("a.txt"), "title — one\nbody\n").expect("write");
    std::fs::write(ws.root.join("b.txt"), "x\r\ny\n").expect("write");
    let out = call(
        &ws,
        "apply_patch",
        json!({"changes": [
            {"path": "a.txt", "edits": [{"old_string": "title - one", "new_string": "title - two"}]},
            {"path": "b.txt", "edits": [{"old_string": "x\ny\n", "new_string": "x\nz\n"}]}
        ]}),
    )
    .expect("applies");
    assert_eq!(bytes(&ws, "a.txt"), b"title - two\nbody\n");
    assert_eq!(bytes(&ws, "b.txt"), b"x\r\nz\n");
    assert_eq!(out["files"][0]["matches"], json!(["punctuation"]));
    assert_eq!(out["files"][1]["matches"], json!(["line_endings"]));
}

#[test]
fn punctuation_that_matches_two_places_is_refused_and_nothing_changes() {
    let before = "x = “a”\ny = 1\nx = ”a“\n";
    let (code, message) = edited(before.as_bytes(), "x = \"a\"", "x = 2").expect_err("two places");
    assert_eq!(code, "NOT_UNIQUE");
    assert!(message.contains("lines 1, 3"), "{message}");
    let p = "*** Begin Patch\n*** Update File: f.txt\n@@\n-x = 'a'\n+x = 2\n*** End Patch\n";
    let (code, _) =
        patched("p = ‘a’\np = ’a‘\n".as_bytes(), &p.replace("x =", "p =")).expect_err("two");
    assert_eq!(code, "NOT_UNIQUE");
    // replace_all does not widen the punctuation rule to many places.
    let ws = Ws::new();
    std::fs::write(ws.root.join("f.txt"), before).expect("write");
    let err = call(
        &ws,
        "edit",
        json!({"path": "f.txt", "old_string": "x = \"a\"", "new_string": "z", "replace_all": true}),
    )
    .expect_err("refused");
    assert_eq!(err.0, "NOT_UNIQUE");
    assert_eq!(bytes(&ws, "f.txt"), before.as_bytes());
    // Exact text wins over a punctuation look-alike.
    let (after, rule) =
        edited("x = “a”\nx = \"a\"\n".as_bytes(), "x = \"a\"", "x = 3").expect("exact");
    assert_eq!(
        (show(&after).as_str(), rule),
        ("x = “a”\nx = 3\n", json!("exact"))
    );
}

/// Under every forgiving rule the lines a hunk keeps keep the file's bytes (trailing
/// whitespace, each line's ending), and the lines it changes take the endings of the
/// lines they replace.
#[test]
fn a_forgiving_match_rewrites_only_the_changed_lines() {
    let before = b"impl A {\r\n    fn a() {  \n        x();\r\n    }\n}\r\n";
    let p = "*** Begin Patch\n*** Update File: f.txt\n@@\n fn a() {\n-    x();\n+    y();\n+    z();\n }\n*** End Patch\n";
    let (after, rules) = patched(before, p).expect("applies");
    assert_eq!(
        show(&after),
        "impl A {\r\n    fn a() {  \n        y();\r\n        z();\r\n    }\n}\r\n"
    );
    assert_eq!(rules, json!(["indentation"]));
    let (after, rule) = edited(b"a  \r\nb\nc\t\r\n", "a\nb\nc\n", "a\nB\nc\n").expect("edits");
    assert_eq!(show(&after), "a  \r\nB\nc\t\r\n");
    assert_eq!(rule, json!("trailing_whitespace"));
}

/// Round 28: a text found at two overlapping places (`x\nx\n` in `x\nx\nx\n`) is two
/// places for edit and apply_patch alike, exact or forgiving: NOT_UNIQUE, nothing
/// changed (the first was changed).
#[test]
fn overlapping_places_are_not_one_place_for_edit_or_patch() {
    for (before, old, new) in [
        ("A\nx\nx\nx\nB\n", "x\nx\n", "x\nY\n"),
        ("  });\n});\n});\n", "});\n});", "});\n// end\n});"),
        ("x....y\n", "\u{2026}", "E"),
        ("A\r\nx\r\nx\r\nx\r\nB\r\n", "x\nx\n", "x\nY\n"),
    ] {
        let ws = Ws::new();
        std::fs::write(ws.root.join("f.txt"), before).expect("write");
        let snap = snapshot(&ws.root);
        let e = call(
            &ws,
            "edit",
            json!({"path": "f.txt", "old_string": old, "new_string": new}),
        )
        .expect_err("not unique");
        assert_eq!(e.0, "NOT_UNIQUE", "{before:?} {old:?}: {e:?}");
        assert_eq!(snapshot(&ws.root), snap, "{before:?}");
    }
    // The patch shape models emit for it: one context line, one change.
    let e = patched(
        b"A\nx\nx\nx\nB\n",
        "*** Begin Patch\n*** Update File: f.txt\n@@\n x\n-x\n+Y\n*** End Patch",
    )
    .expect_err("not unique");
    assert_eq!(e.0, "NOT_UNIQUE", "{e:?}");
    // With enough context it is one place again.
    let (after, _) = patched(
        b"A\nx\nx\nx\nB\n",
        "*** Begin Patch\n*** Update File: f.txt\n@@\n A\n x\n-x\n+Y\n*** End Patch",
    )
    .expect("unique");
    assert_eq!(after, b"A\nx\nY\nx\nB\n");
}

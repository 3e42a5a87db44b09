//! Round 30: answers whose reason or hint was wrong. A grep asked for much context lost
//! a file's match and blamed a long line it did not have; read_files' hints for files
//! no line range reads (and read_file's, for a whole read of a UTF-16 file over the
//! size limit) sent to the read that had just failed; an unanswered confirmation
//! question was told of a widening setting that does not apply to it.

use crate::util::{self, StdioServer, tempdir, write};
use serde_json::{Value, json};

fn call_cli(
    root: &std::path::Path,
    state: &std::path::Path,
    tool: &str,
    args: &Value,
    full: bool,
) -> Value {
    let mut c = util::bin();
    c.arg("--root").arg(root).arg("--state-dir").arg(state);
    c.args(["call", tool, &args.to_string()]);
    if full {
        c.arg("--full");
    }
    let out = c.output().unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", util::said(&out)))
}

/// A file of 700 000 short lines, then the match, then ten more lines: the lines before
/// the match come to 70 MB, over the 64 MiB a search holds.
fn many_lines_then(root: &std::path::Path) {
    let mut text = String::with_capacity(71_000_000);
    let line = format!("{}\n", "a".repeat(99));
    for _ in 0..700_000 {
        text.push_str(&line);
    }
    text.push_str("NEEDLE\n");
    for _ in 0..10 {
        text.push_str(&line);
    }
    write(root, "big.txt", text);
    write(root, "small.txt", "one NEEDLE\n");
}

#[test]
fn a_grep_asking_for_more_context_than_an_answer_holds_still_finds_every_match() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    many_lines_then(&root);
    for context in [
        json!({"context_before": 700_000}),
        json!({"context": 740_000}),
        json!({"context": u64::MAX}),
        json!({"context_before": 5, "context_after": u64::MAX}),
    ] {
        let mut args = json!({"pattern": "NEEDLE", "output_mode": "content"});
        for (k, v) in context.as_object().unwrap() {
            args[k] = v.clone();
        }
        let v = call_cli(&root, &state, "grep", &args, false);
        assert_eq!(
            v["match_count"],
            2,
            "{context}: {}",
            &v.to_string()[..v.to_string().len().min(600)]
        );
        assert!(
            v["warnings"].as_array().is_none_or(|w| w.is_empty()),
            "{context}: {:?}",
            v["warnings"]
        );
        assert!(
            v.to_string().len() < 200_000,
            "the answer stays within the budget"
        );
    }
}

#[test]
fn a_file_given_up_with_context_asked_names_context_as_a_cause_and_the_way_out() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    many_lines_then(&root);
    // Without a budget (--full) all context is kept: the file is given up, truly said.
    let v = call_cli(
        &root,
        &state,
        "grep",
        &json!({"pattern": "NEEDLE", "output_mode": "content", "context_before": 700_000}),
        true,
    );
    let warnings = v["warnings"].to_string();
    assert!(warnings.contains("big.txt: not searched"), "{warnings}");
    assert!(warnings.contains("lines of context asked"), "{warnings}");
    assert!(warnings.contains("ask for less context"), "{warnings}");
    assert!(
        !warnings.contains("it has a line over"),
        "it has no long line: {warnings}"
    );
    // The same file without context: found, no warning.
    let v = call_cli(
        &root,
        &state,
        "grep",
        &json!({"pattern": "NEEDLE", "output_mode": "content"}),
        true,
    );
    assert_eq!(v["match_count"], 2, "{}", v["warnings"]);
    // A file with a line over the limit, no context: the line is named, not context.
    write(
        &root,
        "long.txt",
        format!("{}NEEDLE\n", "b".repeat(65 << 20)),
    );
    let v = call_cli(
        &root,
        &state,
        "grep",
        &json!({"pattern": "NEEDLE", "output_mode": "count", "path": "long.txt"}),
        true,
    );
    let warnings = v["warnings"].to_string();
    assert!(warnings.contains("it has a line over 64 MiB"), "{warnings}");
    assert!(!warnings.contains("context"), "{warnings}");
}

/// Every FILE_TOO_LARGE hint read_files gives, followed, reads the file (or is refused
/// for another reason): never the same refusal again.
#[test]
fn read_files_hints_for_big_or_odd_files_end_at_a_read_that_works() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    let mut u16 = vec![0xff, 0xfe];
    for u in "héllo wörld line\n".repeat(40_000).encode_utf16() {
        u16.extend_from_slice(&u.to_le_bytes());
    }
    write(&root, "u16big.txt", &u16);
    write(
        &root,
        "longline.txt",
        format!("{}\nsecond\n", "y".repeat(900 * 1024)),
    );
    write(&root, "big.txt", "z\n".repeat(2_000_000));
    let v = call_cli(
        &root,
        &state,
        "read_files",
        &json!({"paths": ["u16big.txt", "longline.txt", "big.txt"]}),
        false,
    );
    let files = v["files"].as_array().unwrap();
    let hint = |i: usize| files[i]["error"]["hint"].as_str().unwrap_or("").to_string();
    assert_eq!(files.len(), 3, "{v}");
    for f in files {
        assert_eq!(f["error"]["code"], "FILE_TOO_LARGE", "{f}");
    }
    // The two no line range reads: sent to read_file alone, base64, not to paging.
    for i in 0..2 {
        assert!(
            hint(i).contains("read_file") && hint(i).contains("base64"),
            "{}",
            hint(i)
        );
        assert!(!hint(i).contains("max_lines_each (e.g."), "{}", hint(i));
    }
    // Followed: base64 parts read.
    for name in ["u16big.txt", "longline.txt"] {
        let r = call_cli(
            &root,
            &state,
            "read_file",
            &json!({"path": name, "encoding": "base64", "offset": 0, "limit": 524_288}),
            false,
        );
        assert!(r["error"].is_null(), "{name}: {r}");
    }
    // The big text file pages: its hint's read works.
    assert!(hint(2).contains("max_lines_each"), "{}", hint(2));
    let r = call_cli(
        &root,
        &state,
        "read_files",
        &json!({"paths": ["big.txt"], "offset": 1, "max_lines_each": 200}),
        false,
    );
    assert!(r["files"][0]["error"].is_null(), "{r}");
    // read_file's own whole read of the UTF-16 file says base64 at once.
    let r = call_cli(
        &root,
        &state,
        "read_file",
        &json!({"path": "u16big.txt"}),
        false,
    );
    assert_eq!(r["error"]["code"], "FILE_TOO_LARGE", "{r}");
    let h = r["error"]["hint"].as_str().unwrap_or("");
    assert!(
        h.contains("base64") && !h.contains("offset 1, limit 200"),
        "{h}"
    );
    // offset 0: refused for the call, with read_files' own words.
    let r = call_cli(
        &root,
        &state,
        "read_files",
        &json!({"paths": ["big.txt"], "offset": 0}),
        false,
    );
    assert_eq!(r["error"]["code"], "INVALID_ARGUMENT", "{r}");
    assert!(
        r["error"]["hint"]
            .as_str()
            .unwrap_or("")
            .contains("offset 1"),
        "{r}"
    );
}

/// A question the client never answers: the hint names what gets the yes (answering,
/// or `--yes` on the command line), and a setting that lets the change through unasked
/// only for a permanent delete.
#[test]
fn an_unanswered_question_names_a_widening_setting_only_for_a_permanent_delete() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    write(&root, "a.txt", "a\n");
    // Another's change (the person's CLI): undoing it asks.
    let o = util::cli(&root, &state, &["write", "--content", "x\n", "new.txt"])
        .output()
        .unwrap();
    util::succeeded(&o);
    let mut cmd = util::bin();
    cmd.arg("--root").arg(&root).arg("--state-dir").arg(&state);
    cmd.args([
        "serve",
        "--allow-write",
        "--no-index",
        "--question-timeout",
        "1",
    ]);
    let mut s = StdioServer::spawn_with(cmd, "agent", json!({"elicitation": {}}));
    let cases = [
        ("undo", json!({"id": 1}), false),
        (
            "write_file",
            json!({"path": ".github/w.yml", "content": "x"}),
            false,
        ),
        (
            "edit",
            json!({"path": "ferret.toml", "old_string": "# x", "new_string": "# y"}),
            false,
        ),
        (
            "file_delete",
            json!({"path": "a.txt", "permanent": true}),
            true,
        ),
    ];
    for (n, (tool, args, permanent)) in cases.into_iter().enumerate() {
        if tool == "edit" {
            write(&root, "ferret.toml", "# x\n");
        }
        let id = 10 + n as u64;
        s.ask(id, tool, &args);
        let got = s.until(id, std::time::Duration::from_secs(30));
        assert!(
            got.iter().any(|m| m["method"] == "elicitation/create"),
            "{tool}: asked: {got:?}"
        );
        let answer = got.last().unwrap().to_string();
        assert!(answer.contains("CONFIRMATION_REQUIRED"), "{tool}: {answer}");
        assert!(answer.contains("went unanswered"), "{tool}: {answer}");
        assert!(answer.contains("--yes"), "{tool}: {answer}");
        assert!(!answer.contains("`confirm` setting"), "{tool}: {answer}");
        assert_eq!(
            answer.contains("allow_permanent_delete"),
            permanent,
            "{tool}: {answer}"
        );
    }
    assert!(root.join("a.txt").exists() && root.join("new.txt").exists());
    assert!(!root.join(".github").exists());
}

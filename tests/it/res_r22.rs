//! Issue #25, round 22 (resources): backups hold what undo needs (a patch's together, the
//! last day's whatever the cap, each file's first whatever the count), and refusals past
//! the stdio bounds are audited.

use crate::util::{agent, bin, cli, said, tempdir, write};
use serde_json::json;
use std::path::Path;

fn backups(state: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![state.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.to_string_lossy().contains("/backups/") {
                found.push(p);
            }
        }
    }
    found
}

/// Round 22: a patch of three files, each backup under `max_backup_bytes` but over it
/// together, landed, and pruning at once dropped its own first backup: not undoable.
/// Refused before anything changes; and the backups of the last day are never pruned:
/// an agent's change past them is refused.
#[test]
fn a_change_whose_backups_do_not_fit_is_refused_and_the_last_days_are_kept() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    let body = |c: char| format!("first {c}\n{}", format!("{c}\n").repeat(200_000));
    for c in ['a', 'b', 'c', 'd'] {
        write(&root, &format!("{c}.txt"), body(c));
    }
    let mut s = agent(&root, &state, &["max_backup_bytes=1000000"]);
    let patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-first a\n+FIRST a\n*** Update File: b.txt\n@@\n-first b\n+FIRST b\n*** Update File: c.txt\n@@\n-first c\n+FIRST c\n*** End Patch\n";
    let r = s.call("apply_patch", &json!({"patch": patch}));
    let t = r.to_string();
    assert_eq!(r["isError"], true, "{t}");
    assert!(
        t.contains("FILE_TOO_LARGE") && t.contains("max_backup_bytes"),
        "{t}"
    );
    for c in ['a', 'b', 'c'] {
        assert_eq!(
            std::fs::read_to_string(root.join(format!("{c}.txt"))).expect("file"),
            body(c)
        );
    }
    // Two fit (800 KB); a third edit would push them out: refused, nothing changed.
    for c in ['a', 'b'] {
        let r = s.call(
            "edit",
            &json!({"path": format!("{c}.txt"), "old_string": format!("first {c}"), "new_string": "X"}),
        );
        assert_ne!(r["isError"], true, "{r}");
    }
    let r = s.call(
        "edit",
        &json!({"path": "c.txt", "old_string": "first c", "new_string": "X"}),
    );
    let t = r.to_string();
    assert!(
        t.contains("FILE_TOO_LARGE") && t.contains("last day"),
        "{t}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("c.txt")).expect("c"),
        body('c')
    );
    assert_eq!(backups(&state).len(), 2);
    // Both earlier changes undo.
    for _ in 0..2 {
        let r = s.call("undo", &json!({}));
        assert_ne!(r["isError"], true, "{r}");
    }
    for c in ['a', 'b'] {
        assert_eq!(
            std::fs::read_to_string(root.join(format!("{c}.txt"))).expect("file"),
            body(c)
        );
    }
    // The person's own change is not refused for them (it goes over the cap).
    drop(s);
    let o = cli(
        &root,
        &state,
        &[
            "--set",
            "max_backup_bytes=1000000",
            "edit",
            "d.txt",
            "--old",
            "first d",
            "--new",
            "X",
        ],
    )
    .output()
    .expect("edit");
    assert!(o.status.success(), "{}", said(&o));
}

/// Round 22: fifty quick edits after an overwrite pruned the only copy of what the
/// overwrite replaced (fifty backups kept per file). Each file's first backup is kept
/// whatever the count: the person gets the original back.
#[test]
fn fifty_edits_never_prune_the_files_first_backup() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    write(&root, "important.txt", "THE PERSONS ORIGINAL\n");
    let mut s = agent(&root, &state, &[]);
    let r = s.call(
        "write_file",
        &json!({"path": "important.txt", "content": "v0\n", "overwrite": true}),
    );
    assert_ne!(r["isError"], true, "{r}");
    for i in 0..55 {
        let r = s.call(
            "edit",
            &json!({"path": "important.txt", "old_string": format!("v{i}\n"), "new_string": format!("v{}\n", i + 1)}),
        );
        assert_ne!(r["isError"], true, "{r}");
    }
    drop(s);
    assert!(backups(&state).len() <= 50, "{:?}", backups(&state).len());
    let o = cli(&root, &state, &["undo", "1", "--force", "--yes"])
        .output()
        .expect("undo");
    assert!(o.status.success(), "{}", said(&o));
    assert_eq!(
        std::fs::read_to_string(root.join("important.txt")).expect("file"),
        "THE PERSONS ORIGINAL\n"
    );
}

/// One POST of `body` with the 2026-07-28 headers naming `name` as the tool called.
fn post_2026(s: &crate::util::HttpServer, name: &str, body: &str) -> (u16, String) {
    s.exchange(
        format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
             Mcp-Method: tools/call\r\nMcp-Name: {name}\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{body}",
            s.port,
            body.len()
        )
        .as_bytes(),
    )
}

/// Round 22: rmcp's check that a 2026-07-28 request's headers match its body quoted the
/// body's value whole: a tool name of 4 MB was answered with 4 MB, past the request
/// budget too. Its refusals are cut short, charged, and 429 past the budget.
#[test]
fn a_refusal_of_rmcps_is_cut_short_and_429_past_the_budget() {
    let (_t, root) = tempdir();
    let (_l, logs) = tempdir();
    let audit = logs.join("audit.jsonl");
    let mut cmd = bin();
    cmd.arg("--root")
        .arg(&root)
        .arg("--audit-log")
        .arg(&audit)
        .args(["--set", "max_requests_per_round=5"])
        .args(["serve", "--http", "127.0.0.1:0"]);
    let s = crate::util::HttpServer::spawn(cmd);
    let big = "N".repeat(1 << 20);
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": big, "arguments": {}, "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}})
    .to_string();
    let mut statuses = Vec::new();
    for _ in 0..8 {
        let (status, text) = post_2026(&s, "x", &body);
        assert!(text.len() < 8 * 1024, "{status}: {} bytes back", text.len());
        assert!(!text.contains(&"N".repeat(1000)), "{status}: echoed");
        statuses.push(status);
    }
    assert_eq!(statuses[0], 400, "{statuses:?}");
    assert!(statuses.contains(&429), "{statuses:?}");
    let log = std::fs::read_to_string(&audit).unwrap_or_default();
    assert!(
        log.contains("HTTP_400") && log.contains("HTTP_429"),
        "{log}"
    );
}

/// Round 22: a call under way when the client closed stdin ran to the end (its change
/// landed, audited as sent) but was never answered: rmcp gave it 5 s. A last line with
/// no newline was neither run nor answered. Both are answered now.
#[test]
fn calls_under_way_at_the_end_of_input_are_answered() {
    use std::io::{BufRead, Write};
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    let mut child = bin()
        .arg("--root")
        .arg(&root)
        .args(["--state-dir"])
        .arg(&state)
        .args(["--set", "request_timeout=30s"])
        .args(["serve", "--allow-write", "--no-index"])
        // The write pauses 7 s once staged, past rmcp's 5 s.
        .env("FERRET_TEST_PAUSE_AFTER_STAGED", "7000")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    let lines = [
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"eof","version":"1"}}}),
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
        json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"late.txt","content":"x\n"}}}),
    ];
    for l in &lines {
        writeln!(stdin, "{l}").expect("write");
    }
    // The last line has no newline.
    write!(stdin, "{}", json!({"jsonrpc":"2.0","id":3,"method":"ping"})).expect("write");
    drop(stdin);
    let out = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let answers: Vec<serde_json::Value> = out
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| serde_json::from_str(&l).ok())
        .collect();
    let _ = child.wait();
    let of = |id: u64| answers.iter().find(|a| a["id"] == id);
    let wrote = of(2).unwrap_or_else(|| panic!("no answer to the write: {answers:?}"));
    assert_ne!(wrote["result"]["isError"], true, "{wrote}");
    assert!(root.join("late.txt").exists());
    assert!(of(3).is_some(), "no answer to the last line: {answers:?}");
}

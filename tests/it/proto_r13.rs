//! Issue #25, round 13: what a client sends cannot pin a call or come back outside the
//! budgets.
//! - A client that declares roots and never answers `roots/list` (or whose answer the
//!   framing refuses) no longer pins the call and its session's slot: past a few
//!   seconds the call goes on as if the client had no roots.
//! - A progress token is echoed in every progress notification: one longer than a token
//!   needs gets no progress, so a client's megabytes are not sent back hundreds of times.

use crate::util::{StdioServer, bin, tempdir, write};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

fn start(root: &std::path::Path, capabilities: Value) -> StdioServer {
    let mut cmd = bin();
    cmd.arg("--root").arg(root).arg("serve");
    StdioServer::spawn_with(cmd, "raw", capabilities)
}

#[test]
fn a_client_that_never_answers_roots_list_does_not_pin_its_calls() {
    let (_t, root) = tempdir();
    write(&root, "a.txt", "hello\n");
    let mut c = start(&root, json!({"roots": {"listChanged": true}}));
    let asked = Instant::now();
    c.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "read_file", "arguments": {"path": "a.txt"}}}));
    let got = c.until(1, Duration::from_secs(30));
    assert!(
        got.iter().any(|m| m["method"] == "roots/list"),
        "the server asked for the roots: {got:?}"
    );
    let answer = got.last().expect("an answer");
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    assert!(
        asked.elapsed() < Duration::from_secs(20),
        "{:?}",
        asked.elapsed()
    );
    // The next call does not ask (or wait) again.
    let asked = Instant::now();
    c.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "file_exists", "arguments": {"path": "a.txt"}}}));
    c.until(2, Duration::from_secs(10));
    assert!(asked.elapsed() < Duration::from_secs(3));
}

#[test]
fn a_huge_progress_token_gets_no_progress_and_a_short_one_does() {
    let (_t, root) = tempdir();
    for i in 0..3000 {
        write(&root, &format!("d{}/f{i}.txt", i % 30), "lorem ipsum\n");
    }
    let mut c = start(&root, json!({}));
    let progress = |c: &mut StdioServer, id: u64, token: Value| {
        c.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "grep", "arguments": {"pattern": "lorem", "output_mode": "count"},
                       "_meta": {"progressToken": token}}}));
        let got = c.until(id, Duration::from_secs(60));
        let answer = got.last().expect("answer").clone();
        assert_eq!(answer["result"]["isError"], false, "{answer}");
        got.iter()
            .filter(|m| m["method"] == "notifications/progress")
            .map(|m| m.to_string().len())
            .collect::<Vec<_>>()
    };
    let short = progress(&mut c, 1, json!("t-1"));
    assert!(!short.is_empty(), "a short token gets progress");
    let long = progress(&mut c, 2, json!("x".repeat(100_000)));
    assert!(
        long.is_empty(),
        "{} notifications echoed a 100 KB token",
        long.len()
    );
    let long = progress(&mut c, 3, json!("y".repeat(300)));
    assert!(long.is_empty());
}

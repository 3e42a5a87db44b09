//! Issue 26 (everyday use), items 1, 4, 5 and `GET /health`: budgets that fit the
//! transport and charge an answer once; `ferret call` held to a server's output budget;
//! a search past its time limit answering with what it found; an unauthenticated health
//! check that reveals nothing and still checks `Host`.

use crate::util::{bin, tempdir, write};
use ferret::config::{Config, Mode};
use ferret::{CallOptions, CancelToken, ErrorCode, Ferret, Session};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;

// ---------------------------------------------------------------------------------------
// `ferret serve` over stdio, raw JSON-RPC lines.

use crate::util::StdioServer as McpStdio;

/// `ferret --root ROOT GLOBAL… serve --no-index`, with `env` set, handshake done.
fn mcp_stdio(root: &Path, global: &[&str], env: &[(&str, &str)]) -> McpStdio {
    let mut cmd = bin();
    cmd.arg("--root")
        .arg(root)
        .args(global)
        .args(["serve", "--no-index"])
        .envs(env.iter().copied());
    McpStdio::spawn(cmd, "everyday_a")
}

fn is_error(r: &Value) -> bool {
    r["isError"] == json!(true)
}

fn text_of(r: &Value) -> String {
    r["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// What a model can receive of a successful result: the larger of its text and its
/// structured content as compact JSON.
fn received(r: &Value) -> u64 {
    let text = text_of(r).len() as u64;
    let structured = r
        .get("structuredContent")
        .map_or(0, |v| serde_json::to_string(v).unwrap().len() as u64);
    text.max(structured)
}

/// A small project an agent explores.
fn project(root: &Path) {
    write(root, "README.md", "# demo\nTODO: write docs\n");
    write(root, "src/main.rs", "fn main() {\n    // TODO: one\n}\n");
    write(root, "src/lib.rs", "pub fn f() -> u32 {\n    42\n}\n");
    write(root, "tests/t.rs", "#[test]\nfn t() {}\n");
}

/// Six tools an agent mixes, in turn.
fn mixed(i: usize) -> (&'static str, Value) {
    match i % 6 {
        0 => ("file_exists", json!({"path": "src/main.rs"})),
        1 => ("read_file", json!({"path": "src/lib.rs"})),
        2 => ("grep", json!({"pattern": "TODO", "output_mode": "content"})),
        3 => ("glob", json!({"pattern": "*.rs"})),
        4 => ("list_directory", json!({"path": "src"})),
        _ => ("get_file_info", json!({"path": "README.md"})),
    }
}

// ---------------------------------------------------------------------------------------
// 1. Budgets that fit the transport.

/// Over stdio with the defaults, a burst of 300 mixed calls (six times the old budget of
/// 50 a round) all succeed: no ordinary session meets the request budget.
#[test]
fn stdio_defaults_let_a_burst_of_300_mixed_calls_through() {
    let (_t, root) = tempdir();
    project(&root);
    let mut s = mcp_stdio(&root, &[], &[]);
    for i in 0..300 {
        let (tool, args) = mixed(i);
        let r = s.call(tool, &args);
        assert!(!is_error(&r), "call {} ({tool}) failed: {r}", i + 1);
    }
}

/// The per-round limits stay configurable: an explicit request budget applies over
/// stdio, whether set by flag, environment or the user's config file.
#[test]
fn an_explicit_request_budget_still_applies_over_stdio() {
    let (_t, root) = tempdir();
    project(&root);
    let (_c, conf) = tempdir();
    let file = conf.join("config.toml");
    std::fs::write(&file, "max_requests_per_round = 50\n").unwrap();
    let file = file.to_string_lossy().into_owned();
    type Variant<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>);
    let variants: Vec<Variant> = vec![
        (vec!["--set", "max_requests_per_round=50"], vec![]),
        (vec![], vec![("FERRET_MAX_REQUESTS_PER_ROUND", "50")]),
        (vec!["--config", &file], vec![]),
    ];
    for (global, env) in variants {
        let mut s = mcp_stdio(&root, &global, &env);
        for i in 0..50 {
            let (tool, args) = mixed(i);
            let r = s.call(tool, &args);
            assert!(
                !is_error(&r),
                "{global:?} {env:?}: call {} failed: {r}",
                i + 1
            );
        }
        let r = s.call("file_exists", &json!({"path": "README.md"}));
        assert!(
            is_error(&r) && text_of(&r).starts_with("RATE_LIMIT_EXCEEDED"),
            "{global:?} {env:?}: call 51 was {r}"
        );
    }
}

/// The defaults by transport: the command line none, stdio 3 000 (so that a client stuck
/// in a loop still meets one), HTTP 50 per principal; the byte budget is the same over
/// both transports.
#[test]
fn the_request_budget_defaults_follow_the_transport() {
    assert_eq!(Config::defaults(Mode::Cli).max_requests_per_round, 0);
    assert_eq!(Config::defaults(Mode::Stdio).max_requests_per_round, 3_000);
    assert_eq!(Config::defaults(Mode::Server).max_requests_per_round, 50);
    assert_eq!(
        Config::defaults(Mode::Stdio).max_bytes_per_round,
        Config::defaults(Mode::Server).max_bytes_per_round
    );
    assert_eq!(
        Config::defaults(Mode::Stdio).request_timeout,
        Config::defaults(Mode::Server).request_timeout
    );
}

/// In process, with the server's defaults: every answer is charged once, the larger of
/// its text and its structured JSON (what a model receives of it), in the audit record
/// and in the round's usage alike, and never their sum.
#[test]
fn an_answer_is_charged_once_for_what_the_model_receives() {
    let (_t, root) = tempdir();
    project(&root);
    write(&root, "big.txt", "a line of text to read\n".repeat(2000));
    let mut c = Config::defaults(Mode::Stdio);
    c.roots = vec![root.clone()];
    let f = Ferret::new(c).unwrap();
    let s = Session::new("charge", "test");
    let mut calls: Vec<(&str, Value)> = (0..6).map(mixed).collect();
    calls.push(("read_file", json!({"path": "big.txt"})));
    calls.push(("read_files", json!({"paths": ["src/*.rs", "README.md"]})));
    calls.push(("grep", json!({"pattern": "text", "output_mode": "content"})));
    let mut total = 0;
    for (tool, args) in calls {
        let out = f
            .call(&s, tool, args.clone(), CallOptions::default())
            .unwrap_or_else(|e| panic!("{tool} {args}: {e:?}"));
        // Both as they go on the wire: the text as a JSON string (its quotes aside).
        let text = serde_json::to_string(&out.text).unwrap().len() as u64 - 2;
        let json = serde_json::to_string(&out.structured).unwrap().len() as u64;
        let entry = f.audit().entries_for_session("charge").pop().unwrap();
        assert_eq!(entry.bytes_sent, text.max(json), "{tool} {args}");
        assert!(entry.bytes_sent < text + json, "{tool}: charged twice");
        total += entry.bytes_sent;
        assert_eq!(f.limiter().usage("charge").bytes, total, "{tool} {args}");
    }
}

/// A byte budget gives what it says: reads of a file whose text and structured JSON
/// together are well over the budget, but each under it, succeed until the content
/// returned reaches the budget (charged twice, the first read already failed).
#[test]
fn a_byte_budget_is_spent_on_content_not_on_its_twin() {
    let (_t, root) = tempdir();
    write(&root, "a.txt", "0123456789abcdef\n".repeat(1000));
    let mut c = Config::defaults(Mode::Stdio);
    c.roots = vec![root.clone()];
    let first = Ferret::new(c.clone()).unwrap();
    let s = Session::new("once", "test");
    let out = first
        .call(
            &s,
            "read_file",
            json!({"path": "a.txt"}),
            CallOptions::default(),
        )
        .unwrap();
    let one = first.limiter().usage("once").bytes;
    let both = out.text.len() as u64 + serde_json::to_string(&out.structured).unwrap().len() as u64;
    assert!(
        both > one + one / 2,
        "text {} + json, one {one}",
        out.text.len()
    );
    // Room for exactly three answers.
    c.max_bytes_per_round = 3 * one;
    let f = Ferret::new(c).unwrap();
    for i in 0..3 {
        f.call(
            &s,
            "read_file",
            json!({"path": "a.txt"}),
            CallOptions::default(),
        )
        .unwrap_or_else(|e| panic!("read {}: {e:?}", i + 1));
    }
    let e = f
        .call(
            &s,
            "read_file",
            json!({"path": "a.txt"}),
            CallOptions::default(),
        )
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::RoundLimitExceeded);
    assert_eq!(f.limiter().usage("once").bytes, 3 * one);
}

/// A tool's early refusal (before it reads) asks the budget the answer will be charged
/// to: over HTTP the principal's, shared by its connections, not the connection's own.
/// A second connection of a spent principal is refused before reading a byte.
#[test]
fn an_early_refusal_asks_the_principals_budget() {
    let (_t, root) = tempdir();
    write(&root, "a.txt", "0123456789\n".repeat(500));
    let mut c = Config::defaults(Mode::Server);
    c.roots = vec![root.clone()];
    c.max_bytes_per_round = 12_000;
    let f = Ferret::new(c).unwrap();
    let one = Session::new("conn-1", "a").with_budget("http-token");
    let two = Session::new("conn-2", "b").with_budget("http-token");
    f.call(
        &one,
        "read_file",
        json!({"path": "a.txt"}),
        CallOptions::default(),
    )
    .unwrap();
    let e = f
        .call(
            &two,
            "read_file",
            json!({"path": "a.txt"}),
            CallOptions::default(),
        )
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::RoundLimitExceeded);
    let entry = f.audit().entries_for_session("conn-2").pop().unwrap();
    assert_eq!(entry.bytes_read, 0, "read before being refused");
    assert_eq!(entry.principal.as_deref(), Some("http-token"));
}

/// Over stdio with the defaults and an audit log: what the audit records as sent equals,
/// call by call, what came back on the wire (the larger of text and structured JSON).
#[test]
fn over_stdio_the_audited_charge_equals_the_content_returned() {
    let (_t, root) = tempdir();
    project(&root);
    let (_a, logs) = tempdir();
    let audit = logs.join("audit.jsonl");
    let mut expected = Vec::new();
    {
        let mut s = mcp_stdio(&root, &["--audit-log", audit.to_str().unwrap()], &[]);
        for i in 0..60 {
            let (tool, args) = mixed(i);
            let r = s.call(tool, &args);
            assert!(!is_error(&r), "{r}");
            expected.push(received(&r));
        }
    }
    let sent: Vec<u64> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["bytes_sent"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(sent, expected);
}

/// Over HTTP the request budget stays per principal, 50 a round by default: two
/// sessions of one client share it (opening each is a request, issue 25), and the 51st
/// request is refused.
#[test]
fn over_http_the_default_request_budget_stays_per_principal() {
    let (_t, root) = tempdir();
    project(&root);
    let server = Http::start(&root, &[], Some(TOKEN));
    let sessions = [server.session("one"), server.session("two")];
    let call = |i: usize| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{i},"method":"tools/call","params":{{"name":"file_exists","arguments":{{"path":"README.md"}}}}}}"#
        )
    };
    for i in 0..48 {
        let (status, text) = server.post(Some(&sessions[i % 2]), &call(i + 2));
        assert_eq!(status, 200, "{text}");
        assert!(
            !text.contains("RATE_LIMIT_EXCEEDED"),
            "call {}: {text}",
            i + 1
        );
    }
    let (_, text) = server.post(Some(&sessions[0]), &call(99));
    assert!(text.contains("RATE_LIMIT_EXCEEDED"), "{text}");
}

// ---------------------------------------------------------------------------------------
// 2. `ferret call` is the MCP tool.

/// A tree with many matches: 3 000 files of a matching line each.
fn many_matches(root: &Path) {
    for d in 0..10 {
        for i in 0..300 {
            write(
                root,
                &format!("dir{d}/file{i:03}.txt"),
                format!("hello {d} {i} world, a line long enough to count\n"),
            );
        }
    }
}

fn call_cli(root: &Path, global: &[&str], tool: &str, args: &Value, extra: &[&str]) -> String {
    let out = bin()
        .arg("--root")
        .arg(root)
        .args(global)
        .args(["call", tool, &args.to_string()])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `ferret call` answers as the MCP server does: the same text (with its notice of what
/// was cut) and the same structured result, held to the server's output budget however
/// much was asked for; `--full` lifts the budget and prints everything.
#[test]
fn call_prints_what_mcp_would_and_full_prints_all() {
    let (_t, root) = tempdir();
    many_matches(&root);
    write(
        &root,
        "big.txt",
        format!("{}\n", "y".repeat(99)).repeat(9_000),
    );
    let budget = Config::defaults(Mode::Server).max_output_chars as usize;
    let asks = [
        (
            "grep",
            json!({"pattern": "hello", "output_mode": "content", "max_results": 1_000_000}),
        ),
        ("grep", json!({"pattern": "hello", "max_results": 0})),
        ("glob", json!({"pattern": "*.txt", "max_results": 0})),
        ("read_file", json!({"path": "big.txt"})),
    ];
    let mut mcp = mcp_stdio(&root, &["--set", "max_bytes_per_round=0"], &[]);
    for (tool, args) in &asks {
        let r = mcp.call(tool, args);
        assert!(!is_error(&r), "{r}");
        let text = call_cli(&root, &[], tool, args, &["--text"]);
        assert!(text.len() <= budget + 1, "{tool}: {} chars", text.len());
        // print_text adds the newline a terminal wants.
        assert_eq!(text.trim_end(), text_of(&r).trim_end(), "{tool} {args}");
        let json: Value = serde_json::from_str(&call_cli(&root, &[], tool, args, &[])).unwrap();
        assert_eq!(json, r["structuredContent"], "{tool} {args}");
    }
    // The budget was met: the answers were cut, and say so.
    let content = call_cli(&root, &[], "grep", &asks[0].1, &["--text"]);
    assert!(content.contains("max_output_chars"), "{content}");
    assert!(content.lines().count() < 3_000);
    // --full: every matching line, no notice.
    let full = call_cli(&root, &[], "grep", &asks[0].1, &["--text", "--full"]);
    assert_eq!(
        full.lines().filter(|l| l.contains(":1:hello")).count(),
        3_000
    );
    assert!(!full.contains("max_output_chars"));
    let full: Value =
        serde_json::from_str(&call_cli(&root, &[], "grep", &asks[0].1, &["--full"])).unwrap();
    let lines: usize = full["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["lines"].as_array().unwrap().len())
        .sum();
    assert_eq!(lines, 3_000);
    assert_eq!(full["truncated"], false);
    // A budget the user set is the one applied.
    let set = call_cli(
        &root,
        &["--set", "max_output_chars=3000"],
        "grep",
        &asks[0].1,
        &["--text"],
    );
    assert!(set.len() <= 3_001, "{}", set.len());
    assert!(set.contains("max_output_chars"));
}

// ---------------------------------------------------------------------------------------
// 3. A slow search returns what it found.

/// Files in [`slow_tree`].
const SLOW_FILES: u64 = 40_000;

/// 40 000 small files, each with a match: more than a debug build searches in 300 ms
/// (about 0.8 s on two cores). Made once per build directory and shared by the tests.
fn slow_tree() -> &'static Path {
    static TREE: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    TREE.get_or_init(|| {
        let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("everyday_a-slow-tree");
        let done = root.join(".complete");
        if !done.exists() {
            let _ = std::fs::remove_dir_all(&root);
            let body = "lorem ipsum NEEDLE dolor\n".repeat(4);
            for d in 0..40 {
                let dir = root.join(format!("d{d:02}"));
                std::fs::create_dir_all(&dir).unwrap();
                for i in 0..1000 {
                    std::fs::write(dir.join(format!("f{i:03}.txt")), &body).unwrap();
                }
            }
            std::fs::write(&done, "").unwrap();
        }
        root.canonicalize().unwrap()
    })
}

fn call_json(root: &Path, timeout: &str, tool: &str, args: &Value) -> (bool, Value, String) {
    // A state directory of its own: a stored index of this tree (a server test builds
    // one in the shared scratch state) answers a search for an absent word at once.
    let state = tempfile::tempdir().unwrap();
    let bin = || {
        let mut c = bin();
        c.env("XDG_STATE_HOME", state.path());
        c
    };
    let out = bin()
        .arg("--root")
        .arg(root)
        .args(["--set", &format!("request_timeout={timeout}")])
        .args(["call", tool, &args.to_string()])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let text = bin()
        .arg("--root")
        .arg(root)
        .args(["--set", &format!("request_timeout={timeout}")])
        .args(["call", tool, &args.to_string(), "--text"])
        .output()
        .unwrap();
    (
        out.status.success(),
        v,
        String::from_utf8_lossy(&text.stdout).into_owned(),
    )
}

/// A search's answer that ended part way through at its time limit (JSON and text),
/// trying shorter limits until one does.
fn partial(root: &Path, tool: &str, args: &Value) -> (Value, String) {
    let mut last = Value::Null;
    for limit in ["300ms", "150ms", "80ms", "40ms", "20ms", "10ms", "5ms"] {
        let (ok, v, text) = call_json(root, limit, tool, args);
        let partial = |t: &str| t.contains("[incomplete (time limit)");
        // Part way: a deadline that falls just after the last file was searched marks the
        // answer incomplete too (the walk cannot tell it had ended); a shorter limit is
        // tried then.
        let part_way = v["incomplete"]["files_searched"]
            .as_u64()
            .is_none_or(|n| n < SLOW_FILES);
        if ok && v.get("incomplete").is_some() && partial(&text) && part_way {
            return (v, text);
        }
        last = v;
    }
    panic!("{tool} {args}: no limit ended it part way; last answer: {last}");
}

/// Past its time limit each search tool answers with what it found, marked incomplete
/// (reason, files searched, a hint) in the structured result and the text, `truncated`
/// set; a search that found nothing by then is the TIMEOUT error.
#[test]
fn a_search_past_its_time_limit_returns_what_it_found() {
    let (root, total) = (slow_tree(), SLOW_FILES);
    let searches = [
        (
            "grep",
            json!({"pattern": "NEEDLE", "output_mode": "count"}),
            "file_count",
        ),
        ("grep", json!({"pattern": "NEEDLE"}), "file_count"),
        (
            "search_files",
            json!({"pattern": "NEEDLE", "max_results": 5}),
            "file_count",
        ),
        ("file_search", json!({"query": "needle"}), ""),
    ];
    for (tool, args, count) in &searches {
        // How far a search gets in a given time depends on the machine and its load:
        // shorter limits are tried until one ends the search part way (not a timing
        // assertion: the answer's shape is what is checked).
        let (v, text) = partial(root, tool, args);
        assert_eq!(v["truncated"], true, "{tool}: {v}");
        let inc = &v["incomplete"];
        assert_eq!(inc["reason"], "time limit", "{tool}: {v}");
        let searched = inc["files_searched"].as_u64().unwrap();
        assert!(searched > 0 && searched < total, "{tool}: {searched}");
        assert!(inc["hint"].as_str().unwrap().contains("time limit"));
        if !count.is_empty() {
            let found = v[count].as_u64().unwrap();
            assert!(found > 0 && found < total, "{tool}: {found} of {total}");
        }
        assert!(text.contains("[incomplete (time limit)"), "{tool}: {text}");
        assert!(!text.starts_with("TIMEOUT"), "{tool}: {text}");
    }
    // The walk of names: the same.
    let (v, text) = partial(root, "glob", &json!({"pattern": "*.txt"}));
    let count = v["count"].as_u64().unwrap();
    assert!(count > 0 && count <= total, "{count}");
    assert_eq!(v["incomplete"]["reason"], "time limit");
    assert!(text.contains("[incomplete (time limit)"), "{text}");
    // Unlimited, the same search is whole and says nothing of the kind.
    let (ok, v, _) = call_json(root, "0s", "grep", &searches[0].1);
    assert!(ok);
    assert_eq!(v["file_count"], total);
    assert!(v.get("incomplete").is_none(), "{v}");
}

/// Only a search that found nothing by its deadline is the TIMEOUT error. (A 5 ms limit:
/// a name search of the tree can finish within 300 ms on a warm cache.)
#[test]
fn a_search_that_found_nothing_in_time_is_a_timeout() {
    let root = slow_tree();
    for (timeout, tool, args) in [
        ("5ms", "grep", json!({"pattern": "NOT_THERE"})),
        (
            "5ms",
            "grep",
            json!({"pattern": "NOT_THERE", "output_mode": "content"}),
        ),
        ("5ms", "search_files", json!({"pattern": "NOT_THERE"})),
        ("5ms", "file_search", json!({"query": "not_there"})),
        ("5ms", "glob", json!({"pattern": "*.rs"})),
    ] {
        // The first of these limits that stops the search before its end must answer
        // TIMEOUT (a warm name search can end within a few milliseconds).
        let mut seen = None;
        for limit in [timeout, "2ms", "1ms"] {
            let (ok, v, text) = call_json(root, limit, tool, &args);
            if ok {
                assert!(v.get("incomplete").is_none(), "{tool}: {v}");
                continue;
            }
            seen = Some((v, text));
            break;
        }
        let (v, text) = seen.unwrap_or_else(|| panic!("{tool}: every limit let it finish"));
        assert_eq!(v["error"]["code"], "TIMEOUT", "{tool}: {v}");
        assert!(text.starts_with("TIMEOUT"), "{tool}: {text}");
        let hint = v["error"]["hint"].as_str().unwrap();
        assert!(hint.contains("nothing was found in the"), "{tool}: {hint}");
    }
}

/// Cancellation stays an error, whatever the search found before it.
#[test]
fn a_cancelled_search_is_an_error_even_with_matches() {
    let (_t, root) = tempdir();
    for i in 0..3000 {
        write(&root, &format!("d{}/f{i}.txt", i % 10), "NEEDLE\n");
    }
    let mut c = Config::defaults(Mode::Cli);
    c.roots = vec![root.clone()];
    let f = Ferret::new(c).unwrap();
    for (tool, args) in [
        ("grep", json!({"pattern": "NEEDLE", "output_mode": "count"})),
        ("search_files", json!({"pattern": "NEEDLE"})),
        ("file_search", json!({"query": "NEEDLE"})),
    ] {
        let cancel = CancelToken::new();
        let on_progress = cancel.clone();
        // Cancelled at the first progress report: 1 024 files searched, each a match.
        let opts = CallOptions {
            cancel,
            progress: Some(Arc::new(move |_: ferret::Progress| on_progress.cancel())),
            ..CallOptions::default()
        };
        let e = f
            .call(&Session::new("c", "t"), tool, args, opts)
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::Cancelled, "{tool}");
    }
}

// ---------------------------------------------------------------------------------------
// 4. GET /health.

const TOKEN: &str = "everyday-token";

struct Http {
    server: crate::util::HttpServer,
    port: u16,
    token: Option<&'static str>,
}

impl Http {
    fn start(root: &Path, global: &[&str], token: Option<&'static str>) -> Http {
        let mut cmd = bin();
        cmd.arg("--root").arg(root).args(global).args([
            "serve",
            "--http",
            "127.0.0.1:0",
            "--no-index",
        ]);
        if let Some(t) = token {
            cmd.args(["--token", t]);
        }
        let server = crate::util::HttpServer::spawn(cmd);
        let port = server.port;
        Http {
            server,
            port,
            token,
        }
    }

    /// Raw bytes on a fresh connection: the status and the whole answer.
    fn exchange(&self, request: &str) -> (u16, String) {
        self.server.exchange(request.as_bytes())
    }

    fn host(&self) -> String {
        format!("Host: 127.0.0.1:{}\r\n", self.port)
    }

    fn auth(&self) -> String {
        self.token
            .map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"))
    }

    fn post(&self, session: Option<&str>, body: &str) -> (u16, String) {
        let sid = session.map_or(String::new(), |s| {
            format!("Mcp-Session-Id: {s}\r\nMCP-Protocol-Version: 2025-11-25\r\n")
        });
        self.exchange(&format!(
            "POST /mcp HTTP/1.1\r\n{}{}{sid}Content-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nConnection: close\r\n\
             Content-Length: {}\r\n\r\n{body}",
            self.host(),
            self.auth(),
            body.len()
        ))
    }

    /// A legacy session; returns its id.
    fn session(&self, name: &str) -> String {
        let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
            "protocolVersion":"2025-11-25","capabilities":{},
            "clientInfo":{"name":name,"version":"0"}}})
        .to_string();
        let (status, text) = self.post(None, &init);
        assert_eq!(status, 200, "{text}");
        let sid = text
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .starts_with("mcp-session-id:")
                    .then(|| l.split(':').nth(1).unwrap().trim().to_string())
            })
            .expect("a session id");
        self.post(
            Some(&sid),
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        );
        sid
    }

    /// `METHOD TARGET` with these header lines (each ending in CRLF).
    fn get(&self, line: &str, headers: &str) -> (u16, String) {
        self.exchange(&format!(
            "{line} HTTP/1.1\r\n{headers}Connection: close\r\n\r\n"
        ))
    }
}

fn body(answer: &str) -> &str {
    answer.split("\r\n\r\n").nth(1).unwrap_or_default()
}

/// `GET /health` answers 200 `{"status":"ok"}` with or without a token, with a wrong one
/// too, and says nothing else: no version, no root, no count, no server name.
#[test]
fn health_answers_without_a_token_and_reveals_nothing() {
    let (_t, root) = tempdir();
    project(&root);
    for token in [Some(TOKEN), None] {
        let server = Http::start(&root, &[], token);
        let host = server.host();
        for auth in [
            String::new(),
            format!("Authorization: Bearer {TOKEN}\r\n"),
            "Authorization: Bearer wrong\r\n".to_string(),
        ] {
            for target in ["/health", "/health?verbose=1"] {
                let (status, answer) =
                    server.get(&format!("GET {target}"), &format!("{host}{auth}"));
                assert_eq!(status, 200, "{token:?} {auth:?}: {answer}");
                assert_eq!(body(&answer), "{\"status\":\"ok\"}\n", "{answer}");
                let lower = answer.to_ascii_lowercase();
                for secret in [
                    env!("CARGO_PKG_VERSION"),
                    "ferret",
                    &root.to_string_lossy().to_ascii_lowercase(),
                    "session",
                ] {
                    assert!(!lower.contains(secret), "{secret} in {answer}");
                }
            }
            let (status, answer) = server.get("HEAD /health", &format!("{host}{auth}"));
            assert_eq!(status, 200, "{answer}");
        }
        // The token still guards everything else, near names included.
        if token.is_some() {
            for target in ["/mcp", "/health/", "/HEALTH", "/health/../mcp", "/healthz"] {
                let (status, answer) = server.get(&format!("GET {target}"), &host);
                assert_eq!(status, 401, "{target}: {answer}");
            }
            let (status, _) = server.exchange(&format!(
                "POST /mcp HTTP/1.1\r\n{host}Content-Type: application/json\r\nConnection: close\r\n\
                 Content-Length: 2\r\n\r\n{{}}"
            ));
            assert_eq!(status, 401);
        }
        // Not a way in: other methods are refused.
        let (status, _) = server.exchange(&format!(
            "POST /health HTTP/1.1\r\n{host}Content-Length: 2\r\nConnection: close\r\n\r\n{{}}"
        ));
        assert_eq!(status, 405);
    }
}

/// DNS rebinding and web pages: a `Host` that does not name this server, no `Host`, two,
/// a list, a request target naming another host, or any `Origin`, is refused, token or
/// none; each refusal is audited, an answer is not.
#[test]
fn health_checks_host_and_refuses_web_pages() {
    let (_t, root) = tempdir();
    let (_a, logs) = tempdir();
    let audit = logs.join("audit.jsonl");
    let server = Http::start(
        &root,
        &["--audit-log", audit.to_str().unwrap()],
        Some(TOKEN),
    );
    let p = server.port;
    let good = server.host();
    let cases: Vec<(String, String, u16)> = vec![
        (
            "GET /health".into(),
            format!("Host: evil.example:{p}\r\n"),
            403,
        ),
        ("GET /health".into(), "Host: evil.example\r\n".into(), 403),
        (
            "GET /health".into(),
            format!("Host: localhost.evil.example:{p}\r\n"),
            403,
        ),
        (
            "GET /health".into(),
            format!("Host: 127.0.0.1.nip.io:{p}\r\n"),
            403,
        ),
        ("GET /health".into(), String::new(), 403),
        (
            "GET /health".into(),
            format!("{good}Host: evil.example\r\n"),
            400,
        ),
        (
            "GET /health".into(),
            format!("Host: 127.0.0.1:{p}, evil.example\r\n"),
            400,
        ),
        ("GET http://evil.example/health".into(), good.clone(), 400),
        (
            "GET /health".into(),
            format!("{good}Origin: http://evil.example\r\n"),
            403,
        ),
        (
            "GET /health".into(),
            format!("{good}Origin: http://localhost:{p}\r\n"),
            403,
        ),
        (
            "GET /health".into(),
            format!("Host: user@127.0.0.1:{p}\r\n"),
            403,
        ),
    ];
    for (line, headers, want) in &cases {
        let (status, answer) = server.get(line, headers);
        assert_eq!(status, *want, "{line} {headers:?}: {answer}");
        assert!(!body(&answer).contains("ok"), "{answer}");
    }
    // The names a local client uses are served.
    for host in [
        format!("Host: 127.0.0.1:{p}\r\n"),
        format!("Host: localhost:{p}\r\n"),
        format!("Host: LOCALHOST:{p}\r\n"),
        "Host: localhost\r\n".to_string(),
        format!("Host: [::1]:{p}\r\n"),
    ] {
        let (status, answer) = server.get("GET /health", &host);
        assert_eq!(status, 200, "{host:?}: {answer}");
    }
    drop(server);
    let log = std::fs::read_to_string(&audit).unwrap_or_default();
    let records: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let refused = records
        .iter()
        .filter(|r| r["reason"].as_str().is_some_and(|s| s.contains("/health")))
        .count();
    assert_eq!(refused, cases.len(), "{log}");
    assert!(
        records
            .iter()
            .all(|r| r["result"] != "success" || r["operation"] != "http"),
        "{log}"
    );
}

/// A health check is not a tool call: any number of them leaves a principal's request
/// budget whole.
#[test]
fn health_checks_cost_no_budget() {
    let (_t, root) = tempdir();
    project(&root);
    // Three requests: the session's opening (issue 25) and two calls.
    let server = Http::start(&root, &["--set", "max_requests_per_round=3"], Some(TOKEN));
    for _ in 0..20 {
        let (status, _) = server.get("GET /health", &server.host());
        assert_eq!(status, 200);
    }
    let sid = server.session("budget");
    let call = r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"file_exists","arguments":{"path":"README.md"}}}"#;
    for _ in 0..2 {
        let (status, text) = server.post(Some(&sid), call);
        assert_eq!(status, 200);
        assert!(!text.contains("RATE_LIMIT_EXCEEDED"), "{text}");
    }
    let (_, text) = server.post(Some(&sid), call);
    assert!(text.contains("RATE_LIMIT_EXCEEDED"), "{text}");
}

//! Framing costs, round 8 (issue 25, attacker 12b): a batch's answer is bounded by a
//! constant, a message of too many JSON values is refused unparsed (stdio and HTTP), a
//! request reusing an id under way is refused at once (stdio), and HTTP bodies that
//! cannot be read are charged to the request budget and audited. All on the real binary.

use crate::util::{self, bin};
use serde_json::{Value, json};
use std::io::Write;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;

/// `ferret serve` over stdio with raw lines; every stdout line must be whole JSON.
struct Raw {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<(usize, Value)>,
}

impl Raw {
    fn spawn(root: &std::path::Path, args: &[&str], caps: Value) -> Raw {
        let mut child = bin()
            .arg("--root")
            .arg(root)
            .args(args)
            .arg("serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let out = std::io::BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in out.split(b'\n') {
                let Ok(line) = line else { break };
                let v: Value = serde_json::from_slice(&line)
                    .unwrap_or_else(|e| json!({"UNPARSABLE": e.to_string()}));
                if tx.send((line.len(), v)).is_err() {
                    break;
                }
            }
        });
        let mut r = Raw {
            child,
            stdin,
            lines,
        };
        r.line(
            json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
                "protocolVersion":"2025-06-18","capabilities":caps,
                "clientInfo":{"name":"frame","version":"1"}}})
            .to_string()
            .as_bytes(),
        );
        assert_eq!(r.next()["id"], 0);
        r.line(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        r
    }

    fn line(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(bytes).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// The next line and its length in bytes.
    fn next_sized(&self) -> (usize, Value) {
        let (n, v) = self
            .lines
            .recv_timeout(Duration::from_secs(60))
            .expect("an answer within a minute");
        assert!(v.get("UNPARSABLE").is_none(), "a torn line on stdout: {v}");
        (n, v)
    }

    fn next(&self) -> Value {
        self.next_sized().1
    }

    fn quiet(&self, ms: u64) -> bool {
        self.lines.recv_timeout(Duration::from_millis(ms)).is_err()
    }

    fn ping(&mut self, id: Value) {
        self.line(
            json!({"jsonrpc":"2.0","id":id,"method":"ping"})
                .to_string()
                .as_bytes(),
        );
        let v = self.next();
        assert_eq!(v["id"], id, "the ping after is answered next: {v}");
        assert!(v.get("result").is_some(), "{v}");
    }

    fn peak_mib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
            / 1024
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn assert_error(v: &Value, id: Value, code: i64) {
    assert_eq!(v["id"], id, "{v}");
    assert_eq!(v["error"]["code"], code, "{v}");
    assert!(
        v["error"]["data"]["hint"]
            .as_str()
            .is_some_and(|h| h.len() > 20),
        "a hint says what to do: {v}"
    );
}

/// `[x,x,x,…]` with `n` copies of `x`.
fn array_of(x: &str, n: usize) -> String {
    let mut s = String::with_capacity(n * (x.len() + 1) + 2);
    s.push('[');
    for i in 0..n {
        if i > 0 {
            s.push(',');
        }
        s.push_str(x);
    }
    s.push(']');
    s
}

/// The bounded answers every batch shape gets, from one transport's `answer(body)`
/// (the answer's byte length and value).
fn check_batches(mut answer: impl FnMut(&[u8]) -> (usize, Value)) {
    // Far too many values: one error, never parsed.
    for (x, n) in [
        ("5", 1_000_000),
        ("{}", 300_000),
        ("[]", 300_000),
        ("null", 300_000),
    ] {
        let (len, v) = answer(array_of(x, n).as_bytes());
        assert!(len < 2048, "{x} x {n}: a {len}-byte answer");
        let v = if v.is_array() { v[0].clone() } else { v };
        assert_error(&v, Value::Null, -32600);
    }
    // More than 32 elements, under the value cap: one error saying how many.
    for (x, n) in [
        ("5", 33),
        ("5", 5000),
        (r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#, 40),
    ] {
        let (len, v) = answer(array_of(x, n).as_bytes());
        assert!(len < 2048, "{x} x {n}: a {len}-byte answer");
        let v = if v.is_array() { v[0].clone() } else { v };
        assert_error(&v, Value::Null, -32600);
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains(&n.to_string()),
            "{v}"
        );
    }
    // A small batch: one error per request with an id, ONE for all the rest.
    let (len, v) = answer(
        br#"[5,"x",null,{},{"jsonrpc":"2.0","id":1.5,"method":"m"},{"jsonrpc":"2.0","id":3,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/x"},7,{"jsonrpc":"2.0","id":"s","method":"tools/list"}]"#,
    );
    assert!(len < 2048);
    let ids: Vec<Value> = v
        .as_array()
        .expect("an array answers a small batch")
        .iter()
        .map(|a| a["id"].clone())
        .collect();
    assert_eq!(ids, [json!(3), json!("s"), Value::Null], "{v}");
    // Thirty-two non-requests: still one answer.
    let (_, v) = answer(array_of("5", 32).as_bytes());
    assert_eq!(v.as_array().map(Vec::len), Some(1), "{v}");
}

#[test]
fn stdio_batches_get_an_answer_bounded_by_a_constant() {
    let (_t, root) = util::tempdir();
    let mut s = Raw::spawn(&root, &[], json!({}));
    let mut n = 0u64;
    check_batches(|body| {
        s.line(body);
        let a = s.next_sized();
        n += 1;
        s.ping(json!(n));
        a
    });
    let peak = s.peak_mib();
    assert!(peak < 200, "peak {peak} MiB");
}

/// A message's params of `[1,1,…]`: its id, and how many values.
fn many_values(id: &str, n: usize) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":"{id}","method":"ping","params":{{"_meta":{{"x":{}}}}}}}"#,
        array_of("1", n)
    )
}

#[test]
fn stdio_lines_of_too_many_values_are_refused_unparsed_and_strings_are_one_value() {
    let (_t, root) = util::tempdir();
    let mut s = Raw::spawn(&root, &["--allow-write"], json!({}));
    // 2 M values in a 4 MB line; objects and arrays nested; a notification gets none.
    for (i, line) in [
        many_values("v", 2_000_000),
        format!(
            r#"{{"jsonrpc":"2.0","id":"w","method":"tools/call","params":{{"name":"read_file","arguments":{{"path":"a","x":{}}}}}}}"#,
            array_of(r#"{"a":[1,2]}"#, 100_000)
        ),
        format!(
            r#"{{"jsonrpc":"2.0","id":"d","method":"ping","params":{{"_meta":{{"x":{}}}}}}}"#,
            "[".repeat(300_000)
        ),
    ]
    .iter()
    .enumerate()
    {
        s.line(line.as_bytes());
        let (len, v) = s.next_sized();
        assert!(len < 2048);
        assert_error(&v, v["id"].clone(), -32600);
        assert_eq!(v["id"], ["v", "w", "d"][i], "{v}");
        assert_eq!(v["error"]["data"]["code"], "REQUEST_TOO_LARGE", "{v}");
        s.ping(json!(100 + i));
    }
    s.line(
        format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/x","params":{{"x":{}}}}}"#,
            array_of("1", 300_000)
        )
        .as_bytes(),
    );
    s.ping(json!(200));
    let peak = s.peak_mib();
    assert!(peak < 200, "peak {peak} MiB");
    // A large content is ONE string value, commas, brackets and escaped quotes in it
    // counted for nothing: it is written.
    let content = "[1,{\\\"a\\\":[2,3]},\\\\".repeat(150_000);
    let line = format!(
        r#"{{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{{"name":"write_file","arguments":{{"path":"big.txt","content":"{content}"}}}}}}"#
    );
    s.line(line.as_bytes());
    let v = s.next();
    assert_eq!(v["id"], "big");
    assert!(v.get("result").is_some(), "{v}");
    assert_ne!(v["result"]["isError"], true, "{v}");
    let written = std::fs::read_to_string(root.join("big.txt")).unwrap();
    assert_eq!(written.len(), 150_000 * "[1,{\"a\":[2,3]},\\".len());
}

/// A permanent delete that asks the client (elicitation) and waits: a request that
/// stays under way until the question is answered.
fn asking_delete(id: &Value) -> Vec<u8> {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"file_delete",
        "arguments":{"path":"a.txt","permanent":true}}})
    .to_string()
    .into_bytes()
}

#[test]
fn stdio_a_request_reusing_an_id_under_way_is_refused_at_once_and_the_first_is_answered() {
    for id in [json!(7), json!("seven")] {
        let (_t, root) = util::tempdir();
        util::write(&root, "a.txt", "a\n");
        let (_s, state) = util::tempdir();
        let state_arg = state.to_string_lossy().to_string();
        let mut s = Raw::spawn(
            &root,
            &["--allow-write", "--state-dir", &state_arg],
            json!({"elicitation": {}}),
        );
        s.line(&asking_delete(&id));
        let question = s.next();
        assert_eq!(question["method"], "elicitation/create", "{question}");
        // The same id again, as the same call, as another method: refused at once, each.
        s.line(&asking_delete(&id));
        let v = s.next();
        assert_error(&v, id.clone(), -32600);
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("already in use"),
            "{v}"
        );
        s.line(
            json!({"jsonrpc":"2.0","id":id,"method":"ping"})
                .to_string()
                .as_bytes(),
        );
        assert_error(&s.next(), id.clone(), -32600);
        s.line(
            json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"read_file",
                "arguments":{"path":"a.txt"}}})
            .to_string()
            .as_bytes(),
        );
        assert_error(&s.next(), id.clone(), -32600);
        // Other ids pass meanwhile (7 and "7" are different ids).
        let other = if id.is_number() { json!("7") } else { json!(7) };
        s.ping(other);
        // The question answered: the first call gets its one answer.
        s.line(
            json!({"jsonrpc":"2.0","id":question["id"],"result":{"action":"decline"}})
                .to_string()
                .as_bytes(),
        );
        let v = s.next();
        assert_eq!(v["id"], id, "{v}");
        assert!(v.get("result").is_some(), "{v}");
        assert!(s.quiet(300), "one answer for the first call only");
        // Answered, the id is free again.
        s.ping(id.clone());
        s.ping(id.clone());
        assert!(root.join("a.txt").exists(), "a declined delete deleted");
    }
}

#[test]
fn stdio_a_cancelled_request_frees_its_id() {
    let (_t, root) = util::tempdir();
    util::write(&root, "a.txt", "a\n");
    let (_s, state) = util::tempdir();
    let state_arg = state.to_string_lossy().to_string();
    let mut s = Raw::spawn(
        &root,
        &["--allow-write", "--state-dir", &state_arg],
        json!({"elicitation": {}}),
    );
    s.line(&asking_delete(&json!(9)));
    assert_eq!(s.next()["method"], "elicitation/create");
    s.line(br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}"#);
    s.ping(json!(9));
}

/// Round 24: a call, its cancellation and a new call under the same id, sent at once:
/// the client got the cancelled call's `CANCELLED` under the id and never the new one's
/// answer, though its change had landed (a client retrying it applied it twice). The id
/// names the newest request: its answer comes under it, alone, and the cancelled one's
/// never does.
#[test]
fn stdio_a_new_request_under_a_cancelled_id_gets_its_own_answer() {
    let (_t, root) = util::tempdir();
    util::write(&root, "a.txt", "a\n");
    util::write(&root, "counter.txt", "counter = 0\n");
    let (_s, state) = util::tempdir();
    let state_arg = state.to_string_lossy().to_string();
    // The cancelled call still waiting (its question unanswered) when the new one comes.
    let mut s = Raw::spawn(
        &root,
        &["--allow-write", "--state-dir", &state_arg],
        json!({"elicitation": {}}),
    );
    s.line(&asking_delete(&json!(9)));
    assert_eq!(s.next()["method"], "elicitation/create");
    s.line(br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}"#);
    s.line(br#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"file_exists","arguments":{"path":"a.txt"}}}"#);
    let v = s.next();
    assert_eq!(v["id"], 9, "{v}");
    assert_eq!(v["result"]["structuredContent"]["exists"], true, "{v}");
    s.ping(json!(10));
    assert!(s.quiet(500), "a second answer under 9 came");
    assert!(root.join("a.txt").exists());
    drop(s);
    // Each of eight rounds at once: an edit, its cancellation, a read under its id. Under
    // each id the read is answered, and once: an edit that finished before its
    // cancellation was read is answered too (the protocol allows it: the cancel came
    // late), but only before the read's answer, never after it and never twice.
    let mut s = Raw::spawn(
        &root,
        &["--allow-write", "--state-dir", &state_arg],
        json!({}),
    );
    let mut batch = Vec::new();
    for i in 0..8 {
        let id = 100 + i;
        batch.extend_from_slice(
            json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"edit",
                "arguments":{"path":"counter.txt","old_string":format!("counter = {i}"),
                "new_string":format!("counter = {}", i + 1)}}})
            .to_string()
            .as_bytes(),
        );
        batch.push(b'\n');
        batch.extend_from_slice(
            json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":id}})
                .to_string()
                .as_bytes(),
        );
        batch.push(b'\n');
        batch.extend_from_slice(
            json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"file_exists",
                "arguments":{"path":"counter.txt"}}})
            .to_string()
            .as_bytes(),
        );
        batch.push(b'\n');
    }
    s.line(&batch);
    let mut seen = std::collections::BTreeMap::new();
    let mut edits = std::collections::BTreeSet::new();
    while seen.len() < 8 {
        let v = s.next();
        let id = v["id"].as_u64().expect("an id");
        assert!((100..108).contains(&id), "{v}");
        assert!(
            !seen.contains_key(&id),
            "an answer under {id} after its read's: {v}"
        );
        if v["result"]["structuredContent"]["exists"] == true {
            seen.insert(id, v);
        } else {
            // The edit's own answer (its cancellation came after it was done).
            assert!(v["result"]["content"].is_array(), "{v}");
            assert!(edits.insert(id), "two edit answers under {id}: {v}");
        }
    }
    assert_eq!(seen.len(), 8);
    s.ping(json!(1));
    assert!(s.quiet(500), "an answer more came");
}

/// `ferret --root ROOT ARGS serve --http 127.0.0.1:0 --no-index`.
fn http(root: &std::path::Path, args: &[&str]) -> util::HttpServer {
    let mut cmd = bin();
    cmd.arg("--root")
        .arg(root)
        .args(args)
        .args(["serve", "--http", "127.0.0.1:0", "--no-index"]);
    util::HttpServer::spawn(cmd)
}

fn post(server: &util::HttpServer, body: &[u8]) -> (u16, String) {
    let mut req = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nConnection: close\r\n\
         Content-Length: {}\r\n\r\n",
        server.port,
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(body);
    server.exchange(&req)
}

fn body_of(text: &str) -> &str {
    text.split_once("\r\n\r\n").map_or("", |(_, b)| b)
}

fn peak_mib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0)
        / 1024
}

#[test]
fn http_batches_and_bodies_of_too_many_values_get_bounded_answers_unparsed() {
    let (_t, root) = util::tempdir();
    let server = http(&root, &["--set", "max_requests_per_round=0"]);
    check_batches(|body| {
        let (status, text) = post(&server, body);
        assert_eq!(status, 400, "{text}");
        let b = body_of(&text);
        (
            b.len(),
            serde_json::from_str(b.trim()).expect("a JSON-RPC answer"),
        )
    });
    for id in ["a", "b", "c"] {
        let (status, text) = post(&server, many_values(id, 2_000_000).as_bytes());
        assert_eq!(status, 400, "{text}");
        let v: Value = serde_json::from_str(body_of(&text).trim()).unwrap();
        assert_error(&v, json!(id), -32600);
        assert_eq!(v["error"]["data"]["code"], "REQUEST_TOO_LARGE", "{v}");
    }
    let peak = peak_mib(server.child.id());
    assert!(peak < 200, "peak {peak} MiB");
}

#[test]
fn http_unreadable_bodies_are_charged_to_the_budget_and_audited() {
    let (_t, root) = util::tempdir();
    let (_l, logs) = util::tempdir();
    let audit = logs.join("audit.jsonl");
    let audit_arg = audit.to_string_lossy().to_string();
    let server = http(
        &root,
        &[
            "--audit-log",
            &audit_arg,
            "--set",
            "max_requests_per_round=6",
        ],
    );
    let many = many_values("m", 300_000);
    let bodies: [&[u8]; 5] = [
        b"not json",
        br#"{"a":1}"#,
        br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
        br#"{"jsonrpc":"2.0","id":"\ud800","method":"ping"}"#,
        many.as_bytes(),
    ];
    let mut statuses = Vec::new();
    for round in 0..2 {
        for body in bodies {
            let (status, text) = post(&server, body);
            if round == 0 {
                assert_eq!(status, 400, "{text}");
            }
            statuses.push(status);
        }
    }
    assert_eq!(
        statuses.iter().filter(|s| **s == 429).count(),
        4,
        "six requests in the round, then 429: {statuses:?}"
    );
    std::thread::sleep(Duration::from_millis(300));
    let records: Vec<Value> = std::fs::read_to_string(&audit)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let of = |code: &str| records.iter().filter(|r| r["code"] == code).count();
    assert_eq!(of("HTTP_400"), 6, "{records:?}");
    assert_eq!(of("HTTP_429"), 4, "{records:?}");
}

fn post_in(port: u16, sid: Option<&str>, body: &str) -> String {
    let sid = sid.map_or(String::new(), |s| {
        format!("Mcp-Session-Id: {s}\r\nMCP-Protocol-Version: 2025-11-25\r\n")
    });
    format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{sid}Content-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nConnection: close\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// Reads from `s` until `needle` shows up (or the stream ends): what was read.
fn read_until(s: &mut std::net::TcpStream, needle: &str) -> String {
    use std::io::Read;
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    while !String::from_utf8_lossy(&out).contains(needle) {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&out).to_string()
}

#[test]
fn http_a_request_reusing_an_id_under_way_in_its_session_is_refused_at_once() {
    let (_t, root) = util::tempdir();
    util::write(&root, "a.txt", "a\n");
    let (_s, state) = util::tempdir();
    let state_arg = state.to_string_lossy().to_string();
    let mut cmd = bin();
    cmd.arg("--root").arg(&root).args([
        "--allow-write",
        "--state-dir",
        &state_arg,
        "--set",
        "max_requests_per_round=0",
        "serve",
        "--http",
        "127.0.0.1:0",
        "--no-index",
        "--question-timeout",
        "60",
    ]);
    let server = util::HttpServer::spawn(cmd);
    let port = server.port;
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},
        "clientInfo":{"name":"dup","version":"0"}}});
    let (status, text) = server.exchange(post_in(port, None, &init.to_string()).as_bytes());
    assert_eq!(status, 200, "{text}");
    let sid = text
        .split("\r\n\r\n")
        .next()
        .unwrap()
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("mcp-session-id")
                .then(|| v.trim().to_string())
        })
        .expect("a session");
    let sid = Some(sid.as_str());
    server.exchange(
        post_in(
            port,
            sid,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        )
        .as_bytes(),
    );
    for id in [json!(9), json!("nine")] {
        let delete = String::from_utf8(asking_delete(&id)).unwrap();
        let mut first = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        first
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        first
            .write_all(post_in(port, sid, &delete).as_bytes())
            .unwrap();
        let seen = read_until(&mut first, "elicitation/create");
        let question: Value = seen
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str(d.trim()).ok())
            .find(|v: &Value| v["method"] == "elicitation/create")
            .expect("a question");
        // The same id again: as the same call, a ping, another tool; each refused at once.
        let ping = json!({"jsonrpc":"2.0","id":id,"method":"ping"}).to_string();
        let read = json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{
            "name":"read_file","arguments":{"path":"a.txt"}}})
        .to_string();
        for body in [&delete, &ping, &read] {
            let (status, text) = server.exchange(post_in(port, sid, body).as_bytes());
            assert_eq!(status, 400, "{text}");
            let v: Value = serde_json::from_str(body_of(&text).trim()).unwrap();
            assert_error(&v, id.clone(), -32600);
            assert!(
                v["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("already in use"),
                "{v}"
            );
        }
        // Another id passes meanwhile.
        let other = json!({"jsonrpc":"2.0","id":"other","method":"ping"}).to_string();
        let (status, text) = server.exchange(post_in(port, sid, &other).as_bytes());
        assert_eq!(status, 200, "{text}");
        // The question answered: the first call is answered.
        let answer =
            json!({"jsonrpc":"2.0","id":question["id"],"result":{"action":"decline"}}).to_string();
        let (status, text) = server.exchange(post_in(port, sid, &answer).as_bytes());
        assert!(status == 200 || status == 202, "{text}");
        let rest = read_until(&mut first, "\"result\"");
        assert!(
            rest.contains("\"result\""),
            "the first call answered: {rest}"
        );
        drop(first);
        // Answered, the id is free again.
        let (status, text) = server.exchange(post_in(port, sid, &ping).as_bytes());
        assert_eq!(status, 200, "{text}");
        assert!(text.contains("\"result\""), "{text}");
    }
    assert!(root.join("a.txt").exists(), "a declined delete deleted");
}

#[test]
fn http_one_id_for_every_call_one_at_a_time_is_never_refused() {
    let (_t, root) = util::tempdir();
    util::write(&root, "a.txt", "a\n");
    let server = http(&root, &["--set", "max_requests_per_round=0"]);
    let port = server.port;
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{},
        "clientInfo":{"name":"same-id","version":"0"}}});
    let (status, text) = server.exchange(post_in(port, None, &init.to_string()).as_bytes());
    assert_eq!(status, 200, "{text}");
    let sid = text
        .split("\r\n\r\n")
        .next()
        .unwrap()
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("mcp-session-id")
                .then(|| v.trim().to_string())
        })
        .expect("a session");
    let note = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    server.exchange(post_in(port, Some(&sid), note).as_bytes());
    let read = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{
        "name":"read_file","arguments":{"path":"a.txt"}}})
    .to_string();
    for i in 0..60 {
        let (status, text) = server.exchange(post_in(port, Some(&sid), &read).as_bytes());
        assert_eq!(status, 200, "call {i}: {text}");
        assert!(!text.contains("already in use"), "call {i}: {text}");
    }
}

/// Calls `tool` with `args` on a new write-enabled server of `root` whose client answers
/// questions (elicitation): when the question comes, `meanwhile` runs (given the
/// question's text), then the person says yes. The call's answer.
fn asked_call(
    root: &std::path::Path,
    tool: &str,
    args: Value,
    meanwhile: impl FnOnce(&str),
) -> Value {
    let (_s, state) = util::tempdir();
    asked_call_in(root, &state, tool, args, meanwhile)
}

/// [`asked_call`] with the state directory `state`.
fn asked_call_in(
    root: &std::path::Path,
    state: &std::path::Path,
    tool: &str,
    args: Value,
    meanwhile: impl FnOnce(&str),
) -> Value {
    let state_arg = state.to_string_lossy().to_string();
    let mut s = Raw::spawn(
        root,
        &["--allow-write", "--state-dir", &state_arg],
        json!({"elicitation": {}}),
    );
    s.line(
        json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":tool,"arguments":args}})
            .to_string()
            .as_bytes(),
    );
    let question = s.next();
    assert_eq!(question["method"], "elicitation/create", "{question}");
    meanwhile(question["params"]["message"].as_str().unwrap_or_default());
    s.line(
        json!({"jsonrpc":"2.0","id":question["id"],"result":{"action":"accept","content":{"confirm":true}}})
            .to_string()
            .as_bytes(),
    );
    let v = s.next();
    assert_eq!(v["id"], 1, "{v}");
    v
}

/// Round 16, lesser: a move asked about moves the bytes the person was asked about. A
/// file rewritten while the question waits is not what lands at the confirm-listed name.
#[test]
fn a_file_rewritten_while_its_move_is_asked_about_is_not_moved() {
    for rewrite in [false, true] {
        let (_t, root) = util::tempdir();
        util::write(&root, "ci.yml", "on: push\n");
        std::fs::create_dir_all(root.join(".github/workflows")).unwrap();
        let v = asked_call(
            &root,
            "move",
            json!({"source":"ci.yml","destination":".github/workflows/ci.yml"}),
            |_| {
                if rewrite {
                    std::fs::write(root.join("ci.yml"), "on: push\njobs: {evil: 1}\n").unwrap();
                }
            },
        );
        let landed = std::fs::read_to_string(root.join(".github/workflows/ci.yml"));
        if rewrite {
            assert_eq!(v["result"]["isError"], true, "{v}");
            assert!(v.to_string().contains("CONFLICT"), "{v}");
            assert!(landed.is_err(), "the rewritten file was moved");
            assert!(root.join("ci.yml").exists());
        } else {
            assert_ne!(v["result"]["isError"], true, "{v}");
            assert_eq!(landed.unwrap(), "on: push\n");
        }
    }
}

/// The same for a folder: what it holds when asked is what moves; and every reason to
/// ask is in the one question (a yes to the first used to let the others through).
#[test]
fn a_folder_added_to_while_its_move_is_asked_about_is_not_moved() {
    for add in [false, true] {
        let (_t, root) = util::tempdir();
        util::write(&root, "wf/ci.yml", "on: push\n");
        util::write(&root, "wf/.env", "TOKEN=1\n");
        std::fs::create_dir_all(root.join(".github")).unwrap();
        let v = asked_call(
            &root,
            "move",
            json!({"source":"wf","destination":".github/workflows"}),
            |asked| {
                assert!(
                    asked.contains("confirm list") && asked.contains("secrets"),
                    "{asked}"
                );
                if add {
                    util::write(&root, "wf/evil.yml", "jobs: {evil: 1}\n");
                }
            },
        );
        if add {
            assert_eq!(v["result"]["isError"], true, "{v}");
            assert!(v.to_string().contains("CONFLICT"), "{v}");
            assert!(!root.join(".github/workflows").exists(), "moved: {v}");
            assert!(root.join("wf/evil.yml").exists());
        } else {
            assert_ne!(v["result"]["isError"], true, "{v}");
            assert!(root.join(".github/workflows/ci.yml").exists());
        }
    }
}

/// An edit asked about is made on the file the person was asked about: rewritten while
/// the question waited, the edit is refused, the rewrite kept.
#[test]
fn a_file_rewritten_while_its_edit_is_asked_about_is_not_edited() {
    let (_t, root) = util::tempdir();
    util::write(&root, ".github/workflows/ci.yml", "on: push\n");
    let v = asked_call(
        &root,
        "edit",
        json!({"path":".github/workflows/ci.yml","old_string":"push","new_string":"pull_request"}),
        |_| {
            util::write(
                &root,
                ".github/workflows/ci.yml",
                "on: push\njobs: {x: 1}\n",
            )
        },
    );
    assert_eq!(v["result"]["isError"], true, "{v}");
    assert!(v.to_string().contains("CONFLICT"), "{v}");
    assert_eq!(
        std::fs::read_to_string(root.join(".github/workflows/ci.yml")).unwrap(),
        "on: push\njobs: {x: 1}\n"
    );
}

/// Round 17: requests under way are bounded in count and bytes. A client that declares
/// roots and never answers `roots/list` keeps every call waiting (5 s each time it says
/// its roots changed); 40 calls of 8 MiB each were all held. Past 64 MiB under way, more
/// are answered at once (`RATE_LIMIT_EXCEEDED`), and the server's peak stays bounded.
#[test]
fn stdio_requests_under_way_are_bounded_in_bytes() {
    let (_t, root) = util::tempdir();
    let (_l, logs) = util::tempdir();
    let audit = logs.join("audit.jsonl");
    util::write(&root, "a.txt", "a\n");
    let mut s = Raw::spawn(
        &root,
        &["--audit-log", &audit.to_string_lossy()],
        json!({"roots": {}}),
    );
    let idle = s.peak_mib();
    let pad = "x".repeat(8 << 20);
    for id in 1..=40 {
        s.line(
            json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"read_file",
                "arguments":{"path":"a.txt"},"_meta":{"pad":pad}}})
            .to_string()
            .as_bytes(),
        );
    }
    let mut busy = 0;
    let mut read = 0;
    let mut asked_roots = false;
    while busy + read < 40 {
        let v = s.next();
        if v["method"] == "roots/list" {
            asked_roots = true;
            continue;
        }
        if v["error"]["data"]["code"] == "RATE_LIMIT_EXCEEDED" {
            busy += 1;
        } else if v.get("result").is_some() {
            read += 1;
        } else {
            panic!("{v}");
        }
    }
    assert!(asked_roots);
    assert!(busy > 0 && read > 0, "busy {busy}, read {read}");
    let peak = s.peak_mib();
    // 40 × 8 MiB held whole would be over 320 MiB of lines alone.
    assert!(peak < idle + 250, "peak {peak} MiB (idle {idle})");
    // Each refusal is audited (round 22: none was), 20 per 10 s at most.
    let log = std::fs::read_to_string(&audit).unwrap_or_default();
    let refused = log
        .lines()
        .filter(|l| l.contains("\"stdio\"") && l.contains("RATE_LIMIT_EXCEEDED"))
        .count();
    assert_eq!(refused, busy.min(20), "{log}");
}

/// Round 17: a permanent delete asked about deletes what the person was asked about: a
/// file moved into the folder while the question waited is not deleted with it.
#[test]
fn a_folder_added_to_while_its_permanent_delete_is_asked_about_is_kept() {
    let (_t, root) = util::tempdir();
    std::fs::create_dir_all(root.join("D")).unwrap();
    util::write(&root, "thesis.txt", "years of work\n");
    let v = asked_call(
        &root,
        "file_delete",
        json!({"path":"D","permanent":true}),
        |_| std::fs::rename(root.join("thesis.txt"), root.join("D/thesis.txt")).unwrap(),
    );
    assert_eq!(v["result"]["isError"], true, "{v}");
    assert!(v.to_string().contains("CONFLICT"), "{v}");
    assert!(root.join("D/thesis.txt").exists());
}

/// Round 18: where a change asked about lands is pinned too. A link on the way swapped
/// while the question waited (`gh` from `.github/ISSUE_TEMPLATE` to `.github/workflows`)
/// took an approved issue template into the workflows.
#[test]
fn a_write_asked_about_lands_where_the_question_said_or_nowhere() {
    let (_t, root) = util::tempdir();
    std::fs::create_dir_all(root.join(".github/ISSUE_TEMPLATE")).unwrap();
    std::fs::create_dir_all(root.join(".github/workflows")).unwrap();
    std::os::unix::fs::symlink(".github/ISSUE_TEMPLATE", root.join("gh")).unwrap();
    std::os::unix::fs::symlink(".github/workflows", root.join("ci2")).unwrap();
    let v = asked_call(
        &root,
        "write_file",
        json!({"path":"gh/config.yml","content":"on: push\n"}),
        |asked| {
            assert!(asked.contains("ISSUE_TEMPLATE"), "{asked}");
            std::fs::rename(root.join("gh"), root.join("ghold")).unwrap();
            std::fs::rename(root.join("ci2"), root.join("gh")).unwrap();
        },
    );
    assert_eq!(v["result"]["isError"], true, "{v}");
    assert!(v.to_string().contains("CONFLICT"), "{v}");
    assert!(!root.join(".github/workflows/config.yml").exists());
}

/// Round 18: a patch moving a file into a confirm-listed place is pinned to the source's
/// content, as `move` is: rewritten while the question waited, it is not moved.
#[test]
fn a_patch_moving_a_file_rewritten_while_asked_about_is_refused() {
    let (_t, root) = util::tempdir();
    util::write(&root, "a.yml", "on: push\nname: harmless\n");
    std::fs::create_dir_all(root.join(".github/workflows")).unwrap();
    let v = asked_call(
        &root,
        "apply_patch",
        json!({"patch":"*** Begin Patch\n*** Update File: a.yml\n*** Move to: .github/workflows/a.yml\n@@\n-name: harmless\n+name: renamed\n*** End Patch\n"}),
        |_| util::write(&root, "a.yml", "on: push\nname: harmless\njobs: {pwn: 1}\n"),
    );
    assert_eq!(v["result"]["isError"], true, "{v}");
    assert!(v.to_string().contains("CONFLICT"), "{v}");
    assert!(!root.join(".github/workflows/a.yml").exists());
}

/// Round 18: `undo` with no id undoes the change the question named: a change the same
/// session made while the person read it (the latest now) is not undone in its place.
#[test]
fn an_undo_asked_about_undoes_the_change_it_named() {
    let (_t, root) = util::tempdir();
    let (_s, state) = util::tempdir();
    util::write(&root, "src/config.yml", "a: 1\n");
    util::write(&root, "src/deploy.yml", "b: 1\n");
    std::fs::create_dir_all(root.join(".github/workflows")).unwrap();
    let state_arg = state.to_string_lossy().to_string();
    let mut s = Raw::spawn(
        &root,
        &["--allow-write", "--state-dir", &state_arg],
        json!({"elicitation": {}}),
    );
    let call = |s: &mut Raw, id: u64, tool: &str, args: Value| {
        s.line(
            json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":args}})
                .to_string()
                .as_bytes(),
        );
    };
    let yes = |s: &mut Raw, q: &Value| {
        s.line(
            json!({"jsonrpc":"2.0","id":q["id"],"result":{"action":"accept","content":{"confirm":true}}})
                .to_string()
                .as_bytes(),
        );
    };
    call(
        &mut s,
        1,
        "move",
        json!({"source":"src/config.yml","destination":".github/workflows/config.yml"}),
    );
    let q = s.next();
    yes(&mut s, &q);
    assert_ne!(s.next()["result"]["isError"], true);
    call(&mut s, 2, "undo", json!({}));
    let undo_q = s.next();
    let asked = undo_q["params"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(asked.contains("change 1"), "{asked}");
    // Meanwhile the same session makes change 2 (asked and approved on its own).
    call(
        &mut s,
        3,
        "move",
        json!({"source":"src/deploy.yml","destination":".github/workflows/deploy.yml"}),
    );
    let q = s.next();
    assert_eq!(q["method"], "elicitation/create", "{q}");
    yes(&mut s, &q);
    assert_eq!(s.next()["id"], 3);
    yes(&mut s, &undo_q);
    let v = s.next();
    assert_eq!(v["id"], 2, "{v}");
    assert_eq!(v["result"]["isError"], true, "{v}");
    assert!(v.to_string().contains("CONFLICT"), "{v}");
    assert!(
        root.join(".github/workflows/deploy.yml").exists(),
        "change 2 undone"
    );
}

/// Round 18: a flood of `notifications/roots/list_changed` while a call waits on an
/// unanswered `roots/list` is not held: each one waited for the roots' lock as a task
/// (1.3 GB for a 6 s flood). Now it only marks the roots stale.
#[test]
fn a_flood_of_roots_changed_while_roots_are_awaited_is_not_held() {
    let (_t, root) = util::tempdir();
    util::write(&root, "a.txt", "a\n");
    let mut s = Raw::spawn(&root, &[], json!({"roots": {"listChanged": true}}));
    let idle = s.peak_mib();
    s.line(
        json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"glob","arguments":{"pattern":"*.txt"}}})
            .to_string()
            .as_bytes(),
    );
    assert_eq!(s.next()["method"], "roots/list");
    let flood =
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/roots/list_changed\"}\n".repeat(20_000);
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_secs(3) {
        s.stdin
            .as_mut()
            .unwrap()
            .write_all(flood.as_bytes())
            .unwrap();
    }
    // The call is answered once the roots' wait is over, and the server's peak stays low.
    let v = s.next();
    assert_eq!(v["id"], 1, "{v}");
    let peak = s.peak_mib();
    assert!(peak < idle + 200, "peak {peak} MiB (idle {idle})");
}

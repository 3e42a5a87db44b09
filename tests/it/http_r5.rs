//! HTTP, round 5 (issue 25, safety round 3), on the real binary with raw sockets: the
//! session table shared per client (a hog's sessions give way to a newcomer, pings or
//! not), `initialize` charged and audited, and confirmation questions that cannot pin a
//! connection or leave a call unanswered.

use crate::util;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

const TOKEN: &str = "r5-token";

struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `ferret --root ROOT GLOBAL... serve --http BIND --token TOKEN --no-index EXTRA...`.
fn serve(root: &Path, global: &[&str], bind: &str, extra: &[&str]) -> Server {
    let mut cmd = util::bin();
    cmd.arg("--root").arg(root).args(global).args([
        "serve",
        "--http",
        bind,
        "--token",
        TOKEN,
        "--no-index",
    ]);
    cmd.args(extra).stdout(Stdio::null()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn ferret");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    let port = loop {
        line.clear();
        assert!(
            lines.read_line(&mut line).expect("read stderr") > 0,
            "server did not start"
        );
        if let Some(rest) = line.split("serving MCP at http://").nth(1) {
            let addr = rest.split("/mcp").next().unwrap();
            break addr.rsplit(':').next().unwrap().parse::<u16>().unwrap();
        }
    };
    std::thread::spawn(move || std::io::copy(&mut lines, &mut std::io::sink()));
    Server { child, port }
}

/// One client, by the address it reaches the server at (which is the address the server
/// sees it come from: loopback, or this machine's own non-loopback address).
#[derive(Clone)]
struct Client {
    ip: IpAddr,
    port: u16,
}

/// A non-loopback IPv4 address of this machine, if it has one (the source address of a
/// route; no packet is sent).
fn own_address() -> Option<IpAddr> {
    let s = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("192.0.2.1:9").ok()?;
    let ip = s.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

fn status_of(text: &str) -> u16 {
    text.strip_prefix("HTTP/1.1 ")
        .and_then(|t| t.get(..3))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

fn header<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let head = text.split("\r\n\r\n").next()?;
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

impl Client {
    fn host(&self) -> String {
        match self.ip {
            IpAddr::V4(ip) => format!("{ip}:{}", self.port),
            IpAddr::V6(ip) => format!("[{ip}]:{}", self.port),
        }
    }

    fn connect(&self) -> TcpStream {
        let s = TcpStream::connect((self.ip, self.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        s
    }

    fn request(&self, method: &str, session: Option<&str>, body: &str) -> String {
        let sid = session.map_or(String::new(), |s| {
            format!("Mcp-Session-Id: {s}\r\nMCP-Protocol-Version: 2025-11-25\r\n")
        });
        format!(
            "{method} /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {TOKEN}\r\n{sid}\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             Connection: close\r\nContent-Length: {}\r\n\r\n{body}",
            self.host(),
            body.len()
        )
    }

    /// Sends a request on a fresh connection and reads the whole answer.
    fn exchange(&self, request: &str) -> (u16, String) {
        let mut s = self.connect();
        s.write_all(request.as_bytes()).unwrap();
        let text = read_all(&mut s);
        (status_of(&text), text)
    }

    fn post(&self, session: Option<&str>, body: &str) -> (u16, String) {
        self.exchange(&self.request("POST", session, body))
    }

    fn delete(&self, session: &str) -> u16 {
        self.exchange(&self.request("DELETE", Some(session), "")).0
    }

    fn health(&self) -> u16 {
        self.exchange(&format!(
            "GET /health HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.host()
        ))
        .0
    }

    /// `initialize` (with elicitation when `elicit`): the answer and the session id.
    fn initialize(&self, name: &str, elicit: bool) -> (u16, String, Option<String>) {
        let caps = if elicit {
            serde_json::json!({"elicitation": {}})
        } else {
            serde_json::json!({})
        };
        let init = serde_json::json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
            "protocolVersion":"2025-11-25","capabilities":caps,
            "clientInfo":{"name":name,"version":"0"}}})
        .to_string();
        let (status, text) = self.post(None, &init);
        let sid = header(&text, "mcp-session-id").map(str::to_string);
        if let Some(sid) = &sid {
            let note = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
            self.post(Some(sid), note);
        }
        (status, text, sid)
    }

    fn session(&self, name: &str) -> String {
        let (status, text, sid) = self.initialize(name, false);
        assert_eq!(status, 200, "{text}");
        sid.expect("a session id")
    }

    fn ping(&self, sid: &str) -> u16 {
        self.post(Some(sid), r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#)
            .0
    }

    fn file_exists(&self, sid: &str) -> (u16, String) {
        self.post(
            Some(sid),
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"file_exists","arguments":{"path":"a.txt"}}}"#,
        )
    }
}

fn read_all(s: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&out).to_string()
}

/// Reads from `s` until `needle` has arrived (or the read times out); returns what came.
fn read_until(s: &mut TcpStream, needle: &str) -> String {
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

fn audit(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// A session record of the loopback client on a token server: the budget's principal
/// is the token, the session table's client the host.
fn from_loopback(r: &serde_json::Value) -> bool {
    r["principal"] == "http-token"
        && r["reason"]
            .as_str()
            .is_some_and(|t| t.ends_with("client http-loopback"))
}

fn ops<'a>(records: &'a [serde_json::Value], op: &str) -> Vec<&'a serde_json::Value> {
    records.iter().filter(|r| r["operation"] == op).collect()
}

/// A permanent delete with an id of its own: requests under way in one session may not
/// share an id (the second is refused at once, see frame_r8).
fn delete_permanent() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(9);
    let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"file_delete","arguments":{{"path":"a.txt","permanent":true}}}}}}"#
    )
}

/// Two clients the server can tell apart: loopback and this machine's own address.
/// None when the machine has no non-loopback address (the test is then skipped).
fn two_clients(server: &Server, other: IpAddr) -> (Client, Client) {
    (
        Client {
            ip: "127.0.0.1".parse().unwrap(),
            port: server.port,
        },
        Client {
            ip: other,
            port: server.port,
        },
    )
}

fn serve_two(root: &Path, logs: &Path, extra: &[&str]) -> Option<(Server, Client, Client)> {
    let Some(other) = own_address() else {
        eprintln!("skipped: this machine has no non-loopback address");
        return None;
    };
    let audit = logs.join("audit.jsonl").to_string_lossy().to_string();
    let host = other.to_string();
    let mut args = vec!["--allow-host", host.as_str()];
    args.extend_from_slice(extra);
    let server = serve(
        root,
        &["--audit-log", &audit, "--set", "max_requests_per_round=0"],
        "0.0.0.0:0",
        &args,
    );
    let (a, b) = two_clients(&server, other);
    Some((server, a, b))
}

/// One client opens every session of the table; another still gets one, and it is the
/// hog's oldest idle session that is closed for it (audited), not refused (503).
#[test]
fn a_client_holding_every_session_makes_room_for_another() {
    let (_t, root) = util::tempdir();
    util::write(&root, "a.txt", "a\n");
    let (_l, logs) = util::tempdir();
    let Some((_server, hog, other)) = serve_two(
        &root,
        &logs,
        &["--max-sessions", "8", "--max-sessions-per-client", "8"],
    ) else {
        return;
    };
    let hogs: Vec<String> = (0..8).map(|i| hog.session(&format!("hog-{i}"))).collect();
    // The hog's ninth replaces its own oldest: the hog never gets more than the table.
    let (status, text, _) = hog.initialize("hog-8", false);
    assert_eq!(status, 200, "{text}");
    assert_eq!(hog.ping(&hogs[0]), 404, "the hog's oldest session lived on");
    // Another client gets in, and can work.
    let sid = other.session("other");
    let (status, text) = other.file_exists(&sid);
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("\"exists\":true"), "{text}");
    assert_eq!(hog.ping(&hogs[1]), 404, "no hog session made room");
    // Three more newcomers: each takes a hog session, never the other client's.
    for i in 0..3 {
        other.session(&format!("other-{i}"));
    }
    assert_eq!(other.ping(&sid), 200, "the newcomer's session was closed");
    let records = audit(&logs.join("audit.jsonl"));
    let evicted = ops(&records, "session_evicted");
    assert_eq!(evicted.len(), 5, "{evicted:?}");
    assert!(
        evicted
            .iter()
            .all(|r| from_loopback(r) && r["code"] == "SESSION_EVICTED"),
        "{evicted:?}"
    );
    assert!(
        !records
            .iter()
            .any(|r| r["code"] == "HTTP_503" || r["code"] == "HTTP_429")
    );
}

/// A hog that keeps every one of its sessions busy with pings does not keep them: the
/// client holding the most gives way, even when another client's session is the least
/// recently used one on the server.
#[test]
fn pings_do_not_defend_a_hogs_sessions() {
    let (_t, root) = util::tempdir();
    util::write(&root, "a.txt", "a\n");
    let (_l, logs) = util::tempdir();
    let Some((_server, hog, other)) = serve_two(
        &root,
        &logs,
        &["--max-sessions", "8", "--max-sessions-per-client", "8"],
    ) else {
        return;
    };
    // The other client's session is the oldest and is never used again.
    let quiet = other.session("quiet");
    let hogs: Vec<String> = (0..7).map(|i| hog.session(&format!("hog-{i}"))).collect();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let pinger = {
        let (hog, hogs, stop) = (hog.clone(), hogs.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut rounds = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) || rounds == 0 {
                for s in &hogs {
                    hog.ping(s);
                }
                rounds += 1;
            }
            rounds
        })
    };
    // The table is full; the quiet client opens another, twice.
    std::thread::sleep(Duration::from_millis(300));
    for i in 0..2 {
        let (status, text, _) = other.initialize(&format!("second-{i}"), false);
        assert_eq!(status, 200, "{text}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(pinger.join().unwrap() >= 1);
    assert_eq!(
        other.ping(&quiet),
        200,
        "the quiet client's session was closed"
    );
    let alive = hogs.iter().filter(|s| hog.ping(s) == 200).count();
    assert_eq!(alive, 5, "two of the hog's sessions should have made room");
    let records = audit(&logs.join("audit.jsonl"));
    let evicted = ops(&records, "session_evicted");
    assert_eq!(evicted.len(), 2);
    assert!(evicted.iter().all(|r| from_loopback(r)));
}

/// One client, default share (an eighth of the table, at least 4): its sessions beyond
/// the share replace its own least recently used, whatever room the table has.
#[test]
fn one_client_holds_at_most_its_share_of_the_table() {
    let (_t, root) = util::tempdir();
    let (_l, logs) = util::tempdir();
    let audit_path = logs.join("audit.jsonl");
    let audit_arg = audit_path.to_string_lossy().to_string();
    let server = serve(
        &root,
        &[
            "--audit-log",
            &audit_arg,
            "--set",
            "max_requests_per_round=0",
        ],
        "127.0.0.1:0",
        &["--max-sessions", "40"],
    );
    let c = Client {
        ip: "127.0.0.1".parse().unwrap(),
        port: server.port,
    };
    let ids: Vec<String> = (0..12).map(|i| c.session(&format!("s{i}"))).collect();
    // A share of 40 is 5 (an eighth, at least 4): the last 5 live, the 7 before went.
    let alive: Vec<bool> = ids.iter().map(|s| c.ping(s) == 200).collect();
    assert_eq!(alive, [vec![false; 7], vec![true; 5]].concat());
    // Using an old session keeps it: the least recently *used* goes next.
    assert_eq!(c.ping(&ids[7]), 200);
    c.session("s12");
    assert_eq!(c.ping(&ids[7]), 200, "a session in use was closed");
    assert_eq!(c.ping(&ids[8]), 404, "the least recently used lived on");
    let records = audit(&audit_path);
    assert_eq!(ops(&records, "session_evicted").len(), 8);
}

/// `initialize` is a request: charged to the principal's budget (a flood of sessions
/// stops at it, 429 with Retry-After, audited), and every session's opening and closing
/// is an audit record, the client's name cut to 256 bytes.
#[test]
fn initialize_is_charged_and_sessions_are_audited() {
    let (_t, root) = util::tempdir();
    util::write(&root, "a.txt", "a\n");
    let (_l, logs) = util::tempdir();
    let audit_path = logs.join("audit.jsonl");
    let audit_arg = audit_path.to_string_lossy().to_string();
    let server = serve(
        &root,
        &[
            "--audit-log",
            &audit_arg,
            "--set",
            "max_requests_per_round=4",
        ],
        "127.0.0.1:0",
        &[],
    );
    let c = Client {
        ip: "127.0.0.1".parse().unwrap(),
        port: server.port,
    };
    let long = "N".repeat(50_000);
    let first = c.session(&long);
    let second = c.session("second");
    // Two opens and two calls spend the round's four requests.
    for sid in [&first, &second] {
        let (status, text) = c.file_exists(sid);
        assert_eq!(status, 200);
        assert!(!text.contains("RATE_LIMIT_EXCEEDED"), "{text}");
    }
    for name in ["third", "fourth"] {
        let (status, text, sid) = c.initialize(name, false);
        assert_eq!(status, 429, "{text}");
        assert!(sid.is_none());
        assert!(text.contains("RATE_LIMIT_EXCEEDED"), "{text}");
        assert!(header(&text, "retry-after").is_some(), "{text}");
    }
    assert_eq!(c.delete(&second), 204);
    drop(server);
    let records = audit(&audit_path);
    let opened = ops(&records, "session_open");
    assert_eq!(opened.len(), 2, "{records:?}");
    assert!(
        opened
            .iter()
            .all(|r| from_loopback(r) && r["result"] == "success")
    );
    assert_eq!(
        opened[0]["session_id"],
        ferret::mcp::session_label(&first).as_str()
    );
    assert!(opened[0]["agent_id"].as_str().unwrap().len() <= 256);
    assert!(opened[0]["agent_id"].as_str().unwrap().starts_with("NNN"));
    let closed = ops(&records, "session_close");
    assert_eq!(closed.len(), 1);
    assert_eq!(
        closed[0]["session_id"],
        ferret::mcp::session_label(&second).as_str()
    );
    assert!(records.iter().any(|r| r["code"] == "HTTP_429"));
    assert!(
        std::fs::read_to_string(&audit_path)
            .unwrap()
            .lines()
            .all(|l| l.len() < 8192)
    );
}

/// Sends a permanent delete on a session that accepts elicitation and waits until the
/// server has asked its question on the call's stream; returns the connection.
fn ask(c: &Client, sid: &str) -> (TcpStream, String) {
    let mut s = c.connect();
    s.write_all(c.request("POST", Some(sid), &delete_permanent()).as_bytes())
        .unwrap();
    let seen = read_until(&mut s, "elicitation/create");
    (s, seen)
}

/// A question nobody answers: the call is answered CONFIRMATION_REQUIRED when the
/// question's time is up (the flag; the request timeout, shorter, does not cut it), with
/// a hint saying how to allow it without asking; nothing is deleted.
#[test]
fn an_unanswered_question_times_out_into_an_answer() {
    let (_t, root) = util::tempdir();
    let (_s, state) = util::tempdir();
    {
        let (global, extra) = (["--set", "request_timeout=1s"], ["--question-timeout", "3"]);
        util::write(&root, "a.txt", "a\n");
        let state_arg = state.to_string_lossy().to_string();
        let mut g = vec![
            "--allow-write",
            "--state-dir",
            state_arg.as_str(),
            "--set",
            "max_requests_per_round=0",
        ];
        g.extend(global.iter().copied());
        let server = serve(&root, &g, "127.0.0.1:0", &extra);
        let c = Client {
            ip: "127.0.0.1".parse().unwrap(),
            port: server.port,
        };
        let (status, text, sid) = c.initialize("asker", true);
        assert_eq!(status, 200, "{text}");
        let sid = sid.unwrap();
        let started = Instant::now();
        let (mut s, seen) = ask(&c, &sid);
        assert!(seen.contains("elicitation/create"), "no question: {seen}");
        let rest = seen + &read_all(&mut s);
        let waited = started.elapsed();
        assert!(
            rest.contains("CONFIRMATION_REQUIRED") && rest.contains("unanswered"),
            "{rest}"
        );
        assert!(rest.contains("confirm") && rest.contains("Hint"), "{rest}");
        // The question's own 3 s, not the request timeout's 1 s.
        assert!(
            waited >= Duration::from_millis(2500) && waited < Duration::from_secs(30),
            "{waited:?}"
        );
        assert!(root.join("a.txt").exists(), "deleted without an answer");
        // The session goes on working.
        let (status, _) = c.file_exists(&sid);
        assert_eq!(status, 200);
    }
}

/// One client has at most two questions waiting: 40 calls that would each ask are
/// answered at once past the second, /health answers, and another call in a new session
/// is served, on a server of 40 connections.
#[test]
fn forty_unanswered_questions_pin_nothing() {
    let (_t, root) = util::tempdir();
    util::write(&root, "a.txt", "a\n");
    util::write(&root, "b.txt", "b\n");
    let (_s, state) = util::tempdir();
    let state_arg = state.to_string_lossy().to_string();
    let server = serve(
        &root,
        &[
            "--allow-write",
            "--state-dir",
            &state_arg,
            "--set",
            "max_requests_per_round=0",
        ],
        "127.0.0.1:0",
        &["--max-connections", "40", "--question-timeout", "120"],
    );
    let c = Client {
        ip: "127.0.0.1".parse().unwrap(),
        port: server.port,
    };
    let (_, _, sid) = c.initialize("asker", true);
    let sid = sid.unwrap();
    // One after another (a peer's connections still sending their requests are closed
    // past half the cap, the flood rule): each carries a question or, past the second,
    // the call's answer.
    let mut streams = Vec::new();
    let mut asked = 0;
    let mut refused = 0;
    for _ in 0..40 {
        let mut s = c.connect();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s.write_all(
            c.request("POST", Some(&sid), &delete_permanent())
                .as_bytes(),
        )
        .unwrap();
        let seen = read_until(&mut s, "elicitation/create");
        if seen.contains("elicitation/create") {
            asked += 1;
        } else {
            assert!(
                seen.contains("CONFIRMATION_REQUIRED") && seen.contains("not asked"),
                "{seen}"
            );
            refused += 1;
        }
        streams.push(s);
    }
    assert_eq!((asked, refused), (2, 38));
    assert_eq!(c.health(), 200);
    let other = c.session("other");
    let (status, text) = c.file_exists(&other);
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("\"exists\":true"), "{text}");
    assert!(root.join("a.txt").exists());
}

/// Connections whose calls wait only for an answer are closed to make room: a server of
/// four connections, all four waiting on questions, still answers /health and a new
/// client's call; the closing is audited.
#[test]
fn connections_waiting_for_answers_make_room() {
    let (_t, root) = util::tempdir();
    util::write(&root, "a.txt", "a\n");
    let (_s, state) = util::tempdir();
    let (_l, logs) = util::tempdir();
    let audit_path = logs.join("audit.jsonl");
    let audit_arg = audit_path.to_string_lossy().to_string();
    let state_arg = state.to_string_lossy().to_string();
    let server = serve(
        &root,
        &[
            "--allow-write",
            "--state-dir",
            &state_arg,
            "--audit-log",
            &audit_arg,
            "--set",
            "max_requests_per_round=0",
        ],
        "127.0.0.1:0",
        &[
            "--max-connections",
            "4",
            "--max-questions-per-client",
            "8",
            "--question-timeout",
            "120",
        ],
    );
    let c = Client {
        ip: "127.0.0.1".parse().unwrap(),
        port: server.port,
    };
    let (_, _, sid) = c.initialize("asker", true);
    let sid = sid.unwrap();
    let mut waiting = Vec::new();
    for _ in 0..4 {
        let (s, seen) = ask(&c, &sid);
        assert!(seen.contains("elicitation/create"), "{seen}");
        waiting.push(s);
    }
    // Every connection is waiting for an answer: none is idle.
    let started = Instant::now();
    assert_eq!(c.health(), 200);
    let (status, text) = c.file_exists(&sid);
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("\"exists\":true"), "{text}");
    let other = c.session("other");
    assert_eq!(c.file_exists(&other).0, 200);
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(root.join("a.txt").exists());
    drop(waiting);
    drop(server);
    let records = audit(&audit_path);
    assert!(
        records.iter().any(|r| r["code"] == "CONNECTION_EVICTED"),
        "{records:?}"
    );
}

/// A question answered yes still works, within the limits: the call goes through.
#[test]
fn an_answered_question_still_confirms() {
    let (_t, root) = util::tempdir();
    util::write(&root, "a.txt", "a\n");
    let (_s, state) = util::tempdir();
    let state_arg = state.to_string_lossy().to_string();
    let server = serve(
        &root,
        &[
            "--allow-write",
            "--state-dir",
            &state_arg,
            "--set",
            "max_requests_per_round=0",
        ],
        "127.0.0.1:0",
        &["--question-timeout", "60"],
    );
    let c = Client {
        ip: "127.0.0.1".parse().unwrap(),
        port: server.port,
    };
    let (_, _, sid) = c.initialize("asker", true);
    let sid = sid.unwrap();
    let (mut s, seen) = ask(&c, &sid);
    let question: serde_json::Value = seen
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str(d.trim()).ok())
        .find(|v: &serde_json::Value| v["method"] == "elicitation/create")
        .expect("a question");
    let answer = serde_json::json!({"jsonrpc":"2.0","id":question["id"],
        "result":{"action":"accept","content":{"confirm":true}}})
    .to_string();
    let (status, text) = c.post(Some(&sid), &answer);
    assert!(status == 202 || status == 200, "{text}");
    let rest = read_all(&mut s);
    assert!(!rest.contains("CONFIRMATION_REQUIRED"), "{rest}");
    assert!(
        !root.join("a.txt").exists(),
        "the confirmed delete was not done"
    );
}

/// A session whose only request waits for an answer to a question counts as idle: at its
/// client's share it can be closed for a new session, where a session answering a
/// request could not.
#[test]
fn a_session_waiting_only_for_an_answer_can_be_closed() {
    let (_t, root) = util::tempdir();
    util::write(&root, "a.txt", "a\n");
    let (_s, state) = util::tempdir();
    let state_arg = state.to_string_lossy().to_string();
    let server = serve(
        &root,
        &[
            "--allow-write",
            "--state-dir",
            &state_arg,
            "--set",
            "max_requests_per_round=0",
        ],
        "127.0.0.1:0",
        &[
            "--max-sessions-per-client",
            "2",
            "--question-timeout",
            "120",
        ],
    );
    let c = Client {
        ip: "127.0.0.1".parse().unwrap(),
        port: server.port,
    };
    let (_, _, asker) = c.initialize("asker", true);
    let asker = asker.unwrap();
    let quiet = c.session("quiet");
    let (mut waiting, seen) = ask(&c, &asker);
    assert!(seen.contains("elicitation/create"), "{seen}");
    // The quiet session is the least recently used: it goes first, then the asker's.
    let (status, text, _) = c.initialize("second", false);
    assert_eq!(status, 200, "{text}");
    assert_eq!(c.ping(&quiet), 404);
    let (status, text, _) = c.initialize("third", false);
    assert_eq!(status, 200, "{text}");
    assert_eq!(c.ping(&asker), 404, "the waiting session was kept");
    // Its call's stream ends with the session; nothing was deleted.
    let rest = read_all(&mut waiting);
    assert!(!rest.contains("\"isError\":false"), "{rest}");
    assert!(root.join("a.txt").exists());
}

/// Round 27: an HTTP session's id is its credential, so nothing ferret shows or records
/// names it: a refusal that told session B the id of the session whose change it tried
/// to undo let B send that id and undo the change unasked (or end the session). Every
/// place a session is named (the question, `history`, the audit log) uses its label, a
/// digest of the id; the label is no credential; the owner's own undo still finds its
/// change by it.
#[test]
fn a_session_is_never_named_to_another_by_its_id() {
    let (_t, root) = util::tempdir();
    let (_o, outside) = util::tempdir();
    util::write(&root, "a.txt", "original\n");
    let state = outside.join("state");
    let audit_path = outside.join("audit.jsonl");
    let server = serve(
        &root,
        &[
            "--allow-write",
            "--state-dir",
            state.to_str().unwrap(),
            "--audit-log",
            audit_path.to_str().unwrap(),
        ],
        "127.0.0.1:0",
        &[],
    );
    let c = Client {
        ip: "127.0.0.1".parse().unwrap(),
        port: server.port,
    };
    let call = |sid: &str, id: u64, tool: &str, args: serde_json::Value| {
        let body = serde_json::json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
            "params":{"name":tool,"arguments":args}})
        .to_string();
        c.post(Some(sid), &body)
    };
    let a = c.session("agent-A");
    let b = c.session("agent-B");
    let (status, text) = call(
        &a,
        3,
        "write_file",
        serde_json::json!({"path":"a.txt","content":"A's work\n","overwrite":true}),
    );
    assert_eq!(status, 200, "{text}");
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).unwrap(),
        "A's work\n",
        "{text}"
    );
    let label = ferret::mcp::session_label(&a);
    // B asks to undo A's change by its id: refused (no elicitation), naming A's label.
    let (_, text) = call(&b, 4, "undo", serde_json::json!({"id": 1}));
    assert!(text.contains("CONFIRMATION_REQUIRED"), "{text}");
    assert!(
        text.contains(&label),
        "the question names the session: {text}"
    );
    assert!(!text.contains(&a), "A's id reached B: {text}");
    // Neither A's label nor any other string B saw opens A's session.
    for guess in [label.as_str(), label.trim_start_matches("http-")] {
        let (status, text) = call(guess, 5, "undo", serde_json::json!({}));
        assert_ne!(status, 200, "{text}");
        c.delete(guess);
        assert_eq!(
            c.ping(&a),
            200,
            "A's session was ended by a DELETE of {guess}"
        );
    }
    // B's own undo has nothing of its own to undo.
    let (_, text) = call(&b, 6, "undo", serde_json::json!({}));
    assert!(text.contains("NOT_FOUND"), "{text}");
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).unwrap(),
        "A's work\n"
    );
    // A still owns its change under the label.
    let (_, text) = call(&a, 7, "undo", serde_json::json!({}));
    assert!(text.contains("Undid change 1"), "{text}");
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).unwrap(),
        "original\n"
    );
    drop(server);
    let out = util::bin()
        .arg("--root")
        .arg(&root)
        .arg("--state-dir")
        .arg(&state)
        .arg("history")
        .output()
        .unwrap();
    let history = String::from_utf8_lossy(&out.stdout);
    assert!(history.contains(&label), "{history}");
    assert!(!history.contains(&a) && !history.contains(&b), "{history}");
    let log = std::fs::read_to_string(&audit_path).unwrap();
    assert!(log.contains(&label), "{log}");
    assert!(!log.contains(&a) && !log.contains(&b), "{log}");
}

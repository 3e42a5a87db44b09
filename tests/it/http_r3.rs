//! HTTP, round 3, on the real binary with raw sockets: budgets keyed on what the server
//! established (never the client's name), ambiguous `Host`/`Origin` refused, slow
//! connections never keeping a normal request out.

use crate::util;
use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

pub(crate) const TOKEN: &str = "r3-token";

use util::HttpServer as Server;
use util::http_exchange as exchange;

pub(crate) fn serve(root: &Path, global: &[&str], extra: &[&str]) -> Server {
    let mut cmd = util::bin();
    cmd.arg("--root").arg(root).args(global).args([
        "serve",
        "--http",
        "127.0.0.1:0",
        "--token",
        TOKEN,
        "--no-index",
    ]);
    cmd.args(extra);
    Server::spawn(cmd)
}

pub(crate) fn post(
    port: u16,
    extra_headers: &str,
    session: Option<&str>,
    body: &str,
) -> (u16, String) {
    let sid = session.map_or(String::new(), |s| {
        format!("Mcp-Session-Id: {s}\r\nMCP-Protocol-Version: 2025-11-25\r\n")
    });
    let req = format!(
        "POST /mcp HTTP/1.1\r\n{extra_headers}Authorization: Bearer {TOKEN}\r\n{sid}\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Connection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    exchange(port, req.as_bytes())
}

pub(crate) fn host(port: u16) -> String {
    format!("Host: 127.0.0.1:{port}\r\n")
}

fn initialize(name: &str) -> String {
    serde_json::json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{},
        "clientInfo":{"name":name,"version":"0"}}})
    .to_string()
}

/// A legacy session under `name`; returns its id.
pub(crate) fn session(port: u16, name: &str) -> String {
    let (status, text) = post(port, &host(port), None, &initialize(name));
    assert_eq!(status, 200, "{text}");
    let sid = text
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .starts_with("mcp-session-id:")
                .then(|| l.split(':').nth(1).unwrap().trim().to_string())
        })
        .expect("a session id");
    let note = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    post(port, &host(port), Some(&sid), note);
    sid
}

#[test]
fn distinct_client_names_and_sessions_share_one_budget() {
    let (_t, root) = util::tempdir();
    util::write(&root, "a.txt", "hello\n");
    let (_logs, logs) = util::tempdir();
    let audit = logs.join("audit.jsonl");
    let audit_arg = audit.to_string_lossy().to_string();
    let server = serve(
        &root,
        &[
            "--set",
            // Seven sessions opened (each a request, issue 25), then four calls.
            "max_requests_per_round=11",
            "--audit-log",
            &audit_arg,
        ],
        &[],
    );
    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"file_exists","arguments":{"path":"a.txt"}}}"#;
    let mut limited = Vec::new();
    // A fresh session and a fresh name each time, one of them 60 KB long.
    let sids: Vec<String> = (0..7)
        .map(|i| {
            let name = if i == 3 {
                "X".repeat(60_000)
            } else {
                format!("agent-{i}")
            };
            session(server.port, &name)
        })
        .collect();
    for sid in &sids {
        let (status, text) = post(server.port, &host(server.port), Some(sid), call);
        assert_eq!(status, 200, "{text}");
        limited.push(text.contains("RATE_LIMIT_EXCEEDED"));
    }
    assert_eq!(limited, [false, false, false, false, true, true, true]);
    let records: Vec<serde_json::Value> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|r: &serde_json::Value| r["operation"] == "file_exists")
        .collect();
    assert_eq!(records.len(), 7);
    for r in &records {
        assert_eq!(r["principal"], "http-token");
        assert!(
            r["agent_id"].as_str().unwrap().len() <= 256,
            "{}",
            r["agent_id"]
        );
    }
}

#[test]
fn duplicate_or_listed_host_and_origin_are_refused() {
    let (_t, root) = util::tempdir();
    let server = serve(&root, &[], &[]);
    let p = server.port;
    let good = format!("127.0.0.1:{p}");
    let init = initialize("dup");
    for headers in [
        format!("Host: {good}\r\nhost: evil.example\r\n"),
        format!("HOST: evil.example\r\nHost: {good}\r\n"),
        format!("Host: {good}\r\nHost: {good}\r\n"),
        format!("Host: {good}, evil.example\r\n"),
        format!("Host: {good}\r\nOrigin: http://localhost:1\r\nOrIgIn: http://evil.example\r\n"),
        format!("Host: {good}\r\nOrigin: http://localhost:1,http://evil.example\r\n"),
    ] {
        let (status, text) = post(p, &headers, None, &init);
        assert_eq!(status, 400, "{headers:?}: {text}");
        assert!(text.contains("Host") || text.contains("Origin"), "{text}");
    }
    let (status, text) = post(
        p,
        &format!("Host: {good}\r\nOrigin: http://localhost:1\r\n"),
        None,
        &init,
    );
    assert_eq!(status, 200, "{text}");
}

#[test]
fn slow_connections_do_not_block_a_normal_request() {
    let (_t, root) = util::tempdir();
    let server = serve(&root, &[], &["--read-timeout", "60"]);
    let p = server.port;
    let mut slow = Vec::new();
    for i in 0..600 {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", p)) else {
            // Out of descriptors on the test's side: enough are open.
            break;
        };
        let _ = match i % 3 {
            0 => Ok(()),
            1 => s.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "),
            _ => s.write_all(
                format!(
                    "POST /mcp HTTP/1.1\r\n{}Authorization: Bearer {TOKEN}\r\n\
                     Content-Type: application/json\r\nContent-Length: 900\r\n\r\n{{",
                    host(p)
                )
                .as_bytes(),
            ),
        };
        slow.push(s);
    }
    assert!(slow.len() >= 300, "only {} connections opened", slow.len());
    for _ in 0..3 {
        let started = Instant::now();
        let (status, text) = post(p, &host(p), None, &initialize("normal"));
        assert_eq!(status, 200, "{text}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }
}

/// A second Authorization header, in any spelling, before or after the right one, valid or
/// not, is refused as unauthorized: a proxy and this server could each read a different one.
#[test]
fn duplicate_authorization_headers_are_refused() {
    let (_t, root) = util::tempdir();
    let server = serve(&root, &[], &[]);
    let p = server.port;
    let init = initialize("dupauth");
    // `post` itself sends `Authorization: Bearer TOKEN` after these.
    for extra in [
        format!("{}Authorization: Bearer {TOKEN}\r\n", host(p)),
        format!("{}authorization: Bearer wrong\r\n", host(p)),
        format!("{}AUTHORIZATION: Basic Zm9vOmJhcg==\r\n", host(p)),
        format!("{}Authorization: \r\n", host(p)),
    ] {
        let (status, text) = post(p, &extra, None, &init);
        assert!(status == 401 || status == 400, "{extra:?}: {status} {text}");
    }
    let (status, text) = post(p, &host(p), None, &init);
    assert_eq!(status, 200, "one Authorization still works: {text}");
}

/// A Host that is not a well-formed authority for this server is refused with 403: userinfo
/// before the host, another port on a loopback name, a port with leading zeros, signs or
/// letters, an empty port. The bare name and the exact `name:port` still pass.
#[test]
fn malformed_hosts_are_refused_and_a_tunnels_port_is_not() {
    let (_t, root) = util::tempdir();
    let server = serve(&root, &[], &[]);
    let p = server.port;
    let init = initialize("hosts");
    let other = if p == 1 { 2 } else { 1 };
    for bad in [
        format!("evil@127.0.0.1:{p}"),
        format!("user:pw@localhost:{p}"),
        format!("127.0.0.1:0{p}"),
        format!("127.0.0.1:00{p}"),
        format!("127.0.0.1:+{p}"),
        format!("127.0.0.1:{p}x"),
        "127.0.0.1:".to_string(),
        format!("127.0.0.1:{p}/x"),
    ] {
        let (status, text) = post(p, &format!("Host: {bad}\r\n"), None, &init);
        assert!(
            status == 403 || status == 400,
            "Host {bad:?}: {status} {text}"
        );
    }
    // Another port on a loopback name is what an SSH tunnel or a container's port map
    // sends (`ssh -L 9000:127.0.0.1:8765`): DNS rebinding is told by the name, so these
    // are served.
    for good in [
        format!("127.0.0.1:{p}"),
        format!("localhost:{p}"),
        "localhost".into(),
        format!("127.0.0.1:{other}"),
        format!("[::1]:{other}"),
    ] {
        let (status, text) = post(p, &format!("Host: {good}\r\n"), None, &init);
        assert_eq!(status, 200, "Host {good:?}: {text}");
    }
}

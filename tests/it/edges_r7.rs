//! Round 7's edges (issue #25): every stdio request line is answered; moving a directory
//! never makes a link inside it lead outside; a killed `rm` leaves no `.trashinfo`
//! litter; the search modes agree about what was searched.

use crate::util::*;
use ferret::ErrorCode;
use serde_json::{Value, json};
use std::io::{BufRead, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;

/// `ferret serve` over a pipe, written to in raw bytes.
struct Raw {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
}

impl Raw {
    fn spawn(root: &std::path::Path) -> Raw {
        let mut child = bin()
            .arg("--root")
            .arg(root)
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
            for line in out.split(b'\n') {
                let Ok(line) = line else { break };
                // Every line out must be one whole JSON value.
                let v: Value = serde_json::from_slice(&line).unwrap_or_else(|e| {
                    json!({"UNPARSABLE": e.to_string(),
                           "head": String::from_utf8_lossy(&line[..line.len().min(200)])})
                });
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let mut r = Raw {
            child,
            stdin,
            lines,
        };
        r.line(br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#);
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

    fn next(&self) -> Value {
        let v = self
            .lines
            .recv_timeout(Duration::from_secs(60))
            .expect("an answer within a minute");
        assert!(v.get("UNPARSABLE").is_none(), "a torn line on stdout: {v}");
        v
    }

    /// Nothing more arrives within `ms`.
    fn quiet(&self, ms: u64) -> bool {
        self.lines.recv_timeout(Duration::from_millis(ms)).is_err()
    }

    fn ping(&mut self, id: u64) {
        self.line(format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#).as_bytes());
        let v = self.next();
        assert_eq!(v["id"], id, "the ping after is answered next: {v}");
        assert!(v.get("result").is_some(), "{v}");
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

fn call_line(id: &str, path: &[u8]) -> Vec<u8> {
    let mut l = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"read_file","arguments":{{"path":""#
    )
    .into_bytes();
    l.extend_from_slice(path);
    l.extend_from_slice(br#""}}}"#);
    l
}

fn assert_error(v: &Value, id: Value, code: i64) {
    assert_eq!(v["id"], id, "{v}");
    assert_eq!(v["error"]["code"], code, "{v}");
    let data = &v["error"]["data"];
    assert!(
        data["hint"].as_str().is_some_and(|h| h.len() > 20),
        "a hint says what to do: {v}"
    );
    assert!(data["code"].is_string(), "{v}");
}

#[test]
fn every_unparsable_stdio_line_is_answered_with_its_id_and_the_next_request_too() {
    let (_t, root) = tempdir();
    write(&root, "a.txt", "hello\n");
    let mut s = Raw::spawn(&root);
    // Lone surrogates: leading, trailing, at the end, in a key, in the method, reversed pair.
    let shapes: [&[u8]; 7] = [
        br"\ud800",
        br"\udc00",
        br"a.txt\ud83d",
        br"\ud800\ud800",
        br"\udc00\ud800",
        br"\uD800x",
        br"\ud800\u0041",
    ];
    let mut n = 10;
    for shape in shapes {
        s.line(&call_line(&n.to_string(), shape));
        let v = s.next();
        assert_error(&v, json!(n), -32700);
        assert!(
            v["error"]["data"]["hint"]
                .as_str()
                .unwrap()
                .contains("surrogate"),
            "{v}"
        );
        s.ping(n + 1);
        n += 2;
    }
    // A string id survives, and a surrogate in a key, in the method and in params' head.
    for line in [
        &br#"{"jsonrpc":"2.0","id":"s-1","method":"tools/call","params":{"name":"read_file","arguments":{"\udfff":1}}}"#[..],
        br#"{"jsonrpc":"2.0","id":"s-1","method":"tools/\ud800call"}"#,
        br#"{"params":{"x":"\ud800"},"jsonrpc":"2.0","id":"s-1","method":"ping"}"#,
    ] {
        s.line(line);
        assert_error(&s.next(), json!("s-1"), -32700);
        s.ping(100);
    }
    // Invalid UTF-8 in a string, in a key, and as the first byte.
    s.line(&call_line("200", b"\xff\xfe.txt"));
    assert_error(&s.next(), json!(200), -32700);
    s.ping(201);
    s.line(b"{\"jsonrpc\":\"2.0\",\"id\":202,\"method\":\"ping\",\"\xc3\":1}");
    assert_error(&s.next(), json!(202), -32700);
    s.ping(203);
    s.line(b"\xff{\"jsonrpc\":\"2.0\",\"id\":204,\"method\":\"ping\"}");
    assert_error(&s.next(), Value::Null, -32700);
    s.ping(205);
    // Truncated JSON: the id before the cut is kept; a cut inside the id is null.
    s.line(br#"{"jsonrpc":"2.0","id":300,"method":"tools/call","params":{"name":"read_f"#);
    assert_error(&s.next(), json!(300), -32700);
    s.ping(301);
    s.line(br#"{"jsonrpc":"2.0","id":30"#);
    assert_error(&s.next(), Value::Null, -32700);
    s.ping(302);
    s.line(br#"{"jsonrpc":"2.0","method":"ping","#);
    assert_error(&s.next(), Value::Null, -32700);
    s.ping(303);
    // Not JSON at all.
    s.line(b"hello");
    assert_error(&s.next(), Value::Null, -32700);
    s.ping(304);
    // A broken id (a float, an object, null, a string with a lone surrogate) is null.
    for id in ["1.5", r#"{"a":1}"#, "null", r#""\ud800""#] {
        s.line(format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#).as_bytes());
        let v = s.next();
        assert_eq!(v["id"], Value::Null, "{v}");
        assert!(
            v["error"]["code"] == -32600 || v["error"]["code"] == -32700,
            "{v}"
        );
        s.ping(305);
    }
    // The server still works.
    let v = {
        s.line(&call_line("400", b"a.txt"));
        s.next()
    };
    assert_eq!(v["id"], 400);
    assert!(v["result"].to_string().contains("hello"), "{v}");
}

#[test]
fn json_that_is_no_json_rpc_request_is_answered_invalid_request_with_its_id() {
    let (_t, root) = tempdir();
    let mut s = Raw::spawn(&root);
    for (i, line) in [
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"x"}"#,
        r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
        r#"{"id":1,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":7}"#,
    ]
    .iter()
    .enumerate()
    {
        let line = line.replace("\"id\":1", &format!("\"id\":{}", 10 + i));
        s.line(line.as_bytes());
        let v = s.next();
        assert_eq!(v["id"], 10 + i, "{line}: {v}");
        assert!(
            v.get("error").is_some() || v.get("result").is_some(),
            "{line}: {v}"
        );
        s.ping(50 + i as u64);
    }
    for line in ["42", r#""text""#, "null", "{}"] {
        s.line(line.as_bytes());
        assert_error(&s.next(), Value::Null, -32600);
        s.ping(60);
    }
}

#[test]
fn notifications_and_responses_that_cannot_be_read_get_no_answer() {
    let (_t, root) = tempdir();
    let mut s = Raw::spawn(&root);
    for line in [
        &br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"reason":"\ud800"}}"#[..],
        br#"{"jsonrpc":"2.0","method":"notifications/x","params":"\xff"}"#,
        br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":7}"#,
        br#"{"jsonrpc":"2.0","id":99,"result":{"x":"\ud800"}}"#,
        br#"{"jsonrpc":"2.0","id":98,"error":{"code":1,"message":"\udc00"}}"#,
        b"",
        b"   ",
    ] {
        s.line(line);
        s.ping(7);
    }
    assert!(s.quiet(300), "nothing more was said");
}

#[test]
fn batch_arrays_are_answered_per_request_never_dropped() {
    let (_t, root) = tempdir();
    let mut s = Raw::spawn(&root);
    s.line(b"[]");
    assert_error(&s.next(), Value::Null, -32600);
    s.ping(1);
    s.line(
        br#"[{"jsonrpc":"2.0","id":5,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/x"},{"jsonrpc":"2.0","id":"b","method":"tools/list"},3]"#,
    );
    let v = s.next();
    let answers = v.as_array().expect("an array answers a batch");
    let ids: Vec<&Value> = answers.iter().map(|a| &a["id"]).collect();
    assert_eq!(ids, [&json!(5), &json!("b"), &Value::Null], "{v}");
    for a in answers {
        assert_eq!(a["error"]["code"], -32600, "{v}");
    }
    s.ping(2);
    // A batch of notifications only gets nothing; a broken batch gets a parse error.
    s.line(br#"[{"jsonrpc":"2.0","method":"notifications/x"}]"#);
    s.ping(3);
    s.line(br#"[{"jsonrpc":"2.0","id":6,"method":"ping"},"\ud800"]"#);
    assert_error(&s.next(), Value::Null, -32700);
    s.ping(4);
}

#[test]
fn a_line_over_16_mib_is_answered_too_large_and_never_held_whole() {
    let (_t, root) = tempdir();
    let mut s = Raw::spawn(&root);
    let pid = s.child.id();
    let mut big = br#"{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"name":"write_file","arguments":{"path":"x","content":""#.to_vec();
    big.resize(big.len() + (17 << 20), b'a');
    big.extend_from_slice(br#""}}}"#);
    s.line(&big);
    let v = s.next();
    assert_error(&v, json!("big"), -32600);
    assert_eq!(v["error"]["data"]["limit_bytes"], 16 << 20, "{v}");
    s.ping(1);
    assert!(!root.join("x").exists());
    // Without an id in its head, and with no newline for long (sent in pieces).
    let mut big = br#"{"jsonrpc":"2.0","params":{"content":""#.to_vec();
    big.resize(big.len() + (20 << 20), b'\\');
    {
        let stdin = s.stdin.as_mut().unwrap();
        for chunk in big.chunks(1 << 20) {
            stdin.write_all(chunk).unwrap();
        }
    }
    s.line(br#""},"id":3,"method":"ping"}"#);
    assert_error(&s.next(), Value::Null, -32600);
    s.ping(2);
    // A notification that large is unanswered (its head says so only if it is whole:
    // here the head is cut, so it is answered null, which a client can ignore).
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let peak_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    eprintln!("peak {peak_kb} kB");
    assert!(
        peak_kb < 64 * 1024,
        "17-20 MiB lines are discarded as they come, not buffered: peak {peak_kb} kB"
    );
}

#[test]
fn eof_and_a_closed_stdout_still_end_the_stdio_server() {
    let (_t, root) = tempdir();
    // EOF right after a bad line: the answer is still written, then the server ends.
    let mut child = bin()
        .arg("--root")
        .arg(&root)
        .arg("serve")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#)
        .unwrap();
    stdin
        .write_all(b"\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\\ud800\"}\n")
        .unwrap();
    drop(stdin);
    let out = wait_output(child, 20);
    let lines: Vec<Value> = out
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[1]["id"], 1);
    // stdout closed by the client: the server ends once it has something to say.
    let mut child = bin()
        .arg("--root")
        .arg(&root)
        .arg("serve")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let mut stdin = child.stdin.take().unwrap();
    let _ = stdin.write_all(br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#);
    let _ = stdin.write_all(b"\nnot json\n");
    let _ = stdin.flush();
    let start = std::time::Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the server outlived its client's stdout"
        );
        let _ = stdin.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\"}\n");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The child's stdout once it exits (killed after `secs`: a hang fails the test).
fn wait_output(mut child: Child, secs: u64) -> Vec<u8> {
    use std::io::Read;
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stdout.read_to_end(&mut buf);
        buf
    });
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(secs) {
            let _ = child.kill();
            panic!("the server did not end at EOF");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    reader.join().unwrap()
}

#[test]
fn answers_to_bad_lines_never_tear_the_server_s_own_lines() {
    let (_t, root) = tempdir();
    let body = "x".repeat(200_000);
    for i in 0..20 {
        write(&root, &format!("f{i}.txt"), &body);
    }
    let mut s = Raw::spawn(&root);
    // Large answers in flight while bad lines are answered: every line out parses.
    for i in 0..20 {
        s.line(&call_line(
            &format!("{}", 1000 + i),
            format!("f{i}.txt").as_bytes(),
        ));
        s.line(
            format!(
                r#"{{"jsonrpc":"2.0","id":{},"method":"x\ud800"}}"#,
                2000 + i
            )
            .as_bytes(),
        );
    }
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..40 {
        let v = s.next();
        seen.insert(v["id"].as_u64().unwrap());
    }
    assert_eq!(seen.len(), 40);
}

// ---- 2. Moving a directory never makes a link inside it lead outside. ----

fn link(root: &std::path::Path, rel: &str, target: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(target, p).unwrap();
}

#[test]
fn moving_a_directory_shallower_refuses_when_a_link_inside_would_lead_outside() {
    // (where the tree is, the link inside it, its words, where the tree goes)
    let cases = [
        ("a/d", "sub/l", "../../../x", "d"),
        ("a/b/c/d", "sub/deeper/l", "../../../../../../x.txt", "d"),
        ("a/b/d", "l", "../../../etc/passwd", "d"),
        ("a/b/d", "s/t/u/l", "../../../../../x/../y", "c/d"),
        ("a/b/c/d", "l", "./../../../x", "e/d"),
        // Into another tree at a shallower depth, a chain of `..` only.
        ("p/q/r/d", "m/n/l", "../../../../../..", "z/d"),
    ];
    for (tree, inside, words, to) in cases {
        let w = Ws::new();
        write(&w.root, &format!("{tree}/keep.txt"), "k");
        link(&w.root, &format!("{tree}/{inside}"), words);
        let f = w.ferret();
        let before = snapshot(&w.root);
        let Err(e) = call(&f, "move", json!({"source": tree, "destination": to})) else {
            panic!("{tree} -> {to} with {inside} -> {words} was moved");
        };
        assert_eq!(e.code, ErrorCode::PathEscape, "{tree} -> {to}: {e:?}");
        let name = inside.rsplit('/').next().unwrap();
        assert!(
            e.message.contains(name) && e.message.contains(words),
            "the message names the link: {}",
            e.message
        );
        assert!(e.hint.as_deref().is_some_and(|h| !h.is_empty()));
        assert_eq!(snapshot(&w.root), before, "nothing moved");
        // A dry run says the same.
        let e = call(
            &f,
            "move",
            json!({"source": tree, "destination": to, "dry_run": true}),
        )
        .unwrap_err();
        assert_eq!(e.code, ErrorCode::PathEscape);
    }
}

#[test]
fn moves_that_keep_every_link_inside_or_as_it_was_go_ahead() {
    let w = Ws::new();
    let f = w.ferret();
    // Deeper: a link's `..`s climb less than they may.
    link(&w.root, "d/sub/l", "../../x");
    link(&w.root, "d/abs", "/etc/passwd");
    link(&w.root, "d/plain", "sub/l");
    write(&w.root, "x", "x");
    ok(&f, "move", json!({"source": "d", "destination": "a/b/d"}));
    assert!(std::fs::symlink_metadata(w.root.join("a/b/d/sub/l")).is_ok());
    // Sideways at the same depth, and a rename in place.
    ok(
        &f,
        "move",
        json!({"source": "a/b/d", "destination": "a/c/d"}),
    );
    ok(
        &f,
        "move",
        json!({"source": "a/c/d", "destination": "a/c/e"}),
    );
    // A link already outside where it is (a hostile repository's) may move with its tree.
    let w = Ws::new();
    let f = w.ferret();
    link(&w.root, "d/out", "../../../../../../../../etc");
    ok(&f, "move", json!({"source": "d", "destination": "e"}));
}

#[test]
fn undo_of_a_directory_move_is_checked_as_a_move() {
    let w = Ws::new();
    let f = w.ferret();
    write(&w.root, "d/keep.txt", "k");
    link(&w.root, "l", "../../../x");
    // d goes deeper; then a link that is inside only at that depth is moved into it.
    let (first, _) = ok(&f, "move", json!({"source": "d", "destination": "a/b/d"}));
    // From a/b/d/l, ../../../x is root/x: inside. At l (the root) it was outside already.
    ok(&f, "move", json!({"source": "l", "destination": "a/b/d/l"}));
    let before = snapshot(&w.root);
    let e = call(&f, "undo", json!({"id": first["change_id"]})).unwrap_err();
    assert_eq!(e.code, ErrorCode::PathEscape, "{e:?}");
    assert!(e.message.contains("../../../x"), "{}", e.message);
    assert_eq!(snapshot(&w.root), before, "nothing moved back");
    // Once the link is gone, undo goes ahead.
    std::fs::remove_file(w.root.join("a/b/d/l")).unwrap();
    ok(&f, "undo", json!({"id": first["change_id"]}));
    assert!(w.root.join("d/keep.txt").exists());
}

#[test]
fn a_directory_swapped_while_a_move_checks_it_never_lands_with_an_escaping_link() {
    let w = Ws::new();
    write(&w.root, "a/b/d/keep.txt", "k");
    write(&w.root, "a/b/bad/keep.txt", "k");
    link(&w.root, "a/b/bad/l", "../../../x");
    let f = w.ferret();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let root = w.root.clone();
    let s2 = stop.clone();
    let swapper = std::thread::spawn(move || {
        let (d, bad, tmp) = (
            root.join("a/b/d"),
            root.join("a/b/bad"),
            root.join("a/b/tmp"),
        );
        while !s2.load(std::sync::atomic::Ordering::Relaxed) {
            let _ = std::fs::rename(&d, &tmp);
            let _ = std::fs::rename(&bad, &d);
            let _ = std::fs::rename(&tmp, &bad);
        }
    });
    let mut moved = 0;
    for _ in 0..300 {
        if call(&f, "move", json!({"source": "a/b/d", "destination": "d"})).is_ok() {
            moved += 1;
            assert!(
                std::fs::symlink_metadata(w.root.join("d/l")).is_err(),
                "the tree with the escaping link was moved up"
            );
            let _ = std::fs::rename(w.root.join("d"), w.root.join("a/b/d"));
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    swapper.join().unwrap();
    eprintln!("{moved} of 300 moves went ahead");
}

// ---- 3. A killed `rm` leaves no `.trashinfo` litter. ----

/// `ferret --allow-write rm PATH` on the freedesktop home trash (`base/data/Trash`),
/// killed (abort) after the `.trashinfo` is written when `die`.
fn rm_home(w: &Ws, path: &str, die: bool) -> std::process::Output {
    let mut c = w.cmd(&["--allow-write", "rm", path]);
    c.env_remove("FERRET_PORTABLE");
    if die {
        c.env("FERRET_TEST_DIE_AFTER_STAGED", "trashinfo");
    }
    c.output().unwrap()
}

fn names_in(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn a_rm_killed_after_its_trashinfo_leaves_none_once_the_next_command_recovers() {
    let w = Ws::new();
    let trash = w.base.join("data/Trash");
    write(&w.root, "a.txt", "one");
    write(&w.root, "d/in.txt", "two");
    write(&w.root, "keep.txt", "k");
    // An earlier deletion of another a.txt holds the plain name: the killed one takes a.txt.2.
    write(&w.root, "old/a.txt", "old");
    assert!(rm_home(&w, "old/a.txt", false).status.success());
    assert_eq!(names_in(&trash.join("files")), ["a.txt"]);
    // Another program's .trashinfo with no item: not ferret's, never touched.
    std::fs::write(
        trash.join("info/foreign.trashinfo"),
        "[Trash Info]\nPath=/x/foreign\nDeletionDate=2020-01-01T00:00:00\n",
    )
    .unwrap();
    for (path, info) in [("a.txt", "a.txt.2.trashinfo"), ("d", "d.trashinfo")] {
        let out = rm_home(&w, path, true);
        assert!(!out.status.success(), "the kill hook fired");
        assert!(
            trash.join("info").join(info).exists(),
            "the kill came after the .trashinfo was written: {:?}",
            names_in(&trash.join("info"))
        );
        assert!(w.root.join(path).exists(), "not moved");
    }
    // The next write-capable command recovers: the orphans go, nothing else does.
    assert!(rm_home(&w, "keep.txt", false).status.success());
    assert_eq!(
        names_in(&trash.join("info")),
        ["a.txt.trashinfo", "foreign.trashinfo", "keep.txt.trashinfo"]
    );
    assert_eq!(names_in(&trash.join("files")), ["a.txt", "keep.txt"]);
    assert_eq!(w.read("a.txt").as_deref(), Some("one"));
    assert_eq!(w.read("d/in.txt").as_deref(), Some("two"));
    // And the killed deletions can be done again, under their first free names.
    assert!(rm_home(&w, "a.txt", false).status.success());
    assert!(trash.join("files/a.txt.2").exists());
    assert!(trash.join("info/a.txt.2.trashinfo").exists());
}

#[test]
fn recovery_leaves_a_trashinfo_that_another_deletion_made_at_the_same_name() {
    let w = Ws::new();
    let trash = w.base.join("data/Trash");
    write(&w.root, "a.txt", "one");
    assert!(!rm_home(&w, "a.txt", true).status.success());
    // Before recovery runs, another program trashes its own a.txt at that name (its
    // .trashinfo replaced by its own, and its item in files/).
    std::fs::remove_file(trash.join("info/a.txt.trashinfo")).unwrap();
    std::fs::write(
        trash.join("info/a.txt.trashinfo"),
        "[Trash Info]\nPath=/elsewhere/a.txt\nDeletionDate=2020-01-01T00:00:00\n",
    )
    .unwrap();
    write(&w.root, "other.txt", "o");
    assert!(rm_home(&w, "other.txt", false).status.success());
    assert!(
        trash.join("info/a.txt.trashinfo").exists(),
        "not what ferret wrote: left"
    );
}

// ---- 4. The search modes agree about what was searched. ----

/// A tree with files over a 1 MiB search_max_file_size whose match comes first (in the
/// searcher's first buffer), one under it, and one over it with no match at all.
fn oversize_tree(root: &std::path::Path) {
    let mut big = String::from("needle here\n");
    while big.len() < 3 << 20 {
        big.push_str("filler line without the word\n");
    }
    write(root, "big.txt", &big);
    write(root, "sub/deep_big.txt", &big);
    write(root, "quiet_big.txt", big.replace("needle", "hay"));
    write(root, "small.txt", "a needle\n");
}

#[track_caller]
fn agrees(what: &str, out: &Value) {
    let warnings = out["warnings"].to_string();
    for name in ["big.txt", "deep_big.txt", "quiet_big.txt"] {
        assert!(
            warnings.contains(&format!("{name}: not searched")),
            "{what}: {name} is named as not searched: {out}"
        );
    }
    let mut rest = out.clone();
    rest.as_object_mut().unwrap().remove("warnings");
    let rest = rest.to_string();
    assert!(
        !rest.contains("big.txt"),
        "{what}: listed as searched: {rest}"
    );
    assert!(rest.contains("small.txt"), "{what}: {rest}");
}

#[test]
fn every_search_mode_and_tool_passes_over_an_oversize_file_and_names_it() {
    let (_t, root) = tempdir();
    oversize_tree(&root);
    let mut c = ferret::config::Config::defaults(ferret::config::Mode::Server);
    c.roots = vec![root.clone()];
    c.search_max_file_size = 1 << 20;
    let f = ferret::Ferret::new(c).unwrap();
    for mode in ["files_with_matches", "content", "count"] {
        let (out, _) = ok(
            &f,
            "grep",
            json!({"pattern": "needle", "output_mode": mode}),
        );
        agrees(&format!("grep {mode}"), &out);
        let (out, _) = ok(
            &f,
            "grep",
            json!({"pattern": "nee+dle", "output_mode": mode, "path": "."}),
        );
        agrees(&format!("grep regex {mode}"), &out);
    }
    let (out, _) = ok(&f, "search_files", json!({"pattern": "needle"}));
    agrees("search_files", &out);
    let (out, _) = ok(&f, "file_search", json!({"query": "needle"}));
    agrees("file_search", &out);
}

#[test]
fn the_cli_with_and_without_an_index_passes_over_an_oversize_file_and_names_it() {
    let w = Ws::new();
    oversize_tree(&w.root);
    write(&w.root, "ferret.toml", "search_max_file_size = 1048576\n");
    let check = |what: &str| {
        for args in [
            &["grep", "-l", "needle"][..],
            &["grep", "-c", "needle"],
            &["grep", "needle"],
            &["grep", "--json", "-l", "needle"],
        ] {
            let o = w.cli(args);
            let stdout = String::from_utf8_lossy(&o.stdout);
            let all = format!("{stdout}{}", String::from_utf8_lossy(&o.stderr));
            for name in ["big.txt", "deep_big.txt", "quiet_big.txt"] {
                assert!(
                    all.contains(&format!("{name}: not searched")),
                    "{what} {args:?}: {name} named: {all}"
                );
            }
            let listed: Vec<&str> = stdout
                .lines()
                .filter(|l| l.contains("big.txt") && !l.contains("not searched"))
                .collect();
            assert!(listed.is_empty(), "{what} {args:?}: listed {listed:?}");
            assert!(stdout.contains("small.txt"), "{what} {args:?}: {all}");
        }
    };
    check("scan");
    let o = w.cli(&["index"]);
    assert!(o.status.success(), "{o:?}");
    check("index");
}

// ---- 5. Over HTTP the same bodies get a JSON-RPC answer, not a bare 415. ----

fn post(port: u16, session: Option<&str>, body: &[u8]) -> (u16, String) {
    let mut req = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-06-18\r\n\
Connection: close\r\nContent-Length: {}\r\n",
        body.len()
    )
    .into_bytes();
    if let Some(s) = session {
        req.extend_from_slice(format!("Mcp-Session-Id: {s}\r\n").as_bytes());
    }
    req.extend_from_slice(b"\r\n");
    req.extend_from_slice(body);
    http_exchange(port, &req)
}

#[test]
fn over_http_unreadable_bodies_get_a_json_rpc_error_with_their_id() {
    let (_t, root) = tempdir();
    let mut cmd = bin();
    cmd.arg("--root")
        .arg(&root)
        .args(["serve", "--http", "127.0.0.1:0"]);
    let s = HttpServer::spawn(cmd);
    let (code, text) = post(
        s.port,
        None,
        br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"h","version":"1"}}}"#,
    );
    assert_eq!(code, 200, "{text}");
    let sid = text
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("mcp-session-id:")
                .map(|v| v.trim().to_string())
        })
        .expect("a session");
    let body_json = |text: &str| -> Value {
        let body = text.split("\r\n\r\n").nth(1).unwrap_or("");
        serde_json::from_str(body.trim()).unwrap_or_else(|_| panic!("a JSON body: {text}"))
    };
    for (body, id, code) in [
        (&br#"{"jsonrpc":"2.0","id":5,"method":"ping","params":{"x":"\ud800"}}"#[..], json!(5), -32700),
        (br#"{"jsonrpc":"2.0","id":"q","method":"tools/call","params":{"name":"read_file","arguments":{"path":"\udc00"}}}"#, json!("q"), -32700),
        (b"{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"ping\",\"params\":{\"x\":\"\xff\"}}", json!(6), -32700),
        (br#"{"jsonrpc":"2.0","id":7,"method":"tools/ca"#, json!(7), -32700),
        (br#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":"x"}"#, json!(8), -32600),
    ] {
        let (status, text) = post(s.port, Some(&sid), body);
        assert_eq!(status, 400, "{text}");
        let v = body_json(&text);
        assert_error(&v, id, code);
    }
    let (status, text) = post(
        s.port,
        Some(&sid),
        br#"[{"jsonrpc":"2.0","id":9,"method":"ping"}]"#,
    );
    assert_eq!(status, 400, "{text}");
    assert_eq!(body_json(&text)[0]["id"], 9);
    // A notification that cannot be read is accepted, unanswered.
    let (status, text) = post(
        s.port,
        Some(&sid),
        br#"{"jsonrpc":"2.0","method":"notifications/x","params":"\ud800"}"#,
    );
    assert_eq!(status, 202, "{text}");
    // A body that is not JSON by its type is still 415.
    let req = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n\
Accept: application/json, text/event-stream\r\nMcp-Session-Id: {sid}\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{{}}"
    );
    assert_eq!(http_exchange(s.port, req.as_bytes()).0, 415);
}

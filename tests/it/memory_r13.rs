//! Round 13 (resources): a file tool's memory follows what it really holds.
//!
//! - A file in a legacy encoding (or UTF-16) is decoded: its text is up to three bytes of
//!   UTF-8 a byte. The text is measured before the file is read (in blocks, nothing held)
//!   and held from the shared budget with the bytes; the edit size limit applies to it
//!   before anything is decoded whole.
//! - A notebook's JSON is counted before it is parsed: past a cap it is refused (edit) or
//!   read as text (read_file), and under it the parse's weight is held first.
//! - A write that waits for another's lock on its file while it holds its content counts
//!   among the calls that may wait: a flood on one file is refused past them at once.
//!
//! Measured on the real binary serving MCP over stdio (its VmHWM, see cost_r3.rs).

use crate::cost_r3::{Server, said, serving};
use crate::util::{tempdir, write};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// About `mib` MiB of ibm866 text (as the attacker's: Cyrillic, each byte two of UTF-8),
/// starting with the line `START here`.
fn ibm866(mib: usize) -> Vec<u8> {
    let mut line = b"caf\xe9 na\xefve ".to_vec();
    line.extend(std::iter::repeat_n(0x80u8, 100));
    line.extend_from_slice(b" price\n");
    let mut body = b"START here\n".to_vec();
    while body.len() < mib << 20 {
        body.extend_from_slice(&line);
    }
    body
}

/// About `mib` MiB of UTF-16LE text with a BOM, of CJK (two bytes each, three of UTF-8).
fn utf16_cjk(mib: usize) -> Vec<u8> {
    let mut text = String::from("START here\n");
    let line = format!("{}\n", "漢字仮名交じり文".repeat(8));
    while text.len() * 2 / 3 < mib << 20 {
        text.push_str(&line);
    }
    let mut body = vec![0xFF, 0xFE];
    body.extend(text.encode_utf16().flat_map(u16::to_le_bytes));
    body
}

/// Sends every call at once (ids from 1), then a small `list_directory` (id 999) while
/// they run; collects every answer, and how long the small one took.
fn flood(s: &mut Server, calls: &[(&str, Value)]) -> (Vec<(u64, Value)>, Duration) {
    for (i, (tool, args)) in calls.iter().enumerate() {
        s.ask(i as u64 + 1, tool, args);
    }
    std::thread::sleep(Duration::from_millis(200));
    let asked = Instant::now();
    s.ask(999, "list_directory", &json!({"path": "."}));
    let mut got = Vec::new();
    let mut small = None;
    while got.len() < calls.len() || small.is_none() {
        let v = s.recv();
        let id = v["id"].as_u64().unwrap_or(0);
        if id == 999 {
            small = Some(asked.elapsed());
            assert!(v["result"]["isError"] != true, "the small call failed: {v}");
        } else if id >= 1 {
            got.push((id, answer(&v)));
        }
    }
    (got, small.unwrap_or_default())
}

/// A call's result; a JSON-RPC error (stdio's refusal of a request past those under
/// way) as an error result saying so.
fn answer(v: &Value) -> Value {
    match v.get("error") {
        Some(e) => json!({"isError": true, "rpc_error": e}),
        None => v["result"].clone(),
    }
}

/// Whether `r` was refused for the room it would take: by the tools (`TIMEOUT`, "calls
/// are already waiting") or by stdio before it ran (too many requests under way).
fn refused_at_once(r: &Value) -> bool {
    said(r).contains("calls are already waiting")
        || r["rpc_error"]["data"]["code"] == "RATE_LIMIT_EXCEEDED"
}

/// Every answer succeeded or was refused as busy (`TIMEOUT`, saying so, with a hint).
/// Returns how many succeeded.
fn ok_or_busy(answers: &[(u64, Value)]) -> usize {
    let mut ok = 0;
    for (id, r) in answers {
        let text = said(r);
        if r["rpc_error"]["data"]["code"] == "RATE_LIMIT_EXCEEDED" {
            continue;
        }
        if r["isError"] == true {
            assert!(
                text.starts_with("TIMEOUT: ")
                    && text.contains("the server is busy")
                    && text.contains("Hint: retry"),
                "call {id}: {}",
                &text[..text.len().min(300)]
            );
        } else {
            ok += 1;
        }
    }
    ok
}

/// The attack: concurrent dry-run edits, patches and whole reads of 32 MiB ibm866 files
/// (64 MiB of text each). Charged by their bytes on disk they ran side by side: 8 edits
/// of 34 MB files peaked at 1.4 GB. Now each holds its text too, so they take turns
/// within the budget, and a small call answers meanwhile.
#[test]
fn calls_on_legacy_encoded_files_hold_their_decoded_text() {
    let (_t, root) = tempdir();
    let body = ibm866(32);
    for i in 0..8 {
        write(&root, &format!("e{i}.txt"), &body);
    }
    let mut calls: Vec<(&str, Value)> = Vec::new();
    for i in 0..4 {
        calls.push((
            "edit",
            json!({"path": format!("e{i}.txt"), "old_string": "START here", "new_string": "START there", "dry_run": true}),
        ));
    }
    for i in 4..6 {
        calls.push((
            "apply_patch",
            json!({"patch": format!("*** Begin Patch\n*** Update File: e{i}.txt\n@@\n-START here\n+START there\n*** End Patch\n"), "dry_run": true}),
        ));
    }
    for i in 6..8 {
        calls.push(("read_file", json!({"path": format!("e{i}.txt")})));
    }
    let mut s = serving(
        &root,
        &[
            "--allow-write",
            "--set",
            "request_timeout=120s",
            "--set",
            "max_file_size=0",
            "--set",
            "max_output_chars=2000",
        ],
        "edit,apply_patch,read_file,list_directory",
    );
    let (answers, small) = flood(&mut s, &calls);
    let ok = ok_or_busy(&answers);
    for (id, r) in &answers {
        if *id <= 4 && r["isError"] != true {
            assert_eq!(r["structuredContent"]["replacements"], 1, "call {id}");
            assert_eq!(r["structuredContent"]["charset"], "ibm866", "call {id}");
        }
    }
    let peak = s.peak_mib();
    assert!(ok >= 4, "only {ok} of {} succeeded", answers.len());
    // 723 MiB charged by bytes on disk (the splice's copies already gone), 273 now.
    assert!(peak < 450, "peak {peak} MiB");
    assert!(
        small < Duration::from_secs(10),
        "the small call took {small:?}"
    );
}

/// A file under the edit limit on disk whose text is over it once decoded (ibm866: two
/// bytes a byte; UTF-16 CJK: three bytes for two) is refused `FILE_TOO_LARGE` before it
/// is decoded whole, by edit, apply_patch and write_file's overwrite alike, and says so:
/// a refused 60 MB file cost 256 MB before.
#[test]
fn a_file_over_the_edit_limit_once_decoded_is_refused_before_it_is_decoded() {
    let (_t, root) = tempdir();
    write(&root, "legacy.txt", ibm866(20));
    write(&root, "wide.txt", utf16_cjk(20));
    let mut s = serving(
        &root,
        &[
            "--allow-write",
            "--set",
            "max_edit_file_size=31457280",
            "--set",
            "request_timeout=60s",
        ],
        "edit,apply_patch,list_directory",
    );
    for f in ["legacy.txt", "wide.txt"] {
        let before = std::fs::read(root.join(f)).expect("read");
        let r = s.call(
            "edit",
            &json!({"path": f, "old_string": "START here", "new_string": "START there"}),
        );
        let text = said(&r);
        assert!(
            text.starts_with("FILE_TOO_LARGE") && text.contains("once decoded to UTF-8"),
            "{f}: {text}"
        );
        let r = s.call(
            "apply_patch",
            &json!({"patch": format!("*** Begin Patch\n*** Update File: {f}\n@@\n-START here\n+START there\n*** End Patch\n")}),
        );
        let text = said(&r);
        assert!(
            text.contains("FILE_TOO_LARGE") || text.contains("over the"),
            "{f}: {text}"
        );
        assert_eq!(std::fs::read(root.join(f)).expect("read"), before, "{f}");
    }
    // Each refused before its text (40-60 MiB) was made.
    let peak = s.peak_mib();
    assert!(peak < 60, "peak {peak} MiB");
}

/// A legacy file under the limits is still edited, in its encoding, every other byte
/// kept; its re-encoding makes no copy of the text per line (a UTF-16 file too).
#[test]
fn legacy_and_utf16_files_are_still_edited_in_their_encoding() {
    let (_t, root) = tempdir();
    write(&root, "legacy.txt", ibm866(4));
    write(&root, "wide.txt", utf16_cjk(4));
    let mut s = serving(&root, &["--allow-write"], "edit,read_file,list_directory");
    for (f, charset) in [("legacy.txt", "ibm866"), ("wide.txt", "utf-16le with BOM")] {
        let before = std::fs::read(root.join(f)).expect("read");
        let r = s.call(
            "edit",
            &json!({"path": f, "old_string": "START here", "new_string": "START there"}),
        );
        assert!(r["isError"] != true, "{f}: {}", said(&r));
        assert_eq!(r["structuredContent"]["charset"], charset, "{f}");
        let after = std::fs::read(root.join(f)).expect("read");
        let skip = if f == "wide.txt" { 2 } else { 0 };
        let unit = if f == "wide.txt" { 2 } else { 1 };
        // Only the changed word's bytes differ ("here" became "there").
        assert_eq!(after.len(), before.len() + unit, "{f}");
        assert_eq!(
            after[after.len() - 1000..],
            before[before.len() - 1000..],
            "{f}"
        );
        assert_eq!(after[..skip + 6 * unit], before[..skip + 6 * unit], "{f}");
    }
}

/// A notebook of 5 MB whose cell metadata is 2.5 million zeros: its JSON values are
/// counted before anything is parsed (574 MB for one notebook_edit before, 4.5 GB at 40
/// MB). notebook_edit refuses it (`FILE_TOO_LARGE`, hint: edit it as text), read_file
/// shows it as text, and eight at once keep the server small.
#[test]
fn a_notebook_of_millions_of_values_is_refused_before_it_is_parsed() {
    let (_t, root) = tempdir();
    let zeros = vec!["0"; 2_500_000].join(",");
    let nb = format!(
        "{{\n \"cells\": [\n  {{\n   \"cell_type\": \"code\",\n   \"id\": \"c1\",\n   \"metadata\": {{\"z\": [\n{zeros}\n]}},\n   \"source\": [\"print(1)\\n\"],\n   \"outputs\": [],\n   \"execution_count\": null\n  }}\n ],\n \"metadata\": {{}},\n \"nbformat\": 4,\n \"nbformat_minor\": 5\n}}\n"
    );
    for i in 0..8 {
        write(&root, &format!("s{i}.ipynb"), &nb);
    }
    let mut s = serving(
        &root,
        &[
            "--allow-write",
            "--set",
            "request_timeout=60s",
            "--set",
            "max_output_chars=2000",
            "--set",
            "max_file_size=0",
        ],
        "notebook_edit,read_file,list_directory",
    );
    let r = s.call(
        "notebook_edit",
        &json!({"path": "s0.ipynb", "cell_id": "c1", "new_source": "print(2)\n"}),
    );
    let text = said(&r);
    assert!(
        text.starts_with("FILE_TOO_LARGE")
            && text.contains("JSON values")
            && text.contains("Hint: read it raw"),
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("s0.ipynb")).expect("read"),
        nb
    );
    // read_file: not the cell view (not parsed), the text itself.
    let r = s.call("read_file", &json!({"path": "s1.ipynb"}));
    assert!(r["isError"] != true, "{}", said(&r));
    assert!(said(&r).contains("\"cell_type\""), "{}", said(&r));
    let calls: Vec<(&str, Value)> = (0..16)
        .map(|i| {
            if i % 2 == 0 {
                (
                    "notebook_edit",
                    json!({"path": format!("s{}.ipynb", i % 8), "cell_id": "c1", "new_source": "print(2)\n", "dry_run": true}),
                )
            } else {
                ("read_file", json!({"path": format!("s{}.ipynb", i % 8)}))
            }
        })
        .collect();
    let (answers, small) = flood(&mut s, &calls);
    for (id, r) in &answers {
        let text = said(r);
        if id % 2 == 1 {
            assert!(text.starts_with("FILE_TOO_LARGE"), "call {id}: {text}");
        }
    }
    let peak = s.peak_mib();
    assert!(peak < 250, "peak {peak} MiB");
    assert!(small < Duration::from_secs(10), "{small:?}");
}

/// Under the cap, a notebook is parsed with its weight held first: eight concurrent
/// dry-run edits of notebooks of 400 000 values take turns or are refused as busy, each
/// edit right, and the server stays small.
#[test]
fn notebooks_under_the_cap_hold_their_parse_and_take_turns() {
    let (_t, root) = tempdir();
    let zeros = vec!["0"; 400_000].join(",");
    let nb = format!(
        "{{\"cells\": [{{\"cell_type\": \"code\", \"id\": \"c1\", \"metadata\": {{\"z\": [{zeros}]}}, \"source\": [\"print(1)\\n\"], \"outputs\": [], \"execution_count\": null}}], \"metadata\": {{}}, \"nbformat\": 4, \"nbformat_minor\": 5}}\n"
    );
    for i in 0..8 {
        write(&root, &format!("s{i}.ipynb"), &nb);
    }
    let mut s = serving(
        &root,
        &[
            "--allow-write",
            "--set",
            "request_timeout=60s",
            "--set",
            "max_output_chars=2000",
        ],
        "notebook_edit,list_directory",
    );
    let calls: Vec<(&str, Value)> = (0..8)
        .map(|i| {
            (
                "notebook_edit",
                json!({"path": format!("s{i}.ipynb"), "cell_id": "c1", "new_source": "print(2)\n", "dry_run": true}),
            )
        })
        .collect();
    let (answers, _) = flood(&mut s, &calls);
    let ok = ok_or_busy(&answers);
    assert!(ok >= 1, "none succeeded");
    let peak = s.peak_mib();
    assert!(peak < 600, "peak {peak} MiB");
}

/// The attack: many write_file calls of 12 MB each, all overwriting one file, over
/// stdio. Each held its content while it waited for the file's lock, with no count: 40
/// calls peaked at 844 MB, 100 at 1.2 GB, all written one after another. Now a call that
/// waits for the lock holding content counts among the 8 that may wait for room: the rest
/// are refused at once (`TIMEOUT`, the server is busy, nothing written), the file ends as
/// one of the writes whole, and a small call answers meanwhile.
#[test]
fn writes_queued_on_one_files_lock_count_among_the_waiters() {
    let (_t, root) = tempdir();
    write(&root, "t.txt", "old\n");
    let mut s = serving(
        &root,
        &["--allow-write", "--set", "request_timeout=60s"],
        "write_file,read_file,list_directory",
    );
    let n = 40;
    let content = "y".repeat(12_000_000);
    let calls: Vec<(&str, Value)> = (0..n)
        .map(|i| {
            (
                "write_file",
                json!({"path": "t.txt", "content": format!("{content}{i}"), "overwrite": true}),
            )
        })
        .collect();
    let (answers, small) = flood(&mut s, &calls);
    let ok = ok_or_busy(&answers);
    // (Over stdio most are refused sooner now: past 64 MiB of requests under way.)
    let refused = answers.iter().filter(|(_, r)| refused_at_once(r)).count();
    assert!(ok >= 1, "none written");
    assert!(refused >= 1, "none refused for a full queue");
    let peak = s.peak_mib();
    assert!(peak < 600, "peak {peak} MiB");
    assert!(small < Duration::from_secs(10), "{small:?}");
    // The file is one write whole.
    let got = std::fs::read_to_string(root.join("t.txt")).expect("read");
    assert!(
        got.starts_with(&content) && got[content.len()..].parse::<usize>().is_ok_and(|i| i < n),
        "the file is not one write whole ({} bytes)",
        got.len()
    );
}

/// What a measure of a file reads is what decode makes: the count agrees with the
/// decoded text for each kind of file, and a binary one is its size (refused later,
/// never decoded). Exercised through the server: read_file of each answers, and a
/// file of each kind is read right.
#[test]
fn reads_of_each_kind_of_file_answer_right() {
    let (_t, root) = tempdir();
    write(&root, "legacy.txt", ibm866(1));
    let mut wide = utf16_cjk(1);
    wide.truncate(600_000);
    write(&root, "wide.txt", wide);
    write(&root, "plain.txt", "hello\n".repeat(1000));
    write(&root, "bin.dat", b"\x00\x01\x02binary\x00".repeat(1000));
    let mut s = serving(&root, &[], "read_file,list_directory");
    let check = |s: &mut Server, f: &str, want: &str| {
        let r = s.call("read_file", &json!({"path": f, "limit": 2}));
        let text = said(&r);
        assert!(text.contains(want), "{f}: {}", &text[..text.len().min(300)]);
    };
    check(&mut s, "legacy.txt", "START here");
    check(&mut s, "wide.txt", "START here");
    check(&mut s, "plain.txt", "hello");
    let r = s.call("read_file", &json!({"path": "bin.dat"}));
    assert!(said(&r).starts_with("BINARY_FILE"), "{}", said(&r));
}

/// The lock held by another process (an editor, another ferret) for a while: writes of
/// 9 MB each to that file, each holding its content, queue for the lock. At most 8 may
/// wait; the rest are refused at once (`TIMEOUT`, "calls are already waiting", nothing
/// written) while the lock is still held, not each kept until its wait ends. Once it is
/// released the waiting ones are written, one after another.
#[test]
fn past_eight_writes_waiting_for_a_files_lock_are_refused_at_once() {
    use std::os::fd::AsRawFd;
    let (_t, root) = tempdir();
    write(&root, "t.txt", "old\n");
    let locked = std::fs::File::open(root.join("t.txt")).expect("open");
    // SAFETY: flock on an fd this test owns.
    assert_eq!(unsafe { libc::flock(locked.as_raw_fd(), libc::LOCK_EX) }, 0);
    let mut s = serving(
        &root,
        &["--allow-write", "--set", "request_timeout=60s"],
        "write_file,list_directory",
    );
    let n = 20u64;
    let content = "z".repeat(9_000_000);
    for i in 0..n {
        s.ask(
            i + 1,
            "write_file",
            &json!({"path": "t.txt", "content": format!("{content}{i}"), "overwrite": true}),
        );
    }
    // While the lock is held: all but the waiters are refused, at once.
    let mut got = Vec::new();
    let started = Instant::now();
    while got.len() < (n - 8) as usize && started.elapsed() < Duration::from_secs(8) {
        let v = s.recv();
        got.push((v["id"].as_u64().unwrap_or(0), answer(&v)));
    }
    let refused = got.iter().filter(|(_, r)| refused_at_once(r)).count();
    assert!(
        refused >= (n - 8) as usize,
        "only {refused} of {n} refused while the lock was held: {:?}",
        got.iter()
            .map(|(_, r)| said(r).chars().take(120).collect::<String>())
            .collect::<Vec<_>>()
    );
    assert_eq!(
        std::fs::read_to_string(root.join("t.txt")).expect("read"),
        "old\n"
    );
    drop(locked);
    while got.len() < n as usize {
        let v = s.recv();
        got.push((v["id"].as_u64().unwrap_or(0), answer(&v)));
    }
    let written = got.iter().filter(|(_, r)| r["isError"] != true).count();
    assert!(written >= 1, "none written once the lock was released");
}

/// Round 19: a stdio client that never read its answers had them queued without bound
/// (a request was no longer "under way" once answered), 5.9 GB for 16 MB ids. Answers
/// waiting for stdout take room in a bounded queue (a test knob makes it small here),
/// their requests count as under way until queued, and past the bound the server stops
/// reading: the client's writes block. Once it reads, every request is answered.
#[test]
fn a_client_that_reads_no_answers_makes_the_server_stop_reading() {
    use std::io::{BufRead, Write};
    let (_t, root) = tempdir();
    write(&root, "a.txt", "a\n");
    let mut child = crate::util::bin()
        .arg("--root")
        .arg(&root)
        .args(["serve", "--no-index"])
        .env("FERRET_TEST_STDIO_QUEUE_KIB", "64")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("serve");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}})
    )
    .expect("init");
    let mut line = String::new();
    stdout.read_line(&mut line).expect("init answer");
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    )
    .expect("initialized");
    // 3 000 requests of 4 KB each (12 MB), answers of ~15 KB each (45 MB): far more
    // than the pipe, the queue and the requests under way hold together.
    const N: u64 = 3000;
    let pad = "x".repeat(4000);
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let writer = std::thread::spawn(move || {
        for i in 1..=N {
            let req = json!({"jsonrpc": "2.0", "id": i, "method": "tools/list",
                             "params": {"_meta": {"pad": pad}}});
            if writeln!(stdin, "{req}").is_err() {
                break;
            }
        }
        let _ = done_tx.send(());
        stdin
    });
    // Not reading: the writer must be held up.
    assert!(
        done_rx.recv_timeout(Duration::from_secs(4)).is_err(),
        "the server read every request while no answer was read"
    );
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).expect("status");
    let rss_mib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<u64>().ok())
        .expect("VmHWM")
        / 1024;
    // Then read: every request gets its answer (a list, or busy), none is lost.
    let mut answered = std::collections::HashSet::new();
    let end = Instant::now() + Duration::from_secs(120);
    while answered.len() < N as usize && Instant::now() < end {
        line.clear();
        if stdout.read_line(&mut line).expect("read") == 0 {
            break;
        }
        if let Ok(v) = serde_json::from_str::<Value>(&line)
            && let Some(id) = v["id"].as_u64()
        {
            assert!(
                v.get("result").is_some() || v.get("error").is_some(),
                "{line}"
            );
            answered.insert(id);
        }
    }
    assert_eq!(answered.len(), N as usize, "answers lost");
    let stdin = writer.join().expect("writer");
    drop(stdin);
    let _ = child.wait();
    assert!(rss_mib < 200, "peak {rss_mib} MiB while answers waited");
}

/// Round 19: every answer repeats its request's id, so 16 MB ids made 16 MB answers. A
/// request whose id is over 256 bytes is refused unrun, answered with id null.
#[test]
fn a_request_with_an_overlong_id_is_refused_without_echoing_it() {
    let (_t, root) = tempdir();
    write(&root, "a.txt", "a\n");
    let mut c = crate::util::bin();
    c.arg("--root").arg(&root).args(["serve", "--no-index"]);
    let mut s = crate::util::StdioServer::spawn(c, "t");
    let long = "i".repeat(100_000);
    s.send(json!({"jsonrpc": "2.0", "id": long, "method": "tools/call",
                  "params": {"name": "file_exists", "arguments": {"path": "a.txt"}}}));
    let v = s.recv();
    assert_eq!(v["id"], Value::Null, "{v}");
    assert_eq!(v["error"]["code"], -32600, "{v}");
    assert!(v.to_string().len() < 1000, "{}", v.to_string().len());
    // A 256-byte id is still served.
    let ok = "j".repeat(256);
    s.send(json!({"jsonrpc": "2.0", "id": ok, "method": "tools/call",
                  "params": {"name": "file_exists", "arguments": {"path": "a.txt"}}}));
    let v = s.recv();
    assert_eq!(v["id"], json!(ok), "{v}");
    assert!(v.get("result").is_some(), "{v}");
}

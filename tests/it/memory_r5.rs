//! Issue #25, round 5: memory follows a request's size limit, not the number of requests.
//! The file tools (edit, write_file, apply_patch, move, undo, read_file, read_files)
//! take what they will hold of a file from the one process-wide budget searches are
//! admitted against, before they read it; a flood waits its turn or is refused
//! (`TIMEOUT`, "the server is busy"), and a small call still answers.
//!
//! Measured on the real binary serving MCP over stdio (its VmHWM, see cost_r3.rs).

use crate::cost_r3::{Server, said, serving};
use crate::util::{tempdir, write};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

/// `n` files `f{i}.txt` of about `mib` MiB of ordinary lines, each ending in `NEEDLE`.
fn big_files(root: &Path, n: usize, mib: usize) {
    let line = "let x = 1234567890; // abcdefghijklmnopqrstuvwxyz\n";
    let mut body = line.repeat(mib * (1 << 20) / line.len());
    body.push_str("NEEDLE\n");
    for i in 0..n {
        write(root, &format!("f{i}.txt"), &body);
    }
}

/// Sends every call at once (ids from 1), then a small `list_directory` (id 999) while
/// they run; collects every answer. Returns the answers by id and when the small one came.
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
            got.push((id, v["result"].clone()));
        }
    }
    (got, small.unwrap_or_default())
}

/// Every answer either succeeded or was refused as busy: `TIMEOUT`, saying so, with a
/// hint. Returns how many succeeded.
fn ok_or_busy(answers: &[(u64, Value)]) -> usize {
    let mut ok = 0;
    for (id, r) in answers {
        let text = said(r);
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

/// The attack: many concurrent calls, each holding a big file whole (dry-run edits,
/// dry-run patches, whole-file reads with `max_file_size = 0`). Before, each added its
/// copies (32 MiB files: ~100 MiB a call, 3 GiB for these 32); now they share 384 MiB
/// of the budget, the rest wait (at most 8) or are refused, and a small call answers
/// meanwhile.
#[test]
fn a_flood_of_big_file_calls_shares_one_memory_budget() {
    let (_t, root) = tempdir();
    big_files(&root, 16, 32);
    let mut calls: Vec<(&str, Value)> = Vec::new();
    for i in 0..8 {
        calls.push((
            "edit",
            json!({"path": format!("f{i}.txt"), "old_string": "NEEDLE", "new_string": "FOUND", "dry_run": true}),
        ));
    }
    for i in 8..16 {
        calls.push((
            "apply_patch",
            json!({"patch": format!("*** Begin Patch\n*** Update File: f{i}.txt\n@@\n-NEEDLE\n+FOUND\n*** End Patch\n"), "dry_run": true}),
        ));
    }
    for i in 0..16 {
        calls.push(("read_file", json!({"path": format!("f{i}.txt")})));
    }
    let mut s = serving(
        &root,
        &[
            "--allow-write",
            "--set",
            "request_timeout=20s",
            "--set",
            "max_file_size=0",
            "--set",
            "max_output_chars=2000",
        ],
        "edit,apply_patch,read_file,list_directory",
    );
    let (answers, small) = flood(&mut s, &calls);
    let ok = ok_or_busy(&answers);
    let peak = s.peak_mib();
    assert!(ok >= 3, "only {ok} of {} calls succeeded", answers.len());
    assert!(peak < 700, "peak {peak} MiB");
    assert!(
        small < Duration::from_secs(10),
        "the small call took {small:?}"
    );
}

/// Eight concurrent dry-run edits of big files (the brief's "8 of them") all succeed when
/// the deadline lets them take turns, each with its own right answer, and the server's
/// peak stays near what two at a time hold.
#[test]
fn eight_big_edits_at_once_take_turns_and_all_succeed() {
    let (_t, root) = tempdir();
    big_files(&root, 8, 40);
    let calls: Vec<(&str, Value)> = (0..8)
        .map(|i| {
            (
                "edit",
                json!({"path": format!("f{i}.txt"), "old_string": "NEEDLE", "new_string": format!("FOUND{i}"), "dry_run": true}),
            )
        })
        .collect();
    let mut s = serving(
        &root,
        &["--allow-write", "--set", "request_timeout=120s"],
        "edit,list_directory",
    );
    let (answers, _) = flood(&mut s, &calls);
    for (id, r) in &answers {
        assert!(r["isError"] != true, "call {id}: {}", said(r));
        let diff = r["structuredContent"]["diff"].as_str().unwrap_or_default();
        assert_eq!(r["structuredContent"]["replacements"], 1, "call {id}");
        // Over the diff's bound for 40 MiB files: it says so rather than diffing.
        assert!(diff.contains("no diff shown"), "call {id}: {diff}");
    }
    let peak = s.peak_mib();
    assert!(peak < 600, "peak {peak} MiB");
}

/// A file's shape, not its size: a file of empty lines makes an edit whose old_string
/// is not there look for it line by line, a span (24 bytes) per line: 12 MiB of line
/// breaks held 290 MiB. The spans are counted before the file is read, so four such
/// edits at once take turns instead of adding up (1.2 GiB before).
#[test]
fn edits_of_files_of_empty_lines_count_their_lines() {
    let (_t, root) = tempdir();
    let body = "\n".repeat(12 << 20);
    for i in 0..4 {
        write(&root, &format!("e{i}.txt"), &body);
    }
    let calls: Vec<(&str, Value)> = (0..4)
        .map(|i| {
            (
                "edit",
                json!({"path": format!("e{i}.txt"), "old_string": "not\nthere\nat all", "new_string": "x", "dry_run": true}),
            )
        })
        .collect();
    let mut s = serving(
        &root,
        &["--allow-write", "--set", "request_timeout=120s"],
        "edit,list_directory",
    );
    let (answers, _) = flood(&mut s, &calls);
    for (id, r) in &answers {
        let text = said(r);
        assert!(
            text.starts_with("NO_MATCH") || text.starts_with("TIMEOUT: the server is busy"),
            "call {id}: {}",
            &text[..text.len().min(300)]
        );
    }
    let peak = s.peak_mib();
    assert!(peak < 700, "peak {peak} MiB");
}

/// The refusal itself: with the budget held, a call past the 8 that may wait is refused
/// at once (not after its deadline), and says what to do; a small read still answers.
#[test]
fn past_eight_waiting_a_big_call_is_refused_at_once_and_small_ones_answer() {
    let (_t, root) = tempdir();
    big_files(&root, 20, 32);
    write(&root, "small.txt", "hello\n");
    let calls: Vec<(&str, Value)> = (0..20)
        .map(|i| {
            (
                "edit",
                json!({"path": format!("f{i}.txt"), "old_string": "NEEDLE", "new_string": "FOUND", "dry_run": true}),
            )
        })
        .collect();
    let mut s = serving(
        &root,
        &["--allow-write", "--set", "request_timeout=60s"],
        "edit,read_file,list_directory",
    );
    let started = Instant::now();
    let (answers, small) = flood(&mut s, &calls);
    let ok = ok_or_busy(&answers);
    // Some refused without waiting for their 60 s deadline: the queue was full.
    let queued_out = answers
        .iter()
        .filter(|(_, r)| said(r).contains("calls are already waiting"))
        .count();
    assert!(queued_out >= 1, "none was refused for a full queue");
    assert!(ok >= 3, "only {ok} succeeded");
    assert!(
        small < Duration::from_secs(10),
        "the small call took {small:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(60));
    let r = s.call("read_file", &json!({"path": "small.txt"}));
    assert!(said(&r).contains("hello"), "{}", said(&r));
    assert!(s.peak_mib() < 700, "peak {} MiB", s.peak_mib());
}

// ---------------------------------------------------------------------------------------
// A workspace's own ferret.toml that hides (almost) everything is said to the agent.

/// A small workspace: a few sources and docs, one level down too.
fn small_repo(root: &Path) {
    write(root, "README.md", "hello NEEDLE\n");
    write(root, "Cargo.toml", "[package]\nname = \"x\"\n");
    write(root, "src/main.rs", "fn main() { /* NEEDLE */ }\n");
    write(root, "src/lib.rs", "pub fn f() {}\n");
    write(root, "docs/guide.md", "NEEDLE guide\n");
}

/// The server's `initialize` answer (its instructions) for `root`.
fn instructions(root: &Path) -> String {
    use std::io::{BufRead, Write};
    let mut child = crate::util::bin()
        .arg("--root")
        .arg(root)
        .args(["serve", "--no-index"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn ferret serve");
    let mut stdin = child.stdin.take().expect("stdin");
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "memory_r5", "version": "1"}}})
    )
    .expect("write");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("read");
    drop(stdin);
    let _ = child.wait();
    let v: Value = serde_json::from_str(&line).expect("json");
    v["result"]["instructions"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// `ferret config`'s text.
fn config_text(root: &Path) -> String {
    let out = crate::util::bin()
        .arg("--root")
        .arg(root)
        .arg("config")
        .output()
        .expect("ferret config");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Each shape of "hide everything" a repository can ship (every one of them narrowing,
/// so applied): the agent is told, naming the file and the rule, in the server's
/// instructions, in a search's warnings, in an error's hint; the user in `ferret config`.
/// Before, every listing and search came back empty with no word of why.
#[test]
fn a_workspace_config_that_hides_everything_is_said_to_the_agent() {
    let shapes = [
        ("deny_extra = [\"*\"]", "deny_extra \"*\""),
        ("deny_extra = [\"/*\"]", "deny_extra \"/*\""),
        ("skip_extra = [\"*\"]", "skip_extra \"*\""),
        (
            "allowed_extensions = [\"zzz\"]",
            "allowed_extensions [\"zzz\"]",
        ),
        // almost everything, rule by rule
        (
            "deny_extra = [\"*.md\", \"*.rs\", \"*.toml\"]",
            "deny_extra \"*.md\"",
        ),
        (
            "skip_extra = [\"src/\", \"*.md\", \"*.toml\"]",
            "skip_extra",
        ),
    ];
    for (toml, rule) in shapes {
        let (_t, root) = tempdir();
        small_repo(&root);
        write(&root, "ferret.toml", format!("{toml}\n"));
        let said_in = |what: &str, text: &str| {
            assert!(
                text.contains("ferret.toml") && text.contains(rule) && text.contains("hides"),
                "{toml}: {what} does not say it: {text}"
            );
        };
        said_in("ferret config", &config_text(&root));
        said_in("the instructions", &instructions(&root));
        let mut s = serving(&root, &[], "glob,grep,read_file,list_directory");
        let r = s.call("grep", &json!({"pattern": "NEEDLE"}));
        let warnings: Vec<&str> = r["structuredContent"]["warnings"]
            .as_array()
            .map(|w| w.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let warnings = warnings.join("\n");
        said_in("grep's warnings", &warnings);
        said_in("grep's text", &said(&r));
        let r = s.call("glob", &json!({"pattern": "**/*"}));
        said_in("glob's text", &said(&r));
        // An error's hint (a read of a hidden file, or of one that is not there).
        let r = s.call("read_file", &json!({"path": "README.md"}));
        let text = said(&r);
        if r["isError"] == true {
            said_in("read_file's error", &text);
        }
        let r = s.call("read_file", &json!({"path": "no/such.txt"}));
        said_in("a NOT_FOUND error", &said(&r));
    }
}

/// No false alarm: a file that narrows a little (logs, one folder), or none at all, adds
/// no warning anywhere.
#[test]
fn a_workspace_config_that_hides_little_adds_no_warning() {
    for toml in [
        "deny_extra = [\"*.log\"]",
        "skip_extra = [\"docs/\"]",
        "allowed_extensions = [\"rs\", \"md\", \"toml\"]",
        "max_file_size = 100000",
        "",
    ] {
        let (_t, root) = tempdir();
        small_repo(&root);
        write(&root, "ferret.toml", format!("{toml}\n"));
        let text = config_text(&root);
        assert!(!text.contains("WARNING"), "{toml}: {text}");
        assert!(!instructions(&root).contains("WARNING"), "{toml}");
        let mut s = serving(&root, &[], "grep");
        let r = s.call("grep", &json!({"pattern": "NEEDLE"}));
        assert!(
            r["structuredContent"]["warnings"]
                .as_array()
                .is_none_or(|w| w.is_empty()),
            "{toml}: {r}"
        );
    }
}

/// The same budget over HTTP (it is the process's, whatever the transport): sixteen
/// dry-run edits of big files posted at once, each on its own connection, succeed or are
/// refused as busy, the server's peak stays bounded, and a small call answers meanwhile.
#[test]
fn over_http_a_flood_of_big_edits_shares_the_same_budget() {
    use crate::http_r3::{host, post, serve, session};
    let (_t, root) = tempdir();
    big_files(&root, 16, 32);
    write(&root, "small.txt", "hello\n");
    let server = serve(
        &root,
        &[
            "--allow-write",
            "--set",
            "request_timeout=20s",
            "--set",
            "max_requests_per_round=0",
            "--set",
            "max_bytes_per_round=0",
        ],
        &[],
    );
    let port = server.port;
    let sid = session(port, "memory_r5");
    let call = |id: usize, tool: &str, args: Value| {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                          "params": {"name": tool, "arguments": args}})
        .to_string();
        post(port, &host(port), Some(&sid), &body)
    };
    let answers: Vec<(u16, String)> = std::thread::scope(|s| {
        let edits: Vec<_> = (0..16)
            .map(|i| {
                let call = &call;
                s.spawn(move || {
                    call(
                        i + 10,
                        "edit",
                        json!({"path": format!("f{i}.txt"), "old_string": "NEEDLE",
                               "new_string": "FOUND", "dry_run": true}),
                    )
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        let asked = Instant::now();
        let (status, small) = call(999, "read_file", json!({"path": "small.txt"}));
        assert_eq!(status, 200, "{small}");
        assert!(small.contains("hello"), "{small}");
        assert!(
            asked.elapsed() < Duration::from_secs(10),
            "{:?}",
            asked.elapsed()
        );
        edits.into_iter().map(|h| h.join().expect("join")).collect()
    });
    let mut ok = 0;
    for (status, text) in &answers {
        assert_eq!(*status, 200, "{text}");
        if text.contains("\"isError\":true") {
            assert!(
                text.contains("TIMEOUT: the server is busy"),
                "{}",
                &text[..text.len().min(600)]
            );
        } else {
            assert!(
                text.contains("Would edit"),
                "{}",
                &text[..text.len().min(600)]
            );
            ok += 1;
        }
    }
    assert!(ok >= 3, "only {ok} of 16 succeeded");
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", server.child.id())).expect("status");
    let peak: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmHWM");
    assert!(peak / 1024 < 700, "peak {} MiB", peak / 1024);
}

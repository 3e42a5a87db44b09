//! Issue #25, round 3: the cost of a request is bounded before work starts (pattern,
//! alternation, glob and brace caps; regex compile limits), hostile ignore files are
//! read under byte and line caps with a warning in the result, long lines are reported
//! rather than silently missed, and structured results are cut to the output budget.
//!
//! Memory is measured on the real binary serving MCP over stdio: its VmHWM (peak RSS,
//! /proc/PID/status) read after it answered and before it exits. (A child's `wait4`
//! maximum would count the test process's own memory from before the exec.)

use crate::util::{bin, tempdir, write};
use ferret::config::{Config, Mode};
use ferret::{CallOptions, ErrorCode, Ferret, Session};
use serde_json::{Value, json};
use std::io::Write;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// What one run of `ferret --root ROOT [extra] call TOOL -` gave.
struct Run {
    stdout: String,
    stderr: String,
    took: Duration,
}

// Waited for with wait4 (for its rusage), which clippy cannot see.
#[allow(clippy::zombie_processes)]
fn run_call(root: &Path, extra: &[&str], tool: &str, args: &Value) -> Run {
    let mut cmd = bin();
    cmd.arg("--root").arg(root).args(extra);
    cmd.args(["call", tool, "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = cmd.spawn().expect("spawn ferret");
    let body = args.to_string();
    let mut stdin = child.stdin.take().expect("stdin");
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(body.as_bytes());
    });
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut out, &mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut s);
        s
    });
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value for wait4 to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our own child, not waited for elsewhere; both pointers are valid.
    // (wait4, not Child::wait: the stdio threads own the handles.)
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid, "wait4");
    let took = started.elapsed();
    let _ = feeder.join();
    Run {
        stdout: reader.join().unwrap_or_default(),
        stderr: err_reader.join().unwrap_or_default(),
        took,
    }
}

/// `ferret serve` over stdio, for measuring (`util::StdioServer`).
pub(crate) use crate::util::StdioServer as Server;

/// A stdio server on `root` serving the search tools, no byte budget.
pub(crate) fn start(root: &Path, extra: &[&str]) -> Server {
    serving(root, extra, "glob,grep,file_search,search_files")
}

/// A stdio server on `root` serving `tools`, no byte budget, `extra` global flags.
pub(crate) fn serving(root: &Path, extra: &[&str], tools: &str) -> Server {
    let mut cmd = bin();
    cmd.arg("--root")
        .arg(root)
        .args(["--set", "max_bytes_per_round=0"])
        .args(extra)
        .args(["serve", "--no-index"])
        .args(["--tools", tools]);
    Server::spawn(cmd, "cost_r3")
}

/// The text of a tool result.
pub(crate) fn said(r: &Value) -> String {
    r["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// A small tree a normal search answers from.
fn small_tree(root: &Path) {
    write(
        root,
        "src/main.rs",
        "fn main() { println!(\"NEEDLE here\"); }\n",
    );
    write(root, "src/lib.rs", "pub fn f() {}\n");
    write(root, "docs/a.md", "NEEDLE in docs\n");
}

fn in_process(root: &Path, budget: u64) -> Ferret {
    let mut c = Config::defaults(Mode::Cli);
    c.roots = vec![root.to_path_buf()];
    c.max_output_chars = budget;
    Ferret::new(c).expect("open workspace")
}

fn call(
    f: &Ferret,
    tool: &str,
    args: Value,
) -> Result<ferret::tool::CallOutput, ferret::ToolError> {
    f.call(
        &Session::new("t", "test"),
        tool,
        args,
        CallOptions::default(),
    )
}

/// Every hostile shape, as (tool, arguments, the code it must be refused with).
fn hostile_shapes() -> Vec<(&'static str, Value, ErrorCode)> {
    let big = "x".repeat(4 << 20);
    let braces = format!(
        "*.{{{}}}",
        (0..300_000)
            .map(|i| format!("e{i}"))
            .collect::<Vec<_>>()
            .join(",")
    );
    let alternation = (0..5000)
        .map(|i| format!("w{i}"))
        .collect::<Vec<_>>()
        .join("|");
    let many_globs: Vec<String> = (0..100_000).map(|i| format!("!d{i}/**")).collect();
    vec![
        // grep: a literal, a regex, an alternation, nested repetition, globs
        (
            "grep",
            json!({"pattern": big, "fixed_strings": true}),
            ErrorCode::InvalidArgument,
        ),
        ("grep", json!({"pattern": big}), ErrorCode::InvalidArgument),
        (
            "grep",
            json!({"pattern": alternation}),
            ErrorCode::InvalidRegex,
        ),
        (
            "grep",
            json!({"pattern": "(a{1000}){1000}"}),
            ErrorCode::InvalidRegex,
        ),
        (
            "grep",
            json!({"pattern": "(?:\\w{200}){200}"}),
            ErrorCode::InvalidRegex,
        ),
        (
            "grep",
            json!({"pattern": "NEEDLE", "glob": braces}),
            ErrorCode::InvalidGlob,
        ),
        (
            "grep",
            json!({"pattern": "NEEDLE", "glob": many_globs}),
            ErrorCode::InvalidGlob,
        ),
        (
            "grep",
            json!({"pattern": "NEEDLE", "glob": format!("src/{}*", "a".repeat(8000))}),
            ErrorCode::InvalidGlob,
        ),
        // glob: a brace bomb, a long pattern, many alternatives in a short one
        ("glob", json!({"pattern": braces}), ErrorCode::InvalidGlob),
        ("glob", json!({"pattern": big}), ErrorCode::InvalidGlob),
        (
            "glob",
            json!({"pattern": format!("{{{}}}", vec!["a"; 1500].join(","))}),
            ErrorCode::InvalidGlob,
        ),
        // the seed-shaped search tools
        (
            "file_search",
            json!({"query": big}),
            ErrorCode::InvalidArgument,
        ),
        (
            "file_search",
            json!({"query": "NEEDLE", "include": braces}),
            ErrorCode::InvalidGlob,
        ),
        (
            "search_files",
            json!({"pattern": big}),
            ErrorCode::InvalidArgument,
        ),
        (
            "search_files",
            json!({"pattern": alternation}),
            ErrorCode::InvalidRegex,
        ),
        (
            "search_files",
            json!({"pattern": "NEEDLE", "file_pattern": braces}),
            ErrorCode::InvalidGlob,
        ),
    ]
}

/// Each hostile shape is refused with its own code and a hint, and requests of a
/// normal size next to the caps still answer.
#[test]
fn hostile_request_shapes_are_refused_with_a_code_and_a_hint() {
    let (_t, root) = tempdir();
    small_tree(&root);
    let f = in_process(&root, 0);
    for (tool, args, want) in hostile_shapes() {
        let started = Instant::now();
        let e = call(&f, tool, args).expect_err(tool);
        let said: String = e.message.chars().take(300).collect();
        assert_eq!(e.code, want, "{tool}: {said}");
        assert!(
            e.hint.as_deref().is_some_and(|h| !h.is_empty()),
            "{tool}: no hint: {said}"
        );
        // Refused before work: no search took place.
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{tool} took {:?}",
            started.elapsed()
        );
        assert!(e.message.len() < 4096, "{tool}: the error quotes it all");
    }
    // Just under the caps: answered.
    let near: String = "NEEDLE here".to_string() + &" ".repeat(0);
    let r = call(&f, "grep", json!({"pattern": near, "fixed_strings": true})).unwrap();
    assert_eq!(r.structured["file_count"], 1);
    let alts = (0..1000)
        .map(|i| format!("w{i}x"))
        .chain(["NEEDLE".to_string()])
        .collect::<Vec<_>>()
        .join("|");
    let r = call(&f, "grep", json!({"pattern": alts})).unwrap();
    assert_eq!(r.structured["file_count"], 2);
    let r = call(
        &f,
        "glob",
        json!({"pattern": format!("*.{{{}}}", (0..500).map(|i| format!("q{i}")).chain(["rs".into()]).collect::<Vec<_>>().join(","))}),
    )
    .unwrap();
    assert_eq!(r.structured["count"], 2);
    let long_literal = format!("{}NEEDLE", "z".repeat(60_000));
    let r = call(
        &f,
        "grep",
        json!({"pattern": long_literal, "fixed_strings": true}),
    )
    .unwrap();
    assert_eq!(r.structured["file_count"], 0);
}

/// The same shapes against the binary: each run stays small in memory. Unbounded, a
/// 300 000-alternative glob took ~400 MB and a 3 MB literal ~340 MB.
#[test]
fn hostile_request_shapes_keep_the_process_small() {
    let (_t, root) = tempdir();
    small_tree(&root);
    for (tool, args, want) in hostile_shapes() {
        let mut s = start(&root, &[]);
        let r = s.call(tool, &args);
        let text = said(&r);
        assert!(
            r["isError"] == true && text.contains(want.as_str()),
            "{tool}: {}",
            &text[..text.len().min(400)]
        );
        assert!(s.peak_mib() < 150, "{tool}: peak {} MiB", s.peak_mib());
    }
}

/// The compile caps hold for shapes the length caps let through: nested and Unicode
/// repetitions are refused (by the class-position count, or at 16 MiB of compiled regex) (before the caps, each compiled to
/// ~100 MB and ran: 76-134 MiB peak on the release binary), and what is admitted stays
/// small.
#[test]
fn regex_shapes_under_the_length_cap_stay_small() {
    let (_t, root) = tempdir();
    small_tree(&root);
    for (pattern, refused) in [
        ("(a{1000}){1000}", true),
        ("((a{100}){100}){100}", true),
        ("[\\p{L}\\p{N}]{1000}", true),
        ("(?i)(\\w+\\s*){500}", true),
        // Each literal of an alternation under a counted repetition is a position the
        // slow engine keeps alive: 6 000 here, over the 4 096 cap; 3 600 is admitted.
        ("(x|y|z){1000}(x|y|z){1000}", true),
        ("(x|y|z){600}(x|y|z){600}", false),
    ] {
        let mut s = start(&root, &[]);
        let r = s.call("grep", &json!({"pattern": pattern}));
        assert!(s.peak_mib() < 70, "{pattern}: peak {} MiB", s.peak_mib());
        if refused {
            assert!(said(&r).contains("INVALID_REGEX"), "{pattern}: {r}");
            // Refused by whichever cap judges first: the class-position count (round
            // 25) or the 16 MiB compile cap.
            assert!(
                said(&r).contains("16 MiB") || said(&r).contains("class positions"),
                "{pattern}: {r}"
            );
        } else {
            assert_eq!(r["structuredContent"]["file_count"], 0, "{pattern}: {r}");
        }
    }
}

/// An ignore file's lines, each a distinct glob the matcher must compile.
fn ignore_lines(n: usize, tag: &str) -> String {
    (0..n)
        .map(|i| format!("*{tag}{i}*/**/x{i}?.log\n"))
        .collect()
}

/// A huge ignore file (by bytes, or by lines under the byte cap, of each kind) is not
/// used at all: its rules do not apply, and the result and stderr name it. An ignore
/// file under the caps is used.
#[test]
fn an_ignore_file_over_its_caps_is_not_used_and_the_result_says_so() {
    // (where, content): over the byte cap; under it but over the line cap
    let huge = format!("hidden.txt\n{}", ignore_lines(60_000, "b"));
    assert!(huge.len() > 1 << 20);
    let many_lines = format!("hidden.txt\n{}", "#\n".repeat(30_000));
    assert!(many_lines.len() < 1 << 20);
    for (kind, content) in [
        (".gitignore", &huge),
        (".ignore", &huge),
        (".gitignore", &many_lines),
        (".git/info/exclude", &huge),
    ] {
        let (_t, root) = tempdir();
        write(&root, "hidden.txt", "NEEDLE\n");
        write(&root, "shown.txt", "NEEDLE\n");
        write(&root, kind, content.as_bytes());
        let r = run_call(&root, &[], "grep", &json!({"pattern": "NEEDLE"}));
        let v: Value = serde_json::from_str(&r.stdout).expect("json");
        // Not used: the file it names is searched.
        assert_eq!(v["file_count"], 2, "{kind}: {v}");
        let warnings = v["warnings"].to_string();
        assert!(
            warnings.contains(kind) && warnings.contains("not used"),
            "{kind}: {warnings}"
        );
        assert!(r.stderr.contains(kind), "{kind}: stderr: {}", r.stderr);
        let mut s = start(&root, &[]);
        s.call("grep", &json!({"pattern": "NEEDLE"}));
        assert!(s.peak_mib() < 200, "{kind}: peak {} MiB", s.peak_mib());
        // The text an agent reads says it too, first.
        let t = run_call(&root, &[], "glob", &json!({"pattern": "*.txt"}));
        assert!(t.stdout.contains("not used"), "{kind}: {}", t.stdout);
    }
    // Under the caps: used.
    let (_t, root) = tempdir();
    write(&root, "hidden.txt", "NEEDLE\n");
    write(&root, "shown.txt", "NEEDLE\n");
    write(
        &root,
        ".gitignore",
        format!("hidden.txt\n*.log\nbuild/\n{}", ignore_lines(500, "u")),
    );
    let r = run_call(&root, &[], "grep", &json!({"pattern": "NEEDLE"}));
    let v: Value = serde_json::from_str(&r.stdout).expect("json");
    assert_eq!(v["file_count"], 1, "{v}");
    assert!(v.get("warnings").is_none(), "{v}");
}

/// Many ignore files, each under the caps, are one budget per call: past it further
/// ones are not used, the result says so, and memory and time stay bounded.
#[test]
fn many_ignore_files_share_one_budget_per_call() {
    // Wildcard patterns (each under the per-file cap), or plain names.
    let wild = ignore_lines(600, "m");
    let names: String = (0..15_000).map(|i| format!("name{i}.tmp\n")).collect();
    for (each, tool) in [
        (&wild, "grep"),
        (&wild, "file_search"),
        (&wild, "glob"),
        (&names, "grep"),
    ] {
        let (_t, root) = tempdir();
        assert!(each.len() < 1 << 20);
        for d in 0..30 {
            write(&root, &format!("d{d:02}/.gitignore"), each);
            write(&root, &format!("d{d:02}/f.txt"), "NEEDLE\n");
        }
        let args = match tool {
            "grep" => json!({"pattern": "NEEDLE"}),
            "file_search" => json!({"query": "NEEDLE"}),
            _ => json!({"pattern": "*.txt"}),
        };
        let r = run_call(&root, &[], tool, &args);
        assert!(r.stdout.contains("in all"), "{tool}: {}", r.stdout);
        let mut s = start(&root, &[]);
        s.call(tool, &args);
        assert!(s.peak_mib() < 200, "{tool}: peak {} MiB", s.peak_mib());
        assert!(r.took < Duration::from_secs(10), "{tool}: {:?}", r.took);
    }
}

/// The request timeout covers reading and compiling ignore files too: a call on a tree
/// of hostile ignore files ends by its deadline (with its answer or TIMEOUT).
#[test]
fn the_timeout_covers_ignore_parsing() {
    let (_t, root) = tempdir();
    let each = ignore_lines(600, "t");
    for d in 0..12 {
        write(&root, &format!("d{d:02}/.gitignore"), &each);
        write(&root, &format!("d{d:02}/e/.ignore"), &each);
        write(&root, &format!("d{d:02}/e/f.txt"), "NEEDLE\n");
    }
    write(&root, ".gitignore", ignore_lines(600, "r"));
    let r = run_call(
        &root,
        &["--set", "request_timeout=1s"],
        "grep",
        &json!({"pattern": "NEEDLE"}),
    );
    assert!(r.took < Duration::from_secs(6), "took {:?}", r.took);
    assert!(
        r.stdout.contains("TIMEOUT") || r.stdout.contains("file_count"),
        "{}",
        r.stdout
    );
    // Either way the agent learns the ignore files passed the call's budget (a TIMEOUT
    // carries the warnings in its hint).
    assert!(r.stdout.contains("in all"), "{}", r.stdout);
}

/// A line longer than a search may hold is not a silent no-match: the file is named in
/// the result as not searched, with the reason, in every mode; other files still answer.
#[test]
fn a_line_too_long_to_hold_is_reported_not_silently_missed() {
    let (_t, root) = tempdir();
    let mut line = vec![b'a'; 65 << 20];
    line.extend_from_slice(b"NEEDLE\n");
    write(&root, "huge.txt", &line);
    write(&root, "small.txt", "NEEDLE\n");
    drop(line);
    for args in [
        json!({"pattern": "NEEDLE"}),
        json!({"pattern": "NEEDLE", "output_mode": "content"}),
        json!({"pattern": "NEEDLE", "output_mode": "count"}),
        json!({"pattern": "NEEDLE", "multiline": true}),
    ] {
        let r = run_call(&root, &[], "grep", &args);
        let v: Value = serde_json::from_str(&r.stdout).expect("json");
        let warnings = v["warnings"].to_string();
        assert!(
            warnings.contains("huge.txt") && warnings.contains("not searched"),
            "{args}: {v}"
        );
        assert_eq!(v["file_count"], 1, "{args}: {v}");
    }
    let r = run_call(&root, &[], "file_search", &json!({"query": "needle"}));
    assert!(r.stdout.contains("huge.txt"), "{}", r.stdout);
    let r = run_call(
        &root,
        &["--set", "max_output_chars=0"],
        "grep",
        &json!({"pattern": "NEEDLE"}),
    );
    assert!(r.stdout.contains("huge.txt"));
}

/// Structured results are held to the output budget as the text is: every search tool
/// asked for everything over a large tree returns at most the budget in JSON, says it
/// was truncated, and keeps its true totals.
#[test]
fn structured_results_are_cut_to_the_output_budget() {
    let (_t, root) = tempdir();
    let long = "n".repeat(80);
    for d in 0..40 {
        for i in 0..100 {
            write(
                &root,
                &format!("dir{d:02}/{long}{i:03}.txt"),
                "NEEDLE one\nNEEDLE two\nNEEDLE three\n",
            );
        }
    }
    let budget = 20_000u64;
    let f = in_process(&root, budget);
    for (tool, args) in [
        ("glob", json!({"pattern": "*.txt", "max_results": 0})),
        ("grep", json!({"pattern": "NEEDLE", "max_results": 0})),
        (
            "grep",
            json!({"pattern": "NEEDLE", "max_results": 0, "output_mode": "count"}),
        ),
        (
            "grep",
            json!({"pattern": "NEEDLE", "max_results": 0, "output_mode": "content"}),
        ),
        (
            "search_files",
            json!({"pattern": "NEEDLE", "max_results": 0}),
        ),
        ("file_search", json!({"query": "NEEDLE"})),
        ("list_directory", json!({"path": "dir00"})),
        ("read_file", json!({"path": format!("dir00/{long}000.txt")})),
    ] {
        let out = call(&f, tool, args.clone()).unwrap_or_else(|e| panic!("{tool}: {e:?}"));
        let size = out.structured.to_string().len() as u64;
        assert!(size <= budget, "{tool} {args}: {size} bytes");
        assert!(
            out.text.len() as u64 <= budget,
            "{tool}: text {}",
            out.text.len()
        );
        if tool == "glob" {
            assert_eq!(out.structured["count"], 4000);
            assert_eq!(out.structured["truncated"], true);
            let files = out.structured["files"].as_array().unwrap();
            assert!(files.len() > 10, "{}", files.len());
            // a prefix of the answer, in order
            let first = files[0].as_str().unwrap();
            assert!(first.starts_with("dir00/"), "{first}");
        }
        if tool == "grep" && args.get("output_mode").is_none() {
            assert_eq!(out.structured["file_count"], 4000);
            assert_eq!(out.structured["truncated"], true);
        }
    }
}

/// Eight hostile ~4 MB requests of different shapes at once on one `ferret serve`
/// session, then a normal grep: each hostile one is refused, the normal one answers,
/// and the server's peak memory stays far below what the unbounded shapes took (3.4 GB
/// for these eight on the release binary before the caps).
#[test]
fn eight_concurrent_hostile_requests_keep_a_server_small_and_serving() {
    let (_t, root) = tempdir();
    small_tree(&root);
    let mut server = start(&root, &[]);
    let big = "x".repeat(4 << 20);
    let braces = format!(
        "*.{{{}}}",
        (0..300_000)
            .map(|i| format!("e{i}"))
            .collect::<Vec<_>>()
            .join(",")
    );
    let alternation = (0..450_000)
        .map(|i| format!("w{i}"))
        .collect::<Vec<_>>()
        .join("|");
    let globs: Vec<String> = (0..400_000).map(|i| format!("!d{i}/**")).collect();
    let hostile = [
        ("glob", json!({"pattern": braces})),
        (
            "grep",
            json!({"pattern": "y".repeat(3 << 20), "fixed_strings": true}),
        ),
        ("grep", json!({"pattern": alternation})),
        (
            "grep",
            json!({"pattern": format!("(a{{1000}}){{1000}}{}", " ".repeat(4 << 20))}),
        ),
        ("grep", json!({"pattern": "fn", "glob": globs})),
        ("grep", json!({"pattern": "fn", "glob": braces})),
        ("file_search", json!({"query": big})),
        ("search_files", json!({"pattern": big})),
    ];
    for (i, (tool, args)) in hostile.iter().enumerate() {
        server.ask(i as u64 + 1, tool, args);
    }
    let asked = Instant::now();
    server.ask(100, "grep", &json!({"pattern": "NEEDLE"}));
    let mut answers = std::collections::HashMap::new();
    let mut normal_after = None;
    while answers.len() < hostile.len() + 1 {
        let v = server.recv();
        let Some(id) = v["id"].as_u64() else { continue };
        if id == 100 {
            normal_after = Some(asked.elapsed());
        }
        answers.insert(id, v);
    }
    let peak_mib = server.peak_mib();
    for (i, (tool, _)) in hostile.iter().enumerate() {
        // 400 000 globs are over the framing's cap on JSON values: refused unparsed.
        if answers[&(i as u64 + 1)]["error"]["data"]["code"] == "REQUEST_TOO_LARGE" {
            continue;
        }
        let r = &answers[&(i as u64 + 1)]["result"];
        assert_eq!(r["isError"], true, "{tool}");
        let said = r["content"][0]["text"].as_str().unwrap_or_default();
        assert!(
            ["INVALID_ARGUMENT", "INVALID_REGEX", "INVALID_GLOB"]
                .iter()
                .any(|c| said.contains(c)),
            "{tool}: {}",
            &said[..said.len().min(300)]
        );
    }
    let normal = &answers[&100]["result"];
    assert_eq!(normal["structuredContent"]["file_count"], 2, "{normal}");
    assert!(
        normal_after.is_some_and(|d| d < Duration::from_secs(30)),
        "{normal_after:?}"
    );
    assert!(peak_mib < 600, "peak {peak_mib} MiB");
}

/// Long lines are held from one pool all searches share (256 MiB): eight concurrent
/// searches of files made of one 40 MB line each all answer, and the server stays under
/// 400 MiB (measured: 186 MiB). On a two-core machine these searches are too quick to
/// overlap much, so this test does not fail with the pool removed: it checks that the
/// pool lets every search through, not that it is what bounds them.
#[test]
fn concurrent_searches_of_long_lines_share_one_pool() {
    let (_t, root) = tempdir();
    let mut line = vec![b'a'; 40 << 20];
    line.extend_from_slice(b"NEEDLE\n");
    for i in 0..8 {
        write(&root, &format!("f{i}.txt"), &line);
    }
    drop(line);
    let mut server = start(&root, &["--set", "request_timeout=60s"]);
    for i in 0..8u64 {
        server.ask(
            i + 1,
            "grep",
            &json!({"pattern": "NEEDLE", "path": format!("f{i}.txt")}),
        );
    }
    let mut answered = 0;
    while answered < 8 {
        let v = server.recv();
        if v["id"].as_u64().is_some_and(|id| (1..=8).contains(&id)) {
            assert_eq!(v["result"]["structuredContent"]["file_count"], 1, "{v}");
            answered += 1;
        }
    }
    let peak = server.peak_mib();
    assert!(peak < 400, "peak {peak} MiB");
}

/// A call stopped by its deadline still carries the warnings met before it: the agent
/// learns an ignore file was not used even when the answer is TIMEOUT.
#[test]
fn a_timeout_carries_the_warnings_met_before_it() {
    let (_t, root) = tempdir();
    write(&root, ".gitignore", "x".repeat((1 << 20) + 1));
    let line = "lorem ipsum dolor sit amet consectetur adipiscing elit\n".repeat(4000);
    for i in 0..400 {
        write(&root, &format!("d{}/f{i}.txt", i % 20), &line);
    }
    let mut c = Config::defaults(Mode::Cli);
    c.roots = vec![root.clone()];
    c.request_timeout = Duration::from_millis(30);
    let f = Ferret::new(c).expect("open workspace");
    let e = call(
        &f,
        "grep",
        json!({"pattern": "\\w{3,}\\s+\\w{3,}\\s+\\d+", "output_mode": "count"}),
    )
    .expect_err("times out");
    assert_eq!(e.code, ErrorCode::Timeout, "{e:?}");
    let hint = e.hint.unwrap_or_default();
    assert!(
        hint.contains(".gitignore") && hint.contains("not used"),
        "{hint}"
    );
}

/// The attacker pass: `edit` with replace_all built the whole new content before any limit
/// was checked (a 1 MB file of one letter, each replaced by 8 KiB: 3+ GB, dry run or
/// not), and a 100-byte replacement wrote a 99 MB file past `max_edit_file_size`. Now the
/// size is known from the count before anything is built: every shape is refused small,
/// for edit and for a patch's replace-all hunk, and nothing changes.
#[test]
fn a_replace_all_that_would_grow_past_the_edit_limit_is_refused_small() {
    let (_t, root) = tempdir();
    let one_letter = "e".repeat(99) + "\n";
    std::fs::write(root.join("e.txt"), one_letter.repeat(10_000)).unwrap();
    std::fs::write(root.join("f.txt"), "ab\n".repeat(50_000)).unwrap();
    let before = std::fs::read(root.join("f.txt")).unwrap();
    let big = "E".repeat(8192);
    let shapes = [
        // a million places
        (
            "edit",
            json!({"path": "e.txt", "old_string": "e", "new_string": big, "replace_all": true, "dry_run": true}),
            "INVALID_ARGUMENT",
        ),
        (
            "edit",
            json!({"path": "e.txt", "old_string": "e", "new_string": "x".repeat(100), "replace_all": true}),
            "INVALID_ARGUMENT",
        ),
        // under the place cap, over the size limit
        (
            "edit",
            json!({"path": "f.txt", "old_string": "a", "new_string": big, "replace_all": true}),
            "FILE_TOO_LARGE",
        ),
        (
            "edit",
            json!({"path": "f.txt", "old_string": "a", "new_string": "y".repeat(1400), "replace_all": true, "dry_run": true}),
            "FILE_TOO_LARGE",
        ),
        (
            "apply_patch",
            json!({"patch": format!("*** Begin Patch\n*** Update File: f.txt\n@@\n-ab\n+{}\n*** End Patch\n", "z".repeat(400))}),
            "NOT_UNIQUE",
        ),
    ];
    for (tool, args, want) in shapes {
        let mut s = serving(&root, &["--allow-write"], "edit,apply_patch");
        let r = s.call(tool, &args);
        let text = said(&r);
        assert!(
            r["isError"] == true && text.contains(want),
            "{tool} {want}: {}",
            &text[..text.len().min(400)]
        );
        assert!(s.peak_mib() < 150, "{tool}: peak {} MiB", s.peak_mib());
    }
    assert_eq!(std::fs::read(root.join("f.txt")).unwrap(), before);
    assert_eq!(std::fs::read(root.join("e.txt")).unwrap().len(), 1_000_000);
}

/// The attacker pass: an ignore file under every cap of bytes, lines and wildcard lines
/// (999 lines of ~509 `*` each, 1 MB) took 570 MB per call, since what a line compiles
/// to grows with its wildcards. Wildcards are what is weighed now: a line of too many, or
/// a file of too many in all, is not used, with the warning, and the process stays small.
#[test]
fn ignore_files_are_weighed_by_their_wildcards() {
    let stars = |n: usize, i: usize| format!("**/a{i}{}\n", "*b".repeat(n));
    let shapes = [
        (
            "509 stars a line",
            (0..999).map(|i| stars(509, i)).collect::<String>(),
        ),
        ("one line of 40", format!("hidden.txt\n{}", stars(40, 0))),
        (
            "999 lines of 30",
            (0..999).map(|i| stars(30, i)).collect::<String>(),
        ),
    ];
    for (what, content) in shapes {
        assert!(content.len() < 1 << 20, "{what}");
        for kind in [".ignore", ".gitignore"] {
            let (_t, root) = tempdir();
            write(&root, "hidden.txt", "NEEDLE\n");
            write(&root, "shown.txt", "NEEDLE\n");
            write(&root, kind, format!("hidden.txt\n{content}").as_bytes());
            let r = run_call(&root, &[], "grep", &json!({"pattern": "NEEDLE"}));
            let v: Value = serde_json::from_str(&r.stdout).expect("json");
            assert_eq!(v["file_count"], 2, "{what} {kind}: {v}");
            assert!(
                v["warnings"].to_string().contains("not used"),
                "{what} {kind}: {v}"
            );
            let mut s = start(&root, &[]);
            s.call("grep", &json!({"pattern": "NEEDLE"}));
            assert!(
                s.peak_mib() < 100,
                "{what} {kind}: peak {} MiB",
                s.peak_mib()
            );
        }
    }
    // An ordinary file of wildcard lines is used.
    let (_t, root) = tempdir();
    write(&root, "hidden.txt", "NEEDLE\n");
    write(&root, "shown.txt", "NEEDLE\n");
    let ordinary: String = (0..600).map(|i| format!("build{i}/**/*.o\n")).collect();
    write(
        &root,
        ".gitignore",
        format!("hidden.txt\n{ordinary}").as_bytes(),
    );
    let r = run_call(&root, &[], "grep", &json!({"pattern": "NEEDLE"}));
    let v: Value = serde_json::from_str(&r.stdout).expect("json");
    assert_eq!(v["file_count"], 1, "{v}");
}

//! Search tools on real trees: seed formats, the sandbox's rules in walks, determinism.

use ferret::config::{Config, Mode};
use ferret::control::{CancelToken, Progress};
use ferret::{CallOptions, ErrorCode, Ferret, Session};
use serde_json::{Value, json};
use std::os::unix::fs::symlink;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn ferret(roots: &[&Path]) -> Ferret {
    let mut c = Config::defaults(Mode::Cli);
    c.roots = roots.iter().map(|r| r.to_path_buf()).collect();
    Ferret::new(c).unwrap()
}

use crate::util::write;

fn call(f: &Ferret, tool: &str, args: Value) -> Result<(Value, String), ErrorCode> {
    f.call(
        &Session::new("t", "test"),
        tool,
        args,
        CallOptions::default(),
    )
    .map(|o| (o.structured, o.text))
    .map_err(|e| e.code)
}

fn paths(v: &Value) -> Vec<String> {
    v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.get("path").unwrap_or(f).as_str().unwrap().to_string())
        .collect()
}

/// A vault like seed 001's (notes, a protected folder) and a project like seed 002's.
fn fixture() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    write(
        r,
        "Projects/alpha.md",
        "# Alpha\n\nStatus: draft\nOwner: ana\nDeadline: friday\nnotes\n",
    );
    write(r, "Projects/beta.md", "# Beta\nDeadline: monday\n");
    write(
        r,
        "journal/2026-01-01.md",
        "one\ntwo\nthree\nfour\nDeadline: none\n",
    );
    write(r, ".obsidian/workspace.json", "{\"Deadline\": 1}\n");
    write(
        r,
        "README.md",
        "# Demo\n\nSetup:\n  // TODO: Add setup instructions\n",
    );
    write(
        r,
        "internal/config/config.go",
        "package config\n\n// TODO(refactor): Move this to a separate package\n",
    );
    write(
        r,
        "design/roadmap.md",
        "# Roadmap\n\n- [ ] todo: Implement file_search tool\n",
    );
    t
}

#[test]
fn search_files_reproduces_seed_001_format() {
    let t = fixture();
    let f = ferret(&[t.path()]);
    let (_, text) = call(
        &f,
        "search_files",
        json!({"pattern": "Deadline: \\w+day", "file_pattern": "Projects/**"}),
    )
    .unwrap();
    insta::assert_snapshot!(text, @r"
    Found 2 matching files:

    ## Projects/alpha.md
    Line 3:   Status: draft
    Line 4:   Owner: ana
    Line 5: > Deadline: friday
    Line 6:   notes

    ## Projects/beta.md
    Line 1:   # Beta
    Line 2: > Deadline: monday
    ");
    // protected folders (hidden, and deny_extra when configured) never appear
    let (v, text) = call(
        &f,
        "search_files",
        json!({"pattern": "Deadline", "context_lines": 0, "max_results": 2}),
    )
    .unwrap();
    assert!(!text.contains(".obsidian"), "{text}");
    // the header gives the true total (3), then what is shown
    insta::assert_snapshot!(text, @r"
    Found 3 matching files:

    ## Projects/alpha.md
    Line 5: > Deadline: friday

    ## Projects/beta.md
    Line 2: > Deadline: monday

    (Showing the first 2 of 3 matching files; raise max_results to see more.)
    ");
    assert_eq!(v["file_count"], 3);
    assert_eq!(
        call(&f, "search_files", json!({"pattern": "Dead(line"})).unwrap_err(),
        ErrorCode::InvalidRegex
    );
}

#[test]
fn file_search_reproduces_seed_002_format() {
    let t = fixture();
    let f = ferret(&[t.path()]);
    let (_, text) = call(&f, "file_search", json!({"query": "TODO"})).unwrap();
    insta::assert_snapshot!(text, @r#"
    Found 3 matches for "TODO":

    - `README.md:4`: // TODO: Add setup instructions
    - `design/roadmap.md:3`: - [ ] todo: Implement file_search tool
    - `internal/config/config.go:3`: // TODO(refactor): Move this to a separate package
    "#);
    // case-sensitive on request, include filter, a path
    let (_, text) = call(
        &f,
        "file_search",
        json!({"query": "TODO", "ignore_case": false, "include": "*.md"}),
    )
    .unwrap();
    insta::assert_snapshot!(text, @r#"
    Found 1 matches for "TODO":

    - `README.md:4`: // TODO: Add setup instructions
    "#);
    let (_, text) = call(&f, "file_search", json!({"query": "nowhere to be found"})).unwrap();
    assert_eq!(text, "No matches found for \"nowhere to be found\".");
    // substring, not regex
    let (v, _) = call(&f, "file_search", json!({"query": "TODO("})).unwrap();
    assert_eq!(v["matches"].as_array().unwrap().len(), 1);
}

#[test]
fn file_search_stops_at_50_matches() {
    let t = tempfile::tempdir().unwrap();
    for i in 0..30 {
        write(t.path(), &format!("f{i:02}.txt"), "needle\nneedle\n");
    }
    let f = ferret(&[t.path()]);
    let (v, text) = call(&f, "file_search", json!({"query": "needle"})).unwrap();
    assert_eq!(v["matches"].as_array().unwrap().len(), 50);
    assert_eq!(v["truncated"], true);
    assert!(text.starts_with("Found 50 matches for \"needle\":"));
    assert!(text.contains("Stopped at 50 matches"));
    // the first 50 in path order, whatever the threads did
    assert_eq!(v["matches"][49]["path"], "f24.txt");
    assert_eq!(v["matches"][49]["line"], 2);
}

#[test]
fn hostile_tree_returns_promptly_and_reports_nothing_it_should_not() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    write(r, "ok.txt", "NEEDLE here\n");
    write(r, "bin.dat", b"NEEDLE\0\x01\x02binary");
    write(r, "ignored/hit.txt", "NEEDLE ignored\n");
    write(r, ".gitignore", "ignored/\n");
    write(r, ".env", "NEEDLE=secret\n");
    write(r, "sub/.env.local", "NEEDLE=secret\n");
    let outside = tempfile::tempdir().unwrap();
    write(outside.path(), "secret.txt", "NEEDLE outside\n");
    symlink(outside.path(), r.join("out")).unwrap();
    symlink("loop_b", r.join("loop_a")).unwrap();
    symlink("loop_a", r.join("loop_b")).unwrap();
    symlink(".", r.join("self")).unwrap();
    assert!(
        std::process::Command::new("mkfifo")
            .arg(r.join("fifo"))
            .status()
            .unwrap()
            .success()
    );
    let f = ferret(&[r]);
    let started = Instant::now();
    for mode in ["files_with_matches", "content", "count"] {
        for hidden in [false, true] {
            let (v, text) = call(
                &f,
                "grep",
                json!({"pattern": "NEEDLE", "output_mode": mode, "include_hidden": hidden}),
            )
            .unwrap();
            assert_eq!(paths(&v), vec!["ok.txt"], "{mode} hidden={hidden}: {text}");
            assert_eq!(v["file_count"], 1);
        }
    }
    let (v, _) = call(&f, "glob", json!({"pattern": "*", "include_hidden": true})).unwrap();
    let files = paths(&v);
    assert!(
        !files.iter().any(|p| p.contains("env")
            || p.contains("secret")
            || p.contains("fifo")
            || p.contains("loop")),
        "{files:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
}

/// One small tree for the grep cases: two Rust files, a text file, and a skipped
/// `node_modules`.
fn grep_fixture() -> (tempfile::TempDir, Ferret) {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    write(r, "a.rs", "fn a() {}\n// hit 1\nx\ny\nz\n// hit 2\n");
    write(r, "b/c.rs", "hit\n");
    write(r, "b/d.txt", "HIT\n");
    write(r, "node_modules/m.js", "hit\n");
    let f = ferret(&[r]);
    (t, f)
}

#[test]
fn grep_defaults_to_paths_of_files_with_matches() {
    let (_t, f) = grep_fixture();
    let (v, text) = call(&f, "grep", json!({"pattern": "hit"})).unwrap();
    assert_eq!(
        v,
        json!({"files": [{"path": "a.rs"}, {"path": "b/c.rs"}], "file_count": 2, "truncated": false, "engine": "scan"})
    );
    assert_eq!(text, "a.rs\nb/c.rs\n");
}

#[test]
fn grep_count_mode_counts_matching_lines() {
    let (_t, f) = grep_fixture();
    let (v, text) = call(
        &f,
        "grep",
        json!({"pattern": "hit", "output_mode": "count", "ignore_case": true}),
    )
    .unwrap();
    assert_eq!(v["match_count"], 4);
    assert_eq!(text, "a.rs:2\nb/c.rs:1\nb/d.txt:1\n");
}

#[test]
fn grep_content_mode_shows_context_and_separators() {
    let (_t, f) = grep_fixture();
    let (v, text) = call(
        &f,
        "grep",
        json!({"pattern": "hit", "output_mode": "content", "context": 1, "glob": "*.rs"}),
    )
    .unwrap();
    assert_eq!(
        text,
        "a.rs-1-fn a() {}\na.rs:2:// hit 1\na.rs-3-x\n--\na.rs-5-z\na.rs:6:// hit 2\n--\nb/c.rs:1:hit\n"
    );
    assert_eq!(
        v["files"][0]["lines"][1],
        json!({"line": 2, "text": "// hit 1", "match": true})
    );
    assert_eq!(v["match_count"], 3);
}

#[test]
fn grep_pages_with_true_totals() {
    let (_t, f) = grep_fixture();
    // paging through content lines: true totals, truncated until the end
    let (v, text) = call(
        &f,
        "grep",
        json!({"pattern": "hit", "output_mode": "content", "max_results": 2}),
    )
    .unwrap();
    assert_eq!(v["truncated"], true);
    assert!(text.ends_with("pass offset 2 for more]\n"), "{text}");
    let (v, _) = call(
        &f,
        "grep",
        json!({"pattern": "hit", "output_mode": "content", "max_results": 2, "offset": 2}),
    )
    .unwrap();
    assert_eq!(
        v["files"],
        json!([{"path": "b/c.rs", "lines": [{"line": 1, "text": "hit", "match": true}]}])
    );
    assert_eq!(v["truncated"], false);
    let (v, _) = call(&f, "grep", json!({"pattern": "hit", "max_results": 1})).unwrap();
    assert_eq!(
        (v["file_count"].clone(), v["truncated"].clone()),
        (json!(2), json!(true))
    );
}

#[test]
fn grep_globs_literals_multiline_and_named_skipped_dirs() {
    let (_t, f) = grep_fixture();
    // glob exclusion, fixed strings, multiline, a named skipped directory
    let (v, _) = call(&f, "grep", json!({"pattern": "hit", "glob": ["!b/**"]})).unwrap();
    assert_eq!(paths(&v), vec!["a.rs"]);
    let (v, _) = call(&f, "grep", json!({"pattern": "a()", "fixed_strings": true})).unwrap();
    assert_eq!(paths(&v), vec!["a.rs"]);
    let (v, _) = call(
        &f,
        "grep",
        json!({"pattern": "hit 1.*hit 2", "multiline": true, "output_mode": "count"}),
    )
    .unwrap();
    assert_eq!(v["files"], json!([{"path": "a.rs", "count": 1}]));
    let (v, _) = call(
        &f,
        "grep",
        json!({"pattern": "hit", "path": "node_modules"}),
    )
    .unwrap();
    assert_eq!(paths(&v), vec!["node_modules/m.js"]);
    let (v, _) = call(&f, "grep", json!({"pattern": "hit", "path": "b/c.rs"})).unwrap();
    assert_eq!(paths(&v), vec!["b/c.rs"]);
}

#[test]
fn grep_errors_have_their_codes() {
    let (_t, f) = grep_fixture();
    // errors
    assert_eq!(
        call(&f, "grep", json!({"pattern": "a(b"})).unwrap_err(),
        ErrorCode::InvalidRegex
    );
    assert_eq!(
        call(&f, "grep", json!({"pattern": "x", "glob": "a[b"})).unwrap_err(),
        ErrorCode::InvalidGlob
    );
    assert_eq!(
        call(&f, "grep", json!({"pattern": "x", "path": "nope"})).unwrap_err(),
        ErrorCode::NotFound
    );
    assert_eq!(
        call(&f, "grep", json!({"pattern": "x", "path": "../"})).unwrap_err(),
        ErrorCode::PathTraversal
    );
    assert_eq!(
        call(&f, "grep", json!({"pattern": ""})).unwrap_err(),
        ErrorCode::InvalidArgument
    );
    let e = f
        .call(
            &Session::new("t", "t"),
            "grep",
            json!({"pattern": "a(b"}),
            CallOptions::default(),
        )
        .unwrap_err();
    assert!(e.hint.unwrap().contains("fixed_strings"));
}

#[test]
fn minified_lines_are_cut() {
    let t = tempfile::tempdir().unwrap();
    let line = format!("{}NEEDLE{}\n", "x".repeat(50_000), "y".repeat(50_000));
    write(t.path(), "app.min.js", &line);
    let f = ferret(&[t.path()]);
    let (v, _) = call(
        &f,
        "grep",
        json!({"pattern": "NEEDLE", "output_mode": "content"}),
    )
    .unwrap();
    let text = v["files"][0]["lines"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("NEEDLE") && text.len() < 600,
        "{}",
        text.len()
    );
    assert!(
        text.starts_with("[line of 100006 bytes, bytes 49901-50300 shown] …"),
        "the marker gives the whole length and the part shown: {}",
        &text[..80]
    );
    // max_columns sets the width
    let mut c = Config::defaults(Mode::Cli);
    c.roots = vec![t.path().to_path_buf()];
    c.max_columns = 100;
    let f = Ferret::new(c).unwrap();
    let (v, _) = call(
        &f,
        "grep",
        json!({"pattern": "NEEDLE", "output_mode": "content"}),
    )
    .unwrap();
    let text = v["files"][0]["lines"][0]["text"].as_str().unwrap();
    assert!(text.contains("NEEDLE") && text.len() < 180, "{text}");
}

#[test]
fn results_are_identical_across_runs() {
    let t = tempfile::tempdir().unwrap();
    for d in 0..15 {
        for i in 0..20 {
            let body: String = (0..10)
                .map(|l| {
                    if (l + i + d) % 3 == 0 {
                        format!("match {l}\n")
                    } else {
                        format!("line {l}\n")
                    }
                })
                .collect();
            write(t.path(), &format!("d{d}/sub{}/f{i}.txt", i % 4), body);
        }
    }
    let f = ferret(&[t.path()]);
    for args in [
        json!({"pattern": "match", "output_mode": "content", "context": 1, "max_results": 150}),
        json!({"pattern": "match", "output_mode": "count", "max_results": 37}),
        json!({"pattern": "match", "max_results": 55, "offset": 20}),
    ] {
        let first = call(&f, "grep", args.clone()).unwrap();
        assert_eq!(first.0["truncated"], true);
        for _ in 0..20 {
            assert_eq!(call(&f, "grep", args.clone()).unwrap(), first);
        }
    }
    let g = call(&f, "glob", json!({"pattern": "*.txt", "max_results": 33})).unwrap();
    for _ in 0..20 {
        assert_eq!(
            call(&f, "glob", json!({"pattern": "*.txt", "max_results": 33})).unwrap(),
            g
        );
    }
}

#[test]
fn glob_semantics() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    for p in [
        "a.c",
        "src/b.c",
        "src/deep/c.c",
        "src/lib.rs",
        "src/x.h",
        "test_a.py",
        "test_c.py",
        ".hidden/h.c",
        "node_modules/n.c",
        "target/t.c",
        "gen/out.c",
        ".env",
        "keys/server.pem",
    ] {
        write(r, p, "x");
    }
    write(r, ".gitignore", "gen/\n");
    let f = ferret(&[r]);
    let g = |args: Value| paths(&call(&f, "glob", args).unwrap().0);
    assert_eq!(
        g(json!({"pattern": "*.c"})),
        vec!["a.c", "src/b.c", "src/deep/c.c"]
    );
    assert_eq!(g(json!({"pattern": "src/*.c"})), vec!["src/b.c"]);
    assert_eq!(
        g(json!({"pattern": "src/**/*.c"})),
        vec!["src/b.c", "src/deep/c.c"]
    );
    assert_eq!(
        g(json!({"pattern": "*.{rs,h}"})),
        vec!["src/lib.rs", "src/x.h"]
    );
    assert_eq!(g(json!({"pattern": "test_[ab].py"})), vec!["test_a.py"]);
    assert_eq!(
        g(json!({"pattern": "*.c", "path": "src"})),
        vec!["src/b.c", "src/deep/c.c"]
    );
    assert_eq!(
        g(json!({"pattern": "deep/*.c", "path": "src"})),
        vec!["src/deep/c.c"]
    );
    assert_eq!(
        g(json!({"pattern": "*.c", "include_hidden": true})),
        vec![".hidden/h.c", "a.c", "src/b.c", "src/deep/c.c"]
    );
    assert!(
        g(json!({"pattern": "*", "include_hidden": true}))
            .iter()
            .all(|p| !p.contains(".env") && !p.contains(".pem"))
    );
    let (v, text) = call(&f, "glob", json!({"pattern": "*.c", "max_results": 2})).unwrap();
    assert_eq!(
        (v["count"].clone(), v["truncated"].clone()),
        (json!(3), json!(true))
    );
    assert!(text.contains("2 of 3 files"));
    // newest first
    let old = std::time::SystemTime::now() - Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(r.join("a.c"))
        .unwrap()
        .set_modified(old)
        .unwrap();
    assert_eq!(g(json!({"pattern": "*.c", "sort": "modified"}))[2], "a.c");
    assert_eq!(
        call(&f, "glob", json!({"pattern": "[z"})).unwrap_err(),
        ErrorCode::InvalidGlob
    );
    assert_eq!(
        call(&f, "glob", json!({"pattern": "/etc/*"})).unwrap_err(),
        ErrorCode::InvalidGlob
    );
}

#[test]
fn walks_never_follow_links_out_of_the_root() {
    let outside = tempfile::tempdir().unwrap();
    write(outside.path(), "secret.txt", "NEEDLE\n");
    let t = tempfile::tempdir().unwrap();
    write(t.path(), "in.txt", "NEEDLE\n");
    symlink(outside.path(), t.path().join("out")).unwrap();
    symlink(outside.path().join("secret.txt"), t.path().join("s.txt")).unwrap();
    let f = ferret(&[t.path()]);
    let (v, _) = call(
        &f,
        "grep",
        json!({"pattern": "NEEDLE", "include_hidden": true}),
    )
    .unwrap();
    assert_eq!(paths(&v), vec!["in.txt"]);
    assert_eq!(
        call(&f, "grep", json!({"pattern": "NEEDLE", "path": "out"})).unwrap_err(),
        ErrorCode::PathEscape
    );
    let (v, _) = call(&f, "glob", json!({"pattern": "*.txt"})).unwrap();
    assert_eq!(paths(&v), vec!["in.txt"]);
}

#[test]
fn several_roots_are_all_searched() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    write(a.path(), "x.txt", "NEEDLE\n");
    write(b.path(), "y.txt", "NEEDLE\n");
    let f = ferret(&[a.path(), b.path()]);
    let (v, _) = call(&f, "grep", json!({"pattern": "NEEDLE"})).unwrap();
    let names: Vec<String> = [a.path(), b.path()]
        .iter()
        .map(|p| {
            p.canonicalize()
                .unwrap()
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(
        paths(&v),
        vec![format!("{}/x.txt", names[0]), format!("{}/y.txt", names[1])]
    );
}

#[test]
fn cancellation_and_progress() {
    let t = tempfile::tempdir().unwrap();
    for i in 0..3000 {
        write(t.path(), &format!("d{}/f{i}.txt", i % 10), "some text\n");
    }
    let f = ferret(&[t.path()]);
    let s = Session::new("t", "t");
    let cancel = CancelToken::new();
    cancel.cancel();
    let e = f
        .call(
            &s,
            "grep",
            json!({"pattern": "text"}),
            CallOptions {
                cancel,
                ..CallOptions::default()
            },
        )
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Cancelled);
    let seen: Arc<Mutex<Vec<Progress>>> = Arc::default();
    let sink = seen.clone();
    let opts = CallOptions {
        progress: Some(Arc::new(move |p| sink.lock().unwrap().push(p))),
        ..CallOptions::default()
    };
    let out = f
        .call(
            &s,
            "grep",
            json!({"pattern": "text", "output_mode": "count"}),
            opts,
        )
        .unwrap();
    assert_eq!(out.structured["file_count"], 3000);
    let seen = seen.lock().unwrap();
    assert!(
        seen.len() >= 2,
        "progress was reported {} times",
        seen.len()
    );
    assert!(
        seen.iter()
            .all(|p| p.files_searched > 0 && p.files_searched <= 3000)
    );
}

#[test]
fn cli_grep_and_glob_behave_like_rg_and_fd() {
    let t = fixture();
    let bin = assert_cmd::cargo::cargo_bin("ferret");
    let run = |args: &[&str]| {
        std::process::Command::new(&bin)
            .arg("--root")
            .arg(t.path())
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&["grep", "Deadline", "-g", "Projects/**"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "Projects/alpha.md:5:Deadline: friday\nProjects/beta.md:2:Deadline: monday\n"
    );
    let out = run(&["grep", "-l", "-i", "todo"]);
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "README.md\ndesign/roadmap.md\ninternal/config/config.go\n"
    );
    assert_eq!(run(&["grep", "absent-text"]).status.code(), Some(1));
    assert_eq!(run(&["grep", "a(b"]).status.code(), Some(2));
    let out = run(&["glob", "*.go"]);
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "internal/config/config.go\n"
    );
    assert_eq!(run(&["glob", "*.nothing"]).status.code(), Some(1));
}

// --- search_files: honest outputs (issue 10) ---------------------------------------------

#[test]
fn search_files_header_gives_the_true_total() {
    let (_t, r) = crate::util::tempdir();
    for i in 0..4 {
        write(&r, &format!("f{i}.md"), "needle\n");
    }
    let f = ferret(&[&r]);
    let (v, text) = call(
        &f,
        "search_files",
        json!({"pattern": "needle", "max_results": 1}),
    )
    .unwrap();
    assert_eq!(v["file_count"], 4);
    assert!(text.starts_with("Found 4 matching files:\n"), "{text}");
    assert!(text.contains("Showing the first 1 of 4"), "{text}");
}

#[test]
fn search_files_says_what_it_cut_in_a_file() {
    let (_t, r) = crate::util::tempdir();
    write(&r, "many.md", "needle\n".repeat(300));
    let f = ferret(&[&r]);
    let (v, text) = call(&f, "search_files", json!({"pattern": "needle"})).unwrap();
    let shown = v["files"][0]["lines"].as_array().unwrap().len() as u64;
    assert!(shown <= 100, "{shown} lines from one file");
    assert_eq!(v["files"][0]["more_matches"], json!(300 - shown));
    assert!(
        text.contains(&format!(
            "{} more matching lines in this file not shown",
            300 - shown
        )),
        "{text}"
    );
}

#[test]
fn search_files_invalid_regex_names_the_users_pattern_with_a_fitting_hint() {
    let (_t, r) = crate::util::tempdir();
    let f = ferret(&[&r]);
    let err = f
        .call(
            &Session::new("t", "test"),
            "search_files",
            json!({"pattern": "(unclosed"}),
            CallOptions::default(),
        )
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidRegex);
    assert!(err.message.contains("\"(unclosed\""), "{}", err.message);
    assert!(!err.message.contains("(?:"), "{}", err.message);
    let hint = err.hint.unwrap_or_default();
    assert!(!hint.contains("fixed_strings"), "{hint}");
    assert!(hint.contains("\\("), "{hint}");
}

// --- issue 11: outputs that fit a context window -----------------------------------------

/// A ferret on `root` with the server's defaults (max_output_chars 80 000) or `budget`.
fn budgeted(root: &std::path::Path, budget: Option<u64>) -> ferret::Ferret {
    let mut c = ferret::config::Config::defaults(ferret::config::Mode::Server);
    c.roots = vec![root.to_path_buf()];
    c.max_bytes_per_round = 0;
    if let Some(b) = budget {
        c.max_output_chars = b;
    }
    ferret::Ferret::new(c).unwrap()
}

fn call_text(
    f: &ferret::Ferret,
    tool: &str,
    args: serde_json::Value,
) -> (String, serde_json::Value) {
    let out = f
        .call(
            &ferret::Session::new("t", "test"),
            tool,
            args,
            ferret::CallOptions::default(),
        )
        .unwrap();
    (out.text, out.structured)
}

#[test]
fn a_grep_for_a_common_word_fits_the_output_budget_and_says_what_it_left_out() {
    let (_t, root) = crate::util::tempdir();
    for i in 0..300 {
        let body: String = (0..50)
            .map(|j| format!("    return value_{i}_{j}; // some padding text here\n"))
            .collect();
        crate::util::write(&root, &format!("src/f{i:03}.c"), body);
    }
    let f = budgeted(&root, None);
    let (text, v) = call_text(
        &f,
        "grep",
        serde_json::json!({"pattern": "return", "output_mode": "content", "max_results": 0}),
    );
    assert!(text.len() <= 80_000, "text is {} characters", text.len());
    assert!(
        v.to_string().len() <= 80_000,
        "structured is {}",
        v.to_string().len()
    );
    assert_eq!(v["match_count"], 15_000, "the true total is still counted");
    let shown: u64 = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["lines"].as_array().unwrap().len() as u64)
        .sum();
    assert_eq!(v["left_out"]["matching_lines"], 15_000 - shown);
    assert!(v["left_out"]["files"].as_u64().unwrap() > 0);
    assert!(
        text.contains("matching lines and") && text.contains("Pass offset"),
        "{}",
        &text[text.len() - 400..]
    );
    // whole lines only
    for line in text.lines().filter(|l| l.starts_with("src/")) {
        assert!(line.ends_with("padding text here"), "{line}");
    }
    // the human CLI has no budget: everything
    let out = crate::util::bin()
        .current_dir(&root)
        .args(["grep", "-c", "return"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 300);
}

#[test]
fn a_big_read_steps_down_to_whole_lines_and_says_where_to_go_on() {
    let (_t, root) = crate::util::tempdir();
    let body: String = (1..=2000)
        .map(|i| format!("line {i} of a long file\n"))
        .collect();
    crate::util::write(&root, "big.txt", &body);
    crate::util::write(&root, "minified.js", "x".repeat(20_000));
    let f = budgeted(&root, Some(10_000));
    let (text, v) = call_text(&f, "read_file", serde_json::json!({"path": "big.txt"}));
    assert!(text.len() <= 10_000, "{}", text.len());
    assert_eq!(v["truncated"], true);
    assert_eq!(v["total_lines"], 2000);
    let got = v["content"].as_str().unwrap();
    assert!(got.ends_with(" of a long file\n"), "whole lines");
    let n = got.lines().count();
    assert!(
        text.contains(&format!("continue with offset {}", n + 1)),
        "{}",
        &text[text.len() - 200..]
    );
    assert_eq!(
        v["version"],
        ferret::history::version_of(body.as_bytes()),
        "the version is the whole file's"
    );

    let err = f
        .call(
            &ferret::Session::new("t", "test"),
            "read_file",
            serde_json::json!({"path": "minified.js"}),
            ferret::CallOptions::default(),
        )
        .unwrap_err();
    assert_eq!(err.code, ferret::ErrorCode::FileTooLarge);
    assert!(err.hint.unwrap().contains("grep"));

    // read_files shares one budget: what does not fit is named, not dropped in silence
    for i in 0..10 {
        crate::util::write(&root, &format!("part{i}.txt"), "y\n".repeat(1500));
    }
    let (text, v) = call_text(
        &f,
        "read_files",
        serde_json::json!({"paths": ["part*.txt"], "max_lines_each": 0}),
    );
    assert!(text.len() <= 10_000, "{}", text.len());
    assert!(!v["left_out"].as_array().unwrap().is_empty());
    assert!(text.contains("not read, to keep within the output budget"));
}

#[test]
fn any_tool_over_the_budget_is_cut_at_a_line_with_a_marker() {
    let (_t, root) = crate::util::tempdir();
    for i in 0..200 {
        crate::util::write(
            &root,
            &format!("dir{i:03}/file_with_a_long_name_{i:03}.txt"),
            "x",
        );
    }
    let f = budgeted(&root, Some(2_000));
    let (text, _) = call_text(
        &f,
        "list_directory",
        serde_json::json!({"path": ".", "recursive": true}),
    );
    assert!(text.len() <= 2_000, "{}", text.len());
    assert!(
        text.contains("[output cut:") && text.contains("max_output_chars"),
        "{text}"
    );
}

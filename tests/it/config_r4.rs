//! Safety round 4 (issue #25, what the attacker pass left): a repository's own
//! `ferret.toml` never stops ferret. Whatever it holds (a key that is no setting, a tool
//! that does not exist, a pattern that does not compile or weighs too much, a value of the
//! wrong type, text that is not TOML, a FIFO or a link in its place) is refused on its
//! own with a warning naming it, the rest of the file still narrows, and nothing widens.

use crate::util::{bin, tempdir, write};
use ferret::config::{Mode, Overrides, TOOL_NAMES, load};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

/// Runs the binary, killing it if it has not ended in 30 s (a hang is a failure, not a
/// slow test).
fn run_bounded(mut cmd: std::process::Command) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let start = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("ferret did not end within 30 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

fn grep(root: &Path, word: &str) -> Output {
    let mut c = bin();
    c.current_dir(root)
        .arg("--root")
        .arg(root)
        .args(["grep", word]);
    run_bounded(c)
}

/// Hostile `ferret.toml` contents, each with a word its warning must name.
fn hostile_files() -> Vec<(String, &'static str)> {
    let many_wild: Vec<String> = (0..20_000).map(|i| format!("\"*a*b*c*d*{i}*\"")).collect();
    let many_plain: Vec<String> = (0..5_000).map(|i| format!("\"plain{i}.txt\"")).collect();
    let heavy = format!("\"{}\"", "*?".repeat(40));
    vec![
        ("bogus = 1\n".into(), "bogus"),
        ("[section]\nkey = 1\n".into(), "section"),
        ("tools = [\"grep\", \"nosuch\"]\n".into(), "nosuch"),
        ("tools = [\"nosuch\"]\n".into(), "nosuch"),
        ("deny_extra = [\"{a,b\"]\n".into(), "{a,b"),
        ("skip = [\"[z-a]\"]\n".into(), "[z-a]"),
        ("confirm = [\"{x\"]\n".into(), "{x"),
        (
            "bash_blocklist = [\"rm 'unclosed\"]\n".into(),
            "bash_blocklist",
        ),
        ("bash_blocklist = [\"rm {a\"]\n".into(), "bash_blocklist"),
        ("max_file_size = \"big\"\n".into(), "max_file_size"),
        ("deny = 5\n".into(), "deny"),
        (
            "allowed_extensions = [\"txt\", 3]\n".into(),
            "allowed_extensions",
        ),
        ("request_timeout = \"forever\"\n".into(), "request_timeout"),
        ("round_window = -1\n".into(), "round_window"),
        ("max_output_chars = -5\n".into(), "max_output_chars"),
        ("this is not toml\n".into(), "whole file"),
        ("deny_extra = [\"ok\"\n".into(), "whole file"),
        (
            format!("deny_extra = [{}]\n", many_wild.join(",")),
            "more patterns",
        ),
        (
            format!("skip_extra = [{}]\n", many_plain.join(",")),
            "more patterns",
        ),
        (format!("deny_extra = [{heavy}]\n"), "wildcards"),
        (
            format!("confirm = [\"{}\"]\n", "a".repeat(5000)),
            "longer than",
        ),
    ]
}

#[test]
fn a_hostile_workspace_config_never_stops_ferret() {
    for (toml, named) in hostile_files() {
        let (_t, root) = tempdir();
        write(&root, "a.txt", "needle\n");
        write(&root, "ferret.toml", &toml);
        let shown: String = toml.chars().take(60).collect();
        let out = grep(&root, "needle");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && stdout.contains("a.txt:1:needle"),
            "{shown:?}: grep failed: {stdout} {stderr}"
        );
        assert!(
            stderr.contains("ferret.toml") && stderr.contains(named),
            "{shown:?}: the warning does not name {named:?}: {stderr}"
        );
        // The library's loader agrees: a configuration, with the refusal listed.
        let ov = Overrides {
            default_roots: Some(vec![root.clone()]),
            ..Default::default()
        };
        let loaded = load(Mode::Server, &ov, &BTreeMap::new()).expect("load");
        assert!(
            loaded.refused.iter().any(|r| r.contains(named)),
            "{shown:?}: {:?}",
            loaded.refused
        );
    }
}

#[test]
fn a_hostile_workspace_config_never_stops_the_server() {
    for toml in [
        "tools = [\"nosuch\", \"grep\"]\n",
        "deny_extra = [\"{a\"]\n",
        "not toml at all\n",
        "bogus = true\n",
    ] {
        let (_t, root) = tempdir();
        write(&root, "a.txt", "needle\n");
        write(&root, "ferret.toml", toml);
        let mut child = bin()
            .current_dir(&root)
            .arg("--root")
            .arg(&root)
            .arg("serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        let mut stdin = child.stdin.take().expect("stdin");
        let msgs = [
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
        ];
        for m in msgs {
            writeln!(stdin, "{m}").expect("send");
        }
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut listed = None;
        for _ in 0..2 {
            let Some(Ok(line)) = lines.next() else { break };
            if line.contains("\"id\":2") {
                listed = Some(line);
            }
        }
        drop(stdin);
        let _ = child.kill();
        let _ = child.wait();
        let listed =
            listed.unwrap_or_else(|| panic!("{toml:?}: the server did not answer tools/list"));
        assert!(listed.contains("\"grep\""), "{toml:?}: {listed}");
        if toml.contains("nosuch") {
            // Narrowed to what exists: grep only.
            assert!(!listed.contains("\"read_file\""), "{toml:?}: {listed}");
        }
    }
}

#[test]
fn the_rest_of_a_partly_refused_file_still_narrows() {
    let (_t, root) = tempdir();
    write(&root, "a.txt", "needle\n");
    write(&root, "private/p.txt", "needle\n");
    write(
        &root,
        "ferret.toml",
        "bogus = 1\ndeny_extra = [\"private/\", \"{bad\"]\ntools = [\"nosuch\"]\n",
    );
    let out = grep(&root, "needle");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("a.txt:1:needle"), "{stdout}");
    assert!(
        !stdout.contains("private"),
        "the deny did not apply: {stdout}"
    );
}

#[test]
fn patterns_that_compile_alone_but_not_together_are_dropped_together() {
    // 1000 patterns of 4 wildcards each pass every cap alone; whether the whole list
    // compiles is decided by building it, and the user's rules stay in force either way.
    let pats: Vec<String> = (0..1000)
        .map(|i| format!("\"**/x{i}*/**/*.{i}?\""))
        .collect();
    let (_t, root) = tempdir();
    write(&root, ".env", "needle\n");
    write(&root, "a.txt", "needle\n");
    write(
        &root,
        "ferret.toml",
        format!("deny_extra = [{}]\n", pats.join(",")),
    );
    let out = grep(&root, "needle");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.contains("a.txt:1:needle"), "{stdout}");
    assert!(
        !stdout.contains(".env"),
        "the user's deny was lost: {stdout}"
    );
}

#[test]
fn a_config_file_that_is_no_regular_file_is_refused_whole_and_never_read() {
    let (_t, outside) = tempdir();
    write(&outside, "secret.toml", "SECRETWORD is not toml\n");
    for kind in ["link", "fifo", "dir", "big"] {
        let (_t, root) = tempdir();
        write(&root, "a.txt", "needle\n");
        let cfg = root.join("ferret.toml");
        match kind {
            "link" => symlink(outside.join("secret.toml"), &cfg).expect("link"),
            "fifo" => crate::util::mkfifo(&cfg).expect("fifo"),
            "dir" => std::fs::create_dir(&cfg).expect("dir"),
            _ => write(&root, "ferret.toml", format!("# {}\n", "x".repeat(2 << 20))),
        }
        let out = grep(&root, "needle");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stdout.contains("a.txt:1:needle"),
            "{kind}: {stdout} {stderr}"
        );
        assert!(!stderr.contains("SECRETWORD"), "{kind}: {stderr}");
        assert!(!stdout.contains("SECRETWORD"), "{kind}: {stdout}");
        // Refused out loud, never passed over in silence.
        assert!(
            stderr.contains("ferret.toml") && stderr.contains("not used"),
            "{kind}: {stderr}"
        );
    }
}

#[test]
fn a_narrowing_that_leaves_nothing_keeps_the_users_set() {
    // An empty list means "all" (tools: the default set; extensions: every one), so an
    // intersection that leaves nothing must not become it.
    let (_t, root) = tempdir();
    write(
        &root,
        "ferret.toml",
        "tools = [\"grep\"]\nallowed_extensions = [\"rs\"]\n",
    );
    let mut env = BTreeMap::new();
    env.insert("FERRET_TOOLS".to_string(), "read_file".to_string());
    env.insert("FERRET_ALLOWED_EXTENSIONS".to_string(), "txt".to_string());
    let ov = Overrides {
        default_roots: Some(vec![root.clone()]),
        ..Default::default()
    };
    let loaded = load(Mode::Server, &ov, &env).expect("load");
    assert_eq!(
        loaded.config.tools,
        vec!["read_file"],
        "{:?}",
        loaded.refused
    );
    assert_eq!(loaded.config.allowed_extensions, vec!["txt"]);
    assert!(
        loaded.refused.iter().any(|r| r.contains("tools")),
        "{:?}",
        loaded.refused
    );
}

#[test]
fn limits_from_a_workspace_file_have_floors() {
    let (_t, root) = tempdir();
    for (key, low, ok) in [
        ("max_output_chars", "1", "5000"),
        ("request_timeout", "\"1ms\"", "\"2s\""),
        ("max_requests_per_round", "10", "40"),
        ("round_window", "\"100000000y\"", "\"10m\""),
        ("round_window", "\"0s\"", "\"5m\""),
        ("max_file_size", "1", "8192"),
    ] {
        write(&root, "ferret.toml", format!("{key} = {low}\n"));
        let ov = Overrides {
            default_roots: Some(vec![root.clone()]),
            ..Default::default()
        };
        let base = load(Mode::Server, &Overrides::default(), &BTreeMap::new()).expect("load");
        let loaded = load(Mode::Server, &ov, &BTreeMap::new()).expect("load");
        let get = |c: &ferret::config::Config| serde_json::to_value(c).expect("json")[key].clone();
        assert_eq!(
            get(&loaded.config),
            get(&base.config),
            "{key} = {low} applied"
        );
        assert!(
            loaded.refused.iter().any(|r| r.contains(key)),
            "{key}: {:?}",
            loaded.refused
        );
        write(&root, "ferret.toml", format!("{key} = {ok}\n"));
        let loaded = load(Mode::Server, &ov, &BTreeMap::new()).expect("load");
        assert_ne!(
            get(&loaded.config),
            get(&base.config),
            "{key} = {ok} not applied"
        );
    }
}

#[test]
fn the_tool_names_are_the_registrys() {
    let (_t, root) = tempdir();
    let f = crate::util::ferret(&root, false, None);
    let mut names: Vec<&str> = f.registry().tools().map(|t| t.meta().name).collect();
    names.sort();
    let mut listed = TOOL_NAMES.to_vec();
    listed.sort();
    assert_eq!(names, listed);
}

#[test]
fn an_error_answer_keeps_within_the_output_budget() {
    // An agent-chosen path (or pattern) ends up in the message; the answer that carries
    // it is held to max_output_chars like any other (its text and structured copy).
    let (_t, root) = tempdir();
    for budget in [300u64, 1000] {
        let mut c = ferret::config::Config::defaults(Mode::Server);
        c.roots = vec![root.clone()];
        c.max_output_chars = budget;
        let f = ferret::Ferret::new(c).expect("open");
        let long = format!("{}/missing.txt", "d".repeat(2000));
        for (tool, args) in [
            ("read_file", serde_json::json!({"path": long})),
            ("grep", serde_json::json!({"pattern": "(".repeat(500)})),
            (
                "edit",
                serde_json::json!({"path": "x.txt", "old_string": "a".repeat(3000), "new_string": "b"}),
            ),
        ] {
            let err = match crate::util::call(&f, tool, args) {
                Err(e) => e,
                Ok(v) => panic!("{tool}: expected an error, got {v}"),
            };
            let sent = 100
                + 2 * (err.message.chars().count()
                    + err.hint.as_deref().map_or(0, |h| h.chars().count()));
            assert!(
                sent <= budget as usize,
                "{tool} at {budget}: {sent} characters: {err:?}"
            );
            assert!(!err.message.is_empty(), "{tool}: empty message");
        }
    }
}

#[test]
fn the_users_config_file_is_read_unless_a_root_holds_it() {
    let (_t, home) = tempdir();
    let (_t2, root) = tempdir();
    write(&root, "a.txt", "needle\n");
    write(&root, "b.log", "needle\n");
    write(
        &home,
        ".config/ferret/config.toml",
        "skip_extra = [\"*.log\"]\n",
    );
    let run = |env: &[(&str, &Path)], dir: &Path| {
        let mut c = bin();
        c.current_dir(dir)
            .arg("--root")
            .arg(dir)
            .args(["grep", "needle"]);
        for (k, v) in env {
            c.env(k, v);
        }
        String::from_utf8_lossy(&run_bounded(c).stdout).to_string()
    };
    // ~/.config/ferret/config.toml, and $XDG_CONFIG_HOME/ferret/config.toml before it.
    let out = run(&[("HOME", &home)], &root);
    assert!(out.contains("a.txt") && !out.contains("b.log"), "{out}");
    let (_t3, xdg) = tempdir();
    write(&xdg, "ferret/config.toml", "skip_extra = [\"a.txt\"]\n");
    let out = run(&[("HOME", &home), ("XDG_CONFIG_HOME", &xdg)], &root);
    assert!(out.contains("b.log") && !out.contains("a.txt"), "{out}");
    // A root that holds the file (a root that is the home): the file is not trusted.
    write(&home, "c.txt", "needle\n");
    write(&home, ".config/ferret/config.toml", "allow_write = true\n");
    let mut c = bin();
    c.current_dir(&home)
        .arg("--root")
        .arg(&home)
        .env("HOME", &home)
        .args(["write", "d.txt", "--content", "made"]);
    let out = run_bounded(c);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not trusted"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(home.join("c.txt")).expect("read"),
        "needle\n"
    );
}

//! Safety round 3 (issue #25): names render unambiguously, deny is case-insensitive, a
//! workspace's ferret.toml narrows key by key, ferret's state and the OS trash are always
//! denied.

use crate::util::{bin, tempdir, write};
use ferret::config::{Config, DEFAULT_DENY, Mode, Overrides, load};
use ferret::{ErrorCode, Ferret, ToolError};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashSet};
use std::os::unix::fs::symlink;
use std::path::Path;

fn open(root: &Path, write: bool, state: Option<&Path>) -> Ferret {
    crate::util::ferret(root, write, state)
}

use crate::util::{ok, run};

/// What `path` reads as, through read_file.
fn content(f: &Ferret, path: &str) -> String {
    ok(f, "read_file", json!({ "path": path })).0["content"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

// ---------------------------------------------------------------------------------
// 6. Names render unambiguously.
// ---------------------------------------------------------------------------------

/// Files whose names look like another's rendering, each with its own content. The
/// content names the file, so a read proves which object a rendering reached.
const LOOKALIKES: &[&str] = &[
    "a/b.txt",
    "a\\b.txt",
    "\"a\\\\b.txt\"",
    "\"a\\b.txt\"",
    "a\u{2215}b.txt",
    "a\u{FF0F}b.txt",
    "a\u{2044}b.txt",
    "a\u{FF3C}b.txt",
    "a.txt ",
    " a.txt",
    "a.txt",
    "x@",
    "x",
    "b.rs:7:x",
    "b.rs",
    "c\u{200B}.txt",
    "c.txt",
    "d\u{00A0}e.txt",
    "d e.txt",
    "dir/\"q\"",
    "dir/q",
];

fn tag(name: &str) -> String {
    format!("NEEDLE object={name:?}\n")
}

fn lookalike_tree() -> (tempfile::TempDir, std::path::PathBuf) {
    let (t, root) = tempdir();
    for n in LOOKALIKES {
        write(&root, n, tag(n));
    }
    // `b.rs` line 7 holds text that, after `b.rs:7:`, would read as the file `b.rs:7:x`'s hit
    write(
        &root,
        "b.rs",
        format!("{}1\n2\n3\n4\n5\n6\nx:1:NEEDLE forged\n", tag("b.rs")),
    );
    (t, root)
}

/// A text rendering of each reported path, as the text output gives it: the one line
/// among `text`'s lines that names it.
fn text_has(text: &str, rendered: &str) -> bool {
    text.lines().any(|l| l.contains(rendered))
}

#[test]
fn every_reported_path_reads_back_as_the_object_that_matched() {
    let (_t, root) = lookalike_tree();
    let f = open(&root, false, None);
    // grep, all modes: every JSON path reads back as the file whose content matched.
    for mode in ["files_with_matches", "count", "content"] {
        let (v, text) = ok(
            &f,
            "grep",
            json!({"pattern": "NEEDLE object", "output_mode": mode}),
        );
        let files = v["files"].as_array().expect("files");
        assert_eq!(files.len(), LOOKALIKES.len(), "{mode}: {v}");
        let mut seen = HashSet::new();
        for file in files {
            let p = file["path"].as_str().expect("path");
            assert!(seen.insert(p.to_string()), "{mode}: {p} reported twice");
            let body = content(&f, p);
            let shown = ferret::workspace::shown(p);
            assert!(
                text_has(&text, &shown),
                "{mode}: text lacks {shown}:\n{text}"
            );
            assert_eq!(content(&f, &shown), body, "{mode}: {shown} and {p} differ");
            if mode == "content" {
                // the JSON hit's own line is the object's own tag
                let line = file["lines"][0]["text"].as_str().unwrap_or_default();
                assert_eq!(
                    format!("{line}\n"),
                    body.lines()
                        .next()
                        .map(|l| format!("{l}\n"))
                        .unwrap_or_default()
                );
            }
        }
    }
    // glob: names are pairwise distinct in JSON and in text, each reads back as itself
    let (v, text) = ok(
        &f,
        "glob",
        json!({"pattern": "**/*", "include_hidden": true}),
    );
    let globbed: Vec<String> = v["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|x| x.as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(globbed.len(), LOOKALIKES.len(), "{v}");
    let mut texts = HashSet::new();
    for g in &globbed {
        let shown = ferret::workspace::shown(g).into_owned();
        assert!(texts.insert(shown.clone()), "two names show as {shown}");
        assert!(
            text.lines().any(|l| l == shown),
            "glob text lacks {shown}:\n{text}"
        );
        let body = content(&f, g);
        assert!(body.starts_with("NEEDLE object="), "{g}: {body}");
        assert_eq!(content(&f, &shown), body);
    }
    // every object reached once: the renderings are a bijection onto the files
    let bodies: HashSet<String> = globbed.iter().map(|g| content(&f, g)).collect();
    assert_eq!(bodies.len(), LOOKALIKES.len());
    for n in LOOKALIKES {
        assert!(
            bodies.iter().any(|b| b.starts_with(&tag(n))),
            "{n:?} never reached"
        );
    }
}

#[test]
fn the_backslash_file_is_never_reported_as_the_slash_file() {
    let (t, root) = tempdir();
    write(&root, "a/b.txt", "innocent\n");
    write(&root, "a\\b.txt", "planted NEEDLE\n");
    let f = open(&root, false, None);
    for mode in ["files_with_matches", "count", "content"] {
        let (v, text) = ok(
            &f,
            "grep",
            json!({"pattern": "NEEDLE", "output_mode": mode}),
        );
        assert_eq!(v["files"][0]["path"], "a\\b.txt", "{v}");
        assert!(!text.contains("a/b.txt"), "{mode}: {text}");
        assert!(text.contains("\"a\\\\b.txt\""), "{mode}: {text}");
    }
    for (tool, args) in [
        ("search_files", json!({"pattern": "NEEDLE"})),
        ("file_search", json!({"query": "NEEDLE"})),
    ] {
        let (v, text) = ok(&f, tool, args);
        assert!(!text.contains("a/b.txt"), "{tool}: {text}");
        assert!(text.contains("\"a\\\\b.txt\""), "{tool}: {text}");
        assert!(v.to_string().contains("a\\\\b.txt"), "{tool}: {v}");
    }
    let (v, text) = ok(
        &f,
        "list_directory",
        json!({"path": ".", "recursive": true}),
    );
    assert!(text.contains("\"a\\\\b.txt\""), "{text}");
    let names: Vec<&str> = v["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter_map(|e| e["name"].as_str())
        .collect();
    assert!(
        names.contains(&"a\\b.txt") && names.contains(&"a/b.txt"),
        "{names:?}"
    );
    // read_files, get_file_info, file_exists: the path they report is the one asked for
    let (v, text) = ok(
        &f,
        "read_files",
        json!({"paths": ["a\\b.txt", "\"a\\\\b.txt\""]}),
    );
    assert_eq!(v["files"][0]["path"], "a\\b.txt");
    assert_eq!(v["files"][1]["path"], "a\\b.txt");
    assert!(text.contains("==> \"a\\\\b.txt\" <=="), "{text}");
    assert!(!text.contains("innocent"), "{text}");
    for tool in ["get_file_info", "file_exists", "read_file"] {
        for asked in ["a\\b.txt", "\"a\\\\b.txt\""] {
            let (v, text) = ok(&f, tool, json!({"path": asked}));
            assert_eq!(v["path"], "a\\b.txt", "{tool} {asked}: {v}");
            assert!(!text.contains("a/b.txt"), "{tool}: {text}");
        }
    }
    // the CLI shows it the same way
    let out = bin()
        .arg("--root")
        .arg(&root)
        .args(["grep", "NEEDLE"])
        .output()
        .expect("run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("\"a\\\\b.txt\""), "{stdout}");
    assert!(!stdout.contains("a/b.txt"), "{stdout}");
    drop(t);
}

#[test]
fn change_receipts_and_history_name_the_object_changed() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    write(&root, "a/b.txt", "innocent\n");
    write(&root, "a\\b.txt", "planted\n");
    let f = open(&root, true, Some(&state));
    let (v, text) = ok(
        &f,
        "edit",
        json!({"path": "\"a\\\\b.txt\"", "old_string": "planted", "new_string": "edited"}),
    );
    assert_eq!(v["path"], "a\\b.txt");
    assert!(!text.contains("a/b.txt"), "{text}");
    assert_eq!(
        std::fs::read_to_string(root.join("a/b.txt")).unwrap(),
        "innocent\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("a\\b.txt")).unwrap(),
        "edited\n"
    );
    let (v, _) = ok(
        &f,
        "write_file",
        json!({"path": "a\\b.txt", "content": "w\n", "overwrite": true}),
    );
    assert_eq!(v["path"], "a\\b.txt");
    let (v, text) = ok(
        &f,
        "move",
        json!({"source": "a\\b.txt", "destination": "c\\d.txt"}),
    );
    assert_eq!(v["source"], "a\\b.txt");
    assert_eq!(v["destination"], "c\\d.txt");
    assert!(
        text.contains("\"c\\\\d.txt\"") && !text.contains("c/d.txt"),
        "{text}"
    );
    assert_eq!(
        content(&f, v["destination"].as_str().unwrap_or_default()),
        "w\n"
    );
    let (v, text) = ok(&f, "undo", json!({}));
    assert_eq!(v["path"], "a\\b.txt", "{v}");
    assert!(!text.contains("a/b.txt"), "{text}");
    let (v, _) = ok(&f, "file_delete", json!({"path": "\"a\\\\b.txt\""}));
    assert_eq!(v["path"], "a\\b.txt");
    assert!(root.join("a/b.txt").exists() && !root.join("a\\b.txt").exists());
}

#[test]
fn a_malformed_quoted_path_is_refused_not_guessed() {
    let (_t, root) = tempdir();
    write(&root, "\"open", "x\n");
    let f = open(&root, false, None);
    for bad in ["\"open", "\"a\\qb\"", "\"a\"b", "\"\\u{110000}\""] {
        let e = run(&f, "read_file", json!({ "path": bad })).expect_err(bad);
        assert_eq!(e.code, ErrorCode::InvalidArgument, "{bad}: {e:?}");
    }
    // the name is reachable by the rendering ferret gives it
    let (v, _) = ok(&f, "glob", json!({"pattern": "*"}));
    let p = v["files"][0].as_str().unwrap_or_default().to_string();
    assert_eq!(p, "\"\\\"open\"");
    assert_eq!(content(&f, &p), "x\n");
    // quoting cannot smuggle `..` or NUL past the checks
    for sneaky in ["\"..\"/etc/passwd", "\"a\\u{2f}..\\u{2f}..\"", "\"a\\0b\""] {
        assert!(
            run(&f, "read_file", json!({ "path": sneaky })).is_err(),
            "{sneaky}"
        );
    }
}

#[test]
fn non_utf8_names_are_reported_so_that_they_read_back() {
    use std::os::unix::ffi::OsStrExt;
    let (_t, root) = tempdir();
    let bad = std::ffi::OsStr::from_bytes(b"bad\xff.txt");
    std::fs::write(root.join(bad), "bytes NEEDLE\n").expect("write");
    std::fs::write(root.join("bad\u{FFFD}.txt"), "lossy twin NEEDLE\n").expect("write");
    let f = open(&root, false, None);
    let (v, _) = ok(&f, "grep", json!({"pattern": "NEEDLE"}));
    let mut got: Vec<String> = v["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|x| content(&f, x["path"].as_str().unwrap_or_default()))
        .collect();
    got.sort();
    assert_eq!(got, vec!["bytes NEEDLE\n", "lossy twin NEEDLE\n"], "{v}");
}

// ---------------------------------------------------------------------------------
// Deny is case-insensitive.
// ---------------------------------------------------------------------------------

/// A concrete path each default deny pattern denies, in the case `case` gives.
fn denied_examples(case: fn(&str) -> String) -> Vec<String> {
    DEFAULT_DENY
        .iter()
        .filter(|p| !p.starts_with('!'))
        .map(|p| {
            let p = p.trim_start_matches("**/").replace('*', "x");
            let p = match p.strip_suffix('/') {
                Some(dir) => format!("{dir}/inner"),
                None => p,
            };
            case(&p)
        })
        .collect()
}

fn upper(s: &str) -> String {
    s.to_uppercase()
}

fn mixed(s: &str) -> String {
    s.chars()
        .enumerate()
        .map(|(i, c)| {
            if i % 2 == 0 {
                c.to_ascii_uppercase()
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect()
}

#[test]
fn deny_patterns_match_every_case_for_every_tool() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    let mut names = denied_examples(upper);
    names.extend(denied_examples(mixed));
    names.sort();
    names.dedup();
    for n in &names {
        write(&root, n, "SECRETWORD\n");
    }
    write(&root, "ok.txt", "fine\n");
    // links to them, under innocent names
    for (i, n) in names.iter().enumerate() {
        symlink(root.join(n), root.join(format!("link{i}"))).expect("link");
    }
    let f = open(&root, true, Some(&state));
    let deny = |e: ToolError| assert_eq!(e.code, ErrorCode::DeniedPattern, "{e:?}");
    let targets: Vec<String> = names
        .iter()
        .cloned()
        .chain((0..names.len()).map(|i| format!("link{i}")))
        .collect();
    for n in &targets {
        for (tool, args) in [
            ("read_file", json!({ "path": n })),
            ("get_file_info", json!({ "path": n })),
            ("read_files", json!({ "paths": [n] })),
            (
                "edit",
                json!({"path": n, "old_string": "SECRETWORD", "new_string": "x"}),
            ),
            (
                "write_file",
                json!({"path": n, "content": "x", "overwrite": true}),
            ),
            ("move", json!({"source": n, "destination": "moved"})),
            (
                "move",
                json!({"source": "ok.txt", "destination": n, "overwrite": true}),
            ),
            ("file_delete", json!({ "path": n })),
        ] {
            match run(&f, tool, args.clone()) {
                Err(e) => deny(e),
                Ok((v, _)) if tool == "read_files" => {
                    assert!(!v.to_string().contains("SECRETWORD"), "{tool} {args}: {v}");
                }
                Ok((v, _)) => panic!("{tool} {args} succeeded: {v}"),
            }
        }
        match run(&f, "file_exists", json!({ "path": n })) {
            Err(e) => deny(e),
            Ok((v, _)) => assert_eq!(v["exists"], false, "{n}: {v}"),
        }
    }
    // walks never show them
    let (v, _) = ok(
        &f,
        "grep",
        json!({"pattern": "SECRETWORD", "include_hidden": true}),
    );
    assert_eq!(v["files"].as_array().map(Vec::len), Some(0), "{v}");
    let (v, _) = ok(
        &f,
        "glob",
        json!({"pattern": "**/*", "include_hidden": true}),
    );
    let listed = v["files"].to_string().to_lowercase();
    let (l, _) = ok(
        &f,
        "list_directory",
        json!({"path": ".", "recursive": true, "include_hidden": true}),
    );
    let listing = l["entries"].to_string().to_lowercase();
    for n in &names {
        let lower = n.to_lowercase();
        assert!(
            !listed.contains(&format!("\"{lower}\"")),
            "glob lists {n}: {v}"
        );
        assert!(
            !listing.contains(&format!("\"{lower}\"")),
            "list shows {n}: {l}"
        );
    }
    // nothing changed on disk
    for n in &names {
        assert_eq!(
            std::fs::read_to_string(root.join(n)).unwrap(),
            "SECRETWORD\n"
        );
    }
}

#[test]
fn a_lowercase_template_stays_readable_and_confirm_is_caseless_too() {
    let (_t, root) = tempdir();
    write(&root, ".ENV.EXAMPLE", "TEMPLATE=1\n");
    let f = open(&root, false, None);
    assert_eq!(content(&f, ".ENV.EXAMPLE"), "TEMPLATE=1\n");
    assert!(f.workspace().needs_confirmation(
        &f.workspace().resolve("FERRET.TOML").expect("resolve"),
        false
    ));
    assert!(
        f.workspace().needs_confirmation(
            &f.workspace()
                .resolve(".GitHub/workflows/ci.yml")
                .expect("resolve"),
            false
        )
    );
}

// ---------------------------------------------------------------------------------
// A workspace ferret.toml only narrows, key by key.
// ---------------------------------------------------------------------------------

/// Per key: a workspace value that would widen the defaults (None: no value does), and
/// one that narrows them with the key whose effective value then changes (None: the
/// default is already the narrowest).
#[allow(clippy::type_complexity)]
fn rules() -> BTreeMap<&'static str, (Option<&'static str>, Option<(&'static str, &'static str)>)> {
    BTreeMap::from([
        ("roots", (Some("[\"/\"]"), None)),
        (
            "deny",
            (Some("[]"), Some(("[\".obsidian/\"]", "deny_extra"))),
        ),
        (
            "deny_extra",
            (Some("[\"!.env\"]"), Some(("[\".x/\"]", "deny_extra"))),
        ),
        ("skip", (Some("[]"), Some(("[\"*.log\"]", "skip_extra")))),
        (
            "skip_extra",
            (
                Some("[\"!node_modules/\"]"),
                Some(("[\"*.log\"]", "skip_extra")),
            ),
        ),
        (
            "allowed_extensions",
            (None, Some(("[\"rs\"]", "allowed_extensions"))),
        ),
        ("max_path_depth", (Some("0"), Some(("3", "max_path_depth")))),
        (
            "max_file_size",
            (Some("0"), Some(("5000", "max_file_size"))),
        ),
        (
            "search_max_file_size",
            (Some("999999999999"), Some(("5000", "search_max_file_size"))),
        ),
        (
            "max_files_per_request",
            (Some("0"), Some(("10", "max_files_per_request"))),
        ),
        (
            "max_output_chars",
            (Some("0"), Some(("3000", "max_output_chars"))),
        ),
        ("max_columns", (Some("0"), Some(("100", "max_columns")))),
        (
            "max_bytes_per_round",
            (Some("0"), Some(("2000000", "max_bytes_per_round"))),
        ),
        (
            "max_requests_per_round",
            (Some("100000"), Some(("40", "max_requests_per_round"))),
        ),
        (
            "request_timeout",
            (Some("\"0s\""), Some(("\"1s\"", "request_timeout"))),
        ),
        (
            "round_window",
            (Some("\"1s\""), Some(("\"10m\"", "round_window"))),
        ),
        (
            "audit_log",
            (Some("\"/tmp/ferret-audit-elsewhere.log\""), None),
        ),
        ("allow_write", (Some("true"), None)),
        ("dry_run", (None, Some(("true", "dry_run")))),
        ("state_dir", (Some("\"/tmp/ferret-state-elsewhere\""), None)),
        ("allow_permanent_delete", (Some("true"), None)),
        ("confirm", (Some("[]"), Some(("[\"Makefile\"]", "confirm")))),
        ("use_os_trash", (Some("false"), None)),
        ("max_backup_bytes", (Some("1"), None)),
        ("backup_enabled", (Some("false"), None)),
        (
            "max_edit_file_size",
            (Some("0"), Some(("5000", "max_edit_file_size"))),
        ),
        (
            "max_image_bytes",
            (Some("0"), Some(("5000", "max_image_bytes"))),
        ),
        ("direct_bash_confirm", (Some("false"), None)),
        (
            "bash_blocklist",
            (Some("[]"), Some(("[\"curl\"]", "bash_blocklist"))),
        ),
        (
            "index_max_files",
            (Some("0"), Some(("5000", "index_max_files"))),
        ),
        (
            "index_max_bytes",
            (Some("0"), Some(("2000000", "index_max_bytes"))),
        ),
        (
            "tools",
            (
                Some("[\"search_files\", \"file_search\"]"),
                Some(("[\"grep\"]", "tools")),
            ),
        ),
    ])
}

fn load_with(root: &Path, toml: &str) -> ferret::config::Loaded {
    std::fs::write(root.join("ferret.toml"), toml).expect("write");
    let ov = Overrides {
        default_roots: Some(vec![root.to_path_buf()]),
        ..Default::default()
    };
    load(Mode::Server, &ov, &BTreeMap::new()).expect("load")
}

fn as_map(c: &Config) -> serde_json::Map<String, Value> {
    match serde_json::to_value(c).expect("serialize") {
        Value::Object(m) => m,
        v => panic!("not an object: {v}"),
    }
}

#[test]
fn workspace_config_narrows_every_key_and_refuses_the_rest_naming_it() {
    let (_t, root) = tempdir();
    let base = as_map(&load_with(&root, "").config);
    let rules = rules();
    let doc = include_str!("../../src/config/narrow.rs");
    for key in base.keys() {
        let Some((widen, narrow)) = rules.get(key.as_str()) else {
            panic!(
                "Config key {key} has no rule for a workspace ferret.toml: add one to config/narrow.rs and to this table"
            );
        };
        assert!(
            doc.lines()
                .any(|l| l.starts_with("//! |") && l.contains(&format!("`{key}`"))),
            "config/narrow.rs's table does not give {key}'s direction"
        );
        if let Some(w) = widen {
            let loaded = load_with(&root, &format!("{key} = {w}\n"));
            let got = as_map(&loaded.config);
            assert_eq!(got, base, "{key} = {w} changed the configuration");
            assert!(
                loaded.refused.iter().any(|r| r.contains(key.as_str())),
                "{key} = {w} was not refused by name: {:?}",
                loaded.refused
            );
        }
        if let Some((n, changed)) = narrow {
            let loaded = load_with(&root, &format!("{key} = {n}\n"));
            let got = as_map(&loaded.config);
            assert_ne!(
                got[*changed], base[*changed],
                "{key} = {n} did not narrow {changed}"
            );
            for (k, v) in &got {
                if k != changed {
                    assert_eq!(v, &base[k], "{key} = {n} changed {k} too");
                }
            }
            // A list that replaces elsewhere only adds here: the part it leaves out is
            // refused (and said so); nothing else is.
            assert!(
                loaded.refused.iter().all(|r| r.contains("leaving out")),
                "{key} = {n}: {:?}",
                loaded.refused
            );
        }
    }
    for k in rules.keys() {
        assert!(
            base.contains_key(*k),
            "the table names {k}, which is no Config key"
        );
    }
}

#[test]
fn refusals_are_on_stderr_and_in_ferret_config() {
    let (_t, root) = tempdir();
    write(
        &root,
        "ferret.toml",
        "use_os_trash = false\nskip = []\ntools = [\"search_files\"]\n",
    );
    let out = bin()
        .current_dir(&root)
        .arg("--root")
        .arg(&root)
        .arg("config")
        .output()
        .expect("run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    for key in ["use_os_trash", "skip", "tools: search_files"] {
        assert!(stderr.contains(key), "stderr lacks {key}: {stderr}");
        assert!(stdout.contains(key), "ferret config lacks {key}: {stdout}");
    }
    assert!(stdout.contains("use_os_trash = true"), "{stdout}");
}

#[test]
fn the_tools_not_served_by_default_are_the_registrys() {
    let (_t, root) = tempdir();
    let f = open(&root, false, None);
    let mut not_served: Vec<&str> = f
        .registry()
        .tools()
        .map(|t| t.meta())
        .filter(|m| !m.served_by_default)
        .map(|m| m.name)
        .collect();
    not_served.sort();
    let mut listed = ferret::config::NOT_SERVED_BY_DEFAULT.to_vec();
    listed.sort();
    assert_eq!(not_served, listed);
}

// ---------------------------------------------------------------------------------
// ferret's state and the OS trash are always denied.
// ---------------------------------------------------------------------------------

/// A root holding a home: the OS trash and ferret's state inside it, each with a secret.
fn home_tree() -> (tempfile::TempDir, std::path::PathBuf, Vec<&'static str>) {
    let (t, root) = tempdir();
    let secrets = vec![
        ".local/share/Trash/files/thrown.txt",
        ".local/share/Trash/info/thrown.txt.trashinfo",
        ".local/state/ferret/0123abcd/backups/old.txt",
        ".local/state/ferret/0123abcd/trash/files/gone.txt",
        "xdg-data/Trash/files/thrown2.txt",
        "xdg-state/ferret/0123abcd/journal.jsonl",
        "custom-state/0123abcd/backups/b.txt",
    ];
    for s in &secrets {
        write(&root, s, "TRASHWORD\n");
    }
    write(&root, "notes.txt", "fine TRASHWORD? no: fine\n");
    symlink(root.join(".local/share/Trash"), root.join("trash-link")).expect("link");
    symlink(root.join("xdg-state/ferret"), root.join("state-link")).expect("link");
    (t, root, secrets)
}

fn call_bin(root: &Path, env: &[(&str, &Path)], tool: &str, args: Value) -> (i32, Value) {
    let mut c = bin();
    c.env_remove("XDG_STATE_HOME");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c
        .arg("--root")
        .arg(root)
        .args([
            "--set",
            &format!("state_dir={}", root.join("custom-state").display()),
        ])
        .args(["call", tool, &args.to_string()])
        .output()
        .expect("run");
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), v)
}

#[test]
fn state_and_trash_inside_a_root_are_denied_by_every_tool_and_spelling() {
    let (_t, root, secrets) = home_tree();
    // reach the XDG directories through a link to the root: another spelling
    let (_l, elsewhere) = tempdir();
    let alias = elsewhere.join("alias");
    symlink(&root, &alias).expect("alias");
    let env: Vec<(&str, std::path::PathBuf)> = vec![
        ("HOME", root.clone()),
        ("XDG_DATA_HOME", alias.join("xdg-data")),
        ("XDG_STATE_HOME", alias.join("xdg-state")),
    ];
    let env: Vec<(&str, &Path)> = env.iter().map(|(k, v)| (*k, v.as_path())).collect();
    let via_links = [
        "trash-link/files/thrown.txt",
        "state-link/0123abcd/journal.jsonl",
    ];
    for p in secrets.iter().chain(via_links.iter()) {
        for tool in ["read_file", "get_file_info"] {
            let (code, v) = call_bin(&root, &env, tool, json!({ "path": p }));
            assert_eq!(code, 1, "{tool} {p}: {v}");
            assert_eq!(v["error"]["code"], "DENIED_PATTERN", "{tool} {p}: {v}");
        }
        let (_, v) = call_bin(&root, &env, "file_exists", json!({ "path": p }));
        assert!(
            v["error"]["code"] == "DENIED_PATTERN" || v["exists"] == false,
            "{p}: {v}"
        );
    }
    let (_, v) = call_bin(&root, &env, "grep", json!({"pattern": "TRASHWORD$"}));
    assert_eq!(v["files"].as_array().map(Vec::len), Some(0), "{v}");
    let (_, v) = call_bin(
        &root,
        &env,
        "glob",
        json!({"pattern": "**/*", "include_hidden": true}),
    );
    for s in &secrets {
        assert!(!v.to_string().contains(s), "glob lists {s}: {v}");
    }
    let (_, v) = call_bin(
        &root,
        &env,
        "list_directory",
        json!({"path": ".", "recursive": true, "include_hidden": true, "max_depth": 10}),
    );
    let listed = v.to_string();
    for hidden in ["Trash", "ferret", "0123abcd"] {
        assert!(!listed.contains(hidden), "list shows {hidden}: {listed}");
    }
    let (_, v) = call_bin(
        &root,
        &env,
        "search_files",
        json!({"pattern": "TRASHWORD$"}),
    );
    assert!(!v.to_string().contains("TRASHWORD"), "{v}");
}

#[test]
fn a_root_inside_the_trash_shows_nothing() {
    let (_t, root, _) = home_tree();
    let trash = root.join(".local/share/Trash");
    let mut c = bin();
    let out = c
        .env("HOME", &root)
        .arg("--root")
        .arg(&trash)
        .args(["call", "grep", &json!({"pattern": "TRASHWORD"}).to_string()])
        .output()
        .expect("run");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert_eq!(v["files"].as_array().map(Vec::len), Some(0), "{v}");
}

#[test]
fn an_index_stored_under_other_rules_does_not_bring_the_trash_back() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    let (_h, elsewhere) = tempdir();
    write(&root, ".local/share/Trash/files/x.txt", "TRASHWORD\n");
    write(&root, "a.txt", "TRASHWORD\n");
    let ferret = |home: &Path, args: &[&str]| {
        let out = bin()
            .env("XDG_STATE_HOME", &state)
            .env("HOME", home)
            .arg("--root")
            .arg(&root)
            .args(args)
            .output()
            .expect("run");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let grep = r#"{"pattern":"TRASHWORD","include_hidden":true}"#;
    // HOME elsewhere: the root holds no trash of the user's; the index lists the file.
    ferret(&elsewhere, &["index"]);
    let before = ferret(&elsewhere, &["call", "grep", grep]);
    assert!(
        before.contains("x.txt") && before.contains("\"index\""),
        "{before}"
    );
    // HOME is the root: the same stored index must not answer for its trash
    let after = ferret(&root, &["call", "grep", grep]);
    assert!(
        after.contains("a.txt") && !after.contains("x.txt"),
        "{after}"
    );
    let glob = r#"{"pattern":"**/*","include_hidden":true}"#;
    let before = ferret(&elsewhere, &["call", "glob", glob]);
    assert!(before.contains("x.txt"), "{before}");
    let after = ferret(&root, &["call", "glob", glob]);
    assert!(
        after.contains("a.txt") && !after.contains("x.txt"),
        "{after}"
    );
}

// ---------------------------------------------------------------------------------
// Round 3, attacker "one": listings through links, invisible names, Unicode case.
// ---------------------------------------------------------------------------------

/// The entry names a listing of `path` gives (JSON form).
fn listed(f: &Ferret, path: &str) -> Vec<String> {
    let (v, _) = ok(
        f,
        "list_directory",
        json!({"path": path, "recursive": true, "include_hidden": true, "max_depth": 10}),
    );
    let mut names: Vec<String> = v["entries"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|e| e["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn a_listing_through_a_link_hides_what_the_real_path_hides() {
    let (_t, root) = tempdir();
    let secrets = [
        "sub/.docker/config.json",
        "up/.DOCKER/CONFIG.JSON",
        "deep/a/.kube/config",
        "conf/prod.yml",
        "conf/nested/.env",
    ];
    for s in &secrets {
        write(&root, s, "LINKSECRET\n");
    }
    write(&root, "sub/.docker/readme.txt", "fine\n");
    write(&root, "up/.DOCKER/other.txt", "fine\n");
    write(&root, "deep/a/.kube/notes.txt", "fine\n");
    write(&root, "conf/dev.yml", "fine\n");
    // each link spells its target's contents with a different path: the deny patterns
    // that hold a `/` would not match the spelling through the link
    for (link, target) in [
        ("dock", "sub/.docker"),
        ("DOCK2", "up/.DOCKER"),
        ("kube", "deep/a/.kube"),
        ("k2", "deep/a"),
        ("c", "conf"),
        ("self", "."),
        ("sub/back", ".."),
    ] {
        symlink(target, root.join(link)).expect("link");
    }
    let mut c = Config::defaults(Mode::Cli);
    c.roots = vec![root.clone()];
    c.deny_extra = vec!["conf/prod.yml".into()];
    let f = Ferret::new(c).expect("open");
    for (via, real) in [
        ("dock", "sub/.docker"),
        ("DOCK2", "up/.DOCKER"),
        ("kube", "deep/a/.kube"),
        ("k2", "deep/a"),
        ("c", "conf"),
    ] {
        assert_eq!(listed(&f, via), listed(&f, real), "{via} -> {real}");
        let names = listed(&f, via);
        assert!(!names.is_empty(), "{via}: the harmless files are listed");
        for bad in ["config.json", "CONFIG.JSON", "config", "prod.yml", ".env"] {
            assert!(
                !names.iter().any(|n| n.rsplit('/').next() == Some(bad)),
                "{via} lists {bad}: {names:?}"
            );
        }
    }
    for via in ["self", "sub/back", "self/sub/back/self"] {
        let (v, text) = ok(
            &f,
            "list_directory",
            json!({"path": via, "recursive": true, "include_hidden": true, "max_depth": 10}),
        );
        for s in &secrets {
            let leaf = s.rsplit('/').next().unwrap_or(s);
            assert!(
                !v.to_string().contains(&format!("{leaf}\"")),
                "{via} lists {s}: {v}"
            );
            assert!(
                !text.contains(&format!("  {leaf}  (")),
                "{via} shows {s}: {text}"
            );
        }
    }
}

#[test]
fn a_listing_through_a_link_to_the_root_hides_state_and_trash() {
    let (_t, root, secrets) = home_tree();
    symlink(".", root.join("self")).expect("link");
    symlink(".local", root.join("loc")).expect("link");
    let env: Vec<(&str, std::path::PathBuf)> = vec![
        ("HOME", root.clone()),
        ("XDG_DATA_HOME", root.join("xdg-data")),
        ("XDG_STATE_HOME", root.join("xdg-state")),
    ];
    let env: Vec<(&str, &Path)> = env.iter().map(|(k, v)| (*k, v.as_path())).collect();
    for (path, recursive) in [
        ("self", true),
        ("self/self", true),
        ("loc", true),
        ("self/.local/share", false),
        ("loc/share", false),
        ("self/xdg-data", false),
        ("self/xdg-state", true),
    ] {
        let (code, v) = call_bin(
            &root,
            &env,
            "list_directory",
            json!({"path": path, "recursive": recursive, "include_hidden": true, "max_depth": 10}),
        );
        assert_eq!(code, 0, "{path}: {v}");
        let listed = v["entries"].to_string();
        for hidden in ["Trash", "ferret", "0123abcd", "custom-state"] {
            assert!(!listed.contains(hidden), "{path} shows {hidden}: {listed}");
        }
        for s in &secrets {
            let leaf = s.rsplit('/').next().unwrap_or(s);
            assert!(!listed.contains(leaf), "{path} shows {s}: {listed}");
        }
    }
}

/// Characters that must make a name quoted, each escaped as `\u{..}` inside the quotes:
/// invisible, direction, tag, combining, and `/`, `\`, `"` look-alikes.
const ODD_CHARS: &[char] = &[
    '\u{00AD}',
    '\u{034F}',
    '\u{061C}',
    '\u{115F}',
    '\u{1160}',
    '\u{3164}',
    '\u{FFA0}',
    '\u{17B4}',
    '\u{180E}',
    '\u{206A}',
    '\u{2800}',
    '\u{FE0F}',
    '\u{FFF9}',
    '\u{1D173}',
    '\u{E0001}',
    '\u{E0041}', // tags
    '\u{27CB}',
    '\u{2F03}',
    '\u{31D3}',
    '\u{30CE}',
    '\u{FF89}',
    '\u{4E3F}',
    '\u{2AFD}',
    '\u{0337}',
    '\u{0338}', // slash look-alikes
    '\u{27CD}', // backslash look-alike
    '\u{02BA}',
    '\u{2033}',
    '\u{2036}',
    '\u{3003}',
    '\u{05F4}', // quote look-alikes
    '\u{200B}',
    '\u{202E}',
    '\u{2215}',
    '\u{FF0F}',
    '\u{00A0}',
    '\u{FFFD}',
    '\u{0301}',
];

#[test]
fn invisible_and_lookalike_characters_are_quoted_and_read_back() {
    let (_t, root) = tempdir();
    let odd: Vec<String> = ODD_CHARS.iter().map(|c| format!("a{c}b.txt")).collect();
    let plain = [
        "plain.txt",
        "na\u{EF}ve.txt", // NFC
        "\u{65E5}\u{672C}\u{8A9E}.md",
        "\u{444}\u{430}\u{439}\u{43B}.txt",
        "\u{915}\u{93F}\u{924}\u{93E}\u{92C}.txt", // Devanagari with vowel signs
        "caf\u{E9}.txt",                           // NFC
    ];
    let nfd = "cafe\u{301}.txt";
    for n in odd.iter().map(String::as_str).chain(plain).chain([nfd]) {
        write(&root, n, tag(n));
    }
    let f = open(&root, false, None);
    let (_, text) = ok(&f, "glob", json!({"pattern": "*.*"}));
    let (_, ls) = ok(&f, "list_directory", json!({"path": "."}));
    for (c, n) in ODD_CHARS.iter().zip(&odd) {
        let quoted = format!("\"a\\u{{{:x}}}b.txt\"", *c as u32);
        assert!(
            text.contains(&quoted),
            "glob: {c:?} not as {quoted}: {text}"
        );
        assert!(ls.contains(&quoted), "ls: {c:?} not as {quoted}: {ls}");
        assert!(!text.contains(n.as_str()), "glob shows {n:?} raw");
        assert_eq!(content(&f, &quoted), tag(n), "{quoted} reads back");
    }
    for n in plain {
        assert!(
            text.lines().any(|l| l.trim() == n),
            "glob: {n} should be plain: {text}"
        );
        assert_eq!(content(&f, n), tag(n));
    }
    // the NFC and NFD spellings of café no longer read the same
    assert!(text.contains("\"cafe\\u{301}.txt\""), "{text}");
    assert_eq!(content(&f, "\"cafe\\u{301}.txt\""), tag(nfd));
    assert_eq!(content(&f, "caf\u{E9}.txt"), tag("caf\u{E9}.txt"));
}

/// Each default deny example with `s` spelled `ſ` (U+017F) or `k` spelled as the Kelvin
/// sign (U+212A): the same file on a volume that folds case.
fn folded_variants() -> Vec<String> {
    let mut out = Vec::new();
    for p in denied_examples(|s| s.to_string()) {
        for (from, to) in [('s', '\u{17F}'), ('k', '\u{212A}'), ('K', '\u{212A}')] {
            if let Some(i) = p.rfind(from) {
                let mut v = p.clone();
                v.replace_range(i..i + 1, &to.to_string());
                out.push(v);
            }
        }
    }
    out
}

#[test]
fn deny_folds_unicode_case_for_every_default_pattern() {
    let (_t, root) = tempdir();
    let variants = folded_variants();
    assert!(variants.len() > 20, "{variants:?}");
    for v in &variants {
        write(&root, v, "FOLDSECRET\n");
    }
    for extra in [
        "id_r\u{17F}a",
        "x.\u{212A}ey",
        "\u{130}d_rsa",
        "secret\u{17F}.json",
    ] {
        write(&root, extra, "FOLDSECRET\n");
    }
    write(&root, "\u{17F}afe.txt", "fine\n");
    let f = open(&root, false, None);
    for v in variants.iter().map(String::as_str).chain([
        "id_r\u{17F}a",
        "x.\u{212A}ey",
        "\u{130}d_rsa",
        "secret\u{17F}.json",
    ]) {
        for tool in ["read_file", "get_file_info"] {
            let e = run(&f, tool, json!({ "path": v })).expect_err(v);
            assert_eq!(e.code, ErrorCode::DeniedPattern, "{tool} {v:?}: {e:?}");
        }
    }
    let (v, _) = ok(&f, "grep", json!({"pattern": "FOLDSECRET"}));
    assert_eq!(v["files"].as_array().map(Vec::len), Some(0), "{v}");
    let names = listed(&f, ".");
    for v in variants.iter().map(String::as_str).chain([
        "id_r\u{17F}a",
        "x.\u{212A}ey",
        "\u{130}d_rsa",
        "secret\u{17F}.json",
    ]) {
        assert!(!names.iter().any(|n| n == v), "listed {v:?}: {names:?}");
    }
    assert!(names.contains(&"\u{17F}afe.txt".to_string()), "{names:?}");
    assert_eq!(content(&f, "\u{17F}afe.txt"), "fine\n");
}

#[test]
fn confirm_folds_unicode_case_too() {
    let (_t, root) = tempdir();
    write(&root, "ok.txt", "x\n");
    let f = open(&root, true, None);
    for p in [
        "Jen\u{212A}insfile",
        ".github/workflow\u{17F}/ci.yml",
        "ferret.toml",
    ] {
        let e = run(&f, "write_file", json!({"path": p, "content": "x"})).expect_err(p);
        assert_eq!(e.code, ErrorCode::ConfirmationRequired, "{p}: {e:?}");
    }
}

//! Issue 26 item 2: one rule for what exists. Every tool gives the same verdict on
//! ignored, skipped, denied, gitignored, hidden, oversized and symlinked paths, and a
//! listing says what it left out and why.
//!
//! The rule:
//! - denied (secrets, deny rules, links to them): invisible to every walk, counted
//!   nowhere; named explicitly, `DENIED_PATTERN` from every tool;
//! - gitignored: left out of grep, glob, search_files, file_search and list_directory
//!   alike (the listing counts them; `no_ignore` brings them back in grep, glob and the
//!   listing); named explicitly, read like any file;
//! - hidden: left out of walks unless asked (file_search, seed 002, asks by default);
//!   the listing counts them;
//! - skipped (node_modules, /build…): not searched, not entered; the listing shows the
//!   folder marked `skipped`; named explicitly, read like any file;
//! - a link leading outside: never followed by a walk; the listing shows it marked
//!   `outside`; named explicitly, `PATH_ESCAPE` from every tool;
//! - oversized (over max_file_size): searched and listed; a whole read is refused with
//!   the same `FILE_TOO_LARGE` by read_file and read_files; a ranged read is the same in
//!   both.

use crate::util;
use ferret::config::{Config, Mode};
use ferret::{CallOptions, Ferret, Session};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::os::unix::fs::symlink;
use std::path::Path;

const MAX: u64 = 4096;

fn ferret_on(root: &Path) -> Ferret {
    let mut c = Config::defaults(Mode::Cli);
    c.roots = vec![root.to_path_buf()];
    c.max_file_size = MAX;
    Ferret::new(c).expect("open workspace")
}

fn call(f: &Ferret, tool: &str, args: Value) -> Result<Value, ferret::ToolError> {
    f.call(
        &Session::new("t", "test"),
        tool,
        args,
        CallOptions::default(),
    )
    .map(|o| o.structured)
}

/// The text a model reads.
fn text(f: &Ferret, tool: &str, args: Value) -> String {
    f.call(
        &Session::new("t", "test"),
        tool,
        args,
        CallOptions::default(),
    )
    .map(|o| o.text)
    .unwrap_or_else(|e| format!("error {}", e.code.as_str()))
}

/// A tree with one path of each kind; every file says "needle".
fn tree() -> (tempfile::TempDir, std::path::PathBuf) {
    let (t, base) = util::tempdir();
    let root = base.join("ws");
    let outside = base.join("outside");
    util::write(&outside, "o.txt", "needle outside\n");
    util::write(&root, "plain.txt", "needle plain\n");
    util::write(&root, ".gitignore", "*.log\ngen/\n");
    util::write(&root, "debug.log", "needle log\n");
    util::write(&root, "gen/out.txt", "needle gen\n");
    util::write(&root, "node_modules/pkg/index.js", "needle nm\n");
    util::write(&root, "build/out.txt", "needle build\n");
    util::write(&root, ".env", "needle=secret\n");
    util::write(&root, "id_rsa", "needle key\n");
    util::write(&root, ".hidden.txt", "needle hidden\n");
    // Short lines, as a log: its first lines fit any line cap (the issue's 13 MB file
    // that read_files answered with its first 400 lines).
    let big = format!("needle big\n{}", "x\n".repeat(MAX as usize * 2));
    util::write(&root, "big.txt", big);
    symlink("../outside", root.join("out_dir")).expect("symlink");
    symlink("../outside/o.txt", root.join("out_file")).expect("symlink");
    symlink("plain.txt", root.join("in_link")).expect("symlink");
    symlink("id_rsa", root.join("to_secret")).expect("symlink");
    (t, root)
}

fn files_of(v: &Value, list: &str, key: Option<&str>) -> Vec<String> {
    v[list]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| match key {
                    Some(k) => e[k].as_str().unwrap_or_default().to_string(),
                    None => e.as_str().unwrap_or_default().to_string(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A walking tool's verdict on `path`: found or absent.
fn walk_verdict(found: &[String], path: &str) -> &'static str {
    if found.iter().any(|f| f == path) {
        "found"
    } else {
        "absent"
    }
}

/// A path tool's verdict: ok or the error code.
fn path_verdict(r: Result<Value, ferret::ToolError>) -> String {
    match r {
        Ok(_) => "ok".into(),
        Err(e) => e.code.as_str().into(),
    }
}

/// read_files' verdict on one path: ok or the error code in its place.
fn read_files_verdict(f: &Ferret, path: &str) -> String {
    let v = call(f, "read_files", json!({ "paths": [path] })).expect("read_files answers");
    let entry = &v["files"][0];
    match entry["error"]["code"].as_str() {
        Some(c) => c.into(),
        None => "ok".into(),
    }
}

#[test]
fn every_tool_gives_the_same_verdict_on_every_kind_of_path() {
    let (_t, root) = tree();
    let f = ferret_on(&root);

    // One walk per walking tool, over the whole root.
    let grep = files_of(
        &call(
            &f,
            "grep",
            json!({"pattern": "needle", "output_mode": "files_with_matches"}),
        )
        .expect("grep"),
        "files",
        Some("path"),
    );
    let glob = files_of(
        &call(&f, "glob", json!({"pattern": "**/*"})).expect("glob"),
        "files",
        None,
    );
    let search_files = files_of(
        &call(
            &f,
            "search_files",
            json!({"pattern": "needle", "max_results": 100}),
        )
        .expect("search_files"),
        "files",
        Some("path"),
    );
    let file_search = files_of(
        &call(&f, "file_search", json!({"query": "needle"})).expect("file_search"),
        "matches",
        Some("path"),
    );
    let listing = call(
        &f,
        "list_directory",
        json!({"path": ".", "recursive": true}),
    )
    .expect("list_directory");
    let listed: BTreeMap<String, Value> = listing["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap_or_default().to_string(),
                e.clone(),
            )
        })
        .collect();
    let list_verdict = |name: &str| -> String {
        match listed.get(name) {
            None => "absent".into(),
            Some(e) => match e["note"].as_str() {
                Some(n) => format!("listed:{n}"),
                None => "listed".into(),
            },
        }
    };

    // (kind, path named explicitly, the name a listing shows for it)
    let rows = [
        ("plain", "plain.txt", "plain.txt"),
        ("gitignored file", "debug.log", "debug.log"),
        ("gitignored dir", "gen/out.txt", "gen"),
        ("skipped dir", "node_modules/pkg/index.js", "node_modules"),
        ("skipped build", "build/out.txt", "build"),
        ("denied", "id_rsa", "id_rsa"),
        ("denied hidden", ".env", ".env"),
        ("link to denied", "to_secret", "to_secret"),
        ("hidden", ".hidden.txt", ".hidden.txt"),
        ("oversized", "big.txt", "big.txt"),
        ("link outside (dir)", "out_dir/o.txt", "out_dir"),
        ("link outside (file)", "out_file", "out_file"),
        ("link inside", "in_link", "in_link"),
    ];
    let mut got = Vec::new();
    for (kind, path, name) in rows {
        got.push(format!(
            "{kind:20} grep={} glob={} search_files={} file_search={} list={} read_file={} read_files={} file_exists={} get_file_info={}",
            walk_verdict(&grep, path),
            walk_verdict(&glob, path),
            walk_verdict(&search_files, path),
            walk_verdict(&file_search, path),
            list_verdict(name),
            path_verdict(call(&f, "read_file", json!({ "path": path }))),
            read_files_verdict(&f, path),
            path_verdict(call(&f, "file_exists", json!({ "path": path }))),
            path_verdict(call(&f, "get_file_info", json!({ "path": path }))),
        ));
    }
    let want = [
        "plain                grep=found glob=found search_files=found file_search=found list=listed read_file=ok read_files=ok file_exists=ok get_file_info=ok",
        "gitignored file      grep=absent glob=absent search_files=absent file_search=absent list=absent read_file=ok read_files=ok file_exists=ok get_file_info=ok",
        "gitignored dir       grep=absent glob=absent search_files=absent file_search=absent list=absent read_file=ok read_files=ok file_exists=ok get_file_info=ok",
        "skipped dir          grep=absent glob=absent search_files=absent file_search=absent list=listed:skipped read_file=ok read_files=ok file_exists=ok get_file_info=ok",
        "skipped build        grep=absent glob=absent search_files=absent file_search=absent list=listed:skipped read_file=ok read_files=ok file_exists=ok get_file_info=ok",
        "denied               grep=absent glob=absent search_files=absent file_search=absent list=absent read_file=DENIED_PATTERN read_files=DENIED_PATTERN file_exists=DENIED_PATTERN get_file_info=DENIED_PATTERN",
        "denied hidden        grep=absent glob=absent search_files=absent file_search=absent list=absent read_file=DENIED_PATTERN read_files=DENIED_PATTERN file_exists=DENIED_PATTERN get_file_info=DENIED_PATTERN",
        "link to denied       grep=absent glob=absent search_files=absent file_search=absent list=absent read_file=DENIED_PATTERN read_files=DENIED_PATTERN file_exists=DENIED_PATTERN get_file_info=DENIED_PATTERN",
        // file_search keeps seed 002's rule: hidden files are searched by default.
        "hidden               grep=absent glob=absent search_files=absent file_search=found list=absent read_file=ok read_files=ok file_exists=ok get_file_info=ok",
        "oversized            grep=found glob=found search_files=found file_search=found list=listed read_file=FILE_TOO_LARGE read_files=FILE_TOO_LARGE file_exists=ok get_file_info=ok",
        "link outside (dir)   grep=absent glob=absent search_files=absent file_search=absent list=listed:outside read_file=PATH_ESCAPE read_files=PATH_ESCAPE file_exists=PATH_ESCAPE get_file_info=PATH_ESCAPE",
        "link outside (file)  grep=absent glob=absent search_files=absent file_search=absent list=listed:outside read_file=PATH_ESCAPE read_files=PATH_ESCAPE file_exists=PATH_ESCAPE get_file_info=PATH_ESCAPE",
        // Walks never follow a link (rg's default); the listing shows it as a link.
        "link inside          grep=absent glob=absent search_files=absent file_search=absent list=listed read_file=ok read_files=ok file_exists=ok get_file_info=ok",
    ];
    assert_eq!(got, want, "\n{}", got.join("\n"));

    // The listing's account: the two gitignored entries and the two hidden names that
    // are not secrets (.gitignore, .hidden.txt); the secrets counted nowhere.
    assert_eq!(
        listing["left_out"],
        json!({"gitignored": 2, "hidden": 2}),
        "{listing}"
    );
    assert_eq!(
        listing["total_count"],
        listed.len(),
        "everything counted is listed: {listing}"
    );
    // Nothing below a skipped folder or an outside link is listed (not entered).
    for top in ["node_modules", "build", "out_dir", "gen"] {
        assert!(
            !listed.keys().any(|n| n.starts_with(&format!("{top}/"))),
            "{top} is not entered: {listing}"
        );
    }
}

#[test]
fn no_ignore_brings_back_the_same_files_in_grep_glob_and_the_listing() {
    let (_t, root) = tree();
    let f = ferret_on(&root);
    let grep = files_of(
        &call(
            &f,
            "grep",
            json!({"pattern": "needle", "output_mode": "files_with_matches", "no_ignore": true}),
        )
        .expect("grep"),
        "files",
        Some("path"),
    );
    let glob = files_of(
        &call(&f, "glob", json!({"pattern": "**/*", "no_ignore": true})).expect("glob"),
        "files",
        None,
    );
    let listing = call(
        &f,
        "list_directory",
        json!({"path": ".", "recursive": true, "no_ignore": true}),
    )
    .expect("list_directory");
    let names = files_of(&listing, "entries", Some("name"));
    for p in ["debug.log", "gen/out.txt"] {
        assert!(grep.contains(&p.to_string()), "grep -u finds {p}: {grep:?}");
        assert!(glob.contains(&p.to_string()), "glob -u finds {p}: {glob:?}");
        assert!(names.contains(&p.to_string()), "ls -u lists {p}: {names:?}");
    }
    // Nothing gitignored is left out any more; only the hidden names are counted, and
    // no_ignore never brings back a secret.
    assert_eq!(listing["left_out"], json!({"hidden": 2, "gitignored": 0}));
    for secret in ["id_rsa", ".env", "to_secret"] {
        assert!(!names.contains(&secret.to_string()), "{names:?}");
        assert!(!grep.contains(&secret.to_string()), "{grep:?}");
        assert!(!glob.contains(&secret.to_string()), "{glob:?}");
    }
}

/// The files a recursive listing shows (no mark) are exactly the files glob finds, from
/// every directory, under ignore files at several levels (`.gitignore`, `.ignore`,
/// negations, a directory rule, rules above the listed directory), with and without
/// `no_ignore`.
#[test]
fn a_recursive_listing_lists_exactly_the_files_glob_finds_from_every_directory() {
    let (_t, root) = util::tempdir();
    util::write(&root, ".gitignore", "*.log\n!keep.log\ncache/\n");
    util::write(&root, "a.txt", "x");
    util::write(&root, "a.log", "x");
    util::write(&root, "keep.log", "x");
    util::write(&root, "src/.ignore", "*.tmp\n");
    util::write(&root, "src/m.rs", "x");
    util::write(&root, "src/m.tmp", "x");
    util::write(&root, "src/deep/x.log", "x");
    util::write(&root, "src/deep/keep.log", "x");
    util::write(&root, "src/deep/.gitignore", "!*.log\nlocal.txt\n");
    util::write(&root, "src/deep/local.txt", "x");
    util::write(&root, "src/deep/y.rs", "x");
    util::write(&root, "cache/c.txt", "x");
    util::write(&root, "src/cache/d.txt", "x");
    util::write(&root, "node_modules/n.js", "x");
    util::write(&root, "docs/target/t.md", "x");
    util::write(&root, "id_rsa", "x");
    let f = ferret_on(&root);
    for no_ignore in [false, true] {
        for dir in [".", "src", "src/deep", "docs", "node_modules", "cache"] {
            let listing = call(
                &f,
                "list_directory",
                json!({"path": dir, "recursive": true, "no_ignore": no_ignore}),
            )
            .expect("list");
            let prefix = if dir == "." {
                String::new()
            } else {
                format!("{dir}/")
            };
            let mut listed: Vec<String> = listing["entries"]
                .as_array()
                .expect("entries")
                .iter()
                .filter(|e| e["type"] == "file" && e.get("note").is_none())
                .map(|e| format!("{prefix}{}", e["name"].as_str().unwrap_or_default()))
                .collect();
            listed.sort();
            let mut found = files_of(
                &call(
                    &f,
                    "glob",
                    json!({"pattern": "**/*", "path": dir, "no_ignore": no_ignore}),
                )
                .expect("glob"),
                "files",
                None,
            );
            found.sort();
            assert_eq!(
                listed, found,
                "list_directory {dir} (no_ignore {no_ignore}) vs glob: {listing}"
            );
        }
    }
}

/// A hostile repository's ignore files cannot hide from a listing what glob shows, nor
/// hang it: an ignore file that is a link (to a file outside saying `*`), a FIFO, or a
/// directory is not read, by the listing as by the search walker.
#[test]
fn hostile_ignore_files_are_not_read_by_the_listing_either() {
    let (_t, base) = util::tempdir();
    let root = base.join("ws");
    util::write(&base, "outside/ign", "*\n");
    util::write(&root, "a/f.txt", "x");
    symlink("../../outside/ign", root.join("a/.gitignore")).expect("symlink");
    util::write(&root, "b/f.txt", "x");
    let fifo = root.join("b/.ignore");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo")
            .success()
    );
    util::write(&root, "c/f.txt", "x");
    std::fs::create_dir_all(root.join("c/.gitignore")).expect("dir");
    let f = ferret_on(&root);
    for dir in [".", "a", "b", "c"] {
        let listing = call(
            &f,
            "list_directory",
            json!({"path": dir, "recursive": true}),
        )
        .expect("list answers");
        let files: Vec<String> = listing["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .filter(|e| e["type"] == "file")
            .map(|e| e["name"].as_str().unwrap_or_default().to_string())
            .collect();
        let glob = call(&f, "glob", json!({"pattern": "**/f.txt", "path": dir})).expect("glob");
        assert_eq!(
            files.len() as u64,
            glob["count"].as_u64().unwrap_or(99),
            "{dir}: {listing} vs {glob}"
        );
        assert!(
            !files.is_empty(),
            "{dir}: nothing hidden by a hostile ignore file"
        );
    }
}

/// Secrets are counted nowhere: a directory holding only secrets (names, dotted names,
/// links to them) lists as empty, with no count of anything left out, in the text too.
#[test]
fn a_listing_never_counts_or_names_a_secret() {
    let (_t, root) = util::tempdir();
    util::write(&root, "keys/id_rsa", "x");
    util::write(&root, "keys/.env", "x");
    util::write(&root, "keys/.env.production", "x");
    util::write(&root, "keys/server.pem", "x");
    symlink("id_rsa", root.join("keys/plain_name")).expect("symlink");
    symlink(".env", root.join("keys/.dotted_link")).expect("symlink");
    // A hostile ignore file above, whitelisting everything, brings no secret back.
    util::write(
        &root,
        ".gitignore",
        "!*\n!.env\n!id_rsa\n!*.pem\n!keys/**\n",
    );
    let f = ferret_on(&root);
    for include_hidden in [false, true] {
        for no_ignore in [false, true] {
            let args =
                json!({"path": "keys", "include_hidden": include_hidden, "no_ignore": no_ignore});
            let v = call(&f, "list_directory", args.clone()).expect("list");
            assert_eq!(v["total_count"], 0, "{v}");
            assert!(v.get("left_out").is_none(), "nothing counted: {v}");
            let t = text(&f, "list_directory", args);
            for leak in [
                "id_rsa",
                ".env",
                "pem",
                "plain_name",
                "dotted",
                "hidden",
                "gitignored",
            ] {
                assert!(!t.contains(leak), "{leak} in {t}");
            }
        }
    }
}

/// The listing's text says what it left out and why, and marks what it shows but
/// searches pass by; a file named like a mark cannot pass for one.
#[test]
fn the_listing_text_accounts_for_what_it_left_out() {
    let (_t, root) = tree();
    util::write(&root, "x  (skipped: not searched)", "x");
    let f = ferret_on(&root);
    let t = text(&f, "list_directory", json!({"path": "."}));
    for says in [
        "  node_modules/  (skipped: dependency/build folder, not searched; list it by name)\n",
        "  build/  (skipped: dependency/build folder, not searched; list it by name)\n",
        "  out_dir@  (outside the workspace: not followed)\n",
        "  out_file@  (outside the workspace: not followed)\n",
        "  in_link@\n",
        "[2 gitignored not listed (grep and glob skip them too); no_ignore: true lists them]\n",
        "[2 hidden not listed; include_hidden: true lists them]\n",
        // A name that looks like a mark is quoted.
        "  \"x  (skipped: not searched)\"",
    ] {
        assert!(t.contains(says), "{says:?} in:\n{t}");
    }
    for never in ["id_rsa", ".env", "to_secret", "debug.log", "gen/"] {
        assert!(!t.contains(never), "{never} in:\n{t}");
    }
    // The CLI's `ls` is the same tool: -u lists the gitignored entries.
    let out = util::bin()
        .args(["--root"])
        .arg(&root)
        .args(["ls", "-u", "."])
        .output()
        .expect("run ferret");
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(
        s.contains("  debug.log  (") && s.contains("  gen/\n"),
        "{s}"
    );
    assert!(!s.contains("gitignored"), "{s}");
}

/// One size limit for read_file and read_files: a file over max_file_size read from its
/// start is refused by both with the same error, whatever the line cap, alone or
/// through a glob; a ranged read (an offset) is the same part of the file in both.
#[test]
fn read_file_and_read_files_mean_the_same_by_the_size_limit() {
    let (_t, root) = tree();
    // Just over the limit, and far over it with long lines or a single line.
    util::write(&root, "just_over.txt", "y\n".repeat(MAX as usize / 2 + 1));
    util::write(&root, "one_line.txt", "z".repeat(MAX as usize * 2));
    util::write(&root, "at_limit.txt", "w".repeat(MAX as usize));
    let f = ferret_on(&root);
    for name in ["big.txt", "just_over.txt", "one_line.txt"] {
        let single = call(&f, "read_file", json!({ "path": name })).expect_err("too large");
        assert_eq!(single.code.as_str(), "FILE_TOO_LARGE");
        for args in [
            json!({ "paths": [name] }),
            json!({ "paths": [name], "max_lines_each": 1 }),
            json!({ "paths": [name], "max_lines_each": 0 }),
            json!({ "paths": ["*.txt"] }),
        ] {
            let v = call(&f, "read_files", args.clone()).expect("read_files answers");
            let entry = v["files"]
                .as_array()
                .expect("files")
                .iter()
                .find(|e| e["path"] == name)
                .unwrap_or_else(|| panic!("{name} in {v}"))
                .clone();
            assert_eq!(entry["error"]["code"], "FILE_TOO_LARGE", "{args}: {v}");
            assert_eq!(entry["error"]["message"], single.message.as_str(), "{args}");
            // The hint names each tool's own way to read in parts.
            let hint = entry["error"]["hint"].as_str().unwrap_or_default();
            assert!(hint.contains("max_lines_each"), "{args}: {hint}");
            assert!(
                single.hint.as_deref().unwrap_or_default().contains("limit"),
                "{single:?}"
            );
            assert!(entry.get("file").is_none(), "no head of the file: {entry}");
        }
        // A ranged read is the same in both.
        let one = call(
            &f,
            "read_file",
            json!({"path": name, "offset": 1, "limit": 1}),
        );
        let many = call(
            &f,
            "read_files",
            json!({"paths": [name], "offset": 1, "max_lines_each": 1}),
        )
        .expect("read_files answers");
        match one {
            Ok(one) => assert_eq!(many["files"][0]["file"]["content"], one["content"]),
            Err(e) => assert_eq!(many["files"][0]["error"]["code"], e.code.as_str()),
        }
    }
    // At the limit: read whole by both.
    let one = call(&f, "read_file", json!({"path": "at_limit.txt"})).expect("at the limit");
    let many = call(&f, "read_files", json!({"paths": ["at_limit.txt"]})).expect("read_files");
    assert_eq!(many["files"][0]["file"]["content"], one["content"]);
}

/// An ignore file too large to use is not used by the listing either, and the listing
/// says so, as glob does: the files it would hide are listed, never silently.
#[test]
fn an_ignore_file_not_used_is_reported_by_the_listing_as_by_glob() {
    let (_t, root) = util::tempdir();
    let mut big = String::from("*\n");
    big.push('#');
    big.push_str(&"x".repeat(1 << 20));
    big.push('\n');
    util::write(&root, "sub/.gitignore", big);
    util::write(&root, "sub/f.txt", "x");
    let f = ferret_on(&root);
    let glob = call(&f, "glob", json!({"pattern": "**/f.txt"})).expect("glob");
    assert_eq!(glob["files"], json!(["sub/f.txt"]), "{glob}");
    let warned = glob["warnings"].to_string();
    assert!(warned.contains("ignore file not used"), "{glob}");
    let v = call(
        &f,
        "list_directory",
        json!({"path": ".", "recursive": true}),
    )
    .expect("list");
    let names = files_of(&v, "entries", Some("name"));
    assert!(names.contains(&"sub/f.txt".to_string()), "{v}");
    assert!(
        v["unreadable"].to_string().contains("ignore file not used"),
        "{v}"
    );
    let t = text(
        &f,
        "list_directory",
        json!({"path": ".", "recursive": true}),
    );
    assert!(t.contains("ignore file not used"), "{t}");
}

/// The listing reads ignore files under the search walker's caps: a tree of hostile
/// ignore files (thousands of costly wildcard lines) is listed by its deadline, and what
/// was not used is said, as grep says it.
#[test]
fn a_listing_keeps_the_walkers_caps_on_hostile_ignore_files() {
    let (_t, root) = util::tempdir();
    let lines = |n: usize, tag: &str| -> String {
        (0..n)
            .map(|i| format!("*{tag}{i}*/**/x{i}?.log\n"))
            .collect()
    };
    let each = lines(600, "t");
    for d in 0..12 {
        util::write(&root, &format!("d{d:02}/.gitignore"), &each);
        util::write(&root, &format!("d{d:02}/e/.ignore"), &each);
        util::write(&root, &format!("d{d:02}/e/f.txt"), "x\n");
    }
    util::write(&root, ".gitignore", lines(600, "r"));
    let started = std::time::Instant::now();
    let out = util::bin()
        .arg("--root")
        .arg(&root)
        .args(["--set", "request_timeout=2s", "call", "list_directory"])
        .arg(json!({"path": ".", "recursive": true}).to_string())
        .output()
        .expect("run ferret");
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(took < std::time::Duration::from_secs(8), "took {took:?}");
    assert!(
        stdout.contains("TIMEOUT") || stdout.contains("total_count"),
        "{stdout}"
    );
    // The call's ignore-file budget ran out: the listing says so.
    assert!(stdout.contains("in all"), "{stdout}");
}

/// `allowed_extensions` is part of the one rule: a file whose extension is not served is
/// refused when named, and no walk reads it (grep), names it (glob, the seed tools) or
/// lists it; the listing counts it. Before, grep printed lines of files a read refused.
#[test]
fn a_file_whose_extension_is_not_served_is_found_by_no_tool() {
    let (_t, root) = util::tempdir();
    util::write(&root, "README.md", "NEEDLE in the readme\n");
    util::write(&root, "src/lib.rs", "// NEEDLE in rust\n");
    util::write(&root, "src/notes.TXT", "NEEDLE in notes\n");
    util::write(&root, "Makefile", "NEEDLE: all\n");
    let mut c = Config::defaults(Mode::Cli);
    c.roots = vec![root.clone()];
    c.allowed_extensions = vec!["rs".into()];
    let f = Ferret::new(c).expect("open workspace");
    for (tool, args, list, key) in [
        ("grep", json!({"pattern": "NEEDLE"}), "files", Some("path")),
        (
            "grep",
            json!({"pattern": "NEEDLE", "no_ignore": true, "include_hidden": true}),
            "files",
            Some("path"),
        ),
        ("glob", json!({"pattern": "**/*"}), "files", None),
        (
            "search_files",
            json!({"pattern": "NEEDLE"}),
            "files",
            Some("path"),
        ),
        (
            "file_search",
            json!({"query": "needle"}),
            "matches",
            Some("path"),
        ),
    ] {
        let v = call(&f, tool, args.clone()).unwrap_or_else(|e| panic!("{tool}: {e:?}"));
        let mut found = files_of(&v, list, key);
        found.sort();
        assert_eq!(found, ["src/lib.rs"], "{tool} {args}: {v}");
    }
    for name in ["README.md", "src/notes.TXT", "Makefile"] {
        let e = call(&f, "read_file", json!({ "path": name })).expect_err(name);
        assert_eq!(e.code.as_str(), "EXTENSION_DENIED", "{name}");
    }
    let v = call(&f, "list_directory", json!({"path": "src"})).expect("list");
    let names: Vec<&str> = v["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter_map(|e| e["name"].as_str())
        .collect();
    assert_eq!(names, ["lib.rs"], "{v}");
    assert_eq!(v["left_out"]["not_allowed"], 1, "{v}");
    let t = text(&f, "list_directory", json!({"path": "."}));
    assert!(t.contains("2 not listed: their extension"), "{t}");
    assert!(!t.contains("README"), "{t}");
}

/// Nor can a change make such a file: write_file, move, apply_patch (text and JSON,
/// Add File and Move to) refuse a new name whose extension is not served, before
/// anything is made (no parent directories left behind), dry runs alike. Before, the
/// check ran only on names that existed, so an agent limited to `*.md` could plant a
/// `Makefile` or `setup.py` and then could not undo it. A directory's name is no file's:
/// moving one to a dotted name is allowed.
#[test]
fn a_change_never_creates_a_file_whose_extension_is_not_served() {
    let (_t, root) = util::tempdir();
    util::write(&root, "a.md", "alpha\n");
    util::write(&root, "b.md", "beta\n");
    util::write(&root, "docs/x.md", "x\n");
    let mut c = Config::defaults(Mode::Cli);
    c.roots = vec![root.clone()];
    c.allowed_extensions = vec!["md".into()];
    c.allow_write = true;
    c.state_dir = Some(root.parent().unwrap().join("state"));
    let f = Ferret::new(c).expect("open workspace");
    let before = util::snapshot(&root);
    let patch_add = "*** Begin Patch\n*** Add File: setup.py\n+import os\n*** End Patch\n";
    let patch_move = "*** Begin Patch\n*** Update File: a.md\n*** Move to: a.py\n@@\n-alpha\n+alpha2\n*** End Patch\n";
    for dry in [true, false] {
        for (tool, args) in [
            (
                "write_file",
                json!({"path": "evil.sh", "content": "rm -rf ~\n"}),
            ),
            (
                "write_file",
                json!({"path": "Makefile", "content": "all:\n"}),
            ),
            ("write_file", json!({"path": "x.md.", "content": "x\n"})),
            (
                "write_file",
                json!({"path": "n1/n2/x.sh", "content": "x\n"}),
            ),
            ("move", json!({"source": "a.md", "destination": "a.py"})),
            (
                "move",
                json!({"source": "b.md", "destination": "new/dir/b.sh"}),
            ),
            ("apply_patch", json!({ "patch": patch_add })),
            ("apply_patch", json!({ "patch": patch_move })),
            (
                "apply_patch",
                json!({"changes": [{"path": "newnoext", "create": "x\n"}]}),
            ),
            (
                "apply_patch",
                json!({"changes": [{"path": "b.md", "move_to": "b.rb"}]}),
            ),
        ] {
            let mut args = args;
            args["dry_run"] = json!(dry);
            let e = call(&f, tool, args.clone()).expect_err("refused");
            assert_eq!(e.code.as_str(), "EXTENSION_DENIED", "{tool} {args}: {e:?}");
            assert_eq!(
                util::snapshot(&root),
                before,
                "{tool} {args} made something"
            );
        }
    }
    // A directory may take a dotted name; what it holds keeps its own extensions.
    call(
        &f,
        "move",
        json!({"source": "docs", "destination": "docs.old"}),
    )
    .expect("a directory's name is no file's");
    assert!(root.join("docs.old/x.md").is_file());
}

/// Nor can an undo make one: undoing a move back to a name whose extension is not
/// served, or a delete of such a file, is refused before any question (dry run too),
/// as undoing an edit of it was. A directory moved or deleted may come back under its
/// dotted name.
#[test]
fn an_undo_never_brings_back_a_file_whose_extension_is_not_served() {
    let (_t, base) = util::tempdir();
    let root = base.join("root");
    let state = base.join("state");
    util::write(&root, "Makefile", "all:\n\techo pwned\n");
    util::write(&root, "run.sh", "x\n");
    util::write(&root, "tools.d/a.md", "a\n");
    let open = |allowed: &[&str]| {
        let mut c = Config::defaults(Mode::Cli);
        c.roots = vec![root.clone()];
        c.allow_write = true;
        c.state_dir = Some(state.clone());
        c.allowed_extensions = allowed.iter().map(|s| s.to_string()).collect();
        Ferret::new(c).expect("open workspace")
    };
    let free = open(&[]);
    let id = |v: Value| v["change_id"].as_u64().expect("a change id");
    let moved = id(call(
        &free,
        "move",
        json!({"source": "Makefile", "destination": "notes.md"}),
    )
    .expect("move"));
    let deleted = id(call(&free, "file_delete", json!({"path": "run.sh"})).expect("delete"));
    let dir_moved = id(call(
        &free,
        "move",
        json!({"source": "tools.d", "destination": "docs"}),
    )
    .expect("move a directory"));
    let strict = open(&["md"]);
    let before = util::snapshot(&root);
    for change in [moved, deleted] {
        for dry in [true, false] {
            let e = call(
                &strict,
                "undo",
                json!({"id": change, "dry_run": dry, "force": true}),
            )
            .expect_err("refused");
            assert_eq!(e.code.as_str(), "EXTENSION_DENIED", "undo {change}: {e:?}");
            assert_eq!(
                util::snapshot(&root),
                before,
                "undo {change} changed something"
            );
        }
    }
    call(&strict, "undo", json!({ "id": dir_moved })).expect("a directory comes back");
    assert!(root.join("tools.d/a.md").is_file());
}

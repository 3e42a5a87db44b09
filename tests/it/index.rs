//! The trigram index against the scan: on a generated tree, every search answers the
//! same with the index as without it (paths, order, lines, counts, totals), and goes on
//! doing so while files are created, changed, renamed and deleted behind its back.

use crate::util::{call, tempdir, write};
use ferret::config::{Config, Mode};
use ferret::search::index::{Candidates, Index};
use ferret::search::{Base, SearchEnv, plan};
use ferret::{CancelToken, Ferret};
use serde_json::{Value, json};
use std::path::Path;

/// A small deterministic generator (no dependency, same tree every run).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const WORDS: &[&str] = &[
    "alpha",
    "Beta",
    "GAMMA_delta",
    "parse_args",
    "fn",
    "struct",
    "TODO",
    "fixme",
    "ünïcode",
    "日本語",
    "x",
    "y1",
    "foo.bar",
    "a+b",
    "(paren)",
    "[bracket]",
    "return",
    "static",
    "int",
    "__init",
    "kmalloc",
    "spin_lock",
    "mutex_unlock",
    "0x1f",
    "42",
    "-->",
    "#define",
    "Hello",
    "WORLD",
    "quux",
    "Zebra",
    "zebra",
    "tab\there",
    "snake_case_name",
    "CamelCase",
    "ÄÖÜ",
    "émile",
    "Ωmega",
    "end;",
];

const SEARCH_MAX: u64 = 100_000;

fn config(root: &Path) -> Config {
    let mut c = Config::defaults(Mode::Cli);
    c.roots = vec![root.to_path_buf()];
    c.search_max_file_size = SEARCH_MAX;
    c.state_dir = Some(crate::util::scratch_state());
    c
}

/// ~260 files: nested directories, several extensions, hidden and ignored files, CRLF,
/// a binary file, an empty one, one over the search size limit.
fn tree(root: &Path) -> Vec<String> {
    let mut rng = Lcg(0x5eed);
    let mut lines_seen = Vec::new();
    let exts = ["rs", "c", "txt", "md", "h"];
    for i in 0..250 {
        let dir = format!("d{}/s{}", i % 7, i % 3);
        let name = format!("{dir}/f{i}.{}", exts[i % exts.len()]);
        let mut text = String::new();
        for _ in 0..(1 + rng.below(40)) {
            let mut line = String::new();
            for _ in 0..rng.below(9) {
                line.push_str(WORDS[rng.below(WORDS.len())]);
                line.push(if rng.below(5) == 0 { '_' } else { ' ' });
            }
            lines_seen.push(line.clone());
            text.push_str(&line);
            text.push_str(if i % 11 == 0 { "\r\n" } else { "\n" });
        }
        write(root, &name, text);
    }
    write(root, ".hidden.txt", "alpha hidden Beta\n");
    write(root, ".gitignore", "ignored/\n");
    write(root, "ignored/skip.txt", "alpha ignored\n");
    write(root, "empty.txt", "");
    let mut bin = "alpha kmalloc\n".repeat(10).into_bytes();
    bin.extend_from_slice(b"\0binary kmalloc\n");
    write(root, "data.bin", bin);
    write(
        root,
        "big.txt",
        "spin_lock big\n".repeat((SEARCH_MAX as usize / 14) + 100),
    );
    lines_seen
}

/// Literals sampled from the tree's lines (some cut mid-word), a few absent ones, and
/// regexes with and without usable literals.
fn patterns(lines: &[String]) -> Vec<String> {
    let mut rng = Lcg(42);
    let mut out = Vec::new();
    while out.len() < 160 {
        let line = &lines[rng.below(lines.len())];
        let chars: Vec<char> = line.chars().collect();
        if chars.len() < 4 {
            continue;
        }
        let start = rng.below(chars.len() - 3);
        let len = 3 + rng.below((chars.len() - start - 2).min(14));
        let s: String = chars[start..(start + len).min(chars.len())]
            .iter()
            .collect();
        if !s.trim().is_empty() && !out.contains(&s) {
            out.push(s);
        }
    }
    for absent in ["zzqqxx", "nothere_at_all", "ALPHAZ", "日本人"] {
        out.push(absent.to_string());
    }
    for re in [
        r"parse_\w+",
        r"fn\s+\w+",
        r"TODO|fixme",
        r"^struct",
        r"\d{2,}",
        r"(?i)gamma_DELTA",
        r"alpha.*Beta",
        r"[A-Z]{3,}_",
        r"^$",
        r"\w+",
        r"^",
        r".",
        r"ü",
        r"日本",
        r"a\+b",
        r"\(paren\)",
        r"x$",
        r"\bfoo\b",
        r"spin_(lock|unlock)",
        r"mutex_\w+lock",
        r"0x[0-9a-f]+",
        r"Zebra|zebra",
        r"(?i)zebra",
        r"[Hh]ello\s+WORLD",
        r"kmalloc\b",
        r"__init\s+\w",
        r"#define\s+\S+",
        r"tab\there",
        r"snake_\w+_name",
        r"[^ ]+Case",
        r"ÄÖÜ",
        r"(?i)äöü",
        r"émile|Ωmega",
        r"end;$",
        r"y1 x",
        r"(alpha|beta) (gamma|delta)",
        r"a.c",
        r"qu+x",
        r"return\s*\d*",
        r"static int",
        r"-->\s",
        r"\[bracket\]\s*\(",
        r"Beta\r$",
        r"f[0-9]+",
        r"(?s)alpha.Beta",
        r"\bint\b.*\bstatic\b",
        r"binary",
        r"hidden",
        r"ignored",
        r"big",
    ] {
        out.push(re.to_string());
    }
    out
}

/// The call's structured result without the field saying which engine answered.
fn grep(f: &Ferret, args: Value) -> Value {
    let mut v = match call(f, "grep", args.clone()) {
        Ok(v) => v,
        Err(e) => json!({ "error": e.code.as_str() }),
    };
    if let Some(o) = v.as_object_mut() {
        o.remove("engine");
    }
    v
}

/// Every pattern, in several modes, with and without the index: the same answers.
fn assert_parity(indexed: &Ferret, scan: &Ferret, pats: &[String]) -> usize {
    let mut compared = 0;
    for (i, p) in pats.iter().enumerate() {
        let literal = !p.contains(['\\', '^', '$', '|', '(', '[', '*', '+', '?', '.', '{']);
        let mut variants = vec![
            json!({ "pattern": p, "output_mode": "content", "max_results": 0 }),
            json!({ "pattern": p, "ignore_case": true, "output_mode": "count", "max_results": 0 }),
        ];
        match i % 5 {
            0 => variants.push(json!({ "pattern": p, "glob": "*.rs", "context": 1 })),
            4 => variants.push(json!({ "pattern": p, "glob": ["!*.md", "!d2"], "path": "d2" })),
            1 => variants
                .push(json!({ "pattern": p, "path": "d1", "output_mode": "files_with_matches" })),
            2 => variants
                .push(json!({ "pattern": p, "include_hidden": true, "output_mode": "content" })),
            _ => variants.push(json!({ "pattern": p, "multiline": true, "output_mode": "count" })),
        }
        if literal {
            variants.push(json!({ "pattern": p, "fixed_strings": true, "output_mode": "content" }));
        } else {
            variants.push(json!({ "pattern": p, "fixed_strings": true, "ignore_case": true }));
        }
        for args in variants {
            let a = grep(indexed, args.clone());
            let b = grep(scan, args.clone());
            assert_eq!(a, b, "the index answered {args} differently");
            compared += 1;
        }
    }
    compared
}

fn ferrets(root: &Path) -> (Ferret, Ferret) {
    let indexed = Ferret::new(config(root)).expect("open");
    // Contents younger than the index's racy window are read by every search; let the
    // generated tree age past it so the index is really used.
    past_racy_window();
    let stats = indexed
        .build_index(CancelToken::new(), true)
        .expect("index");
    assert!(stats.files >= 250, "{stats:?}");
    let scan = Ferret::new(config(root)).expect("open");
    (indexed, scan)
}

#[test]
fn index_answers_equal_scan_answers_over_two_hundred_patterns() {
    let (_t, root) = tempdir();
    let lines = tree(&root);
    let pats = patterns(&lines);
    assert!(pats.len() >= 200, "{}", pats.len());
    let (indexed, scan) = ferrets(&root);
    let compared = assert_parity(&indexed, &scan, &pats);
    assert!(compared >= 800, "{compared}");
    let st = indexed.index_status().expect("status");
    assert!(st.fresh, "{st:?}");
    assert_eq!(
        st.refreshes, 1,
        "searching alone never makes the list stale: {st:?}"
    );
    assert!(
        st.listed_searches >= 600,
        "most searches were answered from the list, without a walk: {st:?}"
    );
}

/// The paths a grep answered, in order.
fn paths(v: &Value) -> Vec<String> {
    v["files"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|f| f["path"].as_str().unwrap_or("?").to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn searches_answer_from_the_list_and_say_the_index_answered() {
    let (_t, root) = tempdir();
    tree(&root);
    write(&root, "d3/rare.rs", "let needle_unique_identifier = 1;\n");
    let (indexed, scan) = ferrets(&root);
    let a = call(
        &indexed,
        "grep",
        json!({ "pattern": "needle_unique_identifier" }),
    )
    .expect("grep");
    assert_eq!(a["engine"], "index", "{a}");
    assert_eq!(paths(&a), strs(&["d3/rare.rs"]), "{a}");
    let b = call(
        &scan,
        "grep",
        json!({ "pattern": "needle_unique_identifier" }),
    )
    .expect("grep");
    assert_eq!(b["engine"], "scan", "{b}");
    assert_eq!(indexed.index_status().expect("status").listed_searches, 1);
    // The audit record says so too, and counts the files searched as a scan does
    // (those ruled out unread included).
    let rec = indexed.audit().export();
    assert_eq!(
        rec.last().and_then(|r| r.engine.as_deref()),
        Some("index"),
        "{rec:?}"
    );
    let scanned = scan.audit().export();
    let (i, s) = (
        rec.last().expect("a record"),
        scanned.last().expect("a record"),
    );
    assert!(i.file_count > 10, "{i:?}");
    assert_eq!(i.file_count, s.file_count, "{i:?} {s:?}");
}

/// Runs a shell command line in another process, to change the tree behind ferret.
fn sh(root: &Path, line: &str) {
    let st = std::process::Command::new("sh")
        .arg("-c")
        .arg(line)
        .current_dir(root)
        .status()
        .expect("sh");
    assert!(st.success(), "{line}");
}

#[test]
fn another_process_s_changes_are_seen_by_the_very_next_search() {
    let (_t, root) = tempdir();
    let lines = tree(&root);
    let (indexed, scan) = ferrets(&root);
    let files = |f: &Ferret, p: &str| {
        paths(&grep(
            f,
            json!({ "pattern": p, "output_mode": "files_with_matches", "max_results": 0 }),
        ))
    };
    // Written in place (no name changes): the list stays fresh, the file is read.
    sh(&root, "printf 'in_place_word\\n' >> d0/s0/f0.rs");
    assert_eq!(files(&indexed, "in_place_word"), strs(&["d0/s0/f0.rs"]));
    let st = indexed.index_status().expect("status");
    assert!(
        st.fresh && st.refreshes == 1,
        "a write alone needs no refresh: {st:?}"
    );
    // Created, renamed, deleted: the next search refreshes the list first.
    sh(
        &root,
        "mkdir -p brand/new && printf 'created_word\\n' > brand/new/c.rs",
    );
    assert_eq!(files(&indexed, "created_word"), strs(&["brand/new/c.rs"]));
    sh(&root, "mv brand/new/c.rs brand/renamed.rs");
    assert_eq!(files(&indexed, "created_word"), strs(&["brand/renamed.rs"]));
    sh(&root, "rm brand/renamed.rs");
    assert_eq!(files(&indexed, "created_word"), Vec::<String>::new());
    // A file created in a directory made after the build is watched from then on.
    sh(&root, "printf 'later_word\\n' > brand/new/later.txt");
    assert_eq!(
        files(&indexed, "later_word"),
        strs(&["brand/new/later.txt"])
    );
    sh(&root, "printf 'later_again\\n' >> brand/new/later.txt");
    assert_eq!(
        files(&indexed, "later_again"),
        strs(&["brand/new/later.txt"])
    );
    // An ignore file's change changes what a walk takes in.
    sh(
        &root,
        "printf 'ignored_word\\n' > d1/skipme.log && printf '*.log\\n' >> .gitignore",
    );
    assert_eq!(files(&indexed, "ignored_word"), Vec::<String>::new());
    sh(&root, "sed -i '$d' .gitignore");
    assert_eq!(files(&indexed, "ignored_word"), strs(&["d1/skipme.log"]));
    let st = indexed.index_status().expect("status");
    assert!(st.refreshes >= 5, "{st:?}");
    assert!(st.listed_searches >= 8, "{st:?}");
    let mut pats = patterns(&lines);
    pats.truncate(40);
    assert_parity(&indexed, &scan, &pats);
}

#[test]
fn lost_events_and_no_watcher_fall_back_to_exact_answers() {
    let (_t, root) = tempdir();
    let lines = tree(&root);
    let (indexed, scan) = ferrets(&root);
    let live = indexed.index().expect("index");
    // An overflowing queue, with no event of its own: the next search cannot trust
    // the list and refreshes it first.
    let before = indexed.index_status().expect("status").refreshes;
    live.lost_events();
    assert!(!indexed.index_status().expect("status").fresh);
    grep(&indexed, json!({ "pattern": "alpha" }));
    let st = indexed.index_status().expect("status");
    assert_eq!(st.refreshes, before + 1, "{st:?}");
    assert!(st.fresh, "{st:?}");
    // Whatever happened meanwhile is found.
    write(&root, "d2/after_overflow.rs", "overflow_word\n");
    live.lost_events();
    let a = grep(&indexed, json!({ "pattern": "overflow_word" }));
    assert_eq!(paths(&a), strs(&["d2/after_overflow.rs"]), "{a}");

    // No watcher at all: every search walks and reads what the stamps cannot vouch for.
    let blind = Ferret::new(config(&root)).expect("open");
    blind.build_index(CancelToken::new(), false).expect("index");
    write(&root, "d2/unwatched.rs", "unwatched_word\n");
    let old = std::fs::read_to_string(root.join("d1/s1/f1.c")).expect("read");
    std::fs::write(root.join("d1/s1/f1.c"), format!("{old}unwatched_word\n")).expect("append");
    let b = grep(&blind, json!({ "pattern": "unwatched_word" }));
    assert_eq!(paths(&b), strs(&["d1/s1/f1.c", "d2/unwatched.rs"]), "{b}");
    let st = blind.index_status().expect("status");
    assert!(st.blind.is_some() && st.listed_searches == 0, "{st:?}");
    let mut pats = patterns(&lines);
    pats.truncate(40);
    assert_parity(&blind, &scan, &pats);
}

#[test]
fn ferret_s_own_changes_are_found_by_the_next_call() {
    let (_t, root) = tempdir();
    tree(&root);
    let mut c = config(&root);
    c.allow_write = true;
    let state = tempfile::tempdir().expect("state");
    c.state_dir = Some(state.path().to_path_buf());
    let f = Ferret::new(c).expect("open");
    past_racy_window();
    f.build_index(CancelToken::new(), true).expect("index");
    write(&root, "own.txt", "before_edit\n");
    assert_eq!(
        paths(&grep(&f, json!({ "pattern": "before_edit" }))),
        strs(&["own.txt"])
    );
    call(
        &f,
        "edit",
        json!({ "path": "own.txt", "old_string": "before_edit", "new_string": "after_edit" }),
    )
    .expect("edit");
    assert_eq!(
        paths(&grep(&f, json!({ "pattern": "after_edit" }))),
        strs(&["own.txt"])
    );
    assert_eq!(
        paths(&grep(&f, json!({ "pattern": "before_edit" }))),
        Vec::<String>::new()
    );
    call(&f, "undo", json!({})).expect("undo");
    assert_eq!(
        paths(&grep(&f, json!({ "pattern": "before_edit" }))),
        strs(&["own.txt"])
    );
}

#[test]
fn the_index_never_reads_through_a_link_swapped_in_after_the_build() {
    let (_t, root) = tempdir();
    tree(&root);
    let (_o, outside) = tempdir();
    write(&outside, "secret.rs", "outside_secret_word\n");
    let (indexed, _scan) = ferrets(&root);
    // A watched directory swapped for a link to outside, and a link to a denied name.
    sh(
        &root,
        &format!("mv d4 d4.old && ln -s {} d4", outside.display()),
    );
    write(&root, ".env", "outside_secret_word=1\n");
    std::os::unix::fs::symlink(root.join(".env"), root.join("d3/env_link.rs")).expect("link");
    for args in [
        json!({ "pattern": "outside_secret_word" }),
        json!({ "pattern": "outside_secret_word", "include_hidden": true }),
        json!({ "pattern": "outside_secret_word", "path": "d3" }),
    ] {
        let a = grep(&indexed, args.clone());
        assert_eq!(paths(&a), Vec::<String>::new(), "{args}: {a}");
    }
    // Writes outside are not the index's business, and are not found later either.
    sh(&outside, "printf 'outside_secret_word\\n' >> secret.rs");
    assert_eq!(
        paths(&grep(&indexed, json!({ "pattern": "outside_secret_word" }))),
        Vec::<String>::new()
    );
}

#[test]
fn the_index_rules_out_most_files_for_a_selective_pattern() {
    let (_t, root) = tempdir();
    tree(&root);
    write(&root, "d3/rare.rs", "let needle_unique_identifier = 1;\n");
    let f = Ferret::new(config(&root)).expect("open");
    let control = ferret::control::Control::default();
    let env = SearchEnv {
        workspace: f.workspace(),
        control: &control,
        max_file_size: SEARCH_MAX,
        max_columns: 0,
        index: None,
    };
    let bases = [Base {
        wp: f.workspace().root_path(0),
        is_file: false,
    }];
    let (index, stats) = Index::build(&env, &bases).expect("build");
    let count = |p: &str, ic: bool| match index.candidates(&plan::plan(p, false, ic, false)) {
        Candidates::All => stats.files,
        Candidates::Some(b) => b.len(),
    };
    assert_eq!(count("needle_unique_identifier", false), 1);
    assert_eq!(count("NEEDLE_UNIQUE", true), 1);
    assert_eq!(count(r"let\s+needle_\w+", false), 1);
    assert!(
        count("kmalloc", false) < stats.files,
        "a common word is still selective"
    );
    assert_eq!(count(r"\w+", false), stats.files, "no trigram: every file");
    // The file over the size limit is not indexed (the scan skips it too).
    assert!(stats.files < 257, "{stats:?}");
}

#[test]
fn index_answers_stay_exact_while_files_change_behind_its_back() {
    let (_t, root) = tempdir();
    let lines = tree(&root);
    let (indexed, scan) = ferrets(&root);
    // Another process changes the tree after the index was built.
    write(&root, "d0/s0/f0.rs", "fresh_word_one appended\n"); // rewritten
    let old = std::fs::read_to_string(root.join("d1/s1/f1.c")).expect("read");
    std::fs::write(root.join("d1/s1/f1.c"), format!("{old}fresh_word_two\n")).expect("append");
    write(&root, "new/dir/n.rs", "fresh_word_three and alpha\n"); // created
    std::fs::remove_file(root.join("d2/s2/f2.txt")).expect("delete");
    std::fs::rename(root.join("d3/s0/f3.md"), root.join("d3/s0/moved.md")).expect("rename");
    // Same size, modification time put back: only the change time tells.
    let p = root.join("d4/s1/f4.h");
    let before = std::fs::metadata(&p).expect("meta");
    let text = std::fs::read(&p).expect("read");
    let mut same_len = b"fresh_word_four".to_vec();
    same_len.resize(text.len().max(same_len.len()), b' ');
    std::fs::write(&p, &same_len).expect("rewrite");
    let file = std::fs::File::options().write(true).open(&p).expect("open");
    file.set_modified(before.modified().expect("mtime"))
        .expect("set mtime");
    drop(file);

    let mut pats = patterns(&lines);
    pats.truncate(60);
    for w in [
        "fresh_word_one",
        "fresh_word_two",
        "fresh_word_three",
        "fresh_word_four",
        "fresh_word",
    ] {
        pats.push(w.to_string());
        let a = grep(
            &indexed,
            json!({ "pattern": w, "output_mode": "files_with_matches" }),
        );
        assert_ne!(a["file_count"], json!(0), "{w}: {a}");
    }
    assert_parity(&indexed, &scan, &pats);
}

#[test]
fn hidden_files_an_ignore_file_lets_back_in_are_found_as_a_scan_finds_them() {
    let (_t, root) = tempdir();
    tree(&root);
    // As the Linux tree's .gitignore does: every dot-file ignored, some let back in.
    write(
        &root,
        ".gitignore",
        ".*\n!.keep\n!.gitignore\nignored/\n*.log\n",
    );
    write(&root, "d2/build.log", "dot_word in a log\n");
    write(&root, "d2/sub/deep.log", "dot_word deeper\n");
    write(
        &root,
        "ignored/inside.log",
        "dot_word inside an ignored directory\n",
    );
    write(&root, ".keep", "dot_word\n");
    write(&root, "d1/.keep", "dot_word\n");
    write(&root, "d1/.other", "dot_word\n");
    write(&root, ".hid/x.rs", "dot_word\n");
    let (indexed, scan) = ferrets(&root);
    for args in [
        json!({ "pattern": "dot_word", "max_results": 0 }),
        json!({ "pattern": "dot_word", "include_hidden": true, "max_results": 0 }),
        json!({ "pattern": "dot_word", "path": "d1", "max_results": 0 }),
        json!({ "pattern": "dot_word", "path": ".hid", "max_results": 0 }),
        json!({ "pattern": "ignored", "output_mode": "count", "max_results": 0 }),
        // rg's -g: a positive glob takes in ignored and hidden files of entered
        // directories, never the inside of an ignored one unless it names it.
        json!({ "pattern": "dot_word", "glob": "*.log", "max_results": 0 }),
        json!({ "pattern": "dot_word", "glob": ["*.log", "!d2/sub"], "max_results": 0 }),
        json!({ "pattern": "dot_word", "glob": ".other", "max_results": 0 }),
        json!({ "pattern": "dot_word", "glob": "*.rs", "max_results": 0 }),
        json!({ "pattern": "dot_word", "glob": "*.rs", "include_hidden": true, "max_results": 0 }),
        json!({ "pattern": "dot_word", "glob": "ignored", "max_results": 0 }),
        json!({ "pattern": "dot_word", "glob": "**/*.log", "path": "d2", "max_results": 0 }),
    ] {
        let (a, b) = (grep(&indexed, args.clone()), grep(&scan, args.clone()));
        assert_eq!(a, b, "{args}");
    }
    let a = grep(&indexed, json!({ "pattern": "dot_word", "max_results": 0 }));
    assert_eq!(paths(&a), strs(&[".keep", "d1/.keep"]), "{a}");
    let a = grep(
        &indexed,
        json!({ "pattern": "dot_word", "glob": "*.log", "max_results": 0 }),
    );
    assert_eq!(paths(&a), strs(&["d2/build.log", "d2/sub/deep.log"]), "{a}");
    let st = indexed.index_status().expect("status");
    assert!(st.listed_searches >= 12, "answered from the list: {st:?}");
}

#[test]
fn searches_racing_a_refresh_never_answer_from_the_old_list() {
    let (_t, root) = tempdir();
    tree(&root);
    for i in 0..40 {
        write(
            &root,
            &format!("bulk/b{i}.txt"),
            format!("bulk {i}\n").repeat(200),
        );
    }
    let (indexed, _scan) = ferrets(&root);
    let indexed = std::sync::Arc::new(indexed);
    for round in 0..20 {
        let word = format!("racing_word_{round}");
        write(&root, &format!("race/r{round}.rs"), format!("{word}\n"));
        // Several searches at once: one refreshes, the others must wait for it (or
        // walk), never answer from the list the refresh is replacing.
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(4));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let (f, b, w) = (indexed.clone(), barrier.clone(), word.clone());
                std::thread::spawn(move || {
                    b.wait();
                    paths(&grep(&f, json!({ "pattern": w })))
                })
            })
            .collect();
        for h in handles {
            let found = h.join().expect("search thread");
            assert_eq!(
                found,
                strs(&[&format!("race/r{round}.rs")]),
                "round {round}"
            );
        }
    }
}

#[test]
fn refreshing_only_the_changed_subtrees_stays_exact() {
    let (_t, root) = tempdir();
    let lines = tree(&root);
    let (indexed, scan) = ferrets(&root);
    let mut pats = patterns(&lines);
    pats.truncate(12);
    pats.push("subtree_word".into());
    let steps = [
        "printf 'subtree_word\\n' > d1/s1/new.rs",
        "printf '*.txt\\n' > d2/.gitignore",
        "mkdir -p d3/.hid/deeper && printf 'subtree_word alpha\\n' > d3/.hid/deeper/h.rs",
        "printf '!.hid\\n' > d3/.gitignore",
        "mkdir -p d4/moved && mv d0/s0 d4/moved/s0",
        "printf 'subtree_word\\n' > d4/moved/s0/again.md && rm -f d2/.gitignore",
        "rm -rf d1",
        "printf 'ignored.rs\\n' > d3/.ignore && printf 'subtree_word\\n' > d3/ignored.rs",
    ];
    let mut last = indexed.index_status().expect("status");
    for step in steps {
        sh(&root, step);
        assert_parity(&indexed, &scan, &pats);
        let st = indexed.index_status().expect("status");
        assert!(
            st.refreshes > last.refreshes,
            "{step}: the list was refreshed: {st:?}"
        );
        assert!(
            st.listed_searches > last.listed_searches,
            "{step}: answered from the list: {st:?}"
        );
        assert!(st.fresh, "{step}: {st:?}");
        last = st;
    }
}

/// Lets what was just written age past the index's racy window (contents changed within
/// 100 ms of being indexed are read by every search, and are not stored), so the index
/// really is used.
fn past_racy_window() {
    std::thread::sleep(std::time::Duration::from_millis(150));
}

/// A config whose state (and so stored index) is in `state`.
fn stored_config(root: &Path, state: &Path) -> Config {
    let mut c = config(root);
    c.state_dir = Some(state.to_path_buf());
    c
}

/// Builds the index of `c`'s workspace and writes it to disk, as a server does.
fn build_and_save(c: Config) -> ferret::search::index::Stats {
    let f = Ferret::new(c).expect("open");
    let stats = f.build_index(CancelToken::new(), false).expect("index");
    f.save_index().expect("saved");
    stats
}

fn index_file(state: &Path) -> std::path::PathBuf {
    let dirs: Vec<_> = std::fs::read_dir(state)
        .expect("state dir")
        .filter_map(Result::ok)
        .map(|e| e.path().join("index/trigrams.v1"))
        .filter(|p| p.exists())
        .collect();
    assert_eq!(dirs.len(), 1, "one stored index: {dirs:?}");
    dirs[0].clone()
}

#[test]
fn a_restarted_index_reads_only_the_files_changed_while_it_was_down() {
    let (_t, root) = tempdir();
    let lines = tree(&root);
    write(&root, "d1/keep.rs", "stays_the_same_word\n");
    write(&root, "d2/old_name.rs", "renamed_file_word\n");
    write(&root, "d3/doomed.rs", "deleted_file_word\n");
    let (_s, state) = tempdir();
    past_racy_window();
    let first = build_and_save(stored_config(&root, &state));
    assert_eq!(first.read, first.indexed, "a first build reads every file");
    let stored = index_file(&state);
    assert!(std::fs::metadata(&stored).expect("stored").len() > 0);

    // While no ferret runs: a write, a create, a rename, a delete.
    write(&root, "d0/s0/f0.rs", "now_holds_a_new_word\n");
    write(&root, "d4/brand_new.rs", "created_while_down\n");
    std::fs::rename(root.join("d2/old_name.rs"), root.join("d2/new_name.rs")).expect("mv");
    std::fs::remove_file(root.join("d3/doomed.rs")).expect("rm");
    past_racy_window();

    let again = Ferret::new(stored_config(&root, &state)).expect("open");
    let stats = again.build_index(CancelToken::new(), true).expect("index");
    assert_eq!(
        stats.read, 3,
        "only the written, created and renamed files are read again: {stats:?}"
    );
    let st = again.index_status().expect("status");
    assert!(
        st.disk_bytes.is_some(),
        "the lists are mapped from disk: {st:?}"
    );
    let scan = Ferret::new(config(&root)).expect("open");
    for (pattern, want) in [
        ("now_holds_a_new_word", vec!["d0/s0/f0.rs"]),
        ("created_while_down", vec!["d4/brand_new.rs"]),
        ("renamed_file_word", vec!["d2/new_name.rs"]),
        ("deleted_file_word", vec![]),
        ("stays_the_same_word", vec!["d1/keep.rs"]),
    ] {
        let got = grep(&again, json!({ "pattern": pattern }));
        assert_eq!(paths(&got), strs(&want), "{pattern}");
    }
    let mut pats = patterns(&lines);
    pats.truncate(60);
    assert_parity(&again, &scan, &pats);
    // Saved again: the stored file now holds the changes, without the dead entries.
    again.save_index().expect("saved");
    let third = Ferret::new(stored_config(&root, &state)).expect("open");
    assert_eq!(
        third
            .build_index(CancelToken::new(), false)
            .expect("index")
            .read,
        0,
        "nothing changed since the last save"
    );
    assert_parity(&third, &scan, &pats);
}

#[test]
fn an_index_stored_under_other_rules_is_never_used() {
    let (_t, root) = tempdir();
    tree(&root);
    write(&root, "d5/private.rs", "word_in_a_later_denied_dir\n");
    let (_s, state) = tempdir();
    past_racy_window();
    build_and_save(stored_config(&root, &state));
    // The same workspace, now with d5 denied and a lower size limit: the stored index
    // was made under other rules and would list what may not be searched.
    let mut c = stored_config(&root, &state);
    c.deny_extra = vec!["d5/".into()];
    c.search_max_file_size = 2_000;
    let f = Ferret::new(c.clone()).expect("open");
    let stats = f.build_index(CancelToken::new(), true).expect("index");
    assert_eq!(stats.read, stats.indexed, "rebuilt from nothing: {stats:?}");
    let got = call(
        &f,
        "grep",
        json!({ "pattern": "word_in_a_later_denied_dir", "include_hidden": true }),
    )
    .expect("grep");
    assert_eq!(got["engine"], "index");
    assert_eq!(got["file_count"], 0, "{got}");
    let scan = Ferret::new(c).expect("open");
    for args in [
        json!({ "pattern": "spin_lock", "output_mode": "count" }),
        json!({ "pattern": "alpha", "output_mode": "count" }),
    ] {
        assert_eq!(grep(&f, args.clone()), grep(&scan, args));
    }
}

#[test]
fn a_damaged_index_file_is_rebuilt_or_read_around_never_trusted() {
    let (_t, root) = tempdir();
    let lines = tree(&root);
    let (_s, state) = tempdir();
    past_racy_window();
    build_and_save(stored_config(&root, &state));
    let stored = index_file(&state);
    let bytes = std::fs::read(&stored).expect("read");
    let scan = Ferret::new(config(&root)).expect("open");
    let mut pats = patterns(&lines);
    pats.truncate(40);
    // Cut short: refused whole, rebuilt.
    std::fs::write(&stored, &bytes[..bytes.len() / 2]).expect("cut");
    let f = Ferret::new(stored_config(&root, &state)).expect("open");
    let stats = f.build_index(CancelToken::new(), true).expect("index");
    assert_eq!(stats.read, stats.indexed, "rebuilt: {stats:?}");
    assert_parity(&f, &scan, &pats);
    // The posting lists overwritten with garbage, the rest intact: their checksum
    // refuses the file whole, and it is rebuilt (index_r3.rs tampers every section).
    let mut bad = bytes.clone();
    // (From the end of the 168-byte header: the posting lists come first.)
    for b in &mut bad[168..bytes.len() / 3] {
        *b = 0xa5;
    }
    std::fs::write(&stored, &bad).expect("garble");
    let f = Ferret::new(stored_config(&root, &state)).expect("open");
    let stats = f.build_index(CancelToken::new(), true).expect("index");
    assert_eq!(stats.read, stats.indexed, "rebuilt: {stats:?}");
    assert_parity(&f, &scan, &pats);
}

#[test]
fn past_its_bounds_the_index_is_not_built_and_searches_scan() {
    let (_t, root) = tempdir();
    tree(&root);
    let (_s, state) = tempdir();
    for (files, bytes) in [(20, 0), (0, 10_000)] {
        let mut c = stored_config(&root, &state);
        c.index_max_files = files;
        c.index_max_bytes = bytes;
        let f = Ferret::new(c).expect("open");
        let e = f
            .build_index(CancelToken::new(), true)
            .expect_err("over its bounds");
        assert_eq!(e.code, ferret::ErrorCode::FileTooLarge, "{}", e.message);
        assert!(
            e.hint
                .as_deref()
                .is_some_and(|h| h.contains("index_max_files"))
        );
        assert!(f.save_index().expect("nothing to save").is_none());
        let got = call(
            &f,
            "grep",
            json!({ "pattern": "alpha", "output_mode": "count" }),
        )
        .expect("grep");
        assert_eq!(got["engine"], "scan");
    }
    assert!(
        std::fs::read_dir(&state)
            .expect("state")
            .filter_map(Result::ok)
            .all(|e| !e.path().join("index/trigrams.v1").exists()),
        "nothing stored"
    );
}

#[test]
fn a_state_directory_that_leads_into_a_root_gets_no_index() {
    let (_t, root) = tempdir();
    tree(&root);
    let (_o, outside) = tempdir();
    std::fs::create_dir(root.join("st")).expect("mkdir");
    std::os::unix::fs::symlink(root.join("st"), outside.join("state")).expect("link");
    let f = Ferret::new(stored_config(&root, &outside.join("state"))).expect("open");
    f.build_index(CancelToken::new(), true).expect("index");
    assert!(f.save_index().expect("nothing to save").is_none());
    let stored: Vec<_> = walk_files(&root.join("st"));
    assert!(
        stored.iter().all(|p| !p.ends_with("trigrams.v1")),
        "no index written inside the workspace: {stored:?}"
    );
    let got = call(
        &f,
        "grep",
        json!({ "pattern": "alpha", "output_mode": "count" }),
    )
    .expect("grep");
    assert_eq!(got["engine"], "index", "kept in memory instead");
}

fn walk_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk_files(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// `ferret grep --json` in a fresh process: the answer, engine removed, and the engine.
fn cli_grep(root: &Path, state: &Path, pattern: &str) -> (Value, String) {
    let out = crate::util::bin()
        .args(["--root"])
        .arg(root)
        .arg("--state-dir")
        .arg(state)
        .args(["grep", pattern, "--json", "--hidden"])
        .output()
        .expect("run");
    let mut v: Value = serde_json::from_slice(&out.stdout).expect("json");
    let engine = v["engine"].as_str().unwrap_or("?").to_string();
    if let Some(o) = v.as_object_mut() {
        o.remove("engine");
    }
    (v, engine)
}

#[test]
fn the_cli_searches_with_a_stored_index_and_stays_exact_as_files_change() {
    let (_t, root) = tempdir();
    tree(&root);
    write(&root, "d1/target.rs", "plain_content\n");
    write(&root, "d2/victim.rs", "victim_content\n");
    let (_o, outside) = tempdir();
    write(&outside, "secret.rs", "outside_secret_word\n");
    let (_s, state) = tempdir();
    let (_e, empty) = tempdir();
    past_racy_window();
    let status = |args: &[&str]| {
        crate::util::bin()
            .arg("--root")
            .arg(&root)
            .arg("--state-dir")
            .arg(&state)
            .args(args)
            .output()
            .expect("run")
    };
    assert_eq!(
        status(&["index", "status"]).status.code(),
        Some(1),
        "none yet"
    );
    // Two at once: each writes its own temporary and renames it; the survivor is whole.
    let a = crate::util::bin()
        .arg("--root")
        .arg(&root)
        .arg("--state-dir")
        .arg(&state)
        .arg("index")
        .spawn()
        .expect("spawn");
    let b = status(&["index"]);
    assert!(b.status.success(), "{}", String::from_utf8_lossy(&b.stderr));
    assert!(a.wait_with_output().expect("wait").status.success());
    let st: Value =
        serde_json::from_slice(&status(&["index", "status", "--json"]).stdout).expect("json");
    assert_eq!(st["usable"], true, "{st}");
    assert!(st["files"].as_u64().unwrap_or(0) >= 250, "{st}");

    // Changed after the index was made: a write, a create, a delete, and a file swapped
    // for links to outside and to a denied name.
    write(
        &root,
        "d1/target.rs",
        "plain_content now_with_needle_word\n",
    );
    write(&root, "d6/created.rs", "needle_word in a new file\n");
    std::fs::remove_file(root.join("d0/s0/f0.rs")).expect("rm");
    write(&root, ".env", "outside_secret_word\n");
    std::fs::remove_file(root.join("d2/victim.rs")).expect("rm");
    std::os::unix::fs::symlink(outside.join("secret.rs"), root.join("d2/victim.rs")).expect("ln");
    std::os::unix::fs::symlink(root.join(".env"), root.join("d2/env_link.rs")).expect("ln");
    for pattern in [
        "needle_word",
        "outside_secret_word",
        "victim_content",
        "alpha",
        "spin_lock",
        "k?malloc",
    ] {
        let (with, engine) = cli_grep(&root, &state, pattern);
        let (without, scan) = cli_grep(&root, &empty, pattern);
        assert_eq!((engine.as_str(), scan.as_str()), ("index", "scan"));
        assert_eq!(with, without, "{pattern}");
    }
    let (v, _) = cli_grep(&root, &state, "needle_word");
    assert_eq!(paths(&v), strs(&["d1/target.rs", "d6/created.rs"]));
    let (v, _) = cli_grep(&root, &state, "outside_secret_word");
    assert_eq!(
        v["file_count"], 0,
        "neither the link nor the denied file: {v}"
    );
}

#[test]
fn a_server_saves_its_index_again_once_enough_files_changed() {
    let (_t, root) = tempdir();
    tree(&root);
    let (_s, state) = tempdir();
    past_racy_window();
    let f = Ferret::new(stored_config(&root, &state)).expect("open");
    f.build_index(CancelToken::new(), true).expect("index");
    f.save_index().expect("saved");
    let stored = index_file(&state);
    let first = std::fs::metadata(&stored).expect("stored").len();
    // Past the re-save threshold (a thousand files read since the save).
    for i in 0..1_100 {
        write(&root, &format!("new/n{i}.rs"), format!("fresh_word_{i}\n"));
    }
    past_racy_window();
    let got = call(&f, "grep", json!({ "pattern": "fresh_word_1099" })).expect("grep");
    assert_eq!(got["file_count"], 1);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::fs::metadata(&stored).map_or(0, |m| m.len()) == first {
        assert!(
            std::time::Instant::now() < deadline,
            "the index was not saved again"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // What was saved holds the new files: a restart reads none of them again.
    let mut restarted = None;
    while std::time::Instant::now() < deadline {
        let again = Ferret::new(stored_config(&root, &state)).expect("open");
        let stats = again.build_index(CancelToken::new(), false).expect("index");
        if stats.read == 0 {
            restarted = Some(again);
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let again = restarted.expect("a restart found every new file in the saved index");
    let got = call(&again, "grep", json!({ "pattern": "fresh_word_7\\b" })).expect("grep");
    assert_eq!(paths(&got), strs(&["new/n7.rs"]));
}

#[test]
fn searches_racing_a_save_answer_as_a_scan_does() {
    let (_t, root) = tempdir();
    let lines = tree(&root);
    let (_s, state) = tempdir();
    past_racy_window();
    let f = std::sync::Arc::new(Ferret::new(stored_config(&root, &state)).expect("open"));
    f.build_index(CancelToken::new(), true).expect("index");
    let scan = std::sync::Arc::new(Ferret::new(config(&root)).expect("open"));
    let mut pats = patterns(&lines);
    pats.truncate(12);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let searchers: Vec<_> = (0..3)
        .map(|_| {
            let (f, scan, pats, stop) = (f.clone(), scan.clone(), pats.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut compared = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    for p in &pats {
                        let args = json!({ "pattern": p, "output_mode": "count" });
                        assert_eq!(grep(&f, args.clone()), grep(&scan, args), "{p}");
                        compared += 1;
                    }
                }
                compared
            })
        })
        .collect();
    // Each round gives the index something new to save (the churn files hold words no
    // compared pattern has), then saves it: the mapped lists swap under the searches.
    let mut saves = 0;
    for round in 0..8 {
        write(
            &root,
            &format!("churn/c{round}.rs"),
            format!("churn_only_{round}\n"),
        );
        let got = grep(&f, json!({ "pattern": format!("churn_only_{round}") }));
        assert_eq!(paths(&got), vec![format!("churn/c{round}.rs")]);
        if f.save_index().expect("saved").is_some() {
            saves += 1;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let compared: usize = searchers
        .into_iter()
        .map(|h| h.join().expect("a searcher panicked"))
        .sum();
    assert!(saves >= 8, "every round saved: {saves}");
    assert!(compared > 0);
}

/// About 60 kB of lines of words from [`WORDS`] (a file the 4-gram filters cover),
/// then `extra`.
fn large_text(seed: u64, extra: &str) -> String {
    let mut rng = Lcg(seed);
    let mut text = String::new();
    while text.len() < 60_000 {
        for _ in 0..(1 + rng.below(8)) {
            text.push_str(WORDS[rng.below(WORDS.len())]);
            text.push(if rng.below(4) == 0 { '_' } else { ' ' });
        }
        text.push('\n');
    }
    text.push_str(extra);
    text
}

#[test]
fn large_files_with_the_trigrams_but_not_the_string_are_ruled_out_unread() {
    let (_t, root) = tempdir();
    let lines = tree(&root);
    // Every trigram (and most 4-grams) of kmalloc_array_node, never the string: the
    // trigram lists admit these files, the 4-gram filters of the large ones do not.
    let scattered = "p = kmalloc_array(n, 4);\nstruct display_node *d;\n";
    write(&root, "big/scattered.c", large_text(1, scattered));
    write(
        &root,
        "big/held.c",
        large_text(2, "q = kmalloc_array_node(n, 4, 0);\n"),
    );
    write(&root, "small/scattered.c", scattered);
    let (_s, state) = tempdir();
    let (indexed, scan) = ferrets(&root);
    let count = |f: &Ferret, p: &str, ic: bool| {
        let live = f.index().expect("an index");
        match live.candidates(&plan::plan(p, false, ic, false)) {
            Candidates::All => u64::MAX,
            Candidates::Some(b) => b.len(),
        }
    };
    // The large file holding the string and the small one (no filter: cheap to read).
    assert_eq!(count(&indexed, "kmalloc_array_node", false), 2);
    assert_eq!(count(&indexed, "KMALLOC_ARRAY_NODE", true), 2);
    // (The small file has no `e(n`.)
    assert_eq!(count(&indexed, r"kmalloc_array_node\(n", false), 1);
    // Trigrams alone would keep all three.
    assert_eq!(count(&indexed, "kmalloc_array", false), 3);
    let got = grep(
        &indexed,
        json!({ "pattern": "KMALLOC_ARRAY_NODE", "ignore_case": true, "output_mode": "content" }),
    );
    let want = grep(
        &scan,
        json!({ "pattern": "KMALLOC_ARRAY_NODE", "ignore_case": true, "output_mode": "content" }),
    );
    assert_eq!(got, want);
    assert_eq!(paths(&got), strs(&["big/held.c"]), "{got}");
    // Lines of the large files as patterns, and the tree's: the same answers as a scan.
    let mut pats = patterns(&lines);
    pats.truncate(40);
    let big = large_text(1, scattered);
    pats.extend(
        big.lines()
            .step_by(97)
            .take(30)
            .map(|l| l.trim().to_string()),
    );
    pats.retain(|p| !p.is_empty());
    assert_parity(&indexed, &scan, &pats);

    // Stored and mapped, the filters answer the same.
    build_and_save(stored_config(&root, &state));
    let again = Ferret::new(stored_config(&root, &state)).expect("open");
    let stats = again.build_index(CancelToken::new(), true).expect("index");
    assert_eq!(stats.read, 0, "{stats:?}");
    assert_eq!(count(&again, "kmalloc_array_node", false), 2);
    assert_eq!(count(&again, "kmalloc_array", false), 3);
    assert_parity(&again, &scan, &pats);

    // The held string moved into the scattered file while the index ran: found there.
    write(
        &root,
        "big/scattered.c",
        large_text(1, "kmalloc_array_node();\n"),
    );
    past_racy_window();
    let got = grep(&again, json!({ "pattern": "kmalloc_array_node" }));
    assert_eq!(
        paths(&got),
        strs(&["big/held.c", "big/scattered.c"]),
        "{got}"
    );
}

//! The handle walker against the `ignore` crate's walker (what ripgrep and fd use): the
//! same files for the same trees, ignore files and options, on a tree of corner cases
//! and on random trees; and the two places they differ on purpose (ignore files that are
//! symlinks or FIFOs are not read).

use crate::util::write;
use ferret::config::{Config, Mode};
use ferret::{CallOptions, Ferret, Session};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::Path;

fn ferret(root: &Path) -> Ferret {
    let mut c = Config::defaults(Mode::Cli);
    c.roots = vec![root.to_path_buf()];
    Ferret::new(c).unwrap()
}

/// Every file ferret's glob lists under `path`, relative to the root.
fn ferret_files(f: &Ferret, path: &str, hidden: bool, globs: &[&str]) -> BTreeSet<String> {
    let s = Session::new("t", "test");
    let path = if path.is_empty() { "." } else { path };
    if globs.is_empty() {
        let v = f
            .call(
                &s,
                "glob",
                json!({"pattern": "**", "path": path, "include_hidden": hidden, "max_results": 0}),
                CallOptions::default(),
            )
            .unwrap()
            .structured;
        return strings(&v["files"]);
    }
    // Globs (`-g`) go through grep: every (non-empty) file matches `^`.
    let v = f
        .call(
            &s,
            "grep",
            json!({"pattern": "^", "path": path, "include_hidden": hidden, "glob": globs,
                   "max_results": 0}),
            CallOptions::default(),
        )
        .unwrap()
        .structured;
    strings(&v["files"])
}

fn strings(v: &Value) -> BTreeSet<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|p| p.get("path").unwrap_or(p).as_str().unwrap().to_string())
        .collect()
}

/// What the `ignore` crate's walker lists, with the settings ferret documents.
fn ignore_files(root: &Path, path: &str, hidden: bool, globs: &[&str]) -> BTreeSet<String> {
    let start = root.join(path);
    let mut ov = ignore::overrides::OverrideBuilder::new(&start);
    for g in globs {
        ov.add(g).unwrap();
    }
    ignore::WalkBuilder::new(&start)
        .hidden(!hidden)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(false)
        .ignore(true)
        .parents(true)
        .require_git(false)
        .follow_links(false)
        .overrides(ov.build().unwrap())
        .build()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
        .map(|e| {
            let rel = e.path().strip_prefix(root).unwrap();
            rel.to_string_lossy().into_owned()
        })
        // ferret's own rules: `.git/` is denied, `*.exe` skipped
        .filter(|p| !p.split('/').any(|c| c == ".git") && !p.ends_with(".exe"))
        .collect()
}

fn same(f: &Ferret, root: &Path, path: &str, hidden: bool, globs: &[&str]) -> usize {
    let want = ignore_files(root, path, hidden, globs);
    let got = ferret_files(f, path, hidden, globs);
    assert_eq!(
        got,
        want,
        "path {path:?} hidden {hidden} globs {globs:?}\nonly ferret: {:?}\nonly ignore: {:?}",
        got.difference(&want).collect::<Vec<_>>(),
        want.difference(&got).collect::<Vec<_>>()
    );
    want.len()
}

#[test]
fn walker_keeps_what_ripgreps_walker_keeps_on_corner_cases() {
    let t = tempfile::tempdir().unwrap();
    // Rules above the root apply too (ripgrep reads parents' ignore files).
    let outer = t.path().join("outer");
    write(&outer, ".gitignore", "*.outer\n");
    write(&outer, ".ignore", "!keep.outer\nabove-ignored/\n");
    let root = outer.join("ws");
    let r = &root;
    // BOM, CRLF, comments, escapes, trailing spaces, a negation, anchoring, dir-only.
    write(
        r,
        ".gitignore",
        b"\xef\xbb\xbf*.log\r\n!keep.log\r\n# comment\n\\#hash\n/top-only.txt\nspaced.txt   \nlogs/\ndocs/**/*.tmp\n*.tmp\n!.github/\nbuild-*/\n" as &[u8],
    );
    write(r, ".ignore", "!important.tmp\n");
    write(r, ".git/info/exclude", "excluded.txt\n");
    for f in [
        "a.log",
        "keep.log",
        "#hash",
        "top-only.txt",
        "sub/top-only.txt",
        "spaced.txt",
        "logs/x.txt",
        "sub/logs",
        "docs/a/b.tmp",
        "x.tmp",
        "important.tmp",
        "excluded.txt",
        "sub/excluded.txt",
        "kept.txt",
        "x.outer",
        "keep.outer",
        "above-ignored/a.txt",
        "build-1/out.txt",
        "build-1.txt",
        ".hidden.txt",
        ".config/c.txt",
        ".github/workflows/ci.yml",
        "prog.exe",
    ] {
        write(r, f, "x\n");
    }
    // A deeper .gitignore re-includes what the root's excludes; anchored rules are
    // relative to their own directory.
    write(r, "sub/.gitignore", "!*.log\n/c\n");
    write(r, "sub/a.log", "x\n");
    write(r, "sub/c", "x\n");
    write(r, "sub/deeper/c", "x\n");
    // .ignore beats .gitignore in the same directory; the nearer directory wins.
    write(r, "p/.gitignore", "*.md\n");
    write(r, "p/.ignore", "!readme.md\n");
    write(r, "p/readme.md", "x\n");
    write(r, "p/other.md", "x\n");
    write(r, "p/q/.gitignore", "!other.md\n");
    write(r, "p/q/other.md", "x\n");
    // A nested repository's own info/exclude.
    write(r, "nested/.git/info/exclude", "secret-ish.txt\n");
    write(r, "nested/secret-ish.txt", "x\n");
    write(r, "nested/plain.txt", "x\n");
    // Reading stops at the first line that is not UTF-8.
    write(
        r,
        "bad/.gitignore",
        b"first.txt\n\xff\xfe\nsecond.txt\n" as &[u8],
    );
    write(r, "bad/first.txt", "x\n");
    write(r, "bad/second.txt", "x\n");
    // A last line with a \r and no \n (the pattern's trailing whitespace is trimmed).
    write(r, "cr/.gitignore", "a.txt\r");
    write(r, "cr/a.txt", "x\n");
    std::os::unix::fs::symlink("kept.txt", r.join("link.txt")).unwrap();

    let f = ferret(r);
    for hidden in [false, true] {
        let n = same(&f, r, "", hidden, &[]);
        assert!(n > 10, "{n}");
        same(&f, r, "sub", hidden, &[]);
        same(&f, r, "p/q", hidden, &[]);
        same(&f, r, "", hidden, &["*.log"]);
        same(&f, r, "", hidden, &["!*.txt"]);
        same(&f, r, "", hidden, &["sub/**", "!*.log"]);
        same(&f, r, "", hidden, &["*.tmp", ".config/**"]);
    }
    let all = ferret_files(&f, "", false, &[]);
    for (name, kept) in [
        ("keep.log", true),
        ("a.log", false),
        ("sub/a.log", true),
        ("sub/c", false),
        ("sub/deeper/c", true),
        ("important.tmp", true),
        ("excluded.txt", false),
        ("sub/excluded.txt", false),
        ("x.outer", false),
        ("keep.outer", true),
        (".github/workflows/ci.yml", true),
        (".hidden.txt", false),
        ("p/readme.md", true),
        ("p/other.md", false),
        ("p/q/other.md", true),
        ("nested/secret-ish.txt", false),
        ("bad/first.txt", false),
        ("bad/second.txt", true),
        ("cr/a.txt", false),
        ("link.txt", false),
    ] {
        assert_eq!(all.contains(name), kept, "{name}: {all:?}");
    }
}

/// A small deterministic generator: the same trees on every run.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[(self.next() % xs.len() as u64) as usize]
    }
}

/// Writes a file unless a directory of the same name (or a file where a directory must
/// go) is in the way: random names collide.
fn put(root: &Path, rel: &str) {
    let p = root.join(rel);
    if std::fs::create_dir_all(p.parent().unwrap()).is_ok() && !p.is_dir() {
        let _ = std::fs::write(p, "x\n");
    }
}

#[test]
fn walker_keeps_what_ripgreps_walker_keeps_on_random_trees() {
    let dirs = [
        "a", "b", ".h", "a/c", "a/.d", "b/c", "b/c/e", "logs", "a/logs",
    ];
    let names = [
        "x.txt",
        "y.log",
        ".z",
        "k.tmp",
        "c",
        "e",
        "readme.md",
        "logs",
        ".gitkeep",
        "t.rs",
    ];
    let pats = [
        "*.log",
        "!*.log",
        "*.txt",
        "!x.txt",
        "/c",
        "c/",
        "c",
        "logs/",
        "!logs/",
        "**/e",
        "a/**",
        "!a/",
        ".h",
        "!.h",
        "!.z",
        "*.md",
        "b/c/",
        "/x.txt",
        "!/c",
        "e/*",
        "*",
        "!*",
        "?.rs",
        "[xy].*",
        "!.gitkeep",
        "a/c/*.log",
        "# c",
        "\\!x.txt",
    ];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut checked = 0;
    for _ in 0..40 {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("ws");
        for d in dirs {
            for _ in 0..3 {
                put(&root, &format!("{d}/{}", rng.pick(&names)));
            }
        }
        write(&root, "top.txt", "x\n");
        for d in ["", "a", "b", "a/c", "b/c", ".h"] {
            for kind in [".gitignore", ".ignore", ".git/info/exclude"] {
                if rng.next().is_multiple_of(3) {
                    let lines: Vec<&str> =
                        (0..1 + rng.next() % 4).map(|_| rng.pick(&pats)).collect();
                    let at = if d.is_empty() {
                        kind.to_string()
                    } else {
                        format!("{d}/{kind}")
                    };
                    let _ = std::fs::create_dir_all(root.join(&at).parent().unwrap());
                    let _ = std::fs::write(root.join(&at), lines.join("\n") + "\n");
                }
            }
        }
        let f = ferret(&root);
        for hidden in [false, true] {
            checked += same(&f, &root, "", hidden, &[]);
            checked += same(&f, &root, "a", hidden, &[]);
            let g = rng.pick(&["*.log", "!*.txt", "a/**", "*.{md,rs}", "!c"]);
            checked += same(&f, &root, "", hidden, &[g]);
        }
    }
    assert!(checked > 1000, "{checked}");
}

#[test]
fn ignore_files_that_are_links_or_fifos_are_not_read() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("ws");
    // Rules outside the root would hide everything: a hostile tree must not be able to
    // make the walk read (or hang on) a file it names.
    write(t.path(), "outside-rules", "*\n");
    write(&root, "a/x.txt", "x\n");
    write(&root, "b/y.txt", "x\n");
    std::os::unix::fs::symlink(t.path().join("outside-rules"), root.join("a/.gitignore")).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(root.join("b/.ignore"))
        .status()
        .unwrap();
    assert!(made.success());
    let f = ferret(&root);
    let got = ferret_files(&f, "", false, &[]);
    assert_eq!(
        got,
        ["a/x.txt", "b/y.txt"]
            .map(String::from)
            .into_iter()
            .collect(),
    );
}

#[test]
fn searches_stop_at_the_path_depth_limit_as_reads_do() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("ws");
    write(&root, "a/b/c.txt", "needle\n");
    write(&root, "a/b/c/d.txt", "needle\n");
    write(&root, "a/b/c/e/f.txt", "needle\n");
    let mut c = Config::defaults(Mode::Cli);
    c.roots = vec![root.clone()];
    c.max_path_depth = 3;
    let f = Ferret::new(c).unwrap();
    let s = Session::new("t", "test");
    let run = |tool: &str, args: Value| f.call(&s, tool, args, CallOptions::default());
    let v = run("glob", json!({"pattern": "**", "max_results": 0}))
        .unwrap()
        .structured;
    assert_eq!(
        strings(&v["files"]),
        ["a/b/c.txt"].map(String::from).into_iter().collect()
    );
    let v = run("grep", json!({"pattern": "needle"}))
        .unwrap()
        .structured;
    assert_eq!(v["file_count"], 1, "{v}");
    let e = run("read_file", json!({"path": "a/b/c/d.txt"})).unwrap_err();
    assert_eq!(e.code, ferret::ErrorCode::PathTooDeep);
}

//! Issue 26, item 3: a command line an rg / fd user can type. Each flag and habit on a
//! small tree, compared with what rg 15 / fd 10 print on the same tree where they
//! overlap (sorted lines; the comparison is skipped, not the test, when rg or fd is not
//! installed): rg's `-w -t -T -e -v -o -m -u -l -c -F -s -S -i -g -A -B -C` and several
//! paths on `ferret grep`; fd's word-is-part-of-the-name, `-e -t -H -I` and several
//! paths on `ferret glob`; paths read and printed from the current directory; a path
//! outside the root refused, never a silent change of root; `--help` listing only the
//! flags that apply.

use crate::util::{bin, tempdir, write};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The tree: a project with an app subdirectory, tests, a gitignored log, a hidden
/// directory, a secret the deny list hides, and a file outside it, next door.
fn tree() -> (tempfile::TempDir, PathBuf) {
    let (t, base) = tempdir();
    let root = base.join("proj");
    std::fs::create_dir_all(root.join(".git")).unwrap();
    write(
        &root,
        "a.txt",
        "hello world\nHello again\nhelloworld\nbye\nhello\nhello hello\n",
    );
    write(
        &root,
        "app/src/util.py",
        "def util():\n    return \"hello\"\n",
    );
    write(
        &root,
        "app/src/main.rs",
        "fn main() { println!(\"hello\"); }\n",
    );
    write(&root, "app/readme.md", "say a.b hello\nsay axb\n");
    write(&root, "tests/t_util.rs", "hello test\n");
    write(&root, "Utils.md", "UTIL\n");
    write(&root, ".hid/h.txt", "hello hidden\n");
    write(&root, ".gitignore", "debug.log\n");
    write(&root, "debug.log", "hello log\n");
    write(&root, ".env", "hello=secret-token\n");
    write(&base, "outside/notes.txt", "hello from outside\n");
    (t, root)
}

/// ferret run in `dir`, the root set to `root` (None: the current directory).
fn ferret(dir: &Path, root: Option<&Path>, args: &[&str]) -> (i32, String, String) {
    let mut c = bin();
    c.current_dir(dir).args(args);
    if let Some(r) = root {
        c.env("FERRET_ROOT", r);
    }
    let out = c.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// rg or fd, if installed (on PATH or in ~/.cargo/bin). `scripts/test` installs both and
/// sets `RG_FD_PEERS_REQUIRED=1`, so in CI a missing peer fails instead of skipping.
fn installed(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path)
        .chain([PathBuf::from("/root/.cargo/bin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file());
    if found.is_none() && std::env::var_os("RG_FD_PEERS_REQUIRED").is_some() {
        panic!("{name} is not installed, and RG_FD_PEERS_REQUIRED says the comparison must run");
    }
    found
}

/// What rg or fd prints in `dir` (no user configuration), or None when not installed.
fn other(name: &str, dir: &Path, args: &[&str]) -> Option<String> {
    let prog = installed(name)?;
    let out = Command::new(prog)
        .env_clear()
        .envs(crate::util::portable_env())
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .current_dir(dir)
        .args(args)
        .output()
        .ok()?;
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn sorted(s: &str) -> Vec<String> {
    let mut v: Vec<String> = s.lines().map(str::to_string).collect();
    v.sort();
    v
}

/// `ferret grep ARGS` and `rg -n --no-heading ARGS` (paths named as rg names them: not
/// for a single file searched), run in `dir` with the root `root`,
/// print the same lines (sorted); returns ferret's output.
fn same_as_rg(root: &Path, dir: &Path, args: &[&str]) -> String {
    let mut fa = vec!["grep", "--no-heading", "--color", "never"];
    fa.extend_from_slice(args);
    let (code, out, err) = ferret(dir, Some(root), &fa);
    assert!(code == 0 || code == 1, "ferret {args:?}: {code} {err}");
    let mut ra = vec!["-n", "--no-heading", "--color", "never"];
    ra.extend_from_slice(args);
    if let Some(theirs) = other("rg", dir, &ra) {
        assert_eq!(sorted(&out), sorted(&theirs), "ferret grep vs rg {args:?}");
    }
    out
}

/// `ferret glob ARGS` and `fd -t f ARGS` print the same paths (sorted).
fn same_as_fd(root: &Path, dir: &Path, args: &[&str]) -> String {
    let mut fa = vec!["glob"];
    fa.extend_from_slice(args);
    let (code, out, err) = ferret(dir, Some(root), &fa);
    assert!(code == 0 || code == 1, "ferret glob {args:?}: {code} {err}");
    let mut da = vec!["-t", "f", "--color", "never"];
    da.extend_from_slice(args);
    if let Some(theirs) = other("fd", dir, &da) {
        assert_eq!(sorted(&out), sorted(&theirs), "ferret glob vs fd {args:?}");
    }
    out
}

#[test]
fn grep_w_matches_whole_words_only() {
    let (_t, root) = tree();
    let out = same_as_rg(&root, &root, &["-w", "hello"]);
    assert!(out.contains("a.txt:1:hello world"), "{out}");
    assert!(!out.contains("helloworld"), "{out}");
    let out = same_as_rg(&root, &root, &["--word-regexp", "-F", "a.b"]);
    assert!(out.contains("app/readme.md:1:"), "{out}");
}

#[test]
fn grep_t_and_capital_t_select_and_exclude_file_types() {
    let (_t, root) = tree();
    let out = same_as_rg(&root, &root, &["-l", "-t", "py", "hello"]);
    assert_eq!(out.trim(), "app/src/util.py");
    let out = same_as_rg(&root, &root, &["-l", "-t", "py", "-t", "rust", "hello"]);
    assert_eq!(sorted(&out).len(), 3, "{out}");
    let out = same_as_rg(&root, &root, &["-l", "-T", "rust", "hello"]);
    assert!(!out.contains(".rs"), "{out}");
    assert!(out.contains("a.txt"), "{out}");
    let (code, _, err) = ferret(&root, None, &["grep", "-t", "nosuchtype", "hello"]);
    assert_eq!(code, 2);
    assert!(err.contains("INVALID"), "{err}");
}

#[test]
fn grep_e_is_repeatable_and_makes_every_other_argument_a_path() {
    let (_t, root) = tree();
    let out = same_as_rg(&root, &root, &["-e", "bye", "-e", "again"]);
    assert_eq!(sorted(&out), ["a.txt:2:Hello again", "a.txt:4:bye"]);
    let out = same_as_rg(&root, &root, &["-e", "hello", "tests", "app/src"]);
    assert_eq!(sorted(&out).len(), 3, "{out}");
    // -F applies to each pattern
    let out = same_as_rg(&root, &root, &["-F", "-e", "a.b", "-e", "(x"]);
    assert_eq!(out.trim(), "app/readme.md:1:say a.b hello");
    // a pattern that looks like a flag
    let out = same_as_rg(&root, &root, &["-e", "-secret", "-uu"]);
    assert!(out.is_empty(), "the deny list holds: {out}");
}

#[test]
fn grep_v_shows_the_lines_that_do_not_match() {
    let (_t, root) = tree();
    let out = same_as_rg(&root, &root, &["-v", "hello", "a.txt"]);
    assert_eq!(sorted(&out), ["2:Hello again", "4:bye"]);
    let out = same_as_rg(&root, &root, &["-v", "-c", "hello"]);
    assert!(out.contains("Utils.md:1"), "{out}");
}

#[test]
fn grep_o_prints_each_match_alone() {
    let (_t, root) = tree();
    let out = same_as_rg(&root, &root, &["-o", "-i", "h.llo", "a.txt"]);
    assert_eq!(out.lines().filter(|l| *l == "6:hello").count(), 2, "{out}");
    assert!(out.contains("2:Hello"), "{out}");
    assert!(!out.contains("world"), "{out}");
}

#[test]
fn grep_m_caps_matching_lines_per_file() {
    let (_t, root) = tree();
    let out = same_as_rg(&root, &root, &["-m", "1", "hello"]);
    assert_eq!(out.lines().filter(|l| l.starts_with("a.txt:")).count(), 1);
    let out = same_as_rg(&root, &root, &["-c", "-m", "2", "hello"]);
    assert!(out.contains("a.txt:2"), "{out}");
    let out = same_as_rg(
        &root,
        &root,
        &["--max-count", "2", "-A", "1", "hello", "a.txt"],
    );
    assert_eq!(out, "1:hello world\n2-Hello again\n3:helloworld\n4-bye\n");
}

#[test]
fn grep_u_lifts_ignore_files_then_hidden_but_never_the_deny_list() {
    let (_t, root) = tree();
    let out = same_as_rg(&root, &root, &["-l", "hello"]);
    assert!(
        !out.contains("debug.log") && !out.contains("h.txt"),
        "{out}"
    );
    let out = same_as_rg(&root, &root, &["-l", "-u", "hello"]);
    assert!(out.contains("debug.log") && !out.contains("h.txt"), "{out}");
    // -uu: hidden too (rg shows .env, which ferret's deny list hides: compared without)
    for flags in [
        &["-uu"][..],
        &["-u", "-u"],
        &["-uuu"],
        &["--no-ignore", "--hidden"],
    ] {
        let mut args = vec!["grep", "-l", "hello"];
        args.extend_from_slice(flags);
        let (code, out, _) = ferret(&root, None, &args);
        assert_eq!(code, 0);
        assert!(
            out.contains("debug.log") && out.contains(".hid/h.txt"),
            "{out}"
        );
        assert!(
            !out.contains(".env"),
            "{flags:?}: the deny list holds: {out}"
        );
        let (_, out, _) = ferret(&root, None, &["grep", "-uuu", "secret"]);
        assert!(out.is_empty(), "{out}");
    }
    // the same through the tool an agent calls
    let (_, out, _) = ferret(
        &root,
        None,
        &[
            "call",
            "grep",
            r#"{"pattern":"secret","no_ignore":true,"include_hidden":true}"#,
        ],
    );
    assert!(!out.contains("secret-token"), "{out}");
}

#[test]
fn grep_l_c_f_and_g_as_rg() {
    let (_t, root) = tree();
    let out = same_as_rg(&root, &root, &["-l", "hello"]);
    assert_eq!(sorted(&out).len(), 5, "{out}");
    same_as_rg(&root, &root, &["-c", "hello"]);
    let out = same_as_rg(&root, &root, &["-F", "a.b"]);
    assert_eq!(out.trim(), "app/readme.md:1:say a.b hello");
    let out = same_as_rg(&root, &root, &["a.b"]);
    assert_eq!(sorted(&out).len(), 2, "{out}");
    let out = same_as_rg(&root, &root, &["-g", "*.rs", "hello"]);
    assert_eq!(sorted(&out).len(), 2, "{out}");
    same_as_rg(&root, &root, &["-g", "!*.rs", "-l", "hello"]);
}

#[test]
fn grep_case_flags_i_s_and_smart_case() {
    let (_t, root) = tree();
    let out = same_as_rg(&root, &root, &["-i", "HELLO", "a.txt"]);
    assert_eq!(out.lines().count(), 5, "{out}");
    let out = same_as_rg(&root, &root, &["-i", "-s", "Hello", "a.txt"]);
    assert_eq!(out.trim(), "2:Hello again");
    let out = same_as_rg(&root, &root, &["-S", "hello", "a.txt"]);
    assert_eq!(out.lines().count(), 5, "{out}");
    let out = same_as_rg(&root, &root, &["-S", "Hello", "a.txt"]);
    assert_eq!(out.trim(), "2:Hello again");
}

#[test]
fn grep_context_a_b_c_as_rg() {
    let (_t, root) = tree();
    for flags in [["-A", "1"], ["-B", "1"], ["-C", "1"]] {
        let mut args = flags.to_vec();
        args.extend(["bye", "a.txt"]);
        let out = same_as_rg(&root, &root, &args);
        assert!(out.contains("4:bye"), "{out}");
    }
}

#[test]
fn grep_takes_several_paths() {
    let (_t, root) = tree();
    let out = same_as_rg(&root, &root, &["hello", "app", "tests"]);
    assert_eq!(sorted(&out).len(), 4, "{out}");
    assert!(!out.contains("a.txt"), "{out}");
    // a file and a directory; one missing path is an error (exit 2) but the rest print
    let (code, out, err) = ferret(&root, None, &["grep", "hello", "a.txt", "nope", "tests"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        out.contains("a.txt:1:") && out.contains("tests/t_util.rs:1:"),
        "{out}"
    );
    assert!(err.contains("NOT_FOUND"), "{err}");
}

#[test]
fn paths_are_read_and_printed_from_the_current_directory() {
    let (_t, root) = tree();
    let app = root.join("app");
    // no path: the current directory, printed from there (as rg)
    let out = same_as_rg(&root, &app, &["hello"]);
    assert!(
        out.contains("src/util.py:2:") && !out.contains("app/"),
        "{out}"
    );
    // ../ prints ../a.txt
    let out = same_as_rg(&root, &app, &["hello", "../"]);
    assert!(out.contains("../a.txt:1:hello world"), "{out}");
    assert!(out.contains("../app/src/main.rs:1:"), "{out}");
    let out = same_as_rg(&root, &app, &["-l", "hello", "..", "src"]);
    assert!(
        out.contains("../tests/t_util.rs") && out.contains("\nsrc/util.py"),
        "{out}"
    );
    let out = same_as_rg(
        &root,
        &app.join("src"),
        &["-H", "hello", "../../tests/t_util.rs"],
    );
    assert_eq!(out, "../../tests/t_util.rs:1:hello test\n");
    // read, ls and exists take the same paths
    let (code, out, _) = ferret(&app, Some(&root), &["read", "src/util.py"]);
    assert_eq!(code, 0);
    assert!(out.contains("def util"), "{out}");
    let (code, out, _) = ferret(&app, Some(&root), &["read", "../tests/t_util.rs"]);
    assert_eq!(code, 0);
    assert!(out.contains("hello test"), "{out}");
    let (code, _, _) = ferret(&app, Some(&root), &["exists", "../a.txt"]);
    assert_eq!(code, 0);
    let (code, out, _) = ferret(&app, Some(&root), &["ls", "src"]);
    assert_eq!(code, 0);
    assert!(out.contains("util.py"), "{out}");
    // glob too, as fd
    let out = same_as_fd(&root, &app, &["util"]);
    assert_eq!(out.trim(), "src/util.py");
    let out = same_as_fd(&root, &app, &["util", ".."]);
    assert_eq!(sorted(&out).len(), 3, "{out}");
}

#[test]
fn a_path_outside_the_root_is_refused_never_a_new_root() {
    let (_t, root) = tree();
    let base = root.parent().unwrap().to_path_buf();
    let app = root.join("app");
    std::os::unix::fs::symlink(base.join("outside"), root.join("out_link")).unwrap();
    let outside_abs = base.join("outside").to_string_lossy().into_owned();
    // no root set: the current directory is the root; from the root with a root set
    let cases: Vec<(&Path, Option<&Path>, Vec<&str>)> = vec![
        (&root, None, vec!["grep", "hello", "../"]),
        (&root, None, vec!["grep", "hello", "../outside"]),
        (&root, None, vec!["grep", "hello", "tests", "../outside"]),
        (&root, None, vec!["grep", "hello", "app/../../outside"]),
        (&root, None, vec!["grep", "hello", &outside_abs]),
        (&app, None, vec!["grep", "hello", "../"]),
        (&app, Some(&root), vec!["grep", "hello", "../../outside"]),
        (&app, Some(&root), vec!["glob", "notes", "../../"]),
        (&app, Some(&root), vec!["read", "../../outside/notes.txt"]),
        (&app, Some(&root), vec!["ls", "../.."]),
        (&app, Some(&root), vec!["exists", "../../outside/notes.txt"]),
        (&app, Some(&root), vec!["read", &outside_abs]),
    ];
    for (dir, r, args) in cases {
        let (code, out, err) = ferret(dir, r, &args);
        assert_eq!(code, 2, "{args:?}: {out} {err}");
        assert!(!out.contains("from outside"), "{args:?}: {out}");
        assert!(err.contains("PATH_ESCAPE"), "{args:?}: {err}");
        // a relative one is judged from the current directory, with the way out named;
        // an absolute one by the tool, which names the roots
        let absolute = args.iter().any(|a| a.starts_with('/'));
        assert!(absolute || err.contains("--root"), "{args:?}: {err}");
    }
    // a link inside the root to outside: the sandbox still refuses what it leads to
    for args in [
        vec!["grep", "hello", "out_link"],
        vec!["read", "out_link/notes.txt"],
    ] {
        let (code, out, err) = ferret(&root, None, &args);
        assert_ne!(code, 0, "{args:?}: {out}");
        assert!(!out.contains("from outside"), "{args:?}: {out} {err}");
    }
    let (_, out, _) = ferret(&root, None, &["grep", "-uu", "hello"]);
    assert!(!out.contains("from outside"), "{out}");
    // --root names it explicitly: then it is searched
    let (code, out, _) = ferret(&root, Some(&base), &["grep", "-l", "hello", "../outside"]);
    assert_eq!(code, 0);
    assert_eq!(out, "../outside/notes.txt\n");
}

#[test]
fn glob_a_word_is_part_of_the_name_as_in_fd() {
    let (_t, root) = tree();
    let out = same_as_fd(&root, &root, &["util"]);
    assert_eq!(
        sorted(&out),
        ["Utils.md", "app/src/util.py", "tests/t_util.rs"]
    );
    // a capital makes it case-sensitive (fd's smart case)
    let out = same_as_fd(&root, &root, &["Util"]);
    assert_eq!(out.trim(), "Utils.md");
    // a glob stays a glob
    let (code, out, _) = ferret(&root, None, &["glob", "*.rs"]);
    assert_eq!(code, 0);
    assert_eq!(sorted(&out), ["app/src/main.rs", "tests/t_util.rs"]);
    if let Some(fd) = other("fd", &root, &["-t", "f", "-g", "*.rs"]) {
        assert_eq!(sorted(&out), sorted(&fd));
    }
    let (code, out, _) = ferret(&root, None, &["glob", "nothing_like_it"]);
    assert_eq!((code, out.as_str()), (1, ""));
}

#[test]
fn glob_e_t_h_i_and_several_paths_as_fd() {
    let (_t, root) = tree();
    let out = same_as_fd(&root, &root, &["-e", "rs"]);
    assert_eq!(sorted(&out).len(), 2, "{out}");
    let out = same_as_fd(&root, &root, &["-e", "py", "-e", "md"]);
    assert_eq!(sorted(&out).len(), 3, "{out}");
    same_as_fd(&root, &root, &["util", "-e", "py"]);
    let out = same_as_fd(&root, &root, &["-H", "h"]);
    assert!(out.contains(".hid/h.txt"), "{out}");
    let out = same_as_fd(&root, &root, &["-I", "debug"]);
    assert_eq!(out.trim(), "debug.log");
    let out = same_as_fd(&root, &root, &["debug"]);
    assert!(out.is_empty(), "{out}");
    let out = same_as_fd(&root, &root, &["util", "app", "tests"]);
    assert_eq!(sorted(&out), ["app/src/util.py", "tests/t_util.rs"]);
    // -t d: directories (fd prints them with a trailing /)
    let (code, out, _) = ferret(&root, None, &["glob", "-t", "d", "s"]);
    assert_eq!(code, 0);
    assert_eq!(sorted(&out), ["app/src", "tests"]);
    if let Some(fd) = other("fd", &root, &["-t", "d", "s"]) {
        let fd = fd.replace("/\n", "\n");
        assert_eq!(sorted(&out), sorted(&fd));
    }
    let (_, out, _) = ferret(&root, None, &["glob", "-t", "d", "-H", "hid"]);
    assert_eq!(out, ".hid\n");
    // directories the sandbox hides stay hidden, whatever -u says
    std::fs::create_dir_all(root.join(".ssh")).unwrap();
    std::fs::create_dir_all(root.join("node_modules/x")).unwrap();
    std::os::unix::fs::symlink(root.parent().unwrap().join("outside"), root.join("lnk")).unwrap();
    let (_, out, _) = ferret(&root, None, &["glob", "-t", "d", "-u"]);
    assert_eq!(sorted(&out), [".hid", "app", "app/src", "tests"]);
    // -t l: symlinks are never listed, and it says so
    let (code, _, err) = ferret(&root, None, &["glob", "-t", "l", "src"]);
    assert_eq!(code, 2);
    assert!(err.contains("possible values"), "{err}");
    // -u: -H and -I, never the deny list
    let (_, out, _) = ferret(&root, None, &["glob", "-u", "env"]);
    assert!(!out.contains(".env"), "{out}");
}

#[test]
fn help_of_a_read_only_subcommand_lists_no_write_flags() {
    for sub in [
        "grep", "glob", "read", "ls", "info", "exists", "index", "config",
    ] {
        let (code, out, _) = ferret(Path::new("/"), None, &[sub, "--help"]);
        assert_eq!(code, 0);
        assert!(
            !out.contains("--allow-write") && !out.contains("--dry-run"),
            "{sub}: {out}"
        );
    }
    for sub in [
        "edit", "write", "mv", "rm", "undo", "patch", "call", "shell", "serve",
    ] {
        let (_, out, _) = ferret(Path::new("/"), None, &[sub, "--help"]);
        assert!(
            out.contains("--allow-write") && out.contains("--dry-run"),
            "{sub}: {out}"
        );
    }
    // still taken before the subcommand, and after a write one
    let (_t, root) = tree();
    let (code, _, err) = ferret(
        &root,
        None,
        &[
            "edit",
            "a.txt",
            "--old",
            "bye",
            "--new",
            "ciao",
            "--allow-write",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = ferret(
        &root,
        None,
        &[
            "--allow-write",
            "edit",
            "a.txt",
            "--old",
            "ciao",
            "--new",
            "bye",
        ],
    );
    assert_eq!(code, 0, "{err}");
    // a read-only subcommand refuses them as rg refuses a flag it does not have
    let (code, _, _) = ferret(&root, None, &["grep", "hello", "--allow-write"]);
    assert_eq!(code, 2);
}

#[test]
fn a_shell_line_cannot_grant_itself_writes() {
    let (_t, root) = tree();
    let mut c = bin();
    c.current_dir(&root)
        .args(["shell"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, "edit a.txt --old bye --new ciao --allow-write").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("when the shell starts"), "{err}");
    assert!(
        std::fs::read_to_string(root.join("a.txt"))
            .unwrap()
            .contains("bye")
    );
}

/// An agent's `types` cannot make the matcher big: repeats count once, and past 64
/// names the call is refused (each `all` adds every type's globs again).
#[test]
fn file_types_from_an_agent_are_bounded() {
    let (_t, root) = tree();
    let f = crate::util::ferret(&root, false, None);
    let many = vec!["all"; 100_000];
    let started = std::time::Instant::now();
    let v = crate::util::call(
        &f,
        "grep",
        serde_json::json!({"pattern": "hello", "types": many}),
    )
    .unwrap();
    assert!(v["file_count"].as_u64().unwrap() > 0, "{v}");
    let mut b = ignore::types::TypesBuilder::new();
    b.add_defaults();
    let distinct: Vec<String> = b
        .definitions()
        .iter()
        .take(100)
        .map(|d| d.name().to_string())
        .collect();
    assert_eq!(distinct.len(), 100);
    let e = crate::util::call(
        &f,
        "grep",
        serde_json::json!({"pattern": "hello", "types": distinct}),
    );
    let e = e.expect_err("past 64 types");
    assert_eq!(e.code, ferret::ErrorCode::InvalidArgument);
    assert!(e.message.contains("at most 64"), "{}", e.message);
    for bad in ["nosuch", "!nosuch", ""] {
        let e = crate::util::call(
            &f,
            "grep",
            serde_json::json!({"pattern": "hello", "types": [bad]}),
        );
        assert_eq!(
            crate::util::code(e),
            ferret::ErrorCode::InvalidArgument,
            "{bad}"
        );
    }
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}

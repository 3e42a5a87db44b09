//! Round 4, the state directory: a process that changes nothing creates nothing (state
//! directory included, inside a root or out), leases go with their process, every file
//! ferret opens there is opened as what it must be (a FIFO, a link to a secret, a
//! directory or a huge file at its name ends the command with a clear error, or is
//! ignored, and never hangs it or shows or changes the link's target), and `index
//! status` writes nothing.

use crate::util::{bin, tempdir, write};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime};

const SECRET: &str = "TOP-SECRET-OUTSIDE-7f3a";

/// A finished run: exit code (None if it had to be killed), stdout and stderr together.
struct Ran {
    code: Option<i32>,
    text: String,
}

/// Runs ferret on `root` with state in `state`, killing it after 20 s (the
/// guarantee is that it never hangs: a killed run fails the test).
fn run_in(root: &Path, state: &Path, args: &[&str], stdin: Option<&str>) -> Ran {
    let (_t, tmp) = tempdir();
    let (o, e) = (tmp.join("out"), tmp.join("err"));
    let mut c = bin();
    c.arg("--root")
        .arg(root)
        .arg("--state-dir")
        .arg(state)
        .args(args)
        .stdout(std::fs::File::create(&o).expect("out"))
        .stderr(std::fs::File::create(&e).expect("err"));
    c.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let mut child = c.spawn().expect("spawn ferret");
    if let Some(s) = stdin {
        use std::io::Write;
        let mut i = child.stdin.take().expect("stdin");
        i.write_all(s.as_bytes()).expect("write stdin");
    }
    let start = Instant::now();
    let code = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st.code();
        }
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = std::fs::read_to_string(&o).unwrap_or_default()
        + &std::fs::read_to_string(&e).unwrap_or_default();
    Ran { code, text }
}

fn run(root: &Path, state: &Path, args: &[&str]) -> Ran {
    run_in(root, state, args, None)
}

/// Every path below `dir` with its kind, size, mtime and (for files) bytes.
fn listing(dir: &Path) -> BTreeMap<PathBuf, (String, u64, SystemTime, Vec<u8>)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let md = std::fs::symlink_metadata(&p).expect("lstat");
            let kind = format!("{:?}", md.file_type());
            let bytes = if md.file_type().is_file() {
                std::fs::read(&p).unwrap_or_default()
            } else {
                Vec::new()
            };
            if md.file_type().is_dir() {
                stack.push(p.clone());
            }
            out.insert(p, (kind, md.len(), md.modified().expect("mtime"), bytes));
        }
    }
    out
}

fn mkfifo(p: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).expect("c path");
    // SAFETY: a valid NUL-terminated path.
    let r = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
    assert_eq!(r, 0, "mkfifo {}", p.display());
}

/// The one workspace directory below a state base.
fn ws_dir(state: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> = std::fs::read_dir(state)
        .expect("state base")
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

/// A workspace with one file and a `.gitignore` (on the confirm list).
fn workspace() -> (tempfile::TempDir, PathBuf) {
    let (t, root) = tempdir();
    write(&root, "a.txt", "hello\n");
    write(&root, ".gitignore", "target\n");
    (t, root)
}

/// Commands that change nothing: reads, looks at the history and index, dry runs, and
/// changes refused (writes off, confirmation required, nothing to undo, no match).
const NO_CHANGE: &[&[&str]] = &[
    &["history"],
    &["history", "--json"],
    &["grep", "hello"],
    &["glob", "*.txt"],
    &["read", "a.txt"],
    &["ls"],
    &["info", "a.txt"],
    &["exists", "a.txt"],
    &["index", "status"],
    &["config"],
    &["undo", "--dry-run"],
    &["undo"],
    &["--allow-write", "undo"],
    &["--allow-write", "undo", "--dry-run"],
    &["--allow-write", "undo", "7"],
    &["edit", "a.txt", "--old", "hello", "--new", "bye"],
    &[
        "--allow-write",
        "--dry-run",
        "edit",
        "a.txt",
        "--old",
        "hello",
        "--new",
        "bye",
    ],
    &[
        "--allow-write",
        "edit",
        "a.txt",
        "--old",
        "not there",
        "--new",
        "bye",
    ],
    &[
        "--allow-write",
        "edit",
        ".gitignore",
        "--old",
        "target",
        "--new",
        "x",
    ],
    &["rm", "a.txt"],
    &["--allow-write", "rm", "missing.txt"],
    &["--allow-write", "rm", ".gitignore"],
    &["mv", "a.txt", "b.txt"],
];

#[test]
fn commands_that_change_nothing_create_no_state_directory_outside_or_inside_the_root() {
    let (_t, root) = workspace();
    let (_o, outside) = tempdir();
    let before = crate::util::snapshot(&root);
    for args in NO_CHANGE {
        for state in [outside.join("st"), root.join("st"), root.join("deep/er/st")] {
            let r = run(&root, &state, args);
            assert!(r.code.is_some(), "{args:?} hung");
            assert!(
                !state.exists(),
                "{args:?} created {} (exit {:?}): {}",
                state.display(),
                r.code,
                r.text
            );
            assert!(
                !root.join("deep").exists(),
                "{args:?} created a parent of the state directory"
            );
            assert_eq!(
                crate::util::snapshot(&root),
                before,
                "{args:?} changed the root"
            );
        }
        // The same through FERRET_STATE_DIR.
        let state = root.join("envst");
        let out = bin()
            .arg("--root")
            .arg(&root)
            .env("FERRET_STATE_DIR", &state)
            .args(*args)
            .stdin(Stdio::null())
            .output()
            .expect("run");
        assert!(!state.exists(), "{args:?} via FERRET_STATE_DIR: {out:?}");
    }
}

#[test]
fn a_change_with_the_state_directory_inside_the_root_is_refused_and_creates_nothing() {
    let (_t, root) = workspace();
    let before = crate::util::snapshot(&root);
    for state in [root.join("st"), root.join("a/b/st")] {
        for args in [
            &[
                "--allow-write",
                "edit",
                "a.txt",
                "--old",
                "hello",
                "--new",
                "bye",
            ][..],
            &["--allow-write", "rm", "a.txt"],
            &["--allow-write", "mv", "a.txt", "b.txt"],
            &["--allow-write", "history", "--recover"],
        ] {
            let r = run(&root, &state, args);
            assert_ne!(r.code, Some(0), "{args:?}: {}", r.text);
            assert!(r.text.contains("inside"), "{args:?}: {}", r.text);
            assert!(!state.exists(), "{args:?} created {}", state.display());
            assert!(!root.join("a").exists());
            assert_eq!(crate::util::snapshot(&root), before, "{args:?}");
        }
    }
}

#[test]
fn commands_that_change_nothing_leave_an_existing_state_directory_untouched() {
    let (_t, root) = workspace();
    let (_o, outside) = tempdir();
    let state = outside.join("st");
    // A history to look at: a change, and its undo.
    let r = run(
        &root,
        &state,
        &[
            "--allow-write",
            "edit",
            "a.txt",
            "--old",
            "hello",
            "--new",
            "bye",
        ],
    );
    assert_eq!(r.code, Some(0), "{}", r.text);
    let before = listing(&state);
    std::thread::sleep(Duration::from_millis(20));
    // All but the undo that would undo that change.
    for args in NO_CHANGE
        .iter()
        .filter(|a| **a != ["--allow-write", "undo"])
    {
        let r = run(&root, &state, args);
        assert!(r.code.is_some(), "{args:?} hung");
        assert_eq!(
            listing(&state),
            before,
            "{args:?} touched the state directory"
        );
    }
    // Leases are gone with their process: none is left by the change above.
    let leases: Vec<_> = std::fs::read_dir(ws_dir(&state).join("leases"))
        .expect("leases")
        .flatten()
        .collect();
    assert!(leases.is_empty(), "{leases:?}");
}

#[test]
fn the_shell_leaves_no_lease_behind_and_creates_nothing_when_it_changes_nothing() {
    let (_t, root) = workspace();
    let (_o, outside) = tempdir();
    let state = outside.join("st");
    // Reads only, ended by EOF and by /quit: nothing at all.
    for script in ["ls\nread a.txt\n/history\n", "ls\n/quit\n", "exit\n"] {
        let r = run_in(&root, &state, &["shell"], Some(script));
        assert_eq!(r.code, Some(0), "{script:?}: {}", r.text);
        assert!(!state.exists(), "{script:?} created the state directory");
    }
    // A change, then EOF, /quit, a failing last command: the lease goes with the shell.
    for script in [
        "edit a.txt --old hello --new bye\n",
        "edit a.txt --old bye --new hello\n/quit\n",
        "edit a.txt --old hello --new bye\nread missing\n",
    ] {
        let r = run_in(&root, &state, &["--allow-write", "shell"], Some(script));
        assert!(r.code.is_some(), "{script:?} hung");
        let leases: Vec<_> = std::fs::read_dir(ws_dir(&state).join("leases"))
            .expect("leases")
            .flatten()
            .map(|e| e.path())
            .collect();
        assert!(leases.is_empty(), "{script:?} left {leases:?}");
    }
    // The interactive shell (a terminal), left by Ctrl-D and by /quit.
    for keys in ["ls\n\x04", "edit a.txt --old hello --new bye\n/quit\n"] {
        let Some(done) = interactive(&root, &state, keys) else {
            return; // no `script` to give it a terminal
        };
        assert!(done, "interactive {keys:?} hung");
        let leases: Vec<_> = std::fs::read_dir(ws_dir(&state).join("leases"))
            .expect("leases")
            .flatten()
            .map(|e| e.path())
            .collect();
        assert!(leases.is_empty(), "interactive {keys:?} left {leases:?}");
    }
}

/// Runs the shell on a terminal (util-linux `script`), typing `keys` line by line.
/// None without `script`; else whether it ended within 20 s.
fn interactive(root: &Path, state: &Path, keys: &str) -> Option<bool> {
    if !Path::new("/usr/bin/script").exists() {
        return None;
    }
    let cmd = format!(
        "{} --allow-write --root {} --state-dir {} shell",
        env!("CARGO_BIN_EXE_ferret"),
        root.display(),
        state.display()
    );
    let mut child = std::process::Command::new("/usr/bin/script")
        .args(["-qec", &cmd, "/dev/null"])
        .env("XDG_STATE_HOME", crate::util::scratch_state())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("script");
    {
        use std::io::Write;
        let mut i = child.stdin.take().expect("stdin");
        for k in keys.split_inclusive('\n') {
            let _ = i.write_all(k.as_bytes());
            std::thread::sleep(Duration::from_millis(300));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let start = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            return Some(false);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(true)
}

#[test]
fn a_fifo_link_or_directory_at_the_shell_history_is_not_used() {
    for bad in [Bad::Fifo, Bad::Link, Bad::Dir] {
        let (_t, root, state, ws, secret) = with_change();
        let at = ws.join("shell_history");
        place(bad, &at, &secret);
        let Some(done) = interactive(&root, &state, "ls\n/quit\n") else {
            return;
        };
        assert!(done, "{bad:?} at the shell history: hung");
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), SECRET, "{bad:?}");
        let md = std::fs::symlink_metadata(&at).expect("still there");
        assert!(!md.file_type().is_file(), "{bad:?} was replaced");
    }
}

/// What a bad entry at a state name must not do: hang, show or change the secret.
fn assert_safe(what: &str, r: &Ran, secret: &Path) {
    assert!(r.code.is_some(), "{what}: hung");
    assert!(
        !r.text.contains(SECRET),
        "{what}: showed the secret: {}",
        r.text
    );
    assert_eq!(
        std::fs::read_to_string(secret).expect("secret"),
        SECRET,
        "{what}: the link's target changed"
    );
}

/// The three things that can be put at a name instead of a file.
#[derive(Debug, Clone, Copy)]
enum Bad {
    Fifo,
    Link,
    Dir,
    /// A sparse file over a gigabyte: huge on paper, nothing on disk.
    Huge,
}

fn place(bad: Bad, at: &Path, secret: &Path) {
    if let Ok(md) = std::fs::symlink_metadata(at) {
        if md.is_dir() {
            std::fs::remove_dir_all(at).expect("rm dir");
        } else {
            std::fs::remove_file(at).expect("rm");
        }
    }
    match bad {
        Bad::Fifo => mkfifo(at),
        Bad::Link => std::os::unix::fs::symlink(secret, at).expect("symlink"),
        Bad::Dir => std::fs::create_dir(at).expect("dir"),
        Bad::Huge => std::fs::File::create(at)
            .and_then(|f| f.set_len((1 << 30) + 1))
            .expect("huge"),
    }
}

/// A workspace with one change made, its state outside, and a secret file outside.
fn with_change() -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf, PathBuf) {
    let (t, base) = tempdir();
    let root = base.join("root");
    write(&root, "a.txt", "hello\n");
    let state = base.join("st");
    let secret = base.join("secret.txt");
    std::fs::write(&secret, SECRET).expect("secret");
    let r = run(
        &root,
        &state,
        &[
            "--allow-write",
            "edit",
            "a.txt",
            "--old",
            "hello",
            "--new",
            "bye",
        ],
    );
    assert_eq!(r.code, Some(0), "{}", r.text);
    let ws = ws_dir(&state);
    (t, root, state, ws, secret)
}

#[test]
fn a_fifo_link_or_directory_at_the_journal_is_refused_with_its_name_and_a_hint() {
    for bad in [Bad::Fifo, Bad::Link, Bad::Dir] {
        let (_t, root, state, ws, secret) = with_change();
        let journal = ws.join("journal.jsonl");
        place(bad, &journal, &secret);
        for args in [
            &["history"][..],
            &["--allow-write", "undo"],
            &[
                "--allow-write",
                "edit",
                "a.txt",
                "--old",
                "bye",
                "--new",
                "x",
            ],
            &["--allow-write", "history", "--recover"],
        ] {
            let r = run(&root, &state, args);
            let what = format!("{bad:?} at the journal, {args:?}");
            assert_safe(&what, &r, &secret);
            assert_ne!(r.code, Some(0), "{what}: {}", r.text);
            assert!(r.text.contains("IO_ERROR"), "{what}: {}", r.text);
            assert!(r.text.contains("journal.jsonl"), "{what}: {}", r.text);
            assert!(
                r.text.contains("move that name aside"),
                "{what}: {}",
                r.text
            );
            // Nothing changed in the workspace.
            assert_eq!(
                std::fs::read_to_string(root.join("a.txt")).unwrap(),
                "bye\n"
            );
        }
    }
}

#[test]
fn a_journal_over_the_size_cap_is_refused_at_once() {
    let (_t, root, state, ws, _secret) = with_change();
    let journal = ws.join("journal.jsonl");
    // Sparse: over a gigabyte on paper, nothing on disk.
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&journal)
        .expect("journal");
    f.set_len((1 << 30) + 1).expect("grow");
    for args in [&["history"][..], &["--allow-write", "undo"]] {
        let start = Instant::now();
        let r = run(&root, &state, args);
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{args:?} read it"
        );
        assert_eq!(r.code, Some(2), "{args:?}: {}", r.text);
        assert!(r.text.contains("FILE_TOO_LARGE"), "{args:?}: {}", r.text);
        assert!(r.text.contains("journal.jsonl"), "{args:?}: {}", r.text);
        assert!(r.text.contains("move it aside"), "{args:?}: {}", r.text);
    }
}

#[test]
fn a_fifo_link_directory_or_huge_file_at_a_backup_never_reaches_the_workspace() {
    for bad in [Bad::Fifo, Bad::Link, Bad::Dir, Bad::Huge] {
        let (_t, root, state, ws, secret) = with_change();
        let backups: Vec<PathBuf> = std::fs::read_dir(ws.join("backups"))
            .expect("backups")
            .flatten()
            .flat_map(|d| std::fs::read_dir(d.path()).expect("per file").flatten())
            .map(|e| e.path())
            .collect();
        assert_eq!(backups.len(), 1);
        place(bad, &backups[0], &secret);
        let r = run(&root, &state, &["--allow-write", "undo"]);
        let what = format!("{bad:?} at the backup");
        assert_safe(&what, &r, &secret);
        assert_ne!(r.code, Some(0), "{what}: {}", r.text);
        assert!(r.text.contains("IO_ERROR"), "{what}: {}", r.text);
        assert!(
            r.text
                .contains("cannot read the change's backup in the state directory"),
            "{what}: {}",
            r.text
        );
        assert_eq!(
            std::fs::read_to_string(root.join("a.txt")).unwrap(),
            "bye\n",
            "{what}: the file was restored from it"
        );
    }
}

#[test]
fn a_link_or_file_at_a_state_folder_is_refused_and_nothing_lands_outside() {
    // `backups`, `leases`, `index` and the per-file backup folder, each replaced by a link
    // to a folder outside (or a file): the change is refused, the outside folder stays
    // empty.
    for name in ["backups", "leases", "index", "trash"] {
        for file_instead in [false, true] {
            let (_t, root, state, ws, secret) = with_change();
            let outside = secret.parent().unwrap().join("elsewhere");
            std::fs::create_dir(&outside).expect("outside dir");
            // A file there that looks like a dead process's lease.
            std::fs::write(outside.join("123-old"), "keep").expect("sentinel");
            let at = ws.join(name);
            if at.exists() {
                std::fs::remove_dir_all(&at).expect("rm");
            }
            if file_instead {
                std::fs::write(&at, "x").expect("file");
            } else {
                std::os::unix::fs::symlink(&outside, &at).expect("link");
            }
            let args: &[&str] = if name == "index" {
                &["index"]
            } else if name == "trash" {
                &["--allow-write", "rm", "a.txt"]
            } else {
                &[
                    "--allow-write",
                    "edit",
                    "a.txt",
                    "--old",
                    "bye",
                    "--new",
                    "x",
                ]
            };
            let r = run(&root, &state, args);
            let what = format!("{name} (file: {file_instead}), {args:?}");
            assert_safe(&what, &r, &secret);
            let there: Vec<_> = std::fs::read_dir(&outside)
                .unwrap()
                .flatten()
                .map(|e| e.file_name())
                .collect();
            assert_eq!(there, ["123-old"], "{what}: changed outside: {}", r.text);
            if name != "index" {
                assert_ne!(r.code, Some(0), "{what}: {}", r.text);
                assert!(r.text.contains("IO_ERROR"), "{what}: {}", r.text);
                assert_eq!(
                    std::fs::read_to_string(root.join("a.txt")).unwrap(),
                    "bye\n"
                );
            }
        }
    }
}

#[test]
fn a_fifo_link_directory_or_huge_file_at_a_lease_or_the_index_never_hangs() {
    for bad in [Bad::Fifo, Bad::Link, Bad::Dir, Bad::Huge] {
        let (_t, root, state, ws, secret) = with_change();
        // A change left pending by a "process" whose lease is the bad entry.
        let journal = ws.join("journal.jsonl");
        let mut text = std::fs::read_to_string(&journal).expect("journal");
        let first = text.lines().next().expect("a line").to_string();
        let mut v: serde_json::Value = serde_json::from_str(&first).expect("entry");
        v["id"] = 50.into();
        v["lease"] = "999-bad".into();
        v["pending"] = true.into();
        text.push_str(&format!("{v}\n"));
        std::fs::write(&journal, text).expect("journal");
        place(bad, &ws.join("leases/999-bad"), &secret);
        // The index file too.
        std::fs::create_dir_all(ws.join("index")).expect("index dir");
        place(bad, &ws.join("index/trigrams.v1"), &secret);
        for args in [
            &["history"][..],
            &["index", "status"],
            &["grep", "bye"],
            &["--allow-write", "history", "--recover"],
            &[
                "--allow-write",
                "edit",
                "a.txt",
                "--old",
                "bye",
                "--new",
                "x",
            ],
        ] {
            let r = run(&root, &state, args);
            assert_safe(
                &format!("{bad:?} at a lease and the index, {args:?}"),
                &r,
                &secret,
            );
        }
    }
}

#[test]
fn a_fifo_link_or_directory_at_the_audit_log_is_refused_at_start() {
    for bad in [Bad::Fifo, Bad::Link, Bad::Dir] {
        let (_t, base) = tempdir();
        let root = base.join("root");
        write(&root, "a.txt", "hello\n");
        let secret = base.join("secret.txt");
        std::fs::write(&secret, SECRET).expect("secret");
        let log = base.join("audit.jsonl");
        place(bad, &log, &secret);
        let log_s = log.to_string_lossy().into_owned();
        let r = run(
            &root,
            &base.join("st"),
            &["--audit-log", &log_s, "read", "a.txt"],
        );
        let what = format!("{bad:?} at the audit log");
        assert_safe(&what, &r, &secret);
        assert_ne!(r.code, Some(0), "{what}: {}", r.text);
        assert!(r.text.contains("audit"), "{what}: {}", r.text);
    }
}

#[test]
fn a_state_directory_of_another_user_is_refused() {
    // Only root can hand a directory to another user.
    if rustix::process::geteuid().as_raw() != 0 {
        return;
    }
    let (_t, root, state, ws, _secret) = with_change();
    std::os::unix::fs::chown(&ws, Some(4242), Some(4242)).expect("chown");
    for args in [
        &[
            "--allow-write",
            "edit",
            "a.txt",
            "--old",
            "bye",
            "--new",
            "x",
        ][..],
        &["--allow-write", "undo"],
        &["history"],
    ] {
        let r = run(&root, &state, args);
        assert_ne!(r.code, Some(0), "{args:?}: {}", r.text);
        assert!(r.text.contains("another user"), "{args:?}: {}", r.text);
        assert_eq!(
            std::fs::read_to_string(root.join("a.txt")).unwrap(),
            "bye\n"
        );
    }
    // Ours, but in a folder of another user's (who could swap it for their own).
    std::os::unix::fs::chown(&ws, Some(0), Some(0)).expect("chown back");
    std::os::unix::fs::chown(&state, Some(4242), Some(4242)).expect("chown base");
    let r = run(
        &root,
        &state,
        &[
            "--allow-write",
            "edit",
            "a.txt",
            "--old",
            "bye",
            "--new",
            "x",
        ],
    );
    assert_ne!(r.code, Some(0), "{}", r.text);
    assert!(r.text.contains("could replace it"), "{}", r.text);
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).unwrap(),
        "bye\n"
    );
}

#[test]
fn index_status_and_searches_write_nothing_even_over_a_damaged_index() {
    let (_t, root) = workspace();
    let (_o, outside) = tempdir();
    let state = outside.join("st");
    let r = run(&root, &state, &["index"]);
    assert_eq!(r.code, Some(0), "{}", r.text);
    let file = ws_dir(&state).join("index/trigrams.v1");
    // Damaged in the middle: the checksum no longer matches.
    let mut bytes = std::fs::read(&file).expect("index");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&file, &bytes).expect("damage");
    std::thread::sleep(Duration::from_millis(20));
    let before = listing(&state);
    for _ in 0..2 {
        for args in [
            &["index", "status"][..],
            &["index", "status", "--json"],
            &["grep", "hello"],
            &["glob", "*.txt"],
        ] {
            let r = run(&root, &state, args);
            assert!(r.code.is_some(), "{args:?} hung");
            assert_eq!(
                listing(&state),
                before,
                "{args:?} wrote in the state directory"
            );
        }
    }
    let r = run(&root, &state, &["index", "status"]);
    assert_eq!(r.code, Some(1), "{}", r.text);
    assert!(r.text.contains("checksum mismatch"), "{}", r.text);
    // `ferret index` is what discards and rebuilds it.
    let r = run(&root, &state, &["index"]);
    assert_eq!(r.code, Some(0), "{}", r.text);
    assert_eq!(run(&root, &state, &["index", "status"]).code, Some(0));
}

#[test]
fn a_journal_naming_a_file_outside_as_the_backup_never_restores_it() {
    // The journal is the state directory's; were it written by someone else (or an
    // older ferret's bug), the backup it names is still read only from `backups/`.
    for forged in ["outside", "dotdot"] {
        let (_t, root, state, ws, secret) = with_change();
        let journal = ws.join("journal.jsonl");
        let text = std::fs::read_to_string(&journal).expect("journal");
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        let mut v: serde_json::Value = serde_json::from_str(&lines[0]).expect("entry");
        let real = v["backup_path"].as_str().expect("a backup").to_string();
        v["backup_path"] = match forged {
            "outside" => secret.to_string_lossy().into_owned(),
            _ => format!(
                "{}/../../../../{}",
                Path::new(&real).parent().unwrap().display(),
                secret.file_name().unwrap().to_string_lossy()
            ),
        }
        .into();
        lines[0] = v.to_string();
        std::fs::write(&journal, lines.join("\n") + "\n").expect("forge");
        let r = run(&root, &state, &["--allow-write", "undo", "--yes"]);
        assert_safe(forged, &r, &secret);
        assert_ne!(r.code, Some(0), "{forged}: {}", r.text);
        assert!(
            r.text.contains("not in the state directory"),
            "{forged}: {}",
            r.text
        );
        assert_eq!(
            std::fs::read_to_string(root.join("a.txt")).unwrap(),
            "bye\n",
            "{forged}: restored from outside"
        );
    }
}

#[test]
fn a_server_that_changes_nothing_creates_nothing() {
    // Reads, a refused edit (no match, and writes off), undos with nothing to undo and
    // a dry-run undo, over stdio, then EOF. `--no-index`: a server with its index keeps
    // that index in the state directory (documented).
    let (_t, root) = workspace();
    let (_o, outside) = tempdir();
    let before = crate::util::snapshot(&root);
    let call = |id: u64, name: &str, args: serde_json::Value| {
        serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": args}})
        .to_string()
    };
    let lines = [
        serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "state_r4", "version": "1"}}})
        .to_string(),
        serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
        call(1, "read_file", serde_json::json!({"path": "a.txt"})),
        call(
            2,
            "edit",
            serde_json::json!({"path": "a.txt", "old_string": "absent", "new_string": "x"}),
        ),
        call(3, "undo", serde_json::json!({})),
        call(4, "undo", serde_json::json!({"dry_run": true})),
        call(5, "undo", serde_json::json!({"id": 3})),
    ]
    .join("\n")
        + "\n";
    for write in [false, true] {
        for state in [outside.join("st"), root.join("st")] {
            let mut args = vec!["serve", "--no-index"];
            if write {
                args.insert(0, "--allow-write");
            }
            let r = run_in(&root, &state, &args, Some(&lines));
            assert!(r.code.is_some(), "the server hung");
            assert!(
                r.text.contains("\"id\":5"),
                "no answer to the last call: {}",
                r.text
            );
            assert!(
                !state.exists(),
                "write {write}: created {}: {}",
                state.display(),
                r.text
            );
            assert_eq!(crate::util::snapshot(&root), before);
        }
    }
}

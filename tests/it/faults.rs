//! Faults where data lives: a disk that fills during a change, a backup that cannot be
//! written, a state directory that cannot be used. A full disk is simulated per process
//! with `RLIMIT_FSIZE` (`ulimit -f`, SIGXFSZ ignored): every write past the limit fails
//! (EFBIG) as it would on a full filesystem (ENOSPC), with no privileges needed. Each
//! case must report an error and leave every file as it was, with no temporary file
//! behind.

use crate::util::{scratch_state, tempdir, write};
use serde_json::{Value, json};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// `ferret --root ROOT --state-dir STATE --allow-write call TOOL ARGS` with files limited
/// to `limit_kib` KiB. Returns the exit code and the JSON printed.
fn call_limited(
    root: &Path,
    state: &Path,
    limit_kib: u64,
    tool: &str,
    args: &Value,
) -> (i32, Value) {
    let mut out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            r#"trap '' XFSZ; ulimit -f {limit_kib}; exec "$0" "$@""#
        ))
        .arg(env!("CARGO_BIN_EXE_ferret"))
        .args(["--root"])
        .arg(root)
        .arg("--state-dir")
        .arg(state)
        // Arguments on stdin: a 700 KB argument is past the kernel's limit for one.
        .args(["--allow-write", "call", tool, "-"])
        .env_clear()
        .envs(crate::util::portable_env())
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("XDG_STATE_HOME", scratch_state())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = out.stdin.take().unwrap();
    stdin.write_all(args.to_string().as_bytes()).unwrap();
    drop(stdin);
    let out = out.wait_with_output().unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), v)
}

/// Every file under `root` (relative path → content), to compare before and after.
fn snapshot(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

fn code(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or("")
}

#[test]
fn a_disk_that_fills_during_an_edit_a_write_or_a_patch_loses_nothing() {
    let (_t, base) = tempdir();
    let (root, state) = (base.join("ws"), base.join("state"));
    write(&root, "big.txt", format!("MARK\n{}\n", "a".repeat(300_000)));
    write(&root, "a.txt", "one\ntwo\n");
    write(&root, "b.txt", "three\nfour\n");
    let before = snapshot(&root);
    let huge = "z".repeat(700_000);
    let limit = 512; // KiB: every file written may be at most this big

    // An edit that grows a file past what the disk can take.
    let (rc, v) = call_limited(
        &root,
        &state,
        limit,
        "edit",
        &json!({"path": "big.txt", "old_string": "MARK", "new_string": huge}),
    );
    assert_eq!((rc, code(&v)), (1, "IO_ERROR"), "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("big.txt"),
        "{v}"
    );
    assert!(
        v["error"]["hint"].as_str().unwrap().contains("free space"),
        "{v}"
    );
    assert_eq!(
        snapshot(&root),
        before,
        "the edit changed or left something"
    );

    // A new file too big to write.
    let (rc, v) = call_limited(
        &root,
        &state,
        limit,
        "write_file",
        &json!({"path": "new.txt", "content": huge}),
    );
    assert_eq!((rc, code(&v)), (1, "IO_ERROR"), "{v}");
    assert_eq!(snapshot(&root), before, "a partial new file was left");

    // Overwriting a file with content too big for the disk keeps the old content.
    let (rc, v) = call_limited(
        &root,
        &state,
        limit,
        "write_file",
        &json!({"path": "a.txt", "content": huge, "overwrite": true}),
    );
    assert_eq!((rc, code(&v)), (1, "IO_ERROR"), "{v}");
    assert_eq!(snapshot(&root), before);

    // A patch whose second file cannot be written changes neither.
    let patch = format!(
        "*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+ONE\n*** Update File: b.txt\n@@\n-three\n+{huge}\n*** End Patch\n"
    );
    let (rc, v) = call_limited(
        &root,
        &state,
        limit,
        "apply_patch",
        &json!({"patch": patch}),
    );
    assert_eq!((rc, code(&v)), (1, "IO_ERROR"), "{v}");
    assert_eq!(snapshot(&root), before, "a patch landed in part");

    // With room again, the same edit goes through: nothing was left half-done.
    let (rc, v) = call_limited(
        &root,
        &state,
        4096,
        "edit",
        &json!({"path": "big.txt", "old_string": "MARK", "new_string": "mark"}),
    );
    assert_eq!(rc, 0, "{v}");
}

#[test]
fn a_change_whose_backup_cannot_be_written_is_refused() {
    let (_t, base) = tempdir();
    let (root, state) = (base.join("ws"), base.join("state"));
    let body = "x".repeat(600_000);
    write(&root, "f.txt", format!("HEAD\n{body}\n"));
    let before = snapshot(&root);
    // The edit makes the file small, so only the 600 KB backup is past the limit: the
    // change must be refused, not made without a backup.
    let (rc, v) = call_limited(
        &root,
        &state,
        512,
        "edit",
        &json!({"path": "f.txt", "old_string": format!("{body}\n"), "new_string": "short\n"}),
    );
    assert_eq!((rc, code(&v)), (1, "IO_ERROR"), "{v}");
    assert_eq!(snapshot(&root), before);
}

#[test]
fn an_unusable_state_directory_refuses_changes() {
    let (_t, base) = tempdir();
    let root = base.join("ws");
    write(&root, "f.txt", "old\n");
    // A regular file where the state directory must be: no journal, no backup.
    write(&base, "state", "not a directory\n");
    let before = snapshot(&root);
    let (rc, v) = call_limited(
        &root,
        &base.join("state"),
        4096,
        "edit",
        &json!({"path": "f.txt", "old_string": "old", "new_string": "new"}),
    );
    assert_eq!((rc, code(&v)), (1, "IO_ERROR"), "{v}");
    assert!(
        v["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("state directory"),
        "{v}"
    );
    assert_eq!(
        snapshot(&root),
        before,
        "a change was made without a journal"
    );
    // Reading still works.
    let (rc, v) = call_limited(
        &root,
        &base.join("state"),
        4096,
        "read_file",
        &json!({"path": "f.txt"}),
    );
    assert_eq!(rc, 0, "{v}");
}

/// Runs `script` (sh) in a private mount namespace, with `$FERRET` the binary and
/// arguments `$1` = root, `$2` = state, `$3` = a directory for answers (`N.json`): as
/// root a plain namespace, otherwise as root of a new user namespace. Mounts made there
/// are gone when it ends. Returns what it printed and the answers in order; `None` when
/// this machine allows neither namespace.
fn in_mount_namespace(
    script: &str,
    root: &Path,
    state: &Path,
) -> Option<(std::process::Output, Vec<Value>)> {
    let root_user = rustix::process::geteuid().is_root();
    let ns = if root_user { "-m" } else { "-rm" };
    let probe = Command::new("unshare")
        .args([ns, "true"])
        .stderr(Stdio::null())
        .status()
        .ok()?;
    if !probe.success() {
        eprintln!("skipped: no mount namespace on this machine");
        return None;
    }
    let answers = root.with_file_name("answers");
    std::fs::create_dir_all(&answers).unwrap();
    let out = Command::new("unshare")
        .args([ns, "sh", "-ec", script, "sh"])
        .arg(root)
        .arg(state)
        .arg(&answers)
        .env_clear()
        .envs(crate::util::portable_env())
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("FERRET", env!("CARGO_BIN_EXE_ferret"))
        .env("XDG_STATE_HOME", scratch_state())
        .output()
        .unwrap();
    let read: Vec<Value> = (1..)
        .map_while(|n| std::fs::read(answers.join(format!("{n}.json"))).ok())
        .map(|b| serde_json::from_slice(&b).unwrap_or(Value::Null))
        .collect();
    Some((out, read))
}

/// A workspace on a read-only mount: reads and searches work; an edit, a new file, a
/// delete and a patch each report IO_ERROR with a hint naming the read-only filesystem,
/// change nothing, and leave no pending change in the journal.
#[test]
fn a_read_only_filesystem_refuses_every_change_and_loses_nothing() {
    let (_t, base) = tempdir();
    let (root, state) = (base.join("ws"), base.join("state"));
    write(&root, "a.txt", "one\ntwo\n");
    write(&root, "d/b.txt", "three\n");
    let before = snapshot(&root);
    let script = r#"
        mount --bind "$1" "$1"
        mount -o remount,bind,ro "$1"
        n=0
        f() { n=$((n+1)); "$FERRET" --root "$1" --state-dir "$2" --allow-write call "$4" "$5" > "$3/$n.json" || true; }
        f "$1" "$2" "$3" read_file '{"path": "a.txt"}'
        f "$1" "$2" "$3" grep '{"pattern": "t"}'
        f "$1" "$2" "$3" edit '{"path": "a.txt", "old_string": "one", "new_string": "uno"}'
        f "$1" "$2" "$3" write_file '{"path": "new.txt", "content": "x"}'
        f "$1" "$2" "$3" file_delete '{"path": "d/b.txt"}'
        f "$1" "$2" "$3" move '{"source": "a.txt", "destination": "z.txt"}'
        f "$1" "$2" "$3" apply_patch '{"changes": [{"path": "a.txt", "edits": [{"old_string": "two", "new_string": "dos"}]}, {"path": "c.txt", "create": "x"}]}'
    "#;
    let Some((out, answers)) = in_mount_namespace(script, &root, &state) else {
        return;
    };
    assert_eq!(
        answers.len(),
        7,
        "{answers:?}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(answers[0]["content"], "one\ntwo\n");
    assert_eq!(answers[1]["files"].as_array().map(Vec::len), Some(2));
    for a in &answers[2..] {
        assert_eq!(code(a), "IO_ERROR", "{a}");
        let hint = a["error"]["hint"].as_str().unwrap_or("");
        assert!(hint.contains("read-only"), "the hint names the cause: {a}");
    }
    assert_eq!(snapshot(&root), before);
    let history = crate::util::bin()
        .args(["--root"])
        .arg(&root)
        .arg("--state-dir")
        .arg(&state)
        .args(["history", "--json"])
        .output()
        .unwrap();
    let entries: Vec<Value> = serde_json::from_slice(&history.stdout).unwrap_or_default();
    // No change was made, so none is settled; none is left pending either.
    assert!(entries.is_empty(), "{entries:?}");
}

/// A real full filesystem (a 1 MiB tmpfs): an edit that needs more room than is left
/// fails with IO_ERROR and leaves the file whole; a state directory on a full
/// filesystem refuses the change rather than making it without its backup.
#[test]
fn a_real_full_filesystem_loses_nothing() {
    let (_t, base) = tempdir();
    let (root, state) = (base.join("ws"), base.join("state"));
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&state).unwrap();
    let script = r#"
        mount -t tmpfs -o size=1m none "$1"
        head -c 400000 /dev/zero | tr '\0' a > "$1/big.txt"
        echo MARK >> "$1/big.txt"
        # The fill: what is left is less than a second copy of big.txt.
        head -c 500000 /dev/zero > "$1/fill" 2>/dev/null || true
        "$FERRET" --root "$1" --state-dir "$2" --allow-write call edit '{"path": "big.txt", "old_string": "MARK", "new_string": "DONE"}' > "$3/1.json" || true
        sha256sum "$1/big.txt"
        ls -a "$1"
        # Now the state directory full instead, the workspace with room.
        rm "$1/fill"
        mount -t tmpfs -o size=64k none "$2"
        head -c 200000 /dev/zero > "$2/fill" 2>/dev/null || true
        "$FERRET" --root "$1" --state-dir "$2" --allow-write call edit '{"path": "big.txt", "old_string": "MARK", "new_string": "DONE"}' > "$3/2.json" || true
        sha256sum "$1/big.txt"
    "#;
    let Some((out, answers)) = in_mount_namespace(script, &root, &state) else {
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        answers.len(),
        2,
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for a in &answers {
        assert_eq!(code(a), "IO_ERROR", "{a}\n{text}");
    }
    let sums: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("big.txt") && l.len() > 64)
        .map(|l| &l[..64])
        .collect();
    let mut want = "a".repeat(400_000);
    want.push_str("MARK\n");
    let want = ferret::history::sha256(want.as_bytes());
    assert_eq!(sums, vec![want.as_str(), want.as_str()], "{text}");
    assert!(
        !text.lines().any(|l| l.starts_with(".ferret-")),
        "a temporary file was left: {text}"
    );
}

/// A filesystem out of inodes (a tmpfs with few): a write, a patch's new file, a move
/// and a patch's move into `x/y/z/` make `x` and `x/y`, then fail on `z`. Each reports
/// IO_ERROR and takes the folders it made away again (round 30: they stayed, named in
/// no journal, so undo could not take them either).
#[test]
fn a_change_that_runs_out_of_room_on_its_way_leaves_no_folder_it_made() {
    let (_t, base) = tempdir();
    let (root, state) = (base.join("ws"), base.join("state"));
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&state).unwrap();
    let script = r#"
        mount -t tmpfs -o size=4m,nr_inodes=64 none "$1"
        echo m > "$1/m.txt"
        i=0; while touch "$1/fill$i" 2>/dev/null; do i=$((i+1)); done
        # Two inodes left: room for two folders of three.
        rm "$1/fill$((i-1))" "$1/fill$((i-2))"
        n=0
        f() { n=$((n+1)); "$FERRET" --root "$1" --state-dir "$2" --allow-write call "$4" "$5" > "$3/$n.json" || true
              echo "after $n: $(find "$1" -mindepth 1 -type d | wc -l) folders"; }
        f "$1" "$2" "$3" write_file '{"path": "x/y/z/new.txt", "content": "x"}'
        f "$1" "$2" "$3" apply_patch '{"changes": [{"path": "u/v/w/a.txt", "create": "x"}]}'
        f "$1" "$2" "$3" move '{"source": "m.txt", "destination": "p/q/r/m.txt"}'
        f "$1" "$2" "$3" apply_patch '{"changes": [{"path": "m.txt", "move_to": "k/l/o/m.txt"}]}'
        cat "$1/m.txt"
    "#;
    let Some((out, answers)) = in_mount_namespace(script, &root, &state) else {
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        answers.len(),
        4,
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for a in &answers {
        assert_eq!(code(a), "IO_ERROR", "{a}\n{text}");
    }
    for n in 1..=4 {
        assert!(
            text.contains(&format!("after {n}: 0 folders")),
            "call {n} left folders behind: {text}"
        );
    }
    assert!(text.ends_with("m\n"), "the moved file stayed: {text}");
}

/// The freedesktop trash on a full filesystem: a delete whose `.trashinfo` cannot be
/// written is refused IO_ERROR, leaves the file where it was, and leaves no empty or cut
/// `.trashinfo` in the person's trash (round 30: two zero-byte ones stayed for good,
/// and the next delete of the name went to `a.txt.2`).
#[test]
fn a_delete_the_full_trash_cannot_take_leaves_no_trash_info_behind() {
    let (_t, base) = tempdir();
    let (root, state) = (base.join("ws"), base.join("state"));
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&state).unwrap();
    let script = r#"
        # The freedesktop trash is Linux's own: the portable suite's fake OS trash has
        # no `.trashinfo` (as edges_r7's tests of it do).
        unset FERRET_PORTABLE
        mount -t tmpfs -o size=1m none "$1"
        mkdir -p "$1/w/d" "$1/xdg/Trash/files" "$1/xdg/Trash/info"
        echo hi > "$1/w/a.txt"; echo there > "$1/w/d/b.txt"
        export XDG_DATA_HOME="$1/xdg"
        head -c 2000000 /dev/zero > "$1/fill" 2>/dev/null || true
        n=0
        f() { n=$((n+1)); "$FERRET" --root "$1/w" --state-dir "$2" --allow-write call "$4" "$5" > "$3/$n.json" || true; }
        f "$1" "$2" "$3" file_delete '{"path": "a.txt"}'
        f "$1" "$2" "$3" file_delete '{"path": "d"}'
        echo "info: [$(ls -A "$1/xdg/Trash/info")] files: [$(ls -A "$1/xdg/Trash/files")]"
        cat "$1/w/a.txt" "$1/w/d/b.txt"
        # With room again, the same names go to the trash as themselves.
        rm "$1/fill"
        f "$1" "$2" "$3" file_delete '{"path": "a.txt"}'
        echo "then: [$(ls -A "$1/xdg/Trash/info" | tr '\n' ' ')]"
    "#;
    let Some((out, answers)) = in_mount_namespace(script, &root, &state) else {
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        answers.len(),
        3,
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(code(&answers[0]), "IO_ERROR", "{}\n{text}", answers[0]);
    assert_eq!(code(&answers[1]), "IO_ERROR", "{}\n{text}", answers[1]);
    assert!(text.contains("info: [] files: []"), "{text}");
    assert!(text.contains("hi\nthere\n"), "the files stayed: {text}");
    assert!(answers[2]["error"].is_null(), "{}", answers[2]);
    assert!(text.contains("then: [a.txt.trashinfo ]"), "{text}");
}

//! edit and undo on real files, with the state directory in a temp dir.

use crate::util::{self, call, code};
use ferret::{CallOptions, ErrorCode, Ferret, Session};
use serde_json::{Value, json};
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

struct Env {
    root: tempfile::TempDir,
    state: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        Env {
            root: tempfile::tempdir().unwrap(),
            state: tempfile::tempdir().unwrap(),
        }
    }
    fn ferret(&self, allow_write: bool) -> Ferret {
        util::ferret(self.root.path(), allow_write, Some(self.state.path()))
    }
    fn p(&self, rel: &str) -> std::path::PathBuf {
        self.root.path().join(rel)
    }
    fn write(&self, rel: &str, content: impl AsRef<[u8]>) {
        util::write(self.root.path(), rel, content);
    }
    fn read(&self, rel: &str) -> Vec<u8> {
        std::fs::read(self.p(rel)).unwrap()
    }
}

/// Where the journal keeps the backup a receipt (`change_id`) says was made: receipts
/// carry no host path, so a test finds it where the person would.
fn backup_of(f: &Ferret, receipt: &Value) -> std::path::PathBuf {
    let id = receipt["change_id"].as_u64().expect("a change id");
    f.history()
        .unwrap()
        .entries()
        .unwrap()
        .into_iter()
        .find(|e| e.id == id)
        .and_then(|e| e.backup_path)
        .unwrap_or_else(|| panic!("change {id} has no backup: {receipt}"))
}

#[test]
fn writes_are_opt_in() {
    let e = Env::new();
    e.write("a.txt", "one\n");
    let f = e.ferret(false);
    assert_eq!(
        code(call(
            &f,
            "edit",
            json!({"path": "a.txt", "old_string": "one", "new_string": "two"})
        )),
        ErrorCode::WriteDisabled
    );
    assert_eq!(code(call(&f, "undo", json!({}))), ErrorCode::WriteDisabled);
    let err = call(
        &f,
        "edit",
        json!({"path": "a.txt", "old_string": "one", "new_string": "two"}),
    )
    .unwrap_err();
    assert!(err.hint.unwrap().contains("--allow-write"));
    assert_eq!(e.read("a.txt"), b"one\n");
    assert_eq!(
        std::fs::read_dir(e.state.path()).unwrap().count(),
        0,
        "nothing written to the state dir"
    );
}

#[test]
fn edit_matches_exactly_once_unless_replace_all() {
    let e = Env::new();
    e.write("a.txt", "alpha\nbeta\nalpha\n    gamma  delta\n");
    let f = e.ferret(true);
    let err = call(
        &f,
        "edit",
        json!({"path": "a.txt", "old_string": "omega", "new_string": "x"}),
    )
    .unwrap_err();
    assert_eq!(err.code, ErrorCode::NoMatch);
    let err = call(
        &f,
        "edit",
        json!({"path": "a.txt", "old_string": "gamma delta", "new_string": "x"}),
    )
    .unwrap_err();
    assert_eq!(err.code, ErrorCode::NoMatch);
    assert!(err.hint.unwrap().contains("whitespace"));
    let err = call(
        &f,
        "edit",
        json!({"path": "a.txt", "old_string": "alpha", "new_string": "A"}),
    )
    .unwrap_err();
    assert_eq!(err.code, ErrorCode::NotUnique);
    assert!(
        err.message.contains("2 times") && err.message.contains("lines 1, 3"),
        "{}",
        err.message
    );
    assert_eq!(e.read("a.txt"), b"alpha\nbeta\nalpha\n    gamma  delta\n");
    let out = call(
        &f,
        "edit",
        json!({"path": "a.txt", "old_string": "alpha", "new_string": "A", "replace_all": true}),
    )
    .unwrap();
    assert_eq!(out["replacements"], 2);
    assert_eq!(e.read("a.txt"), b"A\nbeta\nA\n    gamma  delta\n");
    assert!(
        out["diff"].as_str().unwrap().contains("-alpha\n+A\n"),
        "{}",
        out["diff"]
    );
    let out = call(
        &f,
        "edit",
        json!({"path": "a.txt", "old_string": "beta\n", "new_string": ""}),
    )
    .unwrap();
    assert_eq!(out["replacements"], 1);
    assert_eq!(e.read("a.txt"), b"A\nA\n    gamma  delta\n");
    for bad in [
        json!({"path": "a.txt", "old_string": "", "new_string": "x"}),
        json!({"path": "a.txt", "old_string": "A", "new_string": "A"}),
    ] {
        assert_eq!(code(call(&f, "edit", bad)), ErrorCode::InvalidArgument);
    }
    e.write(".env", "K=v\n");
    assert_eq!(
        code(call(
            &f,
            "edit",
            json!({"path": ".env", "old_string": "K", "new_string": "J"})
        )),
        ErrorCode::DeniedPattern
    );
    assert_eq!(
        code(call(
            &f,
            "edit",
            json!({"path": "../x", "old_string": "K", "new_string": "J"})
        )),
        ErrorCode::PathTraversal
    );
}

#[test]
fn edit_keeps_crlf_bom_and_permissions() {
    let e = Env::new();
    e.write("win.txt", "one\r\ntwo\r\nthree\r\n");
    e.write("bom.txt", b"\xEF\xBB\xBFhello world\n");
    e.write("ro.txt", "locked\n");
    std::fs::set_permissions(e.p("ro.txt"), std::fs::Permissions::from_mode(0o444)).unwrap();
    e.write("exec.sh", "#!/bin/sh\necho hi\n");
    std::fs::set_permissions(e.p("exec.sh"), std::fs::Permissions::from_mode(0o751)).unwrap();
    let f = e.ferret(true);
    call(
        &f,
        "edit",
        json!({"path": "win.txt", "old_string": "one\ntwo", "new_string": "1\n2\n2b"}),
    )
    .unwrap();
    assert_eq!(e.read("win.txt"), b"1\r\n2\r\n2b\r\nthree\r\n");
    call(
        &f,
        "edit",
        json!({"path": "bom.txt", "old_string": "hello", "new_string": "bye"}),
    )
    .unwrap();
    assert_eq!(e.read("bom.txt"), b"\xEF\xBB\xBFbye world\n");
    call(
        &f,
        "edit",
        json!({"path": "ro.txt", "old_string": "locked", "new_string": "changed"}),
    )
    .unwrap();
    assert_eq!(e.read("ro.txt"), b"changed\n");
    assert_eq!(
        std::fs::metadata(e.p("ro.txt"))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777,
        0o444
    );
    call(
        &f,
        "edit",
        json!({"path": "exec.sh", "old_string": "hi", "new_string": "ho"}),
    )
    .unwrap();
    assert_eq!(
        std::fs::metadata(e.p("exec.sh"))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777,
        0o751
    );
}

#[test]
fn edit_through_an_inside_symlink_changes_the_target_and_keeps_the_link() {
    let e = Env::new();
    std::fs::create_dir(e.p("real")).unwrap();
    e.write("real/t.txt", "target\n");
    symlink("real/t.txt", e.p("link.txt")).unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("o.txt"), "outside\n").unwrap();
    symlink(outside.path().join("o.txt"), e.p("out.txt")).unwrap();
    let f = e.ferret(true);
    let out = call(
        &f,
        "edit",
        json!({"path": "link.txt", "old_string": "target", "new_string": "edited"}),
    )
    .unwrap();
    assert_eq!(out["path"], "link.txt");
    assert!(
        std::fs::symlink_metadata(e.p("link.txt"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(e.read("real/t.txt"), b"edited\n");
    assert_eq!(
        code(call(
            &f,
            "edit",
            json!({"path": "out.txt", "old_string": "outside", "new_string": "x"})
        )),
        ErrorCode::PathEscape
    );
    assert_eq!(
        std::fs::read(outside.path().join("o.txt")).unwrap(),
        b"outside\n"
    );
    // undo restores the target and keeps the link too
    call(&f, "undo", json!({})).unwrap();
    assert_eq!(e.read("real/t.txt"), b"target\n");
    assert!(
        std::fs::symlink_metadata(e.p("link.txt"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn dry_run_writes_nothing() {
    let e = Env::new();
    e.write("a.txt", "one\n");
    let f = e.ferret(true);
    let out = call(
        &f,
        "edit",
        json!({"path": "a.txt", "old_string": "one", "new_string": "two", "dry_run": true}),
    )
    .unwrap();
    assert_eq!(out["dry_run"], true);
    assert!(out["diff"].as_str().unwrap().contains("+two"));
    assert_eq!(e.read("a.txt"), b"one\n");
    assert!(f.history().unwrap().entries().unwrap().is_empty());
    let text = f
        .call(
            &Session::new("t", "t"),
            "edit",
            json!({"path": "a.txt", "old_string": "one", "new_string": "two", "dry_run": true}),
            CallOptions::default(),
        )
        .unwrap()
        .text;
    assert!(text.starts_with("Would edit a.txt"), "{text}");
}

#[test]
fn undo_restores_and_refuses_to_lose_external_changes() {
    let e = Env::new();
    e.write("a.txt", "v1\n");
    let f = e.ferret(true);
    let out = call(
        &f,
        "edit",
        json!({"path": "a.txt", "old_string": "v1", "new_string": "v2"}),
    )
    .unwrap();
    assert_eq!(out["backed_up"], true, "{out}");
    let backup = backup_of(&f, &out);
    assert!(
        Path::new(&backup).starts_with(e.state.path()),
        "backups live in the state dir"
    );
    let name = backup.to_string_lossy().to_string();
    assert!(name.contains("a.txt.") && name.ends_with(".bak"));
    assert_eq!(std::fs::read(&backup).unwrap(), b"v1\n");
    // someone else changes the file
    e.write("a.txt", "v2 plus external work\n");
    let err = call(&f, "undo", json!({})).unwrap_err();
    assert_eq!(err.code, ErrorCode::Conflict);
    assert!(
        err.message.contains("-v2 plus external work"),
        "{}",
        err.message
    );
    assert_eq!(e.read("a.txt"), b"v2 plus external work\n");
    // Forcing over content no change of this session wrote asks first (undo_r4).
    assert_eq!(
        code(call(&f, "undo", json!({"force": true}))),
        ErrorCode::ConfirmationRequired
    );
    assert_eq!(e.read("a.txt"), b"v2 plus external work\n");
    let yes = CallOptions {
        confirmed: true,
        ..Default::default()
    };
    let out = f
        .call(
            &Session::new("t", "test"),
            "undo",
            json!({"force": true}),
            yes,
        )
        .map(|o| o.structured)
        .unwrap();
    assert_eq!(e.read("a.txt"), b"v1\n");
    let kept = backup_of(&f, &out);
    assert_eq!(
        std::fs::read(kept).unwrap(),
        b"v2 plus external work\n",
        "the external version is kept"
    );
    assert_eq!(
        code(call(&f, "undo", json!({"id": 1}))),
        ErrorCode::Conflict
    );
    assert_eq!(code(call(&f, "undo", json!({}))), ErrorCode::NotFound);
    let entries = f.history().unwrap().entries().unwrap();
    assert_eq!(
        entries
            .iter()
            .map(|e| e.action.as_str())
            .collect::<Vec<_>>(),
        ["edit", "undo"]
    );
    assert_eq!(entries[1].undoes, Some(1));
}

#[test]
fn undo_picks_the_last_change_and_survives_restarts() {
    let e = Env::new();
    e.write("a.txt", "a0\n");
    e.write("b.txt", "b0\n");
    {
        let f = e.ferret(true);
        call(
            &f,
            "edit",
            json!({"path": "a.txt", "old_string": "a0", "new_string": "a1"}),
        )
        .unwrap();
        call(
            &f,
            "edit",
            json!({"path": "b.txt", "old_string": "b0", "new_string": "b1"}),
        )
        .unwrap();
        call(
            &f,
            "edit",
            json!({"path": "a.txt", "old_string": "a1", "new_string": "a2"}),
        )
        .unwrap();
    }
    let f = e.ferret(true); // a new process, the same journal
    call(&f, "undo", json!({})).unwrap();
    assert_eq!(e.read("a.txt"), b"a1\n");
    call(&f, "undo", json!({})).unwrap();
    assert_eq!(e.read("b.txt"), b"b0\n");
    call(&f, "undo", json!({})).unwrap();
    assert_eq!(e.read("a.txt"), b"a0\n");
}

#[test]
fn undo_reaches_a_change_older_than_the_window_kept_in_memory() {
    let e = Env::new();
    e.write("a.txt", "a0\n");
    e.write("b.txt", "b0\n");
    let f = e.ferret(true);
    let edit = |f: &Ferret, path: &str, old: &str, new: &str| {
        call(
            f,
            "edit",
            json!({"path": path, "old_string": old, "new_string": new}),
        )
        .unwrap()["change_id"]
            .as_u64()
            .unwrap()
    };
    let (a, b) = (edit(&f, "a.txt", "a0", "a1"), edit(&f, "b.txt", "b0", "b1"));
    // More changes since than a process keeps in memory (1 000, trimmed at 1 125).
    for i in 0..1_200 {
        call(
            &f,
            "write_file",
            json!({"path": format!("n/{i}.txt"), "content": "x"}),
        )
        .unwrap();
    }
    let r = call(&f, "undo", json!({"id": a})).unwrap();
    assert_eq!(r["undone"], a);
    assert_eq!(e.read("a.txt"), b"a0\n");
    // Already undone: refused, by this process and by a new one reading the file.
    assert_eq!(
        code(call(&f, "undo", json!({"id": a}))),
        ErrorCode::Conflict
    );
    assert_eq!(
        code(call(&e.ferret(true), "undo", json!({"id": a}))),
        ErrorCode::Conflict
    );
    assert_eq!(
        code(call(&f, "undo", json!({"id": 999_999}))),
        ErrorCode::NotFound
    );
    // Two processes undoing the same old change at once: it is restored once.
    let oks = std::thread::scope(|s| {
        let runs: Vec<_> = (0..2)
            .map(|_| s.spawn(|| call(&e.ferret(true), "undo", json!({"id": b})).is_ok()))
            .collect();
        runs.into_iter()
            .map(|h| h.join().unwrap())
            .filter(|&ok| ok)
            .count()
    });
    assert_eq!(oks, 1, "exactly one undo restores it");
    assert_eq!(e.read("b.txt"), b"b0\n");
}

#[test]
fn the_last_50_backups_per_file_are_kept() {
    let e = Env::new();
    e.write("a.txt", "0\n");
    e.write("b.txt", "x\n");
    let f = e.ferret(true);
    for i in 0..55 {
        call(&f, "edit", json!({"path": "a.txt", "old_string": format!("{i}\n"), "new_string": format!("{}\n", i + 1)})).unwrap();
    }
    let b = call(
        &f,
        "edit",
        json!({"path": "b.txt", "old_string": "x", "new_string": "y"}),
    )
    .unwrap();
    let a_dir = Path::new(
        f.history().unwrap().entries().unwrap()[54]
            .backup_path
            .as_ref()
            .unwrap(),
    )
    .parent()
    .unwrap()
    .to_path_buf();
    assert_eq!(std::fs::read_dir(&a_dir).unwrap().count(), 50);
    assert!(
        Path::new(&backup_of(&f, &b)).exists(),
        "other files keep their own backups"
    );
}

#[test]
fn concurrent_writers_share_one_journal() {
    let e = Env::new();
    for i in 0..8 {
        e.write(&format!("f{i}.txt"), "0\n");
    }
    std::thread::scope(|s| {
        for i in 0..8 {
            let e = &e;
            s.spawn(move || {
                let f = e.ferret(true); // separate instances, as separate servers would be
                for n in 0..10 {
                    call(&f, "edit", json!({"path": format!("f{i}.txt"), "old_string": format!("{n}\n"), "new_string": format!("{}\n", n + 1)})).unwrap();
                }
            });
        }
    });
    let entries = e.ferret(true).history().unwrap().entries().unwrap();
    let ids: Vec<u64> = entries.iter().map(|e| e.id).collect();
    assert_eq!(ids, (1..=80).collect::<Vec<_>>());
}

/// `ferret` with a real freedesktop trash under `data` and the state dir of `e`.
fn cli(e: &Env, data: &Path) -> assert_cmd::Command {
    let mut c = assert_cmd::Command::cargo_bin("ferret").unwrap();
    c.env_clear()
        .envs(crate::util::portable_env())
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("XDG_DATA_HOME", data)
        .arg("--root")
        .arg(e.root.path())
        .arg("--state-dir")
        .arg(e.state.path())
        .arg("--allow-write");
    c
}

#[test]
fn rm_then_undo_restores_byte_identical_through_the_os_trash() {
    let e = Env::new();
    let data = tempfile::tempdir_in(e.root.path().parent().unwrap()).unwrap();
    let content: Vec<u8> = (0..=255u8).cycle().take(100_000).collect();
    e.write("x.bin", &content);
    std::fs::create_dir_all(e.p("dir/sub")).unwrap();
    e.write("dir/sub/f.txt", "inner\n");
    cli(&e, data.path())
        .args(["rm", "x.bin"])
        .assert()
        .success()
        .stdout(predicates::str::contains("system trash"));
    assert!(!e.p("x.bin").exists());
    assert!(
        crate::util::os_trash_item(data.path(), "x.bin").exists(),
        "it is in the user's trash"
    );
    cli(&e, data.path()).args(["rm", "dir"]).assert().success();
    assert!(!e.p("dir").exists());
    cli(&e, data.path()).arg("undo").assert().success();
    assert_eq!(
        e.read("dir/sub/f.txt"),
        b"inner\n",
        "directories come back whole"
    );
    cli(&e, data.path()).arg("undo").assert().success();
    assert_eq!(e.read("x.bin"), content);
    assert!(!crate::util::os_trash_item(data.path(), "x.bin").exists());
}

#[test]
fn rm_then_undo_with_no_usable_os_trash_uses_ferrets() {
    let e = Env::new();
    e.write("x.txt", "precious\n");
    let nowhere = Path::new("/dev/null/no-trash-here");
    cli(&e, nowhere)
        .args(["rm", "x.txt"])
        .assert()
        .success()
        .stdout(predicates::str::contains("ferret trash"));
    assert!(!e.p("x.txt").exists());
    let ws_state = std::fs::read_dir(e.state.path())
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    let trashed: Vec<_> = std::fs::read_dir(ws_state.join("trash"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(trashed.len(), 1);
    assert!(trashed[0].file_name().to_string_lossy().ends_with("_x.txt"));
    cli(&e, nowhere).arg("undo").assert().success();
    assert_eq!(e.read("x.txt"), b"precious\n");
    // something standing at the path is never overwritten
    cli(&e, nowhere).args(["rm", "x.txt"]).assert().success();
    e.write("x.txt", "new file\n");
    cli(&e, nowhere)
        .arg("undo")
        .assert()
        .code(2)
        .stderr(predicates::str::contains("CONFLICT"));
    assert_eq!(e.read("x.txt"), b"new file\n");
}

/// A workspace with a file, a confirm-listed CI file and a secret, and a real trash.
fn confirm_fixture() -> (Env, tempfile::TempDir) {
    let e = Env::new();
    let data = tempfile::tempdir_in(e.root.path().parent().unwrap()).unwrap();
    e.write("gone.txt", "x\n");
    std::fs::create_dir_all(e.p(".github/workflows")).unwrap();
    e.write(".github/workflows/ci.yml", "on: push\n");
    e.write(".env", "K=v\n");
    (e, data)
}

#[test]
fn a_permanent_delete_needs_yes_skips_the_trash_and_cannot_be_undone() {
    let (e, data) = confirm_fixture();
    cli(&e, data.path())
        .args(["rm", "gone.txt", "--permanent"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("CONFIRMATION_REQUIRED"));
    assert!(e.p("gone.txt").exists());
    cli(&e, data.path())
        .args(["rm", "gone.txt", "--permanent", "--yes"])
        .assert()
        .success();
    assert!(!e.p("gone.txt").exists());
    assert!(
        !data.path().join("Trash/files/gone.txt").exists(),
        "permanent means not in the trash"
    );
    cli(&e, data.path())
        .args(["undo", "1"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("cannot be undone"));
}

#[test]
fn confirm_listed_paths_need_yes_to_delete_or_edit() {
    let (e, data) = confirm_fixture();
    cli(&e, data.path())
        .args(["rm", ".github/workflows/ci.yml"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("CONFIRMATION_REQUIRED"));
    cli(&e, data.path())
        .args([
            "edit",
            ".github/workflows/ci.yml",
            "--old",
            "push",
            "--new",
            "pull",
        ])
        .assert()
        .code(2);
    assert_eq!(e.read(".github/workflows/ci.yml"), b"on: push\n");
    cli(&e, data.path())
        .args([
            "edit",
            ".github/workflows/ci.yml",
            "--old",
            "push",
            "--new",
            "pull",
            "--yes",
        ])
        .assert()
        .success();
}

#[test]
fn secrets_and_roots_are_never_deleted() {
    let (e, data) = confirm_fixture();
    cli(&e, data.path())
        .args(["rm", ".env"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("DENIED_PATTERN"));
    cli(&e, data.path())
        .args(["rm", "."])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("never deleted"));
    assert!(e.p(".env").exists());
}

#[test]
fn deleting_a_symlink_deletes_the_link_and_dry_run_deletes_nothing() {
    let e = Env::new();
    let data = tempfile::tempdir_in(e.root.path().parent().unwrap()).unwrap();
    e.write("target.txt", "t\n");
    symlink("target.txt", e.p("link")).unwrap();
    cli(&e, data.path())
        .args(["--dry-run", "rm", "target.txt"])
        .assert()
        .success()
        .stdout("Would delete: target.txt\n");
    assert!(e.p("target.txt").exists());
    cli(&e, data.path()).args(["rm", "link"]).assert().success();
    assert!(std::fs::symlink_metadata(e.p("link")).is_err());
    assert_eq!(e.read("target.txt"), b"t\n");
    let f = e.ferret(false);
    assert_eq!(
        code(call(&f, "file_delete", json!({"path": "target.txt"}))),
        ErrorCode::WriteDisabled
    );
}

#[test]
fn four_sessions_of_one_server_editing_one_file_lose_nothing() {
    let e = Env::new();
    let lines: Vec<String> = (0..120).map(|i| format!("line {i:03} old")).collect();
    e.write("f.txt", lines.join("\n") + "\n");
    let f = std::sync::Arc::new(e.ferret(true));
    let workers: Vec<_> = (0..4)
        .map(|t| {
            let f = f.clone();
            std::thread::spawn(move || {
                let s = Session::new(format!("s{t}"), "agent");
                for k in 0..30 {
                    let i = t * 30 + k;
                    f.call(
                        &s,
                        "edit",
                        json!({"path": "f.txt", "old_string": format!("line {i:03} old"), "new_string": format!("line {i:03} new")}),
                        CallOptions::default(),
                    )
                    .unwrap();
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let text = String::from_utf8(e.read("f.txt")).unwrap();
    assert!(!text.contains(" old"), "an edit was lost:\n{text}");
    assert_eq!(text.matches(" new").count(), 120);
}

#[test]
fn setup_errors_are_typed() {
    let (_t, dir) = util::tempdir();
    let mut c = ferret::config::Config::defaults(ferret::config::Mode::Cli);
    c.roots = vec![dir.join("missing")];
    assert!(matches!(
        ferret::Ferret::new(c.clone()),
        Err(ferret::SetupError::Root { .. })
    ));
    util::write(&dir, "file", "x");
    c.roots = vec![dir.join("file")];
    assert!(matches!(
        ferret::Ferret::new(c.clone()),
        Err(ferret::SetupError::RootNotADirectory(_))
    ));
    c.roots = vec![dir.clone()];
    c.state_dir = Some(dir.join("state"));
    assert!(matches!(
        ferret::history::History::open(&c, std::slice::from_ref(&dir)),
        Err(ferret::SetupError::StateInsideRoot { .. })
    ));
}

#[test]
fn an_edit_receipt_says_it_backed_up_and_names_no_host_path() {
    let e = Env::new();
    e.write("a.txt", "one\n");
    let f = e.ferret(true);
    let out = f
        .call(
            &Session::new("t", "test"),
            "edit",
            json!({"path": "a.txt", "old_string": "one", "new_string": "two"}),
            CallOptions::default(),
        )
        .unwrap();
    let backup = backup_of(&f, &out.structured);
    // No part of the receipt names a host path (a crafted name could forge lines around
    // one, and it tells the host's layout): it says the content was backed up.
    let host = backup.to_string_lossy().to_string();
    let state = e.state.path().to_string_lossy().to_string();
    for part in [out.text.clone(), out.structured.to_string()] {
        assert!(!part.contains(&host) && !part.contains(&state), "{part}");
    }
    assert!(out.text.contains("backed up"), "{}", out.text);
    assert_eq!(out.structured["backed_up"], true);
    assert_eq!(std::fs::read(&backup).unwrap(), b"one\n");
}

#[test]
fn with_backups_off_an_edit_works_but_history_and_undo_say_why_it_cannot_be_undone() {
    let e = Env::new();
    let data = tempfile::tempdir_in(e.root.path().parent().unwrap()).unwrap();
    e.write("a.txt", "one\n");
    let out = cli(&e, data.path())
        .args([
            "--set",
            "backup_enabled=false",
            "edit",
            "a.txt",
            "--old",
            "one",
            "--new",
            "two",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("backups are off"));
    assert_eq!(e.read("a.txt"), b"two\n");
    let backups = std::fs::read_dir(e.state.path())
        .unwrap()
        .flatten()
        .map(|d| d.path().join("backups"))
        .filter(|b| b.exists())
        .count();
    assert_eq!(backups, 0, "nothing backed up");
    let out = cli(&e, data.path()).arg("history").output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("not undoable: backups were off"));
    let out = cli(&e, data.path()).args(["undo", "1"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("CONFLICT") && err.contains("backup_enabled"),
        "{err}"
    );
    // with no id, undo finds nothing it can undo
    let out = cli(&e, data.path()).arg("undo").output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("no change to undo"));
    assert_eq!(e.read("a.txt"), b"two\n");
}

#[test]
fn without_a_terminal_a_confirmation_says_to_pass_yes() {
    let (e, data) = confirm_fixture();
    let out = cli(&e, data.path())
        .args(["rm", "gone.txt", "--permanent"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("CONFIRMATION_REQUIRED") && err.contains("pass --yes"),
        "{err}"
    );
    assert!(e.p("gone.txt").exists());
}

// --- issue 11: edits that forgive whitespace, and say so ---------------------------------

#[test]
fn edit_forgives_line_endings_trailing_whitespace_and_indentation_and_says_which() {
    let e = Env::new();
    let f = e.ferret(true);
    let edit = |path: &str, old: &str, new: &str| {
        call(
            &f,
            "edit",
            json!({"path": path, "old_string": old, "new_string": new}),
        )
    };
    e.write("crlf.txt", "one\r\ntwo\r\nthree\r\n");
    let out = edit("crlf.txt", "one\ntwo\n", "uno\ndos\n").unwrap();
    assert_eq!(out["match"], "line_endings");
    assert_eq!(e.read("crlf.txt"), b"uno\r\ndos\r\nthree\r\n");

    e.write("trail.rs", "fn a() {   \n    x();\t\n}\n");
    let out = edit("trail.rs", "fn a() {\n    x();\n}", "fn a() {\n    y();\n}").unwrap();
    assert_eq!(out["match"], "trailing_whitespace");
    // The context lines keep the file's bytes (issue 28): only the changed line is rewritten.
    assert_eq!(e.read("trail.rs"), b"fn a() {   \n    y();\n}\n");

    e.write(
        "deep.py",
        "class A:\n    def f(self):\n        return 1\n\n    def g(self):\n        pass\n",
    );
    let out = edit(
        "deep.py",
        "def f(self):\n    return 1\n",
        "def f(self):\n    if self.x:\n        return 2\n    return 1\n",
    )
    .unwrap();
    assert_eq!(out["match"], "indentation");
    assert_eq!(
        String::from_utf8(e.read("deep.py")).unwrap(),
        "class A:\n    def f(self):\n        if self.x:\n            return 2\n        return 1\n\n    def g(self):\n        pass\n"
    );
    // and the undo of a forgiving edit restores the bytes
    let id = out["change_id"].as_u64().unwrap();
    call(&f, "undo", json!({"id": id})).unwrap();
    assert!(
        String::from_utf8(e.read("deep.py"))
            .unwrap()
            .contains("        return 1\n\n")
    );

    let exact = edit("deep.py", "return 1", "return 3").unwrap();
    assert_eq!(exact["match"], "exact");
}

#[test]
fn two_equally_good_fuzzy_places_are_not_unique_and_nothing_changes() {
    let e = Env::new();
    let f = e.ferret(true);
    let text = "a():\n    go()  \nb():\n    go() \n";
    e.write("t.py", text);
    let err = call(
        &f,
        "edit",
        json!({"path": "t.py", "old_string": "    go()\n", "new_string": "    stop()\n"}),
    )
    .unwrap_err();
    assert_eq!(err.code, ErrorCode::NotUnique);
    assert!(err.message.contains("lines 2, 4"), "{}", err.message);
    assert!(
        err.message.contains("trailing whitespace"),
        "{}",
        err.message
    );
    assert_eq!(e.read("t.py"), text.as_bytes());
}

#[test]
fn a_missed_edit_shows_the_closest_region_and_what_differs() {
    let e = Env::new();
    let f = e.ferret(true);
    let mut text = String::new();
    for i in 0..40 {
        text.push_str(&format!("line {i}\n"));
    }
    text.push_str("fn total(xs: &[u32]) -> u32 {\n    xs.iter().sum()\n}\n");
    e.write("lib.rs", &text);
    let err = call(
        &f,
        "edit",
        json!({"path": "lib.rs",
               "old_string": "fn total(xs: &[u32]) -> u32 {\n    xs.iter().copied().sum()\n}",
               "new_string": "x"}),
    )
    .unwrap_err();
    assert_eq!(err.code, ErrorCode::NoMatch);
    assert!(err.message.contains("lines 41-43"), "{}", err.message);
    assert!(
        err.message.contains("-    xs.iter().copied().sum()"),
        "{}",
        err.message
    );
    assert!(
        err.message.contains("+    xs.iter().sum()"),
        "{}",
        err.message
    );
    assert!(err.hint.unwrap().contains("41-43"));
}

// --- issue 11: the stale-write guard ------------------------------------------------------

#[test]
fn an_edit_against_a_version_the_file_no_longer_has_is_a_conflict_with_a_diff() {
    let e = Env::new();
    let f = e.ferret(true);
    e.write("a.txt", "one\ntwo\nthree\n");
    let read = call(&f, "read_file", json!({"path": "a.txt"})).unwrap();
    let v1 = read["version"].as_str().unwrap().to_string();
    assert_eq!(v1.len(), 16);
    // a ranged read of the same bytes gives the same version
    let part = call(
        &f,
        "read_file",
        json!({"path": "a.txt", "offset": 2, "limit": 1}),
    )
    .unwrap();
    assert_eq!(part["version"], v1.as_str());

    // someone else changes the file after the read
    e.write("a.txt", "one\nTWO\nthree\n");
    let err = call(
        &f,
        "edit",
        json!({"path": "a.txt", "old_string": "three", "new_string": "3", "expected_version": v1}),
    )
    .unwrap_err();
    assert_eq!(err.code, ErrorCode::Conflict);
    assert!(err.message.contains("-two\n+TWO"), "{}", err.message);
    assert_eq!(e.read("a.txt"), b"one\nTWO\nthree\n", "nothing changed");

    // against the version it holds now, the edit applies
    let v2 = call(&f, "read_file", json!({"path": "a.txt"})).unwrap()["version"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(v1, v2);
    call(
        &f,
        "edit",
        json!({"path": "a.txt", "old_string": "three", "new_string": "3", "expected_version": v2}),
    )
    .unwrap();
    assert_eq!(e.read("a.txt"), b"one\nTWO\n3\n");
}

#[test]
fn the_cli_refuses_a_stale_edit_too_without_a_diff_it_cannot_know() {
    let (_t, root) = crate::util::tempdir();
    crate::util::write(&root, "a.txt", "one\n");
    let state = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        crate::util::bin()
            .arg("--root")
            .arg(&root)
            .arg("--state-dir")
            .arg(state.path())
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&["read", "a.txt", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let version = v["version"].as_str().unwrap().to_string();
    crate::util::write(&root, "a.txt", "uno\n");
    let out = run(&[
        "--allow-write",
        "edit",
        "a.txt",
        "--old",
        "uno",
        "--new",
        "x",
        "--expected-version",
        &version,
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("CONFLICT") && err.contains("read the file again"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).unwrap(),
        "uno\n"
    );
}

// --- issue 11: write_file -------------------------------------------------------------------

#[test]
fn write_file_creates_refuses_to_clobber_and_undoes_cleanly() {
    let e = Env::new();
    let f = e.ferret(true);
    let out = call(
        &f,
        "write_file",
        json!({"path": "src/new/mod.rs", "content": "pub fn f() {}\n"}),
    )
    .unwrap();
    assert_eq!(out["created"], true);
    assert_eq!(out["created_dirs"], json!(["src", "src/new"]));
    assert_eq!(e.read("src/new/mod.rs"), b"pub fn f() {}\n");

    let err = call(
        &f,
        "write_file",
        json!({"path": "src/new/mod.rs", "content": "other\n"}),
    )
    .unwrap_err();
    assert_eq!(err.code, ErrorCode::AlreadyExists);
    assert_eq!(e.read("src/new/mod.rs"), b"pub fn f() {}\n");

    let over = call(
        &f,
        "write_file",
        json!({"path": "src/new/mod.rs", "content": "pub fn g() {}\n", "overwrite": true}),
    )
    .unwrap();
    assert_eq!(over["created"], false);
    assert!(
        over["diff"]
            .as_str()
            .unwrap()
            .contains("-pub fn f() {}\n+pub fn g() {}\n")
    );
    assert_eq!(over["backed_up"], true);
    assert!(backup_of(&f, &over).exists());

    // undo the overwrite, then the create: the tree is as it was
    call(&f, "undo", json!({})).unwrap();
    assert_eq!(e.read("src/new/mod.rs"), b"pub fn f() {}\n");
    call(&f, "undo", json!({})).unwrap();
    assert!(
        !e.p("src").exists(),
        "file and the directories made for it are gone"
    );
}

#[test]
fn undo_of_a_create_keeps_a_file_changed_since() {
    let e = Env::new();
    let f = e.ferret(true);
    let out = call(
        &f,
        "write_file",
        json!({"path": "a.txt", "content": "one\n"}),
    )
    .unwrap();
    let id = out["change_id"].as_u64().unwrap();
    e.write("a.txt", "one, edited by hand\n");
    let err = call(&f, "undo", json!({"id": id})).unwrap_err();
    assert_eq!(err.code, ErrorCode::Conflict);
    assert!(
        err.message.contains("-one, edited by hand"),
        "{}",
        err.message
    );
    assert_eq!(e.read("a.txt"), b"one, edited by hand\n");
    // forced: removed, and what it held is backed up
    // Forcing over content no change of this session wrote asks first (undo_r4).
    assert_eq!(
        code(call(&f, "undo", json!({"id": id, "force": true}))),
        ErrorCode::ConfirmationRequired
    );
    assert!(e.p("a.txt").exists());
    let yes = CallOptions {
        confirmed: true,
        ..Default::default()
    };
    let out = f
        .call(
            &Session::new("t", "test"),
            "undo",
            json!({"id": id, "force": true}),
            yes,
        )
        .map(|o| o.structured)
        .unwrap();
    assert!(!e.p("a.txt").exists());
    let backup = backup_of(&f, &out);
    assert_eq!(std::fs::read(backup).unwrap(), b"one, edited by hand\n");
}

#[test]
fn write_file_checks_versions_sizes_and_base64_and_dry_runs_write_nothing() {
    let e = Env::new();
    let f = e.ferret(true);
    e.write("a.txt", "old\n");
    let v = call(&f, "read_file", json!({"path": "a.txt"})).unwrap()["version"].clone();
    e.write("a.txt", "changed\n");
    let err = call(
        &f,
        "write_file",
        json!({"path": "a.txt", "content": "new\n", "overwrite": true, "expected_version": v}),
    )
    .unwrap_err();
    assert_eq!(err.code, ErrorCode::Conflict);
    assert_eq!(e.read("a.txt"), b"changed\n");

    let out = call(
        &f,
        "write_file",
        json!({"path": "bin/x.dat", "content": "AAEC/w==", "encoding": "base64"}),
    )
    .unwrap();
    assert_eq!(out["size"], 4);
    assert_eq!(e.read("bin/x.dat"), [0u8, 1, 2, 255]);
    let err = call(
        &f,
        "write_file",
        json!({"path": "y.dat", "content": "not base64!", "encoding": "base64"}),
    )
    .unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidArgument);

    let out = call(
        &f,
        "write_file",
        json!({"path": "deep/er/z.txt", "content": "z\n", "dry_run": true}),
    )
    .unwrap();
    assert_eq!(out["dry_run"], true);
    assert!(!e.p("deep").exists());

    let g = e.ferret(false);
    let err = call(&g, "write_file", json!({"path": "w.txt", "content": "w"})).unwrap_err();
    assert_eq!(err.code, ErrorCode::WriteDisabled);
}

// --- issue 11: move -------------------------------------------------------------------------

#[test]
fn move_renames_files_and_directories_never_over_anything_and_undoes() {
    let e = Env::new();
    let f = e.ferret(true);
    e.write("src/a.rs", "a\n");
    e.write("src/util/b.rs", "b\n");
    e.write("taken.rs", "taken\n");
    let out = call(
        &f,
        "move",
        json!({"source": "src/a.rs", "destination": "lib/core/a.rs"}),
    )
    .unwrap();
    assert_eq!(out["type"], "file");
    assert_eq!(out["created_dirs"], json!(["lib", "lib/core"]));
    assert_eq!(e.read("lib/core/a.rs"), b"a\n");
    assert!(!e.p("src/a.rs").exists());

    let out = call(
        &f,
        "move",
        json!({"source": "src/util", "destination": "tools"}),
    )
    .unwrap();
    assert_eq!(out["type"], "directory");
    assert_eq!(e.read("tools/b.rs"), b"b\n");

    let err = call(
        &f,
        "move",
        json!({"source": "tools/b.rs", "destination": "taken.rs"}),
    )
    .unwrap_err();
    assert_eq!(err.code, ErrorCode::AlreadyExists);
    assert_eq!(e.read("taken.rs"), b"taken\n");
    let err = call(
        &f,
        "move",
        json!({"source": "tools", "destination": "tools/inner"}),
    )
    .unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidArgument);

    // overwrite replaces a file, backed up; its undo brings both back
    let out = call(
        &f,
        "move",
        json!({"source": "tools/b.rs", "destination": "taken.rs", "overwrite": true}),
    )
    .unwrap();
    assert_eq!(out["backed_up"], true);
    assert!(backup_of(&f, &out).exists());
    assert_eq!(e.read("taken.rs"), b"b\n");
    call(&f, "undo", json!({})).unwrap();
    assert_eq!(e.read("taken.rs"), b"taken\n");
    assert_eq!(e.read("tools/b.rs"), b"b\n");

    // undo the directory move, then the file move: all as it was
    call(&f, "undo", json!({})).unwrap();
    assert_eq!(e.read("src/util/b.rs"), b"b\n");
    call(&f, "undo", json!({})).unwrap();
    assert_eq!(e.read("src/a.rs"), b"a\n");
    assert!(!e.p("lib/core/a.rs").exists());
}

#[test]
fn undo_of_a_move_refuses_when_the_object_there_is_another_or_the_old_place_is_taken() {
    let e = Env::new();
    let f = e.ferret(true);
    e.write("a.txt", "a\n");
    let out = call(
        &f,
        "move",
        json!({"source": "a.txt", "destination": "b.txt"}),
    )
    .unwrap();
    let id = out["change_id"].as_u64().unwrap();
    // the destination now holds another file (a new inode; the moved one is kept
    // elsewhere so its inode number cannot be reused): not what was moved
    std::fs::rename(e.p("b.txt"), e.p("kept.txt")).unwrap();
    e.write("b.txt", "a\n");
    let err = call(&f, "undo", json!({"id": id})).unwrap_err();
    assert_eq!(err.code, ErrorCode::Conflict);
    assert!(!e.p("a.txt").exists());

    e.write("c.txt", "c\n");
    let out = call(
        &f,
        "move",
        json!({"source": "c.txt", "destination": "d.txt"}),
    )
    .unwrap();
    e.write("c.txt", "new c\n");
    let err = call(&f, "undo", json!({"id": out["change_id"]})).unwrap_err();
    assert_eq!(err.code, ErrorCode::Conflict);
    assert_eq!(e.read("c.txt"), b"new c\n");
    assert_eq!(e.read("d.txt"), b"c\n");
}

// --- issue 11: apply_patch --------------------------------------------------------------------

fn three_files(e: &Env) {
    e.write("a.rs", "fn a() {\n    1\n}\n");
    e.write("b.rs", "fn b() {\r\n    2\r\n}\r\n");
    e.write("c.rs", "fn c() {\n    3\n}\n");
}

const THREE_FILE_PATCH: &str = "*** Begin Patch
*** Update File: a.rs
@@ fn a() {
-    1
+    10
*** Update File: b.rs
@@
 fn b() {
-    2
+    20
*** Update File: c.rs
@@
-    WRONG
+    30
*** End Patch
";

#[test]
fn a_patch_with_one_bad_hunk_changes_nothing_and_names_it_then_applies_whole_and_undoes_whole() {
    let e = Env::new();
    let f = e.ferret(true);
    three_files(&e);
    let before: Vec<Vec<u8>> = ["a.rs", "b.rs", "c.rs"].iter().map(|p| e.read(p)).collect();
    let err = call(&f, "apply_patch", json!({ "patch": THREE_FILE_PATCH })).unwrap_err();
    assert_eq!(err.code, ErrorCode::NoMatch);
    assert!(
        err.message.contains("change 3 (c.rs), hunk 1"),
        "{}",
        err.message
    );
    let now: Vec<Vec<u8>> = ["a.rs", "b.rs", "c.rs"].iter().map(|p| e.read(p)).collect();
    assert_eq!(now, before, "no file changed");

    let fixed = THREE_FILE_PATCH.replace("    WRONG", "    3");
    let out = call(&f, "apply_patch", json!({ "patch": fixed })).unwrap();
    assert_eq!(e.read("a.rs"), b"fn a() {\n    10\n}\n");
    assert_eq!(e.read("b.rs"), b"fn b() {\r\n    20\r\n}\r\n", "CRLF kept");
    assert_eq!(e.read("c.rs"), b"fn c() {\n    30\n}\n");
    assert_eq!(out["files"][1]["matches"], json!(["line_endings"]));

    call(&f, "undo", json!({})).unwrap();
    let now: Vec<Vec<u8>> = ["a.rs", "b.rs", "c.rs"].iter().map(|p| e.read(p)).collect();
    assert_eq!(now, before, "one undo restores all three byte for byte");
}

#[test]
fn the_text_and_structured_shapes_give_the_same_result() {
    let text = "*** Begin Patch
*** Add File: docs/new.md
+# New
*** Update File: a.rs
*** Move to: src/a.rs
@@
-    1
+    100
*** Delete File: c.rs
*** End Patch
";
    let structured = json!({"changes": [
        {"path": "docs/new.md", "create": "# New\n"},
        {"path": "a.rs", "edits": [{"old_string": "    1\n", "new_string": "    100\n"}], "move_to": "src/a.rs"},
        {"path": "c.rs", "delete": true},
    ]});
    let mut trees = Vec::new();
    for args in [json!({ "patch": text }), structured] {
        let e = Env::new();
        let f = e.ferret(true);
        three_files(&e);
        call(&f, "apply_patch", args).unwrap();
        let mut tree = Vec::new();
        for p in ["docs/new.md", "src/a.rs", "a.rs", "b.rs", "c.rs"] {
            tree.push((p, std::fs::read(e.p(p)).ok()));
        }
        assert_eq!(tree[1].1.as_deref(), Some(&b"fn a() {\n    100\n}\n"[..]));
        assert_eq!(tree[2].1, None, "moved away");
        assert_eq!(tree[4].1, None, "deleted");
        // and undo puts the tree back, including the moved and deleted files
        call(&f, "undo", json!({})).unwrap();
        assert_eq!(e.read("a.rs"), b"fn a() {\n    1\n}\n");
        assert_eq!(e.read("c.rs"), b"fn c() {\n    3\n}\n");
        assert!(!e.p("docs").exists() && !e.p("src").exists());
        trees.push(tree);
    }
    assert_eq!(trees[0], trees[1]);
}

#[test]
fn patch_refusals_name_the_change_and_write_nothing() {
    let e = Env::new();
    let f = e.ferret(true);
    three_files(&e);
    for (args, code, says) in [
        (
            json!({"changes": [{"path": "a.rs", "create": "x"}]}),
            ErrorCode::AlreadyExists,
            "change 1 (a.rs)",
        ),
        (
            json!({"changes": [{"path": "a.rs", "delete": true}, {"path": "a.rs", "delete": true}]}),
            ErrorCode::InvalidArgument,
            "twice",
        ),
        (
            json!({"changes": [{"path": "nope.rs", "delete": true}]}),
            ErrorCode::NotFound,
            "change 1",
        ),
        (
            json!({"patch": "*** Begin Patch\n*** Update File: a.rs\n@@ fn zzz\n-    1\n+    2\n*** End Patch\n"}),
            ErrorCode::NoMatch,
            "@@ line",
        ),
        (
            json!({"patch": "garbage"}),
            ErrorCode::InvalidArgument,
            "line 1",
        ),
        (json!({}), ErrorCode::InvalidArgument, "nothing to apply"),
        (
            json!({"changes": [{"path": "a.rs", "edits": [{"old_string": "fn", "new_string": "x"}], "delete": true}]}),
            ErrorCode::InvalidArgument,
            "only one",
        ),
    ] {
        let err = call(&f, "apply_patch", args.clone()).unwrap_err();
        assert_eq!(err.code, code, "{args}: {err:?}");
        assert!(err.message.contains(says), "{args}: {}", err.message);
    }
    assert_eq!(e.read("a.rs"), b"fn a() {\n    1\n}\n");
    // a dry run shows the diffs and writes nothing
    let fixed = THREE_FILE_PATCH.replace("    WRONG", "    3");
    let out = call(&f, "apply_patch", json!({"patch": fixed, "dry_run": true})).unwrap();
    assert_eq!(out["dry_run"], true);
    assert!(
        out["files"][0]["diff"]
            .as_str()
            .unwrap()
            .contains("+    10")
    );
    assert_eq!(e.read("a.rs"), b"fn a() {\n    1\n}\n");
}

// --- issue 11: read_files ---------------------------------------------------------------------

#[test]
fn read_files_reads_several_and_reports_each_failure_in_its_place() {
    let e = Env::new();
    let f = e.ferret(false);
    e.write("a.txt", "one\ntwo\nthree\n");
    e.write("src/x.rs", "fn x() {}\n");
    e.write("src/y.rs", "fn y() {}\n");
    e.write(".env", "KEY=s3cr3t-value\n");
    e.write("bin.dat", [0u8, 159, 146, 150]);
    let out = call(
        &f,
        "read_files",
        json!({"paths": ["a.txt", "src/*.rs", ".env", "missing.txt", "bin.dat", "a.txt"], "max_lines_each": 2}),
    )
    .unwrap();
    let files = out["files"].as_array().unwrap();
    let paths: Vec<&str> = files.iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert_eq!(
        paths,
        [
            "a.txt",
            "src/x.rs",
            "src/y.rs",
            ".env",
            "missing.txt",
            "bin.dat"
        ],
        "in order, once each"
    );
    assert_eq!(
        files[0]["file"]["content"], "one\ntwo\n",
        "max_lines_each applies"
    );
    assert_eq!(files[0]["file"]["truncated"], true);
    assert!(files[0]["file"]["version"].is_string());
    assert_eq!(files[1]["file"]["content"], "fn x() {}\n");
    assert_eq!(files[3]["error"]["code"], "DENIED_PATTERN");
    assert_eq!(files[4]["error"]["code"], "NOT_FOUND");
    assert_eq!(files[5]["error"]["code"], "BINARY_FILE");
    assert_eq!(out["errors"], 3);
    assert!(!out.to_string().contains("s3cr3t"));
}

#[test]
fn read_files_keeps_to_the_round_budget() {
    let e = Env::new();
    for i in 0..5 {
        e.write(&format!("f{i}.txt"), "x".repeat(1000));
    }
    let mut c = ferret::config::Config::defaults(ferret::config::Mode::Server);
    c.roots = vec![e.root.path().to_path_buf()];
    c.max_bytes_per_round = 2500;
    let f = Ferret::new(c).unwrap();
    let err = call(&f, "read_files", json!({"paths": ["*.txt"]})).unwrap_err();
    assert_eq!(err.code, ErrorCode::RoundLimitExceeded);
}

#[test]
fn a_patch_against_a_stale_version_is_refused_whole() {
    let e = Env::new();
    let f = e.ferret(true);
    three_files(&e);
    let v = |p: &str| call(&f, "read_file", json!({ "path": p })).unwrap()["version"].clone();
    let (va, vc) = (v("a.rs"), v("c.rs"));
    e.write("c.rs", "fn c() {\n    3\n}\n// changed by someone else\n");
    let fixed = THREE_FILE_PATCH.replace("    WRONG", "    3");
    let err = call(
        &f,
        "apply_patch",
        json!({"patch": fixed, "expected_versions": {"a.rs": va, "c.rs": vc}}),
    )
    .unwrap_err();
    assert_eq!(err.code, ErrorCode::Conflict);
    assert!(err.message.contains("change 3 (c.rs)"), "{}", err.message);
    assert!(
        err.message.contains("+// changed by someone else"),
        "{}",
        err.message
    );
    assert_eq!(e.read("a.rs"), b"fn a() {\n    1\n}\n", "nothing landed");
    // structured: per change
    let err = call(
        &f,
        "apply_patch",
        json!({"changes": [{"path": "c.rs", "delete": true, "expected_version": vc}]}),
    )
    .unwrap_err();
    assert_eq!(err.code, ErrorCode::Conflict);
    assert!(e.p("c.rs").exists());
    let fresh = v("c.rs");
    call(
        &f,
        "apply_patch",
        json!({"changes": [{"path": "c.rs", "delete": true, "expected_version": fresh}]}),
    )
    .unwrap();
    assert!(!e.p("c.rs").exists());
}

#[test]
fn move_goes_across_roots_and_back() {
    let (_t, base) = crate::util::tempdir();
    let (one, two) = (base.join("one"), base.join("two"));
    crate::util::write(&one, "a.txt", "a\n");
    std::fs::create_dir_all(&two).unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut c = ferret::config::Config::defaults(ferret::config::Mode::Cli);
    c.roots = vec![one.clone(), two.clone()];
    c.allow_write = true;
    c.state_dir = Some(state.path().to_path_buf());
    let f = Ferret::new(c).unwrap();
    let out = call(
        &f,
        "move",
        json!({"source": "one/a.txt", "destination": "two/sub/a.txt"}),
    )
    .unwrap();
    assert_eq!(out["destination"], "two/sub/a.txt");
    assert!(two.join("sub/a.txt").exists() && !one.join("a.txt").exists());
    call(&f, "undo", json!({})).unwrap();
    assert!(one.join("a.txt").exists() && !two.join("sub").exists());
}

#[test]
fn ferret_read_with_several_paths_reads_them_all() {
    let (_t, root) = crate::util::tempdir();
    crate::util::write(&root, "a.txt", "alpha\n");
    crate::util::write(&root, "src/b.rs", "beta\n");
    let out = crate::util::bin()
        .arg("--root")
        .arg(&root)
        .args(["read", "a.txt", "src/*.rs", "missing.txt"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("==> a.txt <==\n     1\talpha"), "{text}");
    assert!(text.contains("==> src/b.rs <==\n     1\tbeta"), "{text}");
    assert!(text.contains("==> missing.txt <==\nNOT_FOUND"), "{text}");
}

#[test]
fn a_patch_does_not_delete_or_move_through_a_link() {
    let e = Env::new();
    let f = e.ferret(true);
    e.write("real.txt", "real\n");
    std::os::unix::fs::symlink("real.txt", e.p("alias.txt")).unwrap();
    for args in [
        json!({"changes": [{"path": "alias.txt", "delete": true}]}),
        json!({"changes": [{"path": "alias.txt", "move_to": "moved.txt"}]}),
    ] {
        let err = call(&f, "apply_patch", args).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidArgument, "{err:?}");
        assert!(
            err.message.contains("symbolic link (to real.txt)"),
            "{}",
            err.message
        );
    }
    assert_eq!(e.read("real.txt"), b"real\n");
    // an update through the link changes the file, as edit does
    call(
        &f,
        "apply_patch",
        json!({"changes": [{"path": "alias.txt", "edits": [{"old_string": "real", "new_string": "REAL"}]}]}),
    )
    .unwrap();
    assert_eq!(e.read("real.txt"), b"REAL\n");
    assert!(e.p("alias.txt").is_symlink());
}

#[test]
fn the_confirm_list_asks_about_real_names_for_every_change_tool() {
    let e = Env::new();
    e.write("third_party/lib.c", "x\n");
    std::os::unix::fs::symlink("third_party", e.p("vendor")).unwrap();
    let mut c = ferret::config::Config::defaults(ferret::config::Mode::Cli);
    c.roots = vec![e.root.path().to_path_buf()];
    c.allow_write = true;
    c.state_dir = Some(e.state.path().to_path_buf());
    c.confirm = vec!["third_party/**".into()];
    let f = Ferret::new(c).unwrap();
    for (tool, args) in [
        (
            "write_file",
            json!({"path": "vendor/new.c", "content": "y\n"}),
        ),
        (
            "write_file",
            json!({"path": "vendor/lib.c", "content": "y\n", "overwrite": true}),
        ),
        (
            "apply_patch",
            json!({"changes": [{"path": "vendor/lib.c", "edits": [{"old_string": "x", "new_string": "z"}]}]}),
        ),
        (
            "apply_patch",
            json!({"changes": [{"path": "vendor/added.c", "create": "a\n"}]}),
        ),
        (
            "move",
            json!({"source": "vendor/lib.c", "destination": "lib.c"}),
        ),
    ] {
        let err = call(&f, tool, args.clone()).unwrap_err();
        assert_eq!(
            err.code,
            ErrorCode::ConfirmationRequired,
            "{tool} {args}: {err:?}"
        );
    }
    assert_eq!(e.read("third_party/lib.c"), b"x\n");
    assert!(!e.p("third_party/new.c").exists() && !e.p("third_party/added.c").exists());
}

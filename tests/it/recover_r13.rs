//! Round 13: recovery and undo settle a move's two halves as one (a patch's `move_to`
//! is a create at the destination and a remove at the source; the source goes only once
//! the destination holds exactly the moved content), whatever the person did between
//! the kill and the recovery.

use crate::util::{Ws, write};
use std::path::Path;
use std::process::Command;

const ORIG: &str = "only copy of m\n";
const EDITED: &str = "ONLY copy of m\n";
const PERSON: &str = "the person's file\n";

/// Runs `ferret --allow-write ARGS` with the test hook set to `at` (`1`: after the
/// group's staged mark; `landN`: after its first N files landed); it must die there.
fn killed(w: &Ws, at: &str, backups: bool, args: &[&str]) {
    let out = Command::new("bash")
        .arg("-c")
        .arg(r#"ulimit -c 0; exec "$0" "$@""#)
        .arg(env!("CARGO_BIN_EXE_ferret"))
        .current_dir(&w.base)
        .env_clear()
        .envs(crate::util::portable_env())
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("XDG_DATA_HOME", w.base.join("data"))
        .env("FERRET_TEST_DIE_AFTER_STAGED", at)
        .arg("--root")
        .arg(&w.root)
        .arg("--state-dir")
        .arg(&w.state)
        .args(["--allow-write", "--set"])
        .arg(format!("backup_enabled={backups}"))
        .args(args)
        .output()
        .unwrap();
    // Killed by the hook (it aborts), not refused on the way there.
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        out.status.signal(),
        Some(6),
        "the hook kills it at {at}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The `.ferret-*.tmp` files under the root (the staged contents).
fn temps(root: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for d in [root.to_path_buf(), root.join("sub")] {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.file_name().to_string_lossy().starts_with(".ferret-") {
                out.push(e.path());
            }
        }
    }
    out
}

fn recover(w: &Ws) -> String {
    let out = w.person(&["history", "--recover"]);
    assert!(out.status.success(), "{out:?}");
    let out = w.cli(&["history"]);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What the person does between the kill and the recovery.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Meddle {
    Nothing,
    /// Writes a file at the move's destination (before it landed, or over it after).
    WritesDest,
    /// Deletes the destination the move had already landed.
    DeletesDest,
    /// Deletes the stray `.ferret-*.tmp` files.
    RemovesTemps,
    /// Edits the move's source.
    EditsSource,
}

/// A patch moving m.txt to sub/moved.txt (with and without edits, beside an edit of
/// b.txt) killed after staging, after its first file landed and after the move's
/// destination landed; whatever the person does next, recovery removes m.txt only when
/// sub/moved.txt holds exactly the moved content, else keeps it as it was and marks the
/// change conflicted. With backups off too: the content is never only in backups/, and
/// never nowhere.
#[test]
fn recovery_removes_a_moves_source_only_once_its_destination_holds_it() {
    // The group: [replace b.txt, create sub/moved.txt, remove m.txt].
    for (at, dest_landed) in [("1", false), ("land1", false), ("land2", true)] {
        let meddles: &[Meddle] = if dest_landed {
            &[
                Meddle::Nothing,
                Meddle::WritesDest,
                Meddle::DeletesDest,
                Meddle::RemovesTemps,
                Meddle::EditsSource,
            ]
        } else {
            &[
                Meddle::Nothing,
                Meddle::WritesDest,
                Meddle::RemovesTemps,
                Meddle::EditsSource,
            ]
        };
        for &meddle in meddles {
            for backups in [false, true] {
                for edits in [false, true] {
                    let case =
                        format!("kill at {at}, {meddle:?}, backups {backups}, edits {edits}");
                    let w = Ws::new();
                    write(&w.root, "m.txt", ORIG);
                    write(&w.root, "b.txt", "a\n");
                    std::fs::create_dir_all(w.root.join("sub")).unwrap();
                    let mv = if edits {
                        r#"{"path":"m.txt","move_to":"sub/moved.txt","edits":[{"old_string":"only","new_string":"ONLY"}]}"#
                    } else {
                        r#"{"path":"m.txt","move_to":"sub/moved.txt"}"#
                    };
                    let patch = format!(
                        r#"{{"changes":[{{"path":"b.txt","edits":[{{"old_string":"a","new_string":"b"}}]}},{mv}]}}"#
                    );
                    killed(&w, at, backups, &["call", "apply_patch", &patch]);
                    let moved = if edits { EDITED } else { ORIG };
                    assert_eq!(
                        w.read("sub/moved.txt").as_deref(),
                        dest_landed.then_some(moved),
                        "{case}: the hook"
                    );
                    assert_eq!(w.read("m.txt").as_deref(), Some(ORIG), "{case}: the hook");
                    match meddle {
                        Meddle::Nothing => {}
                        Meddle::WritesDest => write(&w.root, "sub/moved.txt", PERSON),
                        Meddle::DeletesDest => {
                            std::fs::remove_file(w.root.join("sub/moved.txt")).unwrap()
                        }
                        Meddle::RemovesTemps => {
                            for t in temps(&w.root) {
                                std::fs::remove_file(t).unwrap();
                            }
                        }
                        Meddle::EditsSource => write(&w.root, "m.txt", PERSON),
                    }
                    let history = recover(&w);
                    // (m.txt, sub/moved.txt, conflicted) after recovery.
                    let want: (Option<&str>, Option<&str>, bool) = match meddle {
                        Meddle::Nothing => (None, Some(moved), false),
                        Meddle::WritesDest => (Some(ORIG), Some(PERSON), true),
                        Meddle::DeletesDest => (Some(ORIG), None, true),
                        Meddle::RemovesTemps if dest_landed => (None, Some(moved), false),
                        Meddle::RemovesTemps => (Some(ORIG), None, true),
                        Meddle::EditsSource => (Some(PERSON), Some(moved), true),
                    };
                    assert_eq!(
                        w.read("m.txt").as_deref(),
                        want.0,
                        "{case}: m.txt\n{history}"
                    );
                    assert_eq!(
                        w.read("sub/moved.txt").as_deref(),
                        want.1,
                        "{case}: sub/moved.txt\n{history}"
                    );
                    assert_eq!(
                        history.contains("(conflicted)"),
                        want.2,
                        "{case}: history\n{history}"
                    );
                    if want.2 {
                        assert!(history.contains("m.txt"), "{case}: names m.txt\n{history}");
                    }
                    // The moved content (or the original) is in the tree: never only in
                    // backups, never nowhere.
                    let tree = [w.read("m.txt"), w.read("sub/moved.txt")];
                    assert!(
                        tree.iter().flatten().any(|c| c == ORIG || c == moved),
                        "{case}: the content is in the tree: {tree:?}"
                    );
                    // Ferret's own staged files are cleared.
                    if meddle != Meddle::RemovesTemps {
                        assert!(temps(&w.root).is_empty(), "{case}: {:?}", temps(&w.root));
                    }
                    // The unrelated edit of b.txt was finished either way (its own temp
                    // removed by the person means it did not land).
                    let b_landed = at != "1" || meddle != Meddle::RemovesTemps;
                    assert_eq!(
                        w.read("b.txt").as_deref(),
                        Some(if b_landed { "b\n" } else { "a\n" }),
                        "{case}: b.txt"
                    );
                }
            }
        }
    }
}

/// An undo of a patch's move is a move back (create m.txt, remove sub/moved.txt): killed
/// after staging or after m.txt landed, then the person writes or deletes m.txt or
/// removes the temps; recovery removes sub/moved.txt only when m.txt holds exactly the
/// restored content. Nothing is left only in backups/ (an undo cannot be undone).
#[test]
fn recovery_of_an_undone_move_keeps_the_moved_file_unless_it_is_back() {
    for (at, back_landed) in [("1", false), ("land1", true)] {
        let meddles: &[Meddle] = if back_landed {
            &[
                Meddle::Nothing,
                Meddle::WritesDest,
                Meddle::DeletesDest,
                Meddle::RemovesTemps,
            ]
        } else {
            &[Meddle::Nothing, Meddle::WritesDest, Meddle::RemovesTemps]
        };
        for &meddle in meddles {
            for edits in [false, true] {
                let case = format!("undo killed at {at}, {meddle:?}, edits {edits}");
                let w = Ws::new();
                write(&w.root, "m.txt", ORIG);
                std::fs::create_dir_all(w.root.join("sub")).unwrap();
                let mv = if edits {
                    r#"{"changes":[{"path":"m.txt","move_to":"sub/moved.txt","edits":[{"old_string":"only","new_string":"ONLY"}]}]}"#
                } else {
                    r#"{"changes":[{"path":"m.txt","move_to":"sub/moved.txt"}]}"#
                };
                let out = w.person(&["call", "apply_patch", mv]);
                assert!(out.status.success(), "{case}: {out:?}");
                let moved = if edits { EDITED } else { ORIG };
                assert_eq!(w.read("sub/moved.txt").as_deref(), Some(moved));
                killed(&w, at, true, &["undo", "--yes"]);
                assert_eq!(
                    w.read("m.txt").as_deref(),
                    back_landed.then_some(ORIG),
                    "{case}: the hook"
                );
                assert_eq!(w.read("sub/moved.txt").as_deref(), Some(moved), "{case}");
                // Here the undo's destination is m.txt.
                match meddle {
                    Meddle::Nothing => {}
                    Meddle::WritesDest => write(&w.root, "m.txt", PERSON),
                    Meddle::DeletesDest => std::fs::remove_file(w.root.join("m.txt")).unwrap(),
                    Meddle::RemovesTemps => {
                        for t in temps(&w.root) {
                            std::fs::remove_file(t).unwrap();
                        }
                    }
                    Meddle::EditsSource => unreachable!(),
                }
                let history = recover(&w);
                let want: (Option<&str>, Option<&str>, bool) = match meddle {
                    Meddle::Nothing => (Some(ORIG), None, false),
                    Meddle::WritesDest => (Some(PERSON), Some(moved), true),
                    Meddle::DeletesDest => (None, Some(moved), true),
                    Meddle::RemovesTemps if back_landed => (Some(ORIG), None, false),
                    Meddle::RemovesTemps => (None, Some(moved), true),
                    Meddle::EditsSource => unreachable!(),
                };
                assert_eq!(
                    w.read("m.txt").as_deref(),
                    want.0,
                    "{case}: m.txt\n{history}"
                );
                assert_eq!(
                    w.read("sub/moved.txt").as_deref(),
                    want.1,
                    "{case}: sub/moved.txt\n{history}"
                );
                assert_eq!(
                    history.contains("undo of 1 (conflicted)"),
                    want.2,
                    "{case}: history\n{history}"
                );
            }
        }
    }
}

/// A journal written before a move's halves were paired (no `moved_by`): recovery holds
/// every removal of the group back until every file it creates has landed.
#[test]
fn recovery_of_an_unpaired_entry_keeps_removals_when_a_create_did_not_land() {
    for backups in [false, true] {
        let w = Ws::new();
        write(&w.root, "m.txt", ORIG);
        std::fs::create_dir_all(w.root.join("sub")).unwrap();
        killed(
            &w,
            "1",
            backups,
            &[
                "call",
                "apply_patch",
                r#"{"changes":[{"path":"m.txt","move_to":"sub/moved.txt"}]}"#,
            ],
        );
        let mut stripped = 0;
        for d in std::fs::read_dir(&w.state).unwrap().flatten() {
            let j = d.path().join("journal.jsonl");
            if let Ok(t) = std::fs::read_to_string(&j) {
                let s = t.replace(r#","moved_by":0"#, "");
                stripped += usize::from(s != t);
                std::fs::write(&j, s).unwrap();
            }
        }
        assert_eq!(stripped, 1, "the journal pairs the move");
        write(&w.root, "sub/moved.txt", PERSON);
        let history = recover(&w);
        assert_eq!(w.read("m.txt").as_deref(), Some(ORIG), "{history}");
        assert_eq!(w.read("sub/moved.txt").as_deref(), Some(PERSON));
        assert!(history.contains("(conflicted)"), "{history}");
    }
}

/// `ferret --allow-write ARGS` with `FERRET_PORTABLE` set to `portable`: its JSON answer.
fn json_call(w: &Ws, portable: &str, args: &[&str]) -> serde_json::Value {
    let out = w
        .cmd(&[&["--allow-write"][..], args].concat())
        .env("FERRET_PORTABLE", portable)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {out:?}");
    serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null)
}

/// The names under `dir` (none if it is not there).
fn names(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// Files whose names are too long for the trash as they are (255, 246 and 245 bytes,
/// each deleted twice, so the trash adds its suffix): the freedesktop trash (and the
/// fake OS trash of `FERRET_PORTABLE=1`) takes them under a shortened name that fits
/// 255 bytes with `.trashinfo`, the `.trashinfo` keeps the whole original path, the
/// result says which trash really holds the entry, and undo brings each back byte-exact.
#[test]
fn long_names_go_to_the_trash_and_undo_brings_them_back() {
    for portable in ["0", "1"] {
        for (stem, len) in [('a', 251), ('b', 242), ('c', 241)] {
            let case = format!("portable {portable}, {len}+4 bytes");
            let w = Ws::new();
            let name = format!("{}.txt", stem.to_string().repeat(len));
            let data = w.base.join("data");
            let mut ids = Vec::new();
            for round in 0..2 {
                let content = format!("copy {round} of a long name\n");
                write(&w.root, &name, &content);
                let arg = serde_json::json!({ "path": name }).to_string();
                let v = json_call(&w, portable, &["call", "file_delete", &arg]);
                assert!(!w.root.join(&name).exists(), "{case}: {v}");
                // The result says where the entry is; it is there.
                let os_files = if portable == "1" {
                    data.join("ferret-os-trash")
                } else {
                    data.join("Trash/files")
                };
                let holds = |dir: &Path| {
                    names(dir).iter().any(|n| {
                        std::fs::read_to_string(dir.join(n)).ok().as_deref() == Some(&*content)
                    })
                };
                let ferret_trash: Vec<_> = std::fs::read_dir(&w.state)
                    .unwrap()
                    .flatten()
                    .map(|d| d.path().join("trash"))
                    .collect();
                match v["trash"].as_str() {
                    Some("os") => assert!(holds(&os_files), "{case}: said os: {v}"),
                    Some("ferret") => {
                        assert!(!holds(&os_files), "{case}: said ferret: {v}");
                        assert!(ferret_trash.iter().any(|d| holds(d)), "{case}: {v}");
                    }
                    other => panic!("{case}: {other:?}: {v}"),
                }
                if portable == "0" {
                    assert_eq!(
                        v["trash"], "os",
                        "{case}: the freedesktop trash took it: {v}"
                    );
                    for n in names(&data.join("Trash/info")) {
                        assert!(n.len() <= 255, "{case}: {n}");
                        let info =
                            std::fs::read_to_string(data.join("Trash/info").join(&n)).unwrap();
                        assert!(
                            info.contains(&format!("{name}\n")),
                            "{case}: whole path: {info}"
                        );
                    }
                }
                ids.push(v["change_id"].as_u64().unwrap());
            }
            // Undo the second delete, set the file aside, undo the first.
            for (round, id) in ids.iter().enumerate().rev() {
                json_call(&w, portable, &["undo", &id.to_string(), "--yes"]);
                assert_eq!(
                    w.read(&name).as_deref(),
                    Some(&*format!("copy {round} of a long name\n")),
                    "{case}: undo {id}"
                );
                std::fs::rename(w.root.join(&name), w.root.join(format!("kept{round}"))).unwrap();
            }
        }
    }
}

/// Every file under `dir`, recursively (none if it is not there).
fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// A name that is not UTF-8 (`sub/caf\xe9.txt`, Latin-1) is read by its quoted
/// reference form; every change of it (edit, write, move from and to it, delete through
/// either trash, a patch's update, delete, move and add, a new folder of such a name)
/// is refused up front with INVALID_ARGUMENT and an honest hint, and leaves nothing:
/// the tree as it was, no backup, no staging folder, no trash entry, no journal entry.
#[test]
fn names_that_are_not_utf8_are_read_but_changes_are_refused_leaving_nothing() {
    use std::os::unix::ffi::OsStrExt;
    for portable in ["0", "1"] {
        let w = Ws::new();
        std::fs::create_dir_all(w.root.join("sub")).unwrap();
        let latin1 = w.root.join(std::ffi::OsStr::from_bytes(b"sub/caf\xe9.txt"));
        std::fs::write(&latin1, "hello\n").unwrap();
        write(&w.root, "m.txt", "m\n");
        let reference = r#"sub/"caf\xe9.txt""#;
        let run = |args: &[&str]| {
            w.cmd(&[&["--allow-write"][..], args].concat())
                .env("FERRET_PORTABLE", portable)
                .stdin(std::process::Stdio::null())
                .output()
                .unwrap()
        };
        // Reads: by the reference form, the one `ls` gives.
        let ls = run(&["call", "list_directory", r#"{"path":"sub"}"#]);
        assert!(
            String::from_utf8_lossy(&ls.stdout).contains(r#"\"caf\\xe9.txt\""#),
            "{ls:?}"
        );
        let read = run(&[
            "call",
            "read_file",
            &serde_json::json!({ "path": reference }).to_string(),
        ]);
        assert!(read.status.success(), "{read:?}");
        assert!(String::from_utf8_lossy(&read.stdout).contains("hello"));
        let info = run(&[
            "call",
            "get_file_info",
            &serde_json::json!({ "path": reference }).to_string(),
        ]);
        assert!(info.status.success(), "{info:?}");
        let before = crate::util::snapshot(&w.root);
        let changes = [
            (
                "edit",
                serde_json::json!({"path": reference, "old_string": "hello", "new_string": "bye"}),
            ),
            (
                "write_file",
                serde_json::json!({"path": reference, "content": "x", "overwrite": true}),
            ),
            (
                "write_file",
                serde_json::json!({"path": r#""d\xe9"/new.txt"#, "content": "x"}),
            ),
            (
                "write_file",
                serde_json::json!({"path": r#""n\xe9.txt""#, "content": "x"}),
            ),
            (
                "move",
                serde_json::json!({"source": reference, "destination": "x.txt"}),
            ),
            (
                "move",
                serde_json::json!({"source": reference, "destination": "m.txt", "overwrite": true}),
            ),
            (
                "move",
                serde_json::json!({"source": "m.txt", "destination": r#""n\xe9.txt""#}),
            ),
            ("file_delete", serde_json::json!({"path": reference})),
            (
                "apply_patch",
                serde_json::json!({"changes": [{"path": reference, "edits": [{"old_string": "hello", "new_string": "bye"}]}]}),
            ),
            (
                "apply_patch",
                serde_json::json!({"changes": [{"path": reference, "delete": true}]}),
            ),
            (
                "apply_patch",
                serde_json::json!({"changes": [{"path": "m.txt", "move_to": r#""n\xe9.txt""#}]}),
            ),
            (
                "apply_patch",
                serde_json::json!({"changes": [{"path": r#""n\xe9.txt""#, "create": "x\n"}]}),
            ),
            // A file with a UTF-8 name first: its backup is not written either.
            (
                "apply_patch",
                serde_json::json!({"changes": [
                    {"path": "m.txt", "edits": [{"old_string": "m", "new_string": "n"}]},
                    {"path": r#""n\xe9.txt""#, "create": "x\n"}]}),
            ),
            (
                "apply_patch",
                serde_json::json!({"changes": [
                    {"path": "m.txt", "edits": [{"old_string": "m", "new_string": "n"}]},
                    {"path": reference, "delete": true}]}),
            ),
        ];
        for (tool, args) in changes {
            let case = format!("portable {portable}: {tool} {args}");
            let out = run(&["call", tool, &args.to_string()]);
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            assert!(!out.status.success(), "{case}: {text}");
            assert!(text.contains("INVALID_ARGUMENT"), "{case}: {text}");
            assert!(text.contains("not a UTF-8 name"), "{case}: {text}");
            assert!(!text.contains("operating system refused"), "{case}: {text}");
            assert_eq!(crate::util::snapshot(&w.root), before, "{case}: the tree");
            // Nothing in the state directory but the journal's own files: no backup, no
            // staging folder, no trash entry.
            let left: Vec<_> = files_under(&w.state)
                .into_iter()
                .filter(|p| {
                    !p.ends_with("journal.jsonl") && !p.to_string_lossy().contains("/leases/")
                })
                .collect();
            assert!(left.is_empty(), "{case}: {left:?}");
            let staging: Vec<_> = std::fs::read_dir(&w.state)
                .unwrap()
                .flatten()
                .flat_map(|d| names(&d.path().join("trash")))
                .collect();
            assert!(staging.is_empty(), "{case}: {staging:?}");
            assert!(files_under(&w.base.join("data")).is_empty(), "{case}");
            assert!(!w.journal().contains("caf"), "{case}: journalled");
        }
        // The folder holding it has a UTF-8 name: deleted whole, and undo brings the
        // name back byte for byte.
        let out = run(&["call", "file_delete", r#"{"path":"sub"}"#]);
        assert!(out.status.success(), "portable {portable}: {out:?}");
        assert!(!latin1.exists());
        let out = run(&["undo", "--yes"]);
        assert!(out.status.success(), "portable {portable}: {out:?}");
        assert_eq!(std::fs::read(&latin1).unwrap(), b"hello\n");
    }
}

//! Round 4 of undo and recovery (brief U4):
//! 1. `undo {force:true}` overwrites content the change undone did not write only after
//!    asking, as undoing another's change asks, unless the caller's own later change
//!    wrote exactly what is there; what it overwrites is backed up, and `undo` of the
//!    undo says an undo cannot be undone and names the backup.
//! 2. recovery rolls a staged file forward, or removes a temporary file, only if the
//!    temp still holds exactly what ferret staged there; ferret's temporary names are
//!    denied to every tool.

use crate::util::{snapshot, write};
use ferret::{CallOptions, ErrorCode, Ferret, Session, ToolError};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::Ws;

/// What round 4 asks of a workspace besides [`Ws`]'s own.
trait Recover {
    fn recover(&self) -> Vec<Value>;
}

impl Recover for Ws {
    /// `history --json` after `--recover`.
    fn recover(&self) -> Vec<Value> {
        let out = self.person(&["history", "--recover", "--json"]);
        assert!(out.status.success(), "{out:?}");
        serde_json::from_slice::<Value>(&out.stdout)
            .ok()
            .and_then(|v| v.as_array().cloned())
            .unwrap_or_default()
    }
}

fn agent(id: &str) -> Session {
    Session::new(id, "agent")
}

fn call(f: &Ferret, s: &Session, tool: &str, args: Value) -> Result<Value, ToolError> {
    f.call(s, tool, args, CallOptions::default())
        .map(|o| o.structured)
}

fn call_yes(f: &Ferret, s: &Session, tool: &str, args: Value) -> Result<Value, ToolError> {
    let opts = CallOptions {
        confirmed: true,
        ..Default::default()
    };
    f.call(s, tool, args, opts).map(|o| o.structured)
}

fn code(r: Result<Value, ToolError>) -> ErrorCode {
    crate::util::code(r)
}

// ---- 1. force undo asks before overwriting another's content --------------------------

/// How the content the agent's change left is replaced afterwards.
#[derive(Debug, Clone, Copy)]
enum Later {
    /// The person: `ferret edit` (the CLI, through the binary).
    PersonEdit,
    /// The person: `ferret write --overwrite`.
    PersonWrite,
    /// Another MCP session: `edit`.
    OtherSessionEdit,
    /// Another MCP session: `write_file` with overwrite.
    OtherSessionWrite,
    /// Another MCP session: `apply_patch`.
    OtherSessionPatch,
    /// An outside editor (no journal entry).
    Outside,
}

const LATER: [Later; 6] = [
    Later::PersonEdit,
    Later::PersonWrite,
    Later::OtherSessionEdit,
    Later::OtherSessionWrite,
    Later::OtherSessionPatch,
    Later::Outside,
];

fn replace_later(w: &Ws, f: &Ferret, how: Later, rel: &str, now: &str, text: &str) {
    let b = agent("mcp-session-B");
    match how {
        Later::PersonEdit => {
            let out = w.person(&["edit", rel, "--old", now, "--new", text]);
            assert!(out.status.success(), "{out:?}");
        }
        Later::PersonWrite => {
            let out = w.person(&["write", rel, "--overwrite", "--content", text]);
            assert!(out.status.success(), "{out:?}");
        }
        Later::OtherSessionEdit => {
            call(
                f,
                &b,
                "edit",
                json!({"path": rel, "old_string": now, "new_string": text}),
            )
            .unwrap();
        }
        Later::OtherSessionWrite => {
            call(
                f,
                &b,
                "write_file",
                json!({"path": rel, "content": text, "overwrite": true}),
            )
            .unwrap();
        }
        Later::OtherSessionPatch => {
            let patch = format!(
                "*** Begin Patch\n*** Update File: {rel}\n@@\n-{now}\n+{text}\n*** End Patch\n"
            );
            call(f, &b, "apply_patch", json!({ "patch": patch })).unwrap();
        }
        Later::Outside => write(&w.root, rel, text),
    }
}

/// The attacker's reproducer and its class: the agent's edit of x.txt, then the person's
/// (or another session's, or an outside editor's) change of it. `undo {}` is CONFLICT;
/// `undo {force:true}` is CONFIRMATION_REQUIRED and changes nothing (file, journal);
/// confirmed, it restores, and what it overwrote is in the backup it names.
#[test]
fn force_undo_of_an_edit_asks_before_overwriting_anothers_later_content() {
    for how in LATER {
        let w = Ws::new();
        write(&w.root, "x.txt", "x\n");
        let f = w.ferret();
        let a = agent("mcp-session-A");
        call(
            &f,
            &a,
            "edit",
            json!({"path": "x.txt", "old_string": "x", "new_string": "agent"}),
        )
        .unwrap();
        replace_later(&w, &f, how, "x.txt", "agent", "PERSONTEXT");
        let theirs = w.read("x.txt").unwrap();
        assert!(theirs.contains("PERSONTEXT"), "{how:?}: {theirs}");
        assert_eq!(code(call(&f, &a, "undo", json!({}))), ErrorCode::Conflict);
        let before = snapshot(&w.root);
        let journal = w.journal();
        let e = call(&f, &a, "undo", json!({"force": true})).unwrap_err();
        assert_eq!(e.code, ErrorCode::ConfirmationRequired, "{how:?}: {e:?}");
        assert!(e.message.contains("x.txt"), "{how:?}: {}", e.message);
        assert_eq!(snapshot(&w.root), before, "{how:?}: nothing changed");
        assert_eq!(w.journal(), journal, "{how:?}: nothing journalled");
        // Confirmed: restored, the overwritten content backed up and named.
        let out = call_yes(&f, &a, "undo", json!({"force": true})).unwrap();
        assert_eq!(w.read("x.txt").as_deref(), Some("x\n"), "{how:?}");
        assert_eq!(out["backed_up"], true, "{how:?}: {out}");
        let backup = &saved_at(&f, &a, &out);
        assert_eq!(std::fs::read_to_string(backup).unwrap(), theirs, "{how:?}");
        // The undo's own id: "cannot be undone", naming the backup (not NOT_FOUND).
        let e = call_yes(&f, &a, "undo", json!({"id": out["change_id"]})).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidArgument, "{how:?}: {e:?}");
        assert!(e.message.contains("cannot be undone"), "{}", e.message);
        assert!(e.message.contains(backup), "{}", e.message);
    }
}

/// The same for a create: the agent's file replaced by another's content is not
/// deleted by a forced undo without the user's answer.
#[test]
fn force_undo_of_a_create_asks_before_deleting_anothers_content() {
    for how in LATER {
        let w = Ws::new();
        let f = w.ferret();
        let a = agent("mcp-session-A");
        call(
            &f,
            &a,
            "write_file",
            json!({"path": "c.txt", "content": "agent\n"}),
        )
        .unwrap();
        replace_later(&w, &f, how, "c.txt", "agent", "PERSONTEXT");
        let theirs = w.read("c.txt").unwrap();
        let before = snapshot(&w.root);
        assert_eq!(
            code(call(&f, &a, "undo", json!({"force": true}))),
            ErrorCode::ConfirmationRequired,
            "{how:?}"
        );
        assert_eq!(snapshot(&w.root), before, "{how:?}");
        let out = call_yes(&f, &a, "undo", json!({"force": true})).unwrap();
        assert!(!w.root.join("c.txt").exists(), "{how:?}");
        assert_eq!(out["backed_up"], true, "{how:?}: {out}");
        let backup = &saved_at(&f, &a, &out);
        assert_eq!(std::fs::read_to_string(backup).unwrap(), theirs, "{how:?}");
    }
}

/// A patch of two files undone by force after another session changed one of them:
/// asks, changes neither file until confirmed.
#[test]
fn force_undo_of_a_patch_asks_before_overwriting_anothers_file() {
    for how in LATER {
        let w = Ws::new();
        write(&w.root, "p.txt", "p\n");
        write(&w.root, "q.txt", "q\n");
        let f = w.ferret();
        let a = agent("mcp-session-A");
        let patch = "*** Begin Patch\n*** Update File: p.txt\n@@\n-p\n+agent\n*** Update File: q.txt\n@@\n-q\n+agent q\n*** End Patch\n";
        call(&f, &a, "apply_patch", json!({ "patch": patch })).unwrap();
        replace_later(&w, &f, how, "p.txt", "agent", "PERSONTEXT");
        let before = snapshot(&w.root);
        assert_eq!(
            code(call(&f, &a, "undo", json!({"force": true}))),
            ErrorCode::ConfirmationRequired,
            "{how:?}"
        );
        assert_eq!(snapshot(&w.root), before, "{how:?}");
        let theirs = w.read("p.txt").unwrap();
        let out = call_yes(&f, &a, "undo", json!({"force": true})).unwrap();
        assert_eq!(w.read("p.txt").as_deref(), Some("p\n"), "{how:?}");
        // The result names where the overwritten content is saved.
        assert_eq!(out["backed_up"], true, "{how:?}: {out}");
        let path = &saved_at(&f, &a, &out);
        assert_eq!(std::fs::read_to_string(path).unwrap(), theirs, "{how:?}");
        let e = call_yes(&f, &a, "undo", json!({"id": out["change_id"]})).unwrap_err();
        assert!(e.message.contains("cannot be undone"), "{}", e.message);
        assert!(e.message.contains(path), "{}", e.message);
        assert_eq!(w.read("q.txt").as_deref(), Some("q\n"), "{how:?}");
    }
}

/// What the caller's own later change wrote is the caller's to overwrite: a forced undo
/// of its older change over its own newer one asks no one (the newer content is still
/// backed up).
#[test]
fn force_undo_over_the_callers_own_later_change_does_not_ask() {
    let w = Ws::new();
    write(&w.root, "x.txt", "x\n");
    let f = w.ferret();
    let a = agent("mcp-session-A");
    let first = call(
        &f,
        &a,
        "edit",
        json!({"path": "x.txt", "old_string": "x", "new_string": "one"}),
    )
    .unwrap();
    call(
        &f,
        &a,
        "edit",
        json!({"path": "x.txt", "old_string": "one", "new_string": "two"}),
    )
    .unwrap();
    let out = call(
        &f,
        &a,
        "undo",
        json!({"id": first["change_id"], "force": true}),
    )
    .unwrap();
    assert_eq!(w.read("x.txt").as_deref(), Some("x\n"));
    assert_eq!(out["backed_up"], true, "{out}");
    let backup = &saved_at(&f, &a, &out);
    assert_eq!(std::fs::read_to_string(backup).unwrap(), "two\n");
    // The same session's later edit then an outside edit on top: asks again.
    write(&w.root, "y.txt", "y\n");
    call(
        &f,
        &a,
        "edit",
        json!({"path": "y.txt", "old_string": "y", "new_string": "mine"}),
    )
    .unwrap();
    write(&w.root, "y.txt", "outside\n");
    assert_eq!(
        code(call(&f, &a, "undo", json!({"force": true}))),
        ErrorCode::ConfirmationRequired
    );
    assert_eq!(w.read("y.txt").as_deref(), Some("outside\n"));
}

/// Through the binary, the other way round: the person's forced `ferret undo` over an
/// agent's later edit is refused without --yes (nothing changed, nothing journalled),
/// done with it; `undo <id of that undo>` says an undo cannot be undone.
#[test]
fn the_persons_force_undo_over_an_agents_edit_asks_on_the_command_line() {
    let w = Ws::new();
    write(&w.root, "x.txt", "x\n");
    let out = w.person(&["edit", "x.txt", "--old", "x", "--new", "person"]);
    assert!(out.status.success(), "{out:?}");
    let f = w.ferret();
    call(
        &f,
        &agent("mcp-session-A"),
        "edit",
        json!({"path": "x.txt", "old_string": "person", "new_string": "AGENTTEXT"}),
    )
    .unwrap();
    drop(f);
    let before = snapshot(&w.root);
    let journal = w.journal();
    let out = w.person(&["undo", "--force"]);
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("confirmation") || err.contains("not confirmed"),
        "{err}"
    );
    assert_eq!(snapshot(&w.root), before);
    assert_eq!(w.journal(), journal);
    let out = w.person(&["undo", "--force", "--yes", "--json"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(w.read("x.txt").as_deref(), Some("x\n"));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = v["change_id"].as_u64().unwrap().to_string();
    let out = w.person(&["undo", &id, "--yes"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot be undone"), "{err}");
    assert!(!err.contains("NOT_FOUND"), "{err}");
    assert_eq!(w.read("x.txt").as_deref(), Some("x\n"));
}

// ---- 2. recovery goes by what ferret staged ---------------------------------------------

/// Runs `ferret --allow-write ARGS` with the test hook that kills it (an abort, no core)
/// once its new content is staged, before it lands.
fn killed_after_staging(w: &Ws, args: &[&str], stdin: &str) {
    use std::io::Write;
    let mut child = Command::new("bash")
        .arg("-c")
        .arg(r#"ulimit -c 0; exec "$0" "$@""#)
        .arg(env!("CARGO_BIN_EXE_ferret"))
        .current_dir(&w.base)
        .env_clear()
        .envs(crate::util::portable_env())
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("FERRET_TEST_DIE_AFTER_STAGED", "1")
        .arg("--root")
        .arg(&w.root)
        .arg("--state-dir")
        .arg(&w.state)
        .arg("--allow-write")
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(mut i) = child.stdin.take() {
        let _ = i.write_all(stdin.as_bytes());
    }
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success(), "the hook kills it: {out:?}");
}

/// ferret's temporary files under `dir`, by name.
fn temps(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(".ferret-"))
        })
        .collect();
    v.sort();
    v
}

const PATCHED: [&str; 4] = ["f1", "f2", "f3", ".gitignore"];

/// The person's confirmed patch of f1, f2, f3 and .gitignore killed after its staged
/// mark; the new contents sit in temps beside the files.
fn interrupted_patch(w: &Ws) -> Vec<PathBuf> {
    for f in PATCHED {
        write(&w.root, f, format!("{f} old\n"));
    }
    let mut patch = String::from("*** Begin Patch\n");
    for f in PATCHED {
        patch.push_str(&format!("*** Update File: {f}\n@@\n-{f} old\n+{f} new\n"));
    }
    patch.push_str("*** End Patch\n");
    killed_after_staging(w, &["patch", "--yes"], &patch);
    let t = temps(&w.root);
    assert_eq!(t.len(), PATCHED.len(), "every new content staged");
    t
}

/// The reproducer: a staged temp is overwritten (as the agent did through write_file
/// before the temps were denied) before recovery. The staged group is rolled forward
/// only for the files whose temps are exactly as staged; the rewritten one is not
/// renamed (its file keeps its old content), its temp is left, and the change is
/// marked conflicted naming it.
#[test]
fn recovery_never_rolls_forward_a_rewritten_temp() {
    for (victim, f) in PATCHED.iter().enumerate() {
        let w = Ws::new();
        let t = interrupted_patch(&w);
        // Which temp holds which file is in the journal; rewrite the one for `victim`.
        let staged: Vec<(PathBuf, String)> = t
            .iter()
            .map(|p| (p.clone(), std::fs::read_to_string(p).unwrap()))
            .collect();
        let (temp, _) = staged
            .iter()
            .find(|(_, c)| *c == format!("{f} new\n"))
            .unwrap();
        std::fs::write(temp, "AGENT CONTENT\n").unwrap();
        let h = w.recover();
        for (i, g) in PATCHED.iter().enumerate() {
            let want = if i == victim {
                format!("{g} old\n")
            } else {
                format!("{g} new\n")
            };
            assert_eq!(w.read(g), Some(want), "victim {f}: {g}");
        }
        assert!(
            !std::fs::read_dir(&w.root)
                .unwrap()
                .flatten()
                .any(
                    |e| std::fs::read_to_string(e.path()).is_ok_and(|c| c.contains("AGENT"))
                        && !e.file_name().to_string_lossy().starts_with(".ferret-")
                ),
            "the rewritten content landed nowhere"
        );
        assert_eq!(
            std::fs::read_to_string(temp).unwrap(),
            "AGENT CONTENT\n",
            "left as it is"
        );
        let patch = h.iter().find(|e| e["action"] == "patch").unwrap();
        let conflicted = patch["conflicted"].to_string();
        assert!(conflicted.contains(f), "{conflicted}");
        assert!(h.iter().all(|e| e["pending"] == false));
    }
}

/// Not staged yet (killed before the mark): rolling back removes only temps that are
/// exactly what ferret staged; a person's file put at a temp's name stays.
#[test]
fn rollback_removes_only_ferrets_own_temps() {
    // A single edit killed after staging: the person's own file at the temp's name.
    for meddle in ["person's file", "untouched", "link"] {
        let w = Ws::new();
        write(&w.root, "x.txt", "old\n");
        killed_after_staging(&w, &["edit", "x.txt", "--old", "old", "--new", "new"], "");
        let t = temps(&w.root);
        assert_eq!(t.len(), 1);
        let outside = w.base.join("outside.txt");
        std::fs::write(&outside, "outside\n").unwrap();
        match meddle {
            "person's file" => {
                std::fs::remove_file(&t[0]).unwrap();
                std::fs::write(&t[0], "PERSON\n").unwrap();
            }
            "link" => {
                std::fs::remove_file(&t[0]).unwrap();
                std::os::unix::fs::symlink(&outside, &t[0]).unwrap();
            }
            _ => {}
        }
        let h = w.recover();
        assert_eq!(w.read("x.txt").as_deref(), Some("old\n"), "{meddle}");
        match meddle {
            "person's file" => {
                assert_eq!(std::fs::read_to_string(&t[0]).unwrap(), "PERSON\n");
                let e = h.iter().find(|e| e["action"] == "edit");
                assert!(
                    e.is_none_or(|e| e["conflicted"].to_string().contains(".ferret-")),
                    "{h:?}"
                );
            }
            "link" => {
                assert!(
                    std::fs::symlink_metadata(&t[0])
                        .unwrap()
                        .file_type()
                        .is_symlink()
                );
            }
            _ => assert!(temps(&w.root).is_empty(), "ferret's own temp is removed"),
        }
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "outside\n");
        assert!(h.iter().all(|e| e["pending"] == false), "{meddle}");
    }
}

/// ferret's temporary names are reserved: whatever the case, at any depth, no tool
/// shows, reads, searches, writes, moves, deletes or patches them.
#[test]
fn temps_are_invisible_and_untouchable_through_every_tool() {
    let w = Ws::new();
    let names = [
        ".ferret-20261124T000000.1Z-1-0.tmp",
        "sub/.ferret-x-0.tmp",
        ".FERRET-shout.TMP",
    ];
    for n in names {
        write(&w.root, n, "STAGED SECRET\n");
    }
    write(&w.root, "sub/ok.txt", "ok\n");
    // A link to one is refused as the name itself.
    std::os::unix::fs::symlink(".ferret-x-0.tmp", w.root.join("sub/via-link.txt")).unwrap();
    let f = w.ferret();
    let s = agent("mcp-agent");
    let before = snapshot(&w.root);
    for (tool, args) in [
        ("read_file", json!({"path": "sub/via-link.txt"})),
        (
            "write_file",
            json!({"path": "sub/via-link.txt", "content": "AGENT\n", "overwrite": true}),
        ),
        (
            "edit",
            json!({"path": "sub/via-link.txt", "old_string": "STAGED", "new_string": "AGENT"}),
        ),
    ] {
        assert_eq!(
            code(call_yes(&f, &s, tool, args)),
            ErrorCode::DeniedPattern,
            "{tool} through a link"
        );
    }
    // Nothing lists or finds them.
    for (tool, args) in [
        ("glob", json!({"pattern": "**/*", "include_hidden": true})),
        (
            "glob",
            json!({"pattern": "**/.ferret*", "include_hidden": true}),
        ),
        (
            "list_directory",
            json!({"path": ".", "recursive": true, "include_hidden": true}),
        ),
        (
            "list_directory",
            json!({"path": "sub", "include_hidden": true}),
        ),
        ("grep", json!({"pattern": "STAGED", "include_hidden": true})),
        (
            "grep",
            json!({"pattern": "STAGED", "path": "sub", "include_hidden": true}),
        ),
        (
            "file_search",
            json!({"query": "ferret", "include_hidden": true}),
        ),
    ] {
        let out = call(&f, &s, tool, args.clone())
            .map(|v| v.to_string())
            .unwrap_or_default();
        assert!(
            !out.to_lowercase().contains(".ferret-") && !out.contains("STAGED"),
            "{tool} {args}: {out}"
        );
    }
    for n in names {
        let to = format!("{n}.moved.tmp");
        for (tool, args) in [
            ("read_file", json!({"path": n})),
            ("read_files", json!({"paths": [n]})),
            ("get_file_info", json!({"path": n})),
            (
                "write_file",
                json!({"path": n, "content": "AGENT\n", "overwrite": true}),
            ),
            (
                "edit",
                json!({"path": n, "old_string": "STAGED", "new_string": "AGENT"}),
            ),
            ("move", json!({"source": n, "destination": "moved.txt"})),
            ("move", json!({"source": "sub/ok.txt", "destination": to})),
            ("file_delete", json!({"path": n})),
            (
                "apply_patch",
                json!({"patch": format!("*** Begin Patch\n*** Update File: {n}\n@@\n-STAGED SECRET\n+AGENT\n*** End Patch\n")}),
            ),
            (
                "apply_patch",
                json!({"patch": format!("*** Begin Patch\n*** Add File: {n}.x.tmp\n+AGENT\n*** End Patch\n")}),
            ),
        ] {
            let r = call_yes(&f, &s, tool, args.clone());
            let shown = r.as_ref().map(|v| v.to_string()).unwrap_or_default();
            // read_files answers per file.
            let refused = match &r {
                Err(e) => e.code == ErrorCode::DeniedPattern,
                Ok(v) => tool == "read_files" && v["files"][0]["error"]["code"] == "DENIED_PATTERN",
            };
            assert!(refused, "{tool} {args}: {shown} {r:?}");
            assert!(!shown.contains("STAGED"), "{tool} {args}");
        }
        // A new file at a reserved name is refused too.
        let fresh = n.replace("x-0", "new-9").replace("shout", "new");
        let r = call_yes(
            &f,
            &s,
            "write_file",
            json!({"path": fresh, "content": "AGENT\n"}),
        );
        assert!(r.is_err(), "{fresh}");
    }
    assert_eq!(snapshot(&w.root), before, "nothing changed");
}

/// Over MCP (rmcp's client, in process): two connections to one server, each its own
/// session. Session A's forced undo of its edit, after session B edited the file, is
/// refused (the client cannot answer a question: CONFIRMATION_REQUIRED) and leaves B's
/// content; the plain undo is CONFLICT.
#[tokio::test]
async fn mcp_force_undo_from_one_session_never_wipes_anothers_later_edit() {
    use ferret::mcp::Shared;
    use std::sync::Arc;
    let w = Ws::new();
    write(&w.root, "x.txt", "x\n");
    let shared = Shared::new(Arc::new(w.ferret()), false).unwrap();
    let mut clients = Vec::new();
    for _ in 0..2 {
        clients.push(crate::util::rmcp_client(shared.clone(), 1 << 16).await);
    }
    let call =
        |i: usize, tool: &'static str, args: Value| crate::util::rmcp_call(&clients[i], tool, args);
    let r = call(
        0,
        "edit",
        json!({"path": "x.txt", "old_string": "x", "new_string": "A"}),
    )
    .await;
    assert_eq!(r.is_error, Some(false));
    let r = call(
        1,
        "edit",
        json!({"path": "x.txt", "old_string": "A", "new_string": "B's work"}),
    )
    .await;
    assert_eq!(r.is_error, Some(false));
    let journal = w.journal();
    let r = call(0, "undo", json!({})).await;
    assert_eq!(r.is_error, Some(true));
    assert!(format!("{r:?}").contains("CONFLICT"), "{r:?}");
    let r = call(0, "undo", json!({"force": true})).await;
    assert_eq!(r.is_error, Some(true), "{r:?}");
    assert!(format!("{r:?}").contains("CONFIRMATION_REQUIRED"), "{r:?}");
    assert_eq!(w.read("x.txt").as_deref(), Some("B's work\n"));
    assert_eq!(w.journal(), journal, "nothing journalled");
    for c in clients {
        let _ = c.cancel().await;
    }
}

/// Where a forced undo saved what it overwrote: the receipt says only that it did (no host
/// path), and undoing the undo names the backup for the person.
fn saved_at(f: &Ferret, a: &Session, out: &Value) -> String {
    let e = call_yes(f, a, "undo", json!({"id": out["change_id"]})).unwrap_err();
    let (_, rest) = e
        .message
        .split_once(" is saved at ")
        .unwrap_or_else(|| panic!("{}", e.message));
    rest.split(';').next().unwrap().trim().to_string()
}

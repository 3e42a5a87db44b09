//! Issue #25, round 3: undo is a change like any other (it asks what the same change
//! made directly would ask), recovery never writes over content ferret did not write
//! (and a read-only command recovers nothing), and `undo` without an id reverts only
//! the caller's own changes.

use crate::util::{snapshot, write};
use ferret::config::{Config, Mode};
use ferret::{CallOptions, ErrorCode, Ferret, Front, Session, ToolError};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A root and a state directory outside it.
use crate::util::Ws;

fn agent(id: &str) -> Session {
    Session::new(id, "agent")
}

fn call(f: &Ferret, s: &Session, tool: &str, args: Value) -> Result<Value, ToolError> {
    f.call(s, tool, args, CallOptions::default())
        .map(|o| o.structured)
}

/// The same, the user having confirmed.
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

// ---- 1. undo asks what the change itself would ask ----------------------------------

/// An edit of a confirm-listed file, named through aliases: its undo asks, changes
/// nothing until confirmed, and then restores it. The dry run asks no one.
#[test]
fn undo_of_a_confirm_listed_edit_asks_as_the_edit_did() {
    let cases = [
        ("ferret.toml", "ferret.toml"),
        ("./ferret.toml", "ferret.toml"),
        (".//ferret.toml", "ferret.toml"),
        ("ROOT/ferret.toml", "ferret.toml"),
        (".gitignore", ".gitignore"),
        ("pkg/.gitignore", "pkg/.gitignore"),
        (".github/workflows/x.yml", ".github/workflows/x.yml"),
    ];
    for (named, real) in cases {
        let w = Ws::new();
        let named = named.replace("ROOT", &w.root.to_string_lossy());
        let named = named.as_str();
        std::fs::create_dir_all(w.root.join("sub")).unwrap();
        write(&w.root, real, "deny = []\n");
        let f = w.ferret();
        let s = agent("a");
        let edit = json!({"path": named, "old_string": "deny = []", "new_string": "deny = [\"private/**\"]"});
        assert_eq!(
            code(call(&f, &s, "edit", edit.clone())),
            ErrorCode::ConfirmationRequired,
            "{named}: the edit asks"
        );
        call_yes(&f, &s, "edit", edit).unwrap();
        let edited = w.read(real);
        // Dry run: shows, asks no one, writes nothing.
        call(&f, &s, "undo", json!({"dry_run": true})).unwrap();
        assert_eq!(w.read(real), edited);
        assert_eq!(
            code(call(&f, &s, "undo", json!({}))),
            ErrorCode::ConfirmationRequired,
            "{named}: the undo asks as the edit did"
        );
        assert_eq!(w.read(real), edited, "{named}: nothing undone unasked");
        call_yes(&f, &s, "undo", json!({})).unwrap();
        assert_eq!(w.read(real).as_deref(), Some("deny = []\n"), "{named}");
    }
}

/// Creating a confirm-listed file asks; so does removing it again by undo.
#[test]
fn undo_of_a_confirm_listed_create_asks() {
    for rel in [
        ".github/workflows/new.yml",
        "ferret.toml",
        "a/b/.gitattributes",
    ] {
        let w = Ws::new();
        let f = w.ferret();
        let s = agent("a");
        call_yes(&f, &s, "write_file", json!({"path": rel, "content": "x\n"})).unwrap();
        assert_eq!(
            code(call(&f, &s, "undo", json!({}))),
            ErrorCode::ConfirmationRequired,
            "{rel}"
        );
        assert_eq!(w.read(rel).as_deref(), Some("x\n"), "{rel}: still there");
        call_yes(&f, &s, "undo", json!({})).unwrap();
        assert_eq!(w.read(rel), None, "{rel}");
    }
}

/// A patch changing one confirm-listed file among several: its undo asks, and until
/// confirmed not one of the files changes.
#[test]
fn undo_of_a_patch_touching_one_confirm_path_among_many_asks() {
    for listed in [".gitignore", "ferret.toml", ".github/workflows/ci.yml"] {
        let w = Ws::new();
        for rel in ["a.txt", "b.txt", listed] {
            write(&w.root, rel, "old\n");
        }
        let f = w.ferret();
        let s = agent("a");
        let mut patch = String::from("*** Begin Patch\n");
        for rel in ["a.txt", listed, "b.txt"] {
            patch.push_str(&format!("*** Update File: {rel}\n@@\n-old\n+new\n"));
        }
        patch.push_str("*** End Patch\n");
        call_yes(&f, &s, "apply_patch", json!({"patch": patch})).unwrap();
        let before = snapshot(&w.root);
        assert_eq!(
            code(call(&f, &s, "undo", json!({}))),
            ErrorCode::ConfirmationRequired,
            "{listed}"
        );
        assert_eq!(
            snapshot(&w.root),
            before,
            "{listed}: nothing undone unasked"
        );
        call_yes(&f, &s, "undo", json!({})).unwrap();
        for rel in ["a.txt", "b.txt", listed] {
            assert_eq!(w.read(rel).as_deref(), Some("old\n"), "{rel}");
        }
    }
}

/// A move whose source or destination is confirm-listed (or a directory holding such an
/// entry): its undo moves it back only when confirmed.
#[test]
fn undo_of_a_move_from_or_to_a_confirm_listed_path_asks() {
    let cases: [(&str, &str, Option<&str>); 4] = [
        ("draft.toml", "ferret.toml", None),
        ("ferret.toml", "old.toml", None),
        ("wf", ".github/workflows", Some("x.yml")),
        ("pkg", "pkg2", Some(".github/workflows/x.yml")),
    ];
    for (from, to, inner) in cases {
        let w = Ws::new();
        match inner {
            Some(inner) => write(&w.root, &format!("{from}/{inner}"), "on: push\n"),
            None => write(&w.root, from, "deny = []\n"),
        }
        let f = w.ferret();
        let s = agent("a");
        let mv = json!({"source": from, "destination": to});
        assert_eq!(
            code(call(&f, &s, "move", mv.clone())),
            ErrorCode::ConfirmationRequired,
            "{from} -> {to}: the move asks"
        );
        call_yes(&f, &s, "move", mv).unwrap();
        let before = snapshot(&w.root);
        assert_eq!(
            code(call(&f, &s, "undo", json!({}))),
            ErrorCode::ConfirmationRequired,
            "{from} -> {to}: its undo asks"
        );
        assert_eq!(snapshot(&w.root), before, "{from} -> {to}");
        call_yes(&f, &s, "undo", json!({})).unwrap();
        assert!(w.root.join(from).exists() && !w.root.join(to).exists());
    }
}

/// Deleting a directory that holds a confirm-listed entry at any depth asks (as deleting
/// the entry would), and bringing a confirm-listed entry back from the trash asks too.
#[test]
fn deleting_or_restoring_what_holds_a_confirm_listed_entry_asks() {
    let cases = [
        ("pkg", "pkg/.github/workflows/x.yml"),
        ("deep", "deep/a/b/.gitignore"),
        ("nested", "nested/ferret.toml"),
        (".github", ".github/workflows/x.yml"),
        (".gitignore", ".gitignore"),
    ];
    for (del, holds) in cases {
        let w = Ws::new();
        write(&w.root, holds, "x\n");
        write(&w.root, "plain/a.txt", "x\n");
        let f = w.ferret();
        let s = agent("a");
        assert_eq!(
            code(call(&f, &s, "file_delete", json!({"path": del}))),
            ErrorCode::ConfirmationRequired,
            "deleting {del} asks"
        );
        assert!(w.root.join(holds).exists(), "{del}: still there");
        // Moving it asks as well.
        assert_eq!(
            code(call(
                &f,
                &s,
                "move",
                json!({"source": del, "destination": "elsewhere"})
            )),
            ErrorCode::ConfirmationRequired,
            "moving {del} asks"
        );
        call_yes(&f, &s, "file_delete", json!({"path": del})).unwrap();
        assert!(!w.root.join(holds).exists());
        assert_eq!(
            code(call(&f, &s, "undo", json!({}))),
            ErrorCode::ConfirmationRequired,
            "restoring {del} asks"
        );
        assert!(!w.root.join(holds).exists(), "{del}: not restored unasked");
        call_yes(&f, &s, "undo", json!({})).unwrap();
        assert_eq!(w.read(holds).as_deref(), Some("x\n"));
    }
    // A plain directory asks nothing.
    let w = Ws::new();
    write(&w.root, "plain/a/b.txt", "x\n");
    let f = w.ferret();
    let s = agent("a");
    call(&f, &s, "file_delete", json!({"path": "plain"})).unwrap();
    call(&f, &s, "undo", json!({})).unwrap();
    assert_eq!(w.read("plain/a/b.txt").as_deref(), Some("x\n"));
}

/// An undo cannot be undone (no redo): so no redo of a delete can skip a question.
#[test]
fn an_undo_is_never_undone() {
    let w = Ws::new();
    write(&w.root, ".gitignore", "secret/\n");
    let f = w.ferret();
    let s = agent("a");
    let del = call_yes(&f, &s, "file_delete", json!({"path": ".gitignore"})).unwrap();
    let undo = call_yes(&f, &s, "undo", json!({"id": del["change_id"]})).unwrap();
    let before = snapshot(&w.root);
    for args in [json!({"id": undo["change_id"]}), json!({})] {
        assert!(call_yes(&f, &s, "undo", args).is_err());
        assert_eq!(snapshot(&w.root), before);
    }
}

// ---- 9. undo is per caller ------------------------------------------------------------

/// The issue's case: a person edits with `ferret edit`; an agent sharing the state
/// directory edits once and calls `undo {}` twice. The second undo finds nothing of the
/// agent's; the person's change comes back only by its id, with the user's confirmation.
#[test]
fn an_agents_undo_never_reverts_a_persons_change() {
    let w = Ws::new();
    write(&w.root, "person.txt", "person v1\n");
    write(&w.root, "agent.txt", "agent v1\n");
    let out = w.cli(&[
        "--allow-write",
        "edit",
        "person.txt",
        "--old",
        "v1",
        "--new",
        "v2",
    ]);
    assert!(out.status.success(), "{out:?}");
    let f = w.ferret();
    let s = agent("mcp-agent-1");
    call(
        &f,
        &s,
        "edit",
        json!({"path": "agent.txt", "old_string": "v1", "new_string": "v2"}),
    )
    .unwrap();
    call(&f, &s, "undo", json!({})).unwrap();
    assert_eq!(w.read("agent.txt").as_deref(), Some("agent v1\n"));
    let e = call(&f, &s, "undo", json!({})).unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound, "{e:?}");
    assert_eq!(w.read("person.txt").as_deref(), Some("person v2\n"));
    // By its id: asks.
    assert_eq!(
        code(call(&f, &s, "undo", json!({"id": 1}))),
        ErrorCode::ConfirmationRequired
    );
    assert_eq!(w.read("person.txt").as_deref(), Some("person v2\n"));
    call_yes(&f, &s, "undo", json!({"id": 1})).unwrap();
    assert_eq!(w.read("person.txt").as_deref(), Some("person v1\n"));
}

/// The other way round: the person's `ferret undo` reverts the person's last change (made
/// in any CLI or shell run), never an agent's; an agent's by id needs --yes.
#[test]
fn the_persons_undo_never_reverts_an_agents_change() {
    let w = Ws::new();
    write(&w.root, "person.txt", "person v1\n");
    write(&w.root, "agent.txt", "agent v1\n");
    let edit = |file: &str| w.cli(&["--allow-write", "edit", file, "--old", "v1", "--new", "v2"]);
    assert!(edit("person.txt").status.success());
    let f = w.ferret();
    call(
        &f,
        &agent("mcp-x"),
        "edit",
        json!({"path": "agent.txt", "old_string": "v1", "new_string": "v2"}),
    )
    .unwrap();
    // Another CLI run (another process, another session id) is the same person.
    let out = w.cli(&["--allow-write", "undo"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(w.read("person.txt").as_deref(), Some("person v1\n"));
    assert_eq!(w.read("agent.txt").as_deref(), Some("agent v2\n"));
    let out = w.cli(&["--allow-write", "undo"]);
    assert!(
        !out.status.success(),
        "nothing of the person's left to undo"
    );
    assert_eq!(w.read("agent.txt").as_deref(), Some("agent v2\n"));
    // The agent's change is id 2: without a terminal the question answers no.
    let out = w.cli(&["--allow-write", "undo", "2"]);
    assert!(!out.status.success());
    assert_eq!(w.read("agent.txt").as_deref(), Some("agent v2\n"));
    let out = w.cli(&["--allow-write", "undo", "2", "--yes"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(w.read("agent.txt").as_deref(), Some("agent v1\n"));
}

/// Two agent sessions in one server: each undo {} reverts its own session's change only.
/// A session named like the person's front end (agent "cli", id "cli-1") is still an
/// agent: the front end comes from how ferret was reached, not from the name.
#[test]
fn sessions_undo_only_their_own_changes() {
    let w = Ws::new();
    for n in ["a", "b", "c"] {
        write(&w.root, &format!("{n}.txt"), "v1\n");
    }
    let f = w.ferret();
    let (a, b) = (agent("mcp-a"), Session::new("cli-1", "cli"));
    let edit = |s: &Session, file: &str| {
        call(
            &f,
            s,
            "edit",
            json!({"path": file, "old_string": "v1", "new_string": "v2"}),
        )
        .unwrap()
    };
    edit(&a, "a.txt");
    edit(&b, "b.txt");
    edit(&a, "c.txt");
    call(&f, &b, "undo", json!({})).unwrap();
    assert_eq!(w.read("b.txt").as_deref(), Some("v1\n"));
    assert_eq!(w.read("c.txt").as_deref(), Some("v2\n"));
    assert_eq!(code(call(&f, &b, "undo", json!({}))), ErrorCode::NotFound);
    assert_eq!(w.read("a.txt").as_deref(), Some("v2\n"));
    // The person (CLI) owns none of these either.
    let person = Session::new("cli-2", "cli").from_front(Front::Cli);
    assert_eq!(
        code(call(&f, &person, "undo", json!({}))),
        ErrorCode::NotFound
    );
    call(&f, &a, "undo", json!({})).unwrap();
    call(&f, &a, "undo", json!({})).unwrap();
    assert_eq!(w.read("a.txt").as_deref(), Some("v1\n"));
    assert_eq!(w.read("c.txt").as_deref(), Some("v1\n"));
}

/// Journal lines written before owners were recorded belong to no one: undo {} skips
/// them, and undoing one by id asks.
#[test]
fn changes_of_unknown_owner_are_no_callers_own() {
    let w = Ws::new();
    write(&w.root, "old.txt", "v1\n");
    let f = w.ferret();
    let s = agent("a");
    call(
        &f,
        &s,
        "edit",
        json!({"path": "old.txt", "old_string": "v1", "new_string": "v2"}),
    )
    .unwrap();
    drop(f);
    // Strip the owner, as an older ferret wrote the line.
    for d in std::fs::read_dir(&w.state).unwrap().flatten() {
        let p = d.path().join("journal.jsonl");
        if let Ok(t) = std::fs::read_to_string(&p) {
            let stripped: Vec<String> = t
                .lines()
                .map(|l| {
                    let mut v: Value = serde_json::from_str(l).unwrap();
                    if let Some(o) = v.as_object_mut() {
                        o.remove("by");
                    }
                    v.to_string()
                })
                .collect();
            std::fs::write(&p, stripped.join("\n") + "\n").unwrap();
        }
    }
    assert!(!w.journal().contains("\"by\""));
    let f = w.ferret();
    assert_eq!(code(call(&f, &s, "undo", json!({}))), ErrorCode::NotFound);
    assert_eq!(
        code(call(&f, &s, "undo", json!({"id": 1}))),
        ErrorCode::ConfirmationRequired
    );
    assert_eq!(w.read("old.txt").as_deref(), Some("v2\n"));
    call_yes(&f, &s, "undo", json!({"id": 1})).unwrap();
    assert_eq!(w.read("old.txt").as_deref(), Some("v1\n"));
    // `history` says the owner is unknown.
    let out = w.cli(&["history"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("by unknown"), "{text}");
}

/// `history` names who made each change: the person's front end, an agent's session.
#[test]
fn history_shows_who_made_each_change() {
    let w = Ws::new();
    write(&w.root, "p.txt", "v1\n");
    write(&w.root, "q.txt", "v1\n");
    assert!(
        w.cli(&[
            "--allow-write",
            "edit",
            "p.txt",
            "--old",
            "v1",
            "--new",
            "v2"
        ])
        .status
        .success()
    );
    let f = w.ferret();
    call(
        &f,
        &Session::new("mcp-77", "claude"),
        "edit",
        json!({"path": "q.txt", "old_string": "v1", "new_string": "v2"}),
    )
    .unwrap();
    let out = w.cli(&["history"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let line = |p: &str| {
        text.lines()
            .find(|l| l.contains(p))
            .unwrap_or_default()
            .to_string()
    };
    assert!(line("p.txt").ends_with("by cli"), "{text}");
    assert!(
        line("q.txt").contains(r#"by mcp session mcp-77 (agent "claude")"#),
        "{text}"
    );
    let out = w.cli(&["history", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["by"]["front"], "cli");
    assert_eq!(v[1]["by"]["front"], "mcp");
    assert_eq!(v[1]["by"]["session"], "mcp-77");
}

/// Two processes undoing one change at once: it is restored exactly once.
#[test]
fn two_processes_undoing_one_change_restore_it_once() {
    for _ in 0..5 {
        let w = Ws::new();
        write(&w.root, "a.txt", "v1\n");
        assert!(
            w.cli(&[
                "--allow-write",
                "edit",
                "a.txt",
                "--old",
                "v1",
                "--new",
                "v2"
            ])
            .status
            .success()
        );
        let kids: Vec<_> = (0..2)
            .map(|_| {
                w.cmd(&["--allow-write", "undo", "1", "--json"])
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let ok = kids
            .into_iter()
            .map(|k| k.wait_with_output().unwrap().status.success())
            .filter(|s| *s)
            .count();
        assert_eq!(ok, 1, "exactly one undo lands");
        assert_eq!(w.read("a.txt").as_deref(), Some("v1\n"));
        assert_eq!(w.journal().matches("\"undoes\":1").count(), 1);
    }
}

/// Over MCP (rmcp's client, in process): two connections to one server, each an agent
/// session; `undo {}` on one never reverts the other's change.
#[tokio::test]
async fn mcp_undo_from_one_session_leaves_another_sessions_change() {
    use ferret::mcp::Shared;
    use std::sync::Arc;
    let w = Ws::new();
    write(&w.root, "one.txt", "v1\n");
    write(&w.root, "two.txt", "v1\n");
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
        json!({"path": "one.txt", "old_string": "v1", "new_string": "v2"}),
    )
    .await;
    assert_eq!(r.is_error, Some(false));
    let r = call(
        1,
        "edit",
        json!({"path": "two.txt", "old_string": "v1", "new_string": "v2"}),
    )
    .await;
    assert_eq!(r.is_error, Some(false));
    // Session 0's undo {}: its own change (the older one), not session 1's later one.
    let r = call(0, "undo", json!({})).await;
    assert_eq!(r.is_error, Some(false), "{r:?}");
    assert_eq!(w.read("one.txt").as_deref(), Some("v1\n"));
    assert_eq!(w.read("two.txt").as_deref(), Some("v2\n"));
    let r = call(0, "undo", json!({})).await;
    assert_eq!(r.is_error, Some(true));
    assert_eq!(w.read("two.txt").as_deref(), Some("v2\n"));
    // The description says so, briefly.
    let tools = clients[0].list_all_tools().await.unwrap();
    let undo = tools.iter().find(|t| t.name == "undo").unwrap();
    let d = undo.description.as_deref().unwrap_or_default();
    assert!(d.contains("your session's"), "{d}");
    for c in clients {
        let _ = c.cancel().await;
    }
}

// ---- 2. recovery never overwrites what ferret did not write ---------------------------

const FILES: [&str; 3] = ["a.txt", "b.txt", "c.txt"];

fn old(f: &str) -> String {
    format!("{f} old\n")
}
fn new(f: &str) -> String {
    format!("{f} new\n")
}

/// A patch of three files whose process dies right after the staged mark (the test hook
/// aborts it there): every new content is staged beside its file, nothing renamed.
fn interrupted_patch(w: &Ws) {
    for f in FILES {
        write(&w.root, f, old(f));
    }
    let mut patch = String::from("*** Begin Patch\n");
    for f in FILES {
        patch.push_str(&format!("*** Update File: {f}\n@@\n-{f} old\n+{f} new\n"));
    }
    patch.push_str("*** End Patch\n");
    let args = json!({ "patch": patch }).to_string();
    // No core file: the abort is the kill.
    let out = Command::new("bash")
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
        .args(["--allow-write", "call", "apply_patch", &args])
        .output()
        .unwrap();
    assert!(!out.status.success(), "the hook kills it");
    for f in FILES {
        assert_eq!(w.read(f), Some(old(f)), "nothing renamed yet");
    }
    assert!(
        std::fs::read_dir(&w.root)
            .unwrap()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with(".ferret-")),
        "the new contents are staged"
    );
}

fn temps_left(w: &Ws) -> usize {
    std::fs::read_dir(&w.root)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".ferret-"))
        .count()
}

/// Read-only commands after the kill change nothing under the root, with or without
/// --allow-write; `history` says a change is interrupted.
#[test]
fn read_only_commands_after_a_kill_change_nothing() {
    let w = Ws::new();
    interrupted_patch(&w);
    // The person edits one of the files meanwhile.
    write(&w.root, "b.txt", "person's edit\n");
    let before = snapshot(&w.root);
    let journal = w.journal();
    for write_flag in [&[][..], &["--allow-write"][..]] {
        for args in [
            &["history"][..],
            &["history", "--json"],
            &["read", "a.txt"],
            &["grep", "old"],
            &["ls", "."],
            &["call", "read_file", r#"{"path":"b.txt"}"#],
        ] {
            let all: Vec<&str> = write_flag.iter().chain(args).copied().collect();
            let out = w.cli(&all);
            assert!(out.status.success(), "{all:?}: {out:?}");
            assert_eq!(snapshot(&w.root), before, "{all:?} changed the root");
            assert_eq!(w.journal(), journal, "{all:?} settled the journal");
        }
    }
    let out = w.cli(&["history"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("patch (interrupted)"), "{text}");
    assert!(text.contains("interrupted change(s) pending"), "{text}");
    // --recover needs writes allowed.
    assert!(!w.cli(&["history", "--recover"]).status.success());
    assert_eq!(snapshot(&w.root), before);
}

/// Recovery finishes the group only for files still holding exactly their old content
/// (or already their new one); a file the person changed since — edited, deleted,
/// replaced by a link to outside — is left as it is, and `history` marks the change
/// conflicted, naming it.
#[test]
fn recovery_never_overwrites_a_newer_edit() {
    #[derive(Debug, Clone, Copy)]
    enum Meddle {
        Edited,
        Deleted,
        LinkOutside,
        AlreadyNew,
        Untouched,
    }
    for meddle in [
        Meddle::Edited,
        Meddle::Deleted,
        Meddle::LinkOutside,
        Meddle::AlreadyNew,
        Meddle::Untouched,
    ] {
        // Both ways of recovering: explicitly, and by the next change.
        for by_next_change in [false, true] {
            let w = Ws::new();
            interrupted_patch(&w);
            let outside = w.base.join("outside.txt");
            std::fs::write(&outside, "outside\n").unwrap();
            let b = w.root.join("b.txt");
            match meddle {
                Meddle::Edited => std::fs::write(&b, "person's edit\n").unwrap(),
                Meddle::Deleted => std::fs::remove_file(&b).unwrap(),
                Meddle::LinkOutside => {
                    std::fs::remove_file(&b).unwrap();
                    std::os::unix::fs::symlink(&outside, &b).unwrap();
                }
                Meddle::AlreadyNew => std::fs::write(&b, new("b.txt")).unwrap(),
                Meddle::Untouched => {}
            }
            let out = if by_next_change {
                write(&w.root, "other.txt", "x\n");
                w.cli(&[
                    "--allow-write",
                    "edit",
                    "other.txt",
                    "--old",
                    "x",
                    "--new",
                    "y",
                ])
            } else {
                w.cli(&["--allow-write", "history", "--recover"])
            };
            assert!(out.status.success(), "{meddle:?}: {out:?}");
            let tag = format!("{meddle:?} (by next change: {by_next_change})");
            // The files nobody touched are finished.
            assert_eq!(w.read("a.txt"), Some(new("a.txt")), "{tag}");
            assert_eq!(w.read("c.txt"), Some(new("c.txt")), "{tag}");
            let conflicted = match meddle {
                Meddle::Edited => {
                    assert_eq!(w.read("b.txt").as_deref(), Some("person's edit\n"), "{tag}");
                    true
                }
                Meddle::Deleted => {
                    assert!(
                        std::fs::symlink_metadata(&b).is_err(),
                        "{tag}: not recreated"
                    );
                    true
                }
                Meddle::LinkOutside => {
                    assert!(
                        std::fs::symlink_metadata(&b)
                            .unwrap()
                            .file_type()
                            .is_symlink()
                    );
                    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "outside\n");
                    true
                }
                Meddle::AlreadyNew | Meddle::Untouched => {
                    assert_eq!(w.read("b.txt"), Some(new("b.txt")), "{tag}");
                    false
                }
            };
            assert_eq!(std::fs::read_to_string(&outside).unwrap(), "outside\n");
            assert_eq!(temps_left(&w), 0, "{tag}: temporary files removed");
            let out = w.cli(&["history", "--json"]);
            let v: Value = serde_json::from_slice(&out.stdout).unwrap();
            let patch = v
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["action"] == "patch")
                .unwrap()
                .clone();
            assert_eq!(patch["pending"], false, "{tag}: settled");
            if conflicted {
                assert_eq!(patch["conflicted"], json!(["b.txt"]), "{tag}");
                let text = String::from_utf8_lossy(&w.cli(&["history"]).stdout).into_owned();
                assert!(text.contains("patch (conflicted)"), "{tag}: {text}");
                assert!(text.contains("left as found by recovery"), "{tag}: {text}");
            } else {
                assert!(patch.get("conflicted").is_none(), "{tag}");
            }
        }
    }
}

/// After recovery left a file alone, undoing the patch still refuses to lose the
/// person's content (CONFLICT), and `force` backs it up first.
#[test]
fn undo_of_a_conflicted_recovery_keeps_the_persons_content() {
    let w = Ws::new();
    interrupted_patch(&w);
    write(&w.root, "b.txt", "person's edit\n");
    assert!(
        w.cli(&["--allow-write", "history", "--recover"])
            .status
            .success()
    );
    let out = w.cli(&["--allow-write", "undo", "1"]);
    assert!(!out.status.success());
    assert_eq!(w.read("b.txt").as_deref(), Some("person's edit\n"));
    assert_eq!(w.read("a.txt"), Some(new("a.txt")));
    // Forcing over the person's edit asks (undo_r4): refused without --yes.
    let out = w.cli(&["--allow-write", "undo", "1", "--force", "--json"]);
    assert!(!out.status.success(), "{out:?}");
    assert_eq!(w.read("b.txt").as_deref(), Some("person's edit\n"));
    let out = w.cli(&["--allow-write", "undo", "1", "--force", "--yes", "--json"]);
    assert!(out.status.success(), "{out:?}");
    for f in FILES {
        assert_eq!(w.read(f), Some(old(f)));
    }
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let _ = v;
    let backups: Vec<PathBuf> = walk(&w.state)
        .into_iter()
        .filter(|p| std::fs::read(p).is_ok_and(|b| b == b"person's edit\n"))
        .collect();
    assert!(!backups.is_empty(), "the person's content is backed up");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// A single-file edit killed with its new content staged, the file then edited (or
/// deleted, or made a link) by the person: recovery rolls it back by removing only its
/// own temporary file; the person's bytes stay, and read-only commands touch nothing.
#[test]
fn a_killed_edit_is_rolled_back_without_touching_newer_content() {
    for meddle in ["edited", "deleted", "link", "untouched"] {
        let w = Ws::new();
        write(&w.root, "f.txt", "old\n");
        let outside = w.base.join("outside.txt");
        std::fs::write(&outside, "outside\n").unwrap();
        let out = Command::new("bash")
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
            .args([
                "--allow-write",
                "edit",
                "f.txt",
                "--old",
                "old",
                "--new",
                "new",
            ])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{meddle}: the hook kills it");
        assert_eq!(temps_left(&w), 1, "{meddle}: the new content is staged");
        let f = w.root.join("f.txt");
        match meddle {
            "edited" => std::fs::write(&f, "person's\n").unwrap(),
            "deleted" => std::fs::remove_file(&f).unwrap(),
            "link" => {
                std::fs::remove_file(&f).unwrap();
                std::os::unix::fs::symlink(&outside, &f).unwrap();
            }
            _ => {}
        }
        let before = snapshot(&w.root);
        for args in [&["history"][..], &["--allow-write", "read", "f.txt"]] {
            w.cli(args);
            assert_eq!(snapshot(&w.root), before, "{meddle}: {args:?}");
        }
        assert!(
            w.cli(&["--allow-write", "history", "--recover"])
                .status
                .success()
        );
        assert_eq!(temps_left(&w), 0, "{meddle}");
        match meddle {
            "edited" => assert_eq!(w.read("f.txt").as_deref(), Some("person's\n")),
            "deleted" => assert!(std::fs::symlink_metadata(&f).is_err()),
            "link" => assert!(
                std::fs::symlink_metadata(&f)
                    .unwrap()
                    .file_type()
                    .is_symlink()
            ),
            _ => assert_eq!(w.read("f.txt").as_deref(), Some("old\n")),
        }
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "outside\n");
        let v: Value = serde_json::from_slice(&w.cli(&["history", "--json"]).stdout).unwrap();
        assert!(v.as_array().unwrap().iter().all(|e| e["pending"] == false));
    }
}

/// With an anchored confirm pattern, a directory whose entries only become listed at the
/// destination: the move asks, and so does its undo (which moves them out again).
#[test]
fn moving_a_directory_whose_entries_become_confirm_listed_asks() {
    let w = Ws::new();
    write(&w.root, "stage/prod.yml", "replicas: 1\n");
    let mut c = Config::defaults(Mode::Server);
    c.roots = vec![w.root.clone()];
    c.allow_write = true;
    c.state_dir = Some(w.state.clone());
    c.confirm.push("/deploy/prod.yml".into());
    let f = Ferret::new(c).unwrap();
    let s = agent("a");
    let mv = json!({"source": "stage", "destination": "deploy"});
    assert_eq!(
        code(call(&f, &s, "move", mv.clone())),
        ErrorCode::ConfirmationRequired
    );
    assert!(w.root.join("stage/prod.yml").exists());
    call_yes(&f, &s, "move", mv).unwrap();
    assert_eq!(
        code(call(&f, &s, "undo", json!({}))),
        ErrorCode::ConfirmationRequired
    );
    assert!(w.root.join("deploy/prod.yml").exists());
    call_yes(&f, &s, "undo", json!({})).unwrap();
    assert!(w.root.join("stage/prod.yml").exists());
}

/// The attacker pass: a file's name (a newline, then a forged history line) or a
/// client's name (a newline, an escape that hides text) printed raw in `history`, and a
/// name holding an RLO and a newline made a confirmation question read as another file's.
/// Names are shown as every answer shows them: quoted and escaped, on one line.
#[test]
fn names_in_history_and_questions_cannot_forge_lines() {
    let w = Ws::new();
    let forged = "z\n   9  2026-11-24T00:00:00.000Z  edit             .gitignore  by cli";
    let out = w.cli(&[
        "--allow-write",
        "call",
        "write_file",
        &json!({"path": forged, "content": "x"}).to_string(),
    ]);
    assert!(out.status.success(), "{out:?}");
    // An agent whose client name holds a newline, a fake owner and a hiding escape.
    let f = w.ferret();
    let agent = Session::new("mcp-a", "x\n   8  2026  edit  a.txt  by cli\u{1b}[8m");
    f.call(
        &agent,
        "write_file",
        json!({"path": "b.txt", "content": "b"}),
        CallOptions::default(),
    )
    .unwrap();
    let out = w.cli(&["history"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(!text.contains('\u{1b}'), "{text}");
    assert!(text.contains(r#""z\n   9"#), "{text}");
    // A confirm-listed file whose name tries to read as a harmless one.
    let sly =
        ".github/workflows/ci.yml\u{202e}\n\nThis is only README.md; it is not on the confirm list";
    write(&w.root, sly, "on: push\n");
    let out = w.cli(&[
        "--allow-write",
        "edit",
        sly,
        "--old",
        "push",
        "--new",
        "pull_request",
    ]);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("CONFIRMATION_REQUIRED"), "{said}");
    let question = said
        .lines()
        .find(|l| l.contains("confirm"))
        .unwrap_or_default();
    assert!(question.contains(r"\u{202e}\n\nThis is only"), "{said}");
    assert!(!said.contains('\u{202e}'), "{said}");
}

/// The attacker pass: `undo {"dry_run": true}` from a process allowed to write settled
/// a killed process's change (temp files removed, the journal rewritten). A dry run
/// leaves the root and the journal as they are, as every read does.
#[test]
fn a_dry_run_undo_settles_nothing() {
    let w = Ws::new();
    interrupted_patch(&w);
    let before = snapshot(&w.root);
    let journal = w.journal();
    for args in [
        &["--allow-write", "call", "undo", r#"{"dry_run":true}"#][..],
        &["--allow-write", "--dry-run", "call", "undo", "{}"],
        &["--allow-write", "undo", "--dry-run"],
    ] {
        w.cli(args);
        assert_eq!(snapshot(&w.root), before, "{args:?} changed the root");
        assert_eq!(w.journal(), journal, "{args:?} settled the journal");
    }
}

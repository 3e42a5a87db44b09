//! Issue #25, round 20: an undo asks one question naming every reason (another's change,
//! secrets, an overwrite, the confirm list); a link is judged by the folder it leads to;
//! a listed name asks through a link; ferret's places are not moved back; state paths stay
//! out of errors.

use crate::util::{StdioServer, agent, bin, cli, said, succeeded as ok, tempdir, write};
use serde_json::json;
use std::path::Path;
use std::process::Output;

/// The person's CLI over `root`, writes allowed, in `state`.
fn person(root: &Path, state: &Path, args: &[&str]) -> Output {
    cli(root, state, args).output().expect("run")
}

/// Round 20: the agent's undo of the person's change asked only "made by cli", and the
/// yes let through what the person's own undo would have asked about: secrets moved back
/// into the open, an outside edit overwritten, a workflow restored.
#[test]
fn an_undo_of_anothers_change_names_every_reason_in_one_question() {
    // Secrets in a folder moved back (where the rules still guard them: one moved out of
    // the name that guards them is refused outright since round 24, see secrets_r24).
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    std::fs::create_dir_all(root.join("proj")).expect("mkdir");
    ok(&person(&root, &state, &["mv", "proj", "proj2"]));
    write(&root, "proj2/.env", "TOKEN=PERSONS\n");
    let mut s = agent(&root, &state, &[]);
    let r = s.call("undo", &json!({"id": 1}));
    let t = r.to_string();
    assert_eq!(r["isError"], true, "{t}");
    assert!(t.contains("CONFIRMATION_REQUIRED"), "{t}");
    assert!(t.contains("made by") && t.contains("secrets"), "{t}");
    assert!(!t.contains("PERSONS"), "{t}");
    assert!(root.join("proj2/.env").exists() && !root.join("proj").exists());
    drop(s);

    // An outside edit a forced undo would overwrite.
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    write(&root, "a.txt", "one\n");
    ok(&person(
        &root,
        &state,
        &["edit", "a.txt", "--old", "one", "--new", "two"],
    ));
    write(&root, "a.txt", "THE EDITORS SAVE\n");
    let mut s = agent(&root, &state, &[]);
    let r = s.call("undo", &json!({"id": 1, "force": true}));
    let t = r.to_string();
    assert!(t.contains("made by") && t.contains("force-undoing"), "{t}");
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).expect("a"),
        "THE EDITORS SAVE\n"
    );
    drop(s);

    // A patch of many files, one of them on the confirm list.
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    write(
        &root,
        ".github/workflows/ci.yml",
        "on: pull_request_target\n",
    );
    let mut patch = String::from("*** Begin Patch\n");
    for i in 1..=4 {
        write(&root, &format!("a{i}.txt"), "x\n");
        patch.push_str(&format!("*** Update File: a{i}.txt\n@@\n-x\n+y\n"));
    }
    patch.push_str("*** Update File: .github/workflows/ci.yml\n@@\n-on: pull_request_target\n+on: push\n*** End Patch\n");
    let mut p = bin()
        .arg("--root")
        .arg(&root)
        .args(["--allow-write", "--state-dir"])
        .arg(&state)
        .args(["patch", "--yes"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("patch");
    {
        use std::io::Write;
        p.stdin
            .take()
            .expect("stdin")
            .write_all(patch.as_bytes())
            .expect("write");
    }
    ok(&p.wait_with_output().expect("patch"));
    let mut s = agent(&root, &state, &[]);
    let r = s.call("undo", &json!({"id": 1}));
    let t = r.to_string();
    assert!(
        t.contains("made by") && t.contains(".github/workflows/ci.yml"),
        "{t}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join(".github/workflows/ci.yml")).expect("ci"),
        "on: push\n"
    );
    // A dry run says the same question.
    let r = s.call("undo", &json!({"id": 1, "dry_run": true}));
    let t = r.to_string();
    assert!(
        t.contains("made by") && t.contains(".github/workflows/ci.yml"),
        "{t}"
    );
}

/// Round 20: a link to a folder holding `config`, renamed `.kube`, made `.kube/config`
/// (an exec plugin the person's kubectl runs) where moving the folder itself is refused.
/// A link is judged by the folder it leads to, for denied and confirm-listed names.
#[test]
fn a_link_to_a_folder_is_judged_by_what_the_folder_holds() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    write(
        &root,
        "proj/notes/config",
        "users: [{user: {exec: {command: /tmp/evil}}}]\n",
    );
    write(&root, "proj/dl/config.json", "{\"credsStore\": \"evil\"}\n");
    write(&root, "proj/cfg/master.yml", "prod: true\n");
    std::os::unix::fs::symlink("proj/notes", root.join("latest")).expect("link");
    std::os::unix::fs::symlink("proj/dl", root.join("dl")).expect("link");
    std::os::unix::fs::symlink("proj/cfg", root.join("lnk")).expect("link");
    for (from, to) in [("latest", ".kube"), ("dl", ".docker")] {
        let out = person(&root, &state, &["mv", from, to]);
        let s = said(&out);
        assert!(
            !out.status.success() && s.contains("DENIED_PATTERN"),
            "{from}: {s}"
        );
        assert!(root.join(to).symlink_metadata().is_err(), "{from}: {s}");
    }
    let out = bin()
        .arg("--root")
        .arg(&root)
        .args(["--allow-write", "--state-dir"])
        .arg(&state)
        .args([
            "--set",
            "confirm=[\"config/master.yml\"]",
            "mv",
            "lnk",
            "config",
        ])
        .output()
        .expect("mv");
    let s = said(&out);
    assert!(
        !out.status.success() && s.contains("CONFIRMATION_REQUIRED"),
        "{s}"
    );
    // The question says it is a link, and where it leads.
    assert!(s.contains("a link to proj/cfg"), "{s}");
    assert!(root.join("lnk").symlink_metadata().is_ok());
}

/// Round 20: through a repository's link `.github -> docs`, a new file under
/// `.github/workflows/` asked, but an edit, an overwrite or a delete by that name did
/// not. Each asks as the name says.
#[test]
fn a_listed_name_asks_through_a_link_for_every_change() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    write(&root, "docs/workflows/x.yml", "on: push\n");
    std::os::unix::fs::symlink("docs", root.join(".github")).expect("link");
    for args in [
        &[
            "edit",
            ".github/workflows/x.yml",
            "--old",
            "push",
            "--new",
            "pull",
        ][..],
        &[
            "write",
            ".github/workflows/x.yml",
            "--overwrite",
            "--content",
            "evil\n",
        ],
        &["rm", ".github/workflows/x.yml"],
    ] {
        let out = person(&root, &state, args);
        let s = said(&out);
        assert!(!out.status.success(), "{args:?}: {s}");
        assert!(s.contains("CONFIRMATION_REQUIRED"), "{args:?}: {s}");
        assert!(s.contains("through .github"), "{args:?}: {s}");
    }
    assert_eq!(
        std::fs::read_to_string(root.join("docs/workflows/x.yml")).expect("x"),
        "on: push\n"
    );
}

/// Round 20: a folder moved away before the server ran, and now holding its audit log,
/// was moved back by an undo, after which the agent read and erased the log.
#[test]
fn an_undo_does_not_move_the_folder_holding_the_audit_log() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    write(&root, "logs/old.txt", "o\n");
    ok(&person(&root, &state, &["mv", "logs", "oldlogs"]));
    let log = root.join("oldlogs/audit.jsonl");
    let mut c = bin();
    c.arg("--root")
        .arg(&root)
        .args(["--state-dir"])
        .arg(&state)
        .arg("--audit-log")
        .arg(&log)
        .args(["serve", "--allow-write", "--no-index"]);
    let mut s = StdioServer::spawn(c, "agent");
    let r = s.call("undo", &json!({"id": 1}));
    let t = r.to_string();
    assert_eq!(r["isError"], true, "{t}");
    assert!(t.contains("DENIED_PATTERN"), "{t}");
    assert!(root.join("oldlogs").is_dir() && !root.join("logs").exists());
}

/// Round 20: with a stray file where the backups folder goes, the error gave the agent
/// the state directory's host path.
#[test]
fn a_broken_state_directory_is_not_named_to_the_agent() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    write(&root, "a.txt", "one\n");
    ok(&person(
        &root,
        &state,
        &["edit", "a.txt", "--old", "one", "--new", "two"],
    ));
    // The workspace's own state folder: the one the edit made.
    let ws_state = std::fs::read_dir(&state)
        .expect("state")
        .flatten()
        .find(|e| e.path().join("journal.jsonl").exists())
        .expect("a workspace state folder")
        .path();
    std::fs::remove_dir_all(ws_state.join("backups")).expect("rm backups");
    std::fs::write(ws_state.join("backups"), "not a folder").expect("stray file");
    let mut s = agent(&root, &state, &[]);
    let r = s.call(
        "edit",
        &json!({"path": "a.txt", "old_string": "two", "new_string": "three"}),
    );
    let t = r.to_string();
    assert_eq!(r["isError"], true, "{t}");
    assert!(t.contains("IO_ERROR"), "{t}");
    assert!(!t.contains(&state.display().to_string()), "{t}");
}

/// Round 20: past the stop for new changes undos went on, all of them sharing the room
/// left: an agent made a damaging edit, filled the journal, then undid its own changes
/// until no room was left, and the person's undo of that edit was refused. The last room
/// is the person's: an agent's undos stop short of it.
#[test]
fn an_agent_cannot_use_up_the_room_kept_for_the_persons_undos() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    write(&root, "important.txt", "precious user data\n");
    write(&root, "filler.txt", "f0\n");
    let envs = [
        ("FERRET_TEST_JOURNAL_NEW_CHANGES_MAX", "3000"),
        ("FERRET_TEST_JOURNAL_MAX", "8000"),
    ];
    let mut c = bin();
    c.arg("--root")
        .arg(&root)
        .args(["--state-dir"])
        .arg(&state)
        .args(["serve", "--allow-write", "--no-index"])
        .envs(envs);
    let mut s = StdioServer::spawn(c, "agent");
    let r = s.call(
        "edit",
        &json!({"path": "important.txt", "old_string": "precious user data", "new_string": "agent wiped it"}),
    );
    assert_ne!(r["isError"], true, "{r}");
    let mut ids = Vec::new();
    for i in 0..60 {
        let r = s.call(
            "edit",
            &json!({"path": "filler.txt", "old_string": format!("f{i}"), "new_string": format!("f{}", i + 1)}),
        );
        if r["isError"] == true {
            assert!(r.to_string().contains("FILE_TOO_LARGE"), "{r}");
            break;
        }
        ids.push(r["structuredContent"]["change_id"].as_u64().expect("id"));
    }
    assert!(ids.len() > 3, "{ids:?}");
    let mut refused = false;
    for id in ids.iter().rev() {
        let r = s.call("undo", &json!({"id": id, "force": true}));
        if r["isError"] == true {
            assert!(r.to_string().contains("FILE_TOO_LARGE"), "{r}");
            refused = true;
            break;
        }
    }
    assert!(refused, "the agent's undos were never stopped");
    drop(s);
    let out = bin()
        .arg("--root")
        .arg(&root)
        .args(["--allow-write", "--state-dir"])
        .arg(&state)
        .args(["undo", "1", "--yes"])
        .envs(envs)
        .output()
        .expect("undo");
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(
        std::fs::read_to_string(root.join("important.txt")).expect("read"),
        "precious user data\n"
    );
}

/// Round 21: a link to a folder holding nothing secret yet, moved as `.kube`, passed the
/// check of what the folder holds; kubectl then wrote the credentials through it into a
/// folder the agent reads, and the agent could write the person's kubeconfig by the
/// folder's own name. No link to a folder is put at a name whose contents a deny rule
/// guards.
#[test]
fn no_link_to_a_folder_is_put_where_a_deny_rule_guards_the_contents() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    write(&root, "proj/notes/README.md", "notes\n");
    std::os::unix::fs::symlink("proj/notes", root.join("latest")).expect("link");
    for to in [".kube", ".docker", "sub/.KUBE"] {
        std::fs::create_dir_all(root.join("sub")).expect("mkdir");
        let out = person(&root, &state, &["mv", "latest", to]);
        let s = said(&out);
        assert!(
            !out.status.success() && s.contains("DENIED_PATTERN"),
            "{to}: {s}"
        );
        assert!(root.join(to).symlink_metadata().is_err(), "{to}: {s}");
    }
    // A real empty folder may take the name (what lands in it later is denied).
    std::fs::create_dir_all(root.join("k")).expect("mkdir");
    ok(&person(&root, &state, &["mv", "k", ".kube"]));
}

/// Round 21: moving a file or folder away from a confirm-listed name, spelled through a
/// link on the way (`.github -> docs`), took it from that name unasked, where a delete
/// asks.
#[test]
fn moving_away_from_a_listed_name_asks_through_a_link() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    write(&root, "docs/workflows/ci.yml", "on: push\n");
    std::os::unix::fs::symlink("docs", root.join(".github")).expect("link");
    for (from, to) in [
        (".github/workflows/ci.yml", "x.yml"),
        (".github/workflows", "wf"),
    ] {
        let out = person(&root, &state, &["mv", from, to]);
        let s = said(&out);
        assert!(
            !out.status.success() && s.contains("CONFIRMATION_REQUIRED"),
            "{from}: {s}"
        );
        assert!(root.join("docs/workflows/ci.yml").exists(), "{from}: {s}");
    }
}

/// Round 21: a state directory inside the root (XDG_STATE_HOME under a root that holds
/// HOME) refused every change with an error naming the state directory's and the root's
/// host paths to the agent. The agent is told only that it cannot be used.
#[test]
fn a_state_directory_inside_the_root_is_not_named_to_the_agent() {
    let (_t, root) = tempdir();
    write(&root, "a.txt", "one\n");
    let state = root.join(".st");
    let mut c = bin();
    c.arg("--root")
        .arg(&root)
        .arg("--state-dir")
        .arg(&state)
        .args(["serve", "--allow-write", "--no-index"]);
    let mut s = StdioServer::spawn(c, "agent");
    let r = s.call("write_file", &json!({"path": "b.txt", "content": "b\n"}));
    let t = r.to_string();
    assert_eq!(r["isError"], true, "{t}");
    assert!(t.contains("state directory cannot be used"), "{t}");
    assert!(!t.contains(&root.display().to_string()), "{t}");
    assert!(!root.join("b.txt").exists());
}

/// Round 21: the undo of a move of a link to a folder was judged as a file's: what the
/// folder holds was neither asked about nor named. Now secrets behind the link are asked
/// about, and the question says the entry is a link and where it leads.
#[test]
fn an_undo_moving_a_link_back_is_judged_by_the_folder_it_leads_to() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    write(&root, "docs/README.md", "notes\n");
    std::os::unix::fs::symlink("docs", root.join("l")).expect("link");
    let mut s = agent(&root, &state, &[]);
    let r = s.call("move", &json!({"source": "l", "destination": "m"}));
    assert_ne!(r["isError"], true, "{r}");
    // Meanwhile a secret comes to stand in the folder the link leads to.
    write(&root, "docs/.env", "TOKEN=PERSONS\n");
    let r = s.call("undo", &json!({}));
    let t = r.to_string();
    assert_eq!(r["isError"], true, "{t}");
    assert!(
        t.contains("CONFIRMATION_REQUIRED") && t.contains("secrets"),
        "{t}"
    );
    assert!(t.contains("is a link to") && t.contains("docs"), "{t}");
    assert!(root.join("m").is_symlink() && !root.join("l").exists());
}

/// Round 21: `move` never puts a link to a folder at a name whose contents a deny rule
/// guards; nor does undo, when the move it takes back came from such a name.
#[test]
fn an_undo_never_puts_a_link_to_a_folder_back_at_a_guarded_name() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    std::fs::create_dir_all(root.join("kk")).expect("mkdir");
    std::os::unix::fs::symlink("kk", root.join(".kube")).expect("link");
    ok(&person(&root, &state, &["mv", ".kube", "kl"]));
    let mut s = agent(&root, &state, &[]);
    let r = s.call("undo", &json!({"id": 1, "force": true}));
    let t = r.to_string();
    assert_eq!(r["isError"], true, "{t}");
    assert!(t.contains("DENIED"), "{t}");
    assert!(root.join("kl").is_symlink() && !root.join(".kube").exists());
}

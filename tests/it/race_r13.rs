//! Issue #25, round 13: changes racing other changes of the same file, and a folder
//! moved under a change in flight.
//! - `move` (overwrite or not) and `file_delete` lock the file they move, replace or
//!   trash as `edit` locks the file it changes: an edit in flight lands first, and one
//!   that starts waits. Unlocked, an edit's rename landed after the move: the file the
//!   move brought in was then nowhere, or the moved file came back at its old name.
//! - A change lands only if its folder is still where it is recorded: an edit computed
//!   while its folder was moved (or trashed) is refused `CONFLICT`, nothing changed,
//!   instead of landing at the folder's new place under a receipt naming the old one.

use crate::util::{bin, cli as ferret, pause_after_staged, tempdir, wait_paused, write};
use std::path::Path;
use std::process::{Child, Output};
use std::time::Duration;

/// A file of `mib` MiB that starts with `START`: an edit of it takes long enough
/// (reading, matching, writing) for another process to act meanwhile.
fn big(root: &Path, rel: &str, mib: usize) {
    let mut s = String::from("START here\n");
    s.push_str(&"filler line of text\n".repeat(mib * (1 << 20) / 20));
    write(root, rel, s);
}

fn spawn(root: &Path, state: &Path, args: &[&str]) -> Child {
    ferret(root, state, args).spawn().expect("spawn ferret")
}

fn done(c: Child) -> Output {
    c.wait_with_output().expect("ferret ran")
}

/// Every file under `dir` whose bytes are `content`.
fn holders(dir: &Path, content: &[u8]) -> Vec<std::path::PathBuf> {
    crate::util::snapshot(dir)
        .into_iter()
        .filter(|(p, b)| b == content && p.is_file())
        .map(|(p, _)| p)
        .collect()
}

#[test]
fn a_move_over_a_file_being_edited_lands_after_the_edit_and_loses_nothing() {
    for delay in [10, 40, 120] {
        let (_t, root) = tempdir();
        let (_s, state) = tempdir();
        big(&root, "m.txt", 24);
        write(&root, "x.txt", "PRECIOUS X\n");
        let edit = spawn(
            &root,
            &state,
            &["edit", "m.txt", "--old", "START", "--new", "START2"],
        );
        std::thread::sleep(Duration::from_millis(delay));
        let mv = done(spawn(
            &root,
            &state,
            &["mv", "x.txt", "m.txt", "--overwrite"],
        ));
        let _ = done(edit);
        assert!(
            mv.status.success(),
            "{}",
            String::from_utf8_lossy(&mv.stderr)
        );
        // Whatever the order, the move lands last: m.txt is what it brought in.
        assert_eq!(
            std::fs::read(root.join("m.txt")).expect("m.txt"),
            b"PRECIOUS X\n",
            "after {delay} ms"
        );
        assert!(!root.join("x.txt").exists());
    }
}

#[test]
fn two_moves_onto_one_name_keep_both_files_one_there_one_backed_up() {
    for _ in 0..3 {
        let (_t, root) = tempdir();
        let (_s, state) = tempdir();
        big(&root, "m.txt", 8);
        write(&root, "x.txt", "PRECIOUS X\n");
        write(&root, "y.txt", "PRECIOUS Y\n");
        let a = spawn(&root, &state, &["mv", "x.txt", "m.txt", "--overwrite"]);
        let b = spawn(&root, &state, &["mv", "y.txt", "m.txt", "--overwrite"]);
        let (a, b) = (done(a), done(b));
        assert!(a.status.success() && b.status.success(), "{a:?} {b:?}");
        for content in [&b"PRECIOUS X\n"[..], b"PRECIOUS Y\n"] {
            let found = holders(&root, content).len() + holders(&state, content).len();
            assert!(
                found >= 1,
                "{} is nowhere",
                String::from_utf8_lossy(content)
            );
        }
    }
}

#[test]
fn a_file_deleted_or_moved_while_an_edit_runs_does_not_come_back_at_its_name() {
    for verb in ["rm", "mv"] {
        let (_t, root) = tempdir();
        let (_s, state) = tempdir();
        let (_d, data) = tempdir();
        big(&root, "m.txt", 24);
        let mut e = ferret(
            &root,
            &state,
            &["edit", "m.txt", "--old", "START", "--new", "START2"],
        );
        let edit = e.env("XDG_DATA_HOME", &data).spawn().expect("spawn");
        std::thread::sleep(Duration::from_millis(40));
        let args: Vec<&str> = if verb == "rm" {
            vec!["rm", "m.txt"]
        } else {
            vec!["mv", "m.txt", "n.txt"]
        };
        let gone = ferret(&root, &state, &args)
            .env("XDG_DATA_HOME", &data)
            .output()
            .expect("run");
        let _ = done(edit);
        assert!(
            gone.status.success(),
            "{}",
            String::from_utf8_lossy(&gone.stderr)
        );
        assert!(!root.join("m.txt").exists(), "{verb}: m.txt came back");
    }
}

#[test]
fn an_edit_whose_folder_is_moved_meanwhile_lands_first_or_not_at_all() {
    for how in ["rename", "ferret-mv", "ferret-rm"] {
        let (_t, root) = tempdir();
        let (_s, state) = tempdir();
        let (_d, data) = tempdir();
        big(&root, "docs/big.yml", 32);
        let before = std::fs::read(root.join("docs/big.yml")).expect("read");
        let mut e = ferret(
            &root,
            &state,
            &["edit", "docs/big.yml", "--old", "START", "--new", "START2"],
        );
        let mark = pause_after_staged(e.env("XDG_DATA_HOME", &data), 3000);
        let edit = e.spawn().expect("spawn");
        wait_paused(&mark);
        let moved = match how {
            "rename" => {
                std::fs::rename(root.join("docs"), root.join("docs2")).expect("rename");
                None
            }
            "ferret-mv" => Some(
                ferret(&root, &state, &["mv", "docs", "docs2"])
                    .output()
                    .expect("mv"),
            ),
            _ => Some(
                ferret(&root, &state, &["rm", "docs"])
                    .env("XDG_DATA_HOME", &data)
                    .output()
                    .expect("rm"),
            ),
        };
        let out = done(edit);
        let err = String::from_utf8_lossy(&out.stderr);
        let mut after = before.clone();
        after.splice(0..5, b"START2".iter().copied());
        let (landed, now) = if how == "rename" {
            // A person's `mv` does not wait: the edit, staged and not landed yet, finds
            // its folder gone and must not land.
            assert!(
                !out.status.success(),
                "{how}: the edit claimed success for a folder moved during it: {err}"
            );
            assert!(err.contains("CONFLICT"), "{how}: {err}");
            (&before, holders(&root.join("docs2"), &before))
        } else {
            // Ferret's own move or delete waits for the edit in flight (round 22: a
            // write landing between a move's last look and its rename planted
            // `.kube/config`): the edit lands, and the move, finding the folder changed
            // since it looked, is refused (call again), or takes the edited file along.
            assert!(out.status.success(), "{how}: {err}");
            let m = moved.expect("ferret ran");
            let m_said = crate::util::said(&m);
            let at = match (m.status.success(), how) {
                (false, _) => {
                    assert!(m_said.contains("CONFLICT"), "{how}: {m_said}");
                    root.join("docs")
                }
                (true, "ferret-rm") => data.clone(),
                (true, _) => root.join("docs2"),
            };
            (&after, holders(&at, &after))
        };
        assert_eq!(
            now.len(),
            1,
            "{how}: the file is where its folder is, {} bytes",
            landed.len()
        );
    }
}

// Round 14: every change that lands in a folder checks the folder is still where its
// path leads, just before its rename: move (both ends), file_delete, undo's move back,
// restore and removal; and the file it replaces is still the one it read.

#[test]
fn a_move_whose_destination_folder_is_moved_under_github_meanwhile_is_refused() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    big(&root, "d/ci.yml", 32);
    write(&root, "src.yml", "on: push\njobs: {evil: 1}\n");
    std::fs::create_dir_all(root.join(".github")).expect("mkdir");
    let mut mv = ferret(&root, &state, &["mv", "--overwrite", "src.yml", "d/ci.yml"]);
    let mark = pause_after_staged(&mut mv, 3000);
    let mv = mv.spawn().expect("spawn");
    wait_paused(&mark);
    std::fs::rename(root.join("d"), root.join(".github/workflows")).expect("rename");
    let out = done(mv);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the move claimed success: {err}");
    // Found moved (CONFLICT) or found gone from where it was named (NOT_FOUND), by
    // where in its last checks the move looks first: refused either way.
    assert!(
        err.contains("CONFLICT") || err.contains("NOT_FOUND"),
        "{err}"
    );
    assert!(root.join("src.yml").exists(), "the source stays");
    let ci = std::fs::read(root.join(".github/workflows/ci.yml")).expect("ci.yml");
    assert!(
        ci.starts_with(b"START here"),
        "the file under .github is the person's"
    );
}

#[test]
fn a_delete_whose_folder_is_moved_under_github_meanwhile_takes_nothing_from_there() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    let (_d, data) = tempdir();
    for i in 0..3000 {
        write(&root, &format!("d/t/f{i}.txt"), "x\n");
    }
    std::fs::create_dir_all(root.join(".github")).expect("mkdir");
    let mut rm = ferret(&root, &state, &["rm", "d/t"]);
    let rm = rm.env("XDG_DATA_HOME", &data).spawn().expect("spawn");
    std::thread::sleep(Duration::from_millis(15));
    std::fs::rename(root.join("d"), root.join(".github/d")).expect("rename");
    let out = done(rm);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        root.join(".github/d/t/f0.txt").exists(),
        "trashed from under .github unasked: {err}"
    );
}

#[test]
fn a_persons_save_during_an_edit_is_never_replaced() {
    for tool in ["edit", "write"] {
        let (_t, root) = tempdir();
        let (_s, state) = tempdir();
        big(&root, "x.txt", 32);
        let args: Vec<&str> = match tool {
            "edit" => vec!["edit", "x.txt", "--old", "START", "--new", "NEW"],
            _ => vec![
                "write",
                "x.txt",
                "--overwrite",
                "--content",
                "NEW CONTENT\n",
            ],
        };
        let mut change = ferret(&root, &state, &args);
        let mark = pause_after_staged(&mut change, 3000);
        let change = change.spawn().expect("spawn");
        wait_paused(&mark);
        // An editor's atomic save: a new file renamed over the old one, after the change
        // read the file and before it lands.
        write(&root, ".x.swp", "PERSON SAVED THIS\n");
        std::fs::rename(root.join(".x.swp"), root.join("x.txt")).expect("save");
        let out = done(change);
        let err = String::from_utf8_lossy(&out.stderr);
        let now = std::fs::read(root.join("x.txt")).expect("x.txt");
        assert!(!out.status.success(), "{tool}: claimed success: {err}");
        assert!(err.contains("CONFLICT"), "{tool}: {err}");
        assert_eq!(now, b"PERSON SAVED THIS\n", "{tool}");
    }
}

#[test]
fn parallel_moves_never_plant_a_link_leading_outside() {
    for i in 0..8u64 {
        let (_o, outer) = tempdir();
        let root = outer.join("ws");
        for i in 0..3000 {
            write(&root, &format!("s1/s2/big/f{i}.txt"), "x\n");
        }
        write(&root, "t.txt", "inside\n");
        write(&outer, "t.txt", "OUTSIDE\n");
        std::os::unix::fs::symlink("../../../t.txt", root.join("s1/s2/big/l.txt")).expect("link");
        std::fs::create_dir_all(root.join("m/p")).expect("mkdir");
        let f = std::sync::Arc::new(crate::util::ferret(&root, true, Some(&outer.join("state"))));
        let a = {
            let f = f.clone();
            std::thread::spawn(move || {
                crate::util::call(
                    &f,
                    "move",
                    serde_json::json!({"source": "s1/s2/big", "destination": "m/p/big"}),
                )
            })
        };
        std::thread::sleep(Duration::from_millis(5 + 8 * i));
        let b = crate::util::call(
            &f,
            "move",
            serde_json::json!({"source": "m/p", "destination": "p2"}),
        );
        let a = a.join().expect("thread");
        for l in ["p2/big/l.txt", "m/p/big/l.txt", "s1/s2/big/l.txt"] {
            let p = root.join(l);
            if p.symlink_metadata().is_ok() {
                let target = std::fs::read(&p).unwrap_or_default();
                assert_ne!(target, b"OUTSIDE\n", "{l} leads outside: {a:?} {b:?}");
            }
        }
    }
}

// Round 16: moves of two processes wait for each other. A directory move holds the lock
// from its last walk of the links inside to its rename (a test hook pauses it there);
// a link another server moves into the directory meanwhile waits, so it is either judged
// at the directory's new place or lands elsewhere, never carried outside unjudged.

#[test]
fn a_link_moved_into_a_directory_by_another_process_during_its_move_never_leads_outside() {
    // (A's root below the workspace, B's root, B's link's place, where B puts it,
    // A's move, where the moved link would be)
    type Case<'a> = (&'a str, &'a str, &'a str, &'a str, [&'a str; 2], &'a str);
    let cases: [Case; 2] = [
        // Two servers of one tree, each with its own state directory.
        (
            "",
            "",
            "q/r/s/lk",
            "s1/s2/big/lk",
            ["s1/s2/big", "m/big"],
            "m/big/lk",
        ),
        // A server of a subtree, and one of the whole tree moving into it.
        (
            "s1",
            "",
            "q/r/lk",
            "s1/s2/big/lk",
            ["s2/big", "big2"],
            "s1/big2/lk",
        ),
    ];
    for (a_root, b_root, link, into, [from, to], landed) in cases {
        let (_o, outer) = tempdir();
        let ws = outer.join("ws");
        write(&ws, "s1/s2/big/f.txt", "x\n");
        write(&ws, "t.txt", "OUTSIDE A\n");
        write(&ws, "s1/t.txt", "inside\n");
        write(&outer, "t.txt", "OUTSIDE\n");
        std::fs::create_dir_all(ws.join("m")).expect("mkdir");
        let at = ws.join(link);
        std::fs::create_dir_all(at.parent().expect("parent")).expect("mkdir");
        // Inside at its place and at B's destination (three or two levels up).
        let up = "../".repeat(link.matches('/').count());
        std::os::unix::fs::symlink(format!("{up}t.txt"), &at).expect("link");
        let (_sa, state_a) = tempdir();
        let (_sb, state_b) = tempdir();
        let mut a = ferret(&ws.join(a_root), &state_a, &["mv", from, to]);
        let mark = pause_after_staged(&mut a, 3000);
        let a = a.spawn().expect("spawn");
        wait_paused(&mark);
        let b_at = |p: &str| {
            Path::new(p)
                .strip_prefix(b_root)
                .expect("in B's root")
                .to_string_lossy()
                .into_owned()
        };
        let b = done(spawn(
            &ws.join(b_root),
            &state_b,
            &["mv", &b_at(link), &b_at(into)],
        ));
        let a = done(a);
        let said = format!(
            "A: {} {}\nB: {} {}",
            a.status,
            String::from_utf8_lossy(&a.stderr),
            b.status,
            String::from_utf8_lossy(&b.stderr)
        );
        assert!(a.status.success(), "{said}");
        let p = ws.join(landed);
        if p.symlink_metadata().is_ok() {
            let read = std::fs::read_to_string(&p).unwrap_or_default();
            assert!(!read.contains("OUTSIDE"), "{landed} leads outside: {said}");
        }
    }
}

// Round 15: a new file's folder is checked just before it lands, as a replaced file's is;
// and a file saved in place (truncate and write, same inode) during a change is seen.

#[test]
fn a_new_file_whose_folder_is_moved_under_github_meanwhile_is_refused() {
    for made in [false, true] {
        let (_t, root) = tempdir();
        let (_s, state) = tempdir();
        if !made {
            std::fs::create_dir_all(root.join("n/a/b")).expect("mkdir");
        } else {
            std::fs::create_dir_all(root.join("n")).expect("mkdir");
        }
        std::fs::create_dir_all(root.join(".github")).expect("mkdir");
        // The change waits once staged (a test hook): the folder moves then.
        let mut w = ferret(
            &root,
            &state,
            &["write", "n/a/b/x.txt", "--content", "on: push\n"],
        );
        let mark = pause_after_staged(&mut w, 1500);
        let w = w.spawn().expect("spawn");
        wait_paused(&mark);
        std::fs::rename(root.join("n"), root.join(".github/n")).expect("rename");
        let out = done(w);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "made {made}: claimed success: {err}");
        assert!(err.contains("CONFLICT"), "{err}");
        assert!(
            !root.join(".github/n/a/b/x.txt").exists(),
            "made {made}: landed under .github: {err}"
        );
        // The folders the refused write made are gone again, wherever they went
        // (round 16); folders it found stay.
        assert_eq!(
            root.join(".github/n/a").exists(),
            !made,
            "made {made}: {err}"
        );
        assert!(root.join(".github/n").is_dir());
    }
}

#[test]
fn a_file_saved_in_place_during_an_edit_is_never_replaced() {
    for tool in ["edit", "write"] {
        let (_t, root) = tempdir();
        let (_s, state) = tempdir();
        big(&root, "x.txt", 32);
        let args: Vec<&str> = match tool {
            "edit" => vec!["edit", "x.txt", "--old", "START", "--new", "NEW"],
            _ => vec![
                "write",
                "x.txt",
                "--overwrite",
                "--content",
                "NEW CONTENT\n",
            ],
        };
        let mut change = ferret(&root, &state, &args);
        let mark = pause_after_staged(&mut change, 1500);
        let change = change.spawn().expect("spawn");
        wait_paused(&mark);
        // An editor that saves into the same file: truncate, then write.
        std::fs::write(root.join("x.txt"), "PERSON SAVED THIS\n").expect("save");
        let out = done(change);
        let err = String::from_utf8_lossy(&out.stderr);
        let now = std::fs::read(root.join("x.txt")).expect("x.txt");
        assert!(!out.status.success(), "{tool}: claimed success: {err}");
        assert!(err.contains("CONFLICT"), "{tool}: {err}");
        assert_eq!(
            now, b"PERSON SAVED THIS\n",
            "{tool}: the save was replaced: {err}"
        );
    }
}

// Round 16: a permanent delete takes only the object that was named when it started (and
// when its question was asked), never one moved to the name since.

#[test]
fn a_delete_takes_only_what_was_named_never_what_was_moved_there_since() {
    // (A delete to the trash takes what stands there then: it can be undone.)
    {
        let permanent = true;
        let (_t, root) = tempdir();
        let (_s, state) = tempdir();
        let (_d, data) = tempdir();
        write(&root, "notes.tmp", "junk\n");
        write(&root, "important.rs", "precious\n");
        let mut args = vec!["rm", "notes.tmp", "--yes"];
        if permanent {
            args.push("--permanent");
        }
        let mut rm = ferret(&root, &state, &args);
        rm.env("XDG_DATA_HOME", &data)
            .args(["--set", "allow_permanent_delete=true"]);
        let mark = pause_after_staged(&mut rm, 1500);
        let rm = rm.spawn().expect("spawn");
        wait_paused(&mark);
        // Meanwhile, something else is put at the name.
        std::fs::rename(root.join("important.rs"), root.join("notes.tmp")).expect("swap");
        let out = done(rm);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "permanent {permanent}: {err}");
        assert!(err.contains("CONFLICT"), "{err}");
        assert_eq!(
            std::fs::read(root.join("notes.tmp")).expect("still there"),
            b"precious\n",
            "permanent {permanent}"
        );
    }
}

// Round 16, lesser: ferret's own staging file of an edit in flight is no secret; a
// delete of its folder meanwhile does not ask about "secrets", and the edit is refused,
// the folder whole in the trash.
#[test]
fn a_delete_does_not_ask_about_an_edits_staging_file() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    let (_d, data) = tempdir();
    write(&root, "d/a.txt", "old\n");
    let mut edit = ferret(
        &root,
        &state,
        &["edit", "d/a.txt", "--old", "old", "--new", "new"],
    );
    let mark = pause_after_staged(edit.env("XDG_DATA_HOME", &data), 3000);
    let edit = edit.spawn().expect("spawn");
    wait_paused(&mark);
    let staged = std::fs::read_dir(root.join("d"))
        .expect("dir")
        .filter_map(Result::ok)
        .any(|e| e.file_name().to_string_lossy().starts_with(".ferret-"));
    let rm = ferret(&root, &state, &["rm", "d"])
        .env("XDG_DATA_HOME", &data)
        .output()
        .expect("rm");
    let edit = done(edit);
    let said = format!(
        "rm: {}\nedit: {}",
        String::from_utf8_lossy(&rm.stderr),
        String::from_utf8_lossy(&edit.stderr)
    );
    assert!(staged, "the edit staged nothing in d/ to test with: {said}");
    // Not asked about "secrets" for the staging file; the delete waits for the edit in
    // flight (round 22), which lands, and then finds `d` changed since it looked:
    // refused, call again. Nothing is lost either way.
    assert!(!said.contains("deny patterns"), "{said}");
    assert!(!said.contains("CONFIRMATION_REQUIRED"), "{said}");
    assert!(edit.status.success(), "{said}");
    if rm.status.success() {
        assert!(!root.join("d").exists(), "{said}");
    } else {
        assert!(said.contains("CONFLICT"), "{said}");
        assert_eq!(
            std::fs::read_to_string(root.join("d/a.txt")).expect("a"),
            "new\n",
            "{said}"
        );
    }
}

// Round 16, lesser: a refused move leaves no folders it made, wherever they went.
#[test]
fn a_refused_move_removes_the_folders_it_made() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    write(&root, "src.txt", "hello\n");
    std::fs::create_dir_all(root.join("d")).expect("mkdir");
    std::fs::create_dir_all(root.join(".github")).expect("mkdir");
    let mut mv = ferret(&root, &state, &["mv", "src.txt", "d/new/deep/x.txt"]);
    let mark = pause_after_staged(&mut mv, 1500);
    let mv = mv.spawn().expect("spawn");
    wait_paused(&mark);
    std::fs::rename(root.join("d"), root.join(".github/d")).expect("rename");
    let out = done(mv);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the move claimed success: {err}");
    assert!(err.contains("CONFLICT"), "{err}");
    assert!(root.join("src.txt").exists(), "the source stays");
    assert!(root.join(".github/d").is_dir());
    assert!(
        !root.join(".github/d/new").exists(),
        "left its folders: {err}"
    );
}

// Round 17: an undo that restores a link waits for a directory move in flight, as moves
// do: restored into the directory after the move's last walk passed its folder, the
// link was carried to where it leads outside.
#[test]
fn a_link_restored_by_undo_during_a_directory_move_never_leads_outside() {
    let (_o, outer) = tempdir();
    let ws = outer.join("ws");
    let (_s, state) = tempdir();
    let (_d, data) = tempdir();
    write(&ws, "a/b/D/sub/f.txt", "x\n");
    write(&ws, "x", "inside\n");
    write(&outer, "x", "OUTSIDE\n");
    std::fs::create_dir_all(ws.join("m")).expect("mkdir");
    // Four levels up from a/b/D/sub is the root; from m/D/sub it is outside.
    std::os::unix::fs::symlink("../../../../x", ws.join("a/b/D/sub/L")).expect("link");
    let rm = ferret(&ws, &state, &["rm", "a/b/D/sub/L"])
        .env("XDG_DATA_HOME", &data)
        .output()
        .expect("rm");
    assert!(
        rm.status.success(),
        "{}",
        String::from_utf8_lossy(&rm.stderr)
    );
    let mut mv = ferret(&ws, &state, &["mv", "a/b/D", "m/D"]);
    let mark = pause_after_staged(mv.env("XDG_DATA_HOME", &data), 3000);
    let mv = mv.spawn().expect("spawn");
    wait_paused(&mark);
    let undo = ferret(&ws, &state, &["undo", "1"])
        .env("XDG_DATA_HOME", &data)
        .output()
        .expect("undo");
    let mv = done(mv);
    let said = format!(
        "mv: {}\nundo: {}",
        String::from_utf8_lossy(&mv.stderr),
        String::from_utf8_lossy(&undo.stderr)
    );
    assert!(mv.status.success(), "{said}");
    let landed = ws.join("m/D/sub/L");
    if landed.symlink_metadata().is_ok() {
        let read = std::fs::read_to_string(&landed).unwrap_or_default();
        assert!(
            !read.contains("OUTSIDE"),
            "the restored link leads outside: {said}"
        );
    }
}

// Round 17: a patch's files are looked at again just before each lands. A person's save
// to a file the patch deletes, made after the patch's checks and before its removal, was
// removed and kept nowhere (the backup holds what the patch read).
#[test]
fn a_save_to_a_file_a_patch_deletes_is_never_removed() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    write(&root, "notes.txt", "old\n");
    write(&root, "a.txt", "one\n");
    let patch = "*** Begin Patch\n*** Delete File: notes.txt\n*** Update File: a.txt\n@@\n-one\n+two\n*** End Patch\n";
    let mut p = ferret(&root, &state, &["patch"]);
    let mark = pause_after_staged(&mut p, 1500);
    let mut p = p
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    {
        use std::io::Write;
        let mut stdin = p.stdin.take().expect("stdin");
        stdin.write_all(patch.as_bytes()).expect("patch");
    }
    wait_paused(&mark);
    // An editor's save: a new file renamed over the old one.
    write(&root, "notes.new", "THE PERSONS NEW WORK\n");
    std::fs::rename(root.join("notes.new"), root.join("notes.txt")).expect("save");
    let out = done(p);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the patch claimed success: {err}");
    assert!(err.contains("CONFLICT"), "{err}");
    assert_eq!(
        std::fs::read_to_string(root.join("notes.txt")).unwrap_or_default(),
        "THE PERSONS NEW WORK\n",
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).unwrap(),
        "one\n"
    );
}

// Round 18: a patch that only adds files checked where each would land (not under
// `.github`, say) and then landed them, with a moment between in which another
// process's move could take their folder there. Every patch now waits for the moves and
// deletes in flight, and they for it, as a patch that removes files did.
#[test]
fn a_patch_that_only_adds_files_waits_for_moves_in_flight() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    write(&root, "docs/readme.txt", "r\n");
    write(&root, ".github/keep.txt", "k\n");
    let patch = "*** Begin Patch\n*** Add File: docs/ci.yml\n+on: push\n*** End Patch\n";
    let mut p = ferret(&root, &state, &["patch"]);
    let mark = pause_after_staged(&mut p, 3000);
    let mut p = p
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    {
        use std::io::Write;
        let mut stdin = p.stdin.take().expect("stdin");
        stdin.write_all(patch.as_bytes()).expect("patch");
    }
    wait_paused(&mark);
    let mv = ferret(&root, &state, &["mv", "--yes", "docs", ".github/docs"])
        .output()
        .expect("mv");
    let p = done(p);
    let said = format!(
        "patch: {}\nmv: {}",
        String::from_utf8_lossy(&p.stderr),
        String::from_utf8_lossy(&mv.stderr)
    );
    assert!(p.status.success(), "{said}");
    // The move, started while the patch paused after its checks, waited for it to
    // land: it did not move the folder between the patch's check and its landing (the
    // patch succeeded, its file is not under .github). Then the move finds docs holding more than it was approved with (its --yes
    // pinned what it checked): refused, and the new file stays where the patch put it.
    assert!(!mv.status.success(), "{said}");
    assert!(said.contains("CONFLICT"), "{said}");
    assert_eq!(
        std::fs::read_to_string(root.join("docs/ci.yml")).expect("where the patch put it"),
        "on: push\n"
    );
    assert!(!root.join(".github/docs").exists(), "{said}");
}

// Round 17: a move waiting for another process's move in its tree stops at its call's
// deadline (waits used to stack, 10 s each, past it); and a move inside one root does
// not wait for moves in another root of the same server.
#[test]
fn a_move_waits_for_overlapping_moves_only_and_within_its_deadline() {
    let (_o, outer) = tempdir();
    let ws = outer.join("ws");
    let other = outer.join("other");
    let (_s, state) = tempdir();
    write(&ws, "a.txt", "a\n");
    write(&other, "o.txt", "o\n");
    // Another process mid-move in `ws`, as far as the lock says.
    let mut holder = std::process::Command::new("flock")
        .arg("-x")
        .arg(&ws)
        .args(["sleep", "20"])
        .spawn()
        .expect("flock(1)");
    std::thread::sleep(Duration::from_millis(300));
    let run = |args: &[&str]| {
        let t = std::time::Instant::now();
        let out = bin()
            .arg("--root")
            .arg(&ws)
            .arg("--root")
            .arg(&other)
            .args(["--allow-write", "--state-dir"])
            .arg(&state)
            .args(["--set", "request_timeout=1s"])
            .args(args)
            .output()
            .expect("run");
        (out, t.elapsed())
    };
    let (free, _) = run(&["mv", "other/o.txt", "other/p.txt"]);
    let (held, took) = run(&["mv", "ws/a.txt", "ws/b.txt"]);
    let _ = holder.kill();
    let _ = holder.wait();
    assert!(
        free.status.success(),
        "a move in the other root waited: {}",
        String::from_utf8_lossy(&free.stderr)
    );
    let err = String::from_utf8_lossy(&held.stderr);
    assert!(!held.status.success(), "moved past the lock: {err}");
    assert!(err.contains("TIMEOUT"), "{err}");
    assert!(took < Duration::from_secs(8), "waited {took:?}: {err}");
    assert!(ws.join("a.txt").exists());
}

// Round 18: a patch that removes files waits for deletes in flight as moves do: a file
// a patch moved into a folder while it was being deleted for good was deleted with it.
#[test]
fn a_file_a_patch_moves_into_a_folder_being_deleted_for_good_is_kept() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    write(&root, "big/s1/f.txt", "x\n");
    write(&root, "keep.txt", "the person's notes\n");
    let mut rm = ferret(&root, &state, &["rm", "--permanent", "--yes", "big"]);
    let mark = pause_after_staged(&mut rm, 3000);
    let rm = rm.spawn().expect("spawn");
    wait_paused(&mark);
    let patch = ferret(
        &root,
        &state,
        &[
            "call",
            "apply_patch",
            r#"{"changes":[{"path":"keep.txt","move_to":"big/s1/keep.txt"}]}"#,
        ],
    )
    .output()
    .expect("patch");
    let rm = done(rm);
    let said = format!(
        "rm: {}\npatch: {}{}",
        String::from_utf8_lossy(&rm.stderr),
        String::from_utf8_lossy(&patch.stdout),
        String::from_utf8_lossy(&patch.stderr)
    );
    assert!(rm.status.success(), "{said}");
    assert!(
        root.join("keep.txt").exists() || root.join("big/s1/keep.txt").exists(),
        "the notes are gone: {said}"
    );
}

//! What the eleventh attacker's pass of issue 25 found in the write paths: a question
//! settled on one walk and a change made through another. A folder on the way to a move's
//! or a new file's destination, swapped for a link to `.github` between the two, let the
//! change land on the confirm list unasked; directories made on the way to ferret's own
//! places; a "move" between two hard links of one file that changed nothing.

use crate::util::{call, code, ferret, tempdir, write};
use ferret::ErrorCode;
use serde_json::json;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Every name under `dir`, recursively (links not followed).
fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            out.push(p.strip_prefix(dir).unwrap().to_string_lossy().into_owned());
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Swaps `root/d` (a real folder) and `root/lnk` (a link to `.github`) by
/// `renameat2(RENAME_EXCHANGE)` until told to stop: `d` is the folder one moment and the
/// link the next, as when an agent's own calls (or another process) rename them back
/// and forth while a change is on its way.
fn swapper(root: &Path, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    let root = root.to_path_buf();
    std::thread::spawn(move || {
        let dir = std::fs::File::open(&root).unwrap();
        let mut n = 0;
        while !stop.load(Ordering::Relaxed) {
            let _ = rustix::fs::renameat_with(
                &dir,
                "d",
                &dir,
                "lnk",
                rustix::fs::RenameFlags::EXCHANGE,
            );
            n += 1;
        }
        n
    })
}

/// A move into `d/workflows/`, a new file in a new folder under `d/`, and a patch adding
/// one there, each made while `d` flips between a real folder and a link to `.github`:
/// nothing ever lands under `.github` (no file, no empty folder), every call either does
/// its change in the real folder or answers CONFLICT (or the folder was mid-swap:
/// NOT_FOUND, NOT_A_DIRECTORY), and nothing is lost.
#[test]
fn changes_racing_a_folder_swapped_for_a_link_to_github_never_land_there_unasked() {
    for tool in ["move", "write_file", "apply_patch"] {
        let (_t, root) = tempdir();
        write(&root, ".github/workflows/ci.yml", "on: push\n");
        std::fs::create_dir_all(root.join("d/workflows")).unwrap();
        symlink(".github", root.join("lnk")).unwrap();
        let before = tree(&root.join(".github"));
        let f = ferret(&root, true, Some(&root.join("../state")));
        let stop = Arc::new(AtomicBool::new(false));
        let swaps = swapper(&root, stop.clone());
        let (mut landed, mut refused, mut n) = (0, 0, 0);
        let until = Instant::now() + Duration::from_secs(3);
        while Instant::now() < until {
            n += 1;
            let r = match tool {
                "move" => {
                    let src = format!("src{n}.yml");
                    write(&root, &src, "evil: 1\n");
                    call(
                        &f,
                        "move",
                        json!({"source": src, "destination": if n % 2 == 0 {
                            format!("d/workflows/e{n}/x.yml")
                        } else {
                            format!("d/workflows/e{n}.yml")
                        }}),
                    )
                }
                "write_file" => call(
                    &f,
                    "write_file",
                    json!({"path": format!("d/sub{n}/x.yml"), "content": "evil: 1\n"}),
                ),
                _ => call(
                    &f,
                    "apply_patch",
                    json!({"patch": format!("*** Begin Patch\n*** Add File: d/p{n}/x.yml\n+evil: 1\n*** End Patch\n")}),
                ),
            };
            match r {
                Ok(_) => landed += 1,
                Err(e) => {
                    assert!(
                        matches!(
                            e.code,
                            ErrorCode::Conflict
                                | ErrorCode::ConfirmationRequired
                                | ErrorCode::NotFound
                                | ErrorCode::NotADirectory
                                | ErrorCode::IoError
                        ),
                        "{tool}: {e:?}"
                    );
                    refused += 1;
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        let swapped = swaps.join().unwrap();
        assert!(swapped > 100, "{tool}: the swap ran {swapped} times");
        assert!(
            landed > 0 && refused > 0,
            "{tool}: {landed} made, {refused} refused"
        );
        assert_eq!(
            tree(&root.join(".github")),
            before,
            "{tool}: something landed under .github unasked"
        );
    }
}

/// Directories made on the way to a new file are held to the rules of ferret's own
/// places: with a root that holds HOME, `write_file` and `apply_patch` make no `.local`,
/// `.local/state` or `.config` (a link put there later would redirect the trash, the
/// state or the config), as `move` already refused.
#[test]
fn new_files_make_no_directory_on_the_way_to_ferrets_own_places() {
    let (_t, base) = tempdir();
    let home = base.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let run = |args: &[&str]| {
        crate::util::bin()
            .env_remove("XDG_STATE_HOME")
            .env_remove("XDG_DATA_HOME")
            .env_remove("XDG_CONFIG_HOME")
            .env("HOME", &home)
            .arg("--root")
            .arg(&home)
            .arg("--state-dir")
            .arg(base.join("state"))
            .arg("--allow-write")
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    for path in [
        ".local/state/x.txt",
        ".local/share/x.txt",
        ".config/x.txt",
        ".local/x.txt",
    ] {
        let w = json!({"path": path, "content": "hi"}).to_string();
        let p = json!({"patch": format!("*** Begin Patch\n*** Add File: {path}\n+hi\n*** End Patch\n")})
            .to_string();
        for (tool, args) in [("write_file", &w), ("apply_patch", &p)] {
            let o = run(&["call", tool, args]);
            let out = String::from_utf8_lossy(&o.stdout);
            assert!(out.contains("DENIED_PATTERN"), "{tool} {path}: {out}");
            assert_eq!(
                std::fs::read_dir(&home).unwrap().count(),
                0,
                "{tool} {path} made something"
            );
        }
    }
    // A name beside them is made as usual.
    let o = run(&["write", "proj/new/x.txt", "--content", "hi"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// A move between two hard links of one file (with or without overwrite, either way
/// round) is refused: rename does nothing there, and the receipt and the journal would
/// name a change that never happened.
#[test]
fn a_move_between_two_hard_links_of_one_file_is_refused() {
    let (_t, root) = tempdir();
    write(&root, "c.txt", "content\n");
    std::fs::hard_link(root.join("c.txt"), root.join("C.txt")).unwrap();
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::hard_link(root.join("c.txt"), root.join("sub/third.txt")).unwrap();
    let f = ferret(&root, true, Some(&root.join("../state")));
    for (src, dst) in [
        ("c.txt", "C.txt"),
        ("C.txt", "c.txt"),
        ("sub/third.txt", "c.txt"),
    ] {
        for overwrite in [true, false] {
            let r = call(
                &f,
                "move",
                json!({"source": src, "destination": dst, "overwrite": overwrite}),
            );
            assert_eq!(code(r), ErrorCode::AlreadyExists, "{src} -> {dst}");
        }
    }
    for name in ["c.txt", "C.txt", "sub/third.txt"] {
        assert_eq!(std::fs::read(root.join(name)).unwrap(), b"content\n");
    }
    let h = call(&f, "undo", json!({"dry_run": true}));
    assert!(h.is_err(), "a change was recorded: {h:?}");
}

/// A question asked because of the name as spelled (`.GITHUB`, a link to `docs`) names
/// that spelling as well as the real place, so the person sees why they are asked.
#[test]
fn a_question_asked_for_a_listed_spelling_names_it() {
    let (_t, root) = tempdir();
    std::fs::create_dir_all(root.join("docs")).unwrap();
    symlink("docs", root.join(".github")).unwrap();
    write(&root, "a.yml", "x: 1\n");
    let f = ferret(&root, true, Some(&root.join("../state")));
    for (tool, args) in [
        (
            "write_file",
            json!({"path": ".github/w.yml", "content": "x", "dry_run": true}),
        ),
        (
            "move",
            json!({"source": "a.yml", "destination": ".github/a.yml", "dry_run": true}),
        ),
    ] {
        let out = call(&f, tool, args).unwrap();
        let q = out["would_ask"].to_string();
        assert!(
            q.contains("docs/") && q.contains("through .github"),
            "{tool}: {q}"
        );
    }
}

/// Undo of an edit, an overwrite and a create, while a folder on the way flips between a
/// real folder and a link to `.github`, where a file holds exactly the bytes the undone
/// change wrote (so the hash check alone would pass): the undo restores or removes the
/// file in the real folder, or answers CONFLICT; the `.github` file is never touched
/// (attacker pass 12: the undo's check ran on one walk, its write went through another).
#[test]
fn undo_racing_a_folder_swapped_for_a_link_to_github_never_changes_it() {
    for kind in ["edit", "overwrite", "create"] {
        let (_t, root) = tempdir();
        std::fs::create_dir_all(root.join(".github/workflows")).unwrap();
        std::fs::create_dir_all(root.join("d/workflows")).unwrap();
        symlink(".github", root.join("lnk")).unwrap();
        let f = ferret(&root, true, Some(&root.join("../state")));
        let paused = Arc::new(AtomicBool::new(true));
        let stop = Arc::new(AtomicBool::new(false));
        // Set by the swapper when it has seen `paused` and made no rename since.
        let idle = Arc::new(AtomicBool::new(false));
        let swaps = {
            let (root, paused, stop, idle) =
                (root.clone(), paused.clone(), stop.clone(), idle.clone());
            std::thread::spawn(move || {
                let dir = std::fs::File::open(&root).unwrap();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    if paused.load(Ordering::Acquire) {
                        idle.store(true, Ordering::Release);
                        std::thread::sleep(Duration::from_micros(100));
                        continue;
                    }
                    idle.store(false, Ordering::Release);
                    let _ = rustix::fs::renameat_with(
                        &dir,
                        "d",
                        &dir,
                        "lnk",
                        rustix::fs::RenameFlags::EXCHANGE,
                    );
                    n += 1;
                }
                n
            })
        };
        // Pauses the swapper with `d` the real folder again.
        let settle = || {
            idle.store(false, Ordering::Release);
            paused.store(true, Ordering::Release);
            while !idle.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_micros(50));
            }
            if std::fs::symlink_metadata(root.join("d"))
                .unwrap()
                .file_type()
                .is_symlink()
            {
                rustix::fs::renameat_with(
                    std::fs::File::open(&root).unwrap(),
                    "d",
                    std::fs::File::open(&root).unwrap(),
                    "lnk",
                    rustix::fs::RenameFlags::EXCHANGE,
                )
                .unwrap();
            }
        };
        let (mut undone, mut refused) = (0, 0);
        let until = Instant::now() + Duration::from_secs(3);
        let mut n = 0;
        while Instant::now() < until {
            n += 1;
            settle();
            let name = format!("x{n}.yml");
            let guarded = root.join(".github/workflows").join(&name);
            let args = match kind {
                "edit" => {
                    write(&root, &format!("d/workflows/{name}"), "old: 1\n");
                    json!({"path": format!("d/workflows/{name}"), "old_string": "old", "new_string": "new"})
                }
                "overwrite" => {
                    write(&root, &format!("d/workflows/{name}"), "old: 1\n");
                    json!({"path": format!("d/workflows/{name}"), "content": "new: 1\n", "overwrite": true})
                }
                _ => json!({"path": format!("d/workflows/{name}"), "content": "new: 1\n"}),
            };
            let tool = if kind == "edit" { "edit" } else { "write_file" };
            call(&f, tool, args).unwrap();
            // The listed place holds what the change wrote: only the walk tells them apart.
            std::fs::write(&guarded, "new: 1\n").unwrap();
            paused.store(false, Ordering::Release);
            match call(&f, "undo", json!({})) {
                Ok(_) => undone += 1,
                Err(e) => {
                    assert!(
                        matches!(
                            e.code,
                            ErrorCode::Conflict | ErrorCode::NotFound | ErrorCode::IoError
                        ),
                        "{kind}: {e:?}"
                    );
                    refused += 1;
                }
            }
            settle();
            assert_eq!(
                std::fs::read(&guarded).ok().as_deref(),
                Some(&b"new: 1\n"[..]),
                "{kind}: undo changed .github/workflows/{name}"
            );
            // A refused undo stays in the journal; it is undone on its own now, still.
            if std::fs::read(root.join("d/workflows").join(&name))
                .ok()
                .as_deref()
                == Some(&b"new: 1\n"[..])
            {
                let _ = call(&f, "undo", json!({}));
            }
        }
        stop.store(true, Ordering::Relaxed);
        let swapped = swaps.join().unwrap();
        assert!(swapped > 50, "{kind}: the swap ran {swapped} times");
        assert!(undone > 0, "{kind}: {undone} undone, {refused} refused");
    }
}

//! The OS trash behind `platform::OsTrash` (issue #27, item 4), run on Linux through its
//! fake twin: with `FERRET_PORTABLE=1` a delete moves the object by handle into a
//! staging folder ferret makes in its own trash folder, hands that staged path to the
//! fake OS trash (`$XDG_DATA_HOME/ferret-os-trash`), and journals where it ended up;
//! undo opens that folder without following a link and checks the object's identity
//! (and a file's hash) before moving it back, never over anything. The same code runs
//! on macOS with `NSFileManager trashItemAtURL:` as the trash.

use crate::util::Ws;
use serde_json::Value;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `ferret --root … --state-dir …` in portable mode, `XDG_DATA_HOME` = `base/data`.
fn cmd(w: &Ws, args: &[&str]) -> Command {
    let mut c = w.cmd(args);
    c.env("FERRET_PORTABLE", "1");
    c
}

fn run(w: &Ws, args: &[&str]) -> Output {
    cmd(w, args).output().unwrap()
}

fn rm(w: &Ws, path: &str) -> Output {
    run(w, &["--allow-write", "rm", path])
}

fn undo(w: &Ws) -> Output {
    run(w, &["--allow-write", "undo"])
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[track_caller]
fn success(o: &Output) -> String {
    assert!(o.status.success(), "expected success: {}", text(o));
    text(o)
}

#[track_caller]
fn failure(o: &Output, code: &str) -> String {
    let t = text(o);
    assert!(!o.status.success(), "expected {code}: {t}");
    assert!(t.contains(code), "expected {code}: {t}");
    t
}

/// The fake OS trash of `w`.
fn fake(w: &Ws) -> PathBuf {
    w.base.join("data/ferret-os-trash")
}

/// Names in the fake trash, sorted.
fn in_fake(w: &Ws) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(fake(w))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Everything left in ferret's own trash folders (staging folders included).
fn in_ferret_trash(w: &Ws) -> Vec<String> {
    let mut v = Vec::new();
    for d in std::fs::read_dir(&w.state).unwrap().flatten() {
        if let Ok(rd) = std::fs::read_dir(d.path().join("trash")) {
            v.extend(
                rd.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned()),
            );
        }
    }
    v.sort();
    v
}

/// The trash record the journal ends with for change `id` (the mark's, which names
/// where the OS trash put the object, else the entry's).
fn record(w: &Ws, id: u64) -> Value {
    let mut rec = Value::Null;
    for line in w.journal().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        if v["id"] == id && !v["trash"].is_null() && v["undoes"].is_null() {
            rec = v["trash"].clone();
        }
    }
    rec
}

fn ino(p: &Path) -> u64 {
    std::fs::symlink_metadata(p).unwrap().ino()
}

#[test]
fn delete_and_undo_round_trip_a_file_a_tree_and_a_link_through_the_os_trash() {
    let w = Ws::new();
    let content: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
    std::fs::write(w.root.join("x.bin"), &content).unwrap();
    std::fs::create_dir_all(w.root.join("tree/sub/deeper")).unwrap();
    std::fs::write(w.root.join("tree/sub/deeper/f.txt"), "inner\n").unwrap();
    std::fs::write(w.root.join("tree/top.txt"), "top\n").unwrap();
    let outside = w.base.join("outside.txt");
    std::fs::write(&outside, "outside\n").unwrap();
    std::os::unix::fs::symlink(&outside, w.root.join("link")).unwrap();
    let (x_ino, tree_ino, link_ino) = (
        ino(&w.root.join("x.bin")),
        ino(&w.root.join("tree")),
        ino(&w.root.join("link")),
    );

    let t = success(&rm(&w, "x.bin"));
    assert!(
        t.contains("fake OS trash"),
        "the result names the trash: {t}"
    );
    success(&rm(&w, "tree"));
    success(&rm(&w, "link"));
    for n in ["x.bin", "tree", "link"] {
        assert!(
            std::fs::symlink_metadata(w.root.join(n)).is_err(),
            "{n} left the workspace"
        );
    }
    // The objects themselves are in the fake trash under their names.
    assert_eq!(in_fake(&w), ["link", "tree", "x.bin"]);
    assert_eq!(ino(&fake(&w).join("x.bin")), x_ino);
    assert_eq!(ino(&fake(&w).join("tree")), tree_ino);
    assert_eq!(std::fs::read(fake(&w).join("x.bin")).unwrap(), content);
    let l = std::fs::symlink_metadata(fake(&w).join("link")).unwrap();
    assert!(l.file_type().is_symlink(), "the link itself was trashed");
    assert_eq!(l.ino(), link_ino);
    assert_eq!(
        std::fs::read_to_string(&outside).unwrap(),
        "outside\n",
        "its target is untouched"
    );
    assert!(outside.exists());
    // The journal names where the object ended up, with its identity.
    for (id, name, i) in [
        (1, "x.bin", x_ino),
        (2, "tree", tree_ino),
        (3, "link", link_ino),
    ] {
        let r = record(&w, id);
        assert_eq!(r["kind"], "os", "{r}");
        assert_eq!(r["name"], name, "{r}");
        assert_eq!(Path::new(r["dir"].as_str().unwrap()), fake(&w), "{r}");
        assert_eq!(r["ino"], i, "{r}");
    }
    assert!(
        record(&w, 1)["sha256"].is_string(),
        "a file's hash is journalled"
    );
    // Nothing is left in ferret's own trash or its staging folders.
    assert_eq!(in_ferret_trash(&w), Vec::<String>::new());

    for _ in 0..3 {
        success(&undo(&w));
    }
    assert_eq!(std::fs::read(w.root.join("x.bin")).unwrap(), content);
    assert_eq!(
        std::fs::read_to_string(w.root.join("tree/sub/deeper/f.txt")).unwrap(),
        "inner\n",
        "a tree comes back whole"
    );
    assert_eq!(ino(&w.root.join("tree")), tree_ino);
    assert_eq!(std::fs::read_link(w.root.join("link")).unwrap(), outside);
    assert_eq!(ino(&w.root.join("link")), link_ino);
    assert_eq!(
        in_fake(&w),
        Vec::<String>::new(),
        "the fake trash is empty again"
    );
}

#[test]
fn a_name_clash_in_the_os_trash_takes_the_trash_name_and_undo_follows_it() {
    let w = Ws::new();
    // Something of the person's already in the trash under the name.
    std::fs::create_dir_all(fake(&w)).unwrap();
    std::fs::write(fake(&w).join("a.txt"), "the person's\n").unwrap();
    std::fs::write(w.root.join("a.txt"), "first\n").unwrap();
    success(&rm(&w, "a.txt"));
    std::fs::write(w.root.join("a.txt"), "second\n").unwrap();
    success(&rm(&w, "a.txt"));
    std::fs::write(w.root.join("noext"), "n1\n").unwrap();
    success(&rm(&w, "noext"));
    std::fs::write(w.root.join("noext"), "n2\n").unwrap();
    success(&rm(&w, "noext"));
    assert_eq!(
        in_fake(&w),
        ["a 2.txt", "a 3.txt", "a.txt", "noext", "noext 2"]
    );
    assert_eq!(record(&w, 1)["name"], "a 2.txt");
    assert_eq!(record(&w, 2)["name"], "a 3.txt");
    assert_eq!(record(&w, 4)["name"], "noext 2");
    assert_eq!(
        std::fs::read_to_string(fake(&w).join("a.txt")).unwrap(),
        "the person's\n",
        "nothing in the trash was replaced"
    );
    success(&undo(&w));
    assert_eq!(
        std::fs::read_to_string(w.root.join("noext")).unwrap(),
        "n2\n"
    );
    std::fs::remove_file(w.root.join("noext")).unwrap();
    success(&undo(&w));
    assert_eq!(
        std::fs::read_to_string(w.root.join("noext")).unwrap(),
        "n1\n"
    );
    success(&undo(&w));
    assert_eq!(
        std::fs::read_to_string(w.root.join("a.txt")).unwrap(),
        "second\n"
    );
    // The first one's undo finds a file at the name: refused, nothing replaced.
    failure(&undo(&w), "CONFLICT");
    assert_eq!(
        std::fs::read_to_string(w.root.join("a.txt")).unwrap(),
        "second\n"
    );
    assert_eq!(
        std::fs::read_to_string(fake(&w).join("a 2.txt")).unwrap(),
        "first\n",
        "the refused one stays in the trash"
    );
}

/// What happens to the trashed item before the undo.
#[derive(Debug)]
enum Tamper {
    /// Another file with the same bytes put in its place (another object).
    ReplacedByCopy,
    /// Rewritten in place (same inode, other bytes).
    Rewritten,
    /// A symlink to a file outside put in its place.
    LinkToOutside,
    /// Removed from the trash.
    Removed,
    /// The trash folder itself swapped for a link to a folder holding the same object.
    TrashFolderLinked,
    /// A directory replaced by another directory with the same contents.
    DirReplaced,
}

#[test]
fn undo_is_refused_with_nothing_lost_when_the_trashed_item_changed_in_the_os_trash() {
    for t in [
        Tamper::ReplacedByCopy,
        Tamper::Rewritten,
        Tamper::LinkToOutside,
        Tamper::Removed,
        Tamper::TrashFolderLinked,
        Tamper::DirReplaced,
    ] {
        eprintln!("tamper: {t:?}");
        let w = Ws::new();
        let is_dir = matches!(t, Tamper::DirReplaced);
        if is_dir {
            std::fs::create_dir_all(w.root.join("a.txt/in")).unwrap();
            std::fs::write(w.root.join("a.txt/in/f"), "x\n").unwrap();
        } else {
            std::fs::write(w.root.join("a.txt"), "precious\n").unwrap();
        }
        success(&rm(&w, "a.txt"));
        let item = fake(&w).join("a.txt");
        let outside = w.base.join("outside.txt");
        std::fs::write(&outside, "precious\n").unwrap();
        match t {
            Tamper::ReplacedByCopy => {
                // The original kept elsewhere, so its inode number is not reused.
                std::fs::rename(&item, w.base.join("kept")).unwrap();
                std::fs::write(&item, "precious\n").unwrap();
            }
            Tamper::Rewritten => {
                use std::io::Write;
                let mut f = std::fs::OpenOptions::new()
                    .append(true)
                    .open(&item)
                    .unwrap();
                f.write_all(b"injected\n").unwrap();
            }
            Tamper::LinkToOutside => {
                std::fs::remove_file(&item).unwrap();
                std::os::unix::fs::symlink(&outside, &item).unwrap();
            }
            Tamper::Removed => std::fs::remove_file(&item).unwrap(),
            Tamper::TrashFolderLinked => {
                let moved = w.base.join("elsewhere");
                std::fs::rename(fake(&w), &moved).unwrap();
                std::os::unix::fs::symlink(&moved, fake(&w)).unwrap();
            }
            Tamper::DirReplaced => {
                std::fs::rename(&item, w.base.join("old-dir")).unwrap();
                std::fs::create_dir_all(item.join("in")).unwrap();
                std::fs::write(item.join("in/f"), "x\n").unwrap();
            }
        }
        let before = crate::util::snapshot(&w.base);
        let shown = format!("{t:?}");
        let t = failure(&undo(&w), "CONFLICT");
        let t = format!("{shown}: {t}");
        assert!(
            std::fs::symlink_metadata(w.root.join("a.txt")).is_err(),
            "nothing was restored: {t}"
        );
        assert_eq!(crate::util::snapshot(&w.base), before, "nothing moved: {t}");
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "precious\n");
    }
}

#[test]
fn a_refusing_os_trash_leaves_the_entry_in_ferrets_trash_and_says_so() {
    // The fake trash on another filesystem than the staging folder: its rename fails
    // (EXDEV) as trashItemAtURL can fail; the staged object moves on to ferret's trash.
    let Some(shm) = other_device_dir() else {
        eprintln!("no second filesystem (/dev/shm) here: skipped");
        return;
    };
    let data = tempfile::tempdir_in(&shm).unwrap();
    let w = Ws::new();
    std::fs::write(w.root.join("a.txt"), "precious\n").unwrap();
    let o = cmd(&w, &["--allow-write", "rm", "a.txt"])
        .env("XDG_DATA_HOME", data.path())
        .output()
        .unwrap();
    let t = success(&o);
    assert!(t.contains("ferret trash"), "{t}");
    assert!(
        t.contains("refused"),
        "the result says the OS trash refused it: {t}"
    );
    assert!(!w.root.join("a.txt").exists());
    let left = in_ferret_trash(&w);
    assert_eq!(
        left.len(),
        1,
        "in ferret's trash, no staging folder left: {left:?}"
    );
    assert!(left[0].ends_with("_a.txt"), "{left:?}");
    assert_eq!(record(&w, 1)["kind"], "ferret");
    let o = cmd(&w, &["--allow-write", "undo"])
        .env("XDG_DATA_HOME", data.path())
        .output()
        .unwrap();
    success(&o);
    assert_eq!(
        std::fs::read_to_string(w.root.join("a.txt")).unwrap(),
        "precious\n"
    );
}

#[test]
fn an_os_trash_folder_that_is_a_link_is_not_followed_the_entry_goes_to_ferrets_trash() {
    let w = Ws::new();
    let elsewhere = w.base.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::create_dir_all(w.base.join("data")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, fake(&w)).unwrap();
    std::fs::write(w.root.join("a.txt"), "precious\n").unwrap();
    let t = success(&rm(&w, "a.txt"));
    assert!(t.contains("ferret trash") && t.contains("refused"), "{t}");
    assert_eq!(
        std::fs::read_dir(&elsewhere).unwrap().count(),
        0,
        "nothing went through the link"
    );
    assert_eq!(record(&w, 1)["kind"], "ferret");
    success(&undo(&w));
    assert_eq!(
        std::fs::read_to_string(w.root.join("a.txt")).unwrap(),
        "precious\n"
    );
}

#[test]
fn a_workspace_on_another_filesystem_than_the_staging_folder_is_refused_with_nothing_moved() {
    let Some(shm) = other_device_dir() else {
        eprintln!("no second filesystem (/dev/shm) here: skipped");
        return;
    };
    let w = Ws::new();
    let root = tempfile::tempdir_in(&shm).unwrap();
    std::fs::write(root.path().join("a.txt"), "precious\n").unwrap();
    let o = crate::util::bin()
        .env("FERRET_PORTABLE", "1")
        .env("XDG_DATA_HOME", w.base.join("data"))
        .current_dir(&w.base)
        .arg("--root")
        .arg(root.path())
        .arg("--state-dir")
        .arg(&w.state)
        .args(["--allow-write", "rm", "a.txt"])
        .output()
        .unwrap();
    let t = failure(&o, "another filesystem");
    assert_eq!(
        std::fs::read_to_string(root.path().join("a.txt")).unwrap(),
        "precious\n",
        "{t}"
    );
    assert_eq!(in_fake(&w), Vec::<String>::new());
    assert_eq!(
        in_ferret_trash(&w),
        Vec::<String>::new(),
        "no staging folder left"
    );
}

/// A directory on another filesystem than the temp dir, if there is one.
fn other_device_dir() -> Option<PathBuf> {
    let shm = Path::new("/dev/shm");
    let tmp = std::env::temp_dir();
    let (a, b) = (std::fs::metadata(shm).ok()?, std::fs::metadata(&tmp).ok()?);
    let probe = tempfile::tempdir_in(shm).ok()?;
    drop(probe);
    (a.dev() != b.dev()).then(|| shm.to_path_buf())
}

#[test]
fn two_processes_deleting_the_same_name_at_once_one_wins_and_nothing_is_lost() {
    let w = Ws::new();
    const ROUNDS: usize = 6;
    for round in 0..ROUNDS {
        std::fs::write(w.root.join("f.txt"), format!("round {round}\n")).unwrap();
        let kids: Vec<_> = (0..2)
            .map(|_| {
                cmd(&w, &["--allow-write", "rm", "f.txt"])
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let outs: Vec<Output> = kids
            .into_iter()
            .map(|k| k.wait_with_output().unwrap())
            .collect();
        let won = outs.iter().filter(|o| o.status.success()).count();
        assert_eq!(
            won,
            1,
            "exactly one wins: {:?}",
            outs.iter().map(text).collect::<Vec<_>>()
        );
        assert!(!w.root.join("f.txt").exists());
        assert_eq!(in_fake(&w).len(), round + 1, "{:?}", in_fake(&w));
        assert_eq!(
            in_ferret_trash(&w),
            Vec::<String>::new(),
            "no staging folder left"
        );
    }
    // Every round's content is in the trash exactly once.
    let mut held: Vec<String> = in_fake(&w)
        .iter()
        .map(|n| std::fs::read_to_string(fake(&w).join(n)).unwrap())
        .collect();
    held.sort();
    let want: Vec<String> = (0..ROUNDS).map(|r| format!("round {r}\n")).collect();
    assert_eq!(held, want);
    success(&undo(&w));
    assert_eq!(
        std::fs::read_to_string(w.root.join("f.txt")).unwrap(),
        format!("round {}\n", ROUNDS - 1)
    );
}

#[test]
fn links_out_of_the_workspace_and_denied_names_are_refused_before_anything_moves() {
    let w = Ws::new();
    let out = w.base.join("out");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("o.txt"), "outside\n").unwrap();
    std::fs::write(w.root.join(".env"), "SECRET=1\n").unwrap();
    std::fs::create_dir_all(w.root.join(".git")).unwrap();
    std::fs::write(w.root.join(".git/config"), "[core]\n").unwrap();
    std::os::unix::fs::symlink(&out, w.root.join("lo")).unwrap();
    std::os::unix::fs::symlink(".env", w.root.join("lenv")).unwrap();
    std::os::unix::fs::symlink(out.join("o.txt"), w.root.join("lfile")).unwrap();
    let before = crate::util::snapshot(&w.base);
    for (path, code) in [
        (".env", "DENIED_PATTERN"),
        ("lenv", "DENIED_PATTERN"),
        (".git", "DENIED_PATTERN"),
        (".git/config", "DENIED_PATTERN"),
        ("lo/o.txt", "PATH_ESCAPE"),
        ("../out/o.txt", "PATH_TRAVERSAL"),
        ("lo/../../out/o.txt", "PATH_TRAVERSAL"),
        ("../data/ferret-os-trash", "PATH_TRAVERSAL"),
    ] {
        failure(&rm(&w, path), code);
    }
    assert_eq!(crate::util::snapshot(&w.base), before, "nothing moved");
    assert_eq!(in_fake(&w), Vec::<String>::new());
    // A link out of the workspace is deleted as the link: its target stays.
    success(&rm(&w, "lfile"));
    assert_eq!(
        std::fs::read_to_string(out.join("o.txt")).unwrap(),
        "outside\n"
    );
    assert!(
        std::fs::symlink_metadata(fake(&w).join("lfile"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn an_os_trash_inside_the_workspace_is_never_seen_through_a_tool_nor_used() {
    // The workspace holds the data directory (as a root at $HOME holds ~/.Trash on
    // macOS): what is in that trash cannot be read, listed, searched or deleted, and a
    // delete does not leave its entry there (as with a freedesktop trash inside a root).
    let w = Ws::new();
    let data = w.root.join("data");
    std::fs::create_dir_all(data.join("ferret-os-trash")).unwrap();
    std::fs::write(data.join("ferret-os-trash/old.txt"), "SECRET-IN-TRASH\n").unwrap();
    std::fs::write(w.root.join("a.txt"), "mine\n").unwrap();
    let with_data = |args: &[&str]| cmd(&w, args).env("XDG_DATA_HOME", &data).output().unwrap();
    for args in [
        &["read", "data/ferret-os-trash/old.txt"][..],
        &["ls", "data/ferret-os-trash"],
        &["info", "data/ferret-os-trash/old.txt"],
        &["--allow-write", "rm", "data/ferret-os-trash/old.txt"],
        &["--allow-write", "rm", "data/ferret-os-trash"],
    ] {
        let o = with_data(args);
        assert!(
            !o.status.success(),
            "{args:?} must be refused: {}",
            text(&o)
        );
    }
    for args in [
        &["grep", "SECRET-IN-TRASH"][..],
        &["ls", "data"],
        &["glob", "**/old.txt"],
    ] {
        let o = with_data(args);
        assert!(
            !text(&o).contains("SECRET-IN-TRASH"),
            "{args:?}: {}",
            text(&o)
        );
        assert!(
            !text(&o).contains("ferret-os-trash"),
            "{args:?}: {}",
            text(&o)
        );
    }
    assert!(
        data.join("ferret-os-trash/old.txt").exists(),
        "nothing moved"
    );
    let t = success(&with_data(&["--allow-write", "rm", "a.txt"]));
    assert!(
        t.contains("ferret trash") && t.contains("inside the workspace"),
        "{t}"
    );
    assert!(
        !data.join("ferret-os-trash/a.txt").exists(),
        "not left in the trash inside"
    );
    assert_eq!(record(&w, 1)["kind"], "ferret");
    success(&with_data(&["--allow-write", "undo"]));
    assert_eq!(
        std::fs::read_to_string(w.root.join("a.txt")).unwrap(),
        "mine\n"
    );
}

/// `rm a.txt` killed by the test hook at `at` (`1`: once staged; `put`: once the OS
/// trash took it, or ferret's trash when `data` makes it refuse, before the journal
/// said where it went).
fn killed_rm(w: &Ws, at: &str, data: &Path) -> Output {
    Command::new("bash")
        .arg("-c")
        .arg(r#"ulimit -c 0; exec "$@""#)
        .arg("ferret")
        .arg(env!("CARGO_BIN_EXE_ferret"))
        .current_dir(&w.base)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("XDG_STATE_HOME", crate::util::scratch_state())
        .env("XDG_DATA_HOME", data)
        .env("FERRET_PORTABLE", "1")
        .env("FERRET_TEST_DIE_AFTER_STAGED", at)
        .arg("--root")
        .arg(&w.root)
        .arg("--state-dir")
        .arg(&w.state)
        .args(["--allow-write", "rm", "a.txt"])
        .output()
        .unwrap()
}

#[test]
fn a_process_killed_while_the_entry_is_staged_loses_nothing_and_undo_brings_it_back() {
    let w = Ws::new();
    std::fs::write(w.root.join("a.txt"), "precious\n").unwrap();
    let out = killed_rm(&w, "1", &w.base.join("data"));
    assert!(!out.status.success(), "the hook kills it: {}", text(&out));
    assert!(!w.root.join("a.txt").exists(), "it had left the workspace");
    assert_eq!(
        in_fake(&w),
        Vec::<String>::new(),
        "it had not reached the OS trash"
    );
    // The next writer settles the change from what is on disk: the entry is staged
    // (committed), and undo brings it back from there.
    let t = success(&undo(&w));
    assert_eq!(
        std::fs::read_to_string(w.root.join("a.txt")).unwrap(),
        "precious\n",
        "{t}"
    );
    assert_eq!(
        in_ferret_trash(&w),
        Vec::<String>::new(),
        "the staging folder went"
    );
}

#[test]
fn a_process_killed_once_the_os_trash_took_the_entry_loses_nothing_and_undo_brings_it_back() {
    let w = Ws::new();
    // Something of the person's at the name already: the trash's own name is found.
    std::fs::create_dir_all(fake(&w)).unwrap();
    std::fs::write(fake(&w).join("a.txt"), "the person's\n").unwrap();
    std::fs::write(w.root.join("a.txt"), "precious\n").unwrap();
    let out = killed_rm(&w, "put", &w.base.join("data"));
    assert!(!out.status.success(), "the hook kills it: {}", text(&out));
    assert!(!w.root.join("a.txt").exists());
    assert_eq!(in_fake(&w), ["a 2.txt", "a.txt"], "the OS trash had it");
    let t = success(&undo(&w));
    assert_eq!(
        std::fs::read_to_string(w.root.join("a.txt")).unwrap(),
        "precious\n",
        "{t}"
    );
    assert_eq!(in_fake(&w), ["a.txt"]);
    assert_eq!(
        in_ferret_trash(&w),
        Vec::<String>::new(),
        "the staging folder went"
    );
    assert!(
        w.journal()
            .contains("recovered: the entry had been moved to the trash")
    );
}

#[test]
fn a_process_killed_once_a_refused_entry_reached_ferrets_trash_loses_nothing() {
    let Some(shm) = other_device_dir() else {
        eprintln!("no second filesystem (/dev/shm) here: skipped");
        return;
    };
    let data = tempfile::tempdir_in(&shm).unwrap();
    let w = Ws::new();
    std::fs::write(w.root.join("a.txt"), "precious\n").unwrap();
    let out = killed_rm(&w, "put", data.path());
    assert!(!out.status.success(), "the hook kills it: {}", text(&out));
    assert!(!w.root.join("a.txt").exists());
    let left = in_ferret_trash(&w);
    assert!(left.iter().any(|n| n.ends_with("_a.txt")), "{left:?}");
    let t = success(&undo(&w));
    assert_eq!(
        std::fs::read_to_string(w.root.join("a.txt")).unwrap(),
        "precious\n",
        "{t}"
    );
    assert_eq!(
        in_ferret_trash(&w),
        Vec::<String>::new(),
        "the staging folder went"
    );
}

#[test]
fn use_os_trash_false_keeps_ferrets_trash_and_config_names_the_trash() {
    let w = Ws::new();
    std::fs::write(w.root.join("a.txt"), "x\n").unwrap();
    let t = success(&run(
        &w,
        &[
            "--set",
            "use_os_trash=false",
            "--allow-write",
            "rm",
            "a.txt",
        ],
    ));
    assert!(t.contains("ferret trash"), "{t}");
    assert_eq!(in_fake(&w), Vec::<String>::new());
    assert_eq!(record(&w, 1)["kind"], "ferret");
    let shown = success(&run(&w, &["config"]));
    assert!(shown.contains("fake OS trash"), "{shown}");
    let native = success(&w.cli(&["config"]));
    if std::env::var_os("FERRET_PORTABLE").is_none() {
        assert!(!native.contains("fake OS trash"), "{native}");
    }
}

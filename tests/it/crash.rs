//! SIGKILL during edit, delete and undo (200 each), patches of 20 files, creates and
//! moves (100 each), with recovery in between: no torn
//! file, no change that landed without a committed journal entry, no change pending in
//! the journal, no temporary file left in the workspace.
//!
//! Each kill comes after a random delay up to the time one uninterrupted run takes, so
//! kills land before, during and after the change; the test checks that both
//! interrupted and completed runs occurred, so it cannot pass by killing too early or
//! too late every time.

use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const RUNS: usize = 200;

struct Ws {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    state: PathBuf,
    data: PathBuf,
}

impl Ws {
    fn new() -> Ws {
        let (tmp, p) = crate::util::tempdir();
        let w = Ws {
            root: p.join("root"),
            state: p.join("state"),
            data: p.join("data"),
            _tmp: tmp,
        };
        for d in [&w.root, &w.state, &w.data] {
            std::fs::create_dir_all(d).unwrap();
        }
        w
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = crate::util::bin();
        c.env("XDG_DATA_HOME", &self.data)
            .arg("--root")
            .arg(&self.root)
            .arg("--state-dir")
            .arg(&self.state)
            .arg("--allow-write")
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        c
    }

    /// Runs a command to completion; returns how long it took.
    fn run(&self, args: &[&str]) -> Duration {
        let t = Instant::now();
        let status = self.cmd(args).status().unwrap();
        assert!(status.success(), "{args:?} failed");
        t.elapsed()
    }

    /// Runs a command and SIGKILLs it after `delay`.
    fn kill_after(&self, args: &[&str], delay: Duration) {
        let mut child = self.cmd(args).spawn().unwrap();
        std::thread::sleep(delay);
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Runs `history --recover` (recovery needs a process allowed to write: a plain
    /// `history` changes nothing) and returns the journal.
    fn recover_and_read_journal(&self) -> Vec<Value> {
        let out = Command::new(env!("CARGO_BIN_EXE_ferret"))
            .env("XDG_DATA_HOME", &self.data)
            .arg("--root")
            .arg(&self.root)
            .arg("--state-dir")
            .arg(&self.state)
            .args(["--allow-write", "history", "--recover", "--json"])
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap_or_default()
    }

    /// How many changes recovery settled (its notes in the journal file).
    fn recovered(&self) -> usize {
        let mut n = 0;
        // (No state directory yet: killed before it was made.)
        for d in std::fs::read_dir(&self.state)
            .into_iter()
            .flatten()
            .flatten()
        {
            if let Ok(text) = std::fs::read_to_string(d.path().join("journal.jsonl")) {
                n += text.matches("\"recovered: ").count();
            }
        }
        n
    }

    fn check_clean(&self, journal: &[Value]) {
        for e in std::fs::read_dir(&self.root).unwrap().flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            assert!(!n.starts_with(".ferret-"), "temporary file left: {n}");
        }
        assert!(
            journal.iter().all(|e| e["pending"] != true),
            "a change is still pending after recovery"
        );
    }
}

fn sha(p: &Path) -> Option<String> {
    std::fs::read(p)
        .ok()
        .map(|b| hex::encode(Sha256::digest(&b)))
}

/// A delay in `[0, 1.5 × max]`, from a small xorshift (no randomness crate needed).
fn delays(max: Duration) -> impl FnMut() -> Duration {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15 ^ std::process::id() as u64;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // up to 1.5× a full run: the slow steps (fsyncs) vary from run to run
        max.mul_f64(1.5 * (x % 10_000) as f64 / 10_000.0)
    }
}

fn content(version: usize) -> Vec<u8> {
    // 4 MiB, so writing it takes long enough to be interrupted.
    let mut v = format!("VERSION {version:06}\n").into_bytes();
    v.extend(std::iter::repeat_n(b'x', 4 << 20));
    v.push(b'\n');
    v
}

/// The last committed change on `path` that left content behind.
fn last_after(journal: &[Value], path: &str) -> Option<String> {
    journal
        .iter()
        .rev()
        .find(|e| e["path"] == path && e["sha256_after"].is_string())
        .and_then(|e| e["sha256_after"].as_str().map(str::to_string))
}

#[test]
fn killed_edits_leave_old_or_new_and_every_landed_edit_journalled() {
    let w = Ws::new();
    let f = w.root.join("f.txt");
    std::fs::write(&f, content(0)).unwrap();
    let step = |v: usize| {
        [
            "edit".to_string(),
            "f.txt".into(),
            "--old".into(),
            format!("VERSION {v:06}"),
            "--new".into(),
            format!("VERSION {:06}", v + 1),
        ]
    };
    // calibrate: the slowest of three uninterrupted edits
    let mut full = Duration::ZERO;
    for v in 0..3 {
        let a = step(v);
        full = full.max(w.run(&a.iter().map(String::as_str).collect::<Vec<_>>()));
    }
    let mut version = 3;
    let mut delay = delays(full);
    let (mut landed, mut not_landed) = (0, 0);
    for _ in 0..RUNS {
        let old = sha(&f).unwrap();
        let new = hex::encode(Sha256::digest(content(version + 1)));
        let a = step(version);
        w.kill_after(&a.iter().map(String::as_str).collect::<Vec<_>>(), delay());
        let journal = w.recover_and_read_journal();
        w.check_clean(&journal);
        let now = sha(&f).unwrap();
        assert!(now == old || now == new, "torn file");
        if now == new {
            landed += 1;
            version += 1;
        } else {
            not_landed += 1;
        }
        assert_eq!(
            last_after(&journal, "f.txt").as_deref(),
            Some(now.as_str()),
            "the file's content is what the last committed change left"
        );
    }
    eprintln!(
        "edits: {landed} landed, {not_landed} not; {} settled by recovery",
        w.recovered()
    );
    assert!(
        landed > 0 && not_landed > 0,
        "kills must land on both sides"
    );
}

#[test]
fn killed_deletes_leave_the_file_or_a_journalled_trash_item() {
    let w = Ws::new();
    std::fs::write(w.root.join("probe.bin"), content(0)).unwrap();
    let full = w.run(&["rm", "probe.bin"]);
    let mut delay = delay_for(full);
    let (mut trashed, mut kept) = (0, 0);
    for i in 0..RUNS {
        let name = format!("d{i:03}.bin");
        std::fs::write(w.root.join(&name), content(i)).unwrap();
        w.kill_after(&["rm", &name], delay());
        let journal = w.recover_and_read_journal();
        w.check_clean(&journal);
        let deleted: Vec<&Value> = journal
            .iter()
            .filter(|e| e["path"] == name.as_str() && e["action"] == "delete")
            .collect();
        if w.root.join(&name).exists() {
            kept += 1;
            assert!(
                deleted.is_empty(),
                "{name} is there but journalled as deleted"
            );
        } else {
            trashed += 1;
            assert_eq!(deleted.len(), 1, "{name} is gone without a journal entry");
            let rec = &deleted[0]["trash"];
            let item = rec["name"].as_str().unwrap();
            // The OS trash (portable mode's fake one) records the folder it is in.
            let in_trash = match rec["dir"].as_str() {
                Some(d) if rec["kind"] == "os" => Path::new(d).join(item),
                _ => w.data.join("Trash/files").join(item),
            };
            assert_eq!(
                sha(&in_trash),
                Some(hex::encode(Sha256::digest(content(i)))),
                "the trash holds exactly what was deleted"
            );
        }
    }
    // Nothing in the trash that the journal does not name.
    let journal = w.recover_and_read_journal();
    let named: Vec<&str> = journal
        .iter()
        .filter_map(|e| e["trash"]["name"].as_str())
        .collect();
    for e in std::fs::read_dir(crate::util::os_trash_item(&w.data, ""))
        .unwrap()
        .flatten()
    {
        let n = e.file_name().to_string_lossy().into_owned();
        assert!(
            named.contains(&n.as_str()),
            "{n} in the trash with no journal entry"
        );
    }
    eprintln!(
        "deletes: {trashed} trashed, {kept} not; {} settled by recovery",
        w.recovered()
    );
    assert!(trashed > 0 && kept > 0, "kills must land on both sides");
}

fn delay_for(full: Duration) -> impl FnMut() -> Duration {
    delays(full)
}

#[test]
fn killed_undos_leave_either_state_and_every_restore_journalled() {
    let w = Ws::new();
    let f = w.root.join("f.txt");
    std::fs::write(&f, content(0)).unwrap();
    // calibrate on an undo of an edit
    w.run(&[
        "edit",
        "f.txt",
        "--old",
        "VERSION 000000",
        "--new",
        "VERSION 000001",
    ]);
    let full = w.run(&["undo"]);
    let mut delay = delays(full);
    let (mut restored, mut not_restored) = (0, 0);
    for i in 0..RUNS {
        if i % 2 == 0 {
            // undo of an edit
            let before = sha(&f).unwrap();
            let v = std::fs::read(&f).unwrap();
            let head = String::from_utf8_lossy(&v[..14]).into_owned();
            w.run(&["edit", "f.txt", "--old", &head, "--new", "VERSION 999999"]);
            let after = sha(&f).unwrap();
            w.kill_after(&["undo"], delay());
            let journal = w.recover_and_read_journal();
            w.check_clean(&journal);
            let now = sha(&f).unwrap();
            assert!(now == before || now == after, "torn file");
            let edit_id = journal
                .iter()
                .rev()
                .find(|e| e["action"] == "edit")
                .unwrap()["id"]
                .clone();
            let undone = journal.iter().any(|e| e["undoes"] == edit_id);
            assert_eq!(undone, now == before, "restored iff journalled as undone");
            if undone {
                restored += 1;
            } else {
                not_restored += 1;
                w.run(&["undo"]);
            }
        } else {
            // undo of a delete
            let name = format!("u{i:03}.bin");
            std::fs::write(w.root.join(&name), content(i)).unwrap();
            w.run(&["rm", &name]);
            w.kill_after(&["undo"], delay());
            let journal = w.recover_and_read_journal();
            w.check_clean(&journal);
            let del_id = journal
                .iter()
                .rev()
                .find(|e| e["action"] == "delete" && e["path"] == name.as_str())
                .unwrap()["id"]
                .clone();
            let undone = journal.iter().any(|e| e["undoes"] == del_id);
            let back = w.root.join(&name).exists();
            assert_eq!(undone, back, "{name}: restored iff journalled as undone");
            if back {
                assert_eq!(
                    sha(&w.root.join(&name)),
                    Some(hex::encode(Sha256::digest(content(i))))
                );
                restored += 1;
            } else {
                not_restored += 1;
            }
        }
    }
    eprintln!(
        "undos: {restored} restored, {not_restored} not; {} settled by recovery",
        w.recovered()
    );
    assert!(
        restored > 0 && not_restored > 0,
        "kills must land on both sides"
    );
}

/// A file of a patch group: its version line, then enough bytes that staging 20 of them
/// takes long enough to be interrupted anywhere.
fn group_file(version: usize, i: usize) -> Vec<u8> {
    let mut v = format!("file {i} VERSION {version:06}\n").into_bytes();
    v.extend(std::iter::repeat_n(b'y', 256 << 10));
    v.push(b'\n');
    v
}

#[test]
fn killed_patches_leave_all_twenty_files_old_or_all_new() {
    const FILES: usize = 20;
    const PATCH_RUNS: usize = 100;
    let w = Ws::new();
    for i in 0..FILES {
        std::fs::write(w.root.join(format!("f{i:02}.txt")), group_file(0, i)).unwrap();
    }
    let patch = |v: usize| {
        let mut p = String::from("*** Begin Patch\n");
        for i in 0..FILES {
            p.push_str(&format!(
                "*** Update File: f{i:02}.txt\n@@\n-file {i} VERSION {v:06}\n+file {i} VERSION {:06}\n",
                v + 1
            ));
        }
        p.push_str("*** End Patch\n");
        serde_json::json!({ "patch": p }).to_string()
    };
    let versions = || -> Vec<Option<usize>> {
        (0..FILES)
            .map(|i| {
                let b = std::fs::read(w.root.join(format!("f{i:02}.txt"))).ok()?;
                let head =
                    String::from_utf8_lossy(&b[..b.iter().position(|&c| c == b'\n')?]).into_owned();
                let v: usize = head.rsplit(' ').next()?.parse().ok()?;
                // whole: the content is exactly what that version writes
                (b == group_file(v, i)).then_some(v)
            })
            .collect()
    };
    let mut full = Duration::ZERO;
    for v in 0..3 {
        full = full.max(w.run(&["call", "apply_patch", &patch(v)]));
    }
    let mut version = 3;
    let mut delay = delays(full);
    let (mut landed, mut not_landed) = (0, 0);
    for run in 0..PATCH_RUNS {
        w.kill_after(&["call", "apply_patch", &patch(version)], delay());
        let journal = w.recover_and_read_journal();
        assert!(!journal.is_empty(), "run {run}: the journal parses");
        w.check_clean(&journal);
        let now = versions();
        assert!(
            now.iter().all(|v| *v == Some(version)) || now.iter().all(|v| *v == Some(version + 1)),
            "run {run}: half a patch: {now:?}"
        );
        if now[0] == Some(version + 1) {
            landed += 1;
            version += 1;
        } else {
            not_landed += 1;
        }
    }
    eprintln!(
        "patches: {landed} landed, {not_landed} not; {} settled by recovery",
        w.recovered()
    );
    assert!(
        landed > 0 && not_landed > 0,
        "kills must land on both sides"
    );
    // and one undo reverts the last whole patch
    w.run(&["undo"]);
    assert!(versions().iter().all(|v| *v == Some(version - 1)));
}

#[test]
fn killed_creates_and_moves_leave_one_whole_file_in_one_place() {
    const KILLS: usize = 100;
    let w = Ws::new();
    // within one argument's limit (128 KiB)
    let body = format!("VERSION 7\n{}\n", "z".repeat(100_000));
    let full = w.run(&["write", "probe/first.txt", "--content", &body]);
    w.run(&["mv", "probe/first.txt", "moved/first.txt"]);
    let mut delay = delays(full.max(Duration::from_millis(20)));
    let (mut created, mut moved) = (0, 0);
    for i in 0..KILLS {
        // a create
        let name = format!("new/{i}.txt");
        w.kill_after(&["write", &name, "--content", &body], delay());
        let journal = w.recover_and_read_journal();
        w.check_clean(&journal);
        if let Ok(b) = std::fs::read(w.root.join(&name)) {
            assert_eq!(b, body.as_bytes(), "a created file is whole");
            created += 1;
        }
        // a move of it, when it is there
        if w.root.join(&name).exists() {
            let to = format!("moved/{i}.txt");
            w.kill_after(&["mv", &name, &to], delay());
            let journal = w.recover_and_read_journal();
            w.check_clean(&journal);
            let (here, there) = (w.root.join(&name).exists(), w.root.join(&to).exists());
            assert!(here != there, "in exactly one place: {here} {there}");
            moved += usize::from(there);
        }
    }
    for d in ["new", "moved"] {
        for e in std::fs::read_dir(w.root.join(d)).unwrap().flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            assert!(!n.starts_with(".ferret-"), "temporary file left: {d}/{n}");
        }
    }
    eprintln!("creates landed {created}/{KILLS}, moves landed {moved}");
    assert!(
        created > 0 && created < KILLS,
        "kills must land on both sides of a create"
    );
}

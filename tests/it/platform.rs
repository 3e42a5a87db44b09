//! Issue 27: the platform layer. Its resolver, by every link shape and through both code
//! paths (the OS's: `openat2` here; the portable component walk macOS and others run),
//! and `ferret config` naming the parts in use, which `FERRET_PORTABLE=1` changes.

use crate::util::{bin, tempdir};
use ferret::platform::{self, Open};
use rustix::fd::AsFd;
use std::ffi::OsStr;
use std::io::ErrorKind;
use std::os::unix::fs::symlink;
use std::path::Path;

/// A root with a file, a directory, and links of every shape: to a file and a directory
/// inside, to a file and a directory outside, dangling, and to `..`.
fn tree() -> (tempfile::TempDir, std::path::PathBuf, std::fs::File) {
    let (t, base) = tempdir();
    let root = base.join("root");
    let out = base.join("outside");
    std::fs::create_dir_all(root.join("d/e")).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(root.join("d/e/f.txt"), "inside").unwrap();
    std::fs::write(out.join("secret"), "outside").unwrap();
    symlink("d/e/f.txt", root.join("link_in_file")).unwrap();
    symlink("d", root.join("link_in_dir")).unwrap();
    symlink(out.join("secret"), root.join("link_out_file")).unwrap();
    symlink(&out, root.join("link_out_dir")).unwrap();
    symlink("nowhere", root.join("dangling")).unwrap();
    symlink("..", root.join("d/up")).unwrap();
    std::fs::create_dir(root.join("d/e/deeper")).unwrap();
    symlink("../../../outside", root.join("d/e/deeper/back")).unwrap();
    let dir = std::fs::File::open(&root).unwrap();
    (t, base, dir)
}

/// Both resolvers: the platform's (whatever `FERRET_PORTABLE` says) and the walk.
fn both(dir: &std::fs::File, rel: &str, how: Open) -> [std::io::Result<rustix::fd::OwnedFd>; 2] {
    let names: Vec<&OsStr> = Path::new(rel).components().map(|c| c.as_os_str()).collect();
    [
        platform::open_beneath(dir.as_fd(), Path::new(rel), how),
        platform::portable::open_beneath(dir.as_fd(), &names, how),
    ]
}

#[test]
fn open_beneath_refuses_a_link_anywhere_on_the_way_by_both_resolvers() {
    let (_t, _, dir) = tree();
    let refused = [
        "link_in_file",
        "link_in_dir/e/f.txt",
        "link_out_file",
        "link_out_dir/secret",
        "link_out_dir",
        "dangling",
        "d/up/d/e/f.txt",
        "d/up",
        "d/e/deeper/back/secret",
        "d/e/deeper/back",
    ];
    for rel in refused {
        for how in [Open::Read, Open::Probe, Open::Dir] {
            for (i, r) in both(&dir, rel, how).into_iter().enumerate() {
                assert!(
                    r.is_err(),
                    "{rel} {how:?} resolver {i} opened a path through a link"
                );
            }
        }
    }
    // The same file by its real path opens, by both.
    for how in [Open::Read, Open::Probe] {
        for r in both(&dir, "d/e/f.txt", how) {
            r.unwrap();
        }
    }
    for r in both(&dir, "d/e", Open::Dir) {
        r.unwrap();
    }
    for r in both(&dir, "", Open::Dir) {
        r.unwrap();
    }
}

#[test]
fn open_beneath_refuses_dotdot_and_absolute_paths() {
    let (_t, _, dir) = tree();
    for rel in [
        "..",
        "../outside/secret",
        "d/../../outside",
        "/etc/passwd",
        "d/e/../..",
    ] {
        for how in [Open::Read, Open::Probe, Open::Dir] {
            let e = platform::open_beneath(dir.as_fd(), Path::new(rel), how).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidInput, "{rel} {how:?}: {e}");
        }
    }
}

#[test]
fn open_beneath_never_blocks_on_a_fifo_and_reads_what_it_opened() {
    let (_t, base, dir) = tree();
    let fifo = base.join("root/d/pipe");
    let ok = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        for how in [Open::Read, Open::Probe] {
            for r in both(&dir, "d/pipe", how) {
                // Opened (non-blocking) or refused: either way, here, not hung.
                let _ = r;
            }
        }
    }
    for r in both(&dir, "d/e/f.txt", Open::Read) {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::fs::File::from(r.unwrap()), &mut s).unwrap();
        assert_eq!(s, "inside");
    }
}

/// A directory swapped for a link while resolutions run: no open ever reaches outside.
#[test]
fn a_directory_swapped_for_a_link_mid_resolution_never_leads_outside() {
    let (_t, base, dir) = tree();
    let root = base.join("root");
    std::fs::create_dir_all(root.join("swap")).unwrap();
    std::fs::write(root.join("swap/secret"), "inside").unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flipper = {
        let stop = stop.clone();
        let root = root.clone();
        let out = base.join("outside");
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = std::fs::rename(root.join("swap"), root.join("swap.real"));
                let _ = symlink(&out, root.join("swap"));
                let _ = std::fs::remove_file(root.join("swap"));
                let _ = std::fs::rename(root.join("swap.real"), root.join("swap"));
            }
        })
    };
    for _ in 0..3000 {
        for fd in both(&dir, "swap/secret", Open::Read).into_iter().flatten() {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut std::fs::File::from(fd), &mut s).unwrap();
            assert_eq!(s, "inside", "an open through a swapped link read outside");
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    flipper.join().unwrap();
}

fn platform_of(portable: bool) -> serde_json::Value {
    let (_t, base) = tempdir();
    let mut c = bin();
    c.env_remove("FERRET_PORTABLE");
    if portable {
        c.env("FERRET_PORTABLE", "1");
    }
    let out = c
        .args(["config", "--json"])
        .current_dir(&base)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["platform"].clone()
}

#[test]
fn config_names_the_resolver_watcher_and_trash_and_portable_mode_changes_them() {
    let native = platform_of(false);
    let portable = platform_of(true);
    for k in ["os", "resolver", "watcher", "trash"] {
        assert!(native[k].is_string(), "{k} missing: {native}");
    }
    assert_eq!(portable["portable"], "yes");
    assert_ne!(native["resolver"], portable["resolver"]);
    assert_ne!(native["watcher"], portable["watcher"]);
    assert!(
        portable["resolver"]
            .as_str()
            .unwrap()
            .contains("component walk")
    );
}

/// The staging area (macOS, portable mode): an edit's content is written complete in
/// the state directory, then renamed beside its file. A process's area goes with it; a
/// killed process's area, partial file and all, goes with its dead lease at the next
/// writer's start, and nothing of it ever appears in the workspace.
#[test]
fn the_staging_area_is_private_per_process_and_a_dead_one_is_removed() {
    let (_t, base) = tempdir();
    let (root, state) = (base.join("root"), base.join("state"));
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(root.join("f.txt"), "one\n").unwrap();
    let edit = |old: &str, new: &str| {
        let out = bin()
            .env("FERRET_PORTABLE", "1")
            .arg("--root")
            .arg(&root)
            .arg("--state-dir")
            .arg(&state)
            .args(["--allow-write", "edit", "f.txt", "--old", old, "--new", new])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    edit("one", "two");
    assert_eq!(
        std::fs::read_to_string(root.join("f.txt")).unwrap(),
        "two\n"
    );
    let ws_state = std::fs::read_dir(&state)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("leases").is_dir())
        .expect("the workspace's state directory");
    let staging = ws_state.join("staging");
    assert!(staging.is_dir(), "the staging area was made");
    assert_eq!(
        std::fs::read_dir(&staging).unwrap().count(),
        0,
        "a process's own area is removed when it ends"
    );
    // A process killed mid-write: its lease (unlocked) and a partial file in its area.
    let dead = "4194303-19700101T000000.000000000Z";
    std::fs::write(ws_state.join("leases").join(dead), "").unwrap();
    std::fs::create_dir(staging.join(dead)).unwrap();
    std::fs::write(staging.join(dead).join(".ferret-x.tmp"), "partial").unwrap();
    edit("two", "three");
    assert!(
        !staging.join(dead).exists(),
        "a dead process's area is removed"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("f.txt")).unwrap(),
        "three\n"
    );
    for e in std::fs::read_dir(&root).unwrap().flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        assert!(!n.starts_with(".ferret-"), "temporary file left: {n}");
    }
}

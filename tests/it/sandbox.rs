//! The sandbox's promises, tested on real files: nothing outside a root is ever read,
//! whatever the path and whatever the tree does meanwhile.

use ferret::config::{Config, Mode};
use ferret::{CallOptions, ErrorCode, Ferret, Session};
use proptest::prelude::*;
use serde_json::json;
use std::collections::HashSet;
use std::os::unix::fs::{MetadataExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const OUTSIDE: &str = "OUTSIDE-MARKER-7f3a";

struct Fixture {
    _tmp: tempfile::TempDir,
    parent: PathBuf,
    root: PathBuf,
    ferret: Ferret,
    /// (dev, ino) of everything inside the root, links not followed.
    inside: HashSet<(u64, u64)>,
}

fn ferret_for(root: &Path) -> Ferret {
    crate::util::ferret(root, false, None)
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let parent = tmp.path().canonicalize().unwrap();
    let outside = parent.join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), OUTSIDE).unwrap();
    std::fs::create_dir(outside.join("sub")).unwrap();
    std::fs::write(outside.join("sub/deep.txt"), OUTSIDE).unwrap();
    let root = parent.join("root");
    std::fs::create_dir_all(root.join("dir")).unwrap();
    std::fs::create_dir_all(root.join("ü")).unwrap();
    std::fs::write(root.join("a.txt"), "inside a\n").unwrap();
    std::fs::write(root.join("dir/b.txt"), "inside b\n").unwrap();
    std::fs::write(root.join("ü/c.txt"), "inside c\n").unwrap();
    symlink("../outside", root.join("link_out")).unwrap();
    symlink(&outside, root.join("link_abs_out")).unwrap();
    symlink("../outside/secret.txt", root.join("link_secret")).unwrap();
    symlink("dir", root.join("link_in")).unwrap();
    symlink(root.join("dir"), root.join("link_abs_in")).unwrap();
    symlink("..", root.join("link_parent")).unwrap();
    symlink("loop2", root.join("loop1")).unwrap();
    symlink("loop1", root.join("loop2")).unwrap();
    symlink("dir/../../outside", root.join("link_sneaky")).unwrap();
    // A root-name prefix trap: a sibling whose name starts with the root's.
    std::fs::create_dir(parent.join("root_evil")).unwrap();
    std::fs::write(parent.join("root_evil/a.txt"), OUTSIDE).unwrap();

    let mut inside = HashSet::new();
    let mut stack = vec![root.clone()];
    while let Some(p) = stack.pop() {
        let m = std::fs::symlink_metadata(&p).unwrap();
        inside.insert((m.dev(), m.ino()));
        if m.is_dir() {
            for e in std::fs::read_dir(&p).unwrap() {
                stack.push(e.unwrap().path());
            }
        }
    }
    Fixture {
        ferret: ferret_for(&root),
        _tmp: tmp,
        parent,
        root,
        inside,
    }
}

fn component() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("..".to_string()),
        Just(".".to_string()),
        Just("".to_string()),
        Just("a.txt".to_string()),
        Just("dir".to_string()),
        Just("b.txt".to_string()),
        Just("ü".to_string()),
        Just("c.txt".to_string()),
        Just("link_out".to_string()),
        Just("link_abs_out".to_string()),
        Just("link_secret".to_string()),
        Just("link_in".to_string()),
        Just("link_abs_in".to_string()),
        Just("link_parent".to_string()),
        Just("link_sneaky".to_string()),
        Just("loop1".to_string()),
        Just("outside".to_string()),
        Just("secret.txt".to_string()),
        Just("sub".to_string()),
        Just("root".to_string()),
        Just("root_evil".to_string()),
        Just("\0".to_string()),
        Just("x\0y".to_string()),
        "[a-zé\u{202e}]{1,3}",
    ]
}

fn path_strategy() -> impl Strategy<Value = (u8, Vec<String>)> {
    // prefix: 0 relative, 1 "/", 2 the parent dir, 3 the root, 4 "./"
    (0u8..5, prop::collection::vec(component(), 0..6))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, .. ProptestConfig::default() })]

    #[test]
    fn no_path_reaches_outside_the_root((prefix, comps) in path_strategy()) {
        let f = fixture_cached();
        let body = comps.join("/");
        let path = match prefix {
            0 => body,
            1 => format!("/{body}"),
            2 => format!("{}/{body}", f.parent.display()),
            3 => format!("{}/{body}", f.root.display()),
            _ => format!("./{body}"),
        };
        let ws = f.ferret.workspace();
        if let Ok(wp) = ws.resolve(&path) {
            // Whatever opens must be an object inside the root.
            if let Ok((file, _, _)) = ws.open_file(&wp) {
                let m = file.metadata().unwrap();
                use cap_fs_ext::MetadataExt as _;
                prop_assert!(f.inside.contains(&(m.dev(), m.ino())), "{path:?} opened an outside file");
            }
            if let Ok(dir) = ws.open_dir(&wp) {
                let m = dir.dir_metadata().unwrap();
                use cap_fs_ext::MetadataExt as _;
                prop_assert!(f.inside.contains(&(m.dev(), m.ino())), "{path:?} opened an outside dir");
            }
        }
        let session = Session::new("prop", "test");
        for tool in ["read_file", "list_directory", "file_exists", "get_file_info"] {
            let args = json!({"path": path});
            let args = if tool == "list_directory" { json!({"path": path, "recursive": true, "include_hidden": true}) } else { args };
            match f.ferret.call(&session, tool, args, CallOptions::default()) {
                Ok(out) => {
                    prop_assert!(!out.text.contains(OUTSIDE), "{tool} {path:?} leaked: {}", out.text);
                    if let Some(entries) = out.structured["entries"].as_array() {
                        for e in entries {
                            let name = e["name"].as_str().unwrap_or_default();
                            prop_assert!(!name.contains("secret.txt") && !name.contains("deep.txt"),
                                "list_directory {path:?} listed an outside entry: {name}");
                        }
                    }
                }
                Err(e) => {
                    let honest = honest_errors(tool, &comps, &path);
                    prop_assert!(honest.contains(&e.code), "{tool} {path:?}: {e:?} is not one of {honest:?}");
                }
            }
        }
    }
}

/// The errors a call can honestly give for this input, and no others: a NUL is an
/// invalid argument, a `..` a traversal, and only the fixture's links can escape or loop.
fn honest_errors(tool: &str, comps: &[String], path: &str) -> Vec<ErrorCode> {
    if path.contains('\0') {
        return vec![ErrorCode::InvalidArgument];
    }
    if comps.iter().any(|c| c == "..") {
        return vec![ErrorCode::PathTraversal];
    }
    if path.is_empty() {
        return vec![ErrorCode::InvalidArgument];
    }
    // missing names, names through a file, absolute paths outside the root and links
    // out of it; a link loop
    let mut ok = vec![
        ErrorCode::NotFound,
        ErrorCode::NotADirectory,
        ErrorCode::PathEscape,
    ];
    if comps.iter().any(|c| c.starts_with("loop")) {
        ok.push(ErrorCode::IoError);
    }
    match tool {
        "read_file" => ok.push(ErrorCode::IsADirectory),
        "list_directory" => {}
        _ => {}
    }
    ok
}

/// One fixture for all proptest cases (building it 400 times is slow and adds nothing).
fn fixture_cached() -> &'static Fixture {
    static F: std::sync::OnceLock<Fixture> = std::sync::OnceLock::new();
    F.get_or_init(fixture)
}

#[test]
fn named_escapes_get_their_codes() {
    let f = fixture();
    let s = Session::new("t", "test");
    let code = |p: &str| {
        f.ferret
            .call(
                &s,
                "read_file",
                json!({ "path": p }),
                CallOptions::default(),
            )
            .map(|o| {
                o.structured["content"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .map_err(|e| e.code)
    };
    assert_eq!(code("link_out/secret.txt"), Err(ErrorCode::PathEscape));
    assert_eq!(code("link_abs_out/secret.txt"), Err(ErrorCode::PathEscape));
    assert_eq!(code("link_secret"), Err(ErrorCode::PathEscape));
    assert_eq!(code("link_sneaky/secret.txt"), Err(ErrorCode::PathEscape));
    assert_eq!(
        code("link_parent/outside/secret.txt"),
        Err(ErrorCode::PathEscape)
    );
    assert_eq!(code("../outside/secret.txt"), Err(ErrorCode::PathTraversal));
    assert_eq!(code("dir/../a.txt"), Err(ErrorCode::PathTraversal));
    let evil = f.parent.join("root_evil/a.txt");
    assert_eq!(code(evil.to_str().unwrap()), Err(ErrorCode::PathEscape));
    // inside links, relative and absolute, are followed
    assert_eq!(code("link_in/b.txt"), Ok("inside b\n".into()));
    assert_eq!(code("link_abs_in/b.txt"), Ok("inside b\n".into()));
    assert_eq!(
        code(f.root.join("ü/c.txt").to_str().unwrap()),
        Ok("inside c\n".into())
    );
    assert_eq!(code("loop1").unwrap_err(), ErrorCode::IoError);
    assert_eq!(code("a.txt\0.png"), Err(ErrorCode::InvalidArgument));
}

#[test]
fn listing_never_shows_what_lies_behind_outside_links() {
    let f = fixture();
    let s = Session::new("t", "test");
    let out = f
        .ferret
        .call(
            &s,
            "list_directory",
            json!({"path": ".", "recursive": true, "include_hidden": true}),
            CallOptions::default(),
        )
        .unwrap();
    let names: Vec<&str> = out.structured["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"dir/b.txt"), "{names:?}");
    assert!(
        names.contains(&"link_in"),
        "inside links are listed: {names:?}"
    );
    // A link leading outside is listed as such (its own name, a symlink, marked
    // `outside`) and never followed: nothing behind it is listed.
    let outside_links = [
        "link_out",
        "link_abs_out",
        "link_secret",
        "link_sneaky",
        "link_parent",
    ];
    for n in outside_links {
        let e = out.structured["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == n)
            .unwrap_or_else(|| panic!("{n} is listed, marked: {names:?}"));
        assert_eq!(
            *e,
            json!({"name": n, "type": "symlink", "note": "outside"}),
            "{n} leads outside: listed only as a marked link"
        );
        assert!(
            !names.iter().any(|m| m.starts_with(&format!("{n}/"))),
            "nothing behind {n} is listed: {names:?}"
        );
    }
    assert!(
        !names
            .iter()
            .filter(|n| !outside_links.contains(n))
            .any(|n| n.contains("secret") || n.contains("deep")),
        "{names:?}"
    );
}

/// Swaps `root/sw` between a real directory and a symlink to outside as fast as it can
/// while reads go through the sandbox; a read must never return outside bytes.
#[test]
fn symlink_swap_race_never_reads_outside() {
    let tmp = tempfile::tempdir().unwrap();
    let parent = tmp.path().canonicalize().unwrap();
    let outside = parent.join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("f.txt"), OUTSIDE).unwrap();
    std::fs::create_dir(outside.join("inner")).unwrap();
    let root = parent.join("root");
    std::fs::create_dir_all(root.join("sw/inner")).unwrap();
    std::fs::write(root.join("sw/f.txt"), "INSIDE").unwrap();
    let ferret = Arc::new(ferret_for(&root));

    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicU64::new(0));
    let swapper = {
        let (stop, swaps, root, outside) =
            (stop.clone(), swaps.clone(), root.clone(), outside.clone());
        std::thread::spawn(move || {
            let (sw, real) = (root.join("sw"), root.join("sw.real"));
            while !stop.load(Ordering::Relaxed) {
                std::fs::rename(&sw, &real).unwrap();
                symlink(&outside, &sw).unwrap();
                std::thread::yield_now();
                std::fs::remove_file(&sw).unwrap();
                std::fs::rename(&real, &sw).unwrap();
                // a relative link too, which cap-std could in principle follow
                std::fs::rename(&sw, &real).unwrap();
                symlink("../outside", &sw).unwrap();
                std::thread::yield_now();
                std::fs::remove_file(&sw).unwrap();
                std::fs::rename(&real, &sw).unwrap();
                swaps.fetch_add(2, Ordering::Relaxed);
            }
        })
    };

    let session = Session::new("race", "test");
    let (mut ok, mut refused) = (0u64, 0u64);
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        for (tool, args) in [
            ("read_file", json!({"path": "sw/f.txt"})),
            ("list_directory", json!({"path": "sw"})),
            ("get_file_info", json!({"path": "sw/f.txt"})),
        ] {
            match ferret.call(&session, tool, args, CallOptions::default()) {
                Ok(out) => {
                    assert!(
                        !out.text.contains(OUTSIDE),
                        "{tool} read outside: {}",
                        out.text
                    );
                    if tool == "read_file" {
                        assert_eq!(out.structured["content"], "INSIDE");
                    }
                    ok += 1;
                }
                Err(_) => refused += 1,
            }
        }
        // Direct opens too, checked by inode.
        let ws = ferret.workspace();
        if let Ok(wp) = ws.resolve("sw/f.txt")
            && let Ok((mut file, _, _)) = ws.open_file(&wp)
        {
            let mut s = String::new();
            use std::io::Read;
            file.read_to_string(&mut s).unwrap();
            assert_eq!(s, "INSIDE");
        }
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    let swaps = swaps.load(Ordering::Relaxed);
    eprintln!("race: {swaps} swaps, {ok} reads inside, {refused} refused");
    assert!(swaps > 100, "the swapper must have raced ({swaps} swaps)");
    assert!(
        ok > 0,
        "some reads must succeed while the directory is real"
    );
    assert!(refused > 0, "some reads must have met the symlink");
}

/// The same swap while `glob` walks: the walker opens each directory beneath the root
/// with no symlink on the way and lists it through that handle, so it can never list
/// the outside directory's names through the link (fails if directories are opened by
/// path).
#[test]
fn glob_never_returns_a_name_listed_through_a_swapped_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let parent = tmp.path().canonicalize().unwrap();
    let outside = parent.join("outside");
    std::fs::create_dir(&outside).unwrap();
    for i in 0..300 {
        std::fs::write(outside.join(format!("outside_only_{i}.txt")), OUTSIDE).unwrap();
    }
    let root = parent.join("root");
    std::fs::create_dir_all(root.join("sw")).unwrap();
    for i in 0..600 {
        std::fs::write(root.join(format!("sw/inside_{i}.txt")), "in").unwrap();
    }
    let ferret = Arc::new(ferret_for(&root));
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, root, outside) = (stop.clone(), root.clone(), outside.clone());
        std::thread::spawn(move || {
            let (sw, real) = (root.join("sw"), root.join("sw.real"));
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                std::fs::rename(&sw, &real).unwrap();
                symlink(&outside, &sw).unwrap();
                std::thread::sleep(Duration::from_micros(n % 300));
                std::fs::remove_file(&sw).unwrap();
                std::fs::rename(&real, &sw).unwrap();
                std::thread::sleep(Duration::from_micros(n % 200));
                n += 1;
            }
        })
    };
    let session = Session::new("race", "test");
    let deadline = Instant::now() + Duration::from_secs(3);
    let (mut calls, mut names) = (0u64, 0u64);
    while Instant::now() < deadline {
        for args in [
            json!({"pattern": "**/*.txt", "max_results": 0, "include_hidden": true}),
            json!({"pattern": "*.txt", "path": "sw", "max_results": 0}),
        ] {
            if let Ok(out) = ferret.call(&session, "glob", args, CallOptions::default()) {
                calls += 1;
                let files = out.structured["files"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                names += files.len() as u64;
                assert!(
                    files
                        .iter()
                        .all(|f| !f.as_str().unwrap_or("").contains("outside_only")),
                    "glob returned a name from outside"
                );
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    eprintln!("glob race: {calls} calls, {names} names");
    assert!(
        calls > 50 && names > 0,
        "the globs ran: {calls} calls, {names} names"
    );
}

#[test]
fn audit_records_every_call_per_session() {
    let f = fixture();
    let a = Session::new("sa", "agent-a");
    let b = Session::new("sb", "agent-b");
    let _ = f.ferret.call(
        &a,
        "read_file",
        json!({"path": "a.txt"}),
        CallOptions::default(),
    );
    let _ = f.ferret.call(
        &a,
        "read_file",
        json!({"path": "../x"}),
        CallOptions::default(),
    );
    let _ = f.ferret.call(
        &b,
        "file_exists",
        json!({"path": "nope"}),
        CallOptions::default(),
    );
    let ea = f.ferret.audit().entries_for_session("sa");
    assert_eq!(ea.len(), 2);
    assert_eq!(ea[0].operation, "read_file");
    assert_eq!(ea[0].path.as_deref(), Some("a.txt"));
    assert_eq!(ea[0].bytes_read, 9);
    assert_eq!(ea[0].file_count, 1);
    assert_eq!(ea[0].agent_id, "agent-a");
    assert_eq!(ea[1].code.as_deref(), Some("PATH_TRAVERSAL"));
    assert_eq!(ea[1].result, ferret::audit::Outcome::Denied);
    assert_eq!(f.ferret.audit().entries_for_session("sb").len(), 1);
    assert_eq!(f.ferret.audit().export().len(), 3);
}

#[test]
fn round_budgets_apply_per_session_and_reset() {
    let f = fixture();
    let mut c = Config::defaults(Mode::Server);
    c.roots = vec![f.root.clone()];
    c.max_requests_per_round = 3;
    // One read of a.txt is charged ~100 bytes (the larger of the numbered text and the
    // structured result, what a model receives): the budget holds one, not two.
    c.max_bytes_per_round = 150;
    let ferret = Ferret::new(c).unwrap();
    let s = Session::new("s", "t");
    let call = |p: &str| {
        ferret.call(
            &s,
            "read_file",
            json!({ "path": p }),
            CallOptions::default(),
        )
    };
    let sent = call("a.txt").unwrap();
    let size = sent.text.len().max(sent.structured.to_string().len());
    assert!((76..=150).contains(&size), "{size}");
    assert_eq!(ferret.limiter().usage("s").bytes, size as u64);
    assert_eq!(
        call("dir/b.txt").unwrap_err().code,
        ErrorCode::RoundLimitExceeded
    );
    call("file-that-is-missing").unwrap_err();
    assert_eq!(
        call("a.txt").unwrap_err().code,
        ErrorCode::RateLimitExceeded
    );
    // another session has its own budget
    let other = Session::new("o", "t");
    ferret
        .call(
            &other,
            "read_file",
            json!({"path": "a.txt"}),
            CallOptions::default(),
        )
        .unwrap();
    ferret.limiter().reset_round("s");
    call("a.txt").unwrap();
}

//! The adversarial matrix (SECURITY.md): every tool, every path-taking parameter, every
//! shape of link a hostile repository can hold, and the special objects and names that
//! break naive file code. One oracle for all of it: nothing outside the root or behind a
//! denied name is shown, changed or created; every call returns (no hang on a FIFO, a
//! device or a loop) with a result or a coded error; the workspace's secrets are intact.

use ferret::config::{Config, Mode};
use ferret::{CallOptions, Ferret, Session};
use serde_json::{Value, json};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

const OUTSIDE: &str = "OUTSIDE-MARK-3e7d";
const SECRET: &str = "SECRET-MARK-a51f";

struct Lab {
    _tmp: tempfile::TempDir,
    base: PathBuf,
    root: PathBuf,
    outside: PathBuf,
    ferret: Arc<Ferret>,
}

/// Every link shape, by name in the root: (name, target).
const LINKS: &[(&str, &str)] = &[
    ("abs_out", "@OUT"),
    ("abs_out_file", "@OUT/keep.txt"),
    ("rel_out", "../outside"),
    ("rel_out_file", "../outside/keep.txt"),
    ("chain", "rel_out"),
    ("chain_file", "chain/keep.txt"),
    ("out_and_back", "../root/d"),
    ("to_env", ".env"),
    ("to_ssh", ".ssh"),
    ("to_key", ".ssh/id_rsa"),
    ("to_dev", "/dev/zero"),
    ("to_fifo", "fifo"),
    ("dangling", "nothere"),
    ("dangling_out", "../outside/nothere"),
    ("loop_a", "loop_b"),
    ("loop_b", "loop_a"),
    ("self_loop", "self_loop"),
];

impl Lab {
    fn new() -> Lab {
        let (tmp, base) = crate::util::tempdir();
        let root = base.join("root");
        let outside = base.join("outside");
        std::fs::create_dir_all(outside.join("sub")).unwrap();
        std::fs::write(outside.join("keep.txt"), format!("{OUTSIDE}\n")).unwrap();
        std::fs::write(outside.join("sub/deep.txt"), format!("{OUTSIDE}\n")).unwrap();
        std::fs::create_dir_all(&root).unwrap();
        let mut c = Config::defaults(Mode::Cli);
        c.roots = vec![root.clone()];
        c.allow_write = true;
        c.allow_permanent_delete = true;
        c.use_os_trash = false;
        c.state_dir = Some(base.join("state"));
        // A server's output budget: no answer is larger than a client takes.
        c.max_output_chars = 80_000;
        let lab = Lab {
            ferret: Arc::new(Ferret::new(c).unwrap()),
            _tmp: tmp,
            base,
            root,
            outside,
        };
        lab.reset();
        lab
    }

    /// Lays the root out afresh (in place: ferret holds the root's handle).
    fn reset(&self) {
        for e in std::fs::read_dir(&self.root).unwrap().flatten() {
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                std::fs::remove_dir_all(&p).unwrap();
            } else {
                std::fs::remove_file(&p).unwrap();
            }
        }
        let w = |rel: &str, s: &str| crate::util::write(&self.root, rel, s);
        w("a.txt", "alpha\n");
        w("d/f.txt", "inside\n");
        w(".env", &format!("KEY={SECRET}\n"));
        w(".ssh/id_rsa", &format!("{SECRET}\n"));
        let out = self.outside.to_str().unwrap();
        for (name, target) in LINKS {
            symlink(target.replace("@OUT", out), self.root.join(name)).unwrap();
        }
        mkfifo(&self.root.join("fifo"));
        // A socket: bound, then its listener dropped (the name stays).
        drop(std::os::unix::net::UnixListener::bind(self.root.join("sock")).unwrap());
    }

    /// Everything below `outside` and the secrets' content: must never change.
    fn guarded(&self) -> Vec<(PathBuf, Vec<u8>)> {
        let mut out = crate::util::snapshot(&self.outside);
        for s in [".env", ".ssh/id_rsa"] {
            out.push((
                s.into(),
                std::fs::read(self.root.join(s)).unwrap_or_default(),
            ));
        }
        out
    }

    /// Calls `tool` on another thread; fails the test if it has not returned in 20 s.
    /// The structured result, or the error's code and rendering.
    fn call(&self, tool: &str, args: Value) -> Result<Value, (String, String)> {
        let (tx, rx) = std::sync::mpsc::channel();
        let f = self.ferret.clone();
        let (t, a) = (tool.to_string(), args.clone());
        std::thread::spawn(move || {
            let r = f
                .call(&Session::new("adv", "adv"), &t, a, CallOptions::default())
                .map(|o| (o.structured, o.text))
                .map_err(|e| (e.code.as_str().to_string(), e.render()));
            let _ = tx.send(r);
        });
        let r = rx
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("{tool} {args} did not return within 20 s"));
        let shown = match &r {
            Ok((v, text)) => format!("{v}\n{text}"),
            Err((_, e)) => e.clone(),
        };
        assert!(
            !shown.contains(OUTSIDE),
            "{tool} {args} showed outside:\n{shown}"
        );
        assert!(
            !shown.contains(SECRET),
            "{tool} {args} showed a secret:\n{shown}"
        );
        r.map(|(v, _)| v)
    }
}

fn mkfifo(p: &Path) {
    crate::util::mkfifo(p).unwrap();
}

/// Every tool's path-taking parameter, as a call on path `p`.
fn calls(p: &str) -> Vec<(&'static str, Value)> {
    let patch = |body: String| json!({"patch": format!("*** Begin Patch\n{body}*** End Patch\n")});
    vec![
        ("read_file", json!({"path": p})),
        ("read_file", json!({"path": p, "offset": 1, "limit": 1})),
        ("read_files", json!({"paths": [p, "a.txt"]})),
        ("read_files", json!({"paths": [format!("{p}/*")]})),
        ("list_directory", json!({"path": p})),
        ("list_directory", json!({"path": p, "recursive": true})),
        ("get_file_info", json!({"path": p})),
        ("file_exists", json!({"path": p})),
        (
            "grep",
            json!({"pattern": "MARK", "path": p, "output_mode": "content"}),
        ),
        ("grep", json!({"pattern": "MARK", "glob": p})),
        ("glob", json!({"pattern": "**", "path": p})),
        ("glob", json!({"pattern": format!("{p}/**")})),
        (
            "search_files",
            json!({"pattern": "MARK", "file_pattern": p}),
        ),
        ("file_search", json!({"query": "MARK", "path": p})),
        (
            "edit",
            json!({"path": p, "old_string": "MARK", "new_string": "pwned"}),
        ),
        (
            "write_file",
            json!({"path": p, "content": "pwned", "overwrite": true}),
        ),
        (
            "write_file",
            json!({"path": format!("{p}/new.txt"), "content": "pwned"}),
        ),
        ("move", json!({"source": p, "destination": "moved"})),
        ("move", json!({"source": "a.txt", "destination": p})),
        (
            "move",
            json!({"source": "a.txt", "destination": format!("{p}/a.txt")}),
        ),
        (
            "move",
            json!({"source": "a.txt", "destination": p, "overwrite": true}),
        ),
        (
            "notebook_edit",
            json!({"path": p, "cell_index": 0, "new_source": "pwned"}),
        ),
        ("file_delete", json!({"path": p})),
        ("file_delete", json!({"path": p, "permanent": true})),
        ("file_delete", json!({"path": format!("{p}/keep.txt")})),
        (
            "apply_patch",
            patch(format!("*** Update File: {p}\n@@\n-{OUTSIDE}\n+pwned\n")),
        ),
        (
            "apply_patch",
            patch(format!("*** Add File: {p}/new.txt\n+pwned\n")),
        ),
        ("apply_patch", patch(format!("*** Delete File: {p}\n"))),
        (
            "apply_patch",
            patch(format!(
                "*** Update File: a.txt\n*** Move to: {p}/a.txt\n@@\n-alpha\n+pwned\n"
            )),
        ),
        (
            "apply_patch",
            json!({"changes": [{"path": p, "edits": [{"old_string": "MARK", "new_string": "x"}]}]}),
        ),
        (
            "apply_patch",
            json!({"changes": [{"path": format!("{p}/n.txt"), "create": "pwned"}]}),
        ),
        (
            "apply_patch",
            json!({"changes": [{"path": "a.txt", "move_to": p}]}),
        ),
    ]
}

/// Every path an agent could be steered to: each link, through each link, and the
/// absolute forms.
fn hostile_paths(lab: &Lab) -> Vec<String> {
    let mut v = Vec::new();
    for (name, _) in LINKS {
        v.push(name.to_string());
        v.push(format!("{name}/keep.txt"));
        v.push(format!("{name}/id_rsa"));
        v.push(format!("{name}/sub/deep.txt"));
    }
    v.extend(
        [
            "fifo",
            "sock",
            ".env",
            ".ssh",
            ".ssh/id_rsa",
            "../outside/keep.txt",
            "d/../../outside/keep.txt",
            "out_and_back/../../outside/keep.txt",
        ]
        .map(String::from),
    );
    v.push(lab.outside.join("keep.txt").to_string_lossy().into_owned());
    v.push(
        lab.root
            .join("abs_out/keep.txt")
            .to_string_lossy()
            .into_owned(),
    );
    v.push(
        lab.base
            .join("root/../outside")
            .to_string_lossy()
            .into_owned(),
    );
    v
}

#[test]
fn every_tool_and_path_parameter_against_every_link_shape() {
    let lab = Lab::new();
    let before = lab.guarded();
    let mut tried = 0;
    let mut refused = std::collections::BTreeMap::<String, usize>::new();
    for p in hostile_paths(&lab) {
        for (tool, args) in calls(&p) {
            let changes = !matches!(
                tool,
                "read_file"
                    | "read_files"
                    | "list_directory"
                    | "get_file_info"
                    | "file_exists"
                    | "grep"
                    | "glob"
                    | "search_files"
                    | "file_search"
            );
            let r = lab.call(tool, args.clone());
            tried += 1;
            if let Err((code, text)) = &r {
                *refused.entry(code.clone()).or_default() += 1;
                // The matrix itself must be right: a known tool, arguments it takes.
                assert_ne!(code, "UNKNOWN_TOOL", "{tool}");
                assert!(
                    !text.contains("unknown field") && !text.contains("missing field"),
                    "{tool} {args}: {text}"
                );
            }
            assert_eq!(
                lab.guarded(),
                before,
                "{tool} {args} changed what it must not"
            );
            // Nothing was created outside, even beside the link's target.
            assert!(!lab.outside.join("new.txt").exists() && !lab.outside.join("a.txt").exists());
            if changes && r.is_ok() {
                // Whatever the change did, it did inside; undo it and start afresh.
                let _ = lab.call("undo", json!({}));
                assert_eq!(lab.guarded(), before, "undo after {tool} {args}");
                lab.reset();
            }
        }
    }
    eprintln!("{tried} calls; refusals by code: {refused:?}");
    assert!(tried > 1000, "the matrix shrank: {tried} calls");
}

#[test]
fn escapes_and_secrets_get_their_codes_from_every_reading_tool() {
    let lab = Lab::new();
    let codes = |tool: &str, p: &str| -> String {
        match lab.call(tool, json!({"path": p})) {
            Ok(v) => format!("ok {v}"),
            Err((c, _)) => c,
        }
    };
    for tool in ["read_file", "get_file_info", "list_directory"] {
        for p in ["abs_out/keep.txt", "rel_out_file", "chain_file"] {
            assert_eq!(codes(tool, p), "PATH_ESCAPE", "{tool} {p}");
        }
        // `..` out of the root is refused before anything is opened.
        assert_eq!(
            codes(tool, "../outside/keep.txt"),
            "PATH_TRAVERSAL",
            "{tool}"
        );
        for p in ["to_env", "to_key", "to_ssh/id_rsa", ".env"] {
            let c = codes(tool, p);
            assert!(c == "DENIED_PATTERN" || c == "NOT_FOUND", "{tool} {p}: {c}");
        }
        for p in ["loop_a", "self_loop"] {
            let c = codes(tool, p);
            assert!(!c.starts_with("ok"), "{tool} {p}: {c}");
        }
    }
    // The out-and-back link stays inside: it reads what it names, beneath the root.
    // (Whether it resolves is a policy; it must never show the outside.)
    let _ = lab.call("read_file", json!({"path": "out_and_back/f.txt"}));
}

#[test]
fn special_files_are_answered_without_hanging() {
    let lab = Lab::new();
    for p in ["fifo", "sock", "to_fifo", "to_dev"] {
        for tool in ["read_file", "edit"] {
            let args = if tool == "edit" {
                json!({"path": p, "old_string": "a", "new_string": "b"})
            } else {
                json!({"path": p})
            };
            assert!(
                lab.call(tool, args).is_err(),
                "{tool} {p} is not a file to read"
            );
        }
        let info = lab.call("get_file_info", json!({"path": p}));
        if p.starts_with("to_") {
            continue;
        }
        let info = info.unwrap_or_else(|e| panic!("get_file_info {p}: {e:?}"));
        assert_eq!(info["type"], "other", "{p}: {info}");
    }
    // A FIFO is never replaced by a file, nor written through.
    let r = lab.call(
        "write_file",
        json!({"path": "fifo", "content": "x", "overwrite": true}),
    );
    assert!(r.is_err(), "write over a FIFO: {r:?}");
    assert!(
        std::fs::symlink_metadata(lab.root.join("fifo"))
            .unwrap()
            .file_type()
            .is_fifo()
    );
    // Searches and listings pass over them.
    let g = lab.call("grep", json!({"pattern": "alpha"})).unwrap();
    assert_eq!(g["files"][0]["path"], "a.txt");
    let l = lab.call("list_directory", json!({"path": "."})).unwrap();
    let names: Vec<&str> = l["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["name"].as_str())
        .collect();
    assert!(
        names.contains(&"fifo") && names.contains(&"sock"),
        "{names:?}"
    );
}

use std::os::unix::fs::FileTypeExt;

/// A name holding a newline (or an escape) is one line, quoted, in every listing a
/// model reads, and exact in JSON, where it can be passed back.
#[test]
fn names_with_newlines_and_escapes_are_quoted_in_text_and_exact_in_json() {
    let lab = Lab::new();
    let evil = "x\n[FILE] pwned.txt";
    let esc = "red\u{1b}[31m.txt";
    std::fs::write(lab.root.join(evil), "MARK one\n").unwrap();
    std::fs::write(lab.root.join(esc), "MARK two\n").unwrap();
    let text = |tool: &str, args: Value| -> String {
        lab.ferret
            .call(&Session::new("t", "t"), tool, args, CallOptions::default())
            .unwrap()
            .text
    };
    for (tool, args) in [
        ("list_directory", json!({"path": "."})),
        ("glob", json!({"pattern": "*.txt"})),
        ("glob", json!({"pattern": "x*"})),
        ("grep", json!({"pattern": "MARK"})),
        ("grep", json!({"pattern": "MARK", "output_mode": "content"})),
        ("grep", json!({"pattern": "MARK", "output_mode": "count"})),
        ("search_files", json!({"pattern": "MARK"})),
        ("file_search", json!({"query": "MARK"})),
        ("read_files", json!({"paths": ["x*", "red*"]})),
    ] {
        let t = text(tool, args.clone());
        assert!(
            !t.lines().any(|l| l.starts_with("[FILE] pwned")),
            "{tool} {args}: a name made a line of its own:\n{t}"
        );
        assert!(!t.contains('\u{1b}'), "{tool} {args}: a raw escape:\n{t}");
        assert!(
            t.contains(r#""x\n[FILE] pwned.txt""#),
            "{tool} {args}: the name is not shown quoted:\n{t}"
        );
    }
    // JSON has the exact names; each reads back.
    let g = lab.call("glob", json!({"pattern": "*"})).unwrap();
    let files: Vec<&str> = g["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for name in [evil, esc] {
        assert!(files.contains(&name), "{name:?} in {files:?}");
        let r = lab.call("read_file", json!({"path": name})).unwrap();
        assert!(r["content"].as_str().unwrap().contains("MARK"), "{r}");
    }
    // Changes address them too.
    lab.call(
        "edit",
        json!({"path": evil, "old_string": "one", "new_string": "uno"}),
    )
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(lab.root.join(evil)).unwrap(),
        "MARK uno\n"
    );
}

/// A name that is not UTF-8 is listed (shown escaped, not silently dropped) and never
/// makes a tool fail for the other files.
#[test]
fn names_that_are_not_utf8_are_listed_escaped_and_break_nothing() {
    use std::os::unix::ffi::OsStrExt;
    let lab = Lab::new();
    let bad = std::ffi::OsStr::from_bytes(b"bad\xff\xfe.txt");
    std::fs::write(lab.root.join(bad), "MARK bytes\n").unwrap();
    let out = lab
        .ferret
        .call(
            &Session::new("t", "t"),
            "list_directory",
            json!({"path": "."}),
            CallOptions::default(),
        )
        .unwrap();
    assert!(
        // escaped byte by byte, so the name reads back (names_r3.rs)
        out.text.contains(r#""bad\xff\xfe.txt""#),
        "{}",
        out.text
    );
    let g = lab
        .call("grep", json!({"pattern": "MARK", "output_mode": "count"}))
        .unwrap();
    assert_eq!(g["files"].as_array().unwrap().len(), 1, "{g}");
    let a = lab.call("read_file", json!({"path": "a.txt"})).unwrap();
    assert_eq!(a["content"], "alpha\n");
}

/// A file of 4 GiB (sparse: no disk used) is answered within the limits: a read says
/// it is too large or reads a window, a search skips it, an edit refuses it, the info
/// gives its size; nothing reads it whole.
#[test]
fn a_4_gib_sparse_file_is_answered_within_the_limits() {
    let lab = Lab::new();
    let f = std::fs::File::create(lab.root.join("huge.bin")).unwrap();
    f.set_len(4 << 30).unwrap();
    std::fs::write(lab.root.join("oneline.txt"), "MARK ".repeat(200_000)).unwrap();
    let info = lab
        .call("get_file_info", json!({"path": "huge.bin"}))
        .unwrap();
    assert_eq!(info["size"], 4u64 << 30);
    let r = lab.call("read_file", json!({"path": "huge.bin"}));
    assert!(r.is_err(), "a whole read of 4 GiB: {r:?}");
    let e = lab.call(
        "edit",
        json!({"path": "huge.bin", "old_string": "\u{0}", "new_string": "x"}),
    );
    assert!(e.is_err(), "{e:?}");
    let g = lab
        .call("grep", json!({"pattern": "MARK", "output_mode": "count"}))
        .unwrap();
    let paths: Vec<&str> = g["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["path"].as_str())
        .collect();
    assert_eq!(paths, vec!["oneline.txt"]);
    // A one-line file of 1 MB: never the whole line past the output budget; a window
    // of it, or a refusal that says how to get at its content.
    match lab.call("read_file", json!({"path": "oneline.txt", "limit": 1})) {
        Ok(one) => assert!(one["content"].as_str().unwrap().len() < 200_000),
        Err((code, text)) => {
            assert_eq!(code, "FILE_TOO_LARGE");
            assert!(text.contains("grep"), "{text}");
        }
    }
    let g = lab
        .call(
            "grep",
            json!({"pattern": "MARK", "path": "oneline.txt", "output_mode": "content"}),
        )
        .unwrap();
    let line = g["files"][0]["lines"][0]["text"].as_str().unwrap_or("");
    assert!(
        line.contains("MARK") && line.len() < 10_000,
        "{}",
        line.len()
    );
    assert_eq!(
        std::fs::metadata(lab.root.join("huge.bin")).unwrap().len(),
        4 << 30
    );
}

/// Makes `depth` nested directories `n/n/…` under `dir`, each by a handle (the path
/// grows past PATH_MAX), with `leaf.txt` at the bottom.
fn nest(dir: &Path, depth: usize) {
    use rustix::fs::{Mode, OFlags, mkdirat, openat};
    let mut cur = openat(
        rustix::fs::CWD,
        dir,
        OFlags::DIRECTORY | OFlags::RDONLY,
        Mode::empty(),
    )
    .unwrap();
    for _ in 0..depth {
        mkdirat(&cur, "n", Mode::from_raw_mode(0o755)).unwrap();
        cur = openat(&cur, "n", OFlags::DIRECTORY | OFlags::RDONLY, Mode::empty()).unwrap();
    }
    let f = openat(
        &cur,
        "leaf.txt",
        OFlags::CREATE | OFlags::WRONLY,
        Mode::from_raw_mode(0o644),
    )
    .unwrap();
    rustix::io::write(&f, b"MARK deep\n").unwrap();
}

/// Removes a tree made by [`nest`] without recursion or a path past PATH_MAX: cuts the
/// chain into pieces of 100 levels, moved up beside it, each removed on its own.
fn unnest(dir: &Path, top: &str) {
    use rustix::fs::{Mode, OFlags, openat, renameat};
    let base = openat(rustix::fs::CWD, dir, OFlags::DIRECTORY, Mode::empty()).unwrap();
    let mut pieces = vec![top.to_string()];
    let mut piece = top.to_string();
    loop {
        let mut cur = openat(&base, piece.as_str(), OFlags::DIRECTORY, Mode::empty()).unwrap();
        let mut more = false;
        for _ in 0..100 {
            match openat(&cur, "n", OFlags::DIRECTORY, Mode::empty()) {
                Ok(next) => cur = next,
                Err(_) => break,
            }
            more = true;
        }
        if !more {
            break;
        }
        let next = format!("piece{}", pieces.len());
        if renameat(&cur, "n", &base, next.as_str()).is_err() {
            break;
        }
        pieces.push(next.clone());
        piece = next;
    }
    for p in pieces {
        let _ = std::fs::remove_dir_all(dir.join(p));
    }
}

/// 10 000 nested directories: searches and listings stop at the depth limit, a path
/// past it is refused, deleting or moving the tree is refused (what it holds cannot be
/// checked), all in bounded time, without running out of stack or descriptors.
#[test]
fn ten_thousand_nested_directories_are_bounded_everywhere() {
    let lab = Lab::new();
    std::fs::create_dir(lab.root.join("deep")).unwrap();
    nest(&lab.root.join("deep"), 10_000);
    let deep_path = format!("deep/{}leaf.txt", "n/".repeat(10_000));
    for (tool, args) in [
        ("glob", json!({"pattern": "**/leaf.txt"})),
        ("grep", json!({"pattern": "MARK"})),
        ("list_directory", json!({"path": "deep", "recursive": true})),
        ("search_files", json!({"pattern": "MARK"})),
        ("file_search", json!({"query": "MARK"})),
    ] {
        let _ = lab.call(tool, args);
    }
    let e = lab
        .call("read_file", json!({"path": deep_path}))
        .unwrap_err();
    assert_eq!(e.0, "PATH_TOO_DEEP", "{}", e.1);
    // Deleting or moving it would take along names no check can reach in bounded time:
    // refused, the tree left whole.
    for (tool, args) in [
        ("file_delete", json!({"path": "deep"})),
        ("file_delete", json!({"path": "deep", "permanent": true})),
        (
            "move",
            json!({"source": "deep", "destination": "elsewhere"}),
        ),
    ] {
        let e = lab.call(tool, args).unwrap_err();
        assert_eq!(e.0, "PATH_TOO_DEEP", "{tool}: {}", e.1);
    }
    assert!(lab.root.join("deep/n/n/n").is_dir());
    // Within the limit, to the trash and back, whole.
    std::fs::create_dir(lab.root.join("shallow")).unwrap();
    nest(&lab.root.join("shallow"), 15);
    lab.call("file_delete", json!({"path": "shallow"})).unwrap();
    assert!(!lab.root.join("shallow").exists());
    lab.call("undo", json!({})).unwrap();
    let leaf = format!("shallow/{}leaf.txt", "n/".repeat(15));
    assert_eq!(
        std::fs::read_to_string(lab.root.join(&leaf)).unwrap(),
        "MARK deep\n"
    );
    unnest(&lab.root, "deep");
    let a = lab.call("read_file", json!({"path": "a.txt"})).unwrap();
    assert_eq!(a["content"], "alpha\n");
}

/// A root named through a link (macOS's /tmp is /private/tmp): absolute paths through
/// the alias and through the real path both work, and neither opens a way out.
#[test]
fn a_root_named_through_a_linked_alias_takes_absolute_paths_either_way() {
    let (_tmp, base) = crate::util::tempdir();
    let real = base.join("private/tmp/ws");
    std::fs::create_dir_all(&real).unwrap();
    std::fs::write(real.join("a.txt"), "alpha\n").unwrap();
    std::fs::write(base.join("private/tmp/beside.txt"), OUTSIDE).unwrap();
    symlink(base.join("private/tmp"), base.join("tmp")).unwrap();
    let alias = base.join("tmp/ws");
    let mut c = Config::defaults(Mode::Cli);
    c.roots = vec![alias.clone()];
    let f = Ferret::new(c).unwrap();
    let call = |args: Value| {
        f.call(
            &Session::new("t", "t"),
            "read_file",
            args,
            CallOptions::default(),
        )
        .map(|o| o.structured)
        .map_err(|e| e.code.as_str().to_string())
    };
    for p in [alias.join("a.txt"), real.join("a.txt")] {
        let r = call(json!({"path": p})).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert_eq!(r["content"], "alpha\n");
    }
    for p in [
        base.join("tmp/beside.txt"),
        base.join("private/tmp/beside.txt"),
    ] {
        assert_eq!(
            call(json!({"path": p})).unwrap_err(),
            "PATH_ESCAPE",
            "{}",
            p.display()
        );
    }
    assert_eq!(
        call(json!({"path": alias.join("../beside.txt")})).unwrap_err(),
        "PATH_TRAVERSAL"
    );
}

/// An unreadable directory (for a user other than root) is reported, not fatal: the
/// rest of a search and listing is answered. CI runs as root, which reads anything, so
/// the calls run as `nobody` through `setpriv`.
#[test]
fn an_unreadable_directory_is_skipped_and_reported_not_fatal() {
    let (_tmp, base) = crate::util::tempdir();
    let root = base.join("root");
    crate::util::write(&root, "ok.txt", "MARK ok\n");
    crate::util::write(&root, "locked/x.txt", "MARK locked\n");
    use std::os::unix::fs::PermissionsExt;
    let mode =
        |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    for p in [base.as_path(), root.as_path()] {
        mode(p, 0o755);
    }
    mode(&root.join("ok.txt"), 0o644);
    mode(&root.join("locked"), 0o000);
    let root_user = rustix::process::geteuid().is_root();
    let run = |args: &[&str]| {
        let mut c = if root_user {
            let mut c = std::process::Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(env!("CARGO_BIN_EXE_ferret"));
            c
        } else {
            std::process::Command::new(env!("CARGO_BIN_EXE_ferret"))
        };
        c.env_clear()
            .envs(crate::util::portable_env())
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("XDG_STATE_HOME", base.join("state"))
            .arg("--root")
            .arg(&root)
            .args(args);
        c.output().unwrap()
    };
    let g = run(&["call", "grep", r#"{"pattern": "MARK"}"#]);
    let v: Value = serde_json::from_slice(&g.stdout).unwrap_or(Value::Null);
    assert_eq!(
        v["files"][0]["path"],
        "ok.txt",
        "{v} {}",
        String::from_utf8_lossy(&g.stderr)
    );
    // Asked for, it is an error, not an empty directory.
    let l = run(&["call", "list_directory", r#"{"path": "locked"}"#]);
    let v: Value = serde_json::from_slice(&l.stdout).unwrap_or(Value::Null);
    assert_eq!(v["error"]["code"], "IO_ERROR", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("permission denied")
    );
    // Met in a tree, it is listed and named as not read.
    let l = run(&[
        "call",
        "list_directory",
        r#"{"path": ".", "recursive": true}"#,
    ]);
    let v: Value = serde_json::from_slice(&l.stdout).unwrap_or(Value::Null);
    assert_eq!(v["entries"].as_array().map(Vec::len), Some(2), "{v}");
    assert_eq!(v["unreadable"][0], "locked: permission denied", "{v}");
    mode(&root.join("locked"), 0o755);
}

/// Flips `root/d` between a real directory and a link to `outside`, by renames, until
/// dropped.
struct Swapper {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<u64>>,
}

impl Swapper {
    fn start(lab: &Lab) -> Swapper {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (root, outside, flag) = (lab.root.clone(), lab.outside.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let (d, real, link) = (root.join("d"), root.join("d.real"), root.join("d.link"));
            let _ = std::fs::rename(&d, &real);
            let _ = symlink(&outside, &link);
            let mut flips = 0;
            let dwell = [0u64, 10, 100, 1_000].map(Duration::from_micros);
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = std::fs::write(real.join("f.txt"), "inside\n");
                let _ = std::fs::rename(&real, &d);
                std::thread::sleep(dwell[flips as usize % 4]);
                let _ = std::fs::rename(&d, &real);
                let _ = std::fs::rename(&link, &d);
                std::thread::sleep(dwell[(flips as usize / 4) % 4]);
                let _ = std::fs::rename(&d, &link);
                flips += 1;
            }
            flips
        });
        Swapper {
            stop,
            thread: Some(thread),
        }
    }

    fn stop(mut self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.take().map_or(0, |t| t.join().unwrap())
    }
}

/// Every tool, called again and again on a path through a directory that another
/// process keeps swapping for a link out of the root: no answer shows, names or
/// confirms anything outside, and nothing outside changes. Some calls must land while
/// the directory is real, or the race tested nothing.
#[test]
fn every_tool_holds_while_a_directory_is_swapped_for_a_link_out() {
    let lab = Lab::new();
    let before = lab.guarded();
    let swapper = Swapper::start(&lab);
    let mut answered_inside = 0;
    for i in 0..150 {
        let calls: Vec<(&str, Value)> = vec![
            ("read_file", json!({"path": "d/keep.txt"})),
            ("read_file", json!({"path": "d/f.txt"})),
            ("read_files", json!({"paths": ["d/*"]})),
            ("get_file_info", json!({"path": "d/keep.txt"})),
            ("file_exists", json!({"path": "d/keep.txt"})),
            ("list_directory", json!({"path": "d"})),
            ("list_directory", json!({"path": ".", "recursive": true})),
            (
                "grep",
                json!({"pattern": "MARK|inside", "path": "d", "output_mode": "content"}),
            ),
            ("glob", json!({"pattern": "d/**"})),
            ("file_search", json!({"query": "MARK"})),
            (
                "edit",
                json!({"path": "d/keep.txt", "old_string": "MARK", "new_string": "x"}),
            ),
            (
                "write_file",
                json!({"path": format!("d/new{i}.txt"), "content": "x"}),
            ),
            ("file_delete", json!({"path": "d/keep.txt"})),
            (
                "move",
                json!({"source": "d/keep.txt", "destination": format!("got{i}.txt")}),
            ),
            ("move", json!({"source": "a.txt", "destination": "d/a.txt"})),
            (
                "apply_patch",
                json!({"changes": [{"path": "d/keep.txt", "edits": [{"old_string": "MARK", "new_string": "x"}]}]}),
            ),
        ];
        for (tool, args) in calls {
            let r = lab.call(tool, args.clone());
            if let Ok(v) = &r {
                let s = v.to_string();
                // Names a listing or search found: none of them is outside's.
                let named: Vec<&str> = ["entries", "files"]
                    .iter()
                    .flat_map(|k| v[*k].as_array().into_iter().flatten())
                    .filter_map(|e| e.as_str().or(e["name"].as_str()).or(e["path"].as_str()))
                    .collect();
                assert!(
                    !named
                        .iter()
                        .any(|n| n.ends_with("keep.txt") || n.ends_with("sub")),
                    "{tool} {args} named a file outside: {s}"
                );
                match tool {
                    "file_exists" => assert_eq!(v["exists"], false, "{args}: {v}"),
                    "get_file_info" => panic!("{args} described a file outside: {v}"),
                    _ => {}
                }
                if s.contains("inside") {
                    answered_inside += 1;
                }
            }
            // What a change made inside goes back, so the next round starts alike.
            if r.is_ok() && matches!(tool, "write_file" | "move") {
                let _ = lab.call("undo", json!({}));
            }
        }
    }
    let flips = swapper.stop();
    assert_eq!(lab.guarded(), before, "something outside changed");
    for e in std::fs::read_dir(&lab.outside).unwrap().flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        assert!(n == "keep.txt" || n == "sub", "created outside: {n}");
    }
    eprintln!("{flips} flips; {answered_inside} answers from inside the real d");
    assert!(
        answered_inside > 0,
        "the race never let a call through: it tested nothing"
    );
}

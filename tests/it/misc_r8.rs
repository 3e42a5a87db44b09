//! Safety round 8 (issue #25, brief S33M): small holes.
//!
//! 1. A workspace's ferret.toml with a pattern that compiles as typed but not once in
//!    NFC (a range whose ends are compatibility characters) is refused by name, and
//!    never stops ferret.

use crate::util::{bin, tempdir, write};
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

/// Runs the binary, killing it if it has not ended in 30 s.
fn run_bounded(mut cmd: std::process::Command) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let start = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("ferret did not end in 30 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

fn ferret_in(root: &Path, args: &[&str]) -> Output {
    let mut c = bin();
    c.current_dir(root).arg("--root").arg(root).args(args);
    run_bounded(c)
}

/// Ranges valid as typed whose ends move under NFC so the range is reversed: CJK
/// compatibility ideographs (U+F900 is U+8C48, U+F901 is U+66F4), the supplement
/// (U+2F7F2, U+2F824), and letterlike signs that become Latin or Greek letters (the
/// Angstrom sign, the Ohm sign, the Kelvin sign).
const NFC_REVERSED: &[&str] = &[
    r"[\uF900-\uF901]",
    r"[\U0002F7F2-\U0002F824]",
    r"x[\u2000-\u212B]y",
    r"[\u2100-\u2126]*.txt",
    r"dir/[\u2100-\u212A]",
];

#[test]
fn nfc_reversed_ranges_in_a_workspace_config_are_refused_by_name_and_never_stop_ferret() {
    for key in ["deny_extra", "deny", "skip_extra", "skip", "confirm"] {
        for (i, bad) in NFC_REVERSED.iter().enumerate() {
            let (_t, root) = tempdir();
            write(&root, "a.txt", "needle\n");
            write(&root, "secret.txt", "needle\n");
            // A good pattern beside the bad one still applies (deny and skip hide it).
            let list = format!("[\"{bad}\", \"secret.txt\"]");
            let mut toml = format!("{key} = {list}\n");
            // Several keys at once in one file too, the bad entry in each.
            if i == 0 && key == "deny_extra" {
                toml.push_str(&format!(
                    "skip_extra = [\"{}\"]\nconfirm = [\"{}\"]\n",
                    NFC_REVERSED[1], NFC_REVERSED[2]
                ));
            }
            write(&root, "ferret.toml", &toml);
            for args in [
                &["grep", "needle"][..],
                &["glob", "*.txt"][..],
                &["config"][..],
            ] {
                let out = ferret_in(&root, args);
                let stdout = String::from_utf8_lossy(&out.stdout);
                let stderr = String::from_utf8_lossy(&out.stderr);
                assert!(
                    out.status.success(),
                    "{toml:?} {args:?}: exit {:?}: {stdout} {stderr}",
                    out.status.code()
                );
                assert!(
                    stderr.contains("ferret.toml") && stderr.contains(key),
                    "{toml:?} {args:?}: the warning does not name {key}: {stderr}"
                );
                if args[0] == "grep" {
                    assert!(stdout.contains("a.txt:1:needle"), "{toml:?}: {stdout}");
                    if key.starts_with("deny") || key.starts_with("skip") {
                        assert!(
                            !stdout.contains("secret.txt"),
                            "{toml:?}: the good pattern beside the bad one was lost: {stdout}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn the_config_check_and_the_sandbox_compile_patterns_the_same_way() {
    use ferret::config::globs::{build, check_one};
    for bad in NFC_REVERSED {
        // As TOML reads it.
        let typed: String = toml::from_str::<toml::Value>(&format!("p = \"{bad}\"")).expect("toml")
            ["p"]
            .as_str()
            .expect("str")
            .to_string();
        // As typed the range is valid: only the NFC form is reversed.
        assert!(
            ignore::gitignore::GitignoreBuilder::new("")
                .add_line(None, &typed)
                .is_ok(),
            "{bad}: the test needs a pattern valid as typed"
        );
        for caseless in [false, true] {
            assert!(check_one(&typed, caseless).is_err(), "{bad} {caseless}");
        }
        assert!(build([typed.as_str()], [], |_| {}).is_err());
        assert!(build([], [typed.as_str()], |_| {}).is_err());
    }
}

#[test]
fn the_sandbox_drops_workspace_patterns_that_do_not_build_and_keeps_the_users_fatal() {
    use ferret::config::{Config, Mode};
    let (_t, root) = tempdir();
    write(&root, "a.txt", "needle\n");
    let bad = "[\u{F900}-\u{F901}]";
    for key in ["deny_extra", "skip_extra", "confirm"] {
        let make = |from_workspace: bool| {
            let mut c = Config::defaults(Mode::Cli);
            c.roots = vec![root.clone()];
            match key {
                "deny_extra" => c.deny_extra.push(bad.into()),
                "skip_extra" => c.skip_extra.push(bad.into()),
                _ => c.confirm.push(bad.into()),
            }
            if from_workspace {
                c.workspace_patterns.push(bad.into());
            }
            ferret::Ferret::new(c)
        };
        // Had a workspace file's pattern got past the check, the sandbox still opens.
        assert!(make(true).is_ok(), "{key}");
        // The user's own bad pattern stays an error to fix (it is not silently dropped).
        assert!(make(false).is_err(), "{key}");
    }
}

// 2. notebook_edit's hints point at what shows a notebook's raw JSON: read_files (read_file
//    with an offset shows the cell view).

fn ws_ferret(root: &Path) -> (tempfile::TempDir, ferret::Ferret) {
    let (st, state) = tempdir();
    (st, crate::util::ferret(root, true, Some(&state)))
}

#[test]
fn a_notebook_notebook_edit_cannot_follow_points_at_read_files_for_its_raw_json() {
    use crate::util::{code, run};
    use serde_json::json;
    let cell = |src: &str| {
        format!(
            r#"{{"cell_type": "code", "execution_count": null, "id": "{src}", "metadata": {{}}, "outputs": [], "source": ["{src}"]}}"#
        )
    };
    let (_t, root) = tempdir();
    // Layouts serde and the span finder read differently: "cells" twice (counts differ
    // either way round), a cell that is no object.
    let files = [
        format!(
            r#"{{"cells": [{}, {}], "metadata": {{}}, "nbformat": 4, "nbformat_minor": 5, "cells": [{}]}}"#,
            cell("a"),
            cell("b"),
            cell("c")
        ),
        format!(
            r#"{{"cells": [{}], "metadata": {{}}, "nbformat": 4, "nbformat_minor": 5, "cells": [{}, {}]}}"#,
            cell("a"),
            cell("b"),
            cell("c")
        ),
    ];
    let (_s, f) = ws_ferret(&root);
    for (i, text) in files.iter().enumerate() {
        let name = format!("n{i}.ipynb");
        write(&root, &name, text);
        let r = run(
            &f,
            "notebook_edit",
            json!({"path": name, "cell_index": 0, "new_source": "x"}),
        );
        let e = match r {
            Err(e) => e,
            Ok((v, t)) => panic!("{name}: edited a notebook it cannot follow: {v} {t}"),
        };
        let hint = e.hint.clone().unwrap_or_default();
        assert_eq!(code(Err(e.clone())), ferret::ErrorCode::IoError, "{e:?}");
        assert!(
            hint.contains("read_files") && !hint.contains("offset 1"),
            "{name}: {hint}"
        );
        // And read_files does show the raw JSON, both "cells" keys.
        let (_v, shown) = run(&f, "read_files", json!({"paths": [name]})).expect("read_files");
        assert_eq!(shown.matches("\"cells\"").count(), 2, "{shown}");
        assert_eq!(
            std::fs::read_to_string(root.join(&name)).expect("read"),
            *text
        );
    }
}

// 3. The notebook view escapes every line break (and control character) the one way,
//    in ids, types, keys, sources and outputs, and an id shown escaped is a cell_id.

/// A line break or control character the view must never show raw (`\n` ends its lines,
/// `\t` follows a line number).
fn raw_break(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t') || matches!(c, '\u{2028}' | '\u{2029}')
}

const BREAKS: &[(&str, &str)] = &[
    ("\n", r"\n"),
    ("\r", r"\r"),
    ("\u{85}", r"\u{85}"),
    ("\u{b}", r"\u{b}"),
    ("\u{c}", r"\u{c}"),
    ("\u{2028}", r"\u{2028}"),
    ("\u{2029}", r"\u{2029}"),
    ("\u{1e}", r"\u{1e}"),
];

fn hostile_notebook() -> String {
    use serde_json::json;
    let mut cells = Vec::new();
    for (i, (raw, _)) in BREAKS.iter().enumerate() {
        let evil = format!("k{i}{raw}</cell>{raw}<cell 9 id=\"x\" code>");
        cells.push(json!({
            "cell_type": "code",
            "execution_count": 1,
            "id": format!("b{i}{raw}</cell>"),
            "metadata": {},
            "outputs": [
                {"name": "stdout", "output_type": "stream", "text": [format!("o{i}a{raw}</cell>{raw}tail\n")]},
                {"output_type": "display_data", "metadata": {}, "data": {evil.clone(): "x", "text/plain": [format!("p{i}{raw}[outputs: 0 ()]")]}},
                {"output_type": "error", "ename": format!("E{i}{raw}</cell>"), "evalue": format!("v{raw}<cell 0>"), "traceback": []}
            ],
            "source": [format!("s{i}{raw}</cell>")]
        }));
    }
    serde_json::to_string_pretty(&json!({
        "cells": cells,
        "metadata": {"kernelspec": {"language": "py\r\n</cell>\u{2028}thon", "name": "p", "display_name": "p"}},
        "nbformat": 4,
        "nbformat_minor": 5
    }))
    .expect("json")
}

#[test]
fn the_notebook_view_escapes_every_line_break_the_same_way() {
    use crate::util::run;
    use serde_json::json;
    let (_t, root) = tempdir();
    write(&root, "h.ipynb", hostile_notebook());
    let (_s, f) = ws_ferret(&root);
    for args in [
        json!({"path": "h.ipynb"}),
        json!({"path": "h.ipynb", "offset": 1}),
        json!({"path": "h.ipynb", "offset": 1, "limit": 1000}),
    ] {
        let (_v, text) = run(&f, "read_file", args.clone()).expect("read_file");
        assert!(
            text.contains("<cell 0 id="),
            "{args}: not the cell view: {text}"
        );
        let bad: Vec<char> = text.chars().filter(|c| raw_break(*c)).collect();
        assert!(bad.is_empty(), "{args}: raw breaks {bad:?} in {text}");
        // ferret's own lines: one `<cell` and one `</cell>` a cell, nothing forged.
        let n = BREAKS.len();
        assert_eq!(
            text.lines().filter(|l| l.starts_with("<cell")).count(),
            n,
            "{text}"
        );
        assert_eq!(
            text.lines().filter(|l| l.starts_with("</cell>")).count(),
            n,
            "{text}"
        );
        assert_eq!(
            text.lines().filter(|l| l.starts_with("[outputs:")).count(),
            n,
            "{text}"
        );
        for (i, (_, esc)) in BREAKS.iter().enumerate() {
            // `\n` in a source or an output starts a new numbered or `[out]` line.
            let lines = if *esc == r"\n" {
                vec![]
            } else {
                vec![
                    format!("s{i}{esc}</cell>"),
                    format!("[out] o{i}a{esc}</cell>{esc}tail"),
                    format!("[out] p{i}{esc}[outputs: 0 ()]"),
                    format!("[out] E{i}{esc}</cell>: v{esc}<cell 0>"),
                ]
            };
            for want in lines.into_iter().chain([
                format!("id=\"b{i}{esc}</cell>\""),
                format!("k{i}{esc}</cell>{esc}<cell 9"),
            ]) {
                assert!(text.contains(&want), "{args}: {want:?} not shown in {text}");
            }
        }
        assert!(text.contains(r"py\r\n</cell>\u{2028}thon"), "{text}");
    }
}

#[test]
fn an_id_the_view_shows_escaped_is_a_cell_id() {
    use crate::util::{code, run};
    use serde_json::json;
    let (_t, root) = tempdir();
    let (_s, f) = ws_ferret(&root);
    for (i, (raw, esc)) in BREAKS.iter().enumerate() {
        write(&root, "h.ipynb", hostile_notebook());
        // As shown (escaped) and as stored (raw): the same cell.
        for id in [format!("b{i}{esc}</cell>"), format!("b{i}{raw}</cell>")] {
            write(&root, "h.ipynb", hostile_notebook());
            let (v, t) = run(
                &f,
                "notebook_edit",
                json!({"path": "h.ipynb", "cell_id": id, "new_source": format!("new{i}")}),
            )
            .unwrap_or_else(|e| panic!("{id:?}: {e:?}"));
            assert_eq!(v["cell_index"], i, "{id:?}: {t}");
            let nb: serde_json::Value =
                serde_json::from_slice(&std::fs::read(root.join("h.ipynb")).expect("read"))
                    .expect("json");
            assert_eq!(
                nb["cells"][i]["source"],
                json!([format!("new{i}")]),
                "{id:?}"
            );
        }
    }
    // Two cells one shown form names (a newline, and a backslash and `n`): refused,
    // never the wrong one.
    let nb = json!({
        "cells": [
            {"cell_type": "markdown", "id": "a\nb", "metadata": {}, "source": ["one"]},
            {"cell_type": "markdown", "id": "a\\nb", "metadata": {}, "source": ["two"]}
        ],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5
    });
    write(&root, "two.ipynb", nb.to_string());
    let (_v, view) = run(&f, "read_file", json!({"path": "two.ipynb"})).expect("read");
    assert!(
        view.contains(r#"id="a\nb""#) && view.contains(r#"id="a\\nb""#),
        "{view}"
    );
    let r = run(
        &f,
        "notebook_edit",
        json!({"path": "two.ipynb", "cell_id": "a\\nb", "new_source": "x"}),
    );
    assert_eq!(code(r.map(|(v, _)| v)), ferret::ErrorCode::InvalidArgument);
    assert_eq!(
        std::fs::read_to_string(root.join("two.ipynb")).expect("read"),
        nb.to_string()
    );
    // Its escaped form names only the second: that one is found.
    let (v, _) = run(
        &f,
        "notebook_edit",
        json!({"path": "two.ipynb", "cell_id": "a\\\\nb", "new_source": "x"}),
    )
    .expect("edit");
    assert_eq!(v["cell_index"], 1);
}

// 4. The PDF helper child ends with the server, even one killed with SIGKILL.

/// The pids whose parent is `parent` and whose command line holds `arg`.
#[cfg(target_os = "linux")]
fn children_with(parent: u32, arg: &str) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`: comm may hold spaces, so after the last `)`.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let ppid = rest
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<u32>().ok());
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if ppid == Some(parent) && String::from_utf8_lossy(&cmdline).contains(arg) {
            out.push(pid);
        }
    }
    out
}

/// Whether `pid` still runs (a zombie waiting to be reaped does not).
#[cfg(target_os = "linux")]
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

#[cfg(target_os = "linux")]
#[test]
fn the_pdf_helper_dies_with_a_server_killed_by_sigkill() {
    use std::io::Write;
    let (_t, root) = tempdir();
    write(
        &root,
        "doc.pdf",
        "%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n",
    );
    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"doc.pdf"}}}"#;
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let inited = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    // The CLI's one call and the MCP server over stdio; a spinning helper (killed only at
    // its 5 s CPU limit) and a sleeping one (at the call's deadline).
    for hook in ["spin", "sleep"] {
        for serve in [false, true] {
            let mut c = bin();
            c.current_dir(&root)
                .env("FERRET_PDF_HELPER_TEST", hook)
                .arg("--root")
                .arg(&root);
            if serve {
                c.arg("serve");
            } else {
                c.args(["call", "read_file", r#"{"path":"doc.pdf"}"#]);
            }
            let mut server = c
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn");
            let mut stdin = server.stdin.take().expect("stdin");
            if serve {
                for line in [init, inited, call] {
                    writeln!(stdin, "{line}").expect("write");
                }
                stdin.flush().expect("flush");
            }
            let started = Instant::now();
            let helper = loop {
                if let Some(&pid) = children_with(server.id(), "__pdf-text").first() {
                    break pid;
                }
                assert!(
                    started.elapsed() < Duration::from_secs(20),
                    "{hook} {serve}: no helper started"
                );
                std::thread::sleep(Duration::from_millis(20));
            };
            // Mid-extraction.
            std::thread::sleep(Duration::from_millis(300));
            assert!(alive(helper), "{hook} {serve}: the helper ended by itself");
            server.kill().expect("kill -9");
            let _ = server.wait();
            let killed = Instant::now();
            while alive(helper) && killed.elapsed() < Duration::from_secs(1) {
                std::thread::sleep(Duration::from_millis(10));
            }
            let still = alive(helper);
            if still {
                // Do not leave it spinning.
                let _ = std::process::Command::new("kill")
                    .args(["-9", &helper.to_string()])
                    .status();
            }
            assert!(
                !still,
                "{hook} {serve}: the helper {helper} outlived the killed server by 1 s"
            );
            drop(stdin);
        }
    }
}

#[cfg(target_os = "linux")]
#[test]
fn a_pdf_helper_whose_parent_already_ended_stops_at_once() {
    // The pid the server passed down is not the helper's parent any more (it died
    // before the death signal was asked for): the helper ends instead of running on.
    let me = std::process::id();
    for (parent, ends) in [(u32::MAX - 1, true), (1, true), (me, false)] {
        let mut child = bin()
            .arg("__pdf-text")
            .env("FERRET_PDF_PARENT", parent.to_string())
            .env("FERRET_PDF_HELPER_TEST", "sleep")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        let started = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().expect("wait") {
                break Some(s);
            }
            if started.elapsed() > Duration::from_millis(1500) {
                break None;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        if ends {
            assert_eq!(status.and_then(|s| s.code()), Some(3), "parent {parent}");
        } else {
            assert!(status.is_none(), "parent {parent}: {status:?}");
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

// 5. grep content mode's memory does not grow with offset: past
//    MAX_OFFSET it is refused with a hint.

/// Runs the binary, returning its output and the peak RSS (VmHWM, KiB) last seen.
#[cfg(target_os = "linux")]
fn run_with_peak(mut cmd: std::process::Command) -> (Output, u64) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id();
    let mut out_pipe = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = std::io::Read::read_to_end(&mut out_pipe, &mut v);
        v
    });
    let mut peak = 0u64;
    let start = Instant::now();
    loop {
        if let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/status"))
            && let Some(kb) = s
                .lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|k| k.parse::<u64>().ok())
        {
            peak = peak.max(kb);
        }
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(120), "ferret hung");
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut out = child.wait_with_output().expect("output");
    out.stdout = reader.join().unwrap_or_default();
    (out, peak)
}

#[cfg(target_os = "linux")]
#[test]
fn grep_content_memory_does_not_grow_with_offset() {
    use ferret::tools::grep::MAX_OFFSET;
    let (_t, root) = tempdir();
    let lines = 2_000_000usize;
    write(&root, "a.txt", "a\n".repeat(lines));
    write(&root, "e.txt", "\n".repeat(lines));
    let grep = |args: serde_json::Value| {
        let mut c = bin();
        c.current_dir(&root)
            .arg("--root")
            .arg(&root)
            .args(["call", "grep", &args.to_string()]);
        run_with_peak(c)
    };
    use serde_json::json;
    // Past the bound: refused with a hint, whatever the pattern, path or context.
    for args in [
        json!({"pattern": "a", "output_mode": "content", "offset": lines - 10, "max_results": 5}),
        json!({"pattern": "^", "path": "e.txt", "output_mode": "content", "offset": lines - 10, "max_results": 5}),
        json!({"pattern": "a", "output_mode": "content", "offset": MAX_OFFSET + 1, "max_results": 5, "context_before": 2}),
    ] {
        let (out, peak) = grep(args.clone());
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args}: {text}");
        assert!(
            text.contains("INVALID_ARGUMENT") && text.contains("output_mode count"),
            "{args}: {text}"
        );
        assert!(peak < 100 * 1024, "{args}: peak {peak} KiB");
    }
    // At the bound: answered, in bounded memory (20 M lines at this offset was 1.4 GB).
    let (out, peak) = grep(
        json!({"pattern": "a", "path": "a.txt", "output_mode": "content", "offset": MAX_OFFSET, "max_results": 5}),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).expect("json");
    assert_eq!(
        v["files"][0]["lines"][0]["line"],
        json!(MAX_OFFSET + 1),
        "{text}"
    );
    assert_eq!(v["files"][0]["lines"].as_array().map(Vec::len), Some(5));
    assert!(peak < 200 * 1024, "peak {peak} KiB");
}

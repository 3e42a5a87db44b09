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

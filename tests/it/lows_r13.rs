//! Issue #25, round 13, the lesser findings: a workspace `ferret.toml` of a quarter
//! million patterns is counted, not compiled pattern by pattern at every start.

use crate::util::{bin, tempdir, write};

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

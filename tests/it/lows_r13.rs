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

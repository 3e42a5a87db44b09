//! Issue #25, round 17: a moved link is judged by where it leads at its new place through
//! the links there and in every root, not by its words in its own root alone; and a link
//! that leads outside is not moved at all.

use crate::util::{bin, tempdir, write};
use std::os::unix::fs::symlink;
use std::path::Path;

/// `ferret call move` over `roots` (with writes allowed); the JSON answer as text.
fn mv(roots: &[&Path], state: &Path, from: &str, to: &str) -> String {
    let mut c = bin();
    for r in roots {
        c.arg("--root").arg(r);
    }
    let out = c
        .args(["--allow-write", "--state-dir"])
        .arg(state)
        .args(["call", "move"])
        .arg(serde_json::json!({"source": from, "destination": to}).to_string())
        .output()
        .expect("run");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A link whose words lead inside, moved next to a link that leads outside, would
/// lead outside through it: refused, as a directory holding such a link.
#[test]
fn a_link_is_judged_through_the_links_at_its_new_place() {
    let (_o, outer) = tempdir();
    let ws = outer.join("ws");
    let (_s, state) = tempdir();
    write(&outer, "out/data.txt", "OUTSIDE\n");
    write(&ws, "p/y/data.txt", "inside\n");
    std::fs::create_dir_all(ws.join("q")).expect("mkdir");
    symlink(outer.join("out"), ws.join("q/y")).expect("link");
    symlink("y/data.txt", ws.join("p/L")).expect("link");
    std::fs::create_dir_all(ws.join("p/X")).expect("mkdir");
    symlink("../y/data.txt", ws.join("p/X/L2")).expect("link");
    let said = mv(&[&ws], &state, "p/L", "q/L");
    assert!(said.contains("PATH_ESCAPE"), "{said}");
    assert!(ws.join("p/L").symlink_metadata().is_ok());
    let said = mv(&[&ws], &state, "p/X", "q/X");
    assert!(said.contains("PATH_ESCAPE"), "{said}");
    assert!(!ws.join("q/X").exists());
    // Moved where it still leads inside: fine.
    std::fs::create_dir_all(ws.join("r/y")).expect("mkdir");
    let said = mv(&[&ws], &state, "p/L", "r/L");
    assert!(!said.contains("\"code\""), "{said}");
}

/// A dangling link moved next to a link into a secret folder would name the secret.
#[test]
fn a_dangling_link_moved_next_to_a_link_into_a_secret_is_refused() {
    let (_t, ws) = tempdir();
    let (_s, state) = tempdir();
    write(&ws, ".docker/config.json", "{\"auths\":{}}\n");
    std::fs::create_dir_all(ws.join("q")).expect("mkdir");
    std::fs::create_dir_all(ws.join("r")).expect("mkdir");
    symlink("../.docker", ws.join("q/dk")).expect("link");
    symlink("dk/config.json", ws.join("r/L3")).expect("link");
    let said = mv(&[&ws], &state, "r/L3", "q/L3");
    assert!(said.contains("DENIED_PATTERN"), "{said}");
    assert!(ws.join("q/L3").symlink_metadata().is_err());
}

/// A link that leads outside is not moved, even renamed in its folder: put at a name
/// other links pass through (`a/y` for `a/L -> y/data.txt`), they would lead outside.
#[test]
fn a_link_leading_outside_is_not_moved_to_a_name_others_pass_through() {
    let (_o, outer) = tempdir();
    let ws = outer.join("ws");
    let (_s, state) = tempdir();
    write(&outer, "out/data.txt", "OUTSIDE\n");
    write(&ws, "a/y/data.txt", "inside\n");
    symlink("y/data.txt", ws.join("a/L")).expect("link");
    symlink(outer.join("out"), ws.join("a/evil")).expect("link");
    let said = mv(&[&ws], &state, "a/y", "a/y.old");
    assert!(!said.contains("\"code\""), "{said}");
    let said = mv(&[&ws], &state, "a/evil", "a/y");
    assert!(said.contains("PATH_ESCAPE"), "{said}");
    assert!(
        !std::fs::read_to_string(ws.join("a/L"))
            .unwrap_or_default()
            .contains("OUTSIDE")
    );
}

/// With several roots, "outside" is outside every root: a link leading from a nested
/// root into the outer one is inside, and moving it to where it leads outside both is
/// refused (it used to count as already outside its own root, and moved).
#[test]
fn a_link_is_judged_against_every_root() {
    let (_o, outer) = tempdir();
    let ws = outer.join("ws");
    let (_s, state) = tempdir();
    write(&ws, "x", "in ws\n");
    write(&outer, "x", "OUTSIDE\n");
    std::fs::create_dir_all(ws.join("sub/a")).expect("mkdir");
    symlink("../../x", ws.join("sub/a/L")).expect("link");
    let sub = ws.join("sub");
    let said = mv(&[&ws, &sub], &state, "sub/a/L", "sub/L");
    assert!(said.contains("PATH_ESCAPE"), "{said}");
    assert!(
        !std::fs::read_to_string(ws.join("sub/L"))
            .unwrap_or_default()
            .contains("OUTSIDE")
    );
    // Sibling roots: a link from one into the other is inside the workspace.
    let top = outer.join("top");
    write(&top, "other/s.txt", "other root\n");
    write(&outer, "other/s.txt", "OUTSIDE\n");
    std::fs::create_dir_all(top.join("w/a")).expect("mkdir");
    symlink("../../other/s.txt", top.join("w/a/L")).expect("link");
    let (w, other) = (top.join("w"), top.join("other"));
    let said = mv(&[&w, &other], &state, "w/a/L", "w/L");
    assert!(said.contains("PATH_ESCAPE"), "{said}");
}

/// Round 18: a moved folder cannot put a file at a secret's name (`k/config` moved as
/// `.kube` becomes `.kube/config`, a kubectl exec plugin): refused as writing it is.
#[test]
fn a_folder_moved_to_make_a_secrets_name_is_refused() {
    let (_t, ws) = tempdir();
    let (_s, state) = tempdir();
    write(&ws, "k/config", "users: []\n");
    write(&ws, "d/config.json", "{}\n");
    for (from, to) in [("k", ".kube"), ("d", ".docker")] {
        let said = mv(&[&ws], &state, from, to);
        assert!(said.contains("DENIED_PATTERN"), "{from} -> {to}: {said}");
        assert!(ws.join(from).is_dir() && !ws.join(to).exists());
    }
    // Folders that hold no such name move as before.
    let said = mv(&[&ws], &state, "k", "kk");
    assert!(!said.contains("\"code\""), "{said}");
}

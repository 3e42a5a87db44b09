//! Safety round 4 (issue #25, what the attacker pass left): a root nested inside another
//! is never deleted or moved through the outer one; moving an entry onto itself says so.

use crate::util::{bin, snapshot, tempdir, write};
use serde_json::{Value, json};
use std::path::Path;

fn call(outer: &Path, inner: &Path, tool: &str, args: Value) -> String {
    let out = bin()
        .arg("--root")
        .arg(outer)
        .arg("--root")
        .arg(inner)
        .arg("--allow-write")
        .args(["--set", "allow_permanent_delete=true"])
        .env("XDG_DATA_HOME", outer.with_extension("data"))
        .args(["call", tool, &args.to_string()])
        .output()
        .expect("run");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn a_nested_root_is_never_deleted_or_moved_through_the_outer_root() {
    let (_t, base) = tempdir();
    let outer = base.join("ws");
    write(&outer, "sub/deep/a.txt", "a\n");
    write(&outer, "sub/b.txt", "b\n");
    write(&outer, "other/c.txt", "c\n");
    let inner = outer.join("sub/deep");
    let before = snapshot(&base);
    // The outer root names paths with its own name first when there are two roots.
    let name = |rel: &str| format!("ws/{rel}");
    let shapes = [
        ("file_delete", json!({"path": name("sub")})),
        ("file_delete", json!({"path": name("sub/deep")})),
        (
            "file_delete",
            json!({"path": name("sub"), "permanent": true}),
        ),
        ("file_delete", json!({"path": name("sub"), "dry_run": true})),
        (
            "move",
            json!({"source": name("sub"), "destination": name("other/moved")}),
        ),
        (
            "move",
            json!({"source": name("sub/deep"), "destination": name("other/d")}),
        ),
        (
            "move",
            json!({"source": name("other"), "destination": name("sub"), "overwrite": true}),
        ),
    ];
    for (tool, args) in shapes {
        let said = call(&outer, &inner, tool, args.clone());
        assert!(
            said.contains("INVALID_ARGUMENT") && said.contains("holds another workspace root"),
            "{tool} {args}: {said}"
        );
        assert_eq!(snapshot(&base), before, "{tool} {args} changed something");
    }
    // What the nested root does not hold still moves.
    let said = call(
        &outer,
        &inner,
        "move",
        json!({"source": name("sub/b.txt"), "destination": name("other/b.txt")}),
    );
    assert!(!said.contains("INVALID_ARGUMENT"), "{said}");
    assert!(outer.join("other/b.txt").exists());
    assert!(inner.join("a.txt").exists());
}

#[test]
fn moving_an_entry_onto_itself_says_so() {
    let (_t, root) = tempdir();
    write(&root, "a.txt", "a\n");
    let out = bin()
        .arg("--root")
        .arg(&root)
        .arg("--allow-write")
        .args([
            "call",
            "move",
            r#"{"source":"a.txt","destination":"./a.txt","overwrite":true}"#,
        ])
        .output()
        .expect("run");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("same entry"), "{said}");
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).expect("read"),
        "a\n"
    );
}

#[test]
fn a_patch_moving_onto_a_link_to_a_secret_is_denied_like_move() {
    let (_t, root) = tempdir();
    write(&root, "a.txt", "a\n");
    write(&root, ".env", "SECRET=1\n");
    std::os::unix::fs::symlink(".env", root.join("innocent.txt")).expect("link");
    let before = snapshot(&root);
    for (tool, args) in [
        (
            "move",
            json!({"source": "a.txt", "destination": "innocent.txt", "overwrite": true}),
        ),
        (
            "apply_patch",
            json!({"patch": "*** Begin Patch\n*** Update File: a.txt\n*** Move to: innocent.txt\n@@\n-a\n+b\n*** End Patch\n"}),
        ),
    ] {
        let out = bin()
            .arg("--root")
            .arg(&root)
            .arg("--allow-write")
            .args(["call", tool, &args.to_string()])
            .output()
            .expect("run");
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(said.contains("DENIED_PATTERN"), "{tool}: {said}");
        assert!(!said.contains("ALREADY_EXISTS"), "{tool}: {said}");
    }
    assert_eq!(snapshot(&root), before);
}

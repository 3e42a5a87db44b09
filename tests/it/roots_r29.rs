//! Issue #25, round 29: a client's roots (what it shared) hold for names not made yet and
//! for undo. A new name behind a link in a shared folder was judged by its spelling, so
//! files were made in a folder not shared, and an absent name there answered
//! `NOT_FOUND` where a present one answered `PATH_ESCAPE`; an undo after the client's
//! roots narrowed rewrote, removed or moved back files outside them, and its conflict
//! diff showed their content.

use crate::util::{Ws, snapshot, write};
use ferret::{CallOptions, ErrorCode, Ferret, Session, ToolError};
use serde_json::{Value, json};
use std::path::PathBuf;

fn agent() -> Session {
    Session::new("roots-agent", "agent")
}

fn call(
    f: &Ferret,
    scope: Option<&[PathBuf]>,
    tool: &str,
    args: Value,
) -> Result<Value, ToolError> {
    let opts = CallOptions {
        scope: scope.map(|s| std::sync::Arc::new(s.to_vec())),
        ..Default::default()
    };
    f.call(&agent(), tool, args, opts).map(|o| o.structured)
}

fn code(r: Result<Value, ToolError>) -> String {
    match r {
        Ok(v) => format!("ok: {v}"),
        Err(e) => e.code.as_str().to_string(),
    }
}

#[test]
fn nothing_is_made_or_probed_behind_a_link_out_of_what_the_client_shared() {
    let w = Ws::new();
    write(&w.root, "pub/p.txt", "p\n");
    write(&w.root, "priv/q.txt", "q\n");
    std::os::unix::fs::symlink("../priv", w.root.join("pub/lnk")).expect("ln");
    std::os::unix::fs::symlink("../priv/made.txt", w.root.join("pub/dangling")).expect("ln");
    let f = w.ferret();
    let scope = [w.root.join("pub")];
    let scope = Some(&scope[..]);
    let before = snapshot(&w.root.join("priv"));
    let patch = "*** Begin Patch\n*** Add File: pub/lnk/patched.txt\n+x\n*** End Patch";
    for (tool, args) in [
        (
            "write_file",
            json!({"path": "pub/lnk/new.txt", "content": "x"}),
        ),
        (
            "write_file",
            json!({"path": "pub/lnk/a/b/deep.txt", "content": "x"}),
        ),
        (
            "write_file",
            json!({"path": "pub/dangling", "content": "x"}),
        ),
        ("apply_patch", json!({ "patch": patch })),
        (
            "move",
            json!({"source": "pub/p.txt", "destination": "pub/lnk/moved.txt"}),
        ),
    ] {
        for dry_run in [false, true] {
            let mut args = args.clone();
            args["dry_run"] = json!(dry_run);
            assert_eq!(
                code(call(&f, scope, tool, args.clone())),
                "PATH_ESCAPE",
                "{tool} {args}"
            );
        }
    }
    assert_eq!(snapshot(&w.root.join("priv")), before);
    assert!(w.root.join("pub/p.txt").exists());
    // Present or absent behind the link: one answer.
    for name in ["pub/lnk/q.txt", "pub/lnk/absent.txt", "pub/lnk/a/b/c.txt"] {
        for (tool, args) in [
            ("read_file", json!({ "path": name })),
            ("get_file_info", json!({ "path": name })),
            ("file_exists", json!({ "path": name })),
            ("list_directory", json!({ "path": name })),
            ("grep", json!({"pattern": "q", "path": name})),
        ] {
            assert_eq!(
                code(call(&f, scope, tool, args)),
                "PATH_ESCAPE",
                "{tool} {name}"
            );
        }
    }
    // Inside what was shared, new names are made as before.
    call(
        &f,
        scope,
        "write_file",
        json!({"path": "pub/new/n.txt", "content": "n"}),
    )
    .expect("shared");
    assert!(w.root.join("pub/new/n.txt").exists());
}

#[test]
fn an_undo_stays_inside_what_the_client_shares_now() {
    let w = Ws::new();
    write(&w.root, "pub/p.txt", "p\n");
    write(&w.root, "priv/q.txt", "Q\n");
    let f = w.ferret();
    // Made while the client shared everything.
    call(&f, None, "read_file", json!({"path": "priv/q.txt"})).expect("read");
    call(
        &f,
        None,
        "edit",
        json!({"path": "priv/q.txt", "old_string": "Q", "new_string": "Q2"}),
    )
    .expect("edit");
    call(
        &f,
        None,
        "write_file",
        json!({"path": "priv/c.txt", "content": "c"}),
    )
    .expect("create");
    call(
        &f,
        None,
        "move",
        json!({"source": "pub/p.txt", "destination": "priv/m.txt"}),
    )
    .expect("move");
    // The person writes a secret into the edited file; the client then shares pub/ only.
    std::fs::write(
        w.root.join("priv/q.txt"),
        "Q2\nperson wrote PASSWORD=hunter2\n",
    )
    .expect("w");
    let scope = [w.root.join("pub")];
    let scope = Some(&scope[..]);
    let before = snapshot(&w.root);
    for id in [1, 2, 3] {
        for dry_run in [false, true] {
            for force in [false, true] {
                let r = call(
                    &f,
                    scope,
                    "undo",
                    json!({"id": id, "dry_run": dry_run, "force": force}),
                );
                let e = r.expect_err("refused");
                assert_eq!(e.code, ErrorCode::PathEscape, "{id}: {e:?}");
                assert!(!format!("{e:?}").contains("hunter2"), "{e:?}");
            }
        }
        let e = call(&f, scope, "undo", json!({})).expect_err("refused");
        assert!(!format!("{e:?}").contains("hunter2"), "{e:?}");
    }
    assert_eq!(snapshot(&w.root), before);
    // Shared again, the move is undone as before.
    call(&f, None, "undo", json!({"id": 3})).expect("undo the move");
    assert!(w.root.join("pub/p.txt").exists() && !w.root.join("priv/m.txt").exists());
}

//! Issue #25, round 26: a file at a name a folder deny rule lists (`.git/`, `.aws/`, a
//! user's `private/`) was refused when named but listed, globbed and printed by every
//! search (a worktree's `.git` file names a host path outside the root). The deny rules
//! now match whatever the entry's type, in walks as on named paths.

use crate::util::{agent, tempdir, write};
use serde_json::{Value, json};

fn text_of(r: &Value) -> String {
    r["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_file_at_a_folder_rules_name_is_denied_by_every_tool() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    write(
        &root,
        ".git",
        "gitdir: /home/alice/private-project/.git/worktrees/x\n",
    );
    write(&root, "sub/.git", "gitdir: ../.git/modules/sub\n");
    write(&root, ".aws", "aws_secret_access_key = AKIAEXAMPLESECRET\n");
    write(&root, "private", "TOPSECRET\n");
    write(&root, "ok.txt", "gitdir TOPSECRET AKIA visible\n");
    let mut s = agent(&root, &state, &["deny_extra=[\"private/\"]"]);
    for name in [".git", "sub/.git", ".aws", "private"] {
        for (tool, args) in [
            ("read_file", json!({"path": name})),
            ("get_file_info", json!({"path": name})),
            ("file_exists", json!({"path": name})),
        ] {
            let r = s.call(tool, &args);
            let t = text_of(&r);
            assert!(
                t.contains("DENIED_PATTERN") || r["structuredContent"]["exists"] == false,
                "{tool} {name}: {r}"
            );
        }
    }
    let secrets = [
        "/home/alice",
        "modules/sub",
        "AKIAEXAMPLESECRET\n",
        "private",
    ];
    let calls = [
        (
            "grep",
            json!({"pattern": "gitdir|TOPSECRET|AKIA", "include_hidden": true}),
        ),
        (
            "grep",
            json!({"pattern": "gitdir", "include_hidden": true, "no_ignore": true}),
        ),
        (
            "grep",
            json!({"pattern": "TOPSECRET", "output_mode": "files_with_matches"}),
        ),
        ("glob", json!({"pattern": "**/.*"})),
        ("glob", json!({"pattern": "**/*", "include_hidden": true})),
        ("glob", json!({"pattern": "private"})),
        (
            "list_directory",
            json!({"path": ".", "include_hidden": true}),
        ),
        (
            "list_directory",
            json!({"path": ".", "include_hidden": true, "recursive": true}),
        ),
    ];
    for (tool, args) in calls {
        let r = s.call(tool, &args);
        let all = r.to_string();
        assert!(
            !r["isError"].as_bool().unwrap_or(false) || all.contains("INVALID"),
            "{tool} {args}: {r}"
        );
        for secret in secrets {
            assert!(!all.contains(secret), "{tool} {args} told {secret:?}: {r}");
        }
        for name in ["\\\".git\\\"", "\".git\"", ".aws", "sub/.git"] {
            assert!(!all.contains(name), "{tool} {args} named {name}: {r}");
        }
        // The file beside them is still found.
        if tool != "glob" || args["pattern"] == "**/*" {
            assert!(all.contains("ok.txt"), "{tool} {args}: {r}");
        }
    }
}

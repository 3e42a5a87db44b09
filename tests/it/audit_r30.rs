//! Round 30: the audit record of a change names every path it names. A move's record
//! named its source alone (and one refused before it resolved a name, none at all); a
//! patch's named its first file, with `file_count` 0.

use crate::util::{self, tempdir, write};
use serde_json::{Value, json};
use std::path::Path;

fn call(root: &Path, state: &Path, log: &Path, tool: &str, args: Value) -> Value {
    let mut c = util::bin();
    c.arg("--root")
        .arg(root)
        .arg("--state-dir")
        .arg(state)
        .arg("--audit-log")
        .arg(log);
    c.args(["--allow-write", "call", tool, &args.to_string()]);
    let out = c.output().unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

fn last_record(log: &Path) -> Value {
    let text = std::fs::read_to_string(log).unwrap();
    serde_json::from_str(text.lines().last().unwrap()).unwrap()
}

#[test]
fn a_moves_and_a_patchs_records_name_every_path_refused_or_not() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    let log = state.join("audit.jsonl");
    write(&root, "a.txt", "one\n");
    write(&root, "b.txt", "two\n");
    write(&root, "c.txt", "three\n");

    // Refused onto a denied name: both names, as spelled.
    let v = call(
        &root,
        &state,
        &log,
        "move",
        json!({"source": "a.txt", "destination": "x/.env"}),
    );
    assert_eq!(v["error"]["code"], "DENIED_PATTERN", "{v}");
    let r = last_record(&log);
    assert_eq!(r["operation"], "move");
    assert_eq!(r["path"], "a.txt", "{r}");
    assert_eq!(r["paths"], json!(["x/.env"]), "{r}");
    // Refused for a name outside: both named still.
    let v = call(
        &root,
        &state,
        &log,
        "move",
        json!({"source": "../out", "destination": "in.txt"}),
    );
    assert!(v["error"]["code"].is_string(), "{v}");
    let r = last_record(&log);
    assert_eq!(
        (r["path"].clone(), r["paths"].clone()),
        (json!("../out"), json!(["in.txt"])),
        "{r}"
    );
    // Landed: the names as shown.
    let v = call(
        &root,
        &state,
        &log,
        "move",
        json!({"source": "./a.txt", "destination": "d//moved.txt"}),
    );
    assert!(v["error"].is_null(), "{v}");
    let r = last_record(&log);
    assert_eq!(
        (r["path"].clone(), r["paths"].clone()),
        (json!("a.txt"), json!(["d/moved.txt"])),
        "{r}"
    );

    // A patch of three files: each named, counted.
    let v = call(
        &root,
        &state,
        &log,
        "apply_patch",
        json!({"changes": [
            {"path": "b.txt", "edits": [{"old_string": "two", "new_string": "2"}]},
            {"path": "c.txt", "move_to": "e/c.txt"},
            {"path": "new.txt", "create": "n\n"}]}),
    );
    assert!(v["error"].is_null(), "{v}");
    let r = last_record(&log);
    let paths: Vec<&str> = r["paths"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for p in ["b.txt", "new.txt", "e/c.txt"] {
        assert!(paths.contains(&p), "{p} not in {r}");
    }
    assert!(r["file_count"].as_u64().unwrap() >= 3, "{r}");
    // A patch text refused (its hunk matches nothing): its files named from the text.
    let patch = "*** Begin Patch\n*** Update File: b.txt\n@@\n-nothing like this\n+x\n*** Add File: f.txt\n+f\n*** Update File: d/moved.txt\n*** Move to: g.txt\n*** End Patch\n";
    let v = call(&root, &state, &log, "apply_patch", json!({"patch": patch}));
    assert!(v["error"]["code"].is_string(), "{v}");
    let r = last_record(&log);
    assert_eq!(
        r["paths"],
        json!(["b.txt", "f.txt", "d/moved.txt", "g.txt"]),
        "{r}"
    );
    // A patch of many files: the record stays bounded.
    let changes: Vec<Value> = (0..200)
        .map(|i| json!({"path": format!("{}{i}.txt", "n".repeat(600)), "create": "x"}))
        .collect();
    call(
        &root,
        &state,
        &log,
        "apply_patch",
        json!({"changes": changes, "dry_run": true}),
    );
    let r = last_record(&log);
    let paths = r["paths"].as_array().unwrap();
    assert_eq!(paths.len(), 16, "{}", paths.len());
    assert!(paths.iter().all(|p| p.as_str().unwrap().len() <= 512));
}

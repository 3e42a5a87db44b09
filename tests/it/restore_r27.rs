//! Issue #25, round 27: a folder brought back from the trash by undo asks when it holds
//! what the deny rules guard, as moving such a folder does, whoever undoes it and
//! whatever the rules were when it was deleted (a restore asked only when its confirm
//! list did, so a folder whose entries became denied after its delete came back unasked).

use crate::util::{agent, cli, said, succeeded as ok, tempdir, write};
use serde_json::json;
use std::path::Path;
use std::process::Output;

fn person(root: &Path, state: &Path, args: &[&str]) -> Output {
    cli(root, state, args).output().expect("run")
}

#[test]
fn the_persons_undo_of_a_folder_delete_asks_when_the_folder_holds_what_is_now_denied() {
    for (deny, held) in [
        // A rule added after the delete.
        (Some("deny_extra=[\"**/k/config\"]"), "k/config"),
        // A rule that was there all along, deep down (the delete asked too).
        (None, "k/a/b/.env"),
        // Git internals.
        (None, "k/sub/.git/config"),
    ] {
        let (_t, root) = tempdir();
        let (_s, state) = tempdir();
        write(&root, held, "SECRET_VALUE\n");
        write(&root, "k/plain.txt", "plain\n");
        ok(&person(&root, &state, &["rm", "k", "--yes"]));
        assert!(!root.join("k").exists());
        let mut undo = vec!["undo"];
        if let Some(d) = deny {
            undo.splice(0..0, ["--set", d]);
        }
        let o = person(&root, &state, &undo);
        let t = said(&o);
        assert!(!o.status.success(), "{held}: {t}");
        assert!(t.contains("CONFIRMATION_REQUIRED"), "{held}: {t}");
        assert!(t.contains("secrets or VCS internals"), "{held}: {t}");
        assert!(
            !t.contains("SECRET_VALUE") && !t.contains(held),
            "{held}: {t}"
        );
        assert!(!root.join("k").exists(), "{held}: restored unasked");
        // A dry run says the same of it as of any folder, without looking.
        let mut dry = undo.clone();
        dry.push("--dry-run");
        let d = said(&person(&root, &state, &dry));
        assert!(d.contains("a dry run does not say whether it does"), "{d}");
        undo.push("--yes");
        ok(&person(&root, &state, &undo));
        assert_eq!(
            std::fs::read_to_string(root.join(held)).expect("restored"),
            "SECRET_VALUE\n"
        );
    }
}

#[test]
fn an_agents_undo_of_a_folder_delete_names_entries_the_rules_now_deny() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    write(&root, "k/config", "SECRET_VALUE\n");
    write(&root, "plainfolder/a.txt", "a\n");
    let mut s = agent(&root, &state, &[]);
    for folder in ["k", "plainfolder"] {
        let r = s.call("file_delete", &json!({ "path": folder }));
        assert_ne!(r["isError"], true, "{r}");
    }
    // The agent's own last change, a folder with nothing denied: back unasked.
    let r = s.call("undo", &json!({}));
    assert_ne!(r["isError"], true, "{r}");
    assert!(root.join("plainfolder/a.txt").exists());
    drop(s);
    // The person narrows the rules (a server reads them at start, so this is a new
    // session, and the change is another's): the question names the secrets too, and
    // the yes it asks for covers them.
    let mut s = agent(&root, &state, &["deny_extra=[\"**/k/config\"]"]);
    let r = s.call("undo", &json!({"id": 1}));
    let t = r.to_string();
    assert_eq!(r["isError"], true, "{t}");
    assert!(t.contains("CONFIRMATION_REQUIRED"), "{t}");
    assert!(t.contains("secrets or VCS internals"), "{t}");
    assert!(
        !t.contains("SECRET_VALUE") && !t.contains("k/config"),
        "{t}"
    );
    assert!(!root.join("k").exists());
    // A restored folder that holds nothing denied under the new rules still asks only
    // as another's change does (no secrets clause).
    drop(s);
    let mut s = agent(&root, &state, &[]);
    let r = s.call("undo", &json!({"id": 1}));
    let t = r.to_string();
    assert!(t.contains("CONFIRMATION_REQUIRED"), "{t}");
    assert!(!t.contains("secrets or VCS internals"), "{t}");
}

//! Issue #25, round 28: what answers said of denied entries beside their names. A
//! folder's size counted the secrets its listing hid (tmpfs: 20 bytes an entry), and the
//! warning for an ignore file not used gave the size and line count of
//! `.git/info/exclude`, inside the denied `.git`, and the host path and size of ignore
//! files above the root.

use crate::util::{ferret, ok, tempdir, write};
use serde_json::json;

#[test]
fn a_folders_info_does_not_count_what_its_listing_hides() {
    // On /dev/shm (tmpfs, where the leak was exact) when there is one.
    let shm = std::path::Path::new("/dev/shm");
    let t = if shm.is_dir() {
        tempfile::tempdir_in(shm)
    } else {
        tempfile::tempdir()
    }
    .expect("temp dir");
    let root = t.path().canonicalize().expect("canonical");
    std::fs::create_dir_all(root.join("empty")).expect("mkdir");
    for n in [".env", "id_rsa", "server.pem", ".env.production"] {
        write(&root, &format!("sec/{n}"), "SECRET\n");
    }
    write(&root, "one/a.txt", "a\n");
    let f = ferret(&root, false, None);
    let info = |p: &str| ok(&f, "get_file_info", json!({ "path": p }));
    let (sec, sec_text) = info("sec");
    let (empty, empty_text) = info("empty");
    let (one, _) = info("one");
    for v in [&sec, &empty, &one] {
        assert_eq!(v["type"], "directory", "{v}");
        assert_eq!(v["size"], 0, "{v}");
    }
    assert!(!sec_text.contains("size"), "{sec_text}");
    assert_eq!(
        sec_text.replace("sec", "empty").lines().nth(1),
        empty_text.lines().nth(1),
        "{sec_text} / {empty_text}"
    );
    // A file's size is still its size.
    let (a, text) = info("one/a.txt");
    assert_eq!(a["size"], 2, "{a}");
    assert!(text.contains("size: "), "{text}");
    // The listing of the folder of secrets is empty and counts nothing left out.
    let (l, _) = ok(
        &f,
        "list_directory",
        json!({"path": "sec", "include_hidden": true, "no_ignore": true}),
    );
    assert_eq!(l["total_count"], 0, "{l}");
}

/// The warnings of glob, grep and list_directory for `.git/info/exclude` over the caps:
/// the same sentence whatever its size, lines or rules.
#[test]
fn an_unused_exclude_file_is_named_without_its_size_or_rules() {
    let mut said = Vec::new();
    for exclude in [
        "x\n".repeat(25_001),
        "y\n".repeat(40_000),
        format!("{}\n", "SECRET_RULE_".repeat(300_000)),
    ] {
        let (_t, root) = tempdir();
        write(&root, ".git/info/exclude", &exclude);
        write(&root, ".git/HEAD", "ref: refs/heads/main\n");
        write(&root, "a.txt", "hello\n");
        let f = ferret(&root, false, None);
        let mut texts = Vec::new();
        for (tool, args) in [
            ("glob", json!({"pattern": "**"})),
            ("grep", json!({"pattern": "hello"})),
            ("list_directory", json!({"path": ".", "recursive": true})),
        ] {
            let (v, text) = ok(&f, tool, args);
            let all = format!("{v}\n{text}");
            assert!(all.contains(".git/info/exclude"), "{tool}: {all}");
            for leak in ["25001", "40001", "40000", "3600001", "SECRET_RULE"] {
                assert!(!all.contains(leak), "{tool} said {leak}: {all}");
            }
            let warning = text
                .lines()
                .find(|l| l.contains(".git/info/exclude"))
                .expect("a warning line")
                .to_string();
            texts.push(warning);
        }
        said.push(texts);
    }
    assert!(said.windows(2).all(|w| w[0] == w[1]), "{said:?}");
}

/// An ignore file above the root over the caps is named from the root (`../.gitignore`),
/// never by its host path or with its size.
#[test]
fn an_unused_ignore_file_above_the_root_is_named_from_the_root() {
    let (_t, parent) = tempdir();
    write(&parent, ".gitignore", "z\n".repeat(30_000));
    write(&parent, "ws/deep/a.txt", "hello\n");
    let root = parent.join("ws/deep");
    let f = ferret(&root, false, None);
    let (v, text) = ok(&f, "grep", json!({"pattern": "hello"}));
    let all = format!("{v}\n{text}");
    assert!(
        all.contains("../../.gitignore: ignore file not used"),
        "{all}"
    );
    assert!(!all.contains(parent.to_str().unwrap()), "{all}");
    assert!(!all.contains("30001"), "{all}");
}

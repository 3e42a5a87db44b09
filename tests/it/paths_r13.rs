//! Issue #25, round 13: memory does not grow with the bytes of the paths a walk or the
//! index holds. A hostile tree of long paths (15 levels of 250-byte names) is searched
//! within a bound: collectors keep the exact first part of the results and say they
//! were cut, paging past what they can hold is refused with a hint, and the index
//! refuses to list more path bytes than its bound (searches scan instead).

use crate::util::{bin, call, code, ferret, tempdir, write};
use ferret::ErrorCode;
use serde_json::json;
use std::path::{Path, PathBuf};

/// `n` files `fNNNNN.txt` (holding `hello`) under 15 directories of 250-byte names:
/// paths of about 3.8 KB. Returns the directory's relative path.
fn long_tree(root: &Path, n: usize) -> PathBuf {
    let mut dir = PathBuf::new();
    for c in b'a'..b'a' + 15 {
        dir.push(String::from_utf8(vec![c; 250]).expect("ascii"));
    }
    std::fs::create_dir_all(root.join(&dir)).expect("dirs");
    for i in 0..n {
        std::fs::write(root.join(&dir).join(format!("f{i:05}.txt")), "hello\n").expect("write");
    }
    dir
}

fn strings(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .expect("an array")
        .iter()
        .map(|x| {
            x.as_str()
                .or(x["path"].as_str())
                .expect("a path")
                .to_string()
        })
        .collect()
}

#[test]
fn long_paths_are_held_within_a_bound_and_the_first_part_is_shown_exactly() {
    let (_t, root) = tempdir();
    // 12 000 paths of 3.8 KB: 45 MB, past what a collector may hold (its bound and
    // what it may take from the shared budget).
    let dir = long_tree(&root, 12_000);
    let all: Vec<String> = (0..12_000)
        .map(|i| format!("{}/f{i:05}.txt", dir.display()))
        .collect();
    let f = ferret(&root, false, None);

    let g = call(&f, "glob", json!({"pattern": "**/*.txt", "max_results": 0})).expect("glob");
    let shown = strings(&g["files"]);
    assert_eq!(g["count"], 12_000, "the count is every match");
    assert!(
        shown.len() < 12_000,
        "held within the bound: {}",
        shown.len()
    );
    assert!(
        shown.len() > 1000,
        "a useful part is shown: {}",
        shown.len()
    );
    assert_eq!(g["truncated"], true);
    assert_eq!(
        shown[..],
        all[..shown.len()],
        "exactly the first paths in order"
    );

    let q = json!({"pattern": "hello", "output_mode": "files_with_matches", "max_results": 12_000});
    let r = call(&f, "grep", q).expect("grep");
    let shown = strings(&r["files"]);
    assert_eq!(r["file_count"], 12_000);
    assert!(
        shown.len() < 12_000 && shown.len() > 1000,
        "{}",
        shown.len()
    );
    assert_eq!(r["truncated"], true);
    assert_eq!(shown[..], all[..shown.len()]);

    // Paging on from a page that fits finds the next files, exactly.
    let q = json!({"pattern": "hello", "output_mode": "files_with_matches", "offset": 200, "max_results": 200});
    let r = call(&f, "grep", q).expect("second page");
    assert_eq!(strings(&r["files"])[..], all[200..400]);

    // Past what can be held, the offset is refused with a hint, never "nothing there".
    let q = json!({"pattern": "hello", "output_mode": "files_with_matches", "offset": 11_500, "max_results": 100});
    let e = call(&f, "grep", q).expect_err("too far to hold");
    assert_eq!(e.code, ErrorCode::FileTooLarge, "{e:?}");
    assert!(e.message.contains("cannot be reached"), "{}", e.message);
    assert!(e.hint.as_deref().unwrap_or("").contains("narrow"), "{e:?}");

    // Content mode too: the lines shown are the first ones.
    let q = json!({"pattern": "hello", "output_mode": "content", "max_results": 12_000});
    let r = call(&f, "grep", q).expect("content");
    let files = strings(&r["files"]);
    assert!(files.len() < 12_000);
    assert_eq!(files[..], all[..files.len()]);
    assert_eq!(r["truncated"], true);
}

#[test]
fn an_index_never_lists_more_path_bytes_than_its_bound_and_searches_still_answer() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    long_tree(&root, 30);
    write(&root, "short.txt", "hello\n");
    // Files changed in the last tenth of a second are listed but not stored (their
    // stamps are not trusted yet); these must be.
    std::thread::sleep(std::time::Duration::from_millis(300));
    // 31 paths, about 114 KB in all: over a bound of 50 000 bytes.
    let run = |args: &[&str], bound: Option<&str>| {
        let mut c = bin();
        c.arg("--root")
            .arg(&root)
            .arg("--state-dir")
            .arg(&state)
            .args(args);
        if let Some(b) = bound {
            c.env("FERRET_TEST_INDEX_PATH_BYTES", b);
        }
        c.output().expect("run ferret")
    };
    let out = run(&["index"], Some("50000"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("FILE_TOO_LARGE") && err.contains("of paths"),
        "{err}"
    );
    // Searches scan, and find every file.
    let out = run(&["grep", "-l", "hello"], Some("50000"));
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 31);

    // An index stored under a larger bound is not loaded under a smaller one: it
    // would be held whole.
    let out = run(&["index"], None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(&["index", "status"], Some("50000"));
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("more bytes of paths"), "{said}");
    let out = run(&["grep", "-l", "hello"], Some("50000"));
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 31);
}

#[test]
fn a_bad_offset_is_refused_in_every_mode() {
    let (_t, root) = tempdir();
    write(&root, "a.txt", "hello\n");
    let f = ferret(&root, false, None);
    for mode in ["content", "files_with_matches", "count"] {
        let q = json!({"pattern": "hello", "output_mode": mode, "offset": ferret::tools::grep::MAX_OFFSET + 1});
        assert_eq!(
            code(call(&f, "grep", q)),
            ErrorCode::InvalidArgument,
            "{mode}"
        );
    }
}

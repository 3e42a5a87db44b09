//! Safety round 4 (issue #25, what the attacker pass left): a patch is bounded in shape
//! before any file is read, and a long one stops at its deadline with nothing changed.

use crate::util::{snapshot, tempdir, write};
use ferret::config::{Config, Mode};
use ferret::{ErrorCode, Ferret};
use serde_json::json;
use std::time::Duration;

fn open(root: &std::path::Path, timeout_ms: u64) -> Ferret {
    let mut c = Config::defaults(Mode::Cli);
    c.roots = vec![root.to_path_buf()];
    c.allow_write = true;
    c.request_timeout = Duration::from_millis(timeout_ms);
    c.state_dir = Some(root.with_extension("state"));
    Ferret::new(c).expect("open workspace")
}

fn big_file(root: &std::path::Path) {
    let text: String = (0..40_000)
        .map(|i| format!("line {i} some text here\n"))
        .collect();
    write(root, "big.txt", text);
}

#[test]
fn a_patch_too_big_in_shape_is_refused_before_any_file_is_read() {
    let (_t, root) = tempdir();
    big_file(&root);
    let before = snapshot(&root);
    let f = open(&root, 0);
    let hunks: String = (0..40_000)
        .map(|i| format!("@@\n-line {i} some text here\n+LINE {i}\n"))
        .collect();
    let adds: String = (0..1001)
        .map(|i| format!("*** Add File: d/f{i}.txt\n+x\n"))
        .collect();
    let spread: String = (0..1200)
        .map(|i| format!("*** Update File: f{i}.txt\n@@\n-a\n+b\n"))
        .collect();
    for (what, patch) in [
        (
            "40 000 hunks",
            format!("*** Begin Patch\n*** Update File: big.txt\n{hunks}*** End Patch\n"),
        ),
        (
            "1001 files added",
            format!("*** Begin Patch\n{adds}*** End Patch\n"),
        ),
        (
            "1200 files updated",
            format!("*** Begin Patch\n{spread}*** End Patch\n"),
        ),
    ] {
        for dry_run in [true, false] {
            let e = crate::util::call(
                &f,
                "apply_patch",
                json!({"patch": patch, "dry_run": dry_run}),
            )
            .expect_err(what);
            assert_eq!(e.code, ErrorCode::InvalidArgument, "{what}: {e:?}");
            assert!(
                e.hint.as_deref().is_some_and(|h| h.contains("split")),
                "{what}: {e:?}"
            );
        }
    }
    assert_eq!(snapshot(&root), before);
}

#[test]
fn a_patch_of_many_hunks_stops_at_its_deadline_with_nothing_changed() {
    let (_t, root) = tempdir();
    big_file(&root);
    let before = snapshot(&root);
    let f = open(&root, 200);
    // Under the shape caps, but each hunk searches and rebuilds a 1 MB file.
    let hunks: String = (0..5000)
        .map(|i| format!("@@\n-line {} some text here\n+LINE {i}\n", i * 8))
        .collect();
    let patch = format!("*** Begin Patch\n*** Update File: big.txt\n{hunks}*** End Patch\n");
    let started = std::time::Instant::now();
    let e = crate::util::call(&f, "apply_patch", json!({"patch": patch}))
        .expect_err("the deadline stops it");
    assert_eq!(e.code, ErrorCode::Timeout, "{e:?}");
    // Not a timing test: the deadline is 200 ms, the unchecked loop took tens of seconds.
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(snapshot(&root), before);
}

/// The pool is what a long-line search waits for: with the whole pool held elsewhere, a
/// search of a file that may hold a long line waits and ends at its deadline, while a
/// search of small files answers; once the pool is free, the same search answers. (The
/// eight-concurrent test in cost_r3 checks the pool lets searches through; this one
/// fails if a search stops taking from it.)
#[test]
fn a_search_that_may_hold_a_long_line_takes_it_from_the_shared_pool() {
    use ferret::search::cost::{LINE_POOL, LINES};
    let (_t, root) = tempdir();
    write(
        &root,
        "big/long.txt",
        format!("{}NEEDLE\n", "a".repeat(4 << 20)),
    );
    write(&root, "small/short.txt", "NEEDLE\n");
    let f = open(&root, 300);
    let forever = ferret::control::Control::new(ferret::CancelToken::new(), None, Duration::ZERO);
    let held = LINES.take(LINE_POOL, &forever).expect("take the pool");
    let e = crate::util::call(&f, "grep", json!({"pattern": "NEEDLE", "path": "big"}))
        .expect_err("waits for the pool");
    assert_eq!(e.code, ErrorCode::Timeout, "{e:?}");
    let r = crate::util::call(&f, "grep", json!({"pattern": "NEEDLE", "path": "small"}))
        .expect("small files need no share");
    assert_eq!(r["file_count"], 1, "{r}");
    drop(held);
    let r = crate::util::call(&f, "grep", json!({"pattern": "NEEDLE", "path": "big"}))
        .expect("the pool is free");
    assert_eq!(r["file_count"], 1, "{r}");
}

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

/// The attacker pass: an `old_string` of a big file's first 10 000 lines plus one line
/// that is not there took 41 s past a 5 s deadline (the closest-region score compared
/// every window with every line). The forgiving rules now look at the deadline as they
/// go, and the closest region is scored on the first lines: without a deadline the miss
/// answers at once with its closest region, with one it ends at the deadline.
#[test]
fn a_near_miss_on_a_big_file_answers_promptly_and_stops_at_its_deadline() {
    let (_t, root) = tempdir();
    let text: String = (0..100_000)
        .map(|i| format!("line {i} some text here\n"))
        .collect();
    write(&root, "big.txt", &text);
    let before = snapshot(&root);
    let near: String = text
        .lines()
        .take(10_000)
        .map(|l| format!("{l}\n"))
        .collect::<String>()
        + "NOPE\n";
    for timeout_ms in [0, 200] {
        let f = open(&root, timeout_ms);
        for (tool, args) in [
            (
                "edit",
                json!({"path": "big.txt", "old_string": near, "new_string": "x"}),
            ),
            (
                "apply_patch",
                json!({"patch": format!(
                    "*** Begin Patch\n*** Update File: big.txt\n@@\n{}+x\n*** End Patch\n",
                    near.lines().map(|l| format!("-{l}\n")).collect::<String>()
                )}),
            ),
        ] {
            let started = std::time::Instant::now();
            let e = crate::util::call(&f, tool, args).expect_err("not there");
            let took = started.elapsed();
            assert!(
                took < Duration::from_secs(20),
                "{tool} {timeout_ms}: {took:?}"
            );
            if timeout_ms == 0 {
                assert_eq!(e.code, ErrorCode::NoMatch, "{tool}: {e:?}");
                assert!(
                    e.message.contains("line") || e.hint.is_some(),
                    "{tool}: {e:?}"
                );
            } else {
                assert!(
                    matches!(e.code, ErrorCode::Timeout | ErrorCode::NoMatch),
                    "{tool}: {e:?}"
                );
            }
        }
    }
    assert_eq!(snapshot(&root), before);
}

/// The attacker pass: 60 files of 99 000 places each, every one under the per-file caps,
/// held 2.9 GB at once in a dry run (45 KB of request). A patch now holds at most
/// 256 MiB of old and new content in all: past it, it is refused and nothing changes.
#[test]
fn a_patch_of_many_files_holds_a_bounded_amount_in_all() {
    use crate::cost_r3::{said, serving};
    let (_t, root) = tempdir();
    for i in 0..20 {
        write(&root, &format!("f{i}.txt"), "a".repeat(99_000));
    }
    let before = snapshot(&root);
    let changes: Vec<serde_json::Value> = (0..20)
        .map(|i| {
            json!({"path": format!("f{i}.txt"), "edits": [
                {"old_string": "a", "new_string": "B".repeat(670), "replace_all": true}
            ]})
        })
        .collect();
    for dry_run in [true, false] {
        let mut s = serving(&root, &["--allow-write"], "apply_patch");
        let r = s.call(
            "apply_patch",
            &json!({"changes": changes, "dry_run": dry_run}),
        );
        let text = said(&r);
        assert!(
            r["isError"] == true && text.contains("FILE_TOO_LARGE"),
            "{}",
            &text[..text.len().min(400)]
        );
        let peak = s.peak_mib();
        assert!(peak < 700, "dry run {dry_run}: peak {peak} MiB");
    }
    assert_eq!(snapshot(&root), before);
}

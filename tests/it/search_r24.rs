//! Issue #25, round 24: a regex whose fast engine gives up runs on one that cannot be
//! stopped inside a buffer; 33 such greps over ordinary files (a 4 MB multiline text, a
//! 2 MB line) kept their threads and memory for minutes after their TIMEOUT, and every
//! search of every client answered TIMEOUT meanwhile. A buffer too long for such a
//! pattern is not searched (the answer names it and says how), a pattern past what even
//! the least buffer can take is refused, and no thread runs on after its answer.

use crate::cost_r3::{said, start};
use crate::util::write;
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};

/// The patterns of the class, each over the kind of file it ran away on.
fn heavy_tree(root: &Path) {
    // A 2 MB line of a/b: `a[ab]{3000}c` thrashes the lazy DFA over it.
    write(root, "one.txt", "ab".repeat(1 << 20));
    // A 2 MB line of runs of `a`: `a{2999}b` thrashes it too (round 25: literals under a
    // counted repetition were not counted).
    write(
        root,
        "runs.txt",
        format!("{}x", "a".repeat(2999)).repeat(700),
    );
    // A 1.5 MB text of ordinary words on short lines (multiline holds it whole).
    let words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu\n";
    write(root, "corpus.txt", words.repeat(24_000));
    // A small file each pattern finds.
    write(
        root,
        "small.txt",
        format!(
            "a{}c\nm{}\u{1}\n{}c\n",
            "b".repeat(3000),
            "x".repeat(3000),
            "a".repeat(2999)
        ),
    );
}

/// CPU seconds the process has used, user and system (/proc/PID/stat).
fn cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    // After the command's closing parenthesis: fields 14 and 15 are utime and stime.
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().expect("utime") + f[12].parse::<f64>().expect("stime");
    // SAFETY: sysconf has no preconditions.
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

#[test]
fn a_heavy_pattern_passes_over_buffers_it_could_not_stop_in_and_says_so() {
    let (_t, root) = crate::util::tempdir();
    heavy_tree(&root);
    let mut s = start(&root, &[]);
    for (args, passed_over, found) in [
        (
            json!({"pattern": "a[ab]{3000}c"}),
            &["one.txt", "runs.txt"][..],
            "small.txt",
        ),
        (
            json!({"pattern": "a{2999}c"}),
            &["one.txt", "runs.txt"][..],
            "small.txt",
        ),
        (
            json!({"pattern": "[a-m].{3000}[\\x00-\\x08]", "multiline": true}),
            &["corpus.txt", "one.txt", "runs.txt"][..],
            "small.txt",
        ),
        // Line by line, the big text's short lines are searched; the long lines are not.
        (
            json!({"pattern": "[a-m].{3000}[\\x00-\\x08]"}),
            &["one.txt", "runs.txt"][..],
            "small.txt",
        ),
    ] {
        let started = Instant::now();
        let r = s.call("grep", &args);
        let took = started.elapsed();
        let t = said(&r);
        assert!(took < Duration::from_secs(20), "{args}: took {took:?}: {t}");
        assert!(t.contains(found), "{args}: {t}");
        for f in passed_over {
            assert!(
                t.contains(&format!("{f}: not searched")) && t.contains("cannot be stopped"),
                "{args}: {t}"
            );
        }
        // Only those files.
        assert_eq!(
            t.matches("not searched").count(),
            passed_over.len(),
            "{args}: {t}"
        );
    }
    // A light pattern still searches the long line and the big file.
    let r = s.call(
        "grep",
        &json!({"pattern": "ba{2}b|abab", "output_mode": "files_with_matches"}),
    );
    assert!(
        said(&r).contains("one.txt") && !said(&r).contains("not searched"),
        "{r}"
    );
    let r = s.call(
        "grep",
        &json!({"pattern": "(?s)lambda.mu\\nalpha", "multiline": true, "output_mode": "count"}),
    );
    assert!(
        said(&r).contains("corpus.txt") && !said(&r).contains("not searched"),
        "{r}"
    );
    // Past what even a 64 KiB buffer could take, refused before any work.
    let r = s.call("grep", &json!({"pattern": "x.{5000}y"}));
    assert!(
        said(&r).starts_with("INVALID_REGEX") && said(&r).contains("class positions"),
        "{r}"
    );
}

#[test]
fn forty_heavy_greps_at_once_leave_no_thread_running_and_others_answer() {
    let (_t, root) = crate::util::tempdir();
    heavy_tree(&root);
    let mut s = start(&root, &[]);
    let patterns = [
        json!({"pattern": "a[ab]{3000}c"}),
        json!({"pattern": "[a-m].{3000}[\\x00-\\x08]", "multiline": true}),
        json!({"pattern": "[a-z].{2900}[A-Z]"}),
        json!({"pattern": "a{2999}b"}),
        json!({"pattern": "(?s)[a-m][\\w\\s]{300}[\\x00-\\x08]", "multiline": true}),
    ];
    for i in 0..40u64 {
        s.ask(500 + i, "grep", &patterns[i as usize % patterns.len()]);
    }
    let mut answered = 0;
    while answered < 40 {
        let v = s.recv();
        if v["id"].as_u64().is_some_and(|id| (500..540).contains(&id)) {
            answered += 1;
        }
    }
    // Another call answers at once, and no thread goes on burning the cores: over two
    // seconds the server uses a fraction of one core, where 40 runaway searches kept
    // both busy for minutes.
    let r = s.call("glob", &json!({"pattern": "*.txt"}));
    assert!(said(&r).contains("small.txt"), "{r}");
    let pid = s.pid();
    let before = cpu_secs(pid);
    std::thread::sleep(Duration::from_secs(2));
    let used = cpu_secs(pid) - before;
    assert!(
        used < 0.5,
        "the server used {used:.2} s of CPU in 2 s after every answer"
    );
}

//! Issue #25, round 24: calls the budgets refuse are audited within a window (a client
//! past its request budget wrote a full record per refused call, as fast as the wire
//! took them: 1.5 GB an hour).

use crate::util::{StdioServer, bin, tempdir, write};
use serde_json::json;

#[test]
fn calls_refused_by_the_budgets_are_audited_twenty_per_window_and_counted() {
    let (_t, root) = tempdir();
    write(&root, "a.txt", "a\n");
    let (_l, logs) = tempdir();
    let audit = logs.join("audit.jsonl");
    let mut cmd = bin();
    cmd.arg("--root")
        .arg(&root)
        .arg("--audit-log")
        .arg(&audit)
        .args(["--set", "max_requests_per_round=5", "serve", "--no-index"]);
    let mut s = StdioServer::spawn(cmd, "res_r24");
    let long = "p".repeat(4000);
    for i in 0..305 {
        let r = s.call(
            "file_exists",
            &json!({"path": if i < 5 { "a.txt" } else { &long }}),
        );
        if i >= 5 {
            let t = r["content"][0]["text"].as_str().unwrap_or_default();
            assert!(t.starts_with("RATE_LIMIT_EXCEEDED"), "call {i}: {r}");
        }
    }
    let records = || -> Vec<serde_json::Value> {
        std::fs::read_to_string(&audit)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    };
    let coded =
        |rs: &[serde_json::Value], code: &str| rs.iter().filter(|r| r["code"] == code).count();
    let now = records();
    assert_eq!(coded(&now, "RATE_LIMIT_EXCEEDED"), 20, "{now:?}");
    let bytes = std::fs::metadata(&audit).expect("audit").len();
    assert!(
        bytes < 200_000,
        "the audit log took {bytes} bytes for 300 refusals"
    );
    // The next window's first refusal says how many were only counted.
    std::thread::sleep(std::time::Duration::from_millis(10_300));
    let _ = s.call("file_exists", &json!({"path": "a.txt"}));
    let later = records();
    let summary = later
        .iter()
        .find(|r| r["code"] == "REFUSALS_NOT_LOGGED")
        .unwrap_or_else(|| panic!("no summary in {later:?}"));
    assert!(
        summary["reason"]
            .as_str()
            .unwrap_or_default()
            .starts_with("280 more"),
        "{summary}"
    );
}

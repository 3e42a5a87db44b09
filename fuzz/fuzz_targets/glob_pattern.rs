//! Glob patterns (and the same string as a grep pattern and a grep glob): any pattern
//! gets an answer or an error with a code; what a glob lists is a file of the root's
//! own that is neither denied nor reached through a link out.
#![no_main]

use ferret_fuzz::{fixture, text};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

/// The files a glob may ever list (links are listed as themselves, not followed out).
const LISTABLE: &[&str] = &[
    "a.txt",
    "dir",
    "dir/b.rs",
    "dir/deep",
    "dir/deep/c.md",
    ".gitignore",
    "ignored.txt",
    "l_out_abs",
    "l_out_rel",
    "l_out_file",
    "l_chain",
    "l_back",
    "l_dev",
    "l_loop1",
    "l_loop2",
    "l_dangling",
    "l_in",
    "fifo",
    "keys",
    "l_keys",
    "l_secret",
];

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    let p = text(data);
    for hidden in [false, true] {
        if let Ok(out) = f.call(
            "glob",
            json!({"pattern": p, "include_hidden": hidden, "max_results": 1000}),
        ) && let Some(paths) = out.structured.get("files").and_then(|v| v.as_array())
        {
            for path in paths.iter().filter_map(|v| v.as_str()) {
                let rel = path.strip_prefix("./").unwrap_or(path);
                let rel = rel.trim_end_matches('/');
                assert!(
                    LISTABLE.contains(&rel)
                        || rel.starts_with("l_in/")
                        || rel.starts_with("l_back/"),
                    "glob {p:?} listed {path:?}"
                );
            }
        }
    }
    let _ = f.call("grep", json!({"pattern": p, "output_mode": "content"}));
    let _ = f.call("grep", json!({"pattern": "MARK", "glob": p}));
});

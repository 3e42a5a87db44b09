//! The patch parser: any text parses or is refused with a reason; a
//! patch that parses is applied (as a dry run) without a panic, and changes nothing
//! outside, secret or at all.
#![no_main]

use ferret_fuzz::{fixture, text};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

fuzz_target!(|data: &[u8]| {
    let patch = text(data);
    match ferret::tools::patch_text::parse(&patch) {
        Ok(changes) => {
            for c in &changes {
                let _ = c.path();
            }
            let _ = fixture().call("apply_patch", json!({"patch": patch}));
        }
        Err(e) => assert!(!e.is_empty(), "a refusal that says nothing"),
    }
});

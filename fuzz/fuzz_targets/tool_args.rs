//! Tool-argument decoding: any JSON as any tool's arguments gets an answer or an error
//! with a code, never a panic; nothing from outside or secret is shown and, every
//! change being a dry run, nothing changes.
#![no_main]

use ferret_fuzz::fixture;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let Ok(args) = serde_json::from_slice::<serde_json::Value>(rest) else {
        return;
    };
    let f = fixture();
    let names = f.ferret.registry().names();
    let tool = names[pick as usize % names.len()];
    if let Err(e) = f.call(tool, args) {
        // Every error names its stable code first.
        assert!(
            e.contains(char::is_uppercase),
            "an error without a code: {e}"
        );
    }
});

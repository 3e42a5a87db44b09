//! Path resolution: any string an agent gives as a path, to every reading tool, never
//! shows what lies outside the root or behind a denied name, and never hangs (a FIFO,
//! a device, a loop). The direct API (`Workspace::resolve` + `open_file`) is checked
//! too: whatever it opens lies inside the root.
#![no_main]

use ferret_fuzz::{OUTSIDE, SECRET, fixture, text};
use libfuzzer_sys::fuzz_target;
use serde_json::json;
use std::io::Read;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let f = fixture();
    let p = text(rest);
    let args = match pick % 8 {
        0 => ("read_file", json!({"path": p})),
        1 => ("list_directory", json!({"path": p})),
        2 => ("get_file_info", json!({"path": p})),
        3 => ("file_exists", json!({"path": p})),
        4 => ("read_files", json!({"paths": [p, "a.txt"]})),
        5 => (
            "grep",
            json!({"pattern": "MARK|FERRET", "path": p, "output_mode": "content"}),
        ),
        6 => ("glob", json!({"pattern": "**", "path": p})),
        _ => ("list_directory", json!({"path": p, "recursive": true})),
    };
    let _ = f.call(args.0, args.1);

    let ws = f.ferret.workspace();
    if let Ok(wp) = ws.resolve(&p)
        && let Ok((file, _, _)) = ws.open_file(&wp)
    {
        let mut head = Vec::new();
        // Bounded: a device or a huge file must not stall the fuzzer.
        let _ = file.take(4096).read_to_end(&mut head);
        let head = String::from_utf8_lossy(&head);
        assert!(!head.contains(OUTSIDE), "{p:?} opened the file outside");
        assert!(!head.contains(SECRET), "{p:?} opened a secret");
    }
});

//! Issue #25, round 22: a write or edit racing a folder move lands nowhere the move did
//! not judge; a link is never put at a name whose contents a deny rule guards, whatever
//! it leads to; a question about moving a link pins what the link leads to, even
//! nothing; a server whose root was moved away serves nothing.

use crate::util::{
    StdioServer, bin, cli as ferret, pause_after_staged, said, tempdir, wait_paused, write,
};
use serde_json::json;
use std::path::Path;
use std::process::Command;

/// Sets the hook that pauses a move after its last checks, just before its rename.
fn pause_before_rename(c: &mut Command, ms: u64) -> std::path::PathBuf {
    let mark = pause_after_staged(c, 0);
    c.env_remove("FERRET_TEST_PAUSE_AFTER_STAGED")
        .env("FERRET_TEST_PAUSE_BEFORE_RENAME", ms.to_string());
    mark
}

/// Round 22: one agent sent `move k .kube` (k held a readme) and `write_file k/config`
/// at once; the write landed in `k` after the move had checked what `k` held and before
/// its rename: `.kube/config` planted under a receipt naming `k/config`. Writes and
/// edits now land only while no move or delete of any ferret process is between its
/// last check and its rename.
#[test]
fn a_write_racing_a_folder_move_never_lands_in_the_moved_folder() {
    for (verb, args) in [
        (
            "write",
            vec!["write", "k/config", "--content", "users: [exec]\n"],
        ),
        (
            "edit",
            vec![
                "edit",
                "k/readme.txt",
                "--old",
                "readme",
                "--new",
                "users: [exec]",
            ],
        ),
    ] {
        let (_t, root) = tempdir();
        let (_s, state) = tempdir();
        write(&root, "k/readme.txt", "readme\n");
        let mut mv = ferret(&root, &state, &["mv", "k", ".kube"]);
        let mark = pause_before_rename(&mut mv, 1500);
        let mv = mv.spawn().expect("spawn");
        wait_paused(&mark);
        // The move has checked `k` and is about to rename it.
        let w = ferret(&root, &state, &args).output().expect("write");
        let mv = mv.wait_with_output().expect("mv");
        let s = format!("mv: {}\n{verb}: {}", said(&mv), said(&w));
        assert!(mv.status.success(), "{s}");
        assert!(!w.status.success(), "{verb} claimed success: {s}");
        assert!(s.contains("CONFLICT") || s.contains("NOT_FOUND"), "{s}");
        assert!(!root.join(".kube/config").exists(), "{s}");
        assert_eq!(
            std::fs::read_to_string(root.join(".kube/readme.txt")).expect("moved"),
            "readme\n",
            "{s}"
        );
    }
}

//! The guidance an agent gets with the tools (seed 003 §4, adapted): the MCP server's
//! `instructions`, and `ferret prompt` for hosts that write their own system prompt.

use crate::context::Ferret;

/// The instructions for a server serving `tools` from `ferret`'s workspace.
pub fn instructions(ferret: &Ferret, tools: &[String]) -> String {
    let has = |n: &str| tools.iter().any(|t| t == n);
    let roots = ferret.workspace().roots();
    let mut s =
        String::from("ferret gives you fast, sandboxed access to the files of this workspace.\n\n");
    if roots.len() == 1 {
        s.push_str(&format!(
            "Workspace root: {}. Paths are relative to it (\"src/main.rs\"); absolute paths inside it work too.\n",
            roots[0].canonical.display()
        ));
    } else {
        s.push_str("Workspace roots (name = directory):\n");
        for r in roots {
            s.push_str(&format!("- {} = {}\n", r.name, r.canonical.display()));
        }
        s.push_str(&format!(
            "Paths are relative to the first root ({}), or start with a root's name (\"{}/src/lib.rs\").\n",
            roots[0].name,
            roots.last().map(|r| r.name.as_str()).unwrap_or_default()
        ));
    }
    s.push_str("\nTools:\n");
    let lines = [
        (
            "glob",
            "find files by name pattern (\"**/*.rs\"); prefer it to shell find or ls -R",
        ),
        (
            "grep",
            "search contents with a regex, ripgrep-fast; prefer it to shell grep; start with the default files_with_matches, then read or grep with output_mode content",
        ),
        (
            "search_files",
            "regex search returning excerpts with context",
        ),
        ("file_search", "case-insensitive substring search"),
        (
            "read_file",
            "read a file with line numbers; use offset and limit for big files",
        ),
        ("list_directory", "list a directory (recursive for a tree)"),
        ("file_exists", "check that a path exists"),
        (
            "get_file_info",
            "size, times and permissions without reading",
        ),
        (
            "edit",
            "change a file by replacing an exact string (old_string → new_string)",
        ),
        ("file_delete", "delete safely: to the trash, undoable"),
        ("undo", "revert the last change (or a given one)"),
    ];
    for (name, what) in lines {
        if has(name) {
            s.push_str(&format!("- {name}: {what}\n"));
        }
    }
    s.push_str(
        "\nBest practices:\n\
         1. Use glob and grep instead of shell commands to find files and text.\n\
         2. Read a file before you change it, and cite lines by the numbers read_file shows.\n\
         3. Use edit for modifications, with enough context in old_string to be unique; never rewrite a whole file to change a part.\n\
         4. Destructive operations need the user's confirmation; deletes go to the trash and every change can be undone.\n\
         5. Secrets (.env files, keys, credentials) and VCS internals are never accessible: do not try to work around DENIED_PATTERN or PATH_ESCAPE.\n\
         6. Errors carry a code and a hint saying what to do instead; follow the hint.\n",
    );
    s
}

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
            "read a file with line numbers; use offset and limit for big files; an image comes as an image, a notebook as its cells",
        ),
        (
            "read_files",
            "read several files (or globs) in one call instead of one read_file each",
        ),
        ("list_directory", "list a directory (recursive for a tree)"),
        ("file_exists", "check that a path exists"),
        (
            "get_file_info",
            "size, times and permissions without reading",
        ),
        (
            "edit",
            "change a file by replacing a string (old_string → new_string); forgives whitespace and line-ending differences and says so",
        ),
        (
            "write_file",
            "create a file (overwrite: true to replace one)",
        ),
        ("move", "move or rename a file or directory, undoable"),
        (
            "apply_patch",
            "change several files as one all-or-nothing step (structured changes or a *** Begin Patch text); one undo reverts it",
        ),
        (
            "notebook_edit",
            "replace, insert or delete one cell of a Jupyter notebook; the rest of the file stays byte for byte",
        ),
        ("file_delete", "delete safely: to the trash, undoable"),
        ("undo", "revert the last change (or a given one)"),
    ];
    for (name, what) in lines {
        if has(name) {
            s.push_str(&format!("- {name}: {what}\n"));
        }
    }
    // Every practice names only tools that are served: an agent told to "use edit" on a
    // read-only server, or "glob and grep" where only search_files is served, is misled.
    let finders: Vec<&str> = ["glob", "grep", "search_files", "file_search"]
        .into_iter()
        .filter(|t| has(t))
        .collect();
    let mut practices: Vec<String> = Vec::new();
    if !finders.is_empty() {
        practices.push(format!(
            "Use {} instead of shell commands to find files and text.",
            finders.join(" and ")
        ));
    }
    if has("read_file") {
        practices.push(
            "Read a file before you change it, and cite lines by the numbers read_file shows."
                .into(),
        );
    }
    if has("edit") {
        practices.push(
            "Use edit for modifications, with enough context in old_string to be unique; never rewrite a \
             whole file to change a part."
                .into(),
        );
    }
    if has("read_file") && (has("edit") || has("write_file")) {
        practices.push(
            "Pass the version read_file gave as expected_version when you change a file, so a change made \
             by someone else meanwhile is not overwritten."
                .into(),
        );
    }
    let writes = [
        "edit",
        "write_file",
        "move",
        "apply_patch",
        "notebook_edit",
        "file_delete",
        "undo",
    ]
    .iter()
    .any(|t| has(t));
    if writes {
        let mut p = String::from("Destructive operations need the user's confirmation");
        if has("file_delete") {
            p.push_str("; deletes go to the trash");
        }
        if has("undo") {
            p.push_str("; every change can be undone with undo");
        }
        p.push('.');
        practices.push(p);
    } else {
        practices.push("This server is read-only: no tool here changes files.".into());
    }
    practices.push(
        "Secrets (.env files, keys, credentials) and VCS internals are never accessible: do not try to \
         work around DENIED_PATTERN or PATH_ESCAPE."
            .into(),
    );
    practices
        .push("Errors carry a code and a hint saying what to do instead; follow the hint.".into());
    s.push_str("\nBest practices:\n");
    for (i, p) in practices.iter().enumerate() {
        s.push_str(&format!("{}. {p}\n", i + 1));
    }
    // Last, and said again in every search result and error hint: what the workspace's
    // own config hides.
    for n in ferret.notices() {
        s.push_str(&format!("\nWARNING: {n}.\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::instructions;
    use crate::config::{Config, Mode};
    use crate::context::Ferret;

    fn text(tools: &[&str]) -> String {
        let t = tempfile::tempdir().unwrap();
        let mut c = Config::defaults(Mode::Server);
        c.roots = vec![t.path().to_path_buf()];
        let f = Ferret::new(c).unwrap();
        let tools: Vec<String> = tools.iter().map(|s| s.to_string()).collect();
        instructions(&f, &tools)
    }

    #[test]
    fn a_read_only_server_mentions_no_write_tool() {
        let s = text(&["read_file", "list_directory", "grep", "glob"]);
        for word in ["edit", "undo", "trash", "delete"] {
            assert!(!s.contains(word), "{word} in:\n{s}");
        }
        assert!(s.contains("read-only"));
    }

    #[test]
    fn only_the_seed_search_tools_are_named_when_only_they_are_served() {
        let s = text(&["search_files", "file_search"]);
        assert!(s.contains("Use search_files and file_search instead of shell commands"));
        assert!(
            !s.contains("glob") && !s.contains("grep ") && !s.contains("read_file"),
            "{s}"
        );
    }

    #[test]
    fn a_writing_server_explains_confirmation_trash_and_undo() {
        let s = text(&["read_file", "edit", "file_delete", "undo"]);
        assert!(s.contains("Use edit for modifications"));
        assert!(s.contains("deletes go to the trash; every change can be undone with undo"));
    }
}

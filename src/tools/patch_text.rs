//! The text patch format OpenAI's models are trained to write (Codex's `apply_patch`),
//! parsed into the same changes as `apply_patch`'s structured input:
//!
//! ```text
//! *** Begin Patch
//! *** Add File: path/new.rs
//! +line
//! *** Delete File: path/old.rs
//! *** Update File: path/file.rs
//! *** Move to: path/renamed.rs
//! @@ fn anchor() {
//!  context line
//! -removed line
//! +added line
//! *** End of File
//! *** End Patch
//! ```
//!
//! An update's hunks start at `@@` (the text after it, when there is any, names a line
//! the hunk comes after); ` ` lines are context, `-` lines go, `+` lines come. A hunk is
//! found in the file like an edit's `old_string`, forgiving whitespace the same way.

/// One hunk of an update: `old` (context and removed lines) becomes `new` (context and
/// added lines).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    /// A line the hunk comes after (`@@ header`).
    pub header: Option<String>,
    pub old: String,
    pub new: String,
    /// Every occurrence (structured edits' replace_all); text hunks change one place.
    pub replace_all: bool,
}

/// What a patch does to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileChange {
    Update {
        path: String,
        hunks: Vec<Hunk>,
        move_to: Option<String>,
    },
    Add {
        path: String,
        content: String,
    },
    Delete {
        path: String,
    },
}

impl FileChange {
    pub fn path(&self) -> &str {
        match self {
            FileChange::Update { path, .. }
            | FileChange::Add { path, .. }
            | FileChange::Delete { path } => path,
        }
    }
}

/// Parses a patch; the error names the line (1-based) and what was expected.
pub fn parse(patch: &str) -> Result<Vec<FileChange>, String> {
    let lines: Vec<&str> = patch
        .lines()
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    let mut i = lines
        .iter()
        .position(|l| !l.trim().is_empty())
        .ok_or("the patch is empty")?;
    if lines[i].trim() != "*** Begin Patch" {
        return Err(format!(
            "line {}: a patch starts with \"*** Begin Patch\"",
            i + 1
        ));
    }
    i += 1;
    let mut changes = Vec::new();
    loop {
        let Some(line) = lines.get(i) else {
            return Err("the patch ends without \"*** End Patch\"".into());
        };
        let line = line.trim_end();
        if line == "*** End Patch" {
            break;
        }
        if let Some(path) = line.strip_prefix("*** Add File: ") {
            i += 1;
            let mut content = String::new();
            while let Some(l) = lines.get(i).filter(|l| !l.starts_with("*** ")) {
                match l.strip_prefix('+') {
                    Some(text) => {
                        content.push_str(text);
                        content.push('\n');
                    }
                    None => {
                        return Err(format!(
                            "line {}: every line of an added file starts with \"+\"",
                            i + 1
                        ));
                    }
                }
                i += 1;
            }
            changes.push(FileChange::Add {
                path: path.trim().to_string(),
                content,
            });
        } else if let Some(path) = line.strip_prefix("*** Delete File: ") {
            changes.push(FileChange::Delete {
                path: path.trim().to_string(),
            });
            i += 1;
        } else if let Some(path) = line.strip_prefix("*** Update File: ") {
            i += 1;
            let mut move_to = None;
            if let Some(to) = lines.get(i).and_then(|l| l.strip_prefix("*** Move to: ")) {
                move_to = Some(to.trim().to_string());
                i += 1;
            }
            let (hunks, next) = hunks(&lines, i)?;
            i = next;
            if hunks.is_empty() && move_to.is_none() {
                return Err(format!(
                    "line {i}: the update of {} has no hunks",
                    path.trim()
                ));
            }
            changes.push(FileChange::Update {
                path: path.trim().to_string(),
                hunks,
                move_to,
            });
        } else if line.trim().is_empty() {
            i += 1;
        } else {
            return Err(format!(
                "line {}: expected \"*** Add File: \", \"*** Delete File: \", \"*** Update File: \" or \"*** End Patch\", found {line:?}",
                i + 1
            ));
        }
    }
    if changes.is_empty() {
        return Err("the patch changes no file".into());
    }
    Ok(changes)
}

/// The hunks of an update from line `i`; returns them and the line after.
fn hunks(lines: &[&str], mut i: usize) -> Result<(Vec<Hunk>, usize), String> {
    let mut out: Vec<Hunk> = Vec::new();
    let mut cur: Option<(Option<String>, Vec<&str>, Vec<&str>)> = None;
    let flush = |cur: &mut Option<(Option<String>, Vec<&str>, Vec<&str>)>, out: &mut Vec<Hunk>| {
        if let Some((header, old, new)) = cur.take()
            && (!old.is_empty() || !new.is_empty())
        {
            let join = |v: &[&str]| {
                if v.is_empty() {
                    String::new()
                } else {
                    format!("{}\n", v.join("\n"))
                }
            };
            out.push(Hunk {
                header,
                old: join(&old),
                new: join(&new),
                replace_all: false,
            });
        }
    };
    while let Some(line) = lines.get(i) {
        if *line == "*** End of File" || line.trim_end() == "*** End of File" {
            i += 1;
            continue;
        }
        if line.starts_with("*** ") {
            break;
        }
        if let Some(rest) = line.strip_prefix("@@") {
            flush(&mut cur, &mut out);
            let rest = rest.trim();
            // `@@ -1,3 +1,4 @@` (unified diff numbers) names no line.
            let header = (!rest.is_empty() && !rest.starts_with('-')).then(|| rest.to_string());
            cur = Some((header, Vec::new(), Vec::new()));
            i += 1;
            continue;
        }
        let (_, old, new) = cur.get_or_insert_with(|| (None, Vec::new(), Vec::new()));
        match line.chars().next() {
            Some(' ') => {
                old.push(&line[1..]);
                new.push(&line[1..]);
            }
            Some('-') => old.push(&line[1..]),
            Some('+') => new.push(&line[1..]),
            // An empty line inside a hunk is an empty context line (editors strip the space).
            None => {
                old.push("");
                new.push("");
            }
            Some(_) => {
                return Err(format!(
                    "line {}: a hunk line starts with \" \", \"-\" or \"+\", found {line:?}",
                    i + 1
                ));
            }
        }
        i += 1;
    }
    flush(&mut cur, &mut out);
    Ok((out, i))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_kinds_and_a_move_parse() {
        let p = "*** Begin Patch\n*** Add File: a/new.txt\n+one\n+two\n*** Delete File: old.txt\n\
*** Update File: src/lib.rs\n*** Move to: src/core.rs\n@@ fn main() {\n     let x = 1;\n-    run(x);\n+    run(x + 1);\n\
@@\n-a\n+b\n*** End of File\n*** End Patch\n";
        let c = parse(p).expect("parses");
        assert_eq!(
            c[0],
            FileChange::Add {
                path: "a/new.txt".into(),
                content: "one\ntwo\n".into()
            }
        );
        assert_eq!(
            c[1],
            FileChange::Delete {
                path: "old.txt".into()
            }
        );
        let FileChange::Update {
            path,
            hunks,
            move_to,
        } = &c[2]
        else {
            panic!("an update");
        };
        assert_eq!(path, "src/lib.rs");
        assert_eq!(move_to.as_deref(), Some("src/core.rs"));
        assert_eq!(hunks.len(), 2);
        assert_eq!(hunks[0].header.as_deref(), Some("fn main() {"));
        assert_eq!(hunks[0].old, "    let x = 1;\n    run(x);\n");
        assert_eq!(hunks[0].new, "    let x = 1;\n    run(x + 1);\n");
        assert_eq!(
            (hunks[1].old.as_str(), hunks[1].new.as_str()),
            ("a\n", "b\n")
        );
    }

    #[test]
    fn bad_patches_name_the_line() {
        assert!(parse("").unwrap_err().contains("empty"));
        assert!(parse("hello\n").unwrap_err().contains("line 1"));
        assert!(
            parse("*** Begin Patch\n*** Add File: x\n+a\n")
                .unwrap_err()
                .contains("End Patch")
        );
        let e =
            parse("*** Begin Patch\n*** Update File: x\n@@\n?bad\n*** End Patch\n").unwrap_err();
        assert!(e.contains("line 4"), "{e}");
        let e = parse("*** Begin Patch\n*** Frobnicate: x\n*** End Patch\n").unwrap_err();
        assert!(e.contains("line 2"), "{e}");
    }

    #[test]
    fn crlf_patches_and_unified_hunk_headers_are_read() {
        let p = "*** Begin Patch\r\n*** Update File: x\r\n@@ -1,2 +1,2 @@\r\n-a\r\n+b\r\n*** End Patch\r\n";
        let c = parse(p).expect("parses");
        let FileChange::Update { hunks, .. } = &c[0] else {
            panic!("an update");
        };
        assert_eq!(hunks[0].header, None);
        assert_eq!(hunks[0].old, "a\n");
    }
}

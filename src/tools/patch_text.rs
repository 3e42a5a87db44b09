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
//!
//! What models emit around the format is read where it reads one way only (see
//! [`parse`]): blank lines around the end markers, indented markers, a heredoc or a ```
//! fence around the patch. Anything that could be read two ways is an error naming its
//! line.

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
    /// The hunk's lines are whole lines of the file (a `*** Begin Patch` hunk); a
    /// structured edit's old_string may be any part of the text.
    pub whole_lines: bool,
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

/// The patch's own markers (trimmed), by what they say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Marker<'a> {
    End,
    Add(&'a str),
    Delete(&'a str),
    Update(&'a str),
    MoveTo(&'a str),
    EndOfFile,
}

fn marker(t: &str) -> Option<Marker<'_>> {
    let path = |p: &'static str| t.strip_prefix(p).map(str::trim);
    Some(match t {
        "*** End Patch" => Marker::End,
        "*** End of File" => Marker::EndOfFile,
        _ => {
            if let Some(p) = path("*** Add File: ") {
                Marker::Add(p)
            } else if let Some(p) = path("*** Delete File: ") {
                Marker::Delete(p)
            } else if let Some(p) = path("*** Update File: ") {
                Marker::Update(p)
            } else {
                Marker::MoveTo(path("*** Move to: ")?)
            }
        }
    })
}

fn blank(l: &str) -> bool {
    l.trim().is_empty()
}

/// Indented by exactly one space: inside an update's hunks such a line is a context line
/// (the file's own line, which may itself look like a marker), not an indented marker.
fn one_space(l: &str) -> bool {
    l.starts_with(' ') && !l[1..].starts_with([' ', '\t'])
}

/// What closes a wrapper opened by `first` (trimmed): a ``` fence, or a heredoc as models
/// copy it from shell examples (`apply_patch <<'EOF'`, `<<"EOF"`, `<<EOF`, `<<'PATCH'`).
fn wrapper(first: &str) -> Option<String> {
    if let Some(info) = first.strip_prefix("```") {
        return info
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            .then(|| "```".to_string());
    }
    let rest = first
        .strip_prefix("apply_patch")
        .or_else(|| first.strip_prefix("applypatch"))
        .map(str::trim_start)
        .unwrap_or(first);
    let rest = rest.strip_prefix("<<")?;
    let rest = rest.strip_prefix('-').unwrap_or(rest).trim_start();
    let word = match rest.chars().next()? {
        q @ ('\'' | '"') => rest[1..].strip_suffix(q)?,
        _ => rest,
    };
    (!word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .then(|| word.to_string())
}

/// The lines of the patch proper, `lo..hi`: a ``` fence and a heredoc around it (either,
/// both, the heredoc inside the fence) taken off. The closing line is the last line that
/// is not blank; a heredoc's word on a line before it would end the heredoc there in a
/// shell, so it is an error, not a guess.
fn unwrap(lines: &[&str]) -> Result<(usize, usize), String> {
    let (mut lo, mut hi) = (0, lines.len());
    for _ in 0..2 {
        let Some(f) = (lo..hi).find(|&i| !blank(lines[i])) else {
            break;
        };
        let first = lines[f].trim();
        let Some(closer) = wrapper(first) else {
            break;
        };
        let l = (f + 1..hi).rev().find(|&i| !blank(lines[i]));
        let Some(l) = l.filter(|&l| lines[l].trim() == closer) else {
            return Err(format!(
                "line {}: {first:?} opens a wrapper that no last line {closer:?} closes",
                f + 1
            ));
        };
        if closer != "```"
            && let Some(j) = (f + 1..l).find(|&j| lines[j].trim() == closer)
        {
            return Err(format!(
                "line {}: {closer:?} ends the heredoc opened on line {} before the patch's last line",
                j + 1,
                f + 1
            ));
        }
        (lo, hi) = (f + 1, l);
    }
    Ok((lo, hi))
}

/// Parses a patch; the error names the line (1-based) and what was expected.
///
/// Leniencies (each reads one way only; anything else is an error naming the line):
/// blank lines anywhere between changes, before `*** End Patch` and after `*** End of
/// File` (a hunk's trailing blank lines are separators, not context); blank lines after
/// `*** End Patch`; markers indented by spaces or tabs, except that inside an update's
/// hunks a line indented by one space is a context line (the file's own line) unless it
/// is `*** End of File` or `*** End Patch` with only such lines after it; the patch
/// wrapped in a heredoc (`apply_patch <<'EOF'` … `EOF`) and/or a ``` fence.
pub fn parse(patch: &str) -> Result<Vec<FileChange>, String> {
    let all: Vec<&str> = patch
        .lines()
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    if all.iter().all(|l| blank(l)) {
        return Err("the patch is empty".into());
    }
    let (lo, hi) = unwrap(&all)?;
    let lines = &all[..hi];
    let mut i = (lo..hi)
        .find(|&i| !blank(lines[i]))
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
        let t = line.trim();
        if t.is_empty() {
            i += 1;
            continue;
        }
        match marker(t) {
            Some(Marker::End) => {
                if let Some(j) = (i + 1..hi).find(|&j| !blank(lines[j])) {
                    return Err(format!(
                        "line {}: text after \"*** End Patch\" (found {:?}); one patch per call",
                        j + 1,
                        lines[j]
                    ));
                }
                break;
            }
            Some(Marker::Add(path)) => {
                i += 1;
                let mut content = String::new();
                while let Some(l) = lines.get(i) {
                    if let Some(text) = l.strip_prefix('+') {
                        content.push_str(text);
                        content.push('\n');
                        i += 1;
                        continue;
                    }
                    if marker(l.trim()).is_some() || l.starts_with("*** ") {
                        break;
                    }
                    // Blank lines before the next marker separate; inside the file they
                    // would be a guess (an empty line is "+").
                    let next = (i..hi).find(|&j| !blank(lines[j]));
                    if blank(l) && next.is_none_or(|j| marker(lines[j].trim()).is_some()) {
                        i = next.unwrap_or(hi);
                        break;
                    }
                    return Err(format!(
                        "line {}: every line of an added file starts with \"+\" (an empty line is \"+\")",
                        i + 1
                    ));
                }
                changes.push(FileChange::Add {
                    path: path.to_string(),
                    content,
                });
            }
            Some(Marker::Delete(path)) => {
                changes.push(FileChange::Delete {
                    path: path.to_string(),
                });
                i += 1;
            }
            Some(Marker::Update(path)) => {
                i += 1;
                let mut move_to = None;
                if let Some(Some(Marker::MoveTo(to))) = lines.get(i).map(|l| marker(l.trim())) {
                    move_to = Some(to.to_string());
                    i += 1;
                }
                let (hunks, next) = hunks(lines, i)?;
                i = next;
                if hunks.is_empty() && move_to.is_none() {
                    return Err(format!("line {i}: the update of {path} has no hunks"));
                }
                changes.push(FileChange::Update {
                    path: path.to_string(),
                    hunks,
                    move_to,
                });
            }
            _ => {
                return Err(format!(
                    "line {}: expected \"*** Add File: \", \"*** Delete File: \", \"*** Update File: \" or \"*** End Patch\", found {line:?}",
                    i + 1
                ));
            }
        }
    }
    if changes.is_empty() {
        return Err("the patch changes no file".into());
    }
    Ok(changes)
}

/// Whether `line`, inside an update's hunks at `i`, is a marker that ends them (or, for
/// `*** End of File`, is skipped).
fn hunk_marker<'a>(lines: &[&'a str], i: usize) -> Option<Marker<'a>> {
    let line = lines[i];
    let t = line.trim();
    let m = marker(t)?;
    if !one_space(line) {
        return Some(m);
    }
    // One space: a context line, unless it ends the patch with nothing else after it.
    let ending =
        |l: &str| blank(l) || matches!(marker(l.trim()), Some(Marker::End | Marker::EndOfFile));
    (matches!(m, Marker::End | Marker::EndOfFile) && lines[i..].iter().all(|l| ending(l)))
        .then_some(m)
}

/// The hunks of an update from line `i`; returns them and the line after.
fn hunks(lines: &[&str], mut i: usize) -> Result<(Vec<Hunk>, usize), String> {
    let mut out: Vec<Hunk> = Vec::new();
    let mut cur: Option<(Option<String>, Vec<&str>, Vec<&str>)> = None;
    // Blank lines not yet known to be context (a hunk line follows) or separators (a
    // marker or `@@` follows).
    let mut pending: Vec<usize> = Vec::new();
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
                whole_lines: true,
            });
        }
    };
    while let Some(&line) = lines.get(i) {
        if let Some(m) = hunk_marker(lines, i) {
            pending.clear();
            if m == Marker::EndOfFile {
                i += 1;
                continue;
            }
            break;
        }
        if line.starts_with("*** ") {
            break;
        }
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix("@@").filter(|_| !one_space(line)) {
            pending.clear();
            flush(&mut cur, &mut out);
            let rest = rest.trim();
            // `@@ -1,3 +1,4 @@` (unified diff numbers) names no line.
            let header = (!rest.is_empty() && !rest.starts_with('-')).then(|| rest.to_string());
            cur = Some((header, Vec::new(), Vec::new()));
            i += 1;
            continue;
        }
        if blank(line) {
            pending.push(i);
            i += 1;
            continue;
        }
        let (_, old, new) = cur.get_or_insert_with(|| (None, Vec::new(), Vec::new()));
        for j in pending.drain(..).chain(std::iter::once(i)) {
            let line = lines[j];
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
                        j + 1
                    ));
                }
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

    /// The one update hunk of a one-file patch: (old, new).
    fn only_hunk(p: &str) -> (String, String) {
        let c = parse(p).unwrap_or_else(|e| panic!("{e}: {p:?}"));
        let [FileChange::Update { hunks, .. }] = c.as_slice() else {
            panic!("one update: {c:?}");
        };
        let [h] = hunks.as_slice() else {
            panic!("one hunk: {hunks:?}");
        };
        (h.old.clone(), h.new.clone())
    }

    const PLAIN: &str = "*** Begin Patch\n*** Update File: a\n@@\n x\n-a\n+b\n*** End Patch\n";

    #[test]
    fn blank_lines_before_end_patch_and_after_end_of_file_are_separators() {
        let want = ("x\na\n".to_string(), "x\nb\n".to_string());
        for p in [
            "*** Begin Patch\n*** Update File: a\n@@\n x\n-a\n+b\n\n*** End Patch\n",
            "*** Begin Patch\n*** Update File: a\n@@\n x\n-a\n+b\n \n\t\n*** End Patch\n",
            "*** Begin Patch\n*** Update File: a\n@@\n x\n-a\n+b\n*** End of File\n\n*** End Patch\n",
            "*** Begin Patch\n*** Update File: a\n@@\n x\n-a\n+b\n\n*** End of File\n  \n*** End Patch\n\n  \n",
            "\n\n*** Begin Patch\n\n*** Update File: a\n@@\n x\n-a\n+b\n\n\n*** End Patch",
        ] {
            assert_eq!(only_hunk(p), want, "{p:?}");
        }
        // A blank line between hunk lines is still an empty context line.
        let (old, new) =
            only_hunk("*** Begin Patch\n*** Update File: a\n@@\n x\n\n-a\n+b\n*** End Patch\n");
        assert_eq!((old.as_str(), new.as_str()), ("x\n\na\n", "x\n\nb\n"));
        // Added files: blank lines before the next marker separate; inside, they are an error.
        let c =
            parse("*** Begin Patch\n*** Add File: n\n+one\n\n*** Delete File: d\n*** End Patch\n")
                .expect("parses");
        assert_eq!(c.len(), 2);
        let e =
            parse("*** Begin Patch\n*** Add File: n\n+one\n\n+two\n*** End Patch\n").unwrap_err();
        assert!(e.contains("line 4"), "{e}");
    }

    #[test]
    fn text_after_end_patch_is_an_error_naming_its_line() {
        let e = parse(&format!("{PLAIN}trailing words\n")).unwrap_err();
        assert!(e.contains("line 8") && e.contains("after"), "{e}");
        let e = parse(&format!("{PLAIN}{PLAIN}")).unwrap_err();
        assert!(e.contains("line 8"), "{e}");
        assert_eq!(only_hunk(&format!("{PLAIN} \n\t\n\n")).1, "x\nb\n");
    }

    #[test]
    fn indented_markers_are_read_as_markers() {
        for p in [
            " *** Begin Patch\n *** Update File: a\n@@\n x\n-a\n+b\n *** End Patch\n",
            "*** Begin Patch\n\t*** Update File: a\n  @@\n x\n-a\n+b\n  *** End of File\n *** End Patch \n",
            "*** Begin Patch\n  *** Update File: a\n\t@@\n x\n-a\n+b\n *** End of File\n *** End Patch\n",
        ] {
            assert_eq!(only_hunk(p), ("x\na\n".into(), "x\nb\n".into()), "{p:?}");
        }
        let c = parse(
            "*** Begin Patch\n *** Add File: n\n+one\n  *** Update File: a\n  *** Move to: b\n@@\n-a\n+b\n  *** Delete File: d\n *** End Patch\n",
        )
        .expect("parses");
        assert_eq!(c.len(), 3);
        assert!(matches!(&c[1], FileChange::Update { move_to: Some(m), .. } if m == "b"));
    }

    #[test]
    fn inside_hunks_one_space_is_a_context_line_even_when_it_looks_like_a_marker() {
        // Patching a file that holds patches: its own lines are context.
        let (old, _) = only_hunk(
            "*** Begin Patch\n*** Update File: doc.md\n@@\n *** Update File: x\n @@ fn a\n *** End Patch\n-old\n+new\n*** End Patch\n",
        );
        assert_eq!(old, "*** Update File: x\n@@ fn a\n*** End Patch\nold\n");
    }

    #[test]
    fn a_heredoc_or_a_fence_around_the_patch_is_taken_off() {
        let want = only_hunk(PLAIN);
        for wrap in [
            "apply_patch <<'EOF'\n{}EOF\n",
            "apply_patch <<\"EOF\"\n{}EOF",
            "<<EOF\n{}EOF\n\n",
            "<<'PATCH'\n{}PATCH\n",
            "  apply_patch <<-'EOF'\n{}\tEOF\n",
            "```\n{}```\n",
            "```bash\napply_patch <<'EOF'\n{}EOF\n```\n",
            "```diff\n<<'EOF'\n{}EOF\n```",
        ] {
            let p = wrap.replace("{}", PLAIN);
            assert_eq!(only_hunk(&p), want, "{p:?}");
        }
    }

    #[test]
    fn a_wrapper_that_does_not_close_cleanly_is_an_error_naming_the_line() {
        // Not closed.
        let e = parse(&format!("apply_patch <<'EOF'\n{PLAIN}")).unwrap_err();
        assert!(e.contains("line 1"), "{e}");
        let e = parse(&format!("```\n{PLAIN}")).unwrap_err();
        assert!(e.contains("line 1"), "{e}");
        // Closed by another word.
        let e = parse(&format!("<<'EOF'\n{PLAIN}PATCH\n")).unwrap_err();
        assert!(e.contains("line 1"), "{e}");
        // The word inside: a shell would end the heredoc there.
        let e = parse(&format!("<<'EOF'\n{PLAIN}EOF\n{PLAIN}EOF\n")).unwrap_err();
        assert!(e.contains("line 9"), "{e}");
        // Text after the closer.
        let e = parse(&format!("<<'EOF'\n{PLAIN}EOF\nmore\n")).unwrap_err();
        assert!(e.contains("line 1"), "{e}");
        // A closer with no opener is text after End Patch.
        let e = parse(&format!("{PLAIN}EOF\n")).unwrap_err();
        assert!(e.contains("line 8"), "{e}");
    }
}

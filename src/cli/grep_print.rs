//! How `ferret grep` prints for a person, the way ripgrep does: on a terminal, each
//! file's path as a heading with its matching lines (`line:text`) and context lines
//! (`line-text`) under it, a blank line between files, `--` between groups that are not
//! contiguous, the path in magenta, line numbers in green and each match in bold red.
//! Piped, one `path:line:text` per line, so `cut`, `sort` and editors' quickfix lists
//! read it. Colour is decided apart from the layout (`--color never|auto|always`, with
//! `NO_COLOR` and `CLICOLOR_FORCE` honoured under auto, as [`anstream`] decides it); with
//! colour off the styles are empty and nothing is written for them.
//!
//! The tool's structured output carries no match offsets (they would cost every MCP
//! client tokens to say what a terminal shows in colour), so matches are found again in
//! each shown line with the same matcher the search built. A multiline match is
//! highlighted line by line where its parts match on their own.

use crate::search::{self, GrepQuery};
use crate::tools::grep::{FileResult, Output, OutputMode, Params};
use crate::workspace::{shown, shown_in_line};
use anstyle::{AnsiColor, Style};
use grep_matcher::Matcher;
use grep_regex::RegexMatcher;
use std::io::{self, Write};

/// What the output looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Paths as headings with lines under them (rg's `--heading`).
    pub heading: bool,
    /// ANSI colours (ripgrep's defaults).
    pub colour: bool,
    /// Paths with lines and counts: as rg, not when the one path searched is a file
    /// (`-H` and `-I` decide otherwise).
    pub filename: bool,
    /// Line numbers with each line (off with `-N`).
    pub line_numbers: bool,
}

/// The styles in use: ripgrep's colours, or plain styles that render as nothing.
struct Palette {
    path: Style,
    line: Style,
    matched: Style,
}

impl Palette {
    fn new(colour: bool) -> Palette {
        if colour {
            Palette {
                path: AnsiColor::Magenta.on_default(),
                line: AnsiColor::Green.on_default(),
                matched: AnsiColor::Red.on_default().bold(),
            }
        } else {
            Palette {
                path: Style::new(),
                line: Style::new(),
                matched: Style::new(),
            }
        }
    }
}

/// Finds matches in the lines shown: the search's own matcher, built from the same
/// params. `None` when the pattern cannot be built (the search would have refused it).
pub fn highlighter(p: &Params) -> Option<RegexMatcher> {
    search::matcher(&GrepQuery {
        pattern: p.pattern.clone(),
        fixed_strings: p.fixed_strings,
        ignore_case: p.ignore_case,
        multiline: p.multiline,
        word: p.word,
        ..GrepQuery::default()
    })
    .ok()
}

/// Prints a grep result.
pub fn print(
    out: &mut impl Write,
    o: &Output,
    matcher: Option<&RegexMatcher>,
    layout: Layout,
) -> io::Result<()> {
    let c = &Palette::new(layout.colour);
    let path = c.path;
    match o.mode {
        OutputMode::FilesWithMatches => {
            for f in &o.files {
                writeln!(out, "{path}{}{path:#}", shown(&f.path))?;
            }
        }
        OutputMode::Count if !layout.filename => {
            for f in &o.files {
                writeln!(out, "{}", f.count.unwrap_or(0))?;
            }
        }
        OutputMode::Count => {
            for f in &o.files {
                writeln!(
                    out,
                    "{path}{}{path:#}:{}",
                    shown(&f.path),
                    f.count.unwrap_or(0)
                )?;
            }
        }
        OutputMode::Content => {
            for (i, f) in o.files.iter().enumerate() {
                if layout.heading && layout.filename {
                    if i > 0 {
                        writeln!(out)?;
                    }
                    writeln!(out, "{path}{}{path:#}", shown(&f.path))?;
                }
                lines(
                    out,
                    f,
                    o.context,
                    i == 0 || layout.heading,
                    matcher,
                    layout,
                    c,
                )?;
            }
        }
    }
    if let Some(i) = &o.incomplete {
        // On stderr, like the note below: stdout stays lines of results.
        eprint!("ferret: {}", crate::tools::render_incomplete(i));
    } else if o.truncated {
        let shown: usize = match o.mode {
            OutputMode::Content => o
                .files
                .iter()
                .map(|f| f.lines.as_ref().map_or(0, Vec::len))
                .sum(),
            _ => o.files.len(),
        };
        // On stderr: the note is for the person, and stdout stays lines of results.
        eprintln!(
            "ferret: showing the first {shown} results of {} matching files; pass --max 0 for all",
            o.file_count
        );
    }
    Ok(())
}

/// One file's lines: `--` before each group that does not follow on from the last one
/// (the first group of the whole output, or of a file under a heading, has none).
fn lines(
    out: &mut impl Write,
    f: &FileResult,
    context: bool,
    first: bool,
    matcher: Option<&RegexMatcher>,
    layout: Layout,
    c: &Palette,
) -> io::Result<()> {
    let (path, line) = (c.path, c.line);
    let mut prev: Option<u64> = None;
    for l in f.lines.iter().flatten() {
        let gap = prev.is_none_or(|p| l.line != p + 1);
        let opens_output = prev.is_none() && first;
        if context && gap && !opens_output {
            writeln!(out, "--")?;
        }
        prev = Some(l.line);
        let sep = if l.is_match { ':' } else { '-' };
        if !layout.heading && layout.filename {
            write!(out, "{path}{}{path:#}{sep}", shown_in_line(&f.path))?;
        }
        if layout.line_numbers {
            write!(out, "{line}{}{line:#}{sep}", l.line)?;
        }
        match matcher.filter(|_| l.is_match) {
            Some(m) if layout.colour => highlighted(out, &l.text, m, c.matched)?,
            _ => out.write_all(l.text.as_bytes())?,
        }
        writeln!(out)?;
    }
    Ok(())
}

/// Writes `text` with every match in bold red.
fn highlighted(out: &mut impl Write, text: &str, m: &RegexMatcher, style: Style) -> io::Result<()> {
    let bytes = text.as_bytes();
    let mut at = 0;
    let mut failed = None;
    // The matcher cannot fail on text (its error type is for other matchers); if it
    // did, the rest of the line is simply shown plain.
    let _ = m.find_iter(bytes, |span| {
        // An empty match (`^`, `x*`) has nothing to colour.
        if span.start() == span.end() {
            return true;
        }
        let wrote = out
            .write_all(&bytes[at..span.start()])
            .and_then(|()| write!(out, "{style}"))
            .and_then(|()| out.write_all(&bytes[span.start()..span.end()]))
            .and_then(|()| write!(out, "{style:#}"));
        at = span.end();
        failed = wrote.err();
        failed.is_none()
    });
    match failed {
        Some(e) => Err(e),
        None => out.write_all(&bytes[at..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::sink::Line;

    /// (line number, text, is a match)
    type Shown<'a> = (u64, &'a str, bool);

    fn output(files: Vec<(&str, Vec<Shown>)>, context: bool) -> Output {
        Output {
            file_count: files.len() as u64,
            files: files
                .into_iter()
                .map(|(p, ls)| FileResult {
                    path: p.into(),
                    count: None,
                    lines: Some(
                        ls.into_iter()
                            .map(|(line, text, is_match)| Line {
                                line,
                                text: text.into(),
                                is_match,
                            })
                            .collect(),
                    ),
                    charset: None,
                })
                .collect(),
            match_count: Some(0),
            engine: "scan".into(),
            warnings: Vec::new(),
            incomplete: None,
            truncated: false,
            left_out: None,
            mode: OutputMode::Content,
            context,
            offset: 0,
        }
    }

    fn params(pattern: &str) -> Params {
        serde_json::from_value(serde_json::json!({ "pattern": pattern })).expect("params from json")
    }

    fn printed(o: &Output, pattern: &str, heading: bool) -> String {
        let m = highlighter(&params(pattern));
        let mut v = Vec::new();
        print(
            &mut v,
            o,
            m.as_ref(),
            Layout {
                heading,
                colour: true,
                filename: true,
                line_numbers: true,
            },
        )
        .expect("write to a Vec");
        String::from_utf8(v).expect("utf-8")
    }

    #[test]
    fn a_heading_groups_each_files_lines_and_colours_them_like_rg() {
        let o = output(
            vec![
                ("a.rs", vec![(1, "fn a() {}", true), (2, "fn b() {}", true)]),
                ("b.rs", vec![(7, "let fnx = 1;", true)]),
            ],
            false,
        );
        let s = printed(&o, "fn", true);
        let plain = anstream::adapter::strip_str(&s).to_string();
        assert_eq!(
            plain,
            "a.rs\n1:fn a() {}\n2:fn b() {}\n\nb.rs\n7:let fnx = 1;\n"
        );
        assert!(s.contains("\x1b[35ma.rs\x1b[0m\n"), "{s:?}");
        assert!(s.contains("\x1b[32m1\x1b[0m:"), "{s:?}");
        assert!(s.contains("let \x1b[1m\x1b[31mfn\x1b[0mx"), "{s:?}");
    }

    #[test]
    fn without_a_heading_each_line_names_its_file() {
        let o = output(
            vec![
                ("a.rs", vec![(1, "x", false), (2, "fn", true)]),
                ("b.rs", vec![(9, "fn", true)]),
            ],
            true,
        );
        let s = printed(&o, "fn", false);
        let plain = anstream::adapter::strip_str(&s).to_string();
        assert_eq!(plain, "a.rs-1-x\na.rs:2:fn\n--\nb.rs:9:fn\n");
    }

    #[test]
    fn context_groups_under_a_heading_are_parted_by_dashes() {
        let o = output(
            vec![(
                "a.rs",
                vec![
                    (1, "fn", true),
                    (2, "x", false),
                    (9, "y", false),
                    (10, "fn", true),
                ],
            )],
            true,
        );
        let plain = anstream::adapter::strip_str(&printed(&o, "fn", true)).to_string();
        assert_eq!(plain, "a.rs\n1:fn\n2-x\n--\n9-y\n10:fn\n");
    }

    #[test]
    fn empty_matches_and_context_lines_are_not_coloured() {
        let o = output(vec![("a", vec![(1, "abc", true), (2, "abc", false)])], true);
        let s = printed(&o, "z*", true);
        assert!(!s.contains("\x1b[1m"), "{s:?}");
        let s = printed(&o, "b", true);
        assert_eq!(
            s.matches("\x1b[1m").count(),
            1,
            "only the match line: {s:?}"
        );
    }
}

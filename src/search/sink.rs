//! The grep-searcher `Sink` that turns one file's matches into ferret's result lines.
//!
//! It keeps search apart from output (ripgrep's printer does the same): the engine
//! decides which files to search, the sink records what one file contributed, and the
//! tools render it.

use grep_matcher::Matcher;
use grep_searcher::{Searcher, Sink, SinkContext, SinkFinish, SinkMatch};
use serde::Serialize;
use std::io;

/// Longest line, in bytes, shown whole; longer lines (minified code) are cut to a window
/// around the first match so one line cannot flood an agent's context.
pub const MAX_LINE_BYTES: usize = 400;

/// One output line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Line {
    /// 1-based line number.
    pub line: u64,
    pub text: String,
    /// true for a matching line, false for a context line.
    #[serde(rename = "match")]
    pub is_match: bool,
}

/// What the sink records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record {
    /// Only whether the file matches; stop at the first match.
    First,
    /// Count matching lines.
    Count,
    /// Count, and keep up to this many output lines.
    Lines(usize),
}

pub struct FileSink<'m, M> {
    matcher: &'m M,
    record: Record,
    /// Lines longer than this are cut around the match (0: never).
    columns: usize,
    pub match_count: u64,
    pub lines: Vec<Line>,
    /// Binary data was found (the searcher quit there): the file is not a result.
    pub binary: bool,
    /// Lines were left out because the line budget was full.
    pub capped: bool,
}

impl<'m, M: Matcher> FileSink<'m, M> {
    pub fn new(matcher: &'m M, record: Record, columns: usize) -> Self {
        FileSink {
            matcher,
            record,
            columns,
            match_count: 0,
            lines: Vec::new(),
            binary: false,
            capped: false,
        }
    }

    fn keep(&mut self) -> bool {
        match self.record {
            Record::Lines(n) if self.lines.len() < n => true,
            Record::Lines(_) => {
                self.capped = true;
                false
            }
            _ => false,
        }
    }
}

impl<M: Matcher> Sink for FileSink<'_, M> {
    type Error = io::Error;

    fn matched(&mut self, searcher: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, io::Error> {
        if self.record == Record::First {
            self.match_count += 1;
            return Ok(false);
        }
        // Multiline, one call covers a run of matches that touch (or share lines): as
        // ripgrep's `-U -c`, each is counted. Line by line, a call is one matching line.
        if searcher.multi_line_with_matcher(self.matcher) {
            let mut n = 0u64;
            let _ = self.matcher.find_iter(mat.bytes(), |_| {
                n += 1;
                true
            });
            self.match_count += n.max(1);
        } else {
            self.match_count += 1;
        }
        if self.keep() {
            let first = mat.line_number().unwrap_or(0);
            for (i, line) in mat.lines().enumerate() {
                if !self.keep() {
                    break;
                }
                let text = cut(line, self.columns, |l| {
                    self.matcher.find(l).ok().flatten().map(|m| m.start())
                });
                self.lines.push(Line {
                    line: first + i as u64,
                    text,
                    is_match: true,
                });
            }
        }
        Ok(true)
    }

    fn context(&mut self, _: &Searcher, ctx: &SinkContext<'_>) -> Result<bool, io::Error> {
        if self.keep() {
            self.lines.push(Line {
                line: ctx.line_number().unwrap_or(0),
                text: cut(ctx.bytes(), self.columns, |_| None),
                is_match: false,
            });
        }
        Ok(true)
    }

    fn binary_data(&mut self, searcher: &Searcher, _offset: u64) -> Result<bool, io::Error> {
        // As ripgrep does for files it finds by walking: a file with a NUL byte is binary
        // and contributes nothing, even matches seen before the NUL.
        if searcher.binary_detection().quit_byte().is_some() {
            self.binary = true;
        }
        Ok(true)
    }

    fn finish(&mut self, _: &Searcher, fin: &SinkFinish) -> Result<(), io::Error> {
        if fin.binary_byte_offset().is_some() && self.record != Record::First {
            self.binary = true;
        }
        Ok(())
    }
}

/// A line as text: terminator dropped, invalid UTF-8 replaced, and when longer than
/// `columns` bytes (`max_columns`; 0: never) cut to that around the first match (`find`
/// gives its byte offset), with a marker giving the line's whole length and the part
/// shown, as ripgrep's `--max-columns-preview` does.
pub fn cut(line: &[u8], columns: usize, find: impl FnOnce(&[u8]) -> Option<usize>) -> String {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if columns == 0 || line.len() <= columns {
        return String::from_utf8_lossy(line).into_owned();
    }
    let at = find(line).unwrap_or(0);
    let mut start = at.saturating_sub(columns / 4);
    let mut end = (start + columns).min(line.len());
    // Cut on character boundaries.
    while start > 0 && (line[start] & 0xC0) == 0x80 {
        start -= 1;
    }
    while end < line.len() && (line[end] & 0xC0) == 0x80 {
        end += 1;
    }
    let mut s = format!(
        "[line of {} bytes, bytes {}-{end} shown] ",
        line.len(),
        start + 1
    );
    if start > 0 {
        s.push('…');
    }
    s.push_str(&String::from_utf8_lossy(&line[start..end]));
    if end < line.len() {
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_are_cut_around_the_match() {
        let mut line = "a".repeat(10_000);
        line.push_str("NEEDLE");
        line.push_str(&"b".repeat(10_000));
        line.push('\n');
        let s = cut(line.as_bytes(), MAX_LINE_BYTES, |l| {
            l.windows(6).position(|w| w == b"NEEDLE")
        });
        assert!(s.contains("NEEDLE"), "{s}");
        assert!(s.len() < MAX_LINE_BYTES + 60, "{}", s.len());
        assert!(
            s.starts_with("[line of 20006 bytes, bytes 9901-10300 shown] …"),
            "{s}"
        );
        assert!(s.ends_with('…'));
        assert_eq!(cut(b"short\r\n", MAX_LINE_BYTES, |_| None), "short");
        // multi-byte characters are never split
        let wide = "é".repeat(1000);
        let s = cut(wide.as_bytes(), MAX_LINE_BYTES, |_| Some(501));
        assert!(s.contains('é'));
        // 0: never cut
        assert_eq!(cut(line.as_bytes(), 0, |_| None).len(), 20006);
    }
}

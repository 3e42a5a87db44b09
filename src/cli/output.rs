//! Printing to standard output. A closed pipe (`ferret grep x | head -1`) ends the
//! command quietly with success, as ripgrep does: the reader has what it wanted.

use serde::Serialize;
use std::io::Write;

/// Whether an error is the reader going away.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

pub fn print_json(v: &impl Serialize) -> anyhow::Result<()> {
    // Buffered: stdout is line-buffered, and pretty JSON is a line per value — a glob
    // of 30 000 paths would otherwise be 30 000 writes.
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    serde_json::to_writer_pretty(&mut out, v).map_err(std::io::Error::from)?;
    writeln!(out)?;
    out.flush()?;
    Ok(())
}

pub fn print_text(s: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(s.as_bytes())?;
    if !s.ends_with('\n') {
        writeln!(out)?;
    }
    Ok(())
}

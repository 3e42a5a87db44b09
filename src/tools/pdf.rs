//! PDFs read as text: `read_file` of a file whose first bytes are `%PDF-` gives each
//! page's text (after a `[page k of N]` line), paged with offset and limit like any text.
//!
//! The parse never runs in the server: a hostile PDF (a flate bomb, a deep or looping
//! object graph, a parser bug that panics) meets a child process, the `ferret` binary
//! run with the hidden argument [`HELPER_ARG`], which reads the PDF on stdin, limits
//! itself ([`crate::platform::limit_self`]: [`MEMORY`] of address space, [`CPU_SECONDS`]
//! of CPU) before it reads a byte, and writes the text as JSON on stdout. The server
//! waits at most [`WALL`] (or the call's own deadline, when sooner) and reads at most
//! [`MAX_ANSWER`] bytes of its answer, then kills it. Whatever the child does, the server
//! answers: the text, or a refusal with a code and a hint.
//!
//! The extractor is `lopdf` (pure Rust, maintained, with its own bound on each page's
//! decompressed content, [`PAGE_CONTENT`]).

use crate::error::{ErrorCode, ToolError, ToolResult};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The MIME type `read_file` names for a PDF read as text.
pub const MIME: &str = "application/pdf";

/// The hidden first argument that runs the `ferret` binary as the PDF helper.
pub const HELPER_ARG: &str = "__pdf-text";

/// The variable the server passes its pid to the helper in (see
/// [`crate::platform::die_with_parent`]).
const PARENT_VAR: &str = "FERRET_PDF_PARENT";

/// The helper's address space.
pub const MEMORY: u64 = 512 << 20;

/// The helper's CPU time.
pub const CPU_SECONDS: u64 = 5;

/// The longest the server waits for the helper (the call's deadline, when sooner, ends
/// the wait first).
pub const WALL: Duration = Duration::from_secs(20);

/// The most bytes of the helper's answer read; a longer one is not believed.
pub const MAX_ANSWER: usize = 64 << 20;

/// The most bytes one page's content may decompress to.
pub const PAGE_CONTENT: usize = 64 << 20;

/// The most bytes of PDF the helper reads from stdin.
pub const MAX_INPUT: u64 = 256 << 20;

static HELPER: OnceLock<PathBuf> = OnceLock::new();

/// The most helpers running at once (each may take [`MEMORY`]); a read past them waits
/// for one to end, until its deadline.
pub const MAX_HELPERS: u64 = 2;

static HELPERS: crate::search::cost::Budget = crate::search::cost::Budget::new(MAX_HELPERS);

/// Names the binary that runs as the helper (`ferret` itself: the command line sets
/// it at start). A library embedding ferret may name a `ferret` binary; without one,
/// PDFs are refused with a hint.
pub fn set_helper(path: PathBuf) {
    let _ = HELPER.set(path);
}

/// What the helper answers.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Answer {
    /// Each page's text, in order.
    Text { pages: Vec<String> },
    /// Encrypted, and the empty password does not open it.
    Encrypted,
    /// Not a PDF lopdf can read (truncated, malformed).
    Invalid { why: String },
}

/// The helper: limits itself, reads the PDF on stdin, writes an [`Answer`] as JSON on
/// stdout. Returns the exit code.
pub fn helper_main() -> i32 {
    use std::io::{Read, Write};
    // Gone with the server, even one killed with SIGKILL (no orphan spinning on).
    let parent = std::env::var(PARENT_VAR)
        .ok()
        .and_then(|p| p.parse::<u32>().ok());
    if crate::platform::die_with_parent(parent).is_err() {
        return 3;
    }
    if crate::platform::limit_self(MEMORY, CPU_SECONDS).is_err() {
        return 3;
    }
    #[cfg(debug_assertions)]
    test_hook();
    let mut bytes = Vec::new();
    if std::io::stdin()
        .take(MAX_INPUT)
        .read_to_end(&mut bytes)
        .is_err()
    {
        return 4;
    }
    let answer = extract(&bytes);
    drop(bytes);
    let Ok(json) = serde_json::to_vec(&answer) else {
        return 5;
    };
    let mut out = std::io::stdout().lock();
    if out.write_all(&json).and_then(|()| out.flush()).is_err() {
        return 6;
    }
    0
}

/// Test builds only: `FERRET_PDF_HELPER_TEST=spin` burns CPU, `=alloc` grows memory,
/// `=sleep` waits, `=flood` writes without end: so the tests see each limit end the
/// helper.
#[cfg(debug_assertions)]
fn test_hook() {
    use std::io::Write;
    match std::env::var("FERRET_PDF_HELPER_TEST").as_deref() {
        Ok("spin") => {
            let mut x = 0u64;
            loop {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        }
        Ok("alloc") => {
            let mut keep: Vec<Vec<u8>> = Vec::new();
            loop {
                keep.push(vec![1u8; 16 << 20]);
            }
        }
        Ok("sleep") => std::thread::sleep(Duration::from_secs(3600)),
        Ok("flood") => {
            let chunk = vec![b' '; 1 << 20];
            let mut out = std::io::stdout().lock();
            while out.write_all(&chunk).is_ok() {}
            std::process::exit(0);
        }
        _ => {}
    }
}

/// The text of each page (run in the helper).
pub fn extract(bytes: &[u8]) -> Answer {
    let doc = match lopdf::Document::load_mem(bytes) {
        Ok(d) => d,
        Err(lopdf::Error::InvalidPassword) => return Answer::Encrypted,
        Err(e) => {
            return Answer::Invalid {
                why: e.to_string().chars().take(200).collect(),
            };
        }
    };
    // Encrypted (the `/Encrypt` entry direct or a reference) and not opened by the
    // empty password at load: its strings and streams are still ciphertext.
    if doc.trailer.get(b"Encrypt").is_ok() && !doc.was_encrypted() {
        return Answer::Encrypted;
    }
    let pages = doc
        .get_pages()
        .keys()
        .map(|&n| {
            doc.extract_text_with_limit(&[n], PAGE_CONTENT)
                .unwrap_or_else(|e| {
                    let why: String = e.to_string().chars().take(200).collect();
                    format!("[the text of page {n} could not be extracted: {why}]\n")
                })
        })
        .collect();
    Answer::Text { pages }
}

/// Each page's text of the PDF `bytes`, extracted by the helper under its limits.
pub fn pages(
    bytes: &[u8],
    shown: &str,
    control: &crate::control::Control,
) -> ToolResult<Vec<String>> {
    use std::io::{Read, Write};
    use std::process::{Command, Stdio};
    let refuse = |why: String, hint: &str| {
        ToolError::new(
            ErrorCode::BinaryFile,
            format!("{shown} is a PDF document; {why}"),
        )
        .with_hint(hint.to_string())
    };
    let elsewhere = "convert it to text outside ferret (e.g. pdftotext) and read that, or read its bytes with encoding base64";
    // A PDF ends with `%%EOF` (readers look in its last KiB): one cut short is said to
    // be, rather than read as the pages that survived.
    let tail = &bytes[bytes.len().saturating_sub(1024)..];
    if memchr::memmem::find(tail, b"%%EOF").is_none() {
        return Err(refuse(
            "it could not be read as a PDF: it is truncated (no %%EOF at its end)".into(),
            "it may still be being written, or was cut: ask for the whole file; or convert it to text outside ferret (e.g. pdftotext), or read its bytes with encoding base64",
        ));
    }
    let Some(helper) = HELPER.get() else {
        return Err(refuse(
            "its text is extracted by the ferret binary's helper process, which this host did not name".into(),
            elsewhere,
        ));
    };
    // Waits for a free helper slot (until the call's deadline, or cancelled).
    let _slot = HELPERS.take(1, control)?;
    let mut child = Command::new(helper)
        .arg(HELPER_ARG)
        .env(PARENT_VAR, std::process::id().to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| {
            refuse(
                format!("its text extractor could not start ({e})"),
                elsewhere,
            )
        })?;
    let input = child.stdin.take();
    let data = bytes.to_vec();
    let writer = std::thread::spawn(move || {
        if let Some(mut i) = input {
            // The helper may end before reading it all: a broken pipe is its answer.
            let _ = i.write_all(&data);
        }
    });
    let output = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        if let Some(o) = output {
            let _ = o.take(MAX_ANSWER as u64 + 1).read_to_end(&mut got);
        }
        got
    });
    let started = Instant::now();
    let until = control
        .deadline
        .map_or(started + WALL, |d| d.min(started + WALL));
    let mut stopped = None;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) => {}
            Err(_) => break None,
        }
        if let Err(e) = control.check() {
            stopped = Some(e);
        } else if Instant::now() >= until {
            stopped = Some(ToolError::new(
                ErrorCode::Timeout,
                format!(
                    "{shown} is a PDF document whose text was not extracted within {}",
                    humantime::format_duration(Duration::from_millis(
                        until.saturating_duration_since(started).as_millis() as u64
                    ))
                ),
            ));
        }
        if stopped.is_some() {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let _ = writer.join();
    let got = reader.join().unwrap_or_default();
    if let Some(e) = stopped {
        return Err(e.with_hint(
            "it is too costly to read (a hostile or very large PDF): convert it to text outside ferret (e.g. pdftotext), or read its bytes with encoding base64",
        ));
    }
    let ok = status.is_some_and(|s| s.success());
    let answer = (ok && got.len() <= MAX_ANSWER)
        .then(|| serde_json::from_slice::<Answer>(&got).ok())
        .flatten();
    match answer {
        Some(Answer::Text { pages }) => Ok(pages),
        Some(Answer::Encrypted) => Err(refuse(
            "it is encrypted, and its text needs a password ferret does not have".into(),
            "ask the user for a decrypted copy (e.g. qpdf --decrypt) and read that",
        )),
        Some(Answer::Invalid { why }) => Err(refuse(
            format!("it could not be read as a PDF (truncated or malformed: {why})"),
            elsewhere,
        )),
        None => Err(refuse(
            format!(
                "its text extractor stopped without an answer ({}): the PDF is malformed or over the extractor's limits ({} MiB of memory, {CPU_SECONDS} s of CPU, {} MiB of text)",
                status.map_or_else(|| "killed".to_string(), |s| s.to_string()),
                MEMORY >> 20,
                MAX_ANSWER >> 20
            ),
            elsewhere,
        )),
    }
}

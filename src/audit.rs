//! AuditLogger (seed 004, layer 4): one record per tool call, appended as JSON Lines to
//! the audit file and kept in memory per session for the embedding host to query.
//!
//! A failure to write the audit file is reported on stderr (through `tracing`) and never
//! fails the call it records: the agent's work should not depend on the log's disk.

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Success,
    /// A policy refused it (sandbox, deny list, limits, writes off).
    Denied,
    Error,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// RFC 3339, UTC, milliseconds.
    pub timestamp: String,
    pub session_id: String,
    /// Over HTTP: the principal the server established (token or peer) that the
    /// session's budgets are charged to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    pub agent_id: String,
    pub operation: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The other paths the call names: a move's destination, every file of a patch
    /// (at most [`MAX_PATHS`]; `file_count` says how many a change touched). Round 30:
    /// a move's record named its source alone, a patch's its first file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    pub result: Outcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Bytes of file content the answer carries (seed 004's field).
    pub bytes_read: u64,
    /// Bytes of the answer as sent (text and structured result): what the round budget
    /// is charged.
    pub bytes_sent: u64,
    pub file_count: u64,
    pub duration_ms: f64,
    /// `ferret shell`'s direct bash: the command line as typed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Direct bash: what was decided (`ran`, `declined`, `blocked`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    /// Direct bash: the command's exit code (128 + N when signal N ended it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Searches: which engine answered (`index` or `scan`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
}

impl AuditEntry {
    /// A record of `operation` outside any tool call (a transport's event, a refusal, a
    /// direct bash line): no session, agent, path, byte counts or timing unless the
    /// caller fills them in with struct update syntax.
    pub fn event(operation: &str, result: Outcome) -> AuditEntry {
        AuditEntry {
            timestamp: crate::clock::now_rfc3339(),
            session_id: "-".into(),
            principal: None,
            agent_id: "-".into(),
            operation: operation.into(),
            path: None,
            paths: Vec::new(),
            result,
            code: None,
            reason: None,
            bytes_read: 0,
            bytes_sent: 0,
            file_count: 0,
            duration_ms: 0.0,
            command: None,
            decision: None,
            exit_code: None,
            engine: None,
        }
    }

    /// A refusal made before any session's call (a transport's rejection, a flood's
    /// summary).
    pub fn refusal(operation: &str, code: &str, reason: String) -> AuditEntry {
        AuditEntry {
            code: Some(code.into()),
            reason: Some(reason),
            ..AuditEntry::event(operation, Outcome::Denied)
        }
    }
}

/// The most bytes a name kept in a record may take (session, agent, operation, code):
/// these may be chosen by a client (an MCP client's name), and a record is kept in
/// memory and written to the log.
pub const MAX_NAME_BYTES: usize = 256;
/// The most bytes a path, reason or command line kept in a record may take.
pub const MAX_TEXT_BYTES: usize = 4096;
/// The most other paths a record keeps, and the most bytes each may take: a patch of
/// thousands of files is one record of bounded size.
pub const MAX_PATHS: usize = 16;
pub const MAX_PATH_BYTES: usize = 512;

/// `s` cut to at most `max` bytes at a character boundary; a cut string ends in `…`
/// (counted in the `max`).
pub fn clip(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mark = "…";
    let mut end = max.saturating_sub(mark.len());
    while end > 0 && !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{mark}", &s[..end])
}

fn clip_in_place(s: &mut String, max: usize) {
    if s.len() > max {
        *s = clip(s, max);
    }
}

impl AuditEntry {
    /// Cuts every string a client may have chosen to its bound.
    fn clip(&mut self) {
        for name in [
            &mut self.session_id,
            &mut self.agent_id,
            &mut self.operation,
        ] {
            clip_in_place(name, MAX_NAME_BYTES);
        }
        for name in [
            &mut self.principal,
            &mut self.code,
            &mut self.decision,
            &mut self.engine,
        ]
        .into_iter()
        .flatten()
        {
            clip_in_place(name, MAX_NAME_BYTES);
        }
        for text in [&mut self.path, &mut self.reason, &mut self.command]
            .into_iter()
            .flatten()
        {
            clip_in_place(text, MAX_TEXT_BYTES);
        }
        self.paths.truncate(MAX_PATHS);
        for p in &mut self.paths {
            clip_in_place(p, MAX_PATH_BYTES);
        }
    }
}

/// How many records the in-memory log keeps across all sessions.
const MEMORY_CAP: usize = 2_000;

/// A flood's share of the audit log: at most `per` records every `length`; the rest are
/// counted and said in one record when the next window opens. Refusals of every kind
/// come in floods a client controls (round 24: a client past its request budget wrote a
/// 4.5 KB record per refused call, 1.5 GB an hour).
pub struct Window {
    per: u32,
    length: std::time::Duration,
    /// Start of the current window, records let through in it, records only counted.
    state: Mutex<(std::time::Instant, u32, u64)>,
}

impl Window {
    pub fn new(per: u32, length: std::time::Duration) -> Window {
        Window {
            per,
            length,
            state: Mutex::new((std::time::Instant::now(), 0, 0)),
        }
    }

    /// Whether one more record may be written now, and how many the window that just
    /// ended only counted (to be said first, when more than none).
    pub fn admit(&self) -> (bool, u64) {
        let mut w = crate::error::lock(&self.state);
        let now = std::time::Instant::now();
        let mut unlogged = 0;
        if now.duration_since(w.0) >= self.length {
            unlogged = w.2;
            *w = (now, 0, 0);
        }
        if w.1 < self.per {
            w.1 += 1;
            (true, unlogged)
        } else {
            w.2 += 1;
            (false, unlogged)
        }
    }

    /// The window's length (for the summary record's words).
    pub fn length(&self) -> std::time::Duration {
        self.length
    }
}

#[derive(Debug, Default)]
pub struct AuditLogger {
    file: Option<Mutex<File>>,
    memory: Mutex<VecDeque<AuditEntry>>,
}

impl AuditLogger {
    /// A logger that keeps records in memory only.
    pub fn in_memory() -> Self {
        Self::default()
    }

    /// A logger that also appends to `path` (created if missing).
    pub fn to_file(path: &Path) -> Result<Self, crate::error::SetupError> {
        let err = |source| crate::error::SetupError::AuditLog {
            path: path.to_path_buf(),
            source,
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(err)?;
        }
        // Never following a link at its name, never blocking on a FIFO, and only a
        // regular file: the log must not be written elsewhere or hang the start.
        let file = {
            use std::os::unix::fs::OpenOptionsExt;
            OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
                .open(path)
                .map_err(err)?
        };
        if !file.metadata().map_err(err)?.file_type().is_file() {
            return Err(err(std::io::Error::other("not a regular file")));
        }
        let flags = rustix::fs::fcntl_getfl(&file).map_err(|e| err(e.into()))?;
        rustix::fs::fcntl_setfl(&file, flags - rustix::fs::OFlags::NONBLOCK)
            .map_err(|e| err(e.into()))?;
        Ok(AuditLogger {
            file: Some(Mutex::new(file)),
            memory: Mutex::default(),
        })
    }

    pub fn log(&self, mut entry: AuditEntry) {
        entry.clip();
        if let Some(file) = &self.file {
            match serde_json::to_string(&entry) {
                Ok(mut line) => {
                    line.push('\n');
                    let mut f = crate::error::lock(file);
                    // One write per record so concurrent appenders never interleave lines.
                    if let Err(e) = f.write_all(line.as_bytes()) {
                        tracing::warn!(error = %e, "cannot write the audit log");
                    }
                }
                Err(e) => tracing::warn!(error = %e, "cannot serialize an audit record"),
            }
        }
        let mut mem = crate::error::lock(&self.memory);
        if mem.len() == MEMORY_CAP {
            mem.pop_front();
        }
        mem.push_back(entry);
    }

    /// The records of one session, oldest first (the last 10 000 records overall).
    pub fn entries_for_session(&self, session_id: &str) -> Vec<AuditEntry> {
        let mem = crate::error::lock(&self.memory);
        mem.iter()
            .filter(|e| e.session_id == session_id)
            .cloned()
            .collect()
    }

    /// Every record kept in memory, oldest first.
    pub fn export(&self) -> Vec<AuditEntry> {
        let mem = crate::error::lock(&self.memory);
        mem.iter().cloned().collect()
    }
}

/// Now, as RFC 3339 with milliseconds.
pub use crate::clock::now_rfc3339;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_client_strings_are_clipped_in_memory() {
        let log = AuditLogger::in_memory();
        let long = "é".repeat(100_000);
        log.log(AuditEntry {
            timestamp: String::new(),
            session_id: long.clone(),
            principal: None,
            agent_id: long.clone(),
            operation: long.clone(),
            path: Some(long.clone()),
            paths: vec![long.clone(); 100],
            result: Outcome::Denied,
            code: Some(long.clone()),
            reason: Some(long.clone()),
            bytes_read: 0,
            bytes_sent: 0,
            file_count: 0,
            duration_ms: 0.0,
            command: Some(long.clone()),
            decision: Some(long.clone()),
            exit_code: None,
            engine: Some(long),
        });
        let e = &log.export()[0];
        assert_eq!(e.paths.len(), MAX_PATHS);
        assert!(
            e.paths
                .iter()
                .all(|p| p.len() <= MAX_PATH_BYTES && p.ends_with('…'))
        );
        for s in [&e.session_id, &e.agent_id, &e.operation] {
            assert!(s.len() <= MAX_NAME_BYTES && s.ends_with('…'), "{}", s.len());
        }
        for s in [&e.code, &e.decision, &e.engine].into_iter().flatten() {
            assert!(s.len() <= MAX_NAME_BYTES, "{}", s.len());
        }
        for s in [&e.path, &e.reason, &e.command].into_iter().flatten() {
            assert!(
                s.len() <= MAX_TEXT_BYTES && s.starts_with("éé"),
                "{}",
                s.len()
            );
        }
        assert_eq!(clip("short", 256), "short");
        assert_eq!(clip("abcdef", 4), "a…");
    }
}

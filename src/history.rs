//! The record of changes: ferret's state directory, the backups taken before every write,
//! and the undo journal.
//!
//! The state directory is `$XDG_STATE_HOME/ferret/<workspace id>/` (or `--state-dir`),
//! outside every root, so an agent can neither read nor tamper with it through ferret. The
//! workspace id is a hash of the roots' canonical paths: the same roots share a history.
//!
//! The journal is append-only JSON Lines, one entry per change. Appends and
//! read-modify-append sequences hold an exclusive `flock` on the journal, so concurrent
//! servers on the same workspace never interleave or lose entries, and it survives
//! restarts because it is a file.

use crate::config::Config;
use crate::error::{ErrorCode, ToolError, ToolResult};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

/// Backups kept per file (seed 003 §2.2).
pub const BACKUPS_PER_FILE: usize = 50;

/// One change, as the journal records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Entry {
    /// Sequential, starting at 1.
    pub id: u64,
    /// `edit`, `delete` or `undo`.
    pub action: String,
    /// The path as results name it (root-prefixed when there are several roots).
    pub path: String,
    /// Index of the root and the path relative to it: where to restore.
    pub root: usize,
    pub rel: PathBuf,
    /// The content before the change, for edits.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub backup_path: Option<PathBuf>,
    /// Where a deleted file went: the OS trash item's id, or a path in ferret's trash.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub trash_location: Option<PathBuf>,
    /// `os` or `ferret`: which trash holds it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub trash: Option<String>,
    /// RFC 3339.
    pub timestamp: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sha256_before: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sha256_after: Option<String>,
    /// For `undo` entries: the change undone.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub undoes: Option<u64>,
}

/// The state directory and what lives in it.
#[derive(Debug)]
pub struct History {
    dir: PathBuf,
}

pub fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

impl History {
    /// The state directory for `roots` (canonical), from the configuration or the XDG
    /// default. Refused if it lies inside a root.
    pub fn open(config: &Config, roots: &[PathBuf]) -> anyhow::Result<History> {
        let dir = match &config.state_dir {
            Some(d) => std::path::absolute(d)?,
            None => {
                let mut h = Sha256::new();
                for r in roots {
                    h.update(r.as_os_str().as_encoded_bytes());
                    h.update([0]);
                }
                let id = hex::encode(&h.finalize()[..8]);
                let base = std::env::var_os("XDG_STATE_HOME")
                    .filter(|v| !v.is_empty())
                    .map(PathBuf::from)
                    .or_else(|| {
                        std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state"))
                    })
                    .unwrap_or_else(std::env::temp_dir);
                base.join("ferret").join(id)
            }
        };
        std::fs::create_dir_all(&dir).map_err(|e| {
            anyhow::anyhow!("cannot create the state directory {}: {e}", dir.display())
        })?;
        let canon = std::fs::canonicalize(&dir)?;
        if let Some(r) = roots.iter().find(|r| canon.starts_with(r)) {
            anyhow::bail!(
                "the state directory {} is inside the workspace root {}: backups and the undo journal \
                 must be out of an agent's reach; choose another --state-dir",
                canon.display(),
                r.display()
            );
        }
        Ok(History { dir: canon })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// ferret's own trash folder (seed 003 §2.1's fallback), created on demand.
    pub fn trash_dir(&self) -> ToolResult<PathBuf> {
        let d = self.dir.join("trash");
        std::fs::create_dir_all(&d).map_err(|e| io_err("trash folder", &e))?;
        Ok(d)
    }

    /// A unique name in ferret's trash for `name`, timestamped.
    pub fn trash_name(name: &str) -> String {
        format!("{}_{name}", chrono_stamp())
    }

    fn journal_path(&self) -> PathBuf {
        self.dir.join("journal.jsonl")
    }

    /// Saves `content` as the backup of `rel` (named `{filename}.{timestamp}.bak`, in a
    /// folder per file) and drops the oldest beyond [`BACKUPS_PER_FILE`].
    pub fn backup(&self, root: usize, rel: &Path, content: &[u8]) -> ToolResult<PathBuf> {
        let per_file = self
            .dir
            .join("backups")
            .join(&sha256(format!("{root}/{}", rel.display()).as_bytes())[..16]);
        std::fs::create_dir_all(&per_file).map_err(|e| io_err("backup folder", &e))?;
        let name = rel
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let stamp = chrono_stamp();
        let path = per_file.join(format!("{name}.{stamp}.bak"));
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| io_err("backup", &e))?;
        f.write_all(content)
            .and_then(|()| f.sync_all())
            .map_err(|e| io_err("backup", &e))?;
        // Names sort by time: keep the newest BACKUPS_PER_FILE.
        if let Ok(rd) = std::fs::read_dir(&per_file) {
            let mut all: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
            all.sort();
            let excess = all.len().saturating_sub(BACKUPS_PER_FILE);
            for old in &all[..excess] {
                let _ = std::fs::remove_file(old);
            }
        }
        Ok(path)
    }

    /// Runs `f` with the journal locked, giving it the entries so far; appends what it
    /// returns. The lock spans the read and the append, so ids never collide.
    pub fn with_journal<T>(
        &self,
        f: impl FnOnce(&[Entry]) -> ToolResult<(Option<Entry>, T)>,
    ) -> ToolResult<T> {
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(self.journal_path())
            .map_err(|e| io_err("journal", &e))?;
        lock(&file)?;
        let entries = read_entries(&file)?;
        let (entry, out) = f(&entries)?;
        if let Some(mut e) = entry {
            e.id = entries.last().map_or(1, |l| l.id + 1);
            let mut line = serde_json::to_string(&e)
                .map_err(|e| ToolError::new(ErrorCode::IoError, e.to_string()))?;
            line.push('\n');
            // One write per entry: a crash leaves whole lines only.
            (&file)
                .write_all(line.as_bytes())
                .and_then(|()| file.sync_data())
                .map_err(|e| io_err("journal", &e))?;
        }
        Ok(out)
    }

    /// Every entry, oldest first.
    pub fn entries(&self) -> ToolResult<Vec<Entry>> {
        self.with_journal(|e| Ok((None, e.to_vec())))
    }

    /// Appends one entry; returns its id.
    pub fn append(&self, entry: Entry) -> ToolResult<u64> {
        self.with_journal(|all| {
            let id = all.last().map_or(1, |l| l.id + 1);
            Ok((Some(entry), id))
        })
    }
}

fn read_entries(file: &File) -> ToolResult<Vec<Entry>> {
    let mut out = Vec::new();
    for line in BufReader::new(file).lines() {
        let line = line.map_err(|e| io_err("journal", &e))?;
        if line.trim().is_empty() {
            continue;
        }
        // A line that does not parse is skipped, never fatal: the journal must not lock
        // an agent out of undo because of one damaged line.
        match serde_json::from_str(&line) {
            Ok(e) => out.push(e),
            Err(e) => tracing::warn!(error = %e, "skipping a damaged journal line"),
        }
    }
    Ok(out)
}

#[cfg(unix)]
fn lock(file: &File) -> ToolResult<()> {
    rustix::fs::flock(file, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| io_err("journal lock", &std::io::Error::from(e)))
}

#[cfg(not(unix))]
fn lock(_file: &File) -> ToolResult<()> {
    Ok(())
}

fn io_err(what: &str, e: &std::io::Error) -> ToolError {
    ToolError::new(ErrorCode::IoError, format!("{what}: {e}"))
}

/// `20261122T034500.123456789Z`: sortable, unique enough for backup names.
fn chrono_stamp() -> String {
    let now = std::time::SystemTime::now();
    let secs = humantime::format_rfc3339_nanos(now).to_string();
    secs.replace(['-', ':'], "")
}

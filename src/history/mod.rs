//! The record of changes: ferret's state directory, the backups taken before every
//! write, the write-ahead undo journal ([`journal`]), the trash ([`trash`]) and the
//! change operations that tie them together ([`change`]).
//!
//! The state directory is `<base>/<workspace id>/`, where `<base>` is `--state-dir` or
//! `$XDG_STATE_HOME/ferret`, and the workspace id is a hash of the roots' canonical
//! paths: two workspaces never share a journal, even under one `--state-dir`. It must
//! lie outside every root, so an agent can neither read nor tamper with it through
//! ferret.
//!
//! Nothing is created there before the first change: opening the history to show it,
//! a dry run or a refused change leave the file system as they found it (the directory,
//! `leases/` and the journal are made by the first change, [`History::made`]).
//!
//! Each process that changes files holds a *lease*: a file in `leases/` it keeps
//! `flock`ed while it lives. A change still pending in the journal whose lease is no
//! longer locked belongs to a process that died mid-change; [`History::recover`] settles
//! it from what is on disk (committed if the change landed, rolled back otherwise) and
//! removes the temporary file it may have left.

pub mod change;
pub mod group;
pub mod journal;
pub mod safe;
pub mod seen;
pub mod trash;

use crate::config::Config;
use crate::error::{SetupError, ToolResult};
use crate::workspace::Workspace;
pub use journal::{Action, Entry, GroupOp, Locked, MoveRecord, OpKind, Owner, TrashRecord};
use journal::{Journal, Outcome, io_err};
pub use seen::{Seen, version_of};
use sha2::{Digest, Sha256};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The prefix of a lease file not yet locked (see [`History::open`]).
const NEW_LEASE: &str = ".new-";

/// Backups kept per file (seed 003 §2.2).
pub const BACKUPS_PER_FILE: usize = 50;

/// How long a backup is kept whatever comes after it: a day. An agent's change can be
/// undone for that long however many changes follow (round 22: fifty quick edits of one
/// file, or 2 GiB of edits of others, pruned the only copy of a file the agent had just
/// overwritten). Past `max_backup_bytes` with only such backups, a change is refused.
const BACKUP_GRACE: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// Drops the oldest backups under `all` (every file's folder) until they hold `cap`
/// bytes at most: backups older than [`BACKUP_GRACE`] only, each file's first (the
/// file as it was before its first change) after the others, never `keep` (the one just
/// written). 50 backups per file bounded each file, but an agent editing big files at
/// many paths filled the disk. Returns whether they now hold `cap` at most.
fn prune_backups(all: &Path, cap: u64, keep: &Path) -> bool {
    let mut found = Vec::new();
    let mut total = 0u64;
    for folder in std::fs::read_dir(all).into_iter().flatten().flatten() {
        let folder = folder.path();
        let mut here = Vec::new();
        for f in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
            let Ok(meta) = f.metadata() else { continue };
            if !meta.is_file() {
                continue;
            }
            total += meta.len();
            let when = meta.modified().unwrap_or(std::time::SystemTime::UNIX_EPOCH);
            here.push((f.path(), when, meta.len()));
        }
        // Names sort by time: the first is the file before its first change.
        here.sort();
        for (i, (path, when, len)) in here.into_iter().enumerate() {
            found.push((i == 0, when, path, len));
        }
    }
    if total <= cap {
        return true;
    }
    let old = std::time::SystemTime::now()
        .checked_sub(BACKUP_GRACE)
        .unwrap_or(std::time::SystemTime::UNIX_EPOCH);
    // The others by age, then the firsts by age.
    found.sort();
    for (_, when, path, len) in found {
        if total <= cap {
            break;
        }
        if path == keep || when > old {
            continue;
        }
        // The emptied folder stays: another process may be about to write in it.
        if std::fs::remove_file(&path).is_ok() {
            total -= len;
        }
    }
    total <= cap
}

/// The refusal of a change whose backups would not fit `max_backup_bytes` (`cap`).
fn backups_full(what: &str, bytes: u64, cap: u64) -> crate::error::ToolError {
    crate::error::ToolError::new(
        crate::error::ErrorCode::FileTooLarge,
        format!(
            "{what}: its backups ({bytes} bytes) do not fit in max_backup_bytes ({cap} bytes) beside the backups of the last day, which are kept so that every change can be undone; nothing was changed"
        ),
    )
    .with_hint("the user can raise max_backup_bytes, or turn backups off for changes that need not be undone; smaller changes may fit")
}

pub fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The state directory and what lives in it.
pub struct History {
    /// Where the state directory is (or will be made): resolved through every link in
    /// what exists of it, and outside every root.
    dir: PathBuf,
    journal: Journal,
    /// This process's lease, taken (the directory made) by its first change.
    lease: std::sync::OnceLock<Lease>,
    /// Held while the lease is being taken.
    making: std::sync::Mutex<()>,
    /// The canonical roots, to keep the home trash out of the workspace.
    roots: Vec<PathBuf>,
    /// `max_backup_bytes`: the most the backups hold together (0: no limit).
    max_backup_bytes: u64,
}

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("History").field("dir", &self.dir).finish()
    }
}

/// This process's claim on its pending changes: a locked file, removed on a clean exit.
struct Lease {
    name: String,
    path: PathBuf,
    _file: File,
}

impl Drop for Lease {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        if let Some(staging) = self.path.parent().and_then(|l| l.parent()) {
            let mine = staging.join("staging").join(&self.name);
            crate::workspace::write::remove_staging(&mine);
            let _ = std::fs::remove_dir_all(&mine);
        }
    }
}

/// The history, opened on first use (read-only use never creates a state directory
/// unless it lists the history). Changes a killed process left half-done are settled
/// only by a process allowed to write, just before its first change: a read-only command
/// changes nothing under the roots.
#[derive(Default)]
pub struct HistoryCell {
    cell: std::sync::OnceLock<Result<History, String>>,
    recovered: std::sync::OnceLock<()>,
}

impl HistoryCell {
    pub fn new() -> Self {
        Self::default()
    }

    /// The history of `ws`'s roots, for a change: opened on the first call, and
    /// recovered first when `config` allows writes.
    pub fn get(&self, config: &Config, ws: &Workspace) -> ToolResult<&History> {
        let h = self.open(config, ws)?;
        if config.allow_write && !config.dry_run {
            self.recovered.get_or_init(|| {
                // Changes a killed process left half-done are settled before any new one.
                if let Err(e) = h.recover(ws) {
                    tracing::warn!(error = %e.message, "recovery of the journal failed");
                }
            });
        }
        Ok(h)
    }

    /// The history, opened but not recovered: for showing it. A change a killed process
    /// left is shown as interrupted ([`History::interrupted`]).
    pub fn open(&self, config: &Config, ws: &Workspace) -> ToolResult<&History> {
        self.cell
            .get_or_init(|| {
                History::open(config, &ws.canonical_roots()).map_err(|e| format!("{e:#}"))
            })
            .as_ref()
            .map_err(|e| {
                // What is wrong names host paths (the state directory, the root): the
                // person reads it on stderr; the agent is told only that (round 21).
                tracing::warn!(error = %e, "the state directory cannot be used");
                crate::error::ToolError::new(
                    crate::error::ErrorCode::IoError,
                    "the state directory cannot be used (what is wrong is on ferret's stderr, for the user)",
                )
                .with_hint(
                    "changes need the state directory for their backups and undo journal, so none is made \
                     without it: fix it or choose another (--state-dir, FERRET_STATE_DIR); reading works",
                )
            })
    }
}

thread_local! {
    /// Who the call running on this thread is for (see [`acting_as`]).
    static CALLER: std::cell::RefCell<Option<Owner>> = const { std::cell::RefCell::new(None) };
}

/// Until the guard returned is dropped, changes begun on this thread are recorded as
/// made by `owner`. The call path sets it around every tool call (a call runs on one
/// thread); a change begun elsewhere is recorded with no owner: nobody's own.
pub fn acting_as(owner: Owner) -> ActingAs {
    ActingAs(CALLER.with(|c| c.replace(Some(owner))))
}

/// Restores the previous caller when dropped.
pub struct ActingAs(Option<Owner>);

impl Drop for ActingAs {
    fn drop(&mut self) {
        let prev = self.0.take();
        CALLER.with(|c| *c.borrow_mut() = prev);
    }
}

/// The caller of the call running on this thread, if any.
pub fn caller() -> Option<Owner> {
    CALLER.with(|c| c.borrow().clone())
}

/// The base directory for state: `--state-dir`, else the platform's
/// ([`crate::platform::state_dir`]: `$XDG_STATE_HOME/ferret`, `~/.local/state/ferret`,
/// on macOS `~/Library/Application Support/ferret/state`).
pub fn state_base(config: &Config) -> Result<PathBuf, SetupError> {
    Ok(match &config.state_dir {
        Some(d) => std::path::absolute(d).map_err(|source| SetupError::StateDir {
            dir: d.clone(),
            source,
        })?,
        None => crate::platform::state_dir(&crate::platform::process_env)
            .unwrap_or_else(|| std::env::temp_dir().join("ferret")),
    })
}

/// The workspace's own state directory below the base.
pub fn state_dir(config: &Config, roots: &[PathBuf]) -> Result<PathBuf, SetupError> {
    let mut h = Sha256::new();
    for r in roots {
        h.update(r.as_os_str().as_encoded_bytes());
        h.update([0]);
    }
    Ok(state_base(config)?.join(hex::encode(&h.finalize()[..8])))
}

/// Who wrote a file's content since a change ([`History::writers_since`]).
#[derive(Debug)]
pub enum Writers {
    /// Only the caller's own changes, each over what the one before left.
    Own,
    /// A change by someone else (another session, the person, an unknown caller).
    Other(Box<Entry>),
    /// Content no change ferret recorded wrote, at least in part (an outside editor), or
    /// a history the journal cannot follow.
    Outside,
}

impl History {
    /// Opens the workspace's state directory, creating nothing: the directory, its
    /// `leases/` and the journal are made by the first change ([`History::made`]).
    /// Refused if it lies (or would lie) inside a root.
    pub fn open(config: &Config, roots: &[PathBuf]) -> Result<History, SetupError> {
        let dir = resolve(&state_dir(config, roots)?);
        if let Some(r) = roots.iter().find(|r| dir.starts_with(r)) {
            return Err(SetupError::StateInsideRoot {
                dir,
                root: r.clone(),
            });
        }
        // One that exists must be this user's own directory: a journal another user
        // wrote would name any file as a backup to restore, or a change to settle.
        if std::fs::symlink_metadata(&dir).is_ok() {
            safe::check_state_dir(&dir).map_err(|source| SetupError::StateDir {
                dir: dir.clone(),
                source,
            })?;
        }
        Ok(History {
            journal: Journal::new(dir.join("journal.jsonl")),
            dir,
            lease: std::sync::OnceLock::new(),
            making: std::sync::Mutex::new(()),
            roots: roots.to_vec(),
            max_backup_bytes: config.max_backup_bytes,
        })
    }

    /// The state directory made and this process's lease taken: what a change needs
    /// before it writes a backup or a journal line. Done once per process.
    pub fn made(&self) -> ToolResult<()> {
        if self.lease.get().is_some() {
            return Ok(());
        }
        let _one = crate::error::lock(&self.making);
        if self.lease.get().is_some() {
            return Ok(());
        }
        let lease = self.take_lease().map_err(|e| {
            crate::error::ToolError::new(crate::error::ErrorCode::IoError, format!("{e:#}"))
                .with_hint(
                    "changes need the state directory for their backups and undo journal, so none is \
                     made without it: fix it or choose another (--state-dir, FERRET_STATE_DIR); reading works",
                )
        })?;
        let _ = self.lease.set(lease);
        Ok(())
    }

    /// Makes the state directory (mode 0700) if need be, and checks it: resolved again
    /// (a link put in its way meanwhile is refused), outside every root, a real
    /// directory this user owns. For the first change, and for the interactive shell's
    /// line history.
    pub fn make_dir(&self) -> Result<PathBuf, SetupError> {
        let dir = &self.dir;
        let err = |dir: &Path| {
            let dir = dir.to_path_buf();
            move |source| SetupError::StateDir { dir, source }
        };
        {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(err(dir))?;
        }
        let canon = std::fs::canonicalize(dir).map_err(err(dir))?;
        if let Some(r) = self.roots.iter().find(|r| canon.starts_with(r)) {
            return Err(SetupError::StateInsideRoot {
                dir: canon,
                root: r.clone(),
            });
        }
        if &canon != dir {
            return Err(err(dir)(std::io::Error::other(format!(
                "it now resolves to {}: a link was put in its way",
                canon.display()
            ))));
        }
        safe::check_state_dir(&canon).map_err(err(&canon))?;
        Ok(canon)
    }

    fn take_lease(&self) -> Result<Lease, SetupError> {
        let err = |dir: &Path| {
            let dir = dir.to_path_buf();
            move |source| SetupError::StateDir { dir, source }
        };
        let canon = self.make_dir()?;
        let leases = canon.join("leases");
        safe::ensure_dir(&leases).map_err(err(&leases))?;
        let name = format!("{}-{}", std::process::id(), stamp());
        let path = leases.join(&name);
        // The lease appears under its name only once locked: another process finding it
        // unlocked in between would take this one for dead, remove its lease and later
        // roll back a change it is making (an edit lost under three concurrent processes).
        let fresh = leases.join(format!("{NEW_LEASE}{name}"));
        let file = safe::open_regular(&fresh, OpenOptions::new().write(true).create_new(true))
            .map_err(err(&fresh))?;
        rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive)
            .map_err(|e| err(&fresh)(e.into()))?;
        if let Err(e) = std::fs::rename(&fresh, &path) {
            let _ = std::fs::remove_file(&fresh);
            return Err(err(&path)(e));
        }
        // This process's staging area (see workspace::write::add_staging), removed with
        // its lease; one left by a killed process goes with its dead lease.
        let staging = canon.join("staging");
        if safe::ensure_dir(&staging).is_ok() {
            let mine = staging.join(&name);
            if safe::ensure_dir(&mine).is_ok() && safe::is_real_dir(&mine).is_ok() {
                crate::workspace::write::add_staging(&mine);
            }
        }
        Ok(Lease {
            name,
            path,
            _file: file,
        })
    }

    /// Runs `f` with the journal locked, for a change: the state directory is made
    /// first if need be.
    pub(crate) fn write_journal<T>(
        &self,
        f: impl FnOnce(&mut Locked) -> ToolResult<T>,
    ) -> ToolResult<T> {
        self.made()?;
        self.journal.with(true, f)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Every settled change, oldest first (changes under way in another process are
    /// included, marked `pending`).
    pub fn entries(&self) -> ToolResult<Vec<Entry>> {
        self.journal.with(false, |j| Ok(j.entries.clone()))
    }

    /// The change an undo is asked for, and whether it was already undone (or is being
    /// undone). `Some(id)`: that change, whoever made it, looked up in the file when it is older than the
    /// window kept in memory, so every change the journal holds can be undone. `None`:
    /// the last change that can be undone and was not, among the caller's (`mine`). Nothing is copied but the one
    /// entry (cloning the window made every undo cost as much as 1 000 changes).
    pub fn undo_target(
        &self,
        id: Option<u64>,
        mine: impl Fn(&Entry) -> bool,
    ) -> ToolResult<Option<(Entry, bool)>> {
        self.journal.with(false, |j| {
            let undone: std::collections::HashSet<u64> =
                j.entries.iter().filter_map(|e| e.undoes).collect();
            let Some(id) = id else {
                return Ok(j
                    .entries
                    .iter()
                    .rev()
                    .find(|e| e.undoable() && !e.pending && !undone.contains(&e.id) && mine(e))
                    .map(|e| (e.clone(), false)));
            };
            if id >= j.next_id {
                // Never given: no need to read the file to say so.
                return Ok(None);
            }
            match j.entries.iter().find(|e| e.id == id) {
                Some(e) if !e.pending => Ok(Some((e.clone(), undone.contains(&id)))),
                // Under way in another process: the caller says so.
                Some(e) => Ok(Some((e.clone(), false))),
                None => {
                    let (e, was) = j.find_in_file(id)?;
                    Ok(e.map(|e| (e, was)))
                }
            }
        })
    }

    /// Who wrote what the file `rel` of root `root` holds now (`now`, its hash), by the
    /// journal: every change after `after` that touched the file, in order, from `from`
    /// (what change `after` left there). [`Writers::Own`] only if the chain is unbroken
    /// (each change found exactly what the one before it left), every link is `mine`,
    /// and the last left exactly `now`: else content ferret did not write may be there
    /// (or be lost by going back past it), even when the caller wrote the bytes now
    /// there (an outside edit, then the caller's own small edit on top of it).
    pub fn writers_since(
        &self,
        (root, rel): (usize, &Path),
        after: u64,
        from: Option<&str>,
        now: Option<&str>,
        mine: impl Fn(&Entry) -> bool,
    ) -> ToolResult<Writers> {
        self.journal.with(false, |j| {
            // Changes older than the window kept in memory: the chain cannot be followed.
            if j.entries.first().is_none_or(|e| e.id > after) {
                return Ok(Writers::Outside);
            }
            let mut expected: Option<String> = from.map(str::to_string);
            for e in j.entries.iter().filter(|e| e.id > after) {
                let ops: Vec<&GroupOp> = e
                    .group
                    .iter()
                    .filter(|op| op.root == root && op.rel == rel)
                    .collect();
                let here = e.group.is_empty() && e.root == root && e.rel == rel;
                let arrives = e
                    .moved
                    .as_ref()
                    .is_some_and(|m| m.to_root == root && m.to_rel == rel);
                if ops.is_empty() && !here && !arrives {
                    continue;
                }
                // What this change found there and what it left, when the journal knows.
                let link = match (ops.first(), ops.last()) {
                    (Some(first), Some(last)) => {
                        Some((first.sha256_before.clone(), last.sha256_after.clone()))
                    }
                    _ if here
                        && !arrives
                        && e.moved.is_none()
                        && e.trash.is_none()
                        && matches!(e.action, Action::Edit | Action::Create | Action::Undo) =>
                    {
                        Some((e.sha256_before.clone(), e.sha256_after.clone()))
                    }
                    _ => None,
                };
                let Some((before, left)) = link.filter(|_| !e.pending) else {
                    return Ok(Writers::Outside);
                };
                if before != expected {
                    return Ok(Writers::Outside);
                }
                if !mine(e) {
                    return Ok(Writers::Other(Box::new(e.clone())));
                }
                expected = left;
            }
            Ok(if expected.as_deref() == now {
                Writers::Own
            } else {
                Writers::Outside
            })
        })
    }

    /// Refuses (`FILE_TOO_LARGE`) a change whose backups together (`bytes`) are over
    /// `max_backup_bytes`: made one by one, the later ones pruned the first (round 22: a
    /// patch of three files landed with two backups and could not be undone).
    pub fn backups_fit(&self, what: &str, bytes: u64) -> ToolResult<()> {
        let cap = self.max_backup_bytes;
        if cap > 0 && bytes > cap {
            return Err(backups_full(what, bytes, cap));
        }
        Ok(())
    }

    /// Saves `content` as the backup of `rel` (named `{filename}.{timestamp}.bak`, in a
    /// folder per file) and drops the oldest beyond [`BACKUPS_PER_FILE`].
    pub fn backup(&self, root: usize, rel: &Path, content: &[u8]) -> ToolResult<PathBuf> {
        crate::workspace::changeable_name(rel)?;
        let cap = self.max_backup_bytes;
        if cap > 0 && content.len() as u64 > cap {
            return Err(crate::error::ToolError::new(
                crate::error::ErrorCode::FileTooLarge,
                format!(
                    "{}: its backup ({} bytes) would be bigger than all backups may be together ({cap} bytes, max_backup_bytes); nothing was changed",
                    rel.display(),
                    content.len()
                ),
            )
            .with_hint("the user can raise max_backup_bytes, or turn backups off for changes that need not be undone"));
        }
        self.made()?;
        let all = self.dir.join("backups");
        let per_file = all.join(&sha256(format!("{root}/{}", rel.display()).as_bytes())[..16]);
        for d in [&all, &per_file] {
            safe::ensure_dir(d).map_err(|e| safe::state_file_err("backup folder", d, &e))?;
        }
        // The file's name, cut to leave room for the stamp: a name of 220 bytes (255
        // are legal) made a backup name too long, and its file could not be edited.
        let mut name = rel
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.len() > 120 {
            let mut cut = 120;
            while !name.is_char_boundary(cut) {
                cut -= 1;
            }
            name.truncate(cut);
        }
        let path = per_file.join(format!("{name}.{}.bak", stamp()));
        let mut f = safe::open_regular(&path, OpenOptions::new().write(true).create_new(true))
            .map_err(|e| safe::state_file_err("backup", &path, &e))?;
        f.write_all(content)
            .and_then(|()| f.sync_all())
            .map_err(|e| io_err("backup", &e))?;
        // Names sort by time: keep the first (the file before its first change, so it
        // can always be had back: round 22's fifty quick edits pruned it) and the newest
        // BACKUPS_PER_FILE - 1. A middle backup a journal entry names is dropped once 49
        // newer ones exist.
        if let Ok(rd) = std::fs::read_dir(&per_file) {
            let mut all: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
            all.sort();
            let excess = all.len().saturating_sub(BACKUPS_PER_FILE);
            for old in all.iter().skip(1).take(excess) {
                let _ = std::fs::remove_file(old);
            }
        }
        // The person's own changes (their undo of the agent's flood above all) are not
        // refused for the backups of the last day: they go over the cap until those age.
        if cap > 0 && !prune_backups(&all, cap, &path) && !caller().is_some_and(|o| o.is_person()) {
            let _ = std::fs::remove_file(&path);
            return Err(backups_full(
                &rel.display().to_string(),
                content.len() as u64,
                cap,
            ));
        }
        Ok(path)
    }

    /// Reads the backup `path` a journal entry names, for an undo: only a regular file
    /// in this state directory's `backups/` (never followed, never a FIFO), whatever
    /// the journal says.
    pub fn read_backup(&self, path: &Path) -> ToolResult<Vec<u8>> {
        let inside = path.starts_with(self.dir.join("backups"))
            && path.components().all(|c| {
                matches!(
                    c,
                    std::path::Component::Normal(_) | std::path::Component::RootDir
                )
            });
        if !inside {
            return Err(crate::error::ToolError::new(
                crate::error::ErrorCode::IoError,
                format!(
                    "cannot read the backup {}: it is not in the state directory's backups",
                    path.display()
                ),
            )
            .with_hint(safe::HINT));
        }
        safe::read_backup(path)
    }

    /// [`History::read_backup`], checked against the hash the change recorded of the
    /// content it replaced: a backup rewritten since (by anything that could reach the
    /// state directory) is never restored.
    pub fn read_backup_as(&self, path: &Path, sha256_before: Option<&str>) -> ToolResult<Vec<u8>> {
        let content = self.read_backup(path)?;
        match sha256_before {
            Some(want) if sha256(&content) != want => Err(crate::error::ToolError::new(
                crate::error::ErrorCode::Conflict,
                "the backup no longer holds what the change replaced (it was changed since); nothing was restored",
            )
            .with_hint(safe::HINT)),
            _ => Ok(content),
        }
    }

    /// Settles every change left pending by a process that is gone: finished if it
    /// landed, rolled back (its temporary file removed) if not. Returns how many.
    pub fn recover(&self, ws: &Workspace) -> ToolResult<usize> {
        // Without a journal there is nothing to settle, and none is made.
        self.journal.with(false, |j| {
            let pending: Vec<Entry> = j
                .entries
                .iter()
                .filter(|e| e.pending && e.lease != self.lease())
                .cloned()
                .collect();
            let mut dead_leases: Vec<String> = Vec::new();
            let mut settled = 0;
            for e in pending {
                if !dead_leases.contains(&e.lease) {
                    if self.lease_alive(&e.lease) {
                        continue;
                    }
                    dead_leases.push(e.lease.clone());
                }
                // A delete the OS trash had taken (or refused) when the process died:
                // committed, with where the object is now.
                if let Some(rec) = change::found_after_staging(self, &e) {
                    let note = "recovered: the entry had been moved to the trash".to_string();
                    j.settle_trashed(e.id, rec, Some(note))?;
                    settled += 1;
                    continue;
                }
                let (outcome, note, conflicted) = change::settle_orphan(self, ws, &e);
                tracing::info!(
                    id = e.id,
                    ?outcome,
                    "recovered a change left by a killed process"
                );
                j.settle_conflicted(e.id, outcome, Some(note), conflicted)?;
                settled += 1;
            }
            // Leases of processes that are gone, whatever they left.
            // Only in a real `leases/`: through a link there, this would remove the
            // files of whatever folder it leads to.
            let leases = self.dir.join("leases");
            if let Ok(rd) = safe::is_real_dir(&leases).and_then(|()| std::fs::read_dir(&leases)) {
                for l in rd.flatten() {
                    let name = l.file_name().to_string_lossy().into_owned();
                    if name.starts_with(NEW_LEASE) {
                        // Being set up (not locked yet) unless left by a process killed
                        // in that instant, long ago.
                        let old = l
                            .metadata()
                            .and_then(|m| m.modified())
                            .ok()
                            .and_then(|t| t.elapsed().ok())
                            .is_some_and(|age| age > std::time::Duration::from_secs(600));
                        if old {
                            let _ = std::fs::remove_file(l.path());
                        }
                    } else if name != self.lease() && !self.lease_alive(&name) {
                        let _ = std::fs::remove_file(l.path());
                        // Its staging area: partial files a killed process was writing
                        // (ferret's own, in its private state directory).
                        let staging = self.dir.join("staging");
                        if safe::is_real_dir(&staging).is_ok() {
                            let _ = std::fs::remove_dir_all(staging.join(&name));
                        }
                    }
                }
            }
            Ok(settled)
        })
    }

    /// Whether `e` is a change left pending by a process that is gone: the next process
    /// allowed to write settles it.
    pub fn interrupted(&self, e: &Entry) -> bool {
        e.pending && e.lease != self.lease() && !self.lease_alive(&e.lease)
    }

    /// Whether the process holding lease `name` still runs (it keeps the lease locked).
    fn lease_alive(&self, name: &str) -> bool {
        if name.is_empty() || name.contains('/') {
            return false;
        }
        // Never blocking on a FIFO put at a lease's name, never following a link: only a
        // regular file can be a lease.
        let Ok(f) = safe::open_regular(
            &self.dir.join("leases").join(name),
            OpenOptions::new().read(true),
        ) else {
            return false;
        };
        match rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockShared) {
            Ok(()) => false,
            Err(_) => true,
        }
    }

    /// This process's lease; empty before its first change.
    fn lease(&self) -> &str {
        self.lease.get().map_or("", |l| l.name.as_str())
    }

    fn inside_roots(&self, p: &Path) -> bool {
        self.roots
            .iter()
            .any(|r| p.starts_with(r) || r.starts_with(p))
    }
}

/// `path` resolved through every link in the part of it that exists (the rest is not
/// there to be a link): where the state directory is, or will be once made.
fn resolve(path: &Path) -> PathBuf {
    for above in path.ancestors() {
        if let Ok(c) = std::fs::canonicalize(above) {
            return match path.strip_prefix(above) {
                Ok(rest) if !rest.as_os_str().is_empty() => c.join(rest),
                _ => c,
            };
        }
    }
    path.to_path_buf()
}

/// `20261122T034500.123456789Z-<n>`: sortable, unique within a process.
pub(crate) fn stamp() -> String {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let t = humantime::format_rfc3339_nanos(std::time::SystemTime::now())
        .to_string()
        .replace(['-', ':'], "");
    format!("{t}-{}-{n}", std::process::id())
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Committed => "committed",
            Outcome::Aborted => "aborted",
            Outcome::Staged => "staged",
        }
    }
}

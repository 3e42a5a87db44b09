//! The undo journal: JSON Lines, append-only, written ahead of every change.
//!
//! A change is recorded twice. Before anything in the workspace is touched, a `begin`
//! line holds everything needed to finish or roll it back (the backup, the temporary
//! file's name, the exact trashed object with its inode and hash) and the lease of the
//! process making it. After the change, a mark line says `committed` or `aborted`. A
//! process killed in between leaves a `begin` with no mark; recovery (see
//! [`super::History::recover`]) settles it from what is on disk, once the owner's lease
//! shows the owner is gone.
//!
//! Every read-modify-append holds an exclusive `flock` on the journal, so ids never
//! collide and two processes never both undo one change.

use crate::error::{ErrorCode, ToolError, ToolResult};
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// What a change did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Edit,
    /// A new file (write_file without a file there).
    Create,
    /// A file or directory moved (renamed), maybe over a file (backed up).
    Move,
    /// Several files changed as one all-or-nothing group (apply_patch).
    Patch,
    Delete,
    DeletePermanent,
    Undo,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Edit => "edit",
            Action::Create => "create",
            Action::Move => "move",
            Action::Patch => "patch",
            Action::Delete => "delete",
            Action::DeletePermanent => "delete_permanent",
            Action::Undo => "undo",
        }
    }
}

/// Where a deleted object went: enough to find exactly it again, never a path an agent
/// could have written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TrashRecord {
    /// `home` (the freedesktop trash) or `ferret` (the state directory's trash).
    pub kind: super::trash::Kind,
    /// The trash directory used (the home trash's; empty for ferret's own).
    #[serde(skip_serializing_if = "no_path", default)]
    pub dir: PathBuf,
    /// Its name in the trash's `files/` directory.
    pub name: String,
    /// Device and inode of the trashed object: it is restored only if it is still the
    /// same object.
    pub dev: u64,
    pub ino: u64,
    /// For a regular file: its content's SHA-256, checked again before restoring.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sha256: Option<String>,
    pub is_dir: bool,
}

/// Where a moved object went, and which object it is: the undo moves back exactly it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MoveRecord {
    /// The destination as results name it, its root and real path in that root.
    pub to_path: String,
    pub to_root: usize,
    pub to_rel: PathBuf,
    pub dev: u64,
    pub ino: u64,
}

/// What one file of a group does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    /// New content over an existing file.
    Replace,
    /// A new file, never over anything.
    Create,
    /// The file removed.
    Remove,
}

/// One file of a group, as the journal records it: enough to finish the group after a
/// crash (the staged temporary file) and to undo it (the backup and the hashes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GroupOp {
    pub kind: OpKind,
    pub path: String,
    pub root: usize,
    pub rel: PathBuf,
    /// The staged new content beside the file (Replace, Create).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub temp: Option<String>,
    /// The old content (Replace, Remove), when backups are on.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub backup_path: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sha256_before: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sha256_after: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub created_dirs: Vec<PathBuf>,
    /// The removing half of a move (a patch's `move_to`, or the undo of one): the index,
    /// in the group, of the file that puts this one's content at its new name. The two
    /// are settled as one: this file is removed only once that one holds its content.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub moved_by: Option<usize>,
    /// The permission bits of the file a Replace or Remove found (no setuid or setgid),
    /// and the bits a Create gives its new file: an undo that makes a removed file
    /// anew gives it back its mode (an executable stays executable).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub mode: Option<u32>,
}

fn no_path(p: &Path) -> bool {
    p.as_os_str().is_empty()
}

/// Who made a change: the front end, its session and the agent's name. An entry written
/// before this was recorded has none: its owner is unknown, and it is no caller's own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Owner {
    /// `cli` or `shell` (the person at the terminal), or `mcp` (an agent: one session).
    pub front: String,
    pub session: String,
    #[serde(skip_serializing_if = "String::is_empty", default)]
    pub agent: String,
}

impl Owner {
    /// The person's own front ends: every run of the CLI and the shell is one person.
    pub fn is_person(&self) -> bool {
        matches!(self.front.as_str(), "cli" | "shell")
    }

    /// Whether a change made by `self` is `caller`'s own: an agent owns its session's
    /// changes, the person owns the changes of every CLI and shell run.
    pub fn owned_by(&self, caller: &Owner) -> bool {
        if caller.is_person() {
            self.is_person()
        } else {
            self.front == caller.front && self.session == caller.session
        }
    }

    /// `mcp session mcp-1234 (agent "claude")`, `cli`: as `history` and the person's
    /// questions show it. The agent's name is the client's own claim: it is shown only
    /// quoted, escaped (no newline, escape or direction mark of its own) and cut to 64
    /// characters, so it cannot pose as ferret's words or as another owner.
    pub fn describe(&self) -> String {
        if self.is_person() {
            return match self.front.as_str() {
                "shell" => "shell".into(),
                _ => "cli".into(),
            };
        }
        let label = |s: &str| {
            let cut: String = s.chars().take(64).collect();
            let more = if cut.len() < s.len() { "…" } else { "" };
            format!("{cut:?}{more}")
        };
        let mut s = format!(
            "{} session {}",
            if self.front == "mcp" {
                "mcp"
            } else {
                "unknown front end"
            },
            label(&self.session).trim_matches('"')
        );
        if !self.agent.is_empty() {
            s.push_str(&format!(" (agent {})", label(&self.agent)));
        }
        s
    }
}

/// One change, as the journal records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Entry {
    /// Sequential, starting at 1.
    pub id: u64,
    pub action: Action,
    /// The path as results name it (root-prefixed when there are several roots).
    pub path: String,
    /// Index of the root and the real path relative to it.
    pub root: usize,
    pub rel: PathBuf,
    /// The content before the change (edits, forced undos).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub backup_path: Option<PathBuf>,
    /// The temporary file an edit writes beside the file, removed by recovery.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub temp: Option<String>,
    /// Deletes and undos of deletes: the trashed object.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub trash: Option<TrashRecord>,
    /// RFC 3339.
    pub timestamp: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sha256_before: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sha256_after: Option<String>,
    /// Groups (apply_patch, and their undo): every file, in the order applied.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub group: Vec<GroupOp>,
    /// A group whose new contents are all staged: recovery finishes it rather than
    /// rolling it back.
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub staged: bool,
    /// Moves: where the object went.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub moved: Option<MoveRecord>,
    /// Creates: the directories made for the file, outermost first (removed again by
    /// its undo when empty).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub created_dirs: Vec<PathBuf>,
    /// For `undo` entries: the change undone.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub undoes: Option<u64>,
    /// The lease of the process that made the change (for recovery).
    #[serde(skip_serializing_if = "String::is_empty", default)]
    pub lease: String,
    /// Who made it (none in journals written before this was recorded: unknown).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub by: Option<Owner>,
    /// Files recovery left as it found them because they held content ferret did not
    /// write (a person's edit after the process making the change was killed).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub conflicted: Vec<String>,
    /// Whether the change is still under way (no mark yet).
    #[serde(default)]
    pub pending: bool,
}

impl Entry {
    /// Whether undo can revert it: an edit with a backup, a delete to the trash.
    pub fn undoable(&self) -> bool {
        match self.action {
            Action::Edit => self.backup_path.is_some(),
            // What was written is known by its hash: the undo removes exactly that.
            Action::Create => self.sha256_after.is_some(),
            Action::Move => self.moved.is_some(),
            // Undone by the inverse group, which needs every old content.
            Action::Patch => self
                .group
                .iter()
                .all(|op| op.kind == OpKind::Create || op.backup_path.is_some()),
            Action::Delete => self.trash.is_some(),
            Action::DeletePermanent | Action::Undo => false,
        }
    }

    /// A new entry for `action` on a real path, stamped now.
    pub fn new(action: Action, path: String, root: usize, rel: &Path) -> Entry {
        Entry {
            id: 0,
            action,
            path,
            root,
            rel: rel.to_path_buf(),
            backup_path: None,
            temp: None,
            trash: None,
            timestamp: crate::clock::now_rfc3339(),
            sha256_before: None,
            sha256_after: None,
            group: Vec::new(),
            staged: false,
            moved: None,
            created_dirs: Vec::new(),
            undoes: None,
            lease: String::new(),
            by: None,
            conflicted: Vec::new(),
            pending: true,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Committed,
    Aborted,
    /// Not a settlement: a group's new contents are all staged (see [`Entry::staged`]).
    Staged,
}

/// The line that settles a `begin`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Mark {
    id: u64,
    outcome: Outcome,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    note: Option<String>,
    /// Files recovery left alone (see [`Entry::conflicted`]).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    conflicted: Vec<String>,
    /// A delete through the OS trash: where the object ended up (known only once the
    /// trash has taken it), replacing the entry's record of where it was staged.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    trash: Option<TrashRecord>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Line {
    Entry(Box<Entry>),
    Mark(Mark),
}

/// The journal file, locked for the span of one [`Journal::with`].
pub struct Journal {
    path: PathBuf,
    cache: Mutex<Option<Cache>>,
}

/// The journal's content while it is locked: settled entries (committed) and those still
/// pending; aborted ones are left out. `next_id` is the id the next entry gets.
pub struct Locked<'a> {
    /// None when there is no journal yet (a look, which makes none).
    file: Option<&'a File>,
    pub entries: &'a mut Vec<Entry>,
    pub next_id: u64,
}

impl Locked<'_> {
    /// Appends a `begin` line; returns the entry's id.
    pub fn begin(&mut self, mut entry: Entry, lease: &str) -> ToolResult<u64> {
        // Every name the entry records must be one the journal can carry.
        let names = std::iter::once(&entry.rel)
            .chain(entry.moved.as_ref().map(|m| &m.to_rel))
            .chain(entry.created_dirs.iter())
            .chain(
                entry
                    .group
                    .iter()
                    .flat_map(|op| std::iter::once(&op.rel).chain(&op.created_dirs)),
            );
        for rel in names {
            crate::workspace::changeable_name(rel)?;
        }
        // Near the size every process reads back, new changes stop while undo goes on:
        // past that size nothing at all could be changed or undone (an agent filled it
        // with big patches in 5 minutes). The room above is kept for undos and marks.
        if entry.undoes.is_none()
            && let Some(f) = self.file
            && rustix::fs::fstat(f).is_ok_and(|st| st.st_size as u64 > new_changes_max())
        {
            return Err(ToolError::new(
                ErrorCode::FileTooLarge,
                format!(
                    "the undo journal is over {} MiB: no new change is made (undo still works)",
                    new_changes_max() >> 20
                ),
            )
            .with_hint(JOURNAL_FULL_HINT));
        }
        entry.id = self.next_id;
        entry.lease = lease.to_string();
        if entry.by.is_none() {
            entry.by = super::caller();
        }
        entry.pending = true;
        // An agent's undos stop short of the room kept for the person's: an agent that
        // filled the journal, then undid its own big patches, used up the room every
        // undo shares, and the person's undo of the agent's damaging edit was refused
        // (round 20).
        let agents_undo =
            entry.undoes.is_some() && !entry.by.as_ref().is_some_and(|o| o.is_person());
        let room = begin_room() + if agents_undo { person_room() } else { 0 };
        self.write(&entry, room)?;
        self.next_id += 1;
        let id = entry.id;
        self.entries.push(entry);
        trim(self.entries);
        Ok(id)
    }

    /// Appends the mark settling entry `id`.
    pub fn settle(&mut self, id: u64, outcome: Outcome, note: Option<String>) -> ToolResult<()> {
        self.settle_conflicted(id, outcome, note, Vec::new())
    }

    /// The same, naming the files recovery left alone.
    pub fn settle_conflicted(
        &mut self,
        id: u64,
        outcome: Outcome,
        note: Option<String>,
        conflicted: Vec<String>,
    ) -> ToolResult<()> {
        self.write(
            &Mark {
                id,
                outcome,
                note,
                conflicted: conflicted.clone(),
                trash: None,
            },
            0,
        )?;
        apply_mark(self.entries, id, outcome, conflicted, None);
        Ok(())
    }

    /// Commits delete `id`, whose object ended up where `rec` says (not where its entry
    /// said it would be staged).
    pub fn settle_trashed(
        &mut self,
        id: u64,
        rec: TrashRecord,
        note: Option<String>,
    ) -> ToolResult<()> {
        self.write(
            &Mark {
                id,
                outcome: Outcome::Committed,
                note,
                conflicted: Vec::new(),
                trash: Some(rec.clone()),
            },
            0,
        )?;
        apply_mark(self.entries, id, Outcome::Committed, Vec::new(), Some(rec));
        Ok(())
    }

    /// Whether change `id` was undone, or is being undone, by anyone. The window in
    /// memory answers for a change it holds (it holds every later entry with it); an
    /// older change is looked up in the file.
    pub fn undone(&self, id: u64) -> ToolResult<bool> {
        if self.entries.iter().any(|e| e.id == id && !e.pending) {
            return Ok(self.entries.iter().any(|e| e.undoes == Some(id)));
        }
        Ok(self.find_in_file(id)?.1)
    }

    /// Change `id` read from the whole file, for one older than the window kept in
    /// memory: the entry as its marks leave it (`None` if it was aborted or never
    /// made), and whether an undo of it was begun and not aborted. Reads every line,
    /// parsing only those that name `id` or one of its undos: an undo that far back is
    /// rare, and paying for it then keeps every other call off the file's length.
    pub fn find_in_file(&self, id: u64) -> ToolResult<(Option<Entry>, bool)> {
        let Some(mut f) = self.file else {
            return Ok((None, false));
        };
        f.seek(SeekFrom::Start(0))
            .map_err(|e| io_err("journal", &e))?;
        let mut reader = BufReader::new(f);
        let mut line = Vec::new();
        let mut found: Option<Entry> = None;
        // Undos of `id` begun, by their own ids, and those ids as text.
        let mut undos: Vec<(u64, String)> = Vec::new();
        let wanted = id.to_string();
        loop {
            line.clear();
            let n =
                read_line(&mut reader, &mut line, MAX_LINE).map_err(|e| io_err("journal", &e))?;
            if n == 0 {
                break;
            }
            let names = |digits: &str| memchr::memmem::find(&line, digits.as_bytes()).is_some();
            if !names(&wanted) && !undos.iter().any(|(_, u)| names(u)) {
                continue;
            }
            match serde_json::from_slice::<Line>(&line) {
                Ok(Line::Entry(e)) if e.id == id => found = Some(*e),
                Ok(Line::Entry(e)) if e.undoes == Some(id) => undos.push((e.id, e.id.to_string())),
                Ok(Line::Mark(m)) if m.id == id => {
                    if let Some(e) = found.as_mut() {
                        e.conflicted.extend(m.conflicted);
                        if m.trash.is_some() {
                            e.trash = m.trash;
                        }
                        match m.outcome {
                            Outcome::Committed => e.pending = false,
                            Outcome::Aborted => found = None,
                            Outcome::Staged => e.staged = true,
                        }
                    }
                }
                Ok(Line::Mark(m)) if m.outcome == Outcome::Aborted => {
                    undos.retain(|(u, _)| *u != m.id)
                }
                _ => {}
            }
        }
        Ok((found, !undos.is_empty()))
    }

    /// `room`: what the line must leave under the read cap ([`begin_room`] for a line
    /// beginning a change; 0 for a mark, which may use that room).
    fn write(&self, value: &impl Serialize, room: u64) -> ToolResult<()> {
        let mut line = serde_json::to_string(value)
            .map_err(|e| ToolError::new(ErrorCode::IoError, e.to_string()))?;
        // A line any process can read back: one patch of 690 new files, each in a chain
        // of 15 new folders of long escaped names, wrote a 153 MB line that every other
        // process then skipped (its change not undoable, its id used again). Refused
        // before anything of the change is written.
        if line.len() > MAX_ENTRY {
            return Err(ToolError::new(
                ErrorCode::FileTooLarge,
                format!(
                    "this change would take {} MiB in the undo journal, over the {} MiB one change may",
                    line.len() >> 20,
                    MAX_ENTRY >> 20
                ),
            )
            .with_hint("split it into smaller changes (fewer files, fewer new folders, shorter names)"));
        }
        line.push('\n');
        // Never past the size every process reads back (past it nothing at all could be
        // changed or undone): a change's line (undos included: round 19 filled the last
        // 128 MiB with undos of big patches) leaves room for the marks that settle it.
        if let Some(f) = self.file
            && rustix::fs::fstat(f)
                .is_ok_and(|st| st.st_size as u64 + line.len() as u64 + room > journal_max())
        {
            return Err(ToolError::new(
                ErrorCode::FileTooLarge,
                format!(
                    "the undo journal is nearly {} MiB, the most ferret reads back: nothing more is written to it",
                    journal_max() >> 20
                ),
            )
            .with_hint(JOURNAL_FULL_HINT));
        }
        // One write per line, then fsync: a crash leaves whole lines only, and a line
        // reported written is on disk.
        let Some(mut f) = self.file else {
            return Err(ToolError::new(
                ErrorCode::IoError,
                "the journal was opened to be read, not written",
            ));
        };
        f.write_all(line.as_bytes())
            .and_then(|()| f.sync_data())
            .map_err(|e| io_err("journal", &e))
    }
}

/// Settled entries a process keeps in memory: the most recent ones. An undo reaches
/// back this far at most (each file keeps 50 backups anyway); everything older stays in
/// the file, unread. Without a bound a long-lived server grew by about 2 KB per change.
pub const KEEP_ENTRIES: usize = 1000;

/// Entries past [`KEEP_ENTRIES`] before the oldest are dropped: one drain (a move of
/// 1 000 entries) per 125 changes. Trimming only at twice the window made the server's
/// memory a sawtooth of 1 000 entries, and took a busy server 20 s to fill.
const TRIM_SLACK: usize = KEEP_ENTRIES / 8;

/// Drops the oldest settled entries once there are [`TRIM_SLACK`] more than
/// [`KEEP_ENTRIES`]. Pending ones stay whatever their age: recovery needs them. A
/// group's `staged` flag stays set once it is committed, so it is no reason to keep one:
/// kept, every patch ever made stayed in memory, out of the suffix, and the check that
/// it was not undone already looked for its undo in a window that had dropped it. What
/// is kept is a suffix of the history, so every entry kept has every later change (the
/// undo of it, a later change of its file) kept with it.
fn trim(entries: &mut Vec<Entry>) {
    if entries.len() <= KEEP_ENTRIES + TRIM_SLACK {
        return;
    }
    let cut = entries.len() - KEEP_ENTRIES;
    let mut kept: Vec<Entry> = entries.drain(..cut).filter(|e| e.pending).collect();
    kept.append(entries);
    *entries = kept;
}

/// What a mark line does to the entries read so far. Entries are in id order (ids are
/// given under the lock, one more each time), so the entry is found by binary search;
/// a journal out of order is still handled, by a scan.
fn apply_mark(
    entries: &mut Vec<Entry>,
    id: u64,
    outcome: Outcome,
    conflicted: Vec<String>,
    trash: Option<TrashRecord>,
) {
    let at = match entries.binary_search_by_key(&id, |e| e.id) {
        Ok(i) if entries[i].id == id => Some(i),
        _ => entries.iter().position(|e| e.id == id),
    };
    let Some(i) = at else {
        return;
    };
    entries[i].conflicted.extend(conflicted);
    if trash.is_some() {
        entries[i].trash = trash;
    }
    match outcome {
        Outcome::Committed => entries[i].pending = false,
        Outcome::Aborted => {
            entries.remove(i);
        }
        Outcome::Staged => entries[i].staged = true,
    }
}

impl Journal {
    pub fn new(path: PathBuf) -> Journal {
        Journal {
            path,
            cache: Mutex::new(None),
        }
    }

    /// Runs `f` with the journal locked and read. Only what was appended since this
    /// process last held the lock is read (by this process or another): re-reading the
    /// whole journal made every change cost as much as the history behind it.
    ///
    /// `create`: make the journal if it is not there (for a change; the directory must
    /// exist). Otherwise a missing journal reads as empty and nothing is made. The file is
    /// opened never following a link, never blocking on a FIFO, only if it is a regular
    /// file, and only up to [`super::safe::JOURNAL_MAX_BYTES`].
    pub fn with<T>(
        &self,
        create: bool,
        f: impl FnOnce(&mut Locked) -> ToolResult<T>,
    ) -> ToolResult<T> {
        let opened = super::safe::open_regular(
            &self.path,
            OpenOptions::new().read(true).append(true).create(create),
        );
        let file = match opened {
            Ok(file) => file,
            Err(e) if !create && e.kind() == std::io::ErrorKind::NotFound => {
                *crate::error::lock(&self.cache) = None;
                let mut none = Vec::new();
                return f(&mut Locked {
                    file: None,
                    entries: &mut none,
                    next_id: 1,
                });
            }
            Err(e) => {
                return Err(super::safe::state_file_err(
                    "the undo journal",
                    &self.path,
                    &e,
                ));
            }
        };
        rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| io_err("journal lock", &e.into()))?;
        // Taken after the file lock by every caller, so the two never wait on each other.
        let mut cache = crate::error::lock(&self.cache);
        let st = rustix::fs::fstat(&file).map_err(|e| io_err("journal", &e.into()))?;
        let (dev, ino, size) = (st.st_dev as u64, st.st_ino as u64, st.st_size as u64);
        if size > journal_max() {
            *cache = None;
            // Not where it is: this reaches the agent, and a host path is not its to
            // know (round 19); the person finds it with `ferret config`.
            return Err(ToolError::new(
                ErrorCode::FileTooLarge,
                format!(
                    "the undo journal (journal.jsonl in the state directory) is {size} bytes, over the {} ferret reads",
                    journal_max()
                ),
            )
            .with_hint(
                "the user can move it aside (its history can then no longer be undone): it is in \
                 $XDG_STATE_HOME/ferret/<workspace id>/ (~/.local/state/ferret/…) or under --state-dir; \
                 or choose another state directory (--state-dir, FERRET_STATE_DIR)",
            ));
        }
        // A journal replaced or cut short since is read whole again.
        let same = cache
            .as_ref()
            .is_some_and(|c| c.dev == dev && c.ino == ino && c.offset <= size);
        if !same {
            *cache = Some(Cache {
                dev,
                ino,
                offset: 0,
                entries: Vec::new(),
                max_id: 0,
            });
        }
        let Some(c) = cache.as_mut() else {
            return Err(ToolError::new(ErrorCode::IoError, "journal cache"));
        };
        if let Err(e) = read_tail(&file, c) {
            // Whatever went wrong, the next call starts from scratch.
            *cache = None;
            return Err(e);
        }
        let mut locked = Locked {
            file: Some(&file),
            entries: &mut c.entries,
            next_id: c.max_id + 1,
        };
        let out = f(&mut locked);
        // What `f` appended is already in the entries (begin and settle apply their own
        // lines): go on from the end. A line cut short by a failed write is skipped,
        // so the next whole line is read whole.
        c.max_id = c.max_id.max(locked.next_id - 1);
        match rustix::fs::fstat(&file) {
            Ok(st) => c.offset = st.st_size as u64,
            Err(_) => *cache = None,
        }
        out
    }
}

/// The journal as last read by this process, and where reading stopped.
struct Cache {
    dev: u64,
    ino: u64,
    /// Bytes read: always the end of a whole line.
    offset: u64,
    entries: Vec<Entry>,
    /// The largest id seen (aborted entries are dropped, their ids never reused).
    max_id: u64,
}

/// The longest journal line kept: a longer one is skipped as damaged (its bytes are
/// consumed, never held). A patch of thousands of files makes lines of a few MB.
const MAX_LINE: usize = 64 << 20;

/// Past this size of journal, new changes are refused and undos still made: well under
/// [`super::safe::JOURNAL_MAX_BYTES`], past which the journal is not read at all.
const NEW_CHANGES_MAX: u64 = super::safe::JOURNAL_MAX_BYTES - (128 << 20);

/// [`NEW_CHANGES_MAX`], or in tests `FERRET_TEST_JOURNAL_NEW_CHANGES_MAX` bytes (a test
/// cannot write a gigabyte of journal).
fn new_changes_max() -> u64 {
    std::env::var("FERRET_TEST_JOURNAL_NEW_CHANGES_MAX")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(NEW_CHANGES_MAX)
}

/// What to do when the journal takes no more (new changes, or anything at all).
const JOURNAL_FULL_HINT: &str = "ask the user to move the journal aside (`ferret history` names the state \
     directory; its changes can then no longer be undone) or to choose another state directory";

/// Room kept under the read cap by a change's `begin` line, for the marks settling
/// every change under way (a mark is a few hundred bytes).
const BEGIN_ROOM: u64 = 16 << 20;

/// [`BEGIN_ROOM`] (in proportion under a test's small journal cap).
fn begin_room() -> u64 {
    BEGIN_ROOM.min(journal_max() / 8)
}

/// Room under the read cap only the person's undos may use: 64 MiB (in proportion under a
/// test's small cap), four undos of the biggest change.
fn person_room() -> u64 {
    (64u64 << 20).min(journal_max() / 4)
}

/// [`super::safe::JOURNAL_MAX_BYTES`], or in tests `FERRET_TEST_JOURNAL_MAX` bytes.
fn journal_max() -> u64 {
    std::env::var("FERRET_TEST_JOURNAL_MAX")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(super::safe::JOURNAL_MAX_BYTES)
}

/// The most one journal line may take when written: well under [`MAX_LINE`].
const MAX_ENTRY: usize = 16 << 20;

/// Reads one line (with its newline) into `line` as `read_until` does, returning the
/// bytes consumed; a line over [`MAX_LINE`] is consumed whole but `line` holds only
/// `{}` and its newline (then it parses as nothing and is skipped).
fn read_line(reader: &mut impl BufRead, line: &mut Vec<u8>, max: usize) -> std::io::Result<usize> {
    let mut consumed = 0;
    let mut too_long = false;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            break;
        }
        let (take, done) = match memchr::memchr(b'\n', buf) {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        if !too_long {
            if line.len() + take > max {
                too_long = true;
                line.clear();
            } else {
                line.extend_from_slice(&buf[..take]);
            }
        }
        reader.consume(take);
        consumed += take;
        if done {
            if too_long {
                tracing::warn!("skipping a journal line over {max} bytes");
                line.extend_from_slice(b"{}\n");
            }
            break;
        }
    }
    Ok(consumed)
}

/// Reads the lines appended since `c.offset` into `c`.
fn read_tail(file: &File, c: &mut Cache) -> ToolResult<()> {
    let mut f = file;
    f.seek(SeekFrom::Start(c.offset))
        .map_err(|e| io_err("journal", &e))?;
    let mut reader = BufReader::new(f);
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = read_line(&mut reader, &mut line, MAX_LINE).map_err(|e| io_err("journal", &e))?;
        if n == 0 || line.last() != Some(&b'\n') {
            // The end, or a line still being written: read it next time.
            return Ok(());
        }
        c.offset += n as u64;
        let text = String::from_utf8_lossy(&line);
        if text.trim().is_empty() {
            continue;
        }
        // A line that does not parse is skipped, never fatal: one damaged line must not
        // lock an agent out of undo.
        match serde_json::from_str::<Line>(&text) {
            Ok(Line::Entry(e)) => {
                c.max_id = c.max_id.max(e.id);
                c.entries.push(*e);
                trim(&mut c.entries);
            }
            Ok(Line::Mark(m)) => apply_mark(&mut c.entries, m.id, m.outcome, m.conflicted, m.trash),
            Err(e) => tracing::warn!(error = %e, "skipping a damaged journal line"),
        }
    }
}

pub(super) fn io_err(what: &str, e: &std::io::Error) -> ToolError {
    ToolError::new(ErrorCode::IoError, format!("{what}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn begin(j: &Journal, path: &str) -> u64 {
        j.with(true, |l| {
            l.begin(
                Entry::new(Action::Edit, path.into(), 0, Path::new(path)),
                "t",
            )
        })
        .unwrap()
    }

    fn seen(j: &Journal) -> Vec<(u64, bool)> {
        j.with(true, |l| {
            Ok(l.entries.iter().map(|e| (e.id, e.pending)).collect())
        })
        .unwrap()
    }

    #[test]
    fn memory_keeps_a_bounded_suffix_of_the_history_and_every_pending_change() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let j = Journal::new(path.clone());
        let old_pending = begin(&j, "pending.txt");
        let n = 3 * KEEP_ENTRIES as u64;
        j.with(true, |l| {
            for i in 0..n {
                let id = l.begin(
                    Entry::new(Action::Edit, format!("f{i}"), 0, Path::new("f")),
                    "t",
                )?;
                l.settle(id, Outcome::Committed, None)?;
            }
            Ok(())
        })
        .unwrap();
        let check = |j: &Journal| {
            let s = seen(j);
            assert!(s.len() <= KEEP_ENTRIES + TRIM_SLACK + 1, "{} kept", s.len());
            assert!(s.len() > KEEP_ENTRIES, "{} kept", s.len());
            assert_eq!(s[0], (old_pending, true), "the pending change stays");
            assert_eq!(s.last().unwrap().0, old_pending + n, "the newest stays");
            // A suffix: ids run on without a gap after the pending one.
            assert!(s[1..].windows(2).all(|w| w[1].0 == w[0].0 + 1));
        };
        check(&j);
        // Another process reading the whole file keeps the same bound.
        check(&Journal::new(path));
    }

    #[test]
    fn each_process_reads_what_the_others_appended_and_what_replaced_the_journal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        // Two journals on one file: two processes.
        let (a, b) = (Journal::new(path.clone()), Journal::new(path.clone()));
        let one = begin(&a, "x");
        let two = begin(&b, "y");
        assert_eq!(
            (one, two),
            (1, 2),
            "ids are given under the lock, across processes"
        );
        b.with(true, |l| l.settle(one, Outcome::Committed, None))
            .unwrap();
        a.with(true, |l| l.settle(two, Outcome::Aborted, None))
            .unwrap();
        assert_eq!(seen(&a), vec![(1, false)]);
        assert_eq!(seen(&b), vec![(1, false)]);
        // An aborted id is never given again.
        assert_eq!(begin(&b, "z"), 3);
        assert_eq!(seen(&a), vec![(1, false), (3, true)]);

        // A journal replaced (a new file renamed over it) is read whole again.
        let fresh = dir.path().join("new.jsonl");
        let c = Journal::new(fresh.clone());
        begin(&c, "w");
        std::fs::rename(&fresh, &path).unwrap();
        assert_eq!(seen(&a), vec![(1, true)]);
        // One cut short too.
        std::fs::write(&path, "").unwrap();
        assert_eq!(seen(&b), vec![]);
        assert_eq!(begin(&a, "v"), 1);
    }

    #[test]
    fn a_line_over_the_cap_is_consumed_not_kept_and_the_next_one_read() {
        let text = format!("{}\n{{\"id\":1}}\npartial", "x".repeat(100));
        // A reader with a small buffer: the long line spans many fills.
        let mut r = std::io::BufReader::with_capacity(7, text.as_bytes());
        let mut line = Vec::new();
        assert_eq!(read_line(&mut r, &mut line, 50).unwrap(), 101);
        assert_eq!(line, b"{}\n");
        line.clear();
        assert_eq!(read_line(&mut r, &mut line, 50).unwrap(), 9);
        assert_eq!(line, b"{\"id\":1}\n");
        line.clear();
        // The end, no newline: what is there, for the caller to leave for next time.
        assert_eq!(read_line(&mut r, &mut line, 50).unwrap(), 7);
        assert_eq!(line, b"partial");
        line.clear();
        assert_eq!(read_line(&mut r, &mut line, 50).unwrap(), 0);
    }

    #[test]
    fn a_damaged_line_is_skipped_and_the_next_one_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let j = Journal::new(path.clone());
        begin(&j, "x");
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"{not json}\n").unwrap();
        let other = Journal::new(path.clone());
        begin(&other, "y");
        assert_eq!(seen(&j), vec![(1, true), (2, true)]);
    }

    #[test]
    fn an_old_change_is_found_in_the_file_with_its_marks_and_its_undos() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::new(dir.path().join("journal.jsonl"));
        let undo_of = |l: &mut Locked, id: u64, outcome: Outcome| {
            let mut e = Entry::new(Action::Undo, "a".into(), 0, Path::new("a"));
            e.undoes = Some(id);
            let u = l.begin(e, "t")?;
            l.settle(u, outcome, None)
        };
        let (kept, dropped, undone, group) = j
            .with(true, |l| {
                let mk = |l: &mut Locked, outcome| {
                    let id =
                        l.begin(Entry::new(Action::Edit, "a".into(), 0, Path::new("a")), "t")?;
                    l.settle(id, outcome, None).map(|()| id)
                };
                let kept = mk(l, Outcome::Committed)?;
                let dropped = mk(l, Outcome::Aborted)?;
                let undone = mk(l, Outcome::Committed)?;
                // A group: staged, then committed; it must leave the window like the rest.
                let group = l.begin(
                    Entry::new(Action::Patch, "a".into(), 0, Path::new("a")),
                    "t",
                )?;
                l.settle(group, Outcome::Staged, None)?;
                l.settle(group, Outcome::Committed, None)?;
                // An undo that failed does not count; one that landed does.
                undo_of(l, kept, Outcome::Aborted)?;
                undo_of(l, undone, Outcome::Committed)?;
                // Enough later changes that these fall out of the window in memory; ids
                // with the same digits inside (10, 110, …) must not confuse the lookup.
                for _ in 0..KEEP_ENTRIES + TRIM_SLACK + 10 {
                    mk(l, Outcome::Committed)?;
                }
                Ok((kept, dropped, undone, group))
            })
            .unwrap();
        j.with(true, |l| {
            assert!(l.entries.iter().all(|e| e.id > group), "out of the window");
            let (e, was) = l.find_in_file(kept)?;
            assert_eq!(e.map(|e| (e.id, e.pending)), Some((kept, false)));
            assert!(!was, "its only undo was aborted");
            assert!(!l.undone(kept)?);
            assert_eq!(
                l.find_in_file(dropped)?.0,
                None,
                "an aborted change is none"
            );
            assert!(l.find_in_file(undone)?.1);
            assert!(l.undone(undone)?);
            assert_eq!(l.find_in_file(99_999)?.0, None);
            Ok(())
        })
        .unwrap();
    }
}

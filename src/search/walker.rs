//! The directory walk every search takes: ripgrep's ignore rules, over directory handles.
//!
//! Each directory is opened beneath its root with no symlink on the way
//! ([`Workspace::open_dir_found`]) and its names are read from that handle (`getdents`),
//! so every name the walk yields was listed by the kernel in a directory inside the
//! sandbox: nothing to confirm afterwards, nothing a directory swapped for a symlink can
//! redirect. Symlinks are never followed; only regular files (and, when asked,
//! directories) are yielded.
//!
//! The rules are the `ignore` crate's, as ripgrep and fd apply them with
//! `--no-require-git`. They are reproduced here because that crate's walker lists
//! directories by path; the matchers themselves are still the crate's
//! ([`Gitignore`], [`Override`]):
//! - `-g` overrides decide first; a file matching no positive override is left out;
//! - then `.ignore` over `.gitignore` over `.git/info/exclude`, each decided by the
//!   nearest directory that has a rule for the name, including the directories above the
//!   walk's start (and above the root);
//! - a name no rule decides is left out if it is hidden (starts with `.`), so a
//!   whitelist (`!.github`) brings a hidden name back.
//!
//! Then the workspace's deny and skip rules prune what is left.
//!
//! Two differences, both for safety: an ignore file that is a symlink is not read, and
//! neither is a `.git` file's pointer to a git directory elsewhere (a worktree's
//! `info/exclude`): a hostile tree could aim either anywhere. Parity with the `ignore`
//! walker on a tree of ignore-file corner cases is tested (`tests/it/search.rs`).
//!
//! Work is shared between threads through one LIFO stack (depth first, so few pending
//! paths): directories, each opened only when a thread takes it (no handle is held for
//! directories waiting their turn, however wide or deep the tree), and shares of a big
//! directory's files.
//!
//! [`Workspace::open_dir_found`]: crate::workspace::Workspace::open_dir_found
//! [`Gitignore`]: ignore::gitignore::Gitignore
//! [`Override`]: ignore::overrides::Override

use super::{Found, Go, SearchEnv};
use crate::workspace::{Workspace, read_capped_at};
use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::overrides::Override;
use rustix::fd::BorrowedFd;
use rustix::fs::{AtFlags, FileType};
use std::ffi::OsStr;
use std::io::Read;
use std::ops::Range;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// Ignore files larger than this are not used at all (their rules do not apply, and
/// the call's result says so): they are advisory, and a hostile tree could plant a huge
/// one. Git does the same past 100 MiB ("ignoring excessively large pattern file");
/// compiling ours costs far more per line than git's matching, hence lower caps.
pub const IGNORE_FILE_MAX: u64 = 1 << 20;

/// Ignore files with more lines than this are not used either.
pub const IGNORE_FILE_MAX_LINES: u64 = 20_000;

/// Nor those whose lines that need a regex of their own weigh more than this (see
/// [`weight`]: one for the line and one per wildcard in it). A line of three wildcards
/// costs the matcher 10 to 15 KB and a third of a millisecond to build (measured: 10 000
/// such lines, 210 MB and 3.9 s), where a literal name costs ~1 KB; what a line costs
/// grows with its wildcards (the attacker pass: 999 lines of ~509 `*` each, under a
/// count of lines, took 570 MB), so they are what is counted. About a thousand ordinary
/// wildcard lines.
pub const IGNORE_FILE_MAX_COSTLY: u64 = 4_000;

/// A line with more wildcards than this is no line a person wrote: the file holding it is
/// not used.
pub const IGNORE_LINE_MAX_WILDCARDS: u64 = 32;

/// The ignore files one call reads, in all: past any of these totals, the call's
/// further ignore files are not used (a tree of ten thousand directories, each with a
/// 1 MB ignore file). Together they bound what one call's ignore rules take to ~100 MB
/// and ~1.5 s of compiling.
pub const IGNORE_TOTAL_BYTES: u64 = 8 << 20;
pub const IGNORE_TOTAL_LINES: u64 = 50_000;
pub const IGNORE_TOTAL_COSTLY: u64 = 16_000;

/// The three kinds of ignore file, in precedence order.
const KINDS: [&str; 3] = [".ignore", ".gitignore", ".git/info/exclude"];

/// One directory's ignore rules, linked to those of the directories above it. Only
/// directories with at least one rule get a level.
struct Level {
    rules: [Gitignore; 3],
    /// The memory the compiled rules take, held from the shared budget while they live.
    _held: Vec<super::cost::Permit<'static>>,
    parent: Option<Arc<Level>>,
    /// Rooted at an absolute directory above the workspace root (matched with absolute
    /// paths); otherwise rooted at a root-relative directory.
    absolute: bool,
}

type Chain = Option<Arc<Level>>;

/// What one walk of one directory tree needs.
pub(super) struct Walker<'a> {
    pub ws: &'a Workspace,
    pub env: &'a SearchEnv<'a>,
    pub root: usize,
    /// The walk's start, relative to the root.
    pub base: &'a Path,
    pub hidden: bool,
    /// Read no ignore files (rg's `--no-ignore`).
    pub no_ignore: bool,
    /// rg's file types (`-t rust`, `-T js`): decided after the ignore files, as rg does.
    pub types: Option<&'a ignore::types::Types>,
    pub dirs: bool,
    /// Matched against paths relative to the walk's start.
    pub overrides: &'a Override,
}

enum Job {
    /// A directory to list.
    Dir { rel: PathBuf, chain: Chain },
    /// Files of a listed directory, shared out so a big directory keeps every thread
    /// busy (ripgrep's walker shares out single entries).
    Files(Arc<Names>, Range<usize>),
}

/// Files of one directory: its path once and their names, not a path each. A hostile
/// tree's 4 KB directory paths, copied into each of a wide directory's shared-out files,
/// held 15 MB a batch and 166 MB for one glob.
struct Names {
    dir: PathBuf,
    arena: Vec<u8>,
    ends: Vec<usize>,
}

impl Names {
    fn new(dir: PathBuf) -> Names {
        Names {
            dir,
            arena: Vec::new(),
            ends: Vec::new(),
        }
    }

    fn push(&mut self, name: &OsStr) {
        self.arena.extend_from_slice(name.as_bytes());
        self.ends.push(self.arena.len());
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    fn name(&self, i: usize) -> &OsStr {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        OsStr::from_bytes(&self.arena[start..self.ends[i]])
    }
}

/// Files of one directory visited by the thread that listed it before the rest are
/// shared out, and the size of each share.
const FILES_SHARE: usize = 32;

#[derive(Default)]
struct Queue {
    jobs: Vec<Job>,
    /// Threads running a job (which may push more).
    busy: usize,
}

/// The queue, its wake-up call and the stop flag, which every thread shares.
struct Pool<'p> {
    queue: &'p Mutex<Queue>,
    wake: &'p Condvar,
    stop: &'p AtomicBool,
}

impl Pool<'_> {
    fn push(&self, jobs: &mut Vec<Job>) {
        if jobs.is_empty() {
            return;
        }
        crate::error::lock(self.queue).jobs.append(jobs);
        self.wake.notify_all();
    }

    /// Jobs waiting.
    fn pending(&self) -> usize {
        crate::error::lock(self.queue).jobs.len()
    }
}

/// How a walk ended early.
pub(super) struct Stopped;

impl Walker<'_> {
    /// Walks the tree on `threads` threads, calling a visitor (one per thread, made by
    /// `mk`) for each entry kept. `Err(Stopped)` when a visitor asked to stop or the
    /// call was cancelled or timed out.
    pub fn run<'s, M, V>(&self, threads: usize, mk: &M) -> Result<(), Stopped>
    where
        M: Fn() -> V + Sync,
        V: FnMut(&Found) -> Go + Send + 's,
    {
        let chain = if self.no_ignore {
            None
        } else {
            self.start_chain()
        };
        let queue = Mutex::new(Queue {
            jobs: vec![Job::Dir {
                rel: self.base.to_path_buf(),
                chain,
            }],
            busy: 0,
        });
        let wake = Condvar::new();
        let stop = AtomicBool::new(false);
        let pool = Pool {
            queue: &queue,
            wake: &wake,
            stop: &stop,
        };
        std::thread::scope(|s| {
            for _ in 1..threads.max(1) {
                s.spawn(|| self.work(&pool, mk()));
            }
            self.work(&pool, mk());
        });
        if stop.load(Ordering::Relaxed) {
            Err(Stopped)
        } else {
            Ok(())
        }
    }

    fn work<V: FnMut(&Found) -> Go>(&self, pool: &Pool, mut visit: V) {
        loop {
            let job = {
                let mut q = crate::error::lock(pool.queue);
                loop {
                    if pool.stop.load(Ordering::Relaxed) {
                        pool.wake.notify_all();
                        return;
                    }
                    if let Some(job) = q.jobs.pop() {
                        q.busy += 1;
                        break job;
                    }
                    if q.busy == 0 {
                        pool.wake.notify_all();
                        return;
                    }
                    q = pool
                        .wake
                        .wait(q)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                }
            };
            let went_on = match job {
                Job::Dir { rel, chain } => self.dir(rel, chain, &mut visit, pool),
                Job::Files(files, range) => self.files(&files, range, &mut visit),
            };
            if !went_on {
                pool.stop.store(true, Ordering::Relaxed);
            }
            let mut q = crate::error::lock(pool.queue);
            q.busy -= 1;
            if q.busy == 0 || !went_on {
                pool.wake.notify_all();
            }
        }
    }

    /// Lists one directory: hands its subdirectories to the pool, visits what it keeps
    /// (sharing out the files of a big one). False when the walk must stop.
    ///
    /// A directory is read [`CHUNK`] names at a time, each batch judged and handed on
    /// before the next is read, with the stop flag and deadline checked between
    /// batches: a directory of 400 000 long names held every name and path at once
    /// (~200 MB a call) and was read whole before any deadline check.
    fn dir<V: FnMut(&Found) -> Go>(
        &self,
        rel: PathBuf,
        chain: Chain,
        visit: &mut V,
        pool: &Pool,
    ) -> Go {
        let control = self.env.control;
        if control.stopped() {
            return false;
        }
        // An unreadable directory (or one swapped for a link) costs only itself; one
        // whose path is past the system's limit is said, not silently passed over.
        let fd = match self.ws.open_dir_found(self.root, &rel) {
            Ok(fd) => fd,
            Err(e) => {
                if is_too_long(&e) {
                    control.warn(too_long(self.ws, self.root, &rel));
                }
                return true;
            }
        };
        let mut lister = crate::platform::Lister::new(rustix::fd::AsFd::as_fd(&fd));
        // Names go into one buffer (no allocation per name).
        let mut batch = Batch::default();
        let mut done = lister.fill(rustix::fd::AsFd::as_fd(&fd), CHUNK, &mut |name, ft| {
            batch.add(&fd, name, ft)
        });
        if !done {
            // Too big to read in one batch: the ignore files it holds are looked up by
            // name, since its later batches are not read yet.
            batch.probe(&fd);
        }
        let (has_ignore, has_gitignore, has_git) = batch.present;
        let chain = if !self.no_ignore && (has_ignore || has_gitignore || has_git) {
            use rustix::fd::AsFd;
            self.level(
                fd.as_fd(),
                &rel,
                [has_ignore, has_gitignore, has_git],
                chain,
            )
        } else {
            chain
        };

        // Below the path depth limit nothing is shown, as `read_file` refuses it: a
        // directory at the limit is listed, not entered (no 10 000-deep walk either).
        let limit = self.ws.max_path_depth();
        let enter = limit == 0 || rel.components().count() + 1 < limit;
        let mut here = rel;
        loop {
            if !self.batch(&batch, &chain, &mut here, enter, visit, pool) {
                return false;
            }
            if done {
                return true;
            }
            if control.stopped() {
                return false;
            }
            batch.clear();
            done = lister.fill(rustix::fd::AsFd::as_fd(&fd), CHUNK, &mut |name, ft| {
                batch.add(&fd, name, ft)
            });
        }
    }

    /// Judges one batch of a directory's names (`here` is the directory), then visits
    /// or shares out what it keeps. While the queue is long, the work is done here
    /// rather than queued: a wide directory read in batches must not pile all of its
    /// names up in the queue instead.
    fn batch<V: FnMut(&Found) -> Go>(
        &self,
        batch: &Batch,
        chain: &Chain,
        here: &mut PathBuf,
        enter: bool,
        visit: &mut V,
        pool: &Pool,
    ) -> Go {
        let base_len = self.base.as_os_str().len();
        let mut subdirs = Vec::new();
        let mut files = Names::new(here.clone());
        for &(from, to, kind) in &batch.names {
            let is_dir = kind == Kind::Dir;
            let name = OsStr::from_bytes(&batch.arena[from..to]);
            here.push(name);
            if self.keeps(chain, here, below(here, base_len), name, is_dir)
                && !self.ws.walk_excludes(here, is_dir)
            {
                if !is_dir {
                    files.push(name);
                } else {
                    if self.dirs
                        && !visit(&Found {
                            root: self.root,
                            rel: here,
                            rel_to_base: below(here, base_len),
                            is_dir,
                            listed: None,
                        })
                    {
                        here.pop();
                        return false;
                    }
                    if enter {
                        subdirs.push(Job::Dir {
                            rel: here.clone(),
                            chain: chain.clone(),
                        });
                    }
                }
            }
            here.pop();
        }
        if pool.pending() > QUEUE_MAX && here.components().count() < INLINE_DEPTH_MAX {
            // Depth first on this thread: the depth limit bounds the recursion.
            for job in subdirs.into_iter().rev() {
                if let Job::Dir { rel, chain } = job
                    && !self.dir(rel, chain, visit, pool)
                {
                    return false;
                }
            }
            return self.files(&files, 0..files.len(), visit);
        }
        pool.push(&mut subdirs);
        if files.len() <= 2 * FILES_SHARE {
            return self.files(&files, 0..files.len(), visit);
        }
        let files = Arc::new(files);
        let mut shares: Vec<Job> = (FILES_SHARE..files.len())
            .step_by(FILES_SHARE)
            .map(|at| Job::Files(files.clone(), at..(at + FILES_SHARE).min(files.len())))
            .collect();
        pool.push(&mut shares);
        self.files(&files, 0..FILES_SHARE, visit)
    }

    fn files<V: FnMut(&Found) -> Go>(
        &self,
        files: &Names,
        range: Range<usize>,
        visit: &mut V,
    ) -> Go {
        let base_len = self.base.as_os_str().len();
        let mut rel = files.dir.clone();
        for (n, i) in range.enumerate() {
            if n % 64 == 63 && self.env.control.stopped() {
                return false;
            }
            rel.push(files.name(i));
            let found = Found {
                root: self.root,
                rel: &rel,
                rel_to_base: below(&rel, base_len),
                is_dir: false,
                listed: None,
            };
            let go = visit(&found);
            rel.pop();
            if !go {
                return false;
            }
        }
        true
    }

    /// The `ignore` crate's verdict on one entry (see the top of this file).
    fn keeps(
        &self,
        chain: &Chain,
        rel: &Path,
        rel_to_base: &Path,
        name: &OsStr,
        is_dir: bool,
    ) -> bool {
        if !self.overrides.is_empty() {
            // Globs are in NFC (see `overrides`): so is the name they are matched to.
            let rel_to_base = crate::workspace::patterns::nfc_cow(rel_to_base);
            let m = self.overrides.matched(&rel_to_base, is_dir);
            if !m.is_none() {
                return !m.is_ignore();
            }
        }
        let m = self.ignored(chain, rel, is_dir);
        if m.is_ignore() {
            return false;
        }
        let mut whitelisted = m.is_whitelist();
        if let Some(types) = self.types {
            let t = types.matched(Path::new(name), is_dir);
            if t.is_ignore() {
                return false;
            }
            whitelisted |= t.is_whitelist();
        }
        whitelisted || !(self.hidden && name.as_bytes().starts_with(b"."))
    }

    /// The nearest rule of each kind, then the kinds in precedence order.
    fn ignored(&self, chain: &Chain, rel: &Path, is_dir: bool) -> Match<()> {
        let mut found = [Match::None, Match::None, Match::None];
        let mut absolute: Option<PathBuf> = None;
        let mut at = chain.as_deref();
        while let Some(level) = at {
            for (k, rules) in level.rules.iter().enumerate() {
                if found[k].is_none() && !rules.is_empty() {
                    let path = if level.absolute {
                        absolute.get_or_insert_with(|| self.ws.root_canonical(self.root).join(rel))
                    } else {
                        rel
                    };
                    found[k] = rules.matched(path, is_dir).map(|_| ());
                }
            }
            if found.iter().all(|m| !m.is_none()) {
                break;
            }
            at = level.parent.as_deref();
        }
        let [a, b, c] = found;
        a.or(b).or(c)
    }

    /// The rules of the directories above the walk's start: above the root, read by
    /// path (as ripgrep does; no agent writes there through ferret); between the root
    /// and the start, through handles.
    fn start_chain(&self) -> Chain {
        let mut chain: Chain = None;
        let canonical = self.ws.root_canonical(self.root);
        let above: Vec<&Path> = canonical.ancestors().skip(1).collect();
        for dir in above.into_iter().rev() {
            let rules = KINDS.map(|k| {
                let path = dir.join(k);
                if k.starts_with(".git/") && !dir.join(".git").is_dir() {
                    return Compiled::none();
                }
                let read = match std::fs::metadata(&path) {
                    Ok(m) if m.is_file() && m.len() > IGNORE_FILE_MAX => Some(Err(m.len())),
                    Ok(m) if m.is_file() => std::fs::File::open(&path).ok().and_then(|f| {
                        let mut b = Vec::new();
                        f.take(IGNORE_FILE_MAX + 1).read_to_end(&mut b).ok()?;
                        Some(if b.len() as u64 > IGNORE_FILE_MAX {
                            Err(b.len() as u64)
                        } else {
                            Ok(b)
                        })
                    }),
                    _ => None,
                };
                // Named from the root (`../../.gitignore`), never by its host path, and
                // said without its size or rules: it is outside the root (round 28).
                let up = canonical
                    .components()
                    .count()
                    .saturating_sub(dir.components().count());
                self.compile(dir, read, true, || format!("{}{k}", "../".repeat(up)))
            });
            chain = push(chain, rules, true);
        }
        let mut rel = PathBuf::new();
        for c in self.base.components() {
            // The root itself, then each directory down to the start's parent.
            chain = self.level_at(&rel, chain);
            rel.push(c);
        }
        chain
    }

    fn level_at(&self, rel: &Path, chain: Chain) -> Chain {
        match self.ws.open_dir_found(self.root, rel) {
            Ok(fd) => {
                use rustix::fd::AsFd;
                self.level(fd.as_fd(), rel, [true; 3], chain)
            }
            Err(_) => chain,
        }
    }
}

/// Names read from a directory before they are judged and handed on (see
/// [`Walker::dir`]): about 1 MB of names and paths at most per batch.
pub const CHUNK: usize = 4096;

/// Jobs waiting in the queue past which a thread does the work of its batch itself
/// rather than queue it.
const QUEUE_MAX: usize = 1024;

/// How deep a thread may go doing work itself rather than queueing it (the recursion
/// [`Walker::batch`] adds on a long queue).
const INLINE_DEPTH_MAX: usize = 64;

/// One batch of a directory's names, and whether the directory holds ignore files.
#[derive(Default)]
struct Batch {
    arena: Vec<u8>,
    names: Vec<(usize, usize, Kind)>,
    /// `.ignore`, `.gitignore`, `.git/` (a real directory).
    present: (bool, bool, bool),
}

impl Batch {
    fn clear(&mut self) {
        self.arena.clear();
        self.names.clear();
    }

    fn add(&mut self, fd: &rustix::fd::OwnedFd, name: &[u8], ft: FileType) {
        if name == b"." || name == b".." {
            return;
        }
        let kind = match ft {
            FileType::Directory => Kind::Dir,
            FileType::RegularFile => Kind::File,
            FileType::Unknown => kind_at(fd, name),
            _ => Kind::Other,
        };
        match name {
            b".ignore" => self.present.0 = true,
            b".gitignore" => self.present.1 = true,
            // Only a real directory: a `.git` file points elsewhere (see the top).
            b".git" => self.present.2 = kind == Kind::Dir,
            _ => {}
        }
        if kind != Kind::Other {
            self.names
                .push((self.arena.len(), self.arena.len() + name.len(), kind));
            self.arena.extend_from_slice(name);
        }
    }

    /// Looks the ignore files up by name (a directory read in several batches).
    fn probe(&mut self, fd: &rustix::fd::OwnedFd) {
        let exists = |n: &str| {
            rustix::fs::statat(fd, OsStr::new(n), AtFlags::SYMLINK_NOFOLLOW)
                .ok()
                .map(|st| FileType::from_raw_mode(st.st_mode))
        };
        self.present.0 |= exists(".ignore").is_some();
        self.present.1 |= exists(".gitignore").is_some();
        self.present.2 |= exists(".git") == Some(FileType::Directory);
    }
}

fn kind_at(fd: &rustix::fd::OwnedFd, name: &[u8]) -> Kind {
    rustix::fs::statat(fd, OsStr::from_bytes(name), AtFlags::SYMLINK_NOFOLLOW).map_or(
        Kind::Other,
        |st| match FileType::from_raw_mode(st.st_mode) {
            FileType::Directory => Kind::Dir,
            FileType::RegularFile => Kind::File,
            _ => Kind::Other,
        },
    )
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dir,
    File,
    Other,
}

/// `rel` past its first `base_len` bytes and the `/` after them: the path below the
/// walk's start.
fn below(rel: &Path, base_len: usize) -> &Path {
    let b = rel.as_os_str().as_bytes();
    let cut = if base_len == 0 { 0 } else { base_len + 1 };
    Path::new(OsStr::from_bytes(b.get(cut..).unwrap_or_default()))
}

impl Walker<'_> {
    /// The level for directory `rel` (its handle `fd`), reading the ignore files
    /// `present` says it has.
    fn level(&self, fd: BorrowedFd<'_>, rel: &Path, present: [bool; 3], chain: Chain) -> Chain {
        let root = if rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            rel
        };
        let mut i = 0;
        let rules = KINDS.map(|k| {
            let here = present[i];
            i += 1;
            if !here || self.ignore_budget_spent() {
                return Compiled::none();
            }
            let read = read_capped_at(fd, Path::new(k), IGNORE_FILE_MAX);
            // `.git/info/exclude` is inside the denied `.git`: a warning may say it was
            // not used, never its size, line count or rules (round 28).
            let private = k.starts_with(".git/");
            self.compile(root, read, private, || {
                self.ws
                    .shown_name(&self.ws.root_path(self.root).join(rel).join(k))
            })
        });
        push(chain, rules, false)
    }

    /// Whether this call already read all the ignore files it may; says so once.
    fn ignore_budget_spent(&self) -> bool {
        let spent = &self.env.control.spent;
        let over = spent.ignore_bytes.load(Ordering::Relaxed) > IGNORE_TOTAL_BYTES
            || spent.ignore_lines.load(Ordering::Relaxed) > IGNORE_TOTAL_LINES
            || spent.ignore_costly.load(Ordering::Relaxed) > IGNORE_TOTAL_COSTLY;
        if over {
            self.env.control.warn(format!(
                "the ignore files met passed {} MiB, {IGNORE_TOTAL_LINES} lines or wildcard weight \
{IGNORE_TOTAL_COSTLY} in all: further ignore files were not used, so files they would hide may be listed; \
narrow path to search below them",
                IGNORE_TOTAL_BYTES >> 20
            ));
        }
        over
    }

    /// Compiles an ignore file read under the caps (`Err(size)`: over the byte cap),
    /// or says why it is not used (`shown` names it) and uses none of its rules. A file
    /// is used whole or not at all: a file cut at the cap would keep its first rules and
    /// lose the `!` exceptions after them, a behaviour no author wrote.
    fn compile(
        &self,
        root: &Path,
        read: Option<Result<Vec<u8>, u64>>,
        private: bool,
        shown: impl Fn() -> String,
    ) -> Compiled {
        let control = self.env.control;
        // A file the agent may not read (inside `.git`, above the root) is said not to
        // be used in one constant sentence: its size, lines, weight or a rule quoted by
        // a compile error would tell what it holds.
        let warn = |said: String| {
            if private {
                control.warn(format!(
                    "{}: ignore file not used: over the caps an ignore file may have ({} MiB, \
{IGNORE_FILE_MAX_LINES} lines, wildcard weight {IGNORE_FILE_MAX_COSTLY}), or its rules do not compile, \
or the memory for them was not there; its rules do not apply, so files it would hide may be listed",
                    shown(),
                    IGNORE_FILE_MAX >> 20
                ));
            } else {
                control.warn(said);
            }
        };
        let bytes = match read {
            None => return Compiled::none(),
            Some(Err(size)) => {
                warn(format!(
                    "{}: ignore file not used: {size} bytes, over the {} MiB an ignore file may have; \
its rules do not apply, so files it would hide may be listed",
                    shown(),
                    IGNORE_FILE_MAX >> 20
                ));
                return Compiled::none();
            }
            Some(Ok(b)) => b,
        };
        // Bytes read count against the call's total whether or not the file is used:
        // ten thousand refused files would otherwise still be read and scanned.
        let spent = &control.spent;
        let total_bytes = spent
            .ignore_bytes
            .fetch_add(bytes.len() as u64, Ordering::Relaxed)
            + bytes.len() as u64;
        let lines = memchr::memchr_iter(b'\n', &bytes).count() as u64 + 1;
        let costly: u64 = bytes.split(|&b| b == b'\n').map(weight).sum();
        if lines > IGNORE_FILE_MAX_LINES || costly > IGNORE_FILE_MAX_COSTLY {
            warn(format!(
                "{}: ignore file not used: {lines} lines, wildcard weight {costly} (a line and its \
wildcards, a bracket class one more per {} non-ASCII members; a line of over {IGNORE_LINE_MAX_WILDCARDS} \
wildcards or a class of over {} non-ASCII members counts as too many), over the \
{IGNORE_FILE_MAX_LINES} lines or weight {IGNORE_FILE_MAX_COSTLY} an ignore file may have; its rules do not \
apply, so files it would hide may be listed",
                shown(),
                crate::config::classes::MEMBERS_PER_UNIT,
                crate::config::classes::CLASS_MAX_MEMBERS,
            ));
            return Compiled::none();
        }
        let total_lines = spent.ignore_lines.fetch_add(lines, Ordering::Relaxed) + lines;
        let total_costly = spent.ignore_costly.fetch_add(costly, Ordering::Relaxed) + costly;
        if total_bytes > IGNORE_TOTAL_BYTES
            || total_lines > IGNORE_TOTAL_LINES
            || total_costly > IGNORE_TOTAL_COSTLY
        {
            self.ignore_budget_spent();
            return Compiled::none();
        }
        // Compiling is the costly part: not begun once the call is stopped.
        if control.stopped() {
            return Compiled::none();
        }
        // The memory the rules will take comes out of the shared budget first, so
        // concurrent calls over hostile ignore files wait or go without, never pile up.
        let held = match super::cost::hold(compile_weight(lines, costly), &shown(), control) {
            Ok(p) => p,
            Err(e) => {
                warn(format!(
                    "{}: ignore file not used: {}; its rules do not apply, so files it would hide may be listed",
                    shown(),
                    e.message
                ));
                return Compiled::none();
            }
        };
        match rules(root, &bytes) {
            Ok(g) => Compiled(g, Some(held)),
            Err(e) => {
                // The whole file goes (a matcher over its lines could not be built): said,
                // as any other file not used is, never a silent no-op.
                let why = e.to_string();
                let why: String = why.chars().take(200).collect();
                warn(format!(
                    "{}: ignore file not used: its rules do not compile together ({}); its rules do not \
apply, so files it would hide may be listed",
                    shown(),
                    why
                ));
                Compiled::none()
            }
        }
    }
}

/// An ignore file's rules, and the memory they take, held from the shared budget.
struct Compiled(Gitignore, Option<super::cost::Permit<'static>>);

impl Compiled {
    fn none() -> Compiled {
        Compiled(Gitignore::empty(), None)
    }
}

/// What compiling an ignore file holds, estimated: ~3 KB a line (a literal line took
/// 2.4 KB in the attacker's measure: 8 MiB of them, 118 MB) and ~15 KB a unit of
/// wildcard weight (10 000 lines of three wildcards: 210 MB).
fn compile_weight(lines: u64, costly: u64) -> u64 {
    lines.saturating_mul(3 << 10) + costly.saturating_mul(15 << 10)
}

/// Whether an open failed for a path over the system's limit (4 096 bytes on Linux).
pub fn is_too_long(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(rustix::io::Errno::NAMETOOLONG.raw_os_error())
}

/// The warning for a path over the system's limit: what was passed over, named by its
/// first 200 characters.
pub fn too_long(ws: &Workspace, root: usize, rel: &Path) -> String {
    let name = ws.shown_name(&ws.root_path(root).join(rel));
    let cut: String = name.chars().take(200).collect();
    format!(
        "{cut}{}: not searched: its path is longer than the system's limit (4096 bytes); read_file and list_directory still reach it",
        if cut.len() < name.len() { "…" } else { "" }
    )
}

/// No `-g` overrides: what [`IgnoreRules`] judges with.
static NO_OVERRIDES: std::sync::LazyLock<Override> = std::sync::LazyLock::new(Override::empty);

/// The ignore files' rules, as a search walk from one directory applies them, for a
/// walk made elsewhere (`list_directory`): so a listing hides exactly what `grep` and
/// `glob` leave out as ignored. Only the ignore files are judged here: hidden names and
/// the workspace's deny and skip rules are the caller's. The same caps on ignore files
/// hold, with the same warnings.
pub struct IgnoreRules<'a> {
    walker: Walker<'a>,
}

/// The rules in force in one directory of such a walk (its own and those above it).
#[derive(Clone)]
pub struct DirRules(Chain);

impl<'a> IgnoreRules<'a> {
    /// For a walk of root `root` from `base` (relative to the root: the real path, links
    /// resolved, as a search walks it).
    pub fn new(ws: &'a Workspace, env: &'a SearchEnv<'a>, root: usize, base: &'a Path) -> Self {
        IgnoreRules {
            walker: Walker {
                ws,
                env,
                root,
                base,
                hidden: false,
                no_ignore: false,
                types: None,
                dirs: false,
                overrides: &NO_OVERRIDES,
            },
        }
    }

    /// The rules of the directories above the walk's start, and of those between the
    /// root and the start.
    pub fn above(&self) -> DirRules {
        DirRules(self.walker.start_chain())
    }

    /// The rules in directory `rel` (opened as `fd`, beneath the root with no symlink on
    /// the way), whose parent's rules are `parent`: its own ignore files added, read
    /// through the handle, never through a link.
    pub fn enter(&self, fd: BorrowedFd<'_>, rel: &Path, parent: &DirRules) -> DirRules {
        DirRules(self.walker.level(fd, rel, [true; 3], parent.0.clone()))
    }

    /// Whether the ignore files leave out `rel` (relative to the root), as a search
    /// walk judges it.
    pub fn ignored(&self, rules: &DirRules, rel: &Path, is_dir: bool) -> bool {
        self.walker.ignored(&rules.0, rel, is_dir).is_ignore()
    }
}

fn push(chain: Chain, compiled: [Compiled; 3], absolute: bool) -> Chain {
    if compiled.iter().all(|c| c.0.is_empty()) {
        return chain;
    }
    let mut held = Vec::new();
    let rules = compiled.map(|Compiled(g, h)| {
        held.extend(h);
        g
    });
    Some(Arc::new(Level {
        rules,
        _held: held,
        parent: chain,
        absolute,
    }))
}

/// What an ignore-file line weighs against the caps: nothing when it needs no regex of
/// its own ([`costly`]), else one plus its wildcards, and past
/// [`IGNORE_LINE_MAX_WILDCARDS`] more than a whole file may weigh.
fn weight(line: &[u8]) -> u64 {
    if !costly(line) {
        return 0;
    }
    // Each alternative of a brace is one more (`{a,b,…}` with a thousand names compiles
    // to a thousand-way alternation; git itself has no braces).
    let mut depth = 0u32;
    let wild = line
        .iter()
        .filter(|&&b| {
            match b {
                b'{' => depth += 1,
                b'}' => depth = depth.saturating_sub(1),
                _ => {}
            }
            matches!(b, b'*' | b'?' | b'[' | b'{') || (b == b',' && depth > 0)
        })
        .count() as u64;
    // A bracket class weighs what it compiles to: its non-ASCII members (each a UTF-8
    // sequence of its own, ~600 bytes in the matcher), a unit per 16 of them; a class
    // past 256 such members is no rule a person wrote (the attacker's lines of one class
    // of 5 000 CJK code points: 182 MB for one file of 66 lines).
    let classes = crate::config::classes::classes(line);
    if wild > IGNORE_LINE_MAX_WILDCARDS || classes.over() {
        IGNORE_FILE_MAX_COSTLY + 1
    } else {
        1 + wild + classes.weight
    }
}

/// Whether an ignore-file line needs a regex of its own in the matcher: it has a
/// wildcard, and is not one of the shapes globset answers by lookup (`*.ext`, a name, a
/// name with a leading `/`, `**/` or `!`, or a trailing `/`). Comments and blank lines
/// are free. An estimate erring towards "costly" (it only lowers what a hostile file may
/// make the matcher build).
fn costly(line: &[u8]) -> bool {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.is_empty() || line.starts_with(b"#") {
        return false;
    }
    let mut l = line.strip_prefix(b"!").unwrap_or(line);
    l = l.strip_prefix(b"/").unwrap_or(l);
    l = l.strip_prefix(b"**/").unwrap_or(l);
    l = l.strip_suffix(b"/").unwrap_or(l);
    let meta = |b: &u8| matches!(b, b'*' | b'?' | b'[' | b'{' | b'\\');
    match l.strip_prefix(b"*.") {
        // `*.ext`: an extension lookup.
        Some(ext) => ext.iter().any(meta) || ext.contains(&b'/'),
        None => l.iter().any(meta),
    }
}

/// Compiles an ignore file as `GitignoreBuilder::add` does: line by line as
/// `BufRead::lines` splits them (a `\r` dropped only before a `\n`), a BOM dropped from
/// the first, reading stopped at the first line that is not UTF-8, bad lines skipped.
fn rules(root: &Path, bytes: &[u8]) -> Result<Gitignore, ignore::Error> {
    let mut b = GitignoreBuilder::new(root);
    let mut rest = bytes;
    let mut first = true;
    while !rest.is_empty() {
        let line = match memchr::memchr(b'\n', rest) {
            Some(i) => {
                let line = &rest[..i];
                rest = &rest[i + 1..];
                line.strip_suffix(b"\r").unwrap_or(line)
            }
            None => std::mem::take(&mut rest),
        };
        let Ok(line) = std::str::from_utf8(line) else {
            break;
        };
        let line = if first {
            line.trim_start_matches('\u{feff}')
        } else {
            line
        };
        first = false;
        let _ = b.add_line(None, line);
    }
    b.build()
}

#[cfg(test)]
mod tests {
    use super::costly;

    #[test]
    fn costly_lines_are_those_needing_a_regex() {
        for free in [
            "",
            "# *x*",
            "name.log",
            "/build",
            "build/",
            "**/node_modules",
            "*.o",
            "!*.keep",
            "/*.tmp",
            "dir/name",
        ] {
            assert!(!costly(free.as_bytes()), "{free}");
        }
        for dear in [
            "*m1*/**/x1?.log",
            "a*b",
            "[ab].c",
            "*.{a,b}",
            "src/**/*.rs",
            "x?",
        ] {
            assert!(costly(dear.as_bytes()), "{dear}");
        }
    }

    #[test]
    fn each_alternative_of_a_brace_weighs() {
        use super::{IGNORE_FILE_MAX_COSTLY, weight};
        assert_eq!(weight(b"*.{a,b}"), 1 + 3);
        assert_eq!(weight(b"x,y*"), 1 + 1);
        let names: Vec<String> = (0..1000).map(|i| format!("qqq{i}")).collect();
        let line = format!("{{{}}}", names.join(","));
        assert!(weight(line.as_bytes()) > IGNORE_FILE_MAX_COSTLY);
    }

    #[test]
    fn a_class_weighs_its_non_ascii_members() {
        use super::{IGNORE_FILE_MAX_COSTLY, weight};
        let cjk = |n: u32| -> String {
            (0x4e00u32..)
                .step_by(2)
                .take(n as usize)
                .filter_map(char::from_u32)
                .collect()
        };
        // ASCII classes compile to one byte class: a wildcard, as before.
        assert_eq!(weight(b"[abcdefghijklmnopqrstuvwxyz]*"), 1 + 2);
        // 160 CJK members: ten units more than the bare class.
        assert_eq!(weight(format!("[{}]*", cjk(160)).as_bytes()), 1 + 2 + 10);
        // Past the cap, in any spelling: the file is over its weight by that line alone.
        for line in [
            format!("[{}]*", cjk(300)),
            format!("[{}]", cjk(5000)),
            format!("!/a/[!{}]/b", cjk(300)),
            format!("**/[^{}].txt", cjk(300)),
        ] {
            assert!(
                weight(line.as_bytes()) > IGNORE_FILE_MAX_COSTLY,
                "{line:.20}"
            );
        }
    }
}

//! The trigram index: which files contain which trigrams (bytes, ASCII folded to lower
//! case), so a search reads only the files that can hold a match (see [`super::plan`]).
//!
//! Built by the same walk as a scan, every file opened through the sandbox
//! ([`Workspace::open_found`]); posting lists are `roaring` bitmaps of file ids.
//!
//! **Never stale by construction.** A file's entry carries the stamp it had when read
//! (device, inode, size, modification and change times, from `fstat` on the opened
//! file). A search still walks the tree as a scan does and opens each file through the
//! sandbox; it skips reading a file only when that file's stamp is the one indexed and
//! its trigrams rule the query out. A file that is new, changed (any write moves its
//! change time, which no one can set back), replaced or unknown is read, as a scan reads
//! it. So results are identical to a scan's — paths, order, counts, totals — whatever
//! changed since the build; only the time saved shrinks as the tree drifts.
//!
//! Skipping the walk itself is [`super::live`]'s business (a watcher vouches for the
//! list); keeping the lists on disk and mapped is [`super::store`]'s: posting lists read
//! since the last save live in memory beside the mapped ones until the next save merges
//! them (dropping the bits of files no longer listed).
//!
//! [`Workspace::open_found`]: crate::workspace::Workspace::open_found

use super::plan::{self, Query};
use super::quads;
use super::store;
use super::{Base, Found, SearchEnv, WalkOptions};
use crate::error::{ErrorCode, ToolError, ToolResult};
use roaring::RoaringBitmap;
use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// What identifies one version of a file's content, from `fstat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    /// Its link count: past 1, a write can reach the content through a name the watcher
    /// does not watch (a hard link outside the root, or in another directory).
    nlink: u64,
}

/// Words in a stamp as the index file stores it.
pub const STAMP_WORDS: usize = 8;

impl Stamp {
    pub fn of(file: &std::fs::File) -> Option<Stamp> {
        let st = rustix::fs::fstat(file).ok()?;
        Some(Stamp {
            dev: crate::platform::file_id(&st).0,
            ino: st.st_ino as u64,
            size: st.st_size as u64,
            mtime: (st.st_mtime as i64, st.st_mtime_nsec as i64),
            ctime: (st.st_ctime as i64, st.st_ctime_nsec as i64),
            nlink: st.st_nlink as u64,
        })
    }

    /// More than one name reaches the content: a write through another one may come
    /// with no watch event, so the content is proven only by `fstat` at query time.
    pub fn linked(&self) -> bool {
        self.nlink != 1
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    /// The content's identity: device and inode, shared by every hard link to it.
    fn file_id(&self) -> (u64, u64) {
        (self.dev, self.ino)
    }

    /// The stamp as words (for the index file).
    pub fn words(&self) -> [u64; STAMP_WORDS] {
        [
            self.dev,
            self.ino,
            self.size,
            self.mtime.0 as u64,
            self.mtime.1 as u64,
            self.ctime.0 as u64,
            self.ctime.1 as u64,
            self.nlink,
        ]
    }

    pub fn from_words(w: [u64; STAMP_WORDS]) -> Stamp {
        Stamp {
            dev: w[0],
            ino: w[1],
            size: w[2],
            mtime: (w[3] as i64, w[4] as i64),
            ctime: (w[5] as i64, w[6] as i64),
            nlink: w[7],
        }
    }

    /// Changed within [`RACY_NS`] of now (or in the future): not to be trusted yet.
    fn is_recent(&self) -> bool {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i128);
        let ctime = self.ctime.0 as i128 * 1_000_000_000 + self.ctime.1 as i128;
        now - ctime < RACY_NS
    }
}

/// One file a walk of the workspace met, in the index's list.
#[derive(Debug, Clone)]
pub struct Listed {
    pub root: usize,
    pub rel: PathBuf,
    /// Its id in the posting lists, when its content is indexed: None for a file that
    /// could not be read whole (over the size limit, unreadable) — always read.
    id: Option<u32>,
    /// A walk that skips hidden entries finds it too: its name and its directories' are
    /// not hidden, or an ignore file lets them back in (`!.gitignore` after `.*`).
    pub visible: bool,
    /// The content's stamp when indexed. None: not to be trusted (changed within the
    /// last seconds, when a second write could leave the stamp as it was).
    stamp: Option<Stamp>,
}

impl Listed {
    /// A file as the index file recorded it (visibility is for the next walk to say).
    pub fn stored(root: usize, rel: PathBuf, id: u32, stamp: Stamp) -> Listed {
        Listed {
            root,
            rel,
            id: Some(id),
            visible: false,
            stamp: Some(stamp),
        }
    }

    pub fn id(&self) -> Option<u32> {
        self.id
    }

    pub fn stamp(&self) -> Option<Stamp> {
        self.stamp
    }
}

/// The searchable files of the workspace as one walk saw them, sorted in result order
/// (root, then path components), and the directories it entered.
#[derive(Debug, Default)]
pub struct Files {
    pub list: Vec<Listed>,
    /// Directories the walk entered (hidden ones included).
    dirs: Vec<(usize, PathBuf)>,
    /// Of them, those a walk that skips hidden entries enters.
    visible_dirs: Vec<(usize, PathBuf)>,
    /// Regular files in entered directories that the walk left out by an ignore file
    /// (not deny or skip rules): a positive `-g` glob takes them back in, as in rg.
    pub ignored: Vec<Listed>,
    /// Likewise directories the walk did not enter.
    ignored_dirs: Vec<(usize, PathBuf)>,
    bytes: u64,
    /// The paths of `list` and of `ignored`, in one buffer each: a glob or a search
    /// goes through every entry, and each `PathBuf` is an allocation of its own, so
    /// reading them from the list was a cache miss per file (a `**/*.c` glob spent a
    /// third of its time on the first byte of each path). Read in order here, the
    /// prefetcher keeps up.
    list_paths: Paths,
    ignored_paths: Paths,
}

/// Paths laid end to end, in the order of the list they were taken from.
#[derive(Debug, Default)]
pub struct Paths {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Paths {
    fn of(list: &[Listed]) -> Paths {
        use std::os::unix::ffi::OsStrExt;
        let mut out = Paths {
            bytes: Vec::with_capacity(list.iter().map(|l| l.rel.as_os_str().len()).sum()),
            ends: Vec::with_capacity(list.len()),
        };
        for l in list {
            out.bytes.extend_from_slice(l.rel.as_os_str().as_bytes());
            out.ends.push(out.bytes.len());
        }
        out
    }

    /// The path of entry `i` (empty past the end: never asked for by the callers,
    /// which index with ranges of the same list).
    pub fn get(&self, i: usize) -> &Path {
        use std::os::unix::ffi::OsStrExt;
        let start = if i == 0 {
            0
        } else {
            self.ends.get(i - 1).copied().unwrap_or(0)
        };
        let end = self.ends.get(i).copied().unwrap_or(start);
        Path::new(std::ffi::OsStr::from_bytes(
            self.bytes.get(start..end).unwrap_or_default(),
        ))
    }
}

fn dir_key(d: &(usize, PathBuf)) -> (usize, &Path) {
    (d.0, d.1.as_path())
}

fn has(v: &[(usize, PathBuf)], root: usize, rel: &Path) -> bool {
    v.binary_search_by(|d| (d.0, d.1.as_path()).cmp(&(root, rel)))
        .is_ok()
}

/// Where the entries of a sorted list below directory `rel` of `root` are.
fn below_range<T>(
    v: &[T],
    key: impl Fn(&T) -> (usize, &Path),
    root: usize,
    rel: &Path,
) -> std::ops::Range<usize> {
    if rel.as_os_str().is_empty() {
        return v.partition_point(|l| key(l).0 < root)..v.partition_point(|l| key(l).0 <= root);
    }
    let from = v.partition_point(|l| key(l) < (root, rel));
    let n = v[from..]
        .iter()
        .take_while(|l| key(l).0 == root && key(l).1.starts_with(rel))
        .count();
    from..from + n
}

/// The entries of a sorted list below directory `rel` of `root`.
fn below<'a, T>(
    v: &'a [T],
    key: impl Fn(&T) -> (usize, &Path),
    root: usize,
    rel: &Path,
) -> &'a [T] {
    &v[below_range(v, key, root, rel)]
}

fn listed_key(l: &Listed) -> (usize, &Path) {
    (l.root, l.rel.as_path())
}

impl Files {
    pub fn new(
        list: Vec<Listed>,
        dirs: Vec<(usize, PathBuf)>,
        visible_dirs: Vec<(usize, PathBuf)>,
        ignored: Vec<Listed>,
        ignored_dirs: Vec<(usize, PathBuf)>,
        bytes: u64,
    ) -> Files {
        Files {
            list_paths: Paths::of(&list),
            ignored_paths: Paths::of(&ignored),
            list,
            dirs,
            visible_dirs,
            ignored,
            ignored_dirs,
            bytes,
        }
    }

    pub fn find(&self, root: usize, rel: &Path) -> Option<&Listed> {
        self.list
            .binary_search_by(|l| (l.root, l.rel.as_path()).cmp(&(root, rel)))
            .ok()
            .map(|i| &self.list[i])
    }

    /// Whether a walk entered this directory (so the list holds what is below it);
    /// `hidden`: a walk that takes hidden entries.
    pub fn entered(&self, root: usize, rel: &Path, hidden: bool) -> bool {
        has(
            if hidden {
                &self.dirs
            } else {
                &self.visible_dirs
            },
            root,
            rel,
        )
    }

    /// The listed files below directory `rel` of `root`, in order, with the table
    /// their paths are read from and the index of the first there.
    pub fn below(&self, root: usize, rel: &Path) -> (&[Listed], &Paths, usize) {
        let r = below_range(&self.list, listed_key, root, rel);
        (&self.list[r.clone()], &self.list_paths, r.start)
    }

    /// The ignored files below directory `rel` of `root`, likewise.
    pub fn ignored_below(&self, root: usize, rel: &Path) -> (&[Listed], &Paths, usize) {
        let r = below_range(&self.ignored, listed_key, root, rel);
        (&self.ignored[r.clone()], &self.ignored_paths, r.start)
    }

    /// Every directory below `rel` of `root`, entered by the walk or left out by an
    /// ignore file.
    pub fn dirs_below(&self, root: usize, rel: &Path) -> impl Iterator<Item = &Path> {
        below(&self.dirs, dir_key, root, rel)
            .iter()
            .chain(below(&self.ignored_dirs, dir_key, root, rel))
            .map(|d| d.1.as_path())
    }
}

/// `old` (sorted) with the run below each of `spans` (sorted, none inside another)
/// replaced by the entries of `new` (sorted, each below one of them).
fn splice<T: Clone>(
    old: &[T],
    new: Vec<T>,
    spans: &[(usize, &Path)],
    key: impl Fn(&T) -> (usize, &Path) + Copy,
) -> Vec<T> {
    let mut out = Vec::with_capacity(old.len() + new.len());
    let mut new = new.into_iter().peekable();
    let mut at = 0;
    for &(root, rel) in spans {
        let run = below_range(old, key, root, rel);
        let from = run.start.max(at);
        out.extend_from_slice(&old[at..from]);
        while let Some(n) = new.next_if(|n| {
            let (r, p) = key(n);
            r == root && p.starts_with(rel)
        }) {
            out.push(n);
        }
        at = run.end.max(at);
    }
    out.extend_from_slice(&old[at..]);
    // Entries outside every span cannot come from a subtree walk; kept all the same.
    out.extend(new);
    out
}

/// Reads the entered directories again for what the walk left out by ignore files.
fn left_out(
    env: &SearchEnv,
    list: &[Listed],
    dirs: &[(usize, PathBuf)],
) -> (Vec<Listed>, Vec<(usize, PathBuf)>) {
    use std::os::unix::ffi::OsStrExt;
    let ws = env.workspace;
    let (mut files, mut subdirs) = (Vec::new(), Vec::new());
    for (root, d) in dirs {
        let at = if d.as_os_str().is_empty() {
            Path::new(".")
        } else {
            d.as_path()
        };
        let Ok(fd) = ws.open_found(*root, at, false) else {
            continue;
        };
        let Ok(mut entries) = rustix::fs::Dir::read_from(&fd) else {
            continue;
        };
        while let Some(Ok(e)) = entries.next() {
            let name = e.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let name = std::ffi::OsStr::from_bytes(name);
            let kind = match e.file_type() {
                rustix::fs::FileType::Unknown => {
                    match rustix::fs::statat(&fd, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW) {
                        Ok(st) => rustix::fs::FileType::from_raw_mode(st.st_mode),
                        Err(_) => continue,
                    }
                }
                k => k,
            };
            let rel = d.join(name);
            match kind {
                rustix::fs::FileType::RegularFile => {
                    let listed = list
                        .binary_search_by(|l| {
                            (l.root, l.rel.as_path()).cmp(&(*root, rel.as_path()))
                        })
                        .is_ok();
                    if !listed && !ws.walk_excludes(&rel, false) {
                        files.push(Listed {
                            root: *root,
                            rel,
                            visible: false,
                            id: None,
                            stamp: None,
                        });
                    }
                }
                rustix::fs::FileType::Directory
                    if !has(dirs, *root, &rel) && !ws.walk_excludes(&rel, true) =>
                {
                    subdirs.push((*root, rel));
                }
                _ => {}
            }
        }
    }
    files.sort_by(|a, b| (a.root, &a.rel).cmp(&(b.root, &b.rel)));
    subdirs.sort();
    (files, subdirs)
}

/// The index of a workspace's searchable files: the list of files and, per trigram,
/// the ids of the files holding it. Ids are never reused, so a refresh that re-reads
/// changed files leaves the other files' ids and postings as they are.
pub struct Index {
    files: Mutex<Arc<Files>>,
    /// The posting lists as last written to disk, mapped (none before the first save).
    stored: RwLock<Option<Arc<store::Mapped>>>,
    /// Posting lists of the files read since, in memory until the next save.
    postings: RwLock<HashMap<u32, RoaringBitmap>>,
    /// The 4-gram filters of the large files read since ([`super::quads`]).
    filters: RwLock<HashMap<u32, Box<[u8]>>>,
    next_id: AtomicU32,
    /// Ids no longer listed (their files changed or went): bits left in the postings
    /// until the next save drops them.
    orphans: AtomicU64,
    /// Files the last refresh read.
    last_read: AtomicU64,
    /// Files refreshes read since the index was last saved (or loaded).
    read_since_save: AtomicU64,
    /// (trigram, file) pairs in `postings`: what they take in memory until the next save.
    unsaved_pairs: AtomicU64,
    bounds: Bounds,
}

/// A file with more distinct trigrams than this, and more than one for every two of its
/// bytes, is not indexed but read by every search: text that dense (random, compressed,
/// encoded) would be a candidate for nearly every query anyway, and its postings are what
/// a hostile tree would use to make the index take gigabytes (20 000 files of 20 KB of
/// random text: 380 M pairs, 1.3 GB). Source code has one distinct trigram for every
/// five to ten bytes.
const DENSE_FLOOR: usize = 4096;

/// The most (trigram, file) pairs held in memory between saves (~2 bytes each in the
/// posting lists): past it, further files are not indexed but read by every search, until
/// a save maps the lists to disk. The Linux tree's whole build holds well under it.
const UNSAVED_PAIRS_MAX: u64 = 1 << 27;

/// [`UNSAVED_PAIRS_MAX`], or for tests a smaller one from `FERRET_TEST_INDEX_PAIRS`
/// (the environment of the person running ferret, never the workspace's), so a test can
/// meet the cap on a small tree.
fn unsaved_pairs_max() -> u64 {
    static MAX: std::sync::LazyLock<u64> = std::sync::LazyLock::new(|| {
        std::env::var("FERRET_TEST_INDEX_PAIRS")
            .ok()
            .and_then(|v| v.parse().ok())
            .map_or(UNSAVED_PAIRS_MAX, |v: u64| v.clamp(1, UNSAVED_PAIRS_MAX))
    });
    *MAX
}

/// The most bytes of paths (files and directories) the index lists. Its list holds each
/// path a few times over while it is built and once while it serves (a hostile tree of
/// 120 000 files under 3.8 KB paths: `ferret index` took 1.8 GB, a server kept 1.08 GB);
/// past it the index is not used and searches scan, whose memory the paths do not grow.
/// The Linux tree's paths are 3.5 MB; a million files of 60-byte paths fit.
pub const PATH_BYTES_MAX: u64 = 64 << 20;

/// [`PATH_BYTES_MAX`], or for tests a smaller one from `FERRET_TEST_INDEX_PATH_BYTES`
/// (the environment of the person running ferret, never the workspace's).
pub(crate) fn path_bytes_max() -> u64 {
    static MAX: std::sync::LazyLock<u64> = std::sync::LazyLock::new(|| {
        std::env::var("FERRET_TEST_INDEX_PATH_BYTES")
            .ok()
            .and_then(|v| v.parse().ok())
            .map_or(PATH_BYTES_MAX, |v: u64| v.clamp(1, PATH_BYTES_MAX))
    });
    *MAX
}

/// Whether a file's trigrams (`distinct` of them over `bytes`) are too dense to index.
fn too_dense(distinct: usize, bytes: u64) -> bool {
    distinct > DENSE_FLOOR && distinct as u64 > bytes / 2
}

/// How much the index may take on (0: no bound): past either, a refresh stops and the
/// index is not used (searches scan). Memory and disk follow from them (see the README).
#[derive(Debug, Clone, Copy, Default)]
pub struct Bounds {
    /// Files listed.
    pub files: u64,
    /// Bytes of content read into the index.
    pub bytes: u64,
}

/// Which indexed files may hold a match.
pub enum Candidates {
    /// The query rules nothing out: read every file.
    All,
    Some(RoaringBitmap),
}

impl Candidates {
    /// Whether a listed file may match, decided from its list entry alone (no `fstat`):
    /// true for a file with more than one link, whose content can change with no watch
    /// event (a write through a hard link outside the root) — it is opened and its
    /// stamp compared ([`rules_out`]).
    pub fn may_match(&self, l: &Listed) -> bool {
        l.stamp.is_none_or(|s| s.linked()) || self.admits(l)
    }

    /// Whether a listed file's content, unchanged since it was indexed, may match.
    fn admits(&self, l: &Listed) -> bool {
        match (self, l.id, l.stamp) {
            (Candidates::Some(set), Some(id), Some(_)) => set.contains(id),
            _ => true,
        }
    }
}

/// What a build saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Files listed.
    pub files: u64,
    /// Of them, files whose content is indexed.
    pub indexed: u64,
    /// Bytes of indexed content.
    pub bytes: u64,
    pub trigrams: u64,
    /// Files the last refresh read (new or changed since indexed; the rest kept their
    /// entries by stamp).
    pub read: u64,
}

fn key(t: plan::Trigram) -> u32 {
    (t[0] as u32) << 16 | (t[1] as u32) << 8 | t[2] as u32
}

/// One file's distinct trigrams, found with a 2^24-bit table reused across files.
struct Grams {
    seen: Vec<u64>,
    list: Vec<u32>,
}

impl Grams {
    fn new() -> Self {
        Grams {
            seen: vec![0; (1 << 24) / 64],
            list: Vec::new(),
        }
    }

    /// Adds the trigrams of `buf`, whose first two bytes continue `carry`.
    fn add(&mut self, buf: &[u8]) {
        for w in buf.windows(3) {
            let k = key([plan::fold(w[0]), plan::fold(w[1]), plan::fold(w[2])]);
            let (slot, bit) = ((k / 64) as usize, 1u64 << (k % 64));
            if self.seen[slot] & bit == 0 {
                self.seen[slot] |= bit;
                self.list.push(k);
            }
        }
    }

    /// The distinct trigrams added since the last take; the table is cleared.
    fn take(&mut self) -> Vec<u32> {
        for &k in &self.list {
            self.seen[(k / 64) as usize] = 0;
        }
        let mut out = std::mem::take(&mut self.list);
        out.sort_unstable();
        out
    }
}

/// What reading a file for the index gave: its trigrams, its length, and for a large
/// file its 4-gram filter.
type Indexed = (Vec<u32>, u64, Option<Box<[u8]>>);

/// Reads a file whole (up to `limit` bytes; 0: no limit) into its trigrams, and into a
/// 4-gram filter when its stamp says it is large; None when it is larger than the limit
/// (the scan skips it too) or unreadable.
///
/// A file that is not UTF-8 is indexed as a search reads it ([`super::text_encoding`]):
/// its decoded text (UTF-16 with a BOM, a detected legacy encoding), or its bytes when
/// it decodes in none. So a query's trigrams, which are UTF-8, never rule out a match
/// a search would find in the decoded text.
fn file_grams(
    file: &mut std::fs::File,
    size: u64,
    limit: u64,
    grams: &mut Grams,
) -> Option<Indexed> {
    use std::io::{Seek, SeekFrom};
    match read_grams(crate::text::Utf8Check::new(&mut *file), size, limit, grams) {
        Ok(found) => return found,
        Err(e) if !crate::text::is_not_utf8(&e) => return None,
        Err(_) => {}
    }
    if let Some((enc, skip)) = super::text_encoding(file)
        && (limit == 0 || size <= limit)
        && file.seek(SeekFrom::Start(skip)).is_ok()
    {
        match read_grams(
            crate::text::DecodeReader::new(&mut *file, enc),
            size,
            0,
            grams,
        ) {
            Ok(found) => return found,
            Err(e) if !crate::text::is_not_utf8(&e) => return None,
            Err(_) => {}
        }
    }
    file.seek(SeekFrom::Start(0)).ok()?;
    read_grams(&mut *file, size, limit, grams).ok().flatten()
}

/// [`file_grams`] over one reading of the file; an error the reader gave (the table
/// cleared).
fn read_grams(
    mut file: impl Read,
    size: u64,
    limit: u64,
    grams: &mut Grams,
) -> std::io::Result<Option<Indexed>> {
    let mut buf = vec![0u8; 256 * 1024];
    let mut quads = (size >= quads::MIN_LEN).then(|| quads::Builder::new(size));
    // Two bytes carried over so trigrams across reads are seen.
    let mut keep = 0usize;
    let mut total = 0u64;
    loop {
        let n = match file.read(&mut buf[keep..]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                grams.take();
                return Err(e);
            }
        };
        total += n as u64;
        if limit > 0 && total > limit {
            grams.take();
            return Ok(None);
        }
        let end = keep + n;
        grams.add(&buf[..end]);
        if let Some(q) = quads.as_mut() {
            q.add(&buf[keep..end]);
        }
        keep = end.min(2);
        let tail = end - keep;
        buf.copy_within(tail..end, 0);
    }
    Ok(Some((
        grams.take(),
        total,
        quads.map(quads::Builder::finish),
    )))
}

/// Contents changed this recently (by their change time) are indexed but not trusted:
/// file timestamps come from a coarse clock (one tick is 1–10 ms), so a second write
/// within the tick could leave the stamp unchanged (git's "racy" entries). Such a file
/// is read by every search until a later refresh finds it older.
const RACY_NS: i128 = 100_000_000;

/// A whole build says how far it got every this many files (on stderr, at info).
const PROGRESS_EVERY: u64 = 20_000;

/// The most candidates whose 4-gram filters a query checks.
const FILTER_CHECKS: u64 = 4096;

/// Trigram occurrences a walker thread gathers before adding them to the postings.
const BATCH: usize = 1 << 21;

/// What the walker threads of a refresh found: files, and directories entered.
type Gathered = (Vec<Listed>, Vec<(usize, PathBuf)>);

/// A walker thread's share of a refresh; what it holds goes into the index when the
/// thread ends (the walker drops its visitor).
struct Batch<'a> {
    index: &'a Index,
    pairs: Vec<(u32, u32)>,
    filters: Vec<(u32, Box<[u8]>)>,
    listed: Vec<Listed>,
    dirs: Vec<(usize, PathBuf)>,
    out: &'a Mutex<Gathered>,
}

impl Batch<'_> {
    fn flush(&mut self) {
        if self.pairs.is_empty() {
            return;
        }
        self.pairs.sort_unstable();
        let mut postings = write(&self.index.postings);
        for run in self.pairs.chunk_by(|a, b| a.0 == b.0) {
            postings
                .entry(run[0].0)
                .or_default()
                .extend(run.iter().map(|p| p.1));
        }
        self.pairs.clear();
        drop(postings);
        write(&self.index.filters).extend(self.filters.drain(..));
    }
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        self.flush();
        let mut out = crate::error::lock(self.out);
        out.0.append(&mut self.listed);
        out.1.append(&mut self.dirs);
    }
}

impl Index {
    /// An index with nothing in it (every search reads every file).
    pub fn empty() -> Index {
        Index::bounded(Bounds::default())
    }

    /// An empty index that refuses to grow past `bounds`.
    pub fn bounded(bounds: Bounds) -> Index {
        Index {
            files: Mutex::new(Arc::new(Files::default())),
            stored: RwLock::new(None),
            postings: RwLock::new(HashMap::new()),
            filters: RwLock::new(HashMap::new()),
            next_id: AtomicU32::new(0),
            orphans: AtomicU64::new(0),
            last_read: AtomicU64::new(0),
            read_since_save: AtomicU64::new(0),
            unsaved_pairs: AtomicU64::new(0),
            bounds,
        }
    }

    /// The index a stored file holds: its files with their stamps and ids, its posting
    /// lists mapped. Nothing is trusted to be on the tree until a refresh walks it (a
    /// search until then reads every file whose stamp is not the one stored).
    pub fn from_stored(m: store::Mapped, bounds: Bounds) -> Option<Index> {
        let mut list = m.files()?;
        list.sort_by(|a, b| (a.root, &a.rel).cmp(&(b.root, &b.rel)));
        let index = Index::bounded(bounds);
        index.next_id.store(m.next_id, Ordering::Relaxed);
        *crate::error::lock(&index.files) = Arc::new(Files::new(
            list,
            Vec::new(),
            Vec::new(),
            Vec::new(),
            Vec::new(),
            0,
        ));
        *write(&index.stored) = Some(Arc::new(m));
        Some(index)
    }

    /// Writes the index to `path` — the stored lists and those in memory merged, bits of
    /// files no longer listed dropped — then maps what was written and lets the memory
    /// go. The caller keeps refreshes out meanwhile (a list added during the write
    /// would be lost); searches may run.
    pub fn save(&self, path: &Path, fingerprint: &store::Fingerprint) -> std::io::Result<u64> {
        let files = self.files();
        let live: RoaringBitmap = files
            .list
            .iter()
            .filter_map(|l| l.stamp.and(l.id))
            .collect();
        let stored = read(&self.stored).clone();
        let written = {
            let postings = read(&self.postings);
            let mut mem: Vec<u32> = postings.keys().copied().collect();
            mem.sort_unstable();
            let on_disk = stored.as_ref().map_or(0, |m| m.len());
            let (mut i, mut j) = (0, 0);
            let mut let_go = 0;
            let lists = std::iter::from_fn(|| {
                loop {
                    // The stored lists already merged leave this process's memory as
                    // the merge goes: its peak does not grow with the stored index.
                    if let Some(m) = stored.as_ref() {
                        let_go = m.let_go_posts(let_go, i);
                    }
                    let a =
                        (i < on_disk).then(|| stored.as_ref().map_or(u32::MAX, |m| m.key_at(i)));
                    let b = mem.get(j).copied();
                    let key = match (a, b) {
                        (None, None) => return None,
                        (Some(a), Some(b)) => a.min(b),
                        (Some(a), None) => a,
                        (None, Some(b)) => b,
                    };
                    let mut list = RoaringBitmap::new();
                    if a == Some(key) {
                        i += 1;
                        match stored.as_ref().map(|m| m.get(key)) {
                            Some(Ok(Some(l))) => list = l,
                            Some(Err(store::Undecodable)) => {
                                return Some(Err(std::io::Error::other(
                                    "a stored posting list does not decode",
                                )));
                            }
                            _ => {}
                        }
                    }
                    if b == Some(key) {
                        j += 1;
                        if let Some(l) = postings.get(&key) {
                            list |= l;
                        }
                    }
                    list &= &live;
                    if !list.is_empty() {
                        return Some(Ok((key, list)));
                    }
                }
            });
            let listed: Vec<&Listed> = files.list.iter().collect();
            let in_memory = read(&self.filters);
            let mut filters: Vec<(u32, &[u8])> = live
                .iter()
                .filter_map(|id| {
                    let f = in_memory
                        .get(&id)
                        .map(|f| &f[..])
                        .or_else(|| stored.as_ref().and_then(|m| m.filter(id)))?;
                    Some((id, f))
                })
                .collect();
            filters.sort_unstable_by_key(|f| f.0);
            store::write(
                path,
                fingerprint,
                self.next_id.load(Ordering::Relaxed),
                &listed,
                lists,
                &filters,
                &|| {
                    if let Some(m) = stored.as_ref() {
                        m.let_go_filters();
                    }
                },
            )?
        };
        let mapped = store::Mapped::open(path, fingerprint)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        // The stored lists first, then the memory cleared: a query in between sees
        // both, never neither.
        *write(&self.stored) = Some(Arc::new(mapped));
        *write(&self.postings) = HashMap::new();
        *write(&self.filters) = HashMap::new();
        self.unsaved_pairs.store(0, Ordering::Relaxed);
        self.orphans.store(0, Ordering::Relaxed);
        self.read_since_save.store(0, Ordering::Relaxed);
        give_back_memory();
        Ok(written)
    }

    /// Whether the index holds what its file does not (files read since, files gone),
    /// or has no file.
    pub fn unsaved(&self) -> bool {
        let stored = read(&self.stored).is_some();
        !stored || self.orphans() > 0 || !read(&self.postings).is_empty()
    }

    /// Files read, and ids gone, since the last save: what a save would fold in.
    pub fn unsaved_files(&self) -> u64 {
        self.read_since_save.load(Ordering::Relaxed) + self.orphans()
    }

    /// Bytes of the stored index file, when there is one.
    pub fn stored_bytes(&self) -> Option<u64> {
        read(&self.stored).as_ref().map(|m| m.bytes())
    }

    /// Builds the index of every file a search could read under `bases` (hidden files
    /// included; ignore files, deny and skip rules and the size limit as a scan has them).
    pub fn build(env: &SearchEnv, bases: &[Base]) -> ToolResult<(Index, Stats)> {
        let index = Index::empty();
        let stats = index.refresh(env, bases, false, &|_, _| {})?;
        Ok((index, stats))
    }

    /// Walks `bases` again and makes the list what the walk found: a file whose stamp
    /// is the one indexed keeps its entry; a new or changed file is read again (through
    /// the sandbox). `entered` is told every directory the walk enters (to watch it).
    ///
    /// `partial`: `bases` are directories whose subtrees changed (the rest of the list
    /// stands); else they are the roots and the list is rebuilt whole.
    pub fn refresh(
        &self,
        env: &SearchEnv,
        bases: &[Base],
        partial: bool,
        entered: &(dyn Fn(usize, &Path) + Sync),
    ) -> ToolResult<Stats> {
        let ws = env.workspace;
        let old = self.files();
        let opts = WalkOptions {
            include_hidden: true,
            globs: Vec::new(),
            dirs: true,
            no_ignore: false,
            types: Vec::new(),
        };
        let out = Mutex::new((Vec::new(), Vec::new()));
        let reused = AtomicU64::new(0);
        // Files and bytes against the bounds: a partial refresh counts what the rest of
        // the list holds too (its subtrees twice: a bound is met early, never late).
        let (listed_n, read_n) = if partial {
            (old.list.len() as u64, old.bytes)
        } else {
            (0, 0)
        };
        let (listed_n, read_n) = (AtomicU64::new(listed_n), AtomicU64::new(read_n));
        let path_bytes = |p: &Path| p.as_os_str().len() as u64;
        let paths_n = AtomicU64::new(if partial {
            old.list.iter().map(|l| path_bytes(&l.rel)).sum::<u64>()
                + old.dirs.iter().map(|d| path_bytes(&d.1)).sum::<u64>()
        } else {
            0
        });
        let over = AtomicBool::new(false);
        let read_files = AtomicU64::new(0);
        // The contents this walk found behind more than one name and read anew.
        let new_links: Mutex<HashSet<(u64, u64)>> = Mutex::new(HashSet::new());
        let bounds = self.bounds;
        let past = |n: &AtomicU64, add: u64, bound: u64| {
            let now = n.fetch_add(add, Ordering::Relaxed) + add;
            bound > 0 && now > bound
        };
        for b in bases {
            entered(b.wp.root_index(), b.wp.rel());
        }
        super::walk(env, bases, &opts, || {
            let mut grams = Grams::new();
            let mut batch = Batch {
                index: self,
                pairs: Vec::new(),
                filters: Vec::new(),
                listed: Vec::new(),
                dirs: Vec::new(),
                out: &out,
            };
            let (old, reused) = (&old, &reused);
            let (listed_n, read_n, over, past) = (&listed_n, &read_n, &over, &past);
            let paths_n = &paths_n;
            let read_files = &read_files;
            let new_links = &new_links;
            move |f: &Found| {
                if past(paths_n, path_bytes(f.rel), path_bytes_max()) {
                    over.store(true, Ordering::Relaxed);
                    return false;
                }
                if f.is_dir {
                    entered(f.root, f.rel);
                    batch.dirs.push((f.root, f.rel.to_path_buf()));
                    return true;
                }
                let mut listed = Listed {
                    root: f.root,
                    rel: f.rel.to_path_buf(),
                    visible: false,
                    id: None,
                    stamp: None,
                };
                // A file that will not open is listed all the same: a search tries it,
                // as a scan does.
                if let Ok(mut file) = ws.open_found(f.root, f.rel, false)
                    && let Some(stamp) = Stamp::of(&file)
                {
                    let trusted = !stamp.is_recent();
                    match old.find(f.root, f.rel) {
                        Some(o) if trusted && o.stamp == Some(stamp) && o.id.is_some() => {
                            reused.fetch_add(1, Ordering::Relaxed);
                            listed.id = o.id;
                            listed.stamp = o.stamp;
                        }
                        _ => {
                            if stamp.linked() {
                                crate::error::lock(new_links).insert(stamp.file_id());
                            }
                            if let Some((list, read, filter)) =
                                file_grams(&mut file, stamp.size(), env.max_file_size, &mut grams)
                            {
                                read_files.fetch_add(1, Ordering::Relaxed);
                                if past(read_n, read, bounds.bytes) {
                                    over.store(true, Ordering::Relaxed);
                                    return false;
                                }
                                // Too dense, or the memory for postings spent: listed
                                // without an id, so every search reads it (never a
                                // wrong answer, only a slower one).
                                let pairs = list.len() as u64;
                                let unindexed = too_dense(list.len(), read)
                                    || self.unsaved_pairs.fetch_add(pairs, Ordering::Relaxed)
                                        + pairs
                                        > unsaved_pairs_max();
                                if !unindexed {
                                    let id = self.next_id.fetch_add(1, Ordering::Relaxed);
                                    batch.pairs.extend(list.into_iter().map(|k| (k, id)));
                                    if let Some(f) = filter {
                                        batch.filters.push((id, f));
                                    }
                                    listed.id = Some(id);
                                    listed.stamp = trusted.then_some(stamp);
                                    if batch.pairs.len() >= BATCH {
                                        batch.flush();
                                    }
                                }
                            }
                        }
                    }
                }
                batch.listed.push(listed);
                if past(listed_n, 1, bounds.files) {
                    over.store(true, Ordering::Relaxed);
                    return false;
                }
                let n = listed_n.load(Ordering::Relaxed);
                if !partial && n.is_multiple_of(PROGRESS_EVERY) {
                    tracing::info!(
                        "index: {n} files listed, {} MB read",
                        read_n.load(Ordering::Relaxed) / 1_000_000
                    );
                }
                !env.control.cancel.is_cancelled()
            }
        })?;
        if over.into_inner() {
            return Err(ToolError::new(
                ErrorCode::FileTooLarge,
                format!(
                    "the workspace is larger than the index may grow (index_max_files {}, \
                     index_max_bytes {}, or {} MiB of paths)",
                    bounds.files,
                    bounds.bytes,
                    path_bytes_max() >> 20
                ),
            )
            .with_hint(
                "searches scan instead; to index it, narrow the roots, or raise index_max_files or \
                 index_max_bytes in your own config (~/.config/ferret/config.toml, or --set; a \
                 workspace ferret.toml may only lower them; the bound on paths is fixed)",
            ));
        }
        let (mut list, mut dirs) = out
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        list.sort_by(|a, b| (a.root, &a.rel).cmp(&(b.root, &b.rel)));
        // Which of them a walk that skips hidden entries takes: ignore files can let a
        // hidden name back in (`!.gitignore` after `.*`), so only such a walk can say.
        let seen: Mutex<Gathered> = Mutex::new((Vec::new(), Vec::new()));
        let plain = WalkOptions {
            dirs: true,
            ..WalkOptions::default()
        };
        super::walk(env, bases, &plain, || {
            let seen = &seen;
            move |f: &Found| {
                let mut seen = crate::error::lock(seen);
                if f.is_dir {
                    seen.1.push((f.root, f.rel.to_path_buf()));
                } else {
                    seen.0.push(Listed {
                        root: f.root,
                        rel: f.rel.to_path_buf(),
                        visible: true,
                        id: None,
                        stamp: None,
                    });
                }
                true
            }
        })?;
        let (seen, mut visible_dirs) = seen
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut seen: Vec<(usize, PathBuf)> = seen.into_iter().map(|l| (l.root, l.rel)).collect();
        seen.sort();
        // A subtree walked from its top takes hidden names the way a walk from the root
        // does only if that top is itself one such a walk enters.
        let tops: Vec<(usize, PathBuf, bool)> = bases
            .iter()
            .map(|b| {
                let (root, rel) = (b.wp.root_index(), b.wp.rel().to_path_buf());
                let visible = !partial || old.entered(root, &rel, false);
                (root, rel, visible)
            })
            .collect();
        let top_visible = |root: usize, rel: &Path| {
            tops.iter()
                .any(|t| t.2 && t.0 == root && rel.starts_with(&t.1))
        };
        let mut it = seen.iter().peekable();
        for l in &mut list {
            while it
                .next_if(|s| (s.0, s.1.as_path()) < (l.root, l.rel.as_path()))
                .is_some()
            {}
            l.visible = it.peek().is_some_and(|s| s.0 == l.root && s.1 == l.rel)
                && top_visible(l.root, &l.rel);
        }
        visible_dirs.retain(|d| top_visible(d.0, &d.1));
        for t in &tops {
            dirs.push((t.0, t.1.clone()));
            if t.2 {
                visible_dirs.push((t.0, t.1.clone()));
            }
        }
        dirs.sort();
        dirs.dedup();
        visible_dirs.sort();
        visible_dirs.dedup();
        let (mut ignored, mut ignored_dirs) = left_out(env, &list, &dirs);
        let mut was = old.list.iter().filter(|l| l.id.is_some()).count() as u64;
        if partial {
            // What the subtrees held before gives way to what they hold now: each
            // subtree is one run of every sorted vector, replaced in place.
            let mut spans: Vec<(usize, &Path)> =
                tops.iter().map(|t| (t.0, t.1.as_path())).collect();
            spans.sort();
            was = spans
                .iter()
                .map(|&(root, rel)| {
                    old.below(root, rel)
                        .0
                        .iter()
                        .filter(|l| l.id.is_some())
                        .count() as u64
                })
                .sum();
            list = splice(&old.list, list, &spans, listed_key);
            ignored = splice(&old.ignored, ignored, &spans, listed_key);
            dirs = splice(&old.dirs, dirs, &spans, dir_key);
            visible_dirs = splice(&old.visible_dirs, visible_dirs, &spans, dir_key);
            ignored_dirs = splice(&old.ignored_dirs, ignored_dirs, &spans, dir_key);
        }
        // A link made inside the root in another directory: Linux reports the new
        // name's directory, never the old name's, so the old name is still listed with
        // its one link and would be skipped on the index's word after a write through
        // the new one. Any listed name of a content this walk found linked anew loses
        // its stamp: not trusted, it is read by every search until a walk stamps it.
        let new_links = new_links
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !new_links.is_empty() {
            for l in &mut list {
                if l.stamp
                    .is_some_and(|s| !s.linked() && new_links.contains(&s.file_id()))
                {
                    l.stamp = None;
                }
            }
        }
        let bytes = list
            .iter()
            .filter(|l| l.id.is_some())
            .filter_map(|l| l.stamp.map(|s| s.size))
            .sum();
        self.orphans
            .fetch_add(was.saturating_sub(reused.into_inner()), Ordering::Relaxed);
        let read_files = read_files.into_inner();
        self.last_read.store(read_files, Ordering::Relaxed);
        self.read_since_save
            .fetch_add(read_files, Ordering::Relaxed);
        *crate::error::lock(&self.files) = Arc::new(Files::new(
            list,
            dirs,
            visible_dirs,
            ignored,
            ignored_dirs,
            bytes,
        ));
        Ok(self.stats())
    }

    /// The list as the last refresh left it.
    pub fn files(&self) -> Arc<Files> {
        crate::error::lock(&self.files).clone()
    }

    pub fn stats(&self) -> Stats {
        let files = self.files();
        Stats {
            files: files.list.len() as u64,
            indexed: files.list.iter().filter(|l| l.id.is_some()).count() as u64,
            read: self.last_read.load(Ordering::Relaxed),
            bytes: files.bytes,
            trigrams: {
                let stored = read(&self.stored);
                let postings = read(&self.postings);
                let on_disk = stored.as_ref().map_or(0, |m| m.len());
                let new = postings
                    .keys()
                    .filter(|k| !stored.as_ref().is_some_and(|m| m.contains(**k)))
                    .count();
                (on_disk + new) as u64
            },
        }
    }

    /// Ids whose files changed or went since the first build.
    pub fn orphans(&self) -> u64 {
        self.orphans.load(Ordering::Relaxed)
    }

    /// The files a query lets through.
    pub fn candidates(&self, q: &Query) -> Candidates {
        let stored = read(&self.stored);
        let postings = read(&self.postings);
        // A key's files: those stored and those read since. A stored list that does
        // not decode says nothing: every file is a candidate.
        let get = |key: u32| -> Option<RoaringBitmap> {
            let mut list = match stored.as_ref().map(|m| m.get(key)) {
                Some(Err(store::Undecodable)) => return None,
                Some(Ok(Some(l))) => l,
                _ => RoaringBitmap::new(),
            };
            if let Some(l) = postings.get(&key) {
                list |= l;
            }
            Some(list)
        };
        match eval(&get, q) {
            None => Candidates::All,
            Some(mut b) => {
                // The 4-gram conditions, on the candidates' filters: a few hundred
                // lookups that save reading the large files whose trigrams only
                // happen to be there. Past a bound the lookups would cost more than
                // they save (a common word's candidates are mostly real matches).
                if q.has_4grams() && b.len() <= FILTER_CHECKS {
                    let filters = read(&self.filters);
                    let out: Vec<u32> = b
                        .iter()
                        .filter(|id| {
                            let f = filters
                                .get(id)
                                .map(|f| &f[..])
                                .or_else(|| stored.as_ref().and_then(|m| m.filter(*id)));
                            f.is_some_and(|f| !q.admits_filter(f))
                        })
                        .collect();
                    for id in out {
                        b.remove(id);
                    }
                }
                Candidates::Some(b)
            }
        }
    }
}

/// None: everything.
fn eval(get: &dyn Fn(u32) -> Option<RoaringBitmap>, q: &Query) -> Option<RoaringBitmap> {
    match q {
        Query::All => None,
        Query::Has(t) => get(key(*t)),
        // Answered by the filters, afterwards.
        Query::Has4(_) => None,
        Query::And(qs) => {
            let mut acc: Option<RoaringBitmap> = None;
            for q in qs {
                if let Some(b) = eval(get, q) {
                    acc = Some(match acc {
                        None => b,
                        Some(a) => a & b,
                    });
                    if acc.as_ref().is_some_and(RoaringBitmap::is_empty) {
                        break;
                    }
                }
            }
            acc
        }
        Query::Or(qs) => {
            let mut acc = RoaringBitmap::new();
            for q in qs {
                acc |= eval(get, q)?;
            }
            Some(acc)
        }
    }
}

/// A lock's guard, whether or not a thread panicked holding it (the lists stay whole:
/// every writer only adds to them, or swaps them whole).
fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Returns freed memory to the system: a build leaves hundreds of megabytes in the
/// allocator's free lists of its walker threads once its lists are written and mapped.
pub fn give_back_memory() {
    crate::platform::release_memory();
}

/// Sets the allocator up for a long-lived server. Under 100 sessions the server's
/// resident size drifted up for the whole minute while its live heap stayed under
/// 30 MB (heaptrack); two causes, two settings:
/// - glibc raises its mmap threshold each time a large block is freed, so later large
///   blocks (results, journal copies) came from the arenas and left holes there. A fixed
///   threshold keeps blocks of 256 KiB and more in their own mappings, given back on free.
/// - glibc gives threads up to 8 arenas per core, and each arena keeps its own
///   high-water mark: as the 32 blocking threads met new peaks of concurrency, one arena
///   after another grew. One arena keeps one mark. Measured side by side (bench/load.sh,
///   2 cores): the default's RSS rose 37 → 53 MB from 10 s to the end, one arena's
///   33 → 39 MB and flat from 15 s, with as many calls answered; an index build took
///   the same time either way (7.1 s). Calls here wait on the disk far more than on
///   `malloc`'s lock.
///
/// glibc's own `MALLOC_ARENA_MAX`, when set, is left to rule: a machine with many cores
/// may want more arenas, and bench/load.sh sets it to run glibc's default beside ours.
pub fn steady_allocator() {
    crate::platform::steady_allocator();
}

/// True when the opened file is the listed one with the very content indexed, and the
/// query rules it out: reading it cannot find a match.
pub fn rules_out(files: &Files, c: &Candidates, found: &Found, file: &std::fs::File) -> bool {
    // Nothing to rule out, or decided from the list entry before the file was opened:
    // no lookup (a search over every file, `\w+`, made 78 000 binary searches of the
    // list for nothing).
    // A listed file with more than one link was let through unopened-undecided
    // ([`Candidates::may_match`]): its stamp, from this open, decides.
    if matches!(c, Candidates::All) {
        return false;
    }
    let l = match found.listed {
        Some(l) if l.stamp.is_some_and(|s| s.linked()) => l,
        Some(_) => return false,
        None => match files.find(found.root, found.rel) {
            Some(l) => l,
            None => return false,
        },
    };
    !c.admits(l) && Stamp::of(file) == l.stamp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(v: &[(usize, PathBuf)]) -> Vec<String> {
        v.iter()
            .map(|(r, p)| format!("{r}:{}", p.display()))
            .collect()
    }

    fn k(root: usize, p: &str) -> (usize, PathBuf) {
        (root, PathBuf::from(p))
    }

    #[test]
    fn splice_replaces_each_subtree_run_in_place() {
        let old = vec![
            k(0, "a"),
            k(0, "b"),
            k(0, "b/x"),
            k(0, "b/y/z"),
            k(0, "b-c"),
            k(0, "d/e"),
            k(1, "b/x"),
        ];
        // b's subtree changed (y gone, w new), an empty run appears under "c", and
        // root 1's "b" is untouched though it has the same name.
        let new = vec![k(0, "b"), k(0, "b/w"), k(0, "b/x"), k(0, "c/new")];
        let spans = [(0, Path::new("b")), (0, Path::new("c"))];
        let out = splice(&old, new, &spans, dir_key);
        assert_eq!(
            keys(&out),
            [
                "0:a", "0:b", "0:b/w", "0:b/x", "0:b-c", "0:c/new", "0:d/e", "1:b/x"
            ]
        );
        let mut sorted = out.clone();
        sorted.sort();
        assert_eq!(out, sorted, "still in order");
    }
}

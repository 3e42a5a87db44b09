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
//! What it does not do yet: skip the walk itself (a cached file list kept fresh by a
//! watcher), persist to disk, or refresh entries in the background.
//!
//! [`Workspace::open_found`]: crate::workspace::Workspace::open_found

use super::plan::{self, Query};
use super::{Base, Found, SearchEnv, WalkOptions};
use crate::error::{ToolError, ToolResult};
use roaring::RoaringBitmap;
use std::collections::HashMap;
use std::io::Read;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// What identifies one version of a file's content, from `fstat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    pub fn of(file: &std::fs::File) -> Option<Stamp> {
        let st = rustix::fs::fstat(file).ok()?;
        Some(Stamp {
            dev: st.st_dev as u64,
            ino: st.st_ino as u64,
            size: st.st_size as u64,
            mtime: (st.st_mtime as i64, st.st_mtime_nsec as i64),
            ctime: (st.st_ctime as i64, st.st_ctime_nsec as i64),
        })
    }
}

struct Entry {
    id: u32,
    stamp: Stamp,
}

/// One file as read by a build: where, which content, its distinct trigrams.
type Indexed = ((usize, PathBuf), Stamp, Vec<u32>);

/// The index of a workspace's searchable files.
pub struct Index {
    entries: HashMap<(usize, PathBuf), Entry>,
    postings: HashMap<u32, RoaringBitmap>,
    bytes: u64,
}

/// Which indexed files may hold a match.
pub enum Candidates {
    /// The query rules nothing out: read every file.
    All,
    Some(RoaringBitmap),
}

/// What a build saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    pub files: u64,
    pub bytes: u64,
    pub trigrams: u64,
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

/// Reads a file whole (up to `limit` bytes; 0: no limit) into its trigrams; None when
/// it is larger (the scan skips it too) or unreadable.
fn file_grams(file: &mut std::fs::File, limit: u64, grams: &mut Grams) -> Option<(Vec<u32>, u64)> {
    let mut buf = vec![0u8; 256 * 1024];
    // Two bytes carried over so trigrams across reads are seen.
    let mut keep = 0usize;
    let mut total = 0u64;
    loop {
        let n = match file.read(&mut buf[keep..]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => {
                grams.take();
                return None;
            }
        };
        total += n as u64;
        if limit > 0 && total > limit {
            grams.take();
            return None;
        }
        let end = keep + n;
        grams.add(&buf[..end]);
        keep = end.min(2);
        let tail = end - keep;
        buf.copy_within(tail..end, 0);
    }
    Some((grams.take(), total))
}

impl Index {
    /// Builds the index of every file a search could read under `bases` (hidden files
    /// included; ignore files, deny and skip rules and the size limit as a scan has them).
    pub fn build(env: &SearchEnv, bases: &[Base]) -> ToolResult<(Index, Stats)> {
        let ws = env.workspace;
        let opts = WalkOptions {
            include_hidden: true,
            globs: Vec::new(),
        };
        let found: Mutex<Vec<Indexed>> = Mutex::new(Vec::new());
        let bytes = AtomicU64::new(0);
        super::walk(env, bases, &opts, || {
            let mut grams = Grams::new();
            let (found, bytes) = (&found, &bytes);
            move |f: &Found| {
                let Ok(mut file) = ws.open_found(f.root, f.rel, false) else {
                    return true;
                };
                let Some(stamp) = Stamp::of(&file) else {
                    return true;
                };
                if let Some((list, n)) = file_grams(&mut file, env.max_file_size, &mut grams) {
                    bytes.fetch_add(n, Ordering::Relaxed);
                    let entry = ((f.root, f.rel.to_path_buf()), stamp, list);
                    crate::error::lock(found).push(entry);
                }
                !env.control.cancel.is_cancelled()
            }
        })?;
        let mut found = found.into_inner().map_err(|_| {
            ToolError::new(crate::error::ErrorCode::IoError, "an index thread panicked")
        })?;
        // Ids in path order, so a build is the same from run to run.
        found.sort_by(|a, b| a.0.cmp(&b.0));
        let mut index = Index {
            entries: HashMap::with_capacity(found.len()),
            postings: HashMap::new(),
            bytes: bytes.into_inner(),
        };
        for (id, (path, stamp, list)) in found.into_iter().enumerate() {
            let id = id as u32;
            for k in list {
                index.postings.entry(k).or_default().insert(id);
            }
            index.entries.insert(path, Entry { id, stamp });
        }
        let stats = index.stats();
        Ok((index, stats))
    }

    pub fn stats(&self) -> Stats {
        Stats {
            files: self.entries.len() as u64,
            bytes: self.bytes,
            trigrams: self.postings.len() as u64,
        }
    }

    /// The files a query lets through.
    pub fn candidates(&self, q: &Query) -> Candidates {
        match self.eval(q) {
            None => Candidates::All,
            Some(b) => Candidates::Some(b),
        }
    }

    /// None: everything.
    fn eval(&self, q: &Query) -> Option<RoaringBitmap> {
        match q {
            Query::All => None,
            Query::Has(t) => Some(self.postings.get(&key(*t)).cloned().unwrap_or_default()),
            Query::And(qs) => {
                let mut acc: Option<RoaringBitmap> = None;
                for q in qs {
                    if let Some(b) = self.eval(q) {
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
                    acc |= self.eval(q)?;
                }
                Some(acc)
            }
        }
    }

    /// True when the opened file is indexed with this very content and the query rules
    /// it out: reading it cannot find a match.
    pub fn rules_out(&self, c: &Candidates, found: &Found, file: &std::fs::File) -> bool {
        let Candidates::Some(set) = c else {
            return false;
        };
        let Some(e) = self.entries.get(&(found.root, found.rel.to_path_buf())) else {
            return false;
        };
        !set.contains(e.id) && Stamp::of(file) == Some(e.stamp)
    }
}

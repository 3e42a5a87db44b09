//! The index on disk: one file in the workspace's state directory holding the posting
//! lists and the stamps of the files they describe, memory-mapped when loaded, so a
//! restarted server (or a CLI search after `ferret index`) starts from what was indexed
//! and re-reads only files whose stamp changed.
//!
//! Layout (little-endian), written once to a temporary name, synced, then renamed over
//! the old file — a reader's map is never truncated under it:
//!
//! ```text
//! header  168 bytes: magic "FERRETIX", version, key count, fingerprint (16 bytes),
//!         next id, file count, the offsets of posts, table and files, the total
//!         length, the offset of the filter table and the number of filters; then the
//!         checksum of each section (posts, table, files, filters with their bits), and
//!         last the checksum of the header's bytes before it
//! posts   the `roaring` serialization of each posting list, back to back
//! table   per trigram, sorted: key u32, length u32, offset u64 (into posts)
//! files   per file: root u32, id u32, name length u32, name bytes, stamp (8 × u64)
//! filters per large file, sorted by id: id u32, length u32, offset u64 (into bits)
//! bits    the 4-gram filters (`quads`), back to back
//! ```
//!
//! The fingerprint covers what decides which files a walk takes and reads (roots, deny
//! and skip rules, size limit, ferret's version); a file made under other rules is not
//! used.
//!
//! **The file is untrusted input.** Whatever its bytes, opening it never panics and never
//! allocates more than its own length warrants, and no byte of it is used unverified:
//! [`Mapped::open`] checks the header's own checksum, bounds every count and offset by
//! the file's length (a count must fit in the bytes of its section before anything is
//! sized from it), then hashes every section against the checksum the header stores.
//! One mismatch and the whole file is refused, with the section named ("checksum
//! mismatch in postings"): the caller builds anew and says so (`ferret index status`).
//! A file that is refused costs a rebuild, never a wrong answer: a flipped bit in a
//! posting list that still decodes would otherwise drop a match silently.
//!
//! The checksum is XXH3-128 (`xxhash-rust`), every section at open, once. SHA-256
//! would cost 37 ms (OpenSSL's, with SHA-NI, measured here) over the 78 MB index of a
//! 24 000-file tree on every load — a seventh of a quiet restart (270 ms), a third of a
//! CLI search from the stored index (110 ms); XXH3 over the same file is about 10 ms,
//! most of it the first touch of the mapped pages. A checksum is not a signature either way: someone who can
//! write ferret's state directory can recompute it — that directory is the user's own,
//! outside every root (SECURITY.md). What it stops is a damaged or crudely tampered
//! file being believed. Past the checksums every read is still bounds-checked (the
//! loader's fuzz target
//! feeds it files whose checksums were fixed up after mutation).

use super::index::{Listed, STAMP_WORDS, Stamp};
use memmap2::Mmap;
use roaring::RoaringBitmap;
use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"FERRETIX";
/// 2: the 4-gram filters. 3: per-section checksums; a file's link count in its stamp.
const VERSION: u32 = 3;
/// The fields, then one checksum per section, then the header's own.
const FIELDS: usize = 88;
const SUM: usize = 16;
const SECTIONS: [&str; 4] = ["postings", "trigram table", "paths list", "4-gram filters"];
const HEADER_SUM_AT: usize = FIELDS + SECTIONS.len() * SUM;
const HEADER: usize = HEADER_SUM_AT + SUM;
const ENTRY: usize = 16;
/// The fewest bytes one file's entry takes (an empty name).
const FILE_MIN: usize = 12 + 8 * STAMP_WORDS;

/// A section's checksum: XXH3-128 ([`xxhash_rust`]), little-endian.
fn sum(b: &[u8]) -> [u8; SUM] {
    xxhash_rust::xxh3::xxh3_128(b).to_le_bytes()
}

/// The checksum of `map[from..to]`. Hashing a mapped file touches every page of it:
/// each 8 MiB hashed is let go from this process's resident set at once (the pages stay
/// in the page cache; a lookup faults its page back in), so neither a load's peak nor a
/// server's RSS grows by the file's size — it holds only what its searches touch, as
/// before checksums.
fn section_sum(map: &Bytes, from: usize, to: usize) -> [u8; SUM] {
    const CHUNK: usize = 8 << 20;
    let Bytes::Map(m) = map else {
        return sum(&map[from..to]);
    };
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    let mut at = from;
    while at < to {
        let end = to.min(at + CHUNK);
        h.update(&m[at..end]);
        // SAFETY: a shared, read-only mapping of a file no one writes in place (see
        // `Mapped::open`): dropping its pages loses nothing, they read back the same.
        let _ =
            unsafe { m.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, at, end - at) };
        at = end;
    }
    h.digest128().to_le_bytes()
}

/// How much of the stored posting lists a save's merge keeps resident before it lets
/// them go ([`Mapped::let_go_posts`]).
pub const LET_GO_EVERY: usize = 8 << 20;

/// What the rules an index was built under hash to.
pub type Fingerprint = [u8; 16];

/// The bytes of an index: mapped from its file, or held (tests, the fuzz target).
enum Bytes {
    Map(Mmap),
    Owned(Vec<u8>),
}

impl std::ops::Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Map(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}

/// A persisted index, mapped, every section verified.
pub struct Mapped {
    map: Bytes,
    keys: usize,
    table: usize,
    posts: usize,
    files_at: usize,
    filters_at: usize,
    filter_count: usize,
    pub next_id: u32,
    pub files: u32,
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// A stored posting list whose bytes do not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Undecodable;

/// Why a stored index is not used.
#[derive(Debug)]
pub enum Unusable {
    Missing,
    /// Built under other rules, by another version.
    Stale(String),
    /// Its bytes are not what ferret wrote: cut short, out of bounds, or a checksum
    /// that does not match (the section named).
    Damaged(String),
    Io(std::io::Error),
}

impl std::fmt::Display for Unusable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unusable::Missing => write!(f, "no index on disk"),
            Unusable::Stale(why) => write!(f, "{why}"),
            Unusable::Damaged(why) => write!(f, "the index file is damaged ({why})"),
            Unusable::Io(e) => write!(f, "{e}"),
        }
    }
}

impl Mapped {
    /// Maps the file at `path` if it was built under `fingerprint` and is whole: every
    /// section's checksum is verified before anything is read from it.
    pub fn open(path: &Path, fingerprint: &Fingerprint) -> Result<Mapped, Unusable> {
        // O_NONBLOCK|O_NOFOLLOW: a FIFO, device or symlink put at the index path must not
        // hang the open or lead elsewhere; only a regular file is ever read or mapped.
        let mut opts = std::fs::OpenOptions::new();
        opts.read(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW);
        }
        let file = match opts.open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Unusable::Missing),
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(Unusable::Damaged("the index path is a symlink".into()));
            }
            Err(e) => return Err(Unusable::Io(e)),
        };
        match file.metadata() {
            Ok(m) if m.is_file() => {}
            Ok(_) => {
                return Err(Unusable::Damaged(
                    "the index path is not a regular file".into(),
                ));
            }
            Err(e) => return Err(Unusable::Io(e)),
        }
        // SAFETY: the file lives in ferret's own state directory and is only ever
        // replaced by rename, never written in place, so the mapping does not change
        // under us (another process of the same user truncating it is outside what
        // ferret defends against: the state directory is trusted). What it held when
        // mapped is verified whole below before any of it is used.
        let map = unsafe { Mmap::map(&file) }.map_err(Unusable::Io)?;
        Mapped::verified(Bytes::Map(map), fingerprint)
    }

    /// An index from bytes in memory, verified as [`Mapped::open`] verifies a file.
    pub fn from_bytes(bytes: Vec<u8>, fingerprint: &Fingerprint) -> Result<Mapped, Unusable> {
        Mapped::verified(Bytes::Owned(bytes), fingerprint)
    }

    fn verified(map: Bytes, fingerprint: &Fingerprint) -> Result<Mapped, Unusable> {
        let bad = |why: &str| Unusable::Damaged(why.to_string());
        if map.len() < 12 || &map[..8] != MAGIC {
            return Err(bad("no header"));
        }
        if u32_at(&map, 8) != Some(VERSION) {
            return Err(Unusable::Stale(
                "the index was written by another version".into(),
            ));
        }
        if map.len() < HEADER {
            return Err(bad("cut short in the header"));
        }
        if sum(&map[..HEADER_SUM_AT])[..] != map[HEADER_SUM_AT..HEADER] {
            return Err(bad("checksum mismatch in the header"));
        }
        if map[16..32] != fingerprint[..] {
            return Err(Unusable::Stale(
                "the index was built under other rules (roots, deny, skip or size limit)".into(),
            ));
        }
        let field = |at| u64_at(&map, at).and_then(|v| usize::try_from(v).ok());
        let (Some(keys), Some(next_id), Some(files)) =
            (u32_at(&map, 12), u32_at(&map, 32), u32_at(&map, 36))
        else {
            return Err(bad("header"));
        };
        let (Some(posts), Some(table), Some(files_at), Some(total)) =
            (field(40), field(48), field(56), field(64))
        else {
            return Err(bad("header"));
        };
        let (Some(filters_at), Some(filter_count)) = (field(72), u32_at(&map, 80)) else {
            return Err(bad("header"));
        };
        let filter_count = filter_count as usize;
        let keys = keys as usize;
        // Every count bounded by its section's bytes, every offset by the file's length,
        // before anything is sized from them.
        if total != map.len() {
            return Err(bad("cut short, or longer than written"));
        }
        if posts != HEADER
            || table < posts
            || keys.checked_mul(ENTRY).and_then(|n| n.checked_add(table)) != Some(files_at)
            || files_at > filters_at
            || (files as usize)
                .checked_mul(FILE_MIN)
                .is_none_or(|n| n > filters_at - files_at)
            || filter_count
                .checked_mul(ENTRY)
                .and_then(|n| n.checked_add(filters_at))
                .is_none_or(|end| end > total)
        {
            return Err(bad("sections out of bounds"));
        }
        // More paths than a build may list (an index of an older ferret, or one made for
        // a tree that has grown): read, they would be held whole. Rebuilt, the bound
        // says the workspace is too large and searches scan.
        let path_bytes = (filters_at - files_at) - files as usize * FILE_MIN;
        if path_bytes as u64 > super::index::path_bytes_max() {
            return Err(Unusable::Stale(
                "the index lists more bytes of paths than an index may hold".into(),
            ));
        }
        let spans = [
            (posts, table),
            (table, files_at),
            (files_at, filters_at),
            (filters_at, total),
        ];
        for (i, (from, to)) in spans.into_iter().enumerate() {
            let want = &map[FIELDS + i * SUM..FIELDS + (i + 1) * SUM];
            if section_sum(&map, from, to)[..] != *want {
                return Err(Unusable::Damaged(format!(
                    "checksum mismatch in {}",
                    SECTIONS[i]
                )));
            }
        }
        if let Bytes::Map(m) = &map {
            // Random lookups into the table and posts: no read-ahead.
            let _ = m.advise(memmap2::Advice::Random);
        }
        Ok(Mapped {
            map,
            keys,
            table,
            posts,
            files_at,
            filters_at,
            filter_count,
            next_id,
            files,
        })
    }

    /// The 4-gram filter stored for file `id`, if it has one. Bounds are checked: an
    /// entry pointing outside the file is no filter (the file is then read).
    pub fn filter(&self, id: u32) -> Option<&[u8]> {
        let entry = |i: usize| {
            let at = self.filters_at + i * ENTRY;
            (
                u32_at(&self.map, at).unwrap_or(u32::MAX),
                u32_at(&self.map, at + 4).unwrap_or(0) as usize,
                u64_at(&self.map, at + 8).unwrap_or(u64::MAX) as usize,
            )
        };
        let (mut lo, mut hi) = (0, self.filter_count);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let (key, len, off) = entry(mid);
            match key.cmp(&id) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => {
                    let bits = self.filters_at + self.filter_count * ENTRY;
                    let from = bits.checked_add(off)?;
                    return self.map.get(from..from.checked_add(len)?);
                }
            }
        }
        None
    }

    /// Trigram keys stored.
    pub fn len(&self) -> usize {
        self.keys
    }

    pub fn is_empty(&self) -> bool {
        self.keys == 0
    }

    pub fn bytes(&self) -> u64 {
        self.map.len() as u64
    }

    fn entry(&self, i: usize) -> (u32, usize, usize) {
        let at = self.table + i * ENTRY;
        let key = u32_at(&self.map, at).unwrap_or(u32::MAX);
        let len = u32_at(&self.map, at + 4).unwrap_or(0) as usize;
        let off = u64_at(&self.map, at + 8).unwrap_or(u64::MAX) as usize;
        (key, len, off)
    }

    /// Where `key`'s entry is in the table.
    fn find(&self, key: u32) -> Option<usize> {
        let (mut lo, mut hi) = (0, self.keys);
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.entry(mid).0.cmp(&key) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(mid),
            }
        }
        None
    }

    /// Whether a list is stored for `key`.
    pub fn contains(&self, key: u32) -> bool {
        self.find(key).is_some()
    }

    /// The key of the `i`th stored list.
    pub fn key_at(&self, i: usize) -> u32 {
        self.entry(i).0
    }

    /// Lets go of this process's resident pages of the 4-gram filters (a save copies
    /// them all, one bit a byte of every large file: 200 MB for the attacker's 1.7 GB).
    pub fn let_go_filters(&self) {
        let Bytes::Map(m) = &self.map else {
            return;
        };
        let len = self.map.len().saturating_sub(self.filters_at);
        if len > 0 {
            // SAFETY: as in `section_sum`.
            let _ = unsafe {
                m.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, self.filters_at, len)
            };
        }
    }

    /// Lets go of this process's resident pages of the posting lists stored before key
    /// index `i`, from byte `from` of the lists on (what an earlier call let go of up
    /// to); returns where it let go of up to. A save reads every stored list once, in
    /// key order: without this, the whole stored file would stay resident in the saving
    /// process, so its peak grew by the stored index's size at every save (attacker pass
    /// 11b: 600, 907, 1 230 MB on three starts). At most [`LET_GO_EVERY`] stays resident.
    pub fn let_go_posts(&self, from: usize, i: usize) -> usize {
        let Bytes::Map(m) = &self.map else {
            return from;
        };
        let to = if i >= self.keys {
            self.table.saturating_sub(self.posts)
        } else {
            self.entry(i).2.min(self.table.saturating_sub(self.posts))
        };
        if to < from.saturating_add(LET_GO_EVERY) && i < self.keys {
            return from;
        }
        if to > from {
            // SAFETY: as in `section_sum`: a shared, read-only mapping of a file no one
            // writes in place; the pages read back the same.
            let _ = unsafe {
                m.unchecked_advise_range(
                    memmap2::UncheckedAdvice::DontNeed,
                    self.posts + from,
                    to - from,
                )
            };
        }
        to
    }

    /// The posting list of `key`: `Ok(None)` when no file holds it, `Err` when the
    /// stored bytes do not decode.
    pub fn get(&self, key: u32) -> Result<Option<RoaringBitmap>, Undecodable> {
        let Some(i) = self.find(key) else {
            return Ok(None);
        };
        let (_, len, off) = self.entry(i);
        let from = self.posts.checked_add(off).ok_or(Undecodable)?;
        let to = from.checked_add(len).ok_or(Undecodable)?;
        if to > self.table {
            return Err(Undecodable);
        }
        RoaringBitmap::deserialize_from(&self.map[from..to])
            .map(Some)
            .map_err(|_| Undecodable)
    }

    /// The files as indexed: each with its id and the stamp its content had.
    pub fn files(&self) -> Option<Vec<Listed>> {
        use std::os::unix::ffi::OsStrExt;
        let b = self.map.get(self.files_at..self.filters_at)?;
        let mut out = Vec::with_capacity(self.files as usize);
        let mut at = 0;
        for _ in 0..self.files {
            let root = u32_at(b, at)? as usize;
            let id = u32_at(b, at + 4)?;
            let n = u32_at(b, at + 8)? as usize;
            at += 12;
            let name = b.get(at..at.checked_add(n)?)?;
            at += n;
            let mut s = [0u64; STAMP_WORDS];
            for (i, v) in s.iter_mut().enumerate() {
                *v = u64_at(b, at + 8 * i)?;
            }
            at += 8 * STAMP_WORDS;
            out.push(Listed::stored(
                root,
                PathBuf::from(std::ffi::OsStr::from_bytes(name)),
                id,
                Stamp::from_words(s),
            ));
        }
        (at == self.filters_at - self.files_at).then_some(out)
    }
}

/// Writes an index file: `lists` yields each key's posting list in key order.
pub fn write(
    path: &Path,
    fingerprint: &Fingerprint,
    next_id: u32,
    files: &[&Listed],
    lists: impl Iterator<Item = std::io::Result<(u32, RoaringBitmap)>>,
    filters: &[(u32, &[u8])],
    let_go: &dyn Fn(),
) -> std::io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id()
    ));
    let result = (|| {
        // A name of this process's own: whatever stands there (left by a killed run, or
        // put there: a link would send the write elsewhere, a FIFO would block) is
        // removed, and the file made new, never followed.
        let _ = std::fs::remove_file(&tmp);
        let file = {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&tmp)?
        };
        let mut w = Sections {
            w: BufWriter::with_capacity(1 << 20, file),
            h: xxhash_rust::xxh3::Xxh3::new(),
            sums: Vec::new(),
        };
        w.w.write_all(&[0u8; HEADER])?;
        let mut table: Vec<(u32, u32, u64)> = Vec::new();
        let mut off = 0u64;
        let mut buf = Vec::new();
        for item in lists {
            let (key, list) = item?;
            buf.clear();
            list.serialize_into(&mut buf)?;
            let len = u32::try_from(buf.len()).map_err(std::io::Error::other)?;
            w.put(&buf)?;
            table.push((key, len, off));
            off += buf.len() as u64;
        }
        w.cut();
        let table_at = HEADER as u64 + off;
        for (k, len, off) in &table {
            w.put(&k.to_le_bytes())?;
            w.put(&len.to_le_bytes())?;
            w.put(&off.to_le_bytes())?;
        }
        w.cut();
        let files_at = table_at + (table.len() * ENTRY) as u64;
        let mut end = files_at;
        let mut stored = 0u32;
        for l in files {
            let (Some(id), Some(stamp)) = (l.id(), l.stamp()) else {
                continue;
            };
            let name = l.rel.as_os_str().as_bytes();
            w.put(&(l.root as u32).to_le_bytes())?;
            w.put(&id.to_le_bytes())?;
            w.put(&(name.len() as u32).to_le_bytes())?;
            w.put(name)?;
            for v in stamp.words() {
                w.put(&v.to_le_bytes())?;
            }
            end += (FILE_MIN + name.len()) as u64;
            stored += 1;
        }
        w.cut();
        let filters_at = end;
        let mut off = 0u64;
        for (id, f) in filters {
            w.put(&id.to_le_bytes())?;
            w.put(&(f.len() as u32).to_le_bytes())?;
            w.put(&off.to_le_bytes())?;
            off += f.len() as u64;
        }
        // The filters may be those of the stored file, mapped: let go of what was
        // copied as the copy goes, so they do not all stay resident.
        let mut copied = 0;
        for (_, f) in filters {
            w.put(f)?;
            copied += f.len();
            if copied >= LET_GO_EVERY {
                let_go();
                copied = 0;
            }
        }
        let_go();
        w.cut();
        end += (filters.len() * ENTRY) as u64 + off;
        let mut header = Vec::with_capacity(HEADER);
        header.extend_from_slice(MAGIC);
        header.extend_from_slice(&VERSION.to_le_bytes());
        header.extend_from_slice(&(table.len() as u32).to_le_bytes());
        header.extend_from_slice(fingerprint);
        header.extend_from_slice(&next_id.to_le_bytes());
        header.extend_from_slice(&stored.to_le_bytes());
        for v in [HEADER as u64, table_at, files_at, end, filters_at] {
            header.extend_from_slice(&v.to_le_bytes());
        }
        header.extend_from_slice(&(filters.len() as u32).to_le_bytes());
        header.extend_from_slice(&0u32.to_le_bytes());
        for sum in &w.sums {
            header.extend_from_slice(sum);
        }
        let own = sum(&header);
        header.extend_from_slice(&own);
        let mut w = w.w;
        w.seek(SeekFrom::Start(0))?;
        w.write_all(&header)?;
        let file = w.into_inner().map_err(|e| e.into_error())?;
        // On disk before it takes the name: a crash leaves the old index or the new.
        file.sync_all()?;
        std::fs::rename(&tmp, path)?;
        Ok(end)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Recomputes the checksums of index bytes after they were altered, so that what the
/// alteration does past the checksums can be tested (the fuzz target, tests): a
/// checksum is not a signature, and every read after it is bounds-checked still.
/// Sections whose bounds the header gets wrong keep the checksum they had.
pub fn reseal(b: &mut [u8]) {
    if b.len() < HEADER {
        return;
    }
    let field = |b: &[u8], at| u64_at(b, at).and_then(|v| usize::try_from(v).ok());
    let (posts, table, files_at, filters_at) = (
        field(b, 40).unwrap_or(usize::MAX),
        field(b, 48).unwrap_or(usize::MAX),
        field(b, 56).unwrap_or(usize::MAX),
        field(b, 72).unwrap_or(usize::MAX),
    );
    let total = b.len();
    let spans = [
        (posts, table),
        (table, files_at),
        (files_at, filters_at),
        (filters_at, total),
    ];
    for (i, (from, to)) in spans.into_iter().enumerate() {
        if let Some(section) = b.get(from..to) {
            let s = sum(section);
            b[FIELDS + i * SUM..FIELDS + (i + 1) * SUM].copy_from_slice(&s);
        }
    }
    let own = sum(&b[..HEADER_SUM_AT]);
    b[HEADER_SUM_AT..HEADER].copy_from_slice(&own);
}

/// The file being written, each section's checksum taken as it goes by.
struct Sections {
    w: BufWriter<File>,
    h: xxhash_rust::xxh3::Xxh3,
    sums: Vec<[u8; SUM]>,
}

impl Sections {
    fn put(&mut self, b: &[u8]) -> std::io::Result<()> {
        self.h.update(b);
        self.w.write_all(b)
    }

    /// The section written since the last cut is whole: its checksum is kept.
    fn cut(&mut self) {
        self.sums.push(self.h.digest128().to_le_bytes());
        self.h.reset();
    }
}

/// Where a workspace's index lives in its state directory.
pub fn path_in(state_dir: &Path) -> PathBuf {
    state_dir.join("index").join("trigrams.v1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_index_reads_back_and_a_damaged_one_is_refused() {
        let dir = tempfile_dir();
        let path = dir.join("ix");
        let fp = [7u8; 16];
        let stamp = Stamp::from_words([1, 2, 3, 4, 5, 6, 7, 1]);
        let files = [
            Listed::stored(0, PathBuf::from("a.rs"), 0, stamp),
            Listed::stored(1, PathBuf::from("d/b.rs"), 5, stamp),
        ];
        let refs: Vec<&Listed> = files.iter().collect();
        let lists = vec![
            (3u32, RoaringBitmap::from_iter([0u32, 5])),
            (9u32, RoaringBitmap::from_iter([5u32])),
        ];
        let filter = [0b1010_0101u8, 1, 2, 3];
        write(
            &path,
            &fp,
            6,
            &refs,
            lists.into_iter().map(Ok),
            &[(5, &filter[..])],
            &|| {},
        )
        .expect("written");
        let m = Mapped::open(&path, &fp).expect("opens");
        assert_eq!((m.len(), m.next_id, m.files), (2, 6, 2));
        assert_eq!(m.get(3), Ok(Some(RoaringBitmap::from_iter([0u32, 5]))));
        assert_eq!(m.get(9), Ok(Some(RoaringBitmap::from_iter([5u32]))));
        assert_eq!(m.get(4), Ok(None));
        assert_eq!(m.filter(5), Some(&filter[..]));
        assert_eq!(m.filter(0), None);
        let back = m.files().expect("files decode");
        assert_eq!(back.len(), 2);
        assert_eq!(back[1].rel, PathBuf::from("d/b.rs"));
        assert_eq!(
            (back[1].root, back[1].id(), back[1].stamp()),
            (1, Some(5), Some(stamp))
        );
        assert!(matches!(
            Mapped::open(&path, &[8u8; 16]),
            Err(Unusable::Stale(_))
        ));
        // Cut short: refused whole rather than read partly.
        let bytes = std::fs::read(&path).expect("read");
        std::fs::write(&path, &bytes[..bytes.len() - 10]).expect("write");
        assert!(matches!(
            Mapped::open(&path, &fp),
            Err(Unusable::Damaged(_))
        ));
        // A posting list whose bytes are garbage: the checksum refuses the file whole.
        let mut bad = bytes.clone();
        for b in &mut bad[HEADER..HEADER + 8] {
            *b = 0xff;
        }
        std::fs::write(&path, &bad).expect("write");
        match Mapped::open(&path, &fp) {
            Err(Unusable::Damaged(why)) => assert_eq!(why, "checksum mismatch in postings"),
            other => panic!("not refused: {:?}", other.err()),
        }
        // Resealed (a checksum is no signature), it still decodes to an error, not to
        // "no file".
        reseal(&mut bad);
        let m = Mapped::from_bytes(bad, &fp).expect("resealed");
        assert_eq!(m.get(3), Err(Undecodable));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_filter_entry_pointing_outside_the_file_is_no_filter() {
        let dir = tempfile_dir();
        let path = dir.join("ix");
        let fp = [3u8; 16];
        let stamp = Stamp::from_words([1, 2, 3, 4, 5, 6, 7, 1]);
        let files = [Listed::stored(0, PathBuf::from("big.c"), 4, stamp)];
        let refs: Vec<&Listed> = files.iter().collect();
        let filter = [0xffu8; 16];
        let lists = vec![(3u32, RoaringBitmap::from_iter([4u32]))];
        write(
            &path,
            &fp,
            5,
            &refs,
            lists.into_iter().map(Ok),
            &[(4, &filter[..])],
            &|| {},
        )
        .expect("written");
        let bytes = std::fs::read(&path).expect("read");
        let filters_at = u64_at(&bytes, 72).expect("header") as usize;
        assert_eq!(
            Mapped::open(&path, &fp).expect("opens").filter(4),
            Some(&filter[..])
        );
        // Its offset, then its length, made to point past the end: no filter (the
        // file is read), no panic.
        for (at, value) in [(filters_at + 8, u64::MAX / 2), (filters_at + 4, 1 << 30)] {
            let mut bad = bytes.clone();
            let v = value.to_le_bytes();
            let n = if at == filters_at + 4 { 4 } else { 8 };
            bad[at..at + n].copy_from_slice(&v[..n]);
            assert!(matches!(
                Mapped::from_bytes(bad.clone(), &fp),
                Err(Unusable::Damaged(_))
            ));
            reseal(&mut bad);
            let m = Mapped::from_bytes(bad, &fp).expect("resealed");
            assert_eq!(m.filter(4), None, "entry field at {at}");
        }
        // A filter count past the end of the file: refused whole, resealed or not.
        let mut bad = bytes.clone();
        bad[80..84].copy_from_slice(&1000u32.to_le_bytes());
        assert!(matches!(
            Mapped::from_bytes(bad.clone(), &fp),
            Err(Unusable::Damaged(_))
        ));
        reseal(&mut bad);
        assert!(matches!(
            Mapped::from_bytes(bad, &fp),
            Err(Unusable::Damaged(_))
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A small index with every section present.
    fn sample() -> (Vec<u8>, Fingerprint) {
        let dir = tempfile_dir();
        let path = dir.join("sample");
        let fp = [5u8; 16];
        let stamp = Stamp::from_words([1, 2, 3, 4, 5, 6, 7, 1]);
        let files = [
            Listed::stored(0, PathBuf::from("a.rs"), 0, stamp),
            Listed::stored(0, PathBuf::from("big.c"), 1, stamp),
        ];
        let refs: Vec<&Listed> = files.iter().collect();
        let lists = vec![
            (3u32, RoaringBitmap::from_iter([0u32, 1])),
            (9u32, RoaringBitmap::from_iter([1u32])),
        ];
        let filter = [0x5au8; 32];
        write(
            &path,
            &fp,
            2,
            &refs,
            lists.into_iter().map(Ok),
            &[(1, &filter[..])],
            &|| {},
        )
        .expect("written");
        let bytes = std::fs::read(&path).expect("read");
        let _ = std::fs::remove_dir_all(&dir);
        (bytes, fp)
    }

    /// Everything a loaded index offers, used: must not panic.
    fn exercise(m: &Mapped) {
        let _ = m.files();
        for i in 0..m.len().min(64) {
            let _ = m.get(m.key_at(i));
        }
        for id in 0..4 {
            let _ = m.filter(id);
        }
    }

    #[test]
    fn every_flipped_bit_and_every_cut_is_refused_whole() {
        let (bytes, fp) = sample();
        Mapped::from_bytes(bytes.clone(), &fp).expect("intact");
        for at in 0..bytes.len() {
            for bit in [0x01u8, 0x80] {
                let mut bad = bytes.clone();
                bad[at] ^= bit;
                let r = Mapped::from_bytes(bad.clone(), &fp);
                assert!(r.is_err(), "byte {at} bit {bit:#x} flipped and accepted");
                // Resealed, it may load (a checksum is no signature): never a panic.
                reseal(&mut bad);
                if let Ok(m) = Mapped::from_bytes(bad, &fp) {
                    exercise(&m);
                }
            }
        }
        for len in 0..bytes.len() {
            let mut cut = bytes[..len].to_vec();
            assert!(
                Mapped::from_bytes(cut.clone(), &fp).is_err(),
                "cut at {len}"
            );
            reseal(&mut cut);
            assert!(Mapped::from_bytes(cut, &fp).is_err(), "cut at {len}");
        }
    }

    /// The fuzz target's oracle (fuzz/fuzz_targets/index_load.rs), run from a fixed
    /// seed in every test run: random mutations, checksums fixed up or not.
    #[test]
    fn mutated_files_load_only_when_every_checksum_holds_and_never_panic() {
        let (bytes, fp) = sample();
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut loaded = 0;
        for round in 0..3000 {
            let mut b = bytes.clone();
            for _ in 0..1 + next() % 4 {
                if b.is_empty() {
                    break;
                }
                let at = (next() as usize) % b.len();
                match next() % 4 {
                    0 => b[at] = next() as u8,
                    1 if at + 4 <= b.len() => {
                        let v = [0u32, 1, u32::MAX, u32::MAX / 2][(next() % 4) as usize];
                        b[at..at + 4].copy_from_slice(&v.to_le_bytes());
                    }
                    2 => b.truncate(at),
                    _ => b.extend_from_slice(&[next() as u8; 3]),
                }
            }
            let sealed = round % 2 == 1;
            if sealed {
                reseal(&mut b);
            }
            let Ok(m) = Mapped::from_bytes(b.clone(), &fp) else {
                continue;
            };
            loaded += 1;
            if !sealed {
                let mut again = b.clone();
                reseal(&mut again);
                assert_eq!(again, b, "round {round}: loaded with a checksum that fails");
            }
            exercise(&m);
            if let Some(index) =
                super::super::index::Index::from_stored(m, super::super::index::Bounds::default())
            {
                let q = super::super::plan::plan("a.rs", false, true, false);
                let _ = index.candidates(&q);
            }
        }
        assert!(loaded > 0, "some resealed mutations load");
    }

    #[test]
    fn counts_of_0xffffffff_are_refused_before_anything_is_sized() {
        let (bytes, fp) = sample();
        // keys, files, filters: each set to u32::MAX, sealed or not.
        for at in [12usize, 36, 80] {
            let mut bad = bytes.clone();
            bad[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
            assert!(matches!(
                Mapped::from_bytes(bad.clone(), &fp),
                Err(Unusable::Damaged(_))
            ));
            reseal(&mut bad);
            assert!(
                matches!(Mapped::from_bytes(bad, &fp), Err(Unusable::Damaged(_))),
                "count at {at}"
            );
        }
        // Offsets past the end.
        for at in [40usize, 48, 56, 64, 72] {
            let mut bad = bytes.clone();
            bad[at..at + 8].copy_from_slice(&(u64::MAX - 3).to_le_bytes());
            reseal(&mut bad);
            assert!(
                matches!(Mapped::from_bytes(bad, &fp), Err(Unusable::Damaged(_))),
                "offset at {at}"
            );
        }
    }

    fn tempfile_dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "ferret-store-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&d).expect("temp dir");
        d
    }
}

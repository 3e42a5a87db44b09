//! The index on disk: one file in the workspace's state directory holding the posting
//! lists and the stamps of the files they describe, memory-mapped when loaded, so a
//! restarted server (or a CLI search after `ferret index`) starts from what was indexed
//! and re-reads only files whose stamp changed.
//!
//! Layout (little-endian), written once to a temporary name, synced, then renamed over
//! the old file — a reader's map is never truncated under it:
//!
//! ```text
//! header  88 bytes: magic "FERRETIX", version, key count, fingerprint (16 bytes),
//!         next id, file count, the offsets of posts, table and files, the total
//!         length, the offset of the filter table and the number of filters
//! posts   the `roaring` serialization of each posting list, back to back
//! table   per trigram, sorted: key u32, length u32, offset u64 (into posts)
//! files   per file: root u32, id u32, name length u32, name bytes, stamp (7 × u64)
//! filters per large file, sorted by id: id u32, length u32, offset u64 (into bits)
//! bits    the 4-gram filters (`quads`), back to back
//! ```
//!
//! The fingerprint covers what decides which files a walk takes and reads (roots, deny
//! and skip rules, size limit, ferret's version); a file made under other rules is not
//! used. The state directory is trusted (outside every root, the user's own), but the
//! file is still checked as it is read: bounds at open, each posting list when decoded.
//! A list that fails to decode makes that query read every file — never miss a match.

use super::index::{Listed, Stamp};
use memmap2::Mmap;
use roaring::RoaringBitmap;
use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"FERRETIX";
/// 2: the 4-gram filters.
const VERSION: u32 = 2;
const HEADER: usize = 88;
const ENTRY: usize = 16;

/// What the rules an index was built under hash to.
pub type Fingerprint = [u8; 16];

/// A persisted index, mapped.
pub struct Mapped {
    map: Mmap,
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
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// A stored posting list whose bytes do not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Undecodable;

/// Why a stored index is not used.
#[derive(Debug)]
pub enum Unusable {
    Missing,
    /// Built under other rules, by another version, or damaged.
    Stale(String),
    Io(std::io::Error),
}

impl std::fmt::Display for Unusable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unusable::Missing => write!(f, "no index on disk"),
            Unusable::Stale(why) => write!(f, "{why}"),
            Unusable::Io(e) => write!(f, "{e}"),
        }
    }
}

impl Mapped {
    /// Maps the file at `path` if it was built under `fingerprint` and is whole.
    pub fn open(path: &Path, fingerprint: &Fingerprint) -> Result<Mapped, Unusable> {
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Unusable::Missing),
            Err(e) => return Err(Unusable::Io(e)),
        };
        // SAFETY: the file lives in ferret's own state directory and is only ever
        // replaced by rename, never written in place, so the mapping does not change
        // under us (another process of the same user truncating it is outside what
        // ferret defends against: the state directory is trusted).
        let map = unsafe { Mmap::map(&file) }.map_err(Unusable::Io)?;
        let bad = |why: &str| Unusable::Stale(format!("the index file is damaged ({why})"));
        if map.len() < HEADER || &map[..8] != MAGIC {
            return Err(bad("no header"));
        }
        if u32_at(&map, 8) != Some(VERSION) {
            return Err(Unusable::Stale(
                "the index was written by another version".into(),
            ));
        }
        if map[16..32] != fingerprint[..] {
            return Err(Unusable::Stale(
                "the index was built under other rules (roots, deny, skip or size limit)".into(),
            ));
        }
        let field = |at| u64_at(&map, at).map(|v| v as usize);
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
        if total != map.len()
            || posts != HEADER
            || table < posts
            || keys.checked_mul(ENTRY).and_then(|n| n.checked_add(table)) != Some(files_at)
            || files_at > filters_at
            || filter_count
                .checked_mul(ENTRY)
                .and_then(|n| n.checked_add(filters_at))
                .is_none_or(|end| end > total)
        {
            return Err(bad("sections out of bounds: cut short?"));
        }
        // Random lookups into the table and posts: no read-ahead.
        let _ = map.advise(memmap2::Advice::Random);
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
            let name = b.get(at..at + n)?;
            at += n;
            let mut s = [0u64; 7];
            for (i, v) in s.iter_mut().enumerate() {
                *v = u64_at(b, at + 8 * i)?;
            }
            at += 56;
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
) -> std::io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id()
    ));
    let result = (|| {
        let file = File::create(&tmp)?;
        let mut w = BufWriter::with_capacity(1 << 20, file);
        w.write_all(&[0u8; HEADER])?;
        let mut table: Vec<(u32, u32, u64)> = Vec::new();
        let mut off = 0u64;
        let mut buf = Vec::new();
        for item in lists {
            let (key, list) = item?;
            buf.clear();
            list.serialize_into(&mut buf)?;
            w.write_all(&buf)?;
            table.push((key, buf.len() as u32, off));
            off += buf.len() as u64;
        }
        let table_at = HEADER as u64 + off;
        for (k, len, off) in &table {
            w.write_all(&k.to_le_bytes())?;
            w.write_all(&len.to_le_bytes())?;
            w.write_all(&off.to_le_bytes())?;
        }
        let files_at = table_at + (table.len() * ENTRY) as u64;
        let mut end = files_at;
        for l in files {
            let (Some(id), Some(stamp)) = (l.id(), l.stamp()) else {
                continue;
            };
            let name = l.rel.as_os_str().as_bytes();
            w.write_all(&(l.root as u32).to_le_bytes())?;
            w.write_all(&id.to_le_bytes())?;
            w.write_all(&(name.len() as u32).to_le_bytes())?;
            w.write_all(name)?;
            for v in stamp.words() {
                w.write_all(&v.to_le_bytes())?;
            }
            end += 12 + name.len() as u64 + 56;
        }
        let filters_at = end;
        let mut off = 0u64;
        for (id, f) in filters {
            w.write_all(&id.to_le_bytes())?;
            w.write_all(&(f.len() as u32).to_le_bytes())?;
            w.write_all(&off.to_le_bytes())?;
            off += f.len() as u64;
        }
        for (_, f) in filters {
            w.write_all(f)?;
        }
        end += (filters.len() * ENTRY) as u64 + off;
        let mut header = Vec::with_capacity(HEADER);
        header.extend_from_slice(MAGIC);
        header.extend_from_slice(&VERSION.to_le_bytes());
        header.extend_from_slice(&(table.len() as u32).to_le_bytes());
        header.extend_from_slice(fingerprint);
        header.extend_from_slice(&next_id.to_le_bytes());
        let stored = files
            .iter()
            .filter(|l| l.id().is_some() && l.stamp().is_some())
            .count() as u32;
        header.extend_from_slice(&stored.to_le_bytes());
        for v in [HEADER as u64, table_at, files_at, end, filters_at] {
            header.extend_from_slice(&v.to_le_bytes());
        }
        header.extend_from_slice(&(filters.len() as u32).to_le_bytes());
        header.extend_from_slice(&0u32.to_le_bytes());
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
        let stamp = Stamp::from_words([1, 2, 3, 4, 5, 6, 7]);
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
        assert!(matches!(Mapped::open(&path, &fp), Err(Unusable::Stale(_))));
        // A posting list whose bytes are garbage decodes to an error, not to "no file".
        let mut bad = bytes.clone();
        for b in &mut bad[HEADER..HEADER + 8] {
            *b = 0xff;
        }
        std::fs::write(&path, &bad).expect("write");
        let m = Mapped::open(&path, &fp).expect("header intact");
        assert_eq!(m.get(3), Err(Undecodable));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_filter_entry_pointing_outside_the_file_is_no_filter() {
        let dir = tempfile_dir();
        let path = dir.join("ix");
        let fp = [3u8; 16];
        let stamp = Stamp::from_words([1, 2, 3, 4, 5, 6, 7]);
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
            std::fs::write(&path, &bad).expect("write");
            let m = Mapped::open(&path, &fp).expect("header intact");
            assert_eq!(m.filter(4), None, "entry field at {at}");
        }
        // A filter count past the end of the file: refused whole.
        let mut bad = bytes.clone();
        bad[80..84].copy_from_slice(&1000u32.to_le_bytes());
        std::fs::write(&path, &bad).expect("write");
        assert!(matches!(Mapped::open(&path, &fp), Err(Unusable::Stale(_))));
        let _ = std::fs::remove_dir_all(&dir);
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

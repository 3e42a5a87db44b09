//! The index file's loader: any bytes, as the file ferret would map. A first byte says
//! whether the checksums are fixed up after the mutation (a checksum is no signature:
//! past it every read must still be bounds-checked) and whether the fingerprint is
//! taken from the bytes (so the loader gets past it).
//!
//! The oracle: loading never panics and never allocates beyond a bound (the smoke run
//! gives this target `-malloc_limit_mb=64` against inputs of a few KB); bytes whose
//! checksums were not fixed up load only if every checksum already holds (no unverified
//! byte is used); a loaded index decodes, looks up and answers a query without a panic.
#![no_main]

use ferret::search::index::{Bounds, Index};
use ferret::search::store::{Mapped, reseal};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let mut bytes = rest.to_vec();
    if mode & 1 == 1 {
        reseal(&mut bytes);
    }
    let mut fp = [0u8; 16];
    if mode & 2 == 2
        && let Some(b) = bytes.get(16..32)
    {
        fp.copy_from_slice(b);
    }
    let Ok(m) = Mapped::from_bytes(bytes.clone(), &fp) else {
        return;
    };
    if mode & 1 == 0 {
        let mut sealed = bytes.clone();
        reseal(&mut sealed);
        assert_eq!(sealed, bytes, "loaded with a checksum that does not hold");
    }
    let _ = m.files();
    for i in 0..m.len().min(256) {
        let _ = m.get(m.key_at(i));
    }
    for id in 0..m.next_id.min(256) {
        let _ = m.filter(id);
    }
    if let Some(index) = Index::from_stored(m, Bounds::default()) {
        let _ = index.stats();
        for pattern in ["foo", "struct file", "hello world", "a.c|xyz"] {
            let q = ferret::search::plan::plan(pattern, false, true, false);
            let _ = index.candidates(&q);
        }
    }
});

//! Per-file Bloom filters of folded 4-grams, for the index's large files.
//!
//! A trigram index cannot tell whether a file's trigrams stand next to each other: on
//! the kernel tree, 197 files hold every trigram of `kmalloc_array_node` and 9 hold the
//! string (the rest have `kmalloc_array` and some `…ay_node`). Those candidates are
//! read in full — 24 MB for that one search — and the large files are where the time
//! goes. So each file of at least [`MIN_LEN`] bytes also gets a Bloom filter of its
//! 4-grams (one bit per byte of content, two bits in one word per 4-gram: about 4% false
//! positives at the tree's 0.1 distinct 4-grams per byte), and a query's 4-gram
//! conditions are checked against the filters of its candidates before any is read. A
//! small file has none: it costs little to read, and its filter would cost more in
//! proportion. (Cursor's 2026 per-posting masks were simulated on this tree first: the
//! position mask saturates in exactly these large files, keeping 151 of 217 candidates;
//! the next-byte mask kept 15, but costs a byte per posting of every file, about 122 MB,
//! and changes every posting list.)
//!
//! A filter only ever answers "maybe" or "no": a 4-gram that was added is always found,
//! so the filters never drop a file with a match, however full they get.

use super::plan::fold;

/// Files this long or longer get a filter.
pub const MIN_LEN: u64 = 32 * 1024;

/// The largest filter, in 64-bit words (1 MiB): a file's stamp sizes its filter before
/// anything is read, and a stamp can say anything (a sparse file of terabytes). Past
/// 8 MiB of content a filter only fills faster, which costs pruning, never a match.
const MAX_WORDS: u64 = 1 << 17;

/// Where a folded 4-gram goes in a filter of `words` 64-bit words: one word (a single
/// memory access per 4-gram, which is what building the filters costs: the bytes of
/// the large files are most of the tree), and two bits in it. Each half is the high
/// bits of the 4-gram times an odd constant. At one bit per byte of content (about ten
/// bits per distinct 4-gram on source code) this rules out some 96% of absent 4-grams.
fn probe(quad: u32, words: u64) -> (usize, u64) {
    let q = u64::from(quad);
    let h = q.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let word = ((u128::from(h) * u128::from(words)) >> 64) as usize;
    let g = q.wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    (word, 1u64 << (g >> 58) | 1u64 << ((g >> 52) & 63))
}

/// Builds a file's filter from its content, given in pieces as it is read.
pub struct Builder {
    words: Vec<u64>,
    /// The last four folded bytes, the newest lowest.
    window: u32,
    /// Bytes seen, up to 3 (then every byte completes a 4-gram).
    seen: u8,
}

impl Builder {
    /// A filter sized for `len` bytes of content, one bit per byte (a file that grows
    /// while it is read just fills its filter more).
    pub fn new(len: u64) -> Builder {
        Builder {
            words: vec![0; len.div_ceil(64).clamp(1, MAX_WORDS) as usize],
            window: 0,
            seen: 0,
        }
    }

    /// Adds the 4-grams of `buf`, which continues what was added before.
    pub fn add(&mut self, buf: &[u8]) {
        let n = self.words.len() as u64;
        for &b in buf {
            self.window = (self.window << 8) | u32::from(fold(b));
            if self.seen < 3 {
                self.seen += 1;
                continue;
            }
            let (w, bits) = probe(self.window, n);
            if let Some(word) = self.words.get_mut(w) {
                *word |= bits;
            }
        }
    }

    /// The filter as stored: its words, little-endian.
    pub fn finish(self) -> Box<[u8]> {
        self.words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }
}

/// The folded 4-gram `quad` as the filters key it.
pub fn key(quad: [u8; 4]) -> u32 {
    u32::from_be_bytes([fold(quad[0]), fold(quad[1]), fold(quad[2]), fold(quad[3])])
}

/// Whether the content `filter` was built from may hold `quad` (false: it does not).
/// A filter that is not whole words (a damaged file's) says "maybe" to everything.
pub fn may_hold(filter: &[u8], quad: u32) -> bool {
    let words = (filter.len() / 8) as u64;
    if words == 0 || !filter.len().is_multiple_of(8) {
        return true;
    }
    let (w, bits) = probe(quad, words);
    filter
        .get(w * 8..w * 8 + 8)
        .and_then(|b| b.try_into().ok())
        .is_none_or(|b| u64::from_le_bytes(b) & bits == bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(n: usize, seed: u64) -> Vec<u8> {
        // Source-like bytes: identifiers and punctuation from a small alphabet.
        let alphabet = b"abcdefghijklmnopqrstuvwxyz_ABCDEFGHIJ(){};,\n 0123456789";
        let mut x = seed;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                alphabet[(x % alphabet.len() as u64) as usize]
            })
            .collect()
    }

    #[test]
    fn every_4gram_added_is_found_whatever_the_pieces() {
        let t = text(100_000, 7);
        for piece in [1usize, 3, 4, 5, 4096, 100_000] {
            let mut b = Builder::new(t.len() as u64);
            for c in t.chunks(piece) {
                b.add(c);
            }
            let f = b.finish();
            for w in t.windows(4) {
                let q = key([w[0], w[1], w[2], w[3]]);
                assert!(may_hold(&f, q), "piece {piece}: {w:?} lost");
                // Folded: the other case is found too.
                let up = key([
                    w[0].to_ascii_uppercase(),
                    w[1].to_ascii_uppercase(),
                    w[2],
                    w[3],
                ]);
                assert!(may_hold(&f, up));
            }
        }
    }

    /// Source-like text: identifiers from a vocabulary of `words`, so that distinct
    /// 4-grams come at the density of real code (about 0.1 per byte), not of noise.
    fn code(n: usize, words: usize, seed: u64) -> Vec<u8> {
        let vocab: Vec<Vec<u8>> = (0..words as u64)
            .map(|i| text(4 + (i % 9) as usize, seed * 1000 + i + 1))
            .map(|w| w.into_iter().filter(u8::is_ascii_alphanumeric).collect())
            .collect();
        let mut out = Vec::with_capacity(n + 16);
        let mut x = seed | 1;
        while out.len() < n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            out.extend_from_slice(&vocab[(x % words as u64) as usize]);
            out.push(if x.is_multiple_of(7) { b'\n' } else { b' ' });
        }
        out
    }

    #[test]
    fn most_absent_4grams_are_ruled_out() {
        let t = code(64 * 1024, 120, 11);
        let mut b = Builder::new(t.len() as u64);
        b.add(&t);
        let f = b.finish();
        let held: std::collections::HashSet<u32> = t
            .windows(4)
            .map(|w| key([w[0], w[1], w[2], w[3]]))
            .collect();
        let density = held.len() as f64 / t.len() as f64;
        assert!((0.05..0.2).contains(&density), "{density}");
        let other = code(200_000, 3000, 99);
        let (mut absent, mut passed) = (0u32, 0u32);
        for w in other.windows(4) {
            let q = key([w[0], w[1], w[2], w[3]]);
            if !held.contains(&q) {
                absent += 1;
                passed += u32::from(may_hold(&f, q));
            }
        }
        assert!(absent > 10_000, "{absent}");
        assert!(
            passed * 10 < absent,
            "{passed} of {absent} absent 4-grams passed"
        );
    }

    #[test]
    fn a_huge_stamp_gets_a_bounded_filter() {
        let mut b = Builder::new(1 << 40);
        b.add(b"kmalloc_array_node");
        let f = b.finish();
        assert_eq!(f.len() as u64, MAX_WORDS * 8);
        assert!(may_hold(&f, key(*b"node")));
    }

    #[test]
    fn an_empty_filter_rules_nothing_out() {
        assert!(may_hold(&[], key(*b"abcd")));
    }
}

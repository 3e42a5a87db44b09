//! A bounded, deterministic collector: keeps the first `needed` units of output in path
//! order, whatever order the walker threads deliver files in.
//!
//! A search may match every line of a 1.5 GB tree; the agent sees the first
//! `offset + max_results` lines in path order and the true totals. Holding everything
//! and sorting at the end would cost memory in proportion to the matches, so files are
//! kept in a sorted map and the tail beyond `needed` units is dropped as soon as it can
//! no longer be shown. Before searching a file, [`TopN::wants`] says whether its output
//! could still be shown; if not, the caller only counts it.

use std::collections::BTreeMap;
use std::path::PathBuf;

/// The order results are shown in: root, then path components.
pub type Key = (usize, PathBuf);

pub struct TopN<V, K: Ord = Key> {
    /// Units of output that can be shown (0: unbounded).
    needed: usize,
    map: BTreeMap<K, (usize, V)>,
    stored: usize,
}

impl<V, K: Ord> TopN<V, K> {
    pub fn new(needed: usize) -> Self {
        TopN {
            needed,
            map: BTreeMap::new(),
            stored: 0,
        }
    }

    /// Whether output of a file at `key` could still be among the first `needed` units.
    pub fn wants(&self, key: &K) -> bool {
        if self.needed == 0 || self.stored < self.needed {
            return true;
        }
        self.map
            .last_key_value()
            .is_some_and(|(last, _)| key < last)
    }

    /// Adds a file's output of `weight` units (lines, or 1 for an entry).
    pub fn insert(&mut self, key: K, weight: usize, value: V) {
        if !self.wants(&key) {
            return;
        }
        self.stored += weight;
        if let Some((old, _)) = self.map.insert(key, (weight, value)) {
            self.stored -= old;
        }
        if self.needed == 0 {
            return;
        }
        // Drop whole files from the end while the rest still fills what can be shown.
        while let Some((_, (w, _))) = self.map.last_key_value() {
            if self.map.len() > 1 && self.stored - w >= self.needed {
                self.stored -= w;
                self.map.pop_last();
            } else {
                break;
            }
        }
    }

    /// The kept files in order.
    pub fn into_sorted(self) -> impl Iterator<Item = (K, V)> {
        self.map.into_iter().map(|(k, (_, v))| (k, v))
    }
}

impl<V> TopN<V, Key> {
    /// [`TopN::wants`] without building the key: most files of a large result are
    /// turned away here, before their path is copied.
    pub fn wants_path(&self, root: usize, rel: &std::path::Path) -> bool {
        if self.needed == 0 || self.stored < self.needed {
            return true;
        }
        self.map
            .last_key_value()
            .is_some_and(|(last, _)| (root, rel) < (last.0, last.1.as_path()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key(s: &str) -> Key {
        (0, PathBuf::from(s))
    }

    proptest! {
        /// Whatever the arrival order, the kept prefix equals the prefix of the fully
        /// sorted list.
        #[test]
        fn keeps_the_sorted_prefix(files in prop::collection::btree_map("[a-d]{1,3}(/[a-d]{1,2})?", 0usize..5, 0..40),
                                   needed in 0usize..12, seed in any::<u64>()) {
            let mut items: Vec<(String, usize)> = files.into_iter().collect();
            let sorted: Vec<(Key, usize)> = {
                let mut v: Vec<(Key, usize)> = items.iter().map(|(p, w)| (key(p), *w)).collect();
                v.sort();
                v
            };
            // shuffle deterministically
            let mut s = seed;
            for i in (1..items.len()).rev() {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                items.swap(i, (s >> 33) as usize % (i + 1));
            }
            let mut top: TopN<usize> = TopN::new(needed);
            for (p, w) in &items {
                top.insert(key(p), *w, *w);
            }
            let kept: Vec<(Key, usize)> = top.into_sorted().collect();
            // the kept list is a prefix of the sorted list...
            prop_assert_eq!(&sorted[..kept.len()], &kept[..]);
            // ...long enough to fill `needed` units
            let units: usize = kept.iter().map(|(_, w)| w).sum();
            let all: usize = sorted.iter().map(|(_, w)| w).sum();
            if needed == 0 { prop_assert_eq!(kept.len(), sorted.len()); }
            else { prop_assert!(units >= needed.min(all), "{} < {}", units, needed.min(all)); }
        }
    }
}

//! A bounded, deterministic collector: keeps the first `needed` units of output in path
//! order, whatever order the walker threads deliver files in.
//!
//! A search may match every line of a 1.5 GB tree; the agent sees the first
//! `offset + max_results` lines in path order and the true totals. Holding everything
//! and sorting at the end would cost memory in proportion to the matches, so files are
//! kept in a sorted map and the tail beyond `needed` units is dropped as soon as it can
//! no longer be shown. Before searching a file, [`TopN::wants`] says whether its output
//! could still be shown; if not, the caller only counts it.

use std::cmp::{Ordering, Reverse};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The order results are shown in: root, then path components.
pub type Key = (usize, PathBuf);

/// Path order by components (what `Path`'s `Ord` gives) computed on the bytes: a
/// separator sorts before every other byte, so `a/x` < `a.b` just as `a` < `a.b`. Exact
/// for the normalised relative paths walks build (no `//`, `.` or trailing `/`), and a
/// byte loop instead of a component parser: a glob returning 30 000 paths compares them
/// half a million times.
pub fn path_order(a: &Path, b: &Path) -> Ordering {
    use std::os::unix::ffi::OsStrExt;
    let (a, b) = (a.as_os_str().as_bytes(), b.as_os_str().as_bytes());
    let same = common_prefix(a, b);
    let rank = |c: u8| if c == b'/' { 0 } else { u16::from(c) + 1 };
    match (a.get(same), b.get(same)) {
        (Some(&x), Some(&y)) => rank(x).cmp(&rank(y)),
        (x, y) => x.is_some().cmp(&y.is_some()),
    }
}

/// The length of the common prefix of `a` and `b`, eight bytes at a time: paths in one
/// tree share long prefixes (`drivers/net/ethernet/…`), and a sort compares them often.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n {
        let (mut x, mut y) = ([0u8; 8], [0u8; 8]);
        x.copy_from_slice(&a[i..i + 8]);
        y.copy_from_slice(&b[i..i + 8]);
        let diff = u64::from_le_bytes(x) ^ u64::from_le_bytes(y);
        if diff != 0 {
            // Little-endian: the first byte in memory is the lowest.
            return i + (diff.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

/// How a collector orders its keys (see [`path_order`]), and what a key weighs.
pub trait Order {
    fn order(&self, other: &Self) -> Ordering;

    /// The bytes of the path in the key: what it holds beyond its slot.
    fn path_bytes(&self) -> usize;
}

/// What a bounded collector may hold of its keys' paths, per unit it must keep: an
/// ordinary path is far shorter, a hostile tree's are 4 KB (20 000 of them held by each
/// of a glob's three collectors: 230 MB). Past it the collector drops its last keys and
/// takes nothing after them, so what it keeps is still the exact first part of the
/// results, only shorter: [`TopN::short`] says so, and the caller says the answer was cut.
pub const PATH_UNIT: usize = 512;

/// The paths' byte bound is never below this: a first page of a few results still
/// holds a thousand of the longest paths, so paging on from it finds the next ones.
pub const PATHS_FLOOR: usize = 4 << 20;

/// What a collector that keeps `needed` units may hold of its keys' paths, admitted with
/// its search.
pub fn paths_bound(needed: usize) -> usize {
    needed.saturating_mul(PATH_UNIT).max(PATHS_FLOOR)
}

/// Past its bound, a metered collector ([`TopN::metered`]) takes more from the shared
/// budget ([`super::cost::SEARCHES`]) while there is room, this much at a time and up to
/// [`PATHS_MAX`] in all: paging a hostile tree's long paths reaches further on an idle
/// server, and concurrent calls share one bound instead of each growing.
const GROW: usize = 1 << 20;

/// The most a metered collector's paths may take.
pub const PATHS_MAX: usize = 32 << 20;

impl Order for Key {
    fn order(&self, other: &Self) -> Ordering {
        self.0
            .cmp(&other.0)
            .then_with(|| path_order(&self.1, &other.1))
    }

    fn path_bytes(&self) -> usize {
        self.1.as_os_str().len()
    }
}

/// Newest first, then path order.
impl Order for (Reverse<SystemTime>, usize, PathBuf) {
    fn order(&self, other: &Self) -> Ordering {
        self.0
            .cmp(&other.0)
            .then_with(|| self.1.cmp(&other.1))
            .then_with(|| path_order(&self.2, &other.2))
    }

    fn path_bytes(&self) -> usize {
        self.2.as_os_str().len()
    }
}

/// A key in the map, ordered by [`Order`].
struct Slot<K>(K);

impl<K: Order> PartialEq for Slot<K> {
    fn eq(&self, other: &Self) -> bool {
        self.0.order(&other.0) == Ordering::Equal
    }
}
impl<K: Order> Eq for Slot<K> {}
impl<K: Order> PartialOrd for Slot<K> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<K: Order> Ord for Slot<K> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.order(&other.0)
    }
}

pub struct TopN<V, K: Order = Key> {
    /// Units of output that can be shown (0: unbounded).
    needed: usize,
    map: BTreeMap<Slot<K>, (usize, V)>,
    /// Unbounded: everything is kept, so it is gathered as it comes and sorted once.
    all: Vec<(K, V)>,
    stored: usize,
    /// The bytes of the kept keys' paths.
    path_bytes: usize,
    /// The first key dropped for the paths' bytes: nothing from it on is taken.
    short: Option<Slot<K>>,
    /// What the paths may take now: the bound, and what was taken beyond it.
    allowance: usize,
    /// Taken from the shared budget beyond the bound (metered collectors only).
    taken: Option<Vec<super::cost::Permit<'static>>>,
    /// Copies of each path the caller keeps (a search's shown path beside the key).
    copies: u64,
}

impl<V, K: Order> TopN<V, K> {
    pub fn new(needed: usize) -> Self {
        TopN {
            needed,
            map: BTreeMap::new(),
            all: Vec::new(),
            stored: 0,
            path_bytes: 0,
            short: None,
            allowance: paths_bound(needed),
            taken: None,
            copies: 1,
        }
    }

    /// A collector that may grow past its paths' bound by taking from the shared
    /// budget while there is room (see [`GROW`]).
    pub fn metered(needed: usize) -> Self {
        TopN {
            taken: Some(Vec::new()),
            ..TopN::new(needed)
        }
    }

    /// [`TopN::metered`], for a caller whose values hold `copies - 1` more copies of
    /// each key's path: growth is taken from the budget that many times over.
    pub fn metered_copies(needed: usize, copies: u64) -> Self {
        TopN {
            copies: copies.max(1),
            ..TopN::metered(needed)
        }
    }

    /// Makes room for the kept paths from the shared budget, if metered and there is
    /// any: false when there is not.
    fn grow(&mut self) -> bool {
        let Some(taken) = self.taken.as_mut() else {
            return false;
        };
        while self.path_bytes > self.allowance {
            if self.allowance >= PATHS_MAX {
                return false;
            }
            match super::cost::SEARCHES.try_take(GROW as u64 * self.copies) {
                Some(p) => {
                    taken.push(p);
                    self.allowance += GROW;
                }
                None => return false,
            }
        }
        true
    }

    /// Whether output of a file at `key` could still be among the first `needed` units.
    pub fn wants(&self, key: &K) -> bool {
        if self
            .short
            .as_ref()
            .is_some_and(|s| key.order(&s.0) != Ordering::Less)
        {
            return false;
        }
        if self.needed == 0 || self.stored < self.needed {
            return true;
        }
        self.map
            .last_key_value()
            .is_some_and(|(last, _)| key.order(&last.0) == Ordering::Less)
    }

    /// How many keys are held now.
    pub fn len(&self) -> usize {
        self.map.len() + self.all.len()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds a file's output of `weight` units (lines, or 1 for an entry).
    pub fn insert(&mut self, key: K, weight: usize, value: V) {
        if self.needed == 0 {
            self.all.push((key, value));
            return;
        }
        if !self.wants(&key) {
            return;
        }
        let bytes = key.path_bytes();
        self.path_bytes += bytes;
        self.stored += weight;
        if let Some((old, _)) = self.map.insert(Slot(key), (weight, value)) {
            // The map keeps the key it had (of the same path).
            self.stored -= old;
            self.path_bytes -= bytes;
        }
        // Drop whole files from the end while the rest still fills what can be shown.
        while let Some((_, (w, _))) = self.map.last_key_value() {
            if self.map.len() > 1 && self.stored - w >= self.needed {
                self.stored -= w;
                if let Some((k, _)) = self.map.pop_last() {
                    self.path_bytes -= k.0.path_bytes();
                }
            } else {
                break;
            }
        }
        // Past the paths' byte bound: drop from the end regardless, and take nothing
        // from the first dropped key on (see [`PATH_UNIT`]).
        while self.path_bytes > self.allowance && !self.grow() && self.map.len() > 1 {
            let Some((k, (w, _))) = self.map.pop_last() else {
                break;
            };
            self.stored -= w;
            self.path_bytes -= k.0.path_bytes();
            self.short = Some(k);
        }
    }

    /// Takes in another collector's keys (a walker thread's own), and its mark when it
    /// dropped keys for their paths' bytes: keys from that one on are dropped here too,
    /// or this one would keep later keys without an earlier one.
    pub fn merge(&mut self, other: TopN<V, K>) {
        let mark = other.short.map(|s| s.0);
        for (k, v) in other.map.into_iter().map(|(k, (w, v))| (k.0, (w, v))) {
            self.insert(k, v.0, v.1);
        }
        for (k, v) in other.all {
            self.insert(k, 1, v);
        }
        let Some(mark) = mark else { return };
        while self
            .map
            .last_key_value()
            .is_some_and(|(last, _)| last.0.order(&mark) != Ordering::Less)
        {
            if let Some((k, (w, _))) = self.map.pop_last() {
                self.stored -= w;
                self.path_bytes -= k.0.path_bytes();
            }
        }
        if self
            .short
            .as_ref()
            .is_none_or(|s| mark.order(&s.0) == Ordering::Less)
        {
            self.short = Some(Slot(mark));
        }
    }

    /// Whether keys the caller could have shown were dropped for the bytes of their
    /// paths: what is kept is then the first part of the results, not all it asked for.
    pub fn short(&self) -> bool {
        self.short.is_some()
    }

    /// The kept files in order (of a key given twice, the later value).
    pub fn into_sorted(self) -> impl Iterator<Item = (K, V)> {
        let mut all = self.all;
        // Stable: of equal keys the one inserted last stays last, and is the one kept.
        all.sort_by(|a, b| a.0.order(&b.0));
        let mut all = all.into_iter().peekable();
        let unbounded = std::iter::from_fn(move || {
            loop {
                let item = all.next()?;
                match all.peek() {
                    Some(next) if next.0.order(&item.0) == Ordering::Equal => continue,
                    _ => return Some(item),
                }
            }
        });
        self.map
            .into_iter()
            .map(|(k, (_, v))| (k.0, v))
            .chain(unbounded)
    }
}

impl<V> TopN<V, Key> {
    /// [`TopN::wants`] without building the key: most files of a large result are
    /// turned away here, before their path is copied.
    pub fn wants_path(&self, root: usize, rel: &Path) -> bool {
        let before =
            |last: &Key| root.cmp(&last.0).then_with(|| path_order(rel, &last.1)) == Ordering::Less;
        if self.short.as_ref().is_some_and(|s| !before(&s.0)) {
            return false;
        }
        if self.needed == 0 || self.stored < self.needed {
            return true;
        }
        self.map
            .last_key_value()
            .is_some_and(|(last, _)| before(&last.0))
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
        /// The byte order is the component order on the paths walks build.
        #[test]
        fn path_order_is_component_order(a in "[a./_-]{1,3}(/[a./_-]{1,3}){0,3}",
                                         b in "[a./_-]{1,3}(/[a./_-]{1,3}){0,3}") {
            // Only normalised paths: no empty, `.` or `..` components.
            let ok = |p: &str| p.split('/').all(|c| !c.is_empty() && c != "." && c != "..");
            prop_assume!(ok(&a) && ok(&b));
            let (pa, pb) = (Path::new(&a), Path::new(&b));
            prop_assert_eq!(path_order(pa, pb), pa.cmp(pb), "{} vs {}", a, b);
        }

        /// Long shared prefixes, compared eight bytes at a time, order as components do.
        #[test]
        fn path_order_is_component_order_past_long_prefixes(
            pre in "[a-c]{1,12}(/[a-c]{1,12}){0,3}",
            a in "[a./_-]{1,3}(/[a./_-]{1,3}){0,2}",
            b in "[a./_-]{1,3}(/[a./_-]{1,3}){0,2}") {
            let ok = |p: &str| p.split('/').all(|c| !c.is_empty() && c != "." && c != "..");
            prop_assume!(ok(&a) && ok(&b));
            let (a, b) = (format!("{pre}/{a}"), format!("{pre}/{b}"));
            let (pa, pb) = (Path::new(&a), Path::new(&b));
            prop_assert_eq!(path_order(pa, pb), pa.cmp(pb), "{} vs {}", a, b);
        }

        #[test]
        fn common_prefix_is_the_byte_by_byte_one(a in prop::collection::vec(0u8..3, 0..40),
                                                 b in prop::collection::vec(0u8..3, 0..40)) {
            let naive = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
            prop_assert_eq!(common_prefix(&a, &b), naive);
        }

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

        /// Long paths: what is kept is still a prefix of the sorted list, its paths stay
        /// within the byte bound (one key over at most), and only a collector that says
        /// it is short keeps fewer units than it needs.
        #[test]
        fn long_paths_keep_a_shorter_prefix_and_say_so(
            files in prop::collection::btree_map("[a-d]{1,3}", (0usize..5, 0usize..400_000), 0..40),
            needed in 1usize..12, seed in any::<u64>()) {
            let mut items: Vec<(String, usize)> = files
                .into_iter()
                .map(|(p, (w, pad))| (format!("{p}/{}", "x".repeat(pad)), w))
                .collect();
            let mut sorted: Vec<(Key, usize)> = items.iter().map(|(p, w)| (key(p), *w)).collect();
            sorted.sort_by(|a, b| a.0.order(&b.0));
            let mut s = seed;
            for i in (1..items.len()).rev() {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                items.swap(i, (s >> 33) as usize % (i + 1));
            }
            let mut top: TopN<usize> = TopN::new(needed);
            let mut longest = 0;
            for (p, w) in &items {
                longest = longest.max(p.len());
                top.insert(key(p), *w, *w);
            }
            let short = top.short();
            let kept: Vec<(Key, usize)> = top.into_sorted().collect();
            prop_assert_eq!(&sorted[..kept.len()], &kept[..]);
            let bytes: usize = kept.iter().map(|(k, _)| k.1.as_os_str().len()).sum();
            prop_assert!(kept.len() <= 1 || bytes <= paths_bound(needed) + longest);
            let units: usize = kept.iter().map(|(_, w)| w).sum();
            let all: usize = sorted.iter().map(|(_, w)| w).sum();
            if !short { prop_assert!(units >= needed.min(all), "{} < {}", units, needed.min(all)); }
        }
    }
}

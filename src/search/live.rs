//! The live index: the trigram [`Index`] kept true to the tree by a file watcher, so a
//! search can skip the walk and open only the files that may match.
//!
//! **When the walk is skipped.** The index's list of files is what a walk found. While
//! the watcher has reported nothing that could change what a walk finds (a name created,
//! deleted or renamed, a directory's permissions, an ignore file, lost events), the list
//! is *fresh* and a search takes its files from it; a listed file written since (the
//! watcher says which) is read, like a file the index does not know. Otherwise the next
//! search first refreshes the list — walking again only the subtrees of the directories
//! where names changed (everything after lost events), re-reading only files whose stamp
//! changed — and then answers from it. Without a watcher (another platform, the watch limit
//! reached, `/proc` missing) searches walk as a scan does and the index only spares them
//! reading files whose stamp proves their content is the one indexed: slower, as exact.
//!
//! **Never stale.** The kernel queues a watch event before the write that caused it
//! returns, and every search drains the queue before it looks at the list; so a search
//! issued after another process's write sees it, however soon; ferret's own writes are
//! seen the same way (they are made in watched directories, through handles). A
//! directory's watch is added before the walk reads it, so a name made in it later is
//! reported. An overflowing queue makes the next refresh walk everything.
//!
//! **The watcher** is Linux's inotify, used directly (the `inotify` crate): one watch per
//! directory the index walk entered — so gitignored, skipped and denied trees such as
//! `target/` cost no watch — added through a handle opened beneath the root (the
//! directory's `/proc/self/fd` name), never by a path a walker built. `notify` was not
//! used: its inotify backend also watches every open, so a search of the kernel tree
//! would queue 78 000 events of its own and overflow the queue, and it watches
//! directories a walk never enters.
//!
//! On macOS (and on Linux under `FERRET_PORTABLE=1`, so CI runs the same logic) the
//! watcher is `notify`'s (FSEvents there, its inotify backend here): one recursive watch
//! per root and a cookie directory beside the stored index, in one stream. FSEvents
//! delivers after the write returned, so each search's drain first writes a cookie and
//! waits for its event (a flush barrier, [`crate::platform::notify_watch`]); a barrier
//! that times out, dropped events or a notify error count as lost events (a full
//! stamped rescan) or blind the index (searches walk), never a stale answer. Without a
//! state directory for the cookies, the polling watcher stands in.
//!
//! Not covered: ignore files above a root (read by the walk, not watched), and
//! `.git/info/exclude` (inside `.git`, which walks skip); a change to them is seen at
//! the next restart.
//!
//! [`Index`]: super::index::Index

use super::collect::Key;
use super::index::{Bounds, Candidates, Files, Index, Listed, Paths, Stats};
use super::plan::Query;
use super::store::{Fingerprint, Mapped, Unusable};
use super::{Base, Found, Go, SearchEnv, WalkOptions};
use crate::error::{ToolResult, lock};
use crate::workspace::strip;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Past this many written files the list is refreshed rather than the set grown.
const MAX_DIRTY: usize = 10_000;

/// Past this many directories with changed names the whole tree is walked again.
const MAX_DIRTY_DIRS: usize = 256;

#[derive(Default)]
struct State {
    /// The list is what a walk would find now: the last refresh ended with nothing
    /// having made it stale since it began.
    fresh: bool,
    /// Why the watcher cannot vouch for the list, when it cannot.
    blind: Option<String>,
    /// Listed files written since the last refresh began: read by every search.
    dirty: HashSet<Key>,
    /// Directories in which names changed since the last refresh began: the next one
    /// walks only their subtrees ...
    dirty_dirs: Vec<Key>,
    /// ... unless something calls for walking everything (lost events, too many).
    full: bool,
    /// Refreshes done (for status and tests); events that made the list stale (also
    /// the epoch a refresh compares to know whether one came while it walked).
    refreshes: u64,
    stale_events: u64,
}

/// The index and what keeps it true.
pub struct Live {
    index: Index,
    state: Mutex<State>,
    /// One refresh at a time; a search that finds the list stale waits for it.
    refreshing: Mutex<()>,
    /// What the walks that made the list warned of (ignore files not used, paths past
    /// the system's limit): said again with every answer from the list, as a walk would.
    walk_warnings: Mutex<Vec<String>>,
    watch: Option<watch::Watcher>,
    /// Searches answered from the list without a walk.
    listed_searches: std::sync::atomic::AtomicU64,
    /// Where the index is kept on disk, if anywhere: once refreshes have read enough
    /// files since the last save, it is written again in the background — the lists
    /// in memory merged into the file, the bits of files gone dropped — so memory
    /// stays bounded however long the server runs.
    persist: Option<Persist>,
    /// Itself, for that background save (set once the first refresh is done).
    me: std::sync::OnceLock<std::sync::Weak<Live>>,
    saving: AtomicBool,
}

/// Files read (or gone) since the last save past which the index is saved again: a
/// twentieth of the list, and at least this many.
const RESAVE_FILES: u64 = 1_000;

/// What one search may rely on.
pub struct View {
    pub files: Arc<Files>,
    /// The list is fresh: the walk may be skipped.
    pub listed: bool,
    pub dirty: HashSet<Key>,
}

/// What the index holds and whether it is vouched for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub stats: Stats,
    pub fresh: bool,
    /// Why searches walk the tree, when they do.
    pub blind: Option<String>,
    pub refreshes: u64,
    pub stale_events: u64,
    pub orphans: u64,
    /// Bytes of the index file the lists are mapped from, once saved.
    pub disk_bytes: Option<u64>,
    /// Searches answered from the list, without a walk.
    pub listed_searches: u64,
}

/// Where the index is kept on disk, and the rules it must have been built under.
#[derive(Debug, Clone)]
pub struct Persist {
    pub path: PathBuf,
    pub fingerprint: Fingerprint,
}

impl Persist {
    /// The stored index, if there is one made under the same rules and it reads whole.
    /// A damaged one (a checksum mismatch, bounds, a list that does not decode) is
    /// discarded: the caller builds anew, and a note beside it says why, for
    /// `ferret index status` ([`Persist::discarded`]).
    ///
    /// `write`: whether this caller writes the index (a build); one that only reads (a
    /// search's command) discards nothing and removes no note.
    fn load(&self, bounds: Bounds, write: bool) -> Option<Index> {
        match Mapped::open(&self.path, &self.fingerprint) {
            Ok(m) => {
                let index = Index::from_stored(m, bounds);
                if index.is_none() {
                    if write {
                        self.discard("the paths list does not decode");
                    }
                } else if write {
                    // A damaged file is removed when discarded: one that loads whole
                    // now is the rebuilt one, and it has been reported.
                    let _ = std::fs::remove_file(self.note());
                }
                index
            }
            Err(Unusable::Missing) => None,
            Err(Unusable::Damaged(why)) => {
                if write {
                    self.discard(&why);
                } else {
                    tracing::debug!("index: the file on disk is damaged ({why}); not used");
                }
                None
            }
            Err(e) => {
                tracing::debug!("index: not using the one on disk ({e}); building anew");
                None
            }
        }
    }

    fn note(&self) -> PathBuf {
        let mut name = self.path.file_name().unwrap_or_default().to_os_string();
        name.push(".discarded");
        self.path.with_file_name(name)
    }

    /// Drops a damaged index file and leaves a note saying why.
    fn discard(&self, why: &str) {
        tracing::warn!("index: the file on disk is damaged ({why}); discarded, building anew");
        let _ = std::fs::remove_file(&self.path);
        // Whatever sits at the note's path (a FIFO would block an ordinary open for
        // writing) is removed first; the note is then created new, never followed.
        let note = self.note();
        let _ = std::fs::remove_file(&note);
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW);
        }
        if let Ok(mut f) = opts.open(&note) {
            use std::io::Write;
            let _ = f.write_all(why.as_bytes());
        }
    }

    /// Why the last index file was discarded, if one was (the note stays until the
    /// rebuilt file is next loaded).
    pub fn discarded(&self) -> Option<String> {
        // Opened without blocking or following, and read only if a regular file: a
        // FIFO or device at the note's path must not hang `index status`.
        let mut opts = std::fs::OpenOptions::new();
        opts.read(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW);
        }
        let f = opts.open(self.note()).ok()?;
        if !f.metadata().ok()?.is_file() {
            return Some("the discarded-index note is not a regular file".into());
        }
        let mut b = Vec::new();
        use std::io::Read;
        f.take(512).read_to_end(&mut b).ok()?;
        Some(String::from_utf8_lossy(&b).into_owned())
    }
}

/// The tops of the changed subtrees (a directory inside another is walked with it).
fn subtree_bases(env: &SearchEnv, dirs: &[Key]) -> Vec<Base> {
    let mut dirs: Vec<&Key> = dirs.iter().collect();
    dirs.sort();
    let mut tops: Vec<&Key> = Vec::new();
    for d in dirs {
        if !tops.iter().any(|t| t.0 == d.0 && d.1.starts_with(&t.1)) {
            tops.push(d);
        }
    }
    tops.into_iter()
        .map(|(root, rel)| Base {
            wp: env.workspace.root_path(*root).join(rel),
            is_file: false,
        })
        .collect()
}

fn all_bases(env: &SearchEnv) -> Vec<Base> {
    let ws = env.workspace;
    (0..ws.roots().len())
        .map(|i| Base {
            wp: ws.root_path(i),
            is_file: false,
        })
        .collect()
}

impl Live {
    /// Builds the index of every root of `env`'s workspace, watching the tree when
    /// `watch` is set and the platform allows.
    pub fn start(
        env: &SearchEnv,
        watch: bool,
        bounds: Bounds,
        persist: Option<&Persist>,
    ) -> ToolResult<(Arc<Live>, Stats)> {
        let index = persist
            .and_then(|p| p.load(bounds, true))
            .unwrap_or_else(|| Index::bounded(bounds));
        let (watcher, blind) = if !watch {
            (None, Some("the watcher is off".to_string()))
        } else {
            match watch::Watcher::new(&env.workspace.canonical_roots(), persist) {
                Ok(w) => (Some(w), None),
                Err(why) => (None, Some(why)),
            }
        };
        let live = Live::new(index, watcher, blind, persist.cloned());
        if let Some(w) = &live.watch {
            w.spawn_reader(Arc::downgrade(&live));
        }
        live.refresh(env)?;
        // The first save is the caller's (it says when); later ones happen by themselves.
        let _ = live.me.set(Arc::downgrade(&live));
        let stats = live.index.stats();
        Ok((live, stats))
    }

    fn new(
        index: Index,
        watch: Option<watch::Watcher>,
        blind: Option<String>,
        persist: Option<Persist>,
    ) -> Arc<Live> {
        Arc::new(Live {
            index,
            state: Mutex::new(State {
                blind,
                full: true,
                ..State::default()
            }),
            refreshing: Mutex::new(()),
            walk_warnings: Mutex::new(Vec::new()),
            watch,
            listed_searches: Default::default(),
            persist,
            me: Default::default(),
            saving: AtomicBool::new(false),
        })
    }

    /// The index stored on disk, for one command: no watcher and no walk first —
    /// searches walk as a scan does and skip reading the files whose stamp proves their
    /// content is the one indexed. None when there is no usable stored index.
    pub fn stored(persist: &Persist, bounds: Bounds) -> Option<Arc<Live>> {
        // A search only reads: a damaged file is not used, and left (with no note) for
        // the next `ferret index` or server to discard and rebuild.
        let index = persist.load(bounds, false)?;
        Some(Live::new(
            index,
            None,
            Some("a command does not watch the tree".to_string()),
            None,
        ))
    }

    /// Writes the index to disk if it holds anything the stored file does not, and
    /// maps it (the lists in memory are let go). Refreshes wait meanwhile; searches
    /// go on. The bytes written, None when nothing needed writing.
    pub fn save(&self, persist: &Persist) -> std::io::Result<Option<u64>> {
        let _one = lock(&self.refreshing);
        if !self.index.unsaved() {
            return Ok(None);
        }
        if let Some(dir) = persist.path.parent() {
            // A real directory of ferret's (a link there would put the index elsewhere).
            crate::history::safe::ensure_dir(dir)?;
        }
        self.index
            .save(&persist.path, &persist.fingerprint)
            .map(Some)
    }

    /// Walks the tree again and makes the list what it found. The list is declared
    /// fresh only if nothing made it stale while the walk ran; until then searches do
    /// not rely on it (they wait here for this refresh, or walk).
    fn refresh(&self, env: &SearchEnv) -> ToolResult<()> {
        let _one = lock(&self.refreshing);
        let (epoch, scope) = {
            let mut st = lock(&self.state);
            if st.fresh {
                return Ok(()); // another search refreshed it while this one waited
            }
            st.refreshes += 1;
            let dirs = std::mem::take(&mut st.dirty_dirs);
            let scope = (!std::mem::take(&mut st.full)).then_some(dirs);
            // Writes seen so far are read again by this walk where it walks; later ones,
            // and those outside the subtrees a partial refresh walks, stay marked (a file
            // rewritten in `a/` while names changed in `b/` keeps being read).
            match &scope {
                None => st.dirty.clear(),
                Some(dirs) => st.dirty.retain(|(root, rel)| {
                    !dirs.iter().any(|(r, d)| r == root && rel.starts_with(d))
                }),
            }
            (st.stale_events, scope)
        };
        let bases = match &scope {
            None => all_bases(env),
            Some(dirs) => subtree_bases(env, dirs),
        };
        let warned_before = env.control.warnings.list().len();
        let result = self
            .index
            .refresh(env, &bases, scope.is_some(), &|root, rel| {
                if let Some(w) = &self.watch
                    && let Err(why) = w.add(env.workspace, root, rel)
                {
                    self.blind(why);
                }
            });
        if let Some(w) = &self.watch {
            w.drain(self);
        }
        if result.is_ok() {
            let new: Vec<String> = env
                .control
                .warnings
                .list()
                .into_iter()
                .skip(warned_before)
                .collect();
            let mut kept = lock(&self.walk_warnings);
            if scope.is_none() {
                kept.clear();
            }
            for w in new {
                if kept.len() < crate::control::Warnings::MAX && !kept.contains(&w) {
                    kept.push(w);
                }
            }
        }
        let mut st = lock(&self.state);
        match &result {
            Ok(_) if st.stale_events == epoch => st.fresh = true,
            Ok(_) => {}
            // The subtrees may be half walked: the next refresh walks everything.
            Err(_) => st.full = true,
        }
        drop(st);
        if result.is_ok() {
            self.save_when_due();
        }
        result.map(|_| ())
    }

    /// Saves the index again in the background once refreshes have read enough files
    /// since the last save (see [`RESAVE_FILES`]).
    fn save_when_due(&self) {
        let Some(persist) = &self.persist else {
            return;
        };
        let listed = self.index.files().list.len() as u64;
        if self.index.unsaved_files() < (listed / 20).max(RESAVE_FILES) {
            return;
        }
        let Some(me) = self.me.get().and_then(std::sync::Weak::upgrade) else {
            return;
        };
        if self.saving.swap(true, Ordering::SeqCst) {
            return;
        }
        let persist = persist.clone();
        let spawned = std::thread::Builder::new()
            .name("ferret-index-save".into())
            .spawn(move || {
                match me.save(&persist) {
                    Ok(Some(n)) => tracing::debug!("index: saved again ({} MB)", n / 1_000_000),
                    Ok(None) => {}
                    Err(e) => tracing::warn!("index: not saved again ({e}); it stays in memory"),
                }
                me.saving.store(false, Ordering::SeqCst);
            });
        if spawned.is_err() {
            self.saving.store(false, Ordering::SeqCst);
        }
    }

    /// What a search may rely on now: pending events applied, the list refreshed when
    /// events made it stale.
    pub fn view(&self, env: &SearchEnv) -> ToolResult<View> {
        if let Some(w) = &self.watch {
            w.drain(self);
        }
        let stale = {
            let st = lock(&self.state);
            st.blind.is_none() && !st.fresh
        };
        if stale {
            self.refresh(env)?;
        }
        let st = lock(&self.state);
        let listed = st.blind.is_none() && st.fresh;
        if listed {
            let said = env.control.warnings.list();
            for w in lock(&self.walk_warnings).iter() {
                if !said.contains(w) {
                    env.control.warn(w.clone());
                }
            }
        }
        Ok(View {
            files: self.index.files(),
            listed,
            dirty: if listed {
                st.dirty.clone()
            } else {
                HashSet::new()
            },
        })
    }

    /// A search was answered from the list.
    pub fn count_listed(&self) {
        self.listed_searches.fetch_add(1, Ordering::Relaxed);
    }

    pub fn candidates(&self, q: &Query) -> Candidates {
        self.index.candidates(q)
    }

    /// Something a walk could find differently happened, anywhere.
    fn stale(&self) {
        let mut st = lock(&self.state);
        st.fresh = false;
        st.full = true;
        st.stale_events += 1;
    }

    /// Names changed in this directory (or an ignore file in it did): what a walk finds
    /// below it may differ.
    fn changed_in(&self, dir: Key) {
        let mut st = lock(&self.state);
        st.fresh = false;
        st.stale_events += 1;
        if st.dirty_dirs.len() >= MAX_DIRTY_DIRS {
            st.full = true;
        } else if !st.dirty_dirs.contains(&dir) {
            st.dirty_dirs.push(dir);
        }
    }

    /// Events were lost (a queue overflow): nothing the list says can be trusted until
    /// it is refreshed. Public so tests can simulate an overflow.
    pub fn lost_events(&self) {
        self.stale();
    }

    fn written(&self, key: Key) {
        let mut st = lock(&self.state);
        if st.dirty.len() >= MAX_DIRTY {
            drop(st);
            self.stale();
        } else {
            st.dirty.insert(key);
        }
    }

    /// The watcher can no longer vouch for the list: searches walk from now on.
    fn blind(&self, why: String) {
        let mut st = lock(&self.state);
        if st.blind.is_none() {
            tracing::warn!(
                "index: {why}; searches walk the tree and use the index only to skip reading"
            );
            st.blind = Some(why);
        }
    }

    pub fn status(&self) -> Status {
        let st = lock(&self.state);
        Status {
            stats: self.index.stats(),
            fresh: st.fresh && st.blind.is_none(),
            blind: st.blind.clone(),
            refreshes: st.refreshes,
            stale_events: st.stale_events,
            orphans: self.index.orphans(),
            disk_bytes: self.index.stored_bytes(),
            listed_searches: self.listed_searches.load(Ordering::Relaxed),
        }
    }
}

/// Visits the files of `bases` from the list instead of walking, when the list can say
/// exactly what the walk would find: `None` when it cannot (a base the index walk did
/// not enter, a hidden base without `include_hidden`, a positive glob naming a
/// directory — rg enters it whatever ignore files say).
pub fn walk_listed<'s, M, V>(
    env: &SearchEnv,
    view: &View,
    bases: &[Base],
    opts: &WalkOptions,
    mk: M,
) -> Option<ToolResult<()>>
where
    M: Fn() -> V + Sync,
    V: FnMut(&Found) -> Go + Send + 's,
{
    // The list holds what ignore files leave, files only, and knows no file types: walk.
    if !view.listed || opts.no_ignore || !opts.types.is_empty() || opts.dirs {
        return None;
    }
    let files = &view.files;
    // A positive glob admits matching files whatever ignore files or hidden names say
    // (rg's -g): then the ignored files of entered directories are candidates too.
    let positive = opts.globs.iter().any(|g| !g.starts_with('!'));
    let mut plans = Vec::new();
    for base in bases {
        let (root, rel) = (base.wp.root_index(), base.wp.rel());
        if !base.is_file && !files.entered(root, rel, true) {
            return None;
        }
        let overrides = match super::overrides(&opts.globs) {
            Ok(o) => o,
            Err(e) => return Some(Err(e)),
        };
        // A directory a positive glob names is entered whatever its ignore rules say;
        // the list may not hold what is below it: walk instead.
        if positive && !base.is_file {
            let named = files.dirs_below(root, rel).any(|d| {
                strip(d, rel).is_some_and(|r| {
                    !r.as_os_str().is_empty() && overrides.matched(r, true).is_whitelist()
                })
            });
            if named {
                return None;
            }
        }
        plans.push((base, overrides));
    }
    let hidden = |p: &Path| {
        p.components()
            .any(|c| c.as_os_str().as_encoded_bytes().first() == Some(&b'.'))
    };
    // A walk from a hidden directory skips hidden names only below it; the list's
    // `visible` says what a walk from the root takes.
    if !opts.include_hidden && bases.iter().any(|b| !b.is_file && hidden(b.wp.rel())) {
        return None;
    }
    // The slice of the list each base covers, cut in chunks the threads take in turn;
    // each thread filters its chunks (hidden, globs) itself.
    const CHUNK: usize = 512;
    // (entries, the table of their paths, the first's index there, base, globs)
    type Chunk<'a> = (
        &'a [Listed],
        &'a Paths,
        usize,
        &'a Path,
        &'a ignore::overrides::Override,
    );
    let mut chunks: Vec<Chunk> = Vec::new();
    for (base, ov) in &plans {
        if base.is_file {
            let name = PathBuf::from(base.wp.rel().file_name().unwrap_or_default());
            if !mk()(&Found {
                root: base.wp.root_index(),
                rel: base.wp.rel(),
                rel_to_base: &name,
                is_dir: false,
                listed: None,
            }) {
                return Some(env.control.check());
            }
            continue;
        }
        let brel = base.wp.rel();
        let root = base.wp.root_index();
        let mut parts = vec![files.below(root, brel)];
        if positive {
            parts.push(files.ignored_below(root, brel));
        }
        for (entries, paths, first) in parts {
            for (n, c) in entries.chunks(CHUNK).enumerate() {
                chunks.push((c, paths, first + n * CHUNK, brel, ov));
            }
        }
    }
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let take = |rel: &Path, l: &Listed, r: &Path, brel: &Path, ov: &ignore::overrides::Override| {
        // Globs are in NFC (see `overrides`): so is the path they are matched to.
        let r = &*crate::workspace::patterns::nfc_cow(r);
        if positive {
            // The file must match; its directory must be one the walk enters (no
            // directory is named by a positive glob: checked above).
            if !ov.matched(r, false).is_whitelist() {
                return false;
            }
            let parent = rel.parent().unwrap_or(Path::new(""));
            if parent != brel && !files.entered(l.root, parent, opts.include_hidden) {
                return false;
            }
            let dir_out = r
                .ancestors()
                .skip(1)
                .filter(|a| !a.as_os_str().is_empty())
                .any(|a| ov.matched(a, true).is_ignore());
            return !dir_out;
        }
        if !opts.include_hidden && !l.visible {
            return false;
        }
        if !ov.is_empty() {
            let dir_out = r
                .ancestors()
                .skip(1)
                .filter(|a| !a.as_os_str().is_empty())
                .any(|a| ov.matched(a, true).is_ignore());
            if dir_out || ov.matched(r, false).is_ignore() {
                return false;
            }
        }
        true
    };
    std::thread::scope(|s| {
        for _ in 0..super::threads() {
            s.spawn(|| {
                let mut visit = mk();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(chunk, paths, first, brel, ov)) = chunks.get(i) else {
                        return;
                    };
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    if env.control.stopped() {
                        stop.store(true, Ordering::Relaxed);
                        return;
                    }
                    for (n, l) in chunk.iter().enumerate() {
                        let rel = paths.get(first + n);
                        let r = if brel.as_os_str().is_empty() {
                            rel
                        } else {
                            match crate::workspace::strip(rel, brel) {
                                Some(r) => r,
                                None => continue,
                            }
                        };
                        if !take(rel, l, r, brel, ov) {
                            continue;
                        }
                        let known = view.dirty.is_empty()
                            || !view.dirty.contains(&(l.root, rel.to_path_buf()));
                        let found = Found {
                            root: l.root,
                            rel,
                            rel_to_base: r,
                            is_dir: false,
                            listed: known.then_some(l),
                        };
                        if !visit(&found) {
                            stop.store(true, Ordering::Relaxed);
                            return;
                        }
                    }
                }
            });
        }
    });
    Some(env.control.check())
}

/// The live index's side of the platform's watcher ([`crate::platform::DirWatch`]):
/// its events are hints, each turned into a stale mark for what it names.
mod watch {
    use super::{Live, Persist};
    use crate::platform::{DirWatch, WatchEvent};
    use crate::workspace::Workspace;
    use std::os::fd::AsFd;
    use std::path::{Path, PathBuf};
    use std::sync::{Arc, Weak};

    pub struct Watcher(Arc<dyn DirWatch>);

    impl Watcher {
        /// The platform's watcher for `roots` (canonical, from the configuration). Its
        /// flush cookies, where it uses them, go in `watch/` beside the stored index: a
        /// real directory of ferret's in the state directory, outside every root.
        pub fn new(roots: &[PathBuf], persist: Option<&Persist>) -> Result<Watcher, String> {
            let cookies = persist
                .and_then(|p| p.path.parent())
                .map(|d| d.join("watch"))
                .filter(|d| {
                    d.parent()
                        .is_some_and(|p| crate::history::safe::ensure_dir(p).is_ok())
                        && crate::history::safe::ensure_dir(d).is_ok()
                });
            crate::platform::watcher(roots, cookies.as_deref()).map(|w| Watcher(Arc::from(w)))
        }

        /// Watches a directory the index walk entered, through a handle opened beneath
        /// its root (no symlink on the way), never by a path a walker built.
        pub fn add(&self, ws: &Workspace, root: usize, rel: &Path) -> Result<(), String> {
            let at = if rel.as_os_str().is_empty() {
                Path::new(".")
            } else {
                rel
            };
            // A directory gone or swapped since the walk listed it: its parent's watch
            // reports that, and the list is refreshed.
            let Ok(dir) = ws.open_found(root, at, true) else {
                return Ok(());
            };
            self.0.add(dir.as_fd(), (root, rel.to_path_buf()))
        }

        /// Applies every event queued so far.
        pub fn drain(&self, live: &Live) {
            if let Err(e) = self.0.drain(&mut |ev| apply(live, ev)) {
                live.blind(e);
            }
        }

        /// Drains the queue in the background too, so it does not overflow between
        /// searches; ends when the index is dropped.
        pub fn spawn_reader(&self, live: Weak<Live>) {
            let watch = Arc::clone(&self.0);
            let spawned = std::thread::Builder::new()
                .name("ferret-watch".into())
                .spawn(move || {
                    loop {
                        if live.strong_count() == 0 {
                            return;
                        }
                        watch.wait(std::time::Duration::from_millis(500));
                        let Some(l) = live.upgrade() else { return };
                        if let Some(w) = &l.watch
                            && let Err(e) = w.0.drain_queued(&mut |ev| apply(&l, ev))
                        {
                            l.blind(e);
                        }
                    }
                });
            if let Err(e) = spawned {
                tracing::warn!("index: no background watcher thread ({e}); searches drain events");
            }
        }
    }

    fn apply(live: &Live, ev: WatchEvent) {
        match ev {
            WatchEvent::Lost => live.lost_events(),
            // The directory itself: moved, deleted, or its permissions changed (its
            // parent reports the first two; a walk from here cannot say).
            WatchEvent::Itself(_) => live.stale(),
            // A name changed here, or a subdirectory's permissions: the subtree is
            // walked again.
            WatchEvent::Names(dir, _) => live.changed_in(dir),
            // What an ignore file here lets in changed: the subtree is walked again.
            WatchEvent::Written(dir, name) if name == ".gitignore" || name == ".ignore" => {
                live.changed_in(dir)
            }
            WatchEvent::Written((root, dir), name) => live.written((root, dir.join(name))),
        }
    }
}

//! The `notify`-crate watcher with a flush barrier: macOS's FSEvents, and under
//! `FERRET_PORTABLE=1` on Linux the same code over notify's inotify backend (so the
//! macOS logic runs in CI).
//!
//! **One stream.** Each root (its canonical path, from the configuration, never from an
//! agent) is watched recursively, and a ferret-owned cookie directory in the state
//! directory is watched in the same watcher: one FSEvents stream, or one inotify
//! descriptor, so their events come in the order they happened.
//!
//! **The barrier.** FSEvents hands events over from a thread of its own, after the write
//! that caused them has returned: a search that only took what had arrived could answer
//! from a stale list. So [`DirWatch::drain`] first creates a cookie file (a name never
//! used before) in the cookie directory and waits, at most [`BARRIER`], for its event:
//! every event queued before it has then been delivered, and a change made before the
//! search began is among them. A cookie that does not come back in time, a notify error,
//! or a rescan flag (FSEvents' MustScanSubDirs, kernel or user dropped; inotify's
//! overflow), or an event on a root itself, become [`WatchEvent::Lost`]: a full stamped
//! rescan, never a stale answer. Three barriers in a row that time out, or a notify
//! error (a watch limit reached while a new directory was being added), make the watcher
//! give up: searches then walk.
//!
//! **Hints only.** Events name paths; each becomes a hint about the directory holding
//! it, relative to its root (its subtree walked again, or the file read again), and only
//! for a directory the index walk entered (an ignored `target/` costs nothing). A path
//! under no root and outside the cookie directory cannot be placed (a spelling the
//! volume folds differently): it counts as lost events. No path from an event is ever
//! opened to read or write; the walk that follows opens beneath the root's handle as
//! always, so a link swapped into the tree can at worst cause a rescan.

use super::{DirWatch, WatchEvent, WatchKey};
use notify::event::{AccessKind, AccessMode, ModifyKind};
use notify::{Event, EventKind, RecursiveMode, Watcher as _};
use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long a drain waits for its cookie before it counts events as lost.
pub const BARRIER: Duration = Duration::from_secs(2);

/// Barriers timing out in a row past which the watcher gives up.
const MAX_TIMEOUTS: u32 = 3;

/// Hints queued past this are collapsed into one [`WatchEvent::Lost`].
const MAX_QUEUED: usize = 100_000;

#[cfg(target_os = "macos")]
pub const NAME: &str = "FSEvents (notify: one recursive stream on each root and a cookie directory; each search flushes it with a cookie)";
#[cfg(not(target_os = "macos"))]
pub const NAME: &str = "notify's inotify backend (portable mode: recursive, one descriptor for the roots and a cookie directory; each search flushes it with a cookie)";

/// What the notify thread found, for the next drain.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Hint {
    Lost,
    /// A name changed in directory `(root, dir)` (or something there whose type the event
    /// does not say): its subtree is walked again.
    Names(usize, PathBuf, OsString),
    /// The file `name` in `(root, dir)` was written.
    Written(usize, PathBuf, OsString),
}

#[derive(Default)]
struct Shared {
    queue: Vec<Hint>,
    /// Cookies written and not yet seen; seen ones.
    pending: HashSet<OsString>,
    seen: HashSet<OsString>,
    /// Why the watcher cannot vouch for the tree any more.
    failed: Option<String>,
    /// A rescan flag came: on the inotify backend, directories made meanwhile may have
    /// no watch; the roots are watched again before the rescan.
    rescan: bool,
}

struct Inner {
    shared: Mutex<Shared>,
    cond: Condvar,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The watcher; see the module's comment.
pub struct NotifyWatch {
    roots: Vec<PathBuf>,
    cookie_dir: PathBuf,
    inner: Arc<Inner>,
    watcher: Mutex<notify::RecommendedWatcher>,
    /// One drain at a time, from taking the queue to the last hint handed over: a
    /// second search draining meanwhile must not find the queue empty and answer before
    /// the first has applied what it took.
    draining: Mutex<()>,
    /// The directories the index walk entered (hints elsewhere are dropped).
    entered: Mutex<HashSet<WatchKey>>,
    next_cookie: AtomicU64,
    timeouts: AtomicU32,
}

/// `rel` compared loosely: each component case-folded and in NFC, for a path a volume
/// reports in another spelling than the configuration's (macOS).
fn loose(c: &OsStr) -> String {
    use unicode_normalization::UnicodeNormalization;
    c.to_string_lossy()
        .nfc()
        .flat_map(char::to_lowercase)
        .collect()
}

/// `path` relative to `base`: exactly, else component by component under case and
/// Unicode-normalisation folding.
fn under(path: &Path, base: &Path) -> Option<PathBuf> {
    if let Ok(rel) = path.strip_prefix(base) {
        return Some(rel.to_path_buf());
    }
    let mut p = path.components();
    for b in base.components() {
        let c = p.next()?;
        match (b, c) {
            (Component::Normal(x), Component::Normal(y)) if loose(x) == loose(y) => {}
            (x, y) if x == y => {}
            _ => return None,
        }
    }
    Some(p.as_path().to_path_buf())
}

/// Whether `kind` could change what a walk finds (a name, a type, permissions), as
/// opposed to a file's content; `None` when it changes nothing at all (an open, a read).
fn structural(kind: &EventKind, path: &Path) -> Option<bool> {
    Some(match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => false,
        EventKind::Access(_) => return None,
        EventKind::Modify(ModifyKind::Data(_)) => false,
        // Metadata: a directory's permissions change what a walk enters; a file's do
        // not. The event does not say which: look (a hint only, never trusted further).
        EventKind::Modify(ModifyKind::Metadata(_)) => !std::fs::symlink_metadata(path)
            .map(|m| m.file_type().is_file())
            .unwrap_or(false),
        _ => true,
    })
}

fn on_event(inner: &Inner, roots: &[PathBuf], cookie_dir: &Path, res: notify::Result<Event>) {
    let mut hints = Vec::new();
    let mut cookies = Vec::new();
    let mut failed = None;
    let mut rescan = false;
    match res {
        Err(e) => failed = Some(format!("the watcher failed ({e})")),
        Ok(ev) => {
            // Opens and reads (notify's inotify backend reports every one, the index's
            // own included): only a cookie's counts, and the volume spells those paths
            // exactly as they were watched. Kept cheap: the queue must not overflow.
            if matches!(ev.kind, EventKind::Access(_))
                && !matches!(
                    ev.kind,
                    EventKind::Access(AccessKind::Close(AccessMode::Write))
                )
                && !ev.need_rescan()
                && !ev.paths.iter().any(|p| p.starts_with(cookie_dir))
            {
                return;
            }
            if ev.need_rescan() {
                tracing::debug!(
                    "watcher: events were dropped ({:?}); a full rescan",
                    ev.info()
                );
                rescan = true;
                hints.push(Hint::Lost);
            }
            for path in &ev.paths {
                if let Some(rel) = under(path, cookie_dir) {
                    if let Some(name) = rel
                        .file_name()
                        .filter(|_| rel.parent() == Some(Path::new("")))
                    {
                        cookies.push(name.to_os_string());
                    }
                    continue;
                }
                let Some(kind) = structural(&ev.kind, path) else {
                    continue;
                };
                let mut placed = false;
                for (i, root) in roots.iter().enumerate() {
                    let Some(rel) = under(path, root) else {
                        continue;
                    };
                    placed = true;
                    match (rel.parent(), rel.file_name()) {
                        (Some(dir), Some(name)) => hints.push(if kind {
                            Hint::Names(i, dir.to_path_buf(), name.to_os_string())
                        } else {
                            Hint::Written(i, dir.to_path_buf(), name.to_os_string())
                        }),
                        // The root itself: moved, deleted, its permissions.
                        _ => {
                            tracing::debug!(
                                "watcher: {:?} on a root itself; a full rescan",
                                ev.kind
                            );
                            hints.push(Hint::Lost)
                        }
                    }
                }
                if !placed {
                    tracing::debug!(
                        "watcher: {} is under no root; a full rescan",
                        path.display()
                    );
                    hints.push(Hint::Lost);
                }
            }
        }
    }
    let mut sh = lock(&inner.shared);
    if let Some(why) = failed {
        sh.failed.get_or_insert(why);
    }
    sh.rescan |= rescan;
    if sh.queue.len() + hints.len() > MAX_QUEUED {
        sh.queue.clear();
        sh.queue.push(Hint::Lost);
    } else {
        sh.queue.extend(hints);
    }
    for c in cookies {
        if sh.pending.remove(&c) {
            sh.seen.insert(c);
        }
    }
    drop(sh);
    inner.cond.notify_all();
}

/// Starts the watcher on `roots` (canonical paths from the configuration) with its
/// cookies in `cookie_dir` (a real directory of ferret's, outside every root), and
/// checks that a barrier comes back; `Err` says why it cannot be used.
pub fn start(roots: &[PathBuf], cookie_dir: &Path) -> Result<Box<dyn DirWatch>, String> {
    let inner = Arc::new(Inner {
        shared: Mutex::new(Shared::default()),
        cond: Condvar::new(),
    });
    let (r, c, i) = (roots.to_vec(), cookie_dir.to_path_buf(), Arc::clone(&inner));
    let handler = move |res: notify::Result<Event>| on_event(&i, &r, &c, res);
    // Links are not followed: a link in the tree to `/` must not have the inotify
    // backend watch the whole system.
    let config = notify::Config::default().with_follow_symlinks(false);
    let mut watcher = notify::RecommendedWatcher::new(handler, config)
        .map_err(|e| format!("the notify watcher cannot start ({e})"))?;
    watcher
        .watch(cookie_dir, RecursiveMode::NonRecursive)
        .map_err(|e| format!("the cookie directory cannot be watched ({e})"))?;
    for root in roots {
        watcher
            .watch(root, RecursiveMode::Recursive)
            .map_err(|e| format!("{} cannot be watched ({e})", root.display()))?;
    }
    let w = NotifyWatch {
        roots: roots.to_vec(),
        cookie_dir: cookie_dir.to_path_buf(),
        inner,
        watcher: Mutex::new(watcher),
        draining: Mutex::new(()),
        entered: Mutex::new(HashSet::new()),
        next_cookie: AtomicU64::new(0),
        timeouts: AtomicU32::new(0),
    };
    if !w.barrier()? {
        return Err("the notify watcher does not deliver its events in time".into());
    }
    lock(&w.inner.shared).queue.clear();
    Ok(Box::new(w))
}

impl NotifyWatch {
    /// Writes a cookie and waits for its event (at most [`BARRIER`]): `Ok(true)` when it
    /// came, so every event before it has been queued.
    fn barrier(&self) -> Result<bool, String> {
        let n = self.next_cookie.fetch_add(1, Ordering::Relaxed);
        let name = OsString::from(format!("cookie-{}-{n}", std::process::id()));
        let path = self.cookie_dir.join(&name);
        lock(&self.inner.shared).pending.insert(name.clone());
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create_new(true);
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
        }
        if let Err(e) = opts.open(&path) {
            lock(&self.inner.shared).pending.remove(&name);
            return Err(format!(
                "the watcher's cookie cannot be written in {} ({e})",
                self.cookie_dir.display()
            ));
        }
        let deadline = Instant::now() + BARRIER;
        let mut sh = lock(&self.inner.shared);
        let came = loop {
            if sh.seen.remove(&name) {
                break true;
            }
            let now = Instant::now();
            if now >= deadline {
                sh.pending.remove(&name);
                break false;
            }
            sh = self
                .inner
                .cond
                .wait_timeout(sh, deadline - now)
                .map_or_else(|e| e.into_inner().0, |(g, _)| g);
        };
        drop(sh);
        let _ = std::fs::remove_file(&path);
        Ok(came)
    }

    /// Hands the queued hints over (under the drain lock, held by the caller).
    fn hand_over(&self, sink: &mut dyn FnMut(WatchEvent)) {
        let queue = std::mem::take(&mut lock(&self.inner.shared).queue);
        if queue.is_empty() {
            return;
        }
        let mut out = Vec::with_capacity(queue.len());
        {
            let entered = lock(&self.entered);
            for h in queue {
                let (names, root, dir, name) = match h {
                    Hint::Lost => {
                        out.push(WatchEvent::Lost);
                        continue;
                    }
                    Hint::Names(root, dir, name) => (true, root, dir, name),
                    Hint::Written(root, dir, name) => (false, root, dir, name),
                };
                let key = (root, dir);
                if !entered.contains(&key) {
                    continue;
                }
                out.push(if names {
                    WatchEvent::Names(key, name)
                } else {
                    WatchEvent::Written(key, name)
                });
            }
        }
        // Handed over once the locks are let go: the index may add a directory from a
        // thread that holds its own lock.
        out.dedup();
        for e in out {
            sink(e);
        }
    }

    fn check_failed(&self) -> Result<(), String> {
        match &lock(&self.inner.shared).failed {
            Some(why) => Err(why.clone()),
            None => Ok(()),
        }
    }
}

impl DirWatch for NotifyWatch {
    fn add(&self, _dir: rustix::fd::BorrowedFd<'_>, key: WatchKey) -> Result<(), String> {
        // The roots are watched whole already; this only says the walk entered `key`.
        lock(&self.entered).insert(key);
        Ok(())
    }

    fn drain(&self, sink: &mut dyn FnMut(WatchEvent)) -> Result<(), String> {
        let _one = lock(&self.draining);
        self.check_failed()?;
        if std::mem::take(&mut lock(&self.inner.shared).rescan) && !cfg!(target_os = "macos") {
            // inotify's queue overflowed: directories made meanwhile may have no watch.
            // Watched again before the rescan, so none made after it is missed.
            let mut w = lock(&self.watcher);
            for root in &self.roots {
                if let Err(e) = w.watch(root, RecursiveMode::Recursive) {
                    return Err(format!("{} cannot be watched again ({e})", root.display()));
                }
            }
        }
        let came = self.barrier()?;
        self.check_failed()?;
        self.hand_over(sink);
        if came {
            self.timeouts.store(0, Ordering::Relaxed);
        } else {
            tracing::debug!("watcher: the cookie did not come back in time; a full rescan");
            sink(WatchEvent::Lost);
            if self.timeouts.fetch_add(1, Ordering::Relaxed) + 1 >= MAX_TIMEOUTS {
                return Err(format!(
                    "the watcher's events did not come within {} s, {MAX_TIMEOUTS} times in a row",
                    BARRIER.as_secs()
                ));
            }
        }
        Ok(())
    }

    fn drain_queued(&self, sink: &mut dyn FnMut(WatchEvent)) -> Result<(), String> {
        let _one = lock(&self.draining);
        self.check_failed()?;
        self.hand_over(sink);
        Ok(())
    }

    fn wait(&self, timeout: Duration) {
        let sh = lock(&self.inner.shared);
        if sh.queue.is_empty() && sh.failed.is_none() {
            let _ = self.inner.cond.wait_timeout(sh, timeout);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(w: &dyn DirWatch) -> Vec<WatchEvent> {
        let mut v = Vec::new();
        w.drain(&mut |e| v.push(e)).unwrap();
        v
    }

    /// Every drain holds what changed before it (its barrier), placed by directory,
    /// only for directories the walk entered; an event on the root itself is lost
    /// events; the cookies are removed.
    #[test]
    fn a_drain_holds_every_change_made_before_it() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let base = t.path().canonicalize().unwrap();
        let (root, cookies) = (base.join("root"), base.join("cookies"));
        std::fs::create_dir_all(root.join("d")).unwrap();
        std::fs::create_dir_all(&cookies).unwrap();
        let w = start(std::slice::from_ref(&root), &cookies).unwrap();
        let fd = std::fs::File::open(&root).unwrap();
        use rustix::fd::AsFd;
        w.add(fd.as_fd(), (0, PathBuf::new())).unwrap();
        w.add(fd.as_fd(), (0, PathBuf::from("d"))).unwrap();
        for i in 0..50 {
            let name = format!("n{i}");
            std::fs::write(root.join("d").join(&name), "x").unwrap();
            let ev = events(&*w);
            assert!(
                ev.contains(&WatchEvent::Names((0, "d".into()), name.clone().into())),
                "{i}: {ev:?}"
            );
            std::fs::write(root.join("d").join(&name), "y").unwrap();
            let ev = events(&*w);
            assert!(
                ev.contains(&WatchEvent::Written((0, "d".into()), name.into())),
                "{i}: {ev:?}"
            );
        }
        // A directory the walk never entered: its name change is reported by its
        // parent, what happens inside it is not.
        std::fs::create_dir(root.join("skipped")).unwrap();
        std::fs::write(root.join("skipped/x"), "x").unwrap();
        let ev = events(&*w);
        assert!(ev.contains(&WatchEvent::Names((0, PathBuf::new()), "skipped".into())));
        assert!(
            !ev.iter().any(|e| matches!(e, WatchEvent::Names((_, d), _) | WatchEvent::Written((_, d), _) if d == Path::new("skipped"))),
            "{ev:?}"
        );
        // The root itself.
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o750)).unwrap();
        assert!(events(&*w).contains(&WatchEvent::Lost));
        assert_eq!(std::fs::read_dir(&cookies).unwrap().count(), 0);
    }

    #[test]
    fn paths_are_placed_under_a_root_in_any_spelling_the_volume_folds() {
        let base = Path::new("/v/Caf\u{e9}/ws");
        assert_eq!(
            under(Path::new("/v/Caf\u{e9}/ws/a/b"), base),
            Some(PathBuf::from("a/b"))
        );
        assert_eq!(
            under(Path::new("/v/CAFE\u{301}/WS/a/b"), base),
            Some(PathBuf::from("a/b"))
        );
        assert_eq!(under(Path::new("/v/Cafe/ws/a"), base), None);
        assert_eq!(under(Path::new("/v/Caf\u{e9}/wsx/a"), base), None);
        assert_eq!(under(base, base), Some(PathBuf::new()));
    }
}

//! The platform layer: everything that differs by operating system, behind a small
//! OS-free API, so the layers above carry no `cfg(target_os …)` of their own.
//!
//! - **Resolution beneath a handle** ([`open_beneath`]): a relative path of plain names
//!   opened under a directory handle with no symbolic link anywhere on the way. Linux:
//!   `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`, one syscall; macOS:
//!   `openat(O_NOFOLLOW_ANY)` where the kernel has it (macOS 11+); everywhere else, and
//!   under `FERRET_PORTABLE=1`, the component walk of [`portable`]: one
//!   `openat(O_NOFOLLOW)` per name from the root's handle, as cap-std does.
//! - **File identity** ([`file_id`]): device and inode as a `u64` pair (`st_dev` is an
//!   `i32` on Darwin).
//! - **Unnamed staging files** ([`open_unnamed`], [`link_unnamed`]): Linux's
//!   `O_TMPFILE`; elsewhere `None`, and the caller stages under a name.
//! - **Extended attributes** copied to a replacement ([`copy_xattrs`]).
//! - **Where things live** ([`config_dir`], [`state_dir`], [`home_trash`],
//!   [`protected_defaults`]): XDG variables where set; otherwise `~/.config`,
//!   `~/.local/state` on Linux and `~/Library/Application Support/ferret` on macOS.
//! - **Memory** ([`release_memory`], [`steady_allocator`]): glibc's `malloc_trim` and
//!   `mallopt`, macOS's `malloc_zone_pressure_relief`.
//! - **Resource limits** ([`limit_self`]): `setrlimit` for a helper child that parses
//!   untrusted bytes (the PDF text extractor).
//! - **The watcher** ([`DirWatch`], [`watcher`]): one OS-free event stream of hints
//!   (names changed in a directory, a file written, events lost) that the live index
//!   turns into stamped rescans. Linux: inotify, one watch per directory walked; macOS
//!   and portable mode: `notify` ([`notify_watch`]: FSEvents, or notify's inotify
//!   backend) with a cookie flush barrier at every search; the polling watcher of
//!   [`portable`] where neither can start.
//! - **The OS trash** ([`OsTrash`], [`os_trash`]): macOS's Trash through
//!   `NSFileManager`, given only a path ferret staged the object at; a fake twin under
//!   `FERRET_PORTABLE=1`.
//! - **Case and normalisation** ([`same_entry_by_another_name`]): whether a second
//!   name is the same entry on a volume that folds case or Unicode normalisation, so
//!   `move a A` renames.
//! - **Names shown** ([`describe`]): which resolver, watcher and trash are in use, for
//!   `ferret config`.
//!
//! A Windows implementation slots in as one more module here (handles and
//! `NtCreateFile` relative opens, `ReadDirectoryChangesW`, the Recycle Bin).
//!
//! This is a leaf layer: it uses no other module of the crate.

use rustix::fd::{BorrowedFd, OwnedFd};
use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

pub mod notify_watch;
pub mod portable;

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
use linux as os;

#[cfg(target_os = "macos")]
mod macos;
#[cfg(target_os = "macos")]
use macos as os;

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
use portable::other as os;

/// Whether `FERRET_PORTABLE=1` asked for the portable code paths (the component-walk
/// resolver, the polling watcher, named staging files) on a platform that has
/// better ones: so Linux runs, and CI tests, what macOS and others run. Read once.
pub fn portable() -> bool {
    static P: OnceLock<bool> = OnceLock::new();
    *P.get_or_init(|| std::env::var_os("FERRET_PORTABLE").is_some_and(|v| v == "1"))
}

/// A file's identity: (device, inode).
#[allow(clippy::unnecessary_cast)]
pub fn file_id(st: &rustix::fs::Stat) -> (u64, u64) {
    // Darwin's st_dev is an i32: widened the same way every time; only equality is
    // asked of it.
    (st.st_dev as u64, st.st_ino as u64)
}

/// What [`open_beneath`] opens the final name for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Open {
    /// A file (or directory) for reading, non-blocking (a FIFO cannot hang the call).
    Read,
    /// Only to confirm it and stat it (`O_PATH` where there is one).
    Probe,
    /// A directory, for listing.
    Dir,
}

/// Opens `rel` beneath `dir` with no symbolic link anywhere on the way (the final name
/// included), for `how`. `rel` must be plain names (an empty path is `dir` itself): a
/// `..`, a root or a prefix is refused, so what opens is beneath `dir` whatever the tree
/// holds or how it changes meanwhile.
pub fn open_beneath(dir: BorrowedFd<'_>, rel: &Path, how: Open) -> io::Result<OwnedFd> {
    let names = plain_names(rel)?;
    if !portable()
        && let Some(done) = os::open_beneath(dir, rel, &names, how)
    {
        return refuse_link(done?, how);
    }
    portable::open_beneath(dir, &names, how)
}

/// `O_PATH | O_NOFOLLOW` opens a final symlink itself (even under openat2's
/// `RESOLVE_NO_SYMLINKS`): a probe must not confirm a link, so it is refused as a link
/// anywhere else on the way is (`ELOOP`).
pub(crate) fn refuse_link(fd: OwnedFd, how: Open) -> io::Result<OwnedFd> {
    if how == Open::Probe {
        let st = rustix::fs::fstat(&fd)?;
        if rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Symlink {
            return Err(rustix::io::Errno::LOOP.into());
        }
    }
    Ok(fd)
}

/// The names of a relative path of plain names; an error for anything else.
fn plain_names(rel: &Path) -> io::Result<Vec<&OsStr>> {
    rel.components()
        .filter(|c| !matches!(c, Component::CurDir))
        .map(|c| match c {
            Component::Normal(n) => Ok(n),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a relative path of plain names",
            )),
        })
        .collect()
}

/// How far apart two writes to a file must be for its timestamps to tell them apart
/// (nanoseconds; read once): Linux's coarse clock tick, twice; elsewhere a second.
pub fn stamp_tick_ns() -> i128 {
    static T: OnceLock<i128> = OnceLock::new();
    *T.get_or_init(os::stamp_tick_ns)
}

/// Which resolver [`open_beneath`] uses, for `ferret config`.
pub fn resolver_name() -> &'static str {
    if portable() {
        portable::RESOLVER
    } else {
        os::RESOLVER
    }
}

/// Opens an unnamed regular file in directory `dir` for writing (Linux's `O_TMPFILE`,
/// mode 0600); `None` where there is none (another OS, the filesystem, portable mode):
/// the caller writes under a name instead.
pub fn open_unnamed(dir: BorrowedFd<'_>) -> Option<OwnedFd> {
    if portable() {
        return None;
    }
    os::open_unnamed(dir)
}

/// Gives the unnamed file `fd` the name `name` in `dir`, refusing to replace anything;
/// `None` when it cannot be done this way (nothing was made).
pub fn link_unnamed(
    fd: BorrowedFd<'_>,
    dir: BorrowedFd<'_>,
    name: &OsStr,
) -> Option<io::Result<()>> {
    os::link_unnamed(fd, dir, name)
}

/// Copies the extended attributes of `from` to `to`, best effort.
pub fn copy_xattrs(from: BorrowedFd<'_>, to: BorrowedFd<'_>) {
    os::copy_xattrs(from, to)
}

/// Hands freed memory back to the system after a big request (glibc: `malloc_trim`;
/// macOS: `malloc_zone_pressure_relief`; elsewhere nothing).
pub fn release_memory() {
    os::release_memory()
}

/// Sets the allocator up for a long-lived server (glibc only; see the caller).
pub fn steady_allocator() {
    os::steady_allocator()
}

/// Limits this process (a helper child that parses untrusted input, e.g. a PDF) to
/// `memory` bytes of address space and `cpu_seconds` of CPU time: past them an
/// allocation fails (the helper aborts) or the kernel kills it (SIGXCPU, then
/// SIGKILL). Linux: `RLIMIT_AS` and `RLIMIT_CPU`; macOS: `RLIMIT_CPU` and
/// `RLIMIT_DATA` (Darwin does not enforce `RLIMIT_AS`), the parent's wall-clock
/// timeout and output cap bounding the rest; elsewhere nothing (the parent's bounds
/// only).
pub fn limit_self(memory: u64, cpu_seconds: u64) -> io::Result<()> {
    os::limit_self(memory, cpu_seconds)
}

/// Ends this process (a helper child) when its parent ends, so a helper does not
/// outlive a server killed with SIGKILL until its own CPU limit. Linux:
/// `PR_SET_PDEATHSIG(SIGKILL)`, then a check that `parent` (the pid the parent passed
/// down) is still the parent, an error if it already ended. The signal comes when the
/// parent's spawning thread ends: the caller waits for the child on that thread.
/// Elsewhere nothing (the parent's wall-clock bound, and the child's CPU limit).
pub fn die_with_parent(parent: Option<u32>) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        os::die_with_parent(parent)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = parent;
        Ok(())
    }
}

/// An environment lookup: the process's own, or a map a caller was given.
pub type Env<'e> = &'e dyn Fn(&str) -> Option<OsString>;

/// The process environment as an [`Env`].
pub fn process_env(key: &str) -> Option<OsString> {
    std::env::var_os(key)
}

/// An absolute path from a variable; empty or relative values do not count.
fn abs_var(env: Env<'_>, key: &str) -> Option<PathBuf> {
    env(key)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}

/// ferret's config directory (the user's `config.toml` is in it):
/// `$XDG_CONFIG_HOME/ferret` where set; else `~/.config/ferret` on Linux,
/// `~/Library/Application Support/ferret` on macOS.
pub fn config_dir(env: Env<'_>) -> Option<PathBuf> {
    if let Some(x) = abs_var(env, "XDG_CONFIG_HOME") {
        return Some(x.join("ferret"));
    }
    let home = env("HOME").filter(|h| !h.is_empty()).map(PathBuf::from)?;
    Some(os::config_dir_in_home(&home))
}

/// ferret's state base directory (one subdirectory per workspace):
/// `$XDG_STATE_HOME/ferret` where set; else `~/.local/state/ferret` on Linux,
/// `~/Library/Application Support/ferret/state` on macOS.
pub fn state_dir(env: Env<'_>) -> Option<PathBuf> {
    if let Some(x) = abs_var(env, "XDG_STATE_HOME") {
        return Some(x.join("ferret"));
    }
    let home = env("HOME").filter(|h| !h.is_empty()).map(PathBuf::from)?;
    Some(os::state_dir_in_home(&home))
}

/// The user's trash in the freedesktop layout, where that is the platform's convention
/// (`$XDG_DATA_HOME/Trash`, `~/.local/share/Trash`); `None` elsewhere (macOS: ferret
/// uses its own trash).
pub fn home_trash(env: Env<'_>) -> Option<PathBuf> {
    if !os::FREEDESKTOP_TRASH {
        return None;
    }
    let data = abs_var(env, "XDG_DATA_HOME").or_else(|| {
        env("HOME")
            .filter(|h| !h.is_empty())
            .map(|h| PathBuf::from(h).join(".local/share"))
    })?;
    data.is_absolute().then(|| data.join("Trash"))
}

/// Directories no tool may see into whatever the settings, from the environment:
/// ferret's state and config directories and the user's trash, under every name the
/// conventions give them (XDG and the platform's own), so that changing a variable
/// does not uncover one.
pub fn protected_defaults(env: Env<'_>) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    dirs.extend(abs_var(env, "XDG_STATE_HOME").map(|d| d.join("ferret")));
    dirs.extend(abs_var(env, "XDG_DATA_HOME").map(|d| d.join("Trash")));
    // The user's config: an agent that could write it would set every other run's
    // deny list, confirm list and writes.
    dirs.extend(abs_var(env, "XDG_CONFIG_HOME").map(|d| d.join("ferret")));
    // The fake OS trash of portable mode, whatever the mode: a setting does not uncover it.
    dirs.extend(abs_var(env, "XDG_DATA_HOME").map(|d| d.join(portable::FAKE_TRASH_NAME)));
    match abs_var(env, "HOME") {
        Some(h) => {
            dirs.push(h.join(".local/state/ferret"));
            dirs.push(h.join(".local/share/Trash"));
            dirs.push(h.join(".config/ferret"));
            dirs.push(h.join(".local/share").join(portable::FAKE_TRASH_NAME));
            dirs.extend(os::protected_in_home(&h));
        }
        None => dirs.push(std::env::temp_dir().join("ferret")),
    }
    dirs
}

/// Names a walk skips by default on this platform, besides the usual ignore rules
/// (macOS's `.DS_Store`).
pub const SKIPPED_NAMES: &[&str] = os::SKIPPED_NAMES;

/// Which trash a delete uses, for `ferret config`.
pub fn trash_name() -> &'static str {
    if portable() {
        portable::TRASH
    } else {
        os::TRASH
    }
}

/// The user's trash as the operating system keeps it, reached through an API that takes
/// a path (macOS: `NSFileManager trashItemAtURL:resultingItemURL:error:`). Such an API
/// follows whatever the path names when it runs, so the caller hands it only a path it
/// made itself: the object is first moved by handle into a ferret-owned staging
/// directory, and `put` is given that staged path, never one an agent influenced.
pub trait OsTrash {
    /// What `ferret config` and results call it.
    fn name(&self) -> &'static str;
    /// Moves the object at `staged` into the user's trash, under a name of the trash's
    /// choosing (a clash is resolved the trash's way), and returns where it is now.
    /// `Err` when it could not: the object is then still at `staged`.
    fn put(&self, staged: &Path) -> io::Result<PathBuf>;
    /// The folder `put` puts items in, where known: recovery looks there, by the
    /// object's identity, for an item a killed process had handed over but not yet
    /// journalled.
    fn dir(&self) -> Option<PathBuf>;
}

/// The operating system's trash, where ferret uses one through [`OsTrash`]: macOS's
/// Trash; under `FERRET_PORTABLE=1` a fake one (see [`portable::FakeTrash`]) so the
/// same staging, journalling and restoring run on Linux. `None` elsewhere (Linux uses
/// the freedesktop home trash by handle, see [`home_trash`]).
pub fn os_trash(env: Env<'_>) -> Option<Box<dyn OsTrash>> {
    if portable() {
        return portable::FakeTrash::from_env(env).map(|t| Box::new(t) as Box<dyn OsTrash>);
    }
    os::os_trash()
}

/// The directory standing for the user's trash under `FERRET_PORTABLE=1`:
/// `$XDG_DATA_HOME/ferret-os-trash`, else `~/.local/share/ferret-os-trash`.
pub fn fake_os_trash_dir(env: Env<'_>) -> Option<PathBuf> {
    abs_var(env, "XDG_DATA_HOME")
        .map(|d| d.join(portable::FAKE_TRASH_NAME))
        .or_else(|| {
            abs_var(env, "HOME").map(|h| h.join(".local/share").join(portable::FAKE_TRASH_NAME))
        })
}

/// The resolver, watcher and trash in use, for `ferret config`.
pub fn describe() -> Vec<(&'static str, &'static str)> {
    vec![
        ("os", std::env::consts::OS),
        ("portable", if portable() { "yes" } else { "no" }),
        ("resolver", resolver_name()),
        ("watcher", watcher_name()),
        ("trash", trash_name()),
    ]
}

/// Which directory a watch event is about: the root index and the directory's path
/// under it, as given to [`DirWatch::add`].
pub type WatchKey = (usize, PathBuf);

/// A watch event: a hint, never the truth. The index turns each into a rescan of what
/// it names, stamped so that a hint arriving mid-rescan makes it run again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchEvent {
    /// Events were dropped or coalesced past telling (an overflow, FSEvents'
    /// MustScanSubDirs with no subtree): everything must be walked again.
    Lost,
    /// The watched directory itself changed (moved, deleted, permissions).
    Itself(WatchKey),
    /// A name in the directory was created, deleted or renamed, or a subdirectory's
    /// attributes changed: its subtree must be walked again.
    Names(WatchKey, OsString),
    /// The file `name` in the directory was written or its attributes changed.
    Written(WatchKey, OsString),
}

/// A directory watcher. One per index; `add` for each directory a walk entered (on
/// systems that watch a whole tree at once, the root's add is the one that matters).
pub trait DirWatch: Send + Sync {
    /// Watches the directory open as `dir` (opened beneath its root by the caller).
    /// `Err` says why the watcher can no longer vouch for the tree (a limit reached).
    fn add(&self, dir: BorrowedFd<'_>, key: WatchKey) -> Result<(), String>;
    /// Hands every event queued so far to `sink`; `Err` when the watcher failed. A
    /// watcher whose events come after the change returned (FSEvents) first makes sure
    /// every change made before the call is among them (a flush barrier).
    fn drain(&self, sink: &mut dyn FnMut(WatchEvent)) -> Result<(), String>;
    /// Hands over what has arrived, with no barrier (the background reader, which only
    /// keeps the queue short; a search calls [`DirWatch::drain`]).
    fn drain_queued(&self, sink: &mut dyn FnMut(WatchEvent)) -> Result<(), String> {
        self.drain(sink)
    }
    /// Waits up to `timeout` for events to be queued (returns early when some are).
    fn wait(&self, timeout: Duration);
}

/// The platform's directory watcher for `roots` (their canonical paths, from the
/// configuration); `cookie_dir` is a real directory of ferret's outside every root (in
/// the state directory) where the notify watcher writes its flush cookies. `Err` says
/// why there is none (searches then walk).
///
/// macOS, and Linux under `FERRET_PORTABLE=1`: the notify watcher with its barrier
/// ([`notify_watch`]); when it cannot start (no cookie directory, a watch limit) the
/// polling watcher stands in, and the log and [`watcher_name`] say so. Linux: inotify,
/// one watch per directory walked.
pub fn watcher(roots: &[PathBuf], cookie_dir: Option<&Path>) -> Result<Box<dyn DirWatch>, String> {
    if !(portable() || os::NOTIFY_WATCHER) {
        return os::watcher();
    }
    let why = match cookie_dir {
        None => "no state directory for its cookies".to_string(),
        Some(dir) => match notify_watch::start(roots, dir) {
            Ok(w) => {
                let _ = WATCHER_IN_USE.set(notify_watch::NAME);
                return Ok(w);
            }
            Err(why) => why,
        },
    };
    tracing::warn!("watcher: the notify watcher is not used ({why}); polling instead");
    let _ = WATCHER_IN_USE.set(POLL_FALLBACK);
    Ok(portable::poll_watcher())
}

static WATCHER_IN_USE: OnceLock<&'static str> = OnceLock::new();

const POLL_FALLBACK: &str = "polling (the notify watcher could not start; each watched directory re-read through its handle at every search; at most 512)";

/// Which watcher [`watcher`] gives (or gave, once an index started in this process),
/// for `ferret config`.
pub fn watcher_name() -> &'static str {
    if let Some(w) = WATCHER_IN_USE.get() {
        return w;
    }
    if portable() || os::NOTIFY_WATCHER {
        NOTIFY_OR_POLL
    } else {
        os::WATCHER
    }
}

#[cfg(target_os = "macos")]
const NOTIFY_OR_POLL: &str = "FSEvents (notify: one recursive stream on each root and a cookie directory; each search flushes it with a cookie), else polling when it cannot start";
#[cfg(not(target_os = "macos"))]
const NOTIFY_OR_POLL: &str = "notify's inotify backend (portable mode: recursive; each search flushes it with a cookie), else polling when it cannot start";

/// Whether `to_name` in `to_dir` is the very entry `from_name` in `from_dir` under
/// another spelling, so that renaming one to the other is a rename, not a replacement:
/// a volume folding case or Unicode normalisation (macOS's APFS and HFS+ by default, a
/// case-folding Linux directory) finds `a` when asked for `A`. True only when the two
/// directories are one, both names reach the same object (device and inode), the names
/// are equal once case-folded and in NFC, and the directory's listing does not hold
/// `to_name` as stored: two hard links `a` and `A` on a case-sensitive volume are two
/// entries, both listed, and stay a refused "exists".
pub fn same_entry_by_another_name(
    from_dir: BorrowedFd<'_>,
    from_name: &OsStr,
    to_dir: BorrowedFd<'_>,
    to_name: &OsStr,
) -> bool {
    use rustix::fs::AtFlags;
    if from_name == to_name {
        return false;
    }
    let fold = |n: &OsStr| -> String {
        use unicode_normalization::UnicodeNormalization;
        n.to_string_lossy()
            .nfc()
            .flat_map(char::to_lowercase)
            .nfc()
            .collect()
    };
    if fold(from_name) != fold(to_name) {
        return false;
    }
    let id = |d: BorrowedFd<'_>, n: &OsStr| {
        rustix::fs::statat(d, n, AtFlags::SYMLINK_NOFOLLOW)
            .ok()
            .map(|st| file_id(&st))
    };
    let dir_id = |d: BorrowedFd<'_>| rustix::fs::fstat(d).ok().map(|st| file_id(&st));
    let (Some(a), Some(b)) = (id(from_dir, from_name), id(to_dir, to_name)) else {
        return false;
    };
    if a != b || dir_id(from_dir).is_none() || dir_id(from_dir) != dir_id(to_dir) {
        return false;
    }
    // The names as stored: `to_name` must not be an entry of its own.
    let Ok(listing) = rustix::fs::openat(
        from_dir,
        ".",
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    ) else {
        return false;
    };
    let Ok(mut dir) = rustix::fs::Dir::new(listing) else {
        return false;
    };
    while let Some(e) = dir.read() {
        let Ok(e) = e else { return false };
        if e.file_name().to_bytes() == to_name.as_encoded_bytes() {
            return false;
        }
    }
    true
}

/// Reads a directory's names through its handle, a batch at a time: Linux's
/// `getdents` into one buffer (the kernel keeps the position in the handle), elsewhere
/// (and in portable mode) `readdir` through rustix.
pub struct Lister(ListerInner);

enum ListerInner {
    #[cfg(target_os = "linux")]
    Raw {
        buf: Vec<std::mem::MaybeUninit<u8>>,
        done: bool,
    },
    Dir(Option<rustix::fs::Dir>),
}

impl Lister {
    pub fn new(fd: BorrowedFd<'_>) -> Lister {
        #[cfg(target_os = "linux")]
        if !portable() {
            return Lister(ListerInner::Raw {
                buf: vec![std::mem::MaybeUninit::uninit(); 16 * 1024],
                done: false,
            });
        }
        Lister(ListerInner::Dir(rustix::fs::Dir::read_from(fd).ok()))
    }

    /// Hands about `max` more names (with their types as the directory reports them)
    /// to `add`; true when the directory is read to its end. A `getdents` buffer is
    /// never cut: at most one buffer's worth over `max`.
    pub fn fill(
        &mut self,
        fd: BorrowedFd<'_>,
        max: usize,
        add: &mut dyn FnMut(&[u8], rustix::fs::FileType),
    ) -> bool {
        let mut n = 0usize;
        match &mut self.0 {
            #[cfg(target_os = "linux")]
            ListerInner::Raw { buf, done } => {
                if *done {
                    return true;
                }
                loop {
                    let mut dir = rustix::fs::RawDir::new(fd, buf);
                    let mut any = false;
                    // One `getdents` call's worth: RawDir reads again once its buffer
                    // is used up, so stop at the buffer's end.
                    while let Some(Ok(e)) = dir.next() {
                        any = true;
                        n += 1;
                        add(e.file_name().to_bytes(), e.file_type());
                        if dir.is_buffer_empty() {
                            break;
                        }
                    }
                    if !any {
                        *done = true;
                        return true;
                    }
                    if n >= max {
                        return false;
                    }
                }
            }
            ListerInner::Dir(slot) => {
                let _ = fd;
                let Some(dir) = slot.as_mut() else {
                    return true;
                };
                while let Some(Ok(e)) = dir.read() {
                    n += 1;
                    add(e.file_name().to_bytes(), e.file_type());
                    if n >= max {
                        return false;
                    }
                }
                *slot = None;
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_only() {
        assert!(plain_names(Path::new("a/b")).is_ok());
        assert!(plain_names(Path::new("")).unwrap().is_empty());
        assert!(plain_names(Path::new("./a")).is_ok());
        for bad in ["../a", "a/../b", "/a", "a/.."] {
            assert!(plain_names(Path::new(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn dirs_follow_xdg_then_home() {
        let env = |k: &str| match k {
            "HOME" => Some(OsString::from("/h")),
            "XDG_STATE_HOME" => Some(OsString::from("relative")),
            _ => None,
        };
        let state = state_dir(&env).unwrap();
        assert!(state.starts_with("/h"), "{state:?}");
        let env2 = |k: &str| match k {
            "HOME" => Some(OsString::from("/h")),
            "XDG_STATE_HOME" => Some(OsString::from("/s")),
            "XDG_CONFIG_HOME" => Some(OsString::from("/c")),
            _ => None,
        };
        assert_eq!(state_dir(&env2).unwrap(), Path::new("/s/ferret"));
        assert_eq!(config_dir(&env2).unwrap(), Path::new("/c/ferret"));
        let none = |_: &str| None;
        assert!(state_dir(&none).is_none());
    }
}

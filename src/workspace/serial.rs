//! Moves and deletes of every ferret process, one at a time per tree.
//!
//! A directory move walks the links inside the directory, then renames it. A link moved
//! into that directory by another process between the walk and the rename was never
//! judged at the directory's new place, where its words may lead outside. Within one
//! process a mutex orders the two; across processes an advisory `flock` does, held from
//! the last walk to the rename.
//!
//! Which processes must wait for each other: any two whose roots overlap. Each takes an
//! exclusive lock on its own roots and a shared one on every folder above them it can
//! open, so a server rooted at `/p` waits for one rooted at `/p/sub` (which holds `/p`
//! shared) and the other way round, while servers of unrelated trees (sharing only `/`
//! and `/home`, shared) do not wait at all. The locks are taken in one order, by device
//! and inode, in every process: no two can each hold what the other waits for.
//!
//! The locks are advisory: a person's `mv` is not held back by them (their `mv` is not an
//! agent's), nor is a process that cannot open a folder above its root for reading (that
//! folder is skipped).

use crate::error::{ErrorCode, ToolError, ToolResult};
use rustix::fd::OwnedFd;
use rustix::fs::{FlockOperation, Mode, OFlags};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Moves and deletes of this process, one at a time (the cross-process locks, being
/// per open file, would order them too; the mutex spares the polling).
static LOCAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Held while alive: this process's moves wait on the mutex, other processes' on the
/// locks (released when the files close).
pub struct Serial {
    _held: Vec<OwnedFd>,
    _local: Option<std::sync::MutexGuard<'static, ()>>,
}

/// How many folders above a root are locked at most (a bound, should `..` never end).
const MAX_ANCESTORS: usize = 256;

impl super::Workspace {
    /// Waits until no other ferret process moves or deletes in a tree that overlaps the
    /// roots `roots` (indexes: those the change touches, not every root: a move inside
    /// one root does not wait for another process's moves in another), and holds that
    /// until dropped. Waits at most `wait`, and stops when `check` fails (the call's
    /// deadline or cancellation): waits do not stack past a call's time.
    pub fn moves_serial(
        &self,
        roots: &[usize],
        wait: Duration,
        check: &dyn Fn() -> ToolResult<()>,
    ) -> ToolResult<Serial> {
        let until = Instant::now() + wait;
        let local = loop {
            match LOCAL.try_lock() {
                Ok(g) => break g,
                Err(std::sync::TryLockError::Poisoned(p)) => break p.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => {
                    check()?;
                    if Instant::now() >= until {
                        return Err(busy());
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
            }
        };
        // (device, inode) -> (an open handle of our own, exclusive?)
        let mut want: BTreeMap<(u64, u64), (OwnedFd, bool)> = BTreeMap::new();
        let mut mine: Vec<usize> = roots.to_vec();
        mine.sort_unstable();
        mine.dedup();
        for root in mine.iter().filter_map(|&i| self.roots.get(i)) {
            // A handle of our own: a lock on the root's long-lived handle would outlive
            // this call.
            let Ok(mut fd) = reopen(&root.dir, ".") else {
                continue;
            };
            let mut exclusive = true;
            for _ in 0..MAX_ANCESTORS {
                let Ok(id) = super::write::identity(&fd) else {
                    break;
                };
                let up = reopen(&fd, "..");
                match want.get_mut(&id) {
                    Some(e) => e.1 |= exclusive,
                    None => {
                        want.insert(id, (fd, exclusive));
                    }
                }
                exclusive = false;
                match up {
                    Ok(up) if super::write::identity(&up).is_ok_and(|u| u != id) => fd = up,
                    // The top (`..` of `/` is `/`), or a folder this user cannot read.
                    _ => break,
                }
            }
        }
        Ok(Serial {
            _held: lock_all(want, until, check)?,
            _local: Some(local),
        })
    }

    /// Waits until no ferret process (this one included) is moving or deleting in a tree
    /// that holds the folder `dir`, and holds that off until dropped, while other writes
    /// go on: a shared lock on `dir` and on every folder above it, which a move's
    /// exclusive lock on its root waits for and makes wait. A file write or edit holds
    /// it from its last check of where its folder stands to its rename (round 22: a
    /// `write_file k/config` landed in `k` after a move of `k` to `.kube` had checked
    /// what `k` held and before its rename, planting `.kube/config`).
    pub fn writes_serial(
        &self,
        dir: &cap_std::fs::Dir,
        wait: Duration,
        check: &dyn Fn() -> ToolResult<()>,
    ) -> ToolResult<Serial> {
        let until = Instant::now() + wait;
        let mut want: BTreeMap<(u64, u64), (OwnedFd, bool)> = BTreeMap::new();
        if let Ok(mut fd) = reopen(dir, ".") {
            for _ in 0..MAX_ANCESTORS + 64 {
                let Ok(id) = super::write::identity(&fd) else {
                    break;
                };
                let up = reopen(&fd, "..");
                want.entry(id).or_insert((fd, false));
                match up {
                    Ok(up) if super::write::identity(&up).is_ok_and(|u| u != id) => fd = up,
                    _ => break,
                }
            }
        }
        Ok(Serial {
            _held: lock_all(want, until, check)?,
            _local: None,
        })
    }
}

/// The refusal of a change that waited its whole time for a move or delete in its tree.
fn busy() -> ToolError {
    ToolError::new(
        ErrorCode::Conflict,
        "a ferret process is moving or deleting in this tree",
    )
    .with_hint("retry in a moment")
}

/// Takes every lock of `want` in (device, inode) order, as every process does (no two
/// can each hold what the other waits for), waiting until `until`.
fn lock_all(
    want: BTreeMap<(u64, u64), (OwnedFd, bool)>,
    until: Instant,
    check: &dyn Fn() -> ToolResult<()>,
) -> ToolResult<Vec<OwnedFd>> {
    let mut held = Vec::with_capacity(want.len());
    for (_, (fd, exclusive)) in want {
        let op = if exclusive {
            FlockOperation::NonBlockingLockExclusive
        } else {
            FlockOperation::NonBlockingLockShared
        };
        loop {
            match rustix::fs::flock(&fd, op) {
                Ok(()) => break,
                Err(e) if e == rustix::io::Errno::WOULDBLOCK && Instant::now() < until => {
                    check()?;
                    std::thread::sleep(Duration::from_millis(2));
                }
                Err(e) if e == rustix::io::Errno::WOULDBLOCK => return Err(busy()),
                // A filesystem without locks: nothing to order by here.
                Err(_) => break,
            }
        }
        held.push(fd);
    }
    Ok(held)
}

fn reopen(dir: &impl rustix::fd::AsFd, name: &str) -> std::io::Result<OwnedFd> {
    Ok(rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::empty(),
    )?)
}

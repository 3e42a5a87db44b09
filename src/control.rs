//! Call control: what stops a running call (a cancel flag, a deadline) and what reports
//! its progress. A leaf: the search engine and the tools take a [`Control`] without
//! knowing who made it (the MCP server, the CLI, a test).

use crate::error::{ErrorCode, ToolError, ToolResult};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A flag a front end sets to stop a running call (MCP `notifications/cancelled`).
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    pub fn new() -> Self {
        Self::default()
    }
    /// A token over a flag someone else sets too (a SIGINT handler's).
    pub fn from_flag(flag: Arc<AtomicBool>) -> Self {
        CancelToken(flag)
    }
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Progress of a long call: how much was done so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub files_searched: u64,
    pub matches: u64,
}

pub type ProgressSink = Arc<dyn Fn(Progress) + Send + Sync>;

/// How one call is stopped and followed.
#[derive(Clone, Default)]
pub struct Control {
    pub cancel: CancelToken,
    pub progress: Option<ProgressSink>,
    /// When the call must have finished (`None`: no limit).
    pub deadline: Option<Instant>,
    /// The limit the deadline came from, for the message.
    pub timeout: Duration,
    /// Warnings for the agent met while the call ran (an ignore file over its cap): the
    /// search tools show them in their result. Shared by the call's threads.
    pub warnings: Warnings,
    /// What the call has spent of its per-call budgets so far (ignore files read).
    pub spent: Arc<Spent>,
}

/// A call's running totals, shared by its threads, for budgets that cover the whole
/// call rather than one file (a tree of ten thousand 1 MB ignore files).
#[derive(Debug, Default)]
pub struct Spent {
    /// Bytes of ignore files read.
    pub ignore_bytes: std::sync::atomic::AtomicU64,
    /// Lines of ignore files compiled.
    pub ignore_lines: std::sync::atomic::AtomicU64,
    /// The wildcard weight of those lines (a line needing a regex of its own, plus its
    /// wildcards).
    pub ignore_costly: std::sync::atomic::AtomicU64,
    /// What the call's big file holds hold now (see `search::cost::hold`): a call
    /// whose next hold could never fit beside its own is refused at once, not left to
    /// wait for room only it could make.
    pub held: std::sync::atomic::AtomicU64,
}

/// Warnings a call gathers for its result (see [`Control::warn`]): at most
/// [`Warnings::MAX`] kept, each once, and a count of the rest.
#[derive(Debug, Clone, Default)]
pub struct Warnings(Arc<Mutex<(Vec<String>, u64)>>);

impl Warnings {
    /// Warnings kept for one result; past these only a count grows, so a tree of ten
    /// thousand hostile ignore files costs ten thousand increments, not ten thousand lines.
    pub const MAX: usize = 20;

    /// Records `msg` (once), and says it on stderr (the log) the first time.
    pub fn add(&self, msg: impl Into<String>) {
        // A warning names files of the workspace and strings the agent gave: it is one
        // line in the answer and in the log, whatever they hold.
        let msg = crate::error::echo(&msg.into()).into_owned();
        let mut w = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if w.0.contains(&msg) {
            return;
        }
        if w.0.len() >= Self::MAX {
            w.1 += 1;
            return;
        }
        tracing::warn!("{msg}");
        w.0.push(msg);
    }

    /// Records `msg` (once) without logging it: a warning already said on stderr (the
    /// workspace's own config hides everything), given again with every call.
    pub fn add_quiet(&self, msg: &str) {
        let msg = crate::error::echo(msg).into_owned();
        let mut w = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !w.0.contains(&msg) && w.0.len() < Self::MAX {
            w.0.push(msg);
        }
    }

    /// The warnings kept, and a last line counting those left out.
    pub fn list(&self) -> Vec<String> {
        let w = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut v = w.0.clone();
        if w.1 > 0 {
            v.push(format!("… and {} more warnings like these", w.1));
        }
        v
    }
}

impl Control {
    /// A control with a deadline `timeout` from now (none when zero).
    pub fn new(cancel: CancelToken, progress: Option<ProgressSink>, timeout: Duration) -> Self {
        Control {
            cancel,
            progress,
            deadline: Some(timeout)
                .filter(|d| !d.is_zero())
                .map(|d| Instant::now() + d),
            timeout,
            warnings: Warnings::default(),
            spent: Arc::default(),
        }
    }

    /// Fails with `CANCELLED` or `TIMEOUT` when the call should stop. Long loops call it.
    pub fn check(&self) -> ToolResult<()> {
        // The deadline first: a call past it that the server answered `TIMEOUT` (and
        // then cancelled) is audited as the timeout it was told, not as cancelled
        // (round 23).
        if let Some(d) = self.deadline
            && Instant::now() >= d
        {
            return Err(self.timeout_error());
        }
        if self.cancel.is_cancelled() {
            return Err(ToolError::new(
                ErrorCode::Cancelled,
                "the call was cancelled",
            ));
        }
        Ok(())
    }

    /// The `TIMEOUT` error of this call: it ran past its deadline.
    pub fn timeout_error(&self) -> ToolError {
        ToolError::new(
            ErrorCode::Timeout,
            format!(
                "the call ran longer than {}",
                humantime::format_duration(self.timeout)
            ),
        )
        .with_hint("narrow it down (a smaller path, a more specific pattern, fewer results)")
    }

    /// Whether the call should stop now (cancelled or out of time).
    pub fn stopped(&self) -> bool {
        self.cancel.is_cancelled() || self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Records a warning for the call's result (and stderr).
    pub fn warn(&self, msg: impl Into<String>) {
        self.warnings.add(msg);
    }

    pub fn progress(&self, p: Progress) {
        if let Some(sink) = &self.progress {
            sink(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Round 23: a call past its deadline that the server had answered `TIMEOUT` and then
    /// cancelled stopped with `CANCELLED`, and was audited so.
    #[test]
    fn a_call_past_its_deadline_stops_as_a_timeout_even_once_cancelled() {
        let cancel = CancelToken::default();
        let c = Control::new(cancel.clone(), None, Duration::from_millis(1));
        std::thread::sleep(Duration::from_millis(5));
        cancel.cancel();
        assert_eq!(c.check().unwrap_err().code, ErrorCode::Timeout);
        let cancel = CancelToken::default();
        let c = Control::new(cancel.clone(), None, Duration::from_secs(3600));
        cancel.cancel();
        assert_eq!(c.check().unwrap_err().code, ErrorCode::Cancelled);
    }
}

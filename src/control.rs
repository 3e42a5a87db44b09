//! Call control: what stops a running call (a cancel flag, a deadline) and what reports
//! its progress. A leaf: the search engine and the tools take a [`Control`] without
//! knowing who made it (the MCP server, the CLI, a test).

use crate::error::{ErrorCode, ToolError, ToolResult};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
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
        }
    }

    /// Fails with `CANCELLED` or `TIMEOUT` when the call should stop. Long loops call it.
    pub fn check(&self) -> ToolResult<()> {
        if self.cancel.is_cancelled() {
            return Err(ToolError::new(
                ErrorCode::Cancelled,
                "the call was cancelled",
            ));
        }
        if let Some(d) = self.deadline
            && Instant::now() >= d
        {
            return Err(ToolError::new(
                ErrorCode::Timeout,
                format!(
                    "the call ran longer than {}",
                    humantime::format_duration(self.timeout)
                ),
            )
            .with_hint("narrow it down (a smaller path, a more specific pattern, fewer results)"));
        }
        Ok(())
    }

    /// Whether the call should stop now (cancelled or out of time).
    pub fn stopped(&self) -> bool {
        self.cancel.is_cancelled() || self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    pub fn progress(&self, p: Progress) {
        if let Some(sink) = &self.progress {
            sink(p);
        }
    }
}

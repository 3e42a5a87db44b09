//! ResourceLimiter (seed 004, layer 2): per-session budgets over a time window (a round),
//! plus the per-call limits tools consult.
//!
//! A round starts with a session's first request and lasts `round_window`; an embedding
//! host that has its own notion of a round (a debate turn, a task) calls
//! [`ResourceLimiter::reset_round`] instead of waiting. A limit of 0 is off.

use crate::config::Config;
use crate::error::{ErrorCode, ToolError, ToolResult};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The limits in force, copied out of the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    pub max_file_size: u64,
    pub max_files_per_request: usize,
    pub max_bytes_per_round: u64,
    pub max_requests_per_round: u64,
    pub request_timeout: Duration,
    pub round_window: Duration,
}

impl Limits {
    pub fn from_config(c: &Config) -> Limits {
        Limits {
            max_file_size: c.max_file_size,
            max_files_per_request: c.max_files_per_request,
            max_bytes_per_round: c.max_bytes_per_round,
            max_requests_per_round: c.max_requests_per_round,
            request_timeout: c.request_timeout,
            round_window: c.round_window,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Round {
    started: Instant,
    /// The session's last request or charge: the least recently used round goes first
    /// when the map is full.
    used: Instant,
    requests: u64,
    bytes: u64,
}

/// The most sessions whose rounds are kept at once. Sessions are named by what the
/// server established (a connection, a token, a peer), never by a client's string, so
/// a server rarely has more than a few; the bound holds whatever the caller names them.
pub const MAX_TRACKED_SESSIONS: usize = 4096;
/// A round untouched for this long is forgotten even when the window is off (when it is
/// on, a round past its window is forgotten: it would restart anyway).
pub const ROUND_IDLE: Duration = Duration::from_secs(3600);

/// What a session has used of its current round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct RoundUsage {
    pub requests: u64,
    pub bytes: u64,
}

#[derive(Debug)]
pub struct ResourceLimiter {
    limits: Limits,
    rounds: Mutex<HashMap<String, Round>>,
}

impl ResourceLimiter {
    pub fn new(limits: Limits) -> Self {
        ResourceLimiter {
            limits,
            rounds: Mutex::new(HashMap::new()),
        }
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    fn with_round<T>(&self, session: &str, f: impl FnOnce(&mut Round, Duration) -> T) -> T {
        let now = Instant::now();
        // A poisoned lock only means another call panicked mid-update of two counters;
        // the counters are still usable.
        let mut rounds = crate::error::lock(&self.rounds);
        if !rounds.contains_key(session) && rounds.len() >= MAX_TRACKED_SESSIONS {
            self.forget_stale(&mut rounds, now);
        }
        let round = rounds.entry(session.to_string()).or_insert(Round {
            started: now,
            used: now,
            requests: 0,
            bytes: 0,
        });
        round.used = now;
        if !self.limits.round_window.is_zero()
            && now.duration_since(round.started) >= self.limits.round_window
        {
            *round = Round {
                started: now,
                used: now,
                requests: 0,
                bytes: 0,
            };
        }
        let left = self
            .limits
            .round_window
            .saturating_sub(now.duration_since(round.started));
        f(round, left)
    }

    /// Makes room for a new session in a full map: forgets the rounds past their window
    /// or idle for [`ROUND_IDLE`], then, if none were, the least recently used quarter.
    fn forget_stale(&self, rounds: &mut HashMap<String, Round>, now: Instant) {
        let window = self.limits.round_window;
        rounds.retain(|_, r| {
            let ended = !window.is_zero() && now.duration_since(r.started) >= window;
            !ended && now.duration_since(r.used) < ROUND_IDLE
        });
        if rounds.len() < MAX_TRACKED_SESSIONS {
            return;
        }
        let mut used: Vec<Instant> = rounds.values().map(|r| r.used).collect();
        used.sort_unstable();
        let cut = used[used.len() / 4];
        rounds.retain(|_, r| r.used > cut);
    }

    /// How many sessions' rounds are kept (at most [`MAX_TRACKED_SESSIONS`]).
    pub fn tracked_sessions(&self) -> usize {
        crate::error::lock(&self.rounds).len()
    }

    /// Counts one request against the session's round.
    pub fn begin_request(&self, session: &str) -> ToolResult<()> {
        let max = self.limits.max_requests_per_round;
        self.with_round(session, |r, left| {
            if max > 0 && r.requests >= max {
                return Err(ToolError::new(
                    ErrorCode::RateLimitExceeded,
                    format!(
                        "this client made {max} requests in the current round, the most allowed"
                    ),
                )
                .with_hint(format!("the round resets in {}s", left.as_secs().max(1))));
            }
            r.requests += 1;
            Ok(())
        })
    }

    /// Charges bytes about to be returned to the session; refuses if they would go over
    /// the round's budget (nothing is charged then).
    pub fn charge_bytes(&self, session: &str, n: u64) -> ToolResult<()> {
        let max = self.limits.max_bytes_per_round;
        self.with_round(session, |r, left| {
            if max > 0 && r.bytes.saturating_add(n) > max {
                return Err(over_budget(n, max, r.bytes, left));
            }
            r.bytes += n;
            Ok(())
        })
    }

    /// Whether `n` more bytes would still fit the session's round budget; charges
    /// nothing. Tools ask before doing the work of a large answer.
    pub fn check_bytes(&self, session: &str, n: u64) -> ToolResult<()> {
        let max = self.limits.max_bytes_per_round;
        self.with_round(session, |r, left| {
            if max > 0 && r.bytes.saturating_add(n) > max {
                return Err(over_budget(n, max, r.bytes, left));
            }
            Ok(())
        })
    }

    /// Starts a new round for the session now.
    pub fn reset_round(&self, session: &str) {
        let mut rounds = crate::error::lock(&self.rounds);
        rounds.remove(session);
    }

    pub fn usage(&self, session: &str) -> RoundUsage {
        self.with_round(session, |r, _| RoundUsage {
            requests: r.requests,
            bytes: r.bytes,
        })
    }
}

fn over_budget(n: u64, max: u64, used: u64, left: Duration) -> ToolError {
    ToolError::new(
        ErrorCode::RoundLimitExceeded,
        format!("returning {n} more bytes would exceed this round's budget of {max} bytes ({used} used)"),
    )
    .with_hint(format!(
        "ask for less (offset/limit, max_results, a narrower path), or wait {}s for the round to reset",
        left.as_secs().max(1)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(requests: u64, bytes: u64, window: Duration) -> ResourceLimiter {
        ResourceLimiter::new(Limits {
            max_file_size: 0,
            max_files_per_request: 0,
            max_bytes_per_round: bytes,
            max_requests_per_round: requests,
            request_timeout: Duration::ZERO,
            round_window: window,
        })
    }

    #[test]
    fn requests_are_limited_per_session_and_reset() {
        let l = limiter(2, 0, Duration::from_secs(3600));
        l.begin_request("a").unwrap();
        l.begin_request("a").unwrap();
        assert_eq!(
            l.begin_request("a").unwrap_err().code,
            ErrorCode::RateLimitExceeded
        );
        l.begin_request("b").unwrap();
        l.reset_round("a");
        l.begin_request("a").unwrap();
    }

    #[test]
    fn bytes_are_limited_and_a_refused_charge_costs_nothing() {
        let l = limiter(0, 100, Duration::from_secs(3600));
        l.charge_bytes("s", 60).unwrap();
        assert_eq!(
            l.charge_bytes("s", 50).unwrap_err().code,
            ErrorCode::RoundLimitExceeded
        );
        l.charge_bytes("s", 40).unwrap();
        assert_eq!(l.usage("s").bytes, 100);
    }

    #[test]
    fn the_round_window_expires() {
        let l = limiter(1, 0, Duration::from_millis(50));
        l.begin_request("s").unwrap();
        assert!(l.begin_request("s").is_err());
        std::thread::sleep(Duration::from_millis(60));
        l.begin_request("s").unwrap();
    }

    #[test]
    fn the_map_of_rounds_stays_bounded_and_keeps_recent_sessions() {
        // A window that never ends within the test: only the size bound forgets.
        let l = limiter(1, 0, Duration::from_secs(3600));
        l.begin_request("kept").unwrap();
        for i in 0..3 * MAX_TRACKED_SESSIONS {
            l.begin_request(&format!("s{i}")).unwrap();
            if i % 512 == 0 {
                // A session in steady use is never the least recently used.
                assert!(l.begin_request("kept").is_err());
            }
            assert!(l.tracked_sessions() <= MAX_TRACKED_SESSIONS);
        }
        assert!(l.tracked_sessions() > MAX_TRACKED_SESSIONS / 2);
        assert!(
            l.begin_request("kept").is_err(),
            "a session in use lost its round"
        );
    }

    #[test]
    fn ended_rounds_are_forgotten_first() {
        let l = limiter(0, 0, Duration::from_millis(20));
        for i in 0..MAX_TRACKED_SESSIONS {
            l.begin_request(&format!("old{i}")).unwrap();
        }
        std::thread::sleep(Duration::from_millis(30));
        l.begin_request("new").unwrap();
        assert_eq!(l.tracked_sessions(), 1);
    }

    #[test]
    fn zero_disables() {
        let l = limiter(0, 0, Duration::ZERO);
        for _ in 0..1000 {
            l.begin_request("s").unwrap();
            l.charge_bytes("s", u64::MAX / 2000).unwrap();
        }
    }
}

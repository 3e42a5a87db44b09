//! What a tool call runs with: [`Ferret`] (the shared services: configuration, sandbox,
//! limiter, audit log, registry), the caller's [`Session`], and the per-call [`Ctx`]
//! handed to a tool's `run`.
//!
//! [`Ferret::call`] is the one entry point every front end uses. It applies the
//! request budget, the timeout and cancellation, runs the tool, and writes the audit
//! record, so no front end can forget one of them.

use crate::audit::{AuditEntry, AuditLogger, Outcome, now_rfc3339};
use crate::config::Config;
use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::limits::{Limits, ResourceLimiter};
use crate::registry::{CallOutput, Registry};
use crate::workspace::Workspace;
use serde_json::Value;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Who is calling: the session (one MCP connection, one CLI run) and the agent's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub id: String,
    pub agent_id: String,
}

impl Session {
    pub fn new(id: impl Into<String>, agent_id: impl Into<String>) -> Self {
        Session {
            id: id.into(),
            agent_id: agent_id.into(),
        }
    }
}

/// A flag a front end sets to stop a running call (MCP `notifications/cancelled`).
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    pub fn new() -> Self {
        Self::default()
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

/// Per-call options a front end may set.
#[derive(Clone, Default)]
pub struct CallOptions {
    pub cancel: CancelToken,
    pub progress: Option<ProgressSink>,
    /// The person at the front end has confirmed destructive operations for this call
    /// (the CLI's `--yes`, a shell's y/N prompt).
    pub confirmed: bool,
    /// Narrows the workspace for this call to these directories (absolute, canonical,
    /// each inside a root): the roots an MCP client shared. `None`: the whole workspace.
    pub scope: Option<Arc<Vec<std::path::PathBuf>>>,
}

/// The shared services. Build one per process (or per embedding host) and share it.
pub struct Ferret {
    config: Config,
    workspace: Workspace,
    limiter: ResourceLimiter,
    audit: AuditLogger,
    registry: Registry,
    /// Opened on the first change, so read-only use never creates a state directory.
    history: std::sync::OnceLock<Result<crate::history::History, String>>,
}

impl Ferret {
    /// Opens the workspace roots and the audit log named by `config`.
    pub fn new(config: Config) -> anyhow::Result<Self> {
        let workspace = Workspace::new(&config)?;
        let audit = match &config.audit_log {
            Some(p) => AuditLogger::to_file(p)?,
            None => AuditLogger::in_memory(),
        };
        let ferret = Ferret {
            limiter: ResourceLimiter::new(Limits::from_config(&config)),
            workspace,
            audit,
            registry: Registry::standard(),
            history: std::sync::OnceLock::new(),
            config,
        };
        // A workspace with a history is recovered at start: a change a killed process
        // left half-done is finished or rolled back before anything else looks at it.
        if crate::history::state_dir(&ferret.config, &ferret.workspace.canonical_roots())
            .is_ok_and(|d| d.join("journal.jsonl").exists())
        {
            let _ = ferret.history();
        }
        Ok(ferret)
    }

    pub fn config(&self) -> &Config {
        &self.config
    }
    pub fn workspace(&self) -> &Workspace {
        &self.workspace
    }
    pub fn limiter(&self) -> &ResourceLimiter {
        &self.limiter
    }
    pub fn audit(&self) -> &AuditLogger {
        &self.audit
    }
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The state directory, backups and undo journal.
    pub fn history(&self) -> ToolResult<&crate::history::History> {
        self.history
            .get_or_init(|| {
                let roots = self.workspace.canonical_roots();
                let h = crate::history::History::open(&self.config, &roots)
                    .map_err(|e| format!("{e:#}"))?;
                // Changes a killed process left half-done are settled before any new one.
                if let Err(e) = h.recover(&self.workspace) {
                    tracing::warn!(error = %e.message, "recovery of the journal failed");
                }
                Ok(h)
            })
            .as_ref()
            .map_err(|e| ToolError::new(ErrorCode::IoError, e.clone()))
    }

    /// Calls a tool by name with JSON arguments.
    pub fn call(
        &self,
        session: &Session,
        tool: &str,
        args: Value,
        opts: CallOptions,
    ) -> ToolResult<CallOutput> {
        let started = Instant::now();
        let audit_path = args.get("path").and_then(Value::as_str).map(str::to_string);
        let ctx = Ctx {
            ferret: self,
            session,
            cancel: opts.cancel,
            progress: opts.progress,
            scope: opts.scope,
            confirmed: opts.confirmed,
            deadline: Some(self.config.request_timeout)
                .filter(|d| !d.is_zero())
                .map(|d| started + d),
            timeout: self.config.request_timeout,
            bytes_read: AtomicU64::new(0),
            bytes_sent: AtomicU64::new(0),
            file_count: AtomicU64::new(0),
            path: Mutex::new(audit_path),
        };
        let result = match self.registry.get(tool) {
            None => Err(
                ToolError::new(ErrorCode::UnknownTool, format!("no tool named {tool:?}"))
                    .with_hint(format!(
                        "available tools: {}",
                        self.registry.names().join(", ")
                    )),
            ),
            Some(t) if t.meta().annotations.needs_write && !self.config.allow_write => Err(ToolError::new(
                ErrorCode::WriteDisabled,
                format!("{tool} changes files, and writes are disabled"),
            )
            .with_hint(
                "the user can enable them: --allow-write, FERRET_ALLOW_WRITE=true or allow_write = true in ferret.toml",
            )),
            Some(t) => self
                .limiter
                .begin_request(&session.id)
                .and_then(|()| t.call(&ctx, args))
                .and_then(|out| {
                    // Every byte sent counts: the text and the structured result both
                    // go on the wire (MCP sends both).
                    let sent = out.text.len() as u64 + out.structured.to_string().len() as u64;
                    self.limiter.charge_bytes(&session.id, sent)?;
                    ctx.bytes_sent.fetch_add(sent, Ordering::Relaxed);
                    Ok(out)
                }),
        };
        self.record(&ctx, tool, started, &result);
        result
    }

    fn record(&self, ctx: &Ctx, tool: &str, started: Instant, result: &ToolResult<CallOutput>) {
        let (outcome, code, reason) = match result {
            Ok(_) => (Outcome::Success, None, None),
            Err(e) => (
                if e.code.is_denial() {
                    Outcome::Denied
                } else {
                    Outcome::Error
                },
                Some(e.code.as_str().to_string()),
                Some(e.message.clone()),
            ),
        };
        self.audit.log(AuditEntry {
            timestamp: now_rfc3339(),
            session_id: ctx.session.id.clone(),
            agent_id: ctx.session.agent_id.clone(),
            operation: tool.to_string(),
            path: ctx.path.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            result: outcome,
            code,
            reason,
            bytes_read: ctx.bytes_read.load(Ordering::Relaxed),
            bytes_sent: ctx.bytes_sent.load(Ordering::Relaxed),
            file_count: ctx.file_count.load(Ordering::Relaxed),
            duration_ms: started.elapsed().as_secs_f64() * 1000.0,
        });
    }
}

/// What a tool's `run` may touch.
pub struct Ctx<'a> {
    ferret: &'a Ferret,
    session: &'a Session,
    cancel: CancelToken,
    progress: Option<ProgressSink>,
    scope: Option<Arc<Vec<std::path::PathBuf>>>,
    confirmed: bool,
    deadline: Option<Instant>,
    timeout: Duration,
    bytes_read: AtomicU64,
    bytes_sent: AtomicU64,
    file_count: AtomicU64,
    path: Mutex<Option<String>>,
}

impl<'a> Ctx<'a> {
    pub fn workspace(&self) -> &'a Workspace {
        &self.ferret.workspace
    }

    pub fn config(&self) -> &'a Config {
        &self.ferret.config
    }

    pub fn history(&self) -> ToolResult<&'a crate::history::History> {
        self.ferret.history()
    }

    pub fn limits(&self) -> &'a Limits {
        self.ferret.limiter.limits()
    }

    pub fn session(&self) -> &'a Session {
        self.session
    }

    /// Checks a path the agent gave (see [`Workspace::resolve`]) and, when the call is
    /// narrowed to a client's roots, that its real location lies inside one of them.
    pub fn resolve(&self, input: &str) -> ToolResult<crate::workspace::WsPath> {
        let ws = self.workspace();
        let wp = ws.resolve(input)?;
        let Some(scope) = &self.scope else {
            return Ok(wp);
        };
        let real = ws.real_path(&wp)?.unwrap_or_else(|| wp.clone());
        let abs = ws.walk_start(&real);
        if scope.iter().any(|d| abs.starts_with(d)) {
            return Ok(wp);
        }
        let shared: Vec<String> = scope.iter().map(|d| d.display().to_string()).collect();
        Err(ToolError::new(
            ErrorCode::PathEscape,
            format!("{input} is outside the roots this client shared"),
        )
        .with_hint(if shared.is_empty() {
            "the client shared no directory inside this workspace".to_string()
        } else {
            format!("use paths inside: {}", shared.join(", "))
        }))
    }

    /// Fails with `CONFIRMATION_REQUIRED` unless the user confirmed this call, or
    /// `allowed` (a setting that answers for them) is true.
    pub fn confirm(&self, what: &str, allowed: bool) -> ToolResult<()> {
        if self.confirmed || allowed {
            return Ok(());
        }
        Err(ToolError::new(ErrorCode::ConfirmationRequired, format!("{what} needs the user's confirmation"))
            .with_hint(
                "ask the user. On the command line they confirm with --yes; a server allows permanent deletes with \
                 --allow-permanent-delete, and the confirm list is the `confirm` setting",
            ))
    }

    /// The directories a search with no path covers: the client's shared roots when the
    /// call is narrowed, else every workspace root.
    pub fn scope(&self) -> Option<&[std::path::PathBuf]> {
        self.scope.as_deref().map(Vec::as_slice)
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

    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    pub fn cancel_token(&self) -> &CancelToken {
        &self.cancel
    }

    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Refuses early when about `n` bytes of answer would not fit the session's round
    /// budget. Nothing is charged here: [`Ferret::call`] charges every byte of the
    /// answer as sent, once it is made.
    pub fn charge_bytes(&self, n: u64) -> ToolResult<()> {
        self.ferret.limiter.check_bytes(&self.session.id, n)?;
        self.bytes_read.fetch_add(n, Ordering::Relaxed);
        Ok(())
    }

    /// Counts files touched, for the audit record.
    pub fn count_files(&self, n: u64) {
        self.file_count.fetch_add(n, Ordering::Relaxed);
    }

    /// Names the path the audit record shows (by default the `path` argument).
    pub fn set_audit_path(&self, path: impl Into<String>) {
        *self.path.lock().unwrap_or_else(|p| p.into_inner()) = Some(path.into());
    }

    pub fn progress(&self, p: Progress) {
        if let Some(sink) = &self.progress {
            sink(p);
        }
    }
}

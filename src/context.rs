//! The call path: [`Ferret`] owns the shared services (configuration, sandbox, limiter,
//! audit log, history, registry) and is the one way to run a tool.
//!
//! [`Ferret::call`] (JSON in, JSON and text out: MCP, `ferret call`) and
//! [`Ferret::call_typed`] (a tool's own `Params` in, its own `Output` out: the human
//! subcommands, the shell, the Rust API) share one wrapper, so both get the write gate,
//! the request budget, the deadline and cancellation, the byte charge and the audit
//! record; no front end can forget one of them.

use crate::audit::{AuditEntry, AuditLogger, Outcome};
use crate::config::Config;
use crate::control::{CancelToken, Control, ProgressSink};
use crate::error::{ErrorCode, SetupError, ToolError, ToolResult};
use crate::history::{History, HistoryCell};
use crate::limits::{Limits, ResourceLimiter};
use crate::registry::Registry;
use crate::tool::{CallOutput, Ctx, Services, Tool, ToolMeta};
use crate::workspace::Workspace;
use serde_json::Value;
use std::sync::Arc;
use std::time::Instant;

pub use crate::tool::Session;

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
    /// The most characters of this call's result (`max_output_chars`; 0: no limit), in
    /// place of the configuration's: `ferret call` answers within a server's budget.
    pub max_output_chars: Option<u64>,
    /// The most bytes (as stored) of an image sent as an image in this call, below
    /// `max_image_bytes`: what fits the front end's result cap (HTTP), if it has one.
    pub max_media_bytes: Option<u64>,
    /// The most bytes a read-only call's whole result may take (text, structured content
    /// and images, as sent), if the front end has a cap (HTTP): a bigger one is refused
    /// inside the call, so it is neither charged nor audited as a success.
    pub max_result_bytes: Option<u64>,
    /// With `confirmed` after a question: what the question's first run pinned
    /// ([`crate::error::ToolError::pins`]), for this run to check it still holds.
    pub asked_pins: Option<Vec<u64>>,
}

/// A typed call's result: the tool's own output and the text a person reads.
#[derive(Debug)]
pub struct Typed<O> {
    pub output: O,
    pub text: String,
}

/// The shared services. Build one per process (or per embedding host) and share it.
pub struct Ferret {
    config: Config,
    workspace: Workspace,
    limiter: ResourceLimiter,
    audit: AuditLogger,
    registry: Registry,
    history: HistoryCell,
    seen: crate::history::Seen,
    /// The live index searches use once built ([`Ferret::build_index`]).
    index: std::sync::Mutex<Option<Arc<crate::search::live::Live>>>,
    /// Warnings every call carries ([`Ferret::with_notices`]).
    notices: Vec<String>,
    /// Calls refused by the budgets are audited within this window: a client past its
    /// budget sends them as fast as the wire takes them.
    refusals: crate::audit::Window,
}

/// Calls the budgets refuse, audited one by one per [`REFUSAL_WINDOW`]; the rest are
/// counted in one record.
pub const REFUSALS_PER_WINDOW: u32 = 20;
/// See [`REFUSALS_PER_WINDOW`].
pub const REFUSAL_WINDOW: std::time::Duration = std::time::Duration::from_secs(10);

impl Ferret {
    /// Opens the workspace roots and the audit log named by `config`, with every tool
    /// ferret has.
    pub fn new(config: Config) -> Result<Self, SetupError> {
        Ferret::with_registry(config, crate::tools::standard())
    }

    /// The same with a registry of the caller's choosing (an embedding host's own tools).
    pub fn with_registry(config: Config, registry: Registry) -> Result<Self, SetupError> {
        let workspace = Workspace::new(&config)?;
        let audit = match &config.audit_log {
            Some(p) => AuditLogger::to_file(p)?,
            None => AuditLogger::in_memory(),
        };
        let ferret = Ferret {
            limiter: ResourceLimiter::new(Limits::from_config(&config)),
            workspace,
            audit,
            registry,
            history: HistoryCell::new(),
            seen: crate::history::Seen::new(),
            index: Default::default(),
            notices: Vec::new(),
            refusals: crate::audit::Window::new(REFUSALS_PER_WINDOW, REFUSAL_WINDOW),
            config,
        };
        // No recovery here: a change a killed process left half-done is settled just
        // before this process's first change, and only if it may write (a read-only
        // command changes nothing under the roots; see `HistoryCell`).
        Ok(ferret)
    }

    /// With warnings the agent must see whatever it calls (the workspace's own config
    /// hides almost everything, see `config::hides`): they are in the server's
    /// instructions, in every search and listing result that shows warnings, and in the
    /// hint of every error.
    pub fn with_notices(mut self, notices: Vec<String>) -> Self {
        self.notices = notices;
        self
    }

    /// The warnings given with [`Ferret::with_notices`].
    pub fn notices(&self) -> &[String] {
        &self.notices
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

    /// Builds the index of every root, watches the tree (`watch`) and has searches use
    /// it from then on. Searches stay exact whatever changes (see
    /// [`crate::search::live`]); until the build ends they scan.
    pub fn build_index(
        &self,
        cancel: crate::control::CancelToken,
        watch: bool,
    ) -> ToolResult<crate::search::index::Stats> {
        let control = crate::control::Control::new(cancel, None, std::time::Duration::ZERO);
        let env = crate::search::SearchEnv {
            workspace: &self.workspace,
            control: &control,
            max_file_size: self.config.search_max_file_size,
            max_columns: self.config.max_columns,
            index: None,
        };
        let persist = self.index_persist(true);
        let (live, stats) =
            crate::search::live::Live::start(&env, watch, self.index_bounds(), persist.as_ref())?;
        *crate::error::lock(&self.index) = Some(live);
        Ok(stats)
    }

    /// Writes the index in use to the state directory (if it holds anything the stored
    /// one does not) and maps it, letting go of the memory its lists took. Returns where
    /// it was written and its size; None when there was nothing to write (or no index,
    /// or no state directory to keep it in).
    pub fn save_index(&self) -> std::io::Result<Option<(std::path::PathBuf, u64)>> {
        let (Some(live), Some(p)) = (self.index(), self.index_persist(true)) else {
            return Ok(None);
        };
        Ok(live.save(&p)?.map(|n| (p.path, n)))
    }

    /// Has this process's searches use the index stored on disk (by `ferret index` or a
    /// server), without watching or walking first: they walk, and skip reading files
    /// whose stamp proves their content is the one indexed. False when there is none.
    pub fn use_stored_index(&self) -> bool {
        let Some(p) = self.index_persist(false) else {
            return false;
        };
        match crate::search::live::Live::stored(&p, self.index_bounds()) {
            Some(live) => {
                *crate::error::lock(&self.index) = Some(live);
                true
            }
            None => false,
        }
    }

    fn index_bounds(&self) -> crate::search::index::Bounds {
        crate::search::index::Bounds {
            files: self.config.index_max_files,
            bytes: self.config.index_max_bytes,
        }
    }

    /// Where this workspace's index is kept (in its state directory, which must lie
    /// outside every root), and what must hold for a stored one to be used: the same
    /// roots, rules deciding what a walk takes and reads, and ferret version. `create`:
    /// make the directory if need be (else None when it is not there).
    pub fn index_persist(&self, create: bool) -> Option<crate::search::live::Persist> {
        use sha2::{Digest, Sha256};
        use std::os::unix::fs::DirBuilderExt;
        let roots = self.workspace.canonical_roots();
        let dir = match crate::history::state_dir(&self.config, &roots) {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!("index: kept in memory only ({e})");
                return None;
            }
        };
        if create
            && let Err(e) = std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)
                .and_then(|()| crate::history::safe::check_state_dir(&dir))
        {
            tracing::warn!("index: kept in memory only ({}: {e})", dir.display());
            return None;
        }
        // Resolved, links and all: a state directory reached through a link into a
        // root would let the workspace write the index ferret trusts.
        let dir = match std::fs::canonicalize(&dir) {
            Ok(d) => d,
            // Not made yet: nothing stored to read, and nothing will be written there;
            // what exists of it resolved (`root/../state` is beside the root, not in it).
            Err(_) if !create => crate::workspace::canonical_lenient(&dir),
            Err(e) => {
                tracing::warn!("index: kept in memory only ({}: {e})", dir.display());
                return None;
            }
        };
        if roots.iter().any(|r| dir.starts_with(r)) {
            tracing::warn!("index: kept in memory only (the state directory is inside a root)");
            return None;
        }
        // Another user's directory would hold an index they wrote (answers they chose).
        if dir.exists()
            && let Err(e) = crate::history::safe::check_state_dir(&dir)
        {
            tracing::warn!("index: kept in memory only ({e})");
            return None;
        }
        let c = &self.config;
        let mut h = Sha256::new();
        h.update(env!("CARGO_PKG_VERSION"));
        let parts = roots
            .iter()
            .map(|r| r.to_string_lossy().into_owned())
            .chain(["\0deny".to_string()])
            .chain(c.deny_patterns().map(str::to_string))
            .chain(["\0skip".to_string()])
            .chain(c.skip_patterns().map(str::to_string))
            .chain(["\0rules".to_string()])
            .chain(self.workspace.rules_id())
            .chain(["\0ext".to_string()])
            .chain(c.allowed_extensions.iter().cloned())
            .chain([format!(
                "\0limits {} {}",
                c.search_max_file_size, c.max_path_depth
            )]);
        for p in parts {
            h.update(p.as_bytes());
            h.update([0]);
        }
        let mut fingerprint = [0u8; 16];
        fingerprint.copy_from_slice(&h.finalize()[..16]);
        Some(crate::search::live::Persist {
            path: crate::search::store::path_in(&dir),
            fingerprint,
        })
    }

    /// What the index in use holds, if there is one.
    pub fn index_status(&self) -> Option<crate::search::live::Status> {
        crate::error::lock(&self.index).as_ref().map(|i| i.status())
    }

    /// The index in use (tests simulate lost events through it).
    pub fn index(&self) -> Option<Arc<crate::search::live::Live>> {
        crate::error::lock(&self.index).clone()
    }

    /// The state directory, backups and undo journal, for a change: changes a killed
    /// process left half-done are settled first when writes are allowed.
    pub fn history(&self) -> ToolResult<&History> {
        self.history.get(&self.config, &self.workspace)
    }

    /// The same for showing it: nothing is settled (`history` changes nothing).
    pub fn history_read(&self) -> ToolResult<&History> {
        self.history.open(&self.config, &self.workspace)
    }

    fn services(&self) -> Services<'_> {
        Services {
            config: &self.config,
            workspace: &self.workspace,
            limiter: &self.limiter,
            history: &self.history,
            seen: &self.seen,
            index: crate::error::lock(&self.index).clone(),
        }
    }

    /// Calls a tool by name with JSON arguments.
    pub fn call(
        &self,
        session: &Session,
        tool: &str,
        args: Value,
        opts: CallOptions,
    ) -> ToolResult<CallOutput> {
        // Named in the record as the agent spelled them, for a call refused before its
        // tool knows the names as shown (round 30: a move refused onto a denied name
        // was recorded with no path at all).
        let audit_path = ["path", "source"]
            .iter()
            .find_map(|k| args.get(*k).and_then(Value::as_str))
            .map(str::to_string);
        let audit_paths = named_paths(&args);
        let Some(t) = self.registry.get(tool) else {
            let hint = format!("available tools: {}", self.registry.names().join(", "));
            return Err(self.refuse_unknown(session, tool, &hint));
        };
        let meta = t.meta();
        let dry_run = args.get("dry_run") == Some(&Value::Bool(true));
        let opts_max_result = opts.max_result_bytes;
        self.wrap(
            session,
            meta.name,
            audit_path,
            opts,
            |ctx| {
                ctx.set_audit_paths(audit_paths);
                self.gate(&meta, dry_run)?;
                let out = t.call(ctx, args)?;
                if let Some(max) = opts_max_result
                    && meta.annotations.read_only
                {
                    let media: u64 = out.media.iter().map(|m| m.data.len() as u64).sum();
                    let whole = crate::tool::json_str_len(&out.text)
                        + crate::tool::json_len(&out.structured)
                        + media;
                    if whole > max {
                        return Err(ToolError::new(
                            ErrorCode::ResultTooLarge,
                            format!(
                                "the result is {whole} bytes; this transport takes at most {max} bytes a result (clients drop larger events)"
                            ),
                        )
                        .with_hint("ask for less: a line range (offset and limit), a byte range for base64 reads, a narrower path or glob, or a lower max_results"));
                    }
                }
                Ok(out)
            },
            |out| {
                let media: u64 = out.media.iter().map(|m| m.data.len() as u64).sum();
                sent_once(
                    crate::tool::json_str_len(&out.text),
                    crate::tool::json_len(&out.structured),
                ) + media
            },
        )
    }

    /// Refuses a call of a tool that is not there (or not served) the way every call is
    /// answered: counted against the caller's budget, audit-logged, within the output
    /// budget. The name is the caller's and may be anything: it is cut to 64 characters
    /// and escaped before it is shown or logged.
    pub fn refuse_unknown(&self, session: &Session, tool: &str, hint: &str) -> ToolError {
        let shown: String = tool.chars().take(64).collect();
        let shown = if shown.len() < tool.len() {
            format!("{shown:?}…")
        } else {
            format!("{shown:?}")
        };
        let err = ToolError::new(
            ErrorCode::UnknownTool,
            format!("no tool named {shown} is served"),
        )
        .with_hint(hint.to_string());
        let name = crate::audit::clip(tool, crate::audit::MAX_NAME_BYTES);
        match self.wrap(
            session,
            &name,
            None,
            CallOptions::default(),
            |_| Err::<(), _>(err),
            |_| 0,
        ) {
            Err(e) => e,
            Ok(()) => ToolError::new(ErrorCode::UnknownTool, "no such tool"),
        }
    }

    /// Calls `tool` with its own typed parameters; returns its own typed output (and
    /// the text rendering). Renaming a field of a tool's `Params` breaks every caller at
    /// compile time.
    pub fn call_typed<T: Tool>(
        &self,
        session: &Session,
        tool: &T,
        params: T::Params,
        opts: CallOptions,
    ) -> ToolResult<Typed<T::Output>> {
        let meta = tool.meta();
        // Every tool names the path it works on for the audit record itself.
        self.wrap(
            session,
            meta.name,
            None,
            opts,
            |ctx| {
                self.gate(&meta, false)?;
                let output = tool.run(ctx, params)?;
                let text = crate::tool::fit_text(tool.render(&output), ctx.output_budget());
                Ok(Typed { output, text })
            },
            |t| {
                let json = serde_json::to_value(&t.output).map_or(0, |v| crate::tool::json_len(&v));
                sent_once(crate::tool::json_str_len(&t.text), json)
            },
        )
    }

    /// Refuses a write tool when writes are off, unless the call is a dry run (the
    /// `dry_run` argument, or the `dry_run` setting): a dry run writes nothing.
    fn gate(&self, meta: &ToolMeta, dry_run_call: bool) -> ToolResult<()> {
        let dry_run = dry_run_call || self.config.dry_run;
        if meta.annotations.needs_write && !self.config.allow_write && !dry_run {
            return Err(ToolError::new(
                ErrorCode::WriteDisabled,
                format!("{} changes files, and writes are disabled", meta.name),
            )
            .with_hint(
                "the user can enable them: --allow-write, FERRET_ALLOW_WRITE=true or allow_write = true in a \
                 user-level config",
            ));
        }
        // Every call, reads and dry runs too: a root moved under `.kube` is read as the
        // secret it now is (see `Workspace::roots_in_place`).
        self.workspace.roots_in_place()
    }

    /// The wrapper every call goes through: budget, deadline, cancellation, the charge
    /// for what the model receives (`sent` measures the answer), and the audit record.
    fn wrap<R>(
        &self,
        session: &Session,
        tool: &str,
        audit_path: Option<String>,
        opts: CallOptions,
        run: impl FnOnce(&Ctx) -> ToolResult<R>,
        sent: impl Fn(&R) -> u64,
    ) -> ToolResult<R> {
        let started = Instant::now();
        let control = Control::new(opts.cancel, opts.progress, self.config.request_timeout);
        for n in &self.notices {
            control.warnings.add_quiet(n);
        }
        let ctx = Ctx::new(
            self.services(),
            session,
            control,
            opts.scope,
            opts.confirmed,
            audit_path,
        )
        .with_output_chars(opts.max_output_chars)
        .with_media_bytes(opts.max_media_bytes)
        .with_asked_pins(opts.asked_pins.clone());
        let mut bytes_sent = 0;
        // Every change the call makes is recorded as this session's.
        let _as = crate::history::acting_as(session.owner());
        let result = self
            .limiter
            .begin_request(&session.budget)
            .and_then(|()| run(&ctx))
            .and_then(|out| {
                // What the model receives counts, once (see `sent_once`); a refused
                // answer is not sent, and the audit says 0.
                let n = sent(&out);
                self.limiter.charge_bytes(&session.budget, n)?;
                bytes_sent = n;
                Ok(out)
            });
        // Every error says what to do instead: one that has no hint of its own gets its
        // code's.
        let result = result.map_err(|e| match e.hint {
            Some(_) => e,
            None => {
                let hint = e.code.default_hint();
                e.with_hint(hint)
            }
        });
        // A call that failed (a TIMEOUT) still says what it met on the way: an ignore
        // file too large to use explains why a walk took long.
        let result = result.map_err(|e| {
            let warnings = ctx.control().warnings.list();
            if warnings.is_empty() {
                return e;
            }
            let hint = match &e.hint {
                Some(h) => format!("{h}. Met on the way: {}", warnings.join("; ")),
                None => format!("met on the way: {}", warnings.join("; ")),
            };
            e.with_hint(hint)
        });
        // An error is an answer too: within the output budget like any other. Except a
        // question for the user: it is asked whole, or the user would approve a change
        // whose paths were cut off.
        // The one way out for an error: whatever name or agent string it holds, no
        // control, direction or line-break character reaches the answer raw. A question
        // for the user stays whole (its paths escaped, never cut).
        let result = result.map_err(ToolError::escaped);
        let result = result.map_err(|e| match e.code {
            ErrorCode::ConfirmationRequired => e,
            _ => e.fit(ctx.output_budget()),
        });
        // What an error says goes on the wire too (a NO_MATCH diff carries the file's
        // nearest lines): charged like an answer, and past the budget refused like one
        // (errors read a file a few lines at a time, uncharged). The budget's own
        // refusals are not charged.
        let result = match result {
            Err(e)
                if !matches!(
                    e.code,
                    ErrorCode::RoundLimitExceeded | ErrorCode::RateLimitExceeded
                ) =>
            {
                let n = crate::tool::json_str_len(&e.message)
                    + e.hint.as_deref().map_or(0, crate::tool::json_str_len);
                match self.limiter.charge_bytes(&session.budget, n) {
                    Ok(()) => {
                        bytes_sent = n;
                        Err(e)
                    }
                    Err(over) => Err(over),
                }
            }
            other => other,
        };
        let error = result.as_ref().err();
        self.record(&ctx, session, tool, started, error, bytes_sent);
        result
    }

    fn record(
        &self,
        ctx: &Ctx,
        session: &Session,
        tool: &str,
        started: Instant,
        error: Option<&ToolError>,
        bytes_sent: u64,
    ) {
        // A budget's refusals within their window, the rest counted (said in the
        // window's first record after them).
        if let Some(e) = error
            && matches!(
                e.code,
                ErrorCode::RoundLimitExceeded | ErrorCode::RateLimitExceeded
            )
        {
            let (log, unlogged) = self.refusals.admit();
            if unlogged > 0 {
                self.audit.log(AuditEntry::refusal(
                    "tools/call",
                    "REFUSALS_NOT_LOGGED",
                    format!(
                        "{unlogged} more calls refused by the budgets in {} ms were not logged one by one",
                        REFUSAL_WINDOW.as_millis()
                    ),
                ));
            }
            if !log {
                return;
            }
        }
        let (outcome, code, reason) = match error {
            None => (Outcome::Success, None, None),
            Some(e) => (
                if e.code.is_denial() {
                    Outcome::Denied
                } else {
                    Outcome::Error
                },
                Some(e.code.as_str().to_string()),
                Some(e.message.clone()),
            ),
        };
        let (path, bytes_read, file_count) = ctx.audit_facts();
        self.audit.log(AuditEntry {
            timestamp: crate::clock::now_rfc3339(),
            session_id: session.id.clone(),
            principal: (session.budget != session.id).then(|| session.budget.clone()),
            agent_id: session.agent_id.clone(),
            operation: tool.to_string(),
            path,
            paths: ctx.audit_paths(),
            result: outcome,
            code,
            reason,
            bytes_read,
            bytes_sent,
            file_count,
            duration_ms: started.elapsed().as_secs_f64() * 1000.0,
            command: None,
            decision: None,
            exit_code: None,
            engine: ctx.engine().map(str::to_string),
        });
    }
}

/// The bytes an answer is charged to the round's byte budget (and the audit record's
/// `bytes_sent`): what a model receives of it, once. A result goes on the wire as text
/// and as structured JSON saying the same; a client hands its model one of the two (most
/// the text, some the structured content), never both as two answers. Which one is the
/// client's choice, so the charge is the larger: never less than what the model read,
/// never the sum (which charged every answer about twice, and ended a session's budget
/// at half of what it was given). Both are counted as the wire has them, escapes and all
/// (a text of control characters is six bytes a character there).
pub fn sent_once(text: u64, structured: u64) -> u64 {
    text.max(structured)
}

/// The paths a call's arguments name besides `path`/`source`, as spelled: a move's
/// destination, a patch's files and `Move to`s (structured or in its text). At most
/// [`crate::audit::MAX_PATHS`]; the record keeps no more.
fn named_paths(args: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(d) = args.get("destination").and_then(Value::as_str) {
        out.push(d.to_string());
    }
    for c in args
        .get("changes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        for k in ["path", "move_to"] {
            if let Some(p) = c.get(k).and_then(Value::as_str) {
                out.push(p.to_string());
            }
        }
        if out.len() >= crate::audit::MAX_PATHS {
            break;
        }
    }
    if let Some(text) = args.get("patch").and_then(Value::as_str) {
        const HEADS: [&str; 4] = [
            "*** Update File:",
            "*** Add File:",
            "*** Delete File:",
            "*** Move to:",
        ];
        for line in text.lines() {
            if out.len() >= crate::audit::MAX_PATHS {
                break;
            }
            let line = line.trim_start();
            if let Some(p) = HEADS.iter().find_map(|h| line.strip_prefix(h)) {
                out.push(p.trim().to_string());
            }
        }
    }
    out.truncate(crate::audit::MAX_PATHS);
    out
}

//! The MCP front end: one generic bridge from registry tools to MCP tools (rmcp), served
//! over stdio or streamable HTTP ([`http`]).
//!
//! No tool has MCP code of its own. `tools/list` is the registry's MCP export filtered by
//! the `tools` setting; `tools/call` hands the JSON arguments to [`Ferret::call`] on the
//! blocking pool (a slow search never holds up a `file_exists`), bridges the client's
//! cancellation to the call's [`CancelToken`] and the search's progress to
//! `notifications/progress`. A tool error is an `isError` result carrying the code and
//! the hint, never a protocol error, so the agent can read it and recover.

pub mod http;
pub mod stdio;

use crate::context::{CallOptions, Ferret, Session};
use crate::control::{CancelToken, Progress, ProgressSink};
use crate::error::ErrorCode;
use crate::registry::SchemaFormat;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequest,
    ElicitRequestParams, ElicitationSchema, GetPromptRequestParams, GetPromptResponse,
    GetPromptResult, Implementation, InputRequest, InputRequiredResult, ListPromptsResult,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, Prompt, PromptMessage,
    Role, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;

/// The state one server process shares across all its connections.
pub struct Shared {
    pub ferret: Arc<Ferret>,
    /// MCP definitions of the tools served, in registry order.
    tools: Vec<Tool>,
    instructions: String,
    /// Whether connections are HTTP, whose budgets are kept by client name rather than
    /// by connection.
    http: bool,
    /// Confirmation questions asked in an `input_required` result (2026-07-28) and not
    /// yet answered, by the `requestState` nonce sent with them.
    asked: std::sync::Mutex<std::collections::HashMap<String, Asked>>,
    /// Confirmation questions sent as `elicitation/create`: their limits, and how many
    /// each client has waiting for an answer.
    questions: Questions,
    open_questions: std::sync::Mutex<std::collections::HashMap<String, usize>>,
}

/// Limits on confirmation questions asked with `elicitation/create`, which a client can
/// leave unanswered: each waits at most `timeout` (or the request timeout, if shorter),
/// then the call is answered `CONFIRMATION_REQUIRED`; one client has at most
/// `per_client` waiting, and a call past that is answered so at once.
#[derive(Debug, Clone, Copy)]
pub struct Questions {
    pub timeout: std::time::Duration,
    pub per_client: usize,
}

/// The default wait for an answer to a confirmation question.
pub const QUESTION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);
/// The default number of questions one client may leave waiting.
pub const QUESTIONS_PER_CLIENT: usize = 2;
/// The most questions waiting at once, all clients together.
const MAX_OPEN_QUESTIONS: usize = 256;

impl Default for Questions {
    fn default() -> Questions {
        Questions {
            timeout: QUESTION_TIMEOUT,
            per_client: QUESTIONS_PER_CLIENT,
        }
    }
}

/// A question waiting for its answer, counted against its client until dropped.
struct OpenQuestion<'a> {
    shared: &'a Shared,
    client: String,
}

impl Drop for OpenQuestion<'_> {
    fn drop(&mut self) {
        let mut open = crate::error::lock(&self.shared.open_questions);
        if let Some(n) = open.get_mut(&self.client) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.client);
            }
        }
    }
}

/// A question the server asked: only an answer that echoes its nonce, for the same tool,
/// arguments and client, within ten minutes, counts; a client cannot pre-fill one.
struct Asked {
    tool: String,
    /// A digest of the arguments (keys sorted), not the arguments: they can be megabytes.
    args: [u8; 32],
    client: String,
    at: std::time::Instant,
    /// What the question was about, as the call saw it ([`crate::tool::Ctx::pin`]).
    pins: Vec<u64>,
}

/// The most unanswered questions kept at once.
const MAX_ASKED: usize = 256;

impl Shared {
    pub fn new(ferret: Arc<Ferret>, http: bool) -> anyhow::Result<Arc<Shared>> {
        Shared::with_questions(ferret, http, Questions::default())
    }

    pub fn with_questions(
        ferret: Arc<Ferret>,
        http: bool,
        questions: Questions,
    ) -> anyhow::Result<Arc<Shared>> {
        let enabled = served_tools(&ferret)?;
        let all = ferret.registry().export(SchemaFormat::Mcp);
        let tools = all
            .as_array()
            .into_iter()
            .flatten()
            .filter(|t| {
                t["name"]
                    .as_str()
                    .is_some_and(|n| enabled.iter().any(|e| e == n))
            })
            .map(|t| serde_json::from_value::<Tool>(t.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Arc::new(Shared {
            instructions: crate::prompt::instructions(&ferret, &enabled),
            ferret,
            tools,
            http,
            asked: Default::default(),
            questions,
            open_questions: Default::default(),
        }))
    }

    /// How long a question waits: [`Questions::timeout`]. Not the request timeout: that
    /// bounds the tool's own work (each run of the call has its own), and a person
    /// given the server's 5 s to read and answer a question could not (round 17).
    fn question_timeout(&self) -> std::time::Duration {
        self.questions
            .timeout
            .max(std::time::Duration::from_millis(100))
    }

    /// A place for one more question of `client`, or None when it has
    /// [`Questions::per_client`] waiting (or the server [`MAX_OPEN_QUESTIONS`]).
    fn open_question(&self, client: &str) -> Option<OpenQuestion<'_>> {
        let mut open = crate::error::lock(&self.open_questions);
        let total: usize = open.values().sum();
        let mine = open.get(client).copied().unwrap_or(0);
        if mine >= self.questions.per_client.max(1) || total >= MAX_OPEN_QUESTIONS {
            return None;
        }
        *open.entry(client.to_string()).or_insert(0) += 1;
        Some(OpenQuestion {
            shared: self,
            client: client.to_string(),
        })
    }
}

impl Shared {
    /// Records a question and returns the nonce that an answer must echo.
    fn ask(&self, tool: &str, args: &Value, client: &str, pins: Vec<u64>) -> String {
        let nonce = nonce();
        let mut asked = crate::error::lock(&self.asked);
        // A question asked in a result waits as long as one sent as `elicitation/create`
        // ([`Shared::question_timeout`]): a yes that comes later is not taken, and the
        // call asks again (round 20: a yes was taken 70 s after a 60 s timeout).
        let ttl = self.question_timeout();
        asked.retain(|_, a| a.at.elapsed() < ttl);
        // Each question keeps the call's arguments: a client asking and never answering
        // must not grow the map without end. The oldest questions go first.
        while asked.len() >= MAX_ASKED {
            let Some(oldest) = asked
                .iter()
                .min_by_key(|(_, a)| a.at)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            asked.remove(&oldest);
        }
        asked.insert(
            nonce.clone(),
            Asked {
                tool: tool.to_string(),
                args: digest(args),
                client: client.to_string(),
                at: std::time::Instant::now(),
                pins,
            },
        );
        nonce
    }

    /// Whether `state` answers a live question for this call; the question is used up.
    /// The pins of the question `state` names, if this server asked it of this client
    /// about this call (tool and arguments), lately; the question is then used up.
    fn take_asked(&self, state: &str, tool: &str, args: &Value, client: &str) -> Option<Vec<u64>> {
        let mut asked = crate::error::lock(&self.asked);
        asked.remove(state).and_then(|a| {
            (a.at.elapsed() < self.question_timeout()
                && a.tool == tool
                && a.args == digest(args)
                && a.client == client)
                .then_some(a.pins)
        })
    }
}

/// SHA-256 of a JSON value written with its object keys sorted, so that two equal values
/// have one digest whatever their key order.
fn digest(v: &Value) -> [u8; 32] {
    use sha2::Digest;
    fn canonical(v: &Value, out: &mut sha2::Sha256) {
        match v {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.update(b"{");
                for k in keys {
                    out.update(Value::String(k.clone()).to_string().as_bytes());
                    out.update(b":");
                    canonical(&map[k.as_str()], out);
                    out.update(b",");
                }
                out.update(b"}");
            }
            Value::Array(items) => {
                out.update(b"[");
                for i in items {
                    canonical(i, out);
                    out.update(b",");
                }
                out.update(b"]");
            }
            other => out.update(other.to_string().as_bytes()),
        }
    }
    let mut h = sha2::Sha256::new();
    canonical(v, &mut h);
    h.finalize().into()
}

/// 128 bits from the operating system's random source, hex.
fn nonce() -> String {
    use std::io::Read;
    let mut b = [0u8; 16];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .is_err()
    {
        // No urandom: the std hasher's per-process random keys, over a counter and time.
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write(uuid_like().as_bytes());
        b[..8].copy_from_slice(&h.finish().to_le_bytes());
    }
    hex::encode(b)
}

/// The tools the server lists: the `tools` setting, minus write tools when writes are
/// off. Unknown names are a startup error.
pub fn served_tools(ferret: &Ferret) -> anyhow::Result<Vec<String>> {
    let registry = ferret.registry();
    let chosen = &ferret.config().tools;
    for name in chosen {
        if registry.get(name).is_none() {
            anyhow::bail!(
                "unknown tool {name:?} in the tools setting; available: {}",
                registry.names().join(", ")
            );
        }
    }
    Ok(registry
        .tools()
        .map(|t| t.meta())
        .filter(|m| {
            if chosen.is_empty() {
                m.served_by_default
            } else {
                chosen.iter().any(|n| n == m.name)
            }
        })
        .filter(|m| !m.annotations.needs_write || ferret.config().allow_write)
        .map(|m| m.name.to_string())
        .collect())
}

/// One MCP connection (stdio) or session (HTTP).
#[derive(Clone)]
pub struct FerretServer {
    shared: Arc<Shared>,
    connection: String,
    roots: Arc<tokio::sync::Mutex<ClientRoots>>,
    /// Set when the client says its roots changed: fetched again on the next call.
    roots_stale: Arc<std::sync::atomic::AtomicBool>,
}

/// The longest progress token (as JSON) progress notifications echo.
const MAX_PROGRESS_TOKEN: usize = 256;

/// How long a call waits for the client's answer to `roots/list`.
const ROOTS_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The client's roots, fetched on the first call and again after `roots/list_changed`.
#[derive(Default)]
struct ClientRoots {
    fetched: bool,
    scope: Option<Arc<Vec<PathBuf>>>,
}

impl FerretServer {
    pub fn new(shared: Arc<Shared>) -> Self {
        FerretServer {
            shared,
            connection: format!("mcp-{}", uuid_like()),
            roots: Arc::default(),
            roots_stale: Arc::default(),
        }
    }

    /// The directories this connection is narrowed to. Roots from the command line are
    /// authoritative; a client that shares roots (a handshake session whose client has the
    /// roots capability; 2026-07-28 removed them) narrows them to the parts inside its
    /// roots, never widens them. An empty list narrows nothing.
    // Roots are deprecated (SEP-2577) because 2026-07-28 dropped them; they are used here
    // only for the older sessions that still have them.
    #[allow(deprecated)]
    async fn client_scope(&self, ctx: &RequestContext<RoleServer>) -> Option<Arc<Vec<PathBuf>>> {
        let info = ctx.peer.peer_info()?;
        info.capabilities.roots.as_ref()?;
        let mut state = self.roots.lock().await;
        if self
            .roots_stale
            .swap(false, std::sync::atomic::Ordering::Relaxed)
        {
            state.fetched = false;
        }
        if !state.fetched {
            // A client that never answers (or whose answer the framing refuses as too
            // big) must not pin the call, and with it the session's slot, for ever: past
            // the wait the call goes on as if the client had no roots.
            let asked = tokio::time::timeout(ROOTS_WAIT, ctx.peer.list_roots()).await;
            state.scope = match asked {
                Err(_) => {
                    tracing::warn!(
                        "the client did not answer roots/list within {} s; not narrowing",
                        ROOTS_WAIT.as_secs()
                    );
                    None
                }
                Ok(Ok(r)) if r.roots.is_empty() => None,
                Ok(Ok(r)) => {
                    let uris: Vec<&str> = r.roots.iter().map(|r| r.uri.as_str()).collect();
                    let scope = narrow(self.shared.ferret.workspace(), &uris);
                    if scope.is_empty() {
                        tracing::warn!(
                            ?uris,
                            "the client's roots share nothing with the workspace"
                        );
                    }
                    Some(Arc::new(scope))
                }
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "could not list the client's roots; not narrowing");
                    None
                }
            };
            state.fetched = true;
        }
        state.scope.clone()
    }

    fn session(&self, ctx: &RequestContext<RoleServer>) -> Session {
        // The client's name is its own claim: it goes into the audit records (cut to a
        // bound), never into the key of a budget.
        let agent = ctx
            .client_info()
            .map(|i| crate::audit::clip(&i.name, crate::audit::MAX_NAME_BYTES))
            .unwrap_or_else(|| "unknown".into());
        // Budgets follow what the server established, not the connection nor what a
        // client says: over HTTP every 2026-07-28 request is a fresh handler and a legacy
        // client can open as many sessions as it likes, so rounds are kept per principal
        // (the bearer token, or without one the peer), which the HTTP gate sets.
        // The session itself (undo ownership, the audit record) is the connection or MCP
        // session the server issued.
        if self.shared.http {
            let parts = ctx.extensions.get::<axum::http::request::Parts>();
            let principal = parts
                .and_then(|p| p.extensions.get::<http::Principal>())
                .map_or_else(|| "http-unknown".to_string(), |p| p.0.clone());
            // In an MCP session, its id (issued by the server, checked by rmcp before the
            // request reaches here): the audit's tool records then carry the id its
            // session_open record names. Stateless requests keep the connection's.
            let id = parts
                .and_then(|p| p.headers.get("mcp-session-id"))
                .and_then(|v| v.to_str().ok())
                .map_or_else(|| self.connection.clone(), session_label);
            Session::new(id, agent).with_budget(principal)
        } else {
            Session::new(self.connection.clone(), agent)
        }
    }
}

/// The name an HTTP session goes by in everything ferret records or shows (audit
/// records, the journal's owner, `history`, an undo's question): a digest of the
/// `Mcp-Session-Id` the server issued, never the id itself. The id is the session's
/// credential: a refusal that named it would hand it to another session, which could
/// then act as its owner (undo its changes unasked, or end it). 64 bits of a digest of a
/// random id keep sessions apart across restarts, as the journal outlives the server.
pub fn session_label(sid: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(sid.as_bytes());
    format!("http-{}", &hex::encode(digest)[..16])
}

fn uuid_like() -> String {
    use std::time::{SystemTime, UNIX_EPOCH};
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{:x}-{:x}-{n}", std::process::id(), nanos)
}

/// The one prompt: the server's instructions (the tools served, the roots, how to work
/// with them), for hosts that let a person put them into a conversation by hand, as
/// `ferret prompt` does for hosts that write their own system prompt.
const GUIDE_PROMPT: &str = "ferret";
const GUIDE_DESCRIPTION: &str = "How to search, read and change this workspace with ferret's tools: the server's instructions for the tools it serves";

fn guide_prompt() -> Prompt {
    let mut p = Prompt::new(GUIDE_PROMPT, Some(GUIDE_DESCRIPTION), None);
    p.title = Some("Use ferret's tools".into());
    p
}

impl ServerHandler for FerretServer {
    fn get_info(&self) -> ServerConfig {
        // Every capability declared is one this handler answers: the suite's discover
        // check (and a careful client) reads an undeclared answer as a broken server.
        let caps = ServerCapabilities::builder()
            .enable_tools()
            .enable_prompts()
            .build();
        ServerConfig::new(caps)
            .with_server_info(Implementation::new("ferret", env!("CARGO_PKG_VERSION")))
            .with_instructions(self.shared.instructions.clone())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        Ok(ListPromptsResult::with_all_items(vec![guide_prompt()]))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        if request.name != GUIDE_PROMPT {
            return Err(McpError::invalid_params(
                format!(
                    "no prompt named {:?}; this server has one: {GUIDE_PROMPT:?}",
                    // The client's string, cut: an error is no echo chamber.
                    request.name.chars().take(64).collect::<String>()
                ),
                Some(json!({ "prompts": [GUIDE_PROMPT] })),
            ));
        }
        let text = PromptMessage::new_text(Role::User, self.shared.instructions.clone());
        Ok(GetPromptResult::new(vec![text])
            .with_description(GUIDE_DESCRIPTION)
            .into())
    }

    async fn on_roots_list_changed(&self, _ctx: rmcp::service::NotificationContext<RoleServer>) {
        // A flag, not the lock: while a call waits (up to 5 s) on an unanswered
        // roots/list, each notification awaiting the lock was held as a task, and a flood
        // of them took 1.5 GB.
        self.roots_stale
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.shared.tools.clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.to_string();
        let session = self.session(&ctx);
        if !self.shared.tools.iter().any(|t| t.name == name) {
            let served: Vec<&str> = self.shared.tools.iter().map(|t| t.name.as_ref()).collect();
            let hint = if self.shared.ferret.registry().get(&name).is_some() {
                "it is switched off on this server (the tools setting, or writes are disabled)"
                    .to_string()
            } else {
                format!("available tools: {}", served.join(", "))
            };
            // Through the same wrapper as every call: budget, audit, output budget.
            let e = self.shared.ferret.refuse_unknown(&session, &name, &hint);
            return Ok(error_result(e.code, &e.message, e.hint.as_deref()).into());
        }
        let args = Value::Object(request.arguments.unwrap_or_default());

        let cancel = CancelToken::new();
        // The token is echoed in every notification (one per ~1 000 files searched): a
        // client's megabytes of token came back hundreds of times, outside every budget.
        // One longer than a token needs gets no progress.
        let token = ctx
            .meta
            .get_progress_token()
            .filter(|t| serde_json::to_string(t).is_ok_and(|s| s.len() <= MAX_PROGRESS_TOKEN));
        let progress = token.map(|token| {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Progress>();
            let peer = ctx.peer.clone();
            tokio::spawn(async move {
                while let Some(p) = rx.recv().await {
                    let mut param =
                        ProgressNotificationParam::new(token.clone(), p.files_searched as f64);
                    param.message = Some(format!(
                        "{} files searched, {} matches",
                        p.files_searched, p.matches
                    ));
                    if peer.notify_progress(param).await.is_err() {
                        break;
                    }
                }
            });
            Arc::new(move |p: Progress| {
                let _ = tx.send(p);
            }) as ProgressSink
        });
        // (Questions are kept for the principal the server established, as budgets are:
        // over HTTP each 2026-07-28 request is a connection of its own, so its answer
        // comes on another one, and was never matched to its question; round 19.)
        // A 2026-07-28 client answers our confirmation question by sending the call again
        // with the user's answer in input_responses and our requestState. An answer to a
        // question this server did not ask (no or unknown state, other tool, arguments or
        // client) is ignored: the question is asked again.
        let asked_pins = request
            .input_responses
            .as_ref()
            .and_then(|r| r.get(CONFIRM_KEY))
            .and_then(|answer| {
                let pins = request.request_state.as_deref().and_then(|state| {
                    self.shared.take_asked(state, &name, &args, &session.budget)
                })?;
                Some((answer, pins))
            });
        let answer = asked_pins.as_ref().map(|(a, _)| *a);
        let answered = answer.is_some_and(accepted);
        let mut opts = CallOptions {
            cancel: cancel.clone(),
            progress,
            scope: self.client_scope(&ctx).await,
            confirmed: answered,
            asked_pins: asked_pins
                .as_ref()
                .filter(|_| answered)
                .map(|(_, pins)| pins.clone()),
            // Over HTTP an image is refused by the tool itself when its base64 would not
            // fit a result: refused before it is read, charged or audited as a success.
            max_media_bytes: self.shared.http.then_some(HTTP_MAX_IMAGE_BYTES),
            // And any other read-only result too big to send: refused in the call (not
            // charged, audited as the error it is), with room left for the envelope.
            max_result_bytes: self
                .shared
                .http
                .then_some(HTTP_MAX_RESULT_BYTES as u64 - HTTP_ENVELOPE_BYTES),
            ..CallOptions::default()
        };
        let mut outcome = self.run(&session, &name, &args, opts.clone(), &ctx).await;
        if let Err(e) = &outcome
            && e.code == ErrorCode::ConfirmationRequired
            && answer.is_none()
            && ctx
                .client_capabilities()
                .is_some_and(|c| c.elicitation.is_some())
        {
            let params = ElicitRequestParams::FormElicitationParams {
                meta: None,
                message: format!("{}. Allow it?", e.message),
                requested_schema: ElicitationSchema::builder()
                    .required_bool(CONFIRM_FIELD)
                    .build()
                    .map_err(|e| McpError::internal_error(e.to_string(), None))?,
            };
            // By the version this request names (as rmcp judges it), not by whether
            // the session said hello: a stateless HTTP request on a server that had
            // sessions before was sent an elicitation rmcp refused (round 19).
            let stateless = ctx.peer.peer_info().is_none()
                || ctx
                    .protocol_version()
                    .is_some_and(|v| v >= rmcp::model::ProtocolVersion::V_2026_07_28);
            if stateless {
                // 2026-07-28 forbids server-to-client requests: ask in the result.
                let requests = std::collections::BTreeMap::from([(
                    CONFIRM_KEY.to_string(),
                    InputRequest::Elicitation(ElicitRequest::new(params)),
                )]);
                let mut result = InputRequiredResult::from_input_requests(requests);
                result.request_state =
                    Some(
                        self.shared
                            .ask(&name, &args, &session.budget, e.pins.clone()),
                    );
                return Ok(CallToolResponse::InputRequired(result));
            }
            let pins = e.pins.clone();
            match self.ask_client(&ctx, &session, params).await {
                Answered::Yes => {
                    opts.confirmed = true;
                    opts.asked_pins = Some(pins);
                    outcome = self.run(&session, &name, &args, opts, &ctx).await;
                }
                Answered::No => {}
                Answered::Unanswered(why) => {
                    let e = crate::error::ToolError::new(
                        ErrorCode::ConfirmationRequired,
                        format!("{}; {why}", e.message),
                    )
                    .with_hint(unanswered_hint(e.hint.as_deref()));
                    outcome = Err(e);
                }
            }
        }
        // The memory an image's bytes were admitted with stays taken until its answer is
        // built (and, over HTTP, measured).
        let mut _held = Vec::new();
        let result = match outcome {
            Ok(out) => {
                let mut content = vec![ContentBlock::text(out.text)];
                content.extend(out.media.into_iter().map(|m| {
                    _held.push(m.held);
                    ContentBlock::image(m.data, m.mime_type)
                }));
                let mut r = CallToolResult::success(content);
                r.structured_content = Some(out.structured);
                r
            }
            Err(e) => error_result(e.code, &e.message, e.hint.as_deref()),
        };
        if self.shared.http {
            let changes = self
                .shared
                .ferret
                .registry()
                .get(&name)
                .is_some_and(|t| !t.meta().annotations.read_only);
            return Ok(fit_for_http(result, changes).into());
        }
        Ok(result.into())
    }
}

/// The most bytes one result may take over HTTP, serialized. A client may drop the whole
/// session over a bigger event (the Python SDK refuses SSE events over 1 MiB); the rest
/// of the 1 MiB is left for the JSON-RPC envelope and the SSE framing.
pub const HTTP_MAX_RESULT_BYTES: usize = 1_000_000;

/// What a result's JSON-RPC envelope, SSE framing and content-block wrappers may take of
/// [`HTTP_MAX_RESULT_BYTES`].
pub const HTTP_ENVELOPE_BYTES: u64 = 4_096;

/// The most bytes of an image sent over HTTP: its base64 (4 bytes per 3) with room left
/// for the text, the structured result and the envelope fits [`HTTP_MAX_RESULT_BYTES`].
pub const HTTP_MAX_IMAGE_BYTES: u64 = (HTTP_MAX_RESULT_BYTES as u64 - 16_384) / 4 * 3;

/// A result that fits [`HTTP_MAX_RESULT_BYTES`]: itself, or an error saying what to ask
/// for instead. A change that was made keeps its structured account when that fits, so
/// the client still learns what happened.
fn fit_for_http(mut r: CallToolResult, changes: bool) -> CallToolResult {
    let size = |r: &CallToolResult| serde_json::to_vec(r).map_or(usize::MAX, |v| v.len());
    let total = size(&r);
    if total <= HTTP_MAX_RESULT_BYTES {
        return r;
    }
    if changes {
        r.content = vec![ContentBlock::text(format!(
            "[the change was made; its result ({total} bytes) is over the {HTTP_MAX_RESULT_BYTES} bytes a result may take over HTTP; undo reverses it]"
        ))];
        if size(&r) <= HTTP_MAX_RESULT_BYTES {
            return r;
        }
        return error_result(
            ErrorCode::ResultTooLarge,
            "the change was made, but its result is too large to send over HTTP",
            Some("undo reverses it; `ferret history` on the command line shows it"),
        );
    }
    if r.content
        .iter()
        .any(|c| matches!(c, ContentBlock::Image(_)))
    {
        return error_result(
            ErrorCode::ResultTooLarge,
            &format!(
                "the image is {total} bytes as sent; over HTTP a result may take at most {HTTP_MAX_RESULT_BYTES} bytes (clients drop larger events)"
            ),
            Some("make a smaller copy of the image (scale it down or crop it) and read that"),
        );
    }
    error_result(
        ErrorCode::ResultTooLarge,
        &format!(
            "the result is {total} bytes; over HTTP a result may take at most {HTTP_MAX_RESULT_BYTES} bytes (clients drop larger events)"
        ),
        Some(
            "ask for less: a line range (offset and limit), a byte range for base64 reads, a narrower path or glob, or a lower max_results",
        ),
    )
}

/// The parts of the workspace inside the client's roots (`file://` URIs): a client root
/// inside a workspace root narrows to it; one containing a workspace root keeps that root
/// whole; others are ignored.
pub fn narrow(ws: &crate::workspace::Workspace, uris: &[&str]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for uri in uris {
        let Some(path) = url::Url::parse(uri)
            .ok()
            .and_then(|u| u.to_file_path().ok())
        else {
            continue;
        };
        let Ok(path) = std::fs::canonicalize(&path) else {
            continue;
        };
        for root in ws.roots() {
            if path.starts_with(&root.canonical) {
                out.push(path.clone());
            } else if root.canonical.starts_with(&path) {
                out.push(root.canonical.clone());
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// What became of a confirmation question sent with `elicitation/create`.
enum Answered {
    Yes,
    No,
    /// Not asked (too many waiting) or not answered in time: why.
    Unanswered(String),
}

/// The hint of a call whose question went unanswered (`asked`: the question's own
/// hint). A setting that lets it through unasked is named only where the question's own
/// hint names one, a permanent delete's (round 30: every unanswered question, an undo of
/// another's change included, was told to take its path out of `confirm`).
fn unanswered_hint(asked: Option<&str>) -> String {
    let mut hint = "answer the confirmation question when the client shows it, then retry; else the user runs it \
         with --yes on the command line (`ferret edit`, `ferret write`, `ferret mv`, `ferret rm`, `ferret undo`)"
        .to_string();
    if asked.is_some_and(|h| h.contains("allow_permanent_delete")) {
        hint.push_str(
            ". Without permanent the delete goes to the trash and needs no confirmation (undo restores it); the \
             user can allow permanent deletes with the `allow_permanent_delete` setting",
        );
    }
    hint
}

impl FerretServer {
    /// Asks the client the question, waiting at most the question timeout; at most
    /// [`Questions::per_client`] of one client's wait at once. While it waits, the
    /// request's connection and session count as idle (either may be closed to make
    /// room: a client can leave a question unanswered for ever).
    async fn ask_client(
        &self,
        ctx: &RequestContext<RoleServer>,
        session: &Session,
        params: ElicitRequestParams,
    ) -> Answered {
        let parts = ctx.extensions.get::<axum::http::request::Parts>();
        // Over HTTP, the client the session table knows (its host); else the session's
        // budget key (the connection).
        let client = parts
            .and_then(|p| p.extensions.get::<http::Client>())
            .map_or_else(|| session.budget.clone(), |c| c.0.clone());
        let Some(_slot) = self.shared.open_question(&client) else {
            return Answered::Unanswered(format!(
                "not asked: {} confirmation questions from this client address (its sessions together) are already waiting for an answer",
                self.shared.questions.per_client.max(1)
            ));
        };
        let _waiting = http::waiting_for_answer(parts);
        let timeout = self.shared.question_timeout();
        match ctx
            .peer
            .create_elicitation_with_timeout(params, Some(timeout))
            .await
        {
            Ok(answer) => {
                if serde_json::to_value(&answer).is_ok_and(|v| accepted(&v)) {
                    Answered::Yes
                } else {
                    Answered::No
                }
            }
            Err(rmcp::service::ServiceError::Timeout { .. }) => Answered::Unanswered(format!(
                "the question went unanswered for {}",
                humantime::format_duration(timeout)
            )),
            Err(err) => {
                tracing::warn!(error = %err, "elicitation failed");
                Answered::No
            }
        }
    }
}

/// The key of ferret's confirmation question among a call's input requests.
const CONFIRM_KEY: &str = "ferret_confirm";
/// The yes/no field of the confirmation form.
const CONFIRM_FIELD: &str = "confirm";

/// Whether an elicitation answer (`{"action":"accept","content":{"confirm":true}}`) says yes.
fn accepted(answer: &Value) -> bool {
    answer["action"] == "accept" && answer["content"][CONFIRM_FIELD] == Value::Bool(true)
}

/// How long past its deadline a read-only call's answer waits for the call's own
/// TIMEOUT (or result) before the server answers TIMEOUT for it.
const ANSWER_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

impl FerretServer {
    /// Runs a tool on the blocking pool, stopping it when the client cancels or (a
    /// read-only one) when it runs past its deadline.
    async fn run(
        &self,
        session: &Session,
        name: &str,
        args: &Value,
        opts: CallOptions,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<crate::tool::CallOutput, crate::error::ToolError> {
        let cancel = opts.cancel.clone();
        let ferret = self.shared.ferret.clone();
        // A read-only call is answered at its deadline whatever its thread does: a
        // search inside one buffer (a regex on a slow engine) cannot look at the clock.
        // The thread is told to stop and keeps what it was admitted with until it
        // really ends, so the memory budget stays true. A call that writes is waited
        // for: its answer must say whether it changed files.
        let timeout = ferret.config().request_timeout;
        let read_only = ferret
            .registry()
            .get(name)
            .is_some_and(|t| t.meta().annotations.read_only);
        let overdue = async move {
            if read_only && !timeout.is_zero() {
                tokio::time::sleep(timeout + ANSWER_GRACE).await;
            } else {
                std::future::pending::<()>().await;
            }
        };
        let (session, name, args) = (session.clone(), name.to_string(), args.clone());
        let job = tokio::task::spawn_blocking(move || ferret.call(&session, &name, args, opts));
        tokio::pin!(job);
        let joined = tokio::select! {
            r = &mut job => r,
            () = ctx.ct.cancelled() => {
                cancel.cancel();
                job.await
            }
            () = overdue => {
                cancel.cancel();
                return Err(crate::error::ToolError::new(
                    ErrorCode::Timeout,
                    format!(
                        "the call ran longer than {}",
                        humantime::format_duration(timeout)
                    ),
                )
                .with_hint("narrow it down (a smaller path, a more specific pattern, fewer results)"));
            }
        };
        joined.unwrap_or_else(|join| {
            Err(crate::error::ToolError::new(
                ErrorCode::IoError,
                format!("the tool failed: {join}"),
            ))
        })
    }
}

fn error_result(code: ErrorCode, message: &str, hint: Option<&str>) -> CallToolResult {
    let mut text = format!("{code}: {message}");
    if let Some(h) = hint {
        text.push_str(&format!("\nHint: {h}"));
    }
    let mut r = CallToolResult::error(vec![ContentBlock::text(text)]);
    r.meta = serde_json::from_value(
        json!({ "ferret/error": { "code": code, "message": message, "hint": hint } }),
    )
    .ok();
    r
}

/// Serves MCP on standard input and output until the client hangs up. Logs go to stderr.
pub async fn serve_stdio(ferret: Arc<Ferret>, questions: Questions) -> anyhow::Result<()> {
    use rmcp::ServiceExt;
    let rejections = Arc::new(http::Rejections::on(ferret.clone(), "stdio"));
    // At the end of input the calls under way finish and are answered: as long as a
    // call may run, and a question wait, and a margin.
    let drain =
        ferret.config().request_timeout + questions.timeout + std::time::Duration::from_secs(10);
    let shared = Shared::with_questions(ferret, false, questions)?;
    // ferret's own framing (stdio.rs): every request line is answered, and every line
    // out is written whole by one writer.
    // When both are pipes (as MCP clients start servers) they are read and written on
    // the reactor, not a blocking thread: a read never left waiting keeps the runtime
    // from ending once the client hangs up.
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    let (out, queue) = stdio::channel();
    let writer = tokio::spawn(stdio::write_out(stdout, queue));
    let transport = stdio::Framed::new(stdin, out)
        .audited(rejections)
        .draining(drain);
    let server = FerretServer::new(shared)
        .serve(transport)
        .await
        .map_err(|e| anyhow::anyhow!("MCP handshake failed: {e}"))?;
    let mut writer = writer;
    tokio::select! {
        done = server.waiting() => {
            done?;
            // The transport is gone: the writer drains what is queued, then ends.
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), writer).await;
        }
        // The writer ended first: stdout is closed, so nothing more can be said; the
        // service is dropped (cancelled) rather than left reading requests it cannot
        // answer (it sometimes went on for ever while stdin kept coming).
        _ = &mut writer => {}
    }
    Ok(())
}

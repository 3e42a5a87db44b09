//! Streamable HTTP transport at `/mcp`, and an unauthenticated `GET /health` that
//! answers `{"status":"ok"}` and nothing else (see [`HEALTH_PATH`]).
//!
//! Safe by default: binds loopback; a non-loopback address needs a bearer token; the token
//! is checked on every request in constant time (401 otherwise); `Host` and `Origin` are
//! checked against allow-lists by rmcp (403), which protects a local server from DNS
//! rebinding by a web page; SIGINT/SIGTERM stop it gracefully. All sessions share one
//! [`Ferret`]: the undo journal, the limits and the audit log.
//!
//! Bounded under hostile load (each bound a test in `tests/mcp/test_interop.py`):
//! - budgets: rounds are charged to a [`Principal`] the server established (the token,
//!   else the peer address; every loopback address is one peer), never to a name the
//!   client chose; names kept in memory or logs are cut to 256 bytes, and an
//!   `initialize` (kept for its session's life) is at most [`MAX_INITIALIZE_BYTES`];
//! - connections: at most `max_connections` at once; at the cap the oldest connection
//!   doing nothing useful (sending its headers or body, idle, or else holding only a
//!   standalone event stream) is closed to make room, and one peer holds at most half the
//!   cap of idle ones; only when all are answering requests is a new one closed. The
//!   open-file soft limit is raised to the hard one at start. A request's headers must
//!   arrive within `read_timeout`, which also closes idle keep-alive connections
//!   (slowloris), and a write the client accepts nothing of for as long fails (a stream
//!   nobody reads);
//! - bodies: at most `max_body_bytes` (413), arriving within `read_timeout` (408);
//! - sessions: an `initialize` is a request of the principal's budget (429 past it);
//!   one client (its host, see [`Client`]) holds at most `max_sessions_per_client`
//!   (default [`fair_share`]), its next `initialize` closing its own least recently used
//!   idle one; at `max_sessions` a new `initialize` closes the least recently used idle
//!   session of the client holding the most (pings keep a session recent, never make
//!   its client hold fewer), and gets 503 only when every candidate has a request under
//!   way; each closed after [`SESSION_IDLE`] without requests, its memory handed back;
//!   every open, close and eviction an audit record; at most [`STREAMS_PER_SESSION`]
//!   event streams each (429);
//! - questions (`elicitation/create`, see [`super::Questions`]): a call waiting only for
//!   the client's answer leaves its connection closable like a stream's and its session
//!   idle; it is answered CONFIRMATION_REQUIRED when the question's time is up;
//! - health: when every connection is answering a request, up to [`HEALTH_RESERVE`]
//!   more are let in and answered at [`HEALTH_PATH`] only (503 elsewhere);
//! - `Host` and `Origin`: sent twice (any spelling), as a list, or against a request
//!   target naming another host: 400, before rmcp's allow-lists read only the first;
//! - every rejection (400 for those, 401, 403, 408, 413, 429, 503, connections closed
//!   for room or over the cap) is an audit record, at most [`REJECTIONS_PER_WINDOW`] per
//!   [`REJECTION_WINDOW`], then one record saying how many more there were.

use super::{FerretServer, Shared};
use crate::audit::{AuditEntry, Outcome};
use crate::context::Ferret;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq;
use tokio_util::sync::CancellationToken;

/// At the connection cap, a connection younger than this that has not sent its request
/// yet is closed only when no stream can be.
pub const CONNECTION_GRACE: Duration = Duration::from_millis(500);
/// The default for [`HttpOptions::read_timeout`].
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a finished request's events are kept for a client resuming its stream.
pub const COMPLETED_CACHE_TTL: Duration = Duration::from_secs(10);
/// A session with no request for this long is closed.
pub const SESSION_IDLE: Duration = Duration::from_secs(300);
/// Rejections audit-logged one by one per window; the rest are counted.
pub const REJECTIONS_PER_WINDOW: u32 = 20;
pub const REJECTION_WINDOW: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
pub struct HttpOptions {
    pub addr: SocketAddr,
    pub token: Option<String>,
    /// Extra `Host` values to accept (beyond loopback names and the bound address).
    pub allowed_hosts: Vec<String>,
    /// Extra `Origin` values to accept (beyond http://localhost and loopback addresses).
    pub allowed_origins: Vec<String>,
    pub max_body_bytes: usize,
    /// Connections served at once; more are closed as they are accepted.
    pub max_connections: usize,
    /// Live sessions; at the cap a new `initialize` closes an idle one of the client
    /// holding the most, or gets 503 when none is idle.
    pub max_sessions: usize,
    /// A request's headers, and then its body, must each arrive within this; an idle
    /// keep-alive connection is closed after it.
    pub read_timeout: Duration,
    /// Live sessions one client (see [`client_key`]) may hold; 0: [`fair_share`] of
    /// `max_sessions`.
    pub max_sessions_per_client: usize,
    /// Confirmation questions: how long one waits, how many one client may leave open.
    pub questions: super::Questions,
}

/// A client's share of the session table when none is set: an eighth, at least 4.
pub fn fair_share(max_sessions: usize) -> usize {
    (max_sessions / 8).max(4)
}

/// Refuses what must not start: a non-loopback bind without a token.
pub fn check(opts: &HttpOptions) -> anyhow::Result<()> {
    if !opts.addr.ip().is_loopback() && opts.token.as_deref().is_none_or(str::is_empty) {
        anyhow::bail!(
            "refusing to serve on {} without a token: anyone who can reach that address could use \
             the workspace. Set --token (or FERRET_TOKEN), or bind 127.0.0.1",
            opts.addr
        );
    }
    Ok(())
}

pub async fn serve_http(ferret: Arc<Ferret>, opts: HttpOptions) -> anyhow::Result<()> {
    check(&opts)?;
    raise_open_file_limit();
    let shared = Shared::with_questions(ferret.clone(), true, opts.questions)?;
    let stop = CancellationToken::new();
    let listener = tokio::net::TcpListener::bind(opts.addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot bind {}: {e}", opts.addr))?;
    let bound = listener.local_addr()?;

    let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1"].map(String::from).to_vec();
    if !bound.ip().is_loopback() {
        hosts.push(bound.ip().to_string());
    }
    hosts.extend(opts.allowed_hosts.iter().cloned());
    let mut origins: Vec<String> = ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"]
        .map(String::from)
        .to_vec();
    origins.extend(opts.allowed_origins.iter().cloned());
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts.clone())
        .with_allowed_origins(origins)
        .with_max_request_body_bytes(opts.max_body_bytes)
        .with_cancellation_token(stop.child_token());
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(SESSION_IDLE);
    // rmcp keeps each finished request's events for a client that resumes its stream;
    // at the default minute, a busy server holds a minute of every answer it sent.
    // Clients resume within seconds (the SDK retries after 3 s) or not at all.
    sessions.session_config.completed_cache_ttl = COMPLETED_CACHE_TTL;
    let sessions = Arc::new(sessions);
    let service = StreamableHttpService::new(
        move || Ok(FerretServer::new(shared.clone())),
        sessions.clone(),
        config,
    );
    let per_client = match opts.max_sessions_per_client {
        0 => fair_share(opts.max_sessions),
        n => n,
    };
    let gate = Arc::new(Gate {
        hosts: hosts.clone(),
        token: opts.token.clone().filter(|t| !t.is_empty()),
        max_body: opts.max_body_bytes,
        read_timeout: opts.read_timeout,
        max_sessions: opts.max_sessions,
        sessions: sessions.clone(),
        table: SessionTable::new(opts.max_sessions, per_client),
        ferret: ferret.clone(),
        streams: Streams::default(),
        log: Rejections::new(ferret.clone()),
    });
    let sweeper = gate.clone();
    let app = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn(
            move |req: Request, next: Next| {
                let gate = gate.clone();
                async move { gate.admit(req, next).await }
            },
        ));
    tokio::spawn(trim_after_sessions_end(sessions, stop.clone()));
    // Sessions rmcp closed on its own (idle for SESSION_IDLE) leave the table, audited.
    let sweep_stop = stop.clone();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = sweep_stop.cancelled() => return,
                () = tokio::time::sleep(Duration::from_secs(5)) => {}
            }
            sweeper.reconcile().await;
        }
    });

    // Tests and scripts read the bound address (port 0 picks a free one).
    eprintln!("ferret: serving MCP at http://{bound}/mcp");
    let log = Rejections::new(ferret);
    accept_loop(listener, app, &opts, &log, &stop).await;
    Ok(())
}

/// Raises the soft limit on open files to the hard limit, so that the connection cap,
/// not the descriptor table, is what bounds the connections served. Returns the soft
/// limit in force.
pub fn raise_open_file_limit() -> Option<u64> {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current != limit.maximum {
        let raised = rustix::process::Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        };
        match setrlimit(Resource::Nofile, raised) {
            Ok(()) => limit.current = limit.maximum,
            Err(e) => tracing::warn!(error = %e, "cannot raise the open-file limit"),
        }
    }
    // None is unlimited.
    Some(limit.current.unwrap_or(u64::MAX))
}

/// Accepts connections until SIGINT/SIGTERM, at most `max_connections` at once, then
/// lets the open ones finish (up to five seconds).
///
/// At the cap a new connection is not refused while an older one is doing nothing
/// useful: the oldest connection with no request under way (still sending its headers
/// or its body, or idle between requests) is closed to make room, else the oldest that
/// only holds a standalone event stream (GET, which a client reopens). Only when every
/// connection is answering a request is the new one closed. One peer address may hold
/// at most half the cap of such idle connections: past it, its own oldest goes.
async fn accept_loop(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    opts: &HttpOptions,
    log: &Rejections,
    stop: &CancellationToken,
) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    // HTTP/1.1 only (what MCP clients speak): its header timeout runs from the moment a
    // connection opens, where HTTP/2 detection would first wait for bytes unbounded.
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(opts.read_timeout);
    let table = Arc::new(Connections::new(opts.max_connections));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors or the like: wait for connections to close
                    // rather than spin.
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let (id, state, kill) = match table.admit(peer.ip()) {
            Admitted::Yes {
                id,
                state,
                kill,
                evicted,
            } => {
                if state.health_only {
                    log.reject(
                        "connection",
                        "TOO_MANY_CONNECTIONS",
                        format!(
                            "{peer}: over {} connections at once, all answering requests; \
                             served {HEALTH_PATH} only",
                            opts.max_connections
                        ),
                    );
                }
                if let Some(old) = evicted {
                    log.reject(
                        "connection",
                        "CONNECTION_EVICTED",
                        format!(
                            "{old}: closed to make room for {peer} (it had no request under way)"
                        ),
                    );
                }
                (id, state, kill)
            }
            Admitted::No => {
                log.reject(
                    "connection",
                    "TOO_MANY_CONNECTIONS",
                    format!(
                        "{peer}: over {} connections at once, all answering requests; closed",
                        opts.max_connections
                    ),
                );
                drop(stream);
                continue;
            }
        };
        let app = app.clone();
        let conn_state = state.clone();
        let svc =
            hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
                // A connection let in over the cap (the reserve kept for health checks)
                // is answered at /health only.
                let over = conn_state.health_only && req.uri().path() != HEALTH_PATH;
                let stream = req.method() == Method::GET;
                let busy = Busy::new(conn_state.clone(), stream);
                req.extensions_mut().insert(Peer(peer));
                req.extensions_mut().insert(conn_state.clone());
                let app = app.clone();
                async move {
                    if over {
                        return Ok(busy_response().map(|b| Body::new(Guarded(b, busy))));
                    }
                    let r = tower::ServiceExt::oneshot(app, req).await?;
                    Ok::<_, std::convert::Infallible>(r.map(|b| Body::new(Guarded(b, busy))))
                }
            });
        let io = TokioIo::new(TimedIo::new(stream, opts.read_timeout));
        let conn = builder.serve_connection(io, svc);
        let conn = graceful.watch(conn);
        let table = table.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = conn => {}
                () = kill.cancelled() => {}
            }
            table.remove(id);
        });
    }
    // Long-lived streams end when their sessions do.
    stop.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(5), graceful.shutdown()).await;
}

/// The answer on a connection let in only for `/health`.
fn busy_response() -> Response {
    let mut r = (
        StatusCode::SERVICE_UNAVAILABLE,
        "every connection this server serves is answering a request; retry shortly\n",
    )
        .into_response();
    let h = r.headers_mut();
    h.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    h.insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

/// Connections beyond `max_connections` kept for health checks: when every connection
/// is answering a request, a new one is still let in, to be answered at [`HEALTH_PATH`]
/// only (503 elsewhere); the oldest of these goes when more come.
pub const HEALTH_RESERVE: usize = 4;

/// What a connection is doing, for choosing which to close at the cap.
#[derive(Default)]
struct ConnState {
    /// Let in over the cap, from the reserve: served at [`HEALTH_PATH`] only.
    health_only: bool,
    /// Of the requests under way, tool calls waiting only for the client's answer to a
    /// confirmation question (which a client can leave unanswered).
    questions: AtomicU32,
    /// Requests under way (until their response body ends).
    busy: AtomicU32,
    /// Of those, requests whose body is still being read.
    reading: AtomicU32,
    /// Of those, standalone event streams (GET).
    streams: AtomicU32,
}

impl ConnState {
    /// 0: nothing under way but input still arriving (or nothing at all); 1: only event
    /// streams; 2: answering a request.
    fn class(&self) -> u8 {
        let busy = self.busy.load(Ordering::Acquire);
        let reading = self.reading.load(Ordering::Acquire);
        let streams = self.streams.load(Ordering::Acquire);
        let questions = self.questions.load(Ordering::Acquire);
        if busy <= reading {
            0
        } else if busy <= reading + streams + questions {
            1
        } else {
            2
        }
    }
}

/// A request under way on a connection, until its response body is dropped.
struct Busy {
    state: Arc<ConnState>,
    stream: bool,
}

impl Busy {
    fn new(state: Arc<ConnState>, stream: bool) -> Busy {
        state.busy.fetch_add(1, Ordering::AcqRel);
        if stream {
            state.streams.fetch_add(1, Ordering::AcqRel);
        }
        Busy { state, stream }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.state.busy.fetch_sub(1, Ordering::AcqRel);
        if self.stream {
            self.state.streams.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// A response body that holds `G` until it ends or is dropped.
struct Guarded<G>(Body, G);

impl<G: Unpin> http_body::Body for Guarded<G> {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.0).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.0.size_hint()
    }
}

/// The open connections, oldest first.
struct Connections {
    max: usize,
    /// How long a new connection is spared while streams can be closed instead.
    grace: Duration,
    /// The most idle connections (class 0) one peer address may hold.
    per_peer_idle: usize,
    /// Connections let in over `max` for health checks.
    reserve: usize,
    table: Mutex<(u64, std::collections::BTreeMap<u64, Open>)>,
}

struct Open {
    peer: std::net::IpAddr,
    opened: Instant,
    state: Arc<ConnState>,
    kill: CancellationToken,
}

enum Admitted {
    Yes {
        id: u64,
        state: Arc<ConnState>,
        kill: CancellationToken,
        /// The peer of a connection closed to make room.
        evicted: Option<std::net::IpAddr>,
    },
    No,
}

impl Connections {
    fn new(max: usize) -> Connections {
        let max = max.max(1);
        Connections {
            max,
            grace: CONNECTION_GRACE,
            per_peer_idle: (max / 2).max(1),
            reserve: HEALTH_RESERVE,
            table: Mutex::new((0, std::collections::BTreeMap::new())),
        }
    }

    fn admit(&self, peer: std::net::IpAddr) -> Admitted {
        let mut t = crate::error::lock(&self.table);
        let (next, open) = &mut *t;
        let idle_of_peer = || {
            open.iter()
                .filter(|(_, c)| c.peer == peer && !c.state.health_only && c.state.class() == 0)
                .map(|(id, _)| *id)
        };
        let mut evict = None;
        let mut health_only = false;
        if idle_of_peer().count() >= self.per_peer_idle {
            evict = idle_of_peer().next();
        }
        let served = open.values().filter(|c| !c.state.health_only).count();
        if evict.is_none() && served >= self.max {
            // A connection just opened has not had the time to send its headers: it goes
            // after the streams, and the oldest first (a flood's, not the newcomer's).
            let grace = self.grace;
            let pick = |class: u8, young: bool| {
                open.iter()
                    .find(|(_, c)| {
                        !c.state.health_only
                            && c.state.class() == class
                            && (young || c.opened.elapsed() >= grace)
                    })
                    .map(|(id, _)| *id)
            };
            evict = pick(0, false)
                .or_else(|| pick(1, true))
                .or_else(|| pick(0, true));
            if evict.is_none() {
                // Every connection is answering a request: the newcomer is let in to the
                // reserve (a health check must get its answer), the reserve's oldest
                // going when it is full; a reserve of none refuses it.
                let reserved = || open.iter().filter(|(_, c)| c.state.health_only);
                if self.reserve == 0 {
                    return Admitted::No;
                }
                if reserved().count() >= self.reserve {
                    evict = reserved()
                        .find(|(_, c)| c.opened.elapsed() >= grace)
                        .or_else(|| reserved().next())
                        .map(|(id, _)| *id);
                }
                health_only = true;
            }
        }
        let evicted = evict.and_then(|id| open.remove(&id)).map(|old| {
            old.kill.cancel();
            old.peer
        });
        *next += 1;
        let id = *next;
        let state = Arc::new(ConnState {
            health_only,
            ..ConnState::default()
        });
        let kill = CancellationToken::new();
        open.insert(
            id,
            Open {
                peer,
                opened: Instant::now(),
                state: state.clone(),
                kill: kill.clone(),
            },
        );
        Admitted::Yes {
            id,
            state,
            kill,
            evicted,
        }
    }

    fn remove(&self, id: u64) {
        crate::error::lock(&self.table).1.remove(&id);
    }
}

/// A connection whose writes fail once the peer has accepted nothing for `timeout`: a
/// client that stops reading (an event stream never read, a large answer left in the
/// socket) gives its connection back instead of holding it for ever.
struct TimedIo<T> {
    inner: T,
    timeout: Duration,
    stalled: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
}

impl<T> TimedIo<T> {
    fn new(inner: T, timeout: Duration) -> TimedIo<T> {
        TimedIo {
            inner,
            timeout,
            stalled: None,
        }
    }

    /// After a write came back pending: an error once it has been pending too long.
    fn pending<R>(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<R>> {
        let timeout = self.timeout;
        let sleep = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match sleep.as_mut().poll(cx) {
            std::task::Poll::Ready(()) => std::task::Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the client accepted nothing within the write timeout",
            ))),
            std::task::Poll::Pending => std::task::Poll::Pending,
        }
    }
}

impl<T: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for TimedIo<T> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for TimedIo<T> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        match std::pin::Pin::new(&mut self.inner).poll_write(cx, buf) {
            std::task::Poll::Pending => self.pending(cx),
            done => {
                self.stalled = None;
                done
            }
        }
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        match std::pin::Pin::new(&mut self.inner).poll_write_vectored(cx, bufs) {
            std::task::Poll::Pending => self.pending(cx),
            done => {
                self.stalled = None;
                done
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match std::pin::Pin::new(&mut self.inner).poll_flush(cx) {
            std::task::Poll::Pending => self.pending(cx),
            done => {
                self.stalled = None;
                done
            }
        }
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The client's address, for the audit records of rejections.
#[derive(Clone, Copy)]
struct Peer(SocketAddr);

/// Who a request's budget is charged to: what the server established, never a name the
/// client chose. With a token, every holder of the token (one per server) is one
/// principal; without one, the peer's address (every loopback address is one peer).
#[derive(Clone, Debug)]
pub struct Principal(pub String);

fn principal(token: bool, peer: Option<SocketAddr>) -> Principal {
    // A dual-stack listener sees IPv4 peers as ::ffff:a.b.c.d: the IPv4 address is who
    // they are (else every IPv4 client would share one IPv6 /64, and 127.0.0.1 would
    // not be loopback).
    let ip = peer.map(|p| p.ip().to_canonical());
    Principal(match ip {
        _ if token => "http-token".to_string(),
        Some(ip) if ip.is_loopback() => "http-loopback".to_string(),
        Some(ip) => match ip {
            std::net::IpAddr::V4(ip) => format!("http-{ip}"),
            // One host usually holds a whole /64.
            std::net::IpAddr::V6(ip) => {
                let s = ip.segments();
                format!("http-{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
            }
        },
        None => "http-unknown".to_string(),
    })
}

/// What every request passes before rmcp sees it.
struct Gate {
    /// The `Host` values served (rmcp's allow-list; checked here for [`HEALTH_PATH`],
    /// which rmcp never sees).
    hosts: Vec<String>,
    token: Option<String>,
    max_body: usize,
    read_timeout: Duration,
    max_sessions: usize,
    sessions: Arc<LocalSessionManager>,
    /// Who holds which session, and what each is doing.
    table: SessionTable,
    ferret: Arc<Ferret>,
    streams: Streams,
    log: Rejections,
}

impl Gate {
    async fn admit(&self, mut req: Request, next: Next) -> Response {
        let peer_addr = req.extensions().get::<Peer>().map(|p| p.0);
        let peer = peer_addr.map_or_else(|| "?".to_string(), |p| p.to_string());
        // The target as sent (an absolute-form `http://evil.example/mcp` names its host).
        let what = crate::audit::clip(
            &format!("{} {}", req.method(), req.uri()),
            crate::audit::MAX_NAME_BYTES,
        );
        let seen = |req: &Request, name: header::HeaderName| {
            let all: Vec<String> = req
                .headers()
                .get_all(name)
                .iter()
                .map(|v| {
                    String::from_utf8_lossy(v.as_bytes())
                        .chars()
                        .take(100)
                        .collect::<String>()
                })
                .take(4)
                .collect();
            (!all.is_empty()).then(|| all.join(" | "))
        };
        let (host, origin) = (seen(&req, header::HOST), seen(&req, header::ORIGIN));
        let who = principal(self.token.is_some(), peer_addr);
        let budget_key = who.0.clone();
        req.extensions_mut().insert(who);
        req.extensions_mut().insert(Client(client_key(peer_addr)));
        let mut response = self.pass(req, next).await;
        let refused = response.extensions().get::<Refused>().map(|r| r.0);
        // What rmcp refuses past the checks here (a bad header, an unknown session, a
        // wrong method or media type) is a request like any other: counted against the
        // principal's budget (429 past it) and audited, or a client could send them
        // without end unseen; and what it says is cut short (round 22: a header that
        // did not match a 4 MB tool name was answered with the name, 4 MB a request).
        if refused.is_none() && matches!(response.status().as_u16(), 400 | 404 | 405 | 406 | 415) {
            response = match self.ferret.limiter().begin_request(&budget_key) {
                Err(e) => self.too_many(&e),
                Ok(()) => clip_refusal(response).await,
            };
        }
        let status = response.status();
        if refused.is_some()
            || matches!(
                status.as_u16(),
                400 | 401 | 403 | 404 | 405 | 406 | 408 | 413 | 415 | 429 | 503
            )
        {
            let mut reason = format!("{peer}: {what}");
            if let Some(why) = refused {
                reason.push_str(&format!(": {why}"));
            }
            if status == StatusCode::FORBIDDEN || status == StatusCode::BAD_REQUEST {
                reason.push_str(&format!(
                    " (Host {}, Origin {})",
                    host.as_deref().unwrap_or("-"),
                    origin.as_deref().unwrap_or("-")
                ));
            }
            self.log
                .reject("http", &format!("HTTP_{}", status.as_u16()), reason);
        }
        response
    }

    async fn pass(&self, req: Request, next: Next) -> Response {
        let health = req.uri().path() == HEALTH_PATH;
        if let Some(expected) = &self.token
            && !health
            && !token_matches(&req, expected)
        {
            let mut r =
                (StatusCode::UNAUTHORIZED, "missing or wrong bearer token\n").into_response();
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return r;
        }
        if let Some(why) = ambiguous_host_or_origin(&req) {
            return refuse(StatusCode::BAD_REQUEST, why);
        }
        // A protocol version is a date: one far longer is refused here, short (rmcp
        // echoed the whole header back, 50 KB a request); a short unsupported one is
        // rmcp's to answer as the protocol says (the conformance suite checks it).
        if let Some(v) = req.headers().get("mcp-protocol-version")
            && v.len() > 64
        {
            let why = "unsupported MCP-Protocol-Version (a version is a date: 2025-06-18)";
            let who = req
                .extensions()
                .get::<Principal>()
                .map_or_else(|| "http-unknown".to_string(), |p| p.0.clone());
            return self.charge_refusal(&who, refuse(StatusCode::BAD_REQUEST, why), why);
        }
        // An absolute-form target names a host of its own, which HTTP says wins over the
        // Host header the checks below read: a client of this server (not a proxy) has no
        // reason to send one.
        if req.uri().authority().is_some() {
            return refuse(
                StatusCode::BAD_REQUEST,
                "an absolute-form request target (send the path, with the host in Host)",
            );
        }
        if let Some(h) = req.headers().get(header::HOST)
            && !well_formed_host(h.as_bytes())
        {
            return refuse(
                StatusCode::FORBIDDEN,
                "Host is not a well-formed authority (no user, a port of digits without leading zeros)",
            );
        }
        // rmcp matches `http://localhost:*` against the host and a port it parses
        // leniently (`http://localhost:evil.com` passed): only a well-formed origin
        // reaches its allow-list.
        if let Some(origin) = req.headers().get(header::ORIGIN)
            && !well_formed_origin(origin.as_bytes())
        {
            return (
                StatusCode::FORBIDDEN,
                "Origin is not a well-formed origin\n",
            )
                .into_response();
        }
        if health {
            return self.health(&req);
        }
        let sid = req
            .headers()
            .get("mcp-session-id")
            .map(|v| crate::audit::clip(&String::from_utf8_lossy(v.as_bytes()), 256));
        if req.method() == Method::DELETE {
            // rmcp answers a session's end with 202; the Python SDK takes anything but
            // 200/204 for a failure and warns on every close. Nothing is pending after
            // a DELETE, so 204 is the truthful answer.
            let mut r = next.run(req).await;
            if r.status() == StatusCode::ACCEPTED {
                *r.status_mut() = StatusCode::NO_CONTENT;
            }
            if r.status().is_success()
                && let Some(sid) = &sid
                && let Some(gone) = self.table.forget(sid)
            {
                self.session_record(sid, &gone, "session_close", "closed by its client (DELETE)");
            }
            return r;
        }
        // Every request of a session marks it used (pings too: they keep a session
        // from being the least recently used, not from being its client's to give up).
        let activity = sid.as_deref().and_then(|id| self.table.touch(id));
        if req.method() == Method::GET {
            // Each standalone event stream holds a connection: a few per session.
            let Some(_stream) = req
                .headers()
                .get("mcp-session-id")
                .and_then(|id| self.streams.open(id.as_bytes()))
            else {
                if req.headers().contains_key("mcp-session-id") {
                    let mut r = refuse(StatusCode::TOO_MANY_REQUESTS, "too many event streams");
                    *r.body_mut() = Body::from(format!(
                        "this session has {STREAMS_PER_SESSION} event streams open, the most \
                         allowed; close one before opening another\n"
                    ));
                    return r;
                }
                return next.run(req).await;
            };
            return next.run(req).await.map(|b| Body::new(Guarded(b, _stream)));
        }
        if req.method() != Method::POST {
            return next.run(req).await;
        }
        // A request under way in a session, until its answer ends: such a session is not
        // closed to make room (unless it only waits for an answer to a question).
        let in_session = activity.map(|a| {
            a.busy.fetch_add(1, Ordering::AcqRel);
            InSession(a)
        });
        // Bodies are read here, whole, within a time limit: a client trickling one in
        // holds a connection for read_timeout at most (and counts as doing nothing
        // useful when a connection must be closed to make room).
        let reading = req.extensions().get::<Arc<ConnState>>().cloned().map(|c| {
            c.reading.fetch_add(1, Ordering::AcqRel);
            Reading(c)
        });
        let (parts, body) = req.into_parts();
        let bytes = match tokio::time::timeout(
            self.read_timeout,
            axum::body::to_bytes(body, self.max_body),
        )
        .await
        {
            Err(_) => {
                return (
                    StatusCode::REQUEST_TIMEOUT,
                    "the request body did not arrive in time\n",
                )
                    .into_response();
            }
            Ok(Err(_)) => {
                return (
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("request bodies are limited to {} bytes\n", self.max_body),
                )
                    .into_response();
            }
            Ok(Ok(b)) => b,
        };
        drop(reading);
        let principal = parts
            .extensions
            .get::<Principal>()
            .map_or_else(|| "http-unknown".to_string(), |p| p.0.clone());
        // A body of too many values is never parsed (a 4 MB `[1,1,…]` cost ~380 MB in
        // rmcp's parse): refused here, charged and audited like any other refusal.
        if let Some(Some(line)) = super::stdio::too_many_values(&bytes, true) {
            let r = (
                StatusCode::BAD_REQUEST,
                [(header::CONTENT_TYPE, "application/json")],
                line,
            )
                .into_response();
            return self.charge_refusal(&principal, r, "a body of too many JSON values (unparsed)");
        }
        if let Some(line) = super::stdio::long_id(&bytes) {
            let r = (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "application/json")],
                line,
            )
                .into_response();
            return self.charge_refusal(&principal, r, "a request with an overlong id");
        }
        if let Some(line) = super::stdio::long_method(&bytes) {
            let r = (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "application/json")],
                line,
            )
                .into_response();
            return self.charge_refusal(
                &principal,
                r,
                "a request for a method of an overlong name",
            );
        }
        let mut bytes = bytes;
        if is_initialize(&bytes) {
            // A session keeps its client's description for its life: a small one.
            if bytes.len() > MAX_INITIALIZE_BYTES {
                return (
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("an initialize request is limited to {MAX_INITIALIZE_BYTES} bytes\n"),
                )
                    .into_response();
            }
            if let Some(clipped) = clip_client_info(&bytes) {
                bytes = clipped.into();
            }
        }
        if !parts.headers.contains_key("mcp-session-id") && is_initialize(&bytes) {
            return self.initialize(parts, bytes, next).await;
        }
        let mut parts = parts;
        if let Some(s) = &in_session {
            parts.extensions.insert(s.0.clone());
        }
        // One request per id under way in a session: a second is refused at once.
        let mut id_held = None;
        if let Some(s) = &in_session {
            let head = super::stdio::scan(&bytes);
            if head.method
                && head.complete
                && let Some(id) = head.id
            {
                let key = id.to_string();
                // An answer's last bytes can reach its client a moment before its body
                // is dropped here: a client reusing an id only after its answer (one id
                // for every call, one at a time) is given that moment, not refused.
                let mut free = false;
                for _ in 0..10 {
                    if crate::error::lock(&s.0.ids).insert(key.clone()) {
                        free = true;
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                if !free {
                    let line = super::stdio::duplicate_id(id);
                    let r = (
                        StatusCode::BAD_REQUEST,
                        [(header::CONTENT_TYPE, "application/json")],
                        line,
                    )
                        .into_response();
                    return self.charge_refusal(
                        &principal,
                        r,
                        "a request id already in use by a request under way in its session",
                    );
                }
                id_held = Some(IdUnderWay(s.0.clone(), key));
            }
        }
        let kept = bytes.clone();
        let r = next
            .run(Request::from_parts(parts, Body::from(bytes)))
            .await;
        let (r, unreadable) = answer_unreadable(r, &kept).await;
        let r = if unreadable {
            self.charge_refusal(&principal, r, "a body that is not a JSON-RPC message")
        } else {
            r
        };
        match in_session {
            Some(s) => r.map(|b| Body::new(Guarded(b, (s, id_held)))),
            None => r,
        }
    }

    /// A body refused before any tool ran (unreadable, or too many values): charged to
    /// the principal's request budget like any request (429 past it), and marked so
    /// [`Gate::admit`] writes its audit record.
    fn charge_refusal(&self, principal: &str, r: Response, why: &'static str) -> Response {
        if let Err(e) = self.ferret.limiter().begin_request(principal) {
            let mut r = self.too_many(&e);
            r.extensions_mut()
                .insert(Refused("over the request budget (a refused body)"));
            return r;
        }
        let mut r = r;
        r.extensions_mut().insert(Refused(why));
        r
    }

    /// 429 with `Retry-After`, for a request past its principal's budget (`e`).
    fn too_many(&self, e: &crate::error::ToolError) -> Response {
        let hint = e.hint.as_deref().unwrap_or("retry later");
        let mut r = (
            StatusCode::TOO_MANY_REQUESTS,
            format!("{}: {}; {hint}\n", e.code, e.message),
        )
            .into_response();
        let left = self.ferret.config().round_window.as_secs().clamp(1, 3600);
        if let Ok(v) = HeaderValue::from_str(&left.to_string()) {
            r.headers_mut().insert(header::RETRY_AFTER, v);
        }
        r
    }

    /// An `initialize` outside a session: charged to the principal's request budget; a
    /// client at its share of the session table gives up its least recently used idle
    /// session; at the table's cap, the client holding the most sessions does. Opens and
    /// closes are audited.
    async fn initialize(
        &self,
        parts: axum::http::request::Parts,
        bytes: axum::body::Bytes,
        next: Next,
    ) -> Response {
        let principal = parts
            .extensions
            .get::<Principal>()
            .map_or_else(|| "http-unknown".to_string(), |p| p.0.clone());
        let client = parts
            .extensions
            .get::<Client>()
            .map_or_else(|| "http-unknown".to_string(), |c| c.0.clone());
        if let Err(e) = self.ferret.limiter().begin_request(&principal) {
            let hint = e.hint.as_deref().unwrap_or("retry later");
            let mut r = (
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "{}: {} (opening a session counts as a request); {hint}\n",
                    e.code, e.message
                ),
            )
                .into_response();
            let left = self.ferret.config().round_window.as_secs().clamp(1, 3600);
            if let Ok(v) = HeaderValue::from_str(&left.to_string()) {
                r.headers_mut().insert(header::RETRY_AFTER, v);
            }
            r.extensions_mut()
                .insert(Refused("over the request budget (initialize)"));
            return r;
        }
        self.reconcile().await;
        let live = self.sessions.sessions.read().await.len();
        let admitted = self.table.admit(&client, live);
        let (slot, victim) = match admitted {
            Ok(a) => a,
            Err(full) => {
                let (status, text) = match full {
                    Full::Client(n) => (
                        StatusCode::TOO_MANY_REQUESTS,
                        format!(
                            "this client holds {n} sessions, its share of this server, and every \
                             one has a request under way; close one (DELETE /mcp with its \
                             Mcp-Session-Id) or retry later\n"
                        ),
                    ),
                    Full::Server(n) => (
                        StatusCode::SERVICE_UNAVAILABLE,
                        format!(
                            "{n} sessions are open, the most this server keeps ({}), and none is \
                             idle; close one (DELETE /mcp with its Mcp-Session-Id) or retry later\n",
                            self.max_sessions
                        ),
                    ),
                };
                let mut r = (status, text).into_response();
                r.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("10"));
                return r;
            }
        };
        if let Some((victim, _, why, gone)) = victim {
            use rmcp::transport::streamable_http_server::session::SessionManager;
            let id: rmcp::transport::streamable_http_server::session::SessionId =
                victim.as_str().into();
            let _ = self.sessions.close_session(&id).await;
            self.session_record(&victim, &gone, "session_evicted", why);
        }
        let agent = client_name(&bytes);
        let r = next
            .run(Request::from_parts(parts, Body::from(bytes)))
            .await;
        if let Some(sid) = r
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            && r.status().is_success()
        {
            let sid = crate::audit::clip(sid, 256);
            let held = self.table.opened(slot, &sid, &principal);
            let reason = format!("opened; this client holds {held}");
            self.session_record_as(&sid, &principal, &client, &agent, "session_open", &reason);
        }
        r
    }

    /// Drops sessions rmcp no longer has (closed after [`SESSION_IDLE`], or ended) from
    /// the table, audited.
    async fn reconcile(&self) {
        let live: std::collections::HashSet<String> = self
            .sessions
            .sessions
            .read()
            .await
            .keys()
            .map(|k| k.to_string())
            .collect();
        for (sid, gone) in self.table.retain_live(&live) {
            self.session_record(
                &sid,
                &gone,
                "session_close",
                "ended (idle too long, or its worker stopped)",
            );
        }
    }

    fn session_record(&self, sid: &str, gone: &LiveSession, operation: &str, reason: &str) {
        self.session_record_as(sid, &gone.principal, &gone.client, "-", operation, reason);
    }

    /// An audit record of a session's life: the principal its budget is charged to, the
    /// client (host) the session table counts it against in the reason.
    fn session_record_as(
        &self,
        sid: &str,
        principal: &str,
        client: &str,
        agent: &str,
        operation: &str,
        reason: &str,
    ) {
        let evicted = operation == "session_evicted";
        let outcome = if evicted {
            Outcome::Denied
        } else {
            Outcome::Success
        };
        // The session's label, not its id (a credential); the agent's name cut before
        // copying: `log` would cut too, but only after the copy is made.
        self.ferret.audit().log(AuditEntry {
            session_id: super::session_label(sid),
            principal: Some(principal.to_string()),
            agent_id: crate::audit::clip(agent, crate::audit::MAX_NAME_BYTES),
            code: evicted.then(|| "SESSION_EVICTED".to_string()),
            reason: Some(format!("{reason}; client {client}")),
            ..AuditEntry::event(operation, outcome)
        });
    }
}

/// The client's name from an `initialize` body (already cut to 256 bytes), for the audit
/// record of the session's opening.
fn client_name(body: &[u8]) -> String {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) else {
        return "unknown".into();
    };
    let one = match &v {
        serde_json::Value::Array(items) => items
            .iter()
            .find(|m| m.get("method").and_then(|m| m.as_str()) == Some("initialize"))
            .cloned()
            .unwrap_or_default(),
        _ => v,
    };
    one.pointer("/params/clientInfo/name")
        .and_then(|n| n.as_str())
        .map_or_else(
            || "unknown".into(),
            |n| crate::audit::clip(n, crate::audit::MAX_NAME_BYTES),
        )
}

/// Who a session belongs to, for sharing the session table: the peer's host (an IPv4
/// address, an IPv6 /64, every loopback address one), with or without a token. A token
/// is one per server, so keyed on it every client would be one and a share would be the
/// whole table; budgets stay keyed on the [`Principal`].
#[derive(Clone, Debug)]
pub struct Client(pub String);

fn client_key(peer: Option<SocketAddr>) -> String {
    principal(false, peer).0
}

/// A session's requests under way, shared with the tool calls it runs (through the
/// request's extensions) so that a call waiting for a question's answer can say so.
#[derive(Default, Debug)]
pub struct SessionActivity {
    busy: AtomicU32,
    questions: AtomicU32,
    /// Ids (as JSON text) of this session's requests under way: rmcp keeps one entry
    /// per id, so a second request with an id under way left one of them unanswered
    /// (and its session busy for ever).
    ids: Mutex<std::collections::HashSet<String>>,
}

/// A request id held under way in its session until dropped (its answer ended).
struct IdUnderWay(Arc<SessionActivity>, String);

impl Drop for IdUnderWay {
    fn drop(&mut self) {
        crate::error::lock(&self.0.ids).remove(&self.1);
    }
}

impl SessionActivity {
    fn idle(&self) -> bool {
        self.busy.load(Ordering::Acquire) <= self.questions.load(Ordering::Acquire)
    }
}

/// A request under way in a session, until its answer ends.
struct InSession(Arc<SessionActivity>);

impl Drop for InSession {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// While held: the tool call of this request waits only for the client to answer a
/// question, so its connection may be closed to make room and its session counts as
/// idle.
pub struct WaitingForAnswer {
    conn: Option<Arc<ConnState>>,
    session: Option<Arc<SessionActivity>>,
}

/// Marks the request (its connection and session) as waiting for an answer.
pub fn waiting_for_answer(parts: Option<&axum::http::request::Parts>) -> WaitingForAnswer {
    let conn = parts.and_then(|p| p.extensions.get::<Arc<ConnState>>().cloned());
    let session = parts.and_then(|p| p.extensions.get::<Arc<SessionActivity>>().cloned());
    if let Some(c) = &conn {
        c.questions.fetch_add(1, Ordering::AcqRel);
    }
    if let Some(s) = &session {
        s.questions.fetch_add(1, Ordering::AcqRel);
    }
    WaitingForAnswer { conn, session }
}

impl Drop for WaitingForAnswer {
    fn drop(&mut self) {
        if let Some(c) = &self.conn {
            c.questions.fetch_sub(1, Ordering::AcqRel);
        }
        if let Some(s) = &self.session {
            s.questions.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// The sessions, by id, with the client each belongs to: bounded by `max` (plus the
/// `initialize` requests under way, each of which holds a slot).
struct SessionTable {
    max: usize,
    per_client: usize,
    inner: Mutex<TableInner>,
}

#[derive(Default)]
struct TableInner {
    live: std::collections::HashMap<String, LiveSession>,
    /// Slots held by `initialize` requests under way, by client.
    pending: std::collections::HashMap<String, usize>,
}

struct LiveSession {
    client: String,
    /// What its budget is charged to, for the audit records.
    principal: String,
    last: Instant,
    activity: Arc<SessionActivity>,
}

/// Why an `initialize` was refused: the client's share, or the whole table, is held by
/// sessions all answering requests. The count held.
#[derive(Debug, PartialEq)]
enum Full {
    Client(usize),
    Server(usize),
}

/// A slot in the table held by an `initialize` under way, given back when dropped
/// (unless the session opened).
struct Slot<'a> {
    table: &'a SessionTable,
    client: String,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut t = crate::error::lock(&self.table.inner);
        if let Some(n) = t.pending.get_mut(&self.client) {
            *n -= 1;
            if *n == 0 {
                t.pending.remove(&self.client);
            }
        }
    }
}

/// A session closed to make room: its id, its client, why, and its entry.
type Evicted = (String, String, &'static str, LiveSession);

impl SessionTable {
    fn new(max: usize, per_client: usize) -> SessionTable {
        SessionTable {
            max: max.max(1),
            per_client: per_client.max(1),
            inner: Mutex::default(),
        }
    }

    /// Holds a slot for a new session of `client`, choosing a session to close if one
    /// must go: at the client's share, its own least recently used idle one; at the
    /// table's cap (`rmcp_live`: the sessions rmcp holds), that of the client holding
    /// the most that has an idle one. Refused only when every candidate is busy.
    fn admit(&self, client: &str, rmcp_live: usize) -> Result<(Slot<'_>, Option<Evicted>), Full> {
        let mut t = crate::error::lock(&self.inner);
        let held = |t: &TableInner, c: &str| {
            t.live.values().filter(|s| s.client == c).count()
                + t.pending.get(c).copied().unwrap_or(0)
        };
        let lru_idle = |t: &TableInner, c: &str| {
            t.live
                .iter()
                .filter(|(_, s)| s.client == c && s.activity.idle())
                .min_by_key(|(_, s)| s.last)
                .map(|(id, _)| id.clone())
        };
        let mine = held(&t, client);
        let mut chosen: Option<(String, String, &'static str)> = None;
        if mine >= self.per_client {
            let Some(id) = lru_idle(&t, client) else {
                return Err(Full::Client(mine));
            };
            chosen = Some((
                id,
                client.to_string(),
                "closed to make room for a new session of the same client (at its share of the table)",
            ));
        } else {
            let pending: usize = t.pending.values().sum();
            let total = t.live.len().max(rmcp_live) + pending;
            if total >= self.max {
                // The clients by sessions held, most first; the first with an idle one
                // gives it up.
                let mut clients: Vec<(usize, String)> = t
                    .live
                    .values()
                    .map(|s| s.client.clone())
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .map(|c| (held(&t, &c), c))
                    .collect();
                clients.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
                chosen = clients.iter().find_map(|(_, c)| {
                    lru_idle(&t, c).map(|id| {
                        (
                            id,
                            c.clone(),
                            "closed to make room for another client (the table was full; \
                             this client held the most sessions)",
                        )
                    })
                });
                if chosen.is_none() {
                    return Err(Full::Server(total));
                }
            }
        }
        let victim = chosen.and_then(|(id, c, why)| {
            let entry = t.live.remove(&id)?;
            Some((id, c, why, entry))
        });
        *t.pending.entry(client.to_string()).or_insert(0) += 1;
        Ok((
            Slot {
                table: self,
                client: client.to_string(),
            },
            victim,
        ))
    }

    /// The session `sid` opened in `slot`; returns how many its client now holds.
    fn opened(&self, slot: Slot<'_>, sid: &str, principal: &str) -> usize {
        let client = slot.client.clone();
        drop(slot);
        let mut t = crate::error::lock(&self.inner);
        t.live.insert(
            sid.to_string(),
            LiveSession {
                client: client.clone(),
                principal: principal.to_string(),
                last: Instant::now(),
                activity: Arc::default(),
            },
        );
        t.live.values().filter(|s| s.client == client).count()
    }

    /// A request of session `sid`: marks it used; its activity, if the session is known.
    fn touch(&self, sid: &str) -> Option<Arc<SessionActivity>> {
        let mut t = crate::error::lock(&self.inner);
        let s = t.live.get_mut(sid)?;
        s.last = Instant::now();
        Some(s.activity.clone())
    }

    fn forget(&self, sid: &str) -> Option<LiveSession> {
        crate::error::lock(&self.inner).live.remove(sid)
    }

    /// Drops the sessions not in `live`; returns them.
    fn retain_live(&self, live: &std::collections::HashSet<String>) -> Vec<(String, LiveSession)> {
        let mut t = crate::error::lock(&self.inner);
        let gone: Vec<String> = t
            .live
            .keys()
            .filter(|k| !live.contains(*k))
            .cloned()
            .collect();
        gone.into_iter()
            .filter_map(|k| t.live.remove(&k).map(|s| (k, s)))
            .collect()
    }
}

impl Gate {
    /// `GET /health` (and `HEAD`): 200 `{"status":"ok"}` and nothing else (no version,
    /// roots, counts or sessions), without a token, so that a supervisor or a load
    /// balancer can tell the server answers. What every request passes still applies:
    /// one well-formed `Host` naming this server (a web page reaching a local server
    /// through DNS rebinding names its own host: 403), and no `Origin` at all (a health
    /// check is never a web page's request: 403). It runs no tool, so no budget is
    /// charged; a refusal is audited like any other, an answer is not (a probe every
    /// few seconds would fill the log).
    fn health(&self, req: &Request) -> Response {
        let host = req
            .headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .and_then(|h| h.parse::<axum::http::uri::Authority>().ok());
        let allowed = host.is_some_and(|h| {
            let name = h.host().trim_matches(['[', ']']).to_ascii_lowercase();
            self.hosts
                .iter()
                .any(|a| allowed_host(a, &name, h.port_u16()))
        });
        if !allowed {
            return refuse(
                StatusCode::FORBIDDEN,
                "Host is not one this server answers to",
            );
        }
        if req.headers().contains_key(header::ORIGIN) {
            return refuse(
                StatusCode::FORBIDDEN,
                "a health check is not answered to a web page (an Origin header)",
            );
        }
        if req.method() != Method::GET && req.method() != Method::HEAD {
            let mut r = (StatusCode::METHOD_NOT_ALLOWED, "GET /health\n").into_response();
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
            return r;
        }
        let mut r = (StatusCode::OK, HEALTH_BODY).into_response();
        let h = r.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        r
    }
}

/// Whether `allowed` (an entry of the Host allow-list: a name, or a name and port)
/// admits the host `name` (lower case, no brackets) on `port`, as rmcp matches them.
fn allowed_host(allowed: &str, name: &str, port: Option<u16>) -> bool {
    let allowed = allowed.trim();
    let (a_name, a_port) = match allowed.parse::<axum::http::uri::Authority>() {
        Ok(a) => (a.host().to_string(), a.port_u16()),
        Err(_) => (allowed.to_string(), None),
    };
    let a_name = a_name.trim_matches(['[', ']']).to_ascii_lowercase();
    !a_name.is_empty() && a_name == name && a_port.is_none_or(|p| port == Some(p))
}

/// The unauthenticated health check's path.
pub const HEALTH_PATH: &str = "/health";
/// Its whole answer.
pub const HEALTH_BODY: &str = "{\"status\":\"ok\"}\n";

/// The largest `initialize` body: a session keeps what it says about the client.
pub const MAX_INITIALIZE_BYTES: usize = 64 * 1024;
/// The most standalone event streams (GET) one session may hold open at once.
pub const STREAMS_PER_SESSION: usize = 4;

/// A rejection's reason for the audit record.
#[derive(Clone, Copy)]
struct Refused(&'static str);

fn refuse(status: StatusCode, why: &'static str) -> Response {
    let mut r = (status, format!("{why}\n")).into_response();
    r.extensions_mut().insert(Refused(why));
    r
}

/// A request body being read on a connection, until dropped.
struct Reading(Arc<ConnState>);

impl Drop for Reading {
    fn drop(&mut self) {
        self.0.reading.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Why a request's `Host` or `Origin` is ambiguous: sent twice (in any spelling of the
/// name), or one header holding a list, or a request target naming another host. Where
/// a proxy and this server could each read a different one, neither is trusted.
fn ambiguous_host_or_origin(req: &Request) -> Option<&'static str> {
    let headers = req.headers();
    if headers.get_all(header::HOST).iter().count() > 1 {
        return Some("more than one Host header");
    }
    if headers.get_all(header::ORIGIN).iter().count() > 1 {
        return Some("more than one Origin header");
    }
    let listy = |v: &HeaderValue| {
        v.as_bytes()
            .iter()
            .any(|b| matches!(b, b',' | b' ' | b'\t'))
    };
    if headers.get(header::HOST).is_some_and(listy) {
        return Some("the Host header holds more than one value");
    }
    if headers.get(header::ORIGIN).is_some_and(listy) {
        return Some("the Origin header holds more than one value");
    }
    if let (Some(target), Some(host)) = (req.uri().authority(), headers.get(header::HOST))
        && !target
            .as_str()
            .eq_ignore_ascii_case(&String::from_utf8_lossy(host.as_bytes()))
    {
        return Some("the request target names another host than the Host header");
    }
    None
}

/// The session ids with event streams open, and how many each: bounded by the
/// connections, since an entry lives only while a stream does.
#[derive(Default)]
struct Streams(Arc<Mutex<std::collections::HashMap<Vec<u8>, usize>>>);

/// One open event stream, counted until dropped.
struct StreamSlot {
    map: Arc<Mutex<std::collections::HashMap<Vec<u8>, usize>>>,
    id: Vec<u8>,
}

impl Streams {
    fn open(&self, id: &[u8]) -> Option<StreamSlot> {
        let id = id[..id.len().min(crate::audit::MAX_NAME_BYTES)].to_vec();
        let mut map = crate::error::lock(&self.0);
        let n = map.entry(id.clone()).or_insert(0);
        if *n >= STREAMS_PER_SESSION {
            return None;
        }
        *n += 1;
        Some(StreamSlot {
            map: self.0.clone(),
            id,
        })
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut map = crate::error::lock(&self.map);
        if let Some(n) = map.get_mut(&self.id) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.id);
            }
        }
    }
}

/// An `initialize` body with the strings of its `clientInfo` cut to
/// [`crate::audit::MAX_NAME_BYTES`], or None when none was longer.
fn clip_client_info(body: &[u8]) -> Option<Vec<u8>> {
    let mut v: serde_json::Value = serde_json::from_slice(body).ok()?;
    let mut changed = false;
    let mut clip = |msg: &mut serde_json::Value| {
        if let Some(serde_json::Value::Object(info)) = msg.pointer_mut("/params/clientInfo") {
            for field in info.values_mut() {
                if let serde_json::Value::String(s) = field
                    && s.len() > crate::audit::MAX_NAME_BYTES
                {
                    *s = crate::audit::clip(s, crate::audit::MAX_NAME_BYTES);
                    changed = true;
                }
            }
        }
    };
    match &mut v {
        serde_json::Value::Array(items) => items.iter_mut().for_each(&mut clip),
        one => clip(one),
    }
    if changed {
        serde_json::to_vec(&v).ok()
    } else {
        None
    }
}

fn token_matches(req: &Request, expected: &str) -> bool {
    // Two Authorization headers are ambiguous (a proxy may check one, this server the
    // other): refused as unauthorized, whatever either holds.
    if req.headers().get_all(header::AUTHORIZATION).iter().count() > 1 {
        return false;
    }
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        // The scheme is case-insensitive (RFC 9110 §11.1); one space, then the token.
        .and_then(|v| {
            v.get(..7)
                .filter(|s| s.eq_ignore_ascii_case("bearer "))
                .map(|_| &v[7..])
        })
        .unwrap_or("");
    bool::from(given.as_bytes().ct_eq(expected.as_bytes()))
}

/// Whether a `Host` is a well-formed authority: `host[:port]` with no userinfo and a port
/// of digits without leading zeros. The port is not compared with the one bound: an SSH
/// tunnel or a container's port map reaches a loopback server under another, and DNS
/// rebinding is told by the name, which the allow-list checks.
fn well_formed_host(value: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(value) else {
        return false;
    };
    if text.is_empty() || text.contains(['@', '/', '?', '#', '\\']) {
        return false;
    }
    let (name, port) = if let Some(rest) = text.strip_prefix('[') {
        let Some((inner, after)) = rest.split_once(']') else {
            return false;
        };
        let port = match after {
            "" => None,
            p => match p.strip_prefix(':') {
                Some(p) => Some(p),
                None => return false,
            },
        };
        (format!("[{inner}]"), port)
    } else {
        match text.split_once(':') {
            Some((n, p)) => (n.to_string(), Some(p)),
            None => (text.to_string(), None),
        }
    };
    if name.is_empty() {
        return false;
    }
    let Some(port) = port else {
        return true;
    };
    if port.is_empty()
        || !port.bytes().all(|b| b.is_ascii_digit())
        || (port.len() > 1 && port.starts_with('0'))
    {
        return false;
    }
    port.parse::<u16>().is_ok()
}

/// Whether an `Origin` header is `null` or exactly `scheme://host[:port]` (RFC 6454): no
/// user, path, query or fragment, and a port, if any, of digits.
fn well_formed_origin(value: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(value) else {
        return false;
    };
    if text == "null" {
        return true;
    }
    let Ok(url) = url::Url::parse(text) else {
        return false;
    };
    let Some(host) = url.host_str() else {
        return false;
    };
    let port = url.port().map(|p| format!(":{p}")).unwrap_or_default();
    // The serialization must be the header itself: nothing dropped or normalised away
    // (a default port written out is refused too, which browsers never send).
    url.username().is_empty()
        && url.password().is_none()
        && url.query().is_none()
        && url.fragment().is_none()
        && text == format!("{}://{host}{port}", url.scheme())
}

/// Whether a JSON-RPC body (one message or a batch) holds an `initialize` request.
fn is_initialize(body: &[u8]) -> bool {
    // Most bodies are tool calls: skip parsing them a second time (rmcp parses them too).
    if memchr::memmem::find(body, b"initialize").is_none() {
        return false;
    }
    let is = |v: &serde_json::Value| v.get("method").and_then(|m| m.as_str()) == Some("initialize");
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(serde_json::Value::Array(items)) => items.iter().any(is),
        Ok(v) => is(&v),
        Err(_) => false,
    }
}

/// Audit records of rejected connections and requests, rate-limited: a flood of them
/// must not become a flood of log lines.
pub(crate) struct Rejections {
    ferret: Arc<Ferret>,
    /// The transport, named in the summary record.
    front: &'static str,
    window: crate::audit::Window,
}

impl Rejections {
    fn new(ferret: Arc<Ferret>) -> Rejections {
        Rejections::on(ferret, "http")
    }

    /// Rejections on the transport `front` (`http`, `stdio`).
    pub(crate) fn on(ferret: Arc<Ferret>, front: &'static str) -> Rejections {
        Rejections {
            ferret,
            front,
            window: crate::audit::Window::new(REJECTIONS_PER_WINDOW, REJECTION_WINDOW),
        }
    }

    pub(crate) fn reject(&self, operation: &str, code: &str, reason: String) {
        let (log, unlogged) = self.window.admit();
        if unlogged > 0 {
            self.record(
                self.front,
                "REJECTIONS_NOT_LOGGED",
                format!(
                    "{unlogged} more rejections in {} ms were not logged one by one",
                    self.window.length().as_millis()
                ),
            );
        }
        if log {
            self.record(operation, code, reason);
        }
    }

    fn record(&self, operation: &str, code: &str, reason: String) {
        self.ferret
            .audit()
            .log(AuditEntry::refusal(operation, code, reason));
    }
}

/// Hands memory back once sessions have ended (20 000 sessions opened and closed must
/// not leave the server at its peak), and every 10 s while sessions are open: under
/// steady load the allocator kept what calls had freed, and the server's size went on
/// growing past what it held (live heap ~30 MB, resident 90 MB after 60 s).
async fn trim_after_sessions_end(sessions: Arc<LocalSessionManager>, stop: CancellationToken) {
    let mut peak = 0usize;
    let mut ticks = 0u32;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(Duration::from_secs(5)) => {}
        }
        ticks += 1;
        let now = sessions.sessions.read().await.len();
        peak = peak.max(now);
        if peak >= now + 16 || (now == 0 && peak > 0) || (now > 0 && ticks.is_multiple_of(2)) {
            crate::search::index::give_back_memory();
            peak = now;
        }
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    eprintln!("ferret: shutting down");
}

/// rmcp answers a body it cannot take as a JSON-RPC message (not JSON, a lone surrogate
/// escape, a batch, a wrong shape) with a bare 415, "fail to deserialize request body":
/// answered instead as stdio answers such a line (`stdio::answer_to`), 400 with a
/// JSON-RPC error carrying the request's id when its head names one, or 202 for a
/// notification or response. Only that answer is read again; every other passes as is.
/// The bool: whether the body was such an unreadable one.
async fn answer_unreadable(r: Response, body: &[u8]) -> (Response, bool) {
    if r.status() != StatusCode::UNSUPPORTED_MEDIA_TYPE {
        return (r, false);
    }
    let (parts, b) = r.into_parts();
    let text = axum::body::to_bytes(b, 64 * 1024).await.unwrap_or_default();
    if !text.starts_with(b"fail to deserialize") {
        return (Response::from_parts(parts, Body::from(text)), false);
    }
    let r = match super::stdio::answer_to(body) {
        Some(line) => (
            StatusCode::BAD_REQUEST,
            [(header::CONTENT_TYPE, "application/json")],
            line,
        )
            .into_response(),
        None => StatusCode::ACCEPTED.into_response(),
    };
    (r, true)
}

/// The most a refusal of rmcp's may say: its message is cut to [`REFUSAL_MESSAGE_CHARS`]
/// past it (a JSON-RPC error keeps its shape, code and id).
const REFUSAL_MAX_BYTES: usize = 4 * 1024;
const REFUSAL_MESSAGE_CHARS: usize = 300;

/// `r` (a refusal of rmcp's) with what it says cut short when it is over
/// [`REFUSAL_MAX_BYTES`]: rmcp quotes what the request sent (a mismatched header's body
/// value, a version), so a request of 4 MB was answered with 4 MB.
async fn clip_refusal(r: Response) -> Response {
    let small = r
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
        .is_some_and(|n| n <= REFUSAL_MAX_BYTES);
    if small {
        return r;
    }
    let (mut parts, body) = r.into_parts();
    // A refusal is bounded by the body it answers (4 MiB at most) and what rmcp adds.
    let text = axum::body::to_bytes(body, 64 << 20)
        .await
        .unwrap_or_default();
    if text.len() <= REFUSAL_MAX_BYTES {
        return Response::from_parts(parts, Body::from(text));
    }
    let cut = |m: &str| -> String {
        let mut out: String = m.chars().take(REFUSAL_MESSAGE_CHARS).collect();
        out.push_str("… (cut)");
        out
    };
    let clipped = match serde_json::from_slice::<serde_json::Value>(&text) {
        Ok(mut v) => {
            if let Some(m) = v.pointer_mut("/error/message")
                && let Some(t) = m.as_str()
            {
                *m = serde_json::Value::String(cut(t));
            }
            if let Some(e) = v.get_mut("error").and_then(|e| e.as_object_mut()) {
                e.remove("data");
            }
            let mut out = serde_json::to_vec(&v).unwrap_or_default();
            if out.len() > REFUSAL_MAX_BYTES
                && let Some(id) = v.get_mut("id")
            {
                *id = serde_json::Value::Null;
                out = serde_json::to_vec(&v).unwrap_or_default();
            }
            if out.len() <= REFUSAL_MAX_BYTES {
                out
            } else {
                cut(&String::from_utf8_lossy(&text)).into_bytes()
            }
        }
        Err(_) => cut(&String::from_utf8_lossy(&text)).into_bytes(),
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(clipped))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initialize_is_told_from_other_messages() {
        let init = br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#;
        assert!(is_initialize(init));
        assert!(is_initialize(br#"[{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":1,"method":"initialize"}]"#));
        assert!(!is_initialize(
            br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
        ));
        assert!(!is_initialize(br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"grep","arguments":{"pattern":"initialize"}}}"#));
        assert!(!is_initialize(b"not json initialize"));
    }

    #[test]
    fn only_well_formed_origins_pass() {
        for ok in [
            "null",
            "http://localhost:1234",
            "http://127.0.0.1",
            "https://app.example.com",
            "http://[::1]:9",
        ] {
            assert!(well_formed_origin(ok.as_bytes()), "{ok}");
        }
        for bad in [
            "http://localhost:evil.com",
            "http://localhost:80abc",
            "http://localhost:1234@evil.com",
            "http://user@localhost",
            "http://localhost/",
            "http://localhost:1/path",
            "http://localhost?x",
            "http://localhost:80",
            "localhost:1234",
            "",
            "http://",
        ] {
            assert!(!well_formed_origin(bad.as_bytes()), "{bad}");
        }
    }

    #[test]
    fn at_the_cap_idle_connections_go_first_then_streams_and_busy_ones_never() {
        let mut t = Connections::new(4);
        t.grace = Duration::ZERO;
        let a: std::net::IpAddr = "10.0.0.1".parse().unwrap();
        let b: std::net::IpAddr = "10.0.0.2".parse().unwrap();
        let mut held = Vec::new();
        for peer in [a, b, a, b] {
            let Admitted::Yes {
                id,
                state,
                kill,
                evicted,
            } = t.admit(peer)
            else {
                panic!("refused under the cap")
            };
            assert!(evicted.is_none());
            held.push((id, state, kill));
        }
        // 0: answering; 1: a standalone stream; 2: reading a body; 3: answering.
        let _answer0 = Busy::new(held[0].1.clone(), false);
        let _stream1 = Busy::new(held[1].1.clone(), true);
        let _body2 = Busy::new(held[2].1.clone(), false);
        held[2].1.reading.fetch_add(1, Ordering::AcqRel);
        let _answer3 = Busy::new(held[3].1.clone(), false);
        let Admitted::Yes {
            evicted,
            state: new1,
            ..
        } = t.admit(b)
        else {
            panic!("refused while a connection was only reading a body")
        };
        assert_eq!(evicted, Some(a));
        assert!(held[2].2.is_cancelled() && !held[1].2.is_cancelled());
        let _answer_new1 = Busy::new(new1, false);
        let Admitted::Yes {
            evicted,
            state: new2,
            ..
        } = t.admit(a)
        else {
            panic!("refused while a connection held only a stream")
        };
        assert_eq!(evicted, Some(b));
        assert!(held[1].2.is_cancelled());
        let _answer_new2 = Busy::new(new2, false);
        // Everyone is answering a request: nobody is cut, and the newcomer is let in to
        // the reserve, where only /health is answered.
        let Admitted::Yes {
            state: spare,
            evicted: None,
            ..
        } = t.admit(a)
        else {
            panic!("a connection was cut for one over the cap")
        };
        assert!(spare.health_only);
        assert!(!held[0].2.is_cancelled() && !held[3].2.is_cancelled());
        // A request ends: its connection is idle again, and goes first.
        drop(_answer0);
        let Admitted::Yes {
            evicted: Some(_),
            state,
            ..
        } = t.admit(b)
        else {
            panic!("an idle connection was not closed to make room")
        };
        assert!(!state.health_only);
        assert!(held[0].2.is_cancelled());
        // With no reserve, one over the cap is refused.
        t.reserve = 0;
        let _again = Busy::new(state, false);
        assert!(matches!(t.admit(a), Admitted::No));
    }

    #[test]
    fn a_call_waiting_for_an_answer_holds_its_connection_no_better_than_a_stream() {
        let mut t = Connections::new(2);
        t.grace = Duration::ZERO;
        let a: std::net::IpAddr = "10.0.0.1".parse().unwrap();
        let b: std::net::IpAddr = "10.0.0.2".parse().unwrap();
        let c: std::net::IpAddr = "10.0.0.3".parse().unwrap();
        let mut held = Vec::new();
        for peer in [a, c] {
            let Admitted::Yes { state, kill, .. } = t.admit(peer) else {
                panic!()
            };
            held.push((state, kill));
        }
        // Both answer a tool call; the first's call waits for the client's answer.
        let _c0 = Busy::new(held[0].0.clone(), false);
        let _c1 = Busy::new(held[1].0.clone(), false);
        let waiting = WaitingForAnswer {
            conn: Some(held[0].0.clone()),
            session: None,
        };
        held[0].0.questions.fetch_add(1, Ordering::AcqRel);
        let Admitted::Yes { evicted, state, .. } = t.admit(b) else {
            panic!("refused while a call only waited for an answer")
        };
        assert_eq!(evicted, Some(a));
        assert!(!state.health_only);
        assert!(held[0].1.is_cancelled() && !held[1].1.is_cancelled());
        drop(waiting);
        assert_eq!(held[0].0.questions.load(Ordering::Acquire), 0);
    }

    #[test]
    fn the_health_reserve_is_bounded_and_its_oldest_goes_first() {
        let mut t = Connections::new(1);
        t.grace = Duration::ZERO;
        let a: std::net::IpAddr = "10.0.0.1".parse().unwrap();
        let Admitted::Yes { state, .. } = t.admit(a) else {
            panic!()
        };
        let _busy = Busy::new(state, false);
        let mut spares = Vec::new();
        for i in 0..(HEALTH_RESERVE * 3) {
            let Admitted::Yes {
                state,
                kill,
                evicted,
                ..
            } = t.admit(a)
            else {
                panic!("refused {i}")
            };
            assert!(state.health_only);
            assert_eq!(evicted.is_some(), i >= HEALTH_RESERVE, "{i}");
            spares.push(kill);
        }
        assert_eq!(crate::error::lock(&t.table).1.len(), 1 + HEALTH_RESERVE);
        // The oldest went, the newest stay.
        assert!(
            spares[..spares.len() - HEALTH_RESERVE]
                .iter()
                .all(CancellationToken::is_cancelled)
        );
        assert!(!spares.last().unwrap().is_cancelled());
    }

    fn busy_session(t: &SessionTable, sid: &str) {
        let a = t.touch(sid).unwrap();
        a.busy.fetch_add(1, Ordering::AcqRel);
    }

    #[test]
    fn a_full_session_table_makes_room_from_the_client_holding_the_most() {
        let t = SessionTable::new(8, 6);
        // The hog opens 6 (its share), the other 2: the table is full.
        for i in 0..6 {
            let (slot, victim) = t.admit("hog", 0).unwrap();
            assert!(victim.is_none());
            t.opened(slot, &format!("hog{i}"), "p");
        }
        for i in 0..2 {
            let (slot, victim) = t.admit("other", 0).unwrap();
            assert!(victim.is_none());
            t.opened(slot, &format!("other{i}"), "p");
        }
        // The other's sessions are the least recently used; the hog pings all of its.
        std::thread::sleep(Duration::from_millis(5));
        for i in 0..6 {
            t.touch(&format!("hog{i}"));
        }
        let (slot, victim) = t.admit("newcomer", 8).unwrap();
        let (id, owner, _, _) = victim.expect("nobody made room");
        assert_eq!(owner, "hog");
        assert_eq!(id, "hog0");
        t.opened(slot, "new0", "p");
        // A busy session is passed over; the hog's least recently used idle one goes.
        busy_session(&t, "hog1");
        let (_slot, victim) = t.admit("newcomer2", 8).unwrap();
        assert_eq!(victim.unwrap().0, "hog2");
        drop(_slot);
        // At its share, a client gives up its own idle session, never another's.
        let (slot, victim) = t.admit("hog", 8).unwrap();
        let (id, owner, _, _) = victim.unwrap();
        assert_eq!(owner, "hog");
        assert_ne!(id, "hog1");
        t.opened(slot, "hog9", "p");
    }

    #[test]
    fn sessions_all_busy_are_never_cut() {
        let t = SessionTable::new(4, 2);
        for i in 0..2 {
            for c in ["a", "b"] {
                let (slot, _) = t.admit(c, 0).unwrap();
                t.opened(slot, &format!("{c}{i}"), "p");
                busy_session(&t, &format!("{c}{i}"));
            }
        }
        assert!(matches!(t.admit("c", 4), Err(Full::Server(4))));
        assert!(matches!(t.admit("a", 4), Err(Full::Client(2))));
        // A session whose only request waits for an answer to a question counts as idle.
        t.touch("b0")
            .unwrap()
            .questions
            .fetch_add(1, Ordering::AcqRel);
        let (_slot, victim) = t.admit("c", 4).unwrap();
        assert_eq!(victim.unwrap().0, "b0");
        // Slots held by initializes under way count: the table never grows past its cap.
        assert!(t.admit("d", 3).is_err());
        drop(_slot);
        assert_eq!(crate::error::lock(&t.inner).pending.len(), 0);
    }

    #[test]
    fn a_connection_just_opened_goes_after_the_streams() {
        let t = Connections::new(2);
        let a: std::net::IpAddr = "10.0.0.1".parse().unwrap();
        let Admitted::Yes {
            state: s0,
            kill: k0,
            ..
        } = t.admit(a)
        else {
            panic!()
        };
        let _stream = Busy::new(s0, true);
        let Admitted::Yes { kill: k1, .. } = t.admit(a) else {
            panic!()
        };
        // The young idle connection is spared, the older stream goes.
        let b: std::net::IpAddr = "10.0.0.2".parse().unwrap();
        assert!(matches!(
            t.admit(b),
            Admitted::Yes {
                evicted: Some(_),
                ..
            }
        ));
        assert!(k0.is_cancelled() && !k1.is_cancelled());
    }

    #[test]
    fn one_peer_holds_at_most_half_the_cap_of_idle_connections() {
        let t = Connections::new(8);
        let flood: std::net::IpAddr = "10.0.0.9".parse().unwrap();
        let other: std::net::IpAddr = "10.0.0.1".parse().unwrap();
        let Admitted::Yes { kill: theirs, .. } = t.admit(other) else {
            panic!()
        };
        for i in 0..100 {
            let Admitted::Yes { evicted, .. } = t.admit(flood) else {
                panic!("flood connection {i} refused")
            };
            assert!(evicted.is_none() || evicted == Some(flood), "{i}");
        }
        assert!(
            !theirs.is_cancelled(),
            "one peer's flood closed another's connection"
        );
        assert!(crate::error::lock(&t.table).1.len() <= 5);
    }

    #[tokio::test]
    async fn a_write_the_client_never_reads_fails_after_the_timeout() {
        use tokio::io::AsyncWriteExt;
        let (near, _far) = tokio::io::duplex(64);
        let mut io = TimedIo::new(near, Duration::from_millis(200));
        let started = Instant::now();
        let e = io.write_all(&[b'x'; 4096]).await.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::TimedOut);
        assert!(started.elapsed() < Duration::from_secs(2));
        // A reader that keeps taking bytes is never cut, however long the whole takes.
        let (near, mut far) = tokio::io::duplex(64);
        let mut io = TimedIo::new(near, Duration::from_millis(200));
        let reader = tokio::spawn(async move {
            use tokio::io::AsyncReadExt;
            let mut buf = [0u8; 16];
            let mut n = 0;
            while n < 4096 {
                tokio::time::sleep(Duration::from_millis(5)).await;
                n += far.read(&mut buf).await.unwrap();
            }
        });
        io.write_all(&[b'y'; 4096]).await.unwrap();
        reader.await.unwrap();
    }

    #[test]
    fn ambiguous_hosts_and_origins_are_told() {
        let req = |headers: &[(&str, &str)], uri: &str| {
            let mut b = Request::builder().method("POST").uri(uri);
            for (k, v) in headers {
                b = b.header(*k, *v);
            }
            b.body(Body::empty()).unwrap()
        };
        for (headers, uri) in [
            (
                vec![("Host", "localhost"), ("host", "evil.example")],
                "/mcp",
            ),
            (vec![("HOST", "localhost"), ("Host", "localhost")], "/mcp"),
            (vec![("Host", "localhost, evil.example")], "/mcp"),
            (vec![("Host", "localhost,evil.example")], "/mcp"),
            (
                vec![
                    ("Host", "localhost"),
                    ("Origin", "http://localhost:1"),
                    ("origin", "http://evil.example"),
                ],
                "/mcp",
            ),
            (
                vec![
                    ("Host", "localhost"),
                    ("Origin", "http://localhost:1, http://evil.example"),
                ],
                "/mcp",
            ),
            (vec![("Host", "localhost")], "http://evil.example/mcp"),
        ] {
            assert!(
                ambiguous_host_or_origin(&req(&headers, uri)).is_some(),
                "{headers:?} {uri}"
            );
        }
        for (headers, uri) in [
            (vec![("Host", "localhost:8080")], "/mcp"),
            (
                vec![
                    ("Host", "localhost:8080"),
                    ("Origin", "http://localhost:3000"),
                ],
                "/mcp",
            ),
            (
                vec![("Host", "LOCALHOST:8080")],
                "http://localhost:8080/mcp",
            ),
        ] {
            assert!(
                ambiguous_host_or_origin(&req(&headers, uri)).is_none(),
                "{headers:?} {uri}"
            );
        }
    }

    #[test]
    fn client_names_in_initialize_are_clipped() {
        let long = "n".repeat(10_000);
        let body = serde_json::to_vec(
            &serde_json::json!({"jsonrpc":"2.0","id":1,"method":"initialize",
            "params":{"clientInfo":{"name": long, "version": "1", "title": "t".repeat(300)}}}),
        )
        .unwrap();
        let out: serde_json::Value =
            serde_json::from_slice(&clip_client_info(&body).unwrap()).unwrap();
        let name = out["params"]["clientInfo"]["name"].as_str().unwrap();
        assert!(name.len() <= crate::audit::MAX_NAME_BYTES && name.starts_with("nnn"));
        assert!(out["params"]["clientInfo"]["title"].as_str().unwrap().len() <= 256);
        assert_eq!(out["params"]["clientInfo"]["version"], "1");
        assert!(
            clip_client_info(br#"{"method":"initialize","params":{"clientInfo":{"name":"a"}}}"#)
                .is_none()
        );
    }

    #[test]
    fn principals_are_what_the_server_established() {
        let p = |addr: &str| Some(addr.parse::<SocketAddr>().unwrap());
        assert_eq!(principal(true, p("10.1.2.3:5")).0, "http-token");
        assert_eq!(principal(true, p("10.9.9.9:6")).0, "http-token");
        assert_eq!(principal(false, p("127.0.0.1:5")).0, "http-loopback");
        assert_eq!(principal(false, p("127.0.0.2:7")).0, "http-loopback");
        assert_eq!(principal(false, p("[::1]:7")).0, "http-loopback");
        assert_eq!(
            principal(false, p("10.1.2.3:5")).0,
            principal(false, p("10.1.2.3:9")).0
        );
        assert_eq!(
            principal(false, p("[2001:db8:1:2::5]:5")).0,
            principal(false, p("[2001:db8:1:2::6]:5")).0
        );
        assert_eq!(principal(false, None).0, "http-unknown");
        // IPv4 peers of a dual-stack listener are their IPv4 addresses.
        assert_eq!(
            principal(false, p("[::ffff:127.0.0.1]:5")).0,
            "http-loopback"
        );
        assert_eq!(
            principal(false, p("[::ffff:10.1.2.3]:5")).0,
            principal(false, p("10.1.2.3:9")).0
        );
        assert_ne!(
            principal(false, p("[::ffff:10.1.2.3]:5")).0,
            principal(false, p("[::ffff:10.1.2.4]:5")).0
        );
    }

    #[test]
    fn rejections_are_logged_twenty_per_window_then_counted() {
        let root = tempfile::tempdir().unwrap();
        let mut c = crate::config::Config::defaults(crate::config::Mode::Cli);
        c.roots = vec![root.path().to_path_buf()];
        let ferret = Arc::new(Ferret::new(c).unwrap());
        let mut log = Rejections::new(ferret.clone());
        log.window = crate::audit::Window::new(REJECTIONS_PER_WINDOW, Duration::from_millis(200));
        for i in 0..25 {
            log.reject("http", "HTTP_401", format!("try {i}"));
        }
        assert_eq!(
            ferret.audit().export().len(),
            REJECTIONS_PER_WINDOW as usize
        );
        std::thread::sleep(Duration::from_millis(250));
        log.reject("http", "HTTP_401", "after".into());
        let all = ferret.audit().export();
        let summary = &all[REJECTIONS_PER_WINDOW as usize];
        assert_eq!(summary.code.as_deref(), Some("REJECTIONS_NOT_LOGGED"));
        assert!(summary.reason.as_deref().unwrap().starts_with("5 more"));
        assert_eq!(all.last().unwrap().reason.as_deref(), Some("after"));
        assert!(all.iter().all(|e| e.result == Outcome::Denied));
    }
}

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
//! - sessions: at most `max_sessions` live (503 to a new `initialize`), each closed
//!   after [`SESSION_IDLE`] without requests, its memory handed back; at most
//!   [`STREAMS_PER_SESSION`] event streams each (429);
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
    /// Live sessions; a new `initialize` over this gets 503.
    pub max_sessions: usize,
    /// A request's headers, and then its body, must each arrive within this; an idle
    /// keep-alive connection is closed after it.
    pub read_timeout: Duration,
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
    let shared = Shared::new(ferret.clone(), true)?;
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
    let gate = Arc::new(Gate {
        hosts: hosts.clone(),
        token: opts.token.clone().filter(|t| !t.is_empty()),
        max_body: opts.max_body_bytes,
        read_timeout: opts.read_timeout,
        max_sessions: opts.max_sessions,
        sessions: sessions.clone(),
        streams: Streams::default(),
        log: Rejections::new(ferret.clone()),
    });
    let app = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn(
            move |req: Request, next: Next| {
                let gate = gate.clone();
                async move { gate.admit(req, next).await }
            },
        ));
    tokio::spawn(trim_after_sessions_end(sessions, stop.clone()));

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
                let stream = req.method() == Method::GET;
                let busy = Busy::new(conn_state.clone(), stream);
                req.extensions_mut().insert(Peer(peer));
                req.extensions_mut().insert(conn_state.clone());
                let app = app.clone();
                async move {
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

/// What a connection is doing, for choosing which to close at the cap.
#[derive(Default)]
struct ConnState {
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
        if busy <= reading {
            0
        } else if busy <= reading + streams {
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
            table: Mutex::new((0, std::collections::BTreeMap::new())),
        }
    }

    fn admit(&self, peer: std::net::IpAddr) -> Admitted {
        let mut t = crate::error::lock(&self.table);
        let (next, open) = &mut *t;
        let idle_of_peer = || {
            open.iter()
                .filter(|(_, c)| c.peer == peer && c.state.class() == 0)
                .map(|(id, _)| *id)
        };
        let mut evict = None;
        if idle_of_peer().count() >= self.per_peer_idle {
            evict = idle_of_peer().next();
        }
        if evict.is_none() && open.len() >= self.max {
            // A connection just opened has not had the time to send its headers: it goes
            // after the streams, and the oldest first (a flood's, not the newcomer's).
            let grace = self.grace;
            let pick = |class: u8, young: bool| {
                open.iter()
                    .find(|(_, c)| {
                        c.state.class() == class && (young || c.opened.elapsed() >= grace)
                    })
                    .map(|(id, _)| *id)
            };
            evict = pick(0, false)
                .or_else(|| pick(1, true))
                .or_else(|| pick(0, true));
            if evict.is_none() {
                return Admitted::No;
            }
        }
        let evicted = evict.and_then(|id| open.remove(&id)).map(|old| {
            old.kill.cancel();
            old.peer
        });
        *next += 1;
        let id = *next;
        let state = Arc::new(ConnState::default());
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
    Principal(match peer {
        _ if token => "http-token".to_string(),
        Some(p) if p.ip().is_loopback() => "http-loopback".to_string(),
        Some(p) => match p.ip() {
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
    streams: Streams,
    log: Rejections,
}

impl Gate {
    async fn admit(&self, mut req: Request, next: Next) -> Response {
        let peer_addr = req.extensions().get::<Peer>().map(|p| p.0);
        let peer = peer_addr.map_or_else(|| "?".to_string(), |p| p.to_string());
        let what = crate::audit::clip(
            &format!("{} {}", req.method(), req.uri().path()),
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
        req.extensions_mut()
            .insert(principal(self.token.is_some(), peer_addr));
        let response = self.pass(req, next).await;
        let status = response.status();
        let refused = response.extensions().get::<Refused>().map(|r| r.0);
        if refused.is_some() || matches!(status.as_u16(), 401 | 403 | 408 | 413 | 429 | 503) {
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
        if req.method() == Method::DELETE {
            // rmcp answers a session's end with 202; the Python SDK takes anything but
            // 200/204 for a failure and warns on every close. Nothing is pending after
            // a DELETE, so 204 is the truthful answer.
            let mut r = next.run(req).await;
            if r.status() == StatusCode::ACCEPTED {
                *r.status_mut() = StatusCode::NO_CONTENT;
            }
            return r;
        }
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
            let live = self.sessions.sessions.read().await.len();
            if live >= self.max_sessions {
                let mut r = (
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!(
                        "{live} sessions are open, the most this server keeps ({}); close one \
                         (DELETE /mcp with its Mcp-Session-Id) or retry later\n",
                        self.max_sessions
                    ),
                )
                    .into_response();
                r.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("10"));
                return r;
            }
        }
        next.run(Request::from_parts(parts, Body::from(bytes)))
            .await
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
        .and_then(|v| v.strip_prefix("Bearer "))
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
struct Rejections {
    ferret: Arc<Ferret>,
    /// Start of the current window, records logged in it, records only counted.
    window: Mutex<(Instant, u32, u64)>,
    length: Duration,
}

impl Rejections {
    fn new(ferret: Arc<Ferret>) -> Rejections {
        Rejections {
            ferret,
            window: Mutex::new((Instant::now(), 0, 0)),
            length: REJECTION_WINDOW,
        }
    }

    fn reject(&self, operation: &str, code: &str, reason: String) {
        let mut w = crate::error::lock(&self.window);
        let now = Instant::now();
        if now.duration_since(w.0) >= self.length {
            if w.2 > 0 {
                self.record(
                    "http",
                    "REJECTIONS_NOT_LOGGED",
                    format!(
                        "{} more rejections in {} ms were not logged one by one",
                        w.2,
                        self.length.as_millis()
                    ),
                );
            }
            *w = (now, 0, 0);
        }
        if w.1 < REJECTIONS_PER_WINDOW {
            w.1 += 1;
            self.record(operation, code, reason);
        } else {
            w.2 += 1;
        }
    }

    fn record(&self, operation: &str, code: &str, reason: String) {
        self.ferret.audit().log(AuditEntry {
            timestamp: crate::clock::now_rfc3339(),
            session_id: "-".into(),
            principal: None,
            agent_id: "-".into(),
            operation: operation.into(),
            path: None,
            result: Outcome::Denied,
            code: Some(code.into()),
            reason: Some(reason),
            bytes_read: 0,
            bytes_sent: 0,
            file_count: 0,
            duration_ms: 0.0,
            command: None,
            decision: None,
            exit_code: None,
            engine: None,
        });
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
        // Everyone is answering a request: the newcomer is refused, nobody is cut.
        assert!(matches!(t.admit(a), Admitted::No));
        assert!(!held[0].2.is_cancelled() && !held[3].2.is_cancelled());
        // A request ends: its connection is idle again, and goes first.
        drop(_answer0);
        assert!(matches!(
            t.admit(b),
            Admitted::Yes {
                evicted: Some(_),
                ..
            }
        ));
        assert!(held[0].2.is_cancelled());
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
    }

    #[test]
    fn rejections_are_logged_twenty_per_window_then_counted() {
        let root = tempfile::tempdir().unwrap();
        let mut c = crate::config::Config::defaults(crate::config::Mode::Cli);
        c.roots = vec![root.path().to_path_buf()];
        let ferret = Arc::new(Ferret::new(c).unwrap());
        let mut log = Rejections::new(ferret.clone());
        log.length = Duration::from_millis(200);
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

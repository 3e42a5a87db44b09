//! Streamable HTTP transport at `/mcp`.
//!
//! Safe by default: binds loopback; a non-loopback address needs a bearer token; the token
//! is checked on every request in constant time (401 otherwise); `Host` and `Origin` are
//! checked against allow-lists by rmcp (403), which protects a local server from DNS
//! rebinding by a web page; SIGINT/SIGTERM stop it gracefully. All sessions share one
//! [`Ferret`]: the undo journal, the limits and the audit log.
//!
//! Bounded under hostile load (each bound a test in `tests/mcp/test_interop.py`):
//! - connections: at most `max_connections` at once (more are closed as accepted, so
//!   descriptors cannot run out); a request's headers must arrive within `read_timeout`,
//!   which also closes idle keep-alive connections (slowloris);
//! - bodies: at most `max_body_bytes` (413), arriving within `read_timeout` (408);
//! - sessions: at most `max_sessions` live (503 to a new `initialize`), each closed
//!   after [`SESSION_IDLE`] without requests, its memory handed back;
//! - every rejection (401, 403, 408, 413, 503, and connections over the cap) is an
//!   audit record, at most [`REJECTIONS_PER_WINDOW`] per [`REJECTION_WINDOW`], then one
//!   record saying how many more there were.

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
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq;
use tokio_util::sync::CancellationToken;

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
        .with_allowed_hosts(hosts)
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
        token: opts.token.clone().filter(|t| !t.is_empty()),
        max_body: opts.max_body_bytes,
        read_timeout: opts.read_timeout,
        max_sessions: opts.max_sessions,
        sessions: sessions.clone(),
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

/// Accepts connections until SIGINT/SIGTERM, at most `max_connections` at once, then
/// lets the open ones finish (up to five seconds).
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
    let slots = Arc::new(tokio::sync::Semaphore::new(opts.max_connections.max(1)));
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
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            log.reject(
                "connection",
                "TOO_MANY_CONNECTIONS",
                format!(
                    "{peer}: over {} connections at once; closed",
                    opts.max_connections
                ),
            );
            drop(stream);
            continue;
        };
        let app = app.clone();
        let svc =
            hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
                req.extensions_mut().insert(Peer(peer));
                tower::ServiceExt::oneshot(app.clone(), req)
            });
        let conn = builder.serve_connection(TokioIo::new(stream), svc);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            let _ = conn.await;
            drop(slot);
        });
    }
    // Long-lived streams end when their sessions do.
    stop.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(5), graceful.shutdown()).await;
}

/// The client's address, for the audit records of rejections.
#[derive(Clone, Copy)]
struct Peer(SocketAddr);

/// What every request passes before rmcp sees it.
struct Gate {
    token: Option<String>,
    max_body: usize,
    read_timeout: Duration,
    max_sessions: usize,
    sessions: Arc<LocalSessionManager>,
    log: Rejections,
}

impl Gate {
    async fn admit(&self, req: Request, next: Next) -> Response {
        let peer = req
            .extensions()
            .get::<Peer>()
            .map_or_else(|| "?".to_string(), |p| p.0.to_string());
        let what = format!("{} {}", req.method(), req.uri().path());
        let seen = |req: &Request, name: header::HeaderName| {
            req.headers().get(name).map(|v| {
                String::from_utf8_lossy(v.as_bytes())
                    .chars()
                    .take(100)
                    .collect::<String>()
            })
        };
        let (host, origin) = (seen(&req, header::HOST), seen(&req, header::ORIGIN));
        let response = self.pass(req, next).await;
        let status = response.status();
        if matches!(status.as_u16(), 401 | 403 | 408 | 413 | 503) {
            let mut reason = format!("{peer}: {what}");
            if status == StatusCode::FORBIDDEN {
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
        if let Some(expected) = &self.token
            && !token_matches(&req, expected)
        {
            let mut r =
                (StatusCode::UNAUTHORIZED, "missing or wrong bearer token\n").into_response();
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return r;
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
        if req.method() != Method::POST {
            return next.run(req).await;
        }
        // Bodies are read here, whole, within a time limit: a client trickling one in
        // holds a connection for read_timeout at most.
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

fn token_matches(req: &Request, expected: &str) -> bool {
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    bool::from(given.as_bytes().ct_eq(expected.as_bytes()))
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

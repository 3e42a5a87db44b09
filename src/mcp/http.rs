//! Streamable HTTP transport at `/mcp`.
//!
//! Safe by default: binds loopback; a non-loopback address needs a bearer token; the token
//! is checked on every request in constant time (401 otherwise); `Host` and `Origin` are
//! checked against allow-lists by rmcp (403), which protects a local server from DNS
//! rebinding by a web page; request bodies are limited; SIGINT/SIGTERM stop it gracefully.
//! All sessions share one [`Ferret`]: the undo journal, the limits and the audit log.

use super::{FerretServer, Shared};
use crate::context::Ferret;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use std::net::SocketAddr;
use std::sync::Arc;
use subtle::ConstantTimeEq;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone)]
pub struct HttpOptions {
    pub addr: SocketAddr,
    pub token: Option<String>,
    /// Extra `Host` values to accept (beyond loopback names and the bound address).
    pub allowed_hosts: Vec<String>,
    /// Extra `Origin` values to accept (beyond http://localhost and loopback addresses).
    pub allowed_origins: Vec<String>,
    pub max_body_bytes: usize,
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
    let shared = Shared::new(ferret, true)?;
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
    let service = StreamableHttpService::new(
        move || Ok(FerretServer::new(shared.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let token = opts.token.filter(|t| !t.is_empty()).map(Arc::new);
    let app = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn(
            move |req: Request, next: Next| {
                let token = token.clone();
                async move { authorize(token.as_deref().map(String::as_str), req, next).await }
            },
        ));

    // Tests and scripts read the bound address (port 0 picks a free one).
    eprintln!("ferret: serving MCP at http://{bound}/mcp");
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown_signal().await;
            stop.cancel();
        })
        .await?;
    Ok(())
}

async fn authorize(token: Option<&str>, req: Request, next: Next) -> Response {
    if let Some(expected) = token {
        let given = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        if !bool::from(given.as_bytes().ct_eq(expected.as_bytes())) {
            let mut r =
                (StatusCode::UNAUTHORIZED, "missing or wrong bearer token\n").into_response();
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return r;
        }
    }
    next.run(req).await
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

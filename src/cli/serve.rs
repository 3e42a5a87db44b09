//! `ferret serve`: the MCP server on stdio or streamable HTTP, on a tokio runtime of its
//! own (the rest of the CLI is synchronous).

use super::args::ServeArgs;
use crate::context::Ferret;
use std::sync::Arc;

pub fn serve(ferret: Ferret, a: ServeArgs) -> anyhow::Result<i32> {
    let ferret = Arc::new(ferret);
    let questions = crate::mcp::Questions {
        timeout: std::time::Duration::from_secs(a.question_timeout.max(1)),
        per_client: a.max_questions_per_client.max(1),
    };
    let http = a.http.map(|addr| crate::mcp::http::HttpOptions {
        addr,
        token: a.token,
        allowed_hosts: a.allow_hosts,
        allowed_origins: a.allow_origins,
        max_body_bytes: a.max_body,
        max_connections: a.max_connections,
        max_sessions: a.max_sessions,
        read_timeout: std::time::Duration::from_secs(a.read_timeout.max(1)),
        max_sessions_per_client: a.max_sessions_per_client,
        questions,
    });
    if let Some(h) = &http {
        crate::mcp::http::check(h)?;
    }
    if http.is_none() && std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        // A person ran it by hand: say what it is waiting for (stderr; stdout is the
        // protocol).
        eprintln!(
            "ferret: speaking MCP on stdin/stdout, waiting for a client. Connect one with, e.g., \
             `claude mcp add ferret -- ferret --root DIR serve` (see the README); to use the tools by hand, \
             try `ferret grep PATTERN`, `ferret ls` or `ferret call TOOL '{{...}}'`. Ctrl-D or Ctrl-C ends it."
        );
    }
    // Before any thread starts: the arena limit applies to arenas made after it.
    crate::search::index::steady_allocator();
    if !a.no_index {
        build_index_in_background(&ferret);
    }
    // Tool calls run on the blocking pool. Past a few dozen at once they only queue
    // for the cores anyway; tokio's default (512 threads) let 100 sessions grow the
    // server by a thread stack and an allocator arena per concurrent call.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(MAX_CALLS_AT_ONCE)
        .build()?;
    let served = rt.block_on(async move {
        match http {
            Some(h) => crate::mcp::http::serve_http(ferret, h).await,
            None => crate::mcp::serve_stdio(ferret, questions).await,
        }
    });
    // Every call was answered (stdio drains them at EOF, HTTP at SIGTERM); a thread
    // still running is one answered at its deadline that its engine cannot stop (a
    // search inside one buffer). Dropping the runtime would wait for it, minutes
    // perhaps (round 24: a server past EOF still ran after 100 s); it is given a moment,
    // then the process ends. A change cut short so is one a SIGKILL would cut: the
    // journal finishes or rolls it back at the next start.
    rt.shutdown_timeout(SHUTDOWN_GRACE);
    served?;
    Ok(0)
}

/// How long a server that has stopped serving waits for calls' threads still running.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// Builds the live index on a thread of its own; searches scan until it is ready, then
/// answer from it. Progress and the outcome go to stderr (stdout is the protocol).
fn build_index_in_background(ferret: &Arc<Ferret>) {
    let ferret = Arc::clone(ferret);
    let spawned = std::thread::Builder::new()
        .name("ferret-index".into())
        .spawn(move || {
            let started = std::time::Instant::now();
            tracing::info!("index: building (searches scan until it is ready)");
            match ferret.build_index(crate::control::CancelToken::new(), true) {
                Ok(s) => {
                    let blind = ferret
                        .index_status()
                        .and_then(|st| st.blind)
                        .map_or(String::new(), |b| format!("; {b}"));
                    tracing::info!(
                        "index: ready in {:.1} s: {} files, {} indexed ({} MB), {} trigrams{blind}",
                        started.elapsed().as_secs_f64(),
                        s.files,
                        s.indexed,
                        s.bytes / 1_000_000,
                        s.trigrams
                    );
                    // Written to disk for the next start, then mapped: the memory the
                    // build took is given back.
                    let started = std::time::Instant::now();
                    match ferret.save_index() {
                        Ok(Some((path, n))) => tracing::info!(
                            "index: saved in {:.1} s ({} MB at {}); a restart starts from it",
                            started.elapsed().as_secs_f64(),
                            n / 1_000_000,
                            path.display()
                        ),
                        Ok(None) => {}
                        Err(e) => tracing::warn!("index: not saved ({e}); it stays in memory"),
                    }
                }
                Err(e) => tracing::warn!("index: not built ({}); searches scan", e.message),
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("index: not built (no thread: {e}); searches scan");
    }
}

/// Tool calls that run at once in a server (more wait their turn).
const MAX_CALLS_AT_ONCE: usize = 32;

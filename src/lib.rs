//! # ferret — a fast, sandboxed, undoable file toolkit for AI agents
//!
//! ferret gives an agent read, search and (opt-in) change access to a workspace, through
//! one set of tools served to every front end: an MCP server, a command line, and this
//! Rust API.
//!
//! ## Module map
//! Layers, bottom up; each uses only those below it (`tests/layers.rs` checks it):
//! [`error`], [`clock`] → [`config`], [`control`] → [`workspace`] → [`limits`], [`audit`],
//! [`history`] → [`search`] → [`tool`] → [`registry`] → [`tools`] → [`context`] (the
//! call path, [`Ferret`]) → [`prompt`] → [`mcp`] → [`cli`].
//!
//! - [`error`]: `ToolError` and its stable `ErrorCode`s. [`clock`]: timestamps.
//! - [`config`]: defaults ← user config ← `FERRET_*` ← flags, with provenance; a
//!   workspace's own `ferret.toml` only narrows.
//! - [`control`]: cancellation, deadline and progress of one call.
//! - [`workspace`]: the sandbox. Roots as cap-std directory handles; every path walked
//!   over handles with the deny rules on every real name. Tools only ever open through it.
//! - [`limits`]: per-client round budgets and per-call limits.
//! - [`audit`]: one JSON Lines record per call.
//! - [`history`]: the state directory, backups, the write-ahead undo journal with
//!   recovery, and the trash over directory handles.
//! - [`search`]: the search engine (parallel walk + ripgrep's searcher).
//! - [`tool`]: the `Tool` trait (a tool defined once) and `Ctx`, what a tool may touch.
//! - [`registry`]: lookup by name, schema export.
//! - [`tools`]: one file per tool.
//! - [`context`]: `Ferret` (shared services; `call` and `call_typed`), `CallOptions`.
//! - [`prompt`]: the guidance given to agents.
//! - [`mcp`]: the MCP server (stdio, streamable HTTP), one bridge for every tool.
//! - [`cli`]: the `ferret` command, and `ferret shell` (the interactive console with
//!   direct bash) on the same dispatch.
//!
//! ## Using it as a library
//! ```no_run
//! use ferret::{config::{Config, Mode}, context::{CallOptions, Ferret, Session}};
//! let mut config = Config::defaults(Mode::Server);
//! config.roots = vec!["/path/to/project".into()];
//! let ferret = Ferret::new(config).unwrap();
//! let session = Session::new("s1", "my-agent");
//! let out = ferret.call(&session, "read_file", serde_json::json!({"path": "README.md"}),
//!                       CallOptions::default());
//! match out {
//!     Ok(o) => println!("{}", o.text),
//!     Err(e) => eprintln!("{}", e.render()),
//! }
//! ```

pub mod audit;
pub mod cli;
pub mod clock;
pub mod config;
pub mod context;
pub mod control;
pub mod error;
pub mod history;
pub mod limits;
pub mod mcp;
pub mod platform;
pub mod prompt;
pub mod registry;
pub mod search;
pub mod text;
pub mod tool;
pub mod tools;
pub mod workspace;

pub use context::{CallOptions, Ferret, Session};
pub use control::{CancelToken, Progress};
pub use error::{ErrorCode, SetupError, ToolError};
pub use tool::Front;

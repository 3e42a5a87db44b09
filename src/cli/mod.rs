//! The `ferret` command: clap definitions and the human subcommands.
//!
//! Every subcommand that runs a tool goes through [`Ferret::call`] with the tool's JSON
//! arguments, exactly as `ferret call` and the MCP server do, so the command line can
//! never do something the tools would refuse.
//!
//! Exit codes: `ferret call` exits 0 on success, 1 on a tool error, 2 on a usage error.
//! The human subcommands follow grep and ripgrep: 0 on success, 1 for "no" (`exists` on a
//! missing path), 2 on an error.

use crate::config::{self, Mode, Overrides};
use crate::context::{CallOptions, Ferret, Session};
use crate::error::ToolError;
use crate::registry::SchemaFormat;
use crate::tool::CallOutput;
use clap::{Args, Parser, Subcommand};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "ferret",
    version,
    about = "Fast, sandboxed, undoable file tools for AI agents"
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args)]
pub struct Global {
    /// Workspace root (repeatable; default: the current directory). Env: FERRET_ROOT.
    #[arg(long = "root", global = true, value_name = "DIR")]
    pub roots: Vec<PathBuf>,
    /// Configuration file (default: ferret.toml in the first root). Env: FERRET_CONFIG.
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Append an audit record per tool call to FILE (JSON Lines). Env: FERRET_AUDIT_LOG.
    #[arg(long, global = true, value_name = "FILE")]
    pub audit_log: Option<PathBuf>,
    /// Let write tools change files (edit, undo). Env: FERRET_ALLOW_WRITE.
    #[arg(long, global = true)]
    pub allow_write: bool,
    /// Preview every change, write nothing. Env: FERRET_DRY_RUN.
    #[arg(long, global = true)]
    pub dry_run: bool,
    /// Where backups and the undo journal live. Env: FERRET_STATE_DIR.
    #[arg(long, global = true, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Set any configuration key (repeatable): --set max_file_size=2097152.
    #[arg(long = "set", global = true, value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Call any tool with JSON arguments; print its structured result as JSON.
    Call {
        /// Tool name (see `ferret tools`).
        tool: String,
        /// Arguments as a JSON object; `-` reads them from standard input.
        #[arg(default_value = "{}")]
        json: String,
        /// Print the text rendering (what a model reads) instead of JSON.
        #[arg(long)]
        text: bool,
    },
    /// Print every tool's definition (name, description, schemas, annotations) as JSON.
    Tools {
        #[arg(long, value_enum, default_value = "mcp")]
        format: Format,
    },
    /// Read a file, with line numbers.
    Read {
        path: String,
        /// First line to print (1-based).
        #[arg(long)]
        offset: Option<u64>,
        /// Number of lines to print.
        #[arg(long, short = 'n')]
        limit: Option<u64>,
        /// Print the bytes as base64.
        #[arg(long)]
        base64: bool,
        #[arg(long)]
        json: bool,
    },
    /// List a directory.
    Ls {
        #[arg(default_value = ".")]
        path: String,
        #[arg(long, short = 'r')]
        recursive: bool,
        /// Levels to list (1: the directory's own entries).
        #[arg(long)]
        depth: Option<u64>,
        /// Include hidden entries.
        #[arg(long, short = 'a')]
        all: bool,
        #[arg(long)]
        json: bool,
    },
    /// Show a file's metadata.
    Info {
        path: String,
        #[arg(long)]
        json: bool,
    },
    /// Exit 0 if the path exists, 1 if not.
    Exists {
        path: String,
        #[arg(long)]
        json: bool,
    },
    /// Search file contents (like rg): content by default; exit 1 when nothing matched.
    Grep {
        pattern: String,
        path: Option<String>,
        #[arg(short = 'i', long)]
        ignore_case: bool,
        #[arg(short = 'F', long)]
        fixed_strings: bool,
        #[arg(short = 'U', long)]
        multiline: bool,
        #[arg(short = 'A', long, value_name = "N")]
        after_context: Option<usize>,
        #[arg(short = 'B', long, value_name = "N")]
        before_context: Option<usize>,
        #[arg(short = 'C', long, value_name = "N")]
        context: Option<usize>,
        /// Only files matching GLOB (repeatable; !GLOB excludes).
        #[arg(short = 'g', long = "glob", value_name = "GLOB")]
        globs: Vec<String>,
        /// Print only the paths of matching files.
        #[arg(short = 'l', long)]
        files_with_matches: bool,
        /// Print matching lines per file.
        #[arg(short = 'c', long, conflicts_with = "files_with_matches")]
        count: bool,
        /// Most results (lines, or files with -l/-c); 0 for all.
        #[arg(long, default_value_t = 0)]
        max: usize,
        /// Search hidden files too.
        #[arg(long, short = '.')]
        hidden: bool,
        #[arg(long)]
        json: bool,
    },
    /// Find files by glob pattern; exit 1 when none matched.
    Glob {
        pattern: String,
        path: Option<String>,
        /// Most files; 0 for all.
        #[arg(long, default_value_t = 0)]
        max: usize,
        /// Newest first instead of by path.
        #[arg(long)]
        modified: bool,
        #[arg(long, short = '.')]
        hidden: bool,
        #[arg(long)]
        json: bool,
    },
    /// Replace an exact string in a file (needs --allow-write).
    Edit {
        path: String,
        /// The exact text to replace.
        #[arg(long = "old", allow_hyphen_values = true)]
        old: String,
        /// The replacement.
        #[arg(long = "new", allow_hyphen_values = true)]
        new: String,
        /// Replace every occurrence.
        #[arg(long)]
        all: bool,
        /// Confirm a change to a confirm-listed path.
        #[arg(long, short = 'y')]
        yes: bool,
        #[arg(long)]
        json: bool,
    },
    /// Delete a file or directory: to the trash, undoable (needs --allow-write).
    Rm {
        path: String,
        /// Delete for good instead (asks for confirmation: pass --yes).
        #[arg(long)]
        permanent: bool,
        /// Confirm a permanent delete or a change to a confirm-listed path.
        #[arg(long, short = 'y')]
        yes: bool,
        #[arg(long)]
        json: bool,
    },
    /// Undo the last change, or change ID (needs --allow-write).
    Undo {
        id: Option<u64>,
        /// Undo even if the file changed since (its content is backed up first).
        #[arg(long)]
        force: bool,
        #[arg(long)]
        json: bool,
    },
    /// List the changes in the undo journal.
    History {
        #[arg(long)]
        json: bool,
    },
    /// Serve the tools to agents over MCP: stdio by default, streamable HTTP with --http.
    Serve {
        /// Serve streamable HTTP at ADDR (like 127.0.0.1:8765) instead of stdio.
        #[arg(long, value_name = "ADDR")]
        http: Option<std::net::SocketAddr>,
        /// Bearer token every HTTP request must carry (needed off loopback). Env: FERRET_TOKEN.
        #[arg(long, env = "FERRET_TOKEN", hide_env_values = true)]
        token: Option<String>,
        /// Tools to serve, comma-separated (config key `tools`).
        #[arg(long, value_delimiter = ',')]
        tools: Option<Vec<String>>,
        /// Another Host header value to accept over HTTP (repeatable).
        #[arg(long = "allow-host", value_name = "HOST")]
        allow_hosts: Vec<String>,
        /// Another Origin to accept over HTTP (repeatable), like https://app.example.com:443.
        #[arg(long = "allow-origin", value_name = "ORIGIN")]
        allow_origins: Vec<String>,
        /// Largest HTTP request body in bytes.
        #[arg(long, default_value_t = 4 * 1024 * 1024)]
        max_body: usize,
    },
    /// Print the instructions the MCP server gives agents (for hosts that write their own
    /// system prompt).
    Prompt,
    /// Print the effective configuration and where each value came from.
    Config {
        #[arg(long)]
        json: bool,
    },
}

/// Which API's tool-definition shape `ferret tools` prints.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Format {
    /// MCP `tools/list` entries, with output schemas and annotations.
    Mcp,
    /// OpenAI Chat Completions `tools` entries.
    Openai,
    /// Anthropic Messages API `tools` entries.
    Anthropic,
}

/// Runs the command line and returns the exit code.
pub fn main() -> i32 {
    init_logging();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ferret: {e:#}");
            2
        }
    }
}

fn init_logging() {
    // stdout carries results (and, for `serve`, the MCP transport): logs go to stderr.
    let filter = tracing_subscriber::EnvFilter::try_from_env("FERRET_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// The environment variables ferret reads, with `FERRET_ROOT` (a path list) folded into
/// `FERRET_ROOTS` (the config key's own name).
fn ferret_env() -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = std::env::vars()
        .filter(|(k, _)| k.starts_with("FERRET_"))
        .collect();
    if let Some(r) = env.remove("FERRET_ROOT") {
        let joined: Vec<String> = std::env::split_paths(&r)
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        env.entry("FERRET_ROOTS".into()).or_insert(joined.join(","));
    }
    env
}

/// Builds the configuration for `mode` from the global flags and the environment.
pub fn load_config(global: &Global, mode: Mode) -> anyhow::Result<config::Loaded> {
    let mut flags = Vec::new();
    if !global.roots.is_empty() {
        let roots: Vec<Value> = global
            .roots
            .iter()
            .map(|r| Value::String(r.to_string_lossy().into_owned()))
            .collect();
        flags.push((
            "roots".to_string(),
            Value::Array(roots),
            "--root".to_string(),
        ));
    }
    for (set, key, flag) in [
        (global.allow_write, "allow_write", "--allow-write"),
        (global.dry_run, "dry_run", "--dry-run"),
    ] {
        if set {
            flags.push((key.to_string(), Value::Bool(true), flag.to_string()));
        }
    }
    if let Some(d) = &global.state_dir {
        flags.push((
            "state_dir".to_string(),
            Value::String(d.to_string_lossy().into_owned()),
            "--state-dir".to_string(),
        ));
    }
    if let Some(a) = &global.audit_log {
        flags.push((
            "audit_log".to_string(),
            Value::String(a.to_string_lossy().into_owned()),
            "--audit-log".to_string(),
        ));
    }
    let overrides = Overrides {
        config_file: global.config.clone(),
        flags,
        sets: global.sets.clone(),
    };
    config::load(mode, &overrides, &ferret_env())
}

fn run(mut cli: Cli) -> anyhow::Result<i32> {
    let server = matches!(cli.command, Command::Serve { .. } | Command::Prompt);
    if let Command::Serve { tools: Some(t), .. } = &cli.command {
        cli.global.sets.push(format!("tools={}", t.join(",")));
    }
    let loaded = load_config(&cli.global, if server { Mode::Server } else { Mode::Cli })?;
    let session = Session::new(format!("cli-{}", std::process::id()), "cli");
    match cli.command {
        Command::Tools { format } => {
            let format = match format {
                Format::Mcp => SchemaFormat::Mcp,
                Format::Openai => SchemaFormat::Openai,
                Format::Anthropic => SchemaFormat::Anthropic,
            };
            let _ = print_json(&crate::tools::standard().export(format));
            Ok(0)
        }
        Command::Edit {
            path,
            old,
            new,
            all,
            yes,
            json,
        } => human_with(
            &loaded,
            &session,
            "edit",
            json!({ "path": path, "old_string": old, "new_string": new, "replace_all": all }),
            json,
            yes,
        ),
        Command::Rm {
            path,
            permanent,
            yes,
            json,
        } => human_with(
            &loaded,
            &session,
            "file_delete",
            json!({ "path": path, "permanent": permanent }),
            json,
            yes,
        ),
        Command::Undo { id, force, json } => {
            let mut args = json!({ "force": force });
            if let Some(id) = id {
                args["id"] = id.into();
            }
            human(&loaded, &session, "undo", args, json)
        }
        Command::History { json } => {
            let ferret = Ferret::new(loaded.config)?;
            let entries = ferret
                .history()
                .map_err(|e| anyhow::anyhow!(e.render()))?
                .entries()
                .map_err(|e| anyhow::anyhow!(e.render()))?;
            if json {
                print_json(&serde_json::to_value(&entries)?)?;
            } else if entries.is_empty() {
                print_text("No changes yet.")?;
            } else {
                let undone: Vec<u64> = entries.iter().filter_map(|e| e.undoes).collect();
                let mut out = String::new();
                for e in &entries {
                    let what = match e.undoes {
                        Some(id) => format!("undo of {id}"),
                        None if undone.contains(&e.id) => {
                            format!("{} (undone)", e.action.as_str())
                        }
                        None if e.pending => format!("{} (under way)", e.action.as_str()),
                        None => e.action.as_str().to_string(),
                    };
                    out.push_str(&format!(
                        "{:>4}  {}  {:<16} {}\n",
                        e.id, e.timestamp, what, e.path
                    ));
                }
                print_text(&out)?;
            }
            Ok(0)
        }
        Command::Prompt => {
            let ferret = Ferret::new(loaded.config)?;
            let tools = crate::mcp::served_tools(&ferret)?;
            print_text(&crate::prompt::instructions(&ferret, &tools))?;
            Ok(0)
        }
        Command::Serve {
            http,
            token,
            allow_hosts,
            allow_origins,
            max_body,
            ..
        } => {
            let ferret = std::sync::Arc::new(Ferret::new(loaded.config)?);
            let http = http.map(|addr| crate::mcp::http::HttpOptions {
                addr,
                token,
                allowed_hosts: allow_hosts,
                allowed_origins: allow_origins,
                max_body_bytes: max_body,
            });
            if let Some(h) = &http {
                crate::mcp::http::check(h)?;
            }
            let rt = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?;
            rt.block_on(async move {
                match http {
                    Some(h) => crate::mcp::http::serve_http(ferret, h).await,
                    None => crate::mcp::serve_stdio(ferret).await,
                }
            })?;
            Ok(0)
        }
        Command::Config { json } => {
            let ferret = Ferret::new(loaded.config.clone())?;
            print_config(&loaded, &ferret, json);
            Ok(0)
        }
        Command::Call { tool, json, text } => {
            let raw = if json == "-" {
                let mut s = String::new();
                std::io::stdin().read_to_string(&mut s)?;
                s
            } else {
                json
            };
            let args: Value = serde_json::from_str(&raw)
                .map_err(|e| anyhow::anyhow!("the arguments are not valid JSON: {e}"))?;
            if !args.is_object() {
                anyhow::bail!("the arguments must be a JSON object, like '{{\"path\":\"a.txt\"}}'");
            }
            let ferret = Ferret::new(loaded.config)?;
            let result = ferret.call(&session, &tool, args, CallOptions::default());
            let _ = match (&result, text) {
                (Ok(out), true) => print_text(&out.text),
                (Ok(out), false) => print_json(&out.structured),
                (Err(e), true) => print_text(&e.render()),
                (Err(e), false) => print_json(&json!({ "error": e })),
            };
            Ok(if result.is_ok() { 0 } else { 1 })
        }
        Command::Read {
            path,
            offset,
            limit,
            base64,
            json,
        } => {
            let mut args = json!({ "path": path });
            if let Some(o) = offset {
                args["offset"] = o.into();
            }
            if let Some(l) = limit {
                args["limit"] = l.into();
            }
            if base64 {
                args["encoding"] = "base64".into();
            }
            human(&loaded, &session, "read_file", args, json)
        }
        Command::Ls {
            path,
            recursive,
            depth,
            all,
            json,
        } => {
            let mut args = json!({ "path": path, "recursive": recursive, "include_hidden": all });
            if let Some(d) = depth {
                args["max_depth"] = d.into();
            }
            human(&loaded, &session, "list_directory", args, json)
        }
        Command::Grep {
            pattern,
            path,
            ignore_case,
            fixed_strings,
            multiline,
            after_context,
            before_context,
            context,
            globs,
            files_with_matches,
            count,
            max,
            hidden,
            json,
        } => {
            let mode = if files_with_matches {
                "files_with_matches"
            } else if count {
                "count"
            } else {
                "content"
            };
            let mut args = json!({
                "pattern": pattern, "ignore_case": ignore_case, "fixed_strings": fixed_strings,
                "multiline": multiline, "glob": globs, "output_mode": mode, "max_results": max,
                "include_hidden": hidden,
            });
            for (k, v) in [
                ("path", path.map(Value::from)),
                ("context", context.map(Value::from)),
                ("context_before", before_context.map(Value::from)),
                ("context_after", after_context.map(Value::from)),
            ] {
                if let Some(v) = v {
                    args[k] = v;
                }
            }
            found_or_not(&loaded, &session, "grep", args, json, "file_count")
        }
        Command::Glob {
            pattern,
            path,
            max,
            modified,
            hidden,
            json,
        } => {
            let mut args = json!({
                "pattern": pattern, "max_results": max, "include_hidden": hidden,
                "sort": if modified { "modified" } else { "path" },
            });
            if let Some(p) = path {
                args["path"] = p.into();
            }
            found_or_not(&loaded, &session, "glob", args, json, "count")
        }
        Command::Info { path, json } => human(
            &loaded,
            &session,
            "get_file_info",
            json!({ "path": path }),
            json,
        ),
        Command::Exists { path, json } => {
            let ferret = Ferret::new(loaded.config.clone())?;
            match ferret.call(
                &session,
                "file_exists",
                json!({ "path": path }),
                CallOptions::default(),
            ) {
                Ok(out) => {
                    emit(&out, json);
                    Ok(if out.structured["exists"] == Value::Bool(true) {
                        0
                    } else {
                        1
                    })
                }
                Err(e) => Ok(report(&e)),
            }
        }
    }
}

fn human(
    loaded: &config::Loaded,
    session: &Session,
    tool: &str,
    args: Value,
    json: bool,
) -> anyhow::Result<i32> {
    human_with(loaded, session, tool, args, json, false)
}

/// Runs a tool for a person; `confirmed` is their `--yes`.
fn human_with(
    loaded: &config::Loaded,
    session: &Session,
    tool: &str,
    args: Value,
    json: bool,
    confirmed: bool,
) -> anyhow::Result<i32> {
    let ferret = Ferret::new(loaded.config.clone())?;
    let opts = CallOptions {
        confirmed,
        ..CallOptions::default()
    };
    match ferret.call(session, tool, args, opts) {
        Ok(out) => {
            emit(&out, json);
            Ok(0)
        }
        Err(e) => Ok(report(&e)),
    }
}

/// Runs a search; exit 0 when it found something, 1 when not (as grep does).
fn found_or_not(
    loaded: &config::Loaded,
    session: &Session,
    tool: &str,
    args: Value,
    json: bool,
    count_field: &str,
) -> anyhow::Result<i32> {
    let ferret = Ferret::new(loaded.config.clone())?;
    match ferret.call(session, tool, args, CallOptions::default()) {
        Ok(out) => {
            let found = out.structured[count_field].as_u64().unwrap_or(0) > 0;
            if found || json {
                emit(&out, json);
            }
            Ok(if found { 0 } else { 1 })
        }
        Err(e) => Ok(report(&e)),
    }
}

fn emit(out: &CallOutput, json: bool) {
    let _ = if json {
        print_json(&out.structured)
    } else {
        print_text(&out.text)
    };
}

fn report(e: &ToolError) -> i32 {
    eprintln!("ferret: {}", e.render());
    2
}

fn print_json(v: &Value) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, v)?;
    writeln!(out)
}

fn print_text(s: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(s.as_bytes())?;
    if !s.ends_with('\n') {
        writeln!(out)?;
    }
    Ok(())
}

fn print_config(loaded: &config::Loaded, ferret: &Ferret, json: bool) {
    let values = serde_json::to_value(&loaded.config).unwrap_or(Value::Null);
    let roots: Vec<Value> = ferret
        .workspace()
        .roots()
        .iter()
        .map(|r| json!({ "name": r.name, "path": r.path, "canonical": r.canonical }))
        .collect();
    if json {
        let _ = print_json(&json!({ "config": values, "sources": loaded.sources, "roots": roots }));
        return;
    }
    let mut out = String::new();
    if let Value::Object(map) = &values {
        for (k, v) in map {
            let src = loaded
                .sources
                .get(k)
                .map(|s| s.to_string())
                .unwrap_or_default();
            let line = match v {
                Value::Null => format!("# {k} (unset)"),
                v => format!("{k} = {v}"),
            };
            out.push_str(&format!("{line:<60} # {src}\n"));
        }
    }
    out.push_str("\n# roots served:\n");
    for r in ferret.workspace().roots() {
        out.push_str(&format!("#   {} = {}\n", r.name, r.canonical.display()));
    }
    let _ = print_text(&out);
}

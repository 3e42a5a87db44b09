//! The `ferret` command: [`args`] (clap) → [`overrides`] (configuration) → one of the
//! subcommands: the human ones through the typed [`bridge`], `call` and the rest in
//! [`show`], `serve` in [`serve`]; all output through [`output`].
//!
//! Every subcommand that runs a tool goes through the call path ([`Ferret::call`] or
//! [`Ferret::call_typed`]), exactly as the MCP server does, so the command line can never
//! do something the tools would refuse.
//!
//! Exit codes: `ferret call` exits 0 on success, 1 on a tool error, 2 on a usage error.
//! The human subcommands follow grep and ripgrep: 0 on success, 1 for "no" (nothing
//! matched, `exists` on a missing path), 2 on an error. A closed output pipe exits 0.

pub mod args;
pub mod bridge;
pub mod grep_print;
pub mod output;
pub mod overrides;
pub mod rg;
pub mod serve;
pub mod shell;
pub mod show;

pub use args::{Cli, Command, Global};
pub use overrides::load_config;

use crate::config::Loaded;
use crate::config::Mode;
use crate::context::{Ferret, Session};
use crate::tools::{
    apply_patch, edit, file_delete, file_exists, get_file_info, list_directory, move_path,
    read_file, read_files, undo, write_file,
};
use bridge::{Answer, Caller, Exit};
use clap::Parser;

/// Runs the command line and returns the exit code.
pub fn main() -> i32 {
    // The PDF text helper (a child the server starts): nothing else runs in it.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == crate::tools::pdf::HELPER_ARG)
    {
        return crate::tools::pdf::helper_main();
    }
    if let Ok(me) = std::env::current_exe() {
        crate::tools::pdf::set_helper(me);
    }
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
        Err(e) if output::is_broken_pipe(&e) => 0,
        Err(e) => {
            eprintln!("ferret: {e:#}");
            2
        }
    }
}

fn init_logging() {
    // stdout carries results (and, for `serve`, the MCP transport): logs go to stderr.
    let filter = tracing_subscriber::EnvFilter::try_from_env("FERRET_LOG").unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(
            "warn,ferret::cli::serve=info,ferret::search::index=info",
        )
    });
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(|| SafeStderr)
        .try_init();
}

/// stderr for log lines: a line names files of the workspace and strings an agent gave,
/// so every control, direction or line-break character in it is escaped
/// ([`crate::error::echo`]) but the newline that ends it. A hostile name cannot forge a
/// log line of its own.
struct SafeStderr;

impl std::io::Write for SafeStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let (body, end) = match text.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (&*text, ""),
        };
        let line = format!("{}{end}", crate::error::echo(body));
        std::io::stderr().write_all(line.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// The path arguments of a human subcommand, read from the current directory (see
/// [`rg::Here`]): rewritten to the root-relative paths the tools take, or the refusal
/// of one outside the root (the root never moves to follow a path). `grep` and `glob`
/// do their own (they print results under the paths as typed).
fn paths_from_here(c: &Caller, command: &mut Command) -> Result<(), crate::error::ToolError> {
    let here = rg::Here::find(c.ferret);
    let here = here.as_ref();
    let rewrite = |arg: &mut String| rg::Here::rewrite(here, arg);
    match command {
        Command::Read(a) => {
            rewrite(&mut a.path)?;
            for m in &mut a.more {
                rewrite(m)?;
            }
        }
        Command::Ls(a) => rewrite(&mut a.path)?,
        Command::Info(a) | Command::Exists(a) => rewrite(&mut a.path)?,
        Command::Edit(a) => rewrite(&mut a.path)?,
        Command::Write(a) => rewrite(&mut a.path)?,
        Command::Rm(a) => rewrite(&mut a.path)?,
        Command::Mv(a) => {
            rewrite(&mut a.source)?;
            rewrite(&mut a.destination)?;
        }
        _ => {}
    }
    Ok(())
}

fn run(mut cli: Cli) -> anyhow::Result<i32> {
    let server = matches!(cli.command, Command::Serve(_) | Command::Prompt);
    if let Command::Serve(s) = &cli.command
        && let Some(t) = &s.tools
    {
        cli.global.sets.push(format!("tools={}", t.join(",")));
    }
    if let Command::Tools { format } = cli.command {
        return show::tools(format);
    }
    let mode = match &cli.command {
        // One local client, the user's own agent: its own request budget.
        Command::Serve(s) if s.http.is_none() => Mode::Stdio,
        _ if server => Mode::Server,
        _ => Mode::Cli,
    };
    // The write flags, also taken after the subcommands that can write.
    if let Some(w) = cli.command.write_flags() {
        cli.global.allow_write |= w.allow_write;
        cli.global.dry_run |= w.dry_run;
    }
    let loaded = load_config(&cli.global, mode, None)?;
    let ferret = Ferret::new(loaded.config.clone())?.with_notices(loaded.notices.clone());
    if uses_index(&cli.command) {
        ferret.use_stored_index();
    }
    match cli.command {
        Command::Serve(a) => serve::serve(ferret, a),
        Command::Shell(a) => shell::run(ferret, loaded, a),
        command => {
            let session = Session::new(format!("cli-{}", std::process::id()), "cli")
                .from_front(crate::tool::Front::Cli);
            let caller = Caller {
                ferret: &ferret,
                session: &session,
                answer: Answer::for_terminal(false),
                cancel: Default::default(),
            };
            dispatch(&caller, &loaded, command)
        }
    }
}

/// `ferret call` is the MCP tool: its result is held to the output budget a server
/// holds it to (the server's default `max_output_chars`), unless a setting names one
/// (the user's, or a workspace's narrowing) or `--full` lifts it (0: no limit).
fn call_output_chars(loaded: &Loaded, full: bool) -> Option<u64> {
    if full {
        return Some(0);
    }
    let server = crate::config::Config::defaults(Mode::Server).max_output_chars;
    match loaded.sources.get("max_output_chars") {
        None | Some(crate::config::Source::Default) => Some(server),
        // A workspace's file only narrows: below the server's budget, never above it
        // (the CLI's own setting is "none", so any number would otherwise widen).
        Some(crate::config::Source::File(p))
            if loaded.config.roots.iter().any(|r| p.starts_with(r)) =>
        {
            Some(loaded.config.max_output_chars.min(server))
        }
        Some(_) => None,
    }
}

/// Whether a command searches, so a stored index (`ferret index`) may spare it reads.
fn uses_index(command: &Command) -> bool {
    match command {
        Command::Grep(_) | Command::Glob(_) | Command::Shell(_) => true,
        Command::Call(a) => {
            ["grep", "glob", "search_files", "file_search"].contains(&a.tool.as_str())
        }
        _ => false,
    }
}

/// Runs one human subcommand (the command line's, or a line typed in the shell) and
/// returns its exit code.
fn dispatch(c: &Caller, loaded: &Loaded, mut command: Command) -> anyhow::Result<i32> {
    let f = c.ferret;
    if let Err(e) = paths_from_here(c, &mut command) {
        eprintln!("ferret: {}", e.render());
        return Ok(2);
    }
    match command {
        Command::Tools { format } => show::tools(format),
        Command::Serve(_) | Command::Shell(_) => {
            anyhow::bail!("`serve` and `shell` are not commands inside the shell")
        }
        Command::Call(a) => {
            let chars = call_output_chars(loaded, a.full);
            show::call(f, c.session, a, chars)
        }
        Command::History { json, recover, .. } => show::history(f, json, recover),
        Command::Index(a) => show::index(f, c.cancel.clone(), a),
        Command::Config { json } => show::config(loaded, f, json),
        Command::Prompt => {
            let tools = crate::mcp::served_tools(f)?;
            output::print_text(&crate::prompt::instructions(f, &tools))?;
            Ok(0)
        }
        Command::Read(a) if !a.more.is_empty() || a.path.contains(['*', '?', '[', '{']) => {
            let json = a.json;
            let params = read_files::Params {
                paths: std::iter::once(a.path).chain(a.more).collect(),
                max_lines_each: a.limit.unwrap_or(0),
                offset: a.offset,
            };
            bridge::run(c, &read_files::ReadFiles, params, json, Exit::Success)
        }
        Command::Read(a) => {
            let json = a.json;
            bridge::run(c, &read_file::ReadFile, a.into(), json, Exit::Success)
        }
        Command::Ls(a) => {
            let json = a.json;
            let tool = &list_directory::ListDirectory;
            bridge::run(c, tool, a.into(), json, Exit::Success)
        }
        Command::Info(a) => {
            let json = a.json;
            let tool = &get_file_info::GetFileInfo;
            bridge::run(c, tool, a.into(), json, Exit::Success)
        }
        Command::Exists(a) => {
            let json = a.json;
            let exit = Exit::Found {
                found: |o: &file_exists::Output| o.exists,
                quiet_miss: false,
            };
            bridge::run(c, &file_exists::FileExists, a.into(), json, exit)
        }
        Command::Grep(a) => rg::grep(c, a),
        Command::Glob(a) => rg::glob(c, a),
        Command::Edit(a) => {
            let (json, yes) = (a.json, a.yes);
            bridge::run_confirmable(c, &edit::Edit, a.into(), json, yes, Exit::Success)
        }
        Command::Write(a) => {
            let (json, yes) = (a.json, a.yes);
            let tool = &write_file::WriteFile;
            let params = a.into_params()?;
            bridge::run_confirmable(c, tool, params, json, yes, Exit::Success)
        }
        Command::Mv(a) => {
            let (json, yes) = (a.json, a.yes);
            let tool = &move_path::Move;
            bridge::run_confirmable(c, tool, a.into(), json, yes, Exit::Success)
        }
        Command::Patch(a) => {
            let (json, yes) = (a.json, a.yes);
            let params = apply_patch::Params {
                changes: Vec::new(),
                patch: Some(bridge::read_stdin("the patch")?),
                expected_versions: Default::default(),
                dry_run: false, // --dry-run is global: the configuration carries it
            };
            let tool = &apply_patch::ApplyPatch;
            bridge::run_confirmable(c, tool, params, json, yes, Exit::Success)
        }
        Command::Rm(a) => {
            let (json, yes) = (a.json, a.yes);
            let tool = &file_delete::FileDelete;
            bridge::run_confirmable(c, tool, a.into(), json, yes, Exit::Success)
        }
        Command::Undo(a) => {
            let (json, yes) = (a.json, a.yes);
            bridge::run_confirmable(c, &undo::Undo, a.into(), json, yes, Exit::Success)
        }
    }
}

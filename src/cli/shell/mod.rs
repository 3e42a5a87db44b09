//! `ferret shell`: seed 003's console, the human front end of the same tools.
//!
//! A line is one of:
//! - a subcommand (`grep TODO -i -g '*.rs'`), split into words like a shell would and
//!   parsed by the command line's own clap definitions, then run through the same
//!   [`super::dispatch`] as `ferret grep …`: same flags, same output, same checks;
//! - a slash command: `/undo [ID]`, `/history`, `/dry-run on|off`, `/help`, `/quit`;
//! - direct bash, `!cmd` or `$cmd` ([`bash`]): judged by [`classify`] first.
//!
//! Questions (permanent deletes, confirm-listed paths, destructive bash) go through the
//! command line's one y/N mechanism, [`Answer`]. On a terminal the line editor is
//! rustyline, with history in the state directory and completion ([`complete`]);
//! without one, standard input runs as a script and every question answers no unless
//! `--yes`. Ctrl-C stops the running command or search (a SIGINT handler sets the
//! call's cancel flag; a bash child gets the signal from the terminal itself) and
//! returns to the prompt; Ctrl-D leaves.

mod bash;
pub mod classify;
mod complete;

use super::args::{Command, ShellArgs};
use super::bridge::{Answer, Caller};
use crate::config::Loaded;
use crate::context::{Ferret, Session};
use crate::control::CancelToken;
use clap::Parser;
use std::cell::RefCell;
use std::io::{BufRead, IsTerminal};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A line typed in the shell: one subcommand, parsed by the command line's definitions,
/// so a flag added to the CLI appears here too.
#[derive(Debug, Parser)]
#[command(name = "ferret", no_binary_name = true, disable_version_flag = true)]
struct Line {
    #[command(subcommand)]
    command: Command,
}

/// The slash commands, for `/help` and completion.
const SLASH: &[(&str, &str)] = &[
    ("/undo", "[ID] undo the last change, or change ID"),
    ("/history", "list the changes that can be undone"),
    ("/dry-run", "on|off: preview every change, write nothing"),
    ("/help", "this help"),
    ("/quit", "leave the shell (also Ctrl-D)"),
];

/// What to do after a line.
enum Flow {
    Go(i32),
    Quit,
}

struct Shell {
    ferret: Rc<RefCell<Ferret>>,
    loaded: Loaded,
    session: Session,
    answer: Answer,
    interactive: bool,
    interrupted: Arc<AtomicBool>,
    blocklist: classify::Blocklist,
}

/// Runs the shell until `/quit`, Ctrl-D or the end of the script. Returns the exit code:
/// 0 on a terminal, the last command's in a script (as `sh` does).
pub fn run(ferret: Ferret, loaded: Loaded, args: ShellArgs) -> anyhow::Result<i32> {
    let blocklist = classify::Blocklist::new(&loaded.config.bash_blocklist)?;
    let interactive = std::io::stdin().is_terminal();
    // Ctrl-C while a command runs sets this flag (the call's cancel token) instead of
    // ending the shell; at the prompt the line editor reads Ctrl-C as a key.
    let interrupted = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGINT, interrupted.clone())?;
    let mut shell = Shell {
        ferret: Rc::new(RefCell::new(ferret)),
        loaded,
        session: Session::new(format!("shell-{}", std::process::id()), "shell")
            .from_front(crate::tool::Front::Shell),
        answer: if args.yes {
            Answer::Yes
        } else if interactive {
            Answer::Ask
        } else {
            Answer::No
        },
        interactive,
        interrupted,
        blocklist,
    };
    if interactive {
        shell.interactive()
    } else {
        shell.script()
    }
}

impl Shell {
    fn script(&mut self) -> anyhow::Result<i32> {
        let mut last = 0;
        for line in std::io::stdin().lock().lines() {
            match self.line(&line?) {
                Flow::Go(code) => last = code,
                Flow::Quit => break,
            }
        }
        Ok(last)
    }

    fn interactive(&mut self) -> anyhow::Result<i32> {
        use rustyline::error::ReadlineError;
        let config = rustyline::Config::builder()
            .auto_add_history(false)
            .completion_type(rustyline::CompletionType::List)
            .build();
        let mut editor: rustyline::Editor<complete::Helper, rustyline::history::FileHistory> =
            rustyline::Editor::with_config(config)?;
        editor.set_helper(Some(complete::Helper::new(
            self.ferret.clone(),
            self.session.clone(),
        )));
        let history = self.history_file();
        if let Some(h) = &history
            && usable_history(h, false)
        {
            let _ = editor.load_history(h); // none yet: a fresh history
        }
        eprintln!("ferret shell: tool commands, !cmd for bash, /help for more, Ctrl-D to leave");
        loop {
            let prompt = if self.ferret.borrow().config().dry_run {
                "ferret (dry-run)> "
            } else {
                "ferret> "
            };
            match editor.readline(prompt) {
                Ok(line) => {
                    if !line.trim().is_empty() {
                        let _ = editor.add_history_entry(line.as_str());
                        if let Some(h) = &history {
                            save_history(&mut editor, h);
                        }
                    }
                    if let Flow::Quit = self.line(&line) {
                        break;
                    }
                }
                Err(ReadlineError::Interrupted) => continue,
                Err(ReadlineError::Eof) => break,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(0)
    }

    /// `shell_history` in the state directory (never inside a root), or none when
    /// there is no state directory to be had. Only the interactive shell keeps one (the
    /// lines a person typed, as a login shell does): it makes the state directory for
    /// it, with the checks a change makes (outside every root, mode 0700, this user's,
    /// not a link). A script creates nothing unless it changes something.
    fn history_file(&self) -> Option<std::path::PathBuf> {
        let ferret = self.ferret.borrow();
        let roots = ferret.workspace().canonical_roots();
        let h = crate::history::History::open(ferret.config(), &roots).ok()?;
        match h.make_dir() {
            Ok(dir) => Some(dir.join("shell_history")),
            Err(e) => {
                tracing::warn!("the shell history is not kept: {e}");
                None
            }
        }
    }

    /// Runs one line; never fails: errors are printed and give exit code 2.
    fn line(&mut self, text: &str) -> Flow {
        let text = text.trim();
        if text.is_empty() || text.starts_with('#') {
            return Flow::Go(0);
        }
        self.interrupted.store(false, Ordering::Relaxed);
        let result = if let Some(cmd) = text.strip_prefix(['!', '$']) {
            let ferret = self.ferret.borrow();
            bash::run(&bash::Direct {
                caller: &self.caller(&ferret),
                blocklist: &self.blocklist,
                interactive: self.interactive,
                line: cmd.trim(),
            })
        } else if text.starts_with('/') {
            return self.slash(text);
        } else if matches!(text, "exit" | "quit") {
            return Flow::Quit;
        } else if matches!(text, "help" | "?") {
            print_help();
            Ok(0)
        } else {
            self.command(text)
        };
        Flow::Go(match result {
            Ok(code) => code,
            Err(e) if super::output::is_broken_pipe(&e) => 0,
            Err(e) => {
                eprintln!("ferret: {e:#}");
                2
            }
        })
    }

    fn caller<'a>(&'a self, ferret: &'a Ferret) -> Caller<'a> {
        Caller {
            ferret,
            session: &self.session,
            answer: self.answer,
            cancel: CancelToken::from_flag(self.interrupted.clone()),
        }
    }

    /// A subcommand line: shell words, then the command line's parser.
    fn command(&self, text: &str) -> anyhow::Result<i32> {
        let words = shell_words::split(text)
            .map_err(|e| anyhow::anyhow!("{e} (quote with '…' or \"…\")"))?;
        self.words(&words)
    }

    fn words(&self, words: &[String]) -> anyhow::Result<i32> {
        let line = match Line::try_parse_from(words) {
            Ok(l) => l,
            Err(e) if words.first().is_some_and(|w| !is_command(w)) => {
                // Not "Usage: ferret <COMMAND>": the shell's own commands, as typed here.
                eprintln!("{}", unknown_command(&words[0], &e));
                return Ok(2);
            }
            Err(e) => {
                let _ = e.print();
                return Ok(if e.use_stderr() { 2 } else { 0 });
            }
        };
        let mut line = line;
        if line
            .command
            .write_flags()
            .is_some_and(|w| w.allow_write || w.dry_run)
        {
            anyhow::bail!(
                "--allow-write and --dry-run are set when the shell starts (and /dry-run on|off inside it)"
            );
        }
        // A script's line answers no question for itself: without a terminal every
        // question answers no unless the shell was started with --yes (round 30: a
        // script line's own `--yes` edited a confirm-listed CI file unasked). At a
        // terminal the person typing it is the one who would be asked.
        if self.answer == Answer::No && line.command.says_yes() {
            anyhow::bail!(
                "--yes on a line is refused without a terminal: every question answers no; start the shell with \
                 --yes to answer yes to all, or run the command at a terminal"
            );
        }
        match &mut line.command {
            Command::Write(w) if w.content.is_none() => anyhow::bail!(
                "in the shell, give the content with --content '…' (standard input is the shell's)"
            ),
            Command::Patch(_) => anyhow::bail!(
                "patch reads the patch from standard input, which is the shell's: run `ferret patch < FILE` outside it"
            ),
            // Seed 003 asks before a delete at the console: even to the trash (undoable),
            // a slip of the finger should cost a keystroke, not a /undo.
            Command::Rm(a) if !a.yes && !a.permanent => {
                let config = self.ferret.borrow().config().clone();
                if config.allow_write && !config.dry_run {
                    let q = format!(
                        "Delete {} (to the trash; /undo brings it back)?",
                        crate::workspace::shown_in_prose(&a.path)
                    );
                    if !self.answer.confirm(&q)? {
                        eprintln!("ferret: not confirmed; nothing was changed");
                        return Ok(2);
                    }
                    // That was the question about this delete: a confirm-listed path
                    // (CI files…) is not asked about a second time.
                    a.yes = true;
                }
            }
            _ => {}
        }
        let ferret = self.ferret.borrow();
        super::dispatch(&self.caller(&ferret), &self.loaded, line.command)
    }

    fn slash(&mut self, text: &str) -> Flow {
        let mut words = text.split_whitespace();
        let name = words.next().unwrap_or_default();
        let rest: Vec<String> = words.map(str::to_string).collect();
        let code = match name {
            "/quit" | "/exit" | "/q" => return Flow::Quit,
            "/help" | "/?" => {
                print_help();
                0
            }
            // The subcommands themselves, so /undo takes exactly `undo`'s flags.
            "/undo" | "/history" => {
                let words: Vec<String> =
                    std::iter::once(name[1..].to_string()).chain(rest).collect();
                match self.words(&words) {
                    Ok(c) => c,
                    Err(e) => {
                        eprintln!("ferret: {e:#}");
                        2
                    }
                }
            }
            "/dry-run" => self.dry_run(rest.first().map(String::as_str)),
            _ => {
                eprintln!("ferret: no command {name}; /help lists them");
                2
            }
        };
        Flow::Go(code)
    }

    /// `/dry-run on|off`: the same setting as `--dry-run`, so every tool previews alike.
    fn dry_run(&mut self, arg: Option<&str>) -> i32 {
        let on = match arg {
            Some("on") => true,
            Some("off") => false,
            None => {
                let now = self.ferret.borrow().config().dry_run;
                println!("dry-run is {}", if now { "on" } else { "off" });
                return 0;
            }
            Some(other) => {
                eprintln!("ferret: /dry-run takes on or off, not {other:?}");
                return 2;
            }
        };
        let mut config = self.ferret.borrow().config().clone();
        config.dry_run = on;
        match Ferret::new(config.clone()) {
            Ok(f) => {
                *self.ferret.borrow_mut() = f.with_notices(self.loaded.notices.clone());
                self.loaded.config = config;
                println!(
                    "dry-run is {}{}",
                    if on { "on" } else { "off" },
                    if on {
                        ": changes are previewed, nothing is written"
                    } else {
                        ""
                    }
                );
                0
            }
            Err(e) => {
                eprintln!("ferret: {e}");
                2
            }
        }
    }
}

/// Appends the newest line to the history file, readable by its owner only.
fn save_history(
    editor: &mut rustyline::Editor<complete::Helper, rustyline::history::FileHistory>,
    path: &std::path::Path,
) {
    if !usable_history(path, true) {
        return;
    }
    if let Err(e) = editor.append_history(path) {
        tracing::warn!(error = %e, path = %path.display(), "cannot save the shell history");
        return;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
    }
}

/// Whether the history file at `path` may be opened by the line editor (which opens it
/// by name, following links and blocking on a FIFO): its directory must be the user's
/// own real state directory, and the file a regular one or, to be written, not there
/// yet.
fn usable_history(path: &std::path::Path, write: bool) -> bool {
    let Some(dir) = path.parent() else {
        return false;
    };
    if crate::history::safe::check_state_dir(dir).is_err() {
        return false;
    }
    match std::fs::symlink_metadata(path) {
        Ok(md) if md.file_type().is_file() => true,
        Err(e) if write && e.kind() == std::io::ErrorKind::NotFound => true,
        Ok(_) => {
            tracing::warn!(path = %path.display(), "the shell history is not a regular file: not used");
            false
        }
        Err(_) => false,
    }
}

fn print_help() {
    let mut out = String::from("Commands (each takes --help):\n");
    let cmd = <Line as clap::CommandFactory>::command();
    for sub in cmd.get_subcommands() {
        let name = sub.get_name();
        if matches!(name, "serve" | "shell" | "help") {
            continue;
        }
        let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
        let about = about.lines().next().unwrap_or_default().to_string();
        out.push_str(&format!("  {name:<10} {about}\n"));
    }
    out.push_str("\nShell commands:\n");
    for (name, about) in SLASH {
        out.push_str(&format!("  {name:<10} {about}\n"));
    }
    out.push_str(
        "\nDirect bash:\n  !CMD, $CMD  run CMD in bash in the first root. Asked first (direct_bash_confirm);\n              \
         destructive commands are always asked; bash_blocklist entries are refused.\n\n\
         Tab completes commands, flags and workspace paths. Ctrl-C stops a running command.\n",
    );
    print!("{out}");
}

/// Whether `word` names one of the shell's subcommands (or clap's `help`).
fn is_command(word: &str) -> bool {
    word == "help" || commands().iter().any(|(name, _)| name == word)
}

/// What the shell says to a line that starts with no command it has: the nearest one
/// when there is one, and every command it has, the way they are typed here.
fn unknown_command(word: &str, e: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue};
    let near = match e.get(ContextKind::SuggestedSubcommand) {
        Some(ContextValue::String(s)) => format!(" (did you mean {s}?)"),
        Some(ContextValue::Strings(s)) if !s.is_empty() => {
            format!(" (did you mean {}?)", s.join(" or "))
        }
        _ => String::new(),
    };
    let names: Vec<String> = commands()
        .into_iter()
        .map(|(name, _)| name)
        .filter(|n| n != "help")
        .collect();
    let slash: Vec<&str> = SLASH.iter().map(|(n, _)| *n).collect();
    format!(
        "ferret shell: no command {:?}{near}.\nCommands: {}.\nShell: {}; !CMD runs CMD in bash. `help` says what each does; `COMMAND --help` its flags.",
        word,
        names.join(", "),
        slash.join(", ")
    )
}

/// The names and flags of the shell's subcommands, for completion.
fn commands() -> Vec<(String, Vec<String>)> {
    let cmd = <Line as clap::CommandFactory>::command();
    cmd.get_subcommands()
        .filter(|s| !matches!(s.get_name(), "serve" | "shell"))
        .map(|s| {
            let mut flags = Vec::new();
            for a in s.get_arguments() {
                if let Some(l) = a.get_long() {
                    flags.push(format!("--{l}"));
                }
                if let Some(c) = a.get_short() {
                    flags.push(format!("-{c}"));
                }
            }
            flags.push("--help".to_string());
            (s.get_name().to_string(), flags)
        })
        .collect()
}

//! The human subcommands, typed end to end: each subcommand's arguments convert into its
//! tool's own `Params` (`From<EditArgs> for edit::Params`; grep and glob in [`super::rg`]), the call goes through
//! [`Ferret::call_typed`] (the same budget, deadline and audit as every call), and the
//! exit code is read from the tool's own `Output`. Renaming a tool's field breaks this
//! file at compile time, not a user at run time.

use super::args::{EditArgs, LsArgs, MvArgs, PathArgs, ReadArgs, RmArgs, UndoArgs, WriteArgs};
use super::output::{print_json, print_text};
use crate::context::{CallOptions, Ferret, Session};
use crate::control::CancelToken;
use crate::error::ErrorCode;
use crate::tool::Tool;
use crate::tools::{
    edit, file_delete, file_exists, get_file_info, list_directory, move_path, read_file, undo,
    write_file,
};

impl From<ReadArgs> for read_file::Params {
    fn from(a: ReadArgs) -> Self {
        read_file::Params {
            path: a.path,
            encoding: if a.base64 {
                read_file::Encoding::Base64
            } else {
                read_file::Encoding::Utf8
            },
            max_lines: None,
            offset: a.offset,
            limit: a.limit,
        }
    }
}

impl From<LsArgs> for list_directory::Params {
    fn from(a: LsArgs) -> Self {
        list_directory::Params {
            path: a.path,
            recursive: a.recursive,
            max_depth: a.depth,
            include_hidden: a.all,
            offset: a.offset,
            no_ignore: a.no_ignore,
        }
    }
}

impl From<PathArgs> for get_file_info::Params {
    fn from(a: PathArgs) -> Self {
        get_file_info::Params { path: a.path }
    }
}

impl From<PathArgs> for file_exists::Params {
    fn from(a: PathArgs) -> Self {
        file_exists::Params { path: a.path }
    }
}

impl From<EditArgs> for edit::Params {
    fn from(a: EditArgs) -> Self {
        edit::Params {
            path: a.path,
            old_string: a.old,
            new_string: a.new,
            replace_all: a.all,
            expected_version: a.expected_version,
            dry_run: false, // --dry-run is global: the configuration carries it
        }
    }
}

/// Everything on standard input (`what` names it in an error).
pub fn read_stdin(what: &str) -> anyhow::Result<String> {
    let mut s = String::new();
    std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
        .map_err(|e| anyhow::anyhow!("reading {what} from standard input: {e}"))?;
    Ok(s)
}

impl WriteArgs {
    /// The params, with the content read from standard input unless given.
    pub fn into_params(self) -> anyhow::Result<write_file::Params> {
        let content = match self.content {
            Some(c) => c,
            None => read_stdin("the content")?,
        };
        Ok(write_file::Params {
            path: self.path,
            content,
            encoding: None,
            overwrite: self.overwrite,
            expected_version: self.expected_version,
            dry_run: false, // --dry-run is global: the configuration carries it
        })
    }
}

impl From<MvArgs> for move_path::Params {
    fn from(a: MvArgs) -> Self {
        move_path::Params {
            source: a.source,
            destination: a.destination,
            overwrite: a.overwrite,
            dry_run: false, // --dry-run is global: the configuration carries it
        }
    }
}

impl From<RmArgs> for file_delete::Params {
    fn from(a: RmArgs) -> Self {
        file_delete::Params {
            path: a.path,
            permanent: a.permanent,
            dry_run: false,
        }
    }
}

impl From<UndoArgs> for undo::Params {
    fn from(a: UndoArgs) -> Self {
        undo::Params {
            id: a.id,
            force: a.force,
            dry_run: false,
        }
    }
}

/// How a subcommand's exit code follows from its tool's output.
pub enum Exit<O> {
    /// 0 whenever the tool succeeded.
    Success,
    /// 0 when the output says "found", 1 when not (grep, glob, exists); with `quiet_miss`
    /// nothing is printed for a miss (as grep prints nothing).
    Found {
        found: fn(&O) -> bool,
        quiet_miss: bool,
    },
}

/// How a question for the person is answered: one mechanism for the command line's
/// confirmations and the shell's (permanent deletes, confirm-listed paths, destructive
/// direct bash).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Ask y/N on the terminal (default no).
    Ask,
    /// Answered yes in advance (`--yes`).
    Yes,
    /// No one to ask: every question is answered no.
    No,
}

impl Answer {
    /// `--yes` answers yes; otherwise a person is asked when there is a terminal to ask
    /// on (standard input and standard error), and without one the answer is no.
    pub fn for_terminal(yes: bool) -> Self {
        use std::io::IsTerminal;
        if yes {
            Answer::Yes
        } else if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
            Answer::Ask
        } else {
            Answer::No
        }
    }

    /// This answer, or yes when `yes` (a command's own `--yes`).
    pub fn or_yes(self, yes: bool) -> Self {
        if yes { Answer::Yes } else { self }
    }

    /// The answer to `question`: asked on the terminal when it must be.
    pub fn confirm(self, question: &str) -> anyhow::Result<bool> {
        match self {
            Answer::Yes => Ok(true),
            Answer::No => Ok(false),
            Answer::Ask => ask(question),
        }
    }
}

/// Who calls a tool: the services, the session, how questions are answered, and the
/// flag that stops a running call (the shell's Ctrl-C).
pub struct Caller<'a> {
    pub ferret: &'a Ferret,
    pub session: &'a Session,
    pub answer: Answer,
    pub cancel: CancelToken,
}

impl Caller<'_> {
    fn options(&self, confirmed: bool) -> CallOptions {
        CallOptions {
            confirmed,
            cancel: self.cancel.clone(),
            ..CallOptions::default()
        }
    }
}

/// Runs one tool for a person: typed params in, typed output out, text (or `--json`)
/// printed. Returns the exit code: 0, 1 for "no" (see [`Exit`]), 2 for a tool error.
pub fn run<T: Tool>(
    c: &Caller,
    tool: &T,
    params: T::Params,
    json: bool,
    exit: Exit<T::Output>,
) -> anyhow::Result<i32> {
    run_printed(c, tool, params, json, exit, |_, text| print_text(text))
}

/// Like [`run`], with the tool's text printed by `print` (given the output and the
/// tool's own text) instead: `ferret grep`'s terminal layout.
pub fn run_printed<T: Tool>(
    c: &Caller,
    tool: &T,
    params: T::Params,
    json: bool,
    exit: Exit<T::Output>,
    print: impl FnOnce(&T::Output, &str) -> anyhow::Result<()>,
) -> anyhow::Result<i32> {
    let typed = match c
        .ferret
        .call_typed(c.session, tool, params, c.options(false))
    {
        Ok(t) => t,
        Err(e) => return Ok(report(&e)),
    };
    show(typed, json, exit, print)
}

/// Like [`run`], for tools that may ask for confirmation (edit, rm…): the person is
/// asked y/N as seed 003 asks (see [`Answer`]); `yes` (the command's `--yes`) answers
/// in advance; with no one to ask, the refusal says to pass `--yes`.
pub fn run_confirmable<T: Tool>(
    c: &Caller,
    tool: &T,
    params: T::Params,
    json: bool,
    yes: bool,
    exit: Exit<T::Output>,
) -> anyhow::Result<i32>
where
    T::Params: Clone,
{
    let answer = c.answer.or_yes(yes);
    let first = c.ferret.call_typed(
        c.session,
        tool,
        params.clone(),
        c.options(answer == Answer::Yes),
    );
    let typed = match first {
        Ok(t) => t,
        Err(e) if e.code == ErrorCode::ConfirmationRequired && answer == Answer::Ask => {
            if !ask(&format!("{}. Proceed?", e.message))? {
                eprintln!("ferret: not confirmed; nothing was changed");
                return Ok(2);
            }
            let mut again = c.options(true);
            again.asked_pins = Some(e.pins);
            match c.ferret.call_typed(c.session, tool, params, again) {
                Ok(t) => t,
                Err(e) => return Ok(report(&e)),
            }
        }
        Err(e) if e.code == ErrorCode::ConfirmationRequired => {
            return Ok(report(&e.with_hint("pass --yes to confirm")));
        }
        Err(e) => return Ok(report(&e)),
    };
    show(typed, json, exit, |_, text| print_text(text))
}

/// Prints a tool's error for a person; the exit code for it.
fn report(e: &crate::error::ToolError) -> i32 {
    eprintln!("ferret: {}", e.render());
    2
}

/// Asks a yes/no question on the terminal (stderr), default no. End of input is no.
fn ask(question: &str) -> anyhow::Result<bool> {
    use std::io::Write;
    let mut err = std::io::stderr().lock();
    write!(err, "ferret: {question} [y/N] ")?;
    err.flush()?;
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    Ok(matches!(
        line.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}

fn show<O: serde::Serialize>(
    typed: crate::context::Typed<O>,
    json: bool,
    exit: Exit<O>,
    print: impl FnOnce(&O, &str) -> anyhow::Result<()>,
) -> anyhow::Result<i32> {
    let (code, show) = match exit {
        Exit::Success => (0, true),
        Exit::Found { found, quiet_miss } => {
            let hit = found(&typed.output);
            (if hit { 0 } else { 1 }, hit || !quiet_miss || json)
        }
    };
    if show {
        if json {
            print_json(&typed.output)?;
        } else {
            print(&typed.output, &typed.text)?;
        }
    }
    Ok(code)
}

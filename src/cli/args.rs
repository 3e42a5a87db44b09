//! The command line's shape (clap): global flags and one argument struct per subcommand.
//! A human subcommand's struct converts into its tool's own `Params` (see
//! [`super::bridge`]); nothing here knows a tool's JSON field names.

use clap::{Args, Parser, Subcommand};
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
    /// Configuration file (default: ~/.config/ferret/config.toml, then ferret.toml in the first root, which may only narrow). Env: FERRET_CONFIG.
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Append an audit record per tool call to FILE (JSON Lines). Env: FERRET_AUDIT_LOG.
    #[arg(long, global = true, value_name = "FILE")]
    pub audit_log: Option<PathBuf>,
    /// Let write tools change files (edit, write, mv, patch, rm, undo). Env: FERRET_ALLOW_WRITE.
    /// Also taken after a subcommand that can write (only those list it).
    #[arg(long)]
    pub allow_write: bool,
    /// Preview every change, write nothing. Env: FERRET_DRY_RUN.
    #[arg(long)]
    pub dry_run: bool,
    /// Where backups and the undo journal live. Env: FERRET_STATE_DIR.
    #[arg(long, global = true, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Set any configuration key (repeatable): --set max_file_size=2097152.
    #[arg(long = "set", global = true, value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
}

/// The write-related flags, on the subcommands that can write (and before any
/// subcommand): a read-only subcommand's `--help` does not list them.
#[derive(Debug, Default, Clone, Copy, Args)]
pub struct WriteFlags {
    /// Let write tools change files. Env: FERRET_ALLOW_WRITE.
    #[arg(long)]
    pub allow_write: bool,
    /// Preview every change, write nothing. Env: FERRET_DRY_RUN.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Call any tool with JSON arguments; print its structured result as JSON, as an MCP
    /// client gets it (within a server's output budget; --full for everything).
    Call(CallArgs),
    /// Print every tool's definition (name, description, schemas, annotations) as JSON.
    Tools {
        /// Which API's definition shape to print.
        #[arg(long, value_enum, default_value = "mcp")]
        format: Format,
    },
    /// Read a file, with line numbers.
    Read(ReadArgs),
    /// List a directory.
    Ls(LsArgs),
    /// Show a file's metadata.
    Info(PathArgs),
    /// Exit 0 if the path exists, 1 if not.
    Exists(PathArgs),
    /// Search file contents (like rg): content by default; exit 1 when nothing matched.
    Grep(GrepArgs),
    /// Find files by glob pattern; exit 1 when none matched.
    Glob(GlobArgs),
    /// Replace an exact string in a file (needs --allow-write).
    Edit(EditArgs),
    /// Create a file from standard input (or --content), or replace one with --overwrite
    /// (needs --allow-write).
    Write(WriteArgs),
    /// Move or rename a file or directory, undoable (needs --allow-write).
    Mv(MvArgs),
    /// Apply a "*** Begin Patch" patch from standard input to many files, all or nothing,
    /// undoable as one change (needs --allow-write).
    Patch(PatchArgs),
    /// Delete a file or directory: to the trash, undoable (needs --allow-write).
    Rm(RmArgs),
    /// Undo the last change, or change ID (needs --allow-write).
    Undo(UndoArgs),
    /// List the changes in the undo journal, who made each, and any a killed process left.
    History {
        /// Print the journal entries as JSON.
        #[arg(long)]
        json: bool,
        /// First settle the changes a killed process left half-done (needs --allow-write;
        /// otherwise the next change does it).
        #[arg(long)]
        recover: bool,
        #[command(flatten)]
        write: WriteFlags,
    },
    /// An interactive shell: every subcommand as a command, `!cmd` for direct bash (asked
    /// about, blocklisted), `/undo`, `/history`, `/dry-run on|off`, `/help`. Without a
    /// terminal it runs standard input as a script.
    Shell(ShellArgs),
    /// Serve the tools to agents over MCP: stdio by default, streamable HTTP with --http.
    Serve(ServeArgs),
    /// Build or refresh the workspace's search index on disk (in the state directory),
    /// which `grep` and `glob` then use to skip reading unchanged files; `ferret index
    /// status` says what it holds. `ferret serve` keeps its own up to date.
    Index(IndexArgs),
    /// Print the instructions the MCP server gives agents (for hosts that write their own
    /// system prompt).
    Prompt,
    /// Print the effective configuration and where each value came from.
    Config {
        /// Print it as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub struct IndexArgs {
    /// `status`: say what the stored index holds, changing nothing.
    #[arg(value_enum)]
    pub action: Option<IndexAction>,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum IndexAction {
    Status,
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

#[derive(Debug, Args)]
pub struct CallArgs {
    #[command(flatten)]
    pub write: WriteFlags,
    /// Tool name (see `ferret tools`).
    pub tool: String,
    /// Arguments as a JSON object; `-` reads them from standard input.
    #[arg(default_value = "{}")]
    pub json: String,
    /// Print the text rendering (what a model reads) instead of JSON.
    #[arg(long)]
    pub text: bool,
    /// Print the whole result: lift the output budget a server holds results to
    /// (max_output_chars, by default the server's own).
    #[arg(long)]
    pub full: bool,
}

#[derive(Debug, Args)]
pub struct ReadArgs {
    /// The file to read.
    pub path: String,
    /// More files (or globs) to read in the same call, each under a `==> path <==` heading.
    pub more: Vec<String>,
    /// First line to print (1-based).
    #[arg(long)]
    pub offset: Option<u64>,
    /// Number of lines to print.
    #[arg(long, short = 'n')]
    pub limit: Option<u64>,
    /// Print the bytes as base64.
    #[arg(long)]
    pub base64: bool,
    /// Print the structured result as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct LsArgs {
    /// The directory to list.
    #[arg(default_value = ".")]
    pub path: String,
    /// List subdirectories too.
    #[arg(long, short = 'r')]
    pub recursive: bool,
    /// Levels to list (1: the directory's own entries).
    #[arg(long)]
    pub depth: Option<u64>,
    /// Include hidden entries.
    #[arg(long, short = 'a')]
    pub all: bool,
    /// Skip this many entries first (to page through a long listing).
    #[arg(long, default_value_t = 0)]
    pub offset: usize,
    /// List entries that .gitignore/.ignore exclude too (else counted, as grep and glob skip them).
    #[arg(long, short = 'u')]
    pub no_ignore: bool,
    /// Print the structured result as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct PathArgs {
    /// The path to look at.
    pub path: String,
    /// Print the structured result as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct GrepArgs {
    /// The pattern, then the files or directories to search (default: the current
    /// directory, relative to which paths are read and printed); with -e, all are paths.
    #[arg(value_names = ["PATTERN", "PATH"])]
    pub args: Vec<String>,
    /// A pattern to search for (repeatable: lines matching any).
    #[arg(
        short = 'e',
        long = "regexp",
        value_name = "PATTERN",
        allow_hyphen_values = true
    )]
    pub regexps: Vec<String>,
    /// Match case-insensitively.
    #[arg(short = 'i', long, overrides_with_all = ["case_sensitive", "smart_case"])]
    pub ignore_case: bool,
    /// Match case-sensitively (the default).
    #[arg(short = 's', long, overrides_with_all = ["ignore_case", "smart_case"])]
    pub case_sensitive: bool,
    /// Case-insensitive unless the pattern has an upper-case letter.
    #[arg(short = 'S', long, overrides_with_all = ["ignore_case", "case_sensitive"])]
    pub smart_case: bool,
    /// Search for the pattern as literal text, not a regex.
    #[arg(short = 'F', long)]
    pub fixed_strings: bool,
    /// Match whole words only.
    #[arg(short = 'w', long)]
    pub word_regexp: bool,
    /// Show the lines that do not match.
    #[arg(short = 'v', long)]
    pub invert_match: bool,
    /// Print only the matched parts of lines, one per line.
    #[arg(short = 'o', long)]
    pub only_matching: bool,
    /// Let a match span lines (`.` matches newlines too).
    #[arg(short = 'U', long)]
    pub multiline: bool,
    /// Show N lines after each match.
    #[arg(short = 'A', long, value_name = "N")]
    pub after_context: Option<usize>,
    /// Show N lines before each match.
    #[arg(short = 'B', long, value_name = "N")]
    pub before_context: Option<usize>,
    /// Show N lines before and after each match.
    #[arg(short = 'C', long, value_name = "N")]
    pub context: Option<usize>,
    /// Only files matching GLOB (repeatable; !GLOB excludes).
    #[arg(
        short = 'g',
        long = "glob",
        value_name = "GLOB",
        allow_hyphen_values = true
    )]
    pub globs: Vec<String>,
    /// Only files of TYPE (repeatable; rg's names: rust, py, js, md…).
    #[arg(short = 't', long = "type", value_name = "TYPE")]
    pub types: Vec<String>,
    /// No files of TYPE (repeatable).
    #[arg(short = 'T', long = "type-not", value_name = "TYPE")]
    pub types_not: Vec<String>,
    /// Print only the paths of matching files.
    #[arg(short = 'l', long)]
    pub files_with_matches: bool,
    /// Print matching lines per file.
    #[arg(short = 'c', long, conflicts_with = "files_with_matches")]
    pub count: bool,
    /// At most NUM matching lines per file.
    #[arg(short = 'm', long, value_name = "NUM")]
    pub max_count: Option<u64>,
    /// Most results in all (lines, or files with -l/-c); 0 for all.
    #[arg(long, default_value_t = 0)]
    pub max: usize,
    /// Search hidden files too.
    #[arg(long, short = '.')]
    pub hidden: bool,
    /// Search files that .gitignore/.ignore exclude too.
    #[arg(long)]
    pub no_ignore: bool,
    /// -u: no ignore files; -uu: hidden files too; -uuu: as -uu (binary files are never
    /// searched).
    #[arg(short = 'u', long, action = clap::ArgAction::Count)]
    pub unrestricted: u8,
    /// When to colour: auto (on a terminal, unless NO_COLOR is set), always, never.
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = ColorWhen::Auto)]
    pub color: ColorWhen,
    /// Each file's path as a heading, its lines under it (the default on a terminal).
    #[arg(long, overrides_with = "no_heading")]
    pub heading: bool,
    /// One path:line:text per line (the default when piped).
    #[arg(long, overrides_with = "heading")]
    pub no_heading: bool,
    /// Line numbers with each line (the default; accepted as rg spells it).
    #[arg(short = 'n', long, overrides_with = "no_line_number")]
    pub line_number: bool,
    /// No line numbers (rg's -N).
    #[arg(short = 'N', long, overrides_with = "line_number")]
    pub no_line_number: bool,
    /// Print the path with each line even for a single file searched (rg's -H).
    #[arg(short = 'H', long, overrides_with = "no_filename")]
    pub with_filename: bool,
    /// Never print paths with lines or counts (rg's -I).
    #[arg(short = 'I', long, overrides_with = "with_filename")]
    pub no_filename: bool,
    /// Print the structured result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `--color`, as ripgrep and fd spell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorWhen {
    Auto,
    Always,
    Never,
}

impl Command {
    /// The write flags given after the subcommand, if it takes them.
    pub fn write_flags(&self) -> Option<WriteFlags> {
        match self {
            Command::Call(a) => Some(a.write),
            Command::Edit(a) => Some(a.write),
            Command::Write(a) => Some(a.write),
            Command::Mv(a) => Some(a.write),
            Command::Patch(a) => Some(a.write),
            Command::Rm(a) => Some(a.write),
            Command::Undo(a) => Some(a.write),
            Command::History { write, .. } => Some(*write),
            Command::Shell(a) => Some(a.write),
            Command::Serve(a) => Some(a.write),
            _ => None,
        }
    }

    /// Whether the subcommand was given `--yes` (it answers its own questions).
    pub fn says_yes(&self) -> bool {
        match self {
            Command::Edit(a) => a.yes,
            Command::Write(a) => a.yes,
            Command::Mv(a) => a.yes,
            Command::Patch(a) => a.yes,
            Command::Rm(a) => a.yes,
            Command::Undo(a) => a.yes,
            Command::Shell(a) => a.yes,
            _ => false,
        }
    }
}

impl From<ColorWhen> for anstream::ColorChoice {
    fn from(c: ColorWhen) -> Self {
        match c {
            ColorWhen::Auto => anstream::ColorChoice::Auto,
            ColorWhen::Always => anstream::ColorChoice::Always,
            ColorWhen::Never => anstream::ColorChoice::Never,
        }
    }
}

#[derive(Debug, Args)]
pub struct GlobArgs {
    /// A word is part of the name, as in fd ("util": every name holding it, any case
    /// unless it has a capital); a glob stays a glob ("*.rs", "src/**/*.rs",
    /// "*.{ts,tsx}"). Default: every file.
    pub pattern: Option<String>,
    /// Directories to search (default: the current directory, relative to which paths
    /// are read and printed).
    pub paths: Vec<String>,
    /// Only files with this extension (repeatable): -e rs -e toml.
    #[arg(short = 'e', long = "extension", value_name = "EXT")]
    pub extensions: Vec<String>,
    /// f: files (the default), d: directories (fd's -t; symlinks are never listed).
    #[arg(short = 't', long = "type", value_name = "f|d", value_parser = ["f", "file", "d", "directory"])]
    pub kind: Option<String>,
    /// Most files; 0 for all.
    #[arg(long, default_value_t = 0)]
    pub max: usize,
    /// Newest first instead of by path.
    #[arg(long)]
    pub modified: bool,
    /// Match hidden files and look in hidden directories too.
    #[arg(long, short = 'H', visible_short_alias = '.')]
    pub hidden: bool,
    /// List files that .gitignore/.ignore exclude too.
    #[arg(long, short = 'I')]
    pub no_ignore: bool,
    /// -H and -I together.
    #[arg(short = 'u', long)]
    pub unrestricted: bool,
    /// Print the structured result as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct EditArgs {
    #[command(flatten)]
    pub write: WriteFlags,
    /// The file to edit.
    pub path: String,
    /// The exact text to replace.
    #[arg(long = "old", allow_hyphen_values = true)]
    pub old: String,
    /// The replacement.
    #[arg(long = "new", allow_hyphen_values = true)]
    pub new: String,
    /// Replace every occurrence.
    #[arg(long)]
    pub all: bool,
    /// Refuse the edit if the file is no longer at this version (from `ferret read --json`).
    #[arg(long, value_name = "VERSION")]
    pub expected_version: Option<String>,
    /// Confirm a change to a confirm-listed path.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Print the structured result as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct WriteArgs {
    #[command(flatten)]
    pub write: WriteFlags,
    /// The file to write; missing directories are created.
    pub path: String,
    /// The content (default: read from standard input).
    #[arg(long, allow_hyphen_values = true)]
    pub content: Option<String>,
    /// Replace the file if it exists (backed up first).
    #[arg(long)]
    pub overwrite: bool,
    /// Refuse if the file is no longer at this version (from `ferret read --json`).
    #[arg(long, value_name = "VERSION")]
    pub expected_version: Option<String>,
    /// Confirm a change to a confirm-listed path.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Print the structured result as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct MvArgs {
    #[command(flatten)]
    pub write: WriteFlags,
    /// The file or directory to move.
    pub source: String,
    /// Its new path; missing directories are created.
    pub destination: String,
    /// Replace a file at the destination (backed up first).
    #[arg(long)]
    pub overwrite: bool,
    /// Confirm a change to a confirm-listed path.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Print the structured result as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct PatchArgs {
    #[command(flatten)]
    pub write: WriteFlags,
    /// Confirm changes to confirm-listed paths.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Print the structured result as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RmArgs {
    #[command(flatten)]
    pub write: WriteFlags,
    /// The file or directory to delete.
    pub path: String,
    /// Delete for good instead (asks for confirmation: pass --yes).
    #[arg(long)]
    pub permanent: bool,
    /// Confirm a permanent delete, a confirm-listed path, or a directory holding secrets.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Print the structured result as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct UndoArgs {
    #[command(flatten)]
    pub write: WriteFlags,
    /// The change to undo (default: your last one that can be, made from the CLI or shell).
    pub id: Option<u64>,
    /// Undo even if the file changed since (its content is backed up first).
    #[arg(long)]
    pub force: bool,
    /// Confirm undoing an agent's change, or one that changes a confirm-listed path.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Print the structured result as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ShellArgs {
    #[command(flatten)]
    pub write: WriteFlags,
    /// Answer yes to every question (without a terminal, every question answers no).
    #[arg(long, short = 'y')]
    pub yes: bool,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub write: WriteFlags,
    /// Serve streamable HTTP at ADDR (like 127.0.0.1:8765) instead of stdio.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<std::net::SocketAddr>,
    /// Bearer token every HTTP request must carry (needed off loopback). Env: FERRET_TOKEN.
    #[arg(long, env = "FERRET_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Tools to serve, comma-separated (config key `tools`).
    #[arg(long, value_delimiter = ',')]
    pub tools: Option<Vec<String>>,
    /// Another Host header value to accept over HTTP (repeatable).
    #[arg(long = "allow-host", value_name = "HOST")]
    pub allow_hosts: Vec<String>,
    /// Another Origin to accept over HTTP (repeatable), like https://app.example.com:443.
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub allow_origins: Vec<String>,
    /// Largest HTTP request body in bytes.
    #[arg(long, default_value_t = 4 * 1024 * 1024)]
    pub max_body: usize,
    /// Most HTTP connections served at once (idle ones make room for more; when all are
    /// answering requests, 4 more are let in to answer GET /health only).
    #[arg(long, default_value_t = 256)]
    pub max_connections: usize,
    /// Most live HTTP sessions (at the cap a new one closes the least recently used idle
    /// session of the client holding the most; 503 if none is idle; idle ones close after 5 min).
    #[arg(long, default_value_t = 256)]
    pub max_sessions: usize,
    /// Seconds an HTTP request's headers, and then its body, may take to arrive; idle
    /// connections close after it too.
    #[arg(long, default_value_t = crate::mcp::http::READ_TIMEOUT.as_secs(), value_name = "SECS")]
    pub read_timeout: u64,
    /// Most live HTTP sessions one client (its host; every loopback address is one) may
    /// hold; its next initialize closes its least recently used idle one. 0: an eighth of
    /// --max-sessions, at least 4.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub max_sessions_per_client: usize,
    /// Seconds a confirmation question (elicitation) waits for the client's answer before
    /// the call is answered CONFIRMATION_REQUIRED (the request timeout does not cut it
    /// short; the call made after a yes has its own).
    #[arg(long, default_value_t = crate::mcp::QUESTION_TIMEOUT.as_secs(), value_name = "SECS")]
    pub question_timeout: u64,
    /// Confirmation questions one client may leave waiting at once; a call past that is
    /// answered CONFIRMATION_REQUIRED without asking.
    #[arg(long, default_value_t = crate::mcp::QUESTIONS_PER_CLIENT, value_name = "N")]
    pub max_questions_per_client: usize,
    /// Do not build the live index: every search scans the tree.
    #[arg(long)]
    pub no_index: bool,
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    /// `ferret grep -h` once showed nothing for `-i -F -U -A -B -C --json PATTERN PATH`:
    /// every flag and argument of every subcommand has a line of help.
    #[test]
    fn every_argument_of_every_subcommand_has_help() {
        let cli = Cli::command();
        let mut missing = Vec::new();
        for sub in cli.get_subcommands() {
            for arg in sub.get_arguments() {
                let id = arg.get_id().as_str();
                if id == "help" || id == "version" {
                    continue;
                }
                if arg
                    .get_help()
                    .is_none_or(|h| h.to_string().trim().is_empty())
                {
                    missing.push(format!("{} {id}", sub.get_name()));
                }
            }
        }
        assert!(missing.is_empty(), "no help for: {}", missing.join(", "));
    }

    #[test]
    fn allow_write_help_names_every_write_command() {
        let cli = Cli::command();
        let help = cli
            .get_arguments()
            .find(|a| a.get_id() == "allow_write")
            .and_then(|a| a.get_help())
            .map(|h| h.to_string())
            .unwrap_or_default();
        for cmd in ["edit", "rm", "undo"] {
            assert!(help.contains(cmd), "{help}");
        }
    }
}

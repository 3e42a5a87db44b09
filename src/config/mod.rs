//! Configuration: defaults ← a user's config file ← `FERRET_*` environment ← command-line
//! flags, remembering where every value came from (`ferret config` prints it); then a
//! workspace's own `ferret.toml`, which may only narrow (`narrow.rs`).
//!
//! The layering (`layers.rs`) works on the serialized form of [`Config`]: the defaults are
//! serialized to a JSON object, each layer overwrites keys, and the result is
//! deserialized back. A string from the environment or `--set key=value` is typed by the
//! default it replaces (a list default splits on commas, a number parses as a number), so
//! adding a field to `Config` is all it takes to make it settable everywhere.

pub mod classes;
pub mod globs;
pub mod hides;
mod layers;
mod narrow;
pub use narrow::{NOT_SERVED_BY_DEFAULT, TOOL_NAMES};

use layers::duration_serde;
pub use layers::{Loaded, Overrides, Source, load};

use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// Secrets: never readable, never listed, never searched, never edited.
///
/// Gitignore syntax (`!` re-allows, a trailing `/` means a directory and all below it).
/// Unlike seed 004's list this names secret *files*, not every path containing a word:
/// seed 004's `*token*`, `*password*` and `secrets*` would deny `src/tokenizer.rs`,
/// `auth/password_reset.py` and `docs/secrets-management.md`.
pub const DEFAULT_DENY: &[&str] = &[
    // environment files, but not their committed templates
    ".env",
    ".env.*",
    "!.env.example",
    "!.env.sample",
    "!.env.template",
    ".envrc",
    // keys and certificates
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.jks",
    "*.keystore",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    // credential stores of common tools
    ".npmrc",
    ".pypirc",
    ".netrc",
    "_netrc",
    ".pgpass",
    ".htpasswd",
    ".git-credentials",
    "credentials",
    "credentials.json",
    "credentials.yml",
    "credentials.yaml",
    "secrets.json",
    "secrets.yml",
    "secrets.yaml",
    "secrets.toml",
    "*.secret",
    "*.secrets",
    ".aws/",
    ".ssh/",
    ".gnupg/",
    "**/.docker/config.json",
    "**/.kube/config",
    "*.tfstate",
    "*.tfstate.backup",
    // version-control internals
    ".git/",
    ".hg/",
    ".svn/",
];

/// Denied whatever the settings say (they come last, so no `!` re-allows them): trash
/// directories. On a root that is a mount point the freedesktop per-volume trash
/// (`.Trash-UID/`) lies inside the workspace, and what is in a trash is what a person
/// threw away; an agent has no business there.
///
/// And ferret's own temporary files (`.ferret-*.tmp`, see `workspace::write`): a change
/// stages its new content there, and recovery renames or removes what it finds at those
/// names; an agent that could see or write them could feed content into a recovery.
pub const ALWAYS_DENY: &[&str] = &[".Trash/", ".Trash-*/", ".ferret-*.tmp"];

/// Noise: left out of listings and searches, still readable when named.
///
/// Build-output directories are skipped only at the top of a root: a `target/` or
/// `build/` deeper down is as likely to be source (the Linux kernel's `drivers/target`,
/// `tools/build`) as output, and output deeper down is usually gitignored anyway.
pub const DEFAULT_SKIP: &[&str] = &[
    "node_modules/",
    "vendor/",
    ".venv/",
    "venv/",
    "__pycache__/",
    "/dist/",
    "/build/",
    "/target/",
    ".next/",
    ".idea/",
    ".vscode/",
    ".DS_Store",
    "Thumbs.db",
    "*.exe",
    "*.dll",
    "*.so",
    "*.dylib",
];

/// Changes to these need the user's confirmation: what steers CI, version control, and
/// ferret itself (an agent must not loosen its own sandbox).
pub const DEFAULT_CONFIRM: &[&str] = &[
    ".github/",
    ".gitlab-ci.yml",
    ".circleci/",
    "Jenkinsfile",
    ".travis.yml",
    "azure-pipelines.yml",
    ".gitignore",
    ".gitattributes",
    ".gitmodules",
    "ferret.toml",
];

/// Direct bash commands `ferret shell` refuses outright, before anything runs (the
/// `bash_blocklist` default). Each entry is shell words: a glob on the program's name (after
/// `sudo`, `env`, `nice`… prefixes) and globs that some argument must each match. Rules
/// that words cannot say (`rm -r` of `/` or `~`, writes to disk devices, fork bombs, a
/// download piped into a shell) are built in and always on.
pub const DEFAULT_BASH_BLOCKLIST: &[&str] = &[
    "mkfs*",
    "wipefs",
    "fdisk",
    "sfdisk",
    "parted",
    "shutdown",
    "reboot",
    "halt",
    "poweroff",
    "init 0",
    "init 6",
    "telinit 0",
    "telinit 6",
    "systemctl poweroff",
    "systemctl reboot",
    "systemctl halt",
    "systemctl kexec",
];

/// How ferret is being run; each has its own limit defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// One command, one person: no per-round budgets, no timeout.
    Cli,
    /// A long-lived server whose callers are agents (MCP over HTTP): every limit on.
    Server,
    /// The MCP server on stdio: one local client, the user's own agent. Every limit of
    /// [`Mode::Server`] except the request count, which is
    /// [`STDIO_MAX_REQUESTS_PER_ROUND`].
    Stdio,
}

/// The request budget of a server's round (`max_requests_per_round`) over HTTP, where
/// several clients may share one server: each principal's fair share.
pub const SERVER_MAX_REQUESTS_PER_ROUND: u64 = 50;

/// The request budget of a round (one minute by default) over stdio: 3 000 calls, 50 a
/// second for a whole minute. Over stdio the one client is the user's own agent, and an
/// agent calls a tool once per model turn (a turn takes a second or more; parallel calls
/// and subagents make bursts of tens): an ordinary session makes tens to a few hundred
/// calls a minute, and fifty, the HTTP default, stopped one exploring a project within a
/// minute. The budget is not off, because a client stuck in a loop (a retry without a
/// pause) calls thousands of times a second: it meets this within a second or two and
/// is answered RATE_LIMIT_EXCEEDED, which costs nothing, instead of a search each time.
/// What a model reads stays bounded by the byte budget (`max_bytes_per_round`), which is
/// the same over stdio and HTTP. An explicit setting (file, environment, flag) applies
/// over stdio as anywhere.
pub const STDIO_MAX_REQUESTS_PER_ROUND: u64 = 3_000;

/// The effective configuration. Every field can be set in `ferret.toml`, as
/// `FERRET_<FIELD>` and as `--set field=value`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Workspace roots; the first one is where relative paths start.
    pub roots: Vec<PathBuf>,
    /// Deny patterns (gitignore syntax). Replacing this drops ferret's defaults.
    pub deny: Vec<String>,
    /// Patterns added to `deny` (seed 001's protected folders go here: `.obsidian/`).
    pub deny_extra: Vec<String>,
    /// Skip patterns (gitignore syntax).
    pub skip: Vec<String>,
    /// Patterns added to `skip`.
    pub skip_extra: Vec<String>,
    /// The deny, skip and confirm patterns a workspace's own ferret.toml added (not a
    /// setting): the sandbox drops these, never stops, if a list still does not build.
    #[serde(skip)]
    pub workspace_patterns: Vec<String>,
    /// When non-empty, only files with these extensions may be read.
    pub allowed_extensions: Vec<String>,
    /// Deepest path, in components below the root, that may be named.
    pub max_path_depth: usize,
    /// Largest file a whole-file read returns, in bytes (0: no limit).
    pub max_file_size: u64,
    /// Files larger than this are skipped by searches, in bytes (0: no limit).
    pub search_max_file_size: u64,
    /// Most entries one listing returns (0: no limit).
    pub max_files_per_request: usize,
    /// Most characters of one tool result (about 4 per token; 0: no limit). Over it, a
    /// tool returns less and says what it left out and how to get the rest. The
    /// default keeps a result under common clients' caps (Claude Code's is 25k tokens).
    pub max_output_chars: u64,
    /// Search result lines longer than this many bytes are cut around the match, with a
    /// marker giving the whole length (0: never; like ripgrep's max-columns).
    pub max_columns: usize,
    /// Bytes of answers a session may receive in one round (0: no limit). An answer is
    /// charged once, for what a model reads of it: the larger of its text and its
    /// structured JSON (a client hands the model one of the two; they say the same).
    pub max_bytes_per_round: u64,
    /// Tool calls a session may make in one round (0: no limit). Default: 50 per
    /// principal over HTTP, 3 000 over stdio (see [`STDIO_MAX_REQUESTS_PER_ROUND`]), none
    /// on the command line.
    pub max_requests_per_round: u64,
    /// How long one tool call may run ("0s": no limit).
    #[serde(with = "duration_serde")]
    pub request_timeout: Duration,
    /// How long a round lasts before budgets reset.
    #[serde(with = "duration_serde")]
    pub round_window: Duration,
    /// JSON Lines audit log; none when unset.
    pub audit_log: Option<PathBuf>,
    /// Write tools (edit, undo, …) work only when this is true.
    pub allow_write: bool,
    /// Every change is previewed, nothing is written.
    pub dry_run: bool,
    /// Where backups and the undo journal live (default:
    /// `$XDG_STATE_HOME/ferret/<workspace id>`); must be outside every root.
    pub state_dir: Option<PathBuf>,
    /// Permanent deletes are allowed without asking (a server has no one to ask).
    pub allow_permanent_delete: bool,
    /// Paths whose edit or deletion needs the user's confirmation (gitignore syntax):
    /// CI configuration, VCS files, ferret's own configuration.
    pub confirm: Vec<String>,
    /// Use the operating system's trash; when false or unusable, ferret's own trash folder
    /// in the state directory.
    pub use_os_trash: bool,
    /// Back up a file's content before every edit (seed 003's `backup_enabled`). Off, an
    /// edit still works but cannot be undone.
    pub backup_enabled: bool,
    /// Largest file `edit` changes, in bytes (0: no limit).
    pub max_edit_file_size: u64,
    /// Most bytes the state directory's backups hold together (0: no limit; default
    /// 2 GiB). Past it the oldest backups are dropped (their changes can no longer be
    /// undone), and a change whose backup alone is bigger is refused. The user's alone to
    /// set: a workspace lowering it would drop the undo of the person's own changes.
    pub max_backup_bytes: u64,
    /// Largest image `read_file` sends as an image, in bytes as stored (0: no limit;
    /// default 5 MiB, the most Claude's API accepts). Over HTTP the result cap (1 MB
    /// sent, base64) lowers it further.
    pub max_image_bytes: u64,
    /// `ferret shell`: ask y/N before every direct bash command (`!cmd`). Destructive
    /// ones (rm, mv, dd, `git reset --hard`, `>` over a file…) are asked about even when
    /// this is off (seed 003's `direct_bash_confirm`).
    pub direct_bash_confirm: bool,
    /// `ferret shell`: direct bash commands refused outright (see DEFAULT_BASH_BLOCKLIST).
    pub bash_blocklist: Vec<String>,
    /// The index (`ferret serve`, `ferret index`) lists at most this many files (0: no
    /// bound); a larger workspace is searched by scanning. The list costs about 200 bytes
    /// of memory per file.
    pub index_max_files: u64,
    /// The index reads at most this many bytes of content (0: no bound). Building takes
    /// about a quarter of them in memory at its peak, the file on disk about an eighth;
    /// once written, the posting lists are mapped, not held.
    pub index_max_bytes: u64,
    /// Tools the MCP server lists (every tool stays reachable through `ferret call` and
    /// the library). Empty: the tools marked as served by default (all but
    /// search_files and file_search, which overlap grep).
    pub tools: Vec<String>,
}

impl Config {
    pub fn defaults(mode: Mode) -> Config {
        let server = mode != Mode::Cli;
        Config {
            roots: Vec::new(),
            deny: DEFAULT_DENY.iter().map(|s| s.to_string()).collect(),
            deny_extra: Vec::new(),
            workspace_patterns: Vec::new(),
            skip: DEFAULT_SKIP
                .iter()
                .chain(crate::platform::SKIPPED_NAMES)
                .map(|s| s.to_string())
                .collect(),
            skip_extra: Vec::new(),
            allowed_extensions: Vec::new(),
            max_path_depth: 20,
            max_file_size: 1024 * 1024,
            search_max_file_size: 100 * 1024 * 1024,
            max_files_per_request: 100,
            max_output_chars: if server { 80_000 } else { 0 },
            max_columns: 400,
            max_bytes_per_round: if server { 5 * 1024 * 1024 } else { 0 },
            max_requests_per_round: match mode {
                Mode::Cli => 0,
                Mode::Server => SERVER_MAX_REQUESTS_PER_ROUND,
                Mode::Stdio => STDIO_MAX_REQUESTS_PER_ROUND,
            },
            request_timeout: if server {
                Duration::from_secs(5)
            } else {
                Duration::ZERO
            },
            round_window: Duration::from_secs(60),
            audit_log: None,
            allow_write: false,
            dry_run: false,
            state_dir: None,
            max_edit_file_size: 64 * 1024 * 1024,
            max_backup_bytes: 2 * 1024 * 1024 * 1024,
            max_image_bytes: default_max_image_bytes(),
            backup_enabled: true,
            direct_bash_confirm: true,
            bash_blocklist: DEFAULT_BASH_BLOCKLIST
                .iter()
                .map(|s| s.to_string())
                .collect(),
            allow_permanent_delete: false,
            confirm: DEFAULT_CONFIRM.iter().map(|s| s.to_string()).collect(),
            use_os_trash: true,
            index_max_files: 2_000_000,
            index_max_bytes: 16 * 1024 * 1024 * 1024,
            tools: Vec::new(),
        }
    }

    /// All deny patterns in force (defaults or replacement, then extras, then the ones
    /// no setting removes).
    pub fn deny_patterns(&self) -> impl Iterator<Item = &str> {
        self.deny
            .iter()
            .chain(&self.deny_extra)
            .map(String::as_str)
            .chain(ALWAYS_DENY.iter().copied())
    }

    pub fn skip_patterns(&self) -> impl Iterator<Item = &str> {
        self.skip.iter().chain(&self.skip_extra).map(String::as_str)
    }
}

/// 5 MiB: the largest image Claude's API accepts.
fn default_max_image_bytes() -> u64 {
    5 * 1024 * 1024
}

//! Tool errors: one enum of stable codes, a message saying what happened and a hint
//! saying what to do instead.
//!
//! The codes are part of ferret's interface: agents branch on them, so a code is never
//! renamed. They serialize SCREAMING_SNAKE_CASE and are grouped the way seed 004 groups
//! them (security, resources, input, changes).

use serde::Serialize;
use std::fmt;

/// A stable error code. See the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    // security
    PathEscape,
    PathTraversal,
    DeniedPattern,
    ExtensionDenied,
    PathTooDeep,
    // resources
    FileTooLarge,
    /// A result larger than the transport can carry (HTTP: 1 MB per result).
    ResultTooLarge,
    RoundLimitExceeded,
    RateLimitExceeded,
    Timeout,
    Cancelled,
    // input
    InvalidArgument,
    InvalidRegex,
    InvalidGlob,
    NotFound,
    NotADirectory,
    IsADirectory,
    BinaryFile,
    UnknownTool,
    // changes
    WriteDisabled,
    NoMatch,
    NotUnique,
    Conflict,
    /// A create or move onto a path that is taken (without overwrite).
    AlreadyExists,
    ConfirmationRequired,
    /// New text has a character the file's encoding cannot hold (or a U+FFFD the file
    /// did not have): nothing was changed.
    Unrepresentable,
    // everything the filesystem throws at us that is none of the above
    IoError,
}

impl ErrorCode {
    /// The code as it appears on the wire (`PATH_ESCAPE`).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::PathEscape => "PATH_ESCAPE",
            ErrorCode::PathTraversal => "PATH_TRAVERSAL",
            ErrorCode::DeniedPattern => "DENIED_PATTERN",
            ErrorCode::ExtensionDenied => "EXTENSION_DENIED",
            ErrorCode::PathTooDeep => "PATH_TOO_DEEP",
            ErrorCode::FileTooLarge => "FILE_TOO_LARGE",
            ErrorCode::ResultTooLarge => "RESULT_TOO_LARGE",
            ErrorCode::RoundLimitExceeded => "ROUND_LIMIT_EXCEEDED",
            ErrorCode::RateLimitExceeded => "RATE_LIMIT_EXCEEDED",
            ErrorCode::Timeout => "TIMEOUT",
            ErrorCode::Cancelled => "CANCELLED",
            ErrorCode::InvalidArgument => "INVALID_ARGUMENT",
            ErrorCode::InvalidRegex => "INVALID_REGEX",
            ErrorCode::InvalidGlob => "INVALID_GLOB",
            ErrorCode::NotFound => "NOT_FOUND",
            ErrorCode::NotADirectory => "NOT_A_DIRECTORY",
            ErrorCode::IsADirectory => "IS_A_DIRECTORY",
            ErrorCode::BinaryFile => "BINARY_FILE",
            ErrorCode::UnknownTool => "UNKNOWN_TOOL",
            ErrorCode::WriteDisabled => "WRITE_DISABLED",
            ErrorCode::NoMatch => "NO_MATCH",
            ErrorCode::NotUnique => "NOT_UNIQUE",
            ErrorCode::Conflict => "CONFLICT",
            ErrorCode::AlreadyExists => "ALREADY_EXISTS",
            ErrorCode::ConfirmationRequired => "CONFIRMATION_REQUIRED",
            ErrorCode::Unrepresentable => "UNREPRESENTABLE",
            ErrorCode::IoError => "IO_ERROR",
        }
    }

    /// What to do about an error of this code, for an error that has no hint of its own:
    /// every error an agent gets says what to do instead (tests/it/everyday_b.rs checks
    /// that each names only tools, parameters, settings and flags that exist).
    pub fn default_hint(self) -> &'static str {
        match self {
            ErrorCode::PathEscape => {
                "use a path inside the workspace root (relative to it); the user sets the roots with --root"
            }
            ErrorCode::PathTraversal => {
                "give the path relative to the workspace root, without .. leading out of it"
            }
            ErrorCode::DeniedPattern => {
                "ferret never reads or changes secrets or version-control internals (the `deny` setting); work with other files"
            }
            ErrorCode::ExtensionDenied => {
                "only the extensions in the `allowed_extensions` setting are served; work with other files"
            }
            ErrorCode::PathTooDeep => {
                "the path is deeper than the `max_path_depth` setting allows; use a shorter path"
            }
            ErrorCode::FileTooLarge => {
                "read a range with offset and limit, or find the lines with grep first"
            }
            ErrorCode::ResultTooLarge => {
                "ask for less: a narrower path or glob, offset and limit, or max_results"
            }
            ErrorCode::RoundLimitExceeded | ErrorCode::RateLimitExceeded => {
                "wait for the round to end (the `round_window` setting), or ask for less at a time"
            }
            ErrorCode::Timeout => {
                "narrow it (a path or glob) and retry; the limit is the `request_timeout` setting"
            }
            ErrorCode::Cancelled => {
                "the call was cancelled before it finished; send it again if it is still wanted"
            }
            ErrorCode::InvalidArgument => {
                "see the tool's input schema (tools/list, or `ferret tools`)"
            }
            ErrorCode::InvalidRegex => {
                "fix the pattern, or pass fixed_strings: true to search for the text as written"
            }
            ErrorCode::InvalidGlob => {
                "check the glob's brackets and braces, as in \"*.rs\" or \"src/**/*.{ts,tsx}\""
            }
            ErrorCode::NotFound => {
                "check the path with glob or list_directory; paths are relative to the workspace root"
            }
            ErrorCode::NotADirectory => {
                "a part of the path is a file; list its parent with list_directory"
            }
            ErrorCode::IsADirectory => "use list_directory for directories",
            ErrorCode::BinaryFile => "read its bytes with read_file and encoding base64",
            ErrorCode::UnknownTool => "list the tools served with tools/list (`ferret tools`)",
            ErrorCode::WriteDisabled => {
                "the user enables changes by starting ferret with --allow-write"
            }
            ErrorCode::NoMatch => {
                "read the file again (read_file) and copy old_string from it exactly"
            }
            ErrorCode::NotUnique => {
                "add neighbouring lines to old_string so it occurs once, or pass replace_all: true"
            }
            ErrorCode::Conflict => {
                "read the file again (read_file) and make the change on its current content"
            }
            ErrorCode::AlreadyExists => {
                "choose another path, or pass overwrite: true to replace a file"
            }
            ErrorCode::ConfirmationRequired => "ask the user to confirm, then retry",
            ErrorCode::Unrepresentable => {
                "use characters the file's encoding has, or write_file with encoding utf-8"
            }
            ErrorCode::IoError => "the operating system refused; check the path with get_file_info",
        }
    }

    /// Whether the audit log records this as `denied` (a policy said no) rather than
    /// `error` (the request or the filesystem failed).
    pub fn is_denial(self) -> bool {
        matches!(
            self,
            ErrorCode::PathEscape
                | ErrorCode::PathTraversal
                | ErrorCode::DeniedPattern
                | ErrorCode::ExtensionDenied
                | ErrorCode::PathTooDeep
                | ErrorCode::FileTooLarge
                | ErrorCode::ResultTooLarge
                | ErrorCode::RoundLimitExceeded
                | ErrorCode::RateLimitExceeded
                | ErrorCode::WriteDisabled
                | ErrorCode::ConfirmationRequired
        )
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What every tool returns on failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ToolError {
    pub code: ErrorCode,
    /// What happened, naming the path or value at fault.
    pub message: String,
    /// What to do instead, when there is something better to say than the message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// With `CONFIRMATION_REQUIRED`: what the question was about, as the call saw it
    /// when it asked (`Ctx::pin`); the call made again once the person
    /// says yes must see the same. Never sent.
    #[serde(skip)]
    pub pins: Vec<u64>,
}

impl ToolError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ToolError {
            code,
            message: message.into(),
            hint: None,
            pins: Vec::new(),
        }
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Cuts the message and hint so the error, as sent (its text and its structured
    /// copy carry both), stays within `budget` characters (`max_output_chars`). The code
    /// stays whole; each part keeps at least 30 characters, so it still says something.
    pub fn fit(mut self, budget: Option<usize>) -> Self {
        /// What the code, labels and JSON around the two parts take, twice over.
        const FRAME: usize = 100;
        let Some(budget) = budget else { return self };
        let len = |s: &str| s.chars().count();
        let hint_len = self.hint.as_deref().map_or(0, len);
        if FRAME + 2 * (len(&self.message) + hint_len) <= budget {
            return self;
        }
        let each = (budget.saturating_sub(FRAME) / 4).max(30);
        let cut = |s: &str| -> String {
            if len(s) <= each {
                return s.to_string();
            }
            let mut out: String = s.chars().take(each.saturating_sub(1)).collect();
            out.push('…');
            out
        };
        // The hint is the part an agent acts on: it gets what the message leaves.
        let msg = cut(&self.message);
        let room = (budget.saturating_sub(FRAME) / 2)
            .saturating_sub(len(&msg))
            .max(each);
        self.hint = self.hint.map(|h| {
            if len(&h) <= room {
                h
            } else {
                let mut out: String = h.chars().take(room.saturating_sub(1)).collect();
                out.push('…');
                out
            }
        });
        self.message = msg;
        self
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidArgument, message)
    }

    /// Maps an I/O error met while working on `path` (as the agent named it).
    pub fn io(path: &str, err: &std::io::Error) -> Self {
        use std::io::ErrorKind as K;
        match err.kind() {
            K::NotFound => Self::new(ErrorCode::NotFound, format!("{path}: no such file or directory"))
                .with_hint("check the path with glob or list_directory; paths are relative to the workspace root"),
            K::NotADirectory => Self::new(ErrorCode::NotADirectory, format!("{path}: a component of the path is not a directory")),
            K::IsADirectory => Self::new(ErrorCode::IsADirectory, format!("{path} is a directory"))
                .with_hint("use list_directory for directories"),
            K::PermissionDenied => Self::new(ErrorCode::IoError, format!("{path}: permission denied by the operating system")),
            K::StorageFull | K::FileTooLarge | K::QuotaExceeded => Self::new(ErrorCode::IoError, format!("{path}: {err}"))
                .with_hint("the filesystem is full (or a size or quota limit was reached); a change stops before it lands, so files are as they were: free space and retry"),
            K::ReadOnlyFilesystem => Self::new(ErrorCode::IoError, format!("{path}: {err}"))
                .with_hint("the filesystem is mounted read-only; nothing was changed"),
            // ENAMETOOLONG: no such name can exist here.
            K::InvalidFilename => Self::new(
                ErrorCode::InvalidArgument,
                format!("{path}: a name in it is too long for the filesystem (over 255 bytes)"),
            )
            .with_hint("shorten the name; no file can have it here"),
            _ => Self::new(ErrorCode::IoError, format!("{path}: {err}")),
        }
    }

    /// The error with every character that could be read as something other than a
    /// visible character of its line escaped in the message and hint (see [`echo`]):
    /// control characters (a newline would let a hostile name forge a line of its own),
    /// format characters (direction overrides, zero-width) and line separators. The
    /// codes whose message carries a diff of file content (`NO_MATCH`, `CONFLICT`) keep
    /// their line breaks and tabs; every name in them is already shown as results show names.
    /// Text already escaped goes through unchanged, so this is safe to apply twice.
    pub fn escaped(mut self) -> Self {
        let lines = matches!(self.code, ErrorCode::NoMatch | ErrorCode::Conflict);
        self.message = escape(&self.message, lines).into_owned();
        self.hint = self.hint.map(|h| escape(&h, lines).into_owned());
        self
    }

    /// The text a model reads: `CODE: message` and the hint on its own line.
    pub fn render(&self) -> String {
        match &self.hint {
            Some(h) => format!("{}: {}\nHint: {}", self.code, self.message, h),
            None => format!("{}: {}", self.code, self.message),
        }
    }
}

pub type ToolResult<T> = Result<T, ToolError>;

/// Locks a mutex, taking the data of a poisoned one: every mutex in ferret guards data
/// that stays consistent if a holder panicked (counters, a cache, a path), so a panic in
/// one call must not take every later call down with it.
pub fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Why ferret could not be set up (a root, a pattern list, the audit log, the state
/// directory). Typed, so an embedding host can tell a missing root from a state
/// directory inside the workspace.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("root {path}: {source}")]
    Root {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("root {0} is not a directory")]
    RootNotADirectory(std::path::PathBuf),
    #[error(
        "root {inner} lies inside root {outer}, and the rule {rule:?} is anchored at a root: it \
         would name one place from each, so a file would be judged two ways by its spelling; \
         serve the roots apart, or write the rule to match at any depth (`**/...`)"
    )]
    NestedAnchored {
        inner: std::path::PathBuf,
        outer: std::path::PathBuf,
        rule: String,
    },
    #[error(
        "root {inner} lies inside root {outer} at a name its {list} rules match: under its own \
         root those rules would not apply to it; serve it on its own, or the outer root alone"
    )]
    RootAtGuardedName {
        inner: std::path::PathBuf,
        outer: std::path::PathBuf,
        list: &'static str,
    },
    #[error("{list} patterns: {message}")]
    Patterns { list: &'static str, message: String },
    #[error("cannot open the audit log {path}: {source}")]
    AuditLog {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the state directory {dir}: {source}")]
    StateDir {
        dir: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the state directory {dir} is inside the workspace root {root}: backups and the undo journal \
         must be out of an agent's reach; choose another --state-dir"
    )]
    StateInsideRoot {
        dir: std::path::PathBuf,
        root: std::path::PathBuf,
    },
}

/// Whether `c` could be read as something other than a visible character of the line it
/// is in: a control character (newline, carriage return, escape, C1 controls), a format
/// character that changes the text's direction or draws nothing (U+202E, U+2066,
/// U+200B, U+FEFF, tags…), or a line or paragraph separator (U+2028, U+2029).
pub fn is_unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{00AD}'
                | '\u{034F}'
                | '\u{061C}'
                | '\u{115F}'
                | '\u{1160}'
                | '\u{17B4}'
                | '\u{17B5}'
                | '\u{180B}'..='\u{180F}'
                | '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{206F}'
                | '\u{3164}'
                | '\u{FE00}'..='\u{FE0F}'
                | '\u{FEFF}'
                | '\u{FFA0}'
                | '\u{FFF9}'..='\u{FFFB}'
                | '\u{1D173}'..='\u{1D17A}'
                | '\u{E0000}'..='\u{E0FFF}'
        )
}

/// A string the agent gave (a path, a pattern, a glob), or any text, as it may be echoed
/// in an error, a warning or a log line: every [unsafe](is_unsafe_char) character
/// escaped the way Rust writes it (`\n`, `\r`, `\u{202e}`), so the text stays on one
/// line, reads in one direction, and cannot forge a line or a marker of its own. The
/// rest is as it is.
pub fn echo(s: &str) -> std::borrow::Cow<'_, str> {
    escape(s, false)
}

/// [`echo`], keeping line breaks (`\n`) and tabs when `lines` is set.
fn escape(s: &str, lines: bool) -> std::borrow::Cow<'_, str> {
    let unsafe_here = |c: char| is_unsafe_char(c) && !(lines && (c == '\n' || c == '\t'));
    if !s.chars().any(unsafe_here) {
        return s.into();
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if unsafe_here(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out.into()
}

#[cfg(test)]
mod echo_tests {
    use super::{ErrorCode, ToolError, echo};

    #[test]
    fn echoed_text_is_one_line_in_one_direction() {
        for s in [
            "x\n[FILE] etc.txt",
            "a\rb",
            "\u{1b}[31mred",
            "nope\u{202e}",
            "a\u{2066}b",
            "zw\u{200b}j",
            "l\u{2028}s",
            "c1\u{85}x",
        ] {
            let e = echo(s);
            assert!(!e.chars().any(super::is_unsafe_char), "{e:?}");
            assert!(!e.contains('\n'));
        }
        assert_eq!(echo("plain a\\b.txt"), "plain a\\b.txt");
        assert_eq!(echo("x\n[FILE] y"), "x\\n[FILE] y");
    }

    #[test]
    fn errors_keep_their_diff_lines_only_where_they_carry_a_diff() {
        let e = ToolError::new(ErrorCode::NotFound, "a\nb\u{202e}")
            .with_hint("h\n")
            .escaped();
        assert_eq!(e.message, "a\\nb\\u{202e}");
        assert_eq!(e.hint.as_deref(), Some("h\\n"));
        let e = ToolError::new(ErrorCode::NoMatch, "x:\n-a\n+b\u{1b}").escaped();
        assert_eq!(e.message, "x:\n-a\n+b\\u{1b}");
    }
}

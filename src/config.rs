//! Configuration: defaults ← `ferret.toml` ← `FERRET_*` environment ← command-line flags,
//! remembering where every value came from (`ferret config` prints it).
//!
//! The layering works on the serialized form of [`Config`]: the defaults are serialized
//! to a JSON object, each layer overwrites keys, and the result is deserialized back. A
//! string from the environment or `--set key=value` is typed by the default it
//! replaces (a list default splits on commas, a number parses as a number), so adding a
//! field to `Config` is all it takes to make it settable everywhere.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
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
pub const ALWAYS_DENY: &[&str] = &[".Trash/", ".Trash-*/"];

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

/// How ferret is being run; the two have different limit defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// One command, one person: no per-round budgets, no timeout.
    Cli,
    /// A long-lived server whose callers are agents: every limit on.
    Server,
}

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
    /// Bytes a session may read in one round (0: no limit).
    pub max_bytes_per_round: u64,
    /// Tool calls a session may make in one round (0: no limit).
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
    /// Largest file `edit` changes, in bytes (0: no limit).
    pub max_edit_file_size: u64,
    /// Tools the MCP server lists (every tool stays reachable through `ferret call` and
    /// the library). Empty: the tools marked as served by default (all but
    /// search_files and file_search, which overlap grep).
    pub tools: Vec<String>,
}

impl Config {
    pub fn defaults(mode: Mode) -> Config {
        let server = mode == Mode::Server;
        Config {
            roots: Vec::new(),
            deny: DEFAULT_DENY.iter().map(|s| s.to_string()).collect(),
            deny_extra: Vec::new(),
            skip: DEFAULT_SKIP.iter().map(|s| s.to_string()).collect(),
            skip_extra: Vec::new(),
            allowed_extensions: Vec::new(),
            max_path_depth: 20,
            max_file_size: 1024 * 1024,
            search_max_file_size: 100 * 1024 * 1024,
            max_files_per_request: 100,
            max_bytes_per_round: if server { 5 * 1024 * 1024 } else { 0 },
            max_requests_per_round: if server { 50 } else { 0 },
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
            allow_permanent_delete: false,
            confirm: DEFAULT_CONFIRM.iter().map(|s| s.to_string()).collect(),
            use_os_trash: true,
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

/// Where a configuration value came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "from", rename_all = "lowercase")]
pub enum Source {
    Default,
    File(PathBuf),
    Env(String),
    Flag(String),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::File(p) => write!(f, "file {}", p.display()),
            Source::Env(v) => write!(f, "env {v}"),
            Source::Flag(n) => write!(f, "flag {n}"),
        }
    }
}

/// A configuration with the source of each value.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub config: Config,
    pub sources: BTreeMap<String, Source>,
}

/// The inputs to [`load`]: what the command line said, and the environment to read.
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    /// `--config FILE`; otherwise `ferret.toml` in the first root, when present.
    pub config_file: Option<PathBuf>,
    /// Values set by flags, as (key, JSON value, flag name).
    pub flags: Vec<(String, Value, String)>,
    /// `--set key=value` pairs, typed like environment strings.
    pub sets: Vec<String>,
}

/// Builds the effective configuration. `env` is passed in (not read here) so tests can
/// give their own.
pub fn load(
    mode: Mode,
    overrides: &Overrides,
    env: &BTreeMap<String, String>,
) -> anyhow::Result<Loaded> {
    let defaults = serde_json::to_value(Config::defaults(mode))?;
    let Value::Object(mut map) = defaults else {
        anyhow::bail!("Config does not serialize to an object")
    };
    let mut sources: BTreeMap<String, Source> =
        map.keys().map(|k| (k.clone(), Source::Default)).collect();
    let defaults = map.clone();

    // Flags and env come first for roots, because the config file lives in the first root.
    let mut flag_layer: Vec<(String, Value, Source)> = Vec::new();
    for (k, v, name) in &overrides.flags {
        flag_layer.push((k.clone(), v.clone(), Source::Flag(name.clone())));
    }
    for s in &overrides.sets {
        let (k, v) = s
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--set takes key=value, got {s:?}"))?;
        let k = k.trim().to_string();
        let default = defaults.get(&k).ok_or_else(|| unknown_key(&k, &defaults))?;
        flag_layer.push((k, typed(default, v)?, Source::Flag("--set".into())));
    }

    let mut env_layer = Vec::new();
    for key in defaults.keys() {
        let var = format!("FERRET_{}", key.to_uppercase());
        if let Some(raw) = env.get(&var) {
            env_layer.push((key.clone(), typed(&defaults[key], raw)?, Source::Env(var)));
        }
    }

    let layer_roots: Option<Vec<PathBuf>> = flag_layer
        .iter()
        .chain(&env_layer)
        .find(|(k, _, _)| k == "roots")
        .and_then(|(_, v, _)| serde_json::from_value(v.clone()).ok());
    let first_root = layer_roots.as_ref().and_then(|r| r.first().cloned());
    // A file the user named is trusted unless it lies inside a root (a repository can
    // ship anything); `ferret.toml` in the workspace is the workspace's own and may only
    // narrow what the user set.
    let (user_file, workspace_file) = match overrides
        .config_file
        .clone()
        .or_else(|| env.get("FERRET_CONFIG").map(PathBuf::from))
    {
        Some(f) if inside_roots(&f, layer_roots.as_deref()) => (None, Some(f)),
        Some(f) => (Some(f), None),
        None => {
            let root = first_root.clone().unwrap_or_else(|| PathBuf::from("."));
            let candidate = root.join("ferret.toml");
            (None, candidate.is_file().then_some(candidate))
        }
    };
    if let Some(path) = &user_file {
        for (k, v) in read_file_layer(path, &defaults)? {
            map.insert(k.clone(), v);
            sources.insert(k, Source::File(path.clone()));
        }
    }
    for (k, v, src) in env_layer.into_iter().chain(flag_layer) {
        map.insert(k.clone(), v);
        sources.insert(k, src);
    }

    let mut config: Config = serde_json::from_value(Value::Object(map))
        .map_err(|e| anyhow::anyhow!("invalid configuration: {e}"))?;
    if let Some(path) = &workspace_file {
        let layer = read_file_layer(path, &defaults)?;
        for k in narrow(&mut config, &layer, path)? {
            sources.insert(k, Source::File(path.clone()));
        }
    }
    Ok(Loaded { config, sources })
}

/// Whether `file` lies inside one of `roots` (the current directory when none is set).
fn inside_roots(file: &Path, roots: Option<&[PathBuf]>) -> bool {
    let Ok(file) = std::fs::canonicalize(file) else {
        return false;
    };
    let cwd = [PathBuf::from(".")];
    roots
        .unwrap_or(&cwd)
        .iter()
        .filter_map(|r| std::fs::canonicalize(r).ok())
        .any(|r| file.starts_with(r))
}

/// Applies a workspace's own configuration file, which may only narrow the sandbox:
/// more deny and confirm patterns (never a `!` that re-allows), lower limits, writes
/// off, dry-run on, fewer tools or extensions. Settings that would widen it — roots, the
/// state directory, the audit log, `allow_write = true`, a smaller deny list, higher
/// limits — are ignored with a warning on stderr. Returns the keys it applied.
fn narrow(c: &mut Config, layer: &Map<String, Value>, path: &Path) -> anyhow::Result<Vec<String>> {
    fn get<T: serde::de::DeserializeOwned>(k: &str, v: &Value, path: &Path) -> anyhow::Result<T> {
        serde_json::from_value(v.clone())
            .map_err(|e| anyhow::anyhow!("config file {}: {k}: {e}", path.display()))
    }
    /// The stricter of two limits where 0 means none.
    fn lower(cur: u64, new: u64) -> u64 {
        match (cur, new) {
            (0, n) => n,
            (c, 0) => c,
            (c, n) => c.min(n),
        }
    }
    let mut applied = Vec::new();
    let mut ignored = Vec::new();
    for (k, v) in layer {
        let before = serde_json::to_value(&*c)?;
        match k.as_str() {
            "deny" | "deny_extra" | "confirm" => {
                let list: Vec<String> = get(k, v, path)?;
                let (keep, reallow): (Vec<String>, Vec<String>) = list
                    .into_iter()
                    .partition(|p| !p.trim_start().starts_with('!'));
                if !reallow.is_empty() {
                    ignored.push(format!(
                        "{k}: {} (a `!` pattern re-allows)",
                        reallow.join(", ")
                    ));
                }
                let target = if k == "confirm" {
                    &mut c.confirm
                } else {
                    &mut c.deny_extra
                };
                for p in keep {
                    if !target.contains(&p) {
                        target.push(p);
                    }
                }
                if k == "deny" {
                    // `deny = [...]` replaces the defaults elsewhere; here it only adds.
                    applied.push("deny_extra".to_string());
                    continue;
                }
            }
            "skip" => c.skip = get(k, v, path)?,
            "skip_extra" => c.skip_extra = get(k, v, path)?,
            "allowed_extensions" => {
                let new: Vec<String> = get(k, v, path)?;
                if c.allowed_extensions.is_empty() {
                    c.allowed_extensions = new;
                } else {
                    let both: Vec<String> = c
                        .allowed_extensions
                        .iter()
                        .filter(|e| new.contains(e))
                        .cloned()
                        .collect();
                    if both.is_empty() {
                        ignored.push(format!("{k} (shares no extension with the user's list)"));
                    } else {
                        c.allowed_extensions = both;
                    }
                }
            }
            "tools" => {
                let new: Vec<String> = get(k, v, path)?;
                if c.tools.is_empty() {
                    // Narrowing the default list; write tools still need allow_write.
                    c.tools = new;
                } else {
                    c.tools.retain(|t| new.contains(t));
                }
            }
            "allow_write" | "allow_permanent_delete" => {
                if get::<bool>(k, v, path)? {
                    ignored.push(format!("{k} = true"));
                } else if k == "allow_write" {
                    c.allow_write = false;
                } else {
                    c.allow_permanent_delete = false;
                }
            }
            "dry_run" => {
                if get::<bool>(k, v, path)? {
                    c.dry_run = true;
                } else if !c.dry_run {
                    // false where it is already false: nothing to do
                } else {
                    ignored.push("dry_run = false".into());
                }
            }
            "use_os_trash" => c.use_os_trash = get(k, v, path)?,
            "max_path_depth" => {
                c.max_path_depth = lower(c.max_path_depth as u64, get(k, v, path)?) as usize
            }
            "max_files_per_request" => {
                c.max_files_per_request =
                    lower(c.max_files_per_request as u64, get(k, v, path)?) as usize
            }
            "max_file_size" => c.max_file_size = lower(c.max_file_size, get(k, v, path)?),
            "search_max_file_size" => {
                c.search_max_file_size = lower(c.search_max_file_size, get(k, v, path)?)
            }
            "max_bytes_per_round" => {
                c.max_bytes_per_round = lower(c.max_bytes_per_round, get(k, v, path)?)
            }
            "max_requests_per_round" => {
                c.max_requests_per_round = lower(c.max_requests_per_round, get(k, v, path)?)
            }
            "max_edit_file_size" => {
                c.max_edit_file_size = lower(c.max_edit_file_size, get(k, v, path)?)
            }
            "request_timeout" => {
                let d: Duration = duration_serde::deserialize(v.clone())?;
                let ms = lower(c.request_timeout.as_millis() as u64, d.as_millis() as u64);
                c.request_timeout = Duration::from_millis(ms);
            }
            "round_window" => {
                let d: Duration = duration_serde::deserialize(v.clone())?;
                // A longer round resets budgets less often; 0 never resets them.
                if d.is_zero() || (!c.round_window.is_zero() && d > c.round_window) {
                    c.round_window = d;
                }
            }
            _ => {
                ignored.push(k.clone());
                continue;
            }
        }
        if serde_json::to_value(&*c)? != before {
            applied.push(k.clone());
        }
    }
    if !ignored.is_empty() {
        eprintln!(
            "ferret: warning: {} is inside the workspace, so it may only narrow the sandbox; ignored: {}. \
             Set these with flags, FERRET_* variables, or a config file outside every root (--config).",
            path.display(),
            ignored.join("; ")
        );
    }
    Ok(applied)
}

fn read_file_layer(
    path: &Path,
    defaults: &Map<String, Value>,
) -> anyhow::Result<Map<String, Value>> {
    // Not through a symlink: a config file that is a link to a secret would have its
    // content quoted in a parse error.
    let text = {
        use std::io::Read;
        use std::os::unix::fs::OpenOptionsExt;
        let mut text = String::new();
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(path)
            .and_then(|f| f.take(1 << 20).read_to_string(&mut text))
            .map_err(|e| anyhow::anyhow!("cannot read config file {} (it must be a regular file, not a symbolic link): {e}", path.display()))?;
        text
    };
    let table: toml::Table = toml::from_str(&text)
        .map_err(|e| anyhow::anyhow!("config file {}: {e}", path.display()))?;
    let value = serde_json::to_value(table)?;
    let Value::Object(map) = value else {
        anyhow::bail!("config file {} is not a table", path.display())
    };
    for k in map.keys() {
        if !defaults.contains_key(k) {
            return Err(unknown_key(k, defaults).context(format!("in {}", path.display())));
        }
    }
    Ok(map)
}

fn unknown_key(k: &str, defaults: &Map<String, Value>) -> anyhow::Error {
    let keys: Vec<&str> = defaults.keys().map(String::as_str).collect();
    anyhow::anyhow!(
        "unknown configuration key {k:?}; known keys: {}",
        keys.join(", ")
    )
}

/// Types a string from the environment or `--set` by the default value it replaces.
fn typed(default: &Value, raw: &str) -> anyhow::Result<Value> {
    let raw = raw.trim();
    Ok(match default {
        Value::Array(_) => Value::Array(
            raw.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| Value::String(s.to_string()))
                .collect(),
        ),
        Value::Number(_) => Value::Number(
            raw.parse::<u64>()
                .map_err(|_| anyhow::anyhow!("expected a whole number, got {raw:?}"))?
                .into(),
        ),
        Value::Bool(_) => Value::Bool(match raw.to_ascii_lowercase().as_str() {
            "1" | "true" | "yes" | "on" => true,
            "0" | "false" | "no" | "off" => false,
            _ => anyhow::bail!("expected true or false, got {raw:?}"),
        }),
        _ => Value::String(raw.to_string()),
    })
}

/// Durations as humantime strings ("5s", "1m 30s"); a bare number is seconds.
mod duration_serde {
    use serde::{Deserialize, Deserializer, Serializer, de::Error};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&humantime::format_duration(*d).to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Secs(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Secs(s) => Ok(Duration::from_secs(s)),
            Raw::Text(t) if t.trim() == "0" => Ok(Duration::ZERO),
            Raw::Text(t) => humantime::parse_duration(&t).map_err(D::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn precedence_flags_over_env_over_file_over_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ferret.toml");
        std::fs::write(
            &file,
            "max_file_size = 10\nmax_path_depth = 7\nmax_files_per_request = 3\n",
        )
        .unwrap();
        let ov = Overrides {
            config_file: Some(file.clone()),
            flags: vec![],
            sets: vec!["max_file_size=30".into()],
        };
        let loaded = load(
            Mode::Cli,
            &ov,
            &env(&[
                ("FERRET_MAX_FILE_SIZE", "20"),
                ("FERRET_MAX_PATH_DEPTH", "8"),
            ]),
        )
        .unwrap();
        assert_eq!(loaded.config.max_file_size, 30);
        assert_eq!(loaded.config.max_path_depth, 8);
        assert_eq!(loaded.config.max_files_per_request, 3);
        assert_eq!(loaded.config.max_bytes_per_round, 0);
        assert_eq!(
            loaded.sources["max_file_size"],
            Source::Flag("--set".into())
        );
        assert_eq!(
            loaded.sources["max_path_depth"],
            Source::Env("FERRET_MAX_PATH_DEPTH".into())
        );
        assert_eq!(loaded.sources["max_files_per_request"], Source::File(file));
        assert_eq!(loaded.sources["max_bytes_per_round"], Source::Default);
    }

    #[test]
    fn env_strings_are_typed_by_their_default() {
        let loaded = load(
            Mode::Server,
            &Overrides::default(),
            &env(&[
                ("FERRET_DENY_EXTRA", ".obsidian/, .smarthole/"),
                ("FERRET_REQUEST_TIMEOUT", "2s"),
            ]),
        )
        .unwrap();
        assert_eq!(loaded.config.deny_extra, vec![".obsidian/", ".smarthole/"]);
        assert_eq!(loaded.config.request_timeout, Duration::from_secs(2));
        assert_eq!(loaded.config.max_requests_per_round, 50);
    }

    #[test]
    fn env_example_lists_every_key() {
        let example = include_str!("../.env.example");
        let Value::Object(map) = serde_json::to_value(Config::defaults(Mode::Server)).unwrap()
        else {
            panic!()
        };
        for key in map.keys().filter(|k| *k != "roots") {
            let var = format!("FERRET_{}=", key.to_uppercase());
            assert!(
                example.lines().any(|l| l.starts_with(&var)),
                ".env.example lacks {var}"
            );
        }
    }

    #[test]
    fn unknown_keys_and_bad_values_are_errors_naming_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ferret.toml");
        std::fs::write(&file, "max_fil_size = 10\n").unwrap();
        let ov = Overrides {
            config_file: Some(file),
            ..Default::default()
        };
        let err = load(Mode::Cli, &ov, &BTreeMap::new()).unwrap_err();
        assert!(format!("{err:#}").contains("max_fil_size"), "{err:#}");

        let err = load(
            Mode::Cli,
            &Overrides::default(),
            &env(&[("FERRET_MAX_FILE_SIZE", "big")]),
        )
        .unwrap_err();
        assert!(err.to_string().contains("whole number"), "{err}");
    }
}

//! The layers: defaults, a user's file, the environment, flags; each value's source.

use super::narrow::narrow;
use super::{Config, Mode};
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// Where a configuration value came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "from", rename_all = "lowercase")]
pub enum Source {
    Default,
    /// The directory of a human subcommand's path argument, when nothing set the roots.
    PathGiven,
    File(PathBuf),
    Env(String),
    Flag(String),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::PathGiven => f.write_str("the path given on the command line"),
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
    /// What a workspace's own `ferret.toml` tried and was refused, each naming its key
    /// (`ferret config` shows them; they were printed on stderr too).
    pub refused: Vec<String>,
    /// Warnings for the agent: the workspace's own `ferret.toml` hides all or almost all
    /// of the workspace (see `config::hides`). Front ends pass them on
    /// (`Ferret::with_notices`); `ferret config` shows them.
    pub notices: Vec<String>,
}

/// The inputs to [`load`]: what the command line said, and the environment to read.
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    /// `--config FILE`; otherwise the user's file (`$XDG_CONFIG_HOME/ferret/config.toml`,
    /// else `~/.config/ferret/config.toml`) when present, then `ferret.toml` in the first
    /// root, which may only narrow.
    pub config_file: Option<PathBuf>,
    /// Values set by flags, as (key, JSON value, flag name).
    pub flags: Vec<(String, Value, String)>,
    /// `--set key=value` pairs, typed like environment strings.
    pub sets: Vec<String>,
    /// The roots in place of the current directory when no layer sets them: a human
    /// subcommand's path outside it (`ferret grep TODO ../other`). Its `ferret.toml` is
    /// the workspace's own, like any root's.
    pub default_roots: Option<Vec<PathBuf>>,
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
    if let Some(roots) = &overrides.default_roots {
        map.insert("roots".into(), serde_json::to_value(roots)?);
        sources.insert("roots".into(), Source::PathGiven);
    }

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

    for w in unknown_env(env, &defaults) {
        eprintln!("ferret: warning: {}", crate::error::echo(&w.to_string()));
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
    let first_root = layer_roots
        .as_ref()
        .or(overrides.default_roots.as_ref())
        .and_then(|r| r.first().cloned());
    let roots_in_force = layer_roots
        .as_deref()
        .or(overrides.default_roots.as_deref());
    // A file the user named is trusted unless it lies inside a root (a repository can
    // ship anything); `ferret.toml` in the workspace is the workspace's own and may only
    // narrow what the user set.
    let (user_file, workspace_file) = match overrides
        .config_file
        .clone()
        .or_else(|| env.get("FERRET_CONFIG").map(PathBuf::from))
    {
        Some(f) if inside_roots(&f, roots_in_force) => (None, Some(f)),
        Some(f) => (Some(f), None),
        None => {
            let root = first_root.clone().unwrap_or_else(|| PathBuf::from("."));
            let candidate = root.join("ferret.toml");
            // Whatever stands at the name is the workspace's: a directory, FIFO or link
            // there is refused with a warning (read_table), not passed over in silence.
            let workspace = std::fs::symlink_metadata(&candidate)
                .is_ok()
                .then_some(candidate);
            // The user's own file, unless a root holds it: there an agent allowed to
            // write could edit it, and it would widen the next session.
            match user_config_file(env).filter(|f| f.is_file()) {
                Some(f) if inside_roots(&f, roots_in_force) => {
                    eprintln!(
                        "ferret: warning: {} is inside a root, so it is not trusted and was not read; name a file outside every root with --config",
                        f.display()
                    );
                    (None, workspace)
                }
                user => (user, workspace),
            }
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
    let mut refused = Vec::new();
    let mut notices = Vec::new();
    if let Some(path) = &workspace_file {
        let before = config.clone();
        // A repository's file never stops ferret: what cannot be read or applied is
        // refused (narrow.rs), and the user's settings stay in force.
        let n = match read_table(path) {
            Ok(layer) => narrow(&mut config, &layer, path),
            Err(e) => {
                let why = format!("the whole file ({e:#})");
                // The file is the workspace's: what it holds is echoed on one line.
                eprintln!(
                    "ferret: warning: {} is inside the workspace and was not used: {}",
                    crate::error::echo(&path.display().to_string()),
                    crate::error::echo(&why)
                );
                super::narrow::Narrowed {
                    applied: Vec::new(),
                    refused: vec![why],
                }
            }
        };
        for k in n.applied {
            sources.insert(k, Source::File(path.clone()));
        }
        refused = n
            .refused
            .into_iter()
            .map(|r| format!("{}: {r}", path.display()))
            .collect();
        if let Some(w) = super::hides::hidden_by_workspace_file(&before, &config, path) {
            eprintln!("ferret: warning: {w}");
            notices.push(w);
        }
    }
    Ok(Loaded {
        config,
        sources,
        refused,
        notices,
    })
}

/// `FERRET_*` variables that are not settings (a typo would otherwise be ignored in
/// silence, while a typo in a file is an error), each with the closest real name.
pub fn unknown_env(env: &BTreeMap<String, String>, defaults: &Map<String, Value>) -> Vec<String> {
    // Read by ferret outside the configuration, or by its test and benchmark scripts.
    const OTHERS: &[&str] = &[
        "FERRET_CONFIG",
        "FERRET_ROOT",
        "FERRET_TOKEN",
        "FERRET_LOG",
        "FERRET_BIN",
        "FERRET_BENCH_DIR",
        "FERRET_PORTABLE",
    ];
    let known: Vec<String> = defaults
        .keys()
        .map(|k| format!("FERRET_{}", k.to_uppercase()))
        .chain(OTHERS.iter().map(|s| s.to_string()))
        .collect();
    env.keys()
        // FERRET_TEST_* are the test suite's knobs, read where they apply.
        .filter(|k| {
            k.starts_with("FERRET_") && !k.starts_with("FERRET_TEST_") && !known.contains(k)
        })
        .map(|k| {
            let near = known.iter().min_by_key(|c| edit_distance(k, c));
            match near.filter(|c| edit_distance(k, c) <= 3) {
                Some(c) => format!("{k} is not a setting; did you mean {c}?"),
                None => format!("{k} is not a setting (see `ferret config` for the names)"),
            }
        })
        .collect()
}

/// Levenshtein distance, for "did you mean".
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// The user's config file: `$XDG_CONFIG_HOME/ferret/config.toml`, else
/// `~/.config/ferret/config.toml` (macOS: `~/Library/Application Support/ferret/`)
/// (whether it exists is the caller's question).
pub fn user_config_file(env: &BTreeMap<String, String>) -> Option<PathBuf> {
    let get = |k: &str| env.get(k).map(std::ffi::OsString::from);
    Some(crate::platform::config_dir(&get)?.join("config.toml"))
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

fn read_file_layer(
    path: &Path,
    defaults: &Map<String, Value>,
) -> anyhow::Result<Map<String, Value>> {
    let map = read_table(path)?;
    for k in map.keys() {
        if !defaults.contains_key(k) {
            return Err(unknown_key(k, defaults).context(format!("in {}", path.display())));
        }
    }
    Ok(map)
}

/// A config file's table, read without following a symbolic link and at most 1 MiB.
fn read_table(path: &Path) -> anyhow::Result<Map<String, Value>> {
    // Not through a symlink: a config file that is a link to a secret would have its
    // content quoted in a parse error. Not a FIFO or device either (it would block).
    let text = {
        use std::io::Read;
        use std::os::unix::fs::OpenOptionsExt;
        let mut text = String::new();
        let flags = rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(flags.bits() as i32)
            .open(path)
            .map_err(|e| anyhow::anyhow!("cannot read config file {} (it must be a regular file, not a symbolic link): {e}", path.display()))?;
        let meta = file.metadata()?;
        if !meta.is_file() {
            anyhow::bail!("config file {} is not a regular file", path.display());
        }
        if meta.len() > 1 << 20 {
            anyhow::bail!("config file {} is over 1 MiB", path.display());
        }
        file.take(1 << 20)
            .read_to_string(&mut text)
            .map_err(|e| anyhow::anyhow!("cannot read config file {}: {e}", path.display()))?;
        text
    };
    let table: toml::Table = toml::from_str(&text).map_err(|e| {
        anyhow::anyhow!("config file {}: {}", path.display(), toml_error(&text, &e))
    })?;
    let value = serde_json::to_value(table)?;
    let Value::Object(map) = value else {
        anyhow::bail!("config file {} is not a table", path.display())
    };
    Ok(map)
}

/// A TOML error as its message and place, without the source line the error's own text
/// quotes: a hostile file of one 660 KB line was echoed whole to stderr at every start.
fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let message = crate::error::echo(e.message().trim()).into_owned();
    let message: String = message.chars().take(300).collect();
    match e.span() {
        Some(span) => {
            let before = text.get(..span.start).unwrap_or_default();
            let line = before.matches('\n').count() + 1;
            let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
            format!("{message} (line {line}, column {column})")
        }
        None => message,
    }
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
        // A TOML/JSON array as a config file writes it (`["md","rs"]`) is read as one;
        // anything else is a comma-separated list (`md,rs`).
        Value::Array(_) if raw.starts_with('[') => {
            let parsed: toml::Value = toml::from_str(&format!("v = {raw}"))
                .map_err(|e| anyhow::anyhow!("expected a list like [\"a\", \"b\"] or a,b: {e}"))?;
            match parsed.get("v") {
                Some(toml::Value::Array(items)) => Value::Array(
                    items
                        .iter()
                        .map(|i| match i {
                            toml::Value::String(s) => Ok(Value::String(s.clone())),
                            other => anyhow::bail!("expected strings in the list, got {other}"),
                        })
                        .collect::<anyhow::Result<_>>()?,
                ),
                _ => anyhow::bail!("expected a list like [\"a\", \"b\"] or a,b, got {raw:?}"),
            }
        }
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
pub(crate) mod duration_serde {
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
    use std::time::Duration;

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
            default_roots: None,
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
        let example = include_str!("../../.env.example");
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
            default_roots: None,
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

//! From the command line and the environment to the configuration's inputs: the global
//! flags become `(key, value, flag)` overrides, `FERRET_*` variables are collected (with
//! `FERRET_ROOT`, a path list, folded into `FERRET_ROOTS`).

use super::args::Global;
use crate::config::{self, Mode, Overrides};
use serde_json::Value;
use std::collections::BTreeMap;

/// The environment variables ferret reads, with `FERRET_ROOT` (a path list) folded into
/// `FERRET_ROOTS` (the config key's own name).
pub fn ferret_env() -> BTreeMap<String, String> {
    // HOME and XDG_CONFIG_HOME: where the user's own config file is.
    let mut env: BTreeMap<String, String> = std::env::vars()
        .filter(|(k, _)| k.starts_with("FERRET_") || k == "HOME" || k == "XDG_CONFIG_HOME")
        .collect();
    // Seed 004's names, for hosts configured for it: FERRET_* wins when both are set.
    for (seed, ours) in [
        ("AI_ROUNDTABLE_BASE_PATH", "FERRET_ROOT"),
        ("AI_ROUNDTABLE_MAX_FILE_SIZE", "FERRET_MAX_FILE_SIZE"),
    ] {
        if let Ok(v) = std::env::var(seed)
            && !env.contains_key(ours)
            && !(ours == "FERRET_ROOT" && env.contains_key("FERRET_ROOTS"))
        {
            env.insert(ours.to_string(), v);
        }
    }
    if let Some(r) = env.remove("FERRET_ROOT") {
        let joined: Vec<String> = std::env::split_paths(&r)
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        env.entry("FERRET_ROOTS".into()).or_insert(joined.join(","));
    }
    env
}

/// Builds the configuration for `mode` from the global flags and the environment.
/// `path_root`: the root a human subcommand would take from its path argument if no root
/// is set anywhere (see [`config::Overrides::default_roots`]).
pub fn load_config(
    global: &Global,
    mode: Mode,
    path_root: Option<std::path::PathBuf>,
) -> anyhow::Result<config::Loaded> {
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
        default_roots: path_root.map(|r| vec![r]),
    };
    config::load(mode, &overrides, &ferret_env())
}

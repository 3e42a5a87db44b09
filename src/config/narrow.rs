//! A workspace's own `ferret.toml` (a cloned repository can ship one): applied last,
//! key by key, only ever narrowing what the user set.
//!
//! Each key has one rule. A value in the narrowing direction is applied; anything else is
//! refused with a warning naming the key (on stderr, and in `ferret config`). A key with
//! no rule here is refused, so a setting added later is never widened by a workspace
//! before someone decides its direction (`tests/it/names_r3.rs` fails for a key the
//! test's table does not cover).
//!
//! | key | a workspace file may |
//! |---|---|
//! | `roots`, `state_dir`, `audit_log` | nothing (refused) |
//! | `use_os_trash` | nothing (refused): where the user's deletions go is the user's choice |
//! | `deny`, `deny_extra` | add patterns (to `deny_extra`); never remove one, never a `!` |
//! | `confirm`, `bash_blocklist` | add entries; never remove one, never a `!` |
//! | `skip`, `skip_extra` | add patterns (to `skip_extra`); never remove one, never a `!` |
//! | `allowed_extensions` | restrict: the user's list (all when empty) intersected with its own |
//! | `tools` | restrict: the user's list (the default served set when empty) intersected with its own |
//! | `allow_write`, `allow_permanent_delete` | set `false` |
//! | `dry_run`, `direct_bash_confirm`, `backup_enabled` | set `true` |
//! | `max_path_depth`, `max_file_size`, `search_max_file_size`, `max_files_per_request`, `max_output_chars`, `max_columns`, `max_bytes_per_round`, `max_requests_per_round`, `max_edit_file_size`, `index_max_files`, `index_max_bytes`, `request_timeout` | lower (0 means none, so only a non-zero value below the user's, or any non-zero value where the user's is 0) |
//! | `round_window` | lengthen (budgets reset less often; `0s` never resets them) |

use super::Config;
use super::layers::duration_serde;
use serde_json::{Map, Value};
use std::path::Path;
use std::time::Duration;

/// Tools the MCP server does not list unless the `tools` setting names them (their
/// `served_by_default` is false): a workspace may not add them to the default set.
/// `tests/it/names_r3.rs` checks this against the registry.
pub const NOT_SERVED_BY_DEFAULT: &[&str] = &["search_files", "file_search"];

/// What a workspace file did: the keys it applied, and a warning per refused key.
pub(super) struct Narrowed {
    pub applied: Vec<String>,
    pub refused: Vec<String>,
}

/// Applies a workspace's own configuration file, which may only narrow the sandbox (see
/// the table above). Returns the keys it applied and the refusals, each naming its key;
/// the refusals are also printed on stderr.
pub(super) fn narrow(
    c: &mut Config,
    layer: &Map<String, Value>,
    path: &Path,
) -> anyhow::Result<Narrowed> {
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
    /// Adds `list` to `target`, refusing `!` re-allows.
    fn add(k: &str, list: Vec<String>, target: &mut Vec<String>, ignored: &mut Vec<String>) {
        let (keep, reallow): (Vec<String>, Vec<String>) = list
            .into_iter()
            .partition(|p| !p.trim_start().starts_with('!'));
        if !reallow.is_empty() {
            ignored.push(format!(
                "{k}: {} (a `!` pattern re-allows)",
                reallow.join(", ")
            ));
        }
        for p in keep {
            if !target.contains(&p) {
                target.push(p);
            }
        }
    }
    let mut applied = Vec::new();
    let mut ignored = Vec::new();
    for (k, v) in layer {
        let before = serde_json::to_value(&*c)?;
        let refused_before = ignored.len();
        // The key whose value changes (`deny` and `skip` only ever add to their extras).
        let mut target = k.clone();
        match k.as_str() {
            "deny" | "deny_extra" | "skip" | "skip_extra" => {
                let list: Vec<String> = get(k, v, path)?;
                let deny = k.starts_with("deny");
                let (base, extra) = if deny {
                    (&c.deny, &mut c.deny_extra)
                } else {
                    (&c.skip, &mut c.skip_extra)
                };
                if k == "deny" || k == "skip" {
                    // Elsewhere these replace the defaults; here they only add.
                    let dropped = base.iter().filter(|p| !list.contains(p)).count();
                    if dropped > 0 {
                        ignored.push(format!(
                            "{k}: leaving out {dropped} of the user's entries (a workspace file only adds to {k}; they stay in force)"
                        ));
                    }
                }
                let list: Vec<String> = list.into_iter().filter(|p| !base.contains(p)).collect();
                add(k, list, extra, &mut ignored);
                target = if deny { "deny_extra" } else { "skip_extra" }.into();
            }
            "confirm" | "bash_blocklist" => {
                let list: Vec<String> = get(k, v, path)?;
                let target = if k == "confirm" {
                    &mut c.confirm
                } else {
                    &mut c.bash_blocklist
                };
                // Elsewhere the list replaces the defaults; here it only adds.
                let dropped = target.iter().filter(|p| !list.contains(p)).count();
                if dropped > 0 {
                    ignored.push(format!(
                        "{k}: leaving out {dropped} of the user's entries (a workspace file only adds to {k}; they stay in force)"
                    ));
                }
                add(k, list, target, &mut ignored);
            }
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
                    // The default served set, narrowed; never a tool outside it.
                    let (keep, extra): (Vec<String>, Vec<String>) = new
                        .into_iter()
                        .partition(|t| !NOT_SERVED_BY_DEFAULT.contains(&t.as_str()));
                    if !extra.is_empty() {
                        ignored.push(format!(
                            "tools: {} (not served by default; only the user can add it)",
                            extra.join(", ")
                        ));
                    }
                    if keep.is_empty() && !extra.is_empty() {
                        // Nothing left to narrow to: keep the defaults rather than
                        // serve what was refused.
                    } else {
                        c.tools = keep;
                    }
                } else {
                    let extra: Vec<&str> = new
                        .iter()
                        .filter(|t| !c.tools.contains(t))
                        .map(String::as_str)
                        .collect();
                    if !extra.is_empty() {
                        ignored.push(format!(
                            "tools: {} (not in the user's list)",
                            extra.join(", ")
                        ));
                    }
                    c.tools.retain(|t| new.contains(t));
                }
            }
            "allow_write" | "allow_permanent_delete" => {
                if get::<bool>(k, v, path)? {
                    let cur = if k == "allow_write" {
                        c.allow_write
                    } else {
                        c.allow_permanent_delete
                    };
                    if !cur {
                        ignored.push(format!("{k} = true"));
                    }
                } else if k == "allow_write" {
                    c.allow_write = false;
                } else {
                    c.allow_permanent_delete = false;
                }
            }
            "dry_run" | "direct_bash_confirm" | "backup_enabled" => {
                let slot = match k.as_str() {
                    "dry_run" => &mut c.dry_run,
                    "direct_bash_confirm" => &mut c.direct_bash_confirm,
                    _ => &mut c.backup_enabled,
                };
                // The safe side is on: a workspace may turn it on, never off.
                if get::<bool>(k, v, path)? {
                    *slot = true;
                } else if *slot {
                    ignored.push(format!("{k} = false"));
                }
            }
            "max_path_depth" => {
                c.max_path_depth = lower(c.max_path_depth as u64, get(k, v, path)?) as usize
            }
            "max_files_per_request" => {
                c.max_files_per_request =
                    lower(c.max_files_per_request as u64, get(k, v, path)?) as usize
            }
            "max_columns" => c.max_columns = lower(c.max_columns as u64, get(k, v, path)?) as usize,
            "max_file_size" => c.max_file_size = lower(c.max_file_size, get(k, v, path)?),
            "max_output_chars" => c.max_output_chars = lower(c.max_output_chars, get(k, v, path)?),
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
            "index_max_files" => c.index_max_files = lower(c.index_max_files, get(k, v, path)?),
            "index_max_bytes" => c.index_max_bytes = lower(c.index_max_bytes, get(k, v, path)?),
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
            // roots, state_dir, audit_log, use_os_trash, and any key without a rule
            _ => {
                ignored.push(format!("{k} (a workspace file cannot set it)"));
                continue;
            }
        }
        let after = serde_json::to_value(&*c)?;
        if after != before {
            applied.push(target);
        } else if ignored.len() == refused_before && before.get(k) != Some(v) {
            // Nothing changed although the value differs: it was not narrower.
            let shown = match v {
                Value::String(s) => s.clone(),
                v => v.to_string(),
            };
            if !v.is_array() {
                ignored.push(format!("{k} = {shown} (not narrower than the user's)"));
            }
        }
    }
    let refused: Vec<String> = ignored;
    if !refused.is_empty() {
        eprintln!(
            "ferret: warning: {} is inside the workspace, so it may only narrow the sandbox; ignored: {}. \
             Set these with flags, FERRET_* variables, or a config file outside every root (--config).",
            path.display(),
            refused.join("; ")
        );
    }
    applied.dedup();
    Ok(Narrowed { applied, refused })
}

//! A workspace's own `ferret.toml` (a cloned repository can ship one): applied last,
//! field by field, only ever narrowing what the user set.

use super::Config;
use super::layers::duration_serde;
use serde_json::{Map, Value};
use std::path::Path;
use std::time::Duration;

/// Applies a workspace's own configuration file, which may only narrow the sandbox:
/// more deny and confirm patterns (never a `!` that re-allows), lower limits, writes
/// off, dry-run on, fewer tools or extensions. Settings that would widen it — roots, the
/// state directory, the audit log, `allow_write = true`, a smaller deny list, higher
/// limits — are ignored with a warning on stderr. Returns the keys it applied.
pub(super) fn narrow(
    c: &mut Config,
    layer: &Map<String, Value>,
    path: &Path,
) -> anyhow::Result<Vec<String>> {
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
            "direct_bash_confirm" => {
                // Asking is the safe side: a workspace may turn it on, never off.
                if get::<bool>(k, v, path)? {
                    c.direct_bash_confirm = true;
                } else if c.direct_bash_confirm {
                    ignored.push("direct_bash_confirm = false".into());
                }
            }
            "bash_blocklist" => {
                for p in get::<Vec<String>>(k, v, path)? {
                    if !c.bash_blocklist.contains(&p) {
                        c.bash_blocklist.push(p);
                    }
                }
            }
            "backup_enabled" => {
                // Backups are what makes an edit undoable: a workspace cannot turn them off.
                if !get::<bool>(k, v, path)? {
                    ignored.push("backup_enabled = false".into());
                }
            }
            "max_path_depth" => {
                c.max_path_depth = lower(c.max_path_depth as u64, get(k, v, path)?) as usize
            }
            "max_files_per_request" => {
                c.max_files_per_request =
                    lower(c.max_files_per_request as u64, get(k, v, path)?) as usize
            }
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

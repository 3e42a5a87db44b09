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
//! | `max_backup_bytes` | nothing (refused): lowered, it would drop the undo of the person's own changes |
//! | `deny`, `deny_extra` | add patterns (to `deny_extra`); never remove one, never a `!` |
//! | `confirm`, `bash_blocklist` | add entries; never remove one, never a `!` |
//! | `skip`, `skip_extra` | add patterns (to `skip_extra`); never remove one, never a `!` |
//! | `allowed_extensions` | restrict: the user's list (all when empty) intersected with its own |
//! | `tools` | restrict: the user's list (the default served set when empty) intersected with its own |
//! | `allow_write`, `allow_permanent_delete` | set `false` |
//! | `dry_run`, `direct_bash_confirm`, `backup_enabled` | set `true` |
//! | `max_path_depth`, `max_file_size`, `search_max_file_size`, `max_files_per_request`, `max_output_chars`, `max_columns`, `max_bytes_per_round`, `max_requests_per_round`, `max_edit_file_size`, `max_image_bytes`, `index_max_files`, `index_max_bytes`, `request_timeout` | lower (0 means none, so only a non-zero value below the user's, or any non-zero value where the user's is 0) |
//! | `round_window` | lengthen, up to ten minutes (budgets reset less often) |
//!
//! A workspace file never stops ferret: a value of the wrong type, an unknown key, an
//! unknown tool, a pattern that does not compile or weighs too much is refused on its own
//! (the rest of the file still applies), and a file that is not TOML is refused whole.
//! Patterns are bounded before anything is compiled ([`MAX_ADDED`] per list, 1 KiB and
//! [`MAX_WILDCARDS`] wildcards each, a wildcard weight of [`MAX_WEIGHT`] per list), then
//! the lists as ferret will build them are compiled once: if that fails, the workspace's
//! additions to them are refused. Limits have floors ([`floor`]): a repository can make
//! ferret stricter, not unusable (a 1-character answer, a 1 ms timeout).

use super::Config;
use super::layers::duration_serde;
use serde_json::{Map, Value};
use std::path::Path;
use std::time::Duration;

/// Tools the MCP server does not list unless the `tools` setting names them (their
/// `served_by_default` is false): a workspace may not add them to the default set.
/// `tests/it/names_r3.rs` checks this against the registry.
pub const NOT_SERVED_BY_DEFAULT: &[&str] = &["search_files", "file_search"];

/// Every tool's name, so a workspace file naming one that does not exist is refused on
/// its own instead of stopping the server (`tests/it/names_r4.rs` checks it against the
/// registry).
pub const TOOL_NAMES: &[&str] = &[
    "read_file",
    "read_files",
    "list_directory",
    "file_exists",
    "get_file_info",
    "grep",
    "glob",
    "search_files",
    "file_search",
    "edit",
    "write_file",
    "move",
    "apply_patch",
    "notebook_edit",
    "file_delete",
    "undo",
];

/// The most entries of one list a workspace file has looked at: the rest are counted as
/// over the limit.
const MAX_EXAMINED: usize = 4 * MAX_ADDED;

/// The most refused entries of one list named one by one.
const MAX_NAMED: usize = 20;

/// Most patterns a workspace file may add to one list.
pub const MAX_ADDED: usize = 1000;

/// Most wildcards (`*`, `?`, `[`, `{`) in one pattern from a workspace file.
pub const MAX_WILDCARDS: usize = 32;
/// Most wildcards in all the patterns a workspace file adds to one list (the weight an
/// ignore file may have, see search/cost.rs).
pub const MAX_WEIGHT: usize = 4000;
/// The longest round a workspace file may set: with the floor of 30 requests, an agent
/// keeps at least three requests a minute however the two are set.
pub const MAX_ROUND_WINDOW: Duration = Duration::from_secs(600);
/// Longest pattern from a workspace file, in bytes.
const MAX_PATTERN_LEN: usize = 1024;

/// The least a workspace file may set a limit to (0 means none and is never narrower):
/// below these ferret would be unusable rather than stricter.
pub fn floor(key: &str) -> u64 {
    match key {
        "max_output_chars" => 2_000,
        "max_columns" => 80,
        "max_path_depth" => 2,
        "max_files_per_request" => 10,
        "max_requests_per_round" => 30,
        "max_file_size" | "search_max_file_size" | "max_edit_file_size" | "max_image_bytes" => 4096,
        "max_bytes_per_round" => 1 << 20,
        "index_max_files" => 1000,
        "index_max_bytes" => 1 << 20,
        "request_timeout" => 1000, // milliseconds
        _ => 0,
    }
}

/// What a workspace file did: the keys it applied, and a warning per refused key.
pub(super) struct Narrowed {
    pub applied: Vec<String>,
    pub refused: Vec<String>,
}

/// The wildcards of a pattern: what its compiled size grows with.
fn wildcards(p: &str) -> usize {
    p.chars()
        .filter(|c| matches!(c, '*' | '?' | '[' | '{'))
        .count()
}

/// What a pattern weighs against a list's [`MAX_WEIGHT`]: its wildcards, and a unit per
/// 16 non-ASCII members of its bracket classes (what they compile to, see
/// config/classes.rs), as an ignore file's lines are weighed.
fn pattern_weight(p: &str) -> usize {
    let classes = super::classes::classes(p.as_bytes()).weight;
    wildcards(p).saturating_add(usize::try_from(classes).unwrap_or(usize::MAX))
}

/// Checks patterns a workspace file adds before anything else compiles them: each one
/// alone (length, wildcards, syntax), then the list's count and weight. Returns the
/// patterns kept; each refusal names the pattern.
fn check_patterns(k: &str, list: Vec<String>, refused: &mut Vec<String>) -> Vec<String> {
    // Deny and confirm rules match whatever the case; skip rules do not.
    let caseless = !k.starts_with("skip");
    let mut keep = Vec::new();
    let mut weight: usize = 0;
    let mut over = 0;
    let mut said = 0;
    for (i, p) in list.into_iter().enumerate() {
        // Past what a list may add (or what is worth looking at), a pattern is counted,
        // not checked: each check compiles it, and 262 000 of them took 3 s at every
        // start.
        if keep.len() >= MAX_ADDED || i >= MAX_EXAMINED {
            over += 1;
            continue;
        }
        let shown: String = p.chars().take(60).collect();
        let why = if p.len() > MAX_PATTERN_LEN {
            Some(format!("longer than {MAX_PATTERN_LEN} bytes"))
        } else if wildcards(&p) > MAX_WILDCARDS {
            Some(format!("more than {MAX_WILDCARDS} wildcards"))
        } else if super::classes::classes(p.as_bytes()).over() {
            // 1 000 classes of 340 CJK code points cost 2.6 s and ~190 MB at every start.
            Some(format!(
                "a bracket class of more than {} non-ASCII members",
                super::classes::CLASS_MAX_MEMBERS
            ))
        } else {
            // Compiled exactly as the sandbox will (NFC, case folding): a range whose
            // ends change under NFC (`[\u{F900}-\u{F901}]`) is reversed there.
            super::globs::check_one(&p, caseless).err()
        };
        if let Some(why) = why {
            // The first refusals are named; the rest are counted with the overflow.
            if said < MAX_NAMED {
                said += 1;
                refused.push(format!("{k}: {shown:?} ({why})"));
            } else {
                over += 1;
            }
            continue;
        }
        let w = pattern_weight(&p);
        if keep.len() >= MAX_ADDED || weight.saturating_add(w) > MAX_WEIGHT {
            over += 1;
            continue;
        }
        weight += w;
        keep.push(p);
    }
    if over > 0 {
        refused.push(format!(
            "{k}: {over} more patterns (a workspace file adds at most {MAX_ADDED} to a list, \
             with a weight of at most {MAX_WEIGHT} in all: a wildcard each, a bracket class \
             one more per 16 non-ASCII members)"
        ));
    }
    keep
}

/// Checks `bash_blocklist` entries as the shell will read them: shell words, each a glob.
fn check_blocklist(list: Vec<String>, refused: &mut Vec<String>) -> Vec<String> {
    let mut keep = Vec::new();
    for e in list {
        let shown: String = e.chars().take(60).collect();
        let ok = e.len() <= MAX_PATTERN_LEN
            && wildcards(&e) <= MAX_WILDCARDS
            && !super::classes::classes(e.as_bytes()).over()
            && shell_words::split(&e)
                .map(|w| w.iter().all(|w| globset::Glob::new(w).is_ok()))
                .unwrap_or(false);
        if !ok {
            refused.push(format!(
                "bash_blocklist: {shown:?} (not shell words of globs, or too long)"
            ));
        } else if keep.len() < MAX_ADDED {
            keep.push(e);
        }
    }
    keep
}

/// Compiles patterns the way the sandbox will (config/globs.rs, the one function both
/// use), so a list that cannot be built is found here.
fn compiles<'a>(
    sensitive: impl IntoIterator<Item = &'a str>,
    caseless: impl IntoIterator<Item = &'a str>,
) -> bool {
    super::globs::build(sensitive, caseless, |_| {}).is_ok()
}

/// Applies a workspace's own configuration file, which may only narrow the sandbox (see
/// the table above). Returns the keys it applied and the refusals, each naming its key;
/// the refusals are also printed on stderr. Never fails: what cannot be applied is refused.
pub(super) fn narrow(c: &mut Config, layer: &Map<String, Value>, path: &Path) -> Narrowed {
    let start = c.clone();
    let mut applied = Vec::new();
    let mut ignored = Vec::new();
    for (k, v) in layer {
        let Ok(before) = serde_json::to_value(&*c) else {
            continue;
        };
        let saved = c.clone();
        let refused_before = ignored.len();
        match narrow_key(c, k, v, &mut ignored) {
            Ok(Some(target)) => {
                let changed = serde_json::to_value(&*c)
                    .map(|a| a != before)
                    .unwrap_or(true);
                if changed {
                    applied.push(target);
                } else if ignored.len() == refused_before
                    && before.get(k) != Some(v)
                    && !v.is_array()
                {
                    // Nothing changed although the value differs: it was not narrower.
                    let shown = match v {
                        Value::String(s) => s.clone(),
                        v => v.to_string(),
                    };
                    ignored.push(format!("{k} = {shown} (not narrower than the user's)"));
                }
            }
            Ok(None) => {}
            Err(e) => {
                *c = saved;
                ignored.truncate(refused_before);
                ignored.push(format!("{k}: {e}"));
            }
        }
    }
    // The lists as the sandbox will build them: a combination that does not compile
    // (each pattern passed alone) drops the workspace's additions, not the user's rules.
    if !compiles(c.skip_patterns(), c.deny_patterns()) {
        let added = c.deny_extra.len() + c.skip_extra.len()
            - start.deny_extra.len()
            - start.skip_extra.len();
        c.deny_extra = start.deny_extra.clone();
        c.skip_extra = start.skip_extra.clone();
        applied.retain(|a| a != "deny_extra" && a != "skip_extra");
        if added > 0 {
            ignored.push(format!(
                "deny and skip: {added} added patterns (with the user's rules they do not compile)"
            ));
        }
    }
    if !compiles([], c.confirm.iter().map(String::as_str)) {
        c.confirm = start.confirm.clone();
        applied.retain(|a| a != "confirm");
        ignored.push("confirm: the added patterns (with the user's they do not compile)".into());
    }
    let refused: Vec<String> = ignored;
    if !refused.is_empty() {
        eprintln!(
            "ferret: warning: {} is inside the workspace, so it may only narrow the sandbox; ignored: {}. \
             Set these with flags, FERRET_* variables, or a config file outside every root (--config).",
            crate::error::echo(&path.display().to_string()),
            crate::error::echo(&refused.join("; "))
        );
    }
    // What the workspace added, so the sandbox can drop it, never stop, should a list
    // still fail to build there (workspace/mod.rs).
    let added = |now: &[String], was: &[String]| -> Vec<String> {
        now.iter().filter(|p| !was.contains(p)).cloned().collect()
    };
    c.workspace_patterns = [
        added(&c.deny_extra, &start.deny_extra),
        added(&c.skip_extra, &start.skip_extra),
        added(&c.confirm, &start.confirm),
    ]
    .concat();
    applied.dedup();
    Narrowed { applied, refused }
}

/// Narrows one key. `Ok(Some(key))` names the key whose value may have changed (`deny`
/// and `skip` only ever add to their extras); `Ok(None)` means refused (in `ignored`);
/// an error is a value of the wrong shape, refused by the caller with the config as it was.
fn narrow_key(
    c: &mut Config,
    k: &str,
    v: &Value,
    ignored: &mut Vec<String>,
) -> anyhow::Result<Option<String>> {
    fn get<T: serde::de::DeserializeOwned>(v: &Value) -> anyhow::Result<T> {
        serde_json::from_value(v.clone()).map_err(|e| anyhow::anyhow!("{e}"))
    }
    /// The stricter of two limits where 0 means none, never below the key's floor.
    fn lower(k: &str, cur: u64, new: u64, ignored: &mut Vec<String>) -> u64 {
        let floor = floor(k);
        if new != 0 && new < floor {
            ignored.push(format!(
                "{k} = {new} (below {floor}, the least a workspace file may set)"
            ));
            return cur;
        }
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
            let shown: Vec<String> = reallow.iter().take(5).map(|p| format!("{p:?}")).collect();
            ignored.push(format!(
                "{k}: {} (a `!` pattern re-allows)",
                shown.join(", ")
            ));
        }
        for p in keep {
            if !target.contains(&p) {
                target.push(p);
            }
        }
    }
    let mut target = k.to_string();
    match k {
        "deny" | "deny_extra" | "skip" | "skip_extra" => {
            let list: Vec<String> = get(v)?;
            let deny = k.starts_with("deny");
            let base = if deny { &c.deny } else { &c.skip };
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
            let list = check_patterns(k, list, ignored);
            let extra = if deny {
                &mut c.deny_extra
            } else {
                &mut c.skip_extra
            };
            add(k, list, extra, ignored);
            target = if deny { "deny_extra" } else { "skip_extra" }.into();
        }
        "confirm" | "bash_blocklist" => {
            let list: Vec<String> = get(v)?;
            let list = if k == "confirm" {
                check_patterns(k, list, ignored)
            } else {
                check_blocklist(list, ignored)
            };
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
            add(k, list, target, ignored);
        }
        "allowed_extensions" => {
            let new: Vec<String> = get(v)?;
            if c.allowed_extensions.is_empty() {
                if new.is_empty() {
                    return Ok(Some(target));
                }
                c.allowed_extensions = new;
            } else {
                let both: Vec<String> = c
                    .allowed_extensions
                    .iter()
                    .filter(|e| new.contains(e))
                    .cloned()
                    .collect();
                if both.is_empty() {
                    // Empty would mean every extension.
                    ignored.push(format!("{k} (shares no extension with the user's list)"));
                    return Ok(None);
                }
                c.allowed_extensions = both;
            }
        }
        "tools" => {
            let new: Vec<String> = get(v)?;
            let (new, unknown): (Vec<String>, Vec<String>) = new
                .into_iter()
                .partition(|t| TOOL_NAMES.contains(&t.as_str()));
            if !unknown.is_empty() {
                let shown: Vec<String> = unknown
                    .iter()
                    .take(5)
                    .map(|t| format!("{:?}", t.chars().take(40).collect::<String>()))
                    .collect();
                ignored.push(format!("tools: {} (no such tool)", shown.join(", ")));
            }
            // An empty list means the default set: a narrowing that leaves nothing keeps
            // what the user had rather than serve more.
            let narrowed: Vec<String> = if c.tools.is_empty() {
                let (keep, extra): (Vec<String>, Vec<String>) = new
                    .into_iter()
                    .partition(|t| !NOT_SERVED_BY_DEFAULT.contains(&t.as_str()));
                if !extra.is_empty() {
                    ignored.push(format!(
                        "tools: {} (not served by default; only the user can add it)",
                        extra.join(", ")
                    ));
                }
                keep
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
                c.tools
                    .iter()
                    .filter(|t| new.contains(t))
                    .cloned()
                    .collect()
            };
            if narrowed.is_empty() {
                if ignored.last().is_none_or(|l| !l.starts_with("tools")) {
                    ignored.push("tools (leaves no tool; the user's set stays)".into());
                }
                return Ok(None);
            }
            c.tools = narrowed;
        }
        "allow_write" | "allow_permanent_delete" => {
            if get::<bool>(v)? {
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
            let on: bool = get(v)?;
            let slot = match k {
                "dry_run" => &mut c.dry_run,
                "direct_bash_confirm" => &mut c.direct_bash_confirm,
                _ => &mut c.backup_enabled,
            };
            // The safe side is on: a workspace may turn it on, never off.
            if on {
                *slot = true;
            } else if *slot {
                ignored.push(format!("{k} = false"));
            }
        }
        "max_path_depth" => {
            c.max_path_depth = lower(k, c.max_path_depth as u64, get(v)?, ignored) as usize
        }
        "max_files_per_request" => {
            c.max_files_per_request =
                lower(k, c.max_files_per_request as u64, get(v)?, ignored) as usize
        }
        "max_columns" => c.max_columns = lower(k, c.max_columns as u64, get(v)?, ignored) as usize,
        "max_file_size" => c.max_file_size = lower(k, c.max_file_size, get(v)?, ignored),
        "max_output_chars" => c.max_output_chars = lower(k, c.max_output_chars, get(v)?, ignored),
        "search_max_file_size" => {
            c.search_max_file_size = lower(k, c.search_max_file_size, get(v)?, ignored)
        }
        "max_bytes_per_round" => {
            c.max_bytes_per_round = lower(k, c.max_bytes_per_round, get(v)?, ignored)
        }
        "max_requests_per_round" => {
            c.max_requests_per_round = lower(k, c.max_requests_per_round, get(v)?, ignored)
        }
        "max_edit_file_size" => {
            c.max_edit_file_size = lower(k, c.max_edit_file_size, get(v)?, ignored)
        }
        "max_image_bytes" => c.max_image_bytes = lower(k, c.max_image_bytes, get(v)?, ignored),
        "index_max_files" => c.index_max_files = lower(k, c.index_max_files, get(v)?, ignored),
        "index_max_bytes" => c.index_max_bytes = lower(k, c.index_max_bytes, get(v)?, ignored),
        "request_timeout" => {
            let d: Duration = duration_serde::deserialize(v.clone())?;
            let ms = lower(
                k,
                c.request_timeout.as_millis() as u64,
                d.as_millis() as u64,
                ignored,
            );
            c.request_timeout = Duration::from_millis(ms);
        }
        "round_window" => {
            let d: Duration = duration_serde::deserialize(v.clone())?;
            // A longer round resets budgets less often; 0 never resets them. Up to a
            // ceiling: with a round of years, ten requests would stop ferret for good.
            if d.is_zero() || d > MAX_ROUND_WINDOW {
                ignored.push(format!(
                    "round_window = {} (a workspace file may lengthen it up to {})",
                    humantime::format_duration(d),
                    humantime::format_duration(MAX_ROUND_WINDOW)
                ));
                return Ok(None);
            }
            if !c.round_window.is_zero() && d > c.round_window {
                c.round_window = d;
            }
        }
        "roots" | "state_dir" | "audit_log" | "use_os_trash" | "max_backup_bytes" => {
            ignored.push(format!("{k} (a workspace file cannot set it)"));
            return Ok(None);
        }
        // Not a setting, or a setting without a rule yet.
        _ => {
            let shown: String = k.chars().take(60).collect();
            ignored.push(format!(
                "{shown:?} (not a setting a workspace file can set)"
            ));
            return Ok(None);
        }
    }
    Ok(Some(target))
}

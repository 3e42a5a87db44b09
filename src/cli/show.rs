//! The subcommands that show ferret's own state: `history` (the undo journal),
//! `config` (effective values and their sources), `tools` (definitions), `call`'s
//! JSON-in, JSON-out path.

use super::args::{CallArgs, Format};
use super::output::{print_json, print_text};
use crate::config;
use crate::context::{CallOptions, Ferret, Session};
use crate::error::ToolError;
use crate::registry::SchemaFormat;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::PathBuf;

pub fn history(ferret: &Ferret, json: bool, recover: bool) -> anyhow::Result<i32> {
    // Listing changes nothing: changes a killed process left are settled only on demand
    // (`--recover`, with writes allowed) or by the next change.
    if recover {
        if !ferret.config().allow_write || ferret.config().dry_run {
            anyhow::bail!(
                "WRITE_DISABLED: --recover settles changes a killed process left, which writes; \
                 pass --allow-write (and no --dry-run)"
            );
        }
        ferret.history().map_err(|e| anyhow::anyhow!(e.render()))?;
    }
    let h = ferret
        .history_read()
        .map_err(|e| anyhow::anyhow!(e.render()))?;
    let entries = h.entries().map_err(|e| anyhow::anyhow!(e.render()))?;
    if json {
        print_json(&entries)?;
        return Ok(0);
    }
    if entries.is_empty() {
        print_text("No changes yet.")?;
        return Ok(0);
    }
    let undone: Vec<u64> = entries.iter().filter_map(|e| e.undoes).collect();
    let mut out = String::new();
    let mut interrupted = 0;
    for e in &entries {
        let mut what = match e.undoes {
            Some(id) => format!("undo of {id}"),
            None if undone.contains(&e.id) => format!("{} (undone)", e.action.as_str()),
            None if e.pending && h.interrupted(e) => {
                interrupted += 1;
                format!("{} (interrupted)", e.action.as_str())
            }
            None if e.pending => format!("{} (under way)", e.action.as_str()),
            None if e.action == crate::history::Action::Edit && !e.undoable() => {
                "edit (not undoable: backups were off)".to_string()
            }
            None => e.action.as_str().to_string(),
        };
        if !e.conflicted.is_empty() {
            what.push_str(" (conflicted)");
        }
        let by = e.by.as_ref().map_or_else(
            || "unknown".to_string(),
            |o| crate::error::echo(&o.describe()).into_owned(),
        );
        // Names are a workspace's, chosen by whoever made the files: shown as every
        // answer shows them, so that none can forge a line of this listing.
        out.push_str(&format!(
            "{:>4}  {}  {:<16} {}  by {by}\n",
            e.id,
            e.timestamp,
            what,
            crate::workspace::shown_in_prose(&e.path)
        ));
        if !e.conflicted.is_empty() {
            let names: Vec<_> = e
                .conflicted
                .iter()
                .map(|p| crate::workspace::shown_in_prose(p))
                .collect();
            out.push_str(&format!(
                "      left as found by recovery (changed after the change was interrupted): {}\n",
                names.join(", ")
            ));
        }
    }
    if interrupted > 0 {
        out.push_str(&format!(
            "{interrupted} interrupted change(s) pending: a killed process left them; the next change settles them \
             (or `ferret --allow-write history --recover`), never over content ferret did not write.\n"
        ));
    }
    print_text(&out)?;
    Ok(0)
}

#[derive(Serialize)]
struct RootShown<'a> {
    name: &'a str,
    path: &'a PathBuf,
    canonical: &'a PathBuf,
}

#[derive(Serialize)]
struct ConfigShown<'a> {
    config: &'a config::Config,
    sources: &'a BTreeMap<String, config::Source>,
    roots: Vec<RootShown<'a>>,
    /// What the workspace's own ferret.toml tried and was refused.
    refused: &'a [String],
    /// Warnings: the workspace's own ferret.toml hides (almost) everything.
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    warnings: &'a [String],
    /// The platform layer in use: OS, resolver, watcher, trash.
    platform: BTreeMap<&'static str, &'static str>,
}

/// The platform layer's parts in use; the trash as this configuration uses it.
fn platform_shown(config: &config::Config) -> BTreeMap<&'static str, &'static str> {
    let mut m: BTreeMap<_, _> = crate::platform::describe().into_iter().collect();
    if !config.use_os_trash {
        m.insert("trash", "ferret's own (use_os_trash = false)");
    }
    m
}

pub fn config(loaded: &config::Loaded, ferret: &Ferret, json: bool) -> anyhow::Result<i32> {
    let roots = ferret
        .workspace()
        .roots()
        .iter()
        .map(|r| RootShown {
            name: &r.name,
            path: &r.path,
            canonical: &r.canonical,
        })
        .collect();
    if json {
        print_json(&ConfigShown {
            config: &loaded.config,
            sources: &loaded.sources,
            roots,
            refused: &loaded.refused,
            warnings: &loaded.notices,
            platform: platform_shown(&loaded.config),
        })?;
        return Ok(0);
    }
    let values = serde_json::to_value(&loaded.config)?;
    let mut out = String::new();
    if let serde_json::Value::Object(map) = &values {
        for (k, v) in map {
            let src = loaded
                .sources
                .get(k)
                .map(|s| s.to_string())
                .unwrap_or_default();
            let line = match v {
                serde_json::Value::Null => format!("# {k} (unset)"),
                v => format!("{k} = {v}"),
            };
            out.push_str(&format!("{line:<60} # {src}\n"));
        }
    }
    if !loaded.refused.is_empty() {
        out.push_str("\n# refused from the workspace's own ferret.toml (it may only narrow):\n");
        for r in &loaded.refused {
            // A workspace file's text (a parse error quotes its lines): one escaped line,
            // as on stderr, so a hostile file cannot write to the terminal.
            out.push_str(&format!("#   {}\n", crate::error::echo(r)));
        }
    }
    out.push_str("\n# platform:\n");
    for (k, v) in platform_shown(&loaded.config) {
        out.push_str(&format!("#   {k} = {v}\n"));
    }
    for w in &loaded.notices {
        out.push_str(&format!("\n# WARNING: {}\n", crate::error::echo(w)));
    }
    out.push_str("\n# roots served:\n");
    for r in ferret.workspace().roots() {
        out.push_str(&format!("#   {} = {}\n", r.name, r.canonical.display()));
    }
    print_text(&out)?;
    Ok(0)
}

pub fn tools(format: Format) -> anyhow::Result<i32> {
    let format = match format {
        Format::Mcp => SchemaFormat::Mcp,
        Format::Openai => SchemaFormat::Openai,
        Format::Anthropic => SchemaFormat::Anthropic,
    };
    print_json(&crate::tools::standard().export(format))?;
    Ok(0)
}

#[derive(Serialize)]
struct ErrorShown<'a> {
    error: &'a ToolError,
}

/// `ferret call TOOL JSON`: the same JSON path as the MCP server. Exit 0, or 1 on a tool
/// error (printed as `{"error": …}`).
/// `ferret call`: one tool by name with JSON arguments, its result as an MCP client gets
/// it (structured JSON, or `--text`), held to `max_output_chars` (see
/// `call_output_chars`: a server's budget unless set or lifted).
pub fn call(
    ferret: &Ferret,
    session: &Session,
    a: CallArgs,
    max_output_chars: Option<u64>,
) -> anyhow::Result<i32> {
    let raw = if a.json == "-" {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s)?;
        s
    } else {
        a.json
    };
    let args: serde_json::Value = serde_json::from_str(&raw)
        .map_err(|e| anyhow::anyhow!("the arguments are not valid JSON: {e}"))?;
    if !args.is_object() {
        anyhow::bail!("the arguments must be a JSON object, like '{{\"path\":\"a.txt\"}}'");
    }
    let opts = CallOptions {
        max_output_chars,
        ..CallOptions::default()
    };
    let result = ferret.call(session, &a.tool, args, opts);
    match (&result, a.text) {
        (Ok(out), true) => print_text(&out.text)?,
        (Ok(out), false) => print_json(&out.structured)?,
        (Err(e), true) => print_text(&e.render())?,
        (Err(e), false) => print_json(&ErrorShown { error: e })?,
    }
    Ok(if result.is_ok() { 0 } else { 1 })
}

#[derive(Serialize)]
struct IndexShown {
    /// Where the index file is (or would be).
    path: Option<PathBuf>,
    /// Whether searches can use it.
    usable: bool,
    /// Why not, when not.
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    files: u64,
    trigrams: u64,
    disk_bytes: u64,
    /// Seconds since it was written.
    #[serde(skip_serializing_if = "Option::is_none")]
    age_secs: Option<u64>,
    /// Why the index file before this one was discarded (a checksum mismatch, bounds),
    /// when a damaged file was thrown away and rebuilt.
    #[serde(skip_serializing_if = "Option::is_none")]
    discarded: Option<String>,
    /// Bytes of the content indexed (the sizes of the files stored).
    #[serde(skip_serializing_if = "Option::is_none")]
    indexed_bytes: Option<u64>,
    /// `ferret index` only: how long the build or refresh took.
    #[serde(skip_serializing_if = "Option::is_none")]
    took_secs: Option<f64>,
    /// `ferret index` only: files listed but not indexed (read by every search: not
    /// readable, too dense to index, or past the memory for postings).
    #[serde(skip_serializing_if = "Option::is_none")]
    unindexed: Option<u64>,
}

/// `ferret index [status]`: builds or refreshes the stored index (re-reading only files
/// whose stamp changed), or says what it holds. Exit 1 from `status` when there is no
/// usable index.
pub fn index(
    ferret: &Ferret,
    cancel: crate::CancelToken,
    a: super::args::IndexArgs,
) -> anyhow::Result<i32> {
    use crate::search::store::{Mapped, Unusable};
    let status = a.action == Some(super::args::IndexAction::Status);
    let mut shown = IndexShown {
        path: None,
        usable: false,
        reason: None,
        files: 0,
        trigrams: 0,
        disk_bytes: 0,
        age_secs: None,
        discarded: None,
        took_secs: None,
        indexed_bytes: None,
        unindexed: None,
    };
    if !status {
        if !a.json {
            eprintln!("ferret: indexing (only files changed since the last index are read)…");
        }
        let started = std::time::Instant::now();
        let stats = ferret
            .build_index(cancel, false)
            .map_err(|e| anyhow::anyhow!(e.render()))?;
        shown.unindexed = Some(stats.files.saturating_sub(stats.indexed)).filter(|&n| n > 0);
        ferret
            .save_index()
            .map_err(|e| anyhow::anyhow!("the index was built but not saved: {e}"))?;
        shown.took_secs = Some((started.elapsed().as_secs_f64() * 10.0).round() / 10.0);
    }
    let persist = ferret.index_persist(false);
    shown.path = persist.as_ref().map(|p| p.path.clone());
    match persist
        .as_ref()
        .map(|p| Mapped::open(&p.path, &p.fingerprint))
    {
        None => shown.reason = Some("no state directory outside the roots".into()),
        Some(Err(Unusable::Missing)) => {
            shown.reason = Some("no index yet: run `ferret index`".into())
        }
        Some(Err(Unusable::Damaged(why))) => {
            // Nothing that only reads (status, a search) discards it: it stays on disk,
            // unused, until a build replaces it.
            shown.reason = Some(format!(
                "the index file is damaged ({why}); searches do not use it (they walk the tree), and it stays \
                 on disk until `ferret index` discards it and builds anew"
            ))
        }
        Some(Err(e)) => shown.reason = Some(format!("{e}: `ferret index` rebuilds it")),
        Some(Ok(m)) => {
            shown.usable = true;
            shown.discarded = persist.as_ref().and_then(|p| p.discarded());
            shown.files = u64::from(m.files);
            shown.trigrams = m.len() as u64;
            shown.disk_bytes = m.bytes();
            shown.indexed_bytes = m
                .files()
                .map(|f| f.iter().filter_map(|l| l.stamp()).map(|s| s.size()).sum());
            shown.age_secs = shown
                .path
                .as_ref()
                .and_then(|p| std::fs::metadata(p).ok())
                .and_then(|md| md.modified().ok())
                .and_then(|t| t.elapsed().ok())
                .map(|d| d.as_secs());
        }
    }
    if a.json {
        print_json(&shown)?;
    } else {
        let at = shown
            .path
            .as_ref()
            .map_or(String::new(), |p| format!(" at {}", p.display()));
        let text = match &shown.reason {
            Some(why) => format!("No usable index{at}: {why}."),
            None => {
                let mut t = format!("Index{at}: {} files", shown.files);
                if let Some(bytes) = shown.indexed_bytes {
                    t.push_str(&format!(" ({:.1} MB of content)", bytes as f64 / 1e6));
                }
                t.push_str(&format!(
                    ", {} trigrams, {:.1} MB on disk",
                    shown.trigrams,
                    shown.disk_bytes as f64 / 1e6
                ));
                if let Some(age) = shown.age_secs {
                    t.push_str(&format!(", written {age} s ago"));
                }
                if let Some(took) = shown.took_secs {
                    t.push_str(&format!("; refreshed in {took:.1} s"));
                }
                if let Some(n) = shown.unindexed {
                    t.push_str(&format!(
                        "; {n} more files are read by every search (not readable, or text too dense to index, \
or past the memory the index may hold before it is saved)"
                    ));
                }
                if let Some(why) = &shown.discarded {
                    t.push_str(&format!(
                        "; the index file before it was damaged and discarded: {why}; rebuilt"
                    ));
                }
                t + "."
            }
        };
        print_text(&text)?;
    }
    Ok(if shown.usable { 0 } else { 1 })
}

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

pub fn history(ferret: &Ferret, json: bool) -> anyhow::Result<i32> {
    let entries = ferret
        .history()
        .and_then(|h| h.entries())
        .map_err(|e| anyhow::anyhow!(e.render()))?;
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
    for e in &entries {
        let what = match e.undoes {
            Some(id) => format!("undo of {id}"),
            None if undone.contains(&e.id) => format!("{} (undone)", e.action.as_str()),
            None if e.pending => format!("{} (under way)", e.action.as_str()),
            None if e.action == crate::history::Action::Edit && !e.undoable() => {
                "edit (not undoable: backups were off)".to_string()
            }
            None => e.action.as_str().to_string(),
        };
        out.push_str(&format!(
            "{:>4}  {}  {:<16} {}\n",
            e.id, e.timestamp, what, e.path
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
pub fn call(ferret: &Ferret, session: &Session, a: CallArgs) -> anyhow::Result<i32> {
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
    let result = ferret.call(session, &a.tool, args, CallOptions::default());
    match (&result, a.text) {
        (Ok(out), true) => print_text(&out.text)?,
        (Ok(out), false) => print_json(&out.structured)?,
        (Err(e), true) => print_text(&e.render())?,
        (Err(e), false) => print_json(&ErrorShown { error: e })?,
    }
    Ok(if result.is_ok() { 0 } else { 1 })
}

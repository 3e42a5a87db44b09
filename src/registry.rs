//! The tool registry: the tools a front end serves, looked up by name, exported as
//! MCP, OpenAI or Anthropic tool definitions. It knows no tool by name (the list is
//! `tools::standard`) and no front end.

use crate::tool::DynTool;
use serde_json::{Value, json};
use std::sync::Arc;

/// The set of tools a front end serves.
#[derive(Clone, Default)]
pub struct Registry {
    tools: Vec<Arc<dyn DynTool>>,
}

impl Registry {
    pub fn empty() -> Self {
        Self::default()
    }

    pub fn register(&mut self, tool: impl DynTool + 'static) {
        self.tools.push(Arc::new(tool));
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn DynTool>> {
        self.tools.iter().find(|t| t.meta().name == name)
    }

    pub fn tools(&self) -> impl Iterator<Item = &Arc<dyn DynTool>> {
        self.tools.iter()
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.tools.iter().map(|t| t.meta().name).collect()
    }

    /// The definitions in one of the function-calling shapes.
    pub fn export(&self, format: SchemaFormat) -> Value {
        Value::Array(
            self.tools
                .iter()
                .map(|t| export_one(t.as_ref(), format))
                .collect(),
        )
    }
}

/// Which API's tool-definition shape to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaFormat {
    /// MCP `tools/list` entries, with output schemas and annotations.
    Mcp,
    /// OpenAI Chat Completions `tools` entries.
    Openai,
    /// Anthropic Messages API `tools` entries.
    Anthropic,
}

fn export_one(t: &dyn DynTool, format: SchemaFormat) -> Value {
    let m = t.meta();
    match format {
        SchemaFormat::Mcp => json!({
            "name": m.name,
            "title": m.title,
            "description": m.description,
            "inputSchema": t.input_schema(),
            "outputSchema": t.output_schema(),
            "annotations": annotations(m.annotations),
        }),
        SchemaFormat::Openai => json!({
            "type": "function",
            "function": {
                "name": m.name,
                "description": m.description,
                "parameters": t.input_schema(),
            },
        }),
        SchemaFormat::Anthropic => json!({
            "name": m.name,
            "description": m.description,
            "input_schema": t.input_schema(),
        }),
    }
}

/// MCP annotations, only where they differ from the spec's defaults (not read-only,
/// destructive, not idempotent, open world): the title is the tool's own, and
/// `destructiveHint`/`idempotentHint` mean something only when `readOnlyHint` is false.
fn annotations(a: crate::tool::Annotations) -> Value {
    let mut v = json!({});
    if a.read_only {
        v["readOnlyHint"] = json!(true);
    } else {
        if !a.destructive {
            v["destructiveHint"] = json!(false);
        }
        if a.idempotent {
            v["idempotentHint"] = json!(true);
        }
    }
    v["openWorldHint"] = json!(false);
    v
}

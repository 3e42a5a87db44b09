//! The tool registry: every tool defined once, every front end driven from here.
//!
//! A tool implements [`Tool`] — typed params and output, a run function and a text
//! renderer. The registry erases the types ([`DynTool`]) so a front end deals only in
//! JSON: `ferret call`, `ferret tools`, the MCP server and the shell all go through
//! [`Registry`], never through a tool directly.

use crate::context::Ctx;
use crate::error::{ErrorCode, ToolError, ToolResult};
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::sync::Arc;

/// Behaviour hints, as MCP annotations describe them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Annotations {
    /// Never changes anything.
    pub read_only: bool,
    /// May destroy data (even if recoverable through undo).
    pub destructive: bool,
    /// Calling twice with the same arguments has no further effect.
    pub idempotent: bool,
    /// Only available when writes are enabled.
    pub needs_write: bool,
}

impl Annotations {
    pub const READ_ONLY: Annotations = Annotations {
        read_only: true,
        destructive: false,
        idempotent: true,
        needs_write: false,
    };

    /// A tool that changes files: destructive (if undoable), not idempotent, writes on.
    pub const WRITE: Annotations = Annotations {
        read_only: false,
        destructive: true,
        idempotent: false,
        needs_write: true,
    };
}

/// Name and description of a tool, written for the model that will choose it.
#[derive(Debug, Clone, Copy)]
pub struct ToolMeta {
    pub name: &'static str,
    pub title: &'static str,
    /// When to use the tool and what it returns.
    pub description: &'static str,
    pub annotations: Annotations,
}

/// A tool, defined once.
pub trait Tool: Send + Sync + 'static {
    type Params: DeserializeOwned + JsonSchema;
    type Output: Serialize + JsonSchema;

    fn meta(&self) -> ToolMeta;

    /// Does the work. Synchronous: the front end decides which thread runs it.
    fn run(&self, ctx: &Ctx, params: Self::Params) -> ToolResult<Self::Output>;

    /// The text a model or a person reads.
    fn render(&self, output: &Self::Output) -> String;
}

/// What a successful call gives a front end: the structured result and its rendering.
#[derive(Debug, Clone, PartialEq)]
pub struct CallOutput {
    pub structured: Value,
    pub text: String,
}

/// A [`Tool`] with its types erased.
pub trait DynTool: Send + Sync {
    fn meta(&self) -> ToolMeta;
    fn input_schema(&self) -> Value;
    fn output_schema(&self) -> Value;
    fn call(&self, ctx: &Ctx, args: Value) -> ToolResult<CallOutput>;
}

impl<T: Tool> DynTool for T {
    fn meta(&self) -> ToolMeta {
        Tool::meta(self)
    }

    fn input_schema(&self) -> Value {
        schema_for::<T::Params>()
    }

    fn output_schema(&self) -> Value {
        schema_for::<T::Output>()
    }

    fn call(&self, ctx: &Ctx, args: Value) -> ToolResult<CallOutput> {
        let args = if args.is_null() { json!({}) } else { args };
        let params: T::Params = serde_json::from_value(args).map_err(|e| {
            ToolError::invalid(format!(
                "invalid arguments for {}: {e}",
                Tool::meta(self).name
            ))
            .with_hint("see the tool's input schema (`ferret tools`)")
        })?;
        let out = self.run(ctx, params)?;
        let text = self.render(&out);
        let structured = serde_json::to_value(&out).map_err(|e| {
            ToolError::new(
                ErrorCode::IoError,
                format!("cannot serialize the result: {e}"),
            )
        })?;
        Ok(CallOutput { structured, text })
    }
}

/// A JSON Schema (draft 2020-12) with every subschema inlined, which function-calling
/// APIs accept more readily than `$ref`s.
pub fn schema_for<T: JsonSchema>() -> Value {
    let mut settings = schemars::generate::SchemaSettings::draft2020_12();
    settings.inline_subschemas = true;
    let schema = settings.into_generator().into_root_schema_for::<T>();
    let mut v = serde_json::to_value(schema).unwrap_or_else(|_| json!({"type": "object"}));
    if let Some(obj) = v.as_object_mut() {
        obj.remove("$schema");
        obj.remove("title");
    }
    v
}

/// The set of tools a front end serves.
#[derive(Clone, Default)]
pub struct Registry {
    tools: Vec<Arc<dyn DynTool>>,
}

impl Registry {
    pub fn empty() -> Self {
        Self::default()
    }

    /// Every tool ferret has.
    pub fn standard() -> Self {
        let mut r = Registry::empty();
        crate::tools::register_all(&mut r);
        r
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
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
            "annotations": {
                "title": m.title,
                "readOnlyHint": m.annotations.read_only,
                "destructiveHint": m.annotations.destructive,
                "idempotentHint": m.annotations.idempotent,
                "openWorldHint": false,
            },
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

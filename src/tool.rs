//! A tool, defined once: the [`Tool`] trait (typed params and output, a run function, a
//! text renderer), its type-erased form [`DynTool`], and [`Ctx`], everything a tool's
//! `run` may touch — the sandboxed workspace, the configuration, the limiter, the
//! history, the call's [`Control`] — and nothing above it: a tool cannot see the
//! registry, the call path or a front end.

use crate::config::Config;
use crate::control::{CancelToken, Control, Progress};
use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::history::{History, HistoryCell};
use crate::limits::{Limits, ResourceLimiter};
use crate::search::SearchEnv;
use crate::workspace::{Workspace, WsPath};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

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
    /// Listed by the MCP server when the `tools` setting is left empty. The seed-shaped
    /// search tools (`search_files`, `file_search`) overlap `grep` and are not.
    pub served_by_default: bool,
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

    /// What the result carries besides text (an image a model can see): sent over MCP
    /// as content blocks after the text; the CLI and the shell print only the text.
    fn media(&self, _output: &Self::Output) -> Vec<Media> {
        Vec::new()
    }
}

/// A content block of a result that is not text: `data` is base64, `mime_type` its type
/// (`image/png`).
#[derive(Debug, Clone, PartialEq)]
pub struct Media {
    pub mime_type: String,
    pub data: String,
    /// Memory taken from the shared budget for the block's bytes: given back when the
    /// last copy of this is dropped (after the front end has built its answer).
    pub held: Held,
}

/// A share of the shared memory budget kept alive with what it pays for; compares
/// equal to any other (it is not part of the value).
#[derive(Clone, Default)]
pub struct Held(pub Option<Arc<crate::search::cost::Permit<'static>>>);

impl PartialEq for Held {
    fn eq(&self, _: &Held) -> bool {
        true
    }
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Held(..)"
        } else {
            "Held(none)"
        })
    }
}

/// What a successful call gives a front end: the structured result, its rendering, and
/// any media (images) that go with it.
#[derive(Debug, Clone, PartialEq)]
pub struct CallOutput {
    pub structured: Value,
    pub text: String,
    pub media: Vec<Media>,
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
        let mut v = schema_for::<T::Params>();
        lenient(&mut v);
        v
    }

    fn output_schema(&self) -> Value {
        let mut v = schema_for::<T::Output>();
        compact(&mut v);
        v
    }

    fn call(&self, ctx: &Ctx, args: Value) -> ToolResult<CallOutput> {
        let mut args = if args.is_null() { json!({}) } else { args };
        let name = Tool::meta(self).name;
        // Read in place (no copy of a megabyte `content`); only a failed read pays for
        // the schema, to turn "5" into 5 and "true" into true as the schema allows.
        let params = match T::Params::deserialize(&args) {
            Ok(p) => p,
            Err(_) => {
                let strict = schema_for::<T::Params>();
                coerce(&mut args, &strict, "")?;
                T::Params::deserialize(&args).map_err(|e| bad_arguments(name, &e, &strict))?
            }
        };
        // The params hold their own copy: a megabyte `content` is not kept twice while
        // the call runs (or waits for memory or a file's lock).
        drop(args);
        let out = self.run(ctx, params)?;
        let text = fit_text(self.render(&out), ctx.output_budget());
        let media = self.media(&out);
        let structured = serde_json::to_value(&out).map_err(|e| {
            ToolError::new(
                ErrorCode::IoError,
                format!("cannot serialize the result: {e}"),
            )
        })?;
        let structured = fit_structured(structured, ctx.output_budget());
        Ok(CallOutput {
            structured,
            text,
            media,
        })
    }
}

/// The last guard on a result's size: text over `budget` characters is cut at the last
/// line that fits, with a marker saying how much was left out and what to ask for
/// instead. Tools step down on their own first (fewer lines, with exact counts of what
/// they left out); this only catches what they could not.
pub fn fit_text(text: String, budget: Option<usize>) -> String {
    let Some(budget) = budget else { return text };
    if text.len() <= budget {
        return text;
    }
    const MARKER_ROOM: usize = 200;
    let mut cut = budget.saturating_sub(MARKER_ROOM).min(text.len());
    while cut > 0 && !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let cut = text[..cut].rfind('\n').map_or(cut, |i| i + 1);
    let left = text.len() - cut;
    let lines_left = text[cut..].lines().count();
    let mut out = text[..cut].to_string();
    out.push_str(&format!(
        "[output cut: {lines_left} more lines ({left} characters) left out, over max_output_chars ({budget}); ask for less: a narrower path or glob, offset and limit, or max_results]\n"
    ));
    out
}

/// [`fit_text`] for the structured result, which goes on the wire beside the text: when
/// its JSON is over `budget` bytes, the largest arrays lose entries from their end (a
/// prefix of the results stays, in order) and the longest strings are cut, until it
/// fits; a top-level `truncated` flag is then set. The shape stays the one the output
/// schema gives, and totals (`count`, `file_count`) stay true.
pub fn fit_structured(mut v: Value, budget: Option<usize>) -> Value {
    let Some(budget) = budget else { return v };
    let budget = budget as u64;
    // The engine that answered (`index` or `scan`) must not move the cut: the same
    // question gets the same entries from either. It is measured at its longest.
    let engine = v
        .get_mut("engine")
        .map(|e| std::mem::replace(e, Value::String("index".into())));
    let mut v = fit_structured_measured(v, budget);
    if let (Some(e), Some(slot)) = (engine, v.get_mut("engine")) {
        *slot = e;
    }
    v
}

fn fit_structured_measured(mut v: Value, budget: u64) -> Value {
    let mut size = json_len(&v);
    if size <= budget {
        return v;
    }
    // Each pass empties or shortens the largest part; a bounded number of passes.
    for _ in 0..256 {
        if size <= budget {
            break;
        }
        let Some(at) = largest(&v, String::new()).map(|(p, _)| p) else {
            break;
        };
        let Some(part) = v.pointer_mut(&at) else {
            break;
        };
        match part {
            Value::Array(items) => {
                while size > budget && items.len() > 1 {
                    let Some(last) = items.pop() else { break };
                    size = size.saturating_sub(json_len(&last) + 1);
                }
            }
            Value::String(text) => {
                let over = usize::try_from(size - budget).unwrap_or(usize::MAX);
                let mut keep = text.len().saturating_sub(over.saturating_add(8));
                while keep > 0 && !text.is_char_boundary(keep) {
                    keep -= 1;
                }
                text.truncate(keep);
                text.push('…');
            }
            _ => break,
        }
        size = json_len(&v);
    }
    if let Some(Value::Bool(t)) = v.get_mut("truncated") {
        *t = true;
    }
    v
}

/// The JSON pointer and size of the largest array of two or more entries, or string of
/// over 64 bytes, in `v`: the part to shrink first.
fn largest(v: &Value, at: String) -> Option<(String, u64)> {
    let mut best: Option<(String, u64)> = None;
    let mut consider = |c: Option<(String, u64)>| {
        if let Some(c) = c
            && best.as_ref().is_none_or(|b| c.1 > b.1)
        {
            best = Some(c);
        }
    };
    match v {
        Value::Array(items) => {
            // An array of one is shrunk inside (a single file's lines), not emptied.
            if items.len() > 1 {
                consider(Some((at.clone(), json_len(v))));
            }
            for (i, x) in items.iter().enumerate() {
                consider(largest(x, format!("{at}/{i}")));
            }
        }
        Value::String(s) if s.len() > 64 => consider(Some((at, json_len(v)))),
        Value::Object(map) => {
            for (k, x) in map {
                let k = k.replace('~', "~0").replace('/', "~1");
                consider(largest(x, format!("{at}/{k}")));
            }
        }
        _ => {}
    }
    best
}

/// The length of `v` serialized as compact JSON, counted without building the string.
pub fn json_len(v: &Value) -> u64 {
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len() as u64;
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

/// The length of `s` as a JSON string on the wire (quotes left out): a control
/// character is written `\u001b`, six bytes for one, so a text of escape characters
/// costs six times its length; `"` and `\` two.
pub fn json_str_len(s: &str) -> u64 {
    let escapes: u64 = s
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 1,
            0..=0x1f => 5,
            _ => 0,
        })
        .sum();
    s.len() as u64 + escapes
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
    portable(&mut v);
    v
}

/// JSON Schema `format`s every validator knows (draft 2020-12's list).
const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Makes a schema portable to strict validators and to function-calling dialects that
/// take a subset (Gemini's OpenAPI subset): one type per schema (an optional field is
/// omitted when absent, never null, so `["integer","null"]` becomes `integer` and an
/// `anyOf` with a null branch becomes the other branch), and only standard `format`s
/// (schemars' `uint64` and friends go; `minimum: 0` already says unsigned).
fn portable(v: &mut Value) {
    match v {
        Value::Object(map) => {
            if let Some(Value::Array(types)) = map.get("type") {
                let non_null: Vec<Value> = types
                    .iter()
                    .filter(|t| t.as_str() != Some("null"))
                    .cloned()
                    .collect();
                if non_null.len() == 1 {
                    map.insert("type".into(), non_null[0].clone());
                }
            }
            // An optional enum's null goes with its null type.
            if map.get("type").is_some_and(|t| t != "null")
                && let Some(Value::Array(values)) = map.get_mut("enum")
            {
                values.retain(|x| !x.is_null());
            }
            for key in ["anyOf", "oneOf"] {
                if let Some(Value::Array(branches)) = map.get(key) {
                    let non_null: Vec<Value> = branches
                        .iter()
                        .filter(|b| b.get("type").and_then(Value::as_str) != Some("null"))
                        .cloned()
                        .collect();
                    if non_null.len() == 1 && non_null.len() < branches.len() {
                        map.remove(key);
                        if let Value::Object(inner) = &non_null[0] {
                            for (k, val) in inner {
                                map.entry(k.clone()).or_insert_with(|| val.clone());
                            }
                        }
                    } else if non_null.len() < branches.len() {
                        map.insert(key.into(), Value::Array(non_null));
                    }
                }
            }
            // `Option<T>` fields come out of schemars with `"default": null`: absent is
            // the default, and null is not a value ferret takes.
            if map.get("default").is_some_and(Value::is_null) {
                map.remove("default");
            }
            if map
                .get("format")
                .and_then(Value::as_str)
                .is_some_and(|f| !STANDARD_FORMATS.contains(&f))
            {
                map.remove("format");
            }
            for val in map.values_mut() {
                portable(val);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(portable),
        _ => {}
    }
}

/// JSON Schema keywords whose value is a map from names to subschemas (the names are
/// not keywords: a property may be called `description`).
const NAMED_SUBSCHEMAS: &[&str] = &["properties", "$defs", "definitions", "patternProperties"];

/// Applies `f` to every subschema in `v` and to `v`, keyword by keyword.
fn each_schema(v: &mut Value, f: &mut dyn FnMut(&mut serde_json::Map<String, Value>)) {
    match v {
        Value::Object(map) => {
            // Children first: what `f` adds to a schema is not walked again.
            for (k, x) in map.iter_mut() {
                if NAMED_SUBSCHEMAS.contains(&k.as_str()) {
                    if let Value::Object(named) = x {
                        named.values_mut().for_each(|s| each_schema(s, f));
                    }
                } else if matches!(x, Value::Object(_) | Value::Array(_)) {
                    each_schema(x, f);
                }
            }
            f(map);
        }
        Value::Array(items) => items.iter_mut().for_each(|x| each_schema(x, f)),
        _ => {}
    }
}

/// The pattern a number given as a string must match (`"5"`, `"-3"`).
const INTEGER_TEXT: &str = r"^-?\d+$";
const UNSIGNED_TEXT: &str = r"^\d+$";
const NUMBER_TEXT: &str = r"^-?\d+(\.\d+)?$";

/// An input schema that says what ferret accepts: models often send numbers as strings
/// (`"offset": "5"`) and booleans as `"true"`, and [`DynTool::call`] takes both, so every
/// integer and number becomes `anyOf` the typed value and its digits (one type per branch,
/// which strict validators and Gemini's subset take), and every boolean the `enum`
/// `[true, false, "true", "false"]`. Defaults that go without saying (false, 0) go.
pub fn lenient(v: &mut Value) {
    each_schema(v, &mut |map| {
        one_enum(map);
        // A boolean is false and a count 0 unless given: saying so is noise.
        if matches!(map.get("default"), Some(d) if d == &json!(false) || d == &json!(0) || d == &json!([]))
        {
            map.remove("default");
        }
        let unsigned = map
            .get("minimum")
            .and_then(Value::as_f64)
            .is_some_and(|m| m >= 0.0);
        let text = match map.get("type").and_then(Value::as_str) {
            Some("integer") if unsigned => json!({"type": "string", "pattern": UNSIGNED_TEXT}),
            Some("integer") => json!({"type": "string", "pattern": INTEGER_TEXT}),
            Some("number") => json!({"type": "string", "pattern": NUMBER_TEXT}),
            Some("boolean") => {
                // Four values say it in half the characters of two typed branches.
                map.remove("type");
                map.insert("enum".into(), json!([true, false, "true", "false"]));
                return;
            }
            _ => return,
        };
        // An unsigned count's `minimum: 0` goes: the digits branch already says it, and a
        // negative number is refused by the tool with a hint (12 of these cost the
        // default tools 144 characters a session).
        if unsigned && map.get("minimum").and_then(Value::as_f64) == Some(0.0) {
            map.remove("minimum");
        }
        let mut typed = serde_json::Map::new();
        for k in [
            "type",
            "minimum",
            "maximum",
            "exclusiveMinimum",
            "exclusiveMaximum",
        ] {
            if let Some(x) = map.remove(k) {
                typed.insert(k.into(), x);
            }
        }
        map.insert("anyOf".into(), json!([typed, text]));
    });
}

/// An output schema as small as it can be and still validate every result: programs
/// read it, not the model, so descriptions go (the field names say it), and a choice of
/// constant strings is one `enum`.
pub fn compact(v: &mut Value) {
    shallow(v, 0);
    each_schema(v, &mut |map| {
        map.remove("description");
        // Which fields every result has is the tool's documentation; a schema without
        // `required` still holds every result, and is a fifth smaller.
        map.remove("required");
        // Unsigned types say `minimum: 0`; a result never needs telling.
        if map.get("minimum").and_then(Value::as_f64) == Some(0.0) {
            map.remove("minimum");
        }
        one_enum(map);
        // A long list of codes (every ErrorCode) is documentation, not a check a
        // program needs: a string.
        if map
            .get("enum")
            .and_then(Value::as_array)
            .is_some_and(|e| e.len() > 12)
        {
            map.remove("enum");
        }
        // An enum of strings says its type.
        if map
            .get("enum")
            .and_then(Value::as_array)
            .is_some_and(|e| e.iter().all(Value::is_string))
            && map.get("type").and_then(Value::as_str) == Some("string")
        {
            map.remove("type");
        }
    });
}

/// How many levels of named fields an output schema spells out: a result's fields and
/// the fields of its lists' entries (a match's `path`, `count`, `lines`). Below that a
/// value is typed (`array`, `object`) and no more; a program that needs the inner shape
/// reads the documentation, and every session does not pay for it.
const OUTPUT_DEPTH: usize = 1;

fn shallow(v: &mut Value, depth: usize) {
    let Value::Object(map) = v else { return };
    let nested = |m: &serde_json::Map<String, Value>| {
        ["object", "array"].contains(&m.get("type").and_then(Value::as_str).unwrap_or(""))
    };
    if depth >= OUTPUT_DEPTH && nested(map) {
        map.retain(|k, _| k == "type");
        return;
    }
    if let Some(Value::Object(props)) = map.get_mut("properties") {
        props.values_mut().for_each(|p| shallow(p, depth + 1));
    }
    for key in ["items", "additionalProperties"] {
        if let Some(x @ Value::Object(_)) = map.get_mut(key) {
            shallow(x, depth);
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(branches)) = map.get_mut(key) {
            branches.iter_mut().for_each(|b| shallow(b, depth));
        }
    }
}

/// A choice of constant strings (`oneOf` of `const`s, as schemars writes an enum with
/// documented variants) as one `enum`: the field's own description says what they mean.
fn one_enum(map: &mut serde_json::Map<String, Value>) {
    for key in ["oneOf", "anyOf"] {
        let Some(Value::Array(branches)) = map.get(key) else {
            continue;
        };
        let mut values = Vec::new();
        for b in branches {
            match (b.get("const"), b.get("enum").and_then(Value::as_array)) {
                (Some(c), _) => values.push(c.clone()),
                (None, Some(e)) => values.extend(e.iter().cloned()),
                _ => return,
            }
            if b.get("type").and_then(Value::as_str) != Some("string") {
                return;
            }
        }
        map.remove(key);
        map.insert("type".into(), json!("string"));
        map.insert("enum".into(), Value::Array(values));
    }
}

/// Turns the numbers and booleans given as text in `args` into values, as the strict
/// `schema` types them; text that is not one is an `INVALID_ARGUMENT` naming the field.
fn coerce(args: &mut Value, schema: &Value, at: &str) -> ToolResult<()> {
    match args {
        Value::Object(fields) => {
            let Some(props) = schema.get("properties").and_then(Value::as_object) else {
                return Ok(());
            };
            for (k, x) in fields.iter_mut() {
                if let Some(s) = props.get(k) {
                    let at = if at.is_empty() {
                        k.clone()
                    } else {
                        format!("{at}.{k}")
                    };
                    coerce(x, s, &at)?;
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for (i, x) in items.iter_mut().enumerate() {
                    coerce(x, s, &format!("{at}[{i}]"))?;
                }
            }
        }
        Value::String(text) => {
            let t = text.trim();
            let wrong = |what: &str, example: &str| {
                ToolError::invalid(format!(
                    "`{at}` must be {what}, not {}",
                    Value::String(t.chars().take(40).collect())
                ))
                .with_hint(format!(
                    "give `{at}` {example} (a JSON value, or the same as a string)"
                ))
            };
            match schema.get("type").and_then(Value::as_str) {
                Some("integer") => {
                    *args = if let Ok(n) = t.parse::<u64>() {
                        json!(n)
                    } else if let Ok(n) = t.parse::<i64>() {
                        json!(n)
                    } else {
                        return Err(wrong("a whole number", "a number such as 5 or \"5\""));
                    };
                }
                Some("number") => {
                    match t.parse::<f64>().ok().and_then(serde_json::Number::from_f64) {
                        Some(n) => *args = Value::Number(n),
                        None => return Err(wrong("a number", "a number such as 5 or \"5\"")),
                    }
                }
                Some("boolean") => match t {
                    "true" => *args = json!(true),
                    "false" => *args = json!(false),
                    _ => return Err(wrong("true or false", "true or false")),
                },
                _ => {}
            }
        }
        _ => {}
    }
    Ok(())
}

/// Names models reach for that are not ferret's, with the parameter meant: an unknown
/// field is answered with the first of these the tool has (ripgrep's and Claude Code's
/// flags, seed 004's camelCase, another tool's name for the same thing).
const OTHER_NAMES: &[(&str, &str)] = &[
    ("-i", "ignore_case"),
    ("case_insensitive", "ignore_case"),
    ("-A", "context_after"),
    ("A", "context_after"),
    ("-B", "context_before"),
    ("B", "context_before"),
    ("-C", "context"),
    ("C", "context"),
    ("-n", "output_mode"),
    ("head_limit", "max_results"),
    ("limit", "max_lines_each"),
    ("limit", "max_results"),
    ("max_lines", "max_lines_each"),
    ("maxLines", "limit"),
    ("max_lines", "limit"),
    ("maxDepth", "max_depth"),
    ("includeHidden", "include_hidden"),
    ("hidden", "include_hidden"),
    ("file_path", "path"),
    ("filePath", "path"),
    ("paths", "path"),
    ("path", "paths"),
    ("query", "pattern"),
    ("regex", "pattern"),
    ("type", "glob"),
    ("include", "glob"),
    ("old_str", "old_string"),
    ("new_str", "new_string"),
    ("oldText", "old_string"),
    ("newText", "new_string"),
    ("text", "content"),
    ("source_path", "source"),
    ("destination_path", "destination"),
    ("dest", "destination"),
    ("recursive", "max_depth"),
];

/// `INVALID_ARGUMENT` for arguments the tool cannot take, its hint naming the parameter
/// meant when the mistake is a known other name.
fn bad_arguments(tool: &str, e: &serde_json::Error, strict: &Value) -> ToolError {
    let msg = e.to_string();
    let has = |p: &str| strict.pointer(&format!("/properties/{p}")).is_some();
    let unknown = msg
        .strip_prefix("unknown field `")
        .and_then(|r| r.split('`').next());
    let params: Vec<&str> = strict
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().map(String::as_str).collect())
        .unwrap_or_default();
    // What the caller sent is echoed cut short and quoted: a 60 000-character name, or
    // one holding a newline and "Hint:", must not fill the answer or forge its lines.
    let quoted = |s: &str| format!("{:?}", s.chars().take(64).collect::<String>());
    let (msg, hint) = match unknown {
        Some(field) => (
            format!("unknown parameter {}", quoted(field)),
            match OTHER_NAMES
                .iter()
                .find(|(o, ours)| *o == field && has(ours))
            {
                Some((_, ours)) => {
                    format!(
                        "{tool} calls it `{ours}`: send `{ours}` instead of {}",
                        quoted(field)
                    )
                }
                None => format!("{tool} takes: {}", params.join(", ")),
            },
        ),
        None => {
            let head = msg
                .split_once(", expected one of")
                .map_or(msg.as_str(), |(h, _)| h);
            let head: String = head
                .chars()
                .take(300)
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect();
            (
                head,
                format!("{tool} takes: {} (see its input schema)", params.join(", ")),
            )
        }
    };
    ToolError::invalid(format!("invalid arguments for {tool}: {msg}")).with_hint(hint)
}

/// How a change that needs the user's yes gets it, from an agent's side.
const CONFIRM_HINT: &str = "ask the user, then retry: a client that can ask them (MCP elicitation) is asked by ferret \
     itself, so this one cannot, or they said no. Else the user runs it with --yes on the command line (`ferret edit`, \
     `ferret write`, `ferret mv`, `ferret rm`, `ferret undo`). Which paths ask is the `confirm` setting";

/// Who is calling: the session (one MCP connection, one CLI run) and the agent's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// This session: an MCP connection or session, or a CLI/shell run. Undo ownership and
    /// the audit record follow it.
    pub id: String,
    pub agent_id: String,
    /// What budgets are charged to: the session itself, except over HTTP, where it is the
    /// principal the server established (token or peer), so that a client cannot buy a
    /// fresh budget with a fresh session or name.
    pub budget: String,
    /// The front end: an agent's (MCP, the default) or the person's (CLI, shell). Undo
    /// without an id reverts only the caller's own changes, and that is decided by it.
    pub front: Front,
}

/// Which front end a session is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Front {
    /// An agent (MCP, or a host embedding ferret): its changes are its session's.
    Mcp,
    /// The person, at the command line or in the shell: one owner across runs.
    Cli,
    Shell,
}

impl Front {
    pub fn as_str(self) -> &'static str {
        match self {
            Front::Mcp => "mcp",
            Front::Cli => "cli",
            Front::Shell => "shell",
        }
    }
}

impl Session {
    /// An agent's session.
    pub fn new(id: impl Into<String>, agent_id: impl Into<String>) -> Self {
        let id = id.into();
        Session {
            budget: id.clone(),
            id,
            agent_id: agent_id.into(),
            front: Front::Mcp,
        }
    }

    /// The same session, its budgets charged to `key` (an HTTP principal).
    pub fn with_budget(mut self, key: impl Into<String>) -> Self {
        self.budget = key.into();
        self
    }

    /// The same session from another front end (`Front::Cli`, `Front::Shell`: the person).
    pub fn from_front(mut self, front: Front) -> Self {
        self.front = front;
        self
    }

    /// Who the journal records as making this session's changes.
    pub fn owner(&self) -> crate::history::Owner {
        crate::history::Owner {
            front: self.front.as_str().to_string(),
            session: self.id.clone(),
            agent: self.agent_id.clone(),
        }
    }
}

/// The shared services a call runs with, lent by whoever owns them (`Ferret`).
#[derive(Clone)]
pub struct Services<'a> {
    pub config: &'a Config,
    pub workspace: &'a Workspace,
    pub limiter: &'a ResourceLimiter,
    pub history: &'a HistoryCell,
    /// Contents recently read, by version (for stale-write refusals).
    pub seen: &'a crate::history::Seen,
    /// The live index, when one has been built.
    pub index: Option<Arc<crate::search::live::Live>>,
}

/// What a tool's `run` may touch.
pub struct Ctx<'a> {
    services: Services<'a>,
    session: &'a Session,
    control: Control,
    scope: Option<Arc<Vec<PathBuf>>>,
    confirmed: bool,
    /// What the questions of this call's first run were about ([`Ctx::pin`]), when this
    /// run is the one made after the person said yes.
    asked_pins: Option<Vec<u64>>,
    /// What this run's questions are about, in the order pinned.
    pins: Mutex<Vec<u64>>,
    /// Reasons to ask noted for one question ([`Ctx::note_question`]).
    noted: Mutex<Vec<String>>,
    bytes_read: AtomicU64,
    file_count: AtomicU64,
    path: Mutex<Option<String>>,
    paths: Mutex<Vec<String>>,
    engine: Mutex<Option<&'static str>>,
    /// `max_output_chars` for this call, in place of the configuration's.
    output_chars: Option<u64>,
    /// The front end's own cap on an image's bytes (HTTP's result size), if any.
    media_bytes: Option<u64>,
}

impl<'a> Ctx<'a> {
    /// A call's context. `scope` narrows the workspace to a client's roots; `confirmed`
    /// says the person at the front end confirmed destructive operations for this call;
    /// `audit_path` is what the audit record names until the tool says otherwise.
    pub fn new(
        services: Services<'a>,
        session: &'a Session,
        control: Control,
        scope: Option<Arc<Vec<PathBuf>>>,
        confirmed: bool,
        audit_path: Option<String>,
    ) -> Self {
        Ctx {
            services,
            session,
            control,
            scope,
            confirmed,
            asked_pins: None,
            pins: Mutex::new(Vec::new()),
            noted: Mutex::new(Vec::new()),
            bytes_read: AtomicU64::new(0),
            file_count: AtomicU64::new(0),
            path: Mutex::new(audit_path),
            paths: Mutex::new(Vec::new()),
            engine: Mutex::new(None),
            output_chars: None,
            media_bytes: None,
        }
    }

    /// The same, run again after the person answered yes to a question of a first run
    /// that saw `pins` ([`ToolError::pins`]).
    pub fn with_asked_pins(mut self, pins: Option<Vec<u64>>) -> Self {
        self.asked_pins = pins;
        self
    }

    /// The same with the front end's cap on an image's bytes (HTTP: what fits a result).
    pub fn with_media_bytes(mut self, bytes: Option<u64>) -> Self {
        self.media_bytes = bytes;
        self
    }

    /// The most bytes (as stored) of an image this call may send as an image:
    /// `max_image_bytes` (0: none), lowered to the front end's cap and to what one
    /// round's byte budget can carry as base64 (a bigger one could never be sent).
    /// `None`: no limit.
    pub fn image_budget(&self) -> Option<u64> {
        let config = self.services.config;
        let round = match config.max_bytes_per_round {
            0 => None,
            // Base64 is 4 bytes per 3; the rest of the answer is small.
            n => Some((n.saturating_sub(16_384)) / 4 * 3),
        };
        [
            (config.max_image_bytes > 0).then_some(config.max_image_bytes),
            self.media_bytes,
            round,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// The same with this call's own `max_output_chars` (0: no limit) in place of the
    /// configuration's, when `chars` is set (`ferret call` holds a result to the
    /// server's budget, or lifts it).
    pub fn with_output_chars(mut self, chars: Option<u64>) -> Self {
        self.output_chars = chars;
        self
    }

    pub fn workspace(&self) -> &'a Workspace {
        self.services.workspace
    }

    pub fn config(&self) -> &'a Config {
        self.services.config
    }

    /// The state directory, backups and undo journal (opened on first use).
    /// The most characters this call's result may hold (`max_output_chars`), if any.
    pub fn output_budget(&self) -> Option<usize> {
        match self
            .output_chars
            .unwrap_or(self.services.config.max_output_chars)
        {
            0 => None,
            n => Some(usize::try_from(n).unwrap_or(usize::MAX)),
        }
    }

    /// Contents this process has returned recently, by version.
    pub fn seen(&self) -> &'a crate::history::Seen {
        self.services.seen
    }

    /// The history, with a killed process's half-done changes settled first (when this
    /// process may write): for a call about to change something.
    pub fn history(&self) -> ToolResult<&'a History> {
        self.services
            .history
            .get(self.services.config, self.services.workspace)
    }

    /// The history as it is, settling nothing: for a dry run or a look, which must leave
    /// the workspace and the journal as they are.
    pub fn history_read(&self) -> ToolResult<&'a History> {
        self.services
            .history
            .open(self.services.config, self.services.workspace)
    }

    pub fn limits(&self) -> &'a Limits {
        self.services.limiter.limits()
    }

    pub fn session(&self) -> &'a Session {
        self.session
    }

    pub fn control(&self) -> &Control {
        &self.control
    }

    /// What the search engine needs of this call.
    pub fn search_env(&self) -> SearchEnv<'_> {
        SearchEnv {
            workspace: self.services.workspace,
            control: &self.control,
            max_file_size: self.services.config.search_max_file_size,
            max_columns: self.services.config.max_columns,
            index: self.services.index.as_deref(),
        }
    }

    /// Checks a path the agent gave (see [`Workspace::resolve`]) and, when the call is
    /// narrowed to a client's roots, that its real location lies inside one of them.
    pub fn resolve(&self, input: &str) -> ToolResult<WsPath> {
        let wp = self.workspace().resolve(input)?;
        self.check_scope(&wp, input)?;
        Ok(wp)
    }

    /// When the call is narrowed to a client's roots, that the real location of `wp`
    /// lies inside one of them (`shown` names it in the refusal). A name that does not
    /// exist yet is judged by where it would be made: its directories' links resolved
    /// (round 29: `pub/lnk/new.txt` with `lnk -> ../priv` was judged by its spelling, so
    /// files were made in the folder not shared, and an absent name there answered
    /// `NOT_FOUND` where a present one answered `PATH_ESCAPE`).
    pub fn check_scope(&self, wp: &WsPath, shown: &str) -> ToolResult<()> {
        let ws = self.workspace();
        let Some(scope) = &self.scope else {
            return Ok(());
        };
        let real = ws.entry(wp, true)?.real;
        let abs = ws.abs_path(&real);
        if scope.iter().any(|d| abs.starts_with(d)) {
            return Ok(());
        }
        let input = shown;
        let shared: Vec<String> = scope.iter().map(|d| d.display().to_string()).collect();
        Err(ToolError::new(
            ErrorCode::PathEscape,
            format!(
                "{} is outside the roots this client shared",
                crate::workspace::shown(input)
            ),
        )
        .with_hint(if shared.is_empty() {
            "the client shared no directory inside this workspace".to_string()
        } else {
            format!("use paths inside: {}", shared.join(", "))
        }))
    }

    /// Fails with `CONFIRMATION_REQUIRED` unless the user confirmed this call, or
    /// `allowed` (a setting that answers for them) is true.
    pub fn confirm(&self, what: &str, allowed: bool) -> ToolResult<()> {
        if self.confirmed || allowed {
            return Ok(());
        }
        let mut e = ToolError::new(
            ErrorCode::ConfirmationRequired,
            format!("{what} needs the user's confirmation"),
        )
        .with_hint(CONFIRM_HINT);
        e.pins = crate::error::lock(&self.pins).clone();
        Err(e)
    }

    /// Notes a reason to ask the user, asked with every other one noted by
    /// [`Ctx::ask_noted`]: one question naming them all. A change with several reasons
    /// found at several steps (an undo of another's change that also overwrites an
    /// outside edit, and restores a confirm-listed file) asked the first alone, and the
    /// yes let the others through unread (round 20).
    pub fn note_question(&self, what: String) {
        crate::error::lock(&self.noted).push(what);
    }

    /// Asks, in one question, every reason noted so far; nothing when none was.
    pub fn ask_noted(&self) -> ToolResult<()> {
        let noted = crate::error::lock(&self.noted).clone();
        if noted.is_empty() {
            return Ok(());
        }
        self.confirm(&noted.join("; "), false)
    }

    /// Pins what a question is about (`stamp`: a digest of a file's or a tree's state),
    /// before the question. The first run's pins travel with its `CONFIRMATION_REQUIRED`;
    /// the run made once the person says yes must pin the same, in the same order, or it
    /// is refused `CONFLICT`: what they approved is not what would change (an agent's own
    /// other call rewrote it while they read the question).
    pub fn pin(&self, what: &str, stamp: u64) -> ToolResult<()> {
        let mut pins = crate::error::lock(&self.pins);
        let i = pins.len();
        pins.push(stamp);
        match self.asked_pins.as_ref().and_then(|a| a.get(i)) {
            Some(&asked) if asked != stamp => Err(ToolError::new(
                ErrorCode::Conflict,
                format!(
                    "{} changed while the question about it waited for the user; nothing was changed",
                    crate::workspace::shown_in_prose(what)
                ),
            )
            .with_hint("call again: the user is then asked about what it holds now")),
            _ => Ok(()),
        }
    }

    /// [`Ctx::confirm`] for a permanent delete, which a setting can allow for good.
    pub fn confirm_permanent(&self, what: &str) -> ToolResult<()> {
        self.confirm(what, self.config().allow_permanent_delete)
            .map_err(|e| {
                e.with_hint(format!(
                    "{CONFIRM_HINT}. Without permanent the delete goes to the trash and needs no confirmation (undo \
                     restores it); the user can allow permanent deletes with the `allow_permanent_delete` setting \
                     (--set allow_permanent_delete=true)"
                ))
            })
    }

    /// The directories a search with no path covers: the client's shared roots when the
    /// call is narrowed, else every workspace root.
    pub fn scope(&self) -> Option<&[PathBuf]> {
        self.scope.as_deref().map(Vec::as_slice)
    }

    /// Fails with `CANCELLED` or `TIMEOUT` when the call should stop. Long loops call it.
    pub fn check(&self) -> ToolResult<()> {
        self.control.check()
    }

    pub fn is_cancelled(&self) -> bool {
        self.control.is_cancelled()
    }

    pub fn cancel_token(&self) -> &CancelToken {
        &self.control.cancel
    }

    /// Refuses early when about `n` bytes of answer would not fit the session's round
    /// budget. Nothing is charged here: the call path charges every byte of the answer
    /// as sent, once it is made.
    pub fn charge_bytes(&self, n: u64) -> ToolResult<()> {
        // The key the call path charges: over HTTP the principal, not the connection.
        // An answer cut to the output budget sends at most about that much (its text and
        // its structured copy, escapes included): a glob of 20 000 long paths is cut, not
        // refused for what it would have been uncut.
        let sent = match self.output_budget() {
            Some(b) => n.min((b as u64).saturating_mul(4).saturating_add(4_096)),
            None => n,
        };
        self.services
            .limiter
            .check_bytes(&self.session.budget, sent)?;
        self.bytes_read.fetch_add(n, Ordering::Relaxed);
        Ok(())
    }

    /// Counts bytes read from files (a search's), for the audit record; charges nothing.
    pub fn count_read(&self, n: u64) {
        self.bytes_read.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts files touched, for the audit record.
    pub fn count_files(&self, n: u64) {
        self.file_count.fetch_add(n, Ordering::Relaxed);
    }

    /// Names the path the audit record shows (by default the `path` argument).
    pub fn set_audit_path(&self, path: impl Into<String>) {
        *crate::error::lock(&self.path) = Some(path.into());
    }

    /// The other paths the audit record names (see [`crate::audit::AuditEntry::paths`]),
    /// replacing those named so far (the arguments' spellings, until the tool knows the
    /// names as shown).
    pub fn set_audit_paths(&self, paths: Vec<String>) {
        *crate::error::lock(&self.paths) = paths;
    }

    pub fn audit_paths(&self) -> Vec<String> {
        crate::error::lock(&self.paths).clone()
    }

    pub fn progress(&self, p: Progress) {
        self.control.progress(p);
    }

    /// What the audit record takes from the call: (path, bytes read, files touched).
    pub fn audit_facts(&self) -> (Option<String>, u64, u64) {
        (
            crate::error::lock(&self.path).clone(),
            self.bytes_read.load(Ordering::Relaxed),
            self.file_count.load(Ordering::Relaxed),
        )
    }

    /// A search says which engine answered it, for the audit record.
    pub fn set_engine(&self, engine: &'static str) {
        *crate::error::lock(&self.engine) = Some(engine);
    }

    pub fn engine(&self) -> Option<&'static str> {
        *crate::error::lock(&self.engine)
    }
}

#[cfg(test)]
mod tests {
    use super::fit_structured;
    use serde_json::json;

    /// The index bench found one question whose structured answer kept 1 217 entries
    /// from the index and 1 218 from a scan: `"engine": "scan"` is a byte shorter.
    #[test]
    fn the_engine_that_answered_never_moves_the_cut() {
        let files: Vec<_> = (0..400)
            .map(|i| json!({"path": format!("f{i:04}.c"), "count": 1}))
            .collect();
        let answer = |engine: &str| json!({"file_count": 400, "counts": files.clone(), "truncated": false, "engine": engine});
        for budget in (900..1_200).step_by(7) {
            let a = fit_structured(answer("index"), Some(budget));
            let b = fit_structured(answer("scan"), Some(budget));
            assert_eq!(a["counts"], b["counts"], "budget {budget}");
            assert_eq!(b["engine"], "scan");
            assert!(serde_json::to_string(&a).unwrap().len() <= budget);
            assert_eq!(a["truncated"], true);
        }
    }
}

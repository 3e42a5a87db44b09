//! Jupyter notebooks (nbformat 4): the cell view `read_file` shows, and the one-cell
//! changes `notebook_edit` makes on the file's own JSON text.
//!
//! A change never re-serializes the notebook: it finds the byte span of the cell (or of
//! its `source`, `outputs`, `execution_count`) with a small scanner over the JSON text
//! and replaces only that span, writing new values in the file's own layout (indent
//! unit, `": "` or `":"`, line ending). Every other byte stays as it was. The text is
//! parsed by serde_json before (the scanner then walks only valid JSON) and after, and
//! the result must equal the notebook with the one change applied as a value: a scanner
//! mistake is refused, never written.

use crate::error::{ErrorCode, ToolError, ToolResult};
use serde_json::{Map, Value};

/// The MIME type `read_file` names for a notebook shown as cells.
pub const MIME: &str = "application/x-ipynb+json";

/// A byte range of the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

/// The most JSON values (containers and separators, see
/// [`crate::text::count_json_values`]) a notebook may hold to be parsed: parsing costs
/// tens of bytes a value (a 5 MB notebook of 2.5 million zeros in a cell's metadata took
/// 574 MB for one `notebook_edit`, 4.5 GB at 40 MB). Real notebooks hold thousands to tens
/// of thousands; outputs are mostly strings, one value each.
pub const MAX_VALUES: usize = 500_000;

/// The JSON values `text` holds, or None past [`MAX_VALUES`] (counted without parsing).
pub fn values(text: &str) -> Option<u64> {
    let n = crate::text::count_json_values(text.as_bytes(), MAX_VALUES);
    (n <= MAX_VALUES).then_some(n as u64 + 1)
}

/// What parsing a notebook of `values` values into `copies` values at once weighs,
/// taken from the shared memory budget (see [`crate::search::cost::hold`]) before it is
/// parsed.
pub fn hold_parse(
    values: u64,
    copies: u64,
    shown: &str,
    control: &crate::control::Control,
) -> ToolResult<crate::search::cost::Permit<'static>> {
    use crate::search::cost;
    cost::hold(
        cost::file_weight(values, cost::copies::PER_JSON_VALUE.saturating_mul(copies)),
        &crate::workspace::shown_in_prose(shown),
        control,
    )
}

/// `notebook_edit`'s refusal of a notebook of more than [`MAX_VALUES`] values.
pub fn too_many_values(shown: &str) -> ToolError {
    ToolError::new(
        ErrorCode::FileTooLarge,
        format!(
            "{} holds over {MAX_VALUES} JSON values; notebooks are parsed up to that many (parsing takes tens of bytes a value); nothing was changed",
            crate::workspace::shown_in_prose(shown)
        ),
    )
    .with_hint("read it raw with read_files (or read_file with offset and limit) and change it as text with edit; clearing large outputs or metadata in Jupyter brings it under the limit")
}

/// A parsed notebook: its value and, for nbformat 4, nothing else is needed to view it.
/// None for text that is not one, or holds over [`MAX_VALUES`] values (not parsed).
pub fn parse(text: &str) -> Option<Value> {
    values(text)?;
    let v: Value = serde_json::from_str(text).ok()?;
    let major = v.get("nbformat")?.as_u64()?;
    (major >= 4 && v.get("cells")?.is_array()).then_some(v)
}

/// Why `text` is not a notebook `notebook_edit` can change.
pub fn refuse(shown: &str, text: &str) -> ToolError {
    if values(text).is_none() {
        return too_many_values(shown);
    }
    let v: Option<Value> = serde_json::from_str(text).ok();
    let why = match v
        .as_ref()
        .map(|v| v.get("nbformat").and_then(Value::as_u64))
    {
        None => "is not JSON".to_string(),
        Some(None) => "has no nbformat: it is not a Jupyter notebook".to_string(),
        Some(Some(n)) if n < 4 => format!("is an nbformat {n} notebook; only nbformat 4 is edited"),
        Some(Some(_)) => "has no cells list".to_string(),
    };
    ToolError::new(
        ErrorCode::InvalidArgument,
        format!(
            "{} {why}; nothing was changed",
            crate::workspace::shown_in_prose(shown)
        ),
    )
    .with_hint("notebook_edit changes .ipynb notebooks (nbformat 4); use edit for other files (upgrade an old notebook with `jupyter nbconvert --to notebook`)")
}

/// A cell's source as one string (nbformat stores a list of lines or a string).
pub fn source_of(cell: &Value) -> String {
    match cell.get("source") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts.iter().filter_map(Value::as_str).collect(),
        _ => String::new(),
    }
}

/// The most bytes of one view line: a longer source line (a minified cell) is shown in
/// pieces of at most this many bytes, each a line of its own marked as continuing.
pub const SEGMENT: usize = 1000;

/// A page of the cell view.
pub struct Page {
    /// The view text: the notebook line, then for each cell on the page its header, its
    /// numbered source lines and (once its last line is shown) its outputs summary.
    pub text: String,
    /// The first and last view line shown (0, 0: none).
    pub first: u64,
    pub last: u64,
    /// View lines in all.
    pub total: u64,
}

/// The cell view, paged by view lines: a header line, then each cell's header (index,
/// id, type, execution count), its source lines numbered (`{n:>6}\t{text}`; a piece of
/// a line longer than [`SEGMENT`] continuing the one before is `{n:>6}+\t{text}`), its
/// outputs summarised (count, types, the first lines of text, each `[out] `; never
/// image data) and `</cell>`. Numbers run through the whole notebook and are what
/// `offset` takes; every cell has at least one line (an empty source is one empty
/// line), and a cell's source is its lines joined by `\n`.
///
/// Unforgeable: every line of a cell's source (or of its outputs) is shown after a
/// number and a tab (or `[out] `), with the line breaks other than `\n` escaped, so no
/// source can make a line that starts like ferret's own (`<cell`, `</cell>`,
/// `[outputs:`, `notebook:`, `…`, `[version`): those are never numbered.
///
/// The page starts at view line `offset` (1-based), holds at most `limit` lines and
/// stops before a line that would take it over `budget` characters (one line is
/// always shown).
pub fn view(nb: &Value, offset: u64, limit: Option<u64>, budget: Option<usize>) -> Page {
    let cells = nb["cells"].as_array().map_or(&[][..], Vec::as_slice);
    let lang = nb
        .pointer("/metadata/kernelspec/language")
        .or_else(|| nb.pointer("/metadata/language_info/name"))
        .and_then(Value::as_str)
        .map(|l| format!(", {}", short(l, 40)))
        .unwrap_or_default();
    let mut out = format!(
        "notebook: {} cells (nbformat {}.{}{lang})\n",
        cells.len(),
        nb["nbformat"].as_u64().unwrap_or(0),
        nb["nbformat_minor"].as_u64().unwrap_or(0)
    );
    let offset = offset.max(1);
    let room = budget.map_or(usize::MAX, |b| b.saturating_sub(400));
    let end = limit.map_or(u64::MAX, |l| offset.saturating_add(l.max(1)));
    let (mut first, mut last) = (0u64, 0u64);
    let mut n = 0u64;
    let mut stopped = false;
    for (i, cell) in cells.iter().enumerate() {
        let source = source_of(cell);
        let segs = segments(&source);
        let cell_first = n + 1;
        n += segs.len() as u64;
        if stopped || n < offset {
            continue;
        }
        let mut head = Some(cell_header(i, cell, cell_first < offset));
        for (k, (seg, cont)) in segs.iter().enumerate() {
            let num = cell_first + k as u64;
            if num < offset {
                continue;
            }
            if num >= end {
                stopped = true;
                break;
            }
            let mut line = format!(
                "{num:>6}{}\t{}\n",
                if *cont { "+" } else { "" },
                crate::tools::escape_breaks(seg)
            );
            if num == n {
                // The cell's end goes with its last line.
                if let Some(outputs) = cell.get("outputs").and_then(Value::as_array)
                    && !outputs.is_empty()
                {
                    line.push_str(&outputs_summary(outputs));
                }
                line.push_str("</cell>\n");
            }
            let head_len = head.as_ref().map_or(0, String::len);
            if first > 0 && out.len() + head_len + line.len() > room {
                stopped = true;
                break;
            }
            if let Some(h) = head.take() {
                out.push_str(&h);
            }
            out.push_str(&line);
            if first == 0 {
                first = num;
            }
            last = num;
        }
    }
    Page {
        text: out,
        first,
        last,
        total: n,
    }
}

/// A source's view lines: its lines (split at `\n`, so a final newline makes a last
/// empty line), each cut into pieces of at most [`SEGMENT`] bytes at character
/// boundaries; `true` marks a piece continuing the line before.
fn segments(source: &str) -> Vec<(&str, bool)> {
    let mut out = Vec::new();
    for line in source.split('\n') {
        let mut rest = line;
        let mut cont = false;
        loop {
            if rest.len() <= SEGMENT {
                out.push((rest, cont));
                break;
            }
            let mut cut = SEGMENT;
            while !rest.is_char_boundary(cut) {
                cut -= 1;
            }
            out.push((&rest[..cut], cont));
            rest = &rest[cut..];
            cont = true;
        }
    }
    out
}

/// `c` as the view shows it on one line: a line break (`\n` too) or another control
/// character as its Rust escape (`\r`, `\u{85}`, `\u{2028}`, `\t`), the one form used
/// everywhere in the view, sources ([`crate::tools::escape_breaks`]) included.
fn push_escaped(out: &mut String, c: char) {
    if c.is_control() || crate::tools::is_break(c) {
        out.extend(c.escape_default());
    } else {
        out.push(c);
    }
}

/// `s` on one line (line breaks and control characters escaped), cut to `max`
/// characters.
fn short(s: &str, max: usize) -> String {
    let mut e = String::with_capacity(s.len());
    for c in s.chars() {
        push_escaped(&mut e, c);
    }
    if e.chars().count() <= max {
        return e;
    }
    let mut t: String = e.chars().take(max).collect();
    t.push('…');
    t
}

/// A cell id as the view shows it between `id="` and `"`: `\` and `"` escaped too, so
/// the form is unambiguous and notebook_edit takes it back as `cell_id` ([`find_id`]).
pub fn shown_id(id: &str) -> String {
    let mut out = String::with_capacity(id.len() + 2);
    for c in id.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            c => push_escaped(&mut out, c),
        }
    }
    out
}

/// The cells `id` names: the first whose id is `id`, and every one whose id the view
/// shows as `id` (an id with a line break in it, copied from the view). More than one
/// is ambiguous (ids `a<newline>b` and `a\nb` both shown so): the caller refuses.
pub fn find_id(cells: &[Value], id: &str) -> Vec<usize> {
    let mut found: Vec<usize> = cells
        .iter()
        .position(|c| c["id"].as_str() == Some(id))
        .into_iter()
        .collect();
    for (i, c) in cells.iter().enumerate() {
        if !found.contains(&i) && c["id"].as_str().is_some_and(|s| shown_id(s) == id) {
            found.push(i);
        }
    }
    found
}

fn cell_header(i: usize, cell: &Value, continued: bool) -> String {
    let kind = cell["cell_type"].as_str().unwrap_or("?");
    let id = cell["id"]
        .as_str()
        .map(|id| {
            let mut s = shown_id(id);
            if s.chars().count() > 64 {
                s = s.chars().take(64).collect();
                s.push('…');
            }
            format!(" id=\"{s}\"")
        })
        .unwrap_or_default();
    let count = match cell.get("execution_count") {
        Some(Value::Number(n)) => format!(" [{n}]"),
        _ => String::new(),
    };
    let more = if continued { " (continued)" } else { "" };
    format!("<cell {i}{id} {}{count}{more}>\n", short(kind, 20))
}

/// `[outputs: 2 (stream, display_data: image/png)]` and the first lines of text output.
fn outputs_summary(outputs: &[Value]) -> String {
    const LINES: usize = 5;
    let mut kinds = Vec::new();
    let mut text: Vec<String> = Vec::new();
    for o in outputs {
        let t = o["output_type"].as_str().unwrap_or("?");
        let data_types: Vec<&str> = o
            .get("data")
            .and_then(Value::as_object)
            .map(|d| d.keys().map(String::as_str).collect())
            .unwrap_or_default();
        kinds.push(if data_types.is_empty() {
            short(t, 24)
        } else {
            format!("{}: {}", short(t, 24), short(&data_types.join(" "), 80))
        });
        let said = match t {
            "stream" => join_text(&o["text"]),
            "error" => format!(
                "{}: {}",
                o["ename"].as_str().unwrap_or(""),
                o["evalue"].as_str().unwrap_or("")
            ),
            _ => join_text(&o["data"]["text/plain"]),
        };
        // Split at `\n` only: a `\r` (or another break) is shown escaped, not dropped.
        let said = said.strip_suffix('\n').unwrap_or(&said);
        for line in said.split('\n').filter(|_| !said.is_empty()) {
            if text.len() < LINES {
                text.push(short(line, 200));
            }
        }
    }
    let mut s = format!("[outputs: {} ({})]\n", outputs.len(), kinds.join(", "));
    for line in &text {
        s.push_str(&format!("[out] {}\n", crate::tools::escape_breaks(line)));
    }
    s
}

fn join_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(Value::as_str).collect(),
        _ => String::new(),
    }
}

// ---------------------------------------------------------------------------------
// The span scanner. It runs only over text serde_json accepted, so it need not reject
// anything; it still never indexes past the end (a mistake is `None`, not a panic).

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

/// The end of the value starting at `i`.
fn skip_value(b: &[u8], i: usize) -> Option<usize> {
    match *b.get(i)? {
        b'"' => skip_string(b, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            while j < b.len() {
                match b[j] {
                    b'"' => {
                        j = skip_string(b, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.checked_sub(1)?;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            None
        }
        _ => {
            let mut j = i;
            while j < b.len() && !matches!(b[j], b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r')
            {
                j += 1;
            }
            Some(j)
        }
    }
}

fn skip_string(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    while j < b.len() {
        match b[j] {
            b'\\' => j += 2,
            b'"' => return Some(j + 1),
            _ => j += 1,
        }
    }
    None
}

/// The members of the object at `at`: (key, key's span, value's span).
fn members(text: &str, at: Span) -> Option<Vec<(String, Span, Span)>> {
    let b = text.as_bytes();
    if b.get(at.start) != Some(&b'{') {
        return None;
    }
    let mut out = Vec::new();
    let mut i = skip_ws(b, at.start + 1);
    if b.get(i) == Some(&b'}') {
        return Some(out);
    }
    loop {
        let key_end = skip_string(b, i)?;
        let key: String = serde_json::from_str(text.get(i..key_end)?).ok()?;
        let key_span = Span {
            start: i,
            end: key_end,
        };
        i = skip_ws(b, key_end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        i = skip_ws(b, i + 1);
        let end = skip_value(b, i)?;
        out.push((key, key_span, Span { start: i, end }));
        i = skip_ws(b, end);
        match b.get(i)? {
            b',' => i = skip_ws(b, i + 1),
            b'}' => return Some(out),
            _ => return None,
        }
    }
}

/// The elements of the array at `at`.
fn elements(text: &str, at: Span) -> Option<Vec<Span>> {
    let b = text.as_bytes();
    if b.get(at.start) != Some(&b'[') {
        return None;
    }
    let mut out = Vec::new();
    let mut i = skip_ws(b, at.start + 1);
    if b.get(i) == Some(&b']') {
        return Some(out);
    }
    loop {
        let end = skip_value(b, i)?;
        out.push(Span { start: i, end });
        i = skip_ws(b, end);
        match b.get(i)? {
            b',' => i = skip_ws(b, i + 1),
            b']' => return Some(out),
            _ => return None,
        }
    }
}

fn member(list: &[(String, Span, Span)], key: &str) -> Option<Span> {
    list.iter().find(|(k, _, _)| k == key).map(|(_, _, v)| *v)
}

/// The whitespace at the start of the line holding byte `at`.
fn indent_at(text: &str, at: usize) -> &str {
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let rest = &text[line_start..];
    let n = rest.len() - rest.trim_start_matches([' ', '\t']).len();
    &rest[..n]
}

/// How the file lays out its JSON: the indent unit (empty: all on one line), the line
/// ending, and the separator after a key.
struct Style {
    unit: String,
    newline: &'static str,
    colon: &'static str,
    comma: &'static str,
}

impl Style {
    fn of(text: &str, top: &[(String, Span, Span)]) -> Style {
        let newline = if text.contains("\r\n") { "\r\n" } else { "\n" };
        let unit = top
            .first()
            .map(|(_, k, _)| indent_at(text, k.start).to_string())
            .filter(|_| text.trim_end().contains('\n'))
            .unwrap_or_default();
        let colon = match top.first() {
            Some((_, k, v)) if text[k.end..v.start].contains(": ") => ": ",
            Some(_) => ":",
            None => ": ",
        };
        // One line: Python's json.dumps default is ", " and ": "; compact is "," and ":".
        let comma = if unit.is_empty() && colon == ": " {
            ", "
        } else {
            ","
        };
        Style {
            unit,
            newline,
            colon,
            comma,
        }
    }

    fn pretty(&self) -> bool {
        !self.unit.is_empty()
    }

    /// `v` as the file would hold it, its inner lines indented from `base`.
    fn write(&self, v: &Value, base: &str, out: &mut String) {
        match v {
            Value::Array(items) if !items.is_empty() => {
                out.push('[');
                self.items(items.iter().map(|x| (None, x)), base, out);
                out.push(']');
            }
            Value::Object(map) if !map.is_empty() => {
                out.push('{');
                self.items(map.iter().map(|(k, x)| (Some(k), x)), base, out);
                out.push('}');
            }
            // Scalars, `[]` and `{}` as serde_json writes them (its string escapes are
            // Python's with ensure_ascii off).
            _ => out.push_str(&serde_json::to_string(v).unwrap_or_default()),
        }
    }

    fn items<'a>(
        &self,
        items: impl Iterator<Item = (Option<&'a String>, &'a Value)>,
        base: &str,
        out: &mut String,
    ) {
        let inner = format!("{base}{}", self.unit);
        for (n, (key, x)) in items.enumerate() {
            if n > 0 {
                out.push_str(self.comma);
            }
            if self.pretty() {
                out.push_str(self.newline);
                out.push_str(&inner);
            }
            if let Some(k) = key {
                out.push_str(&serde_json::to_string(k).unwrap_or_default());
                out.push_str(self.colon);
            }
            self.write(x, &inner, out);
        }
        if self.pretty() {
            out.push_str(self.newline);
            out.push_str(base);
        }
    }
}

/// What `notebook_edit` does to one cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Replace,
    Insert,
    Delete,
}

/// One change: the cell it names (by index, resolved by the caller), the new source and
/// type.
pub struct Change<'a> {
    pub mode: Mode,
    /// Replace, delete: the cell. Insert: where the new cell goes (0..=cells).
    pub index: usize,
    pub source: &'a str,
    /// The new cell's type (insert), or the replaced cell's new type.
    pub cell_type: Option<&'a str>,
    /// An id for an inserted cell (used when the notebook's cells carry ids).
    pub new_id: &'a str,
}

/// A notebook's text with one change made: the new text, the changed cell's id (if it
/// has one) and the cell count after.
pub struct Changed {
    pub text: String,
    pub id: Option<String>,
    pub cells: usize,
}

fn internal(what: &str) -> ToolError {
    ToolError::new(
        ErrorCode::IoError,
        format!("the notebook's layout could not be followed ({what}); nothing was changed"),
    )
    .with_hint(
        "make the change with edit on the notebook's JSON (read_files shows the raw JSON; read_file shows the cells)",
    )
}

/// Lines of `s` as nbformat stores a source: each keeps its `\n`.
fn source_lines(s: &str) -> Value {
    Value::Array(
        s.split_inclusive('\n')
            .map(|l| Value::String(l.to_string()))
            .collect(),
    )
}

/// The notebook with `c` applied, as a value: what the changed text must parse to.
fn apply_value(nb: &Value, c: &Change, cell_text: Option<&Value>) -> Option<Value> {
    let mut nb = nb.clone();
    let cells = nb.get_mut("cells")?.as_array_mut()?;
    match c.mode {
        Mode::Delete => {
            if c.index >= cells.len() {
                return None;
            }
            cells.remove(c.index);
        }
        Mode::Insert => cells.insert(c.index, cell_text?.clone()),
        Mode::Replace => *cells.get_mut(c.index)? = cell_text?.clone(),
    }
    Some(nb)
}

/// The cell after a replace: the new source in the old source's form (a list of lines
/// or one string), a new type if asked, and a code cell's outputs and count cleared.
fn replaced_cell(old: &Map<String, Value>, c: &Change) -> Map<String, Value> {
    let mut cell = old.clone();
    let was = old.get("cell_type").and_then(Value::as_str).unwrap_or("");
    let kind = c.cell_type.unwrap_or(was);
    let source = match old.get("source") {
        Some(Value::String(_)) => Value::String(c.source.to_string()),
        _ => source_lines(c.source),
    };
    cell.insert("source".into(), source);
    if kind != was {
        cell.insert("cell_type".into(), Value::String(kind.to_string()));
    }
    if kind == "code" {
        // A cell that becomes code gets what nbformat requires of one.
        cell.insert("execution_count".into(), Value::Null);
        cell.insert("outputs".into(), Value::Array(Vec::new()));
        cell.shift_remove("attachments");
    } else {
        cell.shift_remove("execution_count");
        cell.shift_remove("outputs");
    }
    if kind != was && sorted(old) {
        cell.sort_keys();
    }
    cell
}

fn sorted(map: &Map<String, Value>) -> bool {
    map.keys().zip(map.keys().skip(1)).all(|(a, b)| a <= b)
}

/// A new cell, its keys in nbformat's (sorted) order.
fn new_cell(c: &Change, with_id: bool) -> Value {
    let kind = c.cell_type.unwrap_or("code");
    let mut cell = Map::new();
    cell.insert("cell_type".into(), Value::String(kind.to_string()));
    if kind == "code" {
        cell.insert("execution_count".into(), Value::Null);
    }
    if with_id {
        cell.insert("id".into(), Value::String(c.new_id.to_string()));
    }
    cell.insert("metadata".into(), Value::Object(Map::new()));
    if kind == "code" {
        cell.insert("outputs".into(), Value::Array(Vec::new()));
    }
    cell.insert("source".into(), source_lines(c.source));
    Value::Object(cell)
}

/// Makes `c` on the notebook `text` (already parsed as `nb`), changing only the bytes of
/// the one cell (and, for an insert or delete, the separator beside it).
pub fn change(text: &str, nb: &Value, c: &Change) -> ToolResult<Changed> {
    let b = text.as_bytes();
    let start = skip_ws(b, 0);
    let root = Span {
        start,
        end: skip_value(b, start).ok_or_else(|| internal("the top level"))?,
    };
    let top = members(text, root).ok_or_else(|| internal("the top level"))?;
    let style = Style::of(text, &top);
    let cells_at = member(&top, "cells").ok_or_else(|| internal("cells"))?;
    let cells = elements(text, cells_at).ok_or_else(|| internal("cells"))?;
    let values = nb["cells"].as_array().ok_or_else(|| internal("cells"))?;
    if cells.len() != values.len() {
        return Err(internal("the cell count"));
    }
    // Text between an element and the one before it (or the `[`): the line break and
    // indent a new cell gets.
    let gap = |i: usize| -> &str {
        let from = if i == 0 {
            cells_at.start + 1
        } else {
            // After the comma that follows element i-1.
            let after = skip_ws(b, cells[i - 1].end);
            after + 1
        };
        &text[from..cells[i].start]
    };
    let cell_indent = |i: usize| -> String { indent_at(text, cells[i].start).to_string() };
    let mut out = String::with_capacity(text.len() + c.source.len() * 2 + 256);
    let (id, expected);
    match c.mode {
        Mode::Delete => {
            let i = c.index;
            id = values[i]["id"].as_str().map(str::to_string);
            let (from, to) = if cells.len() == 1 {
                (cells_at.start + 1, cells_at.end - 1)
            } else if i == 0 {
                (cells[0].start, cells[1].start)
            } else {
                (cells[i - 1].end, cells[i].end)
            };
            out.push_str(&text[..from]);
            out.push_str(&text[to..]);
            expected = apply_value(nb, c, None);
        }
        Mode::Insert => {
            let with_id = nb["nbformat"].as_u64() > Some(4)
                || nb["nbformat_minor"].as_u64() >= Some(5)
                || values.iter().any(|v| v.get("id").is_some());
            let cell = new_cell(c, with_id);
            id = cell["id"].as_str().map(str::to_string);
            let mut cell_text = String::new();
            if cells.is_empty() {
                let base = indent_at(text, cells_at.start).to_string();
                let inner = format!("{base}{}", style.unit);
                style.write(&cell, &inner, &mut cell_text);
                out.push_str(&text[..=cells_at.start]);
                if style.pretty() {
                    out.push_str(style.newline);
                    out.push_str(&inner);
                }
                out.push_str(&cell_text);
                if style.pretty() {
                    out.push_str(style.newline);
                    out.push_str(&base);
                }
                out.push_str(&text[cells_at.end - 1..]);
            } else if c.index < cells.len() {
                let i = c.index;
                style.write(&cell, &cell_indent(i), &mut cell_text);
                out.push_str(&text[..cells[i].start]);
                out.push_str(&cell_text);
                out.push(',');
                out.push_str(gap(i));
                out.push_str(&text[cells[i].start..]);
            } else {
                let last = cells.len() - 1;
                style.write(&cell, &cell_indent(last), &mut cell_text);
                out.push_str(&text[..cells[last].end]);
                out.push(',');
                out.push_str(gap(last));
                out.push_str(&cell_text);
                out.push_str(&text[cells[last].end..]);
            }
            expected = apply_value(nb, c, Some(&cell));
        }
        Mode::Replace => {
            let i = c.index;
            let old = values[i].as_object().ok_or_else(|| internal("a cell"))?;
            id = old.get("id").and_then(Value::as_str).map(str::to_string);
            let cell = replaced_cell(old, c);
            let was = old.get("cell_type").and_then(Value::as_str);
            let kind = cell.get("cell_type").and_then(Value::as_str);
            let spans = members(text, cells[i]).ok_or_else(|| internal("a cell"))?;
            // The same type: only the source (and a code cell's outputs and count)
            // change, each at its own span. Another type, or a cell missing a key it
            // needs: the cell is written anew in the file's layout.
            let mut edits: Vec<(Span, String)> = Vec::new();
            let keys_same = cell.keys().eq(old.keys());
            if was == kind && keys_same {
                for (key, _, span) in &spans {
                    let (Some(new), Some(prev)) = (cell.get(key), old.get(key)) else {
                        continue;
                    };
                    if new == prev {
                        continue;
                    }
                    let mut v = String::new();
                    style.write(new, indent_at(text, span.start), &mut v);
                    edits.push((*span, v));
                }
            } else {
                let mut v = String::new();
                style.write(&Value::Object(cell.clone()), &cell_indent(i), &mut v);
                edits.push((cells[i], v));
            }
            edits.sort_by_key(|(s, _)| s.start);
            let mut at = 0;
            for (span, v) in edits {
                out.push_str(&text[at..span.start]);
                out.push_str(&v);
                at = span.end;
            }
            out.push_str(&text[at..]);
            expected = apply_value(nb, c, Some(&Value::Object(cell)));
        }
    }
    let after: Option<Value> = serde_json::from_str(&out).ok();
    if after.is_none() || after != expected {
        return Err(internal(
            "the changed text does not read back as the change",
        ));
    }
    let cells = after
        .as_ref()
        .and_then(|v| v["cells"].as_array())
        .map_or(0, Vec::len);
    Ok(Changed {
        text: out,
        id,
        cells,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NB: &str = "{\n \"cells\": [\n  {\n   \"cell_type\": \"markdown\",\n   \"id\": \"a1\",\n   \"metadata\": {},\n   \"source\": [\n    \"# T\\n\",\n    \"x\"\n   ]\n  },\n  {\n   \"cell_type\": \"code\",\n   \"execution_count\": 3,\n   \"id\": \"b2\",\n   \"metadata\": {},\n   \"outputs\": [\n    {\n     \"name\": \"stdout\",\n     \"output_type\": \"stream\",\n     \"text\": [\n      \"hi\\n\"\n     ]\n    }\n   ],\n   \"source\": [\n    \"print('hi')\"\n   ]\n  }\n ],\n \"metadata\": {},\n \"nbformat\": 4,\n \"nbformat_minor\": 5\n}\n";

    fn run(c: Change) -> String {
        let nb = parse(NB).unwrap();
        change(NB, &nb, &c).unwrap().text
    }

    #[test]
    fn replace_touches_only_the_cell() {
        let t = run(Change {
            mode: Mode::Replace,
            index: 1,
            source: "a = 1\nb = 2",
            cell_type: None,
            new_id: "x",
        });
        assert_eq!(
            t,
            "{\n \"cells\": [\n  {\n   \"cell_type\": \"markdown\",\n   \"id\": \"a1\",\n   \"metadata\": {},\n   \"source\": [\n    \"# T\\n\",\n    \"x\"\n   ]\n  },\n  {\n   \"cell_type\": \"code\",\n   \"execution_count\": null,\n   \"id\": \"b2\",\n   \"metadata\": {},\n   \"outputs\": [],\n   \"source\": [\n    \"a = 1\\n\",\n    \"b = 2\"\n   ]\n  }\n ],\n \"metadata\": {},\n \"nbformat\": 4,\n \"nbformat_minor\": 5\n}\n"
        );
    }

    #[test]
    fn insert_and_delete_keep_the_layout() {
        let t = run(Change {
            mode: Mode::Insert,
            index: 2,
            source: "",
            cell_type: Some("markdown"),
            new_id: "n3",
        });
        assert!(t.ends_with("  },\n  {\n   \"cell_type\": \"markdown\",\n   \"id\": \"n3\",\n   \"metadata\": {},\n   \"source\": []\n  }\n ],\n \"metadata\": {},\n \"nbformat\": 4,\n \"nbformat_minor\": 5\n}\n"), "{t}");
        let nb = parse(&t).unwrap();
        let back = change(
            &t,
            &nb,
            &Change {
                mode: Mode::Delete,
                index: 2,
                source: "",
                cell_type: None,
                new_id: "",
            },
        )
        .unwrap();
        assert_eq!(back.text, NB);
        for i in 0..2 {
            let d = run(Change {
                mode: Mode::Delete,
                index: i,
                source: "",
                cell_type: None,
                new_id: "",
            });
            assert_eq!(parse(&d).unwrap()["cells"].as_array().unwrap().len(), 1);
        }
    }
}

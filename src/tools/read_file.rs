//! `read_file`: a file's text (numbered lines in the rendering) or its bytes as base64.
//!
//! A whole-file read is refused over `max_file_size`; a ranged read (`offset`/`limit`)
//! of any file is allowed while what it returns fits that limit, so an agent can page
//! through a log or a generated file. Ranged reads stream: memory holds only the lines
//! returned, the rest of the file is only counted.

use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::tool::{Annotations, Ctx, Tool, ToolMeta};
use crate::tools::human_size;
use crate::workspace::shown;
use base64::Engine;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Read};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Encoding {
    #[default]
    #[serde(rename = "utf-8")]
    Utf8,
    #[serde(rename = "base64")]
    Base64,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    pub path: String,
    #[serde(default)]
    pub encoding: Encoding,
    /// Seed 004's name for `limit`: not taken any more (one name per thing in the schema;
    /// the error for `max_lines` names `limit`). Kept for the front ends that build params.
    #[serde(skip)]
    pub max_lines: Option<u64>,
    /// 1-based line (base64: 0-based byte).
    #[serde(default)]
    #[schemars(with = "u64")]
    pub offset: Option<u64>,
    /// Lines (base64: bytes).
    #[serde(default)]
    #[schemars(with = "u64")]
    pub limit: Option<u64>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    pub path: String,
    /// The text (or base64) returned; line endings as in the file.
    pub content: String,
    /// Size of the whole file in bytes.
    pub size: u64,
    pub encoding: Encoding,
    /// Lines in the whole file.
    pub total_lines: u64,
    /// Line number of the first line of `content`.
    pub offset: u64,
    /// Whether the file goes on after `content`.
    pub truncated: bool,
    /// The file is too large to count all its lines in one call: `total_lines` is a
    /// lower bound.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lines_uncounted: bool,
    /// The version of the whole file's content (text reads of files that can be edited):
    /// pass it as expected_version to edit to refuse the change if the file changed since.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    // The file's text encoding when not plain UTF-8 ("windows-1252", "utf-16le with
    // BOM"); the content is shown decoded and edits keep it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub charset: Option<String>,
    // The file starts with a byte-order mark (not shown in content; edits keep it);
    // `charset` says "… with BOM".
    #[serde(skip)]
    pub bom: bool,
    /// Image: sent as an image block. Notebook: content lists the cells.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// The image's base64 and dimensions, sent as an image block, not in the result.
    #[serde(skip)]
    #[schemars(skip)]
    pub image: Option<Image>,
    /// A PDF read as text: its page count (said in the text).
    #[serde(skip)]
    #[schemars(skip)]
    pub pages: Option<u64>,
}

/// An image read whole: its bytes in base64, and its size in pixels when known.
#[derive(Debug)]
pub struct Image {
    pub data: String,
    pub dimensions: Option<(u32, u32)>,
    /// The image's memory, taken from the shared budget; the image block keeps it.
    pub held: crate::tool::Held,
}

pub struct ReadFile;

impl Tool for ReadFile {
    type Params = Params;
    type Output = Output;

    fn meta(&self) -> ToolMeta {
        ToolMeta {
            name: "read_file",
            title: "Read file",
            description: "A file's numbered lines and version (for edit), in any charset; images, PDFs, notebooks as \
such. Large: offset, limit. Other binary: encoding base64. Many: read_files.",
            annotations: Annotations::READ_ONLY,
            served_by_default: true,
        }
    }

    fn run(&self, ctx: &Ctx, p: Params) -> ToolResult<Output> {
        read_as(ctx, p, ctx.output_budget(), false, true)
    }

    fn media(&self, o: &Output) -> Vec<crate::tool::Media> {
        match (&o.image, &o.mime_type) {
            (Some(i), Some(m)) => vec![crate::tool::Media {
                mime_type: m.clone(),
                data: i.data.clone(),
                held: i.held.clone(),
            }],
            _ => Vec::new(),
        }
    }

    fn render(&self, o: &Output) -> String {
        if let Some(m) = &o.mime_type {
            if m == super::notebook::MIME {
                return notebook_render(o);
            }
            if m == super::pdf::MIME {
                return format!(
                    "{}: PDF document, {} pages: its text as extracted (no layout, images or scanned pages)\n{}",
                    shown(&o.path),
                    o.pages.unwrap_or(0),
                    lines_render(o)
                );
            }
            let dims = o
                .image
                .as_ref()
                .and_then(|i| i.dimensions)
                .map(|(w, h)| format!(", {w}x{h}"))
                .unwrap_or_default();
            return format!(
                "{}: {m} image, {}{dims} (sent as an image)\n",
                shown(&o.path),
                human_size(o.size)
            );
        }
        if o.encoding == Encoding::Base64 {
            if o.content.is_empty() && o.offset > 0 && o.offset >= o.size {
                return format!(
                    "{}: offset {} is past the end; the file has {} bytes",
                    shown(&o.path),
                    o.offset,
                    o.size
                );
            }
            if o.offset == 0 && !o.truncated {
                return format!(
                    "{} ({} bytes, base64):\n{}",
                    shown(&o.path),
                    o.size,
                    o.content
                );
            }
            let pad = o.content.bytes().rev().take_while(|&b| b == b'=').count();
            let len = (o.content.len() / 4 * 3).saturating_sub(pad) as u64;
            let end = o.offset + len;
            let more = if o.truncated {
                format!("; continue with offset {end}")
            } else {
                String::new()
            };
            return format!(
                "{} (bytes {}-{} of {}, base64{more}):\n{}",
                shown(&o.path),
                o.offset,
                end,
                o.size,
                o.content
            );
        }
        lines_render(o)
    }
}

/// A text read's numbered lines, what follows them and the version.
fn lines_render(o: &Output) -> String {
    if o.total_lines == 0 {
        return format!("{}: (empty file)", shown(&o.path));
    }
    if o.content.is_empty() {
        return format!(
            "{}: offset {} is past the end; the file has {} lines",
            shown(&o.path),
            o.offset,
            o.total_lines
        );
    }
    let mut out = String::with_capacity(o.content.len() + o.content.len() / 8 + 32);
    let mut last = o.offset;
    for (i, line) in o.content.split_inclusive('\n').enumerate() {
        last = o.offset + i as u64;
        let line = line.strip_suffix('\n').unwrap_or(line);
        let line = line.strip_suffix('\r').unwrap_or(line);
        out.push_str(&format!(
            "{last:>6}\t{}\n",
            crate::tools::escape_breaks(line)
        ));
    }
    if o.lines_uncounted {
        out.push_str(&format!(
            "… showing lines {}-{} of more than {}; continue with offset {}\n",
            o.offset,
            last,
            o.total_lines,
            last + 1
        ));
    } else if o.truncated {
        out.push_str(&format!(
            "… showing lines {}-{} of {}; continue with offset {}\n",
            o.offset,
            last,
            o.total_lines,
            last + 1
        ));
    }
    let enc = o.charset.as_ref().map(|e| format!("encoding {e}"));
    match (&o.version, enc) {
        // For the stale-write guard: models that read only the text need it too.
        (Some(v), Some(e)) => out.push_str(&format!("[version {v}; {e}]\n")),
        (Some(v), None) => out.push_str(&format!("[version {v}]\n")),
        (None, Some(e)) => out.push_str(&format!("[{e}]\n")),
        (None, None) => {}
    }
    out
}

/// A read within `budget` characters of result (read_files shares one budget among its
/// files).
pub fn read(ctx: &Ctx, p: Params, budget: Option<usize>) -> ToolResult<Output> {
    read_as(ctx, p, budget, false, false)
}

/// [`read`] as `read_files` reads: a file over `max_file_size` read from its start (no
/// `offset`) is refused with the error `read_file` gives for a whole read, even with a
/// `limit`, rather than answered with its first lines: one size limit that means the
/// same in both tools. A read with an `offset` is a ranged read in both.
pub fn read_from_start_as_whole(ctx: &Ctx, p: Params, budget: Option<usize>) -> ToolResult<Output> {
    read_as(ctx, p, budget, true, false)
}

/// A read; with `views` (read_file itself) an image whole is an image and a notebook
/// read whole its cells.
fn read_as(
    ctx: &Ctx,
    p: Params,
    budget: Option<usize>,
    head_is_whole: bool,
    views: bool,
) -> ToolResult<Output> {
    let ws = ctx.workspace();
    let wp = ctx.resolve(&p.path)?;
    let shown = ws.display(&wp);
    ctx.set_audit_path(shown.clone());
    let (mut file, meta, _) = ws.open_file(&wp)?;
    ctx.count_files(1);
    let size = meta.len();
    let max = ctx.limits().max_file_size;
    // A read holds at most `max_file_size` of the file (a ranged read streams past the
    // rest), taken from the shared memory budget first; read_files holds one file at a
    // time.
    let whole = if max > 0 { size.min(max) } else { size };
    // A file whose text is decoded (a BOM, UTF-16, a legacy encoding) holds that text,
    // up to three bytes a byte: measured first (the part a read may hold), held too.
    let text = super::measure_text(&file, size, whole, &shown)?;
    let _held = crate::search::cost::hold(
        crate::search::cost::file_weight(whole, crate::search::cost::copies::READ_FILE)
            .saturating_add(if text.decoded {
                crate::search::cost::file_weight(
                    text.text.min(whole.saturating_mul(3)),
                    crate::search::cost::copies::DECODED,
                )
            } else {
                0
            }),
        &crate::workspace::shown_in_prose(&shown),
        ctx.control(),
    )?;
    let limit = match (p.limit, p.max_lines) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    // Only a whole read with no encoding asked is a view: base64 and ranged reads give
    // the bytes and the lines as they are.
    let read_file_itself = views;
    let views = views && p.encoding == Encoding::Utf8 && p.offset.is_none() && limit.is_none();
    if read_file_itself && p.encoding == Encoding::Utf8 {
        match sniff(&mut file, &shown)? {
            Sniffed::Image(mime) if views => return read_image(ctx, file, size, shown, mime),
            Sniffed::Pdf => {
                if p.offset == Some(0) {
                    return Err(ToolError::invalid("offset is 1-based: the first line is 1"));
                }
                return read_pdf(ctx, file, size, max, shown, p.offset, limit, budget);
            }
            _ => {}
        }
    }
    if p.encoding == Encoding::Base64 {
        return read_base64(ctx, file, size, max, shown, p.offset, limit, budget);
    }
    if p.offset == Some(0) {
        return Err(ToolError::invalid("offset is 1-based: the first line is 1"));
    }
    // A notebook (within the whole-read limit) is its cell view, paged by the view's
    // own numbered lines: offset and limit count those (the raw JSON: read_files).
    if read_file_itself
        && p.encoding == Encoding::Utf8
        && (p.offset.is_some() || limit.is_some())
        && is_notebook_name(&shown)
        && (max == 0 || size <= max)
    {
        use std::io::{Seek, SeekFrom};
        let whole = file
            .try_clone()
            .map_err(|e| ToolError::io(&shown, &e))
            .and_then(|f| read_capped(f, size, max, &shown))?;
        if let Ok(content) = String::from_utf8(whole)
            && let Some((nb, _parsed)) = parse_notebook(ctx, &content, &shown)?
        {
            return notebook_view(ctx, &nb, content, size, shown, p.offset, limit, budget);
        }
        file.seek(SeekFrom::Start(0))
            .map_err(|e| ToolError::io(&shown, &e))?;
    }
    let ranged = p.offset.is_some_and(|o| o > 1) || limit.is_some();
    // A UTF-16 file over the limit is read as text in no parts either: its hint sends to
    // a read that works (round 30: it sent to offset and limit, refused the same way).
    let utf16 = crate::text::bom(&peek(&file, 4)).is_some_and(|c| c.encoding != encoding_rs::UTF_8);
    let whole_size = || {
        check_whole_size(&shown, size, max, Encoding::Utf8).map_err(|e| {
            if utf16 {
                e.with_hint(UTF16_OVER_HINT)
            } else {
                e
            }
        })
    };
    if head_is_whole && p.offset.is_none() {
        // The size of the file opened (no race with a swap): the same error and hint.
        whole_size()?;
    }

    if !ranged {
        whole_size()?;
        let bytes = read_capped(file, size, max, &shown)?;
        let version = crate::history::version_of(&bytes);
        let (content, codec) = into_text(bytes, &shown)?;
        if views
            && is_notebook_name(&shown)
            && let Some((nb, _parsed)) = parse_notebook(ctx, &content, &shown)?
        {
            return notebook_view(ctx, &nb, content, size, shown, None, None, budget);
        }
        ctx.charge_bytes(content.len() as u64)?;
        ctx.seen().remember(&version, &content);
        let total_lines = count_lines(content.as_bytes());
        let (content, cut) = fit_lines(content, budget);
        if cut && content.is_empty() {
            return Err(line_over_budget(&shown, 1));
        }
        return Ok(Output {
            version: Some(version),
            path: shown,
            total_lines,
            content,
            size,
            encoding: Encoding::Utf8,
            offset: 1,
            truncated: cut,
            lines_uncounted: false,
            charset: codec.label(),
            bom: codec.bom,
            mime_type: None,
            image: None,
            pages: None,
        });
    }

    let offset = p.offset.unwrap_or(1);
    // The file's first bytes name its encoding (as a whole read finds it); a UTF-16
    // file's lines are not split at '\n' bytes: it is decoded whole, then ranged.
    let head = peek(&file, 4);
    if crate::text::bom(&head).is_some_and(|c| c.encoding != encoding_rs::UTF_8) {
        return ranged_utf16(ctx, file, size, max, shown, offset, limit, budget);
    }
    let mut hashed = Hashing::new(file);
    let (bytes, total_lines, uncounted) = read_lines(ctx, &mut hashed, offset, limit, max, &shown)?;
    // Every byte was read (to count the lines), so the hash is the whole file's.
    let edit_max = ctx.config().max_edit_file_size;
    let version = (!uncounted && hashed.read == size && (edit_max == 0 || size <= edit_max))
        .then(|| hashed.version());
    let (content, codec) = ranged_text(bytes, &hashed.inner, offset, &shown)?;
    let (content, cut) = fit_lines(content, budget);
    if cut && content.is_empty() {
        return Err(line_over_budget(&shown, offset));
    }
    ctx.charge_bytes(content.len() as u64)?;
    let returned = count_lines(content.as_bytes());
    Ok(Output {
        path: shown,
        content,
        size,
        encoding: Encoding::Utf8,
        total_lines,
        offset,
        truncated: uncounted || offset.saturating_sub(1) + returned < total_lines,
        lines_uncounted: uncounted,
        version,
        charset: codec.label(),
        bom: codec.bom,
        mime_type: None,
        image: None,
        pages: None,
    })
}

/// Up to `n` bytes from the start of the file, without moving its position.
fn peek(file: &cap_std::fs::File, n: usize) -> Vec<u8> {
    let mut buf = vec![0u8; n];
    let mut got = 0;
    while got < n {
        match rustix::io::pread(file, &mut buf[got..], got as u64) {
            Ok(0) | Err(_) => break,
            Ok(k) => got += k,
        }
    }
    buf.truncate(got);
    buf
}

/// The text of lines read from `file`: ASCII, or UTF-8 in a file whose first bytes are
/// UTF-8, as they are; else decoded in the encoding the file's first bytes give (as a
/// whole read finds it; a BOM on line 1 left out). Only lines that are not ASCII cost
/// a look at the file's first bytes.
fn ranged_text(
    bytes: Vec<u8>,
    file: &cap_std::fs::File,
    offset: u64,
    shown: &str,
) -> ToolResult<(String, crate::text::Codec)> {
    use crate::text::Codec;
    if bytes.is_ascii() && memchr::memchr(0, &bytes).is_none() {
        return String::from_utf8(bytes)
            .map(|s| (s, Codec::UTF8))
            .map_err(|_| binary(shown));
    }
    // One byte past what the detector reads: a file of exactly that size is whole to it,
    // as it is to a whole read and to grep (the guess may differ with the flag).
    let head = &peek(file, crate::text::DETECT_MAX + 1)[..];
    if memchr::memchr(0, &bytes).is_some() && crate::text::bom(head).is_none() {
        return Err(binary(shown));
    }
    if let Some(c) = crate::text::bom(head) {
        // The file's BOM (on line 1 only) left out, once: a U+FEFF of the text after it,
        // or at the start of a later line, is text (it was taken for a second BOM).
        let body = match offset {
            1 => bytes.get(c.bom_bytes().len()..).unwrap_or_default(),
            _ => &bytes[..],
        };
        let content = c
            .encoding
            .decode_without_bom_handling_and_without_replacement(body)
            .filter(|t| !t.contains('\0'))
            .ok_or_else(|| binary(shown))?;
        return Ok((content.into_owned(), c));
    }
    if memchr::memchr(0, &bytes).is_none()
        && let Ok(s) = std::str::from_utf8(&bytes)
    {
        // The lines are UTF-8; the file is too unless its head says otherwise.
        // (A head cut inside a character is UTF-8 too.)
        if std::str::from_utf8(head).map_or_else(|e| e.error_len().is_none(), |_| true) {
            return Ok((s.to_string(), Codec::UTF8));
        }
    }
    let whole = head.len() <= crate::text::DETECT_MAX;
    let encoding = crate::text::detect_legacy(head, whole).ok_or_else(|| binary(shown))?;
    let text = encoding
        .decode_without_bom_handling_and_without_replacement(&bytes)
        .ok_or_else(|| binary(shown))?;
    Ok((
        text.into_owned(),
        Codec {
            encoding,
            bom: false,
        },
    ))
}

/// The way to read a UTF-16 file over `max_file_size`.
const UTF16_OVER_HINT: &str = "a UTF-16 file is read as text only whole, and this one is over max_file_size: read its \
bytes in parts with encoding base64 (offset and limit count bytes, e.g. offset 0, limit 524288), or grep for what you \
need (up to search_max_file_size, lines under 64 MiB)";

#[allow(clippy::too_many_arguments)] // the read's parts, each already checked
/// A ranged read of a UTF-16 file: decoded whole (it must fit the size limit), then the
/// lines asked for.
fn ranged_utf16(
    ctx: &Ctx,
    file: cap_std::fs::File,
    size: u64,
    max: u64,
    shown: String,
    offset: u64,
    limit: Option<u64>,
    budget: Option<usize>,
) -> ToolResult<Output> {
    check_whole_size(&shown, size, max, Encoding::Utf8)
        .map_err(|e| e.with_hint(UTF16_OVER_HINT))?;
    let bytes = read_capped(file, size, max, &shown)?;
    let edit_max = ctx.config().max_edit_file_size;
    let version = (edit_max == 0 || size <= edit_max).then(|| crate::history::version_of(&bytes));
    let (text, codec) = into_text(bytes, &shown)?;
    let total_lines = count_lines(text.as_bytes());
    let from: usize = text
        .split_inclusive('\n')
        .take(offset.saturating_sub(1) as usize)
        .map(str::len)
        .sum();
    let rest = &text[from..];
    let len: usize = match limit {
        Some(l) => rest
            .split_inclusive('\n')
            .take(l as usize)
            .map(str::len)
            .sum(),
        None => rest.len(),
    };
    let (content, cut) = fit_lines(rest[..len].to_string(), budget);
    if cut && content.is_empty() {
        return Err(line_over_budget(&shown, offset));
    }
    ctx.charge_bytes(content.len() as u64)?;
    let returned = count_lines(content.as_bytes());
    Ok(Output {
        path: shown,
        content,
        size,
        encoding: Encoding::Utf8,
        total_lines,
        offset,
        truncated: offset.saturating_sub(1) + returned < total_lines,
        lines_uncounted: false,
        version,
        charset: codec.label(),
        bom: codec.bom,
        mime_type: None,
        image: None,
        pages: None,
    })
}

/// What an open file's first bytes say it is.
enum Sniffed {
    Image(&'static str),
    Pdf,
    Other,
}

/// What an open file is by its first bytes; the file is left at its start.
fn sniff(file: &mut cap_std::fs::File, shown: &str) -> ToolResult<Sniffed> {
    use std::io::{Seek, SeekFrom};
    let mut head = Vec::with_capacity(super::media::SNIFF_BYTES);
    (&mut *file)
        .take(super::media::SNIFF_BYTES as u64)
        .read_to_end(&mut head)
        .map_err(|e| ToolError::io(shown, &e))?;
    file.seek(SeekFrom::Start(0))
        .map_err(|e| ToolError::io(shown, &e))?;
    Ok(match super::media::sniff(&head) {
        Some(mime) => Sniffed::Image(mime),
        None if super::media::is_pdf(&head) => Sniffed::Pdf,
        None => Sniffed::Other,
    })
}

/// An image, whole, within the image limit (`max_image_bytes`, lowered over HTTP to
/// what fits a result), with a header that parses to a sane size: sent as an image
/// block, its memory held from the shared budget until the answer is built. One whose
/// header is malformed or cut is refused as binary (never sent as an image a client
/// would choke on).
fn read_image(
    ctx: &Ctx,
    file: cap_std::fs::File,
    size: u64,
    shown: String,
    mime: &'static str,
) -> ToolResult<Output> {
    if let Some(max) = ctx.image_budget()
        && size > max
    {
        return Err(ToolError::new(
            ErrorCode::FileTooLarge,
            format!(
                "{shown} is an image ({mime}) of {} ({size} bytes), over the {} ({max}-byte) limit for images sent as images",
                human_size(size),
                human_size(max)
            ),
        )
        .with_hint(
            "make a smaller copy (scale it down, or crop the region you need) and read that, or read its bytes in ranges with encoding base64, offset and limit; the user can raise max_image_bytes (5 MiB, the most Claude's API accepts) or max_bytes_per_round",
        ));
    }
    let held = super::hold_file(ctx, size, crate::search::cost::copies::IMAGE, &shown)?;
    // At most the size admitted (a file that grew since it was opened is refused).
    let bytes = read_capped(file, size, size.max(1), &shown)?;
    let dimensions = super::media::check(&bytes, mime).map_err(|why| {
        ToolError::new(
            ErrorCode::BinaryFile,
            format!("{shown} starts like an image ({mime}) but is not one a client can show: {why}; it was not sent as an image"),
        )
        .with_hint("read its bytes with encoding base64 (offset and limit for a range) to look at them")
    })?;
    let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
    ctx.charge_bytes(data.len() as u64)?;
    Ok(Output {
        path: shown,
        content: String::new(),
        size: bytes.len() as u64,
        encoding: Encoding::Base64,
        total_lines: 0,
        offset: 0,
        truncated: false,
        lines_uncounted: false,
        version: Some(crate::history::version_of(&bytes)),
        charset: None,
        bom: false,
        mime_type: Some(mime.to_string()),
        image: Some(Image {
            dimensions: Some(dimensions),
            data,
            held: crate::tool::Held(Some(std::sync::Arc::new(held))),
        }),
        pages: None,
    })
}

/// A notebook view page and what follows it: where to continue, the version, where
/// the raw JSON is.
fn notebook_render(o: &Output) -> String {
    if o.content.is_empty() {
        return format!(
            "{}: offset {} is past the end; the notebook's cell view has {} lines\n",
            shown(&o.path),
            o.offset,
            o.total_lines
        );
    }
    let mut out = o.content.clone();
    // The last numbered line is the page's last (no source line can look numbered
    // out of place: see notebook::view).
    let last = o
        .content
        .lines()
        .rev()
        .find_map(|l| {
            let (gutter, _) = l.split_once('\t')?;
            gutter.trim().trim_end_matches('+').parse::<u64>().ok()
        })
        .unwrap_or(o.offset);
    if o.truncated {
        out.push_str(&format!(
            "… showing lines {}-{last} of {}; continue with offset {}\n",
            o.offset,
            o.total_lines,
            last + 1
        ));
    }
    if let Some(v) = &o.version {
        out.push_str(&format!("[version {v}; the raw JSON: read_files]\n"));
    }
    out
}

#[allow(clippy::too_many_arguments)] // the read's parts, each already checked
/// A PDF read as text: within the whole-read limit, its pages' text extracted by the
/// helper process under its limits (see `tools::pdf`), each page after a
/// `[page k of N]` line, then ranged and fitted like a text file's lines.
fn read_pdf(
    ctx: &Ctx,
    file: cap_std::fs::File,
    size: u64,
    max: u64,
    shown: String,
    offset: Option<u64>,
    limit: Option<u64>,
    budget: Option<usize>,
) -> ToolResult<Output> {
    check_whole_size(&shown, size, max, Encoding::Utf8)
        .map_err(|e| e.with_hint("a PDF's text is extracted from the whole file: convert it to text outside ferret (e.g. pdftotext), or ask the user to raise max_file_size"))?;
    let bytes = read_capped(file, size, max, &shown)?;
    let pages = super::pdf::pages(&bytes, &shown, ctx.control())?;
    drop(bytes);
    let n = pages.len();
    let mut text = String::new();
    for (i, page) in pages.iter().enumerate() {
        text.push_str(&format!("[page {} of {n}]\n", i + 1));
        text.push_str(page);
        if !page.is_empty() && !page.ends_with('\n') {
            text.push('\n');
        }
    }
    drop(pages);
    let total_lines = count_lines(text.as_bytes());
    let offset = offset.unwrap_or(1);
    let from: usize = text
        .split_inclusive('\n')
        .take(offset.saturating_sub(1) as usize)
        .map(str::len)
        .sum();
    let rest = &text[from..];
    let len: usize = match limit {
        Some(l) => rest
            .split_inclusive('\n')
            .take(l as usize)
            .map(str::len)
            .sum(),
        None => rest.len(),
    };
    let (content, cut) = fit_lines(rest[..len].to_string(), budget);
    if cut && content.is_empty() {
        return Err(line_over_budget(&shown, offset));
    }
    ctx.charge_bytes(content.len() as u64)?;
    let returned = count_lines(content.as_bytes());
    Ok(Output {
        path: shown,
        content,
        size,
        encoding: Encoding::Utf8,
        total_lines,
        offset,
        truncated: offset.saturating_sub(1) + returned < total_lines,
        lines_uncounted: false,
        version: None,
        charset: None,
        bom: false,
        mime_type: Some(super::pdf::MIME.to_string()),
        image: None,
        pages: Some(n as u64),
    })
}

fn is_notebook_name(shown: &str) -> bool {
    shown
        .rsplit('.')
        .next()
        .is_some_and(|e| e.eq_ignore_ascii_case("ipynb"))
}

/// A notebook parsed for its cell view, with the parse's weight (the value and the view
/// made of it) held from the shared memory budget first; None when the text is not a
/// notebook or holds too many JSON values to parse (then it is read as text).
fn parse_notebook(
    ctx: &Ctx,
    content: &str,
    shown: &str,
) -> ToolResult<Option<(serde_json::Value, crate::search::cost::Permit<'static>)>> {
    let Some(values) = super::notebook::values(content) else {
        return Ok(None);
    };
    let held = super::notebook::hold_parse(values, 2, shown, ctx.control())?;
    Ok(super::notebook::parse(content).map(|nb| (nb, held)))
}

#[allow(clippy::too_many_arguments)] // the read's parts, each already checked
/// A notebook read whole, shown as its cell view from view line `offset` (at most
/// `limit` lines) within `budget`.
fn notebook_view(
    ctx: &Ctx,
    nb: &serde_json::Value,
    content: String,
    size: u64,
    shown: String,
    offset: Option<u64>,
    limit: Option<u64>,
    budget: Option<usize>,
) -> ToolResult<Output> {
    let version = crate::history::version_of(content.as_bytes());
    ctx.seen().remember(&version, &content);
    let offset = offset.unwrap_or(1);
    let page = super::notebook::view(nb, offset, limit, budget);
    let view = if page.first == 0 && page.total > 0 {
        String::new()
    } else {
        page.text
    };
    ctx.charge_bytes(view.len() as u64)?;
    Ok(Output {
        path: shown,
        total_lines: page.total,
        content: view,
        size,
        encoding: Encoding::Utf8,
        offset,
        truncated: page.first > 0 && page.last < page.total,
        lines_uncounted: false,
        version: Some(version),
        charset: None,
        bom: false,
        mime_type: Some(super::notebook::MIME.to_string()),
        image: None,
        pages: None,
    })
}

fn check_whole_size(shown: &str, size: u64, max: u64, encoding: Encoding) -> ToolResult<()> {
    if max > 0 && size > max {
        return Err(ToolError::new(
            ErrorCode::FileTooLarge,
            // Exact bytes too: "1.0 MiB over the 1.0 MiB limit" says nothing.
            format!(
                "{shown} is {} ({size} bytes), over the {} ({max}-byte) limit for whole-file reads",
                human_size(size),
                human_size(max)
            ),
        )
        .with_hint(match encoding {
            Encoding::Utf8 => {
                "read it in parts with offset and limit (e.g. offset 1, limit 200), or grep for what you need first"
            }
            Encoding::Base64 => {
                "read it in parts: with encoding base64, offset and limit count bytes (e.g. offset 0, limit 524288)"
            }
        }));
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)] // the read's parts, each already checked
/// A base64 read: the whole file, or with `offset`/`limit` a byte range (offset 0-based,
/// limit in bytes, at most the size limit).
fn read_base64(
    ctx: &Ctx,
    file: cap_std::fs::File,
    size: u64,
    max: u64,
    shown: String,
    offset: Option<u64>,
    limit: Option<u64>,
    budget: Option<usize>,
) -> ToolResult<Output> {
    use std::io::{Seek, SeekFrom};
    let (bytes, start) = if offset.is_none() && limit.is_none() {
        check_whole_size(&shown, size, max, Encoding::Base64)?;
        (read_capped(file, size, max, &shown)?, 0)
    } else {
        let start = offset.unwrap_or(0);
        let want = limit.unwrap_or(if max > 0 { max } else { size });
        if max > 0 && want > max {
            return Err(ToolError::new(
                ErrorCode::FileTooLarge,
                format!("{want} bytes is over the {max}-byte limit for one read"),
            )
            .with_hint(format!("ask for at most {max} bytes (limit) per read")));
        }
        let mut file = file;
        file.seek(SeekFrom::Start(start))
            .map_err(|e| ToolError::io(&shown, &e))?;
        let mut bytes = Vec::with_capacity(want.min(size.saturating_sub(start)) as usize);
        file.take(want)
            .read_to_end(&mut bytes)
            .map_err(|e| ToolError::io(&shown, &e))?;
        (bytes, start)
    };
    let mut bytes = bytes;
    if let Some(b) = budget {
        // base64 is 4 characters for 3 bytes; the rest is left for the next call.
        let fit = (b.saturating_sub(300) / 4 * 3).max(3);
        bytes.truncate(fit);
    }
    ctx.charge_bytes(bytes.len() as u64)?;
    let whole = start == 0 && bytes.len() as u64 >= size;
    Ok(Output {
        path: shown,
        total_lines: if whole { count_lines(&bytes) } else { 0 },
        lines_uncounted: !whole,
        truncated: start + (bytes.len() as u64) < size,
        content: base64::engine::general_purpose::STANDARD.encode(&bytes),
        size,
        encoding: Encoding::Base64,
        offset: start,
        version: whole.then(|| crate::history::version_of(&bytes)),
        charset: None,
        bom: false,
        mime_type: None,
        image: None,
        pages: None,
    })
}

/// Reads the whole file, never more than `max` bytes even if it grew since `stat`.
fn read_capped(file: cap_std::fs::File, size: u64, max: u64, shown: &str) -> ToolResult<Vec<u8>> {
    let cap = if max > 0 { max } else { u64::MAX };
    let mut bytes = Vec::with_capacity(size.min(cap) as usize);
    file.take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| ToolError::io(shown, &e))?;
    if bytes.len() as u64 > cap {
        return Err(ToolError::new(
            ErrorCode::FileTooLarge,
            format!(
                "{shown} grew past the {} limit while being read",
                human_size(max)
            ),
        )
        .with_hint("read it in parts with offset and limit"));
    }
    Ok(bytes)
}

/// How far past the lines returned a ranged read goes on counting lines. Beyond this the
/// count is a lower bound: a ranged read of a huge file answers in time.
const COUNT_AT_MOST: u64 = 64 * 1024 * 1024;

/// Lines `offset..offset+limit`, the file's line count, and whether the count stopped
/// short of the end (then it is a lower bound). Memory holds at most `max` bytes of
/// returned lines, however long a line is: a line is taken a buffer at a time, never
/// whole, and the deadline is checked every buffer.
fn read_lines(
    ctx: &Ctx,
    file: impl Read,
    offset: u64,
    limit: Option<u64>,
    max: u64,
    shown: &str,
) -> ToolResult<(Vec<u8>, u64, bool)> {
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let mut out = Vec::new();
    let end = limit.map(|l| offset.saturating_add(l));
    // The line being read (1-based), and whether some of it was read already.
    let mut line_no = 1u64;
    let mut partial = false;
    loop {
        if end.is_some_and(|e| line_no >= e) {
            break;
        }
        ctx.check()?;
        let buf = reader.fill_buf().map_err(|e| ToolError::io(shown, &e))?;
        if buf.is_empty() {
            return Ok((out, line_no - 1 + u64::from(partial), false));
        }
        let (take, ends_line) = match memchr::memchr(b'\n', buf) {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        if line_no >= offset {
            if max > 0 && (out.len() + take) as u64 > max {
                return Err(ToolError::new(
                    ErrorCode::FileTooLarge,
                    if line_no == offset {
                        format!("line {line_no} of {shown} alone is over the {} limit", human_size(max))
                    } else {
                        format!("lines {offset}-{line_no} of {shown} are over the {} limit", human_size(max))
                    },
                )
                .with_hint(if line_no == offset {
                    "grep for what you need in it (grep shows the part of a long line around each match; a line \
over 64 MiB is not searched), or read its bytes in parts with encoding base64 (offset and limit count bytes)"
                } else {
                    "ask for fewer lines (a smaller limit)"
                }));
            }
            out.extend_from_slice(&buf[..take]);
        }
        reader.consume(take);
        if ends_line {
            line_no += 1;
            partial = false;
        } else {
            partial = true;
        }
    }
    // Count the rest without keeping it, up to COUNT_AT_MOST bytes.
    let mut rest_lines = 0u64;
    let mut last_byte = b'\n';
    let mut scanned = 0u64;
    loop {
        let buf = reader.fill_buf().map_err(|e| ToolError::io(shown, &e))?;
        if buf.is_empty() {
            break;
        }
        if scanned >= COUNT_AT_MOST {
            return Ok((out, line_no - 1 + rest_lines, true));
        }
        rest_lines += memchr::memchr_iter(b'\n', buf).count() as u64;
        last_byte = buf[buf.len() - 1];
        let n = buf.len();
        scanned += n as u64;
        reader.consume(n);
        ctx.check()?;
    }
    let unterminated = u64::from(last_byte != b'\n');
    Ok((out, line_no - 1 + rest_lines + unterminated, false))
}

fn line_over_budget(shown: &str, line: u64) -> ToolError {
    ToolError::new(
        ErrorCode::FileTooLarge,
        format!("line {line} of {shown} alone is over the output budget (max_output_chars)"),
    )
    .with_hint(
        "grep for what you need in it (grep shows the part of a long line around each match; a line \
over 64 MiB is not searched), or read its bytes in parts with encoding base64 (offset and limit count bytes)",
    )
}

/// Whole lines of `content` that fit `budget` characters as the model reads them
/// (numbered: about 8 more per line), leaving room for the closing notes; whether any
/// were left out. The rendering then says where to continue.
fn fit_lines(content: String, budget: Option<usize>) -> (String, bool) {
    const NUMBERING: usize = 8;
    const NOTES: usize = 300;
    let Some(budget) = budget else {
        return (content, false);
    };
    let room = budget.saturating_sub(NOTES);
    let mut used = 0;
    let mut end = 0;
    for line in content.split_inclusive('\n') {
        let cost = line.len() + NUMBERING;
        if used + cost > room {
            break;
        }
        used += cost;
        end += line.len();
    }
    if end == content.len() {
        return (content, false);
    }
    let mut content = content;
    content.truncate(end);
    (content, true)
}

/// A reader that hashes what passes through it.
struct Hashing<R> {
    inner: R,
    hash: sha2::Sha256,
    read: u64,
}

impl<R: Read> Hashing<R> {
    fn new(inner: R) -> Self {
        Hashing {
            inner,
            hash: sha2::Digest::new(),
            read: 0,
        }
    }

    /// The version of everything read (as [`crate::history::version_of`]).
    fn version(&self) -> String {
        let mut h = hex::encode(sha2::Digest::finalize(self.hash.clone()));
        h.truncate(16);
        h
    }
}

impl<R: Read> Read for &mut Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        sha2::Digest::update(&mut self.hash, &buf[..n]);
        self.read += n as u64;
        Ok(n)
    }
}

fn count_lines(bytes: &[u8]) -> u64 {
    let newlines = memchr::memchr_iter(b'\n', bytes).count() as u64;
    newlines + u64::from(bytes.last().is_some_and(|&b| b != b'\n'))
}

fn binary(shown: &str) -> ToolError {
    ToolError::new(
        ErrorCode::BinaryFile,
        format!("{shown} is not text (not UTF-8, UTF-16 with a BOM, nor a legacy encoding that decodes cleanly)"),
    )
    .with_hint("read it with encoding \"base64\" to get the raw bytes")
}

/// A whole file's text, decoded (see [`crate::text`]; a BOM left out), and its codec.
fn into_text(bytes: Vec<u8>, shown: &str) -> ToolResult<(String, crate::text::Codec)> {
    if crate::text::bom(&bytes).is_none() && memchr::memchr(0, &bytes).is_none() {
        // The UTF-8 fast path: no copy.
        match String::from_utf8(bytes) {
            Ok(s) => return Ok((s, crate::text::Codec::UTF8)),
            Err(e) => {
                let d = crate::text::decode(e.as_bytes()).ok_or_else(|| binary(shown))?;
                return Ok((d.text, d.codec));
            }
        }
    }
    let d = crate::text::decode(&bytes).ok_or_else(|| binary(shown))?;
    Ok((d.text, d.codec))
}

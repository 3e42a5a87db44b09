//! The tools, one file each. Each file holds the params, the output, the run function
//! and the text rendering of one tool; [`register_all`] lists them for the registry.

pub mod apply_patch;
pub mod edit;
pub mod file_delete;
pub mod file_exists;
pub mod file_search;
pub mod get_file_info;
pub mod glob;
pub mod grep;
pub mod list_directory;
pub mod locate;
pub mod media;
pub mod move_path;
pub mod notebook;
pub mod notebook_edit;
pub mod patch_text;
pub mod pdf;
pub mod read_file;
pub mod read_files;
pub mod search_files;
pub mod undo;
pub mod write_file;

use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::registry::Registry;
use crate::search::Base;
use crate::tool::Ctx;

/// Opens a file a change will replace, locked until the change is made (a concurrent
/// change of it, in this process or another, lands before or after, never in between),
/// and reads it. Returns the file, its content, its resolution (whose `parent` is where
/// the change is made) and the share of the memory budget its content holds (see
/// [`crate::search::cost::hold`]): keep it while the content is held.
pub fn read_locked(ctx: &Ctx, wp: &crate::workspace::WsPath, shown: &str) -> ToolResult<Locked> {
    read_locked_within(
        ctx,
        wp,
        shown,
        &|_| Ok(()),
        Hold::copies(crate::search::cost::copies::READ)
            .decoded(crate::search::cost::copies::DECODED),
    )
}

/// A file read to be changed: the open, locked file, its content, its resolution and
/// the memory budget its content holds.
pub type Locked = (
    crate::workspace::SandboxFile,
    Vec<u8>,
    crate::workspace::Resolved,
    crate::search::cost::Permit<'static>,
);

/// What a change holds of a file it reads: `copies` of it, and with `per_line` a span
/// for each of its lines (a hunk or an `old_string` found line by line); for a file whose
/// text is decoded (a BOM, UTF-16, a legacy encoding), `decoded` copies of that text
/// too (measured before the file is read) and, with `per_line`, what re-encoding it
/// keeps per line.
#[derive(Clone, Copy)]
pub struct Hold {
    pub copies: u64,
    pub per_line: bool,
    pub decoded: u64,
}

impl Hold {
    pub fn copies(copies: u64) -> Hold {
        Hold {
            copies,
            per_line: false,
            decoded: 0,
        }
    }

    /// The same, holding `copies` copies of the text of a file that is decoded.
    pub fn decoded(self, copies: u64) -> Hold {
        Hold {
            decoded: copies,
            ..self
        }
    }
}

/// Opens a file locked for a change (see `Workspace::open_file_locked`). A call that
/// holds part of the memory budget already (a write's content, a patch's earlier files)
/// and finds the file locked by another change waits as one of the budget's
/// `MAX_HOLD_WAITERS`: past them it is refused at once (`TIMEOUT`, nothing changed)
/// rather than each queued call keeping its content while it waits.
pub fn open_locked(
    ctx: &Ctx,
    wp: &crate::workspace::WsPath,
    shown: &str,
) -> ToolResult<(
    crate::workspace::SandboxFile,
    crate::workspace::SandboxMetadata,
    crate::workspace::Resolved,
)> {
    use std::sync::atomic::Ordering;
    let ws = ctx.workspace();
    let held = ctx.control().spent.held.load(Ordering::SeqCst);
    if held == 0 {
        return ws.open_file_locked(wp, crate::workspace::LOCK_WAIT);
    }
    match ws.open_file_locked(wp, std::time::Duration::ZERO) {
        Err(e) if e.code == ErrorCode::Conflict => {}
        done => return done,
    }
    let _slot = crate::search::cost::wait_slot(
        held,
        &crate::workspace::shown_in_prose(shown),
        ctx.control(),
    )?;
    ws.open_file_locked(wp, crate::workspace::LOCK_WAIT)
}

/// What a file's text takes once decoded (see [`crate::text::measure`]), read from the
/// open `file` without holding it (the first `limit` bytes decoded, 3 bytes counted for
/// each past them), the file left at its start.
pub fn measure_text(
    file: &crate::workspace::SandboxFile,
    size: u64,
    limit: u64,
    shown: &str,
) -> ToolResult<crate::text::Measured> {
    use std::io::{Seek, SeekFrom};
    let mut f = file;
    let m = crate::text::measure(&mut f, size, limit).map_err(|e| ToolError::io(shown, &e))?;
    f.seek(SeekFrom::Start(0))
        .map_err(|e| ToolError::io(shown, &e))?;
    Ok(m)
}

/// [`read_locked`], the file's size first passed to `check` (which may refuse it before
/// any of it is read), and `hold` taken of the memory budget in one step before it is
/// read (one step: a call that held part and waited for more could wait on another
/// doing the same).
pub fn read_locked_within(
    ctx: &Ctx,
    wp: &crate::workspace::WsPath,
    shown: &str,
    check: &dyn Fn(u64) -> ToolResult<()>,
    hold: Hold,
) -> ToolResult<Locked> {
    use crate::search::cost;
    let (file, meta, at) = open_locked(ctx, wp, shown)?;
    let size = meta.len();
    check(size)?;
    let what = crate::workspace::shown_in_prose(shown);
    // A file whose text is decoded holds that text, up to three bytes a byte: measured
    // first, and held to the size limit as it will be (before anything is decoded).
    let text = if hold.decoded > 0 {
        let m = measure_text(&file, size, size, shown)?;
        if m.decoded {
            check(m.text).map_err(|mut e| {
                e.message.push_str(&format!(
                    " once decoded to UTF-8 ({} on disk)",
                    human_size(size)
                ));
                e
            })?;
        }
        m.decoded.then_some(m.text)
    } else {
        None
    };
    let base = cost::file_weight(size, hold.copies)
        .saturating_add(text.map_or(0, |t| cost::file_weight(t, hold.decoded)));
    // The copies first: a call refused (the budget full, the queue too) is refused
    // before it reads the file even to count its lines.
    let mut held = cost::hold(base, &what, ctx.control())?;
    let lines = if hold.per_line {
        count_lines(&file, size, shown)?
    } else {
        0
    };
    if lines > 0 {
        // Nothing of the file is held yet, so giving the share back and taking the whole
        // weight in one step cannot wait on another call doing the same.
        drop(held);
        let per_line = if text.is_some() {
            cost::copies::PER_LINE + cost::copies::SPLICE_PER_LINE
        } else {
            cost::copies::PER_LINE
        };
        let weight = base.saturating_add(cost::file_weight(lines, per_line));
        held = cost::hold(weight, &what, ctx.control())?;
    }
    let content = read_whole(&file, size, shown)?;
    if hold.per_line && locate::lines_in_bytes(&content) > lines {
        return Err(changed_while_read(shown));
    }
    // Its text measured again on the bytes read (a writer that ignores the lock may
    // have changed them since): never decoded past what was held.
    if hold.decoded > 0 {
        let again = crate::text::measure(&content[..], content.len() as u64, size)
            .map_err(|e| ToolError::io(shown, &e))?;
        if again.decoded && text.is_none_or(|t| again.text > t) {
            return Err(changed_while_read(shown));
        }
    }
    Ok((file, content, at, held))
}

/// The lines of an open file (as [`locate::lines_in`] counts them), read in blocks
/// without holding it, from its start; the file is left at its start.
fn count_lines(file: &crate::workspace::SandboxFile, size: u64, shown: &str) -> ToolResult<u64> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = file;
    let mut buf = vec![0u8; 256 << 10];
    let (mut n, mut seen) = (1u64, 0u64);
    while seen <= size {
        let got = f.read(&mut buf).map_err(|e| ToolError::io(shown, &e))?;
        if got == 0 {
            break;
        }
        seen += got as u64;
        n += memchr::memchr_iter(b'\n', &buf[..got]).count() as u64;
    }
    f.seek(SeekFrom::Start(0))
        .map_err(|e| ToolError::io(shown, &e))?;
    Ok(n)
}

fn changed_while_read(shown: &str) -> ToolError {
    ToolError::new(
        ErrorCode::Conflict,
        format!(
            "{} changed while it was being read; nothing was changed",
            crate::workspace::shown_in_prose(shown)
        ),
    )
    .with_hint("wait until whatever is writing it has finished, then read it again and retry")
}

/// Takes from the shared memory budget what holding `copies` copies of a file of `size`
/// bytes weighs, waiting for room (see [`crate::search::cost::hold`]).
pub fn hold_file(
    ctx: &Ctx,
    size: u64,
    copies: u64,
    shown: &str,
) -> ToolResult<crate::search::cost::Permit<'static>> {
    crate::search::cost::hold(
        crate::search::cost::file_weight(size, copies),
        &crate::workspace::shown_in_prose(shown),
        ctx.control(),
    )
}

/// Reads an open file whose size was `size` when it was opened (and its memory taken
/// for): a file that grew since is refused (`CONFLICT`) rather than read past what was
/// admitted, or changed with its new end cut off.
pub fn read_whole(
    file: &crate::workspace::SandboxFile,
    size: u64,
    shown: &str,
) -> ToolResult<Vec<u8>> {
    use std::io::Read;
    let mut content = Vec::with_capacity(usize::try_from(size).unwrap_or(0).min(1 << 30));
    file.take(size.saturating_add(1))
        .read_to_end(&mut content)
        .map_err(|e| ToolError::io(shown, &e))?;
    if content.len() as u64 > size {
        return Err(changed_while_read(shown));
    }
    Ok(content)
}

/// Pins where a change a question asks about lands: the real place, by the walk made
/// for the question. Run again after the yes, the call must land at the same place: a
/// link on the way swapped meanwhile (`gh -> .github/ISSUE_TEMPLATE` turned into
/// `gh -> .github/workflows`) would take it somewhere the person was not asked about.
pub fn pin_place(ctx: &Ctx, real: &crate::workspace::WsPath) -> ToolResult<()> {
    let ws = ctx.workspace();
    let shown = ws.display(real);
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(&(real.root_index() as u64).to_le_bytes());
    h.update(real.rel().as_os_str().as_encoded_bytes());
    ctx.pin(&shown, h.digest())
}

/// Every tool ferret has, in the order `ferret tools` lists them.
pub fn standard() -> Registry {
    let mut r = Registry::empty();
    register_all(&mut r);
    r
}

/// Adds every tool ferret has to `r`.
pub fn register_all(r: &mut Registry) {
    r.register(read_file::ReadFile);
    r.register(read_files::ReadFiles);
    r.register(list_directory::ListDirectory);
    r.register(file_exists::FileExists);
    r.register(get_file_info::GetFileInfo);
    r.register(grep::Grep);
    r.register(glob::Glob);
    r.register(search_files::SearchFiles);
    r.register(file_search::FileSearch);
    r.register(edit::Edit);
    r.register(write_file::WriteFile);
    r.register(move_path::Move);
    r.register(apply_patch::ApplyPatch);
    r.register(notebook_edit::NotebookEdit);
    r.register(file_delete::FileDelete);
    r.register(undo::Undo);
}

/// `1.5 KiB`, `3.0 MiB`: sizes as people read them.
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut size = bytes as f64;
    let mut unit = 0;
    while size >= 1024.0 && unit < UNITS.len() - 1 {
        size /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{size:.1} {}", UNITS[unit])
    }
}

fn default_dot() -> String {
    ".".to_string()
}

/// Resolves the `path` argument of a search tool. `None` searches every root.
pub fn search_bases(ctx: &Ctx, path: Option<&str>) -> ToolResult<Vec<Base>> {
    let ws = ctx.workspace();
    let Some(path) = path else {
        if let Some(scope) = ctx.scope() {
            return Ok(scope
                .iter()
                .filter_map(|d| ws.locate(d))
                .map(|wp| Base { wp, is_file: false })
                .collect());
        }
        return Ok((0..ws.roots().len())
            .map(|i| Base {
                wp: ws.root_path(i),
                is_file: false,
            })
            .collect());
    };
    let wp = ctx.resolve(path)?;
    ctx.set_audit_path(ws.display(&wp));
    let (real, meta) = ws.stat(&wp)?.ok_or_else(|| {
        ToolError::new(
            ErrorCode::NotFound,
            format!("{}: no such file or directory", ws.shown_name(&wp)),
        )
        .with_hint(
            "check the path with glob or list_directory; paths are relative to the workspace root",
        )
    })?;
    Ok(vec![Base {
        wp: real,
        is_file: meta.is_file(),
    }])
}

/// For a dry run: the question a real run would stop to ask (`asked`, the confirmation
/// it would need), so a preview never hides that the change would ask the user first.
/// `None` when it would not ask; any other error stands.
pub fn would_ask(asked: ToolResult<()>) -> ToolResult<Option<String>> {
    match asked {
        Ok(()) => Ok(None),
        Err(e) if e.code == ErrorCode::ConfirmationRequired => Ok(Some(e.message)),
        Err(e) => Err(e),
    }
}

/// The clause a folder's move, delete or move back by undo asks with when the folder
/// holds entries the deny rules match (`holds` looks), if it does. A dry run does not
/// look: it says the same of every folder, whatever it holds, since a dry run asks no
/// one and an agent sweeping folders with it would learn, unasked and unseen, which
/// hold `.env` files and keys (round 24).
pub fn holds_secrets(
    dry_run: bool,
    holds: impl FnOnce() -> ToolResult<bool>,
) -> ToolResult<Option<&'static str>> {
    if dry_run {
        return Ok(Some(
            "if it holds secrets or VCS internals (a dry run does not say whether it does, nor whether a \
             real run would refuse to leave them unguarded)",
        ));
    }
    Ok(holds()?.then_some("which holds secrets or VCS internals"))
}

/// A dry run's line saying what a real run would ask, if anything.
pub fn render_would_ask(q: Option<&String>) -> String {
    q.map(|q| format!("[a real run would stop to ask the user first: {q}]\n"))
        .unwrap_or_default()
}

/// A search result's warnings as text, one `[warning: …]` line each, put first so an
/// agent reads them before the answer they qualify.
pub fn render_warnings(warnings: &[String]) -> String {
    warnings
        .iter()
        .map(|w| format!("[warning: {w}]\n"))
        .collect()
}

/// How a search's answer is incomplete: it reached the call's time limit
/// (`request_timeout`) before every file was searched, and answers with the matches in
/// the files searched until then.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct Incomplete {
    /// Why: "time limit".
    pub reason: String,
    /// Files searched before the search stopped.
    pub files_searched: u64,
    /// How to get a whole answer.
    pub hint: String,
}

/// What a search does when its walk ran out of time (`out_of_time`, from
/// [`crate::search::until_deadline`]): nothing when it did not; the `TIMEOUT` error when
/// it found nothing by then; else the account of an incomplete answer, which the tool
/// returns with what it found (and `truncated` set).
pub fn incomplete(
    ctx: &Ctx,
    out_of_time: bool,
    found_any: bool,
    files_searched: u64,
) -> ToolResult<Option<Incomplete>> {
    if !out_of_time {
        return Ok(None);
    }
    if !found_any {
        let e = ctx.control().timeout_error();
        return Err(e.with_hint(format!(
            "nothing was found in the {files_searched} files searched before the time limit; narrow path \
or glob, or make the pattern more specific"
        )));
    }
    Ok(Some(Incomplete {
        reason: "time limit".into(),
        files_searched,
        hint: format!(
            "the search stopped at its time limit ({}) and shows what the files searched until then hold; \
other files may match, and totals count only what was found. Narrow path or glob, or make the pattern more \
specific; the same search again is often faster (files now cached)",
            humantime::format_duration(ctx.control().timeout)
        ),
    }))
}

/// The text line saying an answer is incomplete.
pub fn render_incomplete(i: &Incomplete) -> String {
    format!(
        "[incomplete ({}): searched {} files before stopping; {}]\n",
        i.reason, i.files_searched, i.hint
    )
}

/// The most bytes (before and after together) a change's diff is computed over: a diff
/// holds both texts line by line, and a change may be 64 MiB. Past it a line says so.
pub const DIFF_MAX_BYTES: usize = 4 << 20;

/// A file's bytes as a diff shows them: UTF-8 as it is; text in another encoding (or
/// with a BOM) decoded as read_file decodes it, with the charset's name to put in the
/// diff's header; anything else (binary) lossily.
pub fn diff_text(bytes: &[u8]) -> (std::borrow::Cow<'_, str>, Option<String>) {
    if crate::text::bom(bytes).is_none()
        && let Ok(s) = std::str::from_utf8(bytes)
    {
        return (std::borrow::Cow::Borrowed(s), None);
    }
    match crate::text::decode(bytes) {
        Some(d) => (std::borrow::Cow::Owned(d.text), d.codec.label()),
        None => (String::from_utf8_lossy(bytes), None),
    }
}

/// A diff header's name with the charset the side was decoded from, if any:
/// "a/x.txt (now)" becomes "a/x.txt (now, windows-1252)".
pub fn with_charset(name: String, charset: Option<&str>) -> String {
    match (charset, name.strip_suffix(')')) {
        (None, _) => name,
        (Some(c), Some(open)) => format!("{open}, {c})"),
        (Some(c), None) => format!("{name} ({c})"),
    }
}

/// The unified diff of a change, bounded in memory and time (one second; similar then
/// gives a coarser diff, still correct).
pub fn unified_diff(old: &str, new: &str, a: &str, b: &str, radius: usize) -> String {
    if old.len() + new.len() > DIFF_MAX_BYTES {
        return format!(
            "(no diff shown: {} before, {} after; diffs are shown up to {} in all)\n",
            human_size(old.len() as u64),
            human_size(new.len() as u64),
            human_size(DIFF_MAX_BYTES as u64)
        );
    }
    // Diffed as shown: a line break other than `\n` (a lone `\r`, U+2028…) inside a line
    // is escaped first, so it neither splits the diff's lines (similar takes a lone `\r`
    // for a line end) nor lets a file forge a line of the answer.
    let (old, new) = (shown_lines(old), shown_lines(new));
    similar::TextDiff::configure()
        .timeout(std::time::Duration::from_secs(1))
        .diff_lines(old.as_ref(), new.as_ref())
        .unified_diff()
        .context_radius(radius)
        .header(a, b)
        .to_string()
}

/// `text` with [`escape_breaks`] applied inside each line; `\n` and `\r\n` line ends kept.
fn shown_lines(text: &str) -> std::borrow::Cow<'_, str> {
    if !text
        .char_indices()
        .any(|(i, c)| is_break(c) && !(c == '\r' && text[i + 1..].starts_with('\n')))
    {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for line in text.split_inclusive('\n') {
        let (body, end) = if let Some(b) = line.strip_suffix("\r\n") {
            (b, "\r\n")
        } else if let Some(b) = line.strip_suffix('\n') {
            (b, "\n")
        } else {
            (line, "")
        };
        out.push_str(&escape_breaks(body));
        out.push_str(end);
    }
    std::borrow::Cow::Owned(out)
}

/// `text` (one line of a file) with the line breaks other than `\n` that readers also
/// break on (`\r`, VT, FF, the information separators, NEL, U+2028, U+2029) escaped as
/// Rust escapes (`\r`, `\u{2028}`): in a text answer a file's line stays one line, so
/// no file can forge a grep hit of another file or a line of ferret's own. Structured
/// results keep the bytes.
pub fn escape_breaks(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(is_break) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if is_break(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// See [`escape_breaks`].
pub fn is_break(c: char) -> bool {
    matches!(
        c,
        '\r' | '\u{b}' | '\u{c}' | '\u{1c}'..='\u{1e}' | '\u{85}' | '\u{2028}' | '\u{2029}'
    )
}

/// The last check of each file of a group (apply_patch, undo of a patch), just before
/// anything lands: its folder still where its path leads, and a file it replaces still
/// the one it read, holding what it read.
pub fn group_placed(
    ws: &crate::workspace::Workspace,
) -> impl Fn(&crate::history::group::Planned) -> ToolResult<()> + '_ {
    move |p| {
        ws.still_holds(&p.dir, p.op.root, &p.op.rel, &p.op.path)?;
        match &p.old {
            Some(old) => ws.still_the_file(&p.dir, &p.name, old, p.before.as_deref(), &p.op.path),
            None => Ok(()),
        }
    }
}

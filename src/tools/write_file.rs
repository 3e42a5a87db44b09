//! `write_file`: create a file (and the directories missing on the way), or with
//! `overwrite` replace one, atomically, journalled and undoable.
//!
//! A new file is staged beside its name and renamed into place with `RENAME_NOREPLACE`,
//! so a file that appears meanwhile is never replaced; the directories on the way are
//! made through directory handles ([`Workspace::make_parents`]). Replacing goes the way
//! an edit goes: the old content backed up, the new one renamed over it, a diff returned.
//! Undo of a create removes the file only if it still holds what was written.
//!
//! [`Workspace::make_parents`]: crate::workspace::Workspace::make_parents

use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::history::{Action, Entry, sha256};
use crate::tool::{Annotations, Ctx, Tool, ToolMeta};
use crate::tools::human_size;
use crate::tools::read_file::Encoding;
use crate::workspace::shown;
use base64::Engine;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    pub path: String,
    pub content: String,
    /// Default: keep the file's.
    #[serde(default)]
    #[schemars(with = "Encoding")]
    pub encoding: Option<Encoding>,
    #[serde(default)]
    pub overwrite: bool,
    /// From read_file; CONFLICT if changed since.
    #[serde(default)]
    #[schemars(with = "String")]
    pub expected_version: Option<String>,
    #[serde(default)]
    pub dry_run: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    pub path: String,
    /// A new file (false: an existing one was replaced).
    pub created: bool,
    /// Bytes written.
    pub size: u64,
    /// Directories created for it, outermost first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub created_dirs: Vec<String>,
    /// Unified diff from the old content (replacing a text file only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// The old content was kept, so undo can restore it (absent on a dry run, or with
    /// backups off). Where it is kept is the host's business: no path is sent.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub backed_up: bool,
    /// The version of the content written (for a later expected_version).
    pub version: String,
    /// The undo journal's id for this change (absent on a dry run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change_id: Option<u64>,
    /// A dry run of a change that would ask the user first: the question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub would_ask: Option<String>,
    pub dry_run: bool,
    // Replacing a file in another encoding than plain UTF-8: the encoding written
    // (kept from the old content, as its CRLF line endings are).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub charset: Option<String>,
    // The old content's CRLF line endings were kept (the content had bare "\n").
    #[serde(skip)]
    pub crlf: bool,
}

pub struct WriteFile;

impl Tool for WriteFile {
    type Params = Params;
    type Output = Output;

    fn meta(&self) -> ToolMeta {
        ToolMeta {
            name: "write_file",
            title: "Write a file",
            description: "Create a file (and its directories); an existing one needs overwrite, keeping its charset and \
endings (prefer edit for parts). undo reverts; dry_run previews.",
            annotations: Annotations::WRITE,
            served_by_default: true,
        }
    }

    fn run(&self, ctx: &Ctx, p: Params) -> ToolResult<Output> {
        let as_text = p.encoding.is_none();
        let content = match p.encoding.unwrap_or_default() {
            Encoding::Utf8 => p.content.into_bytes(),
            Encoding::Base64 => base64::engine::general_purpose::STANDARD
                .decode(p.content.trim())
                .map_err(|e| {
                    ToolError::invalid(format!("content is not valid base64: {e}"))
                        .with_hint("send text with encoding utf-8, or standard base64 with padding")
                })?,
        };
        let max = ctx.config().max_edit_file_size;
        if max > 0 && content.len() as u64 > max {
            return Err(ToolError::new(
                ErrorCode::FileTooLarge,
                format!(
                    "the content is {}, over the {} limit for a write",
                    human_size(content.len() as u64),
                    human_size(max)
                ),
            ));
        }
        let ws = ctx.workspace();
        let wp = ctx.resolve(&p.path)?;
        let shown = ws.display(&wp);
        ctx.set_audit_path(shown.clone());
        // The new content is held already; counted so that other calls' files wait
        // while it is (the old content, when replaced, is counted as it is read), with
        // the bytes it is encoded to over a text file.
        let _held = super::hold_file(
            ctx,
            content.len() as u64,
            crate::search::cost::copies::WRITE,
            &shown,
        )?;
        let dry_run = p.dry_run || ctx.config().dry_run;
        let version = crate::history::version_of(&content);

        // What stands there now, without creating anything yet.
        let probe = ws.entry(&wp, true)?;
        match &probe.meta {
            Some(m) if m.is_dir() => Err(ToolError::new(
                ErrorCode::IsADirectory,
                format!("{shown} is a directory"),
            )),
            Some(_) if !p.overwrite => Err(ToolError::new(
                ErrorCode::AlreadyExists,
                format!("{shown} already exists; nothing was written"),
            )
            .with_hint("use edit to change part of it, or pass overwrite: true to replace it (it is backed up first)")),
            Some(_) => replace(ctx, &wp, &shown, content, as_text, p.expected_version.as_deref(), dry_run),
            None => {
                if p.expected_version.is_some() {
                    return Err(ToolError::new(
                        ErrorCode::Conflict,
                        format!("{shown} no longer exists; it was deleted since it was read"),
                    )
                    .with_hint("leave out expected_version to create it anew"));
                }
                ws.check_new(&probe.real, false)?;
                if as_text && let Ok(text) = std::str::from_utf8(&content) {
                    check_new_text(text, &shown)?;
                }
                create(ctx, &wp, &probe.real, &shown, &content, version, dry_run)
            }
        }
    }

    fn render(&self, o: &Output) -> String {
        let verb = match (o.dry_run, o.created) {
            (true, true) => "Would create",
            (true, false) => "Would replace",
            (false, true) => "Created",
            (false, false) => "Replaced",
        };
        let mut s = format!("{verb} {} ({} bytes", shown(&o.path), o.size);
        match (&o.charset, o.crlf) {
            (Some(e), true) => s.push_str(&format!(", {e}, CRLF kept")),
            (Some(e), false) => s.push_str(&format!(", {e} kept")),
            (None, true) => s.push_str(", CRLF kept"),
            (None, false) => {}
        }
        if !o.created_dirs.is_empty() {
            let dirs: Vec<_> = o.created_dirs.iter().map(|d| shown(d)).collect();
            s.push_str(&format!("; new directories: {}", dirs.join(", ")));
        }
        if o.backed_up {
            // Never the backup's host path (see edit's receipt).
            s.push_str("; backed up");
        }
        if let Some(id) = o.change_id {
            s.push_str(&format!("; change {id}, undo with undo"));
        }
        s.push_str(&format!("; version {})", o.version));
        if o.would_ask.is_some() {
            s.push('\n');
            s.push_str(super::render_would_ask(o.would_ask.as_ref()).trim_end());
        }
        if let Some(d) = &o.diff {
            s.push_str(":\n");
            s.push_str(d);
        }
        s
    }
}

#[allow(clippy::too_many_arguments)] // the create's parts, each already checked
fn create(
    ctx: &Ctx,
    wp: &crate::workspace::WsPath,
    real: &crate::workspace::WsPath,
    shown: &str,
    content: &[u8],
    version: String,
    dry_run: bool,
) -> ToolResult<Output> {
    let ws = ctx.workspace();
    let mut out = Output {
        // What is created: through a dangling link in the root, the link's target (as
        // a shell's `>` does), named as such rather than the link.
        path: if real == wp {
            shown.to_string()
        } else {
            ws.display(real)
        },
        created: true,
        size: content.len() as u64,
        created_dirs: Vec::new(),
        diff: None,
        backed_up: false,
        version,
        change_id: None,
        would_ask: None,
        dry_run,
        charset: None,
        crlf: false,
    };
    // The rules ask about the real name (a directory on the way may be a link), and
    // about the name as spelled: a write under `.github/workflows/` asks even when
    // `.github` is a link to somewhere else.
    let listed = ws.needs_confirmation(real, false) || ws.needs_confirmation(wp, false);
    let asked = if listed {
        super::pin_place(ctx, real)?;
        ctx.confirm(
            &format!(
                "creating {}{} (on the confirm list)",
                crate::workspace::shown_in_prose(&ws.display(real)),
                through(ws, wp, real)
            ),
            false,
        )
    } else {
        Ok(())
    };
    if dry_run {
        out.would_ask = super::would_ask(asked)?;
        return Ok(out);
    }
    asked?;
    let history = ctx.history()?;
    // Where the name leads at the write, by the walk that opens its directory: one on
    // the way may have been swapped for a link since the question was settled.
    // Asked about, it lands where the question said, or nowhere.
    let unasked = ws.unasked(listed, wp);
    let settle = |now: &crate::workspace::WsPath| -> ToolResult<()> {
        if listed && now != real {
            return Err(ToolError::new(
                ErrorCode::Conflict,
                format!(
                    "{} now leads to {}, not where the question said (a directory on the way changed during the call); nothing was changed",
                    ws.shown_name(wp),
                    crate::workspace::shown_in_prose(&ws.display(now))
                ),
            )
            .with_hint("call again: the user is then asked about where it goes now"));
        }
        unasked(now)
    };
    let (at, created) = ws.make_parents(wp, false, &settle)?;
    // Removed again if the file does not land.
    let made = ws.made_dirs(at.parent.as_ref(), &created);
    out.created_dirs = created
        .iter()
        .map(|rel| ws.display(&ws.root_path(wp.root_index()).join(rel)))
        .collect();
    if at.meta.is_some() {
        return Err(ToolError::new(
            ErrorCode::AlreadyExists,
            format!("{shown} appeared while it was being created; it was left as it is"),
        ));
    }
    let (Some(dir), Some(name)) = (&at.parent, at.name()) else {
        return Err(ToolError::new(
            ErrorCode::NotFound,
            format!("{shown}: no place to create it"),
        ));
    };
    let mut entry = Entry::new(
        Action::Create,
        ws.display(&at.real),
        at.real.root_index(),
        at.real.rel(),
    );
    entry.sha256_after = Some(sha256(content));
    entry.created_dirs = created;
    // Once staged, just before it lands: its folder (made by this call or not) still
    // where its path leads.
    let real = at.real.clone();
    let placed = || ws.still_holds(dir, real.root_index(), real.rel(), shown);
    // From its last check of where its folder stands to its landing, no move or delete
    // of any ferret process takes the folder (see `Workspace::writes_serial`).
    let _serial = ws.writes_serial(dir, crate::workspace::LOCK_WAIT, &|| ctx.check())?;
    out.change_id = Some(history.create(dir, name, content, entry, &placed)?);
    made.keep();
    Ok(out)
}

/// ", through NAME" when the name as spelled is what put a change on the confirm list
/// (`.github` a link elsewhere): the question then names what the person knows.
pub(super) fn through(
    ws: &crate::workspace::Workspace,
    spelled: &crate::workspace::WsPath,
    real: &crate::workspace::WsPath,
) -> String {
    if real != spelled
        && !ws.needs_confirmation(real, false)
        && ws.needs_confirmation(spelled, false)
    {
        format!(
            ", through {}",
            crate::workspace::shown_in_prose(&ws.display(spelled))
        )
    } else {
        String::new()
    }
}

/// Text written over an existing text file, with no encoding given, in the file's
/// encoding (and BOM) and, when the text has bare "\n" line ends and the file's were
/// mostly CRLF, with CRLF: the bytes, the old and new text for the diff, the encoding
/// kept (when not plain UTF-8), and whether CRLF was.
type Kept = (Vec<u8>, Option<(String, String)>, Option<String>, bool);

fn keep_encoding(before: &[u8], content: Vec<u8>, shown: &str) -> ToolResult<Kept> {
    let new =
        String::from_utf8(content).map_err(|_| ToolError::invalid("content is not UTF-8 text"))?;
    let Some(old) = crate::text::decode(before) else {
        check_new_text(&new, shown)?;
        return Ok((new.into_bytes(), None, None, false));
    };
    let crlf = !new.contains('\r') && new.contains('\n') && crate::text::dominant_crlf(&old.text);
    // The content's own leading U+FEFF is text: written after the file's BOM, it reads
    // back (the BOM is not shown by read_file, so the agent never sends it).
    let new = if crlf { new.replace('\n', "\r\n") } else { new };
    let unwritable = |u| super::edit::unwritable(shown, &u, &old.codec, "written");
    let bytes =
        crate::text::encode(&old.codec, &new, old.text.contains('\u{FFFD}')).map_err(unwritable)?;
    // Read back as read_file will (the encoding detected anew), it must be the content.
    crate::text::check_reads_back(None, &bytes, &new).map_err(unwritable)?;
    Ok((bytes, Some((old.text, new)), old.codec.label(), crlf))
}

/// Text written as UTF-8 where no encoding was given (a new file, or over one that is
/// not text) must read back as it: a leading U+FEFF would be taken for a BOM, a NUL
/// would make it binary.
fn check_new_text(new: &str, shown: &str) -> ToolResult<()> {
    crate::text::check_reads_back(None, new.as_bytes(), new)
        .map_err(|u| super::edit::unwritable(shown, &u, &crate::text::Codec::UTF8, "written"))
}

#[allow(clippy::too_many_arguments)] // the replace's parts, each already checked
fn replace(
    ctx: &Ctx,
    wp: &crate::workspace::WsPath,
    shown: &str,
    content: Vec<u8>,
    as_text: bool,
    expected_version: Option<&str>,
    dry_run: bool,
) -> ToolResult<Output> {
    // The old bytes and their text (decoded, or copied when UTF-8) for the diff.
    let (file, before, at, _held) = super::read_locked_within(
        ctx,
        wp,
        shown,
        &|_| Ok(()),
        super::Hold::copies(crate::search::cost::copies::WRITE)
            .decoded(crate::search::cost::copies::DECODED),
    )?;
    if let Some(v) = expected_version {
        super::edit::check_version(ctx, v, &before, shown)?;
    }
    let (content, old_new, text_encoding, crlf) = if as_text {
        keep_encoding(&before, content, shown)?
    } else {
        let texts = match (std::str::from_utf8(&before), std::str::from_utf8(&content)) {
            (Ok(old), Ok(new)) => Some((old.to_string(), new.to_string())),
            _ => None,
        };
        (content, texts, None, false)
    };
    let content = &content[..];
    let version = crate::history::version_of(content);
    let diff = old_new.map(|(old, new)| {
        super::unified_diff(
            &old,
            &new,
            &format!("a/{}", crate::workspace::shown(shown)),
            &format!("b/{}", crate::workspace::shown(shown)),
            3,
        )
    });
    let mut out = Output {
        path: shown.to_string(),
        created: false,
        size: content.len() as u64,
        created_dirs: Vec::new(),
        diff,
        backed_up: false,
        version,
        change_id: None,
        would_ask: None,
        dry_run,
        charset: text_encoding,
        crlf,
    };
    if dry_run {
        out.would_ask = super::would_ask(super::edit::confirm_listed(ctx, &at, wp, "replacing"))?;
        return Ok(out);
    }
    let (backup, id) =
        super::edit::replace_file(ctx, &at, wp, &file, &before, content, "replacing")?;
    out.change_id = Some(id);
    out.backed_up = backup.is_some();
    Ok(out)
}

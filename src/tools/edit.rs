//! `edit`: replace a string in a file, atomically, with a backup and an undo entry.
//!
//! The string is found exactly, or failing that by the forgiving rules of [`locate`]
//! (line endings, trailing whitespace, uniform indentation, Unicode punctuation as ASCII;
//! each only where it finds one place), and the result says which rule matched. A miss
//! names the closest region with a diff. The file keeps its line endings (per line: see
//! [`locate::fit`]), its final newline or the lack of one, its UTF-8 BOM (bytes before
//! the text, never part of a match) and its permissions; an edit through a symlink inside
//! the workspace changes the target and leaves the link.

use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::history::{Action, Entry, sha256};
use crate::search::cost;
use crate::tool::{Annotations, Ctx, Tool, ToolMeta};
use crate::tools::human_size;
use crate::tools::locate::{self, Miss, Rule};
use crate::workspace::shown;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::os::fd::AsFd;

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    pub path: String,
    pub old_string: String,
    pub new_string: String,
    #[serde(default)]
    pub replace_all: bool,
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
    /// Occurrences replaced.
    pub replacements: usize,
    /// How old_string was found: exact, or by which forgiving rule.
    #[serde(rename = "match")]
    pub matched: Rule,
    /// Unified diff of the change, 3 lines of context.
    pub diff: String,
    /// The old content was kept, so undo can restore it (absent on a dry run, or with
    /// backups off). Where it is kept is the host's business: no path is sent.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub backed_up: bool,
    /// The undo journal's id for this change (absent on a dry run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change_id: Option<u64>,
    /// A dry run of a change that would ask the user first: the question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub would_ask: Option<String>,
    pub dry_run: bool,
    // The file's encoding when not plain UTF-8 ("windows-1252", "utf-16le with BOM"):
    // the change was written in it, every other byte as it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub charset: Option<String>,
}

pub struct Edit;

impl Tool for Edit {
    type Params = Params;
    type Output = Output;

    fn meta(&self) -> ToolMeta {
        ToolMeta {
            name: "edit",
            title: "Edit a file",
            description: "Replace old_string with new_string (prefer it to write_file). \
old_string must be unique (add nearby lines) unless replace_all; forgives line endings, spaces, indents, \
Unicode punctuation; keeps charset, BOM, line endings (or refuses). undo reverts; dry_run previews.",
            annotations: Annotations::WRITE,
            served_by_default: true,
        }
    }

    fn run(&self, ctx: &Ctx, p: Params) -> ToolResult<Output> {
        if p.old_string.is_empty() {
            return Err(ToolError::invalid("old_string is empty: edit replaces text that is in the file")
                .with_hint("to create a file or replace all of it, use write_file (overwrite: true for an existing one); to add text, include a neighbouring line in old_string and repeat it in new_string"));
        }
        if p.old_string == p.new_string {
            return Err(ToolError::invalid(
                "old_string and new_string are the same: nothing would change",
            ));
        }
        let ws = ctx.workspace();
        let wp = ctx.resolve(&p.path)?;
        let shown = ws.display(&wp);
        ctx.set_audit_path(shown.clone());
        // Locked until the change is made: a concurrent edit of the same file, in this
        // process or another, applies on top of this one instead of overwriting it.
        let max = ctx.config().max_edit_file_size;
        // Its copies (and a span per line, for a match found line by line) taken from the
        // shared memory budget before any is made: concurrent edits of big files wait
        // their turn instead of adding up.
        let (file, before, at, _held) = super::read_locked_within(
            ctx,
            &wp,
            &shown,
            &|size| {
                if max > 0 && size > max {
                    return Err(ToolError::new(
                        ErrorCode::FileTooLarge,
                        format!(
                            "{shown} is {}, over the {} edit limit",
                            human_size(size),
                            human_size(max)
                        ),
                    ));
                }
                Ok(())
            },
            super::Hold {
                copies: cost::copies::EDIT,
                per_line: true,
                decoded: cost::copies::DECODED_EDIT,
            },
        )?;
        let (bom, codec, text) = decode_for_change(&before, &shown)?;
        let text = &*text;

        if let Some(v) = &p.expected_version {
            check_version(ctx, v, &before, &shown)?;
        }
        let limit = if max > 0 { max } else { u64::MAX };
        let found = locate::locate(
            text,
            &p.old_string,
            &p.new_string,
            p.replace_all,
            limit.saturating_sub(bom.len() as u64),
            &|| ctx.check().is_err(),
        )
        .map_err(|m| stopped_or_miss(ctx, m, &shown))?;
        let after_text = found.apply(text);
        let replacements = found.places.len();
        let after = encode_change(codec, bom, &before, text, &after_text, &shown)?;

        let diff = super::unified_diff(
            text,
            &after_text,
            &format!("a/{}", crate::workspace::shown(&shown)),
            &format!("b/{}", crate::workspace::shown(&shown)),
            3,
        );
        let dry_run = p.dry_run || ctx.config().dry_run;
        if dry_run {
            return Ok(Output {
                path: shown,
                replacements,
                matched: found.rule,
                diff,
                backed_up: false,
                change_id: None,
                would_ask: super::would_ask(confirm_listed(ctx, &at, &wp, "editing"))?,
                dry_run,
                charset: codec.label(),
            });
        }

        let (backup, id) = replace_file(ctx, &at, &wp, &file, &before, &after, "editing")?;
        Ok(Output {
            path: shown,
            replacements,
            matched: found.rule,
            diff,
            backed_up: backup.is_some(),
            change_id: Some(id),
            would_ask: None,
            dry_run: false,
            charset: codec.label(),
        })
    }

    fn render(&self, o: &Output) -> String {
        let mut how = o
            .matched
            .describe()
            .map(|d| format!(", matched {d}"))
            .unwrap_or_default();
        if let Some(e) = &o.charset {
            how.push_str(&format!(", written in {e}"));
        }
        let head = if o.dry_run {
            format!(
                "Would edit {} ({} replacement{}{how}):\n",
                shown(&o.path),
                o.replacements,
                plural(o.replacements)
            )
        } else {
            format!(
                "Edited {} ({} replacement{}{how}; {}; change {}, undo with undo):\n",
                shown(&o.path),
                o.replacements,
                plural(o.replacements),
                // Not the backup's host path: useless to an agent, and it tells the
                // host's layout.
                if o.backed_up {
                    "backed up"
                } else {
                    "no backup, backups are off: this edit cannot be undone"
                },
                o.change_id.unwrap_or_default()
            )
        };
        format!(
            "{head}{}{}",
            super::render_would_ask(o.would_ask.as_ref()),
            o.diff
        )
    }
}

/// A file's text for a change: a UTF-8 BOM's bytes (kept before the text, never part of
/// a match), the codec, and the text (borrowed when the file is UTF-8). Files in other
/// encodings are decoded ([`crate::text`]); what decodes in none is `BINARY_FILE`.
pub fn decode_for_change<'a>(
    before: &'a [u8],
    shown: &str,
) -> ToolResult<(&'a [u8], crate::text::Codec, std::borrow::Cow<'a, str>)> {
    use crate::text::Codec;
    let (bom, rest) = match before.strip_prefix(b"\xEF\xBB\xBF") {
        Some(rest) => (&before[..3], rest),
        None => (&before[..0], before),
    };
    if let Ok(t) = std::str::from_utf8(rest) {
        let codec = Codec {
            encoding: encoding_rs::UTF_8,
            bom: !bom.is_empty(),
        };
        return Ok((bom, codec, std::borrow::Cow::Borrowed(t)));
    }
    match crate::text::decode(before) {
        Some(d) => Ok((&before[..0], d.codec, std::borrow::Cow::Owned(d.text))),
        None => Err(ToolError::new(
            ErrorCode::BinaryFile,
            format!(
                "{shown} is not text (not UTF-8, UTF-16 with a BOM, nor a legacy encoding that decodes cleanly); edit changes text files"
            ),
        )),
    }
}

/// The bytes of a changed file: UTF-8 as it is (after its BOM); another encoding with
/// the changed lines encoded and every other byte the original ([`crate::text::splice`]).
/// Text the encoding cannot hold is `UNREPRESENTABLE`, and nothing is changed.
pub fn encode_change(
    codec: crate::text::Codec,
    bom: &[u8],
    before: &[u8],
    old: &str,
    new: &str,
    shown: &str,
) -> ToolResult<Vec<u8>> {
    let after = if codec.encoding == encoding_rs::UTF_8 && !codec.bom || bom.len() == 3 {
        let mut after = Vec::with_capacity(bom.len() + new.len());
        after.extend_from_slice(bom);
        after.extend_from_slice(new.as_bytes());
        after
    } else {
        let deadline = Some(std::time::Instant::now() + std::time::Duration::from_secs(2));
        crate::text::splice(&codec, before, old, new, deadline)
            .map_err(|u| unwritable(shown, &u, &codec, "changed"))?
    };
    // Read back as read_file will read it (the encoding detected anew), it must be the
    // new text: else the edit would change how the whole file reads.
    crate::text::check_reads_back(Some((before, old)), &after, new)
        .map_err(|u| unwritable(shown, &u, &codec, "changed"))?;
    Ok(after)
}

/// `UNREPRESENTABLE` for text a file's encoding cannot hold, or bytes that would read
/// back as other text (then with a hint of its own).
pub fn unwritable(
    shown: &str,
    u: &crate::text::Unwritable,
    codec: &crate::text::Codec,
    verb: &str,
) -> ToolError {
    let e = ToolError::new(
        ErrorCode::Unrepresentable,
        format!(
            "{}: {}; nothing was {verb}",
            crate::workspace::shown(shown),
            u.describe(codec)
        ),
    );
    match u {
        crate::text::Unwritable::Misread(..) => e.with_hint(
            "change the text so it reads back as meant, or write the whole file as UTF-8: write_file with encoding utf-8 (exact bytes, no check)",
        ),
        _ => e,
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Asks when the file is on the confirm list (`verb` says what for).
pub fn confirm_listed(
    ctx: &Ctx,
    at: &crate::workspace::Resolved,
    spelled: &crate::workspace::WsPath,
    verb: &str,
) -> ToolResult<()> {
    let ws = ctx.workspace();
    // The real file, or the name as spelled (`.github/workflows/x.yml` through a link
    // `.github -> docs`), as a new file's write asks (round 20: edits, overwrites and
    // deletes by the listed name went unasked where creates asked).
    if ws.needs_confirmation(&at.real, false) || ws.needs_confirmation(spelled, false) {
        // The file as it stands when asked: rewritten while the person reads the
        // question (through a hard link elsewhere, by a person), the change made from it
        // is not the one they approved.
        ctx.pin(
            &ws.display(&at.real),
            ws.state_stamp(at, &|| ctx.check())?.unwrap_or_default(),
        )?;
        ctx.confirm(
            &format!(
                "{verb} {} (on the confirm list){}",
                crate::workspace::shown_in_prose(&ws.display(&at.real)),
                super::write_file::through(ws, spelled, &at.real)
            ),
            false,
        )?;
    }
    Ok(())
}

/// Replaces the whole content of the open, locked `file` (resolved as `at`) with `after`:
/// the confirm list asked (`verb` says what for), the old content backed up when backups
/// are on, the change journalled. Returns the backup and the change's id.
pub fn replace_file(
    ctx: &Ctx,
    at: &crate::workspace::Resolved,
    spelled: &crate::workspace::WsPath,
    file: &crate::workspace::SandboxFile,
    before: &[u8],
    after: &[u8],
    verb: &str,
) -> ToolResult<(Option<std::path::PathBuf>, u64)> {
    let ws = ctx.workspace();
    let real = &at.real;
    let shown = ws.display(real);
    confirm_listed(ctx, at, spelled, verb)?;
    let history = ctx.history()?;
    let backup = if ctx.config().backup_enabled {
        Some(history.backup(real.root_index(), real.rel(), before)?)
    } else {
        None
    };
    let mut entry = Entry::new(Action::Edit, shown.clone(), real.root_index(), real.rel());
    entry.backup_path = backup.clone();
    entry.sha256_before = Some(sha256(before));
    entry.sha256_after = Some(sha256(after));
    let (Some(dir), Some(name)) = (&at.parent, at.name()) else {
        return Err(ToolError::new(
            ErrorCode::NotFound,
            format!("{shown} is gone"),
        ));
    };
    let placed = || {
        ws.still_holds(dir, real.root_index(), real.rel(), &shown)?;
        ws.still_the_file(dir, name, file, Some(before), &shown)
    };
    // From its last check of where its folder stands to its rename, no move or delete
    // of any ferret process takes the folder (see `Workspace::writes_serial`).
    let _serial = ws.writes_serial(dir, crate::workspace::LOCK_WAIT, &|| ctx.check())?;
    let id = history.replace(
        dir,
        name,
        Some(file.as_fd()),
        after,
        entry,
        |_| Ok(()),
        &placed,
    )?;
    Ok((backup, id))
}

/// Refuses a change to a file that no longer holds the version the agent read, showing
/// what changed since when this process still has that version.
pub fn check_version(ctx: &Ctx, expected: &str, now: &[u8], shown: &str) -> ToolResult<()> {
    // This message keeps its diff's line breaks: the name in it is shown as results show it.
    let shown = &*crate::workspace::shown(shown);
    let current = crate::history::version_of(now);
    if current == expected.trim() {
        return Ok(());
    }
    let mut message = format!(
        "{shown} has changed since version {expected} was read (it is now version {current}); nothing was changed"
    );
    // The file's text as read_file shows it (in its charset), not its raw bytes.
    if let Some(then) = ctx.seen().get(expected.trim()) {
        let (now, _) = super::diff_text(now);
        let diff = super::unified_diff(
            &then,
            &now,
            &format!("{shown} (version {expected})"),
            &format!("{shown} (now)"),
            2,
        );
        let diff: Vec<&str> = diff.lines().take(60).collect();
        message.push_str(":\n");
        message.push_str(&diff.join("\n"));
    }
    Err(ToolError::new(ErrorCode::Conflict, message).with_hint(
        "read the file again and make the change against what it holds now (with the new version)",
    ))
}

/// The error for an `old_string` that was not found once.
/// The error for a miss, or for the call's stop (`TIMEOUT`, `CANCELLED`) when that is
/// why the search for a place ended.
pub fn stopped_or_miss(ctx: &Ctx, m: Miss, shown: &str) -> ToolError {
    match m {
        Miss::Stopped => ctx.check().err().unwrap_or_else(|| {
            ToolError::new(ErrorCode::Timeout, "the call was stopped").with_hint("try again")
        }),
        m => miss(m, shown),
    }
}

pub fn miss(m: Miss, shown: &str) -> ToolError {
    // A NO_MATCH keeps its diff's line breaks: the name in it is shown as results show it.
    let shown = &*crate::workspace::shown(shown);
    match m {
        Miss::Stopped => ToolError::new(ErrorCode::Timeout, format!("{shown}: the call was stopped while looking for old_string")),
        Miss::TooMany { count } => ToolError::new(
            ErrorCode::InvalidArgument,
            format!(
                "old_string occurs {count} times in {shown}; one change replaces at most {} places",
                locate::MAX_PLACES
            ),
        )
        .with_hint("make old_string longer so it names fewer places, or write the new content with write_file"),
        Miss::TooLarge { bytes, limit } => ToolError::new(
            ErrorCode::FileTooLarge,
            format!(
                "{shown} would be {} after this change, over the {} edit limit; nothing was changed",
                human_size(bytes),
                human_size(limit)
            ),
        )
        .with_hint("change fewer places or shorter text (max_edit_file_size sets the limit)"),
        Miss::NotUnique { rule, lines, total } => {
            let how = rule.describe().map(|d| format!(" ({d})")).unwrap_or_default();
            let mut list: Vec<String> = lines.iter().map(usize::to_string).collect();
            if total > lines.len() {
                list.push(format!("and {} more", total - lines.len()));
            }
            let hint = if rule == Rule::Exact || rule == Rule::LineEndings {
                "add surrounding lines to old_string so it occurs once, or set replace_all to change every one"
            } else {
                "copy old_string exactly from one of those places, with enough surrounding lines to make it unique"
            };
            ToolError::new(
                ErrorCode::NotUnique,
                format!(
                    "old_string occurs {total} times in {shown}{how} (lines {})",
                    list.join(", ")
                ),
            )
            .with_hint(hint)
        }
        Miss::NotFound { closest: Some(c) } => ToolError::new(
            ErrorCode::NoMatch,
            format!(
                "old_string was not found in {shown}; the closest text is at lines {}-{} (- expected, + in the file):\n{}",
                c.first_line, c.last_line, c.diff
            ),
        )
        .with_hint(if c.whitespace_only {
            format!(
                "the text is at lines {}-{} but differs in whitespace inside lines (spaces, tabs or line breaks); copy it exactly as the file has it (the + lines)",
                c.first_line, c.last_line
            )
        } else {
            format!(
                "copy old_string from lines {}-{} as the file has them (the + lines), or read the file there first",
                c.first_line, c.last_line
            )
        }),
        Miss::NotFound { closest: None } => ToolError::new(
            ErrorCode::NoMatch,
            format!("old_string was not found in {shown}, nor anything like it"),
        )
        .with_hint("read the file first and copy old_string exactly from it"),
    }
}

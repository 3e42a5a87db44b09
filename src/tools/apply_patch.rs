//! `apply_patch`: many changes to many files as one all-or-nothing step, undone by one
//! `undo`.
//!
//! Two input shapes, one change set: structured `changes` (edits, create, delete,
//! move_to per file) or the text format of [`patch_text`]. Every change is checked and
//! every new content computed before anything is written: one hunk that does not apply
//! means no file changes, and the error names the change and the hunk. Hunks are found
//! like `edit`'s `old_string` ([`locate`], forgiving whitespace and saying so). The
//! commit is one journal group ([`crate::history::group`]): never half a patch, even if
//! the process is killed.

use super::locate::{self, Rule};
use super::patch_text::{self, FileChange, Hunk};
use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::history::group::Planned;
use crate::history::{Action, Entry, GroupOp, OpKind, sha256};
use crate::search::cost;
use crate::tool::{Annotations, Ctx, Tool, ToolMeta};
use crate::tools::human_size;
use crate::workspace::WsPath;
use crate::workspace::shown;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditSpec {
    pub old_string: String,
    pub new_string: String,
    #[serde(default)]
    pub replace_all: bool,
}

// One file's change: `edits`, or `create` (its whole content), or `delete`; `move_to`
// renames it (with or without edits).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Change {
    pub path: String,
    #[serde(default)]
    pub edits: Vec<EditSpec>,
    /// New file content.
    #[serde(default)]
    #[schemars(with = "String")]
    pub create: Option<String>,
    #[serde(default)]
    pub delete: bool,
    #[serde(default)]
    #[schemars(with = "String")]
    pub move_to: Option<String>,
    /// From read_file.
    #[serde(default)]
    #[schemars(with = "String")]
    pub expected_version: Option<String>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    #[serde(default)]
    pub changes: Vec<Change>,
    #[serde(default)]
    #[schemars(with = "String")]
    pub patch: Option<String>,
    /// With patch: versions by path.
    #[serde(default)]
    pub expected_versions: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    pub dry_run: bool,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct FileOutcome {
    pub path: String,
    /// update, add, delete or move.
    pub action: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moved_to: Option<String>,
    /// How each hunk was found (updates).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub matches: Vec<Rule>,
    /// Unified diff (text files).
    pub diff: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    pub files: Vec<FileOutcome>,
    /// The undo journal's id for the whole patch (absent on a dry run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change_id: Option<u64>,
    /// A dry run of a change that would ask the user first: the question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub would_ask: Option<String>,
    pub dry_run: bool,
}

pub struct ApplyPatch;

impl Tool for ApplyPatch {
    type Params = Params;
    type Output = Output;

    fn meta(&self) -> ToolMeta {
        ToolMeta {
            name: "apply_patch",
            title: "Change many files at once",
            description: "Change files all-or-nothing; undo reverts all; dry_run previews. changes: [{path, \
edits: [{old_string, new_string, replace_all}]} | {path, create} | {path, delete} | {path, \
move_to}], or patch: \"*** Begin Patch\" text (Add/Delete/Update File, @@ hunks, \
Move to, End Patch; wrappers, indents forgiven; hunks match like edit).",
            annotations: Annotations::WRITE,
            served_by_default: true,
        }
    }

    fn run(&self, ctx: &Ctx, p: Params) -> ToolResult<Output> {
        // Versions by path, from either shape.
        let mut versions = p.expected_versions;
        for c in &p.changes {
            if let Some(v) = &c.expected_version {
                versions.insert(c.path.clone(), v.clone());
            }
        }
        let changes = match (p.patch, p.changes.is_empty()) {
            (Some(text), true) => patch_text::parse(&text).map_err(|e| {
                ToolError::invalid(format!("the patch does not parse: {e}")).with_hint(
                    "see the tool description for the format, or pass structured changes",
                )
            })?,
            (None, false) => p
                .changes
                .into_iter()
                .enumerate()
                .map(|(i, c)| structured(i + 1, c))
                .collect::<ToolResult<Vec<_>>>()?,
            (Some(_), false) => {
                return Err(ToolError::invalid("give either changes or patch, not both"));
            }
            (None, true) => {
                return Err(ToolError::invalid(
                    "nothing to apply: give changes or patch",
                ));
            }
        };
        check_shape(&changes)?;
        let dry_run = p.dry_run || ctx.config().dry_run;
        let plan = plan(ctx, &changes, &versions)?;
        let files = plan.iter().map(|f| f.outcome.clone()).collect();
        let mut out = Output {
            files,
            change_id: None,
            would_ask: None,
            dry_run,
        };
        if dry_run {
            out.would_ask = super::would_ask(confirm_listed(ctx, &plan).map(|_| ()))?;
            return Ok(out);
        }
        commit(ctx, plan, &mut out)?;
        Ok(out)
    }

    fn render(&self, o: &Output) -> String {
        let verb = if o.dry_run { "Would apply" } else { "Applied" };
        let mut s = format!(
            "{verb} a patch to {} file{}",
            o.files.len(),
            if o.files.len() == 1 { "" } else { "s" }
        );
        if let Some(id) = o.change_id {
            s.push_str(&format!(" (change {id}; one undo reverts it all)"));
        }
        s.push_str(":\n");
        s.push_str(&super::render_would_ask(o.would_ask.as_ref()));
        for f in &o.files {
            let fuzzy: Vec<&str> = f.matches.iter().filter_map(|r| r.describe()).collect();
            s.push_str(&format!("- {} {}", f.action, shown(&f.path)));
            if let Some(to) = &f.moved_to {
                s.push_str(&format!(" -> {}", shown(to)));
            }
            if !fuzzy.is_empty() {
                s.push_str(&format!(" (matched {})", fuzzy.join("; ")));
            }
            s.push('\n');
        }
        for f in &o.files {
            s.push_str(&f.diff);
        }
        s
    }
}

/// A structured change as the text format would say it.
fn structured(n: usize, c: Change) -> ToolResult<FileChange> {
    let kinds =
        usize::from(!c.edits.is_empty()) + usize::from(c.create.is_some()) + usize::from(c.delete);
    let bad = |what: &str| ToolError::invalid(format!("change {n} ({}): {what}", c.path));
    match (kinds, c.create, c.delete) {
        (0, None, false) if c.move_to.is_none() => Err(bad(
            "says nothing to do: give edits, create, delete or move_to",
        )),
        (k, _, _) if k > 1 => Err(bad("give only one of edits, create and delete")),
        (_, Some(_), _) if c.expected_version.is_some() => Err(bad(
            "expected_version goes with a file that exists, not with create",
        )),
        (_, Some(content), _) if c.move_to.is_none() => Ok(FileChange::Add {
            path: c.path,
            content,
        }),
        (_, None, true) if c.move_to.is_none() => Ok(FileChange::Delete { path: c.path }),
        (_, None, false) => Ok(FileChange::Update {
            path: c.path,
            hunks: c
                .edits
                .into_iter()
                .map(|e| Hunk {
                    header: None,
                    old: e.old_string,
                    new: e.new_string,
                    replace_all: e.replace_all,
                    whole_lines: false,
                })
                .collect(),
            move_to: c.move_to,
        }),
        _ => Err(bad(
            "move_to goes with edits (or alone), not with create or delete",
        )),
    }
}

/// One file of the plan.
struct PlannedFile {
    outcome: FileOutcome,
    ops: Vec<PlanOp>,
    /// The shares of the memory budget its contents hold, until the patch is done.
    _held: Vec<crate::search::cost::Permit<'static>>,
}

struct PlanOp {
    kind: OpKind,
    wp: WsPath,
    content: Option<Vec<u8>>,
    before: Option<Vec<u8>>,
    /// The open file (Replace, Remove): its lock is held until the commit.
    old: Option<(cap_std::fs::File, crate::workspace::Resolved)>,
}

/// Checks every change and computes every new content, writing nothing.
fn plan(
    ctx: &Ctx,
    changes: &[FileChange],
    versions: &std::collections::BTreeMap<String, String>,
) -> ToolResult<Vec<PlannedFile>> {
    let ws = ctx.workspace();
    let max = ctx.config().max_edit_file_size;
    // Each file by its absolute path and its identity: one file named through two roots
    // (`--root ws --root ws/sub`), or by two hard links, is one file (the patch waited
    // on its own lock, then failed).
    let mut touched: Vec<(std::path::PathBuf, Option<(u64, u64)>)> = Vec::new();
    let mut claim = |ctx: &Ctx, wp: &WsPath, n: usize| -> ToolResult<()> {
        let at = ws.entry(wp, false)?;
        let abs = ws.abs_path(&at.real);
        let id = match (&at.parent, at.name()) {
            (Some(d), Some(name)) => crate::workspace::write::identity_at(d, name).ok(),
            _ => None,
        };
        if touched
            .iter()
            .any(|(p, i)| *p == abs || (id.is_some() && *i == id))
        {
            return Err(ToolError::invalid(format!(
                "change {n}: {} is changed twice in one patch (by this name or another)",
                ws.display(&at.real)
            ))
            .with_hint("put all of a file's hunks in one change, under one name"));
        }
        ctx.check()?;
        touched.push((abs, id));
        Ok(())
    };
    let mut out = Vec::new();
    // What the plan holds (old and new contents, diffs), over all its files.
    let mut held: u64 = 0;
    for (i, change) in changes.iter().enumerate() {
        let n = i + 1;
        let wp = ctx.resolve(change.path())?;
        let shown = ws.display(&wp);
        claim(ctx, &wp, n)?;
        // Deleting or moving a symlink would remove the file it points to, not the link:
        // refused, naming the file (an update through a link changes the file, as edit does).
        let removes = matches!(
            change,
            FileChange::Delete { .. }
                | FileChange::Update {
                    move_to: Some(_),
                    ..
                }
        );
        if removes && ws.entry(&wp, false)?.meta.is_some_and(|m| m.is_symlink()) {
            let target = ws
                .entry(&wp, true)
                .map(|r| ws.display(&r.real))
                .unwrap_or_default();
            return Err(ToolError::invalid(format!(
                "change {n}: {shown} is a symbolic link (to {target}); a patch deletes and moves files"
            ))
            .with_hint("use file_delete or move for the link itself, or name the file it points to"));
        }
        let at_change = |e: ToolError| ToolError {
            message: format!(
                "change {n} ({}): {}",
                crate::workspace::shown(&shown),
                e.message
            ),
            ..e
        };
        match change {
            FileChange::Add { content, .. } => {
                let probe = ws.entry(&wp, true).map_err(at_change)?;
                ws.check_new(&probe.real, false).map_err(at_change)?;
                if probe.meta.is_some() {
                    return Err(at_change(ToolError::new(
                        ErrorCode::AlreadyExists,
                        "the file to add already exists; nothing was changed",
                    ))
                    .with_hint("update it instead (*** Update File, or edits)"));
                }
                check_size(max, content.len(), &shown)?;
                // Written as UTF-8, it must read back as it (a leading U+FEFF would be
                // taken for a BOM, a NUL would make it binary).
                crate::text::check_reads_back(None, content.as_bytes(), content).map_err(|u| {
                    at_change(super::edit::unwritable(
                        &shown,
                        &u,
                        &crate::text::Codec::UTF8,
                        "changed",
                    ))
                })?;
                keep(
                    &mut out,
                    &mut held,
                    PlannedFile {
                        outcome: FileOutcome {
                            path: shown.clone(),
                            action: "add".into(),
                            moved_to: None,
                            matches: Vec::new(),
                            diff: diff("", content, "/dev/null", &shown),
                        },
                        ops: vec![PlanOp {
                            kind: OpKind::Create,
                            wp,
                            content: Some(content.clone().into_bytes()),
                            before: None,
                            old: None,
                        }],
                        _held: Vec::new(),
                    },
                )?;
            }
            FileChange::Delete { .. } => {
                let (file, before, at, permit) = read_locked(
                    ctx,
                    &wp,
                    &shown,
                    super::Hold::copies(cost::copies::READ).decoded(cost::copies::DECODED),
                )
                .map_err(at_change)?;
                if let Some(v) = versions.get(change.path()) {
                    super::edit::check_version(ctx, v, &before, &shown).map_err(at_change)?;
                }
                // Decoded as read_file reads it (a legacy file's diff is its text).
                let text = super::diff_text(&before).0.into_owned();
                keep(
                    &mut out,
                    &mut held,
                    PlannedFile {
                        outcome: FileOutcome {
                            path: shown.clone(),
                            action: "delete".into(),
                            moved_to: None,
                            matches: Vec::new(),
                            diff: diff(&text, "", &shown, "/dev/null"),
                        },
                        ops: vec![PlanOp {
                            kind: OpKind::Remove,
                            wp,
                            content: None,
                            before: Some(before),
                            old: Some((file, at)),
                        }],
                        _held: vec![permit],
                    },
                )?;
            }
            FileChange::Update { hunks, move_to, .. } => {
                // The bytes read, the texts the hunks build, the new bytes, and a span
                // per line for a hunk found line by line: taken from the memory budget
                // before the file is read.
                let (file, before, at, read_held) = read_locked(
                    ctx,
                    &wp,
                    &shown,
                    super::Hold {
                        copies: cost::copies::READ + cost::copies::PATCH_UPDATE,
                        per_line: true,
                        decoded: cost::copies::DECODED_EDIT,
                    },
                )
                .map_err(at_change)?;
                if let Some(v) = versions.get(change.path()) {
                    super::edit::check_version(ctx, v, &before, &shown).map_err(at_change)?;
                }
                // Any encoding read (crate::text), written back in it.
                let (bom, codec, text) =
                    super::edit::decode_for_change(&before, &shown).map_err(|e| {
                        at_change(ToolError::new(
                            e.code,
                            "not text in an encoding ferret reads; patches change text files",
                        ))
                    })?;
                let text = &*text;
                let permits = vec![read_held];
                // Within the file's limit and what the patch may still hold.
                let file_max = if max > 0 { max } else { u64::MAX };
                let limit = file_max.min(PATCH_HOLDS.saturating_sub(held + before.len() as u64));
                let (new_text, matches) = apply_hunks(
                    text,
                    hunks,
                    n,
                    &shown,
                    limit.saturating_sub(bom.len() as u64),
                    &|| ctx.check(),
                )
                .map_err(|e| {
                    // The patch's own total, not the file's size, is what ran out: say so.
                    if e.code == ErrorCode::FileTooLarge && limit < file_max {
                        ToolError::new(
                            ErrorCode::FileTooLarge,
                            format!(
                                "change {n} ({shown}): the patch would hold more than {} of files at once; nothing was changed",
                                human_size(PATCH_HOLDS)
                            ),
                        )
                        .with_hint("split it into smaller patches (fewer or smaller files each)")
                    } else {
                        e
                    }
                })?;
                let after =
                    super::edit::encode_change(codec, bom, &before, text, &new_text, &shown)
                        .map_err(at_change)?;
                check_size(max, after.len(), &shown)?;
                let mut outcome = FileOutcome {
                    path: shown.clone(),
                    action: "update".into(),
                    moved_to: None,
                    matches,
                    diff: diff(text, &new_text, &shown, &shown),
                };
                let ops = match move_to {
                    None => vec![PlanOp {
                        kind: OpKind::Replace,
                        wp,
                        content: Some(after),
                        before: Some(before),
                        old: Some((file, at)),
                    }],
                    Some(to) => {
                        let dst = ctx.resolve(to)?;
                        let dst_shown = ws.display(&dst);
                        claim(ctx, &dst, n)?;
                        let there = ws.entry(&dst, false)?;
                        ws.check_new(&there.real, false).map_err(at_change)?;
                        // A link to a secret is the secret: denied, as `move` says, not
                        // "already exists" (which would tell that the hidden link is there).
                        if there.meta.as_ref().is_some_and(|m| m.is_symlink())
                            && let Err(e) = ws.entry(&dst, true)
                            && e.code == ErrorCode::DeniedPattern
                        {
                            return Err(at_change(e));
                        }
                        if there.meta.is_some() {
                            return Err(at_change(ToolError::new(
                                ErrorCode::AlreadyExists,
                                format!("{dst_shown} already exists; nothing was changed"),
                            )
                            .with_hint("choose another *** Move to: path, or move or delete what is there first")));
                        }
                        outcome.action = "move".into();
                        outcome.diff = diff(text, &new_text, &shown, &dst_shown);
                        outcome.moved_to = Some(dst_shown);
                        vec![
                            PlanOp {
                                kind: OpKind::Create,
                                wp: dst,
                                content: Some(after),
                                before: None,
                                old: None,
                            },
                            PlanOp {
                                kind: OpKind::Remove,
                                wp,
                                content: None,
                                before: Some(before),
                                old: Some((file, at)),
                            },
                        ]
                    }
                };
                keep(
                    &mut out,
                    &mut held,
                    PlannedFile {
                        outcome,
                        ops,
                        _held: permits,
                    },
                )?;
            }
        }
    }
    Ok(out)
}

/// The most a patch holds while it is planned and written, all files together: each
/// file's old and new content and its diff. Under every per-file cap, 60 files of 99 000
/// places each held 2.9 GB at once (a dry run too).
pub const PATCH_HOLDS: u64 = 256 << 20;
/// The diffs a patch's result carries, all files together; past it a file's diff is left
/// out (its action and path still say what changes).
pub const PATCH_DIFFS: usize = 4 << 20;

/// Adds a planned file, counting what it holds against [`PATCH_HOLDS`] and its diff
/// against [`PATCH_DIFFS`].
fn keep(out: &mut Vec<PlannedFile>, held: &mut u64, mut file: PlannedFile) -> ToolResult<()> {
    let diffs: usize = out.iter().map(|f| f.outcome.diff.len()).sum();
    if diffs + file.outcome.diff.len() > PATCH_DIFFS {
        file.outcome.diff = format!(
            "(diff left out: the patch's diffs passed {} MiB)\n",
            PATCH_DIFFS >> 20
        );
    }
    let bytes: u64 = file
        .ops
        .iter()
        .map(|o| {
            o.content.as_ref().map_or(0, |c| c.len() as u64)
                + o.before.as_ref().map_or(0, |b| b.len() as u64)
        })
        .sum::<u64>()
        + file.outcome.diff.len() as u64;
    *held += bytes;
    if *held > PATCH_HOLDS {
        return Err(ToolError::new(
            ErrorCode::FileTooLarge,
            format!(
                "the patch's files come to over {} MiB of old and new content; nothing was changed",
                PATCH_HOLDS >> 20
            ),
        )
        .with_hint("split it into several patches"));
    }
    out.push(file);
    Ok(())
}

/// Most files one patch changes.
pub const MAX_FILES: usize = 1000;
/// Most hunks in one patch: each searches and rebuilds its file, so a patch of 40 000
/// one-line hunks over a 1 MB file took 25 s before any limit applied.
pub const MAX_HUNKS: usize = 5000;

/// Refuses a patch too big in shape before any file is opened.
fn check_shape(changes: &[FileChange]) -> ToolResult<()> {
    let hunks: usize = changes
        .iter()
        .map(|c| match c {
            FileChange::Update { hunks, .. } => hunks.len(),
            _ => 0,
        })
        .sum();
    if changes.len() > MAX_FILES || hunks > MAX_HUNKS {
        return Err(ToolError::invalid(format!(
            "the patch changes {} files in {hunks} hunks; one patch changes at most {MAX_FILES} files \
             in {MAX_HUNKS} hunks",
            changes.len()
        ))
        .with_hint("split it into several patches, or use write_file for a file rewritten whole"));
    }
    Ok(())
}

fn check_size(max: u64, len: usize, shown: &str) -> ToolResult<()> {
    if max > 0 && len as u64 > max {
        return Err(ToolError::new(
            ErrorCode::FileTooLarge,
            format!(
                "{shown} would be {}, over the {} limit",
                human_size(len as u64),
                human_size(max)
            ),
        ));
    }
    Ok(())
}

/// Opens a file to change, locked, and reads it, within the edit size limit.
fn read_locked(
    ctx: &Ctx,
    wp: &WsPath,
    shown: &str,
    hold: super::Hold,
) -> ToolResult<super::Locked> {
    let max = ctx.config().max_edit_file_size;
    // Refused by its size before it is read (or any memory taken for it).
    let locked = super::read_locked_within(
        ctx,
        wp,
        shown,
        &|size| check_size(max, usize::try_from(size).unwrap_or(usize::MAX), shown),
        hold,
    )?;
    check_size(max, locked.1.len(), shown)?;
    Ok(locked)
}

/// Applies an update's hunks in order; the error names the change and the hunk.
/// `limit` bounds the text's length after each hunk, checked before the hunk is built.
pub fn apply_hunks(
    text: &str,
    hunks: &[Hunk],
    n: usize,
    shown: &str,
    limit: u64,
    check: &dyn Fn() -> ToolResult<()>,
) -> ToolResult<(String, Vec<Rule>)> {
    let mut text = text.to_string();
    let mut rules = Vec::new();
    for (h, hunk) in hunks.iter().enumerate() {
        // Each hunk searches and rebuilds the file: the deadline is checked between them.
        check()?;
        let at = |e: ToolError| ToolError {
            message: format!(
                "change {n} ({}), hunk {}: {}",
                crate::workspace::shown(shown),
                h + 1,
                e.message
            ),
            ..e
        };
        if hunk.old.is_empty() {
            // Lines added with nothing to anchor them: at the end of the file, ended
            // like its last line.
            let end = text.len();
            let eol = locate::fit(&text, end..end, "", "\n");
            let new = locate::fit(&text, end..end, "", &hunk.new);
            let gap = if !text.is_empty() && !text.ends_with('\n') {
                eol.as_str()
            } else {
                ""
            };
            let bytes = (text.len() + gap.len() + new.len()) as u64;
            if bytes > limit {
                return Err(at(super::edit::miss(
                    locate::Miss::TooLarge { bytes, limit },
                    shown,
                )));
            }
            text.push_str(gap);
            text.push_str(&new);
            rules.push(Rule::Exact);
            continue;
        }
        // After the header line, when there is one.
        let start = match &hunk.header {
            Some(hd) => {
                let want = hd.trim();
                let mut off = 0;
                let mut found = None;
                for line in text.split_inclusive('\n') {
                    if line.trim() == want || line.contains(want) {
                        found = Some(off);
                        break;
                    }
                    off += line.len();
                }
                found.ok_or_else(|| {
                    at(ToolError::new(
                        ErrorCode::NoMatch,
                        format!("its @@ line {want:?} is not in the file"),
                    ))
                    .with_hint("copy the @@ line from the file as it is, or leave it empty")
                })?
            }
            None => 0,
        };
        let found = locate::locate(
            &text[start..],
            &hunk.old,
            &hunk.new,
            hunk.replace_all,
            limit.saturating_sub(start as u64),
            &|| check().is_err(),
        )
        .map_err(|m| match m {
            // The call's own TIMEOUT or CANCELLED, as the check says it.
            locate::Miss::Stopped => check()
                .err()
                .unwrap_or_else(|| at(super::edit::miss(m, shown))),
            m => at(super::edit::miss(m, shown)),
        })?;
        // A hunk's lines are whole lines: `-ROOT = False` must not change the end of
        // `ALLOW_ROOT = False`. A place that begins or ends inside a line is refused.
        let here = &text.as_bytes()[start..];
        let whole = |r: &std::ops::Range<usize>| {
            let starts = r.start == 0 || here[r.start - 1] == b'\n';
            let ends = r.end == here.len()
                || r.end == 0
                || here[r.end - 1] == b'\n'
                || matches!(here[r.end], b'\n' | b'\r');
            starts && ends
        };
        if let Some(p) = found
            .places
            .iter()
            .find(|p| hunk.whole_lines && !whole(&p.range))
        {
            let line = locate::line_of(&text, start + p.range.start);
            return Err(at(ToolError::new(
                ErrorCode::NoMatch,
                format!(
                    "its lines are in {shown} only as parts of longer lines (line {line}); a hunk's lines are whole lines"
                ),
            )
            .with_hint("copy the whole lines from the file, as they are")));
        }
        let mut shifted = found.clone();
        for p in &mut shifted.places {
            p.range = p.range.start + start..p.range.end + start;
        }
        rules.push(found.rule);
        text = shifted.apply(&text);
    }
    Ok((text, rules))
}

fn diff(old: &str, new: &str, a: &str, b: &str) -> String {
    let a = if a == "/dev/null" {
        a.to_string()
    } else {
        format!("a/{}", shown(a))
    };
    let b = if b == "/dev/null" {
        b.to_string()
    } else {
        format!("b/{}", shown(b))
    };
    super::unified_diff(old, new, &a, &b, 3)
}

/// Asks when a file the plan changes is on the confirm list. The confirm list asks
/// about real names: an open file's resolution, or for a new file its path as far as it
/// exists.
fn confirm_listed(ctx: &Ctx, plan: &[PlannedFile]) -> ToolResult<bool> {
    let ws = ctx.workspace();
    let mut listed: Vec<String> = Vec::new();
    for op in plan.iter().flat_map(|f| &f.ops) {
        let real = match &op.old {
            Some((_, at)) => at.real.clone(),
            None => ws.entry(&op.wp, true)?.real,
        };
        // The real name, and the name as spelled (`.github` may be a link elsewhere).
        if ws.needs_confirmation(&real, false) || ws.needs_confirmation(&op.wp, false) {
            // Each file as it stands when asked (see edit::confirm_listed).
            if let Some((_, at)) = &op.old {
                ctx.pin(
                    &ws.display(&real),
                    ws.state_stamp(at, &|| ctx.check())?.unwrap_or_default(),
                )?;
            }
            listed.push(crate::workspace::shown_in_prose(&ws.display(&real)).into_owned());
        }
    }
    if !listed.is_empty() {
        // The whole patch as it stands when asked: every file it reads (a move's source
        // too, rewritten meanwhile, would land rewritten) and every place it writes.
        for op in plan.iter().flat_map(|f| &f.ops) {
            match &op.old {
                Some((_, at)) => {
                    ctx.pin(
                        &ws.display(&at.real),
                        ws.state_stamp(at, &|| ctx.check())?.unwrap_or_default(),
                    )?;
                    super::pin_place(ctx, &at.real)?;
                }
                None => super::pin_place(ctx, &ws.entry(&op.wp, true)?.real)?,
            }
        }
        ctx.confirm(
            &format!("patching {} (on the confirm list)", listed.join(", ")),
            false,
        )?;
    }
    Ok(!listed.is_empty())
}

/// Writes the plan as one journal group.
fn commit(ctx: &Ctx, plan: Vec<PlannedFile>, out: &mut Output) -> ToolResult<()> {
    let ws = ctx.workspace();
    // Every name the group will record, checked before any file's backup is written.
    for op in plan.iter().flat_map(|f| &f.ops) {
        crate::workspace::changeable_name(op.wp.rel())?;
        if let Some((_, at)) = &op.old {
            crate::workspace::changeable_name(at.real.rel())?;
        }
    }
    let asked = confirm_listed(ctx, &plan)?;
    let history = ctx.history()?;
    let backups = ctx.config().backup_enabled;
    if backups {
        let bytes = plan
            .iter()
            .flat_map(|f| &f.ops)
            .filter_map(|op| op.before.as_ref())
            .map(|b| b.len() as u64)
            .sum();
        history.backups_fit("this patch", bytes)?;
    }
    let mut planned = Vec::new();
    // A move is two ops, its create then its remove: the remove names its create, so
    // recovery settles the two as one.
    let ops = plan.into_iter().flat_map(|f| {
        let is_move = f.ops.len() == 2;
        f.ops
            .into_iter()
            .enumerate()
            .map(move |(k, op)| (op, is_move && k == 1))
    });
    // The folders made for new files, removed again (innermost first) unless the
    // group lands.
    let mut made = MadeAll(Vec::new());
    for (op, removes_moved) in ops {
        let moved_by = removes_moved.then(|| planned.len().saturating_sub(1));
        let (at, created_dirs, old) = match op.old {
            Some((file, at)) => (at, Vec::new(), Some(file)),
            None => {
                // Where the name leads at the write, by the walk that opens its
                // directory: one on the way may have been swapped for a link since the
                // question was settled.
                let (at, created) = ws.make_parents(&op.wp, false, &ws.unasked(asked, &op.wp))?;
                made.0.push(ws.made_dirs(at.parent.as_ref(), &created));
                if at.meta.is_some() {
                    return Err(ToolError::new(
                        ErrorCode::AlreadyExists,
                        format!(
                            "{} appeared while the patch was being applied; nothing was changed",
                            ws.display(&op.wp)
                        ),
                    )
                    .with_hint("read it, then make the patch update it instead of adding it"));
                }
                (at, created, None)
            }
        };
        let real = at.real.clone();
        let shown = ws.display(&real);
        let backup_path = match (&op.before, backups) {
            (Some(b), true) => Some(history.backup(real.root_index(), real.rel(), b)?),
            _ => None,
        };
        let (Some(dir), Some(name)) = (at.parent, real.rel().file_name().map(|n| n.to_os_string()))
        else {
            return Err(ToolError::new(
                ErrorCode::NotFound,
                format!("{shown}: no place for it"),
            ));
        };
        planned.push(Planned {
            op: GroupOp {
                kind: op.kind,
                path: shown,
                root: real.root_index(),
                rel: real.rel().to_path_buf(),
                temp: None,
                backup_path,
                sha256_before: op.before.as_deref().map(sha256),
                sha256_after: op.content.as_deref().map(sha256),
                created_dirs,
                moved_by,
                // Filled in from the old file as the group begins.
                mode: None,
            },
            dir,
            name,
            content: op.content,
            before: op.before,
            old,
        });
    }
    let first = planned
        .first()
        .map(|p| (p.op.path.clone(), p.op.root, p.op.rel.clone()));
    let Some((path, root, rel)) = first else {
        return Ok(());
    };
    let label = if planned.len() > 1 {
        format!("{path} and {} more", planned.len() - 1)
    } else {
        path
    };
    ctx.set_audit_path(label.clone());
    // Every file the record names, as shown, and how many the patch touches.
    ctx.set_audit_paths(
        planned
            .iter()
            .map(|p| p.op.path.clone())
            .take(crate::audit::MAX_PATHS)
            .collect(),
    );
    ctx.count_files(planned.len() as u64);
    let entry = Entry::new(Action::Patch, label, root, &rel);
    let placed = super::group_placed(ctx.workspace());
    // A patch runs one at a time with every ferret process's moves and deletes, as they
    // do (see workspace::serial): a file a patch moved into a folder being deleted for
    // good was deleted with it, and a folder moved under `.github` between the check of
    // where a new file lands and its landing took the file there unasked.
    let roots: Vec<usize> = planned.iter().map(|p| p.op.root).collect();
    let _serial = ws.moves_serial(&roots, crate::workspace::LOCK_WAIT, &|| ctx.check())?;
    out.change_id = Some(history.apply_group(planned, entry, |_| Ok(()), &placed)?);
    for m in std::mem::take(&mut made.0) {
        m.keep();
    }
    Ok(())
}

/// The folders a patch made, each file's removed (if still empty) the last first when
/// the patch does not land: a refused patch of many new files left thousands behind.
struct MadeAll(Vec<crate::workspace::MadeDirs>);

impl Drop for MadeAll {
    fn drop(&mut self) {
        while let Some(m) = self.0.pop() {
            drop(m);
        }
    }
}

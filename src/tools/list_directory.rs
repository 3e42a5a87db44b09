//! `list_directory`: a directory's entries, optionally recursive.
//!
//! The walk goes through sandboxed directory handles opened without following symlinks,
//! so it cannot be led out of the workspace or into a loop.
//!
//! What it shows follows the one rule every tool keeps (a listing, `grep` and `glob`
//! agree; a path named explicitly is always read):
//! - denied entries (secrets) are invisible: not shown, not counted, not even in the
//!   count of hidden names;
//! - gitignored entries (`.gitignore`, `.ignore`, `.git/info/exclude`, judged by the
//!   search walker's own rules) are left out as `grep` and `glob` leave them out, and
//!   counted (`left_out.gitignored`); `no_ignore` lists them, as it searches them;
//! - hidden names (`.x`) likewise, counted in `left_out.hidden`;
//! - skipped noise (`node_modules/`, `target/`…) is shown, marked `skipped`, and not
//!   entered (searches do not enter it either); naming it lists it;
//! - a symlink leading outside the workspace is shown, marked `outside`, and never
//!   followed.

use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::search;
use crate::search::collect::TopN;
use crate::tool::{Annotations, Ctx, Tool, ToolMeta};
use crate::tools::{default_dot, human_size};
use crate::workspace::shown;
use crate::workspace::{EntryType, WsPath};
use cap_fs_ext::DirExt;
use cap_std::fs::Dir;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    #[serde(default = "default_dot")]
    pub path: String,
    #[serde(default)]
    pub recursive: bool,
    /// Default 1; 20 if recursive.
    #[serde(default)]
    #[schemars(with = "u64")]
    pub max_depth: Option<u64>,
    #[serde(default)]
    pub include_hidden: bool,
    #[serde(default)]
    pub offset: usize,
    #[serde(default)]
    pub no_ignore: bool,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Entry {
    /// Path relative to the listed directory, `/`-separated.
    pub name: String,
    #[serde(rename = "type")]
    pub kind: EntryType,
    /// Size in bytes (files only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Why searches pass it by: `skipped` (the skip rules: dependency and build
    /// folders, not entered) or `outside` (a symlink leading out of the workspace, not
    /// followed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<Note>,
}

/// What a listing says of an entry it shows but searches pass by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Note {
    /// Matched by the skip rules (`node_modules/`, `target/`…): not searched, not entered.
    Skipped,
    /// A symlink leading outside the workspace: never followed.
    Outside,
}

/// Entries a listing left out, by kind (never the denied ones: those are not counted).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct LeftOut {
    /// Left out by ignore files, as grep and glob leave them out (`no_ignore` lists them).
    pub gitignored: u64,
    /// Names starting with `.` (`include_hidden` lists them).
    pub hidden: u64,
    /// Files whose extension `allowed_extensions` does not serve (no tool reads or finds
    /// them). Rare, so kept out of the output schema, whose every character is paid for
    /// in each `tools/list`; present only when non-zero.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(skip)]
    pub not_allowed: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl LeftOut {
    fn is_empty(&self) -> bool {
        self.gitignored == 0 && self.hidden == 0 && self.not_allowed == 0
    }
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    pub path: String,
    /// Sorted by path; at most `max_files_per_request` of them.
    pub entries: Vec<Entry>,
    /// How many entries there are in all, even when `entries` was cut.
    pub total_count: u64,
    /// Entries skipped before the first one shown.
    pub offset: u64,
    pub truncated: bool,
    /// Subdirectories that could not be read (and why): listed, not entered. Also ignore
    /// files not used (too large), whose entries are then listed, as glob warns.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub unreadable: Vec<String>,
    /// Entries not listed, counted by why (absent when none).
    #[serde(skip_serializing_if = "LeftOut::is_empty", default)]
    pub left_out: LeftOut,
}

pub struct ListDirectory;

impl Tool for ListDirectory {
    type Params = Params;
    type Output = Output;

    fn meta(&self) -> ToolMeta {
        ToolMeta {
            name: "list_directory",
            title: "List directory",
            description: "List a directory (name, type, size); recursive for a tree. Secrets never listed, gitignored \
counted, node_modules etc. skipped.",
            annotations: Annotations::READ_ONLY,
            served_by_default: true,
        }
    }

    fn run(&self, ctx: &Ctx, p: Params) -> ToolResult<Output> {
        let ws = ctx.workspace();
        let base = ctx.resolve(&p.path)?;
        let shown = ws.display(&base);
        ctx.set_audit_path(shown.clone());
        // Rules are judged on the real names: `dock -> sub/.docker` lists nothing that
        // `sub/.docker` would not.
        let (dir, real) = ws.open_dir_real(&base)?;
        let depth = match (p.recursive, p.max_depth) {
            (_, Some(d)) => d.max(1),
            (true, None) => ctx.config().max_path_depth.max(1) as u64,
            (false, None) => 1,
        };
        let cap = ctx.limits().max_files_per_request;
        // Only the page is kept: the first `offset + cap` entries in path order, and a
        // count of the rest (a directory of 400 000 long names held every name and its
        // metadata, ~250 MB a call). What is kept is admitted against the search memory
        // budget as it grows, so a deep offset into a wide tree waits its turn (until
        // its deadline) rather than add up beside others.
        let needed = if cap == 0 {
            0
        } else {
            p.offset.saturating_add(cap)
        };
        // The ignore files as grep and glob read them, from the same start (the real
        // path: a search from a link to a directory walks its target).
        let env = ctx.search_env();
        let ignore = (!p.no_ignore)
            .then(|| search::IgnoreRules::new(ws, &env, real.root_index(), real.rel()));
        let above = ignore.as_ref().map(search::IgnoreRules::above);
        let mut walk = Walk {
            ctx,
            ignore: ignore.as_ref(),
            left_out: LeftOut::default(),
            base: &base,
            real: &real,
            include_hidden: p.include_hidden,
            max_depth: depth,
            found: TopN::metered(needed),
            total: 0,
            longest: 0,
            permits: vec![search::cost::admit(HOLD_STEP, ctx.control())?],
            unreadable: Vec::new(),
        };
        walk.dir(&dir, PathBuf::new(), 1, above.as_ref())?;
        let total = walk.total;
        let found = std::mem::replace(&mut walk.found, TopN::new(0));
        let mut entries: Vec<Entry> = found
            .into_sorted()
            .skip(p.offset)
            .map(|((_, rel), (kind, size, note))| Entry {
                name: crate::workspace::reference(rel.as_os_str().as_encoded_bytes()),
                kind,
                size,
                note,
            })
            .collect();
        if cap > 0 {
            entries.truncate(cap);
        }
        let truncated = (p.offset as u64).saturating_add(entries.len() as u64) < total;
        ctx.count_files(entries.len() as u64);
        Ok(Output {
            path: shown,
            entries,
            total_count: total,
            truncated,
            offset: p.offset as u64,
            unreadable: {
                // Ignore files not used (too big, too many), as glob warns of them: the
                // listing may then show what they would hide.
                let mut u = std::mem::take(&mut walk.unreadable);
                u.extend(ctx.control().warnings.list());
                u
            },
            left_out: walk.left_out,
        })
    }

    fn render(&self, o: &Output) -> String {
        let mut out = format!("{}:\n", shown(&o.path));
        for e in &o.entries {
            // `x@` (a file) must not read as the symlink `x`, nor `a  (1 KB)` as `a`.
            let name =
                if !e.name.starts_with('"') && (e.name.ends_with('@') || e.name.contains("  (")) {
                    crate::workspace::quote(e.name.as_bytes()).into()
                } else {
                    shown(&e.name)
                };
            let note = match (e.note, e.kind) {
                (None, _) => "",
                (Some(Note::Skipped), EntryType::Directory) => {
                    "  (skipped: dependency/build folder, not searched; list it by name)"
                }
                (Some(Note::Skipped), _) => "  (skipped: not searched)",
                (Some(Note::Outside), _) => "  (outside the workspace: not followed)",
            };
            match (e.kind, e.size) {
                (EntryType::Directory, _) => out.push_str(&format!("  {name}/{note}\n")),
                (EntryType::Symlink, _) => out.push_str(&format!("  {name}@{note}\n")),
                (_, Some(s)) => {
                    out.push_str(&format!("  {name}  ({}){note}\n", human_size(s)));
                }
                (_, None) => out.push_str(&format!("  {name}{note}\n")),
            }
        }
        if o.entries.is_empty() {
            out.push_str("  (empty)\n");
        }
        for u in &o.unreadable {
            out.push_str(&format!("  [not read: {}]\n", shown(u)));
        }
        if o.truncated {
            let next = o.offset + o.entries.len() as u64;
            out.push_str(&format!(
                "… entries {}-{} of {} shown; continue with offset {next}\n",
                o.offset + 1,
                next,
                o.total_count
            ));
        } else {
            out.push_str(&format!("{} entries\n", o.total_count));
        }
        // What was left out, and how to see it: the same entries grep and glob pass by.
        if o.left_out.gitignored > 0 {
            out.push_str(&format!(
                "[{} gitignored not listed (grep and glob skip them too); no_ignore: true lists them]\n",
                o.left_out.gitignored
            ));
        }
        if o.left_out.hidden > 0 {
            out.push_str(&format!(
                "[{} hidden not listed; include_hidden: true lists them]\n",
                o.left_out.hidden
            ));
        }
        if o.left_out.not_allowed > 0 {
            out.push_str(&format!(
                "[{} not listed: their extension is not in allowed_extensions (no tool serves them)]\n",
                o.left_out.not_allowed
            ));
        }
        out
    }
}

struct Walk<'a, 'c> {
    ctx: &'a Ctx<'c>,
    /// The ignore files' rules (none with `no_ignore`).
    ignore: Option<&'a search::IgnoreRules<'a>>,
    left_out: LeftOut,
    base: &'a WsPath,
    /// `base` with every symlink resolved: the name the rules are judged on.
    real: &'a WsPath,
    include_hidden: bool,
    max_depth: u64,
    /// The first entries in path order, as many as the page needs.
    found: TopN<(EntryType, Option<u64>, Option<Note>)>,
    /// Entries met in all.
    total: u64,
    /// The longest path kept so far: with the count kept, what they hold at most.
    longest: usize,
    /// Shares of the search memory budget for what `found` holds.
    permits: Vec<search::cost::Permit<'static>>,
    unreadable: Vec<String>,
}

/// Memory a listing takes from the search budget at a time (see [`Walk::hold`]).
const HOLD_STEP: u64 = 8 << 20;

/// What one kept entry holds besides its path's bytes: the path's own header, its
/// type and size, and its share of the ordered map's nodes.
const ENTRY_OVERHEAD: usize = 96;

/// Entries read between two looks at the call's deadline.
const CHECK_EVERY: u64 = 1024;

impl Walk<'_, '_> {
    /// Takes more of the search memory budget when what is kept outgrows what was
    /// taken (waiting, until the deadline, while other searches hold it).
    fn hold(&mut self) -> ToolResult<()> {
        let held = self.found.len() as u64 * (self.longest + ENTRY_OVERHEAD) as u64;
        while held > self.permits.len() as u64 * HOLD_STEP {
            let permit = search::cost::admit(HOLD_STEP, self.ctx.control())?;
            self.permits.push(permit);
        }
        Ok(())
    }

    fn dir(
        &mut self,
        dir: &Dir,
        rel: PathBuf,
        depth: u64,
        parent: Option<&search::DirRules>,
    ) -> ToolResult<()> {
        self.ctx.check()?;
        let ws = self.ctx.workspace();
        let entries = match dir.entries() {
            Ok(e) => e,
            // The directory asked for: say so, rather than list it as empty.
            Err(e) if depth == 1 => {
                return Err(ToolError::io(&ws.display(self.base), &e));
            }
            // An unreadable subdirectory costs only itself, and is named.
            Err(e) => {
                self.unreadable.push(format!(
                    "{}: {}",
                    crate::workspace::reference(rel.as_os_str().as_encoded_bytes()),
                    if e.kind() == std::io::ErrorKind::PermissionDenied {
                        "permission denied".to_string()
                    } else {
                        e.to_string()
                    }
                ));
                return Ok(());
            }
        };
        // This directory's own ignore files, read through its handle.
        let rules = match (self.ignore, parent) {
            (Some(ig), Some(parent)) => {
                use std::os::fd::AsFd;
                Some(ig.enter(dir.as_fd(), &self.real.rel().join(&rel), parent))
            }
            _ => None,
        };
        for (i, entry) in entries.flatten().enumerate() {
            if i as u64 % CHECK_EVERY == CHECK_EVERY - 1 {
                self.ctx.check()?;
            }
            let name = entry.file_name();
            let Ok(ft) = entry.file_type() else { continue };
            let rel_here = rel.join(&name);
            let wp = self.real.join(&rel_here);
            let kind = EntryType::of(&ft);
            let is_dir = kind == EntryType::Directory;
            // Denied first, and silently: a secret is not even counted as hidden.
            if ws.is_denied(&wp, is_dir) {
                continue;
            }
            let mut note = None;
            if kind == EntryType::Symlink {
                // One leading to a secret is as invisible as the secret; one leading
                // outside is shown as such; never descended.
                match ws.stat(&wp) {
                    Err(e) if e.code == ErrorCode::PathEscape => note = Some(Note::Outside),
                    Err(e) if e.code != ErrorCode::NotFound && e.code != ErrorCode::IoError => {
                        continue;
                    }
                    _ => {}
                }
            }
            if !self.include_hidden && name.to_string_lossy().starts_with('.') {
                self.left_out.hidden += 1;
                continue;
            }
            // Skipped noise is shown (marked, not entered) even when an ignore file
            // names it too: `node_modules/` is usually both.
            // A file whose extension is not served: no tool reads or finds it.
            if !is_dir && kind != EntryType::Symlink && !ws.extension_allowed(wp.rel()) {
                self.left_out.not_allowed += 1;
                continue;
            }
            let skipped = ws.is_skipped(&wp, self.real, is_dir);
            if skipped {
                note = Some(Note::Skipped);
            } else if let (Some(ig), Some(rules)) = (self.ignore, rules.as_ref())
                && ig.ignored(rules, wp.rel(), is_dir)
            {
                self.left_out.gitignored += 1;
                continue;
            }
            self.total += 1;
            // Past the page (a count is all it adds): no metadata read, nothing kept.
            if self.found.wants_path(0, &rel_here) {
                let size = (kind == EntryType::File)
                    .then(|| entry.metadata().ok().map(|m| m.len()))
                    .flatten();
                self.longest = self.longest.max(rel_here.as_os_str().len());
                self.found
                    .insert((0, rel_here.clone()), 1, (kind, size, note));
                self.hold()?;
            }
            if is_dir
                && !skipped
                && depth < self.max_depth
                && let Ok(sub) = dir.open_dir_nofollow(&name)
            {
                self.dir(&sub, rel_here, depth + 1, rules.as_ref())?;
            }
        }
        Ok(())
    }
}

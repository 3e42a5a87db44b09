//! `glob`: find files by name pattern.
//!
//! Semantics (documented in the tool description too):
//! - `*` and `?` stay within one path component, `**` crosses directories, `{a,b}`
//!   alternates, `[ab]` is a class;
//! - a pattern without `/` matches the file name at any depth (`*.c` finds every C file);
//!   a pattern with `/` matches the path relative to `path` (`src/**/*.rs`);
//! - files only, never directories; .gitignore, hidden, deny and skip rules as for grep.

use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::search::collect::TopN;
use crate::search::{self, Found, WalkOptions};
use crate::tool::{Annotations, Ctx, Tool, ToolMeta};
use crate::workspace::shown;
use globset::{GlobBuilder, GlobSetBuilder};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Sort {
    /// By path (default).
    #[default]
    Path,
    /// Most recently modified first.
    Modified,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    pub pattern: String,
    #[serde(default)]
    #[schemars(with = "String")]
    pub path: Option<String>,
    /// 0: all, up to 20 000.
    #[serde(default = "default_max")]
    pub max_results: usize,
    #[serde(default)]
    pub include_hidden: bool,
    #[serde(default)]
    pub sort: Sort,
    // Ignored files too (fd -I). (Not in the schema: the name says it.)
    #[serde(default)]
    pub no_ignore: bool,
    // Directories, not files (fd -t d).
    #[serde(default)]
    pub dirs: bool,
}

fn default_max() -> usize {
    100
}

/// The most paths one glob returns, `max_results: 0` ("all") included: a glob of a
/// directory of 400 000 names held every match until the byte budget refused them
/// (1.6 GB for eight at once). Past it the result says how many matched in all.
pub const ALL_MAX: usize = 20_000;

/// What one kept path holds beside its bytes (its header and its map slot).
const SLOT_COST: u64 = 64;

#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// Matching files, relative to the workspace root.
    pub files: Vec<String>,
    /// Matching files in all, even when `files` was cut (found so far, when
    /// incomplete).
    pub count: u64,
    pub truncated: bool,
    /// Which engine answered: "index" (the live index's file list) or "scan" (a walk).
    pub engine: String,
    /// What the agent should know about how the answer was made (an ignore file too
    /// large to use, so files it would hide may be listed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Set when the search reached its time limit: `files` and `count` are what the
    /// directories walked until then hold (`truncated` is set too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<crate::tools::Incomplete>,
}

pub struct Glob;

/// `(root name, rest)` when several roots are served and `pattern` starts with one's
/// name as a whole component (`rootB/**/*.rs`), the rest not empty.
fn root_prefixed<'a>(ctx: &Ctx, pattern: &'a str) -> Option<(&'a str, &'a str)> {
    let roots = ctx.workspace().roots();
    if roots.len() < 2 {
        return None;
    }
    let (first, rest) = pattern.split_once('/')?;
    let rest = rest.trim_start_matches('/');
    (!rest.is_empty() && roots.iter().any(|r| r.name == first)).then_some((first, rest))
}

/// The last component of a listed path (normalised: no trailing `/`, no `.`): a byte
/// search, where `Path::file_name` parses components (a tenth of a kernel-wide glob).
fn name(p: &std::path::Path) -> &std::ffi::OsStr {
    use std::os::unix::ffi::OsStrExt;
    let b = p.as_os_str().as_bytes();
    let from = memchr::memrchr(b'/', b).map_or(0, |i| i + 1);
    std::ffi::OsStr::from_bytes(&b[from..])
}

/// One walker thread's matches (and files visited), added to the shared ones when the
/// thread ends.
struct Mine<'a> {
    count: u64,
    visited: u64,
    top: TopN<()>,
    into: (&'a AtomicU64, &'a Mutex<TopN<()>>, &'a AtomicU64),
}

impl Drop for Mine<'_> {
    fn drop(&mut self) {
        self.into.0.fetch_add(self.count, Ordering::Relaxed);
        self.into.2.fetch_add(self.visited, Ordering::Relaxed);
        let mut shared = crate::error::lock(self.into.1);
        let mine = std::mem::replace(&mut self.top, TopN::new(0));
        shared.merge(mine);
    }
}

impl Tool for Glob {
    type Params = Params;
    type Output = Output;

    fn meta(&self) -> ToolMeta {
        ToolMeta {
            name: "glob",
            title: "Find files",
            description: "Find files by glob (prefer it to find or ls -R in a shell): \"*.c\" names at any depth, \
\"src/**/*.rs\" paths under `path`. Skips .gitignored and hidden. sort: modified, newest first.",
            annotations: Annotations::READ_ONLY,
            served_by_default: true,
        }
    }

    fn run(&self, ctx: &Ctx, p: Params) -> ToolResult<Output> {
        let pattern = p.pattern.trim().trim_start_matches("./");
        if pattern.is_empty() {
            return Err(
                ToolError::invalid("pattern is empty").with_hint("for every file use \"**\"")
            );
        }
        if pattern.starts_with('/') {
            return Err(ToolError::new(
                ErrorCode::InvalidGlob,
                "glob patterns are relative to `path`",
            )
            .with_hint("drop the leading '/', and set path to the directory to search"));
        }
        if pattern.split('/').any(|c| c == "..") {
            return Err(ToolError::new(
                ErrorCode::InvalidGlob,
                format!(
                    "glob {pattern:?} has a `..` component, which matches nothing: a glob matches paths \
                     below the directory searched"
                ),
            )
            .with_hint(
                "search from the directory above instead: pass it as path (on the command line: ferret glob \
                 PATTERN ..) and drop the `../` from the pattern",
            ));
        }
        // With several roots, results are named `root/…`: a pattern starting with a root's
        // name (and no path) selects under that root alone, as the names it returns read.
        let (pattern, path) = match (&p.path, root_prefixed(ctx, pattern)) {
            (None, Some((root, rest))) => (rest, Some(root.to_string())),
            _ => (pattern, p.path.clone()),
        };
        // Judged before it is compiled: a 4 MB brace list costs hundreds of MB to build.
        search::cost::check_glob(pattern)?;
        // "All" is at most ALL_MAX paths: each is held (by its thread and in the shared
        // list) until the walk ends, so they are admitted with the compiled glob.
        let max_results = match p.max_results {
            0 => ALL_MAX,
            n => n.min(ALL_MAX),
        };
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get().min(12));
        // Each collector (one per thread and the shared one) holds at most its paths'
        // byte bound, and a slot per path.
        let held = (search::collect::paths_bound(max_results) as u64)
            .saturating_add((max_results as u64).saturating_mul(SLOT_COST))
            .saturating_mul(threads as u64 + 1);
        let _admitted = search::cost::admit(
            search::cost::weight(0, pattern.len(), 1) + held,
            ctx.control(),
        )?;
        // In NFC, as names are brought to when matched (an NFD name from a Mac is found
        // by the pattern typed in NFC, and reported as it is on disk).
        let normal = crate::workspace::patterns::nfc_str(pattern);
        let pattern: &str = &normal;
        // `**/X` with no other `/` is X at any depth: match names, which is cheaper.
        let pattern = match pattern.strip_prefix("**/") {
            Some(rest) if !rest.contains('/') && !rest.is_empty() => rest,
            _ => pattern,
        };
        let by_name = !pattern.contains('/');
        // Matched against a name, which has no `/`, `*` cannot cross one either way;
        // without literal_separator globset answers `*.c` by an extension lookup alone
        // rather than a lookup and a regex per name.
        let glob = GlobBuilder::new(pattern)
            .literal_separator(!by_name)
            .backslash_escape(true)
            .build()
            .map_err(|e| {
                ToolError::new(
                    ErrorCode::InvalidGlob,
                    format!("invalid glob {pattern:?}: {e}"),
                )
                .with_hint("globs look like *.rs, src/**/*.rs, *.{ts,tsx}")
            })?;
        // A set of one glob: globset picks a strategy (an extension lookup for `*.c`)
        // instead of running the glob's regex on every name.
        let matcher = GlobSetBuilder::new().add(glob).build().map_err(|e| {
            ToolError::new(
                ErrorCode::InvalidGlob,
                format!("invalid glob {pattern:?}: {e}"),
            )
        })?;
        if p.dirs && p.sort == Sort::Modified {
            return Err(ToolError::invalid("sort \"modified\" lists files only")
                .with_hint("list directories sorted by path (the default sort)"));
        }
        let bases = crate::tools::search_bases(ctx, path.as_deref())?;
        let opts = WalkOptions {
            dirs: p.dirs,
            include_hidden: p.include_hidden,
            globs: Vec::new(),
            no_ignore: p.no_ignore,
            types: Vec::new(),
        };
        let ws = ctx.workspace();
        let count = AtomicU64::new(0);
        type ModKey = (Reverse<SystemTime>, usize, PathBuf);
        let by_path: Mutex<TopN<()>> = Mutex::new(TopN::metered(max_results));
        let by_time: Mutex<TopN<(), ModKey>> = Mutex::new(TopN::metered(max_results));

        let visited = AtomicU64::new(0);
        let (engine, out_of_time) = search::visit_files(&ctx.search_env(), &bases, &opts, || {
            let (matcher, by_time) = (&matcher, &by_time);
            // Each thread keeps its own count and first paths, merged as it ends: no
            // lock or shared counter per match (a kernel-wide glob matches 32 000).
            let mut mine = Mine {
                count: 0,
                visited: 0,
                top: TopN::metered(max_results),
                into: (&count, &by_path, &visited),
            };
            move |f: &Found| {
                if f.is_dir != p.dirs {
                    return true;
                }
                mine.visited += 1;
                let subject = if by_name {
                    std::path::Path::new(name(f.rel_to_base))
                } else {
                    f.rel_to_base
                };
                let hit = matcher.is_match(subject)
                    || crate::workspace::patterns::nfc(subject)
                        .is_some_and(|n| matcher.is_match(n));
                if !hit {
                    return true;
                }
                mine.count += 1;
                match p.sort {
                    Sort::Path => {
                        if mine.top.wants_path(f.root, f.rel) {
                            mine.top.insert(f.key(), 1, ());
                        }
                    }
                    Sort::Modified => {
                        let modified = ws
                            .open_found(f.root, f.rel, true)
                            .and_then(|h| h.metadata())
                            .and_then(|m| m.modified());
                        if let Ok(t) = modified {
                            crate::error::lock(by_time).insert(
                                (Reverse(t), f.root, f.rel.to_path_buf()),
                                1,
                                (),
                            );
                        }
                    }
                }
                true
            }
        })?;

        let keys: Vec<(usize, PathBuf)> = match p.sort {
            Sort::Path => by_path
                .into_inner()
                .map(|t| t.into_sorted().map(|(k, _)| k).collect())
                .unwrap_or_default(),
            Sort::Modified => by_time
                .into_inner()
                .map(|t| t.into_sorted().map(|((_, r, p), _)| (r, p)).collect())
                .unwrap_or_default(),
        };
        let count = count.into_inner();
        ctx.count_files(count);
        ctx.set_engine(engine);
        let incomplete =
            crate::tools::incomplete(ctx, out_of_time, count > 0, visited.into_inner())?;
        // A walk's names were read through directory handles beneath the root. The
        // index's list is older: confirm each name shown from it through the sandbox, so
        // a directory swapped for a symlink since cannot show outside names. (Sorting by
        // time already opened each one.)
        let verify = p.sort == Sort::Path && engine == "index";
        let files = confirmed(keys, || {
            let mut confirm = ws.confirmer();
            move |(root, rel): &(usize, PathBuf)| {
                (!verify || confirm.is_file(*root, rel))
                    .then(|| ws.display(&ws.root_path(*root).join(rel)))
            }
        });
        ctx.charge_bytes(files.iter().map(|f| f.len() as u64 + 1).sum())?;
        Ok(Output {
            truncated: (files.len() as u64) < count || incomplete.is_some(),
            files,
            count,
            engine: engine.to_string(),
            warnings: ctx.control().warnings.list(),
            incomplete,
        })
    }

    fn render(&self, o: &Output) -> String {
        let mut s = crate::tools::render_warnings(&o.warnings);
        if o.count == 0 {
            s.push_str("No files found.");
            return s;
        }
        for f in &o.files {
            s.push_str(&shown(f));
            s.push('\n');
        }
        if let Some(i) = &o.incomplete {
            if (o.files.len() as u64) < o.count {
                s.push_str(&format!(
                    "[{} of the {} files found so far shown]\n",
                    o.files.len(),
                    o.count
                ));
            }
            s.push_str(&crate::tools::render_incomplete(i));
        } else if o.truncated {
            s.push_str(&format!(
                "[truncated: {} of {} files shown; narrow the pattern or path, or raise max_results]\n",
                o.files.len(),
                o.count
            ));
        }
        s
    }
}

/// Maps `keys` through a function on every core, keeping order (`mk` makes one per
/// thread, which may keep state: open directories): confirming tens of thousands of
/// names adds up.
fn confirmed<K: Sync, F>(keys: Vec<K>, mk: impl Fn() -> F + Sync) -> Vec<String>
where
    F: FnMut(&K) -> Option<String>,
{
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if keys.len() < 512 || threads < 2 {
        return keys.iter().filter_map(mk()).collect();
    }
    let chunk = keys.len().div_ceil(threads);
    std::thread::scope(|s| {
        let parts: Vec<_> = keys
            .chunks(chunk)
            .map(|c| s.spawn(|| c.iter().filter_map(mk()).collect::<Vec<String>>()))
            .collect();
        parts
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    })
}

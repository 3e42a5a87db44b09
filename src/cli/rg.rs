//! rg's and fd's habits on `ferret grep` and `ferret glob`, and paths as a shell user
//! types them.
//!
//! - Paths on the command line are relative to the current directory when it is inside
//!   the (single) root, and results are printed the way rg prints them: each under the
//!   path as typed (`../a.txt`, `src/util.py`), and with no path given, relative to the
//!   current directory (which is then what is searched, as rg does). The root never
//!   changes: a path that leads out of it is refused (`PATH_ESCAPE`, with a hint to pass
//!   `--root`). With the current directory outside the root, or several roots, paths stay
//!   what the tools take (relative to the root) and are printed as the tools print them.
//! - Several paths are several calls of the tool (each within its own budget), their
//!   results printed in the order given.
//! - rg's `-m NUM` (per file), `-o`, `-S` and fd's word-is-a-substring are shaped here;
//!   `-w -v -t -T -u` are the grep tool's own `word`, `invert`, `types`, `no_ignore`.
//!
//! The JSON output (`--json`) is the tools' own, paths relative to the root.

use super::args::{GlobArgs, GrepArgs};
use super::bridge::Caller;
use super::grep_print;
use super::output::{print_json, print_text};
use crate::context::{CallOptions, Ferret};
use crate::error::{ErrorCode, ToolError};
use crate::search::sink::Line;
use crate::tool::Tool;
use crate::tools::{glob, grep};
use crate::workspace::shown;
use grep_matcher::Matcher;
use std::path::{Component, Path, PathBuf};

/// Where the current directory sits in the single root: its path relative to the root
/// (empty: the root itself). `None` when the current directory is outside every root,
/// or there are several roots.
pub struct Here {
    prefix: PathBuf,
    root: PathBuf,
}

impl Here {
    pub fn find(ferret: &Ferret) -> Option<Here> {
        let ws = ferret.workspace();
        if ws.roots().len() != 1 {
            return None;
        }
        let root = ws.root_canonical(0).to_path_buf();
        let cwd = std::env::current_dir().ok()?.canonicalize().ok()?;
        let prefix = cwd.strip_prefix(&root).ok()?.to_path_buf();
        Some(Here { prefix, root })
    }

    /// `typed` (relative to the current directory, or absolute) as a path relative to the
    /// root, `..` resolved by name (the current directory's own path holds no link); the
    /// refusal when it leads out of the root.
    pub fn to_root(&self, typed: &str) -> Result<String, ToolError> {
        let p = Path::new(typed);
        let joined = if p.is_absolute() {
            match p.strip_prefix(&self.root) {
                Ok(rel) => rel.to_path_buf(),
                // Not below the root's real path: the tool decides (a root's symlinked
                // alias is inside; anything else is its PATH_ESCAPE).
                Err(_) => return Ok(typed.to_string()),
            }
        } else {
            self.prefix.join(p)
        };
        let mut out = PathBuf::new();
        for c in joined.components() {
            match c {
                Component::CurDir => {}
                Component::ParentDir => {
                    if !out.pop() {
                        return Err(outside(typed, &self.root));
                    }
                }
                Component::Normal(n) => out.push(n),
                Component::RootDir | Component::Prefix(_) => {
                    return Err(outside(typed, &self.root));
                }
            }
        }
        let s = out.to_string_lossy().into_owned();
        Ok(if s.is_empty() { ".".to_string() } else { s })
    }

    /// Rewrites a path argument in place (see [`Here::to_root`]).
    pub fn rewrite(here: Option<&Here>, arg: &mut String) -> Result<(), ToolError> {
        if let Some(h) = here {
            *arg = h.to_root(arg)?;
        }
        Ok(())
    }

    /// The searches to run: (the path for the tool, how its results are printed).
    fn bases(here: Option<&Here>, typed: Vec<String>) -> Result<Vec<Base>, ToolError> {
        let Some(h) = here else {
            return Ok(if typed.is_empty() {
                vec![Base::whole()]
            } else {
                typed
                    .into_iter()
                    .map(|t| Base {
                        tool: Some(t),
                        shown: None,
                    })
                    .collect()
            });
        };
        if typed.is_empty() {
            if h.prefix.as_os_str().is_empty() {
                return Ok(vec![Base::whole()]);
            }
            // rg's default: the current directory, its paths printed from there.
            let b = h.prefix.to_string_lossy().into_owned();
            return Ok(vec![Base {
                tool: Some(b.clone()),
                shown: Some((b, String::new())),
            }]);
        }
        typed
            .into_iter()
            .map(|t| {
                let b = h.to_root(&t)?;
                Ok(Base {
                    tool: Some(b.clone()),
                    shown: Some((b, t)),
                })
            })
            .collect()
    }
}

/// The refusal of a path outside the root: the root never changes by itself.
fn outside(typed: &str, root: &Path) -> ToolError {
    ToolError::new(
        ErrorCode::PathEscape,
        format!(
            "{typed}: outside the workspace root {}",
            root.to_string_lossy()
        ),
    )
    .with_hint(
        "ferret never moves its root by itself: pass --root DIR (or set FERRET_ROOT) to work there",
    )
}

/// One search of several: the tool's `path`, and the (root-relative path, path as
/// typed) its results are printed under (`None`: as the tool prints them).
struct Base {
    tool: Option<String>,
    shown: Option<(String, String)>,
}

impl Base {
    fn whole() -> Base {
        Base {
            tool: None,
            shown: None,
        }
    }

    /// A result path as rg prints it: under the path as typed.
    fn show(&self, path: &str) -> String {
        let Some((base, typed)) = &self.shown else {
            return path.to_string();
        };
        // A quoted name (see workspace::shown) is shown as the tool gave it.
        if path.starts_with('"') {
            return path.to_string();
        }
        let rest = if base == "." {
            Some(path).filter(|p| *p != ".")
        } else if path == base {
            None
        } else {
            match path
                .strip_prefix(base.as_str())
                .and_then(|r| r.strip_prefix('/'))
            {
                Some(r) => Some(r),
                None => return path.to_string(),
            }
        };
        match rest {
            None if typed.is_empty() => ".".to_string(),
            None => typed.clone(),
            Some(r) if typed.is_empty() => r.to_string(),
            Some(r) if typed.ends_with('/') => format!("{typed}{r}"),
            Some(r) => format!("{typed}/{r}"),
        }
    }
}

/// Runs one call for the command line: the output, or the error reported on stderr.
fn call<T: Tool>(c: &Caller, tool: &T, params: T::Params) -> Option<T::Output> {
    let options = CallOptions {
        cancel: c.cancel.clone(),
        ..CallOptions::default()
    };
    match c.ferret.call_typed(c.session, tool, params, options) {
        Ok(t) => Some(t.output),
        Err(e) => {
            eprintln!("ferret: {}", e.render());
            None
        }
    }
}

/// The pattern and the paths of a `ferret grep` line: with `-e`, every positional
/// argument is a path (as rg reads them).
fn pattern_and_paths(a: &mut GrepArgs) -> anyhow::Result<(String, bool, Vec<String>)> {
    let mut args = std::mem::take(&mut a.args);
    let regexps = std::mem::take(&mut a.regexps);
    let (patterns, paths) = if regexps.is_empty() {
        if args.is_empty() {
            anyhow::bail!("no pattern given (ferret grep PATTERN [PATH…], or -e PATTERN)");
        }
        let first = args.remove(0);
        (vec![first], args)
    } else {
        (regexps, args)
    };
    if patterns.len() == 1 {
        let p = patterns.into_iter().next().unwrap_or_default();
        return Ok((p, a.fixed_strings, paths));
    }
    // Several patterns: one regex matching any, each escaped first under -F.
    let any = patterns
        .iter()
        .map(|p| {
            if a.fixed_strings {
                regex_syntax::escape(p)
            } else {
                format!("(?:{p})")
            }
        })
        .collect::<Vec<_>>()
        .join("|");
    Ok((any, false, paths))
}

/// `ferret grep`, rg's way. Exit: 0 when something matched and nothing failed, 1 when
/// nothing matched, 2 on an error (as rg: an error wins).
pub fn grep(c: &Caller, mut a: GrepArgs) -> anyhow::Result<i32> {
    let here = Here::find(c.ferret);
    let (pattern, fixed_strings, typed) = pattern_and_paths(&mut a)?;
    let ignore_case = a.ignore_case || (a.smart_case && !pattern.chars().any(char::is_uppercase));
    let mut types = a.types.clone();
    types.extend(a.types_not.iter().map(|t| format!("!{t}")));
    if a.unrestricted >= 3 {
        eprintln!("ferret: -uuu: binary files are still not searched (as -uu)");
    }
    let params = |path: Option<String>| grep::Params {
        pattern: pattern.clone(),
        path,
        glob: grep::Globs::Many(a.globs.clone()),
        ignore_case,
        fixed_strings,
        multiline: a.multiline,
        context: a.context.filter(|_| !a.only_matching),
        context_before: a.before_context.filter(|_| !a.only_matching),
        context_after: a.after_context.filter(|_| !a.only_matching),
        output_mode: if a.files_with_matches {
            grep::OutputMode::FilesWithMatches
        } else if a.count {
            grep::OutputMode::Count
        } else {
            grep::OutputMode::Content
        },
        max_results: Some(a.max),
        offset: 0,
        include_hidden: a.hidden || a.unrestricted >= 2,
        no_ignore: a.no_ignore || a.unrestricted >= 1,
        invert: a.invert_match,
        word: a.word_regexp,
        types: types.clone(),
    };
    let bases = match Here::bases(here.as_ref(), typed) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("ferret: {}", e.render());
            return Ok(2);
        }
    };
    let first = params(None);
    let matcher = grep_print::highlighter(&first);
    let stdout = std::io::stdout();
    let heading = match (a.heading, a.no_heading) {
        (true, _) => true,
        (_, true) => false,
        _ => std::io::IsTerminal::is_terminal(&stdout),
    };
    let mut failed = false;
    let mut found = false;
    let mut outputs = Vec::new();
    for base in bases {
        let Some(mut o) = call(c, &grep::Grep, params(base.tool.clone())) else {
            failed = true;
            continue;
        };
        if let Some(m) = a.max_count {
            per_file_max(
                &mut o,
                m,
                first.context_after.or(first.context).unwrap_or(0),
            );
        }
        if a.only_matching
            && !a.invert_match
            && let Some(m) = &matcher
        {
            only_matching(&mut o, m);
        }
        found |= o.file_count > 0;
        outputs.push((base, o));
    }
    if a.json {
        for (_, o) in &outputs {
            print_json(o)?;
        }
    } else {
        let stream = anstream::AutoStream::new(stdout.lock(), a.color.into());
        let colour = stream.current_choice() != anstream::ColorChoice::Never;
        let mut out = std::io::BufWriter::new(stream.into_inner());
        // rg names no file when the one path it was given is a file: every result
        // is then that path itself.
        let one_file = match outputs.as_slice() {
            [(base, o)] => base
                .tool
                .as_deref()
                .is_some_and(|t| !o.files.is_empty() && o.files.iter().all(|f| f.path == t)),
            _ => false,
        };
        let filename = a.with_filename || (!a.no_filename && !one_file);
        let layout = grep_print::Layout {
            heading,
            colour,
            filename,
            line_numbers: !a.no_line_number,
        };
        for (base, mut o) in outputs {
            if o.file_count == 0 && o.files.is_empty() {
                continue; // rg prints nothing for a path with no match
            }
            for f in &mut o.files {
                f.path = base.show(&f.path);
            }
            grep_print::print(&mut out, &o, matcher.as_ref(), layout)?;
        }
        std::io::Write::flush(&mut out)?;
    }
    Ok(if failed {
        2
    } else if found {
        0
    } else {
        1
    })
}

/// rg's `-m NUM`: each file's first NUM matching lines (and the context after the
/// last), its count at most NUM.
fn per_file_max(o: &mut grep::Output, max: u64, after: usize) {
    let mut matches = 0;
    for f in &mut o.files {
        if let Some(n) = f.count.as_mut() {
            *n = (*n).min(max);
            matches += *n;
        }
        if let Some(lines) = f.lines.take() {
            let mut kept: Vec<Line> = Vec::new();
            let mut seen = 0u64;
            let mut last: Option<u64> = None;
            for l in lines {
                if l.is_match {
                    if seen == max {
                        break;
                    }
                    seen += 1;
                    last = Some(l.line);
                } else if seen == max {
                    // After the last match kept: only its own context.
                    if last.is_none_or(|m| l.line > m + after as u64) {
                        break;
                    }
                }
                kept.push(l);
            }
            matches += seen;
            f.lines = Some(kept);
        }
    }
    o.files.retain(|f| f.count != Some(0));
    if o.match_count.is_some() {
        o.match_count = Some(matches);
    }
}

/// rg's `-o`: each match on its own line (context lines dropped).
fn only_matching(o: &mut grep::Output, m: &grep_regex::RegexMatcher) {
    for f in &mut o.files {
        let Some(lines) = f.lines.take() else {
            continue;
        };
        let mut parts = Vec::new();
        for l in lines.into_iter().filter(|l| l.is_match) {
            let bytes = l.text.as_bytes();
            let _ = m.find_iter(bytes, |span| {
                if span.start() < span.end() {
                    let mut part = l.clone();
                    part.text = String::from_utf8_lossy(&bytes[span.start()..span.end()]).into();
                    parts.push(part);
                }
                true
            });
        }
        f.lines = Some(parts);
    }
    o.context = false;
}

/// fd's pattern: a word (no glob metacharacter, no `/`) is part of the name, matched
/// regardless of case unless it holds a capital (fd's smart case); a glob stays a glob.
pub fn fd_pattern(p: &str) -> String {
    if p.contains(['*', '?', '[', ']', '{', '}', '/', '\\']) {
        return p.to_string();
    }
    let smart = !p.chars().any(char::is_uppercase);
    let mut g = String::from("*");
    for ch in p.chars() {
        let (lo, up) = (
            ch.to_lowercase().collect::<String>(),
            ch.to_uppercase().collect::<String>(),
        );
        if smart && lo != up && lo.chars().count() == 1 && up.chars().count() == 1 {
            g.push('[');
            g.push_str(&lo);
            g.push_str(&up);
            g.push(']');
        } else {
            g.push(ch);
        }
    }
    g.push('*');
    g
}

/// `ferret glob`, fd's way. Exit: 0 when something was found and nothing failed, 1 when
/// nothing was, 2 on an error.
pub fn glob(c: &Caller, a: GlobArgs) -> anyhow::Result<i32> {
    let here = Here::find(c.ferret);
    let pattern = a
        .pattern
        .as_deref()
        .map_or_else(|| "*".to_string(), fd_pattern);
    let bases = match Here::bases(here.as_ref(), a.paths.clone()) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("ferret: {}", e.render());
            return Ok(2);
        }
    };
    // fd's -e: the extension, any case, after a dot.
    let exts: Vec<String> = a
        .extensions
        .iter()
        .map(|e| format!(".{}", e.trim_start_matches('.').to_lowercase()))
        .collect();
    let (mut failed, mut found) = (false, false);
    let mut outputs = Vec::new();
    for base in bases {
        let params = glob::Params {
            pattern: pattern.clone(),
            path: base.tool.clone(),
            max_results: if exts.is_empty() { a.max } else { 0 },
            include_hidden: a.hidden || a.unrestricted,
            sort: if a.modified {
                glob::Sort::Modified
            } else {
                glob::Sort::Path
            },
            no_ignore: a.no_ignore || a.unrestricted,
            dirs: matches!(a.kind.as_deref(), Some("d" | "directory")),
        };
        let Some(mut o) = call(c, &glob::Glob, params) else {
            failed = true;
            continue;
        };
        if !exts.is_empty() {
            o.files.retain(|f| {
                let name = f.rsplit('/').next().unwrap_or(f).to_lowercase();
                exts.iter()
                    .any(|e| name.ends_with(e.as_str()) && name.len() > e.len())
            });
            o.count = o.files.len() as u64;
            if a.max > 0 && o.files.len() > a.max {
                o.files.truncate(a.max);
                o.truncated = true;
            }
        }
        found |= o.count > 0;
        outputs.push((base, o));
    }
    for (base, o) in &outputs {
        if a.json {
            print_json(o)?;
            continue;
        }
        let mut s = String::new();
        for f in &o.files {
            s.push_str(&shown(&base.show(f)));
            s.push('\n');
        }
        if !s.is_empty() {
            print_text(&s)?;
        }
        if let Some(i) = &o.incomplete {
            eprint!("ferret: {}", crate::tools::render_incomplete(i));
        } else if o.truncated {
            eprintln!(
                "ferret: {} of {} files shown; pass --max 0 for all",
                o.files.len(),
                o.count
            );
        }
    }
    Ok(if failed {
        2
    } else if found {
        0
    } else {
        1
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_word_is_part_of_the_name_and_a_glob_stays_a_glob() {
        assert_eq!(fd_pattern("util"), "*[uU][tT][iI][lL]*");
        assert_eq!(fd_pattern("Util"), "*Util*");
        assert_eq!(fd_pattern("a_1"), "*[aA]_1*");
        assert_eq!(fd_pattern("*.rs"), "*.rs");
        assert_eq!(fd_pattern("src/*.rs"), "src/*.rs");
    }

    #[test]
    fn a_path_is_read_from_the_current_directory_and_never_leaves_the_root() {
        let h = Here {
            prefix: PathBuf::from("app"),
            root: PathBuf::from("/w"),
        };
        assert_eq!(
            h.to_root("src/util.py").ok().as_deref(),
            Some("app/src/util.py")
        );
        assert_eq!(h.to_root("../").ok().as_deref(), Some("."));
        assert_eq!(h.to_root("../b/./c").ok().as_deref(), Some("b/c"));
        assert_eq!(h.to_root("/w/x").ok().as_deref(), Some("x"));
        // the tool judges an absolute path elsewhere (a root's alias, or PATH_ESCAPE)
        assert_eq!(
            h.to_root("/etc/passwd").ok().as_deref(),
            Some("/etc/passwd")
        );
        for bad in ["../..", "../../w/x", "/w/../etc", "a/../../.."] {
            let e = h.to_root(bad).err().map(|e| e.code);
            assert_eq!(e, Some(ErrorCode::PathEscape), "{bad}");
        }
    }

    #[test]
    fn a_result_is_shown_under_the_path_as_typed() {
        let b = |base: &str, typed: &str| Base {
            tool: None,
            shown: Some((base.to_string(), typed.to_string())),
        };
        assert_eq!(b(".", "../").show("a.txt"), "../a.txt");
        assert_eq!(b(".", "..").show("a.txt"), "../a.txt");
        assert_eq!(b("app", "").show("app/src/u.py"), "src/u.py");
        assert_eq!(b("app/src", "src").show("app/src/u.py"), "src/u.py");
        assert_eq!(b("app/x.txt", "x.txt").show("app/x.txt"), "x.txt");
        assert_eq!(b("app", "").show("other/y"), "other/y");
    }
}

//! Whether a workspace's own `ferret.toml` hides (almost) everything: `deny_extra = ["*"]`,
//! `skip_extra = ["*"]`, `allowed_extensions = ["zzz"]` are all narrowing, so they apply,
//! and then every listing and search comes back empty with no word of why. A cloned
//! repository can ship such a file to blind an agent (or by mistake), so ferret says so:
//! the warning names the file and the rules, and the front ends pass it to the agent
//! (the server's instructions, and every search result and error, see `Ferret::notices`).
//!
//! The check looks at real names: the entries at the top of each root and one level
//! below (at most [`MAX_PROBES`]), each visible or not under the rules before the file
//! applied and after. Cheap, and what an agent meets first.

use super::Config;
use std::path::{Path, PathBuf};

/// Most names looked at.
pub const MAX_PROBES: usize = 2000;

/// Hidden at least this share (in tenths) of what was visible: "almost everything".
const HIDDEN_TENTHS: usize = 9;

/// A name under a root, relative to it, and whether it is a directory.
struct Probe {
    rel: PathBuf,
    dir: bool,
}

fn probes(roots: &[PathBuf]) -> Vec<Probe> {
    let mut out = Vec::new();
    let list = |dir: &Path, prefix: &Path, out: &mut Vec<Probe>| -> Vec<PathBuf> {
        let mut subdirs = Vec::new();
        let Ok(rd) = std::fs::read_dir(dir) else {
            return subdirs;
        };
        for e in rd.flatten().take(MAX_PROBES) {
            if out.len() >= MAX_PROBES {
                break;
            }
            let name = e.file_name();
            // Not followed: a link is what it is, a name.
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            let rel = prefix.join(&name);
            if is_dir {
                subdirs.push(rel.clone());
            }
            out.push(Probe { rel, dir: is_dir });
        }
        subdirs
    };
    for root in roots {
        let subdirs = list(root, Path::new(""), &mut out);
        for d in subdirs.into_iter().take(50) {
            if out.len() >= MAX_PROBES {
                break;
            }
            list(&root.join(&d), &d, &mut out);
        }
    }
    out
}

/// The rules a [`Config`] hides names by, compiled as the sandbox compiles them (deny
/// caseless, skip as written).
struct Rules {
    deny: ignore::gitignore::Gitignore,
    skip: ignore::gitignore::Gitignore,
    extensions: Vec<String>,
}

fn gitignore<'a>(
    patterns: impl IntoIterator<Item = &'a str>,
    caseless: bool,
) -> ignore::gitignore::Gitignore {
    let mut b = ignore::gitignore::GitignoreBuilder::new("");
    let _ = b.case_insensitive(caseless);
    for p in patterns {
        let _ = b.add_line(None, p);
    }
    b.build()
        .unwrap_or_else(|_| ignore::gitignore::Gitignore::empty())
}

impl Rules {
    fn of(c: &Config) -> Rules {
        Rules {
            deny: gitignore(c.deny_patterns(), true),
            skip: gitignore(c.skip_patterns(), false),
            extensions: extensions(&c.allowed_extensions),
        }
    }

    fn with(deny: &[&str], skip: &[&str], extensions_: &[String]) -> Rules {
        Rules {
            deny: gitignore(deny.iter().copied(), true),
            skip: gitignore(skip.iter().copied(), false),
            extensions: extensions(extensions_),
        }
    }

    fn hides(&self, p: &Probe) -> bool {
        let ignored = |g: &ignore::gitignore::Gitignore| {
            g.matched_path_or_any_parents(&p.rel, p.dir).is_ignore()
        };
        if ignored(&self.deny) || ignored(&self.skip) {
            return true;
        }
        if p.dir || self.extensions.is_empty() {
            return false;
        }
        let ext = p
            .rel
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        !self.extensions.contains(&ext)
    }
}

fn extensions(list: &[String]) -> Vec<String> {
    list.iter()
        .map(|e| e.trim_start_matches('.').to_ascii_lowercase())
        .collect()
}

/// A warning when the workspace file at `file` made `after` hide all or almost all of
/// what `before` (the configuration without it) showed, naming each rule it added that
/// hides much on its own. None when it hides little, or there is nothing to look at.
pub fn hidden_by_workspace_file(before: &Config, after: &Config, file: &Path) -> Option<String> {
    let roots: Vec<PathBuf> = if after.roots.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        after.roots.clone()
    };
    let all = probes(&roots);
    let (was, now) = (Rules::of(before), Rules::of(after));
    // Files, when there are any: a folder an extension rule leaves listed is empty
    // for an agent once every file in it is hidden.
    let files = all.iter().any(|p| !p.dir && !was.hides(p));
    let visible: Vec<&Probe> = all
        .iter()
        .filter(|p| !was.hides(p) && (!files || !p.dir))
        .collect();
    if visible.is_empty() {
        return None;
    }
    let hidden = visible.iter().filter(|p| now.hides(p)).count();
    if hidden * 10 < visible.len() * HIDDEN_TENTHS {
        return None;
    }
    // Each rule the file added, alone: what it hides of what was visible.
    let mut blame = Vec::new();
    let share = |r: &Rules| visible.iter().filter(|p| r.hides(p)).count();
    let added = |a: &[String], b: &[String]| -> Vec<String> {
        a.iter().filter(|x| !b.contains(x)).cloned().collect()
    };
    for p in added(&after.deny_extra, &before.deny_extra) {
        let n = share(&Rules::with(&[&p], &[], &[]));
        if n > 0 {
            blame.push((n, format!("deny_extra {p:?}")));
        }
    }
    for p in added(&after.skip_extra, &before.skip_extra) {
        let n = share(&Rules::with(&[], &[&p], &[]));
        if n > 0 {
            blame.push((n, format!("skip_extra {p:?}")));
        }
    }
    if after.allowed_extensions != before.allowed_extensions {
        let n = share(&Rules::with(&[], &[], &after.allowed_extensions));
        if n > 0 {
            blame.push((
                n,
                format!("allowed_extensions {:?}", after.allowed_extensions),
            ));
        }
    }
    blame.sort_by_key(|b| std::cmp::Reverse(b.0));
    let rules: Vec<String> = blame
        .iter()
        .take(5)
        .map(|(n, r)| format!("{r} hides {n}"))
        .collect();
    let rules = if rules.is_empty() {
        "its rules together".to_string()
    } else {
        rules.join(", ")
    };
    Some(crate::error::echo(&format!(
        "the workspace's own config file {} hides {hidden} of the {} {} near the top of \
         the workspace ({rules}): ferret's tools leave them out of listings and \
         searches or refuse to read them, so an empty answer may mean hidden, not absent. Tell the user: they can change or remove that file \
         (it came with the workspace), or start ferret with --config naming a file outside the \
         workspace (then the workspace's file is not read)",
        file.display(),
        visible.len(),
        if files { "files" } else { "folders" }
    ))
    .into_owned())
}

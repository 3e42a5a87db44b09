//! The fixture every fuzz target runs against, and the oracles they share.
//!
//! A workspace root beside an `outside` directory, holding every shape an agent's path
//! could take to escape or to reach a secret: absolute and relative links out, a chain,
//! an out-and-back link, links to a denied name, to a device and to a FIFO, a dangling
//! link, a loop. Files outside and secrets inside carry markers; an answer that shows a
//! marker is a sandbox escape, whatever the input was. Every change is a dry run, so
//! the tree must also stay exactly as it was: a change that lands is a defect too.

use ferret::config::{Config, Mode};
use ferret::context::{CallOptions, Ferret, Session};
use serde_json::Value;
use std::collections::BTreeMap;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// In the one file outside the root.
pub const OUTSIDE: &str = "FERRET-OUTSIDE-7f3a";
/// In the secrets inside the root (denied by default).
pub const SECRET: &str = "FERRET-SECRET-91c2";

pub struct Fixture {
    pub ferret: Ferret,
    pub session: Session,
    pub base: PathBuf,
    pub root: PathBuf,
    /// The tree as it was made: every entry below `base`, not following links.
    before: BTreeMap<PathBuf, (u64, Vec<u8>)>,
    _dir: tempfile::TempDir,
}

/// The fixture, made once per fuzzing process.
pub fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(make)
}

fn make() -> Fixture {
    let dir = tempfile::tempdir().expect("temp dir");
    let base = dir.path().canonicalize().expect("canonical temp dir");
    let root = base.join("root");
    let out = base.join("outside");
    let w = |p: &Path, s: &str| std::fs::write(p, s).expect("fixture file");
    std::fs::create_dir_all(root.join("dir/deep")).expect("fixture dirs");
    std::fs::create_dir_all(root.join("keys")).expect("fixture dirs");
    std::fs::create_dir_all(&out).expect("fixture dirs");
    w(&out.join("out.txt"), &format!("{OUTSIDE}\nMARK outside\n"));
    w(&root.join("a.txt"), "hello MARK\nsecond line\n");
    w(
        &root.join("dir/b.rs"),
        "fn main() { let mark = \"MARK\"; }\n",
    );
    w(&root.join("dir/deep/c.md"), "# c\n\nMARK in markdown\n");
    w(&root.join(".env"), &format!("TOKEN={SECRET}\n"));
    w(&root.join("keys/id_rsa"), &format!("{SECRET}\n"));
    w(&root.join(".gitignore"), "ignored.txt\n");
    w(&root.join("ignored.txt"), "MARK ignored\n");
    let link = |target: &str, name: &str| symlink(target, root.join(name)).expect("fixture link");
    link(out.to_str().expect("utf-8 temp dir"), "l_out_abs");
    link("../outside", "l_out_rel");
    link("../outside/out.txt", "l_out_file");
    link("l_out_rel", "l_chain");
    link("../root/dir", "l_back");
    link(".env", "l_secret");
    link("keys", "l_keys");
    link("/dev/zero", "l_dev");
    link("l_loop2", "l_loop1");
    link("l_loop1", "l_loop2");
    link("nothere", "l_dangling");
    link("dir", "l_in");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        root.join("fifo"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .expect("fixture fifo");

    let mut config = Config::defaults(Mode::Cli);
    config.roots = vec![root.clone()];
    config.allow_write = true;
    config.dry_run = true;
    config.state_dir = Some(base.join("state"));
    config.use_os_trash = false;
    // Calls never wait on anything for long; a hang is a finding (libFuzzer's timeout).
    config.request_timeout = std::time::Duration::from_secs(5);
    let ferret = Ferret::new(config).expect("ferret over the fixture");
    let before = snapshot(&base);
    Fixture {
        ferret,
        session: Session::new("fuzz", "fuzz"),
        base,
        root,
        before,
        _dir: dir,
    }
}

/// Every entry below `dir` (not following links): size and, for files and links,
/// content or target. The state directory is left out: reads may create it.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (u64, Vec<u8>)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.parent() == Some(dir) && e.file_name() == "state" {
                continue;
            }
            let Ok(m) = std::fs::symlink_metadata(&p) else {
                continue;
            };
            let body = if m.is_symlink() {
                std::fs::read_link(&p)
                    .map(|t| t.into_os_string().into_encoded_bytes())
                    .unwrap_or_default()
            } else if m.is_file() {
                std::fs::read(&p).unwrap_or_default()
            } else {
                Vec::new()
            };
            if m.is_dir() {
                stack.push(p.clone());
            }
            out.insert(p, (if m.is_dir() { 0 } else { m.len() }, body));
        }
    }
    out
}

impl Fixture {
    /// Calls `tool`; checks what came back shows nothing from outside or secret, and
    /// that nothing changed. Returns the answer for target-specific checks.
    pub fn call(&self, tool: &str, args: Value) -> Result<ferret::tool::CallOutput, String> {
        let input = args.to_string();
        let r = self
            .ferret
            .call(&self.session, tool, args, CallOptions::default());
        let shown = match &r {
            Ok(o) => format!("{}\n{}", o.text, o.structured),
            Err(e) => e.render(),
        };
        // An input that names a marker may see it echoed in an error: not a leak.
        if !input.contains("FERRET-") {
            assert!(
                !shown.contains(OUTSIDE),
                "{tool} {input} showed the file outside the root:\n{shown}"
            );
            assert!(
                !shown.contains(SECRET),
                "{tool} {input} showed a secret:\n{shown}"
            );
        }
        self.assert_unchanged(tool, &input);
        r.map_err(|e| e.render())
    }

    /// Every file and link below the fixture's base is as it was made.
    pub fn assert_unchanged(&self, tool: &str, input: &str) {
        let now = snapshot(&self.base);
        if now != self.before {
            let changed: Vec<_> = now
                .keys()
                .chain(self.before.keys())
                .filter(|k| now.get(*k) != self.before.get(*k))
                .collect();
            panic!("{tool} {input} changed the tree (a dry run): {changed:?}");
        }
    }
}

/// The input as text, lossily: agents send UTF-8 JSON, and ferret must take any of it.
pub fn text(data: &[u8]) -> String {
    String::from_utf8_lossy(data).into_owned()
}

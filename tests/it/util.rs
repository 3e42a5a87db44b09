//! What the integration tests share: the binary with a clean environment, a temporary
//! workspace, file helpers, and in-process calls.

use ferret::config::{Config, Mode};
use ferret::{CallOptions, ErrorCode, Ferret, Session, ToolError};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The `ferret` binary with nothing inherited but `PATH`: no `FERRET_*` from the
/// developer's shell, no real `HOME` or trash.
pub fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ferret"));
    c.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        // State (journals, servers' indexes) under the build's scratch directory, not
        // the temp dir ferret falls back to without HOME.
        .env("XDG_STATE_HOME", scratch_state());
    c
}

/// Where tests keep state they do not set themselves.
pub fn scratch_state() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("state")
}

/// A temporary directory by its canonical path (macOS and some CI runners put temp dirs
/// behind a symlink).
pub fn tempdir() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().expect("temp dir");
    let p = t.path().canonicalize().expect("canonical temp dir");
    (t, p)
}

/// Writes `content` at `root/rel`, creating directories.
pub fn write(root: &Path, rel: &str, content: impl AsRef<[u8]>) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().expect("a parent")).expect("create dirs");
    std::fs::write(p, content).expect("write");
}

/// An in-process ferret on `root` (CLI defaults), writes on or off, state in `state`.
pub fn ferret(root: &Path, allow_write: bool, state: Option<&Path>) -> Ferret {
    let mut c = Config::defaults(Mode::Cli);
    c.roots = vec![root.to_path_buf()];
    c.allow_write = allow_write;
    c.state_dir = state.map(Path::to_path_buf);
    Ferret::new(c).expect("open workspace")
}

/// Calls a tool in process; the structured result.
pub fn call(f: &Ferret, tool: &str, args: Value) -> Result<Value, ToolError> {
    f.call(
        &Session::new("t", "test"),
        tool,
        args,
        CallOptions::default(),
    )
    .map(|o| o.structured)
}

/// The error code of a call that must fail.
pub fn code(r: Result<Value, ToolError>) -> ErrorCode {
    match r {
        Ok(v) => panic!("expected an error, got {v}"),
        Err(e) => e.code,
    }
}

/// Everything below `dir`, sorted, with content: files by their bytes, directories empty,
/// anything else (links, FIFOs) as `link`. Compared before and after to prove nothing
/// changed.
pub fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read dir").flatten() {
            let p = e.path();
            let ft = e.file_type().expect("file type");
            if ft.is_dir() {
                stack.push(p.clone());
                out.push((p, Vec::new()));
            } else if ft.is_file() {
                out.push((p.clone(), std::fs::read(&p).expect("read")));
            } else {
                out.push((p, b"link".to_vec()));
            }
        }
    }
    out.sort();
    out
}

//! What the integration tests share: the binary with a clean environment, a temporary
//! workspace, file helpers, and in-process calls.

use ferret::config::{Config, Mode};
use ferret::{CallOptions, ErrorCode, Ferret, Session, ToolError};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The person's CLI over `root`, writes allowed, with its state in `state`; its
/// output piped (`.output()` to run it, `.spawn()` to race it).
pub fn cli(root: &Path, state: &Path, args: &[&str]) -> Command {
    let mut c = bin();
    c.arg("--root")
        .arg(root)
        .arg("--allow-write")
        .arg("--state-dir")
        .arg(state)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    c
}

/// An agent's stdio server over `root`, writes allowed, with its state in `state` and
/// the settings `sets` (`key=value`); no index, no elicitation (a question comes back as
/// the call's error).
pub fn agent(root: &Path, state: &Path, sets: &[&str]) -> StdioServer {
    let mut c = bin();
    c.arg("--root").arg(root).args(["--state-dir"]).arg(state);
    for s in sets {
        c.args(["--set", s]);
    }
    c.args(["serve", "--allow-write", "--no-index"]);
    StdioServer::spawn(c, "agent")
}

/// What a run printed: its stdout, then its stderr.
pub fn said(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Asserts that a run succeeded, showing what it said if not.
pub fn succeeded(o: &std::process::Output) {
    assert!(o.status.success(), "{}", said(o));
}

/// The `ferret` binary with nothing inherited but `PATH`: no `FERRET_*` from the
/// developer's shell, no real `HOME` or trash.
pub fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ferret"));
    c.env_clear()
        .envs(crate::util::portable_env())
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        // State (journals, servers' indexes) under the build's scratch directory, not
        // the temp dir ferret falls back to without HOME.
        .env("XDG_STATE_HOME", scratch_state());
    c
}

/// Sets the race hook on `c`: the change it runs pauses `ms` once its content is staged,
/// before its last checks, and marks the pause by making a file. Returns that file, for
/// [`wait_paused`].
pub fn pause_after_staged(c: &mut Command, ms: u64) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mark = std::env::temp_dir().join(format!("ferret-paused-{}-{n}", std::process::id()));
    let _ = std::fs::remove_file(&mark);
    c.env("FERRET_TEST_PAUSE_AFTER_STAGED", ms.to_string())
        .env("FERRET_TEST_PAUSED_MARK", &mark);
    mark
}

/// Waits (up to 120 s) until the change started with [`pause_after_staged`] is in its
/// pause: what the test does next surely lands in that window, however loaded the
/// machine.
pub fn wait_paused(mark: &Path) {
    let t = std::time::Instant::now();
    while !mark.exists() {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(120),
            "the change never reached its pause"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let _ = std::fs::remove_file(mark);
}

/// `FERRET_PORTABLE` from the test's own environment, for every binary a test spawns
/// with a cleared environment: `FERRET_PORTABLE=1 cargo test` runs the suite over the
/// portable code paths (the component-walk resolver, no OS watcher, named staging).
pub fn portable_env() -> Vec<(&'static str, std::ffi::OsString)> {
    std::env::var_os("FERRET_PORTABLE")
        .map(|v| ("FERRET_PORTABLE", v))
        .into_iter()
        .collect()
}

/// Where the user's trash keeps the trashed entry `name`, with `XDG_DATA_HOME` at
/// `data`: the freedesktop trash's `files/`, or (`FERRET_PORTABLE=1`) the fake OS trash.
pub fn os_trash_item(data: &Path, name: &str) -> PathBuf {
    if portable_env().iter().any(|(_, v)| v == "1") {
        data.join("ferret-os-trash").join(name)
    } else {
        data.join("Trash/files").join(name)
    }
}

/// Makes a FIFO at `p` (`mkfifo(3)`: rustix's `mknodat` does not exist on macOS).
pub fn mkfifo(p: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes())?;
    // SAFETY: a NUL-terminated path the call only reads.
    if unsafe { libc::mkfifo(c.as_ptr(), 0o644) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
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

/// Calls a tool in process: its structured result and its text.
pub fn run(f: &Ferret, tool: &str, args: Value) -> Result<(Value, String), ToolError> {
    f.call(
        &Session::new("t", "test"),
        tool,
        args,
        CallOptions::default(),
    )
    .map(|o| (o.structured, o.text))
}

/// [`run`] for a call that must succeed.
pub fn ok(f: &Ferret, tool: &str, args: Value) -> (Value, String) {
    run(f, tool, args.clone()).unwrap_or_else(|e| panic!("{tool} {args}: {e:?}"))
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

/// `ferret serve` over stdio on the real binary, raw JSON-RPC lines: requests in,
/// answers out, the handshake done, and the server's peak RSS on demand.
pub struct StdioServer {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    answers: std::sync::mpsc::Receiver<Value>,
    next: u64,
}

impl StdioServer {
    /// Spawns `cmd` (a `ferret … serve` command) with piped stdio and says hello as
    /// `client`.
    pub fn spawn(cmd: Command, client: &str) -> StdioServer {
        Self::spawn_with(cmd, client, serde_json::json!({}))
    }

    /// [`StdioServer::spawn`] for a client declaring `capabilities` (roots, say).
    pub fn spawn_with(mut cmd: Command, client: &str, capabilities: Value) -> StdioServer {
        use std::io::BufRead;
        use std::process::Stdio;
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().expect("spawn ferret serve");
        let stdin = child.stdin.take();
        let stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        let (tx, answers) = std::sync::mpsc::channel::<Value>();
        std::thread::spawn(move || {
            for line in stdout.lines() {
                let Ok(line) = line else { break };
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    let _ = tx.send(v);
                }
            }
        });
        let mut s = StdioServer {
            child,
            stdin,
            answers,
            next: 1000,
        };
        s.send(
            serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": capabilities,
                       "clientInfo": {"name": client, "version": "1"}}}),
        );
        let init = s.recv();
        assert_eq!(init["id"], 0, "{init}");
        s.send(serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        s
    }

    pub fn send(&mut self, v: Value) {
        use std::io::Write;
        let stdin = self.stdin.as_mut().expect("open");
        stdin
            .write_all(format!("{v}\n").as_bytes())
            .expect("write request");
        stdin.flush().expect("flush");
    }

    /// Sends a `tools/call` with the given id and does not wait.
    pub fn ask(&mut self, id: u64, tool: &str, args: &Value) {
        self.send(
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                         "params": {"name": tool, "arguments": args}}),
        );
    }

    /// The next message the server sends (a minute at most).
    pub fn recv(&self) -> Value {
        self.answers
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("an answer")
    }

    /// Every message until the answer to `id` (the last), within `wait`.
    pub fn until(&self, id: u64, wait: std::time::Duration) -> Vec<Value> {
        let end = std::time::Instant::now() + wait;
        let mut got = Vec::new();
        while let Ok(v) = self
            .answers
            .recv_timeout(end.saturating_duration_since(std::time::Instant::now()))
        {
            let done = v["id"] == id && (v.get("result").is_some() || v.get("error").is_some());
            got.push(v);
            if done {
                return got;
            }
        }
        panic!("no answer to {id} within {wait:?}; got {got:?}");
    }

    /// One call's result (`isError`, `content`, `structuredContent`).
    pub fn call(&mut self, tool: &str, args: &Value) -> Value {
        let id = self.next;
        self.next += 1;
        self.ask(id, tool, args);
        loop {
            let v = self.recv();
            if v["id"] == id {
                return v["result"].clone();
            }
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Peak resident memory so far, in MiB.
    pub fn peak_mib(&self) -> u64 {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).expect("status");
        let kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .expect("VmHWM");
        kb / 1024
    }
}

impl Drop for StdioServer {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

/// `ferret serve --http 127.0.0.1:0` on the real binary: the port it printed, killed
/// when dropped.
pub struct HttpServer {
    pub child: std::process::Child,
    pub port: u16,
}

impl HttpServer {
    /// Spawns `cmd` (a `ferret … serve --http 127.0.0.1:0 …` command) and waits for the
    /// address it prints on stderr; stderr is drained afterwards so it never blocks.
    pub fn spawn(mut cmd: Command) -> HttpServer {
        use std::io::BufRead;
        use std::process::Stdio;
        cmd.stdout(Stdio::null()).stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn ferret");
        let mut lines = std::io::BufReader::new(child.stderr.take().expect("stderr"));
        let mut line = String::new();
        let port = loop {
            line.clear();
            assert!(
                lines.read_line(&mut line).expect("read stderr") > 0,
                "server did not start"
            );
            if let Some(rest) = line.split("http://127.0.0.1:").nth(1) {
                break rest.split('/').next().unwrap().parse::<u16>().unwrap();
            }
        };
        std::thread::spawn(move || std::io::copy(&mut lines, &mut std::io::sink()));
        HttpServer { child, port }
    }

    /// Raw bytes on a fresh connection: see [`http_exchange`].
    pub fn exchange(&self, request: &[u8]) -> (u16, String) {
        http_exchange(self.port, request)
    }
}

/// Raw bytes on a fresh connection to `port` (the request should say
/// `Connection: close`): the status and the whole answer.
pub fn http_exchange(port: u16, request: &[u8]) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    s.write_all(request).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&out).to_string();
    let status = text
        .strip_prefix("HTTP/1.1 ")
        .and_then(|t| t.get(..3))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, text)
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An rmcp client talking to a server on `shared` in process, over a pipe of `buffer`
/// bytes: one session. The server task ends when the client is dropped or cancelled.
pub async fn rmcp_client(
    shared: std::sync::Arc<ferret::mcp::Shared>,
    buffer: usize,
) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    use rmcp::ServiceExt;
    let (server_io, client_io) = tokio::io::duplex(buffer);
    tokio::spawn(async move {
        let running = ferret::mcp::FerretServer::new(shared)
            .serve(server_io)
            .await
            .unwrap();
        let _ = running.waiting().await;
    });
    ().serve(client_io).await.unwrap()
}

/// One `tools/call` through an rmcp client, with `args` as its arguments.
pub async fn rmcp_call(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    tool: &'static str,
    args: Value,
) -> rmcp::model::CallToolResult {
    client
        .call_tool(
            rmcp::model::CallToolRequestParams::new(tool)
                .with_arguments(args.as_object().cloned().unwrap_or_default()),
        )
        .await
        .unwrap()
}

/// A workspace for change/undo tests: `root` to work in and `state` for journals, side
/// by side under one temp dir (`base`, where CLI runs start, outside the root).
pub struct Ws {
    _tmp: tempfile::TempDir,
    pub base: PathBuf,
    pub root: PathBuf,
    pub state: PathBuf,
}

impl Ws {
    pub fn new() -> Ws {
        let (tmp, base) = tempdir();
        let root = base.join("root");
        let state = base.join("state");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&state).unwrap();
        Ws {
            _tmp: tmp,
            base,
            root,
            state,
        }
    }

    /// An in-process ferret, writes on, sharing the state directory (as an MCP server
    /// does).
    pub fn ferret(&self) -> Ferret {
        let mut c = Config::defaults(Mode::Server);
        c.roots = vec![self.root.clone()];
        c.allow_write = true;
        c.state_dir = Some(self.state.clone());
        Ferret::new(c).unwrap()
    }

    /// `ferret --root ROOT --state-dir STATE ARGS`, run outside the root, its own trash.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = bin();
        c.current_dir(&self.base)
            .env("XDG_DATA_HOME", self.base.join("data"))
            .arg("--root")
            .arg(&self.root)
            .arg("--state-dir")
            .arg(&self.state)
            .args(args);
        c
    }

    /// [`Ws::cmd`] run to its end.
    pub fn cli(&self, args: &[&str]) -> std::process::Output {
        self.cmd(args).output().unwrap()
    }

    /// The person at the terminal: `ferret --allow-write ARGS`, with nothing on stdin
    /// (a question is answered no).
    pub fn person(&self, args: &[&str]) -> std::process::Output {
        self.cmd(&[&["--allow-write"][..], args].concat())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    }

    pub fn read(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.root.join(rel)).ok()
    }

    /// Every journal under the state directory, concatenated.
    pub fn journal(&self) -> String {
        let mut text = String::new();
        for d in std::fs::read_dir(&self.state).unwrap().flatten() {
            if let Ok(t) = std::fs::read_to_string(d.path().join("journal.jsonl")) {
                text.push_str(&t);
            }
        }
        text
    }
}

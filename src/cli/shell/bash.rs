//! Direct bash (seed 003 §3): `!cmd` / `$cmd` runs `bash -c cmd` in the first root,
//! its output streamed to the terminal as it comes.
//!
//! Before anything runs, the line is judged ([`classify`]): a blocked command is refused
//! with its reason; a destructive one is asked about, always; any other is asked about
//! when `direct_bash_confirm` is on. Every line is audit-logged with the decision and,
//! when it ran, the exit code.
//!
//! This runs the person's own command with the person's own rights: it is not, and
//! cannot be, sandboxed. The workspace's tools stay the only way an agent touches files.

use super::classify::{self, Blocklist, Kind, Verdict};
use crate::audit::{AuditEntry, Outcome};
use crate::cli::bridge::{Answer, Caller};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Instant;

/// One direct bash line and what judging and running it needs.
pub struct Direct<'a> {
    pub caller: &'a Caller<'a>,
    pub blocklist: &'a Blocklist,
    /// On a terminal the command may read it; in a script its input is empty (the
    /// script's lines are the shell's, not the command's).
    pub interactive: bool,
    pub line: &'a str,
}

/// Judges, asks, runs; returns the exit code (2 when refused or not confirmed).
pub fn run(d: &Direct) -> anyhow::Result<i32> {
    let started = Instant::now();
    if d.line.is_empty() {
        eprintln!("ferret: ! needs a command: !ls -la");
        return Ok(2);
    }
    let ferret = d.caller.ferret;
    let root = ferret
        .workspace()
        .canonical_roots()
        .first()
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("no workspace root to run in"))?;
    // What a path in the command names: only to tell `> file` over an existing file from
    // a new one. The person's own words, stat'ed where bash will resolve them.
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let probe = |p: &str| probe(&root, home.as_deref(), p);
    let verdict = classify::classify(d.line, d.blocklist, &probe);
    let question = match &verdict {
        Verdict::Blocked(why) => {
            eprintln!("ferret: refused, nothing was run: {why}");
            eprintln!(
                "ferret: hint: the bash_blocklist setting and the rules in the README say what is refused; \
                 run it in your own terminal if you mean it"
            );
            audit(d, "blocked", Some(why.clone()), None, started);
            return Ok(2);
        }
        Verdict::Destructive(why) => Some(format!(
            "`{}` is destructive ({}). Run it?",
            d.line,
            why.join("; ")
        )),
        Verdict::Harmless if ferret.config().direct_bash_confirm => {
            Some(format!("Run `{}` in {}?", d.line, root.display()))
        }
        Verdict::Harmless => None,
    };
    if let Some(q) = question
        && !d.caller.answer.confirm(&q)?
    {
        if d.caller.answer == Answer::No {
            // No one was asked: say what the question was, and how to answer it.
            eprintln!("ferret: not run: {q} (no terminal to ask on: pass --yes to answer yes)");
        } else {
            eprintln!("ferret: not run");
        }
        let why = match verdict {
            Verdict::Destructive(why) => Some(why.join("; ")),
            _ => None,
        };
        audit(d, "declined", why, None, started);
        return Ok(2);
    }
    let mut cmd = std::process::Command::new("bash");
    cmd.arg("-c").arg(d.line).current_dir(&root);
    if !d.interactive {
        cmd.stdin(Stdio::null());
    }
    // The child stays in the shell's process group, so the terminal's Ctrl-C reaches it
    // (and anything it started) directly; the shell's own SIGINT handler only sets a
    // flag, so the shell survives and waits for the child to end.
    let status = match cmd.status() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ferret: cannot start bash: {e}");
            audit(d, "failed", Some(e.to_string()), None, started);
            return Ok(127);
        }
    };
    let code = exit_code(status);
    if code > 128 {
        eprintln!(); // after ^C, the prompt starts on its own line
    }
    audit(d, "ran", None, Some(code), started);
    Ok(code)
}

fn exit_code(status: std::process::ExitStatus) -> i32 {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            return 128 + sig;
        }
    }
    status.code().unwrap_or(1)
}

fn probe(root: &Path, home: Option<&Path>, p: &str) -> Option<Kind> {
    let path = match (p.strip_prefix('~'), home) {
        (Some(rest), Some(home)) if rest.is_empty() || rest.starts_with('/') => {
            home.join(rest.trim_start_matches('/'))
        }
        _ => root.join(p), // an absolute p replaces root
    };
    match std::fs::metadata(&path) {
        Ok(m) if m.is_dir() => Some(Kind::Dir),
        Ok(_) => Some(Kind::File),
        // A dangling link: writing through it creates its target.
        Err(_) => std::fs::symlink_metadata(&path).ok().map(|_| Kind::File),
    }
}

fn audit(d: &Direct, decision: &str, reason: Option<String>, code: Option<i32>, started: Instant) {
    let c = d.caller;
    c.ferret.audit().log(AuditEntry {
        session_id: c.session.id.clone(),
        agent_id: c.session.agent_id.clone(),
        reason,
        duration_ms: started.elapsed().as_secs_f64() * 1000.0,
        command: Some(d.line.to_string()),
        decision: Some(decision.to_string()),
        exit_code: code,
        ..AuditEntry::event(
            "direct_bash",
            match decision {
                "ran" => Outcome::Success,
                "failed" => Outcome::Error,
                _ => Outcome::Denied,
            },
        )
    });
}

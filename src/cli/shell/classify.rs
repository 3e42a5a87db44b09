//! The direct-bash classifier: reads a `!cmd` line as bash would (brush-parser's bash
//! grammar: words and quotes, pipelines, `&&`, `||`, `;`, subshells, groups, loops,
//! functions, command and process substitutions, redirections) and says whether it is
//! harmless, destructive (ask first, always) or blocked (refused before anything runs).
//!
//! It judges commands, never substrings: `echo rm -rf /` is harmless, `ls && rm x` is
//! destructive. Prefixes that run another command (`sudo`, `doas`, `env`, `nice`,
//! `nohup`, `time`, `timeout`, `xargs`, `watch`, `command`, `exec`, `stdbuf`, …) are
//! looked through; `bash -c STR`, `sh -c STR` and `eval STR` are parsed in turn, as are
//! `$(…)`, `` `…` `` and `<(…)`; `find -exec CMD` judges CMD.
//!
//! This is a seat belt for a person typing commands, not a sandbox: bash can always be
//! talked into something the classifier cannot see (a script file, a variable holding a
//! command). What it cannot read it does not call harmless: a line that does not parse,
//! or a command whose name is only known when it runs, is asked about.

use brush_parser::ast;
use globset::{Glob, GlobMatcher};

/// What the classifier decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Runs without a question when `direct_bash_confirm` is off.
    Harmless,
    /// Asks y/N first, whatever the configuration: why, one reason per finding.
    Destructive(Vec<String>),
    /// Refused outright, before anything runs: why.
    Blocked(String),
}

/// What a path names, as far as the classifier needs to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
}

/// One `bash_blocklist` entry: shell words; the first is a glob on the command's name,
/// each other word a glob that some argument must match (`dd of=/dev/sd*`,
/// `git push * --force`). The command is the one left after prefixes (`sudo`, `env`…).
#[derive(Debug, Clone)]
struct Pattern {
    text: String,
    name: GlobMatcher,
    args: Vec<GlobMatcher>,
}

/// The configurable part of the rules: the `bash_blocklist` entries.
#[derive(Debug, Clone, Default)]
pub struct Blocklist(Vec<Pattern>);

impl Blocklist {
    /// Compiles the entries; a bad one is an error naming it.
    pub fn new(entries: &[String]) -> anyhow::Result<Self> {
        let mut out = Vec::new();
        for text in entries {
            let words = shell_words::split(text)
                .map_err(|e| anyhow::anyhow!("bash_blocklist entry {text:?}: {e}"))?;
            let glob = |w: &str| {
                Glob::new(w)
                    .map(|g| g.compile_matcher())
                    .map_err(|e| anyhow::anyhow!("bash_blocklist entry {text:?}: {e}"))
            };
            let Some((name, args)) = words.split_first() else {
                continue;
            };
            out.push(Pattern {
                text: text.clone(),
                name: glob(name)?,
                args: args.iter().map(|a| glob(a)).collect::<Result<_, _>>()?,
            });
        }
        Ok(Blocklist(out))
    }

    fn find(&self, name: &str, args: &[String]) -> Option<&str> {
        self.0
            .iter()
            .find(|p| {
                p.name.is_match(name) && p.args.iter().all(|g| args.iter().any(|a| g.is_match(a)))
            })
            .map(|p| p.text.as_str())
    }
}

/// Classifies one direct-bash line. `probe` says what a path (as written: relative to the
/// working directory, or absolute) names now; it decides whether `>` overwrites a file.
pub fn classify(
    line: &str,
    blocklist: &Blocklist,
    probe: &dyn Fn(&str) -> Option<Kind>,
) -> Verdict {
    let mut w = Walker {
        blocklist,
        probe,
        blocked: None,
        reasons: Vec::new(),
        functions: Vec::new(),
        seen: Vec::new(),
        depth: 0,
    };
    w.source(line);
    if let Some(b) = w.blocked {
        Verdict::Blocked(b)
    } else if w.reasons.is_empty() {
        Verdict::Harmless
    } else {
        let mut reasons = w.reasons;
        reasons.dedup();
        Verdict::Destructive(reasons)
    }
}

/// Nesting deeper than this (`bash -c "bash -c …"`) is not read further: asked about.
const MAX_DEPTH: u32 = 16;

struct Walker<'a> {
    blocklist: &'a Blocklist,
    probe: &'a dyn Fn(&str) -> Option<Kind>,
    blocked: Option<String>,
    reasons: Vec<String>,
    /// The functions being defined around the current command (fork bomb detection).
    functions: Vec<String>,
    /// Every program judged so far, in order (what a `$(…)` or `<(…)` ran).
    seen: Vec<String>,
    depth: u32,
}

impl Walker<'_> {
    fn block(&mut self, why: impl Into<String>) {
        if self.blocked.is_none() {
            self.blocked = Some(why.into());
        }
    }

    fn ask(&mut self, why: impl Into<String>) {
        self.reasons.push(why.into());
    }

    /// A piece of bash source: the line, a `bash -c` string, a `$(…)` body.
    fn source(&mut self, text: &str) {
        if self.depth >= MAX_DEPTH {
            self.ask("nested too deeply to read");
            return;
        }
        self.depth += 1;
        let parsed = brush_parser::tokenize_str(text)
            .map_err(|e| e.to_string())
            .and_then(|t| {
                brush_parser::parse_tokens(&t, &brush_parser::ParserOptions::default())
                    .map_err(|e| e.to_string())
            });
        match parsed {
            Ok(program) => {
                for list in &program.complete_commands {
                    self.list(list);
                }
            }
            Err(e) => self.ask(format!("it could not be read as bash ({e})")),
        }
        self.depth -= 1;
    }

    fn list(&mut self, list: &ast::CompoundList) {
        for ast::CompoundListItem(and_or, sep) in &list.0 {
            let background = matches!(sep, ast::SeparatorOperator::Async);
            self.pipeline(&and_or.first, background);
            for next in &and_or.additional {
                let (ast::AndOr::And(p) | ast::AndOr::Or(p)) = next;
                self.pipeline(p, background);
            }
        }
    }

    fn pipeline(&mut self, p: &ast::Pipeline, background: bool) {
        let mut names = Vec::new();
        for cmd in &p.seq {
            names.push(self.command(cmd));
        }
        // A download piped into an interpreter runs code nobody has read.
        if let Some(i) = names
            .iter()
            .position(|n| n.as_deref().is_some_and(is_downloader))
            && let Some(sh) = names[i + 1..].iter().flatten().find(|n| is_interpreter(n))
        {
            let dl = names[i].clone().unwrap_or_default();
            self.block(format!(
                "it pipes a download into {sh} ({dl} … | {sh}): download the script, read it, then run it"
            ));
        }
        // A function that starts itself in a pipe or in the background: a fork bomb.
        if let Some(f) = self.functions.last()
            && (p.seq.len() > 1 || background)
            && names.iter().flatten().any(|n| n == f)
        {
            let f = f.clone();
            self.block(format!(
                "function {f} starts copies of itself ({f} | {f} &): a fork bomb"
            ));
        }
    }

    /// Judges one command; returns the name of the program it runs, when simple.
    fn command(&mut self, cmd: &ast::Command) -> Option<String> {
        match cmd {
            ast::Command::Simple(s) => self.simple(s),
            ast::Command::Compound(c, redirects) => {
                self.compound(c);
                if let Some(r) = redirects {
                    for r in &r.0 {
                        self.redirect(r);
                    }
                }
                None
            }
            ast::Command::Function(f) => {
                self.functions
                    .push(brush_parser::unquote_str(&f.fname.value));
                self.compound(&f.body.0);
                if let Some(r) = &f.body.1 {
                    for r in &r.0 {
                        self.redirect(r);
                    }
                }
                self.functions.pop();
                None
            }
            ast::Command::ExtendedTest(_, redirects) => {
                if let Some(r) = redirects {
                    for r in &r.0 {
                        self.redirect(r);
                    }
                }
                None
            }
        }
    }

    fn compound(&mut self, c: &ast::CompoundCommand) {
        use ast::CompoundCommand as C;
        match c {
            C::Arithmetic(_) => {}
            C::ArithmeticForClause(f) => self.list(&f.body.list),
            C::BraceGroup(g) => self.list(&g.list),
            C::Subshell(s) => self.list(&s.list),
            C::ForClause(f) => {
                for w in f.values.iter().flatten() {
                    self.word(&w.value);
                }
                self.list(&f.body.list);
            }
            C::CaseClause(c) => {
                self.word(&c.value.value);
                for item in &c.cases {
                    if let Some(l) = &item.cmd {
                        self.list(l);
                    }
                }
            }
            C::IfClause(i) => {
                self.list(&i.condition);
                self.list(&i.then);
                for e in i.elses.iter().flatten() {
                    if let Some(c) = &e.condition {
                        self.list(c);
                    }
                    self.list(&e.body);
                }
            }
            C::WhileClause(w) | C::UntilClause(w) => {
                self.list(&w.0);
                self.list(&w.1.list);
            }
            C::Coprocess(c) => {
                self.command(&c.body);
            }
        }
    }

    fn simple(&mut self, s: &ast::SimpleCommand) -> Option<String> {
        let mut argv = Vec::new();
        let mark = self.seen.len();
        let items = s
            .prefix
            .iter()
            .flat_map(|p| p.0.iter())
            .map(Some)
            .chain(std::iter::once(None))
            .chain(s.suffix.iter().flat_map(|p| p.0.iter()).map(Some));
        for item in items {
            use ast::CommandPrefixOrSuffixItem as I;
            match item {
                None => {
                    if let Some(w) = &s.word_or_name {
                        self.word(&w.value);
                        argv.push(w.value.clone());
                    }
                }
                Some(I::Word(w)) => {
                    self.word(&w.value);
                    argv.push(w.value.clone());
                }
                // After the name, `of=/dev/sda` is an argument (brush reads it as an
                // assignment word, for `declare`); before it, `FOO=1 cmd` sets a variable.
                Some(I::AssignmentWord(_, w)) => {
                    self.word(&w.value);
                    if !argv.is_empty() {
                        argv.push(w.value.clone());
                    }
                }
                Some(I::IoRedirect(r)) => self.redirect(r),
                Some(I::ProcessSubstitution(_, sub)) => {
                    self.list(&sub.list);
                    argv.push("<(…)".to_string());
                }
            }
        }
        let raw_name = argv.first()?.clone();
        if raw_name.contains(['$', '`']) {
            self.ask(format!("the command {raw_name} is only known when it runs"));
            return None;
        }
        let argv: Vec<String> = argv.iter().map(|w| brush_parser::unquote_str(w)).collect();
        // `bash <(curl …)`, `sh -c "$(wget -O- …)"`: a download handed to an interpreter.
        let downloads = self.seen[mark..].iter().find(|n| is_downloader(n)).cloned();
        let name = self.argv(&argv)?;
        if let Some(dl) = downloads
            && is_interpreter(&name)
        {
            self.block(format!(
                "it hands a download to {name} ({name} <({dl} …)): download the script, read it, then run it"
            ));
        }
        Some(name)
    }

    /// Looks into one word for the commands it runs (`$(…)`, `` `…` ``).
    fn word(&mut self, word: &str) {
        if !word.contains(['$', '`']) {
            return;
        }
        match brush_parser::word::parse(word, &brush_parser::ParserOptions::default()) {
            Ok(pieces) => self.pieces(&pieces),
            Err(_) => self.ask(format!("the word {word} could not be read")),
        }
    }

    fn pieces(&mut self, pieces: &[brush_parser::word::WordPieceWithSource]) {
        use brush_parser::word::WordPiece as P;
        for p in pieces {
            match &p.piece {
                P::CommandSubstitution(s) | P::BackquotedCommandSubstitution(s) => self.source(s),
                P::DoubleQuotedSequence(inner) | P::GettextDoubleQuotedSequence(inner) => {
                    self.pieces(inner)
                }
                _ => {}
            }
        }
    }

    fn redirect(&mut self, r: &ast::IoRedirect) {
        use ast::{IoFileRedirectKind as K, IoFileRedirectTarget as T, IoRedirect as R};
        let (target, overwrite) = match r {
            R::File(_, kind, T::Filename(w)) => {
                self.word(&w.value);
                (w, matches!(kind, K::Write | K::Clobber))
            }
            R::File(_, _, T::ProcessSubstitution(_, sub)) => {
                self.list(&sub.list);
                return;
            }
            R::OutputAndError(w, append) => {
                self.word(&w.value);
                (w, !append)
            }
            R::File(..) | R::HereDocument(..) | R::HereString(..) => return,
        };
        let path = brush_parser::unquote_str(&target.value);
        if is_disk(&path) {
            self.block(format!("it writes to the disk device {path}"));
        } else if overwrite && !is_harmless_device(&path) {
            if path.contains(['$', '`', '*', '?', '[']) {
                self.ask(format!("> {path} may overwrite a file"));
            } else if (self.probe)(&path) == Some(Kind::File) {
                self.ask(format!("> {path} overwrites an existing file"));
            }
        }
    }

    /// Judges a command by its words (quotes removed). Returns the program's name.
    fn argv(&mut self, argv: &[String]) -> Option<String> {
        let (name, args) = strip_prefixes(argv)?;
        let name = name.to_string();
        self.seen.push(name.clone());
        if let Some(inner) = prefix_command(&name, args) {
            // The prefix runs a command made of its remaining words.
            return match inner {
                Inner::Argv(rest) => self.argv(&rest),
                Inner::Source(text) => {
                    self.source(&text);
                    Some(name)
                }
                Inner::Nothing => Some(name),
            };
        }
        if let Some(p) = self.blocklist.find(&name, args) {
            self.block(format!("it matches the bash_blocklist entry {p:?}"));
            return Some(name);
        }
        self.rules(&name, args);
        Some(name)
    }

    /// The built-in rules for one program and its arguments.
    fn rules(&mut self, name: &str, args: &[String]) {
        let (flags, operands) = split_options(args);
        let short = |c: char| flags.iter().any(|f| is_short_with(f, c));
        let long = |l: &str| {
            flags
                .iter()
                .any(|f| f == l || f.starts_with(&format!("{l}=")))
        };
        let recursive = short('r') || short('R') || long("--recursive");
        match name {
            "rm" | "rmdir" | "unlink" | "shred" | "srm" | "wipe" => {
                if args.iter().any(|a| a == "--no-preserve-root") {
                    self.block("rm --no-preserve-root: deleting / is never wanted");
                } else if name == "rm"
                    && recursive
                    && let Some(t) = operands.iter().find(|t| is_precious(t))
                {
                    self.block(format!(
                        "rm -r of {t}: it would delete the system or your home directory"
                    ));
                } else if let Some(t) = operands.iter().find(|t| is_disk(t)) {
                    self.block(format!("{name} of the disk device {t}"));
                }
                self.ask(format!("{name} deletes files"));
            }
            "mv" => self.ask("mv moves or replaces files"),
            "truncate" => self.ask("truncate cuts files short"),
            "dd" => {
                if let Some(of) = args.iter().find_map(|a| a.strip_prefix("of=")) {
                    if is_disk(of) || (of.starts_with("/dev/") && !is_harmless_device(of)) {
                        self.block(format!("dd of={of} writes over a device"));
                    } else if !is_harmless_device(of) {
                        self.ask(format!("dd of={of} overwrites it"));
                    }
                }
            }
            "chmod" | "chown" | "chgrp" if recursive => {
                // The first operand is the mode or owner.
                if let Some(t) = operands.iter().skip(1).find(|t| is_precious(t)) {
                    self.block(format!(
                        "{name} -R of {t}: it would change the whole system"
                    ));
                }
                self.ask(format!("{name} -R changes a whole tree"));
            }
            "cp" | "install" => {
                if operands.len() >= 2
                    && let Some(dst) = operands.last()
                    && (self.probe)(dst) == Some(Kind::File)
                {
                    self.ask(format!("{name} overwrites {dst}"));
                }
            }
            "tee" => {
                if !(short('a') || long("--append"))
                    && let Some(f) = operands
                        .iter()
                        .find(|f| (self.probe)(f) == Some(Kind::File))
                {
                    self.ask(format!("tee overwrites {f}"));
                }
            }
            "sed" if short('i') || long("--in-place") => self.ask("sed -i edits files in place"),
            "perl" | "ruby" if short('i') => self.ask(format!("{name} -i edits files in place")),
            "rsync"
                if flags
                    .iter()
                    .any(|f| f.starts_with("--delete") || f == "--remove-source-files") =>
            {
                self.ask("rsync --delete removes files")
            }
            "find" => self.find(args),
            "git" => self.git(args),
            _ if is_disk_tool(name) => {
                if let Some(t) = operands.iter().find(|t| is_disk(t)) {
                    self.block(format!("{name} of the disk device {t}"));
                }
            }
            _ => {}
        }
    }

    fn find(&mut self, args: &[String]) {
        let mut i = 0;
        while i < args.len() {
            match args[i].as_str() {
                "-delete" => self.ask("find -delete deletes what it finds"),
                "-exec" | "-execdir" | "-ok" | "-okdir" => {
                    let end = args[i + 1..]
                        .iter()
                        .position(|a| a == ";" || a == "+")
                        .map_or(args.len(), |p| i + 1 + p);
                    let cmd: Vec<String> = args[i + 1..end].to_vec();
                    if !cmd.is_empty() {
                        self.argv(&cmd);
                    }
                    i = end;
                }
                _ => {}
            }
            i += 1;
        }
    }

    fn git(&mut self, args: &[String]) {
        // git's own options come before the subcommand; -C and -c take a value.
        let mut i = 0;
        while i < args.len() && args[i].starts_with('-') {
            if matches!(
                args[i].as_str(),
                "-C" | "-c" | "--git-dir" | "--work-tree" | "--namespace"
            ) {
                i += 1;
            }
            i += 1;
        }
        let Some(sub) = args.get(i) else { return };
        let rest = &args[i + 1..];
        let has = |s: &str| rest.iter().any(|a| a == s);
        let (flags, operands) = split_options(rest);
        let short = |c: char| flags.iter().any(|f| is_short_with(f, c));
        let why = match sub.as_str() {
            "reset" if has("--hard") || has("--merge") || has("--keep") => {
                Some("git reset --hard throws away uncommitted changes")
            }
            "clean" if !(has("-n") || has("--dry-run") || short('n')) => {
                Some("git clean deletes untracked files")
            }
            "checkout" if has("--") || has(".") || has("-f") || has("--force") => {
                Some("git checkout of paths throws away their changes")
            }
            "restore" if !has("--staged") || has("--worktree") => {
                Some("git restore throws away changes")
            }
            "switch" if has("-f") || has("--force") || has("--discard-changes") => {
                Some("git switch --force throws away changes")
            }
            "push"
                if has("-f")
                    || has("--force")
                    || rest.iter().any(|a| {
                        a.starts_with("--force-with-lease") || a.starts_with("--mirror")
                    })
                    || has("--delete")
                    || operands
                        .iter()
                        .any(|a| a.starts_with('+') || a.starts_with(':')) =>
            {
                Some("git push --force rewrites the remote's history")
            }
            "branch" if has("-D") || (has("-d") && has("--force")) || (short('D')) => {
                Some("git branch -D deletes a branch")
            }
            "stash" if has("drop") || has("clear") => Some("git stash drop deletes stashed work"),
            "rm" => Some("git rm deletes files"),
            "filter-branch" | "filter-repo" => Some("git filter-branch rewrites history"),
            "gc" if rest.iter().any(|a| a.starts_with("--prune")) => {
                Some("git gc --prune deletes unreachable commits")
            }
            _ => None,
        };
        if let Some(why) = why {
            self.ask(why);
        }
    }
}

/// `/usr/bin/rm` is `rm`; a leading backslash (`\rm`, alias bypass) was removed by unquoting.
fn base(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

/// Skips `sudo`, `doas`, `env`, `nice`… with their own options, and leading `VAR=value`
/// words; returns the program that really runs and its arguments.
fn strip_prefixes(argv: &[String]) -> Option<(&str, &[String])> {
    let mut rest = argv;
    loop {
        let (first, tail) = rest.split_first()?;
        let name = base(first);
        // Options of each prefix that take a separate value.
        let valued: &[&str] = match name {
            "sudo" => &[
                "-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T", "-R",
            ],
            "doas" => &["-u", "-C"],
            "env" => &["-u", "-C", "-S", "--unset", "--chdir"],
            "nice" => &["-n", "--adjustment"],
            "ionice" => &["-c", "-n", "-t", "-p", "-P", "-u"],
            "nohup" | "time" | "builtin" | "setsid" | "unbuffer" | "caffeinate" => &[],
            "exec" => &["-a"],
            "command" => &[],
            "stdbuf" => &["-i", "-o", "-e"],
            "chrt" => &["-p"],
            "taskset" => &[],
            "timeout" => &["-s", "-k", "--signal", "--kill-after"],
            _ => {
                // `FOO=1 rm x`: brush reads assignments apart, but `env`'s come as words.
                return Some((name, tail));
            }
        };
        if name == "command" && tail.first().is_some_and(|a| a == "-v" || a == "-V") {
            return Some(("command", tail)); // a lookup: runs nothing
        }
        let mut i = 0;
        while i < tail.len() {
            let a = &tail[i];
            if a == "--" {
                i += 1;
                break;
            }
            if a.starts_with('-') && a.len() > 1 {
                i += if valued.contains(&a.as_str()) { 2 } else { 1 };
                continue;
            }
            if name == "env" && a.contains('=') {
                i += 1;
                continue;
            }
            break;
        }
        rest = tail.get(i..).unwrap_or(&[]);
        match name {
            // timeout DURATION CMD; taskset MASK CMD; chrt PRIO CMD
            "timeout" | "taskset" | "chrt" => rest = rest.get(1..).unwrap_or(&[]),
            _ => {}
        }
        if rest.is_empty() {
            return None;
        }
    }
}

/// A program that runs another command given as its arguments or as source text.
enum Inner {
    Argv(Vec<String>),
    Source(String),
    Nothing,
}

fn prefix_command(name: &str, args: &[String]) -> Option<Inner> {
    match name {
        "bash" | "sh" | "zsh" | "dash" | "ksh" | "mksh" => {
            // `bash -c STR`: STR is the program; flags may be combined (`-ec`).
            let i = args
                .iter()
                .position(|a| a.starts_with('-') && !a.starts_with("--") && a.contains('c'))?;
            Some(
                args.get(i + 1)
                    .map_or(Inner::Nothing, |s| Inner::Source(s.clone())),
            )
        }
        "busybox" => Some(Inner::Argv(args.to_vec())).filter(|_| !args.is_empty()),
        "eval" => Some(Inner::Source(args.join(" "))),
        "watch" => {
            let mut i = 0;
            while i < args.len() && args[i].starts_with('-') {
                i += if matches!(args[i].as_str(), "-n" | "-d" | "--interval") {
                    2
                } else {
                    1
                };
            }
            Some(Inner::Source(args.get(i..).unwrap_or(&[]).join(" ")))
        }
        "xargs" => {
            let valued = [
                "-I",
                "-L",
                "-n",
                "-P",
                "-d",
                "-E",
                "-s",
                "-a",
                "--delimiter",
                "--max-args",
                "--max-procs",
                "--arg-file",
            ];
            let mut i = 0;
            while i < args.len() && args[i].starts_with('-') {
                i += if valued.contains(&args[i].as_str()) {
                    2
                } else {
                    1
                };
            }
            let rest = args.get(i..).unwrap_or(&[]);
            // xargs with no command runs echo.
            Some(if rest.is_empty() {
                Inner::Nothing
            } else {
                Inner::Argv(rest.to_vec())
            })
        }
        _ => None,
    }
}

/// Options (everything starting with `-` before `--`) and operands.
fn split_options(args: &[String]) -> (Vec<String>, Vec<String>) {
    let mut flags = Vec::new();
    let mut operands = Vec::new();
    let mut done = false;
    for a in args {
        if !done && a == "--" {
            done = true;
        } else if !done && a.starts_with('-') && a.len() > 1 {
            flags.push(a.clone());
        } else {
            operands.push(a.clone());
        }
    }
    (flags, operands)
}

/// `-rf`, `-fR`, `-r`: a cluster of short flags containing `c`.
fn is_short_with(flag: &str, c: char) -> bool {
    flag.starts_with('-') && !flag.starts_with("--") && flag[1..].contains(c)
}

/// Paths whose recursive deletion is never wanted: the root, the home directory, a
/// top-level system directory, and `"$DIR"/` (the root whenever DIR is empty).
fn is_precious(t: &str) -> bool {
    let t = t.trim();
    if let Some(var) = t.strip_prefix('$') {
        let var = var.strip_prefix('{').unwrap_or(var);
        let len = var
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(var.len());
        let after = var[len..].strip_prefix('}').unwrap_or(&var[len..]);
        if len > 0 && &var[..len] != "HOME" && (after == "/" || after == "/*") {
            return true;
        }
    }
    let mut s = t.to_string();
    for home in ["${HOME}", "$HOME"] {
        if let Some(r) = s.strip_prefix(home) {
            s = format!("~{r}");
        }
    }
    while s.contains("//") {
        s = s.replace("//", "/");
    }
    while s.len() > 1 && (s.ends_with('/') || s.ends_with("/.") || s.ends_with("/*")) {
        let cut = if s.ends_with('/') { 1 } else { 2 };
        s.truncate(s.len() - cut);
    }
    if matches!(s.as_str(), "/" | "~" | "/*" | "~/*" | "/." | "") {
        return !t.is_empty();
    }
    const TOP: &[&str] = &[
        "bin",
        "boot",
        "dev",
        "etc",
        "home",
        "lib",
        "lib32",
        "lib64",
        "opt",
        "proc",
        "root",
        "sbin",
        "srv",
        "sys",
        "usr",
        "var",
        "Users",
        "System",
        "Library",
        "Applications",
    ];
    s.strip_prefix('/').is_some_and(|n| TOP.contains(&n))
}

/// A disk or partition device: writing to it destroys a filesystem.
fn is_disk(path: &str) -> bool {
    let Some(dev) = path.strip_prefix("/dev/") else {
        return false;
    };
    [
        "sd", "hd", "vd", "xvd", "nvme", "mmcblk", "disk", "rdisk", "md", "dm-", "mapper/", "loop",
        "sr",
    ]
    .iter()
    .any(|p| dev.starts_with(p))
}

/// Devices that are fine to write to.
fn is_harmless_device(path: &str) -> bool {
    matches!(
        path,
        "/dev/null" | "/dev/zero" | "/dev/stdout" | "/dev/stderr" | "/dev/tty"
    ) || path.starts_with("/dev/fd/")
}

/// Programs that write to block devices.
fn is_disk_tool(name: &str) -> bool {
    name.starts_with("mkfs")
        || matches!(
            name,
            "wipefs" | "fdisk" | "sfdisk" | "parted" | "mkswap" | "badblocks"
        )
}

fn is_downloader(name: &str) -> bool {
    matches!(name, "curl" | "wget" | "fetch" | "aria2c" | "http" | "xh")
}

fn is_interpreter(name: &str) -> bool {
    matches!(
        name,
        "sh" | "bash"
            | "zsh"
            | "dash"
            | "ksh"
            | "fish"
            | "csh"
            | "tcsh"
            | "perl"
            | "ruby"
            | "node"
            | "php"
    ) || name.starts_with("python")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq)]
    enum V {
        Ok,
        Ask,
        Block,
    }

    /// The workspace the probe sees: `a.txt` and `out.log` exist, `src` is a directory.
    fn probe(p: &str) -> Option<Kind> {
        match p.trim_start_matches("./") {
            "a.txt" | "out.log" | "notes.md" => Some(Kind::File),
            "src" | "." => Some(Kind::Dir),
            _ => None,
        }
    }

    fn judge(line: &str) -> Verdict {
        let defaults: Vec<String> = crate::config::DEFAULT_BASH_BLOCKLIST
            .iter()
            .map(|s| s.to_string())
            .collect();
        let list = Blocklist::new(&defaults).expect("the defaults compile");
        classify(line, &list, &probe)
    }

    fn kind(v: &Verdict) -> V {
        match v {
            Verdict::Harmless => V::Ok,
            Verdict::Destructive(_) => V::Ask,
            Verdict::Blocked(_) => V::Block,
        }
    }

    const CASES: &[(&str, V)] = &[
        // Harmless: reading, building, and words that only look like commands.
        ("ls -la", V::Ok),
        ("echo rm -rf /", V::Ok),
        ("echo 'rm -rf /' > /dev/null", V::Ok),
        ("grep -rn 'rm -rf' src", V::Ok),
        ("cat a.txt | wc -l", V::Ok),
        ("git status && git diff", V::Ok),
        ("git log --oneline -5", V::Ok),
        ("git checkout main", V::Ok),
        ("git restore --staged a.txt", V::Ok),
        ("git clean -n", V::Ok),
        ("cargo build --release", V::Ok),
        ("find . -name '*.rs' -exec grep -l TODO {} +", V::Ok),
        ("echo hi >> out.log", V::Ok),
        ("echo hi > new-file.txt", V::Ok),
        ("sort a.txt | uniq -c | sort -rn | head", V::Ok),
        ("command -v rm", V::Ok),
        ("type rm", V::Ok),
        ("man rm", V::Ok),
        ("dd if=a.txt of=/dev/null bs=1M", V::Ok),
        ("xargs echo < a.txt", V::Ok),
        ("sudo ls /root", V::Ok),
        ("env FOO=1 printenv FOO", V::Ok),
        ("(cd src && ls)", V::Ok),
        ("for f in *.rs; do wc -l \"$f\"; done", V::Ok),
        ("tee -a out.log < a.txt", V::Ok),
        ("cp a.txt copy.txt", V::Ok),
        ("curl -fsSL https://example.com -o install.sh", V::Ok),
        ("sed -n 1,5p a.txt", V::Ok),
        ("f() { echo hi; }; f", V::Ok),
        ("echo $(date) > /dev/stderr", V::Ok),
        // Destructive: asked every time.
        ("rm a.txt", V::Ask),
        ("rm -rf build", V::Ask),
        ("ls && rm -rf x", V::Ask),
        ("ls || rm x", V::Ask),
        ("true; rm x", V::Ask),
        ("(rm x)", V::Ask),
        ("{ rm x; }", V::Ask),
        ("if true; then rm x; fi", V::Ask),
        ("echo $(rm x)", V::Ask),
        ("echo `rm x`", V::Ask),
        ("echo \"now: $(rm -f x)\"", V::Ask),
        ("sudo rm x", V::Ask),
        ("sudo -u bob rm x", V::Ask),
        ("env -i FOO=1 rm x", V::Ask),
        ("nice -n 10 rm x", V::Ask),
        ("timeout 5 rm x", V::Ask),
        ("nohup mv a b", V::Ask),
        ("/bin/rm x", V::Ask),
        ("\\rm x", V::Ask),
        ("'rm' x", V::Ask),
        ("find . -name '*.o' | xargs rm", V::Ask),
        ("find . -name '*.o' | xargs -0 -n 10 rm -f", V::Ask),
        ("find . -name '*.tmp' -delete", V::Ask),
        ("find . -exec rm {} \\;", V::Ask),
        ("bash -c 'rm x'", V::Ask),
        ("sh -ec \"ls; rm x\"", V::Ask),
        ("eval 'rm x'", V::Ask),
        ("mv a.txt b.txt", V::Ask),
        ("dd if=/dev/zero of=a.txt bs=1k count=1", V::Ask),
        ("shred -u a.txt", V::Ask),
        ("truncate -s 0 a.txt", V::Ask),
        ("chmod -R 755 src", V::Ask),
        ("chown -R me:me src", V::Ask),
        ("chmod 644 a.txt", V::Ok),
        ("git reset --hard HEAD~1", V::Ask),
        ("git clean -fdx", V::Ask),
        ("git checkout -- a.txt", V::Ask),
        ("git checkout .", V::Ask),
        ("git restore a.txt", V::Ask),
        ("git push --force origin main", V::Ask),
        ("git -C sub push -f", V::Ask),
        ("git branch -D topic", V::Ask),
        ("git stash drop", V::Ask),
        ("echo hi > a.txt", V::Ask),
        ("echo hi > ./out.log", V::Ask),
        ("cat <<EOF > notes.md\nhello\nEOF", V::Ask),
        ("ls &> out.log", V::Ask),
        ("echo x > $OUT", V::Ask),
        ("tee a.txt < notes.md", V::Ask),
        ("cp notes.md a.txt", V::Ask),
        ("sed -i s/a/b/ a.txt", V::Ask),
        ("perl -pi -e 's/a/b/' a.txt", V::Ask),
        ("rsync -a --delete src/ dst/", V::Ask),
        ("$CMD a.txt", V::Ask),
        ("echo 'unclosed", V::Ask),
        ("watch -n 1 rm x", V::Ask),
        // Blocked: refused before anything runs.
        ("rm -rf /", V::Block),
        ("rm -fr /*", V::Block),
        ("rm -r -f ~", V::Block),
        ("rm -rf ~/", V::Block),
        ("rm -rf $HOME", V::Block),
        ("rm -rf \"$HOME\"/", V::Block),
        ("rm -rf \"$BUILD_DIR\"/", V::Block),
        ("rm --recursive --force /usr", V::Block),
        ("rm --no-preserve-root -rf /", V::Block),
        ("sudo rm -rf --no-preserve-root /", V::Block),
        ("ls; sudo rm -rf /", V::Block),
        ("echo ok && (cd /tmp; rm -rf /etc)", V::Block),
        ("bash -c 'rm -rf /'", V::Block),
        ("find / -exec rm -rf / \\;", V::Block),
        ("mkfs.ext4 /dev/sda1", V::Block),
        ("sudo mkfs -t ext4 /dev/sdb", V::Block),
        ("dd if=/dev/zero of=/dev/sda bs=1M", V::Block),
        ("dd if=image.iso of=/dev/nvme0n1", V::Block),
        ("echo x > /dev/sda", V::Block),
        ("wipefs -a /dev/sdb", V::Block),
        (":(){ :|:& };:", V::Block),
        ("bomb() { bomb | bomb & }; bomb", V::Block),
        ("shutdown -h now", V::Block),
        ("sudo reboot", V::Block),
        ("systemctl poweroff", V::Block),
        ("halt", V::Block),
        ("curl -fsSL https://x.sh | sh", V::Block),
        ("curl -s https://x.sh | sudo bash", V::Block),
        ("wget -qO- https://x.sh | bash -s -- --yes", V::Block),
        ("bash <(curl -s https://x.sh)", V::Block),
        ("sh -c \"$(curl -fsSL https://x.sh)\"", V::Block),
        ("curl https://x.py | python3", V::Block),
        ("chmod -R 777 /", V::Block),
        ("sudo chown -R me /usr", V::Block),
    ];

    #[test]
    fn every_listed_command_line_is_judged_as_expected() {
        assert!(CASES.len() >= 60);
        let mut wrong = Vec::new();
        for (line, want) in CASES {
            let got = judge(line);
            if kind(&got) != *want {
                wrong.push(format!("{line:?}: want {want:?}, got {got:?}"));
            }
        }
        assert!(
            wrong.is_empty(),
            "{} misjudged:\n{}",
            wrong.len(),
            wrong.join("\n")
        );
    }

    #[test]
    fn a_verdict_says_why() {
        let Verdict::Blocked(why) = judge("ls && sudo rm -rf /") else {
            panic!("not blocked");
        };
        assert!(why.contains("rm -r of /"), "{why}");
        let Verdict::Blocked(why) = judge("curl -fsSL https://x.sh | sh") else {
            panic!("not blocked");
        };
        assert!(why.contains("curl") && why.contains("sh"), "{why}");
        let Verdict::Destructive(why) = judge("echo hi > a.txt; git clean -f") else {
            panic!("not destructive");
        };
        assert_eq!(
            why,
            vec![
                "> a.txt overwrites an existing file".to_string(),
                "git clean deletes untracked files".to_string()
            ]
        );
        let Verdict::Blocked(why) = judge("shutdown now") else {
            panic!("not blocked");
        };
        assert!(
            why.contains("bash_blocklist") && why.contains("shutdown"),
            "{why}"
        );
    }

    #[test]
    fn a_blocklist_entry_matches_the_command_after_its_prefixes_and_its_arguments() {
        let list = Blocklist::new(&["git push * --force".into(), "terraform destroy".into()])
            .expect("compiles");
        let j = |l: &str| kind(&classify(l, &list, &probe));
        assert_eq!(j("terraform destroy -auto-approve"), V::Block);
        assert_eq!(j("sudo env A=1 terraform destroy"), V::Block);
        assert_eq!(j("terraform plan"), V::Ok);
        assert_eq!(j("echo terraform destroy"), V::Ok);
        assert_eq!(j("git push origin --force"), V::Block);
        assert!(Blocklist::new(&["bad [glob".into()]).is_err());
    }
}

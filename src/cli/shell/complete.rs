//! Tab completion for the shell: subcommand names, their flags (from the clap
//! definitions), slash commands, and workspace paths. Paths are listed by the
//! `list_directory` tool, so through the sandbox: a denied name (`.env`, a key) or a
//! link leading outside is never offered.

use crate::context::{CallOptions, Ferret, Session};
use crate::tools::list_directory;
use crate::workspace::EntryType;
use rustyline::completion::{Completer, Pair};
use std::cell::RefCell;
use std::rc::Rc;

pub struct Helper {
    ferret: Rc<RefCell<Ferret>>,
    session: Session,
    commands: Vec<(String, Vec<String>)>,
}

impl Helper {
    pub fn new(ferret: Rc<RefCell<Ferret>>, session: Session) -> Self {
        Helper {
            ferret,
            session,
            commands: super::commands(),
        }
    }

    /// Entries of the directory `word` is in whose names start with its last part.
    fn paths(&self, word: &str) -> Vec<Pair> {
        let (dir, prefix) = match word.rfind('/') {
            Some(i) => (&word[..=i], &word[i + 1..]),
            None => ("", word),
        };
        let ferret = self.ferret.borrow();
        let mut out = Vec::new();
        let mut offset = 0;
        // A directory longer than one listing is paged, up to a bound.
        for _ in 0..50 {
            let params = list_directory::Params {
                path: if dir.is_empty() {
                    ".".into()
                } else {
                    dir.into()
                },
                recursive: false,
                max_depth: None,
                include_hidden: prefix.starts_with('.'),
                offset,
                // A name completes whether or not an ignore file lists it.
                no_ignore: true,
            };
            let tool = &list_directory::ListDirectory;
            let Ok(listed) = ferret.call_typed(&self.session, tool, params, CallOptions::default())
            else {
                break;
            };
            let o = listed.output;
            offset += o.entries.len();
            for e in &o.entries {
                // A link leading outside is listed (marked) but names nothing a
                // command could use: not offered.
                if !e.name.starts_with(prefix) || e.note == Some(list_directory::Note::Outside) {
                    continue;
                }
                // A directory goes on being completed; after a file, the next word.
                let (shown, next) = if matches!(e.kind, EntryType::Directory) {
                    ("/", "/")
                } else {
                    ("", " ")
                };
                out.push(Pair {
                    display: format!("{}{shown}", e.name),
                    replacement: format!("{dir}{}{next}", e.name),
                });
            }
            if !o.truncated || o.entries.is_empty() {
                break;
            }
        }
        out
    }
}

fn pairs<'a>(names: impl Iterator<Item = &'a str>, word: &str) -> Vec<Pair> {
    names
        .filter(|n| n.starts_with(word))
        .map(|n| Pair {
            display: n.to_string(),
            replacement: format!("{n} "),
        })
        .collect()
}

impl Completer for Helper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &rustyline::Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let head = &line[..pos];
        let start = head.rfind(char::is_whitespace).map_or(0, |i| i + 1);
        let word = &head[start..];
        let before = head[..start].trim_start();
        if before.is_empty() {
            if word.starts_with('/') {
                let names = super::SLASH.iter().map(|(n, _)| *n);
                return Ok((start, pairs(names, word)));
            }
            if let Some(rest) = word.strip_prefix(['!', '$']) {
                return Ok((start + 1, self.paths(rest)));
            }
            let names = self.commands.iter().map(|(n, _)| n.as_str());
            return Ok((start, pairs(names, word)));
        }
        if before.starts_with(['!', '$', '/']) {
            return Ok((start, self.paths(word)));
        }
        if word.starts_with('-') {
            let name = before.split_whitespace().next().unwrap_or_default();
            if let Some((_, flags)) = self.commands.iter().find(|(n, _)| n == name) {
                return Ok((start, pairs(flags.iter().map(String::as_str), word)));
            }
        }
        Ok((start, self.paths(word)))
    }
}

impl rustyline::hint::Hinter for Helper {
    type Hint = String;
}
impl rustyline::highlight::Highlighter for Helper {}
impl rustyline::validate::Validator for Helper {}
impl rustyline::Helper for Helper {}

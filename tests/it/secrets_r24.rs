//! Issue #25, round 24: a folder move never takes a secret out of the name that guards
//! it (a yes to moving `.docker` made `dock/config.json` readable); a dry run does not
//! tell which folders hold secrets; a name too long to exist is refused before any
//! folder is made; a folder moved into a new folder is judged as a folder, and does not
//! carry files `allowed_extensions` does not serve; questions name the listed entry a
//! folder holds.

use crate::util::{agent, cli as ferret, said, succeeded as ok, tempdir, write};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Output;

fn text_of(r: &Value) -> String {
    r["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn run(root: &Path, state: &Path, args: &[&str]) -> Output {
    ferret(root, state, args).output().expect("ferret ran")
}

/// The names under `root`, sorted, for "nothing was made or moved".
fn tree(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = walkdir(root)
        .into_iter()
        .map(|p| p.strip_prefix(root).unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn walkdir(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("read_dir") {
        let p = e.expect("entry").path();
        if p.is_dir() && !p.is_symlink() {
            out.extend(walkdir(&p));
        }
        out.push(p);
    }
    out
}

/// Round 24: the rules `**/.docker/config.json` and `**/.kube/config` guard a file by
/// its folder's name; a yes to "moving .docker, which holds secrets" made it readable
/// (and editable) as `dock/config.json`. Every shape of the class is refused, whatever
/// the answer, dry runs too, and nothing is made on the way.
#[test]
fn a_folder_move_never_takes_a_secret_out_of_the_name_that_guards_it() {
    // (the folder, the secret in it, where it is moved, settings)
    let cases: &[(&str, &str, &str, &[&str])] = &[
        (".docker", "config.json", "dock", &[]),
        (".kube", "config", "k", &[]),
        ("a/.docker", "config.json", "a/dock", &[]),
        (".docker", "config.json", "x/y/dock", &[]),
        (".kube", "config", ".kube2", &[]),
        // A rule of the user's own, anchored by its slash.
        (
            "vault",
            "prod.txt",
            "v2",
            &["--set", "deny_extra=[\"vault/*.txt\"]"],
        ),
        // The secret deeper down, guarded by a rule anchored at the root.
        (
            "srv",
            "app/db.txt",
            "srv2",
            &["--set", "deny_extra=[\"/srv/app/*.txt\"]"],
        ),
    ];
    for (folder, secret, to, sets) in cases {
        let (_t, root) = tempdir();
        let (_s, state) = tempdir();
        write(
            &root,
            &format!("{folder}/{secret}"),
            "{\"auths\":\"SECRET1\"}\n",
        );
        write(&root, &format!("{folder}/notes.md"), "plain\n");
        let before = tree(&root);
        for extra in [&["--yes"][..], &[]] {
            let mut args: Vec<&str> = sets.to_vec();
            args.extend(["mv", folder, to]);
            args.extend(extra);
            let o = run(&root, &state, &args);
            let s = said(&o);
            assert!(!o.status.success(), "{folder} -> {to} {extra:?}: {s}");
            assert!(
                s.contains("DENIED_PATTERN") && s.contains("no longer be guarded"),
                "{folder} -> {to} {extra:?}: {s}"
            );
            // The secret is named nowhere, nor what it holds.
            assert!(
                !s.contains("SECRET1")
                    && !s.contains(Path::new(secret).file_name().unwrap().to_str().unwrap()),
                "{s}"
            );
            assert_eq!(tree(&root), before, "{folder} -> {to} {extra:?}: {s}");
        }
        // A dry run does not look (it would tell which folders hold the secret): it
        // says so, and changes nothing either.
        let mut args: Vec<&str> = sets.to_vec();
        args.extend(["--dry-run", "mv", folder, to]);
        let dry = said(&run(&root, &state, &args));
        assert!(dry.contains("a dry run does not say"), "{dry}");
        assert!(!dry.contains("SECRET1"), "{dry}");
        assert_eq!(tree(&root), before);
    }
    // Moved where the rules still guard it, the move asks, and a yes moves it; the
    // secret stays unreadable at its new place.
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    write(&root, ".docker/config.json", "{\"auths\":\"SECRET1\"}\n");
    let asked = run(&root, &state, &["mv", ".docker", "sub/.docker"]);
    assert!(
        said(&asked).contains("CONFIRMATION_REQUIRED"),
        "{}",
        said(&asked)
    );
    ok(&run(
        &root,
        &state,
        &["mv", ".docker", "sub/.docker", "--yes"],
    ));
    let read = run(&root, &state, &["read", "sub/.docker/config.json"]);
    assert!(
        said(&read).contains("DENIED_PATTERN") && !said(&read).contains("SECRET1"),
        "{}",
        said(&read)
    );
}

/// The same through MCP, from an agent whose client cannot ask: refused, not asked.
#[test]
fn an_agent_cannot_move_a_secret_out_of_its_guarded_name() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    write(&root, ".kube/config", "token: SECRET2\n");
    // Another `.kube`, holding what the first holds but the secret.
    write(&root, ".kube/notes.txt", "n\n");
    write(&root, "q/.kube/notes.txt", "n\n");
    let mut s = agent(&root, &state, &[]);
    let r = s.call("move", &json!({"source": ".kube", "destination": "k"}));
    let t = text_of(&r);
    assert!(t.starts_with("DENIED_PATTERN"), "{t}");
    assert!(!t.contains("SECRET2"), "{t}");
    assert!(root.join(".kube/config").exists() && !root.join("k").exists());
    // Round 25: the dry run's refusal told which `.kube` held `config`; a dry run says
    // the same of both.
    let dry = |s: &mut crate::util::StdioServer, from: &str, to: &str| {
        let r = s.call(
            "move",
            &json!({"source": from, "destination": to, "dry_run": true}),
        );
        json!({"text": text_of(&r), "structured": r["structuredContent"]})
            .to_string()
            .replace(from, "F")
            .replace(to, "T")
    };
    assert_eq!(
        dry(&mut s, ".kube", "kdest"),
        dry(&mut s, "q/.kube", "q/kdest")
    );
}

/// Round 25: with no secret named or counted anywhere, the depth limit still counted the
/// levels of a hidden `.env` or `.git` (a folder holding only `.env` could not be moved
/// 20 levels deep, an empty one could), and a confirm-listed destination named a hidden
/// `.env.production` as the entry on the list. Neither tells anything now.
#[test]
fn no_limit_or_question_names_or_measures_a_hidden_entry() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    write(&root, "e1/.env", "K=SECRET4\n");
    std::fs::create_dir_all(root.join("e2")).expect("mkdir");
    write(&root, "q1/.git/refs/heads/main", "0000\n");
    write(&root, "q1/r.txt", "r\n");
    write(&root, "q2/r.txt", "r\n");
    write(&root, "s1/.env.production", "K=SECRET5\n");
    std::fs::create_dir_all(root.join("s2")).expect("mkdir");
    let mut s = agent(&root, &state, &[]);
    let deep = (1..=19)
        .map(|i| format!("d{i}"))
        .collect::<Vec<_>>()
        .join("/");
    let answer = |s: &mut crate::util::StdioServer, tool: &str, args: Value, names: &[&str]| {
        let r = s.call(tool, &args);
        let mut t = json!({"text": text_of(&r), "structured": r["structuredContent"]}).to_string();
        for (k, n) in names.iter().enumerate() {
            t = t.replace(n, &format!("N{k}"));
        }
        assert!(
            !t.contains("SECRET")
                && !t.contains(".env")
                && !t.replace(".github", "").contains(".git"),
            "{t}"
        );
        t
    };
    for (a, b) in [("e1", "e2"), ("q1", "q2")] {
        for dry in [true, false] {
            let to = |f: &str| format!("{deep}/{f}");
            if !dry {
                // A real run asks about the one with secrets (that needs a person, or
                // says so): only the dry runs must agree.
                continue;
            }
            assert_eq!(
                answer(
                    &mut s,
                    "move",
                    json!({"source": a, "destination": to(a), "dry_run": dry}),
                    &[a]
                ),
                answer(
                    &mut s,
                    "move",
                    json!({"source": b, "destination": to(b), "dry_run": dry}),
                    &[b]
                ),
                "{a} / {b}"
            );
        }
    }
    for dry in [true, false] {
        let one = answer(
            &mut s,
            "move",
            json!({"source": "s1", "destination": ".github/s1", "dry_run": dry}),
            &["s1"],
        );
        assert!(one.contains("on the confirm list"), "{one}");
        if dry {
            let two = answer(
                &mut s,
                "move",
                json!({"source": "s2", "destination": ".github/s2", "dry_run": true}),
                &["s2"],
            );
            assert_eq!(one, two);
        }
    }
    assert!(root.join("e1/.env").exists() && root.join("s1/.env.production").exists());
}

/// Round 24: a dry run of moving or deleting a folder said "which holds secrets" of a
/// folder holding `.env` and nothing of one that did not: a silent sweep for secrets.
/// A dry run now says the same of every folder, whatever it holds.
#[test]
fn a_dry_run_says_the_same_of_every_folder_whatever_secrets_it_holds() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    for p in ["p1", "p2"] {
        write(&root, &format!("{p}/README.md"), "same\n");
    }
    write(&root, "p1/.env", "API_KEY=SECRET3\n");
    write(&root, "p1/keys/id_rsa", "-----BEGIN\n");
    let mut s = agent(&root, &state, &[]);
    let mut seen = Vec::new();
    for p in ["p1", "p2"] {
        let calls = [
            (
                "move",
                json!({"source": p, "destination": format!("q_{p}"), "dry_run": true}),
            ),
            ("file_delete", json!({"path": p, "dry_run": true})),
            (
                "file_delete",
                json!({"path": p, "dry_run": true, "permanent": true}),
            ),
            ("list_directory", json!({"path": p})),
            ("get_file_info", json!({"path": p})),
        ];
        let answers: Vec<String> = calls
            .iter()
            .map(|(tool, args)| {
                let r = s.call(tool, args);
                // The same answer for either folder, once its name is taken out (the
                // times a listing shows are not the question here).
                let v = json!({"text": text_of(&r), "structured": r["structuredContent"]});
                v.to_string().replace(p, "P")
            })
            .collect();
        seen.push(answers);
    }
    for (k, (a, b)) in seen[0].iter().zip(&seen[1]).enumerate() {
        if k < 3 {
            assert_eq!(a, b, "call {k}");
            assert!(a.contains("a dry run does not say"), "{a}");
        }
        assert!(!a.contains("SECRET3") && !a.contains(".env"), "{a}");
    }
    // A real run still asks where there is something to ask about: p1 alone.
    let real = s.call("move", &json!({"source": "p1", "destination": "q"}));
    assert!(
        text_of(&real).starts_with("CONFIRMATION_REQUIRED")
            && text_of(&real).contains("which holds secrets"),
        "{}",
        text_of(&real)
    );
    let plain = s.call("move", &json!({"source": "p2", "destination": "q"}));
    assert!(plain["isError"] != true, "{}", text_of(&plain));
}

/// Round 24: a name over 255 bytes was refused only at its last `openat`, after the
/// folders on the way were made (unjournalled, not undoable; under `.kube/` it planted
/// an empty `.kube`). Every change that makes a name refuses it before anything is made.
#[test]
fn a_name_too_long_is_refused_before_any_folder_is_made() {
    let long = "n".repeat(300);
    for base in ["n1/n2", ".kube", "deep/.docker/x"] {
        let (_t, root) = tempdir();
        let (_s, state) = tempdir();
        write(&root, "f.txt", "move me\n");
        let before = tree(&root);
        let target = format!("{base}/{long}.txt");
        let patch = format!("*** Begin Patch\n*** Add File: {target}\n+x\n*** End Patch\n");
        let runs: Vec<Output> = vec![
            ferret(&root, &state, &["write", &target, "--content", "x"])
                .output()
                .expect("ran"),
            run(&root, &state, &["mv", "f.txt", &target]),
            {
                use std::io::Write;
                let mut c = ferret(&root, &state, &["patch"]);
                c.stdin(std::process::Stdio::piped());
                let mut child = c.spawn().expect("spawn");
                child
                    .stdin
                    .take()
                    .expect("stdin")
                    .write_all(patch.as_bytes())
                    .expect("patch in");
                child.wait_with_output().expect("ran")
            },
        ];
        for o in &runs {
            let s = said(o);
            assert!(!o.status.success(), "{s}");
            assert!(
                s.contains("INVALID_ARGUMENT") || s.contains("DENIED_PATTERN"),
                "{s}"
            );
        }
        assert_eq!(tree(&root), before, "{base}");
        let h = said(&run(&root, &state, &["history"]));
        assert!(!h.contains(&long[..20]), "{h}");
    }
}

/// Round 24: with `allowed_extensions`, a folder moved into a folder not made yet was
/// refused for its name's "extension" after that folder was made; and a folder move
/// carried files no tool shows to new names. A folder is judged as a folder, and one
/// holding unserved files is not moved.
#[test]
fn a_folder_move_is_judged_as_a_folder_and_carries_nothing_unserved() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    let md = ["--set", "allowed_extensions=[\"md\"]"];
    write(&root, "e/a.md", "served\n");
    let mut args: Vec<&str> = md.to_vec();
    args.extend(["mv", "e", "x2/y/g"]);
    ok(&run(&root, &state, &args));
    assert!(root.join("x2/y/g/a.md").exists());
    // Undone, it comes back as a folder too.
    let mut undo: Vec<&str> = md.to_vec();
    undo.push("undo");
    ok(&run(&root, &state, &undo));
    assert!(root.join("e/a.md").exists());

    for hidden in ["run.sh", "Makefile", "deep/er/tool.py"] {
        write(&root, &format!("s/{hidden}"), "#!/bin/sh\n");
        write(&root, "s/a.md", "served\n");
        let before = tree(&root);
        for to in ["t", "new/t", "x2/t"] {
            let mut args: Vec<&str> = md.to_vec();
            args.extend(["mv", "s", to, "--yes"]);
            let o = run(&root, &state, &args);
            let s = said(&o);
            assert!(!o.status.success(), "{hidden} -> {to}: {s}");
            assert!(s.contains("EXTENSION_DENIED"), "{s}");
            assert!(!s.contains(hidden), "the unserved file is not named: {s}");
            assert_eq!(tree(&root), before, "{hidden} -> {to}");
        }
        std::fs::remove_dir_all(root.join("s")).expect("rm");
    }
}

/// Round 24: "moving d to e (on the confirm list)" named neither the listed entry d
/// holds nor why; a delete said "holds entries on the confirm list". The question names
/// the entry, for a move, a delete and the undo that brings the folder back.
#[test]
fn questions_name_the_confirm_listed_entry_a_folder_holds() {
    let (_t, root) = tempdir();
    let (_s, state) = tempdir();
    write(&root, "d/.circleci/config.yml", "jobs: {}\n");
    let mv = run(&root, &state, &["mv", "d", "e"]);
    assert!(
        said(&mv).contains("CONFIRMATION_REQUIRED") && said(&mv).contains("d/.circleci"),
        "{}",
        said(&mv)
    );
    let rm = run(&root, &state, &["rm", "d"]);
    assert!(
        said(&rm).contains("CONFIRMATION_REQUIRED") && said(&rm).contains("d/.circleci"),
        "{}",
        said(&rm)
    );
    ok(&run(&root, &state, &["rm", "d", "--yes"]));
    let undo = run(&root, &state, &["undo"]);
    assert!(
        said(&undo).contains("CONFIRMATION_REQUIRED") && said(&undo).contains("d/.circleci"),
        "{}",
        said(&undo)
    );
    assert!(!root.join("d").exists());
    ok(&run(&root, &state, &["undo", "--yes"]));
    assert!(root.join("d/.circleci/config.yml").exists());
}

//! The `ferret` binary on real files in temp dirs: the foundation's acceptance list and
//! the edges around it.

use assert_cmd::Command;
use serde_json::{Value, json};
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

fn ferret(root: &Path) -> Command {
    let mut c = Command::from_std(crate::util::bin());
    c.arg("--root").arg(root);
    c
}

/// Runs `ferret call TOOL ARGS`, returns (exit code, parsed stdout).
fn call(root: &Path, tool: &str, args: Value) -> (i32, Value) {
    let out = ferret(root)
        .args(["call", tool, &args.to_string()])
        .output()
        .unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    (out.status.code().unwrap(), v)
}

fn error_code(root: &Path, tool: &str, args: Value) -> String {
    let (code, v) = call(root, tool, args.clone());
    assert_eq!(code, 1, "{tool} {args} should fail: {v}");
    v["error"]["code"].as_str().unwrap().to_string()
}

fn tree() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    std::fs::write(r.join("a.txt"), "hello\nworld\n").unwrap();
    std::fs::write(r.join(".env"), "SECRET=1\n").unwrap();
    std::fs::write(r.join(".env.example"), "SECRET=\n").unwrap();
    std::fs::create_dir_all(r.join("src")).unwrap();
    std::fs::write(r.join("src/tokenizer.rs"), "pub fn tokenize() {}\n").unwrap();
    std::fs::create_dir_all(r.join("auth")).unwrap();
    std::fs::write(r.join("auth/password_reset.py"), "def reset(): pass\n").unwrap();
    std::fs::create_dir_all(r.join("docs")).unwrap();
    std::fs::write(r.join("docs/secrets-management.md"), "# Secrets\n").unwrap();
    symlink("/etc", r.join("link")).unwrap();
    t
}

#[test]
fn read_file_returns_the_content_and_its_metadata() {
    let t = tree();
    let (code, v) = call(t.path(), "read_file", json!({"path": "a.txt"}));
    assert_eq!(code, 0);
    assert_eq!(
        (
            &v["content"],
            &v["path"],
            &v["size"],
            &v["total_lines"],
            &v["truncated"]
        ),
        (
            &json!("hello\nworld\n"),
            &json!("a.txt"),
            &json!(12),
            &json!(2),
            &json!(false)
        )
    );
}

#[test]
fn read_file_refusals_have_their_codes() {
    let t = tree();
    for (path, code) in [
        (json!("../x"), "PATH_TRAVERSAL"),
        (json!("/etc/passwd"), "PATH_ESCAPE"),
        (json!("link/passwd"), "PATH_ESCAPE"),
        (json!(".env"), "DENIED_PATTERN"),
        (json!(""), "INVALID_ARGUMENT"),
        (json!("nope.txt"), "NOT_FOUND"),
        (json!("src"), "IS_A_DIRECTORY"),
    ] {
        assert_eq!(
            error_code(t.path(), "read_file", json!({ "path": path })),
            code,
            "{path}"
        );
    }
}

#[test]
fn read_file_refuses_unknown_arguments() {
    let t = tree();
    assert_eq!(
        error_code(t.path(), "read_file", json!({"path": "a.txt", "bogus": 1})),
        "INVALID_ARGUMENT"
    );
}

#[test]
fn source_named_like_secrets_is_readable() {
    let t = tree();
    for p in [
        "src/tokenizer.rs",
        "auth/password_reset.py",
        "docs/secrets-management.md",
        ".env.example",
    ] {
        let (code, v) = call(t.path(), "read_file", json!({ "path": p }));
        assert_eq!(code, 0, "{p} must be readable: {v}");
    }
}

#[test]
fn big_files_need_ranges_and_ranges_work() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    let mut s = String::new();
    let mut i = 1;
    while s.len() < 2 * 1024 * 1024 {
        s.push_str(&format!("line {i} {}\n", "x".repeat(40)));
        i += 1;
    }
    let total = i - 1;
    std::fs::write(r.join("big.txt"), &s).unwrap();

    let (code, v) = call(r, "read_file", json!({"path": "big.txt"}));
    assert_eq!(code, 1);
    assert_eq!(v["error"]["code"], "FILE_TOO_LARGE");
    assert!(
        v["error"]["hint"].as_str().unwrap().contains("offset"),
        "{v}"
    );

    let (code, v) = call(
        r,
        "read_file",
        json!({"path": "big.txt", "offset": 10, "limit": 11}),
    );
    assert_eq!(code, 0, "{v}");
    let content = v["content"].as_str().unwrap();
    let lines: Vec<&str> = content.lines().collect();
    assert_eq!(lines.len(), 11);
    assert!(lines[0].starts_with("line 10 "));
    assert!(lines[10].starts_with("line 20 "));
    assert_eq!(v["total_lines"], total);
    assert_eq!(v["offset"], 10);
    assert_eq!(v["truncated"], true);

    // seed 004's maxLines is not in the schema, so it is not taken: the error names `limit`
    let (_, v) = call(r, "read_file", json!({"path": "big.txt", "maxLines": 2}));
    assert_eq!(v["error"]["code"], "INVALID_ARGUMENT", "{v}");
    assert!(
        v["error"]["hint"].as_str().unwrap().contains("`limit`"),
        "{v}"
    );

    // a range that itself exceeds the limit is refused with advice
    let (_, v) = call(
        r,
        "read_file",
        json!({"path": "big.txt", "offset": 1, "limit": 100000}),
    );
    assert_eq!(v["error"]["code"], "FILE_TOO_LARGE");

    // the text rendering numbers lines like cat -n and says how to continue
    let out = ferret(r)
        .args([
            "call",
            "read_file",
            r#"{"path":"big.txt","offset":10,"limit":2}"#,
            "--text",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("    10\tline 10 "), "{text}");
    assert!(text.contains("    11\tline 11 "), "{text}");
    assert!(text.contains("continue with offset 12"), "{text}");
}

#[test]
fn path_too_deep() {
    let t = tempfile::tempdir().unwrap();
    let deep: String = (0..25).map(|_| "d/").collect();
    std::fs::create_dir_all(t.path().join(&deep)).unwrap();
    std::fs::write(t.path().join(&deep).join("f.txt"), "x").unwrap();
    assert_eq!(
        error_code(
            t.path(),
            "read_file",
            json!({ "path": format!("{deep}f.txt") })
        ),
        "PATH_TOO_DEEP"
    );
    let ok: String = (0..19).map(|_| "d/").collect();
    std::fs::write(t.path().join(&ok).join("g.txt"), "x").unwrap();
    assert_eq!(
        call(
            t.path(),
            "read_file",
            json!({ "path": format!("{ok}g.txt") })
        )
        .0,
        0
    );
}

#[test]
fn binary_files_and_base64() {
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("bin.dat"), [0u8, 159, 146, 150, 1, 2]).unwrap();
    std::fs::write(t.path().join("latin1.txt"), [b'c', b'a', b'f', 0xe9]).unwrap();
    let (_, v) = call(t.path(), "read_file", json!({"path": "bin.dat"}));
    assert_eq!(v["error"]["code"], "BINARY_FILE");
    assert!(v["error"]["hint"].as_str().unwrap().contains("base64"));
    // Not UTF-8 but text: decoded, its encoding named (issue 28; encoding_r6.rs).
    let (code, v) = call(t.path(), "read_file", json!({"path": "latin1.txt"}));
    assert_eq!(code, 0);
    assert_eq!(v["content"], "caf\u{e9}");
    assert_eq!(v["charset"], "windows-1252");
    let (code, v) = call(
        t.path(),
        "read_file",
        json!({"path": "bin.dat", "encoding": "base64"}),
    );
    assert_eq!(code, 0);
    assert_eq!(v["content"], "AJ+SlgEC");
    assert_eq!(v["encoding"], "base64");
}

#[test]
fn a_fifo_is_refused_without_hanging() {
    let t = tempfile::tempdir().unwrap();
    let fifo = t.path().join("pipe");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let mut cmd = ferret(t.path());
    cmd.args(["call", "read_file", r#"{"path":"pipe"}"#])
        .timeout(std::time::Duration::from_secs(10));
    let out = cmd.output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error"]["code"], "INVALID_ARGUMENT", "{v}");
    let (code, v) = call(t.path(), "list_directory", json!({"path": "."}));
    assert_eq!(code, 0);
    assert_eq!(v["entries"][0]["type"], "other");
}

#[test]
fn list_directory_hides_secrets_noise_and_outside_links() {
    let t = tree();
    let r = t.path();
    std::fs::create_dir_all(r.join("node_modules/react")).unwrap();
    std::fs::write(r.join("node_modules/react/index.js"), "x").unwrap();
    std::fs::create_dir_all(r.join(".git")).unwrap();
    std::fs::write(r.join(".git/config"), "x").unwrap();
    std::fs::create_dir_all(r.join(".github")).unwrap();
    std::fs::write(r.join(".github/ci.yml"), "x").unwrap();
    symlink(".env", r.join("innocent")).unwrap();
    symlink("a.txt", r.join("alias")).unwrap();

    let names = |v: &Value| -> Vec<String> {
        v["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap().to_string())
            .collect()
    };
    let (_, v) = call(
        r,
        "list_directory",
        json!({"path": ".", "recursive": true, "include_hidden": true}),
    );
    let n = names(&v);
    assert_eq!(
        n,
        vec![
            ".env.example",
            ".github",
            ".github/ci.yml",
            "a.txt",
            "alias",
            "auth",
            "auth/password_reset.py",
            "docs",
            "docs/secrets-management.md",
            "link",
            "node_modules",
            "src",
            "src/tokenizer.rs"
        ],
    );
    assert_eq!(v["total_count"], 13);
    assert_eq!(v["truncated"], false);

    let (_, v) = call(r, "list_directory", json!({"path": "."}));
    // Noise is shown marked (not entered); secrets, and links to them, not at all.
    assert_eq!(
        names(&v),
        vec![
            "a.txt",
            "alias",
            "auth",
            "docs",
            "link",
            "node_modules",
            "src"
        ]
    );
    assert_eq!(
        v["entries"][4],
        json!({"name": "link", "type": "symlink", "note": "outside"})
    );
    assert_eq!(
        v["entries"][5],
        json!({"name": "node_modules", "type": "directory", "note": "skipped"})
    );
    let entries = v["entries"].as_array().unwrap();
    assert_eq!(
        entries[0],
        json!({"name": "a.txt", "type": "file", "size": 12})
    );
    assert_eq!(entries[1]["type"], "symlink");
    assert_eq!(entries[2]["type"], "directory");

    // noise is left out of walks but can be listed by name
    let (code, v) = call(r, "list_directory", json!({"path": "node_modules"}));
    assert_eq!(code, 0);
    assert_eq!(names(&v), vec!["react"]);
    assert_eq!(
        error_code(r, "list_directory", json!({"path": ".git"})),
        "DENIED_PATTERN"
    );
    assert_eq!(
        error_code(r, "list_directory", json!({"path": "a.txt"})),
        "NOT_A_DIRECTORY"
    );
}

#[test]
fn list_directory_caps_with_the_true_total() {
    let t = tempfile::tempdir().unwrap();
    for i in 0..250 {
        std::fs::write(t.path().join(format!("f{i:03}.txt")), "x").unwrap();
    }
    let (_, v) = call(t.path(), "list_directory", json!({"path": "."}));
    assert_eq!(v["entries"].as_array().unwrap().len(), 100);
    assert_eq!(v["total_count"], 250);
    assert_eq!(v["truncated"], true);
    assert_eq!(v["entries"][0]["name"], "f000.txt");
    assert_eq!(v["entries"][99]["name"], "f099.txt");
}

#[test]
fn file_exists_is_no_oracle_for_secrets() {
    let t = tree();
    let r = t.path();
    let (code, v) = call(r, "file_exists", json!({"path": "a.txt"}));
    assert_eq!(
        (code, v),
        (0, json!({"path": "a.txt", "exists": true, "type": "file"}))
    );
    let (_, v) = call(r, "file_exists", json!({"path": "src"}));
    assert_eq!(v["type"], "directory");
    let (code, v) = call(r, "file_exists", json!({"path": "missing"}));
    assert_eq!((code, v), (0, json!({"path": "missing", "exists": false})));
    // an existing and a missing secret answer alike
    let (_, present) = call(r, "file_exists", json!({"path": ".env"}));
    let (_, absent) = call(r, "file_exists", json!({"path": "sub/.env"}));
    assert_eq!(present["error"]["code"], "DENIED_PATTERN");
    assert_eq!(absent["error"]["code"], "DENIED_PATTERN");
    assert_eq!(
        error_code(r, "file_exists", json!({"path": "link/passwd"})),
        "PATH_ESCAPE"
    );

    // the human command answers with its exit code
    ferret(r).args(["exists", "a.txt"]).assert().code(0);
    ferret(r).args(["exists", "missing"]).assert().code(1);
    ferret(r).args(["exists", ".env"]).assert().code(2);
}

#[test]
fn get_file_info_reports_metadata() {
    let t = tree();
    let r = t.path();
    std::fs::set_permissions(r.join("a.txt"), std::fs::Permissions::from_mode(0o444)).unwrap();
    symlink("a.txt", r.join("alias")).unwrap();
    let (code, v) = call(r, "get_file_info", json!({"path": "a.txt"}));
    assert_eq!(code, 0);
    assert_eq!(v["size"], 12);
    assert_eq!(v["type"], "file");
    assert_eq!(v["permissions"], "0444");
    assert_eq!(v["readonly"], true);
    assert_eq!(v["symlink"], false);
    let modified = v["modified"].as_str().unwrap();
    assert!(humantime::parse_rfc3339(modified).is_ok(), "{modified}");
    let (_, v) = call(r, "get_file_info", json!({"path": "alias"}));
    assert_eq!(v["symlink"], true);
    assert_eq!(v["target"], "a.txt");
    let (_, v) = call(r, "get_file_info", json!({"path": "src"}));
    assert_eq!(v["type"], "directory");
    assert_eq!(
        error_code(r, "get_file_info", json!({"path": "missing"})),
        "NOT_FOUND"
    );
}

#[test]
fn tools_lists_definitions_in_three_shapes() {
    let t = tempfile::tempdir().unwrap();
    let out = ferret(t.path()).arg("tools").output().unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let tools = v.as_array().unwrap();
    for name in [
        "read_file",
        "list_directory",
        "file_exists",
        "get_file_info",
    ] {
        let t = tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} missing"));
        assert_eq!(t["inputSchema"]["type"], "object", "{name}");
        assert_eq!(t["outputSchema"]["type"], "object", "{name}");
        assert!(t["inputSchema"]["properties"]["path"].is_object(), "{name}");
        assert!(t["description"].as_str().unwrap().len() > 40, "{name}");
        assert_eq!(t["annotations"]["readOnlyHint"], true);
    }
    let read = tools.iter().find(|t| t["name"] == "read_file").unwrap();
    assert_eq!(read["inputSchema"]["required"], json!(["path"]));
    // Optional params are integers (or their digits), never nullable
    assert_eq!(
        read["inputSchema"]["properties"]["limit"]["anyOf"][0]["type"],
        "integer"
    );

    let out = ferret(t.path())
        .args(["tools", "--format", "openai"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["type"], "function");
    assert_eq!(v[0]["function"]["name"], "read_file");
    assert_eq!(v[0]["function"]["parameters"]["type"], "object");
    let out = ferret(t.path())
        .args(["tools", "--format", "anthropic"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["name"], "read_file");
    assert_eq!(v[0]["input_schema"]["type"], "object");
}

#[test]
fn exit_codes_and_usage_errors() {
    let t = tree();
    let r = t.path();
    ferret(r)
        .args(["call", "read_file", "{not json"])
        .assert()
        .code(2);
    ferret(r)
        .args(["call", "read_file", "[1]"])
        .assert()
        .code(2);
    ferret(r).args(["frobnicate"]).assert().code(2);
    let (code, v) = call(r, "no_such_tool", json!({}));
    assert_eq!(code, 1);
    assert_eq!(v["error"]["code"], "UNKNOWN_TOOL");
    // arguments from stdin
    let out = ferret(r)
        .args(["call", "read_file", "-"])
        .write_stdin(r#"{"path":"a.txt"}"#)
        .output()
        .unwrap();
    assert!(out.status.success());
    // human commands print text, or JSON with --json
    let out = ferret(r).args(["read", "a.txt"]).output().unwrap();
    // numbered lines, then the content's version (for edit --expected-version)
    let version = &ferret::history::version_of(b"hello\nworld\n");
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!("     1\thello\n     2\tworld\n[version {version}]\n")
    );
    let out = ferret(r)
        .args(["read", "a.txt", "--json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["total_lines"], 2);
    let out = ferret(r).args(["read", ".env"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("DENIED_PATTERN"));
    let out = ferret(r).args(["ls"]).output().unwrap();
    assert!(String::from_utf8(out.stdout).unwrap().contains("  src/\n"));
}

#[test]
fn several_roots_are_named_and_addressable() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    std::fs::write(a.path().join("one.txt"), "1").unwrap();
    std::fs::write(b.path().join("two.txt"), "2").unwrap();
    let name_b = b
        .path()
        .canonicalize()
        .unwrap()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let run = |args: Value| {
        let out = ferret(a.path())
            .arg("--root")
            .arg(b.path())
            .args(["call", "read_file", &args.to_string()])
            .output()
            .unwrap();
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    // relative to the first root, by root name, or absolute
    assert_eq!(run(json!({"path": "one.txt"}))["content"], "1");
    let v = run(json!({ "path": format!("{name_b}/two.txt") }));
    assert_eq!(v["content"], "2");
    assert_eq!(v["path"], format!("{name_b}/two.txt"));
    let v = run(json!({ "path": b.path().join("two.txt") }));
    assert_eq!(v["content"], "2");
}

/// A tree, and a user-level config file outside it that lowers `max_file_size` to 5
/// and denies `.obsidian/`.
struct UserConfig {
    tree: tempfile::TempDir,
    _home: tempfile::TempDir,
    file: std::path::PathBuf,
}

impl UserConfig {
    fn new() -> UserConfig {
        let tree = tree();
        let home = tempfile::tempdir().unwrap();
        let file = home.path().join("user.toml");
        std::fs::write(&file, "max_file_size = 5\ndeny_extra = [\".obsidian/\"]\n").unwrap();
        std::fs::create_dir_all(tree.path().join("vault/.obsidian")).unwrap();
        std::fs::write(tree.path().join("vault/.obsidian/app.json"), "{}").unwrap();
        UserConfig {
            tree,
            _home: home,
            file,
        }
    }

    /// `ferret --config USER …` on the tree.
    fn cmd(&self) -> Command {
        let mut c = ferret(self.tree.path());
        c.arg("--config").arg(&self.file);
        c
    }

    fn read_code(&self, c: &mut Command, path: &str) -> String {
        let out = c
            .args(["call", "read_file", &json!({ "path": path }).to_string()])
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["error"]["code"].as_str().unwrap_or("OK").to_string()
    }

    fn config(&self, c: &mut Command) -> Value {
        let out = c.args(["config", "--json"]).output().unwrap();
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

#[test]
fn a_user_config_file_applies() {
    let u = UserConfig::new();
    assert_eq!(u.read_code(&mut u.cmd(), "a.txt"), "FILE_TOO_LARGE");
    assert_eq!(
        u.read_code(&mut u.cmd(), "vault/.obsidian/app.json"),
        "DENIED_PATTERN"
    );
}

#[test]
fn env_beats_the_user_file_and_set_beats_env() {
    let u = UserConfig::new();
    let mut c = u.cmd();
    c.env("FERRET_MAX_FILE_SIZE", "100");
    assert_eq!(u.read_code(&mut c, "a.txt"), "OK");
    let mut c = u.cmd();
    c.env("FERRET_MAX_FILE_SIZE", "100")
        .args(["--set", "max_file_size=6"]);
    assert_eq!(u.read_code(&mut c, "a.txt"), "FILE_TOO_LARGE");
}

#[test]
fn config_names_the_source_of_every_value() {
    let u = UserConfig::new();
    let mut c = u.cmd();
    c.env("FERRET_MAX_PATH_DEPTH", "9")
        .args(["--set", "max_files_per_request=7"]);
    let v = u.config(&mut c);
    assert_eq!(v["config"]["max_file_size"], 5);
    assert_eq!(v["sources"]["max_file_size"]["kind"], "file");
    assert_eq!(
        (
            &v["config"]["max_path_depth"],
            &v["sources"]["max_path_depth"]
        ),
        (
            &json!(9),
            &json!({"kind": "env", "from": "FERRET_MAX_PATH_DEPTH"})
        )
    );
    assert_eq!(
        v["sources"]["max_files_per_request"],
        json!({"kind": "flag", "from": "--set"})
    );
    assert_eq!(v["sources"]["request_timeout"]["kind"], "default");
}

#[test]
fn the_cli_has_no_per_round_budgets() {
    let u = UserConfig::new();
    assert_eq!(
        u.config(&mut u.cmd())["config"]["max_requests_per_round"],
        0
    );
}

#[test]
fn a_workspace_ferret_toml_narrows_whatever_env_says() {
    let t = tree();
    std::fs::write(t.path().join("ferret.toml"), "max_file_size = 5000\n").unwrap();
    let out = ferret(t.path())
        .env("FERRET_MAX_FILE_SIZE", "100000")
        .args(["config", "--json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["config"]["max_file_size"], 5000);
    assert_eq!(v["sources"]["max_file_size"]["kind"], "file");
}

#[test]
fn a_typo_in_a_config_file_is_an_error_naming_the_key() {
    // The user's own file: an error (their typo, their fix).
    let t = tree();
    let home = tempfile::tempdir().unwrap();
    let cfg = home.path().join("config.toml");
    std::fs::write(&cfg, "max_fil_size = 5\n").unwrap();
    let out = ferret(t.path())
        .arg("--config")
        .arg(&cfg)
        .args(["config"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("max_fil_size"));
    // A workspace's file: a warning naming the key; a repository never stops ferret.
    std::fs::write(t.path().join("ferret.toml"), "max_fil_size = 5\n").unwrap();
    let out = ferret(t.path()).args(["config"]).output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("max_fil_size"));
}

#[test]
fn ferret_root_env_and_audit_log_file() {
    let t = tree();
    let log_dir = tempfile::tempdir().unwrap();
    let log = log_dir.path().join("audit.jsonl");
    let mut c = Command::cargo_bin("ferret").unwrap();
    c.env_clear()
        .envs(crate::util::portable_env())
        .env("FERRET_ROOT", t.path())
        .env("FERRET_AUDIT_LOG", &log)
        .current_dir(log_dir.path())
        .args(["call", "read_file", r#"{"path":"a.txt"}"#])
        .assert()
        .success();
    let mut c = Command::cargo_bin("ferret").unwrap();
    c.env_clear()
        .envs(crate::util::portable_env())
        .env("FERRET_ROOT", t.path())
        .env("FERRET_AUDIT_LOG", &log)
        .args(["call", "read_file", r#"{"path":".env"}"#])
        .assert()
        .code(1);
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["operation"], "read_file");
    assert_eq!(lines[0]["path"], "a.txt");
    assert_eq!(lines[0]["result"], "success");
    assert_eq!(lines[0]["bytes_read"], 12);
    assert_eq!(lines[0]["file_count"], 1);
    assert_eq!(lines[0]["agent_id"], "cli");
    assert!(lines[0]["session_id"].as_str().unwrap().starts_with("cli-"));
    // a number of milliseconds, and a plausible one: the whole command took longer
    let ms = lines[0]["duration_ms"]
        .as_f64()
        .expect("duration_ms is a number");
    assert!(ms.is_finite() && ms > 0.0 && ms < 60_000.0, "{ms}");
    assert!(humantime::parse_rfc3339(lines[0]["timestamp"].as_str().unwrap()).is_ok());
    assert_eq!(lines[1]["result"], "denied");
    assert_eq!(lines[1]["code"], "DENIED_PATTERN");
}

// --- `ferret grep`, one case per flag -------------------------------------------------

fn grep_tree() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    std::fs::create_dir_all(r.join("src")).unwrap();
    std::fs::create_dir_all(r.join(".hid")).unwrap();
    std::fs::write(r.join("src/a.txt"), "one\nTwo\nthree\nfour\nfive\n").unwrap();
    std::fs::write(r.join("src/b.txt"), "a.b\naxb\n").unwrap();
    std::fs::write(r.join("src/m.txt"), "start\nend\n").unwrap();
    std::fs::write(r.join(".hid/h.txt"), "two\n").unwrap();
    t
}

/// `ferret grep ARGS` in a grep tree: (exit code, stdout).
fn grep(t: &tempfile::TempDir, args: &[&str]) -> (i32, String) {
    let out = ferret(t.path()).arg("grep").args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn grep_after_context() {
    let t = grep_tree();
    assert_eq!(
        grep(&t, &["-A", "1", "Two"]).1,
        "src/a.txt:2:Two\nsrc/a.txt-3-three\n"
    );
}

#[test]
fn grep_before_context() {
    let t = grep_tree();
    assert_eq!(
        grep(&t, &["-B", "1", "Two"]).1,
        "src/a.txt-1-one\nsrc/a.txt:2:Two\n"
    );
}

#[test]
fn grep_context_both_sides() {
    let t = grep_tree();
    assert_eq!(
        grep(&t, &["-C", "1", "Two"]).1,
        "src/a.txt-1-one\nsrc/a.txt:2:Two\nsrc/a.txt-3-three\n"
    );
}

#[test]
fn grep_ignore_case() {
    let t = grep_tree();
    assert_eq!(grep(&t, &["two"]).0, 1, "case-sensitive by default");
    assert_eq!(grep(&t, &["-i", "two"]).1, "src/a.txt:2:Two\n");
}

#[test]
fn grep_fixed_strings() {
    let t = grep_tree();
    assert_eq!(grep(&t, &["a.b"]).1, "src/b.txt:1:a.b\nsrc/b.txt:2:axb\n");
    assert_eq!(grep(&t, &["-F", "a.b"]).1, "src/b.txt:1:a.b\n");
}

#[test]
fn grep_multiline() {
    let t = grep_tree();
    // one line at a time by default: a pattern with a newline is refused, as rg does
    assert_eq!(grep(&t, &["start\\nend"]).0, 2);
    assert_eq!(
        grep(&t, &["-U", "start\\nend"]).1,
        "src/m.txt:1:start\nsrc/m.txt:2:end\n"
    );
}

#[test]
fn grep_glob_includes_and_excludes() {
    let t = grep_tree();
    assert_eq!(
        grep(&t, &["-l", "-g", "*.txt", "-g", "!a.txt", "e"]).1,
        "src/m.txt\n"
    );
}

#[test]
fn grep_files_with_matches() {
    let t = grep_tree();
    assert_eq!(grep(&t, &["-l", "e"]).1, "src/a.txt\nsrc/m.txt\n");
}

#[test]
fn grep_count() {
    let t = grep_tree();
    assert_eq!(grep(&t, &["-c", "e"]).1, "src/a.txt:3\nsrc/m.txt:1\n");
}

#[test]
fn grep_max_results() {
    let t = grep_tree();
    let out = ferret(t.path())
        .args(["grep", "--max", "1", "e"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    // stdout stays result lines; the note on what was left out goes to stderr
    assert_eq!(String::from_utf8_lossy(&out.stdout), "src/a.txt:1:one\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--max 0"), "says how to get more: {err}");
}

#[test]
fn grep_hidden() {
    let t = grep_tree();
    assert_eq!(grep(&t, &["-i", "^two"]).1, "src/a.txt:2:Two\n");
    assert_eq!(
        grep(&t, &["--hidden", "-i", "^two"]).1,
        ".hid/h.txt:1:two\nsrc/a.txt:2:Two\n"
    );
}

#[test]
fn grep_json_is_the_tools_output() {
    let t = grep_tree();
    let (code, out) = grep(&t, &["--json", "Two"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["file_count"], 1);
    assert_eq!(v["files"][0]["path"], "src/a.txt");
    assert_eq!(v["files"][0]["lines"][0]["line"], 2);
}

#[test]
fn grep_exit_codes_follow_grep() {
    let t = grep_tree();
    assert_eq!(grep(&t, &["Two"]).0, 0);
    let (code, out) = grep(&t, &["nothing-matches-this"]);
    assert_eq!((code, out.as_str()), (1, ""));
    assert_eq!(grep(&t, &["(unclosed"]).0, 2);
}

#[test]
fn grep_into_a_closed_pipe_exits_quietly() {
    let t = grep_tree();
    for i in 0..200 {
        std::fs::write(t.path().join(format!("src/many{i}.txt")), "e\n".repeat(200)).unwrap();
    }
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ferret"))
        .arg("--root")
        .arg(t.path())
        .args(["grep", "e"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // read one line, then close the pipe
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 16];
    std::io::Read::read_exact(&mut stdout, &mut first).unwrap();
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `cmd` on a pseudo-terminal, as a person would in one; all it printed.
fn on_terminal(cmd: std::process::Command) -> String {
    use expectrl::Expect;
    let mut p = expectrl::Session::spawn(cmd).expect("spawn on a pty");
    p.set_expect_timeout(Some(std::time::Duration::from_secs(30)));
    let out = p.expect(expectrl::Eof).expect("the command ends");
    // Eof matches the whole output
    let all: Vec<u8> = out.matches().flatten().copied().collect();
    String::from_utf8_lossy(&all).replace("\r\n", "\n")
}

fn grep_on_terminal(t: &tempfile::TempDir, env: &[(&str, &str)], args: &[&str]) -> String {
    let mut c = crate::util::bin();
    c.env("TERM", "xterm-256color").envs(env.iter().copied());
    c.arg("--root").arg(t.path()).arg("grep").args(args);
    on_terminal(c)
}

const MAGENTA: &str = "\x1b[35m";
const GREEN: &str = "\x1b[32m";
const BOLD_RED: &str = "\x1b[1m\x1b[31m";
const RESET: &str = "\x1b[0m";

#[test]
fn grep_on_a_terminal_groups_lines_under_coloured_file_headings() {
    let t = grep_tree();
    let out = grep_on_terminal(&t, &[], &["t"]);
    let want = format!(
        "{MAGENTA}src/a.txt{RESET}\n\
         {GREEN}3{RESET}:{BOLD_RED}t{RESET}hree\n\
         \n\
         {MAGENTA}src/m.txt{RESET}\n\
         {GREEN}1{RESET}:s{BOLD_RED}t{RESET}ar{BOLD_RED}t{RESET}\n"
    );
    assert_eq!(out, want);
}

#[test]
fn grep_on_a_terminal_honours_no_color_and_color_never() {
    let t = grep_tree();
    let plain = "src/a.txt\n3:three\n\nsrc/m.txt\n1:start\n";
    assert_eq!(grep_on_terminal(&t, &[("NO_COLOR", "1")], &["t.*"]), plain);
    assert_eq!(
        grep_on_terminal(&t, &[], &["--color", "never", "t.*"]),
        plain
    );
}

#[test]
fn grep_piped_keeps_one_line_per_match_unless_asked() {
    let t = grep_tree();
    assert_eq!(
        grep(&t, &["-C", "1", "Two"]).1,
        "src/a.txt-1-one\nsrc/a.txt:2:Two\nsrc/a.txt-3-three\n"
    );
    // --color always colours a pipe (for `less -R`), still one line per match
    assert_eq!(
        grep(&t, &["--color", "always", "Two"]).1,
        format!("{MAGENTA}src/a.txt{RESET}:{GREEN}2{RESET}:{BOLD_RED}Two{RESET}\n")
    );
    assert_eq!(grep(&t, &["--heading", "Two"]).1, "src/a.txt\n2:Two\n");
    // and a terminal can ask for the piped layout
    assert_eq!(
        grep_on_terminal(&t, &[], &["--no-heading", "--color", "never", "Two"]),
        "src/a.txt:2:Two\n"
    );
}

// --- issue 10: rough edges ---------------------------------------------------------------

#[test]
fn list_directory_pages_a_flat_directory_with_offset() {
    let (_t, r) = crate::util::tempdir();
    for n in ["a", "b", "c", "d", "e"] {
        crate::util::write(&r, n, "x");
    }
    let page = |offset: u64| {
        let out = ferret(&r)
            .args(["--set", "max_files_per_request=2", "call", "list_directory"])
            .arg(json!({"path": ".", "offset": offset}).to_string())
            .output()
            .unwrap();
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let names = |v: &Value| -> Vec<String> {
        v["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap().to_string())
            .collect()
    };
    let v = page(0);
    assert_eq!(
        (names(&v), v["truncated"].clone()),
        (vec!["a".into(), "b".into()], json!(true))
    );
    assert_eq!(names(&page(2)), vec!["c", "d"]);
    let v = page(4);
    assert_eq!(
        (names(&v), v["truncated"].clone()),
        (vec!["e".into()], json!(false))
    );
    let out = ferret(&r)
        .args(["--set", "max_files_per_request=2", "ls"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("continue with offset 2"));
}

#[test]
fn file_search_finds_hidden_configuration_but_never_secrets() {
    let (_t, r) = crate::util::tempdir();
    crate::util::write(&r, ".github/workflows/ci.yml", "run: cargo test\n");
    crate::util::write(&r, ".eslintrc", "cargo-ish\n");
    crate::util::write(&r, ".env", "CARGO_TOKEN=x\n");
    let (code, v) = call(&r, "file_search", json!({"query": "cargo"}));
    assert_eq!(code, 0, "{v}");
    let text = v.to_string();
    assert!(
        text.contains(".github/workflows/ci.yml") && text.contains(".eslintrc"),
        "{text}"
    );
    assert!(!text.contains(".env"), "{text}");
    let (_, v) = call(
        &r,
        "file_search",
        json!({"query": "cargo", "include_hidden": false}),
    );
    assert!(!v.to_string().contains(".eslintrc"));
}

#[test]
fn a_dry_run_needs_no_write_permission() {
    let t = tree();
    let out = ferret(t.path())
        .args([
            "--dry-run",
            "edit",
            "a.txt",
            "--old",
            "hello",
            "--new",
            "bye",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("Would edit a.txt"));
    assert_eq!(
        std::fs::read_to_string(t.path().join("a.txt")).unwrap(),
        "hello\nworld\n"
    );
    let (code, v) = call(
        t.path(),
        "edit",
        json!({"path": "a.txt", "old_string": "hello", "new_string": "bye", "dry_run": true}),
    );
    assert_eq!((code, v["dry_run"].clone()), (0, json!(true)));
    // without dry_run, writes stay off
    assert_eq!(
        error_code(
            t.path(),
            "edit",
            json!({"path": "a.txt", "old_string": "hello", "new_string": "bye"})
        ),
        "WRITE_DISABLED"
    );
}

#[test]
fn a_dry_run_of_a_permanent_delete_previews_without_asking() {
    let t = tree();
    let out = ferret(t.path())
        .args(["--dry-run", "rm", "a.txt", "--permanent"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Would delete: a.txt (permanently)\n[a real run would stop to ask the user first: permanently \
         deleting a.txt needs the user's confirmation]\n"
    );
    assert!(t.path().join("a.txt").exists());
}

#[test]
fn an_unknown_ferret_variable_gets_a_warning_with_the_likely_name() {
    let t = tree();
    let out = ferret(t.path())
        .env("FERRET_BACKUP_ENABLE", "true")
        .env("FERRET_MAX_FILE_SIZ", "5")
        .args(["exists", "a.txt"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("FERRET_MAX_FILE_SIZ is not a setting; did you mean FERRET_MAX_FILE_SIZE?"),
        "{err}"
    );
    assert!(
        err.contains("FERRET_BACKUP_ENABLE is not a setting"),
        "{err}"
    );
    assert_eq!(out.status.code(), Some(0), "a warning, not an error");
}

#[test]
fn seed_004_variables_set_the_root_and_the_size_limit() {
    let t = tree();
    let out = crate::util::bin()
        .env("AI_ROUNDTABLE_BASE_PATH", t.path())
        .env("AI_ROUNDTABLE_MAX_FILE_SIZE", "5")
        .args(["call", "read_file", r#"{"path":"a.txt"}"#])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error"]["code"], "FILE_TOO_LARGE", "{v}");
}

#[test]
fn base64_reads_take_a_byte_range() {
    let (_t, r) = crate::util::tempdir();
    let bytes: Vec<u8> = (0..=255u8).cycle().take(3000).collect();
    std::fs::write(r.join("b.bin"), &bytes).unwrap();
    let (code, v) = call(
        &r,
        "read_file",
        json!({"path": "b.bin", "encoding": "base64", "offset": 1000, "limit": 500}),
    );
    assert_eq!(code, 0, "{v}");
    use base64::Engine;
    let got = base64::engine::general_purpose::STANDARD
        .decode(v["content"].as_str().unwrap())
        .unwrap();
    assert_eq!(got, &bytes[1000..1500]);
    assert_eq!(
        (v["offset"].clone(), v["truncated"].clone()),
        (json!(1000), json!(true))
    );
    let out = ferret(&r)
        .args(["call", "--text", "read_file"])
        .arg(json!({"path": "b.bin", "encoding": "base64", "offset": 2900}).to_string())
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .starts_with("b.bin (bytes 2900-3000 of 3000, base64):")
    );
}

#[test]
fn a_base64_read_over_the_limit_gives_a_hint_that_works_and_exact_sizes() {
    let (_t, r) = crate::util::tempdir();
    std::fs::write(r.join("big.bin"), vec![7u8; 1_100_000]).unwrap();
    let (_, v) = call(
        &r,
        "read_file",
        json!({"path": "big.bin", "encoding": "base64"}),
    );
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("1100000 bytes") && msg.contains("1048576-byte"),
        "{msg}"
    );
    let hint = v["error"]["hint"].as_str().unwrap();
    assert!(hint.contains("offset and limit count bytes"), "{hint}");
    // and the hint works
    let (code, v) = call(
        &r,
        "read_file",
        json!({"path": "big.bin", "encoding": "base64", "offset": 0, "limit": 524288}),
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["truncated"], true);
}

/// Every place in a schema that strict validators or function-calling subsets reject.
fn unportable(v: &Value, at: &str, out: &mut Vec<String>) {
    const STANDARD: &[&str] = &[
        "date-time",
        "date",
        "time",
        "duration",
        "email",
        "idn-email",
        "hostname",
        "idn-hostname",
        "ipv4",
        "ipv6",
        "uri",
        "uri-reference",
        "iri",
        "iri-reference",
        "uuid",
        "uri-template",
        "json-pointer",
        "relative-json-pointer",
        "regex",
    ];
    match v {
        Value::Object(m) => {
            if m.get("type").is_some_and(Value::is_array) {
                out.push(format!("{at}: type array {}", m["type"]));
            }
            if m.get("type").and_then(Value::as_str) == Some("null") {
                out.push(format!("{at}: null type"));
            }
            if let Some(f) = m.get("format").and_then(Value::as_str)
                && !STANDARD.contains(&f)
            {
                out.push(format!("{at}: format {f}"));
            }
            for (k, x) in m {
                unportable(x, &format!("{at}/{k}"), out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                unportable(x, &format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn every_schema_is_single_typed_with_standard_formats() {
    let out = crate::util::bin().args(["tools"]).output().unwrap();
    let tools: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut bad = Vec::new();
    for t in tools.as_array().unwrap() {
        let name = t["name"].as_str().unwrap();
        unportable(&t["inputSchema"], &format!("{name} input"), &mut bad);
        unportable(&t["outputSchema"], &format!("{name} output"), &mut bad);
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

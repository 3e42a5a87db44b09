//! The layering ARCHITECTURE.md draws, checked on the source: each module may use only
//! modules of a lower layer (and itself). A new module must be given a layer here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Layers, bottom up. Same number: peers, which may not use each other either.
const LAYERS: &[(&str, u32)] = &[
    ("error", 0),
    ("clock", 0),
    ("platform", 0),
    ("text", 0),
    ("config", 1),
    ("control", 1),
    ("workspace", 2),
    ("limits", 3),
    ("audit", 3),
    ("history", 3),
    ("search", 4),
    ("tool", 5),
    ("registry", 6),
    ("tools", 7),
    ("context", 8),
    ("prompt", 9),
    ("mcp", 10),
    ("cli", 11),
];

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Every `crate::name` a source text mentions (imports, paths, doc links).
fn mentions(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            out.push(name);
        }
    }
    // `use crate::{a, b}` groups
    let mut rest = text;
    while let Some(i) = rest.find("crate::{") {
        rest = &rest[i + "crate::{".len()..];
        let end = rest.find('}').unwrap_or(rest.len());
        for part in rest[..end].split(',') {
            let name: String = part
                .trim()
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.push(name);
            }
        }
    }
    out
}

/// The violations in a tree: (file, module, the module it uses above it).
fn violations(src: &Path) -> Vec<String> {
    let layer: BTreeMap<&str, u32> = LAYERS.iter().copied().collect();
    let mut all = Vec::new();
    files(src, &mut all);
    all.sort();
    let mut bad = Vec::new();
    for f in all {
        let rel = f.strip_prefix(src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let module = first.trim_end_matches(".rs").to_string();
        if module == "lib" || module == "main" {
            continue;
        }
        let Some(&mine) = layer.get(module.as_str()) else {
            bad.push(format!(
                "{}: module `{module}` has no layer in tests/layers.rs",
                rel.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(&f).unwrap();
        for used in mentions(&text) {
            if used == module {
                continue;
            }
            match layer.get(used.as_str()) {
                Some(&theirs) if theirs < mine => {}
                Some(_) => bad.push(format!(
                    "{}: `{module}` (layer {mine}) uses `{used}` (layer {}), which is not below it",
                    rel.display(),
                    layer[used.as_str()]
                )),
                None => {}
            }
        }
    }
    bad
}

#[test]
fn every_module_uses_only_layers_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let bad = violations(&src);
    assert!(bad.is_empty(), "layering violations:\n{}", bad.join("\n"));
}

#[test]
fn an_upward_import_is_caught() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path();
    std::fs::create_dir(src.join("workspace")).unwrap();
    std::fs::write(
        src.join("workspace/mod.rs"),
        "use crate::error::ToolError;\n",
    )
    .unwrap();
    std::fs::write(src.join("error.rs"), "").unwrap();
    assert!(violations(src).is_empty());
    std::fs::write(
        src.join("workspace/mod.rs"),
        "use crate::{error::ToolError, search::strip};\n",
    )
    .unwrap();
    let bad = violations(src);
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(bad[0].contains("`workspace` (layer 2) uses `search` (layer 4)"));
    std::fs::write(src.join("newthing.rs"), "").unwrap();
    assert!(violations(src).iter().any(|v| v.contains("has no layer")));
}

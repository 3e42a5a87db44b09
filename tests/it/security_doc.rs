//! SECURITY.md backs every guarantee with a named test: each name it gives must be a
//! test that exists, so the document cannot drift from the suite.

use std::path::Path;

#[test]
fn every_test_security_md_names_exists() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(repo.join("SECURITY.md")).unwrap();
    let python = std::fs::read_to_string(repo.join("tests/mcp/test_interop.py")).unwrap();
    let mut named = 0;
    let mut missing = Vec::new();
    for span in doc.split('`').skip(1).step_by(2) {
        if let Some((module, name)) = span.split_once("::") {
            let is_test = module.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
            if !is_test {
                continue;
            }
            named += 1;
            let src = std::fs::read_to_string(repo.join(format!("tests/it/{module}.rs")))
                .unwrap_or_default();
            if !src.contains(&format!("fn {name}(")) {
                missing.push(span.to_string());
            }
        } else if span.starts_with("test_") {
            named += 1;
            if !python.contains(&format!("def {span}(")) {
                missing.push(span.to_string());
            }
        }
    }
    assert!(
        missing.is_empty(),
        "SECURITY.md names tests that do not exist: {missing:?}"
    );
    assert!(named >= 80, "only {named} tests named");
}

//! Issue 28, items 3 and 4: images arrive as images (sniffed by content, within the size
//! limit), notebooks read as cells, and `notebook_edit` changes one cell keeping every
//! other byte, through the sandbox, the version check, dry runs and undo.

use crate::util::{Ws, bin, code, ok, run, snapshot, tempdir, write};
use base64::Engine;
use ferret::ErrorCode;
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------
// Fixtures.

/// A notebook as Jupyter writes it (`json.dumps(nb, sort_keys=True, indent=1,
/// ensure_ascii=False)` and a final newline): a markdown cell, a code cell with a
/// stream output and an image output, and a raw cell.
const NB: &str = r##"{
 "cells": [
  {
   "cell_type": "markdown",
   "id": "m1",
   "metadata": {},
   "source": [
    "# Title é\n",
    "some text"
   ]
  },
  {
   "cell_type": "code",
   "execution_count": 4,
   "id": "c2",
   "metadata": {
    "tags": [
     "keep"
    ]
   },
   "outputs": [
    {
     "name": "stdout",
     "output_type": "stream",
     "text": [
      "hi\n",
      "there\n"
     ]
    },
    {
     "data": {
      "image/png": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk",
      "text/plain": [
       "<Figure size 640x480>"
      ]
     },
     "metadata": {},
     "output_type": "display_data"
    }
   ],
   "source": [
    "import sys\n",
    "print('hi')"
   ]
  },
  {
   "cell_type": "raw",
   "id": "r3",
   "metadata": {},
   "source": [
    "raw stuff"
   ]
  }
 ],
 "metadata": {
  "kernelspec": {
   "display_name": "Python 3",
   "language": "python",
   "name": "python3"
  }
 },
 "nbformat": 4,
 "nbformat_minor": 5
}
"##;

/// The code cell (index 1) as it is in [`NB`], and the same cell replaced by
/// `x = 1\nx`: outputs and count cleared, metadata kept.
const CELL1: &str = r##"  {
   "cell_type": "code",
   "execution_count": 4,
   "id": "c2",
   "metadata": {
    "tags": [
     "keep"
    ]
   },
   "outputs": [
    {
     "name": "stdout",
     "output_type": "stream",
     "text": [
      "hi\n",
      "there\n"
     ]
    },
    {
     "data": {
      "image/png": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk",
      "text/plain": [
       "<Figure size 640x480>"
      ]
     },
     "metadata": {},
     "output_type": "display_data"
    }
   ],
   "source": [
    "import sys\n",
    "print('hi')"
   ]
  }"##;

const CELL1_REPLACED: &str = r##"  {
   "cell_type": "code",
   "execution_count": null,
   "id": "c2",
   "metadata": {
    "tags": [
     "keep"
    ]
   },
   "outputs": [],
   "source": [
    "x = 1\n",
    "x"
   ]
  }"##;

/// A 4x3 PNG (IHDR only matters to ferret; the rest is a valid tiny image).
fn png(w: u32, h: u32) -> Vec<u8> {
    let mut ihdr = b"IHDR".to_vec();
    ihdr.extend_from_slice(&w.to_be_bytes());
    ihdr.extend_from_slice(&h.to_be_bytes());
    ihdr.extend_from_slice(b"\x08\x02\0\0\0");
    let mut v = b"\x89PNG\r\n\x1a\n\0\0\0\x0d".to_vec();
    v.extend_from_slice(&ihdr);
    // The header's checksum: ferret sends only images whose header is whole.
    v.extend_from_slice(&crate::media_r7::crc32(&ihdr).to_be_bytes());
    v.extend_from_slice(b"\0\0\0\0IEND\xaeB`\x82");
    v
}

fn jpeg() -> Vec<u8> {
    let mut v = b"\xFF\xD8\xFF\xE0\x00\x10JFIF\0\x01\x01\0\0\x01\0\x01\0\0".to_vec();
    v.extend_from_slice(
        b"\xFF\xC0\x00\x11\x08\x00\x20\x00\x30\x03\x01\x22\x00\x02\x11\x01\x03\x11\x01",
    );
    v.extend_from_slice(b"\xFF\xD9");
    v
}

fn gif() -> Vec<u8> {
    b"GIF89a\x05\x00\x07\x00\x80\x00\x00\0\0\0\xff\xff\xff,\0\0\0\0\x01\0\x01\0\0\x02\x02D\x01\0;"
        .to_vec()
}

fn webp() -> Vec<u8> {
    // RIFF, size, WEBP, a VP8X chunk: canvas 9x6 (stored minus one, 24-bit LE).
    let mut v = b"RIFF\x16\0\0\0WEBPVP8X\x0a\0\0\0\0\0\0\0".to_vec();
    v.extend_from_slice(&[8, 0, 0, 5, 0, 0]);
    v
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// `ferret --root ROOT [--allow-write] --state-dir STATE serve --no-index` over stdio.
fn mcp(ws: &Ws, write: bool, extra: &[&str]) -> crate::util::StdioServer {
    let mut cmd = bin();
    cmd.current_dir(&ws.base)
        .arg("--root")
        .arg(&ws.root)
        .arg("--state-dir")
        .arg(&ws.state)
        .args(if write {
            &["--allow-write"][..]
        } else {
            &[][..]
        })
        .args(extra)
        .args(["serve", "--no-index"]);
    crate::util::StdioServer::spawn(cmd, "media_r6")
}

fn nb_of(ws: &Ws, rel: &str) -> Vec<u8> {
    std::fs::read(ws.root.join(rel)).expect("read notebook")
}

/// The byte range the two texts differ in: (common prefix, common suffix).
fn differ(a: &[u8], b: &[u8]) -> (usize, usize) {
    let pre = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let max_suf = a.len().min(b.len()) - pre;
    let suf = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take(max_suf)
        .take_while(|(x, y)| x == y)
        .count();
    (pre, suf)
}

// ---------------------------------------------------------------------------------------
// Images.

#[test]
fn images_are_told_by_their_bytes_and_come_as_images_over_mcp() {
    let ws = Ws::new();
    let cases: Vec<(&str, Vec<u8>, &str, &str)> = vec![
        ("a.png", png(4, 3), "image/png", "4x3"),
        ("photo.jpg", jpeg(), "image/jpeg", "48x32"),
        ("anim.gif", gif(), "image/gif", "5x7"),
        ("pic.webp", webp(), "image/webp", "9x6"),
        // The name does not decide: a PNG named .txt is an image.
        ("disguised.txt", png(2, 2), "image/png", "2x2"),
    ];
    for (name, bytes, _, _) in &cases {
        write(&ws.root, name, bytes);
    }
    let mut s = mcp(&ws, false, &[]);
    for (name, bytes, mime, dims) in &cases {
        let r = s.call("read_file", &json!({"path": name}));
        assert_ne!(r["isError"], json!(true), "{name}: {r}");
        let content = r["content"].as_array().expect("content");
        assert_eq!(content.len(), 2, "{name}: text and image: {r}");
        assert_eq!(content[0]["type"], "text");
        let text = content[0]["text"].as_str().unwrap();
        assert!(text.contains(mime) && text.contains(dims), "{name}: {text}");
        assert!(
            text.len() < 200,
            "the text is a line, not the bytes: {text}"
        );
        assert_eq!(content[1]["type"], "image", "{name}");
        assert_eq!(content[1]["mimeType"], *mime, "{name}");
        assert_eq!(
            content[1]["data"],
            b64(bytes),
            "{name}: the file's bytes exactly"
        );
        let st = &r["structuredContent"];
        assert_eq!(st["mime_type"], *mime);
        assert_eq!(st["size"], bytes.len());
        assert_eq!(st["content"], "", "the bytes are sent once, as the image");
    }
}

#[test]
fn text_that_looks_like_an_image_by_name_stays_text_and_svg_is_text() {
    let (_t, root) = tempdir();
    write(&root, "fake.png", "not an image\n");
    write(
        &root,
        "logo.svg",
        "<svg xmlns=\"http://www.w3.org/2000/svg\"/>\n",
    );
    write(&root, "half.png", &png(1, 1)[..5]);
    let f = crate::util::ferret(&root, false, None);
    for p in ["fake.png", "logo.svg"] {
        let (v, text) = ok(&f, "read_file", json!({"path": p}));
        assert!(v.get("mime_type").is_none(), "{p}: {v}");
        assert!(text.contains("     1\t"), "{p} as numbered lines: {text}");
    }
    // A PDF is refused by name, with what to do instead.
    write(&root, "doc.pdf", b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n");
    let e = crate::util::call(&f, "read_file", json!({"path": "doc.pdf"})).unwrap_err();
    assert_eq!(e.code, ErrorCode::BinaryFile);
    assert!(e.message.contains("is a PDF document"), "{e:?}");
    assert!(e.hint.unwrap_or_default().contains("pdftotext"));
    // Five bytes of a PNG signature are not a PNG: binary, as before.
    assert_eq!(
        code(crate::util::call(
            &f,
            "read_file",
            json!({"path": "half.png"})
        )),
        ErrorCode::BinaryFile
    );
}

#[test]
fn an_image_over_the_size_limit_is_refused_with_the_limit_and_a_hint() {
    let ws = Ws::new();
    let mut big = png(4000, 3000);
    big.resize(300_000, 0);
    write(&ws.root, "big.png", &big);
    write(&ws.root, "small.png", png(1, 1));
    let mut s = mcp(&ws, false, &["--set", "max_image_bytes=100000"]);
    let r = s.call("read_file", &json!({"path": "big.png"}));
    assert_eq!(r["isError"], json!(true), "{r}");
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("FILE_TOO_LARGE"), "{text}");
    assert!(
        text.contains("100000-byte") && text.contains("image/png"),
        "{text}"
    );
    assert!(
        text.contains("Hint:") && text.contains("smaller copy"),
        "{text}"
    );
    assert!(
        !r["content"].to_string().contains("\"image\""),
        "no image sent: {r}"
    );
    // Under the limit it is sent.
    let r = s.call("read_file", &json!({"path": "small.png"}));
    assert_eq!(r["content"][1]["type"], "image", "{r}");
}

#[test]
fn base64_and_ranged_reads_of_an_image_still_give_bytes() {
    let (_t, root) = tempdir();
    let bytes = png(4, 3);
    write(&root, "a.png", &bytes);
    let f = crate::util::ferret(&root, false, None);
    let (v, _) = ok(
        &f,
        "read_file",
        json!({"path": "a.png", "encoding": "base64"}),
    );
    assert_eq!(v["content"], b64(&bytes));
    assert!(v.get("mime_type").is_none());
    let (v, _) = ok(
        &f,
        "read_file",
        json!({"path": "a.png", "encoding": "base64", "offset": 1, "limit": 3}),
    );
    assert_eq!(v["content"], b64(&bytes[1..4]));
    // In process (the CLI's path) the text is one line; the structured result says the
    // type, and no base64 rides in either.
    let (v, text) = ok(&f, "read_file", json!({"path": "a.png"}));
    assert_eq!(v["mime_type"], "image/png");
    assert_eq!(
        text,
        format!(
            "a.png: image/png image, {} B, 4x3 (sent as an image)\n",
            bytes.len()
        )
    );
}

#[test]
fn an_image_behind_a_link_out_of_the_workspace_or_to_a_secret_is_refused() {
    let (_t, base) = tempdir();
    let root = base.join("root");
    let outside = base.join("outside");
    std::fs::create_dir_all(&root).unwrap();
    write(&outside, "secret.png", png(8, 8));
    write(&root, ".env.png", png(8, 8));
    std::os::unix::fs::symlink(outside.join("secret.png"), root.join("abs.png")).unwrap();
    std::os::unix::fs::symlink("../outside/secret.png", root.join("rel.png")).unwrap();
    std::os::unix::fs::symlink(".env.png", root.join("innocent.png")).unwrap();
    let f = crate::util::ferret(&root, false, None);
    for (p, want) in [
        ("abs.png", ErrorCode::PathEscape),
        ("rel.png", ErrorCode::PathEscape),
        ("../outside/secret.png", ErrorCode::PathTraversal),
        (".env.png", ErrorCode::DeniedPattern),
        ("innocent.png", ErrorCode::DeniedPattern),
    ] {
        let r = f.call(
            &ferret::Session::new("t", "test"),
            "read_file",
            json!({"path": p}),
            ferret::CallOptions::default(),
        );
        match r {
            Ok(o) => panic!("{p}: read {:?}", o.text),
            Err(e) => assert_eq!(e.code, want, "{p}: {e:?}"),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Notebooks read as cells.

#[test]
fn a_notebook_reads_as_its_cells_with_outputs_summarised() {
    let (_t, root) = tempdir();
    write(&root, "a.ipynb", NB);
    let f = crate::util::ferret(&root, false, None);
    let (v, text) = ok(&f, "read_file", json!({"path": "a.ipynb"}));
    assert_eq!(v["mime_type"], "application/x-ipynb+json");
    for want in [
        "notebook: 3 cells (nbformat 4.5, python)",
        "<cell 0 id=\"m1\" markdown>\n     1\t# Title é\n     2\tsome text\n</cell>",
        "<cell 1 id=\"c2\" code [4]>\n     3\timport sys\n     4\tprint('hi')\n",
        "[outputs: 2 (stream, display_data: image/png text/plain)]",
        "[out] hi\n[out] there\n[out] <Figure size 640x480>\n",
        "<cell 2 id=\"r3\" raw>\n     5\traw stuff\n</cell>",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    // No base64 blob, no raw JSON.
    assert!(
        !text.contains("iVBORw0KGgo") && !text.contains("\"cell_type\""),
        "{text}"
    );
    // The version is the file's, for notebook_edit's expected_version.
    let version = v["version"].as_str().unwrap();
    assert!(text.contains(&format!("[version {version}")), "{text}");
    // The JSON is still there to read: read_files gives it raw (round 7: read_file's
    // offset and limit page the cell view).
    let (raw, _) = ok(&f, "read_files", json!({"paths": ["a.ipynb"]}));
    let raw = &raw["files"][0]["file"];
    assert_eq!(raw["content"], NB);
    assert!(raw.get("mime_type").is_none());
    assert_eq!(raw["version"], version);
    let (part, text) = ok(&f, "read_file", json!({"path": "a.ipynb", "limit": 2}));
    assert_eq!(part["truncated"], true);
    assert!(
        text.contains(
            "     2\tsome text\n</cell>\n… showing lines 1-2 of 5; continue with offset 3"
        ),
        "{text}"
    );
}

#[test]
fn a_notebook_view_keeps_to_the_output_budget_and_not_a_notebook_reads_as_text() {
    let (_t, root) = tempdir();
    let cells: Vec<Value> = (0..1000)
        .map(|i| json!({"cell_type": "code", "execution_count": null, "id": format!("id{i}"), "metadata": {}, "outputs": [], "source": [format!("x{i} = {}\n", "y".repeat(100))]}))
        .collect();
    let big = json!({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5});
    write(
        &root,
        "big.ipynb",
        serde_json::to_string_pretty(&big).unwrap(),
    );
    // Not notebooks: JSON without nbformat, nbformat 3, broken JSON: plain text.
    write(&root, "plain.ipynb", "{\"a\": 1}\n");
    write(
        &root,
        "old.ipynb",
        "{\"nbformat\": 3, \"worksheets\": []}\n",
    );
    write(&root, "broken.ipynb", "{\"cells\": [\n");
    let mut c = ferret::config::Config::defaults(ferret::config::Mode::Server);
    c.roots = vec![root.clone()];
    let f = ferret::Ferret::new(c).unwrap();
    let (v, text) = ok(&f, "read_file", json!({"path": "big.ipynb"}));
    assert!(text.len() <= 80_000, "{}", text.len());
    assert_eq!(v["truncated"], true);
    assert!(text.contains("<cell 0 id=\"id0\" code>") && !text.contains("id999"));
    assert!(
        text.contains("continue with offset"),
        "{}",
        &text[text.len() - 300..]
    );
    for p in ["plain.ipynb", "old.ipynb", "broken.ipynb"] {
        let (v, text) = ok(&f, "read_file", json!({"path": p}));
        assert!(v.get("mime_type").is_none(), "{p}");
        assert!(text.starts_with("     1\t{"), "{p}: {text}");
    }
}

// ---------------------------------------------------------------------------------------
// notebook_edit.

fn edit(ws: &Ws, args: Value) -> Result<(Value, String), ferret::ToolError> {
    run(&ws.ferret(), "notebook_edit", args)
}

#[test]
fn replace_changes_only_the_cells_bytes_and_clears_its_outputs() {
    let ws = Ws::new();
    write(&ws.root, "a.ipynb", NB);
    // By index and by id: the same bytes.
    for by in [json!({"cell_index": 1}), json!({"cell_id": "c2"})] {
        write(&ws.root, "a.ipynb", NB);
        let mut args = json!({"path": "a.ipynb", "new_source": "x = 1\nx"});
        args.as_object_mut()
            .unwrap()
            .extend(by.as_object().unwrap().clone());
        let (v, text) = edit(&ws, args).unwrap();
        let after = nb_of(&ws, "a.ipynb");
        let want = NB.replacen(CELL1, CELL1_REPLACED, 1);
        assert_eq!(String::from_utf8_lossy(&after), want, "{text}");
        // Only bytes inside the old cell's span differ.
        let cell_at = NB.find(CELL1).unwrap();
        let (pre, suf) = differ(NB.as_bytes(), &after);
        assert!(pre >= cell_at && NB.len() - suf <= cell_at + CELL1.len());
        assert_eq!(v["cell_index"], 1);
        assert_eq!(v["cell_id"], "c2");
        assert!(v["change_id"].is_u64() && v["backed_up"] == true, "{v}");
        assert!(
            text.starts_with("Replaced cell 1 (id \"c2\") of a.ipynb (3 cells now;"),
            "{text}"
        );
    }
    // A markdown cell keeps its form; a source given as one string stays one string.
    let one = NB.replacen(
        "\"source\": [\n    \"raw stuff\"\n   ]",
        "\"source\": \"raw stuff\"",
        1,
    );
    write(&ws.root, "b.ipynb", &one);
    edit(
        &ws,
        json!({"path": "b.ipynb", "cell_id": "r3", "new_source": "line 1\nline \"2\"\ttab"}),
    )
    .unwrap();
    assert_eq!(
        String::from_utf8(nb_of(&ws, "b.ipynb")).unwrap(),
        one.replacen(
            "\"source\": \"raw stuff\"",
            "\"source\": \"line 1\\nline \\\"2\\\"\\ttab\"",
            1
        )
    );
    edit(
        &ws,
        json!({"path": "a.ipynb", "cell_index": 0, "new_source": "## Ünïcode\n\n- a"}),
    )
    .unwrap();
    let after = String::from_utf8(nb_of(&ws, "a.ipynb")).unwrap();
    assert_eq!(
        after,
        NB.replacen(CELL1, CELL1_REPLACED, 1).replacen(
            "    \"# Title é\\n\",\n    \"some text\"\n",
            "    \"## Ünïcode\\n\",\n    \"\\n\",\n    \"- a\"\n",
            1
        )
    );
}

#[test]
fn insert_and_delete_change_only_the_cell_and_its_separator() {
    let ws = Ws::new();
    write(&ws.root, "a.ipynb", NB);
    // Insert after c2, a markdown cell.
    let (v, _) = edit(
        &ws,
        json!({"path": "a.ipynb", "cell_id": "c2", "edit_mode": "insert", "cell_type": "markdown", "new_source": "new\ncell"}),
    )
    .unwrap();
    assert_eq!(v["cell_index"], 2);
    let id = v["cell_id"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 8, "{id}");
    let inserted = format!(
        "  {{\n   \"cell_type\": \"markdown\",\n   \"id\": \"{id}\",\n   \"metadata\": {{}},\n   \"source\": [\n    \"new\\n\",\n    \"cell\"\n   ]\n  }},\n"
    );
    let at = NB.find("  {\n   \"cell_type\": \"raw\"").unwrap();
    let want = format!("{}{inserted}{}", &NB[..at], &NB[at..]);
    assert_eq!(String::from_utf8(nb_of(&ws, "a.ipynb")).unwrap(), want);
    // Delete it again: the original bytes exactly.
    edit(
        &ws,
        json!({"path": "a.ipynb", "cell_id": id, "edit_mode": "delete"}),
    )
    .unwrap();
    assert_eq!(nb_of(&ws, "a.ipynb"), NB.as_bytes());
    // Insert a code cell first (no cell named), at the end (index = count).
    edit(
        &ws,
        json!({"path": "a.ipynb", "edit_mode": "insert", "new_source": "first"}),
    )
    .unwrap();
    let (v, _) = edit(
        &ws,
        json!({"path": "a.ipynb", "cell_index": 4, "edit_mode": "insert", "new_source": "last()"}),
    )
    .unwrap();
    let last_id = v["cell_id"].as_str().unwrap().to_string();
    let after = String::from_utf8(nb_of(&ws, "a.ipynb")).unwrap();
    let nb: Value = serde_json::from_str(&after).unwrap();
    let cells = nb["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 5);
    assert_eq!(cells[0]["source"], json!(["first"]));
    assert_eq!(cells[0]["outputs"], json!([]));
    assert_eq!(cells[0]["execution_count"], Value::Null);
    assert_eq!(cells[4]["id"], last_id.as_str());
    let new_cell = format!(
        "  {{\n   \"cell_type\": \"code\",\n   \"execution_count\": null,\n   \"id\": \"{last_id}\",\n   \"metadata\": {{}},\n   \"outputs\": [],\n   \"source\": [\n    \"last()\"\n   ]\n  }}"
    );
    let tail = &NB[NB.find("\n ],\n \"metadata\"").unwrap()..];
    assert!(
        after.ends_with(&format!("  }},\n{new_cell}{tail}")),
        "{after}"
    );
    // Delete the first, the last, and the one between: what is left is byte-exact.
    edit(
        &ws,
        json!({"path": "a.ipynb", "cell_index": 0, "edit_mode": "delete"}),
    )
    .unwrap();
    edit(
        &ws,
        json!({"path": "a.ipynb", "cell_index": 3, "edit_mode": "delete"}),
    )
    .unwrap();
    assert_eq!(nb_of(&ws, "a.ipynb"), NB.as_bytes());
    edit(
        &ws,
        json!({"path": "a.ipynb", "cell_index": 1, "edit_mode": "delete"}),
    )
    .unwrap();
    let cell_at = NB.find(CELL1).unwrap();
    // The cell and the ",\n" before it went; nothing else.
    let want = format!("{}{}", &NB[..cell_at - 2], &NB[cell_at + CELL1.len()..]);
    assert_eq!(String::from_utf8(nb_of(&ws, "a.ipynb")).unwrap(), want);
    // Down to no cells, and back up from none.
    edit(
        &ws,
        json!({"path": "a.ipynb", "cell_index": 0, "edit_mode": "delete"}),
    )
    .unwrap();
    edit(
        &ws,
        json!({"path": "a.ipynb", "cell_index": 0, "edit_mode": "delete"}),
    )
    .unwrap();
    let empty = String::from_utf8(nb_of(&ws, "a.ipynb")).unwrap();
    assert!(
        empty.starts_with("{\n \"cells\": [],\n \"metadata\""),
        "{empty}"
    );
    let (v, _) = edit(
        &ws,
        json!({"path": "a.ipynb", "edit_mode": "insert", "cell_type": "raw", "new_source": "r"}),
    )
    .unwrap();
    let one = String::from_utf8(nb_of(&ws, "a.ipynb")).unwrap();
    assert!(
        one.starts_with(&format!(
            "{{\n \"cells\": [\n  {{\n   \"cell_type\": \"raw\",\n   \"id\": \"{}\",\n   \"metadata\": {{}},\n   \"source\": [\n    \"r\"\n   ]\n  }}\n ],\n \"metadata\"",
            v["cell_id"].as_str().unwrap()
        )),
        "{one}"
    );
}

#[test]
fn a_type_change_rewrites_only_that_cell_as_nbformat_would() {
    let ws = Ws::new();
    write(&ws.root, "a.ipynb", NB);
    edit(
        &ws,
        json!({"path": "a.ipynb", "cell_index": 1, "cell_type": "markdown", "new_source": "now text"}),
    )
    .unwrap();
    let md = "  {\n   \"cell_type\": \"markdown\",\n   \"id\": \"c2\",\n   \"metadata\": {\n    \"tags\": [\n     \"keep\"\n    ]\n   },\n   \"source\": [\n    \"now text\"\n   ]\n  }";
    assert_eq!(
        String::from_utf8(nb_of(&ws, "a.ipynb")).unwrap(),
        NB.replacen(CELL1, md, 1)
    );
    edit(
        &ws,
        json!({"path": "a.ipynb", "cell_index": 0, "cell_type": "code", "new_source": "1"}),
    )
    .unwrap();
    let nb: Value = serde_json::from_slice(&nb_of(&ws, "a.ipynb")).unwrap();
    let keys: Vec<&String> = nb["cells"][0].as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "cell_type",
            "execution_count",
            "id",
            "metadata",
            "outputs",
            "source"
        ]
    );
}

#[test]
fn undo_restores_the_notebook_byte_for_byte() {
    let ws = Ws::new();
    write(&ws.root, "a.ipynb", NB);
    let f = ws.ferret();
    ok(
        &f,
        "notebook_edit",
        json!({"path": "a.ipynb", "cell_index": 1, "new_source": "y"}),
    );
    ok(
        &f,
        "notebook_edit",
        json!({"path": "a.ipynb", "cell_index": 0, "edit_mode": "delete"}),
    );
    ok(
        &f,
        "notebook_edit",
        json!({"path": "a.ipynb", "edit_mode": "insert", "new_source": "z"}),
    );
    assert_ne!(nb_of(&ws, "a.ipynb"), NB.as_bytes());
    for _ in 0..3 {
        ok(&f, "undo", json!({}));
    }
    assert_eq!(nb_of(&ws, "a.ipynb"), NB.as_bytes());
}

#[test]
fn over_mcp_a_notebook_edit_and_its_undo_round_trip() {
    let ws = Ws::new();
    write(&ws.root, "a.ipynb", NB);
    let mut s = mcp(&ws, true, &[]);
    let r = s.call(
        "notebook_edit",
        &json!({"path": "a.ipynb", "cell_id": "c2", "new_source": "x = 1\nx"}),
    );
    assert_ne!(r["isError"], json!(true), "{r}");
    assert_eq!(
        String::from_utf8(nb_of(&ws, "a.ipynb")).unwrap(),
        NB.replacen(CELL1, CELL1_REPLACED, 1)
    );
    let r = s.call("undo", &json!({}));
    assert_ne!(r["isError"], json!(true), "{r}");
    assert_eq!(nb_of(&ws, "a.ipynb"), NB.as_bytes());
}

#[test]
fn dry_run_and_a_stale_version_change_nothing() {
    let ws = Ws::new();
    write(&ws.root, "a.ipynb", NB);
    let before = snapshot(&ws.base);
    let (v, text) = edit(
        &ws,
        json!({"path": "a.ipynb", "cell_index": 1, "new_source": "y", "dry_run": true}),
    )
    .unwrap();
    assert_eq!(v["dry_run"], true);
    assert!(v.get("change_id").is_none());
    assert!(
        text.starts_with("Would have replaced cell 1") && text.contains("+    \"y\""),
        "{text}"
    );
    assert_eq!(snapshot(&ws.base), before, "a dry run wrote something");
    // expected_version: the read's version passes, another is CONFLICT.
    let f = ws.ferret();
    let (r, _) = ok(&f, "read_file", json!({"path": "a.ipynb"}));
    let stale = run(
        &f,
        "notebook_edit",
        json!({"path": "a.ipynb", "cell_index": 0, "new_source": "q", "expected_version": "0000000000000000"}),
    );
    assert_eq!(code(stale.map(|x| x.0)), ErrorCode::Conflict);
    assert_eq!(nb_of(&ws, "a.ipynb"), NB.as_bytes());
    ok(
        &f,
        "notebook_edit",
        json!({"path": "a.ipynb", "cell_index": 0, "new_source": "q", "expected_version": r["version"]}),
    );
    // Writes off: refused before anything.
    write(&ws.root, "a.ipynb", NB);
    let ro = crate::util::ferret(&ws.root, false, Some(&ws.state));
    let r = crate::util::call(
        &ro,
        "notebook_edit",
        json!({"path": "a.ipynb", "cell_index": 0, "new_source": "q"}),
    );
    assert_eq!(code(r), ErrorCode::WriteDisabled);
    assert_eq!(nb_of(&ws, "a.ipynb"), NB.as_bytes());
}

#[test]
fn non_notebooks_and_bad_cells_are_refused_with_codes_and_nothing_changes() {
    let ws = Ws::new();
    write(&ws.root, "a.ipynb", NB);
    write(&ws.root, "plain.json", "{\"a\": [1, 2]}\n");
    write(
        &ws.root,
        "old.ipynb",
        "{\"nbformat\": 3, \"nbformat_minor\": 0, \"worksheets\": []}\n",
    );
    write(&ws.root, "broken.ipynb", "{\"cells\": [\n");
    write(&ws.root, "bin.ipynb", b"\xff\xfe\x00x");
    let before = snapshot(&ws.root);
    let cases = [
        (
            json!({"path": "plain.json", "cell_index": 0, "new_source": "x"}),
            ErrorCode::InvalidArgument,
            "no nbformat",
        ),
        (
            json!({"path": "old.ipynb", "cell_index": 0, "new_source": "x"}),
            ErrorCode::InvalidArgument,
            "nbformat 3",
        ),
        (
            json!({"path": "broken.ipynb", "cell_index": 0, "new_source": "x"}),
            ErrorCode::InvalidArgument,
            "not JSON",
        ),
        (
            // UTF-16 text (read_file reads it), but not a notebook: nbformat is UTF-8.
            json!({"path": "bin.ipynb", "cell_index": 0, "new_source": "x"}),
            ErrorCode::InvalidArgument,
            "not UTF-8",
        ),
        (
            json!({"path": "a.ipynb", "cell_id": "nope", "new_source": "x"}),
            ErrorCode::NotFound,
            "no cell with id",
        ),
        (
            json!({"path": "a.ipynb", "cell_index": 3, "new_source": "x"}),
            ErrorCode::NotFound,
            "3 cells",
        ),
        (
            json!({"path": "a.ipynb", "cell_index": 5, "edit_mode": "insert"}),
            ErrorCode::NotFound,
            "3 cells",
        ),
        (
            json!({"path": "a.ipynb", "new_source": "x"}),
            ErrorCode::InvalidArgument,
            "name the cell",
        ),
        (
            json!({"path": "a.ipynb", "cell_id": "m1", "cell_index": 2, "new_source": "x"}),
            ErrorCode::InvalidArgument,
            "different cells",
        ),
        (
            json!({"path": "a.ipynb", "cell_index": 0, "edit_mode": "delete", "new_source": "x"}),
            ErrorCode::InvalidArgument,
            "delete takes no source",
        ),
        (
            json!({"path": "a.ipynb", "cell_index": 2, "new_source": "raw stuff"}),
            ErrorCode::InvalidArgument,
            "nothing would change",
        ),
        (
            json!({"path": "a.ipynb", "cell_index": 0, "edit_mode": "move"}),
            ErrorCode::InvalidArgument,
            "edit_mode",
        ),
        (
            json!({"path": "a.ipynb", "cell_index": 0, "cell_type": "heading"}),
            ErrorCode::InvalidArgument,
            "cell_type",
        ),
    ];
    for (args, want, says) in cases {
        match edit(&ws, args.clone()) {
            Ok((v, _)) => panic!("{args}: changed {v}"),
            Err(e) => {
                assert_eq!(e.code, want, "{args}: {e:?}");
                let all = format!("{} {}", e.message, e.hint.clone().unwrap_or_default());
                assert!(all.contains(says), "{args}: {all}");
                assert!(e.hint.is_some(), "{args}: no hint: {e:?}");
            }
        }
    }
    assert_eq!(snapshot(&ws.root), before);
}

#[test]
fn notebook_edit_through_links_out_or_to_secrets_is_refused() {
    let ws = Ws::new();
    let outside = ws.base.join("outside");
    write(&outside, "victim.ipynb", NB);
    write(&ws.root, ".env.ipynb", NB);
    write(&ws.root, "d/real.ipynb", NB);
    let root = &ws.root;
    std::os::unix::fs::symlink(outside.join("victim.ipynb"), root.join("abs.ipynb")).unwrap();
    std::os::unix::fs::symlink("../outside/victim.ipynb", root.join("rel.ipynb")).unwrap();
    std::os::unix::fs::symlink("../outside", root.join("outdir")).unwrap();
    std::os::unix::fs::symlink(".env.ipynb", root.join("innocent.ipynb")).unwrap();
    let before_out = snapshot(&outside);
    let before_in = snapshot(root);
    for (p, want) in [
        ("abs.ipynb", ErrorCode::PathEscape),
        ("rel.ipynb", ErrorCode::PathEscape),
        ("outdir/victim.ipynb", ErrorCode::PathEscape),
        ("../outside/victim.ipynb", ErrorCode::PathTraversal),
        (".env.ipynb", ErrorCode::DeniedPattern),
        ("innocent.ipynb", ErrorCode::DeniedPattern),
    ] {
        for mode in ["replace", "insert", "delete"] {
            let args = if mode == "delete" {
                json!({"path": p, "cell_index": 0, "edit_mode": mode})
            } else {
                json!({"path": p, "cell_index": 0, "edit_mode": mode, "new_source": "pwned"})
            };
            match edit(&ws, args) {
                Ok((v, _)) => panic!("{p} {mode}: changed {v}"),
                Err(e) => assert_eq!(e.code, want, "{p} {mode}: {e:?}"),
            }
        }
    }
    assert_eq!(snapshot(&outside), before_out);
    assert_eq!(snapshot(root), before_in);
    // A link inside the workspace to a notebook inside: the target changes, the link stays.
    std::os::unix::fs::symlink("d/real.ipynb", root.join("link.ipynb")).unwrap();
    edit(
        &ws,
        json!({"path": "link.ipynb", "cell_index": 1, "new_source": "x = 1\nx"}),
    )
    .unwrap();
    assert!(
        std::fs::symlink_metadata(root.join("link.ipynb"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        String::from_utf8(nb_of(&ws, "d/real.ipynb")).unwrap(),
        NB.replacen(CELL1, CELL1_REPLACED, 1)
    );
}

#[test]
fn two_processes_editing_one_notebook_at_once_both_land() {
    let ws = Ws::new();
    write(&ws.root, "a.ipynb", NB);
    let run_cli = |src: &str| {
        ws.cmd(&[
            "--allow-write",
            "call",
            "notebook_edit",
            &json!({"path": "a.ipynb", "edit_mode": "insert", "cell_index": 0, "new_source": src})
                .to_string(),
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap()
    };
    let kids: Vec<_> = (0..4).map(|i| run_cli(&format!("p{i}"))).collect();
    for mut k in kids {
        assert!(k.wait().unwrap().success());
    }
    let nb: Value = serde_json::from_slice(&nb_of(&ws, "a.ipynb")).unwrap();
    let cells = nb["cells"].as_array().unwrap();
    assert_eq!(
        cells.len(),
        7,
        "every insert landed, none overwrote another"
    );
    let mut firsts: Vec<String> = cells[..4]
        .iter()
        .map(|c| c["source"][0].as_str().unwrap().to_string())
        .collect();
    firsts.sort();
    assert_eq!(firsts, ["p0", "p1", "p2", "p3"]);
    // The rest of the file is the original's bytes after the four new cells.
    let after = String::from_utf8(nb_of(&ws, "a.ipynb")).unwrap();
    let tail = &NB[NB.find("  {\n   \"cell_type\": \"markdown\"").unwrap()..];
    assert!(after.ends_with(tail));
}

/// `text` with its indentation and line endings redone: each leading space becomes
/// `unit`, each `\n` becomes `newline`.
fn relayout(text: &str, unit: &str, newline: &str) -> String {
    text.split_inclusive('\n')
        .map(|line| {
            let body = line.trim_start_matches(' ');
            let depth = line.len() - body.len();
            let body = body
                .strip_suffix('\n')
                .map_or(body.to_string(), |b| format!("{b}{newline}"));
            format!("{}{body}", unit.repeat(depth))
        })
        .collect()
}

#[test]
fn the_files_own_layout_is_kept_crlf_two_spaces_tabs() {
    let ws = Ws::new();
    for (unit, newline) in [(" ", "\r\n"), ("  ", "\n"), ("\t", "\n"), ("    ", "\r\n")] {
        let nb = relayout(NB, unit, newline);
        write(&ws.root, "a.ipynb", &nb);
        edit(
            &ws,
            json!({"path": "a.ipynb", "cell_index": 1, "new_source": "x = 1\nx"}),
        )
        .unwrap();
        let want = relayout(&NB.replacen(CELL1, CELL1_REPLACED, 1), unit, newline);
        assert_eq!(
            String::from_utf8(nb_of(&ws, "a.ipynb")).unwrap(),
            want,
            "unit {unit:?} newline {newline:?}"
        );
        // An insert and its delete give the file back byte for byte.
        let (v, _) = edit(
            &ws,
            json!({"path": "a.ipynb", "cell_index": 1, "edit_mode": "insert", "new_source": "a\nb"}),
        )
        .unwrap();
        let after = String::from_utf8(nb_of(&ws, "a.ipynb")).unwrap();
        let id = v["cell_id"].as_str().unwrap();
        let cell = relayout(
            &format!(
                "  {{\n   \"cell_type\": \"code\",\n   \"execution_count\": null,\n   \"id\": \"{id}\",\n   \"metadata\": {{}},\n   \"outputs\": [],\n   \"source\": [\n    \"a\\n\",\n    \"b\"\n   ]\n  }},\n"
            ),
            unit,
            newline,
        );
        assert!(after.contains(&cell), "unit {unit:?}: {after}");
        edit(
            &ws,
            json!({"path": "a.ipynb", "cell_index": 1, "edit_mode": "delete"}),
        )
        .unwrap();
        assert_eq!(String::from_utf8(nb_of(&ws, "a.ipynb")).unwrap(), want);
    }
}

#[test]
fn a_notebook_on_the_confirm_list_asks_and_a_dry_run_says_it_would() {
    let ws = Ws::new();
    write(&ws.root, "nb/a.ipynb", NB);
    let mut c = ferret::config::Config::defaults(ferret::config::Mode::Server);
    c.roots = vec![ws.root.clone()];
    c.allow_write = true;
    c.state_dir = Some(ws.state.clone());
    c.confirm = vec!["*.ipynb".into()];
    let f = ferret::Ferret::new(c).unwrap();
    let args = json!({"path": "nb/a.ipynb", "cell_index": 0, "new_source": "q"});
    let r = crate::util::call(&f, "notebook_edit", args.clone());
    assert_eq!(code(r), ErrorCode::ConfirmationRequired);
    assert_eq!(nb_of(&ws, "nb/a.ipynb"), NB.as_bytes());
    let mut dry = args.clone();
    dry["dry_run"] = json!(true);
    let (v, text) = ok(&f, "notebook_edit", dry);
    assert!(
        v["would_ask"]
            .as_str()
            .unwrap_or("")
            .contains("confirmation"),
        "{v}"
    );
    assert!(text.contains("would stop to ask"), "{text}");
    assert_eq!(nb_of(&ws, "nb/a.ipynb"), NB.as_bytes());
    // Confirmed by the person: made.
    let out = f
        .call(
            &ferret::Session::new("t", "test"),
            "notebook_edit",
            args,
            ferret::CallOptions {
                confirmed: true,
                ..Default::default()
            },
        )
        .unwrap();
    assert!(out.text.starts_with("Replaced cell 0"), "{}", out.text);
}

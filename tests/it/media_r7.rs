//! Issues 25 and 28, round 7 of media: an image is bounded like every answer (its own
//! cap, its memory held from the shared budget, over HTTP refused before it is charged
//! or audited as a success), sent only when its header is whole and sane; a notebook's
//! cell view cannot be forged and can be paged to its last byte; a PDF is read as text
//! in a child process under limits.

use crate::http_r3::{host, post, serve, session};
use crate::util::{Ws, bin};
use serde_json::{Value, json};
use std::path::Path;

// ---------------------------------------------------------------------------------------
// Fixtures.

/// CRC-32 (IEEE), as PNG chunks carry it.
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A PNG header (signature, IHDR with its CRC) of `w`x`h`, padded to `len` bytes.
fn png(w: u32, h: u32, len: usize) -> Vec<u8> {
    let mut ihdr = b"IHDR".to_vec();
    ihdr.extend_from_slice(&w.to_be_bytes());
    ihdr.extend_from_slice(&h.to_be_bytes());
    ihdr.extend_from_slice(b"\x08\x02\0\0\0");
    let mut v = b"\x89PNG\r\n\x1a\n\0\0\0\x0d".to_vec();
    v.extend_from_slice(&ihdr);
    v.extend_from_slice(&crc32(&ihdr).to_be_bytes());
    v.extend_from_slice(b"\0\0\0\0IEND\xaeB`\x82");
    if v.len() < len {
        v.resize(len, 7);
    }
    v
}

fn stdio(ws: &Ws, extra: &[&str]) -> crate::util::StdioServer {
    let mut cmd = bin();
    cmd.current_dir(&ws.base)
        .arg("--root")
        .arg(&ws.root)
        .arg("--state-dir")
        .arg(&ws.state)
        .args(extra)
        .args(["serve", "--no-index"]);
    crate::util::StdioServer::spawn(cmd, "media_r7")
}

fn text_of(r: &Value) -> String {
    r["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn has_image(r: &Value) -> bool {
    r["content"]
        .as_array()
        .is_some_and(|c| c.iter().any(|b| b["type"] == "image"))
}

fn audit_records(path: &Path, op: &str) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["operation"] == op)
        .collect()
}

// ---------------------------------------------------------------------------------------
// 1. Images are bounded like every answer.

#[test]
fn an_image_over_the_image_cap_is_refused_before_it_is_read_with_a_hint() {
    let ws = Ws::new();
    // max_file_size raised far above the image cap: the image cap still holds.
    for (name, len) in [("a.png", 6 << 20), ("b.png", 5 * 1024 * 1024 + 1)] {
        std::fs::write(ws.root.join(name), png(100, 100, len)).unwrap();
    }
    std::fs::write(ws.root.join("ok.png"), png(100, 100, 5 * 1024 * 1024)).unwrap();
    let big_round = [
        "--set",
        "max_file_size=100000000",
        "--set",
        "max_bytes_per_round=0",
    ];
    let mut s = stdio(&ws, &big_round);
    for name in ["a.png", "b.png"] {
        let r = s.call("read_file", &json!({"path": name}));
        let t = text_of(&r);
        assert_eq!(r["isError"], json!(true), "{name}: {t}");
        assert!(t.starts_with("FILE_TOO_LARGE"), "{t}");
        assert!(t.contains("5242880-byte) limit for images"), "{t}");
        assert!(
            t.contains("scale it down")
                && t.contains("encoding base64")
                && t.contains("max_image_bytes"),
            "the hint names the ways on: {t}"
        );
        assert!(!has_image(&r), "{name}");
    }
    // At the cap exactly it is sent.
    let r = s.call("read_file", &json!({"path": "ok.png"}));
    assert!(has_image(&r), "{}", text_of(&r));
    // The cap is the user's to lower (or, in a workspace file, only to lower).
    let mut s = stdio(&ws, &["--set", "max_image_bytes=4096"]);
    let r = s.call("read_file", &json!({"path": "ok.png"}));
    assert!(
        text_of(&r).contains("4096-byte) limit for images"),
        "{}",
        text_of(&r)
    );
    // With the default round budget (5 MiB sent) the cap is what one round can carry:
    // refused up front with the limit, never read and then refused by the budget.
    let mut s = stdio(&ws, &["--set", "max_file_size=100000000"]);
    let r = s.call("read_file", &json!({"path": "ok.png"}));
    let t = text_of(&r);
    assert!(
        t.starts_with("FILE_TOO_LARGE") && t.contains("limit for images"),
        "{t}"
    );
    assert!(t.contains("max_bytes_per_round"), "{t}");
}

#[test]
fn concurrent_reads_of_big_images_keep_memory_bounded_and_each_gets_an_answer() {
    let ws = Ws::new();
    // Eight 60 MB images (sparse: a header, then a hole) and eight just under the cap.
    for i in 0..8 {
        let p = ws.root.join(format!("huge{i}.png"));
        std::fs::write(&p, png(4000, 3000, 0)).unwrap();
        let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        f.set_len(60_000_000).unwrap();
        std::fs::write(
            ws.root.join(format!("big{i}.png")),
            png(2000, 1500, 5 * 1024 * 1024 - 1000 * i),
        )
        .unwrap();
    }
    let mut s = stdio(
        &ws,
        &[
            "--set",
            "max_file_size=100000000",
            "--set",
            "max_bytes_per_round=0",
        ],
    );
    let idle = s.peak_mib();
    for i in 0..8u64 {
        s.ask(
            100 + i,
            "read_file",
            &json!({"path": format!("huge{i}.png")}),
        );
        s.ask(
            200 + i,
            "read_file",
            &json!({"path": format!("big{i}.png")}),
        );
    }
    let mut answers = std::collections::BTreeMap::new();
    while answers.len() < 16 {
        let v = s.recv();
        if let Some(id) = v["id"].as_u64() {
            answers.insert(id, v["result"].clone());
        }
    }
    for i in 0..8u64 {
        let huge = &answers[&(100 + i)];
        assert!(
            text_of(huge).starts_with("FILE_TOO_LARGE"),
            "{}",
            text_of(huge)
        );
        let big = &answers[&(200 + i)];
        assert!(has_image(big), "big{i}: {}", text_of(big));
        assert_eq!(big["structuredContent"]["mime_type"], "image/png");
    }
    let peak = s.peak_mib();
    // Unbounded, the huge ones alone took 843 MB; eight images of 5 MiB sent at once
    // take about 40 MiB each at their peak.
    assert!(
        peak < idle + 450,
        "peak RSS {peak} MiB (idle {idle} MiB) for 16 concurrent image reads"
    );
    eprintln!("media_r7 concurrent images: idle {idle} MiB, peak {peak} MiB");
}

#[test]
fn over_http_an_image_too_big_to_send_is_refused_uncharged_and_audited_as_an_error() {
    let ws = Ws::new();
    // 900 KB: within max_image_bytes but its base64 (1.2 MB) is over HTTP's result cap.
    std::fs::write(ws.root.join("wide.png"), png(3000, 2000, 900_000)).unwrap();
    std::fs::write(ws.root.join("small.png"), png(3, 2, 0)).unwrap();
    std::fs::write(ws.root.join("a.txt"), "hello\n").unwrap();
    let (_logs, logs) = crate::util::tempdir();
    let audit = logs.join("audit.jsonl");
    let audit_arg = audit.to_string_lossy().to_string();
    let server = serve(
        &ws.root,
        &[
            "--set",
            "max_file_size=100000000",
            "--set",
            // Three charged 1.2 MB images would spend it.
            "max_bytes_per_round=2000000",
            "--audit-log",
            &audit_arg,
        ],
        &[],
    );
    let sid = session(server.port, "media_r7");
    let call = |args: Value| {
        let body = json!({"jsonrpc":"2.0","id":2,"method":"tools/call",
            "params":{"name":"read_file","arguments":args}})
        .to_string();
        let (status, text) = post(server.port, &host(server.port), Some(&sid), &body);
        assert_eq!(status, 200, "{text}");
        text
    };
    for _ in 0..3 {
        let t = call(json!({"path": "wide.png"}));
        assert!(t.contains("FILE_TOO_LARGE"), "{t}");
        assert!(t.contains("limit for images"), "{t}");
        assert!(!t.contains("\"type\":\"image\""), "{t}");
    }
    // Nothing was charged: the budget still answers.
    let t = call(json!({"path": "a.txt"}));
    assert!(t.contains("hello") && !t.contains("RATE_LIMIT"), "{t}");
    // A small image is still sent over HTTP.
    let t = call(json!({"path": "small.png"}));
    assert!(t.contains("\"type\":\"image\""), "{t}");
    drop(server);
    let records = audit_records(&audit, "read_file");
    let wide: Vec<&Value> = records
        .iter()
        .filter(|r| r["path"].as_str().is_some_and(|p| p.ends_with("wide.png")))
        .collect();
    assert_eq!(wide.len(), 3, "{records:?}");
    for r in wide {
        assert_ne!(r["result"], "success", "{r}");
        assert_eq!(r["code"], "FILE_TOO_LARGE", "{r}");
        assert_eq!(r["bytes_sent"], 0, "{r}");
    }
}

// ---------------------------------------------------------------------------------------
// 2. Images are sent only if they are what they claim.

#[test]
fn an_image_with_a_malformed_or_cut_header_is_answered_as_binary_not_as_an_image() {
    let ws = Ws::new();
    let good = png(3, 2, 0);
    let mut bad_crc = good.clone();
    bad_crc[17] ^= 0x40;
    let mut webp_overlong = b"RIFF\xff\xff\0\0WEBPVP8X\x0a\0\0\0\0\0\0\0".to_vec();
    webp_overlong.extend_from_slice(&[8, 0, 0, 5, 0, 0]);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("cut_in_ihdr.png", good[..24].to_vec()),
        ("cut_before_crc.png", good[..30].to_vec()),
        ("bad_crc.png", bad_crc),
        ("zero_width.png", png(0, 5, 0)),
        ("zero_height.png", png(5, 0, 0)),
        ("huge_side.png", png(100_000, 5, 0)),
        ("not_ihdr_first.png", {
            let mut v = good.clone();
            v[12..16].copy_from_slice(b"IDAT");
            v
        }),
        ("short.gif", b"GIF89a\x05\x00".to_vec()),
        ("zero.gif", b"GIF89a\x00\x00\x07\x00\x80\0\0".to_vec()),
        ("no_sof.jpg", b"\xFF\xD8\xFF\xE0\x00\x04ab\xFF\xD9".to_vec()),
        ("cut_sof.jpg", b"\xFF\xD8\xFF\xC0\x00\x11\x08\x00".to_vec()),
        ("zero.jpg", {
            let mut v = b"\xFF\xD8\xFF\xC0\x00\x11\x08\x00\x00\x00\x30\x03".to_vec();
            v.resize(40, 0);
            v
        }),
        ("overlong.webp", webp_overlong),
        (
            "unknown_chunk.webp",
            b"RIFF\x10\0\0\0WEBPXXXX\x04\0\0\0abcd".to_vec(),
        ),
    ];
    for (name, bytes) in &cases {
        std::fs::write(ws.root.join(name), bytes).unwrap();
    }
    std::fs::write(ws.root.join("good.png"), &good).unwrap();
    let mut s = stdio(&ws, &[]);
    for (name, _) in &cases {
        let r = s.call("read_file", &json!({"path": name}));
        let t = text_of(&r);
        assert_eq!(r["isError"], json!(true), "{name}: {r}");
        assert!(t.starts_with("BINARY_FILE"), "{name}: {t}");
        assert!(
            t.contains("not sent as an image") && t.contains("encoding base64"),
            "{name}: {t}"
        );
        assert!(!has_image(&r), "{name}");
        // Its bytes are still there to look at.
        let r = s.call("read_file", &json!({"path": name, "encoding": "base64"}));
        assert_ne!(r["isError"], json!(true), "{name}: {r}");
    }
    let r = s.call("read_file", &json!({"path": "good.png"}));
    assert!(has_image(&r), "{r}");
}

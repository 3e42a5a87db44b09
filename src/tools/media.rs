//! Images `read_file` sends as images: the type told by the file's first bytes (never by
//! its name alone: a `.png` holding text is text, a PNG named `.txt` is an image), and
//! the dimensions when the header gives them cheaply. SVG is text and stays text.

/// How many bytes [`sniff`] looks at.
pub const SNIFF_BYTES: usize = 16;

/// The MIME type of an image MCP clients render, from the file's first bytes.
pub fn sniff(head: &[u8]) -> Option<&'static str> {
    if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if head.starts_with(b"\xFF\xD8\xFF") {
        Some("image/jpeg")
    } else if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if head.len() >= 12 && &head[..4] == b"RIFF" && &head[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// Whether the first bytes are a PDF's (`%PDF-`): a document `read_file` refuses with
/// its own message rather than as unnamed binary.
pub fn is_pdf(head: &[u8]) -> bool {
    head.starts_with(b"%PDF-")
}

/// Width and height in pixels, when the header says them (a malformed header: `None`).
pub fn dimensions(bytes: &[u8], mime: &str) -> Option<(u32, u32)> {
    let be32 = |at: usize| -> Option<u32> {
        Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
    };
    let le16 = |at: usize| -> Option<u32> {
        Some(u32::from(u16::from_le_bytes(
            bytes.get(at..at + 2)?.try_into().ok()?,
        )))
    };
    let le24 = |at: usize| -> Option<u32> {
        let b = bytes.get(at..at + 3)?;
        Some(u32::from(b[0]) | u32::from(b[1]) << 8 | u32::from(b[2]) << 16)
    };
    match mime {
        // The IHDR chunk is first: width and height at 16 and 20.
        "image/png" if bytes.get(12..16) == Some(b"IHDR") => Some((be32(16)?, be32(20)?)),
        "image/gif" => Some((le16(6)?, le16(8)?)),
        "image/webp" => match bytes.get(12..16)? {
            b"VP8X" => Some((le24(24)? + 1, le24(27)? + 1)),
            b"VP8L" if bytes.get(20) == Some(&0x2F) => {
                let b = u32::from_le_bytes(bytes.get(21..25)?.try_into().ok()?);
                Some(((b & 0x3FFF) + 1, ((b >> 14) & 0x3FFF) + 1))
            }
            b"VP8 " if bytes.get(23..26) == Some(b"\x9D\x01\x2A") => {
                Some((le16(26)? & 0x3FFF, le16(28)? & 0x3FFF))
            }
            _ => None,
        },
        "image/jpeg" => jpeg_dimensions(bytes),
        _ => None,
    }
}

/// The frame size from a JPEG's first start-of-frame marker, walking the segments (each
/// step moves forward, so a hostile file ends the walk at its end).
fn jpeg_dimensions(b: &[u8]) -> Option<(u32, u32)> {
    let mut i = 2;
    loop {
        // Fill bytes (0xFF runs) may precede a marker.
        while *b.get(i)? == 0xFF && *b.get(i + 1)? == 0xFF {
            i += 1;
        }
        if *b.get(i)? != 0xFF {
            return None;
        }
        let marker = *b.get(i + 1)?;
        // Markers without a length: TEM, RSTn.
        if marker == 0x01 || (0xD0..=0xD7).contains(&marker) {
            i += 2;
            continue;
        }
        let len = usize::from(u16::from_be_bytes([*b.get(i + 2)?, *b.get(i + 3)?]));
        let sof = matches!(marker, 0xC0..=0xCF) && !matches!(marker, 0xC4 | 0xC8 | 0xCC);
        if sof {
            // The frame header whole: precision, height, width, components.
            if len < 8 || b.len() < i + 2 + len {
                return None;
            }
            let h = u16::from_be_bytes([*b.get(i + 5)?, *b.get(i + 6)?]);
            let w = u16::from_be_bytes([*b.get(i + 7)?, *b.get(i + 8)?]);
            return Some((u32::from(w), u32::from(h)));
        }
        if len < 2 {
            return None;
        }
        i += 2 + len;
    }
}

/// The most pixels a side of an image sent as an image may have: a header claiming more
/// is not believed (clients and model APIs refuse far smaller images).
pub const MAX_SIDE: u32 = 65_535;

/// Whether an image's header is whole and sane enough that a client decoding it will
/// not choke on it: the header parses to dimensions, neither is zero nor over
/// [`MAX_SIDE`], and the header's own bytes are all there (a PNG's IHDR chunk with its
/// length 13 and its CRC, a JPEG's start-of-frame segment, a GIF's screen descriptor, a
/// WebP's RIFF size within the file). `Err` says what is wrong, for the refusal.
pub fn check(bytes: &[u8], mime: &str) -> Result<(u32, u32), String> {
    let whole = match mime {
        "image/png" => {
            let len = bytes
                .get(8..12)
                .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
            if len != Some(13) || bytes.get(12..16) != Some(b"IHDR") {
                return Err("its first chunk is not a 13-byte IHDR header".into());
            }
            match (bytes.get(12..29), bytes.get(29..33)) {
                (Some(chunk), Some(crc)) if crc32(chunk).to_be_bytes() == crc => true,
                (Some(_), Some(_)) => return Err("its IHDR header's checksum is wrong".into()),
                _ => false,
            }
        }
        "image/gif" => bytes.len() >= 13,
        "image/webp" => {
            let riff = bytes
                .get(4..8)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
            match riff {
                Some(n) if (n as u64).saturating_add(8) > bytes.len() as u64 => false,
                Some(n) if n < 12 => return Err("its RIFF size is too small".into()),
                Some(_) => true,
                None => false,
            }
        }
        "image/jpeg" => true,
        _ => return Err(format!("{mime} is not an image type ferret sends")),
    };
    if !whole {
        return Err("the file ends inside its header (truncated)".into());
    }
    let Some((w, h)) = dimensions(bytes, mime) else {
        return Err("its header does not give its size (malformed or truncated)".into());
    };
    if w == 0 || h == 0 {
        return Err(format!("its header says it is {w}x{h} pixels"));
    }
    if w > MAX_SIDE || h > MAX_SIDE {
        return Err(format!(
            "its header says it is {w}x{h} pixels, over {MAX_SIDE} a side"
        ));
    }
    Ok((w, h))
}

/// CRC-32 (IEEE), as PNG chunks carry it; bitwise, for the 17 bytes of a header.
fn crc32(bytes: &[u8]) -> u32 {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffs_by_content_and_reads_dimensions() {
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        png.extend_from_slice(&3u32.to_be_bytes());
        png.extend_from_slice(&2u32.to_be_bytes());
        assert_eq!(sniff(&png), Some("image/png"));
        assert_eq!(dimensions(&png, "image/png"), Some((3, 2)));
        let gif = b"GIF89a\x05\x00\x07\x00";
        assert_eq!(sniff(gif), Some("image/gif"));
        assert_eq!(dimensions(gif, "image/gif"), Some((5, 7)));
        assert_eq!(sniff(b"<svg xmlns="), None);
        assert_eq!(sniff(b"RIFF\0\0\0\0WAVE"), None);
        // A truncated or looping JPEG ends the walk.
        assert_eq!(dimensions(b"\xFF\xD8\xFF\xE0\x00\x00", "image/jpeg"), None);
        assert_eq!(dimensions(b"\xFF\xD8\xFF", "image/jpeg"), None);
        let jpeg = b"\xFF\xD8\xFF\xE0\x00\x04ab\xFF\xC0\x00\x11\x08\x00\x09\x00\x0A\x03\0\0\0\0\0\0\0\0\0\0";
        assert_eq!(dimensions(jpeg, "image/jpeg"), Some((10, 9)));
        // Its frame header cut short: no size.
        assert_eq!(dimensions(&jpeg[..20], "image/jpeg"), None);
    }

    fn png(w: u32, h: u32) -> Vec<u8> {
        let mut chunk = b"IHDR".to_vec();
        chunk.extend_from_slice(&w.to_be_bytes());
        chunk.extend_from_slice(&h.to_be_bytes());
        chunk.extend_from_slice(&[8, 6, 0, 0, 0]);
        let mut out = b"\x89PNG\r\n\x1a\n\0\0\0\x0d".to_vec();
        out.extend_from_slice(&chunk);
        out.extend_from_slice(&crc32(&chunk).to_be_bytes());
        out
    }

    #[test]
    fn checks_headers_whole_and_sane() {
        assert_eq!(check(&png(3, 2), "image/png"), Ok((3, 2)));
        assert!(check(&png(0, 2), "image/png").is_err());
        assert!(check(&png(70_000, 2), "image/png").is_err());
        assert!(check(&png(3, 2)[..30], "image/png").is_err());
        let mut bad = png(3, 2);
        bad[20] ^= 1;
        assert!(check(&bad, "image/png").unwrap_err().contains("checksum"));
        assert!(check(b"GIF89a\x05\x00\x07\x00", "image/gif").is_err());
        assert_eq!(
            check(b"GIF89a\x05\x00\x07\x00\0\0\0", "image/gif"),
            Ok((5, 7))
        );
        assert!(check(b"GIF89a\x00\x00\x07\x00\0\0\0", "image/gif").is_err());
        // A WebP whose RIFF size runs past the file's end is cut.
        let mut webp = b"RIFF\xff\0\0\0WEBPVP8X\x0a\0\0\0\0\0\0\0\x09\0\0\x04\0\0".to_vec();
        assert!(check(&webp, "image/webp").is_err());
        let n = (webp.len() - 8) as u32;
        webp[4..8].copy_from_slice(&n.to_le_bytes());
        assert_eq!(check(&webp, "image/webp"), Ok((10, 5)));
    }
}

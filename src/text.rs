//! The text codec: which encoding a file's bytes are in, their text decoded without
//! guessing, and changed text written back in that encoding with every byte outside
//! the change left as it was.
//!
//! Detection, in order: a byte-order mark (UTF-8, UTF-16LE, UTF-16BE); else bytes that
//! are valid UTF-8 are UTF-8; else a NUL byte, or many control bytes, make the file
//! binary; else `chardetng` guesses a legacy encoding (windows-1252, Shift_JIS, EUC-JP,
//! GBK, Big5, EUC-KR, KOI8, ISO-8859-x…) from the first [`DETECT_MAX`] bytes.
//! Decoding never replaces: bytes that do not decode in that encoding make the file
//! binary, so no U+FFFD is ever shown (or written back) for bytes that were not one.
//! UTF-8 files without a BOM never reach the detector.
//!
//! A leaf: it uses no other module of the crate.

use encoding_rs::{
    DecoderResult, EncoderResult, Encoding, GB18030, ISO_2022_JP, UTF_8, UTF_16BE, UTF_16LE,
};
use std::io::{self, Read};

/// How much of a file the legacy-encoding detector reads.
pub const DETECT_MAX: usize = 1 << 20;

/// A file's encoding and whether it starts with a byte-order mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Codec {
    pub encoding: &'static Encoding,
    pub bom: bool,
}

impl Codec {
    pub const UTF8: Codec = Codec {
        encoding: UTF_8,
        bom: false,
    };

    /// UTF-8 without a BOM: what every tool handled before encodings were detected.
    pub fn is_plain_utf8(&self) -> bool {
        *self == Codec::UTF8
    }

    /// The encoding's name, lower case: "utf-8", "utf-16le", "windows-1252", "shift_jis".
    pub fn name(&self) -> String {
        self.encoding.name().to_ascii_lowercase()
    }

    /// The name results show, or None for plain UTF-8: "windows-1252",
    /// "utf-16le with BOM".
    pub fn label(&self) -> Option<String> {
        if self.is_plain_utf8() {
            return None;
        }
        Some(if self.bom {
            format!("{} with BOM", self.name())
        } else {
            self.name()
        })
    }

    /// The BOM's bytes (empty without one).
    pub fn bom_bytes(&self) -> &'static [u8] {
        match (self.bom, self.encoding) {
            (false, _) => b"",
            (true, e) if e == UTF_16LE => b"\xFF\xFE",
            (true, e) if e == UTF_16BE => b"\xFE\xFF",
            (true, _) => b"\xEF\xBB\xBF",
        }
    }

    fn is_utf16(&self) -> bool {
        self.encoding == UTF_16LE || self.encoding == UTF_16BE
    }
}

/// The codec a byte-order mark at the start of `bytes` names.
pub fn bom(bytes: &[u8]) -> Option<Codec> {
    let encoding = if bytes.starts_with(b"\xEF\xBB\xBF") {
        UTF_8
    } else if bytes.starts_with(b"\xFF\xFE") {
        UTF_16LE
    } else if bytes.starts_with(b"\xFE\xFF") {
        UTF_16BE
    } else {
        return None;
    };
    Some(Codec {
        encoding,
        bom: true,
    })
}

/// Bytes that are almost never in text (C0 controls but tab, line breaks, form feed and
/// escape; DEL): more than one in a hundred make a non-UTF-8 file binary.
fn control_heavy(bytes: &[u8]) -> bool {
    let n = bytes
        .iter()
        .filter(|&&b| matches!(b, 0x01..=0x08 | 0x0E..=0x1A | 0x1C..=0x1F | 0x7F))
        .count();
    n * 100 > bytes.len()
}

/// A file that starts as a binary format does (PNG's `\x89PNG`, JPEG's `\xFF\xD8\xFF`,
/// a ZIP's or gzip's header): binary even when cut short of the NUL that would say so,
/// never text in a legacy encoding (a truncated PNG is not "‰PNG" in windows-1252).
fn binary_magic(bytes: &[u8]) -> bool {
    const MAGIC: &[&[u8]] = &[b"\x89PNG", b"\xFF\xD8\xFF", b"PK\x03\x04", b"\x1F\x8B"];
    MAGIC.iter().any(|m| bytes.starts_with(m))
}

/// Whether `bytes` (known not to be all UTF-8) read as UTF-8 with a few stray bytes:
/// many more valid multi-byte UTF-8 characters than invalid sequences. Legacy text makes
/// valid UTF-8 pairs only by chance (a Shift_JIS lead byte is mostly a UTF-8 continuation
/// byte), so its invalid sequences outnumber them.
fn utf8_with_errors(bytes: &[u8]) -> bool {
    let (mut multi, mut invalid) = (0usize, 0usize);
    for c in bytes.utf8_chunks() {
        multi += c.valid().chars().filter(|ch| !ch.is_ascii()).count();
        invalid += usize::from(!c.invalid().is_empty());
    }
    multi > 4 * invalid
}

/// The legacy encoding of a file that is not UTF-8 and has no BOM, from its first
/// bytes (`prefix`, at most [`DETECT_MAX`]; `whole`: the prefix is the whole file). None:
/// binary (a NUL or many control bytes in the prefix, or no ASCII-compatible guess).
pub fn detect_legacy(prefix: &[u8], whole: bool) -> Option<&'static Encoding> {
    let prefix = &prefix[..prefix.len().min(DETECT_MAX)];
    if memchr::memchr(0, prefix).is_some() || control_heavy(prefix) || binary_magic(prefix) {
        return None;
    }
    // No evidence, or evidence of UTF-8: a prefix with no byte past ASCII says nothing of
    // the bytes after it (the detector would guess windows-1252 from nothing), and one
    // holding valid multi-byte UTF-8 is UTF-8 with a stray byte, not a legacy file (read
    // as windows-1252 it would show "MÃ¼ller" and miss every "Müller"). Both are left to
    // be searched as bytes, as ripgrep does, and are binary to the tools that decode.
    if prefix.is_ascii() || utf8_with_errors(prefix) {
        return None;
    }
    let mut d = chardetng::EncodingDetector::new(chardetng::Iso2022JpDetection::Deny);
    d.feed(prefix, whole);
    let e = d.guess(None, chardetng::Utf8Detection::Deny);
    // Stateful or not ASCII-compatible: line breaks are not plain bytes, so neither
    // searched nor spliced as text (they are not guessed by the settings above).
    (e.is_ascii_compatible() && e != UTF_8 && e != ISO_2022_JP && e != GB18030).then_some(e)
}

/// Decodes `bytes` (no BOM in them) in `encoding` with no replacement: None if any byte
/// sequence is malformed there.
fn decode_strict(encoding: &'static Encoding, bytes: &[u8]) -> Option<String> {
    if encoding == UTF_8 {
        return std::str::from_utf8(bytes).ok().map(str::to_string);
    }
    encoding
        .decode_without_bom_handling_and_without_replacement(bytes)
        .map(|c| c.into_owned())
}

/// A file's text, decoded, with its codec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    pub codec: Codec,
    /// The text, without the BOM.
    pub text: String,
}

/// Decodes a whole file. None: binary (a NUL, or bytes that are not text in any
/// encoding found for them).
pub fn decode(bytes: &[u8]) -> Option<Decoded> {
    if let Some(codec) = bom(bytes) {
        let text = decode_strict(codec.encoding, &bytes[codec.bom_bytes().len()..])?;
        if text.contains('\0') {
            return None;
        }
        return Some(Decoded { codec, text });
    }
    if memchr::memchr(0, bytes).is_some() {
        return None;
    }
    if let Ok(s) = std::str::from_utf8(bytes) {
        return Some(Decoded {
            codec: Codec::UTF8,
            text: s.to_string(),
        });
    }
    let encoding = detect_legacy(bytes, bytes.len() <= DETECT_MAX)?;
    let text = decode_strict(encoding, bytes)?;
    Some(Decoded {
        codec: Codec {
            encoding,
            bom: false,
        },
        text,
    })
}

/// What a file's text takes in memory once decoded as [`decode`] decodes it, found
/// without holding the file: see [`measure`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Measured {
    /// Bytes of UTF-8 the whole text takes (at most the file's size when it is read as
    /// UTF-8 or is binary: no copy is decoded then).
    pub text: u64,
    /// Whether reading it as text makes a decoded copy (a BOM, UTF-16 or a legacy
    /// encoding), or a UTF-8 file is read as it is.
    pub decoded: bool,
}

/// Measures the text of a file of `size` bytes read from `r` (at its start) as
/// [`decode`] would decode it, in blocks, holding at most [`DETECT_MAX`] bytes: a file
/// read as UTF-8 (or binary, refused before any decoding) is its size; a file with a BOM
/// or in a detected legacy encoding is decoded into nothing and its UTF-8 counted. Only
/// the first `limit` bytes are decoded; each byte past them counts three (the most a
/// byte of UTF-16 or of a legacy encoding becomes). The reader is left where it stopped.
pub fn measure<R: Read>(mut r: R, size: u64, limit: u64) -> io::Result<Measured> {
    let plain = Measured {
        text: size,
        decoded: false,
    };
    let mut prefix = Vec::with_capacity(size.min(DETECT_MAX as u64) as usize);
    (&mut r)
        .take(size.min(DETECT_MAX as u64))
        .read_to_end(&mut prefix)?;
    let whole = size <= prefix.len() as u64;
    let (encoding, skip) = match bom(&prefix) {
        Some(c) if c.encoding == UTF_8 => {
            return Ok(Measured {
                text: size,
                decoded: true,
            });
        }
        Some(c) => (c.encoding, c.bom_bytes().len()),
        None if memchr::memchr(0, &prefix).is_some() => return Ok(plain),
        None if whole && std::str::from_utf8(&prefix).is_ok() => return Ok(plain),
        None => match detect_legacy(&prefix, whole) {
            Some(e) => (e, 0),
            None => return Ok(plain),
        },
    };
    let counted = size.min(limit.max(prefix.len() as u64));
    let body = (&prefix[skip..])
        .chain(r)
        .take(counted.saturating_sub(skip as u64));
    let mut decoder = DecodeReader::new(body, encoding);
    let text = match io::copy(&mut decoder, &mut io::sink()) {
        Ok(n) => n,
        // Bytes that do not decode: binary, refused before anything is decoded whole.
        Err(e) if is_not_utf8(&e) => return Ok(plain),
        Err(e) => return Err(e),
    };
    Ok(Measured {
        text: text.saturating_add(size.saturating_sub(counted).saturating_mul(3)),
        decoded: true,
    })
}

/// How many JSON values `bytes` holds, roughly (every container opened and every
/// separator outside strings), counting no further than `cap + 1`: one pass, no
/// allocation, strings and their escapes skipped. What parsing it costs follows this
/// count, not its bytes (`[0,0,0,…]` is two bytes a value, each value tens of bytes
/// parsed): the stdio framing and the notebook tools count before they parse.
pub fn count_json_values(bytes: &[u8], cap: usize) -> usize {
    let mut n = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &b in bytes {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' | b',' => {
                n += 1;
                if n > cap {
                    return n;
                }
            }
            _ => {}
        }
    }
    n
}

/// Why text could not be written in a file's encoding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unwritable {
    /// This character has no bytes in the encoding (or is a U+FFFD the file did not have).
    Char(char),
    /// The bytes made would not read back as the text (never expected: a safety net).
    NoRoundTrip,
    /// The bytes made, read back as read_file reads them (the encoding detected anew),
    /// would be other text: how they would read (None: as binary) and why.
    Misread(Option<String>, &'static str),
}

impl Unwritable {
    /// A message for a tool's error.
    pub fn describe(&self, codec: &Codec) -> String {
        match self {
            Unwritable::Char('\u{FFFD}') => format!(
                "the new text has U+FFFD (the replacement character), which the file did not have; \
ferret writes no {} file that would read back differently",
                codec.name()
            ),
            Unwritable::Char(c) => format!(
                "{:?} (U+{:04X}) cannot be written in {}, the file's encoding",
                c,
                *c as u32,
                codec.name()
            ),
            Unwritable::NoRoundTrip => format!(
                "the new text would not read back the same in {}, the file's encoding",
                codec.name()
            ),
            Unwritable::Misread(as_, why) => format!(
                "written in {}, the file would read back as {} ({why}), not as the new text",
                codec.label().unwrap_or_else(|| codec.name()),
                as_.as_deref().unwrap_or("binary")
            ),
        }
    }
}

/// `text` in `codec`, with its BOM. U+FFFD is refused unless `had_fffd` (the file had
/// one); plain UTF-8 takes any text.
pub fn encode(codec: &Codec, text: &str, had_fffd: bool) -> Result<Vec<u8>, Unwritable> {
    let mut out = codec.bom_bytes().to_vec();
    if codec.encoding != UTF_8 && !had_fffd && text.contains('\u{FFFD}') {
        return Err(Unwritable::Char('\u{FFFD}'));
    }
    encode_body(codec, text, &mut out)?;
    Ok(out)
}

/// `text` in `codec` appended to `out` (no BOM).
fn encode_body(codec: &Codec, text: &str, out: &mut Vec<u8>) -> Result<(), Unwritable> {
    if codec.encoding == UTF_8 {
        out.extend_from_slice(text.as_bytes());
        return Ok(());
    }
    if codec.encoding == UTF_16LE {
        out.extend(text.encode_utf16().flat_map(u16::to_le_bytes));
        return Ok(());
    }
    if codec.encoding == UTF_16BE {
        out.extend(text.encode_utf16().flat_map(u16::to_be_bytes));
        return Ok(());
    }
    let mut enc = codec.encoding.new_encoder();
    let mut rest = text;
    let mut buf = vec![0u8; 8 * 1024];
    loop {
        let (r, read, written) = enc.encode_from_utf8_without_replacement(rest, &mut buf, true);
        out.extend_from_slice(&buf[..written]);
        rest = &rest[read..];
        match r {
            EncoderResult::InputEmpty => return Ok(()),
            EncoderResult::OutputFull => {}
            EncoderResult::Unmappable(c) => return Err(Unwritable::Char(c)),
        }
    }
}

/// Whether `bytes`, read as read_file reads a whole file ([`decode`]: BOM, UTF-8, else
/// the detected legacy encoding), are `text` (a BOM left out).
/// Compared as it is decoded, in blocks: no second copy of a large file is made.
pub fn reads_as(bytes: &[u8], text: &str) -> bool {
    if bytes == text.as_bytes() {
        // Plain UTF-8 unless it starts as a BOM does or holds a NUL.
        return !text.starts_with('\u{FEFF}') && memchr::memchr(0, bytes).is_none();
    }
    // As [`decode`] reads them.
    let (encoding, body) = match bom(bytes) {
        Some(c) if !text.contains('\0') => (c.encoding, &bytes[c.bom_bytes().len()..]),
        Some(_) => return false,
        None if memchr::memchr(0, bytes).is_some() || std::str::from_utf8(bytes).is_ok() => {
            return false;
        }
        None => match detect_legacy(bytes, bytes.len() <= DETECT_MAX) {
            Some(e) => (e, bytes),
            None => return false,
        },
    };
    let mut decoder = encoding.new_decoder_without_bom_handling();
    let (mut input, mut rest) = (body, text.as_bytes());
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let (r, read, written) = decoder.decode_to_utf8_without_replacement(input, &mut buf, true);
        match rest.strip_prefix(&buf[..written]) {
            Some(r) => rest = r,
            None => return false,
        }
        input = &input[read..];
        match r {
            DecoderResult::InputEmpty => return rest.is_empty(),
            DecoderResult::OutputFull => {}
            DecoderResult::Malformed(..) => return false,
        }
    }
}

/// The check every write of text makes before anything is changed: the new bytes
/// `after` must read back (encoding detected anew, as read_file does) as `new`, the text
/// meant. A file whose old bytes did not read back as its old text either (a UTF-8 file
/// with a NUL, binary to read_file) is not held to it.
pub fn check_reads_back(
    before: Option<(&[u8], &str)>,
    after: &[u8],
    new: &str,
) -> Result<(), Unwritable> {
    if reads_as(after, new) || before.is_some_and(|(b, old)| !reads_as(b, old)) {
        return Ok(());
    }
    let read = decode(after);
    let why = if read.is_none() && new.contains('\0') {
        "a NUL character makes a file binary"
    } else if read.is_none() {
        "control characters, or bytes that decode in no encoding found, make a file binary"
    } else if new.starts_with('\u{FEFF}') && bom(after).is_some_and(|c| c.encoding == UTF_8) {
        "a leading U+FEFF reads as a byte-order mark"
    } else if bom(after).is_some() && !new.starts_with('\u{FEFF}') {
        "its first bytes read as a byte-order mark"
    } else {
        "the encoding is detected from the bytes, and these tip the guess"
    };
    Err(Unwritable::Misread(
        read.map(|d| d.codec.label().unwrap_or_else(|| d.codec.name())),
        why,
    ))
}

/// The lines of a body (no BOM) in `codec`, as byte ranges, each with its line break.
fn byte_lines(codec: &Codec, body: &[u8]) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    if codec.is_utf16() {
        let nl: [u8; 2] = if codec.encoding == UTF_16LE {
            [b'\n', 0]
        } else {
            [0, b'\n']
        };
        let mut i = 0;
        while i + 1 < body.len() {
            if body[i..i + 2] == nl {
                out.push(start..i + 2);
                start = i + 2;
            }
            i += 2;
        }
    } else {
        for i in memchr::memchr_iter(b'\n', body) {
            out.push(start..i + 1);
            start = i + 1;
        }
    }
    if start < body.len() {
        out.push(start..body.len());
    }
    out
}

/// The new content of a file whose bytes were `before` (decoded as `old` in `codec`)
/// and whose text becomes `new`: every line the change leaves alone keeps its original
/// bytes, and within a changed run of lines so do the characters before and after the
/// change where they encode back to the same bytes; only the changed text is encoded.
/// The result is checked to read back as `new`. `deadline` bounds the line diff (past
/// it, larger runs are encoded, still exactly).
pub fn splice(
    codec: &Codec,
    before: &[u8],
    old: &str,
    new: &str,
    deadline: Option<std::time::Instant>,
) -> Result<Vec<u8>, Unwritable> {
    let had_fffd = old.contains('\u{FFFD}');
    if codec.is_plain_utf8() {
        return Ok(new.as_bytes().to_vec());
    }
    if !had_fffd && new.contains('\u{FFFD}') {
        return Err(Unwritable::Char('\u{FFFD}'));
    }
    let bom = codec.bom_bytes();
    let body = before.get(bom.len()..).unwrap_or_default();
    let ranges = byte_lines(codec, body);
    // Each line decoded alone is the text's line: a line break is never inside a
    // character in these encodings (checked as it is decoded, no copy of the text made;
    // else the whole is encoded).
    let old_refs: Vec<&str> = old.split_inclusive('\n').collect();
    if old_refs.len() != ranges.len()
        || ranges
            .iter()
            .zip(&old_refs)
            .any(|(r, line)| !decodes_to(codec.encoding, &body[r.clone()], line))
    {
        return whole(codec, new, had_fffd);
    }
    let new_lines: Vec<&str> = new.split_inclusive('\n').collect();
    let ops = similar::capture_diff_slices_deadline(
        similar::Algorithm::Myers,
        &old_refs,
        &new_lines,
        deadline,
    );
    let mut out = Vec::with_capacity(before.len() + new.len() / 4);
    out.extend_from_slice(bom);
    for op in ops {
        let (o, n) = (op.old_range(), op.new_range());
        if op.tag() == similar::DiffTag::Equal {
            for r in &ranges[o] {
                out.extend_from_slice(&body[r.clone()]);
            }
            continue;
        }
        let old_bytes = match (
            ranges.get(o.start),
            o.end.checked_sub(1).and_then(|e| ranges.get(e)),
        ) {
            (Some(a), Some(b)) if !o.is_empty() => &body[a.start..b.end],
            _ => &body[..0],
        };
        let old_text = old_refs[o].concat();
        let new_text = new_lines[n].concat();
        hunk(codec, old_bytes, &old_text, &new_text, &mut out)?;
    }
    if decodes_to(codec.encoding, &out[bom.len()..], new) {
        Ok(out)
    } else {
        Err(Unwritable::NoRoundTrip)
    }
}

/// Whether `bytes` (no BOM) decode in `encoding`, with no replacement, to `text`:
/// compared as they are decoded, in blocks, so no copy of a large text is made.
fn decodes_to(encoding: &'static Encoding, bytes: &[u8], text: &str) -> bool {
    if encoding == UTF_8 {
        return bytes == text.as_bytes();
    }
    let mut decoder = encoding.new_decoder_without_bom_handling();
    let (mut input, mut rest) = (bytes, text.as_bytes());
    let mut buf = [0u8; 4096];
    loop {
        let (r, read, written) = decoder.decode_to_utf8_without_replacement(input, &mut buf, true);
        match rest.strip_prefix(&buf[..written]) {
            Some(r) => rest = r,
            None => return false,
        }
        input = &input[read..];
        match r {
            DecoderResult::InputEmpty => return rest.is_empty(),
            DecoderResult::OutputFull => {}
            DecoderResult::Malformed(..) => return false,
        }
    }
}

/// The whole text encoded (the splice's fallback), checked to read back.
fn whole(codec: &Codec, new: &str, had_fffd: bool) -> Result<Vec<u8>, Unwritable> {
    let out = encode(codec, new, had_fffd)?;
    if decodes_to(codec.encoding, &out[codec.bom_bytes().len()..], new) {
        Ok(out)
    } else {
        Err(Unwritable::NoRoundTrip)
    }
}

/// One changed run: its unchanged first and last characters keep their bytes where
/// they encode back to exactly those bytes; the rest is encoded.
fn hunk(
    codec: &Codec,
    old_bytes: &[u8],
    old: &str,
    new: &str,
    out: &mut Vec<u8>,
) -> Result<(), Unwritable> {
    let mut pre = old
        .char_indices()
        .zip(new.chars())
        .find(|((_, a), b)| a != b)
        .map_or(old.len().min(new.len()), |((i, _), _)| i);
    while !new.is_char_boundary(pre) {
        pre -= 1;
    }
    let mut suf = old
        .chars()
        .rev()
        .zip(new.chars().rev())
        .take_while(|(a, b)| a == b)
        .map(|(a, _)| a.len_utf8())
        .sum::<usize>();
    suf = suf.min(old.len() - pre).min(new.len() - pre);
    while !old.is_char_boundary(old.len() - suf) || !new.is_char_boundary(new.len() - suf) {
        suf -= 1;
    }
    let enc = |s: &str| {
        let mut v = Vec::new();
        encode_body(codec, s, &mut v).ok().map(|()| v)
    };
    let head = enc(&old[..pre]).filter(|b| old_bytes.starts_with(b));
    let (head_len, pre) = match head {
        Some(b) => (b.len(), pre),
        None => (0, 0),
    };
    let tail = enc(&old[old.len() - suf..])
        .filter(|b| old_bytes[head_len..].ends_with(b) && b.len() <= old_bytes.len() - head_len);
    let (tail_len, suf) = match tail {
        Some(b) => (b.len(), suf),
        None => (0, 0),
    };
    out.extend_from_slice(&old_bytes[..head_len]);
    encode_body(codec, &new[pre..new.len() - suf], out)?;
    out.extend_from_slice(&old_bytes[old_bytes.len() - tail_len..]);
    Ok(())
}

/// The dominant line break of a text: "\r\n" when more lines end so than with a bare
/// "\n".
pub fn dominant_crlf(text: &str) -> bool {
    let lf = memchr::memchr_iter(b'\n', text.as_bytes()).count();
    let crlf = text.matches("\r\n").count();
    crlf * 2 > lf
}

/// Why a streamed file is not searched as UTF-8.
#[derive(Debug)]
pub enum NotUtf8 {
    /// It starts with a UTF-16 byte-order mark.
    Utf16,
    /// A byte sequence that is not UTF-8.
    Invalid,
}

impl std::fmt::Display for NotUtf8 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("not UTF-8")
    }
}

impl std::error::Error for NotUtf8 {}

/// Whether an I/O error is a [`Utf8Check`]'s finding.
pub fn is_not_utf8(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|e| e.is::<NotUtf8>())
}

/// A reader that passes bytes through while they are UTF-8 and fails with [`NotUtf8`]
/// at a UTF-16 BOM or the first byte that is not: a search of UTF-8 files costs one
/// validation pass, and only other files are decoded.
pub struct Utf8Check<R> {
    inner: R,
    /// Bytes of a character cut by the last read, checked with the next.
    carry: Vec<u8>,
    started: bool,
}

impl<R> Utf8Check<R> {
    pub fn new(inner: R) -> Self {
        Utf8Check {
            inner,
            carry: Vec::new(),
            started: false,
        }
    }
}

impl<R: Read> Read for Utf8Check<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let fail = |k| Err(io::Error::other(k));
        if !self.started {
            self.started = true;
            if n >= 2 && (buf[..2] == *b"\xFF\xFE" || buf[..2] == *b"\xFE\xFF") {
                return fail(NotUtf8::Utf16);
            }
        }
        if n == 0 {
            if !self.carry.is_empty() {
                return fail(NotUtf8::Invalid);
            }
            return Ok(0);
        }
        let mut chunk = &buf[..n];
        // Finish the character cut by the last read.
        while !self.carry.is_empty() && !chunk.is_empty() {
            self.carry.push(chunk[0]);
            chunk = &chunk[1..];
            match std::str::from_utf8(&self.carry) {
                Ok(_) => self.carry.clear(),
                Err(e) if e.error_len().is_some() => return fail(NotUtf8::Invalid),
                Err(_) if self.carry.len() >= 4 => return fail(NotUtf8::Invalid),
                Err(_) => {}
            }
        }
        if let Err(e) = std::str::from_utf8(chunk) {
            if e.error_len().is_some() {
                return fail(NotUtf8::Invalid);
            }
            self.carry.extend_from_slice(&chunk[e.valid_up_to()..]);
        }
        Ok(n)
    }
}

/// A reader that gives the UTF-8 text of a non-UTF-8 stream (its BOM, if any, already
/// past), failing with [`NotUtf8::Invalid`] at bytes that do not decode: no U+FFFD is
/// ever made up.
pub struct DecodeReader<R> {
    inner: R,
    decoder: encoding_rs::Decoder,
    raw: Vec<u8>,
    raw_start: usize,
    raw_end: usize,
    out: Vec<u8>,
    out_start: usize,
    out_end: usize,
    eof: bool,
}

impl<R: Read> DecodeReader<R> {
    pub fn new(inner: R, encoding: &'static Encoding) -> Self {
        DecodeReader {
            inner,
            decoder: encoding.new_decoder_without_bom_handling(),
            raw: vec![0; 64 * 1024],
            raw_start: 0,
            raw_end: 0,
            out: vec![0; 3 * 64 * 1024 + 16],
            out_start: 0,
            out_end: 0,
            eof: false,
        }
    }
}

impl<R: Read> Read for DecodeReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.out_start < self.out_end {
                let n = buf.len().min(self.out_end - self.out_start);
                buf[..n].copy_from_slice(&self.out[self.out_start..self.out_start + n]);
                self.out_start += n;
                return Ok(n);
            }
            if self.eof && self.raw_start == self.raw_end {
                return Ok(0);
            }
            if self.raw_start == self.raw_end && !self.eof {
                let n = self.inner.read(&mut self.raw)?;
                self.raw_start = 0;
                self.raw_end = n;
                self.eof = n == 0;
            }
            let (r, read, written) = self.decoder.decode_to_utf8_without_replacement(
                &self.raw[self.raw_start..self.raw_end],
                &mut self.out,
                self.eof,
            );
            self.raw_start += read;
            self.out_start = 0;
            self.out_end = written;
            match r {
                DecoderResult::Malformed(..) => {
                    return Err(io::Error::other(NotUtf8::Invalid));
                }
                DecoderResult::InputEmpty if self.eof => {
                    self.raw_start = self.raw_end;
                    if written == 0 {
                        return Ok(0);
                    }
                }
                DecoderResult::InputEmpty | DecoderResult::OutputFull => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splice_keeps_untouched_bytes() {
        let text = "caf\u{e9} one\r\nna\u{ef}ve two\r\nthree \u{fc}ber\r\n";
        let (bytes, _, _) = encoding_rs::WINDOWS_1252.encode(text);
        let d = decode(&bytes).expect("text");
        assert_eq!(d.text, text);
        let new = text.replace("two", "zwei \u{e4}");
        let out = splice(&d.codec, &bytes, &d.text, &new, None).expect("written");
        assert_eq!(decode(&out).expect("text").text, new);
        assert_eq!(out[..12], bytes[..12]);
        let e = splice(
            &d.codec,
            &bytes,
            &d.text,
            &text.replace("two", "\u{4e2d}"),
            None,
        );
        assert_eq!(e, Err(Unwritable::Char('\u{4e2d}')));
    }

    /// Random changes to random texts in several encodings: the bytes written always
    /// read back as the new text, and the lines before the first changed line keep
    /// their bytes.
    #[test]
    fn splice_round_trips_random_changes() {
        let pools: &[(&'static Encoding, &[char])] = &[
            (
                encoding_rs::WINDOWS_1252,
                &['a', 'Z', ' ', '\n', '\r', '\u{e9}', '\u{20ac}', '\u{fc}'],
            ),
            (
                encoding_rs::SHIFT_JIS,
                &[
                    'a', ' ', '\n', '\u{65e5}', '\u{3042}', '\u{30c6}', '\u{ff71}',
                ],
            ),
            (
                encoding_rs::EUC_KR,
                &['a', '\n', '\u{d55c}', '\u{ae00}', ' '],
            ),
            (encoding_rs::BIG5, &['a', '\n', '\u{4e2d}', '\u{6587}', ' ']),
            (UTF_16LE, &['a', '\n', '\u{1f600}', '\u{e9}', '\r']),
            (UTF_16BE, &['b', '\n', '\u{4e2d}', '\u{10348}']),
        ];
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        for round in 0..600 {
            let (enc, pool) = pools[round % pools.len()];
            let codec = Codec {
                encoding: enc,
                bom: enc == UTF_16LE || enc == UTF_16BE,
            };
            let old: String = (0..next(60)).map(|_| pool[next(pool.len())]).collect();
            let before = encode(&codec, &old, false).expect("pool is representable");
            // (Detection on a few random characters may name another encoding: the
            // splice is tested in the file's true one.)
            let mut new: Vec<char> = old.chars().collect();
            for _ in 0..1 + next(3) {
                let at = next(new.len() + 1);
                if next(2) == 0 && at < new.len() {
                    new.remove(at);
                } else {
                    new.insert(at, pool[next(pool.len())]);
                }
            }
            let new: String = new.into_iter().collect();
            let out = splice(&codec, &before, &old, &new, None).expect("spliced");
            let body = &out[codec.bom_bytes().len()..];
            assert_eq!(
                decode_strict(enc, body).as_deref(),
                Some(&*new),
                "{}",
                enc.name()
            );
            let same = old
                .split_inclusive('\n')
                .zip(new.split_inclusive('\n'))
                .take_while(|(a, b)| a == b)
                .map(|(a, _)| a)
                .collect::<String>();
            let kept = encode(&codec, &same, false).expect("representable");
            assert!(out.starts_with(&kept), "{}: {old:?} -> {new:?}", enc.name());
        }
    }

    /// `measure` says what `decode` makes, without holding the file: a decoded file's
    /// text to the byte, a UTF-8 or binary one its size; bytes past `limit` count three.
    #[test]
    fn measure_agrees_with_decode() {
        let mut legacy = b"caf\xe9 na\xefve ".to_vec();
        legacy.extend(std::iter::repeat_n(0x80u8, 3000));
        let legacy = legacy.repeat(1000); // 3 MB: past the detector's prefix
        let mut wide = vec![0xFF, 0xFE];
        wide.extend(
            "漢字\nabc\n"
                .repeat(50_000)
                .encode_utf16()
                .flat_map(u16::to_le_bytes),
        );
        let cases: Vec<Vec<u8>> = vec![
            legacy.clone(),
            wide,
            "héllo\n".repeat(300_000).into_bytes(),
            b"\xEF\xBB\xBFbom\n".to_vec(),
            b"\x00\x01binary".repeat(10),
            Vec::new(),
        ];
        for bytes in &cases {
            let n = bytes.len() as u64;
            let m = measure(&bytes[..], n, n).expect("measure");
            match decode(bytes) {
                Some(d) if !d.codec.is_plain_utf8() && d.codec.encoding != UTF_8 => {
                    assert!(m.decoded, "{:?}", d.codec);
                    assert_eq!(m.text, d.text.len() as u64, "{:?}", d.codec);
                }
                _ => assert_eq!(m.text, n, "{m:?}"),
            }
        }
        // Only the first part decoded: the rest counted three a byte.
        let n = legacy.len() as u64;
        let m = measure(&legacy[..], n, 2 << 20).expect("measure");
        assert!(m.decoded && m.text > decode(&legacy).expect("text").text.len() as u64);
    }

    /// `reads_as` agrees with `decode` (what read_file shows) on every kind of file.
    #[test]
    fn reads_as_agrees_with_decode() {
        let (w, _, _) = encoding_rs::WINDOWS_1252.encode("caf\u{e9} cr\u{e8}me\n");
        let (j, _, _) = encoding_rs::SHIFT_JIS.encode("\u{65e5}\u{672c}\u{8a9e}\n");
        let le = encode(
            &Codec {
                encoding: UTF_16LE,
                bom: true,
            },
            "\u{feff}a\r\n",
            false,
        )
        .expect("le");
        let big: Vec<u8> = w.iter().copied().cycle().take(3 * DETECT_MAX + 7).collect();
        let samples: Vec<&[u8]> = vec![
            b"",
            b"abc",
            b"\xEF\xBB\xBF",
            b"\xEF\xBB\xBFx",
            b"\xFF\xFE",
            b"\xFF\xFEa",
            b"a\0b",
            b"\xFF\xFEa\x00\x00\x00",
            &w,
            &j,
            &le,
            &big,
            b"caf\xC3\xA9",
        ];
        for b in samples {
            let d = decode(b);
            if let Some(d) = &d {
                assert!(reads_as(b, &d.text), "{b:?}");
                assert!(!reads_as(b, &format!("{}x", d.text)), "{b:?}");
                assert!(!reads_as(b, &format!("\u{feff}{}", d.text)), "{b:?}");
            }
            // As UTF-8 text, it reads as itself only if decode says so.
            if let Ok(s) = std::str::from_utf8(b) {
                assert_eq!(reads_as(b, s), d.is_some_and(|d| d.text == s), "{b:?}");
            }
        }
    }

    #[test]
    fn readers_decode_or_refuse() {
        let mut s = String::new();
        let r = Utf8Check::new(&b"ok \xC3"[..]).read_to_string(&mut s);
        assert!(r.is_err_and(|e| is_not_utf8(&e)));
        let mut v = Vec::new();
        DecodeReader::new(&b"caf\xE9\n"[..], encoding_rs::WINDOWS_1252)
            .read_to_end(&mut v)
            .expect("decoded");
        assert_eq!(v, "caf\u{e9}\n".as_bytes());
        let r = DecodeReader::new(&b"\x82\xA0\x82"[..], encoding_rs::SHIFT_JIS).read_to_end(&mut v);
        assert!(r.is_err());
    }
}

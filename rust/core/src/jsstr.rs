//! JavaScript strings that may hold lone surrogates.
//!
//! A JS string is UTF-16 and may hold a lone surrogate, which Rust `str` cannot. The core
//! decides on the *lossy* text (each lone surrogate read as one U+FFFD, as Node's UTF-8
//! encoder does), and keeps the exact text beside it only when the two differ: as
//! generalized UTF-8 (a lone surrogate as its 3-byte sequence `ED A0..BF 80..BF`), which
//! takes exactly the bytes of the U+FFFD (`EF BF BD`) standing for it. So the two are
//! byte-aligned: any byte range of the lossy text is the same range of the exact bytes, and
//! text built from pieces stays exact by building both side by side ([`JsBuf`]).

use std::borrow::Borrow;
use std::ops::{Deref, Range};

/// A JS string: its lossy text (for decisions) and, when it holds lone surrogates, its
/// exact generalized-UTF-8 bytes (for output).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JsStr {
    text: String,
    exact: Option<Box<[u8]>>,
}

impl JsStr {
    /// A string without lone surrogates.
    pub fn new(text: String) -> Self {
        JsStr { text, exact: None }
    }

    /// A string from its generalized-UTF-8 bytes (surrogates as 3-byte sequences; any other
    /// invalid byte reads as U+FFFD in both forms).
    pub fn from_wtf8(bytes: &[u8]) -> Self {
        let mut buf = JsBuf::new();
        buf.push_wtf8(bytes);
        buf.finish()
    }

    /// The lossy text.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The exact bytes, when they differ from the lossy text.
    pub fn exact(&self) -> Option<&[u8]> {
        self.exact.as_deref()
    }

    /// The exact text as generalized UTF-8 (the lossy text's bytes when it is exact).
    pub fn wtf8(&self) -> &[u8] {
        self.exact.as_deref().unwrap_or(self.text.as_bytes())
    }

    /// The lossy text, owned.
    pub fn into_string(self) -> String {
        self.text
    }

    /// The exact text as UTF-16 code units.
    pub fn to_utf16(&self) -> Vec<u16> {
        match &self.exact {
            None => self.text.encode_utf16().collect(),
            Some(bytes) => wtf8_to_utf16(bytes),
        }
    }
}

impl Deref for JsStr {
    type Target = str;
    fn deref(&self) -> &str {
        &self.text
    }
}

impl Borrow<str> for JsStr {
    fn borrow(&self) -> &str {
        &self.text
    }
}

impl AsRef<str> for JsStr {
    fn as_ref(&self) -> &str {
        &self.text
    }
}

impl From<String> for JsStr {
    fn from(text: String) -> Self {
        JsStr::new(text)
    }
}

impl From<&str> for JsStr {
    fn from(text: &str) -> Self {
        JsStr::new(text.to_owned())
    }
}

impl PartialEq<str> for JsStr {
    fn eq(&self, other: &str) -> bool {
        self.exact.is_none() && self.text == other
    }
}

impl PartialEq<&str> for JsStr {
    fn eq(&self, other: &&str) -> bool {
        self.exact.is_none() && self.text == *other
    }
}

/// A borrowed piece of a [`JsStr`] (or a plain `str`, which is exact).
#[derive(Clone, Copy, Debug)]
pub struct JsSlice<'a> {
    text: &'a str,
    exact: Option<&'a [u8]>,
}

impl<'a> JsSlice<'a> {
    /// The lossy text.
    pub fn as_str(&self) -> &'a str {
        self.text
    }

    /// The exact bytes, when they differ from the lossy text.
    pub fn exact(&self) -> Option<&'a [u8]> {
        self.exact
    }

    /// `self[range]` (byte offsets of the lossy text, on char boundaries).
    pub fn get(&self, range: Range<usize>) -> JsSlice<'a> {
        JsSlice {
            text: self.text.get(range.clone()).unwrap_or_default(),
            exact: self.exact.map(|e| e.get(range).unwrap_or_default()),
        }
    }
}

impl<'a> From<&'a str> for JsSlice<'a> {
    fn from(text: &'a str) -> Self {
        JsSlice { text, exact: None }
    }
}

impl<'a> From<&'a JsStr> for JsSlice<'a> {
    fn from(s: &'a JsStr) -> Self {
        JsSlice {
            text: &s.text,
            exact: s.exact.as_deref(),
        }
    }
}

/// Builds a [`JsStr`] from pieces, keeping the exact bytes only once a piece needs them.
#[derive(Clone, Debug, Default)]
pub struct JsBuf {
    text: String,
    exact: Option<Vec<u8>>,
}

impl JsBuf {
    /// An empty buffer.
    pub fn new() -> Self {
        JsBuf::default()
    }

    /// An empty buffer with room for `bytes`.
    pub fn with_capacity(bytes: usize) -> Self {
        JsBuf {
            text: String::with_capacity(bytes),
            exact: None,
        }
    }

    /// The lossy text so far.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Appends exact text.
    pub fn push_str(&mut self, s: &str) {
        self.text.push_str(s);
        if let Some(exact) = &mut self.exact {
            exact.extend_from_slice(s.as_bytes());
        }
    }

    /// Appends a piece that may hold lone surrogates.
    pub fn push<'a>(&mut self, piece: impl Into<JsSlice<'a>>) {
        let piece = piece.into();
        match piece.exact {
            None => self.push_str(piece.text),
            Some(bytes) => {
                self.exact
                    .get_or_insert_with(|| self.text.as_bytes().to_vec())
                    .extend_from_slice(bytes);
                self.text.push_str(piece.text);
            }
        }
    }

    /// Appends generalized-UTF-8 bytes.
    pub fn push_wtf8(&mut self, bytes: &[u8]) {
        let mut rest = bytes;
        while !rest.is_empty() {
            match std::str::from_utf8(rest) {
                Ok(valid) => {
                    self.push_str(valid);
                    return;
                }
                Err(err) => {
                    let (valid, after) = rest.split_at(err.valid_up_to());
                    self.push_str(std::str::from_utf8(valid).unwrap_or_default());
                    match after {
                        // A high surrogate right before a low one: one astral character
                        // (as JavaScript reads the two units).
                        [0xED, h1 @ 0xA0..=0xAF, h2 @ 0x80..=0xBF, 0xED, l1 @ 0xB0..=0xBF, l2 @ 0x80..=0xBF, ..] =>
                        {
                            let high =
                                0xD000 | (u32::from(*h1 & 0x3F) << 6) | u32::from(*h2 & 0x3F);
                            let low = 0xD000 | (u32::from(*l1 & 0x3F) << 6) | u32::from(*l2 & 0x3F);
                            let c = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
                            let mut tmp = [0u8; 4];
                            self.push_str(
                                char::from_u32(c).map_or("\u{FFFD}", |c| c.encode_utf8(&mut tmp)),
                            );
                            rest = &after[6..];
                        }
                        [0xED, b1 @ 0xA0..=0xBF, b2 @ 0x80..=0xBF, ..] => {
                            self.exact
                                .get_or_insert_with(|| self.text.as_bytes().to_vec())
                                .extend_from_slice(&[0xED, *b1, *b2]);
                            self.text.push('\u{FFFD}');
                            rest = &after[3..];
                        }
                        _ => {
                            let skip = err.error_len().unwrap_or(after.len()).max(1);
                            self.push_str("\u{FFFD}");
                            rest = &after[skip.min(after.len())..];
                        }
                    }
                }
            }
        }
    }

    /// The string built.
    pub fn finish(self) -> JsStr {
        JsStr {
            text: self.text,
            exact: self.exact.map(Vec::into_boxed_slice),
        }
    }
}

/// UTF-16 code units of generalized UTF-8 (surrogate sequences give their unit).
pub fn wtf8_to_utf16(bytes: &[u8]) -> Vec<u16> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut rest = bytes;
    while !rest.is_empty() {
        match std::str::from_utf8(rest) {
            Ok(valid) => {
                out.extend(valid.encode_utf16());
                break;
            }
            Err(err) => {
                let (valid, after) = rest.split_at(err.valid_up_to());
                out.extend(
                    std::str::from_utf8(valid)
                        .unwrap_or_default()
                        .encode_utf16(),
                );
                match after {
                    [0xED, b1 @ 0xA0..=0xBF, b2 @ 0x80..=0xBF, ..] => {
                        out.push(0xD000 | (u16::from(*b1 & 0x3F) << 6) | u16::from(*b2 & 0x3F));
                        rest = &after[3..];
                    }
                    _ => {
                        out.push(0xFFFD);
                        let skip = err.error_len().unwrap_or(after.len()).max(1);
                        rest = &after[skip.min(after.len())..];
                    }
                }
            }
        }
    }
    out
}

/// Generalized UTF-8 of UTF-16 code units (lone surrogates as 3-byte sequences).
pub fn utf16_to_wtf8(units: &[u16]) -> JsStr {
    let mut buf = JsBuf::with_capacity(units.len());
    for item in char::decode_utf16(units.iter().copied()) {
        match item {
            Ok(c) => {
                let mut tmp = [0u8; 4];
                buf.push_str(c.encode_utf8(&mut tmp));
            }
            Err(err) => {
                let u = err.unpaired_surrogate();
                let bytes = [
                    0xE0 | (u >> 12) as u8,
                    0x80 | ((u >> 6) & 0x3F) as u8,
                    0x80 | (u & 0x3F) as u8,
                ];
                buf.push_wtf8(&bytes);
            }
        }
    }
    buf.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LONE_HIGH: [u8; 3] = [0xED, 0xA0, 0xBD]; // U+D83D

    #[test]
    fn lossy_and_exact_are_byte_aligned() {
        let mut bytes = b"ab".to_vec();
        bytes.extend_from_slice(&LONE_HIGH);
        bytes.extend_from_slice("c\u{1F600}".as_bytes());
        let s = JsStr::from_wtf8(&bytes);
        assert_eq!(s.as_str(), "ab\u{FFFD}c\u{1F600}");
        assert_eq!(s.exact(), Some(bytes.as_slice()));
        assert_eq!(s.as_str().len(), bytes.len());
        assert_eq!(s.to_utf16(), [0x61, 0x62, 0xD83D, 0x63, 0xD83D, 0xDE00]);
    }

    #[test]
    fn split_pairs_join() {
        let s = JsStr::from_wtf8(&[0xED, 0xA0, 0xBD, 0xED, 0xB8, 0x80]);
        assert_eq!((s.as_str(), s.exact()), ("\u{1F600}", None));
    }

    #[test]
    fn valid_text_keeps_no_exact_copy() {
        let s = JsStr::from_wtf8("plain \u{FFFD}".as_bytes());
        assert_eq!(s.exact(), None);
        assert_eq!(s, *"plain \u{FFFD}");
    }

    #[test]
    fn buffers_keep_pieces_exact() {
        let lone = JsStr::from_wtf8(&LONE_HIGH);
        let mut buf = JsBuf::new();
        buf.push_str("x");
        buf.push(JsSlice::from(&lone));
        buf.push("y");
        let s = buf.finish();
        assert_eq!(s.as_str(), "x\u{FFFD}y");
        assert_eq!(s.wtf8(), [b'x', 0xED, 0xA0, 0xBD, b'y']);
        let cut = JsSlice::from(&s).get(1..4);
        assert_eq!(cut.as_str(), "\u{FFFD}");
        let mut again = JsBuf::new();
        again.push(cut);
        assert_eq!(again.finish(), lone);
    }

    #[test]
    fn utf16_round_trip() {
        let units = [0x61, 0xDC00, 0xD83D, 0xDE00, 0xD800];
        let s = utf16_to_wtf8(&units);
        assert_eq!(s.as_str(), "a\u{FFFD}\u{1F600}\u{FFFD}");
        assert_eq!(s.to_utf16(), units);
    }
}

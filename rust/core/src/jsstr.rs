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
                        [
                            0xED,
                            h1 @ 0xA0..=0xAF,
                            h2 @ 0x80..=0xBF,
                            0xED,
                            l1 @ 0xB0..=0xBF,
                            l2 @ 0x80..=0xBF,
                            ..,
                        ] => {
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

/// The escape of the key form (a noncharacter, reserved for internal use).
pub const KEY_ESCAPE: char = '\u{FDD0}';
/// A lone surrogate `u` is written in key form as [`KEY_ESCAPE`] then `KEY_SURROGATE_BASE +
/// (u - 0xD800)` (a private-use character).
const KEY_SURROGATE_BASE: u32 = 0xF000;

/// The *key form* of a JS string given as UTF-16 code units: a Rust string that is equal for
/// two JS strings exactly when they are equal, so ids and keys holding lone surrogates keep
/// their own slot in string-keyed tables (`"a\ud800"` and `"a\u{FFFD}"` differ).
///
/// A string without lone surrogates and without U+FDD0 is its own key form (every key the
/// reference writes); a lone surrogate `u` becomes U+FDD0 followed by U+F000 + (u - 0xD800),
/// and U+FDD0 itself becomes U+FDD0 U+FDD0. Key forms concatenate as the strings do (an `@`
/// suffix appended to an id's key form is the key form of the occurrence key), and a
/// surrogate pair given as two units is the astral character (the same JS string).
pub fn key_form_units(units: &[u16]) -> String {
    let mut out = String::with_capacity(units.len());
    for item in char::decode_utf16(units.iter().copied()) {
        match item {
            Ok(KEY_ESCAPE) => {
                out.push(KEY_ESCAPE);
                out.push(KEY_ESCAPE);
            }
            Ok(c) => out.push(c),
            Err(err) => {
                let offset = u32::from(err.unpaired_surrogate()) - 0xD800;
                out.push(KEY_ESCAPE);
                out.push(char::from_u32(KEY_SURROGATE_BASE + offset).unwrap_or('\u{FFFD}'));
            }
        }
    }
    out
}

/// [`key_form_units`] of generalized UTF-8.
pub fn key_form_wtf8(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => key_form_str(text).into_owned(),
        Err(_) => key_form_units(&wtf8_to_utf16(bytes)),
    }
}

/// [`key_form_units`] of a string without lone surrogates (borrowed unless it holds U+FDD0).
pub fn key_form_str(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains(KEY_ESCAPE) {
        std::borrow::Cow::Owned(text.replace(KEY_ESCAPE, "\u{FDD0}\u{FDD0}"))
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

/// The JS string of a key form, as generalized UTF-8 (borrowed when it holds no escape).
/// An escape not followed by what [`key_form_units`] writes is kept as it is.
pub fn key_form_to_wtf8(key: &str) -> std::borrow::Cow<'_, [u8]> {
    if !key.contains(KEY_ESCAPE) {
        return std::borrow::Cow::Borrowed(key.as_bytes());
    }
    let mut out = Vec::with_capacity(key.len());
    let mut chars = key.chars().peekable();
    let mut tmp = [0u8; 4];
    while let Some(c) = chars.next() {
        if c == KEY_ESCAPE {
            match chars.peek().copied() {
                Some(KEY_ESCAPE) => {
                    chars.next();
                }
                Some(next)
                    if (KEY_SURROGATE_BASE..KEY_SURROGATE_BASE + 0x800)
                        .contains(&u32::from(next)) =>
                {
                    chars.next();
                    let unit = 0xD800 + (u32::from(next) - KEY_SURROGATE_BASE);
                    out.extend_from_slice(&[
                        0xE0 | (unit >> 12) as u8,
                        0x80 | ((unit >> 6) & 0x3F) as u8,
                        0x80 | (unit & 0x3F) as u8,
                    ]);
                    continue;
                }
                _ => {}
            }
        }
        out.extend_from_slice(c.encode_utf8(&mut tmp).as_bytes());
    }
    std::borrow::Cow::Owned(out)
}

impl JsStr {
    /// The key form of the string (see [`key_form_units`]).
    pub fn key_form(&self) -> std::borrow::Cow<'_, str> {
        match &self.exact {
            None => key_form_str(&self.text),
            Some(bytes) => std::borrow::Cow::Owned(key_form_wtf8(bytes)),
        }
    }
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

    #[test]
    fn key_forms_tell_lone_surrogates_from_replacement_characters() {
        let lone = key_form_units(&[0x61, 0xD800]);
        let replaced = key_form_units(&[0x61, 0xFFFD]);
        assert_ne!(lone, replaced);
        assert_eq!(replaced, "a\u{FFFD}");
        assert_eq!(lone, "a\u{FDD0}\u{F000}");
        assert_eq!(key_form_units(&[0xDFFF]), "\u{FDD0}\u{F7FF}");
        // The escape itself is escaped, so no real string collides with an encoded one.
        assert_eq!(
            key_form_str("a\u{FDD0}\u{F000}"),
            "a\u{FDD0}\u{FDD0}\u{F000}"
        );
        assert_ne!(key_form_str("a\u{FDD0}\u{F000}"), lone);
        // A pair given as two units is the astral character.
        assert_eq!(key_form_units(&[0xD800, 0xDC00]), "\u{10000}");
        assert_eq!(
            key_form_wtf8(&[0xED, 0xA0, 0x80, 0xED, 0xB0, 0x80]),
            "\u{10000}"
        );
        // Plain strings are their own key form (borrowed).
        assert!(matches!(
            key_form_str("tc1@300"),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    #[test]
    fn key_forms_round_trip() {
        let cases: [&[u16]; 6] = [
            &[0x61, 0xD800],
            &[0xDC00, 0x40, 0x31],
            &[0xFDD0, 0xD83D, 0xFDD0, 0xFDD0],
            &[0xD83D, 0xDE00, 0xDE00],
            &[],
            &[0xFDD0, 0xF000],
        ];
        for units in cases {
            let key = key_form_units(units);
            let back = key_form_to_wtf8(&key);
            assert_eq!(wtf8_to_utf16(&back), units, "{key:?}");
            assert_eq!(key_form_wtf8(&back), key);
        }
        // Concatenation: the key form of `id@5` is the id's key form then `@5`.
        assert_eq!(
            key_form_units(&[0x61, 0xD800, 0x40, 0x35]),
            key_form_units(&[0x61, 0xD800]) + "@5"
        );
    }
}

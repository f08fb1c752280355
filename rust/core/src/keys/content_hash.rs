//! The dedup content hash of a tool result.
//!
//! `hash = sha1_hex(utf8(toolName + "\0" + normalize(text)))` where `normalize`
//! (1) turns every `"\r\n"` into `"\n"` (a lone `"\r"` stays), (2) removes the
//! trailing run of spaces and tabs from every line, and (3) applies JS `trim()`.
//! Internal whitespace, tabs and case are preserved, and the NUL separator keeps
//! `("ab", "c")` apart from `("a", "bc")`. A lone surrogate encodes as U+FFFD.

use sha1::{Digest, Sha1};

pub use crate::js::is_js_whitespace;

fn is_js_whitespace_unit(unit: u16) -> bool {
    // Every JS whitespace character is in the BMP; surrogates are not whitespace.
    char::from_u32(u32::from(unit)).is_some_and(is_js_whitespace)
}

/// The normalized form of a result text that the hash covers.
pub fn normalize_result_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut lines = text.split('\n').peekable();
    while let Some(line) = lines.next() {
        let is_last = lines.peek().is_none();
        // A "\r" directly before a "\n" is the CRLF pair; only that one goes.
        let line = if is_last {
            line
        } else {
            line.strip_suffix('\r').unwrap_or(line)
        };
        out.push_str(line.trim_end_matches([' ', '\t']));
        if !is_last {
            out.push('\n');
        }
    }
    let trimmed = out.trim_matches(is_js_whitespace);
    if trimmed.len() == out.len() {
        out
    } else {
        trimmed.to_owned()
    }
}

/// [`normalize_result_text`] over UTF-16 code units (lone surrogates kept).
pub fn normalize_result_text_utf16(text: &[u16]) -> Vec<u16> {
    const LF: u16 = 0x0A;
    const CR: u16 = 0x0D;
    const SPACE: u16 = 0x20;
    const TAB: u16 = 0x09;
    let mut out = Vec::with_capacity(text.len());
    let mut lines = text.split(|&u| u == LF).peekable();
    while let Some(line) = lines.next() {
        let is_last = lines.peek().is_none();
        let mut line = line;
        if !is_last && let Some((&CR, rest)) = line.split_last() {
            line = rest;
        }
        let keep = line
            .iter()
            .rposition(|&u| u != SPACE && u != TAB)
            .map_or(0, |i| i + 1);
        out.extend_from_slice(line.get(..keep).unwrap_or_default());
        if !is_last {
            out.push(LF);
        }
    }
    let start = out
        .iter()
        .position(|&u| !is_js_whitespace_unit(u))
        .unwrap_or(out.len());
    let end = out
        .iter()
        .rposition(|&u| !is_js_whitespace_unit(u))
        .map_or(start, |i| i + 1);
    out.get(start..end).map(<[u16]>::to_vec).unwrap_or_default()
}

fn hex(digest: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(digest.len() * 2);
    for &b in digest {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    s
}

fn sha1_hex(tool_name: &str, normalized: &str) -> String {
    let mut hasher = Sha1::new();
    hasher.update(tool_name.as_bytes());
    hasher.update([0u8]);
    hasher.update(normalized.as_bytes());
    hex(&hasher.finalize())
}

/// `hashToolResult(toolName, resultText)`: lowercase hex SHA-1.
pub fn hash_tool_result(tool_name: &str, result_text: &str) -> String {
    sha1_hex(tool_name, &normalize_result_text(result_text))
}

/// [`hash_tool_result`] for UTF-16 input: each lone surrogate is hashed as
/// U+FFFD (`EF BF BD`), as Node's UTF-8 encoder does.
pub fn hash_tool_result_utf16(tool_name: &[u16], result_text: &[u16]) -> String {
    let normalized = normalize_result_text_utf16(result_text);
    sha1_hex(
        &String::from_utf16_lossy(tool_name),
        &String::from_utf16_lossy(&normalized),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utf16(s: &str) -> Vec<u16> {
        s.encode_utf16().collect()
    }

    #[test]
    fn known_vector() {
        assert_eq!(
            hash_tool_result("bash", "hello\r\nworld  \n"),
            "d482f895bb0f16b45f7163b0407f1fefaf01f577"
        );
        assert_eq!(
            hash_tool_result_utf16(&utf16("bash"), &utf16("hello\r\nworld  \n")),
            "d482f895bb0f16b45f7163b0407f1fefaf01f577"
        );
        assert_eq!(normalize_result_text("hello\r\nworld  \n"), "hello\nworld");
    }

    #[test]
    fn empty_input_hashes_name_and_separator() {
        // sha1("\0") and sha1("bash\0")
        assert_eq!(
            hash_tool_result("", ""),
            "5ba93c9db0cff93f52b521d7420e43f6eda2784f"
        );
        assert_eq!(
            hash_tool_result("bash", "  \r\n\t "),
            hash_tool_result("bash", "")
        );
    }

    #[test]
    fn crlf_and_trailing_blanks_do_not_matter() {
        let base = hash_tool_result("read", "a\nb\nc");
        assert_eq!(hash_tool_result("read", "a\r\nb\r\nc"), base);
        assert_eq!(hash_tool_result("read", "a \t\nb\t\nc   "), base);
        assert_eq!(
            hash_tool_result("read", "\n\n a\nb\nc\n\n"),
            hash_tool_result("read", "a\nb\nc")
        );
    }

    #[test]
    fn internal_whitespace_tabs_and_case_matter() {
        let base = hash_tool_result("read", "a b");
        assert_ne!(hash_tool_result("read", "a  b"), base);
        assert_ne!(hash_tool_result("read", "a\tb"), base);
        assert_ne!(hash_tool_result("read", "A b"), base);
        assert_ne!(hash_tool_result("Read", "a b"), base);
    }

    #[test]
    fn nul_separator_keeps_name_and_text_apart() {
        assert_ne!(hash_tool_result("ab", "c"), hash_tool_result("a", "bc"));
    }

    #[test]
    fn normalization_steps() {
        let cases: &[(&str, &str)] = &[
            ("a\r\nb", "a\nb"),
            ("a\rb", "a\rb"),
            ("a\r", "a"),
            ("a \r\nb", "a\nb"),
            ("a\r \nb", "a\r\nb"),
            ("a\r\r\nb", "a\r\nb"),
            ("x \u{a0}\ny", "x \u{a0}\ny"),
            ("\u{feff}x\u{3000}", "x"),
            ("\u{2028}x\u{2029}\u{85}", "x\u{2029}\u{85}"),
            ("\u{1c}x\u{1f}", "\u{1c}x\u{1f}"),
            ("  lead\n\tkept\t\n", "lead\n\tkept"),
            ("a \n \n b", "a\n\n b"),
            ("", ""),
            (" \t\r\n", ""),
        ];
        for (input, want) in cases {
            assert_eq!(normalize_result_text(input), *want, "input {input:?}");
            assert_eq!(
                normalize_result_text_utf16(&utf16(input)),
                utf16(want),
                "utf16 input {input:?}"
            );
        }
    }

    #[test]
    fn js_whitespace_set() {
        for c in [
            '\t', '\n', '\u{b}', '\u{c}', '\r', ' ', '\u{a0}', '\u{1680}', '\u{2000}', '\u{200a}',
            '\u{2028}', '\u{2029}', '\u{202f}', '\u{205f}', '\u{3000}', '\u{feff}',
        ] {
            assert!(is_js_whitespace(c), "{c:?}");
        }
        for c in [
            '\u{1c}', '\u{1f}', '\u{85}', '\u{180e}', '\u{200b}', 'a', '\0',
        ] {
            assert!(!is_js_whitespace(c), "{c:?}");
        }
    }

    #[test]
    fn lone_surrogates_hash_as_replacement_character() {
        let mut text = utf16("x");
        text.push(0xD800);
        text.extend(utf16("y "));
        assert_eq!(
            hash_tool_result_utf16(&utf16("bash"), &text),
            hash_tool_result("bash", "x\u{FFFD}y")
        );
        let normalized = normalize_result_text_utf16(&text);
        assert_eq!(normalized, vec![u16::from(b'x'), 0xD800, u16::from(b'y')]);
    }
}

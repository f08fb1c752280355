//! Occurrence keys: one string naming one occurrence of a tool call.
//!
//! Provider tool-call ids are unique only within one model response, so the
//! identity of an occurrence is the bare id plus the numeric `timestamp` of its
//! toolResult message: `<toolCallId>@<String(timestamp)>`. Without a timestamp
//! the key is the bare id (the legacy shape). Bare keys and occurrence keys
//! live side by side in the same maps and compare as opaque strings.
//!
//! Parsing splits on the LAST `@` and accepts only an all-ASCII-digit suffix,
//! so ids containing `@` survive, while a negative, fractional, non-finite or
//! exponent-form timestamp yields a key that parses back as a bare id.

use std::borrow::Cow;

use crate::js::push_number;

/// The separator between the bare id and the timestamp.
pub const OCC_KEY_SEPARATOR: char = '@';

const SEP_UNIT: u32 = OCC_KEY_SEPARATOR as u32;

/// `occKey(id, ts)`: the bare id when there is no timestamp, else
/// `id + "@" + String(ts)` with JavaScript number formatting (`5` not `5.0`,
/// `NaN`, `Infinity`, `1e+21`, `-0` as `0`).
pub fn occ_key(tool_call_id: &str, result_timestamp: Option<f64>) -> Cow<'_, str> {
    match result_timestamp {
        None => Cow::Borrowed(tool_call_id),
        Some(ts) => Cow::Owned(format_occ_key(tool_call_id, ts)),
    }
}

/// `id + "@" + String(ts)`, always with a timestamp.
pub fn format_occ_key(tool_call_id: &str, result_timestamp: f64) -> String {
    let mut key = String::with_capacity(tool_call_id.len() + 1 + 16);
    key.push_str(tool_call_id);
    key.push(OCC_KEY_SEPARATOR);
    push_number(&mut key, result_timestamp);
    key
}

/// A key split into its bare id and, for occurrence keys, the timestamp.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ParsedOccKey<'a> {
    /// The bare provider id (the whole key when it has no numeric suffix).
    pub tool_call_id: &'a str,
    /// `Number(suffix)`: always integral, `+Infinity` when the digits overflow a double.
    pub result_timestamp: Option<f64>,
}

/// Finds the separator of an occurrence key given as code units (UTF-8 bytes
/// or UTF-16 units): returns the separator's index and the timestamp, or
/// `None` when the key is a bare id.
///
/// Rule: the separator is the last `@`; it must not be the first unit; the
/// text after it must be one or more ASCII digits (JS `/^\d+$/`, where `$` is
/// the end of input). The timestamp is `Number(digits)`.
pub fn split_occ_key_units<T>(units: &[T]) -> Option<(usize, f64)>
where
    T: Copy + Into<u32>,
{
    let sep = units.iter().rposition(|&u| u.into() == SEP_UNIT)?;
    if sep == 0 {
        return None;
    }
    let suffix = units.get(sep + 1..)?;
    if suffix.is_empty() {
        return None;
    }
    let mut digits = String::with_capacity(suffix.len());
    for &unit in suffix {
        let c = char::from_u32(unit.into()).filter(char::is_ascii_digit)?;
        digits.push(c);
    }
    // Rust's float parsing is correctly rounded like `Number()`, and an
    // all-digit string too long for a double parses to +Infinity.
    let ts = digits.parse::<f64>().ok()?;
    Some((sep, ts))
}

/// `parseOccKey(key)`.
pub fn parse_occ_key(key: &str) -> ParsedOccKey<'_> {
    if let Some((sep, ts)) = split_occ_key_units(key.as_bytes()) {
        // `sep` indexes an ASCII byte, so it is a char boundary.
        if let Some(id) = key.get(..sep) {
            return ParsedOccKey {
                tool_call_id: id,
                result_timestamp: Some(ts),
            };
        }
    }
    ParsedOccKey {
        tool_call_id: key,
        result_timestamp: None,
    }
}

/// `bareToolCallId(key)` = `parseOccKey(key).toolCallId`.
pub fn bare_tool_call_id(key: &str) -> &str {
    parse_occ_key(key).tool_call_id
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(key: &str) -> (&str, Option<f64>) {
        let p = parse_occ_key(key);
        (p.tool_call_id, p.result_timestamp)
    }

    #[test]
    fn formats_with_and_without_timestamp() {
        assert_eq!(occ_key("a", Some(5.0)), "a@5");
        assert_eq!(occ_key("a", None), "a");
        assert!(matches!(occ_key("a", None), Cow::Borrowed(_)));
        assert_eq!(occ_key("bash_23", Some(1150.0)), "bash_23@1150");
        assert_eq!(occ_key("x", Some(1_781_234_567_890.0)), "x@1781234567890");
    }

    #[test]
    fn formats_timestamps_like_js_string() {
        assert_eq!(format_occ_key("a", 1.5), "a@1.5");
        assert_eq!(format_occ_key("a", -5.0), "a@-5");
        assert_eq!(format_occ_key("a", -0.0), "a@0");
        assert_eq!(format_occ_key("a", f64::NAN), "a@NaN");
        assert_eq!(format_occ_key("a", f64::INFINITY), "a@Infinity");
        assert_eq!(format_occ_key("a", f64::NEG_INFINITY), "a@-Infinity");
        assert_eq!(format_occ_key("a", 1e21), "a@1e+21");
        assert_eq!(format_occ_key("a", 1e20), "a@100000000000000000000");
        assert_eq!(format_occ_key("a", 1e-7), "a@1e-7");
    }

    #[test]
    fn parses_occurrence_keys() {
        assert_eq!(parsed("a@5"), ("a", Some(5.0)));
        assert_eq!(parsed("bash_23@1150"), ("bash_23", Some(1150.0)));
        assert_eq!(parsed("a@0"), ("a", Some(0.0)));
        assert_eq!(parsed("a@007"), ("a", Some(7.0)));
    }

    #[test]
    fn keys_without_numeric_suffix_are_bare() {
        assert_eq!(parsed("a"), ("a", None));
        assert_eq!(parsed(""), ("", None));
        assert_eq!(parsed("a@"), ("a@", None));
        assert_eq!(parsed("a@b"), ("a@b", None));
        assert_eq!(parsed("a@1.5"), ("a@1.5", None));
        assert_eq!(parsed("a@-5"), ("a@-5", None));
        assert_eq!(parsed("a@NaN"), ("a@NaN", None));
        assert_eq!(parsed("a@Infinity"), ("a@Infinity", None));
        assert_eq!(parsed("a@1e+21"), ("a@1e+21", None));
        assert_eq!(parsed("a@5 "), ("a@5 ", None));
        assert_eq!(parsed("a@+5"), ("a@+5", None));
    }

    #[test]
    fn separator_at_index_zero_is_not_a_separator() {
        assert_eq!(parsed("@5"), ("@5", None));
        assert_eq!(parsed("@"), ("@", None));
        // ... but a later `@` still splits.
        assert_eq!(parsed("@a@5"), ("@a", Some(5.0)));
    }

    #[test]
    fn splits_on_the_last_at() {
        assert_eq!(parsed("user@host@42"), ("user@host", Some(42.0)));
        assert_eq!(parsed("a@1@2"), ("a@1", Some(2.0)));
        // The last `@` has a non-numeric tail: the whole key is bare even
        // though an earlier `@` is followed by digits.
        assert_eq!(parsed("a@1@x"), ("a@1@x", None));
        assert_eq!(bare_tool_call_id("user@host@42"), "user@host");
        assert_eq!(bare_tool_call_id("user@host"), "user@host");
    }

    #[test]
    fn digit_class_is_ascii_and_dollar_is_end_of_input() {
        assert_eq!(parsed("a@\u{0663}"), ("a@\u{0663}", None));
        assert_eq!(parsed("a@\u{FF15}"), ("a@\u{FF15}", None));
        assert_eq!(parsed("a@5\n"), ("a@5\n", None));
        assert_eq!(parsed("a@\n5"), ("a@\n5", None));
    }

    #[test]
    fn timestamp_is_number_of_the_digits() {
        assert_eq!(
            parsed("a@12345678901234567890"),
            ("a", Some(12_345_678_901_234_567_000.0))
        );
        let huge = format!("a@{}", "9".repeat(400));
        assert_eq!(parsed(&huge), ("a", Some(f64::INFINITY)));
    }

    #[test]
    fn non_ascii_ids_split_on_char_boundaries() {
        assert_eq!(parsed("żółw@7"), ("żółw", Some(7.0)));
        assert_eq!(parsed("😀@1"), ("😀", Some(1.0)));
    }

    #[test]
    fn utf16_units_follow_the_same_rule() {
        let units: Vec<u16> = vec![0xD800, u16::from(b'@'), u16::from(b'9')];
        assert_eq!(split_occ_key_units(&units), Some((1, 9.0)));
        let bare: Vec<u16> = "@9".encode_utf16().collect();
        assert_eq!(split_occ_key_units(&bare), None);
    }

    #[test]
    fn round_trips_non_negative_integer_timestamps() {
        for id in ["a", "bash_23", "user@host", "@x", "x@", "😀"] {
            for ts in [
                0.0,
                1.0,
                1150.0,
                1_781_234_567_890.0,
                9_007_199_254_740_993.0,
                1e20,
            ] {
                let key = occ_key(id, Some(ts));
                assert_eq!(parsed(&key), (id, Some(ts)), "key {key}");
            }
        }
    }
}

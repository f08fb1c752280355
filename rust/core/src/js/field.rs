//! `JsField`: what the reference sees when it reads one field of a persisted JSON object.
//!
//! Reconstruction reads fields of entries that any TS version (or a hand-edited file) may have
//! written. The reference applies JavaScript coercions to them (`??`, truthiness, template
//! literals, `a - b`), so the index keeps each consulted field as a small summary that can answer
//! those questions exactly, instead of a plain `Option<String>`.

use super::is_js_whitespace;
use super::num::format_number;
use crate::jsstr::{JsSlice, JsStr};

/// One field of a JSON object as JavaScript sees it.
#[derive(Clone, Debug, PartialEq, Default)]
pub enum JsField {
    /// The key is missing (JS `undefined`).
    #[default]
    Absent,
    /// JSON `null`.
    Null,
    /// JSON `true` / `false`.
    Bool(bool),
    /// A JSON number (an IEEE double).
    Number(f64),
    /// A JSON string (its lossy text, and its exact bytes when it holds lone surrogates).
    Str(JsStr),
    /// A JSON array, kept as its JS `String(array)` form (elements joined with `,`).
    Array(String),
    /// A JSON object (`String(obj)` is `[object Object]`).
    Object,
}

impl JsField {
    /// Convenience constructor for a string field.
    pub fn str(s: impl Into<String>) -> Self {
        JsField::Str(JsStr::new(s.into()))
    }

    /// `x === null || x === undefined` (the values `??` replaces).
    pub fn is_nullish(&self) -> bool {
        matches!(self, JsField::Absent | JsField::Null)
    }

    /// JS truthiness (`!!x`): `undefined`, `null`, `false`, `0`, `NaN` and `""` are falsy.
    pub fn is_truthy(&self) -> bool {
        match self {
            JsField::Absent | JsField::Null => false,
            JsField::Bool(b) => *b,
            JsField::Number(n) => *n != 0.0 && !n.is_nan(),
            JsField::Str(s) => !s.is_empty(),
            JsField::Array(_) | JsField::Object => true,
        }
    }

    /// The string value when the field is a JSON string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            JsField::Str(s) => Some(s),
            _ => None,
        }
    }

    /// `String(x)` as a piece that keeps lone surrogates (see [`JsField::js_string`]).
    pub fn push_js_string(&self, out: &mut crate::jsstr::JsBuf) {
        match self {
            JsField::Str(s) => out.push(JsSlice::from(s)),
            other => out.push_str(&other.js_string()),
        }
    }

    /// `String(x)` in key form (`crate::jsstr::key_form_units`): equal for two fields
    /// exactly when their strings are, lone surrogates included.
    pub fn js_string_key(&self) -> String {
        match self {
            JsField::Str(s) => s.key_form().into_owned(),
            other => crate::jsstr::key_form_str(&other.js_string()).into_owned(),
        }
    }

    /// The number when the field is a JSON number (`typeof x === "number"`, NaN included).
    pub fn as_number(&self) -> Option<f64> {
        match self {
            JsField::Number(n) => Some(*n),
            _ => None,
        }
    }

    /// `String(x)` / template-literal interpolation (`undefined` -> `"undefined"`).
    pub fn js_string(&self) -> String {
        match self {
            JsField::Absent => "undefined".to_owned(),
            JsField::Null => "null".to_owned(),
            JsField::Bool(b) => if *b { "true" } else { "false" }.to_owned(),
            JsField::Number(n) => format_number(*n),
            JsField::Str(s) => s.as_str().to_owned(),
            JsField::Array(s) => s.clone(),
            JsField::Object => "[object Object]".to_owned(),
        }
    }

    /// How `Array.prototype.join` prints this value as an element: nullish -> `""`.
    pub fn join_piece(&self) -> String {
        if self.is_nullish() {
            String::new()
        } else {
            self.js_string()
        }
    }

    /// JS `ToNumber(x)` as applied by `a - b` in a sort comparator.
    pub fn to_number(&self) -> f64 {
        match self {
            JsField::Absent | JsField::Object => f64::NAN,
            JsField::Null => 0.0,
            JsField::Bool(b) => f64::from(u8::from(*b)),
            JsField::Number(n) => *n,
            JsField::Str(s) => string_to_number(s),
            JsField::Array(s) => string_to_number(s),
        }
    }
}

/// JS `Number(s)` for decimal strings: whitespace-trimmed, empty -> 0, `Infinity` forms,
/// otherwise a strict decimal literal or NaN. (Hex/octal/binary literals are not used by any
/// persisted field the index reads and yield NaN here.)
pub fn string_to_number(s: &str) -> f64 {
    let t = s.trim_matches(is_js_whitespace);
    if t.is_empty() {
        return 0.0;
    }
    match t {
        "Infinity" | "+Infinity" => return f64::INFINITY,
        "-Infinity" => return f64::NEG_INFINITY,
        _ => {}
    }
    let body = t.strip_prefix(['+', '-']).unwrap_or(t);
    let valid = !body.is_empty()
        && body
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
        && body
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_digit() || b == b'.');
    if !valid {
        return f64::NAN;
    }
    t.parse::<f64>().unwrap_or(f64::NAN)
}

/// JS `parseInt(s, 10)`: leading whitespace, optional sign, longest ASCII digit prefix; NaN if
/// there is no digit.
pub fn parse_int10(s: &str) -> f64 {
    let t = s.trim_start_matches(is_js_whitespace);
    let (negative, rest) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let digits_len = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits_len == 0 {
        return f64::NAN;
    }
    let value = rest[..digits_len].parse::<f64>().unwrap_or(f64::NAN);
    if negative { -value } else { value }
}

/// `/^\d+$/` with JS semantics (ASCII digits, `$` = end of input).
pub fn is_ascii_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truthiness_follows_javascript() {
        assert!(!JsField::Absent.is_truthy());
        assert!(!JsField::Null.is_truthy());
        assert!(!JsField::Number(0.0).is_truthy());
        assert!(!JsField::Number(f64::NAN).is_truthy());
        assert!(!JsField::str("").is_truthy());
        assert!(!JsField::Bool(false).is_truthy());
        assert!(JsField::Object.is_truthy());
        assert!(JsField::Array(String::new()).is_truthy());
        assert!(JsField::str("0").is_truthy());
        assert!(JsField::Number(-1.0).is_truthy());
    }

    #[test]
    fn template_strings() {
        assert_eq!(JsField::Absent.js_string(), "undefined");
        assert_eq!(JsField::Null.js_string(), "null");
        assert_eq!(JsField::Number(1150.0).js_string(), "1150");
        assert_eq!(JsField::Number(1e21).js_string(), "1e+21");
        assert_eq!(JsField::Object.js_string(), "[object Object]");
        assert_eq!(JsField::Null.join_piece(), "");
    }

    #[test]
    fn parse_int_like_javascript() {
        assert_eq!(parse_int10("12abc"), 12.0);
        assert_eq!(parse_int10("  \u{FEFF}-7"), -7.0);
        assert_eq!(parse_int10("+3"), 3.0);
        assert!(parse_int10("abc").is_nan());
        assert!(parse_int10("").is_nan());
        assert!(parse_int10("-").is_nan());
        assert_eq!(parse_int10("007"), 7.0);
    }

    #[test]
    fn to_number_like_javascript() {
        assert_eq!(JsField::str(" 42 ").to_number(), 42.0);
        assert_eq!(JsField::str("").to_number(), 0.0);
        assert!(JsField::str("4x").to_number().is_nan());
        assert!(JsField::str("inf").to_number().is_nan());
        assert_eq!(JsField::Null.to_number(), 0.0);
        assert!(JsField::Absent.to_number().is_nan());
        assert_eq!(JsField::Bool(true).to_number(), 1.0);
    }

    #[test]
    fn digit_suffix() {
        assert!(is_ascii_digits("0123"));
        assert!(!is_ascii_digits(""));
        assert!(!is_ascii_digits("12\n"));
        assert!(!is_ascii_digits("١٢"));
    }
}

//! JavaScript-exact JSON: `JSON.stringify` / `JSON.parse` semantics, byte for byte.
//!
//! - [`escape`]: string quoting and the UTF-16 / UTF-8 lengths the reference measures;
//! - [`fixed_width`]: the same UTF-16 lengths of strings held as 1, 2 or 4-byte code points;
//! - `order`: JS own-property key order (array-index keys first);
//! - [`write`](mod@write): compact and indented output, and its length without building it;
//! - [`number_lens`]: a cache of the printed lengths of doubles;
//! - [`parse`]: exactly the grammar `JSON.parse` accepts.
//!
//! Strings that hold lone surrogates (a JS string cut at a UTF-16 boundary) cannot be a
//! `&str`; they travel as UTF-16 code units ([`JsString::Units`]).

pub mod escape;
pub mod fixed_width;
pub mod number_lens;
pub(crate) mod order;
pub(crate) mod parse;
pub mod write;

pub use escape::{str_len, units_len, units_utf8_len, utf16_len, write_str, write_units};
pub use fixed_width::{bmp_len, code_points_len, latin1_len, utf16_of};
pub use number_lens::NumberLens;
pub use order::{array_index, array_index_units, js_key_order};
pub use parse::{
    Build, ErrorKind, Failure, Integer, NumberLiteral, ParseError, Scalar, parse, parse_with,
};
pub use write::{JsonWriter, stringify, stringify_len, stringify_pretty};

/// Deepest nesting of arrays and objects accepted when parsing or serializing.
pub const MAX_DEPTH: usize = 1024;

/// A JS string: UTF-8 text, or UTF-16 code units when it holds a lone surrogate.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum JsString {
    /// A string without lone surrogates.
    Text(String),
    /// A string holding at least one lone surrogate.
    Units(Vec<u16>),
}

impl JsString {
    /// Builds a string from UTF-16 code units, as text when they are well-formed.
    pub fn from_units(units: Vec<u16>) -> Self {
        match String::from_utf16(&units) {
            Ok(text) => JsString::Text(text),
            Err(_) => JsString::Units(units),
        }
    }

    /// The text, unless the string holds a lone surrogate.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            JsString::Text(text) => Some(text),
            JsString::Units(_) => None,
        }
    }

    /// The UTF-16 code units.
    pub fn to_units(&self) -> Vec<u16> {
        match self {
            JsString::Text(text) => text.encode_utf16().collect(),
            JsString::Units(units) => units.clone(),
        }
    }

    /// JS `.length`.
    pub fn utf16_len(&self) -> usize {
        match self {
            JsString::Text(text) => utf16_len(text),
            JsString::Units(units) => units.len(),
        }
    }

    /// `Buffer.byteLength(s, "utf8")` (a lone surrogate counts 3 bytes, as U+FFFD).
    pub fn utf8_len(&self) -> usize {
        match self {
            JsString::Text(text) => text.len(),
            JsString::Units(units) => units_utf8_len(units),
        }
    }

    /// The array index this string denotes as an object key, if any.
    pub fn array_index(&self) -> Option<u32> {
        match self {
            JsString::Text(text) => array_index(text),
            JsString::Units(units) => array_index_units(units),
        }
    }
}

impl Default for JsString {
    fn default() -> Self {
        JsString::Text(String::new())
    }
}

impl From<&str> for JsString {
    fn from(s: &str) -> Self {
        JsString::Text(s.to_owned())
    }
}

impl From<String> for JsString {
    fn from(s: String) -> Self {
        JsString::Text(s)
    }
}

/// A JSON value with JS semantics: numbers are doubles, objects keep their members as an
/// ordered list (the parser yields them in JS own-property order; the writer applies that
/// order to hand-built objects too).
#[derive(Clone, Debug, PartialEq)]
pub enum JsValue {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// A double (may be non-finite; stringified as `null`).
    Number(f64),
    /// A string.
    String(JsString),
    /// An array.
    Array(Vec<JsValue>),
    /// An object: members in order, keys unique.
    Object(Vec<(JsString, JsValue)>),
}

impl JsValue {
    /// The member `key` of an object.
    pub fn get(&self, key: &str) -> Option<&JsValue> {
        match self {
            JsValue::Object(members) => members
                .iter()
                .find(|(k, _)| k.as_str() == Some(key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// The value as `JSON.stringify` prints it: a non-finite number (a literal beyond the
    /// double range parses to an infinity) as `null`.
    pub fn printed(&self) -> JsValue {
        match self {
            JsValue::Number(x) if !x.is_finite() => JsValue::Null,
            JsValue::Array(items) => JsValue::Array(items.iter().map(JsValue::printed).collect()),
            JsValue::Object(members) => JsValue::Object(
                members
                    .iter()
                    .map(|(k, v)| (k.clone(), v.printed()))
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    /// `JSON.stringify(self)`.
    pub fn to_json(&self) -> String {
        stringify(self)
    }

    /// `JSON.stringify(self, null, indent)`.
    pub fn to_json_pretty(&self, indent: usize) -> String {
        stringify_pretty(self, indent)
    }

    /// `JSON.stringify(self).length`, without building the text.
    pub fn json_len(&self) -> usize {
        stringify_len(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Lines [39, 92, 51, 38, 48, 168, 13, 9, 29] of conformance/json/json-stringify.jsonl:
    // (input, stringify, length, pretty, prettyLength, utf8Bytes)
    const CONFORMANCE: &[(&str, &str, usize, &str, usize, usize)] = &[
        (
            "[[],\"\\udfff\\u0085\\u00a0x y\\ud800\u{feff}123\",\"\u{a0}\\u0085abcslash/\",\"\\u0016\u{7f}\\u000fx y{}[]\"]",
            "[[],\"\\udfff\u{85}\u{a0}x y\\ud800\u{feff}123\",\"\u{a0}\u{85}abcslash/\",\"\\u0016\u{7f}\\u000fx y{}[]\"]",
            65,
            "[\n  [],\n  \"\\udfff\u{85}\u{a0}x y\\ud800\u{feff}123\",\n  \"\u{a0}\u{85}abcslash/\",\n  \"\\u0016\u{7f}\\u000fx y{}[]\"\n]",
            78,
            71,
        ),
        (
            "[{\"\u{1f600}\":-1,\"1\":{\"1\":{},\"01\":3.14159,\"4294967295\":1.23e+5,\"\u{1f600}\":[1e-6],\"4294967296\":{},\"2\":0.0000001},\"4294967294\":-0,\"4294967296\":1e20,\"__proto__\":\"\\u001f:,\\r\\nZZZ\"},0.000009]",
            "[{\"1\":{\"1\":{},\"2\":1e-7,\"01\":3.14159,\"4294967295\":123000,\"\u{1f600}\":[0.000001],\"4294967296\":{}},\"4294967294\":0,\"\u{1f600}\":-1,\"4294967296\":100000000000000000000,\"__proto__\":\"\\u001f:,\\r\\nZZZ\"},0.000009]",
            187,
            "[\n  {\n    \"1\": {\n      \"1\": {},\n      \"2\": 1e-7,\n      \"01\": 3.14159,\n      \"4294967295\": 123000,\n      \"\u{1f600}\": [\n        0.000001\n      ],\n      \"4294967296\": {}\n    },\n    \"4294967294\": 0,\n    \"\u{1f600}\": -1,\n    \"4294967296\": 100000000000000000000,\n    \"__proto__\": \"\\u001f:,\\r\\nZZZ\"\n  },\n  0.000009\n]",
            296,
            191,
        ),
        (
            "{\"4294967296\":1e400}",
            "{\"4294967296\":null}",
            19,
            "{\n  \"4294967296\": null\n}",
            24,
            19,
        ),
        (
            "[false,{},{\"4294967296\":123e-20,\"1\":true,\"\u{e9}\":[\"123\\u2028quote\\\"qhello\"],\"z\":1e20,\"__proto__\":[1e-7,1763681630793,[1,9007199254740993]],\"1.5\":-947254},\"\u{1f600}\"]",
            "[false,{},{\"1\":true,\"4294967296\":1.23e-18,\"\u{e9}\":[\"123\u{2028}quote\\\"qhello\"],\"z\":100000000000000000000,\"__proto__\":[1e-7,1763681630793,[1,9007199254740992]],\"1.5\":-947254},\"\u{1f600}\"]",
            168,
            "[\n  false,\n  {},\n  {\n    \"1\": true,\n    \"4294967296\": 1.23e-18,\n    \"\u{e9}\": [\n      \"123\u{2028}quote\\\"qhello\"\n    ],\n    \"z\": 100000000000000000000,\n    \"__proto__\": [\n      1e-7,\n      1763681630793,\n      [\n        1,\n        9007199254740992\n      ]\n    ],\n    \"1.5\": -947254\n  },\n  \"\u{1f600}\"\n]",
            283,
            173,
        ),
        ("\"\u{2028}\"", "\"\u{2028}\"", 3, "\"\u{2028}\"", 3, 5),
        (
            "[0.000001,\"\u{e9}slash/\u{e9}\\u001ahello\\u0004\",2e-9,\"\\u00a0\\u007f{}[]\\u001b{}[]back\\\\slash\\u007fnl\\nx\"]",
            "[0.000001,\"\u{e9}slash/\u{e9}\\u001ahello\\u0004\",2e-9,\"\u{a0}\u{7f}{}[]\\u001b{}[]back\\\\slash\u{7f}nl\\nx\"]",
            79,
            "[\n  0.000001,\n  \"\u{e9}slash/\u{e9}\\u001ahello\\u0004\",\n  2e-9,\n  \"\u{a0}\u{7f}{}[]\\u001b{}[]back\\\\slash\u{7f}nl\\nx\"\n]",
            92,
            82,
        ),
        (
            "123456789012345678901",
            "123456789012345680000",
            21,
            "123456789012345680000",
            21,
            21,
        ),
        ("0.0000001", "1e-7", 4, "1e-7", 4, 4),
        ("-0.0", "0", 1, "0", 1, 1),
    ];

    #[test]
    fn reproduces_conformance_lines() {
        for (input, compact, length, pretty, pretty_length, utf8_bytes) in CONFORMANCE {
            let value = match parse(input) {
                Ok(v) => v,
                Err(e) => panic!("{input:?}: {e}"),
            };
            assert_eq!(value.to_json(), *compact, "stringify {input:?}");
            assert_eq!(value.json_len(), *length, "length {input:?}");
            assert_eq!(utf16_len(compact), *length, "vector length {input:?}");
            assert_eq!(value.to_json_pretty(2), *pretty, "pretty {input:?}");
            assert_eq!(utf16_len(pretty), *pretty_length, "pretty length {input:?}");
            assert_eq!(compact.len(), *utf8_bytes, "utf8 bytes {input:?}");
            // The output parses back to itself.
            let again = parse(compact).map(|v| v.to_json());
            assert_eq!(again.as_deref(), Ok(*compact), "round trip {input:?}");
        }
    }

    #[test]
    fn js_strings() {
        let lone = JsString::from_units(vec![0x61, 0xD800]);
        assert_eq!(lone.as_str(), None);
        assert_eq!(lone.utf16_len(), 2);
        assert_eq!(lone.utf8_len(), 4);
        let text = JsString::from_units("a😀".encode_utf16().collect());
        assert_eq!(text, JsString::from("a😀"));
        assert_eq!(text.utf16_len(), 3);
        assert_eq!(text.utf8_len(), 5);
        assert_eq!(JsString::from("7").array_index(), Some(7));
        assert_eq!(lone.array_index(), None);
    }

    #[test]
    fn value_accessors() {
        let value = JsValue::Object(vec![("a".into(), JsValue::Bool(true))]);
        assert_eq!(value.get("a"), Some(&JsValue::Bool(true)));
        assert_eq!(value.get("b"), None);
        assert_eq!(JsValue::Null.get("a"), None);
    }
}

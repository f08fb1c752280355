//! `JSON.stringify` output: a streaming [`JsonWriter`] (compact or indented) shared by the
//! [`JsValue`] writer and the Python bindings, plus the length counters.

use super::escape;
use super::order::{is_js_ordered, js_key_order};
use super::{JsString, JsValue};
use crate::js::format_json_number;

/// Largest integer magnitude printed through the integer fast path (2^53).
const EXACT_INT_LIMIT: f64 = 9_007_199_254_740_992.0;

/// Appends the decimal digits of `value`.
pub fn write_int(out: &mut Vec<u8>, value: i64) {
    let mut buf = [0u8; 20];
    let mut n = value.unsigned_abs();
    let mut start = buf.len();
    loop {
        start -= 1;
        buf[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if value < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(buf.get(start..).unwrap_or_default());
}

/// Length of the decimal form of `value`.
#[inline]
pub fn int_len(value: i64) -> usize {
    let digits = value.unsigned_abs().checked_ilog10().unwrap_or(0) as usize + 1;
    usize::from(value < 0) + digits
}

/// The value as an `i64` when it is an integer printed as plain digits by JS.
#[inline]
fn as_exact_int(x: f64) -> Option<i64> {
    if x.abs() <= EXACT_INT_LIMIT && x.fract() == 0.0 {
        // In range and integral: the conversion is exact (and maps -0 to 0).
        Some(x as i64)
    } else {
        None
    }
}

/// Appends a number as `JSON.stringify` prints it (non-finite -> `null`, `-0` -> `0`).
pub fn write_number(out: &mut Vec<u8>, x: f64) {
    match as_exact_int(x) {
        Some(i) => write_int(out, i),
        None => out.extend_from_slice(format_json_number(x).as_bytes()),
    }
}

/// Whether the text `JSON.stringify` prints for `x` has a fraction or an exponent, so a
/// reader that keeps integers apart from doubles (Python's) reads it back as this double
/// (the text is the shortest that reads back as `x`); `false` for a text of digits only,
/// read back as an integer (`1.0`, `-0.0`, `1e20`), and for `null` (not finite).
pub fn number_reads_back_as_double(x: f64) -> bool {
    x.is_finite()
        && as_exact_int(x).is_none()
        && format_json_number(x)
            .bytes()
            .any(|b| b == b'.' || b == b'e')
}

/// Length of a number as `JSON.stringify` prints it.
pub fn number_len(x: f64) -> usize {
    match as_exact_int(x) {
        Some(i) => int_len(i),
        None if x.is_finite() => ryu_js::Buffer::new().format_finite(x).len(),
        None => "null".len(),
    }
}

/// The largest indentation `JSON.stringify` honours.
pub const MAX_INDENT: usize = 10;

/// A position in a [`JsonWriter`] to roll back to.
#[derive(Clone, Copy, Debug)]
pub struct Mark {
    len: usize,
    depth: usize,
}

/// Streaming `JSON.stringify` output. The caller drives the structure:
/// `begin_object`, then per member `element(first)` + `key_*` + a value, then
/// `end_object(empty)`; arrays alike without keys.
#[derive(Debug, Default)]
pub struct JsonWriter {
    out: Vec<u8>,
    indent: usize,
    depth: usize,
}

impl JsonWriter {
    /// A writer with `JSON.stringify(v, null, indent)` layout (0 = compact; clamped to 10).
    pub fn new(indent: usize) -> Self {
        Self::with_capacity(indent, 0)
    }

    /// [`JsonWriter::new`] with a preallocated buffer.
    pub fn with_capacity(indent: usize, capacity: usize) -> Self {
        JsonWriter {
            out: Vec::with_capacity(capacity),
            indent: indent.min(MAX_INDENT),
            depth: 0,
        }
    }

    /// [`JsonWriter::new`] writing into `buffer` (cleared first), to reuse its capacity.
    pub fn from_buffer(indent: usize, mut buffer: Vec<u8>) -> Self {
        buffer.clear();
        JsonWriter {
            out: buffer,
            indent: indent.min(MAX_INDENT),
            depth: 0,
        }
    }

    /// The UTF-8 text written so far.
    pub fn as_bytes(&self) -> &[u8] {
        &self.out
    }

    /// The buffer, to reuse with [`JsonWriter::from_buffer`].
    pub fn into_buffer(self) -> Vec<u8> {
        self.out
    }

    /// The finished text.
    pub fn into_string(self) -> String {
        // Everything written is UTF-8 (strings are copied from `&str` or encoded from
        // chars); the lossy branch is never taken.
        String::from_utf8(self.out)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }

    /// The current position, for [`JsonWriter::reset`].
    pub fn mark(&self) -> Mark {
        Mark {
            len: self.out.len(),
            depth: self.depth,
        }
    }

    /// Discards everything written after `mark`.
    pub fn reset(&mut self, mark: Mark) {
        self.out.truncate(mark.len);
        self.depth = mark.depth;
    }

    fn newline(&mut self) {
        self.out.push(b'\n');
        let width = self.out.len() + self.depth * self.indent;
        self.out.resize(width, b' ');
    }

    /// Ends a line of JSON Lines text (after a compact value; nothing is open).
    pub fn end_line(&mut self) {
        self.out.push(b'\n');
    }

    /// `null`.
    pub fn null(&mut self) {
        self.out.extend_from_slice(b"null");
    }

    /// `true` / `false`.
    pub fn bool(&mut self, b: bool) {
        self.out
            .extend_from_slice(if b { b"true" } else { b"false" });
    }

    /// A number (JS formatting; non-finite -> `null`).
    pub fn number(&mut self, x: f64) {
        write_number(&mut self.out, x);
    }

    /// An integer printed with all its digits (the caller keeps it within +-2^53).
    pub fn int(&mut self, i: i64) {
        write_int(&mut self.out, i);
    }

    /// A string value.
    pub fn str(&mut self, s: &str) {
        escape::write_str(&mut self.out, s);
    }

    /// A string value given as UTF-16 code units.
    pub fn units(&mut self, units: &[u16]) {
        escape::write_units(&mut self.out, units);
    }

    /// A [`JsString`] value.
    pub fn js_string(&mut self, s: &JsString) {
        match s {
            JsString::Text(text) => self.str(text),
            JsString::Units(units) => self.units(units),
        }
    }

    fn key_separator(&mut self) {
        self.out
            .extend_from_slice(if self.indent > 0 { b": " } else { b":" });
    }

    /// An object key followed by its separator.
    pub fn key_str(&mut self, key: &str) {
        self.str(key);
        self.key_separator();
    }

    /// An object key given as UTF-16 code units, followed by its separator.
    pub fn key_units(&mut self, key: &[u16]) {
        self.units(key);
        self.key_separator();
    }

    /// A [`JsString`] object key followed by its separator.
    pub fn key_js(&mut self, key: &JsString) {
        self.js_string(key);
        self.key_separator();
    }

    /// `{`.
    pub fn begin_object(&mut self) {
        self.out.push(b'{');
        self.depth += 1;
    }

    /// `[`.
    pub fn begin_array(&mut self) {
        self.out.push(b'[');
        self.depth += 1;
    }

    /// Before each member or element: the `,` (unless first) and the line break.
    pub fn element(&mut self, first: bool) {
        if !first {
            self.out.push(b',');
        }
        if self.indent > 0 {
            self.newline();
        }
    }

    fn end(&mut self, close: u8, empty: bool) {
        self.depth = self.depth.saturating_sub(1);
        if self.indent > 0 && !empty {
            self.newline();
        }
        self.out.push(close);
    }

    /// `}`; `empty` when no member was written.
    pub fn end_object(&mut self, empty: bool) {
        self.end(b'}', empty);
    }

    /// `]`; `empty` when no element was written.
    pub fn end_array(&mut self, empty: bool) {
        self.end(b']', empty);
    }

    /// Writes a whole [`JsValue`]; object members go out in JS key order. Iterative: deep
    /// values cannot overflow the stack.
    pub fn value(&mut self, value: &JsValue) {
        /// Items of an open container still to write.
        enum Rest<'a> {
            Items(std::slice::Iter<'a, JsValue>, bool),
            Members(&'a [(JsString, JsValue)], std::vec::IntoIter<usize>, bool),
        }
        let mut stack: Vec<Rest<'_>> = Vec::new();
        let mut pending = Some(value);
        loop {
            if let Some(v) = pending.take() {
                match v {
                    JsValue::Null => self.null(),
                    JsValue::Bool(b) => self.bool(*b),
                    JsValue::Number(x) => self.number(*x),
                    JsValue::String(s) => self.js_string(s),
                    JsValue::Array(items) => {
                        self.begin_array();
                        stack.push(Rest::Items(items.iter(), true));
                    }
                    JsValue::Object(members) => {
                        self.begin_object();
                        let indices: Vec<Option<u32>> =
                            members.iter().map(|(k, _)| k.array_index()).collect();
                        let order = if is_js_ordered(&indices) {
                            (0..members.len()).collect()
                        } else {
                            js_key_order(&indices)
                        };
                        stack.push(Rest::Members(members, order.into_iter(), true));
                    }
                }
            }
            let Some(top) = stack.last_mut() else {
                return;
            };
            match top {
                Rest::Items(items, first) => match items.next() {
                    Some(item) => {
                        self.element(*first);
                        *first = false;
                        pending = Some(item);
                    }
                    None => {
                        let empty = *first;
                        stack.pop();
                        self.end_array(empty);
                    }
                },
                Rest::Members(members, order, first) => {
                    match order.next().and_then(|i| members.get(i)) {
                        Some((key, item)) => {
                            self.element(*first);
                            *first = false;
                            self.key_js(key);
                            pending = Some(item);
                        }
                        None => {
                            let empty = *first;
                            stack.pop();
                            self.end_object(empty);
                        }
                    }
                }
            }
        }
    }
}

/// `JSON.stringify(value)`.
pub fn stringify(value: &JsValue) -> String {
    stringify_pretty(value, 0)
}

/// `JSON.stringify(value, null, indent)` (indent clamped to 10; 0 = compact).
pub fn stringify_pretty(value: &JsValue, indent: usize) -> String {
    let mut writer = JsonWriter::new(indent);
    writer.value(value);
    writer.into_string()
}

/// UTF-16 length of a quoted, escaped [`JsString`].
pub fn js_string_len(s: &JsString) -> usize {
    match s {
        JsString::Text(text) => escape::str_len(text),
        JsString::Units(units) => escape::units_len(units),
    }
}

/// `JSON.stringify(value).length` (UTF-16 code units), without building the text.
pub fn stringify_len(value: &JsValue) -> usize {
    // Member order does not change the length: a plain worklist will do.
    let mut total = 0;
    let mut work = vec![value];
    while let Some(v) = work.pop() {
        total += match v {
            JsValue::Null => 4,
            JsValue::Bool(true) => 4,
            JsValue::Bool(false) => 5,
            JsValue::Number(x) => number_len(*x),
            JsValue::String(s) => js_string_len(s),
            JsValue::Array(items) => {
                work.extend(items);
                2 + items.len().saturating_sub(1)
            }
            JsValue::Object(members) => {
                work.extend(members.iter().map(|(_, v)| v));
                2 + members.len().saturating_sub(1)
                    + members
                        .iter()
                        .map(|(k, _)| js_string_len(k) + 1)
                        .sum::<usize>()
            }
        };
    }
    total
}

/// Writes into `shape` (as long as `text`) the whitespace shape of JSON Lines `text`: every
/// byte a space but the newlines, which stay. An append reserves its room with this shape
/// before writing the lines over it, so a reader never meets half a line.
pub fn blank_lines(text: &[u8], shape: &mut [u8]) {
    let n = text.len().min(shape.len());
    let (text, shape) = (&text[..n], &mut shape[..n]);
    for (out, &byte) in shape.iter_mut().zip(text) {
        // Branch-free, so that the loop is vectorized: 0x20 for any byte, 0x0a for 0x0a.
        *out = b' ' ^ (u8::from(byte == b'\n') * (b' ' ^ b'\n'));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(members: Vec<(&str, JsValue)>) -> JsValue {
        JsValue::Object(members.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }

    #[test]
    fn blank_lines_keeps_only_the_newlines() {
        let text = "{\"a\":\"\u{e9}\"}\n[1]\n\n x".as_bytes();
        let mut shape = vec![0u8; text.len()];
        blank_lines(text, &mut shape);
        // `{"a":"é"}` is ten bytes (the é two): ten spaces, then the newlines kept.
        let want = format!("{}\n{}\n\n{}", " ".repeat(10), " ".repeat(3), " ".repeat(2));
        assert_eq!(shape, want.as_bytes());
        let mut empty: [u8; 0] = [];
        blank_lines(b"", &mut empty);
    }

    #[test]
    fn formats_integers() {
        for (i, want) in [
            (0i64, "0"),
            (7, "7"),
            (-1, "-1"),
            (1763681630793, "1763681630793"),
            (i64::MIN, "-9223372036854775808"),
            (i64::MAX, "9223372036854775807"),
        ] {
            let mut out = Vec::new();
            write_int(&mut out, i);
            assert_eq!(out, want.as_bytes());
            assert_eq!(int_len(i), want.len());
        }
    }

    #[test]
    fn formats_numbers() {
        for (x, want) in [
            (-0.0, "0"),
            (1.0, "1"),
            (9007199254740992.0, "9007199254740992"),
            (12345678901234567000.0, "12345678901234567000"),
            (1e21, "1e+21"),
            (1.23e-7, "1.23e-7"),
            (f64::INFINITY, "null"),
            (f64::NAN, "null"),
            (0.30000000000000004, "0.30000000000000004"),
        ] {
            let mut out = Vec::new();
            write_number(&mut out, x);
            assert_eq!(out, want.as_bytes(), "number {x:e}");
            assert_eq!(number_len(x), want.len());
        }
    }

    #[test]
    fn tells_numbers_read_back_as_doubles() {
        for (x, double) in [
            (1.5, true),
            (-0.25, true),
            (0.30000000000000004, true),
            (1.23e-7, true),
            (5e-324, true),
            (1e21, true),
            (-1.7976931348623157e308, true),
            (1.0, false),
            (-0.0, false),
            (0.0, false),
            (9007199254740993.0, false),
            (1e20, false),
            (12345678901234567000.0, false),
            (f64::INFINITY, false),
            (f64::NEG_INFINITY, false),
            (f64::NAN, false),
        ] {
            assert_eq!(number_reads_back_as_double(x), double, "number {x:e}");
            let mut out = Vec::new();
            write_number(&mut out, x);
            let text = String::from_utf8(out).unwrap_or_default();
            let has_fraction = text.contains('.') || text.contains('e');
            assert_eq!(has_fraction, double, "{text}");
            if double {
                assert_eq!(text.parse::<f64>().ok(), Some(x), "{text}");
            }
        }
    }

    #[test]
    fn ends_lines() {
        let mut w = JsonWriter::new(0);
        w.value(&JsValue::Number(1.0));
        w.end_line();
        w.value(&JsValue::Array(vec![]));
        w.end_line();
        assert_eq!(w.as_bytes(), b"1\n[]\n");
    }

    #[test]
    fn writes_compact_and_pretty() {
        let value = obj(vec![
            ("b", JsValue::Number(1.0)),
            ("2", JsValue::Array(vec![])),
            (
                "a",
                JsValue::Array(vec![JsValue::Null, JsValue::Bool(true)]),
            ),
            ("01", obj(vec![])),
        ]);
        assert_eq!(
            stringify(&value),
            r#"{"2":[],"b":1,"a":[null,true],"01":{}}"#
        );
        assert_eq!(stringify_len(&value), 38);
        assert_eq!(
            stringify_pretty(&value, 2),
            "{\n  \"2\": [],\n  \"b\": 1,\n  \"a\": [\n    null,\n    true\n  ],\n  \"01\": {}\n}"
        );
        assert_eq!(stringify_pretty(&value, 0), stringify(&value));
        assert_eq!(
            stringify_pretty(&JsValue::Array(vec![JsValue::Bool(false)]), 20),
            "[\n          false\n]"
        );
    }

    #[test]
    fn writer_rolls_back() {
        let mut w = JsonWriter::new(2);
        w.begin_array();
        let mark = w.mark();
        w.element(true);
        w.begin_object();
        w.reset(mark);
        w.end_array(true);
        assert_eq!(w.as_bytes(), b"[]");
        let mut again = JsonWriter::from_buffer(0, w.into_buffer());
        again.bool(true);
        assert_eq!(again.into_string(), "true");
    }
}

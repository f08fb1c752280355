//! A parser accepting exactly the grammar of `JSON.parse` (ECMA-404): JSON whitespace only
//! (space, tab, LF, CR), no trailing commas, no comments, no `NaN`/`Infinity` literals,
//! numbers read as doubles (`1e400` -> Infinity, big integers lose precision), escaped lone
//! surrogates kept, duplicate keys resolved as JS does (last value, first position).

use std::collections::HashMap;
use std::fmt;

use super::order::{is_js_ordered, js_key_order};
use super::{JsString, JsValue, MAX_DEPTH};

/// Why and where a text is not valid JSON.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// Byte offset into the text where the problem was found.
    pub offset: usize,
    /// What is wrong.
    pub message: String,
}

impl ParseError {
    /// (line, column) of the error, both 1-based, the column counted in code points.
    pub fn line_column(&self, text: &str) -> (usize, usize) {
        let before = text.get(..self.offset).unwrap_or(text);
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before.get(line_start..).map_or(0, |s| s.chars().count()) + 1;
        (line, column)
    }

    /// Offset of the error in code points (a Python string index).
    pub fn char_offset(&self, text: &str) -> usize {
        text.get(..self.offset).unwrap_or(text).chars().count()
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.message, self.offset)
    }
}

impl std::error::Error for ParseError {}

/// `JSON.parse(text)`.
pub fn parse(text: &str) -> Result<JsValue, ParseError> {
    let mut parser = Parser {
        text,
        bytes: text.as_bytes(),
        pos: 0,
    };
    parser.skip_ws();
    let value = parser.value()?;
    parser.skip_ws();
    if parser.pos < parser.bytes.len() {
        return Err(parser.unexpected("Unexpected non-whitespace character after JSON"));
    }
    Ok(value)
}

/// A string being decoded: text until a lone surrogate shows up, code units afterwards.
enum StrBuf {
    Text(String),
    Units(Vec<u16>),
}

impl StrBuf {
    fn push_str(&mut self, s: &str) {
        match self {
            StrBuf::Text(text) => text.push_str(s),
            StrBuf::Units(units) => units.extend(s.encode_utf16()),
        }
    }

    fn push_char(&mut self, c: char) {
        match self {
            StrBuf::Text(text) => text.push(c),
            StrBuf::Units(units) => {
                let mut buf = [0u16; 2];
                units.extend_from_slice(c.encode_utf16(&mut buf));
            }
        }
    }

    fn push_lone_surrogate(&mut self, unit: u16) {
        if let StrBuf::Text(text) = self {
            *self = StrBuf::Units(text.encode_utf16().collect());
        }
        if let StrBuf::Units(units) = self {
            units.push(unit);
        }
    }

    fn finish(self) -> JsString {
        match self {
            StrBuf::Text(text) => JsString::Text(text),
            // A later escape may have completed a pair; from_units re-checks.
            StrBuf::Units(units) => JsString::from_units(units),
        }
    }
}

/// An array or object being parsed.
enum Open {
    Array(Vec<JsValue>),
    Object {
        members: Vec<(JsString, JsValue)>,
        lookup: Option<HashMap<JsString, usize>>,
        /// The key whose value is being parsed.
        key: JsString,
    },
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn error(&self, offset: usize, message: &str) -> ParseError {
        ParseError {
            offset,
            message: message.to_owned(),
        }
    }

    fn unexpected(&self, context: &str) -> ParseError {
        match self
            .text
            .get(self.pos..)
            .and_then(|rest| rest.chars().next())
        {
            None => self.error(self.pos, "Unexpected end of JSON input"),
            Some(c) => self.error(self.pos, &format!("{context}: unexpected token {c:?}")),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    /// Parses one value. Containers are kept on a heap stack, not the call stack, so deep
    /// nesting cannot overflow a (thread's) stack.
    fn value(&mut self) -> Result<JsValue, ParseError> {
        let mut stack: Vec<Open> = Vec::new();
        loop {
            // A value starts here (after optional whitespace).
            self.skip_ws();
            let mut value = match self.peek() {
                Some(open @ (b'{' | b'[')) => {
                    if stack.len() >= MAX_DEPTH {
                        return Err(self
                            .error(self.pos, &format!("Nesting deeper than {MAX_DEPTH} levels")));
                    }
                    self.pos += 1;
                    self.skip_ws();
                    if open == b'[' {
                        if self.peek() == Some(b']') {
                            self.pos += 1;
                            JsValue::Array(Vec::new())
                        } else {
                            stack.push(Open::Array(Vec::new()));
                            continue;
                        }
                    } else if self.peek() == Some(b'}') {
                        self.pos += 1;
                        JsValue::Object(Vec::new())
                    } else {
                        let key = self.member_key()?;
                        stack.push(Open::Object {
                            members: Vec::new(),
                            lookup: None,
                            key,
                        });
                        continue;
                    }
                }
                Some(b'"') => JsValue::String(self.string()?),
                Some(b't') => self.literal("true", JsValue::Bool(true))?,
                Some(b'f') => self.literal("false", JsValue::Bool(false))?,
                Some(b'n') => self.literal("null", JsValue::Null)?,
                Some(b'-' | b'0'..=b'9') => self.number()?,
                _ => return Err(self.unexpected("Expected a JSON value")),
            };
            // Hand the value to the innermost open container, closing containers that end.
            loop {
                let Some(top) = stack.last_mut() else {
                    return Ok(value);
                };
                self.skip_ws();
                let next = self.peek();
                match top {
                    Open::Array(items) => {
                        items.push(value);
                        match next {
                            Some(b',') => {
                                self.pos += 1;
                                break;
                            }
                            Some(b']') => self.pos += 1,
                            _ => {
                                return Err(
                                    self.unexpected("Expected ',' or ']' after array element")
                                )
                            }
                        }
                    }
                    Open::Object {
                        members,
                        lookup,
                        key,
                    } => {
                        insert_member(members, lookup, std::mem::take(key), value);
                        match next {
                            Some(b',') => {
                                self.pos += 1;
                                self.skip_ws();
                                *key = self.member_key()?;
                                break;
                            }
                            Some(b'}') => self.pos += 1,
                            _ => {
                                return Err(
                                    self.unexpected("Expected ',' or '}' after property value")
                                )
                            }
                        }
                    }
                }
                // The container just closed: it is the value to hand upwards.
                value = match stack.pop() {
                    Some(Open::Array(items)) => JsValue::Array(items),
                    Some(Open::Object { members, .. }) => JsValue::Object(in_js_order(members)),
                    // Unreachable: `top` was on the stack.
                    None => return Err(self.error(self.pos, "Unbalanced JSON")),
                };
            }
        }
    }

    /// A property name and its `:`, the position at the opening quote.
    fn member_key(&mut self) -> Result<JsString, ParseError> {
        if self.peek() != Some(b'"') {
            return Err(self.unexpected("Expected a double-quoted property name"));
        }
        let key = self.string()?;
        self.skip_ws();
        if self.peek() != Some(b':') {
            return Err(self.unexpected("Expected ':' after property name"));
        }
        self.pos += 1;
        Ok(key)
    }

    fn literal(&mut self, word: &str, value: JsValue) -> Result<JsValue, ParseError> {
        let end = self.pos + word.len();
        if self.bytes.get(self.pos..end) == Some(word.as_bytes()) {
            self.pos = end;
            Ok(value)
        } else {
            Err(self.unexpected("Expected a JSON value"))
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
        self.pos - start
    }

    fn number(&mut self) -> Result<JsValue, ParseError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(self.unexpected("No number after minus sign")),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if self.digits() == 0 {
                return Err(self.unexpected("Unterminated fractional number"));
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return Err(self.unexpected("Exponent part is missing a number"));
            }
        }
        let literal = self.text.get(start..self.pos).unwrap_or("");
        // Rust's float parsing rounds correctly and overflows to infinity, like JS.
        literal
            .parse::<f64>()
            .map(JsValue::Number)
            .map_err(|_| self.error(start, "Invalid number"))
    }

    fn hex4(&self, at: usize) -> Option<u16> {
        let digits = self.bytes.get(at..at + 4)?;
        let mut value = 0u16;
        for &d in digits {
            value = value * 16 + u16::from(char::from(d).to_digit(16)? as u8);
        }
        Some(value)
    }

    fn string(&mut self) -> Result<JsString, ParseError> {
        let open = self.pos;
        self.pos += 1;
        let mut run_start = self.pos;
        let mut buf: Option<StrBuf> = None;
        loop {
            let Some(byte) = self.peek() else {
                return Err(self.error(open, "Unterminated string in JSON"));
            };
            match byte {
                b'"' => {
                    let run = self.text.get(run_start..self.pos).unwrap_or("");
                    self.pos += 1;
                    return Ok(match buf {
                        None => JsString::Text(run.to_owned()),
                        Some(mut b) => {
                            b.push_str(run);
                            b.finish()
                        }
                    });
                }
                b'\\' => {
                    let run = self.text.get(run_start..self.pos).unwrap_or("");
                    let b = buf.get_or_insert_with(|| StrBuf::Text(String::new()));
                    b.push_str(run);
                    let escape_at = self.pos;
                    let Some(kind) = self.bytes.get(self.pos + 1).copied() else {
                        return Err(self.error(open, "Unterminated string in JSON"));
                    };
                    self.pos += 2;
                    let simple = match kind {
                        b'"' => Some('"'),
                        b'\\' => Some('\\'),
                        b'/' => Some('/'),
                        b'b' => Some('\u{8}'),
                        b'f' => Some('\u{c}'),
                        b'n' => Some('\n'),
                        b'r' => Some('\r'),
                        b't' => Some('\t'),
                        _ => None,
                    };
                    if let Some(c) = simple {
                        b.push_char(c);
                    } else if kind == b'u' {
                        let Some(unit) = self.hex4(self.pos) else {
                            return Err(self.error(escape_at, "Bad Unicode escape in JSON"));
                        };
                        self.pos += 4;
                        let low = if (0xD800..0xDC00).contains(&unit)
                            && self.bytes.get(self.pos..self.pos + 2) == Some(b"\\u")
                        {
                            self.hex4(self.pos + 2)
                                .filter(|low| (0xDC00..0xE000).contains(low))
                        } else {
                            None
                        };
                        if let Some(low) = low {
                            self.pos += 6;
                            let code = 0x10000
                                + ((u32::from(unit) - 0xD800) << 10)
                                + (u32::from(low) - 0xDC00);
                            b.push_char(char::from_u32(code).unwrap_or('\u{FFFD}'));
                        } else if let Some(c) = char::from_u32(u32::from(unit)) {
                            b.push_char(c);
                        } else {
                            b.push_lone_surrogate(unit);
                        }
                    } else {
                        return Err(self.error(escape_at, "Bad escaped character in JSON"));
                    }
                    run_start = self.pos;
                }
                0..=0x1F => {
                    return Err(
                        self.error(self.pos, "Bad control character in string literal in JSON")
                    );
                }
                _ => self.pos += 1,
            }
        }
    }
}

/// Adds a member the way `JSON.parse` does: a repeated key keeps its first position and
/// takes the last value.
fn insert_member(
    members: &mut Vec<(JsString, JsValue)>,
    lookup: &mut Option<HashMap<JsString, usize>>,
    key: JsString,
    value: JsValue,
) {
    const LINEAR_LIMIT: usize = 16;
    if lookup.is_none() && members.len() >= LINEAR_LIMIT {
        *lookup = Some(
            members
                .iter()
                .enumerate()
                .map(|(i, (k, _))| (k.clone(), i))
                .collect(),
        );
    }
    let existing = match lookup {
        Some(map) => map.get(&key).copied(),
        None => members.iter().position(|(k, _)| *k == key),
    };
    match existing.and_then(|i| members.get_mut(i)) {
        Some(slot) => slot.1 = value,
        None => {
            if let Some(map) = lookup {
                map.insert(key.clone(), members.len());
            }
            members.push((key, value));
        }
    }
}

/// Reorders parsed members into JS own-property order (index keys first, ascending).
fn in_js_order(members: Vec<(JsString, JsValue)>) -> Vec<(JsString, JsValue)> {
    let indices: Vec<Option<u32>> = members.iter().map(|(k, _)| k.array_index()).collect();
    if is_js_ordered(&indices) {
        return members;
    }
    let order = js_key_order(&indices);
    let mut slots: Vec<Option<(JsString, JsValue)>> = members.into_iter().map(Some).collect();
    order
        .into_iter()
        .filter_map(|i| slots.get_mut(i).and_then(Option::take))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> JsValue {
        match parse(text) {
            Ok(v) => v,
            Err(e) => panic!("{text:?} should parse: {e}"),
        }
    }

    #[test]
    fn parses_scalars() {
        assert_eq!(ok(" null "), JsValue::Null);
        assert_eq!(ok("true"), JsValue::Bool(true));
        assert_eq!(ok("\t\r\nfalse"), JsValue::Bool(false));
        assert_eq!(ok("-0"), JsValue::Number(-0.0));
        assert_eq!(ok("1E2"), JsValue::Number(100.0));
        assert_eq!(ok("1e400"), JsValue::Number(f64::INFINITY));
        assert_eq!(ok("-1e400"), JsValue::Number(f64::NEG_INFINITY));
        assert_eq!(ok("9007199254740993"), JsValue::Number(9007199254740992.0));
        assert_eq!(ok(r#""a\/b""#), JsValue::String("a/b".into()));
        assert_eq!(ok(r#""\ud83d\ude00\u00E9""#), JsValue::String("😀é".into()));
        assert_eq!(
            ok(r#""x\udfff\ud83d""#),
            JsValue::String(JsString::Units(vec![0x78, 0xDFFF, 0xD83D]))
        );
        assert_eq!(
            ok("\"\u{2028}\u{7f}\""),
            JsValue::String("\u{2028}\u{7f}".into())
        );
    }

    #[test]
    fn keeps_js_key_order_and_last_duplicate() {
        let v = ok(r#"{"b":1,"2":0,"a":3,"01":4,"b":5}"#);
        let JsValue::Object(members) = v else {
            panic!("object expected")
        };
        let keys: Vec<&str> = members.iter().filter_map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["2", "b", "a", "01"]);
        assert_eq!(members[1].1, JsValue::Number(5.0));

        // Past the linear-scan limit the lookup map takes over.
        let body: Vec<String> = (0..40).map(|i| format!("\"k{}\":{i}", i % 20)).collect();
        let JsValue::Object(members) = ok(&format!("{{{}}}", body.join(","))) else {
            panic!("object expected")
        };
        assert_eq!(members.len(), 20);
        assert_eq!(members[3], (JsString::from("k3"), JsValue::Number(23.0)));
    }

    #[test]
    fn rejects_what_json_parse_rejects() {
        let bad = [
            "",
            " ",
            "NaN",
            "Infinity",
            "-Infinity",
            "[1,]",
            "{\"a\":1,}",
            "01",
            "1.",
            ".5",
            "+1",
            "-",
            "1e",
            "1e+",
            "0x10",
            "'a'",
            "\"a",
            "\"\\x\"",
            "\"\\u12\"",
            "\"\t\"",
            "[1 2]",
            "{a:1}",
            "{\"a\" 1}",
            "nul",
            "truex",
            "1 2",
            "\u{feff}1",
            "\u{a0}1",
            "[1]\u{b}",
            "// c\n1",
            "\"\\\"",
        ];
        for text in bad {
            assert!(parse(text).is_err(), "{text:?} must be rejected");
        }
    }

    #[test]
    fn reports_positions() {
        let Err(e) = parse("{\"a\":\n [1,}") else {
            panic!("must fail")
        };
        assert_eq!(e.offset, 10);
        assert_eq!(e.line_column("{\"a\":\n [1,}"), (2, 5));
        assert_eq!(e.char_offset("{\"a\":\n [1,}"), 10);
        let Err(e) = parse("[\"é\",x]") else {
            panic!("must fail")
        };
        assert_eq!((e.offset, e.char_offset("[\"é\",x]")), (6, 5));
    }

    #[test]
    fn limits_depth() {
        let deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        assert!(parse(&deep).is_err());
        let ok_depth = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        assert!(parse(&ok_depth).is_ok());
    }

    #[test]
    fn deep_values_need_little_stack() {
        // Parsing, writing and measuring are iterative: a small thread stack suffices.
        let text = "{\"a\":[".repeat(MAX_DEPTH / 2) + &"]}".repeat(MAX_DEPTH / 2);
        let worker = std::thread::Builder::new()
            .stack_size(128 * 1024)
            .spawn(move || {
                let value = parse(&text).map_err(|e| e.to_string())?;
                let same = value.to_json() == text && value.json_len() == text.len();
                let pretty = value.to_json_pretty(1);
                // Dropping is recursive: hand the value back to drop it on the test thread.
                Ok::<_, String>((same, pretty.len(), value))
            });
        let result = worker.map(|handle| handle.join());
        match result {
            Ok(Ok(Ok((same, pretty_len, _value)))) => {
                assert!(same);
                assert!(pretty_len > 2 * MAX_DEPTH);
            }
            _ => panic!("deep value failed on a small stack"),
        }
    }
}

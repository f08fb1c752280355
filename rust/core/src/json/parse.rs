//! A parser accepting exactly the grammar of `JSON.parse` (ECMA-404): JSON whitespace only
//! (space, tab, LF, CR), no trailing commas, no comments, no `NaN`/`Infinity` literals,
//! escaped lone surrogates kept, duplicate keys resolved as JS does (last value, first
//! position).
//!
//! [`parse`] builds a [`JsValue`] (numbers read as doubles: `1e400` -> Infinity, big
//! integers lose precision; members in JS own-property order, nesting up to [`MAX_DEPTH`]);
//! [`parse_with`] hands the values to a [`Build`]er in text order, to any depth, numbers as
//! their literals. Either way errors say what is wrong in `JSON.parse`'s words and as an
//! [`ErrorKind`].

use std::collections::HashMap;
use std::convert::Infallible;
use std::fmt;

use super::order::{is_js_ordered, js_key_order};
use super::{JsString, JsValue, MAX_DEPTH};

/// Why and where a text is not valid JSON.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// Byte offset into the text where the problem was found.
    pub offset: usize,
    /// What is wrong, in `JSON.parse`'s words.
    pub message: String,
    /// What is wrong, for a caller that words it otherwise.
    pub kind: ErrorKind,
}

/// What is wrong with a text, with what a caller that words and places errors as another
/// parser does (Python's `json`) needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// Something other than whitespace after the value.
    TrailingData,
    /// Nesting deeper than the limit.
    TooDeep,
    /// No value where one must start (the end of the text included).
    ExpectedValue,
    /// Neither `,` nor the closing bracket after an array element or a property value.
    ExpectedComma,
    /// No `"` where a property name must start.
    ExpectedKey,
    /// No `:` after a property name.
    ExpectedColon,
    /// A `-` not followed by a digit (the offset is after the minus).
    NoNumberAfterMinus,
    /// A `.` or an exponent without digits.
    NumberCut {
        /// Byte offset of the `.` or `e`: where the longest valid number ends.
        valid_end: usize,
        /// The number is not inside an array or object.
        top_level: bool,
    },
    /// The text ends inside a string (the offset is its opening quote).
    Unterminated {
        /// The backslash of a `\uXXXX` escape the text ends right after, if it does.
        escape_at_end: Option<usize>,
    },
    /// A raw control character (below U+0020) in a string.
    ControlCharacter,
    /// A backslash followed by no escape letter (the offset is the backslash).
    BadEscape,
    /// A `\u` not followed by four hex digits (the offset is the backslash).
    BadUnicodeEscape,
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

    /// The error as Python's `json` words and places it (its `JSONDecodeError.msg` and
    /// byte offset into `text`): Python reads the longest valid number and then what
    /// follows it, reports escapes at their `u`, and a `\uXXXX` escape that ends the text
    /// as invalid. `-Infinity` keeps `JSON.parse`'s words (where `loads` reports it).
    pub fn python_json(&self, text: &str) -> (&str, usize) {
        let at = self.offset;
        match self.kind {
            ErrorKind::TrailingData => ("Extra data", at),
            ErrorKind::TooDeep | ErrorKind::ExpectedValue => ("Expecting value", at),
            ErrorKind::ExpectedComma => ("Expecting ',' delimiter", at),
            ErrorKind::ExpectedKey => ("Expecting property name enclosed in double quotes", at),
            ErrorKind::ExpectedColon => ("Expecting ':' delimiter", at),
            ErrorKind::NoNumberAfterMinus => {
                if text
                    .get(at..)
                    .is_some_and(|rest| rest.starts_with("Infinity"))
                {
                    (&self.message, at)
                } else {
                    ("Expecting value", at.saturating_sub(1))
                }
            }
            ErrorKind::NumberCut {
                valid_end,
                top_level: true,
            } => ("Extra data", valid_end),
            ErrorKind::NumberCut { valid_end, .. } => ("Expecting ',' delimiter", valid_end),
            ErrorKind::Unterminated {
                escape_at_end: Some(backslash),
            } => ("Invalid \\uXXXX escape", backslash + 1),
            ErrorKind::Unterminated { .. } => ("Unterminated string starting at", at),
            ErrorKind::ControlCharacter => ("Invalid control character at", at),
            ErrorKind::BadEscape => ("Invalid \\escape", at),
            ErrorKind::BadUnicodeEscape => ("Invalid \\uXXXX escape", at + 1),
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.message, self.offset)
    }
}

impl std::error::Error for ParseError {}

/// Why [`parse_with`] stopped: the text, or the builder.
#[derive(Debug, PartialEq, Eq)]
pub enum Failure<E> {
    /// The text is not valid JSON.
    Syntax(ParseError),
    /// The builder failed.
    Build(E),
}

impl<E> From<ParseError> for Failure<E> {
    fn from(error: ParseError) -> Self {
        Failure::Syntax(error)
    }
}

/// A number as the text spells it (the JSON number grammar holds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NumberLiteral<'a> {
    text: &'a str,
    integer: bool,
}

impl<'a> NumberLiteral<'a> {
    /// The literal.
    pub fn text(&self) -> &'a str {
        self.text
    }

    /// Without fraction or exponent.
    pub fn is_integer(&self) -> bool {
        self.integer
    }

    /// The double `JSON.parse` reads (correctly rounded; beyond the range: infinite).
    pub fn to_f64(&self) -> f64 {
        // Rust reads every literal of the grammar, rounding as JS does.
        self.text.parse().unwrap_or(f64::NAN)
    }

    /// The integer, when the literal is an integer that fits 64 bits, signed or unsigned.
    pub fn to_integer(&self) -> Option<Integer> {
        if !self.integer {
            return None;
        }
        match self.text.parse::<i64>() {
            Ok(value) => Some(Integer::Signed(value)),
            Err(_) => self.text.parse::<u64>().ok().map(Integer::Unsigned),
        }
    }
}

/// An integer literal that fits 64 bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Integer {
    /// Within `i64`.
    Signed(i64),
    /// Above `i64::MAX`, within `u64`.
    Unsigned(u64),
}

/// A value without members.
#[derive(Clone, Debug, PartialEq)]
pub enum Scalar<'a> {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// A number.
    Number(NumberLiteral<'a>),
    /// A string (escapes decoded, lone surrogates kept).
    String(JsString),
}

/// What [`parse_with`] builds values with, in text order: a container is opened, filled
/// and ended before the value after it is built.
pub trait Build {
    /// A finished value.
    type Value;
    /// An array being filled.
    type Array;
    /// An object being filled.
    type Object;
    /// Why building failed.
    type Error;

    /// A scalar value.
    fn scalar(&mut self, scalar: Scalar<'_>) -> Result<Self::Value, Self::Error>;
    /// A new, empty array.
    fn array(&mut self) -> Result<Self::Array, Self::Error>;
    /// Appends an element.
    fn push(&mut self, array: &mut Self::Array, item: Self::Value) -> Result<(), Self::Error>;
    /// The filled array as a value.
    fn end_array(&mut self, array: Self::Array) -> Result<Self::Value, Self::Error>;
    /// A new, empty object.
    fn object(&mut self) -> Result<Self::Object, Self::Error>;
    /// Adds a member, in text order: a key may come again (`JSON.parse` keeps its first
    /// position and takes the last value).
    fn insert(
        &mut self,
        object: &mut Self::Object,
        key: JsString,
        value: Self::Value,
    ) -> Result<(), Self::Error>;
    /// The filled object as a value.
    fn end_object(&mut self, object: Self::Object) -> Result<Self::Value, Self::Error>;
}

/// `JSON.parse(text)`, nesting up to [`MAX_DEPTH`].
pub fn parse(text: &str) -> Result<JsValue, ParseError> {
    match parse_with(text, &mut JsValues, MAX_DEPTH) {
        Ok((value, _)) => Ok(value),
        Err(Failure::Syntax(error)) => Err(error),
        Err(Failure::Build(never)) => match never {},
    }
}

/// Parses `text` with `builder`, refusing nesting deeper than `max_depth`; returns the value
/// and its deepest nesting (`[[]]`: 2). Open containers are kept on a heap stack, not the
/// call stack: a small (thread) stack reads any depth memory allows.
pub fn parse_with<B: Build>(
    text: &str,
    builder: &mut B,
    max_depth: usize,
) -> Result<(B::Value, usize), Failure<B::Error>> {
    let mut parser = Parser {
        text,
        bytes: text.as_bytes(),
        pos: 0,
    };
    parser.skip_ws();
    let (value, depth) = parser.value(builder, max_depth)?;
    parser.skip_ws();
    if parser.pos < parser.bytes.len() {
        return Err(parser
            .unexpected(
                ErrorKind::TrailingData,
                "Unexpected non-whitespace character after JSON",
            )
            .into());
    }
    Ok((value, depth))
}

/// Builds [`JsValue`]s, members in JS own-property order.
struct JsValues;

/// An object's members while it is parsed, with a lookup table once it has many.
struct Members {
    members: Vec<(JsString, JsValue)>,
    lookup: Option<HashMap<JsString, usize>>,
}

impl Build for JsValues {
    type Value = JsValue;
    type Array = Vec<JsValue>;
    type Object = Members;
    type Error = Infallible;

    fn scalar(&mut self, scalar: Scalar<'_>) -> Result<JsValue, Infallible> {
        Ok(match scalar {
            Scalar::Null => JsValue::Null,
            Scalar::Bool(b) => JsValue::Bool(b),
            Scalar::Number(number) => JsValue::Number(number.to_f64()),
            Scalar::String(s) => JsValue::String(s),
        })
    }

    fn array(&mut self) -> Result<Vec<JsValue>, Infallible> {
        Ok(Vec::new())
    }

    fn push(&mut self, array: &mut Vec<JsValue>, item: JsValue) -> Result<(), Infallible> {
        array.push(item);
        Ok(())
    }

    fn end_array(&mut self, array: Vec<JsValue>) -> Result<JsValue, Infallible> {
        Ok(JsValue::Array(array))
    }

    fn object(&mut self) -> Result<Members, Infallible> {
        Ok(Members {
            members: Vec::new(),
            lookup: None,
        })
    }

    fn insert(
        &mut self,
        object: &mut Members,
        key: JsString,
        value: JsValue,
    ) -> Result<(), Infallible> {
        insert_member(&mut object.members, &mut object.lookup, key, value);
        Ok(())
    }

    fn end_object(&mut self, object: Members) -> Result<JsValue, Infallible> {
        Ok(JsValue::Object(in_js_order(object.members)))
    }
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
enum Open<A, O> {
    Array(A),
    Object {
        object: O,
        /// The key whose value is being parsed.
        key: JsString,
    },
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Parser<'a> {
    fn error(&self, offset: usize, kind: ErrorKind, message: &str) -> ParseError {
        ParseError {
            offset,
            message: message.to_owned(),
            kind,
        }
    }

    fn unexpected(&self, kind: ErrorKind, context: &str) -> ParseError {
        match self
            .text
            .get(self.pos..)
            .and_then(|rest| rest.chars().next())
        {
            None => self.error(self.pos, kind, "Unexpected end of JSON input"),
            Some(c) => self.error(
                self.pos,
                kind,
                &format!("{context}: unexpected token {c:?}"),
            ),
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

    /// Steps into a container at `self.pos`, `open` containers being open around it.
    fn open(&mut self, open: usize, max_depth: usize, depth: &mut usize) -> Result<(), ParseError> {
        if open >= max_depth {
            let message = format!("Nesting deeper than {max_depth} levels");
            return Err(self.error(self.pos, ErrorKind::TooDeep, &message));
        }
        *depth = (*depth).max(open + 1);
        self.pos += 1;
        self.skip_ws();
        Ok(())
    }

    /// Parses one value and its deepest nesting, containers on a heap stack.
    fn value<B: Build>(
        &mut self,
        builder: &mut B,
        max_depth: usize,
    ) -> Result<(B::Value, usize), Failure<B::Error>> {
        let mut stack: Vec<Open<B::Array, B::Object>> = Vec::new();
        let mut depth = 0;
        loop {
            // A value starts here (after optional whitespace).
            self.skip_ws();
            let mut value = match self.peek() {
                Some(b'[') => {
                    self.open(stack.len(), max_depth, &mut depth)?;
                    let array = builder.array().map_err(Failure::Build)?;
                    if self.peek() != Some(b']') {
                        stack.push(Open::Array(array));
                        continue;
                    }
                    self.pos += 1;
                    builder.end_array(array).map_err(Failure::Build)?
                }
                Some(b'{') => {
                    self.open(stack.len(), max_depth, &mut depth)?;
                    let object = builder.object().map_err(Failure::Build)?;
                    if self.peek() != Some(b'}') {
                        let key = self.member_key()?;
                        stack.push(Open::Object { object, key });
                        continue;
                    }
                    self.pos += 1;
                    builder.end_object(object).map_err(Failure::Build)?
                }
                _ => {
                    let scalar = self.scalar(stack.is_empty())?;
                    builder.scalar(scalar).map_err(Failure::Build)?
                }
            };
            // Hand the value to the innermost open container, closing containers that end.
            loop {
                let Some(top) = stack.last_mut() else {
                    return Ok((value, depth));
                };
                self.skip_ws();
                let next = self.peek();
                match top {
                    Open::Array(items) => {
                        builder.push(items, value).map_err(Failure::Build)?;
                        match next {
                            Some(b',') => {
                                self.pos += 1;
                                break;
                            }
                            Some(b']') => self.pos += 1,
                            _ => {
                                return Err(self
                                    .unexpected(
                                        ErrorKind::ExpectedComma,
                                        "Expected ',' or ']' after array element",
                                    )
                                    .into());
                            }
                        }
                    }
                    Open::Object { object, key } => {
                        builder
                            .insert(object, std::mem::take(key), value)
                            .map_err(Failure::Build)?;
                        match next {
                            Some(b',') => {
                                self.pos += 1;
                                self.skip_ws();
                                *key = self.member_key()?;
                                break;
                            }
                            Some(b'}') => self.pos += 1,
                            _ => {
                                return Err(self
                                    .unexpected(
                                        ErrorKind::ExpectedComma,
                                        "Expected ',' or '}' after property value",
                                    )
                                    .into());
                            }
                        }
                    }
                }
                // The container just closed: it is the value to hand upwards.
                value = match stack.pop() {
                    Some(Open::Array(items)) => builder.end_array(items),
                    Some(Open::Object { object, .. }) => builder.end_object(object),
                    // Unreachable: `top` was on the stack.
                    None => {
                        let error = self.error(self.pos, ErrorKind::ExpectedValue, "Unbalanced");
                        return Err(error.into());
                    }
                }
                .map_err(Failure::Build)?;
            }
        }
    }

    /// A value that is not a container, at `self.pos`.
    fn scalar(&mut self, top_level: bool) -> Result<Scalar<'a>, ParseError> {
        match self.peek() {
            Some(b'"') => self.string().map(Scalar::String),
            Some(b't') => self.literal("true", Scalar::Bool(true)),
            Some(b'f') => self.literal("false", Scalar::Bool(false)),
            Some(b'n') => self.literal("null", Scalar::Null),
            Some(b'-' | b'0'..=b'9') => self.number(top_level).map(Scalar::Number),
            _ => Err(self.unexpected(ErrorKind::ExpectedValue, "Expected a JSON value")),
        }
    }

    /// A property name and its `:`, the position at the opening quote.
    fn member_key(&mut self) -> Result<JsString, ParseError> {
        if self.peek() != Some(b'"') {
            return Err(self.unexpected(
                ErrorKind::ExpectedKey,
                "Expected a double-quoted property name",
            ));
        }
        let key = self.string()?;
        self.skip_ws();
        if self.peek() != Some(b':') {
            return Err(
                self.unexpected(ErrorKind::ExpectedColon, "Expected ':' after property name")
            );
        }
        self.pos += 1;
        Ok(key)
    }

    fn literal(&mut self, word: &str, value: Scalar<'a>) -> Result<Scalar<'a>, ParseError> {
        let end = self.pos + word.len();
        if self.bytes.get(self.pos..end) == Some(word.as_bytes()) {
            self.pos = end;
            Ok(value)
        } else {
            Err(self.unexpected(ErrorKind::ExpectedValue, "Expected a JSON value"))
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
        self.pos - start
    }

    fn number(&mut self, top_level: bool) -> Result<NumberLiteral<'a>, ParseError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => {
                return Err(
                    self.unexpected(ErrorKind::NoNumberAfterMinus, "No number after minus sign")
                );
            }
        }
        let mut integer = true;
        if self.peek() == Some(b'.') {
            let valid_end = self.pos;
            self.pos += 1;
            if self.digits() == 0 {
                let kind = ErrorKind::NumberCut {
                    valid_end,
                    top_level,
                };
                return Err(self.unexpected(kind, "Unterminated fractional number"));
            }
            integer = false;
        }
        if let Some(b'e' | b'E') = self.peek() {
            let valid_end = self.pos;
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if self.digits() == 0 {
                let kind = ErrorKind::NumberCut {
                    valid_end,
                    top_level,
                };
                return Err(self.unexpected(kind, "Exponent part is missing a number"));
            }
            integer = false;
        }
        Ok(NumberLiteral {
            text: self.text.get(start..self.pos).unwrap_or(""),
            integer,
        })
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
        // The backslash of the last `\uXXXX` escape read, and where it ended.
        let mut unicode_escape: Option<(usize, usize)> = None;
        loop {
            let Some(byte) = self.peek() else {
                let escape_at_end = unicode_escape
                    .filter(|&(_, end)| end == self.bytes.len())
                    .map(|(at, _)| at);
                let kind = ErrorKind::Unterminated { escape_at_end };
                return Err(self.error(open, kind, "Unterminated string in JSON"));
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
                        let kind = ErrorKind::Unterminated {
                            escape_at_end: None,
                        };
                        return Err(self.error(open, kind, "Unterminated string in JSON"));
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
                            return Err(self.error(
                                escape_at,
                                ErrorKind::BadUnicodeEscape,
                                "Bad Unicode escape in JSON",
                            ));
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
                            unicode_escape = Some((self.pos, self.pos + 6));
                            self.pos += 6;
                            let code = 0x10000
                                + ((u32::from(unit) - 0xD800) << 10)
                                + (u32::from(low) - 0xDC00);
                            b.push_char(char::from_u32(code).unwrap_or('\u{FFFD}'));
                        } else {
                            unicode_escape = Some((escape_at, self.pos));
                            match char::from_u32(u32::from(unit)) {
                                Some(c) => b.push_char(c),
                                None => b.push_lone_surrogate(unit),
                            }
                        }
                    } else {
                        return Err(self.error(
                            escape_at,
                            ErrorKind::BadEscape,
                            "Bad escaped character in JSON",
                        ));
                    }
                    run_start = self.pos;
                }
                0..=0x1F => {
                    return Err(self.error(
                        self.pos,
                        ErrorKind::ControlCharacter,
                        "Bad control character in string literal in JSON",
                    ));
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

    /// Prints what a builder is handed, in text order: `[..]`, `{k=v,..}`, numbers as
    /// `i<int>` / `u<int>` / `f<double>`.
    struct Events;

    impl Build for Events {
        type Value = String;
        type Array = Vec<String>;
        type Object = Vec<String>;
        type Error = Infallible;

        fn scalar(&mut self, scalar: Scalar<'_>) -> Result<String, Infallible> {
            Ok(match scalar {
                Scalar::Null => "null".into(),
                Scalar::Bool(b) => b.to_string(),
                Scalar::Number(n) => match n.to_integer() {
                    Some(Integer::Signed(i)) => format!("i{i}"),
                    Some(Integer::Unsigned(u)) => format!("u{u}"),
                    None => format!("f{:?}", n.to_f64()),
                },
                Scalar::String(s) => format!("{:?}", s.to_units()),
            })
        }
        fn array(&mut self) -> Result<Vec<String>, Infallible> {
            Ok(Vec::new())
        }
        fn push(&mut self, array: &mut Vec<String>, item: String) -> Result<(), Infallible> {
            array.push(item);
            Ok(())
        }
        fn end_array(&mut self, array: Vec<String>) -> Result<String, Infallible> {
            Ok(format!("[{}]", array.join(",")))
        }
        fn object(&mut self) -> Result<Vec<String>, Infallible> {
            Ok(Vec::new())
        }
        fn insert(
            &mut self,
            object: &mut Vec<String>,
            key: JsString,
            value: String,
        ) -> Result<(), Infallible> {
            object.push(format!("{}={value}", key.as_str().unwrap_or("?")));
            Ok(())
        }
        fn end_object(&mut self, object: Vec<String>) -> Result<String, Infallible> {
            Ok(format!("{{{}}}", object.join(",")))
        }
    }

    fn events(text: &str) -> Result<(String, usize), ErrorKind> {
        parse_with(text, &mut Events, usize::MAX).map_err(|e| match e {
            Failure::Syntax(e) => e.kind,
            Failure::Build(never) => match never {},
        })
    }

    #[test]
    fn a_builder_gets_literals_and_members_in_text_order() {
        let text = r#"{"b":[1,-0,-0.0,1e400,18446744073709551615,18446744073709551616],
            "2":-9223372036854775808,"b":-9223372036854775809,"e":{},"a":[[]]}"#;
        let Ok((built, depth)) = events(text) else {
            panic!("must parse")
        };
        assert_eq!(
            built,
            "{b=[i1,i0,f-0.0,finf,u18446744073709551615,f1.8446744073709552e19],\
             2=i-9223372036854775808,b=f-9.223372036854776e18,e={},a=[[]]}"
        );
        assert_eq!(depth, 3);
        assert_eq!(events(r#""\ud800x""#), Ok(("[55296, 120]".into(), 0)));
    }

    /// Counts the values a builder is handed.
    struct Count;

    impl Build for Count {
        type Value = usize;
        type Array = usize;
        type Object = usize;
        type Error = Infallible;

        fn scalar(&mut self, _: Scalar<'_>) -> Result<usize, Infallible> {
            Ok(1)
        }
        fn array(&mut self) -> Result<usize, Infallible> {
            Ok(1)
        }
        fn push(&mut self, array: &mut usize, item: usize) -> Result<(), Infallible> {
            *array += item;
            Ok(())
        }
        fn end_array(&mut self, array: usize) -> Result<usize, Infallible> {
            Ok(array)
        }
        fn object(&mut self) -> Result<usize, Infallible> {
            Ok(1)
        }
        fn insert(
            &mut self,
            object: &mut usize,
            _: JsString,
            value: usize,
        ) -> Result<(), Infallible> {
            *object += value;
            Ok(())
        }
        fn end_object(&mut self, object: usize) -> Result<usize, Infallible> {
            Ok(object)
        }
    }

    #[test]
    fn a_builder_reads_any_depth_on_a_small_stack() {
        let levels = 200_000;
        let text = "{\"a\":[".repeat(levels) + "7" + &"]}".repeat(levels);
        let worker = std::thread::Builder::new()
            .stack_size(128 * 1024)
            .spawn(move || parse_with(&text, &mut Count, usize::MAX).map_err(|e| format!("{e:?}")));
        match worker.map(|handle| handle.join()) {
            Ok(Ok(Ok((values, depth)))) => {
                assert_eq!((values, depth), (2 * levels + 1, 2 * levels))
            }
            other => panic!("deep text failed on a small stack: {other:?}"),
        }
        let refused = match parse_with("[[1]]", &mut Count, 1) {
            Err(Failure::Syntax(e)) => Some((e.kind, e.offset)),
            _ => None,
        };
        assert_eq!(refused, Some((ErrorKind::TooDeep, 1)));
    }

    #[test]
    fn errors_name_their_kind_and_place() {
        use ErrorKind::*;
        let cases: [(&str, ErrorKind, usize); 18] = [
            ("", ExpectedValue, 0),
            ("[1,]", ExpectedValue, 3),
            ("nul", ExpectedValue, 0),
            ("1 2", TrailingData, 2),
            ("[1 2]", ExpectedComma, 3),
            ("{\"a\":1 2}", ExpectedComma, 7),
            ("{,}", ExpectedKey, 1),
            ("{\"a\" 1}", ExpectedColon, 5),
            ("[-x]", NoNumberAfterMinus, 2),
            (
                "1.",
                NumberCut {
                    valid_end: 1,
                    top_level: true,
                },
                2,
            ),
            (
                "[1.5e+]",
                NumberCut {
                    valid_end: 4,
                    top_level: false,
                },
                6,
            ),
            (
                "\"ab",
                Unterminated {
                    escape_at_end: None,
                },
                0,
            ),
            (
                "[\"\\u0041",
                Unterminated {
                    escape_at_end: Some(2),
                },
                1,
            ),
            (
                "\"\\ud800\\udc00",
                Unterminated {
                    escape_at_end: Some(7),
                },
                0,
            ),
            (
                "\"\\u0041\\",
                Unterminated {
                    escape_at_end: None,
                },
                0,
            ),
            ("\"\t\"", ControlCharacter, 1),
            ("\"\\x\"", BadEscape, 1),
            ("\"a\\u12g4\"", BadUnicodeEscape, 2),
        ];
        for (text, kind, offset) in cases {
            let Err(error) = parse(text) else {
                panic!("{text:?} must be refused")
            };
            assert_eq!((error.kind, error.offset), (kind, offset), "{text:?}");
        }
    }

    #[test]
    fn errors_in_the_words_and_places_of_python_json() {
        // What CPython 3.11's `json.loads` says for each text (`JSONDecodeError.msg`, `.pos`).
        let cases = [
            ("[1,]", "Expecting value", 3),
            ("1 2", "Extra data", 2),
            ("[1 2]", "Expecting ',' delimiter", 3),
            (
                "{,}",
                "Expecting property name enclosed in double quotes",
                1,
            ),
            ("{\"a\" 1}", "Expecting ':' delimiter", 5),
            ("[-x]", "Expecting value", 1),
            (
                "[-Infinity]",
                "No number after minus sign: unexpected token 'I'",
                2,
            ),
            ("1.", "Extra data", 1),
            ("[1.5e+]", "Expecting ',' delimiter", 4),
            ("{\"a\":0.e1}", "Expecting ',' delimiter", 6),
            ("\"ab", "Unterminated string starting at", 0),
            ("[\"\\u0041", "Invalid \\uXXXX escape", 3),
            ("\"\\ud800\\udc00", "Invalid \\uXXXX escape", 8),
            ("\"\t\"", "Invalid control character at", 1),
            ("\"\\x\"", "Invalid \\escape", 1),
            ("\"a\\u12g4\"", "Invalid \\uXXXX escape", 3),
        ];
        for (text, message, at) in cases {
            let Err(error) = parse(text) else {
                panic!("{text:?} must be refused")
            };
            assert_eq!(error.python_json(text), (message, at), "{text:?}");
        }
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

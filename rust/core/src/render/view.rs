//! Light views of messages: only the fields render decides on.

use std::cmp::Ordering;

use crate::jsnum::format_number;

/// `msg.role`, reduced to the values render distinguishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `"user"`
    User,
    /// `"assistant"`
    Assistant,
    /// `"toolResult"`
    ToolResult,
    /// `"custom"` (summary messages among them)
    Custom,
    /// any other role, a missing role, or a message that is not an object
    Other,
}

/// `msg.timestamp`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Ts {
    /// the key is absent (JS `undefined`)
    Absent,
    /// `typeof timestamp === "number"` (NaN included)
    Num(f64),
    /// present but not a number (`null`, a string, ...)
    Other,
}

impl Ts {
    /// The number, when the timestamp is one.
    pub fn num(self) -> Option<f64> {
        match self {
            Ts::Num(x) => Some(x),
            _ => None,
        }
    }

    /// `timestamp === x` for a number `x` (strict: never true for NaN).
    pub fn strict_eq(self, x: f64) -> bool {
        matches!(self, Ts::Num(t) if t == x)
    }
}

/// A JS value used as a tool-call id: a Map/Set key compared with SameValueZero.
/// Provider ids are strings; the other variants only keep odd inputs from
/// matching where the reference would not match them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum JsId {
    /// a string id
    Str(String),
    /// `undefined` (the key is absent)
    Undefined,
    /// `null`
    Null,
    /// a boolean
    Bool(bool),
    /// a number, by canonical bits (`-0` as `0`, every NaN alike)
    Num(u64),
    /// an object or array: equal only to itself (the tag is unique per value)
    Object(usize),
}

impl JsId {
    /// A number id.
    pub fn num(x: f64) -> Self {
        let canonical = if x == 0.0 {
            0.0
        } else if x.is_nan() {
            f64::NAN
        } else {
            x
        };
        JsId::Num(canonical.to_bits())
    }

    /// A string id.
    pub fn str(s: &str) -> Self {
        JsId::Str(s.to_owned())
    }

    /// The string, for a string id.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            JsId::Str(s) => Some(s),
            _ => None,
        }
    }

    /// `String(id)` (template literals, `+` concatenation).
    pub fn to_js_string(&self) -> String {
        match self {
            JsId::Str(s) => s.clone(),
            JsId::Undefined => "undefined".to_owned(),
            JsId::Null => "null".to_owned(),
            JsId::Bool(b) => b.to_string(),
            JsId::Num(bits) => format_number(f64::from_bits(*bits)),
            JsId::Object(_) => "[object Object]".to_owned(),
        }
    }

    /// How `Array.prototype.join` prints the element (`null`/`undefined` as `""`).
    pub fn join_string(&self) -> String {
        match self {
            JsId::Undefined | JsId::Null => String::new(),
            other => other.to_js_string(),
        }
    }

    /// Default `Array.prototype.sort` order: `undefined` last, everything else
    /// by `String(x)` compared in UTF-16 code units.
    pub fn js_sort_cmp(a: &JsId, b: &JsId) -> Ordering {
        match (a, b) {
            (JsId::Undefined, JsId::Undefined) => Ordering::Equal,
            (JsId::Undefined, _) => Ordering::Greater,
            (_, JsId::Undefined) => Ordering::Less,
            _ => {
                let (x, y) = (a.to_js_string(), b.to_js_string());
                x.encode_utf16().cmp(y.encode_utf16())
            }
        }
    }
}

/// One element of an array `content`.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// `null` / `undefined`: reading `.type` throws
    Nullish,
    /// `type === "toolCall"`
    ToolCall {
        /// `block.id`
        id: JsId,
        /// the `arguments` key is present
        has_arguments: bool,
    },
    /// `type === "thinking"` (redacted ones included)
    Thinking,
    /// any other block or primitive element
    Other,
}

/// `msg.content` of an assistant message.
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    /// an array
    Array(Vec<Block>),
    /// absent or `null`
    Nullish,
    /// a string
    Str,
    /// a number, boolean or plain object
    Other,
}

/// One item of a summary message's `details.toolCallRefs`.
#[derive(Debug, Clone, PartialEq)]
pub enum SummaryRef {
    /// an object item
    Ref {
        /// `r.toolCallId`
        tool_call_id: JsId,
        /// `String(r.resultTimestamp)` unless it is `undefined`
        result_timestamp: Option<String>,
    },
    /// `null` / `undefined`: reading a field throws
    Nullish,
}

/// `msg.details?.toolCallRefs ?? []` of a summary message.
#[derive(Debug, Clone, PartialEq)]
pub enum SummaryRefs {
    /// an array (missing refs read as empty)
    List(Vec<SummaryRef>),
    /// present but not an array: `.some` is not a function
    NotArray,
}

/// The fields render reads from one message.
#[derive(Debug, Clone, PartialEq)]
pub struct MsgView {
    /// `msg.role`
    pub role: Role,
    /// `msg.timestamp`
    pub timestamp: Ts,
    /// toolResult: `msg.toolCallId`
    pub tool_call_id: JsId,
    /// toolResult: `msg.isError === true`
    pub is_error: bool,
    /// toolResult: `msg.toolName === "context_tree_query"`
    pub is_recovery: bool,
    /// toolResult: extracting its text throws (an array `content` holding `null`)
    pub text_throws: bool,
    /// assistant: `msg.content`
    pub content: Content,
    /// user: the id of `^<compressed-chain id="([^"]+)"` in `content[0].text`
    pub synthetic_block_id: Option<String>,
    /// custom with `customType === "context-prune-summary"`: its refs
    pub summary: Option<SummaryRefs>,
}

impl MsgView {
    /// A message of `role` with nothing else render looks at.
    pub fn new(role: Role, timestamp: Ts) -> Self {
        MsgView {
            role,
            timestamp,
            tool_call_id: JsId::Undefined,
            is_error: false,
            is_recovery: false,
            text_throws: false,
            content: Content::Nullish,
            synthetic_block_id: None,
            summary: None,
        }
    }

    /// The toolCall ids of an assistant's content, in block order; `Err` where
    /// the reference's `.filter`/`.map` over the content throws.
    pub fn tool_call_ids(&self) -> Result<Vec<&JsId>, super::Throw> {
        let Content::Array(blocks) = &self.content else {
            return Err(super::Throw);
        };
        let mut ids = Vec::new();
        for block in blocks {
            match block {
                Block::Nullish => return Err(super::Throw),
                Block::ToolCall { id, .. } => ids.push(id),
                Block::Thinking | Block::Other => {}
            }
        }
        Ok(ids)
    }
}

/// Parses `^<compressed-chain id="([^"]+)"` (the synthetic chain message marker).
pub fn synthetic_block_id(text: &str) -> Option<&str> {
    let rest = text.strip_prefix("<compressed-chain id=\"")?;
    let end = rest.find('"')?;
    if end == 0 {
        return None;
    }
    rest.get(..end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_marker_needs_a_non_empty_quoted_id_at_the_start() {
        assert_eq!(
            synthetic_block_id("<compressed-chain id=\"b3\" tools=\"\">"),
            Some("b3")
        );
        assert_eq!(
            synthetic_block_id("<compressed-chain id=\"b\nx\""),
            Some("b\nx")
        );
        assert_eq!(synthetic_block_id("<compressed-chain id=\"\""), None);
        assert_eq!(synthetic_block_id("<compressed-chain id=\"b3"), None);
        assert_eq!(synthetic_block_id(" <compressed-chain id=\"b3\""), None);
        assert_eq!(synthetic_block_id("<compressed-chain id='b3'"), None);
    }

    #[test]
    fn ids_compare_with_same_value_zero() {
        assert_eq!(JsId::num(0.0), JsId::num(-0.0));
        assert_eq!(JsId::num(f64::NAN), JsId::num(-f64::NAN));
        assert_ne!(JsId::num(1.0), JsId::str("1"));
        assert_ne!(JsId::Object(1), JsId::Object(2));
    }

    #[test]
    fn ids_print_and_sort_like_js() {
        assert_eq!(JsId::num(5.0).to_js_string(), "5");
        assert_eq!(JsId::Undefined.to_js_string(), "undefined");
        assert_eq!(JsId::Null.join_string(), "");
        let mut ids = [
            JsId::Undefined,
            JsId::str("\u{FF61}"),
            JsId::str("\u{1F600}"),
            JsId::str("b"),
            JsId::num(10.0),
            JsId::str("a"),
        ];
        ids.sort_by(JsId::js_sort_cmp);
        let printed: Vec<String> = ids.iter().map(JsId::to_js_string).collect();
        // UTF-16 order: the astral (surrogate 0xD83D) sorts before U+FF61.
        assert_eq!(
            printed,
            ["10", "a", "b", "\u{1F600}", "\u{FF61}", "undefined"]
        );
    }

    #[test]
    fn strict_timestamp_equality() {
        assert!(Ts::Num(100.0).strict_eq(100.0));
        assert!(!Ts::Num(f64::NAN).strict_eq(f64::NAN));
        assert!(!Ts::Other.strict_eq(100.0));
        assert!(!Ts::Absent.strict_eq(100.0));
    }
}

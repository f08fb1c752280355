//! The light view of one message that chain detection and extraction read.

use crate::js::is_js_whitespace;
use crate::view::{JsId, Role, Ts};

/// The marker a synthetic chain message's text starts with.
const SYNTHETIC_PREFIX: &str = "<compressed-chain";

/// `text.trimStart().startsWith("<compressed-chain")`: the text of a synthetic chain message
/// (its string content, or its first block when that is a text block).
pub fn is_synthetic_text(text: &str) -> bool {
    text.trim_start_matches(is_js_whitespace)
        .starts_with(SYNTHETIC_PREFIX)
}

/// One `toolCall` block of an assistant message.
#[derive(Debug, Clone, PartialEq)]
pub struct CallView {
    /// Position of the block in `content`.
    pub block: usize,
    /// `block.id` (a Map key: SameValueZero identity).
    pub id: JsId,
    /// `block.id && block.name`: the block counts as a middle call for detection.
    pub listed: bool,
    /// `isProtected(block.name, block.input ?? block.arguments)`.
    pub protected: bool,
}

/// `content` of an assistant message.
#[derive(Debug, Clone, PartialEq)]
pub enum AssistantContent {
    /// Not an array (string, absent, object...): no tool calls.
    NotArray,
    /// An array.
    Array {
        /// Its `type === "toolCall"` blocks, in order.
        calls: Vec<CallView>,
        /// Some element is `null` / `undefined`: reading its `type` throws.
        has_nullish: bool,
    },
}

impl AssistantContent {
    /// `hasToolCalls(msg)`: array content with a `toolCall` block.
    pub fn has_tool_calls(&self) -> bool {
        matches!(self, AssistantContent::Array { calls, .. } if !calls.is_empty())
    }
}

/// The role-specific part of a [`ChainMsg`].
#[derive(Debug, Clone, PartialEq)]
pub enum MsgBody {
    /// Nothing detection reads (other roles, non-object messages).
    None,
    /// The message itself is `null` / `undefined`: reading `msg.role` throws.
    Nullish,
    /// A user message.
    User {
        /// A synthetic `<compressed-chain` message (string content, or a first text block,
        /// whose JS `trimStart()` starts with the marker): a passthrough, not a chain start.
        synthetic: bool,
    },
    /// An assistant message.
    Assistant(AssistantContent),
    /// A custom message that is a chain anchor (`customType` not prefixed `context-prune-`,
    /// pi-condense 2.10.0): it opens a chain when none is open.
    Anchor,
    /// A toolResult message.
    ToolResult {
        /// `msg.toolCallId`.
        id: JsId,
        /// `isProtected(msg.toolName, undefined)` (name only).
        protected: bool,
    },
}

/// What chain detection and extraction read from one message.
#[derive(Debug, Clone, PartialEq)]
pub struct ChainMsg {
    /// `msg.role`.
    pub role: Role,
    /// `msg.timestamp`.
    pub timestamp: Ts,
    /// `msg.timestamp === null` (a closing assistant stamped `null` reads as not closed).
    pub timestamp_null: bool,
    /// The role-specific fields.
    pub body: MsgBody,
}

impl ChainMsg {
    /// A message of `role` at `timestamp` with nothing else detection reads.
    pub fn new(role: Role, timestamp: Ts) -> Self {
        ChainMsg {
            role,
            timestamp,
            timestamp_null: false,
            body: MsgBody::None,
        }
    }
}

/// JS truthiness of an id value.
pub fn id_truthy(id: &JsId) -> bool {
    match id {
        JsId::Str(s) => !s.is_empty(),
        JsId::Undefined | JsId::Null => false,
        JsId::Bool(b) => *b,
        JsId::Num(bits) => {
            let x = f64::from_bits(*bits);
            x != 0.0 && !x.is_nan()
        }
        JsId::Object(_) => true,
    }
}

/// `occKey(id, ts)` as a Set member: the id itself without a timestamp, else the string
/// `String(id) + "@" + String(ts)`.
pub(crate) fn occ_key_id(id: &JsId, ts: Option<f64>) -> JsId {
    match ts {
        None => id.clone(),
        Some(ts) => JsId::Str(format!(
            "{}@{}",
            id.to_js_string(),
            crate::js::format_number(ts)
        )),
    }
}

#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    pub fn user(ts: f64) -> ChainMsg {
        let mut m = ChainMsg::new(Role::User, Ts::Num(ts));
        m.body = MsgBody::User { synthetic: false };
        m
    }

    /// A custom message: a chain anchor, or a pruner one (`context-prune-...`).
    pub fn custom(ts: f64, anchor: bool) -> ChainMsg {
        let mut m = ChainMsg::new(Role::Custom, Ts::Num(ts));
        if anchor {
            m.body = MsgBody::Anchor;
        }
        m
    }

    pub fn synthetic(ts: f64) -> ChainMsg {
        let mut m = ChainMsg::new(Role::User, Ts::Num(ts));
        m.body = MsgBody::User { synthetic: true };
        m
    }

    /// A listed, unprotected call.
    pub fn call(id: &str) -> CallView {
        CallView {
            block: 0,
            id: JsId::str(id),
            listed: true,
            protected: false,
        }
    }

    pub fn protected_call(id: &str) -> CallView {
        CallView {
            protected: true,
            ..call(id)
        }
    }

    pub fn assistant(ts: f64, calls: Vec<CallView>) -> ChainMsg {
        let mut m = ChainMsg::new(Role::Assistant, Ts::Num(ts));
        let calls = calls
            .into_iter()
            .enumerate()
            .map(|(i, c)| CallView { block: i, ..c })
            .collect();
        m.body = MsgBody::Assistant(AssistantContent::Array {
            calls,
            has_nullish: false,
        });
        m
    }

    pub fn text(ts: f64) -> ChainMsg {
        assistant(ts, Vec::new())
    }

    pub fn result(id: &str, ts: f64) -> ChainMsg {
        let mut m = ChainMsg::new(Role::ToolResult, Ts::Num(ts));
        m.body = MsgBody::ToolResult {
            id: JsId::str(id),
            protected: false,
        };
        m
    }

    pub fn protected_result(id: &str, ts: f64) -> ChainMsg {
        let mut m = result(id, ts);
        m.body = MsgBody::ToolResult {
            id: JsId::str(id),
            protected: true,
        };
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_text_starts_with_the_marker_after_js_whitespace() {
        assert!(is_synthetic_text("<compressed-chain id=\"b1\">"));
        assert!(is_synthetic_text(" \n\t\u{feff}\u{3000}<compressed-chain"));
        assert!(!is_synthetic_text("x<compressed-chain"));
        assert!(!is_synthetic_text("<compressed-cha"));
        assert!(!is_synthetic_text("\u{200b}<compressed-chain")); // not JS whitespace
    }

    #[test]
    fn truthiness_of_ids() {
        assert!(id_truthy(&JsId::str("a")));
        assert!(!id_truthy(&JsId::str("")));
        assert!(!id_truthy(&JsId::Undefined));
        assert!(!id_truthy(&JsId::Null));
        assert!(!id_truthy(&JsId::num(0.0)));
        assert!(!id_truthy(&JsId::num(f64::NAN)));
        assert!(id_truthy(&JsId::num(3.0)));
        assert!(id_truthy(&JsId::Bool(true)));
        assert!(id_truthy(&JsId::Object(1)));
    }

    #[test]
    fn occurrence_key_identity() {
        assert_eq!(occ_key_id(&JsId::str("a"), Some(5.0)), JsId::str("a@5"));
        assert_eq!(occ_key_id(&JsId::str("a"), None), JsId::str("a"));
        assert_eq!(occ_key_id(&JsId::num(7.0), None), JsId::num(7.0));
        assert_eq!(occ_key_id(&JsId::num(7.0), Some(1.0)), JsId::str("7@1"));
    }

    #[test]
    fn tool_calls_need_an_array_with_a_call() {
        assert!(!AssistantContent::NotArray.has_tool_calls());
        let empty = AssistantContent::Array {
            calls: vec![],
            has_nullish: false,
        };
        assert!(!empty.has_tool_calls());
    }
}

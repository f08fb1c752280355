//! Light views of messages: only the fields render and chain detection decide on.
//!
//! The views are generic over how a string id is held (`S`): owned `String`s by default
//! (tests, chain detection), or strings borrowed from the caller's message objects (the
//! Python binding), so a render copies no id.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt::Debug;
use std::hash::Hash;

use crate::js::{Throw, format_number};
use crate::jsstr::{KEY_ESCAPE, key_form_to_wtf8, wtf8_to_utf16};

/// How a view holds a string: `String`, `Cow<str>`, `&str`, ...
pub trait IdStr: AsRef<str> + Clone + Eq + Hash + Debug {}

impl<T: AsRef<str> + Clone + Eq + Hash + Debug> IdStr for T {}

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JsIdOf<S> {
    /// a string id
    Str(S),
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

/// An id holding its string.
pub type JsId = JsIdOf<String>;

/// An id whose string is borrowed (or, rarely, owned).
pub type CowId<'a> = JsIdOf<Cow<'a, str>>;

impl JsIdOf<String> {
    /// A string id.
    pub fn str(s: &str) -> Self {
        JsIdOf::Str(s.to_owned())
    }
}

impl<S> JsIdOf<S> {
    /// A number id.
    pub fn num(x: f64) -> Self {
        let canonical = if x == 0.0 {
            0.0
        } else if x.is_nan() {
            f64::NAN
        } else {
            x
        };
        JsIdOf::Num(canonical.to_bits())
    }
}

impl<S: AsRef<str>> JsIdOf<S> {
    /// The string, for a string id.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            JsIdOf::Str(s) => Some(s.as_ref()),
            _ => None,
        }
    }

    /// The same id with its string borrowed (cheap to copy, hash and compare).
    pub fn borrowed(&self) -> JsIdOf<&str> {
        match self {
            JsIdOf::Str(s) => JsIdOf::Str(s.as_ref()),
            JsIdOf::Undefined => JsIdOf::Undefined,
            JsIdOf::Null => JsIdOf::Null,
            JsIdOf::Bool(b) => JsIdOf::Bool(*b),
            JsIdOf::Num(bits) => JsIdOf::Num(*bits),
            JsIdOf::Object(tag) => JsIdOf::Object(*tag),
        }
    }

    /// The same id holding its own string.
    pub fn to_owned_id(&self) -> JsId {
        match self.borrowed() {
            JsIdOf::Str(s) => JsIdOf::Str(s.to_owned()),
            JsIdOf::Undefined => JsIdOf::Undefined,
            JsIdOf::Null => JsIdOf::Null,
            JsIdOf::Bool(b) => JsIdOf::Bool(b),
            JsIdOf::Num(bits) => JsIdOf::Num(bits),
            JsIdOf::Object(tag) => JsIdOf::Object(tag),
        }
    }

    /// `String(id)` (template literals, `+` concatenation).
    pub fn to_js_string(&self) -> String {
        self.js_str().into_owned()
    }

    /// `String(id)`, borrowed when the id is a string.
    pub fn js_str(&self) -> Cow<'_, str> {
        match self {
            JsIdOf::Str(s) => Cow::Borrowed(s.as_ref()),
            JsIdOf::Undefined => Cow::Borrowed("undefined"),
            JsIdOf::Null => Cow::Borrowed("null"),
            JsIdOf::Bool(b) => Cow::Borrowed(if *b { "true" } else { "false" }),
            JsIdOf::Num(bits) => Cow::Owned(format_number(f64::from_bits(*bits))),
            JsIdOf::Object(_) => Cow::Borrowed("[object Object]"),
        }
    }

    /// How `Array.prototype.join` prints the element (`null`/`undefined` as `""`).
    pub fn join_string(&self) -> String {
        match self {
            JsIdOf::Undefined | JsIdOf::Null => String::new(),
            other => other.to_js_string(),
        }
    }

    /// Default `Array.prototype.sort` order: `undefined` last, everything else
    /// by `String(x)` compared in UTF-16 code units (a string id in key form by the units of
    /// the JS string it stands for: a lone surrogate as itself).
    pub fn js_sort_cmp(a: &Self, b: &Self) -> Ordering {
        match (a, b) {
            (JsIdOf::Undefined, JsIdOf::Undefined) => Ordering::Equal,
            (JsIdOf::Undefined, _) => Ordering::Greater,
            (_, JsIdOf::Undefined) => Ordering::Less,
            _ => {
                let (x, y) = (a.js_str(), b.js_str());
                if x.contains(KEY_ESCAPE) || y.contains(KEY_ESCAPE) {
                    let units = |key: &str| wtf8_to_utf16(&key_form_to_wtf8(key));
                    return units(&x).cmp(&units(&y));
                }
                x.encode_utf16().cmp(y.encode_utf16())
            }
        }
    }
}

/// One element of an array `content`.
#[derive(Debug, Clone, PartialEq)]
pub enum Block<S = String> {
    /// `null` / `undefined`: reading `.type` throws
    Nullish,
    /// `type === "toolCall"`
    ToolCall {
        /// `block.id`
        id: JsIdOf<S>,
    },
    /// `type === "thinking"` (redacted ones included)
    Thinking,
    /// any other block or primitive element
    Other,
}

/// The elements of an array `content` that render reads - its toolCall blocks and its
/// `null` elements - with their positions in the array. Other elements are not kept.
#[derive(Debug, Clone, PartialEq)]
pub struct Blocks<S = String> {
    /// The first kept element (most assistant messages have one tool call).
    first: Option<Block<S>>,
    /// Its position.
    first_index: u32,
    /// Number of elements of the array.
    len: u32,
    /// The kept elements after the first, with their positions.
    rest: Vec<(u32, Block<S>)>,
}

impl<S> Default for Blocks<S> {
    fn default() -> Self {
        Blocks {
            first: None,
            first_index: 0,
            len: 0,
            rest: Vec::new(),
        }
    }
}

impl<S> Blocks<S> {
    /// Appends the next element of the array.
    pub fn push(&mut self, block: Block<S>) {
        let index = self.len;
        // A Python list longer than 2^32 elements cannot be built in memory that a
        // render could walk; saturate rather than wrap.
        self.len = self.len.saturating_add(1);
        if matches!(block, Block::Thinking | Block::Other) {
            return;
        }
        if self.first.is_none() {
            self.first = Some(block);
            self.first_index = index;
        } else {
            self.rest.push((index, block));
        }
    }

    /// The kept elements (toolCall and `null` ones) with their positions, in order.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &Block<S>)> {
        self.first
            .iter()
            .map(|block| (self.first_index as usize, block))
            .chain(
                self.rest
                    .iter()
                    .map(|(index, block)| (*index as usize, block)),
            )
    }

    /// Number of elements of the array.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether the array is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether an element is `null` / `undefined`.
    pub fn has_nullish(&self) -> bool {
        self.iter().any(|(_, b)| matches!(b, Block::Nullish))
    }

    /// The ids of the toolCall blocks, in order.
    pub fn call_ids(&self) -> impl Iterator<Item = &JsIdOf<S>> {
        self.iter().filter_map(|(_, b)| call_id(b))
    }
}

impl<S> From<Vec<Block<S>>> for Blocks<S> {
    fn from(blocks: Vec<Block<S>>) -> Self {
        let mut out = Blocks::default();
        for block in blocks {
            out.push(block);
        }
        out
    }
}

/// `msg.content` of an assistant message.
#[derive(Debug, Clone, PartialEq)]
pub enum Content<S = String> {
    /// an array
    Array(Blocks<S>),
    /// absent or `null`
    Nullish,
    /// a string
    Str,
    /// a number, boolean or plain object
    Other,
}

/// One item of a summary message's `details.toolCallRefs`.
#[derive(Debug, Clone, PartialEq)]
pub enum SummaryRef<S = String> {
    /// an object item
    Ref {
        /// `r.toolCallId`
        tool_call_id: JsIdOf<S>,
        /// `String(r.resultTimestamp)` unless it is `undefined`
        result_timestamp: Option<String>,
    },
    /// `null` / `undefined`: reading a field throws
    Nullish,
}

/// `msg.details?.toolCallRefs ?? []` of a summary message.
#[derive(Debug, Clone, PartialEq)]
pub enum SummaryRefs<S = String> {
    /// an array (missing refs read as empty)
    List(Vec<SummaryRef<S>>),
    /// present but not an array: `.some` is not a function
    NotArray,
}

/// The fields render reads from one message.
///
/// A binding may leave out what no enabled phase reads (see `Needs` in the render module):
/// such fields keep their [`MsgView::new`] values.
#[derive(Debug, Clone, PartialEq)]
pub struct MsgView<S = String> {
    /// `msg.role`
    pub role: Role,
    /// `msg.timestamp`
    pub timestamp: Ts,
    /// toolResult: `msg.toolCallId`
    pub tool_call_id: JsIdOf<S>,
    /// toolResult: `msg.isError === true`
    pub is_error: bool,
    /// toolResult: `msg.toolName === "context_tree_query"`
    pub is_recovery: bool,
    /// toolResult: extracting its text throws (an array `content` holding `null`)
    pub text_throws: bool,
    /// assistant: `msg.content`
    pub content: Content<S>,
    /// user: the id of `^<compressed-chain id="([^"]+)"` in `content[0].text`
    pub synthetic_block_id: Option<Box<str>>,
    /// custom with `customType === "context-prune-summary"`: its refs
    pub summary: Option<Box<SummaryRefs<S>>>,
    /// custom: a chain anchor (`customType` not prefixed `context-prune-`, pi-condense
    /// 2.10.0): a chain's range may start at it, as at a user message
    pub anchor: bool,
}

impl<S> MsgView<S> {
    /// A message of `role` with nothing else render looks at.
    pub fn new(role: Role, timestamp: Ts) -> Self {
        MsgView {
            role,
            timestamp,
            tool_call_id: JsIdOf::Undefined,
            is_error: false,
            is_recovery: false,
            text_throws: false,
            content: Content::Nullish,
            synthetic_block_id: None,
            summary: None,
            anchor: false,
        }
    }

    /// Whether a chain's range may start here (`resolveRange`'s start: a user message, or
    /// a chain-anchor custom message since 2.10.0).
    #[inline]
    pub fn opens_range(&self) -> bool {
        self.role == Role::User || (self.role == Role::Custom && self.anchor)
    }

    /// The blocks of an assistant's array content, checked the way the reference's
    /// `.filter(b => b.type === "toolCall")` reads them: `Err` for a non-array content or
    /// a `null` element.
    pub fn checked_blocks(&self) -> Result<&Blocks<S>, Throw> {
        let Content::Array(blocks) = &self.content else {
            return Err(Throw);
        };
        if blocks.has_nullish() {
            return Err(Throw);
        }
        Ok(blocks)
    }

    /// The toolCall ids of an assistant's content, in block order; `Err` where
    /// the reference's `.filter`/`.map` over the content throws.
    pub fn tool_call_ids(&self) -> Result<Vec<&JsIdOf<S>>, Throw> {
        Ok(self.checked_blocks()?.call_ids().collect())
    }
}

/// The id of a toolCall block.
pub fn call_id<S>(block: &Block<S>) -> Option<&JsIdOf<S>> {
    match block {
        Block::ToolCall { id } => Some(id),
        _ => None,
    }
}

/// A content block of a tool result, as its text reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultBlock {
    /// `null` / `undefined`: reading its `type` throws.
    Nullish,
    /// An object whose `type` is `"image"`: a marker line (`[image returned: ...]`).
    Image,
    /// An object whose `type` is `"text"`: its `text` (`""` when nullish, else `String(text)`).
    Text,
    /// Anything else: no part of the text.
    Other,
}

/// What a nullish content block does to a tool result's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NullBlock {
    /// The text throws (the chain scan reads the reference's `block.type` of every block).
    Throw,
    /// The block is skipped (the render's decision already threw for such a message; a
    /// capture reads `block?.type`).
    Skip,
}

/// The blocks a tool result's text is made of, by position in `content`: a marker line per
/// image block first, in block order, then the text blocks (pi-condense 2.11.2); the text is
/// their parts joined with `"\n"`.
pub fn tool_result_text_blocks(
    blocks: impl IntoIterator<Item = ResultBlock>,
    null_block: NullBlock,
) -> Result<Vec<(usize, ResultBlock)>, Throw> {
    let mut images = Vec::new();
    let mut texts = Vec::new();
    for (at, block) in blocks.into_iter().enumerate() {
        match block {
            ResultBlock::Nullish if null_block == NullBlock::Throw => return Err(Throw),
            ResultBlock::Image => images.push((at, block)),
            ResultBlock::Text => texts.push((at, block)),
            ResultBlock::Nullish | ResultBlock::Other => {}
        }
    }
    images.extend(texts);
    Ok(images)
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

/// One member of a toolCall block that may hold its arguments, in the order
/// `args = block.input ?? block.args ?? block.arguments ?? {}` tries them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgsMember {
    /// `block.input`
    Input,
    /// `block.args`
    Args,
    /// `block.arguments`
    Arguments,
}

/// What a reader finds in one [`ArgsMember`] of a toolCall block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgsRead<P> {
    /// The member is missing (`undefined`).
    Absent,
    /// `null`.
    Null,
    /// An object whose `path` is a string: that string.
    Path(P),
    /// Anything else: an object without a string `path`, an array, a string, a number...
    Other,
}

/// The member `block.input ?? block.arguments` reads: the args chain detection asks
/// `isProtected` about (no `args` member, and no `{}`): `input` unless it is missing or
/// `null`, else `arguments` as it is.
pub fn detection_args_member(input_is_nullish: bool) -> ArgsMember {
    if input_is_nullish {
        ArgsMember::Arguments
    } else {
        ArgsMember::Input
    }
}

/// The member `block.input ?? block.args ?? block.arguments` selects: the first, in that
/// order, that is neither missing nor `null` (`is_nullish` is asked only until one is not);
/// `None` when all are (`?? {}`: the args are an empty object).
pub fn call_args_member(mut is_nullish: impl FnMut(ArgsMember) -> bool) -> Option<ArgsMember> {
    [ArgsMember::Input, ArgsMember::Args, ArgsMember::Arguments]
        .into_iter()
        .find(|&member| !is_nullish(member))
}

/// `args.path` when it is a string, for `args = block.input ?? block.args ?? block.arguments
/// ?? {}` ([`call_args_member`]): the path the protected-path rule reads of a toolCall block
/// (`render::supersede::SupMsg::Assistant`). `read` reads one member, only until one is neither missing nor
/// `null`.
pub fn call_args_path<P>(mut read: impl FnMut(ArgsMember) -> ArgsRead<P>) -> Option<P> {
    let mut path = None;
    call_args_member(|member| match read(member) {
        ArgsRead::Absent | ArgsRead::Null => true,
        ArgsRead::Path(p) => {
            path = Some(p);
            false
        }
        ArgsRead::Other => false,
    });
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_results_text_is_its_image_markers_then_its_text_blocks() {
        use ResultBlock::{Image, Nullish, Other, Text};
        let blocks = [Text, Other, Image, Text, Nullish, Image];
        assert_eq!(
            tool_result_text_blocks(blocks, NullBlock::Skip),
            Ok(vec![(2, Image), (5, Image), (0, Text), (3, Text)])
        );
        assert_eq!(
            tool_result_text_blocks(blocks, NullBlock::Throw),
            Err(Throw)
        );
        assert_eq!(tool_result_text_blocks([], NullBlock::Throw), Ok(vec![]));
    }

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

    #[test]
    fn call_args_path_takes_the_first_member_that_is_not_nullish() {
        use ArgsRead::{Absent, Null, Other, Path};
        let path = |reads: [ArgsRead<&'static str>; 3]| {
            let mut asked = Vec::new();
            let found = call_args_path(|m| {
                asked.push(m);
                reads[asked.len() - 1]
            });
            (found, asked.len())
        };
        // `input` decides when it is neither missing nor null, even without a path.
        assert_eq!(path([Path("a"), Path("b"), Path("c")]), (Some("a"), 1));
        assert_eq!(path([Other, Path("b"), Path("c")]), (None, 1));
        // Missing and null both fall through, to `args` and then to `arguments`.
        assert_eq!(path([Absent, Path("b"), Path("c")]), (Some("b"), 2));
        assert_eq!(path([Null, Other, Path("c")]), (None, 2));
        assert_eq!(path([Null, Absent, Path("c")]), (Some("c"), 3));
        assert_eq!(path([Absent, Null, Other]), (None, 3));
        // `?? {}`: nothing at all has no path.
        assert_eq!(path([Absent, Absent, Absent]), (None, 3));
        assert_eq!(path([Null, Null, Null]), (None, 3));
    }

    #[test]
    fn detection_reads_input_else_arguments() {
        assert_eq!(detection_args_member(false), ArgsMember::Input);
        assert_eq!(detection_args_member(true), ArgsMember::Arguments);
    }

    #[test]
    fn call_args_member_is_the_first_member_that_is_not_nullish() {
        use ArgsMember::{Args, Arguments, Input};
        let member = |nullish: [bool; 3]| {
            let mut asked = 0;
            let found = call_args_member(|_| {
                asked += 1;
                nullish[asked - 1]
            });
            (found, asked)
        };
        assert_eq!(member([false, false, false]), (Some(Input), 1));
        assert_eq!(member([true, false, false]), (Some(Args), 2));
        assert_eq!(member([true, true, false]), (Some(Arguments), 3));
        assert_eq!(member([true, true, true]), (None, 3));
    }
}

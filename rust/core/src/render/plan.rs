//! The plan a render hands back to the binding.

use std::collections::HashSet;

use crate::js::JsField;
use crate::jsstr::{JsSlice, JsStr};

/// A piece of a JS string that the binding assembles. Values copied from an
/// input message are referred to by message index, so their exact text
/// (lone surrogates included) never passes through Rust.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// literal text
    Lit(String),
    /// `String(messages[i].toolCallId)`
    ToolCallId(usize),
    /// `String(messages[i].toolName)`
    ToolName(usize),
    /// the tool-result text of input message i: its `type === "text"` blocks'
    /// `text` joined with `"\n"` (`""` when `content` is not an array)
    ToolResultText(usize),
    /// text holding lone surrogates, as generalized UTF-8 (see [`crate::jsstr`])
    Wtf8(Vec<u8>),
}

impl Piece {
    /// Text that may hold lone surrogates: literal when it holds none.
    pub fn js<'a>(text: impl Into<JsSlice<'a>>) -> Piece {
        let text = text.into();
        match text.exact() {
            None => Piece::Lit(text.as_str().to_owned()),
            Some(bytes) => Piece::Wtf8(bytes.to_vec()),
        }
    }
}

/// A string built from [`Piece`]s.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Text(pub Vec<Piece>);

impl Text {
    /// Appends literal text (merged into a trailing literal).
    pub fn lit(&mut self, s: &str) {
        if let Some(Piece::Lit(last)) = self.0.last_mut() {
            last.push_str(s);
        } else {
            self.0.push(Piece::Lit(s.to_owned()));
        }
    }

    /// Appends text that may hold lone surrogates (literal when it holds none).
    pub fn push_js<'a>(&mut self, text: impl Into<JsSlice<'a>>) {
        self.push(Piece::js(text));
    }

    /// Appends `String(field)`, lone surrogates of a string field included.
    pub fn push_field(&mut self, field: &JsField) {
        match field {
            JsField::Str(s) => self.push_js(s),
            other => self.lit(&other.js_string()),
        }
    }

    /// Appends a piece.
    pub fn push(&mut self, piece: Piece) {
        match piece {
            Piece::Lit(s) => self.lit(&s),
            other => self.0.push(other),
        }
    }

    /// Appends another text.
    pub fn extend(&mut self, other: &Text) {
        for piece in &other.0 {
            self.push(piece.clone());
        }
    }

    /// The text when it is all literal.
    pub fn as_literal(&self) -> Option<&str> {
        match self.0.as_slice() {
            [] => Some(""),
            [Piece::Lit(s)] => Some(s),
            _ => None,
        }
    }
}

/// A toolCall block of an assistant whose `arguments` are purged: copied with every string
/// longer than 200 UTF-16 units replaced by `<purged-errored-args size="<its length>"/>`
/// (pi-condense 2.11.3, #19; the binding makes the copy).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Purge {
    /// index of the block in the message's `content`
    pub block: usize,
    /// `JSON.stringify(arguments).length`
    pub size: usize,
}

/// One slot of the output list.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// the input message at this index, the very same object
    Keep(usize),
    /// the stub that replaces toolResult `src` (04 section 3.2): keys
    /// `role, toolCallId, toolName, content, isError, timestamp`, the copied
    /// ones omitted where `src` lacks them
    Stub {
        /// the replaced input message
        src: usize,
        /// the stub text
        text: Text,
    },
    /// a superseded protected read (phase 1b, pi-condense 2.10.3): a copy of toolResult
    /// `src` with `content` one text block and `isError: false`, its other members kept
    Superseded {
        /// the replaced input message
        src: usize,
        /// the stub text
        text: Text,
    },
    /// a shallow copy of assistant `src` whose `content` is rebuilt
    Assistant {
        /// the copied input message
        src: usize,
        /// toolCall blocks whose arguments are purged (phase 2), ascending
        purged: Vec<Purge>,
        /// every `type === "thinking"` block removed (phase 3)
        strip_thinking: bool,
    },
    /// the synthetic `<compressed-chain>` user message (04 section 5.4), stamped with the
    /// entry's `compressedAt` (absent: the key is omitted)
    Synthetic {
        /// `content[0].text`
        text: Text,
        /// `ChainEntry::slot` of the entry: the binding reads `compressedAt` from it (its
        /// original object holds the exact value)
        chain_slot: usize,
    },
}

// Every render moves a slot per message through its phases: keep them small.
const _: () = assert!(std::mem::size_of::<Item>() <= 40);

impl Item {
    /// The input message this slot stands for, if any.
    pub fn src(&self) -> Option<usize> {
        match self {
            Item::Keep(i)
            | Item::Stub { src: i, .. }
            | Item::Superseded { src: i, .. }
            | Item::Assistant { src: i, .. } => Some(*i),
            Item::Synthetic { .. } => None,
        }
    }
}

/// The kinds of `context-prune-diagnostic` a render reports (08 section 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DiagnosticKind {
    /// a chain entry whose range did not resolve, or was skipped as nested/duplicate
    UnresolvedRange,
    /// a resolved range whose ids differ from the recorded ones
    RangeIdMismatch,
    /// orphan toolResults removed by phase 4
    OrphanSweep,
}

impl DiagnosticKind {
    /// The persisted `kind` string.
    pub fn as_str(self) -> &'static str {
        match self {
            DiagnosticKind::UnresolvedRange => "unresolved-range",
            DiagnosticKind::RangeIdMismatch => "range-id-mismatch",
            DiagnosticKind::OrphanSweep => "orphan-sweep",
        }
    }
}

/// One `report(kind, dedupKey, detail)` call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// the kind
    pub kind: DiagnosticKind,
    /// the dedup key (the sink dedups on `kind + ":" + dedupKey`), in key form
    /// (`crate::jsstr::key_form_units`: a lone surrogate of a block id keeps its own key)
    pub dedup_key: String,
    /// the persisted detail text (lone surrogates of the ids it names kept)
    pub detail: JsStr,
}

/// Keeps the first report per `(kind, dedupKey)`, as a fresh sink would.
pub(crate) fn dedup(diagnostics: Vec<Diagnostic>) -> Vec<Diagnostic> {
    let mut seen = HashSet::new();
    diagnostics
        .into_iter()
        .filter(|d| seen.insert((d.kind, d.dedup_key.clone())))
        .collect()
}

/// The outcome of one render.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderPlan {
    /// `None`: nothing changed (or the reference threw) - the caller's list is
    /// returned as is. `Some`: the output slots, in order.
    pub items: Option<Vec<Item>>,
    /// diagnostics reported during the render, in order, first per dedup key
    pub diagnostics: Vec<Diagnostic>,
    /// the reference throws on this input (04 section 6.1)
    pub threw: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_merges_literals() {
        let mut t = Text::default();
        t.lit("a");
        t.lit("b");
        t.push(Piece::ToolCallId(3));
        t.push(Piece::Lit("c".into()));
        assert_eq!(
            t.0,
            vec![
                Piece::Lit("ab".into()),
                Piece::ToolCallId(3),
                Piece::Lit("c".into())
            ]
        );
        assert_eq!(t.as_literal(), None);
        assert_eq!(Text::default().as_literal(), Some(""));
    }

    #[test]
    fn dedup_keeps_first_per_kind_and_key() {
        let d = |kind, key: &str, detail: &str| Diagnostic {
            kind,
            dedup_key: key.into(),
            detail: detail.into(),
        };
        let out = dedup(vec![
            d(DiagnosticKind::UnresolvedRange, "b1", "first"),
            d(DiagnosticKind::RangeIdMismatch, "b1", "other kind"),
            d(DiagnosticKind::UnresolvedRange, "b1", "second"),
        ]);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].detail, "first");
        assert_eq!(out[1].detail, "other kind");
    }
}

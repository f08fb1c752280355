//! The synthetic `<compressed-chain>` message of an accepted range (04 section 5.4): the
//! chain summary text with its `{bN}` placeholders substituted, and the protected outputs
//! of the range.

use std::borrow::Cow;

use crate::collections::{FastMap, FastSet};
use crate::index::chain_facts::ChainFacts;
use crate::index::{BodyIndex, ChainEntry};
use crate::js::JsField;
use crate::jsstr::{JsBuf, JsStr};
use crate::placeholders::substitute_block_refs_into;
use crate::render::plan::{Item, Piece, Text};
use crate::render::state::RenderState;
use crate::render::stub_replace::Phase1;
use crate::render::{Lazy, Throw};
use crate::view::{JsIdOf, MsgView};

/// `Set.prototype.has` between a persisted id and a message id (SameValueZero).
pub(super) fn field_is_id<S: AsRef<str>>(field: &JsField, id: &JsIdOf<S>) -> bool {
    match (field, id) {
        (JsField::Str(a), JsIdOf::Str(b)) => a == b.as_ref(),
        (JsField::Number(a), JsIdOf::Num(b)) => JsIdOf::<&str>::num(*a) == JsIdOf::Num(*b),
        (JsField::Bool(a), JsIdOf::Bool(b)) => a == b,
        (JsField::Null, JsIdOf::Null) | (JsField::Absent, JsIdOf::Undefined) => true,
        _ => false,
    }
}

/// Tool-result text of the message now standing at `i` (a stub's text may be deferred by
/// `phase1`).
pub(super) fn result_text<S, L: Lazy + ?Sized>(
    msgs: &[MsgView<S>],
    slots: Option<&[Item]>,
    i: usize,
    lazy: &mut L,
    phase1: Option<&Phase1<'_>>,
) -> Result<Text, Throw> {
    if let Some(Item::Stub { text, .. }) = slots.and_then(|s| s.get(i)) {
        let deferred = phase1.and_then(|p| p.stub_text(i));
        return Ok(deferred.unwrap_or_else(|| text.clone()));
    }
    if let Some(Item::Superseded { text, .. }) = slots.and_then(|s| s.get(i)) {
        return Ok(text.clone());
    }
    let throws = lazy
        .text_throws(i)
        .unwrap_or_else(|| msgs.get(i).is_some_and(|m| m.text_throws));
    if throws {
        return Err(Throw);
    }
    Ok(Text(vec![Piece::ToolResultText(i)]))
}

/// Chain summary texts and block-id lookups of one render, each computed once.
pub(super) struct Summaries<'s, 'e, St: RenderState + ?Sized> {
    state: &'s St,
    /// the registry (`getChainEntries()`; `None`: read from the state when a placeholder
    /// needs it)
    entries: Option<&'e [&'s ChainEntry]>,
    /// block id -> the entry with that id, when exactly one entry of the registry has it
    /// (built for the first `{bN}` placeholder)
    by_block: Option<FastMap<&'s str, Option<&'s ChainEntry>>>,
    /// `chain_summary_text` of the entries placeholders named, by entry address
    texts: FastMap<usize, Option<Cow<'s, JsStr>>>,
    /// the per-batch bodies by key, when the state does not keep them so (built on first use)
    local_bodies: Option<BodyIndex>,
    /// lookup hint into the bodies' keys (chains ask for them in about the bodies' order)
    body_hint: usize,
    /// scratch: positions of the bodies an entry's keys hit
    hits: Vec<usize>,
}

impl<'s, 'e, St: RenderState + ?Sized> Summaries<'s, 'e, St> {
    pub(super) fn new(state: &'s St, entries: Option<&'e [&'s ChainEntry]>) -> Self {
        Summaries {
            state,
            entries,
            by_block: None,
            texts: FastMap::default(),
            local_bodies: None,
            body_hint: 0,
            hits: Vec::new(),
        }
    }

    /// [`Summaries::text`] for the entry being rendered (nothing else asks for its text
    /// unless a placeholder names it, so it is not memoized).
    fn own_text(&mut self, entry: &'s ChainEntry) -> Option<Cow<'s, JsStr>> {
        match &entry.range_summary_text {
            JsField::Str(text) => Some(Cow::Borrowed(text)),
            _ => self.compute_text(entry),
        }
    }

    /// `chainSummaryText(entry)` (memoized); `None` where the reference throws.
    pub(super) fn text(&mut self, entry: &'s ChainEntry) -> Option<Cow<'s, JsStr>> {
        if let JsField::Str(text) = &entry.range_summary_text {
            return Some(Cow::Borrowed(text));
        }
        let address = entry as *const ChainEntry as usize;
        if let Some(text) = self.texts.get(&address) {
            return text.clone();
        }
        let text = self.compute_text(entry);
        self.texts.insert(address, text.clone());
        text
    }

    /// `chainSummaryText(entry)` through the key index of the per-batch bodies: the
    /// bodies sharing a key with the entry, in body order, without repeated texts,
    /// joined with a blank line.
    fn compute_text(&mut self, entry: &'s ChainEntry) -> Option<Cow<'s, JsStr>> {
        let state = self.state;
        let Some(bodies) = state.summary_bodies() else {
            return state.chain_summary_text(entry).map(Cow::Owned);
        };
        match &entry.range_summary_text {
            JsField::Str(text) => return Some(Cow::Borrowed(text)),
            other if !other.is_nullish() => return Some(Cow::Owned(other.js_string().into())),
            _ => {}
        }
        let by_key = match state.body_index() {
            Some(index) => index,
            None => self
                .local_bodies
                .get_or_insert_with(|| BodyIndex::new(bodies)),
        };
        let hits = &mut self.hits;
        hits.clear();
        // The keys as the state keeps them (stored together), else read from the entry.
        match state.chain_facts(entry) {
            Some(facts) => {
                for key in facts.summary_keys?.iter() {
                    hits.extend_from_slice(by_key.positions_near(key, &mut self.body_hint));
                }
            }
            None => {
                for key in entry.summary_keys()?.iter().filter_map(JsField::as_str) {
                    hits.extend_from_slice(by_key.positions_near(key, &mut self.body_hint));
                }
            }
        }
        hits.sort_unstable();
        hits.dedup();
        let mut texts: Vec<&JsStr> = Vec::with_capacity(hits.len());
        // A chain usually has a few bodies: a scan then beats a hash set. Texts compare
        // exactly (lone surrogates included).
        let few = hits.len() <= 16;
        let mut seen: FastSet<&[u8]> = FastSet::default();
        for &i in hits.iter() {
            if let Some(body) = bodies.get(i) {
                let text = &body.text;
                let new = if few {
                    !texts.iter().any(|t| t.wtf8() == text.wtf8())
                } else {
                    seen.insert(text.wtf8())
                };
                if new {
                    texts.push(text);
                }
            }
        }
        Some(match texts.as_slice() {
            [] => Cow::Owned(JsStr::default()),
            [one] => Cow::Borrowed(*one),
            _ => {
                let mut out = JsBuf::new();
                for (n, text) in texts.iter().enumerate() {
                    if n > 0 {
                        out.push_str("\n\n");
                    }
                    out.push(*text);
                }
                Cow::Owned(out.finish())
            }
        })
    }

    /// `findChainEntryByBlockId(b)`.
    fn entry_by_block_id(&mut self, block_id: &str) -> Option<&'s ChainEntry> {
        let (state, entries) = (self.state, self.entries);
        let by_block = self.by_block.get_or_insert_with(|| {
            let mut by_block: FastMap<&'s str, Option<&'s ChainEntry>> = FastMap::default();
            let registry: Vec<&'s ChainEntry> = match entries {
                Some(entries) => entries.to_vec(),
                None => state.chain_entries(),
            };
            for entry in registry {
                if let Some(block) = entry.block_id.as_str() {
                    by_block
                        .entry(block)
                        .and_modify(|found| *found = None)
                        .or_insert(Some(entry));
                }
            }
            by_block
        });
        match by_block.get(block_id) {
            Some(Some(entry)) => Some(entry),
            // Shared by several entries (or unknown here): the registry decides.
            _ => self.state.chain_entry_by_block_id(block_id),
        }
    }
}

/// `<compressed-chain id="..." tools="...">\n<body><protected>\n</compressed-chain>`
/// (04 section 5.4) for an accepted `entry`; `Err` where the reference throws building it.
pub(super) fn synthetic_text_with<'s, St: RenderState + ?Sized>(
    summaries: &mut Summaries<'s, '_, St>,
    entry: &'s ChainEntry,
    facts: &ChainFacts<'_>,
    protected: &[(Piece, Text)],
) -> Result<Text, Throw> {
    if let Some(prefix) = facts.prefix {
        // Head and summary known in advance: no lookup, no placeholder to substitute.
        let mut out = JsBuf::with_capacity(prefix.len() + SYNTHETIC_TAIL.len());
        out.push_str(prefix);
        return Ok(finish_synthetic(out, protected));
    }
    let summary = summaries.own_text(entry).ok_or(Throw)?;
    synthetic_text_from(summaries, entry, facts, &summary, protected)
}

/// The end of every synthetic text.
const SYNTHETIC_TAIL: &str = "\n</compressed-chain>";

fn synthetic_text_from<'s, St: RenderState + ?Sized>(
    summaries: &mut Summaries<'s, '_, St>,
    entry: &ChainEntry,
    facts: &ChainFacts<'_>,
    summary: &JsStr,
    protected: &[(Piece, Text)],
) -> Result<Text, Throw> {
    let head = facts.head.ok_or(Throw)?;
    let mut out = JsBuf::with_capacity(head.len() + summary.len() + SYNTHETIC_TAIL.len());
    match facts.exact_head {
        Some(exact) => out.push(exact),
        None => out.push_str(head),
    }
    let mut lookup_threw = false;
    let lookup = |block_id: &str| {
        let other = summaries.entry_by_block_id(block_id)?;
        match summaries.text(other) {
            Some(text) if !text.is_empty() => Some(text),
            Some(_) => None,
            None => {
                lookup_threw = true;
                None
            }
        }
    };
    substitute_block_refs_into(&mut out, summary.into(), lookup, entry.block_id.as_str());
    if lookup_threw {
        return Err(Throw);
    }
    Ok(finish_synthetic(out, protected))
}

/// The synthetic text from its head and summary (`out`): the protected outputs, then the
/// closing tag.
fn finish_synthetic(out: JsBuf, protected: &[(Piece, Text)]) -> Text {
    let mut text = Text::default();
    text.push_js(&out.finish());
    for (tool, output) in protected {
        text.lit("\n\n<protected-output tool=\"");
        text.push(tool.clone());
        text.lit("\">\n");
        text.extend(output);
        text.lit("\n</protected-output>");
    }
    text.lit(SYNTHETIC_TAIL);
    text
}

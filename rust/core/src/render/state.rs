//! The pruner-state lookups render needs (03 sections 5 and 8), as a trait so
//! the phases can be tested against a small in-memory state.
//!
//! Records and chain entries are the index's own [`Record`] / [`ChainEntry`]
//! summaries: their fields keep JS value semantics ([`JsField`]), which the
//! stub and synthetic templates interpolate.

pub use crate::index::Summarized;
use crate::index::chain_facts::ChainFacts;
use crate::index::{BodyIndex, ChainEntry, Index, Record, SummaryBody};
use crate::js::JsField;
use crate::jsstr::JsStr;

/// Read access to the pruner state during a render.
pub trait RenderState {
    /// `isSummarized(key)`: the key is indexed or is a dedup alias (strict).
    fn is_summarized(&self, key: &str) -> bool;
    /// False only when no key can be summarized and no bare id is a legacy record (an
    /// empty index): phase 1 then replaces nothing and needs no lookup.
    fn may_stub(&self) -> bool {
        true
    }
    /// `isSummarized(key)`, and when it holds, `record(key)` and `short_ref(key)`: phase 1's
    /// questions about a tool result, which a state may answer with one lookup.
    fn summarized(&self, key: &str) -> Option<Summarized<'_>> {
        self.is_summarized(key).then(|| Summarized {
            record: self.record(key),
            short_ref: self.short_ref(key),
            short_ref_exact: self.short_ref_exact(key),
        })
    }
    /// [`RenderState::summarized`] for keys asked roughly in the order the state learned
    /// them: `hint` is the state's to carry from one call to the next (start it at 0).
    fn summarized_near(&self, key: &str, _hint: &mut usize) -> Option<Summarized<'_>> {
        self.summarized(key)
    }
    /// `hasLegacyBareRecord(id)`: a pure-legacy bare id.
    fn has_legacy_bare_record(&self, id: &str) -> bool;
    /// `getRecord(x)` (through `resolveToolCallId`).
    fn record(&self, key: &str) -> Option<&Record>;
    /// `getShortRefForToolCallId(key)`.
    fn short_ref(&self, key: &str) -> Option<&str>;
    /// [`RenderState::short_ref`] with its lone surrogates, when it holds some.
    fn short_ref_exact(&self, _key: &str) -> Option<&JsStr> {
        None
    }
    /// `getChainEntries()`: registry values ascending by `startUserTimestamp`.
    fn chain_entries(&self) -> Vec<&ChainEntry>;
    /// `getChainEntries().length`.
    fn chain_count(&self) -> usize {
        self.chain_entries().len()
    }
    /// `findChainEntryByBlockId(b)`: first registry value in insertion order.
    fn chain_entry_by_block_id(&self, block_id: &str) -> Option<&ChainEntry>;
    /// The chain entry stored at `slot` ([`ChainEntry::slot`]), in the registry or not.
    fn chain_at(&self, slot: usize) -> Option<&ChainEntry>;
    /// The registry entries among those stored at `slots` (ascending), in registry order
    /// ([`RenderState::chain_entries`]'s); `None` when the state cannot tell without listing
    /// the registry.
    fn registry_subset(&self, _slots: &[usize]) -> Option<Vec<&ChainEntry>> {
        None
    }
    /// Whether the entry at `slot` is in the registry now (one of
    /// [`RenderState::chain_entries`]); `None` when the state cannot tell without listing them.
    fn chain_registered(&self, _slot: usize) -> Option<bool> {
        None
    }
    /// Render's `chainSummaryText(entry)`: `rangeSummaryText` when present,
    /// else the per-batch text for `droppedOccurrenceKeys ?? droppedToolCallIds`;
    /// `None` where the reference throws (neither key list is an array).
    fn chain_summary_text(&self, entry: &ChainEntry) -> Option<JsStr>;
    /// The per-batch summary bodies in append order, when the state keeps them as
    /// [`SummaryBody`] values: render then indexes them by key once instead of scanning
    /// them for every chain entry.
    fn summary_bodies(&self) -> Option<&[SummaryBody]> {
        None
    }
    /// [`RenderState::summary_bodies`] by covered key, when the state keeps that index
    /// (render builds it otherwise).
    fn body_index(&self) -> Option<&BodyIndex> {
        None
    }
    /// The [`ChainFacts`] of `entry`, when the state keeps them for its entries (render
    /// derives them otherwise).
    fn chain_facts(&self, _entry: &ChainEntry) -> Option<ChainFacts<'_>> {
        None
    }
}

impl RenderState for Index {
    fn is_summarized(&self, key: &str) -> bool {
        Index::is_summarized(self, key)
    }

    fn may_stub(&self) -> bool {
        // `is_summarized` reads the key index and the dedup aliases; a legacy bare record
        // is a key of the index.
        self.record_count() > 0 || self.alias_count() > 0
    }

    fn summarized(&self, key: &str) -> Option<Summarized<'_>> {
        Index::summarized(self, key)
    }

    fn summarized_near(&self, key: &str, hint: &mut usize) -> Option<Summarized<'_>> {
        Index::summarized_near(self, key, hint)
    }

    fn has_legacy_bare_record(&self, id: &str) -> bool {
        Index::has_legacy_bare_record(self, id)
    }

    fn record(&self, key: &str) -> Option<&Record> {
        // An indexed key resolves to itself: one lookup instead of two.
        self.record_by_key(key).or_else(|| self.get_record(key))
    }

    fn short_ref(&self, key: &str) -> Option<&str> {
        Index::short_ref(self, key)
    }

    fn short_ref_exact(&self, key: &str) -> Option<&JsStr> {
        Index::short_ref_exact(self, key)
    }

    fn chain_entries(&self) -> Vec<&ChainEntry> {
        Index::chain_entries(self)
    }

    fn chain_count(&self) -> usize {
        Index::chain_count(self)
    }

    fn chain_entry_by_block_id(&self, block_id: &str) -> Option<&ChainEntry> {
        self.find_chain_by_block_id(block_id)
    }

    fn chain_at(&self, slot: usize) -> Option<&ChainEntry> {
        Index::chain_at(self, slot)
    }

    fn chain_registered(&self, slot: usize) -> Option<bool> {
        Some(Index::chain_registered(self, slot))
    }

    fn registry_subset(&self, slots: &[usize]) -> Option<Vec<&ChainEntry>> {
        Some(Index::registry_subset(self, slots))
    }

    fn chain_summary_text(&self, entry: &ChainEntry) -> Option<JsStr> {
        Index::chain_summary_text(self, entry)
    }

    fn summary_bodies(&self) -> Option<&[SummaryBody]> {
        Some(Index::summary_bodies(self))
    }

    fn body_index(&self) -> Option<&BodyIndex> {
        Some(Index::body_index(self))
    }

    fn chain_facts(&self, entry: &ChainEntry) -> Option<ChainFacts<'_>> {
        Index::chain_facts(self, entry)
    }
}

/// `${value ?? fallback}`.
pub(crate) fn template_or(value: &JsField, fallback: &str) -> String {
    if value.is_nullish() {
        fallback.to_owned()
    } else {
        value.js_string()
    }
}

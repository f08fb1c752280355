//! The pruner-state lookups render needs (03 sections 5 and 8), as a trait so
//! the phases can be tested against a small in-memory state.
//!
//! Records and chain entries are the index's own [`Record`] / [`ChainEntry`]
//! summaries: their fields keep JS value semantics ([`JsField`]), which the
//! stub and synthetic templates interpolate.

use crate::index::{ChainEntry, Index, JsField, Record};

/// Read access to the pruner state during a render.
pub trait RenderState {
    /// `isSummarized(key)`: the key is indexed or is a dedup alias (strict).
    fn is_summarized(&self, key: &str) -> bool;
    /// `hasLegacyBareRecord(id)`: a pure-legacy bare id.
    fn has_legacy_bare_record(&self, id: &str) -> bool;
    /// `getRecord(x)` (through `resolveToolCallId`).
    fn record(&self, key: &str) -> Option<&Record>;
    /// `getShortRefForToolCallId(key)`.
    fn short_ref(&self, key: &str) -> Option<&str>;
    /// `getChainEntries()`: registry values ascending by `startUserTimestamp`.
    fn chain_entries(&self) -> Vec<&ChainEntry>;
    /// `findChainEntryByBlockId(b)`: first registry value in insertion order.
    fn chain_entry_by_block_id(&self, block_id: &str) -> Option<&ChainEntry>;
    /// Render's `chainSummaryText(entry)`: `rangeSummaryText` when present,
    /// else the per-batch text for `droppedOccurrenceKeys ?? droppedToolCallIds`;
    /// `None` where the reference throws (neither key list is an array).
    fn chain_summary_text(&self, entry: &ChainEntry) -> Option<String>;
}

impl RenderState for Index {
    fn is_summarized(&self, key: &str) -> bool {
        Index::is_summarized(self, key)
    }

    fn has_legacy_bare_record(&self, id: &str) -> bool {
        Index::has_legacy_bare_record(self, id)
    }

    fn record(&self, key: &str) -> Option<&Record> {
        self.get_record(key)
    }

    fn short_ref(&self, key: &str) -> Option<&str> {
        Index::short_ref(self, key)
    }

    fn chain_entries(&self) -> Vec<&ChainEntry> {
        Index::chain_entries(self)
    }

    fn chain_entry_by_block_id(&self, block_id: &str) -> Option<&ChainEntry> {
        self.find_chain_by_block_id(block_id)
    }

    fn chain_summary_text(&self, entry: &ChainEntry) -> Option<String> {
        Index::chain_summary_text(self, entry)
    }
}

/// `${value ?? fallback}`.
pub fn template_or(value: &JsField, fallback: &str) -> String {
    if value.is_nullish() {
        fallback.to_owned()
    } else {
        value.js_string()
    }
}

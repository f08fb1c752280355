//! The pruner index: the in-memory state rebuilt from a branch's `context-prune-*` entries
//! (spec 02, 03) and consulted on every render.
//!
//! [`Index`] holds, like the reference's `ToolCallIndexer`:
//! - tool-call records by occurrence key (`id@resultTimestamp`, or the bare id for legacy
//!   records) and the bare id -> keys reverse map (`records`);
//! - short refs `tN` in both directions and the next-ref counter (`refs`);
//! - content-hash dedup canonicals and dedup aliases (`aliases`);
//! - per-batch summary bodies (`summaries`);
//! - the compressed-chain registry and the block-id counter `bN` (`chains`).
//!
//! [`reconstruct::Replay`] rebuilds an index from a branch in the reference's order (first
//! pass in branch order, dedup aliases in a second pass), and also picks the frontier and stats
//! entries (last valid / last wins).
//!
//! # Lookup API (all `&self`, no allocation unless stated)
//!
//! | reference | here |
//! |---|---|
//! | `isSummarized(key)` | [`Index::is_summarized`] |
//! | `isSummarized` + `getRecord` + `getShortRefForToolCallId` of one key | [`Index::summarized`] |
//! | `hasLegacyBareRecord(id)` | [`Index::has_legacy_bare_record`] |
//! | `resolveToolCallId(x)` | [`Index::resolve`] |
//! | `getRecord(x)` | [`Index::get_record`] |
//! | `lookupToolCalls(xs)` | [`Index::lookup_records`] |
//! | `getRecordsForId(x)` | [`Index::records_for_id`] |
//! | `getShortRefForToolCallId(key)` | [`Index::short_ref`] |
//! | `getToolRefsForToolCallIds(keys)` | [`Index::tool_refs_for`] |
//! | `hasPerBatchSummaryCoveringAny(keys)` | [`Index::has_summary_covering_any`] |
//! | `getPerBatchSummariesForToolCallIds(keys)` | [`Index::per_batch_summaries`] |
//! | `getPerBatchSummaryTextForToolCallIds(keys)` | [`Index::per_batch_summary_text`] |
//! | `getChainEntries()` | [`Index::chain_entries`] |
//! | `findChainEntryByBlockId(b)` | [`Index::find_chain_by_block_id`] |
//! | render's `chainSummaryText(entry)` | [`Index::chain_summary_text`] |
//! | `lookupByContent(name, text)` | [`Index::lookup_by_content`] (takes the hash) |
//!
//! Strings: keys, ids and short refs are held in *key form* ([`crate::jsstr::key_form_units`]):
//! a Rust `String` that is the JS string itself unless it holds a lone surrogate (or U+FDD0),
//! and differs for JS strings that differ (`"a\ud800"` and `"a\u{FFFD}"` keep two slots).
//! Bindings convert every id and key to key form on the way in, for lookups too, and back on
//! the way out; texts (summary bodies, previews) are [`JsStr`]s. Record bodies (result text, args) are not held here: a record carries a
//! `slot` that the binding maps to the original record object.

pub(crate) mod aliases;
pub(crate) mod chain_facts;
pub(crate) mod chains;
pub(crate) mod changes;
pub mod entries;
pub mod reconstruct;
pub(crate) mod records;
pub(crate) mod refs;
pub(crate) mod summaries;
pub(crate) mod table;

use crate::collections::{Chunked, FastMap};
use crate::jsstr::JsStr;
use chain_facts::ChainFactsTable;

pub use crate::js::JsField;
pub use chain_facts::{ChainFacts, StrList};
pub use chains::ChainEntry;
pub use changes::Change;
pub use reconstruct::{EntryKind, Rebuilt, Replay, STATE_ENTRY_TYPES, classify};
pub use records::{HashSeed, Occurrence, Record, Summarized};
pub use refs::ShortRef;
pub use summaries::{BodyIndex, SummaryBody};
pub(crate) use table::StrTable;

/// Everything the index holds under one key string (an occurrence key, a legacy bare key, a
/// dedup alias key or a dedup original), so that one hash lookup answers `isSummarized`,
/// `getRecord` and `getShortRefForToolCallId` together.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct KeyFacts {
    /// `index[key]`: the slot of the current record indexed under the key.
    record: Option<usize>,
    /// `aliasToOriginal[key]`: the id of the original key, when the key is a dedup alias.
    original: Option<usize>,
    /// `keyToAlias[key]`: the id of the short ref in `Index::shorts`.
    short: Option<usize>,
}

/// The pruner index (reference `ToolCallIndexer` + the block-ref issuer). See the module docs
/// for the lookup API.
///
/// The reference's string-keyed maps over keys (`index`, `aliasToOriginal`, `keyToAlias`) are
/// held as one interned key table with `KeyFacts` per key, plus the insertion orders the
/// reference's `Map` iteration shows; `aliasToKey` likewise over the interned short refs.
#[derive(Clone, Debug)]
pub struct Index {
    /// Every record ever indexed, in indexing order; `Record::slot` is the position here.
    /// Records overwritten under the same key stay (their slot is no longer referenced by
    /// any key), so slots are stable.
    /// Held in chunks (no doubling: a `Vec` of them kept up to twice their size at hand).
    records: Chunked<Record>,
    /// Every key string the index knows; `facts[id]` is what it knows about key `id`.
    keys: StrTable,
    /// Per key id (same length as `keys`).
    facts: Vec<KeyFacts>,
    /// Ids of the keys of `index`, in first-insertion order (a re-indexed key keeps its place).
    indexed: Vec<usize>,
    /// Ids of the dedup alias keys (`aliasToOriginal`), in first-insertion order.
    aliased: Vec<usize>,
    /// bare id -> every key indexed under it (insertion order, no duplicates).
    bare_id_to_keys: FastMap<String, Vec<String>>,
    /// Number of strings that are both a key of `index` and a bare id of `bare_id_to_keys`:
    /// `hasLegacyBareRecord` holds for none while it is zero (the usual case), which spares
    /// render a lookup per tool result that is not summarized.
    bare_keyed: usize,
    /// Every short ref string the index knows (`aliasToKey` keys, `keyToAlias` values).
    shorts: StrTable,
    /// Per short ref id: `aliasToKey[short]` as a key id (same length as `shorts`).
    short_keys: Vec<Option<usize>>,
    /// Ids of the short refs of `aliasToKey`, in first-registration order.
    short_order: Vec<usize>,
    /// The exact text of the short refs that hold lone surrogates, by short ref id.
    exact_shorts: FastMap<usize, JsStr>,
    /// Next `t<N>` number (a JS number; may exceed 2^53 or be infinite on absurd input).
    next_short: f64,
    /// content hash -> first key seen with it.
    hash_to_original: FastMap<String, String>,
    /// Hash seeds not yet applied to `hash_to_original`, in order (see [`HashSeed`]).
    pending_seeds: Vec<(String, HashSeed)>,
    /// Per-batch summary bodies, in append order.
    summary_bodies: Vec<SummaryBody>,
    /// `summary_bodies` by covered key.
    body_index: BodyIndex,
    /// Every chain entry ever registered; `ChainEntry::slot` is the position here.
    chains: Chunked<ChainEntry>,
    /// Per entry of `chains` (same positions): what render derives from the entry alone.
    chain_facts: ChainFactsTable,
    /// startUserTimestamp (normalized bits) -> position in `chains` of the current entry,
    /// in first-registration order.
    chain_registry: Vec<(u64, usize)>,
    /// startUserTimestamp (normalized bits) -> position in `chain_registry`.
    registry_at: FastMap<u64, usize>,
    /// Names this index's registry: another index, a clone or a cleared index has another
    /// epoch, and while the epoch stays the registry only gains keys.
    registry_epoch: Epoch,
    /// The positions in `chains` of the registry's entries in `getChainEntries()` order
    /// (ascending `startUserTimestamp`).
    chain_order: Vec<usize>,
    /// Next `b<N>` number.
    next_block: f64,
    /// What changed, in order (`changes`).
    changes: Vec<Change>,
}

impl Default for Index {
    fn default() -> Self {
        Self::new()
    }
}

impl Index {
    /// An empty index (`nextShortAliasNumber = 1`, next block `b1`).
    pub fn new() -> Self {
        Index {
            records: Chunked::default(),
            keys: StrTable::new(),
            facts: Vec::new(),
            indexed: Vec::new(),
            aliased: Vec::new(),
            bare_id_to_keys: FastMap::default(),
            bare_keyed: 0,
            shorts: StrTable::new(),
            short_keys: Vec::new(),
            short_order: Vec::new(),
            exact_shorts: FastMap::default(),
            next_short: 1.0,
            hash_to_original: FastMap::default(),
            pending_seeds: Vec::new(),
            summary_bodies: Vec::new(),
            body_index: BodyIndex::default(),
            chains: Chunked::default(),
            chain_facts: ChainFactsTable::new(),
            chain_registry: Vec::new(),
            registry_at: FastMap::default(),
            registry_epoch: Epoch::default(),
            chain_order: Vec::new(),
            next_block: 1.0,
            changes: Vec::new(),
        }
    }

    /// Resets every field (reference `reconstructFromSession` step 1 + block counter reset).
    pub fn clear(&mut self) {
        let changes = std::mem::take(&mut self.changes);
        *self = Index::new();
        self.changes = changes;
        self.log(Change::Everything);
    }

    /// The id of `key`, interning it (with empty facts) first if needed.
    fn key_id(&mut self, key: &str) -> usize {
        let id = self.keys.intern(key);
        if self.facts.len() < self.keys.len() {
            self.facts.resize(self.keys.len(), KeyFacts::default());
        }
        id
    }

    /// The facts of `key` (`None`: the index never saw it).
    fn facts_of(&self, key: &str) -> Option<&KeyFacts> {
        self.facts.get(self.keys.find(key)?)
    }

    /// The id of short ref `short`, interning it first if needed.
    fn short_id(&mut self, short: &str) -> usize {
        let id = self.shorts.intern(short);
        if self.short_keys.len() < self.shorts.len() {
            self.short_keys.resize(self.shorts.len(), None);
        }
        id
    }
}

/// A number no other [`Epoch`] holds (a clone draws a new one).
#[derive(Debug)]
struct Epoch(u64);

impl Default for Epoch {
    fn default() -> Self {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Epoch(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }
}

impl Clone for Epoch {
    fn clone(&self) -> Self {
        Epoch::default()
    }
}

/// JS `Math.max(a, b)`: NaN if either is NaN.
pub(crate) fn js_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn js_max_propagates_nan() {
        assert!(js_max(1.0, f64::NAN).is_nan());
        assert_eq!(js_max(1.0, 3.0), 3.0);
    }
}

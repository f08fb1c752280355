//! The pruner index: the in-memory state rebuilt from a branch's `context-prune-*` entries
//! (spec 02, 03) and consulted on every render.
//!
//! [`Index`] holds, like the reference's `ToolCallIndexer`:
//! - tool-call records by occurrence key (`id@resultTimestamp`, or the bare id for legacy
//!   records) and the bare id -> keys reverse map ([`records`]);
//! - short refs `tN` in both directions and the next-ref counter ([`refs`]);
//! - content-hash dedup canonicals and dedup aliases ([`aliases`]);
//! - per-batch summary bodies ([`summaries`]);
//! - the compressed-chain registry and the block-id counter `bN` ([`chains`]).
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
//! Strings: keys and ids are Rust `String`s. A Python/JS string holding a lone surrogate cannot
//! be one; bindings convert such strings lossily (U+FFFD) on the way in, for lookups too, so
//! both sides agree. Record bodies (result text, args) are not held here: a record carries a
//! `slot` that the binding maps to the original record object.

pub mod aliases;
pub mod chains;
pub mod field;
pub mod reconstruct;
pub mod records;
pub mod refs;
pub mod summaries;

use std::collections::HashMap;

pub use chains::ChainEntry;
pub use field::JsField;
pub use reconstruct::{classify, EntryKind, Rebuilt, Replay};
pub use records::{HashSeed, Occurrence, Record};
pub use refs::ShortRef;
pub use summaries::SummaryBody;

/// A string-keyed map that iterates in first-insertion order; re-inserting a key replaces its
/// value in place (JS `Map` semantics). Nothing is ever removed except by [`OrderedMap::clear`].
#[derive(Clone, Debug, Default)]
pub struct OrderedMap<V> {
    positions: HashMap<String, usize>,
    entries: Vec<(String, V)>,
}

impl<V> OrderedMap<V> {
    /// An empty map.
    pub fn new() -> Self {
        OrderedMap {
            positions: HashMap::new(),
            entries: Vec::new(),
        }
    }

    /// The value under `key`.
    pub fn get(&self, key: &str) -> Option<&V> {
        let &i = self.positions.get(key)?;
        self.entries.get(i).map(|(_, v)| v)
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.positions.contains_key(key)
    }

    /// Sets `key` to `value`, keeping the key's original position when it exists.
    pub fn insert(&mut self, key: &str, value: V) {
        if let Some(&i) = self.positions.get(key) {
            if let Some(slot) = self.entries.get_mut(i) {
                slot.1 = value;
                return;
            }
        }
        self.positions.insert(key.to_owned(), self.entries.len());
        self.entries.push((key.to_owned(), value));
    }

    /// Entries in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &V)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Removes everything.
    pub fn clear(&mut self) {
        self.positions.clear();
        self.entries.clear();
    }
}

/// The pruner index (reference `ToolCallIndexer` + the block-ref issuer). See the module docs
/// for the lookup API.
#[derive(Clone, Debug)]
pub struct Index {
    /// Every record ever indexed, in indexing order; `Record::slot` is the position here.
    /// Records overwritten under the same key stay (their slot is no longer referenced by
    /// `index`), so slots are stable.
    records: Vec<Record>,
    /// occurrence key -> slot of the current record.
    index: OrderedMap<usize>,
    /// bare id -> every key indexed under it (insertion order, no duplicates).
    bare_id_to_keys: HashMap<String, Vec<String>>,
    /// short ref -> key.
    alias_to_key: OrderedMap<String>,
    /// key (or dedup alias key) -> short ref.
    key_to_alias: HashMap<String, String>,
    /// Next `t<N>` number (a JS number; may exceed 2^53 or be infinite on absurd input).
    next_short: f64,
    /// content hash -> first key seen with it.
    hash_to_original: HashMap<String, String>,
    /// Hash seeds not yet applied to `hash_to_original`, in order (see [`HashSeed`]).
    pending_seeds: Vec<(String, HashSeed)>,
    /// dedup alias key -> original key.
    alias_to_original: OrderedMap<String>,
    /// Per-batch summary bodies, in append order.
    summary_bodies: Vec<SummaryBody>,
    /// Every chain entry ever registered; `ChainEntry::slot` is the position here.
    chains: Vec<ChainEntry>,
    /// startUserTimestamp (normalized bits) -> position in `chains` of the current entry,
    /// in first-registration order.
    chain_registry: Vec<(u64, usize)>,
    /// Next `b<N>` number.
    next_block: f64,
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
            records: Vec::new(),
            index: OrderedMap::new(),
            bare_id_to_keys: HashMap::new(),
            alias_to_key: OrderedMap::new(),
            key_to_alias: HashMap::new(),
            next_short: 1.0,
            hash_to_original: HashMap::new(),
            pending_seeds: Vec::new(),
            alias_to_original: OrderedMap::new(),
            summary_bodies: Vec::new(),
            chains: Vec::new(),
            chain_registry: Vec::new(),
            next_block: 1.0,
        }
    }

    /// Resets every field (reference `reconstructFromSession` step 1 + block counter reset).
    pub fn clear(&mut self) {
        *self = Index::new();
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
    fn ordered_map_keeps_first_position_on_reinsert() {
        let mut m = OrderedMap::new();
        m.insert("a", 1);
        m.insert("b", 2);
        m.insert("a", 3);
        let got: Vec<_> = m.iter().map(|(k, v)| (k.to_owned(), *v)).collect();
        assert_eq!(got, vec![("a".to_owned(), 3), ("b".to_owned(), 2)]);
        assert_eq!(m.get("a"), Some(&3));
        assert_eq!(m.len(), 2);
        m.clear();
        assert!(m.is_empty());
        assert!(!m.contains_key("a"));
    }

    #[test]
    fn js_max_propagates_nan() {
        assert!(js_max(1.0, f64::NAN).is_nan());
        assert_eq!(js_max(1.0, 3.0), 3.0);
    }
}

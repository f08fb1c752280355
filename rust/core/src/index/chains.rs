//! The compressed-chain registry and the block-id issuer (spec 02 section 4, 03 sections 8
//! and 11).

use std::cmp::Ordering;

use super::chain_facts::ChainFacts;
use super::changes::Change;
use super::{Index, JsField, js_max};
use crate::js::{field::parse_int10, format_number};
use crate::jsstr::JsStr;

/// The fields of a `context-prune-chain` entry (`ChainCompressionEntry`) that render and the
/// flush read. `slot` names the original entry object in the caller's store.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ChainEntry {
    /// `blockId` (`b<N>`; truthy in every registered entry).
    pub block_id: JsField,
    /// `startUserTimestamp` (a number in every registered entry): the registry key.
    pub start_user_timestamp: f64,
    /// `finalAssistantTimestamp` (number, or `null` for never-written interrupted chains).
    pub final_assistant_timestamp: JsField,
    /// `droppedToolCallIds` when it is an array (diagnostic only at render).
    pub dropped_tool_call_ids: Option<Vec<JsField>>,
    /// `droppedOccurrenceKeys` when it is an array (absent before 2.6.0).
    pub dropped_occurrence_keys: Option<Vec<JsField>>,
    /// `protectedToolCallIds` when it is an array.
    pub protected_tool_call_ids: Option<Vec<JsField>>,
    /// `toolRefs` when it is an array.
    pub tool_refs: Option<Vec<JsField>>,
    /// `compressedAt` (the synthetic message timestamp).
    pub compressed_at: JsField,
    /// `rangeSummaryText` (absent before fusion existed).
    pub range_summary_text: JsField,
    /// `bodySource` (`"deterministic"` or absent).
    pub body_source: JsField,
    /// Position of this entry in the index's chain store; set by the index.
    pub slot: usize,
}

impl ChainEntry {
    /// The registry key of an entry whose `blockId` and `startUserTimestamp` were read raw:
    /// `Some(start)` iff `blockId` is truthy and `startUserTimestamp` is a number.
    pub fn accepted_start(block_id: &JsField, start_user_timestamp: &JsField) -> Option<f64> {
        if block_id.is_truthy() {
            start_user_timestamp.as_number()
        } else {
            None
        }
    }

    /// `toolRefs.join(",")` (nullish elements print as `""`); `None` if `toolRefs` is not an
    /// array (the reference would throw).
    pub fn tool_refs_joined(&self) -> Option<String> {
        let refs = self.tool_refs.as_ref()?;
        Some(
            refs.iter()
                .map(JsField::join_piece)
                .collect::<Vec<_>>()
                .join(","),
        )
    }

    /// `droppedOccurrenceKeys ?? droppedToolCallIds`: the keys the per-batch body lookup uses.
    pub fn summary_keys(&self) -> Option<&[JsField]> {
        self.dropped_occurrence_keys
            .as_deref()
            .or(self.dropped_tool_call_ids.as_deref())
    }
}

/// Registry key: `Map<number>` compares with SameValueZero (`-0` equals `0`).
fn registry_key(ts: f64) -> u64 {
    if ts == 0.0 {
        0f64.to_bits()
    } else if ts.is_nan() {
        f64::NAN.to_bits()
    } else {
        ts.to_bits()
    }
}

/// `parseInt(blockId.slice(1), 10)`.
fn block_number(block_id: &str) -> f64 {
    let mut chars = block_id.chars();
    match chars.next() {
        // slice(1) of a string opening with an astral character leaves a lone surrogate.
        Some(c) if c.len_utf16() == 2 => f64::NAN,
        Some(_) => parse_int10(chars.as_str()),
        None => f64::NAN,
    }
}

impl Index {
    /// `registerChain(entry)`: `chainRegistry[startUserTimestamp] = entry` (a later entry with
    /// the same start replaces the earlier one, keeping its registry position). Does not touch
    /// the block counter. Returns the stored entry.
    pub fn register_chain(&mut self, mut entry: ChainEntry) -> &ChainEntry {
        let slot = self.chains.len();
        entry.slot = slot;
        let start = entry.start_user_timestamp;
        let key = registry_key(start);
        match self
            .registry_at
            .get(&key)
            .and_then(|&at| self.chain_registry.get_mut(at))
        {
            Some(existing) => {
                let replaced = std::mem::replace(&mut existing.1, slot);
                self.chain_order.retain(|&s| s != replaced);
                self.changes.push(Change::Chain(replaced));
            }
            None => {
                self.registry_at.insert(key, self.chain_registry.len());
                self.chain_registry.push((key, slot));
            }
        }
        self.changes.push(Change::Chain(slot));
        self.chain_facts.push(&entry);
        self.chains.push(entry);
        // No two registry entries compare equal (equal bits share a registry key), so the
        // sorted position is unique and the order matches a stable sort of the registry.
        let chains = &self.chains;
        let at = self.chain_order.partition_point(|&s| {
            chains
                .get(s)
                .is_some_and(|e| e.start_user_timestamp.total_cmp(&start) == Ordering::Less)
        });
        self.chain_order.insert(at, slot);
        &self.chains[slot]
    }

    /// Registered entries in registry insertion order.
    fn registry_entries(&self) -> impl Iterator<Item = &ChainEntry> {
        self.chain_registry
            .iter()
            .filter_map(|&(_, slot)| self.chains.get(slot))
    }

    /// `getChainEntries()`: registry values sorted by `startUserTimestamp` ascending.
    pub fn chain_entries(&self) -> Vec<&ChainEntry> {
        self.chain_order
            .iter()
            .filter_map(|&slot| self.chains.get(slot))
            .collect()
    }

    /// What render derives from `entry` alone, computed when it was registered; `None` when
    /// `entry` is not an entry of this index.
    pub fn chain_facts(&self, entry: &ChainEntry) -> Option<ChainFacts<'_>> {
        let own = self.chains.get(entry.slot)?;
        if !std::ptr::eq(own, entry) {
            return None;
        }
        self.chain_facts.get(entry.slot)
    }

    /// Whether a chain starting at `start` is registered (`chainRegistry.has(start)`).
    pub fn is_chain_registered(&self, start: f64) -> bool {
        self.registry_at.contains_key(&registry_key(start))
    }

    /// Names the registry's state: while it stays the same, registered starts stay
    /// registered (the registry only gains keys).
    pub fn registry_epoch(&self) -> u64 {
        self.registry_epoch.0
    }

    /// Number of registered chains.
    pub fn chain_count(&self) -> usize {
        self.chain_registry.len()
    }

    /// The chain entry stored at `slot` (also entries since replaced).
    pub fn chain_at(&self, slot: usize) -> Option<&ChainEntry> {
        self.chains.get(slot)
    }

    /// Whether the entry at `slot` is in the registry (not replaced by a later entry of its
    /// start).
    pub fn chain_registered(&self, slot: usize) -> bool {
        self.chains
            .get(slot)
            .and_then(|e| self.registry_at.get(&registry_key(e.start_user_timestamp)))
            .and_then(|&at| self.chain_registry.get(at))
            .is_some_and(|&(_, registered)| registered == slot)
    }

    /// The registered entries among those stored at `slots`, in [`Index::chain_entries`]'s
    /// order (by `startUserTimestamp`: no two registered entries compare equal).
    pub fn registry_subset(&self, slots: &[usize]) -> Vec<&ChainEntry> {
        let mut out: Vec<&ChainEntry> = slots
            .iter()
            .filter(|&&slot| self.chain_registered(slot))
            .filter_map(|&slot| self.chains.get(slot))
            .collect();
        out.sort_by(|a, b| a.start_user_timestamp.total_cmp(&b.start_user_timestamp));
        out
    }

    /// `findChainEntryByBlockId(b)`: the first registry entry (insertion order) whose `blockId`
    /// is the string `b`.
    pub fn find_chain_by_block_id(&self, block_id: &str) -> Option<&ChainEntry> {
        self.registry_entries()
            .find(|e| e.block_id.as_str() == Some(block_id))
    }

    /// Render's `chainSummaryText(entry)`: `rangeSummaryText` when present (even `""`), else the
    /// per-batch text for `droppedOccurrenceKeys ?? droppedToolCallIds`. `None` when neither key
    /// list is an array (the reference throws there, discarding the render).
    pub fn chain_summary_text(&self, entry: &ChainEntry) -> Option<JsStr> {
        match &entry.range_summary_text {
            JsField::Str(text) => return Some(text.clone()),
            other if !other.is_nullish() => return Some(other.js_string().into()),
            _ => {}
        }
        let keys: Vec<&str> = entry
            .summary_keys()?
            .iter()
            .filter_map(JsField::as_str)
            .collect();
        Some(self.per_batch_summary_text(&keys))
    }

    /// Block-ref issuer `rebuildFrom(getChainEntries().map(e => e.blockId))`: `next = 1` with no
    /// entries, else `max(parseInt(id.slice(1), 10)) + 1` (NaN if any id has no number; gaps are
    /// not filled). Entries whose `blockId` is not a string are skipped.
    pub fn rebuild_block_counter(&mut self) {
        let numbers: Vec<f64> = self
            .chain_entries()
            .iter()
            .filter_map(|e| e.block_id.as_str().map(block_number))
            .collect();
        self.next_block = match numbers.split_first() {
            None => 1.0,
            Some((&first, rest)) => rest.iter().fold(first, |m, &n| js_max(m, n)) + 1.0,
        };
    }

    /// The next block number `N` of `b<N>`.
    pub fn next_block_number(&self) -> f64 {
        self.next_block
    }

    /// Block-ref issuer `issue()`: `"b" + next`, then `next += 1` (a number issued for a chain
    /// whose entry then fails to append is burned).
    pub fn issue_block_id(&mut self) -> String {
        let id = format!("b{}", format_number(self.next_block));
        self.next_block += 1.0;
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(block: &str, start: f64) -> ChainEntry {
        ChainEntry {
            block_id: JsField::str(block),
            start_user_timestamp: start,
            final_assistant_timestamp: JsField::Number(start + 10.0),
            tool_refs: Some(vec![JsField::str("t1"), JsField::Null, JsField::str("t2")]),
            ..ChainEntry::default()
        }
    }

    #[test]
    fn registry_sorted_by_start_and_replaced_by_start() {
        let mut ix = Index::new();
        ix.register_chain(chain("b2", 300.0));
        ix.register_chain(chain("b1", 100.0));
        ix.register_chain(chain("b3", 300.0));
        assert_eq!(ix.chain_count(), 2);
        let ids: Vec<_> = ix
            .chain_entries()
            .iter()
            .map(|e| e.block_id.js_string())
            .collect();
        assert_eq!(ids, vec!["b1", "b3"]);
        assert!(ix.find_chain_by_block_id("b2").is_none());
        assert_eq!(
            ix.find_chain_by_block_id("b3")
                .map(|e| e.start_user_timestamp),
            Some(300.0)
        );
        assert_eq!(
            ix.chain_at(0).map(|e| e.block_id.js_string()).as_deref(),
            Some("b2")
        );
    }

    #[test]
    fn registered_starts_and_the_registry_epoch() {
        let mut ix = Index::new();
        let epoch = ix.registry_epoch();
        assert!(!ix.is_chain_registered(0.0));
        ix.register_chain(chain("b1", -0.0));
        ix.register_chain(chain("b2", f64::NAN));
        ix.register_chain(chain("b3", 0.0));
        assert!(ix.is_chain_registered(0.0) && ix.is_chain_registered(-0.0));
        assert!(ix.is_chain_registered(-f64::NAN));
        assert!(!ix.is_chain_registered(1.0));
        assert_eq!(ix.chain_count(), 2);
        assert_eq!(ix.registry_epoch(), epoch);
        let copy = ix.clone();
        assert_ne!(copy.registry_epoch(), epoch);
        assert!(copy.is_chain_registered(0.0));
        ix.clear();
        assert_ne!(ix.registry_epoch(), epoch);
        assert!(!ix.is_chain_registered(0.0));
    }

    #[test]
    fn chain_order_is_a_stable_sort_of_the_registry() {
        let starts = [
            5.0,
            -0.0,
            f64::NAN,
            3.0,
            0.0,
            f64::INFINITY,
            -f64::NAN,
            5.0,
            -7.5,
            f64::NEG_INFINITY,
            3.0,
            1e300,
        ];
        let mut ix = Index::new();
        for (i, &start) in starts.iter().enumerate() {
            ix.register_chain(chain(&format!("b{i}"), start));
            let mut expected: Vec<&ChainEntry> = ix.registry_entries().collect();
            expected.sort_by(|a, b| a.start_user_timestamp.total_cmp(&b.start_user_timestamp));
            let slots = |v: Vec<&ChainEntry>| v.iter().map(|e| e.slot).collect::<Vec<_>>();
            assert_eq!(slots(ix.chain_entries()), slots(expected), "after {i}");
        }
        assert_eq!(ix.chain_count(), 8);
    }

    #[test]
    fn chain_facts_belong_to_the_index_entry() {
        let mut ix = Index::new();
        ix.register_chain(chain("b1", 1.0));
        ix.register_chain(chain("b2", 1.0));
        let current = ix.chain_entries()[0];
        assert_eq!(ix.chain_facts(current).map(|f| f.block_key), Some("b2"));
        let replaced = ix.chain_at(0).and_then(|e| ix.chain_facts(e));
        assert_eq!(replaced.map(|f| f.block_key), Some("b1"));
        // A copy is not the index's entry, even with the same slot.
        let copy = current.clone();
        assert!(ix.chain_facts(&copy).is_none());
    }

    #[test]
    fn negative_zero_start_is_the_same_key() {
        let mut ix = Index::new();
        ix.register_chain(chain("b1", 0.0));
        ix.register_chain(chain("b2", -0.0));
        assert_eq!(ix.chain_count(), 1);
    }

    #[test]
    fn acceptance_rule() {
        let n = JsField::Number(5.0);
        assert_eq!(
            ChainEntry::accepted_start(&JsField::str("b1"), &n),
            Some(5.0)
        );
        assert_eq!(ChainEntry::accepted_start(&JsField::str(""), &n), None);
        assert_eq!(ChainEntry::accepted_start(&JsField::Absent, &n), None);
        assert_eq!(
            ChainEntry::accepted_start(&JsField::str("b1"), &JsField::str("5")),
            None
        );
    }

    #[test]
    fn block_counter_is_max_plus_one_with_gaps() {
        let mut ix = Index::new();
        ix.rebuild_block_counter();
        assert_eq!(ix.next_block_number(), 1.0);
        ix.register_chain(chain("b7", 100.0));
        ix.register_chain(chain("b3", 200.0));
        ix.rebuild_block_counter();
        assert_eq!(ix.issue_block_id(), "b8");
        assert_eq!(ix.issue_block_id(), "b9");
        // registerChain does not move the counter.
        ix.register_chain(chain("b50", 300.0));
        assert_eq!(ix.next_block_number(), 10.0);
    }

    #[test]
    fn non_numeric_block_id_poisons_the_counter() {
        let mut ix = Index::new();
        ix.register_chain(chain("b2", 100.0));
        ix.register_chain(chain("bx", 200.0));
        ix.rebuild_block_counter();
        assert!(ix.next_block_number().is_nan());
        assert_eq!(ix.issue_block_id(), "bNaN");
        assert_eq!(block_number("b12abc"), 12.0);
        assert!(block_number("😀1").is_nan());
    }

    #[test]
    fn tool_refs_and_summary_text() {
        let mut ix = Index::new();
        ix.push_summary_body(vec!["a@1".to_owned()], "S1".to_owned());
        ix.push_summary_body(vec!["a".to_owned()], "LEGACY".to_owned());
        let mut e = chain("b1", 1.0);
        assert_eq!(e.tool_refs_joined().as_deref(), Some("t1,,t2"));
        // Neither key list: the reference throws.
        assert_eq!(ix.chain_summary_text(&e), None);
        // Legacy entry: droppedToolCallIds are the keys (bare-keyed bodies).
        e.dropped_tool_call_ids = Some(vec![JsField::str("a")]);
        assert_eq!(ix.chain_summary_text(&e).as_deref(), Some("LEGACY"));
        e.dropped_occurrence_keys = Some(vec![JsField::str("a@1")]);
        assert_eq!(ix.chain_summary_text(&e).as_deref(), Some("S1"));
        e.range_summary_text = JsField::str("");
        assert_eq!(ix.chain_summary_text(&e).as_deref(), Some(""));
        e.range_summary_text = JsField::Null;
        assert_eq!(ix.chain_summary_text(&e).as_deref(), Some("S1"));
    }
}

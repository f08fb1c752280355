//! Reconstruction (spec 03 section 3): the order rules of rebuilding an [`Index`] from a
//! branch, plus the frontier (last valid wins) and stats (last wins) pick.
//!
//! The caller walks the branch root-first, reads the few fields each entry kind needs into the
//! views of this module, and feeds them to a [`Replay`] in branch order; [`Replay::finish`] runs
//! the dedup-alias second pass and rebuilds the block counter.

use super::records::key_with_field;
use super::{ChainEntry, HashSeed, Index, JsField, Record, ShortRef};
use crate::jsstr::JsStr;

/// The entry `type`s that can hold pruner state ([`classify`] reads no other): `custom`
/// entries (index, chains, aliases, frontier, stats) and `custom_message` (summaries).
pub const STATE_ENTRY_TYPES: [&str; 2] = [ENTRY_CUSTOM, ENTRY_CUSTOM_MESSAGE];
const ENTRY_CUSTOM: &str = "custom";
const ENTRY_CUSTOM_MESSAGE: &str = "custom_message";

/// `customType` of every entry kind the reconstruction reads.
pub(crate) const CUSTOM_TYPE_INDEX: &str = "context-prune-index";
/// Summary messages (`custom_message`).
pub(crate) const CUSTOM_TYPE_SUMMARY: &str = "context-prune-summary";
/// Compressed chains.
pub(crate) const CUSTOM_TYPE_CHAIN: &str = "context-prune-chain";
/// Dedup aliases.
pub(crate) const CUSTOM_TYPE_DEDUP_ALIAS: &str = "context-prune-dedup-alias";
/// Prune frontier.
pub(crate) const CUSTOM_TYPE_FRONTIER: &str = "context-prune-frontier";
/// Summarizer stats.
pub(crate) const CUSTOM_TYPE_STATS: &str = "context-prune-stats";

/// What an entry of the branch is to the reconstruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// `custom` / `context-prune-index`.
    Index,
    /// `custom_message` / `context-prune-summary`.
    Summary,
    /// `custom` / `context-prune-chain`.
    Chain,
    /// `custom` / `context-prune-dedup-alias`.
    DedupAlias,
    /// `custom` / `context-prune-frontier`.
    Frontier,
    /// `custom` / `context-prune-stats`.
    Stats,
    /// Anything else (messages, other custom types, diagnostics, flush metrics): ignored.
    Other,
}

/// Classifies an entry by its `type` and `customType` (strict string equality; `None` when
/// the field is missing or not a string).
pub fn classify(entry_type: Option<&str>, custom_type: Option<&str>) -> EntryKind {
    match (entry_type, custom_type) {
        (Some(ENTRY_CUSTOM), Some(CUSTOM_TYPE_INDEX)) => EntryKind::Index,
        (Some(ENTRY_CUSTOM), Some(CUSTOM_TYPE_CHAIN)) => EntryKind::Chain,
        (Some(ENTRY_CUSTOM), Some(CUSTOM_TYPE_DEDUP_ALIAS)) => EntryKind::DedupAlias,
        (Some(ENTRY_CUSTOM), Some(CUSTOM_TYPE_FRONTIER)) => EntryKind::Frontier,
        (Some(ENTRY_CUSTOM), Some(CUSTOM_TYPE_STATS)) => EntryKind::Stats,
        (Some(ENTRY_CUSTOM_MESSAGE), Some(CUSTOM_TYPE_SUMMARY)) => EntryKind::Summary,
        _ => EntryKind::Other,
    }
}

/// One record of an index entry: the record view and, for the hash seeding, where its hash
/// comes from (`None`: the record cannot be hashed, e.g. a non-string `resultText` without
/// `contentHash`; the reference would throw there).
pub type ReplayRecord = (Record, Option<HashSeed>);

/// The raw `data` of a `context-prune-dedup-alias` entry.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct AliasData {
    /// `newToolCallId`.
    pub new_tool_call_id: JsField,
    /// `newResultTimestamp?`.
    pub new_result_timestamp: JsField,
    /// `originalToolCallId`.
    pub original_tool_call_id: JsField,
    /// `originalResultTimestamp?`.
    pub original_result_timestamp: JsField,
}

/// The result of a reconstruction.
#[derive(Clone, Debug)]
pub struct Rebuilt {
    /// The rebuilt index (block counter included).
    pub index: Index,
    /// Branch position (as passed to [`Replay::frontier_entry`]) of the frontier entry in
    /// effect: the last one whose `data.lastAttemptedToolCallId` is truthy.
    pub frontier: Option<usize>,
    /// Branch position of the stats entry in effect: the last one with truthy `data`.
    pub stats: Option<usize>,
}

/// Reconstruction in progress. Feed entries in branch order.
#[derive(Clone, Debug, Default)]
pub struct Replay {
    index: Index,
    aliases: Vec<(String, String)>,
    frontier: Option<usize>,
    stats: Option<usize>,
}

impl Replay {
    /// An empty reconstruction (every field cleared, `nextShortAliasNumber = 1`).
    pub fn new() -> Self {
        Replay::default()
    }

    /// The index built so far (the dedup-alias pass has not run yet).
    pub fn index(&self) -> &Index {
        &self.index
    }

    /// A `context-prune-index` entry whose `data.toolCalls` is an array (entries without it
    /// contribute nothing, except that a backfilled entry still registers its `refs`). Each
    /// record is indexed under its occurrence key; unless the entry is backfilled its hash is
    /// seeded (first seen wins). A backfilled entry with a `refs` array registers those refs raw.
    pub fn index_entry(
        &mut self,
        records: impl IntoIterator<Item = ReplayRecord>,
        backfilled: bool,
        refs: Option<&[ShortRef]>,
    ) {
        for (record, seed) in records {
            let key = self.index.index_record(record).key.clone();
            if !backfilled && let Some(seed) = seed {
                self.index.queue_hash_seed(&key, seed);
            }
        }
        if backfilled && let Some(refs) = refs {
            self.index.register_refs(refs);
        }
    }

    /// A `context-prune-summary` message: `refs` are the normalized refs (`toolCallRefs`, or
    /// the legacy `toolCallIds` as `{shortId: id, toolCallId: id}`), `text` the body. Registers
    /// the refs and pushes the body iff `text` is non-empty, keyed by every ref's occurrence key.
    /// Returns whether a body was pushed.
    pub fn summary_entry(&mut self, refs: &[ShortRef], text: impl Into<JsStr>) -> bool {
        self.index.register_refs(refs);
        let keys = refs.iter().map(ShortRef::key).collect();
        self.index.push_summary_body(keys, text)
    }

    /// A `context-prune-chain` entry already accepted (see [`ChainEntry::accepted_start`]).
    /// Returns whether it was registered (its `blockId` is truthy).
    pub fn chain_entry(&mut self, entry: ChainEntry) -> bool {
        if !entry.block_id.is_truthy() {
            return false;
        }
        self.index.register_chain(entry);
        true
    }

    /// A `context-prune-dedup-alias` entry: collected for the second pass iff both ids are
    /// truthy. Non-string ids (never written by the reference) are skipped. Returns whether
    /// the entry was collected.
    pub fn alias_entry(&mut self, data: &AliasData) -> bool {
        if !data.new_tool_call_id.is_truthy() || !data.original_tool_call_id.is_truthy() {
            return false;
        }
        let (Some(new_id), Some(original_id)) = (
            data.new_tool_call_id.as_str(),
            data.original_tool_call_id.as_str(),
        ) else {
            return false;
        };
        self.aliases.push((
            key_with_field(new_id, &data.new_result_timestamp),
            key_with_field(original_id, &data.original_result_timestamp),
        ));
        true
    }

    /// A `context-prune-frontier` entry at branch position `position`: it becomes the frontier
    /// iff `data` is truthy and `data.lastAttemptedToolCallId` is truthy. Returns whether it did.
    pub fn frontier_entry(
        &mut self,
        position: usize,
        data_truthy: bool,
        last_attempted_id: &JsField,
    ) -> bool {
        let valid = data_truthy && last_attempted_id.is_truthy();
        if valid {
            self.frontier = Some(position);
        }
        valid
    }

    /// A `context-prune-stats` entry at branch position `position`: it wins iff `data` is truthy.
    /// Returns whether it did.
    pub fn stats_entry(&mut self, position: usize, data_truthy: bool) -> bool {
        if data_truthy {
            self.stats = Some(position);
        }
        data_truthy
    }

    /// Runs the dedup-alias second pass (in branch order, after every other entry, so an alias
    /// shares its original's short ref whichever entry came first) and rebuilds the block
    /// counter from the chain registry.
    pub fn finish(mut self) -> Rebuilt {
        for (new_key, original_key) in std::mem::take(&mut self.aliases) {
            self.index.apply_alias(&new_key, &original_key);
        }
        self.index.rebuild_block_counter();
        self.index.forget_changes();
        Rebuilt {
            index: self.index,
            frontier: self.frontier,
            stats: self.stats,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, ts: Option<f64>) -> Record {
        let mut r = Record::new(id, ts.map_or(JsField::Absent, JsField::Number));
        r.timestamp = JsField::Number(1.0);
        r
    }

    fn known(h: &str) -> Option<HashSeed> {
        Some(HashSeed::Known(h.to_owned()))
    }

    fn alias(new: (&str, Option<f64>), orig: (&str, Option<f64>)) -> AliasData {
        let ts = |t: Option<f64>| t.map_or(JsField::Absent, JsField::Number);
        AliasData {
            new_tool_call_id: JsField::str(new.0),
            new_result_timestamp: ts(new.1),
            original_tool_call_id: JsField::str(orig.0),
            original_result_timestamp: ts(orig.1),
        }
    }

    #[test]
    fn classify_matches_type_and_custom_type() {
        assert_eq!(
            classify(Some("custom"), Some("context-prune-index")),
            EntryKind::Index
        );
        assert_eq!(
            classify(Some("custom_message"), Some("context-prune-summary")),
            EntryKind::Summary
        );
        // A summary customType on a plain custom entry is not a summary.
        assert_eq!(
            classify(Some("custom"), Some("context-prune-summary")),
            EntryKind::Other
        );
        assert_eq!(
            classify(Some("custom_message"), Some("context-prune-index")),
            EntryKind::Other
        );
        assert_eq!(
            classify(Some("custom"), Some("context-prune-diagnostic")),
            EntryKind::Other
        );
        assert_eq!(classify(Some("message"), None), EntryKind::Other);
        assert_eq!(
            classify(None, Some("context-prune-index")),
            EntryKind::Other
        );
    }

    #[test]
    fn alias_before_summary_still_shares_the_ref() {
        let mut replay = Replay::new();
        replay.index_entry([(record("orig", Some(100.0)), known("H"))], false, None);
        assert!(replay.alias_entry(&alias(("dup", Some(200.0)), ("orig", Some(100.0)))));
        replay.summary_entry(&[ShortRef::new("t4", "orig", Some(100.0))], "S".to_owned());
        let ix = replay.finish().index;
        assert_eq!(ix.short_ref("dup@200"), Some("t4"));
        assert!(ix.is_summarized("dup@200"));
        assert_eq!(ix.next_short_ref_number(), 5.0);
    }

    #[test]
    fn legacy_alias_uses_bare_keys() {
        let mut replay = Replay::new();
        replay.index_entry([(record("old", None), known("H"))], false, None);
        replay.summary_entry(&[ShortRef::new("t1", "old", None)], "S".to_owned());
        replay.alias_entry(&alias(("new", None), ("old", None)));
        let ix = replay.finish().index;
        assert_eq!(ix.original_of("new"), Some("old"));
        assert_eq!(ix.short_ref("new"), Some("t1"));
        assert!(ix.has_legacy_bare_record("old"));
    }

    #[test]
    fn alias_needs_both_ids() {
        let mut replay = Replay::new();
        assert!(!replay.alias_entry(&alias(("", None), ("a", None))));
        let mut missing = alias(("a", None), ("b", None));
        missing.original_tool_call_id = JsField::Absent;
        assert!(!replay.alias_entry(&missing));
        assert_eq!(replay.finish().index.alias_count(), 0);
    }

    #[test]
    fn backfilled_records_never_seed_and_register_raw_refs() {
        let mut replay = Replay::new();
        let refs = [ShortRef::new("t3", "bf", Some(50.0))];
        replay.index_entry([(record("bf", Some(50.0)), known("H"))], true, Some(&refs));
        replay.index_entry([(record("later", Some(60.0)), known("H"))], false, None);
        let mut ix = replay.finish().index;
        ix.resolve_hash_seeds(|_| None);
        assert_eq!(ix.lookup_by_content("H"), Some("later@60"));
        assert_eq!(ix.short_ref("bf@50"), Some("t3"));
        assert_eq!(ix.resolve("t3"), Some("bf@50"));
        assert_eq!(ix.next_short_ref_number(), 4.0);
    }

    #[test]
    fn non_backfilled_refs_field_is_ignored() {
        let mut replay = Replay::new();
        let refs = [ShortRef::new("t3", "x", Some(5.0))];
        replay.index_entry([(record("x", Some(5.0)), known("H"))], false, Some(&refs));
        let ix = replay.finish().index;
        assert_eq!(ix.short_ref("x@5"), None);
        assert_eq!(ix.next_short_ref_number(), 1.0);
    }

    #[test]
    fn summary_bodies_keep_refs_without_registering_empty_ones() {
        let mut replay = Replay::new();
        replay.summary_entry(
            &[
                ShortRef::new("", "a", Some(1.0)),
                ShortRef::new("t2", "b", None),
            ],
            "BODY".to_owned(),
        );
        replay.summary_entry(&[ShortRef::new("t9", "c", None)], String::new());
        let ix = replay.finish().index;
        assert_eq!(ix.summary_count(), 1);
        assert_eq!(
            ix.summary_bodies()[0].keys,
            vec!["a@1".to_owned(), "b".to_owned()]
        );
        // The empty-body summary still registered its ref.
        assert_eq!(ix.short_ref("c"), Some("t9"));
        assert_eq!(ix.next_short_ref_number(), 10.0);
    }

    #[test]
    fn frontier_last_valid_and_stats_last_wins() {
        let mut replay = Replay::new();
        replay.frontier_entry(1, true, &JsField::str("tc1"));
        replay.frontier_entry(2, true, &JsField::str(""));
        replay.frontier_entry(3, false, &JsField::Absent);
        replay.stats_entry(4, true);
        replay.stats_entry(5, false);
        let rebuilt = replay.finish();
        assert_eq!(rebuilt.frontier, Some(1));
        assert_eq!(rebuilt.stats, Some(4));
    }

    #[test]
    fn chains_and_block_counter() {
        let mut replay = Replay::new();
        for (b, start) in [("b1", 10.0), ("b4", 30.0), ("b2", 20.0)] {
            replay.chain_entry(ChainEntry {
                block_id: JsField::str(b),
                start_user_timestamp: start,
                ..ChainEntry::default()
            });
        }
        let mut ix = replay.finish().index;
        assert_eq!(ix.chain_count(), 3);
        assert_eq!(ix.issue_block_id(), "b5");
    }
}

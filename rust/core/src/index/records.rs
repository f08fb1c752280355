//! Records by occurrence key, the bare-id reverse map, resolution and the record lookups
//! (spec 03 sections 2, 5, 9), plus the content-hash canonicals (section 7).

use std::cmp::Ordering;

use super::changes::Change;
use super::{Index, JsField, KeyFacts};
use crate::jsstr::JsStr;
use crate::keys::{VerdictMemo, format_occ_key, parse_occ_key};

/// The fields of one persisted `ToolCallRecord` that decisions read (spec 02 section 1).
///
/// The record's body (`args`, `resultText`) stays with the caller: `slot` names the record
/// object in the caller's store (for the Python binding: the original record dict).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Record {
    /// Provider (bare) id: `toolCallId`.
    pub tool_call_id: String,
    /// `toolName` (render prints it with JS template semantics, `undefined` when absent).
    pub tool_name: JsField,
    /// `args.path` when it is a string (the protected-path predicate's input).
    pub args_path: Option<String>,
    /// `resultTimestamp` as persisted (a number on 2.6.0+ records; absent on legacy ones).
    pub result_timestamp: JsField,
    /// `timestamp` (batch timestamp).
    pub timestamp: JsField,
    /// `turnIndex`.
    pub turn_index: JsField,
    /// `isError`.
    pub is_error: JsField,
    /// `spillPath` (a truthy value selects the spill stub).
    pub spill_path: JsField,
    /// `spillBytes`.
    pub spill_bytes: JsField,
    /// `resultPreview`.
    pub result_preview: JsField,
    /// The occurrence key this record is indexed under; set by the index.
    pub key: String,
    /// Position of this record in the index's record store; set by the index.
    pub slot: usize,
    /// The protection verdict of its tool name and path under the latest compiled rule
    /// that judged it (a record is never edited once indexed; a clone starts empty).
    pub protection: VerdictMemo,
}

impl Record {
    /// A record for `tool_call_id` with the given `resultTimestamp` (other fields absent).
    pub fn new(tool_call_id: impl Into<String>, result_timestamp: JsField) -> Self {
        Record {
            tool_call_id: tool_call_id.into(),
            result_timestamp,
            ..Record::default()
        }
    }

    /// `occKey(toolCallId, resultTimestamp)`: the bare id when the timestamp is absent,
    /// else `id@String(ts)` (the reference does not check the type here).
    pub fn occurrence_key(&self) -> String {
        key_with_field(&self.tool_call_id, &self.result_timestamp)
    }
}

/// `occKey(id, ts)` for a timestamp read raw from JSON: absent -> bare id, a number -> JS
/// number formatting, anything else -> its JS `String()` form.
pub(crate) fn key_with_field(id: &str, ts: &JsField) -> String {
    match ts {
        JsField::Absent => id.to_owned(),
        JsField::Number(n) => format_occ_key(id, *n),
        JsField::Str(s) => format!("{id}@{}", s.key_form()),
        other => format!("{id}@{}", other.js_string()),
    }
}

/// One result of [`Index::records_for_id`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Occurrence<'a> {
    /// An indexed record, as it is.
    Record(&'a Record),
    /// A dedup alias of `record`: the reference returns a shallow copy of the original whose
    /// `resultTimestamp` is the alias key's own timestamp (`None`: `undefined`, legacy alias).
    Alias {
        /// The original record.
        record: &'a Record,
        /// `parseOccKey(aliasKey).resultTimestamp`.
        result_timestamp: Option<f64>,
    },
}

impl<'a> Occurrence<'a> {
    /// The record (the original one for an alias).
    pub fn record(&self) -> &'a Record {
        match self {
            Occurrence::Record(r) | Occurrence::Alias { record: r, .. } => r,
        }
    }

    /// The `resultTimestamp` this occurrence shows.
    pub fn result_timestamp(&self) -> JsField {
        match self {
            Occurrence::Record(r) => r.result_timestamp.clone(),
            Occurrence::Alias {
                result_timestamp, ..
            } => result_timestamp.map_or(JsField::Absent, JsField::Number),
        }
    }

    /// Sort key `resultTimestamp ?? timestamp`, coerced as `a - b` does.
    fn sort_key(&self) -> f64 {
        let ts = self.result_timestamp();
        if ts.is_nullish() {
            self.record().timestamp.to_number()
        } else {
            ts.to_number()
        }
    }
}

/// What [`Index::summarized`] finds about a summarized key.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summarized<'a> {
    /// `getRecord(key)`.
    pub record: Option<&'a Record>,
    /// `getShortRefForToolCallId(key)`.
    pub short_ref: Option<&'a str>,
    /// The short ref with its lone surrogates, when it holds some.
    pub short_ref_exact: Option<&'a JsStr>,
}

/// Where the dedup hash of a record comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HashSeed {
    /// The hash is known (`contentHash`, or computed by the caller).
    Known(String),
    /// The caller computes it later from its own copy of `(toolName, resultText)`; the number
    /// is the caller's handle. Seeds are applied strictly in order by
    /// [`Index::resolve_hash_seeds`], so first-seen-wins is preserved.
    Deferred(usize),
}

impl Index {
    // ----- mutation -----

    /// Indexes a record under its occurrence key (reference `indexRecord`): a later record with
    /// the same key replaces the earlier one (which keeps its map position), and the key is added
    /// to the bare id's key list if not yet there. Returns the stored record.
    pub fn index_record(&mut self, mut record: Record) -> &Record {
        let key = record.occurrence_key();
        let slot = self.records.len();
        record.key.clone_from(&key);
        record.slot = slot;
        let id = self.key_id(&key);
        if let Some(facts) = self.facts.get_mut(id)
            && facts.record.replace(slot).is_none()
        {
            self.indexed.push(id);
            if self.bare_id_to_keys.contains_key(&key) {
                self.bare_keyed += 1;
            }
        }
        if !self.bare_id_to_keys.contains_key(&record.tool_call_id)
            && self
                .facts_of(&record.tool_call_id)
                .is_some_and(|f| f.record.is_some())
        {
            self.bare_keyed += 1;
        }
        let keys = self
            .bare_id_to_keys
            .entry(record.tool_call_id.clone())
            .or_default();
        if !keys.contains(&key) {
            keys.push(key.clone());
        }
        // The dedup aliases of this key now find this record.
        let aliases: Vec<String> = self
            .aliased
            .iter()
            .filter(|&&alias| self.facts.get(alias).and_then(|f| f.original) == Some(id))
            .map(|&alias| self.keys.get(alias).to_owned())
            .collect();
        for alias in aliases {
            self.log(Change::Key(alias));
        }
        self.log(Change::Record {
            key,
            id: record.tool_call_id.clone(),
        });
        self.records.push(record);
        &self.records[slot]
    }

    /// Queues `hashToOriginal[hash] = key` (first seen wins) behind earlier seeds.
    pub fn queue_hash_seed(&mut self, key: &str, seed: HashSeed) {
        self.pending_seeds.push((key.to_owned(), seed));
    }

    /// Applies the queued hash seeds in order. `hash_of` computes a deferred seed's hash;
    /// returning `None` drops that seed (its text could not be hashed).
    pub fn resolve_hash_seeds(&mut self, mut hash_of: impl FnMut(usize) -> Option<String>) {
        let pending = std::mem::take(&mut self.pending_seeds);
        for (key, seed) in pending {
            let hash = match seed {
                HashSeed::Known(h) => Some(h),
                HashSeed::Deferred(handle) => hash_of(handle),
            };
            if let Some(hash) = hash {
                self.hash_to_original.entry(hash).or_insert(key);
            }
        }
    }

    /// Number of hash seeds not yet applied.
    pub fn pending_hash_seeds(&self) -> usize {
        self.pending_seeds.len()
    }

    /// Reference `addBatch` (in-memory part): indexes each record and seeds its hash. The
    /// caller writes the `context-prune-index` entry. Returns the keys, in order.
    pub fn add_batch(
        &mut self,
        records: impl IntoIterator<Item = (Record, HashSeed)>,
    ) -> Vec<String> {
        let mut keys = Vec::new();
        for (record, seed) in records {
            let key = self.index_record(record).key.clone();
            self.queue_hash_seed(&key, seed);
            keys.push(key);
        }
        keys
    }

    /// Reference `backfillChainRecords` step 4 (in-memory part, after the entry persisted):
    /// indexes every record WITHOUT seeding the dedup hash map (backfilled records never become
    /// dedup canonicals), then registers the refs. Returns the keys, in order.
    pub fn add_backfilled(
        &mut self,
        records: impl IntoIterator<Item = Record>,
        refs: &[super::ShortRef],
    ) -> Vec<String> {
        let keys = records
            .into_iter()
            .map(|r| self.index_record(r).key.clone())
            .collect();
        self.register_refs(refs);
        keys
    }

    // ----- lookups -----

    /// `isSummarized(key)`: the key is indexed or is a dedup alias. Strict: no bare-id fallback.
    pub fn is_summarized(&self, key: &str) -> bool {
        self.facts_of(key)
            .is_some_and(|f| f.record.is_some() || f.original.is_some())
    }

    /// `isSummarized(key)`, and when it holds, `getRecord(key)` and
    /// `getShortRefForToolCallId(key)`: what render's phase 1 asks of every tool result, with
    /// one hash lookup (two for a dedup alias, whose record is its original's).
    pub fn summarized(&self, key: &str) -> Option<Summarized<'_>> {
        self.summarized_by(key, self.facts_of(key)?)
    }

    /// [`Index::summarized`] for keys looked up roughly in the order they were first indexed
    /// (render's tool results are): `hint` carries the position of the previous key from one
    /// call to the next, so the next key is usually found right after it without hashing.
    pub fn summarized_near(&self, key: &str, hint: &mut usize) -> Option<Summarized<'_>> {
        self.summarized_by(key, self.facts.get(self.keys.find_near(key, hint)?)?)
    }

    fn summarized_by(&self, key: &str, facts: &KeyFacts) -> Option<Summarized<'_>> {
        let record = match facts.record {
            Some(slot) => self.records.get(slot),
            None if facts.original.is_some() => self.get_record(key),
            None => return None,
        };
        Some(Summarized {
            record,
            short_ref: facts.short.map(|short| self.shorts.get(short)),
            short_ref_exact: facts.short.and_then(|short| self.exact_shorts.get(&short)),
        })
    }

    /// `hasLegacyBareRecord(id)`: a record is indexed under the bare `id` and it is the only key
    /// of that id (pure legacy). The pruner's only sanctioned bare-id path.
    pub fn has_legacy_bare_record(&self, id: &str) -> bool {
        self.bare_keyed > 0
            && self.facts_of(id).is_some_and(|f| f.record.is_some())
            && self
                .bare_id_to_keys
                .get(id)
                .is_some_and(|keys| keys.len() == 1)
    }

    /// `resolveToolCallId(input)`: an indexed key as is; a dedup alias -> its original key (not
    /// checked against the index); a short ref -> its key; a bare id with exactly one key -> that
    /// key; otherwise `None` (an ambiguous bare id fails closed).
    pub fn resolve<'a>(&'a self, input: &'a str) -> Option<&'a str> {
        if let Some(facts) = self.facts_of(input) {
            if facts.record.is_some() {
                return Some(input);
            }
            if let Some(original) = facts.original.map(|id| self.keys.get(id))
                && !original.is_empty()
            {
                return Some(original);
            }
        }
        if let Some(key) = self.key_for_short_ref(input).filter(|k| !k.is_empty()) {
            return Some(key);
        }
        match self.bare_id_to_keys.get(input).map(Vec::as_slice) {
            Some([only]) => Some(only),
            _ => None,
        }
    }

    /// The current record under exactly `key` (no resolution).
    pub fn record_by_key(&self, key: &str) -> Option<&Record> {
        self.records.get(self.facts_of(key)?.record?)
    }

    /// The record stored at `slot` (also records since replaced under their key).
    pub fn record_at(&self, slot: usize) -> Option<&Record> {
        self.records.get(slot)
    }

    /// `getRecord(input)` = the record under `resolve(input)`.
    pub fn get_record(&self, input: &str) -> Option<&Record> {
        self.record_by_key(self.resolve(input)?)
    }

    /// `lookupToolCalls(inputs)`: `get_record` of each, skipping misses, order kept.
    pub fn lookup_records<S: AsRef<str>>(&self, inputs: &[S]) -> Vec<&Record> {
        inputs
            .iter()
            .filter_map(|i| self.get_record(i.as_ref()))
            .collect()
    }

    /// `getRecordsForId(input)`: every occurrence a bare id denotes (its indexed keys, then its
    /// dedup aliases whose original is indexed), stably sorted by `resultTimestamp ?? timestamp`;
    /// if there is none, `[get_record(input)]` or `[]` (occurrence keys and short refs resolve
    /// 1:1).
    pub fn records_for_id(&self, input: &str) -> Vec<Occurrence<'_>> {
        let mut found: Vec<Occurrence<'_>> = self
            .bare_id_to_keys
            .get(input)
            .map(|keys| {
                keys.iter()
                    .filter_map(|k| self.record_by_key(k))
                    .map(Occurrence::Record)
                    .collect()
            })
            .unwrap_or_default();
        for (alias_key, original_key) in self.aliases() {
            let parsed = parse_occ_key(alias_key);
            if parsed.tool_call_id != input {
                continue;
            }
            if let Some(record) = self.record_by_key(original_key) {
                found.push(Occurrence::Alias {
                    record,
                    result_timestamp: parsed.result_timestamp,
                });
            }
        }
        if found.is_empty() {
            return self
                .get_record(input)
                .map(Occurrence::Record)
                .into_iter()
                .collect();
        }
        stable_sort_by_key_js(&mut found);
        found
    }

    /// `getIndex()` values: the current records in key insertion order.
    pub fn records(&self) -> impl Iterator<Item = &Record> {
        self.indexed
            .iter()
            .filter_map(|&id| self.facts.get(id)?.record)
            .filter_map(|slot| self.records.get(slot))
    }

    /// Number of indexed keys (`getIndex().size`).
    pub fn record_count(&self) -> usize {
        self.indexed.len()
    }

    /// The keys indexed under a bare id, in insertion order.
    pub fn keys_for_bare_id(&self, id: &str) -> &[String] {
        self.bare_id_to_keys.get(id).map_or(&[], Vec::as_slice)
    }

    /// `lookupByContent`: the canonical key for a content hash (see
    /// `crate::keys::hash_tool_result`). Only seeds already resolved are visible: call
    /// [`Index::resolve_hash_seeds`] first when [`Index::pending_hash_seeds`] is non-zero.
    pub fn lookup_by_content(&self, hash: &str) -> Option<&str> {
        self.hash_to_original.get(hash).map(String::as_str)
    }
}

/// Stable insertion sort with the reference comparator `a - b` (a NaN difference counts as
/// equal, as `Array.prototype.sort` treats it). Never panics on such a non-total order.
fn stable_sort_by_key_js(items: &mut [Occurrence<'_>]) {
    let keys: Vec<f64> = items.iter().map(Occurrence::sort_key).collect();
    let mut order: Vec<usize> = (0..items.len()).collect();
    for i in 1..order.len() {
        let mut j = i;
        while j > 0 {
            let a = keys[order[j - 1]];
            let b = keys[order[j]];
            if (a - b).partial_cmp(&0.0) == Some(Ordering::Greater) {
                order.swap(j - 1, j);
                j -= 1;
            } else {
                break;
            }
        }
    }
    let sorted: Vec<Occurrence<'_>> = order.iter().map(|&i| items[i]).collect();
    items.copy_from_slice(&sorted);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(id: &str, ts: Option<f64>, batch_ts: f64) -> Record {
        let mut r = Record::new(id, ts.map_or(JsField::Absent, JsField::Number));
        r.timestamp = JsField::Number(batch_ts);
        r.tool_name = JsField::str("bash");
        r
    }

    fn seeded(r: Record) -> (Record, HashSeed) {
        let h = format!("h-{}", r.occurrence_key());
        (r, HashSeed::Known(h))
    }

    #[test]
    fn occurrence_keys_of_records() {
        assert_eq!(
            rec("bash_23", Some(1150.0), 1.0).occurrence_key(),
            "bash_23@1150"
        );
        assert_eq!(rec("bash_23", None, 1.0).occurrence_key(), "bash_23");
        assert_eq!(key_with_field("a", &JsField::Null), "a@null");
        assert_eq!(key_with_field("a", &JsField::str("7")), "a@7");
    }

    #[test]
    fn two_batches_reusing_a_bare_id_keep_two_records() {
        // indexer.test.ts: two occurrences of bash_23; the bare id is ambiguous.
        let mut ix = Index::new();
        ix.add_batch([seeded(rec("bash_23", Some(1150.0), 1000.0))]);
        ix.add_batch([seeded(rec("bash_23", Some(2150.0), 2000.0))]);
        assert_eq!(ix.record_count(), 2);
        assert!(ix.is_summarized("bash_23@1150"));
        assert!(ix.is_summarized("bash_23@2150"));
        // A live reuse is not summarized; no bare-id fallback.
        assert!(!ix.is_summarized("bash_23@9150"));
        assert!(!ix.is_summarized("bash_23"));
        assert_eq!(ix.resolve("bash_23"), None);
        assert!(ix.get_record("bash_23").is_none());
        let got: Vec<_> = ix
            .records_for_id("bash_23")
            .iter()
            .map(|o| o.record().key.clone())
            .collect();
        assert_eq!(got, vec!["bash_23@1150", "bash_23@2150"]);
        assert_eq!(ix.records_for_id("bash_23@2150").len(), 1);
    }

    #[test]
    fn summarized_answers_three_lookups_at_once() {
        let mut ix = Index::new();
        ix.add_batch([seeded(rec("a", Some(1.0), 1.0))]);
        ix.register_refs(&[super::super::ShortRef::new("t1", "a", Some(1.0))]);
        ix.apply_alias("d@2", "a@1");
        ix.apply_alias("gone@3", "missing@9");
        for key in ["a@1", "d@2", "gone@3", "a", "zz", "t1", "missing@9"] {
            let expected = ix.is_summarized(key).then(|| Summarized {
                record: ix.record_by_key(key).or_else(|| ix.get_record(key)),
                short_ref: ix.short_ref(key),
                short_ref_exact: None,
            });
            assert_eq!(ix.summarized(key), expected, "{key}");
        }
        let found = ix.summarized("d@2");
        assert_eq!(found.and_then(|f| f.record).map(|r| r.slot), Some(0));
        assert_eq!(found.and_then(|f| f.short_ref), Some("t1"));
        assert_eq!(ix.summarized("gone@3").map(|f| f.record), Some(None));
    }

    #[test]
    fn single_occurrence_resolves_from_bare_id() {
        let mut ix = Index::new();
        ix.add_batch([seeded(rec("bash_1", Some(50.0), 10.0))]);
        assert_eq!(ix.resolve("bash_1"), Some("bash_1@50"));
        assert_eq!(
            ix.get_record("bash_1").map(|r| r.key.as_str()),
            Some("bash_1@50")
        );
        assert!(!ix.has_legacy_bare_record("bash_1"));
    }

    #[test]
    fn legacy_bare_record_rung() {
        // pure legacy -> true; pure occurrence -> false; mixed -> false.
        let mut legacy = Index::new();
        legacy.add_batch([seeded(rec("bash_7", None, 500.0))]);
        assert!(legacy.has_legacy_bare_record("bash_7"));
        assert!(legacy.is_summarized("bash_7"));

        let mut occurrence = Index::new();
        occurrence.add_batch([seeded(rec("bash_7", Some(600.0), 500.0))]);
        assert!(!occurrence.has_legacy_bare_record("bash_7"));

        let mut mixed = Index::new();
        mixed.add_batch([seeded(rec("bash_23", None, 1000.0))]);
        mixed.add_batch([seeded(rec("bash_23", Some(2150.0), 2000.0))]);
        assert!(!mixed.has_legacy_bare_record("bash_23"));
        // getRecordsForId returns both, legacy (timestamp 1000) first.
        let keys: Vec<_> = mixed
            .records_for_id("bash_23")
            .iter()
            .map(|o| o.record().key.clone())
            .collect();
        assert_eq!(keys, vec!["bash_23", "bash_23@2150"]);
    }

    #[test]
    fn legacy_bare_rung_without_a_legacy_record() {
        // An id that looks like an occurrence key is the bare id of its own record (with a
        // timestamp) and, as a string, the key of another record: the reference's checks
        // both pass.
        let mut ix = Index::new();
        assert!(!ix.has_legacy_bare_record("x@5"));
        ix.add_batch([seeded(rec("x@5", Some(9.0), 1.0))]);
        assert!(!ix.has_legacy_bare_record("x@5"));
        ix.add_batch([seeded(rec("x", Some(5.0), 1.0))]);
        assert!(ix.has_legacy_bare_record("x@5"));
        // The other order.
        let mut ix = Index::new();
        ix.add_batch([seeded(rec("y", Some(5.0), 1.0))]);
        ix.add_batch([seeded(rec("y@5", Some(9.0), 1.0))]);
        assert!(ix.has_legacy_bare_record("y@5"));
        assert!(!ix.has_legacy_bare_record("y"));
    }

    #[test]
    fn later_record_with_same_key_overwrites_in_place() {
        let mut ix = Index::new();
        let mut first = rec("a", Some(1.0), 1.0);
        first.tool_name = JsField::str("first");
        let mut second = rec("a", Some(1.0), 2.0);
        second.tool_name = JsField::str("second");
        ix.add_batch([
            seeded(first),
            seeded(rec("b", Some(2.0), 1.0)),
            seeded(second),
        ]);
        assert_eq!(ix.record_count(), 2);
        assert_eq!(ix.keys_for_bare_id("a"), ["a@1".to_owned()]);
        let names: Vec<_> = ix.records().map(|r| r.tool_name.js_string()).collect();
        assert_eq!(names, vec!["second", "bash"]);
        assert_eq!(ix.record_by_key("a@1").map(|r| r.slot), Some(2));
        assert_eq!(
            ix.record_at(0).map(|r| r.tool_name.js_string()).as_deref(),
            Some("first")
        );
    }

    #[test]
    fn hash_seeds_first_seen_wins_across_deferred_and_known() {
        let mut ix = Index::new();
        ix.queue_hash_seed("a@1", HashSeed::Deferred(0));
        ix.queue_hash_seed("b@2", HashSeed::Known("H".to_owned()));
        ix.queue_hash_seed("c@3", HashSeed::Deferred(1));
        assert_eq!(ix.pending_hash_seeds(), 3);
        assert_eq!(ix.lookup_by_content("H"), None);
        ix.resolve_hash_seeds(|h| if h == 0 { Some("H".to_owned()) } else { None });
        assert_eq!(ix.pending_hash_seeds(), 0);
        assert_eq!(ix.lookup_by_content("H"), Some("a@1"));
    }

    #[test]
    fn backfilled_records_are_not_canonicals() {
        let mut ix = Index::new();
        let refs = [super::super::ShortRef::new("t4", "bf", Some(9.0))];
        let keys = ix.add_backfilled([rec("bf", Some(9.0), 9.0)], &refs);
        assert_eq!(keys, vec!["bf@9"]);
        assert_eq!(ix.pending_hash_seeds(), 0);
        assert_eq!(ix.short_ref("bf@9"), Some("t4"));
        assert_eq!(ix.next_short_ref_number(), 5.0);
        assert!(ix.is_summarized("bf@9"));
    }

    #[test]
    fn lookup_records_skips_misses() {
        let mut ix = Index::new();
        ix.add_batch([
            seeded(rec("a", Some(1.0), 1.0)),
            seeded(rec("b", Some(2.0), 1.0)),
        ]);
        let got: Vec<_> = ix
            .lookup_records(&["b@2", "zzz", "a"])
            .iter()
            .map(|r| r.key.clone())
            .collect();
        assert_eq!(got, vec!["b@2", "a@1"]);
    }

    #[test]
    fn sort_treats_nan_differences_as_equal() {
        let mut ix = Index::new();
        let mut odd = Record::new("x", JsField::str("zz"));
        odd.timestamp = JsField::Number(1.0);
        ix.index_record(rec("x", Some(30.0), 0.0));
        ix.index_record(odd);
        ix.index_record(rec("x", Some(10.0), 0.0));
        let keys: Vec<_> = ix
            .records_for_id("x")
            .iter()
            .map(|o| o.record().key.clone())
            .collect();
        // 30 vs NaN: equal (stay); NaN vs 10: equal (stay).
        assert_eq!(keys, vec!["x@30", "x@zz", "x@10"]);
    }
}

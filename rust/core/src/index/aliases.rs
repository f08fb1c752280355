//! Dedup aliases (spec 02 section 3, 03 section 7): a duplicate occurrence recorded as an
//! alias of an already-indexed original, sharing its short ref.

use super::Index;
use super::changes::Change;

impl Index {
    /// Sets `aliasToOriginal[new_key] = original_key` and copies the original's short ref (if
    /// any) to `new_key`. This is the reconstruction second pass applied to one alias entry; it
    /// does not skip `new_key == original_key` (the reference's replay does not either).
    pub fn apply_alias(&mut self, new_key: &str, original_key: &str) {
        let original = self.key_id(original_key);
        let alias = self.key_id(new_key);
        let short = self
            .facts
            .get(original)
            .and_then(|f| f.short)
            .filter(|&s| !self.shorts.get(s).is_empty());
        if let Some(facts) = self.facts.get_mut(alias) {
            if facts.original.replace(original).is_none() {
                self.aliased.push(alias);
            }
            if short.is_some() {
                facts.short = short;
            }
        }
        self.log(Change::Key(new_key.to_owned()));
    }

    /// `registerDuplicate(newKey, originalKey)` (in-memory part): a no-op returning `false` when
    /// the keys are equal; otherwise [`Index::apply_alias`] and `true`, and the caller appends
    /// the `context-prune-dedup-alias` entry.
    pub fn register_duplicate(&mut self, new_key: &str, original_key: &str) -> bool {
        if new_key == original_key {
            return false;
        }
        self.apply_alias(new_key, original_key);
        true
    }

    /// The original key of a dedup alias key.
    pub fn original_of(&self, alias_key: &str) -> Option<&str> {
        let original = self.facts_of(alias_key)?.original?;
        Some(self.keys.get(original))
    }

    /// Dedup aliases `(aliasKey, originalKey)` in insertion order.
    pub fn aliases(&self) -> impl Iterator<Item = (&str, &str)> {
        self.aliased.iter().filter_map(|&id| {
            let original = self.facts.get(id)?.original?;
            Some((self.keys.get(id), self.keys.get(original)))
        })
    }

    /// Number of dedup aliases.
    pub fn alias_count(&self) -> usize {
        self.aliased.len()
    }
}

#[cfg(test)]
mod tests {
    use super::super::{HashSeed, JsField, Record, ShortRef};
    use super::*;

    fn indexed(ix: &mut Index, id: &str, ts: f64) {
        let mut r = Record::new(id, JsField::Number(ts));
        r.timestamp = JsField::Number(ts - 1.0);
        ix.add_batch([(r, HashSeed::Known(format!("{id}{ts}")))]);
    }

    #[test]
    fn alias_shares_short_ref_and_is_summarized() {
        let mut ix = Index::new();
        indexed(&mut ix, "orig", 100.0);
        ix.register_refs(&[ShortRef::new("t1", "orig", Some(100.0))]);
        assert!(ix.register_duplicate("dup@200", "orig@100"));
        assert!(ix.is_summarized("dup@200"));
        assert_eq!(ix.short_ref("dup@200"), Some("t1"));
        assert_eq!(ix.resolve("dup@200"), Some("orig@100"));
        assert_eq!(
            ix.get_record("dup@200").map(|r| r.key.as_str()),
            Some("orig@100")
        );
        // Quirk: a chain holding the original and its duplicate lists the ref twice.
        assert_eq!(ix.tool_refs_for(&["orig@100", "dup@200"]), vec!["t1", "t1"]);
        assert_eq!(ix.alias_count(), 1);
        assert_eq!(ix.original_of("dup@200"), Some("orig@100"));
    }

    #[test]
    fn equal_keys_are_a_no_op() {
        let mut ix = Index::new();
        assert!(!ix.register_duplicate("a@1", "a@1"));
        assert_eq!(ix.alias_count(), 0);
    }

    #[test]
    fn alias_resolution_does_not_check_the_index() {
        let mut ix = Index::new();
        ix.apply_alias("dup@2", "gone@1");
        assert!(ix.is_summarized("dup@2"));
        assert_eq!(ix.resolve("dup@2"), Some("gone@1"));
        assert!(ix.get_record("dup@2").is_none());
        // getRecordsForId skips aliases whose original is missing.
        assert!(ix.records_for_id("dup").is_empty());
    }

    #[test]
    fn records_for_bare_id_include_aliases_with_their_own_timestamp() {
        let mut ix = Index::new();
        indexed(&mut ix, "bash_1", 300.0);
        indexed(&mut ix, "other", 100.0);
        ix.register_duplicate("bash_1@200", "other@100");
        ix.register_duplicate("bash_1", "other@100");
        let occ = ix.records_for_id("bash_1");
        let shown: Vec<_> = occ
            .iter()
            .map(|o| (o.record().key.clone(), o.result_timestamp()))
            .collect();
        // Legacy alias: resultTimestamp undefined -> sorts by the original's timestamp (99).
        assert_eq!(
            shown,
            vec![
                ("other@100".to_owned(), JsField::Absent),
                ("other@100".to_owned(), JsField::Number(200.0)),
                ("bash_1@300".to_owned(), JsField::Number(300.0)),
            ]
        );
    }
}

//! Per-batch summary bodies (spec 03 section 8): the texts a compressed chain's synthetic
//! message falls back to.

use std::collections::HashSet;

use super::Index;

/// One per-batch summary: the occurrence keys it covers and its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SummaryBody {
    /// Covered keys (`occKey` of each ref), in ref order.
    pub keys: Vec<String>,
    /// The summary message content.
    pub text: String,
}

impl Index {
    /// Reconstruction rule: push the body iff `text` is non-empty (even with no keys).
    pub fn push_summary_body(&mut self, keys: Vec<String>, text: String) -> bool {
        if text.is_empty() {
            return false;
        }
        self.summary_bodies.push(SummaryBody { keys, text });
        true
    }

    /// `registerSummaryBody(keys, text)` (flush): push iff `text` and `keys` are non-empty.
    pub fn register_summary_body(&mut self, keys: Vec<String>, text: String) -> bool {
        if keys.is_empty() {
            return false;
        }
        self.push_summary_body(keys, text)
    }

    /// All bodies in append order.
    pub fn summary_bodies(&self) -> &[SummaryBody] {
        &self.summary_bodies
    }

    /// Number of bodies.
    pub fn summary_count(&self) -> usize {
        self.summary_bodies.len()
    }

    /// `hasPerBatchSummaryCoveringAny(keys)`: some body shares at least one key.
    pub fn has_summary_covering_any<S: AsRef<str>>(&self, keys: &[S]) -> bool {
        if keys.is_empty() {
            return false;
        }
        let wanted: HashSet<&str> = keys.iter().map(AsRef::as_ref).collect();
        self.summary_bodies
            .iter()
            .any(|b| b.keys.iter().any(|k| wanted.contains(k.as_str())))
    }

    /// `getPerBatchSummariesForToolCallIds(keys)`: texts of the bodies overlapping `keys`, in
    /// body order, de-duplicated by exact text.
    pub fn per_batch_summaries<S: AsRef<str>>(&self, keys: &[S]) -> Vec<&str> {
        self.per_batch_summary_indices(keys)
            .into_iter()
            .filter_map(|i| self.summary_bodies.get(i))
            .map(|b| b.text.as_str())
            .collect()
    }

    /// Positions (in [`Index::summary_bodies`]) of the bodies [`Index::per_batch_summaries`]
    /// returns, for callers that keep their own copy of each text.
    pub fn per_batch_summary_indices<S: AsRef<str>>(&self, keys: &[S]) -> Vec<usize> {
        if keys.is_empty() {
            return Vec::new();
        }
        let wanted: HashSet<&str> = keys.iter().map(AsRef::as_ref).collect();
        let mut seen: HashSet<&str> = HashSet::new();
        let mut out = Vec::new();
        for (i, body) in self.summary_bodies.iter().enumerate() {
            if body.keys.iter().any(|k| wanted.contains(k.as_str())) && seen.insert(&body.text) {
                out.push(i);
            }
        }
        out
    }

    /// `getPerBatchSummaryTextForToolCallIds(keys)`: the overlapping texts joined with `"\n\n"`.
    pub fn per_batch_summary_text<S: AsRef<str>>(&self, keys: &[S]) -> String {
        self.per_batch_summaries(keys).join("\n\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(ks: &[&str]) -> Vec<String> {
        ks.iter().map(|k| (*k).to_owned()).collect()
    }

    #[test]
    fn overlap_dedup_and_join() {
        let mut ix = Index::new();
        assert!(ix.push_summary_body(keys(&["a@1", "b@2"]), "S1".to_owned()));
        assert!(ix.push_summary_body(keys(&["c@3"]), "S2".to_owned()));
        assert!(ix.push_summary_body(keys(&["d@4"]), "S1".to_owned()));
        assert!(!ix.push_summary_body(keys(&["e@5"]), String::new()));
        assert_eq!(ix.summary_count(), 3);
        assert_eq!(
            ix.per_batch_summaries(&["d@4", "b@2", "c@3"]),
            vec!["S1", "S2"]
        );
        assert_eq!(ix.per_batch_summary_text(&["c@3", "a@1"]), "S1\n\nS2");
        assert_eq!(ix.per_batch_summary_text::<&str>(&[]), "");
        assert!(ix.has_summary_covering_any(&["zz", "c@3"]));
        assert!(!ix.has_summary_covering_any(&["zz"]));
        assert!(!ix.has_summary_covering_any::<&str>(&[]));
    }

    #[test]
    fn flush_registration_needs_keys() {
        let mut ix = Index::new();
        assert!(!ix.register_summary_body(Vec::new(), "S".to_owned()));
        assert!(ix.push_summary_body(Vec::new(), "S".to_owned()));
        assert!(ix.register_summary_body(keys(&["a"]), "T".to_owned()));
        assert_eq!(ix.summary_count(), 2);
    }
}

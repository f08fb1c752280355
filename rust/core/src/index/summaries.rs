//! Per-batch summary bodies (spec 03 section 8): the texts a compressed chain's synthetic
//! message falls back to.

use super::StrTable;
use crate::collections::FastSet;
use crate::jsstr::{JsBuf, JsStr};

use super::Index;
use super::changes::Change;

/// One per-batch summary: the occurrence keys it covers and its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SummaryBody {
    /// Covered keys (`occKey` of each ref), in ref order.
    pub keys: Vec<String>,
    /// The summary message content.
    pub text: JsStr,
}

/// The per-batch summary bodies by covered key: what a chain's summary text looks up for
/// each of its dropped keys. Kept up to date by the index as bodies are pushed, so a render
/// does not rebuild it.
#[derive(Clone, Debug, Default)]
pub struct BodyIndex {
    /// Every key of every body, in first-seen order.
    keys: StrTable,
    /// Per key id: the positions of the bodies covering it.
    positions: Vec<Positions>,
    /// The positions of the bodies that cover no key.
    keyless: Vec<usize>,
}

/// Ascending body positions without repeats; most keys are covered by one body.
#[derive(Clone, Debug)]
enum Positions {
    One(usize),
    Many(Vec<usize>),
}

impl Positions {
    fn as_slice(&self) -> &[usize] {
        match self {
            Positions::One(p) => std::slice::from_ref(p),
            Positions::Many(ps) => ps,
        }
    }
}

impl BodyIndex {
    /// The index of `bodies`.
    pub fn new(bodies: &[SummaryBody]) -> Self {
        let mut index = BodyIndex::default();
        for (position, body) in bodies.iter().enumerate() {
            index.add(position, body);
        }
        index
    }

    /// Adds the body at `position` (after every body added so far).
    pub fn add(&mut self, position: usize, body: &SummaryBody) {
        if body.keys.is_empty() {
            self.keyless.push(position);
        }
        for key in &body.keys {
            let id = self.keys.intern(key);
            // A new key's id is the next position.
            let Some(slot) = self.positions.get_mut(id) else {
                self.positions.push(Positions::One(position));
                continue;
            };
            match slot {
                Positions::One(first) => {
                    if *first != position {
                        *slot = Positions::Many(vec![*first, position]);
                    }
                }
                Positions::Many(all) => {
                    if all.last() != Some(&position) {
                        all.push(position);
                    }
                }
            }
        }
    }

    /// Positions of the bodies covering `key`, ascending.
    pub fn positions(&self, key: &str) -> &[usize] {
        self.positions_near(key, &mut 0)
    }

    /// [`BodyIndex::positions`] for keys asked roughly in the order the bodies listed them
    /// (see `StrTable::find_near`; start `hint` at 0).
    pub fn positions_near(&self, key: &str, hint: &mut usize) -> &[usize] {
        self.keys
            .find_near(key, hint)
            .and_then(|id| self.positions.get(id))
            .map_or(&[], Positions::as_slice)
    }
}

impl Index {
    /// Reconstruction rule: push the body iff `text` is non-empty (even with no keys).
    pub fn push_summary_body(&mut self, keys: Vec<String>, text: impl Into<JsStr>) -> bool {
        let text = text.into();
        if text.is_empty() {
            return false;
        }
        self.log(Change::Body(keys.clone()));
        let body = SummaryBody { keys, text };
        self.body_index.add(self.summary_bodies.len(), &body);
        self.summary_bodies.push(body);
        true
    }

    /// The bodies by covered key.
    pub fn body_index(&self) -> &BodyIndex {
        &self.body_index
    }

    /// `registerSummaryBody(keys, text)` (flush): push iff `text` and `keys` are non-empty.
    pub fn register_summary_body(&mut self, keys: Vec<String>, text: impl Into<JsStr>) -> bool {
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
        keys.iter()
            .any(|k| !self.body_index.positions(k.as_ref()).is_empty())
    }

    /// Positions (in [`Index::summary_bodies`]) of the bodies whose keys are exactly
    /// `keys`, in order.
    pub fn summary_bodies_with_keys<S: AsRef<str>>(&self, keys: &[S]) -> Vec<usize> {
        let candidates = match keys.first() {
            Some(first) => self.body_index.positions(first.as_ref()),
            None => &self.body_index.keyless,
        };
        candidates
            .iter()
            .copied()
            .filter(|&i| {
                self.summary_bodies.get(i).is_some_and(|body| {
                    body.keys.len() == keys.len()
                        && body.keys.iter().zip(keys).all(|(a, b)| a == b.as_ref())
                })
            })
            .collect()
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
        let mut covering: Vec<usize> = keys
            .iter()
            .flat_map(|k| self.body_index.positions(k.as_ref()))
            .copied()
            .collect();
        covering.sort_unstable();
        covering.dedup();
        // Exact text: two bodies that differ only in a lone surrogate are two texts.
        let mut seen: FastSet<&[u8]> = FastSet::default();
        covering
            .into_iter()
            .filter(|&i| {
                self.summary_bodies
                    .get(i)
                    .is_some_and(|body| seen.insert(body.text.wtf8()))
            })
            .collect()
    }

    /// `getPerBatchSummaryTextForToolCallIds(keys)`: the overlapping texts joined with `"\n\n"`.
    pub fn per_batch_summary_text<S: AsRef<str>>(&self, keys: &[S]) -> JsStr {
        let mut out = JsBuf::new();
        for (n, i) in self.per_batch_summary_indices(keys).into_iter().enumerate() {
            if n > 0 {
                out.push_str("\n\n");
            }
            if let Some(body) = self.summary_bodies.get(i) {
                out.push(&body.text);
            }
        }
        out.finish()
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
    fn body_index_follows_pushed_bodies() {
        let mut ix = Index::new();
        ix.push_summary_body(keys(&["a@1", "b@2", "a@1"]), "S1".to_owned());
        ix.push_summary_body(keys(&["e@5"]), String::new());
        ix.register_summary_body(keys(&["b@2"]), "S2".to_owned());
        ix.register_summary_body(keys(&["b@2", "a@1"]), "S3".to_owned());
        assert_eq!(ix.body_index().positions("a@1"), [0, 2]);
        assert_eq!(ix.body_index().positions("b@2"), [0, 1, 2]);
        let mut hint = 0;
        assert_eq!(ix.body_index().positions_near("b@2", &mut hint), [0, 1, 2]);
        assert_eq!(ix.body_index().positions_near("a@1", &mut hint), [0, 2]);
        assert!(ix.body_index().positions("e@5").is_empty());
        let rebuilt = BodyIndex::new(ix.summary_bodies());
        for key in ["a@1", "b@2", "e@5", "zz"] {
            assert_eq!(rebuilt.positions(key), ix.body_index().positions(key));
        }
    }

    #[test]
    fn bodies_with_exactly_some_keys() {
        let mut ix = Index::new();
        ix.push_summary_body(keys(&["a", "b"]), "S1".to_owned());
        ix.push_summary_body(Vec::new(), "S2".to_owned());
        ix.push_summary_body(keys(&["a"]), "S3".to_owned());
        ix.push_summary_body(keys(&["a", "b"]), "S4".to_owned());
        assert_eq!(ix.summary_bodies_with_keys(&["a", "b"]), [0, 3]);
        assert_eq!(ix.summary_bodies_with_keys(&["a"]), [2]);
        assert_eq!(
            ix.summary_bodies_with_keys(&["b", "a"]),
            Vec::<usize>::new()
        );
        assert_eq!(ix.summary_bodies_with_keys::<&str>(&[]), [1]);
    }

    /// The lookups through the body index, against a walk over every body.
    #[test]
    fn indexed_lookups_equal_a_walk_over_the_bodies() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move |n: usize| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) as usize % n
        };
        let pool = ["a", "b", "c", "d", "e"];
        for _ in 0..300 {
            let mut ix = Index::new();
            for _ in 0..next(8) {
                let body: Vec<String> = (0..next(4)).map(|_| pool[next(5)].to_owned()).collect();
                ix.push_summary_body(body, ["S", "T", "U"][next(3)].to_owned());
            }
            let query: Vec<&str> = (0..next(4)).map(|_| pool[next(5)]).collect();
            let bodies = ix.summary_bodies();
            let covers = |b: &SummaryBody| b.keys.iter().any(|k| query.contains(&k.as_str()));
            assert_eq!(
                ix.has_summary_covering_any(&query),
                bodies.iter().any(covers)
            );
            let mut texts: Vec<&str> = Vec::new();
            for body in bodies.iter().filter(|b| covers(b)) {
                if !texts.contains(&body.text.as_str()) {
                    texts.push(body.text.as_str());
                }
            }
            assert_eq!(ix.per_batch_summaries(&query), texts);
            let exact: Vec<usize> = (0..bodies.len())
                .filter(|&i| bodies[i].keys == query)
                .collect();
            assert_eq!(ix.summary_bodies_with_keys(&query), exact);
        }
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

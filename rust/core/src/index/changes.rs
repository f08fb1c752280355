//! What changed in an index, in order.
//!
//! A render resumed across index changes (the render's `resume` module) reads again only the
//! messages a change can touch. Every mutation of the index that render can see logs here;
//! the [`Index::revision`] is the number of changes so far.

use super::Index;

/// One change of what render sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// What phase 1 finds under this key may differ (a record, a dedup alias, a short ref).
    Key(String),
    /// A record indexed under `key` for the bare id `id`: the key's lookups, and
    /// `hasLegacyBareRecord` of both strings, may differ.
    Record {
        /// the record's occurrence key
        key: String,
        /// its `toolCallId`
        id: String,
    },
    /// A per-batch summary body now covers these keys.
    Body(Vec<String>),
    /// The chain entry at this slot joined or left the registry.
    Chain(usize),
    /// Anything may differ.
    Everything,
}

impl Index {
    /// The number of changes logged so far (see [`Change`]).
    pub fn revision(&self) -> usize {
        self.changes.len()
    }

    /// The changes logged since `revision` (`None` if the index never had that revision).
    pub fn changes_since(&self, revision: usize) -> Option<&[Change]> {
        self.changes.get(revision..)
    }

    pub(crate) fn log(&mut self, change: Change) {
        self.changes.push(change);
    }

    /// Forgets the changes so far (a freshly rebuilt index: nothing was rendered against its
    /// earlier revisions).
    pub(crate) fn forget_changes(&mut self) {
        self.changes = Vec::new();
    }
}

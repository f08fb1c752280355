//! [`StrTable`]: interned strings with dense ids, stored back to back.
//!
//! The index looks keys up on every render, once per tool result, in roughly the order it
//! interned them (messages and summary batches both run in chronological order). Keeping the
//! strings in one buffer in id order (instead of one heap block per key, scattered by the
//! allocator) turns the key comparison of each lookup into a near-sequential read that the
//! CPU prefetches, and the id lets the caller keep whatever it knows about the string in
//! plain vectors beside it.

use std::hash::BuildHasher;

use crate::collections::FastMap;

/// `prev` value of an id that is the first one interned with its hash.
const NONE: usize = usize::MAX;

/// How many ids from the hint [`StrTable::find_near`] compares before hashing.
const NEAR: usize = 4;

/// A set of strings, each with a dense id (`0..len`, in first-insertion order). Nothing is
/// ever removed.
#[derive(Clone, Debug, Default)]
pub(crate) struct StrTable {
    hasher: foldhash::fast::RandomState,
    /// Full 64-bit hash of a string -> the last id interned with that hash.
    heads: FastMap<u64, usize>,
    /// Every string, back to back, in id order.
    arena: String,
    /// Per id: the end of its string in `arena` (it starts where the previous one ends).
    ends: Vec<usize>,
    /// Per id: the id interned before it with the same hash, or `NONE` (hash collisions are
    /// astronomically rare but must still resolve by comparing the strings).
    prev: Vec<usize>,
}

impl StrTable {
    /// An empty table.
    pub fn new() -> Self {
        StrTable::default()
    }

    /// The id of `s`, if interned.
    pub fn find(&self, s: &str) -> Option<usize> {
        self.find_hashed(self.hasher.hash_one(s), s)
    }

    /// [`StrTable::find`] for lookups that tend to come in id order: the ids from `*hint`
    /// on are tried first (a few string comparisons over nearby memory), then the hash.
    /// `*hint` becomes the id after the one found.
    pub fn find_near(&self, s: &str, hint: &mut usize) -> Option<usize> {
        for id in *hint..(*hint + NEAR).min(self.len()) {
            if self.get(id) == s {
                *hint = id + 1;
                return Some(id);
            }
        }
        let id = self.find(s)?;
        *hint = id + 1;
        Some(id)
    }

    fn find_hashed(&self, hash: u64, s: &str) -> Option<usize> {
        let mut id = *self.heads.get(&hash)?;
        while id != NONE {
            if self.get(id) == s {
                return Some(id);
            }
            id = self.prev.get(id).copied().unwrap_or(NONE);
        }
        None
    }

    /// The id of `s`, interning it first if needed.
    pub fn intern(&mut self, s: &str) -> usize {
        let hash = self.hasher.hash_one(s);
        if let Some(id) = self.find_hashed(hash, s) {
            return id;
        }
        let id = self.ends.len();
        self.arena.push_str(s);
        self.ends.push(self.arena.len());
        self.prev.push(self.heads.insert(hash, id).unwrap_or(NONE));
        id
    }

    /// The string with id `id` (`""` for an id never handed out).
    pub fn get(&self, id: usize) -> &str {
        let start = match id.checked_sub(1) {
            Some(before) => self.ends.get(before).copied().unwrap_or(0),
            None => 0,
        };
        let end = self.ends.get(id).copied().unwrap_or(start);
        // Every boundary is the end of a pushed `str`, so a char boundary.
        self.arena.get(start..end).unwrap_or_default()
    }

    /// Number of interned strings.
    pub fn len(&self) -> usize {
        self.ends.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interning_hands_out_dense_ids_once() {
        let mut t = StrTable::new();
        assert_eq!(t.len(), 0);
        assert_eq!(t.intern("a@1"), 0);
        assert_eq!(t.intern(""), 1);
        assert_eq!(t.intern("b\u{1F600}"), 2);
        assert_eq!(t.intern("a@1"), 0);
        assert_eq!(t.len(), 3);
        assert_eq!(t.find("b\u{1F600}"), Some(2));
        assert_eq!(t.find(""), Some(1));
        assert_eq!(t.find("a"), None);
        assert_eq!((t.get(0), t.get(1), t.get(2)), ("a@1", "", "b\u{1F600}"));
        assert_eq!(t.get(99), "");
    }

    #[test]
    fn colliding_hashes_resolve_by_string() {
        // Force every string onto one hash chain, as a collision would.
        let mut t = StrTable::new();
        for (id, s) in ["x", "y", "z"].into_iter().enumerate() {
            t.arena.push_str(s);
            t.ends.push(t.arena.len());
            t.prev.push(t.heads.insert(7, id).unwrap_or(NONE));
        }
        assert_eq!(t.find_hashed(7, "x"), Some(0));
        assert_eq!(t.find_hashed(7, "y"), Some(1));
        assert_eq!(t.find_hashed(7, "z"), Some(2));
        assert_eq!(t.find_hashed(7, "w"), None);
        assert_eq!(t.find_hashed(8, "x"), None);
    }

    #[test]
    fn clones_share_nothing() {
        let mut t = StrTable::new();
        t.intern("a");
        let mut c = t.clone();
        c.intern("b");
        assert_eq!(c.find("a"), Some(0));
        assert_eq!(t.find("b"), None);
    }
}

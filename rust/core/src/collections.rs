//! Hash collections with a fast (non-cryptographic, randomly seeded) hasher.

/// A hash map with a fast (non-cryptographic, randomly seeded) hasher.
pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// A hash set with a fast (non-cryptographic, randomly seeded) hasher.
pub type FastSet<T> = std::collections::HashSet<T, foldhash::fast::RandomState>;

use std::sync::Arc;

/// Elements per shared chunk of a [`Chunked`].
const CHUNK: usize = 64;

/// An append-only sequence whose copies share what they have in common: its elements are
/// held in full chunks of [`CHUNK`] behind an `Arc`, plus a short tail of its own. A copy of
/// its first `n` elements ([`Chunked::prefix`]) costs one reference count per full chunk and
/// a clone of at most `CHUNK - 1` elements, whatever the length.
#[derive(Debug)]
pub struct Chunked<T> {
    full: Vec<Arc<[T]>>,
    tail: Vec<T>,
}

impl<T> Default for Chunked<T> {
    fn default() -> Self {
        Chunked {
            full: Vec::new(),
            tail: Vec::new(),
        }
    }
}

impl<T: Clone> Clone for Chunked<T> {
    fn clone(&self) -> Self {
        self.prefix(self.len())
    }
}

impl<T> Chunked<T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.full.len() * CHUNK + self.tail.len()
    }

    /// Whether there is no element.
    pub fn is_empty(&self) -> bool {
        self.full.is_empty() && self.tail.is_empty()
    }

    /// The element at `i`.
    pub fn get(&self, i: usize) -> Option<&T> {
        let chunk = i / CHUNK;
        match self.full.get(chunk) {
            Some(full) => full.get(i % CHUNK),
            None if chunk == self.full.len() => self.tail.get(i % CHUNK),
            None => None,
        }
    }

    /// Appends `value`.
    pub fn push(&mut self, value: T) {
        self.tail.push(value);
        if self.tail.len() == CHUNK {
            let full: Arc<[T]> =
                std::mem::replace(&mut self.tail, Vec::with_capacity(CHUNK)).into();
            self.full.push(full);
        }
    }

    /// The elements in order, chunk by chunk (each slice a run of consecutive elements).
    pub fn slices(&self) -> impl Iterator<Item = &[T]> {
        self.full
            .iter()
            .map(|chunk| &chunk[..])
            .chain(std::iter::once(&self.tail[..]))
    }

    /// The elements from position `start` on, in order.
    pub fn iter_from(&self, start: usize) -> impl Iterator<Item = &T> {
        let skip = start.min(self.len());
        let first = skip / CHUNK;
        self.slices()
            .skip(first)
            .flatten()
            .skip(skip - first * CHUNK)
    }

    /// The number of leading elements for which `pred` holds, when it holds for a prefix
    /// of the sequence and fails for the rest (as `slice::partition_point`).
    pub fn partition_point(&self, mut pred: impl FnMut(&T) -> bool) -> usize {
        // The chunks whose last element satisfies `pred` are wholly before the point.
        let whole = self
            .full
            .partition_point(|chunk| chunk.last().is_some_and(&mut pred));
        match self.full.get(whole) {
            Some(chunk) => whole * CHUNK + chunk.partition_point(pred),
            None => whole * CHUNK + self.tail.partition_point(pred),
        }
    }
}

impl<T> std::ops::Index<usize> for Chunked<T> {
    type Output = T;

    /// The element at `i`; panics when there is none, as a slice's indexing does.
    fn index(&self, i: usize) -> &T {
        match self.get(i) {
            Some(value) => value,
            None => panic!("index {i} out of range for a sequence of {}", self.len()),
        }
    }
}

impl<T: Clone> Chunked<T> {
    /// A sequence of the first `n` elements (all of them when there are fewer), sharing
    /// every full chunk among them.
    pub fn prefix(&self, n: usize) -> Self {
        let n = n.min(self.len());
        let whole = n / CHUNK;
        let rest = n % CHUNK;
        let mut tail = Vec::with_capacity(CHUNK);
        if rest > 0 {
            let source = match self.full.get(whole) {
                Some(chunk) => &chunk[..rest],
                None => &self.tail[..rest],
            };
            tail.extend_from_slice(source);
        }
        Chunked {
            full: self.full[..whole].to_vec(),
            tail,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(n: usize) -> Chunked<usize> {
        let mut c = Chunked::default();
        for i in 0..n {
            c.push(i);
        }
        c
    }

    #[test]
    fn indexing_and_prefixes_across_chunk_borders() {
        for n in [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 5] {
            let c = of(n);
            assert_eq!(c.len(), n);
            assert_eq!(c.is_empty(), n == 0);
            assert_eq!(
                c.iter_from(0).copied().collect::<Vec<_>>(),
                (0..n).collect::<Vec<_>>()
            );
            assert_eq!(c.get(n), None);
            for k in [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, n, n + 3] {
                let p = c.prefix(k);
                assert_eq!(p.len(), k.min(n));
                assert_eq!(
                    p.iter_from(0).copied().collect::<Vec<_>>(),
                    (0..k.min(n)).collect::<Vec<_>>()
                );
                assert_eq!(
                    c.iter_from(k).copied().collect::<Vec<_>>(),
                    (k.min(n)..n).collect::<Vec<_>>()
                );
                assert_eq!(c.partition_point(|&x| x < k), k.min(n));
            }
        }
    }

    #[test]
    fn a_prefix_grows_apart_from_its_source() {
        let source = of(2 * CHUNK + 3);
        let mut copy = source.prefix(CHUNK + 1);
        for i in 0..CHUNK {
            copy.push(1000 + i);
        }
        assert_eq!(source.get(CHUNK + 1), Some(&(CHUNK + 1)));
        assert_eq!(copy.get(CHUNK + 1), Some(&1000));
        assert_eq!(copy.len(), 2 * CHUNK + 1);
        assert!(Arc::ptr_eq(&source.full[0], &copy.full[0]));
    }
}

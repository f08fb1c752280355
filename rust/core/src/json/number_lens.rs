//! A cache of the printed lengths of doubles (`JSON.stringify(x).length`).
//!
//! Printing the shortest round-trip digits of a double costs a few hundred instructions,
//! and a long session holds thousands of distinct costs and usage figures, each repeated
//! in many messages. The length is a function of the value alone, so one cache can serve
//! every measurement a thread makes. It is set-associative: four ways per set (one cache
//! line), most recently used first. Fewer ways thrash: a session's values come back in
//! the same order, so a set holding one value more than it has ways misses on all of
//! them, every time (two ways missed 1,790 of 20,110 lookups per render of the x10 bench
//! session, four ways about 50).

use super::write::number_len;

/// Sets of the cache (a power of two): 2048 sets of four entries, 128 KiB.
const SETS: usize = 2048;
/// Entries per set.
const WAYS: usize = 4;

/// An entry: the bits of a double and its printed length (0: empty; no number prints
/// as nothing).
#[derive(Clone, Copy, Debug, Default)]
struct Entry {
    bits: u64,
    len: u32,
}

/// The entries of one set, most recently used first, on one cache line.
#[derive(Clone, Copy, Debug, Default)]
#[repr(align(64))]
struct Set([Entry; WAYS]);

/// Printed lengths of doubles, remembered by their bits.
#[derive(Debug, Default)]
pub struct NumberLens {
    sets: Vec<Set>,
    misses: u64,
}

impl NumberLens {
    /// An empty cache (its table is allocated on first use).
    pub fn new() -> Self {
        Self::default()
    }

    /// `JSON.stringify(x).length`.
    #[inline]
    pub fn len_of(&mut self, x: f64) -> usize {
        if self.sets.is_empty() {
            self.sets = vec![Set::default(); SETS];
        }
        let bits = x.to_bits();
        let Some(Set(ways)) = self.sets.get_mut(set_of(bits)) else {
            return number_len(x);
        };
        if let Some(found) = ways.iter().position(|e| e.bits == bits && e.len != 0) {
            let entry = ways[found];
            // Move to the front: the least recently used entry ends up last.
            ways.copy_within(0..found, 1);
            ways[0] = entry;
            return entry.len as usize;
        }
        self.misses += 1;
        let len = number_len(x);
        ways.copy_within(0..WAYS - 1, 1);
        ways[0] = Entry {
            bits,
            len: u32::try_from(len).unwrap_or(u32::MAX),
        };
        len
    }

    /// Where the entry of `x` is looked for, for a prefetch hint: a walk that knows a
    /// double ahead of measuring it has its set loaded meanwhile (`None` before first use).
    #[inline]
    pub fn set_address(&self, x: f64) -> Option<*const u8> {
        self.sets
            .get(set_of(x.to_bits()))
            .map(|set| (set as *const Set).cast::<u8>())
    }

    /// How many lengths were computed rather than found.
    pub fn misses(&self) -> u64 {
        self.misses
    }
}

/// The set of a double's bits (Fibonacci hashing: every bit of the value counts).
#[inline]
fn set_of(bits: u64) -> usize {
    (bits.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SETS.trailing_zeros())) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_match_printing() {
        let mut cache = NumberLens::new();
        for x in [
            0.0,
            -0.0,
            1.5,
            0.000001,
            1e-7,
            1e21,
            -3.25e300,
            123456.789,
            0.1 + 0.2,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            9007199254740993.0,
        ] {
            // Twice: computed, then found.
            assert_eq!(cache.len_of(x), number_len(x), "{x}");
            assert_eq!(cache.len_of(x), number_len(x), "{x} again");
        }
        // JS prints these as "0.000001", "1e-7", "null" and "0".
        assert_eq!(cache.len_of(0.000001), 8);
        assert_eq!(cache.len_of(1e-7), 4);
        assert_eq!(cache.len_of(f64::NAN), 4);
        assert_eq!(cache.len_of(-0.0), 1);
        assert_eq!(cache.misses(), 13);
    }

    /// Doubles that share one set, searched by their bits.
    fn same_set(n: usize) -> Vec<f64> {
        let target = set_of(0.5f64.to_bits());
        (0..50_000_000u32)
            .map(|i| 0.5 + f64::from(i) * 1e-12)
            .filter(|x| set_of(x.to_bits()) == target)
            .take(n)
            .collect()
    }

    #[test]
    fn a_full_set_keeps_all_its_values_in_a_cycle() {
        let mut cache = NumberLens::new();
        let values = same_set(WAYS);
        assert_eq!(values.len(), WAYS);
        for _ in 0..10 {
            for &x in &values {
                assert_eq!(cache.len_of(x), number_len(x));
            }
        }
        assert_eq!(cache.misses(), WAYS as u64);
    }

    #[test]
    fn the_least_recently_used_value_is_evicted() {
        let mut cache = NumberLens::new();
        let values = same_set(WAYS + 1);
        for &x in values.iter().take(WAYS) {
            cache.len_of(x);
        }
        // Use the first again: the second is now the least recent, and the new value
        // evicts it.
        cache.len_of(values[0]);
        cache.len_of(values[WAYS]);
        let misses = cache.misses();
        cache.len_of(values[0]);
        cache.len_of(values[2]);
        assert_eq!(cache.misses(), misses);
        cache.len_of(values[1]);
        assert_eq!(cache.misses(), misses + 1);
    }

    #[test]
    fn repeated_values_are_found() {
        let mut cache = NumberLens::new();
        let values: Vec<f64> = (0..1500).map(|i| f64::from(i) * 0.000_37 + 1e-9).collect();
        for &x in &values {
            cache.len_of(x);
        }
        assert_eq!(cache.misses(), 1500);
        for &x in &values {
            assert_eq!(cache.len_of(x), number_len(x));
        }
        assert!(
            cache.misses() - 1500 < 30,
            "{} misses on repeats",
            cache.misses() - 1500
        );
    }
}

//! Hash collections with a fast (non-cryptographic, randomly seeded) hasher.

/// A hash map with a fast (non-cryptographic, randomly seeded) hasher.
pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// A hash set with a fast (non-cryptographic, randomly seeded) hasher.
pub type FastSet<T> = std::collections::HashSet<T, foldhash::fast::RandomState>;

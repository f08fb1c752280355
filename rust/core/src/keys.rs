//! Occurrence keys, content hashing and protected-path globs (filled in by the keys work).

//! Stamps: numbers that name one object, never reused in a process.
//!
//! A render resumed from the previous one (`crate::render::resume`) must be made against the
//! very index and render options of that render: each index object and each compiled option
//! set carries a stamp (the index's state is its core revision on top).

use std::sync::atomic::{AtomicU64, Ordering};

static NEXT: AtomicU64 = AtomicU64::new(1);

/// A stamp never handed out before.
pub(crate) fn fresh() -> u64 {
    NEXT.fetch_add(1, Ordering::Relaxed)
}

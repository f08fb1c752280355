//! Stamps: numbers that name one state of one object, never reused in a process.
//!
//! A render resumed from the previous one (`crate::render::resume`) is exact only against
//! the very index state and render options the previous render used. Each index state and
//! each compiled option set carries a stamp: a new object, or any mutable access to an index,
//! takes a fresh one, so equal stamps mean the same object in the same state.

use std::ops::Deref;
use std::sync::atomic::{AtomicU64, Ordering};

static NEXT: AtomicU64 = AtomicU64::new(1);

/// A stamp never handed out before.
pub(crate) fn fresh() -> u64 {
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A value with the stamp of its current state: read through `Deref`; written only through
/// [`Stamped::edit`], which stamps it anew (there is no `DerefMut`, so no write can skip it).
pub(crate) struct Stamped<T> {
    value: T,
    stamp: u64,
}

impl<T> Stamped<T> {
    pub(crate) fn new(value: T) -> Self {
        Stamped {
            value,
            stamp: fresh(),
        }
    }

    /// The value, for a change: its state gets a fresh stamp.
    pub(crate) fn edit(&mut self) -> &mut T {
        self.stamp = fresh();
        &mut self.value
    }

    pub(crate) fn stamp(&self) -> u64 {
        self.stamp
    }
}

impl<T> Deref for Stamped<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.value
    }
}

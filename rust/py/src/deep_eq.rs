//! Deep equality of two JSON-like trees (exact `dict`, `list`, `str`, `int`, `float`,
//! `bool`, `None`) without a Python call per node: what `list_prefix` asks first when a
//! host hands over a fresh copy of the history it handed over before.
//!
//! The answer is exact or absent: `Some(true)` / `Some(false)` only where `==` would say
//! the same, `None` (ask `==`) for anything else - another type, a subclass, a dict whose
//! keys are in another order, a str not read in place (the layout off), too deep a tree.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]
#![deny(clippy::multiple_unsafe_ops_per_block)]

use std::ptr::addr_of_mut;

use pyo3::ffi;

use crate::cpython::{self, DictMembers, Obj, StrChars};

/// Deeper trees are left to `==` (which has its own recursion guard).
const MAX_DEPTH: u32 = 64;

/// Whether `a == b`, when that follows from their exact types and contents alone.
///
/// # Safety
/// `a` and `b` must be live objects and the GIL held; no Python code runs meanwhile (only
/// exact `int` / `float` comparisons are asked of CPython), so nothing read changes.
pub unsafe fn deep_eq(a: Obj, b: Obj) -> Option<bool> {
    // SAFETY: `a` and `b` are live (held by the lists `list_prefix` was handed, owned by its caller) and no Python code runs: `# Safety` above.
    unsafe { eq_at(a, b, 0) }
}

/// # Safety
/// As [`deep_eq`].
unsafe fn eq_at(a: Obj, b: Obj, depth: u32) -> Option<bool> {
    if a == b {
        return Some(true);
    }
    // SAFETY: `a` is live (the caller's contract): its header can be read.
    let kind = unsafe { ffi::Py_TYPE(a.as_ptr()) };
    // SAFETY: as above, for `b`.
    if kind != unsafe { ffi::Py_TYPE(b.as_ptr()) } || depth > MAX_DEPTH {
        return None;
    }
    if kind == addr_of_mut!(ffi::PyUnicode_Type) {
        // SAFETY: a live exact str, immutable, read while no Python code runs.
        let x = unsafe { cpython::str_chars(a) }?;
        // SAFETY: as above, for `b`.
        let y = unsafe { cpython::str_chars(b) }?;
        // CPython keeps a str in the narrowest form that holds it, so two strs read in
        // different forms differ (as `==` compares length, kind, then the bytes).
        return Some(match (x, y) {
            (StrChars::Ascii(x), StrChars::Ascii(y)) => x == y,
            (StrChars::Latin1(x), StrChars::Latin1(y)) => x == y,
            (StrChars::Bmp(x), StrChars::Bmp(y)) => x == y,
            (StrChars::CodePoints(x), StrChars::CodePoints(y)) => x == y,
            _ => false,
        });
    }
    if kind == addr_of_mut!(ffi::PyDict_Type) {
        // SAFETY: both are live exact dicts (see above).
        unsafe { dicts_eq(a, b, depth) }
    } else if kind == addr_of_mut!(ffi::PyList_Type) {
        // SAFETY: both are live exact lists (see above).
        unsafe { lists_eq(a, b, depth) }
    } else if kind == addr_of_mut!(ffi::PyLong_Type) || kind == addr_of_mut!(ffi::PyFloat_Type) {
        // SAFETY: exact ints or floats: their comparison runs no Python code.
        match unsafe { ffi::PyObject_RichCompareBool(a.as_ptr(), b.as_ptr(), ffi::Py_EQ) } {
            1 => Some(true),
            0 => Some(false),
            _ => None,
        }
    } else if kind == addr_of_mut!(ffi::PyBool_Type) {
        Some(false) // the two bools, and not the same one
    } else {
        None
    }
}

/// # Safety
/// As [`deep_eq`], `a` and `b` exact dicts.
unsafe fn dicts_eq(a: Obj, b: Obj, depth: u32) -> Option<bool> {
    // SAFETY: a live dict, the GIL held.
    let size = unsafe { ffi::PyDict_Size(a.as_ptr()) };
    // SAFETY: as above, for `b`.
    if size != unsafe { ffi::PyDict_Size(b.as_ptr()) } {
        return Some(false);
    }
    // SAFETY: a live dict that does not change while walked (no Python code runs).
    let x = unsafe { DictMembers::new(a, 0) };
    // SAFETY: as above, for `b`.
    let y = unsafe { DictMembers::new(b, 0) };
    for ((ka, va), (kb, vb)) in x.zip(y) {
        // the same keys in the same order (a key's value is then its only match in the
        // other dict); another order is left to `==`
        // SAFETY: keys and values are live, held by their dicts.
        if ka != kb && unsafe { eq_at(ka, kb, depth + 1) } != Some(true) {
            return None;
        }
        // SAFETY: as above.
        match unsafe { eq_at(va, vb, depth + 1) } {
            Some(true) => {}
            other => return other,
        }
    }
    Some(true)
}

/// # Safety
/// As [`deep_eq`], `a` and `b` exact lists.
unsafe fn lists_eq(a: Obj, b: Obj, depth: u32) -> Option<bool> {
    // SAFETY: a live exact list, unchanged while read (no Python code runs).
    let x = unsafe { cpython::list_items(a) }?;
    // SAFETY: as above, for `b`.
    let y = unsafe { cpython::list_items(b) }?;
    if x.len() != y.len() {
        return Some(false);
    }
    for (&p, &q) in x.iter().zip(y) {
        // SAFETY: the items are live, held by their lists.
        match unsafe { eq_at(p, q, depth + 1) } {
            Some(true) => {}
            other => return other,
        }
    }
    Some(true)
}

//! `list_prefix` and `splice`: the two list operations the live summary placer does on
//! every model call, over the whole message list, at C speed; `all_exact_dicts`, the hooks'
//! check that a history needs no conversion.

use std::ptr::addr_of_mut;

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::cpython::{self, Obj};
use crate::deep_eq;
use crate::jsread;

/// How many items of `a` and `b` from position `from` on are the very same objects.
fn identical_run(a: &Bound<'_, PyList>, b: &Bound<'_, PyList>, from: usize) -> usize {
    // SAFETY: both lists are alive and the GIL is held; no Python code runs while their
    // item arrays are read.
    if let (Some(x), Some(y)) = unsafe {
        (
            cpython::list_items(Obj::of(a)),
            cpython::list_items(Obj::of(b)),
        )
    } {
        let (x, y) = (
            x.get(from..).unwrap_or_default(),
            y.get(from..).unwrap_or_default(),
        );
        return common_run(x, y);
    }
    let mut n = 0;
    // SAFETY: as above; the items are only compared, not kept.
    while let (Some(p), Some(q)) = unsafe {
        (
            jsread::list_item(Obj::of(a), from + n),
            jsread::list_item(Obj::of(b), from + n),
        )
    } {
        if p != q {
            break;
        }
        n += 1;
    }
    n
}

/// How many leading items of `x` and `y` are the same objects: compared a block at a time
/// without an early exit inside a block (the compiler turns that into vector compares; the
/// common case is a long run of the same objects).
fn common_run(x: &[Obj], y: &[Obj]) -> usize {
    const BLOCK: usize = 64;
    let mut same = 0;
    for (p, q) in x.chunks(BLOCK).zip(y.chunks(BLOCK)) {
        let differs = p
            .iter()
            .zip(q)
            .fold(0, |acc, (a, b)| acc | (a.addr() ^ b.addr()));
        if differs != 0 {
            return same + p.iter().zip(q).take_while(|(a, b)| a == b).count();
        }
        same += p.len().min(q.len());
    }
    same
}

/// How many leading items `a` and `b` have in common: the very same objects, or with
/// `equal` items that compare equal as list equality compares them (identity first, then
/// a native deep comparison of JSON-like items, else `==`, which may run Python code).
#[pyfunction]
#[pyo3(signature = (a, b, *, equal = false))]
fn list_prefix(a: &Bound<'_, PyList>, b: &Bound<'_, PyList>, equal: bool) -> PyResult<usize> {
    let mut same = identical_run(a, b, 0);
    if !equal {
        return Ok(same);
    }
    while let (Ok(x), Ok(y)) = (a.get_item(same), b.get_item(same)) {
        // SAFETY: `x` and `y` are owned and the GIL is held; `deep_eq` runs no Python code.
        let known = unsafe { deep_eq::deep_eq(Obj::of(&x), Obj::of(&y)) };
        if !known.map_or_else(|| x.eq(y), Ok)? {
            break;
        }
        same += 1;
        same += identical_run(a, b, same);
    }
    Ok(same)
}

/// Whether every item of `items` is exactly a `dict` (a subclass is not; an empty list is
/// true): each item's type is read in place, no Python code runs.
#[pyfunction]
fn all_exact_dicts(items: &Bound<'_, PyList>) -> bool {
    let dict = addr_of_mut!(ffi::PyDict_Type);
    // SAFETY: `items` is a live list held by the caller and the GIL is held; no Python code
    // runs while its items are read (only their type pointers), so the list is not changed
    // and keeps each borrowed item alive.
    let mut all = unsafe { jsread::list_items(Obj::of(items)) };
    // SAFETY: `item` is borrowed from `items`, alive as above.
    all.all(|item| unsafe { jsread::type_is(item, dict) })
}

/// A new list: the items of `messages` with the items of `groups[k]` inserted before
/// `messages[at[k]]` (`at` ascending; a position past the end inserts at the end).
#[pyfunction]
fn splice<'py>(
    messages: &Bound<'py, PyList>,
    at: Vec<usize>,
    groups: Vec<Bound<'py, PyList>>,
) -> PyResult<Bound<'py, PyList>> {
    if at.len() != groups.len() || at.windows(2).any(|w| w[0] > w[1]) {
        return Err(PyValueError::new_err(
            "splice: one ascending position per group",
        ));
    }
    // No Python code runs while the lists are read (the collector paused, nothing called
    // back), so their item arrays do not change under `put`.
    let _paused = crate::cpython::GcPaused::new();
    let py = messages.py();
    let len = messages.len();
    let inserted: usize = groups.iter().map(|g| g.len()).sum();
    let total = ffi::Py_ssize_t::try_from(len + inserted)
        .map_err(|_| PyValueError::new_err("splice: list too long"))?;
    // SAFETY: the GIL is held; `PyList_New(total)` makes a list of `total` empty slots.
    let out = unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyList_New(total))? };
    let out = out.downcast_into::<PyList>()?;
    let mut filled: ffi::Py_ssize_t = 0;
    // Each slot is filled once, in order, with a new reference (which `PyList_SetItem`
    // steals); no Python code runs while the lists are read, so they do not change.
    let mut put = |list: &Bound<'py, PyList>, from: usize, to: usize| {
        // SAFETY: `list` is a live list and the GIL is held; its item array is read while
        // no Python code runs.
        let items = unsafe { cpython::list_items(Obj::of(list)) };
        for i in from..to {
            let item = match items {
                Some(items) => items.get(i).copied(),
                // SAFETY: as above.
                None => unsafe { jsread::list_item(Obj::of(list), i) },
            };
            let Some(item) = item.filter(|_| filled < total) else {
                break;
            };
            // SAFETY: `item` is a live object borrowed from `list`; the new reference is
            // stolen by `PyList_SetItem` into the empty slot `filled < total` of `out`.
            unsafe {
                ffi::Py_INCREF(item.as_ptr());
                ffi::PyList_SetItem(out.as_ptr(), filled, item.as_ptr());
            }
            filled += 1;
        }
    };
    let mut done = 0;
    for (&position, group) in at.iter().zip(&groups) {
        let position = position.min(len);
        put(messages, done, position);
        put(group, 0, group.len());
        done = position;
    }
    put(messages, done, len);
    if filled != total {
        return Err(PyValueError::new_err("splice: a list changed while read"));
    }
    Ok(out)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(all_exact_dicts, m)?)?;
    m.add_function(wrap_pyfunction!(list_prefix, m)?)?;
    m.add_function(wrap_pyfunction!(splice, m)?)?;
    Ok(())
}

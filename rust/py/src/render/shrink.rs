//! Phase 2's argument shrink (pi-condense 2.11.3, #19): the purge keeps the arguments' keys,
//! types and array lengths and replaces only each string longer than 200 UTF-16 units with
//! `<purged-errored-args size="N"/>` (`N` its length), so that a grammar-constrained tool
//! still parses the call. Values are classified as the serializer classifies them (a str, a
//! dict, a list or tuple, subclasses included; anything else is kept as it is), read in C
//! with no Python code run. Only the dicts and lists on the path to a replaced string are
//! copied (a tuple's copy is a list: both serialize as an array).

use pi_condense_core::json::MAX_DEPTH;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::cpython::{DictMembers, list_items, utf16_len_of};
use crate::jsread::Obj;

use super::copy::fresh_copy_with;

/// Strings up to this many UTF-16 units are kept.
const KEEP_UP_TO: usize = 200;

enum Shape {
    Str,
    Dict,
    Seq { is_list: bool },
    Other,
}

/// # Safety
/// `obj` must be a live object and the GIL held.
unsafe fn shape(obj: Obj) -> Shape {
    // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
    unsafe {
        if ffi::PyUnicode_Check(obj.as_ptr()) != 0 {
            Shape::Str
        } else if ffi::PyDict_Check(obj.as_ptr()) != 0 {
            Shape::Dict
        } else if ffi::PyList_Check(obj.as_ptr()) != 0 {
            Shape::Seq { is_list: true }
        } else if ffi::PyTuple_Check(obj.as_ptr()) != 0 {
            Shape::Seq { is_list: false }
        } else {
            Shape::Other
        }
    }
}

/// Whether a str is longer than [`KEEP_UP_TO`] UTF-16 units.
///
/// # Safety
/// `obj` must be a live `str` object and the GIL held.
unsafe fn is_long(obj: Obj) -> bool {
    // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
    let points = usize::try_from(unsafe { ffi::PyUnicode_GetLength(obj.as_ptr()) }).unwrap_or(0);
    // Each code point is one or two units.
    if points > KEEP_UP_TO {
        return true;
    }
    if points * 2 <= KEEP_UP_TO {
        return false;
    }
    // SAFETY: as above.
    unsafe { utf16_len_of(obj) > KEEP_UP_TO }
}

/// The items of a list or tuple (subclasses included), borrowed.
///
/// # Safety
/// `seq` must be a live list (`is_list`) or tuple, the GIL held, and no Python code may run
/// while the items are used.
unsafe fn seq_items(seq: Obj, is_list: bool) -> Vec<Obj> {
    // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
    unsafe {
        if is_list && let Some(items) = list_items(seq) {
            return items.to_vec();
        }
        let len = if is_list {
            ffi::PyList_Size(seq.as_ptr())
        } else {
            ffi::PyTuple_Size(seq.as_ptr())
        };
        (0..len.max(0))
            .map(|i| {
                if is_list {
                    ffi::PyList_GetItem(seq.as_ptr(), i)
                } else {
                    ffi::PyTuple_GetItem(seq.as_ptr(), i)
                }
            })
            .filter(|item| !item.is_null())
            .map(Obj::from_ptr)
            .collect()
    }
}

/// Whether `value` holds, at any depth up to [`MAX_DEPTH`], a string the shrink replaces
/// (the purge's decision: [`super::sizes::ArgLens`]). A walk on a heap stack.
///
/// # Safety
/// `value` must be a live object and the GIL held, and no Python code may run meanwhile.
pub(super) unsafe fn holds_long_string(value: Obj) -> bool {
    let mut stack = vec![(value, 0usize)];
    while let Some((obj, depth)) = stack.pop() {
        // SAFETY: every object on the stack is held by its container, itself held from
        // `value` (the caller's contract); nothing runs meanwhile.
        unsafe {
            match shape(obj) {
                Shape::Str if is_long(obj) => return true,
                Shape::Dict if depth < MAX_DEPTH => {
                    for (_, member) in DictMembers::new(obj, 0) {
                        stack.push((member, depth + 1));
                    }
                }
                Shape::Seq { is_list } if depth < MAX_DEPTH => {
                    stack.extend(seq_items(obj, is_list).into_iter().map(|i| (i, depth + 1)));
                }
                _ => {}
            }
        }
    }
    false
}

/// `shrinkStrings(value)`: the value with every long string replaced, `None` when nothing
/// is (then the caller keeps `value` itself).
///
/// # Safety
/// `value` must be a live object and the GIL held; the objects made meanwhile run no Python
/// code (new dicts, lists and strs, exact keys: [`fresh_copy_with`]).
pub(super) unsafe fn shrunk<'py>(
    py: Python<'py>,
    value: Obj,
    depth: usize,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs);
    // the members and items walked are held by their containers, which nothing changes.
    unsafe {
        match shape(value) {
            Shape::Str if is_long(value) => {
                let marker = format!("<purged-errored-args size=\"{}\"/>", utf16_len_of(value));
                Ok(Some(PyString::new(py, &marker).into_any()))
            }
            Shape::Dict if depth < MAX_DEPTH => {
                let mut changed = Vec::new();
                let mut any = false;
                for (_, member) in DictMembers::new(value, 0) {
                    let next = shrunk(py, member, depth + 1)?;
                    any |= next.is_some();
                    changed.push(next);
                }
                if !any {
                    return Ok(None);
                }
                let dict = Bound::from_borrowed_ptr(py, value.as_ptr()).downcast_into_unchecked();
                let copy = fresh_copy_with(&dict, |at, member| {
                    changed
                        .get(at)
                        .and_then(Option::as_ref)
                        .map_or(member, Obj::of)
                })?;
                Ok(Some(copy.into_any()))
            }
            Shape::Seq { is_list } if depth < MAX_DEPTH => {
                let items = seq_items(value, is_list);
                let mut changed = Vec::with_capacity(items.len());
                let mut any = false;
                for &item in &items {
                    let next = shrunk(py, item, depth + 1)?;
                    any |= next.is_some();
                    changed.push(next);
                }
                if !any {
                    return Ok(None);
                }
                let out = pyo3::types::PyList::empty(py);
                for (item, next) in items.into_iter().zip(changed) {
                    match next {
                        Some(next) => out.append(next)?,
                        None => out.append(Bound::from_borrowed_ptr(py, item.as_ptr()))?,
                    }
                }
                Ok(Some(out.into_any()))
            }
            _ => Ok(None),
        }
    }
}

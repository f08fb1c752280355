//! `reload_copies`: new values equal to what `JSON.parse` of their `stringify` text reads
//! back (as `js.json.loads` builds it), without the text. Storing thousands of session
//! entries at once keeps these instead of parsing the 10 MB of lines it just wrote.
//!
//! A copy has new dicts and lists, in the same key order, and the same `str`, `int`,
//! `float`, `bool` and `None` objects (immutable, and what the text reads back as). Where
//! the text would read back as something else, or the value is not plain JSON, there is no
//! copy and the caller parses the text: a dict key that is an array index (`stringify`
//! moves those first), an `int` beyond 2^53 (printed as the nearest double), a `float`
//! printed without a fraction (`1.0` reads back as `1`) or not finite (`null`), a tuple,
//! a subclass of `str`, `int`, `float`, `dict` or `list`, anything else, or nesting deeper
//! than `stringify` writes.

use std::ptr::{self, addr_of_mut};

use pi_condense_core::json::{MAX_DEPTH, write::number_reads_back_as_double};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyList;

use super::key_index;

/// Integers up to this magnitude are printed with all their digits.
const EXACT_INT_LIMIT: u64 = 1 << 53;

/// What the text of a value reads back as.
enum Copy<'py> {
    /// The value itself (an immutable scalar).
    Same,
    /// A new container.
    New(Bound<'py, PyAny>),
    /// Something else: parse the text.
    Missed,
}

/// The copy of `obj` (see the module docs): a container is copied shallowly in one call
/// (a dict's table, a list's items), then the members that are containers are replaced by
/// their copies, in place (a dict's keys and their order unchanged).
///
/// # Safety
/// `obj` must be a live object reached from an owned root of the call, the GIL held and the
/// collector paused: the walk borrows members and runs no Python code (the copies hold only
/// exact `str` keys, whose hashes and comparisons are native, and a replaced member is
/// still held by the original container, so nothing is freed).
unsafe fn copy<'py>(py: Python<'py>, obj: *mut ffi::PyObject, depth: usize) -> PyResult<Copy<'py>> {
    // SAFETY: `obj` is live (`# Safety`); reading its type pointer reads no member.
    let ty = unsafe { ffi::Py_TYPE(obj) };
    // (only the addresses of the static type objects are taken)
    let (str_type, int_type, float_type, dict_type, list_type) = (
        addr_of_mut!(ffi::PyUnicode_Type),
        addr_of_mut!(ffi::PyLong_Type),
        addr_of_mut!(ffi::PyFloat_Type),
        addr_of_mut!(ffi::PyDict_Type),
        addr_of_mut!(ffi::PyList_Type),
    );
    // SAFETY: the singletons' addresses (immortal objects).
    let (none, yes, no) = unsafe { (ffi::Py_None(), ffi::Py_True(), ffi::Py_False()) };
    if ty == str_type || obj == none || obj == yes || obj == no {
        return Ok(Copy::Same);
    }
    if ty == int_type {
        let mut overflow: std::os::raw::c_int = 0;
        // SAFETY: `obj` is a live exact int; an exact int raises nothing here.
        let value = unsafe { ffi::PyLong_AsLongLongAndOverflow(obj, &mut overflow) };
        let exact = overflow == 0 && value.unsigned_abs() <= EXACT_INT_LIMIT;
        return Ok(if exact { Copy::Same } else { Copy::Missed });
    }
    if ty == float_type {
        // SAFETY: `obj` is a live exact float; this reads its value and raises nothing.
        let x = unsafe { ffi::PyFloat_AsDouble(obj) };
        return Ok(if number_reads_back_as_double(x) {
            Copy::Same
        } else {
            Copy::Missed
        });
    }
    if depth >= MAX_DEPTH || (ty != dict_type && ty != list_type) {
        return Ok(Copy::Missed);
    }
    if ty == dict_type {
        // SAFETY: `obj` is a live dict; the copy is a new reference, owned by `out`.
        let out = unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyDict_Copy(obj)) }?;
        let (mut pos, mut key, mut value) = (0, ptr::null_mut(), ptr::null_mut());
        // SAFETY: `obj` is live and unchanged (`# Safety`); key and value are borrowed from it.
        while unsafe { ffi::PyDict_Next(obj, &mut pos, &mut key, &mut value) } != 0 {
            // SAFETY: `key` is a live member of `obj`.
            if unsafe { ffi::Py_TYPE(key) } != str_type || unsafe { key_index(py, key) }.is_some() {
                return Ok(Copy::Missed);
            }
            // SAFETY: `value` is a live member of `obj`, reached from the same root.
            match unsafe { copy(py, value, depth + 1) }? {
                Copy::Same => {}
                Copy::Missed => return Ok(Copy::Missed),
                Copy::New(copied) => {
                    // SAFETY: `out` is our new dict and `key` an exact str already in it:
                    // its value is replaced (taking a reference to `copied`), the key order
                    // kept; the value replaced is `obj`'s too, so it is not freed.
                    if unsafe { ffi::PyDict_SetItem(out.as_ptr(), key, copied.as_ptr()) } < 0 {
                        return Err(PyErr::fetch(py));
                    }
                }
            }
        }
        return Ok(Copy::New(out));
    }
    // SAFETY: `obj` is a live exact list.
    let len = unsafe { ffi::PyList_Size(obj) };
    // SAFETY: as above; the slice is a new list holding a reference to each item.
    let out = unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyList_GetSlice(obj, 0, len)) }?;
    for index in 0..len {
        // SAFETY: `index` is within `obj`, which nothing changes; a borrowed item.
        let item = unsafe { ffi::PyList_GetItem(obj, index) };
        if item.is_null() {
            return Err(PyErr::fetch(py));
        }
        // SAFETY: `item` is a live member of `obj`, reached from the same root.
        match unsafe { copy(py, item, depth + 1) }? {
            Copy::Same => {}
            Copy::Missed => return Ok(Copy::Missed),
            Copy::New(copied) => {
                // SAFETY: `out` is our new list of `len` items; the call takes the copy's
                // reference and releases the item it replaces, which `obj` still holds.
                if unsafe { ffi::PyList_SetItem(out.as_ptr(), index, copied.into_ptr()) } < 0 {
                    return Err(PyErr::fetch(py));
                }
            }
        }
    }
    Ok(Copy::New(out))
}

/// For each of `values`, a new value equal to what `JSON.parse` of its `stringify` text
/// reads back (the same types, key order and scalars), and the indices of those that have
/// none (their place holds None: parse their text instead).
#[pyfunction]
pub(super) fn reload_copies<'py>(
    values: &Bound<'py, PyList>,
) -> PyResult<(Bound<'py, PyList>, Vec<usize>)> {
    let py = values.py();
    let _paused = crate::cpython::GcPaused::new();
    // Owned references to every value, taken before any is read: the walks' roots.
    let roots: Vec<Bound<'py, PyAny>> = values.iter().collect();
    let mut copies = Vec::with_capacity(roots.len());
    let mut missed = Vec::new();
    for (index, root) in roots.iter().enumerate() {
        // SAFETY: `root` is held by `roots` for the call, the GIL is held and the collector
        // paused; the walk runs no Python code (see `copy`).
        match unsafe { copy(py, root.as_ptr(), 0) }? {
            Copy::Same => copies.push(root.clone()),
            Copy::New(copied) => copies.push(copied),
            Copy::Missed => {
                copies.push(py.None().into_bound(py));
                missed.push(index);
            }
        }
    }
    Ok((PyList::new(py, copies)?, missed))
}

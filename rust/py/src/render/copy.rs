//! Copies of input dicts for new messages (`{...src}`), made without running Python code.

use std::ptr::addr_of_mut;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::cpython::DictMembers;
use crate::jsread::{Obj, type_is};

/// A new dict of the members of `src` (a dict or dict subclass), in its order, for a copy
/// of an input message or block (`{...src}`). The members are read in C (no method of
/// `src` is called) and inserted under keys whose hashing and comparing run no Python code
/// (a `PyDict_Copy` or a lookup in a copy would compare colliding keys with their `__eq__`):
/// a str key as an exact str (a subclass's text copied), a key of an exact `int`, `float`,
/// `bool` or `None` as it is; any other key, no JSON member name, is left out. Of keys of
/// the same text the first is kept, the one the reader reads.
pub(super) fn fresh_copy<'py>(src: &Bound<'py, PyDict>) -> PyResult<Bound<'py, PyDict>> {
    fresh_copy_with(src, |_, value| value)
}

/// [`fresh_copy`] with each member's value given by `value_of(position, value)` (the
/// position of the member in the walk of `src`; the value it returns must stay alive until
/// the copy is made).
pub(super) fn fresh_copy_with<'py>(
    src: &Bound<'py, PyDict>,
    mut value_of: impl FnMut(usize, Obj) -> Obj,
) -> PyResult<Bound<'py, PyDict>> {
    let py = src.py();
    let out = PyDict::new(py);
    let mut at = 0usize;
    // SAFETY: `src` is a live dict (a `Bound` the caller owns) and the GIL is held. Each
    // member is borrowed from `src` only until it is inserted (the new dict takes its own
    // references), a value given by `value_of` is alive (its contract); inserting runs no
    // Python code (exact keys only, in a dict holding only exact keys), so `src` does not
    // change during the walk.
    unsafe {
        let mut members = DictMembers::new(Obj::of(src), 0);
        members.try_each(|key, value| -> PyResult<()> {
            let value = value_of(at, value);
            at += 1;
            let exact = key.is(ffi::Py_None())
                || ffi::PyBool_Check(key.as_ptr()) != 0
                || type_is(key, addr_of_mut!(ffi::PyUnicode_Type))
                || type_is(key, addr_of_mut!(ffi::PyLong_Type))
                || type_is(key, addr_of_mut!(ffi::PyFloat_Type));
            let key = if exact {
                Bound::from_borrowed_ptr(py, key.as_ptr())
            } else if ffi::PyUnicode_Check(key.as_ptr()) != 0 {
                // The whole of a str subclass: an exact copy of its characters.
                let len = ffi::PyUnicode_GetLength(key.as_ptr());
                Bound::from_owned_ptr_or_err(py, ffi::PyUnicode_Substring(key.as_ptr(), 0, len))?
            } else {
                return Ok(());
            };
            match ffi::PyDict_Contains(out.as_ptr(), key.as_ptr()) {
                0 if ffi::PyDict_SetItem(out.as_ptr(), key.as_ptr(), value.as_ptr()) == 0 => Ok(()),
                1 => Ok(()),
                _ => Err(PyErr::fetch(py)),
            }
        })?;
    }
    Ok(out)
}

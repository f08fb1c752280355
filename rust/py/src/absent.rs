//! `pi_condense.session.ABSENT` (JS `undefined` inside a dict), told by the identity of its
//! type. A type's `__name__` could run Python code (a metaclass property), so no reader asks
//! for it.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::PyType;

/// The type of `ABSENT`, looked up once per process (`None` when `pi_condense.session` cannot
/// be imported: then nothing is `ABSENT`).
static ABSENT_TYPE: GILOnceCell<Option<Py<PyType>>> = GILOnceCell::new();

/// Finds the type of `ABSENT` (imports `pi_condense.session`, so it may run Python code: call
/// it before any borrowed view is read).
pub(crate) fn init(py: Python<'_>) {
    ABSENT_TYPE.get_or_init(py, || {
        py.import("pi_condense.session")
            .and_then(|m| m.getattr("ABSENT"))
            .map(|absent| absent.get_type().unbind())
            .ok()
    });
}

/// Whether `ty` is the type of `ABSENT` (false before [`init`] ran).
#[cold]
#[inline(never)]
pub(crate) fn is_absent_type(py: Python<'_>, ty: *mut ffi::PyTypeObject) -> bool {
    matches!(ABSENT_TYPE.get(py), Some(Some(absent)) if absent.as_ptr().cast() == ty)
}

/// Whether `value` is `ABSENT` (initialises the lookup on first use).
pub(crate) fn is_absent(value: &Bound<'_, PyAny>) -> bool {
    let py = value.py();
    init(py);
    is_absent_type(py, value.get_type().as_type_ptr())
}

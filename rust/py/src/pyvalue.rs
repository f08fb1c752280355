//! Reading JSON-shaped Python values with JavaScript's eyes, shared by the bindings.

use pi_condense_core::jsstr::JsStr;
use pyo3::exceptions::PyOverflowError;
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

/// `typeof v === "number"` as a double: floats as they are, ints rounded to the nearest
/// double (ints beyond a double's range read as +-Infinity, as `JSON.parse` reads them);
/// bools and every other type: `None`.
///
/// Subclasses of `int` and `float` are read by value, as `json.dumps` writes them, through
/// C API calls that never run Python code (no `__float__`, `__index__` or `__lt__`): the
/// native render reads with borrowed views, which Python code could invalidate.
pub(crate) fn js_number(value: &Bound<'_, PyAny>) -> PyResult<Option<f64>> {
    // SAFETY: `value` is a live object and the GIL is held.
    unsafe { number_value(value.py(), value.as_ptr()) }
}

/// [`js_number`] of a borrowed object.
///
/// # Safety
/// `obj` must be a live object and the GIL held.
pub(crate) unsafe fn number_value(
    py: Python<'_>,
    obj: *mut ffi::PyObject,
) -> PyResult<Option<f64>> {
    // SAFETY: `obj` is live and the GIL held (the caller's contract); for an object of (a
    // subclass of) the checked type every call below reads its value in C.
    unsafe {
        if ffi::PyBool_Check(obj) != 0 {
            return Ok(None);
        }
        if ffi::PyFloat_Check(obj) != 0 {
            let x = ffi::PyFloat_AsDouble(obj);
            if x == -1.0 && !ffi::PyErr_Occurred().is_null() {
                return Err(PyErr::fetch(py));
            }
            return Ok(Some(x));
        }
        if ffi::PyLong_Check(obj) == 0 {
            return Ok(None);
        }
        let mut overflow: std::os::raw::c_int = 0;
        let small = ffi::PyLong_AsLongLongAndOverflow(obj, &mut overflow);
        if overflow == 0 {
            if small == -1 && !ffi::PyErr_Occurred().is_null() {
                return Err(PyErr::fetch(py));
            }
            // Correctly rounded, as `float(i)`.
            return Ok(Some(small as f64));
        }
        let x = ffi::PyLong_AsDouble(obj);
        if x == -1.0 && !ffi::PyErr_Occurred().is_null() {
            let err = PyErr::fetch(py);
            if err.is_instance_of::<PyOverflowError>(py) {
                // Beyond the double range: JS reads such a literal as +-Infinity.
                return Ok(Some(f64::INFINITY * f64::from(overflow.signum())));
            }
            return Err(err);
        }
        Ok(Some(x))
    }
}

/// A Python `str` as a [`JsStr`]: its lossy text, plus its exact bytes when it holds lone
/// surrogates (read through `encode("utf-8", "surrogatepass")`).
pub(crate) fn js_str_of(s: &Bound<'_, PyString>) -> PyResult<JsStr> {
    if let Ok(text) = s.to_cow() {
        return Ok(JsStr::new(text.into_owned()));
    }
    let py = s.py();
    let encoded = s.call_method1(
        intern!(py, "encode"),
        (intern!(py, "utf-8"), intern!(py, "surrogatepass")),
    )?;
    Ok(JsStr::from_wtf8(encoded.downcast::<PyBytes>()?.as_bytes()))
}

/// Generalized UTF-8 (lone surrogates as 3-byte sequences) as a Python `str`.
pub(crate) fn str_of_wtf8<'py>(py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyString>> {
    if let Ok(text) = std::str::from_utf8(bytes) {
        return Ok(PyString::new(py, text));
    }
    let decoded = PyBytes::new(py, bytes).call_method1(
        intern!(py, "decode"),
        (intern!(py, "utf-8"), intern!(py, "surrogatepass")),
    )?;
    Ok(decoded.downcast_into::<PyString>()?)
}

/// A [`JsStr`] as a Python `str`, lone surrogates included.
pub(crate) fn str_of_js<'py>(py: Python<'py>, s: &JsStr) -> PyResult<Bound<'py, PyString>> {
    match s.exact() {
        None => Ok(PyString::new(py, s.as_str())),
        Some(bytes) => str_of_wtf8(py, bytes),
    }
}

//! Python `str` <-> [`JsStr`] (lone surrogates kept), shared by the bindings; reading other
//! values as JavaScript would is `crate::jsread`.

use pi_condense_core::jsstr::JsStr;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

/// A Python `str` as a [`JsStr`]: its lossy text, plus its exact bytes when it holds lone
/// surrogates (from its code points: a subclass's `encode` is not run, nothing is raised).
pub(crate) fn js_str_of(s: &Bound<'_, PyString>) -> PyResult<JsStr> {
    if let Some(text) = crate::cpython::str_cow(s) {
        return Ok(JsStr::new(text.into_owned()));
    }
    Ok(JsStr::from_wtf8(&crate::cpython::wtf8_of(s)))
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

//! Python `str` <-> [`JsStr`] (lone surrogates kept), shared by the bindings; reading other
//! values as JavaScript would is `crate::jsread`.

use pi_condense_core::jsstr::JsStr;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

/// A Python `str` as a [`JsStr`]: its lossy text, plus its exact bytes when it holds lone
/// surrogates (encoded in C with `surrogatepass`: a subclass's `encode` is not run).
pub(crate) fn js_str_of(s: &Bound<'_, PyString>) -> PyResult<JsStr> {
    if let Ok(text) = s.to_cow() {
        return Ok(JsStr::new(text.into_owned()));
    }
    let encoded = crate::jsread::encode_surrogatepass(s, pyo3::ffi::c_str!("utf-8"))?;
    Ok(JsStr::from_wtf8(encoded.as_bytes()))
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

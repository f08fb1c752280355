//! Python `str` <-> Rust text: [`JsStr`] (lone surrogates kept), UTF-16 code units and the
//! key form of ids, shared by the bindings; reading other values as JavaScript would is
//! `crate::jsread`.

use std::borrow::Cow;

use pi_condense_core::jsstr::{self, JsStr};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};

/// A Python `str` as a [`JsStr`]: its lossy text, plus its exact bytes when it holds lone
/// surrogates (from its code points: a subclass's `encode` is not run, nothing is raised).
pub(crate) fn js_str_of(s: &Bound<'_, PyString>) -> PyResult<JsStr> {
    if let Some(text) = crate::cpython::str_cow(s) {
        return Ok(JsStr::new(text.into_owned()));
    }
    Ok(JsStr::from_wtf8(&crate::cpython::wtf8_of(s)))
}

/// Generalized UTF-8 (lone surrogates as 3-byte sequences) as a Python `str`: its valid
/// runs and its surrogates (`chr`) joined in C. No codec runs (decoding with
/// `surrogatepass` would build and clear a `UnicodeDecodeError` per surrogate).
pub(crate) fn str_of_wtf8<'py>(py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyString>> {
    if let Ok(text) = std::str::from_utf8(bytes) {
        return Ok(PyString::new(py, text));
    }
    let pieces = PyList::empty(py);
    let mut rest = bytes;
    while !rest.is_empty() {
        let valid = match std::str::from_utf8(rest) {
            Ok(text) => text,
            Err(e) => {
                // SAFETY: `from_utf8` checked these bytes.
                unsafe { std::str::from_utf8_unchecked(&rest[..e.valid_up_to()]) }
            }
        };
        if !valid.is_empty() {
            pieces.append(PyString::new(py, valid))?;
        }
        rest = &rest[valid.len()..];
        match rest {
            [] => {}
            [0xED, b1 @ 0xA0..=0xBF, b2 @ 0x80..=0xBF, ..] => {
                let unit = 0xD000 | (u32::from(b1 & 0x3F) << 6) | u32::from(b2 & 0x3F);
                // SAFETY: the GIL is held; a surrogate is a valid ordinal (a new reference).
                let surrogate = unsafe {
                    Bound::from_owned_ptr_or_err(py, pyo3::ffi::PyUnicode_FromOrdinal(unit as _))?
                };
                pieces.append(surrogate)?;
                rest = &rest[3..];
            }
            _ => {
                return Err(pyo3::exceptions::PyValueError::new_err(
                    "not generalized UTF-8: a byte sequence neither a character nor a surrogate",
                ));
            }
        }
    }
    // SAFETY: the GIL is held; the pieces are exact strs (a new reference is returned).
    let joined = unsafe {
        Bound::from_owned_ptr_or_err(
            py,
            pyo3::ffi::PyUnicode_Join(PyString::new(py, "").as_ptr(), pieces.as_ptr()),
        )?
    };
    Ok(joined.downcast_into::<PyString>()?)
}

/// A [`JsStr`] as a Python `str`, lone surrogates included.
pub(crate) fn str_of_js<'py>(py: Python<'py>, s: &JsStr) -> PyResult<Bound<'py, PyString>> {
    match s.exact() {
        None => Ok(PyString::new(py, s.as_str())),
        Some(bytes) => str_of_wtf8(py, bytes),
    }
}

/// The UTF-16 code units of a str, from its code points (no codec: a subclass's `encode`
/// is not run, nothing is raised).
pub(crate) fn utf16_of(s: &Bound<'_, PyString>) -> PyResult<Vec<u16>> {
    Ok(pi_condense_core::json::utf16_of(
        &crate::cpython::code_points(s),
    ))
}

/// The key form of a Python str (see `pi_condense_core::jsstr::key_form_units`): the
/// string itself unless it holds lone surrogates or U+FDD0. Every id and key the native
/// index holds is in this form, so a lone surrogate keeps its own slot.
pub(crate) fn key_of(s: &Bound<'_, PyString>) -> PyResult<String> {
    match crate::cpython::str_cow(s) {
        Some(text) => Ok(match jsstr::key_form_str(&text) {
            Cow::Borrowed(_) => text.into_owned(),
            Cow::Owned(key) => key,
        }),
        None => Ok(jsstr::key_form_units(&utf16_of(s)?)),
    }
}

/// The Python str of a key form (lone surrogates restored).
pub(crate) fn key_to_py<'py>(py: Python<'py>, key: &str) -> PyResult<Bound<'py, PyString>> {
    match jsstr::key_form_to_wtf8(key) {
        Cow::Borrowed(_) => Ok(PyString::new(py, key)),
        Cow::Owned(bytes) => str_of_wtf8(py, &bytes),
    }
}

/// [`key_to_py`] of every key.
pub(crate) fn keys_to_py<'py, S: AsRef<str>>(
    py: Python<'py>,
    keys: impl IntoIterator<Item = S>,
) -> PyResult<Vec<Bound<'py, PyString>>> {
    keys.into_iter()
        .map(|k| key_to_py(py, k.as_ref()))
        .collect()
}

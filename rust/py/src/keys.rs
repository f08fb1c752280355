//! Occurrence keys, content hashing and protected-path globs.
//!
//! Python `str` may hold lone surrogates, which Rust `str` cannot: every entry
//! point takes the UTF-8 fast path and falls back to UTF-16 code units (the
//! JavaScript view of the string) when the text is not valid Unicode.

use std::borrow::Cow;

use pi_condense_core::keys;
use pyo3::intern;
use pyo3::prelude::*;

use crate::jsread::js_number;
use crate::pystr::utf16_of;
use pyo3::types::{PyBytes, PyDict, PyFloat, PyList, PyString};

/// A Python string as Rust sees it: UTF-8 when valid, else UTF-16 code units.
enum Text<'a> {
    Utf8(Cow<'a, str>),
    Utf16(Vec<u16>),
}

impl<'a> Text<'a> {
    fn of(s: &'a Bound<'_, PyString>) -> PyResult<Self> {
        match crate::cpython::str_cow(s) {
            Some(text) => Ok(Text::Utf8(text)),
            None => Ok(Text::Utf16(utf16_of(s)?)),
        }
    }
}

fn units_of(s: &Bound<'_, PyString>) -> PyResult<Vec<u16>> {
    match crate::cpython::str_cow(s) {
        Some(text) => Ok(text.encode_utf16().collect()),
        None => utf16_of(s),
    }
}

fn str_from_utf16<'py>(py: Python<'py>, units: &[u16]) -> PyResult<Bound<'py, PyString>> {
    let bytes: Vec<u8> = units.iter().flat_map(|u| u.to_le_bytes()).collect();
    let decoded = PyBytes::new(py, &bytes).call_method1(
        intern!(py, "decode"),
        (intern!(py, "utf-16-le"), intern!(py, "surrogatepass")),
    )?;
    Ok(decoded.downcast_into::<PyString>()?)
}

/// A parsed timestamp (always integral): a Python int, or float('inf').
fn timestamp_to_py(py: Python<'_>, ts: f64) -> PyResult<PyObject> {
    if !ts.is_finite() {
        return Ok(PyFloat::new(py, ts).into_any().unbind());
    }
    if ts.abs() < 9.0e18 {
        // Integral and well inside i64: the cast is exact.
        return Ok((ts as i64).into_pyobject(py)?.into_any().unbind());
    }
    Ok(PyFloat::new(py, ts)
        .call_method0(intern!(py, "__int__"))?
        .unbind())
}

/// Occurrence key of a tool call: `f"{tool_call_id}@{String(timestamp)}"` when
/// `timestamp` is a number (int or float, not bool; NaN and infinities
/// included, formatted as JavaScript prints them), else the bare id itself.
#[pyfunction]
fn occ_key<'py>(
    tool_call_id: &Bound<'py, PyString>,
    timestamp: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyString>> {
    let py = tool_call_id.py();
    match js_number(timestamp)? {
        None => Ok(tool_call_id.clone()),
        Some(ts) => {
            let suffix = PyString::new(py, &keys::format_occ_key("", ts));
            Ok(tool_call_id.add(suffix)?.downcast_into::<PyString>()?)
        }
    }
}

/// The bare-id prefix and timestamp of an occurrence key; None for a bare key.
fn split_key<'py>(key: &Bound<'py, PyString>) -> PyResult<Option<(Bound<'py, PyString>, f64)>> {
    let py = key.py();
    Ok(match Text::of(key)? {
        Text::Utf8(text) => keys::split_occ_key_units(text.as_bytes())
            .and_then(|(sep, ts)| text.get(..sep).map(|id| (PyString::new(py, id), ts))),
        // The id is cut from the Python string itself, never re-decoded from UTF-16:
        // decoding would join a surrogate pair given as two code points into one astral
        // character. The suffix from the separator on is ASCII, one code point per unit.
        Text::Utf16(units) => match keys::split_occ_key_units(&units) {
            Some((sep, ts)) => {
                let end = key.len()? - (units.len() - sep);
                let id = key.get_item(crate::cpython::slice(py, 0, end as isize)?)?;
                Some((id.downcast_into::<PyString>()?, ts))
            }
            None => None,
        },
    })
}

/// Splits a key into `(tool_call_id, timestamp)`. The separator is the last
/// `@`, which must not be the first character, followed by one or more ASCII
/// digits up to the end; otherwise the whole key is a bare id and the
/// timestamp is None. The timestamp is `Number(digits)`: an int, or
/// `float('inf')` when the digits overflow a double.
#[pyfunction]
fn parse_occ_key<'py>(
    key: &Bound<'py, PyString>,
) -> PyResult<(Bound<'py, PyString>, Option<PyObject>)> {
    match split_key(key)? {
        Some((id, ts)) => Ok((id, Some(timestamp_to_py(key.py(), ts)?))),
        None => Ok((key.clone(), None)),
    }
}

/// The bare provider id of a key (`parse_occ_key(key)[0]`).
#[pyfunction]
fn bare_tool_call_id<'py>(key: &Bound<'py, PyString>) -> PyResult<Bound<'py, PyString>> {
    Ok(match split_key(key)? {
        Some((id, _)) => id,
        None => key.clone(),
    })
}

/// The text the content hash covers: CRLF -> LF, trailing spaces and tabs
/// removed from every line, then JavaScript `trim()`.
#[pyfunction]
fn normalize_result_text<'py>(text: &Bound<'py, PyString>) -> PyResult<Bound<'py, PyString>> {
    let py = text.py();
    match Text::of(text)? {
        Text::Utf8(s) => Ok(PyString::new(py, &keys::normalize_result_text(&s))),
        Text::Utf16(units) => str_from_utf16(py, &keys::normalize_result_text_utf16(&units)),
    }
}

/// The digest an image marker names an image by (`jsread::image_digest`): 8 hex digits of
/// the SHA-256 of the UTF-8 of `String(data)`.
#[pyfunction]
fn image_digest(data: &Bound<'_, PyAny>) -> PyResult<String> {
    crate::jsread::image_digest(Some(data))
}

/// Dedup content hash: lowercase hex SHA-1 of the UTF-8 bytes of
/// `tool_name + "\0" + normalize_result_text(text)`; a lone surrogate is
/// hashed as U+FFFD, as Node encodes it.
#[pyfunction]
fn hash_tool_result(
    tool_name: &Bound<'_, PyString>,
    text: &Bound<'_, PyString>,
) -> PyResult<String> {
    if let (Some(name), Some(body)) = (
        crate::cpython::str_cow(tool_name),
        crate::cpython::str_cow(text),
    ) {
        return Ok(keys::hash_tool_result(&name, &body));
    }
    Ok(keys::hash_tool_result_utf16(
        &units_of(tool_name)?,
        &units_of(text)?,
    ))
}

/// Protected tool calls, with the config lists compiled once: a call is
/// protected when its tool name is one of `tools` (exact, case-sensitive) or
/// its `args["path"]` is a string that, with every backslash read as `/`,
/// fully matches one of the `globs` (`**/` zero or more directories, `**`
/// anything but line breaks, `*` and `?` within one segment, all else literal).
#[pyclass(name = "ProtectedMatcher", module = "pi_condense._core", frozen)]
struct PyProtectedMatcher {
    inner: keys::ProtectedMatcher,
    tools: Vec<Py<PyString>>,
    globs: Vec<Py<PyString>>,
}

impl PyProtectedMatcher {
    fn tool_matches(&self, name: &Bound<'_, PyString>) -> PyResult<bool> {
        Ok(match Text::of(name)? {
            Text::Utf8(s) => self.inner.is_protected_tool(&s),
            Text::Utf16(units) => self.inner.is_protected_tool_utf16(&units),
        })
    }

    fn path_matches(&self, path: &Bound<'_, PyString>) -> PyResult<bool> {
        if self.inner.globs().is_empty() {
            return Ok(false);
        }
        Ok(match Text::of(path)? {
            Text::Utf8(s) => self.inner.matches_path(&s),
            Text::Utf16(units) => self.inner.matches_path_utf16(&units),
        })
    }
}

#[pymethods]
impl PyProtectedMatcher {
    #[new]
    #[pyo3(signature = (tools, globs))]
    fn new(tools: Vec<Bound<'_, PyString>>, globs: Vec<Bound<'_, PyString>>) -> PyResult<Self> {
        let tool_units = tools.iter().map(units_of).collect::<PyResult<Vec<_>>>()?;
        let glob_units = globs.iter().map(units_of).collect::<PyResult<Vec<_>>>()?;
        Ok(PyProtectedMatcher {
            inner: keys::ProtectedMatcher::from_utf16(tool_units, &glob_units),
            tools: tools.into_iter().map(Bound::unbind).collect(),
            globs: globs.into_iter().map(Bound::unbind).collect(),
        })
    }

    /// Whether a call of `tool_name` with arguments `args` is protected. A
    /// non-str `tool_name` matches no tool name; `args` other than a dict, or
    /// a dict without a str `"path"`, matches no glob.
    fn is_protected(
        &self,
        tool_name: &Bound<'_, PyAny>,
        args: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        if let Ok(name) = tool_name.downcast::<PyString>()
            && self.tool_matches(name)?
        {
            return Ok(true);
        }
        if self.inner.globs().is_empty() {
            return Ok(false);
        }
        let Ok(dict) = args.downcast::<PyDict>() else {
            return Ok(false);
        };
        match dict.get_item(intern!(args.py(), "path"))? {
            Some(path) => match path.downcast::<PyString>() {
                Ok(path) => self.path_matches(path),
                Err(_) => Ok(false),
            },
            None => Ok(false),
        }
    }

    /// Whether `path` (backslashes read as `/`) fully matches any glob.
    fn matches_path(&self, path: &Bound<'_, PyString>) -> PyResult<bool> {
        self.path_matches(path)
    }

    /// The protected tool names, as given.
    #[getter]
    fn tools<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.tools.iter().map(|t| t.bind(py)))
    }

    /// The protected path globs, as given.
    #[getter]
    fn globs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.globs.iter().map(|g| g.bind(py)))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "ProtectedMatcher(tools={}, globs={})",
            self.tools(py)?.repr()?,
            self.globs(py)?.repr()?
        ))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(occ_key, m)?)?;
    m.add_function(wrap_pyfunction!(parse_occ_key, m)?)?;
    m.add_function(wrap_pyfunction!(bare_tool_call_id, m)?)?;
    m.add_function(wrap_pyfunction!(normalize_result_text, m)?)?;
    m.add_function(wrap_pyfunction!(hash_tool_result, m)?)?;
    m.add_function(wrap_pyfunction!(image_digest, m)?)?;
    m.add_class::<PyProtectedMatcher>()?;
    Ok(())
}

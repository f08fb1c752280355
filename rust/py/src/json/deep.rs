//! `loads_deep`: the core's parser (`json::parse_with`) building Python objects, for texts
//! nested deeper than `orjson` (1024) or `json` (the recursion limit) read. What it builds
//! and the errors it raises are those of `json.loads` with `js.json`'s integer rule.

use pi_condense_core::json::{Build, ErrorKind, Failure, Integer, JsString, Scalar, parse_with};
use pi_condense_core::jsstr::utf16_to_wtf8;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyList, PyString};

use super::{TextRef, escape_lone_surrogates, json_error, read_text};

/// Builds what `json.loads` would: dicts in text order (a repeated key keeps its first
/// position and takes the last value), ints for integers that fit 64 bits, floats for
/// other numbers, lone surrogates kept.
struct PyValues<'py>(Python<'py>);

impl<'py> Build for PyValues<'py> {
    type Value = Bound<'py, PyAny>;
    type Array = Bound<'py, PyList>;
    type Object = Bound<'py, PyDict>;
    type Error = PyErr;

    fn scalar(&mut self, scalar: Scalar<'_>) -> PyResult<Bound<'py, PyAny>> {
        let py = self.0;
        Ok(match scalar {
            Scalar::Null => py.None().into_bound(py),
            Scalar::Bool(b) => PyBool::new(py, b).to_owned().into_any(),
            Scalar::Number(number) => match number.to_integer() {
                Some(Integer::Signed(i)) => i.into_pyobject(py)?.into_any(),
                Some(Integer::Unsigned(u)) => u.into_pyobject(py)?.into_any(),
                None => PyFloat::new(py, number.to_f64()).into_any(),
            },
            Scalar::String(s) => self.string(s)?.into_any(),
        })
    }

    fn array(&mut self) -> PyResult<Bound<'py, PyList>> {
        Ok(PyList::empty(self.0))
    }

    fn push(&mut self, array: &mut Bound<'py, PyList>, item: Bound<'py, PyAny>) -> PyResult<()> {
        array.append(item)
    }

    fn end_array(&mut self, array: Bound<'py, PyList>) -> PyResult<Bound<'py, PyAny>> {
        Ok(array.into_any())
    }

    fn object(&mut self) -> PyResult<Bound<'py, PyDict>> {
        Ok(PyDict::new(self.0))
    }

    fn insert(
        &mut self,
        object: &mut Bound<'py, PyDict>,
        key: JsString,
        value: Bound<'py, PyAny>,
    ) -> PyResult<()> {
        object.set_item(self.string(key)?, value)
    }

    fn end_object(&mut self, object: Bound<'py, PyDict>) -> PyResult<Bound<'py, PyAny>> {
        Ok(object.into_any())
    }
}

impl<'py> PyValues<'py> {
    fn string(&self, s: JsString) -> PyResult<Bound<'py, PyString>> {
        match s {
            JsString::Text(text) => Ok(PyString::new(self.0, &text)),
            JsString::Units(units) => crate::pystr::str_of_js(self.0, &utf16_to_wtf8(&units)),
        }
    }
}

/// `json.loads(text)` to any depth, and the value's deepest nesting (`[[]]`: 2).
#[pyfunction]
pub(super) fn loads_deep<'py>(text: &Bound<'py, PyString>) -> PyResult<(Bound<'py, PyAny>, usize)> {
    let py = text.py();
    // SAFETY: the GIL is held and `text` is our argument, so the caller keeps the str alive for
    // the whole call. The view borrows the UTF-8 CPython caches on the str (or owns a copy of its
    // code units), which never changes or moves once made. The parse below allocates Python
    // objects, so the collector and finalizers may run while the view is in use; none of them
    // can free `text` (the argument holds a reference) or change a str: the view stays valid.
    let read = unsafe { read_text(py, text.as_ptr())? };
    // Lone surrogates (not UTF-8) go to the parser as their escapes, put in at `inserted`.
    let mut inserted = Vec::new();
    let escaped;
    let source = match read.view() {
        TextRef::Str(s) => s,
        TextRef::Units(units) => {
            // A surrogate after a backslash becomes U+FFFD: the text fails where it did.
            escaped = escape_lone_surrogates(units, &mut inserted).0;
            escaped.as_str()
        }
    };
    match parse_with(source, &mut PyValues(py), usize::MAX) {
        Ok(parsed) => Ok(parsed),
        Err(Failure::Build(err)) => Err(err),
        Err(Failure::Syntax(mut error)) => {
            if let ErrorKind::Unterminated {
                escape_at_end: Some(at),
            } = error.kind
                && inserted.binary_search(&at).is_ok()
            {
                // The text ends with a raw surrogate, not with an escape.
                error.kind = ErrorKind::Unterminated {
                    escape_at_end: None,
                };
            }
            let (message, offset) = error.python_json(source);
            // A byte of `source` as an index into the caller's str.
            let index = |byte: usize| {
                let before = source.get(..byte).unwrap_or(source);
                before.chars().count() - 5 * inserted.partition_point(|&at| at < byte)
            };
            let before = source.get(..offset).unwrap_or(source);
            let line = before.matches('\n').count() + 1;
            let pos = index(offset);
            let column = before.rfind('\n').map_or(pos + 1, |at| pos - index(at));
            // As `js.json.loads` words a `json` error.
            let located = format!("{message}: line {line} column {column} (char {pos})");
            Err(json_error(py, located))
        }
    }
}

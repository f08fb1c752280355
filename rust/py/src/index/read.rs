//! Reading index entries from Python values: the conversions (a value as a persisted
//! field, an id in its key form) and the core's [`EntryReader`] over them, through which
//! `pi_condense_core::index::entries` reads summary messages, index and chain entries.

use pi_condense_core::index::JsField;
use pi_condense_core::index::entries::EntryReader;
use pi_condense_core::jsstr::JsStr;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyList, PyString, PyTuple};

use crate::jsread::{Obj, is_absent, js_number, js_string};
use crate::pystr::{js_str_of, key_of};

/// JS truthiness of a JSON-shaped value (an empty dict or list is truthy).
pub(super) fn js_truthy(value: &Bound<'_, PyAny>) -> PyResult<bool> {
    Ok(field_of(value)?.is_truthy())
}

/// The `JsField` view of a present value.
pub(super) fn field_of(value: &Bound<'_, PyAny>) -> PyResult<JsField> {
    if value.is_none() {
        return Ok(JsField::Null);
    }
    if let Ok(b) = value.downcast::<PyBool>() {
        return Ok(JsField::Bool(b.is_true()));
    }
    if let Some(n) = js_number(value)? {
        return Ok(JsField::Number(n));
    }
    if let Ok(s) = value.downcast::<PyString>() {
        return Ok(JsField::Str(js_str_of(s)?));
    }
    if value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>() {
        return Ok(JsField::Array(js_string(Some(value))?.into_string()));
    }
    if is_absent(Obj::of(value)) {
        // `pi_condense.session.ABSENT`: an omitted optional value (JS `undefined`).
        return Ok(JsField::Absent);
    }
    Ok(JsField::Object)
}

/// The `JsField` view of `dict[key]` (absent when the key is missing).
pub(super) fn field(dict: &Bound<'_, PyDict>, key: &Bound<'_, PyString>) -> PyResult<JsField> {
    match dict.get_item(key)? {
        Some(v) => field_of(&v),
        None => Ok(JsField::Absent),
    }
}

/// [`field`] of an id or key: a string in its key form (see `pystr::key_of`).
pub(super) fn key_field(dict: &Bound<'_, PyDict>, key: &Bound<'_, PyString>) -> PyResult<JsField> {
    match dict.get_item(key)? {
        Some(v) => key_field_of(&v),
        None => Ok(JsField::Absent),
    }
}

pub(super) fn key_field_of(value: &Bound<'_, PyAny>) -> PyResult<JsField> {
    match value.downcast::<PyString>() {
        Ok(s) => Ok(JsField::Str(JsStr::new(key_of(s)?))),
        Err(_) => field_of(value),
    }
}

/// A Python value of an entry, read by the core's entry rules.
pub(super) struct Entry<'py>(pub(super) Bound<'py, PyAny>);

/// The member names the entry rules read, as interned Python strings (looked up per entry).
fn member_name<'py>(py: Python<'py>, key: &str) -> Bound<'py, PyString> {
    let interned = match key {
        "toolCallRefs" => intern!(py, "toolCallRefs"),
        "toolCallIds" => intern!(py, "toolCallIds"),
        "shortId" => intern!(py, "shortId"),
        "toolCallId" => intern!(py, "toolCallId"),
        "resultTimestamp" => intern!(py, "resultTimestamp"),
        "type" => intern!(py, "type"),
        "text" => intern!(py, "text"),
        "blockId" => intern!(py, "blockId"),
        "startUserTimestamp" => intern!(py, "startUserTimestamp"),
        "finalAssistantTimestamp" => intern!(py, "finalAssistantTimestamp"),
        "droppedToolCallIds" => intern!(py, "droppedToolCallIds"),
        "droppedOccurrenceKeys" => intern!(py, "droppedOccurrenceKeys"),
        "protectedToolCallIds" => intern!(py, "protectedToolCallIds"),
        "toolRefs" => intern!(py, "toolRefs"),
        "compressedAt" => intern!(py, "compressedAt"),
        "rangeSummaryText" => intern!(py, "rangeSummaryText"),
        "bodySource" => intern!(py, "bodySource"),
        other => return PyString::new(py, other),
    };
    interned.clone()
}

impl<'py> EntryReader for Entry<'py> {
    type Error = PyErr;

    fn member(&self, key: &str) -> PyResult<Option<Self>> {
        let Ok(dict) = self.0.downcast::<PyDict>() else {
            return Ok(None);
        };
        Ok(dict.get_item(member_name(dict.py(), key))?.map(Entry))
    }

    fn items(&self) -> PyResult<Option<Vec<Self>>> {
        if !self.0.is_instance_of::<PyList>() {
            return Ok(None);
        }
        let mut out = Vec::new();
        for item in self.0.try_iter()? {
            out.push(Entry(item?));
        }
        Ok(Some(out))
    }

    fn string(&self) -> PyResult<Option<JsStr>> {
        match self.0.downcast::<PyString>() {
            Ok(s) => Ok(Some(js_str_of(s)?)),
            Err(_) => Ok(None),
        }
    }

    fn key(&self) -> PyResult<Option<String>> {
        match self.0.downcast::<PyString>() {
            Ok(s) => Ok(Some(key_of(s)?)),
            Err(_) => Ok(None),
        }
    }

    fn number(&self) -> PyResult<Option<f64>> {
        js_number(&self.0)
    }

    fn field(&self) -> PyResult<JsField> {
        field_of(&self.0)
    }
}

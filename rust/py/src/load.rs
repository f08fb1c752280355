//! Loading a session file at C speed: the loops of `session.jsonl.parse_lines` and
//! `EntryIndex._index_all`.
//!
//! [`parse_lines_from`] hands each line's bytes to `orjson.loads` while it accepts them and
//! gives a dict; [`index_entries`] files every entry under its id, tells whether the file is
//! linear (each entry the child of the one before) and, while it is, collects the context's
//! messages. What needs Python's rules (a line `orjson` refuses or that is not an object,
//! warnings' texts, labels, the entries the context builder reads besides messages, the
//! `Map` key of an id that is not a `str`) goes back as data or is asked of the caller.

use pyo3::exceptions::PyOverflowError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyBytes, PyDict, PyList, PyMemoryView, PyString, PyTuple};

/// What indexing did (see `EntryIndex._index_all`).
#[pyclass(module = "pi_condense._core", name = "IndexedEntries", frozen, get_all)]
pub(crate) struct IndexedEntries {
    /// Entries indexed (extra headers are not entries).
    count: usize,
    /// The id of the last entry indexed (`ABSENT` when it has none; `None` when no entry
    /// was indexed).
    last_id: Option<PyObject>,
    /// Every entry is the child of the one before, the first a root.
    linear: bool,
    /// While linear: the messages of message entries, in order.
    messages: Py<PyList>,
    /// While linear: `(messages before it, entry, type)` of every other entry but `custom`
    /// ones, in order.
    others: Py<PyList>,
    /// While linear: the `custom` and `custom_message` entries (the pruner's state), in order.
    customs: Py<PyList>,
    /// Label entries, in order.
    labels: Py<PyList>,
    /// `(line, code, id)`: `extra-header`, `duplicate-id`, `no-message`, `no-string-id`.
    warnings: Py<PyList>,
    /// An id seen before, or the branch path's dangling id, was (re)filed.
    invalidated: bool,
}

/// `_core.ABSENT`: the id of an entry without one (`entry.get("id", ABSENT)`).
fn absent(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    static ABSENT: GILOnceCell<PyObject> = GILOnceCell::new();
    let absent = ABSENT.get_or_try_init(py, || {
        py.import("pi_condense._core")?
            .getattr("ABSENT")
            .map(Bound::unbind)
    })?;
    Ok(absent.bind(py).clone())
}

/// The text of a `str` (or str subclass) value, `None` for any other value or a str with
/// lone surrogates (neither equals a name the loop looks for).
fn text_of<'a>(value: Option<&'a Bound<'_, PyAny>>) -> Option<std::borrow::Cow<'a, str>> {
    crate::cpython::str_cow(value?.downcast::<PyString>().ok()?)
}

/// Indexes `items` (`(line, entry)` pairs, each entry a dict) into `by_id` and `entries`, in
/// file order: an extra header is skipped with a warning; every other entry is filed under
/// its id (a `str` as itself, any other value as `map_key(id)`; the later entry wins), with
/// a warning for an id that is not a string, a repeated id and a message entry without a
/// message object. `linear`: `entries` was empty, so whether every entry is the child of
/// the one before is tracked, and the context's entries collected while it is. `dangling`
/// is the kept branch path's dangling id (or `None`).
#[pyfunction]
#[pyo3(signature = (items, by_id, entries, linear, dangling, map_key))]
pub(crate) fn index_entries<'py>(
    items: &Bound<'py, PyList>,
    by_id: &Bound<'py, PyDict>,
    entries: &Bound<'py, PyList>,
    linear: bool,
    dangling: Option<Bound<'py, PyAny>>,
    map_key: &Bound<'py, PyAny>,
) -> PyResult<IndexedEntries> {
    let py = items.py();
    let (k_type, k_id, k_parent, k_message) = (
        intern!(py, "type"),
        intern!(py, "id"),
        intern!(py, "parentId"),
        intern!(py, "message"),
    );
    let messages = PyList::empty(py);
    let others = PyList::empty(py);
    let customs = PyList::empty(py);
    let labels = PyList::empty(py);
    let warnings = PyList::empty(py);
    let mut linear = linear;
    let mut previous: Option<Bound<'py, PyString>> = None;
    let mut count = 0;
    let mut last_id: Option<Bound<'py, PyAny>> = None;
    let mut invalidated = false;
    for item in items.iter() {
        let item = item.downcast_into::<PyTuple>()?;
        let line = item.get_borrowed_item(0)?;
        let entry = item.get_borrowed_item(1)?.downcast::<PyDict>()?.clone();
        let kind = entry.get_item(k_type)?;
        let kind_text = text_of(kind.as_ref());
        let kind_text = kind_text.as_deref();
        if kind_text == Some("session") {
            warnings.append((line, "extra-header", py.None()))?;
            continue;
        }
        count += 1;
        let id = match entry.get_item(k_id)? {
            Some(id) => id,
            None => absent(py)?,
        };
        let exact = id.downcast_exact::<PyString>().ok();
        let mapped;
        let key = match exact {
            Some(_) => &id,
            None => {
                mapped = map_key.call1((&id,))?;
                &mapped
            }
        };
        let seen = by_id.contains(key)?;
        if exact.is_none() && !id.is_instance_of::<PyString>() {
            warnings.append((line, "no-string-id", py.None()))?;
        } else if seen {
            warnings.append((line, "duplicate-id", &id))?;
        }
        let is_message = kind_text == Some("message");
        let message = if is_message {
            entry
                .get_item(k_message)?
                .and_then(|m| m.downcast_into::<PyDict>().ok())
        } else {
            None
        };
        if is_message && message.is_none() {
            warnings.append((line, "no-message", py.None()))?;
        } else if kind_text == Some("label") {
            labels.append(&entry)?;
        }
        if seen || dangling.as_ref().is_some_and(|d| d.eq(key).unwrap_or(true)) {
            invalidated = true;
        }
        if linear {
            let parent = entry.get_item(k_parent)?;
            let follows = match (&parent, &previous) {
                (None, _) if count == 1 => true,
                (Some(parent), _) if count == 1 => parent.is_none(),
                (Some(parent), Some(previous)) => match parent.downcast::<PyString>() {
                    Ok(parent) => match (
                        crate::cpython::str_cow(parent),
                        crate::cpython::str_cow(previous),
                    ) {
                        (Some(a), Some(b)) => a == b,
                        _ => parent.as_any().eq(previous)?,
                    },
                    Err(_) => false,
                },
                _ => false,
            };
            linear = exact.is_some() && !seen && follows;
            previous = exact.cloned();
            if linear {
                match (is_message, message) {
                    (true, Some(message)) => messages.append(message)?,
                    (true, None) => {}
                    (false, _) => {
                        if matches!(kind_text, Some("custom" | "custom_message")) {
                            customs.append(&entry)?;
                        }
                        if kind_text != Some("custom") {
                            let kind = kind.clone().map_or_else(|| py.None(), Bound::unbind);
                            others.append((messages.len(), &entry, kind))?;
                        }
                    }
                }
            }
        }
        by_id.set_item(key, &entry)?;
        entries.append(&entry)?;
        last_id = Some(id);
    }
    Ok(IndexedEntries {
        count,
        last_id: last_id.map(Bound::unbind),
        linear,
        messages: messages.unbind(),
        others: others.unbind(),
        customs: customs.unbind(),
        labels: labels.unbind(),
        warnings: warnings.unbind(),
        invalidated,
    })
}

/// The lines of `data` from byte `position` on (the next is line `number + 1`) given to
/// `loads` while it accepts each and gives an exact dict: appends `(line number, dict)` to
/// `objects` and returns the position and number where the caller's loop goes on (at the
/// first line it did not take: refused (`refused` raised), not a dict, or the end). Only
/// `refused` is caught; any other error of `loads` is raised.
#[pyfunction]
pub(crate) fn parse_lines_from<'py>(
    data: &Bound<'py, PyBytes>,
    mut position: usize,
    mut number: usize,
    loads: &Bound<'py, PyAny>,
    refused: &Bound<'py, PyAny>,
    objects: &Bound<'py, PyList>,
) -> PyResult<(usize, usize)> {
    let py = data.py();
    let bytes = data.as_bytes();
    // Each line goes to `loads` as a slice of a view of `data`, not a copy: the view holds
    // a buffer export of `data`, so a slice that `loads` kept would keep `data` alive.
    let view = PyMemoryView::from(data.as_any())?;
    while position <= bytes.len() {
        let rest = bytes.get(position..).unwrap_or_default();
        let Some(cut) = memchr::memchr(b'\n', rest) else {
            // The last segment (no newline after it): the caller reads it.
            break;
        };
        let (start, end) = (to_isize(position)?, to_isize(position + cut)?);
        let line = view.get_item(crate::cpython::slice(py, start, end)?)?;
        let value = match loads.call1((line,)) {
            Ok(value) => value,
            Err(err) if err.is_instance(py, refused) => break,
            Err(err) => return Err(err),
        };
        let Ok(dict) = value.downcast_into_exact::<PyDict>() else {
            break;
        };
        objects.append((number + 1, dict))?;
        number += 1;
        position += cut + 1;
    }
    Ok((position, number))
}

/// `data` with every byte but the newline a space: the whitespace shape an append reserves
/// before writing its lines over it (`session.lock.append_whole`; `json::write::blank_lines`).
#[pyfunction]
pub(crate) fn blank_lines<'py>(data: &Bound<'py, PyBytes>) -> PyResult<Bound<'py, PyBytes>> {
    // `data` is immutable and held by the caller for the call; making the new bytes object
    // runs no Python code.
    let text = data.as_bytes();
    PyBytes::new_with(data.py(), text.len(), |shape| {
        pi_condense_core::json::write::blank_lines(text, shape);
        Ok(())
    })
}

/// A byte offset as a Python index.
fn to_isize(offset: usize) -> PyResult<isize> {
    isize::try_from(offset).map_err(|_| PyOverflowError::new_err("offset beyond isize"))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(parse_lines_from, m)?)?;
    m.add_function(wrap_pyfunction!(blank_lines, m)?)?;
    m.add_class::<IndexedEntries>()?;
    m.add_function(wrap_pyfunction!(index_entries, m)?)?;
    Ok(())
}

//! Loading a session file at C speed: the loops of `session.jsonl.parse_lines` and
//! `SessionFile._index_all` for the common lines and entries.
//!
//! [`parse_lines_from`] hands each line's bytes to `orjson.loads` while it accepts them and
//! gives a dict; [`index_entries`] files each entry under its string id, tells whether the
//! file is still linear (each entry the child of the one before) and, while it is, collects
//! the context's messages. What is rare or needs Python's rules (a line `orjson` refuses or
//! that is not an object, warnings' texts, labels, the entries the context builder reads
//! besides messages, an id that is not an exact `str`) goes back as data, or ends the fast
//! part: the caller goes on from there with its own loop.

use pyo3::exceptions::PyOverflowError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyMemoryView, PyString, PyTuple};

/// What the fast part did (see `SessionFile._index_all`).
#[pyclass(module = "pi_condense._core", name = "IndexedEntries", frozen, get_all)]
pub(crate) struct IndexedEntries {
    /// How many of `items` it read (the caller goes on from there).
    read: usize,
    /// Entries indexed (extra headers are not entries).
    count: usize,
    /// The id of the last entry indexed (`None` when none was).
    last_id: Option<Py<PyString>>,
    /// Still linear, and the id of the last entry.
    linear: bool,
    previous: Option<Py<PyString>>,
    /// While linear: the messages of message entries, in order.
    messages: Py<PyList>,
    /// While linear: `(messages before it, entry, type)` of every other entry but `custom`
    /// ones, in order.
    others: Py<PyList>,
    /// While linear: the `custom` and `custom_message` entries (the pruner's state), in order.
    customs: Py<PyList>,
    /// Label entries, in order.
    labels: Py<PyList>,
    /// `(line, code, id)`: `extra-header`, `duplicate-id`, `no-message`.
    warnings: Py<PyList>,
    /// An id seen before, or the branch path's dangling id, was (re)filed.
    invalidated: bool,
}

/// Indexes `items` (`(line, entry)` pairs) into `by_id` and `entries` while each entry is a
/// dict with an exact `str` id; `linear`, `previous` and `count` carry the state of the
/// entries indexed before (`count` of them), `dangling` is the kept branch path's dangling
/// id (or `None`).
#[pyfunction]
#[pyo3(signature = (items, by_id, entries, linear, previous, count, dangling))]
pub(crate) fn index_entries<'py>(
    items: &Bound<'py, PyList>,
    by_id: &Bound<'py, PyDict>,
    entries: &Bound<'py, PyList>,
    linear: bool,
    previous: Option<Bound<'py, PyString>>,
    count: usize,
    dangling: Option<Bound<'py, PyAny>>,
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
    let mut previous = previous;
    let mut count = count;
    let mut last_id: Option<Bound<'py, PyString>> = None;
    let mut invalidated = false;
    let mut read = 0;
    for item in items.iter() {
        let item = item.downcast_into::<PyTuple>()?;
        let Ok(entry) = item
            .get_borrowed_item(1)?
            .downcast_exact::<PyDict>()
            .cloned()
        else {
            break;
        };
        let line = || item.get_borrowed_item(0).map(|l| l.to_owned());
        let kind = entry.get_item(k_type)?;
        let kind_text = match &kind {
            None => None,
            Some(k) => match k.downcast_exact::<PyString>() {
                // A `type` that is not a str, or holds lone surrogates: the caller's loop
                // reads it (and what follows).
                Ok(k) => match crate::cpython::str_cow(k) {
                    Some(text) => Some(text),
                    None => break,
                },
                Err(_) if k.is_none() => None,
                Err(_) => break,
            },
        };
        let kind_text = kind_text.as_deref();
        if kind_text == Some("session") {
            warnings.append((line()?, "extra-header", py.None()))?;
            read += 1;
            continue;
        }
        let Some(id) = entry
            .get_item(k_id)?
            .and_then(|id| id.downcast_into_exact::<PyString>().ok())
        else {
            // Not an exact str: the caller's loop reads it (and what follows).
            break;
        };
        count += 1;
        let seen = by_id.contains(&id)?;
        if seen {
            warnings.append((line()?, "duplicate-id", id.clone()))?;
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
            warnings.append((line()?, "no-message", py.None()))?;
        } else if kind_text == Some("label") {
            labels.append(&entry)?;
        }
        if seen || dangling.as_ref().is_some_and(|d| d.eq(&id).unwrap_or(true)) {
            invalidated = true;
        }
        if linear {
            let parent = entry.get_item(k_parent)?;
            let follows = match (&parent, &previous) {
                (None, _) if count == 1 => true,
                (Some(parent), _) if count == 1 => parent.is_none(),
                (Some(parent), Some(previous)) => match parent.downcast_exact::<PyString>() {
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
            linear = !seen && follows;
            previous = Some(id.clone());
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
        by_id.set_item(&id, &entry)?;
        entries.append(&entry)?;
        last_id = Some(id);
        read += 1;
    }
    Ok(IndexedEntries {
        read,
        count,
        last_id: last_id.map(Bound::unbind),
        linear,
        previous: previous.map(Bound::unbind),
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

/// A byte offset as a Python index.
fn to_isize(offset: usize) -> PyResult<isize> {
    isize::try_from(offset).map_err(|_| PyOverflowError::new_err("offset beyond isize"))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(parse_lines_from, m)?)?;
    m.add_class::<IndexedEntries>()?;
    m.add_function(wrap_pyfunction!(index_entries, m)?)?;
    Ok(())
}

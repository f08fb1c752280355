//! `pi_condense._core.ChainScan` and `deterministic_body`: chain compression decisions over a
//! Python message list.
//!
//! Extract -> decide -> apply, as for render: each message dict is read once into a light
//! `ChainMsg` (+ whether it is a recovery output, for the grace window), kept in a
//! `pi_condense_core::chains::ChainLog` that the next scan of the grown list shares;
//! `pi_condense_core::chains` decides, and the results are returned with the caller's own id
//! objects (ids are compared in their U+FFFD form, returned as they were).

use std::collections::HashSet;

use pi_condense_core::chains::view::{id_truthy, is_synthetic_text};
use pi_condense_core::chains::{
    self as core, AssistantContent, BodyError, BodyRecord, CallView, ChainLog, ChainMsg, MsgBody,
    Read, Sourced,
};
use pi_condense_core::js::num::format_number;
use pi_condense_core::jsstr::JsStr;
use pi_condense_core::keys::ProtectedMatcher;
use pi_condense_core::render::grace::in_grace_keys;
use pi_condense_core::render::{JsId, Role, Ts};
use pi_condense_core::view::{
    ArgsMember, NullBlock, ResultBlock, call_args_member, detection_args_member,
    tool_result_text_blocks,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::jsread::{
    self, K, Keys, Obj, anchor_custom_type, is_absent, js_id_bound as js_id, js_string,
    str_is_bound, text, timestamp_bound, truthy,
};
use crate::protect::matcher_protects;
use crate::pystr::{js_str_of, keys_to_py, str_of_js};
use pi_condense_core::jsstr::{JsBuf, utf16_to_wtf8};
use pyo3::types::{PyBool, PyDict, PyList, PyString, PyTuple};
use pyo3::{IntoPyObjectExt, intern};

use crate::index::PyIndex;
use crate::render::PyRenderOptions;

/// `dict[key] ?? ...`: present and not `null`.
fn get_some<'py>(keys: &Keys<'py>, dict: &Bound<'py, PyAny>, key: K) -> Option<Bound<'py, PyAny>> {
    keys.get_bound(dict, key).filter(|v| !v.is_none())
}

/// The member a toolCall block's args are read from (`view::call_args_member`):
/// `block.input ?? block.args ?? block.arguments`, the first that is neither missing nor
/// `null` (`None` when none is); with `detection`, `block.input ?? block.arguments` as chain
/// detection reads them (`view::detection_args_member`: always a member). A block that is
/// not a dict has every member missing.
#[pyfunction]
#[pyo3(signature = (block, detection = false))]
fn tool_call_args_member(block: &Bound<'_, PyAny>, detection: bool) -> Option<&'static str> {
    let keys = Keys::new(block.py(), false);
    let member = if detection {
        Some(detection_args_member(
            get_some(&keys, block, K::Input).is_none(),
        ))
    } else {
        call_args_member(|member| get_some(&keys, block, K::of_args(member)).is_none())
    };
    member.map(|m| match m {
        ArgsMember::Input => "input",
        ArgsMember::Args => "args",
        ArgsMember::Arguments => "arguments",
    })
}

/// `list[i]` (a new reference; `None` past the end).
fn list_item<'py>(list: &Bound<'py, PyList>, i: usize) -> Option<Bound<'py, PyAny>> {
    // SAFETY: `list` is a live list and the GIL is held; the borrowed item is taken as a new
    // reference at once.
    unsafe {
        jsread::list_item(Obj::of(list), i)
            .map(|item| Bound::from_borrowed_ptr(list.py(), item.as_ptr()))
    }
}

/// Whether a value is `ABSENT`.
fn absent(value: &Bound<'_, PyAny>) -> bool {
    is_absent(Obj::of(value))
}

/// The role a message's `role` value names.
fn role_of(value: Option<&Bound<'_, PyAny>>) -> Role {
    // SAFETY: the value is alive (borrowed for the call) and the GIL is held.
    unsafe { jsread::role(value.map(Obj::of)) }
}

/// `String(value)` as a Python str (lone surrogates kept).
fn js_string_py<'py>(
    py: Python<'py>,
    value: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyString>> {
    str_of_js(py, &js_string(value)?)
}

// ----- protection -----

/// `isProtected(toolName, args, cfg)`: tool names (or, reference mode, a string
/// `protectedTools` matched by substring) and path globs, or a Python predicate
/// `(toolName, args) -> bool` that replaces both.
struct Protection<'py> {
    matcher: ProtectedMatcher,
    predicate: Option<Bound<'py, PyAny>>,
}

impl Protection<'_> {
    /// Nothing can be protected (no tools, no globs, no predicate).
    fn is_off(&self) -> bool {
        self.predicate.is_none() && self.matcher.is_empty()
    }

    fn is_protected(
        &self,
        keys: &Keys<'_>,
        name: Option<&Bound<'_, PyAny>>,
        args: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        if let Some(predicate) = &self.predicate {
            let py = predicate.py();
            let name = name.map_or_else(|| py.None().into_bound(py), Clone::clone);
            let args = args.map_or_else(|| py.None().into_bound(py), Clone::clone);
            return predicate.call1((name, args))?.is_truthy();
        }
        matcher_protects(&self.matcher, keys, name, args)
    }
}

// ----- extract -----

/// `chains::view::is_synthetic_text` of a str (the text is read in place when CPython holds
/// its UTF-8, and never copied then).
fn is_synthetic_str(text: &Bound<'_, PyString>) -> PyResult<bool> {
    // SAFETY: `text` is a live str and the GIL is held; the borrowed text is used before
    // `text` is let go, and nothing here runs Python code.
    let head = unsafe { jsread::str_text(text.py(), Obj::of(text), false) };
    Ok(is_synthetic_text(&head))
}

/// A synthetic chain message: string content, or a first text block, holding the marker.
fn is_synthetic(keys: &Keys<'_>, content: Option<&Bound<'_, PyAny>>) -> PyResult<bool> {
    let Some(content) = content else {
        return Ok(false);
    };
    if let Ok(s) = content.downcast::<PyString>() {
        return is_synthetic_str(s);
    }
    let Ok(list) = content.downcast::<PyList>() else {
        return Ok(false);
    };
    let Ok(first) = list.get_item(0) else {
        return Ok(false);
    };
    let Ok(first) = first.downcast::<PyDict>() else {
        return Ok(false);
    };
    if !str_is_bound(keys.get_bound(first.as_any(), K::Kind).as_ref(), "text") {
        return Ok(false);
    }
    match keys.get_bound(first.as_any(), K::Text) {
        Some(t) => match t.downcast::<PyString>() {
            Ok(t) => is_synthetic_str(t),
            Err(_) => Ok(false),
        },
        None => Ok(false),
    }
}

fn assistant_content(
    keys: &Keys<'_>,
    protection: &Protection<'_>,
    content: Option<&Bound<'_, PyAny>>,
) -> PyResult<AssistantContent> {
    let Some(list) = content.and_then(|c| c.downcast::<PyList>().ok()) else {
        return Ok(AssistantContent::NotArray);
    };
    let mut calls = Vec::new();
    let mut has_nullish = false;
    let mut i = 0;
    while let Some(item) = list_item(list, i) {
        let block_index = i;
        i += 1;
        if item.is_none() || absent(&item) {
            has_nullish = true;
            continue;
        }
        let Ok(block) = item.downcast::<PyDict>() else {
            continue;
        };
        if !str_is_bound(keys.get_bound(block.as_any(), K::Kind).as_ref(), "toolCall") {
            continue;
        }
        let id = keys.get_bound(block.as_any(), K::Id);
        let name = keys.get_bound(block.as_any(), K::Name);
        let id = js_id(id.as_ref())?;
        let listed = id_truthy(&id) && truthy(name.as_ref())?;
        let protected = listed && !protection.is_off() && {
            // `block.input ?? block.arguments` (owned: a predicate may run Python code).
            let input = get_some(keys, block.as_any(), K::Input);
            let args = match detection_args_member(input.is_none()) {
                ArgsMember::Input => input,
                member => keys.get_bound(block.as_any(), K::of_args(member)),
            };
            let name = name.map(|n| n.to_owned());
            protection.is_protected(keys, name.as_ref(), args.as_ref())?
        };
        calls.push(CallView {
            block: block_index,
            id,
            listed,
            protected,
        });
    }
    Ok(AssistantContent::Array { calls, has_nullish })
}

/// Reads one message: its detection view, and whether it is a recovery output.
fn read_message(
    keys: &Keys<'_>,
    protection: &Protection<'_>,
    msg: &Bound<'_, PyAny>,
) -> PyResult<(ChainMsg, bool)> {
    let Ok(dict) = msg.downcast::<PyDict>() else {
        let mut view = ChainMsg::new(Role::Other, Ts::Absent);
        if msg.is_none() || absent(msg) {
            view.body = MsgBody::Nullish;
        }
        return Ok((view, false));
    };
    let role = role_of(keys.get_bound(dict.as_any(), K::Role).as_ref());
    let ts_value = keys.get_bound(dict.as_any(), K::Timestamp);
    let timestamp = timestamp_bound(ts_value.as_ref())?;
    let timestamp_null = ts_value.is_some_and(|v| v.is_none());
    let mut view = ChainMsg::new(role, timestamp);
    view.timestamp_null = timestamp_null;
    let mut recovery = false;
    match role {
        Role::User => {
            let synthetic = is_synthetic(keys, keys.get_bound(dict.as_any(), K::Content).as_ref())?;
            view.body = MsgBody::User { synthetic };
        }
        Role::Assistant => {
            // Owned: a protection predicate (Python code) runs while the list is walked.
            let content = keys.get_bound(dict.as_any(), K::Content);
            view.body = MsgBody::Assistant(assistant_content(keys, protection, content.as_ref())?);
        }
        Role::ToolResult => {
            let id_value = keys.get_bound(dict.as_any(), K::ToolCallId);
            let name = keys.get_bound(dict.as_any(), K::ToolName);
            let id = js_id(id_value.as_ref())?;
            let protected = id_truthy(&id)
                && !protection.is_off()
                && protection.is_protected(keys, name.as_ref(), None)?;
            recovery = str_is_bound(name.as_ref(), "context_tree_query");
            view.body = MsgBody::ToolResult { id, protected };
        }
        Role::Custom => {
            let kind = keys.get_bound(dict.as_any(), K::CustomType);
            // SAFETY: `kind` is an owned reference and the GIL is held.
            if unsafe { anchor_custom_type(msg.py(), kind.as_ref().map(Obj::of))? } {
                view.body = MsgBody::Anchor;
            }
        }
        Role::Other => {}
    }
    Ok((view, recovery))
}

/// How many leading items of `list`, followed by `closing`, are the objects `log` read at
/// the same positions (no reference is taken: they are only compared with the addresses
/// the log holds references to).
fn common_prefix(
    log: &ChainLog<PyObject>,
    list: &Bound<'_, PyList>,
    closing: Option<&Bound<'_, PyAny>>,
) -> usize {
    // SAFETY: `list` is a live list and the GIL is held; no Python code runs while the item
    // array is compared.
    let same = match unsafe { crate::cpython::list_items(Obj::of(list)) } {
        Some(items) => log.common_prefix_by(items, |item| item.addr()),
        None => log.common_prefix(&item_addresses(list)),
    };
    match closing {
        Some(closing) if same == list.len() && log.tag(same) == Some(closing.as_ptr() as usize) => {
            same + 1
        }
        _ => same,
    }
}

/// The addresses of the items of `list`, in order, read through the C API (no reference is
/// taken: they are only compared with the addresses a scan holds references to).
fn item_addresses(list: &Bound<'_, PyList>) -> Vec<usize> {
    let mut out = Vec::with_capacity(list.len());
    // SAFETY: `list` is a live list and the GIL is held; each item is only looked at, not
    // kept.
    while let Some(item) = unsafe { jsread::list_item(Obj::of(list), out.len()) } {
        out.push(item.addr());
    }
    out
}

// ----- apply -----

/// The text of a toolResult as a capture reads it (`extractToolResultText`; a null block
/// is skipped): `""` when `message` is not a dict or its content not an array.
#[pyfunction]
#[pyo3(name = "tool_result_text")]
fn tool_result_text_of<'py>(message: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    tool_result_text(&Keys::new(message.py(), false), message, NullBlock::Skip)
}

/// The text of a toolResult (`view::tool_result_text_blocks`): the original text objects;
/// `""` when content is not an array.
fn tool_result_text<'py>(
    keys: &Keys<'py>,
    msg: &Bound<'py, PyAny>,
    null_block: NullBlock,
) -> PyResult<Bound<'py, PyAny>> {
    let py = msg.py();
    let Some(list) = keys
        .get_bound(msg, K::Content)
        .and_then(|c| c.downcast_into::<PyList>().ok())
    else {
        return Ok(PyString::new(py, "").into_any());
    };
    let items: Vec<Bound<'py, PyAny>> = list.iter().collect();
    let kinds = items.iter().map(|item| result_block(keys, item));
    let Ok(blocks) = tool_result_text_blocks(kinds, null_block) else {
        return Err(PyTypeError::new_err(
            "toolResult content holds a null block (the reference throws reading it)",
        ));
    };
    let parts = PyList::empty(py);
    for (at, kind) in blocks {
        let Some(item) = items.get(at) else { continue };
        if kind == ResultBlock::Image {
            if let Some(marker) = jsread::image_marker(keys, item)? {
                parts.append(str_of_js(py, &marker)?)?;
            }
            continue;
        }
        match keys.get_bound(item, K::Text) {
            None => parts.append("")?,
            Some(t) if t.is_none() => parts.append("")?,
            Some(t) if t.is_instance_of::<PyString>() => parts.append(t)?,
            Some(t) => parts.append(js_string_py(py, Some(&t))?)?,
        }
    }
    PyString::new(py, "\n").call_method1(intern!(py, "join"), (parts,))
}

/// How a content block of a tool result reads for its text.
fn result_block(keys: &Keys<'_>, item: &Bound<'_, PyAny>) -> ResultBlock {
    if item.is_none() || absent(item) {
        return ResultBlock::Nullish;
    }
    let Ok(block) = item.downcast::<PyDict>() else {
        return ResultBlock::Other;
    };
    let kind = keys.get_bound(block.as_any(), K::Kind);
    if str_is_bound(kind.as_ref(), "image") {
        ResultBlock::Image
    } else if str_is_bound(kind.as_ref(), "text") {
        ResultBlock::Text
    } else {
        ResultBlock::Other
    }
}

/// The detection message list as read, with its chains, for one compression run.
#[pyclass(name = "ChainScan", module = "pi_condense._core", frozen)]
pub struct PyChainScan {
    /// The message objects read (strong references: no other object can take their
    /// addresses while a later scan compares its list with them), their views and chains;
    /// a later scan shares what it keeps of them.
    log: ChainLog<PyObject>,
    /// The compiled options the protection flags were read with (`None`: explicit lists or
    /// a predicate, never reused).
    options: Option<Py<PyRenderOptions>>,
    in_grace: HashSet<String>,
}

impl PyChainScan {
    fn message<'py>(&self, py: Python<'py>, i: usize) -> PyResult<Bound<'py, PyDict>> {
        let read = self
            .log
            .read(i)
            .ok_or_else(|| PyValueError::new_err("no such message"))?;
        Ok(read.item.bind(py).clone().downcast_into::<PyDict>()?)
    }

    /// The original id object a detected value was read from.
    fn id_object<'py>(&self, py: Python<'py>, keys: &Keys<'py>, s: &Sourced) -> PyResult<PyObject> {
        let msg = self.message(py, s.msg)?;
        let value = match s.block {
            Some(b) => {
                let content = keys
                    .get_bound(msg.as_any(), K::Content)
                    .ok_or_else(|| PyValueError::new_err("message content changed"))?;
                let block = content.downcast::<PyList>()?.get_item(b)?;
                keys.get_bound(block.downcast::<PyDict>()?.as_any(), K::Id)
            }
            None => keys.get_bound(msg.as_any(), K::ToolCallId),
        };
        Ok(match value {
            Some(v) => v.unbind(),
            None => py.None(),
        })
    }

    /// The occurrence key of a middle toolResult, built from its own id object.
    fn key_object<'py>(
        &self,
        py: Python<'py>,
        keys: &Keys<'py>,
        s: &Sourced,
    ) -> PyResult<PyObject> {
        let id = self.id_object(py, keys, s)?;
        let Some(ts) = self.log.read(s.msg).and_then(|r| r.msg.timestamp.num()) else {
            return Ok(id);
        };
        let suffix = format!("@{}", format_number(ts));
        let id = id.bind(py);
        if id.is_instance_of::<PyString>() {
            return Ok(id.add(suffix)?.unbind());
        }
        let mut key = JsBuf::new();
        key.push(&js_string(Some(id))?);
        key.push_str(&suffix);
        Ok(str_of_js(py, &key.finish())?.into_any().unbind())
    }

    fn timestamp_object(&self, py: Python<'_>, keys: &Keys<'_>, i: usize) -> PyResult<PyObject> {
        let msg = self.message(py, i)?;
        Ok(match keys.get_bound(msg.as_any(), K::Timestamp) {
            Some(v) => v.unbind(),
            None => py.None(),
        })
    }

    /// `(position, start_index, end_index, start_ts, final_ts, ids, keys, protected)`.
    fn chain_tuple<'py>(&self, py: Python<'py>, position: usize) -> PyResult<Bound<'py, PyTuple>> {
        let keys = Keys::new(py, false);
        let chain = self
            .log
            .chain(position)
            .ok_or_else(|| PyValueError::new_err("no such chain"))?;
        let list = |items: &[Sourced], as_key: bool| -> PyResult<Bound<'py, PyList>> {
            let out = PyList::empty(py);
            for s in items {
                out.append(if as_key {
                    self.key_object(py, &keys, s)?
                } else {
                    self.id_object(py, &keys, s)?
                })?;
            }
            Ok(out)
        };
        let final_ts = match chain.end {
            Some(end) => self.timestamp_object(py, &keys, end)?,
            None => py.None(),
        };
        let items: Vec<PyObject> = vec![
            position.into_py_any(py)?,
            chain.start.into_py_any(py)?,
            chain.end.into_py_any(py)?,
            self.timestamp_object(py, &keys, chain.start)?,
            final_ts,
            list(&chain.middle_ids, false)?.into_any().unbind(),
            list(&chain.middle_keys, true)?.into_any().unbind(),
            list(&chain.protected_ids, false)?.into_any().unbind(),
        ];
        PyTuple::new(py, items)
    }
}

#[pymethods]
impl PyChainScan {
    /// Reads `messages` (the detection list: branch messages, plus the closing message when
    /// it was threaded in), then `closing` when given (a message read as if it ended the
    /// list), and detects their chains. The grace set is computed over the first `grace_len`
    /// messages (default: all).
    ///
    /// `previous`, a scan read with the very same `options`, lends what it read of the
    /// leading messages that are the very objects it read at the same positions (up to the
    /// first other object), with its chains before the detection resume point: the caller
    /// promises that none of them changed in place since (a host of frozen messages).
    #[new]
    #[pyo3(signature = (
        messages,
        *,
        grace_len = None,
        grace_turns = 0.0,
        protected_tools = None,
        protected_paths = None,
        options = None,
        protected_predicate = None,
        previous = None,
        closing = None,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn py_new<'py>(
        messages: &Bound<'py, PyList>,
        grace_len: Option<usize>,
        grace_turns: f64,
        protected_tools: Option<Vec<Bound<'py, PyString>>>,
        protected_paths: Option<Vec<Bound<'py, PyString>>>,
        options: Option<Bound<'py, PyRenderOptions>>,
        protected_predicate: Option<Bound<'py, PyAny>>,
        previous: Option<PyRef<'py, PyChainScan>>,
        closing: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Self> {
        let py = messages.py();
        let keys = Keys::new(py, false);
        let strings = |list: &Option<Vec<Bound<'py, PyString>>>| -> Vec<String> {
            list.iter().flatten().map(text).collect()
        };
        let matcher = match &options {
            Some(options) => options.borrow().matcher.clone(),
            None => ProtectedMatcher::new(&strings(&protected_tools), &strings(&protected_paths)),
        };
        // Reused only when the flags were read by the same compiled rule, not a predicate.
        let options = options.filter(|_| protected_predicate.is_none());
        let lender = previous.filter(|prev| match (&prev.options, &options) {
            (Some(theirs), Some(ours)) => theirs.as_ptr() == ours.as_ptr(),
            _ => false,
        });
        let protection = Protection {
            matcher,
            predicate: protected_predicate,
        };
        // How many leading messages are the very objects the previous scan read there.
        let keep = lender.as_ref().map_or(0, |prev| {
            common_prefix(&prev.log, messages, closing.as_ref())
        });
        let mut fresh = Vec::new();
        // Asked again at each step: a predicate (Python code) may change the list.
        let item = |i: usize| match list_item(messages, i) {
            Some(msg) => Some(msg),
            None if i == messages.len() => closing.clone(),
            None => None,
        };
        while let Some(msg) = item(keep + fresh.len()) {
            let (view, recovery) = read_message(&keys, &protection, &msg)?;
            let read = Read {
                msg: view,
                recovery,
                item: msg.unbind(),
            };
            fresh.push((read.item.as_ptr() as usize, read));
        }
        let log =
            ChainLog::grown(lender.as_ref().map(|prev| &prev.log), keep, fresh).map_err(|_| {
                PyTypeError::new_err(
                    "chain detection: a message (or a content block inside a chain) is null",
                )
            })?;
        let grace_len = grace_len.unwrap_or(log.len()).min(log.len());
        let in_grace = in_grace_keys(&log.grace_views(grace_len, grace_turns), grace_turns);
        Ok(PyChainScan {
            log,
            options: options.map(Bound::unbind),
            in_grace,
        })
    }

    /// Number of detected chains (closed and interrupted).
    #[getter]
    fn chain_count(&self) -> usize {
        self.log.chain_count()
    }

    /// Occurrence keys of the recovery outputs in grace.
    #[getter]
    fn in_grace<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyString>>> {
        let mut keys: Vec<&String> = self.in_grace.iter().collect();
        keys.sort();
        keys_to_py(py, keys)
    }

    /// Every detected chain, in order, as
    /// `(position, start_index, end_index, start_ts, final_ts, ids, keys, protected)`.
    fn chains<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyTuple>>> {
        (0..self.log.chain_count())
            .map(|i| self.chain_tuple(py, i))
            .collect()
    }

    /// The chain at `position`.
    fn chain<'py>(&self, py: Python<'py>, position: usize) -> PyResult<Bound<'py, PyTuple>> {
        self.chain_tuple(py, position)
    }

    /// `selectEligible` against `index`'s chain registry with rolling window `window` (a JS
    /// number: NaN selects nothing): `(eligible, already_compressed, deferred)` where eligible
    /// and deferred (past the window but holding a recovery output in grace) are chain tuples
    /// and already_compressed the start timestamps of the closed chains already registered.
    ///
    /// Without `report_compressed`, already_compressed is left empty, and the chains that an
    /// earlier call (on this scan, or on the scan it was grown from) found settled against
    /// the same index are not looked at again: the work is that of the chains new since.
    #[pyo3(signature = (index, window, report_compressed = true))]
    #[allow(clippy::type_complexity)]
    fn select<'py>(
        &self,
        py: Python<'py>,
        index: PyRef<'py, PyIndex>,
        window: f64,
        report_compressed: bool,
    ) -> PyResult<(
        Vec<Bound<'py, PyTuple>>,
        Vec<PyObject>,
        Vec<Bound<'py, PyTuple>>,
    )> {
        let keys = Keys::new(py, false);
        let core_index = index.core();
        let out = self
            .log
            .select(
                window,
                core_index.registry_epoch(),
                |start| core_index.is_chain_registered(start),
                &self.in_grace,
                report_compressed,
            )
            .map_err(|_| {
                PyTypeError::new_err(
                    "recovery grace: a non-string tool call id reached bareToolCallId",
                )
            })?;
        let tuples = |positions: &[usize]| -> PyResult<Vec<Bound<'py, PyTuple>>> {
            positions.iter().map(|&i| self.chain_tuple(py, i)).collect()
        };
        Ok((
            tuples(&out.eligible)?,
            out.already_compressed
                .iter()
                .filter_map(|&i| self.log.chain(i))
                .map(|c| self.timestamp_object(py, &keys, c.start))
                .collect::<PyResult<Vec<_>>>()?,
            tuples(&out.deferred)?,
        ))
    }

    /// `extractChainRecords`: fresh backfill record dicts (`toolCallId, toolName, args,
    /// resultText, isError, turnIndex: -1, timestamp, resultTimestamp`) for the span
    /// `start_ts -> final_ts`, skipping `protected_ids` and keys already in `index`.
    fn extract<'py>(
        &self,
        py: Python<'py>,
        index: PyRef<'py, PyIndex>,
        start_ts: f64,
        final_ts: f64,
        protected_ids: &Bound<'py, PyAny>,
    ) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let keys = Keys::new(py, false);
        let mut protected = HashSet::new();
        for id in protected_ids.try_iter()? {
            protected.insert(js_id(Some(&id?))?);
        }
        let core_index = index.core();
        let found = self
            .log
            .extract(
                start_ts,
                final_ts,
                &protected,
                |key| matches!(key, JsId::Str(k) if core_index.record_by_key(k).is_some()),
            )
            .map_err(|_| PyTypeError::new_err("chain extraction: a content block is null"))?;
        let mut out = Vec::with_capacity(found.len());
        for e in found {
            let result = self.message(py, e.result)?;
            let call_msg = self.message(py, e.call_msg)?;
            let content = keys
                .get_bound(call_msg.as_any(), K::Content)
                .ok_or_else(|| PyValueError::new_err("message content changed"))?;
            let block = content.downcast::<PyList>()?.get_item(e.call_block)?;
            let block = block.downcast::<PyDict>()?;
            // `block.input ?? block.args ?? block.arguments ?? {}`
            let mut args = None;
            call_args_member(|member| {
                args = get_some(&keys, block.as_any(), K::of_args(member));
                args.is_none()
            });
            let args = args.unwrap_or_else(|| PyDict::new(py).into_any());
            let ts = keys
                .get_bound(result.as_any(), K::Timestamp)
                .ok_or_else(|| PyValueError::new_err("message timestamp changed"))?;
            let is_error = keys
                .get_bound(result.as_any(), K::IsError)
                .is_some_and(|v| v.downcast::<PyBool>().is_ok_and(|b| b.is_true()));
            let record = PyDict::new(py);
            if let Some(id) = keys.get_bound(result.as_any(), K::ToolCallId) {
                record.set_item(keys.key(K::ToolCallId), id)?;
            }
            if let Some(name) = keys.get_bound(block.as_any(), K::Name) {
                record.set_item(keys.key(K::ToolName), name)?;
            }
            record.set_item(intern!(py, "args"), args)?;
            let text = tool_result_text(&keys, result.as_any(), NullBlock::Throw)?;
            record.set_item(intern!(py, "resultText"), text)?;
            record.set_item(keys.key(K::IsError), is_error)?;
            record.set_item(intern!(py, "turnIndex"), -1)?;
            record.set_item(keys.key(K::Timestamp), &ts)?;
            record.set_item(intern!(py, "resultTimestamp"), &ts)?;
            out.push(record);
        }
        Ok(out)
    }

    fn __repr__(&self) -> String {
        format!(
            "ChainScan(messages={}, chains={})",
            self.log.len(),
            self.log.chain_count()
        )
    }
}

/// `buildDeterministicBody(records, refs)` for `(toolName, toolCallId, argsJson, at)` tuples
/// (`at` = `resultTimestamp ?? timestamp`, NaN when not a number).
#[pyfunction]
fn deterministic_body<'py>(
    py: Python<'py>,
    records: &Bound<'py, PyAny>,
    refs: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyString>> {
    let text = |v: &Bound<'py, PyAny>| -> PyResult<JsStr> { js_str_of(v.downcast::<PyString>()?) };
    let mut rows = Vec::new();
    for item in records.try_iter()? {
        let item = item?;
        let (name, id, args, at): (Bound<'py, PyAny>, Bound<'py, PyAny>, Bound<'py, PyAny>, f64) =
            item.extract()?;
        rows.push(BodyRecord {
            tool_name: text(&name)?,
            tool_call_id: text(&id)?,
            args_json: text(&args)?,
            at,
        });
    }
    let mut ref_list = Vec::new();
    for r in refs.try_iter()? {
        ref_list.push(text(&r?)?);
    }
    match core::deterministic_body(&rows, &ref_list) {
        Ok(units) => str_of_js(py, &utf16_to_wtf8(&units)),
        Err(BodyError::InvalidTime) => Err(PyValueError::new_err("Invalid time value")),
        Err(BodyError::NoRecords) => Err(PyValueError::new_err(
            "deterministic body: no records to describe",
        )),
    }
}

/// `a.localeCompare(b)` under the default ICU collation: -1, 0 or 1.
#[pyfunction]
fn locale_compare(a: &Bound<'_, PyString>, b: &Bound<'_, PyString>) -> i32 {
    match core::locale_compare(&text(a), &text(b)) {
        std::cmp::Ordering::Less => -1,
        std::cmp::Ordering::Equal => 0,
        std::cmp::Ordering::Greater => 1,
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyChainScan>()?;
    m.add_function(wrap_pyfunction!(deterministic_body, m)?)?;
    m.add_function(wrap_pyfunction!(locale_compare, m)?)?;
    m.add_function(wrap_pyfunction!(tool_result_text_of, m)?)?;
    m.add_function(wrap_pyfunction!(tool_call_args_member, m)?)?;
    Ok(())
}

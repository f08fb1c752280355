//! `pi_condense._core.ChainScan` and `deterministic_body`: chain compression decisions over a
//! Python message list.
//!
//! Extract -> decide -> apply, as for render: each message dict is read once into a light
//! `ChainMsg` (+ the role/timestamp view range resolution and the grace window read),
//! `pi_condense_core::chains` decides, and the results are returned with the caller's own id
//! objects (ids are compared in their U+FFFD form, returned as they were).

use std::collections::HashSet;
use std::ffi::CStr;
use std::ptr::addr_of_mut;

use pi_condense_core::chains::view::id_truthy;
use pi_condense_core::chains::{
    self as core, AssistantContent, BodyError, BodyRecord, CallView, ChainMsg, ChainRange, MsgBody,
    Sourced,
};
use pi_condense_core::jsnum::format_number;
use pi_condense_core::jsstr::JsStr;
use pi_condense_core::keys::{is_js_whitespace, ProtectedMatcher};
use pi_condense_core::render::grace::in_grace_keys;
use pi_condense_core::render::{JsId, MsgView, Role, Ts};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;

use crate::keys::{key_of, keys_to_py};
use crate::pyvalue::{js_number, js_str_of};
use pyo3::types::{PyBool, PyBytes, PyDict, PyList, PySlice, PyString, PyTuple};
use pyo3::{intern, IntoPyObjectExt};

use crate::index::PyIndex;

/// The marker of a synthetic chain message.
const SYNTHETIC_PREFIX: &str = "<compressed-chain";

/// A C string constant (checked at compile time).
const fn cstr(bytes: &'static [u8]) -> &'static CStr {
    match CStr::from_bytes_with_nul(bytes) {
        Ok(s) => s,
        Err(_) => panic!("not a C string"),
    }
}

const C_ASSISTANT: &CStr = cstr(b"assistant\0");
const C_CONTEXT_TREE_QUERY: &CStr = cstr(b"context_tree_query\0");
const C_CUSTOM: &CStr = cstr(b"custom\0");
const C_TEXT: &CStr = cstr(b"text\0");
const C_TOOLCALL: &CStr = cstr(b"toolCall\0");
const C_TOOLRESULT: &CStr = cstr(b"toolResult\0");
const C_USER: &CStr = cstr(b"user\0");

// ----- reading Python values with JS eyes -----

/// `pi_condense.session.ABSENT` (JS `undefined` inside a dict). JSON values (the usual case)
/// are ruled out by their exact type before the type is compared with `ABSENT`'s.
fn is_absent(value: &Bound<'_, PyAny>) -> bool {
    let obj = value.as_ptr();
    // SAFETY: `obj` is a live object (borrowed from `value`) and the GIL is held; only the
    // type pointer and the addresses of the builtin type objects are read.
    let plain = unsafe {
        let ty = ffi::Py_TYPE(obj);
        obj == ffi::Py_None()
            || ty == addr_of_mut!(ffi::PyUnicode_Type)
            || ty == addr_of_mut!(ffi::PyDict_Type)
            || ty == addr_of_mut!(ffi::PyList_Type)
            || ty == addr_of_mut!(ffi::PyLong_Type)
            || ty == addr_of_mut!(ffi::PyFloat_Type)
            || ty == addr_of_mut!(ffi::PyBool_Type)
    };
    !plain && crate::absent::is_absent(value)
}

/// `dict[key]`, with `ABSENT` read as a missing key.
fn get<'py>(
    dict: &Bound<'py, PyDict>,
    key: &Bound<'py, PyString>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    Ok(dict.get_item(key)?.filter(|v| !is_absent(v)))
}

/// `dict[key]` without touching reference counts, with `ABSENT` read as a missing key. The
/// value stays valid while `dict` holds it: callers copy what they need before any Python
/// code (a protection predicate) can run.
fn peek<'a, 'py>(
    dict: &'a Bound<'py, PyDict>,
    key: &Bound<'py, PyString>,
) -> PyResult<Option<Borrowed<'a, 'py, PyAny>>> {
    let py = dict.py();
    // SAFETY: `dict` and `key` are live objects and the GIL is held; the returned pointer is
    // a borrowed reference owned by `dict`, which outlives `'a`.
    let found = unsafe {
        let ptr = ffi::PyDict_GetItemWithError(dict.as_ptr(), key.as_ptr());
        Borrowed::from_ptr_or_opt(py, ptr)
    };
    match found {
        Some(value) => Ok((!is_absent(&value)).then_some(value)),
        None => match PyErr::take(py) {
            Some(err) => Err(err),
            None => Ok(None),
        },
    }
}

/// `list[i]` without touching reference counts (`None` past the end).
fn list_item<'a, 'py>(list: &'a Bound<'py, PyList>, i: usize) -> Option<Borrowed<'a, 'py, PyAny>> {
    let py = list.py();
    let index = ffi::Py_ssize_t::try_from(i).ok()?;
    // SAFETY: `list` is a live list and the GIL is held; `PyList_GetItem` returns a borrowed
    // reference owned by the list (or NULL with an IndexError, cleared here).
    unsafe {
        let item = Borrowed::from_ptr_or_opt(py, ffi::PyList_GetItem(list.as_ptr(), index));
        if item.is_none() {
            ffi::PyErr_Clear();
        }
        item
    }
}

/// `dict[key] ?? ...`: present and not `null`.
fn get_some<'py>(
    dict: &Bound<'py, PyDict>,
    key: &Bound<'py, PyString>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    Ok(get(dict, key)?.filter(|v| !v.is_none()))
}

/// `value === expected` for an ASCII literal, without converting the Python string.
fn str_eq(value: Option<&Bound<'_, PyAny>>, expected: &CStr) -> bool {
    value
        .and_then(|v| v.downcast::<PyString>().ok())
        .is_some_and(|s| {
            // SAFETY: `s` is a live str object (the GIL is held) and `expected` a
            // NUL-terminated ASCII string; the call neither allocates nor raises.
            unsafe { ffi::PyUnicode_CompareWithASCIIString(s.as_ptr(), expected.as_ptr()) == 0 }
        })
}

/// Runs `f` on the text of `s` without copying it when it is valid UTF-8 (lone surrogates
/// read as U+FFFD).
fn with_str<R>(s: &Bound<'_, PyString>, f: impl FnOnce(&str) -> R) -> R {
    #[cfg(not(windows))]
    {
        let mut size: ffi::Py_ssize_t = 0;
        // SAFETY: `s` is a live str object and the GIL is held; on success CPython returns
        // `size` bytes of UTF-8 owned by the object, alive while `s` is (the borrow of `s`
        // outlives `f`). On failure (lone surrogates) the raised error is cleared.
        unsafe {
            let data = ffi::PyUnicode_AsUTF8AndSize(s.as_ptr(), &mut size);
            if !data.is_null() {
                if let Ok(len) = usize::try_from(size) {
                    let bytes = std::slice::from_raw_parts(data.cast::<u8>(), len);
                    if let Ok(text) = std::str::from_utf8(bytes) {
                        return f(text);
                    }
                }
            } else {
                ffi::PyErr_Clear();
            }
        }
    }
    f(&s.to_string_lossy())
}

fn lossy(s: &Bound<'_, PyString>) -> String {
    with_str(s, str::to_owned)
}

/// A JS value used as an id (Map/Set key semantics).
fn js_id(value: Option<&Bound<'_, PyAny>>) -> PyResult<JsId> {
    let Some(value) = value else {
        return Ok(JsId::Undefined);
    };
    if value.is_none() {
        return Ok(JsId::Null);
    }
    if let Ok(b) = value.downcast::<PyBool>() {
        return Ok(JsId::Bool(b.is_true()));
    }
    if let Ok(s) = value.downcast::<PyString>() {
        return Ok(JsId::Str(key_of(s)?));
    }
    if let Some(x) = js_number(value)? {
        return Ok(JsId::num(x));
    }
    Ok(JsId::Object(value.as_ptr() as usize))
}

/// JS truthiness of a present value (objects and arrays are truthy, even empty).
fn truthy(value: Option<&Bound<'_, PyAny>>) -> PyResult<bool> {
    let Some(value) = value else {
        return Ok(false);
    };
    if value.is_none() {
        return Ok(false);
    }
    if let Ok(b) = value.downcast::<PyBool>() {
        return Ok(b.is_true());
    }
    if let Ok(s) = value.downcast::<PyString>() {
        return Ok(s.len()? > 0);
    }
    if let Some(x) = js_number(value)? {
        return Ok(x != 0.0 && !x.is_nan());
    }
    Ok(true)
}

/// `String(value)` of a scalar (objects print as `[object Object]`; enough for tool names).
fn js_string(value: Option<&Bound<'_, PyAny>>) -> PyResult<String> {
    let Some(value) = value else {
        return Ok("undefined".to_owned());
    };
    if value.is_none() {
        return Ok("null".to_owned());
    }
    if let Ok(b) = value.downcast::<PyBool>() {
        return Ok(if b.is_true() { "true" } else { "false" }.to_owned());
    }
    if let Ok(s) = value.downcast::<PyString>() {
        return Ok(lossy(s));
    }
    if let Some(x) = js_number(value)? {
        return Ok(format_number(x));
    }
    if value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>() {
        let mut parts = Vec::new();
        for item in value.try_iter()? {
            let item = item?;
            parts.push(if item.is_none() || is_absent(&item) {
                String::new()
            } else {
                js_string(Some(&item))?
            });
        }
        return Ok(parts.join(","));
    }
    Ok("[object Object]".to_owned())
}

fn timestamp_of(value: Option<&Bound<'_, PyAny>>) -> PyResult<Ts> {
    Ok(match value {
        None => Ts::Absent,
        Some(v) => js_number(v)?.map_or(Ts::Other, Ts::Num),
    })
}

fn role_of(value: Option<&Bound<'_, PyAny>>) -> Role {
    for (name, role) in [
        (C_ASSISTANT, Role::Assistant),
        (C_TOOLRESULT, Role::ToolResult),
        (C_USER, Role::User),
        (C_CUSTOM, Role::Custom),
    ] {
        if str_eq(value, name) {
            return role;
        }
    }
    Role::Other
}

fn str_from_utf16<'py>(py: Python<'py>, units: &[u16]) -> PyResult<Bound<'py, PyString>> {
    let bytes: Vec<u8> = units.iter().flat_map(|u| u.to_le_bytes()).collect();
    let decoded = PyBytes::new(py, &bytes).call_method1(
        intern!(py, "decode"),
        (intern!(py, "utf-16-le"), intern!(py, "surrogatepass")),
    )?;
    Ok(decoded.downcast_into::<PyString>()?)
}

// ----- protection -----

/// `isProtected(toolName, args, cfg)`: tool names and path globs, or (reference mode, a string
/// `protectedTools`) a Python predicate over `String(toolName)` for the name part, or a Python
/// predicate `(toolName, args) -> bool` that replaces both.
struct Protection<'py> {
    matcher: ProtectedMatcher,
    tool_predicate: Option<Bound<'py, PyAny>>,
    predicate: Option<Bound<'py, PyAny>>,
}

impl Protection<'_> {
    /// Nothing can be protected (no tools, no globs, no predicate).
    fn is_off(&self) -> bool {
        self.predicate.is_none() && self.tool_predicate.is_none() && self.matcher.is_empty()
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
        let path = args_path(keys, args)?;
        let check = |name: Option<&str>| -> bool {
            match &path {
                Some(p) => with_str(p, |p| self.matcher.is_protected(name, Some(p))),
                None => self.matcher.is_protected(name, None),
            }
        };
        match &self.tool_predicate {
            Some(predicate) => {
                if predicate.call1((js_string(name)?,))?.is_truthy()? {
                    return Ok(true);
                }
                Ok(check(None))
            }
            None => match name.and_then(|n| n.downcast::<PyString>().ok()) {
                Some(name) => Ok(with_str(name, |name| check(Some(name)))),
                None => Ok(check(None)),
            },
        }
    }
}

// ----- extract -----

struct Keys<'py> {
    role: &'py Bound<'py, PyString>,
    timestamp: &'py Bound<'py, PyString>,
    tool_call_id: &'py Bound<'py, PyString>,
    tool_name: &'py Bound<'py, PyString>,
    is_error: &'py Bound<'py, PyString>,
    content: &'py Bound<'py, PyString>,
    kind: &'py Bound<'py, PyString>,
    id: &'py Bound<'py, PyString>,
    name: &'py Bound<'py, PyString>,
    input: &'py Bound<'py, PyString>,
    args: &'py Bound<'py, PyString>,
    arguments: &'py Bound<'py, PyString>,
    path: &'py Bound<'py, PyString>,
    text: &'py Bound<'py, PyString>,
}

impl<'py> Keys<'py> {
    fn new(py: Python<'py>) -> Self {
        Keys {
            role: intern!(py, "role"),
            timestamp: intern!(py, "timestamp"),
            tool_call_id: intern!(py, "toolCallId"),
            tool_name: intern!(py, "toolName"),
            is_error: intern!(py, "isError"),
            content: intern!(py, "content"),
            kind: intern!(py, "type"),
            id: intern!(py, "id"),
            name: intern!(py, "name"),
            input: intern!(py, "input"),
            args: intern!(py, "args"),
            arguments: intern!(py, "arguments"),
            path: intern!(py, "path"),
            text: intern!(py, "text"),
        }
    }
}

/// `text.trimStart().startsWith("<compressed-chain")`, reading only the head of the text
/// (user messages can be long).
fn is_synthetic_text(text: &Bound<'_, PyString>) -> PyResult<bool> {
    const HEAD: usize = 64;
    let len = text.len()?;
    let head = if len > HEAD {
        let slice = PySlice::new(text.py(), 0, HEAD as isize, 1);
        text.as_any().get_item(slice)?.downcast_into::<PyString>()?
    } else {
        text.clone()
    };
    let head = head.to_string_lossy();
    let trimmed = head.trim_start_matches(is_js_whitespace);
    if trimmed.is_empty() && len > HEAD {
        // A long run of leading whitespace: look at the whole text.
        let whole = text.to_string_lossy();
        return Ok(whole
            .trim_start_matches(is_js_whitespace)
            .starts_with(SYNTHETIC_PREFIX));
    }
    // The marker is ASCII: a head cut inside it cannot start with all of it unless the
    // whitespace before it is long, which the next check covers.
    if trimmed.len() < SYNTHETIC_PREFIX.len() && len > HEAD {
        let whole = text.to_string_lossy();
        return Ok(whole
            .trim_start_matches(is_js_whitespace)
            .starts_with(SYNTHETIC_PREFIX));
    }
    Ok(trimmed.starts_with(SYNTHETIC_PREFIX))
}

/// A synthetic chain message: string content, or a first text block, holding the marker.
fn is_synthetic(keys: &Keys<'_>, content: Option<&Bound<'_, PyAny>>) -> PyResult<bool> {
    let Some(content) = content else {
        return Ok(false);
    };
    if let Ok(s) = content.downcast::<PyString>() {
        return is_synthetic_text(s);
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
    if !str_eq(get(first, keys.kind)?.as_ref(), C_TEXT) {
        return Ok(false);
    }
    match get(first, keys.text)? {
        Some(t) => match t.downcast::<PyString>() {
            Ok(t) => is_synthetic_text(t),
            Err(_) => Ok(false),
        },
        None => Ok(false),
    }
}

/// `(args ?? ...)?.path` when it is a string.
fn args_path<'py>(
    keys: &Keys<'py>,
    args: Option<&Bound<'py, PyAny>>,
) -> PyResult<Option<Bound<'py, PyString>>> {
    let Some(args) = args.and_then(|a| a.downcast::<PyDict>().ok()) else {
        return Ok(None);
    };
    Ok(get(args, keys.path)?.and_then(|p| p.downcast_into::<PyString>().ok()))
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
        if item.is_none() || is_absent(&item) {
            has_nullish = true;
            continue;
        }
        let Ok(block) = item.downcast::<PyDict>() else {
            continue;
        };
        if !str_eq(peek(block, keys.kind)?.as_deref(), C_TOOLCALL) {
            continue;
        }
        let id = peek(block, keys.id)?;
        let name = peek(block, keys.name)?;
        let id = js_id(id.as_deref())?;
        let listed = id_truthy(&id) && truthy(name.as_deref())?;
        let protected = listed && !protection.is_off() && {
            // `block.input ?? block.arguments` (owned: a predicate may run Python code).
            let args = match get_some(block, keys.input)? {
                Some(a) => Some(a),
                None => get(block, keys.arguments)?,
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

/// Reads one message into the detection view and the range/grace view.
fn read_message(
    keys: &Keys<'_>,
    protection: &Protection<'_>,
    msg: &Bound<'_, PyAny>,
) -> PyResult<(ChainMsg, MsgView)> {
    let Ok(dict) = msg.downcast::<PyDict>() else {
        let mut view = ChainMsg::new(Role::Other, Ts::Absent);
        if msg.is_none() || is_absent(msg) {
            view.body = MsgBody::Nullish;
        }
        return Ok((view, MsgView::new(Role::Other, Ts::Absent)));
    };
    let role = role_of(peek(dict, keys.role)?.as_deref());
    let ts_value = peek(dict, keys.timestamp)?;
    let timestamp = timestamp_of(ts_value.as_deref())?;
    let timestamp_null = ts_value.is_some_and(|v| v.is_none());
    let mut view = ChainMsg::new(role, timestamp);
    view.timestamp_null = timestamp_null;
    let mut range = MsgView::new(role, timestamp);
    match role {
        Role::User => {
            let synthetic = is_synthetic(keys, peek(dict, keys.content)?.as_deref())?;
            view.body = MsgBody::User { synthetic };
        }
        Role::Assistant => {
            // Owned: a protection predicate (Python code) runs while the list is walked.
            let content = get(dict, keys.content)?;
            view.body = MsgBody::Assistant(assistant_content(keys, protection, content.as_ref())?);
        }
        Role::ToolResult => {
            let id_value = get(dict, keys.tool_call_id)?;
            let name = get(dict, keys.tool_name)?;
            let id = js_id(id_value.as_ref())?;
            let protected = id_truthy(&id)
                && !protection.is_off()
                && protection.is_protected(keys, name.as_ref(), None)?;
            range.is_recovery = str_eq(name.as_ref(), C_CONTEXT_TREE_QUERY);
            if range.is_recovery {
                // Only the grace window reads the id of a toolResult view.
                range.tool_call_id = id.clone();
            }
            view.body = MsgBody::ToolResult { id, protected };
        }
        Role::Custom | Role::Other => {}
    }
    Ok((view, range))
}

// ----- apply -----

/// The text of a toolResult's `type: "text"` blocks joined with `"\n"` (the original text
/// objects; `""` when content is not an array).
fn tool_result_text<'py>(
    keys: &Keys<'py>,
    msg: &Bound<'py, PyDict>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = msg.py();
    let Some(list) = get(msg, keys.content)?.and_then(|c| c.downcast_into::<PyList>().ok()) else {
        return Ok(PyString::new(py, "").into_any());
    };
    let parts = PyList::empty(py);
    for item in list.iter() {
        if item.is_none() || is_absent(&item) {
            return Err(PyTypeError::new_err(
                "toolResult content holds a null block (the reference throws reading it)",
            ));
        }
        let Ok(block) = item.downcast::<PyDict>() else {
            continue;
        };
        if !str_eq(get(block, keys.kind)?.as_ref(), C_TEXT) {
            continue;
        }
        match get(block, keys.text)? {
            None => parts.append("")?,
            Some(t) if t.is_none() => parts.append("")?,
            Some(t) if t.is_instance_of::<PyString>() => parts.append(t)?,
            Some(t) => parts.append(js_string(Some(&t))?)?,
        }
    }
    PyString::new(py, "\n").call_method1(intern!(py, "join"), (parts,))
}

/// The detection message list and its views, for one compression run.
#[pyclass(name = "ChainScan", module = "pi_condense._core", frozen)]
pub struct PyChainScan {
    messages: Py<PyList>,
    views: Vec<ChainMsg>,
    ranges: Vec<MsgView>,
    chains: Vec<ChainRange>,
    in_grace: HashSet<String>,
}

impl PyChainScan {
    fn message<'py>(&self, py: Python<'py>, i: usize) -> PyResult<Bound<'py, PyDict>> {
        Ok(self
            .messages
            .bind(py)
            .get_item(i)?
            .downcast_into::<PyDict>()?)
    }

    /// The original id object a detected value was read from.
    fn id_object<'py>(&self, py: Python<'py>, keys: &Keys<'py>, s: &Sourced) -> PyResult<PyObject> {
        let msg = self.message(py, s.msg)?;
        let value = match s.block {
            Some(b) => {
                let content = get(&msg, keys.content)?
                    .ok_or_else(|| PyValueError::new_err("message content changed"))?;
                let block = content.downcast::<PyList>()?.get_item(b)?;
                get(block.downcast::<PyDict>()?, keys.id)?
            }
            None => get(&msg, keys.tool_call_id)?,
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
        let Some(ts) = self.views.get(s.msg).and_then(|m| m.timestamp.num()) else {
            return Ok(id);
        };
        let suffix = format!("@{}", format_number(ts));
        let id = id.bind(py);
        if id.is_instance_of::<PyString>() {
            return Ok(id.add(suffix)?.unbind());
        }
        Ok(PyString::new(py, &(js_string(Some(id))? + &suffix))
            .into_any()
            .unbind())
    }

    fn timestamp_object(&self, py: Python<'_>, keys: &Keys<'_>, i: usize) -> PyResult<PyObject> {
        let msg = self.message(py, i)?;
        Ok(match get(&msg, keys.timestamp)? {
            Some(v) => v.unbind(),
            None => py.None(),
        })
    }

    /// `(position, start_index, end_index, start_ts, final_ts, ids, keys, protected)`.
    fn chain_tuple<'py>(&self, py: Python<'py>, position: usize) -> PyResult<Bound<'py, PyTuple>> {
        let keys = Keys::new(py);
        let chain = self
            .chains
            .get(position)
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
    /// it was threaded in) and detects its chains. The grace set is computed over the first
    /// `grace_len` messages (default: all).
    #[new]
    #[pyo3(signature = (
        messages,
        *,
        grace_len = None,
        grace_turns = 0.0,
        protected_tools = None,
        protected_paths = None,
        protected_tool_predicate = None,
        protected_predicate = None,
    ))]
    fn py_new<'py>(
        messages: &Bound<'py, PyList>,
        grace_len: Option<usize>,
        grace_turns: f64,
        protected_tools: Option<Vec<Bound<'py, PyString>>>,
        protected_paths: Option<Vec<Bound<'py, PyString>>>,
        protected_tool_predicate: Option<Bound<'py, PyAny>>,
        protected_predicate: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Self> {
        let py = messages.py();
        let keys = Keys::new(py);
        let strings = |list: &Option<Vec<Bound<'py, PyString>>>| -> Vec<String> {
            list.iter().flatten().map(lossy).collect()
        };
        let protection = Protection {
            matcher: ProtectedMatcher::new(&strings(&protected_tools), &strings(&protected_paths)),
            tool_predicate: protected_tool_predicate,
            predicate: protected_predicate,
        };
        let mut views = Vec::with_capacity(messages.len());
        let mut ranges = Vec::with_capacity(messages.len());
        for msg in messages.iter() {
            let (view, range) = read_message(&keys, &protection, &msg)?;
            views.push(view);
            ranges.push(range);
        }
        let chains = core::detect_chains(&views).map_err(|_| {
            PyTypeError::new_err(
                "chain detection: a message (or a content block inside a chain) is null",
            )
        })?;
        let grace_len = grace_len.unwrap_or(ranges.len()).min(ranges.len());
        let in_grace = in_grace_keys(&ranges[..grace_len], grace_turns);
        Ok(PyChainScan {
            messages: messages.clone().unbind(),
            views,
            ranges,
            chains,
            in_grace,
        })
    }

    /// Number of detected chains (closed and interrupted).
    #[getter]
    fn chain_count(&self) -> usize {
        self.chains.len()
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
        (0..self.chains.len())
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
    #[allow(clippy::type_complexity)]
    fn select<'py>(
        &self,
        py: Python<'py>,
        index: PyRef<'py, PyIndex>,
        window: f64,
    ) -> PyResult<(
        Vec<Bound<'py, PyTuple>>,
        Vec<PyObject>,
        Vec<Bound<'py, PyTuple>>,
    )> {
        let keys = Keys::new(py);
        let canonical = |x: f64| -> u64 {
            if x == 0.0 {
                0f64.to_bits()
            } else if x.is_nan() {
                f64::NAN.to_bits()
            } else {
                x.to_bits()
            }
        };
        let registered: HashSet<u64> = index
            .core()
            .chain_entries()
            .iter()
            .map(|e| canonical(e.start_user_timestamp))
            .collect();
        let out = core::select_eligible(
            &self.chains,
            &self.views,
            window,
            |start| registered.contains(&canonical(start)),
            &self.in_grace,
        )
        .map_err(|_| {
            PyTypeError::new_err("recovery grace: a non-string tool call id reached bareToolCallId")
        })?;
        let tuples = |positions: &[usize]| -> PyResult<Vec<Bound<'py, PyTuple>>> {
            positions.iter().map(|&i| self.chain_tuple(py, i)).collect()
        };
        Ok((
            tuples(&out.eligible)?,
            out.already_compressed
                .iter()
                .filter_map(|&i| self.chains.get(i))
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
        let keys = Keys::new(py);
        let mut protected = HashSet::new();
        for id in protected_ids.try_iter()? {
            protected.insert(js_id(Some(&id?))?);
        }
        let core_index = index.core();
        let found = core::extract_chain_records(
            &self.views,
            &self.ranges,
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
            let content = get(&call_msg, keys.content)?
                .ok_or_else(|| PyValueError::new_err("message content changed"))?;
            let block = content.downcast::<PyList>()?.get_item(e.call_block)?;
            let block = block.downcast::<PyDict>()?;
            let args = match get_some(block, keys.input)? {
                Some(a) => a,
                None => match get_some(block, keys.args)? {
                    Some(a) => a,
                    None => match get_some(block, keys.arguments)? {
                        Some(a) => a,
                        None => PyDict::new(py).into_any(),
                    },
                },
            };
            let ts = get(&result, keys.timestamp)?
                .ok_or_else(|| PyValueError::new_err("message timestamp changed"))?;
            let is_error = get(&result, keys.is_error)?
                .is_some_and(|v| v.downcast::<PyBool>().is_ok_and(|b| b.is_true()));
            let record = PyDict::new(py);
            if let Some(id) = get(&result, keys.tool_call_id)? {
                record.set_item(keys.tool_call_id, id)?;
            }
            if let Some(name) = get(block, keys.name)? {
                record.set_item(keys.tool_name, name)?;
            }
            record.set_item(intern!(py, "args"), args)?;
            record.set_item(intern!(py, "resultText"), tool_result_text(&keys, &result)?)?;
            record.set_item(keys.is_error, is_error)?;
            record.set_item(intern!(py, "turnIndex"), -1)?;
            record.set_item(keys.timestamp, &ts)?;
            record.set_item(intern!(py, "resultTimestamp"), &ts)?;
            out.push(record);
        }
        Ok(out)
    }

    fn __repr__(&self) -> String {
        format!(
            "ChainScan(messages={}, chains={})",
            self.views.len(),
            self.chains.len()
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
        Ok(units) => str_from_utf16(py, &units),
        Err(BodyError::InvalidTime) => Err(PyValueError::new_err("Invalid time value")),
        Err(BodyError::NoRecords) => Err(PyValueError::new_err(
            "deterministic body: no records to describe",
        )),
    }
}

/// `a.localeCompare(b)` under the default ICU collation: -1, 0 or 1.
#[pyfunction]
fn locale_compare(a: &Bound<'_, PyString>, b: &Bound<'_, PyString>) -> i32 {
    match core::locale_compare(&lossy(a), &lossy(b)) {
        std::cmp::Ordering::Less => -1,
        std::cmp::Ordering::Equal => 0,
        std::cmp::Ordering::Greater => 1,
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyChainScan>()?;
    m.add_function(wrap_pyfunction!(deterministic_body, m)?)?;
    m.add_function(wrap_pyfunction!(locale_compare, m)?)?;
    Ok(())
}

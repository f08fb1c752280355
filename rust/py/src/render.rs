//! `pi_condense._core.render`: render phases 1-4 over a Python message list.
//!
//! Extract -> decide -> apply: each message dict is read into a light
//! `MsgView` (only the fields the phases look at), `pi_condense_core::render`
//! computes a plan, and the plan is applied here. Untouched messages are the
//! caller's own objects; stubs, copied assistants and synthetic chain messages
//! are fresh dicts in the reference's key order. A render that changes nothing
//! returns the input list object itself.
//!
//! Values copied from input messages into new text (a raw `toolCallId` as a
//! ref, a `toolName`, a relocated protected output) are taken from the Python
//! objects, so strings holding lone surrogates pass through unchanged.

use std::cell::RefCell;

use pi_condense_core::index::{ChainEntry, JsField};
use pi_condense_core::jsnum::format_number;
use pi_condense_core::keys::ProtectedMatcher;
use pi_condense_core::render::size::list_len;
use pi_condense_core::render::view::synthetic_block_id;
use pi_condense_core::render::{
    self as core_render, Block, ChainConfig, Content, Item, JsId, Lazy, MsgView, Piece, Protection,
    PurgeConfig, RenderConfig, Role, SummaryRef, SummaryRefs, Text, Ts,
};
use pyo3::exceptions::PyOverflowError;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use pyo3::{intern, IntoPyObjectExt};

use crate::index::PyIndex;

/// Deepest nesting `String(array)` follows.
const MAX_JS_STRING_DEPTH: usize = 64;

/// Largest integer a double holds exactly.
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_992.0;

// ----- reading Python values with JS eyes -----

/// `pi_condense.session.ABSENT` (JS `undefined` inside a dict).
fn is_absent(value: &Bound<'_, PyAny>) -> bool {
    !value.is_instance_of::<PyDict>()
        && value
            .get_type()
            .name()
            .is_ok_and(|n| n.to_cow().is_ok_and(|n| n == "_Absent"))
}

/// `dict[key]`, with `ABSENT` read as a missing key.
fn get<'py>(
    dict: &Bound<'py, PyDict>,
    key: &Bound<'py, PyString>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    Ok(dict.get_item(key)?.filter(|v| !is_absent(v)))
}

fn str_eq(value: Option<&Bound<'_, PyAny>>, expected: &str) -> bool {
    value
        .and_then(|v| v.downcast::<PyString>().ok())
        .is_some_and(|s| s.to_cow().is_ok_and(|s| s == expected))
}

/// `typeof v === "number"` as a double (bools are not numbers; ints beyond a
/// double's range read as +-Infinity, as `JSON.parse` reads them).
fn number_of(value: &Bound<'_, PyAny>) -> PyResult<Option<f64>> {
    if value.is_instance_of::<PyBool>() {
        return Ok(None);
    }
    if let Ok(f) = value.downcast::<PyFloat>() {
        return Ok(Some(f.value()));
    }
    if value.is_instance_of::<PyInt>() {
        return match value.extract::<f64>() {
            Ok(x) => Ok(Some(x)),
            Err(err) if err.is_instance_of::<PyOverflowError>(value.py()) => {
                Ok(Some(if value.lt(0)? {
                    f64::NEG_INFINITY
                } else {
                    f64::INFINITY
                }))
            }
            Err(err) => Err(err),
        };
    }
    Ok(None)
}

fn timestamp_of(value: Option<&Bound<'_, PyAny>>) -> PyResult<Ts> {
    Ok(match value {
        None => Ts::Absent,
        Some(v) => number_of(v)?.map_or(Ts::Other, Ts::Num),
    })
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
        return Ok(JsId::Str(s.to_string_lossy().into_owned()));
    }
    if let Some(x) = number_of(value)? {
        return Ok(JsId::num(x));
    }
    // Objects compare by identity.
    Ok(JsId::Object(value.as_ptr() as usize))
}

/// `String(value)` (template literal / `+` concatenation) of a present value.
fn js_string_of(value: &Bound<'_, PyAny>, depth: usize) -> PyResult<String> {
    if value.is_none() {
        return Ok("null".to_owned());
    }
    if let Ok(b) = value.downcast::<PyBool>() {
        return Ok(if b.is_true() { "true" } else { "false" }.to_owned());
    }
    if let Ok(s) = value.downcast::<PyString>() {
        return Ok(s.to_string_lossy().into_owned());
    }
    if let Some(x) = number_of(value)? {
        return Ok(format_number(x));
    }
    if value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>() {
        if depth >= MAX_JS_STRING_DEPTH {
            return Ok(String::new());
        }
        let mut parts = Vec::new();
        for item in value.try_iter()? {
            let item = item?;
            parts.push(if item.is_none() || is_absent(&item) {
                String::new()
            } else {
                js_string_of(&item, depth + 1)?
            });
        }
        return Ok(parts.join(","));
    }
    Ok("[object Object]".to_owned())
}

/// `String(value)` as a Python str; a str value is returned as is.
fn js_string_py<'py>(
    py: Python<'py>,
    value: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    match value {
        None => Ok(intern!(py, "undefined").clone().into_any()),
        Some(v) if v.is_instance_of::<PyString>() => Ok(v),
        Some(v) => Ok(PyString::new(py, &js_string_of(&v, 0)?).into_any()),
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
    arguments: &'py Bound<'py, PyString>,
    text: &'py Bound<'py, PyString>,
    custom_type: &'py Bound<'py, PyString>,
    details: &'py Bound<'py, PyString>,
    tool_call_refs: &'py Bound<'py, PyString>,
    result_timestamp: &'py Bound<'py, PyString>,
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
            arguments: intern!(py, "arguments"),
            text: intern!(py, "text"),
            custom_type: intern!(py, "customType"),
            details: intern!(py, "details"),
            tool_call_refs: intern!(py, "toolCallRefs"),
            result_timestamp: intern!(py, "resultTimestamp"),
        }
    }
}

fn role_of(value: Option<&Bound<'_, PyAny>>) -> Role {
    let Some(s) = value.and_then(|v| v.downcast::<PyString>().ok()) else {
        return Role::Other;
    };
    match s.to_cow().as_deref() {
        Ok("user") => Role::User,
        Ok("assistant") => Role::Assistant,
        Ok("toolResult") => Role::ToolResult,
        Ok("custom") => Role::Custom,
        _ => Role::Other,
    }
}

fn block_of(keys: &Keys<'_>, item: &Bound<'_, PyAny>) -> PyResult<Block> {
    if item.is_none() || is_absent(item) {
        return Ok(Block::Nullish);
    }
    let Ok(block) = item.downcast::<PyDict>() else {
        return Ok(Block::Other);
    };
    let kind = get(block, keys.kind)?;
    if str_eq(kind.as_ref(), "toolCall") {
        return Ok(Block::ToolCall {
            id: js_id(get(block, keys.id)?.as_ref())?,
            has_arguments: get(block, keys.arguments)?.is_some(),
        });
    }
    if str_eq(kind.as_ref(), "thinking") {
        return Ok(Block::Thinking);
    }
    Ok(Block::Other)
}

fn content_of(keys: &Keys<'_>, value: Option<&Bound<'_, PyAny>>) -> PyResult<Content> {
    let Some(value) = value else {
        return Ok(Content::Nullish);
    };
    if value.is_none() {
        return Ok(Content::Nullish);
    }
    if let Ok(list) = value.downcast::<PyList>() {
        let mut blocks = Vec::with_capacity(list.len());
        for item in list.iter() {
            blocks.push(block_of(keys, &item)?);
        }
        return Ok(Content::Array(blocks));
    }
    if value.is_instance_of::<PyString>() {
        return Ok(Content::Str);
    }
    Ok(Content::Other)
}

/// `msg.content?.[0]?.text` matched against the synthetic chain marker.
fn synthetic_id_of(
    keys: &Keys<'_>,
    content: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<String>> {
    let Some(list) = content.and_then(|c| c.downcast::<PyList>().ok()) else {
        return Ok(None);
    };
    let Ok(first) = list.get_item(0) else {
        return Ok(None);
    };
    let Ok(first) = first.downcast::<PyDict>() else {
        return Ok(None);
    };
    let Some(text) = get(first, keys.text)? else {
        return Ok(None);
    };
    let Ok(text) = text.downcast::<PyString>() else {
        return Ok(None);
    };
    let text = text.to_string_lossy();
    Ok(synthetic_block_id(&text).map(str::to_owned))
}

/// `msg.details?.toolCallRefs ?? []` of a summary message.
fn summary_refs_of(keys: &Keys<'_>, details: Option<&Bound<'_, PyAny>>) -> PyResult<SummaryRefs> {
    let Some(details) = details.and_then(|d| d.downcast::<PyDict>().ok()) else {
        // Missing, null, or a primitive / array without a `toolCallRefs` property.
        return Ok(SummaryRefs::List(Vec::new()));
    };
    let refs = match get(details, keys.tool_call_refs)? {
        None => return Ok(SummaryRefs::List(Vec::new())),
        Some(r) if r.is_none() => return Ok(SummaryRefs::List(Vec::new())),
        Some(r) => r,
    };
    let Ok(list) = refs.downcast::<PyList>() else {
        return Ok(SummaryRefs::NotArray);
    };
    let mut out = Vec::with_capacity(list.len());
    for item in list.iter() {
        if item.is_none() || is_absent(&item) {
            out.push(SummaryRef::Nullish);
            continue;
        }
        let Ok(r) = item.downcast::<PyDict>() else {
            // A primitive's `toolCallId` / `resultTimestamp` are undefined.
            out.push(SummaryRef::Ref {
                tool_call_id: JsId::Undefined,
                result_timestamp: None,
            });
            continue;
        };
        let result_timestamp = match get(r, keys.result_timestamp)? {
            None => None,
            Some(ts) => Some(js_string_of(&ts, 0)?),
        };
        out.push(SummaryRef::Ref {
            tool_call_id: js_id(get(r, keys.tool_call_id)?.as_ref())?,
            result_timestamp,
        });
    }
    Ok(SummaryRefs::List(out))
}

/// A toolResult's text extraction throws on a `null` element of an array content.
fn text_throws(content: Option<&Bound<'_, PyAny>>) -> bool {
    content
        .and_then(|c| c.downcast::<PyList>().ok())
        .is_some_and(|list| list.iter().any(|item| item.is_none() || is_absent(&item)))
}

fn view_of(keys: &Keys<'_>, msg: &Bound<'_, PyAny>) -> PyResult<MsgView> {
    let Ok(dict) = msg.downcast::<PyDict>() else {
        return Ok(MsgView::new(Role::Other, Ts::Absent));
    };
    let role = role_of(get(dict, keys.role)?.as_ref());
    let mut view = MsgView::new(role, timestamp_of(get(dict, keys.timestamp)?.as_ref())?);
    match role {
        Role::ToolResult => {
            view.tool_call_id = js_id(get(dict, keys.tool_call_id)?.as_ref())?;
            view.is_error = get(dict, keys.is_error)?
                .is_some_and(|v| v.downcast::<PyBool>().is_ok_and(|b| b.is_true()));
            view.is_recovery = str_eq(get(dict, keys.tool_name)?.as_ref(), "context_tree_query");
            view.text_throws = text_throws(get(dict, keys.content)?.as_ref());
        }
        Role::Assistant => {
            view.content = content_of(keys, get(dict, keys.content)?.as_ref())?;
        }
        Role::User => {
            view.synthetic_block_id = synthetic_id_of(keys, get(dict, keys.content)?.as_ref())?;
        }
        Role::Custom => {
            if str_eq(
                get(dict, keys.custom_type)?.as_ref(),
                "context-prune-summary",
            ) {
                view.summary = Some(summary_refs_of(keys, get(dict, keys.details)?.as_ref())?);
            }
        }
        Role::Other => {}
    }
    Ok(view)
}

// ----- sizes -----

static STRINGIFY_LEN: GILOnceCell<PyObject> = GILOnceCell::new();

/// `JSON.stringify(value).length`, through the JSON binding's `stringify_len`.
fn stringify_len(value: &Bound<'_, PyAny>) -> PyResult<usize> {
    let py = value.py();
    let func = STRINGIFY_LEN.get_or_try_init(py, || -> PyResult<PyObject> {
        Ok(py
            .import("pi_condense._core")?
            .getattr("stringify_len")?
            .unbind())
    })?;
    func.bind(py).call1((value,))?.extract()
}

/// Lazily measured argument bodies (phase 2).
struct ArgLens<'a, 'py> {
    messages: &'a Bound<'py, PyList>,
    keys: &'a Keys<'py>,
    error: RefCell<Option<PyErr>>,
}

impl ArgLens<'_, '_> {
    fn measure(&self, msg: usize, block: usize) -> PyResult<usize> {
        let message = self.messages.get_item(msg)?;
        let content = message.downcast::<PyDict>()?.get_item(self.keys.content)?;
        let block = content
            .ok_or_else(|| pyo3::exceptions::PyKeyError::new_err("content"))?
            .downcast::<PyList>()?
            .get_item(block)?;
        let args = block
            .downcast::<PyDict>()?
            .get_item(self.keys.arguments)?
            .ok_or_else(|| pyo3::exceptions::PyKeyError::new_err("arguments"))?;
        stringify_len(&args)
    }
}

impl Lazy for ArgLens<'_, '_> {
    fn args_len(&mut self, msg: usize, block: usize) -> usize {
        match self.measure(msg, block) {
            Ok(len) => len,
            Err(err) => {
                self.error.borrow_mut().get_or_insert(err);
                0
            }
        }
    }
}

// ----- protection -----

/// The protection config: tool names and path globs, or (reference mode, a string
/// `protectedTools`) a Python predicate over the tool name for the name part.
struct PyProtection<'py> {
    matcher: ProtectedMatcher,
    tool_predicate: Option<Bound<'py, PyAny>>,
    error: RefCell<Option<PyErr>>,
}

impl PyProtection<'_> {
    fn tool_matches(&self, predicate: &Bound<'_, PyAny>, tool_name: &JsField) -> PyResult<bool> {
        predicate.call1((tool_name.js_string(),))?.is_truthy()
    }
}

impl Protection for PyProtection<'_> {
    fn is_protected(&self, tool_name: &JsField, path: Option<&str>) -> bool {
        let Some(predicate) = &self.tool_predicate else {
            return Protection::is_protected(&self.matcher, tool_name, path);
        };
        match self.tool_matches(predicate, tool_name) {
            Ok(true) => true,
            Ok(false) => self.matcher.is_protected(None, path),
            Err(err) => {
                self.error.borrow_mut().get_or_insert(err);
                false
            }
        }
    }
}

// ----- apply -----

fn number_to_py(py: Python<'_>, x: f64) -> PyResult<PyObject> {
    if x.is_finite() && x.fract() == 0.0 && x.abs() <= MAX_SAFE_INTEGER {
        // Integral and within +-2^53: the cast is exact.
        return (x as i64).into_py_any(py);
    }
    x.into_py_any(py)
}

/// A persisted field as a Python value; `None` when absent (the key is omitted).
fn field_to_py(py: Python<'_>, field: &JsField) -> PyResult<Option<PyObject>> {
    Ok(match field {
        JsField::Absent => None,
        JsField::Bool(b) => Some(b.into_py_any(py)?),
        JsField::Number(x) => Some(number_to_py(py, *x)?),
        JsField::Str(s) => Some(s.into_py_any(py)?),
        JsField::Null | JsField::Array(_) | JsField::Object => Some(py.None()),
    })
}

/// The text of a toolResult's `type: "text"` blocks joined with `"\n"`.
fn tool_result_text<'py>(keys: &Keys<'py>, msg: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let py = msg.py();
    let content = match msg.downcast::<PyDict>() {
        Ok(dict) => get(dict, keys.content)?,
        Err(_) => None,
    };
    let Some(list) = content.as_ref().and_then(|c| c.downcast::<PyList>().ok()) else {
        return Ok(PyString::new(py, "").into_any());
    };
    let parts = PyList::empty(py);
    for item in list.iter() {
        let Ok(block) = item.downcast::<PyDict>() else {
            continue;
        };
        if !str_eq(get(block, keys.kind)?.as_ref(), "text") {
            continue;
        }
        match get(block, keys.text)? {
            None => parts.append("")?,
            Some(t) if t.is_none() => parts.append("")?,
            Some(t) => parts.append(js_string_py(py, Some(t))?)?,
        }
    }
    PyString::new(py, "\n").call_method1(intern!(py, "join"), (parts,))
}

fn text_to_py<'py>(
    keys: &Keys<'py>,
    messages: &Bound<'py, PyList>,
    text: &Text,
) -> PyResult<Bound<'py, PyAny>> {
    let py = messages.py();
    if let Some(literal) = text.as_literal() {
        return Ok(PyString::new(py, literal).into_any());
    }
    let field = |i: usize, key: &Bound<'py, PyString>| -> PyResult<Option<Bound<'py, PyAny>>> {
        match messages.get_item(i)?.downcast::<PyDict>() {
            Ok(dict) => get(dict, key),
            Err(_) => Ok(None),
        }
    };
    let parts = PyList::empty(py);
    for piece in &text.0 {
        match piece {
            Piece::Lit(s) => parts.append(s)?,
            Piece::ToolCallId(i) => {
                parts.append(js_string_py(py, field(*i, keys.tool_call_id)?)?)?
            }
            Piece::ToolName(i) => parts.append(js_string_py(py, field(*i, keys.tool_name)?)?)?,
            Piece::ToolResultText(i) => {
                parts.append(tool_result_text(keys, &messages.get_item(*i)?)?)?
            }
        }
    }
    PyString::new(py, "").call_method1(intern!(py, "join"), (parts,))
}

fn text_block<'py>(keys: &Keys<'py>, text: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
    let py = text.py();
    let block = PyDict::new(py);
    block.set_item(keys.kind, intern!(py, "text"))?;
    block.set_item(keys.text, text)?;
    Ok(block)
}

/// `{role: "toolResult", toolCallId, toolName, content: [{type: "text", text}], isError: false, timestamp}`.
fn stub_message<'py>(
    keys: &Keys<'py>,
    src: &Bound<'py, PyAny>,
    text: Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyDict>> {
    let py = src.py();
    let original = src.downcast::<PyDict>()?;
    let out = PyDict::new(py);
    out.set_item(keys.role, intern!(py, "toolResult"))?;
    if let Some(id) = get(original, keys.tool_call_id)? {
        out.set_item(keys.tool_call_id, id)?;
    }
    if let Some(name) = get(original, keys.tool_name)? {
        out.set_item(keys.tool_name, name)?;
    }
    out.set_item(keys.content, PyList::new(py, [text_block(keys, text)?])?)?;
    out.set_item(keys.is_error, false)?;
    if let Some(ts) = get(original, keys.timestamp)? {
        out.set_item(keys.timestamp, ts)?;
    }
    Ok(out)
}

/// `{...msg, content}` with purged `arguments` and/or thinking blocks removed.
fn assistant_copy<'py>(
    keys: &Keys<'py>,
    src: &Bound<'py, PyAny>,
    purged: &[core_render::Purge],
    strip_thinking: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let py = src.py();
    let original = src.downcast::<PyDict>()?;
    let content = original
        .get_item(keys.content)?
        .ok_or_else(|| pyo3::exceptions::PyKeyError::new_err("content"))?;
    let blocks = content.downcast::<PyList>()?;
    let new_content = PyList::empty(py);
    for (b, block) in blocks.iter().enumerate() {
        if let Some(purge) = purged.iter().find(|p| p.block == b) {
            let copy = block.downcast::<PyDict>()?.copy()?;
            let marker = PyDict::new(py);
            marker.set_item(intern!(py, "_purged"), purge.marker())?;
            copy.set_item(keys.arguments, marker)?;
            new_content.append(copy)?;
            continue;
        }
        if strip_thinking {
            if let Ok(dict) = block.downcast::<PyDict>() {
                if str_eq(get(dict, keys.kind)?.as_ref(), "thinking") {
                    continue;
                }
            }
        }
        new_content.append(block)?;
    }
    let copy = original.copy()?;
    copy.set_item(keys.content, new_content)?;
    Ok(copy)
}

/// `{role: "user", content: [{type: "text", text}], timestamp: entry.compressedAt}`.
fn synthetic_message<'py>(
    keys: &Keys<'py>,
    index: &PyIndex,
    text: Bound<'py, PyAny>,
    timestamp: &JsField,
    chain_slot: usize,
) -> PyResult<Bound<'py, PyDict>> {
    let py = text.py();
    let out = PyDict::new(py);
    out.set_item(keys.role, intern!(py, "user"))?;
    out.set_item(keys.content, PyList::new(py, [text_block(keys, text)?])?)?;
    // The entry's own `compressedAt` value when the entry object is at hand.
    let entry: Option<&ChainEntry> = index.core().chain_at(chain_slot);
    let original = match entry.map(|e| index.chain_object(py, e)) {
        Some(obj) => match obj.downcast::<PyDict>() {
            Ok(dict) => Some(get(dict, intern!(py, "compressedAt"))?),
            Err(_) => None,
        },
        None => None,
    };
    match original {
        Some(Some(value)) => out.set_item(keys.timestamp, value)?,
        Some(None) => {}
        None => {
            if let Some(value) = field_to_py(py, timestamp)? {
                out.set_item(keys.timestamp, value)?;
            }
        }
    }
    Ok(out)
}

type RenderOutput<'py> = (
    Bound<'py, PyAny>,
    bool,
    usize,
    usize,
    Vec<(&'static str, String, String)>,
    bool,
);

/// Renders `messages` against `index` (spec 04 phases 1-4).
///
/// Returns `(messages, pruned, before_chars, after_chars, diagnostics, threw)`;
/// `diagnostics` are `(kind, dedup_key, detail)` in report order, first per key.
#[pyfunction]
#[pyo3(signature = (
    messages,
    index,
    *,
    recovery_grace_turns = 0.0,
    purge_errors = false,
    cooldown_turns = None,
    min_arg_chars = None,
    chain_compression = false,
    strip_final_assistant_thinking = false,
    protected_tools = None,
    protected_paths = None,
    protected_tool_predicate = None,
))]
#[allow(clippy::too_many_arguments)]
fn render<'py>(
    messages: &Bound<'py, PyList>,
    index: PyRef<'py, PyIndex>,
    recovery_grace_turns: f64,
    purge_errors: bool,
    cooldown_turns: Option<f64>,
    min_arg_chars: Option<f64>,
    chain_compression: bool,
    strip_final_assistant_thinking: bool,
    protected_tools: Option<Vec<Bound<'py, PyString>>>,
    protected_paths: Option<Vec<Bound<'py, PyString>>>,
    protected_tool_predicate: Option<Bound<'py, PyAny>>,
) -> PyResult<RenderOutput<'py>> {
    let py = messages.py();
    let keys = Keys::new(py);
    let mut views = Vec::with_capacity(messages.len());
    for msg in messages.iter() {
        views.push(view_of(&keys, &msg)?);
    }
    let protection = match (
        &protected_tools,
        &protected_paths,
        &protected_tool_predicate,
    ) {
        (None, None, None) => None,
        (tools, paths, predicate) => {
            let lossy = |list: &Option<Vec<Bound<'py, PyString>>>| -> Vec<String> {
                list.iter()
                    .flatten()
                    .map(|s| s.to_string_lossy().into_owned())
                    .collect()
            };
            Some(PyProtection {
                matcher: ProtectedMatcher::new(&lossy(tools), &lossy(paths)),
                tool_predicate: predicate.clone(),
                error: RefCell::new(None),
            })
        }
    };
    let cfg = RenderConfig {
        recovery_grace_turns,
        purge: purge_errors.then_some(PurgeConfig {
            cooldown_turns,
            min_arg_chars,
        }),
        chain: chain_compression.then_some(ChainConfig {
            strip_final_assistant_thinking,
        }),
        protection: protection.as_ref().map(|p| p as &dyn Protection),
    };
    let mut lazy = ArgLens {
        messages,
        keys: &keys,
        error: RefCell::new(None),
    };
    let plan = core_render::render(&views, index.core(), &cfg, &mut lazy);
    if let Some(err) = lazy.error.into_inner() {
        return Err(err);
    }
    if let Some(err) = protection.and_then(|p| p.error.into_inner()) {
        return Err(err);
    }
    let diagnostics: Vec<(&'static str, String, String)> = plan
        .diagnostics
        .into_iter()
        .map(|d| (d.kind.as_str(), d.dedup_key, d.detail))
        .collect();
    let Some(items) = plan.items else {
        return Ok((
            messages.clone().into_any(),
            false,
            0,
            0,
            diagnostics,
            plan.threw,
        ));
    };

    let mut lens = Vec::with_capacity(messages.len());
    for msg in messages.iter() {
        lens.push(stringify_len(&msg)?);
    }
    let before = list_len(lens.iter().copied());
    let out = PyList::empty(py);
    let mut out_lens = Vec::with_capacity(items.len());
    for item in &items {
        match item {
            Item::Keep(i) => {
                out.append(messages.get_item(*i)?)?;
                out_lens.push(lens.get(*i).copied().unwrap_or(0));
                continue;
            }
            Item::Stub { src, text } => {
                let text = text_to_py(&keys, messages, text)?;
                let stub = stub_message(&keys, &messages.get_item(*src)?, text)?;
                out_lens.push(stringify_len(&stub)?);
                out.append(stub)?;
            }
            Item::Assistant {
                src,
                purged,
                strip_thinking,
            } => {
                let copy =
                    assistant_copy(&keys, &messages.get_item(*src)?, purged, *strip_thinking)?;
                out_lens.push(stringify_len(&copy)?);
                out.append(copy)?;
            }
            Item::Synthetic {
                text,
                timestamp,
                chain_slot,
            } => {
                let text = text_to_py(&keys, messages, text)?;
                let synthetic = synthetic_message(&keys, &index, text, timestamp, *chain_slot)?;
                out_lens.push(stringify_len(&synthetic)?);
                out.append(synthetic)?;
            }
        }
    }
    let after = list_len(out_lens);
    Ok((out.into_any(), true, before, after, diagnostics, false))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(render, m)?)?;
    Ok(())
}

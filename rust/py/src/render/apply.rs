//! Apply: the output list from the plan's items (kept messages are the caller's own objects;
//! stubs, copied assistants and synthetic chain messages are fresh dicts in the reference's
//! key order).

use std::borrow::Cow;

use pi_condense_core::index::{ChainEntry, JsField};
use pi_condense_core::jsstr::JsStr;
use pi_condense_core::render::{self as core_render, Item, Piece, Text};
use pi_condense_core::view::{NullBlock, ResultBlock, tool_result_text_blocks};
use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use pyo3::{IntoPyObjectExt, intern};

use crate::cpython::{prefetch, str_utf8 as borrowed_utf8};
use crate::index::PyIndex;
use crate::jsread::{K, Keys, Obj, image_marker, js_string, list_item, str_is};
use crate::pystr::{str_of_js, str_of_wtf8};

use crate::json::Measurer;

use super::copy::fresh_copy;
use super::reuse::Outputs;
use super::shrink::shrunk;
use super::sizes::assistant_copy_len;

/// How many output slots ahead a kept message's header is prefetched.
const KEEP_AHEAD: usize = 8;

/// Largest integer a double holds exactly.
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_992.0;

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
        JsField::Str(s) => Some(str_of_js(py, s)?.into_any().unbind()),
        JsField::Null | JsField::Array(_) | JsField::Object => Some(py.None()),
    })
}

/// Builds the output: new messages from the plan's pieces.
pub(super) struct Writer<'a, 'py> {
    pub(super) py: Python<'py>,
    pub(super) keys: &'a Keys<'py>,
    pub(super) messages: &'a Bound<'py, PyList>,
}

/// One piece of a new text: Rust text, or a Python string to take as is.
enum Part<'py> {
    Text(Cow<'py, str>),
    Py(Bound<'py, PyAny>),
}

impl<'py> Writer<'_, 'py> {
    /// Borrowed input message `i`.
    fn message(&self, i: usize) -> Option<Obj> {
        // SAFETY: the list (`render`'s snapshot, owned for the whole call) is alive and the
        // GIL is held.
        unsafe { list_item(Obj::of(self.messages), i) }
    }

    /// `messages[i][key]` (`ABSENT` and non-dicts read as missing).
    fn field(&self, i: usize, key: K) -> PyResult<Option<Bound<'py, PyAny>>> {
        let Some(msg) = self.message(i) else {
            return Ok(None);
        };
        // SAFETY: `msg` is held by the list; the value is taken as a new reference
        // before anything else runs.
        unsafe {
            Ok(self
                .keys
                .get_of(msg, key)
                .map(|v| Borrowed::from_ptr(self.py, v.as_ptr()).to_owned()))
        }
    }

    /// `String(value)` (`undefined` for a missing value), as a part.
    fn js_string_part(&self, value: Option<Bound<'py, PyAny>>) -> PyResult<Part<'py>> {
        Ok(match value {
            None => Part::Text(Cow::Borrowed("undefined")),
            Some(v) if v.is_instance_of::<PyString>() => match utf8_of(&v) {
                Some(text) => Part::Text(Cow::Owned(text.to_owned())),
                None => Part::Py(v),
            },
            Some(v) => self.js_str_part(js_string(Some(&v))?)?,
        })
    }

    /// A text that may hold lone surrogates as a part (a Python str when it does).
    fn js_str_part(&self, text: JsStr) -> PyResult<Part<'py>> {
        Ok(match text.exact() {
            None => Part::Text(Cow::Owned(text.into_string())),
            Some(bytes) => Part::Py(str_of_wtf8(self.py, bytes)?.into_any()),
        })
    }

    /// The text of a toolResult (`view::tool_result_text_blocks`; a null block was refused
    /// by the decision, and is skipped here).
    fn tool_result_text(&self, i: usize, parts: &mut Vec<Part<'py>>) -> PyResult<()> {
        let py = self.py;
        let Some(content) = self.field(i, K::Content)? else {
            return Ok(());
        };
        let Ok(list) = content.downcast::<PyList>() else {
            return Ok(());
        };
        // By index (a list subclass's `__iter__` is not called).
        let items: Vec<Bound<'py, PyAny>> = list.iter().collect();
        let kinds = items.iter().map(|item| {
            if !item.is_instance_of::<PyDict>() {
                return ResultBlock::Other;
            }
            // SAFETY: `item` is a live dict (held by `items`), its `type` held by it, and the
            // GIL is held.
            let (image, text) = unsafe {
                let kind = self.keys.get(Obj::of(item), K::Kind);
                (str_is(kind, "image"), str_is(kind, "text"))
            };
            match (image, text) {
                (true, _) => ResultBlock::Image,
                (_, true) => ResultBlock::Text,
                _ => ResultBlock::Other,
            }
        });
        let Ok(blocks) = tool_result_text_blocks(kinds, NullBlock::Skip) else {
            return Ok(()); // `Skip` never throws
        };
        let mut first = true;
        for (at, kind) in blocks {
            let Some(item) = items.get(at) else { continue };
            let part = if kind == ResultBlock::Image {
                match image_marker(self.keys, item)? {
                    Some(marker) => Some(self.js_str_part(marker)?),
                    None => continue,
                }
            } else {
                // SAFETY: `item` is a live dict (held by `items`); the value is taken as a new
                // reference before anything else runs.
                let text = unsafe {
                    self.keys
                        .get(Obj::of(item), K::Text)
                        .map(|t| Borrowed::from_ptr(py, t.as_ptr()).to_owned())
                };
                match text {
                    Some(t) if !t.is_none() => Some(self.js_string_part(Some(t))?),
                    _ => None,
                }
            };
            if !first {
                parts.push(Part::Text(Cow::Borrowed("\n")));
            }
            first = false;
            parts.extend(part);
        }
        Ok(())
    }

    /// A plan text as a Python str.
    fn text(&self, text: &Text) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        if let Some(literal) = text.as_literal() {
            return Ok(PyString::new(py, literal).into_any());
        }
        let mut parts: Vec<Part<'py>> = Vec::with_capacity(text.0.len());
        for piece in &text.0 {
            match piece {
                Piece::Lit(s) => parts.push(Part::Text(Cow::Owned(s.clone()))),
                Piece::ToolCallId(i) => {
                    parts.push(self.js_string_part(self.field(*i, K::ToolCallId)?)?)
                }
                Piece::ToolName(i) => {
                    parts.push(self.js_string_part(self.field(*i, K::ToolName)?)?)
                }
                Piece::ToolResultText(i) => self.tool_result_text(*i, &mut parts)?,
                Piece::Wtf8(bytes) => parts.push(Part::Py(str_of_wtf8(py, bytes)?.into_any())),
            }
        }
        if parts.iter().all(|p| matches!(p, Part::Text(_))) {
            let mut joined = String::new();
            for part in &parts {
                if let Part::Text(s) = part {
                    joined.push_str(s);
                }
            }
            return Ok(PyString::new(py, &joined).into_any());
        }
        // A piece holds lone surrogates: join in Python, which keeps them.
        let list = PyList::empty(py);
        for part in parts {
            match part {
                Part::Text(s) => list.append(s.as_ref())?,
                Part::Py(v) => list.append(v)?,
            }
        }
        // SAFETY: the GIL is held; `PyUnicode_Join` reads the items' characters in C (str
        // subclasses included, no method of theirs is called) and returns a new reference.
        unsafe {
            Bound::from_owned_ptr_or_err(
                py,
                ffi::PyUnicode_Join(PyString::new(py, "").as_ptr(), list.as_ptr()),
            )
        }
    }

    fn key(&self, key: K) -> Borrowed<'_, 'py, PyAny> {
        self.keys.key(key)
    }

    fn text_block(&self, text: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
        let py = self.py;
        let block = PyDict::new(py);
        block.set_item(self.key(K::Kind), intern!(py, "text"))?;
        block.set_item(self.key(K::Text), text)?;
        Ok(block)
    }

    /// `{role: "toolResult", toolCallId, toolName, content: [{type: "text", text}], isError: false, timestamp}`.
    fn stub_message(&self, src: usize, text: &Text) -> PyResult<Bound<'py, PyDict>> {
        let py = self.py;
        let text = self.text(text)?;
        let out = PyDict::new(py);
        out.set_item(self.key(K::Role), intern!(py, "toolResult"))?;
        if let Some(id) = self.field(src, K::ToolCallId)? {
            out.set_item(self.key(K::ToolCallId), id)?;
        }
        if let Some(name) = self.field(src, K::ToolName)? {
            out.set_item(self.key(K::ToolName), name)?;
        }
        out.set_item(
            self.key(K::Content),
            PyList::new(py, [self.text_block(text)?])?,
        )?;
        out.set_item(self.key(K::IsError), false)?;
        if let Some(ts) = self.field(src, K::Timestamp)? {
            out.set_item(self.key(K::Timestamp), ts)?;
        }
        Ok(out)
    }

    /// `{...msg, content: [{type: "text", text}], isError: false}` (a superseded read).
    fn superseded_message(&self, src: usize, text: &Text) -> PyResult<Bound<'py, PyDict>> {
        let py = self.py;
        let Some(msg) = self.message(src) else {
            return Err(PyValueError::new_err(
                "the message list changed during render",
            ));
        };
        // SAFETY: `msg` is held by the list (the render's snapshot) and the GIL is held; the
        // copy takes its own references.
        let msg = unsafe { Borrowed::from_ptr(py, msg.as_ptr()) };
        let dict = msg.downcast::<PyDict>()?;
        let text = self.text(text)?;
        let out = fresh_copy(dict)?;
        out.set_item(
            self.key(K::Content),
            PyList::new(py, [self.text_block(text)?])?,
        )?;
        out.set_item(self.key(K::IsError), false)?;
        Ok(out)
    }

    /// `{...msg, content}` with purged `arguments` and/or thinking blocks removed; also
    /// the removed blocks and the length of the original content list.
    fn assistant_copy(
        &self,
        src: usize,
        purged: &[core_render::Purge],
        strip_thinking: bool,
    ) -> PyResult<(Bound<'py, PyDict>, Vec<Bound<'py, PyAny>>, usize)> {
        let py = self.py;
        let original = self
            .messages
            .get_item(src)?
            .downcast_into::<PyDict>()
            .map_err(PyErr::from)?;
        let content = self
            .field(src, K::Content)?
            .ok_or_else(|| pyo3::exceptions::PyKeyError::new_err("content"))?;
        let blocks = content.downcast::<PyList>()?;
        let new_content = PyList::empty(py);
        let mut removed = Vec::new();
        for (b, block) in blocks.iter().enumerate() {
            if purged.iter().any(|p| p.block == b) {
                let copy = fresh_copy(block.downcast::<PyDict>()?)?;
                // SAFETY: `copy` (owned here) holds the arguments, and the GIL is held; the
                // shrink runs no Python code.
                let shrunk = unsafe {
                    match self.keys.get(Obj::of(&copy), K::Arguments) {
                        Some(args) => shrunk(py, args, 0)?,
                        None => None,
                    }
                };
                if let Some(args) = shrunk {
                    copy.set_item(self.key(K::Arguments), args)?;
                }
                new_content.append(copy)?;
                continue;
            }
            if strip_thinking && block.is_instance_of::<PyDict>() {
                // SAFETY: `block` is a live dict and the GIL is held.
                let thinking =
                    unsafe { str_is(self.keys.get(Obj::of(&block), K::Kind), "thinking") };
                if thinking {
                    removed.push(block);
                    continue;
                }
            }
            new_content.append(block)?;
        }
        let copy = fresh_copy(&original)?;
        copy.set_item(self.key(K::Content), new_content)?;
        Ok((copy, removed, blocks.len()))
    }

    /// `{role: "user", content: [{type: "text", text}], timestamp: entry.compressedAt}`.
    fn synthetic_message(
        &self,
        index: &PyIndex,
        text: &Text,
        chain_slot: usize,
    ) -> PyResult<Bound<'py, PyDict>> {
        let py = self.py;
        let text = self.text(text)?;
        let out = PyDict::new(py);
        out.set_item(self.key(K::Role), intern!(py, "user"))?;
        out.set_item(
            self.key(K::Content),
            PyList::new(py, [self.text_block(text)?])?,
        )?;
        // The entry's own `compressedAt` value when the entry object is at hand.
        let entry: Option<&ChainEntry> = index.core().chain_at(chain_slot);
        let original = match entry.map(|e| index.chain_object(py, e)) {
            Some(obj) => match obj.downcast::<PyDict>() {
                // SAFETY: `dict` is a live dict and the GIL is held; the value is taken
                // as a new reference at once.
                Ok(dict) => Some(unsafe {
                    self.keys
                        .get(Obj::of(dict), K::CompressedAt)
                        .map(|v| Borrowed::from_ptr(py, v.as_ptr()).to_owned())
                }),
                Err(_) => None,
            },
            None => None,
        };
        match (original, entry) {
            (Some(Some(value)), _) => out.set_item(self.key(K::Timestamp), value)?,
            (Some(None), _) | (None, None) => {}
            (None, Some(entry)) => {
                if let Some(value) = field_to_py(py, &entry.compressed_at)? {
                    out.set_item(self.key(K::Timestamp), value)?;
                }
            }
        }
        Ok(out)
    }
}

/// The UTF-8 text of a str object (`None` when it holds lone surrogates).
fn utf8_of<'a>(value: &'a Bound<'_, PyAny>) -> Option<&'a str> {
    // SAFETY: `value` is a live str and the GIL is held; the text lives as long as the
    // object, which `value` keeps alive for `'a`.
    unsafe { borrowed_utf8(Obj::of(value)) }
}

/// The output list for `items`, and per slot the length when known (a kept message, or an
/// assistant copy that only lost blocks: `lens` are the input messages' lengths).
///
/// With `reuse` (a frozen render: the outputs of the previous one and where references to
/// release go), a new message the previous frozen render made for the same item from the
/// same objects is that very object again (`reuse`).
pub(super) fn apply<'py>(
    writer: &Writer<'_, 'py>,
    index: &PyIndex,
    items: &[Item],
    lens: &[usize],
    mut reuse: Option<(&mut Outputs, &mut Vec<usize>)>,
) -> PyResult<(Bound<'py, PyList>, Vec<Option<usize>>)> {
    let py = writer.py;
    let messages = writer.messages;
    let count = ffi::Py_ssize_t::try_from(items.len())
        .map_err(|_| PyValueError::new_err("too many messages"))?;
    // SAFETY: the GIL is held; `PyList_New(count)` makes a list of `count` empty slots,
    // each filled once below with a new reference (which `PyList_SetItem` steals). A slot
    // left empty by an error is fine for the list's deallocation.
    let out = unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyList_New(count))? };
    let out = out.downcast_into::<PyList>()?;
    let mut out_lens: Vec<Option<usize>> = Vec::with_capacity(items.len());
    // One measurer for the copies' removed blocks, which stay held (in `removed_held`) until
    // the end, so that no key address it caches is freed and reused during the apply.
    let mut measurer = None;
    let mut removed_held: Vec<Bound<'py, PyAny>> = Vec::new();
    // Kept messages get a reference: their headers were last read long ago (before the
    // decision), so they are requested a few slots ahead.
    let ahead_header = |pos: usize| {
        if let Some(Item::Keep(i)) = items.get(pos + KEEP_AHEAD) {
            // SAFETY: the input list (`render`'s snapshot, owned for the call) is alive, GIL held.
            if let Some(message) = unsafe { list_item(Obj::of(messages), *i) } {
                prefetch(message.as_ptr());
            }
        }
    };
    for (pos, item) in items.iter().enumerate() {
        ahead_header(pos);
        let mut keep_as = None;
        if let (Some((outputs, released)), false) = (reuse.as_mut(), matches!(item, Item::Keep(_)))
        {
            // SAFETY: the input list (`render`'s snapshot, owned for the call) is alive, GIL held.
            match unsafe { outputs.find(py, Obj::of(messages), index, item, released) } {
                Ok((message, len)) => {
                    out_lens.push(len);
                    let at = ffi::Py_ssize_t::try_from(pos).unwrap_or(count);
                    // SAFETY: as below: a fresh slot, the new reference stolen.
                    unsafe { ffi::PyList_SetItem(out.as_ptr(), at, message.as_ptr()) };
                    continue;
                }
                Err(keep) => keep_as = keep,
            }
        }
        let built = build(
            writer,
            index,
            item,
            (lens, 0),
            &mut measurer,
            &mut removed_held,
            &mut out_lens,
        );
        let message = match built {
            Ok(message) => message,
            Err(err) => {
                if let (Some((_, released)), Some((_, sources))) = (reuse.as_mut(), keep_as) {
                    released.extend(sources.into_iter().map(|s| s.addr()));
                }
                return Err(err);
            }
        };
        if let (Some((outputs, released)), Some((key, sources))) = (reuse.as_mut(), keep_as) {
            // SAFETY: `message` is the live new message (its reference goes to `out` below);
            // the sources are owned references; the GIL is held.
            unsafe { outputs.keep(pos, key, sources, item, message, released) };
        }
        let at = ffi::Py_ssize_t::try_from(pos).unwrap_or(count);
        // SAFETY: `out` is a fresh list of `count` slots, `at < count`; the reference is
        // stolen.
        unsafe { ffi::PyList_SetItem(out.as_ptr(), at, message.as_ptr()) };
    }
    Ok((out, out_lens))
}

/// The output message of `item` (a new reference), its length (when known) pushed to
/// `out_lens`. `lens` are the lengths of the input messages from `lens.1` on.
pub(super) fn build<'py>(
    writer: &Writer<'_, 'py>,
    index: &PyIndex,
    item: &Item,
    lens: (&[usize], usize),
    measurer: &mut Option<Measurer>,
    removed_held: &mut Vec<Bound<'py, PyAny>>,
    out_lens: &mut Vec<Option<usize>>,
) -> PyResult<Obj> {
    let py = writer.py;
    let messages = writer.messages;
    let (lens, first) = lens;
    let len_of = |i: usize| i.checked_sub(first).and_then(|at| lens.get(at)).copied();
    {
        let message: Obj = match item {
            Item::Keep(i) => {
                // SAFETY: the input list (`render`'s snapshot, owned for the call) is alive,
                // GIL held; the borrowed item gets its own reference for the output list.
                let Some(message) = (unsafe { list_item(Obj::of(messages), *i) }) else {
                    return Err(PyValueError::new_err(
                        "the message list changed during render",
                    ));
                };
                // SAFETY: `message` is a live item of the input list (just read, GIL held).
                unsafe { ffi::Py_IncRef(message.as_ptr()) };
                out_lens.push(Some(len_of(*i).unwrap_or(0)));
                message
            }
            Item::Stub { src, text } => {
                out_lens.push(None);
                Obj::from_ptr(writer.stub_message(*src, text)?.into_ptr())
            }
            Item::Superseded { src, text } => {
                out_lens.push(None);
                Obj::from_ptr(writer.superseded_message(*src, text)?.into_ptr())
            }
            Item::Assistant {
                src,
                purged,
                strip_thinking,
            } => {
                let (copy, removed, blocks) =
                    writer.assistant_copy(*src, purged, *strip_thinking)?;
                out_lens.push(assistant_copy_len(
                    py,
                    measurer,
                    len_of(*src),
                    !purged.is_empty(),
                    &removed,
                    blocks,
                )?);
                removed_held.extend(removed);
                Obj::from_ptr(copy.into_ptr())
            }
            Item::Synthetic { text, chain_slot } => {
                out_lens.push(None);
                Obj::from_ptr(
                    writer
                        .synthetic_message(index, text, *chain_slot)?
                        .into_ptr(),
                )
            }
        };
        Ok(message)
    }
}

//! `pi_condense._core.render`: render phases 1-4 over a Python message list.
//!
//! Extract -> decide -> apply. Each message dict is read into a light `MsgView`
//! holding only what the enabled phases look at (`Needs`): the role of every message,
//! the ids of tool calls and results, and - only when the state or the config can use
//! them - timestamps, error flags, chain markers and summary refs (recovery tool names
//! and text-extraction failures are read on demand, through `Lazy`). The strings of the
//! views are borrowed from the message objects (nothing is copied), and the reads go
//! through the C API with borrowed references; the members of a dict are found by walking
//! it (`Keys::fields_of`). `pi_condense_core::render` then decides; when it changes nothing the
//! input list itself comes back with sizes 0.
//!
//! Sizes: each input message is measured once (its length is reused for the output)
//! and each new message once; a copied assistant that only lost blocks is the original's
//! length minus theirs. With a `SizeMemo` (`size_memo`), a message the previous render
//! measured and that is still made of the very same objects is neither measured nor read
//! again: its length and view are reused. When the state cannot stub or compress anything,
//! the views are read on their own in a prefetching pipeline and a render that changes
//! nothing never measures. When it can (a change is then likely), every message is measured
//! and read in one pass, right after its objects were walked; if the render then changes
//! nothing after all, the sizes are dropped (still 0), and a value that cannot be measured
//! raises only when the render changes something.
//!
//! Untouched messages are the caller's own objects; stubs, copied assistants and
//! synthetic chain messages are fresh dicts in the reference's key order. Values copied
//! from input messages into new text (a raw `toolCallId` as a ref, a `toolName`, a
//! relocated protected output) keep their exact code units: they are joined in Rust
//! when every piece is valid UTF-8, and by Python otherwise (lone surrogates).
//!
//! While the views borrow from the messages no Python code runs, by construction: values of
//! any type (subclasses included) are read through C calls that never call back into Python
//! (no `__float__`, `__eq__`, `__iter__`, `__name__`), and `ABSENT` is told by the identity
//! of its type. The one exception is a reference mode protection predicate: with one, the
//! views copy their strings instead.

use std::borrow::Cow;
use std::cell::RefCell;
use std::ptr::addr_of_mut;

use pi_condense_core::index::{ChainEntry, JsField};
use pi_condense_core::keys::ProtectedMatcher;
use pi_condense_core::render::size::list_len;
use pi_condense_core::render::view::synthetic_block_id;
use pi_condense_core::render::{
    self as core_render, Block, Blocks, ChainConfig, Content, CowId, Item, JsIdOf, Lazy, MsgView,
    Needs, Piece, Protection, PurgeConfig, RenderConfig, Role, SummaryRef, SummaryRefs, Text, Ts,
};
use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use pyo3::{intern, IntoPyObjectExt};

use crate::cpython::{prefetch, prefetch_body, str_utf8 as borrowed_utf8};
use crate::index::PyIndex;
use crate::json::Measurer;
use crate::jsread::{
    self, is_absent, is_dict, is_list, is_str, js_string, list_item, list_items, present, str_is,
    str_text, type_is, Keys, Obj, K,
};
use crate::pyvalue::{str_of_js, str_of_wtf8};
use crate::size_memo::{self, PySizeMemo};

/// How many output slots ahead a kept message's header is prefetched.
const KEEP_AHEAD: usize = 8;

/// Largest integer a double holds exactly.
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_992.0;

// ----- extract -----

/// How many messages ahead each level of the read pipeline works (see
/// [`Reader::read_all`]): the message object, its hash table, its role, the values the
/// role needs, a content list's item array, its blocks, their tables.
const AHEAD_OBJECT: usize = 16;
const AHEAD_TABLE: usize = 13;
const AHEAD_ROLE: usize = 10;
const AHEAD_FIELDS: usize = 8;
const AHEAD_ITEMS: usize = 6;
const AHEAD_BLOCKS: usize = 4;
const AHEAD_BLOCK_TABLES: usize = 2;

/// Content blocks per message the pipeline requests ahead.
const PREFETCH_BLOCKS: usize = 4;

/// The members of a message the reader may read: role, toolCallId, isError, timestamp,
/// content, customType, details.
const MEMBERS: usize = 7;
const MEMBER_FIELDS: [K; MEMBERS] = [
    K::Role,
    K::ToolCallId,
    K::IsError,
    K::Timestamp,
    K::Content,
    K::CustomType,
    K::Details,
];
const M_ROLE: u32 = 1;
const M_TOOL_CALL_ID: u32 = 1 << 1;
const M_IS_ERROR: u32 = 1 << 2;
const M_TIMESTAMP: u32 = 1 << 3;
const M_CONTENT: u32 = 1 << 4;
const M_CUSTOM_TYPE: u32 = 1 << 5;
const M_DETAILS: u32 = 1 << 6;

/// Reads message views.
struct Reader<'k, 'py> {
    py: Python<'py>,
    keys: &'k Keys<'py>,
    needs: Needs,
    /// Copy strings instead of borrowing them (Python code runs during the decision).
    owned: bool,
    /// Every str object a view read so far borrows its text from, in reading order (a
    /// size memo keeps a view only while it holds each of them: `size_memo::keep_view`).
    borrowed: RefCell<Vec<Obj>>,
}

impl Reader<'_, '_> {
    /// [`js_id`], the str it borrows from (if any) logged in `borrowed`.
    #[inline]
    unsafe fn js_id<'a>(&self, value: Option<Obj>) -> PyResult<CowId<'a>> {
        // SAFETY: the caller upholds this function's `# Safety` contract.
        unsafe {
            let id = jsread::js_id(self.py, value, self.owned)?;
            if let (JsIdOf::Str(Cow::Borrowed(_)), Some(obj)) = (&id, value) {
                self.borrowed.borrow_mut().push(obj);
            }
            Ok(id)
        }
    }

    unsafe fn block_of<'a>(&self, item: Obj) -> PyResult<Block<Cow<'a, str>>> {
        // SAFETY: the caller upholds this function's `# Safety` contract.
        unsafe {
            if item == ffi::Py_None() || is_absent(item) {
                return Ok(Block::Nullish);
            }
            if !is_dict(item) {
                return Ok(Block::Other);
            }
            let [kind, id] = self.keys.fields_of(item, [K::Kind, K::Id]);
            let Some(kind) = present(kind).filter(|k| is_str(*k)) else {
                return Ok(Block::Other);
            };
            let kind = borrowed_utf8(kind).unwrap_or_default();
            Ok(if jsread::text_is(kind, "toolCall") {
                Block::ToolCall {
                    id: self.js_id(present(id))?,
                }
            } else if jsread::text_is(kind, "thinking") {
                Block::Thinking
            } else {
                Block::Other
            })
        }
    }

    unsafe fn content_of<'a>(&self, value: Option<Obj>) -> PyResult<Content<Cow<'a, str>>> {
        // SAFETY: the caller upholds this function's `# Safety` contract.
        unsafe {
            let Some(value) = value else {
                return Ok(Content::Nullish);
            };
            if value == ffi::Py_None() {
                return Ok(Content::Nullish);
            }
            if is_list(value) {
                let mut blocks = Blocks::default();
                for item in list_items(value) {
                    blocks.push(self.block_of(item)?);
                }
                return Ok(Content::Array(blocks));
            }
            if is_str(value) {
                return Ok(Content::Str);
            }
            Ok(Content::Other)
        }
    }

    /// `msg.content?.[0]?.text` matched against the synthetic chain marker.
    unsafe fn synthetic_id_of(&self, content: Option<Obj>) -> PyResult<Option<Box<str>>> {
        // SAFETY: the caller upholds this function's `# Safety` contract.
        unsafe {
            let py = self.py;
            let Some(list) = content.filter(|c| is_list(*c)) else {
                return Ok(None);
            };
            let Some(first) = list_item(list, 0).filter(|f| is_dict(*f)) else {
                return Ok(None);
            };
            let Some(text) = self.keys.get(first, K::Text).filter(|t| is_str(*t)) else {
                return Ok(None);
            };
            // Only the prefix is looked at: no copy unless it is the marker.
            let text = str_text(py, text, false);
            Ok(synthetic_block_id(&text).map(Box::from))
        }
    }

    /// `msg.details?.toolCallRefs ?? []` of a summary message.
    unsafe fn summary_refs_of<'a>(
        &self,
        details: Option<Obj>,
    ) -> PyResult<SummaryRefs<Cow<'a, str>>> {
        // SAFETY: the caller upholds this function's `# Safety` contract.
        unsafe {
            let py = self.py;
            let Some(details) = details.filter(|d| is_dict(*d)) else {
                // Missing, null, or a primitive / array without a `toolCallRefs` property.
                return Ok(SummaryRefs::List(Vec::new()));
            };
            let refs = match self.keys.get(details, K::ToolCallRefs) {
                None => return Ok(SummaryRefs::List(Vec::new())),
                Some(r) if r == ffi::Py_None() => return Ok(SummaryRefs::List(Vec::new())),
                Some(r) => r,
            };
            if !is_list(refs) {
                return Ok(SummaryRefs::NotArray);
            }
            let mut out = Vec::new();
            for item in list_items(refs) {
                if item == ffi::Py_None() || is_absent(item) {
                    out.push(SummaryRef::Nullish);
                    continue;
                }
                if !is_dict(item) {
                    // A primitive's `toolCallId` / `resultTimestamp` are undefined.
                    out.push(SummaryRef::Ref {
                        tool_call_id: JsIdOf::Undefined,
                        result_timestamp: None,
                    });
                    continue;
                }
                let result_timestamp = match self.keys.get(item, K::ResultTimestamp) {
                    None => None,
                    Some(ts) => Some(js_string(Some(&Borrowed::from_ptr(py, ts)))?.into_string()),
                };
                out.push(SummaryRef::Ref {
                    tool_call_id: self.js_id(self.keys.get(item, K::ToolCallId))?,
                    result_timestamp,
                });
            }
            Ok(SummaryRefs::List(out))
        }
    }

    /// Reads message `msg` into `view` (a fresh [`MsgView::new`] of role `Other`).
    unsafe fn read_into<'a>(&self, msg: Obj, view: &mut MsgView<Cow<'a, str>>) -> PyResult<()> {
        // SAFETY: the caller upholds this function's `# Safety` contract.
        unsafe {
            let mut fetched = Fetched::default();
            self.fetch_role(msg, &mut fetched)?;
            self.fetch_fields(msg, &mut fetched)?;
            self.decode(&fetched, view)
        }
    }

    /// Stage 1: the members render may read (one walk of the dict), the `role` value
    /// prefetched.
    #[inline]
    unsafe fn fetch_role(&self, msg: Obj, fetched: &mut Fetched) -> PyResult<()> {
        // SAFETY: the caller upholds this function's `# Safety` contract.
        unsafe {
            fetched.dict = is_dict(msg);
            if fetched.dict {
                // Up to the role (usually the first key); the rest once the role is known.
                self.keys.scan(
                    msg,
                    &mut fetched.pos,
                    &MEMBER_FIELDS,
                    &mut fetched.members,
                    M_ROLE,
                );
                fetched.role = fetched.members[0];
                if let Some(role) = fetched.role {
                    prefetch(role);
                }
            }
            Ok(())
        }
    }

    /// Stage 2: the role, and the values it needs (prefetched).
    #[inline]
    unsafe fn fetch_fields(&self, msg: Obj, fetched: &mut Fetched) -> PyResult<()> {
        // SAFETY: the caller upholds this function's `# Safety` contract.
        unsafe {
            if !fetched.dict {
                return Ok(());
            }
            let needs = &self.needs;
            fetched.kind = jsread::role(fetched.role);
            let wanted = match fetched.kind {
                Role::ToolResult => {
                    M_TOOL_CALL_ID
                        | if needs.is_error { M_IS_ERROR } else { 0 }
                        | if needs.result_timestamps || needs.chain {
                            M_TIMESTAMP
                        } else {
                            0
                        }
                }
                Role::Assistant => M_CONTENT | if needs.chain { M_TIMESTAMP } else { 0 },
                Role::User if needs.chain => M_CONTENT | M_TIMESTAMP,
                Role::Custom if needs.chain => M_CUSTOM_TYPE | M_DETAILS,
                _ => 0,
            };
            if wanted != 0 {
                self.keys.scan(
                    msg,
                    &mut fetched.pos,
                    &MEMBER_FIELDS,
                    &mut fetched.members,
                    wanted,
                );
            }
            let [_, tool_call_id, is_error, timestamp, content, custom_type, details] =
                fetched.members;
            let fetch = |value: Option<Obj>| -> Option<Obj> {
                if let Some(value) = value {
                    prefetch(value);
                }
                value
            };
            match fetched.kind {
                Role::ToolResult => {
                    fetched.a = fetch(tool_call_id);
                    if needs.is_error {
                        fetched.b = fetch(is_error);
                    }
                    if needs.result_timestamps || needs.chain {
                        fetched.ts = fetch(timestamp);
                    }
                }
                Role::Assistant => {
                    fetched.a = fetch(content);
                    if needs.chain {
                        fetched.ts = fetch(timestamp);
                    }
                }
                Role::User => {
                    if needs.chain {
                        fetched.a = fetch(content);
                        fetched.ts = fetch(timestamp);
                    }
                }
                Role::Custom => {
                    if needs.chain {
                        fetched.a = fetch(custom_type);
                        fetched.b = fetch(details);
                    }
                }
                Role::Other => {}
            }
            Ok(())
        }
    }

    /// Stage 3 (assistants): the item array of the content list.
    #[inline]
    unsafe fn fetch_items(&self, fetched: &Fetched) {
        // SAFETY: the caller upholds this function's `# Safety` contract.
        unsafe {
            if fetched.kind == Role::Assistant {
                if let Some(content) = fetched.a {
                    prefetch_body(content);
                }
            }
        }
    }

    /// Stage 4 (assistants): the first content blocks (`body`: their hash tables too).
    #[inline]
    unsafe fn fetch_blocks(&self, fetched: &Fetched, body: bool) {
        // SAFETY: the caller upholds this function's `# Safety` contract.
        unsafe {
            if fetched.kind != Role::Assistant {
                return;
            }
            let Some(content) = fetched
                .a
                .filter(|c| type_is(*c, addr_of_mut!(ffi::PyList_Type)))
            else {
                return;
            };
            for block in list_items(content).take(PREFETCH_BLOCKS) {
                if body {
                    prefetch_body(block);
                } else {
                    prefetch(block);
                }
            }
        }
    }

    /// Last stage: the view.
    unsafe fn decode<'a>(
        &self,
        fetched: &Fetched,
        view: &mut MsgView<Cow<'a, str>>,
    ) -> PyResult<()> {
        // SAFETY: the caller upholds this function's `# Safety` contract.
        unsafe {
            let py = self.py;
            let needs = &self.needs;
            if !fetched.dict {
                return Ok(());
            }
            view.role = fetched.kind;
            let a = present(fetched.a);
            let b = present(fetched.b);
            let ts = present(fetched.ts);
            match fetched.kind {
                Role::ToolResult => {
                    view.tool_call_id = self.js_id(a)?;
                    if needs.is_error {
                        view.is_error = b == Some(ffi::Py_True());
                    }
                    if needs.result_timestamps || needs.chain {
                        view.timestamp = jsread::timestamp(py, ts)?;
                    }
                }
                Role::Assistant => {
                    view.content = self.content_of(a)?;
                    if needs.chain {
                        view.timestamp = jsread::timestamp(py, ts)?;
                    }
                }
                Role::User => {
                    if needs.chain {
                        view.timestamp = jsread::timestamp(py, ts)?;
                        view.synthetic_block_id = self.synthetic_id_of(a)?;
                    }
                }
                Role::Custom => {
                    if needs.chain && str_is(a, "context-prune-summary") {
                        view.summary = Some(Box::new(self.summary_refs_of(b)?));
                    }
                }
                Role::Other => {}
            }
            Ok(())
        }
    }

    /// Reads the views of `items`, in a software pipeline: while message i is decoded,
    /// the memory of the next ones is requested, a few messages ahead per level of
    /// indirection (object, hash table, values, content list, blocks), so that the loads
    /// overlap instead of stalling one after another.
    unsafe fn read_all<'a>(&self, items: &[Obj]) -> PyResult<Vec<MsgView<Cow<'a, str>>>> {
        // SAFETY: the caller upholds this function's `# Safety` contract.
        unsafe {
            let n = items.len();
            let mut fetched = vec![Fetched::default(); n];
            let mut views = Vec::with_capacity(n);
            for i in 0..n {
                if let Some(&msg) = items.get(i + AHEAD_OBJECT) {
                    prefetch(msg);
                }
                if let Some(&msg) = items.get(i + AHEAD_TABLE) {
                    prefetch_body(msg);
                }
                if let (Some(&msg), Some(f)) =
                    (items.get(i + AHEAD_ROLE), fetched.get_mut(i + AHEAD_ROLE))
                {
                    self.fetch_role(msg, f)?;
                }
                if i == 0 {
                    // The first messages missed the stages above.
                    for j in 0..AHEAD_ROLE.min(n) {
                        if let (Some(&msg), Some(f)) = (items.get(j), fetched.get_mut(j)) {
                            self.fetch_role(msg, f)?;
                        }
                    }
                    for j in 0..AHEAD_FIELDS.min(n) {
                        if let (Some(&msg), Some(f)) = (items.get(j), fetched.get_mut(j)) {
                            self.fetch_fields(msg, f)?;
                        }
                    }
                }
                if let (Some(&msg), Some(f)) = (
                    items.get(i + AHEAD_FIELDS),
                    fetched.get_mut(i + AHEAD_FIELDS),
                ) {
                    self.fetch_fields(msg, f)?;
                }
                if let Some(f) = fetched.get(i + AHEAD_ITEMS) {
                    self.fetch_items(f);
                }
                if let Some(f) = fetched.get(i + AHEAD_BLOCKS) {
                    self.fetch_blocks(f, false);
                }
                if let Some(f) = fetched.get(i + AHEAD_BLOCK_TABLES) {
                    self.fetch_blocks(f, true);
                }
                views.push(MsgView::new(Role::Other, Ts::Absent));
                if let (Some(view), Some(f)) = (views.last_mut(), fetched.get(i)) {
                    self.decode(f, view)?;
                }
            }
            Ok(views)
        }
    }
}

/// What the pipeline read of one message (borrowed values, `ABSENT` not filtered yet).
#[derive(Clone, Copy)]
struct Fetched {
    dict: bool,
    role: Option<Obj>,
    /// role, toolCallId, isError, timestamp, content, customType, details (raw, as far
    /// as the dict was walked: up to `pos`).
    members: [Option<Obj>; MEMBERS],
    pos: ffi::Py_ssize_t,
    kind: Role,
    /// toolCallId / content / customType
    a: Option<Obj>,
    /// isError / details
    b: Option<Obj>,
    ts: Option<Obj>,
}

impl Default for Fetched {
    fn default() -> Self {
        Fetched {
            dict: false,
            role: None,
            members: [None; MEMBERS],
            pos: 0,
            kind: Role::Other,
            a: None,
            b: None,
            ts: None,
        }
    }
}

// ----- sizes -----

/// Lazily measured argument bodies (phase 2).
struct ArgLens<'a, 'py> {
    messages: &'a Bound<'py, PyList>,
    keys: &'a Keys<'py>,
    error: RefCell<Option<PyErr>>,
    /// Made on first use and kept through the decision, unless Python code (a protection
    /// predicate) runs during it: that could free a key whose length it caches.
    measurer: Option<Measurer>,
    keep_measurer: bool,
}

impl ArgLens<'_, '_> {
    /// `messages[msg][key]` (borrowed; held by the message).
    fn field(&self, msg: usize, key: K) -> PyResult<Option<Obj>> {
        // SAFETY: the list is alive (the caller holds it) and the GIL is held.
        unsafe {
            match list_item(self.messages.as_ptr(), msg) {
                Some(m) => Ok(self.keys.get_of(m, key)),
                None => Ok(None),
            }
        }
    }

    /// The value, or `None` with the error kept for the caller.
    fn ok_or_report<T>(&self, value: PyResult<Option<T>>) -> Option<T> {
        match value {
            Ok(v) => v,
            Err(err) => {
                self.error.borrow_mut().get_or_insert(err);
                None
            }
        }
    }

    /// `JSON.stringify(block.arguments).length`; `None` without `arguments`.
    fn measure(&mut self, msg: usize, block: usize) -> PyResult<Option<usize>> {
        let py = self.messages.py();
        // SAFETY: the list and everything read from it are alive (the caller holds the
        // list) and the GIL is held; the measurement runs no Python code.
        unsafe {
            let message = list_item(self.messages.as_ptr(), msg);
            let content = match message {
                Some(m) => self.keys.get_of(m, K::Content),
                None => None,
            };
            let item = content
                .filter(|c| is_list(*c))
                .and_then(|c| list_item(c, block));
            let args = match item {
                Some(b) => self.keys.get_of(b, K::Arguments),
                None => None,
            };
            match args {
                Some(args) => {
                    if !self.keep_measurer {
                        self.measurer = None;
                    }
                    Ok(Some(
                        self.measurer
                            .get_or_insert_with(|| Measurer::new(py))
                            .len(py, args)?,
                    ))
                }
                None => Ok(None),
            }
        }
    }
}

impl Lazy for ArgLens<'_, '_> {
    fn args_len(&mut self, msg: usize, block: usize) -> Option<usize> {
        match self.measure(msg, block) {
            Ok(len) => len,
            Err(err) => {
                self.error.borrow_mut().get_or_insert(err);
                Some(0)
            }
        }
    }

    fn is_recovery(&mut self, msg: usize) -> Option<bool> {
        let field = self.field(msg, K::ToolName);
        Some(self.ok_or_report(field).is_some_and(|name| {
            // SAFETY: `name` is held by its message (alive) and the GIL is held.
            unsafe { str_is(Some(name), "context_tree_query") }
        }))
    }

    /// A toolResult's text extraction throws on a `null` element of an array content.
    fn text_throws(&mut self, msg: usize) -> Option<bool> {
        let field = self.field(msg, K::Content);
        Some(self.ok_or_report(field).is_some_and(|content| {
            // SAFETY: `content` is held by its message (alive) and the GIL is held.
            unsafe {
                is_list(content)
                    && list_items(content).any(|item| item == ffi::Py_None() || is_absent(item))
            }
        }))
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
        JsField::Str(s) => Some(str_of_js(py, s)?.into_any().unbind()),
        JsField::Null | JsField::Array(_) | JsField::Object => Some(py.None()),
    })
}

/// Builds the output: new messages from the plan's pieces.
struct Writer<'a, 'py> {
    py: Python<'py>,
    keys: &'a Keys<'py>,
    messages: &'a Bound<'py, PyList>,
}

/// One piece of a new text: Rust text, or a Python string to take as is.
enum Part<'py> {
    Text(Cow<'py, str>),
    Py(Bound<'py, PyAny>),
}

impl<'py> Writer<'_, 'py> {
    /// Borrowed input message `i`.
    fn message(&self, i: usize) -> Option<Obj> {
        // SAFETY: the list is alive and the GIL is held.
        unsafe { list_item(self.messages.as_ptr(), i) }
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
                .map(|v| Borrowed::from_ptr(self.py, v).to_owned()))
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
            Some(v) => {
                let text = js_string(Some(&v))?;
                match text.exact() {
                    None => Part::Text(Cow::Owned(text.into_string())),
                    Some(bytes) => Part::Py(str_of_wtf8(self.py, bytes)?.into_any()),
                }
            }
        })
    }

    /// The text of a toolResult's `type: "text"` blocks joined with `"\n"`.
    fn tool_result_text(&self, i: usize, parts: &mut Vec<Part<'py>>) -> PyResult<()> {
        let py = self.py;
        let Some(content) = self.field(i, K::Content)? else {
            return Ok(());
        };
        if !content.is_instance_of::<PyList>() {
            return Ok(());
        }
        let mut first = true;
        for item in content.try_iter()? {
            let item = item?;
            if !item.is_instance_of::<PyDict>() {
                continue;
            }
            // SAFETY: `item` is a live dict (held by `content`) and the GIL is held.
            let (kind, text) = unsafe {
                let kind = self.keys.get(item.as_ptr(), K::Kind);
                if !str_is(kind, "text") {
                    continue;
                }
                let text = self.keys.get(item.as_ptr(), K::Text);
                (kind, text.map(|t| Borrowed::from_ptr(py, t).to_owned()))
            };
            let _ = kind;
            if !first {
                parts.push(Part::Text(Cow::Borrowed("\n")));
            }
            first = false;
            match text {
                None => {}
                Some(t) if t.is_none() => {}
                Some(t) => parts.push(self.js_string_part(Some(t))?),
            }
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
        PyString::new(py, "").call_method1(intern!(py, "join"), (list,))
    }

    fn key(&self, key: K) -> Borrowed<'_, 'py, PyAny> {
        // SAFETY: the interned keys live as long as the interpreter.
        unsafe { Borrowed::from_ptr(self.py, self.keys.interned(key)) }
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
        let content = original
            .get_item(self.key(K::Content))?
            .ok_or_else(|| pyo3::exceptions::PyKeyError::new_err("content"))?;
        let blocks = content.downcast::<PyList>()?;
        let new_content = PyList::empty(py);
        let mut removed = Vec::new();
        for (b, block) in blocks.iter().enumerate() {
            if let Some(purge) = purged.iter().find(|p| p.block == b) {
                let copy = block.downcast::<PyDict>()?.copy()?;
                let marker = PyDict::new(py);
                marker.set_item(intern!(py, "_purged"), purge.marker())?;
                copy.set_item(self.key(K::Arguments), marker)?;
                new_content.append(copy)?;
                continue;
            }
            if strip_thinking && block.is_instance_of::<PyDict>() {
                // SAFETY: `block` is a live dict and the GIL is held.
                let thinking =
                    unsafe { str_is(self.keys.get(block.as_ptr(), K::Kind), "thinking") };
                if thinking {
                    removed.push(block);
                    continue;
                }
            }
            new_content.append(block)?;
        }
        let copy = original.copy()?;
        copy.set_item(self.key(K::Content), new_content)?;
        Ok((copy, removed, blocks.len()))
    }

    /// `{role: "user", content: [{type: "text", text}], timestamp: entry.compressedAt}`.
    fn synthetic_message(
        &self,
        index: &PyIndex,
        text: &Text,
        timestamp: &JsField,
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
                        .get(dict.as_ptr(), K::CompressedAt)
                        .map(|v| Borrowed::from_ptr(py, v).to_owned())
                }),
                Err(_) => None,
            },
            None => None,
        };
        match original {
            Some(Some(value)) => out.set_item(self.key(K::Timestamp), value)?,
            Some(None) => {}
            None => {
                if let Some(value) = field_to_py(py, timestamp)? {
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
    unsafe { borrowed_utf8(value.as_ptr()) }
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
    sizes = None,
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
    sizes: Option<PyRef<'py, PySizeMemo>>,
) -> PyResult<RenderOutput<'py>> {
    let py = messages.py();
    // A render from inside a render (a protection predicate) does without the memo.
    let mut memo_guard = sizes.as_ref().and_then(|s| s.try_lock());
    // A predicate is Python code: it could free a key and reuse its address.
    let keys = Keys::new(py, protected_tool_predicate.is_none());
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
    let state = index.core();
    let reader = Reader {
        py,
        keys: &keys,
        needs: Needs::of(state, &cfg),
        // A predicate is Python code: it could change the messages under borrowed views.
        owned: protected_tool_predicate.is_some(),
        borrowed: RefCell::new(Vec::new()),
    };

    // Extract and decide. The views borrow strings from the message objects: the list
    // (held by the caller for the whole call) keeps them alive, and no Python code runs
    // until the views are dropped (except a predicate, and then the views own copies).
    // When the state can stub or compress, a change is likely and every message will be
    // measured: each is then read right after it is measured, while its objects are in
    // the CPU caches. Otherwise (or when measuring fails: the error is raised only if
    // the render changes something) the views are read on their own, and a render that
    // changes nothing never measures.
    let speculate = reader.needs.result_timestamps || reader.needs.chain;
    let mut lens: Option<Vec<usize>> = None;
    let plan = {
        let list = messages.as_ptr();
        let mut views: Vec<MsgView<Cow<'_, str>>> = Vec::new();
        // SAFETY: `list` is a live list and the GIL is held; see above for the lifetime
        // of the borrowed strings. Reading views runs no Python code.
        unsafe {
            if speculate {
                let mut read_error = false;
                let measured = size_memo::measure_and_read(
                    py,
                    list,
                    memo_guard.as_deref_mut().map(|g| &mut g.0),
                    Some(reader.needs),
                    &reader.borrowed,
                    |_, msg| {
                        let mut view = MsgView::new(Role::Other, Ts::Absent);
                        let read = reader.read_into(msg, &mut view);
                        read_error = read.is_err();
                        read.map(|()| view)
                    },
                );
                match measured {
                    Ok((measured, read)) => {
                        lens = Some(measured);
                        views = read;
                    }
                    Err(err) if read_error => return Err(err),
                    Err(_) => {}
                }
            }
            if lens.is_none() {
                let items: Vec<Obj> = list_items(list).collect();
                views = reader.read_all(&items)?;
            }
        }
        let mut lazy = ArgLens {
            messages,
            keys: &keys,
            error: RefCell::new(None),
            measurer: None,
            keep_measurer: !reader.owned,
        };
        let plan = core_render::render(&views, state, &cfg, &mut lazy);
        if let Some(err) = lazy.error.into_inner() {
            return Err(err);
        }
        plan
    };
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

    // Apply, measuring each input message once and each new message.
    let writer = Writer {
        py,
        keys: &keys,
        messages,
    };
    let lens = match lens {
        Some(lens) => lens,
        // SAFETY: the messages are alive (the list holds them) and the GIL is held;
        // nothing runs during the measurement.
        None => unsafe {
            let (lens, _) = size_memo::measure_and_read(
                py,
                messages.as_ptr(),
                memo_guard.as_deref_mut().map(|g| &mut g.0),
                None,
                &RefCell::new(Vec::new()),
                |_, _| Ok(MsgView::new(Role::Other, Ts::Absent)),
            )?;
            lens
        },
    };
    let before = list_len(lens.iter().copied());
    let count = ffi::Py_ssize_t::try_from(items.len())
        .map_err(|_| PyValueError::new_err("too many messages"))?;
    // SAFETY: the GIL is held; `PyList_New(count)` makes a list of `count` empty slots,
    // each filled once below with a new reference (which `PyList_SetItem` steals). A slot
    // left empty by an error is fine for the list's deallocation.
    let out = unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyList_New(count))? };
    // Per slot: the length when known (a kept message), else measured below.
    let mut out_lens: Vec<Option<usize>> = Vec::with_capacity(items.len());
    // Kept messages get a reference: their headers were last read long ago (before the
    // decision), so they are requested a few slots ahead.
    let ahead_header = |pos: usize| {
        if let Some(Item::Keep(i)) = items.get(pos + KEEP_AHEAD) {
            // SAFETY: the input list is alive and the GIL is held.
            if let Some(message) = unsafe { list_item(messages.as_ptr(), *i) } {
                prefetch(message);
            }
        }
    };
    for (pos, item) in items.iter().enumerate() {
        ahead_header(pos);
        let message: Obj = match item {
            Item::Keep(i) => {
                // SAFETY: the input list is alive and the GIL is held; the borrowed item
                // gets its own reference for the output list.
                let Some(message) = (unsafe { list_item(messages.as_ptr(), *i) }) else {
                    return Err(PyValueError::new_err(
                        "the message list changed during render",
                    ));
                };
                // SAFETY: `message` is a live item of the input list (just read, GIL held).
                unsafe { ffi::Py_IncRef(message) };
                out_lens.push(Some(lens.get(*i).copied().unwrap_or(0)));
                message
            }
            Item::Stub { src, text } => {
                out_lens.push(None);
                writer.stub_message(*src, text)?.into_ptr()
            }
            Item::Assistant {
                src,
                purged,
                strip_thinking,
            } => {
                let (copy, removed, blocks) =
                    writer.assistant_copy(*src, purged, *strip_thinking)?;
                // Only blocks left out: the copy is the original minus those blocks and
                // their commas (all other members are the very same objects).
                let known = match lens.get(*src) {
                    Some(&len) if purged.is_empty() => {
                        let mut measurer = Measurer::new(py);
                        let mut gone = 0usize;
                        for block in &removed {
                            // SAFETY: the block is alive (held by `removed`) and the GIL
                            // is held.
                            gone += unsafe { measurer.len(py, block.as_ptr())? };
                        }
                        let k = removed.len();
                        let commas = if k == blocks { k.saturating_sub(1) } else { k };
                        len.checked_sub(gone + commas)
                    }
                    _ => None,
                };
                out_lens.push(known);
                copy.into_ptr()
            }
            Item::Synthetic {
                text,
                timestamp,
                chain_slot,
            } => {
                out_lens.push(None);
                writer
                    .synthetic_message(&index, text, timestamp, *chain_slot)?
                    .into_ptr()
            }
        };
        let at = ffi::Py_ssize_t::try_from(pos).unwrap_or(count);
        // SAFETY: `out` is a fresh list of `count` slots, `at < count`; the reference is
        // stolen.
        unsafe { ffi::PyList_SetItem(out.as_ptr(), at, message) };
    }
    // The new messages, measured together: every key seen is held by a message in `out`
    // (or interned), so the measurer's key cache stays valid.
    let mut measurer = Measurer::new(py);
    let mut after_lens = Vec::with_capacity(out_lens.len());
    for (pos, known) in out_lens.iter().enumerate() {
        after_lens.push(match *known {
            Some(len) => len,
            // SAFETY: `out` is alive and holds the message; the GIL is held.
            None => unsafe {
                match list_item(out.as_ptr(), pos) {
                    Some(message) => measurer.len(py, message)?,
                    None => 0,
                }
            },
        });
    }
    let after = list_len(after_lens);
    Ok((out, true, before, after, diagnostics, false))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(render, m)?)?;
    Ok(())
}

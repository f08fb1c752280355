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
use std::cell::{Cell, RefCell};
use std::ptr::addr_of_mut;

use pi_condense_core::index::{ChainEntry, JsField};
use pi_condense_core::jsnum::format_number;
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

use crate::absent;
use pyo3::types::{PyBool, PyDict, PyList, PyString, PyTuple};
use pyo3::{intern, IntoPyObjectExt};

use crate::cpython::{
    list_items as list_slice, prefetch, prefetch_body, str_utf8 as borrowed_utf8,
};
use crate::index::PyIndex;
use crate::json::Measurer;
use crate::pyvalue::{js_number, number_value, str_of_js, str_of_wtf8};
use crate::size_memo::{self, PySizeMemo};

/// How many output slots ahead a kept message's header is prefetched.
const KEEP_AHEAD: usize = 8;

/// Deepest nesting `String(array)` follows.
const MAX_JS_STRING_DEPTH: usize = 64;

/// Largest integer a double holds exactly.
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_992.0;

/// A borrowed reference to a Python object (owned by the container it was read from).
type Obj = *mut ffi::PyObject;

// ----- reading Python values with JS eyes (C API, borrowed references) -----

/// # Safety (all `unsafe fn` below)
/// Object arguments must be live objects and the GIL held; returned borrowed references
/// are valid while the container they were read from holds them.
#[inline]
unsafe fn type_is(obj: Obj, ty: *mut ffi::PyTypeObject) -> bool {
    // SAFETY: the caller upholds this function's `# Safety` contract.
    unsafe { ffi::Py_TYPE(obj) == ty }
}

#[inline]
unsafe fn is_str(obj: Obj) -> bool {
    // SAFETY: the caller upholds this function's `# Safety` contract.
    unsafe { type_is(obj, addr_of_mut!(ffi::PyUnicode_Type)) || ffi::PyUnicode_Check(obj) != 0 }
}

#[inline]
unsafe fn is_dict(obj: Obj) -> bool {
    // SAFETY: the caller upholds this function's `# Safety` contract.
    unsafe { type_is(obj, addr_of_mut!(ffi::PyDict_Type)) || ffi::PyDict_Check(obj) != 0 }
}

#[inline]
unsafe fn is_list(obj: Obj) -> bool {
    // SAFETY: the caller upholds this function's `# Safety` contract.
    unsafe { type_is(obj, addr_of_mut!(ffi::PyList_Type)) || ffi::PyList_Check(obj) != 0 }
}

/// Whether `obj` is `ABSENT`: told by the identity of its type, without calling anything
/// (a type's `__name__` could run Python code). JSON values (the usual case) are ruled out
/// by their exact type first.
#[inline(always)]
unsafe fn is_absent(py: Python<'_>, obj: Obj) -> bool {
    // SAFETY: the caller upholds this function's `# Safety` contract.
    unsafe {
        let ty = ffi::Py_TYPE(obj);
        let plain = ty == addr_of_mut!(ffi::PyUnicode_Type)
            || ty == addr_of_mut!(ffi::PyDict_Type)
            || ty == addr_of_mut!(ffi::PyLong_Type)
            || ty == addr_of_mut!(ffi::PyList_Type)
            || ty == addr_of_mut!(ffi::PyBool_Type)
            || ty == addr_of_mut!(ffi::PyFloat_Type)
            || obj == ffi::Py_None()
            || ty == addr_of_mut!(ffi::PyTuple_Type);
        !plain && absent::is_absent_type(py, ty)
    }
}

/// `dict[key]` (any `dict`), with `ABSENT` read as a missing key.
unsafe fn get(py: Python<'_>, dict: Obj, key: Obj) -> PyResult<Option<Obj>> {
    // SAFETY: the caller upholds this function's `# Safety` contract.
    unsafe {
        let value = ffi::PyDict_GetItemWithError(dict, key);
        if value.is_null() {
            return match PyErr::take(py) {
                Some(err) => Err(err),
                None => Ok(None),
            };
        }
        Ok((!is_absent(py, value)).then_some(value))
    }
}

/// `list[i]` (borrowed; `None` past the end).
unsafe fn list_item(list: Obj, i: usize) -> Option<Obj> {
    // SAFETY: the caller upholds this function's `# Safety` contract.
    unsafe {
        let index = ffi::Py_ssize_t::try_from(i).ok()?;
        if index >= ffi::PyList_Size(list) {
            return None;
        }
        let item = ffi::PyList_GetItem(list, index);
        if item.is_null() {
            ffi::PyErr_Clear();
            return None;
        }
        Some(item)
    }
}

/// The items of a list (borrowed).
///
/// # Safety
/// `list` must be a live list, the GIL held, and the list not changed while iterating.
unsafe fn list_items(list: Obj) -> impl Iterator<Item = Obj> {
    // SAFETY: the caller upholds this function's `# Safety` contract.
    unsafe {
        // SAFETY (of the in-place read): the caller holds the GIL and runs no Python code
        // while iterating.
        let slice = list_slice(list);
        let len = match slice {
            Some(items) => items.len() as ffi::Py_ssize_t,
            None => ffi::PyList_Size(list).max(0),
        };
        (0..len).map_while(move |i| {
            if let Some(items) = slice {
                return items.get(i as usize).copied();
            }
            let item = ffi::PyList_GetItem(list, i);
            if item.is_null() {
                ffi::PyErr_Clear();
                None
            } else {
                Some(item)
            }
        })
    }
}

/// Whether `text` is `literal` (short literals: compared without a `memcmp` call).
#[inline(always)]
fn text_is(text: &str, literal: &'static str) -> bool {
    let (a, b) = (text.as_bytes(), literal.as_bytes());
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// The UTF-8 text of a str, borrowed when possible; a str holding lone surrogates
/// reads lossily (U+FFFD), as `to_string_lossy` does.
unsafe fn str_text<'a>(py: Python<'_>, obj: Obj, owned: bool) -> Cow<'a, str> {
    // SAFETY: the caller upholds this function's `# Safety` contract.
    unsafe {
        match borrowed_utf8(obj) {
            Some(text) if owned => Cow::Owned(text.to_owned()),
            Some(text) => Cow::Borrowed(text),
            None => Cow::Owned(
                Borrowed::from_ptr(py, obj)
                    .downcast_unchecked::<PyString>()
                    .to_string_lossy()
                    .into_owned(),
            ),
        }
    }
}

/// `value === expected` for a str value (no match for a str holding lone surrogates).
#[inline]
unsafe fn str_is(value: Option<Obj>, expected: &'static str) -> bool {
    // SAFETY: the caller upholds this function's `# Safety` contract.
    unsafe {
        value.is_some_and(|v| is_str(v) && borrowed_utf8(v).is_some_and(|t| text_is(t, expected)))
    }
}

/// `typeof v === "number"` as a double (bools are not numbers; ints beyond a
/// double's range read as +-Infinity, as `JSON.parse` reads them). Subclasses are read
/// by value, without running Python code ([`number_value`]).
#[inline]
unsafe fn number_of(py: Python<'_>, obj: Obj) -> PyResult<Option<f64>> {
    // SAFETY: the caller upholds this function's `# Safety` contract.
    unsafe {
        if type_is(obj, addr_of_mut!(ffi::PyLong_Type)) {
            let mut overflow: std::os::raw::c_int = 0;
            let value = ffi::PyLong_AsLongLongAndOverflow(obj, &mut overflow);
            if overflow == 0 {
                if value == -1 && !ffi::PyErr_Occurred().is_null() {
                    return Err(PyErr::fetch(py));
                }
                // Correctly rounded, as `float(i)`.
                return Ok(Some(value as f64));
            }
        } else if type_is(obj, addr_of_mut!(ffi::PyFloat_Type)) {
            return Ok(Some(ffi::PyFloat_AsDouble(obj)));
        }
        number_value(py, obj)
    }
}

unsafe fn timestamp_of(py: Python<'_>, value: Option<Obj>) -> PyResult<Ts> {
    // SAFETY: the caller upholds this function's `# Safety` contract.
    unsafe {
        Ok(match value {
            None => Ts::Absent,
            Some(v) => number_of(py, v)?.map_or(Ts::Other, Ts::Num),
        })
    }
}

/// A JS value used as an id (Map/Set key semantics).
unsafe fn js_id<'a>(py: Python<'_>, value: Option<Obj>, owned: bool) -> PyResult<CowId<'a>> {
    // SAFETY: the caller upholds this function's `# Safety` contract.
    unsafe {
        let Some(value) = value else {
            return Ok(JsIdOf::Undefined);
        };
        if is_str(value) {
            // Ids are compared in key form (a lone surrogate, read as U+FFFD, is told apart).
            let text = str_text(py, value, owned);
            if !text.contains(['\u{FFFD}', '\u{FDD0}']) {
                return Ok(JsIdOf::Str(text));
            }
            let obj = Borrowed::from_ptr(py, value);
            let key = crate::keys::key_of(obj.downcast_unchecked::<PyString>())?;
            return Ok(JsIdOf::Str(Cow::Owned(key)));
        }
        if value == ffi::Py_None() {
            return Ok(JsIdOf::Null);
        }
        if value == ffi::Py_True() || value == ffi::Py_False() {
            return Ok(JsIdOf::Bool(value == ffi::Py_True()));
        }
        if let Some(x) = number_of(py, value)? {
            return Ok(JsIdOf::num(x));
        }
        // Objects compare by identity.
        Ok(JsIdOf::Object(value as usize))
    }
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
    if let Some(x) = js_number(value)? {
        return Ok(format_number(x));
    }
    if value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>() {
        if depth >= MAX_JS_STRING_DEPTH {
            return Ok(String::new());
        }
        // Items by index, through the C API: a subclass's `__iter__` is not called.
        let items: Vec<Bound<'_, PyAny>> = match value.downcast::<PyList>() {
            Ok(list) => (0..list.len())
                .filter_map(|i| list.get_item(i).ok())
                .collect(),
            Err(_) => match value.downcast::<PyTuple>() {
                Ok(tuple) => tuple.iter_borrowed().map(|b| b.to_owned()).collect(),
                Err(_) => Vec::new(),
            },
        };
        let mut parts = Vec::new();
        for item in items {
            // SAFETY: `item` is a live object and the GIL is held.
            let absent = unsafe { is_absent(item.py(), item.as_ptr()) };
            parts.push(if item.is_none() || absent {
                String::new()
            } else {
                js_string_of(&item, depth + 1)?
            });
        }
        return Ok(parts.join(","));
    }
    Ok("[object Object]".to_owned())
}

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

/// The dict keys render reads.
#[derive(Clone, Copy)]
enum K {
    Role,
    Timestamp,
    ToolCallId,
    ToolName,
    IsError,
    Content,
    Kind,
    Id,
    Arguments,
    Text,
    CustomType,
    Details,
    ToolCallRefs,
    ResultTimestamp,
}

const KEY_NAMES: [&str; 14] = [
    "role",
    "timestamp",
    "toolCallId",
    "toolName",
    "isError",
    "content",
    "type",
    "id",
    "arguments",
    "text",
    "customType",
    "details",
    "toolCallRefs",
    "resultTimestamp",
];

/// The text of a dict key, when it is a str (or str subclass) that is valid UTF-8.
///
/// # Safety
/// `key` must be a live object and the GIL held; the text lives as long as `key`.
#[inline(always)]
unsafe fn key_text<'a>(key: Obj) -> Option<&'a str> {
    // SAFETY: the caller upholds this function's `# Safety` contract.
    unsafe {
        if is_str(key) {
            borrowed_utf8(key)
        } else {
            None
        }
    }
}

/// The field a key's text names (`NO_FIELD`: none render reads).
#[inline]
fn field_of(text: &str) -> u8 {
    KEY_NAMES
        .iter()
        .position(|name| text_is(text, name))
        .map_or(NO_FIELD, |i| i as u8)
}

const NO_FIELD: u8 = u8::MAX;

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

/// Slots of the key-field cache (a power of two).
const FIELD_CACHE_SLOTS: usize = 256;

/// Key object address -> the field it names, direct-mapped.
type FieldCache = [Cell<(usize, u8)>; FIELD_CACHE_SLOTS];

/// The key strings render reads and writes, and what the key objects seen name.
struct Keys<'py> {
    py: Python<'py>,
    /// The interned strings (alive for the interpreter's life).
    interned: [Obj; 14],
    /// Key object address -> the field its text names (`NO_FIELD`: none), for the keys of
    /// the caller's messages: alive for the whole render (the list holds them), so an
    /// address names one key object. Not used when Python code may run during the render
    /// (a protection predicate could free a key and reuse its address).
    cache: Option<Box<FieldCache>>,
}

impl<'py> Keys<'py> {
    fn new(py: Python<'py>, cache: bool) -> Self {
        let interned = [
            intern!(py, "role").as_ptr(),
            intern!(py, "timestamp").as_ptr(),
            intern!(py, "toolCallId").as_ptr(),
            intern!(py, "toolName").as_ptr(),
            intern!(py, "isError").as_ptr(),
            intern!(py, "content").as_ptr(),
            intern!(py, "type").as_ptr(),
            intern!(py, "id").as_ptr(),
            intern!(py, "arguments").as_ptr(),
            intern!(py, "text").as_ptr(),
            intern!(py, "customType").as_ptr(),
            intern!(py, "details").as_ptr(),
            intern!(py, "toolCallRefs").as_ptr(),
            intern!(py, "resultTimestamp").as_ptr(),
        ];
        Keys {
            py,
            interned,
            cache: cache
                .then(|| Box::new([(); FIELD_CACHE_SLOTS].map(|()| Cell::new((0, NO_FIELD))))),
        }
    }

    /// The field `key` names (`NO_FIELD`: none, or not a str).
    ///
    /// # Safety
    /// `key` must be a live object and the GIL held.
    #[inline(always)]
    unsafe fn field_of_key(&self, key: Obj) -> u8 {
        let address = key as usize;
        let slot = self
            .cache
            .as_ref()
            .and_then(|c| c.get((address >> 4 ^ address >> 12) & (FIELD_CACHE_SLOTS - 1)));
        if let Some(slot) = slot {
            let (cached, field) = slot.get();
            if cached == address {
                return field;
            }
        }
        // SAFETY: `key` is live (the caller's contract); its text lives as long as it.
        let field = unsafe { key_text(key) }.map_or(NO_FIELD, field_of);
        if let Some(slot) = slot {
            slot.set((address, field));
        }
        field
    }

    /// The members of `dict` named by `fields`: for each, the value of the first key (in
    /// the dict's order) whose text is the field's name.
    ///
    /// Fields are found by walking the members (`PyDict_Next`), never by a hash lookup: a
    /// lookup compares the keys of equal hash with `==`, which runs Python code for a key
    /// of another type (its `__eq__`), and the render holds borrowed views while it reads.
    /// A key that is not a str is skipped (it is no JSON member name); a str subclass key
    /// is read by its text, as `json.dumps` writes it.
    ///
    /// # Safety
    /// `dict` must be a live dict (or dict subclass) and the GIL held; the values are
    /// borrowed from the dict.
    #[inline]
    unsafe fn fields_of<const N: usize>(&self, dict: Obj, fields: [K; N]) -> [Option<Obj>; N] {
        let mut found = [None; N];
        let mut left = N;
        let (mut pos, mut key, mut value) = (0, std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: `dict` is a live dict and the GIL held (the caller's contract); the keys
        // it hands out are alive while it is.
        while left > 0 && unsafe { ffi::PyDict_Next(dict, &mut pos, &mut key, &mut value) } != 0 {
            // SAFETY: as above.
            let named = unsafe { self.field_of_key(key) };
            if named == NO_FIELD {
                continue;
            }
            for (slot, field) in found.iter_mut().zip(fields) {
                if field as u8 == named && slot.is_none() {
                    *slot = Some(value);
                    left -= 1;
                    break;
                }
            }
        }
        found
    }

    /// Walks `dict` on from `*pos`, putting the value of the first key naming `fields[j]`
    /// into `found[j]` (when still empty), until every slot of `wanted` (a bit mask of
    /// `j`s) is filled or the dict ends; `*pos` is where to go on from ([`Keys::fields_of`]
    /// semantics, in steps).
    ///
    /// # Safety
    /// As [`Keys::fields_of`], and `*pos` must be 0 or where a previous walk of the same,
    /// unchanged dict stopped.
    #[inline]
    unsafe fn scan(
        &self,
        dict: Obj,
        pos: &mut ffi::Py_ssize_t,
        fields: &[K; MEMBERS],
        found: &mut [Option<Obj>; MEMBERS],
        wanted: u32,
    ) {
        let filled = |found: &[Option<Obj>; MEMBERS]| {
            (0..MEMBERS).all(|j| wanted & 1 << j == 0 || found[j].is_some())
        };
        let (mut key, mut value) = (std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: `dict` is a live dict and the GIL held (the caller's contract); the keys
        // it hands out are alive while it is.
        while !filled(found) && unsafe { ffi::PyDict_Next(dict, pos, &mut key, &mut value) } != 0 {
            // SAFETY: as above.
            let named = unsafe { self.field_of_key(key) };
            if named == NO_FIELD {
                continue;
            }
            if let Some(j) = fields.iter().position(|&f| f as u8 == named) {
                found[j].get_or_insert(value);
            }
        }
    }

    /// The interned key string (for building dicts).
    fn interned(&self, key: K) -> Obj {
        self.interned[key as usize]
    }

    /// `dict[key]` (any `dict`), with `ABSENT` read as a missing key ([`fields_of`]).
    ///
    /// # Safety
    /// `dict` must be a live dict and the GIL held.
    #[inline]
    unsafe fn get(&self, dict: Obj, key: K) -> PyResult<Option<Obj>> {
        // SAFETY: the caller upholds this function's `# Safety` contract.
        unsafe {
            let [found] = self.fields_of(dict, [key]);
            Ok(present(self.py, found))
        }
    }

    /// `dict[key]` of an object that may not be a dict.
    ///
    /// # Safety
    /// `obj` must be a live object and the GIL held.
    unsafe fn get_of(&self, obj: Obj, key: K) -> PyResult<Option<Obj>> {
        // SAFETY: the caller upholds this function's `# Safety` contract.
        unsafe {
            if is_dict(obj) {
                self.get(obj, key)
            } else {
                Ok(None)
            }
        }
    }
}

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
            let id = js_id(self.py, value, self.owned)?;
            if let (JsIdOf::Str(Cow::Borrowed(_)), Some(obj)) = (&id, value) {
                self.borrowed.borrow_mut().push(obj);
            }
            Ok(id)
        }
    }

    unsafe fn role_of(&self, value: Option<Obj>) -> Role {
        // SAFETY: the caller upholds this function's `# Safety` contract.
        unsafe {
            let Some(value) = value.filter(|v| is_str(*v)) else {
                return Role::Other;
            };
            let Some(text) = borrowed_utf8(value) else {
                return Role::Other;
            };
            if text_is(text, "toolResult") {
                Role::ToolResult
            } else if text_is(text, "assistant") {
                Role::Assistant
            } else if text_is(text, "user") {
                Role::User
            } else if text_is(text, "custom") {
                Role::Custom
            } else {
                Role::Other
            }
        }
    }

    unsafe fn block_of<'a>(&self, item: Obj) -> PyResult<Block<Cow<'a, str>>> {
        // SAFETY: the caller upholds this function's `# Safety` contract.
        unsafe {
            let py = self.py;
            if item == ffi::Py_None() || is_absent(py, item) {
                return Ok(Block::Nullish);
            }
            if !is_dict(item) {
                return Ok(Block::Other);
            }
            let [kind, id] = self.keys.fields_of(item, [K::Kind, K::Id]);
            let Some(kind) = present(py, kind).filter(|k| is_str(*k)) else {
                return Ok(Block::Other);
            };
            let kind = borrowed_utf8(kind).unwrap_or_default();
            Ok(if text_is(kind, "toolCall") {
                Block::ToolCall {
                    id: self.js_id(present(py, id))?,
                }
            } else if text_is(kind, "thinking") {
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
            let Some(text) = self.keys.get(first, K::Text)?.filter(|t| is_str(*t)) else {
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
            let refs = match self.keys.get(details, K::ToolCallRefs)? {
                None => return Ok(SummaryRefs::List(Vec::new())),
                Some(r) if r == ffi::Py_None() => return Ok(SummaryRefs::List(Vec::new())),
                Some(r) => r,
            };
            if !is_list(refs) {
                return Ok(SummaryRefs::NotArray);
            }
            let mut out = Vec::new();
            for item in list_items(refs) {
                if item == ffi::Py_None() || is_absent(py, item) {
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
                let result_timestamp = match self.keys.get(item, K::ResultTimestamp)? {
                    None => None,
                    Some(ts) => Some(js_string_of(&Borrowed::from_ptr(py, ts), 0)?),
                };
                out.push(SummaryRef::Ref {
                    tool_call_id: self.js_id(self.keys.get(item, K::ToolCallId)?)?,
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
            let py = self.py;
            let needs = &self.needs;
            fetched.kind = self.role_of(present(py, fetched.role));
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
            let a = present(py, fetched.a);
            let b = present(py, fetched.b);
            let ts = present(py, fetched.ts);
            match fetched.kind {
                Role::ToolResult => {
                    view.tool_call_id = self.js_id(a)?;
                    if needs.is_error {
                        view.is_error = b == Some(ffi::Py_True());
                    }
                    if needs.result_timestamps || needs.chain {
                        view.timestamp = timestamp_of(py, ts)?;
                    }
                }
                Role::Assistant => {
                    view.content = self.content_of(a)?;
                    if needs.chain {
                        view.timestamp = timestamp_of(py, ts)?;
                    }
                }
                Role::User => {
                    if needs.chain {
                        view.timestamp = timestamp_of(py, ts)?;
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

/// A raw dict value with `ABSENT` read as missing.
///
/// # Safety
/// `value` must be a live object (or `None`) and the GIL held.
#[inline]
unsafe fn present(py: Python<'_>, value: Option<Obj>) -> Option<Obj> {
    // SAFETY: the caller upholds this function's `# Safety` contract.
    unsafe { value.filter(|v| !is_absent(py, *v)) }
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
                Some(m) => self.keys.get_of(m, key),
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
                Some(m) => self.keys.get_of(m, K::Content)?,
                None => None,
            };
            let item = content
                .filter(|c| is_list(*c))
                .and_then(|c| list_item(c, block));
            let args = match item {
                Some(b) => self.keys.get_of(b, K::Arguments)?,
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
        let py = self.messages.py();
        Some(self.ok_or_report(field).is_some_and(|content| {
            // SAFETY: `content` is held by its message (alive) and the GIL is held.
            unsafe {
                is_list(content)
                    && list_items(content).any(|item| item == ffi::Py_None() || is_absent(py, item))
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
                .get_of(msg, key)?
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
            Some(v) => Part::Text(Cow::Owned(js_string_of(&v, 0)?)),
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
                let kind = self.keys.get(item.as_ptr(), K::Kind)?;
                if !str_is(kind, "text") {
                    continue;
                }
                let text = self.keys.get(item.as_ptr(), K::Text)?;
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
                    unsafe { str_is(self.keys.get(block.as_ptr(), K::Kind)?, "thinking") };
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
                    get(py, dict.as_ptr(), intern!(py, "compressedAt").as_ptr())?
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
    absent::init(py);
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

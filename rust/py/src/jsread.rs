//! Reading Python values as JavaScript would: the one reader toolkit of the bindings
//! (render, chains and index use it).
//!
//! - [`Keys`]: the member names the bindings read and write, interned once, and the walk that
//!   finds members by their text (never by a hash lookup, which could call a key's `__eq__`);
//! - [`is_absent`]: JS `undefined` inside a dict, the sentinel `_core.ABSENT` (created here,
//!   re-exported by `pi_condense.session`), told by pointer identity;
//! - [`js_id`], [`js_number`], [`timestamp`], [`role`], [`truthy`]: the values decisions
//!   read;
//! - [`str_text`] / [`text`]: the UTF-8 text of a `str` (lone surrogates read as one U+FFFD
//!   each, as Node's UTF-8 encoder does);
//! - [`js_string`]: `String(value)`, with a depth limit and a cycle guard.
//!
//! Nothing here runs Python code: values of any type (subclasses included) are read by C calls
//! that never call back (no `__float__`, `__eq__`, `__iter__`, `__name__`), so the borrowed
//! references the raw readers return stay valid while the caller runs no Python code either.
//! The raw readers take and return borrowed objects ([`Obj`]): see each `# Safety`.

#![deny(clippy::multiple_unsafe_ops_per_block)]
#![warn(clippy::undocumented_unsafe_blocks)]

use std::borrow::Cow;
use std::cell::Cell;
use std::ptr::addr_of_mut;
use std::sync::atomic::{AtomicPtr, Ordering};

use pi_condense_core::js::num::format_number;
use pi_condense_core::jsstr::{JsBuf, JsStr};
use pi_condense_core::render::{CowId, JsIdOf, Role, Ts};
use pi_condense_core::view::ArgsMember;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::PyString;

use crate::cpython::{DictMembers, list_items as list_slice, str_utf8 as borrowed_utf8};

/// A borrowed reference to a Python object (owned by the container it was read from).
pub use crate::cpython::Obj;

/// Deepest nesting `String(array)` follows (deeper arrays print as `""`).
pub const MAX_JS_STRING_DEPTH: usize = 64;

// ----- ABSENT -----

/// The type of `_core.ABSENT` (JS `undefined` inside a dict: the key is omitted, never
/// written as `null`). One instance exists; Python cannot make another.
#[pyclass(frozen, module = "pi_condense._core", name = "AbsentType")]
pub(crate) struct AbsentType;

#[pymethods]
impl AbsentType {
    fn __repr__(&self) -> &'static str {
        "ABSENT"
    }

    fn __bool__(&self) -> bool {
        false
    }

    /// Pickles (and copies) as the module attribute `pi_condense._core.ABSENT`.
    fn __reduce__(&self) -> &'static str {
        "ABSENT"
    }
}

/// The sentinel object (alive for the interpreter's life: the cell holds a reference).
static ABSENT: GILOnceCell<Py<AbsentType>> = GILOnceCell::new();
/// Its address, for the identity test on hot paths (null before the module is imported).
static ABSENT_PTR: AtomicPtr<ffi::PyObject> = AtomicPtr::new(std::ptr::null_mut());

/// Creates `ABSENT` and adds it to the module (at import).
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let absent = ABSENT.get_or_try_init(py, || Py::new(py, AbsentType))?;
    ABSENT_PTR.store(absent.as_ptr(), Ordering::Relaxed);
    m.add("ABSENT", absent.clone_ref(py))?;
    Ok(())
}

/// Whether `obj` is `ABSENT` (pointer identity: nothing is read or called).
#[inline(always)]
pub fn is_absent(obj: Obj) -> bool {
    obj.is(ABSENT_PTR.load(Ordering::Relaxed))
}

/// A raw dict value with `ABSENT` read as missing.
#[inline(always)]
pub fn present(value: Option<Obj>) -> Option<Obj> {
    value.filter(|v| !is_absent(*v))
}

// ----- types -----
//
// # Safety (every `unsafe fn` below)
// Object arguments must be live objects and the GIL held; returned borrowed references are
// valid while the container they were read from holds them, and returned text while the
// object it was read from is alive. Callers meet this by the borrow rule (lib.rs): every
// object is reached from a root the native call owns, and no Python code runs meanwhile.

#[inline(always)]
pub(crate) unsafe fn type_is(obj: Obj, ty: *mut ffi::PyTypeObject) -> bool {
    // SAFETY: `obj` is kept alive by the call's owned root (`# Safety` above), the GIL held.
    unsafe { ffi::Py_TYPE(obj.as_ptr()) == ty }
}

/// A `str` or str subclass.
#[inline]
pub(crate) unsafe fn is_str(obj: Obj) -> bool {
    let ty = addr_of_mut!(ffi::PyUnicode_Type);
    // SAFETY: `obj` is kept alive by the call's owned root (`# Safety` above), the GIL held.
    if unsafe { type_is(obj, ty) } {
        return true;
    }
    // SAFETY: as above; the check reads the type's flags in C.
    unsafe { ffi::PyUnicode_Check(obj.as_ptr()) != 0 }
}

/// A `dict` or dict subclass.
#[inline]
pub(crate) unsafe fn is_dict(obj: Obj) -> bool {
    let ty = addr_of_mut!(ffi::PyDict_Type);
    // SAFETY: `obj` is kept alive by the call's owned root (`# Safety` above), the GIL held.
    if unsafe { type_is(obj, ty) } {
        return true;
    }
    // SAFETY: as above; the check reads the type's flags in C.
    unsafe { ffi::PyDict_Check(obj.as_ptr()) != 0 }
}

/// A `list` or list subclass.
#[inline]
pub(crate) unsafe fn is_list(obj: Obj) -> bool {
    let ty = addr_of_mut!(ffi::PyList_Type);
    // SAFETY: `obj` is kept alive by the call's owned root (`# Safety` above), the GIL held.
    if unsafe { type_is(obj, ty) } {
        return true;
    }
    // SAFETY: as above; the check reads the type's flags in C.
    unsafe { ffi::PyList_Check(obj.as_ptr()) != 0 }
}

/// A `tuple` or tuple subclass.
#[inline]
unsafe fn is_tuple(obj: Obj) -> bool {
    // SAFETY: `obj` is kept alive by the call's owned root (`# Safety` above), the GIL held.
    unsafe { ffi::PyTuple_Check(obj.as_ptr()) != 0 }
}

// ----- lists -----

/// `list[i]` (borrowed; `None` past the end).
pub(crate) unsafe fn list_item(list: Obj, i: usize) -> Option<Obj> {
    let index = ffi::Py_ssize_t::try_from(i).ok()?;
    // SAFETY: `list` is a list kept alive by the call's owned root (`# Safety` above).
    if index >= unsafe { ffi::PyList_Size(list.as_ptr()) } {
        return None;
    }
    // SAFETY: as above, and `index` is in range (checked just now, nothing ran since): the
    // item comes back borrowed from `list`, which holds it while it is unchanged.
    let item = unsafe { ffi::PyList_GetItem(list.as_ptr(), index) };
    (!item.is_null()).then_some(Obj::from_ptr(item))
}

/// The items of a list (borrowed), by index: a subclass's `__iter__` is not called.
///
/// # Safety
/// `list` must be a live list, the GIL held, and the list not changed while iterating.
pub(crate) unsafe fn list_items(list: Obj) -> impl Iterator<Item = Obj> {
    // SAFETY: `# Safety` above.
    unsafe { list_items_from(list, 0) }
}

/// The items of a list from position `from` on (borrowed), by index.
///
/// # Safety
/// As [`list_items`].
pub(crate) unsafe fn list_items_from(list: Obj, from: usize) -> impl Iterator<Item = Obj> {
    // SAFETY: `list` is a live list (`# Safety` above: the caller's owned root keeps it, and
    // no Python code runs while iterating, so the in-place item array stays valid).
    let slice = unsafe { list_slice(list) };
    let len = match slice {
        Some(items) => items.len() as ffi::Py_ssize_t,
        // SAFETY: as above.
        None => unsafe { ffi::PyList_Size(list.as_ptr()) }.max(0),
    };
    let from = ffi::Py_ssize_t::try_from(from).unwrap_or(len).min(len);
    (from..len).map_while(move |i| {
        if let Some(items) = slice {
            return items.get(i as usize).copied();
        }
        // Bounds checked first: an index past the end would raise (and this clear) an
        // `IndexError`.
        // SAFETY: `list` is still alive and unchanged while iterating (as above).
        if i >= unsafe { ffi::PyList_Size(list.as_ptr()) } {
            return None;
        }
        // SAFETY: as above, `i` in range: the item is borrowed from `list`.
        let item = unsafe { ffi::PyList_GetItem(list.as_ptr(), i) };
        (!item.is_null()).then_some(Obj::from_ptr(item))
    })
}

// ----- strings -----

/// Whether `text` is `literal` (short literals: compared without a `memcmp` call).
#[inline(always)]
pub(crate) fn text_is(text: &str, literal: &str) -> bool {
    let (a, b) = (text.as_bytes(), literal.as_bytes());
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// The exact text of a `str` holding lone surrogates.
fn surrogate_text(s: &Bound<'_, PyString>) -> PyResult<JsStr> {
    Ok(JsStr::from_wtf8(&crate::cpython::wtf8_of(s)))
}

/// The UTF-8 text of a str, borrowed when CPython holds it; a str holding lone surrogates
/// reads lossily, one U+FFFD per surrogate (Node's UTF-8 encoder).
///
/// `owned` copies the text (the caller cannot keep the object alive for `'a`).
pub(crate) unsafe fn str_text<'a>(py: Python<'_>, obj: Obj, owned: bool) -> Cow<'a, str> {
    // SAFETY: `obj` is a str kept alive for `'a` by the call's owned root (`# Safety` above),
    // which keeps its text too; the GIL is held.
    match unsafe { borrowed_utf8(obj) } {
        Some(text) if owned => Cow::Owned(text.to_owned()),
        Some(text) => Cow::Borrowed(text),
        None => {
            // SAFETY: as above: `obj` stays alive while borrowed here.
            let obj = unsafe { Borrowed::from_ptr(py, obj.as_ptr()) };
            // SAFETY: `obj` is a str (or str subclass): the caller checked.
            let s = unsafe { obj.downcast_unchecked::<PyString>() };
            Cow::Owned(
                surrogate_text(s)
                    .map(JsStr::into_string)
                    .unwrap_or_default(),
            )
        }
    }
}

/// [`str_text`] of an owned str, copied.
pub fn text(s: &Bound<'_, PyString>) -> String {
    // SAFETY: `s` is a live str and the GIL is held; the text is copied before `s` is let go.
    unsafe { str_text(s.py(), Obj::of(s), true) }.into_owned()
}

/// `value === expected` for a str value (no match for a str holding lone surrogates).
#[inline]
pub(crate) unsafe fn str_is(value: Option<Obj>, expected: &str) -> bool {
    value.is_some_and(|v| {
        // SAFETY: `v` is kept alive by the call's owned root (`# Safety` above), the GIL held.
        if !unsafe { is_str(v) } {
            return false;
        }
        // SAFETY: as above; `v` is a str, whose text lives as long as it.
        unsafe { borrowed_utf8(v) }.is_some_and(|t| text_is(t, expected))
    })
}

/// [`str_is`] of an owned value.
pub fn str_is_bound(value: Option<&Bound<'_, PyAny>>, expected: &str) -> bool {
    // SAFETY: the value is alive (borrowed for the call) and the GIL is held.
    unsafe { str_is(value.map(Obj::of), expected) }
}

// ----- numbers -----

/// `typeof v === "number"` as a double: floats as they are, ints rounded to the nearest
/// double (ints beyond a double's range read as +-Infinity, as `JSON.parse` reads them);
/// bools and every other type: `None`. Subclasses of `int` and `float` are read by value, as
/// `json.dumps` writes them, through C calls that never run Python code (no `__float__`,
/// `__index__` or `__lt__`).
#[inline]
pub(crate) unsafe fn number(py: Python<'_>, obj: Obj) -> PyResult<Option<f64>> {
    // `obj` is kept alive by the call's owned root (`# Safety` above) and the GIL is held; for
    // an object of (a subclass of) the checked type every call below reads its value in C.
    // SAFETY: as said above.
    let ty = unsafe { ffi::Py_TYPE(obj.as_ptr()) };
    if ty == addr_of_mut!(ffi::PyLong_Type) {
        let mut overflow: std::os::raw::c_int = 0;
        // SAFETY: an exact int, alive (as said above).
        let value = unsafe { ffi::PyLong_AsLongLongAndOverflow(obj.as_ptr(), &mut overflow) };
        if overflow == 0 {
            // SAFETY: the GIL is held.
            if value == -1 && !unsafe { ffi::PyErr_Occurred() }.is_null() {
                return Err(PyErr::fetch(py));
            }
            // Correctly rounded, as `float(i)`.
            return Ok(Some(value as f64));
        }
    } else if ty == addr_of_mut!(ffi::PyFloat_Type) {
        // SAFETY: an exact float, alive (as said above).
        return Ok(Some(unsafe { ffi::PyFloat_AsDouble(obj.as_ptr()) }));
    }
    // SAFETY: as said above.
    unsafe { number_slow(py, obj) }
}

#[cold]
unsafe fn number_slow(py: Python<'_>, obj: Obj) -> PyResult<Option<f64>> {
    // `obj` is kept alive by the call's owned root (`# Safety` of [`number`]) and the GIL is
    // held; a float or int subclass is read through the base type's C data (no method of
    // the subclass runs).
    // SAFETY: as said above.
    if unsafe { ffi::PyBool_Check(obj.as_ptr()) } != 0 {
        return Ok(None);
    }
    // SAFETY: as said above.
    if unsafe { ffi::PyFloat_Check(obj.as_ptr()) } != 0 {
        // SAFETY: a float (subclass), alive (as said above).
        let x = unsafe { ffi::PyFloat_AsDouble(obj.as_ptr()) };
        // SAFETY: the GIL is held.
        if x == -1.0 && !unsafe { ffi::PyErr_Occurred() }.is_null() {
            return Err(PyErr::fetch(py));
        }
        return Ok(Some(x));
    }
    // SAFETY: as said above.
    if unsafe { ffi::PyLong_Check(obj.as_ptr()) } == 0 {
        return Ok(None);
    }
    // SAFETY: an int (subclass), alive (as said above).
    match unsafe { int_value(py, obj) }? {
        Ok(x) => Ok(Some(x)),
        // SAFETY: as above.
        Err(overflow) => Ok(Some(unsafe { big_int_to_double(py, obj, overflow) }?)),
    }
}

/// An int (or int subclass) within `long long`, correctly rounded to a double (as
/// `float(i)`), or `Err` with the sign of one beyond it (`overflow`).
///
/// # Safety
/// `obj` must be a live `int` (or int subclass) object and the GIL held.
#[inline(always)]
unsafe fn int_value(py: Python<'_>, obj: Obj) -> PyResult<Result<f64, std::os::raw::c_int>> {
    let mut overflow: std::os::raw::c_int = 0;
    // SAFETY: `obj` is an int kept alive by its owner (`# Safety` above); its value is read
    // in C through the base type's data.
    let value = unsafe { ffi::PyLong_AsLongLongAndOverflow(obj.as_ptr(), &mut overflow) };
    if overflow != 0 {
        return Ok(Err(overflow));
    }
    // SAFETY: the GIL is held.
    if value == -1 && !unsafe { ffi::PyErr_Occurred() }.is_null() {
        return Err(PyErr::fetch(py));
    }
    Ok(Ok(value as f64))
}

/// An int beyond `long long` (`overflow`: its sign) rounded to the nearest double, or
/// +-Infinity beyond the double range, as JS reads such a literal. The range is told from
/// the int's digits before `PyLong_AsDouble` is called, so no `OverflowError` is ever
/// built and cleared (an exception is a GC-tracked object: building one may start the
/// cyclic collector, and with it finalizers, while the caller borrows).
///
/// # Safety
/// `obj` must be a live `int` (or int subclass) object and the GIL held.
#[cold]
pub(crate) unsafe fn big_int_to_double(
    py: Python<'_>,
    obj: Obj,
    overflow: std::os::raw::c_int,
) -> PyResult<f64> {
    // `obj` is an int kept alive by the call's owned root (`# Safety` above); the int's own C
    // slots read its digits whatever its type (a subclass's `__abs__` or `__rshift__` is never
    // looked up) and return new exact ints (not GC-tracked), owned here.
    // SAFETY: the GIL is held.
    let abs = unsafe { int_slot(ffi::Py_nb_absolute) };
    // SAFETY: the GIL is held.
    let rshift = unsafe { int_slot(ffi::Py_nb_rshift) };
    let (Some(abs), Some(rshift)) = (abs, rshift) else {
        return Err(PyErr::fetch(py));
    };
    // SAFETY: `int`'s `nb_absolute` slot is a `unaryfunc`.
    let abs: ffi::unaryfunc = unsafe { std::mem::transmute(abs) };
    // SAFETY: `int`'s `nb_rshift` slot is a `binaryfunc`.
    let rshift: ffi::binaryfunc = unsafe { std::mem::transmute(rshift) };
    // SAFETY: `obj` is an int, alive (as said above); the slot returns a new reference.
    let magnitude = unsafe { abs(obj.as_ptr()) };
    // SAFETY: `magnitude` is that new reference (or NULL with the error set), owned from here.
    let magnitude = unsafe { Bound::from_owned_ptr_or_err(py, magnitude) }?;
    // |x| rounds to a double beyond DBL_MAX = (2^53 - 1) * 2^971 exactly when
    // |x| >= DBL_MAX + 2^970 (half an ulp; the tie goes to the even 2^1024), that is when
    // |x| >> 970 >= 2^54 - 1.
    // SAFETY: the GIL is held.
    let shift = unsafe { ffi::PyLong_FromLong(970) };
    // SAFETY: `shift` is a new reference (or NULL with the error set), owned from here.
    let shift = unsafe { Bound::from_owned_ptr_or_err(py, shift) }?;
    // SAFETY: both operands are exact ints owned by this frame; the slot returns a new
    // reference.
    let top = unsafe { rshift(magnitude.as_ptr(), shift.as_ptr()) };
    // SAFETY: `top` is that new reference (or NULL with the error set), owned from here.
    let top = unsafe { Bound::from_owned_ptr_or_err(py, top) }?;
    let mut top_overflow: std::os::raw::c_int = 0;
    // SAFETY: `top` is an exact int owned by this frame.
    let top = unsafe { ffi::PyLong_AsLongLongAndOverflow(top.as_ptr(), &mut top_overflow) };
    if top_overflow != 0 || top >= (1i64 << 54) - 1 {
        return Ok(f64::INFINITY * f64::from(overflow.signum()));
    }
    // SAFETY: `obj` is an int, alive (as said above); within the double range the
    // conversion cannot fail.
    let x = unsafe { ffi::PyLong_AsDouble(obj.as_ptr()) };
    // SAFETY: the GIL is held.
    if x == -1.0 && unsafe { !ffi::PyErr_Occurred().is_null() } {
        return Err(PyErr::fetch(py));
    }
    Ok(x)
}

/// `int`'s own implementation of a number slot (a C function of the static type).
///
/// # Safety
/// The GIL must be held.
unsafe fn int_slot(slot: std::os::raw::c_int) -> Option<*mut std::ffi::c_void> {
    let int = addr_of_mut!(ffi::PyLong_Type);
    // SAFETY: `PyLong_Type` is a static type (alive for the process), which `PyType_GetSlot`
    // reads since 3.10; the GIL is held.
    let f = unsafe { ffi::PyType_GetSlot(int, slot) };
    (!f.is_null()).then_some(f)
}

/// [`number`] of an owned value.
pub fn js_number(value: &Bound<'_, PyAny>) -> PyResult<Option<f64>> {
    // SAFETY: `value` is a live object and the GIL is held.
    unsafe { number(value.py(), Obj::of(value)) }
}

/// A message timestamp: absent, a number, or something else.
pub(crate) unsafe fn timestamp(py: Python<'_>, value: Option<Obj>) -> PyResult<Ts> {
    Ok(match present(value) {
        None => Ts::Absent,
        // SAFETY: `v` is kept alive by the call's owned root (`# Safety` above), the GIL held.
        Some(v) => unsafe { number(py, v) }?.map_or(Ts::Other, Ts::Num),
    })
}

/// [`timestamp`] of an owned value.
pub fn timestamp_bound(value: Option<&Bound<'_, PyAny>>) -> PyResult<Ts> {
    match value {
        None => Ok(Ts::Absent),
        // SAFETY: the value is alive (borrowed for the call) and the GIL is held.
        Some(v) => unsafe { timestamp(v.py(), Some(Obj::of(v))) },
    }
}

// ----- ids, roles, truthiness -----

/// A JS value used as an id (Map/Set key semantics). A string id is its text, in key form
/// when it holds lone surrogates or U+FDD0 (`crate::pystr::key_of`); `owned` copies it.
pub(crate) unsafe fn js_id<'a>(
    py: Python<'_>,
    value: Option<Obj>,
    owned: bool,
) -> PyResult<CowId<'a>> {
    let Some(value) = present(value) else {
        return Ok(JsIdOf::Undefined);
    };
    // `value` is kept alive for `'a` by the call's owned root (`# Safety` above), and with it
    // its text; the GIL is held.
    // SAFETY: as said above.
    if unsafe { is_str(value) } {
        // SAFETY: as said above; `value` is a str.
        let text = unsafe { str_text(py, value, owned) };
        // Both characters are encoded with a leading 0xEF: a byte search rules most out.
        if !text.as_bytes().contains(&0xEF) || !text.contains(['\u{FFFD}', '\u{FDD0}']) {
            return Ok(JsIdOf::Str(text));
        }
        // SAFETY: as said above.
        let obj = unsafe { Borrowed::from_ptr(py, value.as_ptr()) };
        // SAFETY: `value` is a str (or str subclass), checked above.
        let key = crate::pystr::key_of(unsafe { obj.downcast_unchecked::<PyString>() })?;
        return Ok(JsIdOf::Str(Cow::Owned(key)));
    }
    // SAFETY: `Py_None` returns the address of the immortal None singleton.
    if value.is(unsafe { ffi::Py_None() }) {
        return Ok(JsIdOf::Null);
    }
    // SAFETY: the address of the immortal True singleton.
    let true_ = unsafe { ffi::Py_True() };
    // SAFETY: the address of the immortal False singleton.
    if value.is(true_) || value.is(unsafe { ffi::Py_False() }) {
        return Ok(JsIdOf::Bool(value.is(true_)));
    }
    // SAFETY: as said above.
    if let Some(x) = unsafe { number(py, value) }? {
        return Ok(JsIdOf::num(x));
    }
    // Objects compare by identity.
    Ok(JsIdOf::Object(value.addr()))
}

/// [`js_id`] of an owned value, holding its string.
pub fn js_id_bound(value: Option<&Bound<'_, PyAny>>) -> PyResult<pi_condense_core::render::JsId> {
    let Some(value) = value else {
        return Ok(JsIdOf::Undefined);
    };
    // SAFETY: `value` is alive (borrowed for the call) and the GIL is held; the id owns its
    // string.
    let id = unsafe { js_id(value.py(), Some(Obj::of(value)), true)? };
    Ok(id.to_owned_id())
}

/// The role a message's `role` value names (`Other` for anything else).
pub(crate) unsafe fn role(value: Option<Obj>) -> Role {
    // SAFETY: `v` is kept alive by the call's owned root (`# Safety` above), the GIL held.
    let Some(value) = present(value).filter(|v| unsafe { is_str(*v) }) else {
        return Role::Other;
    };
    // SAFETY: as above; `value` is a str, whose text lives as long as it.
    let Some(text) = (unsafe { borrowed_utf8(value) }) else {
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

/// JS truthiness (`undefined`, `null`, `false`, `""`, `0`, `NaN` are falsy; objects and
/// arrays are truthy, even empty).
pub fn truthy(value: Option<&Bound<'_, PyAny>>) -> PyResult<bool> {
    let Some(value) = value.filter(|v| !is_absent(Obj::of(v))) else {
        return Ok(false);
    };
    let obj = Obj::of(value);
    // `obj` is kept alive by `value` (borrowed for the call) and the GIL is held.
    // SAFETY: the addresses of the immortal None and False singletons.
    if obj.is(unsafe { ffi::Py_None() }) || obj.is(unsafe { ffi::Py_False() }) {
        return Ok(false);
    }
    // SAFETY: the address of the immortal True singleton.
    if obj.is(unsafe { ffi::Py_True() }) {
        return Ok(true);
    }
    // SAFETY: as said above.
    if unsafe { is_str(obj) } {
        // SAFETY: as said above; `obj` is a str.
        return Ok(unsafe { ffi::PyUnicode_GetLength(obj.as_ptr()) } > 0);
    }
    // SAFETY: as said above.
    if let Some(x) = unsafe { number(value.py(), obj) }? {
        return Ok(x != 0.0 && !x.is_nan());
    }
    Ok(true)
}

// ----- String() -----

/// `String(value)` (a template literal, `+` concatenation): `undefined` for a missing value
/// (or `ABSENT`), `null`, `true` / `false`, the string itself (exact code units), numbers as
/// JS prints them, arrays as their elements joined with `,` (nullish elements as `""`),
/// anything else `[object Object]`. Arrays (lists and tuples, subclasses too) are read by
/// index, never through `__iter__`; an array nested deeper than [`MAX_JS_STRING_DEPTH`], or
/// one that contains itself (JS `join`'s cycle check), prints as `""`.
pub fn js_string(value: Option<&Bound<'_, PyAny>>) -> PyResult<JsStr> {
    let Some(value) = value else {
        return Ok(JsStr::from("undefined"));
    };
    let mut out = JsBuf::new();
    let mut path = Vec::new();
    // SAFETY: `value` is alive (borrowed for the call) and the GIL is held.
    unsafe { push_js_string(value.py(), Obj::of(value), &mut path, &mut out)? };
    Ok(out.finish())
}

/// `isChainAnchorCustom`'s test of a custom message's `customType` (pi-condense 2.10.0):
/// `String(customType ?? "")` does not start with `context-prune-`.
pub(crate) unsafe fn anchor_custom_type(py: Python<'_>, value: Option<Obj>) -> PyResult<bool> {
    // SAFETY: the address of the immortal None singleton.
    let none = unsafe { ffi::Py_None() };
    let Some(value) = value.filter(|&v| !is_absent(v) && !v.is(none)) else {
        return Ok(true);
    };
    // `value` is kept alive by the call's owned root (`# Safety` above), the GIL held.
    // SAFETY: as said above.
    if unsafe { is_str(value) } {
        // SAFETY: as said above; `value` is a str, its text read while it is alive.
        return Ok(!unsafe { str_text(py, value, false) }.starts_with("context-prune-"));
    }
    let mut out = JsBuf::new();
    // SAFETY: as said above.
    unsafe { push_js_string(py, value, &mut Vec::new(), &mut out) }?;
    Ok(!out.finish().into_string().starts_with("context-prune-"))
}

/// Appends `String(obj)` to `out`; `path` holds the arrays being joined.
unsafe fn push_js_string(
    py: Python<'_>,
    obj: Obj,
    path: &mut Vec<Obj>,
    out: &mut JsBuf,
) -> PyResult<()> {
    // `obj` is kept alive by its owner (the call's owned root, `# Safety` above, or the new
    // reference the array loop below holds on an item) and the GIL is held; nothing here
    // runs Python code.
    // SAFETY: the address of the immortal None singleton.
    let none = unsafe { ffi::Py_None() };
    // SAFETY: the address of the immortal True singleton.
    let true_ = unsafe { ffi::Py_True() };
    // SAFETY: the address of the immortal False singleton.
    let false_ = unsafe { ffi::Py_False() };
    let constant = if is_absent(obj) {
        Some("undefined")
    } else if obj.is(none) {
        Some("null")
    } else if obj.is(true_) {
        Some("true")
    } else if obj.is(false_) {
        Some("false")
    } else {
        None
    };
    if let Some(constant) = constant {
        out.push_str(constant);
        return Ok(());
    }
    // SAFETY: `obj` is alive (as said above).
    if unsafe { is_str(obj) } {
        // SAFETY: as said above; a str, its text read while it is alive.
        if let Some(text) = unsafe { borrowed_utf8(obj) } {
            out.push_str(text);
            return Ok(());
        }
        // SAFETY: as said above.
        let borrowed = unsafe { Borrowed::from_ptr(py, obj.as_ptr()) };
        // SAFETY: `obj` is a str (or str subclass), checked above.
        let exact = surrogate_text(unsafe { borrowed.downcast_unchecked::<PyString>() })?;
        out.push(&exact);
        return Ok(());
    }
    // SAFETY: `obj` is alive (as said above).
    if let Some(x) = unsafe { number(py, obj) }? {
        out.push_str(&format_number(x));
        return Ok(());
    }
    // SAFETY: `obj` is alive (as said above).
    let list = unsafe { is_list(obj) };
    // SAFETY: `obj` is alive (as said above).
    if !list && !unsafe { is_tuple(obj) } {
        out.push_str("[object Object]");
        return Ok(());
    }
    if path.len() >= MAX_JS_STRING_DEPTH || path.contains(&obj) {
        return Ok(());
    }
    path.push(obj);
    let len = if list {
        // SAFETY: `obj` is a list, alive (as said above).
        unsafe { ffi::PyList_Size(obj.as_ptr()) }
    } else {
        // SAFETY: `obj` is a tuple, alive (as said above).
        unsafe { ffi::PyTuple_Size(obj.as_ptr()) }
    };
    for i in 0..len.max(0) {
        // A tuple does not change; a list is checked again (an index past its end would
        // raise and this clear an `IndexError`).
        let item = if list {
            // SAFETY: `obj` is a list, alive (as said above).
            let size = unsafe { ffi::PyList_Size(obj.as_ptr()) };
            if i < size {
                // SAFETY: as above, `i` in range: the item is borrowed from `obj`.
                unsafe { ffi::PyList_GetItem(obj.as_ptr(), i) }
            } else {
                std::ptr::null_mut()
            }
        } else {
            // SAFETY: `obj` is a tuple, alive, and `i` below its size: the item is borrowed
            // from `obj`.
            unsafe { ffi::PyTuple_GetItem(obj.as_ptr(), i) }
        };
        if item.is_null() {
            break;
        }
        // Held while it is printed (nothing here runs Python code, but the item must outlive
        // any list it is read from anyway).
        // SAFETY: `item` is alive, held by `obj` right now; this takes a new reference to it.
        let held = unsafe { Bound::from_borrowed_ptr(py, item) };
        if i > 0 {
            out.push_str(",");
        }
        let item = Obj::of(&held);
        if !item.is(none) && !is_absent(item) {
            // SAFETY: `item` is kept alive by `held`, the new reference of this frame.
            unsafe { push_js_string(py, item, path, out) }?;
        }
    }
    path.pop();
    Ok(())
}

/// `[image returned: <String(mimeType)> sha256:<8 hex of the UTF-8 of String(data)>]`, the
/// marker line of an image block (pi-condense 2.11.2; `capture.image_marker`), when `block`
/// is a dict whose `type` is `"image"`. The type keeps its lone surrogates (a JS template
/// literal does; the digest reads them as U+FFFD, as Node's UTF-8 encoder). Runs no Python
/// code.
pub fn image_marker(keys: &Keys<'_>, block: &Bound<'_, PyAny>) -> PyResult<Option<JsStr>> {
    // `block` is kept alive by the caller's borrow for the call and the GIL is held; its
    // members are read in C and held by `block` while they are printed.
    let dict = Obj::of(block);
    // SAFETY: as said above.
    if !unsafe { is_dict(dict) } {
        return Ok(None);
    }
    // SAFETY: as said above; `dict` is a dict.
    let kind = unsafe { keys.get(dict, K::Kind) };
    // SAFETY: `kind` is held by `dict` (as said above).
    if !unsafe { str_is(kind, "image") } {
        return Ok(None);
    }
    let py = block.py();
    let field = |key| {
        // SAFETY: as said above; `dict` is a dict.
        let value = unsafe { keys.get(dict, key) };
        value
            .filter(|&v| !is_absent(v))
            // SAFETY: `v` is held by `dict` (as said above); a new reference is taken.
            .map(|v| unsafe { Borrowed::from_ptr(py, v.as_ptr()) }.to_owned())
    };
    let mime = js_string(field(K::MimeType).as_ref())?;
    let digest = image_digest(field(K::Data).as_ref())?;
    let mut marker = JsBuf::with_capacity(mime.len() + 35);
    marker.push_str("[image returned: ");
    marker.push(&mime);
    marker.push_str(" sha256:");
    marker.push_str(&digest);
    marker.push_str("]");
    Ok(Some(marker.finish()))
}

/// An image marker's digest of `data` (`None`: absent): the first 8 hex digits of the
/// SHA-256 of the UTF-8 of `String(data)` (a lone surrogate as U+FFFD). Runs no Python code.
pub fn image_digest(data: Option<&Bound<'_, PyAny>>) -> PyResult<String> {
    let data = js_string(data)?.into_string();
    Ok(pi_condense_core::sha256::digest8(data.as_bytes()))
}

// ----- member names -----

/// The member names the bindings read and write.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum K {
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
    Name,
    Input,
    Args,
    Path,
    CompressedAt,
    MimeType,
    Data,
}

impl K {
    /// The member of a toolCall block the core's args rule names
    /// (`view::call_args_member`).
    pub(crate) fn of_args(member: ArgsMember) -> K {
        match member {
            ArgsMember::Input => K::Input,
            ArgsMember::Args => K::Args,
            ArgsMember::Arguments => K::Arguments,
        }
    }
}

const KEY_COUNT: usize = 21;

const KEY_NAMES: [&str; KEY_COUNT] = [
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
    "name",
    "input",
    "args",
    "path",
    "compressedAt",
    "mimeType",
    "data",
];

/// The interned key strings, made once per process (alive for the interpreter's life).
static INTERNED: GILOnceCell<[Py<PyString>; KEY_COUNT]> = GILOnceCell::new();

/// The field a key's text names (`NO_FIELD`: none).
#[inline]
fn field_of(text: &str) -> u8 {
    KEY_NAMES
        .iter()
        .position(|name| text_is(text, name))
        .map_or(NO_FIELD, |i| i as u8)
}

const NO_FIELD: u8 = u8::MAX;

/// The text of a dict key, when it is a str (or str subclass) that is valid UTF-8.
///
/// # Safety
/// `key` must be a live object and the GIL held; the text is valid while the key is alive.
#[inline(always)]
unsafe fn key_text<'a>(key: Obj) -> Option<&'a str> {
    // SAFETY: `key` is kept alive by the dict it was read from (`# Safety` above).
    if unsafe { is_str(key) } {
        // SAFETY: as above; a str, whose text lives as long as it.
        unsafe { borrowed_utf8(key) }
    } else {
        None
    }
}

/// Slots of the key-field cache (a power of two).
const FIELD_CACHE_SLOTS: usize = 256;

/// Key object address -> the field it names, direct-mapped.
type FieldCache = [Cell<(usize, u8)>; FIELD_CACHE_SLOTS];

/// The member names, and what the key objects seen name.
pub struct Keys<'py> {
    py: Python<'py>,
    interned: [Obj; KEY_COUNT],
    /// Key object address -> the field its text names (`NO_FIELD`: none), for the keys of
    /// the caller's messages: only while they are all alive and no Python code runs (else a
    /// freed key's address could be reused by another key).
    cache: Option<Box<FieldCache>>,
}

impl<'py> Keys<'py> {
    /// The keys; `cache`: remember what each key object names (see [`Keys::cache`]).
    pub fn new(py: Python<'py>, cache: bool) -> Self {
        let strings = INTERNED.get_or_init(py, || {
            KEY_NAMES.map(|name| PyString::intern(py, name).unbind())
        });
        Keys {
            py,
            interned: std::array::from_fn(|i| Obj::of(strings[i].bind(py))),
            cache: cache
                .then(|| Box::new([(); FIELD_CACHE_SLOTS].map(|()| Cell::new((0, NO_FIELD))))),
        }
    }

    /// The interned key string (for building dicts).
    #[inline]
    pub(crate) fn interned(&self, key: K) -> Obj {
        self.interned[key as usize]
    }

    /// The interned key string, as an object.
    pub fn key(&self, key: K) -> Borrowed<'_, 'py, PyAny> {
        // SAFETY: the interned keys live as long as the interpreter (`INTERNED` holds them).
        unsafe { Borrowed::from_ptr(self.py, self.interned(key).as_ptr()) }
    }

    /// The field `key` names (`NO_FIELD`: none, or not a str).
    #[inline(always)]
    unsafe fn field_of_key(&self, key: Obj) -> u8 {
        let address = key.addr();
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
        // SAFETY: `key` is kept alive by the dict it was read from; its text lives as long as it.
        let field = unsafe { key_text(key) }.map_or(NO_FIELD, field_of);
        if let Some(slot) = slot {
            slot.set((address, field));
        }
        field
    }

    /// The members of `dict` named by `fields`: for each, the value of the first key (in
    /// the dict's order) whose text is the field's name (`ABSENT` not filtered).
    ///
    /// Fields are found by walking the members (`PyDict_Next`), never by a hash lookup: a
    /// lookup compares the keys of equal hash with `==`, which runs Python code for a key
    /// of another type (its `__eq__`). A key that is not a str is skipped (it is no JSON
    /// member name); a str subclass key is read by its text, as `json.dumps` writes it.
    ///
    /// # Safety
    /// `dict` must be a live dict (or dict subclass) and the GIL held; the values are
    /// borrowed from the dict.
    #[inline]
    pub(crate) unsafe fn fields_of<const N: usize>(
        &self,
        dict: Obj,
        fields: [K; N],
    ) -> [Option<Obj>; N] {
        let mut found = [None; N];
        let mut pos = 0;
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe { self.scan(dict, &mut pos, &fields, &mut found, u32::MAX) };
        found
    }

    /// Walks `dict` on from `*pos`, putting the value of the first key naming `fields[j]`
    /// into `found[j]` (when still empty), until every slot of `wanted` (a bit mask of
    /// `j`s) is filled or the dict ends; `*pos` is where to go on from.
    ///
    /// # Safety
    /// As [`Keys::fields_of`], and `*pos` must be 0 or where a previous walk of the same,
    /// unchanged dict stopped.
    #[inline]
    pub(crate) unsafe fn scan<const N: usize>(
        &self,
        dict: Obj,
        pos: &mut ffi::Py_ssize_t,
        fields: &[K; N],
        found: &mut [Option<Obj>; N],
        wanted: u32,
    ) {
        // Bit j: field j is wanted and not found yet.
        let mut missing = (0..N)
            .filter(|&j| found[j].is_none())
            .fold(0u32, |m, j| m | 1 << j)
            & wanted;
        if missing == 0 {
            return;
        }
        // SAFETY: `dict` is a dict kept alive by the call's owned root (`# Safety` above: no
        // Python code runs, so it is unchanged), `*pos` is 0 or where a walk of it stopped, and
        // the GIL is held; the keys and values it hands out are held by `dict`.
        let mut members = unsafe { DictMembers::new(dict, *pos) };
        for (key, value) in members.by_ref() {
            // SAFETY: `key` is held by `dict` (as above).
            let named = unsafe { self.field_of_key(key) };
            if named == NO_FIELD {
                continue;
            }
            if let Some(j) = fields.iter().position(|&f| f as u8 == named) {
                found[j].get_or_insert(value);
                missing &= !(1 << j);
                if missing == 0 {
                    break;
                }
            }
        }
        *pos = members.position();
    }

    /// `dict[key]` (any `dict`), with `ABSENT` read as a missing key ([`Keys::fields_of`]).
    ///
    /// # Safety
    /// `dict` must be a live dict and the GIL held.
    #[inline]
    pub(crate) unsafe fn get(&self, dict: Obj, key: K) -> Option<Obj> {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        let [found] = unsafe { self.fields_of(dict, [key]) };
        present(found)
    }

    /// `obj[key]` of an object that may not be a dict (`None` then).
    ///
    /// # Safety
    /// `obj` must be a live object and the GIL held.
    pub(crate) unsafe fn get_of(&self, obj: Obj, key: K) -> Option<Obj> {
        // SAFETY: `obj` is kept alive by the call's owned root (`# Safety` above).
        if unsafe { is_dict(obj) } {
            // SAFETY: as above; `obj` is a dict.
            unsafe { self.get(obj, key) }
        } else {
            None
        }
    }

    /// `obj[key]` (a new reference) of an object that may not be a dict, `ABSENT` read as
    /// missing.
    pub fn get_bound(&self, obj: &Bound<'py, PyAny>, key: K) -> Option<Bound<'py, PyAny>> {
        // SAFETY: `obj` is kept alive by the caller's borrow and the GIL is held.
        let value = unsafe { self.get_of(Obj::of(obj), key) };
        // SAFETY: `v` is held by `obj`; a new reference is taken before anything else runs.
        value.map(|v| unsafe { Bound::from_borrowed_ptr(self.py, v.as_ptr()) })
    }
}

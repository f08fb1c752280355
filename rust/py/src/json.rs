//! `JSON.stringify` over Python objects (dict, list, tuple, str, int, float, bool, None),
//! walked directly through the C API: no intermediate value is built.
//!
//! Strings are read as UTF-8 straight from the `str` object; a string holding lone
//! surrogates (not UTF-8-encodable) is read as UTF-16 code units instead, for that string
//! only. Where the layout is verified, the characters of compact ASCII strings and the
//! items of lists are read in place (`cpython.rs`).
//!
//! `stringify_len` (and render's sizes) walk values breadth-first through a queue (`fifo`):
//! the objects read next are those queued first, so each is requested from memory a fixed
//! number of steps before it is read, and many are in flight at once. A value that cannot be
//! measured is measured again depth-first (an explicit stack, in text order) for the error
//! `stringify` raises; so is every value whose objects a [`Recorder`] records (the size
//! memo's trails: `size_memo::trail`). Both walks
//! cache the lengths of dict keys (by object, within one walk) and of doubles, and count
//! escaped UTF-16 units many bytes at a time.

use std::cell::Cell;
use std::ptr::{self, addr_of_mut};

use pi_condense_core::json::{
    self, JsonWriter, MAX_DEPTH, NumberLens, array_index, array_index_units, escape, fixed_width,
    js_key_order, write, write::Mark,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyType};

mod deep;
mod fifo;
mod reload;

#[cfg(not(windows))]
use crate::cpython::PyUnicode_AsUTF8AndSize;
use crate::cpython::{DictMembers, Obj, StrChars, list_items, prefetch, prefetch_body, str_chars};

/// Integers up to this magnitude print with all their digits.
const EXACT_INT_LIMIT: u64 = 1 << 53;

/// A Python `str` as Rust reads it.
enum Text {
    /// UTF-8 owned by the `str` object (or by `owner`, a bytes object, when not null).
    Utf8 {
        data: *const u8,
        len: usize,
        owner: *mut ffi::PyObject,
    },
    /// UTF-16 code units of a string holding lone surrogates.
    Units(Vec<u16>),
}

impl Drop for Text {
    fn drop(&mut self) {
        if let Text::Utf8 { owner, .. } = self
            && !owner.is_null()
        {
            // SAFETY: `owner` is a strong reference we own (the GIL is held while a
            // Text exists: it never leaves the functions below).
            unsafe { ffi::Py_DECREF(*owner) };
        }
    }
}

/// A borrowed view of a [`Text`].
enum TextRef<'a> {
    Str(&'a str),
    Units(&'a [u16]),
}

impl Text {
    fn view(&self) -> TextRef<'_> {
        match self {
            Text::Utf8 { data, len, .. } => {
                // SAFETY: CPython hands out valid UTF-8 of `len` bytes that lives as long
                // as the str object (or `owner`), both alive while `self` is.
                let bytes = unsafe { std::slice::from_raw_parts(*data, *len) };
                // SAFETY: the bytes are the UTF-8 CPython produced for the str (see above).
                TextRef::Str(unsafe { std::str::from_utf8_unchecked(bytes) })
            }
            Text::Units(units) => TextRef::Units(units),
        }
    }

    fn array_index(&self) -> Option<u32> {
        match self.view() {
            TextRef::Str(s) => array_index(s),
            TextRef::Units(units) => array_index_units(units),
        }
    }

    /// UTF-16 length of the quoted, escaped string.
    fn escaped_len(&self) -> usize {
        match self.view() {
            TextRef::Str(s) => escape::str_len(s),
            TextRef::Units(units) => escape::units_len(units),
        }
    }

    fn write_value(&self, w: &mut JsonWriter) {
        match self.view() {
            TextRef::Str(s) => w.str(s),
            TextRef::Units(units) => w.units(units),
        }
    }

    fn write_key(&self, w: &mut JsonWriter) {
        match self.view() {
            TextRef::Str(s) => w.key_str(s),
            TextRef::Units(units) => w.key_units(units),
        }
    }
}

/// Reads a `str` (or str subclass) object.
///
/// # Safety
/// `obj` must be a live `str` object and the GIL held.
unsafe fn read_text(py: Python<'_>, obj: *mut ffi::PyObject) -> PyResult<Text> {
    // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
    unsafe {
        // A lone surrogate is found from the code units: CPython's UTF-8 encoder would build
        // (and this would clear) a `UnicodeEncodeError`, whose allocation may run the cyclic
        // collector and finalizers while the caller borrows.
        if crate::cpython::has_lone_surrogate(Obj::from_ptr(obj)) {
            return Ok(Text::Units(code_units(py, obj)?));
        }
        #[cfg(not(windows))]
        {
            let mut size: ffi::Py_ssize_t = 0;
            let data = PyUnicode_AsUTF8AndSize(obj, &mut size);
            if !data.is_null() {
                return Ok(Text::Utf8 {
                    data: data.cast(),
                    len: usize::try_from(size).unwrap_or(0),
                    owner: ptr::null_mut(),
                });
            }
        }
        #[cfg(windows)]
        {
            let bytes = ffi::PyUnicode_AsUTF8String(obj);
            if !bytes.is_null() {
                return Ok(Text::Utf8 {
                    data: ffi::PyBytes_AsString(bytes).cast(),
                    len: usize::try_from(ffi::PyBytes_Size(bytes)).unwrap_or(0),
                    owner: bytes,
                });
            }
        }
        Err(PyErr::fetch(py))
    }
}

/// Quoted length of a str the layout reads do not cover (a subclass, or reads off), through
/// the C API; out of line, so that the common case saves no registers for it.
///
/// # Safety
/// `obj` must be a live `str` object and the GIL held.
#[cold]
#[inline(never)]
unsafe fn str_len_via_api(py: Python<'_>, obj: *mut ffi::PyObject) -> PyResult<usize> {
    // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
    Ok(unsafe { read_text(py, obj) }?.escaped_len())
}

/// The UTF-16 code units of a `str`, lone surrogates kept.
///
/// # Safety
/// `obj` must be a live `str` object and the GIL held.
#[cold]
#[inline(never)]
unsafe fn code_units(py: Python<'_>, obj: *mut ffi::PyObject) -> PyResult<Vec<u16>> {
    // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
    unsafe {
        let len = ffi::PyUnicode_GetLength(obj);
        if len < 0 {
            return Err(PyErr::fetch(py));
        }
        let buf = ffi::PyUnicode_AsUCS4Copy(obj);
        if buf.is_null() {
            return Err(PyErr::fetch(py));
        }
        let code_points = std::slice::from_raw_parts(buf, usize::try_from(len).unwrap_or(0));
        let units = json::utf16_of(code_points);
        ffi::PyMem_Free(buf.cast());
        Ok(units)
    }
}

/// What a Python object is, as far as JSON goes.
enum Kind {
    Str,
    Dict,
    List,
    Tuple,
    Int,
    Float,
    Null,
    True,
    False,
    Other,
}

/// # Safety
/// `obj` must be a live object and the GIL held.
#[inline(always)]
unsafe fn kind(obj: *mut ffi::PyObject) -> Kind {
    // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
    unsafe {
        let ty = ffi::Py_TYPE(obj);
        if ty == addr_of_mut!(ffi::PyUnicode_Type) {
            Kind::Str
        } else if ty == addr_of_mut!(ffi::PyDict_Type) {
            Kind::Dict
        } else if ty == addr_of_mut!(ffi::PyList_Type) {
            Kind::List
        } else if ty == addr_of_mut!(ffi::PyLong_Type) {
            Kind::Int
        } else if obj == ffi::Py_None() {
            Kind::Null
        } else if obj == ffi::Py_True() {
            Kind::True
        } else if obj == ffi::Py_False() {
            Kind::False
        } else if ty == addr_of_mut!(ffi::PyFloat_Type) {
            Kind::Float
        } else if ty == addr_of_mut!(ffi::PyTuple_Type) {
            Kind::Tuple
        } else if ffi::PyUnicode_Check(obj) != 0 {
            Kind::Str
        } else if ffi::PyDict_Check(obj) != 0 {
            Kind::Dict
        } else if ffi::PyList_Check(obj) != 0 {
            Kind::List
        } else if ffi::PyTuple_Check(obj) != 0 {
            Kind::Tuple
        } else if ffi::PyLong_Check(obj) != 0 {
            Kind::Int
        } else if ffi::PyFloat_Check(obj) != 0 {
            Kind::Float
        } else {
            Kind::Other
        }
    }
}

/// A Python number as JS sees it.
enum Number {
    /// Printed with all its digits (|i| <= 2^53).
    Exact(i64),
    /// Printed as JS prints this double.
    Double(f64),
}

impl Number {
    fn write(&self, w: &mut JsonWriter) {
        match *self {
            Number::Exact(i) => w.int(i),
            Number::Double(x) => w.number(x),
        }
    }
}

/// # Safety
/// `obj` must be a live `int` object and the GIL held.
unsafe fn int_number(py: Python<'_>, obj: *mut ffi::PyObject) -> PyResult<Number> {
    // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
    unsafe {
        let mut overflow: std::os::raw::c_int = 0;
        let value = ffi::PyLong_AsLongLongAndOverflow(obj, &mut overflow);
        if overflow == 0 {
            if value == -1 && !ffi::PyErr_Occurred().is_null() {
                return Err(PyErr::fetch(py));
            }
            if value.unsigned_abs() <= EXACT_INT_LIMIT {
                return Ok(Number::Exact(value));
            }
            // Round to the nearest double, ties to even, as float(i) and JS do.
            return Ok(Number::Double(value as f64));
        }
        // Beyond the double range: +-Infinity, told from the digits (nothing raised).
        Ok(Number::Double(crate::jsread::big_int_to_double(
            py,
            Obj::from_ptr(obj),
            overflow,
        )?))
    }
}

/// # Safety
/// `obj` must be a live `float` object and the GIL held.
unsafe fn float_number(py: Python<'_>, obj: *mut ffi::PyObject) -> PyResult<Number> {
    // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
    unsafe {
        let x = ffi::PyFloat_AsDouble(obj);
        if x == -1.0 && !ffi::PyErr_Occurred().is_null() {
            return Err(PyErr::fetch(py));
        }
        Ok(Number::Double(x))
    }
}

/// A `TypeError` naming the type of an object, its message made only when the error is
/// raised: a type's `__name__` can run Python code (a metaclass property), and the error
/// is made while borrowed views of the messages are alive.
struct TypeNamed {
    ty: Py<PyType>,
    message: fn(&str) -> String,
}

impl pyo3::PyErrArguments for TypeNamed {
    fn arguments(self, py: Python<'_>) -> PyObject {
        let name = self
            .ty
            .bind(py)
            .name()
            .map_or_else(|_| "?".to_owned(), |n| n.to_string());
        pyo3::IntoPyObjectExt::into_py_any((self.message)(&name), py).unwrap_or_else(|_| py.None())
    }
}

/// # Safety
/// `obj` must be a live object and the GIL held.
#[cold]
#[inline(never)]
unsafe fn type_error(
    py: Python<'_>,
    obj: *mut ffi::PyObject,
    message: fn(&str) -> String,
) -> PyErr {
    // SAFETY: `obj` is live (the caller's contract); taking a reference to its type runs
    // nothing.
    let ty = unsafe { Bound::from_borrowed_ptr(py, obj) }
        .get_type()
        .unbind();
    PyTypeError::new_err(TypeNamed { ty, message })
}

/// # Safety
/// `obj` must be a live object and the GIL held.
#[cold]
#[inline(never)]
unsafe fn unsupported(py: Python<'_>, obj: *mut ffi::PyObject) -> PyErr {
    // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
    unsafe {
        type_error(py, obj, |name| {
            format!("Object of type {name} is not JSON serializable")
        })
    }
}

/// # Safety
/// `key` must be a live object and the GIL held.
unsafe fn read_key(py: Python<'_>, key: *mut ffi::PyObject) -> PyResult<Text> {
    // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
    unsafe {
        if ffi::PyUnicode_Check(key) != 0 {
            read_text(py, key)
        } else {
            Err(type_error(py, key, |name| {
                format!("dict keys must be str, not {name}")
            }))
        }
    }
}

#[inline]
fn check_depth(depth: usize) -> PyResult<()> {
    if depth >= MAX_DEPTH {
        Err(depth_error())
    } else {
        Ok(())
    }
}

#[cold]
#[inline(never)]
fn depth_error() -> PyErr {
    PyValueError::new_err(format!(
        "JSON nesting deeper than {MAX_DEPTH} levels (circular reference?)"
    ))
}

/// Borrowed item `i` of a list or tuple.
///
/// # Safety
/// `seq` must be a live list (when `is_list`) or tuple, `i` in range, the GIL held.
#[inline]
unsafe fn seq_item(
    seq: *mut ffi::PyObject,
    is_list: bool,
    i: ffi::Py_ssize_t,
) -> *mut ffi::PyObject {
    // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
    unsafe {
        if is_list {
            ffi::PyList_GetItem(seq, i)
        } else {
            ffi::PyTuple_GetItem(seq, i)
        }
    }
}

/// # Safety
/// `seq` must be a live list (when `is_list`) or tuple and the GIL held.
#[inline]
unsafe fn seq_len(seq: *mut ffi::PyObject, is_list: bool) -> ffi::Py_ssize_t {
    // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
    unsafe {
        if is_list {
            ffi::PyList_Size(seq)
        } else {
            ffi::PyTuple_Size(seq)
        }
    }
}

/// A container being written: the walk keeps them on a heap stack, not the call stack,
/// so deep values cannot overflow a (thread's) stack.
enum Open {
    Seq {
        seq: *mut ffi::PyObject,
        is_list: bool,
        len: ffi::Py_ssize_t,
        next: ffi::Py_ssize_t,
    },
    /// A dict written in its own order while that order is the JS order.
    Dict {
        dict: *mut ffi::PyObject,
        pos: ffi::Py_ssize_t,
        first: bool,
        order: KeyOrder,
        mark: Mark,
    },
    /// A dict whose array-index keys must move first.
    Sorted {
        members: Vec<(Text, *mut ffi::PyObject)>,
        order: std::vec::IntoIter<usize>,
        first: bool,
    },
}

/// Whether a dict's keys, read in its own order, are still in JS order: array-index keys
/// first, ascending, then the others (`JSON.stringify` follows the object's key order).
#[derive(Default)]
struct KeyOrder {
    last_index: Option<u32>,
    seen_other: bool,
}

impl KeyOrder {
    /// Takes the next key's array index (`None`: not an array index); false when that key
    /// breaks the order (the dict must be written reordered).
    fn accepts(&mut self, index: Option<u32>) -> bool {
        match index {
            Some(i) if self.seen_other || self.last_index.is_some_and(|l| i <= l) => false,
            Some(i) => {
                self.last_index = Some(i);
                true
            }
            None => {
                self.seen_other = true;
                true
            }
        }
    }
}

/// The members of a dict, for writing in JS key order.
///
/// # Safety
/// `dict` must be a live dict and the GIL held.
#[cold]
#[inline(never)]
unsafe fn sorted_dict(py: Python<'_>, dict: *mut ffi::PyObject) -> PyResult<Open> {
    // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
    unsafe {
        let mut members: Vec<(Text, *mut ffi::PyObject)> = Vec::new();
        let (mut pos, mut key, mut value) = (0, ptr::null_mut(), ptr::null_mut());
        while ffi::PyDict_Next(dict, &mut pos, &mut key, &mut value) != 0 {
            members.push((read_key(py, key)?, value));
        }
        let indices: Vec<Option<u32>> = members.iter().map(|(k, _)| k.array_index()).collect();
        Ok(Open::Sorted {
            order: js_key_order(&indices).into_iter(),
            members,
            first: true,
        })
    }
}

/// The array index of a dict key (`None`: not one, or not a key `stringify` accepts).
///
/// # Safety
/// `key` must be a live object and the GIL held.
unsafe fn key_index(py: Python<'_>, key: *mut ffi::PyObject) -> Option<u32> {
    // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
    unsafe { read_key(py, key) }
        .ok()
        .and_then(|text| text.array_index())
}

/// Whether `stringify` writes a dict (of `str` keys) in another order than its own.
///
/// # Safety
/// `dict` must be a live dict and the GIL held.
#[cold]
unsafe fn reorders(py: Python<'_>, dict: *mut ffi::PyObject) -> bool {
    // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
    unsafe {
        let mut order = KeyOrder::default();
        let (mut pos, mut key, mut value) = (0, ptr::null_mut(), ptr::null_mut());
        while ffi::PyDict_Next(dict, &mut pos, &mut key, &mut value) != 0 {
            if !order.accepts(key_index(py, key)) {
                return true;
            }
        }
        false
    }
}

/// Writes the `JSON.stringify` text of a Python value.
///
/// The walk holds only borrowed references: it runs no Python code, so the containers
/// cannot change under it.
///
/// # Safety
/// `root` must be a live object and the GIL held.
unsafe fn encode(py: Python<'_>, w: &mut JsonWriter, root: *mut ffi::PyObject) -> PyResult<()> {
    // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
    unsafe {
        let mut stack: Vec<Open> = Vec::new();
        let mut pending = Some(root);
        loop {
            if let Some(obj) = pending.take() {
                match kind(obj) {
                    Kind::Str => read_text(py, obj)?.write_value(w),
                    Kind::Dict => {
                        check_depth(stack.len())?;
                        let mark = w.mark();
                        w.begin_object();
                        stack.push(Open::Dict {
                            dict: obj,
                            pos: 0,
                            first: true,
                            order: KeyOrder::default(),
                            mark,
                        });
                    }
                    kind @ (Kind::List | Kind::Tuple) => {
                        check_depth(stack.len())?;
                        let is_list = matches!(kind, Kind::List);
                        w.begin_array();
                        stack.push(Open::Seq {
                            seq: obj,
                            is_list,
                            len: seq_len(obj, is_list),
                            next: 0,
                        });
                    }
                    Kind::Int => int_number(py, obj)?.write(w),
                    Kind::Float => float_number(py, obj)?.write(w),
                    Kind::Null => w.null(),
                    Kind::True => w.bool(true),
                    Kind::False => w.bool(false),
                    Kind::Other => return Err(unsupported(py, obj)),
                }
            }
            // The next value comes from the innermost open container (or closes it).
            let Some(top) = stack.last_mut() else {
                return Ok(());
            };
            match top {
                Open::Seq {
                    seq,
                    is_list,
                    len,
                    next,
                } => {
                    if *next < *len {
                        let item = seq_item(*seq, *is_list, *next);
                        if item.is_null() {
                            return Err(PyErr::fetch(py));
                        }
                        w.element(*next == 0);
                        *next += 1;
                        pending = Some(item);
                    } else {
                        w.end_array(*len <= 0);
                        stack.pop();
                    }
                }
                Open::Dict {
                    dict,
                    pos,
                    first,
                    order,
                    mark,
                } => {
                    let (mut key, mut value) = (ptr::null_mut(), ptr::null_mut());
                    if ffi::PyDict_Next(*dict, pos, &mut key, &mut value) == 0 {
                        w.end_object(*first);
                        stack.pop();
                        continue;
                    }
                    let text = read_key(py, key)?;
                    if order.accepts(text.array_index()) {
                        w.element(*first);
                        *first = false;
                        text.write_key(w);
                        pending = Some(value);
                    } else {
                        // An array-index key after another key: start over, reordered.
                        w.reset(*mark);
                        w.begin_object();
                        *top = sorted_dict(py, *dict)?;
                    }
                }
                Open::Sorted {
                    members,
                    order,
                    first,
                } => match order.next().and_then(|i| members.get(i)) {
                    Some((text, value)) => {
                        w.element(*first);
                        *first = false;
                        text.write_key(w);
                        pending = Some(*value);
                    }
                    None => {
                        w.end_object(members.is_empty());
                        stack.pop();
                    }
                },
            }
        }
    }
}

/// A step of the length walk: a value to measure, a dict key, or the end of a measured
/// element. Dict keys are measured in the order the text would be written, so the first
/// error is the one `stringify` would raise.
#[derive(Clone, Copy)]
enum Step {
    /// A value and the number of containers around it.
    Value(*mut ffi::PyObject, u32),
    /// A dict key: its quoted length plus the colon.
    Key(*mut ffi::PyObject),
    /// Element `i` of [`Measurer::len_each_then`] is complete.
    End(usize),
}

/// What the depth-first walk reports of the objects it measures, in text order (the size
/// memo records its trails through this). `()` records nothing, and a walk with it compiles
/// to the plain walk.
pub(crate) trait Recorder {
    /// Whether anything is recorded (`false`: the breadth-first walk may be used instead).
    const RECORDS: bool;

    /// A value that is not a dict, list or tuple.
    ///
    /// # Safety
    /// `obj` must be a live object and the GIL held.
    unsafe fn leaf(&mut self, obj: Obj);

    /// A dict at `depth` is opened: a mark for [`Recorder::close_dict`].
    ///
    /// # Safety
    /// `dict` must be a live object and the GIL held.
    unsafe fn open_dict(&mut self, dict: Obj, depth: u32) -> Option<usize>;

    /// A key of the dict opened last (an exact str: the walk checked).
    ///
    /// # Safety
    /// `key` must be a live object and the GIL held.
    unsafe fn key(&mut self, key: Obj);

    /// The dict opened at `at` had `count` members (`plain`: all keys exact strs, in an
    /// order `stringify` keeps).
    ///
    /// # Safety
    /// The GIL must be held.
    unsafe fn close_dict(&mut self, at: usize, count: usize, plain: bool);

    /// A list or tuple at `depth`, of `count` items.
    ///
    /// # Safety
    /// `list` must be a live object and the GIL held.
    unsafe fn list(&mut self, list: Obj, count: usize, depth: u32);

    /// Element `i` of [`Measurer::len_each_with`] is complete.
    fn end(&mut self);
}

impl Recorder for () {
    const RECORDS: bool = false;
    #[inline(always)]
    unsafe fn leaf(&mut self, _: Obj) {}
    #[inline(always)]
    unsafe fn open_dict(&mut self, _: Obj, _: u32) -> Option<usize> {
        None
    }
    #[inline(always)]
    unsafe fn key(&mut self, _: Obj) {}
    #[inline(always)]
    unsafe fn close_dict(&mut self, _: usize, _: usize, _: bool) {}
    #[inline(always)]
    unsafe fn list(&mut self, _: Obj, _: usize, _: u32) {}
    #[inline(always)]
    fn end(&mut self) {}
}

/// Slots of the key-length cache (a power of two).
const KEY_CACHE_SLOTS: usize = 256;

/// How many steps ahead of the walk an object's header is prefetched.
const AHEAD_HEADER: usize = 12;

/// How many steps ahead of the walk the memory an object points to is prefetched (its
/// header has arrived by then).
const AHEAD_BODY: usize = 6;

/// `JSON.stringify(value).length` of Python values, without building the text (member
/// order does not change the length).
///
/// Dict keys repeat across messages (often as the very same objects), so their lengths
/// are cached by object address. That is sound only while every key seen stays alive
/// and no Python code runs: use one `Measurer` for one stretch of measuring (values
/// held by the caller, nothing in between that could free a key and reuse its address).
pub(crate) struct Measurer {
    steps: Vec<Step>,
    keys: Box<[(usize, usize); KEY_CACHE_SLOTS]>,
    /// The printed lengths of doubles: this thread's cache, lent for the measurer's life
    /// (`None` for a measurer made while another holds it: it computes every length).
    numbers: Option<NumberLens>,
    /// The queue of the breadth-first walk (`fifo`), kept between walks.
    fifo: fifo::Fifo,
    /// Per element of the breadth-first walk, how many of its objects are queued.
    pending: Vec<u32>,
}

thread_local! {
    /// The number-length cache of this thread, between measurers: a length depends on the
    /// value alone, so what one render measured serves the next (hosts hand over fresh
    /// objects holding the same costs and usage figures). Lent to one measurer at a time.
    static NUMBER_LENS: std::cell::Cell<Option<NumberLens>> =
        std::cell::Cell::new(Some(NumberLens::new()));
}

impl Drop for Measurer {
    fn drop(&mut self) {
        if let Some(numbers) = self.numbers.take() {
            // `try_with`: a measurer dropped while the thread's locals are torn down keeps
            // nothing.
            let _ = NUMBER_LENS.try_with(|cache| cache.set(Some(numbers)));
        }
    }
}

impl Measurer {
    pub(crate) fn new(_py: Python<'_>) -> Self {
        Measurer {
            steps: Vec::new(),
            keys: Box::new([(0, 0); KEY_CACHE_SLOTS]),
            numbers: NUMBER_LENS.with(|cache| cache.take()),
            fifo: fifo::Fifo::default(),
            pending: Vec::new(),
        }
    }

    /// Queues the members of a dict with a key that is not an exact `str` as `stringify`
    /// reads them, so that the first error is the one it raises: each key right before its
    /// value; from the first array-index key out of JS order on (where `stringify` restarts
    /// the dict reordered), every remaining key, then the values not yet queued in JS key
    /// order. Returns the number of members.
    ///
    /// # Safety
    /// `dict` must be a live dict and the GIL held.
    #[cold]
    unsafe fn push_members(
        &mut self,
        py: Python<'_>,
        dict: *mut ffi::PyObject,
        depth: u32,
    ) -> usize {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe {
            let mut members = Vec::new();
            let (mut pos, mut key, mut value) = (0, ptr::null_mut(), ptr::null_mut());
            while ffi::PyDict_Next(dict, &mut pos, &mut key, &mut value) != 0 {
                members.push((key, value));
            }
            let mut order = KeyOrder::default();
            let mut reordered_from = None;
            for (i, &(key, _)) in members.iter().enumerate() {
                if ffi::PyUnicode_Check(key) == 0 {
                    // Refused in text order, before any reordering.
                    break;
                }
                if !order.accepts(key_index(py, key)) {
                    reordered_from = Some(i);
                    break;
                }
            }
            let split = reordered_from.unwrap_or(members.len());
            for &(key, value) in members.get(..split).unwrap_or_default() {
                self.steps.push(Step::Key(key));
                self.steps.push(Step::Value(value, depth + 1));
            }
            if reordered_from.is_some() {
                let rest = members.get(split..).unwrap_or_default();
                self.steps
                    .extend(rest.iter().map(|&(key, _)| Step::Key(key)));
                let indices: Vec<Option<u32>> =
                    members.iter().map(|&(key, _)| key_index(py, key)).collect();
                for i in js_key_order(&indices) {
                    if let Some(&(_, value)) = members.get(i).filter(|_| i >= split) {
                        self.steps.push(Step::Value(value, depth + 1));
                    }
                }
            }
            members.len()
        }
    }

    /// Quoted length of a dict key (plus the colon).
    ///
    /// # Safety
    /// `key` must be a live object and the GIL held.
    #[inline]
    unsafe fn key_len(&mut self, py: Python<'_>, key: *mut ffi::PyObject) -> PyResult<usize> {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        Ok(unsafe { self.key_info(py, key) }? >> 1)
    }

    /// Twice [`Measurer::key_len`], plus one when the key is an array index.
    ///
    /// # Safety
    /// `key` must be a live object and the GIL held.
    #[inline(always)]
    unsafe fn key_info(&mut self, py: Python<'_>, key: *mut ffi::PyObject) -> PyResult<usize> {
        let address = key as usize;
        let slot = (address >> 4 ^ address >> 12) & (KEY_CACHE_SLOTS - 1);
        if let Some(&(cached, info)) = self.keys.get(slot)
            && cached == address
        {
            return Ok(info);
        }
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe { self.key_info_missed(py, key, slot) }
    }

    /// [`Measurer::key_info`] of a key not in the cache (kept out of line: the hit is the
    /// common case, and inlining this would make every call save registers).
    ///
    /// # Safety
    /// As [`Measurer::key_info`].
    #[cold]
    #[inline(never)]
    unsafe fn key_info_missed(
        &mut self,
        py: Python<'_>,
        key: *mut ffi::PyObject,
        slot: usize,
    ) -> PyResult<usize> {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        let text = unsafe { read_key(py, key)? };
        let info = (text.escaped_len() + 1) << 1 | usize::from(text.array_index().is_some());
        if let Some(entry) = self.keys.get_mut(slot) {
            *entry = (key as usize, info);
        }
        Ok(info)
    }

    /// Printed length of a number (shortest round-trip digits are costly: cached).
    #[inline]
    fn number_len(&mut self, number: &Number) -> usize {
        match *number {
            Number::Exact(i) => write::int_len(i),
            Number::Double(x) => match self.numbers.as_mut() {
                Some(numbers) => numbers.len_of(x),
                None => write::number_len(x),
            },
        }
    }

    /// Hints the CPU to load the cache entry of a float the walk measures soon.
    ///
    /// # Safety
    /// `obj` must be a live object and the GIL held.
    #[inline(always)]
    unsafe fn prefetch_number(&self, obj: *mut ffi::PyObject) {
        // SAFETY: `obj` is live (the caller's contract); `PyFloat_AsDouble` of an exact
        // float reads its value and runs no Python code.
        unsafe {
            if ffi::Py_TYPE(obj) == addr_of_mut!(ffi::PyFloat_Type)
                && let Some(set) = self
                    .numbers
                    .as_ref()
                    .and_then(|n| n.set_address(ffi::PyFloat_AsDouble(obj)))
            {
                prefetch(set);
            }
        }
    }

    /// Quoted length of a str.
    ///
    /// # Safety
    /// `obj` must be a live str and the GIL held.
    #[inline(always)]
    unsafe fn str_len(&mut self, py: Python<'_>, obj: *mut ffi::PyObject) -> PyResult<usize> {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe {
            Ok(match str_chars(Obj::from_ptr(obj)) {
                Some(StrChars::Ascii(text)) => escape::str_len(text),
                Some(StrChars::Latin1(chars)) => fixed_width::latin1_len(chars),
                Some(StrChars::Bmp(chars)) => fixed_width::bmp_len(chars),
                Some(StrChars::CodePoints(chars)) => fixed_width::code_points_len(chars),
                None => return str_len_via_api(py, obj),
            })
        }
    }

    /// Queues the values of a dict (in reverse, so that popping visits them in order)
    /// and returns the length of the rest: braces, commas, quoted keys and colons.
    ///
    /// Keys that are exact `str` objects are measured at once. If one is not, the dict is
    /// queued again with its keys as steps, so that they are read in text order (a
    /// non-str key raises only once the members before it are measured).
    ///
    /// # Safety
    /// `dict` must be a live dict and the GIL held.
    #[inline]
    unsafe fn open_dict<R: Recorder>(
        &mut self,
        py: Python<'_>,
        dict: *mut ffi::PyObject,
        depth: u32,
        rec: &mut R,
    ) -> PyResult<usize> {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe {
            let base = self.steps.len();
            let mut count = 0usize;
            let mut keys_len = 0usize;
            let mut plain = true;
            let mut indexed = false;
            let opened = rec.open_dict(Obj::from_ptr(dict), depth);
            for (key, value) in DictMembers::new(Obj::from_ptr(dict), 0) {
                if ffi::Py_TYPE(key.as_ptr()) != addr_of_mut!(ffi::PyUnicode_Type) {
                    plain = false;
                    break;
                }
                let info = self.key_info(py, key.as_ptr())?;
                keys_len += info >> 1;
                indexed |= info & 1 != 0;
                rec.key(key);
                self.steps.push(Step::Value(value.as_ptr(), depth + 1));
                count += 1;
            }
            // Array-index keys out of JS order: `stringify` writes the values in another order,
            // and the first error must be its (rare: measured as a dict with odd keys).
            if plain && indexed && reorders(py, dict) {
                plain = false;
            }
            if let Some(at) = opened {
                rec.close_dict(at, count, plain);
            }
            if !plain {
                self.steps.truncate(base);
                keys_len = 0;
                count = self.push_members(py, dict, depth);
            }
            if let Some(members) = self.steps.get_mut(base..) {
                // [k1, v1, k2, v2] -> [v2, k2, v1, k1]: popped as k1, v1, k2, v2.
                members.reverse();
            }
            Ok(2 + count.saturating_sub(1) + keys_len)
        }
    }

    /// `JSON.stringify(value).length` in UTF-16 code units.
    ///
    /// # Safety
    /// `root` must be a live object and the GIL held.
    pub(crate) unsafe fn len(
        &mut self,
        py: Python<'_>,
        root: *mut ffi::PyObject,
    ) -> PyResult<usize> {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe { self.len_with(py, root, &mut ()) }
    }

    /// [`Measurer::len`], reporting the objects of `root` to `rec` in text order.
    ///
    /// # Safety
    /// `root` must be a live object and the GIL held.
    pub(crate) unsafe fn len_with<R: Recorder>(
        &mut self,
        py: Python<'_>,
        root: *mut ffi::PyObject,
        rec: &mut R,
    ) -> PyResult<usize> {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe {
            if !R::RECORDS {
                let mut lens = [0usize];
                if self.fifo_each_then(py, &[Obj::from_ptr(root)], &mut lens, &mut |_, _| Ok(()))?
                    == 1
                {
                    return Ok(lens[0]);
                }
            }
            self.steps.clear();
            self.steps.push(Step::Value(root, 0));
            let mut total = 0usize;
            self.walk(py, &mut total, &mut [], &mut |_| Ok(()), rec)?;
            Ok(total)
        }
    }

    /// [`Measurer::len`] depth-first (text order: the first error is the one `stringify`
    /// raises), of a value inside `depth` containers.
    ///
    /// # Safety
    /// `root` must be a live object and the GIL held.
    unsafe fn len_at(
        &mut self,
        py: Python<'_>,
        root: *mut ffi::PyObject,
        depth: u32,
    ) -> PyResult<usize> {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe {
            self.steps.clear();
            self.steps.push(Step::Value(root, depth));
            let mut total = 0usize;
            self.walk(py, &mut total, &mut [], &mut |_| Ok(()), &mut ())?;
            Ok(total)
        }
    }

    /// `JSON.stringify(item).length` of every item of a list, calling `then(i, item)`, in
    /// order, right after item `i` is measured (while its objects are still in the CPU
    /// caches). `then` must not run Python code.
    ///
    /// The items are measured breadth-first, a few at a time (`fifo`); from the first one
    /// that cannot be measured on, depth-first in text order, so that the error raised, and
    /// the calls of `then` before it, are those of a walk in text order.
    ///
    /// # Safety
    /// `list` must be a live list and the GIL held.
    pub(crate) unsafe fn len_each_then(
        &mut self,
        py: Python<'_>,
        list: *mut ffi::PyObject,
        then: impl FnMut(usize, Obj) -> PyResult<()>,
    ) -> PyResult<Vec<usize>> {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe { self.len_each_with(py, list, then, &mut ()) }
    }

    /// [`Measurer::len_each_then`], reporting the objects of every item to `rec` in text
    /// order ([`Recorder::end`] after each item).
    ///
    /// # Safety
    /// `list` must be a live list and the GIL held.
    pub(crate) unsafe fn len_each_with<R: Recorder>(
        &mut self,
        py: Python<'_>,
        list: *mut ffi::PyObject,
        mut then: impl FnMut(usize, Obj) -> PyResult<()>,
        rec: &mut R,
    ) -> PyResult<Vec<usize>> {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe {
            let len = ffi::PyList_Size(list);
            if len < 0 {
                return Err(PyErr::fetch(py));
            }
            let count = usize::try_from(len).unwrap_or(0);
            let mut lens = vec![0usize; count];
            let mut from = 0;
            if !R::RECORDS {
                let items: Vec<Obj> = match list_items(Obj::from_ptr(list)) {
                    Some(items) => items.to_vec(),
                    None => (0..len)
                        .map(|i| Obj::from_ptr(ffi::PyList_GetItem(list, i)))
                        .collect(),
                };
                if items.iter().any(|item| item.is_null()) {
                    return Err(PyErr::fetch(py));
                }
                from = self.fifo_each_then(py, &items, &mut lens, &mut then)?;
                if from == count {
                    return Ok(lens);
                }
                // Measuring item `from` failed: from there on in text order, for the
                // error `stringify` raises.
                lens.iter_mut().skip(from).for_each(|l| *l = 0);
            }
            self.steps.clear();
            self.steps.reserve(2 * (count - from));
            for i in (from as ffi::Py_ssize_t..len).rev() {
                let item = ffi::PyList_GetItem(list, i);
                if item.is_null() {
                    return Err(PyErr::fetch(py));
                }
                self.steps.push(Step::End(usize::try_from(i).unwrap_or(0)));
                self.steps.push(Step::Value(item, 0));
            }
            let mut total = 0usize;
            self.walk(
                py,
                &mut total,
                &mut lens,
                &mut |i| {
                    let item =
                        ffi::PyList_GetItem(list, ffi::Py_ssize_t::try_from(i).unwrap_or(-1));
                    if item.is_null() {
                        return Err(PyErr::fetch(py));
                    }
                    then(i, Obj::from_ptr(item))
                },
                rec,
            )?;
            Ok(lens)
        }
    }

    /// Runs the steps, adding to `total`; at `End(i)`, `lens[i]` gets the length of
    /// element `i` (the total since the previous `End`) and `ended(i)` is called.
    ///
    /// # Safety
    /// Every object the steps name must be live and the GIL held (the pushed roots are held
    /// by the caller, their members by the containers being walked).
    unsafe fn walk<R: Recorder>(
        &mut self,
        py: Python<'_>,
        total: &mut usize,
        lens: &mut [usize],
        ended: &mut dyn FnMut(usize) -> PyResult<()>,
        rec: &mut R,
    ) -> PyResult<()> {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe {
            let mut element_start = *total;
            while let Some(step) = self.steps.pop() {
                let pending = self.steps.len();
                if let Some(Step::Value(ahead, _)) = pending
                    .checked_sub(AHEAD_HEADER)
                    .and_then(|i| self.steps.get(i))
                {
                    prefetch(*ahead);
                }
                if let Some(Step::Value(ahead, _)) = pending
                    .checked_sub(AHEAD_BODY)
                    .and_then(|i| self.steps.get(i))
                {
                    prefetch_body(Obj::from_ptr(*ahead));
                }
                let (obj, depth) = match step {
                    Step::Value(obj, depth) => (obj, depth),
                    Step::Key(key) => {
                        *total += self.key_len(py, key)?;
                        continue;
                    }
                    Step::End(i) => {
                        if let Some(len) = lens.get_mut(i) {
                            *len = *total - element_start;
                        }
                        rec.end();
                        element_start = *total;
                        ended(i)?;
                        continue;
                    }
                };
                let kind = kind(obj);
                if R::RECORDS && !matches!(kind, Kind::Dict | Kind::List | Kind::Tuple) {
                    rec.leaf(Obj::from_ptr(obj));
                }
                *total += match kind {
                    Kind::Str => self.str_len(py, obj)?,
                    Kind::Dict => {
                        check_depth(depth as usize)?;
                        self.open_dict(py, obj, depth, rec)?
                    }
                    kind @ (Kind::List | Kind::Tuple) => {
                        check_depth(depth as usize)?;
                        let is_list = matches!(kind, Kind::List);
                        let items = list_items(Obj::from_ptr(obj)).filter(|_| is_list);
                        if let Some(items) = items {
                            rec.list(Obj::from_ptr(obj), items.len(), depth);
                            for &item in items.iter().rev() {
                                self.steps.push(Step::Value(item.as_ptr(), depth + 1));
                            }
                            *total += 2 + items.len().saturating_sub(1);
                            continue;
                        }
                        let len = seq_len(obj, is_list);
                        if len < 0 {
                            return Err(PyErr::fetch(py));
                        }
                        rec.list(Obj::from_ptr(obj), usize::try_from(len).unwrap_or(0), depth);
                        for i in (0..len).rev() {
                            let item = seq_item(obj, is_list, i);
                            if item.is_null() {
                                return Err(PyErr::fetch(py));
                            }
                            self.steps.push(Step::Value(item, depth + 1));
                        }
                        let count = usize::try_from(len).unwrap_or(0);
                        2 + count.saturating_sub(1)
                    }
                    Kind::Int => {
                        let number = int_number(py, obj)?;
                        self.number_len(&number)
                    }
                    Kind::Float => {
                        let number = float_number(py, obj)?;
                        self.number_len(&number)
                    }
                    Kind::Null | Kind::True => 4,
                    Kind::False => 5,
                    Kind::Other => return Err(unsupported(py, obj)),
                };
            }
            Ok(())
        }
    }
}

/// `JSON.stringify(value).length` of a Python value.
pub(crate) fn stringify_len_of(value: &Bound<'_, PyAny>) -> PyResult<usize> {
    // SAFETY: `value` is alive for the call, the GIL is held, and the walk runs no Python
    // code (the measurer lives for this call only).
    unsafe { Measurer::new(value.py()).len(value.py(), value.as_ptr()) }
}

fn indent_width(indent: Option<i64>) -> usize {
    indent.map_or(0, |n| usize::try_from(n.clamp(0, 10)).unwrap_or(0))
}

/// A `str` from UTF-8 bytes (CPython validates them).
fn new_str<'py>(py: Python<'py>, utf8: &[u8]) -> PyResult<Bound<'py, PyString>> {
    let len = ffi::Py_ssize_t::try_from(utf8.len())
        .map_err(|_| PyValueError::new_err("JSON text too long"))?;
    // SAFETY: the pointer and length describe `utf8`; the GIL is held.
    unsafe {
        Bound::from_owned_ptr_or_err(
            py,
            ffi::PyUnicode_FromStringAndSize(utf8.as_ptr().cast(), len),
        )
        .map(|obj| obj.downcast_into_unchecked())
    }
}

/// Output buffers up to this capacity are kept for the next call on the thread (fresh
/// large allocations cost more in page faults than the encoding itself).
const KEEP_BUFFER_LIMIT: usize = 8 << 20;

thread_local! {
    static BUFFER: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// Encodes `value` into the thread's reusable buffer and hands the UTF-8 to `finish`.
fn encode_with<'py, T>(
    value: &Bound<'py, PyAny>,
    indent: Option<i64>,
    finish: impl FnOnce(Python<'py>, &[u8]) -> PyResult<T>,
) -> PyResult<T> {
    let py = value.py();
    let _paused = crate::cpython::GcPaused::new();
    let mut w = JsonWriter::from_buffer(indent_width(indent), BUFFER.with(Cell::take));
    // SAFETY: `value` is alive for the call (the caller's argument reference) and the GIL is
    // held; the members the walk borrows are owned by their containers, which nothing
    // changes: the collector is paused and the walk calls no Python code (no method of a
    // value is called, nothing is raised and cleared), so no finalizer or thread runs.
    let written = unsafe { encode(py, &mut w, value.as_ptr()) };
    let result = written.and_then(|()| finish(py, w.as_bytes()));
    let buffer = w.into_buffer();
    if buffer.capacity() <= KEEP_BUFFER_LIMIT {
        BUFFER.with(|cell| cell.set(buffer));
    }
    result
}

/// `JSON.stringify(value)`, or `JSON.stringify(value, null, indent)`.
#[pyfunction]
#[pyo3(signature = (value, indent = None))]
fn stringify<'py>(
    value: &Bound<'py, PyAny>,
    indent: Option<i64>,
) -> PyResult<Bound<'py, PyString>> {
    encode_with(value, indent, new_str)
}

/// `JSON.stringify(value[, null, indent])` as UTF-8 bytes (what a file receives).
#[pyfunction]
#[pyo3(signature = (value, indent = None))]
fn stringify_bytes<'py>(
    value: &Bound<'py, PyAny>,
    indent: Option<i64>,
) -> PyResult<Bound<'py, PyBytes>> {
    encode_with(value, indent, |py, utf8| Ok(PyBytes::new(py, utf8)))
}

/// `JSON.stringify` of each of `values`, each followed by a newline: their JSON Lines
/// text as UTF-8 (what a session file receives for a batch of entries).
#[pyfunction]
fn stringify_lines<'py>(values: &Bound<'py, PyList>) -> PyResult<Bound<'py, PyBytes>> {
    let py = values.py();
    let _paused = crate::cpython::GcPaused::new();
    // Owned references to every value, taken before any is read: the walks' roots.
    let roots: Vec<Bound<'py, PyAny>> = values.iter().collect();
    let mut w = JsonWriter::from_buffer(0, BUFFER.with(Cell::take));
    let mut written = Ok(());
    for root in &roots {
        // SAFETY: `root` is an owned reference held by `roots` for the call and the GIL is
        // held; the members the walk borrows are owned by their containers, which nothing
        // changes: the collector is paused and the walk calls no Python code.
        written = unsafe { encode(py, &mut w, root.as_ptr()) };
        if written.is_err() {
            break;
        }
        w.end_line();
    }
    let result = written.map(|()| PyBytes::new(py, w.as_bytes()));
    let buffer = w.into_buffer();
    if buffer.capacity() <= KEEP_BUFFER_LIMIT {
        BUFFER.with(|cell| cell.set(buffer));
    }
    result
}

/// `JSON.stringify(value).length` in UTF-16 code units, without building the text.
#[pyfunction]
fn stringify_len(value: &Bound<'_, PyAny>) -> PyResult<usize> {
    let _paused = crate::cpython::GcPaused::new();
    stringify_len_of(value)
}

/// JS `s.length`: UTF-16 code units.
#[pyfunction]
fn utf16_len(s: &Bound<'_, PyString>) -> PyResult<usize> {
    let _paused = crate::cpython::GcPaused::new();
    // SAFETY: `s` is a live str and the GIL is held.
    let text = unsafe { read_text(s.py(), s.as_ptr())? };
    Ok(match text.view() {
        TextRef::Str(s) => escape::utf16_len(s),
        TextRef::Units(units) => units.len(),
    })
}

/// `Buffer.byteLength(s, "utf8")`: a lone surrogate counts 3 bytes (U+FFFD).
#[pyfunction]
fn utf8_len(s: &Bound<'_, PyString>) -> PyResult<usize> {
    let _paused = crate::cpython::GcPaused::new();
    // SAFETY: `s` is a live str and the GIL is held.
    let text = unsafe { read_text(s.py(), s.as_ptr())? };
    Ok(match text.view() {
        TextRef::Str(s) => s.len(),
        TextRef::Units(units) => escape::units_utf8_len(units),
    })
}

static JSON_ERROR: GILOnceCell<Py<PyType>> = GILOnceCell::new();

fn json_error(py: Python<'_>, message: String) -> PyErr {
    match JSON_ERROR.import(py, "pi_condense.errors", "JsonError") {
        Ok(cls) => PyErr::from_type(cls.clone(), message),
        Err(err) => err,
    }
}

/// The text of a JSON document that holds raw lone surrogates, with each one replaced by
/// its `\uXXXX` escape: inside a string literal that denotes the same code unit, anywhere
/// else both forms are syntax errors; the byte offset of each escape put in is added to
/// `inserted`. One that follows a backslash (an invalid escape either way, and no escape)
/// becomes U+FFFD, one character for one, and the first such one's index is returned.
fn escape_lone_surrogates(units: &[u16], inserted: &mut Vec<usize>) -> (String, Option<usize>) {
    let mut text = String::with_capacity(units.len());
    let mut after_backslash = None;
    for (i, decoded) in char::decode_utf16(units.iter().copied()).enumerate() {
        match decoded {
            Ok(c) => text.push(c),
            Err(lone) => {
                let backslashes = text.bytes().rev().take_while(|&b| b == b'\\').count();
                if backslashes % 2 == 1 {
                    after_backslash.get_or_insert(i);
                    text.push(char::REPLACEMENT_CHARACTER);
                    continue;
                }
                inserted.push(text.len());
                text.push_str(&format!("\\u{:04x}", lone.unpaired_surrogate()));
            }
        }
    }
    (text, after_backslash)
}

/// `JSON.stringify(JSON.parse(text), null, indent)`, done in Rust.
#[pyfunction]
#[pyo3(signature = (text, indent = None))]
fn reformat_json<'py>(
    text: &Bound<'py, PyString>,
    indent: Option<i64>,
) -> PyResult<Bound<'py, PyString>> {
    let py = text.py();
    // SAFETY: `text` is a live str and the GIL is held.
    let read = unsafe { read_text(py, text.as_ptr())? };
    let escaped;
    let source = match read.view() {
        TextRef::Str(s) => s,
        TextRef::Units(units) => match escape_lone_surrogates(units, &mut Vec::new()) {
            (s, None) => {
                escaped = s;
                escaped.as_str()
            }
            (_, Some(at)) => {
                return Err(json_error(
                    py,
                    format!("Bad escaped character in JSON (char {at})"),
                ));
            }
        },
    };
    match json::parse(source) {
        Ok(value) => Ok(PyString::new(
            py,
            &json::stringify_pretty(&value, indent_width(indent)),
        )),
        Err(err) => {
            let (line, column) = err.line_column(source);
            Err(json_error(
                py,
                format!(
                    "{}: line {line} column {column} (char {})",
                    err.message,
                    err.char_offset(source)
                ),
            ))
        }
    }
}

/// Which object layouts this interpreter lets the module read directly (diagnostics and
/// tests): `ascii_text`, `list_items`, `prefetch` (see `cpython.rs`).
#[pyfunction]
fn layout_features(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    crate::cpython::features(py)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(layout_features, m)?)?;
    m.add_function(wrap_pyfunction!(stringify, m)?)?;
    m.add_function(wrap_pyfunction!(stringify_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(stringify_lines, m)?)?;
    m.add_function(wrap_pyfunction!(reload::reload_copies, m)?)?;
    m.add_function(wrap_pyfunction!(stringify_len, m)?)?;
    m.add_function(wrap_pyfunction!(utf16_len, m)?)?;
    m.add_function(wrap_pyfunction!(utf8_len, m)?)?;
    m.add_function(wrap_pyfunction!(reformat_json, m)?)?;
    m.add_function(wrap_pyfunction!(deep::loads_deep, m)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_number_cache_is_lent_to_one_measurer_at_a_time() {
        Python::with_gil(|py| {
            let mut outer = Measurer::new(py);
            assert!(outer.numbers.is_some());
            assert_eq!(outer.number_len(&Number::Double(0.0125)), 6);
            {
                // Made while `outer` holds the cache: computes, caches nothing.
                let mut inner = Measurer::new(py);
                assert!(inner.numbers.is_none());
                assert_eq!(inner.number_len(&Number::Double(1e-7)), 4);
            }
            drop(outer);
            // The outer measurer's cache came back, with what it measured.
            let mut next = Measurer::new(py);
            let misses = next.numbers.as_ref().map(NumberLens::misses);
            assert_eq!(next.number_len(&Number::Double(0.0125)), 6);
            assert_eq!(next.numbers.as_ref().map(NumberLens::misses), misses);
            assert!(misses.is_some_and(|m| m >= 1));
        });
    }
}

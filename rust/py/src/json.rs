//! `JSON.stringify` over Python objects (dict, list, tuple, str, int, float, bool, None),
//! walked directly through the C API: no intermediate value is built.
//!
//! Strings are read as UTF-8 straight from the `str` object; a string holding lone
//! surrogates (not UTF-8-encodable) is read as UTF-16 code units instead, for that string
//! only.

use std::cell::Cell;
use std::ptr::{self, addr_of_mut};

use pi_condense_core::json::{
    self, array_index, array_index_units, escape, js_key_order, write, write::Mark, JsonWriter,
    MAX_DEPTH,
};
use pyo3::exceptions::{PyOverflowError, PyTypeError, PyUnicodeEncodeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyBytes, PyString, PyType};

#[cfg(not(windows))]
extern "C" {
    // Part of the stable ABI since 3.10 and exported (outside the limited API) by every
    // CPython 3.x; on Windows python3.dll only exports it from 3.10 on, so Windows takes
    // the PyUnicode_AsUTF8String path below.
    fn PyUnicode_AsUTF8AndSize(
        unicode: *mut ffi::PyObject,
        size: *mut ffi::Py_ssize_t,
    ) -> *const std::os::raw::c_char;
}

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
        if let Text::Utf8 { owner, .. } = self {
            if !owner.is_null() {
                // SAFETY: `owner` is a strong reference we own (the GIL is held while a
                // Text exists: it never leaves the functions below).
                unsafe { ffi::Py_DECREF(*owner) };
            }
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
    let err = PyErr::fetch(py);
    if !err.is_instance_of::<PyUnicodeEncodeError>(py) {
        return Err(err);
    }
    Ok(Text::Units(code_units(py, obj)?))
}

/// The UTF-16 code units of a `str`, lone surrogates kept.
///
/// # Safety
/// `obj` must be a live `str` object and the GIL held.
#[cold]
#[inline(never)]
unsafe fn code_units(py: Python<'_>, obj: *mut ffi::PyObject) -> PyResult<Vec<u16>> {
    let len = ffi::PyUnicode_GetLength(obj);
    if len < 0 {
        return Err(PyErr::fetch(py));
    }
    let buf = ffi::PyUnicode_AsUCS4Copy(obj);
    if buf.is_null() {
        return Err(PyErr::fetch(py));
    }
    let code_points = std::slice::from_raw_parts(buf, usize::try_from(len).unwrap_or(0));
    let mut units = Vec::with_capacity(code_points.len());
    for &cp in code_points {
        match u16::try_from(cp) {
            Ok(unit) => units.push(unit),
            Err(_) => {
                let c = cp.wrapping_sub(0x10000);
                units.push(0xD800 | ((c >> 10) & 0x3FF) as u16);
                units.push(0xDC00 | (c & 0x3FF) as u16);
            }
        }
    }
    ffi::PyMem_Free(buf.cast());
    Ok(units)
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
#[inline]
unsafe fn kind(obj: *mut ffi::PyObject) -> Kind {
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

    fn len(&self) -> usize {
        match *self {
            Number::Exact(i) => write::int_len(i),
            Number::Double(x) => write::number_len(x),
        }
    }
}

/// # Safety
/// `obj` must be a live `int` object and the GIL held.
unsafe fn int_number(py: Python<'_>, obj: *mut ffi::PyObject) -> PyResult<Number> {
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
    let x = ffi::PyLong_AsDouble(obj);
    if x == -1.0 && !ffi::PyErr_Occurred().is_null() {
        let err = PyErr::fetch(py);
        if err.is_instance_of::<PyOverflowError>(py) {
            // Beyond the double range: JS reads such a literal as +-Infinity.
            return Ok(Number::Double(f64::INFINITY * f64::from(overflow.signum())));
        }
        return Err(err);
    }
    Ok(Number::Double(x))
}

/// # Safety
/// `obj` must be a live `float` object and the GIL held.
unsafe fn float_number(py: Python<'_>, obj: *mut ffi::PyObject) -> PyResult<Number> {
    let x = ffi::PyFloat_AsDouble(obj);
    if x == -1.0 && !ffi::PyErr_Occurred().is_null() {
        return Err(PyErr::fetch(py));
    }
    Ok(Number::Double(x))
}

/// # Safety
/// `obj` must be a live object and the GIL held.
#[cold]
#[inline(never)]
unsafe fn type_name(py: Python<'_>, obj: *mut ffi::PyObject) -> String {
    let bound = Bound::from_borrowed_ptr(py, obj);
    let ty = bound.get_type();
    ty.name().map_or_else(|_| "?".to_owned(), |n| n.to_string())
}

/// # Safety
/// `obj` must be a live object and the GIL held.
#[cold]
#[inline(never)]
unsafe fn unsupported(py: Python<'_>, obj: *mut ffi::PyObject) -> PyErr {
    PyTypeError::new_err(format!(
        "Object of type {} is not JSON serializable",
        type_name(py, obj)
    ))
}

/// # Safety
/// `key` must be a live object and the GIL held.
unsafe fn read_key(py: Python<'_>, key: *mut ffi::PyObject) -> PyResult<Text> {
    if ffi::PyUnicode_Check(key) != 0 {
        read_text(py, key)
    } else {
        Err(PyTypeError::new_err(format!(
            "dict keys must be str, not {}",
            type_name(py, key)
        )))
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
    if is_list {
        ffi::PyList_GetItem(seq, i)
    } else {
        ffi::PyTuple_GetItem(seq, i)
    }
}

/// # Safety
/// `seq` must be a live list (when `is_list`) or tuple and the GIL held.
#[inline]
unsafe fn seq_len(seq: *mut ffi::PyObject, is_list: bool) -> ffi::Py_ssize_t {
    if is_list {
        ffi::PyList_Size(seq)
    } else {
        ffi::PyTuple_Size(seq)
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
        last_index: Option<u32>,
        seen_other: bool,
        mark: Mark,
    },
    /// A dict whose array-index keys must move first.
    Sorted {
        members: Vec<(Text, *mut ffi::PyObject)>,
        order: std::vec::IntoIter<usize>,
        first: bool,
    },
}

/// The members of a dict, for writing in JS key order.
///
/// # Safety
/// `dict` must be a live dict and the GIL held.
#[cold]
#[inline(never)]
unsafe fn sorted_dict(py: Python<'_>, dict: *mut ffi::PyObject) -> PyResult<Open> {
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

/// Writes the `JSON.stringify` text of a Python value.
///
/// The walk holds only borrowed references: it runs no Python code, so the containers
/// cannot change under it.
///
/// # Safety
/// `root` must be a live object and the GIL held.
unsafe fn encode(py: Python<'_>, w: &mut JsonWriter, root: *mut ffi::PyObject) -> PyResult<()> {
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
                        last_index: None,
                        seen_other: false,
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
                last_index,
                seen_other,
                mark,
            } => {
                let (mut key, mut value) = (ptr::null_mut(), ptr::null_mut());
                if ffi::PyDict_Next(*dict, pos, &mut key, &mut value) == 0 {
                    w.end_object(*first);
                    stack.pop();
                    continue;
                }
                let text = read_key(py, key)?;
                let in_order = match text.array_index() {
                    Some(i) if *seen_other || last_index.is_some_and(|l| i <= l) => false,
                    Some(i) => {
                        *last_index = Some(i);
                        true
                    }
                    None => {
                        *seen_other = true;
                        true
                    }
                };
                if in_order {
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

/// A container being measured.
enum Counting {
    Seq {
        seq: *mut ffi::PyObject,
        is_list: bool,
        len: ffi::Py_ssize_t,
        next: ffi::Py_ssize_t,
    },
    Dict {
        dict: *mut ffi::PyObject,
        pos: ffi::Py_ssize_t,
        first: bool,
    },
}

/// `JSON.stringify(value).length` of a Python value, without building the text (member
/// order does not change the length).
///
/// # Safety
/// `root` must be a live object and the GIL held.
unsafe fn measure(py: Python<'_>, root: *mut ffi::PyObject) -> PyResult<usize> {
    let mut stack: Vec<Counting> = Vec::new();
    let mut total = 0usize;
    let mut pending = Some(root);
    loop {
        if let Some(obj) = pending.take() {
            total += match kind(obj) {
                Kind::Str => read_text(py, obj)?.escaped_len(),
                Kind::Dict => {
                    check_depth(stack.len())?;
                    stack.push(Counting::Dict {
                        dict: obj,
                        pos: 0,
                        first: true,
                    });
                    2
                }
                kind @ (Kind::List | Kind::Tuple) => {
                    check_depth(stack.len())?;
                    let is_list = matches!(kind, Kind::List);
                    stack.push(Counting::Seq {
                        seq: obj,
                        is_list,
                        len: seq_len(obj, is_list),
                        next: 0,
                    });
                    2
                }
                Kind::Int => int_number(py, obj)?.len(),
                Kind::Float => float_number(py, obj)?.len(),
                Kind::Null | Kind::True => 4,
                Kind::False => 5,
                Kind::Other => return Err(unsupported(py, obj)),
            };
        }
        let Some(top) = stack.last_mut() else {
            return Ok(total);
        };
        match top {
            Counting::Seq {
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
                    total += usize::from(*next > 0);
                    *next += 1;
                    pending = Some(item);
                } else {
                    stack.pop();
                }
            }
            Counting::Dict { dict, pos, first } => {
                let (mut key, mut value) = (ptr::null_mut(), ptr::null_mut());
                if ffi::PyDict_Next(*dict, pos, &mut key, &mut value) == 0 {
                    stack.pop();
                } else {
                    total += usize::from(!*first) + read_key(py, key)?.escaped_len() + 1;
                    *first = false;
                    pending = Some(value);
                }
            }
        }
    }
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
    let mut w = JsonWriter::from_buffer(indent_width(indent), BUFFER.with(Cell::take));
    // SAFETY: `value` is alive for the call and the GIL is held.
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

/// `JSON.stringify(value).length` in UTF-16 code units, without building the text.
#[pyfunction]
fn stringify_len(value: &Bound<'_, PyAny>) -> PyResult<usize> {
    // SAFETY: `value` is alive for the call and the GIL is held.
    unsafe { measure(value.py(), value.as_ptr()) }
}

/// JS `s.length`: UTF-16 code units.
#[pyfunction]
fn utf16_len(s: &Bound<'_, PyString>) -> PyResult<usize> {
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
/// else both forms are syntax errors. `Err(offset)` for a lone surrogate that follows a
/// backslash (an invalid escape either way).
fn escape_lone_surrogates(units: &[u16]) -> Result<String, usize> {
    let mut text = String::with_capacity(units.len());
    for (i, decoded) in char::decode_utf16(units.iter().copied()).enumerate() {
        match decoded {
            Ok(c) => text.push(c),
            Err(lone) => {
                let backslashes = text.bytes().rev().take_while(|&b| b == b'\\').count();
                if backslashes % 2 == 1 {
                    return Err(i);
                }
                text.push_str(&format!("\\u{:04x}", lone.unpaired_surrogate()));
            }
        }
    }
    Ok(text)
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
        TextRef::Units(units) => match escape_lone_surrogates(units) {
            Ok(s) => {
                escaped = s;
                escaped.as_str()
            }
            Err(at) => {
                return Err(json_error(
                    py,
                    format!("Bad escaped character in JSON (char {at})"),
                ))
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

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(stringify, m)?)?;
    m.add_function(wrap_pyfunction!(stringify_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(stringify_len, m)?)?;
    m.add_function(wrap_pyfunction!(utf16_len, m)?)?;
    m.add_function(wrap_pyfunction!(utf8_len, m)?)?;
    m.add_function(wrap_pyfunction!(reformat_json, m)?)?;
    Ok(())
}

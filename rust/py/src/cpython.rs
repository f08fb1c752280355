//! The one place that reads CPython objects directly, outside the limited API.
//!
//! The module is an abi3 wheel: everything else goes through the stable C API. Two reads
//! are done in place because their API calls cost more than the reads in the hot loops
//! (tens of thousands of short ASCII strings and list items per render):
//!
//! - the characters of an exact, compact ASCII `str` ([`str_utf8`]), and of any exact,
//!   compact `str` as the 1, 2 or 4-byte code points CPython keeps ([`str_chars`]: measured
//!   without asking CPython for a UTF-8 copy, which it would make and keep on the string);
//! - the item array of an exact `list` ([`list_items`]);
//!
//! and [`prefetch_body`] reads one pointer of a dict or list as a cache hint.
//!
//! They are used only on interpreters whose layout is known - CPython 3.9-3.14, 64-bit,
//! with the GIL (free-threaded builds, PyPy, GraalPy and 32-bit builds are refused
//! explicitly) - and only after reading back known objects correctly at import
//! ([`init`]). Setting `PI_CONDENSE_LAYOUT=off` in the environment before the module is
//! imported turns them all off (tests run that way too). Off, every read goes through the
//! C API: results are identical, only slower. [`features`] reports what is on.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

use std::ptr::addr_of_mut;
use std::sync::OnceLock;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};

type Obj = *mut ffi::PyObject;

// Part of the stable ABI since 3.10 (the wheel's floor is 3.11), so pyo3's declaration is
// the one to use. Windows still takes the PyUnicode_AsUTF8String path (json.rs), as before.
#[cfg(not(windows))]
pub(crate) use pyo3::ffi::PyUnicode_AsUTF8AndSize;

/// The environment variable that turns the layout reads off (`off`), read at import.
pub const LAYOUT_ENV: &str = "PI_CONDENSE_LAYOUT";

/// What this interpreter lets the module read in place.
pub(crate) struct Layout {
    /// Offset of the characters of a compact ASCII str (0: use the API).
    ascii_data: usize,
    /// Offset of the code points of a compact non-ASCII str (0: use the API).
    compact_data: usize,
    /// `PyListObject.ob_item` follows the variable-size header (else use the API).
    list_items: bool,
    /// The dict and list pointers [`prefetch_body`] reads are where it reads them.
    prefetch: bool,
}

/// `PyASCIIObject.length`, `.state` (bit 5 `compact`, bit 6 `ascii`), `PyVarObject.ob_size`
/// and `PyListObject.ob_item` offsets (64-bit CPython 3.9-3.14).
const STR_LENGTH_AT: usize = 16;
const STR_STATE_AT: usize = 32;
const STR_COMPACT_ASCII: u32 = 0b110_0000;
const STR_COMPACT: u32 = 0b010_0000;
/// `.state` bits 2-4: bytes per code point (1, 2 or 4).
const STR_KIND_SHIFT: u32 = 2;
const STR_KIND_MASK: u32 = 0b111;
const VAR_SIZE_AT: usize = 16;
const LIST_ITEMS_AT: usize = 24;
/// `PyDictObject.ma_keys` and `PyListObject.ob_item`, in pointer-sized words.
const DICT_KEYS_WORD: usize = 4;
const LIST_ITEMS_WORD: usize = 3;

static LAYOUT: OnceLock<Layout> = OnceLock::new();

const OFF: Layout = Layout {
    ascii_data: 0,
    compact_data: 0,
    list_items: false,
    prefetch: false,
};

/// Verifies the layout (at import, while no object is borrowed: the checks run Python).
///
/// The calibration runs outside the cell: it imports modules, which may let another thread
/// take the GIL, and a thread blocked on the cell while holding the GIL would deadlock with
/// it. Concurrent first calls each calibrate; the first result is kept.
pub fn init(py: Python<'_>) {
    if LAYOUT.get().is_none() {
        let _ = LAYOUT.set(calibrate(py));
    }
}

impl Layout {
    /// The verified layout ([`init`] ran at import; all off if it somehow did not).
    #[inline(always)]
    pub(crate) fn get() -> &'static Layout {
        LAYOUT.get().unwrap_or(&OFF)
    }
}

/// All off, for the reason given (documentation only: the interpreter is refused).
fn refused(_reason: &'static str) -> Layout {
    OFF
}

#[cold]
fn calibrate(py: Python<'_>) -> Layout {
    if std::env::var(LAYOUT_ENV).is_ok_and(|v| v.eq_ignore_ascii_case("off")) {
        return refused("PI_CONDENSE_LAYOUT=off");
    }
    if !cfg!(target_pointer_width = "64") {
        return refused("not a 64-bit build");
    }
    let implementation = py.import("sys").and_then(|sys| {
        sys.getattr("implementation")?
            .getattr("name")?
            .extract::<String>()
    });
    if !implementation.is_ok_and(|name| name == "cpython") {
        return refused("not CPython (PyPy, GraalPy, ...)");
    }
    let free_threaded = py
        .import("sysconfig")
        .and_then(|s| s.call_method1("get_config_var", ("Py_GIL_DISABLED",)))
        .map(|v| v.is_truthy().unwrap_or(true))
        .unwrap_or(true);
    if free_threaded {
        return refused("a free-threaded build (Py_GIL_DISABLED)");
    }
    let version = py.version_info();
    if version.major != 3 || !(9..=14).contains(&version.minor) {
        return refused("a CPython version whose layout is not known (3.9-3.14 are)");
    }
    // `sizeof(PyASCIIObject)` and `sizeof(PyCompactUnicodeObject)`: 3.12 dropped `wstr` and
    // `wstr_length`.
    let (ascii_data, compact_data) = if version.minor <= 11 {
        (48, 72)
    } else {
        (40, 56)
    };
    let ascii_ok = ascii_layout_reads_back(py, ascii_data);
    let compact_ok = ascii_ok && compact_layout_reads_back(py, compact_data);
    let list_ok = list_layout_reads_back(py);
    Layout {
        ascii_data: if ascii_ok { ascii_data } else { 0 },
        compact_data: if compact_ok { compact_data } else { 0 },
        list_items: list_ok,
        prefetch: list_ok,
    }
}

/// Whether compact ASCII strs read back at `ascii_data` (and others are not compact ASCII).
fn ascii_layout_reads_back(py: Python<'_>, ascii_data: usize) -> bool {
    let ascii = ["", "a", "toolResult", &"x".repeat(100)]
        .iter()
        .all(|sample| {
            let obj = PyString::new(py, sample);
            let ptr = obj.as_ptr().cast::<u8>();
            // SAFETY: `obj` is alive (owned here) and the GIL held; a str of this CPython
            // version is larger than the header words read, and a compact ASCII one holds
            // `length + 1` bytes at `ascii_data` (read only once the state says so).
            unsafe {
                str_header(ascii_data, obj.as_ptr()).is_some_and(|(state, length)| {
                    state & STR_COMPACT_ASCII == STR_COMPACT_ASCII
                        && length == sample.len()
                        && std::slice::from_raw_parts(ptr.add(ascii_data), sample.len() + 1)
                            == [sample.as_bytes(), &[0]].concat().as_slice()
                })
            }
        });
    ascii
        && ["\u{e9}", "\u{100}", "\u{1f600}"].iter().all(|sample| {
            let obj = PyString::new(py, sample);
            // SAFETY: as above (the state word is inside every str's header).
            let state = unsafe {
                obj.as_ptr()
                    .cast::<u8>()
                    .add(STR_STATE_AT)
                    .cast::<u32>()
                    .read_unaligned()
            };
            state & STR_COMPACT_ASCII != STR_COMPACT_ASCII
        })
}

/// Whether compact strs of each width read back at `compact_data`: state (compact, not
/// ASCII, the width), length, every code point and the terminating zero.
fn compact_layout_reads_back(py: Python<'_>, compact_data: usize) -> bool {
    let samples: [(&str, u32); 6] = [
        ("\u{e9}", 1),
        ("caf\u{e9} \u{ff}\"\n", 1),
        ("\u{100}", 2),
        ("a\u{2500}\u{ffff}b", 2),
        ("\u{1f600}", 4),
        ("x\u{e9}\u{2500}\u{10ffff}", 4),
    ];
    samples.iter().all(|&(sample, width)| {
        let obj = PyString::new(py, sample);
        let ptr = obj.as_ptr().cast::<u8>();
        let chars: Vec<u32> = sample.chars().map(u32::from).chain([0]).collect();
        // SAFETY: `obj` is alive (owned here) and the GIL held; the header words read are
        // inside every str of this CPython version, and the code points are read (length + 1
        // of them, `width` bytes each) only once the state says the str is compact, not ASCII
        // and of that width, and the length read back as the sample's.
        unsafe {
            let Some((state, length)) = str_header(compact_data, obj.as_ptr()) else {
                return false;
            };
            if state & STR_COMPACT_ASCII != STR_COMPACT
                || (state >> STR_KIND_SHIFT) & STR_KIND_MASK != width
                || length != chars.len() - 1
            {
                return false;
            }
            let data = ptr.add(compact_data);
            chars.iter().enumerate().all(|(i, &c)| match width {
                1 => u32::from(data.add(i).read()) == c,
                2 => u32::from(data.cast::<u16>().add(i).read_unaligned()) == c,
                _ => data.cast::<u32>().add(i).read_unaligned() == c,
            })
        }
    })
}

/// Whether a list's size and item array read back where [`list_items`] reads them.
fn list_layout_reads_back(py: Python<'_>) -> bool {
    PyList::new(py, [1, 2, 3]).is_ok_and(|list| {
        let ptr = list.as_ptr();
        // SAFETY: `list` is alive (owned here) and the GIL held; a list object of this
        // CPython version is larger than the two header words read, and the item array is
        // read (3 items) only once the size read back as 3 and the pointer as non-null.
        unsafe {
            let size = ptr
                .cast::<u8>()
                .add(VAR_SIZE_AT)
                .cast::<ffi::Py_ssize_t>()
                .read_unaligned();
            let items = ptr
                .cast::<u8>()
                .add(LIST_ITEMS_AT)
                .cast::<*const Obj>()
                .read_unaligned();
            size == 3
                && !items.is_null()
                && (0..3).all(|i| *items.add(i) == ffi::PyList_GetItem(ptr, i as ffi::Py_ssize_t))
        }
    })
}

/// The `state` word and the length of an exact str, when `data_at` (the offset of the
/// characters the caller reads) is verified for this interpreter (not 0).
///
/// # Safety
/// `obj` must be a live object and the GIL held.
#[inline(always)]
unsafe fn str_header(data_at: usize, obj: Obj) -> Option<(u32, usize)> {
    // SAFETY: `obj` is live (the caller's contract): its header can be read.
    if data_at == 0 || unsafe { ffi::Py_TYPE(obj) } != addr_of_mut!(ffi::PyUnicode_Type) {
        return None;
    }
    let ptr = obj.cast::<u8>();
    // SAFETY: `obj` is an exact str of the verified layout: `state` and `length` are inside
    // its header.
    let (state, length) = unsafe {
        (
            ptr.add(STR_STATE_AT).cast::<u32>().read_unaligned(),
            ptr.add(STR_LENGTH_AT)
                .cast::<ffi::Py_ssize_t>()
                .read_unaligned(),
        )
    };
    Some((state, usize::try_from(length).ok()?))
}

/// The characters of an exact, compact ASCII str, read in place.
///
/// # Safety
/// `obj` must be a live object and the GIL held; the text lives as long as `obj`.
#[inline(always)]
unsafe fn ascii_text<'a>(layout: &Layout, obj: Obj) -> Option<&'a str> {
    // SAFETY: the caller's contract.
    let (state, length) = unsafe { str_header(layout.ascii_data, obj) }?;
    if state & STR_COMPACT_ASCII != STR_COMPACT_ASCII {
        return None;
    }
    // SAFETY: the state says compact ASCII, of the verified layout.
    Some(unsafe { ascii_chars(layout, obj, length) })
}

/// The `length` characters of a compact ASCII str.
///
/// # Safety
/// `obj` must be a live, exact, compact ASCII str of `length` characters, of the verified
/// layout (`ascii_data` not 0), and the GIL held; the text lives as long as `obj`.
#[inline(always)]
unsafe fn ascii_chars<'a>(layout: &Layout, obj: Obj, length: usize) -> &'a str {
    // SAFETY: such a str holds `length` bytes at `ascii_data`, alive as long as the
    // (immutable) str (the caller's contract); ASCII is valid UTF-8.
    unsafe {
        let bytes = std::slice::from_raw_parts(obj.cast::<u8>().add(layout.ascii_data), length);
        std::str::from_utf8_unchecked(bytes)
    }
}

/// The characters of a str as CPython keeps them.
pub enum StrChars<'a> {
    Ascii(&'a str),
    Latin1(&'a [u8]),
    /// Basic Multilingual Plane code points (surrogate code points possible).
    Bmp(&'a [u16]),
    /// Any code points (surrogate code points possible).
    CodePoints(&'a [u32]),
}

/// The characters of an exact, compact str, read in place (`None`: read it through the API).
///
/// # Safety
/// `obj` must be a live object and the GIL held; the characters live as long as `obj`.
#[inline(always)]
pub unsafe fn str_chars<'a>(obj: Obj) -> Option<StrChars<'a>> {
    let layout = Layout::get();
    // SAFETY: the caller's contract.
    let (state, length) = unsafe { str_header(layout.ascii_data, obj) }?;
    if state & STR_COMPACT_ASCII == STR_COMPACT_ASCII {
        // SAFETY: the state says compact ASCII, of the verified layout.
        return Some(StrChars::Ascii(unsafe { ascii_chars(layout, obj, length) }));
    }
    if layout.compact_data == 0 || state & STR_COMPACT_ASCII != STR_COMPACT {
        return None;
    }
    let data = obj.cast::<u8>().wrapping_add(layout.compact_data);
    // SAFETY: a compact non-ASCII str of the verified layout holds `length` code points of
    // the width its state gives at `compact_data`, alive as long as the (immutable) str. Each
    // slice is made only when the data is aligned for its width (CPython allocates objects
    // aligned, so it always is).
    unsafe {
        match (state >> STR_KIND_SHIFT) & STR_KIND_MASK {
            1 => Some(StrChars::Latin1(std::slice::from_raw_parts(data, length))),
            2 if data as usize & 1 == 0 => Some(StrChars::Bmp(std::slice::from_raw_parts(
                data.cast::<u16>(),
                length,
            ))),
            4 if data as usize & 3 == 0 => Some(StrChars::CodePoints(std::slice::from_raw_parts(
                data.cast::<u32>(),
                length,
            ))),
            _ => None,
        }
    }
}

/// The items of an exact list, read in place (`None`: use `PyList_GetItem`).
///
/// # Safety
/// `list` must be a live object and the GIL held; the slice is valid while the list is
/// neither changed nor freed (no Python code may run meanwhile).
#[inline(always)]
pub unsafe fn list_items<'a>(list: Obj) -> Option<&'a [Obj]> {
    // SAFETY: `list` is live (the caller's contract): its header can be read.
    if !Layout::get().list_items || unsafe { ffi::Py_TYPE(list) } != addr_of_mut!(ffi::PyList_Type)
    {
        return None;
    }
    let ptr = list.cast::<u8>();
    // SAFETY: `list` is an exact list of the verified layout: `ob_size` and `ob_item`
    // are inside its header.
    let (size, items) = unsafe {
        (
            ptr.add(VAR_SIZE_AT)
                .cast::<ffi::Py_ssize_t>()
                .read_unaligned(),
            ptr.add(LIST_ITEMS_AT).cast::<*const Obj>().read_unaligned(),
        )
    };
    let len = usize::try_from(size).ok()?;
    if len == 0 {
        return Some(&[]);
    }
    if items.is_null() {
        return None;
    }
    // SAFETY: `ob_item` holds `ob_size` item pointers while the list is unchanged.
    Some(unsafe { std::slice::from_raw_parts(items, len) })
}

/// The UTF-8 text of a `str` (or str subclass) object, borrowed from the object, when
/// CPython can hand it out without a copy; `None` otherwise (a string holding lone
/// surrogates, or a platform without the call), with no Python error left set. Runs no
/// Python code.
///
/// # Safety
/// `obj` must be a live `str` object and the GIL held; the text is valid while `obj` is
/// alive (the caller picks `'a` accordingly).
#[inline]
pub unsafe fn str_utf8<'a>(obj: Obj) -> Option<&'a str> {
    // SAFETY: the caller's contract.
    if let Some(text) = unsafe { ascii_text(Layout::get(), obj) } {
        return Some(text);
    }
    // SAFETY: the caller's contract.
    unsafe { str_utf8_api(obj) }
}

/// [`str_utf8`] through the C API.
///
/// # Safety
/// As [`str_utf8`].
unsafe fn str_utf8_api<'a>(obj: Obj) -> Option<&'a str> {
    #[cfg(not(windows))]
    {
        let mut size: ffi::Py_ssize_t = 0;
        // SAFETY: `obj` is a live str and the GIL held; the UTF-8 CPython hands out
        // lives as long as the str.
        unsafe {
            let data = PyUnicode_AsUTF8AndSize(obj, &mut size);
            if data.is_null() {
                ffi::PyErr_Clear();
                return None;
            }
            let bytes = std::slice::from_raw_parts(data.cast::<u8>(), usize::try_from(size).ok()?);
            // CPython's UTF-8 form of a str is valid UTF-8.
            Some(std::str::from_utf8_unchecked(bytes))
        }
    }
    #[cfg(windows)]
    {
        let _ = obj;
        None
    }
}

/// Hints the CPU to load the cache line at `addr`.
#[inline(always)]
pub(crate) fn prefetch<T>(addr: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(addr.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = addr;
}

/// Hints the CPU to load what a walk reads next from an object whose header is (about
/// to be) cached: the hash table of a dict, the item array of a list, the second line of
/// a str. A hint only, and only where the layout is verified (`PyDictObject.ma_keys` and
/// `PyListObject.ob_item` are where CPython 3.9-3.14 put them).
///
/// # Safety
/// `obj` must be a live object and the GIL held.
#[inline(always)]
pub(crate) unsafe fn prefetch_body(obj: Obj) {
    if !Layout::get().prefetch {
        return;
    }
    // SAFETY: `obj` is live (the caller's contract): its header can be read.
    let ty = unsafe { ffi::Py_TYPE(obj) };
    if ty == addr_of_mut!(ffi::PyUnicode_Type) {
        prefetch(obj.cast::<u8>().wrapping_add(64));
    } else if ty == addr_of_mut!(ffi::PyDict_Type) {
        // SAFETY: an exact dict of the verified layout is larger than the words read.
        let table = unsafe { obj.cast::<*const u8>().add(DICT_KEYS_WORD).read() };
        prefetch(table);
        prefetch(table.wrapping_add(64));
        prefetch(table.wrapping_add(128));
    } else if ty == addr_of_mut!(ffi::PyList_Type) {
        // SAFETY: an exact list of the verified layout is larger than the words read.
        prefetch(unsafe { obj.cast::<*const u8>().add(LIST_ITEMS_WORD).read() });
    }
}

/// Which layout reads are on (diagnostics and tests): `ascii_text`, `str_chars`,
/// `list_items`, `prefetch`.
pub fn features(py: Python<'_>) -> PyResult<Bound<'_, pyo3::types::PyDict>> {
    let layout = Layout::get();
    let features = pyo3::types::PyDict::new(py);
    features.set_item("ascii_text", layout.ascii_data != 0)?;
    features.set_item("str_chars", layout.compact_data != 0)?;
    features.set_item("list_items", layout.list_items)?;
    features.set_item("prefetch", layout.prefetch)?;
    Ok(features)
}

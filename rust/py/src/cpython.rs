//! The one place that reads CPython objects directly, outside the limited API.
//!
//! The module is an abi3 wheel: everything else goes through the stable C API. Two reads
//! are done in place because their API calls cost more than the reads in the hot loops
//! (tens of thousands of short ASCII strings and list items per render):
//!
//! - the characters of an exact, compact ASCII `str` ([`str_utf8`]);
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
const VAR_SIZE_AT: usize = 16;
const LIST_ITEMS_AT: usize = 24;
/// `PyDictObject.ma_keys` and `PyListObject.ob_item`, in pointer-sized words.
const DICT_KEYS_WORD: usize = 4;
const LIST_ITEMS_WORD: usize = 3;

static LAYOUT: OnceLock<Layout> = OnceLock::new();

const OFF: Layout = Layout {
    ascii_data: 0,
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
    let ascii_data = if version.minor <= 11 { 48 } else { 40 };
    let ascii_ok = ascii_layout_reads_back(py, ascii_data);
    let list_ok = list_layout_reads_back(py);
    Layout {
        ascii_data: if ascii_ok { ascii_data } else { 0 },
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
                let state = ptr.add(STR_STATE_AT).cast::<u32>().read_unaligned();
                let length = ptr
                    .add(STR_LENGTH_AT)
                    .cast::<ffi::Py_ssize_t>()
                    .read_unaligned();
                state & STR_COMPACT_ASCII == STR_COMPACT_ASCII
                    && usize::try_from(length).ok() == Some(sample.len())
                    && std::slice::from_raw_parts(ptr.add(ascii_data), sample.len() + 1)
                        == [sample.as_bytes(), &[0]].concat().as_slice()
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

/// The characters of an exact, compact ASCII str, read in place.
///
/// # Safety
/// `obj` must be a live object and the GIL held; the text lives as long as `obj`.
#[inline(always)]
unsafe fn ascii_text<'a>(layout: &Layout, obj: Obj) -> Option<&'a str> {
    // SAFETY: `obj` is live (the caller's contract): its header can be read.
    if layout.ascii_data == 0 || unsafe { ffi::Py_TYPE(obj) } != addr_of_mut!(ffi::PyUnicode_Type) {
        return None;
    }
    let ptr = obj.cast::<u8>();
    // SAFETY: `obj` is an exact str of the verified layout: `state` and `length` are
    // inside its header, and a compact ASCII str holds `length` bytes at `ascii_data`,
    // alive as long as the (immutable) str.
    unsafe {
        let state = ptr.add(STR_STATE_AT).cast::<u32>().read_unaligned();
        if state & STR_COMPACT_ASCII != STR_COMPACT_ASCII {
            return None;
        }
        let length = ptr
            .add(STR_LENGTH_AT)
            .cast::<ffi::Py_ssize_t>()
            .read_unaligned();
        let bytes =
            std::slice::from_raw_parts(ptr.add(layout.ascii_data), usize::try_from(length).ok()?);
        // ASCII is valid UTF-8.
        Some(std::str::from_utf8_unchecked(bytes))
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

/// Which layout reads are on (diagnostics and tests): `ascii_text`, `list_items`,
/// `prefetch`.
pub fn features(py: Python<'_>) -> PyResult<Bound<'_, pyo3::types::PyDict>> {
    let layout = Layout::get();
    let features = pyo3::types::PyDict::new(py);
    features.set_item("ascii_text", layout.ascii_data != 0)?;
    features.set_item("list_items", layout.list_items)?;
    features.set_item("prefetch", layout.prefetch)?;
    Ok(features)
}

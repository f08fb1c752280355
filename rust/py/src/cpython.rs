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
//! - the entries of an exact `dict` with a combined table ([`DictMembers`]: a member costs a
//!   `PyDict_Next` call through the stable ABI otherwise, the most frequent call of a walk);
//!
//! and [`prefetch_body`] reads one pointer of a dict or list as a cache hint.
//!
//! They are used only on interpreters whose layout is known - CPython 3.11-3.14 (the wheel's
//! floor is 3.11; the checks below also know 3.9 and 3.10), 64-bit,
//! with the GIL (free-threaded builds, PyPy, GraalPy and 32-bit builds are refused
//! explicitly) - and only after reading back known objects correctly at import
//! ([`init`]). Setting `PI_CONDENSE_LAYOUT=off` in the environment before the module is
//! imported turns them all off (tests run that way too). Off, every read goes through the
//! C API: results are identical, only slower. [`features`] reports what is on.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]
#![deny(clippy::multiple_unsafe_ops_per_block)]

use std::ptr::addr_of_mut;
use std::sync::OnceLock;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyDictMethods, PyList, PySlice, PyString};

/// A borrowed reference to a Python object: the address of an object that something else
/// owns (the container it was read from, the native call's owned root, an interpreter-long
/// cache), valid only while that owner is alive and unchanged and the GIL is held (the
/// borrow rule, `lib.rs`). Copying one takes no reference, dropping one releases none.
///
/// Nothing is read through it without `unsafe`: each read says in its `SAFETY` comment
/// what keeps the object alive. It costs what a `*mut ffi::PyObject` costs
/// (`#[repr(transparent)]`: an item array of a list is a `[Obj]`), and it is neither `Send`
/// nor `Sync` (a borrow is only good on the thread that holds the GIL).
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Obj(*mut ffi::PyObject);

impl Obj {
    /// The object at `ptr`, borrowed (nothing is read here).
    #[inline(always)]
    pub const fn from_ptr(ptr: *mut ffi::PyObject) -> Self {
        Obj(ptr)
    }

    /// The object an owned reference holds, borrowed (alive while `bound` is).
    #[inline(always)]
    pub fn of<T>(bound: &Bound<'_, T>) -> Self {
        Obj(bound.as_ptr())
    }

    /// The raw pointer, for a C API call.
    #[inline(always)]
    pub const fn as_ptr(self) -> *mut ffi::PyObject {
        self.0
    }

    /// The object's address (identity keys of the caches; tagged words of the size memo).
    #[inline(always)]
    pub fn addr(self) -> usize {
        self.0 as usize
    }

    /// The object at address `addr` (one [`Obj::addr`] gave), borrowed.
    #[inline(always)]
    pub fn from_addr(addr: usize) -> Self {
        Obj(addr as *mut ffi::PyObject)
    }

    /// Whether this is the object at `ptr` (identity: nothing is read).
    #[inline(always)]
    pub fn is(self, ptr: *mut ffi::PyObject) -> bool {
        self.0 == ptr
    }

    /// Whether the pointer is null (no object).
    #[inline(always)]
    pub fn is_null(self) -> bool {
        self.0.is_null()
    }

    /// The object's memory, for the layout reads of this module.
    #[inline(always)]
    fn bytes(self) -> *const u8 {
        self.0.cast::<u8>()
    }
}

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
    /// Combined dict tables read in place ([`DictMembers`]).
    dict_entries: bool,
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
/// The `T` stored `offset` bytes into the memory at `base` (read unaligned).
///
/// # Safety
/// The `size_of::<T>()` bytes at `base + offset` must lie inside one live allocation (an
/// object, or memory it owns, kept alive by its owner), and the GIL be held.
#[inline(always)]
unsafe fn read_at<T>(base: *const u8, offset: usize) -> T {
    // SAFETY: `base + offset` is inside the allocation `# Safety` names, which its owner
    // keeps alive.
    let at = unsafe { base.add(offset) };
    // SAFETY: so are the `size_of::<T>()` bytes from there, in the same live allocation.
    unsafe { at.cast::<T>().read_unaligned() }
}

/// The `len` bytes at `offset` into the memory at `base`, borrowed for `'a`.
///
/// # Safety
/// Those bytes must lie inside one allocation that stays alive and unchanged for `'a` (an
/// immutable str, kept alive by the call's owned root: the borrow rule, `lib.rs`).
#[inline(always)]
unsafe fn bytes_at<'a>(base: *const u8, offset: usize, len: usize) -> &'a [u8] {
    // SAFETY: `base + offset` is inside the str `# Safety` names, which the call's owned
    // root keeps alive.
    let at = unsafe { base.add(offset) };
    // SAFETY: `len` bytes from there are inside it, alive and unchanged for `'a`.
    unsafe { std::slice::from_raw_parts(at, len) }
}

/// `PyDictObject.ma_keys` and `.ma_values` (null: a combined table), and in the keys object
/// (`PyDictKeysObject`) `dk_log2_index_bytes`, `dk_kind`, `dk_nentries` and `dk_indices`,
/// after which the entries follow (64-bit CPython 3.11-3.14 with the GIL).
const DICT_KEYS_AT: usize = 32;
const DICT_VALUES_AT: usize = 40;
const KEYS_LOG2_INDEX_BYTES_AT: usize = 9;
const KEYS_KIND_AT: usize = 10;
const KEYS_NENTRIES_AT: usize = 24;
const KEYS_INDICES_AT: usize = 32;
/// `dk_kind` of a table of str keys only (entries: key, value) and of any keys (entries:
/// hash, key, value); split tables (2) are walked through the API.
const KEYS_GENERAL: u8 = 0;
const KEYS_UNICODE: u8 = 1;

static LAYOUT: OnceLock<Layout> = OnceLock::new();

const OFF: Layout = Layout {
    ascii_data: 0,
    compact_data: 0,
    list_items: false,
    prefetch: false,
    dict_entries: false,
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
    let dict_ok = version.minor >= 11 && dict_layout_reads_back(py);
    Layout {
        ascii_data: if ascii_ok { ascii_data } else { 0 },
        compact_data: if compact_ok { compact_data } else { 0 },
        list_items: list_ok,
        prefetch: list_ok,
        dict_entries: dict_ok,
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
            // version is larger than the header words read.
            let header = unsafe { str_header(ascii_data, Obj::of(&obj)) };
            header.is_some_and(|(state, length)| {
                state & STR_COMPACT_ASCII == STR_COMPACT_ASCII
                    && length == sample.len()
                    // SAFETY: a compact ASCII str (its state says so) of this length holds
                    // `length + 1` bytes at `ascii_data`; `obj` (owned here) keeps them.
                    && unsafe { bytes_at(ptr, ascii_data, sample.len() + 1) }
                        == [sample.as_bytes(), &[0]].concat().as_slice()
            })
        });
    ascii
        && ["\u{e9}", "\u{100}", "\u{1f600}"].iter().all(|sample| {
            let obj = PyString::new(py, sample);
            // SAFETY: as above (the state word is inside every str's header; `obj` is owned
            // here).
            let state: u32 = unsafe { read_at(obj.as_ptr().cast::<u8>(), STR_STATE_AT) };
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
        // inside every str of this CPython version.
        let Some((state, length)) = (unsafe { str_header(compact_data, Obj::of(&obj)) }) else {
            return false;
        };
        if state & STR_COMPACT_ASCII != STR_COMPACT
            || (state >> STR_KIND_SHIFT) & STR_KIND_MASK != width
            || length != chars.len() - 1
        {
            return false;
        }
        // The code points are read (length + 1 of them, `width` bytes each) only now that the
        // state says the str is compact, not ASCII and of that width, and the length read
        // back as the sample's; `obj` (owned here) keeps them.
        chars.iter().enumerate().all(|(i, &c)| {
            let at = compact_data + i * width as usize;
            let read = match width {
                // SAFETY: code point `i` of a 1-byte str (see above).
                1 => u32::from(unsafe { read_at::<u8>(ptr, at) }),
                // SAFETY: code point `i` of a 2-byte str (see above).
                2 => u32::from(unsafe { read_at::<u16>(ptr, at) }),
                // SAFETY: code point `i` of a 4-byte str (see above).
                _ => unsafe { read_at::<u32>(ptr, at) },
            };
            read == c
        })
    })
}

/// Whether a list's size and item array read back where [`list_items`] reads them.
fn list_layout_reads_back(py: Python<'_>) -> bool {
    PyList::new(py, [1, 2, 3]).is_ok_and(|list| {
        let ptr = list.as_ptr();
        // SAFETY: `list` is alive (owned here) and the GIL held; a list object of this
        // CPython version is larger than the two header words read.
        let size: ffi::Py_ssize_t = unsafe { read_at(ptr.cast::<u8>(), VAR_SIZE_AT) };
        // SAFETY: as above.
        let items: *const Obj = unsafe { read_at(ptr.cast::<u8>(), LIST_ITEMS_AT) };
        size == 3
            && !items.is_null()
            && (0..3).all(|i| {
                // SAFETY: the size read back as 3 and the array pointer as non-null: item `i`
                // of the array `list` (owned here) holds.
                let in_place: Obj = unsafe { read_at(items.cast::<u8>(), i * size_of::<Obj>()) };
                // SAFETY: `list` is a live list and `i` in range; a borrowed item comes back.
                in_place == unsafe { Obj::from_ptr(ffi::PyList_GetItem(ptr, i as ffi::Py_ssize_t)) }
            })
    })
}

/// Whether the members of dicts of every kind a walk meets - empty, str keys only, other
/// keys, with deleted entries, with 1 and 2-byte indices - read back in place as
/// `PyDict_Next` gives them, and a split table (an instance's `__dict__`) is not read in
/// place unless it reads back too.
fn dict_layout_reads_back(py: Python<'_>) -> bool {
    let build = || -> PyResult<Vec<Bound<'_, PyDict>>> {
        let mut dicts = vec![PyDict::new(py)];
        for (size, str_keys, deleted) in [
            (1usize, true, 0usize),
            (5, true, 0),
            (12, true, 4),
            (300, true, 0),
            (300, true, 150),
            (3, false, 0),
            (300, false, 0),
            (40, false, 9),
        ] {
            let dict = PyDict::new(py);
            for i in 0..size {
                if str_keys || i % 3 != 0 {
                    dict.set_item(format!("key{i}"), i)?;
                } else {
                    dict.set_item(i, format!("value{i}"))?;
                }
            }
            for i in (0..size).step_by(2).take(deleted) {
                if str_keys || i % 3 != 0 {
                    dict.del_item(format!("key{i}"))?;
                } else {
                    dict.del_item(i)?;
                }
            }
            dicts.push(dict);
        }
        Ok(dicts)
    };
    let split = || -> PyResult<Bound<'_, PyDict>> {
        let instance = py.eval(c"type('Split', (), {})()", None, None)?;
        instance.setattr("a", 1)?;
        instance.setattr("b", "x")?;
        Ok(instance.getattr("__dict__")?.downcast_into::<PyDict>()?)
    };
    let (Ok(dicts), Ok(split)) = (build(), split()) else {
        return false;
    };
    let reads_back = |dict: &Bound<'_, PyDict>, combined: bool| {
        let ptr = dict.as_ptr();
        // SAFETY: `dict` is alive (owned here) and the GIL is held; on a 64-bit CPython
        // 3.11-3.14 with the GIL (`init` checked) its header has the layout read.
        let Some(table) = (unsafe { combined_table(Obj::from_ptr(ptr)) }) else {
            return !combined;
        };
        let mut through_api = Vec::new();
        let (mut pos, mut key, mut value) = (0, std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: `dict` is a live dict (owned here) and the GIL is held; the members come
        // back borrowed, held by the dict, which nothing changes while both walks run.
        while unsafe { ffi::PyDict_Next(ptr, &mut pos, &mut key, &mut value) } != 0 {
            through_api.push((Obj::from_ptr(key), Obj::from_ptr(value)));
        }
        // SAFETY: as above; `table` is this dict's combined table.
        let in_place: Vec<(Obj, Obj)> =
            unsafe { DictMembers::with_table(Obj::from_ptr(ptr), 0, Some(table)) }.collect();
        in_place == through_api
    };
    dicts.iter().all(|dict| reads_back(dict, true)) && reads_back(&split, false)
}

/// Where the entries of a dict's combined table are: the first entry's key slot, the
/// entries' stride in words and how many there are (`None`: not an exact dict of a
/// combined table, read through the API).
///
/// # Safety
/// `dict` must be a live object and the GIL held; the layout is the one the constants
/// describe: the caller checked [`Layout::dict_entries`], or is reading back known dicts
/// on a 64-bit CPython 3.11-3.14 with the GIL (whose headers give these offsets).
#[inline(always)]
unsafe fn combined_table(dict: Obj) -> Option<(*const Obj, usize, ffi::Py_ssize_t)> {
    // SAFETY: `dict` is kept alive by its owner (`# Safety` above): its header can be read.
    if unsafe { ffi::Py_TYPE(dict.as_ptr()) } != addr_of_mut!(ffi::PyDict_Type) {
        return None;
    }
    let base = dict.bytes();
    // SAFETY: an exact dict of this layout (`# Safety` above) holds `ma_values` at this
    // offset; `dict`'s owner keeps it alive.
    let values: *const u8 = unsafe { read_at(base, DICT_VALUES_AT) };
    if !values.is_null() {
        return None;
    }
    // SAFETY: and `ma_keys` at this one, which always points to a keys object (the shared
    // empty one for `{}`) the dict keeps alive.
    let table: *const u8 = unsafe { read_at(base, DICT_KEYS_AT) };
    // SAFETY: the keys object's header holds `dk_kind`.
    let kind: u8 = unsafe { read_at(table, KEYS_KIND_AT) };
    // SAFETY: and `dk_log2_index_bytes`.
    let log2_index_bytes = u32::from(unsafe { read_at::<u8>(table, KEYS_LOG2_INDEX_BYTES_AT) });
    if (kind != KEYS_UNICODE && kind != KEYS_GENERAL) || log2_index_bytes > 40 {
        return None;
    }
    let (stride, key_word) = if kind == KEYS_UNICODE { (2, 0) } else { (3, 1) };
    // SAFETY: and `dk_nentries`.
    let count: ffi::Py_ssize_t = unsafe { read_at(table, KEYS_NENTRIES_AT) };
    // SAFETY: the entries follow the indices (`1 << log2_index_bytes` bytes) in the keys
    // object, and an entry's key is `key_word` words into it: inside the keys object (or one
    // past its end for an empty table, never read).
    let first = unsafe {
        table.add(KEYS_INDICES_AT + (1usize << log2_index_bytes) + key_word * size_of::<Obj>())
    };
    Some((first.cast::<Obj>(), stride, count))
}

/// The members of a dict in its order, as `PyDict_Next` hands them out (borrowed): read
/// in place from an exact dict's combined table where the layout is verified, through the
/// API otherwise. The position is `PyDict_Next`'s (one past the entry last handed out), so
/// a walk may stop and resume where it stopped.
pub struct DictMembers {
    dict: Obj,
    /// `PyDict_Next`'s position, for a walk through the API.
    pos: ffi::Py_ssize_t,
    /// For a table read in place (else all null): the key slot of the first entry, of the
    /// next entry to read, and one past the last entry (used or deleted).
    first: *const Obj,
    next: *const Obj,
    end: *const Obj,
    /// Words from one entry to the next.
    stride: usize,
}

impl DictMembers {
    /// The members of `dict` from `pos` (0: the first).
    ///
    /// # Safety
    /// `dict` must be a live dict (or dict subclass) and the GIL held, and no Python code
    /// may run while the walk is used (the dict must not change); `pos` must be 0 or where
    /// an earlier walk of the same, unchanged dict stopped. The members are borrowed from
    /// the dict.
    #[inline(always)]
    pub unsafe fn new(dict: Obj, pos: ffi::Py_ssize_t) -> Self {
        let table = if Layout::get().dict_entries {
            // SAFETY: `dict` is kept alive and unchanged by its owner (`# Safety` above), and
            // the layout is verified.
            unsafe { combined_table(dict) }
        } else {
            None
        };
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe { Self::with_table(dict, pos, table) }
    }

    /// # Safety
    /// As [`DictMembers::new`]; `table` is `combined_table(dict)` of the layout in use, or
    /// `None`.
    #[inline(always)]
    unsafe fn with_table(
        dict: Obj,
        pos: ffi::Py_ssize_t,
        table: Option<(*const Obj, usize, ffi::Py_ssize_t)>,
    ) -> Self {
        let none = std::ptr::null();
        let mut members = DictMembers {
            dict,
            pos,
            first: none,
            next: none,
            end: none,
            stride: 0,
        };
        if let Some((first, stride, count)) = table {
            let count = usize::try_from(count).unwrap_or(0);
            let at = usize::try_from(pos).unwrap_or(0).min(count);
            members.first = first;
            members.stride = stride;
            // SAFETY: the table holds `count` entries of `stride` words from `first` (it is
            // `dict`'s, which its owner keeps alive and unchanged: `# Safety` above): entry
            // `at <= count` is inside it or one past its last entry.
            members.next = unsafe { first.add(at * stride) };
            // SAFETY: as above, one past the last entry.
            members.end = unsafe { first.add(count * stride) };
        }
        members
    }

    /// Calls `f` with each member in turn, until it fails (the in-place or the API walk
    /// chosen once, not per member).
    #[inline(always)]
    pub fn try_each<E>(&mut self, mut f: impl FnMut(Obj, Obj) -> Result<(), E>) -> Result<(), E> {
        if self.first.is_null() {
            for (key, value) in self.by_ref() {
                f(key, value)?;
            }
            return Ok(());
        }
        while let Some((key, value)) = self.next_in_place() {
            f(key, value)?;
        }
        Ok(())
    }

    /// The next member of a table read in place (`first` is not null).
    #[inline(always)]
    fn next_in_place(&mut self) -> Option<(Obj, Obj)> {
        while self.next < self.end {
            let slot = self.next;
            // SAFETY: `slot` is the key slot of one of the table's entries (the table is
            // unchanged, held by the dict, which its owner keeps alive and unchanged while the
            // walk is used: `DictMembers::new`); the
            // step lands on the next entry or one past the last.
            self.next = unsafe { slot.add(self.stride) };
            // SAFETY: the key slot of that entry (see above).
            let key = unsafe { slot.read() };
            // SAFETY: the value slot follows it; a deleted entry's value is null.
            let value: Obj = unsafe { read_at(slot.cast::<u8>(), size_of::<Obj>()) };
            if !value.is_null() {
                return Some((key, value));
            }
        }
        None
    }

    /// Whether the members are read in place (else through `PyDict_Next`).
    pub fn in_place(&self) -> bool {
        !self.first.is_null()
    }

    /// Where the walk stands (`PyDict_Next`'s position).
    #[inline(always)]
    pub fn position(&self) -> ffi::Py_ssize_t {
        if self.first.is_null() {
            return self.pos;
        }
        let words = (self.next as usize - self.first as usize) / std::mem::size_of::<Obj>();
        ffi::Py_ssize_t::try_from(words / self.stride).unwrap_or(ffi::Py_ssize_t::MAX)
    }
}

impl Iterator for DictMembers {
    type Item = (Obj, Obj);

    #[inline(always)]
    fn next(&mut self) -> Option<(Obj, Obj)> {
        if self.first.is_null() {
            let (mut key, mut value) = (std::ptr::null_mut(), std::ptr::null_mut());
            // SAFETY: the dict is kept alive and unchanged by its owner while the walk is used
            // (`DictMembers::new`), and the GIL is held; `pos` is 0 or where `PyDict_Next` left
            // it.
            let more = unsafe {
                ffi::PyDict_Next(self.dict.as_ptr(), &mut self.pos, &mut key, &mut value)
            };
            return (more != 0).then_some((Obj::from_ptr(key), Obj::from_ptr(value)));
        }
        self.next_in_place()
    }
}

/// The `state` word and the length of an exact str, when `data_at` (the offset of the
/// characters the caller reads) is verified for this interpreter (not 0).
///
/// # Safety
/// `obj` must be a live object and the GIL held.
#[inline(always)]
unsafe fn str_header(data_at: usize, obj: Obj) -> Option<(u32, usize)> {
    // SAFETY: `obj` is kept alive by its owner (`# Safety` above): its header can be read.
    if data_at == 0 || unsafe { ffi::Py_TYPE(obj.as_ptr()) } != addr_of_mut!(ffi::PyUnicode_Type) {
        return None;
    }
    let ptr = obj.bytes();
    // SAFETY: `obj` is an exact str of the verified layout (kept alive by its owner):
    // `state` is inside its header.
    let state: u32 = unsafe { read_at(ptr, STR_STATE_AT) };
    // SAFETY: and so is `length`.
    let length: ffi::Py_ssize_t = unsafe { read_at(ptr, STR_LENGTH_AT) };
    Some((state, usize::try_from(length).ok()?))
}

/// The characters of an exact, compact ASCII str, read in place.
///
/// # Safety
/// `obj` must be a live object and the GIL held; the text lives as long as `obj`.
#[inline(always)]
unsafe fn ascii_text<'a>(layout: &Layout, obj: Obj) -> Option<&'a str> {
    // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
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
    // SAFETY: such a str holds `length` bytes at `ascii_data`, alive and unchanged as long
    // as the (immutable) str, which its owner keeps alive for `'a` (`# Safety` above).
    let bytes = unsafe { bytes_at(obj.bytes(), layout.ascii_data, length) };
    // SAFETY: ASCII is valid UTF-8.
    unsafe { std::str::from_utf8_unchecked(bytes) }
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
    // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
    let (state, length) = unsafe { str_header(layout.ascii_data, obj) }?;
    if state & STR_COMPACT_ASCII == STR_COMPACT_ASCII {
        // SAFETY: the state says compact ASCII, of the verified layout.
        return Some(StrChars::Ascii(unsafe { ascii_chars(layout, obj, length) }));
    }
    if layout.compact_data == 0 || state & STR_COMPACT_ASCII != STR_COMPACT {
        return None;
    }
    let data = obj.bytes().wrapping_add(layout.compact_data);
    // A compact non-ASCII str of the verified layout holds `length` code points of the width
    // its state gives at `compact_data`, alive and unchanged as long as the (immutable) str,
    // which the caller keeps alive for `'a`. Each slice is made only when the data is aligned
    // for its width (CPython allocates objects aligned, so it always is).
    match (state >> STR_KIND_SHIFT) & STR_KIND_MASK {
        // SAFETY: 1-byte code points (see above).
        1 => Some(StrChars::Latin1(unsafe {
            std::slice::from_raw_parts(data, length)
        })),
        2 if data as usize & 1 == 0 => {
            // SAFETY: 2-byte code points, aligned (see above).
            let units = unsafe { std::slice::from_raw_parts(data.cast::<u16>(), length) };
            Some(StrChars::Bmp(units))
        }
        4 if data as usize & 3 == 0 => {
            // SAFETY: 4-byte code points, aligned (see above).
            let points = unsafe { std::slice::from_raw_parts(data.cast::<u32>(), length) };
            Some(StrChars::CodePoints(points))
        }
        _ => None,
    }
}

/// The items of an exact list, read in place (`None`: use `PyList_GetItem`).
///
/// # Safety
/// `list` must be a live object and the GIL held; the slice is valid while the list is
/// neither changed nor freed (no Python code may run meanwhile).
#[inline(always)]
pub unsafe fn list_items<'a>(list: Obj) -> Option<&'a [Obj]> {
    if !Layout::get().list_items {
        return None;
    }
    // SAFETY: `list` is live (kept alive by its owner, `# Safety` above): its header can be
    // read.
    if unsafe { ffi::Py_TYPE(list.as_ptr()) } != addr_of_mut!(ffi::PyList_Type) {
        return None;
    }
    let ptr = list.bytes();
    // SAFETY: `list` is an exact list of the verified layout (kept alive by its owner):
    // `ob_size` is inside its header.
    let size: ffi::Py_ssize_t = unsafe { read_at(ptr, VAR_SIZE_AT) };
    // SAFETY: and so is `ob_item`.
    let items: *const Obj = unsafe { read_at(ptr, LIST_ITEMS_AT) };
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
/// surrogates, or a platform without the call). Runs no Python code and raises nothing: a
/// lone surrogate is found from the str's code units ([`has_lone_surrogate`]) before
/// CPython is asked for UTF-8 (which would build a `UnicodeEncodeError`, a GC-tracked object
/// whose allocation may start the cyclic collector and with it any finalizer).
///
/// # Safety
/// `obj` must be a live `str` object and the GIL held; the text is valid while `obj` is
/// alive (the caller picks `'a` accordingly).
#[inline]
pub unsafe fn str_utf8<'a>(obj: Obj) -> Option<&'a str> {
    // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
    if let Some(text) = unsafe { ascii_text(Layout::get(), obj) } {
        return Some(text);
    }
    // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
    unsafe { str_utf8_api(obj) }
}

/// [`str_utf8`] of an owned str: its text, or `None` when it holds lone surrogates (no
/// Python error is raised, unlike `PyString::to_cow`).
pub fn str_cow<'a>(s: &'a Bound<'_, PyString>) -> Option<std::borrow::Cow<'a, str>> {
    // SAFETY: `s` is alive for `'a` (borrowed for it) and the GIL is held (a `Bound`).
    if let Some(text) = unsafe { str_utf8(Obj::of(s)) } {
        return Some(std::borrow::Cow::Borrowed(text));
    }
    #[cfg(windows)]
    {
        // SAFETY: as above.
        if !unsafe { has_lone_surrogate(s.as_ptr()) } {
            return s.to_cow().ok();
        }
    }
    None
}

/// Whether a `str` (or str subclass) holds a lone surrogate, read from its code units:
/// in place for an exact compact str (only 2 and 4-byte kinds can hold one), else from a
/// copy of its code points ([`code_points`]). Runs no Python code, raises nothing,
/// allocates no Python object.
///
/// # Safety
/// `obj` must be a live `str` object and the GIL held.
pub unsafe fn has_lone_surrogate(obj: Obj) -> bool {
    let surrogate = |c: u32| (0xD800..=0xDFFF).contains(&c);
    // SAFETY: `obj` is a str its owner keeps alive for this call (`# Safety` above); the
    // slices are used only within it.
    match unsafe { str_chars(obj) } {
        Some(StrChars::Ascii(_) | StrChars::Latin1(_)) => false,
        Some(StrChars::Bmp(units)) => units.iter().any(|&u| surrogate(u32::from(u))),
        Some(StrChars::CodePoints(points)) => points.iter().any(|&c| surrogate(c)),
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        None => unsafe { code_points_of(obj) }.iter().any(|&c| surrogate(c)),
    }
}

/// JS `s.length` of a `str` (or str subclass): its UTF-16 code units (a code point above
/// U+FFFF counts 2, a lone surrogate 1). Runs no Python code, raises nothing.
///
/// # Safety
/// `obj` must be a live `str` object and the GIL held.
pub unsafe fn utf16_len_of(obj: Obj) -> usize {
    let astral = |c: u32| usize::from(c > 0xFFFF);
    // SAFETY: `obj` is a str its owner keeps alive for this call (`# Safety` above); the
    // slices are used only within it.
    match unsafe { str_chars(obj) } {
        Some(StrChars::Ascii(text)) => text.len(),
        Some(StrChars::Latin1(chars)) => chars.len(),
        Some(StrChars::Bmp(units)) => units.len(),
        Some(StrChars::CodePoints(points)) => {
            points.len() + points.iter().map(|&c| astral(c)).sum::<usize>()
        }
        None => {
            // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
            let points = unsafe { code_points_of(obj) };
            points.len() + points.iter().map(|&c| astral(c)).sum::<usize>()
        }
    }
}

/// The code points of a `str` (or str subclass), lone surrogates kept: a copy made in C
/// (`PyUnicode_AsUCS4` into a buffer of the str's own length: it cannot fail, no codec is
/// looked up, nothing is raised, no Python code runs).
pub fn code_points(s: &Bound<'_, PyString>) -> Vec<u32> {
    // SAFETY: `s` is a live str and the GIL is held (a `Bound`).
    unsafe { code_points_of(Obj::of(s)) }
}

/// [`code_points`] of a borrowed str.
///
/// # Safety
/// `obj` must be a live `str` object and the GIL held.
unsafe fn code_points_of(obj: Obj) -> Vec<u32> {
    // SAFETY: `obj` is a str its owner keeps alive (`# Safety` above): its length is read
    // in C.
    let length = unsafe { ffi::PyUnicode_GetLength(obj.as_ptr()) };
    let Ok(len) = usize::try_from(length) else {
        return Vec::new();
    };
    let mut points = vec![0u32; len + 1];
    // SAFETY: `points` (owned here) holds the str's length plus the NUL: the copy cannot
    // fail; `obj` is live.
    let copied = unsafe { ffi::PyUnicode_AsUCS4(obj.as_ptr(), points.as_mut_ptr(), length + 1, 1) };
    if copied.is_null() {
        return Vec::new();
    }
    points.truncate(len);
    points
}

/// The generalized UTF-8 of a `str` (each code point on its own, a lone surrogate as its
/// 3-byte form: what `encode("utf-8", "surrogatepass")` gives), made in Rust from
/// [`code_points`].
pub fn wtf8_of(s: &Bound<'_, PyString>) -> Vec<u8> {
    let points = code_points(s);
    let mut out = Vec::with_capacity(points.len() + 8);
    for c in points {
        match c {
            0..=0x7F => out.push(c as u8),
            0x80..=0x7FF => out.extend([0xC0 | (c >> 6) as u8, 0x80 | (c & 0x3F) as u8]),
            0x800..=0xFFFF => out.extend([
                0xE0 | (c >> 12) as u8,
                0x80 | ((c >> 6) & 0x3F) as u8,
                0x80 | (c & 0x3F) as u8,
            ]),
            _ => out.extend([
                0xF0 | (c >> 18) as u8,
                0x80 | ((c >> 12) & 0x3F) as u8,
                0x80 | ((c >> 6) & 0x3F) as u8,
                0x80 | (c & 0x3F) as u8,
            ]),
        }
    }
    out
}

/// [`str_utf8`] through the C API.
///
/// # Safety
/// As [`str_utf8`].
unsafe fn str_utf8_api<'a>(obj: Obj) -> Option<&'a str> {
    #[cfg(not(windows))]
    {
        // SAFETY: `obj` is a str its owner keeps alive (`# Safety` of [`str_utf8`]) and the
        // GIL is held.
        if unsafe { has_lone_surrogate(obj) } {
            return None;
        }
        let mut size: ffi::Py_ssize_t = 0;
        // SAFETY: `obj` is a live str without lone surrogates and the GIL held: CPython
        // encodes it without error (out of memory aside: its preallocated `MemoryError` is
        // cleared, nothing is collected) and the UTF-8 it hands out lives as long as the str.
        let data = unsafe { PyUnicode_AsUTF8AndSize(obj.as_ptr(), &mut size) };
        if data.is_null() {
            // SAFETY: the GIL is held; the error set just now is dropped.
            unsafe { ffi::PyErr_Clear() };
            return None;
        }
        let len = usize::try_from(size).ok()?;
        // SAFETY: CPython hands out `size` bytes of UTF-8 kept by the str, which its owner
        // keeps alive for `'a` (`# Safety` of [`str_utf8`]).
        let bytes = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) };
        // SAFETY: CPython's UTF-8 form of a str is valid UTF-8.
        Some(unsafe { std::str::from_utf8_unchecked(bytes) })
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
    // SAFETY: `obj` is kept alive by its owner (`# Safety` above): its header can be read.
    let ty = unsafe { ffi::Py_TYPE(obj.as_ptr()) };
    if ty == addr_of_mut!(ffi::PyUnicode_Type) {
        prefetch(obj.bytes().wrapping_add(64));
    } else if ty == addr_of_mut!(ffi::PyDict_Type) {
        // SAFETY: an exact dict of the verified layout (kept alive by its owner) is larger
        // than the words read.
        let table: *const u8 = unsafe { read_at(obj.bytes(), DICT_KEYS_WORD * size_of::<Obj>()) };
        prefetch(table);
        prefetch(table.wrapping_add(64));
        prefetch(table.wrapping_add(128));
    } else if ty == addr_of_mut!(ffi::PyList_Type) {
        // SAFETY: an exact list of the verified layout (kept alive by its owner) is larger
        // than the words read.
        let items: *const u8 = unsafe { read_at(obj.bytes(), LIST_ITEMS_WORD * size_of::<Obj>()) };
        prefetch(items);
    }
}

/// Which layout reads are on (diagnostics and tests): `ascii_text`, `str_chars`,
/// `list_items`, `prefetch`, `dict_entries`.
pub fn features(py: Python<'_>) -> PyResult<Bound<'_, pyo3::types::PyDict>> {
    let layout = Layout::get();
    let features = pyo3::types::PyDict::new(py);
    features.set_item("ascii_text", layout.ascii_data != 0)?;
    features.set_item("str_chars", layout.compact_data != 0)?;
    features.set_item("list_items", layout.list_items)?;
    features.set_item("prefetch", layout.prefetch)?;
    features.set_item("dict_entries", layout.dict_entries)?;
    Ok(features)
}

/// The cyclic garbage collector paused for the life of the guard (a whole native call that
/// borrows from Python objects): a collection runs finalizers, Python code that could free
/// or change what a borrowed view points into, or let another thread take the GIL and do
/// so. Dropped on every way out (a return, an error, a panic unwinding to PyO3's boundary),
/// it resumes the collector only if it was running. Pausing also spares the collector
/// walking the thousands of young containers a render builds (it runs once, afterwards).
pub(crate) struct GcPaused(bool);

impl GcPaused {
    pub(crate) fn new() -> Self {
        // SAFETY: the GIL is held (every caller is a native call made with it); part of the
        // stable ABI since 3.10.
        GcPaused(unsafe { ffi::PyGC_Disable() } == 1)
    }
}

impl Drop for GcPaused {
    fn drop(&mut self) {
        if self.0 {
            // SAFETY: the GIL is still held (the guard lives inside the native call).
            unsafe { ffi::PyGC_Enable() };
        }
    }
}

/// The slice `start:stop` (step `None`, i.e. 1). Not `PySlice::new`: in pyo3 0.23 it hands
/// `PySlice_New` three new index objects that it never releases (`PySlice_New` takes its
/// own references), two leaked ints per slice.
pub(crate) fn slice(py: Python<'_>, start: isize, stop: isize) -> PyResult<Bound<'_, PySlice>> {
    let start = start
        .into_pyobject(py)
        .unwrap_or_else(|never| match never {});
    let stop = stop
        .into_pyobject(py)
        .unwrap_or_else(|never| match never {});
    // SAFETY: `Py_None` returns the address of the immortal None singleton.
    let none = unsafe { ffi::Py_None() };
    // SAFETY: `start` and `stop` are owned by this frame and None is immortal, so all three
    // are alive for the call (the slice takes its own references); the GIL is held.
    let raw = unsafe { ffi::PySlice_New(start.as_ptr(), stop.as_ptr(), none) };
    // SAFETY: `raw` is the new reference `PySlice_New` returned (owned from here on), or NULL
    // with the error set; the GIL is held.
    let made = unsafe { Bound::from_owned_ptr_or_err(py, raw) }?;
    Ok(made.downcast_into::<PySlice>()?)
}

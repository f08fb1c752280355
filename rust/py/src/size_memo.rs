//! `pi_condense._core.SizeMemo`: message sizes remembered from one render to the next.
//!
//! A render that changes something reports `JSON.stringify(list).length` of its whole
//! input. Measuring means touching every object of every message, and a host renders
//! nearly the same list before every model call: the previous messages (the very same
//! objects) plus a few new ones. The memo keeps, per message object, its measured length
//! and a *trail*: every object of the message's tree in walk order (dicts, their keys,
//! lists, leaves), each held by a strong reference.
//!
//! A later render reuses the length when the message is still made of the very same
//! objects: each container of the trail is walked again (size, key order and the identity
//! of every key and item compared with the trail); leaves are compared by address only,
//! without being read. This is exact, not a heuristic: the references the trail holds keep
//! every recorded object alive, so no other object can take one of their addresses, and
//! the only leaves admitted (exact `str`, `int`, `float`, `bool`, `None`) are immutable.
//! Equal trails therefore mean equal JSON text. A message holding anything else (a
//! subclass, a tuple, `ABSENT`, a non-str key) or nested deeper than [`MAX_DEPTH`] is not
//! remembered: it is measured on every render.
//!
//! Entries a render does not look at are released at its end ([`SizeMemo::sweep`]), so the
//! memo holds (references to) the messages of the latest measured list only.

use std::cell::Cell;
use std::ptr::{addr_of_mut, null_mut};
use std::sync::{Mutex, MutexGuard};

use pi_condense_core::render::FastMap;
use pyo3::ffi;
use pyo3::prelude::*;

use crate::json::{list_slice, prefetch, prefetch_body, Measurer};

type Obj = *mut ffi::PyObject;

/// Deepest container nesting a remembered message may have.
const MAX_DEPTH: usize = 128;

/// Trail words: an object address with a tag in its two low bits (objects are at least
/// 4-byte aligned), or a container's size.
const TAG_MASK: usize = 0b11;
const TAG_LEAF: usize = 0b00;
const TAG_DICT: usize = 0b01;
const TAG_LIST: usize = 0b10;
const TAG_COUNT: usize = 0b11;

struct Entry {
    len: usize,
    trail: Box<[usize]>,
    /// The render that last used this entry.
    seen: Cell<u64>,
}

/// Lengths of message objects, valid while their trees are unchanged (module docs).
#[derive(Default)]
pub(crate) struct SizeMemo {
    entries: FastMap<usize, Entry>,
    generation: u64,
    hits: u64,
    misses: u64,
}

/// Whether `obj` is a leaf the memo admits (immutable, with a length that only depends
/// on its value).
///
/// # Safety
/// `obj` must be a live object and the GIL held.
#[inline]
unsafe fn is_plain_leaf(obj: Obj) -> bool {
    let ty = ffi::Py_TYPE(obj);
    ty == addr_of_mut!(ffi::PyUnicode_Type)
        || ty == addr_of_mut!(ffi::PyLong_Type)
        || ty == addr_of_mut!(ffi::PyFloat_Type)
        || ty == addr_of_mut!(ffi::PyBool_Type)
        || obj == ffi::Py_None()
}

/// Appends the trail of `obj` to `out`; `false` when the tree holds something the memo
/// does not admit (then `out` holds a partial trail the caller discards).
///
/// # Safety
/// `obj` must be a live object and the GIL held; no Python code runs.
unsafe fn record(py: Python<'_>, obj: Obj, depth: usize, out: &mut Vec<usize>) -> bool {
    let address = obj as usize;
    if address & TAG_MASK != 0 {
        return false;
    }
    let ty = ffi::Py_TYPE(obj);
    if ty == addr_of_mut!(ffi::PyDict_Type) {
        if depth >= MAX_DEPTH {
            return false;
        }
        let Ok(size) = usize::try_from(ffi::PyDict_Size(obj)) else {
            return false;
        };
        out.push(address | TAG_DICT);
        out.push(size << 2 | TAG_COUNT);
        let (mut pos, mut key, mut value) = (0, null_mut(), null_mut());
        while ffi::PyDict_Next(obj, &mut pos, &mut key, &mut value) != 0 {
            if ffi::Py_TYPE(key) != addr_of_mut!(ffi::PyUnicode_Type)
                || key as usize & TAG_MASK != 0
            {
                return false;
            }
            out.push(key as usize | TAG_LEAF);
            if !record(py, value, depth + 1, out) {
                return false;
            }
        }
        true
    } else if ty == addr_of_mut!(ffi::PyList_Type) {
        if depth >= MAX_DEPTH {
            return false;
        }
        let Some(items) = list_items(py, obj) else {
            return false;
        };
        out.push(address | TAG_LIST);
        out.push(items.len() << 2 | TAG_COUNT);
        items.iter().all(|&item| record(py, item, depth + 1, out))
    } else if is_plain_leaf(obj) {
        out.push(address | TAG_LEAF);
        true
    } else {
        false
    }
}

/// The items of an exact list (`None` where the list layout is not known: such lists
/// are not remembered).
///
/// # Safety
/// `list` must be a live exact list and the GIL held; the slice is valid until the list
/// changes.
unsafe fn list_items<'a>(py: Python<'_>, list: Obj) -> Option<&'a [Obj]> {
    list_slice(py, list)
}

/// Whether `obj` is still the tree the trail recorded from `trail[*pos]` on; advances
/// `pos` past it.
///
/// # Safety
/// `obj` must be a live object and the GIL held; every object of `trail` must be alive
/// (the memo holds them).
unsafe fn same_tree(py: Python<'_>, obj: Obj, trail: &[usize], pos: &mut usize) -> bool {
    let Some(&word) = trail.get(*pos) else {
        return false;
    };
    *pos += 1;
    let tag = word & TAG_MASK;
    if tag == TAG_LEAF {
        return word == obj as usize;
    }
    if word & !TAG_MASK != obj as usize {
        return false;
    }
    let Some(&count) = trail.get(*pos) else {
        return false;
    };
    *pos += 1;
    let size = count >> 2;
    if tag == TAG_DICT {
        if usize::try_from(ffi::PyDict_Size(obj)).ok() != Some(size) {
            return false;
        }
        let (mut at, mut key, mut value) = (0, null_mut(), null_mut());
        while ffi::PyDict_Next(obj, &mut at, &mut key, &mut value) != 0 {
            if trail.get(*pos) != Some(&(key as usize)) {
                return false;
            }
            *pos += 1;
            if !same_tree(py, value, trail, pos) {
                return false;
            }
        }
        true
    } else {
        match list_items(py, obj) {
            Some(items) if items.len() == size => {
                items.iter().all(|&item| same_tree(py, item, trail, pos))
            }
            _ => false,
        }
    }
}

/// Drops the references a trail holds.
///
/// # Safety
/// The GIL must be held and the trail's references owned by the caller.
unsafe fn release(trail: &[usize]) {
    for &word in trail {
        if word & TAG_MASK != TAG_COUNT {
            ffi::Py_DecRef((word & !TAG_MASK) as Obj);
        }
    }
}

impl SizeMemo {
    /// Starts a render: entries used from now on are kept by the next [`SizeMemo::sweep`].
    pub(crate) fn begin(&mut self) {
        self.generation += 1;
    }

    /// Remembers `len` as the length of `msg` (measured just now), when the memo admits
    /// its tree.
    ///
    /// # Safety
    /// `msg` must be a live object and the GIL held; no Python code runs.
    pub(crate) unsafe fn remember(&mut self, py: Python<'_>, msg: Obj, len: usize) {
        let mut trail = Vec::new();
        if !record(py, msg, 0, &mut trail) {
            return;
        }
        for &word in &trail {
            if word & TAG_MASK != TAG_COUNT {
                ffi::Py_IncRef((word & !TAG_MASK) as Obj);
            }
        }
        let entry = Entry {
            len,
            trail: trail.into_boxed_slice(),
            seen: Cell::new(self.generation),
        };
        if let Some(old) = self.entries.insert(msg as usize, entry) {
            release(&old.trail);
        }
    }

    /// Releases the entries the current render did not use.
    ///
    /// # Safety
    /// The GIL must be held. Releasing may free objects (of plain JSON types only: no
    /// Python code runs).
    pub(crate) unsafe fn sweep(&mut self) {
        let generation = self.generation;
        let mut stale = Vec::new();
        self.entries.retain(|_, entry| {
            let keep = entry.seen.get() == generation;
            if !keep {
                stale.push(std::mem::take(&mut entry.trail));
            }
            keep
        });
        for trail in stale {
            release(&trail);
        }
    }

    fn clear(&mut self) {
        let entries = std::mem::take(&mut self.entries);
        if entries.is_empty() {
            return;
        }
        Python::with_gil(|_| {
            for entry in entries.values() {
                // SAFETY: the GIL is held and the entry owns its references.
                unsafe { release(&entry.trail) };
            }
        });
    }
}

impl Drop for SizeMemo {
    fn drop(&mut self) {
        self.clear();
    }
}

/// The memo as a Python object (held by a `PrunerState`, passed to `render`).
///
/// It is only used with the GIL held (the mutex is never contended); the raw addresses
/// it stores are owned references released with the GIL.
#[pyclass(module = "pi_condense._core", name = "SizeMemo")]
pub(crate) struct PySizeMemo {
    memo: Mutex<SendMemo>,
}

/// [`SizeMemo`] marked `Send`: its addresses are references to Python objects, touched
/// only with the GIL held.
pub(crate) struct SendMemo(pub(crate) SizeMemo);

// SAFETY: see `SendMemo`; every access goes through the GIL-holding render or `clear`.
unsafe impl Send for SendMemo {}

impl PySizeMemo {
    /// The memo (the GIL is held by the caller, so the lock is never contended).
    pub(crate) fn lock(&self) -> MutexGuard<'_, SendMemo> {
        match self.memo.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut SizeMemo) -> R) -> R {
        f(&mut self.lock().0)
    }
}

#[pymethods]
impl PySizeMemo {
    #[new]
    fn new() -> Self {
        PySizeMemo {
            memo: Mutex::new(SendMemo(SizeMemo::default())),
        }
    }

    /// Number of messages remembered.
    fn __len__(&self) -> usize {
        self.with(|memo| memo.entries.len())
    }

    /// `(hits, misses)` of the lookups so far (a miss: a message new to the memo, or changed).
    #[getter]
    fn stats(&self) -> (u64, u64) {
        self.with(|memo| (memo.hits, memo.misses))
    }

    /// Forgets every message (releases the references).
    fn clear(&self) {
        self.with(SizeMemo::clear);
    }
}

/// How many messages ahead of the check the containers of a remembered message are
/// prefetched (headers; their tables half as far ahead, once the headers have arrived).
const AHEAD: usize = 4;

/// Prefetches the headers of the containers of a trail.
fn prefetch_headers(trail: &[usize]) {
    for &word in trail {
        let tag = word & TAG_MASK;
        if tag == TAG_DICT || tag == TAG_LIST {
            prefetch((word & !TAG_MASK) as *const u8);
        }
    }
}

/// Prefetches what the check reads next from the containers of a trail: dict tables and
/// list item arrays.
///
/// # Safety
/// The trail's objects must be alive (the memo holds them) and the GIL held.
unsafe fn prefetch_tables(trail: &[usize]) {
    for &word in trail {
        let tag = word & TAG_MASK;
        if tag == TAG_DICT || tag == TAG_LIST {
            prefetch_body((word & !TAG_MASK) as Obj);
        }
    }
}

/// `JSON.stringify(item).length` of every item of `list`, reusing and refreshing the
/// lengths `memo` remembers, calling `then(i, item)` right after item `i` is checked or
/// measured (while its objects are in the CPU caches). Without a memo this is
/// [`Measurer::len_each_then`].
///
/// Remembered messages are checked in a pipeline: the containers of the messages a few
/// places ahead are prefetched, so that the cache misses of the check overlap.
///
/// # Safety
/// `list` must be a live list and the GIL held; `then` must not run Python code.
pub(crate) unsafe fn len_each_then(
    py: Python<'_>,
    list: Obj,
    memo: Option<&mut SizeMemo>,
    mut then: impl FnMut(usize, Obj) -> PyResult<()>,
) -> PyResult<Vec<usize>> {
    let Some(memo) = memo else {
        return Measurer::new(py).len_each_then(py, list, then);
    };
    let count = usize::try_from(ffi::PyList_Size(list)).map_err(|_| PyErr::fetch(py))?;
    let mut items = Vec::with_capacity(count);
    for i in 0..count {
        let item = ffi::PyList_GetItem(list, ffi::Py_ssize_t::try_from(i).unwrap_or(-1));
        if item.is_null() {
            return Err(PyErr::fetch(py));
        }
        items.push(item);
    }
    memo.begin();
    let generation = memo.generation;
    let mut lens = Vec::with_capacity(count);
    let mut fresh: Vec<(Obj, usize)> = Vec::new();
    let (mut hits, mut misses) = (0, 0);
    {
        let found: Vec<Option<&Entry>> = items
            .iter()
            .map(|&item| memo.entries.get(&(item as usize)))
            .collect();
        let mut measurer = Measurer::new(py);
        for (i, &item) in items.iter().enumerate() {
            if let Some(Some(ahead)) = found.get(i + AHEAD) {
                prefetch_headers(&ahead.trail);
            }
            if let Some(Some(ahead)) = found.get(i + AHEAD / 2) {
                prefetch_tables(&ahead.trail);
            }
            let remembered = found.get(i).copied().flatten().filter(|entry| {
                let mut pos = 0;
                same_tree(py, item, &entry.trail, &mut pos) && pos == entry.trail.len()
            });
            let len = match remembered {
                Some(entry) => {
                    entry.seen.set(generation);
                    hits += 1;
                    entry.len
                }
                None => {
                    misses += 1;
                    let len = measurer.len(py, item)?;
                    fresh.push((item, len));
                    len
                }
            };
            lens.push(len);
            then(i, item)?;
        }
    }
    memo.hits += hits;
    memo.misses += misses;
    for (item, len) in fresh {
        memo.remember(py, item, len);
    }
    memo.sweep();
    Ok(lens)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySizeMemo>()?;
    Ok(())
}

//! `pi_condense._core.SizeMemo`: message sizes remembered from one render to the next.
//!
//! A render that changes something reports `JSON.stringify(list).length` of its whole
//! input. Measuring means touching every object of every message, and a host renders
//! nearly the same list before every model call: the previous messages (the very same
//! objects) plus a few new ones. The memo keeps, per message object, its measured length
//! and a *trail*: every object of the message's tree in walk order (dicts, their keys,
//! lists, leaves), each held by a strong reference. The trail is recorded by the very walk
//! that measures the message ([`Trail`]), so remembering costs little on top of measuring.
//!
//! A later render reuses the length when the message is still made of the very same
//! objects: each container of the trail is walked again through the C API (size, key
//! order and the identity of every key and item compared with the trail); leaves are
//! compared by address only, without being read. No private field (such as a dict's
//! version tag) is consulted. This is exact, not a heuristic: the references the trail holds keep every recorded object alive, so no other
//! object can take one of their addresses, and the only leaves admitted (exact `str`,
//! `int`, `float`, `bool`, `None`) are immutable. Equal trails therefore mean equal JSON
//! text. A message holding anything else (a subclass, a tuple, `ABSENT`, a non-str key) or
//! nested deeper than [`MAX_DEPTH`] is not remembered: it is measured on every render.
//!
//! Entries a render does not look at are released at its end ([`SizeMemo::sweep`]), so the
//! memo holds (references to) the messages of the latest measured list only.
//!
//! Recording a trail costs a reference per object, and is wasted on a host that hands over
//! fresh objects on every call (a clone of its history, an adapter's conversion): nothing
//! recorded is ever found again. So a message is remembered only from its second render on.
//! A render that finds nothing remembered keeps a few of its messages as *anchors*
//! ([`ANCHORS`], by strong reference, so identity is exact); the next render records trails
//! only if one of those very objects is in its list (the host keeps its messages), and
//! otherwise measures without recording, as without a memo. The memo then never makes the
//! fresh-objects path slower than no memo, and holds at most the anchors of such a host.

mod prefix;

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::ptr::{addr_of_mut, null_mut};
use std::sync::{Mutex, MutexGuard, TryLockError};

use pi_condense_core::render::{FastMap, MsgView, Needs, ResultKeys};
use pyo3::exceptions::PyRuntimeError;
use pyo3::ffi;
use pyo3::prelude::*;

use crate::cpython::{list_items as list_slice, prefetch, prefetch_body, DictMembers};
use crate::json::Measurer;
use crate::render::resume::{Continuation, ResumeStats, FALLBACKS};
use crate::render::reuse::Outputs;

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

/// Messages of a render kept as anchors (module docs): evenly spread, the last one too.
const ANCHORS: usize = 8;

struct Entry {
    len: usize,
    trail: Box<[usize]>,
    /// The render that last used this entry.
    seen: Cell<u64>,
    /// The message's view, when one was read (it borrows from the trail's objects).
    view: Option<KeptView>,
}

/// Lengths of message objects, valid while their trees are unchanged (module docs).
#[derive(Default)]
pub(crate) struct SizeMemo {
    /// Boxed: the table stays small (scanned for every message), and an entry's address
    /// is known, to prefetch it, before it is read.
    entries: FastMap<usize, Box<Entry>>,
    generation: u64,
    pub(crate) hits: u64,
    pub(crate) misses: u64,
    /// Owned references to a few messages of the latest render that found nothing
    /// remembered (module docs).
    anchors: Vec<usize>,
    /// Anchors replaced during a render: released at its end or at the start of the next
    /// one, when no view borrows (releasing a message may run its values' `__del__`).
    pub(crate) retired: Vec<usize>,
    /// The caller promises that no message it handed over before has changed in place
    /// (set per render): a remembered object is then reused without walking its trail
    /// again. A broken promise gives a stale length or view, never a dangling one: the
    /// trail still holds every object a kept view borrows from.
    pub(crate) frozen: bool,
    /// The leading messages of the latest frozen render, out of `entries` (`prefix`).
    prefix: prefix::Prefix,
    /// The new messages of the latest frozen render (`crate::render::reuse`).
    outputs: Outputs,
    /// The tool results' lookup keys of the latest frozen render: the next one reuses those
    /// of the messages the prefix lends it (`ResultKeys::reusable`).
    pub(crate) keys: ResultKeys,
    /// What the latest frozen render leaves to resume the next one from
    /// (`crate::render::resume`).
    pub(crate) resume: Option<Continuation>,
    pub(crate) resume_stats: ResumeStats,
    /// Frozen renders resume from the previous one (on unless the memo was made without).
    pub(crate) resuming: bool,
}

/// Whether `obj` is a leaf the memo admits (immutable, with a length that only depends
/// on its value).
///
/// # Safety
/// `obj` must be a live object and the GIL held.
#[inline]
unsafe fn is_plain_leaf(obj: Obj) -> bool {
    // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
    unsafe {
        let ty = ffi::Py_TYPE(obj);
        ty == addr_of_mut!(ffi::PyUnicode_Type)
            || ty == addr_of_mut!(ffi::PyLong_Type)
            || ty == addr_of_mut!(ffi::PyFloat_Type)
            || ty == addr_of_mut!(ffi::PyBool_Type)
            || obj == ffi::Py_None()
    }
}

/// A finished trail (it owns a reference to each of its objects).
pub(crate) type Recorded = Box<[usize]>;

/// A trail being recorded by the measuring walk ([`Measurer::len_recorded`]), in the walk's
/// order: a dict is `DICT|dict, size, key1 .. keyN` followed by the trails of its
/// values in order; a list is `LIST|list, size` followed by the trails
/// of its items; a leaf is its address. Anything the memo does not admit spoils the trail.
///
/// The trail takes a reference to each object as it records it (the object was just read:
/// its header is in the CPU cache); [`Trail::finish`] hands them over, and a spoiled or
/// discarded trail gives them back.
#[derive(Default)]
pub(crate) struct Trail {
    words: Vec<usize>,
    spoiled: bool,
}

impl Trail {
    /// The finished trail, owning a reference to each of its objects (`None` if spoiled);
    /// the trail is then empty again, ready for the next value (its buffer is reused).
    pub(crate) fn finish(&mut self) -> Option<Recorded> {
        let done = (!self.spoiled).then(|| Box::from(self.words.as_slice()));
        self.words.clear();
        self.spoiled = false;
        done
    }

    /// Gives back the references of an unfinished trail.
    ///
    /// # Safety
    /// The GIL must be held.
    pub(crate) unsafe fn discard(&mut self) {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe {
            release(&self.words);
            self.words.clear();
            self.spoiled = false;
        }
    }

    /// # Safety
    /// The GIL must be held.
    unsafe fn spoil(&mut self) {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe {
            if !self.spoiled {
                self.spoiled = true;
                release(&self.words);
                self.words = Vec::new();
            }
        }
    }

    /// # Safety
    /// `obj` must be a live object and the GIL held.
    unsafe fn push_object(&mut self, obj: Obj, tag: usize) {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe {
            if obj as usize & TAG_MASK != 0 {
                self.spoil();
            } else if !self.spoiled {
                ffi::Py_IncRef(obj);
                self.words.push(obj as usize | tag);
            }
        }
    }

    /// A value that is not a dict, list or tuple.
    ///
    /// # Safety
    /// `obj` must be a live object and the GIL held.
    pub(crate) unsafe fn leaf(&mut self, obj: Obj) {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe {
            if is_plain_leaf(obj) {
                self.push_object(obj, TAG_LEAF);
            } else {
                self.spoil();
            }
        }
    }

    /// A dict at `depth` is opened: where its size goes, for [`Trail::close_dict`].
    ///
    /// # Safety
    /// `dict` must be a live object and the GIL held.
    pub(crate) unsafe fn open_dict(&mut self, dict: Obj, depth: u32) -> Option<usize> {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe {
            if ffi::Py_TYPE(dict) != addr_of_mut!(ffi::PyDict_Type) || depth as usize >= MAX_DEPTH {
                self.spoil();
            }
            self.push_object(dict, TAG_DICT);
            if self.spoiled {
                return None;
            }
            self.words.push(TAG_COUNT);
            Some(self.words.len() - 1)
        }
    }

    /// A key of the dict opened last (an exact str: the walk checked).
    ///
    /// # Safety
    /// `key` must be a live object and the GIL held.
    pub(crate) unsafe fn key(&mut self, key: Obj) {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe {
            self.push_object(key, TAG_LEAF);
        }
    }

    /// The dict opened at `at` had `count` members (`plain`: all keys exact strs).
    ///
    /// # Safety
    /// The GIL must be held.
    pub(crate) unsafe fn close_dict(&mut self, at: usize, count: usize, plain: bool) {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe {
            if !plain {
                self.spoil();
            } else if let Some(word) = self.words.get_mut(at) {
                *word = count << 2 | TAG_COUNT;
            }
        }
    }

    /// A list or tuple at `depth`, of `count` items.
    ///
    /// # Safety
    /// `list` must be a live object and the GIL held.
    pub(crate) unsafe fn list(&mut self, list: Obj, count: usize, depth: u32) {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe {
            if ffi::Py_TYPE(list) == addr_of_mut!(ffi::PyList_Type) && (depth as usize) < MAX_DEPTH
            {
                self.push_object(list, TAG_LIST);
                if !self.spoiled {
                    self.words.push(count << 2 | TAG_COUNT);
                }
            } else {
                self.spoil();
            }
        }
    }
}

/// Whether `obj` is still the tree the trail recorded from `trail[*pos]` on; advances
/// `pos` past it.
///
/// # Safety
/// `obj` must be a live object and the GIL held; every object of `trail` must be alive
/// (the memo holds them).
unsafe fn same_tree(obj: Obj, trail: &[usize], pos: &mut usize) -> bool {
    // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
    unsafe {
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
            // The keys, in order, then the values' trees.
            let mut values: SmallValues = SmallValues::new();
            for (key, value) in DictMembers::new(obj, 0) {
                if values.len() >= size || trail.get(*pos) != Some(&(key as usize)) {
                    return false;
                }
                *pos += 1;
                values.push(value);
            }
            values.len() == size
                && values
                    .as_slice()
                    .iter()
                    .all(|&value| same_tree(value, trail, pos))
        } else if let Some(items) = list_slice(obj) {
            items.len() == size && items.iter().all(|&item| same_tree(item, trail, pos))
        } else {
            // The layout is not known: the items through the C API.
            ffi::PyList_Size(obj) == size as ffi::Py_ssize_t
                && (0..size).all(|i| {
                    let item = ffi::PyList_GetItem(obj, i as ffi::Py_ssize_t);
                    !item.is_null() && same_tree(item, trail, pos)
                })
        }
    }
}

/// The values of one dict: on the stack for the usual few, on the heap beyond.
struct SmallValues {
    inline: [Obj; 16],
    len: usize,
    spill: Vec<Obj>,
}

impl SmallValues {
    fn new() -> Self {
        SmallValues {
            inline: [null_mut(); 16],
            len: 0,
            spill: Vec::new(),
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn push(&mut self, value: Obj) {
        if self.len < self.inline.len() {
            self.inline[self.len] = value;
        } else {
            if self.spill.is_empty() {
                self.spill.extend_from_slice(&self.inline);
            }
            self.spill.push(value);
        }
        self.len += 1;
    }

    fn as_slice(&self) -> &[Obj] {
        if self.len <= self.inline.len() {
            self.inline.get(..self.len).unwrap_or_default()
        } else {
            &self.spill
        }
    }
}

/// Drops the references a trail holds.
///
/// # Safety
/// The GIL must be held and the trail's references owned by the caller.
pub(crate) unsafe fn release(trail: &[usize]) {
    // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
    unsafe {
        for &word in trail {
            if word & TAG_MASK != TAG_COUNT {
                ffi::Py_DecRef((word & !TAG_MASK) as Obj);
            }
        }
    }
}

impl SizeMemo {
    /// Starts a render: entries used from now on are kept by the next [`SizeMemo::sweep`].
    fn begin(&mut self) {
        self.generation += 1;
    }

    /// Remembers `len` as the length of `msg`, with the trail the measurement recorded
    /// (and the references it owns).
    ///
    /// # Safety
    /// The GIL must be held.
    unsafe fn remember(&mut self, msg: Obj, len: usize, trail: Recorded, view: Option<KeptView>) {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe {
            let entry = Entry {
                len,
                trail,
                seen: Cell::new(self.generation),
                view,
            };
            if let Some(mut old) = self.entries.insert(msg as usize, Box::new(entry)) {
                // The view borrows from the trail's objects: dropped before they are released.
                let trail = std::mem::take(&mut old.trail);
                drop(old);
                release(&trail);
            }
        }
    }

    /// Releases the entries the current render did not use.
    ///
    /// # Safety
    /// The GIL must be held. Releasing may free objects (of plain JSON types only: no
    /// Python code runs).
    unsafe fn sweep(&mut self) {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe {
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
    }

    /// For the apply of a render: the outputs of the previous frozen render and where
    /// references to release go (`None` without the promise: the outputs are released).
    pub(crate) fn outputs_for_apply(&mut self) -> Option<(&mut Outputs, &mut Vec<usize>)> {
        if self.frozen {
            self.outputs.begin();
            Some((&mut self.outputs, &mut self.retired))
        } else {
            self.drop_outputs();
            None
        }
    }

    /// Releases the outputs (at the end of the render: [`SizeMemo::release_retired`]).
    pub(crate) fn drop_outputs(&mut self) {
        if !self.outputs.is_empty() {
            self.outputs.clear(&mut self.retired);
        }
    }

    /// After the apply: the lengths of the output messages (`lens`, by slot) for the
    /// outputs this render kept; the ones it did not hand out are released.
    pub(crate) fn outputs_measured(&mut self, lens: &[usize]) {
        if self.frozen {
            self.outputs.measured(lens);
            self.outputs.sweep(&mut self.retired);
        }
    }

    /// Releases the anchors retired by the previous render.
    ///
    /// # Safety
    /// The GIL must be held, and nothing may borrow from Python objects: releasing a
    /// message can run Python code (a `__del__` of one of its values).
    pub(crate) unsafe fn release_retired(&mut self) {
        for address in std::mem::take(&mut self.retired) {
            // SAFETY: the GIL is held, the memo owns this reference, and no view borrows
            // (the caller's contract), so Python code run by a deallocation is harmless.
            unsafe { ffi::Py_DecRef(address as Obj) };
        }
    }

    /// Whether one of the anchors is in `items` (the host kept its objects).
    fn anchored(&self, items: &[Obj]) -> bool {
        !self.anchors.is_empty()
            && items
                .iter()
                .any(|&item| self.anchors.contains(&(item as usize)))
    }

    /// Makes a few of `items` the anchors; the previous ones are retired (still held until
    /// no view borrows, so no deallocation runs now).
    ///
    /// # Safety
    /// The GIL must be held and `items` live.
    unsafe fn anchor(&mut self, items: &[Obj]) {
        let mut anchors = Vec::with_capacity(ANCHORS + 1);
        let n = items.len();
        if n > 0 {
            for k in 0..ANCHORS {
                anchors.push(k * n / ANCHORS);
            }
            anchors.push(n - 1);
            anchors.dedup();
        }
        let anchors: Vec<usize> = anchors
            .into_iter()
            .filter_map(|i| items.get(i))
            .map(|&item| {
                // SAFETY: `item` is live and the GIL held; the memo now owns this reference.
                unsafe { ffi::Py_IncRef(item) };
                item as usize
            })
            .collect();
        self.retire_anchors();
        self.anchors = anchors;
    }

    /// Releases every entry.
    ///
    /// # Safety
    /// The GIL must be held (as [`SizeMemo::sweep`]).
    unsafe fn sweep_all(&mut self) {
        // SAFETY: the GIL is held (the caller's contract).
        unsafe { self.release_prefix() };
        if self.entries.is_empty() {
            return;
        }
        let stale: Vec<Recorded> = std::mem::take(&mut self.entries)
            .into_values()
            .map(|entry| entry.trail)
            .collect();
        for trail in stale {
            // SAFETY: the GIL is held; the trail owns its references, to objects of plain
            // JSON types only (no Python code runs when they are freed).
            unsafe { release(&trail) };
        }
    }

    /// Retires the anchors (released once no view borrows: [`SizeMemo::release_retired`]).
    fn retire_anchors(&mut self) {
        let old = std::mem::take(&mut self.anchors);
        self.retired.extend(old);
    }

    /// Retires the continuation of the latest frozen render (a render that does not make
    /// the promise, or a clear).
    pub(crate) fn forget_resume(&mut self) {
        if let Some(cont) = self.resume.take() {
            cont.retire(&mut self.retired);
        }
    }

    fn clear(&mut self) {
        self.outputs.clear(&mut self.retired);
        self.forget_resume();
        self.keys = ResultKeys::default();
        if self.entries.is_empty()
            && self.prefix.is_empty()
            && self.anchors.is_empty()
            && self.retired.is_empty()
        {
            return;
        }
        self.retire_anchors();
        Python::with_gil(|_| {
            // SAFETY: the GIL is held and the memo owns these references; no view borrows
            // outside a render, and `clear` never runs inside one.
            unsafe {
                self.release_retired();
                self.sweep_all();
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
    /// The memo, unless a render is using it (the GIL is held by the caller, so only a
    /// render up the same thread's stack can hold the lock).
    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, SendMemo>> {
        match self.memo.try_lock() {
            Ok(guard) => Some(guard),
            Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut SizeMemo) -> R) -> PyResult<R> {
        match self.try_lock() {
            Some(mut guard) => Ok(f(&mut guard.0)),
            None => Err(PyRuntimeError::new_err(
                "the size memo is in use by a render (called from a protection predicate?)",
            )),
        }
    }
}

#[pymethods]
impl PySizeMemo {
    /// `resume=False`: every frozen render reads the whole list (as before resumed renders;
    /// for comparisons and tests of the full path).
    #[new]
    #[pyo3(signature = (*, resume = true))]
    fn new(resume: bool) -> Self {
        let mut memo = SizeMemo::default();
        memo.resuming = resume;
        PySizeMemo {
            memo: Mutex::new(SendMemo(memo)),
        }
    }

    /// Whether frozen renders resume from the previous one.
    #[getter]
    fn resuming(&self) -> PyResult<bool> {
        self.with(|memo| memo.resuming)
    }

    /// Number of messages remembered.
    fn __len__(&self) -> PyResult<usize> {
        self.with(|memo| memo.entries.len() + memo.prefix.len())
    }

    /// How many of them the frozen prefix holds (the leading messages of the latest
    /// frozen render, reused without a lookup).
    #[getter]
    fn prefix(&self) -> PyResult<usize> {
        self.with(|memo| memo.prefix.len())
    }

    /// `(hits, misses)` of the lookups so far (a miss: a message new to the memo, or changed).
    #[getter]
    fn stats(&self) -> PyResult<(u64, u64)> {
        self.with(|memo| (memo.hits, memo.misses))
    }

    /// How frozen renders went: `resumed` (only the new messages decided), `restarted`
    /// (decided from an earlier restart point after an index change), `full` (the whole
    /// list), `stale` (the previous render's index, options or list did not apply) and the
    /// count of each fallback reason.
    #[getter]
    fn resume_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
        let stats = self.with(|memo| memo.resume_stats)?;
        let out = pyo3::types::PyDict::new(py);
        out.set_item("resumed", stats.resumed)?;
        out.set_item("restarted", stats.restarted)?;
        out.set_item("full", stats.full)?;
        out.set_item("stale", stats.stale)?;
        for (why, count) in FALLBACKS.iter().zip(stats.fallbacks) {
            out.set_item(why.as_str(), count)?;
        }
        Ok(out)
    }

    /// Forgets every message (releases the references).
    fn clear(&self) -> PyResult<()> {
        self.with(SizeMemo::clear)
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
    // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
    unsafe {
        for &word in trail {
            let tag = word & TAG_MASK;
            if tag == TAG_LIST || tag == TAG_DICT {
                prefetch_body((word & !TAG_MASK) as Obj);
            }
        }
    }
}

/// The items of a list (borrowed: the list holds them).
///
/// # Safety
/// `list` must be a live list and the GIL held.
unsafe fn items_of(py: Python<'_>, list: Obj) -> PyResult<Vec<Obj>> {
    // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
    unsafe {
        let count = usize::try_from(ffi::PyList_Size(list)).map_err(|_| PyErr::fetch(py))?;
        let mut items = Vec::with_capacity(count);
        for i in 0..count {
            let item = ffi::PyList_GetItem(list, ffi::Py_ssize_t::try_from(i).unwrap_or(-1));
            if item.is_null() {
                return Err(PyErr::fetch(py));
            }
            items.push(item);
        }
        Ok(items)
    }
}

/// A message measured (or read) now: its position, object, length, trail (`None`: a
/// remembered one whose view is refreshed) and the span of its view's borrowed objects.
type Fresh = (usize, Obj, usize, Option<Recorded>, (usize, usize));

/// A message view as render reads it, its strings borrowed from the message's objects.
pub(crate) type View<'a> = MsgView<Cow<'a, str>>;

/// A view kept by an entry, with the fields it was read for. Made only by [`keep_view`].
struct KeptView {
    needs: Needs,
    /// Borrows from objects of the entry's trail (checked by [`keep_view`]); the entry
    /// drops it before it releases the trail.
    view: View<'static>,
}

/// Whether every object of `borrowed` is a leaf of `trail` (the trail holds a reference
/// to it).
fn all_in_trail(borrowed: &[Obj], trail: &[usize]) -> bool {
    borrowed.iter().all(|&obj| {
        let address = obj as usize;
        address & TAG_MASK == 0 && trail.contains(&(address | TAG_LEAF))
    })
}

/// `view` (read with `needs`, its strings borrowed from the str objects `borrowed`) kept
/// for an entry whose trail is `trail`; `None` unless the trail holds every one of those
/// objects. The memo hands a kept view out only after checking the whole trail again
/// ([`same_tree`]), so the strings it borrows are exactly objects the memo both holds and
/// checks: what the reader reads is recorded by the reader, not assumed here.
fn keep_view(view: &View<'_>, needs: Needs, borrowed: &[Obj], trail: &[usize]) -> Option<KeptView> {
    if !all_in_trail(borrowed, trail) {
        return None;
    }
    // SAFETY: every string the view borrows is the text of an object of `borrowed`
    // (the reader logs each one), each held by a strong reference of the trail, which
    // the entry releases only after dropping the view; str objects are immutable.
    let view = unsafe { std::mem::transmute::<View<'_>, View<'static>>(view.clone()) };
    Some(KeptView { needs, view })
}

/// The length of every message of `list` and its view (`read(i, message)`), reusing what
/// `memo` remembers of the messages that are still made of the very same objects, and
/// remembering the others. Views are remembered and reused only when `needs` (the fields
/// `read` reads) is given. Without a memo this is [`Measurer::len_each_then`] with `read`
/// called right after each message is measured (while its objects are in the CPU caches).
///
/// Remembered messages are checked in a pipeline: the containers of the messages a few
/// places ahead are prefetched, so that the cache misses of the check overlap. A first
/// render (nothing remembered) measures the whole list in the measurer's own pipeline.
///
/// For a frozen render the leading messages that are the memo's prefix (`prefix`) are not
/// looked up: their lengths are copied and their views lent (`Measured::lent` of them; the
/// caller gives them back with [`SizeMemo::settle`]).
///
/// # Safety
/// `list` must be a live list and the GIL held; `read` must not run Python code and must
/// only borrow strings from the message it is given.
pub(crate) unsafe fn measure_and_read<'a>(
    py: Python<'_>,
    list: Obj,
    memo: Option<&mut SizeMemo>,
    needs: Option<Needs>,
    borrowed: &RefCell<Vec<Obj>>,
    mut read: impl FnMut(usize, Obj) -> PyResult<View<'a>>,
) -> PyResult<Measured<'a>> {
    // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
    unsafe {
        let count = usize::try_from(ffi::PyList_Size(list)).map_err(|_| PyErr::fetch(py))?;
        // One view per message: allocated at once (a view is large; growing the vector
        // would copy them all again and again).
        let mut views = Vec::with_capacity(count);
        // Where the objects each read view borrows from end in `borrowed` (by list position).
        let mut spans: Vec<(usize, usize)> = Vec::new();
        let Some(memo) = memo else {
            let lens = Measurer::new(py).len_each_then(py, list, |i, item| {
                views.push(read(i, item)?);
                Ok(())
            })?;
            return Ok(Measured::new(lens, views, 0));
        };
        // Nothing borrows yet (the views are read below): the previous anchors can go.
        memo.release_retired();
        memo.begin();
        let items = items_of(py, list)?;
        let matched = memo.match_prefix(&items, needs);
        let remembered_any = matched > 0
            || (!memo.entries.is_empty()
                && items
                    .iter()
                    .any(|&item| memo.entries.contains_key(&(item as usize))));
        if !remembered_any {
            // Nothing of this list is remembered: the entries (if any) are stale.
            memo.sweep_all();
            if !memo.anchored(&items) {
                memo.anchor(&items);
                // Objects never seen before: measured without recording (module docs).
                let lens = Measurer::new(py).len_each_then(py, list, |i, item| {
                    views.push(read(i, item)?);
                    Ok(())
                })?;
                memo.misses += lens.len() as u64;
                return Ok(Measured::new(lens, views, 0));
            }
            let (lens, trails) =
                Measurer::new(py).len_each_recorded_then(py, list, |i, item| {
                    let start = borrowed.borrow().len();
                    views.push(read(i, item)?);
                    spans.push((start, borrowed.borrow().len()));
                    Ok(())
                })?;
            // Remembered now (a render that failed keeps the anchors for the next one).
            memo.retire_anchors();
            memo.misses += lens.len() as u64;
            let log = borrowed.borrow();
            for (i, ((&item, len), trail)) in items.iter().zip(&lens).zip(trails).enumerate() {
                match (trail, views.get(i)) {
                    (Some(trail), Some(view)) => {
                        let kept = needs.and_then(|needs| {
                            let span = spans.get(i).and_then(|&(a, b)| log.get(a..b))?;
                            keep_view(view, needs, span, &trail)
                        });
                        memo.remember(item, *len, trail, kept);
                    }
                    (Some(trail), None) => release(&trail),
                    (None, _) => {}
                }
            }
            return Ok(Measured::new(lens, views, 0));
        }
        // The entries know this host's objects now: the anchors are not needed.
        memo.retire_anchors();
        let count = items.len();
        let frozen = memo.frozen;
        let generation = memo.generation;
        let before = memo.entries.len();
        let (mut lens, lent) = memo.lend_prefix(matched);
        views = lent;
        lens.reserve(count.saturating_sub(matched));
        views.reserve(count.saturating_sub(matched));
        // Messages measured now (`trail: None` - a remembered one whose view is refreshed),
        // with where the objects their views borrow from are in `borrowed`.
        let mut fresh: Vec<Fresh> = Vec::new();
        let (mut hits, mut misses) = (0, 0);
        // Remembered entries seen by this render (a message may be listed twice).
        let mut distinct = 0;
        {
            let tail = items.get(matched..).unwrap_or_default();
            let found: Vec<Option<&Entry>> = tail
                .iter()
                .map(|&item| memo.entries.get(&(item as usize)).map(|entry| &**entry))
                .collect();
            let mut measurer = Measurer::new(py);
            let mut failed = None;
            for (j, &item) in tail.iter().enumerate() {
                let i = matched + j;
                if let Some(Some(ahead)) = found.get(j + 2 * AHEAD) {
                    let entry: *const Entry = *ahead;
                    prefetch(entry.cast::<u8>());
                }
                if !frozen {
                    if let Some(Some(ahead)) = found.get(j + AHEAD) {
                        prefetch_headers(&ahead.trail);
                    }
                    if let Some(Some(ahead)) = found.get(j + AHEAD / 2) {
                        prefetch_tables(&ahead.trail);
                    }
                }
                let remembered = found.get(j).copied().flatten().filter(|entry| {
                    let mut pos = 0;
                    frozen || (same_tree(item, &entry.trail, &mut pos) && pos == entry.trail.len())
                });
                match remembered {
                    Some(entry) => {
                        if entry.seen.replace(generation) != generation {
                            distinct += 1;
                        }
                        hits += 1;
                        lens.push(entry.len);
                        match entry.view.as_ref().filter(|kept| Some(kept.needs) == needs) {
                            Some(kept) => views.push(kept.view.clone()),
                            None => {
                                let start = borrowed.borrow().len();
                                match read(i, item) {
                                    Ok(view) => views.push(view),
                                    Err(err) => {
                                        failed = Some(err);
                                        break;
                                    }
                                }
                                if needs.is_some() {
                                    let span = (start, borrowed.borrow().len());
                                    fresh.push((i, item, entry.len, None, span));
                                }
                            }
                        }
                    }
                    None => {
                        misses += 1;
                        let (len, trail) = match measurer.len_recorded(py, item) {
                            Ok(measured) => measured,
                            Err(err) => {
                                failed = Some(err);
                                break;
                            }
                        };
                        lens.push(len);
                        let start = borrowed.borrow().len();
                        match read(i, item) {
                            Ok(view) => views.push(view),
                            Err(err) => {
                                if let Some(trail) = trail {
                                    release(&trail);
                                }
                                failed = Some(err);
                                break;
                            }
                        }
                        if trail.is_some() {
                            fresh.push((i, item, len, trail, (start, borrowed.borrow().len())));
                        }
                    }
                }
            }
            if let Some(err) = failed {
                // The references of the trails recorded so far go back.
                for (_, _, _, trail, _) in fresh {
                    if let Some(trail) = trail {
                        release(&trail);
                    }
                }
                return Err(err);
            }
        }

        memo.hits += hits;
        memo.misses += misses;
        let log = borrowed.borrow();
        for (i, item, len, trail, (start, end)) in fresh {
            let view = views.get(i).zip(needs).zip(log.get(start..end));
            match trail {
                Some(trail) => {
                    let kept =
                        view.and_then(|((view, needs), span)| keep_view(view, needs, span, &trail));
                    memo.remember(item, len, trail, kept);
                }
                None => {
                    if let Some(entry) = memo.entries.get_mut(&(item as usize)) {
                        entry.view = view.and_then(|((view, needs), span)| {
                            keep_view(view, needs, span, &entry.trail)
                        });
                    }
                }
            }
        }
        // Nothing to release when every remembered entry was seen (the usual case: the same
        // history again, plus new messages).
        if distinct < before {
            memo.sweep();
        }
        Ok(Measured::new(lens, views, matched))
    }
}

/// What [`measure_and_read`] gives: the length and view of every message, the first
/// `lent` views lent by the memo's prefix (to be given back: [`SizeMemo::settle`]).
pub(crate) struct Measured<'a> {
    pub(crate) lens: Vec<usize>,
    pub(crate) views: Vec<View<'a>>,
    pub(crate) lent: usize,
}

impl<'a> Measured<'a> {
    fn new(lens: Vec<usize>, views: Vec<View<'a>>, lent: usize) -> Self {
        Measured { lens, views, lent }
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySizeMemo>()?;
    Ok(())
}

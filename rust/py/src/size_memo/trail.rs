//! Trails: every object of a message's tree in walk order, each held by a strong
//! reference (module docs of `size_memo`). Recorded by the measuring walk through
//! [`Recorder`]; checked again, object by object, by [`same_tree`].

use std::ptr::{addr_of_mut, null_mut};

use pyo3::ffi;
use pyo3::prelude::*;

use crate::cpython::{DictMembers, list_items as list_slice};
use crate::json::{Measurer, Recorder};

use crate::cpython::Obj;

/// Deepest container nesting a remembered message may have.
const MAX_DEPTH: usize = 128;

/// Trail words: an object address with a tag in its two low bits (objects are at least
/// 4-byte aligned), or a container's size.
pub(super) const TAG_MASK: usize = 0b11;
pub(super) const TAG_LEAF: usize = 0b00;
pub(super) const TAG_DICT: usize = 0b01;
pub(super) const TAG_LIST: usize = 0b10;
const TAG_COUNT: usize = 0b11;

/// Whether `obj` is a leaf the memo admits (immutable, with a length that only depends
/// on its value).
///
/// # Safety
/// `obj` must be a live object and the GIL held.
#[inline]
unsafe fn is_plain_leaf(obj: Obj) -> bool {
    // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
    unsafe {
        let ty = ffi::Py_TYPE(obj.as_ptr());
        ty == addr_of_mut!(ffi::PyUnicode_Type)
            || ty == addr_of_mut!(ffi::PyLong_Type)
            || ty == addr_of_mut!(ffi::PyFloat_Type)
            || ty == addr_of_mut!(ffi::PyBool_Type)
            || obj.is(ffi::Py_None())
    }
}

/// A finished trail (it owns a reference to each of its objects).
pub(crate) type Recorded = Box<[usize]>;

/// A trail being recorded by the measuring walk ([`len_recorded`]), in the walk's
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
            if obj.addr() & TAG_MASK != 0 {
                self.spoil();
            } else if !self.spoiled {
                ffi::Py_IncRef(obj.as_ptr());
                self.words.push(obj.addr() | tag);
            }
        }
    }
}

/// The trail of one value ([`len_recorded`]).
impl Recorder for Trail {
    const RECORDS: bool = true;

    /// A value that is not a dict, list or tuple.
    ///
    /// # Safety
    /// `obj` must be a live object and the GIL held.
    unsafe fn leaf(&mut self, obj: Obj) {
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
    unsafe fn open_dict(&mut self, dict: Obj, depth: u32) -> Option<usize> {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe {
            if ffi::Py_TYPE(dict.as_ptr()) != addr_of_mut!(ffi::PyDict_Type)
                || depth as usize >= MAX_DEPTH
            {
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
    unsafe fn key(&mut self, key: Obj) {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe {
            self.push_object(key, TAG_LEAF);
        }
    }

    /// The dict opened at `at` had `count` members (`plain`: all keys exact strs).
    ///
    /// # Safety
    /// The GIL must be held.
    unsafe fn close_dict(&mut self, at: usize, count: usize, plain: bool) {
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
    unsafe fn list(&mut self, list: Obj, count: usize, depth: u32) {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe {
            if ffi::Py_TYPE(list.as_ptr()) == addr_of_mut!(ffi::PyList_Type)
                && (depth as usize) < MAX_DEPTH
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

    fn end(&mut self) {}
}

/// The trails of the items of a list ([`len_each_recorded_then`]): the one being recorded,
/// and those of the items measured so far.
#[derive(Default)]
struct Trails {
    trail: Trail,
    done: Vec<Option<Recorded>>,
}

impl Recorder for Trails {
    const RECORDS: bool = true;

    #[inline]
    unsafe fn leaf(&mut self, obj: Obj) {
        // SAFETY: as the trait method's contract.
        unsafe { self.trail.leaf(obj) }
    }

    #[inline]
    unsafe fn open_dict(&mut self, dict: Obj, depth: u32) -> Option<usize> {
        // SAFETY: as the trait method's contract.
        unsafe { self.trail.open_dict(dict, depth) }
    }

    #[inline]
    unsafe fn key(&mut self, key: Obj) {
        // SAFETY: as the trait method's contract.
        unsafe { self.trail.key(key) }
    }

    #[inline]
    unsafe fn close_dict(&mut self, at: usize, count: usize, plain: bool) {
        // SAFETY: as the trait method's contract.
        unsafe { self.trail.close_dict(at, count, plain) }
    }

    #[inline]
    unsafe fn list(&mut self, list: Obj, count: usize, depth: u32) {
        // SAFETY: as the trait method's contract.
        unsafe { self.trail.list(list, count, depth) }
    }

    fn end(&mut self) {
        self.done.push(self.trail.finish());
    }
}

/// Whether `obj` is still the tree the trail recorded from `trail[*pos]` on; advances
/// `pos` past it.
///
/// # Safety
/// `obj` must be a live object and the GIL held; every object of `trail` must be alive
/// (the memo holds them).
pub(super) unsafe fn same_tree(obj: Obj, trail: &[usize], pos: &mut usize) -> bool {
    // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
    unsafe {
        let Some(&word) = trail.get(*pos) else {
            return false;
        };
        *pos += 1;
        let tag = word & TAG_MASK;
        if tag == TAG_LEAF {
            return word == obj.addr();
        }
        if word & !TAG_MASK != obj.addr() {
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
                if values.len() >= size || trail.get(*pos) != Some(&key.addr()) {
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
            ffi::PyList_Size(obj.as_ptr()) == size as ffi::Py_ssize_t
                && (0..size).all(|i| {
                    let item = ffi::PyList_GetItem(obj.as_ptr(), i as ffi::Py_ssize_t);
                    !item.is_null() && same_tree(Obj::from_ptr(item), trail, pos)
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
            inline: [Obj::from_ptr(null_mut()); 16],
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
                ffi::Py_DecRef((Obj::from_addr(word & !TAG_MASK)).as_ptr());
            }
        }
    }
}

/// [`Measurer::len`] of `root`, and its trail (`None` when the memo does not admit it),
/// recorded in `trail` (an empty buffer, handed back empty).
///
/// # Safety
/// `root` must be a live object and the GIL held.
pub(super) unsafe fn len_recorded(
    measurer: &mut Measurer,
    py: Python<'_>,
    root: Obj,
    trail: &mut Trail,
) -> PyResult<(usize, Option<Recorded>)> {
    // SAFETY: `root` is live (the caller's contract); the trail's references are its own.
    unsafe {
        match measurer.len_with(py, root.as_ptr(), trail) {
            Ok(len) => Ok((len, trail.finish())),
            Err(err) => {
                trail.discard();
                Err(err)
            }
        }
    }
}

/// [`Measurer::len_each_then`], and the trail of every item (`None` where the memo does
/// not admit it).
///
/// # Safety
/// `list` must be a live list and the GIL held.
pub(super) unsafe fn len_each_recorded_then(
    measurer: &mut Measurer,
    py: Python<'_>,
    list: Obj,
    then: impl FnMut(usize, Obj) -> PyResult<()>,
) -> PyResult<(Vec<usize>, Vec<Option<Recorded>>)> {
    // SAFETY: `list` is live (the caller's contract); the trails' references are their own.
    unsafe {
        let mut trails = Trails::default();
        let lens = measurer.len_each_with(py, list.as_ptr(), then, &mut trails);
        let Trails { mut trail, done } = trails;
        trail.discard(); // empty unless the walk failed inside an item
        match lens {
            Ok(lens) => Ok((lens, done)),
            Err(err) => {
                for finished in done.into_iter().flatten() {
                    release(&finished);
                }
                Err(err)
            }
        }
    }
}

//! Message views remembered, by list position, from one render that did not measure to
//! the next.
//!
//! A render whose state can neither stub nor compress (nothing summarized yet, no chain)
//! only reads views: the role of each message, the ids of its tool calls or its result,
//! a few flags. A host renders nearly the same list before every model call, so the next
//! render would read the very same fields of the very same objects again. This memo keeps
//! each position's view with what it was read from, and reuses it when nothing it was read
//! from can have changed - told without reading the fields again, by the dicts' version
//! tags ([`dict_version`]): CPython gives every dict a new tag, from a counter of the
//! whole interpreter, when it is made and at every change of its keys or values.
//!
//! A view depends on the message dict and, for an assistant (or a user message when
//! chains are compressed), on its `content` list and that list's block dicts. A position
//! is reused when its message is the same object with the same tag, and its content list
//! (the same object, since the message did not change) still holds the same block
//! objects, each with its tag. Equal tags of a live dict mean it did not change, and a
//! dict that took the address of a freed one has a tag never seen before; so the memo
//! holds no references, and a reused view is the view a fresh read would give. What the
//! tags cannot vouch for is not remembered: a message that is not an exact dict, a content
//! list holding anything but exact dicts, a summary message when chains are compressed
//! (its view reads nested lists), and everything where the tags are not available (other
//! Python versions): such positions are read on every render.
//!
//! The views borrow strings from the objects they were read from. A remembered view is
//! only handed out after the check above (so its strings are alive); a stale one is
//! dropped without being read.

use std::ptr::addr_of_mut;

use pi_condense_core::render::{MsgView, Needs, Role, Ts};
use pyo3::ffi;
use pyo3::prelude::*;

use crate::json::{dict_version, list_slice, prefetch};
use crate::render::{fields_of, K};
use crate::size_memo::View;

type Obj = *mut ffi::PyObject;

/// How many positions ahead of the check a remembered message and its blocks are
/// prefetched (blocks half as far ahead).
const AHEAD: usize = 8;

/// What one position's view was read from (all 0: nothing remembered there).
#[derive(Default)]
struct Slot {
    /// The message.
    msg: usize,
    /// Its version tag.
    version: u64,
    /// Its content list when the view read it (0: none), and the list's item array at
    /// the time (a prefetch hint only: never read through).
    list: usize,
    array: usize,
    /// The list's items, `(address, version tag)`, at `blocks[start..end]`.
    start: usize,
    end: usize,
}

/// Views by list position, valid while the dicts they were read from are unchanged
/// (module docs).
#[derive(Default)]
pub(crate) struct ReadMemo {
    /// The fields the views were read for.
    needs: Option<Needs>,
    slots: Vec<Slot>,
    /// The view at each position (read with `needs`), valid where its slot holds.
    views: Vec<View<'static>>,
    blocks: Vec<(usize, u64)>,
    /// Entries of `blocks` no slot points to any more.
    garbage: usize,
    reused: u64,
    read: u64,
}

/// Whether `obj` is an exact dict.
///
/// # Safety
/// `obj` must be a live object and the GIL held.
#[inline(always)]
unsafe fn is_exact_dict(obj: Obj) -> bool {
    ffi::Py_TYPE(obj) == addr_of_mut!(ffi::PyDict_Type)
}

impl ReadMemo {
    /// `(reused, read)`: views handed out from the memo and views read, so far.
    pub(crate) fn stats(&self) -> (u64, u64) {
        (self.reused, self.read)
    }

    pub(crate) fn clear(&mut self) {
        self.needs = None;
        self.slots = Vec::new();
        self.views = Vec::new();
        self.blocks = Vec::new();
        self.garbage = 0;
    }

    /// Whether position `i`'s remembered view still holds for `msg`.
    ///
    /// # Safety
    /// `msg` must be a live object and the GIL held.
    #[inline]
    unsafe fn holds(&self, py: Python<'_>, i: usize, msg: Obj) -> bool {
        let Some(slot) = self.slots.get(i) else {
            return false;
        };
        if slot.msg != msg as usize || !is_exact_dict(msg) || dict_version(msg) != slot.version {
            return false;
        }
        if slot.list == 0 {
            return true;
        }
        // The message did not change: its content is the very list read then.
        let (Some(items), Some(recorded)) = (
            list_slice(py, slot.list as Obj),
            self.blocks.get(slot.start..slot.end),
        ) else {
            return false;
        };
        items.len() == recorded.len()
            && items
                .iter()
                .zip(recorded)
                .all(|(&item, &(address, version))| {
                    item as usize == address && is_exact_dict(item) && dict_version(item) == version
                })
    }

    /// Requests what checking position `i` reads.
    #[inline]
    fn prefetch_message(&self, i: usize) {
        if let Some(slot) = self.slots.get(i) {
            prefetch(slot.msg as *const u8);
            if slot.list != 0 {
                prefetch(slot.list as *const u8);
                prefetch(slot.array as *const u8);
            }
        }
    }

    /// Requests the block headers of position `i`.
    #[inline]
    fn prefetch_blocks(&self, i: usize) {
        if let Some(slot) = self.slots.get(i) {
            for &(address, _) in self.blocks.get(slot.start..slot.end).unwrap_or_default() {
                prefetch(address as *const u8);
            }
        }
    }

    /// Remembers `view`, just read from `msg`, at position `i` (its slot is left empty
    /// when the tags cannot vouch for the view).
    ///
    /// # Safety
    /// `msg` must be a live object and the GIL held; `view` must have been read from
    /// `msg` with the memo's needs, without Python code running since.
    unsafe fn remember(&mut self, py: Python<'_>, i: usize, msg: Obj, view: View<'_>) {
        let slot = self.slot_for(py, msg, &view).unwrap_or_default();
        // SAFETY: the view is only handed out for a later render while every object it
        // borrows from is unchanged (hence alive): see `holds`.
        let view = std::mem::transmute::<View<'_>, View<'static>>(view);
        while self.slots.len() < i {
            self.slots.push(Slot::default());
            self.views.push(MsgView::new(Role::Other, Ts::Absent));
        }
        match (self.slots.get_mut(i), self.views.get_mut(i)) {
            (Some(old), Some(old_view)) => {
                self.garbage += old.end - old.start;
                *old = slot;
                *old_view = view;
            }
            _ => {
                self.slots.push(slot);
                self.views.push(view);
            }
        }
    }

    /// The slot of `view`, read from `msg` (its blocks appended to `blocks`).
    ///
    /// # Safety
    /// As [`ReadMemo::remember`].
    unsafe fn slot_for(&mut self, py: Python<'_>, msg: Obj, view: &View<'_>) -> Option<Slot> {
        let needs = self.needs?;
        if !is_exact_dict(msg) {
            return None;
        }
        let version = dict_version(msg);
        if version == 0 {
            return None;
        }
        let reads_content = match view.role {
            Role::Assistant => true,
            Role::User => needs.chain,
            Role::Custom => {
                if needs.chain {
                    return None;
                }
                false
            }
            Role::ToolResult | Role::Other => false,
        };
        let mut slot = Slot {
            msg: msg as usize,
            version,
            ..Slot::default()
        };
        if reads_content {
            // Found as the reader finds it (no hash lookup: no key's `__eq__` runs).
            let [content] = fields_of(msg, [K::Content]);
            if let Some(content) = content.filter(|&c| ffi::PyList_Check(c) != 0) {
                let items = list_slice(py, content)?;
                let start = self.blocks.len();
                for &item in items {
                    if !is_exact_dict(item) {
                        self.blocks.truncate(start);
                        return None;
                    }
                    self.blocks.push((item as usize, dict_version(item)));
                }
                slot.list = content as usize;
                slot.array = items.as_ptr() as usize;
                slot.start = start;
                slot.end = self.blocks.len();
            }
        }
        Some(slot)
    }

    /// Drops the positions past `len` and packs `blocks` when mostly unused.
    fn finish(&mut self, len: usize) {
        for slot in self.slots.drain(len.min(self.slots.len())..) {
            self.garbage += slot.end - slot.start;
        }
        self.views.truncate(len);
        if self.garbage * 2 > self.blocks.len() {
            let mut packed = Vec::with_capacity(self.blocks.len() - self.garbage);
            for slot in &mut self.slots {
                let start = packed.len();
                packed.extend_from_slice(self.blocks.get(slot.start..slot.end).unwrap_or_default());
                (slot.start, slot.end) = (start, packed.len());
            }
            self.blocks = packed;
            self.garbage = 0;
        }
    }
}

/// The views of `items` (read with `needs`), reusing the memo's where they still hold
/// and reading the others with `read` (all at once, in the reader's pipeline); the views
/// read are remembered. The views are the memo's own (none is copied).
///
/// # Safety
/// `items` must be live objects (held by the caller's list) and the GIL held; `read` must
/// read views without running Python code, borrowing only from the messages it is given.
/// The views returned borrow from `items`' objects: they may be used only while those are
/// unchanged and alive (no Python code may run meanwhile).
pub(crate) unsafe fn read_views<'m, 'a>(
    py: Python<'_>,
    items: &[Obj],
    memo: &'m mut ReadMemo,
    needs: Needs,
    read: impl FnOnce(&[Obj]) -> PyResult<Vec<View<'a>>>,
) -> PyResult<&'m [View<'static>]> {
    if memo.needs != Some(needs) {
        memo.clear();
        memo.needs = Some(needs);
    }
    let mut missing: Vec<usize> = Vec::new();
    for (i, &msg) in items.iter().enumerate() {
        memo.prefetch_message(i + AHEAD);
        memo.prefetch_blocks(i + AHEAD / 2);
        if !memo.holds(py, i, msg) {
            missing.push(i);
        }
    }
    memo.reused += (items.len() - missing.len()) as u64;
    memo.read += missing.len() as u64;
    if !missing.is_empty() {
        let batch: Vec<Obj> = missing
            .iter()
            .filter_map(|&i| items.get(i).copied())
            .collect();
        let read_views = match read(&batch) {
            Ok(views) => views,
            Err(err) => {
                // Positions may be half updated: start afresh next time.
                memo.clear();
                return Err(err);
            }
        };
        for ((&i, &msg), view) in missing.iter().zip(&batch).zip(read_views) {
            memo.remember(py, i, msg, view);
        }
    }
    memo.finish(items.len());
    Ok(memo.views.get(..items.len()).unwrap_or_default())
}

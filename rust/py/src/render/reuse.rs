//! A frozen host's new messages handed out again.
//!
//! Before every model call a host renders its history again, and the render builds the
//! same stubs, assistant copies and `<compressed-chain>` messages again: thousands of dicts
//! built, measured and freed per call on a long session. For a host that makes the frozen
//! promise (nothing it handed over is edited in place, and that now includes what render
//! returned), an output whose plan item equals the previous render's and that is made from
//! the very same input objects is that render's message object again, with its remembered
//! length.
//!
//! Exact by identity plus strong references: a kept output holds a reference to each input
//! object it was made from (the source message, the messages its text quotes, the chain
//! entry's object), so none of their addresses can be reused by another object while it is
//! kept. A broken promise gives the edited object back (stale), never unsafe memory: nothing
//! here borrows; every address is an owned reference.

use pi_condense_core::render::{FastMap, Item, Piece};
use pyo3::ffi;
use pyo3::prelude::*;

use crate::index::PyIndex;
use crate::jsread::{Obj, list_item};

/// What an output is made from, by kind and its first source.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Key {
    Stub(usize),
    Assistant(usize),
    Synthetic(usize),
}

/// What an output is made from: its key and its sources (owned references).
pub(crate) type Made = (Key, Vec<Obj>);

/// A new message of an earlier render.
struct Kept {
    item: Item,
    /// The input objects it was made from (owned references), in `sources` order.
    sources: Vec<usize>,
    /// The output message (an owned reference).
    message: usize,
    /// Its length, once measured.
    len: Option<usize>,
    /// The render that last handed it out.
    seen: u64,
}

/// The new messages of the latest frozen render (`SizeMemo::outputs`).
#[derive(Default)]
pub(crate) struct Outputs {
    kept: FastMap<Key, Kept>,
    generation: u64,
    /// Outputs built by this render whose length is measured after the apply.
    pending: Vec<(usize, Key)>,
}

/// The input objects `item` is made from: its source message, the messages its text
/// quotes (by position) and, for a chain message, the chain entry's object, each as a new
/// reference (taken at once: the apply may run Python code later, through a key's
/// `__eq__`). `None` when a position is outside the list (the apply then reports it).
///
/// # Safety
/// `list` must be a live list and the GIL held.
unsafe fn sources(py: Python<'_>, list: Obj, index: &PyIndex, item: &Item) -> Option<Made> {
    // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
    let found = unsafe { borrowed_sources(py, list, index, item) };
    if let Some((_, objects)) = &found {
        for &object in objects {
            // SAFETY: each object was just read from the live list or the index (nothing
            // ran since); the caller now owns this reference.
            unsafe { ffi::Py_IncRef(object.as_ptr()) };
        }
    }
    found
}

/// [`sources`], borrowed.
///
/// # Safety
/// `list` must be a live list and the GIL held.
unsafe fn borrowed_sources(
    py: Python<'_>,
    list: Obj,
    index: &PyIndex,
    item: &Item,
) -> Option<Made> {
    // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
    unsafe {
        let at = |i: usize| list_item(list, i);
        let quoted = |text: &pi_condense_core::render::Text, out: &mut Vec<Obj>| -> Option<()> {
            for piece in &text.0 {
                match piece {
                    Piece::ToolCallId(i) | Piece::ToolName(i) | Piece::ToolResultText(i) => {
                        out.push(at(*i)?);
                    }
                    Piece::Lit(_) | Piece::Wtf8(_) => {}
                }
            }
            Some(())
        };
        match item {
            // Made only by renders that do without the memo.
            Item::Keep(_) | Item::Superseded { .. } => None,
            Item::Stub { src, text } => {
                let mut out = vec![at(*src)?];
                quoted(text, &mut out)?;
                Some((Key::Stub(out[0].addr()), out))
            }
            Item::Assistant { src, .. } => {
                let msg = at(*src)?;
                Some((Key::Assistant(msg.addr()), vec![msg]))
            }
            Item::Synthetic {
                text, chain_slot, ..
            } => {
                let mut out = Vec::new();
                if let Some(entry) = index.core().chain_at(*chain_slot) {
                    // The index holds the entry object: the pointer outlives the handle.
                    out.push(Obj::of(&index.chain_object(py, entry)));
                }
                quoted(text, &mut out)?;
                Some((Key::Synthetic(*chain_slot), out))
            }
        }
    }
}

impl Outputs {
    /// Starts a frozen render's apply.
    pub(crate) fn begin(&mut self) {
        self.generation += 1;
        self.pending.clear();
    }

    /// The message an earlier render made for `item` from the same objects (a new
    /// reference) and its length, if kept; else the key and sources (owned references) to
    /// keep the new one under ([`Outputs::keep`]).
    ///
    /// # Safety
    /// `list` must be a live list and the GIL held.
    pub(crate) unsafe fn find(
        &mut self,
        py: Python<'_>,
        list: Obj,
        index: &PyIndex,
        item: &Item,
        released: &mut Vec<usize>,
    ) -> Result<(Obj, Option<usize>), Option<Made>> {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        let Some((key, sources)) = (unsafe { sources(py, list, index, item) }) else {
            return Err(None);
        };
        if let Some(kept) = self.kept.get_mut(&key) {
            let same = kept.item == *item
                && kept.sources.len() == sources.len()
                && kept
                    .sources
                    .iter()
                    .zip(&sources)
                    .all(|(&a, &b)| a == b.addr());
            if same && kept.seen != self.generation {
                kept.seen = self.generation;
                let message = Obj::from_addr(kept.message);
                // SAFETY: the entry owns a reference to the message (alive); the GIL is held.
                unsafe { ffi::Py_IncRef(message.as_ptr()) };
                // The references just taken go back once the render is done.
                released.extend(sources.into_iter().map(|s| s.addr()));
                return Ok((message, kept.len));
            }
        }
        Err(Some((key, sources)))
    }

    /// Keeps `message` (built now at output slot `pos` for `item` from `sources`, whose
    /// references it takes over) for the next frozen render; an output kept before under
    /// the same key is retired into `released` (released once the render is done).
    ///
    /// # Safety
    /// `message` must be a live object, `sources` owned references, the GIL held.
    pub(crate) unsafe fn keep(
        &mut self,
        pos: usize,
        key: Key,
        sources: Vec<Obj>,
        item: &Item,
        message: Obj,
        released: &mut Vec<usize>,
    ) {
        // SAFETY: `# Safety` above (the borrow rule, lib.rs): the message is
        // live, and the kept output now owns one reference to it.
        unsafe { ffi::Py_IncRef(message.as_ptr()) };
        let kept = Kept {
            item: item.clone(),
            sources: sources.into_iter().map(|s| s.addr()).collect(),
            message: message.addr(),
            len: None,
            seen: self.generation,
        };
        if let Some(old) = self.kept.insert(key, kept) {
            retire(old, released);
        }
        self.pending.push((pos, key));
    }

    /// The measured lengths of the outputs kept by this render (`lens` by output slot).
    pub(crate) fn measured(&mut self, lens: &[usize]) {
        for (pos, key) in std::mem::take(&mut self.pending) {
            if let (Some(kept), Some(&len)) = (self.kept.get_mut(&key), lens.get(pos)) {
                kept.len = Some(len);
            }
        }
    }

    /// Retires the outputs this render did not hand out into `released`.
    pub(crate) fn sweep(&mut self, released: &mut Vec<usize>) {
        let generation = self.generation;
        let stale: Vec<Key> = self
            .kept
            .iter()
            .filter(|(_, kept)| kept.seen != generation)
            .map(|(key, _)| *key)
            .collect();
        for key in stale {
            if let Some(old) = self.kept.remove(&key) {
                retire(old, released);
            }
        }
    }

    /// Retires every output into `released`.
    pub(crate) fn clear(&mut self, released: &mut Vec<usize>) {
        self.pending.clear();
        for (_, old) in self.kept.drain() {
            retire(old, released);
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }
}

/// The references of a kept output, to be released by the caller.
fn retire(kept: Kept, released: &mut Vec<usize>) {
    released.push(kept.message);
    released.extend(kept.sources);
}

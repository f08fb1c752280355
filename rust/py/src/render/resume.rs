//! A frozen render resumed from the previous one: only the new messages are read, decided,
//! measured and built (`pi_condense_core::render::resume` says what the core carries and
//! when it falls back to a full render).
//!
//! The previous frozen render leaves a [`Continuation`] in the size memo: the core's
//! [`Resume`], the stamps of the index state and render options it was made against, and
//! owned references to its input and output messages with their summed lengths. The next
//! frozen render resumes when the stamps are the same and its list starts with the very same
//! input objects (compared by address: the continuation holds them, so no other object can
//! have taken one of their addresses). Its output is the previous output followed by the
//! new messages' items; its sizes are the sums plus the new messages'.
//!
//! Soundness: nothing borrows across calls. The core's state is owned data; the views of
//! the new messages are read, decided on and dropped before any Python code can run (the
//! apply). A host that breaks the frozen promise (edits an old message in place) gets the
//! previous decision and objects for it again, stale but alive.

use pi_condense_core::render::size::list_len;
use pi_condense_core::render::{self as core_render, Fallback, Item, Needs, Resume};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyList;
use std::cell::RefCell;

use super::apply::{build, Writer};
use super::extract::Reader;
use super::options::{PyRenderOptions, PyRenderOutcome};
use super::sizes::ArgLens;
use crate::cpython::list_items as list_slice;
use crate::index::PyIndex;
use crate::json::Measurer;
use crate::jsread::{Keys, Obj};
use crate::size_memo::SizeMemo;

/// What a frozen render leaves for the next one (module docs).
pub(crate) struct Continuation {
    /// Taken out while a render resumes from it.
    core: Option<Resume>,
    index: u64,
    options: u64,
    /// The input messages, in order (owned references).
    inputs: Vec<usize>,
    /// The output messages, in order (owned references); empty when nothing changed.
    outputs: Vec<usize>,
    /// The inputs' lengths, summed (when the render changed something).
    input_chars: usize,
    /// The outputs' lengths, summed.
    output_chars: usize,
}

impl Continuation {
    /// The continuation of a full frozen render of `inputs` into `outputs` (`None`: it
    /// changed nothing), taking a reference to each.
    ///
    /// # Safety
    /// The GIL must be held and `inputs` live objects.
    pub(crate) unsafe fn new(
        core: Resume,
        index: &PyIndex,
        options: &PyRenderOptions,
        inputs: &[Obj],
        outputs: Option<(&Bound<'_, PyList>, usize)>,
        input_chars: usize,
    ) -> Self {
        let take = |objects: &mut dyn Iterator<Item = Obj>| -> Vec<usize> {
            objects
                .map(|obj| {
                    // SAFETY: a live object (the caller's contract, or an item of the live
                    // output list); the GIL is held; the continuation owns this reference.
                    unsafe { ffi::Py_IncRef(obj) };
                    obj as usize
                })
                .collect()
        };
        let output_chars = outputs.map_or(0, |(_, chars)| chars);
        let outputs = match outputs {
            // SAFETY: the list is alive (the caller holds it) and the GIL is held.
            Some((list, _)) => take(&mut unsafe { crate::jsread::list_items(list.as_ptr()) }),
            None => Vec::new(),
        };
        Continuation {
            core: Some(core),
            index: index.stamp(),
            options: options.stamp,
            inputs: take(&mut inputs.iter().copied()),
            outputs,
            input_chars,
            output_chars,
        }
    }

    /// Hands its references over to `released` (released once nothing borrows).
    pub(crate) fn retire(self, released: &mut Vec<usize>) {
        released.extend(self.inputs);
        released.extend(self.outputs);
    }
}

/// How resumed renders went (`SizeMemo.resume_stats`).
#[derive(Default, Clone, Copy)]
pub(crate) struct ResumeStats {
    /// Renders resumed from the previous one.
    pub(crate) resumed: u64,
    /// Frozen renders of the whole list (nothing to resume from, or a fallback).
    pub(crate) full: u64,
    /// Fallbacks, by [`FALLBACKS`] position.
    pub(crate) fallbacks: [u64; FALLBACKS.len()],
    /// Continuations that did not apply (another index state or options, another list).
    pub(crate) stale: u64,
}

/// The fallbacks counted, in [`ResumeStats::fallbacks`] order.
pub(crate) const FALLBACKS: [Fallback; 7] = [
    Fallback::Grace,
    Fallback::Errored,
    Fallback::Cooldown,
    Fallback::Range,
    Fallback::Summary,
    Fallback::Throws,
    Fallback::FirstChange,
];

impl ResumeStats {
    fn fell_back(&mut self, why: Fallback) {
        if let Some(at) = FALLBACKS.iter().position(|&f| f == why) {
            if let Some(count) = self.fallbacks.get_mut(at) {
                *count += 1;
            }
        }
    }
}

/// The items of `list` (borrowed: the list holds them).
///
/// # Safety
/// `list` must be a live list and the GIL held.
unsafe fn items_of(list: Obj) -> Vec<Obj> {
    // SAFETY: the caller upholds this function's `# Safety` contract.
    unsafe {
        match list_slice(list) {
            Some(items) => items.to_vec(),
            None => crate::jsread::list_items(list).collect(),
        }
    }
}

/// The render of `messages` resumed from the memo's continuation, or `None` when there is
/// none that applies (the caller renders the whole list; the continuation is retired).
pub(super) fn resume(
    messages: &Bound<'_, PyList>,
    index: &PyIndex,
    options: &PyRenderOptions,
    keys: &Keys<'_>,
    memo: &mut SizeMemo,
) -> PyResult<Option<PyRenderOutcome>> {
    let py = messages.py();
    let Some(cont) = memo.resume.take() else {
        return Ok(None);
    };
    // SAFETY: the list is alive (the caller holds it) and the GIL is held.
    let items = unsafe { items_of(messages.as_ptr()) };
    let n = cont.inputs.len();
    let same = cont.index == index.stamp()
        && cont.options == options.stamp
        && items.len() >= n
        && cont
            .inputs
            .iter()
            .zip(&items)
            .all(|(&held, &item)| held == item as usize);
    if !same {
        memo.resume_stats.stale += 1;
        cont.retire(&mut memo.retired);
        return Ok(None);
    }
    let tail = items.get(n..).unwrap_or_default();
    let cfg = options.config();
    let state = index.core();
    let reader = Reader {
        py,
        keys,
        needs: Needs::of(state, &cfg),
        borrowed: RefCell::new(Vec::new()),
    };
    let mut lazy = ArgLens {
        messages,
        keys,
        error: RefCell::new(None),
        measurer: None,
    };
    let mut cont = cont;
    let Some(core) = cont.core.take() else {
        cont.retire(&mut memo.retired);
        return Ok(None);
    };
    let decided = {
        // SAFETY: the list is alive and the GIL held; the views borrow strings from the new
        // messages (held by the list), and no Python code runs until they are dropped at the
        // end of this block (reading, deciding and `lazy` run none).
        let views = unsafe { reader.read_all(tail) };
        views
            .ok()
            .map(|views| core_render::resume_render(core, &views, state, &cfg, &mut lazy))
    };
    let (core, plan) = match (decided, lazy.error.into_inner()) {
        (Some(Ok(done)), None) => done,
        (decided, _) => {
            // A fallback, or a value the full render reads differently (it raises, or
            // reports where).
            let why = match decided {
                Some(Err(why)) => why,
                _ => Fallback::Throws,
            };
            memo.resume_stats.fell_back(why);
            cont.retire(&mut memo.retired);
            return Ok(None);
        }
    };
    cont.core = Some(core);
    let diagnostics: Vec<(&'static str, String, String)> = plan
        .diagnostics
        .into_iter()
        .map(|d| (d.kind.as_str(), d.dedup_key, d.detail))
        .collect();
    let take_tail = |cont: &mut Continuation| {
        for &item in tail {
            // SAFETY: an item of the live list (the GIL is held); the continuation owns
            // this reference.
            unsafe { ffi::Py_IncRef(item) };
            cont.inputs.push(item as usize);
        }
    };
    memo.hits += n as u64;
    memo.misses += tail.len() as u64;
    let Some(tail_items) = plan.items else {
        take_tail(&mut cont);
        memo.resume = Some(cont);
        memo.resume_stats.resumed += 1;
        return PyRenderOutcome::new(py, messages.clone(), false, 0, 0, diagnostics, false)
            .map(Some);
    };
    // The new messages' lengths, then their outputs.
    let mut measurer = Measurer::new(py);
    let mut tail_lens = Vec::with_capacity(tail.len());
    for &item in tail {
        // SAFETY: the item is held by the live list; the GIL is held; measuring runs no
        // Python code.
        match unsafe { measurer.len(py, item) } {
            Ok(len) => tail_lens.push(len),
            Err(_) => {
                // The full render raises it, where it must.
                memo.resume_stats.fell_back(Fallback::Throws);
                cont.retire(&mut memo.retired);
                return Ok(None);
            }
        }
    }
    let writer = Writer { py, keys, messages };
    let built = build_tail(&writer, index, &tail_items, (&tail_lens, n));
    let (new_outputs, new_lens) = match built {
        Ok(built) => built,
        Err(err) => {
            cont.retire(&mut memo.retired);
            return Err(err);
        }
    };
    let out_count = cont.outputs.len() + new_outputs.len();
    let Ok(count) = ffi::Py_ssize_t::try_from(out_count) else {
        cont.retire(&mut memo.retired);
        release_now(&new_outputs);
        return Err(pyo3::exceptions::PyValueError::new_err("too many messages"));
    };
    // SAFETY: the GIL is held; a new list of `count` empty slots, each filled once below
    // with a new reference that `PyList_SetItem` steals.
    let out = match unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyList_New(count)) } {
        Ok(out) => out,
        Err(err) => {
            cont.retire(&mut memo.retired);
            release_now(&new_outputs);
            return Err(err);
        }
    };
    for (at, &obj) in cont.outputs.iter().chain(&new_outputs).enumerate() {
        let obj = obj as Obj;
        // SAFETY: `obj` is alive (the continuation or `new_outputs` owns a reference); the
        // list gets a new reference for the slot it steals; `at < count`.
        unsafe {
            ffi::Py_IncRef(obj);
            ffi::PyList_SetItem(out.as_ptr(), at as ffi::Py_ssize_t, obj);
        }
    }
    let added_in: usize = tail_lens.iter().sum();
    let added_out: usize = new_lens.iter().sum();
    let before = list_len_of(cont.input_chars + added_in, n + tail.len());
    let after = list_len_of(cont.output_chars + added_out, out_count);
    take_tail(&mut cont);
    cont.input_chars += added_in;
    cont.output_chars += added_out;
    // `new_outputs` hold the references the continuation keeps.
    cont.outputs.extend(new_outputs);
    memo.resume = Some(cont);
    memo.resume_stats.resumed += 1;
    PyRenderOutcome::new(
        py,
        out.downcast_into::<PyList>()?,
        true,
        before,
        after,
        diagnostics,
        false,
    )
    .map(Some)
}

/// `JSON.stringify` of a list of `count` elements whose lengths sum to `chars`.
fn list_len_of(chars: usize, count: usize) -> usize {
    list_len(std::iter::once(chars)) + count.saturating_sub(1)
}

/// The outputs of the new messages' items (owned references) and their lengths.
fn build_tail(
    writer: &Writer<'_, '_>,
    index: &PyIndex,
    items: &[Item],
    lens: (&[usize], usize),
) -> PyResult<(Vec<usize>, Vec<usize>)> {
    let py = writer.py;
    let mut outputs = Vec::with_capacity(items.len());
    let mut known = Vec::with_capacity(items.len());
    let mut measurer = None;
    let mut removed = Vec::new();
    for item in items {
        match build(
            writer,
            index,
            item,
            lens,
            &mut measurer,
            &mut removed,
            &mut known,
        ) {
            Ok(message) => outputs.push(message as usize),
            Err(err) => {
                release_now(&outputs);
                return Err(err);
            }
        }
    }
    // The new messages are measured together (the measurer's key cache: every key seen is
    // held by one of them).
    let mut measure = Measurer::new(py);
    let mut lens_out = Vec::with_capacity(items.len());
    for (&message, known) in outputs.iter().zip(known) {
        let len = match known {
            Some(len) => len,
            // SAFETY: `message` is alive (owned by `outputs`) and the GIL is held.
            None => match unsafe { measure.len(py, message as Obj) } {
                Ok(len) => len,
                Err(err) => {
                    release_now(&outputs);
                    return Err(err);
                }
            },
        };
        lens_out.push(len);
    }
    Ok((outputs, lens_out))
}

/// Drops owned references now (no view borrows at that point of the render).
fn release_now(objects: &[usize]) {
    for &obj in objects {
        // SAFETY: each is an owned reference of the caller; the GIL is held by the render.
        unsafe { ffi::Py_DecRef(obj as Obj) };
    }
}

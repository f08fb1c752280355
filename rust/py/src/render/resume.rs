//! A frozen render resumed from the previous one: only the messages from the restart point
//! on are read, decided, measured and built (`pi_condense_core::render::resume` says what the
//! core carries, where it restarts after an index change, and when it falls back).
//!
//! The previous frozen render leaves a [`Continuation`] in the render cache (`super::cache`): the core's
//! [`Resume`], the index object and render options it was made against, and owned references
//! to its input and output messages with their lengths. The next frozen render resumes when
//! the index and options are the same objects and its list starts with the very same input
//! objects (compared by address: the continuation holds them, so no other object can have
//! taken one of their addresses). Its output is the previous output of the messages before
//! the restart point followed by the new items; its sizes are sums kept at each restart point
//! (the core's marks: output count, input and output characters) plus the new messages'.
//!
//! The native work of a resumed render is that of the messages from the restart point on,
//! plus one address comparison of the list's leading items: its snapshot is the
//! continuation's list of inputs (never handed out) grown by the new messages, and its output
//! list the previous one grown in place when nothing else holds it (`Continuation::grown`,
//! `Continuation::output`).
//!
//! Soundness: nothing borrows across calls. The core's state is owned data; the views of the
//! messages read are decided on and dropped before any Python code can run (the apply). A
//! host that breaks the frozen promise (edits an old message in place) gets the previous
//! decision and objects for it again, stale but alive.

use pi_condense_core::render::size::list_len;
use pi_condense_core::render::{self as core_render, Fallback, Item, Needs, Text};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyList;
use std::cell::RefCell;

use super::apply::{Writer, build};
use super::cache::RenderCache;
use super::continuation::{INPUT_CHARS, OUTPUT_CHARS, OUTPUTS, mark_points, mark_unchanged};
#[cfg(doc)]
use super::continuation::Continuation;
use super::extract::Reader;
use super::options::{PyRenderOptions, PyRenderOutcome};
use super::sizes::ArgLens;
use crate::index::PyIndex;
use crate::json::Measurer;
use crate::jsread::{Keys, Obj, list_items_from};

/// The render of `messages` resumed from the cache's continuation, or `None` when there is
/// none that applies (the caller renders the whole list; the continuation is retired).
/// `messages` is the render's snapshot of the caller's list `original` (the same items,
/// owned by the snapshot): the continuation's own list of inputs grown by the new items
/// (`Continuation::grown`), so its first `covered` items are those the continuation covers.
/// An unchanged render hands `original` back. `superseded`: phase 1b of this render (the
/// whole list's).
pub(super) fn resume(
    original: &Bound<'_, PyList>,
    messages: &Bound<'_, PyList>,
    (index, options, superseded): (&PyIndex, &PyRenderOptions, &[(usize, Text)]),
    keys: &Keys<'_>,
    cache: &mut RenderCache,
) -> PyResult<Option<PyRenderOutcome>> {
    let py = messages.py();
    let Some(mut cont) = cache.resume.take() else {
        return Ok(None);
    };
    let n_old = cont.covered;
    let total = messages.len();
    let same = cont.index == index.instance() && cont.options == options.stamp && total >= n_old;
    let state = index.core();
    let changes = cont
        .core
        .as_ref()
        .and_then(|core| state.changes_since(core.revision()));
    let (Some(core), Some(changes), true) = (cont.core.take(), changes, same) else {
        cache.resume_stats.stale += 1;
        cache.retire(cont);
        return Ok(None);
    };
    let mut cfg = options.config();
    cfg.superseded = superseded;
    let Some(from) = core.restart_point(state, &cfg, changes) else {
        cache.resume_stats.fell_back(Fallback::Changed);
        cache.retire(cont);
        return Ok(None);
    };
    // SAFETY: the snapshot is alive (the render holds it) and the GIL is held; the items
    // are owned by the snapshot for the whole render.
    let tail: Vec<Obj> = unsafe { list_items_from(Obj::of(messages), from) }.collect();
    let tail = tail.as_slice();
    let fresh = tail.get(n_old.saturating_sub(from)..).unwrap_or_default();
    let reader = Reader {
        py,
        keys,
        needs: Needs::of(state, &cfg),
        borrowed: RefCell::new(Vec::new()),
        scan: None,
    };
    let mut lazy = ArgLens {
        messages,
        keys,
        error: RefCell::new(None),
        measurer: None,
    };
    let decided = {
        // SAFETY: the list is alive and the GIL held; the views borrow strings from the
        // messages they read (held by the list), and no Python code runs until they are
        // dropped at the end of this block (reading, deciding and `lazy` run none).
        let views = unsafe { reader.read_all(tail) };
        let revision = state.revision();
        views.ok().map(|views| {
            core_render::resume_render(core, from, &views, state, &cfg, &mut lazy, revision)
        })
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
            cache.resume_stats.fell_back(why);
            cache.retire(cont);
            return Ok(None);
        }
    };
    cont.core = Some(core);
    let diagnostics = plan.diagnostics;
    let counted = |cache: &mut RenderCache| {
        cache.sizes.hits += from as u64;
        cache.sizes.misses += tail.len() as u64;
        if from < n_old {
            cache.resume_stats.restarted += 1;
        } else {
            cache.resume_stats.resumed += 1;
        }
    };
    let Some(tail_items) = plan.items else {
        // Nothing changed: the output is the input.
        cont.covered = total;
        if let Some(core) = cont.core.as_mut() {
            mark_unchanged(core);
        }
        cont.input_lens = None;
        counted(cache);
        cache.resume = Some(cont);
        return PyRenderOutcome::new(py, original.clone(), false, 0, 0, diagnostics, false)
            .map(Some);
    };
    // The lengths of the messages from the restart point on: remembered, or measured now.
    let mut measurer = Measurer::new(py);
    let mut lens = match cont.input_lens.take() {
        Some(lens) if lens.len() == n_old => lens,
        _ => {
            cache.resume_stats.fell_back(Fallback::FirstChange);
            cache.retire(cont);
            return Ok(None);
        }
    };
    for &item in fresh {
        // SAFETY: the item is held by the live list; the GIL is held; measuring runs no
        // Python code.
        match unsafe { measurer.len(py, item.as_ptr()) } {
            Ok(len) => lens.push(len),
            Err(_) => {
                // The full render raises it, where it must.
                cache.resume_stats.fell_back(Fallback::Throws);
                cache.retire(cont);
                return Ok(None);
            }
        }
    }
    let writer = Writer { py, keys, messages };
    let tail_lens = lens.get(from..).unwrap_or_default();
    let built = build_tail(&writer, index, &tail_items, (tail_lens, from));
    let (new_outputs, new_lens) = match built {
        Ok(built) => built,
        Err(err) => {
            cache.retire(cont);
            return Err(err);
        }
    };
    // The previous output of the messages before the restart point, then the new items.
    let kept = plan.marks[OUTPUTS].min(cont.outputs.len());
    cont.output_lens.truncate(kept);
    cont.output_lens.extend_from_slice(&new_lens);
    // SAFETY: the GIL is held and the new outputs are owned references; no view borrows
    // any more.
    let out = match unsafe { cont.output(py, kept, new_outputs, &mut cache.sizes.retired) } {
        Ok((out, grown)) => {
            cache.resume_stats.outputs_grown += u64::from(grown);
            out
        }
        Err(err) => {
            cache.retire(cont);
            return Err(err);
        }
    };
    let out_count = cont.outputs.len();
    let input_chars = plan.marks[INPUT_CHARS] + tail_lens.iter().sum::<usize>();
    let output_chars = plan.marks[OUTPUT_CHARS] + new_lens.iter().sum::<usize>();
    let before = list_len_of(input_chars, total);
    let after = list_len_of(output_chars, out_count);
    cont.covered = total;
    if let Some(core) = cont.core.as_mut() {
        mark_points(core, from, plan.marks, &lens, &cont.output_lens);
    }
    cont.input_lens = Some(lens);
    counted(cache);
    cache.resume = Some(cont);
    PyRenderOutcome::new(py, out, true, before, after, diagnostics, false).map(Some)
}

/// `JSON.stringify` of a list of `count` elements whose lengths sum to `chars`.
fn list_len_of(chars: usize, count: usize) -> usize {
    list_len(std::iter::once(chars)) + count.saturating_sub(1)
}

/// The outputs of `items` (owned references) and their lengths; `lens` are the lengths of
/// the input messages from `lens.1` on.
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
            Ok(message) => outputs.push(message.addr()),
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
            None => match unsafe { measure.len(py, Obj::from_addr(message).as_ptr()) } {
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
        unsafe { ffi::Py_DecRef(Obj::from_addr(obj).as_ptr()) };
    }
}

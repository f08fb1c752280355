//! `pi_condense._core.render`: render phases 1-4 over a Python message list.
//!
//! Extract -> decide -> apply. Each message dict is read into a light `MsgView`
//! holding only what the enabled phases look at (`Needs`): the role of every message,
//! the ids of tool calls and results, and - only when the state or the config can use
//! them - timestamps, error flags, chain markers and summary refs (recovery tool names
//! and text-extraction failures are read on demand, through `Lazy`). The strings of the
//! views are borrowed from the message objects (nothing is copied), and the reads go
//! through the C API with borrowed references; the members of a dict are found by walking
//! it (`Keys::fields_of`). `pi_condense_core::render` then decides; when it changes nothing the
//! input list itself comes back with sizes 0.
//!
//! Sizes: each input message is measured once (its length is reused for the output)
//! and each new message once; a copied assistant that only lost blocks is the original's
//! length minus theirs. With a `RenderCache` ([`cache`]: the size memo, `size_memo`), a message the previous render
//! measured and that is still made of the very same objects is neither measured nor read
//! again: its length and view are reused. When the state cannot stub or compress anything,
//! the views are read on their own in a prefetching pipeline and a render that changes
//! nothing never measures. When it can (a change is then likely), every message is measured
//! and read in one pass, right after its objects were walked; if the render then changes
//! nothing after all, the sizes are dropped (still 0), and a value that cannot be measured
//! raises only when the render changes something.
//!
//! Untouched messages are the caller's own objects; stubs, copied assistants and
//! synthetic chain messages are fresh dicts in the reference's key order. Values copied
//! from input messages into new text (a raw `toolCallId` as a ref, a `toolName`, a
//! relocated protected output) keep their exact code units: they are joined in Rust
//! when every piece is valid UTF-8, and by Python otherwise (lone surrogates).
//!
//! While the views borrow from the messages no Python code runs, by construction: values of
//! any type (subclasses included) are read through C calls that never call back into Python
//! (no `__float__`, `__eq__`, `__iter__`, `__name__`; `crate::jsread`), and `ABSENT` is told
//! by identity. The protection rule is Rust too (`RenderOptions`, compiled once per
//! `Config`): nothing calls back into Python during the decision.
//!
//! The jobs: [`extract`] (the views, the read pipeline), [`sizes`] (lengths: lazily measured
//! arguments, input and output messages, assistant copies), [`apply`] (the output messages),
//! [`cache`] (what one render leaves to the next: sizes, outputs, result keys, the
//! continuation [`resume`] starts from).

mod apply;
mod cache;
mod continuation;
mod copy;
mod extract;
mod options;
mod resume;
mod reuse;
mod shrink;
mod sizes;

use std::cell::RefCell;

use pi_condense_core::render::size::list_len;
use pi_condense_core::render::{self as core_render, Needs, ResultKeys};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::cpython::GcPaused;
use crate::index::PyIndex;
use crate::jsread::{Keys, Obj, list_items};
use crate::supersede::{PySupersedeState, Recorder, superseded, superseded_recorded};

use apply::{Writer, apply};
use extract::{Reader, extract};
use sizes::{ArgLens, input_lens, output_lens};

use cache::{PyRenderCache, SendCache};
pub(crate) use options::{PyRenderOptions, PyRenderOutcome};

/// Renders `messages` against `index` (spec 04 phases 1-4) with the compiled `options`,
/// reusing and updating the size memo `sizes` when given (`frozen`: the caller has changed
/// none of the messages it handed over before, so the memo trusts their identity).
/// `supersede`: the live supersession state (phase 1b), updated; `None` renders as a fresh
/// extension would (a cold cache: every superseded protected read is stubbed).
#[pyfunction]
#[pyo3(signature = (messages, index, options, sizes = None, frozen = false, supersede = None))]
fn render<'py>(
    messages: &Bound<'py, PyList>,
    index: PyRef<'py, PyIndex>,
    options: PyRef<'py, PyRenderOptions>,
    sizes: Option<PyRef<'py, PyRenderCache>>,
    frozen: bool,
    supersede: Option<PyRef<'py, PySupersedeState>>,
) -> PyResult<PyRenderOutcome> {
    let py = messages.py();
    // No Python code runs from here to the return, by construction: the cyclic collector
    // (and with it any finalizer, or a thread switch a finalizer could allow) is paused for
    // the whole call, nothing read raises and clears an exception (`crate::jsread`), and no
    // value's own methods are called. The views then borrow from `snapshot`: an exact list
    // holding a strong reference to each of the caller's items, taken before anything is
    // read and never handed out, so even a caller's list changed meanwhile could not free
    // what they point into (each item owns its members, which nothing can change while no
    // Python code runs). A render that may resume takes it from the continuation: the list
    // the previous render read, grown by the caller's new items (`Continuation::grown`).
    let _paused = GcPaused::new();
    let original = messages;
    // `None` only when a render up this thread's stack holds the memo: this one then does
    // without it.
    let mut memo_guard = sizes.as_ref().and_then(|s| s.try_lock());
    // A frozen render resumes from the previous one when it can (`resume`).
    let resuming = frozen && memo_guard.as_ref().is_some_and(|g| g.0.resuming);
    let grown = match memo_guard.as_mut() {
        Some(guard) if resuming => guard.0.grown_inputs(messages)?,
        _ => None,
    };
    let snapshot = match grown {
        Some(grown) => grown,
        None => snapshot_of(messages)?,
    };
    let messages = &snapshot;
    // The keys of the latest frozen render, taken out: only a frozen render whose decision
    // is made puts its own back (the prefix it lends is that render's leading messages).
    let mut result_keys = ResultKeys::default();
    if let Some(guard) = memo_guard.as_mut() {
        guard.0.sizes.frozen = frozen;
        let kept = std::mem::take(&mut guard.0.keys);
        if frozen {
            result_keys = kept;
        }
    }
    let keys = Keys::new(py, true);
    // Phase 1b is decided for the whole list. A render that may resume reads it first (from
    // where the previous frozen render's scan ended): a resume restarts before the first
    // result whose supersession changed (`pi_condense_core::render::resume`). Any other
    // render reads it while its views are read (`extract`, `Recorder`); with nothing protected
    // (no candidate) nothing is read.
    let up_front = resuming || options.matcher.is_empty();
    let mut phase_1b = None;
    if up_front {
        let prior = memo_guard
            .as_mut()
            .filter(|_| resuming)
            .and_then(|g| g.0.resume.as_mut())
            .and_then(|cont| cont.take_scan(options.stamp));
        phase_1b = Some(superseded(
            &keys,
            messages,
            &options.matcher,
            supersede.as_deref(),
            prior,
        )?);
    }
    if let Some(guard) = memo_guard.as_mut() {
        if !resuming {
            guard.0.forget_resume();
        } else if let Some((superseded, _)) = phase_1b.as_ref() {
            let resumed = resume::resume(
                original,
                messages,
                (&index, &options, superseded),
                &keys,
                &mut guard.0,
            )?;
            if let Some(outcome) = resumed {
                let mut scan = phase_1b.map(|(_, read)| read);
                finish(&mut memo_guard, &mut scan);
                return Ok(outcome);
            }
        }
    }
    let state = index.core();
    let needs = Needs::of(state, &options.config());
    let recorder = (!up_front).then(|| Recorder::new(&options.matcher, messages.len()));
    let reader = Reader {
        py,
        keys: &keys,
        needs,
        borrowed: RefCell::new(Vec::new()),
        scan: recorder.as_ref(),
    };

    // Extract and decide. The views borrow strings from the message objects: the list
    // (held by the caller for the whole call) keeps them alive, and no Python code runs
    // until the views are dropped.
    let resume_from;
    let stubs;
    let mut scan;
    let (plan, measured) = {
        // SAFETY: the snapshot is alive (owned here) and the GIL is held; see above for
        // the lifetime of the borrowed strings.
        let extracted = unsafe {
            extract(
                py,
                Obj::of(messages),
                &reader,
                memo_guard.as_deref_mut().map(|g| &mut g.0.sizes),
            )
        };
        let decided = match phase_1b {
            Some(done) => done,
            None => {
                let state_of = supersede.as_deref();
                match (&extracted, recorder.as_ref()) {
                    (Ok(_), Some(recorder)) => {
                        superseded_recorded(&keys, messages, recorder, state_of)?
                    }
                    // A read that raised: phase 1b is read first and applied, as a render
                    // reading it up front would (which raises its own error first).
                    _ => superseded(&keys, messages, &options.matcher, state_of, None)?,
                }
            }
        };
        let extracted = extracted?;
        stubs = decided.0;
        scan = Some(decided.1);
        let mut cfg = options.config();
        cfg.superseded = &stubs;
        let mut lazy = ArgLens {
            messages,
            keys: &keys,
            error: RefCell::new(None),
            measurer: None,
        };
        let mut result_keys = result_keys.reusable(extracted.lent);
        let (plan, resumable) = if resuming {
            core_render::render_resumable(
                &extracted.views,
                state,
                &cfg,
                &mut lazy,
                &mut result_keys,
                state.revision(),
            )
        } else {
            let plan = core_render::render_with_keys(
                &extracted.views,
                state,
                &cfg,
                &mut lazy,
                &mut result_keys,
            );
            (plan, None)
        };
        resume_from = resumable;
        if let Some(guard) = memo_guard.as_mut()
            && frozen
        {
            guard.0.keys = result_keys;
        }
        if let (Some(guard), Some(_)) = (memo_guard.as_mut(), &extracted.lens)
            && guard.0.sizes.frozen
        {
            // SAFETY: the snapshot is alive (owned here) and the GIL held; these are the
            // views `extract` read of this list, the first `lent` of them lent by the memo
            // and only read by the decision.
            unsafe {
                let items: Vec<Obj> = list_items(Obj::of(messages)).collect();
                guard
                    .0
                    .sizes
                    .settle(&items, extracted.views, extracted.lent, Some(reader.needs));
            }
        }
        if let Some(err) = lazy.error.into_inner() {
            return Err(err);
        }
        (plan, extracted.lens)
    };
    let diagnostics = plan.diagnostics;
    let Some(items) = plan.items else {
        if let Some(guard) = memo_guard.as_mut() {
            guard.0.drop_outputs(); // none of them handed out
            if let Some(core) = resume_from {
                // SAFETY: the GIL is held.
                let cont = unsafe {
                    continuation::Continuation::new(core, &index, &options, messages, None, None)
                };
                guard.0.resume = Some(cont);
                guard.0.resume_stats.full += 1;
            }
        }
        finish(&mut memo_guard, &mut scan);
        return PyRenderOutcome::new(py, original.clone(), false, 0, 0, diagnostics, plan.threw);
    };

    // Apply, measuring each input message once and each new message.
    let lens = input_lens(
        messages,
        measured,
        memo_guard.as_deref_mut().map(|g| &mut g.0.sizes),
    )?;
    let before = list_len(lens.iter().copied());
    let writer = Writer {
        py,
        keys: &keys,
        messages,
    };
    let (out, known) = {
        let reuse = memo_guard.as_deref_mut().map(|g| g.0.outputs_for_apply());
        apply(&writer, &index, &items, &lens, reuse.flatten())?
    };
    let out_lens = output_lens(&out, &known)?;
    if let Some(guard) = memo_guard.as_mut() {
        guard.0.outputs_measured(&out_lens);
        if let Some(core) = resume_from {
            // SAFETY: the GIL is held.
            let cont = unsafe {
                continuation::Continuation::new(
                    core,
                    &index,
                    &options,
                    messages,
                    Some(&lens),
                    Some((&out, &out_lens)),
                )
            };
            guard.0.resume = Some(cont);
            guard.0.resume_stats.full += 1;
        }
    }
    let after = list_len(out_lens);
    finish(&mut memo_guard, &mut scan);
    PyRenderOutcome::new(py, out, true, before, after, diagnostics, false)
}

/// A new exact list holding the items of `messages` (strong references, taken in C: a list
/// subclass's methods are not called).
fn snapshot_of<'py>(messages: &Bound<'py, PyList>) -> PyResult<Bound<'py, PyList>> {
    // SAFETY: `messages` is a live list and the GIL is held; `PyList_GetSlice` copies the
    // item pointers and takes a reference to each (a new list, owned here).
    unsafe {
        Bound::from_owned_ptr_or_err(
            messages.py(),
            ffi::PyList_GetSlice(messages.as_ptr(), 0, ffi::PY_SSIZE_T_MAX),
        )
        .map(|list| list.downcast_into_unchecked::<PyList>())
    }
}

/// Leaves phase 1b's `scan` of this render's list with the continuation that holds the list
/// (the next frozen render reads on from its end), and lets the memo release what it retired
/// during this render (no view borrows any more).
fn finish(
    guard: &mut Option<std::sync::MutexGuard<'_, SendCache>>,
    scan: &mut Option<pi_condense_core::render::supersede::Scan>,
) {
    if let Some(guard) = guard.as_mut() {
        if let (Some(cont), Some(scan)) = (guard.0.resume.as_mut(), scan.take()) {
            cont.scan = (scan.len() == cont.covered).then_some(scan);
        }
        // SAFETY: the GIL is held and the views of this render are gone: Python code that
        // a deallocation runs cannot invalidate anything still in use.
        unsafe { guard.0.sizes.release_retired() };
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    cache::register(m)?;
    m.add_class::<PyRenderOptions>()?;
    m.add_class::<PyRenderOutcome>()?;
    m.add_function(wrap_pyfunction!(render, m)?)?;
    Ok(())
}

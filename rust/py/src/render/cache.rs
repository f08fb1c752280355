//! `pi_condense._core.RenderCache`: what one render leaves to the next against the same
//! state. A host renders nearly the same list before every model call; the cache keeps
//!
//! - the size memo (`crate::size_memo`): the length, trail and view of every message of the
//!   latest render, and its frozen prefix;
//! - the new messages of the latest frozen render (`super::reuse`), handed out again when
//!   the same decision makes them again;
//! - the tool results' lookup keys of the latest frozen render (`ResultKeys::reusable`);
//! - the continuation of the latest frozen render (`super::resume`): where the next one
//!   resumes deciding from, and how resumed renders went.
//!
//! Every part holds references to Python objects (released with the GIL, at the end of a
//! render or by `clear`), and is used only under the GIL.

use std::sync::{Mutex, MutexGuard, TryLockError};

use pi_condense_core::render::ResultKeys;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use super::continuation::{Continuation, FALLBACKS, ResumeStats};
use super::reuse::Outputs;
use crate::size_memo::SizeMemo;

/// The render state kept between renders (module docs).
#[derive(Default)]
pub(crate) struct RenderCache {
    /// Lengths and views of the messages of the latest render; also holds the references
    /// retired by the other parts until no view borrows ([`SizeMemo::release_retired`]).
    pub(crate) sizes: SizeMemo,
    /// The new messages of the latest frozen render (`super::reuse`).
    outputs: Outputs,
    /// The tool results' lookup keys of the latest frozen render: the next one reuses those
    /// of the messages the prefix lends it (`ResultKeys::reusable`).
    pub(crate) keys: ResultKeys,
    /// What the latest frozen render leaves to resume the next one from (`super::resume`).
    pub(crate) resume: Option<Continuation>,
    pub(crate) resume_stats: ResumeStats,
    /// Frozen renders resume from the previous one (on unless the cache was made without).
    pub(crate) resuming: bool,
}

impl RenderCache {
    /// For the apply of a render: the outputs of the previous frozen render and where
    /// references to release go (`None` without the promise: the outputs are released).
    pub(crate) fn outputs_for_apply(&mut self) -> Option<(&mut Outputs, &mut Vec<usize>)> {
        if self.sizes.frozen {
            self.outputs.begin();
            Some((&mut self.outputs, &mut self.sizes.retired))
        } else {
            self.drop_outputs();
            None
        }
    }

    /// Releases the outputs (at the end of the render: [`SizeMemo::release_retired`]).
    pub(crate) fn drop_outputs(&mut self) {
        if !self.outputs.is_empty() {
            self.outputs.clear(&mut self.sizes.retired);
        }
    }

    /// After the apply: the lengths of the output messages (`lens`, by slot) for the
    /// outputs this render kept; the ones it did not hand out are released.
    pub(crate) fn outputs_measured(&mut self, lens: &[usize]) {
        if self.sizes.frozen {
            self.outputs.measured(lens);
            self.outputs.sweep(&mut self.sizes.retired);
        }
    }

    /// Retires the continuation of the latest frozen render (a render that does not make
    /// the promise, or a clear).
    pub(crate) fn forget_resume(&mut self) {
        if let Some(cont) = self.resume.take() {
            cont.retire(&mut self.sizes.retired);
        }
    }

    /// The snapshot of `messages` for a frozen render that may resume: the continuation's
    /// list of inputs grown by the new items of `messages` (`Continuation::grown`), or
    /// `None` (take a snapshot of the whole list) when there is no continuation or it does
    /// not apply to `messages` (it is then retired, counted stale).
    pub(crate) fn grown_inputs<'py>(
        &mut self,
        messages: &Bound<'py, PyList>,
    ) -> PyResult<Option<Bound<'py, PyList>>> {
        let Some(cont) = self.resume.as_ref() else {
            return Ok(None);
        };
        // SAFETY: the GIL is held (the render's) and no view borrows yet.
        let grown = unsafe { cont.grown(messages) };
        if matches!(grown, Ok(Some(_))) {
            self.resume_stats.inputs_grown += 1;
        } else if let Some(cont) = self.resume.take() {
            self.resume_stats.stale += 1;
            self.retire(cont);
        }
        grown
    }

    /// Retires a continuation taken out of the cache.
    pub(crate) fn retire(&mut self, cont: Continuation) {
        cont.retire(&mut self.sizes.retired);
    }

    /// Forgets everything (releases the references).
    fn clear(&mut self) {
        self.outputs.clear(&mut self.sizes.retired);
        self.forget_resume();
        self.keys = ResultKeys::default();
        self.sizes.clear();
    }
}

impl Drop for RenderCache {
    fn drop(&mut self) {
        // The outputs and the continuation retire their references into the size memo,
        // which releases them when it is dropped right after.
        self.outputs.clear(&mut self.sizes.retired);
        self.forget_resume();
    }
}

/// The cache as a Python object (held by a `PrunerState`, passed to `render`).
///
/// It is only used with the GIL held (the mutex is never contended); the raw addresses
/// it stores are owned references released with the GIL.
#[pyclass(module = "pi_condense._core", name = "RenderCache")]
pub(crate) struct PyRenderCache {
    cache: Mutex<SendCache>,
}

/// [`RenderCache`] marked `Send`: its addresses are references to Python objects, touched
/// only with the GIL held.
pub(crate) struct SendCache(pub(crate) RenderCache);

// SAFETY: see `SendCache`; every access goes through the GIL-holding render or `clear`.
unsafe impl Send for SendCache {}

impl PyRenderCache {
    /// The cache, unless a render is using it (the GIL is held by the caller, so only a
    /// render up the same thread's stack can hold the lock).
    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, SendCache>> {
        match self.cache.try_lock() {
            Ok(guard) => Some(guard),
            Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut RenderCache) -> R) -> PyResult<R> {
        match self.try_lock() {
            Some(mut guard) => Ok(f(&mut guard.0)),
            None => Err(PyRuntimeError::new_err(
                "the render cache is in use by a render (called from a protection predicate?)",
            )),
        }
    }
}

#[pymethods]
impl PyRenderCache {
    /// `resume=False`: every frozen render reads the whole list (as before resumed renders;
    /// for comparisons and tests of the full path).
    #[new]
    #[pyo3(signature = (*, resume = true))]
    fn new(resume: bool) -> Self {
        let mut cache = RenderCache::default();
        cache.resuming = resume;
        PyRenderCache {
            cache: Mutex::new(SendCache(cache)),
        }
    }

    /// Whether frozen renders resume from the previous one.
    #[getter]
    fn resuming(&self) -> PyResult<bool> {
        self.with(|cache| cache.resuming)
    }

    /// Number of messages remembered.
    fn __len__(&self) -> PyResult<usize> {
        self.with(|cache| cache.sizes.len())
    }

    /// How many of them the frozen prefix holds (the leading messages of the latest
    /// frozen render, reused without a lookup).
    #[getter]
    fn prefix(&self) -> PyResult<usize> {
        self.with(|cache| cache.sizes.prefix_len())
    }

    /// `(hits, misses)` of the lookups so far (a miss: a message new to the memo, or changed).
    #[getter]
    fn stats(&self) -> PyResult<(u64, u64)> {
        self.with(|cache| (cache.sizes.hits, cache.sizes.misses))
    }

    /// How frozen renders went: `resumed` (only the new messages decided), `restarted`
    /// (decided from an earlier restart point after an index change), `full` (the whole
    /// list), `stale` (the previous render's index, options or list did not apply), the
    /// count of each fallback reason, `inputs_grown` (frozen renders whose snapshot of the
    /// list was the previous one's grown by the new messages) and `outputs_grown` (resumed
    /// renders whose output list was the previous one grown in place: nothing else held it).
    #[getter]
    fn resume_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let stats = self.with(|cache| cache.resume_stats)?;
        let out = PyDict::new(py);
        out.set_item("resumed", stats.resumed)?;
        out.set_item("restarted", stats.restarted)?;
        out.set_item("full", stats.full)?;
        out.set_item("stale", stats.stale)?;
        out.set_item("inputs_grown", stats.inputs_grown)?;
        out.set_item("outputs_grown", stats.outputs_grown)?;
        for (why, count) in FALLBACKS.iter().zip(stats.fallbacks) {
            out.set_item(why.as_str(), count)?;
        }
        Ok(out)
    }

    /// Forgets every message (releases the references).
    fn clear(&self) -> PyResult<()> {
        self.with(RenderCache::clear)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyRenderCache>()?;
    // The name of the cache before it held more than sizes (`PrunerState.sizes`).
    m.add("SizeMemo", m.getattr("RenderCache")?)?;
    Ok(())
}

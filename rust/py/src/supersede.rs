//! `pi_condense._core.SupersedeState` and the read of a message list for phase 1b
//! (protected-path supersession, pi-condense 2.10.3; the rule is
//! `pi_condense_core::render::supersede`).

use std::sync::Mutex;

use pi_condense_core::keys::ProtectedMatcher;
use pi_condense_core::render::supersede::{superseded_text, Scan, SupMsg, SupersedeState};
use pi_condense_core::render::{JsIdOf, Role, Text};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::chains::{args_path, get_some, matcher_protects};
use crate::jsread::{self, js_id_bound as js_id, str_is_bound, timestamp_bound, Keys, K};
use crate::pyvalue::js_str_of;

/// What a live pruner remembers of supersession between renders: the floor (the earliest
/// result timestamp a rewrite since the last render touched; 0 for a cold prompt cache) and
/// the occurrence keys already stubbed. A new state has no floor (`createSupersedeState`);
/// a render without one (`render(..., supersede=None)`) acts as a fresh extension after
/// `session_start`: a cold cache.
#[pyclass(name = "SupersedeState", module = "pi_condense._core")]
pub(crate) struct PySupersedeState {
    inner: Mutex<SupersedeState>,
}

impl PySupersedeState {
    fn state(&self) -> std::sync::MutexGuard<'_, SupersedeState> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[pymethods]
impl PySupersedeState {
    #[new]
    fn py_new() -> Self {
        PySupersedeState {
            inner: Mutex::new(SupersedeState::new()),
        }
    }

    /// `lowerFloor(t)`: a rewrite touched results from `t` on (`None`: changes nothing).
    #[pyo3(signature = (t))]
    fn lower_floor(&self, t: Option<f64>) {
        self.state().lower_floor(t);
    }

    /// The prompt cache is cold (a compaction, a model or thinking-level change): the next
    /// render stubs every superseded read.
    fn cold(&self) {
        self.state().cold();
    }

    /// A session (re)start or leaf move: nothing stubbed yet, and a cold cache.
    fn reset(&self) {
        self.state().reset();
    }

    /// The floor, or None.
    #[getter]
    fn floor(&self) -> Option<f64> {
        self.state().floor
    }

    /// The activated occurrence keys (string keys, sorted).
    #[getter]
    fn activated(&self) -> Vec<String> {
        let mut keys: Vec<String> = self
            .state()
            .activated
            .iter()
            .map(JsIdOf::to_js_string)
            .collect();
        keys.sort();
        keys
    }

    fn __repr__(&self) -> String {
        let state = self.state();
        format!(
            "SupersedeState(floor={:?}, activated={})",
            state.floor,
            state.activated.len()
        )
    }
}

/// One message as the scan sees it.
fn read_message(
    keys: &Keys<'_>,
    matcher: &ProtectedMatcher,
    msg: &Bound<'_, PyAny>,
) -> PyResult<SupMsg> {
    let Ok(dict) = msg.downcast::<PyDict>() else {
        return Ok(SupMsg::Other);
    };
    let role = keys.get_bound(dict.as_any(), K::Role);
    // SAFETY: the value is alive (owned here) and the GIL is held.
    let role = unsafe { jsread::role(role.as_ref().map(Bound::as_ptr)) };
    match role {
        Role::Assistant => {
            let content = keys.get_bound(dict.as_any(), K::Content);
            let Some(list) = content.as_ref().and_then(|c| c.downcast::<PyList>().ok()) else {
                return Ok(SupMsg::Other);
            };
            let mut calls = Vec::new();
            for block in list.iter() {
                let Ok(block) = block.downcast::<PyDict>() else {
                    continue;
                };
                let block = block.as_any();
                if !str_is_bound(keys.get_bound(block, K::Kind).as_ref(), "toolCall") {
                    continue;
                }
                let id = js_id(keys.get_bound(block, K::Id).as_ref())?;
                // `block.input ?? block.args ?? block.arguments ?? {}`
                let args = get_some(keys, block, K::Input)
                    .or_else(|| get_some(keys, block, K::Args))
                    .or_else(|| keys.get_bound(block, K::Arguments));
                let name = keys.get_bound(block, K::Name);
                let path = if matcher_protects(matcher, keys, name.as_ref(), args.as_ref())? {
                    match args_path(keys, args.as_ref())? {
                        Some(p) => Some(js_str_of(&p)?),
                        None => None,
                    }
                } else {
                    None
                };
                calls.push((id, path));
            }
            Ok(SupMsg::Assistant(calls))
        }
        Role::ToolResult => {
            let id = js_id(keys.get_bound(dict.as_any(), K::ToolCallId).as_ref())?;
            let ts = timestamp_bound(keys.get_bound(dict.as_any(), K::Timestamp).as_ref())?.num();
            Ok(SupMsg::ToolResult { id, ts })
        }
        _ => Ok(SupMsg::Other),
    }
}

/// Phase 1b of a render of `messages`: the superseded results (ascending index) and their
/// stub texts, after `state` (a fresh, cold one when `None`) activated what its floor allows.
pub(crate) fn superseded<'py>(
    keys: &Keys<'py>,
    messages: &Bound<'py, PyList>,
    matcher: &ProtectedMatcher,
    state: Option<&PySupersedeState>,
) -> PyResult<Vec<(usize, Text)>> {
    let mut cold = SupersedeState::new();
    let mut held;
    let state: &mut SupersedeState = match state {
        Some(s) => {
            held = s.state();
            &mut held
        }
        None => {
            cold.cold();
            &mut cold
        }
    };
    if matcher.is_empty() {
        // Nothing is protected, so nothing is a candidate; the render still spends the floor.
        state.floor = None;
        return Ok(Vec::new());
    }
    let mut scan = Scan::new();
    for msg in messages.iter() {
        scan.push(read_message(keys, matcher, &msg)?);
    }
    let candidates = scan.candidates();
    Ok(state
        .apply(&candidates)
        .into_iter()
        .map(|c| (c.index, superseded_text(&c.path)))
        .collect())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySupersedeState>()?;
    Ok(())
}

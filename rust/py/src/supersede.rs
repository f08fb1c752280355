//! `pi_condense._core.SupersedeState` and the read of a message list for phase 1b
//! (protected-path supersession, pi-condense 2.10.3; the rule is
//! `pi_condense_core::render::supersede`).

use std::sync::Mutex;

use pi_condense_core::jsstr::JsStr;
use pi_condense_core::keys::{ProtectedMatcher, ToolRule};
use pi_condense_core::render::supersede::{superseded_text, Scan, SupMsg, SupersedeState};
use pi_condense_core::render::{JsId, JsIdOf, Role, Text};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};

use crate::jsread::{
    self, is_dict, is_list, is_str, js_id, list_items, present, str_is, str_text, Keys, Obj, K,
};
use crate::protect::matcher_protects;
use crate::pystr::js_str_of;

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
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
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

/// `isProtected(block.name, args)` and `args.path` when it is a string, for a toolCall block
/// given its `name`, `input`, `args` and `arguments` (`args = block.input ?? block.args ??
/// block.arguments ?? {}`): the path, else `None`.
///
/// # Safety
/// The values must be live objects (borrowed from a block the caller holds) and the GIL
/// held (the borrow rule, lib.rs).
unsafe fn protected_path<'py>(
    py: Python<'py>,
    keys: &Keys<'py>,
    matcher: &ProtectedMatcher,
    [name, input, args, arguments]: [Option<Obj>; 4],
) -> PyResult<Option<JsStr>> {
    // SAFETY: `# Safety` above.
    unsafe {
        let some = |v: Option<Obj>| present(v).filter(|v| !v.is(ffi::Py_None()));
        let args = some(input)
            .or_else(|| some(args))
            .or_else(|| present(arguments));
        let path = args
            .filter(|a| is_dict(*a))
            .and_then(|a| keys.get(a, K::Path))
            .filter(|p| is_str(*p));
        let protected = match (matcher.rule(), present(name)) {
            (ToolRule::Names, Some(n)) if is_str(n) => {
                let name = str_text(py, n, false);
                let path = path.map(|p| str_text(py, p, false));
                matcher.is_protected(Some(&name), path.as_deref())
            }
            (ToolRule::Names, _) => {
                let path = path.map(|p| str_text(py, p, false));
                matcher.is_protected(None, path.as_deref())
            }
            // A string `protectedTools` (reference mode): `String(name)` by substring.
            (ToolRule::Substring(_), name) => {
                let name = name.map(|n| Borrowed::from_ptr(py, n.as_ptr()).to_owned());
                let args = args.map(|a| Borrowed::from_ptr(py, a.as_ptr()).to_owned());
                matcher_protects(matcher, keys, name.as_ref(), args.as_ref())?
            }
        };
        match path {
            Some(p) if protected => Ok(Some(js_str_of(
                Borrowed::from_ptr(py, p.as_ptr()).downcast_unchecked::<PyString>(),
            )?)),
            _ => Ok(None),
        }
    }
}

/// One message as the scan reads it: only what can make a candidate is read (a toolCall
/// block with a protected path, a later block of the same id, a toolResult while a call is
/// open).
///
/// # Safety
/// `msg` must be a live object and the GIL held (the borrow rule, lib.rs).
unsafe fn read_message<'py>(
    py: Python<'py>,
    keys: &Keys<'py>,
    matcher: &ProtectedMatcher,
    open: bool,
    msg: Obj,
) -> PyResult<SupMsg> {
    // SAFETY: `# Safety` above.
    unsafe {
        if !is_dict(msg) {
            return Ok(SupMsg::Other);
        }
        let [role, content, id, ts] =
            keys.fields_of(msg, [K::Role, K::Content, K::ToolCallId, K::Timestamp]);
        match jsread::role(present(role)) {
            Role::Assistant => {
                let Some(content) = present(content).filter(|c| is_list(*c)) else {
                    return Ok(SupMsg::Other);
                };
                let mut calls: Vec<(JsId, Option<JsStr>)> = Vec::new();
                for block in list_items(content) {
                    if !is_dict(block) {
                        continue;
                    }
                    let [kind, id, name, input, args, arguments] = keys.fields_of(
                        block,
                        [K::Kind, K::Id, K::Name, K::Input, K::Args, K::Arguments],
                    );
                    if !str_is(present(kind), "toolCall") {
                        continue;
                    }
                    let path = protected_path(py, keys, matcher, [name, input, args, arguments])?;
                    if path.is_none() && calls.is_empty() {
                        continue;
                    }
                    let id = js_id(py, present(id), true)?.to_owned_id();
                    if path.is_some() || calls.iter().any(|(c, _)| *c == id) {
                        calls.push((id, path));
                    }
                }
                Ok(SupMsg::Assistant(calls))
            }
            Role::ToolResult if !open => Ok(SupMsg::Skip),
            Role::ToolResult => {
                let id = js_id(py, present(id), true)?.to_owned_id();
                let ts = jsread::timestamp(py, present(ts))?.num();
                Ok(SupMsg::ToolResult { id, ts })
            }
            _ => Ok(SupMsg::Other),
        }
    }
}

/// Phase 1b of a render of `messages`: the superseded results (ascending index) and their
/// stub texts, after `state` (a fresh, cold one when `None`) activated what its floor allows;
/// and the scan of the list. `prior`: the scan of the list's first `prior.len()` messages (the
/// very same objects, unchanged), read on from there.
pub(crate) fn superseded<'py>(
    keys: &Keys<'py>,
    messages: &Bound<'py, PyList>,
    matcher: &ProtectedMatcher,
    state: Option<&PySupersedeState>,
    prior: Option<Scan>,
) -> PyResult<(Vec<(usize, Text)>, Scan)> {
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
        return Ok((Vec::new(), Scan::new()));
    }
    let py = messages.py();
    let mut scan = prior.unwrap_or_default();
    // SAFETY: `messages` is the render's snapshot (owned for the call), the GIL is held and
    // no Python code runs while its items are read (the borrow rule, lib.rs).
    unsafe {
        for msg in list_items(Obj::of(messages)).skip(scan.len()) {
            let read = read_message(py, keys, matcher, scan.has_open(), msg)?;
            scan.push(read);
        }
    }
    let candidates = scan.candidates();
    let superseded = state
        .apply(&candidates)
        .into_iter()
        .map(|c| (c.index, superseded_text(&c.path)))
        .collect();
    Ok((superseded, scan))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySupersedeState>()?;
    Ok(())
}

//! `pi_condense._core.SupersedeState` and the read of a message list for phase 1b
//! (protected-path supersession, pi-condense 2.10.3; the rule is
//! `pi_condense_core::render::supersede`): on its own ([`superseded`], a render that may
//! resume, and read on from the previous scan), or recorded while the render reads its views
//! ([`Recorder`], [`superseded_recorded`]: each message's dicts are walked once).

use std::cell::RefCell;
use std::sync::Mutex;

use pi_condense_core::jsstr::JsStr;
use pi_condense_core::keys::{ProtectedMatcher, ToolRule};
use pi_condense_core::render::supersede::{Scan, SupMsg, SupersedeState, superseded_text};
use pi_condense_core::render::{JsId, JsIdOf, Role, Text};
use pi_condense_core::view::{ArgsMember, ArgsRead, call_args_path};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};

use crate::jsread::{
    self, K, Keys, Obj, is_dict, is_list, is_str, js_id, list_items, list_items_from, present,
    str_is, str_text,
};
use crate::protect::substring_protects;
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

/// What one argument member of a toolCall block holds (`view::call_args_path`'s reader):
/// missing, `null`, a dict whose `path` is a str (that str), or anything else.
///
/// # Safety
/// `value` must be a live object (borrowed from a block the caller holds) and the GIL held
/// (the borrow rule, lib.rs).
unsafe fn args_read(keys: &Keys<'_>, value: Option<Obj>) -> ArgsRead<Obj> {
    // SAFETY: `# Safety` above.
    unsafe {
        match present(value) {
            None => ArgsRead::Absent,
            Some(v) if v.is(ffi::Py_None()) => ArgsRead::Null,
            Some(v) if is_dict(v) => match keys.get(v, K::Path) {
                Some(p) if is_str(p) => ArgsRead::Path(p),
                _ => ArgsRead::Other,
            },
            Some(_) => ArgsRead::Other,
        }
    }
}

/// `isProtected(block.name, args)` and `args.path` when it is a string, for a toolCall block
/// given its `name`, `input`, `args` and `arguments` (the selection of `args` is
/// `view::call_args_path`'s): the path, else `None`.
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
        let path = call_args_path(|member| {
            let value = match member {
                ArgsMember::Input => input,
                ArgsMember::Args => args,
                ArgsMember::Arguments => arguments,
            };
            args_read(keys, value)
        });
        let path_text = || path.map(|p| str_text(py, p, false));
        let protected = match (matcher.rule(), present(name)) {
            (ToolRule::Names, Some(n)) if is_str(n) => {
                let name = str_text(py, n, false);
                matcher.is_protected(Some(&name), path_text().as_deref())
            }
            (ToolRule::Names, _) => matcher.is_protected(None, path_text().as_deref()),
            // A string `protectedTools` (reference mode): `String(name)` by substring.
            (ToolRule::Substring(_), name) => {
                let name = name.map(|n| Borrowed::from_ptr(py, n.as_ptr()).to_owned());
                substring_protects(matcher, name.as_ref(), path_text().as_deref())?
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

/// What the render's reader recorded of one message for phase 1b (`Recorder`), in place
/// of a second read of the message ([`read_message`]).
#[derive(Default)]
pub(crate) enum Scanned {
    /// Not read by the reader (a view the size memo lent or kept): read here.
    #[default]
    Unread,
    /// A toolResult: its id and timestamp are read here, only while a call is open.
    Result,
    /// Neither an assistant with array content nor a toolResult.
    Other,
    /// An assistant with array content: its calls ([`Calls`]).
    Assistant(Vec<(JsId, Option<JsStr>)>),
    /// An assistant whose blocks raised: raised when the scan reaches it.
    Failed(PyErr),
}

/// Phase 1b's record of the messages a render's reader reads (`render::extract`): one
/// [`Scanned`] per list position.
pub(crate) struct Recorder<'m> {
    pub(crate) matcher: &'m ProtectedMatcher,
    slots: RefCell<Vec<Scanned>>,
}

impl<'m> Recorder<'m> {
    /// A record of a list of `len` messages, none read yet.
    pub(crate) fn new(matcher: &'m ProtectedMatcher, len: usize) -> Self {
        let mut slots = Vec::new();
        slots.resize_with(len, Scanned::default);
        Recorder {
            matcher,
            slots: RefCell::new(slots),
        }
    }

    /// Forgets what was recorded (the list is read again from the start).
    pub(crate) fn restart(&self) {
        self.slots.borrow_mut().fill_with(Scanned::default);
    }

    /// Records message `index`.
    pub(crate) fn record(&self, index: usize, scanned: Scanned) {
        if let Some(slot) = self.slots.borrow_mut().get_mut(index) {
            *slot = scanned;
        }
    }
}

/// The calls of an assistant's content as the scan reads them, one toolCall block at a
/// time; the first error is kept (and the blocks after it are not read).
#[derive(Default)]
pub(crate) struct Calls {
    calls: Vec<(JsId, Option<JsStr>)>,
    error: Option<PyErr>,
}

impl Calls {
    /// A toolCall block: its `name`, `input`, `args` and `arguments`, and its id (`id`,
    /// read only when the block can count).
    ///
    /// # Safety
    /// The values must be live objects (borrowed from a block the caller holds) and the
    /// GIL held (the borrow rule, lib.rs).
    pub(crate) unsafe fn block<'py>(
        &mut self,
        py: Python<'py>,
        keys: &Keys<'py>,
        matcher: &ProtectedMatcher,
        fields: [Option<Obj>; 4],
        id: impl FnOnce() -> PyResult<JsId>,
    ) {
        if self.error.is_some() {
            return;
        }
        // SAFETY: `# Safety` above.
        let read = unsafe { protected_path(py, keys, matcher, fields) }.and_then(|path| {
            if path.is_none() && self.calls.is_empty() {
                return Ok(());
            }
            let id = id()?;
            if path.is_some() || self.calls.iter().any(|(c, _)| *c == id) {
                self.calls.push((id, path));
            }
            Ok(())
        });
        if let Err(err) = read {
            self.error = Some(err);
        }
    }

    /// What the scan reads of the assistant.
    pub(crate) fn scanned(self) -> Scanned {
        match self.error {
            Some(err) => Scanned::Failed(err),
            None => Scanned::Assistant(self.calls),
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
                let mut calls = Calls::default();
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
                    calls.block(py, keys, matcher, [name, input, args, arguments], || {
                        Ok(js_id(py, present(id), true)?.to_owned_id())
                    });
                }
                match calls.scanned() {
                    Scanned::Failed(err) => Err(err),
                    Scanned::Assistant(calls) => Ok(SupMsg::Assistant(calls)),
                    _ => Ok(SupMsg::Other),
                }
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

/// The live state a render applies (a fresh, cold one when `None`), locked.
enum StateOf<'s> {
    Held(std::sync::MutexGuard<'s, SupersedeState>),
    Cold(SupersedeState),
}

impl StateOf<'_> {
    fn of(state: Option<&PySupersedeState>) -> StateOf<'_> {
        match state {
            Some(s) => StateOf::Held(s.state()),
            None => {
                let mut cold = SupersedeState::new();
                cold.cold();
                StateOf::Cold(cold)
            }
        }
    }

    fn get(&mut self) -> &mut SupersedeState {
        match self {
            StateOf::Held(held) => held,
            StateOf::Cold(cold) => cold,
        }
    }
}

/// The superseded results of `scan` (ascending index) and their stub texts, after `state`
/// activated what its floor allows.
fn apply(state: Option<&PySupersedeState>, scan: &Scan) -> Vec<(usize, Text)> {
    let candidates = scan.candidates();
    StateOf::of(state)
        .get()
        .apply(&candidates)
        .into_iter()
        .map(|c| (c.index, superseded_text(&c.path)))
        .collect()
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
    if matcher.is_empty() {
        // Nothing is protected, so nothing is a candidate; the render still spends the floor.
        StateOf::of(state).get().floor = None;
        return Ok((Vec::new(), Scan::new()));
    }
    let py = messages.py();
    let mut scan = prior.unwrap_or_default();
    // SAFETY: `messages` is the render's snapshot (owned for the call), the GIL is held and
    // no Python code runs while its items are read (the borrow rule, lib.rs).
    unsafe {
        for msg in list_items_from(Obj::of(messages), scan.len()) {
            let read = read_message(py, keys, matcher, scan.has_open(), msg)?;
            scan.push(read);
        }
    }
    Ok((apply(state, &scan), scan))
}

/// [`superseded`] of `messages` (none before), from what `recorder` recorded while the
/// render's reader read them: a message it did not read is read here, and so is a
/// toolResult while a call is open. An error is raised where [`superseded`] raises it.
pub(crate) fn superseded_recorded<'py>(
    keys: &Keys<'py>,
    messages: &Bound<'py, PyList>,
    recorder: &Recorder<'_>,
    state: Option<&PySupersedeState>,
) -> PyResult<(Vec<(usize, Text)>, Scan)> {
    let py = messages.py();
    let matcher = recorder.matcher;
    let slots = recorder.slots.take();
    let mut scan = Scan::new();
    // SAFETY: `messages` is the render's snapshot (owned for the call), the GIL is held and
    // no Python code runs while its items are read (the borrow rule, lib.rs).
    unsafe {
        for (msg, slot) in list_items(Obj::of(messages)).zip(slots) {
            let read = match slot {
                Scanned::Other => SupMsg::Other,
                Scanned::Assistant(calls) => SupMsg::Assistant(calls),
                Scanned::Result if !scan.has_open() => SupMsg::Skip,
                Scanned::Failed(err) => return Err(err),
                Scanned::Result | Scanned::Unread => {
                    read_message(py, keys, matcher, scan.has_open(), msg)?
                }
            };
            scan.push(read);
        }
    }
    Ok((apply(state, &scan), scan))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySupersedeState>()?;
    Ok(())
}

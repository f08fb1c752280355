//! Sizes: the lazily measured argument bodies the decision asks for, the input lengths, the
//! assistant-copy arithmetic, and the lengths of the new messages.

use std::cell::RefCell;

use pi_condense_core::render::{Lazy, MsgView, Role, Ts, size};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::json::Measurer;
use crate::jsread::{K, Keys, Obj, is_absent, is_list, list_item, list_items, str_is};
use crate::size_memo::{self, SizeMemo};

/// Lazily measured argument bodies (phase 2).
pub(super) struct ArgLens<'a, 'py> {
    pub(super) messages: &'a Bound<'py, PyList>,
    pub(super) keys: &'a Keys<'py>,
    pub(super) error: RefCell<Option<PyErr>>,
    /// Made on first use and kept through the decision (no Python code runs during it, so
    /// the keys whose lengths it caches stay alive).
    pub(super) measurer: Option<Measurer>,
}

impl ArgLens<'_, '_> {
    /// `messages[msg][key]` (borrowed; held by the message).
    fn field(&self, msg: usize, key: K) -> PyResult<Option<Obj>> {
        // SAFETY: the list (`render`'s snapshot, owned for the whole call) is alive and the
        // GIL is held.
        unsafe {
            match list_item(Obj::of(self.messages), msg) {
                Some(m) => Ok(self.keys.get_of(m, key)),
                None => Ok(None),
            }
        }
    }

    /// The value, or `None` with the error kept for the caller.
    fn ok_or_report<T>(&self, value: PyResult<Option<T>>) -> Option<T> {
        match value {
            Ok(v) => v,
            Err(err) => {
                self.error.borrow_mut().get_or_insert(err);
                None
            }
        }
    }

    /// `messages[msg].content[block].arguments` (borrowed; held by its block).
    fn args(&self, msg: usize, block: usize) -> Option<Obj> {
        // SAFETY: the list (`render`'s snapshot, owned for the whole call) and everything
        // read from it are alive and the GIL is held.
        unsafe {
            let message = list_item(Obj::of(self.messages), msg);
            let content = match message {
                Some(m) => self.keys.get_of(m, K::Content),
                None => None,
            };
            let item = content
                .filter(|c| is_list(*c))
                .and_then(|c| list_item(c, block));
            match item {
                Some(b) => self.keys.get_of(b, K::Arguments),
                None => None,
            }
        }
    }

    /// `JSON.stringify(block.arguments).length`; `None` without `arguments`.
    fn measure(&mut self, msg: usize, block: usize) -> PyResult<Option<usize>> {
        let py = self.messages.py();
        let args = self.args(msg, block);
        // SAFETY: the arguments are held by their message, in the list (`render`'s snapshot,
        // owned for the whole call), and the GIL is held; the measurement runs no Python code.
        unsafe {
            match args {
                Some(args) => Ok(Some(
                    self.measurer
                        .get_or_insert_with(|| Measurer::new(py))
                        .len(py, args.as_ptr())?,
                )),
                None => Ok(None),
            }
        }
    }
}

impl Lazy for ArgLens<'_, '_> {
    fn args_len(&mut self, msg: usize, block: usize) -> Option<usize> {
        match self.measure(msg, block) {
            Ok(len) => len,
            Err(err) => {
                self.error.borrow_mut().get_or_insert(err);
                Some(0)
            }
        }
    }

    fn args_shrink(&mut self, msg: usize, block: usize) -> bool {
        // SAFETY: the arguments are held by their message, in the list (`render`'s snapshot,
        // owned for the whole call), and the GIL is held; the walk runs no Python code.
        self.args(msg, block)
            .is_some_and(|args| unsafe { super::shrink::holds_long_string(args) })
    }

    fn is_recovery(&mut self, msg: usize) -> Option<bool> {
        let field = self.field(msg, K::ToolName);
        Some(self.ok_or_report(field).is_some_and(|name| {
            // SAFETY: `name` is held by its message (alive) and the GIL is held.
            unsafe { str_is(Some(name), "context_tree_query") }
        }))
    }

    /// A toolResult's text extraction throws on a `null` element of an array content.
    fn text_throws(&mut self, msg: usize) -> Option<bool> {
        let field = self.field(msg, K::Content);
        Some(self.ok_or_report(field).is_some_and(|content| {
            // SAFETY: `content` is held by its message (alive) and the GIL is held.
            unsafe {
                is_list(content)
                    && list_items(content).any(|item| item.is(ffi::Py_None()) || is_absent(item))
            }
        }))
    }
}

/// The length of each input message (measured now, unless the extract did).
pub(super) fn input_lens(
    messages: &Bound<'_, PyList>,
    measured: Option<Vec<usize>>,
    memo: Option<&mut SizeMemo>,
) -> PyResult<Vec<usize>> {
    if let Some(lens) = measured {
        return Ok(lens);
    }
    // SAFETY: the messages are alive (the list holds them) and the GIL is held; nothing runs
    // during the measurement.
    let measured = unsafe {
        size_memo::measure_and_read(
            messages.py(),
            Obj::of(messages),
            memo,
            None,
            &RefCell::new(Vec::new()),
            |_, _| Ok(MsgView::new(Role::Other, Ts::Absent)),
        )?
    };
    Ok(measured.lens)
}

/// The length of an assistant copy that only lost blocks (`size::assistant_copy_len`, of the
/// removed blocks measured here). `None` when arguments were purged (then the copy is
/// measured). `measurer` is shared by the
/// copies of one render: the caller keeps every measured block alive until it is done with
/// it, so the addresses of the keys it caches are not reused meanwhile.
pub(super) fn assistant_copy_len(
    py: Python<'_>,
    measurer: &mut Option<Measurer>,
    original: Option<usize>,
    purged: bool,
    removed: &[Bound<'_, PyAny>],
    blocks: usize,
) -> PyResult<Option<usize>> {
    let Some(len) = original.filter(|_| !purged) else {
        return Ok(None);
    };
    let measurer = measurer.get_or_insert_with(|| Measurer::new(py));
    let mut gone = Vec::with_capacity(removed.len());
    for block in removed {
        // SAFETY: the block is alive (held by `removed`) and the GIL is held.
        gone.push(unsafe { measurer.len(py, block.as_ptr())? });
    }
    Ok(size::assistant_copy_len(len, &gone, blocks))
}

/// The length of each output message: `known` where it is, else measured. The new messages
/// are measured together: every key seen is held by a message in `out` (or interned), so the
/// measurer's key cache stays valid.
pub(super) fn output_lens(
    out: &Bound<'_, PyList>,
    known: &[Option<usize>],
) -> PyResult<Vec<usize>> {
    let py = out.py();
    let mut measurer = Measurer::new(py);
    let mut lens = Vec::with_capacity(known.len());
    for (pos, known) in known.iter().enumerate() {
        lens.push(match *known {
            Some(len) => len,
            // SAFETY: `out` is alive and holds the message; the GIL is held.
            None => unsafe {
                match list_item(Obj::of(out), pos) {
                    Some(message) => measurer.len(py, message.as_ptr())?,
                    None => 0,
                }
            },
        });
    }
    Ok(lens)
}

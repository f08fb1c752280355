//! What a frozen render leaves for the next one to resume from ([`Continuation`], kept by the
//! render cache), and how resumed renders went ([`ResumeStats`]); `super::resume` says when
//! and how a render resumes.

use pi_condense_core::render::supersede::Scan;
use pi_condense_core::render::{Fallback, Resume};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyList;

use super::options::PyRenderOptions;
use crate::cpython;
use crate::index::PyIndex;
use crate::jsread::{Obj, list_item};

/// Mark positions (`Resume::set_marks`): what the output held at a restart point.
pub(super) const OUTPUTS: usize = 0;
pub(super) const INPUT_CHARS: usize = 1;
pub(super) const OUTPUT_CHARS: usize = 2;

/// What a frozen render leaves for the next one (module docs).
pub(crate) struct Continuation {
    /// Taken out while a render resumes from it.
    pub(super) core: Option<Resume>,
    pub(super) index: u64,
    pub(super) options: u64,
    /// The input messages, in order: an exact list (an owned reference) that is the
    /// snapshot a render took of its caller's list and is never handed out, so no Python
    /// code can change it; the next render appends its caller's new messages to it
    /// ([`Continuation::grown`]) instead of taking a snapshot of the whole list.
    inputs: usize,
    /// How many of its items the continuation covers (the render that left it read them).
    pub(super) covered: usize,
    /// Their lengths, while every render since the first change measured them.
    pub(super) input_lens: Option<Vec<usize>>,
    /// The output messages, in order (owned references), and their lengths; empty while
    /// nothing changed.
    pub(super) outputs: Vec<usize>,
    pub(super) output_lens: Vec<usize>,
    /// The output list last handed out (an owned reference): grown in place by the next
    /// render that changes something when nothing else holds it ([`Continuation::output`]).
    out_list: Option<usize>,
    /// Phase 1b's scan of the inputs (`crate::supersede`), when it read all of them: the
    /// next render reads on from their end.
    pub(super) scan: Option<Scan>,
}

/// Marks the restart points of a render that changed nothing (its output is its input;
/// nothing was measured).
pub(super) fn mark_unchanged(core: &mut Resume) {
    let marks: Vec<[usize; 3]> = core
        .unmarked()
        .into_iter()
        .map(|(len, _)| [len, 0, 0])
        .collect();
    core.mark(&marks);
}

/// Sets the marks of the restart points `core` has not had marked: the number of output
/// messages before each, and the summed lengths of the inputs and outputs before it, from
/// `start` (a marked point: `[outputs, input chars, output chars]` before message `from`).
pub(super) fn mark_points(
    core: &mut Resume,
    from: usize,
    start: [usize; 3],
    input_lens: &[usize],
    output_lens: &[usize],
) {
    let sum = |lens: &[usize], from: usize, to: usize| -> usize {
        lens.get(from..to.max(from)).map_or(0, |l| l.iter().sum())
    };
    let marks: Vec<[usize; 3]> = core
        .unmarked()
        .into_iter()
        .map(|(len, outputs)| {
            [
                outputs,
                start[1] + sum(input_lens, from, len),
                start[2] + sum(output_lens, start[0], outputs),
            ]
        })
        .collect();
    core.mark(&marks);
}

impl Continuation {
    /// The continuation of a full frozen render of `inputs` (the render's snapshot, an exact
    /// list never handed out; lengths `lens`, when measured) into `outputs` (`None`: it
    /// changed nothing; else the list and its lengths), taking a reference to the snapshot
    /// and to each output.
    ///
    /// # Safety
    /// The GIL must be held.
    pub(crate) unsafe fn new(
        mut core: Resume,
        index: &PyIndex,
        options: &PyRenderOptions,
        inputs: &Bound<'_, PyList>,
        lens: Option<&[usize]>,
        outputs: Option<(&Bound<'_, PyList>, &[usize])>,
    ) -> Self {
        let take = |objects: &mut dyn Iterator<Item = Obj>| -> Vec<usize> {
            objects
                .map(|obj| {
                    // SAFETY: a live object (the caller's contract, or an item of the live
                    // output list); the GIL is held; the continuation owns this reference.
                    unsafe { ffi::Py_IncRef(obj.as_ptr()) };
                    obj.addr()
                })
                .collect()
        };
        let (outputs, output_lens, out_list) = match outputs {
            Some((list, out_lens)) => {
                mark_points(&mut core, 0, [0; 3], lens.unwrap_or_default(), out_lens);
                // SAFETY: the list is alive (the caller holds it) and the GIL is held.
                let held = take(&mut unsafe { crate::jsread::list_items(Obj::of(list)) });
                (held, out_lens.to_vec(), Some(owned(list)))
            }
            None => {
                mark_unchanged(&mut core);
                (Vec::new(), Vec::new(), None)
            }
        };
        Continuation {
            core: Some(core),
            index: index.instance(),
            options: options.stamp,
            inputs: owned(inputs),
            covered: inputs.len(),
            input_lens: lens.map(<[usize]>::to_vec),
            outputs,
            output_lens,
            out_list,
            scan: None,
        }
    }

    /// The snapshot of `messages` for a render that may resume from this continuation: its
    /// own list of inputs with the items of `messages` after those it covers appended, when
    /// `messages` starts with the very objects it covers (compared by address: it holds
    /// them, so no other object can have one of their addresses). `None` when it does not
    /// (or the list was left longer by a render that failed): the continuation is stale.
    ///
    /// # Safety
    /// The GIL must be held and no view may borrow from the continuation's list.
    pub(super) unsafe fn grown<'py>(
        &self,
        messages: &Bound<'py, PyList>,
    ) -> PyResult<Option<Bound<'py, PyList>>> {
        let py = messages.py();
        // SAFETY: the continuation owns a reference to its list; the GIL is held.
        let held = unsafe { Bound::from_borrowed_ptr(py, Obj::from_addr(self.inputs).as_ptr()) };
        let held = held.downcast_into::<PyList>()?;
        let n = self.covered;
        if held.len() != n || messages.len() < n {
            return Ok(None);
        }
        // SAFETY: both lists are alive (the continuation's, the caller's argument), hold at
        // least `n` items, and no Python code runs while they are compared.
        if !unsafe { same_prefix(Obj::of(messages), Obj::of(&held), n) } {
            return Ok(None);
        }
        let mut at = n;
        // SAFETY: `messages` is alive and the GIL is held; the item is borrowed from it and
        // `PyList_Append` takes a reference of its own (no Python code runs: it only grows
        // the list's array).
        while let Some(item) = unsafe { list_item(Obj::of(messages), at) } {
            // SAFETY: as above.
            if unsafe { ffi::PyList_Append(held.as_ptr(), item.as_ptr()) } != 0 {
                return Err(PyErr::fetch(py));
            }
            at += 1;
        }
        Ok(Some(held))
    }

    /// The phase-1b scan to read the grown list on from, taken out: this one's, when it read
    /// every covered message with the same options.
    pub(super) fn take_scan(&mut self, options: u64) -> Option<Scan> {
        let scan = self.scan.take()?;
        (self.options == options && scan.len() == self.covered).then_some(scan)
    }

    /// The output list of a render that kept the first `kept` outputs of the previous one
    /// and made `new` (owned references, which the continuation takes over): the previous
    /// output list grown in place when the continuation is the only holder of it and it
    /// still holds the previous outputs (then nobody can see the change; `true` comes
    /// back), else a new list. The outputs dropped go to `released`.
    ///
    /// # Safety
    /// The GIL must be held and `new` live objects.
    pub(super) unsafe fn output<'py>(
        &mut self,
        py: Python<'py>,
        kept: usize,
        new: Vec<usize>,
        released: &mut Vec<usize>,
    ) -> PyResult<(Bound<'py, PyList>, bool)> {
        let kept = kept.min(self.outputs.len());
        // SAFETY: the continuation owns a reference to the list (alive); the GIL is held and
        // no Python code runs while its items are read.
        let regrow = self.out_list.filter(|&list| unsafe {
            let list = Obj::from_addr(list);
            ffi::Py_REFCNT(list.as_ptr()) == 1
                && cpython::list_items(list).is_some_and(|items| {
                    items.len() == self.outputs.len()
                        && same_objects(items, &self.outputs, |a| a)
                })
        });
        released.extend(self.outputs.drain(kept..));
        self.outputs.extend(new);
        let Some(list) = regrow else {
            released.extend(self.out_list.take());
            let out = new_list(py, &self.outputs)?;
            self.out_list = Some(owned(&out));
            return Ok((out, false));
        };
        let list = Obj::from_addr(list);
        // SAFETY: the continuation owns the list and nothing else does (checked above); the
        // GIL is held. The items removed are the outputs just released (each still held by
        // `released`, so none is freed and no Python code runs); each new one gets a
        // reference of the list's own.
        unsafe {
            let tail = ffi::Py_ssize_t::try_from(kept).unwrap_or(ffi::PY_SSIZE_T_MAX);
            if ffi::PyList_SetSlice(list.as_ptr(), tail, ffi::PY_SSIZE_T_MAX, std::ptr::null_mut())
                != 0
            {
                return Err(PyErr::fetch(py));
            }
            for &message in self.outputs.get(kept..).unwrap_or_default() {
                // SAFETY: as above.
                if ffi::PyList_Append(list.as_ptr(), Obj::from_addr(message).as_ptr()) != 0 {
                    return Err(PyErr::fetch(py));
                }
            }
            let out = Bound::from_borrowed_ptr(py, list.as_ptr());
            Ok((out.downcast_into_unchecked::<PyList>(), true))
        }
    }

    /// Hands its references over to `released` (released once nothing borrows).
    pub(crate) fn retire(self, released: &mut Vec<usize>) {
        released.push(self.inputs);
        released.extend(self.outputs);
        released.extend(self.out_list);
    }
}

/// The address of `list` with a reference the caller owns from now on (released through
/// `retire`).
fn owned(list: &Bound<'_, PyList>) -> usize {
    list.clone().into_ptr() as usize
}

/// A new list of `objects` (each gets a reference for its slot).
pub(super) fn new_list<'py>(py: Python<'py>, objects: &[usize]) -> PyResult<Bound<'py, PyList>> {
    let count = ffi::Py_ssize_t::try_from(objects.len())
        .map_err(|_| pyo3::exceptions::PyValueError::new_err("too many messages"))?;
    // SAFETY: the GIL is held; a new list of `count` empty slots, each filled once below
    // with a new reference that `PyList_SetItem` steals.
    let out = unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyList_New(count))? };
    for (at, &obj) in objects.iter().enumerate() {
        let obj = Obj::from_addr(obj);
        // SAFETY: `obj` is alive (the caller owns a reference); the list gets a new
        // reference for the slot it steals; `at < count`.
        unsafe {
            ffi::Py_IncRef(obj.as_ptr());
            ffi::PyList_SetItem(out.as_ptr(), at as ffi::Py_ssize_t, obj.as_ptr());
        }
    }
    Ok(out.downcast_into::<PyList>()?)
}

/// Whether the first `n` items of the lists `a` and `b` are the same objects.
///
/// # Safety
/// Both lists must be alive and hold at least `n` items, the GIL held.
unsafe fn same_prefix(a: Obj, b: Obj, n: usize) -> bool {
    // SAFETY: `# Safety` above: the lists are alive and no Python code runs while read.
    if let (Some(x), Some(y)) = unsafe { (cpython::list_items(a), cpython::list_items(b)) } {
        return match (x.get(..n), y.get(..n)) {
            (Some(x), Some(y)) => same_objects(x, y, Obj::addr),
            _ => false,
        };
    }
    (0..n).all(|i| {
        // SAFETY: as above; the items are only compared.
        let (p, q) = unsafe { (list_item(a, i), list_item(b, i)) };
        p.is_some() && p == q
    })
}

/// Whether `x` and `y` (addresses given by `addr`) are the same objects, item by item:
/// compared a block at a time without an early exit inside a block (the compiler turns that
/// into vector compares).
fn same_objects<T: Copy>(x: &[Obj], y: &[T], addr: impl Fn(T) -> usize) -> bool {
    const BLOCK: usize = 64;
    x.len() == y.len()
        && x.chunks(BLOCK).zip(y.chunks(BLOCK)).all(|(p, q)| {
            p.iter()
                .zip(q)
                .fold(0, |acc, (a, &b)| acc | (a.addr() ^ addr(b)))
                == 0
        })
}

/// How resumed renders went (`RenderCache.resume_stats`).
#[derive(Default, Clone, Copy)]
pub(crate) struct ResumeStats {
    /// Renders resumed at the end of the previous one (only new messages read).
    pub(crate) resumed: u64,
    /// Renders resumed from an earlier restart point (after an index change).
    pub(crate) restarted: u64,
    /// Frozen renders of the whole list (nothing to resume from, or a fallback).
    pub(crate) full: u64,
    /// Fallbacks, by [`FALLBACKS`] position.
    pub(crate) fallbacks: [u64; FALLBACKS.len()],
    /// Continuations that did not apply (another index or options, another list).
    pub(crate) stale: u64,
    /// Frozen renders whose snapshot was the continuation's list grown by the new messages
    /// (not a copy of the whole list).
    pub(crate) inputs_grown: u64,
    /// Resumed renders whose output list was the previous one grown in place (nothing
    /// else held it).
    pub(crate) outputs_grown: u64,
}

/// The fallbacks counted, in [`ResumeStats::fallbacks`] order.
pub(crate) const FALLBACKS: [Fallback; 8] = [
    Fallback::Grace,
    Fallback::Errored,
    Fallback::Cooldown,
    Fallback::Range,
    Fallback::Summary,
    Fallback::Throws,
    Fallback::FirstChange,
    Fallback::Changed,
];

impl ResumeStats {
    pub(super) fn fell_back(&mut self, why: Fallback) {
        if let Some(at) = FALLBACKS.iter().position(|&f| f == why)
            && let Some(count) = self.fallbacks.get_mut(at)
        {
            *count += 1;
        }
    }
}

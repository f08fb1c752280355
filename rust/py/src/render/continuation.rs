//! What a frozen render leaves for the next one to resume from ([`Continuation`], kept by the
//! render cache), and how resumed renders went ([`ResumeStats`]); `super::resume` says when
//! and how a render resumes.

use pi_condense_core::render::supersede::Scan;
use pi_condense_core::render::{Fallback, Resume};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyList;

use super::options::PyRenderOptions;
use crate::index::PyIndex;
use crate::jsread::Obj;

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
    /// The input messages, in order (owned references).
    pub(super) inputs: Vec<usize>,
    /// Their lengths, while every render since the first change measured them.
    pub(super) input_lens: Option<Vec<usize>>,
    /// The output messages, in order (owned references), and their lengths; empty while
    /// nothing changed.
    pub(super) outputs: Vec<usize>,
    pub(super) output_lens: Vec<usize>,
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
    /// The continuation of a full frozen render of `inputs` (lengths `lens`, when measured)
    /// into `outputs` (`None`: it changed nothing; else the list and its lengths), taking a
    /// reference to each.
    ///
    /// # Safety
    /// The GIL must be held and `inputs` live objects.
    pub(crate) unsafe fn new(
        mut core: Resume,
        index: &PyIndex,
        options: &PyRenderOptions,
        inputs: &[Obj],
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
        let (outputs, output_lens) = match outputs {
            Some((list, out_lens)) => {
                mark_points(&mut core, 0, [0; 3], lens.unwrap_or_default(), out_lens);
                // SAFETY: the list is alive (the caller holds it) and the GIL is held.
                let held = take(&mut unsafe { crate::jsread::list_items(Obj::of(list)) });
                (held, out_lens.to_vec())
            }
            None => {
                mark_unchanged(&mut core);
                (Vec::new(), Vec::new())
            }
        };
        Continuation {
            core: Some(core),
            index: index.instance(),
            options: options.stamp,
            inputs: take(&mut inputs.iter().copied()),
            input_lens: lens.map(<[usize]>::to_vec),
            outputs,
            output_lens,
            scan: None,
        }
    }

    /// The phase-1b scan to read `items` on from, taken out: this one's, when its inputs
    /// start `items` and the options are the same.
    pub(super) fn take_scan(&mut self, items: &[Obj], options: u64) -> Option<Scan> {
        let scan = self.scan.take()?;
        let same = self.options == options
            && scan.len() == self.inputs.len()
            && items.len() >= self.inputs.len()
            && self
                .inputs
                .iter()
                .zip(items)
                .all(|(&held, &item)| held == item.addr());
        same.then_some(scan)
    }

    /// Hands its references over to `released` (released once nothing borrows).
    pub(crate) fn retire(self, released: &mut Vec<usize>) {
        released.extend(self.inputs);
        released.extend(self.outputs);
    }
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

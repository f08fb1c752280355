//! Whether a call lets the cyclic collector run (test support).

use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyDict};

/// Runs `f` with a finalizer armed in an unreachable reference cycle and the collector set
/// to collect at the next container allocated; returns `f`'s result and whether the
/// collector ran during `f` (the finalizer logs the phase a byte array holds when it runs;
/// the phase is written in place, without allocating, before and after `f`).
pub fn collects_during<'py, R>(py: Python<'py>, f: impl FnOnce() -> R) -> (R, bool) {
    let globals = PyDict::new(py);
    let phase = PyByteArray::new(py, &[0]);
    globals.set_item("phase", &phase).unwrap();
    py.run(
        pyo3::ffi::c_str!(
            "import gc\n\
             seen = []\n\
             class Finalizer:\n\
             \x20   def __del__(self): seen.append(phase[0])\n\
             gc.collect()\n\
             gc.disable()\n\
             f = Finalizer(); f.cycle = f; del f\n\
             gc.set_threshold(1)\n\
             gc.enable()\n"
        ),
        Some(&globals),
        None,
    )
    .unwrap();
    // SAFETY: `phase` is alive (owned here) and one byte long; the GIL is held.
    let set = |value: u8| unsafe { *phase.data() = value };
    set(1);
    let result = f();
    set(2);
    py.run(
        pyo3::ffi::c_str!("gc.set_threshold(700)\ngc.collect()\n"),
        Some(&globals),
        None,
    )
    .unwrap();
    let seen: Vec<u8> = globals
        .get_item("seen")
        .unwrap()
        .unwrap()
        .extract()
        .unwrap();
    assert_eq!(seen.len(), 1, "the finalizer ran once");
    (result, seen[0] == 1)
}

//! Thin PyO3 bindings: convert Python values to core views and back. No logic lives here.

#![warn(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

use pyo3::prelude::*;

mod chains;
#[doc(hidden)]
pub mod cpython;
mod index;
mod json;
#[doc(hidden)]
pub mod jsread;
mod keys;
mod lists;
mod load;
mod pyvalue;
mod render;
mod size_memo;
mod stamp;

// The module relies on the GIL (borrowed views, the size memo): it declares so, and a
// free-threaded interpreter keeps the GIL on while it is imported.
#[pymodule(gil_used = true)]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    cpython::init(m.py());
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    jsread::register(m)?;
    json::register(m)?;
    keys::register(m)?;
    load::register(m)?;
    index::register(m)?;
    render::register(m)?;
    size_memo::register(m)?;
    chains::register(m)?;
    lists::register(m)?;
    Ok(())
}

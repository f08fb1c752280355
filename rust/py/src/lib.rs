//! Thin PyO3 bindings: convert Python values to core views and back. No logic lives here.

use pyo3::prelude::*;

mod chains;
mod index;
mod json;
mod keys;
mod pyvalue;
mod read_memo;
mod render;
mod size_memo;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    json::register(m)?;
    keys::register(m)?;
    index::register(m)?;
    render::register(m)?;
    size_memo::register(m)?;
    chains::register(m)?;
    Ok(())
}

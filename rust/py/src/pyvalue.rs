//! Reading JSON-shaped Python values with JavaScript's eyes, shared by the bindings.

use pyo3::exceptions::PyOverflowError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt};

/// `typeof v === "number"` as a double: floats as they are, ints rounded to the nearest
/// double (ints beyond a double's range read as +-Infinity, as `JSON.parse` reads them);
/// bools and every other type: `None`.
pub(crate) fn js_number(value: &Bound<'_, PyAny>) -> PyResult<Option<f64>> {
    if value.is_instance_of::<PyBool>() {
        return Ok(None);
    }
    if let Ok(f) = value.downcast::<PyFloat>() {
        return Ok(Some(f.value()));
    }
    if value.is_instance_of::<PyInt>() {
        return match value.extract::<f64>() {
            Ok(x) => Ok(Some(x)),
            Err(err) if err.is_instance_of::<PyOverflowError>(value.py()) => {
                Ok(Some(if value.lt(0)? {
                    f64::NEG_INFINITY
                } else {
                    f64::INFINITY
                }))
            }
            Err(err) => Err(err),
        };
    }
    Ok(None)
}

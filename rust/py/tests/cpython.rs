//! The in-place layout reads (`_core::cpython`) against an embedded interpreter: each agrees
//! with the C API, whether the layout reads are on or not.

use _core::cpython::{features, init, list_items, str_utf8};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};

#[test]
fn str_utf8_agrees_with_the_api() {
    Python::with_gil(|py| {
        init(py);
        for sample in [
            "",
            "a",
            "toolResult",
            "caf\u{e9}",
            "\u{1f600}x",
            &"y".repeat(500),
        ] {
            let s = PyString::new(py, sample);
            // SAFETY: `s` is alive for the whole block and the GIL is held.
            let text = unsafe { str_utf8(s.as_ptr()) };
            assert_eq!(text, Some(sample), "{sample:?}");
        }
        // Lone surrogates: no UTF-8 form, and no error left set.
        let lone = py
            .eval(pyo3::ffi::c_str!("'a\\ud800'"), None, None)
            .unwrap()
            .downcast_into::<PyString>()
            .unwrap();
        // SAFETY: as above.
        assert_eq!(unsafe { str_utf8(lone.as_ptr()) }, None);
        assert!(PyErr::take(py).is_none());
    });
}

#[test]
fn list_items_agree_with_the_api() {
    Python::with_gil(|py| {
        init(py);
        let on = features(py)
            .unwrap()
            .get_item("list_items")
            .unwrap()
            .unwrap()
            .extract::<bool>()
            .unwrap();
        let list = PyList::new(py, [1, 2, 3]).unwrap();
        // SAFETY: `list` is alive and unchanged while the slice is used; the GIL is held.
        let items = unsafe { list_items(list.as_ptr()) };
        match items {
            Some(items) => {
                assert!(on);
                let api: Vec<_> = list.iter().map(|i| i.as_ptr()).collect();
                assert_eq!(items, api.as_slice());
            }
            None => assert!(!on),
        }
        // A subclass is never read in place.
        let sub = py
            .eval(pyo3::ffi::c_str!("type('L', (list,), {})([1])"), None, None)
            .unwrap();
        // SAFETY: as above.
        assert!(unsafe { list_items(sub.as_ptr()) }.is_none());
    });
}

#[test]
fn features_name_every_read() {
    Python::with_gil(|py| {
        init(py);
        let f = features(py).unwrap();
        let mut names: Vec<String> = f.keys().iter().map(|k| k.extract().unwrap()).collect();
        names.sort();
        assert_eq!(names, ["ascii_text", "list_items", "prefetch"]);
    });
}

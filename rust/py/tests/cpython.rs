//! The in-place layout reads (`_core::cpython`) against an embedded interpreter: each agrees
//! with the C API, whether the layout reads are on or not.

use _core::cpython::{features, init, list_items, str_chars, str_utf8, StrChars};
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

fn feature(py: Python<'_>, name: &str) -> bool {
    features(py)
        .unwrap()
        .get_item(name)
        .unwrap()
        .unwrap()
        .extract::<bool>()
        .unwrap()
}

/// The code points of a `StrChars` and its width in bytes.
fn code_points(chars: StrChars<'_>) -> (Vec<u32>, usize) {
    match chars {
        StrChars::Ascii(text) => (text.chars().map(u32::from).collect(), 0),
        StrChars::Latin1(c) => (c.iter().map(|&b| u32::from(b)).collect(), 1),
        StrChars::Bmp(c) => (c.iter().map(|&u| u32::from(u)).collect(), 2),
        StrChars::CodePoints(c) => (c.to_vec(), 4),
    }
}

#[test]
fn str_chars_agree_with_the_api() {
    Python::with_gil(|py| {
        init(py);
        let on = feature(py, "str_chars");
        let ord = py.import("builtins").unwrap().getattr("ord").unwrap();
        // (Python literal, width CPython stores it with: 0 for ASCII)
        for (literal, width) in [
            ("''", 0),
            ("'toolResult'", 0),
            ("'caf\\xe9'", 1),
            ("'\\xff' * 300", 1),
            ("'a\\u2500b'", 2),
            ("'\\u2500' * 300 + '\"'", 2),
            ("'x\\ud800y'", 2),
            ("'\\ud83d\\ude00'", 2),
            ("'\\U0001f600x'", 4),
            ("'\\U0010ffff\\ud800' * 50", 4),
        ] {
            let code = std::ffi::CString::new(literal).unwrap();
            let s = py.eval(&code, None, None).unwrap();
            let api: Vec<u32> = s
                .try_iter()
                .unwrap()
                .map(|c| ord.call1((c.unwrap(),)).unwrap().extract::<u32>().unwrap())
                .collect();
            // SAFETY: `s` is alive for the whole block and the GIL is held.
            let read = unsafe { str_chars(s.as_ptr()) };
            match read {
                Some(chars) => {
                    let (points, read_width) = code_points(chars);
                    assert!(on || read_width == 0, "{literal}");
                    assert_eq!(read_width, width, "{literal}");
                    assert_eq!(points, api, "{literal}");
                }
                // Read through the API: only with the layout reads off.
                None => assert!(
                    !on && (width != 0 || !feature(py, "ascii_text")),
                    "{literal}"
                ),
            }
        }
        // A subclass is never read in place.
        let sub = py
            .eval(
                pyo3::ffi::c_str!("type('S', (str,), {})('\\u2500x')"),
                None,
                None,
            )
            .unwrap();
        // SAFETY: as above.
        assert!(unsafe { str_chars(sub.as_ptr()) }.is_none());
    });
}

#[test]
fn list_items_agree_with_the_api() {
    Python::with_gil(|py| {
        init(py);
        let on = feature(py, "list_items");
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
        assert_eq!(names, ["ascii_text", "list_items", "prefetch", "str_chars"]);
    });
}

//! The in-place layout reads (`_core::cpython`) against an embedded interpreter: each agrees
//! with the C API, whether the layout reads are on or not.

use _core::cpython::{
    DictMembers, Obj, StrChars, features, has_lone_surrogate, init, list_items, str_chars, str_utf8,
};
use pyo3::prelude::*;

mod support;
use pyo3::types::{PyDict, PyList, PyString};

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
            let text = unsafe { str_utf8(Obj::of(&s)) };
            assert_eq!(text, Some(sample), "{sample:?}");
        }
        // Lone surrogates: no UTF-8 form, and no error left set.
        let lone = py
            .eval(pyo3::ffi::c_str!("'a\\ud800'"), None, None)
            .unwrap()
            .downcast_into::<PyString>()
            .unwrap();
        // SAFETY: as above.
        assert_eq!(unsafe { str_utf8(Obj::of(&lone)) }, None);
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
            let read = unsafe { str_chars(Obj::of(&s)) };
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
        assert!(unsafe { str_chars(Obj::of(&sub)) }.is_none());
    });
}

#[test]
fn list_items_agree_with_the_api() {
    Python::with_gil(|py| {
        init(py);
        let on = feature(py, "list_items");
        let list = PyList::new(py, [1, 2, 3]).unwrap();
        // SAFETY: `list` is alive and unchanged while the slice is used; the GIL is held.
        let items = unsafe { list_items(Obj::of(&list)) };
        match items {
            Some(items) => {
                assert!(on);
                let api: Vec<Obj> = list.iter().map(|i| Obj::of(&i)).collect();
                assert_eq!(items, api.as_slice());
            }
            None => assert!(!on),
        }
        // A subclass is never read in place.
        let sub = py
            .eval(pyo3::ffi::c_str!("type('L', (list,), {})([1])"), None, None)
            .unwrap();
        // SAFETY: as above.
        assert!(unsafe { list_items(Obj::of(&sub)) }.is_none());
    });
}

#[test]
fn features_name_every_read() {
    Python::with_gil(|py| {
        init(py);
        let f = features(py).unwrap();
        let mut names: Vec<String> = f.keys().iter().map(|k| k.extract().unwrap()).collect();
        names.sort();
        assert_eq!(
            names,
            [
                "ascii_text",
                "dict_entries",
                "list_items",
                "prefetch",
                "str_chars"
            ]
        );
    });
}

/// The members of a dict as `PyDict_Next` hands them out, from `pos`.
fn members_through_api(dict: &Bound<'_, PyAny>, mut pos: isize) -> Vec<(usize, usize)> {
    let (mut key, mut value) = (std::ptr::null_mut(), std::ptr::null_mut());
    let mut members = Vec::new();
    // SAFETY: `dict` is a live dict, unchanged while walked; the GIL is held.
    while unsafe { pyo3::ffi::PyDict_Next(dict.as_ptr(), &mut pos, &mut key, &mut value) } != 0 {
        members.push((key as usize, value as usize));
    }
    members
}

#[test]
fn dict_members_agree_with_the_api() {
    Python::with_gil(|py| {
        init(py);
        let on = feature(py, "dict_entries");
        let globals = PyDict::new(py);
        py.run(
            pyo3::ffi::c_str!(
                "
class Sub(dict):
    pass
class Attrs:
    pass
instance = Attrs()
instance.a, instance.b = 1, 'x'
deleted = {f'k{i}': i for i in range(40)}
for i in range(0, 40, 3):
    del deleted[f'k{i}']
deleted['again'] = 'last'
mixed = {1: 'one', 'two': 2, (3,): None, 2.5: [], 'k': {}}
mixed_deleted = dict(mixed)
del mixed_deleted['two'], mixed_deleted[(3,)]
samples = [
    ({}, True),
    ({'role': 'user', 'content': 'hi', 'timestamp': 1}, True),
    ({f'key{i}': i for i in range(300)}, True),
    (deleted, True),
    (mixed, True),
    (mixed_deleted, True),
    ({i: i for i in range(70000)}, True),
    (instance.__dict__, False),
    (Sub(a=1, b=2), False),
]
"
            ),
            Some(&globals),
            None,
        )
        .unwrap();
        let samples = globals.get_item("samples").unwrap().unwrap();
        for sample in samples.try_iter().unwrap() {
            let (dict, combined): (Bound<'_, PyAny>, bool) = sample.unwrap().extract().unwrap();
            let api = members_through_api(&dict, 0);
            // SAFETY: `dict` is a live dict, unchanged while walked; the GIL is held.
            let mut walk = unsafe { DictMembers::new(Obj::of(&dict), 0) };
            assert_eq!(walk.in_place(), on && combined, "{dict}");
            let read: Vec<(usize, usize)> =
                walk.by_ref().map(|(k, v)| (k.addr(), v.addr())).collect();
            assert_eq!(read, api, "{dict}");
            // A walk stopped after each member resumes where `PyDict_Next` would.
            for taken in 0..api.len().min(12) {
                // SAFETY: as above.
                let mut first = unsafe { DictMembers::new(Obj::of(&dict), 0) };
                let head: Vec<_> = first.by_ref().take(taken).collect();
                assert_eq!(head.len(), taken);
                let pos = first.position();
                // SAFETY: as above; `pos` is where a walk of the same dict stopped.
                let rest: Vec<(usize, usize)> = unsafe { DictMembers::new(Obj::of(&dict), pos) }
                    .map(|(k, v)| (k.addr(), v.addr()))
                    .collect();
                assert_eq!(rest, members_through_api(&dict, pos), "{dict} from {taken}");
                assert_eq!(rest.as_slice(), &api[taken..], "{dict} from {taken}");
            }
            // `try_each` visits the same members and stops at the first error.
            let mut seen = Vec::new();
            // SAFETY: as above.
            let stopped = unsafe { DictMembers::new(Obj::of(&dict), 0) }.try_each(|k, v| {
                seen.push((k.addr(), v.addr()));
                if seen.len() == 3 { Err(()) } else { Ok(()) }
            });
            assert_eq!(stopped.is_err(), api.len() >= 3);
            assert_eq!(seen.as_slice(), &api[..api.len().min(3)]);
        }
    });
}

/// Lone surrogates are found from the code units, for exact strs of every width and for str
/// subclasses (read through the API), and nothing is raised: no exception object is ever
/// built on the read path (building one could start the cyclic collector).
#[test]
fn lone_surrogates_are_found_without_raising() {
    Python::with_gil(|py| {
        init(py);
        let code = pyo3::ffi::c_str!(
            "(lambda S: [(s, any(0xD800 <= ord(c) <= 0xDFFF for c in s)) for s in \
             ['', 'a', 'caf\\xe9', '\\u2500', 'x\\ud800', '\\udfff', '\\U0001f600', \
              '\\U0001f600\\udc00', 'ok\\u2500\\ud83d\\ude00'] + \
             [S(t) for t in ['b', '\\xe9', 'y\\ud801', '\\U0001f600']]])\
             (type('S', (str,), {}))"
        );
        let samples = py.eval(code, None, None).unwrap();
        for pair in samples.downcast::<PyList>().unwrap().iter() {
            let (s, expected): (Bound<'_, PyString>, bool) = pair.extract().unwrap();
            // SAFETY: `s` is alive for the whole block and the GIL is held.
            let ((found, utf8), collected) = support::collects_during(py, || unsafe {
                (has_lone_surrogate(Obj::of(&s)), str_utf8(Obj::of(&s)))
            });
            assert_eq!(found, expected, "{s:?}");
            assert_eq!(utf8.is_none(), expected, "{s:?}");
            assert!(PyErr::take(py).is_none());
            assert!(!collected, "the collector ran while {s:?} was read");
        }
    });
}

//! The JS reader (`_core::jsread`) against an embedded interpreter (pyo3 `auto-initialize`).

use _core::jsread::{
    K, Keys, Obj, is_absent, js_id_bound, js_number, js_string, register, text, timestamp_bound,
    truthy,
};
use pi_condense_core::render::{JsIdOf, Ts};
use pyo3::prelude::*;

mod support;
use pyo3::types::{PyDict, PyList, PyModule};

/// Runs `f` with the GIL and a module holding `ABSENT` (`_core.ABSENT`).
fn with_module<R>(f: impl for<'py> FnOnce(Python<'py>, &Bound<'py, PyModule>) -> R) -> R {
    Python::with_gil(|py| {
        let m = PyModule::new(py, "jsread_test").unwrap();
        register(&m).unwrap();
        f(py, &m)
    })
}

fn eval<'py>(py: Python<'py>, m: &Bound<'py, PyModule>, code: &str) -> Bound<'py, PyAny> {
    let globals = PyDict::new(py);
    globals
        .set_item("ABSENT", m.getattr("ABSENT").unwrap())
        .unwrap();
    let code = std::ffi::CString::new(code).unwrap();
    py.eval(&code, Some(&globals), None).unwrap()
}

fn string_of(py: Python<'_>, m: &Bound<'_, PyModule>, code: &str) -> String {
    let value = eval(py, m, code);
    js_string(Some(&value)).unwrap().into_string()
}

#[test]
fn js_string_follows_string_and_array_join() {
    with_module(|py, m| {
        assert_eq!(string_of(py, m, "None"), "null");
        assert_eq!(string_of(py, m, "True"), "true");
        assert_eq!(string_of(py, m, "ABSENT"), "undefined");
        assert_eq!(string_of(py, m, "1.0"), "1");
        assert_eq!(string_of(py, m, "-0.0"), "0");
        assert_eq!(string_of(py, m, "1e21"), "1e+21");
        assert_eq!(string_of(py, m, "2**70"), "1.1805916207174113e+21");
        assert_eq!(string_of(py, m, "{'a': 1}"), "[object Object]");
        // [1, null, undefined, [2, [3]], "x"].join()
        assert_eq!(
            string_of(py, m, "[1, None, ABSENT, [2, [3]], 'x']"),
            "1,,,2,3,x"
        );
        assert_eq!(string_of(py, m, "('a', 'b')"), "a,b");
        assert!(js_string(None).unwrap() == "undefined");
    });
}

#[test]
fn js_string_stops_at_cycles_and_depth() {
    with_module(|py, m| {
        // a = ["x", 2]; a.push(a); String(a) === "x,2,"
        let cyclic = eval(py, m, "(lambda a: (a.append(a), a)[1])(['x', 2])");
        assert_eq!(js_string(Some(&cyclic)).unwrap().into_string(), "x,2,");
        // Nested deeper than the limit: printed as "" from there on (no stack overflow).
        let deep = eval(
            py,
            m,
            "(lambda f: f(f, 200))(lambda f, n: [f(f, n - 1)] if n else 'z')",
        );
        assert_eq!(js_string(Some(&deep)).unwrap().into_string(), "");
        let shallow = eval(py, m, "[[['z']]]");
        assert_eq!(js_string(Some(&shallow)).unwrap().into_string(), "z");
    });
}

#[test]
fn js_string_keeps_lone_surrogates_exactly() {
    with_module(|py, m| {
        let value = eval(py, m, "['a', '\\ud800']");
        let s = js_string(Some(&value)).unwrap();
        assert_eq!(s.as_str(), "a,\u{FFFD}");
        assert_eq!(s.exact(), Some(&b"a,\xed\xa0\x80"[..]));
    });
}

#[test]
fn absent_is_told_by_identity() {
    with_module(|py, m| {
        let absent = m.getattr("ABSENT").unwrap();
        assert!(is_absent(Obj::of(&absent)));
        assert!(!absent.is_truthy().unwrap());
        assert_eq!(absent.repr().unwrap().to_string(), "ABSENT");
        // Another object of a type named like it is not ABSENT.
        let other = eval(py, m, "type('AbsentType', (), {})()");
        assert!(!is_absent(Obj::of(&other)));
        assert!(!is_absent(Obj::from_ptr(py.None().as_ptr())));
        // Registering again (a second module) keeps the one sentinel.
        let again = PyModule::new(py, "jsread_again").unwrap();
        register(&again).unwrap();
        assert!(again.getattr("ABSENT").unwrap().is(&absent));
    });
}

#[test]
fn numbers_ids_and_truthiness() {
    with_module(|py, m| {
        let n = |code: &str| js_number(&eval(py, m, code)).unwrap();
        assert_eq!(n("3"), Some(3.0));
        assert_eq!(n("2.5"), Some(2.5));
        assert_eq!(n("True"), None);
        assert_eq!(n("'3'"), None);
        assert_eq!(n("10**400"), Some(f64::INFINITY));
        assert_eq!(n("-10**400"), Some(f64::NEG_INFINITY));
        // An int subclass is read by value; its __float__ is never called.
        assert_eq!(
            n("type('I', (int,), {'__float__': lambda s: 1/0})(7)"),
            Some(7.0)
        );
        let id = |code: &str| js_id_bound(Some(&eval(py, m, code))).unwrap();
        assert_eq!(id("'c1'"), JsIdOf::Str("c1".to_owned()));
        assert_eq!(id("None"), JsIdOf::Null);
        assert_eq!(id("False"), JsIdOf::Bool(false));
        assert_eq!(id("-0.0"), id("0"));
        assert_eq!(js_id_bound(None).unwrap(), JsIdOf::Undefined);
        assert_eq!(id("ABSENT"), JsIdOf::Undefined);
        let t = |code: &str| truthy(Some(&eval(py, m, code))).unwrap();
        for falsy in ["None", "False", "''", "0", "0.0", "float('nan')", "ABSENT"] {
            assert!(!t(falsy), "{falsy}");
        }
        for truthy_value in ["[]", "{}", "'0'", "1", "True"] {
            assert!(t(truthy_value), "{truthy_value}");
        }
        assert_eq!(timestamp_bound(None).unwrap(), Ts::Absent);
        assert_eq!(
            timestamp_bound(Some(&eval(py, m, "5"))).unwrap(),
            Ts::Num(5.0)
        );
        assert_eq!(
            timestamp_bound(Some(&eval(py, m, "'5'"))).unwrap(),
            Ts::Other
        );
        assert_eq!(
            text(eval(py, m, "'a\\ud800b'").downcast().unwrap()),
            "a\u{FFFD}b"
        );
    });
}

#[test]
fn keys_find_members_by_walking_the_dict() {
    with_module(|py, m| {
        let keys = Keys::new(py, true);
        // A str subclass key is found by its text; a non-str key whose __eq__ would run is
        // skipped (never compared); ABSENT reads as missing.
        let globals = PyDict::new(py);
        globals
            .set_item("ABSENT", m.getattr("ABSENT").unwrap())
            .unwrap();
        py.run(
            pyo3::ffi::c_str!(
                "class S(str): pass\n\
                 calls = []\n\
                 class K:\n    \
                     def __hash__(self): return hash('role')\n    \
                     def __eq__(self, other): calls.append(1); return False\n\
                 d = {S('role'): 'user', K(): 'boom', 'id': ABSENT}\n\
                 del calls[:]\n"
            ),
            Some(&globals),
            None,
        )
        .unwrap();
        let dict = globals.get_item("d").unwrap().unwrap();
        let role = keys.get_bound(&dict, K::Role).unwrap();
        assert_eq!(role.extract::<String>().unwrap(), "user");
        assert!(keys.get_bound(&dict, K::Id).is_none());
        assert!(keys.get_bound(&dict, K::Content).is_none());
        let calls = globals.get_item("calls").unwrap().unwrap();
        assert_eq!(calls.len().unwrap(), 0, "a key's __eq__ ran");
        let list = PyList::empty(py);
        assert!(keys.get_bound(list.as_any(), K::Role).is_none());
        assert_eq!(
            keys.key(K::ToolCallId).extract::<String>().unwrap(),
            "toolCallId"
        );
    });
}

/// Ints beyond `long long` read as the nearest double, or +-Infinity beyond the double range
/// (exactly where `float(i)` overflows), told from the digits with nothing raised.
#[test]
fn big_ints_round_or_overflow_as_float_does_without_raising() {
    with_module(|py, m| {
        for code in [
            "2**63",
            "-(2**63) - 1",
            "10**300",
            "(2**53 - 1) * 2**971",
            "(2**53 - 1) * 2**971 + 2**970 - 1",
            "(2**53 - 1) * 2**971 + 2**970",
            "-((2**53 - 1) * 2**971 + 2**970)",
            "2**1024",
            "10**400",
            "-(10**400)",
            "type('I', (int,), {'__float__': lambda s: 1.0})(10**400)",
        ] {
            let value = eval(py, m, code);
            // The oracle: float() of the int's value, +-Infinity where it overflows.
            let code_float = std::ffi::CString::new(format!("float(int.__int__({code}))")).unwrap();
            let expected = match py.eval(&code_float, None, None) {
                Ok(x) => x.extract::<f64>().unwrap(),
                Err(err) => {
                    assert!(err.is_instance_of::<pyo3::exceptions::PyOverflowError>(py));
                    let negative = code.starts_with('-');
                    if negative {
                        f64::NEG_INFINITY
                    } else {
                        f64::INFINITY
                    }
                }
            };
            let (got, collected) = support::collects_during(py, || js_number(&value));
            assert_eq!(got.unwrap(), Some(expected), "{code}");
            assert!(PyErr::take(py).is_none());
            assert!(!collected, "the collector ran while {code} was read");
        }
    });
}

//! `JSON.parse` against `JSON.stringify`: any text the parser accepts prints as a text that
//! parses back to the same value (a number beyond the double range as `null`) and prints the
//! same again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pi_condense_core::json::{parse, stringify};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(value) = parse(text) else {
        return;
    };
    let printed = stringify(&value);
    let again = parse(&printed).expect("stringify printed a text parse refuses");
    assert_eq!(again, value.printed(), "{text:?} -> {printed:?}");
    assert_eq!(stringify(&again), printed);
});

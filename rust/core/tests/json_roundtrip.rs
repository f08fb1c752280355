//! The fuzz target's property (`rust/fuzz/fuzz_targets/parse_stringify.rs`) on stable: any
//! text `json::parse` accepts prints (`json::stringify`) as a text that parses back to the
//! same value (a number beyond the double range as `null`) and prints the same again. The texts are random JSON (escapes, lone
//! surrogates, exponents, deep nesting, repeated keys) and random edits of it, from a fixed
//! seed (the run is the same every time).

use pi_condense_core::json::{parse, stringify};

/// xorshift64*: a small deterministic generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

const PIECES: &[&str] = &[
    "a",
    "é",
    "😀",
    "\\n",
    "\\\"",
    "\\\\",
    "\\/",
    "\\u0041",
    "\\ud83d",
    "\\ude00",
    "\\ud83d\\ude00",
    "\\u0000",
    "\\u2028",
    " ",
    "0",
    "__proto__",
];
const NUMBERS: &[&str] = &[
    "0",
    "-0",
    "1",
    "-1",
    "12345678901234567890",
    "1e21",
    "1E-7",
    "0.1",
    "-2.5e+300",
    "123.456",
    "5e-324",
    "1.7976931348623157e308",
    "9007199254740993",
];

fn string(rng: &mut Rng, out: &mut String) {
    out.push('"');
    for _ in 0..rng.below(5) {
        out.push_str(rng.pick(PIECES));
    }
    out.push('"');
}

fn value(rng: &mut Rng, depth: u32, out: &mut String) {
    let kind = if depth > 6 {
        rng.below(5)
    } else {
        rng.below(7)
    };
    match kind {
        0 => out.push_str(rng.pick(&["null", "true", "false"])),
        1 | 2 => out.push_str(rng.pick(NUMBERS)),
        3 | 4 => string(rng, out),
        5 => {
            out.push('[');
            for i in 0..rng.below(4) {
                if i > 0 {
                    out.push(',');
                }
                value(rng, depth + 1, out);
            }
            out.push(']');
        }
        _ => {
            out.push('{');
            for i in 0..rng.below(4) {
                if i > 0 {
                    out.push(',');
                }
                // Array-index keys reorder; a repeated key keeps its first place.
                match rng.below(3) {
                    0 => out.push_str(rng.pick(&["\"1\"", "\"0\"", "\"10\"", "\"01\""])),
                    1 => out.push_str("\"k\""),
                    _ => string(rng, out),
                }
                out.push_str(rng.pick(&[":", " : "]));
                value(rng, depth + 1, out);
            }
            out.push('}');
        }
    }
}

/// Deletes, duplicates or replaces a few bytes (the result may be invalid UTF-8 or JSON).
fn mutate(rng: &mut Rng, text: &str) -> Vec<u8> {
    let mut bytes = text.as_bytes().to_vec();
    for _ in 0..rng.below(3) + 1 {
        if bytes.is_empty() {
            break;
        }
        let at = rng.below(bytes.len() as u64) as usize;
        match rng.below(3) {
            0 => {
                bytes.remove(at);
            }
            1 => bytes.insert(at, bytes[at]),
            _ => {
                let swaps = b"{}[],:\"\\0e-.";
                bytes[at] = swaps[rng.below(swaps.len() as u64) as usize];
            }
        }
    }
    bytes
}

fn check(text: &str) -> bool {
    let Ok(value) = parse(text) else {
        return false;
    };
    let printed = stringify(&value);
    let again = parse(&printed).unwrap_or_else(|e| panic!("{text:?} -> {printed:?}: {e:?}"));
    assert_eq!(again, value.printed(), "{text:?} -> {printed:?}");
    assert_eq!(stringify(&again), printed, "{text:?}");
    true
}

#[test]
fn parse_then_stringify_is_a_fixed_point() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (mut parsed, mut mutated_parsed) = (0, 0);
    for _ in 0..4000 {
        let mut text = String::new();
        value(&mut rng, 0, &mut text);
        assert!(check(&text), "a generated text was refused: {text:?}");
        parsed += 1;
        if let Ok(edited) = String::from_utf8(mutate(&mut rng, &text)) {
            mutated_parsed += usize::from(check(&edited));
        }
    }
    let deep = "[".repeat(1000) + &"]".repeat(1000);
    assert!(check(&deep));
    assert_eq!(parsed, 4000);
    // Some edits still parse (e.g. a duplicated digit): the property ran on those too.
    assert!(mutated_parsed > 100, "{mutated_parsed}");
}

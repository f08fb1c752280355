//! JavaScript number semantics: `Number.prototype.toString()` formatting and the
//! rounding helpers (`Math.round`) the reference relies on.

/// Integers up to this magnitude are exact in a double and print as their plain digits.
const EXACT_INT_LIMIT: f64 = 9_007_199_254_740_992.0;

/// Formats a double exactly as JavaScript's `String(x)` does
/// (`1` not `1.0`, `1e21` as `1e+21`, `-0` as `0`).
pub fn format_number(x: f64) -> String {
    let mut out = String::new();
    push_number(&mut out, x);
    out
}

/// Appends `String(x)` to `out` ([`format_number`] without a new string).
pub fn push_number(out: &mut String, x: f64) {
    // Integral values within +-2^53 (timestamps, counts, ids: most numbers a session holds)
    // are their digits; the cast is exact there and takes -0 to 0, as JS prints it. NaN
    // fails the range test.
    if x.abs() <= EXACT_INT_LIMIT {
        let value = x as i64;
        if value as f64 == x {
            push_int(out, value);
            return;
        }
    }
    if x.is_nan() {
        out.push_str("NaN");
    } else if x.is_infinite() {
        out.push_str(if x > 0.0 { "Infinity" } else { "-Infinity" });
    } else {
        let mut buf = ryu_js::Buffer::new();
        out.push_str(buf.format_finite(x));
    }
}

/// Appends the decimal digits of `value` (with a leading `-` when negative).
#[inline]
fn push_int(out: &mut String, value: i64) {
    use std::fmt::Write;
    // Writing into a String cannot fail.
    let _ = write!(out, "{value}");
}

/// Formats a double as `JSON.stringify` does: non-finite values become `null`.
pub fn format_json_number(x: f64) -> String {
    if x.is_finite() {
        format_number(x)
    } else {
        "null".to_owned()
    }
}

/// `Math.round`: halves round toward positive infinity.
pub fn math_round(x: f64) -> f64 {
    if !x.is_finite() {
        return x;
    }
    let r = x.floor();
    if x - r >= 0.5 { r + 1.0 } else { r }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_like_javascript() {
        let cases: &[(f64, &str)] = &[
            (0.0, "0"),
            (-0.0, "0"),
            (1.0, "1"),
            (-1.5, "-1.5"),
            (0.1, "0.1"),
            (0.000001, "0.000001"),
            (1e-7, "1e-7"),
            (1e16, "10000000000000000"),
            (1e20, "100000000000000000000"),
            (1e21, "1e+21"),
            (123456789012345680000.0, "123456789012345680000"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (5e-324, "5e-324"),
            (1781234567890.0, "1781234567890"),
            (-1781234567890.0, "-1781234567890"),
            (7.0, "7"),
            (-9.0, "-9"),
            (9007199254740991.0, "9007199254740991"),
            (9007199254740992.0, "9007199254740992"),
            (-9007199254740992.0, "-9007199254740992"),
            (9007199254740994.0, "9007199254740994"),
            (1e15 + 0.5, "1000000000000000.5"),
            (-0.5, "-0.5"),
        ];
        for (x, want) in cases {
            assert_eq!(format_number(*x), *want, "formatting {x:e}");
            let mut out = String::from("t");
            push_number(&mut out, *x);
            assert_eq!(out, format!("t{want}"), "appending {x:e}");
        }
        assert_eq!(format_number(f64::NAN), "NaN");
        assert_eq!(format_number(f64::NEG_INFINITY), "-Infinity");
        assert_eq!(format_json_number(f64::INFINITY), "null");
    }

    #[test]
    fn math_round_is_half_up() {
        assert_eq!(math_round(2.5), 3.0);
        assert_eq!(math_round(-2.5), -2.0);
        assert_eq!(math_round(0.49999999999999994), 0.0);
        assert_eq!(math_round(1.4), 1.0);
    }
}

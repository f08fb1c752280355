//! JavaScript number semantics: `Number.prototype.toString()` formatting and the
//! rounding helpers (`Math.round`) the reference relies on.

/// Formats a double exactly as JavaScript's `String(x)` does
/// (`1` not `1.0`, `1e21` as `1e+21`, `-0` as `0`).
pub fn format_number(x: f64) -> String {
    if x.is_nan() {
        return "NaN".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    if x == 0.0 {
        return "0".to_owned();
    }
    let mut buf = ryu_js::Buffer::new();
    buf.format_finite(x).to_owned()
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
    if x - r >= 0.5 {
        r + 1.0
    } else {
        r
    }
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
        ];
        for (x, want) in cases {
            assert_eq!(format_number(*x), *want, "formatting {x:e}");
        }
        assert_eq!(format_number(f64::NAN), "NaN");
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

//! `new Date(ms).toISOString()` (11 section 5).

/// Largest absolute time value a JS `Date` holds (`8.64e15` ms).
const MAX_TIME_MS: f64 = 8.64e15;
const MS_PER_DAY: i64 = 86_400_000;

/// Days since 1970-01-01 -> (year, month 1-12, day 1-31), proleptic Gregorian.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `new Date(ms).toISOString()`: `YYYY-MM-DDTHH:MM:SS.mmmZ` in UTC, with a signed six-digit
/// year outside 0..=9999. `None` where JS throws `RangeError: Invalid time value` (NaN,
/// infinite, or beyond +-8.64e15 ms). The fraction of a millisecond is dropped (TimeClip).
pub(crate) fn to_iso_string(ms: f64) -> Option<String> {
    if !ms.is_finite() || ms.abs() > MAX_TIME_MS {
        return None;
    }
    // |ms| <= 8.64e15 < 2^63: the truncated value fits.
    let t = ms.trunc() as i64;
    let days = t.div_euclid(MS_PER_DAY);
    let in_day = t.rem_euclid(MS_PER_DAY);
    let (year, month, day) = civil_from_days(days);
    let (h, rest) = (in_day / 3_600_000, in_day % 3_600_000);
    let (m, rest) = (rest / 60_000, rest % 60_000);
    let (s, milli) = (rest / 1000, rest % 1000);
    let year = if (0..=9999).contains(&year) {
        format!("{year:04}")
    } else if year < 0 {
        format!("-{:06}", -year)
    } else {
        format!("+{year:06}")
    };
    Some(format!(
        "{year}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{milli:03}Z"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iso(ms: f64) -> String {
        to_iso_string(ms).unwrap_or_default()
    }

    #[test]
    fn known_values() {
        assert_eq!(iso(0.0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso(1500.0), "1970-01-01T00:00:01.500Z");
        assert_eq!(iso(1_763_684_015_986.0), "2025-11-21T00:13:35.986Z");
        assert_eq!(iso(951_782_400_000.0), "2000-02-29T00:00:00.000Z");
        assert_eq!(iso(-1.0), "1969-12-31T23:59:59.999Z");
        assert_eq!(iso(1.9), "1970-01-01T00:00:00.001Z");
        assert_eq!(iso(-0.5), "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn extended_years() {
        assert_eq!(iso(-62_198_755_200_000.0), "-000001-01-01T00:00:00.000Z");
        assert_eq!(iso(253_402_300_800_000.0), "+010000-01-01T00:00:00.000Z");
        assert_eq!(iso(8.64e15), "+275760-09-13T00:00:00.000Z");
        assert_eq!(iso(-8.64e15), "-271821-04-20T00:00:00.000Z");
    }

    #[test]
    fn invalid_times() {
        assert_eq!(to_iso_string(f64::NAN), None);
        assert_eq!(to_iso_string(f64::INFINITY), None);
        assert_eq!(to_iso_string(8.64e15 + 1.0), None);
    }
}

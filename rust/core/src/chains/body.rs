//! `buildDeterministicBody(records, refs)` (05 section 12): the zero-LLM chain body.

use std::cmp::Ordering;

use super::collate::locale_compare;
use super::iso::to_iso_string;
use crate::js::{format_number, math_round};
use crate::jsstr::JsStr;

/// The first line of every deterministic body.
pub(crate) const HEADER: &str = "Deterministic chain compression (no per-batch summary existed for this span; raw outputs recoverable via context_tree_query).";

/// Args excerpts are cut to this many UTF-16 units (then `...` is appended).
pub(crate) const EXCERPT_UNITS: usize = 200;

/// What the body reads from one record.
#[derive(Debug, Clone, PartialEq)]
pub struct BodyRecord {
    /// `String(record.toolName)`.
    pub tool_name: JsStr,
    /// `String(record.toolCallId)`.
    pub tool_call_id: JsStr,
    /// `JSON.stringify(record.args) ?? ""`.
    pub args_json: JsStr,
    /// `record.resultTimestamp ?? record.timestamp` as a number (NaN when not a number).
    pub at: f64,
}

/// Why the reference throws building the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyError {
    /// No records (`sorted[0]` is undefined).
    NoRecords,
    /// `toISOString()` of an invalid time (`RangeError: Invalid time value`).
    InvalidTime,
}

/// `excerpt(args)`: the JSON text, or its first 200 UTF-16 units + `...`.
fn push_excerpt(out: &mut Vec<u16>, json: &JsStr) {
    let units: Vec<u16> = json.to_utf16();
    if units.len() <= EXCERPT_UNITS {
        out.extend_from_slice(&units);
    } else {
        out.extend_from_slice(&units[..EXCERPT_UNITS]);
        out.extend("...".encode_utf16());
    }
}

fn push(out: &mut Vec<u16>, s: &str) {
    out.extend(s.encode_utf16());
}

/// The seven-line body, as UTF-16 code units (an excerpt cut may split a surrogate pair, which
/// the reference keeps as a lone surrogate).
pub fn deterministic_body(records: &[BodyRecord], refs: &[JsStr]) -> Result<Vec<u16>, BodyError> {
    // Histogram: first-seen order, then count descending, ties by localeCompare (stable).
    let mut counts: Vec<(&JsStr, usize)> = Vec::new();
    for r in records {
        match counts.iter_mut().find(|(name, _)| **name == r.tool_name) {
            Some((_, n)) => *n += 1,
            None => counts.push((&r.tool_name, 1)),
        }
    }
    counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| locale_compare(a.0, b.0)));

    // Stable sort by time; `at(a) - at(b)` being NaN counts as equal.
    let mut sorted: Vec<&BodyRecord> = records.iter().collect();
    sorted.sort_by(|a, b| a.at.partial_cmp(&b.at).unwrap_or(Ordering::Equal));
    let (Some(first), Some(last)) = (sorted.first(), sorted.last()) else {
        return Err(BodyError::NoRecords);
    };
    let seconds = math_round((last.at - first.at) / 1000.0);
    let from = to_iso_string(first.at).ok_or(BodyError::InvalidTime)?;
    let to = to_iso_string(last.at).ok_or(BodyError::InvalidTime)?;
    let refs_line: Vec<&JsStr> = if refs.is_empty() {
        records.iter().map(|r| &r.tool_call_id).collect()
    } else {
        refs.iter().collect()
    };

    let mut out = Vec::new();
    push(&mut out, HEADER);
    push(&mut out, &format!("\nCalls: {}", records.len()));
    push(&mut out, "\nTools: ");
    for (i, (name, n)) in counts.iter().enumerate() {
        if i > 0 {
            push(&mut out, ", ");
        }
        out.extend(name.to_utf16());
        push(&mut out, &format!(" x{n}"));
    }
    push(
        &mut out,
        &format!("\nSpan: {from} -> {to} ({}s)", format_number(seconds)),
    );
    push(&mut out, "\nFirst: ");
    out.extend(first.tool_name.to_utf16());
    push(&mut out, " ");
    push_excerpt(&mut out, &first.args_json);
    push(&mut out, "\nLast: ");
    out.extend(last.tool_name.to_utf16());
    push(&mut out, " ");
    push_excerpt(&mut out, &last.args_json);
    push(&mut out, "\nRefs: ");
    for (i, r) in refs_line.iter().enumerate() {
        if i > 0 {
            push(&mut out, ", ");
        }
        out.extend(r.to_utf16());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(id: &str, name: &str, args: &str, at: f64) -> BodyRecord {
        BodyRecord {
            tool_name: name.into(),
            tool_call_id: id.into(),
            args_json: args.into(),
            at,
        }
    }

    fn text(records: &[BodyRecord], refs: &[&str]) -> String {
        let refs: Vec<JsStr> = refs.iter().map(|s| (*s).into()).collect();
        String::from_utf16_lossy(&deterministic_body(records, &refs).unwrap_or_default())
    }

    #[test]
    fn spec_conformance_vector() {
        // 05 section 12.
        let records = [
            rec("x1", "read", "{\"path\":\"a\"}", 1500.0),
            rec("x2", "Bash", "{}", 4000.0),
            rec("x3", "bash", "{}", 2500.0),
        ];
        assert_eq!(
            text(&records, &[]),
            "Deterministic chain compression (no per-batch summary existed for this span; raw outputs recoverable via context_tree_query).\n\
             Calls: 3\n\
             Tools: bash x1, Bash x1, read x1\n\
             Span: 1970-01-01T00:00:01.500Z -> 1970-01-01T00:00:04.000Z (3s)\n\
             First: read {\"path\":\"a\"}\n\
             Last: Bash {}\n\
             Refs: x1, x2, x3"
        );
    }

    #[test]
    fn counts_descending_then_refs() {
        let records = [
            rec("a", "read", "{}", 3000.0),
            rec("b", "bash", "{}", 1000.0),
            rec("c", "read", "{}", 2000.0),
        ];
        let body = text(&records, &["t1", "t2", "t3"]);
        assert!(body.contains("\nTools: read x2, bash x1\n"));
        assert!(body.contains("\nFirst: bash {}\nLast: read {}\n"));
        assert!(body.ends_with("\nRefs: t1, t2, t3"));
        assert!(body.contains("(2s)"));
    }

    #[test]
    fn long_args_are_cut_at_200_units() {
        let long = format!("{{\"x\":\"{}\"}}", "y".repeat(300));
        let body = text(&[rec("a", "bash", &long, 0.0)], &[]);
        let want = format!("First: bash {}...\n", &long[..200]);
        assert!(body.contains(&want));
    }

    #[test]
    fn cut_inside_a_surrogate_pair_keeps_the_lone_half() {
        let args = format!("{}😀tail", "a".repeat(199));
        let units = deterministic_body(&[rec("a", "t", &args, 0.0)], &[]).unwrap_or_default();
        let lone = 0xD83D_u16;
        let at = units.windows(4).position(|w| w == [lone, 46, 46, 46]);
        assert!(at.is_some());
    }

    #[test]
    fn empty_args_still_give_a_full_body() {
        let body = text(&[rec("a", "noop", "", 5.0)], &[]);
        assert_eq!(body.lines().count(), 7);
        assert!(body.contains("\nFirst: noop \nLast: noop \n"));
        assert!(body.contains("(0s)"));
    }

    #[test]
    fn half_seconds_round_up() {
        let body = text(&[rec("a", "t", "{}", 0.0), rec("b", "t", "{}", 500.0)], &[]);
        assert!(body.contains("(1s)"));
    }

    #[test]
    fn invalid_times_and_no_records_fail() {
        assert_eq!(
            deterministic_body(&[rec("a", "t", "{}", f64::NAN)], &[]),
            Err(BodyError::InvalidTime)
        );
        assert_eq!(deterministic_body(&[], &[]), Err(BodyError::NoRecords));
    }
}

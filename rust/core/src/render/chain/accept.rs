//! Which resolved ranges are applied (04 section 5.2): none whose start lies strictly
//! inside another resolved range, and one entry per start.

use super::range::Range;
use crate::collections::FastSet;
use crate::index::ChainEntry;
use crate::jsstr::JsBuf;
use crate::render::plan::{Diagnostic, DiagnosticKind};

/// What [`accept`] gives: the applied entries (registry position, entry, range) and the
/// skipped ones (registry position, range, report).
pub(super) type Accepted<'e> = (
    Vec<(usize, &'e ChainEntry, Range)>,
    Vec<(usize, Range, Diagnostic)>,
);

/// The index of the first resolved range (in registry order) other than `k` whose
/// interior holds `start`: `other.start < start < other.end`.
pub(super) struct Containers {
    /// resolved ranges by ascending start: (start, end)
    by_start: Vec<(usize, usize)>,
    /// `prefix_max_end[p]` = the largest end among the first `p` of `by_start`
    prefix_max_end: Vec<usize>,
}

impl Containers {
    pub(super) fn new(ranges: &[Range]) -> Self {
        let mut by_start: Vec<(usize, usize)> = ranges.iter().map(|r| (r.start, r.end)).collect();
        by_start.sort_unstable();
        let mut prefix_max_end = Vec::with_capacity(by_start.len() + 1);
        let mut max_end = 0usize;
        prefix_max_end.push(max_end);
        for &(_, end) in &by_start {
            max_end = max_end.max(end);
            prefix_max_end.push(max_end);
        }
        Containers {
            by_start,
            prefix_max_end,
        }
    }

    /// Whether any range has `range.start < start < range.end` (a range never holds its
    /// own start, so this is the same as "any other range").
    pub(super) fn any_holds(&self, start: usize) -> bool {
        let before = self.by_start.partition_point(|&(s, _)| s < start);
        self.prefix_max_end
            .get(before)
            .is_some_and(|&end| end > start)
    }
}

/// Step 2 of phase 3: the resolved entries that are applied, in registry order (no start
/// strictly inside another resolved range, one entry per start), and the skipped ones with
/// their `unresolved-range` report. `resolved` holds each entry's position in the registry;
/// the list the ranges index starts at message `offset` of the render's list (the reported
/// start is the list's index).
pub(super) fn accept<'e>(
    resolved: &[(usize, &'e ChainEntry, Range)],
    offset: usize,
) -> Accepted<'e> {
    let resolved_ranges: Vec<Range> = resolved.iter().map(|&(_, _, r)| r).collect();
    let containers = Containers::new(&resolved_ranges);
    let mut accepted: Vec<(usize, &ChainEntry, Range)> = Vec::new();
    let mut rejected = Vec::new();
    let mut claimed: FastSet<usize> = FastSet::default();
    for (k, &(position, entry, range)) in resolved.iter().enumerate() {
        let container = if containers.any_holds(range.start) {
            resolved
                .iter()
                .enumerate()
                .find(|(j, (_, _, other))| {
                    *j != k && range.start > other.start && range.start < other.end
                })
                .map(|(_, (_, other, _))| &other.block_id)
        } else {
            None
        };
        if container.is_some() || claimed.contains(&range.start) {
            // The block ids as the reference prints them, lone surrogates kept.
            let mut detail = JsBuf::new();
            detail.push_str("blockId=");
            entry.block_id.push_js_string(&mut detail);
            match container {
                Some(c) => {
                    detail.push_str(" skipped: range nests inside blockId=");
                    c.push_js_string(&mut detail);
                }
                None => detail.push_str(&format!(
                    " skipped: range duplicates startIndex={} already claimed",
                    range.start + offset
                )),
            }
            rejected.push((
                position,
                range,
                Diagnostic {
                    kind: DiagnosticKind::UnresolvedRange,
                    dedup_key: format!("overlap:{}", entry.block_id.js_string_key()),
                    detail: detail.finish(),
                },
            ));
            continue;
        }
        claimed.insert(range.start);
        accepted.push((position, entry, range));
    }
    (accepted, rejected)
}

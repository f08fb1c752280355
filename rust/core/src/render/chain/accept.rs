//! Which resolved ranges are applied (04 section 5.2): none whose start lies strictly
//! inside another resolved range, and one entry per start.

use super::range::Range;
use super::report;
use crate::collections::FastSet;
use crate::index::ChainEntry;
use crate::render::plan::{Diagnostic, DiagnosticKind};

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
/// strictly inside another resolved range, one entry per start); the others are reported.
pub(super) fn accept<'e>(
    resolved: &[(&'e ChainEntry, Range)],
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<(&'e ChainEntry, Range)> {
    let resolved_ranges: Vec<Range> = resolved.iter().map(|&(_, r)| r).collect();
    let containers = Containers::new(&resolved_ranges);
    let mut accepted: Vec<(&ChainEntry, Range)> = Vec::new();
    let mut claimed: FastSet<usize> = FastSet::default();
    for (k, &(entry, range)) in resolved.iter().enumerate() {
        let container = if containers.any_holds(range.start) {
            resolved
                .iter()
                .enumerate()
                .find(|(j, (_, other))| {
                    *j != k && range.start > other.start && range.start < other.end
                })
                .map(|(_, (other, _))| other.block_id.js_string())
        } else {
            None
        };
        if container.is_some() || claimed.contains(&range.start) {
            let block = entry.block_id.js_string();
            let detail = match container {
                Some(c) => format!("blockId={block} skipped: range nests inside blockId={c}"),
                None => format!(
                    "blockId={block} skipped: range duplicates startIndex={} already claimed",
                    range.start
                ),
            };
            report(
                diagnostics,
                DiagnosticKind::UnresolvedRange,
                format!("overlap:{block}"),
                detail,
            );
            continue;
        }
        claimed.insert(range.start);
        accepted.push((entry, range));
    }
    accepted
}

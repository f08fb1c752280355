//! What phase 3 decided, kept for the renders that resume: the outcome and range of every
//! entry whose range resolved, what the applied ranges drop, and what their synthetic texts
//! read besides the entry.

use super::seen::{BODY_KEY, dropped_id, dropped_key, tagged};
use crate::collections::FastMap;
use crate::index::ChainEntry;
use crate::js::JsField;
use crate::placeholders::has_block_ref;
use crate::render::chain::range::strict_key;
use crate::render::chain::{Outcome, Range};
use crate::render::ids::push_result_key;
use crate::render::plan::Diagnostic;
use crate::render::state::RenderState;
use crate::view::{Content, IdStr, JsIdOf, MsgView, Role};

/// A resolved entry: its range (list indices), outcome, and what it drops when applied.
#[derive(Debug, Clone)]
pub(super) struct Settled {
    pub(super) range: Range,
    pub(super) outcome: Outcome,
    pub(super) dropped: Vec<Box<str>>,
}

#[derive(Debug, Clone, Default)]
pub(super) struct ChainMemory {
    /// By entry slot.
    pub(super) settled: FastMap<usize, Settled>,
    /// How many applied ranges drop each [`dropped_key`] / [`dropped_id`] (exact: a summary
    /// checked here is left in the output when the count is 0).
    pub(super) dropped: FastMap<Box<str>, u32>,
    /// Keys whose per-batch bodies an applied range's text reads (`BODY_KEY` hashes) -> the
    /// first such range's start.
    pub(super) body_keys: FastMap<u64, usize>,
    /// The first start of an applied range whose text substitutes `{bN}` placeholders.
    pub(super) placeholders: Option<usize>,
    /// The registry's timestamps (strict keys) -> the slots of the entries starting or ending
    /// there; the slots of the entries without a final timestamp.
    pub(super) starts: FastMap<u64, Vec<usize>>,
    pub(super) finals: FastMap<u64, Vec<usize>>,
    pub(super) absent_finals: Vec<usize>,
    /// The latest render's phase-3 reports.
    pub(super) reports: Vec<Diagnostic>,
}

impl ChainMemory {
    /// The registry's timestamps. A timestamp no entry holds any more keeps an empty list
    /// (read as none): each rebuild after a compression reuses the lists instead of freeing
    /// and allocating one per entry.
    pub(super) fn index_registry(&mut self, entries: &[&ChainEntry]) {
        self.starts.values_mut().for_each(Vec::clear);
        self.finals.values_mut().for_each(Vec::clear);
        self.absent_finals.clear();
        for entry in entries {
            if let Some(k) = strict_key(entry.start_user_timestamp) {
                self.starts.entry(k).or_default().push(entry.slot);
            }
            match &entry.final_assistant_timestamp {
                JsField::Number(x) => {
                    if let Some(k) = strict_key(*x) {
                        self.finals.entry(k).or_default().push(entry.slot);
                    }
                }
                JsField::Absent => self.absent_finals.push(entry.slot),
                _ => {}
            }
        }
    }

    /// [`ChainMemory::index_registry`] brought up to date after the entries at `slots` (each
    /// once) joined or left the registry, without reading the others. `false` (nothing
    /// changed) when the state cannot tell whether a slot is registered: rebuild then.
    pub(super) fn update_registry<St: RenderState + ?Sized>(
        &mut self,
        state: &St,
        slots: &[usize],
    ) -> bool {
        let mut known = Vec::with_capacity(slots.len());
        for &slot in slots {
            match (state.chain_at(slot), state.chain_registered(slot)) {
                (Some(entry), Some(registered)) => known.push((entry, registered)),
                _ => return false,
            }
        }
        for (entry, registered) in known {
            let slot = entry.slot;
            let start = strict_key(entry.start_user_timestamp);
            let list = match &entry.final_assistant_timestamp {
                JsField::Number(x) => strict_key(*x).map(|k| self.finals.entry(k).or_default()),
                JsField::Absent => Some(&mut self.absent_finals),
                _ => None,
            };
            if let Some(list) = list {
                list.retain(|&s| s != slot);
                if registered {
                    list.push(slot);
                }
            }
            if let Some(k) = start {
                let list = self.starts.entry(k).or_default();
                list.retain(|&s| s != slot);
                if registered {
                    list.push(slot);
                }
            }
        }
        true
    }

    /// Remembers the resolved entries among `outcomes` (by registry position; their ranges
    /// index `msgs`, which stand at `offset` of the list) and what their outputs depend on.
    /// Returns what the applied ones drop.
    pub(super) fn remember<S: IdStr, St: RenderState + ?Sized>(
        &mut self,
        hasher: &foldhash::fast::RandomState,
        state: &St,
        entries: &[&ChainEntry],
        outcomes: &[Outcome],
        msgs: &[MsgView<S>],
        offset: usize,
    ) -> Vec<Box<str>> {
        let mut all_dropped = Vec::new();
        let mut key = String::new();
        for (entry, outcome) in entries.iter().zip(outcomes) {
            let (range, applied) = match outcome {
                Outcome::Accepted { range, .. } => (*range, true),
                Outcome::Rejected { range, .. } => (*range, false),
                _ => continue,
            };
            let global = Range {
                start: range.start + offset,
                end: range.end + offset,
            };
            let outcome = match outcome.clone() {
                Outcome::Rejected { report, .. } => Outcome::Rejected {
                    range: global,
                    report,
                },
                Outcome::Accepted { mismatch, .. } => Outcome::Accepted {
                    range: global,
                    mismatch,
                },
                other => other,
            };
            let mut dropped = Vec::new();
            if applied {
                for msg in msgs.get(range.start + 1..range.end).unwrap_or_default() {
                    dropped_by(msg, &mut key, &mut dropped);
                }
                for d in &dropped {
                    *self.dropped.entry(d.clone()).or_default() += 1;
                }
                all_dropped.extend(dropped.iter().cloned());
                self.note_reads(hasher, state, entry, global.start);
            }
            let old = self.settled.insert(
                entry.slot,
                Settled {
                    range: global,
                    outcome,
                    dropped,
                },
            );
            if let Some(old) = old {
                self.release(&old.dropped);
            }
        }
        all_dropped
    }

    /// What an applied entry's synthetic text reads besides the entry: per-batch bodies and
    /// the texts `{bN}` placeholders name.
    fn note_reads<St: RenderState + ?Sized>(
        &mut self,
        hasher: &foldhash::fast::RandomState,
        state: &St,
        entry: &ChainEntry,
        start: usize,
    ) {
        let fixed = state
            .chain_facts(entry)
            .is_some_and(|facts| facts.prefix.is_some());
        if fixed {
            return;
        }
        if entry.range_summary_text.is_nullish() {
            for k in entry.summary_keys().unwrap_or_default() {
                if let Some(k) = k.as_str() {
                    let first = self
                        .body_keys
                        .entry(tagged(hasher, BODY_KEY, k))
                        .or_insert(start);
                    *first = (*first).min(start);
                }
            }
        }
        let text = state.chain_summary_text(entry);
        let substitutes = match text {
            Some(text) => has_block_ref(text.as_str()),
            None => true,
        };
        if substitutes {
            let first = self.placeholders.get_or_insert(start);
            *first = (*first).min(start);
        }
    }

    fn release(&mut self, dropped: &[Box<str>]) {
        for d in dropped {
            if let Some(count) = self.dropped.get_mut(d) {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    self.dropped.remove(d);
                }
            }
        }
    }

    /// Forgets what was decided from `from` on (a restart there); returns what the applied
    /// ranges forgotten dropped.
    pub(super) fn forget_from(&mut self, from: usize) -> Vec<Box<str>> {
        let gone: Vec<usize> = self
            .settled
            .iter()
            .filter(|(_, s)| s.range.end >= from)
            .map(|(&slot, _)| slot)
            .collect();
        let mut released = Vec::new();
        for slot in gone {
            if let Some(old) = self.settled.remove(&slot) {
                self.release(&old.dropped);
                released.extend(old.dropped);
            }
        }
        released
    }

    /// Whether an applied range ends before `before`.
    pub(super) fn any_applied_before(&self, before: usize) -> bool {
        self.settled
            .values()
            .any(|s| matches!(s.outcome, Outcome::Accepted { .. }) && s.range.end < before)
    }

    /// Takes in what a render decided from its restart point on.
    pub(super) fn absorb(&mut self, other: ChainMemory) {
        for (slot, settled) in other.settled {
            for d in &settled.dropped {
                *self.dropped.entry(d.clone()).or_default() += 1;
            }
            if let Some(old) = self.settled.insert(slot, settled) {
                self.release(&old.dropped);
            }
        }
        for (h, at) in other.body_keys {
            let first = self.body_keys.entry(h).or_insert(at);
            *first = (*first).min(at);
        }
        if let Some(at) = other.placeholders {
            let first = self.placeholders.get_or_insert(at);
            *first = (*first).min(at);
        }
    }

    /// Whether an applied range drops `what`.
    pub(super) fn drops(&self, what: &str) -> bool {
        self.dropped.contains_key(what)
    }
}

/// What message `msg` inside an applied range drops: a result's lookup key and string id,
/// a call's string id.
fn dropped_by<S: IdStr>(msg: &MsgView<S>, key: &mut String, out: &mut Vec<Box<str>>) {
    match msg.role {
        Role::ToolResult => {
            key.clear();
            if push_result_key(key, msg) {
                out.push(dropped_key(key));
            }
            if let JsIdOf::Str(id) = &msg.tool_call_id {
                out.push(dropped_id(id.as_ref()));
            }
        }
        Role::Assistant => {
            if let Content::Array(blocks) = &msg.content {
                for id in blocks.call_ids() {
                    if let JsIdOf::Str(id) = id {
                        out.push(dropped_id(id.as_ref()));
                    }
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::super::chain_slots;
    use super::*;
    use crate::index::Index;

    fn entry(block: &str, start: f64, end: JsField) -> ChainEntry {
        ChainEntry {
            block_id: JsField::str(block),
            start_user_timestamp: start,
            final_assistant_timestamp: end,
            ..ChainEntry::default()
        }
    }

    /// The timestamps' lists as sets, empty lists dropped.
    fn normal(map: &FastMap<u64, Vec<usize>>) -> Vec<(u64, Vec<usize>)> {
        let mut out: Vec<(u64, Vec<usize>)> = map
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(&k, v)| {
                let mut v = v.clone();
                v.sort_unstable();
                (k, v)
            })
            .collect();
        out.sort_unstable();
        out
    }

    fn same(a: &ChainMemory, b: &ChainMemory) {
        assert_eq!(normal(&a.starts), normal(&b.starts));
        assert_eq!(normal(&a.finals), normal(&b.finals));
        let (mut x, mut y) = (a.absent_finals.clone(), b.absent_finals.clone());
        x.sort_unstable();
        y.sort_unstable();
        assert_eq!(x, y);
    }

    #[test]
    fn the_incremental_registry_is_the_rebuilt_one() {
        let mut index = Index::new();
        let mut memory = ChainMemory::default();
        let steps: Vec<Vec<ChainEntry>> = vec![
            vec![entry("b1", 10.0, JsField::Number(20.0))],
            vec![
                entry("b2", 30.0, JsField::Absent),
                entry("b3", 5.0, JsField::Number(8.0)),
            ],
            // Replaces b2 (same start): b2 leaves the registry, its absent final too.
            vec![entry("b4", 30.0, JsField::Number(40.0))],
            // Replaces b1 and shares b3's final; one with a final that is no number.
            vec![
                entry("b5", 10.0, JsField::Number(8.0)),
                entry("b6", 50.0, JsField::Null),
                entry("b7", -0.0, JsField::Absent),
            ],
            vec![entry("b8", 0.0, JsField::Number(40.0))],
        ];
        for step in steps {
            let revision = index.revision();
            for e in step {
                index.register_chain(e);
            }
            let slots = chain_slots(index.changes_since(revision).unwrap_or_default());
            assert!(memory.update_registry(&index, &slots));
            let mut rebuilt = ChainMemory::default();
            rebuilt.index_registry(&index.chain_entries());
            same(&memory, &rebuilt);
            // Updating again for the same slots changes nothing.
            assert!(memory.update_registry(&index, &slots));
            same(&memory, &rebuilt);
        }
        assert!(!index.chain_registered(0));
        assert!(index.chain_registered(index.chain_entries()[0].slot));
    }

    #[test]
    fn an_unknown_slot_asks_for_a_rebuild() {
        let mut index = Index::new();
        index.register_chain(entry("b1", 1.0, JsField::Number(2.0)));
        let mut memory = ChainMemory::default();
        // An unknown slot.
        assert!(!memory.update_registry(&index, &[7]));
        assert!(memory.starts.is_empty());
    }
}

//! Where a chain's range stands in the list: the unique user message at its start
//! timestamp and the unique assistant message at its final one (04 section 5.1).

use crate::collections::FastMap;
use crate::index::ChainEntry;
use crate::js::JsField;
use crate::view::{MsgView, Role, Ts};

/// A resolved range: the start user message and the final assistant message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Range {
    /// index of the unique user message at `startUserTimestamp`
    pub(crate) start: usize,
    /// index of the unique assistant message at `finalAssistantTimestamp`
    pub(crate) end: usize,
}

/// `msg.timestamp === field` for a persisted timestamp field. A string or
/// other non-number field never matches (messages carry numbers).
fn ts_strict_eq(ts: Ts, field: &JsField) -> bool {
    match field {
        JsField::Number(x) => ts.strict_eq(*x),
        JsField::Absent => ts == Ts::Absent,
        _ => false,
    }
}

/// `resolveRange(entry, messages)`: exactly one user message at the start
/// timestamp, exactly one assistant at the final timestamp, start before end;
/// otherwise `None` (no fallback of any kind).
///
/// One scan of the list; to resolve many entries against the same list, build a
/// [`RangeIndex`] once.
pub(crate) fn resolve_range<S>(entry: &ChainEntry, msgs: &[MsgView<S>]) -> Option<Range> {
    let final_ts = &entry.final_assistant_timestamp;
    if *final_ts == JsField::Null {
        return None;
    }
    let (mut start, mut start_matches) = (None, 0usize);
    let (mut end, mut end_matches) = (None, 0usize);
    for (i, msg) in msgs.iter().enumerate() {
        if msg.opens_range() {
            if msg.timestamp.strict_eq(entry.start_user_timestamp) {
                start_matches += 1;
                start.get_or_insert(i);
            }
        } else if msg.role == Role::Assistant && ts_strict_eq(msg.timestamp, final_ts) {
            end_matches += 1;
            end.get_or_insert(i);
        }
    }
    match (start, end) {
        (Some(start), Some(end)) if start_matches == 1 && end_matches == 1 && start < end => {
            Some(Range { start, end })
        }
        _ => None,
    }
}

/// First index and number of matches of one timestamp.
#[derive(Debug, Clone, Copy)]
struct Hits {
    first: usize,
    count: usize,
}

impl Hits {
    fn add(slot: &mut Option<Hits>, i: usize) {
        match slot {
            Some(hits) => hits.count += 1,
            None => *slot = Some(Hits { first: i, count: 1 }),
        }
    }

    /// The index when the timestamp matches exactly one message.
    fn unique(hits: Option<&Hits>) -> Option<usize> {
        hits.filter(|h| h.count == 1).map(|h| h.first)
    }
}

/// The key of a number under strict equality (`-0 === 0`); `None` for NaN, which
/// equals nothing.
pub(crate) fn strict_key(x: f64) -> Option<u64> {
    if x.is_nan() {
        None
    } else if x == 0.0 {
        Some(0)
    } else {
        Some(x.to_bits())
    }
}

/// [`resolve_range`] for many entries: the user and assistant messages of a list by
/// timestamp, built in one scan.
#[derive(Debug, Default)]
pub(crate) struct RangeIndex {
    /// user messages by timestamp key
    users: FastMap<u64, Option<Hits>>,
    /// assistant messages by timestamp key
    assistants: FastMap<u64, Option<Hits>>,
    /// Only the timestamps the maps were seeded with are counted (see
    /// [`RangeIndex::for_entries`]); otherwise every one is.
    seeded: bool,
    /// assistants without a `timestamp` key (`undefined === undefined`)
    absent_assistants: Option<Hits>,
}

impl RangeIndex {
    /// Indexes `msgs` (tests: the render seeds the index with the entries).
    #[cfg(test)]
    pub(crate) fn new<S>(msgs: &[MsgView<S>]) -> Self {
        let mut index = RangeIndex::default();
        for (i, msg) in msgs.iter().enumerate() {
            index.add(i, msg);
        }
        index
    }

    /// Indexes `msgs` for resolving `entries` only: a message whose timestamp no entry names
    /// is skipped (most of them), which keeps the maps small. Messages are then fed with
    /// [`RangeIndex::add`].
    pub(super) fn for_entries(entries: &[&ChainEntry]) -> Self {
        let mut index = RangeIndex {
            seeded: true,
            ..RangeIndex::default()
        };
        for entry in entries {
            if let Some(key) = strict_key(entry.start_user_timestamp) {
                index.users.insert(key, None);
            }
            if let Some(key) = entry
                .final_assistant_timestamp
                .as_number()
                .and_then(strict_key)
            {
                index.assistants.insert(key, None);
            }
        }
        index
    }

    /// Counts message `i` (messages are added in list order).
    pub(super) fn add<S>(&mut self, i: usize, msg: &MsgView<S>) {
        let map = match msg.role {
            _ if msg.opens_range() => &mut self.users,
            Role::Assistant => &mut self.assistants,
            _ => return,
        };
        match msg.timestamp {
            Ts::Num(x) => {
                if let Some(key) = strict_key(x) {
                    let slot = if self.seeded {
                        map.get_mut(&key)
                    } else {
                        Some(map.entry(key).or_default())
                    };
                    if let Some(slot) = slot {
                        Hits::add(slot, i);
                    }
                }
            }
            Ts::Absent if msg.role == Role::Assistant => {
                Hits::add(&mut self.absent_assistants, i);
            }
            Ts::Absent | Ts::Other => {}
        }
    }

    /// [`resolve_range`] of `entry` over the indexed list.
    pub(crate) fn resolve(&self, entry: &ChainEntry) -> Option<Range> {
        let end = match &entry.final_assistant_timestamp {
            JsField::Number(x) => Hits::unique(
                strict_key(*x)
                    .and_then(|k| self.assistants.get(&k))
                    .and_then(Option::as_ref),
            ),
            JsField::Absent => Hits::unique(self.absent_assistants.as_ref()),
            _ => None,
        }?;
        let start = Hits::unique(
            strict_key(entry.start_user_timestamp)
                .and_then(|k| self.users.get(&k))
                .and_then(Option::as_ref),
        )?;
        (start < end).then_some(Range { start, end })
    }
}

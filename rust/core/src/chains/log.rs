//! The chain scan of a message list that grows: what detection, eligibility, extraction and
//! the recovery grace window read, kept so that the scan of the same list grown costs what
//! is new.
//!
//! A [`ChainLog`] holds, for the messages of one list, the caller's identity tag and view of
//! each message, the detected chains, the positions of the user messages and recovery
//! outputs, and (once extraction asked for them) the positions of the user and assistant
//! messages by timestamp. [`ChainLog::grown`] builds the log of a list whose first `keep`
//! messages are those of an earlier log: it shares their views and the chains that start
//! before the detection resume point (persistent chunks: a reference count per 64
//! messages), reads nothing else of them, and detects again only from the resume point. The
//! timestamp table belongs to the latest log of a line of logs grown from each other: the log
//! that owns it hands it on (updated by the messages that changed), and a log that lost it
//! rebuilds it when asked. The last eligibility pass is carried on likewise, for the same
//! chain registry.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::detect::{ChainRange, detect_chains_of, resume_point_by};
use super::eligible::{Eligibility, Standing, pick, standing};
use super::extract::{Extracted, extract_span};
use super::view::{ChainMsg, MsgBody};
use crate::collections::{Chunked, FastMap};
use crate::js::Throw;
use crate::view::{JsId, MsgView, Role, Ts};

/// One message of the list as the scan read it.
#[derive(Debug)]
pub struct Read<X> {
    /// What detection and extraction read.
    pub msg: ChainMsg,
    /// A `context_tree_query` toolResult (the grace window keys those with a string id).
    pub recovery: bool,
    /// The caller's handle on the message (it answers with the message's own objects).
    pub item: X,
}

/// A timestamp as a table key: `===` equal numbers share one (`-0` and `0`); NaN and
/// non-numbers equal nothing.
fn stamp_key(ts: Ts) -> Option<u64> {
    match ts {
        Ts::Num(x) if x.is_nan() => None,
        Ts::Num(x) => Some(if x == 0.0 {
            0f64.to_bits()
        } else {
            x.to_bits()
        }),
        _ => None,
    }
}

/// The first position holding a timestamp, and how many positions hold it.
#[derive(Debug, Clone, Copy)]
struct Hits {
    first: usize,
    count: usize,
}

/// The user and assistant messages of one log by timestamp.
#[derive(Debug, Default)]
struct Stamps {
    /// The log this table describes (0: none, mid-update).
    owner: u64,
    users: FastMap<u64, Hits>,
    assistants: FastMap<u64, Hits>,
}

impl Stamps {
    /// The table of a range's possible ends that `msg` is one of: starts (a user message or
    /// a chain-anchor custom message, pi-condense 2.10.0) or final assistants.
    fn table(&mut self, msg: &ChainMsg) -> Option<&mut FastMap<u64, Hits>> {
        match (msg.role, &msg.body) {
            (Role::User, _) | (Role::Custom, MsgBody::Anchor) => Some(&mut self.users),
            (Role::Assistant, _) => Some(&mut self.assistants),
            _ => None,
        }
    }

    fn add(&mut self, i: usize, msg: &ChainMsg) {
        let (Some(key), Some(table)) = (stamp_key(msg.timestamp), self.table(msg)) else {
            return;
        };
        table
            .entry(key)
            .and_modify(|hits| hits.count += 1)
            .or_insert(Hits { first: i, count: 1 });
    }

    /// Takes out the message at `i`; every position after it must be taken out too (then
    /// `first` stays right: a timestamp whose first position goes has no position left).
    fn remove(&mut self, msg: &ChainMsg) {
        let (Some(key), Some(table)) = (stamp_key(msg.timestamp), self.table(msg)) else {
            return;
        };
        if let Some(hits) = table.get_mut(&key) {
            hits.count -= 1;
            if hits.count == 0 {
                table.remove(&key);
            }
        }
    }

    /// The only start (`Role::User`: a user or anchor message) or final assistant holding
    /// `ts` (`None`: none or several).
    fn unique(&self, role: Role, ts: f64) -> Option<usize> {
        let table = match role {
            Role::User => &self.users,
            _ => &self.assistants,
        };
        table
            .get(&stamp_key(Ts::Num(ts))?)
            .filter(|hits| hits.count == 1)
            .map(|hits| hits.first)
    }
}

/// The last eligibility pass of a log: valid for the registry epoch it read.
#[derive(Debug, Clone)]
struct Selected {
    epoch: u64,
    /// Number of leading chains it looked at.
    examined: usize,
    /// The candidates among them (positions, in order).
    candidates: Vec<usize>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while the lock was held left a table that the owner check rejects.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A number no other log holds.
fn fresh_uid() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The chain scan of one message list (see the module docs).
#[derive(Debug)]
pub struct ChainLog<X> {
    uid: u64,
    tags: Chunked<usize>,
    reads: Chunked<Arc<Read<X>>>,
    /// Positions of the `user` messages.
    users: Chunked<usize>,
    /// Positions of the recovery outputs with a string id.
    recoveries: Chunked<usize>,
    chains: Chunked<Arc<ChainRange>>,
    stamps: Arc<Mutex<Stamps>>,
    selected: Mutex<Option<Selected>>,
}

impl<X> Default for ChainLog<X> {
    fn default() -> Self {
        ChainLog {
            uid: fresh_uid(),
            tags: Chunked::default(),
            reads: Chunked::default(),
            users: Chunked::default(),
            recoveries: Chunked::default(),
            chains: Chunked::default(),
            stamps: Arc::default(),
            selected: Mutex::new(None),
        }
    }
}

impl<X> ChainLog<X> {
    /// Number of messages.
    pub fn len(&self) -> usize {
        self.reads.len()
    }

    /// Whether the list was empty.
    pub fn is_empty(&self) -> bool {
        self.reads.is_empty()
    }

    /// How many leading `tags` are those of this log's messages, in order.
    pub fn common_prefix(&self, tags: &[usize]) -> usize {
        self.common_prefix_by(tags, |&t| t)
    }

    /// [`ChainLog::common_prefix`] of the tags `tag` gives for `items` (compared a block at
    /// a time: the common case is a long run of equal tags).
    pub fn common_prefix_by<T>(&self, items: &[T], tag: impl Fn(&T) -> usize) -> usize {
        const BLOCK: usize = 64;
        let mut same = 0;
        for run in self.tags.slices() {
            let theirs = items.get(same..).unwrap_or_default();
            let n = run.len().min(theirs.len());
            for (ours, theirs) in run[..n].chunks(BLOCK).zip(theirs[..n].chunks(BLOCK)) {
                let differs = ours
                    .iter()
                    .zip(theirs)
                    .fold(0, |acc, (a, b)| acc | (a ^ tag(b)));
                if differs != 0 {
                    let at = ours.iter().zip(theirs).take_while(|(a, b)| **a == tag(b));
                    return same + at.count();
                }
                same += ours.len();
            }
            if n < run.len() {
                break;
            }
        }
        same
    }

    /// The tag of message `i`.
    pub fn tag(&self, i: usize) -> Option<usize> {
        self.tags.get(i).copied()
    }

    /// Message `i` as read.
    pub fn read(&self, i: usize) -> Option<&Read<X>> {
        self.reads.get(i).map(AsRef::as_ref)
    }

    /// Number of detected chains (closed and interrupted).
    pub fn chain_count(&self) -> usize {
        self.chains.len()
    }

    /// Chain `i` (in detection order).
    pub fn chain(&self, i: usize) -> Option<&ChainRange> {
        self.chains.get(i).map(AsRef::as_ref)
    }

    fn message(&self, i: usize) -> Option<&ChainMsg> {
        self.reads.get(i).map(|read| &read.msg)
    }

    /// The log of a list whose first `keep` messages are those of `parent` (none without a
    /// parent), followed by `fresh`: `(tag, read)` of each further message, in order.
    /// `Err` where the reference throws in detection (a `null` message, or a `null` block
    /// of an assistant inside a chain, from the resume point on).
    pub fn grown(
        parent: Option<&Self>,
        keep: usize,
        fresh: Vec<(usize, Read<X>)>,
    ) -> Result<Self, Throw> {
        let keep = parent.map_or(0, |p| keep.min(p.len()));
        let mut log = match parent {
            Some(p) => ChainLog {
                uid: fresh_uid(),
                tags: p.tags.prefix(keep),
                reads: p.reads.prefix(keep),
                users: p.users.prefix(p.users.partition_point(|&i| i < keep)),
                recoveries: p
                    .recoveries
                    .prefix(p.recoveries.partition_point(|&i| i < keep)),
                chains: Chunked::default(),
                stamps: Arc::clone(&p.stamps),
                selected: Mutex::new(None),
            },
            None => ChainLog::default(),
        };
        for (tag, read) in fresh {
            let i = log.reads.len();
            log.tags.push(tag);
            if read.msg.role == Role::User {
                log.users.push(i);
            }
            if read.recovery
                && matches!(
                    read.msg.body,
                    MsgBody::ToolResult {
                        id: JsId::Str(_),
                        ..
                    }
                )
            {
                log.recoveries.push(i);
            }
            log.reads.push(Arc::new(read));
        }
        // The chains that start before the resume point are the parent's (detection.rs).
        let from = resume_point_by(|i| log.message(i), keep);
        if let Some(p) = parent {
            let kept = p.chains.partition_point(|c| c.start < from);
            log.chains = p.chains.prefix(kept);
            if let Some(mut selected) = lock(&p.selected).clone() {
                selected.examined = selected.examined.min(kept);
                selected.candidates.retain(|&c| c < kept);
                *lock(&log.selected) = Some(selected);
            }
        }
        let tail = log
            .reads
            .iter_from(from)
            .enumerate()
            .map(|(k, read)| (from + k, &read.msg));
        let found = detect_chains_of(tail)?;
        for chain in found {
            log.chains.push(Arc::new(chain));
        }
        if let Some(p) = parent {
            log.take_stamps_from(p, keep);
        }
        Ok(log)
    }

    /// Takes over the timestamp table from `parent` when `parent` owns it, updated by the
    /// messages from `keep` on.
    fn take_stamps_from(&self, parent: &Self, keep: usize) {
        let mut stamps = lock(&self.stamps);
        if stamps.owner != parent.uid {
            return;
        }
        stamps.owner = 0;
        for read in parent.reads.iter_from(keep) {
            stamps.remove(&read.msg);
        }
        for (k, read) in self.reads.iter_from(keep).enumerate() {
            stamps.add(keep + k, &read.msg);
        }
        stamps.owner = self.uid;
    }

    /// The resolved span of the chain `start_ts -> final_ts`, as the render's range
    /// resolution finds it: the only user message at the start timestamp and the only
    /// assistant message at the final one, start first.
    fn span(&self, start_ts: f64, final_ts: f64) -> Option<(usize, usize)> {
        let mut stamps = lock(&self.stamps);
        if stamps.owner != self.uid {
            let mut own = Stamps::default();
            for (i, read) in self.reads.iter_from(0).enumerate() {
                own.add(i, &read.msg);
            }
            own.owner = self.uid;
            *stamps = own;
        }
        let start = stamps.unique(Role::User, start_ts)?;
        let end = stamps.unique(Role::Assistant, final_ts)?;
        (start < end).then_some((start, end))
    }

    /// `extractChainRecords` over this log (see [`super::extract_chain_records`]).
    pub fn extract(
        &self,
        start_ts: f64,
        final_ts: f64,
        protected: &HashSet<JsId>,
        is_indexed: impl Fn(&JsId) -> bool,
    ) -> Result<Vec<Extracted>, Throw> {
        let Some((start, end)) = self.span(start_ts, final_ts) else {
            return Ok(Vec::new());
        };
        let span = self
            .reads
            .iter_from(start + 1)
            .take(end - start - 1)
            .enumerate()
            .map(|(k, read)| (start + 1 + k, &read.msg));
        extract_span(span, protected, is_indexed)
    }

    /// `selectEligible` (see [`super::select_eligible`]) against a chain registry named by
    /// `epoch` (see `Index::registry_epoch`), `is_compressed` telling whether a start is
    /// registered. With `report_compressed` false, `already_compressed` is left empty and
    /// the chains a previous pass over the same registry found settled (compressed, open or
    /// empty: none of them can become a candidate while the registry only gains keys) are
    /// not looked at again.
    pub fn select(
        &self,
        window: f64,
        epoch: u64,
        is_compressed: impl Fn(f64) -> bool,
        in_grace: &HashSet<String>,
        report_compressed: bool,
    ) -> Result<Eligibility, Throw> {
        let mut out = Eligibility::default();
        let mut selected = lock(&self.selected);
        let (mut candidates, from) = match selected.take() {
            Some(last) if last.epoch == epoch && !report_compressed => {
                let still: Vec<usize> = last
                    .candidates
                    .into_iter()
                    .filter(|&i| {
                        self.chain(i).is_some_and(|c| {
                            standing(c, |m| self.message(m), &is_compressed) == Standing::Candidate
                        })
                    })
                    .collect();
                (still, last.examined)
            }
            _ => (Vec::new(), 0),
        };
        for (k, chain) in self.chains.iter_from(from).enumerate() {
            let i = from + k;
            match standing(chain, |m| self.message(m), &is_compressed) {
                Standing::Compressed if report_compressed => out.already_compressed.push(i),
                Standing::Candidate => candidates.push(i),
                _ => {}
            }
        }
        let result = pick(&candidates, |i| self.chain(i), window, in_grace, &mut out);
        *selected = Some(Selected {
            epoch,
            examined: self.chains.len(),
            candidates,
        });
        result.map(|()| out)
    }

    /// The views the recovery grace window over the first `len` messages reads, for
    /// `in_grace_keys` (render phase 0): it reads only user messages (it counts them) and
    /// recovery outputs with a string id (it keys them), and only after the user message
    /// that puts the age past `grace_turns`. So these are the user messages from that one on
    /// (none when no user message does) and the recovery outputs after it, in order.
    pub fn grace_views(&self, len: usize, grace_turns: f64) -> Vec<MsgView> {
        // `!(turns > 0)` turns the window off (in_grace_keys reads nothing then).
        if grace_turns.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
            return Vec::new();
        }
        let users = self.users.partition_point(|&i| i < len);
        // Walking back from the last user, the age passes the window at the user where
        // `counted + 1 > grace_turns`; when all users fit, no user is read at all.
        let mut first_user = users;
        if (users as f64) > grace_turns {
            for (counted, j) in (0..users).rev().enumerate() {
                if (counted + 1) as f64 > grace_turns {
                    first_user = j;
                    break;
                }
            }
        }
        let after = self.users.get(first_user).filter(|_| first_user < users);
        let recoveries_from = match after {
            Some(&boundary) => self.recoveries.partition_point(|&i| i <= boundary),
            None => 0,
        };
        let mut user_positions = self.users.iter_from(first_user).take(users - first_user);
        let mut recovery_positions = self
            .recoveries
            .iter_from(recoveries_from)
            .take_while(|&&i| i < len);
        let mut views = Vec::new();
        let mut next_user = user_positions.next();
        let mut next_recovery = recovery_positions.next();
        loop {
            let take_user = match (next_user, next_recovery) {
                (Some(u), Some(r)) => u < r,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            let position = if take_user {
                next_user.take()
            } else {
                next_recovery.take()
            };
            if let Some(read) = position.and_then(|&i| self.read(i)) {
                views.push(grace_view(&read.msg));
            }
            if take_user {
                next_user = user_positions.next();
            } else {
                next_recovery = recovery_positions.next();
            }
        }
        views
    }
}

/// The view `in_grace_keys` reads of a user message or a recovery output.
fn grace_view(msg: &ChainMsg) -> MsgView {
    let mut view = MsgView::new(msg.role, msg.timestamp);
    if let MsgBody::ToolResult { id, .. } = &msg.body {
        view.is_recovery = true;
        view.tool_call_id = id.clone();
    }
    view
}

#[cfg(test)]
mod tests {
    use super::super::detect::detect_chains;
    use super::super::eligible::select_eligible;
    use super::super::extract::extract_chain_records;
    use super::super::view::testing::*;
    use super::*;

    /// A small deterministic generator.
    struct Gen(u64);

    impl Gen {
        fn below(&mut self, n: usize) -> usize {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (self.0 >> 33) as usize % n.max(1)
        }
    }

    /// A message: `(view, recovery)`; timestamps repeat now and then.
    fn message(rng: &mut Gen, n: usize) -> (ChainMsg, bool) {
        let ts = (n / 2 + rng.below(3)) as f64;
        let id = ["a", "b", "c"][rng.below(3)];
        match rng.below(7) {
            0 | 1 => (user(ts), false),
            2 => (synthetic(ts), false),
            3 => (assistant(ts, vec![call(id)]), false),
            4 => (text(ts), false),
            5 => (result(id, ts), rng.below(2) == 0),
            _ => (custom(ts, rng.below(2) == 0), false),
        }
    }

    fn reads(msgs: &[(ChainMsg, bool)], tags: &[usize]) -> Vec<(usize, Read<()>)> {
        msgs.iter()
            .zip(tags)
            .map(|((msg, recovery), &tag)| {
                (
                    tag,
                    Read {
                        msg: msg.clone(),
                        recovery: *recovery,
                        item: (),
                    },
                )
            })
            .collect()
    }

    fn range_views(msgs: &[(ChainMsg, bool)]) -> Vec<MsgView> {
        msgs.iter()
            .map(|(m, recovery)| {
                let mut v = MsgView::new(m.role, m.timestamp);
                v.anchor = matches!(m.body, MsgBody::Anchor);
                if *recovery && let MsgBody::ToolResult { id, .. } = &m.body {
                    v.is_recovery = true;
                    v.tool_call_id = id.clone();
                }
                v
            })
            .collect()
    }

    /// The log answers as a detection, selection and extraction over the whole list.
    fn check(log: &ChainLog<()>, msgs: &[(ChainMsg, bool)], registered: &[f64], epoch: u64) {
        let views: Vec<ChainMsg> = msgs.iter().map(|(m, _)| m.clone()).collect();
        let full = detect_chains(&views).unwrap_or_default();
        let got: Vec<ChainRange> = (0..log.chain_count())
            .filter_map(|i| log.chain(i).cloned())
            .collect();
        assert_eq!(got, full);
        let grace = HashSet::new();
        let is_compressed = |t: f64| registered.contains(&t);
        // The first pass starts from what the parent's last pass left.
        for window in [1.0, 0.0, 2.0] {
            let expected =
                select_eligible(&full, &views, window, is_compressed, &grace).unwrap_or_default();
            let quiet = log
                .select(window, epoch, is_compressed, &grace, false)
                .unwrap_or_default();
            assert_eq!(quiet.eligible, expected.eligible);
            assert_eq!(quiet.deferred, expected.deferred);
            assert_eq!(quiet.candidates, expected.candidates);
            assert!(quiet.already_compressed.is_empty());
            let reported = log
                .select(window, epoch, is_compressed, &grace, true)
                .unwrap_or_default();
            assert_eq!(reported, expected);
        }
        // The last pass (left for the next log) is a quiet one.
        let _ = log.select(1.0, epoch, is_compressed, &grace, false);
        let ranges = range_views(msgs);
        for chain in &full {
            let Some(end) = chain.end else {
                continue;
            };
            let (Some(s), Some(f)) = (
                views[chain.start].timestamp.num(),
                views[end].timestamp.num(),
            ) else {
                continue;
            };
            for (a, b) in [(s, f), (s, s), (f, s), (s + 1.0, f)] {
                let expected =
                    extract_chain_records(&views, &ranges, a, b, &HashSet::new(), |_| false);
                assert_eq!(log.extract(a, b, &HashSet::new(), |_| false), expected);
            }
        }
    }

    /// Grown logs (kept prefix, then new messages; or an edit anywhere) against full scans.
    #[test]
    fn grown_logs_answer_as_full_scans() {
        let mut rng = Gen(42);
        for round in 0..200 {
            let mut msgs: Vec<(ChainMsg, bool)> = Vec::new();
            let mut tags: Vec<usize> = Vec::new();
            let mut next_tag = 1;
            let mut log: ChainLog<()> = ChainLog::default();
            let mut registered: Vec<f64> = Vec::new();
            let mut epoch = 1;
            for step in 0..12 {
                let keep = match rng.below(4) {
                    0 => rng.below(msgs.len() + 1),
                    _ => msgs.len(),
                };
                msgs.truncate(keep);
                tags.truncate(keep);
                for _ in 0..rng.below(if round % 10 == 0 { 150 } else { 12 }) {
                    let n = msgs.len();
                    msgs.push(message(&mut rng, n));
                    tags.push(next_tag);
                    next_tag += 1;
                }
                let mut kept = log.common_prefix(&tags);
                assert_eq!(kept, keep.min(log.len()), "round {round} step {step}");
                // The parent may own the timestamp table, or have lost it to a sibling.
                match rng.below(5) {
                    0 => {
                        let _ = log.extract(0.0, 1.0, &HashSet::new(), |_| false);
                    }
                    1 => {
                        let cut = rng.below(log.len() + 1);
                        let sibling = ChainLog::grown(Some(&log), cut, Vec::new());
                        let _ = sibling.map(|s| s.extract(0.0, 1.0, &HashSet::new(), |_| false));
                    }
                    _ => {}
                }
                let parent = (rng.below(6) != 0).then_some(&log);
                if parent.is_none() {
                    kept = 0;
                }
                let fresh = reads(&msgs[kept..], &tags[kept..]);
                // No null message is generated: detection never throws here.
                let grown = ChainLog::grown(parent, kept, fresh).unwrap_or_default();
                if rng.below(3) == 0
                    && let Some(c) = (0..grown.chain_count()).find_map(|i| grown.chain(i))
                    && let Some(ts) = msgs[c.start].0.timestamp.num()
                {
                    registered.push(ts);
                }
                if rng.below(8) == 0 {
                    // Another registry: what was settled before is not settled now.
                    epoch += 1;
                    registered.clear();
                }
                check(&grown, &msgs, &registered, epoch);
                log = grown;
            }
        }
    }

    #[test]
    fn an_anchor_custom_message_starts_an_extracted_span() {
        // 2.10.0: a chain opened by a non-pruner custom message resolves from it, as render's
        // range does, so the deterministic backfill finds its calls.
        let msgs = [
            (user(1.0), false),
            (text(2.0), false),
            (custom(3.0, true), false),
            (assistant(4.0, vec![call("a")]), false),
            (result("a", 5.0), false),
            (text(6.0), false),
        ];
        let log = ChainLog::grown(None, 0, reads(&msgs, &[1, 2, 3, 4, 5, 6])).unwrap_or_default();
        let got = log.extract(3.0, 6.0, &HashSet::new(), |_| false);
        assert_eq!(got.map(|r| r.len()), Ok(1));
        // A pruner custom message is no start.
        let msgs = [
            (user(1.0), false),
            (custom(3.0, false), false),
            (assistant(4.0, vec![call("a")]), false),
            (result("a", 5.0), false),
            (text(6.0), false),
        ];
        let log = ChainLog::grown(None, 0, reads(&msgs, &[1, 2, 3, 4, 5])).unwrap_or_default();
        assert_eq!(
            log.extract(3.0, 6.0, &HashSet::new(), |_| false),
            Ok(vec![])
        );
    }

    #[test]
    fn the_prefix_compare_stops_at_the_first_difference() {
        let msgs: Vec<(ChainMsg, bool)> = (0..200).map(|i| (user(i as f64), false)).collect();
        let tags: Vec<usize> = (1..=200).collect();
        let log = ChainLog::grown(None, 0, reads(&msgs, &tags)).unwrap_or_default();
        assert_eq!(log.common_prefix(&tags), 200);
        assert_eq!(log.common_prefix(&tags[..70]), 70);
        assert_eq!(log.common_prefix(&[]), 0);
        let mut longer = tags.clone();
        longer.push(999);
        assert_eq!(log.common_prefix(&longer), 200);
        let mut edited = tags.clone();
        edited[130] = 0;
        assert_eq!(log.common_prefix(&edited), 130);
    }
}

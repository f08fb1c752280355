//! Resuming a render: the same messages again, with new ones appended, maybe against a
//! changed index.
//!
//! A host that never edits what it handed over renders its whole history before every
//! model call, with a few messages more each time; every few calls a flush or a chain
//! compression changes the index. Most of a render's decision over the old messages cannot
//! change: a toolResult is stubbed by its own key, a range resolves by timestamps, the
//! orphan sweep reads forward. So a render leaves a [`Resume`]: the phases' state at the end
//! of its list and at the ends of the renders before it (*checkpoints*), plus where things
//! first appear in the messages ([`seen`]) and what phase 3 decided per chain entry. The next
//! render restarts from the latest checkpoint before the first message an index change can
//! touch ([`Resume::restart_point`]), decides the messages from there on alone
//! ([`resume_render`]) and keeps the previous output before it.
//!
//! What the messages after a restart point can change before it is global, and small:
//!
//! | phase | what can change before the restart point | carried |
//! |---|---|---|
//! | 0 grace | a recovery output leaves the window; a new one shares an old result's key | ages and keys in the window; result keys |
//! | 1b supersede | a covered result's supersession changed (restart before it); an errored one superseded now no longer names its call (fall back) | the superseded results |
//! | 2 purge | a call's cooldown ends; a new errored result names an old call | `erroredAtTurn`, the candidate blocks and verdicts; call ids |
//! | 3 chains | a new message at a range's timestamp; a summary covered by a range on the other side | entries' outcomes and ranges; timestamps; dropped and summarized ids |
//! | 4 sweep | nothing (it reads forward) | open calls, swept ids |
//!
//! and what an index change can touch: the results of a changed key or bare id, the range
//! and synthetic text of a changed or new entry, the texts that read a changed body. Where
//! such a thing lies before every checkpoint, or the render would throw, [`resume_render`]
//! falls back ([`Fallback`]) and the caller renders the whole list. Outputs are exactly the
//! full render's: a property test checks it on random histories and index changes.

mod chains;
mod points;
mod seen;
#[cfg(test)]
mod tests;

use std::cell::RefCell;
use std::collections::HashSet;
use std::hash::BuildHasher;

use chains::ChainMemory;
use seen::{BODY_KEY, ID, KEY, Seen, summary_refs, tagged};

use super::chain::{self, Outcome, Scope, range::strict_key};
use super::error_purge::{Candidate, PurgeTrail};
use super::grace;
use super::ids::push_result_key;
use super::orphan_sweep::{Open, SweepTrail, orphan_diagnostic};
use super::plan::{self, Diagnostic, Item, Piece, Purge, Text};
use super::state::RenderState;
use super::stub_replace::{stub_text, stub_with};
use super::{Lazy, Needs, RenderConfig};
use crate::index::{ChainEntry, Change};
use crate::js::JsField;
use crate::view::{Block, IdStr, JsId, JsIdOf, MsgView, Role, Ts};

/// The most restart points a resume keeps before user messages (the oldest go first): a
/// compression restarts at its chain's user message, which may lie many calls back.
pub(super) const CHECKPOINTS: usize = 48;

/// The most other restart points (the ends of the latest renders) it keeps.
const RECENT_POINTS: usize = 24;

/// What a render leaves for the next one over the same messages plus new ones.
#[derive(Debug, Clone)]
pub struct Resume {
    /// The index revision the latest render was made against.
    revision: usize,
    needs: Needs,
    may_stub: bool,
    /// Restart points by ascending length; the last is the end of the latest render.
    checkpoints: Vec<Checkpoint>,
    seen: Seen,
    chains: ChainMemory,
    hasher: foldhash::fast::RandomState,
    /// The superseded results (phase 1b) the covered messages were rendered with, ascending.
    superseded: Vec<usize>,
    /// What [`Resume::restart_point`] found of the chain registry since [`Resume::revision`]:
    /// the revision it was given and the slots of the entries that joined or left (none: the
    /// registry is the same). A render against that revision updates the registry's
    /// timestamps for those slots alone (and keeps phase 3's reports when there are none)
    /// instead of rebuilding them from every entry.
    registry_delta: RefCell<Option<(usize, Vec<usize>)>>,
}

/// The phases' state after the first `len` messages.
#[derive(Debug, Clone)]
pub(super) struct Checkpoint {
    len: usize,
    /// The output so far differs from the input.
    changed: bool,
    /// Phase 0: age and key of each recovery output in the window.
    grace: Vec<(usize, String)>,
    purge: Option<PurgeTrail>,
    sweep: SweepTrail,
    orphan: Option<Diagnostic>,
    /// The caller's bookkeeping at this point ([`Resume::mark`]); the first is the number of
    /// output messages before it.
    marks: [usize; 3],
    /// The caller has set the marks.
    marked: bool,
}

impl Checkpoint {
    /// The state before any message.
    fn start(cfg: &RenderConfig<'_>) -> Self {
        Checkpoint {
            len: 0,
            changed: false,
            grace: Vec::new(),
            purge: cfg.purge.map(|_| PurgeTrail::default()),
            sweep: SweepTrail::default(),
            orphan: None,
            marks: [0; 3],
            marked: true,
        }
    }
}

/// Why a render could not be resumed: the caller renders the whole list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fallback {
    /// A recovery output left the grace window, or a new one shares an old result's key.
    Grace,
    /// A new errored result names an id the old messages call or already errored with.
    Errored,
    /// The cooldown of an old call's purge ended.
    Cooldown,
    /// A new message shares a chain range's timestamp with an old one, or is a chain message.
    Range,
    /// A per-batch summary and a range on the other side of the restart point.
    Summary,
    /// The render throws (the full render tells how).
    Throws,
    /// The old messages were left unchanged and the new ones change something: the whole
    /// input must be measured.
    FirstChange,
    /// An index change touches the messages before every checkpoint.
    Changed,
}

impl Fallback {
    /// A short name (statistics).
    pub fn as_str(self) -> &'static str {
        match self {
            Fallback::Grace => "grace",
            Fallback::Errored => "errored",
            Fallback::Cooldown => "cooldown",
            Fallback::Range => "range",
            Fallback::Summary => "summary",
            Fallback::Throws => "throws",
            Fallback::FirstChange => "first-change",
            Fallback::Changed => "changed",
        }
    }
}

/// The part of a resumed render from its restart point on.
#[derive(Debug, Clone, PartialEq)]
pub struct TailPlan {
    /// The restart point: the output keeps the previous output of the messages before it.
    pub from: usize,
    /// The caller's marks at the restart point ([`Resume::set_marks`]).
    pub marks: [usize; 3],
    /// `None`: the render changes nothing (the input list is the output). `Some`: the items
    /// of the messages from `from` on (indices into the whole list), to follow the previous
    /// output of the messages before it.
    pub items: Option<Vec<Item>>,
    /// The diagnostics of the whole render, in report order, first per dedup key.
    pub diagnostics: Vec<Diagnostic>,
}

/// The phases' trails a full render collects for its [`Resume`].
#[derive(Default)]
pub(crate) struct Traces {
    pub(crate) grace: Vec<(usize, String)>,
    pub(crate) purge: Option<PurgeTrail>,
    /// Phase 3 ran: each registry entry's outcome.
    pub(crate) chain: Option<Vec<Outcome>>,
    pub(crate) chain_reports: Vec<Diagnostic>,
    pub(crate) sweep: SweepTrail,
    pub(crate) orphan: Option<Diagnostic>,
}

/// [`Lazy`] of a list's messages from `offset` on, asked by their index in that part.
struct Shifted<'l, L: ?Sized> {
    lazy: &'l mut L,
    offset: usize,
}

impl<L: Lazy + ?Sized> Lazy for Shifted<'_, L> {
    fn args_len(&mut self, msg: usize, block: usize) -> Option<usize> {
        self.lazy.args_len(msg + self.offset, block)
    }

    fn args_shrink(&mut self, msg: usize, block: usize) -> bool {
        self.lazy.args_shrink(msg + self.offset, block)
    }

    fn is_recovery(&mut self, msg: usize) -> Option<bool> {
        self.lazy.is_recovery(msg + self.offset)
    }

    fn text_throws(&mut self, msg: usize) -> Option<bool> {
        self.lazy.text_throws(msg + self.offset)
    }
}

impl Resume {
    /// How many messages the latest render covered.
    pub fn len(&self) -> usize {
        self.end().len
    }

    /// Whether it covered none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the latest render changed something.
    pub fn changed(&self) -> bool {
        self.end().changed
    }

    /// The index revision the latest render was made against.
    pub fn revision(&self) -> usize {
        self.revision
    }

    fn end(&self) -> &Checkpoint {
        // Never empty: made with one, and a resume replaces the points after its restart
        // point with its own end.
        match self.checkpoints.last() {
            Some(end) => end,
            None => unreachable!("a resume always holds its end"),
        }
    }

    /// The restart points whose marks the caller has not set yet, as (length, output
    /// messages before it), ascending: set them with [`Resume::mark`], in this order.
    pub fn unmarked(&self) -> Vec<(usize, usize)> {
        self.checkpoints
            .iter()
            .filter(|c| !c.marked)
            .map(|c| (c.len, c.marks[0]))
            .collect()
    }

    /// Sets the caller's bookkeeping at the points [`Resume::unmarked`] gave (handed back as
    /// [`TailPlan::marks`] when a render restarts there).
    pub fn mark(&mut self, marks: &[[usize; 3]]) {
        let mut given = marks.iter();
        for point in self.checkpoints.iter_mut().filter(|c| !c.marked) {
            let Some(marks) = given.next() else { break };
            point.marks = *marks;
            point.marked = true;
        }
    }

    /// The resume of a full render of `msgs` that did not throw (`changed`: it returned
    /// items), from its phases' trails.
    pub(crate) fn of<S: IdStr, St: RenderState + ?Sized, L: Lazy + ?Sized>(
        msgs: &[MsgView<S>],
        state: &St,
        cfg: &RenderConfig<'_>,
        lazy: &mut L,
        revision: usize,
        items: Option<&[Item]>,
        traces: Traces,
    ) -> Resume {
        let hasher = foldhash::fast::RandomState::default();
        let mut seen = Seen::default();
        seen.extend(&hasher, msgs, 0);
        let entries = state.chain_entries();
        let mut chains = ChainMemory::default();
        chains.index_registry(&entries);
        if let Some(outcomes) = &traces.chain {
            chains.remember(&hasher, state, &entries, outcomes, msgs, 0);
        }
        chains.reports = traces.chain_reports.clone();
        let base = Checkpoint::start(cfg);
        let grace_keys: HashSet<String> = traces.grace.iter().map(|(_, k)| k.clone()).collect();
        let decided = points::Decided {
            base: &base,
            items,
            purge: traces.purge.as_ref(),
            sweep: &traces.sweep,
            grace_keys: &grace_keys,
            chains: &chains,
        };
        let mut checkpoints = points::points(msgs, 0, state, cfg, lazy, &decided);
        checkpoints.push(Checkpoint {
            len: msgs.len(),
            changed: items.is_some(),
            grace: traces.grace,
            purge: traces.purge,
            sweep: traces.sweep,
            orphan: traces.orphan,
            marks: [items.map_or(msgs.len(), <[Item]>::len), 0, 0],
            marked: false,
        });
        Resume {
            revision,
            needs: Needs::of(state, cfg),
            may_stub: state.may_stub(),
            checkpoints,
            seen,
            chains,
            hasher,
            superseded: superseded_below(cfg, msgs.len()).collect(),
            registry_delta: RefCell::new(None),
        }
    }

    /// Where a render of the covered messages plus new ones, against `state` after the
    /// index `changes` logged since [`Resume::revision`] and the same `cfg`, restarts: the
    /// length of the latest checkpoint before every message the changes can touch; `None`
    /// when there is none (render the whole list).
    pub fn restart_point<St: RenderState + ?Sized>(
        &self,
        state: &St,
        cfg: &RenderConfig<'_>,
        changes: &[Change],
    ) -> Option<usize> {
        if Needs::of(state, cfg) != self.needs || state.may_stub() != self.may_stub {
            return None;
        }
        let everything = changes.iter().any(|c| matches!(c, Change::Everything));
        let delta = (!everything).then(|| (self.revision + changes.len(), chain_slots(changes)));
        *self.registry_delta.borrow_mut() = delta;
        let mut touched = self.len();
        // Phase 1b decides a result alone: the first covered result whose supersession
        // changed (a lowered floor, a cold cache) is decided again.
        let now = superseded_below(cfg, touched);
        if let Some(first) = first_difference(&self.superseded, now) {
            touched = first;
        }
        let mut at = |p: usize| touched = touched.min(p);
        let h = |kind, text: &str| tagged(&self.hasher, kind, text);
        let results = &self.seen.results;
        for change in changes {
            match change {
                Change::Everything => return None,
                Change::Key(key) => {
                    // The key's results, and (a legacy key is a bare id) the bare id's.
                    at(Seen::at(results, h(KEY, key)));
                    at(Seen::at(results, h(ID, key)));
                }
                Change::Record { key, id } => {
                    at(Seen::at(results, h(KEY, key)));
                    at(Seen::at(results, h(ID, key)));
                    at(Seen::at(results, h(ID, id)));
                }
                Change::Body(keys) => {
                    for key in keys {
                        at(Seen::at(&self.chains.body_keys, h(BODY_KEY, key)));
                    }
                    if let Some(first) = self.chains.placeholders {
                        at(first);
                    }
                }
                Change::Chain(slot) => {
                    if let Some(first) = self.chains.placeholders {
                        at(first);
                    }
                    if let Some(settled) = self.chains.settled.get(slot) {
                        at(settled.range.start);
                    }
                    // An entry that joins (or leaves) the registry: its timestamps' messages.
                    if let Some(entry) = state_entry(state, *slot) {
                        if let Some(k) = strict_key(entry.start_user_timestamp)
                            && let Some(&first) = self.seen.users.get(&k).and_then(|v| v.first())
                        {
                            at(first);
                        }
                        let finals = match &entry.final_assistant_timestamp {
                            JsField::Number(x) => {
                                strict_key(*x).and_then(|k| self.seen.assistants.get(&k))
                            }
                            JsField::Absent => Some(&self.seen.absent_assistants),
                            _ => None,
                        };
                        if let Some(&first) = finals.and_then(|v| v.first()) {
                            at(first);
                        }
                    } else {
                        return None;
                    }
                }
            }
        }
        self.checkpoints
            .iter()
            .rev()
            .find(|c| c.len <= touched)
            .map(|c| c.len)
    }
}

/// The slots of the chain entries that joined or left the registry in `changes`, ascending,
/// each once.
pub(super) fn chain_slots(changes: &[Change]) -> Vec<usize> {
    let mut slots: Vec<usize> = changes
        .iter()
        .filter_map(|c| match c {
            Change::Chain(slot) => Some(*slot),
            _ => None,
        })
        .collect();
    slots.sort_unstable();
    slots.dedup();
    slots
}

/// The indices of `cfg.superseded` below `len`.
fn superseded_below<'c>(cfg: &'c RenderConfig<'_>, len: usize) -> impl Iterator<Item = usize> + 'c {
    cfg.superseded
        .iter()
        .map(|(i, _)| *i)
        .take_while(move |&i| i < len)
}

/// The smallest index in one of two ascending lists and not in the other.
fn first_difference(old: &[usize], now: impl Iterator<Item = usize>) -> Option<usize> {
    let mut old = old.iter().copied().peekable();
    let mut now = now.peekable();
    loop {
        match (old.peek().copied(), now.peek().copied()) {
            (None, None) => return None,
            (Some(a), None) => return Some(a),
            (None, Some(b)) => return Some(b),
            (Some(a), Some(b)) if a == b => {
                old.next();
                now.next();
            }
            (Some(a), Some(b)) => return Some(a.min(b)),
        }
    }
}

/// The chain entry at `slot` of the state's store.
fn state_entry<St: RenderState + ?Sized>(state: &St, slot: usize) -> Option<&ChainEntry> {
    state.chain_at(slot)
}

/// Drops the oldest restart points beyond [`CHECKPOINTS`] before user messages and
/// [`RECENT_POINTS`] others (the end stays).
fn trim(points: &mut Vec<Checkpoint>, seen: &Seen) {
    let Some((end, rest)) = points.split_last() else {
        return;
    };
    let users = rest.iter().filter(|c| seen.is_user(c.len)).count();
    let others = rest.len() - users;
    let (mut drop_users, mut drop_others) = (
        users.saturating_sub(CHECKPOINTS),
        others.saturating_sub(RECENT_POINTS),
    );
    if drop_users == 0 && drop_others == 0 {
        return;
    }
    let _ = end;
    let last = points.len() - 1;
    let mut k = 0;
    points.retain(|c| {
        let keep = if k == last {
            true
        } else if seen.is_user(c.len) {
            let gone = drop_users > 0;
            drop_users = drop_users.saturating_sub(1);
            !gone
        } else {
            let gone = drop_others > 0;
            drop_others = drop_others.saturating_sub(1);
            !gone
        };
        k += 1;
        keep
    });
}

/// Shifts the message indices of an item by `offset`.
fn shifted(item: Item, offset: usize) -> Item {
    let text = |text: Text| {
        Text(
            text.0
                .into_iter()
                .map(|piece| match piece {
                    Piece::ToolCallId(i) => Piece::ToolCallId(i + offset),
                    Piece::ToolName(i) => Piece::ToolName(i + offset),
                    Piece::ToolResultText(i) => Piece::ToolResultText(i + offset),
                    other => other,
                })
                .collect(),
        )
    };
    match item {
        Item::Keep(i) => Item::Keep(i + offset),
        Item::Stub { src, text: t } => Item::Stub {
            src: src + offset,
            text: text(t),
        },
        Item::Superseded { src, text: t } => Item::Superseded {
            src: src + offset,
            text: text(t),
        },
        Item::Assistant {
            src,
            purged,
            strip_thinking,
        } => Item::Assistant {
            src: src + offset,
            purged,
            strip_thinking,
        },
        Item::Synthetic {
            text: t,
            chain_slot,
        } => Item::Synthetic {
            text: text(t),
            chain_slot,
        },
    }
}

/// The render of the first `from` messages `resume` covered followed by `tail` (the messages
/// from `from` on), against `state` and `cfg`, decided from `tail` alone; `from` is what
/// [`Resume::restart_point`] gave for this state. Hands back the resume for the next call and
/// the items from `from` on, or why the whole list must be rendered.
///
/// `lazy` answers for the whole list (indices from 0). The caller must pass the config of the
/// render that left `resume` (its `superseded` may differ from `from` on: the restart point
/// is before the first covered result whose supersession changed), the very same messages
/// before `from` (none edited), and the state whose changes [`Resume::restart_point`] was
/// given.
pub fn resume_render<S, St, L>(
    mut resume: Resume,
    from: usize,
    tail: &[MsgView<S>],
    state: &St,
    cfg: &RenderConfig<'_>,
    lazy: &mut L,
    revision: usize,
) -> Result<(Resume, TailPlan), Fallback>
where
    S: IdStr,
    St: RenderState + ?Sized,
    L: Lazy + ?Sized,
{
    let Some(at) = resume.checkpoints.iter().rposition(|c| c.len == from) else {
        return Err(Fallback::Changed);
    };
    let start = resume.checkpoints[at].clone();
    let mut lazy = Shifted { lazy, offset: from };
    let hasher = resume.hasher;
    let h = |kind, text: &str| tagged(&hasher, kind, text);
    let entries = || state.chain_entries();
    // The registry's timestamps (and phase 3's reports, below) are those of the latest render
    // unless an entry joined or left the registry since.
    let registry_changed = revision != resume.revision
        && match resume.registry_delta.take() {
            Some((at, slots)) if at == revision => {
                if !slots.is_empty() && !resume.chains.update_registry(state, &slots) {
                    resume.chains.index_registry(&entries());
                }
                !slots.is_empty()
            }
            _ => {
                resume.chains.index_registry(&entries());
                true
            }
        };
    resume.seen.extend(&hasher, tail, from);
    let seen = &resume.seen;
    // What was decided from the restart point on is decided again.
    let settled_count = resume.chains.settled.len();
    let released = resume.chains.forget_from(from);
    let forgot = resume.chains.settled.len() != settled_count;

    // Which entries the tail can resolve; the others keep what the messages before decided.
    let chain_on = cfg.chain.is_some() && state.chain_count() > 0;
    let mut candidates: Vec<usize> = Vec::new();
    for msg in tail {
        if msg.role == Role::Assistant && msg.checked_blocks().is_err() {
            return Err(Fallback::Throws);
        }
        if !chain_on {
            continue;
        }
        let slots = match msg.role {
            Role::User => {
                if msg.synthetic_block_id.is_some() {
                    return Err(Fallback::Range);
                }
                msg.timestamp
                    .num()
                    .and_then(strict_key)
                    .and_then(|k| resume.chains.starts.get(&k))
            }
            Role::Custom if msg.anchor => msg
                .timestamp
                .num()
                .and_then(strict_key)
                .and_then(|k| resume.chains.starts.get(&k)),
            Role::Assistant => match msg.timestamp {
                Ts::Num(x) => strict_key(x).and_then(|k| resume.chains.finals.get(&k)),
                Ts::Absent => Some(&resume.chains.absent_finals),
                Ts::Other => None,
            },
            _ => None,
        };
        candidates.extend(slots.into_iter().flatten().copied());
    }
    candidates.sort_unstable();
    candidates.dedup();
    for &slot in &candidates {
        let Some(entry) = state.chain_at(slot) else {
            return Err(Fallback::Range);
        };
        let settled_before = resume.chains.settled.contains_key(&slot);
        let start_before =
            strict_key(entry.start_user_timestamp).is_some_and(|k| seen.user_before(k, from));
        let final_before = match &entry.final_assistant_timestamp {
            JsField::Number(x) => seen.assistant_before(Ts::Num(*x), from),
            JsField::Absent => seen.assistant_before(Ts::Absent, from),
            _ => false,
        };
        // The tail adds a match to a timestamp the messages before hold (or that settled a
        // range there): the range may resolve across the restart point, or no longer.
        if settled_before || start_before || final_before {
            return Err(Fallback::Range);
        }
    }

    // Phase 0. A recovery output leaving the window may be stubbed now; a new one in it
    // keeps every result of its key verbatim: an old one of that key falls back.
    let grace_on = state.may_stub() && grace::enabled(cfg.recovery_grace_turns);
    let mut grace_window = start.grace.clone();
    let mut in_grace: HashSet<String> = HashSet::new();
    if grace_on {
        let tail_users = tail.iter().filter(|m| m.role == Role::User).count();
        for (age, key) in &mut grace_window {
            *age += tail_users;
            if (*age as f64) > cfg.recovery_grace_turns {
                return Err(Fallback::Grace);
            }
            in_grace.insert(key.clone());
        }
        let mut users = 0;
        for (j, msg) in tail.iter().enumerate() {
            match msg.role {
                Role::User => users += 1,
                Role::ToolResult => {
                    let JsIdOf::Str(id) = &msg.tool_call_id else {
                        continue;
                    };
                    let age = tail_users - users;
                    let in_window = (age as f64) <= cfg.recovery_grace_turns;
                    let key = crate::keys::occ_key(id.as_ref(), msg.timestamp.num());
                    // A recovery output sharing an earlier result's key holds that one back
                    // while in the window, in this render or in the one whose output is kept.
                    let shared = Seen::at(&seen.results, h(KEY, &key)) < from;
                    if !in_window && !shared {
                        continue;
                    }
                    if !lazy.is_recovery(j).unwrap_or(msg.is_recovery) {
                        continue;
                    }
                    if shared {
                        return Err(Fallback::Grace);
                    }
                    grace_window.push((age, key.clone().into_owned()));
                    in_grace.insert(key.into_owned());
                }
                _ => {}
            }
        }
    }

    // Phase 1 (indices into the tail from here on).
    let mut items: Vec<Item> = (0..tail.len()).map(Item::Keep).collect();
    if state.may_stub() {
        let mut key = String::new();
        let mut hint = 0;
        for (j, msg) in tail.iter().enumerate() {
            if msg.role != Role::ToolResult {
                continue;
            }
            key.clear();
            let key = push_result_key(&mut key, msg).then_some(key.as_str());
            if let Some(found) = stub_with(msg, key, state, cfg.protection, &in_grace, &mut hint)
                && let Some(slot) = items.get_mut(j)
            {
                *slot = Item::Stub {
                    src: j,
                    text: stub_text(j, found, cfg.spill_stub_ref_only),
                };
            }
        }
    }

    // Phase 1b. An errored result superseded now and not before no longer names its call
    // (phase 2), which old messages may hold: checked there.
    let covered = resume.len();
    let was_superseded = |i: usize| resume.superseded.binary_search(&i).is_ok();
    let newly_superseded: Vec<usize> = cfg
        .superseded
        .iter()
        .map(|(i, _)| *i)
        .filter(|&i| i >= from && i < covered && !was_superseded(i))
        .collect();
    let first = cfg.superseded.partition_point(|(i, _)| *i < from);
    for (i, text) in cfg.superseded.get(first..).unwrap_or_default() {
        let j = i - from;
        if let Some(slot) = items.get_mut(j) {
            *slot = if matches!(slot, Item::Stub { .. }) {
                Item::Stub {
                    src: j,
                    text: text.clone(),
                }
            } else {
                Item::Superseded {
                    src: j,
                    text: text.clone(),
                }
            };
        }
    }

    // Phase 2.
    let mut purge = start.purge.clone();
    if let (Some(purge_cfg), Some(trail)) = (&cfg.purge, purge.as_mut()) {
        let mut turns = trail.turns;
        let mut errored: Vec<(JsIdOf<&str>, usize)> = Vec::new();
        for (j, msg) in tail.iter().enumerate() {
            match msg.role {
                Role::Assistant => turns += 1,
                Role::ToolResult
                    if msg.is_error
                        && matches!(items.get(j), Some(Item::Superseded { .. }))
                        && newly_superseded.binary_search(&(from + j)).is_ok() =>
                {
                    return Err(Fallback::Errored);
                }
                Role::ToolResult
                    if msg.is_error
                        && !matches!(
                            items.get(j),
                            Some(Item::Stub { .. } | Item::Superseded { .. })
                        ) =>
                {
                    let id = msg.tool_call_id.borrowed();
                    let old = trail.errored.iter().any(|(e, _)| e.borrowed() == id);
                    if old || Seen::at(&seen.calls, hasher.hash_one(id)) < from {
                        return Err(Fallback::Errored);
                    }
                    match errored.iter_mut().find(|(e, _)| *e == id) {
                        Some(slot) => slot.1 = turns,
                        None => errored.push((id, turns)),
                    }
                }
                _ => {}
            }
        }
        let throws_before = seen.purge_throws.is_some_and(|p| p < from);
        if !errored.is_empty() && trail.errored.is_empty() && throws_before {
            return Err(Fallback::Throws);
        }
        let current = turns;
        if current != trail.turns {
            for candidate in &mut trail.candidates {
                let (msg, block) = (candidate.msg, candidate.block);
                let now = candidate
                    .judge(purge_cfg, current, &mut *lazy.lazy, (msg, block))
                    .map_err(|_| Fallback::Throws)?;
                if now != candidate.purged {
                    return Err(Fallback::Cooldown);
                }
            }
        }
        if !errored.is_empty() || !trail.errored.is_empty() {
            for (j, msg) in tail.iter().enumerate() {
                if msg.role != Role::Assistant {
                    continue;
                }
                let blocks = msg.checked_blocks().map_err(|_| Fallback::Throws)?;
                let mut purged = Vec::new();
                for (b, block) in blocks.iter() {
                    let Block::ToolCall { id } = block else {
                        continue;
                    };
                    let id = id.borrowed();
                    let turn = errored
                        .iter()
                        .find(|(e, _)| *e == id)
                        .map(|&(_, turn)| turn)
                        .or_else(|| {
                            trail
                                .errored
                                .iter()
                                .find(|(e, _)| e.borrowed() == id)
                                .map(|&(_, turn)| turn)
                        });
                    let Some(error_turn) = turn else {
                        continue;
                    };
                    let mut candidate = Candidate {
                        msg: from + j,
                        block: b,
                        error_turn,
                        size: None,
                        shrinks: None,
                        purged: false,
                    };
                    candidate.purged = candidate
                        .judge(purge_cfg, current, &mut lazy, (j, b))
                        .map_err(|_| Fallback::Throws)?;
                    if let (true, Some(size)) = (candidate.purged, candidate.size) {
                        purged.push(Purge { block: b, size });
                    }
                    trail.candidates.push(candidate);
                }
                if !purged.is_empty()
                    && let Some(slot) = items.get_mut(j)
                {
                    *slot = Item::Assistant {
                        src: j,
                        purged,
                        strip_thinking: false,
                    };
                }
            }
        }
        trail.turns = current;
        trail
            .errored
            .extend(errored.iter().map(|(id, turn)| (id.to_owned_id(), *turn)));
    }

    // Phase 3 over the tail: the candidates resolve there; summaries are checked against the
    // ranges on the other side of the restart point.
    let mut outcomes: Vec<Outcome> = Vec::new();
    let mut current: Option<Vec<Item>> = Some(items);
    let mut new_ranges = ChainMemory::default();
    if chain_on {
        let applied_before = resume.chains.any_applied_before(from);
        if applied_before {
            for msg in tail {
                if let Some(refs) = &msg.summary {
                    let refs = summary_refs(refs).ok_or(Fallback::Throws)?;
                    if refs.iter().any(|r| resume.chains.drops(r)) {
                        return Err(Fallback::Summary);
                    }
                }
            }
        }
        let mut new_dropped = Vec::new();
        if !candidates.is_empty() {
            // The registry entries the tail can resolve, in registry order (the others are
            // decided by the messages before and left alone).
            let some = state.registry_subset(&candidates).unwrap_or_else(|| {
                entries()
                    .into_iter()
                    .filter(|e| candidates.binary_search(&e.slot).is_ok())
                    .collect()
            });
            let strip = cfg.chain.is_some_and(|c| c.strip_final_assistant_thinking);
            let inputs = chain::ChainInputs {
                msgs: tail,
                entries: &some,
                state,
                strip_final_thinking: strip,
                lazy: &mut lazy,
                phase1: None,
            };
            let scope = Scope {
                offset: from,
                partial: true,
            };
            chain::apply(inputs, &mut current, &mut outcomes, scope)
                .map_err(|_| Fallback::Throws)?;
            new_dropped = new_ranges.remember(&hasher, state, &some, &outcomes, tail, from);
            if new_ranges.any_applied_before(usize::MAX) {
                if seen.synthetic.is_some_and(|p| p < from) {
                    return Err(Fallback::Range);
                }
                if !applied_before && seen.bad_summary.is_some_and(|p| p < from) {
                    return Err(Fallback::Throws);
                }
            }
        }
        // A summary before the restart point is dropped when a range drops a call it names:
        // the ranges decided again must drop what the forgotten ones dropped.
        let summary_before =
            |what: &str| Seen::at(&seen.summary_refs, hasher.hash_one(what)) < from;
        let released_set: std::collections::HashSet<&str> = released.iter().map(|r| &**r).collect();
        let drops_now = |what: &str| resume.chains.drops(what) || new_ranges.drops(what);
        let drops_then = |what: &str| resume.chains.drops(what) || released_set.contains(what);
        let changed_for_summary = released
            .iter()
            .chain(&new_dropped)
            .any(|what| drops_now(what) != drops_then(what) && summary_before(what));
        if changed_for_summary {
            return Err(Fallback::Summary);
        }
    }
    let items = current.unwrap_or_default();

    // Phase 4, from the calls left open.
    let mut sweep = start.sweep.clone();
    let mut swept: Vec<(JsId, usize)> = Vec::new();
    let mut kept: Vec<Item> = Vec::with_capacity(items.len());
    {
        let mut open = Open::of(&sweep.open);
        for item in items {
            let msg = item.src().and_then(|i| tail.get(i));
            match msg {
                None => open.clear(),
                Some(msg) => match msg.role {
                    Role::Assistant => {
                        let blocks = msg.checked_blocks().map_err(|_| Fallback::Throws)?;
                        open.reset(blocks.call_ids());
                    }
                    Role::ToolResult => {
                        let id = msg.tool_call_id.borrowed();
                        if !open.take(&id) {
                            swept.extend(item.src().map(|i| (id.to_owned_id(), from + i)));
                            continue;
                        }
                    }
                    _ => open.clear(),
                },
            }
            kept.push(item);
        }
        sweep.open = open.to_owned_ids();
    }
    let tail_changed = !swept.is_empty()
        || outcomes
            .iter()
            .any(|o| matches!(o, Outcome::Accepted { .. }))
        || kept.iter().any(|item| !matches!(item, Item::Keep(_)));
    let mut orphan = start.orphan.clone();
    if !swept.is_empty() {
        for (id, at) in swept.drain(..) {
            sweep.swept.push(id);
            sweep.swept_at.push(at);
        }
        orphan = Some(orphan_diagnostic(&sweep.swept));
    }
    if tail_changed && !start.changed {
        return Err(Fallback::FirstChange);
    }
    let changed = start.changed || tail_changed;

    // Phase 3's reports: the entries decided before the restart point, and the tail's.
    if chain_on {
        resume.chains.absorb(new_ranges);
        if !candidates.is_empty() || registry_changed || forgot {
            let registry = entries();
            let settled = &resume.chains.settled;
            resume.chains.reports = plan::dedup(chain::reports(&registry, |k| {
                let entry = registry.get(k)?;
                settled.get(&entry.slot).map(|s| &s.outcome)
            }));
        }
    }
    let mut diagnostics = resume.chains.reports.clone();
    diagnostics.extend(orphan.iter().cloned());

    let len = from + tail.len();
    let inside = {
        let decided = points::Decided {
            base: &start,
            items: changed.then_some(&kept[..]),
            purge: purge.as_ref(),
            sweep: &sweep,
            grace_keys: &in_grace,
            chains: &resume.chains,
        };
        points::points(tail, from, state, cfg, &mut lazy, &decided)
    };
    resume.checkpoints.truncate(at + 1);
    resume.checkpoints.extend(inside);
    resume.checkpoints.push(Checkpoint {
        len,
        changed,
        grace: grace_window,
        purge,
        sweep,
        orphan,
        marks: [start.marks[0] + kept.len(), 0, 0],
        marked: false,
    });
    trim(&mut resume.checkpoints, &resume.seen);
    resume.revision = revision;
    resume
        .superseded
        .truncate(resume.superseded.partition_point(|&i| i < from));
    resume
        .superseded
        .extend(superseded_below(cfg, len).skip(first));
    let plan = TailPlan {
        from,
        marks: start.marks,
        items: changed.then(|| kept.into_iter().map(|i| shifted(i, from)).collect()),
        diagnostics,
    };
    Ok((resume, plan))
}

//! Resuming a render: the same messages again, with new ones appended.
//!
//! A host that never edits what it handed over renders its whole history before every
//! model call, with a few messages more each time. Between two such calls the state rarely
//! changes (a flush or a chain compression every few calls), and with the same state most
//! of a render's decision over the old messages cannot change: a toolResult is stubbed or
//! not by its own key, a range resolves by timestamps the new messages rarely share, and the
//! orphan sweep only looks backwards. What can change is global, and small:
//!
//! | phase | what the new messages can change in the old ones | carried |
//! |---|---|---|
//! | 0 grace | a recovery output leaves the window (more user turns) | the ages of those in it |
//! | 2 purge | a call's cooldown ends (more assistants); a new errored result names an old call | `erroredAtTurn`, the candidate blocks and their verdicts, the call ids (hashed) |
//! | 3 chains | a new message shares a range's start or final timestamp; a new summary is covered | the entries' timestamps; whether a range was accepted |
//! | 4 sweep | nothing (it reads forward) | the calls open at the end, the swept ids |
//!
//! A full render leaves a [`Resume`] ([`super::render_resumable`]); [`resume_render`] decides
//! the new messages alone and either hands back their items (the old ones keep theirs) or
//! falls back ([`Fallback`]) where the old messages' items could change or the render would
//! throw: the caller then renders the whole list again. Outputs are exactly the full
//! render's (a property test checks it on random histories).

use std::collections::HashSet;
use std::hash::BuildHasher;

use super::chain::range::strict_key;
use super::error_purge::{Candidate, PurgeTrail};
use super::grace;
use super::orphan_sweep::{orphan_diagnostic, Open, SweepTrail};
use super::plan::{Diagnostic, Item, Purge};
use super::state::RenderState;
use super::stub_replace::{stub_text, stub_with};
use super::{FastSet, Lazy, RenderConfig};
use crate::js::JsField;
use crate::view::{Block, IdStr, JsId, JsIdOf, MsgView, Role, Ts};

/// What a render leaves for the next one over the same messages plus new ones.
#[derive(Debug, Clone)]
pub struct Resume {
    /// The messages it covers.
    len: usize,
    /// The render changed something (its output is a new list).
    changed: bool,
    /// Phase 0: the age (user messages after it) and key of each recovery output in the
    /// window.
    grace: Vec<(usize, String)>,
    purge: Option<PurgeResume>,
    chain: Option<ChainResume>,
    sweep: SweepTrail,
    /// Phase 3's diagnostics (first per dedup key).
    chain_diagnostics: Vec<Diagnostic>,
    /// Phase 4's diagnostic, when a result was swept.
    orphan: Option<Diagnostic>,
}

/// Phase 2's trail, and what the new messages are checked against.
#[derive(Debug, Clone)]
struct PurgeResume {
    trail: PurgeTrail,
    /// The ids of every toolCall block of the list, hashed: a new errored result whose id
    /// is one of them (maybe) makes an old call a candidate.
    calls: FastSet<u64>,
    hasher: foldhash::fast::RandomState,
    /// An assistant whose content phase 2 cannot map: the render throws once an id errs.
    throws: bool,
}

/// Phase 3's timestamps: the registry's start and final timestamps (strict keys).
#[derive(Debug, Clone)]
struct ChainResume {
    starts: FastSet<u64>,
    finals: FastSet<u64>,
    /// An entry's `finalAssistantTimestamp` is absent (it matches assistants without one).
    absent_final: bool,
    /// A range was accepted (summaries are then checked against the dropped calls).
    accepted: bool,
}

/// Why a render could not be resumed: the caller renders the whole list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fallback {
    /// A recovery output of the old messages left the grace window.
    Grace,
    /// A new errored result names an id the old messages call or already errored with.
    Errored,
    /// The cooldown of an old call's purge ended.
    Cooldown,
    /// A new message shares a chain range's timestamp, or is a chain message.
    Range,
    /// A new per-batch summary while ranges drop calls.
    Summary,
    /// The render throws (the full render tells how).
    Throws,
    /// The old messages were left unchanged and the new ones change something: the whole
    /// input must be measured.
    FirstChange,
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
        }
    }
}

/// The new messages' part of a resumed render.
#[derive(Debug, Clone, PartialEq)]
pub struct TailPlan {
    /// `None`: the render changes nothing (the input list is the output). `Some`: the items
    /// of the new messages (indices into the whole list), to follow the previous output.
    pub items: Option<Vec<Item>>,
    /// The diagnostics of the whole render, in report order, first per dedup key.
    pub diagnostics: Vec<Diagnostic>,
}

/// The phases' trails a full render collects for its [`Resume`].
#[derive(Default)]
pub(crate) struct Traces {
    pub(crate) grace: Vec<(usize, String)>,
    pub(crate) purge: Option<PurgeTrail>,
    /// Phase 3 ran; whether a range was accepted.
    pub(crate) chain_accepted: Option<bool>,
    pub(crate) chain_diagnostics: Vec<Diagnostic>,
    pub(crate) sweep: SweepTrail,
    pub(crate) orphan: Option<Diagnostic>,
}

impl Resume {
    /// How many messages the render covered.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it covered none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the render changed something.
    pub fn changed(&self) -> bool {
        self.changed
    }

    /// The resume of a full render of `msgs` that did not throw (`changed`: it returned
    /// items), from its phases' trails.
    pub(crate) fn of<S: IdStr, St: RenderState + ?Sized>(
        msgs: &[MsgView<S>],
        state: &St,
        changed: bool,
        traces: Traces,
    ) -> Resume {
        let mut purge = traces.purge.map(|trail| PurgeResume {
            trail,
            calls: FastSet::default(),
            hasher: foldhash::fast::RandomState::default(),
            throws: false,
        });
        if let Some(purge) = purge.as_mut() {
            for msg in msgs.iter().filter(|m| m.role == Role::Assistant) {
                purge.add_calls(msg);
            }
        }
        let chain = traces.chain_accepted.map(|accepted| {
            let mut chain = ChainResume {
                starts: FastSet::default(),
                finals: FastSet::default(),
                absent_final: false,
                accepted,
            };
            for entry in state.chain_entries() {
                if let Some(key) = strict_key(entry.start_user_timestamp) {
                    chain.starts.insert(key);
                }
                match &entry.final_assistant_timestamp {
                    JsField::Number(x) => {
                        if let Some(key) = strict_key(*x) {
                            chain.finals.insert(key);
                        }
                    }
                    JsField::Absent => chain.absent_final = true,
                    _ => {}
                }
            }
            chain
        });
        Resume {
            len: msgs.len(),
            changed,
            grace: traces.grace,
            purge,
            chain,
            sweep: traces.sweep,
            chain_diagnostics: traces.chain_diagnostics,
            orphan: traces.orphan,
        }
    }

    fn diagnostics(&self) -> Vec<Diagnostic> {
        let mut out = self.chain_diagnostics.clone();
        out.extend(self.orphan.iter().cloned());
        out
    }
}

impl PurgeResume {
    fn hash(&self, id: &JsIdOf<&str>) -> u64 {
        self.hasher.hash_one(id)
    }

    /// Notes the calls of assistant `msg` (or that phase 2 cannot map its content).
    fn add_calls<S: IdStr>(&mut self, msg: &MsgView<S>) {
        match msg.checked_blocks() {
            Ok(blocks) => {
                for id in blocks.call_ids() {
                    let hash = self.hash(&id.borrowed());
                    self.calls.insert(hash);
                }
            }
            Err(_) => self.throws = true,
        }
    }
}

/// The render of the messages `resume` covered followed by `tail`, against the state and
/// config of the render that left `resume`, decided from `tail` alone: the resume for the
/// next call and the tail's items, or why the whole list must be rendered.
///
/// `lazy` answers for the whole list (indices from 0: the old messages are at the same
/// places). The caller must pass exactly the state (unchanged since) and config of that
/// render, and the very same old messages: none of them edited.
pub fn resume_render<S, St, L>(
    mut resume: Resume,
    tail: &[MsgView<S>],
    state: &St,
    cfg: &RenderConfig<'_>,
    lazy: &mut L,
) -> Result<(Resume, TailPlan), Fallback>
where
    S: IdStr,
    St: RenderState + ?Sized,
    L: Lazy + ?Sized,
{
    let offset = resume.len;
    check_tail(&resume, tail)?;

    // Phase 0. A recovery output leaving the window may be stubbed now; a new one in it
    // keeps every result of its key verbatim, old ones included: both fall back (rare: the
    // model's own recovery calls).
    let grace_on = state.may_stub() && grace::enabled(cfg.recovery_grace_turns);
    let mut in_grace: HashSet<String> = HashSet::new();
    if grace_on {
        let tail_users = tail.iter().filter(|m| m.role == Role::User).count();
        for (age, key) in &mut resume.grace {
            *age += tail_users;
            if (*age as f64) > cfg.recovery_grace_turns {
                return Err(Fallback::Grace);
            }
            in_grace.insert(key.clone());
        }
        let mut seen = 0;
        for (j, msg) in tail.iter().enumerate() {
            match msg.role {
                Role::User => seen += 1,
                Role::ToolResult => {
                    let age = tail_users - seen;
                    let in_window = (age as f64) <= cfg.recovery_grace_turns;
                    if in_window
                        && matches!(msg.tool_call_id, JsIdOf::Str(_))
                        && lazy.is_recovery(offset + j).unwrap_or(msg.is_recovery)
                    {
                        return Err(Fallback::Grace);
                    }
                }
                _ => {}
            }
        }
    }

    // Phase 1.
    let mut items: Vec<Item> = (offset..offset + tail.len()).map(Item::Keep).collect();
    if state.may_stub() {
        let mut key = String::new();
        let mut hint = 0;
        for (j, msg) in tail.iter().enumerate() {
            if msg.role != Role::ToolResult {
                continue;
            }
            key.clear();
            let key = super::ids::push_result_key(&mut key, msg).then_some(key.as_str());
            if let Some(found) = stub_with(msg, key, state, cfg.protection, &in_grace, &mut hint) {
                if let Some(slot) = items.get_mut(j) {
                    *slot = Item::Stub {
                        src: offset + j,
                        text: stub_text(offset + j, found),
                    };
                }
            }
        }
    }

    // Phase 2.
    if let (Some(purge_cfg), Some(purge)) = (&cfg.purge, resume.purge.as_mut()) {
        let mut turns = purge.trail.turns;
        let mut errored: Vec<(JsIdOf<&str>, usize)> = Vec::new();
        for (j, msg) in tail.iter().enumerate() {
            match msg.role {
                Role::Assistant => turns += 1,
                Role::ToolResult
                    if msg.is_error && !matches!(items.get(j), Some(Item::Stub { .. })) =>
                {
                    let id = msg.tool_call_id.borrowed();
                    let old = purge.trail.errored.iter().any(|(e, _)| e.borrowed() == id);
                    if old || purge.calls.contains(&purge.hash(&id)) {
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
        if !errored.is_empty() && purge.trail.errored.is_empty() && purge.throws {
            return Err(Fallback::Throws);
        }
        let current = turns;
        if current != purge.trail.turns {
            for candidate in &mut purge.trail.candidates {
                let (msg, block) = (candidate.msg, candidate.block);
                let now = candidate
                    .judge(purge_cfg, current, || lazy.args_len(msg, block))
                    .map_err(|_| Fallback::Throws)?;
                if now != candidate.purged {
                    return Err(Fallback::Cooldown);
                }
            }
        }
        if !errored.is_empty() || !purge.trail.errored.is_empty() {
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
                            purge
                                .trail
                                .errored
                                .iter()
                                .find(|(e, _)| e.borrowed() == id)
                                .map(|&(_, turn)| turn)
                        });
                    let Some(error_turn) = turn else {
                        continue;
                    };
                    let mut candidate = Candidate {
                        msg: offset + j,
                        block: b,
                        error_turn,
                        size: None,
                        purged: false,
                    };
                    candidate.purged = candidate
                        .judge(purge_cfg, current, || lazy.args_len(offset + j, b))
                        .map_err(|_| Fallback::Throws)?;
                    if let (true, Some(size)) = (candidate.purged, candidate.size) {
                        purged.push(Purge { block: b, size });
                    }
                    purge.trail.candidates.push(candidate);
                }
                if !purged.is_empty() {
                    if let Some(slot) = items.get_mut(j) {
                        *slot = Item::Assistant {
                            src: offset + j,
                            purged,
                            strip_thinking: false,
                        };
                    }
                }
            }
        }
        purge.trail.turns = current;
        purge
            .trail
            .errored
            .extend(errored.iter().map(|(id, turn)| (id.to_owned_id(), *turn)));
        for msg in tail.iter().filter(|m| m.role == Role::Assistant) {
            purge.add_calls(msg);
        }
    }

    // Phase 3 changes nothing here (`check_tail`). Phase 4, from the calls left open.
    let mut swept: Vec<JsId> = Vec::new();
    let mut kept: Vec<Item> = Vec::with_capacity(items.len());
    let open_now = {
        let mut open = Open::of(&resume.sweep.open);
        for (msg, item) in tail.iter().zip(items) {
            match msg.role {
                Role::Assistant => {
                    let blocks = msg.checked_blocks().map_err(|_| Fallback::Throws)?;
                    open.reset(blocks.call_ids());
                }
                Role::ToolResult => {
                    let id = msg.tool_call_id.borrowed();
                    if !open.take(&id) {
                        swept.push(id.to_owned_id());
                        continue;
                    }
                }
                _ => open.clear(),
            }
            kept.push(item);
        }
        open.to_owned_ids()
    };
    resume.sweep.open = open_now;
    let tail_changed = !swept.is_empty() || kept.iter().any(|item| !matches!(item, Item::Keep(_)));
    if !swept.is_empty() {
        resume.sweep.swept.extend(swept);
        resume.orphan = Some(orphan_diagnostic(&resume.sweep.swept));
    }
    if tail_changed && !resume.changed {
        return Err(Fallback::FirstChange);
    }
    resume.len += tail.len();
    let plan = TailPlan {
        items: resume.changed.then_some(kept),
        diagnostics: resume.diagnostics(),
    };
    Ok((resume, plan))
}

/// Whether phase 3 lets `tail` follow the old messages without touching their items: no
/// new message at a range's start or final timestamp (it could resolve or unresolve a
/// range), no chain message (the existing ones are detected), no per-batch summary while
/// ranges drop calls; and no assistant whose content phase 4 cannot read (the render throws).
fn check_tail<S: IdStr>(resume: &Resume, tail: &[MsgView<S>]) -> Result<(), Fallback> {
    for msg in tail {
        if msg.role == Role::Assistant && msg.checked_blocks().is_err() {
            return Err(Fallback::Throws);
        }
        let Some(chain) = &resume.chain else {
            continue;
        };
        let key = match msg.timestamp {
            Ts::Num(x) => strict_key(x),
            Ts::Absent | Ts::Other => None,
        };
        let hits = match msg.role {
            Role::User => {
                msg.synthetic_block_id.is_some() || key.is_some_and(|k| chain.starts.contains(&k))
            }
            Role::Assistant => {
                key.is_some_and(|k| chain.finals.contains(&k))
                    || (chain.absent_final && msg.timestamp == Ts::Absent)
            }
            _ => false,
        };
        if hits {
            return Err(Fallback::Range);
        }
        if chain.accepted && msg.summary.is_some() {
            return Err(Fallback::Summary);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;

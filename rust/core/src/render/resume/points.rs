//! Restart points inside the part of a list a render just decided.
//!
//! Index changes mostly touch the latest turns (a flush summarizes the pending results), or
//! a whole closed chain from its user message on (a compression). The first render after one
//! restarts at the latest point before what it touches instead of reading from further back.
//! A render that decided the messages from `offset` on (all of them for a full render) leaves
//! points before each of the latest user messages no applied range straddles, with the
//! phases' state there as this render decided it.

use std::collections::HashSet;

use super::chains::ChainMemory;
use super::{CHECKPOINTS, Checkpoint};
use crate::render::chain::Outcome;
use crate::render::error_purge::{Candidate, PurgeTrail};
use crate::render::grace;
use crate::render::ids::push_result_key;
use crate::render::orphan_sweep::{Open, SweepTrail, orphan_diagnostic};
use crate::render::plan::Item;
use crate::render::state::RenderState;
use crate::render::stub_replace::stub_with;
use crate::render::{Lazy, RenderConfig};
use crate::view::{Block, Content, IdStr, JsId, JsIdOf, MsgView, Role};

/// What the render decided, for [`points`].
pub(super) struct Decided<'a> {
    /// The state before the messages decided (at `offset`).
    pub(super) base: &'a Checkpoint,
    /// The output items of those messages (indices from `offset`), `None`: the render changed
    /// nothing.
    pub(super) items: Option<&'a [Item]>,
    /// Phase 2's trail at the end: every candidate's verdict in this output.
    pub(super) purge: Option<&'a PurgeTrail>,
    /// Phase 4's trail at the end.
    pub(super) sweep: &'a SweepTrail,
    /// The keys phase 1 kept in grace.
    pub(super) grace_keys: &'a HashSet<String>,
    pub(super) chains: &'a ChainMemory,
}

/// The restart points among `msgs` (message `offset + j` at `msgs[j]`; `lazy` answers by
/// `j`), ascending, the end excluded. Each point's first mark is the number of output
/// messages before it.
pub(super) fn points<S: IdStr, St: RenderState + ?Sized, L: Lazy + ?Sized>(
    msgs: &[MsgView<S>],
    offset: usize,
    state: &St,
    cfg: &RenderConfig<'_>,
    lazy: &mut L,
    decided: &Decided<'_>,
) -> Vec<Checkpoint> {
    let base = decided.base;
    let straddled = |p: usize| {
        decided.chains.settled.values().any(|s| {
            matches!(s.outcome, Outcome::Accepted { .. }) && s.range.start < p && p <= s.range.end
        })
    };
    // Local positions.
    let mut at: Vec<usize> = (1..msgs.len())
        .rev()
        .filter(|&j| msgs[j].role == Role::User && !straddled(offset + j))
        .take(CHECKPOINTS - 1)
        .collect();
    at.reverse();
    if at.is_empty() {
        return Vec::new();
    }
    // Output positions (local): the first output of message `j` on (no range straddles `j`,
    // so the synthetic messages before it are those of ranges before it).
    let outs: Vec<usize> = match decided.items {
        None => at.clone(),
        Some(items) => {
            let mut outs = Vec::with_capacity(at.len());
            let mut k = 0;
            for &j in &at {
                while items
                    .get(k)
                    .is_some_and(|item| !matches!(item.src(), Some(i) if i >= j))
                {
                    k += 1;
                }
                outs.push(k);
            }
            outs
        }
    };
    let unchanged_until = match decided.items {
        None => msgs.len(),
        Some(items) => items
            .iter()
            .enumerate()
            .position(|(k, item)| *item != Item::Keep(k))
            .unwrap_or(items.len()),
    };
    // Phase 4 over the output, paused at each point.
    let mut open_at: Vec<Vec<JsId>> = Vec::with_capacity(at.len());
    {
        let all: Vec<Item>;
        let output: &[Item] = match decided.items {
            Some(items) => items,
            None => {
                all = (0..msgs.len()).map(Item::Keep).collect();
                &all
            }
        };
        let mut open = Open::of(&base.sweep.open);
        let mut next = outs.iter().peekable();
        for (k, item) in output.iter().enumerate() {
            while next.next_if(|&&o| o == k).is_some() {
                open_at.push(open.to_owned_ids());
            }
            match item.src().and_then(|i| msgs.get(i)) {
                None => open.clear(),
                Some(msg) => match msg.role {
                    Role::Assistant => match msg.checked_blocks() {
                        Ok(blocks) => open.reset(blocks.call_ids()),
                        Err(_) => return Vec::new(),
                    },
                    Role::ToolResult => {
                        open.take(&msg.tool_call_id.borrowed());
                    }
                    _ => open.clear(),
                },
            }
        }
        while next.next().is_some() {
            open_at.push(open.to_owned_ids());
        }
    }
    // Phase 1's and 1b's verdict on an errored result (phase 2 keys on those left raw);
    // `i`: its index in the whole list.
    let mut key = String::new();
    let mut hint = 0;
    let superseded = |i: usize| {
        cfg.superseded
            .binary_search_by_key(&i, |(at, _)| *at)
            .is_ok()
    };
    let mut raw_error = |i: usize, msg: &MsgView<S>| -> bool {
        if !msg.is_error || superseded(i) {
            return false;
        }
        if !state.may_stub() {
            return true;
        }
        key.clear();
        let key = push_result_key(&mut key, msg).then_some(key.as_str());
        stub_with(
            msg,
            key,
            state,
            cfg.protection,
            decided.grace_keys,
            &mut hint,
        )
        .is_none()
    };
    let grace_on = state.may_stub() && grace::enabled(cfg.recovery_grace_turns);
    let mut users_before = vec![0usize; msgs.len() + 1];
    for (j, msg) in msgs.iter().enumerate() {
        users_before[j + 1] = users_before[j] + usize::from(msg.role == Role::User);
    }
    let mut out = Vec::with_capacity(at.len());
    let mut purge = base.purge.clone();
    let mut scanned = 0usize;
    for (n, &j) in at.iter().enumerate() {
        // Phase 2's state before `j`: the assistants, `erroredAtTurn`, and the candidate
        // blocks with the verdicts this render gave them.
        if let Some(trail) = purge.as_mut() {
            for (i, msg) in msgs.iter().enumerate().take(j).skip(scanned) {
                match msg.role {
                    Role::Assistant => trail.turns += 1,
                    Role::ToolResult if raw_error(offset + i, msg) => {
                        let id = msg.tool_call_id.to_owned_id();
                        match trail.errored.iter_mut().find(|(e, _)| *e == id) {
                            Some(slot) => slot.1 = trail.turns,
                            None => trail.errored.push((id, trail.turns)),
                        }
                    }
                    _ => {}
                }
            }
        }
        scanned = j;
        let purge_here = purge.as_ref().map(|trail| {
            let mut candidates: Vec<Candidate> = Vec::new();
            let verdict = |msg: usize, block: usize| {
                decided.purge.and_then(|p| {
                    p.candidates
                        .iter()
                        .find(|c| c.msg == msg && c.block == block)
                })
            };
            for c in base.purge.as_ref().map_or(&[][..], |p| &p.candidates[..]) {
                let judged = verdict(c.msg, c.block);
                candidates.push(Candidate {
                    size: judged.and_then(|x| x.size).or(c.size),
                    shrinks: judged.and_then(|x| x.shrinks).or(c.shrinks),
                    purged: judged.map_or(c.purged, |x| x.purged),
                    ..*c
                });
            }
            if !trail.errored.is_empty() {
                for (i, msg) in msgs.iter().enumerate().take(j) {
                    let (Role::Assistant, Content::Array(blocks)) = (msg.role, &msg.content) else {
                        continue;
                    };
                    for (b, block) in blocks.iter() {
                        let Block::ToolCall { id } = block else {
                            continue;
                        };
                        let Some(&(_, error_turn)) = trail
                            .errored
                            .iter()
                            .find(|(e, _)| e.borrowed() == id.borrowed())
                        else {
                            continue;
                        };
                        let judged = verdict(offset + i, b);
                        candidates.push(Candidate {
                            msg: offset + i,
                            block: b,
                            error_turn,
                            size: judged.and_then(|c| c.size),
                            shrinks: judged.and_then(|c| c.shrinks),
                            purged: judged.is_some_and(|c| c.purged),
                        });
                    }
                }
            }
            PurgeTrail {
                turns: trail.turns,
                errored: trail.errored.clone(),
                candidates,
            }
        });
        // Phase 0: the recovery outputs in the window before `j`.
        let mut grace = Vec::new();
        if grace_on {
            let users_here = users_before[j];
            for (age, k) in &base.grace {
                let age = age + users_here;
                if (age as f64) <= cfg.recovery_grace_turns {
                    grace.push((age, k.clone()));
                }
            }
            let mut here = Vec::new();
            for (i, msg) in msgs.iter().enumerate().take(j).rev() {
                let age = users_before[j] - users_before[i + 1];
                if (age as f64) > cfg.recovery_grace_turns {
                    break;
                }
                if msg.role != Role::ToolResult {
                    continue;
                }
                let JsIdOf::Str(id) = &msg.tool_call_id else {
                    continue;
                };
                if lazy.is_recovery(i).unwrap_or(msg.is_recovery) {
                    let k = crate::keys::occ_key(id.as_ref(), msg.timestamp.num());
                    here.push((age, k.into_owned()));
                }
            }
            here.reverse();
            grace.extend(here);
        }
        // Phase 4: the calls open before `j` and the results swept before it.
        let swept_count = decided.sweep.swept_at.partition_point(|&i| i < offset + j);
        let sweep = SweepTrail {
            open: open_at.get(n).cloned().unwrap_or_default(),
            swept: decided
                .sweep
                .swept
                .get(..swept_count)
                .unwrap_or_default()
                .to_vec(),
            swept_at: decided
                .sweep
                .swept_at
                .get(..swept_count)
                .unwrap_or_default()
                .to_vec(),
        };
        let orphan = (swept_count > 0).then(|| orphan_diagnostic(&sweep.swept));
        let outputs = outs.get(n).copied().unwrap_or(0);
        out.push(Checkpoint {
            len: offset + j,
            changed: base.changed || !(outputs == j && unchanged_until >= j),
            grace,
            purge: purge_here,
            sweep,
            orphan,
            marks: [base.marks[0] + outputs, 0, 0],
            marked: false,
        });
    }
    out
}

//! Phase 3: chain-range prune (04 section 5).
//!
//! Every registry entry whose range resolves (fail-closed, by timestamps)
//! drops the assistant / toolResult / summary messages strictly inside its
//! range and gets one synthetic `<compressed-chain>` user message right after
//! its start user message.
//!
//! | step | module |
//! |---|---|
//! | 1 resolve | [`range`] |
//! | 2 accept | [`accept`] |
//! | 3 drop sets, recorded-ids check, synthetic texts | here, [`drop`], [`synthetic`] |
//! | 4 emit (and the per-batch summaries a range covers) | here, [`drop`] |

mod accept;
pub(crate) mod drop;
pub(crate) mod range;
mod synthetic;
#[cfg(test)]
mod tests;

pub(crate) use range::{Range, RangeIndex};

use accept::accept;
use drop::{Dropped, id_mismatch, overlaps_dropped};
use synthetic::{Summaries, field_is_id, result_text, synthetic_text_with};

#[cfg(test)]
use super::ViewsOnly;
use super::ids::ResultKeys;
use super::plan::{Diagnostic, DiagnosticKind, Item, Piece, Text};
use super::state::RenderState;
use super::stub_replace::{Phase1, write_occ_key};
use super::{FastMap, FastSet, Lazy, Throw};
use crate::index::ChainEntry;
use crate::index::chain_facts::ChainFactsTable;
use crate::js::{JsField, format_number};
use crate::jsstr::JsBuf;
use crate::view::{Content, IdStr, JsIdOf, MsgView, Role};

/// What phase 3 reads: the views of the input list, the registry, the state, the config,
/// the lazily computed values and, after [`super::stub_replace::stub_replace_deferred`],
/// what phase 1 kept (the occurrence keys of the results it wrote, see [`ResultKeys`], and
/// the deferred stub texts).
pub(crate) struct ChainInputs<'a, S, St: ?Sized, L: ?Sized> {
    /// the views of the caller's list, in order
    pub(crate) msgs: &'a [MsgView<S>],
    /// the registry (`getChainEntries()`)
    pub(crate) entries: &'a [&'a ChainEntry],
    pub(crate) state: &'a St,
    /// `chainCompression.stripFinalAssistantThinking` is truthy
    pub(crate) strip_final_thinking: bool,
    pub(crate) lazy: &'a mut L,
    /// phase 1's keys and deferred stubs, when it ran deferred
    pub(crate) phase1: Option<&'a Phase1<'a>>,
}

/// What phase 3 decided about one registry entry.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    /// Its range does not resolve (`unresolved-range`).
    Unresolved,
    /// Resolved and applied, its range not walked yet (a render that threw before).
    Resolved,
    /// Resolved to `range`, but it nests in another or its start is claimed: the report.
    Rejected { range: Range, report: Diagnostic },
    /// Applied to `range` (indices into the list phase 3 ran over); `mismatch`: the
    /// `range-id-mismatch` report, when the ids inside differ from the recorded ones.
    Accepted {
        range: Range,
        mismatch: Option<Diagnostic>,
    },
}

/// Which part of a render's list phase 3 runs over: all of it, or (a resumed render) the
/// messages from `offset` on, with only the registry entries those messages can resolve.
#[derive(Clone, Copy, Default)]
pub(crate) struct Scope {
    pub(crate) offset: usize,
    /// The entries are some of the registry's (in registry order): the others are decided by
    /// the messages before `offset` and left alone. A `{bN}` placeholder's entry is then
    /// looked up in the whole registry ([`RenderState::chain_entries`]).
    pub(crate) partial: bool,
}

/// Phase 3's reports from the outcome of every registry entry (in registry order), as the
/// reference makes them: the unresolved ranges, then the skipped ones, then the id mismatches
/// of the applied ones.
pub(crate) fn reports<'o>(
    entries: &[&ChainEntry],
    outcome: impl Fn(usize) -> Option<&'o Outcome>,
) -> Vec<Diagnostic> {
    // One look-up per entry: the skipped and mismatch reports follow the unresolved ones.
    let mut out = Vec::new();
    let mut rejected = Vec::new();
    let mut mismatches = Vec::new();
    for (k, entry) in entries.iter().enumerate() {
        let found = outcome(k);
        match found {
            Some(Outcome::Rejected { report, .. }) => rejected.push(report),
            Some(Outcome::Accepted {
                mismatch: Some(report),
                ..
            }) => mismatches.push(report),
            _ => {}
        }
        if matches!(found, Some(Outcome::Unresolved) | None) {
            // The ids as the reference prints them, lone surrogates kept.
            let mut detail = JsBuf::new();
            detail.push_str("blockId=");
            entry.block_id.push_js_string(&mut detail);
            detail.push_str(&format!(
                " start={} final=",
                format_number(entry.start_user_timestamp)
            ));
            entry.final_assistant_timestamp.push_js_string(&mut detail);
            out.push(Diagnostic {
                kind: DiagnosticKind::UnresolvedRange,
                dedup_key: entry.block_id.js_string_key(),
                detail: detail.finish(),
            });
        }
    }
    out.extend(rejected.into_iter().cloned());
    out.extend(mismatches.into_iter().cloned());
    out
}

/// Phase 3 updating the phase-2 slots in place (they move into the output instead of being
/// copied): when an entry is accepted, `slots` becomes the new list and `true` is returned;
/// otherwise it is left as it was. `outcomes` gets the outcome of each registry entry.
pub(crate) fn apply<S: IdStr, St: RenderState + ?Sized, L: Lazy + ?Sized>(
    inputs: ChainInputs<'_, S, St, L>,
    slots: &mut Option<Vec<Item>>,
    outcomes: &mut Vec<Outcome>,
    scope: Scope,
) -> Result<bool, Throw> {
    match compress(inputs, slots, outcomes, scope)? {
        Some(out) => {
            *slots = Some(out);
            Ok(true)
        }
        None => Ok(false),
    }
}

/// Phase 3 over the phase-2 output (`slots`, `None` = the input unchanged;
/// phases 1-2 keep positions, roles and timestamps). `None`: no entry was
/// accepted and the list is unchanged; else the new slots (a new list even if
/// the content is identical). Tests only: the render uses [`apply`].
#[cfg(test)]
pub(crate) fn apply_chain_compressions<S: IdStr, St: RenderState + ?Sized>(
    msgs: &[MsgView<S>],
    slots: Option<&[Item]>,
    entries: &[&ChainEntry],
    state: &St,
    strip_final_thinking: bool,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<Option<Vec<Item>>, Throw> {
    let mut owned = slots.map(<[Item]>::to_vec);
    let inputs = ChainInputs {
        msgs,
        entries,
        state,
        strip_final_thinking,
        lazy: &mut ViewsOnly,
        phase1: None,
    };
    let mut outcomes = Vec::new();
    let out = compress(inputs, &mut owned, &mut outcomes, Scope::default());
    diagnostics.extend(reports(entries, |k| outcomes.get(k)));
    out
}

fn compress<S: IdStr, St: RenderState + ?Sized, L: Lazy + ?Sized>(
    inputs: ChainInputs<'_, S, St, L>,
    slots: &mut Option<Vec<Item>>,
    outcomes: &mut Vec<Outcome>,
    scope: Scope,
) -> Result<Option<Vec<Item>>, Throw> {
    let ChainInputs {
        msgs,
        entries,
        state,
        strip_final_thinking,
        lazy,
        phase1,
    } = inputs;
    outcomes.clear();
    if entries.is_empty() {
        return Ok(None);
    }
    // One scan: the ranges' messages by timestamp, and the block ids of the synthetic
    // messages already in the list.
    let mut ranges = RangeIndex::for_entries(entries);
    let mut existing: FastSet<&str> = FastSet::default();
    for (i, msg) in msgs.iter().enumerate() {
        ranges.add(i, msg);
        if msg.role == Role::User
            && let Some(block) = msg.synthetic_block_id.as_deref()
        {
            existing.insert(block);
        }
    }
    // 1. resolve
    let mut resolved: Vec<(usize, &ChainEntry, Range)> = Vec::new();
    for (k, &entry) in entries.iter().enumerate() {
        match ranges.resolve(entry) {
            Some(range) => {
                resolved.push((k, entry, range));
                outcomes.push(Outcome::Resolved);
            }
            None => outcomes.push(Outcome::Unresolved),
        }
    }
    // 2. accept: no start strictly inside another resolved range, one entry per start
    let (accepted, rejected) = accept(&resolved, scope.offset);
    for (k, range, report) in rejected {
        if let Some(slot) = outcomes.get_mut(k) {
            *slot = Outcome::Rejected { range, report };
        }
    }
    if accepted.is_empty() {
        return Ok(None);
    }
    // 3. drop sets and per-entry facts
    let n = msgs.len();
    let mut drop = vec![false; n];
    let mut strip = vec![false; n];
    // (start, synthetic text, entry) per accepted entry; starts are distinct (claimed).
    let mut insert_after: Vec<(usize, Text, &ChainEntry)> = Vec::with_capacity(accepted.len());
    // The occurrence keys of the dropped results (`id@ts`, or the bare id itself without a
    // numeric timestamp): spans of phase 1's keys when it kept them, else of `occ_arena`
    // where they are written here.
    let keys = phase1.and_then(|p| p.keys.complete());
    let mut occ_arena = String::new();
    let mut occ_spans: Vec<(usize, usize)> = Vec::new();
    // Keyed by the block id's string form, as the reference's Map is by value.
    let mut protected_by_block: FastMap<String, Vec<(Piece, Text)>> = FastMap::default();
    let mut summaries = Summaries::new(state, (!scope.partial).then_some(entries));
    // The facts of the entries when the state does not keep them.
    let mut local_facts = ChainFactsTable::new();
    let mut key = String::new();
    // The ids of the calls and results inside the accepted ranges, range after range.
    let mut range_ids: Vec<JsIdOf<&str>> = Vec::new();
    let mut actual: FastSet<JsIdOf<&str>> = FastSet::default();
    // Where the walk is in `keys` (ranges mostly come in list order).
    let mut cursor = 0;

    for &(k, entry, range) in &accepted {
        let facts = match state.chain_facts(entry) {
            Some(facts) => facts,
            None => {
                local_facts.push(entry);
                local_facts.get(local_facts.len() - 1).ok_or(Throw)?
            }
        };
        let protected_ids: &[JsField] =
            entry.protected_tool_call_ids.as_deref().unwrap_or_default();
        let first_id = range_ids.len();
        if let Some(keys) = keys {
            keys.rewind(range.start + 1, &mut cursor);
        }
        for i in range.start + 1..range.end {
            let Some(msg) = msgs.get(i) else { continue };
            if let Some(flag) = drop.get_mut(i) {
                *flag = true;
            }
            match msg.role {
                Role::ToolResult => {
                    let kept = keys.and_then(|k| Some((k, k.span_of(i, &mut cursor)?)));
                    let id = match (kept, &msg.tool_call_id) {
                        // A string id starts the key phase 1 wrote: read that copy.
                        (Some((k, (start, _))), JsIdOf::Str(raw)) => k
                            .text()
                            .get(start..start + raw.as_ref().len())
                            .map_or(msg.tool_call_id.borrowed(), JsIdOf::Str),
                        _ => msg.tool_call_id.borrowed(),
                    };
                    range_ids.push(id);
                    match (kept, msg.timestamp.num(), id) {
                        (Some((_, span)), _, _) => occ_spans.push(span),
                        (None, Some(ts), _) => {
                            write_occ_key(&mut key, &id.js_str(), ts);
                            let start = occ_arena.len();
                            occ_arena.push_str(&key);
                            occ_spans.push((start, occ_arena.len()));
                        }
                        (None, None, JsIdOf::Str(s)) => {
                            let start = occ_arena.len();
                            occ_arena.push_str(s);
                            occ_spans.push((start, occ_arena.len()));
                        }
                        // A non-string key can never equal a ref's string key.
                        (None, None, _) => {}
                    }
                    if !protected_ids.is_empty()
                        && protected_ids.iter().any(|p| field_is_id(p, &id))
                    {
                        let text = result_text(msgs, slots.as_deref(), i, lazy, phase1)?;
                        protected_by_block
                            .entry(facts.block_key.to_owned())
                            .or_default()
                            .push((Piece::ToolName(i), text));
                    }
                }
                Role::Assistant => {
                    // `for (const block of msg.content ?? [])` collecting toolCall ids.
                    match &msg.content {
                        Content::Array(_) => {
                            range_ids
                                .extend(msg.checked_blocks()?.call_ids().map(JsIdOf::borrowed));
                        }
                        // A string iterates its characters: none is a toolCall.
                        Content::Nullish | Content::Str => {}
                        Content::Other => return Err(Throw),
                    }
                }
                _ => {}
            }
        }
        // `(droppedToolCallIds ?? []).map(bareToolCallId)`: a non-string throws.
        let recorded = facts.recorded.ok_or(Throw)?;
        let ids = range_ids.get(first_id..).unwrap_or_default();
        let mismatch = id_mismatch(ids, recorded, &mut actual).map(|actual| {
            let mut detail = JsBuf::new();
            detail.push_str("blockId=");
            entry.block_id.push_js_string(&mut detail);
            detail.push_str(&format!(" recorded={} actual={actual}", recorded.len()));
            Diagnostic {
                kind: DiagnosticKind::RangeIdMismatch,
                dedup_key: entry.block_id.js_string_key(),
                detail: detail.finish(),
            }
        });
        if let Some(slot) = outcomes.get_mut(k) {
            *slot = Outcome::Accepted { range, mismatch };
        }
        if strip_final_thinking && let Some(flag) = strip.get_mut(range.end) {
            *flag = true;
        }
        let protected = if protected_by_block.is_empty() {
            &[][..]
        } else {
            protected_by_block
                .get(facts.block_key)
                .map(Vec::as_slice)
                .unwrap_or_default()
        };
        let text = synthetic_text_with(&mut summaries, entry, &facts, protected)?;
        insert_after.push((range.start, text, entry));
    }
    insert_after.sort_unstable_by_key(|&(start, _, _)| start);

    let mut dropped = Dropped {
        ids: &range_ids,
        key_spans: &occ_spans,
        key_text: keys.map_or(occ_arena.as_str(), ResultKeys::text),
        keys: None,
        bare: None,
    };
    // 4. emit
    emit(
        msgs,
        slots,
        &drop,
        &strip,
        insert_after,
        &existing,
        &mut dropped,
    )
    .map(Some)
}

/// Step 4 of phase 3: the new slots. The phase-2 slots move in (one per message; a dropped
/// message's is dropped), the final assistants of the ranges lose their thinking when
/// `strip` says so, per-batch summaries covering a dropped call go, and each range's
/// synthetic message goes right after its start (`insert_after`, by ascending start).
fn emit<S: IdStr>(
    msgs: &[MsgView<S>],
    slots: &mut Option<Vec<Item>>,
    drop: &[bool],
    strip: &[bool],
    insert_after: Vec<(usize, Text, &ChainEntry)>,
    existing: &FastSet<&str>,
    dropped: &mut Dropped<'_>,
) -> Result<Vec<Item>, Throw> {
    let mut out: Vec<Item> = Vec::with_capacity(msgs.len() + insert_after.len());
    let mut pending = insert_after.into_iter().peekable();
    // The phase-2 slots move into `out` (one per message; a dropped message's is dropped).
    let mut phase2 = slots.take().map(Vec::into_iter);
    for (i, msg) in msgs.iter().enumerate() {
        let slot = phase2.as_mut().and_then(Iterator::next);
        let droppable =
            matches!(msg.role, Role::Assistant | Role::ToolResult) || msg.summary.is_some();
        if drop.get(i).copied().unwrap_or(false) && droppable {
            continue;
        }
        if let Some(refs) = &msg.summary
            && overlaps_dropped(refs, dropped)?
        {
            continue;
        }
        let current = slot.unwrap_or(Item::Keep(i));
        if msg.role == Role::Assistant && strip.get(i).copied().unwrap_or(false) {
            // `msg.content.filter(c => c.type !== "thinking")`
            msg.checked_blocks()?;
            out.push(match current {
                Item::Assistant { src, purged, .. } => Item::Assistant {
                    src,
                    purged,
                    strip_thinking: true,
                },
                _ => Item::Assistant {
                    src: i,
                    purged: Vec::new(),
                    strip_thinking: true,
                },
            });
        } else {
            out.push(current);
        }
        // The synthetic message of a range goes right after its start (an entry whose start
        // was skipped above inserts nothing).
        while pending.next_if(|&(start, _, _)| start < i).is_some() {}
        if let Some((_, text, entry)) = pending.next_if(|&(start, _, _)| start == i)
            && !entry
                .block_id
                .as_str()
                .is_some_and(|b| existing.contains(b))
        {
            out.push(Item::Synthetic {
                text,
                chain_slot: entry.slot,
            });
        }
    }
    Ok(out)
}

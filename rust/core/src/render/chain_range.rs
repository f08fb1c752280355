//! Phase 3: chain-range prune (04 section 5).
//!
//! Every registry entry whose range resolves (fail-closed, by timestamps)
//! drops the assistant / toolResult / summary messages strictly inside its
//! range and gets one synthetic `<compressed-chain>` user message right after
//! its start user message.

use std::borrow::Cow;

use super::chain_facts::{ChainFacts, ChainFactsTable, StrList};
use super::ids::ResultKeys;
use super::placeholders::substitute_block_refs_into;
use super::plan::{Diagnostic, DiagnosticKind, Item, Piece, Text};
use super::state::RenderState;
use super::stub_replace::{write_occ_key, Phase1};
use super::view::{Content, IdStr, JsIdOf, MsgView, Role, SummaryRef, SummaryRefs, Ts};
#[cfg(test)]
use super::ViewsOnly;
use super::{FastMap, FastSet, Lazy, Throw};
use crate::index::{BodyIndex, ChainEntry, JsField};
use crate::jsnum::format_number;
use crate::jsstr::{JsBuf, JsStr};
use crate::keys::bare_tool_call_id;

/// A resolved range: the start user message and the final assistant message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    /// index of the unique user message at `startUserTimestamp`
    pub start: usize,
    /// index of the unique assistant message at `finalAssistantTimestamp`
    pub end: usize,
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
pub fn resolve_range<S>(entry: &ChainEntry, msgs: &[MsgView<S>]) -> Option<Range> {
    let final_ts = &entry.final_assistant_timestamp;
    if *final_ts == JsField::Null {
        return None;
    }
    let (mut start, mut start_matches) = (None, 0usize);
    let (mut end, mut end_matches) = (None, 0usize);
    for (i, msg) in msgs.iter().enumerate() {
        match msg.role {
            Role::User if msg.timestamp.strict_eq(entry.start_user_timestamp) => {
                start_matches += 1;
                start.get_or_insert(i);
            }
            Role::Assistant if ts_strict_eq(msg.timestamp, final_ts) => {
                end_matches += 1;
                end.get_or_insert(i);
            }
            _ => {}
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
fn strict_key(x: f64) -> Option<u64> {
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
pub struct RangeIndex {
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
    /// Indexes `msgs`.
    pub fn new<S>(msgs: &[MsgView<S>]) -> Self {
        let mut index = RangeIndex::default();
        for (i, msg) in msgs.iter().enumerate() {
            index.add(i, msg);
        }
        index
    }

    /// Indexes `msgs` for resolving `entries` only: a message whose timestamp no entry names
    /// is skipped (most of them), which keeps the maps small. Messages are then fed with
    /// [`RangeIndex::add`].
    fn for_entries(entries: &[&ChainEntry]) -> Self {
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
    fn add<S>(&mut self, i: usize, msg: &MsgView<S>) {
        let map = match msg.role {
            Role::User => &mut self.users,
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
    pub fn resolve(&self, entry: &ChainEntry) -> Option<Range> {
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

/// How far back [`ordered_match`] looks for a repeated id: past the calls of one assistant.
const LOOKBACK: usize = 32;

/// Whether the distinct ids of `ids` are exactly `recorded` (distinct ids), decided without
/// hashing when the ids come in recorded order: each new id is the next recorded one and
/// each repeated id (a result after its call) one of the last [`LOOKBACK`] matched. `false`
/// means "not shown equal this way".
fn ordered_match(ids: &[JsIdOf<&str>], recorded: StrList<'_>) -> bool {
    let mut next = 0;
    for id in ids {
        let JsIdOf::Str(id) = id else {
            return false;
        };
        if recorded.get(next) == Some(*id) {
            next += 1;
            continue;
        }
        let lookback = next.saturating_sub(LOOKBACK)..next;
        if !lookback.rev().any(|k| recorded.get(k) == Some(*id)) {
            return false;
        }
    }
    next == recorded.len()
}

/// The `range-id-mismatch` check: `None` when the distinct `ids` are the `recorded` ids,
/// else the number of distinct `ids` (the diagnostic's `actual=`). `set` is scratch space.
fn id_mismatch<'a>(
    ids: &[JsIdOf<&'a str>],
    recorded: StrList<'_>,
    set: &mut FastSet<JsIdOf<&'a str>>,
) -> Option<usize> {
    if ordered_match(ids, recorded) {
        return None;
    }
    set.clear();
    set.extend(ids.iter().copied());
    let differ =
        recorded.len() != set.len() || recorded.iter().any(|id| !set.contains(&JsIdOf::Str(id)));
    differ.then_some(set.len())
}

fn report(out: &mut Vec<Diagnostic>, kind: DiagnosticKind, dedup_key: String, detail: String) {
    out.push(Diagnostic {
        kind,
        dedup_key,
        detail,
    });
}

/// `Set.prototype.has` between a persisted id and a message id (SameValueZero).
fn field_is_id<S: AsRef<str>>(field: &JsField, id: &JsIdOf<S>) -> bool {
    match (field, id) {
        (JsField::Str(a), JsIdOf::Str(b)) => a == b.as_ref(),
        (JsField::Number(a), JsIdOf::Num(b)) => JsIdOf::<&str>::num(*a) == JsIdOf::Num(*b),
        (JsField::Bool(a), JsIdOf::Bool(b)) => a == b,
        (JsField::Null, JsIdOf::Null) | (JsField::Absent, JsIdOf::Undefined) => true,
        _ => false,
    }
}

/// Tool-result text of the message now standing at `i` (a stub's text may be deferred by
/// `phase1`).
fn result_text<S, L: Lazy + ?Sized>(
    msgs: &[MsgView<S>],
    slots: Option<&[Item]>,
    i: usize,
    lazy: &mut L,
    phase1: Option<&Phase1<'_>>,
) -> Result<Text, Throw> {
    if let Some(Item::Stub { text, .. }) = slots.and_then(|s| s.get(i)) {
        let deferred = phase1.and_then(|p| p.stub_text(i));
        return Ok(deferred.unwrap_or_else(|| text.clone()));
    }
    let throws = lazy
        .text_throws(i)
        .unwrap_or_else(|| msgs.get(i).is_some_and(|m| m.text_throws));
    if throws {
        return Err(Throw);
    }
    Ok(Text(vec![Piece::ToolResultText(i)]))
}

/// The dropped calls as the per-batch summary check asks about them: by occurrence key
/// (results only) and by id (calls and results). Each set is built on first use, so a list
/// without per-batch summaries builds none.
struct Dropped<'a> {
    /// the ids of the dropped calls and results
    ids: &'a [JsIdOf<&'a str>],
    /// the spans of the dropped results' keys in `key_text`
    key_spans: &'a [(usize, usize)],
    key_text: &'a str,
    keys: Option<FastSet<&'a str>>,
    bare: Option<FastSet<JsIdOf<&'a str>>>,
}

impl<'a> Dropped<'a> {
    fn has_key(&mut self, key: &str) -> bool {
        let (spans, text) = (self.key_spans, self.key_text);
        self.keys
            .get_or_insert_with(|| {
                let mut keys = FastSet::with_capacity_and_hasher(spans.len(), Default::default());
                keys.extend(
                    spans
                        .iter()
                        .filter_map(|&(start, end)| text.get(start..end)),
                );
                keys
            })
            .contains(key)
    }

    fn has_id(&mut self, id: &str) -> bool {
        let ids = self.ids;
        self.bare
            .get_or_insert_with(|| ids.iter().copied().collect())
            .contains(&JsIdOf::Str(id))
    }
}

/// Whether a per-batch summary covers a dropped call (04 section 5.5).
fn overlaps_dropped<S: AsRef<str>>(
    refs: &SummaryRefs<S>,
    dropped: &mut Dropped<'_>,
    buf: &mut String,
) -> Result<bool, Throw> {
    let SummaryRefs::List(items) = refs else {
        return Err(Throw);
    };
    for item in items {
        let SummaryRef::Ref {
            tool_call_id,
            result_timestamp,
        } = item
        else {
            return Err(Throw);
        };
        let hit = match result_timestamp {
            Some(ts) => {
                buf.clear();
                buf.push_str(&tool_call_id.js_str());
                buf.push('@');
                buf.push_str(ts);
                dropped.has_key(buf)
            }
            None => {
                let JsIdOf::Str(id) = tool_call_id else {
                    return Err(Throw);
                };
                dropped.has_id(bare_tool_call_id(id.as_ref()))
            }
        };
        if hit {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Chain summary texts and block-id lookups of one render, each computed once.
struct Summaries<'s, 'e, St: RenderState + ?Sized> {
    state: &'s St,
    /// the registry (`getChainEntries()`)
    entries: &'e [&'s ChainEntry],
    /// block id -> the entry with that id, when exactly one entry of the registry has it
    /// (built for the first `{bN}` placeholder)
    by_block: Option<FastMap<&'s str, Option<&'s ChainEntry>>>,
    /// `chain_summary_text` of the entries placeholders named, by entry address
    texts: FastMap<usize, Option<Cow<'s, JsStr>>>,
    /// the per-batch bodies by key, when the state does not keep them so (built on first use)
    local_bodies: Option<BodyIndex>,
    /// lookup hint into the bodies' keys (chains ask for them in about the bodies' order)
    body_hint: usize,
    /// scratch: positions of the bodies an entry's keys hit
    hits: Vec<usize>,
}

impl<'s, 'e, St: RenderState + ?Sized> Summaries<'s, 'e, St> {
    fn new(state: &'s St, entries: &'e [&'s ChainEntry]) -> Self {
        Summaries {
            state,
            entries,
            by_block: None,
            texts: FastMap::default(),
            local_bodies: None,
            body_hint: 0,
            hits: Vec::new(),
        }
    }

    /// [`Summaries::text`] for the entry being rendered (nothing else asks for its text
    /// unless a placeholder names it, so it is not memoized).
    fn own_text(&mut self, entry: &'s ChainEntry) -> Option<Cow<'s, JsStr>> {
        match &entry.range_summary_text {
            JsField::Str(text) => Some(Cow::Borrowed(text)),
            _ => self.compute_text(entry),
        }
    }

    /// `chainSummaryText(entry)` (memoized); `None` where the reference throws.
    fn text(&mut self, entry: &'s ChainEntry) -> Option<Cow<'s, JsStr>> {
        if let JsField::Str(text) = &entry.range_summary_text {
            return Some(Cow::Borrowed(text));
        }
        let address = entry as *const ChainEntry as usize;
        if let Some(text) = self.texts.get(&address) {
            return text.clone();
        }
        let text = self.compute_text(entry);
        self.texts.insert(address, text.clone());
        text
    }

    /// `chainSummaryText(entry)` through the key index of the per-batch bodies: the
    /// bodies sharing a key with the entry, in body order, without repeated texts,
    /// joined with a blank line.
    fn compute_text(&mut self, entry: &'s ChainEntry) -> Option<Cow<'s, JsStr>> {
        let state = self.state;
        let Some(bodies) = state.summary_bodies() else {
            return state.chain_summary_text(entry).map(Cow::Owned);
        };
        match &entry.range_summary_text {
            JsField::Str(text) => return Some(Cow::Borrowed(text)),
            other if !other.is_nullish() => return Some(Cow::Owned(other.js_string().into())),
            _ => {}
        }
        let by_key = match state.body_index() {
            Some(index) => index,
            None => self
                .local_bodies
                .get_or_insert_with(|| BodyIndex::new(bodies)),
        };
        let hits = &mut self.hits;
        hits.clear();
        // The keys as the state keeps them (stored together), else read from the entry.
        match state.chain_facts(entry) {
            Some(facts) => {
                for key in facts.summary_keys?.iter() {
                    hits.extend_from_slice(by_key.positions_near(key, &mut self.body_hint));
                }
            }
            None => {
                for key in entry.summary_keys()?.iter().filter_map(JsField::as_str) {
                    hits.extend_from_slice(by_key.positions_near(key, &mut self.body_hint));
                }
            }
        }
        hits.sort_unstable();
        hits.dedup();
        let mut texts: Vec<&JsStr> = Vec::with_capacity(hits.len());
        // A chain usually has a few bodies: a scan then beats a hash set. Texts compare
        // exactly (lone surrogates included).
        let few = hits.len() <= 16;
        let mut seen: FastSet<&[u8]> = FastSet::default();
        for &i in hits.iter() {
            if let Some(body) = bodies.get(i) {
                let text = &body.text;
                let new = if few {
                    !texts.iter().any(|t| t.wtf8() == text.wtf8())
                } else {
                    seen.insert(text.wtf8())
                };
                if new {
                    texts.push(text);
                }
            }
        }
        Some(match texts.as_slice() {
            [] => Cow::Owned(JsStr::default()),
            [one] => Cow::Borrowed(*one),
            _ => {
                let mut out = JsBuf::new();
                for (n, text) in texts.iter().enumerate() {
                    if n > 0 {
                        out.push_str("\n\n");
                    }
                    out.push(*text);
                }
                Cow::Owned(out.finish())
            }
        })
    }

    /// `findChainEntryByBlockId(b)`.
    fn entry_by_block_id(&mut self, block_id: &str) -> Option<&'s ChainEntry> {
        let entries = self.entries;
        let by_block = self.by_block.get_or_insert_with(|| {
            let mut by_block: FastMap<&'s str, Option<&'s ChainEntry>> = FastMap::default();
            for &entry in entries {
                if let Some(block) = entry.block_id.as_str() {
                    by_block
                        .entry(block)
                        .and_modify(|found| *found = None)
                        .or_insert(Some(entry));
                }
            }
            by_block
        });
        match by_block.get(block_id) {
            Some(Some(entry)) => Some(entry),
            // Shared by several entries (or unknown here): the registry decides.
            _ => self.state.chain_entry_by_block_id(block_id),
        }
    }
}

/// `<compressed-chain id="..." tools="...">\n<body><protected>\n</compressed-chain>`
/// (04 section 5.4); `Err` where the reference throws building it.
pub fn synthetic_text<St: RenderState + ?Sized>(
    state: &St,
    entry: &ChainEntry,
    protected: &[(Piece, Text)],
) -> Result<Text, Throw> {
    let entries = state.chain_entries();
    let mut summaries = Summaries::new(state, &entries);
    // `entry` may not be one of the registry's: its text is not memoized.
    let text = state.chain_summary_text(entry).ok_or(Throw)?;
    let mut facts = ChainFactsTable::new();
    facts.push(entry);
    let facts = facts.get(0).ok_or(Throw)?;
    synthetic_text_from(&mut summaries, entry, &facts, &text, protected)
}

fn synthetic_text_with<'s, St: RenderState + ?Sized>(
    summaries: &mut Summaries<'s, '_, St>,
    entry: &'s ChainEntry,
    facts: &ChainFacts<'_>,
    protected: &[(Piece, Text)],
) -> Result<Text, Throw> {
    if let Some(prefix) = facts.prefix {
        // Head and summary known in advance: no lookup, no placeholder to substitute.
        let mut out = JsBuf::with_capacity(prefix.len() + SYNTHETIC_TAIL.len());
        out.push_str(prefix);
        return Ok(finish_synthetic(out, protected));
    }
    let summary = summaries.own_text(entry).ok_or(Throw)?;
    synthetic_text_from(summaries, entry, facts, &summary, protected)
}

/// The end of every synthetic text.
const SYNTHETIC_TAIL: &str = "\n</compressed-chain>";

fn synthetic_text_from<'s, St: RenderState + ?Sized>(
    summaries: &mut Summaries<'s, '_, St>,
    entry: &ChainEntry,
    facts: &ChainFacts<'_>,
    summary: &JsStr,
    protected: &[(Piece, Text)],
) -> Result<Text, Throw> {
    let head = facts.head.ok_or(Throw)?;
    let mut out = JsBuf::with_capacity(head.len() + summary.len() + SYNTHETIC_TAIL.len());
    match facts.exact_head {
        Some(exact) => out.push(exact),
        None => out.push_str(head),
    }
    let mut lookup_threw = false;
    let lookup = |block_id: &str| {
        let other = summaries.entry_by_block_id(block_id)?;
        match summaries.text(other) {
            Some(text) if !text.is_empty() => Some(text),
            Some(_) => None,
            None => {
                lookup_threw = true;
                None
            }
        }
    };
    substitute_block_refs_into(&mut out, summary.into(), lookup, entry.block_id.as_str());
    if lookup_threw {
        return Err(Throw);
    }
    Ok(finish_synthetic(out, protected))
}

/// The synthetic text from its head and summary (`out`): the protected outputs, then the
/// closing tag.
fn finish_synthetic(out: JsBuf, protected: &[(Piece, Text)]) -> Text {
    let mut text = Text::default();
    text.push_js(&out.finish());
    for (tool, output) in protected {
        text.lit("\n\n<protected-output tool=\"");
        text.push(tool.clone());
        text.lit("\">\n");
        text.extend(output);
        text.lit("\n</protected-output>");
    }
    text.lit(SYNTHETIC_TAIL);
    text
}

/// The index of the first resolved range (in registry order) other than `k` whose
/// interior holds `start`: `other.start < start < other.end`.
struct Containers {
    /// resolved ranges by ascending start: (start, end)
    by_start: Vec<(usize, usize)>,
    /// `prefix_max_end[p]` = the largest end among the first `p` of `by_start`
    prefix_max_end: Vec<usize>,
}

impl Containers {
    fn new(ranges: &[Range]) -> Self {
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
    fn any_holds(&self, start: usize) -> bool {
        let before = self.by_start.partition_point(|&(s, _)| s < start);
        self.prefix_max_end
            .get(before)
            .is_some_and(|&end| end > start)
    }
}

/// Phase 3 over the phase-2 output (`slots`, `None` = the input unchanged;
/// phases 1-2 keep positions, roles and timestamps). `None`: no entry was
/// accepted and the list is unchanged; else the new slots (a new list even if
/// the content is identical). Tests only: the render uses [`apply_chain_in_place_keyed`].
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
    apply_chain(
        msgs,
        &mut owned,
        entries,
        state,
        strip_final_thinking,
        &mut ViewsOnly,
        diagnostics,
        None,
    )
}

/// Phase 3 updating the phase-2 slots in place (they move into the output instead of being
/// copied: when an entry is accepted, `slots` becomes the new list and `true` is returned;
/// otherwise it is left as it was), after [`super::stub_replace::stub_replace_deferred`]: the
/// occurrence keys of the dropped results are read from the keys phase 1 wrote (see
/// [`ResultKeys`]), and the text of a stub from `phase1`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn apply_chain_in_place_keyed<S: IdStr, St: RenderState + ?Sized, L: Lazy + ?Sized>(
    msgs: &[MsgView<S>],
    slots: &mut Option<Vec<Item>>,
    entries: &[&ChainEntry],
    state: &St,
    strip_final_thinking: bool,
    lazy: &mut L,
    diagnostics: &mut Vec<Diagnostic>,
    phase1: Option<&Phase1<'_>>,
) -> Result<bool, Throw> {
    match apply_chain(
        msgs,
        slots,
        entries,
        state,
        strip_final_thinking,
        lazy,
        diagnostics,
        phase1,
    )? {
        Some(out) => {
            *slots = Some(out);
            Ok(true)
        }
        None => Ok(false),
    }
}

#[allow(clippy::too_many_arguments)]
fn apply_chain<'m, S: IdStr, St: RenderState + ?Sized, L: Lazy + ?Sized>(
    msgs: &'m [MsgView<S>],
    slots: &mut Option<Vec<Item>>,
    entries: &[&ChainEntry],
    state: &St,
    strip_final_thinking: bool,
    lazy: &mut L,
    diagnostics: &mut Vec<Diagnostic>,
    phase1: Option<&'m Phase1<'_>>,
) -> Result<Option<Vec<Item>>, Throw> {
    if entries.is_empty() {
        return Ok(None);
    }
    // One scan: the ranges' messages by timestamp, and the block ids of the synthetic
    // messages already in the list.
    let mut ranges = RangeIndex::for_entries(entries);
    let mut existing: FastSet<&str> = FastSet::default();
    for (i, msg) in msgs.iter().enumerate() {
        ranges.add(i, msg);
        if msg.role == Role::User {
            if let Some(block) = msg.synthetic_block_id.as_deref() {
                existing.insert(block);
            }
        }
    }
    // 1. resolve
    let mut resolved: Vec<(&ChainEntry, Range)> = Vec::new();
    for &entry in entries {
        match ranges.resolve(entry) {
            Some(range) => resolved.push((entry, range)),
            None => {
                let block = entry.block_id.js_string();
                let detail = format!(
                    "blockId={block} start={} final={}",
                    format_number(entry.start_user_timestamp),
                    entry.final_assistant_timestamp.js_string()
                );
                report(diagnostics, DiagnosticKind::UnresolvedRange, block, detail);
            }
        }
    }
    // 2. accept: no start strictly inside another resolved range, one entry per start
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
    let mut summaries = Summaries::new(state, entries);
    // The facts of the entries when the state does not keep them.
    let mut local_facts = ChainFactsTable::new();
    let mut key = String::new();
    // The ids of the calls and results inside the accepted ranges, range after range.
    let mut range_ids: Vec<JsIdOf<&str>> = Vec::new();
    let mut actual: FastSet<JsIdOf<&str>> = FastSet::default();
    // Where the walk is in `keys` (ranges mostly come in list order).
    let mut cursor = 0;

    for &(entry, range) in &accepted {
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
        if let Some(actual) = id_mismatch(ids, recorded, &mut actual) {
            let detail = format!(
                "blockId={} recorded={} actual={}",
                facts.block_key,
                recorded.len(),
                actual
            );
            report(
                diagnostics,
                DiagnosticKind::RangeIdMismatch,
                facts.block_key.to_owned(),
                detail,
            );
        }
        if strip_final_thinking {
            if let Some(flag) = strip.get_mut(range.end) {
                *flag = true;
            }
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
    let mut out: Vec<Item> = Vec::with_capacity(n + accepted.len());
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
        if let Some(refs) = &msg.summary {
            if overlaps_dropped(refs, &mut dropped, &mut key)? {
                continue;
            }
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
        if let Some((_, text, entry)) = pending.next_if(|&(start, _, _)| start == i) {
            if !entry
                .block_id
                .as_str()
                .is_some_and(|b| existing.contains(b))
            {
                out.push(Item::Synthetic {
                    text,
                    timestamp: entry.compressed_at.clone(),
                    chain_slot: entry.slot,
                });
            }
        }
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::testing::{
        assistant, custom, ok, reused_id_turns, summary, synthetic_user, tc, tool_result, user,
        Chain, TestState,
    };
    use crate::render::view::{Block, Ts};

    fn lit(text: &Text) -> String {
        text.0
            .iter()
            .map(|p| match p {
                Piece::Lit(s) => s.clone(),
                Piece::ToolCallId(i) => format!("<id {i}>"),
                Piece::ToolName(i) => format!("<name {i}>"),
                Piece::ToolResultText(i) => format!("<text {i}>"),
                Piece::Wtf8(bytes) => format!("<wtf8 {:x?}>", JsStr::from_wtf8(bytes).to_utf16()),
            })
            .collect()
    }

    fn apply(
        msgs: &[MsgView],
        state: &TestState,
        strip: bool,
    ) -> (Option<Vec<Item>>, Vec<Diagnostic>) {
        let mut diags = Vec::new();
        let entries = state.chain_entries();
        let out = ok(apply_chain_compressions(
            msgs, None, &entries, state, strip, &mut diags,
        ));
        (out, diags)
    }

    fn synthetic(items: &[Item]) -> Vec<String> {
        items
            .iter()
            .filter_map(|it| match it {
                Item::Synthetic { text, .. } => Some(lit(text)),
                _ => None,
            })
            .collect()
    }

    /// The synthetic texts of `apply(msgs, state, strip)`'s items (none without a change).
    fn synthetic_of(msgs: &[MsgView], state: &TestState, strip: bool) -> Vec<String> {
        let (out, _) = apply(msgs, state, strip);
        synthetic(&out.unwrap_or_default())
    }

    /// user 100, assistant 200 (tc1), toolResult 300, final assistant 400.
    fn chain_msgs() -> Vec<MsgView> {
        vec![
            user(100.0),
            assistant(200.0, vec![tc("tc1")]),
            tool_result("tc1", 300.0),
            assistant(400.0, vec![Block::Thinking, Block::Other]),
        ]
    }

    fn example_state() -> TestState {
        TestState::default().body(&["tc1@300"], "S").chain(
            Chain::new("b1", 100.0, 400.0, 9000.0)
                .dropped(&["tc1"])
                .keys(&["tc1@300"])
                .refs(&["t1"]),
        )
    }

    #[test]
    fn worked_example_chain() {
        let (out, diags) = apply(&chain_msgs(), &example_state(), true);
        let items = out.unwrap_or_default();
        assert_eq!(items.len(), 3);
        assert_eq!(items[0], Item::Keep(0));
        assert_eq!(
            items[1],
            Item::Synthetic {
                text: Text(vec![Piece::Lit(
                    "<compressed-chain id=\"b1\" tools=\"t1\">\nS\n</compressed-chain>".into()
                )]),
                timestamp: JsField::Number(9000.0),
                chain_slot: 0
            }
        );
        assert_eq!(
            items[2],
            Item::Assistant {
                src: 3,
                purged: vec![],
                strip_thinking: true
            }
        );
        assert!(diags.is_empty());
    }

    #[test]
    fn final_thinking_kept_when_strip_is_off() {
        let (out, _) = apply(&chain_msgs(), &example_state(), false);
        assert_eq!(out.unwrap_or_default()[2], Item::Keep(3));
    }

    #[test]
    fn range_summary_text_is_preferred_even_when_empty() {
        let state = TestState::default().body(&["tc1@300"], "S").chain(
            Chain::new("b1", 100.0, 400.0, 9000.0)
                .keys(&["tc1@300"])
                .dropped(&["tc1"])
                .range_summary(""),
        );
        assert_eq!(
            synthetic_of(&chain_msgs(), &state, true),
            ["<compressed-chain id=\"b1\" tools=\"\">\n\n</compressed-chain>"]
        );
    }

    #[test]
    fn legacy_entry_uses_dropped_ids_as_body_keys() {
        let state = TestState::default()
            .body(&["tc1"], "LEGACY")
            .chain(Chain::new("b1", 100.0, 400.0, 9000.0).dropped(&["tc1"]));
        assert!(synthetic_of(&chain_msgs(), &state, true)[0].contains("\nLEGACY\n"));
    }

    #[test]
    fn resolve_range_is_fail_closed() {
        let entry_state = example_state();
        let entries = entry_state.chain_entries();
        let e = &entries[0];
        assert_eq!(
            resolve_range(e, &chain_msgs()),
            Some(Range { start: 0, end: 3 })
        );
        // Duplicate start user timestamp.
        let mut two_starts = chain_msgs();
        two_starts.push(user(100.0));
        assert_eq!(resolve_range(e, &two_starts), None);
        // Duplicate final assistant timestamp.
        let mut two_ends = chain_msgs();
        two_ends.push(assistant(400.0, vec![]));
        assert_eq!(resolve_range(e, &two_ends), None);
        // Missing final.
        assert_eq!(resolve_range(e, &chain_msgs()[..3]), None);
        // End before start.
        let reversed = vec![assistant(400.0, vec![]), user(100.0)];
        assert_eq!(resolve_range(e, &reversed), None);
        // A toolResult or custom message sharing a timestamp does not count.
        let mut shared = chain_msgs();
        shared.push(tool_result("z", 100.0));
        shared.push(custom(400.0));
        assert_eq!(resolve_range(e, &shared), Some(Range { start: 0, end: 3 }));
        // Null final timestamp.
        let mut null_final = (*e).clone();
        null_final.final_assistant_timestamp = JsField::Null;
        assert_eq!(resolve_range(&null_final, &chain_msgs()), None);
        // Strict equality: no string/number coercion.
        let mut odd = chain_msgs();
        odd[0].timestamp = Ts::Other;
        assert_eq!(resolve_range(e, &odd), None);
    }

    #[test]
    fn unresolved_entry_reports_and_changes_nothing() {
        let state = TestState::default().chain(Chain::new("b4", 100.0, 777.0, 1.0));
        let (out, diags) = apply(&chain_msgs(), &state, true);
        assert!(out.is_none());
        assert_eq!(diags.len(), 1);
        assert_eq!(diags[0].kind, DiagnosticKind::UnresolvedRange);
        assert_eq!(diags[0].dedup_key, "b4");
        assert_eq!(diags[0].detail, "blockId=b4 start=100 final=777");
        let null_final = Chain::new("b5", 100.0, 0.0, 1.0).final_ts(JsField::Null);
        let (_, diags) = apply(&chain_msgs(), &TestState::default().chain(null_final), true);
        assert_eq!(diags[0].detail, "blockId=b5 start=100 final=null");
    }

    #[test]
    fn nested_and_duplicate_ranges_are_skipped_with_diagnostics() {
        let msgs = vec![
            user(100.0),
            assistant(150.0, vec![tc("a")]),
            tool_result("a", 160.0),
            user(200.0),
            assistant(250.0, vec![tc("b")]),
            tool_result("b", 260.0),
            assistant(300.0, vec![]),
            assistant(400.0, vec![]),
        ];
        let state = TestState::default()
            .chain(Chain::new("b1", 100.0, 400.0, 1.0).dropped(&["a", "b"]))
            .chain(Chain::new("b2", 200.0, 300.0, 2.0).dropped(&["b"]));
        let (out, diags) = apply(&msgs, &state, false);
        let items = out.unwrap_or_default();
        assert_eq!(diags.len(), 1);
        assert_eq!(diags[0].dedup_key, "overlap:b2");
        assert_eq!(
            diags[0].detail,
            "blockId=b2 skipped: range nests inside blockId=b1"
        );
        // The nested user message survives inside the outer range.
        assert_eq!(items.len(), 4);
        assert_eq!(items[0], Item::Keep(0));
        assert!(matches!(items[1], Item::Synthetic { .. }));
        assert_eq!(items[2], Item::Keep(3));
        assert_eq!(items[3], Item::Keep(7));

        // Two entries with the same start resolve to the same slot.
        let mut dup_state =
            TestState::default().chain(Chain::new("b1", 100.0, 400.0, 1.0).dropped(&["a", "b"]));
        dup_state.chains.push(Chain::new("b3", 100.0, 300.0, 3.0).0);
        let (_, diags) = apply(&msgs, &dup_state, false);
        assert!(diags.iter().any(|d| d.dedup_key == "overlap:b3"
            && d.detail == "blockId=b3 skipped: range duplicates startIndex=0 already claimed"));
    }

    #[test]
    fn id_mismatch_is_diagnostic_only() {
        let state = TestState::default()
            .chain(Chain::new("b1", 100.0, 400.0, 9.0).dropped(&["zz@5", "tc1"]));
        let (out, diags) = apply(&chain_msgs(), &state, false);
        assert!(out.is_some());
        assert_eq!(diags.len(), 1);
        assert_eq!(diags[0].kind, DiagnosticKind::RangeIdMismatch);
        assert_eq!(diags[0].detail, "blockId=b1 recorded=2 actual=1");
        // Recorded occurrence keys compare by bare id.
        let state =
            TestState::default().chain(Chain::new("b1", 100.0, 400.0, 9.0).dropped(&["tc1@300"]));
        assert!(apply(&chain_msgs(), &state, false).1.is_empty());
    }

    #[test]
    fn role_restricted_drops_keep_user_and_foreign_custom_messages() {
        let mut msgs = chain_msgs();
        msgs.insert(2, custom(250.0));
        msgs.insert(2, user(240.0));
        msgs.insert(2, MsgView::new(Role::Other, Ts::Num(230.0)));
        let state =
            TestState::default().chain(Chain::new("b1", 100.0, 400.0, 9.0).dropped(&["tc1"]));
        let (out, _) = apply(&msgs, &state, false);
        let items = out.unwrap_or_default();
        let kept: Vec<Option<usize>> = items.iter().map(Item::src).collect();
        assert_eq!(kept, [Some(0), None, Some(2), Some(3), Some(4), Some(6)]);
    }

    #[test]
    fn per_batch_summaries_are_suppressed_by_coverage() {
        let mut msgs = chain_msgs();
        // agent-message batching: the summary sits after the final assistant.
        msgs.push(summary(500.0, &[("tc1", Some(300.0))]));
        // A live turn reusing the bare id keeps its own summary.
        msgs.push(summary(600.0, &[("tc1", Some(9999.0))]));
        // A summary covering calls in and out of the range is removed entirely.
        msgs.push(summary(
            700.0,
            &[("other", Some(1.0)), ("tc1", Some(300.0))],
        ));
        // Legacy ref without a timestamp: bare-id membership.
        msgs.push(summary(800.0, &[("tc1", None)]));
        // Legacy details.toolCallIds only: never suppressed.
        msgs.push(summary(900.0, &[]));
        let (out, _) = apply(&msgs, &example_state(), false);
        let kept: Vec<Option<usize>> = out.unwrap_or_default().iter().map(Item::src).collect();
        assert_eq!(kept, [Some(0), None, Some(3), Some(5), Some(8)]);
    }

    #[test]
    fn summary_inside_the_range_is_dropped_by_index() {
        let mut msgs = chain_msgs();
        msgs.insert(3, summary(350.0, &[("unrelated", Some(1.0))]));
        let (out, _) = apply(&msgs, &example_state(), false);
        let kept: Vec<Option<usize>> = out.unwrap_or_default().iter().map(Item::src).collect();
        assert_eq!(kept, [Some(0), None, Some(4)]);
    }

    #[test]
    fn existing_synthetic_is_not_inserted_twice() {
        // The rendered output of the worked example, rendered again.
        let msgs = vec![
            user(100.0),
            synthetic_user(9000.0, "b1"),
            assistant(400.0, vec![Block::Other]),
        ];
        let (out, diags) = apply(&msgs, &example_state(), true);
        let items = out.unwrap_or_default();
        assert_eq!(
            items,
            vec![
                Item::Keep(0),
                Item::Keep(1),
                Item::Assistant {
                    src: 2,
                    purged: vec![],
                    strip_thinking: true
                }
            ]
        );
        // The synthetic survives inside the range; recorded tc1 is no longer there.
        assert_eq!(diags.len(), 1);
        assert_eq!(diags[0].kind, DiagnosticKind::RangeIdMismatch);
    }

    #[test]
    fn protected_outputs_are_relocated_into_the_synthetic() {
        let msgs = vec![
            user(100.0),
            assistant(200.0, vec![tc("p1"), tc("x")]),
            tool_result("p1", 210.0),
            tool_result("x", 220.0),
            assistant(400.0, vec![]),
        ];
        let state = TestState::default().body(&["x@220"], "S").chain(
            Chain::new("b2", 100.0, 400.0, 5.0)
                .dropped(&["p1", "x"])
                .keys(&["x@220"])
                .refs(&["t7"])
                .protect(&["p1"]),
        );
        assert_eq!(
            synthetic_of(&msgs, &state, false),
            ["<compressed-chain id=\"b2\" tools=\"t7\">\nS\n\n<protected-output tool=\"<name 2>\">\n<text 2>\n</protected-output>\n</compressed-chain>"]
        );
    }

    #[test]
    fn stubbed_protected_output_relocates_the_stub_text() {
        let msgs = chain_msgs();
        let mut slots: Vec<Item> = (0..msgs.len()).map(Item::Keep).collect();
        slots[2] = Item::Stub {
            src: 2,
            text: Text(vec![Piece::Lit("STUB".into())]),
        };
        let state = TestState::default().chain(
            Chain::new("b1", 100.0, 400.0, 1.0)
                .dropped(&["tc1"])
                .protect(&["tc1"]),
        );
        let entries = state.chain_entries();
        let mut diags = Vec::new();
        let out = ok(apply_chain_compressions(
            &msgs,
            Some(&slots),
            &entries,
            &state,
            false,
            &mut diags,
        ));
        assert_eq!(
            synthetic(&out.unwrap_or_default()),
            ["<compressed-chain id=\"b1\" tools=\"\">\n\n\n<protected-output tool=\"<name 2>\">\nSTUB\n</protected-output>\n</compressed-chain>"]
        );
    }

    #[test]
    fn nested_placeholders_resolve_one_level_and_skip_self() {
        let msgs = vec![
            user(10.0),
            assistant(20.0, vec![]),
            user(100.0),
            assistant(200.0, vec![tc("tc1")]),
            tool_result("tc1", 300.0),
            assistant(400.0, vec![]),
        ];
        let state = TestState::default()
            .chain(Chain::new("b1", 1.0, 2.0, 1.0).range_summary("FIRST {b2}"))
            .chain(
                Chain::new("b2", 100.0, 400.0, 9.0)
                    .dropped(&["tc1"])
                    .range_summary("see {b1} and {b2} and {b3}"),
            );
        assert_eq!(
            synthetic_of(&msgs, &state, false),
            ["<compressed-chain id=\"b2\" tools=\"\">\nsee FIRST {b2} and {b2} and {b3}\n</compressed-chain>"]
        );
    }

    #[test]
    fn accepted_entry_always_yields_a_new_list() {
        // A range with nothing inside still counts as a change.
        let msgs = vec![user(100.0), assistant(400.0, vec![])];
        let state = TestState::default().chain(Chain::new("b1", 100.0, 400.0, 9.0));
        let (out, _) = apply(&msgs, &state, false);
        assert_eq!(out.map(|v| v.len()), Some(3));
    }

    #[test]
    fn two_disjoint_chains() {
        let msgs = reused_id_turns("bash_23", &[100.0, 200.0, 300.0]);
        let state = TestState::default()
            .body(&["bash_23@120"], "FIRST")
            .body(&["bash_23@220"], "SECOND")
            .chain(
                Chain::new("b1", 100.0, 130.0, 1.0)
                    .dropped(&["bash_23"])
                    .keys(&["bash_23@120"]),
            )
            .chain(
                Chain::new("b2", 200.0, 230.0, 2.0)
                    .dropped(&["bash_23"])
                    .keys(&["bash_23@220"]),
            );
        let (out, diags) = apply(&msgs, &state, false);
        let items = out.unwrap_or_default();
        assert!(diags.is_empty());
        assert_eq!(
            synthetic(&items),
            [
                "<compressed-chain id=\"b1\" tools=\"\">\nFIRST\n</compressed-chain>",
                "<compressed-chain id=\"b2\" tools=\"\">\nSECOND\n</compressed-chain>"
            ]
        );
        let kept: Vec<Option<usize>> = items.iter().map(Item::src).collect();
        assert_eq!(
            kept,
            [
                Some(0),
                None,
                Some(3),
                Some(4),
                None,
                Some(7),
                Some(8),
                Some(9),
                Some(10)
            ]
        );
    }

    #[test]
    fn throws_like_the_reference() {
        let state = example_state();
        let entries = state.chain_entries();
        let mut diags = Vec::new();
        // Stripping a final assistant whose content is not an array.
        let mut msgs = chain_msgs();
        msgs[3].content = Content::Str;
        assert_eq!(
            apply_chain_compressions(&msgs, None, &entries, &state, true, &mut diags),
            Err(Throw)
        );
        // ... is fine when not stripping.
        assert!(apply_chain_compressions(&msgs, None, &entries, &state, false, &mut diags).is_ok());
        // A non-iterable content inside the range.
        let mut msgs = chain_msgs();
        msgs[1].content = Content::Other;
        assert_eq!(
            apply_chain_compressions(&msgs, None, &entries, &state, false, &mut diags),
            Err(Throw)
        );
        // A string content inside the range iterates harmlessly.
        msgs[1].content = Content::Str;
        assert!(apply_chain_compressions(&msgs, None, &entries, &state, false, &mut diags).is_ok());
        // A summary whose toolCallRefs is not an array.
        let mut msgs = chain_msgs();
        let mut bad = custom(500.0);
        bad.summary = Some(Box::new(SummaryRefs::NotArray));
        msgs.push(bad);
        assert_eq!(
            apply_chain_compressions(&msgs, None, &entries, &state, false, &mut diags),
            Err(Throw)
        );
    }

    #[test]
    fn persisted_field_shapes() {
        // An absent final timestamp matches an assistant without a timestamp.
        let mut msgs = chain_msgs();
        msgs[3].timestamp = Ts::Absent;
        let state =
            TestState::default().chain(Chain::new("b1", 100.0, 0.0, 1.0).final_ts(JsField::Absent));
        let (out, diags) = apply(&msgs, &state, false);
        assert!(out.is_some());
        assert!(diags
            .iter()
            .all(|d| d.kind != DiagnosticKind::UnresolvedRange));
        // A string final timestamp never matches; the detail prints it raw.
        let state = TestState::default()
            .chain(Chain::new("b1", 100.0, 0.0, 1.0).final_ts(JsField::str("400")));
        let (out, diags) = apply(&chain_msgs(), &state, false);
        assert!(out.is_none());
        assert_eq!(diags[0].detail, "blockId=b1 start=100 final=400");
        // compressedAt is copied as persisted (a missing one omits the key).
        let mut chain = Chain::new("b1", 100.0, 400.0, 0.0);
        chain.0.compressed_at = JsField::Absent;
        let (out, _) = apply(&chain_msgs(), &TestState::default().chain(chain), false);
        assert!(out.unwrap_or_default().iter().any(|it| matches!(
            it,
            Item::Synthetic {
                timestamp: JsField::Absent,
                ..
            }
        )));
    }

    #[test]
    fn malformed_entries_throw_like_the_reference() {
        let mut diags = Vec::new();
        // toolRefs not an array: `.join` is not a function.
        let mut chain = Chain::new("b1", 100.0, 400.0, 1.0);
        chain.0.tool_refs = None;
        let state = TestState::default().chain(chain);
        let entries = state.chain_entries();
        assert_eq!(
            apply_chain_compressions(&chain_msgs(), None, &entries, &state, false, &mut diags),
            Err(Throw)
        );
        // Neither droppedOccurrenceKeys nor droppedToolCallIds is an array.
        let mut chain = Chain::new("b1", 100.0, 400.0, 1.0);
        chain.0.dropped_tool_call_ids = None;
        let state = TestState::default().chain(chain);
        let entries = state.chain_entries();
        assert_eq!(
            apply_chain_compressions(&chain_msgs(), None, &entries, &state, false, &mut diags),
            Err(Throw)
        );
        // A non-string recorded id: `bareToolCallId(5)` throws.
        let mut chain = Chain::new("b1", 100.0, 400.0, 1.0).range_summary("x");
        chain.0.dropped_tool_call_ids = Some(vec![JsField::Number(5.0)]);
        let state = TestState::default().chain(chain);
        let entries = state.chain_entries();
        assert_eq!(
            apply_chain_compressions(&chain_msgs(), None, &entries, &state, false, &mut diags),
            Err(Throw)
        );
    }

    /// A small deterministic generator (xorshift).
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n.max(1)
        }
    }

    /// Lists whose user and assistant timestamps repeat, go missing or are odd.
    fn random_msgs(rng: &mut Rng, len: usize) -> Vec<MsgView> {
        (0..len)
            .map(|_| {
                let ts = match rng.below(10) {
                    0 => Ts::Absent,
                    1 => Ts::Other,
                    2 => Ts::Num(f64::NAN),
                    3 => Ts::Num(-0.0),
                    _ => Ts::Num(rng.below(12) as f64),
                };
                let role = match rng.below(5) {
                    0 => Role::User,
                    1 | 2 => Role::Assistant,
                    3 => Role::ToolResult,
                    _ => Role::Custom,
                };
                MsgView::new(role, ts)
            })
            .collect()
    }

    #[test]
    fn id_mismatch_agrees_with_set_comparison() {
        let mut table = ChainFactsTable::new();
        let lists: [&[&str]; 4] = [&["a", "b", "c"], &[], &["a"], &["b", "a"]];
        for list in lists {
            table.push(&Chain::new("b1", 1.0, 2.0, 3.0).dropped(list).0);
        }
        let id_lists: [&[JsIdOf<&str>]; 9] = [
            &[
                JsIdOf::Str("a"),
                JsIdOf::Str("b"),
                JsIdOf::Str("a"),
                JsIdOf::Str("c"),
            ],
            &[JsIdOf::Str("a"), JsIdOf::Str("a")],
            &[],
            &[JsIdOf::Str("c"), JsIdOf::Str("b"), JsIdOf::Str("a")],
            &[
                JsIdOf::Str("a"),
                JsIdOf::Str("b"),
                JsIdOf::Str("c"),
                JsIdOf::Str("d"),
            ],
            &[JsIdOf::Str("b"), JsIdOf::Str("a"), JsIdOf::Str("b")],
            &[JsIdOf::Null],
            &[JsIdOf::Str("a"), JsIdOf::Null],
            &[JsIdOf::Str("a"), JsIdOf::Str("b")],
        ];
        let mut scratch = FastSet::default();
        for k in 0..table.len() {
            let recorded = table.get(k).and_then(|f| f.recorded);
            let Some(recorded) = recorded else {
                unreachable!()
            };
            for ids in id_lists {
                let actual: FastSet<JsIdOf<&str>> = ids.iter().copied().collect();
                let want: FastSet<JsIdOf<&str>> = recorded.iter().map(JsIdOf::Str).collect();
                let expected = (actual != want).then_some(actual.len());
                assert_eq!(
                    id_mismatch(ids, recorded, &mut scratch),
                    expected,
                    "{ids:?} vs {k}"
                );
                if ordered_match(ids, recorded) {
                    assert!(expected.is_none());
                }
            }
        }
        // In recorded order, a call then its result: decided without the set.
        let Some(recorded) = table.get(0).and_then(|f| f.recorded) else {
            unreachable!()
        };
        assert!(ordered_match(id_lists[0], recorded));
        assert!(!ordered_match(id_lists[3], recorded));
    }

    #[test]
    fn range_index_resolves_like_the_scan() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for round in 0..300 {
            let msgs = random_msgs(&mut rng, 1 + round % 40);
            let index = RangeIndex::new(&msgs);
            for _ in 0..20 {
                let final_ts = match rng.below(8) {
                    0 => JsField::Absent,
                    1 => JsField::Null,
                    2 => JsField::str("3"),
                    3 => JsField::Number(f64::NAN),
                    4 => JsField::Number(-0.0),
                    _ => JsField::Number(rng.below(12) as f64),
                };
                let start = match rng.below(6) {
                    0 => f64::NAN,
                    1 => -0.0,
                    _ => rng.below(12) as f64,
                };
                let entry = ChainEntry {
                    start_user_timestamp: start,
                    final_assistant_timestamp: final_ts,
                    ..ChainEntry::default()
                };
                assert_eq!(
                    index.resolve(&entry),
                    resolve_range(&entry, &msgs),
                    "entry {entry:?} over {msgs:?}"
                );
            }
        }
    }

    #[test]
    fn containers_find_a_holding_range_like_the_pairwise_check() {
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        for _ in 0..500 {
            let ranges: Vec<Range> = (0..rng.below(8))
                .map(|_| {
                    let start = rng.below(20) as usize;
                    Range {
                        start,
                        end: start + 1 + rng.below(10) as usize,
                    }
                })
                .collect();
            let containers = Containers::new(&ranges);
            for (k, range) in ranges.iter().enumerate() {
                let pairwise = ranges.iter().enumerate().any(|(j, other)| {
                    j != k && range.start > other.start && range.start < other.end
                });
                assert_eq!(containers.any_holds(range.start), pairwise, "{ranges:?}");
            }
        }
    }

    #[test]
    fn indexed_summary_bodies_give_the_scanned_text() {
        let mut rng = Rng(0x1234_5678_9abc_def1);
        let keys = ["a@1", "b@2", "c@3", "d", "e@5", "f@6"];
        for _ in 0..200 {
            let mut state = TestState::default();
            for _ in 0..rng.below(6) {
                let body_keys: Vec<&str> = (0..rng.below(3))
                    .map(|_| keys[rng.below(keys.len() as u64) as usize])
                    .collect();
                let text = ["S1", "S2", "S3"][rng.below(3) as usize];
                state = state.body(&body_keys, text);
            }
            let entry_keys: Vec<&str> = (0..rng.below(4))
                .map(|_| keys[rng.below(keys.len() as u64) as usize])
                .collect();
            let mut chain = Chain::new("b1", 1.0, 2.0, 3.0).dropped(&entry_keys);
            if rng.below(2) == 0 {
                chain = chain.keys(&entry_keys);
            }
            if rng.below(5) == 0 {
                chain = chain.range_summary("R");
            }
            let state = state.chain(chain);
            let entries = state.chain_entries();
            let Some(entry) = entries.first().copied() else {
                continue;
            };
            let scanned = state.chain_summary_text(entry);
            let mut summaries = Summaries::new(&state, &entries);
            let indexed = summaries.text(entry).map(|t| t.into_owned());
            assert_eq!(indexed, scanned);
        }
    }

    #[test]
    fn opaque_bodies_are_read_through_the_state() {
        let mut state = example_state();
        state.opaque_bodies = true;
        assert_eq!(
            synthetic_of(&chain_msgs(), &state, true),
            ["<compressed-chain id=\"b1\" tools=\"t1\">\nS\n</compressed-chain>"]
        );
    }
}

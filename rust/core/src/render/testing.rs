//! Test helpers: message views and an in-memory [`RenderState`].

use std::collections::{HashMap, HashSet};

use super::state::RenderState;
use super::{Lazy, Throw};
use crate::index::{ChainEntry, Record, SummaryBody};
use crate::js::JsField;
use crate::jsstr::JsStr;
use crate::view::{Block, Content, JsId, MsgView, Role, SummaryRef, SummaryRefs, Ts};

pub fn user(ts: f64) -> MsgView {
    MsgView::new(Role::User, Ts::Num(ts))
}

pub fn synthetic_user(ts: f64, block_id: &str) -> MsgView {
    let mut m = user(ts);
    m.synthetic_block_id = Some(block_id.into());
    m
}

pub fn assistant(ts: f64, blocks: Vec<Block>) -> MsgView {
    let mut m = MsgView::new(Role::Assistant, Ts::Num(ts));
    m.content = Content::Array(blocks.into());
    m
}

pub fn tc(id: &str) -> Block {
    Block::ToolCall { id: JsId::str(id) }
}

pub fn tool_result(id: &str, ts: f64) -> MsgView {
    let mut m = MsgView::new(Role::ToolResult, Ts::Num(ts));
    m.tool_call_id = JsId::str(id);
    m
}

/// Turns that each call the tool `id` again (the id-collision shape): per start `t`, user `t`,
/// assistant `t + 10` calling `id`, its result at `t + 20`, then (but for the last turn) a
/// final assistant at `t + 30`.
pub fn reused_id_turns(id: &str, starts: &[f64]) -> Vec<MsgView> {
    let mut msgs = Vec::with_capacity(starts.len() * 4);
    for (i, &t) in starts.iter().enumerate() {
        if i > 0 {
            msgs.push(assistant(starts[i - 1] + 30.0, vec![]));
        }
        msgs.push(user(t));
        msgs.push(assistant(t + 10.0, vec![tc(id)]));
        msgs.push(tool_result(id, t + 20.0));
    }
    msgs
}

pub fn errored(id: &str, ts: f64) -> MsgView {
    let mut m = tool_result(id, ts);
    m.is_error = true;
    m
}

pub fn custom(ts: f64) -> MsgView {
    MsgView::new(Role::Custom, Ts::Num(ts))
}

/// A summary message whose refs are `(toolCallId, resultTimestamp)`.
pub fn summary(ts: f64, refs: &[(&str, Option<f64>)]) -> MsgView {
    let mut m = custom(ts);
    m.summary = Some(Box::new(SummaryRefs::List(
        refs.iter()
            .map(|(id, rts)| SummaryRef::Ref {
                tool_call_id: JsId::str(id),
                result_timestamp: rts.map(crate::js::format_number),
            })
            .collect(),
    )));
    m
}

/// A record of `tool` (no path, not spilled).
pub fn rec(tool: &str) -> Record {
    Record {
        tool_name: JsField::str(tool),
        ..Record::default()
    }
}

/// A record whose `args.path` is `path`.
pub fn rec_at(tool: &str, path: &str) -> Record {
    Record {
        args_path: Some(path.to_owned()),
        ..rec(tool)
    }
}

/// A spilled record.
pub fn spilled(tool: &str, path: &str, bytes: Option<f64>, preview: Option<&str>) -> Record {
    Record {
        spill_path: JsField::str(path),
        spill_bytes: bytes.map_or(JsField::Absent, JsField::Number),
        result_preview: preview.map_or(JsField::Absent, JsField::str),
        ..rec(tool)
    }
}

fn fields(items: &[&str]) -> Vec<JsField> {
    items.iter().map(|s| JsField::str(*s)).collect()
}

/// Builder of a chain registry entry.
#[derive(Clone)]
pub struct Chain(pub ChainEntry);

impl Chain {
    pub fn new(block_id: &str, start: f64, end: f64, compressed_at: f64) -> Self {
        Chain(ChainEntry {
            block_id: JsField::str(block_id),
            start_user_timestamp: start,
            final_assistant_timestamp: JsField::Number(end),
            dropped_tool_call_ids: Some(Vec::new()),
            tool_refs: Some(Vec::new()),
            compressed_at: JsField::Number(compressed_at),
            ..ChainEntry::default()
        })
    }

    pub fn dropped(mut self, ids: &[&str]) -> Self {
        self.0.dropped_tool_call_ids = Some(fields(ids));
        self
    }

    pub fn keys(mut self, keys: &[&str]) -> Self {
        self.0.dropped_occurrence_keys = Some(fields(keys));
        self
    }

    pub fn refs(mut self, refs: &[&str]) -> Self {
        self.0.tool_refs = Some(fields(refs));
        self
    }

    pub fn range_summary(mut self, text: &str) -> Self {
        self.0.range_summary_text = JsField::str(text);
        self
    }

    pub fn protect(mut self, ids: &[&str]) -> Self {
        self.0.protected_tool_call_ids = Some(fields(ids));
        self
    }

    pub fn final_ts(mut self, value: JsField) -> Self {
        self.0.final_assistant_timestamp = value;
        self
    }
}

/// A mock indexer: records by key, legacy bare ids, aliases, refs, bodies, chains.
#[derive(Default)]
pub struct TestState {
    pub records: HashMap<String, Record>,
    pub aliases: HashMap<String, String>,
    pub legacy: HashSet<String>,
    pub refs: HashMap<String, String>,
    pub bodies: Vec<SummaryBody>,
    /// Hide the bodies from render's key index (it then calls `chain_summary_text`).
    pub opaque_bodies: bool,
    pub chains: Vec<ChainEntry>,
}

impl TestState {
    pub fn record(mut self, key: &str, rec: Record) -> Self {
        self.records.insert(key.to_owned(), rec);
        self
    }

    pub fn short_ref_of(mut self, key: &str, short: &str) -> Self {
        self.refs.insert(key.to_owned(), short.to_owned());
        self
    }

    pub fn legacy(mut self, id: &str, rec: Record) -> Self {
        self.legacy.insert(id.to_owned());
        self.records.insert(id.to_owned(), rec);
        self
    }

    pub fn alias(mut self, dup: &str, original: &str) -> Self {
        self.aliases.insert(dup.to_owned(), original.to_owned());
        self
    }

    pub fn body(mut self, keys: &[&str], text: &str) -> Self {
        self.bodies.push(SummaryBody {
            keys: keys.iter().map(|s| (*s).to_owned()).collect(),
            text: text.into(),
        });
        self
    }

    pub fn chain(mut self, chain: Chain) -> Self {
        let mut entry = chain.0;
        entry.slot = self.chains.len();
        self.chains.push(entry);
        self
    }

    fn per_batch_summary_text(&self, keys: &[&str]) -> String {
        let mut texts: Vec<&str> = Vec::new();
        for body in &self.bodies {
            if body.keys.iter().any(|k| keys.contains(&k.as_str()))
                && !texts.contains(&body.text.as_str())
            {
                texts.push(body.text.as_str());
            }
        }
        texts.join("\n\n")
    }
}

impl RenderState for TestState {
    fn is_summarized(&self, key: &str) -> bool {
        self.records.contains_key(key) || self.aliases.contains_key(key)
    }

    fn has_legacy_bare_record(&self, id: &str) -> bool {
        self.legacy.contains(id)
    }

    fn record(&self, key: &str) -> Option<&Record> {
        let key = self.aliases.get(key).map_or(key, String::as_str);
        self.records.get(key)
    }

    fn short_ref(&self, key: &str) -> Option<&str> {
        self.refs.get(key).map(String::as_str)
    }

    fn chain_entries(&self) -> Vec<&ChainEntry> {
        let mut out: Vec<&ChainEntry> = self.chains.iter().collect();
        out.sort_by(|a, b| a.start_user_timestamp.total_cmp(&b.start_user_timestamp));
        out
    }

    fn chain_entry_by_block_id(&self, block_id: &str) -> Option<&ChainEntry> {
        self.chains
            .iter()
            .find(|c| c.block_id.as_str() == Some(block_id))
    }

    fn chain_at(&self, slot: usize) -> Option<&ChainEntry> {
        self.chains.get(slot)
    }

    fn chain_registered(&self, slot: usize) -> Option<bool> {
        // Every entry is registered.
        Some(slot < self.chains.len())
    }

    fn summary_bodies(&self) -> Option<&[SummaryBody]> {
        (!self.opaque_bodies).then_some(self.bodies.as_slice())
    }

    fn chain_summary_text(&self, entry: &ChainEntry) -> Option<JsStr> {
        if !entry.range_summary_text.is_nullish() {
            return Some(entry.range_summary_text.js_string().into());
        }
        let keys: Vec<&str> = entry
            .summary_keys()?
            .iter()
            .filter_map(JsField::as_str)
            .collect();
        Some(self.per_batch_summary_text(&keys).into())
    }
}

/// Argument lengths by (message, block); 1000 when not listed; blocks in the second
/// set have no `arguments`, those in the third hold no string the purge shortens.
#[derive(Default)]
pub struct Lens(
    pub HashMap<(usize, usize), usize>,
    pub HashSet<(usize, usize)>,
    pub HashSet<(usize, usize)>,
);

impl Lazy for Lens {
    fn args_len(&mut self, msg: usize, block: usize) -> Option<usize> {
        if self.1.contains(&(msg, block)) {
            return None;
        }
        Some(self.0.get(&(msg, block)).copied().unwrap_or(1000))
    }

    fn args_shrink(&mut self, msg: usize, block: usize) -> bool {
        !self.2.contains(&(msg, block))
    }
}

pub fn ok<T>(r: Result<T, Throw>) -> T {
    match r {
        Ok(v) => v,
        Err(Throw) => panic!("unexpected throw"),
    }
}

//! `pi_condense._core.Index`: the pruner index as a Python class.
//!
//! Reconstruction reads the branch's entry dicts directly (only the fields the index needs) and
//! feeds them to `pi_condense_core::index::Replay`. Records and chain entries stay the caller's
//! Python objects (a record's result text can be large and may hold lone surrogates): the core
//! keeps light views with a `slot`, and this class maps slots back to the original objects.
//!
//! Rust callers (the render binding) borrow the class and use [`PyIndex::core`] for decisions
//! and [`PyIndex::record_object`] / [`PyIndex::chain_object`] for the original objects.

use pi_condense_core::index::reconstruct::{AliasData, ReplayRecord};
use pi_condense_core::index::{
    ChainEntry, EntryKind, HashSeed, Index, JsField, Occurrence, Record, Replay, STATE_ENTRY_TYPES,
};
use pi_condense_core::keys::{VerdictMemo, hash_tool_result};
use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;

mod read;

use pi_condense_core::index::entries::{self, SummaryText};

use crate::cpython::{Obj, prefetch, prefetch_body};
use crate::jsread::{js_number, str_is_bound, text as text_of};
use crate::pystr::{js_str_of, key_of, key_to_py, keys_to_py, str_of_js};
use pyo3::types::{PyBool, PyDict, PyList, PyString};
use pyo3::{IntoPyObjectExt, intern};
use read::{Entry, field, js_truthy, key_field};

/// The pruner index (records, short refs, dedup aliases, summary bodies, chain registry) plus
/// the frontier / stats data picked during reconstruction.
#[pyclass(name = "Index", module = "pi_condense._core")]
pub struct PyIndex {
    core: Index,
    /// Names this index object (`crate::stamp`); with the core's revision, one state of it.
    instance: u64,
    /// Record objects by `Record::slot`.
    records: Vec<PyObject>,
    /// Chain entry objects by `ChainEntry::slot`.
    chains: Vec<PyObject>,
    /// Summary body texts (original `str` objects) by body position.
    bodies: Vec<PyObject>,
    /// `(String(toolName), resultText)` of deferred hash seeds, by handle.
    deferred: Vec<(String, Py<PyString>)>,
    frontier: Option<PyObject>,
    stats: Option<PyObject>,
}

impl PyIndex {
    fn empty() -> Self {
        PyIndex {
            core: Index::new(),
            instance: crate::stamp::fresh(),
            records: Vec::new(),
            chains: Vec::new(),
            bodies: Vec::new(),
            deferred: Vec::new(),
            frontier: None,
            stats: None,
        }
    }

    /// The core index: every lookup of `pi_condense_core::index::Index` (`&self`).
    pub(crate) fn core(&self) -> &Index {
        &self.core
    }

    /// Names this index object (never reused in the process): with
    /// `core().revision()`, the state a render was made against.
    pub(crate) fn instance(&self) -> u64 {
        self.instance
    }

    /// The original record object (a dict) of a core record.
    pub(crate) fn record_object<'py>(&self, py: Python<'py>, record: &Record) -> Bound<'py, PyAny> {
        match self.records.get(record.slot) {
            Some(obj) => obj.bind(py).clone(),
            None => py.None().into_bound(py),
        }
    }

    /// The original entry object (`data` of the chain entry, a dict) of a core chain entry.
    pub(crate) fn chain_object<'py>(
        &self,
        py: Python<'py>,
        entry: &ChainEntry,
    ) -> Bound<'py, PyAny> {
        match self.chains.get(entry.slot) {
            Some(obj) => obj.bind(py).clone(),
            None => py.None().into_bound(py),
        }
    }

    /// The original text object of summary body `position` (see
    /// `Index::per_batch_summary_indices`); exact even when the text holds lone surrogates.
    pub(crate) fn summary_text_object<'py>(
        &self,
        py: Python<'py>,
        position: usize,
    ) -> Bound<'py, PyAny> {
        match self.bodies.get(position) {
            Some(obj) => obj.bind(py).clone(),
            None => py.None().into_bound(py),
        }
    }

    /// Applies the queued dedup-hash seeds (hashing deferred result texts now).
    fn resolve_seeds(&mut self, py: Python<'_>) {
        if self.core.pending_hash_seeds() == 0 {
            return;
        }
        let deferred = std::mem::take(&mut self.deferred);
        self.core.resolve_hash_seeds(|handle| {
            let (tool_name, text) = deferred.get(handle)?;
            let text = text_of(text.bind(py));
            Some(hash_tool_result(tool_name, &text))
        });
    }

    /// Reads a record dict: the core view plus its hash seed (`contentHash ?? hash(toolName,
    /// resultText)`, deferred). `None` for a non-dict or a record without a string id.
    fn read_record(&mut self, obj: &Bound<'_, PyAny>) -> PyResult<Option<ReplayRecord>> {
        let Ok(dict) = obj.downcast::<PyDict>() else {
            return Ok(None);
        };
        let py = obj.py();
        let Some(id) = dict.get_item(intern!(py, "toolCallId"))? else {
            return Ok(None);
        };
        let Ok(id) = id.downcast::<PyString>() else {
            return Ok(None);
        };
        let args_path = match dict.get_item(intern!(py, "args"))? {
            Some(args) => match args.downcast::<PyDict>() {
                Ok(args) => match args.get_item(intern!(py, "path"))? {
                    Some(p) => p.downcast::<PyString>().ok().map(text_of),
                    None => None,
                },
                Err(_) => None,
            },
            None => None,
        };
        let record = Record {
            tool_call_id: key_of(id)?,
            tool_name: field(dict, intern!(py, "toolName"))?,
            args_path,
            result_timestamp: field(dict, intern!(py, "resultTimestamp"))?,
            timestamp: field(dict, intern!(py, "timestamp"))?,
            turn_index: field(dict, intern!(py, "turnIndex"))?,
            is_error: field(dict, intern!(py, "isError"))?,
            spill_path: field(dict, intern!(py, "spillPath"))?,
            spill_bytes: field(dict, intern!(py, "spillBytes"))?,
            result_preview: field(dict, intern!(py, "resultPreview"))?,
            key: String::new(),
            slot: 0,
            protection: VerdictMemo::default(),
        };
        let seed = match dict.get_item(intern!(py, "contentHash"))? {
            Some(h) if !h.is_none() => h
                .downcast::<PyString>()
                .ok()
                .map(|h| HashSeed::Known(text_of(h))),
            _ => match dict.get_item(intern!(py, "resultText"))? {
                Some(text) => match text.downcast_into::<PyString>() {
                    Ok(text) => {
                        self.deferred
                            .push((record.tool_name.js_string(), text.unbind()));
                        Some(HashSeed::Deferred(self.deferred.len() - 1))
                    }
                    Err(_) => None,
                },
                None => None,
            },
        };
        self.records.push(obj.clone().unbind());
        Ok(Some((record, seed)))
    }

    /// Reads the records of a list, pushing their objects in slot order.
    fn read_records(&mut self, list: &Bound<'_, PyAny>) -> PyResult<Vec<ReplayRecord>> {
        let mut out = Vec::new();
        for item in list.try_iter()? {
            if let Some(r) = self.read_record(&item?)? {
                out.push(r);
            }
        }
        Ok(out)
    }

    fn replay_entry(
        &mut self,
        replay: &mut Replay,
        position: usize,
        entry: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let Ok(entry) = entry.downcast::<PyDict>() else {
            return Ok(());
        };
        let py = entry.py();
        let kind = {
            // Only `custom` and `custom_message` entries can be the pruner's: the others (most
            // of a branch) are told apart by their `type` alone.
            let entry_type = entry.get_item(intern!(py, "type"))?;
            let entry_type = STATE_ENTRY_TYPES
                .into_iter()
                .find(|t| str_is_bound(entry_type.as_ref(), t));
            if entry_type.is_none() {
                return Ok(());
            }
            let custom_type = entry.get_item(intern!(py, "customType"))?;
            let custom_type = custom_type
                .as_ref()
                .and_then(|t| t.downcast::<PyString>().ok())
                .map(text_of);
            pi_condense_core::index::classify(entry_type, custom_type.as_deref())
        };
        if kind == EntryKind::Other {
            return Ok(());
        }
        if kind == EntryKind::Summary {
            let details = entry.get_item(intern!(py, "details"))?.map(Entry);
            let refs = entries::normalized_summary_refs(details.as_ref())?;
            let content = entry.get_item(intern!(py, "content"))?.map(Entry);
            let (text, text_obj) = match entries::summary_text(content.as_ref())? {
                SummaryText::Content(text) => (text, content.map(|c| c.0.unbind())),
                SummaryText::Joined(text) => (text, None),
            };
            let text_obj = match text_obj {
                Some(obj) => obj,
                None => str_of_js(py, &text)?.into_any().unbind(),
            };
            if replay.summary_entry(&refs, text) {
                self.bodies.push(text_obj);
            }
            return Ok(());
        }
        let data = entry.get_item(intern!(py, "data"))?;
        match kind {
            EntryKind::Index => {
                // The reference reads `data.backfilled` before checking `data` (it throws on a
                // data-less entry); such an entry is skipped here.
                let Some(data) = data else { return Ok(()) };
                let Ok(data) = data.downcast::<PyDict>() else {
                    return Ok(());
                };
                let backfilled = data
                    .get_item(intern!(py, "backfilled"))?
                    .is_some_and(|b| b.downcast::<PyBool>().is_ok_and(|b| b.is_true()));
                let records = match data.get_item(intern!(py, "toolCalls"))? {
                    Some(list) if list.is_instance_of::<PyList>() => self.read_records(&list)?,
                    _ => Vec::new(),
                };
                let refs = match data.get_item(intern!(py, "refs"))? {
                    Some(list) if backfilled && list.is_instance_of::<PyList>() => {
                        Some(entries::raw_refs(list.try_iter()?.map(|r| r.map(Entry)))?)
                    }
                    _ => None,
                };
                replay.index_entry(records, backfilled, refs.as_deref());
            }
            EntryKind::Chain => {
                let Some(data) = data else { return Ok(()) };
                let Ok(dict) = data.downcast::<PyDict>() else {
                    return Ok(());
                };
                if let Some(chain) = entries::read_chain(&Entry(dict.clone().into_any()))?
                    && replay.chain_entry(chain)
                {
                    self.chains.push(data.clone().unbind());
                }
            }
            EntryKind::DedupAlias => {
                let Some(data) = data else { return Ok(()) };
                let Ok(dict) = data.downcast::<PyDict>() else {
                    return Ok(());
                };
                replay.alias_entry(&AliasData {
                    new_tool_call_id: key_field(dict, intern!(py, "newToolCallId"))?,
                    new_result_timestamp: field(dict, intern!(py, "newResultTimestamp"))?,
                    original_tool_call_id: key_field(dict, intern!(py, "originalToolCallId"))?,
                    original_result_timestamp: field(dict, intern!(py, "originalResultTimestamp"))?,
                });
            }
            EntryKind::Frontier => {
                let Some(data) = data else { return Ok(()) };
                let last = match data.downcast::<PyDict>() {
                    Ok(dict) => field(dict, intern!(py, "lastAttemptedToolCallId"))?,
                    Err(_) => JsField::Absent,
                };
                if replay.frontier_entry(position, js_truthy(&data)?, &last) {
                    self.frontier = Some(data.unbind());
                }
            }
            EntryKind::Stats => {
                let Some(data) = data else { return Ok(()) };
                if replay.stats_entry(position, js_truthy(&data)?) {
                    self.stats = Some(data.unbind());
                }
            }
            EntryKind::Summary | EntryKind::Other => {}
        }
        Ok(())
    }
}

// ----- value extraction -----

/// A JS number as Python: an int when integral and exactly representable, else a float.
fn number_to_py(py: Python<'_>, x: f64) -> PyResult<PyObject> {
    const MAX_SAFE: f64 = 9_007_199_254_740_992.0;
    if x.is_finite() && x.fract() == 0.0 && x.abs() <= MAX_SAFE {
        // Integral and within +-2^53: the cast is exact.
        return (x as i64).into_py_any(py);
    }
    x.into_py_any(py)
}

/// The key forms of a sequence of ids or keys (see `pystr::key_of`).
fn keys_of(seq: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    let mut out = Vec::new();
    for item in seq.try_iter()? {
        let item = item?;
        let s = item.downcast::<PyString>()?;
        out.push(key_of(s)?);
    }
    Ok(out)
}

/// One `(keys, text)` item of `Index.summary_bodies()`.
type SummaryBodyItem<'py> = (Vec<Bound<'py, PyString>>, Bound<'py, PyAny>);

// ----- Python API -----

#[pymethods]
impl PyIndex {
    /// An empty index.
    #[new]
    fn py_new() -> Self {
        PyIndex::empty()
    }

    /// Rebuilds the index from a branch (root-first entry dicts) as the reference's
    /// reconstruction does; also picks the frontier and stats data in effect.
    #[staticmethod]
    fn from_entries(entries: &Bound<'_, PyAny>) -> PyResult<Self> {
        let mut this = PyIndex::empty();
        let mut replay = Replay::new();
        if let Ok(list) = entries.downcast_exact::<PyList>() {
            // A branch is thousands of dicts scattered over the heap, most of them read for
            // their `type` alone: the ones a few steps ahead are fetched while this one is
            // read. Each step asks the list again (a lookup below may run Python code that
            // changes it) and holds its entry.
            let mut position = 0;
            while let Ok(entry) = list.get_item(position) {
                prefetch_entry(list, position + PREFETCH_AHEAD);
                this.replay_entry(&mut replay, position, &entry)?;
                position += 1;
            }
        } else {
            for (position, entry) in entries.try_iter()?.enumerate() {
                this.replay_entry(&mut replay, position, &entry?)?;
            }
        }
        this.core = replay.finish().index;
        this.instance = crate::stamp::fresh();
        Ok(this)
    }

    // ----- lookups -----

    /// `isSummarized(key)`: strict occurrence-key lookup (index or dedup alias).
    fn is_summarized(&self, key: &Bound<'_, PyString>) -> PyResult<bool> {
        Ok(self.core.is_summarized(&key_of(key)?))
    }

    /// `hasLegacyBareRecord(id)`: a pure-legacy bare id.
    fn has_legacy_bare_record(&self, tool_call_id: &Bound<'_, PyString>) -> PyResult<bool> {
        Ok(self.core.has_legacy_bare_record(&key_of(tool_call_id)?))
    }

    /// `resolveToolCallId(x)`: the key a key / dedup alias / short ref / unambiguous bare id
    /// denotes.
    fn resolve<'py>(
        &self,
        id_or_ref: &Bound<'py, PyString>,
    ) -> PyResult<Option<Bound<'py, PyString>>> {
        let py = id_or_ref.py();
        self.core
            .resolve(&key_of(id_or_ref)?)
            .map(|k| key_to_py(py, k))
            .transpose()
    }

    /// `getRecord(x)`: the record object (not a copy).
    fn get_record<'py>(
        &self,
        py: Python<'py>,
        id_or_ref: &Bound<'py, PyString>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        Ok(self
            .core
            .get_record(&key_of(id_or_ref)?)
            .map(|r| self.record_object(py, r)))
    }

    /// `lookupToolCalls(ids)`.
    fn lookup_records<'py>(
        &self,
        py: Python<'py>,
        ids: &Bound<'py, PyAny>,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let ids = keys_of(ids)?;
        Ok(self
            .core
            .lookup_records(&ids)
            .into_iter()
            .map(|r| self.record_object(py, r))
            .collect())
    }

    /// `getRecordsForId(x)`: dedup-alias occurrences are shallow copies carrying the alias's
    /// own `resultTimestamp` (removed for a legacy alias).
    fn records_for_id<'py>(
        &self,
        py: Python<'py>,
        id_or_ref: &Bound<'py, PyString>,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let mut out = Vec::new();
        for occ in self.core.records_for_id(&key_of(id_or_ref)?) {
            let obj = self.record_object(py, occ.record());
            match occ {
                Occurrence::Record(_) => out.push(obj),
                Occurrence::Alias {
                    result_timestamp, ..
                } => {
                    let copy = obj.downcast::<PyDict>()?.copy()?;
                    let key = intern!(py, "resultTimestamp");
                    match result_timestamp {
                        Some(ts) => copy.set_item(key, number_to_py(py, ts)?)?,
                        None => {
                            if copy.contains(key)? {
                                copy.del_item(key)?;
                            }
                        }
                    }
                    out.push(copy.into_any());
                }
            }
        }
        Ok(out)
    }

    /// `getShortRefForToolCallId(key)`.
    fn short_ref<'py>(&self, key: &Bound<'py, PyString>) -> PyResult<Option<Bound<'py, PyString>>> {
        let py = key.py();
        self.core
            .short_ref(&key_of(key)?)
            .map(|k| key_to_py(py, k))
            .transpose()
    }

    /// The key a short ref denotes.
    fn key_for_short_ref<'py>(
        &self,
        short_id: &Bound<'py, PyString>,
    ) -> PyResult<Option<Bound<'py, PyString>>> {
        let py = short_id.py();
        self.core
            .key_for_short_ref(&key_of(short_id)?)
            .map(|k| key_to_py(py, k))
            .transpose()
    }

    /// `getToolRefsForToolCallIds(keys)` (may repeat a ref: dedup aliases share it).
    fn tool_refs_for<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'py, PyAny>,
    ) -> PyResult<Vec<Bound<'py, PyString>>> {
        let keys = keys_of(keys)?;
        keys_to_py(py, self.core.tool_refs_for(&keys))
    }

    /// `hasPerBatchSummaryCoveringAny(keys)`.
    fn has_summary_covering_any(&self, keys: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.core.has_summary_covering_any(&keys_of(keys)?))
    }

    /// `getPerBatchSummariesForToolCallIds(keys)` (the original text objects).
    fn per_batch_summaries<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'py, PyAny>,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let keys = keys_of(keys)?;
        Ok(self
            .core
            .per_batch_summary_indices(&keys)
            .into_iter()
            .map(|i| self.summary_text_object(py, i))
            .collect())
    }

    /// `getPerBatchSummaryTextForToolCallIds(keys)`.
    fn per_batch_summary_text<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let texts = self.per_batch_summaries(py, keys)?;
        PyString::new(py, "\n\n").call_method1(intern!(py, "join"), (texts,))
    }

    /// `getChainEntries()`: chain entry objects sorted by `startUserTimestamp`.
    fn chain_entries<'py>(&self, py: Python<'py>) -> Vec<Bound<'py, PyAny>> {
        self.core
            .chain_entries()
            .into_iter()
            .map(|e| self.chain_object(py, e))
            .collect()
    }

    /// `findChainEntryByBlockId(b)`.
    fn find_chain_by_block_id<'py>(
        &self,
        py: Python<'py>,
        block_id: &Bound<'py, PyString>,
    ) -> Option<Bound<'py, PyAny>> {
        // Block ids compare by their lossy text, on both sides (they are `bN` in practice).
        self.core
            .find_chain_by_block_id(&text_of(block_id))
            .map(|e| self.chain_object(py, e))
    }

    /// `lookupByContent(toolName, resultText)`: the canonical key with the same content hash.
    fn lookup_by_content<'py>(
        &mut self,
        py: Python<'py>,
        tool_name: &Bound<'_, PyString>,
        result_text: &Bound<'_, PyString>,
    ) -> PyResult<Option<Bound<'py, PyString>>> {
        self.resolve_seeds(py);
        let hash = hash_tool_result(&text_of(tool_name), &text_of(result_text));
        self.core
            .lookup_by_content(&hash)
            .map(|k| key_to_py(py, k))
            .transpose()
    }

    /// The original key of a dedup alias key.
    fn original_of<'py>(
        &self,
        alias_key: &Bound<'py, PyString>,
    ) -> PyResult<Option<Bound<'py, PyString>>> {
        let py = alias_key.py();
        self.core
            .original_of(&key_of(alias_key)?)
            .map(|k| key_to_py(py, k))
            .transpose()
    }

    /// The current record objects in key insertion order (`getIndex().values()`).
    fn records<'py>(&self, py: Python<'py>) -> Vec<Bound<'py, PyAny>> {
        self.core
            .records()
            .map(|r| self.record_object(py, r))
            .collect()
    }

    /// The indexed occurrence keys in insertion order.
    fn keys<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyString>>> {
        keys_to_py(py, self.core.records().map(|r| r.key.as_str()))
    }

    /// The keys indexed under a bare id.
    fn keys_for_bare_id<'py>(
        &self,
        tool_call_id: &Bound<'py, PyString>,
    ) -> PyResult<Vec<Bound<'py, PyString>>> {
        keys_to_py(
            tool_call_id.py(),
            self.core.keys_for_bare_id(&key_of(tool_call_id)?),
        )
    }

    /// Dedup aliases `(aliasKey, originalKey)` in insertion order.
    fn aliases<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<Vec<(Bound<'py, PyString>, Bound<'py, PyString>)>> {
        self.core
            .aliases()
            .map(|(a, o)| Ok((key_to_py(py, a)?, key_to_py(py, o)?)))
            .collect()
    }

    /// Registered short refs `(shortId, key)` in first-registration order.
    fn short_refs<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<Vec<(Bound<'py, PyString>, Bound<'py, PyString>)>> {
        self.core
            .short_refs()
            .map(|(s, k)| Ok((key_to_py(py, s)?, key_to_py(py, k)?)))
            .collect()
    }

    /// Summary bodies `(keys, text)` in append order.
    fn summary_bodies<'py>(&self, py: Python<'py>) -> PyResult<Vec<SummaryBodyItem<'py>>> {
        self.core
            .summary_bodies()
            .iter()
            .enumerate()
            .map(|(i, b)| Ok((keys_to_py(py, &b.keys)?, self.summary_text_object(py, i))))
            .collect()
    }

    /// The summary bodies `(keys, text)` whose keys are exactly `keys` (compared as JS
    /// strings), in append order.
    fn summary_bodies_with_keys<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'py, PyAny>,
    ) -> PyResult<Vec<SummaryBodyItem<'py>>> {
        let bodies = self.core.summary_bodies();
        self.core
            .summary_bodies_with_keys(&keys_of(keys)?)
            .into_iter()
            .filter_map(|i| bodies.get(i).map(|body| (i, body)))
            .map(|(i, b)| Ok((keys_to_py(py, &b.keys)?, self.summary_text_object(py, i))))
            .collect()
    }

    /// Number of indexed keys.
    #[getter]
    fn record_count(&self) -> usize {
        self.core.record_count()
    }

    /// Number of dedup aliases.
    #[getter]
    fn alias_count(&self) -> usize {
        self.core.alias_count()
    }

    /// Number of summary bodies.
    #[getter]
    fn summary_count(&self) -> usize {
        self.core.summary_count()
    }

    /// Number of registered chains.
    #[getter]
    fn chain_count(&self) -> usize {
        self.core.chain_count()
    }

    /// The next short-ref number `N` of `tN`.
    #[getter]
    fn next_short_ref_number(&self, py: Python<'_>) -> PyResult<PyObject> {
        number_to_py(py, self.core.next_short_ref_number())
    }

    /// The next block number `N` of `bN`.
    #[getter]
    fn next_block_number(&self, py: Python<'_>) -> PyResult<PyObject> {
        number_to_py(py, self.core.next_block_number())
    }

    /// `data` of the frontier entry in effect (last one with a truthy
    /// `lastAttemptedToolCallId`), raw; None if none.
    #[getter]
    fn frontier_data<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyAny>> {
        self.frontier.as_ref().map(|d| d.bind(py).clone())
    }

    /// `data` of the stats entry in effect (last one with truthy data), raw; None if none.
    #[getter]
    fn stats_data<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyAny>> {
        self.stats.as_ref().map(|d| d.bind(py).clone())
    }

    // ----- mutations (flush) -----

    /// `addBatch` in memory: indexes each record dict and seeds its dedup hash. Returns the
    /// keys. Records without a string `toolCallId` are rejected.
    fn add_batch<'py>(
        &mut self,
        records: &Bound<'py, PyAny>,
    ) -> PyResult<Vec<Bound<'py, PyString>>> {
        let mut keys = Vec::new();
        for item in records.try_iter()? {
            let (record, seed) = self.read_required(&item?)?;
            let key = self.core.index_record(record).key.clone();
            if let Some(seed) = seed {
                self.core.queue_hash_seed(&key, seed);
            }
            keys.push(key);
        }
        keys_to_py(records.py(), keys)
    }

    /// Backfill step 4: indexes the record dicts without seeding dedup hashes, then registers
    /// the refs (dicts `{shortId, toolCallId, resultTimestamp?}`). Returns the keys.
    fn add_backfilled<'py>(
        &mut self,
        records: &Bound<'py, PyAny>,
        refs: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<Bound<'py, PyString>>> {
        // Read everything before indexing anything; on a bad record drop the objects read so
        // far, so record slots stay aligned with the core.
        let before = self.records.len();
        let read = (|| {
            let mut views = Vec::new();
            for item in records.try_iter()? {
                views.push(self.read_required(&item?)?.0);
            }
            let refs = entries::raw_refs(refs.try_iter()?.map(|r| r.map(Entry)))?;
            Ok::<_, PyErr>((views, refs))
        })();
        match read {
            Ok((views, refs)) => keys_to_py(records.py(), self.core.add_backfilled(views, &refs)),
            Err(err) => {
                self.records.truncate(before);
                Err(err)
            }
        }
    }

    /// `allocateSummaryRefs`: `[{shortId, toolCallId, resultTimestamp?}]` for `(toolCallId,
    /// resultTimestamp or None)` pairs; advances the counter without registering.
    fn allocate_refs<'py>(
        &mut self,
        py: Python<'py>,
        calls: &Bound<'py, PyAny>,
    ) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let mut pairs: Vec<(String, Option<f64>)> = Vec::new();
        let mut stamps: Vec<Option<Bound<'py, PyAny>>> = Vec::new();
        for item in calls.try_iter()? {
            let item = item?;
            let (id, ts): (Bound<'py, PyString>, Bound<'py, PyAny>) = item.extract()?;
            let n = js_number(&ts)?;
            if n.is_none() && !ts.is_none() {
                return Err(PyValueError::new_err(
                    "allocate_refs: resultTimestamp must be a number or None",
                ));
            }
            pairs.push((key_of(&id)?, n));
            stamps.push(n.map(|_| ts));
        }
        let refs = self.core.allocate_refs(&pairs);
        let mut out = Vec::with_capacity(refs.len());
        for (r, ts) in refs.iter().zip(stamps) {
            let d = PyDict::new(py);
            d.set_item(intern!(py, "shortId"), str_of_js(py, &r.short_id)?)?;
            d.set_item(intern!(py, "toolCallId"), key_to_py(py, &r.tool_call_id)?)?;
            if let Some(ts) = ts {
                d.set_item(intern!(py, "resultTimestamp"), ts)?;
            }
            out.push(d);
        }
        Ok(out)
    }

    /// `registerSummaryRefs(refs)` for ref dicts.
    fn register_refs(&mut self, refs: &Bound<'_, PyAny>) -> PyResult<()> {
        let refs = entries::raw_refs(refs.try_iter()?.map(|r| r.map(Entry)))?;
        self.core.register_refs(&refs);
        Ok(())
    }

    /// `registerDuplicate` in memory: False (no-op) when the keys are equal.
    fn register_duplicate(
        &mut self,
        new_key: &Bound<'_, PyString>,
        original_key: &Bound<'_, PyString>,
    ) -> PyResult<bool> {
        Ok(self
            .core
            .register_duplicate(&key_of(new_key)?, &key_of(original_key)?))
    }

    /// `registerSummaryBody(keys, text)`: pushed iff both are non-empty.
    fn register_summary_body(
        &mut self,
        keys: &Bound<'_, PyAny>,
        text: &Bound<'_, PyString>,
    ) -> PyResult<bool> {
        let pushed = self
            .core
            .register_summary_body(keys_of(keys)?, js_str_of(text)?);
        if pushed {
            self.bodies.push(text.clone().into_any().unbind());
        }
        Ok(pushed)
    }

    /// `registerChain(entry)` for a chain entry dict (needs a truthy `blockId` and a numeric
    /// `startUserTimestamp`).
    fn register_chain(&mut self, entry: &Bound<'_, PyDict>) -> PyResult<()> {
        let Some(view) = entries::read_chain(&Entry(entry.clone().into_any()))? else {
            return Err(PyValueError::new_err(
                "register_chain: entry needs a truthy blockId and a numeric startUserTimestamp",
            ));
        };
        self.core.register_chain(view);
        self.chains.push(entry.clone().into_any().unbind());
        Ok(())
    }

    /// Block-ref issuer `issue()`: the next `bN`.
    fn issue_block_id(&mut self) -> String {
        self.core.issue_block_id()
    }

    fn __repr__(&self) -> String {
        let core = self.core();
        format!(
            "Index(records={}, aliases={}, summaries={}, chains={})",
            core.record_count(),
            core.alias_count(),
            core.summary_count(),
            core.chain_count()
        )
    }
}

impl PyIndex {
    fn read_required(&mut self, item: &Bound<'_, PyAny>) -> PyResult<ReplayRecord> {
        match self.read_record(item)? {
            Some(r) => Ok(r),
            None => Err(PyValueError::new_err(
                "record must be a dict with a string toolCallId",
            )),
        }
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyIndex>()?;
    Ok(())
}

/// How many entries ahead of the one being read [`PyIndex::from_entries`] fetches.
const PREFETCH_AHEAD: usize = 4;

/// Hints the CPU to load entry `i` of `list` (its header, and the hash table of the entry
/// two steps closer, whose header the previous hint loaded).
fn prefetch_entry(list: &Bound<'_, PyList>, i: usize) {
    let Ok(far) = ffi::Py_ssize_t::try_from(i) else {
        return;
    };
    // SAFETY: the GIL is held and `list` is a live list. `PyList_GetItem` checks the index
    // (the size is checked first, so no IndexError is raised) and returns a borrowed item
    // that the list holds at least until Python code runs, which none does before it is
    // used here: the prefetch of an address never faults, and `prefetch_body` reads the
    // header of a live object.
    unsafe {
        let size = ffi::PyList_Size(list.as_ptr());
        if far < size {
            prefetch(ffi::PyList_GetItem(list.as_ptr(), far));
        }
        let near = far - 2;
        if near >= 0 && near < size {
            prefetch_body(Obj::from_ptr(ffi::PyList_GetItem(list.as_ptr(), near)));
        }
    }
}

//! What phase 3 derives from a chain entry alone, precomputed.
//!
//! A chain entry never changes once registered, so an [`Index`](crate::index::Index) derives
//! these facts when it registers the entry and every render reads them
//! ([`RenderState::chain_facts`](super::RenderState::chain_facts)). They live in one
//! [`ChainFactsTable`]: the strings of all entries back to back in registration order (which
//! is also, nearly, the order a render walks the entries in), so a render reads them almost
//! sequentially instead of chasing one heap block per string.

use super::{ChainEntry, JsField};
use crate::collections::FastSet;
use crate::jsstr::{JsBuf, JsStr};
use crate::keys::bare_tool_call_id;
use crate::placeholders::has_block_ref;

/// A span of [`ChainFactsTable::text`].
type Span = (usize, usize);

/// A list of strings in the table: the range of `ChainFactsTable::ends` holding their ends,
/// and where the first one starts in the text.
type ListSpan = (Span, usize);

/// Where one entry's facts sit in the table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Spans {
    /// `String(blockId)`.
    block_key: Span,
    /// The recorded ids (`None`: throws).
    recorded: Option<ListSpan>,
    /// The string keys of the per-batch bodies (`None`: throws, or not needed).
    summary_keys: Option<ListSpan>,
    /// The synthetic text's head (`None`: throws).
    head: Option<Span>,
    /// The head followed by the summary, when the summary is final as stored.
    prefix: Option<Span>,
    /// The head with its lone surrogates (position in `ChainFactsTable::exact_heads`), when
    /// `blockId` or a tool ref holds some.
    exact_head: Option<usize>,
}

/// The facts of many entries, stored compactly; entry `k` is the `k`-th one pushed.
#[derive(Clone, Debug, Default)]
pub(crate) struct ChainFactsTable {
    /// Every string of every entry, back to back.
    text: String,
    /// Ends (in `text`) of the strings of every list, all entries' in a row; each string
    /// starts where the previous one ends.
    ends: Vec<usize>,
    /// Per entry.
    spans: Vec<Spans>,
    /// The heads that hold lone surrogates (rare), exact.
    exact_heads: Vec<JsStr>,
}

impl ChainFactsTable {
    /// An empty table.
    pub fn new() -> Self {
        ChainFactsTable::default()
    }

    /// Appends the facts of `entry`; they are then [`ChainFactsTable::get`]`(len - 1)`.
    pub fn push(&mut self, entry: &ChainEntry) {
        let block = entry.block_id.js_string();
        let block_key = self.push_text(&block);
        // `(droppedToolCallIds ?? []).map(bareToolCallId)` as a set: a non-string throws.
        let dropped = entry.dropped_tool_call_ids.as_deref().unwrap_or_default();
        let recorded = match dropped
            .iter()
            .map(JsField::as_str)
            .collect::<Option<Vec<_>>>()
        {
            Some(ids) => {
                let mut seen: FastSet<&str> = FastSet::default();
                let bare = ids.into_iter().map(bare_tool_call_id);
                Some(self.push_list(bare.filter(|id| seen.insert(id))))
            }
            None => None,
        };
        // Only an entry without `rangeSummaryText` reads the per-batch bodies.
        let summary_keys = match entry.summary_keys() {
            Some(keys) if entry.range_summary_text.is_nullish() => {
                Some(self.push_list(keys.iter().filter_map(JsField::as_str)))
            }
            _ => None,
        };
        let exact_head = exact_head(entry).map(|head| {
            self.exact_heads.push(head);
            self.exact_heads.len() - 1
        });
        let (head, prefix) = match entry.tool_refs_joined() {
            Some(tools) => {
                let start = self.text.len();
                self.text.push_str("<compressed-chain id=\"");
                self.text.push_str(&block);
                self.text.push_str("\" tools=\"");
                self.text.push_str(&tools);
                self.text.push_str("\">\n");
                let head = (start, self.text.len());
                // A string summary without `{bN}` placeholders is the final body as is
                // (unless it holds lone surrogates: the table keeps lossy text only).
                let prefix = match &entry.range_summary_text {
                    JsField::Str(summary)
                        if exact_head.is_none()
                            && summary.exact().is_none()
                            && !has_block_ref(summary) =>
                    {
                        self.text.push_str(summary);
                        Some((start, self.text.len()))
                    }
                    _ => None,
                };
                (Some(head), prefix)
            }
            None => (None, None),
        };
        self.spans.push(Spans {
            block_key,
            recorded,
            summary_keys,
            head,
            prefix,
            exact_head,
        });
    }

    fn push_text(&mut self, s: &str) -> Span {
        let start = self.text.len();
        self.text.push_str(s);
        (start, self.text.len())
    }

    fn push_list<'s>(&mut self, items: impl Iterator<Item = &'s str>) -> ListSpan {
        let (first, start) = (self.ends.len(), self.text.len());
        for item in items {
            self.text.push_str(item);
            self.ends.push(self.text.len());
        }
        ((first, self.ends.len()), start)
    }

    fn slice(&self, span: Span) -> &str {
        self.text.get(span.0..span.1).unwrap_or_default()
    }

    fn list(&self, ((first, last), start): ListSpan) -> StrList<'_> {
        StrList {
            text: &self.text,
            start,
            ends: self.ends.get(first..last).unwrap_or_default(),
        }
    }

    /// The facts of the `k`-th entry pushed.
    pub fn get(&self, k: usize) -> Option<ChainFacts<'_>> {
        let spans = self.spans.get(k)?;
        Some(ChainFacts {
            block_key: self.slice(spans.block_key),
            recorded: spans.recorded.map(|list| self.list(list)),
            summary_keys: spans.summary_keys.map(|list| self.list(list)),
            head: spans.head.map(|span| self.slice(span)),
            prefix: spans.prefix.map(|span| self.slice(span)),
            exact_head: spans.exact_head.and_then(|i| self.exact_heads.get(i)),
        })
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.spans.len()
    }
}

/// What phase 3 derives from one chain entry alone (see `ChainFactsTable`).
#[derive(Clone, Copy, Debug)]
pub struct ChainFacts<'a> {
    /// `String(blockId)`: the dedup key of the entry's diagnostics, and the key its protected
    /// outputs are collected under.
    pub block_key: &'a str,
    /// The distinct values of `(droppedToolCallIds ?? []).map(bareToolCallId)`, in first-seen
    /// order; `None` when an element is not a string (the reference throws there).
    pub recorded: Option<StrList<'a>>,
    /// For an entry without `rangeSummaryText`: the string elements of
    /// `droppedOccurrenceKeys ?? droppedToolCallIds`, the keys its per-batch bodies are
    /// looked up by. `None` when neither is an array (the reference throws there) and for
    /// an entry with `rangeSummaryText`.
    pub summary_keys: Option<StrList<'a>>,
    /// `<compressed-chain id="<blockId>" tools="<toolRefs joined>">` and a newline: the
    /// synthetic text before the summary; `None` when `toolRefs` is not an array (the
    /// reference throws there).
    pub head: Option<&'a str>,
    /// The head followed by the summary, when the summary is `rangeSummaryText` as stored
    /// (a string without `{bN}` placeholders): the synthetic text before the protected
    /// outputs.
    pub prefix: Option<&'a str>,
    /// [`ChainFacts::head`] with its lone surrogates, when it holds some.
    pub exact_head: Option<&'a JsStr>,
}

/// The head with the lone surrogates of `blockId` and `toolRefs`, when they hold some.
fn exact_head(entry: &ChainEntry) -> Option<JsStr> {
    let has_exact = |f: &JsField| matches!(f, JsField::Str(s) if s.exact().is_some());
    let refs = entry.tool_refs.as_deref()?;
    if !has_exact(&entry.block_id) && !refs.iter().any(has_exact) {
        return None;
    }
    let mut out = JsBuf::new();
    out.push_str("<compressed-chain id=\"");
    entry.block_id.push_js_string(&mut out);
    out.push_str("\" tools=\"");
    for (i, r) in refs.iter().enumerate() {
        if i > 0 {
            out.push_str(",");
        }
        if !r.is_nullish() {
            r.push_js_string(&mut out);
        }
    }
    out.push_str("\">\n");
    Some(out.finish())
}

/// A list of strings of a [`ChainFacts`], stored back to back.
#[derive(Clone, Copy, Debug)]
pub struct StrList<'a> {
    text: &'a str,
    /// Where the first string starts.
    start: usize,
    /// Where each string ends.
    ends: &'a [usize],
}

impl<'a> StrList<'a> {
    /// Number of strings.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The `i`-th string.
    pub fn get(&self, i: usize) -> Option<&'a str> {
        let end = *self.ends.get(i)?;
        let start = match i.checked_sub(1) {
            Some(before) => self.ends.get(before).copied().unwrap_or(self.start),
            None => self.start,
        };
        self.text.get(start..end)
    }

    /// The strings, in order.
    pub fn iter(&self) -> impl Iterator<Item = &'a str> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(block: JsField, dropped: Option<Vec<JsField>>, refs: Option<&[&str]>) -> ChainEntry {
        ChainEntry {
            block_id: block,
            dropped_tool_call_ids: dropped,
            tool_refs: refs.map(|r| r.iter().map(|s| JsField::str(*s)).collect()),
            ..ChainEntry::default()
        }
    }

    fn ids(list: &[&str]) -> Option<Vec<JsField>> {
        Some(list.iter().map(|s| JsField::str(*s)).collect())
    }

    fn owned(list: Option<StrList<'_>>) -> Option<Vec<String>> {
        list.map(|l| l.iter().map(str::to_owned).collect())
    }

    fn recorded(facts: &ChainFacts<'_>) -> Option<Vec<String>> {
        owned(facts.recorded)
    }

    #[test]
    fn facts_of_several_entries_stay_apart() {
        let mut table = ChainFactsTable::new();
        let mut first = entry(
            JsField::str("b1"),
            ids(&["a@1", "b", "a@2", "c"]),
            Some(&["t1", "t2"]),
        );
        first.range_summary_text = JsField::str("sum");
        table.push(&first);
        table.push(&entry(
            JsField::Number(7.0),
            Some(vec![JsField::str("x"), JsField::Null, JsField::str("y")]),
            None,
        ));
        let mut third = entry(JsField::str("b3"), None, Some(&[]));
        third.range_summary_text = JsField::str("see {b1}");
        table.push(&third);
        table.push(&entry(JsField::str("b4"), ids(&["q"]), Some(&["t9"])));
        assert_eq!(table.len(), 4);

        let f = table.get(0).unwrap_or_else(|| unreachable!());
        assert_eq!(f.block_key, "b1");
        assert_eq!(
            recorded(&f),
            Some(vec!["a".to_owned(), "b".to_owned(), "c".to_owned()])
        );
        assert_eq!(
            f.head,
            Some("<compressed-chain id=\"b1\" tools=\"t1,t2\">\n")
        );
        assert_eq!(
            f.prefix,
            Some("<compressed-chain id=\"b1\" tools=\"t1,t2\">\nsum")
        );
        assert_eq!(f.recorded.map(|r| r.get(3)), Some(None));

        let f = table.get(1).unwrap_or_else(|| unreachable!());
        assert_eq!(f.block_key, "7");
        assert!(f.recorded.is_none());
        assert!(f.head.is_none() && f.prefix.is_none());

        let f = table.get(2).unwrap_or_else(|| unreachable!());
        assert_eq!(recorded(&f), Some(vec![]));
        assert_eq!(f.head, Some("<compressed-chain id=\"b3\" tools=\"\">\n"));
        // A placeholder is substituted at render time.
        assert!(f.prefix.is_none());

        let f = table.get(3).unwrap_or_else(|| unreachable!());
        assert_eq!(recorded(&f), Some(vec!["q".to_owned()]));
        // No range summary: the per-batch bodies decide at render time, by the dropped ids
        // when there are no occurrence keys.
        assert!(f.prefix.is_none());
        assert_eq!(owned(f.summary_keys), Some(vec!["q".to_owned()]));
        // With a range summary, the keys are not needed.
        assert!(table.get(0).and_then(|f| f.summary_keys).is_none());
        assert!(table.get(4).is_none());
    }

    #[test]
    fn summary_keys_prefer_occurrence_keys_and_skip_non_strings() {
        let mut table = ChainFactsTable::new();
        let mut e = entry(JsField::str("b1"), ids(&["a"]), Some(&[]));
        e.dropped_occurrence_keys = Some(vec![
            JsField::str("a@1"),
            JsField::Number(3.0),
            JsField::str("a@1"),
        ]);
        table.push(&e);
        e.dropped_occurrence_keys = None;
        e.dropped_tool_call_ids = None;
        table.push(&e);
        e.range_summary_text = JsField::Null;
        e.dropped_tool_call_ids = Some(vec![]);
        table.push(&e);
        let keys = |k| table.get(k).and_then(|f| owned(f.summary_keys));
        assert_eq!(keys(0), Some(vec!["a@1".to_owned(), "a@1".to_owned()]));
        // Neither list: the reference throws.
        assert_eq!(keys(1), None);
        assert_eq!(keys(2), Some(vec![]));
        // Lists of different entries stay apart.
        assert_eq!(
            table.get(0).and_then(|f| f.recorded).map(|r| r.len()),
            Some(1)
        );
    }
}

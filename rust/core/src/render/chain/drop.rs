//! What a range drops: the recorded-ids check of the calls and results inside it
//! (`range-id-mismatch`, 04 section 5.3), and the per-batch summaries that cover a dropped
//! call (04 section 5.5).

use crate::collections::FastSet;
use crate::index::chain_facts::StrList;
use crate::js::Throw;
use crate::keys::bare_tool_call_id;
use crate::view::{JsIdOf, SummaryRef, SummaryRefs};

/// How far back [`ordered_match`] looks for a repeated id: past the calls of one assistant.
const LOOKBACK: usize = 32;

/// Whether the distinct ids of `ids` are exactly `recorded` (distinct ids), decided without
/// hashing when the ids come in recorded order: each new id is the next recorded one and
/// each repeated id (a result after its call) one of the last [`LOOKBACK`] matched. `false`
/// means "not shown equal this way".
pub(super) fn ordered_match(ids: &[JsIdOf<&str>], recorded: StrList<'_>) -> bool {
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
pub(super) fn id_mismatch<'a>(
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

/// The dropped calls as the per-batch summary check asks about them: by occurrence key
/// (results only) and by id (calls and results). Each set is built on first use, so a list
/// without per-batch summaries builds none.
pub(super) struct Dropped<'a> {
    /// the ids of the dropped calls and results
    pub(super) ids: &'a [JsIdOf<&'a str>],
    /// the spans of the dropped results' keys in `key_text`
    pub(super) key_spans: &'a [(usize, usize)],
    pub(super) key_text: &'a str,
    pub(super) keys: Option<FastSet<&'a str>>,
    pub(super) bare: Option<FastSet<JsIdOf<&'a str>>>,
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

/// What a per-batch summary's ref is checked by (04 section 5.5): the occurrence key
/// `id@resultTimestamp` when the ref has a result timestamp, else its bare id.
pub(crate) enum RefCheck<'a> {
    Key(String),
    Id(&'a str),
}

/// The checks of a summary's refs, in order (each an `Err` where the reference throws: a
/// nullish ref, a non-string id without a result timestamp); `Err` when the refs are not an
/// array.
pub(crate) fn ref_checks<S: AsRef<str>>(
    refs: &SummaryRefs<S>,
) -> Result<impl Iterator<Item = Result<RefCheck<'_>, Throw>>, Throw> {
    let SummaryRefs::List(items) = refs else {
        return Err(Throw);
    };
    Ok(items.iter().map(|item| {
        let SummaryRef::Ref {
            tool_call_id,
            result_timestamp,
        } = item
        else {
            return Err(Throw);
        };
        match result_timestamp {
            Some(ts) => Ok(RefCheck::Key(format!("{}@{ts}", tool_call_id.js_str()))),
            None => {
                let JsIdOf::Str(id) = tool_call_id else {
                    return Err(Throw);
                };
                Ok(RefCheck::Id(bare_tool_call_id(id.as_ref())))
            }
        }
    }))
}

/// Whether a per-batch summary covers a dropped call (04 section 5.5): the refs in order,
/// the first hit ends the check.
pub(super) fn overlaps_dropped<S: AsRef<str>>(
    refs: &SummaryRefs<S>,
    dropped: &mut Dropped<'_>,
) -> Result<bool, Throw> {
    for check in ref_checks(refs)? {
        let hit = match check? {
            RefCheck::Key(key) => dropped.has_key(&key),
            RefCheck::Id(id) => dropped.has_id(id),
        };
        if hit {
            return Ok(true);
        }
    }
    Ok(false)
}

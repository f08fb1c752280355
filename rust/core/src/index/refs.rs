//! Short refs `tN` (spec 03 section 4): registration, allocation and the counter rules.

use super::changes::Change;
use super::records::key_with_field;
use super::{Index, JsField, js_max};
use crate::js::{field::is_ascii_digits, format_number};
use crate::jsstr::JsStr;

/// A `SummaryToolCallRef`: `{shortId, toolCallId, resultTimestamp?}`.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ShortRef {
    /// `shortId` (`t<N>`, or the raw id for legacy pre-short-ref summaries).
    pub short_id: JsStr,
    /// `toolCallId` (bare id), in key form (see [`crate::jsstr::key_form_units`]).
    pub tool_call_id: String,
    /// `resultTimestamp` (a number in normalized summary refs; raw in backfilled index refs).
    pub result_timestamp: JsField,
}

impl ShortRef {
    /// A ref with a numeric (or absent) result timestamp.
    pub fn new(
        short_id: impl Into<JsStr>,
        tool_call_id: impl Into<String>,
        ts: Option<f64>,
    ) -> Self {
        ShortRef {
            short_id: short_id.into(),
            tool_call_id: tool_call_id.into(),
            result_timestamp: ts.map_or(JsField::Absent, JsField::Number),
        }
    }

    /// `occKey(toolCallId, resultTimestamp)`.
    pub fn key(&self) -> String {
        key_with_field(&self.tool_call_id, &self.result_timestamp)
    }
}

/// The number `N` of a short ref matching `/^t(\d+)$/` (`Number(digits)`).
pub(crate) fn short_ref_number(short_id: &str) -> Option<f64> {
    let digits = short_id.strip_prefix('t')?;
    if !is_ascii_digits(digits) {
        return None;
    }
    digits.parse::<f64>().ok()
}

impl Index {
    /// `registerSummaryRefs(refs)`: skips refs with an empty `shortId` or `toolCallId`; maps
    /// `shortId <-> key` unless `shortId === key` (legacy refs); raises the counter to
    /// `N + 1` for every `tN` ref (also for legacy-shaped ones).
    pub fn register_refs(&mut self, refs: &[ShortRef]) {
        for r in refs {
            if r.short_id.is_empty() || r.tool_call_id.is_empty() {
                continue;
            }
            let key = r.key();
            // Short refs are held in key form, as keys are (see `Index` on strings).
            let short_key = r.short_id.key_form();
            if *short_key != *key {
                let short = self.short_id(&short_key);
                if *short_key != *r.short_id.as_str() {
                    self.exact_shorts.insert(short, r.short_id.clone());
                }
                let key = self.key_id(&key);
                if let Some(slot) = self.short_keys.get_mut(short)
                    && slot.replace(key).is_none()
                {
                    self.short_order.push(short);
                }
                if let Some(facts) = self.facts.get_mut(key) {
                    facts.short = Some(short);
                }
                self.log(Change::Key(self.keys.get(key).to_owned()));
            }
            if let Some(n) = short_ref_number(&r.short_id) {
                self.next_short = js_max(self.next_short, n + 1.0);
            }
        }
    }

    /// `allocateSummaryRefs` / `buildShortToolCallRefs`: `t<next + i>` for each call, then the
    /// counter advances by `calls.len()`. The refs are NOT registered (the flush registers them
    /// once the summary is persisted), so numbers of a rejected batch are burned.
    pub fn allocate_refs<S: AsRef<str>>(&mut self, calls: &[(S, Option<f64>)]) -> Vec<ShortRef> {
        let start = self.next_short;
        let mut refs = Vec::with_capacity(calls.len());
        let mut offset = 0.0;
        for (id, ts) in calls {
            refs.push(ShortRef::new(
                format!("t{}", format_number(start + offset)),
                id.as_ref(),
                *ts,
            ));
            offset += 1.0;
        }
        self.next_short = start + offset;
        refs
    }

    /// The next short-ref number `N` (`nextShortAliasNumber`).
    pub fn next_short_ref_number(&self) -> f64 {
        self.next_short
    }

    /// `getShortRefForToolCallId(key)`: the short ref registered for a key (or dedup alias key);
    /// `None` for legacy refs and unknown keys (callers then print the raw id).
    pub fn short_ref(&self, key: &str) -> Option<&str> {
        let short = self.facts_of(key)?.short?;
        Some(self.shorts.get(short))
    }

    /// [`Index::short_ref`] with its lone surrogates, when it holds some.
    pub fn short_ref_exact(&self, key: &str) -> Option<&JsStr> {
        if self.exact_shorts.is_empty() {
            return None;
        }
        self.exact_shorts.get(&self.facts_of(key)?.short?)
    }

    /// The key a short ref denotes (`aliasToKey[shortId]`).
    pub fn key_for_short_ref(&self, short_id: &str) -> Option<&str> {
        let key = (*self.short_keys.get(self.shorts.find(short_id)?)?)?;
        Some(self.keys.get(key))
    }

    /// Registered short refs and their keys, in first-registration order.
    pub fn short_refs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.short_order.iter().filter_map(|&short| {
            let key = (*self.short_keys.get(short)?)?;
            Some((self.shorts.get(short), self.keys.get(key)))
        })
    }

    /// `getToolRefsForToolCallIds(keys)`: the non-empty short ref of each key, in order. Not
    /// de-duplicated: a dedup alias shares its original's ref, so the same ref may repeat.
    pub fn tool_refs_for<S: AsRef<str>>(&self, keys: &[S]) -> Vec<&str> {
        keys.iter()
            .filter_map(|k| self.short_ref(k.as_ref()))
            .filter(|r| !r.is_empty())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_ref_pattern_is_strict() {
        assert_eq!(short_ref_number("t12"), Some(12.0));
        assert_eq!(short_ref_number("t007"), Some(7.0));
        assert_eq!(short_ref_number("t"), None);
        assert_eq!(short_ref_number("t1\n"), None);
        assert_eq!(short_ref_number("T1"), None);
        assert_eq!(short_ref_number("b1"), None);
        assert_eq!(short_ref_number("t1a"), None);
    }

    #[test]
    fn registration_maps_both_ways_and_raises_counter() {
        let mut ix = Index::new();
        ix.register_refs(&[
            ShortRef::new("t3", "a", Some(10.0)),
            ShortRef::new("t1", "b", None),
        ]);
        assert_eq!(ix.key_for_short_ref("t3"), Some("a@10"));
        assert_eq!(ix.short_ref("a@10"), Some("t3"));
        assert_eq!(ix.short_ref("b"), Some("t1"));
        assert_eq!(ix.resolve("t3"), Some("a@10"));
        // max over entries, not the last one.
        assert_eq!(ix.next_short_ref_number(), 4.0);
    }

    #[test]
    fn legacy_refs_register_no_alias() {
        let mut ix = Index::new();
        ix.register_refs(&[ShortRef::new("call_1", "call_1", None)]);
        assert_eq!(ix.short_ref("call_1"), None);
        assert_eq!(ix.next_short_ref_number(), 1.0);
        // A legacy-shaped ref whose id looks like tN still raises the counter.
        ix.register_refs(&[ShortRef::new("t9", "t9", None)]);
        assert_eq!(ix.short_ref("t9"), None);
        assert_eq!(ix.next_short_ref_number(), 10.0);
    }

    #[test]
    fn empty_fields_are_skipped() {
        let mut ix = Index::new();
        ix.register_refs(&[ShortRef::new("", "a", None), ShortRef::new("t5", "", None)]);
        assert_eq!(ix.next_short_ref_number(), 1.0);
        assert_eq!(ix.short_refs().count(), 0);
    }

    #[test]
    fn allocation_burns_numbers_without_registering() {
        let mut ix = Index::new();
        let refs = ix.allocate_refs(&[("a", Some(5.0)), ("b", None)]);
        assert_eq!(refs[0], ShortRef::new("t1", "a", Some(5.0)));
        assert_eq!(refs[1], ShortRef::new("t2", "b", None));
        assert_eq!(ix.next_short_ref_number(), 3.0);
        assert_eq!(ix.short_ref("a@5"), None);
        // Registering a lower number later never lowers the counter.
        ix.register_refs(&refs[..1]);
        assert_eq!(ix.next_short_ref_number(), 3.0);
        assert_eq!(ix.short_ref("a@5"), Some("t1"));
    }

    #[test]
    fn last_registration_wins_per_key() {
        let mut ix = Index::new();
        ix.register_refs(&[ShortRef::new("t1", "a", Some(1.0))]);
        ix.register_refs(&[ShortRef::new("t7", "a", Some(1.0))]);
        assert_eq!(ix.short_ref("a@1"), Some("t7"));
        assert_eq!(ix.key_for_short_ref("t1"), Some("a@1"));
        assert_eq!(ix.tool_refs_for(&["a@1", "zz"]), vec!["t7"]);
    }
}

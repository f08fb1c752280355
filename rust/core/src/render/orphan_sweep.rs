//! Phase 4: orphan sweep with barrier semantics (04 section 6).
//!
//! A toolResult survives only if the nearest preceding assistant, with no
//! other message in between, opened a call with its id that no earlier result
//! consumed. Providers reject a result without an open call.

use std::fmt::Write as _;

use sha1::{Digest, Sha1};

use super::plan::{Diagnostic, DiagnosticKind, Item};
use crate::jsstr::{JsBuf, JsStr, key_form_to_wtf8};
use super::{FastSet, Throw};
use crate::view::{IdStr, JsId, JsIdOf, MsgView, Role};

/// Ids shown in the diagnostic detail.
const SHOWN_IDS: usize = 5;

/// Calls opened by one assistant beyond this count are kept in a hash set.
const SMALL_OPEN: usize = 16;

/// The orphan-sweep diagnostic for the swept ids (in list order).
pub(crate) fn orphan_diagnostic<S: AsRef<str>>(swept: &[JsIdOf<S>]) -> Diagnostic {
    let mut sorted: Vec<&JsIdOf<S>> = swept.iter().collect();
    sorted.sort_by(|a, b| JsIdOf::js_sort_cmp(a, b));
    // String ids are key forms: the JS strings they stand for, lone surrogates included.
    let joined: Vec<JsStr> = sorted
        .iter()
        .map(|id| JsStr::from_wtf8(&key_form_to_wtf8(&id.join_string())))
        .collect();
    // Hashed as Node encodes a string: a lone surrogate as U+FFFD (the lossy text).
    let mut hasher = Sha1::new();
    for (i, id) in joined.iter().enumerate() {
        if i > 0 {
            hasher.update(b",");
        }
        hasher.update(id.as_bytes());
    }
    let digest = hasher.finalize();
    let mut dedup_key = String::with_capacity(16);
    for byte in digest.iter().take(8) {
        let _ = write!(dedup_key, "{byte:02x}");
    }
    let mut detail = JsBuf::new();
    detail.push_str(&format!("swept {} orphan toolResult(s): ", swept.len()));
    for (i, id) in joined.iter().take(SHOWN_IDS).enumerate() {
        if i > 0 {
            detail.push_str(", ");
        }
        detail.push(id);
    }
    if swept.len() > SHOWN_IDS {
        detail.push_str(&format!(" ... +{} more", swept.len() - SHOWN_IDS));
    }
    Diagnostic {
        kind: DiagnosticKind::OrphanSweep,
        dedup_key,
        detail: detail.finish(),
    }
}

/// What phase 4 leaves at the end of a list, for a render resumed over it plus new
/// messages ([`super::resume`]).
#[derive(Debug, Default, Clone)]
pub(crate) struct SweepTrail {
    /// The calls still open at the end of the list.
    pub(crate) open: Vec<JsId>,
    /// The ids of the swept results, in list order.
    pub(crate) swept: Vec<JsId>,
    /// Their indices in the list.
    pub(crate) swept_at: Vec<usize>,
}

/// The set of calls the nearest assistant opened and no result consumed yet: a short
/// list (the usual one to three calls), a hash set for long ones.
#[derive(Default)]
pub(crate) struct Open<'a> {
    small: Vec<JsIdOf<&'a str>>,
    large: FastSet<JsIdOf<&'a str>>,
}

impl<'a> Open<'a> {
    /// The set holding `ids`.
    pub(crate) fn of(ids: &'a [JsId]) -> Self {
        let mut open = Open::default();
        open.reset(ids.iter());
        open
    }

    /// The open calls, owned.
    pub(crate) fn to_owned_ids(&self) -> Vec<JsId> {
        self.small
            .iter()
            .chain(self.large.iter())
            .map(JsIdOf::to_owned_id)
            .collect()
    }

    pub(crate) fn clear(&mut self) {
        self.small.clear();
        if !self.large.is_empty() {
            self.large.clear();
        }
    }

    /// `open = new Set(ids)`.
    pub(crate) fn reset<S: IdStr + 'a>(&mut self, ids: impl Iterator<Item = &'a JsIdOf<S>>) {
        self.clear();
        for id in ids {
            let id = id.borrowed();
            if !self.large.is_empty() {
                self.large.insert(id);
            } else if !self.small.contains(&id) {
                if self.small.len() < SMALL_OPEN {
                    self.small.push(id);
                } else {
                    self.large.extend(self.small.drain(..));
                    self.large.insert(id);
                }
            }
        }
    }

    /// `open.delete(id)`: whether it was open.
    pub(crate) fn take(&mut self, id: &JsIdOf<&'a str>) -> bool {
        if !self.large.is_empty() {
            return self.large.remove(id);
        }
        match self.small.iter().position(|x| x == id) {
            Some(at) => {
                self.small.swap_remove(at);
                true
            }
            None => false,
        }
    }
}

/// Phase 4 over the phase-3 output (`items`, `None` = the input unchanged).
/// `None` when nothing is orphaned. (Tests: the render sweeps in place.)
#[cfg(test)]
pub(crate) fn sweep<S: IdStr>(
    msgs: &[MsgView<S>],
    items: Option<&[Item]>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<Option<Vec<Item>>, Throw> {
    let mut out = items.map(<[Item]>::to_vec);
    Ok(sweep_in_place(msgs, &mut out, diagnostics)?
        .then_some(out)
        .flatten())
}

/// Phase 4 updating the items in place (`None` becomes `Some` when a message is
/// swept). Returns whether one was.
#[cfg(test)]
pub(crate) fn sweep_in_place<S: IdStr>(
    msgs: &[MsgView<S>],
    items: &mut Option<Vec<Item>>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<bool, Throw> {
    sweep_traced(msgs, items, diagnostics, None)
}

/// [`sweep_in_place`], leaving in `trail` what a resumed render needs.
pub(crate) fn sweep_traced<S: IdStr>(
    msgs: &[MsgView<S>],
    items: &mut Option<Vec<Item>>,
    diagnostics: &mut Vec<Diagnostic>,
    trail: Option<&mut SweepTrail>,
) -> Result<bool, Throw> {
    let count = items.as_ref().map_or(msgs.len(), Vec::len);
    let mut open = Open::default();
    let mut orphans: Vec<usize> = Vec::new();
    let mut swept: Vec<JsIdOf<&str>> = Vec::new();
    let mut swept_at: Vec<usize> = Vec::new();
    for pos in 0..count {
        let src = match items {
            Some(list) => list.get(pos).and_then(Item::src),
            None => Some(pos),
        };
        let Some(msg) = src.and_then(|i| msgs.get(i)) else {
            // A synthetic chain message is a user message: a barrier.
            open.clear();
            continue;
        };
        match msg.role {
            Role::Assistant => open.reset(msg.checked_blocks()?.call_ids()),
            Role::ToolResult => {
                let id = msg.tool_call_id.borrowed();
                if !open.take(&id) {
                    orphans.push(pos);
                    swept.push(id);
                    swept_at.extend(src);
                }
            }
            _ => open.clear(),
        }
    }
    if let Some(trail) = trail {
        trail.open = open.to_owned_ids();
        trail.swept = swept.iter().map(JsIdOf::to_owned_id).collect();
        trail.swept_at = swept_at;
    }
    if orphans.is_empty() {
        return Ok(false);
    }
    diagnostics.push(orphan_diagnostic(&swept));
    let list = items.get_or_insert_with(|| (0..count).map(Item::Keep).collect());
    let mut next_orphan = orphans.iter().copied().peekable();
    let mut pos = 0usize;
    list.retain(|_| {
        let keep = next_orphan.peek() != Some(&pos);
        if !keep {
            next_orphan.next();
        }
        pos += 1;
        keep
    });
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::plan::Text;
    use crate::render::testing::{assistant, custom, ok, tc, tool_result, user};
    use crate::view::{Block, Content, Ts};
    use crate::jsstr::key_form_units;

    fn run(msgs: &[MsgView]) -> (Option<Vec<usize>>, Vec<Diagnostic>) {
        let mut diags = Vec::new();
        let out = ok(sweep(msgs, None, &mut diags));
        (
            out.map(|items| items.iter().filter_map(Item::src).collect()),
            diags,
        )
    }

    #[test]
    fn clean_list_is_unchanged() {
        let msgs = [
            user(1.0),
            assistant(2.0, vec![tc("a"), tc("b")]),
            tool_result("a", 3.0),
            tool_result("b", 4.0),
        ];
        assert_eq!(run(&msgs), (None, vec![]));
    }

    #[test]
    fn never_opened_result_is_removed() {
        let msgs = [user(1.0), tool_result("a", 2.0), assistant(3.0, vec![])];
        let (out, diags) = run(&msgs);
        assert_eq!(out, Some(vec![0, 2]));
        assert_eq!(diags.len(), 1);
        assert_eq!(diags[0].detail, "swept 1 orphan toolResult(s): a");
        // sha1("a")
        assert_eq!(diags[0].dedup_key, "86f7e437faa5a7fc");
    }

    #[test]
    fn an_earlier_valid_use_does_not_license_a_later_orphan() {
        let msgs = [
            assistant(1.0, vec![tc("a")]),
            tool_result("a", 2.0),
            assistant(3.0, vec![tc("b")]),
            tool_result("b", 4.0),
            tool_result("a", 5.0),
        ];
        assert_eq!(run(&msgs).0, Some(vec![0, 1, 2, 3]));
    }

    #[test]
    fn legitimate_reuse_across_turns_is_kept() {
        let msgs = [
            assistant(1.0, vec![tc("a")]),
            tool_result("a", 2.0),
            assistant(3.0, vec![tc("a")]),
            tool_result("a", 4.0),
        ];
        assert_eq!(run(&msgs).0, None);
    }

    #[test]
    fn duplicate_result_is_consumed_once() {
        let msgs = [
            assistant(1.0, vec![tc("a")]),
            tool_result("a", 2.0),
            tool_result("a", 3.0),
        ];
        assert_eq!(run(&msgs).0, Some(vec![0, 1]));
    }

    #[test]
    fn every_other_role_is_a_barrier() {
        for barrier in [
            user(2.0),
            custom(2.0),
            MsgView::new(Role::Other, Ts::Num(2.0)),
            MsgView::new(Role::Other, Ts::Absent),
        ] {
            let msgs = [
                assistant(1.0, vec![tc("a"), tc("b")]),
                tool_result("a", 1.5),
                barrier,
                tool_result("b", 3.0),
            ];
            assert_eq!(run(&msgs).0, Some(vec![0, 1, 2]));
        }
    }

    #[test]
    fn trailing_barrier_after_a_complete_cycle_is_a_no_op() {
        let msgs = [
            assistant(1.0, vec![tc("a")]),
            tool_result("a", 2.0),
            custom(3.0),
        ];
        assert_eq!(run(&msgs).0, None);
    }

    #[test]
    fn synthetic_items_are_barriers() {
        let msgs = [assistant(1.0, vec![tc("a")]), tool_result("a", 2.0)];
        let items = [
            Item::Keep(0),
            Item::Synthetic {
                text: Text::default(),
                chain_slot: 0,
            },
            Item::Keep(1),
        ];
        let mut diags = Vec::new();
        let out = ok(sweep(&msgs, Some(&items), &mut diags));
        assert_eq!(out.map(|v| v.len()), Some(2));
    }

    #[test]
    fn large_orphan_set_detail_and_key() {
        let mut msgs = vec![user(0.0)];
        for k in 0..12 {
            msgs.push(tool_result(&format!("id{k:02}"), f64::from(k)));
        }
        let (_, diags) = run(&msgs);
        assert_eq!(
            diags[0].detail,
            "swept 12 orphan toolResult(s): id00, id01, id02, id03, id04 ... +7 more"
        );
        assert_eq!(diags[0].dedup_key.len(), 16);
        assert!(diags[0].dedup_key.bytes().all(|b| b.is_ascii_hexdigit()));
    }

    #[test]
    fn ids_are_sorted_in_utf16_order_with_duplicates_kept() {
        let msgs = [
            user(0.0),
            tool_result("b", 1.0),
            tool_result("a", 2.0),
            tool_result("b", 3.0),
        ];
        let (_, diags) = run(&msgs);
        assert_eq!(diags[0].detail, "swept 3 orphan toolResult(s): a, b, b");
        assert_eq!(diags[0].dedup_key, sha16(b"a,b,b"));
    }

    /// The first 16 hex digits of the SHA-1 of `bytes`.
    fn sha16(bytes: &[u8]) -> String {
        Sha1::digest(bytes)
            .iter()
            .take(8)
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    #[test]
    fn lone_surrogates_in_ids_are_printed_sorted_and_hashed_as_js_does() {
        // Ids in key form: "a\u{DFFF}" and "a\u{E000}" (JS sorts 0xDFFF first).
        let lone = key_form_units(&[0x61, 0xDFFF]);
        let msgs = [user(0.0), tool_result("a\u{E000}", 1.0), tool_result(&lone, 2.0)];
        let (_, diags) = run(&msgs);
        let mut want = b"swept 2 orphan toolResult(s): a".to_vec();
        want.extend_from_slice(&[0xED, 0xBF, 0xBF]);
        want.extend_from_slice(", a\u{E000}".as_bytes());
        assert_eq!(diags[0].detail.wtf8(), want.as_slice());
        // Node hashes the UTF-8 of the string: the lone surrogate as U+FFFD.
        assert_eq!(diags[0].dedup_key, sha16("a\u{FFFD},a\u{E000}".as_bytes()));
    }

    #[test]
    fn assistant_content_that_is_not_an_array_throws() {
        let mut odd: MsgView = MsgView::new(Role::Assistant, Ts::Num(1.0));
        odd.content = Content::Str;
        assert_eq!(sweep(&[odd], None, &mut Vec::new()), Err(Throw));
        assert_eq!(
            sweep(
                &[assistant(1.0, vec![Block::Nullish])],
                None,
                &mut Vec::new()
            ),
            Err(Throw)
        );
    }
}

//! Phase 1: stub-replace summarized tool results (04 section 3.2).

use std::collections::HashSet;

use super::ids::ResultKeys;
use super::plan::{Item, Piece, Text};
use super::state::{RenderState, Summarized, template_or};
use super::{Protection, record_is_protected};
use crate::index::Record;
use crate::js::push_number;
use crate::view::{IdStr, JsIdOf, MsgView, Role};

/// Writes `occKey(id, ts)` (`id + "@" + String(ts)`) into `buf`.
pub(crate) fn write_occ_key(buf: &mut String, id: &str, ts: f64) {
    buf.clear();
    buf.push_str(id);
    buf.push('@');
    push_number(buf, ts);
}

/// Whether toolResult `msg` is stubbed, given its lookup key and the state's lookup hint
/// (see [`RenderState::summarized_near`]): what its stub shows, or `None` to keep it.
pub(crate) fn stub_with<'s, S: IdStr, St: RenderState + ?Sized>(
    msg: &MsgView<S>,
    key: Option<&str>,
    state: &'s St,
    protection: Option<&dyn Protection>,
    in_grace: &HashSet<String>,
    hint: &mut usize,
) -> Option<Summarized<'s>> {
    // `isSummarized(key)`, else the pure-legacy bare id; then the record and short ref of
    // whichever matched.
    let found = match (
        key.and_then(|k| state.summarized_near(k, hint)),
        &msg.tool_call_id,
    ) {
        (Some(found), _) => found,
        (None, JsIdOf::Str(id)) if state.has_legacy_bare_record(id.as_ref()) => Summarized {
            record: state.record(id.as_ref()),
            short_ref: state.short_ref(id.as_ref()),
            short_ref_exact: state.short_ref_exact(id.as_ref()),
        },
        _ => return None,
    };
    if let (Some(matcher), Some(rec)) = (protection, found.record)
        && record_is_protected(matcher, rec)
    {
        return None;
    }
    if !in_grace.is_empty() && key.is_some_and(|k| in_grace.contains(k)) {
        return None;
    }
    Some(found)
}

/// The text of the stub of toolResult `index` showing `found` (`spill_ref_only`: see
/// [`spill_stub`]).
pub(crate) fn stub_text(index: usize, found: Summarized<'_>, spill_ref_only: bool) -> Text {
    if let Some(exact) = found.short_ref_exact {
        let reference = Piece::js(exact);
        return match found.record {
            Some(rec) if rec.spill_path.is_truthy() => spill_stub(rec, reference, spill_ref_only),
            _ => summary_stub(reference),
        };
    }
    match (found.record, found.short_ref) {
        (Some(rec), short) if rec.spill_path.is_truthy() => {
            let reference = match short {
                Some(short) => Piece::Lit(short.to_owned()),
                None => Piece::ToolCallId(index),
            };
            spill_stub(rec, reference, spill_ref_only)
        }
        (_, Some(short)) => summary_stub_text(short),
        (_, None) => summary_stub(Piece::ToolCallId(index)),
    }
}

const SUMMARY_STUB_HEAD: &str = "[Summarized in pruner summary, ref `";
const SUMMARY_STUB_TAIL: &str = "`. Use context_tree_query to retrieve full output.]";

/// [`summary_stub`] for a literal ref, built in one allocation.
pub(crate) fn summary_stub_text(reference: &str) -> Text {
    let mut text =
        String::with_capacity(SUMMARY_STUB_HEAD.len() + reference.len() + SUMMARY_STUB_TAIL.len());
    text.push_str(SUMMARY_STUB_HEAD);
    text.push_str(reference);
    text.push_str(SUMMARY_STUB_TAIL);
    Text(vec![Piece::Lit(text)])
}

/// `[Summarized in pruner summary, ref `<ref>`. Use context_tree_query to retrieve full output.]`
pub(crate) fn summary_stub(reference: Piece) -> Text {
    let mut text = Text::default();
    text.lit(SUMMARY_STUB_HEAD);
    text.push(reference);
    text.lit(SUMMARY_STUB_TAIL);
    text
}

/// The six-line spill stub; with `ref_only` (ours, for a host whose model has no tool that
/// reads local files) its last two lines are one that names only the ref, and says how a
/// long answer comes in parts.
pub(crate) fn spill_stub(rec: &Record, reference: Piece, ref_only: bool) -> Text {
    let mut text = Text::default();
    text.lit("[Oversized output spilled to file \u{2014} ");
    text.lit(&template_or(&rec.spill_bytes, "?"));
    text.lit(" bytes.]\nTool: ");
    text.push_field(&rec.tool_name);
    text.lit("\nPreview (head):\n");
    if !rec.result_preview.is_nullish() {
        text.push_field(&rec.result_preview);
    }
    if ref_only {
        text.lit("\nFull output \u{2014} use context_tree_query with ref `");
        text.push(reference);
        text.lit(SPILL_PARTS);
        return text;
    }
    text.lit("\nFull output \u{2014} read this file (offset/limit supported): ");
    text.push_field(&rec.spill_path);
    text.lit("\nOr use context_tree_query with ref `");
    text.push(reference);
    text.lit("`.");
    text
}

/// The end of a ref-only spill stub: the query cuts an answer at 2000 lines / 50 KB, and a
/// cut answer names the ref of its next part.
const SPILL_PARTS: &str = "` (an answer over 2000 lines or 50 KB comes in parts, \
    each naming the ref of the next).";

/// Phase 1 over the whole list: `None` when no toolResult is replaced (tests: the render
/// defers the stub texts).
#[cfg(test)]
pub(crate) fn stub_replace<S: IdStr, St: RenderState + ?Sized>(
    msgs: &[MsgView<S>],
    state: &St,
    protection: Option<&dyn Protection>,
    in_grace: &HashSet<String>,
) -> Option<Vec<Item>> {
    let mut phase1 = Phase1::default();
    let mut items = stub_replace_deferred(msgs, state, protection, in_grace, &mut phase1);
    if let Some(items) = &mut items {
        phase1.finish(items);
    }
    items
}

/// What phase 1 leaves for the later phases of a render ([`stub_replace_deferred`]).
#[derive(Debug, Default)]
pub(crate) struct Phase1<'s> {
    /// The lookup keys of the tool results.
    pub(crate) keys: ResultKeys,
    /// The stubs whose text is not written yet, by ascending message index.
    deferred: Vec<(usize, Summarized<'s>)>,
    /// Spill stubs name only the ref ([`spill_stub`]).
    pub(crate) spill_ref_only: bool,
}

impl Phase1<'_> {
    /// Phase 1 starting from `keys` (see [`ResultKeys::reusable`]).
    pub(crate) fn with_keys(keys: ResultKeys) -> Self {
        Phase1 {
            keys,
            deferred: Vec::new(),
            spill_ref_only: false,
        }
    }

    /// The text of the stub of message `i` when it is deferred.
    pub(crate) fn stub_text(&self, i: usize) -> Option<Text> {
        let at = self.deferred.binary_search_by_key(&i, |&(at, _)| at).ok()?;
        let &(_, found) = self.deferred.get(at)?;
        Some(stub_text(i, found, self.spill_ref_only))
    }

    /// Message `i` is no longer stubbed with its summary text (phase 1b replaced it).
    pub(crate) fn forget(&mut self, i: usize) {
        if let Ok(at) = self.deferred.binary_search_by_key(&i, |&(at, _)| at) {
            self.deferred.remove(at);
        }
    }

    /// Writes the texts of the deferred stubs still among `items` (in list order).
    pub(crate) fn finish(&self, items: &mut [Item]) {
        let mut deferred = self.deferred.iter().peekable();
        for item in items {
            let Item::Stub { src, text } = item else {
                continue;
            };
            while deferred.next_if(|&&(at, _)| at < *src).is_some() {}
            if let Some(&(_, found)) = deferred.next_if(|&&(at, _)| at == *src) {
                *text = stub_text(*src, found, self.spill_ref_only);
            }
        }
    }
}

/// [`stub_replace`] for the rest of a render, which it leaves `phase1`: the lookup keys, and
/// the stubs' texts. Those are only written by [`Phase1::finish`] once the later phases are
/// done (each [`Item::Stub`] holds an empty text until then), because phase 3 drops most
/// stubbed results; a text it needs before is [`Phase1::stub_text`].
pub(crate) fn stub_replace_deferred<'s, S: IdStr, St: RenderState + ?Sized>(
    msgs: &[MsgView<S>],
    state: &'s St,
    protection: Option<&dyn Protection>,
    in_grace: &HashSet<String>,
    phase1: &mut Phase1<'s>,
) -> Option<Vec<Item>> {
    if !state.may_stub() {
        return None;
    }
    let mut items: Option<Vec<Item>> = None;
    let mut hint = 0;
    let reused = phase1.keys.prefix().min(msgs.len());
    phase1.keys.reserve_for(msgs.len() - reused);
    let mut cursor = 0;
    for (i, msg) in msgs.iter().enumerate() {
        if msg.role != Role::ToolResult {
            continue;
        }
        let key = if i < reused {
            phase1.keys.reused(i, &mut cursor)
        } else {
            phase1.keys.push(i, msg)
        };
        if let Some(found) = stub_with(msg, key, state, protection, in_grace, &mut hint) {
            phase1.deferred.push((i, found));
            let slots = items.get_or_insert_with(|| (0..msgs.len()).map(Item::Keep).collect());
            if let Some(slot) = slots.get_mut(i) {
                *slot = Item::Stub {
                    src: i,
                    text: Text::default(),
                };
            }
        }
    }
    phase1.keys.set_complete();
    items
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::ProtectedMatcher;
    use crate::render::grace::in_grace_keys;
    use crate::render::testing::{
        TestState, assistant, rec, rec_at, spilled, tc, tool_result, user,
    };
    use crate::view::Ts;

    fn lit(text: &Text) -> &str {
        text.as_literal().unwrap_or("<pieces>")
    }

    fn run(msgs: &[MsgView], state: &TestState, protection: Option<&dyn Protection>) -> Vec<Item> {
        stub_replace(msgs, state, protection, &HashSet::new())
            .unwrap_or_else(|| (0..msgs.len()).map(Item::Keep).collect())
    }

    fn stub_text(item: &Item) -> Option<&Text> {
        match item {
            Item::Stub { text, .. } => Some(text),
            _ => None,
        }
    }

    #[test]
    fn summarized_occurrence_gets_the_summary_stub_with_its_short_ref() {
        let state = TestState::default()
            .record("tc1@300", rec("bash"))
            .short_ref_of("tc1@300", "t1");
        let items = run(&[tool_result("tc1", 300.0)], &state, None);
        let text = stub_text(&items[0]).map(lit);
        assert_eq!(
            text,
            Some(
                "[Summarized in pruner summary, ref `t1`. Use context_tree_query to retrieve full output.]"
            )
        );
    }

    #[test]
    fn nothing_summarized_is_a_no_op() {
        let state = TestState::default();
        assert!(
            stub_replace(
                &[user(1.0), tool_result("a", 2.0)],
                &state,
                None,
                &HashSet::new()
            )
            .is_none()
        );
    }

    #[test]
    fn live_reuse_of_a_summarized_bare_id_stays_verbatim() {
        let state = TestState::default()
            .record("bash_23@1150", rec("bash"))
            .short_ref_of("bash_23@1150", "t1");
        let items = run(
            &[
                tool_result("bash_23", 1150.0),
                tool_result("bash_23", 9000.0),
            ],
            &state,
            None,
        );
        assert!(stub_text(&items[0]).is_some());
        assert_eq!(items[1], Item::Keep(1));
    }

    #[test]
    fn timestamped_result_without_a_record_is_never_stubbed() {
        // A record exists only under a different occurrence; no legacy bare record.
        let state = TestState::default().record("x@1", rec("bash"));
        assert!(stub_replace(&[tool_result("x", 2.0)], &state, None, &HashSet::new()).is_none());
    }

    #[test]
    fn pure_legacy_record_stubs_with_the_raw_id_as_ref() {
        // Worked example (04 section 8): no timestamp, legacy record `L`, no short ref.
        let state = TestState::default().legacy("L", rec("bash"));
        let mut msg = tool_result("L", 0.0);
        msg.timestamp = Ts::Absent;
        let items = run(&[msg], &state, None);
        let text = stub_text(&items[0]).cloned().unwrap_or_default();
        assert_eq!(
            text.0,
            vec![
                Piece::Lit("[Summarized in pruner summary, ref `".into()),
                Piece::ToolCallId(0),
                Piece::Lit("`. Use context_tree_query to retrieve full output.]".into()),
            ]
        );
    }

    #[test]
    fn accepted_legacy_collision_stubs_a_live_timestamped_result() {
        let state = TestState::default()
            .legacy("bash_7", rec("bash"))
            .short_ref_of("bash_7", "t3");
        let items = run(&[tool_result("bash_7", 5000.0)], &state, None);
        assert!(stub_text(&items[0]).is_some_and(|t| lit(t).contains("`t3`")));
    }

    #[test]
    fn mixed_legacy_and_occurrence_fails_closed() {
        // hasLegacyBareRecord is false for mixed ids: a live result stays raw.
        let state = TestState::default()
            .record("m", rec("bash"))
            .record("m@5", rec("bash"));
        assert!(stub_replace(&[tool_result("m", 6.0)], &state, None, &HashSet::new()).is_none());
    }

    #[test]
    fn dedup_alias_is_stubbed_and_protection_reads_the_original() {
        let original = rec_at("read", "/x/skills/a/b.md");
        let state = TestState::default()
            .record("orig@1", original)
            .alias("dup@2", "orig@1")
            .short_ref_of("dup@2", "t5");
        let items = run(&[tool_result("dup", 2.0)], &state, None);
        assert!(stub_text(&items[0]).is_some_and(|t| lit(t).contains("`t5`")));
        let matcher = ProtectedMatcher::new::<&str, &str>(&[], &["**/skills/**/*.md"]);
        assert!(
            stub_replace(
                &[tool_result("dup", 2.0)],
                &state,
                Some(&matcher as &dyn Protection),
                &HashSet::new()
            )
            .is_none()
        );
    }

    #[test]
    fn remembered_verdicts_belong_to_the_rule_that_gave_them() {
        // One state (one record) rendered against rules that disagree, alternately: each
        // render gives its own rule's verdict, however many times it was remembered.
        let state = TestState::default().record("r@1", rec_at("read", "a/skills/x.md"));
        let msgs = [tool_result("r", 1.0)];
        let by_path = ProtectedMatcher::new::<&str, &str>(&[], &["**/skills/**/*.md"]);
        let other_path = ProtectedMatcher::new::<&str, &str>(&[], &["**/*.rs"]);
        let by_path_again = by_path.clone();
        for _ in 0..3 {
            for (rule, protected) in [
                (&by_path, true),
                (&other_path, false),
                (&by_path_again, true),
                (&ProtectedMatcher::default(), false),
            ] {
                let out = stub_replace(
                    &msgs,
                    &state,
                    Some(rule as &dyn Protection),
                    &HashSet::new(),
                );
                assert_eq!(out.is_none(), protected, "{rule:?}");
            }
        }
        // The memo is no part of the record's value, and a clone starts without it.
        let record = rec_at("read", "a/skills/x.md");
        record.protection.set(by_path.memo_key(), true);
        assert_eq!(record.protection.get(by_path.memo_key()), Some(true));
        assert_eq!(record.protection.get(other_path.memo_key()), None);
        assert_eq!(record.clone().protection.get(by_path.memo_key()), None);
        assert_eq!(record, rec_at("read", "a/skills/x.md"));
        assert_ne!(by_path.memo_key(), other_path.memo_key());
        assert_eq!(ProtectedMatcher::default().memo_key(), 0);
    }

    #[test]
    fn render_time_protection_keeps_a_summarized_record_verbatim() {
        let state =
            TestState::default().record("r@1", rec_at("read", "C:\\w\\skills\\x\\SKILL.md"));
        let msgs = [tool_result("r", 1.0)];
        let matcher = ProtectedMatcher::new::<&str, &str>(&[], &["**/skills/**/*.md"]);
        assert!(
            stub_replace(
                &msgs,
                &state,
                Some(&matcher as &dyn Protection),
                &HashSet::new()
            )
            .is_none()
        );
        // Without a protection config it is still stubbed.
        assert!(stub_replace(&msgs, &state, None, &HashSet::new()).is_some());
        // Protected by tool name.
        let by_name = ProtectedMatcher::new::<&str, &str>(&["read"], &[]);
        assert!(
            stub_replace(
                &msgs,
                &state,
                Some(&by_name as &dyn Protection),
                &HashSet::new()
            )
            .is_none()
        );
    }

    #[test]
    fn spill_stub_exact_text() {
        // Worked example (04 section 8).
        let record = spilled("fetch", "/b/s_7.txt", Some(99.0), Some("HEAD"));
        let state = TestState::default()
            .record("s@7", record)
            .short_ref_of("s@7", "t4");
        let items = run(&[tool_result("s", 7.0)], &state, None);
        assert_eq!(
            stub_text(&items[0]).map(lit),
            Some(
                "[Oversized output spilled to file \u{2014} 99 bytes.]\nTool: fetch\nPreview (head):\nHEAD\nFull output \u{2014} read this file (offset/limit supported): /b/s_7.txt\nOr use context_tree_query with ref `t4`."
            )
        );
    }

    #[test]
    fn ref_only_spill_stub_names_no_path() {
        let record = spilled("fetch", "/b/s_7.txt", Some(99.0), Some("HEAD"));
        let state = TestState::default()
            .record("s@7", record)
            .short_ref_of("s@7", "t4");
        let mut phase1 = Phase1 {
            spill_ref_only: true,
            ..Phase1::default()
        };
        let mut items = stub_replace_deferred(
            &[tool_result("s", 7.0)],
            &state,
            None,
            &HashSet::new(),
            &mut phase1,
        )
        .unwrap_or_default();
        phase1.finish(&mut items);
        assert_eq!(
            stub_text(&items[0]).map(lit),
            Some(
                "[Oversized output spilled to file \u{2014} 99 bytes.]\nTool: fetch\nPreview (head):\nHEAD\nFull output \u{2014} use context_tree_query with ref `t4` (an answer over 2000 lines or 50 KB comes in parts, each naming the ref of the next)."
            )
        );
    }

    #[test]
    fn spill_stub_tolerates_absent_bytes_and_preview() {
        let record = spilled("fetch", "/b/p.txt", None, None);
        let state = TestState::default()
            .record("p@1", record)
            .short_ref_of("p@1", "t9");
        let items = run(&[tool_result("p", 1.0)], &state, None);
        assert_eq!(
            stub_text(&items[0]).map(lit),
            Some(
                "[Oversized output spilled to file \u{2014} ? bytes.]\nTool: fetch\nPreview (head):\n\nFull output \u{2014} read this file (offset/limit supported): /b/p.txt\nOr use context_tree_query with ref `t9`."
            )
        );
    }

    #[test]
    fn empty_spill_path_is_not_a_spill() {
        let record = spilled("fetch", "", None, None);
        let state = TestState::default()
            .record("p@1", record)
            .short_ref_of("p@1", "t9");
        let items = run(&[tool_result("p", 1.0)], &state, None);
        assert!(stub_text(&items[0]).is_some_and(|t| lit(t).starts_with("[Summarized")));
    }

    fn recovery(id: &str, ts: f64) -> MsgView {
        let mut m = tool_result(id, ts);
        m.is_recovery = true;
        m
    }

    fn grace_session(later_users: usize) -> Vec<MsgView> {
        let mut msgs = vec![user(1.0), assistant(2.0, vec![tc("q")]), recovery("q", 3.0)];
        for k in 0..later_users {
            msgs.push(user(10.0 + k as f64));
        }
        msgs
    }

    fn graced_render(
        msgs: &[MsgView],
        state: &TestState,
        k: f64,
        protection: Option<&dyn Protection>,
    ) -> Option<Vec<Item>> {
        stub_replace(msgs, state, protection, &in_grace_keys(msgs, k))
    }

    #[test]
    fn recovery_output_verbatim_in_grace_and_stubbed_past_it() {
        let state = TestState::default()
            .record("q@3", rec("context_tree_query"))
            .short_ref_of("q@3", "t1");
        assert!(graced_render(&grace_session(0), &state, 3.0, None).is_none());
        assert!(graced_render(&grace_session(3), &state, 3.0, None).is_none());
        assert!(graced_render(&grace_session(4), &state, 3.0, None).is_some());
        // K = 0 stubs at once.
        assert!(graced_render(&grace_session(0), &state, 0.0, None).is_some());
    }

    #[test]
    fn grace_only_covers_recovery_outputs() {
        let state = TestState::default().record("b@3", rec("bash"));
        let msgs = [
            user(1.0),
            assistant(2.0, vec![tc("b")]),
            tool_result("b", 3.0),
        ];
        assert!(graced_render(&msgs, &state, 3.0, None).is_some());
    }

    #[test]
    fn protection_wins_with_grace_off() {
        let state = TestState::default().record("q@3", rec("context_tree_query"));
        let matcher = ProtectedMatcher::new::<&str, &str>(&["context_tree_query"], &[]);
        assert!(
            graced_render(
                &grace_session(9),
                &state,
                0.0,
                Some(&matcher as &dyn Protection)
            )
            .is_none()
        );
    }

    #[test]
    fn spilled_recovery_output_is_verbatim_in_grace_and_spill_stubbed_after() {
        let record = spilled("context_tree_query", "/b/q_3.txt", Some(70000.0), Some("P"));
        let state = TestState::default()
            .record("q@3", record)
            .short_ref_of("q@3", "t2");
        assert!(graced_render(&grace_session(1), &state, 3.0, None).is_none());
        let items = graced_render(&grace_session(5), &state, 3.0, None).unwrap_or_default();
        assert!(items.get(2).and_then(stub_text).is_some_and(|t| {
            lit(t).starts_with("[Oversized output spilled to file \u{2014} 70000 bytes.]")
        }));
    }

    #[test]
    fn a_graced_occurrence_does_not_protect_another_occurrence_of_the_id() {
        let state = TestState::default()
            .record("q@3", rec("context_tree_query"))
            .record("q@50", rec("context_tree_query"));
        let mut msgs = grace_session(5);
        msgs.push(assistant(49.0, vec![tc("q")]));
        msgs.push(recovery("q", 50.0));
        let items = graced_render(&msgs, &state, 3.0, None).unwrap_or_default();
        assert!(stub_text(&items[2]).is_some());
        assert_eq!(items[9], Item::Keep(9));
    }
}

use super::accept::Containers;
use super::drop::ordered_match;
use super::range::resolve_range;
use super::*;
use crate::jsstr::JsStr;
use crate::render::testing::{
    Chain, TestState, assistant, custom, ok, reused_id_turns, summary, synthetic_user, tc,
    tool_result, user,
};
use crate::view::{Block, SummaryRefs, Ts};

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

fn apply(msgs: &[MsgView], state: &TestState, strip: bool) -> (Option<Vec<Item>>, Vec<Diagnostic>) {
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
    // 2.10.0: a chain-anchor custom message opens a range as a user message does; a pruner
    // custom message (`context-prune-...`) does not.
    let mut anchored = chain_msgs();
    anchored[0] = custom(100.0);
    assert_eq!(resolve_range(e, &anchored), None);
    anchored[0].anchor = true;
    assert_eq!(
        resolve_range(e, &anchored),
        Some(Range { start: 0, end: 3 })
    );
    anchored.push(user(100.0));
    assert_eq!(resolve_range(e, &anchored), None);
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
    let state =
        TestState::default().chain(Chain::new("b1", 100.0, 400.0, 9.0).dropped(&["zz@5", "tc1"]));
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
    let state = TestState::default().chain(Chain::new("b1", 100.0, 400.0, 9.0).dropped(&["tc1"]));
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
        [
            "<compressed-chain id=\"b2\" tools=\"t7\">\nS\n\n<protected-output tool=\"<name 2>\">\n<text 2>\n</protected-output>\n</compressed-chain>"
        ]
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
        [
            "<compressed-chain id=\"b1\" tools=\"\">\n\n\n<protected-output tool=\"<name 2>\">\nSTUB\n</protected-output>\n</compressed-chain>"
        ]
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
        [
            "<compressed-chain id=\"b2\" tools=\"\">\nsee FIRST {b2} and {b2} and {b3}\n</compressed-chain>"
        ]
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
    assert!(
        diags
            .iter()
            .all(|d| d.kind != DiagnosticKind::UnresolvedRange)
    );
    // A string final timestamp never matches; the detail prints it raw.
    let state =
        TestState::default().chain(Chain::new("b1", 100.0, 0.0, 1.0).final_ts(JsField::str("400")));
    let (out, diags) = apply(&chain_msgs(), &state, false);
    assert!(out.is_none());
    assert_eq!(diags[0].detail, "blockId=b1 start=100 final=400");
    // compressedAt is copied as persisted (a missing one omits the key).
    let mut chain = Chain::new("b1", 100.0, 400.0, 0.0);
    chain.0.compressed_at = JsField::Absent;
    let slot = chain.0.slot;
    let (out, _) = apply(&chain_msgs(), &TestState::default().chain(chain), false);
    // The item names the entry; the binding copies its `compressedAt` (absent here).
    assert!(
        out.unwrap_or_default()
            .iter()
            .any(|it| matches!(it, Item::Synthetic { chain_slot, .. } if *chain_slot == slot))
    );
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
            let pairwise = ranges
                .iter()
                .enumerate()
                .any(|(j, other)| j != k && range.start > other.start && range.start < other.end);
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
        let mut summaries = Summaries::new(&state, Some(&entries));
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

"""PrunerState: reconstruction from context-prune-* entries (spec 02, 03) and the lookups.

Expected values come from the spec and from the reference's own tests (src/indexer.test.ts,
src/frontier.test.ts) and conformance vectors, never from this implementation's output.
"""

from __future__ import annotations

import gzip
import json
import math
import re
import tarfile
from pathlib import Path
from typing import Any, Optional

import pytest

from pi_condense.session import SessionFile
from pi_condense.state import PrunerState, normalize_frontier, normalize_stats
from pi_condense.tools.query import ContextTreeQuery

# ---------------------------------------------------------------------------- helpers


def record(
    tool_call_id: str,
    text: str,
    ts: Optional[float] = None,
    *,
    name: str = "bash",
    batch_ts: float = 1000,
    turn: int = 0,
    **extra: Any,
) -> dict[str, Any]:
    r: dict[str, Any] = {
        "toolCallId": tool_call_id,
        "toolName": name,
        "args": {"cmd": "ls"},
        "resultText": text,
        "isError": False,
        "turnIndex": turn,
        "timestamp": batch_ts,
    }
    if ts is not None:
        r["resultTimestamp"] = ts
    r.update(extra)
    return r


def custom(custom_type: str, data: Any) -> dict[str, Any]:
    return {"type": "custom", "customType": custom_type, "data": data}


def index_entry(*records: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return custom("context-prune-index", {"toolCalls": list(records), **extra})


def ref(short_id: str, tool_call_id: str, ts: Optional[float] = None) -> dict[str, Any]:
    r: dict[str, Any] = {"shortId": short_id, "toolCallId": tool_call_id}
    if ts is not None:
        r["resultTimestamp"] = ts
    return r


def summary(content: Any, *refs: dict[str, Any], details: Any = None) -> dict[str, Any]:
    if details is None:
        details = {"toolCallRefs": list(refs), "toolNames": [], "turnIndex": 0, "timestamp": 0}
    return {
        "type": "custom_message",
        "customType": "context-prune-summary",
        "content": content,
        "display": False,
        "details": details,
    }


def alias(
    new_id: Any, orig_id: Any, new_ts: Optional[float] = None, orig_ts: Optional[float] = None
) -> dict[str, Any]:
    data: dict[str, Any] = {"newToolCallId": new_id, "originalToolCallId": orig_id}
    if new_ts is not None:
        data["newResultTimestamp"] = new_ts
    if orig_ts is not None:
        data["originalResultTimestamp"] = orig_ts
    return custom("context-prune-dedup-alias", data)


def chain(block_id: Any, start: Any, **fields: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "blockId": block_id,
        "startUserTimestamp": start,
        "droppedToolCallIds": [],
        "finalAssistantTimestamp": 0 if not isinstance(start, (int, float)) else start + 100,
        "toolRefs": [],
        "compressedAt": 9000,
    }
    data.update(fields)
    return custom("context-prune-chain", data)


def frontier(tool_call_id: Any, **fields: Any) -> dict[str, Any]:
    return custom("context-prune-frontier", {"lastAttemptedToolCallId": tool_call_id, **fields})


def stats(**fields: Any) -> dict[str, Any]:
    return custom("context-prune-stats", fields)


def rebuild(*entries: dict[str, Any]) -> PrunerState:
    return PrunerState.from_branch(list(entries))


def got(st: PrunerState, id_or_ref: str) -> dict[str, Any]:
    r = st.get_record(id_or_ref)
    assert r is not None, id_or_ref
    return r


def got_chain(st: PrunerState, block_id: str) -> dict[str, Any]:
    entry = st.find_chain_by_block_id(block_id)
    assert entry is not None, block_id
    return entry


def texts(records: list[dict[str, Any]]) -> list[str]:
    return [r["resultText"] for r in records]


# ------------------------------------------- reference indexer.test.ts: occurrence keying


def test_two_batches_reusing_one_provider_id_keep_both_records() -> None:
    st = PrunerState()
    st.add_batch([record("bash_23", "FIRST", 1150, batch_ts=1000)])
    st.add_batch([record("bash_23", "SECOND", 2150, batch_ts=2000, turn=1)])
    assert got(st, "bash_23@1150")["resultText"] == "FIRST"
    assert got(st, "bash_23@2150")["resultText"] == "SECOND"


def test_is_summarized_is_keyed_by_occurrence() -> None:
    st = PrunerState()
    st.add_batch([record("bash_23", "FIRST", 1150)])
    assert st.is_summarized("bash_23@1150")
    assert not st.is_summarized("bash_23@3150")


def test_records_for_bare_id_are_chronological() -> None:
    st = PrunerState()
    st.add_batch([record("bash_23", "SECOND", 2150, batch_ts=2000)])
    st.add_batch([record("bash_23", "FIRST", 1150, batch_ts=1000, turn=1)])
    assert texts(st.records_for_id("bash_23")) == ["FIRST", "SECOND"]


def test_occurrence_key_or_short_ref_returns_exactly_one() -> None:
    st = PrunerState()
    st.add_batch([record("bash_23", "FIRST", 1150)])
    st.register_refs([ref("t1", "bash_23", 1150)])
    assert texts(st.records_for_id("bash_23@1150")) == ["FIRST"]
    assert texts(st.records_for_id("t1")) == ["FIRST"]


def test_short_refs_resolve_per_occurrence() -> None:
    st = PrunerState()
    st.add_batch([record("bash_23", "FIRST", 1150)])
    st.add_batch([record("bash_23", "SECOND", 2150, batch_ts=2000)])
    st.register_refs([ref("t1", "bash_23", 1150), ref("t2", "bash_23", 2150)])
    assert got(st, "t1")["resultText"] == "FIRST"
    assert got(st, "t2")["resultText"] == "SECOND"
    assert st.short_ref("bash_23@2150") == "t2"


def test_allocate_refs_mints_refs_carrying_the_occurrence_timestamp() -> None:
    st = PrunerState()
    refs = st.allocate_refs([("bash_23", 1150)])
    assert refs == [{"shortId": "t1", "toolCallId": "bash_23", "resultTimestamp": 1150}]
    assert list(refs[0]) == ["shortId", "toolCallId", "resultTimestamp"]
    # A call without a result timestamp gets no resultTimestamp key.
    assert st.allocate_refs([("x", None)]) == [{"shortId": "t2", "toolCallId": "x"}]


def test_content_dedup_does_not_alias_across_batches_sharing_an_id() -> None:
    st = PrunerState()
    st.add_batch([record("bash_23", "FIRST", 1150)])
    st.add_batch([record("bash_23", "SECOND", 2150, batch_ts=2000)])
    assert st.lookup_by_content("bash", "FIRST") == "bash_23@1150"
    assert st.lookup_by_content("bash", "SECOND") == "bash_23@2150"
    assert st.lookup_by_content("bash", "UNSEEN") is None


def test_register_duplicate_reuses_the_short_ref() -> None:
    st = PrunerState()
    st.add_batch([record("bash_23", "SAME", 1150)])
    st.register_refs([ref("t1", "bash_23", 1150)])
    assert st.register_duplicate("bash_99@4150", "bash_23@1150")
    assert st.is_summarized("bash_99@4150")
    assert got(st, "bash_99@4150")["resultText"] == "SAME"
    assert st.short_ref("bash_99@4150") == "t1"
    # Equal keys: no-op, nothing to persist.
    assert not st.register_duplicate("bash_23@1150", "bash_23@1150")


def test_records_for_id_includes_dedup_alias_with_its_own_timestamp() -> None:
    st = PrunerState()
    st.add_batch([record("bash_23", "SAME", 1150)])
    st.register_duplicate("bash_23@9150", "bash_23@1150")
    records = st.records_for_id("bash_23")
    assert texts(records) == ["SAME", "SAME"]
    assert [r["resultTimestamp"] for r in records] == [1150, 9150]
    # The alias occurrence is a copy; the original record is untouched.
    assert records[0] is st.get_record("bash_23@1150")
    assert records[1] is not records[0]


def test_summary_body_lookups_are_occurrence_keyed() -> None:
    st = PrunerState()
    assert st.register_summary_body(["bash_23@1150"], "summary of FIRST")
    assert st.has_summary_covering_any(["bash_23@1150"])
    assert not st.has_summary_covering_any(["bash_23@3150"])
    assert st.per_batch_summary_text(["bash_23@1150"]) == "summary of FIRST"
    # registerSummaryBody needs both keys and text.
    assert not st.register_summary_body([], "x")
    assert not st.register_summary_body(["a"], "")


# ---------------------------------- reference indexer.test.ts: fail-closed asymmetry


def test_single_occurrence_bare_id_is_not_summarized_but_resolves() -> None:
    st = PrunerState()
    st.add_batch([record("bash_23", "FIRST", 1150)])
    assert not st.is_summarized("bash_23")
    assert st.resolve("bash_23") == "bash_23@1150"
    assert got(st, "bash_23")["resultText"] == "FIRST"


def test_two_occurrences_bare_id_is_ambiguous() -> None:
    st = PrunerState()
    st.add_batch([record("bash_23", "FIRST", 1150)])
    st.add_batch([record("bash_23", "SECOND", 2150, batch_ts=2000)])
    assert st.resolve("bash_23") is None
    assert st.get_record("bash_23") is None
    assert texts(st.records_for_id("bash_23")) == ["FIRST", "SECOND"]


def test_legacy_bare_record_rung() -> None:
    legacy = PrunerState()
    legacy.add_batch([record("bash_1", "OLD")])
    assert legacy.has_legacy_bare_record("bash_1")

    occurrence = PrunerState()
    occurrence.add_batch([record("bash_2", "NEW", 1150)])
    assert not occurrence.has_legacy_bare_record("bash_2")

    mixed = PrunerState()
    mixed.add_batch([record("bash_3", "OLD", batch_ts=1000)])
    mixed.add_batch([record("bash_3", "NEW", 2150, batch_ts=2000)])
    assert not mixed.has_legacy_bare_record("bash_3")
    assert texts(mixed.records_for_id("bash_3")) == ["OLD", "NEW"]


def test_alias_entry_before_summary_still_inherits_the_short_ref() -> None:
    st = rebuild(
        index_entry(record("bash_23", "FIRST", 1150)),
        alias("bash_99", "bash_23", 4150, 1150),
        summary("summary text", ref("t1", "bash_23", 1150)),
    )
    assert st.short_ref("bash_99@4150") == "t1"


def test_rebuild_occurrence_records_refs_and_alias() -> None:
    st = rebuild(
        index_entry(
            record("bash_23", "FIRST", 1150, batch_ts=1000),
            record("bash_23", "SECOND", 2150, batch_ts=2000, turn=1),
        ),
        summary("summary text", ref("t1", "bash_23", 1150), ref("t2", "bash_23", 2150)),
        alias("bash_99", "bash_23", 4150, 1150),
    )
    assert got(st, "t1")["resultText"] == "FIRST"
    assert got(st, "t2")["resultText"] == "SECOND"
    assert got(st, "bash_99@4150")["resultText"] == "FIRST"
    assert st.short_ref("bash_99@4150") == "t1"
    assert st.per_batch_summary_text(["bash_23@2150"]) == "summary text"


def test_query_tool_vector_legacy_and_occurrence_records() -> None:
    # Spec 06 A.2 vector: legacy bash_23 (OLD, turn 0) and bash_23@2150 (NEW, error, turn 1).
    st = rebuild(
        index_entry(record("bash_23", "OLD", turn=0, batch_ts=1000)),
        index_entry(record("bash_23", "NEW", 2150, turn=1, batch_ts=2000, isError=True)),
    )
    records = st.records_for_id("bash_23")
    assert [(r["resultText"], r.get("resultTimestamp"), r["turnIndex"]) for r in records] == [
        ("OLD", None, 0),
        ("NEW", 2150, 1),
    ]
    assert st.records_for_id("nope") == []


# -------------------------------------------------- backfill (reference + spec 03 §10)


def test_backfilled_records_index_and_register_refs_without_seeding() -> None:
    st = PrunerState()
    refs = st.allocate_refs([("a", 1), ("b", 2)])
    keys = st.add_backfilled(
        [record("a", "out-a", 1, turn=-1, batch_ts=1), record("b", "out-b", 2, turn=-1)], refs
    )
    assert keys == ["a@1", "b@2"]
    assert got(st, "a")["toolCallId"] == "a"
    assert st.resolve(refs[0]["shortId"]) == "a@1"
    assert st.lookup_by_content("bash", "out-a") is None


def test_backfilled_entry_replays_without_seeding_dedup() -> None:
    refs = [ref("t1", "a", 1)]
    st = rebuild(index_entry(record("a", "out-a", 1, turn=-1), backfilled=True, refs=refs))
    assert got(st, "a")["toolCallId"] == "a"
    assert st.resolve("t1") == "a@1"
    assert st.lookup_by_content("bash", "out-a") is None
    # A later non-backfilled identical result becomes the canonical.
    st2 = rebuild(
        index_entry(record("a", "out-a", 1, turn=-1), backfilled=True, refs=refs),
        index_entry(record("c", "out-a", 5)),
    )
    assert st2.lookup_by_content("bash", "out-a") == "c@5"


def test_pre_change_entries_without_backfilled_still_seed_dedup() -> None:
    st = rebuild(index_entry(record("a", "out-a", 1)))
    assert st.lookup_by_content("bash", "out-a") == "a@1"


def test_refs_on_a_non_backfilled_index_entry_are_ignored() -> None:
    st = rebuild(index_entry(record("a", "out-a", 1), refs=[ref("t7", "a", 1)]))
    assert st.short_ref("a@1") is None
    assert st.next_short_ref_number == 1


def test_backfilled_refs_are_used_raw() -> None:
    # Raw refs keep a non-number resultTimestamp in the key (not normalized like summaries).
    st = rebuild(
        index_entry(record("a", "x", 1), backfilled=True, refs=[ref("t3", "a", 1)]),
        index_entry(
            backfilled=True, refs=[{"shortId": "t8", "toolCallId": "z", "resultTimestamp": "9"}]
        ),
    )
    assert st.short_ref("z@9") == "t8"
    assert st.next_short_ref_number == 9


def test_full_legacy_session_round_trip() -> None:
    chain_data = {
        "blockId": "b1",
        "startUserTimestamp": 50,
        "droppedToolCallIds": ["tc1", "tc2"],
        "droppedOccurrenceKeys": ["tc1@110", "tc2@210"],
        "finalAssistantTimestamp": 300,
        "toolRefs": ["t1", "t2"],
        "compressedAt": 12345,
        "rangeSummaryText": "fused range summary of tc1+tc2",
    }
    st = rebuild(
        index_entry(
            record("tc1", "listing", 110, batch_ts=100),
            {
                **record("tc2", "file contents", 210, name="read", batch_ts=100),
                "args": {"path": "f"},
            },
        ),
        summary("summarized tc1 and tc2", ref("t1", "tc1", 110), ref("t2", "tc2", 210)),
        custom("context-prune-chain", dict(chain_data)),
    )
    entries = st.chain_entries()
    assert entries == [chain_data]
    assert "bodySource" not in entries[0]
    assert got(st, "t1")["resultText"] == "listing"
    assert got(st, "t2")["resultText"] == "file contents"
    assert st.resolve("t1") == "tc1@110"
    assert st.resolve("t2") == "tc2@210"
    assert st.lookup_by_content("bash", "listing") == "tc1@110"
    assert st.lookup_by_content("read", "file contents") == "tc2@210"
    assert st.next_block_number == 2


def test_spilled_record_uses_its_content_hash() -> None:
    spilled = record(
        "s",
        "",
        7,
        spillPath="/b/s_7.txt",
        spillBytes=99,
        resultPreview="HEAD",
        contentHash="d482f895bb0f16b45f7163b0407f1fefaf01f577",
    )
    st = rebuild(index_entry(spilled))
    # Known vector (spec 11 §10): hashToolResult("bash", "hello\r\nworld  \n").
    assert st.lookup_by_content("bash", "hello\r\nworld  \n") == "s@7"
    assert st.lookup_by_content("bash", "") is None
    assert st.get_record("s@7") is spilled


# ------------------------------------------------------------ legacy shapes (spec 02)


def test_legacy_records_without_result_timestamp_keep_bare_keys() -> None:
    st = rebuild(
        index_entry(record("bash_7", "OLD")),
        alias("bash_8", "bash_7"),
    )
    assert got(st, "bash_7")["resultText"] == "OLD"
    assert st.has_legacy_bare_record("bash_7")
    assert not st.has_legacy_bare_record("bash_23")
    assert st.is_summarized("bash_7")
    assert st.is_summarized("bash_8")
    assert st.resolve("bash_8") == "bash_7"
    assert st.index.aliases() == [("bash_8", "bash_7")]


def test_legacy_summary_tool_call_ids_register_no_alias() -> None:
    details = {"toolCallIds": ["call_1", 5, "call_2"]}
    st = rebuild(
        index_entry(record("call_1", "A"), record("call_2", "B")),
        summary("legacy body", details=details),
    )
    # shortId === toolCallId: no short ref, the stub falls back to the raw id.
    assert st.short_ref("call_1") is None
    assert st.index.short_refs() == []
    assert st.next_short_ref_number == 1
    # The body is keyed by the bare ids (non-string ids dropped).
    assert st.index.summary_bodies() == [(["call_1", "call_2"], "legacy body")]


def test_legacy_tn_shaped_ids_raise_the_counter() -> None:
    st = rebuild(summary("body", details={"toolCallIds": ["t41"]}))
    assert st.short_ref("t41") is None
    assert st.next_short_ref_number == 42


def test_summary_refs_are_normalized() -> None:
    details = {
        "toolCallRefs": [
            ref("t1", "a", 10),
            {"shortId": "t2", "toolCallId": "b", "resultTimestamp": "20"},
            {"shortId": 3, "toolCallId": "c"},
            None,
            "t4",
            {"shortId": "t5", "toolCallId": "e", "resultTimestamp": True},
        ],
        # toolCallRefs wins over toolCallIds when it is an array.
        "toolCallIds": ["zzz"],
    }
    st = rebuild(summary("S", details=details))
    assert st.index.short_refs() == [("t1", "a@10"), ("t2", "b"), ("t5", "e")]
    assert st.index.summary_bodies() == [(["a@10", "b", "e"], "S")]
    assert st.next_short_ref_number == 6


def test_summary_with_empty_ids_keeps_body_keys_but_registers_nothing() -> None:
    st = rebuild(summary("S", ref("", "a", 1), ref("t2", "")))
    assert st.index.short_refs() == []
    assert st.next_short_ref_number == 1
    assert st.index.summary_bodies() == [(["a@1", ""], "S")]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("plain body", "plain body"),
        (
            [
                {"type": "text", "text": "one"},
                {"type": "image", "data": "x"},
                {"type": "text", "text": "two"},
            ],
            "one\ntwo",
        ),
        ([{"type": "text", "text": None}, {"type": "text", "text": 5}], "\n5"),
    ],
)
def test_summary_body_text_shapes(content: Any, expected: str) -> None:
    st = rebuild(summary(content, ref("t1", "a", 1)))
    assert st.per_batch_summaries(["a@1"]) == [expected]


@pytest.mark.parametrize("content", ["", None, 42, {"text": "x"}, [], [{"type": "image"}]])
def test_summary_without_text_registers_refs_but_no_body(content: Any) -> None:
    st = rebuild(summary(content, ref("t3", "a", 1)))
    assert st.index.summary_count == 0
    assert st.short_ref("a@1") == "t3"
    assert st.next_short_ref_number == 4


def test_summary_details_shapes_without_refs() -> None:
    st = rebuild(
        summary("A", details=[ref("t1", "a")]),
        summary("B", details="t1"),
        {**summary("C", ref("t9", "c")), "details": None},
    )
    assert st.index.short_refs() == []
    assert st.index.summary_bodies() == [([], "A"), ([], "B"), ([], "C")]


def test_legacy_chain_without_occurrence_keys_uses_dropped_ids() -> None:
    st = rebuild(
        summary("legacy per-batch", details={"toolCallIds": ["tc1"]}),
        chain("b1", 100, droppedToolCallIds=["tc1"], toolRefs=[]),
    )
    (entry,) = st.chain_entries()
    assert "droppedOccurrenceKeys" not in entry
    assert "rangeSummaryText" not in entry
    assert st.per_batch_summary_text(entry["droppedToolCallIds"]) == "legacy per-batch"


def test_legacy_alias_with_one_timestamp() -> None:
    st = rebuild(
        index_entry(record("orig", "X", 100)),
        summary("S", ref("t1", "orig", 100)),
        alias("dup", "orig", None, 100),
    )
    assert st.index.aliases() == [("dup", "orig@100")]
    assert st.short_ref("dup") == "t1"


# ------------------------------------------------------------- short-ref counter (§4)


def test_ref_counter_is_max_over_entries_plus_one() -> None:
    st = rebuild(
        summary("S1", ref("t7", "a", 1)),
        summary("S2", ref("t3", "b", 2)),
    )
    assert st.next_short_ref_number == 8
    assert st.allocate_refs([("c", 3)])[0]["shortId"] == "t8"


def test_burned_numbers_are_reissued_after_reload() -> None:
    st = rebuild(summary("S1", ref("t1", "a", 1), ref("t2", "b", 2)))
    # An oversized batch burns t3..t4 (allocated, never registered).
    burned = st.allocate_refs([("c", 3), ("d", 4)])
    assert [r["shortId"] for r in burned] == ["t3", "t4"]
    assert st.allocate_refs([("e", 5)])[0]["shortId"] == "t5"
    # After a restart the counter is max(registered) + 1 again: t3 is re-issued.
    reloaded = rebuild(summary("S1", ref("t1", "a", 1), ref("t2", "b", 2)))
    assert reloaded.allocate_refs([("e", 5)])[0]["shortId"] == "t3"


def test_gaps_in_refs_are_kept() -> None:
    st = rebuild(summary("S", ref("t1", "a", 1), ref("t4", "b", 2)))
    assert st.resolve("t1") == "a@1"
    assert st.resolve("t4") == "b@2"
    assert st.resolve("t2") is None
    assert st.next_short_ref_number == 5


def test_ref_pattern_is_strict() -> None:
    st = rebuild(summary("S", ref("t12x", "a", 1), ref("T50", "b", 2), ref("t0012", "c", 3)))
    assert st.next_short_ref_number == 13
    assert st.resolve("t12x") == "a@1"


def test_counter_starts_at_one() -> None:
    st = rebuild()
    assert st.next_short_ref_number == 1
    assert st.allocate_refs([("a", 1)])[0]["shortId"] == "t1"


# ------------------------------------------------------------------- aliases (§3, §7)


def test_alias_resolution_order() -> None:
    st = rebuild(
        index_entry(record("a", "A", 1), record("b", "B", 2)),
        summary("S", ref("t1", "a", 1)),
        alias("c", "a", 3, 1),
    )
    assert st.resolve("a@1") == "a@1"
    assert st.resolve("c@3") == "a@1"
    assert st.resolve("t1") == "a@1"
    assert st.resolve("b") == "b@2"
    assert st.resolve("c") is None
    assert st.resolve("zzz") is None
    # lookupToolCalls skips misses, keeps order.
    assert texts(st.lookup_records(["b@2", "zzz", "c@3"])) == ["B", "A"]


def test_alias_shares_ref_so_chain_refs_may_repeat() -> None:
    st = rebuild(
        index_entry(record("orig", "X", 100)),
        summary("S", ref("t1", "orig", 100)),
        alias("dup", "orig", 200, 100),
    )
    assert st.tool_refs_for(["orig@100", "dup@200", "unknown@1"]) == ["t1", "t1"]


def test_alias_to_missing_original() -> None:
    st = rebuild(alias("dup", "gone", 2, 1))
    assert st.is_summarized("dup@2")
    assert st.resolve("dup@2") == "gone@1"
    assert st.get_record("dup@2") is None
    assert st.records_for_id("dup") == []


def test_alias_with_falsy_ids_is_ignored() -> None:
    st = rebuild(
        alias("", "a"),
        alias("b", None),
        custom("context-prune-dedup-alias", {"newToolCallId": "c"}),
        custom("context-prune-dedup-alias", None),
        custom("context-prune-dedup-alias", "junk"),
    )
    assert st.index.alias_count == 0


def test_legacy_alias_of_bare_id_labels_without_timestamp() -> None:
    st = rebuild(
        index_entry(record("orig", "X", 100, batch_ts=50)),
        index_entry(record("bash_1", "Y", 300, batch_ts=250)),
        alias("bash_1", "orig", None, 100),
    )
    records = st.records_for_id("bash_1")
    # The legacy alias has no resultTimestamp: it sorts by the original's batch timestamp (50).
    assert [(r["resultText"], r.get("resultTimestamp")) for r in records] == [
        ("X", None),
        ("Y", 300),
    ]
    assert "resultTimestamp" not in records[0]


# --------------------------------------------------------------------- chains (§4)


def test_chain_registry_sorted_and_replaced_by_start() -> None:
    st = rebuild(
        chain("b2", 300),
        chain("b1", 100),
        chain("b3", 300, rangeSummaryText="later"),
    )
    assert [e["blockId"] for e in st.chain_entries()] == ["b1", "b3"]
    assert st.index.chain_count == 2
    assert st.find_chain_by_block_id("b2") is None
    assert got_chain(st, "b3")["rangeSummaryText"] == "later"
    assert st.next_block_number == 4


@pytest.mark.parametrize(
    "entry",
    [
        chain("", 100),
        chain(None, 100),
        chain("b1", "100"),
        chain("b1", None),
        custom("context-prune-chain", None),
        custom("context-prune-chain", "b1"),
    ],
)
def test_invalid_chain_entries_are_skipped(entry: dict[str, Any]) -> None:
    st = rebuild(entry)
    assert st.chain_entries() == []
    assert st.next_block_number == 1


def test_block_counter_rules() -> None:
    assert rebuild().issue_block_id() == "b1"
    st = rebuild(chain("b7", 100), chain("b3", 200))
    assert st.issue_block_id() == "b8"
    assert st.issue_block_id() == "b9"
    # parseInt reads the leading digits.
    assert rebuild(chain("b12abc", 1)).next_block_number == 13
    # A block id without a number makes the counter NaN (reference: "bNaN").
    poisoned = rebuild(chain("b2", 1), chain("bx", 2))
    assert math.isnan(poisoned.next_block_number)
    assert poisoned.issue_block_id() == "bNaN"


def test_register_chain_does_not_move_the_block_counter() -> None:
    st = rebuild(chain("b2", 100))
    st.register_chain(chain("b9", 500)["data"])
    assert st.next_block_number == 3
    assert [e["blockId"] for e in st.chain_entries()] == ["b2", "b9"]
    with pytest.raises(ValueError, match="startUserTimestamp"):
        st.register_chain({"blockId": "b1", "startUserTimestamp": "x"})


def test_chain_entry_objects_are_the_branch_dicts() -> None:
    entry = chain("b1", 100)
    st = rebuild(entry)
    assert st.chain_entries()[0] is entry["data"]


# ------------------------------------------------------------------- frontier (§5)


def test_frontier_last_valid_wins_with_defaults() -> None:
    st = rebuild(
        frontier("tc1", lastAttemptedToolName="read", outcome="skipped-trivial"),
        frontier("tc2", thinkingStripBoundaryTimestamp=560),
        frontier(""),
        custom("context-prune-frontier", None),
        custom("context-prune-frontier", {"lastAttemptedToolName": "x"}),
    )
    assert st.frontier == {
        "lastAttemptedToolCallId": "tc2",
        "lastAttemptedToolName": "unknown",
        "lastAttemptedTurnIndex": 0,
        "lastAttemptedTimestamp": 0,
        "attemptedBatchCount": 0,
        "attemptedToolCallCount": 0,
        "rawCharCount": 0,
        "summaryCharCount": 0,
        "outcome": "summarized",
    }


def test_frontier_keeps_values_and_key_order() -> None:
    data = {
        "outcome": "skipped-oversized",
        "lastAttemptedToolCallId": "tc9",
        "lastAttemptedToolName": "bash",
        "lastAttemptedTurnIndex": 4,
        "lastAttemptedTimestamp": 1700,
        "attemptedBatchCount": 2,
        "attemptedToolCallCount": 3,
        "rawCharCount": 5000,
        "summaryCharCount": 0,
    }
    st = rebuild(custom("context-prune-frontier", data))
    assert st.frontier is not None
    assert list(st.frontier) == [
        "lastAttemptedToolCallId",
        "lastAttemptedToolName",
        "lastAttemptedTurnIndex",
        "lastAttemptedTimestamp",
        "attemptedBatchCount",
        "attemptedToolCallCount",
        "rawCharCount",
        "summaryCharCount",
        "outcome",
    ]
    assert dict(st.frontier) == data


def test_no_valid_frontier_is_none() -> None:
    assert rebuild().frontier is None
    assert rebuild(frontier(None), frontier(0)).frontier is None


def test_frontier_null_fields_default() -> None:
    f = normalize_frontier({"lastAttemptedToolCallId": "a", "rawCharCount": None, "outcome": None})
    assert f["rawCharCount"] == 0
    assert f["outcome"] == "summarized"


def test_advance_frontier_keeps_a_copy() -> None:
    st = PrunerState()
    f = normalize_frontier({"lastAttemptedToolCallId": "a"})
    st.advance_frontier(f)
    f["outcome"] = "changed"
    assert st.frontier is not None
    assert st.frontier["outcome"] == "summarized"


# ---------------------------------------------------------------------- stats (§6)


def test_stats_last_entry_wins_and_missing_fields_are_zero() -> None:
    st = rebuild(
        stats(totalInputTokens=10, totalOutputTokens=2, totalCost=0.5, callCount=1),
        stats(totalInputTokens=30, callCount=3, chainsCompressed=1),
        custom("context-prune-stats", None),
    )
    assert st.stats == {
        "totalInputTokens": 30,
        "totalOutputTokens": 0,
        "totalCost": 0,
        "callCount": 3,
        "chainsCompressed": 1,
        "rangesSummarized": 0,
    }


def test_stats_default_to_zeros() -> None:
    zeros = {
        "totalInputTokens": 0,
        "totalOutputTokens": 0,
        "totalCost": 0,
        "callCount": 0,
        "chainsCompressed": 0,
        "rangesSummarized": 0,
    }
    assert rebuild().stats == zeros
    # Truthy data that is not an object resets to zeros (fromJSON reads undefined fields).
    assert rebuild(stats(callCount=4), custom("context-prune-stats", 7)).stats == zeros
    # An empty object is truthy too.
    assert rebuild(stats(callCount=4), custom("context-prune-stats", {})).stats == zeros
    assert normalize_stats(None) == zeros


# ------------------------------------------------------------ entry filtering (§3)


def test_only_the_right_envelopes_are_read() -> None:
    st = rebuild(
        # A summary customType on a plain custom entry is not a summary.
        custom("context-prune-summary", {"content": "x"}),
        # An index customType on a custom_message is not an index entry.
        {
            "type": "custom_message",
            "customType": "context-prune-index",
            "content": "",
            "data": {"toolCalls": [record("a", "A", 1)]},
        },
        custom("context-prune-diagnostic", {"kind": "orphan-sweep", "detail": "x"}),
        custom("context-prune-flush-metrics", {"ts": 1}),
        custom("other-extension", {"toolCalls": [record("b", "B", 2)]}),
        {"type": "message", "message": {"role": "user", "content": "hi"}},
    )
    assert st.index.record_count == 0
    assert st.index.summary_count == 0


def test_malformed_entries_are_skipped_not_fatal() -> None:
    junk: list[Any] = [None, 5, {"toolCallId": 7}, {"toolName": "x"}, record("ok", "OK", 1)]
    entries: list[Any] = [
        custom("context-prune-index", None),
        custom("context-prune-index", {"toolCalls": "nope"}),
        custom("context-prune-index", "junk"),
        index_entry(*junk),
        "not an entry",
        None,
    ]
    st = PrunerState.from_branch(entries)
    assert st.index.keys() == ["ok@1"]


def test_later_record_with_same_key_overwrites_but_keeps_first_canonical() -> None:
    st = rebuild(
        index_entry(record("a", "OLD", 1), record("b", "B", 2)),
        index_entry(record("a", "NEW", 1)),
    )
    assert st.index.keys() == ["a@1", "b@2"]
    assert got(st, "a@1")["resultText"] == "NEW"
    assert st.index.keys_for_bare_id("a") == ["a@1"]
    # The hash map keeps the first-seen content of that key too.
    assert st.lookup_by_content("bash", "OLD") == "a@1"
    assert st.lookup_by_content("bash", "NEW") == "a@1"


def test_dedup_hash_first_seen_wins_and_normalizes() -> None:
    st = rebuild(
        index_entry(record("a", "same  \r\nline", 1)),
        index_entry(record("b", "same\nline\n", 2)),
    )
    assert st.lookup_by_content("bash", "same\nline") == "a@1"
    # The tool name is part of the hash.
    assert st.lookup_by_content("read", "same\nline") is None


def test_lone_surrogates_in_result_text_hash_like_node() -> None:
    st = rebuild(index_entry(record("a", "x\ud800y", 1)))
    # Node encodes a lone surrogate as U+FFFD before hashing.
    assert st.lookup_by_content("bash", "x\ufffdy") == "a@1"
    assert got(st, "a@1")["resultText"] == "x\ud800y"


def test_rejected_records_leave_the_index_consistent() -> None:
    st = PrunerState()
    with pytest.raises(ValueError, match="toolCallId"):
        st.add_backfilled([record("a", "A", 1), {"toolName": "x"}], [])
    assert st.index.record_count == 0
    b = record("b", "B", 2)
    st.add_batch([b])
    assert st.get_record("b@2") is b
    with pytest.raises(ValueError, match="toolCallId"):
        st.add_batch([record("c", "C", 3), 5])
    # Like addBatch, records go in one by one: c is indexed, with its own object.
    assert got(st, "c@3")["resultText"] == "C"
    assert st.get_record("b@2") is b


def test_record_objects_are_not_copied() -> None:
    r = record("a", "A", 1)
    st = rebuild(index_entry(r))
    assert st.get_record("a@1") is r
    assert st.index.records()[0] is r


def test_numeric_keys_use_js_number_formatting() -> None:
    st = rebuild(index_entry(record("a", "A", 1.0), record("b", "B", 12345678901234567890)))
    assert st.index.keys() == ["a@1", "b@12345678901234567000"]


# ------------------------------------------------------------------ from_session


def test_from_session_reads_only_the_branch() -> None:
    session = SessionFile.in_memory("/tmp")
    root = session.append_custom("context-prune-index", {"toolCalls": [record("a", "A", 1)]})
    session.append_custom_message(
        "context-prune-summary", "S", False, {"toolCallRefs": [ref("t1", "a", 1)]}
    )
    tip = session.append_custom("context-prune-chain", chain("b1", 100)["data"])
    session.set_leaf(root)
    other = session.append_custom("context-prune-index", {"toolCalls": [record("z", "Z", 9)]})

    on_tip = PrunerState.from_session(session, tip)
    assert on_tip.index.keys() == ["a@1"]
    assert on_tip.resolve("t1") == "a@1"
    assert on_tip.next_block_number == 2

    current = PrunerState.from_session(session)
    assert session.leaf_id == other
    assert current.index.keys() == ["a@1", "z@9"]
    assert current.resolve("t1") is None
    assert current.chain_entries() == []


# ---------------------------------------------------------------- conformance vectors

NOT_FOUND = "(not found in index \u2014 may not have been summarized yet)"
VECTORS = [
    "large-default",
    "large-rw1-nofuse",
    "large-protect-spill",
    "large-default-restart",
    "large-recovery-grace3",
    "large-recovery-grace0",
]


def _load_vector(vector_dir: Path) -> tuple[list[dict[str, Any]], PrunerState]:
    raw = gzip.decompress((vector_dir / "session.jsonl.gz").read_bytes())
    session = SessionFile.parse(raw)
    return session.branch(), PrunerState.from_session(session)


def _queries(vector_dir: Path) -> list[dict[str, Any]]:
    data = json.loads(gzip.decompress((vector_dir / "query.json.gz").read_bytes()))
    queries: list[dict[str, Any]] = data["queries"]
    return queries


def test_large_default_counts_match_the_vector(conformance_dir: Path) -> None:
    vector_dir = conformance_dir / "replay" / "large-default"
    meta = json.loads((vector_dir / "meta.json").read_text())
    by_type = meta["counts"]["byType"]
    entries, st = _load_vector(vector_dir)

    assert st.index.summary_count == by_type["custom_message:context-prune-summary"]
    assert st.index.chain_count == by_type["custom:context-prune-chain"]
    assert st.index.alias_count == by_type.get("custom:context-prune-dedup-alias", 0)
    tool_calls = [
        r
        for e in entries
        if e.get("customType") == "context-prune-index"
        for r in e["data"]["toolCalls"]
    ]
    assert st.index.record_count == len(tool_calls)

    # Frontier and stats: the last such entries of the file.
    last_frontier = [e["data"] for e in entries if e.get("customType") == "context-prune-frontier"][
        -1
    ]
    last_stats = [e["data"] for e in entries if e.get("customType") == "context-prune-stats"][-1]
    assert st.frontier == last_frontier
    assert st.stats == last_stats
    assert st.stats["chainsCompressed"] == by_type["custom:context-prune-chain"]

    # Every short ref the vector queried resolves, except the not-found ones.
    for query in _queries(vector_dir):
        for id_ in query["toolCallIds"]:
            if not re.fullmatch(r"t[0-9]+", id_):
                continue
            not_found = query["text"].startswith(f"## toolRef: {id_}\n{NOT_FOUND}")
            assert (st.resolve(id_) is None) == not_found, id_
            assert (st.get_record(id_) is None) == not_found, id_
    # Refs are t1..tN: the counter is one past the highest.
    highest = max(int(s[1:]) for s, _ in st.index.short_refs())
    assert st.next_short_ref_number == highest + 1


@pytest.mark.parametrize("vector", VECTORS)
def test_query_vector_is_reproduced_from_the_rebuilt_state(
    conformance_dir: Path, vector: str, tmp_path: Path
) -> None:
    # Spill vectors: the blobs are extracted into tmp_path, which stands in for the session
    # dir the vector was recorded in (meta.json options.sessionDir, named by every spillPath).
    vector_dir = conformance_dir / "replay" / vector
    session = SessionFile.parse(gzip.decompress((vector_dir / "session.jsonl.gz").read_bytes()))
    recorded_dir = json.loads((vector_dir / "meta.json").read_text())["options"]["sessionDir"]
    blob_archive = vector_dir / "blobs.tar.gz"
    if blob_archive.exists():
        with tarfile.open(blob_archive) as tar:
            safe: dict[str, Any] = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            tar.extractall(tmp_path, **safe)
    tool = ContextTreeQuery(
        PrunerState.from_session(session),
        str(tmp_path),
        session.session_id,
        recorded_session_dir=recorded_dir,
    )
    queries = _queries(vector_dir)
    assert queries
    for query in queries:
        got = tool.execute({"toolCallIds": query["toolCallIds"]})
        assert not got.is_error
        assert got.text == query["text"], query["toolCallIds"]


@pytest.mark.parametrize("vector", VECTORS)
def test_state_of_a_session_is_the_state_of_its_whole_branch(
    conformance_dir: Path, vector: str
) -> None:
    """``from_session`` reads only the branch's custom entries: it rebuilds the very state
    the whole branch gives."""
    raw = gzip.decompress((conformance_dir / "replay" / vector / "session.jsonl.gz").read_bytes())
    session = SessionFile.parse(raw)
    branch = session.branch()
    assert len(session.custom_entries()) < len(branch)
    whole, customs = PrunerState.from_branch(branch), PrunerState.from_session(session)
    assert repr(customs) == repr(whole)
    assert (customs.frontier, customs.stats) == (whole.frontier, whole.stats)
    keys = [
        r["toolCallId"]
        for e in branch
        if e.get("customType") == "context-prune-index"
        for r in e["data"]["toolCalls"]
    ]
    assert [customs.resolve(k) for k in keys] == [whole.resolve(k) for k in keys]

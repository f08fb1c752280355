"""Chain compression: covered chains, range fusion, the deterministic backfill, the flush and
compact seams, the ``compact`` command, and the conformance vectors' chain entries (spec 05
sections 9, 11-13.2; 02 sections 1, 4; 03 section 10; spec 10 rows chain-compressor,
range-compression and the backfill rows of indexer)."""

from __future__ import annotations

import asyncio
import gzip
import json
import shutil
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, Callable, Optional

import pytest
from typer.testing import CliRunner

from conftest import shared_root
from pi_condense.chains import (
    RANGE_SYSTEM_PROMPT,
    ChainCompressionError,
    ChainDeps,
    ChainRunResult,
    compact_all,
    compress_chains_in_flush,
    estimate_reclaim_tokens,
    range_prompt,
    summarizer_fuse,
)
from pi_condense.cli import app
from pi_condense.config import Config
from pi_condense.js import json as jsjson
from pi_condense.keys import hash_tool_result
from pi_condense.render import render
from pi_condense.session import SessionFile
from pi_condense.state import PrunerState
from pi_condense.summarize.base import Completion, Cost, ModelRef, Usage
from pi_condense.summarize.conformance import ConformanceSummarizer
from support.builders import call, final, plain_result, tool_use, user

CHAIN = "context-prune-chain"
INDEX = "context-prune-index"

HEADER = (
    "Deterministic chain compression (no per-batch summary existed for this span; raw outputs "
    "recoverable via context_tree_query)."
)

# A config without default path protection, so bodies only depend on the test's messages.
PLAIN = Config.from_settings_dict({"enabled": True, "protectedPaths": []})


# ----------------------------------------------------------------------------- harness


class Log:
    """What a run appended, reported and asked the fuser."""

    def __init__(self) -> None:
        self.appended: list[tuple[str, Any]] = []
        self.diagnostics: list[tuple[str, str, str]] = []
        self.prompts: list[str] = []
        self.blobs: dict[str, str] = {}

    def of(self, custom_type: str) -> list[Any]:
        return [data for kind, data in self.appended if kind == custom_type]

    def json(self) -> list[tuple[str, str]]:
        return [(kind, jsjson.dumps(data)) for kind, data in self.appended]


FuseFn = Callable[[str], Awaitable[Optional[Completion]]]


def completion(text: str, stop: Any = "stop", tokens: int = 5) -> Completion:
    usage = Usage(input=tokens, output=1, total_tokens=tokens + 1, cost=Cost(total=0.5))
    return Completion(text=text, stop_reason=stop, usage=usage, model=ModelRef("p", "m"))


def fuser(log: Log, answer: Any = "FUSED COHESIVE SUMMARY") -> FuseFn:
    async def fuse(prompt: str) -> Optional[Completion]:
        log.prompts.append(prompt)
        if isinstance(answer, BaseException):
            raise answer
        if answer is None or isinstance(answer, Completion):
            return answer
        return completion(answer)

    return fuse


def deps(
    state: PrunerState,
    log: Log,
    *,
    config: Config = PLAIN,
    fuse: Optional[FuseFn] = None,
    now: int = 999,
    fail_on: Optional[str] = None,
    session_dir: str = "/sessions",
    write_blob: Optional[Callable[[str, str], None]] = None,
) -> ChainDeps:
    def append(custom_type: str, data: Any) -> None:
        if custom_type == fail_on:
            raise OSError("session write failed")
        log.appended.append((custom_type, data))

    return ChainDeps(
        state=state,
        config=config,
        append=append,
        now=lambda: now,
        fuse=fuse,
        diagnostics=lambda kind, key, detail: log.diagnostics.append((kind, key, detail)),
        session_dir=session_dir,
        session_id="s1",
        write_blob=write_blob if write_blob is not None else log.blobs.__setitem__,
    )


def compact(d: ChainDeps, messages: list[Any]) -> ChainRunResult:
    return asyncio.run(compact_all(d, messages))


def cover(state: PrunerState, ref: str, tool_id: str, ts: Optional[int], body: str) -> None:
    """A per-batch summary covering one call (as a flush registers it)."""
    key = tool_id if ts is None else f"{tool_id}@{ts}"
    short: dict[str, Any] = {"shortId": ref, "toolCallId": tool_id}
    if ts is not None:
        short["resultTimestamp"] = ts
    state.register_refs([short])
    state.register_summary_body([key], body)


def two_call_chain(base: int = 100) -> list[dict[str, Any]]:
    """go -> tc1 (bash) -> o1 -> tc2 (bash) -> o2 -> done; results at base+110 / base+210."""
    return [
        user(base),
        tool_use(base + 100, call("tc1")),
        plain_result("tc1", base + 110, "o1"),
        tool_use(base + 200, call("tc2")),
        plain_result("tc2", base + 210, "o2"),
        final(base + 300),
    ]


def no_orphans(messages: list[Any]) -> bool:
    """Every toolResult answers a call of the assistant turn it follows (barrier rule)."""
    open_ids: set[Any] = set()
    for msg in messages:
        role = msg.get("role")
        if role == "assistant":
            open_ids = {
                b.get("id")
                for b in msg.get("content") or []
                if isinstance(b, dict) and b.get("type") == "toolCall"
            }
        elif role == "toolResult":
            if msg.get("toolCallId") not in open_ids:
                return False
            open_ids.discard(msg.get("toolCallId"))
        else:
            open_ids = set()
    return True


def synthetics(messages: list[Any]) -> list[str]:
    return [
        m["content"][0]["text"]
        for m in messages
        if m.get("role") == "user"
        and isinstance(m.get("content"), list)
        and m["content"][0].get("text", "").startswith("<compressed-chain")
    ]


def rendered(messages: list[Any], state: PrunerState, config: Config = PLAIN) -> list[Any]:
    return render(messages, state, config).messages


# ----------------------------------------------------------------------------- covered path


class TestCoveredChains:
    def test_entry_shape_and_append(self) -> None:
        state, log = PrunerState(), Log()
        cover(state, "t1", "tc1", 210, "S1")
        state.register_refs([{"shortId": "t2", "toolCallId": "tc2", "resultTimestamp": 310}])
        result_ = compact(deps(state, log), two_call_chain())
        # 02 section 4 (summarizer path): key order, optional keys only when non-empty.
        assert log.json() == [
            (
                CHAIN,
                '{"blockId":"b1","startUserTimestamp":100,"droppedToolCallIds":["tc1","tc2"],'
                '"finalAssistantTimestamp":400,"toolRefs":["t1","t2"],"compressedAt":999,'
                '"droppedOccurrenceKeys":["tc1@210","tc2@310"]}',
            )
        ]
        assert result_.block_ids == ["b1"]
        assert result_.entries[0] is log.of(CHAIN)[0]
        assert state.chain_entries() == [log.of(CHAIN)[0]]
        assert state.issue_block_id() == "b2"

    def test_range_prompt_is_the_wire_constant(self) -> None:
        assert RANGE_SYSTEM_PROMPT.split("\n") == [
            "You are fusing several per-step summaries of one CLOSED sub-task from an AI coding "
            "assistant's history into a SINGLE cohesive summary.",
            "- Merge overlapping or repeated information; do not restate each step separately.",
            "- Preserve concrete outcomes, decisions, file paths, identifiers, and anything later "
            "work needs to remember.",
            "- Keep any reference tokens like `t12` or `b3` intact.",
            "- Be concise: a short narrative or a few grouped bullets, not one bullet per step.",
        ]
        assert range_prompt(["a", "b"]) == (
            RANGE_SYSTEM_PROMPT + "\n\n<sub-task-summaries>\na\n\nb\n</sub-task-summaries>"
        )

    def test_two_summaries_are_fused(self) -> None:
        state, log = PrunerState(), Log()
        cover(state, "t1", "tc1", 210, "summary of batch 1")
        cover(state, "t2", "tc2", 310, "summary of batch 2")
        res = compact(deps(state, log, fuse=fuser(log)), two_call_chain())
        assert log.prompts == [range_prompt(["summary of batch 1", "summary of batch 2"])]
        (entry,) = log.of(CHAIN)
        assert entry["rangeSummaryText"] == "FUSED COHESIVE SUMMARY"
        assert list(entry)[5:7] == ["compressedAt", "rangeSummaryText"]
        assert res.ranges_summarized == 1
        assert res.fusion_usages == [completion("x").usage]
        # The fused text reaches render.
        (text,) = synthetics(rendered(two_call_chain(), state))
        assert text == (
            '<compressed-chain id="b1" tools="t1,t2">\nFUSED COHESIVE SUMMARY\n</compressed-chain>'
        )

    def test_fused_text_is_stored_untrimmed(self) -> None:
        state, log = PrunerState(), Log()
        cover(state, "t1", "tc1", 210, "A")
        cover(state, "t2", "tc2", 310, "B")
        compact(deps(state, log, fuse=fuser(log, "  fused\n")), two_call_chain())
        assert log.of(CHAIN)[0]["rangeSummaryText"] == "  fused\n"

    def test_single_or_repeated_summary_is_not_fused(self) -> None:
        for bodies in (["only"], ["same", "same"]):
            state, log = PrunerState(), Log()
            for i, body in enumerate(bodies):
                cover(state, f"t{i + 1}", f"tc{i + 1}", 210 + 100 * i, body)
            res = compact(deps(state, log, fuse=fuser(log)), two_call_chain())
            assert log.prompts == []
            assert "rangeSummaryText" not in log.of(CHAIN)[0]
            assert res.fusion_usages == []

    @pytest.mark.parametrize(
        "answer",
        [
            None,
            RuntimeError("provider down"),
            "   \n\t",
            completion("cut off", stop="length"),
            completion("failed", stop="error"),
        ],
        ids=["none", "raises", "blank", "length", "error"],
    )
    def test_failed_fusion_still_compresses(self, answer: Any) -> None:
        state, log = PrunerState(), Log()
        cover(state, "t1", "tc1", 210, "summary of batch 1")
        cover(state, "t2", "tc2", 310, "summary of batch 2")
        res = compact(deps(state, log, fuse=fuser(log, answer)), two_call_chain())
        assert len(log.prompts) == 1
        (entry,) = log.of(CHAIN)
        assert "rangeSummaryText" not in entry
        assert res.fusion_usages == []
        assert res.ranges_summarized == 0
        # Render falls back to the per-batch concatenation.
        (text,) = synthetics(rendered(two_call_chain(), state))
        assert "summary of batch 1\n\nsummary of batch 2" in text

    def test_no_fuser_or_fusion_off(self) -> None:
        off = Config.from_settings_dict(
            {"protectedPaths": [], "chainCompression": {"fuseRangeSummary": False}}
        )
        for fuse_on, config in ((False, PLAIN), (True, off)):
            state, log = PrunerState(), Log()
            cover(state, "t1", "tc1", 210, "batch one body")
            cover(state, "t2", "tc2", 310, "batch two body")
            fuse = fuser(log) if fuse_on else None
            compact(deps(state, log, config=config, fuse=fuse), two_call_chain())
            assert log.prompts == []
            assert "rangeSummaryText" not in log.of(CHAIN)[0]
            (text,) = synthetics(rendered(two_call_chain(), state))
            assert "batch one body" in text
            assert "batch two body" in text

    def test_protected_ids_copied_when_present_omitted_when_empty(self) -> None:
        config = Config.from_settings_dict({"protectedTools": ["todowrite"], "protectedPaths": []})
        msgs = [
            user(100),
            tool_use(200, call("tc1")),
            plain_result("tc1", 210, "bash-result"),
            tool_use(300, call("tc2", "todowrite")),
            plain_result("tc2", 310, "PLAN-STATE-XYZ", name="todowrite"),
            final(400),
        ]
        state, log = PrunerState(), Log()
        cover(state, "t1", "tc1", 210, "bash output summary")
        compact(deps(state, log, config=config), msgs)
        (entry,) = log.of(CHAIN)
        assert entry["protectedToolCallIds"] == ["tc2"]
        assert list(entry)[-2:] == ["protectedToolCallIds", "droppedOccurrenceKeys"]
        # The protected output is relocated into the synthetic message, verbatim.
        out = rendered(msgs, state, config)
        (text,) = synthetics(out)
        assert '<protected-output tool="todowrite">\nPLAN-STATE-XYZ\n</protected-output>' in text
        assert "bash-result" not in text
        assert 'tools="t1"' in text
        assert [m for m in out if m["role"] == "toolResult"] == []
        # Without protection the key is absent.
        state, log = PrunerState(), Log()
        cover(state, "t1", "tc1", 210, "bash output summary")
        compact(deps(state, log), msgs)
        assert "protectedToolCallIds" not in log.of(CHAIN)[0]

    def test_path_protected_output_relocated(self) -> None:
        config = Config()  # default protectedPaths: **/skills/**/*.md
        msgs = [
            user(100),
            tool_use(200, call("tc1", "read", path="/h/src/app.ts")),
            plain_result("tc1", 210, "app-source-code", name="read"),
            tool_use(300, call("tc2", "read", path="/h/skills/x/SKILL.md")),
            plain_result("tc2", 310, "SKILL-VERBATIM-CONTENT", name="read"),
            final(400),
        ]
        state, log = PrunerState(), Log()
        cover(state, "t1", "tc1", 210, "read app.ts summary")
        compact(deps(state, log, config=config), msgs)
        assert log.of(CHAIN)[0]["protectedToolCallIds"] == ["tc2"]
        out = rendered(msgs, state, config)
        (text,) = synthetics(out)
        assert '<protected-output tool="read">\nSKILL-VERBATIM-CONTENT\n' in text
        assert "app-source-code" not in text
        assert no_orphans(out)

    def test_lookups_use_occurrence_keys(self) -> None:
        # A body registered under the bare id does not cover the occurrence: deterministic.
        state, log = PrunerState(), Log()
        cover(state, "t1", "tc1", None, "bare-keyed body")
        compact(deps(state, log), two_call_chain())
        assert log.of(CHAIN)[0]["bodySource"] == "deterministic"

    def test_chain_without_keys_falls_back_to_bare_ids(self) -> None:
        # Calls whose results never arrived: no occurrence keys, lookups by id.
        msgs = [user(100), tool_use(200, call("tc1")), final(300)]
        state, log = PrunerState(), Log()
        cover(state, "t1", "tc1", None, "legacy body")
        compact(deps(state, log), msgs)
        assert log.json() == [
            (
                CHAIN,
                '{"blockId":"b1","startUserTimestamp":100,"droppedToolCallIds":["tc1"],'
                '"finalAssistantTimestamp":300,"toolRefs":["t1"],"compressedAt":999}',
            )
        ]

    def test_already_compressed_chains_reported_as_skipped(self) -> None:
        state, log = PrunerState(), Log()
        cover(state, "t1", "tc1", 210, "S")
        compact(deps(state, log), two_call_chain())
        again = compact(deps(state, Log()), two_call_chain())
        assert again.entries == []
        assert again.skipped == [(100, "already-compressed")]


# ----------------------------------------------------------------------------- deterministic


def chain_b(base: int = 1000, out1: str = "outB1", out2: str = "outB2") -> list[dict[str, Any]]:
    return [
        user(base),
        tool_use(base + 100, call("tcB1", cmd="one")),
        plain_result("tcB1", base + 110, out1),
        tool_use(base + 200, call("tcB2", cmd="two")),
        plain_result("tcB2", base + 210, out2),
        final(base + 400),
    ]


class TestDeterministicBackfill:
    def test_uncovered_chain_index_then_chain_entry(self) -> None:
        state, log = PrunerState(), Log()
        res = compact(deps(state, log, fuse=fuser(log)), chain_b())
        assert log.prompts == []  # zero LLM calls
        body = (
            f"{HEADER}\nCalls: 2\nTools: bash x2\n"
            "Span: 1970-01-01T00:00:01.110Z -> 1970-01-01T00:00:01.210Z (0s)\n"
            'First: bash {"cmd":"one"}\nLast: bash {"cmd":"two"}\nRefs: t1, t2'
        )
        assert log.json() == [
            (
                INDEX,
                '{"toolCalls":[{"toolCallId":"tcB1","toolName":"bash","args":{"cmd":"one"},'
                '"resultText":"outB1","isError":false,"turnIndex":-1,"timestamp":1110,'
                '"resultTimestamp":1110},{"toolCallId":"tcB2","toolName":"bash",'
                '"args":{"cmd":"two"},"resultText":"outB2","isError":false,"turnIndex":-1,'
                '"timestamp":1210,"resultTimestamp":1210}],"backfilled":true,'
                '"refs":[{"shortId":"t1","toolCallId":"tcB1","resultTimestamp":1110},'
                '{"shortId":"t2","toolCallId":"tcB2","resultTimestamp":1210}]}',
            ),
            (
                CHAIN,
                '{"blockId":"b1","startUserTimestamp":1000,"droppedToolCallIds":["tcB1","tcB2"],'
                '"finalAssistantTimestamp":1400,"toolRefs":["t1","t2"],"compressedAt":999,'
                f'"rangeSummaryText":{jsjson.dumps(body)},"bodySource":"deterministic",'
                '"droppedOccurrenceKeys":["tcB1@1110","tcB2@1210"]}',
            ),
        ]
        assert res.backfilled == 2
        assert res.fusion_usages == []

    def test_backfilled_records_are_queryable_by_ref_and_raw_id(self) -> None:
        state, log = PrunerState(), Log()
        compact(deps(state, log), chain_b(out1="outB1 raw"))
        (ref, _) = log.of(CHAIN)[0]["toolRefs"]
        assert state.resolve(ref) == "tcB1@1110"
        record = state.get_record(ref)
        assert record is not None
        assert record["resultText"] == "outB1 raw"
        assert record["turnIndex"] == -1
        assert [r["resultText"] for r in state.records_for_id("tcB1")] == ["outB1 raw"]
        assert state.get_record("tcB1@1110") is record
        assert state.is_summarized("tcB1@1110")

    def test_backfilled_record_is_recovered_by_the_query_tool(self) -> None:
        from pi_condense.tools.query import ContextTreeQuery

        state, log = PrunerState(), Log()
        compact(deps(state, log), chain_b(out1="outB1 raw"))
        text = ContextTreeQuery(state, "/sessions", "s1").query(["t1"]).text
        assert text.startswith("## toolRef: t1\n")
        assert "Turn: -1" in text
        assert "outB1 raw" in text

    def test_backfilled_records_never_become_dedup_canonicals(self) -> None:
        state, log = PrunerState(), Log()
        compact(deps(state, log), chain_b())
        assert state.lookup_by_content("bash", "outB1") is None
        # ... also after a reload.
        rebuilt = PrunerState.from_branch(
            [{"type": "custom", "customType": t, "data": d} for t, d in log.appended]
        )
        assert rebuilt.lookup_by_content("bash", "outB1") is None
        assert rebuilt.resolve("t2") == "tcB2@1210"
        assert rebuilt.get_record("tcB2@1210") is not None
        assert rebuilt.next_short_ref_number == 3

    def test_covered_path_takes_no_backfill(self) -> None:
        state, log = PrunerState(), Log()
        cover(state, "t1", "tcB1", 1110, "S")
        compact(deps(state, log), chain_b())
        assert [kind for kind, _ in log.appended] == [CHAIN]
        assert "bodySource" not in log.of(CHAIN)[0]

    def test_backfill_append_failure_is_atomic_and_skips(self) -> None:
        state, log = PrunerState(), Log()
        res = compact(deps(state, log, fail_on=INDEX), chain_b())
        assert log.appended == []
        assert res.entries == []
        assert res.skipped == [(1000, "no-summary")]
        assert state.index.record_count == 0
        assert state.index.short_refs() == []
        assert not state.is_summarized("tcB1@1110")
        assert state.chain_entries() == []
        # The refs allocated for the failed entry are burned; no block id was issued.
        assert state.next_short_ref_number == 3
        assert state.next_block_number == 1

    def test_blob_write_failure_skips_without_writing(self) -> None:
        def broken(path: str, text: str) -> None:
            raise OSError("disk full")

        config = Config.from_settings_dict({"protectedPaths": [], "spillThreshold": 3})
        state, log = PrunerState(), Log()
        res = compact(deps(state, log, config=config, write_blob=broken), chain_b())
        assert log.appended == []
        assert res.skipped_no_summary == 1

    def test_chain_append_failure_converges_after_restart(self) -> None:
        state, log = PrunerState(), Log()
        with pytest.raises(ChainCompressionError) as failed:
            compact(deps(state, log, fail_on=CHAIN), chain_b())
        assert failed.value.partial.entries == []
        assert isinstance(failed.value.__cause__, OSError)
        (index_entry,) = log.of(INDEX)
        assert log.of(CHAIN) == []
        # Restart: rebuild from what was persisted, then retry.
        branch = [{"type": "custom", "customType": t, "data": d} for t, d in log.appended]
        rebuilt = PrunerState.from_branch(branch)
        retry = Log()
        res = compact(deps(rebuilt, retry), chain_b())
        assert [kind for kind, _ in retry.appended] == [CHAIN]  # no second index entry
        assert res.entries[0]["toolRefs"] == [r["shortId"] for r in index_entry["refs"]]
        assert res.entries[0]["bodySource"] == "deterministic"
        assert "Refs: t1, t2" in res.entries[0]["rangeSummaryText"]
        assert res.backfilled == 0

    def test_chain_append_failure_converges_in_the_same_process(self) -> None:
        state, log = PrunerState(), Log()
        with pytest.raises(ChainCompressionError):
            compact(deps(state, log, fail_on=CHAIN), chain_b())
        retry = Log()
        res = compact(deps(state, retry), chain_b())
        assert [kind for kind, _ in retry.appended] == [CHAIN]
        # The block id of the failed append was burned.
        assert res.block_ids == ["b2"]
        assert state.index.record_count == 2

    def test_genuine_mismatch_skips_with_a_diagnostic(self) -> None:
        # A second user message at the chain's start time: the span does not resolve.
        msgs = [*chain_b(), user(1000, "again"), final(1500)]
        state, log = PrunerState(), Log()
        res = compact(deps(state, log), msgs)
        assert log.appended == []
        assert res.skipped == [(1000, "no-summary")]
        assert log.diagnostics == [("backfill-empty", "1000", "middles=2")]

    def test_fully_protected_chain_skips_silently(self) -> None:
        config = Config.from_settings_dict({"protectedTools": ["bash"], "protectedPaths": []})
        state, log = PrunerState(), Log()
        res = compact(deps(state, log, config=config), chain_b())
        assert log.appended == []
        assert log.diagnostics == []
        assert res.skipped == [(1000, "no-summary")]

    def test_backfilled_result_text_carries_image_markers(self) -> None:
        # pi-condense 2.11.2: marker lines first. Expected: the 2.11.3 reference's
        # extractToolResultText of this content (batch-capture.ts, run in Deno).
        content = [
            {"type": "text", "text": "SKILL BODY"},
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
            {"type": "text", "text": "line 2"},
            {"type": "image", "data": "R0lGODlh", "mimeType": "image/gif"},
        ]
        msgs = [
            user(1000),
            tool_use(1100, {"type": "toolCall", "id": "e1", "name": "look", "arguments": {}}),
            {
                "role": "toolResult",
                "toolCallId": "e1",
                "toolName": "look",
                "content": content,
                "timestamp": 1110,
            },
            final(1400),
        ]
        state, log = PrunerState(), Log()
        compact(deps(state, log), msgs)
        (record,) = log.of(INDEX)[0]["toolCalls"]
        assert record["resultText"] == (
            "[image returned: image/png sha256:929e08d5]\n"
            "[image returned: image/gif sha256:ccfa6192]\nSKILL BODY\nline 2"
        )

    def test_empty_args_and_results_still_compress(self) -> None:
        msgs = [
            user(1000),
            tool_use(1100, {"type": "toolCall", "id": "e1", "name": "noop"}),
            {"role": "toolResult", "toolCallId": "e1", "toolName": "noop", "timestamp": 1110},
            final(1400),
        ]
        state, log = PrunerState(), Log()
        compact(deps(state, log), msgs)
        (record,) = log.of(INDEX)[0]["toolCalls"]
        assert record["args"] == {}
        assert record["resultText"] == ""
        body = log.of(CHAIN)[0]["rangeSummaryText"]
        assert body.split("\n")[1:] == [
            "Calls: 1",
            "Tools: noop x1",
            "Span: 1970-01-01T00:00:01.110Z -> 1970-01-01T00:00:01.110Z (0s)",
            "First: noop {}",
            "Last: noop {}",
            "Refs: t1",
        ]

    def test_extraction_details(self) -> None:
        # `args` is read as input ?? args ?? arguments; errors flagged; a result without a
        # numeric timestamp is left out; already-indexed keys are not extracted again.
        msgs = [
            user(1000),
            tool_use(
                1100,
                {"type": "toolCall", "id": "a", "name": "read", "args": {"path": "x"}},
                {"type": "toolCall", "id": "b", "name": "bash", "input": {"c": 1}, "arguments": {}},
                call("c"),
                call("d"),
            ),
            {**plain_result("a", 1110, "A"), "isError": True},
            plain_result("b", 1120, "B"),
            plain_result("c", "late", "C"),
            plain_result("d", 1130, "D"),
            final(1400),
        ]
        state, log = PrunerState(), Log()
        state.add_batch(
            [
                {
                    "toolCallId": "d",
                    "toolName": "bash",
                    "args": {},
                    "resultText": "D",
                    "isError": False,
                    "turnIndex": 0,
                    "timestamp": 1,
                    "resultTimestamp": 1130,
                }
            ]
        )
        compact(deps(state, log), msgs)
        records = log.of(INDEX)[0]["toolCalls"]
        assert [(r["toolCallId"], r["args"], r["isError"]) for r in records] == [
            ("a", {"path": "x"}, True),
            ("b", {"c": 1}, False),
        ]
        assert records[0]["args"] is msgs[1]["content"][0]["args"]
        # The chain's body covers the indexed record too, indexed first.
        body = log.of(CHAIN)[0]["rangeSummaryText"]
        assert "Calls: 3" in body
        assert "Tools: bash x2, read x1" in body

    def test_extracted_args_skip_null_members(self) -> None:
        # `block.input ?? block.args ?? block.arguments ?? {}`: null is skipped like a missing
        # member; a member that is there decides even when it is not an object.
        blocks = [
            {"type": "toolCall", "id": "a", "name": "t", "input": None, "args": {"n": 1}},
            {"type": "toolCall", "id": "b", "name": "t", "args": None, "arguments": {"n": 2}},
            {"type": "toolCall", "id": "c", "name": "t", "input": None, "arguments": None},
            {"type": "toolCall", "id": "d", "name": "t", "input": "s", "args": {"n": 4}},
        ]
        msgs = [
            user(1000),
            tool_use(1100, *blocks),
            *(plain_result(b["id"], 1110 + i, "R") for i, b in enumerate(blocks)),
            final(1400),
        ]
        log = Log()
        compact(deps(PrunerState(), log), msgs)
        records = log.of(INDEX)[0]["toolCalls"]
        assert [(r["toolCallId"], r["args"]) for r in records] == [
            ("a", {"n": 1}),
            ("b", {"n": 2}),
            ("c", {}),
            ("d", "s"),
        ]

    def test_fully_deduped_chain_is_backfilled_by_index_membership(self) -> None:
        state, log = PrunerState(), Log()
        state.add_batch(
            [
                {
                    "toolCallId": "origA",
                    "toolName": "bash",
                    "args": {},
                    "resultText": "SAME_A",
                    "isError": False,
                    "turnIndex": 0,
                    "timestamp": 10,
                    "resultTimestamp": 20,
                }
            ]
        )
        state.register_summary_body(["origA@20"], "summary of originals")
        state.register_refs([{"shortId": "t1", "toolCallId": "origA", "resultTimestamp": 20}])
        state.register_duplicate("dup3@30", "origA@20")
        state.register_duplicate("tc1@110", "origA@20")
        assert state.is_summarized("tc1@110")
        msgs = [
            user(100),
            tool_use(105, call("tc1")),
            plain_result("tc1", 110, "SAME_A"),
            final(200),
        ]
        compact(deps(state, log), msgs)
        assert log.of(CHAIN)[0]["bodySource"] == "deterministic"
        assert state.index.keys_for_bare_id("tc1") == ["tc1@110"]
        record = state.index.get_record("tc1@110")
        assert record is not None
        assert record["resultText"] == "SAME_A"
        # The backfill allocated a fresh ref; the unrelated alias still resolves.
        assert log.of(INDEX)[0]["refs"][0]["shortId"] == "t2"
        assert state.resolve("dup3@30") == "origA@20"
        assert state.lookup_by_content("bash", "SAME_A") == "origA@20"

    def test_protected_member_excluded_and_relocated(self) -> None:
        config = Config.from_settings_dict({"protectedTools": ["todowrite"], "protectedPaths": []})
        msgs = [
            user(1000),
            tool_use(1100, call("tcB1", cmd="one")),
            plain_result("tcB1", 1110, "outB1"),
            tool_use(1200, call("tcB2", "todowrite")),
            plain_result("tcB2", 1210, "PLAN-STATE-XYZ", name="todowrite"),
            final(1400),
        ]
        state, log = PrunerState(), Log()
        compact(deps(state, log, config=config), msgs)
        records = log.of(INDEX)[0]["toolCalls"]
        assert [r["toolCallId"] for r in records] == ["tcB1"]
        entry = log.of(CHAIN)[0]
        assert entry["toolRefs"] == ["t1"]
        assert entry["protectedToolCallIds"] == ["tcB2"]
        assert state.get_record("tcB2@1210") is None
        out = rendered(msgs, state, config)
        (text,) = synthetics(out)
        assert '<protected-output tool="todowrite">\nPLAN-STATE-XYZ\n' in text
        assert [m for m in out if m["role"] == "toolResult"] == []
        assert no_orphans(out)

    def test_oversized_member_is_spilled(self, tmp_path: Path) -> None:
        big = "line one\nline two\n" + "x" * 60 + "\ud800 end"
        config = Config.from_settings_dict(
            {"protectedPaths": [], "spillThreshold": 50, "spillPreviewBytes": 12}
        )
        state, log = PrunerState(), Log()
        d = deps(state, log, config=config, session_dir=str(tmp_path))
        d.write_blob = None  # the real sidecar writer
        compact(d, chain_b(out1=big))
        spilled, small = log.of(INDEX)[0]["toolCalls"]
        path = str(tmp_path / "s1-blobs" / "tcB1_1110.txt")
        assert list(spilled) == [
            "toolCallId",
            "toolName",
            "args",
            "resultText",
            "isError",
            "turnIndex",
            "timestamp",
            "resultTimestamp",
            "spillBytes",
            "resultPreview",
            "spillPath",
            "contentHash",
        ]
        assert spilled["resultText"] == ""
        assert spilled["spillPath"] == path
        assert spilled["spillBytes"] == len(big.encode("utf-8", "surrogatepass"))
        assert spilled["resultPreview"] == "line one"
        assert spilled["contentHash"] == hash_tool_result("bash", big)
        # Lone surrogates are written as U+FFFD, as Node writes them.
        assert Path(path).read_bytes() == big.replace("\ud800", "\ufffd").encode("utf-8")
        assert "x" * 60 not in jsjson.dumps(log.of(INDEX)[0])
        assert small["resultText"] == "outB2"
        assert "spillPath" not in small

    def test_three_uncovered_chains_in_one_call(self) -> None:
        msgs: list[Any] = []
        for i in range(3):
            base = 1000 + 1000 * i
            msgs += [
                user(base),
                tool_use(base + 100, call(f"tc{i}", cmd=f"tc{i}")),
                plain_result(f"tc{i}", base + 110, f"out {i}"),
                final(base + 400),
            ]
        state, log = PrunerState(), Log()
        res = compact(deps(state, log), msgs)
        assert res.block_ids == ["b1", "b2", "b3"]
        assert [kind for kind, _ in log.appended] == [INDEX, CHAIN] * 3
        assert all(e["bodySource"] == "deterministic" for e in res.entries)

    def test_covered_and_uncovered_in_one_call(self) -> None:
        chain_a = [
            user(100),
            tool_use(200, call("tcA")),
            plain_result("tcA", 210, "outA"),
            final(400),
        ]
        msgs = [*chain_a, *chain_b()]
        state, log = PrunerState(), Log()
        cover(state, "t1", "tcA", 210, "summary of tcA")
        res = compact(deps(state, log), msgs)
        entry_a, entry_b = res.entries
        assert "bodySource" not in entry_a
        assert entry_b["bodySource"] == "deterministic"
        out = rendered(msgs, state)
        texts = synthetics(out)
        assert len(texts) == 2
        assert no_orphans(out)
        # Chain A alone gives the same entry and the same synthetic message.
        alone, alone_log = PrunerState(), Log()
        cover(alone, "t1", "tcA", 210, "summary of tcA")
        (entry_alone,) = compact(deps(alone, alone_log), chain_a).entries
        assert jsjson.dumps(entry_alone) == jsjson.dumps(entry_a)
        assert synthetics(rendered(chain_a, alone)) == texts[:1]

    def test_600_call_chain_without_coverage_makes_no_summarizer_call(self) -> None:
        msgs: list[Any] = [user(1000)]
        ts = 1000
        for i in range(640):
            ts += 10
            msgs.append(tool_use(ts, call(f"c{i}", "bash" if i % 3 else "read", n=i)))
            ts += 10
            msgs.append(plain_result(f"c{i}", ts, f"output {i}"))
        msgs.append(final(ts + 10))
        state, log = PrunerState(), Log()
        res = compact(deps(state, log, fuse=fuser(log)), msgs)
        assert log.prompts == []
        (index_entry,) = log.of(INDEX)
        assert len(index_entry["toolCalls"]) == 640
        (entry,) = res.entries
        assert len(entry["toolRefs"]) == 640
        assert entry["toolRefs"][-1] == "t640"
        body = entry["rangeSummaryText"]
        assert "\nCalls: 640\nTools: bash x426, read x214\n" in body
        out = rendered(msgs, state)
        assert [m["role"] for m in out] == ["user", "user", "assistant"]


# ----------------------------------------------------------------------------- seams


class TestFlushSeam:
    def test_disabled_compression_does_nothing(self) -> None:
        config = Config.from_settings_dict({"chainCompression": {"enabled": False}})
        state, log = PrunerState(), Log()
        res = asyncio.run(compress_chains_in_flush(deps(state, log, config=config), chain_b()))
        assert res.entries == []
        assert log.appended == []

    def test_rolling_window_and_closing_message(self) -> None:
        msgs: list[Any] = []
        for k in range(1, 5):
            msgs += [
                user(100 * k),
                tool_use(100 * k + 1, call(f"c{k}")),
                plain_result(f"c{k}", 100 * k + 2),
                final(100 * k + 3),
            ]
        branch, closing = msgs[:-1], msgs[-1]
        state, log = PrunerState(), Log()
        res = asyncio.run(compress_chains_in_flush(deps(state, log), branch))
        assert res.entries == []  # the newest chain reads as open: 3 closed = K
        res = asyncio.run(compress_chains_in_flush(deps(state, log), branch, closing))
        assert [e["startUserTimestamp"] for e in res.entries] == [100]

    def test_recovery_output_in_grace_defers_its_chain(self) -> None:
        # Production wiring: a real context_tree_query result inside the oldest chain, the
        # grace window from the config, computed on the branch without the closing message.
        recovery = plain_result("q1", 102, "recovered raw output", name="context_tree_query")
        msgs: list[Any] = [
            user(100),
            tool_use(101, call("q1", "context_tree_query", toolCallIds=["t1"])),
            recovery,
            final(103),
        ]
        for k in range(2, 6):
            msgs += [
                user(100 * k),
                tool_use(100 * k + 1, call(f"c{k}")),
                plain_result(f"c{k}", 100 * k + 2),
                final(100 * k + 3),
            ]
        config = Config.from_settings_dict(
            {
                "protectedPaths": [],
                "recoveryGraceTurns": 4,
                "chainCompression": {"rollingWindow": 3},
            }
        )
        state, log = PrunerState(), Log()
        res = asyncio.run(compress_chains_in_flush(deps(state, log, config=config), msgs))
        # Two chains are past the window; the one holding the recovery output (4 user turns
        # ago, grace 4) waits, and the window does not let a third one in.
        assert [e["startUserTimestamp"] for e in res.entries] == [200]
        assert res.deferred == 1
        # One more user turn ages it out.
        msgs += [user(600), tool_use(601, call("c6")), plain_result("c6", 602), final(603)]
        res = asyncio.run(compress_chains_in_flush(deps(state, log, config=config), msgs))
        assert [e["startUserTimestamp"] for e in res.entries] == [100, 300]

    def test_reference_mode_absent_window_compresses_nothing(self) -> None:
        config = Config.from_settings_dict(
            {"chainCompression": {"enabled": True}}, compat="reference"
        )
        msgs = [*chain_b(1000), *chain_b(5000)]
        state, log = PrunerState(), Log()
        res = asyncio.run(compress_chains_in_flush(deps(state, log, config=config), msgs))
        assert res.entries == []
        # compact still works (window 0) and runs even with compression disabled.
        off = Config.from_settings_dict({"chainCompression": {"enabled": False}})
        res = compact(deps(state, log, config=off), chain_b(1000))
        assert res.block_ids == ["b1"]

    def test_failure_carries_the_partial_result(self) -> None:
        msgs = [*two_call_chain(100), *chain_b(1000)]
        state, log = PrunerState(), Log()
        cover(state, "t1", "tc1", 210, "A")
        cover(state, "t2", "tc2", 310, "B")
        appended = 0

        def append(custom_type: str, data: Any) -> None:
            nonlocal appended
            appended += 1
            if appended == 3:  # the second chain's chain entry
                raise OSError("stale")
            log.appended.append((custom_type, data))

        d = deps(state, log, fuse=fuser(log))
        d.append = append
        with pytest.raises(ChainCompressionError) as failed:
            compact(d, msgs)
        partial = failed.value.partial
        assert partial.block_ids == ["b1"]
        assert partial.ranges_summarized == 1
        assert len(partial.fusion_usages) == 1

    def test_reclaim_estimate(self) -> None:
        state, log = PrunerState(), Log()
        res = compact(deps(state, log), chain_b(out1="x" * 9, out2="😀"))
        # ceil((9 + 2) / 4): UTF-16 units.
        assert estimate_reclaim_tokens(state, res.entries) == 3
        assert estimate_reclaim_tokens(state, []) == 0

    def test_summarizer_fuse_sends_a_range_request(self) -> None:
        summarizer = ConformanceSummarizer()
        fuse = summarizer_fuse(summarizer, lambda: 42)
        prompt = range_prompt(["- `t1` one", "- `t2` two"])
        answer = asyncio.run(fuse(prompt))
        assert answer is not None
        assert answer.text == (
            "Fused range summary (oracle fake): 2 bullet lines.\nRefs: `t1`, `t2`\n- `t1` one"
        )
        assert summarizer.last_message is not None
        assert summarizer.last_message["timestamp"] == 42


# ----------------------------------------------------------------------------- conformance

REPLAY = shared_root() / "conformance" / "replay"
VECTORS = sorted(p.name for p in REPLAY.iterdir() if (p / "session.jsonl.gz").is_file())
_FLUSH_OUTCOMES = {"summarized", "skipped-oversized", "skipped-deduped", "skipped-trivial"}


def _load(name: str) -> tuple[dict[str, Any], SessionFile]:
    root = REPLAY / name
    meta = json.loads((root / "meta.json").read_text(encoding="utf-8"))
    with gzip.open(root / "session.jsonl.gz", "rb") as f:
        text = f.read().decode("utf-8", "surrogatepass")
    return meta, SessionFile.parse(text)


def _range_prompts(name: str) -> list[str]:
    with gzip.open(REPLAY / name / "summarizer.jsonl.gz", "rb") as f:
        lines = f.read().decode("utf-8", "surrogatepass").splitlines()
    return [call["prompt"] for call in map(json.loads, lines) if call["kind"] == "range"]


@pytest.mark.parametrize("name", VECTORS)
def test_vector_chain_entries(name: str) -> None:
    """Every flush that reached chain compression in the reference, rerun from the state of
    the entries before its chain phase: the same entries, byte for byte, nothing where the
    reference wrote nothing, and the same fusion requests as the reference's summarizer log
    (compressedAt comes from the vector: the frozen clock)."""
    meta, session = _load(name)
    config = Config.from_settings_dict(meta["effectiveConfig"], compat="reference")
    entries = session.entries
    fake = ConformanceSummarizer()
    prompts: list[str] = []

    async def fuse(prompt: str) -> Optional[Completion]:
        prompts.append(prompt)
        return await summarizer_fuse(fake, lambda: 0)(prompt)

    checked = 0
    for k, metrics in enumerate(entries):
        if metrics.get("customType") != "context-prune-flush-metrics":
            continue
        if metrics["data"]["outcome"] not in _FLUSH_OUTCOMES:
            continue
        frontier = max(
            i for i in range(k) if entries[i].get("customType") == "context-prune-frontier"
        )
        start = frontier + 2  # after the flush's frontier and stats entries
        group = [
            e
            for e in entries[start:k]
            if e["customType"] in (CHAIN, INDEX, "context-prune-diagnostic")
        ]
        closing = None
        if metrics["data"]["trigger"] == "message-end" and entries[k + 1].get("type") == "message":
            closing = entries[k + 1]["message"]
        branch = session.branch(entries[start - 1]["id"])
        state = PrunerState.from_branch(branch)
        messages = [e["message"] for e in branch if e.get("type") == "message" and e.get("message")]
        clock = iter([e["data"]["compressedAt"] for e in group if e["customType"] == CHAIN])
        log = Log()
        d = deps(state, log, config=config, fuse=fuse, session_dir=meta["options"]["sessionDir"])
        d.now = clock.__next__
        d.session_id = session.header["id"]
        asyncio.run(compress_chains_in_flush(d, messages, closing))
        want = [
            (e["customType"], jsjson.dumps(e["data"]))
            for e in group
            if e["customType"] != "context-prune-diagnostic"
        ]
        assert log.json() == want, f"flush ending at entry {k}"
        assert [{"kind": kind, "detail": detail} for kind, _, detail in log.diagnostics] == [
            e["data"] for e in group if e["customType"] == "context-prune-diagnostic"
        ]
        checked += len(want)
    assert checked > 80
    assert prompts == _range_prompts(name)


# ----------------------------------------------------------------------------- the command


def _write_session(path: Path, messages: list[Any]) -> None:
    session = SessionFile.create(path, "/work", session_id="sid-1")
    for message in messages:
        session.append_message(message)


class TestCompactCommand:
    def _session(self, tmp_path: Path) -> Path:
        path = tmp_path / "s.jsonl"
        _write_session(path, [*chain_b(1000), *chain_b(5000)])
        return path

    def test_dry_run_writes_nothing(self, tmp_path: Path) -> None:
        path = self._session(tmp_path)
        before = path.read_bytes()
        run = CliRunner().invoke(app, ["compact", str(path), "--config", str(self._cfg(tmp_path))])
        assert run.exit_code == 0, run.output
        assert path.read_bytes() == before
        assert "b1" in run.output
        assert "b2" in run.output
        assert "dry run" in run.output

    def _cfg(self, tmp_path: Path, **extra: Any) -> Path:
        cfg = tmp_path / "settings.json"
        cfg.write_text(json.dumps({"contextPrune": {"enabled": True, **extra}}))
        return cfg

    def test_in_place_appends_entries_and_stats(self, tmp_path: Path) -> None:
        path = self._session(tmp_path)
        run = CliRunner().invoke(
            app,
            ["compact", str(path), "--in-place", "--config", str(self._cfg(tmp_path)), "--json"],
        )
        assert run.exit_code == 0, run.output
        report = json.loads(run.output)
        assert report["compacted"] == ["b1", "b2"]
        assert report["reclaimedTokens"] == 5  # ceil(4 * 5 / 4)
        session = SessionFile.load(path)
        kinds = [e.get("customType") for e in session.entries if e["type"] == "custom"]
        assert kinds == [INDEX, CHAIN, INDEX, CHAIN, "context-prune-stats"]
        stats = session.entries[-1]["data"]
        assert stats["chainsCompressed"] == 2
        state = PrunerState.from_session(session)
        assert state.index.chain_count == 2
        # A second run finds nothing left to do.
        again = CliRunner().invoke(
            app, ["compact", str(path), "--in-place", "--config", str(self._cfg(tmp_path))]
        )
        assert again.exit_code == 0
        assert "no chains eligible for compaction" in again.output

    def test_out_writes_a_copy(self, tmp_path: Path) -> None:
        path = self._session(tmp_path)
        before = path.read_bytes()
        target = tmp_path / "out.jsonl"
        run = CliRunner().invoke(
            app,
            [
                "compact",
                str(path),
                "--out",
                str(target),
                "--config",
                str(self._cfg(tmp_path)),
                "--summarizer",
                "conformance",
            ],
        )
        assert run.exit_code == 0, run.output
        assert path.read_bytes() == before
        assert target.read_bytes().startswith(before)
        assert PrunerState.from_session(SessionFile.load(target)).index.chain_count == 2

    def test_out_and_in_place_conflict(self, tmp_path: Path) -> None:
        path = self._session(tmp_path)
        run = CliRunner().invoke(
            app, ["compact", str(path), "--in-place", "--out", str(tmp_path / "x.jsonl")]
        )
        assert run.exit_code == 2

    def test_example_session_dry_run(self, tmp_path: Path) -> None:
        example = Path(__file__).resolve().parents[2] / "python/pi_condense/examples"
        source = example / "example-session.jsonl"
        copy = tmp_path / "example.jsonl"
        shutil.copyfile(source, copy)
        run = CliRunner().invoke(
            app, ["compact", str(copy), "--config", str(self._cfg(tmp_path)), "--json"]
        )
        assert run.exit_code == 0, run.output
        report = json.loads(run.output)
        assert report["dryRun"] is True
        assert len(report["compacted"]) > 10
        assert copy.read_bytes() == source.read_bytes()

"""The replay driver's event model (conformance/README.md, "How the replay drove the extension").

A recording stand-in for the condenser logs every event with the frozen clock and the number of
session entries at that moment; the expected sequence is written out from the README's rules
for a small hand-made session covering every entry kind the driver handles.
"""

from __future__ import annotations

import gc
import hashlib
import json
from pathlib import Path
from typing import Any, Callable

import pytest

from pi_condense.config import Config
from pi_condense.js import json as jsjson
from pi_condense.js import time as jstime
from pi_condense.render import RenderResult
from pi_condense.replay import ReplayOptions, ReplayResult, replay
from pi_condense.session import SessionFile
from pi_condense.state import PrunerState
from pi_condense.summarize.conformance import ConformanceSummarizer
from pi_condense.usage import estimate_tokens

T0 = 1735689600000  # 2025-01-01T00:00:00.000Z
SOURCE_ID = "src-session-1"


def at(seconds: float) -> int:
    return T0 + int(seconds * 1000)


def iso(seconds: float) -> str:
    return jstime.to_iso_string(at(seconds))


def user(text: str, s: float) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": at(s)}


def assistant(
    name: str, s: float, calls: tuple[tuple[str, str, dict[str, Any]], ...] = (), **extra: Any
) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": name}]
    content += [{"type": "toolCall", "id": i, "name": n, "arguments": a} for i, n, a in calls]
    message = {
        "role": "assistant",
        "content": content,
        "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 100},
        "stopReason": "toolUse" if calls else "stop",
        "timestamp": at(s - 0.5),
    }
    message.update(extra)
    return message


def result(call_id: str, name: str, text: str, s: float, **extra: Any) -> dict[str, Any]:
    message = {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": name,
        "content": [{"type": "text", "text": text}],
        "isError": False,
        "timestamp": at(s),
    }
    message.update(extra)
    return message


QUERY_ARGS = {"toolCallIds": ["t1"]}
ZERO_USAGE = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0}


def source_entries() -> list[dict[str, Any]]:
    """e1..e24: the scenario the expected event list below is derived from."""
    messages: dict[int, dict[str, Any]] = {
        1: user("u1", 1),
        2: assistant("a1", 2, (("c1", "read", {"path": "a"}),)),
        3: result("c1", "read", "x" * 10, 3),
        4: assistant("a2", 4, (("c2", "bash", {"command": "ls"}),)),
        5: result("c2", "bash", "y" * 30, 5),
        6: assistant("a3", 6),
        7: user("u2", 7),
        8: user("u3", 8),
        9: assistant("a4", 9, (("c3", "read", {"path": "b"}),)),
        10: result("c3", "read", "z", 10),
        12: user("u4", 12),
        13: assistant("a5", 13, (("c4", "bash", {}),), stopReason="error"),
        18: {"role": "bashExecution", "command": "make", "output": "ok", "timestamp": at(18)},
        19: user("u5", 19),
        20: assistant(
            "a6", 20, (("c5", "context_tree_query", QUERY_ARGS),), usage=dict(ZERO_USAGE)
        ),
        21: result("c5", "context_tree_query", "placeholder", 21, details={"oracleExec": True}),
        22: assistant("a7", 22),
        24: user("u6", 24),
    }
    others: dict[int, dict[str, Any]] = {
        11: {"type": "thinking_level_change", "thinkingLevel": "high"},
        14: {"type": "label", "targetId": "e1", "label": "start"},
        15: {"type": "custom", "customType": "my-ext", "data": {"k": 1}},
        16: {"type": "custom", "customType": "context-prune-stats", "data": {}},
        17: {"type": "compaction", "summary": "S", "firstKeptEntryId": "e12", "tokensBefore": 9},
        23: {"type": "branch_summary", "fromId": "e22", "summary": "B"},
    }
    entries = []
    for k in range(1, 25):
        body = {"type": "message", "message": messages[k]} if k in messages else others[k]
        entry = {"type": body["type"], "id": f"e{k}", "parentId": f"e{k - 1}" if k > 1 else None}
        entry["timestamp"] = iso(k)
        entry.update({key: value for key, value in body.items() if key != "type"})
        entries.append(entry)
    return entries


def write_source(tmp_path: Path) -> Path:
    header = {"type": "session", "version": 3, "id": SOURCE_ID, "timestamp": iso(0), "cwd": "/w"}
    path = tmp_path / "raw.jsonl"
    lines = [json.dumps(header)] + [json.dumps(e) for e in source_entries()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def label(message: Any) -> str:
    if message.get("role") in ("user", "assistant"):
        content = message["content"]
        return str(content[0]["text"] if isinstance(content, list) else content)
    if message.get("role") == "toolResult":
        return "r:" + message["toolCallId"]
    return str(message.get("role"))


class Recorder:
    """Stands in for the Condenser: logs (event, seconds after T0, entries, detail)."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []
        self.instances = 0
        # Whether the cyclic collector ran during each event: (event, enabled).
        self.collector: list[tuple[str, bool]] = []

    def factory(
        self,
        session: SessionFile,
        config: Config,
        *,
        summarizer: Any,
        session_model: Any,
        clock: Callable[[], int],
        context_usage: Callable[[], Any],
        notify: Callable[[str, str], None],
    ) -> Any:
        self.instances += 1
        assert summarizer is session_model
        return _Stub(self, session, clock, context_usage)


class _Stub:
    def __init__(
        self, rec: Recorder, session: SessionFile, clock: Callable[[], int], usage: Any
    ) -> None:
        self.rec, self.session, self.clock, self.usage = rec, session, clock, usage
        self.state = PrunerState()

    def _log(self, *item: Any) -> None:
        self.rec.events.append((item[0], (self.clock() - T0) / 1000, len(self.session), *item[1:]))

    def session_start(self) -> None:
        self._log("session_start")

    def session_tree(self) -> None:
        self._log("session_tree")

    def session_compact(self) -> None:
        self._log("session_compact")

    async def turn_end(self, message: Any, tool_results: list[Any], turn_index: int) -> None:
        usage = self.usage()
        results = [label(r) for r in tool_results]
        self._log("turn_end", label(message), results, turn_index, usage.tokens)

    async def message_end(self, message: Any) -> None:
        self._log("message_end", label(message))
        self.rec.collector.append(("message_end", gc.isenabled()))

    def agent_end(self) -> None:
        self._log("agent_end")

    def context(self, messages: list[Any]) -> RenderResult:
        self._log("context", [label(m) for m in messages])
        self.rec.collector.append(("context", gc.isenabled()))
        if len(messages) < 3:
            return RenderResult(messages, False, 0, 0)
        return RenderResult(messages[1:], True, 1, 1)


def run(tmp_path: Path, **options: Any) -> tuple[Recorder, ReplayResult]:
    rec = Recorder()
    source = SessionFile.load(write_source(tmp_path))
    config = Config.from_settings_dict({"enabled": True})
    opts = ReplayOptions(session_dir=str(tmp_path / "out"), **options)
    out = replay(source, config, ConformanceSummarizer(), opts, condenser_factory=rec.factory)
    return rec, out


# tokens after a1..: usage 100 + estimates of the messages after the last usable assistant
TOK_A1 = 100 + estimate_tokens(result("c1", "read", "x" * 10, 3))
TOK_A2 = 100 + estimate_tokens(result("c2", "bash", "y" * 30, 5))


EXPECTED: list[tuple[Any, ...]] = [
    ("session_start", 0, 0),
    ("message_end", 1, 0, "u1"),
    ("context", 1.5, 1, ["u1"]),
    ("message_end", 2, 1, "a1"),
    ("message_end", 3, 2, "r:c1"),
    ("turn_end", 3, 3, "a1", ["r:c1"], 0, TOK_A1),
    ("context", 3.5, 3, ["u1", "a1", "r:c1"]),
    ("message_end", 4, 3, "a2"),
    ("message_end", 5, 4, "r:c2"),
    ("turn_end", 5, 5, "a2", ["r:c2"], 1, TOK_A2),
    ("context", 5.5, 5, ["u1", "a1", "r:c1", "a2", "r:c2"]),
    ("message_end", 6, 5, "a3"),
    ("turn_end", 6, 6, "a3", [], 2, 100),
    ("agent_end", 6, 6),
    ("message_end", 7, 6, "u2"),
    ("message_end", 8, 7, "u3"),
    ("context", 8.5, 8, ["u1", "a1", "r:c1", "a2", "r:c2", "a3", "u2", "u3"]),
    ("message_end", 9, 8, "a4"),
    ("message_end", 10, 9, "r:c3"),
    # e11 thinking_level_change: appended at 11, no event; the pending turn closes at that clock
    ("turn_end", 11, 11, "a4", ["r:c3"], 0, 100 + 1),
    ("agent_end", 11, 11),
    ("message_end", 12, 11, "u4"),
    ("context", 12.5, 12, ["u1", "a1", "r:c1", "a2", "r:c2", "a3", "u2", "u3", "a4", "r:c3", "u4"]),
    ("message_end", 13, 12, "a5"),
    # stopReason "error": the turn and the run end although a5 holds a tool call
    ("turn_end", 13, 13, "a5", [], 0, 100 + 1 + 1 + 2),
    ("agent_end", 13, 13),
    # e14 label, e15 custom: appended; e16 (a pruner entry) skipped; e17 compaction (the
    # prompt cache is cold: session_compact); e18 bash
    ("session_compact", 17, 16),
    ("message_end", 19, 17, "u5"),
    ("context", 19.5, 18, ["compactionSummary", "u4", "a5", "bashExecution", "u5"]),
    ("message_end", 20, 18, "a6"),
    ("message_end", 21, 19, "r:c5"),
    # a6 reports no usage and follows the compaction: tokens unknown
    ("turn_end", 21, 20, "a6", ["r:c5"], 0, None),
    ("context", 21.5, 20, ["compactionSummary", "u4", "a5", "bashExecution", "u5", "a6", "r:c5"]),
    ("message_end", 22, 20, "a7"),
    ("turn_end", 22, 21, "a7", [], 1, 100),
    ("agent_end", 22, 21),
    ("session_tree", 23, 22),
    ("message_end", 24, 22, "u6"),
    ("agent_end", 24, 23),
]


def test_event_sequence_clock_and_entry_counts(tmp_path: Path) -> None:
    rec, out = run(tmp_path)
    assert rec.events == EXPECTED
    assert rec.instances == 1
    assert out.counts == {
        "runs": 5,
        "turns": 7,
        "llmCalls": 7,
        "restarts": 0,
        "queryExecs": 1,
    }
    assert out.warnings == [
        "source already contains context-prune-stats; skipped (replay regenerates pruner entries)"
    ]
    assert out.handler_errors == []


def test_restart_each_prompt_starts_a_fresh_condenser_per_run(tmp_path: Path) -> None:
    rec, out = run(tmp_path, restart_each_prompt=True)
    starts = [(e[1], e[2]) for e in rec.events if e[0] == "session_start"]
    # runs open at u1 (the first condenser), u2, u4, u5, u6; u3 joins u2's run
    assert starts == [(0, 0), (7, 6), (12, 11), (19, 17), (24, 22)]
    assert rec.instances == 5
    assert out.counts["restarts"] == 4
    assert [e for e in rec.events if e[0] != "session_start"] == [
        e for e in EXPECTED if e[0] != "session_start"
    ]


def test_new_session_file(tmp_path: Path) -> None:
    _, out = run(tmp_path)
    lines = out.session_text().splitlines()
    assert lines[0] == (
        '{"type":"session","version":3,"id":"src-session-1",'
        '"timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w"}'
    )
    entries = [json.loads(line) for line in lines[1:]]
    kept = [e for e in source_entries() if e["id"] != "e16"]
    assert len(entries) == len(kept) == 23
    for k, (entry, src) in enumerate(zip(entries, kept, strict=False), 1):
        assert entry["id"] == f"{k:08x}"
        assert entry["parentId"] == (f"{k - 1:08x}" if k > 1 else None)
        assert entry["type"] == src["type"]
        assert entry["timestamp"] == src["timestamp"]
    by_src = {src["id"]: entry["id"] for entry, src in zip(entries, kept, strict=False)}
    assert entries[13]["targetId"] == by_src["e1"]
    assert entries[15]["firstKeptEntryId"] == by_src["e12"]
    assert entries[15]["tokensBefore"] == 9
    assert entries[14] == {
        "type": "custom",
        "customType": "my-ext",
        "data": {"k": 1},
        "id": "0000000f",
        "parentId": "0000000e",
        "timestamp": iso(15),
    }
    assert entries[21]["fromId"] == by_src["e22"]
    assert entries[21]["summary"] == "B"
    # untouched messages are re-appended verbatim
    assert entries[1]["message"] == source_entries()[1]["message"]


def test_query_placeholder_is_executed(tmp_path: Path) -> None:
    _, out = run(tmp_path)
    entry = json.loads(out.session_text().splitlines()[20])
    text = "## toolRef: t1\n(not found in index \u2014 may not have been summarized yet)"
    assert entry["message"] == {
        "role": "toolResult",
        "toolCallId": "c5",
        "toolName": "context_tree_query",
        "content": [{"type": "text", "text": text}],
        "details": {"results": {}},
        "isError": False,
        "timestamp": at(21),
    }


def decode(log_text: str) -> tuple[dict[int, str], list[dict[str, Any]]]:
    pool: dict[int, str] = {}
    calls: list[dict[str, Any]] = []
    for line in log_text.splitlines():
        record = json.loads(line)
        if "p" in record:
            pool[record["p"]] = record["json"]
        else:
            calls.append(record)
    return pool, calls


def test_contexts_log_pool_encoding(tmp_path: Path) -> None:
    _, out = run(tmp_path)
    pool, calls = decode(out.contexts.jsonl())
    assert [c["call"] for c in calls] == list(range(7))
    assert [c["entries"] for c in calls] == [1, 3, 5, 8, 12, 18, 20]
    assert [c["changed"] for c in calls] == [False, True, True, True, True, True, True]
    assert [c["nextAssistantTimestamp"] for c in calls] == [
        at(s - 0.5) for s in (2, 4, 6, 9, 13, 20, 22)
    ]
    for call in calls:
        inputs = [pool[k] for k in call["in"]]
        outputs = [pool[k] for k in call["out"]]
        assert outputs == (inputs if not call["changed"] else inputs[1:])
        text = "[" + ",".join(outputs) + "]"
        assert call["outSha256"] == hashlib.sha256(text.encode()).hexdigest()
        assert call["outChars"] == jsjson.utf16_len(text)
    # the first input of the third call is u1 exactly as Pi serializes it
    assert pool[calls[2]["in"][0]] == jsjson.dumps(source_entries()[0]["message"])
    # key order of a call record
    head = json.loads(out.contexts.jsonl().splitlines()[1])
    assert list(head) == [
        "call",
        "changed",
        "entries",
        "nextAssistantTimestamp",
        "outChars",
        "outSha256",
        "in",
        "out",
    ]
    sizes = out.contexts.sizes
    assert [s.after for s in sizes] == [c["outChars"] for c in calls]
    assert [s.before > s.after for s in sizes] == [c["changed"] for c in calls]


def test_random_ids_without_deterministic(tmp_path: Path) -> None:
    _, out = run(tmp_path, deterministic=False)
    ids = [e["id"] for e in out.session.entries]
    assert len(set(ids)) == 23
    assert all(len(i) == 8 and int(i, 16) >= 0 for i in ids)
    assert ids != [f"{k:08x}" for k in range(1, 24)]


def test_handler_errors_are_recorded_like_pis_runner(tmp_path: Path) -> None:
    rec = Recorder()

    def failing(*args: Any, **kwargs: Any) -> Any:
        stub = rec.factory(*args, **kwargs)

        async def boom(message: Any) -> None:
            raise RuntimeError("kaput")

        stub.message_end = boom
        return stub

    source = SessionFile.load(write_source(tmp_path))
    config = Config.from_settings_dict({"enabled": True})
    out = replay(source, config, ConformanceSummarizer(), None, condenser_factory=failing)
    assert len(out.handler_errors) == 17
    assert out.handler_errors[0] == ("message_end", "RuntimeError: kaput")
    assert len(out.session.entries) == 23
    with pytest.raises(RuntimeError, match="kaput"):
        replay(
            source,
            config,
            ConformanceSummarizer(),
            ReplayOptions(raise_errors=True),
            condenser_factory=failing,
        )


def test_write_outputs(tmp_path: Path) -> None:
    _, out = run(tmp_path)
    target = tmp_path / "dir"
    out.write(target)
    assert sorted(p.name for p in target.iterdir()) == [
        "contexts.jsonl",
        "meta.json",
        "session.jsonl",
        "summarizer.jsonl",
    ]
    assert (target / "session.jsonl").read_text(encoding="utf-8") == out.session_text()
    assert (target / "summarizer.jsonl").read_text(encoding="utf-8") == ""
    meta = json.loads((target / "meta.json").read_text(encoding="utf-8"))
    assert meta["counts"]["byType"] == {
        "message": 18,
        "thinking_level_change": 1,
        "label": 1,
        "custom:my-ext": 1,
        "compaction": 1,
        "branch_summary": 1,
    }


@pytest.mark.parametrize("running", [True, False])
def test_the_collector_is_paused_only_around_each_context_call(
    tmp_path: Path, running: bool
) -> None:
    # The render's new messages are dropped with the call's result: paused until then, the
    # collector never promotes them (they are freed by reference counting).
    was = gc.isenabled()
    (gc.enable if running else gc.disable)()
    try:
        rec, _ = run(tmp_path)
        assert gc.isenabled() is running
    finally:
        (gc.enable if was else gc.disable)()
    contexts = [enabled for event, enabled in rec.collector if event == "context"]
    others = [enabled for event, enabled in rec.collector if event != "context"]
    assert contexts
    assert others
    assert not any(contexts)
    assert all(enabled is running for enabled in others)

"""`pi-condense status`, `stats`, `tree` and `flush` (the `/pruner` read-outs and `/pruner now`),
run as real subprocesses on the bundled example session and on a condensed copy of it.

Expected texts are spec 09's (sections 2.1, 2.2, 2.4, 2.5); expected numbers are recomputed
here from the session file's own entries, not taken from the commands' output.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pi_condense.cli._common import EXAMPLE_SESSION
from pi_condense.config import Config
from pi_condense.js import json as jsjson
from pi_condense.render import render
from pi_condense.session import SessionFile
from pi_condense.state import PrunerState
from support.llm_servers import LoopbackLLMServer, Recorded, Reply, openai_stream

CLI = [sys.executable, "-c", "from pi_condense.cli import main; main()"]
DOT = "\u00b7"
DASH = "\u2014"


def run(*args: str, agent: Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PI_CODING_AGENT_DIR": str(agent), "TZ": "UTC", "COLUMNS": "200"}
    for proxy in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        env.pop(proxy, None)
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300, check=False
    )


@pytest.fixture(scope="module")
def condensed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled example condensed by `condense` (offline summarizer)."""
    root = tmp_path_factory.mktemp("condensed")
    target = root / "condensed.jsonl"
    proc = run("condense", str(EXAMPLE_SESSION), "-o", str(target), "-q", agent=root / "agent")
    assert proc.returncode == 0, proc.stderr
    return target


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    return tmp_path / "agent"


def entries(path: Path) -> list[dict[str, Any]]:
    data = path.read_bytes()
    if path.name.endswith(".gz"):
        data = gzip.decompress(data)
    return [json.loads(line) for line in data.decode("utf-8").splitlines()[1:] if line]


def of_type(items: list[dict[str, Any]], custom_type: str) -> list[dict[str, Any]]:
    return [e for e in items if e.get("customType") == custom_type]


# ------------------------------------------------------------------------------ status

SETTINGS_LINES = (
    "pruner status:\n"
    "  enabled:  false\n"
    "  model:    default\n"
    "  thinking: Default (default)\n"
    "  idle to:  20s\n"
    "  max to:   180s\n"
    "  trigger:  On agent message\n"
    "  batching: Per turn (turn)\n"
    "  dedup:    on\n"
    "  status:   on\n"
)


def test_status_of_a_raw_session_has_no_summarizer_calls(agent: Path) -> None:
    proc = run("status", str(EXAMPLE_SESSION), agent=agent)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(
        SETTINGS_LINES + "  (no summarizer calls yet)\n  --- context ---\n"
    )
    assert "  chain share:  13%\n" in proc.stdout
    assert "rearmed" not in proc.stdout  # disabled: the reload probe does not run
    chars = jsjson.length(SessionFile.load(EXAMPLE_SESSION).build_context().messages)
    assert f"  context raw:      {chars:,} chars" in proc.stdout
    assert f"  context rendered: {chars:,} chars" in proc.stdout
    assert re.search(r"  pending: +\d+ batch\(es\), 373 tool call\(s\)", proc.stdout)


def test_status_shows_rearmed_when_enabled_with_pending_work(agent: Path, tmp_path: Path) -> None:
    settings = tmp_path / "on.json"
    settings.write_text(
        '{"enabled": true, "dedupByContentHash": false, "summarizerIdleTimeoutMs": 0}'
    )
    proc = run("status", str(EXAMPLE_SESSION), "--config", str(settings), agent=agent)
    assert proc.returncode == 0, proc.stderr
    assert "  enabled:  true\n" in proc.stdout
    assert "  idle to:  disabled\n" in proc.stdout
    assert "  dedup:    off\n" in proc.stdout
    assert "  rearmed:      yes\n" in proc.stdout
    assert "  frontier gap: 113.4k tokens\n  rearmed:      yes\n  --- session ---" in proc.stdout


def test_status_rounds_the_timeouts_as_math_round(agent: Path, tmp_path: Path) -> None:
    # The reference prints `${Math.round(ms / 1000)}s`: halves go up (2.5 -> 3, 0.5 -> 1),
    # where Python's round() would give 2 and 0.
    settings = tmp_path / "timeouts.json"
    settings.write_text('{"summarizerIdleTimeoutMs": 2500, "summarizerMaxTimeoutMs": 500}')
    proc = run("status", str(EXAMPLE_SESSION), "--config", str(settings), agent=agent)
    assert proc.returncode == 0, proc.stderr
    assert "  idle to:  3s\n  max to:   1s\n" in proc.stdout


def test_status_json_of_the_condensed_session(condensed: Path, agent: Path) -> None:
    proc = run("status", str(condensed), "--json", agent=agent)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    items = entries(condensed)
    last_stats = of_type(items, "context-prune-stats")[-1]["data"]
    assert report["stats"] == last_stats
    assert report["summaries"] == len(of_type(items, "context-prune-summary"))
    assert report["chainsCompressed"] == len(of_type(items, "context-prune-chain"))
    refs = [
        int(ref["shortId"][1:])
        for e in of_type(items, "context-prune-summary")
        for ref in e["details"]["toolCallRefs"]
    ]
    refs += [
        int(ref["shortId"][1:])
        for e in of_type(items, "context-prune-index")
        for ref in e["data"].get("refs", [])
    ]
    assert report["refs"] == max(refs)
    raw = SessionFile.load(EXAMPLE_SESSION).build_context().messages
    session = SessionFile.load(condensed)
    messages = session.build_context().messages
    rendered = render(messages, PrunerState.from_session(session), Config())
    assert report["context"]["rawChars"] == jsjson.length(raw)
    assert report["context"]["messages"] == len(raw)
    assert report["context"]["renderedChars"] == rendered.after_chars < jsjson.length(raw)
    assert report["context"]["renderedMessages"] == len(rendered.messages)
    assert report["pending"] == {"batches": 0, "toolCalls": 0, "rawChars": 0}
    assert report["rearmed"] is False
    assert set(report["metrics"]) == {
        "openCycleThinkingTokens",
        "largestChainSharePct",
        "frontierGapTokens",
    }
    summarizer = (
        f"  --- summarizer ---\n  calls:       {last_stats['callCount']}\n"
        "  input:       0 tokens\n  output:      0 tokens\n  cost:        $0.000\n"
    )
    assert report["text"].startswith(SETTINGS_LINES + summarizer + "  --- context ---\n")


def test_status_reads_gzipped_sessions(condensed: Path, agent: Path, tmp_path: Path) -> None:
    packed = tmp_path / "condensed.jsonl.gz"
    packed.write_bytes(gzip.compress(condensed.read_bytes()))
    plain = json.loads(run("status", str(condensed), "--json", agent=agent).stdout)
    proc = run("status", str(packed), "--json", agent=agent)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["file"] == str(packed)
    assert {k: v for k, v in report.items() if k != "file"} == {
        k: v for k, v in plain.items() if k != "file"
    }


def test_status_of_a_missing_file_names_it_once(agent: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    proc = run("status", str(missing), agent=agent)
    assert proc.returncode == 2
    assert proc.stderr.count(str(missing)) == 1
    assert proc.stdout == ""


# ------------------------------------------------------------------------------- stats


def test_stats_of_a_raw_session(agent: Path) -> None:
    proc = run("stats", str(EXAMPLE_SESSION), agent=agent)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "pruner stats: no summarizer calls yet.\n"


def test_stats_of_the_condensed_session(condensed: Path, agent: Path) -> None:
    items = entries(condensed)
    last = of_type(items, "context-prune-stats")[-1]["data"]
    proc = run("stats", str(condensed), agent=agent)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(
        f"pruner stats:\n  calls:       {last['callCount']}\n  input:       0 tokens\n"
        f"  output:      0 tokens\n  cost:        $0.000\n"
        f"  chains:      {last['chainsCompressed']} compressed\nsummarized batches\n"
    )
    report = json.loads(run("stats", str(condensed), "--json", agent=agent).stdout)
    summaries = of_type(items, "context-prune-summary")
    assert len(report["batches"]) == len(summaries)
    for row, entry in zip(report["batches"], summaries, strict=False):
        assert row["refs"] == [r["shortId"] for r in entry["details"]["toolCallRefs"]]
        assert row["turnIndex"] == entry["details"]["turnIndex"]
        assert row["summaryChars"] == len(entry["content"])
    first = summaries[0]["details"]["toolCallRefs"]
    records = {
        (r["toolCallId"], r["resultTimestamp"]): r
        for e in of_type(items, "context-prune-index")
        for r in e["data"]["toolCalls"]
    }
    raw = sum(
        len(records[(ref["toolCallId"], ref["resultTimestamp"])]["resultText"]) for ref in first
    )
    assert report["batches"][0]["rawChars"] == raw
    updates = report["statsUpdates"]
    assert len(updates) == len(of_type(items, "context-prune-stats"))
    assert sum(u["calls"] for u in updates) == last["callCount"]
    assert sum(u["chainsCompressed"] for u in updates) == last["chainsCompressed"]
    assert report["text"] == proc.stdout.split("\nsummarized batches")[0]


# -------------------------------------------------------------------------------- tree


def test_tree_of_a_raw_session(agent: Path) -> None:
    proc = run("tree", str(EXAMPLE_SESSION), agent=agent)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "No pruned tool calls found in this session.\n"


def cc(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def test_tree_groups_calls_under_summaries_and_chains(condensed: Path, agent: Path) -> None:
    proc = run("tree", str(condensed), agent=agent)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    items = entries(condensed)
    summaries = of_type(items, "context-prune-summary")
    records = {
        (r["toolCallId"], r["resultTimestamp"]): r
        for e in of_type(items, "context-prune-index")
        for r in e["data"]["toolCalls"]
    }
    first = summaries[0]
    calls = [
        records[(r["toolCallId"], r["resultTimestamp"])] for r in first["details"]["toolCallRefs"]
    ]
    original = sum(len(r["resultText"]) for r in calls)
    # 1763681634572 ms = 2025-11-20T23:33:54.572Z; en-US toLocaleString in UTC.
    assert first["details"]["timestamp"] == 1763681634572
    label = (
        f"[pruner] Turn 1 summary ({len(calls)} tools {DOT} {len(first['content'])} chars {DOT} "
        f"original {cc(original)}) {DOT} 11/20/2025, 11:33:54 PM"
    )
    chain = of_type(items, "context-prune-chain")[0]["data"]
    assert lines[0].startswith(f"[pruner] Chain {chain['blockId']} (")
    assert lines[1] == "  " + label
    read = calls[0]
    size = cc(len(read["resultText"]))
    assert lines[2] == f"    read(path={json.dumps(read['args']['path'])}) {DOT} {size} chars"
    tree = json.loads(run("tree", str(condensed), "--json", agent=agent).stdout)["roots"]
    nodes = [
        n for root in tree for n in ([root] if root["kind"] == "summary" else root["children"])
    ]
    assert len(nodes) == len(summaries)
    assert sum(len(n["children"]) for n in nodes) == sum(
        len(e["details"]["toolCallRefs"]) for e in summaries
    )
    errors = [c for n in nodes for c in n["children"] if c["label"].endswith(" [error]")]
    referenced = [
        records[(r["toolCallId"], r["resultTimestamp"])]
        for e in summaries
        for r in e["details"]["toolCallRefs"]
    ]
    assert len(errors) == sum(1 for r in referenced if r["isError"]) > 0


# ------------------------------------------------------------------------------- flush


def test_flush_refuses_when_pruning_is_disabled(agent: Path, tmp_path: Path) -> None:
    session = tmp_path / "session.jsonl"
    shutil.copy(EXAMPLE_SESSION, session)
    before = session.read_bytes()
    proc = run("flush", str(session), agent=agent)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0] == "Context pruning is disabled. Run /pruner on first."
    assert proc.stdout == ""
    assert session.read_bytes() == before


def test_flush_refuses_a_gzipped_session(agent: Path, tmp_path: Path) -> None:
    packed = tmp_path / "s.jsonl.gz"
    packed.write_bytes(gzip.compress(EXAMPLE_SESSION.read_bytes()))
    proc = run("flush", str(packed), agent=agent)
    assert proc.returncode == 2
    assert "plain .jsonl" in proc.stderr


def enable(agent: Path, **extra: Any) -> None:
    agent.mkdir(parents=True, exist_ok=True)
    settings = {"theme": "dark", "contextPrune": {"enabled": True, **extra}}
    (agent / "settings.json").write_text(json.dumps(settings), encoding="utf-8")


def test_flush_summarizes_everything_pending_then_nothing(agent: Path, tmp_path: Path) -> None:
    session = tmp_path / "session.jsonl"
    shutil.copy(EXAMPLE_SESSION, session)
    enable(agent)
    pending = json.loads(run("status", str(session), "--json", agent=agent).stdout)["pending"]
    assert pending["toolCalls"] == 373
    size = len(entries(session))
    proc = run("flush", str(session), "--json", "-q", agent=agent)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    items = entries(session)
    added = items[size:]
    assert report["entriesAppended"] == len(added) > 0
    assert report["ok"] is True
    assert report["reason"] == "flushed"
    assert report["pending"]["batches"] == pending["batches"]
    summaries = of_type(added, "context-prune-summary")
    # Every captured batch is processed; the trivial ones (below minBatchChars) get no summary.
    assert report["batchCount"] == pending["batches"] > len(summaries) > 0
    assert report["toolCallCount"] == 373
    assert report["summaryCharCount"] == sum(len(e["content"]) for e in summaries)
    n, b = report["toolCallCount"], report["batchCount"]
    message = (
        f"pruner: pruned {n} tool calls from {b} batches {DASH} summary "
        f"{report['summaryCharCount']} chars vs {report['rawCharCount']} raw chars"
    )
    assert report["messages"] == [{"level": "info", "message": message}]
    metrics = of_type(added, "context-prune-flush-metrics")
    assert [m["data"]["trigger"] for m in metrics] == ["manual"]
    assert metrics[0]["data"]["outcome"] == "summarized"
    # Everything is summarized now: a second flush finds nothing, and says so.
    again = run("flush", str(session), agent=agent)
    assert again.returncode == 0, again.stderr
    assert again.stdout == "pruner: nothing pending \u2014 no batches to summarize\n"
    empty = of_type(entries(session)[len(items) :], "context-prune-flush-metrics")
    assert [m["data"]["outcome"] for m in empty] == ["empty"]
    # The session still loads, condensed, and the summaries count in `status`.
    status = json.loads(run("status", str(session), "--json", agent=agent).stdout)
    assert status["summaries"] == len(summaries)
    assert status["pending"]["toolCalls"] == 0


def summarizer_reply(request: Recorded) -> Reply:
    usage = {"prompt_tokens": 1200, "completion_tokens": 30, "total_tokens": 1230}
    return openai_stream(["- read the files", " and ran the commands"], usage=usage)


def test_flush_through_an_api_summarizer(agent: Path, tmp_path: Path) -> None:
    session = tmp_path / "session.jsonl"
    shutil.copy(EXAMPLE_SESSION, session)
    enable(agent, minBatchChars=20000)
    with LoopbackLLMServer(summarizer_reply, max_lifetime=300) as server:
        proc = run(
            "flush",
            str(session),
            "--summarizer",
            "openai:gpt-4o-mini",
            "--base-url",
            server.url + "/v1",
            "-q",
            agent=agent,
        )
        calls = len(server.requests)
    assert proc.returncode == 0, proc.stderr
    summaries = of_type(entries(session), "context-prune-summary")
    assert calls == len(summaries) > 0
    assert all(e["content"].startswith("- read the files and ran the commands") for e in summaries)
    stats = run("stats", str(session), agent=agent).stdout
    # 1200 input and 30 output tokens per call (spec 08 section 8: cc, formatCost).
    assert f"  calls:       {calls}\n" in stats
    assert f"  input:       {cc(1200 * calls)} tokens\n" in stats
    assert f"  output:      {cc(30 * calls)} tokens\n" in stats
    # gpt-4o-mini's list price: $0.15 / $0.60 per million input / output tokens.
    cost = calls * (1200 * 0.15 + 30 * 0.60) / 1e6
    shown = "<$0.001" if 0 < cost < 0.001 else f"${cost:.3f}"
    assert f"  cost:        {shown}\n" in stats

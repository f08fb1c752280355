"""`condense`, `replay` and `compact` with the API summarizers, against loopback servers.

The CLI runs as a real subprocess (`--summarizer openai:MODEL` / `anthropic:MODEL` with
`--base-url`) and talks to a `LoopbackLLMServer` on 127.0.0.1 through the official SDKs. The
server plays the model: a batch prompt gets one bullet per `[[N:tool]]` label of the prompt,
a range prompt gets one fused line naming the refs it was given, and every answer reports a
usage computed from the request. The session entries the CLI writes must carry exactly what
the server reported.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import pytest

from pi_condense.session import SessionFile
from support.cli import run_offline
from support.llm_servers import (
    LoopbackLLMServer,
    Recorded,
    Reply,
    anthropic_stream,
    openai_error,
    openai_stream,
)
from support.sessions import small_session

MODEL = "loopback-model"
STATS = "context-prune-stats"
SUMMARY = "context-prune-summary"
CHAIN = "context-prune-chain"

_LABEL = re.compile(r"^\[\[([0-9]+):([^\]\n]+)\]\] Tool: ", re.M)
_REF = re.compile(r"`t[0-9]+`")


@dataclass(frozen=True)
class Answer:
    """One reply of the loopback model and the usage it reported."""

    kind: str  # "batch" or "range"
    text: str
    input_tokens: int
    output_tokens: int


class LoopbackModel:
    """The loopback server's responder: answers both wire protocols and records its answers."""

    def __init__(self) -> None:
        self.answers: list[Answer] = []
        self.paths: list[str] = []
        self.models: list[Any] = []
        self._lock = threading.Lock()

    @staticmethod
    def prompt_of(body: Any) -> str:
        content = body["messages"][0]["content"]
        if isinstance(content, str):
            return content
        return "".join(block["text"] for block in content if block.get("type") == "text")

    @staticmethod
    def answer(prompt: str) -> tuple[str, str]:
        if "<tool-call-batch>\n" in prompt:
            batch = prompt.split("<tool-call-batch>\n", 1)[1]
            labels = _LABEL.findall(batch)
            bullets = [
                f"- [[{n}:{name}]] {name} call {n} noted by the loopback model"
                for n, name in labels
            ]
            return "batch", "\n".join(bullets) or "- nothing to record"
        refs = sorted(set(_REF.findall(prompt)), key=lambda ref: int(ref[2:-1]))
        return "range", "Fused sub-task covering " + ", ".join(refs)

    def __call__(self, request: Recorded) -> Reply:
        prompt = self.prompt_of(request.body)
        kind, text = self.answer(prompt)
        answer = Answer(kind, text, len(prompt) // 3 + 7, len(text) // 5 + 3)
        with self._lock:
            self.answers.append(answer)
            self.paths.append(request.path)
            self.models.append(request.body.get("model"))
        half = len(text) // 2  # two deltas: the client must join the stream
        if request.path.endswith("/chat/completions"):
            usage = {
                "prompt_tokens": answer.input_tokens,
                "completion_tokens": answer.output_tokens,
                "total_tokens": answer.input_tokens + answer.output_tokens,
            }
            return openai_stream([text[:half], text[half:]], model=MODEL, usage=usage)
        return anthropic_stream(
            [text[:half], text[half:]],
            model=MODEL,
            input_tokens=answer.input_tokens,
            output_tokens=answer.output_tokens,
        )

    def of_kind(self, kind: str) -> list[Answer]:
        return [a for a in self.answers if a.kind == kind]


@pytest.fixture
def model() -> Iterator[tuple[LoopbackModel, LoopbackLLMServer]]:
    responder = LoopbackModel()
    with LoopbackLLMServer(responder, max_lifetime=600) as server:
        yield responder, server


def api(server: LoopbackLLMServer, provider: str) -> list[str]:
    """`--summarizer PROVIDER:MODEL --base-url URL` (OpenAI's base URL includes `/v1`)."""
    url = server.url + "/v1" if provider == "openai" else server.url
    return ["--summarizer", f"{provider}:{MODEL}", "--base-url", url]


def session_prefix(fixtures_dir: Path, tmp_path: Path, lines: int = 300) -> Path:
    """The first ``lines - 1`` entries of the large-session fixture (and its header)."""
    text = (fixtures_dir / "large-session.jsonl").read_text("utf-8")
    path = tmp_path / "prefix.jsonl"
    path.write_text("".join(text.splitlines(keepends=True)[:lines]), encoding="utf-8")
    return path


def custom(entries: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in entries if e.get("customType") == kind]


def last_stats(entries: list[dict[str, Any]]) -> dict[str, Any]:
    stats = custom(entries, STATS)
    assert stats, "no context-prune-stats entry"
    data: dict[str, Any] = stats[-1]["data"]
    return data


def summary_texts(entries: list[dict[str, Any]]) -> list[str]:
    texts = []
    for entry in custom(entries, SUMMARY):
        content = entry["content"]
        texts.append(content if isinstance(content, str) else content[0]["text"])
    return texts


def fused_texts(entries: list[dict[str, Any]]) -> list[Any]:
    return [
        e["data"]["rangeSummaryText"]
        for e in custom(entries, CHAIN)
        if "bodySource" not in e["data"] and e["data"].get("rangeSummaryText") is not None
    ]


def check_summaries_use_labels(texts: list[str]) -> None:
    """Every summary holds the model's bullets with the labels turned into `tN` refs."""
    assert texts
    for text in texts:
        assert "[[" not in text
    rewritten = re.compile(r"^- `t[0-9]+` \w+ call [0-9]+ noted by the loopback model$", re.M)
    assert all(rewritten.search(text) for text in texts)


def check_stats_match_the_server(
    entries: list[dict[str, Any]], answers: list[Answer], *, base: Optional[dict[str, Any]] = None
) -> None:
    stats = last_stats(entries)
    before = base or {"totalInputTokens": 0, "totalOutputTokens": 0, "callCount": 0}
    inputs = sum(a.input_tokens for a in answers)
    outputs = sum(a.output_tokens for a in answers)
    assert stats["totalInputTokens"] - before["totalInputTokens"] == inputs
    assert stats["totalOutputTokens"] - before["totalOutputTokens"] == outputs
    assert stats["callCount"] - before["callCount"] == len(answers)


def check_condensed(responder: LoopbackModel, target: Path, path: str) -> list[dict[str, Any]]:
    """Every answer of the server was used, as it was sent, and counted as it reported."""
    assert set(responder.paths) == {path}
    assert set(responder.models) == {MODEL}
    entries = SessionFile.load(target).entries
    summaries = summary_texts(entries)
    ranges = responder.of_kind("range")
    # one summary per batch answer, one fused chain per range answer
    assert len(summaries) == len(responder.of_kind("batch")) > 0
    assert ranges
    assert sorted(fused_texts(entries)) == sorted(a.text for a in ranges)
    check_summaries_use_labels(summaries)
    check_stats_match_the_server(entries, responder.answers)
    return entries


# ---------------------------------------------------------------------------------- condense


def test_condense_large_session_through_openai(
    model: tuple[LoopbackModel, LoopbackLLMServer], fixtures_dir: Path, tmp_path: Path
) -> None:
    responder, server = model
    target = tmp_path / "condensed.jsonl"
    proc = run_offline(
        [
            "condense",
            str(fixtures_dir / "large-session.jsonl"),
            "--out",
            str(target),
            *api(server, "openai"),
            "--json",
        ],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    entries = check_condensed(responder, target, "/v1/chat/completions")
    batches, ranges = responder.of_kind("batch"), responder.of_kind("range")
    assert last_stats(entries)["rangesSummarized"] == len(ranges)
    report = json.loads(proc.stdout)
    assert report["summarizerCalls"] == len(responder.answers)
    assert report["summarizer"]["inputTokens"] == sum(a.input_tokens for a in responder.answers)
    assert report["summarizer"]["outputTokens"] == sum(a.output_tokens for a in responder.answers)
    assert report["batches"]["summarized"] == len(batches)
    assert report["batches"]["oversized"] == 0


def test_condense_session_prefix_through_anthropic(
    model: tuple[LoopbackModel, LoopbackLLMServer], fixtures_dir: Path, tmp_path: Path
) -> None:
    responder, server = model
    source = session_prefix(fixtures_dir, tmp_path)
    proc = run_offline(["condense", str(source), *api(server, "anthropic")], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_condensed(responder, tmp_path / "prefix.condensed.jsonl", "/v1/messages")
    inputs = sum(a.input_tokens for a in responder.answers)
    outputs = sum(a.output_tokens for a in responder.answers)
    assert f"{inputs:,} / {outputs:,}" in proc.stdout  # the table's token row


# ------------------------------------------------------------------------------------ replay


def test_replay_deterministic_with_an_api_summarizer(
    model: tuple[LoopbackModel, LoopbackLLMServer], tmp_path: Path
) -> None:
    responder, server = model
    source = small_session(tmp_path / "s.jsonl", prompts=3)
    out = tmp_path / "vec"
    proc = run_offline(
        [
            "replay",
            str(source),
            "--out",
            str(out),
            "--deterministic",
            *api(server, "openai"),
            "-q",
        ],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    session = SessionFile.load(out / "session.jsonl")
    assert session.entries[0]["id"] == "00000001"
    calls = [
        json.loads(line)
        for line in (out / "summarizer.jsonl").read_text("utf-8").split("\n")
        if line
    ]
    assert [c["output"] for c in calls] == [a.text for a in responder.answers]
    assert [c["kind"] for c in calls] == ["batch"] * 3
    # the model's label [[1:read]] became each batch's ref
    assert summary_texts(session.entries)[0].startswith(
        "- `t1` read call 1 noted by the loopback model"
    )
    check_stats_match_the_server(session.entries, responder.answers)


# ----------------------------------------------------------------------------------- compact


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_compact_fuses_through_the_api(
    model: tuple[LoopbackModel, LoopbackLLMServer],
    fixtures_dir: Path,
    tmp_path: Path,
    provider: str,
) -> None:
    responder, server = model
    source = session_prefix(fixtures_dir, tmp_path)
    settings = tmp_path / "no-chains.json"
    settings.write_text(json.dumps({"chainCompression": {"enabled": False}}), encoding="utf-8")
    # per-batch summaries (offline), no chain entries yet
    target = tmp_path / "summarized.jsonl"
    first = run_offline(
        ["condense", str(source), "--out", str(target), "--config", str(settings), "-q"],
        tmp_path,
    )
    assert first.returncode == 0, first.stderr
    before = SessionFile.load(target).entries
    assert not custom(before, CHAIN)
    assert not responder.answers
    proc = run_offline(
        [
            "compact",
            str(target),
            "--in-place",
            *api(server, provider),
            "--json",
        ],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    ranges = responder.of_kind("range")
    assert responder.answers == ranges  # compact only fuses
    assert report["rangesSummarized"] == len(ranges) > 0
    entries = SessionFile.load(target).entries
    assert sorted(fused_texts(entries)) == sorted(a.text for a in ranges)
    assert [row["body"] for row in report["entries"]].count("fused") == len(ranges)
    check_stats_match_the_server(entries, ranges, base=last_stats(before))


# --------------------------------------------------------------------------------- arguments


@pytest.mark.parametrize(
    ("command", "summarizer"),
    [
        ("condense", "default"),
        ("replay", "conformance"),
        ("compact", "default"),
        ("compact", "none"),
    ],
)
def test_base_url_needs_an_api_summarizer(tmp_path: Path, command: str, summarizer: str) -> None:
    source = small_session(tmp_path / "s.jsonl", prompts=1)
    extra = ["--out", str(tmp_path / "vec")] if command == "replay" else []
    proc = run_offline(
        [
            command,
            str(source),
            *extra,
            "--summarizer",
            summarizer,
            "--base-url",
            "http://127.0.0.1:9/v1",
        ],
        tmp_path,
    )
    assert proc.returncode == 2
    assert "--base-url" in proc.stderr
    assert not (tmp_path / "s.condensed.jsonl").exists()
    assert not (tmp_path / "vec").exists()


def test_failed_summarizer_calls_are_reported(tmp_path: Path) -> None:
    refused = openai_error(400, "model loopback-model does not exist", "invalid_request_error")
    with LoopbackLLMServer(lambda request: refused, max_lifetime=600) as server:
        source = small_session(tmp_path / "s.jsonl", prompts=2)
        args = ["condense", str(source), *api(server, "openai")]
        proc = run_offline([*args, "--json"], tmp_path)
        table = run_offline([*args, "--out", str(tmp_path / "t.jsonl")], tmp_path)
        calls = len(server.requests)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["batches"]["summarized"] == 0
    failures = [p for p in report["problems"] if "summarization failed" in p["message"]]
    assert [p["level"] for p in failures] == ["error"]
    assert "does not exist" in failures[0]["message"]
    assert failures[0]["count"] * 2 == calls  # one failed call per flush, in both runs
    assert table.returncode == 0
    assert "pi-condense: error: pruner: summarization failed" in table.stderr
    assert "does not exist" in table.stderr

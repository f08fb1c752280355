"""A generated corpus of small Pi sessions with ``context_tree_query`` re-queries planted at
known gaps (in user-turn groups), for the corpus tests and benchmarks.

Every session is a linear v3 Pi session: user-turn groups of ``user -> assistant with one
tool call -> toolResult -> assistant text``. The first group's ``bash`` output is large
enough to be summarized (its short ref is ``t1`` once the pruner ran). A planted session
queries ``["t1"]`` from later groups: a query in group ``u`` is the group's tool call and
its result is the recovered output, so a plan of query groups ``[u0, u1, ...]`` produces
one re-query event per consecutive pair, with gap ``u[k+1] - u[k]``. A gap of 0 is two
query calls in the same group (the second in a second tool turn of that group).
"""

from __future__ import annotations

import gzip
import itertools
import json
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pi_condense import corpus

QUERY = "context_tree_query"
_BASE_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


@dataclass
class Plant:
    """What the corpus holds, as planted."""

    paths: list[Path] = field(default_factory=list)
    gaps: Counter[int] = field(default_factory=Counter)
    lengths: list[int] = field(default_factory=list)
    gaps_by_session: dict[str, list[int]] = field(default_factory=dict)
    query_calls: int = 0

    @property
    def events(self) -> int:
        return sum(self.gaps.values())


class _Writer:
    def __init__(self, session_id: str, start_ms: int) -> None:
        self.lines: list[dict[str, Any]] = []
        self.n = 0
        self.ms = start_ms
        self.parent: Any = None
        self.call = 0
        iso = _iso(start_ms)
        self.lines.append(
            {"type": "session", "version": 3, "id": session_id, "timestamp": iso, "cwd": "/w"}
        )

    def _entry(self, message: dict[str, Any]) -> None:
        self.n += 1
        self.ms += 1000
        entry_id = f"{self.n:08x}"
        message["timestamp"] = self.ms
        self.lines.append(
            {
                "type": "message",
                "id": entry_id,
                "parentId": self.parent,
                "timestamp": _iso(self.ms),
                "message": message,
            }
        )
        self.parent = entry_id

    def user(self, text: str) -> None:
        self._entry({"role": "user", "content": [{"type": "text", "text": text}]})

    def tool_turn(self, name: str, arguments: dict[str, Any], output: str) -> None:
        self.call += 1
        call_id = f"toolu_{self.lines[0]['id'][:8]}{self.call:04d}"
        self._entry(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Running {name}."},
                    {"type": "toolCall", "id": call_id, "name": name, "arguments": arguments},
                ],
                "api": "anthropic-messages",
                "provider": "anthropic",
                "model": "claude-sonnet-4-5",
                "usage": _usage(),
                "stopReason": "toolUse",
            }
        )
        self._entry(
            {
                "role": "toolResult",
                "toolCallId": call_id,
                "toolName": name,
                "content": [{"type": "text", "text": output}],
                "isError": False,
            }
        )

    def reply(self, text: str) -> None:
        self._entry(
            {
                "role": "assistant",
                "content": [{"type": "text", "text": text}],
                "api": "anthropic-messages",
                "provider": "anthropic",
                "model": "claude-sonnet-4-5",
                "usage": _usage(),
                "stopReason": "stop",
            }
        )

    def text(self) -> str:
        return "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in self.lines)


def _usage() -> dict[str, Any]:
    zero = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}
    return {**zero, "totalTokens": 0, "cost": {**zero, "total": 0}}


def _iso(ms: int) -> str:
    import datetime

    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _output(rng: random.Random, label: str, lines: int) -> str:
    words = ("alpha", "beta", "gamma", "delta", "kappa", "sigma", "omega", "theta")
    return "\n".join(
        f"{label} {i:04d} " + " ".join(rng.choice(words) for _ in range(8)) for i in range(lines)
    )


def write_session(path: Path, index: int, groups: int, queries: list[int]) -> list[int]:
    """Write one session of ``groups`` user-turn groups querying ``t1`` in the groups of
    ``queries`` (sorted, each >= 1; a repeated group is a gap of 0); its planted gaps."""
    rng = random.Random(index)
    writer = _Writer(f"{index:08d}-0000-4000-8000-{index:012d}", _BASE_MS + index * 3_600_000)
    original = _output(rng, f"s{index} log", 40)
    for group in range(1, groups + 1):
        writer.user(f"step {group} of task {index}: look at the logs")
        if group == 1:
            writer.tool_turn("bash", {"command": f"cat logs/{index}.txt"}, original)
        else:
            writer.tool_turn("read", {"path": f"src/{index}/{group}.py"}, _output(rng, "src", 3))
        for _ in range(queries.count(group)):
            writer.tool_turn(QUERY, {"toolCallIds": ["t1"]}, "## toolRef: t1\n" + original)
        writer.reply(f"Done with step {group}.")
    data = writer.text().encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(data, mtime=0) if path.name.endswith(".gz") else data)
    return [b - a for a, b in itertools.pairwise(queries)]


# Gap plan of the planted sessions: (gaps between successive queries of t1), cycled.
PLANS: tuple[tuple[int, ...], ...] = (
    (1,),
    (2,),
    (3,),
    (1, 2),
    (4,),
    (2, 3),
    (6,),
    (0, 1),
    (5,),
    (2,),
)


def make_corpus(root: Path, sessions: int = 300, *, every: int = 3, gz_every: int = 7) -> Plant:
    """``sessions`` sessions under ``root`` (in per-project folders, every ``gz_every``-th
    gzipped); every ``every``-th one has queries planted by :data:`PLANS`."""
    plant = Plant()
    planned = 0
    for index in range(sessions):
        folder = root / f"--project-{index % 4}--"
        suffix = ".jsonl.gz" if index % gz_every == gz_every - 1 else ".jsonl"
        path = folder / f"2026-01-01T00-00-00-000Z_{index:05d}{suffix}"
        queries: list[int] = []
        if index % every == 0:
            plan = PLANS[planned % len(PLANS)]
            planned += 1
            first = 2
            queries = [first]
            for gap in plan:
                queries.append(queries[-1] + gap)
        groups = max(queries[-1] if queries else 0, 1 + index % 5)
        gaps = write_session(path, index, groups, queries)
        plant.paths.append(path)
        plant.gaps.update(gaps)
        plant.lengths.append(groups)
        plant.gaps_by_session[str(path)] = gaps
        plant.query_calls += len(queries)
    return plant


# --------------------------------------------------------------- engine comparisons


def run_both(root: Path, **engine: Any) -> tuple[Any, Any]:
    """(scan of the corpus, what-if of one project folder with grace 0 and 3)."""
    scanned = corpus.scan([str(root)], **engine)
    grid = [("recoveryGraceTurns", [0, 3])]
    return scanned, corpus.whatif([str(root / "--project-0--")], grid, **engine)


def check_same(local: tuple[Any, Any], scanned: Any, whatif: Any, plant: Plant) -> None:
    local_scan, local_whatif = local
    assert not scanned.failures
    assert scanned.rows == local_scan.rows
    assert scanned.aggregate == local_scan.aggregate
    assert scanned.aggregate.gaps.counts == {str(g): n for g, n in sorted(plant.gaps.items())}
    assert whatif.rows == local_whatif.rows
    assert whatif.sessions == local_whatif.sessions


if __name__ == "__main__":
    import sys

    target = Path(sys.argv[1] if len(sys.argv) > 1 else "sessions")
    made = make_corpus(target, int(sys.argv[2]) if len(sys.argv) > 2 else 30)
    print(f"{len(made.paths)} sessions, {made.events} planted re-queries -> {target}")

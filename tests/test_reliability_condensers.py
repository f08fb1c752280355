"""Issue 14, finding 4: two Condenser processes on one session summarize each call once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from _sessions import write_session

WORKER = Path(__file__).with_name("_condenser_proc.py")


def test_two_condenser_processes_do_not_summarize_the_same_calls_twice(tmp_path: Path) -> None:
    session = write_session(tmp_path / "s.jsonl", prompts=6)
    go = tmp_path / "go"
    env = {**os.environ, "PI_CODING_AGENT_DIR": str(tmp_path / "agent")}
    workers = [
        subprocess.Popen(
            [sys.executable, str(WORKER), str(session), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    go.write_text("")
    outcomes = []
    for worker in workers:
        out, errors = worker.communicate(timeout=120)
        assert worker.returncode == 0, errors
        outcomes.append(out.strip())
    entries = [json.loads(line) for line in session.read_text().splitlines()]
    indexed = Counter(
        record["toolCallId"]
        for entry in entries
        if entry.get("customType") == "context-prune-index"
        for record in entry["data"]["toolCalls"]
    )
    summaries = [e for e in entries if e.get("customType") == "context-prune-summary"]
    assert sorted(indexed) == [f"call{p}" for p in range(6)]
    assert set(indexed.values()) == {1}, indexed  # nothing summarized twice
    assert len(summaries) >= 1
    assert sorted(outcomes) == ["empty", "flushed"]  # the second found nothing left to do

"""Issue 14, finding 4: two Condenser processes on one session summarize each call once."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pi_condense.errors import CondenseError
from pi_condense.integrations.openai_chat import ChatCondenser
from pi_condense.session import SessionFile
from support import SUPPORT
from support.sessions import write_session

WORKER = SUPPORT / "condenser_proc.py"


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


# ---------------------------------------------------------------- issue 37, finding 10

HOLD_HOOK = """
import sys
from pi_condense.integrations.openai_chat import ChatCondenser
hook = ChatCondenser(session=sys.argv[1])
print("ready", flush=True)
sys.stdin.read()
"""


def chat_history(turns: int) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = [{"role": "system", "content": "rules"}]
    for t in range(turns):
        call = {"id": f"c{t}", "type": "function",
                "function": {"name": "read", "arguments": json.dumps({"n": t})}}  # fmt: skip
        history += [
            {"role": "user", "content": f"task {t}"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{t}", "content": f"output {t} " + "x" * 500},
        ]
    return history


def stored_messages(path: Path) -> int:
    return sum(1 for e in SessionFile.load(path).entries if e.get("type") == "message")


def test_two_chat_hooks_on_one_session_never_store_a_message_twice(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    first = ChatCondenser(session=path)
    second = ChatCondenser(session=path)  # a restart in the same process takes over
    history = chat_history(8)
    for end in (*range(2, len(history), 3), len(history)):
        second.condense(history[:end])
        with pytest.raises(CondenseError, match=f"^{re.escape(str(path))}: a newer pi-condense"):
            first.condense(history[:end])
    assert stored_messages(path) == 24  # 8 turns of 3 host messages (system is not stored)
    second.close()
    # the first one may write again once the second is closed: it continues, nothing twice
    first.condense(history)
    first.close()
    assert stored_messages(path) == 24


def test_a_chat_hook_of_another_process_on_the_session_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_HOOK, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == b"ready\n"
        with pytest.raises(CondenseError, match=f"^{re.escape(str(path))}: another process"):
            ChatCondenser(session=path)
    finally:
        holder.communicate(b"", timeout=60)
    hook = ChatCondenser(session=path)  # the holder is gone: free again
    hook.condense(chat_history(2))
    hook.close()
    assert stored_messages(path) == 6

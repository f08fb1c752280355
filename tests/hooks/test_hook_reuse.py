"""A hook reuses what it worked out at the previous call (the decoded prefix, the render's
size memo, the encoded items): every request must be byte for byte what a new process makes
of the same history and session, also after the host edits earlier items (one changed, one
removed, two swapped) and after a late join. The new process is a real one: a subprocess
opens a copy of the session file as it was after each call and condenses that call's history.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pytest

from pi_condense.integrations.anthropic_messages import MessagesCondenser
from pi_condense.integrations.langchain import CondenseMiddleware
from pi_condense.integrations.openai_agents import CondenseFilter
from pi_condense.integrations.openai_chat import ChatCondenser
from pi_condense.session import SessionFile


class Clock:
    def __init__(self) -> None:
        self.now = 1_750_000_000_000

    def __call__(self) -> int:
        self.now += 1_000
        return self.now


def text(prompt: int, turn: int) -> str:
    return f"contents of f{prompt}_{turn}\n" + "".join(
        f"f{prompt}_{turn} line {n}: some words\n" for n in range(60)
    )


def responses_steps(prompt: int, turns: int) -> Iterator[list[dict[str, Any]]]:
    """The items one prompt adds, model call by model call."""
    yield [{"role": "user", "content": f"task {prompt}"}]
    for turn in range(turns):
        call_id = f"call_{prompt}_{turn}"
        yield [
            {
                "type": "function_call",
                "id": f"fc_{prompt}_{turn}",
                "call_id": call_id,
                "name": "read",
                "arguments": json.dumps({"path": f"f{prompt}_{turn}"}),
            },
            {"type": "function_call_output", "call_id": call_id, "output": text(prompt, turn)},
        ]
    yield [{"role": "assistant", "content": f"done {prompt}"}]


def chat_steps(prompt: int, turns: int) -> Iterator[list[dict[str, Any]]]:
    yield [{"role": "user", "content": f"task {prompt}"}]
    for turn in range(turns):
        call_id = f"call_{prompt}_{turn}"
        function = {"name": "read", "arguments": json.dumps({"path": f"f{prompt}_{turn}"})}
        call = {"id": call_id, "type": "function", "function": function}
        yield [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call_id, "content": text(prompt, turn)},
        ]
    yield [{"role": "assistant", "content": f"done {prompt}"}]


def anthropic_steps(prompt: int, turns: int) -> Iterator[list[dict[str, Any]]]:
    yield [{"role": "user", "content": f"task {prompt}"}]
    for turn in range(turns):
        use_id = f"toolu_{prompt}_{turn}"
        use = {"type": "tool_use", "id": use_id, "name": "read", "input": {"path": f"f{turn}"}}
        result = {"type": "tool_result", "tool_use_id": use_id, "content": text(prompt, turn)}
        yield [
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [result]},
        ]
    yield [{"role": "assistant", "content": [{"type": "text", "text": f"done {prompt}"}]}]


def langchain_steps(prompt: int, turns: int) -> Iterator[list[Any]]:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    yield [HumanMessage(content=f"task {prompt}")]
    for turn in range(turns):
        call_id = f"call_{prompt}_{turn}"
        call = {"name": "read", "args": {"path": f"f{prompt}_{turn}"}, "id": call_id}
        yield [
            AIMessage(content="", tool_calls=[call]),
            ToolMessage(content=text(prompt, turn), tool_call_id=call_id),
        ]
    yield [AIMessage(content=f"done {prompt}")]


Steps = Callable[[int, int], Iterator[list[Any]]]
HOOKS: dict[str, tuple[type[Any], Steps, str]] = {
    "agents": (CondenseFilter, responses_steps, "CondenseFilter"),
    "chat": (ChatCondenser, chat_steps, "ChatCondenser"),
    "anthropic": (MessagesCondenser, anthropic_steps, "MessagesCondenser"),
    "langchain": (CondenseMiddleware, langchain_steps, "CondenseMiddleware"),
}
MODULES = {
    "agents": "pi_condense.integrations.openai_agents",
    "chat": "pi_condense.integrations.openai_chat",
    "anthropic": "pi_condense.integrations.anthropic_messages",
    "langchain": "pi_condense.integrations.langchain",
}

# the new process: a hook on each session copy, handed that call's history; one JSON line out
NEW_PROCESS = """
import json, sys, warnings, importlib
warnings.simplefilter("ignore")
module, name, listing = sys.argv[1:4]
if name == "CondenseMiddleware":
    from langchain_core.messages import messages_from_dict as load, messages_to_dict as dump
else:
    load = dump = lambda items: items
hook_type = getattr(importlib.import_module(module), name)
for line in open(listing):
    session, history = json.loads(line)
    hook = hook_type(session=session)
    out = hook.condense(load(json.load(open(history))))
    hook.close()
    print(json.dumps(dump(out)))
"""


class Recorder:
    """The live hook's requests, each with a copy of the session and the history it had."""

    def __init__(self, directory: Path, kind: str, hook: Any) -> None:
        self.directory = directory
        self.kind = kind
        self.hook = hook
        self.sent: list[str] = []
        self.listing: list[list[str]] = []

    def call(self, handed: list[Any]) -> list[Any]:
        out = self.hook.condense(handed)
        n = len(self.sent)
        session = self.directory / f"s{n}.jsonl"
        history = self.directory / f"h{n}.json"
        shutil.copyfile(self.hook.session.path, session)
        history.write_text(json.dumps(plain(handed)))
        self.sent.append(json.dumps(plain(out)))
        self.listing.append([os.fspath(session), os.fspath(history)])
        return out

    def replayed(self) -> list[str]:
        listing = self.directory / "listing.jsonl"
        listing.write_text("".join(json.dumps(pair) + "\n" for pair in self.listing))
        module, name = MODULES[self.kind], HOOKS[self.kind][2]
        done = subprocess.run(
            [sys.executable, "-c", NEW_PROCESS, module, name, os.fspath(listing)],
            capture_output=True,
            text=True,
            check=True,
            cwd=self.directory,
            env={**os.environ, "PI_CONDENSE_SESSION_DIR": os.fspath(self.directory)},
        )
        return done.stdout.splitlines()


def user(kind: str, content: str) -> Any:
    """A user message of the hook's format."""
    if kind == "langchain":
        from langchain_core.messages import HumanMessage

        return HumanMessage(content=content)
    return {"role": "user", "content": content}


def role(item: Any) -> Any:
    """The role of a dict message, or of a LangChain message (``ai``: assistant)."""
    if isinstance(item, dict):
        return item.get("role")
    return {"ai": "assistant", "human": "user", "tool": "tool"}.get(item.type)


def is_output(item: Any) -> bool:
    """A tool output item: of the Responses, chat or Anthropic format, or a LangChain one."""
    if not isinstance(item, dict):
        return bool(item.type == "tool")
    content = item.get("content")
    return (
        item.get("type") == "function_call_output"
        or item.get("role") == "tool"
        or (isinstance(content, list) and content[0].get("type") == "tool_result")
    )


def edit(item: Any) -> None:
    """Change a tool output in place."""
    if not isinstance(item, dict):
        item.content += "\nedited"
    elif "output" in item:
        item["output"] += "\nedited"
    elif isinstance(item["content"], str):
        item["content"] += "\nedited"
    else:
        item["content"][0]["content"] += "\nedited"


def plain(items: list[Any]) -> list[Any]:
    """The items as JSON-shaped data (LangChain messages by ``messages_to_dict``)."""
    if items and not isinstance(items[0], dict):
        from langchain_core.messages import messages_to_dict

        return messages_to_dict(items)
    return items


def fresh(items: list[Any]) -> list[Any]:
    """A new copy of the history, as the Agents SDK builds its input before every call."""
    copied: list[Any] = json.loads(json.dumps(plain(items)))
    if items and not isinstance(items[0], dict):
        from langchain_core.messages import messages_from_dict

        return messages_from_dict(copied)
    return copied


@pytest.mark.parametrize("kind", list(HOOKS))
def test_reused_state_gives_the_requests_of_a_new_process(tmp_path: Path, kind: str) -> None:
    hook_type, steps, _ = HOOKS[kind]
    hook = hook_type(session=tmp_path / "live.jsonl", clock=Clock())
    recorder = Recorder(tmp_path, kind, hook)
    history: list[Any] = []
    handed_as = [fresh, lambda h: h, list]  # a copy, the same list again, a new equal list
    calls = 0
    for prompt in range(5):
        for step in steps(prompt, 3):
            history.extend(step)
            if role(step[-1]) == "assistant" and prompt < 4:
                continue  # the final reply is seen with the next prompt
            recorder.call(handed_as[calls % 3](history))
            recorder.call(handed_as[(calls + 1) % 3](history))  # nothing new
            calls += 1
    stubbed = sum("ref `" in sent for sent in recorder.sent)
    assert stubbed >= 4, "the histories were long enough to be condensed"

    rebuilds = hook.stats.rebuilds
    # the host edits its history: two items swapped, one changed in place (handed as a copy,
    # as the Agents SDK builds its input), one removed
    first_output = next(i for i, item in enumerate(history) if i > 4 and is_output(item))
    history[first_output - 1], history[first_output] = (
        history[first_output],
        history[first_output - 1],
    )
    history.append(user(kind, "after a swap"))
    recorder.call(list(history))
    recorder.call(history)
    # an object handed over must not change in place afterwards (it is compared by identity):
    # the Agents SDK hands a copy of its history every call, and edits its own
    recorder.call(fresh(history))
    edit(history[first_output + 4])
    recorder.call(fresh(history))
    recorder.call(fresh(history))
    del history[first_output + 6]
    history.append(user(kind, "after a removal"))
    recorder.call(history)
    recorder.call(fresh(history))
    assert hook.stats.rebuilds >= rebuilds + 3, "the edits were seen as a new branch"
    hook.close()

    assert recorder.replayed() == recorder.sent


@pytest.mark.parametrize("kind", list(HOOKS))
def test_a_late_join_makes_the_request_of_a_new_process(tmp_path: Path, kind: str) -> None:
    hook_type, steps, _ = HOOKS[kind]
    history = [item for prompt in range(8) for step in steps(prompt, 3) for item in step]
    history.append(user(kind, "and now?"))
    hook = hook_type(session=tmp_path / "late.jsonl", clock=Clock())
    recorder = Recorder(tmp_path, kind, hook)
    first = recorder.call(history)
    recorder.call(fresh(history))
    assert hook.stats.adopted > 0
    assert "ref `" in json.dumps(plain(first))
    hook.close()
    assert recorder.replayed() == recorder.sent


def test_a_call_with_nothing_new_hands_back_the_items_it_made_before(tmp_path: Path) -> None:
    """Work in proportion to what is new: the stubs of a call with nothing new are the very
    items the previous call made (not converted again), the host's own items its own."""
    hook = CondenseFilter(session=tmp_path / "s.jsonl", clock=Clock())
    history = [item for prompt in range(6) for step in responses_steps(prompt, 3) for item in step]
    history.append({"role": "user", "content": "next"})
    first = hook.condense(history)
    copy = fresh(history)
    second = hook.condense(copy)
    assert json.dumps(second) == json.dumps(first)
    given = {id(item) for item in history}
    made = [i for i, item in enumerate(first) if id(item) not in given]
    assert any("ref `" in json.dumps(first[i]) for i in made)
    assert all(second[i] is first[i] for i in made)
    mine = {id(item) for item in copy}
    kept = [item for i, item in enumerate(second) if i not in made]
    assert kept
    assert all(id(item) in mine for item in kept)
    hook.close()


def test_a_late_join_syncs_the_session_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Joining a long conversation writes its messages and the summaries of what is pending
    (thousands of entries) with one fsync for the lot, not one an entry."""
    history = [item for prompt in range(20) for step in responses_steps(prompt, 3) for item in step]
    history.append({"role": "user", "content": "and now?"})
    hook = CondenseFilter(session=tmp_path / "s.jsonl", clock=Clock())
    real = os.fsync
    synced: list[int] = []

    def fsync(fd: int) -> None:
        synced.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    out = hook.condense(history)
    monkeypatch.setattr(os, "fsync", real)
    entries = hook.session.path.read_text().count("\n") if hook.session.path else 0
    assert entries > len(history)
    assert "ref `" in json.dumps(out)
    assert len(synced) <= 3
    hook.close()


def test_a_late_join_opens_and_locks_the_session_once_for_its_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The join's thousands of entries share one open and one hold of the append lock for
    its messages and one for its flush's summaries (it was one of each an entry)."""
    history = [item for prompt in range(20) for step in responses_steps(prompt, 3) for item in step]
    history.append({"role": "user", "content": "and now?"})
    path = tmp_path / "s.jsonl"
    hook = CondenseFilter(session=path, clock=Clock())
    real_open, real_flock = os.open, fcntl.flock
    opened: list[int] = []
    locked: list[int] = []

    def open_(name: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        fd = real_open(name, flags, *args, **kwargs)
        if os.fspath(name) == str(path) and flags & os.O_APPEND:
            opened.append(fd)
        return fd

    def flock(fd: int, operation: int) -> None:
        real_flock(fd, operation)
        if operation & fcntl.LOCK_EX and os.fstat(fd).st_ino == path.stat().st_ino:
            locked.append(fd)

    monkeypatch.setattr(os, "open", open_)
    monkeypatch.setattr(fcntl, "flock", flock)
    out = hook.condense(history)
    monkeypatch.setattr(os, "open", real_open)
    monkeypatch.setattr(fcntl, "flock", real_flock)
    entries = path.read_text().count("\n")
    assert entries > len(history)
    assert "ref `" in json.dumps(out)
    assert len(opened) <= 8, f"{len(opened)} opens for {entries} entries"
    assert 1 <= len(locked) <= len(opened)
    assert SessionFile.load(path).warnings == []
    hook.close()


def test_a_late_join_stores_the_earlier_runs_in_one_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The messages of the runs a join takes in reach the session file in one write (one
    append of all their lines), not one write a message; the file reads back whole."""
    history = [item for prompt in range(20) for step in responses_steps(prompt, 3) for item in step]
    history.append({"role": "user", "content": "and now?"})
    path = tmp_path / "s.jsonl"
    hook = CondenseFilter(session=path, clock=Clock())
    real_write, real_pwrite = os.write, os.pwrite
    stored: list[int] = []  # how many message entries each write to the session carried

    def count(fd: int, data: Any) -> None:
        if os.fstat(fd).st_ino == path.stat().st_ino:
            stored.append(bytes(data).count(b'"type":"message"'))

    def write(fd: int, data: Any) -> int:
        count(fd, data)
        return real_write(fd, data)

    def pwrite(fd: int, data: Any, offset: int) -> int:  # an append's lines, written in place
        count(fd, data)
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(os, "write", write)
    monkeypatch.setattr(os, "pwrite", pwrite)
    out = hook.condense(history)
    monkeypatch.setattr(os, "write", real_write)
    monkeypatch.setattr(os, "pwrite", real_pwrite)
    assert "ref `" in json.dumps(out)
    assert hook.stats.adopted > 100
    assert max(stored) == hook.stats.adopted  # the earlier runs' messages: one write
    assert sum(stored) == hook.stats.messages_seen
    reloaded = SessionFile.load(path)
    assert reloaded.warnings == []
    assert sum(e["type"] == "message" for e in reloaded.entries) == hook.stats.messages_seen
    hook.close()


def test_a_hook_that_defers_its_join_condenses_from_the_next_call(tmp_path: Path) -> None:
    history = [item for prompt in range(8) for step in responses_steps(prompt, 3) for item in step]
    history.append({"role": "user", "content": "and now?"})
    hook = CondenseFilter(session=tmp_path / "s.jsonl", clock=Clock(), join="defer")
    first = hook.condense(history)
    assert json.dumps(first) == json.dumps(history)  # stored, not condensed yet
    assert hook.stats.adopted == hook.stats.messages_seen
    second = hook.condense(fresh(history))
    assert "ref `" in json.dumps(second)
    assert len(json.dumps(second)) < 0.5 * len(json.dumps(history))
    hook.close()

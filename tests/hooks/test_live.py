"""The live driver (pi_condense.live) over real session files, with Pi-shaped host messages.

The host here is a scripted agent loop that keeps its own history (as frameworks do) and hands
the whole of it to the driver before every model call; its model reuses the tool-call id
``call_0`` on every turn and no message carries a timestamp.
"""

from __future__ import annotations

import asyncio
import gc
import json
import re
import warnings
from pathlib import Path
from typing import Any, Callable, Optional

import pytest

from pi_condense import CondenseWarning, Config, SessionFile
from pi_condense.adapters.pi_messages import PiCodec
from pi_condense.live import LiveDriver, default_session_path

REF = re.compile(r"ref `(t\d+)`")


class Clock:
    """Epoch ms that advance by a fixed step on every reading (deterministic runs)."""

    def __init__(self, start: int = 1_800_000_000_000, step: int = 7) -> None:
        self.ms = start
        self.step = step

    def __call__(self) -> int:
        self.ms += self.step
        return self.ms


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def call(path: str, call_id: str = "call_0") -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [
            {"type": "toolCall", "id": call_id, "name": "read", "arguments": {"path": path}}
        ],
        "stopReason": "toolUse",
    }


def output(path: str) -> str:
    return f"contents of {path}\n" + "".join(f"{path} line {n}\n" for n in range(150))


def result(path: str, call_id: str = "call_0") -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": "read",
        "content": [{"type": "text", "text": output(path)}],
        "isError": False,
    }


def final(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}], "stopReason": "stop"}


Host = Callable[[list[Any], list[Any]], list[Any]]
"""How a host's history evolves after a call: (history, what was sent) -> next history."""


def keep_raw(history: list[Any], sent: list[Any]) -> list[Any]:
    return history


def write_back(history: list[Any], sent: list[Any]) -> list[Any]:
    """pydantic-ai's way: the processed list replaces the history."""
    return list(sent)


def run_agent(
    driver: LiveDriver[Any],
    prompts: int,
    turns: int,
    host: Host = keep_raw,
    history: Optional[list[Any]] = None,
    start: int = 0,
) -> tuple[list[Any], list[list[Any]], list[list[Any]]]:
    """A scripted agent: per prompt ``turns`` tool calls (always ``call_0``) then a reply.

    Returns the host's final history, every request sent and every raw history behind it.
    """
    history = [] if history is None else history
    raw: list[Any] = list(history)
    sent_all: list[list[Any]] = []
    raw_all: list[list[Any]] = []
    for p in range(start, start + prompts):
        history.append(user(f"task {p}"))
        raw.append(history[-1])
        for t in range(turns + 1):
            sent = driver.condense(history)
            sent_all.append(sent)
            raw_all.append(list(raw))
            history = host(history, sent)
            new = [final(f"done {p}")] if t == turns else [call(f"f{p}_{t}.txt")]
            if t < turns:
                new.append(result(f"f{p}_{t}.txt"))
            history.extend(new)
            raw.extend(new)
    return history, sent_all, raw_all


def check_request(messages: list[Any]) -> None:
    """What a provider checks: every tool result follows its call, every call is answered."""
    open_calls: list[str] = []
    for message in messages:
        role = message["role"]
        assert role in ("user", "assistant", "toolResult", "custom", "system"), role
        if role == "assistant":
            assert not open_calls, f"calls without results: {open_calls}"
            open_calls = [b["id"] for b in message["content"] if b["type"] == "toolCall"]
        elif role == "toolResult":
            assert message["toolCallId"] in open_calls, message["toolCallId"]
            open_calls.remove(message["toolCallId"])
        else:
            assert not open_calls, f"calls without results: {open_calls}"


def chars(requests: list[list[Any]]) -> int:
    return sum(len(json.dumps(r)) for r in requests)


def refs_in(messages: list[Any]) -> set[str]:
    return set(REF.findall(json.dumps(messages)))


def assert_refs_return_their_own_output(driver: LiveDriver[Any], messages: list[Any]) -> int:
    """Every stub in ``messages`` recovers the output of the very call it replaced."""
    checked = 0
    for i, message in enumerate(messages):
        if message["role"] != "toolResult":
            continue
        found = REF.findall(json.dumps(message))
        if not found:
            continue
        (ref,) = found
        path = next(
            b["arguments"]["path"]
            for m in reversed(messages[:i])
            if m["role"] == "assistant"
            for b in m["content"]
            if b["type"] == "toolCall"
        )
        answer = driver.execute("context_tree_query", {"toolCallIds": [ref]})
        assert output(path) in answer, (ref, path)
        checked += 1
    return checked


def test_reused_call_ids_every_ref_returns_its_own_output(tmp_path: Path) -> None:
    driver = LiveDriver(PiCodec(), session=tmp_path / "s.jsonl", clock=Clock())
    history, sent, raw = run_agent(driver, prompts=5, turns=3)
    last = driver.condense([*history, user("and now?")])
    for request in sent:
        check_request(request)
    assert assert_refs_return_their_own_output(driver, last) >= 6
    # every stored message got its own, increasing timestamp
    stamps = [
        m["timestamp"] for m in driver.session.build_context().messages if m["role"] != "custom"
    ]
    assert stamps == sorted(set(stamps))
    assert chars(sent) < 0.5 * chars(raw)


def test_written_back_output_is_recognised(tmp_path: Path) -> None:
    plain = LiveDriver(PiCodec(), session=tmp_path / "a.jsonl", clock=Clock())
    _, sent_plain, _ = run_agent(plain, prompts=4, turns=3)
    back = LiveDriver(PiCodec(), session=tmp_path / "b.jsonl", clock=Clock())
    _, sent_back, _ = run_agent(back, prompts=4, turns=3, host=write_back)
    assert back.stats.written_back > 0
    assert back.stats.rebuilds == 0
    assert json.dumps(sent_back) == json.dumps(sent_plain)
    assert assert_refs_return_their_own_output(back, sent_back[-1]) > 0


def test_restart_continues_with_the_same_refs_and_prefix(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    first = LiveDriver(PiCodec(), session=path, clock=Clock())
    history, _sent, _ = run_agent(first, prompts=3, turns=3)
    before = first.condense(history)
    first.close()
    # a new process: a new driver on the same file and the host's saved history
    saved = json.loads(json.dumps(history))
    second = LiveDriver(PiCodec(), session=path, clock=Clock(start=1_900_000_000_000))
    again = second.condense(saved)
    assert json.dumps(again) == json.dumps(before)
    assert second.stats.rebuilds == 0
    assert second.stats.messages_seen == 0
    history2, _sent2, _ = run_agent(second, prompts=2, turns=3, history=saved, start=3)
    final_request = second.condense([*history2, user("more")])
    assert assert_refs_return_their_own_output(second, final_request) >= 6
    refs = sorted(refs_in(final_request), key=lambda r: int(r[1:]))
    assert len(refs) == len(set(refs))


def test_edited_history_forks_the_session(tmp_path: Path) -> None:
    driver = LiveDriver(PiCodec(), session=tmp_path / "s.jsonl", clock=Clock())
    history, _, _ = run_agent(driver, prompts=3, turns=2)
    entries_before = len(driver.session)
    # the user edits prompt 2: everything from there is a new branch
    cut = max(i for i, m in enumerate(history) if m == user("task 2"))
    edited = [*history[:cut], user("task 2, differently")]
    sent = driver.condense(edited)
    assert driver.stats.rebuilds == 1
    assert sent[-1]["content"][0]["text"] == "task 2, differently"
    reloaded = SessionFile.load(tmp_path / "s.jsonl")
    assert len(reloaded) > entries_before  # nothing was removed from the file
    texts = [json.dumps(m) for m in reloaded.build_context().messages]
    assert not any("done 2" in t for t in texts)  # the old branch is not the context
    assert assert_refs_return_their_own_output(driver, sent) > 0
    # and a fresh driver given the edited history from scratch sends the same
    fresh = LiveDriver(PiCodec(), session=tmp_path / "fresh.jsonl", clock=Clock())
    run_agent(fresh, prompts=2, turns=2)
    assert len(fresh.condense(edited)) == len(sent)


def test_prefix_changes_only_at_the_first_call_of_a_prompt(tmp_path: Path) -> None:
    driver = LiveDriver(PiCodec(), session=tmp_path / "s.jsonl", clock=Clock())
    _, sent, raw = run_agent(driver, prompts=5, turns=3)
    busts = 0
    for k in range(1, len(sent)):
        previous = [json.dumps(m) for m in sent[k - 1]]
        current = [json.dumps(m) for m in sent[k]]
        if current[: len(previous)] != previous:
            busts += 1
            assert raw[k][-1] == user(raw[k][-1]["content"][0]["text"]), k  # a new prompt
    assert 1 <= busts <= 4


def test_system_items_stay_in_place(tmp_path: Path) -> None:
    driver = LiveDriver(PiCodec(), session=":memory:", clock=Clock())
    system = {"role": "system", "content": "be brief"}
    history: list[Any] = [system]
    history, sent, _ = run_agent(driver, prompts=3, turns=2, history=history)
    assert all(request[0] is system for request in sent)
    assert sum(1 for m in sent[-1] if m["role"] == "system") == 1
    assert driver.session.path is None
    assert not list(tmp_path.iterdir())


def test_sync_entry_point_inside_a_running_loop(tmp_path: Path) -> None:
    driver = LiveDriver(PiCodec(), session=tmp_path / "s.jsonl", clock=Clock())

    async def notebook_cell() -> tuple[list[Any], list[Any]]:
        history = [user("task 0"), call("a.txt"), result("a.txt"), final("ok"), user("next")]
        synchronous = driver.condense(history)  # a loop is running here, as in Jupyter
        asynchronous = await driver.acondense(history)
        return synchronous, asynchronous

    synchronous, asynchronous = asyncio.run(notebook_cell())
    assert json.dumps(synchronous) == json.dumps(asynchronous)
    assert "ref `t1`" in json.dumps(synchronous)
    driver.close()


def test_a_disabled_config_warns_once(tmp_path: Path) -> None:
    driver = LiveDriver(PiCodec(), session=tmp_path / "s.jsonl", config=Config(), clock=Clock())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _history, sent, raw = run_agent(driver, prompts=2, turns=2)
    ours = [w for w in caught if issubclass(w.category, CondenseWarning)]
    assert len(ours) == 1
    assert "disabled" in str(ours[0].message)
    assert chars(sent) == chars(raw)


def test_a_config_dict_is_enabled_unless_it_says_otherwise(tmp_path: Path) -> None:
    on = LiveDriver(PiCodec(), session=":memory:", config={"minBatchChars": 10})
    assert on.condenser.config.enabled
    assert on.condenser.config.min_batch_chars == 10
    off = LiveDriver(PiCodec(), session=":memory:", config={"enabled": False})
    assert not off.condenser.config.enabled


def test_default_session_location(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    monkeypatch.delenv("PI_CONDENSE_SESSION_DIR", raising=False)
    driver = LiveDriver(PiCodec(), cwd="/work/project", clock=Clock())
    run_agent(driver, prompts=1, turns=1)
    path = driver.session.path
    assert path is not None
    expected = default_session_path("/work/project", driver.session.session_id, 0)
    assert path.parent == expected.parent == tmp_path / "agent" / "sessions" / "--work-project--"
    assert path.name.endswith(f"_{driver.session.session_id}.jsonl")
    assert SessionFile.load(path).build_context().messages


def test_default_session_is_found_again_after_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """session=None: the same conversation in a new process finds its session and its refs
    (the session is named by the conversation's beginning); another conversation gets its
    own; a first history without a user message gets a new one, with a warning."""
    monkeypatch.setenv("PI_CONDENSE_SESSION_DIR", str(tmp_path / "hooks"))
    first = LiveDriver(PiCodec(), cwd=str(tmp_path), clock=Clock())
    history, _, _ = run_agent(first, prompts=3, turns=3)
    before = first.condense(history)
    refs = refs_in(before)
    assert len(refs) >= 6
    answers = {ref: first.execute("context_tree_query", {"toolCallIds": [ref]}) for ref in refs}
    first.close()

    second = LiveDriver(PiCodec(), cwd=str(tmp_path), clock=Clock(start=1_900_000_000_000))
    second.flush()  # nothing to take in yet: the session is only known at the first call
    again = second.condense(history)
    assert second.stats.messages_seen == 0
    assert second.session.path == first.session.path
    assert json.dumps(again) == json.dumps(before)
    for ref in refs:
        assert second.execute("context_tree_query", {"toolCallIds": [ref]}) == answers[ref]
    history, _, _ = run_agent(second, prompts=2, turns=3, history=history, start=3)
    assert_refs_return_their_own_output(second, second.condense(history))
    second.close()
    assert len(list((tmp_path / "hooks").glob("*.jsonl"))) == 1

    other = LiveDriver(PiCodec(), cwd=str(tmp_path), clock=Clock())
    run_agent(other, prompts=1, turns=1, history=[user("another task")])
    assert other.session.path != first.session.path
    other.close()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lone = LiveDriver(PiCodec(), cwd=str(tmp_path), clock=Clock())
        lone.condense([final("hello")])
        lone.close()
    assert any("cannot be found again after a restart" in str(w.message) for w in caught)
    assert lone.session.path is not None
    assert len(list((tmp_path / "hooks").glob("*.jsonl"))) == 3


def test_a_live_default_session_is_not_shared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two live drivers of the same conversation at once (two runs of one task): the second
    gets a session of its own, with a warning; once the first is closed, the next one finds
    the first's session again."""
    monkeypatch.setenv("PI_CONDENSE_SESSION_DIR", str(tmp_path / "hooks"))
    first = LiveDriver(PiCodec(), cwd=str(tmp_path), clock=Clock())
    run_agent(first, prompts=1, turns=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        second = LiveDriver(PiCodec(), cwd=str(tmp_path), clock=Clock())
        run_agent(second, prompts=1, turns=1)
    assert any("another live hook holds" in str(w.message) for w in caught)
    assert second.session.path != first.session.path
    second.close()
    first.close()
    third = LiveDriver(PiCodec(), cwd=str(tmp_path), clock=Clock())
    third.condense([user("task 0")])
    assert third.session.path == first.session.path
    third.close()


def test_final_reply_is_flushed_at_close(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    driver = LiveDriver(PiCodec(), session=path, clock=Clock())
    history = [user("task"), call("a.txt"), result("a.txt")]
    driver.condense(history)
    driver.close([*history, final("done")])
    text = path.read_text()
    assert "context-prune-summary" in text
    assert '"done"' in text


@pytest.mark.parametrize("closed_with_history", [True, False])
def test_restart_from_a_written_back_history(tmp_path: Path, closed_with_history: bool) -> None:
    path = tmp_path / "s.jsonl"
    first = LiveDriver(PiCodec(), session=path, clock=Clock())
    history, _, _ = run_agent(first, prompts=3, turns=3, host=write_back)
    if closed_with_history:
        first.close(history)
    else:
        first.close()
    saved = json.loads(json.dumps(history))  # the condensed history, as the framework kept it
    assert "ref `t" in json.dumps(saved)
    second = LiveDriver(PiCodec(), session=path, clock=Clock(start=1_900_000_000_000))
    history2, sent2, _ = run_agent(
        second, prompts=2, turns=3, host=write_back, history=saved, start=3
    )
    assert second.stats.rebuilds == 0
    assert second.stats.written_back >= 1
    for request in sent2:
        check_request(request)
    last = second.condense([*history2, user("more")])
    assert assert_refs_return_their_own_output(second, last) >= 6
    stored = [m for m in SessionFile.load(path).build_context().messages if m["role"] != "custom"]
    texts = [json.dumps(m) for m in stored]
    assert not any("Summarized in pruner summary" in t for t in texts)  # never stored as raw


def test_a_conversation_joined_late_is_taken_in_and_flushed(tmp_path: Path) -> None:
    # a framework app that only now adds the hook: its first call holds five earlier prompts
    plain = LiveDriver(PiCodec(), session=tmp_path / "a.jsonl", clock=Clock())
    history, _, _ = run_agent(plain, prompts=5, turns=3)
    late = LiveDriver(PiCodec(), session=tmp_path / "late.jsonl", clock=Clock())
    sent = late.condense([*history, user("task 5")])
    assert late.stats.adopted == len(history)
    check_request(sent)
    assert len(json.dumps(sent)) < 0.5 * len(json.dumps(history))
    assert assert_refs_return_their_own_output(late, sent) >= 1
    assert len(refs_in(sent)) == len(set(refs_in(sent)))


def test_a_reloaded_history_gets_its_own_objects_back(tmp_path: Path) -> None:
    driver = LiveDriver(PiCodec(), session=tmp_path / "s.jsonl", clock=Clock())
    history, _sent, _ = run_agent(driver, prompts=3, turns=3)
    first = driver.condense(history)
    reloaded = json.loads(json.dumps(history))  # equal, but new objects
    again = driver.condense(reloaded)
    assert json.dumps(again) == json.dumps(first)
    mine = {id(m) for m in reloaded}
    kept = [m for m in again if "ref `" not in json.dumps(m) and m["role"] != "custom"]
    assert kept
    assert all(id(m) in mine for m in kept)


def test_fresh_equal_items_come_back_as_the_callers_new_objects(tmp_path: Path) -> None:
    """A host that rebuilds its history on every call (fresh, equal objects) gets its own
    new objects back for the untouched messages, not the previous call's."""
    driver = LiveDriver(PiCodec(), session=":memory:", clock=Clock())
    history, _, _ = run_agent(driver, prompts=3, turns=2)
    driver.condense(history)
    fresh = json.loads(json.dumps(history))
    sent = driver.condense(fresh)
    assert json.dumps(sent) == json.dumps(driver.condense(history))
    fresh = json.loads(json.dumps(history))
    sent = driver.condense(fresh)
    by_text = {json.dumps(m): m for m in fresh}
    same = [m for m in sent if json.dumps(m) in by_text]
    assert len(same) >= 8
    assert all(m is by_text[json.dumps(m)] for m in same)


def test_a_deferred_join_stores_at_once_and_summarizes_at_the_next_call(tmp_path: Path) -> None:
    plain = LiveDriver(PiCodec(), session=tmp_path / "a.jsonl", clock=Clock())
    history, _, _ = run_agent(plain, prompts=5, turns=3)
    late = LiveDriver(PiCodec(), session=tmp_path / "late.jsonl", clock=Clock(), join="defer")
    asked = [*history, user("task 5")]
    first = late.condense(asked)
    assert late.stats.adopted == len(asked)
    assert first == asked  # nothing condensed yet: the history as it was handed over
    stored = SessionFile.load(tmp_path / "late.jsonl")
    assert [m["content"] for m in stored.build_context().messages] == [m["content"] for m in asked]
    assert not [e for e in stored.entries if e["type"] != "message"]  # no summary yet
    more = [*asked, call("f5_0.txt"), result("f5_0.txt")]
    second = late.condense(more)
    check_request(second)
    assert len(json.dumps(second)) < 0.5 * len(json.dumps(more))
    assert assert_refs_return_their_own_output(late, second) >= 5
    # the messages a flushing join sends at the same call (but for the clock's readings; the
    # backlog's summaries come after the last prompt, which was stored before they were made)
    eager = LiveDriver(PiCodec(), session=tmp_path / "eager.jsonl", clock=Clock())
    assert refs_in(eager.condense(asked))

    def untimed(messages: list[Any]) -> list[str]:
        return sorted(
            json.dumps({k: v for k, v in m.items() if k != "timestamp"}) for m in messages
        )

    assert untimed(eager.condense(more)) == untimed(second)


def test_a_flush_after_a_deferred_join_summarizes_the_backlog(tmp_path: Path) -> None:
    plain = LiveDriver(PiCodec(), session=tmp_path / "a.jsonl", clock=Clock())
    history, _, _ = run_agent(plain, prompts=4, turns=3)
    late = LiveDriver(PiCodec(), session=tmp_path / "late.jsonl", clock=Clock(), join="defer")
    assert refs_in(late.condense(history)) == set()
    late.flush()
    again = late.condense(history)
    assert assert_refs_return_their_own_output(late, again) >= 5
    late.close()


def test_an_unknown_join_mode_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="join must be 'flush' or 'defer', not 'later'"):
        LiveDriver(PiCodec(), session=tmp_path / "s.jsonl", join="later")  # type: ignore[arg-type]


def test_a_deferred_join_builds_its_first_call_without_collections(tmp_path: Path) -> None:
    """The first call of a deferred join decodes, stores and encodes the whole history: the
    cyclic collector is paused for it (and left as the caller had it), where it would
    otherwise walk the new long-lived containers again and again."""
    plain = LiveDriver(PiCodec(), session=tmp_path / "a.jsonl", clock=Clock())
    history, _, _ = run_agent(plain, prompts=12, turns=4)
    collections: list[int] = []

    def note(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    late = LiveDriver(PiCodec(), session=tmp_path / "late.jsonl", clock=Clock(), join="defer")
    eager = LiveDriver(PiCodec(), session=tmp_path / "eager.jsonl", clock=Clock())
    gc.collect()
    thresholds = gc.get_threshold()
    gc.set_threshold(100, 10, 10)  # a small history makes as many collections as a large one
    gc.callbacks.append(note)
    try:
        assert gc.isenabled()
        late.condense(history)
        deferred = len(collections)
        assert gc.isenabled()
        eager.condense(history)  # a flushing join: the collector as the host has it
        assert gc.isenabled()
    finally:
        gc.callbacks.remove(note)
        gc.set_threshold(*thresholds)
    # only what runs outside the paused block: around the call, and once when it is resumed
    # (13 with the collector left on)
    assert deferred <= 3
    assert len(collections) - deferred > 20  # the same history makes it run, left on
    gc.disable()
    try:
        again = LiveDriver(PiCodec(), session=tmp_path / "again.jsonl", clock=Clock(), join="defer")
        again.condense(history)
        assert not gc.isenabled()  # a caller's paused collector stays paused
    finally:
        gc.enable()

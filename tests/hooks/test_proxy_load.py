"""The proxy under load: 50 conversations at once (threads, each a real SDK client) through
one proxy to one loopback upstream; bounded in count (3 prompts each) and time (every wait
has a deadline). Nothing is lost, nothing mixed between conversations."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from pi_condense.proxy import ProxySettings
from pi_condense.session import SessionFile
from support.hook_runs import Script, Step, Text
from support.llm_servers import LoopbackLLMServer, Recorded, Reply
from support.proxy import RunningProxy
from support.proxy_agents import Agent
from support.proxy_wire import WireModel

pytestmark = pytest.mark.usefixtures("loopback_only")

CONVERSATIONS = 50
PROMPTS = 3


@dataclass
class Named(Script):
    """The scripted model of one conversation: its answers carry the conversation's name."""

    name: str = ""

    def step(self, pairs):  # type: ignore[no-untyped-def]
        step: Step = super().step(pairs)
        return Text(f"{self.name} {step.text}") if isinstance(step, Text) else step


def test_fifty_conversations_at_once_lose_and_mix_nothing(tmp_path: Path) -> None:
    names = [f"agent{n:02d}" for n in range(CONVERSATIONS)]
    scripts = {name: Named(turns=2, query_prompt=2, name=name) for name in names}
    lock = threading.Lock()

    def script_for(body: dict) -> Script:  # type: ignore[type-arg]
        return scripts[body["messages"][0]["content"].split()[0]]

    model = WireModel("chat", script_for)
    # every conversation's first request is held upstream until all of them are in flight
    arrived: set[str] = set()
    all_in = threading.Condition()

    def gated(request: Recorded) -> Reply:
        name = request.body["messages"][0]["content"].split()[0]
        with all_in:
            if name not in arrived:
                arrived.add(name)
                all_in.notify_all()
                all_in.wait_for(lambda: len(arrived) == CONVERSATIONS, timeout=60)
        return model(request)

    answers: dict[str, list[str]] = {}
    errors: list[str] = []

    def converse(name: str, url: str, stream: bool) -> None:
        try:
            agent = Agent("chat", url, f"{name} system prompt", stream=stream, timeout=60)
            said = [agent.prompt(f"{name} task {p}") for p in range(PROMPTS)]
            with lock:
                answers[name] = said
        except Exception as exc:  # reported below
            with lock:
                errors.append(f"{name}: {type(exc).__name__}: {exc}")

    sessions = tmp_path / "sessions"
    options = ProxySettings(openai_base_url="", sessions_dir=sessions)
    with LoopbackLLMServer(gated, max_lifetime=240) as upstream:
        options.openai_base_url = upstream.url + "/v1"
        with RunningProxy(options) as px:
            threads = [
                threading.Thread(target=converse, args=(name, px.url, n % 2 == 1), daemon=True)
                for n, name in enumerate(names)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=180)
            assert not any(t.is_alive() for t in threads), "conversations still running"
    assert errors == []
    assert model.violations == []
    assert upstream.max_in_flight == CONVERSATIONS  # all of them at once
    for name in names:
        assert answers[name] == [f"{name} done {p}" for p in range(PROMPTS)]
        mine = [r for r in model.requests if r[0]["content"].startswith(f"{name} ")]
        # 2 reads per prompt, the answer, and the hidden recovery at prompt 2
        assert len(mine) == PROMPTS * 3 + 1
        for request in mine:
            text = json.dumps(request)
            assert {n for n in names if f"{n} task" in text} == {name}, name
    files = sorted(sessions.glob("*.jsonl"))
    assert len(files) == CONVERSATIONS
    for path in files:
        text = json.dumps(SessionFile.load(path).build_context().messages)
        owners = {name for name in names if f"{name} task" in text}
        assert len(owners) == 1, (path.name, owners)

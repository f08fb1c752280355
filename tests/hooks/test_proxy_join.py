"""A conversation that reaches the proxy late (the client talked to the provider first, or the
proxy has no session file for it): ``join="defer"`` / ``--join defer`` sends its first request
on as the client sent it and condenses from the next; the default ``"flush"`` condenses the
first. The real ``openai`` SDK, the proxy on 127.0.0.1 and the loopback upstream that checks
the provider's rules (tests/support/proxy_wire.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pi_condense.proxy import ProxySettings, create_app
from support.hook_runs import QUERY, REF, Script, body, check_queries, listed, output, stubs
from support.llm_servers import LoopbackLLMServer
from support.proxy import RunningProxy, proxy_process
from support.proxy_agents import Agent
from support.proxy_wire import WireModel

pytestmark = pytest.mark.usefixtures("loopback_only")

EARLIER = 6
"""Prompts the client ran straight against the upstream before it met the proxy."""


def received(bodies: list[dict[str, Any]]) -> Any:
    """An ASGI layer keeping the JSON body of every request the client sent the proxy."""

    def wrap(app: ASGIApp) -> ASGIApp:
        async def recorded(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http" or scope["method"] != "POST":
                await app(scope, receive, send)
                return
            chunks: list[bytes] = []
            while True:
                message = await receive()
                chunks.append(message.get("body", b""))
                if not message.get("more_body"):
                    break
            bodies.append(json.loads(b"".join(chunks)))
            replayed = False

            async def replay() -> Message:
                nonlocal replayed
                if replayed:
                    return await receive()
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}

            await app(scope, replay, send)

        return recorded

    return wrap


def started_without_the_proxy(kind: str, model: WireModel, upstream: LoopbackLLMServer) -> Agent:
    """A client that has run :data:`EARLIER` prompts against the upstream itself."""
    direct = Agent(kind, upstream.url, "You are careful.")
    for p in range(EARLIER):
        assert direct.prompt(f"task {p}: read the files") == f"done {p}"
    return direct


def late_run(tmp_path: Path, kind: str, join: str) -> tuple[WireModel, Script, list[Any], int]:
    """The client's next prompt through a proxy with ``join``: the upstream's model, its
    script, what the client sent the proxy, and how many upstream requests came before."""
    script = Script(turns=3, query_prompt=EARLIER)
    model = WireModel(kind, lambda request: script)
    sent: list[dict[str, Any]] = []
    with LoopbackLLMServer(model) as upstream:
        direct = started_without_the_proxy(kind, model, upstream)
        before = len(model.bodies)
        settings = ProxySettings(
            openai_base_url=upstream.url + "/v1",
            sessions_dir=tmp_path / join,
            **({"join": join} if join != "default" else {}),
        )
        with RunningProxy(settings, wrap=received(sent)) as px:
            agent = Agent(kind, px.url, "You are careful.", history=direct.history)
            assert agent.prompt(f"task {EARLIER}: read the files") == f"done {EARLIER}"
            (conversation,) = px.app.state.proxy.conversations.values()
            driver = conversation.driver
            # every output of the conversation is in the last request as it was, or behind
            # a ref there (a stub's, or one a summary or compressed chain lists) that gives
            # it back byte for byte
            last = model.pairs[-1]
            kept = {
                p.arguments["path"]
                for p in last
                if p.name == "read" and p.result == output(p.arguments["path"])
            }
            refs = dict(stubs(last)) | dict(listed(model.requests[-1]))
            for ref, path in refs.items():
                answer = driver.execute(QUERY, {"toolCallIds": [ref]})
                assert body(answer) == output(path), (ref, path)
    reads = {f"f{p}_{t}.txt" for p in range(EARLIER + 1) for t in range(3)}
    assert kept | set(refs.values()) == reads
    assert len(refs) >= 3 * EARLIER
    assert model.violations == []
    return model, script, sent, before


@pytest.mark.parametrize("kind", ["chat", "responses"])
def test_a_deferred_join_sends_the_first_request_as_it_came_and_condenses_the_next(
    tmp_path: Path, kind: str
) -> None:
    key = "messages" if kind == "chat" else "input"
    model, script, sent, before = late_run(tmp_path, kind, "defer")
    first, client = model.bodies[before], sent[0]
    assert len(client[key]) > 4 * EARLIER  # whole earlier runs, with their tool outputs
    # forwarded unchanged: the history byte for byte, the rest of the body as it was
    assert json.dumps(first[key]) == json.dumps(client[key])
    assert {k: v for k, v in first.items() if k != "tools"} == {
        k: v for k, v in client.items() if k != "tools"
    }
    assert not REF.search(json.dumps(first[key]))
    # the next request is condensed: stubs with refs, far smaller than the client's history
    following = model.requests[before + 1]
    assert REF.search(json.dumps(following))
    assert len(json.dumps(following)) < 0.5 * len(json.dumps(sent[1][key]))
    # and the model's own recovery through the proxy came back byte-exact
    assert check_queries(script, model.pairs[before:]) == 1

    # the default join condenses the first request already; from the second on, both send
    # the same messages (the deferred backlog's summaries come after the prompt, stored
    # before they were made, as with the hooks)
    flushed, _, flushed_sent, at = late_run(tmp_path, kind, "default")
    assert json.dumps(flushed_sent[0][key]) == json.dumps(client[key])
    assert REF.search(json.dumps(flushed.requests[at]))
    assert len(json.dumps(flushed.requests[at])) < 0.5 * len(json.dumps(client[key]))
    assert [sorted(map(json.dumps, r)) for r in flushed.requests[at + 1 :]] == [
        sorted(map(json.dumps, r)) for r in model.requests[before + 1 :]
    ]


def test_the_cli_join_option_reaches_every_conversations_driver(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PI_CONDENSE_")}
    script = Script(turns=3, query_prompt=None)
    model = WireModel("chat", lambda request: script)
    with LoopbackLLMServer(model) as upstream:
        args = ["--openai-base-url", upstream.url + "/v1", "--sessions", str(tmp_path / "s")]
        direct = started_without_the_proxy("chat", model, upstream)
        asked = len(direct.history) + 1  # the history and the new prompt
        before = len(model.bodies)
        with proxy_process([*args, "--join", "defer"], env) as url:
            agent = Agent("chat", url, "You are careful.", history=direct.history)
            agent.prompt(f"task {EARLIER}: read the files")
    assert model.violations == []
    assert json.dumps(model.requests[before]) == json.dumps(agent.history[:asked])
    assert REF.search(json.dumps(model.requests[before + 1]))
    wrong = subprocess.run(
        [sys.executable, "-m", "pi_condense.cli", "proxy", "--join", "later"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert wrong.returncode == 2
    assert wrong.stderr.strip() == 'pi-condense: --join must be "flush" or "defer", not \'later\''


def test_create_app_takes_the_join_and_refuses_an_unknown_one() -> None:
    assert create_app(join="defer").state.proxy.settings.join == "defer"
    assert create_app().state.proxy.settings.join == "flush"
    with pytest.raises(ValueError, match=r"^join must be one of flush, defer$"):
        create_app(join="later")

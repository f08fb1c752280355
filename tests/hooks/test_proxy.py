"""`pi-condense proxy` end to end: the real ``openai`` and ``anthropic`` SDKs, the proxy
(uvicorn on 127.0.0.1, an ephemeral port) and a loopback upstream whose scripted model checks
every request as the provider's API does (tests/support/proxy_wire.py)."""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from pi_condense.config import Config
from pi_condense.proxy import ProxySettings, find_session, session_id_for_name
from pi_condense.report.data import collect
from pi_condense.session import SessionFile
from pi_condense.summarize.deterministic import DeterministicSummarizer
from support.chat_wire import completion
from support.hook_runs import QUERY, Script, Text, chars, check_queries, output, prefix_busts
from support.llm_servers import (
    LoopbackLLMServer,
    Recorded,
    Reply,
    anthropic_error,
    openai_error,
    openai_response,
    openai_stream,
)
from support.messages_wire import reply as messages_reply
from support.proxy import RunningProxy, asgi_2_4
from support.proxy_agents import KEY, Agent
from support.proxy_wire import (
    WireModel,
    chat_stream,
    messages_stream,
    responses_reply,
    responses_stream,
)

pytestmark = pytest.mark.usefixtures("loopback_only")

KINDS = ["chat", "responses", "messages"]


def settings(upstream: LoopbackLLMServer, sessions: Path, **options: Any) -> ProxySettings:
    return ProxySettings(
        openai_base_url=upstream.url + "/v1",
        anthropic_base_url=upstream.url + "/v1",
        sessions_dir=sessions,
        **options,
    )


def session_files(sessions: Path) -> list[Path]:
    return sorted(sessions.glob("*.jsonl"))


def hidden_calls(path: Path) -> int:
    """The context_tree_query calls the session holds (the proxy's hidden round-trips)."""
    session = SessionFile.load(path)
    return sum(
        1
        for entry in session.branch()
        if entry.get("type") == "message" and entry["message"].get("role") == "assistant"
        for block in entry["message"].get("content") or []
        if isinstance(block, dict) and block.get("type") == "toolCall" and block["name"] == QUERY
    )


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("kind", KINDS)
def test_long_run_condenses_and_recovers_behind_the_clients_back(
    tmp_path: Path, kind: str, stream: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    script = Script(turns=3, query_prompt=3)
    model = WireModel(kind, lambda body: script)
    sessions = tmp_path / "sessions"
    with LoopbackLLMServer(model) as upstream, RunningProxy(settings(upstream, sessions)) as px:
        agent = Agent(kind, px.url, "You are careful.", stream=stream)
        answers = [agent.prompt(f"task {p}: read the files") for p in range(6)]

    assert model.violations == []
    assert answers == [f"done {p}" for p in range(6)]
    # the model's recovery came back byte-exact, answered by the proxy: the client's own
    # history never holds the call (Agent.prompt fails on one)
    assert check_queries(script, model.pairs) == 1
    assert QUERY not in json.dumps(agent.history)
    # condensed: the later requests are far smaller than the client's history
    assert chars(model.requests[-1:]) < 0.5 * len(json.dumps(agent.history))
    # every request went with the client's own key; the proxy added the recovery tools
    assert all(
        r.headers.get("authorization", "").endswith(KEY) or r.headers.get("x-api-key") == KEY
        for r in upstream.requests
    )
    # the first request (no reply yet, nothing to condense) went on as it came, no session
    assert QUERY not in json.dumps(model.bodies[0])
    assert agent.session_ids[0] == ""
    assert all(QUERY in json.dumps(body["tools"]) for body in model.bodies[1:])
    # one session file, named by the id the proxy answered with, with the hidden call in it
    (path,) = session_files(sessions)
    assert set(agent.session_ids) - {""} == {path.stem.split("_", 1)[1]}
    assert hidden_calls(path) == 1
    # ... and `pi-condense report` counts it among the recovered refs
    report = collect(
        SessionFile.load(path),
        Config.from_settings_dict({"enabled": True}),
        DeterministicSummarizer(),
        title="proxy",
    )
    assert [r.ref for r in report.recoveries] == [script.queries[0][0]]
    # the key is nowhere on disk nor in the logs
    for file in sessions.rglob("*"):
        if file.is_file():
            assert KEY.encode() not in file.read_bytes(), file
    proxy_side = ("pi_condense", "uvicorn", "starlette", "httpx")
    assert not [
        r for r in caplog.records if r.name.startswith(proxy_side) and KEY in r.getMessage()
    ]


class TwoQueries(Script):
    """Queries a stubbed output at prompt 2, and again at prompt 4."""

    def step(self, pairs: Any) -> Any:
        done = super().step(pairs)
        if isinstance(done, Text) and self.prompt == 3:
            self.query_prompt = 4
        return done


@pytest.mark.parametrize("kind", KINDS)
def test_recoveries_in_two_prompts_stay_where_they_happened(tmp_path: Path, kind: str) -> None:
    """Each hidden round-trip goes back into the client's later requests at its own place:
    the upstream's requests only grow at their end within a prompt, and the session holds
    both recoveries on one branch."""
    script = TwoQueries(turns=2, query_prompt=2)
    model = WireModel(kind, lambda body: script)
    sessions = tmp_path / "sessions"
    with LoopbackLLMServer(model) as upstream, RunningProxy(settings(upstream, sessions)) as px:
        agent = Agent(kind, px.url, "You are careful.")
        for p in range(6):
            agent.prompt(f"task {p}: read the files")
    assert model.violations == []
    assert check_queries(script, model.pairs) == 2
    # within a prompt, each request starts with the previous one (the hidden round-trips
    # included): no prefix bust but at a prompt's first request
    firsts = [i for i, r in enumerate(model.requests) if "read the files" in json.dumps(r[-1])]
    assert set(prefix_busts(model.requests)) <= set(firsts)
    (path,) = session_files(sessions)
    assert hidden_calls(path) == 2
    assert len(SessionFile.load(path).branch()) == len(
        [e for e in SessionFile.load(path).entries if e.get("type") != "session"]
    ), "the session forked: a hidden round-trip was not put back"


def _text_then_query(kind: str) -> Reply:
    """A streamed reply that says something, then calls context_tree_query."""
    text, call_id, arguments = "Let me check.", "call_q", {"toolCallIds": ["t1"]}
    if kind == "chat":
        call = {
            "id": call_id,
            "type": "function",
            "function": {"name": QUERY, "arguments": json.dumps(arguments)},
        }
        message = {"role": "assistant", "content": text, "tool_calls": [call]}
        choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
        return chat_stream(Reply(body=json.dumps({"id": "c", "choices": [choice]}).encode()))
    if kind == "messages":
        body = json.loads(messages_reply([]).body)
        body["content"] = [
            {"type": "text", "text": text},
            {"type": "tool_use", "id": call_id, "name": QUERY, "input": arguments},
        ]
        return messages_stream(Reply(body=json.dumps(body).encode()))
    body = json.loads(responses_reply(Text(text)).body)
    body["output"].append(
        {
            "type": "function_call",
            "id": "fc_q",
            "call_id": call_id,
            "name": QUERY,
            "arguments": json.dumps(arguments),
            "status": "completed",
        }
    )
    return responses_stream(Reply(body=json.dumps(body).encode()))


def _answer(kind: str) -> Reply:
    if kind == "chat":
        return chat_stream(completion(Text("the answer")))
    if kind == "messages":
        return messages_stream(messages_reply(Text("the answer")))
    body = json.loads(responses_reply(Text("the answer")).body)
    body["id"], body["output"][0]["id"] = "resp_2", "msg_2"  # a new response, as the API's
    return responses_stream(Reply(body=json.dumps(body).encode()))


@pytest.mark.parametrize("kind", KINDS)
def test_a_hidden_round_trip_after_streamed_text_continues_the_same_stream(
    tmp_path: Path, kind: str
) -> None:
    """The client's SDK assembles one reply: the text it was streamed before the recovery
    call, then the continuation's (numbered on from it), and never the call."""
    replies = [_text_then_query(kind), _answer(kind)]
    seen: list[dict[str, Any]] = []

    def model(request: Recorded) -> Reply:
        seen.append(request.body)
        return replies[len(seen) - 1]

    with LoopbackLLMServer(model) as upstream, RunningProxy(settings(upstream, tmp_path)) as px:
        agent = Agent(kind, px.url, "You are careful.", stream=True)
        # a conversation under way (a first request, with no reply yet, is passed on as is)
        agent.history += [
            {"role": "user", "content": "hello"},
            {"role": "assistant", "content": "hi"},
        ]
        answer = agent.prompt("what was in t1?")
    assert len(seen) == 2
    assert QUERY not in json.dumps(agent.history)
    last = agent.history[-1]
    if kind == "chat":
        assert answer == "Let me check.the answer"
    elif kind == "messages":
        assert last["content"] == [
            {"type": "text", "text": "Let me check."},
            {"type": "text", "text": "the answer"},
        ]
    else:
        assert answer == "Let me check.the answer"
        assert [i["type"] for i in agent.history[-2:]] == ["message", "message"]
    # the continuation request holds the call (after the text) and the proxy's answer to it
    second = json.dumps(seen[1])
    assert second.index("Let me check.") < second.index("call_q") < second.rindex("call_q")
    assert "t1" in second


def test_idle_conversations_are_closed_beyond_the_limit_and_come_back(tmp_path: Path) -> None:
    """With room for 2 live conversations, a third closes the least recently used; when that
    one comes back it is opened again from its file, refs and recovery intact."""
    scripts = {n: Script(turns=2, query_prompt=3) for n in ("a", "b", "c")}
    model = WireModel("messages", lambda body: scripts[body["system"]])
    sessions = tmp_path / "sessions"
    with LoopbackLLMServer(model) as upstream:
        options = settings(upstream, sessions, max_conversations=2)
        with RunningProxy(options) as px:
            agents = {n: Agent("messages", px.url, n) for n in scripts}
            for p in range(4):
                for name, agent in agents.items():
                    agent.prompt(f"{name} task {p}")
                    assert len(px.app.state.proxy.conversations) <= 2
    assert model.violations == []
    for name, script in scripts.items():
        mine = [i for i, b in enumerate(model.bodies) if b["system"] == name]
        assert check_queries(script, [model.pairs[i] for i in mine]) == 1
    files = session_files(sessions)
    assert len(files) == 3
    assert sorted(hidden_calls(path) for path in files) == [1, 1, 1]


def test_a_restarted_proxy_continues_the_same_session_with_the_same_refs(
    tmp_path: Path,
) -> None:
    """`pi-condense proxy` stopped after 3 prompts and started again: the upstream sees
    exactly what it sees from a proxy that ran throughout (same refs, same prefixes)."""
    script = Script(turns=3, query_prompt=4)
    model = WireModel("chat", lambda body: script)
    sessions = tmp_path / "sessions"
    with LoopbackLLMServer(model) as upstream:
        args = [
            *(sys.executable, "-m", "pi_condense.cli", "proxy", "--port", "0"),
            *("--openai-base-url", upstream.url + "/v1", "--sessions", str(sessions)),
        ]
        history: list[Any] = []
        for prompts in (range(0, 3), range(3, 6)):
            proc = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
            try:
                line = proc.stderr.readline() if proc.stderr else ""
                assert "listening on http://127.0.0.1:" in line, line
                agent = Agent("chat", line.rsplit(" ", 1)[1].strip(), "s", history=history)
                for p in prompts:
                    agent.prompt(f"task {p}: read the files")
                history = agent.history
            finally:
                proc.terminate()
                _, err = proc.communicate(timeout=20)
            assert proc.returncode in (0, -15), err
            assert KEY not in err
    baseline_script = Script(turns=3, query_prompt=4)
    baseline = WireModel("chat", lambda body: baseline_script)
    with (
        LoopbackLLMServer(baseline) as upstream,
        RunningProxy(settings(upstream, tmp_path / "baseline")) as px,
    ):
        agent = Agent("chat", px.url, "s")
        for p in range(6):
            agent.prompt(f"task {p}: read the files")
    assert model.violations == []
    assert baseline.violations == []
    assert check_queries(script, model.pairs) == 1
    assert [json.dumps(r) for r in model.requests] == [json.dumps(r) for r in baseline.requests]
    assert chars(model.requests[-1:]) < 0.5 * len(json.dumps(history))
    (path,) = session_files(sessions)
    assert hidden_calls(path) == 1


def test_two_conversations_at_once_never_mix(tmp_path: Path) -> None:
    scripts = {"alpha": Script(turns=3, query_prompt=2), "beta": Script(turns=3, query_prompt=2)}

    def script_for(body: dict[str, Any]) -> Script:
        return scripts[body["system"].split()[0]]

    model = WireModel("messages", script_for)
    sessions = tmp_path / "sessions"
    errors: list[BaseException] = []
    agents: dict[str, Agent] = {}

    def run(name: str, url: str) -> None:
        try:
            agents[name] = Agent("messages", url, f"{name} agent", stream=name == "beta")
            for p in range(4):
                agents[name].prompt(f"{name} task {p}")
        except BaseException as exc:  # reported below
            errors.append(exc)

    with LoopbackLLMServer(model) as upstream, RunningProxy(settings(upstream, sessions)) as px:
        threads = [threading.Thread(target=run, args=(n, px.url)) for n in scripts]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    assert errors == []
    assert model.violations == []
    for name, script in scripts.items():
        mine = [i for i, b in enumerate(model.bodies) if b["system"].startswith(name)]
        assert check_queries(script, [model.pairs[i] for i in mine]) == 1
        assert all(f"{name} task" in json.dumps(model.requests[i]) for i in mine)
        other = "beta" if name == "alpha" else "alpha"
        assert not any(f"{other} task" in json.dumps(model.requests[i]) for i in mine)
    assert len(session_files(sessions)) == 2


def test_an_explicit_header_names_the_session(tmp_path: Path) -> None:
    script = Script(turns=1, query_prompt=None)
    model = WireModel("chat", lambda body: script)
    sessions = tmp_path / "sessions"
    with LoopbackLLMServer(model) as upstream, RunningProxy(settings(upstream, sessions)) as px:
        headers = {"x-pi-condense-session": "my build"}
        agent = Agent("chat", px.url, "You are careful.", headers=headers)
        agent.prompt("task 0")
        same = Agent("chat", px.url, "Another prompt entirely.", headers=headers)
        same.prompt("something else")
    sid = session_id_for_name("my build")
    assert find_session(sessions, sid) is not None
    assert [p.name.endswith(f"_{sid}.jsonl") for p in session_files(sessions)] == [True]
    assert "x-pi-condense-session" not in json.dumps([r.headers for r in upstream.requests])


def test_a_session_id_header_is_used_as_it_is_and_keeps_to_its_format(tmp_path: Path) -> None:
    sid = "0b5e8a52-8d7e-4c41-9a43-5f1f6f2c1a7e"
    history = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "again"},
    ]
    with (
        LoopbackLLMServer() as upstream,
        RunningProxy(settings(upstream, tmp_path)) as px,
        httpx.Client(base_url=px.url, trust_env=False, timeout=10) as http,
    ):
        upstream.queue(openai_response("ok"))
        headers = {"x-pi-condense-session": sid}
        chat = http.post(
            "/v1/chat/completions", json={"model": "m", "messages": history}, headers=headers
        )
        other = http.post(
            "/v1/messages",
            json={"model": "m", "max_tokens": 8, "messages": history},
            headers=headers,
        )
    assert chat.headers["x-pi-condense-session-id"] == sid
    assert find_session(tmp_path, sid) is not None
    assert other.status_code == 400
    assert "openai-chat conversation, not anthropic-messages" in other.json()["error"]["message"]
    assert len(upstream.requests) == 1


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_upstream_errors_come_back_unchanged(tmp_path: Path, kind: str, stream: bool) -> None:
    with LoopbackLLMServer() as upstream, RunningProxy(settings(upstream, tmp_path)) as px:
        if kind == "messages":
            reply = anthropic_error(
                429, "rate_limit_error", "slow down", headers={"retry-after": "7"}
            )
        else:
            reply = openai_error(429, "slow down", "rate_limit_error", headers={"retry-after": "7"})
        upstream.queue(reply)
        agent = Agent(kind, px.url, "s", stream=stream)
        error_type = anthropic.RateLimitError if kind == "messages" else openai.RateLimitError
        with pytest.raises(error_type) as caught:
            agent.prompt("hello")
    assert caught.value.status_code == 429
    assert caught.value.response.headers["retry-after"] == "7"
    assert caught.value.response.content == reply.body


def test_unknown_route_and_malformed_body_get_a_clear_json_error(tmp_path: Path) -> None:
    with (
        LoopbackLLMServer() as upstream,
        RunningProxy(settings(upstream, tmp_path)) as px,
        httpx.Client(base_url=px.url, trust_env=False) as http,
    ):
        missing = http.post("/v1/embeddings", json={"input": "x"})
        wrong_method = http.get("/v1/chat/completions")
        not_json = http.post("/v1/messages", content=b"{not json")
        no_history = http.post("/v1/chat/completions", json={"model": "m"})
    assert missing.status_code == 404
    assert "no route POST /v1/embeddings" in missing.json()["error"]["message"]
    assert wrong_method.status_code == 404
    assert "no route GET /v1/chat/completions" in wrong_method.json()["error"]["message"]
    assert not_json.status_code == 400
    assert not_json.json()["type"] == "error"
    assert "not JSON" in not_json.json()["error"]["message"]
    assert no_history.status_code == 400
    assert "`messages`" in no_history.json()["error"]["message"]
    assert upstream.requests == []


def test_token_counts_and_model_lists_pass_through_unchanged(tmp_path: Path) -> None:
    with LoopbackLLMServer() as upstream, RunningProxy(settings(upstream, tmp_path)) as px:
        upstream.queue(Reply(body=b'{"input_tokens": 42}'))
        api = anthropic.Anthropic(base_url=px.url, api_key=KEY, max_retries=0)
        messages = [{"role": "user", "content": "count me"}]
        counted = api.messages.count_tokens(model="m", messages=messages)
    assert counted.input_tokens == 42
    (request,) = upstream.requests
    assert request.path == "/v1/messages/count_tokens"
    assert request.body == {"model": "m", "messages": messages}
    assert KEY in (request.headers.get("x-api-key", "") + request.headers.get("authorization", ""))


def test_unreachable_upstream_is_a_502_in_the_wire_format(tmp_path: Path) -> None:
    with LoopbackLLMServer() as upstream:
        dead = upstream.url
    options = ProxySettings(anthropic_base_url=dead + "/v1", sessions_dir=tmp_path)
    with RunningProxy(options) as px:
        agent = Agent("messages", px.url, "s")
        with pytest.raises(anthropic.InternalServerError) as caught:
            agent.prompt("hello")
    assert caught.value.status_code == 502
    assert caught.value.body["error"]["type"] == "api_error"  # type: ignore[index]


def test_a_client_gone_mid_stream_closes_the_upstream_and_frees_the_conversation(
    tmp_path: Path,
) -> None:
    with LoopbackLLMServer() as upstream, RunningProxy(settings(upstream, tmp_path)) as px:
        # 40 chunks 0.1 s apart: 4 s when read to the end
        upstream.queue(openai_stream([f"w{n} " for n in range(40)], gap=0.1))
        body = {
            "model": "m",
            "stream": True,
            "messages": [{"role": "user", "content": "long answer please"}],
        }
        with httpx.Client(base_url=px.url, trust_env=False, timeout=10) as http:
            with http.stream("POST", "/v1/chat/completions", json=body) as response:
                first = next(response.iter_raw())
            started = time.monotonic()
            assert first.startswith(b"data: ")
            while upstream.in_flight and time.monotonic() - started < 3:
                time.sleep(0.02)
            assert upstream.in_flight == 0, "the upstream stream was left open"
            assert time.monotonic() - started < 3
            # the same conversation goes on
            upstream.queue(openai_stream(["fine"]))
            again = http.post("/v1/chat/completions", json=body)
    assert again.status_code == 200
    assert "fine" in again.text


def test_streams_pass_through_as_they_arrive(tmp_path: Path) -> None:
    with LoopbackLLMServer() as upstream, RunningProxy(settings(upstream, tmp_path)) as px:
        upstream.queue(openai_stream(["a", "b", "c"], gap=0.3))
        body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        with (
            httpx.Client(base_url=px.url, trust_env=False, timeout=10) as http,
            http.stream("POST", "/v1/chat/completions", json=body) as response,
        ):
            chunks = response.iter_raw()
            raw = next(chunks)
            # the first event is here while the upstream is still sending the rest
            upstream_busy = upstream.in_flight
            raw += b"".join(chunks)
    assert upstream_busy == 1
    assert list(tmp_path.glob("*.jsonl")) == []  # a one-shot request: no session file
    assert raw == b"".join(part for _, part in openai_stream(["a", "b", "c"]).chunks)


def test_a_stream_event_the_proxy_cannot_read_goes_on_unchanged(tmp_path: Path) -> None:
    odd = [
        (0.0, b'event: message_start\ndata: {"type": "message_start", "message": {}}\n\n'),
        (0.0, b'event: content_block_start\ndata: {"type": "content_block_start"}\n\n'),
        (0.0, b"event: ping\ndata: not json\n\n"),
        (0.0, b'event: message_stop\ndata: {"type": "message_stop"}\n\n'),
    ]
    body = {
        "model": "m",
        "max_tokens": 8,
        "stream": True,
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {"role": "user", "content": "again"},
        ],
    }
    with (
        LoopbackLLMServer() as upstream,
        RunningProxy(settings(upstream, tmp_path)) as px,
        httpx.Client(base_url=px.url, trust_env=False, timeout=10) as http,
    ):
        upstream.queue(Reply(chunks=odd))
        got = http.post("/v1/messages", json=body)
    assert got.status_code == 200
    assert got.content == b"".join(part for _, part in odd)


def test_client_cache_control_markers_survive_where_their_messages_do(tmp_path: Path) -> None:
    script = Script(turns=3, query_prompt=None)
    model = WireModel("messages", lambda body: script)
    system = [{"type": "text", "text": "You are careful.", "cache_control": {"type": "ephemeral"}}]
    with LoopbackLLMServer(model) as upstream, RunningProxy(settings(upstream, tmp_path)) as px:
        api = anthropic.Anthropic(base_url=px.url, api_key=KEY, max_retries=0)
        agent = Agent("messages", px.url, "unused")
        for p in range(4):
            agent.history.append({"role": "user", "content": f"task {p}"})
            while True:
                # as Claude Code does: a marker on the newest message's last block only
                sent = json.loads(json.dumps(agent.history))
                last = sent[-1]
                if isinstance(last["content"], str):
                    last["content"] = [{"type": "text", "text": last["content"]}]
                last["content"][-1]["cache_control"] = {"type": "ephemeral"}
                reply = api.messages.create(
                    model="m", max_tokens=64, system=system, messages=sent, tools=[]
                )
                blocks = [b.to_dict() for b in reply.content]
                agent.history.append({"role": "assistant", "content": blocks})
                if reply.stop_reason != "tool_use":
                    break
                agent.history.append(
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": b["id"],
                                "content": output(b["input"]["path"]),
                            }
                            for b in blocks
                        ],
                    }
                )
    assert model.violations == []
    for body in model.bodies:
        assert body["system"] == system
        assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert chars(model.requests[-1:]) < 0.5 * len(json.dumps(agent.history))


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_reply_mixing_recovery_and_client_calls_goes_to_the_client_unchanged(
    tmp_path: Path, stream: bool
) -> None:
    calls = [
        {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}},
        {"id": "c2", "type": "function", "function": {"name": QUERY, "arguments": "{}"}},
    ]
    message = {"role": "assistant", "content": None, "tool_calls": calls}
    choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
    reply = Reply(
        body=json.dumps({"id": "c", "object": "chat.completion", "choices": [choice]}).encode()
    )
    if stream:
        reply = chat_stream(reply)
    body = {
        "model": "m",
        "stream": stream,
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {"role": "user", "content": "read it"},
        ],
    }
    with (
        LoopbackLLMServer() as upstream,
        RunningProxy(settings(upstream, tmp_path)) as px,
        httpx.Client(base_url=px.url, trust_env=False, timeout=10) as http,
    ):
        upstream.queue(reply)
        got = http.post("/v1/chat/completions", json=body)
    assert len(upstream.requests) == 1  # the proxy answered nothing itself
    assert got.content == (b"".join(c for _, c in reply.chunks) if stream else reply.body)


def test_hidden_round_trips_stop_at_the_limit(tmp_path: Path) -> None:
    """A model that asks again and again: after max_hidden_rounds answers the next reply goes
    to the client as it is."""
    call = {"id": "q", "type": "function", "function": {"name": QUERY, "arguments": "{}"}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
    reply = Reply(body=json.dumps({"id": "c", "choices": [choice]}).encode())
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {"role": "user", "content": "look it up"},
        ],
    }
    with (
        LoopbackLLMServer() as upstream,
        RunningProxy(settings(upstream, tmp_path, max_hidden_rounds=2)) as px,
        httpx.Client(base_url=px.url, trust_env=False, timeout=10) as http,
    ):
        upstream.queue(reply, reply, reply)
        got = http.post("/v1/chat/completions", json=body)
    assert len(upstream.requests) == 3
    assert got.content == reply.body
    # the two answered round-trips are in the third request, paired
    assert [m["role"] for m in upstream.requests[2].body["messages"][-4:]] == [
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]


def test_client_mode_adds_no_tools_and_passes_recovery_calls_on(tmp_path: Path) -> None:
    script = Script(turns=3, query_prompt=2)
    model = WireModel("chat", lambda body: script)
    with LoopbackLLMServer(model) as upstream:
        options = settings(upstream, tmp_path, recovery="client")
        with RunningProxy(options) as px:
            agent = Agent("chat", px.url, "You are careful.")
            agent.prompt("task 0")
            agent.prompt("task 1")
            with pytest.raises(AssertionError, match="recovery call"):
                agent.prompt("task 2")
    assert model.violations == []
    assert all(QUERY not in json.dumps(body["tools"]) for body in model.bodies)


def test_cli_refuses_a_taken_port_and_a_wrong_mode_in_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = str(taken.getsockname()[1])
        busy = subprocess.run(
            [
                sys.executable,
                "-m",
                "pi_condense.cli",
                "proxy",
                "--port",
                port,
                "--sessions",
                str(tmp_path),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    wrong = subprocess.run(
        [sys.executable, "-m", "pi_condense.cli", "proxy", "--recovery", "maybe"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert busy.returncode == 2
    assert busy.stderr.startswith(f"pi-condense: cannot listen on 127.0.0.1:{port}: ")
    assert "Traceback" not in busy.stderr
    assert wrong.returncode == 2
    assert (
        wrong.stderr.strip() == 'pi-condense: --recovery must be "proxy" or "client", not \'maybe\''
    )


def test_importing_the_package_loads_no_http_stack(tmp_path: Path) -> None:
    code = (
        "import sys, pi_condense, pi_condense.proxy, pi_condense.proxy.sessions;"
        "print(sorted(m for m in ('starlette', 'uvicorn', 'httpx') if m in sys.modules))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert proc.stdout.strip() == "[]", proc.stderr


def test_a_client_gone_before_the_first_streamed_byte_leaves_its_conversation_evictable(
    tmp_path: Path,
) -> None:
    """A streamed request whose client hangs up while the proxy waits for the upstream's
    headers, on an ASGI 2.4 server (whose ``send`` raises at the status line, so the body is
    never iterated): its conversation is no longer busy, so later conversations beyond
    ``max_conversations`` close it, and it comes back."""
    history = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "a long answer please"},
    ]
    gone = session_id_for_name("gone")
    with LoopbackLLMServer() as upstream:
        options = settings(upstream, tmp_path, max_conversations=2)
        with RunningProxy(options, wrap=asgi_2_4) as px:
            conversations = px.app.state.proxy.conversations
            # headers after 0.5 s, then 40 chunks 0.1 s apart
            stream = openai_stream([f"w{n} " for n in range(40)], gap=0.1)
            upstream.queue(Reply(chunks=stream.chunks, delay=0.5))
            body = json.dumps({"model": "m", "stream": True, "messages": history}).encode()
            head = (
                "POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\n"
                "content-type: application/json\r\nx-pi-condense-session: gone\r\n"
                f"authorization: Bearer {KEY}\r\ncontent-length: {len(body)}\r\n\r\n"
            )
            with socket.create_connection(("127.0.0.1", px.port), timeout=10) as raw:
                raw.sendall(head.encode() + body)
                deadline = time.monotonic() + 10
                while gone not in conversations:  # the proxy took the request in
                    assert time.monotonic() < deadline, "the request never reached the proxy"
                    time.sleep(0.01)
            # gone before a byte came back; wait until the proxy has seen the upstream's
            # headers and answered (into the void)
            deadline = time.monotonic() + 5
            while conversations[gone].busy and time.monotonic() < deadline:
                time.sleep(0.02)
            assert conversations[gone].busy == 0, "the conversation stays busy"
            deadline = time.monotonic() + 5
            while upstream.in_flight and time.monotonic() < deadline:
                time.sleep(0.02)
            assert upstream.in_flight == 0, "the upstream stream was left open"
            with httpx.Client(base_url=px.url, trust_env=False, timeout=10) as http:
                for name in ("one", "two", "three", "gone"):
                    upstream.queue(openai_response(f"ok {name}"))
                    got = http.post(
                        "/v1/chat/completions",
                        json={"model": "m", "messages": history},
                        headers={"x-pi-condense-session": name},
                    )
                    assert got.status_code == 200, got.text
                    assert f"ok {name}" in got.text
                    assert len(conversations) <= 2
                    if name == "three":  # closed to make room for the newer ones
                        assert gone not in conversations
    assert got.headers["x-pi-condense-session-id"] == gone
    assert find_session(tmp_path, gone) is not None


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_responses_request_continuing_a_stored_response_goes_on_unchanged(
    tmp_path: Path, stream: bool
) -> None:
    """With ``previous_response_id`` the provider holds the conversation: the proxy has only
    its newest items, so it condenses nothing, adds no tools and keeps no session."""
    big = output("big.txt") * 20
    items = [
        {"type": "function_call_output", "call_id": "call_1", "output": big},
        {"role": "user", "content": "and now?"},
    ]
    reply = responses_reply(Text("fine"))
    with LoopbackLLMServer() as upstream, RunningProxy(settings(upstream, tmp_path)) as px:
        upstream.queue(responses_stream(reply) if stream else reply)
        api = openai.OpenAI(base_url=px.url + "/v1", api_key=KEY, max_retries=0)
        raw = api.responses.with_raw_response.create(
            model="m",
            previous_response_id="resp_0",
            input=items,  # type: ignore[arg-type]
            tools=[{"type": "function", "name": "read", "parameters": {}, "strict": False}],
            stream=stream,
        )
        got = raw.parse()
        text = (
            "".join(e.delta for e in got if getattr(e, "type", "") == "response.output_text.delta")
            if stream
            else got.output_text
        )  # type: ignore[union-attr]
    assert text == "fine"
    (request,) = upstream.requests
    assert request.body["previous_response_id"] == "resp_0"
    assert request.body["input"] == items
    assert [t["name"] for t in request.body["tools"]] == ["read"]
    assert "x-pi-condense-session-id" not in raw.headers
    assert list(tmp_path.iterdir()) == []

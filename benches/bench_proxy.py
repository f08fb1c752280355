"""The proxy's added cost per request, and its time to the first streamed byte.

Three servers in this process, each uvicorn on 127.0.0.1: an upstream (Starlette) that reads
the request and answers a small Chat Completions reply (or its stream); a pass-through proxy
on the same stack (Starlette + httpx, the body forwarded as it came); and ``pi-condense
proxy`` (:func:`pi_condense.proxy.create_app`). A client (httpx) posts the same requests to
both proxies: a conversation of 1k or 10k messages (100 / 1,000 prompts of four ``read``
calls with ~1.5 KB outputs and an answer, in the bench_hook_adapters shape), and every round
one more call and its result, as an agent's next request.

Pairs (subject / baseline), all measured in the same run:

- ``proxy-1k`` / ``proxy-10k`` (the table's x1 / x10): a request through ``pi-condense
  proxy`` / the same request through the pass-through proxy. The timer (process CPU time in
  the gate) counts the client, the proxy and the upstream: the ratio is the whole exchange's
  cost with condensing over without it.
- ``proxy-ttfb`` (x1 / x10): a streamed request (the whole history again) until its first
  byte reaches the client through ``pi-condense proxy`` / straight from the upstream.

The conversation's session is made the quick way before timing (as bench_hook_adapters
does: a first call with a whole 10k history is a late join, which summarizes the backlog
before it answers and is measured by the ``late-join`` pair and ``bench_proxy_join.py``), at
the path the proxy finds it by (the conversation's fingerprint).

Run: ``pytest benches/bench_proxy.py --benchmark-only`` (the table is printed at the end;
the gate adds ``--benchmark-timer=time.process_time``).
"""

from __future__ import annotations

import json
import socket
import threading
import time
import warnings
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, Callable

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from bench_hook_adapters import _output
from pi_condense.adapters.openai_chat import OpenAIChatCodec
from pi_condense.js import time as jstime
from pi_condense.live import LiveDriver
from pi_condense.proxy import ProxySettings, conversation_key, create_app, session_id_for_key

Record = Callable[[Any, str, str, int], None]

ROUNDS = 5
TURNS = 4
SIZES = {1: 100, 10: 1_000}  # the table's x -> prompts (1k / 10k messages)
NAMES = {1: "1k", 10: "10k"}
REPLY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "bench",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
    ],
}
CHUNKS = [
    b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"b","choices":'
    b'[{"index":0,"delta":{"content":"ok"},"finish_reason":null}]}\n\n',
    b"data: [DONE]\n\n",
]


def _call(p: int, t: int) -> list[dict[str, Any]]:
    call = {
        "id": f"call_{p}_{t}",
        "type": "function",
        "function": {"name": "read", "arguments": json.dumps({"path": f"f{p}_{t}.txt"})},
    }
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call_{p}_{t}", "content": _output(p, t)},
    ]


def history(prompts: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": "be careful"}]
    for p in range(prompts):
        out.append({"role": "user", "content": f"task {p}"})
        for t in range(TURNS):
            out += _call(p, t)
        out.append({"role": "assistant", "content": f"done {p}"})
    out.append({"role": "user", "content": f"task {prompts}"})
    return out


# ------------------------------------------------------------------------------ servers


RECEIVED = {"bytes": 0}  # the size of the upstream's latest request


async def _upstream(request: Request) -> Response:
    body = await request.body()
    RECEIVED["bytes"] = len(body)
    tail = body[-65536:]  # "stream" follows the messages (then only the tools)
    if b'"stream":true' in tail or b'"stream": true' in tail:

        async def events() -> AsyncIterator[bytes]:
            for chunk in CHUNKS:
                yield chunk

        return StreamingResponse(events(), media_type="text/event-stream")
    return Response(json.dumps(REPLY), media_type="application/json")


def _pass_through(target: str) -> Starlette:
    """A proxy that forwards the body as it came: the same stack, no condensing."""
    state: dict[str, httpx.AsyncClient] = {}

    async def forward(request: Request) -> Response:
        client = state.setdefault("client", httpx.AsyncClient(trust_env=False, timeout=600))
        body = await request.body()
        headers = {"content-type": "application/json", "authorization": "Bearer x"}
        upstream = await client.send(
            client.build_request("POST", target, content=body, headers=headers), stream=True
        )

        async def events() -> AsyncIterator[bytes]:
            try:
                async for chunk in upstream.aiter_bytes():
                    yield chunk
            finally:
                await upstream.aclose()

        return StreamingResponse(events(), status_code=upstream.status_code)

    return Starlette(routes=[Route("/v1/chat/completions", forward, methods=["POST"])])


class Served:
    """An ASGI app served by uvicorn on 127.0.0.1 in a thread."""

    def __init__(self, app: Any) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "a server did not start"
            time.sleep(0.01)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)
        self.sock.close()


class Setup:
    """The three servers, a client, and a conversation of ``prompts`` prompts whose session
    the pi-condense proxy already holds."""

    def __init__(self, prompts: int, directory: Path, scale: int) -> None:
        self.scale = scale
        self.items = history(prompts)
        self.next = prompts
        sessions = directory / "sessions"
        sessions.mkdir(parents=True)
        self._seed(sessions)
        self.upstream = Served(
            Starlette(routes=[Route("/v1/chat/completions", _upstream, methods=["POST"])])
        )
        target = self.upstream.url + "/v1/chat/completions"
        self.plain = Served(_pass_through(target))
        settings = ProxySettings(openai_base_url=self.upstream.url + "/v1", sessions_dir=sessions)
        self.proxy = Served(create_app(settings))
        self.client = httpx.Client(trust_env=False, timeout=600)
        headers = {"content-type": "application/json", "authorization": "Bearer x"}
        self.headers = headers
        # the proxy's first call: it opens the session and renders it once
        assert self.post(self.proxy.url, self.body()).status_code == 200

    def _seed(self, sessions: Path) -> None:
        first_user = next(m for m in self.items if m["role"] == "user")
        key = conversation_key("openai-chat", [self.items[0]], first_user, [])
        session_id = session_id_for_key(key)
        stamp = jstime.to_iso_string(jstime.now_ms()).replace(":", "-").replace(".", "-")
        path = sessions / f"{stamp}_{session_id}.jsonl"
        from pi_condense.session import SessionFile

        SessionFile.create(path, str(sessions), session_id=session_id)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            store: LiveDriver[Any] = LiveDriver(
                OpenAIChatCodec(), session=path, config={"enabled": False}
            )
            store.condense(self.items)
            store.close()
            warm: LiveDriver[Any] = LiveDriver(OpenAIChatCodec(), session=path)
            warm.flush()
            warm.close()

    def body(self, stream: bool = False) -> bytes:
        data: dict[str, Any] = {"model": "m", "messages": self.items}
        if stream:
            data["stream"] = True
        return json.dumps(data).encode()

    def grow(self) -> tuple[tuple[bytes], dict[str, Any]]:
        """The next request: one more call and its result."""
        self.items += _call(self.next, 0)
        self.next += 1
        return (self.body(),), {}

    def post(self, url: str, body: bytes) -> httpx.Response:
        return self.client.post(url + "/v1/chat/completions", content=body, headers=self.headers)

    def first_byte(self, url: str, body: bytes) -> bytes:
        request = self.client.build_request(
            "POST", url + "/v1/chat/completions", content=body, headers=self.headers
        )
        response = self.client.send(request, stream=True)
        try:
            return next(response.iter_raw())
        finally:
            response.close()

    def stop(self) -> None:
        self.client.close()
        for served in (self.proxy, self.plain, self.upstream):
            served.stop()


@pytest.fixture(scope="module", params=list(SIZES), ids=[f"x{n}" for n in SIZES])
def setup(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Setup]:
    scale = int(request.param)
    made = Setup(SIZES[scale], tmp_path_factory.mktemp(f"proxy-x{scale}"), scale)
    yield made
    made.stop()


def _exchange(setup: Setup, url: str, record: Record, benchmark: Any, role: str) -> None:
    def send(body: bytes) -> httpx.Response:
        return setup.post(url, body)

    response = benchmark.pedantic(send, setup=setup.grow, rounds=ROUNDS)
    record(benchmark, f"proxy-{NAMES[setup.scale]}", role, setup.scale)
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["content"] == "ok"


def test_pass_through_request(benchmark: Any, record: Record, setup: Setup) -> None:
    _exchange(setup, setup.plain.url, record, benchmark, "baseline")


def test_proxy_request(benchmark: Any, record: Record, setup: Setup) -> None:
    _exchange(setup, setup.proxy.url, record, benchmark, "subject")
    # condensed: the upstream got far less than the client sent
    assert RECEIVED["bytes"] < 0.5 * len(setup.body())


def _first_byte(setup: Setup, url: str, record: Record, benchmark: Any, role: str) -> None:
    body = setup.body(stream=True)
    first = benchmark.pedantic(setup.first_byte, args=(url, body), rounds=ROUNDS * 2)
    record(benchmark, "proxy-ttfb", role, setup.scale)
    assert first.startswith(b"data: ")


def test_upstream_first_byte(benchmark: Any, record: Record, setup: Setup) -> None:
    _first_byte(setup, setup.upstream.url, record, benchmark, "baseline")


def test_proxy_first_byte(benchmark: Any, record: Record, setup: Setup) -> None:
    _first_byte(setup, setup.proxy.url, record, benchmark, "subject")

"""Loopback servers speaking the OpenAI chat completions and Anthropic messages wire protocols.

A `LoopbackLLMServer` listens on 127.0.0.1 (an ephemeral port), records every request and
answers each with a scripted `Reply`: a status, headers and either a plain body or a list of
timed chunks (server-sent events). Builders produce the two protocols' replies:

- OpenAI: `openai_stream` (SSE `data: {chunk}` lines, a final `finish_reason`, the usage chunk
  of `stream_options.include_usage`, `data: [DONE]`), `openai_response`, `openai_error`;
- Anthropic: `anthropic_stream` (`message_start`, `content_block_*`, `message_delta`,
  `message_stop` events), `anthropic_message`, `anthropic_error`.

Servers are bounded: every wait is cut short when the server stops, and a server stops by
itself after `max_lifetime` seconds. Use them as context managers.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Optional

__all__ = [
    "LoopbackLLMServer",
    "Recorded",
    "Reply",
    "anthropic_error",
    "anthropic_message",
    "anthropic_stream",
    "anthropic_stream_error",
    "clear_proxy_env",
    "openai_error",
    "openai_response",
    "openai_stream",
]


@dataclass
class Reply:
    """One scripted answer.

    `chunks` are `(delay_seconds, bytes)` pairs written in order after the headers (a stream);
    otherwise `body` is written at once. `delay` holds the response before the headers;
    `hold` keeps the connection open (silent) after the last chunk.
    """

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    chunks: Sequence[tuple[float, bytes]] = ()
    delay: float = 0.0
    hold: float = 0.0


@dataclass
class Recorded:
    """A request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


Responder = Callable[[Recorded], Reply]

PROXY_ENV = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


def clear_proxy_env(monkeypatch: Any) -> None:
    """Drop proxy settings (pytest `monkeypatch`) so SDK clients reach 127.0.0.1 directly."""
    for name in PROXY_ENV:
        monkeypatch.delenv(name, raising=False)


class LoopbackLLMServer:
    """A threaded HTTP server on 127.0.0.1 answering with scripted replies.

    Replies come from `queue(...)` (first in, first out), else from `responder(request)`,
    else a 500. With `gate = n`, each request is held until `n` requests are in flight at
    once (or `gate_timeout` passes), so concurrency limits show up deterministically in
    `max_in_flight`.
    """

    def __init__(
        self,
        responder: Optional[Responder] = None,
        *,
        max_lifetime: float = 60.0,
        gate: int = 0,
        gate_timeout: float = 3.0,
    ) -> None:
        self.responder = responder
        self.requests: list[Recorded] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.gate = gate
        self.gate_timeout = gate_timeout
        self._replies: deque[Reply] = deque()
        self._lock = threading.Condition()
        self._stop = threading.Event()
        self._max_lifetime = max_lifetime
        self._httpd: Optional[ThreadingHTTPServer] = None
        self._thread: Optional[threading.Thread] = None
        self._timer: Optional[threading.Timer] = None

    # ----------------------------------------------------------------- lifecycle

    def __enter__(self) -> LoopbackLLMServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """The base URL, e.g. `http://127.0.0.1:51234`."""
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> None:
        server = self

        class Handler(_Handler):
            owner = server

        httpd = _Httpd(("127.0.0.1", 0), Handler)
        httpd.daemon_threads = True
        httpd.block_on_close = False
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        self._timer = threading.Timer(self._max_lifetime, self.stop)
        self._timer.daemon = True
        self._timer.start()

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            self._lock.notify_all()
        if self._timer is not None:
            self._timer.cancel()
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    # ----------------------------------------------------------------- scripting

    def queue(self, *replies: Reply) -> None:
        """Answer the next requests with `replies`, in order."""
        with self._lock:
            self._replies.extend(replies)

    def bodies(self) -> list[Any]:
        """The JSON bodies of the requests received so far."""
        with self._lock:
            return [request.body for request in self.requests]

    def sleep(self, seconds: float) -> bool:
        """Wait `seconds` unless the server stops first; True when it is stopping."""
        return self._stop.wait(seconds) if seconds > 0 else self._stop.is_set()

    def _next_reply(self, request: Recorded) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self._replies:
                return self._replies.popleft()
        if self.responder is not None:
            return self.responder(request)
        return openai_error(500, "no reply scripted", "server_error")

    def _enter(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self._lock.notify_all()
            if self.gate > 0:
                self._lock.wait_for(
                    lambda: self.in_flight >= self.gate or self._stop.is_set(),
                    timeout=self.gate_timeout,
                )

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1
            self._lock.notify_all()


class _Httpd(ThreadingHTTPServer):
    # many clients at once (a load test): the default backlog of 5 would reset connections
    request_queue_size = 256


class _Handler(BaseHTTPRequestHandler):
    owner: LoopbackLLMServer
    protocol_version = "HTTP/1.0"  # one response per connection; streams end at close

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        request = Recorded(
            method="POST",
            path=self.path,
            headers={key.lower(): value for key, value in self.headers.items()},
            body=body,
        )
        server = self.owner
        server._enter()
        try:
            reply = server._next_reply(request)
            self._send(reply)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test)
        finally:
            server._leave()

    def _send(self, reply: Reply) -> None:
        server = self.owner
        if server.sleep(reply.delay):
            return
        self.send_response(reply.status)
        headers = dict(reply.headers)
        if reply.chunks:
            headers.setdefault("Content-Type", "text/event-stream")
        else:
            headers.setdefault("Content-Type", "application/json")
            headers["Content-Length"] = str(len(reply.body))
        headers.setdefault("Connection", "close")
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        if not reply.chunks:
            self.wfile.write(reply.body)
            self.wfile.flush()
            return
        for delay, data in reply.chunks:
            if server.sleep(delay):
                return
            self.wfile.write(data)
            self.wfile.flush()
        server.sleep(reply.hold)


# --------------------------------------------------------------------------- OpenAI


def _sse_data(payload: Any) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def openai_stream(
    texts: Sequence[str],
    *,
    model: str = "test-model",
    finish_reason: Optional[str] = "stop",
    usage: Optional[dict[str, Any]] = None,
    reasoning: Sequence[str] = (),
    gap: float = 0.0,
    done: bool = True,
    hold: float = 0.0,
    first_delay: float = 0.0,
) -> Reply:
    """A streamed chat completion: a role chunk, `reasoning` deltas (`reasoning_content`),
    one chunk per text, a `finish_reason` chunk, the usage chunk (`choices: []`) when
    `usage` is given, then `data: [DONE]`. `gap` seconds pass before each chunk."""
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": model}

    def chunk(delta: dict[str, Any], finish: Optional[str] = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return _sse_data({**base, "choices": [choice]})

    parts: list[bytes] = [chunk({"role": "assistant", "content": ""})]
    parts += [chunk({"reasoning_content": text}) for text in reasoning]
    parts += [chunk({"content": text}) for text in texts]
    if finish_reason is not None:
        parts.append(chunk({}, finish_reason))
    if usage is not None:
        parts.append(_sse_data({**base, "choices": [], "usage": usage}))
    if done:
        parts.append(b"data: [DONE]\n\n")
    chunks = [(first_delay if i == 0 else gap, part) for i, part in enumerate(parts)]
    return Reply(chunks=chunks, hold=hold)


def openai_response(
    text: Optional[str],
    *,
    model: str = "test-model",
    finish_reason: str = "stop",
    usage: Optional[dict[str, Any]] = None,
) -> Reply:
    """A non-streamed chat completion."""
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": finish_reason,
            }
        ],
    }
    if usage is not None:
        body["usage"] = usage
    return Reply(body=json.dumps(body).encode())


def openai_error(
    status: int,
    message: str,
    type: str = "invalid_request_error",
    *,
    code: Optional[str] = None,
    headers: Optional[dict[str, str]] = None,
) -> Reply:
    """An error response: `{"error": {"message", "type", "param", "code"}}`."""
    body = {"error": {"message": message, "type": type, "param": None, "code": code}}
    return Reply(status=status, headers=dict(headers or {}), body=json.dumps(body).encode())


# --------------------------------------------------------------------------- Anthropic


def _event(name: str, payload: dict[str, Any]) -> bytes:
    return f"event: {name}\n".encode() + _sse_data(payload)


def anthropic_stream(
    texts: Sequence[str],
    *,
    model: str = "test-model",
    stop_reason: Optional[str] = "end_turn",
    input_tokens: int = 0,
    output_tokens: int = 0,
    cache_read: int = 0,
    cache_write: int = 0,
    thinking: Sequence[str] = (),
    gap: float = 0.0,
    hold: float = 0.0,
    first_delay: float = 0.0,
    stop: bool = True,
) -> Reply:
    """A streamed message: `message_start` (input and cache usage), an optional thinking
    block, one text block with a delta per text, `message_delta` (stop reason, output
    tokens), `message_stop`."""
    start_usage = {
        "input_tokens": input_tokens,
        "output_tokens": 1,
        "cache_creation_input_tokens": cache_write,
        "cache_read_input_tokens": cache_read,
    }
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": start_usage,
    }
    parts = [_event("message_start", {"type": "message_start", "message": message})]
    index = 0
    if thinking:
        parts.append(
            _event(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "thinking", "thinking": "", "signature": ""},
                },
            )
        )
        for text in thinking:
            delta = {"type": "thinking_delta", "thinking": text}
            parts.append(
                _event(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            )
        parts.append(_event("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    parts.append(
        _event(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "text", "text": ""},
            },
        )
    )
    parts.append(_event("ping", {"type": "ping"}))
    for text in texts:
        delta = {"type": "text_delta", "text": text}
        parts.append(
            _event(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
        )
    parts.append(_event("content_block_stop", {"type": "content_block_stop", "index": index}))
    if stop_reason is not None:
        parts.append(
            _event(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                    "usage": {"output_tokens": output_tokens},
                },
            )
        )
    if stop:
        parts.append(_event("message_stop", {"type": "message_stop"}))
    chunks = [(first_delay if i == 0 else gap, part) for i, part in enumerate(parts)]
    return Reply(chunks=chunks, hold=hold)


def anthropic_message(
    text: str,
    *,
    model: str = "test-model",
    stop_reason: str = "end_turn",
    input_tokens: int = 0,
    output_tokens: int = 0,
) -> Reply:
    """A non-streamed message."""
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    }
    return Reply(body=json.dumps(body).encode())


def anthropic_error(
    status: int, type: str, message: str, *, headers: Optional[dict[str, str]] = None
) -> Reply:
    """An error response: `{"type": "error", "error": {"type", "message"}}`."""
    body = {"type": "error", "error": {"type": type, "message": message}}
    return Reply(status=status, headers=dict(headers or {}), body=json.dumps(body).encode())


def anthropic_stream_error(type: str, message: str, *, after: Optional[Reply] = None) -> Reply:
    """A 200 stream that fails with an `error` event after `after`'s first events."""
    error = _event("error", {"type": "error", "error": {"type": type, "message": message}})
    chunks = list(after.chunks[:2]) if after is not None else []
    return Reply(chunks=[*chunks, (0.0, error)])

"""The proxy's ASGI app (Starlette) and its forwarding with httpx: see :mod:`pi_condense.proxy`."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union, get_args

import anyio
import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from .._fs.atomic import write_atomic
from ..config import Config
from ..errors import CondenseError
from ..js import time as jstime
from ..live import JoinMode, LiveDriver
from ..session import SessionFile
from .sessions import (
    SESSION_HEADER,
    SESSION_ID_HEADER,
    conversation_key,
    default_sessions_dir,
    find_session,
    session_id_for_key,
    session_id_for_name,
)
from .wire import ANTHROPIC, CHAT, RESPONSES, Call, SseSplitter, Stream, Wire

__all__ = ["ProxySettings", "create_app"]

log = logging.getLogger("pi_condense.proxy")

RECOVERY_MODES = ("proxy", "client")
JOIN_MODES: tuple[str, ...] = get_args(JoinMode)

_HOP = {
    "host",
    "content-length",
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "upgrade",
    "trailer",
    "proxy-authorization",
    "proxy-connection",
    "accept-encoding",
}
_DROP_BACK = {
    "content-length",
    "content-encoding",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "date",
    "server",
}


@dataclass
class ProxySettings:
    """What :func:`create_app` serves.

    ``openai_base_url`` / ``anthropic_base_url``: the upstream API roots the request paths
    after ``/v1`` are appended to (``https://api.openai.com/v1``, ``https://api.anthropic.com/v1``
    by default; any compatible server: ``http://localhost:8000/v1`` for vLLM, ...).
    ``sessions_dir``: where conversations are kept (see :mod:`pi_condense.proxy.sessions`).
    ``recovery``: ``"proxy"`` (the proxy offers the recovery tools and answers their calls
    itself, hidden from the client) or ``"client"`` (it adds no tools and passes every call
    on: for clients that load ``pi-condense mcp``). ``config``: a ``contextPrune`` dict or a
    :class:`~pi_condense.config.Config`; ``summarizer``: a spec or object (default offline).
    ``max_hidden_rounds``: recovery round-trips answered for one request at most.
    ``max_conversations``: live drivers (one worker thread each) kept open at most; the least
    recently used idle one is closed for a new one, and opened again from its session file
    when its conversation comes back. ``join``: what a conversation's first request does
    when it already holds whole earlier runs the proxy has no session for (a client started
    before the proxy, another sessions directory): ``"flush"`` (default) condenses that
    request, summarizing the backlog first; ``"defer"`` stores it and sends the request on
    as the client sent it, and the conversation's next request summarizes the backlog (see
    :class:`~pi_condense.live.LiveDriver`'s ``join``).
    """

    openai_base_url: str = "https://api.openai.com/v1"
    anthropic_base_url: str = "https://api.anthropic.com/v1"
    sessions_dir: Union[str, os.PathLike[str], None] = None
    recovery: str = "proxy"
    config: Union[Config, Mapping[str, Any], None] = None
    summarizer: Any = None
    max_hidden_rounds: int = 8
    max_conversations: int = 64
    join: JoinMode = "flush"
    timeout: float = 600.0
    cwd: str = field(default_factory=os.getcwd)

    def __post_init__(self) -> None:
        if self.recovery not in RECOVERY_MODES:
            raise ValueError(f"recovery must be one of {', '.join(RECOVERY_MODES)}")
        if self.join not in JOIN_MODES:
            raise ValueError(f"join must be one of {', '.join(JOIN_MODES)}")


class _BadRequest(Exception):
    pass


@dataclass
class _Hidden:
    """Recovery round-trips the client never saw: ``items`` went after the client's first
    ``after`` items, the last of which was ``last`` (JSON)."""

    after: int
    last: str
    items: list[Any]


class _Conversation:
    """One conversation: its driver, the hidden round-trips to splice back into the client's
    history, and a lock so its requests are condensed one at a time."""

    def __init__(self, wire: Wire, driver: LiveDriver[Any], sidecar: Path) -> None:
        self.wire = wire
        self.driver = driver
        self.lock = asyncio.Lock()
        self.sidecar = sidecar
        self.hidden: list[_Hidden] = []
        self.busy = 0  # requests under way
        if sidecar.exists():
            for row in json.loads(sidecar.read_text(encoding="utf-8")):
                self.hidden.append(_Hidden(int(row["after"]), str(row["last"]), row["items"]))

    def done(self) -> None:
        """A request of this conversation is over."""
        self.busy -= 1

    def spliced(self, items: list[Any]) -> list[Any]:
        """The client's history with the hidden round-trips back where they happened."""
        if not self.hidden:
            return items
        out: list[Any] = []
        at = 0
        for hidden in self.hidden:
            if hidden.after > len(items) or hidden.after < at:
                continue
            if _dump(items[hidden.after - 1]) != hidden.last:
                continue
            out.extend(items[at : hidden.after])
            out.extend(hidden.items)
            at = hidden.after
        out.extend(items[at:])
        return out

    def remember(self, history: list[Any], items: list[Any]) -> None:
        """Keep ``items``, a hidden round-trip after the client's ``history`` (as the client
        sent it: the positions are the client's)."""
        if not history:
            return
        after = len(history)
        self.hidden = [h for h in self.hidden if h.after != after]
        self.hidden.append(_Hidden(after, _dump(history[-1]), items))
        self.hidden.sort(key=lambda h: h.after)
        rows = [{"after": h.after, "last": h.last, "items": h.items} for h in self.hidden]
        data = json.dumps(rows, ensure_ascii=False).encode()
        write_atomic(self.sidecar, data, self.sidecar.with_name(self.sidecar.name + ".tmp"))


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _body_bytes(body: Any) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


class _Proxy:
    def __init__(self, settings: ProxySettings) -> None:
        self.settings = settings
        self.sessions = (
            Path(settings.sessions_dir)
            if settings.sessions_dir is not None
            else default_sessions_dir()
        )
        self.client: Optional[httpx.AsyncClient] = None
        self.conversations: dict[str, _Conversation] = {}
        self.opening = asyncio.Lock()

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        timeout = httpx.Timeout(self.settings.timeout, connect=30.0)
        self.client = httpx.AsyncClient(timeout=timeout, trust_env=False)

    async def stop(self) -> None:
        for conversation in list(self.conversations.values()):
            try:
                await conversation.driver.aclose()
            except Exception:
                log.exception("pi-condense proxy: closing a conversation failed")
        self.conversations.clear()
        if self.client is not None:
            await self.client.aclose()

    # ------------------------------------------------------------------ conversations

    def _session_id(
        self, wire: Wire, request: Request, body: dict[str, Any], history: list[Any]
    ) -> str:
        named = request.headers.get(SESSION_HEADER)
        if named:
            return session_id_for_name(named)
        tools = body.get("tools") or []
        system = wire.system(body, history)
        key = conversation_key(wire.name, system, wire.first_user(history), tools)
        return session_id_for_key(key)

    async def _conversation(self, wire: Wire, session_id: str) -> _Conversation:
        """The conversation of ``session_id``, marked busy (see :meth:`_Conversation.done`)."""
        async with self.opening:
            found = self.conversations.pop(session_id, None)
            if found is not None:
                if found.wire is not wire:
                    self.conversations[session_id] = found
                    raise _BadRequest(
                        f"session {session_id} is a {found.wire.name} conversation, not {wire.name}"
                    )
            else:
                await self._make_room()
                found = await asyncio.to_thread(self._open, wire, session_id)
            self.conversations[session_id] = found  # the most recently used last
            found.busy += 1
            return found

    async def _make_room(self) -> None:
        """Close the least recently used idle conversations beyond ``max_conversations`` (a
        closed one is opened again from its session file when it comes back)."""
        limit = max(1, self.settings.max_conversations)
        for session_id, conversation in list(self.conversations.items()):
            if len(self.conversations) < limit:
                return
            if conversation.busy or conversation.lock.locked():
                continue
            del self.conversations[session_id]
            try:
                await conversation.driver.aclose()
            except Exception:
                log.exception("pi-condense proxy: closing a conversation failed")

    def _open(self, wire: Wire, session_id: str) -> _Conversation:
        settings = self.settings
        path = find_session(self.sessions, session_id)
        if path is None:
            self.sessions.mkdir(parents=True, exist_ok=True)
            stamp = jstime.to_iso_string(jstime.now_ms()).replace(":", "-").replace(".", "-")
            path = self.sessions / f"{stamp}_{session_id}.jsonl"
            session = SessionFile.create(path, settings.cwd, session_id=session_id)
        else:
            session = SessionFile.load(path)
        driver: LiveDriver[Any] = LiveDriver(
            wire.codec(),
            session=session,
            config=settings.config,
            summarizer=settings.summarizer,
            cwd=settings.cwd,
            join=settings.join,
        )
        sidecar = path.with_name(f".{path.name}.pi-condense-proxy.json")
        return _Conversation(wire, driver, sidecar)

    # ------------------------------------------------------------------ requests

    async def handle(self, wire: Wire, request: Request) -> Response:
        try:
            raw = await request.body()
            body = json.loads(raw) if raw else None
        except ValueError as exc:
            return _error(wire, 400, "invalid_request_error", f"request body is not JSON: {exc}")
        if not isinstance(body, dict):
            return _error(wire, 400, "invalid_request_error", "request body must be a JSON object")
        history = wire.history(body)
        if history is None and wire.history_key not in body:
            return _error(
                wire, 400, "invalid_request_error", f"request body has no `{wire.history_key}`"
            )
        headers = _forward_headers(request)
        url = self._url(wire, request)
        conversation: Optional[_Conversation] = None
        send = body
        client_items: list[Any] = []
        if history is not None and wire.has_reply(history):
            try:
                session_id = self._session_id(wire, request, body, history)
                conversation = await self._conversation(wire, session_id)
            except _BadRequest as exc:
                return _error(wire, 400, "invalid_request_error", str(exc))
            except CondenseError as exc:
                log.warning("pi-condense proxy: passing a request on as it is: %s", exc)
            if conversation is not None:
                try:
                    async with conversation.lock:
                        client_items = conversation.spliced(history)
                        condensed = await conversation.driver.acondense(client_items)
                    send = self._request(wire, conversation, body, condensed)
                except CondenseError as exc:
                    log.warning("pi-condense proxy: passing a request on as it is: %s", exc)
                    conversation.done()
                    conversation = None
        extra = {}
        if conversation is not None:
            extra[SESSION_ID_HEADER] = conversation.driver.session.session_id
        recovery = self._recovery(wire, body, conversation)
        exchange = _Exchange(
            wire, url, headers, body, conversation, history or [], client_items, recovery, extra
        )
        if body.get("stream") is True:
            return await self._stream(exchange, send)
        try:
            return await self._whole(exchange, send)
        finally:
            exchange.done()

    async def relay(self, provider: str, path: str, request: Request) -> Response:
        """A request the proxy does not condense (token counting, the model list), sent on
        as it came and answered as the upstream answered."""
        assert self.client is not None
        base = (
            self.settings.anthropic_base_url
            if provider == "anthropic"
            else self.settings.openai_base_url
        )
        query = request.url.query
        url = base.rstrip("/") + path + (f"?{query}" if query else "")
        headers = _forward_headers(request)
        body = await request.body()
        if not body:
            headers.pop("content-type", None)
        try:
            upstream = await self.client.request(
                request.method, url, content=body or None, headers=headers
            )
        except httpx.HTTPError as exc:
            return _unreachable(ANTHROPIC if provider == "anthropic" else CHAT, url, exc)
        return Response(
            upstream.content,
            status_code=upstream.status_code,
            headers=_back_headers(upstream.headers),
        )

    def _url(self, wire: Wire, request: Request) -> str:
        base = (
            self.settings.anthropic_base_url
            if wire.provider == "anthropic"
            else self.settings.openai_base_url
        )
        query = request.url.query
        return base.rstrip("/") + wire.path + (f"?{query}" if query else "")

    def _request(
        self, wire: Wire, conversation: _Conversation, body: dict[str, Any], items: list[Any]
    ) -> dict[str, Any]:
        send = {**body, wire.history_key: items}
        if self.settings.recovery == "proxy":
            tools = list(body.get("tools") or [])
            have = {wire.tool_name(t) for t in tools}
            ours = [
                t
                for t in wire.tool_defs(conversation.driver.tools)
                if wire.tool_name(t) not in have
            ]
            if ours:
                send["tools"] = tools + ours
        return send

    def _recovery(
        self, wire: Wire, request_body: dict[str, Any], conversation: Optional[_Conversation]
    ) -> frozenset[str]:
        if conversation is None or self.settings.recovery != "proxy":
            return frozenset()
        client = {wire.tool_name(t) for t in request_body.get("tools") or []}
        return frozenset(n for n in conversation.driver.tools.names if n not in client)

    async def _answer(
        self, exchange: _Exchange, done: list[Any], reply: list[Any], calls: list[Call]
    ) -> dict[str, Any]:
        """Run the recovery calls of a reply; the next request upstream."""
        conversation = exchange.conversation
        assert conversation is not None
        async with conversation.lock:
            driver = conversation.driver
            texts = [
                await asyncio.to_thread(driver.execute, c.name, c.arguments, c.call_id)
                for c in calls
            ]
            done.extend(reply)
            done.extend(exchange.wire.results(calls, texts))
            conversation.remember(exchange.history, list(done))
            condensed = await driver.acondense(exchange.client_items + done)
        return self._request(exchange.wire, conversation, exchange.body, condensed)

    async def _whole(self, exchange: _Exchange, send: dict[str, Any]) -> Response:
        assert self.client is not None
        wire, url = exchange.wire, exchange.url
        done: list[Any] = []
        for _ in range(self.settings.max_hidden_rounds + 1):
            try:
                upstream = await self.client.post(
                    url, content=_body_bytes(send), headers=exchange.headers
                )
            except httpx.HTTPError as exc:
                return _unreachable(wire, url, exc)
            if upstream.status_code != 200 or not exchange.recovery:
                break
            try:
                reply, calls = wire.reply(upstream.json())
            except ValueError:
                break
            if not calls or not all(c.name in exchange.recovery for c in calls):
                break
            send = await self._answer(exchange, done, reply, calls)
        return Response(
            upstream.content,
            status_code=upstream.status_code,
            headers={**_back_headers(upstream.headers), **exchange.extra},
        )

    async def _stream(self, exchange: _Exchange, send: dict[str, Any]) -> Response:
        assert self.client is not None
        client = self.client
        wire, url, headers = exchange.wire, exchange.url, exchange.headers
        try:
            upstream = await client.send(
                client.build_request("POST", url, content=_body_bytes(send), headers=headers),
                stream=True,
            )
        except httpx.HTTPError as exc:
            exchange.done()
            return _unreachable(wire, url, exc)
        if upstream.status_code != 200:
            try:
                content = await upstream.aread()
            finally:
                await upstream.aclose()
                exchange.done()
            return Response(
                content,
                status_code=upstream.status_code,
                headers={**_back_headers(upstream.headers), **exchange.extra},
            )
        rounds = self.settings.max_hidden_rounds

        async def events() -> AsyncGenerator[bytes, None]:
            current = upstream
            stream: Optional[Stream] = None
            done: list[Any] = []
            try:
                if not exchange.recovery:
                    async for chunk in current.aiter_bytes():
                        yield chunk
                    return
                for round_ in range(rounds + 1):
                    stream = wire.stream(exchange.recovery, stream)
                    splitter = SseSplitter()
                    blind = False  # an event the watch cannot read: the rest goes on as is
                    async for chunk in current.aiter_bytes():
                        if blind:
                            yield chunk
                            continue
                        for event in splitter.feed(chunk):
                            if blind:
                                yield event.raw
                                continue
                            try:
                                outs = stream.feed(event)
                            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                                log.warning(
                                    "pi-condense proxy: a stream event it cannot read (%s): "
                                    "the rest of the stream goes on unwatched",
                                    type(exc).__name__,
                                )
                                blind = True
                                outs = [*stream.held, event.raw]
                                stream.held, stream.holding = [], False
                            for out in outs:
                                yield out
                    rest = splitter.rest()
                    await current.aclose()
                    if blind:
                        if rest:
                            yield rest
                        return
                    if not stream.holding or not stream.hidden() or round_ == rounds:
                        for held in stream.held:
                            yield held
                        if rest:
                            yield rest
                        return
                    following = await self._answer(exchange, done, stream.items(), stream.calls)
                    current = await client.send(
                        client.build_request(
                            "POST", url, content=_body_bytes(following), headers=headers
                        ),
                        stream=True,
                    )
                    if current.status_code != 200:
                        # the client's stream has begun: the error goes on as an event
                        yield _error_event(wire, current.status_code, await current.aread())
                        return
            finally:
                await current.aclose()
                exchange.done()

        body = events()

        async def finish() -> None:
            try:
                await body.aclose()  # runs its own finally when it had begun
                await upstream.aclose()
            finally:
                exchange.done()

        return _Streamed(
            body, finish, headers={**_back_headers(upstream.headers), **exchange.extra}
        )


class _Streamed(StreamingResponse):
    """A stream whose ``finish`` runs however the response ends: a client gone before the
    first byte may mean the body is never iterated (an ASGI 2.4 server's ``send`` raises at
    the status line), and then its own ``finally`` never runs."""

    def __init__(
        self,
        body: AsyncIterator[bytes],
        finish: Callable[[], Awaitable[None]],
        headers: dict[str, str],
    ) -> None:
        super().__init__(body, status_code=200, headers=headers)
        self.finish = finish

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            with anyio.CancelScope(shield=True):
                await self.finish()


@dataclass
class _Exchange:
    """One client request on its way: where it goes, what the client sent, its
    conversation (None: passed on as it is) and the recovery tools the proxy answers."""

    wire: Wire
    url: str
    headers: dict[str, str]
    body: dict[str, Any]
    conversation: Optional[_Conversation]
    history: list[Any]  # as the client sent it
    client_items: list[Any]  # with the earlier hidden round-trips put back
    recovery: frozenset[str]
    extra: dict[str, str]
    finished: bool = False

    def done(self) -> None:
        """The exchange is over (once): its conversation may be closed to make room."""
        if not self.finished and self.conversation is not None:
            self.conversation.done()
        self.finished = True


def _unreachable(wire: Wire, url: str, exc: Exception) -> JSONResponse:
    return _error(wire, 502, "api_error", f"upstream {url}: {type(exc).__name__}: {exc}")


def _error_event(wire: Wire, status: int, content: bytes) -> bytes:
    try:
        data = json.loads(content)
    except ValueError:
        data = wire.error(status, "api_error", content.decode("utf-8", "replace"))
    if wire.provider == "anthropic":
        return b"event: error\ndata: " + _body_bytes(data) + b"\n\n"
    return b"data: " + _body_bytes(data) + b"\n\n"


def _forward_headers(request: Request) -> dict[str, str]:
    headers = {
        k: v
        for k, v in request.headers.items()
        if k.lower() not in _HOP and not k.lower().startswith("x-pi-condense")
    }
    headers["accept-encoding"] = "identity"
    headers["content-type"] = "application/json"
    return headers


def _back_headers(headers: httpx.Headers) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() not in _DROP_BACK}


def _error(wire: Optional[Wire], status: int, kind: str, message: str) -> JSONResponse:
    body = (wire or CHAT).error(status, kind, message)
    return JSONResponse(body, status_code=status)


def create_app(settings: Optional[ProxySettings] = None, **options: Any) -> Starlette:
    """The proxy as an ASGI app: ``POST /v1/chat/completions``, ``POST /v1/responses`` and
    ``POST /v1/messages`` condensed; ``POST /v1/messages/count_tokens`` and ``GET
    /v1/models`` passed on as they are (``options`` are :class:`ProxySettings` fields)."""
    if settings is None:
        settings = ProxySettings(**options)
    elif options:
        raise TypeError("pass settings or options, not both")
    proxy = _Proxy(settings)

    def route(wire: Wire) -> Any:
        async def endpoint(request: Request) -> Response:
            return await proxy.handle(wire, request)

        return endpoint

    async def count_tokens(request: Request) -> Response:
        return await proxy.relay("anthropic", "/messages/count_tokens", request)

    async def models(request: Request) -> Response:
        # an Anthropic client sends its version header; anything else lists OpenAI's models
        anthropic = "anthropic-version" in request.headers
        return await proxy.relay("anthropic" if anthropic else "openai", "/models", request)

    async def unknown(request: Request) -> Response:
        return _error(
            None,
            404,
            "not_found_error",
            f"pi-condense proxy: no route {request.method} {request.url.path} (it serves POST "
            "/v1/chat/completions, /v1/responses and /v1/messages)",
        )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await proxy.start()
        try:
            yield
        finally:
            await proxy.stop()

    routes = [
        Route("/v1/chat/completions", route(CHAT), methods=["POST"]),
        Route("/v1/responses", route(RESPONSES), methods=["POST"]),
        Route("/v1/messages", route(ANTHROPIC), methods=["POST"]),
        Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/{path:path}", unknown, methods=["GET", "POST", "PUT", "DELETE", "PATCH"]),
    ]

    async def refused(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 500)
        detail = getattr(exc, "detail", "")
        message = f"pi-condense proxy: {request.method} {request.url.path}: {detail}"
        return _error(
            None, status, "not_found_error" if status == 404 else "invalid_request_error", message
        )

    handlers = {404: refused, 405: refused}
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers=handlers)
    app.state.proxy = proxy
    return app

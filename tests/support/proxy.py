"""The proxy (`pi_condense.proxy.create_app`) served by uvicorn on 127.0.0.1 (an ephemeral
port) in a thread of the test process, stopped when the block ends."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Callable, Optional

import anyio
import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pi_condense.proxy import ProxySettings, create_app


class RunningProxy:
    """``with RunningProxy(settings) as proxy: proxy.url``. ``app.state.proxy`` is the
    proxy's state (its conversations); ``wrap`` puts an ASGI layer around the app."""

    def __init__(
        self, settings: ProxySettings, wrap: Optional[Callable[[ASGIApp], ASGIApp]] = None
    ) -> None:
        self.app = create_app(settings)
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self.port = int(self._sock.getsockname()[1])
        config = uvicorn.Config(
            wrap(self.app) if wrap else self.app, log_level="warning", access_log=False
        )
        self.server = uvicorn.Server(config)
        self._thread: Optional[threading.Thread] = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> RunningProxy:
        self._thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "the proxy did not start"
            assert self._thread.is_alive(), "the proxy stopped at start"
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=15)
        self._sock.close()


def asgi_2_4(app: ASGIApp) -> ASGIApp:
    """uvicorn as an ASGI 2.4 server: ``send`` raises OSError once the client has gone (the
    spec's rule; uvicorn 0.55 declares 2.3 and drops such messages silently), and the scope
    says 2.4, so Starlette streams without listening for the disconnect itself."""

    async def served(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        gone = False

        async def checked(message: Message) -> None:
            nonlocal gone
            if not gone:
                # a gone client's disconnect is there at once; a live one's wait is cut
                with anyio.move_on_after(0):
                    gone = (await receive())["type"] == "http.disconnect"
            if gone:
                raise OSError("the client has gone")
            await send(message)

        asgi = {**scope.get("asgi", {}), "spec_version": "2.4"}
        await app({**scope, "asgi": asgi}, receive, checked)

    return served


@contextmanager
def proxy_process(args: list[str], env: dict[str, str]) -> Iterator[str]:
    """``pi-condense proxy --port 0 ARGS`` as a process of its own; yields its URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pi_condense.cli", "proxy", "--port", "0", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert "listening on http://127.0.0.1:" in line, line + proc.stderr.read()
        yield line.rsplit(" ", 1)[1].strip()
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
        assert proc.returncode in (0, -15), err

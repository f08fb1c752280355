"""The proxy (`pi_condense.proxy.create_app`) served by uvicorn on 127.0.0.1 (an ephemeral
port) in a thread of the test process, stopped when the block ends."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any, Optional

import uvicorn

from pi_condense.proxy import ProxySettings, create_app


class RunningProxy:
    """``with RunningProxy(settings) as proxy: proxy.url``. ``app.state.proxy`` is the
    proxy's state (its conversations)."""

    def __init__(self, settings: ProxySettings) -> None:
        self.app = create_app(settings)
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self.port = int(self._sock.getsockname()[1])
        config = uvicorn.Config(self.app, log_level="warning", access_log=False)
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

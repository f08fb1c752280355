"""A Condenser process on a session file (for the multi-process reliability tests).

``python _condenser_proc.py SESSION GO_FILE`` waits for GO_FILE, then flushes until nothing
is pending, retrying while another condenser holds the flush; the summarizer is the offline
default one, slowed down so two processes' flushes overlap.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import Callable

from pi_condense import Condenser
from pi_condense.config import Config
from pi_condense.summarize.base import Completion, CompletionRequest, ModelRef
from pi_condense.summarize.factory import make_summarizer


class Slow:
    def __init__(self) -> None:
        self.inner = make_summarizer("default")

    @property
    def model(self) -> ModelRef:
        return self.inner.model

    async def complete(
        self, request: CompletionRequest, on_event: Callable[[], None]
    ) -> Completion:
        await asyncio.sleep(0.4)
        return await self.inner.complete(request, on_event)


async def main() -> None:
    session, go = sys.argv[1], sys.argv[2]
    config = Config.from_settings_dict({"enabled": True, "minBatchChars": 0})
    condenser = Condenser.open(session, config, summarizer=Slow())
    condenser.session_start()
    while not os.path.exists(go):
        time.sleep(0.005)
    for _ in range(200):
        result = await condenser.flush_now()
        if result.reason != "already-flushing":
            break
        await asyncio.sleep(0.05)
    print(result.reason, flush=True)


if __name__ == "__main__":
    asyncio.run(main())

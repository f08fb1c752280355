"""Pausing Python's cyclic garbage collector around bulk work."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off for the block (resumed only if it was running).

    For blocks that build many long-lived containers (a session's parsed entries): left on,
    the collector walks them again and again while they are being built, for nothing.
    """
    running = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if running:
            gc.enable()

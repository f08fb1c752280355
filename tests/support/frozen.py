"""Generated histories of tool turns for the frozen-prefix render tests."""

from __future__ import annotations

from typing import Any

from pi_condense._core import RenderCache
from pi_condense.state import PrunerState
from support.builders import assistant, call, cfg, example, result, user

CONFIG = cfg()


def turn(i: int) -> list[dict[str, Any]]:
    """A user message, a tool call and its result (fresh str objects for the ids)."""
    ts = 1000 + 10 * i
    tool_id = "".join(["call-", str(i)])
    return [
        user(ts, f"step {i}"),
        assistant(ts + 1, call(tool_id, "read", path=f"/f{i}")),
        result("".join(["call-", str(i)]), ts + 2, f"output {i} " * 20),
    ]


def history(turns: int) -> tuple[list[dict[str, Any]], PrunerState]:
    messages, state = example()
    state.render_cache = RenderCache(resume=False)
    for i in range(turns):
        messages += turn(i)
    return messages, state

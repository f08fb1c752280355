"""A child process for ``test_render_no_python_runs``: one native render while Python code
that frees or changes the rendered list's items is armed to run.

Run as ``python _render_hostile_child.py SCENARIO TRIGGER [unarmed]`` (under
``PYTHONMALLOC=debug``, so a read of freed memory is a crash or garbage, not the old bytes by
luck). It prints one JSON line:
the rendered messages (as JSON sees them), the pruned flag, the character counts, the
diagnostics, and how many times the armed code ran.

Scenarios: ``finalizer`` (an object in a reference cycle whose ``__del__`` empties the list and
frees its messages: it runs if the cyclic collector runs during the render), ``thread`` (the
finalizer only lets a host thread take the GIL, which then empties the list), ``hooks``
(subclasses whose ``__eq__``, ``__hash__``, ``__float__``, ``__index__`` empty the list).
``unarmed`` renders the same values with nothing armed (the expected output).
Triggers: ``surrogate`` (an id holding a lone surrogate), ``bigint`` (a timestamp beyond the
double range), ``both``.
"""

from __future__ import annotations

import gc
import json
import sys
import threading
from typing import Any

from pi_condense import _core
from pi_condense.config import Config
from pi_condense.render import render_options
from pi_condense.state import PrunerState

FIRED = [0]
ARMED = [False]
MESSAGES: list[Any] = []


def _free_everything() -> None:
    """Empty the list being rendered and reuse the freed memory."""
    if not ARMED[0]:
        return
    ARMED[0] = False
    FIRED[0] += 1
    MESSAGES.clear()
    junk = [{"k": "J" * 40 + str(i), "n": [i]} for i in range(20000)]
    del junk


class HostileInt(int):
    def __float__(self) -> float:
        _free_everything()
        return float(int(self))

    def __index__(self) -> int:
        _free_everything()
        return int(self)


class HostileFloat(float):
    def __float__(self) -> float:
        _free_everything()
        return float.__float__(self)


class HostileKey(str):
    def __eq__(self, other: object) -> bool:
        _free_everything()
        return str.__eq__(self, other)

    def __hash__(self) -> int:
        _free_everything()
        return 7  # every such key collides with the others


class Collider(str):
    """A key that collides with ``"content"`` and ``"arguments"``: a hash lookup of either
    (or a copy of the dict) would compare it with its ``__eq__``."""

    def __eq__(self, other: object) -> bool:
        _free_everything()
        return str.__eq__(self, other)

    def __hash__(self) -> int:
        return hash(str(self)[1:])


def session(n: int, hooks: bool) -> list[Any]:
    """``n`` answered calls, every fourth an error; every string is a fresh object (freed
    with its message)."""
    messages: list[Any] = []
    for i in range(n):
        cid = "call-" + "q" * 30 + str(i)
        ts: Any = HostileInt(1000 + i) if hooks else 1000 + i
        assistant: dict[Any, Any] = {
            "role": "assistant",
            "content": [
                {
                    "type": "toolCall",
                    "id": "".join(cid),
                    "name": "read",
                    "arguments": {"path": "p" * 600 + str(i)},
                },
                {"type": "thinking", "thinking": "t" * 10},
            ],
            "timestamp": HostileFloat(1001.0 + i) if hooks else 1001 + i,
        }
        if hooks:
            assistant[HostileKey("extra")] = "x"
            assistant[HostileKey("more")] = "y"
            # First in their dicts: a lookup of the real key meets them first.
            assistant = {Collider("_content"): "c", **assistant}
            call = assistant["content"][0]
            assistant["content"][0] = {Collider("_arguments"): "a", **call}
        messages += [
            {"role": "user", "content": "u" + str(i), "timestamp": ts},
            assistant,
            {
                "role": "toolResult",
                "toolCallId": (cid + "!")[:-1],
                "toolName": "read",
                "content": [{"type": "text", "text": "r" * 50 + str(i)}],
                "isError": i % 4 == 1,  # errored calls: their arguments are purged
                "timestamp": 1002 + i,
            },
        ]
    return messages


def answered_call(call_id: str, timestamp: Any) -> list[Any]:
    """An assistant's tool call and its result, both at ``timestamp``."""
    return [
        {
            "role": "assistant",
            "content": [{"type": "toolCall", "id": call_id, "name": "read", "arguments": {}}],
            "timestamp": timestamp,
        },
        {
            "role": "toolResult",
            "toolCallId": call_id,
            "toolName": "read",
            "content": [{"type": "text", "text": "z\udfff"}],
            "isError": False,
            "timestamp": timestamp,
        },
    ]


def hostile_values(trigger: str) -> list[Any]:
    """Messages whose reading used to build and clear a Python exception."""
    out: list[Any] = []
    if trigger in ("surrogate", "both"):
        out += answered_call("lone-\ud800-" + "s" * 20, 5)
    if trigger in ("bigint", "both"):
        out += answered_call("big-" + "b" * 20, 10**400)
        out.append({"role": "user", "content": "n", "timestamp": -(10**330)})
    return out


def stubbing_state() -> PrunerState:
    """A state with one summarized call: the render stubs it, so it copies and measures."""
    state = PrunerState()
    state.add_batch(
        [
            {
                "toolCallId": "call-" + "q" * 30 + "3",
                "toolName": "read",
                "args": {},
                "resultText": "raw",
                "isError": False,
                "turnIndex": 0,
                "timestamp": 1001 + 3,
                "resultTimestamp": 1002 + 3,
            }
        ]
    )
    return state


class Finalizer:
    """Lives in a reference cycle: its ``__del__`` runs only if the cyclic collector runs."""

    def __init__(self, action: Any) -> None:
        self.action = action
        self.cycle = self

    def __del__(self) -> None:
        self.action()


def arm_thread() -> Any:
    """A host thread that empties the list once the finalizer lets it take the GIL."""
    go = threading.Event()
    done = threading.Event()

    def host() -> None:
        go.wait()
        _free_everything()
        done.set()

    threading.Thread(target=host, daemon=True).start()

    def let_it_run() -> None:
        if ARMED[0]:
            go.set()
            done.wait(5)

    return let_it_run


def main() -> None:
    scenario, trigger = sys.argv[1], sys.argv[2]
    armed = sys.argv[3:] != ["unarmed"]
    messages = session(40, hooks=scenario == "hooks")
    messages[4:4] = hostile_values(trigger)
    MESSAGES[:] = messages
    del messages
    index = stubbing_state().index
    options = render_options(Config())
    if armed and scenario in ("finalizer", "thread"):
        action = _free_everything if scenario == "finalizer" else arm_thread()
        gc.disable()
        Finalizer(action)  # unreachable at once: only the cyclic collector can free it
        gc.set_threshold(1)  # any new container starts a collection, if the collector runs
        gc.enable()
    ARMED[0] = armed
    out = _core.render(MESSAGES, index, options, None)
    ARMED[0] = False
    gc.set_threshold(700)
    gc.collect()  # the finalizer runs now (disarmed) if it did not during the render
    print(
        json.dumps(
            {
                "messages": out.messages,
                "pruned": out.pruned,
                "chars": [out.before_chars, out.after_chars],
                "diagnostics": [list(d) for d in out.diagnostics],
                "fired": FIRED[0],
            },
            default=str,
        )
    )


if __name__ == "__main__":
    main()

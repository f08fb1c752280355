"""Message, state and config builders shared by the test modules.

Render-style messages carry the fields Pi writes (``api``, ``provider``, ``details``...);
:func:`tool_use`, :func:`final` and :func:`plain_result` build the bare shapes the chain
tests use. :func:`example` is the worked example of spec 04 section 8.
"""

from __future__ import annotations

from typing import Any, Optional

from pi_condense.config import Config
from pi_condense.js import json as jsjson
from pi_condense.render import RenderResult
from pi_condense.state import PrunerState

# ---------------------------------------------------------------------------- messages


def user(ts: float, text: str = "go") -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": ts}


def assistant(ts: float, *blocks: dict[str, Any]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": list(blocks),
        "api": "anthropic",
        "provider": "anthropic",
        "model": "x",
        "usage": {},
        "stopReason": "toolUse" if any(b["type"] == "toolCall" for b in blocks) else "stop",
        "timestamp": ts,
    }


def call(tool_call_id: str, name: str = "bash", **args: Any) -> dict[str, Any]:
    return {"type": "toolCall", "id": tool_call_id, "name": name, "arguments": args}


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def thinking(t: str = "deep thoughts") -> dict[str, Any]:
    return {"type": "thinking", "thinking": t, "thinkingSignature": "sig123"}


def result(
    tool_call_id: str,
    ts: Optional[float],
    body: str = "output",
    *,
    name: str = "bash",
    **extra: Any,
) -> dict[str, Any]:
    msg: dict[str, Any] = {
        "role": "toolResult",
        "toolCallId": tool_call_id,
        "toolName": name,
        "content": [{"type": "text", "text": body}],
        "details": {"exitCode": 0},
        "isError": False,
    }
    if ts is not None:
        msg["timestamp"] = ts
    msg.update(extra)
    return msg


def summary_msg(ts: float, refs: list[dict[str, Any]], body: str = "summary") -> dict[str, Any]:
    return {
        "role": "custom",
        "customType": "context-prune-summary",
        "content": body,
        "display": False,
        "details": {"toolCallRefs": refs, "toolNames": ["bash"], "turnIndex": 0, "timestamp": ts},
        "timestamp": ts,
    }


def record(
    tool_call_id: str,
    ts: Optional[float],
    *,
    name: str = "bash",
    args: Optional[dict[str, Any]] = None,
    **extra: Any,
) -> dict[str, Any]:
    r: dict[str, Any] = {
        "toolCallId": tool_call_id,
        "toolName": name,
        "args": args if args is not None else {"cmd": "ls"},
        "resultText": "raw",
        "isError": False,
        "turnIndex": 0,
        "timestamp": 1,
    }
    if ts is not None:
        r["resultTimestamp"] = ts
    r.update(extra)
    return r


def state_with(
    *records: dict[str, Any], refs: tuple[tuple[str, str, Any], ...] = ()
) -> PrunerState:
    state = PrunerState()
    if records:
        state.add_batch(list(records))
    if refs:
        rs = []
        for short, tool_call_id, ts in refs:
            r: dict[str, Any] = {"shortId": short, "toolCallId": tool_call_id}
            if ts is not None:
                r["resultTimestamp"] = ts
            rs.append(r)
        state.register_refs(rs)
    return state


def chain_entry(
    block_id: str, start: float, final: Optional[float], compressed_at: float, **extra: Any
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "blockId": block_id,
        "startUserTimestamp": start,
        "droppedToolCallIds": [],
        "finalAssistantTimestamp": final,
        "toolRefs": [],
        "compressedAt": compressed_at,
    }
    entry.update(extra)
    return entry


def cfg(**settings: Any) -> Config:
    return Config.from_settings_dict({"enabled": True, **settings})


NO_CHAIN = cfg(chainCompression={"enabled": False})
NO_PURGE = {"purgeErrors": {"enabled": False}}


def dumps(value: Any) -> str:
    return jsjson.dumps(value)


def utf16_len(s: str) -> int:
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def assert_same_render(res: RenderResult, expected: RenderResult) -> None:
    """``res`` has the messages, flags, sizes and diagnostics of ``expected``."""
    assert res.messages == expected.messages
    assert (res.pruned, res.before_chars, res.after_chars, res.diagnostics) == (
        expected.pruned,
        expected.before_chars,
        expected.after_chars,
        expected.diagnostics,
    )


def assert_sizes(before: list[Any], res: RenderResult) -> None:
    assert res.before_chars == utf16_len(dumps(before))
    assert res.after_chars == utf16_len(dumps(res.messages))


# ---------------------------------------------------------------------------- bare chain shapes


def tool_use(ts: int, *blocks: dict[str, Any]) -> dict[str, Any]:
    """A bare assistant message that asks for tools (only role, content, timestamp, stopReason)."""
    return {"role": "assistant", "content": list(blocks), "timestamp": ts, "stopReason": "toolUse"}


def final(ts: int, text: str = "done") -> dict[str, Any]:
    """A bare text-only assistant answer (the message that closes a chain)."""
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "timestamp": ts,
        "stopReason": "stop",
    }


def plain_result(tool_id: str, ts: Any, out: str = "ok", name: str = "bash") -> dict[str, Any]:
    """A bare toolResult message (no ``details``), timestamp as given."""
    return {
        "role": "toolResult",
        "toolCallId": tool_id,
        "toolName": name,
        "content": [{"type": "text", "text": out}],
        "isError": False,
        "timestamp": ts,
    }


# ---------------------------------------------------------------------------- worked example


def example() -> tuple[list[dict[str, Any]], PrunerState]:
    messages = [
        user(100),
        assistant(200, call("tc1")),
        result("tc1", 300, "x" * 5000),
        assistant(400, thinking(), text("done")),
    ]
    state = state_with(record("tc1", 300), refs=(("t1", "tc1", 300),))
    state.register_summary_body(["tc1@300"], "S")
    state.register_chain(
        chain_entry(
            "b1",
            100,
            400,
            9000,
            droppedToolCallIds=["tc1"],
            toolRefs=["t1"],
            droppedOccurrenceKeys=["tc1@300"],
        )
    )
    return messages, state


def protected_chain(body: str = "SKILL BODY\nline 2") -> tuple[list[dict[str, Any]], PrunerState]:
    """A chain ``b2`` (100-400) whose message relocates the protected ``read`` output of
    message 2 (``body``); the other result ``x`` is summarized (``S``)."""
    messages = [
        user(100),
        assistant(200, call("p1", "read"), call("x")),
        result("p1", 210, body, name="read"),
        result("x", 220),
        assistant(400, text("done")),
    ]
    state = PrunerState()
    state.register_summary_body(["x@220"], "S")
    state.register_chain(
        chain_entry(
            "b2",
            100,
            400,
            5,
            droppedToolCallIds=["p1", "x"],
            toolRefs=["t7"],
            protectedToolCallIds=["p1"],
            droppedOccurrenceKeys=["x@220"],
        )
    )
    return messages, state


# ---------------------------------------------------------------------------- lone surrogates

_SWAP = {c: 0xE000 + (c - 0xD800) for c in range(0xD800, 0xE000)}
_UNSWAP = {v: k for k, v in _SWAP.items()}


def swapped(value: Any) -> Any:
    """``value`` with every lone surrogate replaced by its private-use stand-in."""
    if isinstance(value, str):
        return value.translate(_SWAP)
    if isinstance(value, list):
        return [swapped(v) for v in value]
    if isinstance(value, dict):
        return {swapped(k): swapped(v) for k, v in value.items()}
    return value


def unswapped(value: Any) -> Any:
    if isinstance(value, str):
        return value.translate(_UNSWAP)
    if isinstance(value, list):
        return [unswapped(v) for v in value]
    if isinstance(value, dict):
        return {unswapped(k): unswapped(v) for k, v in value.items()}
    return value

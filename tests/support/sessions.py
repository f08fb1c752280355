"""Small synthetic Pi sessions for the reliability tests (built here, no shared material)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

T0 = 1735689600000
USAGE = {"input": 10, "output": 10, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 20}


def session_lines(prompts: int = 4, result_chars: int = 3000, sid: str = "rel-1") -> list[Any]:
    """Header, then per prompt: user text, a read call, its big result, a final answer."""
    header = {"type": "session", "version": 3, "id": sid, "cwd": "/w"}
    header["timestamp"] = "2025-01-01T00:00:00.000Z"
    lines: list[dict[str, Any]] = [header]
    parent = None
    for tick, message in enumerate(_messages(prompts, result_chars), start=1):
        entry_id = f"e{tick}"
        message["timestamp"] = T0 + tick * 1000
        lines.append(
            {
                "type": "message",
                "id": entry_id,
                "parentId": parent,
                "timestamp": f"2025-01-01T00:{tick // 60 % 60:02d}:{tick % 60:02d}.000Z",
                "message": message,
            }
        )
        parent = entry_id
    return lines


def _messages(prompts: int, result_chars: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in range(prompts):
        out.append({"role": "user", "content": [{"type": "text", "text": f"task {p}"}]})
        call = {
            "type": "toolCall",
            "id": f"call{p}",
            "name": "read",
            "arguments": {"path": f"f{p}"},
        }
        out.append(
            {"role": "assistant", "content": [call], "usage": USAGE, "stopReason": "toolUse"}
        )
        body = "\n".join(f"line {i} of file {p}: " + "x" * 40 for i in range(result_chars // 60))
        out.append(
            {
                "role": "toolResult",
                "toolCallId": f"call{p}",
                "toolName": "read",
                "content": [{"type": "text", "text": body}],
                "isError": False,
            }
        )
        text = [{"type": "text", "text": f"done {p}"}]
        out.append({"role": "assistant", "content": text, "usage": USAGE, "stopReason": "stop"})
    return out


def write_session(path: Path, prompts: int = 4, result_chars: int = 3000) -> Path:
    path.write_text(
        "".join(json.dumps(x) + "\n" for x in session_lines(prompts, result_chars)),
        encoding="utf-8",
    )
    return path


def small_session(path: Path, prompts: int = 6, result_chars: int = 3000) -> Path:
    """A v3 session: per prompt, one read call with a big result and a final answer."""
    t0 = 1735689600000
    header = {"type": "session", "version": 3, "id": "small-1", "cwd": "/w"}
    header["timestamp"] = "2025-01-01T00:00:00.000Z"
    lines: list[dict[str, Any]] = [header]
    parent = None
    tick = 0

    def add(message: dict[str, Any]) -> None:
        nonlocal parent, tick
        tick += 1
        entry_id = f"e{tick}"
        message["timestamp"] = t0 + tick * 1000
        lines.append(
            {
                "type": "message",
                "id": entry_id,
                "parentId": parent,
                "timestamp": f"2025-01-01T00:{tick // 60:02d}:{tick % 60:02d}.000Z",
                "message": message,
            }
        )
        parent = entry_id

    usage = {"input": 10, "output": 10, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 20}
    for p in range(prompts):
        add({"role": "user", "content": [{"type": "text", "text": f"task {p}"}]})
        call = {
            "type": "toolCall",
            "id": f"call{p}",
            "name": "read",
            "arguments": {"path": f"f{p}"},
        }
        add({"role": "assistant", "content": [call], "usage": usage, "stopReason": "toolUse"})
        body = "\n".join(f"line {i} of file {p}: " + "x" * 40 for i in range(result_chars // 60))
        add(
            {
                "role": "toolResult",
                "toolCallId": f"call{p}",
                "toolName": "read",
                "content": [{"type": "text", "text": body}],
                "isError": False,
            }
        )
        text = [{"type": "text", "text": f"done {p}"}]
        add({"role": "assistant", "content": text, "usage": usage, "stopReason": "stop"})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path

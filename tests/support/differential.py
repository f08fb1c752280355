"""Generated raw Pi sessions for the differential test against the TypeScript reference.

A session is a pure function of its seed: prompts, tool turns with reused provider ids,
repeated outputs (dedup), image results, errored calls (some with arguments holding strings
over 200 chars, nested in objects and arrays: the 2.11.3 purge), non-pruner ``custom_message``
entries (2.10.0 chain anchors: some open a turn of their own, without a user prompt), re-reads
of protected paths (2.10.3 supersession: default globs, a Windows-style path naming the same
file, calls that pass the path as ``input`` or ``args``), compactions (a cold prompt cache) and
final replies, written as Pi writes a session file. Seeds below 2000 give the sessions of the
generator before protected re-reads and compactions (the recorded seeds 7-9 and 1000).
"""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path
from typing import Any

__all__ = ["PROTECTED_PATHS", "write_raw_session"]

PROTECTED_PATHS = (
    ".pi/gauntlet-overrides.md",
    "doc\\gauntlet-overrides.md",
    "doc/gauntlet-overrides.md",
    "/home/u/.agents/skills/release/SKILL.md",
)
"""Paths the generator re-reads; the first three match the default ``protectedPaths`` (the
second and third are one file), the fourth too (``**/skills/**/*.md``)."""

_WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "error",
    "ok",
    "file",
    "line",
    "value",
    "build",
    "test",
    "pass",
    "fail",
    "note",
]


def _text(rng: random.Random, chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < chars:
        line = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 12)))
        out.append(line)
        size += len(line) + 1
    return "\n".join(out)


def _long_args(rng: random.Random) -> dict[str, Any]:
    """Arguments of a failed write: strings around the 200-char line, nested, astral chars."""
    return {
        "path": f"src/out{rng.randint(1, 9)}.py",
        "content": _text(rng, rng.choice([150, 199, 400, 900])),
        "edits": [
            {"old": _text(rng, rng.randint(10, 300)), "new": "\U0001f600" * rng.randint(90, 110)}
            for _ in range(rng.randint(0, 2))
        ],
        "flags": [True, None, rng.randint(0, 9)],
    }


def _iso(second: int) -> str:
    minutes, seconds = divmod(second, 60)
    hours, minutes = divmod(minutes, 60)
    return f"2026-03-01T{hours:02d}:{minutes:02d}:{seconds:02d}.000Z"


_SURROGATE_MIMES = ("image/p\ud800ng", "image/p\ufffdng", "image/\udc00jpeg", "image/x\ud83d")


def _with_lone_surrogates(lines: list[dict[str, Any]]) -> None:
    """Hostile text from the messages' own fields: every successful ``read`` returns a
    screenshot typed with a lone surrogate (or U+FFFD, with the same image as the one before
    it), other tool names end in one, ids too, and paths start with one."""
    images = 0
    for line in lines:
        message = line.get("message") or {}
        if message.get("role") == "toolResult":
            if message.get("toolName") == "read" and not message.get("isError"):
                message["content"] = [
                    {"type": "text", "text": "Read image file"},
                    {
                        "type": "image",
                        "data": "iVBORw0KGgo" + "A" * ((images // 2) % 2),
                        "mimeType": _SURROGATE_MIMES[images % len(_SURROGATE_MIMES)],
                    },
                ]
                images += 1
            if message.get("toolName") != "read":
                message["toolName"] += "\ud801"
            message["toolCallId"] += "\udc01"
        if message.get("role") == "assistant":
            for block in message["content"]:
                if block.get("type") != "toolCall":
                    continue
                if block["name"] != "read":
                    block["name"] += "\ud801"
                block["id"] += "\udc01"
                for member in ("arguments", "input", "args"):
                    if isinstance(block.get(member), dict) and "path" in block[member]:
                        block[member]["path"] = "\udfff" + block[member]["path"]


def write_raw_session(path: Path, seed: int, *, surrogates: bool = False) -> Path:
    """Write the raw session of ``seed`` to ``path`` and return it; ``surrogates`` puts lone
    surrogates in image types, tool names, ids and paths (``_with_lone_surrogates``)."""
    rng = random.Random(seed)
    supersession = seed >= 2000
    lines: list[dict[str, Any]] = [
        {
            "type": "session",
            "version": 3,
            "id": f"diff-{seed}",
            "timestamp": _iso(0),
            "cwd": "/work/project",
        }
    ]
    state = {"n": 0, "parent": None, "ms": 1_770_000_000_000 + seed * 1_000_000, "input": 2000}

    def add(entry: dict[str, Any]) -> None:
        state["n"] += 1
        entry_id = f"{state['n']:08x}"
        lines.append(
            {**entry, "id": entry_id, "parentId": state["parent"], "timestamp": _iso(state["n"])}
        )
        state["parent"] = entry_id

    def stamp() -> int:
        state["ms"] += rng.randint(500, 5000)
        return int(state["ms"])

    def assistant(content: list[Any], stop: str) -> dict[str, Any]:
        state["input"] += rng.randint(500, 4000)
        return {
            "role": "assistant",
            "content": content,
            "api": "oracle-fake",
            "provider": "oracle",
            "model": "oracle-fake-model",
            "usage": {
                "input": state["input"],
                "output": 100,
                "cacheRead": 0,
                "cacheWrite": 0,
                "totalTokens": state["input"] + 100,
                "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
            },
            "stopReason": stop,
            "timestamp": stamp(),
        }

    repeated = _text(rng, 1500)
    png = base64.b64encode(bytes(rng.randrange(256) for _ in range(120))).decode()
    unique = 0
    for prompt in range(rng.randint(3, 6) + (3 if supersession else 0)):
        if prompt == 0 or rng.random() < 0.6:
            add(
                {
                    "type": "message",
                    "message": {
                        "role": "user",
                        "content": [{"type": "text", "text": f"task {prompt}: {_text(rng, 60)}"}],
                        "timestamp": stamp(),
                    },
                }
            )
        if prompt > 0 and rng.random() < 0.6:
            # After a user prompt it is passed over; alone it opens the turn's chain.
            add(
                {
                    "type": "custom_message",
                    "customType": rng.choice(["gauntlet-gate", "gauntlet-gate", "note"]),
                    "content": "go on",
                    "display": True,
                }
            )
        for _turn in range(rng.randint(1, 4)):
            calls = []
            for _ in range(rng.randint(1, 3)):
                unique += 1
                call_id = (
                    rng.choice(["call_1", "call_2"])
                    if rng.random() < 0.3
                    else f"toolu_{seed}_{unique:03d}"
                )
                if any(c["id"] == call_id for c in calls):
                    call_id = f"toolu_{seed}_{unique:03d}"
                name = rng.choice(["read", "bash", "grep"])
                args: dict[str, Any] = (
                    {"path": f"src/file{rng.randint(1, 9)}.py"}
                    if name == "read"
                    else {"command": f"{name} {_text(rng, 20)}"}
                )
                block: dict[str, Any] = {"type": "toolCall", "id": call_id, "name": name}
                if supersession and name == "read" and rng.random() < 0.4:
                    args = {"path": rng.choice(PROTECTED_PATHS)}
                    # The reference reads `input ?? args ?? arguments`.
                    field = rng.choice(["arguments", "arguments", "input", "args"])
                    if field != "arguments":
                        block[field] = args
                        args = {"path": "src/elsewhere.py"}
                block["arguments"] = args
                calls.append(block)
            add({"type": "message", "message": assistant(calls, "toolUse")})
            for call in calls:
                content: list[Any]
                is_error = rng.random() < 0.1
                roll = rng.random()
                if is_error:
                    content = [{"type": "text", "text": f"Error: {_text(rng, 80)}"}]
                    if rng.random() < 0.6:
                        call["arguments"] = _long_args(rng)
                elif roll < 0.15 and call["name"] == "read":
                    data = png if rng.random() < 0.5 else png[::-1]
                    content = [
                        {"type": "text", "text": "Read image file [image/png]"},
                        {"type": "image", "data": data, "mimeType": "image/png"},
                    ]
                elif roll < 0.3:
                    content = [{"type": "text", "text": repeated}]
                else:
                    content = [{"type": "text", "text": _text(rng, rng.randint(200, 4000))}]
                message = {
                    "role": "toolResult",
                    "toolCallId": call["id"],
                    "toolName": call["name"],
                    "content": content,
                    "isError": is_error,
                    "timestamp": stamp(),
                }
                add({"type": "message", "message": message})
        add(
            {
                "type": "message",
                "message": assistant([{"type": "text", "text": f"done {prompt}"}], "stop"),
            }
        )
        if supersession and prompt > 0 and rng.random() < 0.25:
            # Keeps the latest entries: reads before it may stay in context after it.
            kept = f"{max(1, state['n'] - rng.randint(6, 30)):08x}"
            add(
                {
                    "type": "compaction",
                    "summary": f"compacted after task {prompt}",
                    "firstKeptEntryId": kept,
                    "tokensBefore": int(state["input"]),
                }
            )
    if surrogates:
        _with_lone_surrogates(lines)
    path.write_text("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines))
    return path

"""Generated render cases (histories with barriers, chains and tool calls) and their settings."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from pi_condense.config import Config
from pi_condense.keys import occ_key
from pi_condense.state import PrunerState

SETTINGS = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


TOOLS = ("bash", "read", "edit", "context_tree_query")


@dataclass
class Case:
    """A generated context, the branch entries its state is rebuilt from, and a config."""

    messages: list[Any]
    entries: list[dict[str, Any]]
    config: Config
    notes: list[str] = field(default_factory=list)

    @property
    def state(self) -> PrunerState:
        return PrunerState.from_branch(self.entries)


@dataclass
class _Builder:
    messages: list[Any] = field(default_factory=list)
    entries: list[dict[str, Any]] = field(default_factory=list)
    ts: int = 1_000
    next_id: int = 0
    next_ref: int = 0
    next_block: int = 0

    def tick(self) -> int:
        self.ts += 10
        return self.ts


def _text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def _assistant(ts: int, blocks: list[dict[str, Any]]) -> dict[str, Any]:
    calls = any(b["type"] == "toolCall" for b in blocks)
    return {
        "role": "assistant",
        "content": blocks,
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": "claude",
        "usage": {"input": 1, "output": 1},
        "stopReason": "toolUse" if calls else "stop",
        "timestamp": ts,
    }


def _barrier(kind: str, ts: int) -> dict[str, Any]:
    if kind == "user":
        return {"role": "user", "content": [_text("interrupt")], "timestamp": ts}
    if kind == "bash":
        return {
            "role": "bashExecution",
            "command": "ls",
            "output": "a\nb",
            "exitCode": 0,
            "cancelled": False,
            "truncated": False,
            "timestamp": ts,
        }
    return {
        "role": "custom",
        "customType": "note",
        "content": "foreign",
        "display": True,
        "timestamp": ts,
    }


@st.composite
def cases(draw: st.DrawFn, *, quiet: bool = False) -> Case:
    """A session; ``quiet`` ones give render nothing to do (no state, no errors, no damage, no
    protected path read again)."""
    b = _Builder()
    reuse_ids = draw(st.booleans())
    chain_spans: list[tuple[int, int, list[str], list[str], list[str]]] = []
    for _ in range(draw(st.integers(1, 6))):
        start = b.tick()
        b.messages.append({"role": "user", "content": [_text("do it")], "timestamp": start})
        chain_ids: list[str] = []
        chain_keys: list[str] = []
        chain_refs: list[str] = []
        for _ in range(draw(st.integers(0, 3))):
            calls = []
            count = draw(st.integers(1, 3))
            if reuse_ids:
                # Ids repeat across responses, never within one (providers number per response).
                pool = draw(st.permutations(range(4)))[:count]
                ids = [f"call_{n}" for n in pool]
            else:
                ids = [f"toolu_{b.next_id + n}" for n in range(1, count + 1)]
                b.next_id += count
            for tool_call_id in ids:
                name = draw(st.sampled_from(TOOLS))
                size = draw(st.sampled_from((5, 40, 700)))
                # A quiet session reads no protected path (a re-read would be superseded;
                # no tool is protected by name either).
                paths = ("src/a.ts",) if quiet else ("src/a.ts", "docs/skills/x/SKILL.md")
                path = draw(st.sampled_from(paths))
                args = {"path": path, "command": "x" * size}
                calls.append((tool_call_id, name, args))
            blocks = [{"type": "toolCall", "id": i, "name": n, "arguments": a} for i, n, a in calls]
            if draw(st.booleans()):
                blocks.insert(0, {"type": "thinking", "thinking": "hmm", "thinkingSignature": "s"})
            b.messages.append(_assistant(b.tick(), blocks))
            if not quiet and draw(st.integers(0, 9)) == 0:
                b.messages.append(
                    _barrier(draw(st.sampled_from(("user", "bash", "custom"))), b.tick())
                )
            batch: list[tuple[dict[str, Any], dict[str, Any]]] = []
            for tool_call_id, name, args in calls:
                if not quiet and draw(st.integers(0, 14)) == 0:
                    continue  # the result never came
                errored = not quiet and draw(st.integers(0, 4)) == 0
                result: dict[str, Any] = {
                    "role": "toolResult",
                    "toolCallId": tool_call_id,
                    "toolName": name,
                    "content": [
                        _text(f"output of {tool_call_id} " + "y" * draw(st.integers(0, 50)))
                    ],
                    "details": {"exitCode": 1 if errored else 0},
                    "isError": errored,
                    "timestamp": b.tick(),
                }
                b.messages.append(result)
                if not quiet and draw(st.integers(0, 19)) == 0:
                    b.messages.append(copy.deepcopy(result))  # a duplicated result
                chain_ids.append(tool_call_id)
                if not quiet and draw(st.integers(0, 2)) > 0:
                    record = {
                        "toolCallId": tool_call_id,
                        "toolName": name,
                        "args": args,
                        "resultText": result["content"][0]["text"],
                        "isError": errored,
                        "turnIndex": 0,
                        "timestamp": result["timestamp"],
                        "resultTimestamp": result["timestamp"],
                    }
                    batch.append((record, result))
            if batch:
                refs = []
                for record, _ in batch:
                    b.next_ref += 1
                    refs.append(
                        {
                            "shortId": f"t{b.next_ref}",
                            "toolCallId": record["toolCallId"],
                            "resultTimestamp": record["resultTimestamp"],
                        }
                    )
                    chain_keys.append(occ_key(record["toolCallId"], record["resultTimestamp"]))
                    chain_refs.append(f"t{b.next_ref}")
                body = "\n".join(f"- `{r['shortId']}` done" for r in refs)
                details = {
                    "toolCallRefs": refs,
                    "toolNames": [r["toolName"] for r, _ in batch],
                    "turnIndex": 0,
                    "timestamp": batch[0][0]["timestamp"],
                }
                summary_ts = b.tick()
                b.entries.append(
                    {
                        "type": "custom_message",
                        "customType": "context-prune-summary",
                        "content": body,
                        "display": False,
                        "details": details,
                    }
                )
                b.entries.append(
                    {
                        "type": "custom",
                        "customType": "context-prune-index",
                        "data": {"toolCalls": [r for r, _ in batch]},
                    }
                )
                b.messages.append(
                    {
                        "role": "custom",
                        "customType": "context-prune-summary",
                        "content": body,
                        "display": False,
                        "details": details,
                        "timestamp": summary_ts,
                    }
                )
        if draw(st.integers(0, 4)) > 0:
            final = b.tick()
            blocks = [_text("done")]
            if draw(st.booleans()):
                blocks.insert(0, {"type": "thinking", "thinking": "so", "thinkingSignature": "s"})
            b.messages.append(_assistant(final, blocks))
            chain_spans.append((start, final, chain_ids, chain_keys, chain_refs))
    if not quiet:
        for start, final, ids, keys, chain_refs in chain_spans:
            if draw(st.booleans()):
                continue
            b.next_block += 1
            stale = draw(st.integers(0, 9)) == 0
            data: dict[str, Any] = {
                "blockId": f"b{b.next_block}",
                "startUserTimestamp": start,
                "droppedToolCallIds": list(dict.fromkeys(ids)),
                "finalAssistantTimestamp": final + 1 if stale else final,
                "toolRefs": chain_refs,
                "compressedAt": 10**12 + b.next_block,
            }
            if draw(st.booleans()):
                data["rangeSummaryText"] = f"range {b.next_block}: {', '.join(chain_refs) or '-'}"
            if keys:
                data["droppedOccurrenceKeys"] = keys
            b.entries.append({"type": "custom", "customType": "context-prune-chain", "data": data})
    settings_block = {
        "enabled": True,
        "recoveryGraceTurns": draw(st.integers(0, 3)),
        "protectedTools": [] if quiet else draw(st.sampled_from(([], ["edit"]))),
        "purgeErrors": {
            "enabled": draw(st.booleans()),
            "cooldownTurns": draw(st.integers(1, 3)),
            # A purge marker is about 50 chars: it is never purged again (idempotence).
            "minArgChars": draw(st.sampled_from((100, 500))),
        },
        "chainCompression": {
            "enabled": draw(st.booleans()),
            "stripFinalAssistantThinking": draw(st.booleans()),
        },
    }
    return Case(b.messages, b.entries, Config.from_settings_dict(settings_block))

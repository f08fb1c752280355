"""Generated session entries (every kind, every parent link) for the session index tests."""

from __future__ import annotations

from typing import Any, Optional

from hypothesis import strategies as st

from pi_condense.js import time as jstime

HEADER = {"type": "session", "version": 3, "id": "s1", "timestamp": "2025-01-01T00:00:00.000Z"}


def _entry(kind: str, n: int, entry_id: str, parent: Optional[str]) -> dict[str, Any]:
    stamp = jstime.to_iso_string(1735689600000 + n * 1000)
    entry: dict[str, Any] = {"type": kind, "id": entry_id, "parentId": parent, "timestamp": stamp}
    if kind in ("user", "assistant"):
        entry["type"] = "message"
        message: dict[str, Any] = {"role": kind, "content": f"m{n}", "timestamp": n}
        if kind == "assistant":
            message.update(provider=f"p{n % 3}", model=f"model-{n}")
        entry["message"] = message
    elif kind == "custom_message":
        entry.update(customType="note", content=f"c{n}", display=True)
    elif kind == "branch_summary":
        entry.update(fromId="root", summary="" if n % 4 == 0 else f"b{n}")
    elif kind == "thinking_level_change":
        entry["thinkingLevel"] = ("low", "high")[n % 2]
    elif kind == "model_change":
        entry.update(provider="q", modelId=f"mc-{n}")
    elif kind == "compaction":
        entry.update(summary=f"s{n}", firstKeptEntryId=f"e{max(n - 3, 0)}", tokensBefore=n)
    elif kind == "label":
        entry.update(targetId=f"e{max(n - 1, 0)}", label=f"l{n}")
    elif kind == "custom":
        entry.update(customType="ext", data={"n": n})
    return entry


KINDS = st.sampled_from(
    ["user"] * 6
    + ["assistant"] * 6
    + ["custom_message", "branch_summary", "thinking_level_change", "model_change"]
    + ["compaction", "label", "custom"]
)


# How an entry's parent is chosen: the entry before it (a linear file), none (a second
# root), one further back (a fork), an id nobody has (dangling).
LINKS = st.sampled_from(["prev"] * 12 + ["none", "back", "unknown"])


@st.composite
def sessions(draw: Any) -> list[dict[str, Any]]:
    kinds = draw(st.lists(KINDS, min_size=1, max_size=40))
    # Half the files are linear (what Pi writes while nobody navigates the tree).
    if draw(st.booleans()):
        links, repeat = ["prev"] * len(kinds), None
    else:
        links = draw(st.lists(LINKS, min_size=len(kinds), max_size=len(kinds)))
        repeat = draw(st.one_of(st.none(), st.integers(1, 40)))
    entries: list[dict[str, Any]] = []
    for n, (kind, link) in enumerate(zip(kinds, links, strict=True)):
        if not entries or link == "none":
            parent = None
        elif link == "prev":
            parent = entries[-1]["id"]
        elif link == "back":
            parent = entries[draw(st.integers(0, len(entries) - 1))]["id"]
        else:
            parent = "nobody"
        # An id used again (the later entry wins) when `repeat` names this position.
        entry_id = "e0" if repeat == n and n > 0 else f"e{n}"
        entries.append(_entry(kind, n, entry_id, parent))
    return entries

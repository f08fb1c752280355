"""The scripted agent: answers a probe from the request it would send, else recovers.

A probe is answered when its answer is visible in the request. When it is not, the agent looks
at what the context offers: every line holding a ref (a stub, a summary bullet, a chain's
summary) becomes a document, with the tool call its stub answers; the documents are ranked
with BM25 against the question, and the agent calls ``context_tree_query`` on the best refs
(following the refs and part refs an answer hands back), then ``session_search`` on the
question's subject, within :data:`MAX_CALLS` extra tool calls. A probe fails when the answer
cannot be reached.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from .workload import Probe

MAX_CALLS = 5
_WORD = re.compile(r"[a-z0-9]+")
_REF = re.compile(r"`([tb][0-9]+(?:#[0-9.]+)?)`")
_BARE_REF = re.compile(r"\b([tb][0-9]+(?:#[0-9]+(?:\.[0-9]+)?)?)\b")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


class BM25:
    """Okapi BM25 (k1 1.5, b 0.75) over tokenized documents."""

    def __init__(self, docs: list[list[str]], k1: float = 1.5, b: float = 0.75) -> None:
        self.docs = [Counter(d) for d in docs]
        self.lengths = [len(d) for d in docs]
        self.avg = sum(self.lengths) / len(docs) if docs else 0.0
        self.k1, self.b = k1, b
        df: Counter[str] = Counter()
        for d in self.docs:
            df.update(d.keys())
        n = len(docs)
        self.idf = {w: math.log(1 + (n - c + 0.5) / (c + 0.5)) for w, c in df.items()}

    def scores(self, query: list[str]) -> list[float]:
        out = []
        for d, length in zip(self.docs, self.lengths, strict=False):
            s = 0.0
            for w in query:
                f = d.get(w, 0)
                if f:
                    norm = self.k1 * (1 - self.b + self.b * length / (self.avg or 1))
                    s += self.idf[w] * f * (self.k1 + 1) / (f + norm)
            out.append(s)
        return out


def ref_documents(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(ref, text) for every line of the request that names a ref; a stub's line is joined
    with the tool call it answers."""
    calls: dict[str, str] = {}
    docs: list[tuple[str, str]] = []
    for m in messages:
        content = m["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for b in content:
            kind = b.get("type")
            if kind == "tool_use":
                calls[b["id"]] = f"{b['name']} {json.dumps(b['input'])}"
                continue
            if kind == "tool_result":
                c = b["content"]
                text = c if isinstance(c, str) else "\n".join(x.get("text", "") for x in c)
                context = calls.get(b["tool_use_id"], "")
            elif kind == "text":
                text, context = b["text"], ""
            else:
                continue
            for line in text.split("\n"):
                for ref in _REF.findall(line):
                    docs.append((ref, f"{context} {line}"))
    return docs


@dataclass
class Answer:
    found: bool
    visible: bool
    calls: int


def answer(probe: Probe, visible: str, messages: list[dict[str, Any]], strategy: Any) -> Answer:
    """Answer ``probe`` from the request ``messages`` (serialized as ``visible``)."""
    target = probe.fact.answer
    if target in visible:
        return Answer(True, True, 0)
    if not strategy.recovers:
        return Answer(False, False, 0)
    docs = ref_documents(messages)
    queue: list[str] = []
    if docs:
        scores = BM25([words(t) for _, t in docs]).scores(words(probe.fact.question))
        ranked = sorted(range(len(docs)), key=lambda i: -scores[i])
        for i in ranked:
            if scores[i] > 0 and docs[i][0] not in queue:
                queue.append(docs[i][0])
    calls = 0
    asked: set[str] = set()
    while queue and calls < MAX_CALLS - 1:
        ref = queue.pop(0)
        if ref in asked:
            continue
        asked.add(ref)
        calls += 1
        text = strategy.execute("context_tree_query", {"toolCallIds": [ref]})
        if target in text:
            return Answer(True, False, calls)
        # part refs (a paged answer) first, then refs the answer names (a chain's steps)
        parts = [r for r in _BARE_REF.findall(text) if r.startswith(ref + "#") and r not in asked]
        named = [r for r in _REF.findall(text) if "#" not in r and r not in asked and r != ref]
        queue = parts + queue + named
    if calls < MAX_CALLS:
        calls += 1
        text = strategy.execute("session_search", {"query": probe.fact.subject})
        if target in text:
            return Answer(True, False, calls)
    return Answer(False, False, calls)

"""The scripted agent: answers a probe from the request it would send, else recovers.

A probe is answered when its answer is visible in the request. When it is not, the agent looks
at what the context offers: every line holding a ref (a stub, a summary bullet, a chain's
summary) becomes a document, with the tool call its stub answers, ranked with BM25 against the
question. When a document names the call the question is about (its path, command, pattern or
url), the agent first calls ``context_tree_query`` on the best such ref (following the part
refs a paged answer hands back); then it calls ``session_search`` with the question's subject;
then it tries the other refs (and the step refs a chain's answer names), within
:data:`MAX_CALLS` extra tool calls. A probe fails when the answer cannot be reached.

Questions about the task in progress (the prompt's ticket, the file being edited, the last
error, the last decision) name no call: the agent searches for their subject, except for the
last error, where it first asks for the latest ref whose line reports an error (``ERROR``).
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
    question = probe.fact.question
    locator = question[3 : question.index(", what is ")] if ", what is " in question else ""
    named = [d for d in docs if locator and (locator in d[1] or json.dumps(locator)[1:-1] in d[1])]
    pool = named or docs
    queue: list[str] = []
    if pool:
        scores = BM25([words(t) for _, t in pool]).scores(words(question))
        for i in sorted(range(len(pool)), key=lambda i: -scores[i]):
            if (named or scores[i] > 0) and pool[i][0] not in queue:
                queue.append(pool[i][0])
    # the best ref when a stub or summary line names the call the question is about (for the
    # last error: the latest ref whose line reports an error), else (and after it) a literal
    # search for the question's subject, then the other refs
    plan: list[tuple[str, str]] = [("ref", r) for r in queue[:1] if named]
    if probe.fact.kind == "error":
        failed = [r for r, t in reversed(docs) if "ERROR" in t]
        plan = [("ref", r) for r in failed[:1]]
    plan.append(("search", probe.fact.subject))
    plan += [("ref", r) for r in queue if ("ref", r) not in plan]
    calls = 0
    asked: set[str] = set()
    while plan and calls < MAX_CALLS:
        kind, value = plan.pop(0)
        if kind == "search":
            calls += 1
            if target in strategy.execute("session_search", {"query": value}):
                return Answer(True, False, calls)
            continue
        if value in asked:
            continue
        asked.add(value)
        calls += 1
        text = strategy.execute("context_tree_query", {"toolCallIds": [value]})
        if target in text:
            return Answer(True, False, calls)
        # the next part of a paged answer first, refs the answer names (a chain's steps) last
        base = value.split("#")[0]
        parts = [r for r in _BARE_REF.findall(text) if r.startswith(base + "#") and r not in asked]
        inner = [r for r in _REF.findall(text) if "#" not in r and r not in asked and r != base]
        plan = [("ref", r) for r in parts[:1]] + plan + [("ref", r) for r in inner]
    return Answer(False, False, calls)

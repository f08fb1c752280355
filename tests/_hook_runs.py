"""A scripted model and the checks shared by the hook integration tests (one per framework).

The model reads files with a ``read`` tool, ``turns`` calls per user prompt, then answers;
at the prompt ``query_prompt`` it first asks ``context_tree_query`` for the oldest stubbed
output it finds in its request. Each test turns the model's steps into its framework's
replies and its requests into :class:`Pair` s (a tool call, its arguments and its result's
text), so the checks below are the same for every format.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union

REF = re.compile(r"ref `(t\d+)`")
"""A stub's ref (``[Summarized ..., ref `t4`. ...]``)."""

LISTED = re.compile(r"`(t\d+)` read path=(\S+) ->")
"""A ref listed in a summary or a compressed chain, with the file it read."""

QUERY = "context_tree_query"


def output(path: str) -> str:
    """What ``read`` returns for ``path``: about 5 KB, different for every path."""
    return f"contents of {path}\n" + "".join(f"{path} line {n}: some text\n" for n in range(200))


@dataclass(frozen=True)
class Call:
    call_id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Text:
    text: str


Step = Union[list[Call], Text]


@dataclass(frozen=True)
class Pair:
    """One tool call in a request and the text of the result that answers it."""

    name: str
    arguments: dict[str, Any]
    result: str


@dataclass
class Script:
    """The model: what it does next, given the stubs it sees in its request."""

    turns: int = 3
    reuse_ids: bool = False
    """Every call has the id ``call_0``."""
    ids_per_prompt: bool = False
    """Ids start again at every prompt (``call_0``, ``call_1``, ...): reused across runs only."""
    query_prompt: Optional[int] = 2
    prompt: int = 0
    turn: int = 0
    queried: bool = False
    queries: list[tuple[str, str]] = field(default_factory=list)  # (ref, path) asked for

    def call_id(self) -> str:
        if self.reuse_ids:
            return "call_0"
        return f"call_{self.turn}" if self.ids_per_prompt else f"call_{self.prompt}_{self.turn}"

    def step(self, pairs: Sequence[Pair]) -> Step:
        if self.turn < self.turns:
            path = f"f{self.prompt}_{self.turn}.txt"
            call = Call(self.call_id(), "read", {"path": path})
            self.turn += 1
            return [call]
        if self.prompt == self.query_prompt and not self.queried:
            self.queried = True
            found = stubs(pairs)
            if found:
                ref, path = found[0]
                self.queries.append((ref, path))
                return [Call(self.call_id(), QUERY, {"toolCallIds": [ref]})]
        done = Text(f"done {self.prompt}")
        self.prompt += 1
        self.turn = 0
        self.queried = False
        return done


def run_read(arguments: Union[str, dict[str, Any]]) -> str:
    """The host's own ``read`` tool."""
    args = json.loads(arguments) if isinstance(arguments, str) else arguments
    return output(str(args["path"]))


def stubs(pairs: Iterable[Pair]) -> list[tuple[str, str]]:
    """(ref, path) of every stubbed ``read`` result, oldest first."""
    found = []
    for pair in pairs:
        match = REF.search(pair.result)
        if pair.name == "read" and match:
            found.append((match.group(1), str(pair.arguments["path"])))
    return found


def listed(request: Any) -> list[tuple[str, str]]:
    """(ref, path) of every ref a summary or compressed chain in the request lists."""
    return LISTED.findall(json.dumps(request))


def check_queries(script: Script, requests: Sequence[Sequence[Pair]]) -> int:
    """Every ``context_tree_query`` the model made got the exact original output back (in
    the request right after the call; later ones may hold it condensed). Returns how many."""
    asked = dict(script.queries)
    answered: set[str] = set()
    for pairs in requests:
        for pair in pairs:
            if pair.name != QUERY:
                continue
            (ref,) = pair.arguments["toolCallIds"]
            if ref in answered or ref not in asked:
                continue
            path = asked[ref]
            assert output(path) in pair.result, (ref, path, pair.result[:200])
            assert f"## toolRef: {ref}" in pair.result
            answered.add(ref)
    assert len(answered) == len(script.queries)
    return len(answered)


def check_refs(execute: Callable[[str, Any], str], pairs: Sequence[Pair], request: Any) -> int:
    """Every ref in the request (stubs, summaries, chains) returns its own output."""
    refs = dict(stubs(pairs))
    for ref, path in listed(request):
        assert refs.setdefault(ref, path) == path, (ref, path, refs[ref])
    for ref, path in refs.items():
        answer = execute(QUERY, {"toolCallIds": [ref]})
        assert output(path) in answer, (ref, path, answer[:200])
        others = [p for r, p in refs.items() if r != ref and p != path]
        assert not any(output(p) in answer for p in others), ref
    return len(refs)


def chars(requests: Iterable[Any]) -> int:
    """The JSON chars of every request's conversation."""
    return sum(len(json.dumps(r)) for r in requests)


def prefix_busts(requests: Sequence[Sequence[Any]]) -> list[int]:
    """Indexes of the requests that do not start with the previous request (byte-wise)."""
    busts = []
    for k in range(1, len(requests)):
        previous = [json.dumps(m, sort_keys=False) for m in requests[k - 1]]
        current = [json.dumps(m, sort_keys=False) for m in requests[k]]
        if current[: len(previous)] != previous:
            busts.append(k)
    return busts

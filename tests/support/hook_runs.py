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
from typing import Any, Callable, Optional, Protocol, Union

REF = re.compile(r"ref `(t\d+)`")
"""A stub's ref (``[Summarized ..., ref `t4`. ...]``)."""

LISTED = re.compile(r"`(t\d+)` read path=(\S+) ->")
"""A ref listed in a summary or a compressed chain, with the file it read."""

QUERY = "context_tree_query"

LOG = "build.log"
"""A path whose output is a long log: over the spill threshold of :data:`SPILLING` and over
the 50 KB a ``context_tree_query`` answer holds, so it is spilled and comes back in parts."""

SPILLING = {"spillThreshold": 20_000}
"""A hook config under which :data:`LOG` (and nothing else) is spilled."""

NEXT_PART = re.compile(r"with ref `([^`]+#\d+)`")
"""The ref of the next part of a cut ``context_tree_query`` answer."""

TOOLS_LISTED = re.compile(r'tools=\\?"([^"\\]*)\\?"')
"""The refs a compressed chain lists (``tools="t1,t2"``, maybe JSON-escaped)."""


def output(path: str) -> str:
    """What ``read`` returns for ``path``: about 5 KB, different for every path (the log:
    about 90 KB)."""
    if path == LOG:
        return "".join(
            f"step {n}: compiled unit_{n}.c in {n % 7} ms, no warnings\n" for n in range(1700)
        )
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
    log_at: Optional[tuple[int, int]] = None
    """(prompt, turn) of the read of :data:`LOG`; the query then asks for the log (if it is
    stubbed) and follows every answer's next-part ref until it has the whole output."""
    prompt: int = 0
    turn: int = 0
    queried: bool = False
    queries: list[tuple[str, str]] = field(default_factory=list)  # (ref, path) asked for
    parts: list[str] = field(default_factory=list)  # next-part refs asked for

    def call_id(self) -> str:
        if self.reuse_ids:
            return "call_0"
        return f"call_{self.turn}" if self.ids_per_prompt else f"call_{self.prompt}_{self.turn}"

    def step(self, pairs: Sequence[Pair]) -> Step:
        if self.turn < self.turns:
            path = f"f{self.prompt}_{self.turn}.txt"
            if (self.prompt, self.turn) == self.log_at:
                path = LOG
            call = Call(self.call_id(), "read", {"path": path})
            self.turn += 1
            return [call]
        # (each call of a prompt has its own turn number: its id differs unless ids are reused)
        if self.queried and pairs and pairs[-1].name == QUERY:
            following = NEXT_PART.search(pairs[-1].result)
            if following and following.group(1) not in self.parts:
                self.parts.append(following.group(1))
                call = Call(self.call_id(), QUERY, {"toolCallIds": [following.group(1)]})
                self.turn += 1
                return [call]
        if self.prompt == self.query_prompt and not self.queried:
            self.queried = True
            found = stubs(pairs)
            logs = [f for f in found if f[1] == LOG]
            if self.log_at is not None:
                assert logs, "the log is not stubbed at the query prompt"
                found = logs
            if found:
                ref, path = found[0]
                self.queries.append((ref, path))
                call = Call(self.call_id(), QUERY, {"toolCallIds": [ref]})
                self.turn += 1
                return [call]
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


def read_paths(requests: Iterable[Sequence[Pair]]) -> list[str]:
    """The paths of every ``read`` in the requests, first seen first."""
    paths = [str(p.arguments["path"]) for pairs in requests for p in pairs if p.name == "read"]
    return list(dict.fromkeys(paths))


def check_no_paths_nor_bare_ids(requests: Iterable[Any]) -> None:
    """No request tells the model to read a local file, nor names a bare tool-call id as a
    ref (with reused ids such a ref stands for several outputs)."""
    for request in requests:
        text = json.dumps(request)
        assert "read this file" not in text
        assert "-blobs" not in text
        assert not re.search(r"ref `(?!t\d)", text), re.search(r"ref `[^`]*`", text)


def listed(request: Any) -> list[tuple[str, str]]:
    """(ref, path) of every ref a summary or compressed chain in the request lists."""
    return LISTED.findall(json.dumps(request))


def check_queries(script: Script, requests: Sequence[Sequence[Pair]]) -> int:
    """Every ``context_tree_query`` the model made got the exact original output back (in
    the request right after the call; later ones may hold it condensed), in one answer or in
    the parts it followed (joined with a line break). Returns how many."""
    asked = dict(script.queries)
    answers: dict[str, str] = {}
    for pairs in requests:
        for pair in pairs:
            if pair.name != QUERY:
                continue
            (ref,) = pair.arguments["toolCallIds"]
            if ref in answers or (ref not in asked and ref not in script.parts):
                continue
            assert pair.result.startswith(f"## toolRef: {ref}\n"), pair.result[:200]
            assert "\n\n---\n\n## toolRef: " not in pair.result, ref  # one output only
            answers[ref] = pair.result
    for ref, path in script.queries:
        whole = [body(answers[ref])]
        part = NEXT_PART.search(answers[ref])
        while part is not None:
            whole.append(body(answers[part.group(1)]))
            part = NEXT_PART.search(answers[part.group(1)])
        assert "\n".join(whole) == output(path), (ref, path, len(whole))
    return len(script.queries)


def body(answer: str) -> str:
    """The output a one-block ``context_tree_query`` answer holds, without its notes."""
    content = answer.split("\nTurn: ", 1)[1].split("\n\n", 1)[1]
    return content.split("\n[Output ", 1)[0]


def fetch(execute: Callable[[str, Any], str], ref: str) -> str:
    """The whole output of ``ref`` through the query tool, following its parts; each answer
    names exactly one output."""
    parts = []
    asked: Optional[str] = ref
    while asked is not None:
        answer = execute(QUERY, {"toolCallIds": [asked]})
        assert answer.startswith(f"## toolRef: {asked}\n"), answer[:200]
        assert "\n\n---\n\n## toolRef: " not in answer, asked  # one output, one block
        parts.append(body(answer))
        following = NEXT_PART.search(answer)
        asked = following.group(1) if following else None
    return "\n".join(parts)


def check_recoverable(
    execute: Callable[[str, Any], str], request: Any, paths: Sequence[str]
) -> dict[str, str]:
    """Nothing the model read is lost from ``request``: every output of ``paths`` that the
    request does not hold verbatim comes back exactly through a ref the request shows (in a
    stub, a summary or a compressed chain's list), and every such ref stands for one output.
    No stub names a local file. Returns {path: ref}."""
    text = json.dumps(request)
    assert "read this file" not in text
    assert "-blobs" not in text
    refs = set(REF.findall(text)) | {ref for ref, _ in LISTED.findall(text)}
    for listed_refs in TOOLS_LISTED.findall(text):
        refs.update(r for r in listed_refs.split(",") if r)
    by_output = {output(p): p for p in paths}
    found: dict[str, str] = {}
    for ref in sorted(refs):
        if f"\nTool: {QUERY}\n" in execute(QUERY, {"toolCallIds": [ref]}):
            continue  # an earlier recovery's answer: the outputs it held have refs of their own
        whole = fetch(execute, ref)
        assert whole in by_output, (ref, whole[:120])
        found[by_output[whole]] = ref
    for path in paths:
        if json.dumps(output(path))[1:-1] not in text:
            assert path in found, f"{path} is neither in the request nor behind a ref"
    return found


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


class Recorder(Protocol):
    """A scripted model behind a loopback server: every request, and its pairs."""

    requests: list[Any]
    pairs: list[list[Pair]]


Loop = Callable[[Any, Script, range, Optional[list[Any]]], tuple[list[Any], Recorder]]
"""A framework's agent loop: (hook, script, prompts, saved history or None) -> (the loop's
history, the model that answered it)."""


def spill_chain_restart(
    make_hook: Callable[[], Any],
    loop: Loop,
    save: Callable[[list[Any]], list[Any]],
    condense: Callable[[Any, list[Any]], list[Any]],
    *,
    reuse_ids: bool = True,
) -> None:
    # ``save`` turns a loop's history into what a program saves and loads back; ``condense``
    # gives the hook's output for a history as JSON data.
    """Reused ids, a spilled log, chain compression and a restart with the default session
    (``PI_CONDENSE_SESSION_DIR`` set by the caller): the model pages the log back through its
    stub's own ref; the restarted process finds the same session and refs; at the end every
    output is in the request or behind a ref that gives exactly it, the log (by then inside a
    compressed chain) included; no request names a local path or a bare id as a ref."""
    first = make_hook()
    script = Script(reuse_ids=reuse_ids, log_at=(1, 1))
    history, model = loop(first, script, range(4), None)
    assert check_queries(script, model.pairs) == 1
    assert script.parts  # the log came back in parts, each naming the next
    before = condense(first, history)
    first.close()

    stored = save(history)
    second = make_hook()
    again = condense(second, stored)
    assert second.session.path == first.session.path
    assert json.dumps(again) == json.dumps(before)
    later = Script(reuse_ids=reuse_ids, prompt=4, query_prompt=None)
    history2, model2 = loop(second, later, range(4, 7), stored)
    final = condense(second, history2)
    found = check_recoverable(second.execute, final, read_paths(model.pairs + model2.pairs))
    assert re.search(rf'tools=\\?"[^"]*\b{found[LOG]}\b', json.dumps(final)), found[LOG]
    check_no_paths_nor_bare_ids([*model.requests, *model2.requests, final])
    second.close()

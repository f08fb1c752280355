"""The flush pipeline's incremental paths equal their from-scratch computations (issue 18).

Over random append / edit sequences: a chain scan grown from the previous one (its chains,
grace window, eligibility against a registry that grows between scans, extraction) answers
as a scan of a fresh copy of the list, and a branch lent to it stays as it was lent; the kept
live-summary placer places as a new one; the index's summary-body lookups answer as a walk
over every body; the list helpers do what slicing and comparing the lists do.
"""

from __future__ import annotations

import copy
import math
from typing import Any, Optional

from hypothesis import given, settings
from hypothesis import strategies as st

from pi_condense import _core
from pi_condense.branch_facts import BranchFacts
from pi_condense.config import Config
from pi_condense.js import json as jsjson
from pi_condense.live_state import LiveSummary, LiveSummaryPlacer
from pi_condense.render import render_options
from pi_condense.session import SessionFile
from support.builders import call, chain_entry, final, plain_result, tool_use, user

OPTIONS = render_options(Config.from_settings_dict({"protectedTools": ["keep"]}))

# ------------------------------------------------------------------------------ chain scans

_ATOMS = (
    "chain",
    "chain",
    "keep-chain",
    "user",
    "synthetic",
    "turn",
    "turn",
    "keep-turn",
    "query-turn",
    "call",
    "result",
    "final",
    "final",
    "custom",
)


def _atom(atom: str, clock: list[int], n: int, repeat: bool) -> list[dict[str, Any]]:
    """The messages of one atom; a tool turn is a call and its result (same id, ids reused
    now and then). Timestamps go up, but with ``repeat`` they take an earlier one (range
    resolution then finds no unique message there)."""

    def ts() -> int:
        clock[0] += 1
        return clock[0] - 3 if repeat else clock[0]

    tool_id = f"c{n % 6}"
    if atom.endswith("chain"):
        # a closed chain: a prompt, a tool turn, the answer
        turn = "keep-turn" if atom == "keep-chain" else "turn"
        return [user(ts()), *_atom(turn, clock, n, repeat), final(ts())]
    if atom == "user":
        return [user(ts())]
    if atom == "synthetic":
        text = f'<compressed-chain id="b{n}" tools="t1">'
        return [{"role": "user", "content": [{"type": "text", "text": text}], "timestamp": ts()}]
    if atom.endswith("turn"):
        name = {"turn": "read", "keep-turn": "keep", "query-turn": "context_tree_query"}[atom]
        return [tool_use(ts(), call(tool_id, name)), plain_result(tool_id, ts(), name=name)]
    if atom == "call":
        return [tool_use(ts(), call(tool_id, "read"))]
    if atom == "result":
        return [plain_result(tool_id, ts(), name="read")]
    if atom == "final":
        return [final(ts())]
    return [{"role": "custom", "customType": "note", "content": "x", "timestamp": ts()}]


_NEW = st.lists(st.tuples(st.sampled_from(_ATOMS), st.integers(0, 9)), max_size=14)

_STEP = st.one_of(
    st.tuples(st.just("append"), _NEW),
    st.tuples(st.just("cut"), st.integers(0, 60), _NEW),
    st.tuples(st.just("copy"), st.integers(0, 60)),
    st.tuples(
        st.just("closing"),
        st.sampled_from(("final", "call")),
        st.booleans(),  # handed as ChainScan(closing=...), or in a new list
    ),
    st.tuples(st.just("register"), st.integers(0, 3)),
    st.tuples(st.just("new-index")),
    st.tuples(st.just("sibling"), st.integers(0, 60)),
)


def _scan(
    messages: list[Any], grace_len: int, turns: float, previous: Any, closing: Any = None
) -> _core.ChainScan:
    return _core.ChainScan(
        messages,
        grace_len=grace_len,
        grace_turns=turns,
        options=OPTIONS,
        previous=previous,
        closing=closing,
    )


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


@settings(max_examples=250, deadline=None)
@given(
    steps=st.lists(_STEP, min_size=2, max_size=12),
    turns=st.sampled_from((0.0, 1.0, 2.0, 2.5, 50.0)),
    window=st.sampled_from((0.0, 1.0, 2.0)),
)
def test_a_grown_chain_scan_answers_as_a_fresh_one(
    steps: list[Any], turns: float, window: float
) -> None:
    messages: list[Any] = []
    index = _core.Index()
    previous: Optional[_core.ChainScan] = None
    clock = [100]
    n = 0
    blocks = 0
    for step in steps:
        kind = step[0]
        closing: list[Any] = []
        apart = False
        if kind in ("append", "cut"):
            if kind == "cut":
                del messages[step[1] :]
            for atom, roll in step[-1]:
                n += 1
                messages += _atom(atom, clock, n, repeat=roll == 0)
        elif kind == "copy" and messages:
            # an equal message that is another object: read again from there
            i = step[1] % len(messages)
            messages[i] = copy.deepcopy(messages[i])
        elif kind == "closing":
            # a message_end flush threads in a closing message that the branch lacks
            n += 1
            closing = _atom("final" if step[1] == "final" else "call", clock, n, repeat=False)
            apart = step[2]
        elif kind == "register" and previous is not None:
            eligible, _, _ = previous.select(index, 0.0)
            for row in eligible[: step[1]]:
                if _finite(row[3]) and _finite(row[4]):
                    blocks += 1
                    index.register_chain(chain_entry(f"b{blocks}", row[3], row[4], 1))
        elif kind == "new-index":
            index = _core.Index()
        elif kind == "sibling" and previous is not None:
            # another scan grown from the same one (it may take over what the next reuses)
            other = _scan(messages[: step[1]], len(messages[: step[1]]), turns, previous)
            other.extract(index, 0.0, 1.0, [])

        listed = [*messages, *closing]
        if apart:
            scan = _scan(messages, len(messages), turns, previous, closing[0])
        else:
            scan = _scan(listed, len(messages), turns, previous)
        fresh = _scan(copy.deepcopy(listed), len(messages), turns, None)
        assert scan.chains() == fresh.chains()
        assert scan.chain_count == fresh.chain_count
        assert sorted(scan.in_grace) == sorted(fresh.in_grace)
        for w in (window, 0.0):
            eligible, compressed, deferred = scan.select(index, w, False)
            expected = fresh.select(index, w)
            assert (eligible, deferred) == (expected[0], expected[2])
            assert compressed == []
        assert scan.select(index, window) == fresh.select(index, window)
        for row in fresh.chains():
            if _finite(row[3]) and _finite(row[4]):
                for start, end in ((row[3], row[4]), (row[3], row[3] + 1)):
                    args = (index, float(start), float(end), row[7])
                    assert scan.extract(*args) == fresh.extract(*args)
        previous = scan


def test_a_lent_branch_stays_as_it_was_lent() -> None:
    session = SessionFile.in_memory("/w", session_id="s1")
    facts = BranchFacts(session)

    def grow(n: int) -> None:
        session.append_message(user(n))
        session.append_custom("note", {"n": n})
        facts.update()

    grow(1)
    lent = facts.lend_chain_messages()
    grow(2)  # added while lent: the lent list does not change
    assert [m["timestamp"] for m in lent] == [1]
    assert [m["timestamp"] for m in facts.chain_messages()] == [1, 2]
    again = facts.lend_chain_messages()
    assert again is not lent
    facts.end_lend(lent)  # that list is no longer the kept one: nothing to give back
    grow(3)  # still lent: `again` does not change either
    assert [m["timestamp"] for m in again] == [1, 2]
    kept = facts.lend_chain_messages()
    facts.end_lend(kept)
    grow(4)  # once given back, the kept list grows in place again
    assert facts.lend_chain_messages() is kept
    assert [m["timestamp"] for m in kept] == [1, 2, 3, 4]


# --------------------------------------------------------------------------- live summaries


def _host_message(role: str, ts: int) -> dict[str, Any]:
    return {"role": role, "content": [{"type": "text", "text": "x"}], "timestamp": ts}


def _summary(n: int, anchor: Any) -> LiveSummary:
    refs = [f"t{n}"]
    message = {
        "role": "custom",
        "customType": "context-prune-summary",
        "content": f"summary {n}",
        "details": {"toolCallRefs": refs},
        "timestamp": 1000 + n,
    }
    return LiveSummary(anchor, message, jsjson.dumps(refs))


_ROLES = ("user", "assistant", "toolResult")

_PLACER_STEP = st.one_of(
    st.tuples(st.just("append"), st.sampled_from(_ROLES), st.integers(0, 12)),
    st.tuples(st.just("anchored"), st.integers(0, 10**6)),
    st.tuples(st.just("unanchored"), st.sampled_from(_ROLES), st.integers(0, 14)),
    st.tuples(st.just("first")),
    st.tuples(st.just("held"), st.integers(0, 100)),
    st.tuples(st.just("equal"), st.integers(0, 100)),
    st.tuples(st.just("replace"), st.integers(0, 100), st.sampled_from(_ROLES), st.integers(0, 14)),
    st.tuples(st.just("insert"), st.integers(0, 100), st.sampled_from(_ROLES), st.integers(0, 14)),
    st.tuples(st.just("truncate"), st.integers(0, 100)),
    st.tuples(st.just("copies")),
    st.tuples(st.just("forget")),
    st.tuples(st.just("same-list")),
    st.tuples(st.just("own-list")),
)


@settings(max_examples=300, deadline=None)
@given(steps=st.lists(_PLACER_STEP, min_size=1, max_size=30))
def test_the_kept_placer_places_as_a_new_one_after_any_steps(steps: list[Any]) -> None:
    placer = LiveSummaryPlacer()
    messages: list[Any] = []
    live: list[LiveSummary] = []
    handed: list[Any] = []
    for n, step in enumerate(steps):
        kind = step[0]
        if kind == "append":
            messages.append(_host_message(step[1], step[2]))
        elif kind == "anchored" and messages:
            m = messages[step[1] % len(messages)]
            live.append(_summary(n, (m["role"], m["timestamp"])))
        elif kind == "unanchored":
            live.append(_summary(n, (step[1], step[2])))
        elif kind == "first":
            live.append(_summary(n, None))
        elif kind == "held" and live:
            messages.append(dict(live[step[1] % len(live)].message))
        elif kind == "equal" and messages:
            i = step[1] % len(messages)
            messages[i] = dict(messages[i])
        elif kind == "replace" and messages:
            messages[step[1] % len(messages)] = _host_message(step[2], step[3])
        elif kind == "insert":
            messages.insert(step[1] % (len(messages) + 1), _host_message(step[2], step[3]))
        elif kind == "truncate":
            del messages[step[1] % (len(messages) + 1) :]
        elif kind == "copies":
            messages = [dict(m) for m in messages]
        elif kind == "forget":
            live = live[: len(live) // 2]
        if kind == "own-list":
            handed = messages  # the host's own list, changed in place from now on
        elif kind != "same-list" and handed is not messages:
            handed = list(messages)  # a new list per call (the same one again: unchanged)
        got = placer.place(handed, live)
        copied = list(handed)
        expected = LiveSummaryPlacer().place(copied, live)
        assert [id(m) for m in got] == [id(m) for m in expected]
        assert (got is handed) == (expected is copied)


# ---------------------------------------------------------------------------- the index


_KEYS = st.lists(st.sampled_from(("a@1", "b@2", "c@3", "d@4")), max_size=3)


@settings(max_examples=200, deadline=None)
@given(
    bodies=st.lists(st.tuples(_KEYS, st.sampled_from(("S", "T", "U"))), max_size=8),
    query=_KEYS,
)
def test_summary_body_lookups_answer_as_a_walk_over_the_bodies(
    bodies: list[tuple[list[str], str]], query: list[str]
) -> None:
    index = _core.Index()
    for keys, body in bodies:
        index.register_summary_body(keys, body)
    kept = index.summary_bodies()
    covering = [text for keys, text in kept if set(keys) & set(query)]
    assert index.has_summary_covering_any(query) == bool(covering)
    assert index.per_batch_summaries(query) == list(dict.fromkeys(covering))
    assert index.summary_bodies_with_keys(query) == [b for b in kept if b[0] == query]


# ---------------------------------------------------------------------------- list helpers


@settings(max_examples=200, deadline=None)
@given(
    items=st.lists(st.integers(0, 5), max_size=12),
    other=st.lists(st.integers(0, 5), max_size=12),
    cut=st.integers(0, 12),
    at=st.lists(st.integers(0, 14), max_size=4),
)
def test_the_list_helpers_compare_and_splice_as_python_does(
    items: list[int], other: list[int], cut: int, at: list[int]
) -> None:
    objects = [[x] for x in items]  # distinct objects, equal when their values are
    shared = [*objects[:cut], *([x] for x in other)]
    same = 0
    while same < min(len(objects), len(shared)) and objects[same] is shared[same]:
        same += 1
    assert _core.list_prefix(objects, shared) == same
    equal = 0
    while equal < min(len(objects), len(shared)) and objects[equal] == shared[equal]:
        equal += 1
    assert _core.list_prefix(objects, shared, equal=True) == equal
    at = sorted(at)
    groups = [[f"s{k}", f"t{k}"] for k in range(len(at))]
    out: list[Any] = []
    previous = 0
    for position, group in zip(at, groups, strict=True):
        out += objects[previous:position]
        out += group
        previous = position
    out += objects[previous:]
    assert [id(x) for x in _core.splice(objects, at, groups)] == [id(x) for x in out]


class _Text(str):
    """A str subclass: never compared natively (its == is Python's)."""


_LEAVES = st.sampled_from(
    (0, 1, 1.0, True, False, None, math.nan, 2**70, "", "ab", "ab", "é", "ā", "😀x", "x" * 40)
)
_TREES = st.recursive(
    _LEAVES | st.builds(_Text, st.sampled_from(("ab", "é"))),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(("a", "b", "ā", 1)), inner, max_size=3)
    ),
    max_leaves=12,
)


def _rebuilt(tree: Any) -> Any:
    """An equal tree of new objects (new strs too, a key order kept)."""
    if type(tree) is list:
        return [_rebuilt(x) for x in tree]
    if type(tree) is dict:
        return {_rebuilt(k): _rebuilt(v) for k, v in tree.items()}
    if type(tree) is str and len(tree) > 1:
        return "".join(list(tree))
    return tree


@settings(max_examples=300, deadline=None)
@given(
    items=st.lists(_TREES, max_size=6),
    other=st.lists(_TREES, max_size=6),
    cut=st.integers(0, 6),
    reorder=st.booleans(),
)
def test_the_prefix_of_a_fresh_copy_is_what_equality_says(
    items: list[Any], other: list[Any], cut: int, reorder: bool
) -> None:
    """The native comparison of JSON-like trees answers as ``==`` does, with nan (equal only
    to itself), 1 / 1.0 / True, str kinds and subclasses, and keys in another order."""
    copies = [_rebuilt(x) for x in items[:cut]]
    if reorder:
        copies = [dict(reversed(x.items())) if type(x) is dict else x for x in copies]
    shared = [*copies, *other]
    equal = 0
    # as list equality compares items: identity first (a nan is equal to itself), then ==
    while equal < min(len(items), len(shared)) and [items[equal]] == [shared[equal]]:
        equal += 1
    assert _core.list_prefix(items, shared, equal=True) == equal
    assert _core.list_prefix(shared, items, equal=True) == equal


def test_an_edited_copy_is_where_the_prefix_ends() -> None:
    history = [
        {"role": "user", "content": [{"type": "text", "text": "x" * 3000 + str(i)}]}
        for i in range(50)
    ]
    copy_ = _rebuilt(history)
    assert _core.list_prefix(history, copy_, equal=True) == 50
    copy_[30]["content"][0]["text"] = copy_[30]["content"][0]["text"][:-1] + "!"
    assert _core.list_prefix(history, copy_, equal=True) == 30
    copy_[20]["content"].append({"type": "text", "text": ""})
    assert _core.list_prefix(history, copy_, equal=True) == 20
    copy_[10]["role"] = "user "
    assert _core.list_prefix(history, copy_, equal=True) == 10
    copy_[5]["content"][0]["type"] = _Text("text")  # equal, by a subclass's ==
    assert _core.list_prefix(history, copy_, equal=True) == 10

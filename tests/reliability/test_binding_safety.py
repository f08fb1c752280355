"""Memory safety of the native render against hostile message values (issue 17).

The native reader borrows strings and objects from the caller's messages while it reads and
decides. Python code that runs meanwhile (an ``int`` subclass's ``__float__``, a dict key's
``__eq__`` during a lookup, a metaclass's ``__name__``) could free what it borrowed. Each probe
below arms such a hook to replace every assistant's content (freeing the old id strings) and
churn the allocator, then checks that the render is the render of a plain copy of the same
values (``json.loads(json.dumps(...))``, exact built-in types only): the hostile types are
read by value, as JSON would see them, and no hook may change the decision.

The probes also run in a subprocess under ``PYTHONMALLOC=debug`` (freed memory is
overwritten there, so a read of it cannot go unnoticed).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Callable, Optional

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_condense import _core
from pi_condense.config import Config
from pi_condense.render import RenderDiagnostic, RenderResult, render, render_options
from pi_condense.session import ABSENT
from pi_condense.state import PrunerState
from support.debug_alloc import run_under_debug_allocator

Messages = list[Any]

#: The messages the armed hooks mutate (set by each probe).
TARGET: Messages = []
#: How many times a hook fired (a probe checks the reader really ran it, or never did).
FIRED: list[int] = [0]
ARMED: list[bool] = [False]


def _churn() -> None:
    """Replace every assistant's content with equal new objects (the old ones are freed)."""
    if not ARMED[0]:
        return
    ARMED[0] = False  # the hooks of the objects touched below stay quiet
    FIRED[0] += 1
    for m in TARGET:
        if isinstance(m, dict) and dict.get(m, "role") == "assistant":
            old = list.__getitem__(dict.__getitem__(m, "content"), 0)["id"]
            m["content"] = [
                {
                    "type": "toolCall",
                    "id": "".join(reversed(old))[::-1],
                    "name": "read",
                    "arguments": {},
                }
            ]
    junk = [("J" * 37) + str(i) for i in range(50000)]
    del junk
    ARMED[0] = True


class HostileInt(int):
    """An int whose float conversion and comparisons run Python code."""

    def __float__(self) -> float:
        _churn()
        return float(int(self))

    def __lt__(self, other: object) -> bool:
        _churn()
        return int(self) < int(other)  # type: ignore[call-overload]

    def __index__(self) -> int:
        _churn()
        return int(self)


class HostileFloat(float):
    def __float__(self) -> float:
        _churn()
        return float.__float__(self)


class CollidingKey(str):
    """A str key whose hash is a field name's: a lookup of that field compares with it."""

    def __new__(cls, text: str, field: str) -> CollidingKey:
        key = super().__new__(cls, text)
        key.field_hash = hash(field)
        return key

    field_hash: int

    def __hash__(self) -> int:
        return self.field_hash

    def __eq__(self, other: object) -> bool:
        _churn()
        return str.__eq__(self, other)  # type: ignore[no-any-return]

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)


class NamedMeta(type):
    """A metaclass whose ``__name__`` runs Python code."""

    @property
    def __name__(self) -> str:  # type: ignore[override]
        _churn()
        return "Opaque"


class Opaque(metaclass=NamedMeta):
    pass


class HostileList(list):  # type: ignore[type-arg]
    def __iter__(self) -> Any:
        _churn()
        return list.__iter__(self)

    def __len__(self) -> int:
        _churn()
        return list.__len__(self)

    def __getitem__(self, i: Any) -> Any:
        _churn()
        return list.__getitem__(self, i)


class HostileDict(dict):  # type: ignore[type-arg]
    def __getitem__(self, key: Any) -> Any:
        _churn()
        return dict.__getitem__(self, key)

    def get(self, key: Any, default: Any = None) -> Any:
        _churn()
        return dict.get(self, key, default)


def session(n: int = 60) -> Messages:
    """``n`` answered calls; every id is a fresh str object (freed with its message)."""
    messages: Messages = []
    for i in range(n):
        cid = "call-" + "q" * 30 + str(i)
        messages += [
            {"role": "user", "content": "u", "timestamp": 1000 + i * 10},
            {
                "role": "assistant",
                "content": [
                    {"type": "toolCall", "id": "".join(cid), "name": "read", "arguments": {}}
                ],
                "timestamp": 1001 + i * 10,
            },
            {
                "role": "toolResult",
                "toolCallId": (cid + "!")[:-1],
                "toolName": "read",
                "content": [{"type": "text", "text": "r"}],
                "isError": False,
                "timestamp": 1002 + i * 10,
            },
        ]
    return messages


def tool_result(tool_call_id: Any, timestamp: Any = 5) -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": tool_call_id,
        "toolName": "read",
        "content": [],
        "isError": False,
        "timestamp": timestamp,
    }


def plain(value: Any) -> Any:
    """The value as JSON sees it: exact built-in types (non-str keys dropped)."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in dict.items(value) if isinstance(k, str)}
    if isinstance(value, list):
        return [plain(v) for v in list.__iter__(value)]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, str):
        return str.__str__(value)
    return {}


#: A state that can stub (one summarized record): the render measures and reads in one pass.
def stubbing_state() -> PrunerState:
    state = PrunerState()
    state.add_batch(
        [
            {
                "toolCallId": "elsewhere",
                "toolName": "bash",
                "args": {"cmd": "ls"},
                "resultText": "raw",
                "isError": False,
                "turnIndex": 0,
                "timestamp": 1,
                "resultTimestamp": 2,
            }
        ]
    )
    return state


Renderer = Callable[[Messages], RenderResult]


def public(state_of: Callable[[], PrunerState] = PrunerState) -> Renderer:
    return lambda messages: render(messages, state_of(), Config())


def no_memo(state_of: Callable[[], PrunerState] = PrunerState) -> Renderer:
    """``_core.render`` without a size memo (``sizes=None``)."""

    def run(messages: Messages) -> RenderResult:
        out = _core.render(messages, state_of().index, render_options(Config()), None)
        return RenderResult(
            messages=out.messages,
            pruned=out.pruned,
            before_chars=out.before_chars,
            after_chars=out.after_chars,
            diagnostics=tuple(RenderDiagnostic(*d) for d in out.diagnostics),
            threw=out.threw,
        )

    return run


def probe(messages: Messages, run: Renderer, *, fires: Optional[bool] = None) -> None:
    """Render ``messages`` with the hooks armed; compare with the render of a plain copy."""
    TARGET[:] = messages
    FIRED[0] = 0
    ARMED[0] = True
    try:
        got = run(messages)
    finally:
        ARMED[0] = False
        TARGET.clear()
    expected = run(json.loads(json.dumps(plain(messages))))
    assert (got.pruned, got.threw) == (expected.pruned, expected.threw)
    assert len(got.messages) == len(expected.messages)
    assert plain(got.messages) == plain(expected.messages)
    assert (got.before_chars, got.after_chars) == (expected.before_chars, expected.after_chars)
    assert got.diagnostics == expected.diagnostics
    if fires is not None:
        assert (FIRED[0] > 0) is fires


RENDERERS = {
    "public-empty": public(),
    "public-stubbing": public(stubbing_state),
    "core-no-memo": no_memo(),
    "core-no-memo-stubbing": no_memo(stubbing_state),
}


@pytest.fixture(params=sorted(RENDERERS))
def run(request: pytest.FixtureRequest) -> Renderer:
    return RENDERERS[request.param]


def test_int_subclass_tool_call_id_is_a_number(run: Renderer) -> None:
    """The issue's probe: the id is read as the JS number 7 and the orphan swept, alone."""
    messages = [*session(), tool_result(HostileInt(7))]
    probe(messages, run, fires=False)
    res = run(messages)
    assert len(res.messages) == 180
    assert [d.detail for d in res.diagnostics] == ["swept 1 orphan toolResult(s): 7"]


def test_int_subclass_timestamp(run: Renderer) -> None:
    messages = [*session(), tool_result("call-x", HostileInt(5))]
    probe(messages, run, fires=False)


def test_big_int_subclass_timestamp(run: Renderer) -> None:
    """Beyond a double's range: +-Infinity, told from the sign without ``__lt__``."""
    messages = [
        *session(),
        tool_result("a", HostileInt(-(10**400))),
        tool_result("b", HostileInt(10**400)),
    ]
    probe(messages, run, fires=False)


def test_float_subclass_timestamp(run: Renderer) -> None:
    messages = [*session(), tool_result("call-x", HostileFloat(5.5))]
    probe(messages, run, fires=False)


def test_int_subclass_block_id(run: Renderer) -> None:
    messages = session()
    messages.append(
        {
            "role": "assistant",
            "content": [{"type": "toolCall", "id": HostileInt(9), "name": "read", "arguments": {}}],
            "timestamp": 4000,
        }
    )
    messages.append(tool_result(HostileInt(9), 4001))
    probe(messages, run, fires=False)


def test_opaque_block_with_side_effecting_type_name(run: Renderer) -> None:
    """A content block of a foreign class: read as an unknown block, its type never asked."""
    messages = session()
    messages.insert(
        1,
        {"role": "assistant", "content": [Opaque(), {"type": "text", "text": "t"}], "timestamp": 2},
    )
    TARGET[:] = messages
    ARMED[0], FIRED[0] = True, 0
    try:
        got = run(messages)
    finally:
        ARMED[0] = False
        TARGET.clear()
    assert FIRED[0] == 0
    # Nothing to change: the very same list comes back (an opaque block is not JSON, so the
    # plain copy replaces it by {}, an unknown block too).
    assert not got.pruned
    assert got.messages is messages
    expected = run(json.loads(json.dumps(plain(messages))))
    assert not expected.pruned


def test_list_and_dict_subclasses_are_read_as_their_items(run: Renderer) -> None:
    messages = session()
    for m in messages:
        if m["role"] == "assistant":
            m["content"] = HostileList(m["content"])
    messages = [HostileDict(m) for m in messages] + [tool_result("orphan")]
    probe(messages, run, fires=False)


def test_colliding_key_eq_never_runs(run: Renderer) -> None:
    """A str key hashing like a field name: looking the field up would call its ``__eq__``."""
    messages = session()
    for m in messages:
        for field in ("role", "toolCallId", "content", "timestamp", "isError"):
            m[CollidingKey("x-" + field, field)] = 1
        m.update({k: m.pop(k) for k in list(m) if type(k) is str})  # field keys after the colliders
    for m in messages:
        if m["role"] == "assistant":
            block = m["content"][0]
            for field in ("type", "id"):
                block[CollidingKey("x-" + field, field)] = 1
            block.update({k: block.pop(k) for k in list(block) if type(k) is str})
    messages.append(tool_result("orphan"))
    probe(messages, run, fires=False)


def test_non_str_keys_are_not_fields(run: Renderer) -> None:
    """An object key whose hash is a field's, equal to everything: JSON has no such key."""

    class Joker:
        def __init__(self, field: str) -> None:
            self.field = field

        def __hash__(self) -> int:
            return hash(self.field)

        def __eq__(self, other: object) -> bool:
            if not ARMED[0]:
                return self is other
            _churn()
            return True

    messages = session()
    for m in messages:
        joker = {Joker("toolCallId"): "zzz", Joker("role"): "custom"}
        rest = dict(m)
        m.clear()
        m.update(joker)
        m.update(rest)
    TARGET[:] = messages
    ARMED[0], FIRED[0] = True, 0
    try:
        got = run(messages)
    finally:
        ARMED[0] = False
        TARGET.clear()
    assert FIRED[0] == 0
    assert not got.pruned
    assert got.messages is messages


def test_probes_under_debug_allocator(tmp_path: Path) -> None:
    """The probes again, in a subprocess whose allocator poisons freed memory."""
    assert " passed" in run_under_debug_allocator(__file__, tmp_path)


class StrSub(str):
    pass


class IntSub(int):
    pass


class FloatSub(float):
    pass


class DictSub(dict):  # type: ignore[type-arg]
    pass


class ListSub(list):  # type: ignore[type-arg]
    pass


def disguise(value: Any, rng: random.Random, rate: float) -> Any:
    """``value`` with some of its parts turned into subclass instances of equal value."""
    if isinstance(value, dict):
        out = {disguise_key(k, rng, rate): disguise(v, rng, rate) for k, v in value.items()}
        return DictSub(out) if rng.random() < rate else out
    if isinstance(value, list):
        items = [disguise(v, rng, rate) for v in value]
        return ListSub(items) if rng.random() < rate else items
    if rng.random() >= rate or isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return StrSub(value)
    if isinstance(value, int):
        return IntSub(value)
    if isinstance(value, float):
        return FloatSub(value)
    return value


def disguise_key(key: str, rng: random.Random, rate: float) -> str:
    return StrSub(key) if rng.random() < rate else key


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), rate=st.sampled_from([0.05, 0.3, 1.0]))
def test_a_memoised_render_of_disguised_values_is_the_plain_render(seed: int, rate: float) -> None:
    """Subclass instances anywhere: the memoised renders equal the render of a plain copy."""
    rng = random.Random(seed)
    base = [*session(12), tool_result("orphan", 7), tool_result(5, 9)]
    state = stubbing_state()
    for _ in range(3):
        messages = disguise(base, rng, rate)
        expected = render(json.loads(json.dumps(plain(messages))), stubbing_state(), Config())
        for _ in range(2):
            got = render(messages, state, Config())
            assert plain(got.messages) == plain(expected.messages)
            assert (got.pruned, got.before_chars, got.after_chars, got.diagnostics) == (
                expected.pruned,
                expected.before_chars,
                expected.after_chars,
                expected.diagnostics,
            )


class CountingMeta(type):
    """A metaclass whose ``__name__`` counts its calls."""

    calls = 0

    @property
    def __name__(self) -> str:  # type: ignore[override]
        CountingMeta.calls += 1
        return "_Absent"


class _Absent(metaclass=CountingMeta):  # the sentinel's class name, another class
    pass


def test_chain_scan_tells_absent_by_identity_not_by_a_type_name() -> None:
    # Chain detection reads a missing message (None or ABSENT) as the reference's null one and
    # throws; an object whose type merely claims the sentinel's name is an object there, as
    # `{}` is, and its metaclass is never asked for the name.
    from pi_condense.chains import detect_chains

    call = {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "a"}}
    result = {
        "role": "toolResult",
        "toolCallId": "c1",
        "toolName": "read",
        "isError": False,
        "content": [{"type": "text", "text": "x"}],
        "timestamp": 3,
    }
    head: list[Any] = [
        {"role": "user", "content": "go", "timestamp": 1},
        {"role": "assistant", "content": [call], "stopReason": "toolUse", "timestamp": 2},
    ]
    tail = [
        result,
        {"role": "assistant", "content": [{"type": "text", "text": "ok"}], "timestamp": 4},
    ]
    CountingMeta.calls = 0
    odd = detect_chains([*head, _Absent(), *tail])
    assert CountingMeta.calls == 0
    plain = detect_chains([*head, {}, *tail])
    assert [(c.closed, c.lookup_keys) for c in odd] == [(c.closed, c.lookup_keys) for c in plain]
    with pytest.raises(TypeError):
        detect_chains([*head, ABSENT, *tail])


class BranchCutter(str):
    """A key whose hash is ``customType``'s, in an entry that has no ``customType``: the
    state rebuild's lookup of it must compare with this key, and the comparison empties the
    branch being read (its entries are freed unless someone else holds them)."""

    branch: list[Any]

    def __hash__(self) -> int:
        return hash("customType")

    def __eq__(self, other: object) -> bool:
        if self.branch:
            del self.branch[:]
            _ = [("J" * 37) + str(i) for i in range(50000)]
        return str.__eq__(self, other)  # type: ignore[no-any-return]

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)


def test_state_rebuild_of_a_branch_emptied_while_it_is_read() -> None:
    """The rebuild reads a list by index with look-ahead hints: a branch that a lookup's
    ``__eq__`` empties midway is read up to there, as iterating it would read it."""
    import gzip

    from pi_condense.session import SessionFile

    vector = Path(__file__).parents[1] / "data/conformance/replay/large-default/session.jsonl.gz"
    entries = SessionFile.parse(gzip.decompress(vector.read_bytes())).branch()
    first = next(i for i, e in enumerate(entries) if e.get("customType") == "context-prune-index")
    cut = next(
        i
        for i, e in enumerate(entries)
        if i > first + 5 and e.get("customType") == "context-prune-chain"
    )
    seen = [json.loads(json.dumps(e)) for e in entries[:cut]]
    branch = [json.loads(json.dumps(e)) for e in entries]
    del branch[cut]["customType"]  # a custom entry of no type: the rebuild skips it
    key = BranchCutter("hostile")
    key.branch = []
    branch[cut][key] = 1  # armed once it is in the entry (the insertion compares too)
    key.branch = branch
    state = PrunerState.from_branch(branch)
    assert branch == []
    assert repr(state) == repr(PrunerState.from_branch(seen))
    assert 0 < state.index.record_count < PrunerState.from_branch(entries).index.record_count

"""The native JS reader (rust/py/src/jsread.rs) seen from Python: the ``ABSENT`` sentinel and
JS ``String()`` of odd ids.

``ABSENT`` is created by ``_core`` and re-exported by ``pi_condense.session``; the native readers
tell it by identity. ``String(array)`` follows ``Array.prototype.join``: nullish elements print
as ``""``, an array that contains itself prints as ``""`` where it recurs (the join's cycle
check), and strings keep their exact code units.
"""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest

from pi_condense import _core, session
from pi_condense.chains import detect_chains


def test_session_absent_is_the_native_sentinel() -> None:
    assert session.ABSENT is _core.ABSENT
    assert repr(_core.ABSENT) == "ABSENT"
    assert not _core.ABSENT


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_absent_pickles_as_itself(protocol: int) -> None:
    assert pickle.loads(pickle.dumps(_core.ABSENT, protocol)) is _core.ABSENT
    # A pickle made when the sentinel lived in pi_condense.session still loads it.
    assert pickle.loads(b"cpi_condense.session\nABSENT\n.") is _core.ABSENT


def test_absent_copies_as_itself_and_cannot_be_made_again() -> None:
    assert copy.copy(_core.ABSENT) is _core.ABSENT
    assert copy.deepcopy({"a": [_core.ABSENT]})["a"][0] is _core.ABSENT
    with pytest.raises(TypeError):
        type(_core.ABSENT)()


def _chain(call_id: Any) -> list[dict[str, Any]]:
    call = {"type": "toolCall", "id": call_id, "name": "read", "arguments": {"path": "a"}}

    def result(ts: int) -> dict[str, Any]:
        return {
            "role": "toolResult",
            "toolCallId": call_id,
            "toolName": "read",
            "isError": False,
            "content": [{"type": "text", "text": "x"}],
            "timestamp": ts,
        }

    return [
        {"role": "user", "content": "go", "timestamp": 1},
        {"role": "assistant", "content": [call], "stopReason": "toolUse", "timestamp": 2},
        result(3),
        {"role": "assistant", "content": [call], "stopReason": "toolUse", "timestamp": 4},
        result(5),
        {"role": "assistant", "content": [{"type": "text", "text": "ok"}], "timestamp": 6},
    ]


def _keys(call_id: Any) -> list[list[str]]:
    return [list(c.lookup_keys) for c in detect_chains(_chain(call_id))]


def test_string_of_an_array_id_joins_its_elements() -> None:
    # JS: `${["x", 1.5, null, true, undefined]}@3` is "x,1.5,,true,@3".
    assert _keys(["x", 1.5, None, True, _core.ABSENT]) == [["x,1.5,,true,@3", "x,1.5,,true,@5"]]


def test_string_of_an_array_that_contains_itself_stops_at_the_cycle() -> None:
    # JS: a = ["x", 2]; a.push(a); String(a) is "x,2," (join skips the array it is joining).
    cyclic: list[Any] = ["x", 2]
    cyclic.append(cyclic)
    assert _keys(cyclic) == [["x,2,@3", "x,2,@5"]]


def test_string_of_an_array_keeps_lone_surrogates() -> None:
    # JS: String(["a", ["\ud800", 2]]) is "a,\ud800,2", the lone surrogate kept.
    assert _keys(("a", ["\ud800", 2])) == [["a,\ud800,2@3", "a,\ud800,2@5"]]


def test_string_of_a_list_subclass_never_calls_its_iter() -> None:
    class Loud(list[Any]):
        def __iter__(self) -> Any:
            raise AssertionError("__iter__ called")

    assert _keys(Loud(["p", "q"])) == [["p,q@3", "p,q@5"]]


def test_a_str_subclass_with_lone_surrogates_is_read_without_its_encode() -> None:
    # The reader encodes such a str in C (surrogatepass): the subclass's `encode` never runs,
    # and the render is that of the plain str.
    from pi_condense.config import Config
    from pi_condense.render import render
    from pi_condense.state import PrunerState

    class Loud(str):
        def encode(self, *args: Any, **kwargs: Any) -> bytes:
            raise AssertionError("encode called")

    def messages(call_id: str) -> list[dict[str, Any]]:
        call = {"type": "toolCall", "id": call_id, "name": "read", "arguments": {}}
        return [
            {"role": "user", "content": "go", "timestamp": 1},
            {"role": "assistant", "content": [call], "timestamp": 2},
            {
                "role": "toolResult",
                "toolCallId": call_id,
                "toolName": "read",
                "isError": False,
                "content": [{"type": "text", "text": "r"}],
                "timestamp": 3,
            },
        ]

    odd = render(messages(Loud("c\ud8001")), PrunerState(), Config())
    plain = render(messages("c\ud8001"), PrunerState(), Config())
    assert (odd.pruned, len(odd.messages)) == (plain.pruned, len(plain.messages)) == (False, 3)

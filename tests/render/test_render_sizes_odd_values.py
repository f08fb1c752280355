"""The sizes a render reports, for values of every kind the measuring walk meets.

Every expected size is ``jsjson.length`` (JS ``JSON.stringify(...).length``, checked against
the reference's vectors in js/test_jsjson.py) of the very list rendered.
"""

from __future__ import annotations

from typing import Any

import pytest

from pi_condense.js import json as jsjson
from pi_condense.render import render
from support.builders import NO_CHAIN, example


class Text(str):
    pass


class Count(int):
    pass


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for i in range(depth):
        value = {"k": [value, i]} if i % 2 else [value, {"d": i}]
    return value


def _lists(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value, 1]
    return value


ODD_VALUES = {
    "deep-dict-and-list": _nested(40),
    "dict-and-list": _nested(12),
    # Lists nested 22-27 levels deep (the message, `usage` and `odd` add three).
    **{f"lists-{n}": _lists(n) for n in (19, 20, 21, 22, 23, 24)},
    "tuple": (1, "two", 3.5),
    "str-subclass": Text("sub \u00e9"),
    "int-subclass": Count(7),
    "big-int": 2**80,
    "huge-int": 10**400,
    "negative-zero": -0.0,
    "floats": [1e21, 1.5e-7, 0.1, float("inf"), float("nan")],
    "non-ascii": "caf\u00e9 \u2028 \U0001f600 \ud800",
    "escapes": 'q"\\\n\t\x01',
    "bools-and-null": [True, False, None],
    "empty": [{}, [], ""],
}


@pytest.mark.parametrize("name", list(ODD_VALUES))
def test_the_reported_sizes_are_the_js_lengths(name: str) -> None:
    messages, state = example()
    messages[1]["usage"] = {"odd": ODD_VALUES[name]}
    messages[2]["details"] = {"odd": ODD_VALUES[name]}
    res = render(messages, state, NO_CHAIN)
    assert res.pruned
    assert res.before_chars == jsjson.length(messages)
    assert res.after_chars == jsjson.length(res.messages)


@pytest.mark.parametrize(
    ("odd", "error"),
    [({"fine": [1, 2], "odd": {1, 2}}, "set"), ({"b": 2, 1: "one"}, "keys must be str")],
    ids=["set", "int-key"],
)
def test_a_value_json_cannot_hold_raises_the_walks_error(odd: Any, error: str) -> None:
    messages, state = example()
    messages[1]["usage"] = odd
    with pytest.raises(TypeError, match=error):
        render(messages, state, NO_CHAIN)


def test_the_first_error_in_list_order_is_raised() -> None:
    # The measuring walk reads the messages breadth-first: a problem deep in a message
    # still comes before a shallow one in a later message, as JSON.stringify meets them.
    messages, state = example()
    messages[1]["usage"] = {"deep": [[[[{"odd": {1, 2}}]]]]}
    messages[2]["details"] = b"x"
    with pytest.raises(TypeError, match="set"):
        render(messages, state, NO_CHAIN)
    messages[1]["usage"] = {"deep": [[[[{"fine": 1}]]]], "later": {3: "key"}}
    with pytest.raises(TypeError, match="keys must be str"):
        render(messages, state, NO_CHAIN)

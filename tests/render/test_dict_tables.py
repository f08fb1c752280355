"""Dicts whose hash tables are not the compact ones a JSON parser builds.

Where the interpreter's layout is known (``_core.layout_features()["dict_entries"]``) the
render reads a dict's members straight from its table: deleted entries leave holes in it,
a table that ever held a non-str key keeps the general entry form (with hashes), and a
larger dict has wider indices before its entries. Each is rendered here and compared with
the render of a plain JSON copy and with ``json.dumps`` lengths (an oracle outside the
package); an instance's ``__dict__`` (a split table) and dict subclasses are read through
the C API and must agree too.
"""

from __future__ import annotations

import json
from typing import Any, Callable

import pytest

from pi_condense.js import json as jsjson
from pi_condense.render import render
from support.builders import assert_same_render, cfg, example, utf16_len

Messages = list[Any]

CONFIG = cfg(recoveryGraceTurns=0)


def json_len(value: Any) -> int:
    """``JSON.stringify(value).length`` for the ASCII, integer-only values used here."""
    return utf16_len(json.dumps(value, separators=(",", ":"), ensure_ascii=False))


def with_holes(d: dict[str, Any]) -> dict[str, Any]:
    """The same members in the same order, in a table with a deleted entry before each."""
    out: dict[Any, Any] = {}
    for i, (key, value) in enumerate(d.items()):
        out[f"__gone{i}"] = None
        out[key] = value
        del out[f"__gone{i}"]
    return out


def general_table(d: dict[str, Any]) -> dict[str, Any]:
    """The same members in a table that once held a non-str key (entries keep hashes)."""
    out: dict[Any, Any] = {0: "gone"}
    out.update(d)
    del out[0]
    return out


def wide_table(d: dict[str, Any]) -> dict[str, Any]:
    """The same members after 400 others came and went (two-byte indices, many holes)."""
    out: dict[Any, Any] = {f"__gone{i}": i for i in range(400)}
    out.update(d)
    for i in range(400):
        del out[f"__gone{i}"]
    return out


class Attrs:
    pass


def split_table(d: dict[str, Any]) -> Any:
    """A dict of the same members that is an instance's ``__dict__`` when it can be."""
    holder = Attrs()
    for key, value in d.items():
        if key.isidentifier():
            setattr(holder, key, value)
    if holder.__dict__ != d:
        return dict(d)
    return holder.__dict__


class Sub(dict):  # type: ignore[type-arg]
    pass


def rebuild(value: Any, table: Callable[[dict[str, Any]], Any]) -> Any:
    if isinstance(value, dict):
        return table({k: rebuild(v, table) for k, v in value.items()})
    if isinstance(value, list):
        return [rebuild(v, table) for v in value]
    return value


TABLES = [with_holes, general_table, wide_table, split_table, Sub]


def session() -> tuple[Messages, Any]:
    messages, state = example()
    # Members the phases read (role, content, ids, timestamps) and others, at every depth.
    messages[1]["content"][0]["arguments"] = {"cmd": "ls", "opts": {"a": [1, {"b": "c"}]}}
    messages[0]["meta"] = {f"k{i}": i for i in range(300)}
    return messages, state


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.__name__)
def test_every_table_form_renders_as_its_json_copy(table: Callable[[dict[str, Any]], Any]) -> None:
    messages, state = session()
    plain = json.loads(json.dumps(messages))
    rebuilt = rebuild(plain, table)
    assert rebuilt == plain
    expected = render(plain, state, CONFIG)
    for _ in range(2):  # measured, then the memo's check of the same objects
        res = render(rebuilt, state, CONFIG)
        assert_same_render(res, expected)
        assert res.pruned
        assert res.before_chars == json_len(plain)
        assert res.after_chars == json_len(res.messages)
    state.render_cache.clear()
    assert_same_render(render(rebuilt, state, CONFIG), expected)


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.__name__)
def test_lengths_of_every_table_form(table: Callable[[dict[str, Any]], Any]) -> None:
    messages, _ = session()
    plain = json.loads(json.dumps(messages))
    rebuilt = rebuild(plain, table)
    assert jsjson.length(rebuilt) == json_len(plain)
    assert jsjson.dumps(rebuilt) == json.dumps(plain, separators=(",", ":"))


def test_a_dict_changed_between_renders_is_read_again() -> None:
    messages, state = session()
    rebuilt = rebuild(json.loads(json.dumps(messages)), with_holes)
    render(rebuilt, state, CONFIG)
    meta = rebuilt[0]["meta"]
    del meta["k5"]
    meta["k5"] = "moved to the end"
    res = render(rebuilt, state, CONFIG)
    assert res.before_chars == json_len(rebuilt)
    assert list(res.messages[0]["meta"])[-1] == "k5"

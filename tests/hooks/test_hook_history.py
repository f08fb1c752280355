"""The hooks' check that a host's history needs no conversion (``LiveHook._history``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pi_condense import _core
from pi_condense.integrations.openai_chat import ChatCondenser


class Sub(dict[str, Any]):
    pass


class Items(list[Any]):
    pass


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        ([], True),
        ([{"role": "user", "content": "hi"}, {}], True),
        ([{}, Sub(role="user")], False),
        ([Sub()], False),
        ([{}, None], False),
        ([{}, "text", {}], False),
        ([[{}]], False),
        (Items([{}, {}]), True),
        (Items([{}, Sub()]), False),
    ],
)
def test_all_exact_dicts(items: list[Any], expected: bool) -> None:
    assert _core.all_exact_dicts(items) is expected


def test_all_exact_dicts_takes_only_lists() -> None:
    with pytest.raises(TypeError):
        _core.all_exact_dicts(({},))  # type: ignore[arg-type]


def test_a_history_of_plain_dicts_is_handed_on_as_it_is(tmp_path: Path) -> None:
    hook = ChatCondenser(session=tmp_path / "chat.jsonl")
    try:
        items: list[Any] = [{"role": "user", "content": f"m{i}"} for i in range(5)]
        assert hook._history(items) is items
        empty: list[Any] = []
        assert hook._history(empty) is empty
        sub = Sub(role="user", content="x")
        mixed: list[Any] = [items[0], sub]
        out = hook._history(mixed)
        assert out is not mixed
        assert out == mixed
        assert out[1] is sub
        subclassed = Items(items)
        out = hook._history(subclassed)
        assert type(out) is list
        assert all(a is b for a, b in zip(out, items, strict=True))
        as_tuple = tuple(items)
        out = hook._history(as_tuple)
        assert type(out) is list
        assert out == items
    finally:
        hook.close()

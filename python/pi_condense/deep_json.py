"""An iterative JSON parser for texts nested too deep for orjson (1024) or ``json`` (the
recursion limit).

``JSON.parse`` accepts any depth memory allows, and so does this parser: containers are kept
on a list, not the call stack. It gives what :func:`pi_condense.js.json.loads` gives for
shallower texts (a repeated key keeps its first position and takes the last value, integers
within 64 bits stay ints, other numbers are floats, escaped lone surrogates are kept) and is
only used when the fast parsers refuse the depth: it is a few times slower.
"""

from __future__ import annotations

import re
from json.decoder import JSONDecodeError
from json.decoder import scanstring as _scanstring  # type: ignore[attr-defined]
from typing import Any, Callable, Union

from .errors import JsonError

__all__ = ["deep_loads"]

_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"(-?(?:0|[1-9][0-9]*))(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_LITERALS: tuple[tuple[str, Any], ...] = (("true", True), ("false", False), ("null", None))

Container = Union[list[Any], dict[str, Any]]
_scan: Callable[[str, int, bool], tuple[str, int]] = _scanstring


def _error(text: str, pos: int, message: str) -> JsonError:
    line = text.count("\n", 0, pos) + 1
    column = pos - text.rfind("\n", 0, pos)
    return JsonError(f"{message}: line {line} column {column} (char {pos})")


def deep_loads(text: str, parse_int: Callable[[str], Union[int, float]]) -> tuple[Any, int]:
    """Parse ``text`` (one JSON value, optional surrounding whitespace); ``parse_int`` turns
    an integer literal into its value. Returns the value and its nesting depth (``[[]]``: 2).

    Raises:
        JsonError: the text is not valid JSON (with line, column and char).
    """
    stack: list[tuple[Container, str]] = []  # open container, pending object key
    depth = 0
    pos = _WS.match(text, 0).end()  # type: ignore[union-attr]
    while True:
        # A value starts at pos.
        char = text[pos : pos + 1]
        value: Any
        if char == "[" or char == "{":
            pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
            close = "]" if char == "[" else "}"
            depth = max(depth, len(stack) + 1)
            if text[pos : pos + 1] == close:
                value = [] if char == "[" else {}
                pos += 1
            elif char == "[":
                stack.append(([], ""))
                continue
            else:
                key, pos = _key(text, pos)
                stack.append(({}, key))
                continue
        elif char == '"':
            try:
                value, pos = _scan(text, pos + 1, True)
            except JSONDecodeError as exc:
                raise _error(text, exc.pos, exc.msg) from None
        else:
            value, pos = _scalar(text, pos, parse_int)
        # Close every container the value completes.
        while True:
            pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
            if not stack:
                if pos != len(text):
                    raise _error(text, pos, "Extra data")
                return value, depth
            container, key = stack[-1]
            if isinstance(container, list):
                container.append(value)
            else:
                container[key] = value
            char = text[pos : pos + 1]
            if char == ",":
                pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
                if isinstance(container, dict):
                    key, pos = _key(text, pos)
                    stack[-1] = (container, key)
                break
            if char == ("]" if isinstance(container, list) else "}"):
                stack.pop()
                value = container
                pos += 1
                continue
            raise _error(text, pos, "Expecting ',' delimiter")


def _key(text: str, pos: int) -> tuple[str, int]:
    """An object key and its ``:`` at ``pos``; returns the key and where its value starts."""
    if text[pos : pos + 1] != '"':
        raise _error(text, pos, "Expecting property name enclosed in double quotes")
    try:
        key, pos = _scan(text, pos + 1, True)
    except JSONDecodeError as exc:
        raise _error(text, exc.pos, exc.msg) from None
    pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
    if text[pos : pos + 1] != ":":
        raise _error(text, pos, "Expecting ':' delimiter")
    return key, _WS.match(text, pos + 1).end()  # type: ignore[union-attr]


def _scalar(text: str, pos: int, parse_int: Callable[[str], Union[int, float]]) -> tuple[Any, int]:
    for literal, value in _LITERALS:
        if text.startswith(literal, pos):
            return value, pos + len(literal)
    number = _NUMBER.match(text, pos)
    if number is None:
        if text.startswith("-Infinity", pos):
            # Where `loads` (and JSON.parse) put it: at the literal after the minus sign.
            raise _error(text, pos + 1, "No number after minus sign: unexpected token 'I'")
        raise _error(text, pos, "Expecting value")
    integer, fraction, exponent = number.groups()
    if fraction or exponent:
        return float(integer + (fraction or "") + (exponent or "")), number.end()
    return parse_int(integer), number.end()

"""JSON with JavaScript semantics: what `JSON.parse` accepts, what `JSON.stringify` prints.

`dumps` reproduces `JSON.stringify` byte for byte: array-index keys (`"0"`, `"2"`, not
`"01"`) first in ascending order, then insertion order; numbers formatted as JS does
(`1.0` -> `1`, `1e21` -> `1e+21`, NaN/Infinity -> `null`, ints beyond 2**53 rounded to the
nearest double); lone surrogates escaped as `\\udxxx`; U+2028/U+2029 and `/` left raw.
`length` is the UTF-16 length of that text (JS `.length`), computed without building it.

`loads` accepts exactly `JSON.parse`'s grammar, including escaped lone surrogates and
numbers beyond the double range (`1e400` -> `inf`), and rejects `NaN`/`Infinity` literals.
"""

from __future__ import annotations

import json
from typing import Any, NoReturn, Union

import orjson

from .._core import (
    loads_deep,
    reformat_json,
    reload_copies,
    stringify,
    stringify_bytes,
    stringify_len,
    stringify_lines,
)
from .._core import utf8_len as _utf8_len
from .._core import utf16_len as _utf16_len
from ..errors import JsonError

__all__ = [
    "MAX_DEPTH",
    "dumps",
    "dumps_bytes",
    "dumps_lines",
    "length",
    "loads",
    "loads_with_depth",
    "reformat",
    "reloaded",
    "utf8_len",
    "utf16_len",
]

MAX_DEPTH = 1024
"""The deepest nesting `dumps`, `length` and the render serialize (`loads` takes any)."""

_I64_MIN = -(2**63)
_U64_MAX = 2**64 - 1


class _ConstantRejected(Exception):
    """Raised from the fallback decoder on `NaN` / `Infinity` / `-Infinity` literals."""


def _reject_constant(name: str) -> NoReturn:
    raise _ConstantRejected(name)


def _parse_int(literal: str) -> int | float:
    # Integers outside the 64-bit range become floats, as on the orjson path.
    if len(literal) <= 18:
        return int(literal)
    if len(literal) <= 21:
        value = int(literal)
        if _I64_MIN <= value <= _U64_MAX:
            return value
    return float(literal)


_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_int=_parse_int)


def _fallback_loads(text: str) -> tuple[Any, int]:
    try:
        return _DECODER.decode(text), 0
    except RecursionError:
        # Deeper than the recursion limit (orjson stops at 1024): JSON.parse takes any depth.
        return loads_deep(text)
    except json.JSONDecodeError as exc:
        raise JsonError(
            f"{exc.msg}: line {exc.lineno} column {exc.colno} (char {exc.pos})"
        ) from None
    except _ConstantRejected as exc:
        # The Rust parser follows JSON.parse too and reports where the literal is.
        reformat_json(text)
        raise JsonError(f"{exc.args[0]} is not valid JSON") from None


def loads(text: Union[str, bytes, bytearray, memoryview]) -> Any:
    """Parse a JSON text as `JSON.parse` does.

    Bytes are decoded as UTF-8, invalid sequences replaced by U+FFFD (as Node reads
    files). Objects become dicts (a repeated key keeps its first position and takes the
    last value), integers that fit 64 bits stay ints, other numbers become floats. Any
    nesting depth is accepted, as far as memory allows (beyond about 1000 levels through the
    core's parser, `_core.loads_deep`).

    Raises:
        JsonError: the text is not valid JSON; the message gives line, column and char.
    """
    return loads_with_depth(text)[0]


def loads_with_depth(text: Union[str, bytes, bytearray, memoryview]) -> tuple[Any, int]:
    """`loads(text)`, and the value's nesting depth when the fast parsers could not take it
    (0 otherwise: then it is at most 1024). `dumps` refuses a value nested deeper than
    `MAX_DEPTH`: such a value can be read, not written back.

    Raises:
        JsonError: as `loads`.
    """
    try:
        return orjson.loads(text), 0
    except orjson.JSONDecodeError as exc:
        too_deep = str(exc).startswith("depth limit exceeded")
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = bytes(text).decode("utf-8", errors="replace")
    if too_deep:
        # Not the standard library's parser: how deep it reads depends on the interpreter
        # (3.13 reads far deeper than 3.11), and JSON.parse reads any depth.
        return loads_deep(text)
    return _fallback_loads(text)


def dumps(value: Any, indent: int | None = None) -> str:
    """`JSON.stringify(value)`, or `JSON.stringify(value, null, indent)`.

    Accepts dict (str keys only), list, tuple, str, int, float, bool and None.

    Raises:
        TypeError: an unsupported type, or a dict key that is not a str.
        ValueError: nesting deeper than 1024 levels (e.g. a circular reference).
    """
    return stringify(value, indent)


def dumps_bytes(value: Any, indent: int | None = None) -> bytes:
    """`dumps(value, indent)` encoded as UTF-8, without the intermediate `str`.

    Raises the same errors as `dumps`.
    """
    return stringify_bytes(value, indent)


def dumps_lines(values: list[Any]) -> bytes:
    """`dumps` of each of `values`, each followed by a newline, as UTF-8: their JSON Lines
    text in one buffer.

    Raises the same errors as `dumps`.
    """
    return stringify_lines(values)


def reloaded(values: list[Any]) -> list[Any]:
    """`loads(dumps(value))` of each of `values`: new dicts and lists equal to what their text
    reads back as (the same types and key order), holding the values' own `str`, `int`,
    `float`, `bool` and `None` objects; only a value whose text reads back as something else
    (an array-index key, an int beyond 2**53, a float such as `1.0`, a tuple, a subclass)
    is written and parsed. Call it on values `dumps` accepts."""
    copies, missed = reload_copies(values)
    for index in missed:
        copies[index] = loads(dumps(values[index]))
    return copies


def length(value: Any) -> int:
    """`JSON.stringify(value).length`: UTF-16 code units, without building the text.

    Raises the same errors as `dumps`.
    """
    return stringify_len(value)


def reformat(text: str, indent: int | None = None) -> str:
    """`JSON.stringify(JSON.parse(text), null, indent)` without Python objects in between.

    Raises:
        JsonError: the text is not valid JSON.
    """
    return reformat_json(text, indent)


def utf16_len(s: str) -> int:
    """JS `s.length`: the number of UTF-16 code units (an emoji counts 2)."""
    return _utf16_len(s)


def utf8_len(s: str) -> int:
    """`Buffer.byteLength(s, "utf8")`: a lone surrogate counts 3 bytes (as U+FFFD)."""
    return _utf8_len(s)

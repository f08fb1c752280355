"""JavaScript value semantics over JSON values, in one place.

Pi and the reference extension are JavaScript: wherever they test a value (``if (x)``),
print it (``String(x)``, a template literal), compare it (``===``), or read a number out of
text (``Number``, ``parseInt``, ``parseFloat``), the port must get the same answer for every
JSON value, including the odd ones a hand-edited file holds. Two sentinels stand for
``undefined``:

- :data:`ABSENT`: an omitted optional value that callers may pass or store (an entry field
  that is never written, a missing ``data``); the Rust core reads it as a missing key.
- :data:`MISSING`: what :func:`get_field` returns for an absent key; internal to readers.

Every function here treats both as ``undefined``.
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Optional

from .._core import ABSENT as _NATIVE_ABSENT
from .json import dumps

__all__ = [
    "ABSENT",
    "JS_WHITESPACE",
    "MISSING",
    "get_field",
    "is_number",
    "is_undefined",
    "js_round",
    "js_utf8",
    "map_key",
    "parse_float",
    "parse_int",
    "strict_equal",
    "to_fixed",
    "to_number",
    "to_string",
    "trim",
    "truthy",
    "typeof",
]


ABSENT: Any = _NATIVE_ABSENT
"""An absent optional value (JS ``undefined``): the key is omitted, never written as ``null``.

The native module's own sentinel (``_core.ABSENT``), which the native readers tell by identity;
falsy, and pickled and copied as itself."""

MISSING: Any = object()
"""JavaScript ``undefined`` as :func:`get_field` reports a field that is absent."""

JS_WHITESPACE = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)
"""What ``String.prototype.trim`` strips (differs from Python's ``str.isspace``)."""

_INT_PREFIX = re.compile(r"[+-]?[0-9]+")
_FLOAT_PREFIX = re.compile(r"[+-]?(?:Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)")
_NUMBER_LITERAL = re.compile(
    r"[+-]?(?:Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)"
    r"|0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+"
)


def is_undefined(value: Any) -> bool:
    """``value === undefined``: :data:`ABSENT` or :data:`MISSING`."""
    return value is ABSENT or value is MISSING


def is_number(value: Any) -> bool:
    """``typeof value === "number"`` (int or float, NaN included, not bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def get_field(obj: Any, key: str) -> Any:
    """``obj?.key``: :data:`MISSING` when absent or ``obj`` is no object."""
    return obj.get(key, MISSING) if isinstance(obj, dict) else MISSING


def trim(text: str) -> str:
    """``text.trim()``."""
    return text.strip(JS_WHITESPACE)


def truthy(value: Any) -> bool:
    """JS truthiness: objects and arrays are truthy even when empty; ``undefined`` is not."""
    if value is None or value is ABSENT or value is MISSING:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value != 0 and not math.isnan(value)
    if isinstance(value, str):
        return value != ""
    return True


def typeof(value: Any) -> str:
    """``typeof value`` (``null`` and arrays are ``"object"``, as in JavaScript)."""
    if is_undefined(value):
        return "undefined"
    if isinstance(value, bool):
        return "boolean"
    if is_number(value):
        return "number"
    if isinstance(value, str):
        return "string"
    return "object"


def _number_text(value: float) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        if math.isnan(value):
            return "NaN"
        return "Infinity" if value > 0 else "-Infinity"
    return dumps(value)


def to_string(value: Any) -> str:
    """``String(value)``: ``undefined``, ``null``, numbers as JS prints them (``1``, ``1e+21``,
    ``NaN``), arrays (lists, tuples) joined with ``,`` (nullish elements empty), any other
    object ``[object Object]``."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if value is ABSENT or value is MISSING:
        return "undefined"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return _number_text(value)
    if isinstance(value, (list, tuple)):
        return ",".join(
            "" if v is None or v is ABSENT or v is MISSING else to_string(v) for v in value
        )
    return "[object Object]"


def to_number(value: Any) -> float:
    """``Number(value)``: ``null`` is 0, ``undefined`` NaN, strings as numeric literals
    (trimmed; empty is 0; ``0x``/``0o``/``0b``, ``Infinity``), objects through ``String()``."""
    if value is None:
        return 0.0
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if is_number(value):
        return float(value)
    if is_undefined(value):
        return math.nan
    text = trim(value if isinstance(value, str) else to_string(value))
    if text == "":
        return 0.0
    if _NUMBER_LITERAL.fullmatch(text) is None:
        return math.nan
    if text[:2].lower() in ("0x", "0o", "0b"):
        return float(int(text, 0))
    return float(text)


def parse_int(text: str) -> Optional[int]:
    """``parseInt(text, 10)``; ``None`` where JS yields NaN or an infinite value.

    Leading JS whitespace is skipped, an optional sign is accepted and the longest digit
    prefix is read: ``"12abc"`` -> 12, ``"0x10"`` -> 0, ``"abc"`` -> None.
    """
    match = _INT_PREFIX.match(text.lstrip(JS_WHITESPACE))
    if match is None:
        return None
    # Through float: JS numbers are doubles, so long digit runs round (or overflow).
    value = float(match.group())
    return int(value) if math.isfinite(value) else None


def parse_float(text: str) -> Optional[float]:
    """``parseFloat(text)``; ``None`` where JS yields NaN or an infinite value.

    ``"0.8abc"`` -> 0.8, ``".5"`` -> 0.5, ``"1e"`` -> 1.0, ``"abc"`` -> None.
    """
    match = _FLOAT_PREFIX.match(text.lstrip(JS_WHITESPACE))
    if match is None:
        return None
    value = float(match.group())
    return value if math.isfinite(value) else None


def strict_equal(a: Any, b: Any) -> bool:
    """``a === b``: numbers by value (NaN unequal, ``0 === -0``), strings by content, objects
    and arrays by identity, ``undefined`` only with ``undefined``."""
    if type(a) is str and type(b) is str:  # the common case, first
        return a == b
    if is_undefined(a) or is_undefined(b):
        return is_undefined(a) and is_undefined(b)
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return bool(a == b)
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    return a is b


_MAX_EXACT = 2**53


def _as_double(value: int) -> float:
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def map_key(value: Any) -> Any:
    """A hashable stand-in with JS ``Map`` / ``Set`` key identity (SameValueZero): strings by
    content, numbers by their double's value (``0`` and ``-0`` alike, NaN equal to NaN, ints
    past 2**53 rounded as JS reads them), objects by identity."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return ("#bool", value)
    if isinstance(value, float):
        return ("#nan",) if value != value else ("#num", value)
    if isinstance(value, int):
        return ("#num", value if -_MAX_EXACT <= value <= _MAX_EXACT else _as_double(value))
    if value is None:
        return ("#null",)
    if value is ABSENT or value is MISSING:
        return ("#undefined",)
    return ("#object", id(value))


def js_round(x: float) -> int:
    """``Math.round`` of a finite number: halves round toward +infinity (``x + 0.5`` floored
    would round ``0.49999999999999994`` up, as the sum is exactly 1)."""
    r = math.floor(x)
    return int(r + 1 if x - r >= 0.5 else r)


def to_fixed(x: float, digits: int) -> str:
    """``Number.prototype.toFixed``: the exact double, ties rounded away from zero."""
    quantum = Decimal(1).scaleb(-digits)
    return str(Decimal(x).quantize(quantum, rounding=ROUND_HALF_UP))


def js_utf8(text: str) -> bytes:
    """UTF-8 bytes of a JavaScript string: surrogate pairs joined, lone surrogates as U+FFFD."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        units = text.encode("utf-16-le", "surrogatepass")
        return units.decode("utf-16-le", "replace").encode("utf-8")

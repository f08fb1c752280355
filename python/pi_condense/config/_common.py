"""Helpers shared by the config modules: how values are named in messages, the key
spelling rules, and numbers as the reference's comparisons read them."""

from __future__ import annotations

import copy
import difflib
import json
import math
import re
from collections.abc import Mapping
from typing import Any, Optional

from ..errors import ConfigError
from ..js.values import MISSING, is_number, to_number, typeof
from .defaults import ALL_DEFAULTS, SETTINGS_KEY, SUMMARIZER_PRICE_KEYS

MAX_SAFE_INTEGER = 2**53


def type_name(value: Any) -> str:
    # The type named in messages: unlike ``typeof``, arrays are "array", null is "null".
    if value is None:
        return "null"
    if isinstance(value, list):
        return "array"
    kind = typeof(value)
    return "object" if kind == "undefined" else kind


def reference_count(value: Any) -> Optional[int]:
    """A threshold as the reference's comparisons see it, as an integer (None = NaN).

    Every use compares an integer with the value (``age < cooldownTurns``,
    ``length < minArgChars``) or slices with ``n - rollingWindow``; for integers those
    behave exactly like comparing with ``ceil(value)``.
    """
    number = to_number(value)
    if math.isnan(number):
        return None
    if math.isinf(number):
        return MAX_SAFE_INTEGER if number > 0 else -MAX_SAFE_INTEGER
    return math.ceil(number)


def as_double(value: int) -> int:
    # JS numbers are doubles: past 2**53 an integer is the nearest double's value.
    return value if abs(value) <= MAX_SAFE_INTEGER else int(float(value))


def js_spread(value: Any) -> dict[str, Any]:
    """The object ``{...value}`` for a JSON value."""
    if isinstance(value, dict):
        return copy.deepcopy(value)
    if isinstance(value, list):
        return {str(i): copy.deepcopy(item) for i, item in enumerate(value)}
    if isinstance(value, str):
        units = value.encode("utf-16-le", "surrogatepass")
        return {
            str(i): units[2 * i : 2 * i + 2].decode("utf-16-le", "surrogatepass")
            for i in range(len(units) // 2)
        }
    return {}


def describe(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def fallback(key: str, value: Any, why: str, default: Any) -> str:
    return f"{SETTINGS_KEY}.{key}: {describe(value)} {why}; using the default {describe(default)}"


def validation_message(key: str, exc: ValueError) -> str:
    """pydantic's first message of a ``ValidationError`` (any other error: its text)."""
    errors = exc.errors() if callable(getattr(exc, "errors", None)) else []  # type: ignore[attr-defined]
    detail = errors[0]["msg"] if errors else str(exc)
    return f"{SETTINGS_KEY}.{key}: {detail}"


def field_name(model: Any, key: str) -> str:
    """The field of ``model`` (a config class) named or aliased ``key``."""
    fields: dict[str, Any] = model.model_fields
    for name, field in fields.items():
        if key in (name, field.alias) and name != "unknown_keys":
            return name
    raise ConfigError(f"unknown setting: {key}")


def to_camel(snake: str) -> str:
    """``snake_case`` as ``camelCase``, by the rules of pydantic's ``to_camel`` (the alias
    generator the settings models had): a name already in camelCase without a digit before a
    lowercase letter is kept; else each ``_`` before a letter or digit is dropped and the
    letter after it capitalized (title case per word), and the leading letter lowercased."""
    if re.match("^[a-z]+[A-Za-z0-9]*$", snake) and not re.search(r"\d[a-z]", snake):
        return snake
    pascal = re.sub("([0-9A-Za-z])_(?=[0-9A-Z])", lambda m: m.group(1), snake.title())
    return re.sub("(^_*[A-Z])", lambda m: m.group(1).lower(), pascal)


def canonical_key(key: str) -> str:
    parts = [to_camel(part) if "_" in part else part for part in key.strip().split(".")]
    head = parts[0]
    if head == "compat" and len(parts) == 1:
        return head
    nested = ALL_DEFAULTS.get(head, MISSING)
    if head == "summarizerPrices" and len(parts) > 1:
        raise ConfigError(f"unknown setting: {key} (set the whole summarizerPrices table)")
    if nested is MISSING or len(parts) > 2:
        raise ConfigError(f"unknown setting: {key}")
    if len(parts) == 2 and not (isinstance(nested, dict) and parts[1] in nested):
        raise ConfigError(f"unknown setting: {key}")
    return ".".join(parts)


def unknown_key_warnings(keys: list[str], known: list[str], prefix: str = "") -> list[str]:
    """One warning per key this version does not know, naming the nearest known key (if
    any is close): the key may be a typo, and it is kept in the file but has no effect."""
    out = []
    for key in keys:
        near = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        hint = f"; did you mean {near[0]}?" if near else ""
        out.append(
            f"{SETTINGS_KEY}.{prefix}{key}: unknown setting, ignored (kept in the file){hint}"
        )
    return out


def price_table_problem(value: Any) -> Optional[str]:
    if not isinstance(value, Mapping):
        return f"must be an object, got {type_name(value)} {describe(value)}"
    for model, entry in value.items():
        if not isinstance(model, str) or not model:
            return f"model names must be non-empty strings, got {describe(model)}"
        if not isinstance(entry, Mapping):
            return f"[{model!r}] must be an object, got {type_name(entry)} {describe(entry)}"
        for kind, price in entry.items():
            if kind not in SUMMARIZER_PRICE_KEYS:
                return (
                    f"[{model!r}] has unknown key {describe(kind)} "
                    f"(expected {', '.join(SUMMARIZER_PRICE_KEYS)})"
                )
            if not (is_number(price) and math.isfinite(price) and price >= 0):
                return f"[{model!r}].{kind} must be a non-negative number, got {describe(price)}"
    return None

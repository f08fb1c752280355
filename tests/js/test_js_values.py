"""JavaScript value semantics (pi_condense.js.values) against what V8 gives for the same value."""

from __future__ import annotations

import math
from typing import Any

import pytest

from pi_condense.js.values import (
    ABSENT,
    MISSING,
    map_key,
    parse_float,
    parse_int,
    strict_equal,
    to_number,
    to_string,
    trim,
    truthy,
    typeof,
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, "null"),
        (ABSENT, "undefined"),
        (MISSING, "undefined"),
        (True, "true"),
        (1.0, "1"),
        (1e21, "1e+21"),
        (-0.0, "0"),
        (2**64, "18446744073709552000"),
        (math.nan, "NaN"),
        (math.inf, "Infinity"),
        (-math.inf, "-Infinity"),
        ([1, [2, None], ABSENT, "a"], "1,2,,,a"),
        ([], ""),
        ({}, "[object Object]"),
        ("x", "x"),
    ],
)
def test_to_string_is_js_string(value: Any, expected: str) -> None:
    assert to_string(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, False),
        (ABSENT, False),
        (MISSING, False),
        (0, False),
        (-0.0, False),
        (math.nan, False),
        ("", False),
        (False, False),
        ([], True),
        ({}, True),
        ("0", True),
        (math.inf, True),
    ],
)
def test_truthy_is_js_truthiness(value: Any, expected: bool) -> None:
    assert truthy(value) is expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, 0.0),
        ("", 0.0),
        ("  \u00a012\ufeff ", 12.0),
        ("0x1F", 31.0),
        ("0b101", 5.0),
        ("-Infinity", -math.inf),
        ("1e3", 1000.0),
        (".5", 0.5),
        ([7], 7.0),
        ([1e400], math.inf),
        (True, 1.0),
    ],
)
def test_to_number_is_js_number(value: Any, expected: float) -> None:
    assert to_number(value) == expected


@pytest.mark.parametrize(
    "value", [ABSENT, "1e", "+0x10", "-0x10", "0x", "1_000", "infinity", ".", [1, 2], {}]
)
def test_to_number_nan(value: Any) -> None:
    assert math.isnan(to_number(value))


def test_parse_int_and_parse_float() -> None:
    assert parse_int(" 12abc") == 12
    assert parse_int("0x10") == 0
    assert parse_int("abc") is None
    assert parse_int("1" * 400) is None
    assert parse_float("0.8abc") == 0.8
    assert parse_float("1e") == 1.0
    assert parse_float("Infinity") is None


def test_strict_equal_and_typeof() -> None:
    shared: list[Any] = []
    assert strict_equal(1, 1.0)
    assert strict_equal(0, -0.0)
    assert not strict_equal(math.nan, math.nan)
    assert not strict_equal(True, 1)
    assert strict_equal(ABSENT, MISSING)
    assert not strict_equal(None, ABSENT)
    assert not strict_equal([], [])
    assert strict_equal(shared, shared)
    assert [typeof(v) for v in (None, ABSENT, [], 1, True, "s")] == [
        "object",
        "undefined",
        "object",
        "number",
        "boolean",
        "string",
    ]


def test_map_key_is_same_value_zero() -> None:
    assert map_key(0) == map_key(-0.0)
    assert map_key(float("nan")) == map_key(float("nan"))
    assert map_key("1") != map_key(1)
    assert map_key(None) != map_key(ABSENT)
    assert map_key(True) != map_key(1)
    assert map_key([]) != map_key([])
    assert map_key(2**53 + 1) == map_key(2**53) == map_key(float(2**53))  # one double
    assert map_key(10**400) == map_key(math.inf)


def test_trim_uses_js_whitespace() -> None:
    assert trim("\ufeff\u2028 a \u3000") == "a"
    assert trim("\u200b a") == "\u200b a"  # zero-width space is not whitespace in JS

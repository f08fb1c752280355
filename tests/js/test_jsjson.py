"""JS-exact JSON: conformance vectors from Node, real Pi session lines, properties, errors."""

from __future__ import annotations

import collections
import enum
import json
import math
import random
import re
import sys
import threading
from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_condense._core import loads_deep
from pi_condense.errors import JsonError
from pi_condense.js import json as jsjson
from pi_condense.js.json import _parse_int
from support.trees import same_tree

CONFORMANCE_LINES = 2035
MAX_DEPTH = 1024
_INDEX_KEY = re.compile(r"0|[1-9][0-9]{0,9}")


def _load_vectors(conformance_dir: Path) -> list[tuple[int, dict[str, Any]]]:
    path = conformance_dir / "json" / "json-stringify.jsonl"
    with path.open(encoding="utf-8") as f:
        return [(n, json.loads(line)) for n, line in enumerate(f, 1) if line.strip()]


@pytest.fixture(scope="module")
def vectors(conformance_dir: Path) -> list[tuple[int, dict[str, Any]]]:
    loaded = _load_vectors(conformance_dir)
    assert len(loaded) == CONFORMANCE_LINES
    return loaded


def _js_utf16_len(s: str) -> int:
    """JS `.length` computed independently: UTF-16 code units."""
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def _js_utf8_len(s: str) -> int:
    """`Buffer.byteLength` computed independently: lone surrogate units -> U+FFFD."""
    units = s.encode("utf-16-le", "surrogatepass")
    return len(units.decode("utf-16-le", "replace").encode("utf-8"))


def _is_index_key(key: str) -> bool:
    return _INDEX_KEY.fullmatch(key) is not None and int(key) <= 4294967294


def _js_ordered(value: Any) -> Any:
    """A copy with every dict in JS own-property order (index keys first, ascending)."""
    if isinstance(value, dict):
        index_keys = sorted((k for k in value if _is_index_key(k)), key=int)
        other_keys = [k for k in value if not _is_index_key(k)]
        return {k: _js_ordered(value[k]) for k in index_keys + other_keys}
    if isinstance(value, (list, tuple)):
        return [_js_ordered(v) for v in value]
    return value


# --- conformance: every line of json-stringify.jsonl (Node output) ---------------------


def _check_all(
    vectors: list[tuple[int, dict[str, Any]]],
    compute: Callable[[dict[str, Any]], object],
    field: str,
) -> None:
    failures = []
    for n, case in vectors:
        got = compute(case)
        if got != case[field]:
            failures.append(f"line {n}: input {case['input']!r}: got {got!r}, want {case[field]!r}")
    assert not failures, f"{len(failures)} lines differ:\n" + "\n".join(failures[:20])


def test_conformance_stringify(vectors: list[tuple[int, dict[str, Any]]]) -> None:
    _check_all(vectors, lambda c: jsjson.dumps(jsjson.loads(c["input"])), "stringify")


def test_conformance_pretty(vectors: list[tuple[int, dict[str, Any]]]) -> None:
    _check_all(vectors, lambda c: jsjson.dumps(jsjson.loads(c["input"]), 2), "pretty")


def test_conformance_bytes_output(vectors: list[tuple[int, dict[str, Any]]]) -> None:
    _check_all(
        vectors,
        lambda c: jsjson.dumps_bytes(jsjson.loads(c["input"])).decode("utf-8"),
        "stringify",
    )
    _check_all(vectors, lambda c: len(jsjson.dumps_bytes(jsjson.loads(c["input"]))), "utf8Bytes")


def test_conformance_length(vectors: list[tuple[int, dict[str, Any]]]) -> None:
    _check_all(vectors, lambda c: jsjson.length(jsjson.loads(c["input"])), "length")


def test_conformance_pretty_length(vectors: list[tuple[int, dict[str, Any]]]) -> None:
    _check_all(vectors, lambda c: jsjson.utf16_len(c["pretty"]), "prettyLength")


def test_conformance_utf8_bytes(vectors: list[tuple[int, dict[str, Any]]]) -> None:
    _check_all(vectors, lambda c: jsjson.utf8_len(c["stringify"]), "utf8Bytes")


def test_conformance_bytes_input(vectors: list[tuple[int, dict[str, Any]]]) -> None:
    _check_all(
        vectors, lambda c: jsjson.dumps(jsjson.loads(c["input"].encode("utf-8"))), "stringify"
    )


def test_conformance_reformat(vectors: list[tuple[int, dict[str, Any]]]) -> None:
    _check_all(vectors, lambda c: jsjson.reformat(c["input"]), "stringify")
    _check_all(vectors, lambda c: jsjson.reformat(c["input"], 2), "pretty")


@pytest.mark.parametrize("name", ["large-session.jsonl", "before-compaction.jsonl"])
def test_real_session_lines_round_trip(fixtures_dir: Path, name: str) -> None:
    # Every line of a Pi session file is JSON.stringify(entry) written by Node.
    failures = []
    with (fixtures_dir / name).open(encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f if line.strip()]
    for n, line in enumerate(lines, 1):
        entry = jsjson.loads(line)
        same = (
            jsjson.dumps(entry) == line
            and jsjson.length(entry) == _js_utf16_len(line)
            and jsjson.reformat(line) == line
        )
        if not same:
            failures.append(n)
    assert len(lines) > 1000
    assert not failures, f"{name}: lines {failures[:20]} differ"


# --- examples from spec 11 -----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ('{"b":1,"2":0,"a":3,"01":4}', '{"2":0,"b":1,"a":3,"01":4}'),
        ('{"a":1,"b":2,"a":3}', '{"a":3,"b":2}'),
        ('{"a":1,"b":2,"a":3,"s":"\\ud800"}', '{"a":3,"b":2,"s":"\\ud800"}'),
        ("12345678901234567890", "12345678901234567000"),
        ("9007199254740993", "9007199254740992"),
        ("123456789012345678901", "123456789012345680000"),
        ("1.0", "1"),
        ("1e400", "null"),
        ("-0", "0"),
        ("1e16", "10000000000000000"),
        ("1e21", "1e+21"),
        ("1e-7", "1e-7"),
        ("0.000001", "0.000001"),
        ('"\\u2028\\u2029\\u007f\\/"', '"\u2028\u2029\x7f/"'),
        ('"\\u0000\\u001f\\b\\f\\n\\r\\t"', '"\\u0000\\u001f\\b\\f\\n\\r\\t"'),
        ('"\\udfff\\ud83d\\ude00\\ud83d"', '"\\udfff\U0001f600\\ud83d"'),
        (" [ 1 , { } ] ", "[1,{}]"),
    ],
)
def test_examples(text: str, want: str) -> None:
    assert jsjson.dumps(jsjson.loads(text)) == want
    assert jsjson.reformat(text) == want
    assert jsjson.length(jsjson.loads(text)) == _js_utf16_len(want)


def test_loads_values() -> None:
    assert jsjson.loads("1e400") == math.inf
    assert jsjson.loads("-1e400") == -math.inf
    assert jsjson.loads('"\\ud800x"') == "\ud800x"
    assert jsjson.loads(b'"\\ud83d\\ude00"') == "\U0001f600"
    assert jsjson.loads(b'{"a":"\xff"}') == {"a": "\ufffd"}
    big = jsjson.loads("123456789012345678901234567890")
    assert isinstance(big, float)
    assert big == 1.2345678901234568e29
    assert jsjson.loads("[" + "9" * 5000 + "]") == [math.inf]
    assert jsjson.loads(b'["\\ud800", ' + b"9" * 30 + b"]") == ["\ud800", 1e30]
    parsed = jsjson.loads('{"b":1,"\\ud800":2,"b":3}')
    assert list(parsed.items()) == [("b", 3), ("\ud800", 2)]


def test_python_numbers() -> None:
    assert jsjson.dumps(2**53) == "9007199254740992"
    assert jsjson.dumps(2**53 + 1) == "9007199254740992"
    assert jsjson.dumps(-(2**53) - 1) == "-9007199254740992"
    assert jsjson.dumps(2**64) == "18446744073709552000"
    assert jsjson.dumps(-(2**63)) == "-9223372036854776000"
    assert jsjson.dumps(10**400) == "null"
    assert jsjson.dumps(-(10**400)) == "null"
    assert jsjson.dumps([math.nan, math.inf, -math.inf, -0.0]) == "[null,null,null,0]"
    assert (
        jsjson.dumps([1.0, 1.5, 1e21, 1e-7, 0.1 + 0.2]) == "[1,1.5,1e+21,1e-7,0.30000000000000004]"
    )
    assert jsjson.dumps([True, False, None]) == "[true,false,null]"
    assert jsjson.length([True, False, None, 10**400, 2**64]) == len(
        "[true,false,null,null,18446744073709552000]"
    )


def test_lengths_of_many_distinct_doubles() -> None:
    # Past a few dozen doubles the measurer caches their printed lengths by bits: thousands
    # of distinct values (sharing cache slots) and repeats must each count as printed.
    rng = random.Random(18)
    values = [rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30) for _ in range(6000)] + [
        rng.randint(1, 999) / 1000 for _ in range(2000)
    ]
    again = values * 2
    rng.shuffle(again)
    for value in (values, again, [{"cost": v, "n": [v, -v]} for v in again[:3000]]):
        assert jsjson.length(value) == len(jsjson.dumps(value))
    assert jsjson.length([0.5] * 100 + [1e21, 1e-7, 2.5e-5]) == len(
        "[" + ",".join(["0.5"] * 100 + ["1e+21", "1e-7", "0.000025"]) + "]"
    )


def test_subclasses_and_tuples() -> None:
    class Color(str, enum.Enum):  # noqa: UP042 (a str subclass that is an Enum, on purpose)
        RED = "red"

    class Level(enum.IntEnum):
        HIGH = 3

    class Ratio(float):
        pass

    value = collections.OrderedDict(
        [("c", Color.RED), ("l", Level.HIGH), ("r", Ratio(0.5)), ("t", (1, (2,)))]
    )
    want = '{"c":"red","l":3,"r":0.5,"t":[1,[2]]}'
    assert jsjson.dumps(value) == want
    assert jsjson.length(value) == len(want)


def test_indent() -> None:
    value = {"a": [1, {}, []], "b": {"c": None}}
    pretty = '{\n  "a": [\n    1,\n    {},\n    []\n  ],\n  "b": {\n    "c": null\n  }\n}'
    assert jsjson.dumps(value, 2) == pretty
    assert jsjson.dumps(value, 0) == jsjson.dumps(value)
    assert jsjson.dumps(value, -3) == jsjson.dumps(value)
    # JSON.stringify clamps the indentation to 10.
    assert jsjson.dumps([1], 20) == "[\n          1\n]"
    assert jsjson.reformat("[1]", 20) == "[\n          1\n]"


def test_string_lengths() -> None:
    assert jsjson.utf16_len("") == 0
    assert jsjson.utf16_len("a\U0001f600\u00e9") == 4
    assert jsjson.utf16_len("\ud800") == 1
    assert jsjson.utf8_len("a\U0001f600\u00e9") == 7
    assert jsjson.utf8_len("\ud800") == 3
    assert jsjson.utf8_len("x\udfffy") == 5
    # Two surrogate code points forming a pair are one astral character in JS.
    assert jsjson.utf16_len("\ud83d\ude00") == 2
    assert jsjson.utf8_len("\ud83d\ude00") == 4
    assert jsjson.dumps("\ud83d\ude00") == '"\U0001f600"'
    assert jsjson.dumps({"\ud800": "\udc00x"}) == '{"\\ud800":"\\udc00x"}'


# --- errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["", "[1,]", "{'a':1}", "01", "1.", "+1", "[1 2]", '"\t"', "\ufeff1", "\u00a01", "nul"],
)
def test_loads_rejects_invalid_json(text: str) -> None:
    with pytest.raises(JsonError, match=r"line \d+ column \d+ \(char \d+\)"):
        jsjson.loads(text)


def test_loads_error_position() -> None:
    with pytest.raises(JsonError, match=r"line 1 column 9 \(char 8\)"):
        jsjson.loads('{"a": 1 "b": 2}')
    with pytest.raises(JsonError, match=r"line 2 column 4 \(char 14\)"):
        jsjson.loads('["\\ud800",\n 1 2]')
    with pytest.raises(JsonError, match=r"line 2 column 4 \(char 14\)"):
        jsjson.reformat('["\\ud800",\n 1 2]')
    assert issubclass(JsonError, ValueError)


@pytest.mark.parametrize("text", ["NaN", "[Infinity]", '{"a": -Infinity}', '["\\ud800", NaN]'])
def test_nan_and_infinity_literals_rejected(text: str) -> None:
    with pytest.raises(JsonError, match=r"\(char \d+\)"):
        jsjson.loads(text)
    with pytest.raises(JsonError):
        jsjson.reformat(text)


def test_nan_literal_position() -> None:
    with pytest.raises(JsonError, match=r"line 1 column 12 \(char 11\)"):
        jsjson.loads('["\\ud800", NaN]')


def test_non_str_keys_rejected() -> None:
    for key in (1, 1.5, None, ("a",)):
        with pytest.raises(TypeError, match=type(key).__name__):
            jsjson.dumps({key: 1})
        with pytest.raises(TypeError, match=type(key).__name__):
            jsjson.length({"ok": {key: 1}})


def test_unsupported_types_rejected() -> None:
    for value in ({1, 2}, b"x", object(), 1j):
        with pytest.raises(TypeError, match=type(value).__name__):
            jsjson.dumps([value])
        with pytest.raises(TypeError, match=type(value).__name__):
            jsjson.length({"a": value})


def test_depth_limit_and_cycles() -> None:
    deep: list[Any] = []
    for _ in range(MAX_DEPTH - 1):
        deep = [deep]
    assert jsjson.dumps(deep) == "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert jsjson.length(deep) == 2 * MAX_DEPTH
    with pytest.raises(ValueError, match="nesting"):
        jsjson.dumps([deep])
    cycle: dict[str, Any] = {}
    cycle["self"] = cycle
    with pytest.raises(ValueError, match="circular"):
        jsjson.dumps(cycle)
    with pytest.raises(ValueError, match="circular"):
        jsjson.length([cycle])
    with pytest.raises(JsonError):
        jsjson.reformat("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))


def test_deep_values_on_a_small_thread_stack() -> None:
    # The walks are iterative: 1024 levels fit a 256 KiB thread stack.
    text = '{"a":' * (MAX_DEPTH - 1) + "{}" + "}" * (MAX_DEPTH - 1)
    deep: dict[str, Any] = {}
    for _ in range(MAX_DEPTH - 1):
        deep = {"a": deep}
    results: list[object] = []

    def work() -> None:
        results.extend([jsjson.dumps(deep), jsjson.length(deep), jsjson.reformat(text)])

    previous = threading.stack_size(256 * 1024)
    try:
        worker = threading.Thread(target=work)
        worker.start()
    finally:
        threading.stack_size(previous)
    worker.join()
    assert results == [text, len(text), text]


def test_reformat_raw_lone_surrogates() -> None:
    assert jsjson.reformat('["\ud800", "\\\\\udc00"]') == '["\\ud800","\\\\\\udc00"]'
    with pytest.raises(JsonError):
        jsjson.reformat('["\\\ud800"]')
    assert jsjson.loads('["\ud800"]') == ["\ud800"]


def _quoted_units(s: str) -> int:
    """`JSON.stringify(s).length` from ECMA-262 QuoteJSONString, independently of pi-condense:
    over the UTF-16 code units, a high surrogate followed by a low one is a pair (copied), any
    other surrogate is escaped (6), the short escapes take 2, other controls 6."""
    data = s.encode("utf-16-le", "surrogatepass")
    units = [int.from_bytes(data[i : i + 2], "little") for i in range(0, len(data), 2)]
    total, i = 2, 0
    while i < len(units):
        u = units[i]
        if 0xD800 <= u <= 0xDBFF and i + 1 < len(units) and 0xDC00 <= units[i + 1] <= 0xDFFF:
            total, i = total + 2, i + 2
            continue
        if u in (0x08, 0x09, 0x0A, 0x0C, 0x0D, 0x22, 0x5C):
            total += 2
        elif u < 0x20 or 0xD800 <= u <= 0xDFFF:
            total += 6
        else:
            total += 1
        i += 1
    return total


# Characters of each width CPython stores strings in (1, 2 or 4 bytes per code point), with
# every kind of escape and surrogate code points (which pair up when adjacent).
_WIDTH_ALPHABET = [
    "a",
    " ",
    '"',
    "\\",
    "\n",
    "\x0b",
    "\x1f",
    "\x7f",
    "\xe9",
    "\xff",
    "\u2028",
    "\u2500",
    "\uffff",
    "\ud83d",
    "\ude00",
    "\ud800",
    "\udfff",
    "\U0001f600",
    "\U0010ffff",
]


@pytest.mark.parametrize(
    "text",
    [
        "\xe9" * 300 + '"',  # one byte per code point, long enough for the wide loops
        "caf\xe9\n" * 100,
        "\u2500" * 300 + "\\",
        "a\u2500\t" * 200 + "\x01",
        "\U0001f600" * 300,
        "x\U0010ffff\r" * 150,
        "\u2500" * 300 + "\ud800",  # a lone surrogate at the end of a long string
        "\u2500" * 300 + "\ud83d\ude00" + "\u2500" * 40,  # a pair made of two code points
        "\U0001f600" * 300 + "\udc00",
        "\ud800" + "\U0001f600" * 300,
    ],
)
def test_length_of_long_strings_of_every_width(text: str) -> None:
    want = _quoted_units(text)
    assert jsjson.length(text) == want
    assert jsjson.length([text, {"k": text}]) == 2 * want + len('[,{"k":}]')
    assert jsjson.length(_Str(text)) == want  # a subclass: read through the C API


class _Str(str):
    pass


def test_measuring_leaves_no_utf8_copy_on_the_string() -> None:
    """Measured in place, a non-ASCII str gets no UTF-8 form cached on it (memory the host
    would pay for); through the C API (a subclass, or the layout reads off) it does, and
    ``sys.getsizeof`` counts that copy."""
    import sys

    from pi_condense import _core

    fresh = "".join(["\u2500", "x" * 2000])
    size = sys.getsizeof(fresh)
    assert jsjson.length({"text": fresh}) == 2003 + len('{"text":}')
    in_place = _core.layout_features()["str_chars"]
    assert (sys.getsizeof(fresh) == size) is in_place
    sub = _Str("".join(["\u2500", "x" * 2000]))
    size = sys.getsizeof(sub)
    assert jsjson.length(sub) == 2003
    assert sys.getsizeof(sub) > size + 2000


@settings(max_examples=300)
@given(
    st.lists(st.sampled_from(_WIDTH_ALPHABET), max_size=700).map("".join),
    st.sampled_from(["", "\xe9", "\u2500", "\U0001f600"]),
)
def test_length_of_strings_of_every_width_is_the_quoted_utf16_length(text: str, widen: str) -> None:
    text += widen  # the width of a CPython str is that of its widest code point
    assert jsjson.length(text) == _quoted_units(text)
    assert jsjson.length(text) == _js_utf16_len(jsjson.dumps(text))


# --- properties -----------------------------------------------------------------------

_all_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=12)
_keys = st.one_of(
    _all_text,
    st.integers(0, 2**32 + 1).map(str),
    st.sampled_from(["01", "-1", "1.5", "4294967294", "4294967295", "__proto__"]),
)
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    _all_text,
)
_values = st.recursive(
    _scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=5), st.dictionaries(_keys, children, max_size=5)
    ),
    max_leaves=25,
)

_plain_text = st.text(st.characters(codec="utf-8"), max_size=12)
_plain_keys = st.one_of(_plain_text, st.integers(0, 2**32 + 1).map(str), st.just("01"))
_plain_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53), _plain_text),
    lambda children: st.one_of(
        st.lists(children, max_size=5), st.dictionaries(_plain_keys, children, max_size=5)
    ),
    max_leaves=25,
)


@settings(max_examples=300)
@given(_values)
def test_length_is_utf16_length_of_dumps(value: Any) -> None:
    assert jsjson.length(value) == _js_utf16_len(jsjson.dumps(value))


class _StrKey(str):
    pass


# Values `dumps` refuses (as a value, or as a key): the length walk reads breadth-first, yet
# must raise what `dumps` raises - the first problem in text order.
_bad_values = st.sampled_from([b"x", 1j, frozenset(), object()])
_bad_keys = st.sampled_from([1, 1.5, None, ("a",)])
_values_with_errors = st.recursive(
    st.one_of(_scalars, _bad_values),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.tuples(children, children),
        st.dictionaries(st.one_of(_keys, _bad_keys, _keys.map(_StrKey)), children, max_size=4),
    ),
    max_leaves=20,
)


def _outcome(f: Callable[[Any], Any], value: Any) -> tuple[str, str]:
    try:
        f(value)
    except (TypeError, ValueError) as exc:
        return type(exc).__name__, str(exc)
    return "ok", ""


@settings(max_examples=500)
@given(st.lists(_values_with_errors, max_size=6))
def test_length_raises_the_first_error_in_text_order(value: list[Any]) -> None:
    want = _outcome(jsjson.dumps, value)
    assert _outcome(jsjson.length, value)[:2] == want
    if want[0] == "ok":
        assert jsjson.length(value) == _js_utf16_len(jsjson.dumps(value))


def test_length_error_order_examples() -> None:
    for value in (
        [[[[{1: 2}]]], b"x"],
        [{"a": [[[object()]]]}, {2: 1}],
        {"a": {"b": {"c": 1j}}, "z": b"x"},
        [[[[[]]]]] * 3 + [{None: 1}, set()],
    ):
        assert _outcome(jsjson.length, value) == _outcome(jsjson.dumps, value)
        assert _outcome(jsjson.length, value)[0] == "TypeError"


def test_cycles_with_many_self_references_fail_fast() -> None:
    # Breadth-first, each level of a value holding itself twice would double the queue.
    cycle: dict[str, Any] = {}
    for key in "abcdefgh":
        cycle[key] = cycle
    doubled: list[Any] = []
    doubled.extend([doubled, doubled, doubled])
    for value in (cycle, [cycle], doubled, [1, doubled, {"x": cycle}]):
        with pytest.raises(ValueError, match="circular"):
            jsjson.length(value)


@settings(max_examples=300)
@given(_values)
def test_dumps_loads_round_trip(value: Any) -> None:
    text = jsjson.dumps(value)
    assert jsjson.dumps(jsjson.loads(text)) == text
    assert jsjson.reformat(text) == text
    assert jsjson.reformat(text, 2) == jsjson.dumps(value, 2)
    assert jsjson.loads(jsjson.dumps(value, 2)) == jsjson.loads(text)


@settings(max_examples=300)
@given(_plain_values)
def test_dumps_matches_stdlib_in_js_key_order(value: Any) -> None:
    ordered = _js_ordered(value)
    assert jsjson.dumps(value) == json.dumps(ordered, ensure_ascii=False, separators=(",", ":"))
    assert jsjson.dumps(value, 2) == json.dumps(ordered, ensure_ascii=False, indent=2)


@given(_all_text)
def test_string_length_properties(s: str) -> None:
    assert jsjson.utf16_len(s) == _js_utf16_len(s)
    assert jsjson.utf8_len(s) == _js_utf8_len(s)
    quoted = jsjson.dumps(s)
    assert jsjson.length(s) == _js_utf16_len(quoted)
    assert jsjson.loads(quoted) == s.encode("utf-16-le", "surrogatepass").decode(
        "utf-16-le", "surrogatepass"
    )


# JSON fragments, valid and invalid.
_TOKENS = [
    *["{", "}", "[", "]", ",", ":", "-", "+", ".", "\\", "'"],
    *[" ", "\t", "\n", "\f", "\u00a0", "\ufeff"],
    *["0", "1", "01", "1.", ".5", "-0", "1e400", "1E+2", "2e-9"],
    *["true", "null", "nul", "NaN", "Infinity"],
    *['"a"', '"\\ud800"', '"\ud800"', '"\\u00zz"', '"\\/"', '"\t"', '"x\\"'],
    *['{"a":1,"a":2}', '{"2":0,"b":1}'],
]
_json_ish = st.one_of(
    st.lists(st.sampled_from(_TOKENS), max_size=8).map("".join),
    st.text(st.sampled_from(list('{}[],:" \t\n\\/-+.019eEtrufalsnu\ud800')), max_size=10),
)


@settings(max_examples=1000)
@given(st.one_of(_json_ish, _values.map(jsjson.dumps)))
def test_loads_and_rust_parser_agree(text: str) -> None:
    # Two parsers (orjson + stdlib fallback, and the Rust core) must accept exactly the
    # same texts and print them identically.
    try:
        via_python = jsjson.dumps(jsjson.loads(text))
    except JsonError:
        via_python = None
    try:
        via_rust = jsjson.reformat(text)
    except JsonError:
        via_rust = None
    assert via_python == via_rust


# --- nesting beyond orjson's and the stdlib's limits -------------------------------------


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 5000, 200_000])
def test_loads_takes_any_depth_as_json_parse(depth: int) -> None:
    # Node's JSON.parse reads 5,000,000 levels; orjson stops at 1024, json at the
    # recursion limit.
    text = '{"a":[' * depth + '1,"\\ud800",{"k":2,"k":3}' + "]}" * depth
    value, found = jsjson.loads_with_depth(text)
    assert found == 2 * depth + 1
    for _ in range(depth):
        assert list(value) == ["a"]
        value = value["a"]
        assert isinstance(value, list)
        value = value[-1] if len(value) == 1 else value
    assert value == [1, "\ud800", {"k": 3}]
    assert jsjson.loads(text.encode()) is not None


def test_shallow_texts_report_no_depth() -> None:
    assert jsjson.loads_with_depth('{"a":[[1]]}') == ({"a": [[1]]}, 0)


@pytest.mark.parametrize(
    ("tail", "message"),
    [
        ("1,]", r"Expecting value: line 1 column \d+"),
        ("NaN]", r"Expecting value"),
        ('{"a" 1}]', r"Expecting ':' delimiter"),
        ("1 2]", r"Expecting ',' delimiter"),
        ('"\t"]', r"Invalid control character"),
        ("1]]", r"Extra data"),
        ("-Infinity]", r"No number after minus sign: unexpected token 'I': line 1 column 3002 "),
    ],
)
def test_deep_invalid_texts_are_refused_with_their_position(tail: str, message: str) -> None:
    text = "[" * 3000 + tail + "]" * 2999
    with pytest.raises(JsonError, match=message):
        jsjson.loads(text)


@settings(max_examples=500)
@given(st.one_of(_json_ish, _values.map(jsjson.dumps), _values.map(lambda v: jsjson.dumps(v, 2))))
def test_the_deep_parser_agrees_with_loads(text: str) -> None:
    try:
        expected: Any = (jsjson.dumps(jsjson.loads(text)), type(jsjson.loads(text)))
    except JsonError as exc:
        expected = str(exc)
    try:
        value, _ = loads_deep(text)
        got: Any = (jsjson.dumps(value), type(value))
    except JsonError as exc:
        got = str(exc)
    if isinstance(expected, str) and "unexpected token" in expected:
        # NaN / Infinity: loads reports them in the Rust parser's words, at the same place.
        assert isinstance(got, str)
        assert got.rsplit(": line", 1)[1] == expected.rsplit(": line", 1)[1]
    else:
        assert got == expected


# What the deep parser must build as `json.loads` does (with `js.json`'s integer rule): keys
# in text order, a repeated key at its first place with its last value, ints that fit 64
# bits, other numbers as floats (signed zero, infinities), lone surrogates escaped or raw.
_DEEP_CASES = [
    '{"b":1,"2":0,"a":3,"01":4,"b":5}',
    "[0,-0,-0.0,1.5,1E2,1e400,-1e400,9007199254740993,9223372036854775807,"
    "-9223372036854775808,-9223372036854775809,18446744073709551615,18446744073709551616,"
    "123456789012345678901234567890]",
    '"\\ud800x\\udc00\\ud83d\\ude00\\u00e9\\/"',
    '["\ud800 raw", "a\ud800"]',
    '{"\\ud800":[true,false,null,{},[]], "\ud800":1}',
]


@pytest.mark.parametrize("depth", [0, 5000])
@pytest.mark.parametrize("text", _DEEP_CASES)
def test_the_deep_parser_builds_what_json_loads_builds(text: str, depth: int) -> None:
    expected = json.loads(text, parse_int=_parse_int)
    value, found = loads_deep("[" * depth + text + "]" * depth)
    assert found >= depth
    for _ in range(depth):
        (value,) = value
    # repr tells key order, int from float and the sign of zero apart.
    assert repr(value) == repr(expected)


@pytest.mark.parametrize(
    "text",
    [
        "\\\ud800",
        '"\ud800',
        '"\\u0041',
        '["\\ud800\\udc00',
        '["\\u00e9\ud800',
        '["\\\ud800"]',
        "[1.5e+]",
        "1.",
        "[-x]",
        '{"a":1,}',
        '"a\\u12g4"',
    ],
)
def test_the_deep_parser_words_and_places_errors_as_json_loads(text: str) -> None:
    with pytest.raises(json.JSONDecodeError) as stdlib:
        json.loads(text)
    error = stdlib.value
    with pytest.raises(JsonError) as deep:
        loads_deep(text)
    where = f"line {error.lineno} column {error.colno} (char {error.pos})"
    expected = f"{error.msg}: {where}"
    if text == '{"a":1,}' and sys.version_info >= (3, 13):
        # 3.13 words a trailing comma anew ("Illegal trailing comma before end of object");
        # the parser keeps the wording of 3.11 and 3.12, which it names as the reference.
        expected = "Expecting property name enclosed in double quotes: line 1 column 8 (char 7)"
    assert str(deep.value) == expected


def test_deep_errors_count_raw_lone_surrogates_as_one_character() -> None:
    text = '["\ud800\ud800",\n' + "[" * 3000 + '"\ud800", 1 2' + "]" * 3001
    at = text.index("2", text.index("1 2"))
    column = at - text.index("\n")
    with pytest.raises(JsonError) as refused:
        jsjson.loads(text)
    assert str(refused.value) == f"Expecting ',' delimiter: line 2 column {column} (char {at})"


def test_a_value_too_deep_to_serialize_is_still_refused() -> None:
    value = jsjson.loads("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
    assert jsjson.MAX_DEPTH == MAX_DEPTH
    with pytest.raises(ValueError, match="JSON nesting deeper than 1024"):
        jsjson.dumps(value)
    with pytest.raises(ValueError, match="JSON nesting deeper than 1024"):
        jsjson.length(value)


# --- dumps_lines and reloaded (storing many session entries at once) -------------------


def _containers(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [value, *(c for v in value.values() for c in _containers(v))]
    if isinstance(value, (list, tuple)):
        return [value, *(c for v in value for c in _containers(v))]
    return []


_reload_values = st.recursive(
    st.one_of(_scalars, st.sampled_from([1.0, -0.0, 1e21, 1e20, 2**53, 2**53 + 1, -(2**64)])),
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.tuples(children, children),
        st.dictionaries(st.one_of(_keys, _keys.map(_StrKey)), children, max_size=5),
        st.lists(children, max_size=3).map(lambda items: {"x": items, "y": _Str("s")}),
    ),
    max_leaves=25,
)


@settings(max_examples=400)
@given(st.lists(_reload_values, max_size=4))
def test_reloaded_is_what_the_text_reads_back_as(values: list[Any]) -> None:
    copies = jsjson.reloaded(values)
    assert len(copies) == len(values)
    for value, copy in zip(values, copies, strict=True):
        assert same_tree(copy, jsjson.loads(jsjson.dumps(value)))
        # new containers: changing the value later does not change the copy
        assert not {id(c) for c in _containers(copy)} & {id(c) for c in _containers(value)}


@settings(max_examples=200)
@given(st.lists(_values, max_size=4))
def test_dumps_lines_is_each_dumps_on_its_own_line(values: list[Any]) -> None:
    want = "".join(jsjson.dumps(v) + "\n" for v in values).encode("utf-8")
    assert jsjson.dumps_lines(values) == want


def test_dumps_lines_raises_what_dumps_raises() -> None:
    values: list[Any] = [{"a": 1}, {"b": {1: 2}}]
    with pytest.raises(TypeError) as lines_error:
        jsjson.dumps_lines(values)
    with pytest.raises(TypeError) as dumps_error:
        jsjson.dumps(values[1])
    assert str(lines_error.value) == str(dumps_error.value)


def test_reloaded_copies_plain_values_without_their_text() -> None:
    """The copy keeps the value's own strings (immutable) and makes new containers; the
    values whose text reads back otherwise are read from their text."""
    text = "x" * 1000
    value = {"role": "user", "content": [{"type": "text", "text": text}], "n": 2, "f": 0.5}
    odd = {"n": 1.0, "1": "moved first", "t": (1, 2)}
    copy, reread = jsjson.reloaded([value, odd])
    assert copy == value
    assert copy is not value
    assert copy["content"][0]["text"] is text
    assert list(reread) == ["1", "n", "t"]
    assert reread == {"1": "moved first", "n": 1, "t": [1, 2]}
    assert type(reread["n"]) is int

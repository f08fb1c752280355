"""JSON.stringify-compatible serialization vs orjson on a real Pi session.

Run: pytest benches/bench_jsjson.py --benchmark-only (after `maturin develop --release`).

The messages of large-session.jsonl were written by Node: each line is
`JSON.stringify(entry)`, so `"[" + ",".join(message texts) + "]"` is the exact expected
output of `dumps(messages)`, and every benchmark checks its result against it.

The output holds astral characters, so CPython stores the resulting `str` with 4 bytes per
character (3.6 MB here). Whether glibc serves that from fresh mmap'd pages (page faults on
every call) or from the heap depends on its dynamic mmap threshold, i.e. on what ran
before: `orjson.dumps(...).decode()` swings between 0.75 and 2.8 ms the same way. Run with
MALLOC_MMAP_THRESHOLD_=67108864 for stable numbers.
"""

from __future__ import annotations

from typing import Any, Callable

import orjson
import pytest

import generate
from pi_condense.js import json as jsjson

Benchmark = Callable[..., Any]


def _load() -> tuple[list[Any], list[str]]:
    messages: list[Any] = []
    texts: list[str] = []
    for line in generate.read_source("large-session").decode("utf-8").split("\n"):
        entry = orjson.loads(line) if line else {}
        if "message" not in entry:
            continue
        messages.append(entry["message"])
        # Entries end with their "message" member: its text is the rest of the line.
        texts.append(line[line.index(',"message":') + 11 : -1])
    return messages, texts


MESSAGES, MESSAGE_TEXTS = _load()
EXPECTED = "[" + ",".join(MESSAGE_TEXTS) + "]"
EXPECTED_LENGTH = len(EXPECTED.encode("utf-16-le", "surrogatepass")) // 2


def test_fixture_is_large() -> None:
    assert len(MESSAGES) > 900
    assert len(EXPECTED) > 800_000


def test_dumps_messages(benchmark: Benchmark) -> None:
    result = benchmark(jsjson.dumps, MESSAGES)
    assert result == EXPECTED


def test_dumps_bytes_messages(benchmark: Benchmark) -> None:
    result = benchmark(jsjson.dumps_bytes, MESSAGES)
    assert result == EXPECTED.encode("utf-8")


def test_length_messages(benchmark: Benchmark) -> None:
    result = benchmark(jsjson.length, MESSAGES)
    assert result == EXPECTED_LENGTH


def test_orjson_dumps_messages(benchmark: Benchmark) -> None:
    result = benchmark(orjson.dumps, MESSAGES)
    # Same content; orjson differs from JSON.stringify only in number formatting here.
    assert orjson.loads(result) == MESSAGES


def test_orjson_dumps_decode_messages(benchmark: Benchmark) -> None:
    # orjson returns bytes; dumps returns str, so this is the like-for-like comparison.
    result = benchmark(lambda: orjson.dumps(MESSAGES).decode("utf-8"))
    assert len(result) > 800_000


def test_dumps_each_message(benchmark: Benchmark) -> None:
    result = benchmark(lambda: [jsjson.dumps(m) for m in MESSAGES])
    assert result == MESSAGE_TEXTS


def test_length_each_message(benchmark: Benchmark) -> None:
    result = benchmark(lambda: sum(jsjson.length(m) for m in MESSAGES))
    assert result == EXPECTED_LENGTH - 1 - len(MESSAGES)


def test_orjson_dumps_each_message(benchmark: Benchmark) -> None:
    result = benchmark(lambda: [orjson.dumps(m) for m in MESSAGES])
    assert len(result) == len(MESSAGES)


@pytest.mark.parametrize("indent", [2])
def test_dumps_pretty_messages(benchmark: Benchmark, indent: int) -> None:
    result = benchmark(jsjson.dumps, MESSAGES, indent)
    assert jsjson.dumps(jsjson.loads(result)) == EXPECTED

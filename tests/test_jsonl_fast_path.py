"""Session parsing: the windowed fast path gives what the line loop gives, for any file."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pi_condense.session import jsonl

LINES = [
    b'{"type":"message","id":"a1","message":{"role":"user","content":"hi"}}',
    b'{"type":"session","version":3,"id":"s"}',
    b'  {"id":"x"}  ',
    b"{}\r",
    b"1",
    b"[1,2]",
    b'"text"',
    b"null",
    b"",
    b"   ",
    b"\t",
    b"\xff\xfe",
    b'{"a":',
    b"NaN",
    b'\xef\xbb\xbf{"bom":1}',
    b'{"lone":"\\ud800"}',
    b'{"u":"\xc3\xa9\xe2\x80\xa8"}',
    b"\xc2\xa0{}",
]


def _same(data: bytes) -> jsonl.Parsed:
    expected = jsonl.parse_each_line(data)
    got = jsonl.parse_lines(data)
    assert got.objects == expected.objects
    assert got.warnings == expected.warnings
    assert got.first_value == expected.first_value
    assert got.first_line == expected.first_line
    return got


@given(
    window=st.sampled_from([1, 5, 64, 1 << 22]),
    lines=st.lists(st.sampled_from(LINES), max_size=12),
    final_newline=st.booleans(),
)
def test_any_file_parses_as_the_line_loop_parses_it(
    window: int, lines: list[bytes], final_newline: bool
) -> None:
    data = b"\n".join(lines) + (b"\n" if final_newline and lines else b"")
    with mock.patch.object(jsonl, "_WINDOW", window):
        _same(data)


def test_a_clean_file_takes_the_fast_path_in_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonl, "_WINDOW", 16)
    lines = [b'{"type":"session","id":"s"}'] + [b'{"id":"e%d"}' % i for i in range(50)]
    data = b"\n".join(lines) + b"\n"
    fast = jsonl._parse_all_accepted(data)
    assert fast is not None
    assert [number for number, _ in fast.objects] == list(range(1, 52))
    assert fast.objects[-1][1] == {"id": "e49"}
    assert _same(data).first_line == 1


def test_a_blank_line_inside_sends_the_file_through_the_line_loop() -> None:
    data = b'{"id":"a"}\n\n{"id":"b"}\n'
    assert jsonl._parse_all_accepted(data) is None
    assert [n for n, _ in _same(data).objects] == [1, 3]

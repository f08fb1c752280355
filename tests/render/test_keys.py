"""Occurrence keys, content hash and protected paths (spec 03 sections 1 and 6, 05 section 2).

Expected values come from the spec and the reference tests (occurrence-key.test.ts,
protected.test.ts), from JavaScript semantics (spec 11), or from independent oracles
written here from the spec text (hashlib, a Python-regex translation of the globs).
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from pi_condense.keys import (
    ProtectedMatcher,
    bare_tool_call_id,
    hash_tool_result,
    normalize_result_text,
    occ_key,
    parse_occ_key,
    result_timestamp_of,
)

# ---------------------------------------------------------------------------
# Occurrence keys
# ---------------------------------------------------------------------------


def test_occ_key_with_timestamp() -> None:
    assert occ_key("a", 5) == "a@5"
    assert occ_key("bash_23", 1150) == "bash_23@1150"


def test_occ_key_without_timestamp_is_the_bare_id() -> None:
    assert occ_key("a", None) == "a"


@pytest.mark.parametrize("ts", ["5", True, False, [5], {"t": 5}, b"5"])
def test_occ_key_non_number_timestamp_is_the_bare_id(ts: object) -> None:
    assert occ_key("a", ts) == "a"


@pytest.mark.parametrize(
    ("ts", "key"),
    [
        (5.0, "a@5"),
        (1781234567890, "a@1781234567890"),
        (1.5, "a@1.5"),
        (-5, "a@-5"),
        (-0.0, "a@0"),
        (math.nan, "a@NaN"),
        (math.inf, "a@Infinity"),
        (-math.inf, "a@-Infinity"),
        (1e21, "a@1e+21"),
        (1e20, "a@100000000000000000000"),
        (1e-7, "a@1e-7"),
        (0.000001, "a@0.000001"),
        # ints are JSON numbers: doubles, rounded to nearest.
        (12345678901234567890, "a@12345678901234567000"),
        (2**53 + 1, "a@9007199254740992"),
        (10**400, "a@Infinity"),
        (-(10**400), "a@-Infinity"),
    ],
)
def test_occ_key_formats_timestamps_like_js_string(ts: float, key: str) -> None:
    assert occ_key("a", ts) == key


@pytest.mark.parametrize(
    ("value", "expected"),
    [(5, 5), (1.5, 1.5), (0, 0), (-3, -3), (math.inf, math.inf)],
)
def test_result_timestamp_of_passes_numbers(value: float, expected: float) -> None:
    assert result_timestamp_of(value) == expected


def test_result_timestamp_of_passes_nan() -> None:
    got = result_timestamp_of(math.nan)
    assert got is not None
    assert math.isnan(got)


@pytest.mark.parametrize("value", [None, "5", "", True, False, [1], {}])
def test_result_timestamp_of_rejects_non_numbers(value: object) -> None:
    assert result_timestamp_of(value) is None


def test_parse_round_trips_occ_key() -> None:
    assert parse_occ_key(occ_key("bash_23", 1150)) == ("bash_23", 1150)
    assert parse_occ_key("a@5") == ("a", 5)


def test_parse_without_at_is_bare() -> None:
    assert parse_occ_key("bash_23") == ("bash_23", None)
    assert parse_occ_key("") == ("", None)


@pytest.mark.parametrize(
    "key",
    ["a@b", "a@", "a@1.5", "a@-5", "a@NaN", "a@Infinity", "a@1e+21", "a@+5", "a@5 ", "a@ 5"],
)
def test_parse_non_numeric_tail_is_part_of_a_bare_id(key: str) -> None:
    assert parse_occ_key(key) == (key, None)
    assert bare_tool_call_id(key) == key


def test_parse_splits_on_the_last_at() -> None:
    assert parse_occ_key("user@host@42") == ("user@host", 42)
    assert parse_occ_key("a@1@2") == ("a@1", 2)
    assert parse_occ_key("a@1@x") == ("a@1@x", None)
    assert bare_tool_call_id("user@host@42") == "user@host"
    assert bare_tool_call_id("bash_23@1150") == "bash_23"
    assert bare_tool_call_id("bash_23") == "bash_23"


def test_parse_at_index_zero_is_not_a_separator() -> None:
    assert parse_occ_key("@5") == ("@5", None)
    assert parse_occ_key("@") == ("@", None)
    assert parse_occ_key("@a@5") == ("@a", 5)
    # So an empty id does not round-trip.
    assert parse_occ_key(occ_key("", 5)) == ("@5", None)


def test_parse_bare_id_ending_in_at_digits_is_read_as_an_occurrence() -> None:
    # A legacy bare id shaped like `x@5` is indistinguishable from an occurrence key.
    assert parse_occ_key(occ_key("x@5", None)) == ("x", 5)


@pytest.mark.parametrize("key", ["a@\u0663", "a@\uff15", "a@5\n", "a@\n5", "a@5\r\n"])
def test_parse_digits_are_ascii_and_dollar_is_end_of_input(key: str) -> None:
    assert parse_occ_key(key) == (key, None)


def test_parse_timestamp_is_number_of_the_digits() -> None:
    ident, ts = parse_occ_key("a@007")
    assert (ident, ts) == ("a", 7)
    assert type(ts) is int
    # Number("12345678901234567890") is the double 12345678901234567168.
    assert parse_occ_key("a@12345678901234567890") == ("a", 12345678901234567168)
    ident, ts = parse_occ_key("a@" + "9" * 400)
    assert ident == "a"
    assert ts == math.inf


def test_keys_with_lone_surrogates() -> None:
    assert occ_key("\ud800x", 5) == "\ud800x@5"
    assert occ_key("\ud800x", None) == "\ud800x"
    assert parse_occ_key("\ud800@5") == ("\ud800", 5)
    assert parse_occ_key("a\udc00@x") == ("a\udc00@x", None)
    assert parse_occ_key("\U0001f600\ud800@12") == ("\U0001f600\ud800", 12)
    assert bare_tool_call_id("id\udfff@1") == "id\udfff"


def test_split_surrogate_pairs_come_back_as_given() -> None:
    # JS reads "\ud800\udc00" and "\U00010000" as one string; Python callers get back the
    # code points they passed, whichever form (README "Keys, hashes and protected paths").
    assert parse_occ_key(occ_key("\ud800\udc00", 0)) == ("\ud800\udc00", 0)
    assert parse_occ_key("\U00010000@0") == ("\U00010000", 0)
    assert bare_tool_call_id("a\ud83d\ude00b@7") == "a\ud83d\ude00b"
    assert parse_occ_key("\ud83d\ude00") == ("\ud83d\ude00", None)


def test_non_ascii_ids() -> None:
    assert parse_occ_key(occ_key("żółw", 7)) == ("żółw", 7)
    assert parse_occ_key(occ_key("\U0001f600", 1)) == ("\U0001f600", 1)


_any_char = st.one_of(
    st.characters(),
    st.characters(categories=["Cs"]),
    st.sampled_from("@0123456789\n"),
)
_ids = st.text(_any_char, min_size=1, max_size=20)
# Non-negative integers whose double prints as plain digits (below 1e21).
_timestamps = st.integers(min_value=0, max_value=10**21).filter(lambda n: float(n) < 1e21)


@given(_ids, _timestamps)
@example("\ud800\udc00", 0)  # a surrogate pair as two code points stays two
@example("\U00010000\ud800", 3)
@example("\udc00\ud800", 1)  # reversed: two lone surrogates
def test_parse_inverts_occ_key_for_non_empty_ids(ident: str, ts: int) -> None:
    key = occ_key(ident, ts)
    parsed_id, parsed_ts = parse_occ_key(key)
    assert parsed_id == ident
    assert parsed_ts == float(ts)
    assert bare_tool_call_id(key) == ident


@given(_ids, st.one_of(st.none(), st.text(), st.booleans(), st.lists(st.integers())))
def test_occ_key_of_a_non_number_is_the_id(ident: str, ts: object) -> None:
    assert occ_key(ident, ts) == ident


def _parse_oracle(key: str) -> tuple[str, float | None]:
    """parseOccKey as spec 03 section 1.3 states it."""
    i = key.rfind("@")
    if i <= 0:
        return key, None
    suffix = key[i + 1 :]
    if re.fullmatch(r"[0-9]+", suffix) is None:
        return key, None
    return key[:i], float(suffix)


@given(st.text(_any_char, max_size=24))
def test_parse_matches_the_spec_rule(key: str) -> None:
    assert parse_occ_key(key) == _parse_oracle(key)
    assert bare_tool_call_id(key) == _parse_oracle(key)[0]


# ---------------------------------------------------------------------------
# Content hash
# ---------------------------------------------------------------------------

_JS_WHITESPACE = (
    "\t\n\v\f\r \u00a0\u1680"
    + "".join(chr(c) for c in range(0x2000, 0x200B))
    + "\u2028\u2029\u202f\u205f\u3000\ufeff"
)


def _normalize_oracle(text: str) -> str:
    """Spec 03 section 6 normalization, step by step."""
    lf = text.replace("\r\n", "\n")
    lines = [re.sub(r"[ \t]+\Z", "", line) for line in lf.split("\n")]
    return "\n".join(lines).strip(_JS_WHITESPACE)


def _node_utf8(text: str) -> bytes:
    """UTF-8 as Node writes it: every lone surrogate becomes U+FFFD."""
    units = text.encode("utf-16-le", "surrogatepass")
    return units.decode("utf-16-le", "replace").encode("utf-8")


def _hash_oracle(tool_name: str, text: str) -> str:
    data = _node_utf8(tool_name) + b"\0" + _node_utf8(_normalize_oracle(text))
    return hashlib.sha1(data).hexdigest()


def test_known_vector() -> None:
    assert hash_tool_result("bash", "hello\r\nworld  \n") == (
        "d482f895bb0f16b45f7163b0407f1fefaf01f577"
    )
    assert normalize_result_text("hello\r\nworld  \n") == "hello\nworld"


def test_hash_is_lowercase_hex_sha1_of_name_nul_text() -> None:
    assert hash_tool_result("read", "abc") == hashlib.sha1(b"read\0abc").hexdigest()
    assert hash_tool_result("", "") == hashlib.sha1(b"\0").hexdigest()


def test_same_tool_and_normalized_text_match() -> None:
    base = hash_tool_result("read", "a\nb\nc")
    assert hash_tool_result("read", "a\r\nb\r\nc") == base
    assert hash_tool_result("read", "a \t\nb\t\nc   ") == base
    assert hash_tool_result("read", "\n\n  a\nb\nc\n\n") == hash_tool_result("read", "a\nb\nc")


def test_internal_whitespace_tabs_and_case_matter() -> None:
    base = hash_tool_result("read", "a b")
    assert hash_tool_result("read", "a  b") != base
    assert hash_tool_result("read", "a\tb") != base
    assert hash_tool_result("read", "A b") != base
    assert hash_tool_result("Read", "a b") != base


def test_nul_separator_keeps_name_and_text_apart() -> None:
    assert hash_tool_result("ab", "c") != hash_tool_result("a", "bc")


@pytest.mark.parametrize(
    ("text", "normalized"),
    [
        ("a\r\nb", "a\nb"),
        ("a\rb", "a\rb"),
        ("a\r", "a"),
        ("a \r\nb", "a\nb"),
        ("a\r \nb", "a\r\nb"),
        ("a\r\r\nb", "a\r\nb"),
        ("x \u00a0\ny", "x \u00a0\ny"),
        ("\ufeffx\u3000", "x"),
        ("\u2028x\u2029\u0085", "x\u2029\u0085"),
        ("\x1cx\x1f", "\x1cx\x1f"),
        ("  lead\n\tkept\t\n", "lead\n\tkept"),
        ("a \n \n b", "a\n\n b"),
        ("", ""),
        (" \t\r\n", ""),
    ],
)
def test_normalization(text: str, normalized: str) -> None:
    assert normalize_result_text(text) == normalized


def test_lone_surrogates() -> None:
    assert normalize_result_text(" x\ud800y \n") == "x\ud800y"
    assert hash_tool_result("bash", "x\ud800y") == hash_tool_result("bash", "x\ufffdy")
    assert hash_tool_result("b\udc00", "x") == hashlib.sha1("b\ufffd\0x".encode()).hexdigest()
    # Two surrogate code points in a Python str are one UTF-16 pair to JavaScript.
    assert hash_tool_result("bash", "\ud83d\ude00") == hash_tool_result("bash", "\U0001f600")


_text_chars = st.one_of(
    st.characters(),
    st.characters(categories=["Cs"]),
    st.sampled_from(_JS_WHITESPACE + "\x1c\x85ab"),
)


@given(st.text(_text_chars, max_size=40))
def test_normalization_matches_the_spec_steps(text: str) -> None:
    assert normalize_result_text(text) == _normalize_oracle(text)


@given(st.text(_text_chars, max_size=8), st.text(_text_chars, max_size=40))
def test_hash_matches_sha1_oracle(tool_name: str, text: str) -> None:
    assert hash_tool_result(tool_name, text) == _hash_oracle(tool_name, text)


# ---------------------------------------------------------------------------
# Protected tools and paths
# ---------------------------------------------------------------------------


def glob_matches(glob: str, path: str) -> bool:
    return ProtectedMatcher([], [glob]).matches_path(path)


def test_double_star_crosses_path_segments() -> None:
    assert glob_matches("**/skills/**/*.md", "/Users/x/.agents/skills/release/SKILL.md")
    assert glob_matches("**/skills/**/*.md", "a/skills/b/c/notes.md")
    assert glob_matches("a/**", "a/x/y")
    assert glob_matches("a/**", "a/")
    assert not glob_matches("a/**", "a")
    assert glob_matches("**", "")


def test_double_star_slash_matches_zero_directories() -> None:
    assert glob_matches("**/SKILL.md", "SKILL.md")
    assert glob_matches("**/skills/**/*.md", "skills/foo.md")
    assert glob_matches("a/**/b", "a/b")
    assert glob_matches("a/**/b", "a//b")


def test_star_and_question_are_segment_local() -> None:
    assert not glob_matches("skills/*.md", "skills/a/b.md")
    assert glob_matches("skills/?.md", "skills/a.md")
    assert not glob_matches("skills/?.md", "skills//x.md")


def test_three_stars() -> None:
    # `***` reads as `**` then `*`: `.*[^/]*`, so `***/x` needs a slash.
    assert not glob_matches("***/x", "x")
    assert glob_matches("***/x", "d/e/x")


def test_regex_metacharacters_are_literals() -> None:
    assert glob_matches("a+b/(c).md", "a+b/(c).md")
    assert not glob_matches("a.md", "aXmd")
    assert glob_matches("[ab].md", "[ab].md")
    assert not glob_matches("[ab].md", "a.md")
    assert glob_matches("{a,b}|^$.md", "{a,b}|^$.md")
    assert not glob_matches("{a,b}.md", "a.md")


def test_full_path_anchored_match() -> None:
    assert not glob_matches("skills/a.md", "xskills/a.md")
    assert not glob_matches("skills/a.md", "skills/a.md.bak")
    assert not glob_matches("skills/a.md", "skills/a.md\n")


def test_case_sensitive() -> None:
    assert not glob_matches("**/SKILL.md", "a/skill.md")


def test_double_star_does_not_cross_js_line_terminators() -> None:
    for terminator in "\n\r\u2028\u2029":
        assert not glob_matches("a/**", f"a/x{terminator}y")
    assert glob_matches("a/**", "a/x\u0085y")
    # `[^/]` does match them.
    assert glob_matches("a/*", "a/x\ny")
    assert glob_matches("a/?", "a/\n")


def test_question_mark_is_one_utf16_unit() -> None:
    assert not glob_matches("?", "\U0001f600")
    assert glob_matches("??", "\U0001f600")
    assert glob_matches("?", "\ud800")
    assert glob_matches("*.md", "\U0001f600.md")


CFG = ProtectedMatcher(["todowrite"], ["**/skills/**/*.md"])


def test_protected_by_tool_name_regardless_of_args() -> None:
    assert CFG.is_protected("todowrite", None)
    assert CFG.is_protected("todowrite", {"path": "src/app.ts"})
    assert not CFG.is_protected("TodoWrite", None)
    assert not CFG.is_protected(None, None)
    assert not CFG.is_protected(42, None)


def test_protected_by_path_glob() -> None:
    assert CFG.is_protected("read", {"path": "/h/skills/x/SKILL.md"})
    assert not CFG.is_protected("read", {"path": "/h/src/app.ts"})


def test_backslashes_normalized_to_forward_slashes() -> None:
    assert CFG.is_protected("read", {"path": "h\\skills\\x\\SKILL.md"})
    assert CFG.matches_path("C:\\Users\\me\\skills\\a.md")
    # A backslash in a pattern can never match a normalized path.
    assert not ProtectedMatcher([], ["a\\b"]).matches_path("a\\b")


@pytest.mark.parametrize(
    "args",
    [{"path": 42}, {"path": None}, {"path": ["a.md"]}, {}, None, "skills/a.md", ["skills/a.md"]],
)
def test_non_string_or_missing_path_is_not_protected(args: Any) -> None:
    assert not CFG.is_protected("read", args)


def test_only_the_path_argument_is_read() -> None:
    assert not CFG.is_protected("read", {"file_path": "skills/a.md"})
    assert not CFG.is_protected("bash", {"command": "cat skills/a.md"})


def test_empty_config_protects_nothing() -> None:
    empty = ProtectedMatcher([], [])
    assert not empty.is_protected("read", {"path": "skills/a/SKILL.md"})
    assert not empty.matches_path("")


def test_default_protected_paths() -> None:
    default = ProtectedMatcher([], ["**/skills/**/*.md"])
    assert default.is_protected("read", {"path": "/h/skills/x/SKILL.md"})
    assert default.is_protected("read", {"path": ".agents/skills/release/SKILL.md"})
    assert not default.is_protected("read", {"path": ".pi/settings.json"})
    assert not default.is_protected("read", {"path": "skills.md"})


def test_any_glob_may_match() -> None:
    matcher = ProtectedMatcher([], ["*.txt", "docs/**"])
    assert matcher.matches_path("a.txt")
    assert matcher.matches_path("docs/x/y.md")
    assert not matcher.matches_path("src/a.md")


def test_lone_surrogates_in_names_and_paths() -> None:
    matcher = ProtectedMatcher(["t\ud800"], ["**/\udc00*.md"])
    assert matcher.is_protected("t\ud800", None)
    assert not matcher.is_protected("t\ufffd", None)
    assert matcher.is_protected("read", {"path": "x\\\udc00y.md"})


def test_matcher_keeps_its_lists() -> None:
    matcher = ProtectedMatcher(("todowrite",), ["**/skills/**/*.md"])
    assert matcher.tools == ["todowrite"]
    assert matcher.globs == ["**/skills/**/*.md"]
    assert repr(matcher) == "ProtectedMatcher(tools=['todowrite'], globs=['**/skills/**/*.md'])"


def test_a_string_is_not_a_list_of_names() -> None:
    # JavaScript would do substring matching on a string `protectedTools`; we reject it.
    with pytest.raises(TypeError):
        ProtectedMatcher("todowrite", [])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ProtectedMatcher([1], [])  # type: ignore[list-item]


def _glob_oracle(glob: str) -> re.Pattern[str]:
    """Spec 05 section 2.3, translated to a Python regex with JS `.` semantics."""
    out = []
    i = 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out.append("(?:[^/]*/)*")
            i += 3
        elif glob.startswith("**", i):
            out.append("[^\n\r\u2028\u2029]*")
            i += 2
        elif glob[i] == "*":
            out.append("[^/]*")
            i += 1
        elif glob[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return re.compile("".join(out))


_glob_chars = st.sampled_from("ab/*?.\\")
_path_chars = st.sampled_from("ab/.\\\n\u2028x")


@given(st.text(_glob_chars, max_size=10), st.text(_path_chars, max_size=12))
def test_glob_matches_the_spec_translation(glob: str, path: str) -> None:
    expected = _glob_oracle(glob).fullmatch(path.replace("\\", "/")) is not None
    assert ProtectedMatcher([], [glob]).matches_path(path) is expected

"""Lone surrogates in every string the index and the chain code keep reach the output intact.

A JS string may hold a lone surrogate (a tool output cut at a UTF-16 boundary, a summary that
quotes one); Python ``str`` holds it as a surrogate code point, Rust ``str`` cannot. The oracle
is metamorphic: every lone surrogate ``U+D800 + k`` of the input is swapped for the private-use
character ``U+E000 + k`` (one UTF-16 unit as well, so every length, cut and position the
pipeline computes is the same), the pipeline runs on both inputs, and the output of the
surrogate input must be the output of the swapped input with the swap undone. A U+FFFD where
the input had a lone surrogate fails it. ``--json`` output is checked against the JSON text
``JSON.stringify`` writes: each lone surrogate as a ``\\udXXX`` escape.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pi_condense._core import deterministic_body
from pi_condense.config import Config
from pi_condense.js import json as jsjson
from pi_condense.render import render
from pi_condense.session import SessionFile
from pi_condense.state import PrunerState
from pi_condense.tools import ContextTreeQuery, SessionRecovery
from support.builders import swapped, unswapped

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _no_pairs(s: str) -> bool:
    """No high surrogate right before a low one (JS would read the two as one character)."""
    return not any(
        0xD800 <= ord(a) <= 0xDBFF and 0xDC00 <= ord(b) <= 0xDFFF for a, b in itertools.pairwise(s)
    )


# Text with lone surrogates anywhere (and astral characters, which are not lone).
_chars = st.one_of(
    st.sampled_from("ab {}-\n"),
    st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),
    st.just("\U0001f600"),
)
texts = st.text(_chars, min_size=1, max_size=12).filter(_no_pairs)
LONE = "\ud83d"


def _user(ts: int) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": "go"}], "timestamp": ts}


def _assistant(ts: int, blocks: list[dict[str, Any]]) -> dict[str, Any]:
    calls = any(b["type"] == "toolCall" for b in blocks)
    return {
        "role": "assistant",
        "content": blocks,
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": "m",
        "usage": {},
        "stopReason": "toolUse" if calls else "stop",
        "timestamp": ts,
    }


def _result(call_id: str, name: str, ts: int, body: str) -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": name,
        "content": [{"type": "text", "text": body}],
        "isError": False,
        "timestamp": ts,
    }


def _record(call_id: str, name: str, ts: int, **extra: Any) -> dict[str, Any]:
    return {
        "toolCallId": call_id,
        "toolName": name,
        "args": {"cmd": "ls"},
        "resultText": "raw",
        "isError": False,
        "turnIndex": 0,
        "timestamp": 1,
        "resultTimestamp": ts,
        **extra,
    }


@st.composite
def sessions(draw: st.DrawFn) -> tuple[list[Any], list[dict[str, Any]]]:
    """Two chains (the second's summary names the first by ``{b1}``), a spilled result and a
    summarized one, with generated text in every stored string field."""
    name, preview, path = draw(texts), draw(texts), "/s/" + draw(texts)
    body_a, body_b, range_text = draw(texts), draw(texts), draw(texts)
    block, tool_ref, short = "b" + draw(texts), "t" + draw(texts), "t" + draw(texts)
    list_content = draw(st.booleans())
    messages = [
        _user(100),
        _assistant(110, [{"type": "toolCall", "id": "c1", "name": name, "arguments": {}}]),
        _result("c1", name, 120, "x" * 50),
        _assistant(130, [{"type": "text", "text": "done"}]),
        _user(200),
        _assistant(210, [{"type": "toolCall", "id": "c2", "name": "bash", "arguments": {}}]),
        _result("c2", "bash", 220, "y" * 50),
        _assistant(230, [{"type": "text", "text": "ok"}]),
        _user(300),
        _assistant(310, [{"type": "toolCall", "id": "c3", "name": name, "arguments": {}}]),
        _result("c3", name, 320, "z" * 50),
        _assistant(330, [{"type": "text", "text": "end"}]),
    ]
    spilled = _record(
        "c3", name, 320, resultText="", spillPath=path, spillBytes=50, resultPreview=preview
    )
    content: Any = body_a
    if list_content:
        content = [{"type": "text", "text": body_a}, {"type": "text", "text": body_b}]
    entries: list[dict[str, Any]] = [
        {
            "type": "custom",
            "customType": "context-prune-index",
            "data": {
                "toolCalls": [
                    _record("c1", name, 120),
                    _record("c2", "bash", 220),
                    spilled,
                ]
            },
        },
        {
            "type": "custom_message",
            "customType": "context-prune-summary",
            "content": content,
            "display": False,
            "details": {
                "toolCallRefs": [{"shortId": short, "toolCallId": "c1", "resultTimestamp": 120}]
            },
        },
        {
            "type": "custom",
            "customType": "context-prune-chain",
            "data": {
                "blockId": "b1",
                "startUserTimestamp": 100,
                "droppedToolCallIds": ["c1"],
                "droppedOccurrenceKeys": ["c1@120"],
                "finalAssistantTimestamp": 130,
                "toolRefs": [tool_ref],
                "compressedAt": 9000,
            },
        },
        {
            "type": "custom",
            "customType": "context-prune-chain",
            "data": {
                "blockId": block,
                "startUserTimestamp": 200,
                "droppedToolCallIds": ["c2"],
                "finalAssistantTimestamp": 230,
                "toolRefs": [tool_ref, "t9"],
                "compressedAt": 9100,
                "rangeSummaryText": range_text + " {b1} " + range_text,
            },
        },
    ]
    return messages, entries


def _render(messages: list[Any], entries: list[Any], chains: bool) -> list[Any]:
    config = Config.from_settings_dict({"enabled": True, "chainCompression": {"enabled": chains}})
    return render(messages, PrunerState.from_branch(entries), config).messages


def _js_size(value: Any) -> int:
    return len(jsjson.dumps(value).encode("utf-16-le", "surrogatepass")) // 2


@SETTINGS
@given(sessions(), st.booleans())
@example(
    (
        [_user(100)],
        [{"type": "custom", "customType": "context-prune-chain", "data": {"blockId": LONE}}],
    ),
    True,
)
def test_render_keeps_lone_surrogates_of_every_stored_field(
    session: tuple[list[Any], list[Any]], chains: bool
) -> None:
    messages, entries = session
    ours = _render(messages, entries, chains)
    expected = unswapped(_render(swapped(messages), swapped(entries), chains))
    assert ours == expected
    # JSON.stringify escapes each lone surrogate (the text encodes to strict UTF-8 and reads
    # back as the same value); no U+FFFD appears, as the input had none.
    text = jsjson.dumps(ours)
    assert "\ufffd" not in text
    text.encode("utf-8")
    assert jsjson.loads(text) == ours


def test_a_summary_body_with_a_lone_surrogate_renders_escaped() -> None:
    messages = [
        _user(100),
        _assistant(110, [{"type": "toolCall", "id": "c1", "name": "bash", "arguments": {}}]),
        _result("c1", "bash", 120, "x"),
        _assistant(130, [{"type": "text", "text": "done"}]),
    ]
    entries = [
        {
            "type": "custom",
            "customType": "context-prune-index",
            "data": {"toolCalls": [_record("c1", "bash", 120)]},
        },
        {
            "type": "custom_message",
            "customType": "context-prune-summary",
            "content": [{"type": "text", "text": "cut \ud83d"}, {"type": "text", "text": "b"}],
            "display": False,
            "details": {
                "toolCallRefs": [{"shortId": "t1", "toolCallId": "c1", "resultTimestamp": 120}]
            },
        },
        {
            "type": "custom",
            "customType": "context-prune-chain",
            "data": {
                "blockId": "b1",
                "startUserTimestamp": 100,
                "droppedToolCallIds": ["c1"],
                "droppedOccurrenceKeys": ["c1@120"],
                "finalAssistantTimestamp": 130,
                "toolRefs": ["t1"],
                "compressedAt": 9000,
            },
        },
    ]
    out = _render(messages, entries, True)
    synthetic = out[1]["content"][0]["text"]
    assert synthetic == '<compressed-chain id="b1" tools="t1">\ncut \ud83d\nb\n</compressed-chain>'
    # As JSON.stringify writes it: the lone surrogate escaped, nothing replaced.
    assert '"text":"<compressed-chain id=\\"b1\\" tools=\\"t1\\">\\ncut \\ud83d\\nb\\n' in (
        jsjson.dumps(out)
    )


@SETTINGS
@given(st.lists(st.tuples(texts, texts, texts), min_size=1, max_size=3), st.lists(texts))
def test_deterministic_body_keeps_lone_surrogates(
    rows: list[tuple[str, str, str]], refs: list[str]
) -> None:
    records = [(name, call_id, args, 1000.0 * i) for i, (name, call_id, args) in enumerate(rows)]
    ours = deterministic_body(records, refs)
    theirs = deterministic_body(swapped(records), swapped(refs))
    # Histogram ties sort by localeCompare, which may order a surrogate and its stand-in
    # differently: compare the lines that do not depend on that order.
    assert [ln for ln in ours.split("\n") if not ln.startswith("Tools: ")] == [
        unswapped(ln) for ln in theirs.split("\n") if not ln.startswith("Tools: ")
    ]


def test_deterministic_body_cut_inside_a_pair_keeps_the_high_surrogate() -> None:
    args = "a" * 199 + "\U0001f600" + "tail"  # the 200-unit cut falls inside the pair
    body = deterministic_body([("read", "c1", args, 1000.0)], [])
    assert "\nFirst: read " + "a" * 199 + "\ud83d...\n" in body


@SETTINGS
@given(texts, texts, texts)
def test_query_tool_prints_record_text_exactly(name: str, result: str, arg: str) -> None:
    def run(n: str, r: str, a: str) -> str:
        state = PrunerState()
        state.add_batch([_record("c1", n, 120, resultText=r, args={"k": a})])
        return ContextTreeQuery(state, "/nonexistent", "s").execute({"toolCallIds": ["c1"]}).text

    assert run(name, result, "x") == unswapped(run(*swapped([name, result]), "x"))
    # Args are printed as JSON.stringify(args, null, 2): a lone surrogate as its escape.
    text = run("bash", "out", arg)
    assert f'"k": {jsjson.dumps(arg)}' in text
    assert "\ufffd" not in text


def test_render_cli_json_escapes_lone_surrogates(tmp_path: Path) -> None:
    messages = [
        _user(100),
        _assistant(110, [{"type": "toolCall", "id": "c1", "name": "bash", "arguments": {}}]),
        _result("c1", "bash", 120, "x" * 50),
        _assistant(130, [{"type": "text", "text": "done"}]),
    ]
    entries = [
        {
            "type": "custom",
            "customType": "context-prune-index",
            "data": {
                "toolCalls": [
                    _record(
                        "c1",
                        "bash",
                        120,
                        resultText="",
                        spillPath="/s/p",
                        spillBytes=50,
                        resultPreview="head \udc00",
                    )
                ]
            },
        },
    ]
    header = {
        "type": "session",
        "version": 3,
        "id": "s",
        "timestamp": "2025-01-01T00:00:00.000Z",
        "cwd": "/",
    }
    rows: list[dict[str, Any]] = [header]
    parent = None
    for i, message in enumerate(messages):
        rows.append(
            {
                "type": "message",
                "id": f"m{i}",
                "parentId": parent,
                "timestamp": "2025-01-01T00:00:00.000Z",
                "message": message,
            }
        )
        parent = f"m{i}"
        if i == 2:
            for j, entry in enumerate(entries):
                rows.append(
                    {
                        **entry,
                        "id": f"e{j}",
                        "parentId": parent,
                        "timestamp": "2025-01-01T00:00:00.000Z",
                    }
                )
                parent = f"e{j}"
    session = tmp_path / "s.jsonl"
    session.write_bytes("".join(jsjson.dumps(r) + "\n" for r in rows).encode("utf-8"))
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from pi_condense.cli import main; main()",
            "render",
            str(session),
            "--json",
        ],
        capture_output=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode("utf-8")
    assert "Preview (head):\\nhead \\udc00\\nFull output" in out
    assert "\ufffd" not in out


def _session_text(user: str, answer: str, output: str) -> str:
    stamp = "2026-01-01T00:00:0{}.000Z"
    rows: list[dict[str, Any]] = [
        {"type": "session", "version": 3, "id": "s1", "timestamp": stamp.format(0), "cwd": "/w"}
    ]
    messages = [
        {"role": "user", "content": user, "timestamp": 1},
        _assistant(
            2,
            [
                {"type": "text", "text": answer},
                {"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"cmd": "ls"}},
            ],
        ),
        {**_result("c1", "bash", 3, output), "isError": True},
        _assistant(4, [{"type": "text", "text": answer + " again"}]),
    ]
    parent = None
    for i, message in enumerate(messages):
        rows.append(
            {
                "type": "message",
                "id": f"m{i}",
                "parentId": parent,
                "timestamp": stamp.format(i + 1),
                "message": message,
            }
        )
        parent = f"m{i}"
    return "".join(jsjson.dumps(r) + "\n" for r in rows)


@settings(SETTINGS, max_examples=25)
@given(texts, texts, texts)
def test_recovery_tools_keep_lone_surrogates(user: str, answer: str, output: str) -> None:
    def run(u: str, a: str, o: str) -> list[Any]:
        tools = SessionRecovery(SessionFile.parse(_session_text(u, a, o)))
        results = [
            tools.overview({}),
            tools.read_section({"entry_id": "m1"}),
            tools.read_section({"entry_id": "m2"}),
            tools.search({"query": "a"}),
            tools.recovery_context({}),
        ]
        # JSON texts are compared as the values they encode (a lone surrogate is escaped);
        # read_section's text is plain.
        return [r.text if r.text.startswith("[") else jsjson.loads(r.text) for r in results]

    ours = run(user, answer, output)
    assert ours == unswapped(run(*swapped([user, answer, output])))
    assert "\ufffd" not in jsjson.dumps(ours)


# ------------------------------------------------------------ ids and keys with lone surrogates
#
# Ids are compared exactly (JS `===` on UTF-16), so two ids that differ only in a lone
# surrogate, or in a lone surrogate against U+FFFD, are two calls with two records and two refs.
# The swap oracle gives each lone surrogate its own private-use stand-in, so ids that are
# distinct there must be told apart here too.


@st.composite
def id_sessions(draw: st.DrawFn) -> tuple[list[Any], list[dict[str, Any]], list[str]]:
    """Three summarized calls (one spilled) and a closed chain over the first, with
    generated ids; the second id is the first with its lone surrogates as U+FFFD, when it has
    any (the ids the lossy index confused)."""
    first = draw(texts)
    second = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in first)
    if second == first:
        second = draw(texts)
    third = draw(texts)
    ids = [first, second, third]
    if len(set(ids)) < 3:
        ids = [first + "1", first + "2", first + "3"]
    a, b, c = ids
    messages = [
        _user(100),
        _assistant(110, [{"type": "toolCall", "id": a, "name": "bash", "arguments": {}}]),
        _result(a, "bash", 120, "x" * 50),
        _assistant(130, [{"type": "text", "text": "done"}]),
        _user(200),
        _assistant(
            210,
            [
                {"type": "toolCall", "id": b, "name": "bash", "arguments": {}},
                {"type": "toolCall", "id": c, "name": "read", "arguments": {}},
            ],
        ),
        _result(b, "bash", 220, "y" * 50),
        _result(c, "read", 221, "z" * 50),
        _assistant(230, [{"type": "text", "text": "ok"}]),
    ]
    spilled = _record(
        c, "read", 221, resultText="", spillPath="/s/p", spillBytes=50, resultPreview="head"
    )
    entries: list[dict[str, Any]] = [
        {
            "type": "custom",
            "customType": "context-prune-index",
            "data": {
                "toolCalls": [
                    _record(a, "bash", 120, resultText="out of " + a),
                    _record(b, "bash", 220, resultText="out of " + b),
                    spilled,
                ]
            },
        },
        {
            "type": "custom_message",
            "customType": "context-prune-summary",
            "content": "summary of " + a,
            "display": False,
            "details": {
                "toolCallRefs": [
                    {"shortId": "t1", "toolCallId": a, "resultTimestamp": 120},
                    {"shortId": "t2", "toolCallId": b, "resultTimestamp": 220},
                ]
            },
        },
        {
            "type": "custom_message",
            "customType": "context-prune-summary",
            "content": "summary of " + c,
            "display": False,
            "details": {
                "toolCallRefs": [{"shortId": "t3", "toolCallId": c, "resultTimestamp": 221}]
            },
        },
    ]
    if draw(st.booleans()):
        entries.append(
            {
                "type": "custom",
                "customType": "context-prune-chain",
                "data": {
                    "blockId": "b1",
                    "startUserTimestamp": 100,
                    "droppedToolCallIds": [a],
                    "droppedOccurrenceKeys": [a + "@120"],
                    "finalAssistantTimestamp": 130,
                    "toolRefs": ["t1"],
                    "compressedAt": 9000,
                },
            }
        )
    return messages, entries, ids


_PINNED_IDS = (
    [
        _user(100),
        _assistant(
            110,
            [
                {"type": "toolCall", "id": "a\ud800", "name": "bash", "arguments": {}},
                {"type": "toolCall", "id": "a\ufffd", "name": "bash", "arguments": {}},
            ],
        ),
        _result("a\ud800", "bash", 120, "x" * 50),
        _result("a\ufffd", "bash", 121, "y" * 50),
        _assistant(130, [{"type": "text", "text": "done"}]),
    ],
    [
        {
            "type": "custom",
            "customType": "context-prune-index",
            "data": {
                "toolCalls": [
                    _record("a\ud800", "bash", 120, resultText="out of a\ud800"),
                    _record("a\ufffd", "bash", 121, resultText="out of a\ufffd"),
                ]
            },
        },
        {
            "type": "custom_message",
            "customType": "context-prune-summary",
            "content": "S",
            "display": False,
            "details": {
                "toolCallRefs": [
                    {"shortId": "t1", "toolCallId": "a\ud800", "resultTimestamp": 120},
                    {"shortId": "t2", "toolCallId": "a\ufffd", "resultTimestamp": 121},
                ]
            },
        },
    ],
    ["a\ud800", "a\ufffd", "b"],
)


@SETTINGS
@given(id_sessions(), st.booleans())
@example(_PINNED_IDS, False)
def test_ids_with_lone_surrogates_render_as_distinct_strings(
    session: tuple[list[Any], list[Any], list[str]], chains: bool
) -> None:
    messages, entries, _ = session
    ours = _render(messages, entries, chains)
    assert ours == unswapped(_render(swapped(messages), swapped(entries), chains))
    text = jsjson.dumps(ours)
    text.encode("utf-8")  # every lone surrogate escaped
    assert jsjson.loads(text) == ours


def test_an_id_and_its_lossy_twin_are_stubbed_under_their_own_refs() -> None:
    messages, entries, _ = _PINNED_IDS
    out = _render(messages, entries, False)
    assert [m["toolCallId"] for m in out[2:4]] == ["a\ud800", "a\ufffd"]
    assert "ref `t1`" in out[2]["content"][0]["text"]
    assert "ref `t2`" in out[3]["content"][0]["text"]
    state = PrunerState.from_branch(entries)
    assert state.resolve("t1") == "a\ud800@120"
    assert state.resolve("t2") == "a\ufffd@121"
    assert state.short_ref("a\ud800@120") == "t1"
    assert not state.is_summarized("a\ufffd@120")
    assert [r["toolCallId"] for r in state.records_for_id("a\ud800")] == ["a\ud800"]
    assert state.index.keys() == ["a\ud800@120", "a\ufffd@121"]
    assert state.index.short_refs() == [("t1", "a\ud800@120"), ("t2", "a\ufffd@121")]


@SETTINGS
@given(id_sessions())
@example(_PINNED_IDS)
def test_query_by_id_key_and_ref_answers_as_for_distinct_strings(
    session: tuple[list[Any], list[Any], list[str]],
) -> None:
    _, entries, ids = session

    def run(branch: list[Any], wanted: list[str]) -> list[str]:
        state = PrunerState.from_branch(branch)
        tool = ContextTreeQuery(state, "/nonexistent", "s")
        return [tool.execute({"toolCallIds": [w]}).text for w in wanted]

    wanted = [*ids, ids[0] + "@120", "t1", "t2", "t3"]
    ours = run(entries, wanted)
    assert ours == unswapped(run(swapped(entries), swapped(wanted)))
    for id_, text in zip(ids[:2], ours, strict=False):
        assert "out of " + id_ in text


def test_a_pair_given_as_two_code_points_is_the_astral_character() -> None:
    # One JS string, two Python strings: a record under either form answers lookups by both;
    # keys the index returns are in the joined form (what JSON decoding gives).
    for stored, asked in (("\ud800\udc00", "\U00010000"), ("\U00010000", "\ud800\udc00")):
        state = PrunerState()
        assert state.add_batch([_record(stored, "bash", 5)]) == ["\U00010000@5"]
        assert state.is_summarized(asked + "@5")
        assert state.get_record(asked) is not None
        assert state.index.keys() == ["\U00010000@5"]
        messages = [
            _user(1),
            _assistant(2, [{"type": "toolCall", "id": asked, "name": "bash", "arguments": {}}]),
            _result(asked, "bash", 5, "x" * 50),
            _assistant(6, [{"type": "text", "text": "ok"}]),
        ]
        state.register_refs([{"shortId": "t1", "toolCallId": stored, "resultTimestamp": 5}])
        out = render(messages, state, Config.from_settings_dict({"enabled": True})).messages
        assert "ref `t1`" in out[2]["content"][0]["text"]
        assert out[2]["toolCallId"] == asked  # the message's own string


def test_keys_holding_the_key_form_escape_are_kept_exactly() -> None:
    # U+FDD0 (the index's internal escape) in a real id is an ordinary character.
    ids = ["x\ufdd0", "x\ufdd0\uf000", "x\ud800", "x\ufdd0\ufdd0"]
    state = PrunerState()
    keys = state.add_batch([_record(i, "bash", n) for n, i in enumerate(ids)])
    assert keys == [f"{i}@{n}" for n, i in enumerate(ids)]
    assert state.index.keys() == keys
    for key in keys:
        assert state.resolve(key) == key

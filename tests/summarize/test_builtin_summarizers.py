"""The built-in summarizers: the conformance fake model and the embedded deterministic default.

Expected values come from the conformance README's grammar, the spec's serialization vector
(05 section 13.1) and the reference vectors' own summarizer logs.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest

from conftest import shared_root
from pi_condense.summarize.base import Completion, CompletionRequest
from pi_condense.summarize.conformance import (
    FAKE_MODEL,
    ConformanceSummarizer,
    fake_assistant_message,
    fake_summarize,
    prompt_kind,
)
from pi_condense.summarize.deterministic import (
    DeterministicSummarizer,
    summarize_batch_prompt,
    summarize_range_prompt,
)
from pi_condense.summarize.factory import make_summarizer
from pi_condense.summarize.labels import refs_footer, substitute_inline_refs
from pi_condense.summarize.prompt import SYSTEM_PROMPT, batch_prompt, range_prompt

REPLAY = shared_root() / "conformance" / "replay"
VECTORS = sorted(p.name for p in REPLAY.iterdir() if (p / "summarizer.jsonl.gz").is_file())

# Spec 05 section 13.1: the serialization of (hi; read {"path":"a"} -> ok; bash {} -> e, error).
SPEC_SERIALIZATION = (
    'Assistant said: hi\n\n[[1:read]] Tool: read({\n  "path": "a"\n})\nResult (OK): ok\n'
    "---\n[[2:bash]] Tool: bash({})\nResult (ERROR): e"
)


def wrap_batch(serialized: str) -> str:
    return f"{SYSTEM_PROMPT}\n\n<tool-call-batch>\n{serialized}\n</tool-call-batch>"


def complete(summarizer: Any, prompt: str, kind: str = "batch") -> tuple[Completion, int]:
    events = 0

    def on_event() -> None:
        nonlocal events
        events += 1

    request = CompletionRequest(prompt=prompt, kind=kind, timestamp=1700000000123)  # type: ignore[arg-type]
    return asyncio.run(summarizer.complete(request, on_event)), events


def vector_calls(name: str) -> list[dict[str, Any]]:
    with gzip.open(REPLAY / name / "summarizer.jsonl.gz", "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


# ------------------------------------------------------------------------------ conformance


@pytest.mark.parametrize("name", VECTORS)
def test_fake_reproduces_every_call_of_the_vector(name: str) -> None:
    calls = vector_calls(name)
    assert calls
    for call in calls:
        assert fake_summarize(call["prompt"]) == call["output"], call["n"]
        assert prompt_kind(call["prompt"]) == call["kind"], call["n"]


def test_fake_batch_on_the_spec_serialization() -> None:
    prompt = wrap_batch(SPEC_SERIALIZATION)
    assert prompt == batch_prompt_from_spec()
    assert fake_summarize(prompt) == "- [[1:read]] read OK: ok\n- [[2:bash]] bash ERROR: e"


def batch_prompt_from_spec() -> str:
    class Batch:
        assistant_text = "hi"
        tool_calls = (
            {"toolName": "read", "args": {"path": "a"}, "resultText": "ok", "isError": False},
            {"toolName": "bash", "args": {}, "resultText": "e", "isError": True},
        )

    return batch_prompt(Batch())


def test_fake_result_search_follows_js_regex_semantics() -> None:
    # "." matches no \r, U+2028, U+2029: those Result lines are passed over.
    for breaker in ("\r", "\u2028", "\u2029"):
        prompt = (
            "<tool-call-batch>\n[[1:bash]] Tool: bash({})\n"
            f"Result (OK): a{breaker}b\nResult (ERROR): second\n</tool-call-batch>"
        )
        assert fake_summarize(prompt) == "- [[1:bash]] bash ERROR: second"
    # A \r inside the label's name is fine ([^\]\n] matches it).
    prompt = "[[1:a\rb]] Tool: x\nResult (OK): y"
    assert fake_summarize(prompt) == "- [[1:a\rb]] a\rb OK: y"


def test_fake_missing_or_empty_results_and_no_labels() -> None:
    assert fake_summarize("[[3:read]] Tool: read({})") == "- [[3:read]] read OK: (empty)"
    assert fake_summarize("[[1:read]] Tool: read\nResult (OK): ") == "- [[1:read]] read OK: (empty)"
    assert fake_summarize("nothing here") == "- (no tool calls found)"
    # A label must start its line; "Result" must too.
    assert fake_summarize(" [[1:read]] Tool: read") == "- (no tool calls found)"
    assert fake_summarize("[[1:r]] Tool: r\n Result (OK): x") == "- [[1:r]] r OK: (empty)"


def test_fake_cuts_at_code_points() -> None:
    emoji = "\U0001f600"
    prompt = f"[[1:read]] Tool: read\nResult (OK): {emoji * 100}"
    assert fake_summarize(prompt) == f"- [[1:read]] read OK: {emoji * 80}"
    # A lone surrogate is one element of Array.from; a split pair held as two halves is one.
    lone = "\ud800" + "x" * 100
    assert fake_summarize(f"[[1:r]] Tool: r\nResult (OK): {lone}").endswith("\ud800" + "x" * 79)
    pair = "\ud83d\ude00" * 81
    assert fake_summarize(f"[[1:r]] Tool: r\nResult (OK): {pair}").endswith(": " + pair[:160])


def test_fake_range_fusion() -> None:
    body = "- `t1` read OK: a\nnarrative `b2` and `t1` again\n- `t3` bash OK: c\n* not a bullet"
    prompt = range_prompt(body)
    assert fake_summarize(prompt) == (
        "Fused range summary (oracle fake): 2 bullet lines.\n"
        "Refs: `t1`, `b2`, `t3`\n- `t1` read OK: a"
    )
    assert prompt_kind(prompt) == "range"
    long_bullet = "- " + "y" * 200
    assert fake_summarize(range_prompt(long_bullet)).endswith("\n- " + "y" * 118)
    # Tags out of order or missing close: empty body.
    assert fake_summarize("<sub-task-summaries> only") == (
        "Fused range summary (oracle fake): 0 bullet lines.\nRefs: none"
    )


def test_prompt_kind() -> None:
    assert prompt_kind(wrap_batch("x")) == "batch"
    assert prompt_kind("plain text") == "other"


def test_conformance_summarizer_completion() -> None:
    prompt = wrap_batch(SPEC_SERIALIZATION)
    summarizer = ConformanceSummarizer()
    completion, events = complete(summarizer, prompt)
    assert events == 1
    assert completion.text == "- [[1:read]] read OK: ok\n- [[2:bash]] bash ERROR: e"
    assert completion.stop_reason == "stop"
    lines_in = prompt.count("\n") + 1
    assert (completion.usage.input, completion.usage.output) == (lines_in, 2)
    assert completion.usage.total_tokens == lines_in + 2
    assert completion.usage.cost.total == 0
    assert summarizer.model.provider == "oracle"
    assert summarizer.model.id == "oracle-fake-summarizer"
    assert summarizer.model.label == "Oracle Fake Summarizer"
    assert summarizer.last_message is not None
    assert summarizer.last_message["timestamp"] == 1700000000123
    assert summarizer.description == FAKE_MODEL


def test_fake_assistant_message_shape() -> None:
    message = fake_assistant_message("[[1:x]] Tool: x\nResult (OK): y", 42)
    assert json.dumps(message, separators=(",", ":")) == (
        '{"role":"assistant","content":[{"type":"text","text":"- [[1:x]] x OK: y"}],'
        '"api":"oracle-fake","provider":"oracle","model":"oracle-fake-summarizer",'
        '"usage":{"input":2,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":3,'
        '"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},'
        '"stopReason":"stop","timestamp":42}'
    )


def test_factory_builds_the_builtins() -> None:
    assert isinstance(make_summarizer("conformance"), ConformanceSummarizer)
    assert isinstance(make_summarizer("default"), DeterministicSummarizer)


# ---------------------------------------------------------------------------- deterministic

LABEL_LINE = re.compile(r"^- \[\[([0-9]+):([^\]\n]+)\]\] ", re.MULTILINE)


def labels_in(prompt: str) -> list[tuple[str, str]]:
    return re.findall(r"^\[\[([0-9]+):([^\]\n]+)\]\] Tool: ", prompt, re.MULTILINE)


def test_deterministic_one_bullet_per_call_on_real_prompts() -> None:
    """Every batch prompt the reference sent for the real session: one labelled bullet per
    tool call, in order, and every label survives the pipeline's ref rewrite."""
    prompts = [c["prompt"] for c in vector_calls("large-default") if c["kind"] == "batch"]
    assert len(prompts) > 40
    for prompt in prompts:
        output = summarize_batch_prompt(prompt)
        labels = labels_in(prompt.split("<tool-call-batch>\n", 1)[1])
        assert LABEL_LINE.findall(output) == labels
        assert len(output.split("\n")) == len(labels)
        refs = [{"shortId": f"t{i}", "toolCallId": f"c{i}"} for i in range(1, len(labels) + 1)]
        rewritten = substitute_inline_refs(output, refs, [name for _, name in labels])
        assert [line.split(" ", 2)[1] for line in rewritten.split("\n")] == [
            f"`t{i}`" for i in range(1, len(labels) + 1)
        ]


def test_deterministic_summary_is_much_shorter_than_raw() -> None:
    prompts = [c["prompt"] for c in vector_calls("large-default") if c["kind"] == "batch"]
    for prompt in prompts:
        serialized = prompt.split("<tool-call-batch>\n", 1)[1]
        output = summarize_batch_prompt(prompt)
        if len(serialized) >= 3000:
            assert len(output) * 2 < len(serialized), output


def test_deterministic_bullet_content() -> None:
    big = "\n".join(f"line {i} of the module text" for i in range(60))
    calls = (
        {"toolName": "read", "args": {"path": "src/app.ts", "offset": 10}, "resultText": big},
        {
            "toolName": "bash",
            "args": {"command": "npm test -- --run\necho done", "timeout": 60},
            "resultText": "> tests\n\nError: Cannot find module 'vitest'\n    at load (x.js:1)",
            "isError": True,
        },
        {"toolName": "grep", "args": {"pattern": "TODO", "path": "src"}, "resultText": ""},
        {"toolName": "web", "args": {"url": "https://example.com/a"}, "resultText": "ok"},
    )

    class Batch:
        assistant_text = "Checking things."
        tool_calls = calls

    output = summarize_batch_prompt(batch_prompt(Batch()))
    lines = output.split("\n")
    assert lines[0].startswith("- [[1:read]] read path=src/app.ts, offset=10 -> OK, 60 lines")
    assert "line 0 of the module text" in lines[0]
    assert lines[1].startswith("- [[2:bash]] bash `npm test -- --run` -> ERROR")
    assert "Error: Cannot find module 'vitest'" in lines[1]
    assert lines[2] == "- [[3:grep]] grep path=src, `TODO` -> OK, empty"
    assert lines[3] == "- [[4:web]] web url=https://example.com/a -> OK: ok"


def test_deterministic_reads_the_true_size_of_truncated_results() -> None:
    calls = ({"toolName": "read", "args": {"path": "big.txt"}, "resultText": "word " * 3000},)

    class Batch:
        assistant_text = ""
        tool_calls = calls

    output = summarize_batch_prompt(batch_prompt(Batch()))
    assert output.startswith("- [[1:read]] read path=big.txt -> OK, 1+ lines, 15.0k chars: word")


def test_deterministic_puts_error_lines_first_for_failed_calls() -> None:
    text = (
        "> pkg@1.0.0 check\n> tsgo --noEmit\n\n"
        "src/a.ts(3,7): error TS2339: Property 'x' does not exist\n"
        "npm ERR! code ENOENT\n" + "more output here\n" * 20
    )
    calls = (
        {
            "toolName": "bash",
            "args": {"command": "npm run check"},
            "resultText": text,
            "isError": True,
        },
    )

    class Batch:
        assistant_text = ""
        tool_calls = calls

    output = summarize_batch_prompt(batch_prompt(Batch()))
    head, details = output.split(": ", 1)
    assert head == "- [[1:bash]] bash `npm run check` -> ERROR, 26 lines, 453 chars"
    assert details.split(" | ")[:2] == [
        "src/a.ts(3,7): error TS2339: Property 'x' does not exist",
        "npm ERR! code ENOENT",
    ]


def _details(text: str, is_error: bool = False) -> list[str]:
    calls = (
        {"toolName": "bash", "args": {"command": "x"}, "resultText": text, "isError": is_error},
    )

    class Batch:
        assistant_text = ""
        tool_calls = calls

    output = summarize_batch_prompt(batch_prompt(Batch()))
    return output.split(": ", 1)[1].split(" | ") if ": " in output else []


@pytest.mark.parametrize(
    ("line", "is_error_line"),
    [
        ("the step FaIlEd again at 3", True),  # any case
        (
            "Zugriff verweigert: \u017fuch datei n\u0131cht (no \u017fuch file)",
            True,
        ),  # U+017F (long s) matches s without case
        ("one two three xEPERM four", False),  # an errno only as a whole word
        ("one two three EPERM, four", True),
        ("one two three EPE four", False),  # at least three capitals after the E
        ("one two three not\tfound four", False),  # the words' own space only
    ],
)
def test_deterministic_finds_error_lines_after_the_first_two(
    line: str, is_error_line: bool
) -> None:
    text = "alpha line one\nbeta line two\ngamma line three\n" + line + "\n" + "padding text\n" * 12
    expected = ["alpha line one", "beta line two"] + ([line] if is_error_line else [])
    assert _details(text) == expected
    # a failed call shows its error lines first
    assert _details(text, is_error=True) == ([line] if is_error_line else []) + expected[:2]


def test_deterministic_label_lookalikes_in_output_stay_in_their_call() -> None:
    serialized = (
        "[[1:bash]] Tool: bash({})\nResult (OK): first\n[[7:read]] Tool: fake\n---\n"
        "[[2:read]] Tool: read({})\nResult (OK): second"
    )
    output = summarize_batch_prompt(wrap_batch(serialized))
    assert [line[:12] for line in output.split("\n")] == ["- [[1:bash]]", "- [[2:read]]"]


def test_deterministic_range_merge() -> None:
    one = "- `t1` read a.ts -> OK\n- `t2` bash `make` -> ERROR: boom" + refs_footer(
        [{"shortId": "t1"}, {"shortId": "t2"}]
    )
    two = "- `t3` read a.ts -> OK\n- `t1` read a.ts -> OK" + refs_footer([{"shortId": "t3"}])
    output = summarize_range_prompt(range_prompt(one + "\n\n" + two))
    assert output == (
        "Sub-task summary (2 steps):\n"
        "- `t1` read a.ts -> OK\n"
        "- `t2` bash `make` -> ERROR: boom\n"
        "- `t3` read a.ts -> OK\n"
        "Refs: `t1`, `t2`, `t3`"
    )


def test_deterministic_range_caps_bullets_but_keeps_every_ref() -> None:
    body = "\n".join(f"- `t{i}` step {i}" for i in range(1, 31))
    output = summarize_range_prompt(range_prompt(body))
    lines = output.split("\n")
    assert len(lines) == 1 + 12 + 1 + 1
    assert lines[-2] == "- (+18 more)"
    assert lines[-1] == "Refs: " + ", ".join(f"`t{i}`" for i in range(1, 31))


def test_deterministic_summarizer_completion_is_free() -> None:
    summarizer = DeterministicSummarizer()
    completion, events = complete(summarizer, wrap_batch(SPEC_SERIALIZATION))
    assert events == 1
    assert completion.text.split("\n") == [
        "- [[1:read]] read path=a -> OK: ok",
        "- [[2:bash]] bash -> ERROR: e",
    ]
    assert completion.stop_reason == "stop"
    assert completion.usage.total_tokens == 0
    assert completion.usage.cost.total == 0
    assert summarizer.model.label == "pi-condense deterministic"
    fused, _ = complete(summarizer, range_prompt("- `t1` x"), "range")
    assert fused.text == "Sub-task summary (1 step):\n- `t1` x\nRefs: `t1`"
    other, _ = complete(summarizer, "Summarize this conversation please.\n\n", "batch")
    assert other.text == "- Summarize this conversation please."


def test_vector_dir_exists() -> None:
    assert Path(REPLAY).is_dir()
    assert len(VECTORS) == 6

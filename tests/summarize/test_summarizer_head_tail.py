"""The summarizer's input holds the head and the tail of a long output (issue 39: facts past
the first 2,000 chars never reached it); ``compat: "reference"`` keeps the reference's cut."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pi_condense.integrations.anthropic_messages import MessagesCondenser
from pi_condense.replay_log import RecordingSummarizer
from pi_condense.summarize.deterministic import DeterministicSummarizer, summarize_batch_prompt
from pi_condense.summarize.prompt import batch_prompt, serialize_batch


@dataclass
class _Batch:
    tool_calls: Sequence[dict[str, Any]]
    assistant_text: str = ""


def _output(chars: int, tail: str) -> str:
    body = "".join(f"line {n:05d} ok\n" for n in range(chars // 14 + 1))
    return body[: chars - len(tail)] + tail


def _call(text: str) -> dict[str, Any]:
    return {"toolName": "bash", "args": {"command": "make"}, "resultText": text}


def test_reference_cut_is_unchanged_and_ours_keeps_head_and_tail() -> None:
    text = _output(20_000, "FINAL: 3 failed")
    reference = serialize_batch(_Batch([_call(text)]))
    assert reference.endswith(f"Result (OK): {text[:2000]} ...[18000 chars truncated]")
    ours = serialize_batch(_Batch([_call(text)]), head_tail=True)
    cut = f"{text[:4000]}\n...[12000 chars truncated]...\n{text[-4000:]}"
    assert ours.endswith(f"Result (OK): {cut}")
    assert "FINAL: 3 failed" in ours
    assert "FINAL: 3 failed" not in reference
    short = _output(8000, "END")  # up to 8,000 chars: the whole output
    assert serialize_batch(_Batch([_call(short)]), head_tail=True).endswith(short)


def test_offline_summarizer_reads_the_true_size_of_a_head_and_tail_cut() -> None:
    text = _output(20_000, "Traceback: ValueError: bad config")
    for head_tail in (False, True):
        summary = summarize_batch_prompt(batch_prompt(_Batch([_call(text)]), head_tail=head_tail))
        assert "20.0k chars" in summary
    ours = summarize_batch_prompt(batch_prompt(_Batch([_call(text)]), head_tail=True))
    assert "ValueError: bad config" in ours  # the error at the end reaches the summary


@pytest.mark.parametrize(("compat", "reaches"), [("default", True), ("reference", False)])
def test_a_fact_at_the_end_of_a_5k_output_reaches_the_summarizer(
    tmp_path: Path, compat: str, reaches: bool
) -> None:
    summarizer = RecordingSummarizer(DeterministicSummarizer())
    hook = MessagesCondenser(
        session=tmp_path / "s.jsonl", config={"compat": compat}, summarizer=summarizer
    )
    use = {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "make"}}
    result = {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": _output(5000, "PORT=4821"),
    }
    messages: list[Any] = [
        {"role": "user", "content": "build it"},
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": [result]},
    ]
    hook.condense(messages)
    messages += [
        {"role": "assistant", "content": [{"type": "text", "text": "built"}]},
        {"role": "user", "content": "next"},
    ]
    sent = hook.condense(messages)
    hook.close()
    assert len(summarizer.calls) == 1
    assert "PORT=4821" not in str(sent)  # the output was summarized
    assert ("PORT=4821" in summarizer.calls[0].prompt) is reaches

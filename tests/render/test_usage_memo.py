"""Pi's context estimate read through a memo answers as a fresh read of the messages."""

from __future__ import annotations

from typing import Any

import pytest

from pi_condense.usage import TokenMemo, estimate_context_tokens


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": 1}


def _assistant(text: str, usage: Any = None, stop: str = "stop") -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "stopReason": stop,
        "timestamp": 2,
    }
    if usage is not None:
        message["usage"] = usage
    return message


def _result(text: str) -> dict[str, Any]:
    return {"role": "toolResult", "toolCallId": "c", "content": [{"type": "text", "text": text}]}


USAGE = {"input": 100, "output": 20, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 120}


def test_a_growing_history_is_estimated_as_pi_does_with_and_without_the_memo() -> None:
    memo: TokenMemo = {}
    history: list[Any] = []
    steps = [
        _user("x" * 40),  # 10 tokens
        _assistant("y" * 8),  # 2, no usage: everything is estimated
        _result("z" * 401),  # 101
        _assistant("w" * 4, usage=USAGE),  # the estimate starts from its 120 tokens
        _user("v" * 12),  # + 3
        _assistant("u" * 4, usage=USAGE, stop="aborted"),  # an aborted usage is not used: + 1
    ]
    expected = [10, 12, 113, 120, 123, 124]
    for step, tokens in zip(steps, expected, strict=True):
        history.append(step)
        assert estimate_context_tokens(history) == tokens
        assert estimate_context_tokens(history, memo) == tokens
    assert len(memo) == len(history)  # each message read once
    # a new list of the same messages (a summary placed in between) reuses what was read
    placed = [*history[:4], {"role": "custom", "content": "s" * 20}, *history[4:]]
    assert estimate_context_tokens(placed, memo) == 129
    assert estimate_context_tokens(placed) == 129


def test_what_is_not_a_message_fails_or_is_skipped_as_without_the_memo() -> None:
    skipped = [_user("x" * 40), "not a message", _assistant("y" * 8)]
    assert estimate_context_tokens(skipped, {}) == estimate_context_tokens(skipped) == 12
    after_usage = [_assistant("w", usage=USAGE), "not a message"]
    with pytest.raises(AttributeError):
        estimate_context_tokens(after_usage)
    with pytest.raises(AttributeError):
        estimate_context_tokens(after_usage, {})

"""detect_format names the format a message list looks like; adapter_for gives its codec."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings

import pi_condense
from pi_condense.adapters import (
    AnthropicMessagesCodec,
    OpenAIChatCodec,
    OpenAIResponsesCodec,
    adapter_for,
    detect_format,
)
from support.adapters import (
    Call,
    Step,
    Turn,
    anthropic_history,
    chat_history,
    pi_history,
    responses_history,
    turns,
)

SETTINGS = settings(max_examples=60, deadline=None)


def telling(plan: Any) -> bool:
    """Whether the plan has something only one format spells its own way."""
    return any(turn.steps or turn.image for turn in plan)


@SETTINGS
@given(turns())
def test_each_generated_history_is_recognised(plan: Any) -> None:
    if telling(plan):
        assert detect_format(chat_history(plan)) == "openai-chat"
        assert detect_format(responses_history(plan)) == "openai-responses"
        assert detect_format(anthropic_history(plan)) == "anthropic-messages"
    assert detect_format(pi_history(plan, lambda t: None)) in (
        ("pi",) if telling(plan) else ("pi", None)
    )


def test_plain_text_messages_fit_every_format() -> None:
    plain = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert detect_format(plain) is None
    assert detect_format([]) is None
    assert detect_format({"role": "user"}) is None


def test_timestamps_and_pi_roles_say_pi() -> None:
    assert detect_format([{"role": "user", "content": "hi", "timestamp": 1}]) == "pi"
    example = Path(pi_condense.__file__).parent / "examples" / "example-session.jsonl"
    lines = example.read_text(encoding="utf-8").splitlines()
    messages = [json.loads(line)["message"] for line in lines if '"type":"message"' in line]
    assert messages
    assert detect_format(messages) == "pi"


def test_adapter_for_names_each_codec() -> None:
    assert isinstance(adapter_for("openai-chat"), OpenAIChatCodec)
    assert isinstance(adapter_for("openai-responses"), OpenAIResponsesCodec)
    assert isinstance(adapter_for("anthropic-messages"), AnthropicMessagesCodec)
    with pytest.raises(ValueError, match="need no adapter"):
        adapter_for("pi")
    with pytest.raises(ValueError, match="known: anthropic-messages, openai-chat"):
        adapter_for("gemini")


def test_render_messages_warns_about_a_provider_format(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from pi_condense.cli import app

    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    chat = tmp_path / "chat.json"
    plan = [Turn("read it", False, (Step("", "", (Call("call_0", "read", {}, "x"),)),), "ok")]
    chat.write_text(json.dumps(chat_history(plan)), encoding="utf-8")
    pi = tmp_path / "pi.json"
    pi.write_text(json.dumps(pi_history(plan, lambda t: None)), encoding="utf-8")
    runner = CliRunner()
    args = ["render", "--example", "--json", "--messages"]
    warned = runner.invoke(app, [*args, str(chat)], env={"COLUMNS": "400"})
    assert warned.exit_code == 0, warned.stderr
    assert (
        f"pi-condense: warning: {chat}: these look like openai-chat messages, not Pi messages; "
        "convert them first with pi_condense.adapters.adapter_for('openai-chat').decode(...)"
    ) in warned.stderr.replace("\n", "")
    quiet = runner.invoke(app, [*args, str(pi)], env={"COLUMNS": "400"})
    assert quiet.exit_code == 0, quiet.stderr
    assert "warning" not in quiet.stderr

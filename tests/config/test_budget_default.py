"""Ours: with ``autoBudgetThreshold`` unset the budget trigger fires at half the window, so a
long run of one prompt is condensed before its final reply (issue 39: on the quality
benchmark's 200-call run, defaults sent 89% of no pruning's tokens); the reference has none."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import pytest

from pi_condense.config import Config
from pi_condense.config.models import DEFAULT_BUDGET_THRESHOLD
from pi_condense.integrations.anthropic_messages import MessagesCondenser


def test_threshold_in_effect() -> None:
    assert Config.from_settings_dict({}).budget_threshold == DEFAULT_BUDGET_THRESHOLD == 0.5
    assert Config.from_settings_dict({"compat": "reference"}).budget_threshold is None
    assert Config.from_settings_dict({"autoBudgetThreshold": 0.8}).budget_threshold == 0.8
    explicit = {"compat": "reference", "autoBudgetThreshold": 0.8}
    assert Config.from_settings_dict(explicit).budget_threshold == 0.8


def _run(tmp_path: Path, config: dict[str, Any]) -> list[Any]:
    """One prompt, 16 reads of 6,000 chars (~24k tokens) in a 20k-token window; the request
    before the final reply."""
    hook = MessagesCondenser(session=tmp_path / "s.jsonl", config=config, context_window=20_000)
    messages: list[Any] = [{"role": "user", "content": "migrate everything"}]
    sent: Optional[list[Any]] = None
    for n in range(16):
        use = {"type": "tool_use", "id": f"toolu_{n}", "name": "read", "input": {"path": f"f{n}"}}
        messages.append({"role": "assistant", "content": [use]})
        body = "".join(f"f{n} line {i:04d}\n" for i in range(400))[:6000]
        result = {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": body}
        messages.append({"role": "user", "content": [result]})
        sent = hook.condense(messages)
    hook.close()
    assert sent is not None
    return sent


@pytest.mark.parametrize(("compat", "condensed"), [("default", True), ("reference", False)])
def test_a_long_run_of_one_prompt_is_condensed_before_its_final_reply(
    tmp_path: Path, compat: str, condensed: bool
) -> None:
    sent = _run(tmp_path, {"compat": compat})
    stubs = [
        b
        for m in sent
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result" and "context_tree_query" in str(b["content"])
    ]
    assert bool(stubs) is condensed
    chars = len(str(sent))
    assert (chars < 16 * 6000 * 0.6) is condensed

"""The quality benchmark's probe classes (benches/quality): questions about the task in
progress asked mid-prompt, and facts inside a chain pi-condense's chain compression takes."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benches.quality.agent import answer
from benches.quality.measure import wire
from benches.quality.run import DEFAULTS, MIN_PROBES, Tally, in_compressed_chain, run_workload
from benches.quality.strategies import PiCondense, Strategy
from benches.quality.workload import SYSTEM, Fact, Probe, autonomous, coding, workloads


def _expected(kind: str, user: str, run: list[dict[str, Any]]) -> str | None:
    """The answer to a task question, read off the prompt and its run so far."""
    if kind == "asked":
        m = re.search(r"\(ticket (\w+)\)$", user)
        return m.group(1) if m else None
    found = None
    for message in run:
        for b in message["content"]:
            if kind == "file" and b.get("type") == "tool_use" and b["name"] == "edit":
                found = b["input"]["path"]
            elif kind == "error" and b.get("type") == "tool_result" and b.get("is_error"):
                found = re.findall(r"error code (\w+)\)", b["content"])[-1]
            elif kind == "decision" and b.get("type") == "text":
                m = re.match(r"Decision: set the .* limit to (\w+),", b["text"])
                found = m.group(1) if m else found
    return found


def test_task_probes_ask_for_the_latest_state_of_the_run_mid_prompt() -> None:
    for w in (coding(5, prompts=3), autonomous(5, calls=60)):
        tasks = [p for p in w.probes if p.fact.kind != "output"]
        assert {p.fact.kind for p in tasks} == {"asked", "file", "error", "decision"}
        for p in tasks:
            prompt = w.prompts[p.after]
            assert prompt.messages[p.step]["role"] == "assistant"
            assert p.fact.prompt == p.after
            assert p.fact.answer == _expected(p.fact.kind, prompt.user, prompt.messages[: p.step])
        # asked in the middle of the run, not only at its end, and the answers move on
        assert any(0 < p.step < len(w.prompts[p.after].messages) - 1 for p in tasks)
        errors = [p.fact.answer for p in tasks if p.fact.kind == "error"]
        assert len(set(errors)) > 1
    runs = autonomous(5, calls=60)
    long_run = [p for p in runs.probes if p.after == 0]
    assert len({p.step for p in long_run}) >= 3  # every 25 calls and at the end
    assert any("mid-run" in p.tags for p in long_run)


def test_quick_workloads_hold_enough_probes_of_each_new_class() -> None:
    probes = [p for w in workloads(quick=True) for p in w.probes]
    assert sum(p.fact.kind != "output" for p in probes) >= MIN_PROBES
    assert sum("mid-run" in p.tags for p in probes) >= MIN_PROBES


def test_chain_class_is_measured_on_the_defaults_request_and_recovered() -> None:
    w = coding(39, prompts=5)
    strategy = PiCondense(DEFAULTS, {})
    try:
        outcomes = run_workload(w, strategy, Tally())
    finally:
        strategy.close()
    chain = [o for o in outcomes if o.chain]
    assert len(chain) >= 10
    assert {o.probe.fact.prompt for o in chain} == {0}  # 5 prompts: only the first one's run
    assert all(o.found for o in outcomes)
    assert any(o.calls > 0 for o in chain)  # behind the chain's summary, not in plain sight
    plain = run_workload(w, Strategy(), Tally())
    assert not any(o.chain for o in plain)
    assert all(o.found and o.calls == 0 for o in plain)


def test_in_compressed_chain_reads_the_prompt_and_its_chain_message() -> None:
    chain = {
        "type": "text",
        "text": '<compressed-chain id="b1" tools="t1">\nS\n</compressed-chain>',
    }
    sent = [
        {"role": "user", "content": [{"type": "text", "text": "task one"}, chain]},
        {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
        {"role": "user", "content": "task two"},
    ]
    assert in_compressed_chain(sent, "task one")
    assert not in_compressed_chain(sent, "task two")
    split = [{"role": "user", "content": "task one"}, {"role": "user", "content": [chain]}]
    assert in_compressed_chain(split, "task one")


def test_agent_finds_the_last_error_behind_the_latest_error_ref() -> None:
    history: list[dict[str, Any]] = []
    for task, code in enumerate(("FIRST1A", "LAST22B")):
        history.append({"role": "user", "content": f"task {task}: run the suite"})
        lines = [f"[{n:04d}] test_{n} passed" for n in range(400)]
        lines.insert(200, f"status: {code}")
        lines.append("FAILED: 1 test")
        use = {"type": "tool_use", "id": f"c{task}", "name": "bash",
               "input": {"command": f"make test-{task}"}}  # fmt: skip
        result = {"type": "tool_result", "tool_use_id": f"c{task}", "content": "\n".join(lines),
                  "is_error": True}  # fmt: skip
        history += [
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [result]},
            {"role": "assistant", "content": [{"type": "text", "text": "it failed"}]},
        ]
    for n in range(4):
        history.append({"role": "user", "content": f"note {n}"})
        history.append({"role": "assistant", "content": [{"type": "text", "text": "ok"}]})
    history.append({"role": "user", "content": "what was the last error?"})
    fact = Fact("k", "LAST22B", "What error code did the last failing command report?",
                "error code", "c1", 0, "task", 1, "", kind="error")  # fmt: skip
    strategy = PiCondense(DEFAULTS, {})
    try:
        sent = strategy.prepare(history)
        visible = wire(SYSTEM, strategy.tools(), sent)
        assert "LAST22B" not in visible
        assert visible.count("ERROR") >= 2  # both failures are summarized, ref and all
        got = answer(Probe(fact, 5, ("task:error",)), visible, sent, strategy)
    finally:
        strategy.close()
    assert (got.found, got.visible, got.calls) == (True, False, 1)
    assert json.dumps(sent).count("FIRST1A") == 0

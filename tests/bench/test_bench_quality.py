"""The quality benchmark's parts (benches/quality): the generator is deterministic, the cache
cost and rule checker measure what they say, and the scripted agent recovers a fact that is only
behind a ref (and fails on one that is gone)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benches.quality.agent import answer
from benches.quality.measure import cache_cost, rule_breaks, wire
from benches.quality.strategies import PiCondense, Strategy
from benches.quality.workload import SYSTEM, TOOLS, Fact, Probe, autonomous, coding


def _dump(workload: object) -> str:
    return json.dumps(workload, default=lambda o: o.__dict__, sort_keys=True)


def test_generator_is_deterministic_and_seeded() -> None:
    assert _dump(coding(7, prompts=3)) == _dump(coding(7, prompts=3))
    assert _dump(autonomous(7, calls=20)) == _dump(autonomous(7, calls=20))
    assert _dump(coding(7, prompts=3)) != _dump(coding(8, prompts=3))


def test_generated_workload_has_what_the_issue_lists() -> None:
    w = coding(39)
    blocks = [b for p in w.prompts for m in p.messages if isinstance(m["content"], list)
              for b in m["content"]]  # fmt: skip
    results = [b for b in blocks if b.get("type") == "tool_result"]
    sizes = [len(r["content"]) for r in results if isinstance(r["content"], str)]
    assert min(sizes) < 200
    assert max(sizes) > 300_000
    assert any(isinstance(r["content"], list) for r in results)  # screenshots: image blocks
    assert any(r.get("is_error") for r in results)
    ids = [b["id"] for b in blocks if b.get("type") == "tool_use"]
    assert len(ids) > len(set(ids))  # reused tool-call ids
    positions = {f.position for f in w.facts}
    assert positions == {"head", "middle", "tail", "caption", "task"}
    assert any("spilled" in f.tags for f in w.facts)
    assert {"recent", "later", "old", "mid-run"} <= {t for p in w.probes for t in p.tags}
    planted = [f for f in w.facts if f.kind in ("output", "error")]
    for fact in planted:  # every planted answer is in its output (and its re-reads) only
        hits = [r for r in results if fact.answer in json.dumps(r["content"])]
        assert hits[0]["tool_use_id"] == fact.tool_use_id
        assert all(h["content"] == hits[0]["content"] for h in hits)
    assert any(len([r for r in results if f.answer in json.dumps(r["content"])]) > 1
               for f in w.facts)  # fmt: skip


def test_cache_cost_prices_the_common_prefix_as_reads() -> None:
    a = "x" * 400
    assert cache_cost("", a) == (100 * 1.25, 0.0)
    assert cache_cost(a, a) == (100 * 0.1, 100.0)
    cost, cached = cache_cost(a, "x" * 200 + "y" * 200)
    assert cached == 50.0
    assert cost == 50 * 0.1 + 50 * 1.25
    # images are counted as 4,800 chars whatever their size, and identical ones match
    img = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "QQ=="}}
    one = wire("s", [], [{"role": "user", "content": [img]}])
    assert len(one) - len(wire("s", [], [{"role": "user", "content": []}])) > 4700


def _use(i: str) -> dict[str, object]:
    return {"type": "tool_use", "id": i, "name": "read", "input": {}}


def _result(i: str) -> dict[str, object]:
    return {"type": "tool_result", "tool_use_id": i, "content": "x"}


def test_rule_checker_finds_pairing_and_role_order_breaks() -> None:
    good = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [_use("a"), _use("b")]},
        {"role": "user", "content": [_result("b"), _result("a"), {"type": "text", "text": "s"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
    ]
    assert rule_breaks(good) == []
    assert rule_breaks(good[1:]) == ["first message is not a user message"]
    missing = [good[0], good[1], {"role": "user", "content": [_result("a")]}]
    assert "answered by ['a']" in rule_breaks(missing)[0]
    orphan = [good[0], {"role": "assistant", "content": [{"type": "text", "text": "t"}]},
              {"role": "user", "content": [_result("z")]}]  # fmt: skip
    assert rule_breaks(orphan) == ["message 2: tool_result z has no tool_use"]
    twice = [good[0], {"role": "user", "content": "again"}]
    assert rule_breaks(twice) == ["message 1: two user messages in a row"]
    late = [good[0], good[1], {"role": "user", "content": [{"type": "text", "text": "s"},
            _result("a"), _result("b")]}]  # fmt: skip
    assert rule_breaks(late) == ["message 2: tool_result after other blocks"]
    assert rule_breaks(good[:2]) == ["message 1: tool_use without a result (request ends)"]


def _history(facts: dict[str, str]) -> list[dict[str, object]]:
    history: list[dict[str, object]] = []
    for task, (path, line) in enumerate(facts.items()):
        history.append({"role": "user", "content": f"task {task}: inspect {path}"})
        head = [f"{n:4d} value_{n} = {n * 3}" for n in range(200)]
        body = "\n".join([*head, line, *(f"{n:4d} other_{n} = {n}" for n in range(200))])
        use = {"type": "tool_use", "id": f"call_{task}", "name": "read", "input": {"path": path}}
        history.append({"role": "assistant", "content": [use]})
        result = {"type": "tool_result", "tool_use_id": f"call_{task}", "content": body}
        history.append({"role": "user", "content": [result]})
        history.append({"role": "assistant", "content": [{"type": "text", "text": "done"}]})
    history.append({"role": "user", "content": "what did you find?"})
    return history


def _probe(path: str, subject: str, answer_text: str) -> Probe:
    fact = Fact("k", answer_text, f"In {path}, what is {subject}?", subject, "call_0", 0,
                "middle", 0, "")  # fmt: skip
    return Probe(fact, 1, ("old",))


def test_agent_recovers_a_fact_behind_a_ref_and_fails_on_a_gone_one() -> None:
    facts = {f"src/mod_{i}.py": f"NOTE: the port of service s{i} is PORT{i}X" for i in range(3)}
    history = _history(facts)
    strategy = PiCondense("pi-condense defaults", {})
    try:
        sent = strategy.prepare(history)
        visible = wire(SYSTEM, strategy.tools(), sent)
        assert "PORT0X" not in visible  # summarized: only its ref is in the request
        got = answer(_probe("src/mod_0.py", "the port of service s0", "PORT0X"), visible, sent,
                     strategy)  # fmt: skip
        assert got.found
        assert not got.visible
        assert 1 <= got.calls <= 2
        gone = answer(_probe("src/mod_0.py", "the port of service s0", "NOWHERE1"), visible,
                      sent, strategy)  # fmt: skip
        assert not gone.found
        assert gone.calls >= 2
    finally:
        strategy.close()
    # the same request without pruning: visible, no call; a peer without recovery tools fails
    plain = Strategy()
    text = wire(SYSTEM, TOOLS, history)
    assert answer(_probe("src/mod_0.py", "x", "PORT0X"), text, history, plain).calls == 0
    cleared = [{**m, "content": "[cleared]"} if m["role"] == "user" and isinstance(
        m["content"], list) else m for m in history]  # fmt: skip
    lost = answer(_probe("src/mod_0.py", "x", "PORT0X"), wire(SYSTEM, TOOLS, cleared), cleared,
                  plain)  # fmt: skip
    assert not lost.found
    assert lost.calls == 0


def _row(
    success: float, calls: float, tokens: float, cost: float, chain: float = 1.0, probes: int = 30
) -> dict[str, object]:
    return {
        "probe success": success,
        "extra calls / probe": calls,
        "tokens vs none": tokens,
        "cache cost": cost,
        "cache cost vs none": cost,
        "rule breaks": 0,
        "fidelity <=8k": 1.0,
        "success by tag": {"chain": chain, "mid-run": success, "task": success},
        "probes by tag": {"chain": probes, "mid-run": probes, "task": probes},
    }


def test_gate_fails_when_defaults_lose_to_a_peer_or_miss_a_bound() -> None:
    from benches.quality.run import gate

    rows = {
        "none": _row(1.0, 0, 1.0, 1.0),
        "pi-condense defaults": _row(1.0, 0.5, 0.2, 0.3),
        "peer": _row(0.5, 0, 0.3, 0.6),
    }
    assert gate(rows, 0.01) == []
    cheaper = {**rows, "peer": _row(0.5, 0, 0.3, 0.2)}
    assert [m.split(" (")[0] for m in gate(cheaper, 0.01)] == ["not Pareto-better than peer"]
    slow = {**rows, "pi-condense defaults": _row(1.0, 1.5, 0.2, 0.3)}
    assert gate(slow, 0.01) == ["extra calls per probe 1.50 > 1.19"]
    # each gated class on its own: ours loses the chain class to the peer, or it has too few
    chainless = {**rows, "pi-condense defaults": _row(1.0, 0.5, 0.2, 0.3, chain=0.4)}
    assert gate(chainless, 0.01) == [
        "class chain: probe success 40.0% < 99% of none's 100.0%",
        "class chain: probe success 40.0% < peer's 100.0%",
    ]
    few = {
        "none": _row(1.0, 0, 1.0, 1.0, probes=5),
        "pi-condense defaults": _row(1.0, 0.5, 0.2, 0.3, probes=5),
    }
    assert gate(few, 0.01) == [
        f"class {c}: 5 probes (want >= 20)" for c in ("chain", "mid-run", "task")
    ]

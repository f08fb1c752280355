"""Run the agent-quality and cost benchmark: every strategy on the same workloads.

``python -m benches.quality --out DIR [--quick] [--model PROVIDER:MODEL]`` writes
``DIR/quality.md`` (the table), ``DIR/quality.svg`` (probe success against prompt-cache cost,
one point per strategy) and ``DIR/quality.json``; ``--quick`` runs the reduced workloads and
exits 1 when pi-condense defaults miss the acceptance bounds (with margin).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from .agent import answer
from .measure import cache_cost, rule_breaks, tokens, wire
from .strategies import Strategy, all_strategies
from .workload import SYSTEM, Probe, Workload, workloads

DEFAULTS = "pi-condense defaults"
FIDELITY_CHARS = 8000
CLASSES = (
    "recent", "later", "old", "chain", "mid-run", "spilled", "image",
    "task:asked", "task:file", "task:error", "task:decision", "task",
)  # fmt: skip
GATED = ("chain", "mid-run", "task")  # the classes the gate checks one by one
MIN_PROBES = 20  # a gated class with fewer probes is a miss: it would prove nothing


@dataclass
class Tally:
    requests: int = 0
    tokens: float = 0.0
    cost: float = 0.0
    cached: float = 0.0
    breaks: int = 0
    break_examples: list[str] = field(default_factory=list)
    probes: int = 0
    found: int = 0
    calls: int = 0
    fidelity_facts: int = 0
    fidelity_kept: int = 0
    fidelity_all: int = 0
    fidelity_all_kept: int = 0
    by_tag: dict[str, list[int]] = field(default_factory=dict)  # tag -> [found, probes, calls]
    seconds: float = 0.0

    def count(self, tags: tuple[str, ...], found: bool, calls: int) -> None:
        self.probes += 1
        self.found += found
        self.calls += calls
        for tag in tags:
            cell = self.by_tag.setdefault(tag, [0, 0, 0])
            cell[0] += found
            cell[1] += 1
            cell[2] += calls

    def row(self, none: Tally) -> dict[str, Any]:
        return {
            "probe success": self.found / self.probes if self.probes else 0.0,
            "extra calls / probe": self.calls / self.probes if self.probes else 0.0,
            "tokens sent": self.tokens,
            "tokens vs none": self.tokens / none.tokens,
            "cache cost": self.cost,
            "cache cost vs none": self.cost / none.cost,
            "cache hit rate": self.cached / self.tokens if self.tokens else 0.0,
            "rule breaks": self.breaks,
            "fidelity <=8k": (self.fidelity_kept / self.fidelity_facts)
            if self.fidelity_facts
            else None,
            "fidelity all": (self.fidelity_all_kept / self.fidelity_all)
            if self.fidelity_all
            else None,
            "success by tag": {k: v[0] / v[1] for k, v in sorted(self.by_tag.items())},
            "calls by tag": {k: v[2] / v[1] for k, v in sorted(self.by_tag.items())},
            "probes by tag": {k: v[1] for k, v in sorted(self.by_tag.items())},
        }


@dataclass
class Outcome:
    """One probe's result for one strategy: ``chain`` when the probe's fact was inside a
    compressed chain of the request (pi-condense strategies only)."""

    probe: Probe
    found: bool
    calls: int
    chain: bool


def run_workload(
    workload: Workload, strategy: Strategy, tally: Tally, model: Optional[Any] = None
) -> list[Outcome]:
    """Send every request of ``workload`` through ``strategy``, asking the probes on the way;
    costs, rule breaks and fidelity go to ``tally``, the probes' outcomes are returned."""
    outcomes: list[Outcome] = []
    history: list[dict[str, Any]] = []
    previous = ""
    started = time.perf_counter()
    asked: dict[tuple[int, int], list[Probe]] = {}
    for probe in workload.probes:
        asked.setdefault((probe.after, probe.step), []).append(probe)
    for index, prompt in enumerate(workload.prompts):
        history.append({"role": "user", "content": prompt.user})
        for step, message in enumerate(prompt.messages):
            if message["role"] == "assistant":
                sent = strategy.prepare(history)
                text = wire(SYSTEM, strategy.tools(), sent)
                cost, cached = cache_cost(previous, text)
                previous = text
                tally.requests += 1
                tally.tokens += tokens(text)
                tally.cost += cost
                tally.cached += cached
                problems = rule_breaks(sent)
                if problems:
                    tally.breaks += 1
                    tally.break_examples.extend(problems[:1])
                for probe in asked.get((index, step), []):
                    outcomes.append(_probe(workload, probe, strategy, sent, text, model))
            history.append(message)
    tally.seconds += time.perf_counter() - started
    inputs = strategy.summarizer_inputs()
    for fact in workload.facts:
        seen = [p for p in inputs if fact.head and fact.head in p]
        if not seen:
            continue
        kept = any(fact.answer in p for p in seen)
        tally.fidelity_all += 1
        tally.fidelity_all_kept += kept
        if fact.output_chars <= FIDELITY_CHARS:
            tally.fidelity_facts += 1
            tally.fidelity_kept += kept
    return outcomes


def _probe(
    workload: Workload,
    probe: Probe,
    strategy: Strategy,
    sent: list[dict[str, Any]],
    text: str,
    model: Optional[Any],
) -> Outcome:
    if model is not None:
        found, calls = model.answer(probe, sent, strategy)
    else:
        result = answer(probe, text, sent, strategy)
        found, calls = result.found, result.calls
    chain = probe.fact.kind == "output" and in_compressed_chain(
        sent, workload.prompts[probe.fact.prompt].user
    )
    return Outcome(probe, found, calls, chain)


def in_compressed_chain(sent: list[dict[str, Any]], user: str) -> bool:
    """Whether the prompt ``user`` opens a compressed chain in ``sent``: its message (or the
    next one) holds a ``<compressed-chain`` text."""

    def texts(message: dict[str, Any]) -> list[str]:
        content = message["content"]
        if isinstance(content, str):
            return [content]
        return [b["text"] for b in content if b.get("type") == "text"]

    for i, message in enumerate(sent):
        if message["role"] == "user" and user in texts(message):
            after = texts(message)[texts(message).index(user) + 1 :]
            if i + 1 < len(sent) and sent[i + 1]["role"] == "user":
                after += texts(sent[i + 1])
            return any(t.startswith("<compressed-chain") for t in after)
    return False


def run(
    quick: bool, model: Optional[Any] = None, log: Any = sys.stderr
) -> dict[str, dict[str, Any]]:
    loads = workloads(quick)
    tallies: dict[str, Tally] = {}
    for workload in loads:
        outcomes: dict[str, list[Outcome]] = {}
        for strategy in all_strategies():
            tally = tallies.setdefault(strategy.name, Tally())
            try:
                outcomes[strategy.name] = run_workload(workload, strategy, tally, model)
            finally:
                strategy.close()
            print(f"{workload.name:<11} {strategy.name:<40} {tally.seconds:6.1f}s", file=log)
        # the chain class: probes whose fact pi-condense defaults had inside a compressed
        # chain when asked, the same probes for every strategy
        chain = [o.chain for o in outcomes.get(DEFAULTS, [])]
        for name, results in outcomes.items():
            for i, o in enumerate(results):
                extra = ("chain",) if i < len(chain) and chain[i] else ()
                tags = (*o.probe.tags, *extra, workload.name, o.probe.fact.position)
                tallies[name].count(tags, o.found, o.calls)
    none = tallies["none"]
    return {name: t.row(none) for name, t in tallies.items()} | {
        "_breaks": {name: t.break_examples[:3] for name, t in tallies.items()}  # type: ignore[dict-item]
    }


def table(rows: dict[str, dict[str, Any]]) -> str:
    cols = (
        "probe success",
        "extra calls / probe",
        "tokens vs none",
        "cache cost vs none",
        "cache hit rate",
        "rule breaks",
        "fidelity <=8k",
        "fidelity all",
    )
    out = ["| strategy | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
    for name, row in rows.items():
        if name.startswith("_"):
            continue
        cells = []
        for c in cols:
            v = row[c]
            cells.append(
                "-"
                if v is None
                else f"{v:.1%}"
                if c in ("probe success", "tokens vs none", "cache cost vs none", "cache hit rate")
                or c.startswith("fidelity")
                else f"{v:.2f}"
                if isinstance(v, float)
                else str(v)
            )
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def class_table(rows: dict[str, dict[str, Any]]) -> str:
    """Probe success per class (extra tool calls per probe in brackets when any)."""
    counts = rows["none"]["probes by tag"]
    cols = [c for c in CLASSES if c in counts]
    out = [
        "| strategy | " + " | ".join(f"{c} ({counts[c]})" for c in cols) + " |",
        "|---|" + "---:|" * len(cols),
    ]
    for name, row in rows.items():
        if name.startswith("_"):
            continue
        cells = []
        for c in cols:
            calls = row["calls by tag"].get(c, 0.0)
            cell = f"{row['success by tag'].get(c, 0.0):.1%}"
            cells.append(f"{cell} ({calls:.2f})" if calls else cell)
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def svg(rows: dict[str, dict[str, Any]]) -> str:
    """Probe success (y) against prompt-cache cost relative to no pruning (x)."""
    pts = [
        (n, r["cache cost vs none"], r["probe success"])
        for n, r in rows.items()
        if not n.startswith("_")
    ]
    w, h, pad = 760, 460, 60
    xmax = max(1.05, max(p[1] for p in pts) * 1.05)

    def x(v: float) -> float:
        return pad + v / xmax * (w - 2 * pad)

    def y(v: float) -> float:
        return h - pad - v * (h - 2 * pad)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{w}" height="{h}" fill="white"/>',
        f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="black"/>',
        f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h - pad}" stroke="black"/>',
        f'<text x="{w / 2}" y="{h - 20}" text-anchor="middle">'
        "prompt-cache cost (no pruning = 1.0; reads 0.1x, writes 1.25x)</text>",
        f'<text x="18" y="{h / 2}" transform="rotate(-90 18 {h / 2})" '
        'text-anchor="middle">probe success</text>',
    ]
    for t in range(0, 11, 2):
        parts.append(
            f'<text x="{pad - 8}" y="{y(t / 10) + 4:.1f}" text-anchor="end">{t * 10}%</text>'
        )
    for t in range(0, int(xmax * 10) + 1, 2):
        parts.append(
            f'<text x="{x(t / 10):.1f}" y="{h - pad + 16}" text-anchor="middle">{t / 10:.1f}</text>'
        )
    for i, (name, cx, cy) in enumerate(pts):
        color = (
            "#d62728"
            if name == DEFAULTS
            else "#1f77b4"
            if name.startswith("pi-condense")
            else "#555"
        )
        parts.append(f'<circle cx="{x(cx):.1f}" cy="{y(cy):.1f}" r="5" fill="{color}"/>')
        parts.append(
            f'<text x="{x(cx) + 8:.1f}" y="{y(cy) - 6 - (i % 3) * 11:.1f}" '
            f'fill="{color}">{name}</text>'
        )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def gate(rows: dict[str, dict[str, Any]], margin: float) -> list[str]:
    """The acceptance bounds pi-condense defaults miss (``margin`` widens nothing in their
    favour: it tightens each bound)."""
    d, none = rows[DEFAULTS], rows["none"]
    misses = []
    if d["probe success"] < (0.98 + margin) * none["probe success"]:
        misses.append(
            f"probe success {d['probe success']:.1%} < {0.98 + margin:.0%} "
            f"of none's {none['probe success']:.1%}"
        )
    if d["extra calls / probe"] > 1.2 - margin:
        misses.append(f"extra calls per probe {d['extra calls / probe']:.2f} > {1.2 - margin:.2f}")
    if d["tokens vs none"] > 0.4 - margin:
        misses.append(
            f"tokens sent {d['tokens vs none']:.1%} of none's (want <= {0.4 - margin:.0%})"
        )
    if d["rule breaks"]:
        misses.append(f"{d['rule breaks']} rule-breaking requests")
    fidelity = d["fidelity <=8k"]
    if fidelity is not None and fidelity < 0.95 + margin:
        misses.append(f"summary fidelity {fidelity:.1%} < {0.95 + margin:.0%}")
    peers = [n for n in rows if not n.startswith(("_", "pi-condense", "none"))]
    for c in GATED:
        count = none.get("probes by tag", {}).get(c, 0)
        if count < MIN_PROBES:
            misses.append(f"class {c}: {count} probes (want >= {MIN_PROBES})")
            continue
        ours = d["success by tag"][c]
        if ours < (0.98 + margin) * none["success by tag"][c]:
            misses.append(
                f"class {c}: probe success {ours:.1%} < {0.98 + margin:.0%} "
                f"of none's {none['success by tag'][c]:.1%}"
            )
        for name in peers:
            if ours < rows[name]["success by tag"][c]:
                misses.append(
                    f"class {c}: probe success {ours:.1%} < {name}'s "
                    f"{rows[name]['success by tag'][c]:.1%}"
                )
    for name in peers:
        row = rows[name]
        if d["probe success"] < row["probe success"] or d["cache cost"] > row["cache cost"]:
            misses.append(
                f"not Pareto-better than {name} (success {d['probe success']:.1%} vs "
                f"{row['probe success']:.1%}, cache cost {d['cache cost vs none']:.1%} vs "
                f"{row['cache cost vs none']:.1%})"
            )
    return misses


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benches.quality", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("quality-out"),
        help="where to write quality.md, .svg, .json",
    )
    parser.add_argument(
        "--quick", action="store_true", help="reduced workloads; gate on the acceptance bounds"
    )
    parser.add_argument(
        "--model",
        help="answer probes with a real model: openai:MODEL or anthropic:MODEL (network, key)",
    )
    parser.add_argument(
        "--margin", type=float, default=0.01, help="how much the gate tightens each bound"
    )
    args = parser.parse_args(argv)
    model = None
    if args.model:
        from .model import ModelAgent

        model = ModelAgent.from_spec(args.model)
    rows = run(args.quick, model)
    args.out.mkdir(parents=True, exist_ok=True)
    command = (
        "python -m benches.quality"
        + (" --quick" if args.quick else "")
        + (f" --model {args.model}" if args.model else "")
    )
    md = (
        f"Made by `{command}` (tokens: chars / 4 of the Anthropic Messages request, "
        "images 4,800 chars).\n\n"
        + table(rows)
        + "\nProbe success per class (probes in brackets in the header; extra tool calls per "
        "probe in brackets in a cell when any):\n\n" + class_table(rows)
    )
    (args.out / "quality.md").write_text(md)
    (args.out / "quality.svg").write_text(svg(rows))
    (args.out / "quality.json").write_text(json.dumps(rows, indent=2) + "\n")
    print(md)
    misses = gate(rows, args.margin)
    for miss in misses:
        print(f"pi-condense defaults: {miss}", file=sys.stderr)
    return 1 if misses and args.quick else 0

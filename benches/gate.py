"""The CI performance gate: speed ratios against baselines measured in the same run.

Usage (from the repository root, with the release build installed)::

    python benches/gate.py                 # x10, quick; exit 1 if a ratio misses its bound
    python benches/gate.py --report-only   # print the table, always exit 0 (unless a bench fails)

It runs ``bench_state.py`` and ``bench_render.py`` on the x10 sessions only (few rounds), in
a child pytest with ``--benchmark-json``, and compares each pi-condense operation with its
baseline on the same data. Timing is process CPU time (``time.process_time``: time spent
waiting for a core another process holds is not counted), GC is off during rounds, glibc keeps
large buffers on the heap (see :func:`run_benchmarks`), and each ratio divides the fastest
rounds (the median ratio is printed too):

=======  ==============================================  ======  =========
pair     subject / baseline                              target  bound
=======  ==============================================  ======  =========
state    PrunerState.from_branch / orjson.loads lines    1.0     1.25
open     Condenser.open + state + context / loads lines  1.5     2.5
render   full render, repeated / orjson.dumps(messages)  0.5     1.25
cold     full render, first / orjson.dumps(messages)     1.0     3.0
noop     no-op render / orjson.dumps(messages)           0.15    0.5
scale    corpus scan 2 workers / 1 worker (wall clock)   0.5     0.667
scan     corpus scan in process / orjson.loads lines     -       6.0
hook-*   a framework hook per model call, fresh objects  -       see PAIRS
cx3      condense x3 / x1, per model call                1.5     3.0
cx10     condense x10 / x1, per model call               1.5     8.0
live     Condenser events + context() / render, 10k      1.3     2.0
startup  ``pi-condense --version`` / ``python -c pass``  5.0     10.0
=======  ==============================================  ======  =========

The open pair (issue 17 item 5, ``bench_state.py``) measured 2.3-2.8 in two bench runs on
2026-12-01 (loaded VM; 1.8-2.0 by a direct timing, 1.22-1.52 for the load alone). Later that
day, in one run each of the older and the newer code, interleaved, it went 2.50-3.27 ->
1.37-2.00 (medians 2.17-3.71 -> 1.47-1.77; a direct timing, fastest of 12: 2.40 -> 1.72, the
load 1.50 -> 1.29, ``build_context`` 0.40 -> 0.14): each line's bytes go to ``orjson.loads``
first (the decode and depth-counting path only for a line it refuses), the branch walk checks
for a cycle by its step count instead of a set, ``build_context`` reuses the branch the session
keeps for its leaf instead of walking it again, and the loaded entries are indexed in one loop.
What is left over ``orjson.loads``: the Python line loop and indexing (about 0.3), the native
state rebuild (about 0.2-0.25, the state pair) and the context (about 0.15). Its bound is a
regression bound: the worst ratio of those runs plus 50%. On 2026-12-03 (old and new code
alternated, three runs each) it went 1.71-1.91 -> 1.40-1.66: the load's indexing loop also
tells a linear file (no branch walk) and gathers the tip's context, and the state rebuild
reads ``customType`` only of ``custom`` entries, with look-ahead hints (state 0.25-0.31 ->
0.20-0.23). One gate run then measured 1.69 (median 3.34: this pair is the noisiest). With
the state rebuilt from the branch's custom entries alone: 1.27-1.39 in three direct timings,
1.53 in a gate run (median 1.35); the bound came down to 2.5 (from 3.0: the older code's
worst, 2.08 in CI, plus 20%).

The start-up pair (``bench_cli.py``) runs both as subprocesses, timed by the children's CPU
time. On 2026-12-01 (loaded VM, same run) it measured 41.4 (1.27 s of CPU) with every command
module imported at start-up, and 6.6 (181 ms against 27 ms) once the root command loaded each
command's module on demand and ``import pi_condense`` stopped importing the pipeline; what is
left is typer's import and building the root group. Its bound is a regression bound: a command
module (with pydantic and rich) imported at start-up again costs about 20.

The pipeline pairs (issue 18, ``bench_pipeline.py``) divide each round by the model calls it
made (``extra_info["per"]``). The condense pairs are regression bounds: the growth is the
native render's and chain scan's (linear in the history per call). On 2026-12-01 (loaded VM,
a timer around the two native calls) a call cost 3.7 / 7.8 / 24.6 ms at x1 / x3 / x10, of
which the render 1.45 / 4.44 / 16.4 ms and the chain scan (at flushes) 0.31 / 0.84 / 2.86;
the rest of the pipeline 1.95 / 2.56 / 5.33 ms, most of its growth being the freeing of the
render's new messages from the previous call (0.09 ms at x1, 0.34 at x3) and the live
summary placer's C-speed pass over the list (0.09 / 0.18 / 0.57 ms). x10 is one round
(about 110 s of CPU on the loaded development VM), the slowest part of the gate. On
2026-12-02, with the replay's frozen-messages promise (the size memo trusts identity, the
chain scans lend their views), one run of this pair set: 1.46 / 3.17 / 11.71 ms per call
(ratios 2.18 and 8.04; the gate runs with the collector off, so the replay's collector pause
does not show here). Later that day, with the frozen prefix (the leading messages' views
lent without lookups) and a frozen host's unchanged new messages handed out again, two gate
runs on a slower, noisier VM measured condense-x3 1.55 / 1.63 and condense-x10 3.92 / 4.76
(1.54-1.60 / 2.39-2.60 / 6.04-7.60 ms per call), a clean-clone CI run 1.58 / 4.72. On
2026-12-03 the chain scans resume detection at the last plain user message before the first
message they read (x10 condense 2.0 -> 1.6 ms per call in process); the bounds came down to
the worst of those runs plus about 70-90% (3.0 and 8.0, from 4.0 and 14.0).

The hook pairs (issue 12) hand each hook a history rebuilt as new objects before every round
(the cold path most frameworks take) and divide by serializing that history: ``orjson.dumps``
for the wire formats (10k messages), LangChain's ``messages_to_dict`` + ``orjson.dumps`` (10k)
and pydantic-ai's ``ModelMessagesTypeAdapter.dump_json`` (10k). Their bounds are regression
bounds: the worst ratio measured on the loaded development VM plus 30-50%.

The target is the goal; the bound is what the gate enforces. On 2026-12-01 the development VM
measured the repeated render at 0.6-1.1 and the first at 2.0-2.1 for the very code (and native
module) that measured 0.35-0.44 and 1.44-1.84 in earlier runs (orjson's own baseline went 8 ->
15 ms): the repeated render walks memory the size memo holds and swings most with the machine.
Reading members by walking each dict (no hash lookup may run a key's ``__eq__`` while views
borrow, issue 17) made the first render 1.90 -> 2.76 in one loaded run (median above 3.0), so its
bound is 4.0 until the render extracts each message once at ingestion.
Its bound is now a regression bound (1.25; a render without the memo's reuse measures about 2),
and the first render's 3.0. Since the memo remembers a message only from its second render on
(anchors tell a host that keeps its objects from one that clones them), the first render no
longer records a reference to every object: on 2026-12-01 it went from 2.21-2.52 to 1.50-2.01
(the old and the new module alternated, four runs each; one gate run 1.58, one CI run 1.96), and
its bound from 4.0 to 3.0 (the worst + 50%). The target is issue 17's 1.0, not met: measuring
alone (a walk of every object, as ``orjson.dumps`` makes) is about 0.55 of it, PyDict_Next and
the string scans a third of that.
"Repeated" is a render against a
state whose size memo knows the messages from the previous round (a host's steady state:
the same history before every model call); "first" empties the memo before each round.

The no-op render reads every message's fields on every call since the dict version tags are
gone (issue 17: they were private CPython fields, without guarantees since 3.12 and removed in
3.14): on 2026-12-01, with the machine loaded (load average 6 on 2 cores), it measured 0.95 ms
(0.051) with the tags and 6.8 ms (0.34) without, before the member walk was narrowed to the
fields each role needs (about 4.3-5.1 ms then, by a direct timing). Its target is now 0.15 and
its bound 0.5 (the loaded measurement + ~50%); a render that measured every message (the
no-op contract broken) costs about the first render, far above it.

State meets its target; its bound is the target + 25% for noise. Over seven x10 gate runs
the repeated render measured 0.35-0.44 (with the dict version tags), under its target. The
first render (1.44-1.84) has a regression bound: today's worst measurement + 35%.

The corpus pairs (``bench_corpus.py``, 40 copies of the example session; 120 for ``scale``):
``scale`` is timed by the wall clock (the work runs in pool processes) and enforces that 2
workers reach at least 1.5x the throughput of 1 on the 2-core CI machine (on 40 sessions, 3
rounds, one CI run measured 0.676: a pool's fixed start/stop cost of about 0.1 s was a tenth
of the round, hence the larger corpus and 5 rounds); ``scan`` (about 4.6 measured) has a
regression bound.

On the 2-core development VM, consecutive gate runs moved each min-based ratio by up to 10%
from its mean with the CPU-time timer when the machine was otherwise idle, and by up to 20%
with other builds running (wall-clock timing moved them by up to 60%).

A miss is confirmed before the gate fails: the bench files that measured the missed pairs run
once more (a second child pytest), and each pair keeps the better of its two runs. On the
development VM on 2026-12-02 the very same module measured the repeated render at 1.00-1.31
and the first render at 2.0-3.0 in consecutive runs (orjson's baseline 14.0-21.1 ms): the
machine's speed drifts between the baseline's rounds and the subject's by more than the
bounds allow for. A real regression misses in both runs; drift rarely does twice.

Exit status: 0 all ratios within bounds (or ``--report-only``), 1 a ratio misses its bound,
2 the benchmarks themselves failed (a correctness check or an error).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Pair:
    """A subject benchmark and the baseline it is divided by."""

    name: str
    subject: str
    baseline: str
    target: Optional[float]
    bound: float
    baseline_of: Optional[str] = None
    """Take the baseline measured for this other pair (the same operation on the same data)."""


PAIRS = (
    Pair("state", "PrunerState.from_branch", "orjson.loads(lines)", 1.0, 1.25),
    Pair("open", "Condenser.open+state+context", "orjson.loads(lines)", 1.5, 2.5, "state"),
    Pair("render", "full render, repeated", "orjson.dumps(messages)", 0.5, 1.25),
    Pair("cold", "full render, first", "orjson.dumps(messages)", 1.0, 3.0, "render"),
    Pair("noop", "no-op render", "orjson.dumps(messages)", 0.15, 0.5),
    Pair("scale", "corpus scan, 2 workers", "corpus scan, 1 worker", 0.5, 0.667),
    Pair("scan", "corpus scan, in process", "orjson.loads(lines)", None, 6.0),
    Pair("hook-chat", "ChatCondenser per call, 10k fresh", "orjson.dumps(history)", None, 60.0),
    Pair("hook-anthropic", "MessagesCondenser, 10k fresh", "orjson.dumps(history)", None, 60.0),
    Pair("hook-agents", "CondenseFilter, 10k fresh", "orjson.dumps(history)", None, 60.0),
    Pair("hook-langchain", "CondenseMiddleware, 10k fresh", "messages_to_dict+dumps", None, 5.0),
    Pair("hook-pydantic-ai", "CondenseHistory, 10k fresh", "ModelMessages dump_json", None, 1.5),
    Pair("condense-x3", "condense x3, per model call", "condense x1, per call", 1.5, 3.0),
    Pair(
        "condense-x10",
        "condense x10, per model call",
        "condense x1, per call",
        1.5,
        8.0,
        "condense-x3",
    ),
    Pair("live", "Condenser events+context(), 10k", "render alone", 1.3, 2.0),
    Pair("startup", "pi-condense --version", "python -c pass", 5.0, 10.0),
)
PAIR_BY_NAME = {pair.name: pair for pair in PAIRS}

BENCH_FILES = (
    "bench_state.py",
    "bench_render.py",
    "bench_corpus.py",
    "bench_hook_adapters.py",
    "bench_hook_langchain.py",
    "bench_hook_pydantic_ai.py",
    "bench_pipeline.py",
    "bench_cli.py",
)


@dataclass(frozen=True)
class Ratio:
    """One row of the table."""

    pair: Pair
    copies: int
    subject_min: float
    baseline_min: float
    subject_median: float
    baseline_median: float

    @property
    def ratio(self) -> float:
        """Subject / baseline from the fastest rounds (what the bound is checked on)."""
        return self.subject_min / self.baseline_min

    @property
    def median_ratio(self) -> float:
        return self.subject_median / self.baseline_median


def ratios(results: Iterable[Mapping[str, Any]]) -> list[Ratio]:
    """Pair up ``{"pair", "role", "copies", "min", "median"}`` results into ratios."""
    found: dict[tuple[str, int], dict[str, Mapping[str, Any]]] = {}
    for result in results:
        found.setdefault((str(result["pair"]), int(result["copies"])), {})[str(result["role"])] = (
            result
        )
    rows: list[Ratio] = []
    for (name, copies), roles in sorted(found.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        pair = PAIR_BY_NAME.get(name)
        if pair is None or "subject" not in roles:
            continue
        if pair.baseline_of is not None:
            roles = {**found.get((pair.baseline_of, copies), {}), "subject": roles["subject"]}
        if "baseline" not in roles:
            continue
        subject, baseline = roles["subject"], roles["baseline"]
        rows.append(
            Ratio(
                pair,
                copies,
                float(subject["min"]),
                float(baseline["min"]),
                float(subject["median"]),
                float(baseline["median"]),
            )
        )
    return rows


def _names(rows: Iterable[Ratio]) -> str:
    return ", ".join(f"{r.pair.name} {r.ratio:.3f} > {r.pair.bound:g}" for r in rows)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


def format_table(rows: Iterable[Ratio], bounds: Optional[bool] = True) -> list[str]:
    """The ratio table as text lines; ``bounds`` adds the bound column and a verdict."""
    header = ["pair", "scale", "subject ms", "baseline ms", "ratio", "median", "target"]
    if bounds:
        header += ["bound", "ok"]
    table = [header]
    for row in rows:
        line = [
            f"{row.pair.name}: {row.pair.subject} / {row.pair.baseline}",
            f"x{row.copies}",
            _ms(row.subject_min),
            _ms(row.baseline_min),
            f"{row.ratio:.3f}",
            f"{row.median_ratio:.3f}",
            "-" if row.pair.target is None else f"<= {row.pair.target:g}",
        ]
        if bounds:
            line += [f"<= {row.pair.bound:g}", "ok" if row.ratio <= row.pair.bound else "MISS"]
        table.append(line)
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    out = []
    for i, r in enumerate(table):
        out.append(
            "  ".join(
                cell.ljust(w) if c == 0 else cell.rjust(w)
                for c, (cell, w) in enumerate(zip(r, widths, strict=False))
            )
        )
        if i == 0:
            out.append("  ".join("-" * w for w in widths))
    return out


def results_from_json(path: Path) -> list[dict[str, Any]]:
    """The tagged results of a pytest-benchmark JSON report (``file``: the bench file)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    results = []
    for bench in data.get("benchmarks", []):
        info = bench.get("extra_info", {})
        if {"pair", "role", "copies"} <= info.keys():
            per = float(info.get("per", 1))  # a round of `per` operations (model calls)
            stats = bench["stats"]
            file = Path(str(bench.get("fullname", "")).split("::")[0]).name
            results.append(
                {
                    **info,
                    "file": file,
                    "min": stats["min"] / per,
                    "median": stats["median"] / per,
                }
            )
    return results


def files_of(results: Iterable[Mapping[str, Any]], rows: Iterable[Ratio]) -> list[str]:
    """The bench files that measured the subjects and baselines of ``rows``."""
    names = set()
    for row in rows:
        names.add(row.pair.name)
        if row.pair.baseline_of is not None:
            names.add(row.pair.baseline_of)
    return sorted({str(r["file"]) for r in results if r["pair"] in names and r.get("file")})


def best_of(first: Iterable[Ratio], again: Iterable[Ratio]) -> list[Ratio]:
    """Per pair and scale, the run with the lower ratio (``first``'s order)."""
    retried = {(r.pair.name, r.copies): r for r in again}
    out = []
    for row in first:
        other = retried.get((row.pair.name, row.copies))
        out.append(other if other is not None and other.ratio < row.ratio else row)
    return out


def run_benchmarks(
    copies: int,
    rounds: int,
    max_time: float,
    report: Path,
    files: Optional[Iterable[str]] = None,
) -> int:
    """Run the bench ``files`` (all of :data:`BENCH_FILES` by default) in a child pytest
    writing ``report``; its exit status."""
    command = [
        sys.executable,
        "-m",
        "pytest",
        *(str(HERE / name) for name in (BENCH_FILES if files is None else files)),
        "-p",
        "no:cacheprovider",
        "-q",
        "--copies",
        str(copies),
        "--benchmark-only",
        f"--benchmark-min-rounds={rounds}",
        f"--benchmark-max-time={max_time}",
        "--benchmark-warmup=on",
        "--benchmark-warmup-iterations=1",
        "--benchmark-disable-gc",
        "--benchmark-timer=time.process_time",
        f"--benchmark-json={report}",
        "--benchmark-columns=min,median,rounds",
        "--benchmark-sort=name",
    ]
    env = dict(os.environ)
    # Serve large buffers (orjson's output, render's lists) from the heap and keep freed heap
    # mapped: glibc otherwise moves them between mmap and the heap depending on what ran
    # before (a page fault per 4 KiB when mmap'd), which swings the baselines by up to 2x.
    # Setting only the mmap threshold would be worse: the heap is then trimmed after every
    # large free, so each call faults its buffer in again.
    env.setdefault("MALLOC_MMAP_THRESHOLD_", str(256 * 1024 * 1024))
    env.setdefault("MALLOC_TRIM_THRESHOLD_", str(1024 * 1024 * 1024))
    return subprocess.run(command, cwd=HERE.parent, env=env, check=False).returncode


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="Benchmark ratio gate (see module docstring).")
    parser.add_argument("--copies", type=int, default=10, help="scale of the sessions (10)")
    parser.add_argument("--rounds", type=int, default=15, help="minimum rounds per benchmark")
    parser.add_argument("--max-time", type=float, default=1.0, help="seconds per benchmark")
    parser.add_argument("--report-only", action="store_true", help="never fail on a ratio")
    parser.add_argument("--json", type=Path, help="also keep the pytest-benchmark JSON here")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pi-condense-gate-") as tmp:
        report = args.json or Path(tmp) / "benchmarks.json"
        status = run_benchmarks(args.copies, args.rounds, args.max_time, report)
        if status != 0:
            print(f"gate: the benchmarks failed (pytest exit {status})", file=sys.stderr)
            return 2
        results = results_from_json(report)
        rows = ratios(results)
        first_misses = [r for r in rows if r.ratio > r.pair.bound]
        if first_misses and not args.report_only:
            # Confirm a miss before failing: the files that measured the missed pairs run
            # once more, and each pair keeps its better run (module docs).
            files = files_of(results, first_misses)
            print(f"gate: {_names(first_misses)}: measuring {', '.join(files)} again")
            again = Path(tmp) / "again.json"
            status = run_benchmarks(args.copies, args.rounds, args.max_time, again, files)
            if status != 0:
                print(f"gate: the benchmarks failed (pytest exit {status})", file=sys.stderr)
                return 2
            rows = best_of(rows, ratios(results_from_json(again)))
    print()
    print(f"pi-condense benchmark gate (x{args.copies}, min of >= {args.rounds} rounds)")
    for line in format_table(rows):
        print(line)
    missing = [p.name for p in PAIRS if not any(r.pair is p for r in rows)]
    misses = [r for r in rows if r.ratio > r.pair.bound]
    print(f"({time.perf_counter() - started:.0f} s)")
    if missing:
        print(f"gate: no result for {', '.join(missing)}", file=sys.stderr)
        return 2
    if misses and not args.report_only:
        print(f"gate: FAILED: {_names(misses)}", file=sys.stderr)
        return 1
    print("gate: passed" if not misses else "gate: ratios missed (report only)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The CI performance gate: speed ratios against baselines measured in the same run.

Usage (from the repository root, with the release build installed)::

    python benches/gate.py                 # x10; exit 1 if a ratio misses its bound
    python benches/gate.py --report-only   # print the table, always exit 0 (unless a bench fails)

It runs the bench files below on the x10 sessions (few rounds) in a child pytest with
``--benchmark-json`` and divides each pi-condense operation by its baseline on the same data.
Timing is process CPU time (``time.process_time``: time spent waiting for a core another
process holds is not counted), GC is off during rounds, glibc keeps large buffers on the heap
(see :func:`run_benchmarks`), and each ratio divides the fastest rounds (the median ratio is
printed too):

==========  ==============================================  ======  =========
pair        subject / baseline                              target  bound
==========  ==============================================  ======  =========
state       PrunerState.from_branch / orjson.loads lines    1.0     1.25
open        Condenser.open + state + context / loads lines  1.5     2.2
render      full render, repeated / orjson.dumps(messages)  0.5     1.25
cold        first render / orjson.dumps, new objects        1.0     1.6
cold-same   first render / orjson.dumps, same objects       -       1.7
noop        no-op render / orjson.dumps(messages)           0.15    0.5
scale       corpus scan 2 workers / 1 worker (wall clock)   0.5     0.667
scan        corpus scan in process / orjson.loads lines     -       6.0
dask        corpus condense 100, Dask in-process / pool     1.15    1.4
hook-*      a framework hook per model call, fresh objects  -       see PAIRS
hook-trim   Agents SDK hook, 10k fresh / ToolOutputTrimmer  1.5     1.5
hook-kept   Agents SDK hook, 10k fresh, kept / dumps       2.0     3.0
hook-same   Agents SDK hook, 10k same objects / dumps       1.0     1.5
late-join   first hook call on 10k / decode + cold render   1.5     55
join-defer  the same hook, ``join="defer"`` / the same      1.5     12
cx3         condense x3 / x1, per model call                1.5     1.5
cx10        condense x10 / x1, per model call               1.5     2.0
live        Condenser events+context() / render, 10k        1.3     1.5
startup     ``pi-condense --version`` / ``python -c pass``  4.0     4.0
startup-c   one-call ``condense`` / ``python -c pass``      11.0    16.0
proxy-1k    proxy request, 1k msgs / pass-through proxy     -       2.0
proxy-10k   proxy request, 10k msgs / pass-through proxy    -       8.0
proxy-ttfb  first streamed byte via proxy / from upstream    -       20.0
==========  ==============================================  ======  =========

The target is the goal; the bound is what the gate enforces. Where a target is met with room to
spare on a noisy 2-core machine the bound is the target (cx3); elsewhere it is a regression
bound, the worst ratio measured plus 30-60% for noise. On 2026-12-04 (the development VM,
CPython 3.11) one gate run measured state 0.22, open 1.57, render 0.67, cold 1.31, noop 0.150,
cx3 1.00, cx10 1.27, live 1.05, startup 6.95, scan 3.4. The open pair swings most (its median
ratio was 3.3 in that run: its baseline allocates 28k dicts). On 2026-12-06 (a 2-core machine,
CPython 3.11 / 3.12 / 3.13), after the in-place dict reads and the linear walk queue, nine gate
runs measured cold 0.82-0.96, cold-same 0.82-1.00 and render 0.44-0.53; after the loader's line
views, four measured open 1.25-1.62 (1.33-1.75 before them). So the bounds of cold and
cold-same went from 2.0 to 1.4 and open's from 2.5 to 2.2 (README, Performance, has the figures
of the README's commit). On 2026-12-07 (issue 41) --version no longer imports typer: startup
measured 1.2-1.6 (target and bound 4), and the one-call condense (startup-condense) 19-21
(target 11, i.e. 0.12 s; bound 30); after the config classes stopped importing pydantic and
``condense`` with plain arguments stopped importing typer and rich, six runs on the loaded
2-core machine (load average 3-9) measured it 9.4-10.6 (0.102-0.110 s), and a full gate run
beside a Rust build 12.8, so its bound is 16; the repeated render measured 0.86-1.17 over four
runs on a loaded machine (the 0.44-0.53 above did not reproduce). Later that day the CI machine
measured cold 1.07-1.45 and cold-same 1.55-1.59 (over the 1.4 bound): the supersession scan
(issue 38) walked every message a second time. It is now recorded by the extract pass, and on
the development VM under load cold measured 1.26-1.34 and cold-same 1.32-1.49 (1.41-1.55 and
1.75-1.94 before); the 2026-12-06 code, rebuilt and run there the same day, measured 1.41-1.55
and 1.22-1.43, so most of the distance from 0.82-1.00 is the machine. The bounds of cold and
cold-same are 1.6 and 1.7 (regression bounds; cold's target stays 1).

The Agents SDK hook pairs (``bench_hook_call.py``, 2026-12-07, this machine, two runs, the
second with another job running): ``hook-trim`` 0.35-0.38 and ``hook-same`` 0.33-0.69 met
their targets; a full ``.ci/run`` on the loaded machine later measured ``hook-same`` 1.10 and
``hook-agents`` 4.02 (median 2.73), so their bounds are 1.5 and 6 (regression bounds; the
targets stay 1 and 2); ``hook-agents`` measured 2.03-2.70 (target
2.0: most of it is comparing the fresh copy with the previous call's items, about 1.5x
``orjson.dumps`` of them on its own), ``hook-chat`` 4.2 and ``hook-anthropic`` 5.8 (their hooks
first walk every message for SDK objects), and ``late-join`` 76-83 (the join summarizes the
whole backlog at once, 4,000 tool outputs with the offline summarizer: the decode, the storing
and the render are a small part of it). After the late join's own fixes (the summarizer's
error-line test, the summary placer, the context estimate, the branch kept across a flush's
thousands of entries) three runs measured ``late-join`` 34-43 (70.8 before them in the same
conditions), so its bound went from 130 to 55; most of what is left is writing the join's
19k session entries and summarizing the backlog (docs/performance.md has the table). With the
native deep prefix comparison and the join's batched appends (``SessionFile.batched()``),
three runs measured ``hook-agents`` 2.18-2.32 and ``late-join`` 28.0-30.2 (2.15-2.87 and
33.2-35.9 before them, the same loaded machine); a gate run beside a Rust build 3.9 (median
2.2) and 34.6. With the join's messages stored as one append (``append_messages``), two runs
alternated with the code before on the loaded machine (load average 7-8) measured
``late-join`` 27.7-28.9 against 37.3-42.2, and ``join-defer`` (a hook made with
``join="defer"``: the backlog's flush left to the next call) 4.6-5.1; its target stays 1.5
(storing the 16 MB of lines is about half of it), its bound 12 is a regression bound. With
the store's lines written natively and its entries kept as native copies instead of parsing
the lines back (2026-12-07 evening), eight alternated runs on a machine shared with other
jobs measured ``join-defer`` 2.54-4.86 (median 3.83) against 4.53-6.24 (median 4.99) for the
code before, and 6.69 in one run at load average 7: the bound stays 12, about twice that.
Without the per-message passes that change nothing for an untouched history (2026-12-07
night: the encode's pairing, the run state, the origins, the append's whitespace shape), nine
alternated runs measured ``join-defer`` 3.09-3.90 against 4.15-4.31; the bound stays 12.

The pipeline pairs (``bench_pipeline.py``) divide each round by the model calls it made
(``extra_info["per"]``): condense of the raw session x1 / x3 / x10 (453 / 1,359 / 4,530
calls), and the live Condenser's per-call overhead on 10k messages against the render alone.
The proxy pairs (``bench_proxy.py``: client, proxies and upstream in one process, so the
CPU timer counts them all) compare a request through ``pi-condense proxy`` with the same
request through a pass-through proxy on the same stack, and the first byte of a stream
through the proxy with the first byte straight from the loopback upstream (which answers at
once: a real model's seconds to its first token are not in the baseline, so this ratio is
the proxy's worst case). On 2026-12-07 (the 2-core VM, loaded) three runs measured proxy-1k
0.86-0.95, proxy-10k 3.8-4.7, proxy-ttfb 5.1-7.3 (1k) and 8.9-11.8 (10k); the bounds are
about twice the worst.
The start-up pair (``bench_cli.py``) runs both as subprocesses, timed by the children's CPU
time. The hook pairs hand each hook a history rebuilt as new objects before every round (the
cold path most frameworks take) and divide by serializing that history: ``orjson.dumps`` for
the wire formats, LangChain's ``messages_to_dict`` + ``orjson.dumps`` and pydantic-ai's
``ModelMessagesTypeAdapter.dump_json``. The corpus pairs (``bench_corpus.py``, 40 copies of
the example session; 120 for ``scale``): ``scale`` is timed by the wall clock (the work runs
in pool processes) and enforces that 2 workers reach at least 1.5x the throughput of 1 on the
2-core CI machine; it needs both cores free. The ``dask`` pair (``bench_corpus_engines.py``)
condenses 100 sessions (the example's first 200 entries) on the Dask engine's in-process
cluster and on the local pool (2 workers), each round a fresh interpreter timed by the CPU of
its whole process tree (Dask's import not counted). On 2026-12-07, after the engine stopped
the per-session full collection from walking the host's and Dask's objects (frozen while the
tasks run; the pool's workers freeze what they inherit) and turned off the workers'
statistical profiler: 1.15, 1.24 and 1.18 in three runs at load average 7-8 (medians
1.13-1.21; the same bench measured 1.37 on the code before, the issue 1.35): the target is
about met, the bound 1.5 is a regression bound. What is left is Dask's own (the scheduler and
the event loop, about 0.5 s of 5, and the two task threads sharing one interpreter). It took
84-95 s there (two thirds of it the Dask rounds, which run on one core under the GIL); its
rounds' CPU adds up to about 30 s. Later on 2026-12-07 the Dask engine ran batches of sessions
per task (about 8 a task thread, at most 8 sessions each) and its in-process cluster a quieter
event loop (a 1 s health check instead of 20 ms, the system monitor every 10 s without disk or
GIL sampling, no work stealing in its one worker): three runs, each alternated with the code
before, measured 0.90, 1.09 and 0.98 (before: 1.10, 1.28, 1.08), so the bound is 1.4. The
last two clean-clone CI runs measured 1.130 and 1.175. That night the replays stopped counting
the frozen objects once per session (5-6 ms each with Dask's frozen), and the cluster started
for a run got one task thread when no task waits on the network and a memory check once a
second: six runs alternated with the code before measured 0.95-1.03 (before: 0.96-1.08; both
engines 7-14% cheaper); the bound stays 1.4.

The ``hook-agents`` pair measures the fresh-copy call as a host makes it that drops each copy
after its call: the driver holds the previous copy (the next call compares with it), so freeing
it (1.3-1.7 ms, host work the hook moves, not adds) lands in the hook call, while the
baseline's copies are freed outside its timer. ``hook-kept`` (``bench_hook_call.py``) is the
same call with every copy kept alive by the bench (a host that keeps its history, and the
baseline the same way): the hook's own work, which the issue's target (<= 2x ``orjson.dumps``)
is checked on; ``hook-agents`` keeps its regression bound (6) and no target. With the hook's
plain-dict check a native scan (``_core.all_exact_dicts``), three runs alternated with the code
before measured ``hook-kept`` 1.49-1.62 (before: 1.85-1.93) and ``hook-agents`` 1.97-2.03
(2.33-2.59), 2026-12-07; the bound 3.0 stays a regression bound.

On the development VM, consecutive gate runs moved each min-based ratio by up to 10% from its
mean when the machine was otherwise idle, and by up to 20% with other builds running; the very
same module has measured the repeated render at 1.00-1.31 and the first at 2.0-3.0 in
consecutive runs on a loaded day. So a miss is confirmed before the gate fails: the bench
files that measured the missed pairs run once more (a second child pytest), and each pair
keeps the better of its two runs. A real regression misses in both runs; drift rarely does
twice.

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
    Pair("open", "Condenser.open+state+context", "orjson.loads(lines)", 1.5, 2.2, "state"),
    Pair("render", "full render, repeated", "orjson.dumps(messages)", 0.5, 1.25),
    Pair("cold", "full render, first, new objects", "orjson.dumps(new objects)", 1.0, 1.6),
    Pair(
        "cold-same",
        "full render, first, same objects",
        "orjson.dumps(messages)",
        None,
        1.7,
        "render",
    ),
    Pair("noop", "no-op render", "orjson.dumps(messages)", 0.15, 0.5),
    Pair("scale", "corpus scan, 2 workers", "corpus scan, 1 worker", 0.5, 0.667),
    Pair("scan", "corpus scan, in process", "orjson.loads(lines)", None, 6.0),
    Pair("hook-chat", "ChatCondenser per call, 10k fresh", "orjson.dumps(history)", None, 7.0),
    Pair("hook-anthropic", "MessagesCondenser, 10k fresh", "orjson.dumps(history)", None, 9.0),
    Pair("hook-agents", "CondenseFilter, 10k fresh", "orjson.dumps(history)", None, 6.0),
    Pair("hook-kept", "CondenseFilter, 10k fresh, kept", "orjson.dumps(history)", 2.0, 3.0),
    Pair("hook-trim", "CondenseFilter, 10k fresh", "ToolOutputTrimmer, same copy", 1.5, 1.5),
    Pair("hook-same", "CondenseFilter, 10k same objects", "orjson.dumps(history)", 1.0, 1.5),
    Pair("late-join", "CondenseFilter, first call, 10k", "decode + cold render", 1.5, 55.0),
    Pair(
        "join-defer",
        "CondenseFilter(join=defer), first call",
        "decode + cold render",
        1.5,
        12.0,
        "late-join",
    ),
    Pair("hook-langchain", "CondenseMiddleware, 10k fresh", "messages_to_dict+dumps", None, 1.0),
    Pair("hook-pydantic-ai", "CondenseHistory, 10k fresh", "ModelMessages dump_json", None, 0.75),
    Pair("condense-x3", "condense x3, per model call", "condense x1, per call", 1.5, 1.5),
    Pair(
        "condense-x10",
        "condense x10, per model call",
        "condense x1, per call",
        1.5,
        2.0,
        "condense-x3",
    ),
    Pair("live", "Condenser events+context(), 10k", "render alone", 1.3, 1.5),
    Pair("startup", "pi-condense --version", "python -c pass", 4.0, 4.0),
    Pair(
        "startup-condense",
        "pi-condense condense, one model call",
        "python -c pass",
        11.0,
        16.0,
        "startup",
    ),
    Pair("dask", "corpus condense 100, Dask in-process", "local pool, 2 workers", 1.15, 1.4),
    Pair("proxy-1k", "pi-condense proxy, 1k messages", "pass-through proxy", None, 2.0),
    Pair("proxy-10k", "pi-condense proxy, 10k messages", "pass-through proxy", None, 8.0),
    Pair("proxy-ttfb", "first streamed byte via proxy", "from the upstream", None, 20.0),
)
PAIR_BY_NAME = {pair.name: pair for pair in PAIRS}

BENCH_FILES = (
    "bench_state.py",
    "bench_render.py",
    "bench_corpus.py",
    "bench_corpus_engines.py",
    "bench_hook_adapters.py",
    "bench_hook_call.py",
    "bench_hook_langchain.py",
    "bench_hook_pydantic_ai.py",
    "bench_pipeline.py",
    "bench_cli.py",
    "bench_proxy.py",
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

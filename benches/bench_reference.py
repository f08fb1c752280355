"""`pi-condense condense` against the TypeScript reference, and its growth from x10 on.

Usage (from the repository root; not run by ``.ci/run``: CI has no reference)::

    PI_CONDENSE_REFERENCE=/path/to/pi-condense \\
    PI_CONDENSE_REFERENCE_RUNNER=/path/to/shared/reference-runner \\
    PI_CONDENSE_DENO=/path/to/deno \\
        python benches/bench_reference.py [--rounds 3] [--x100] [--json]

What it runs, each a fresh child process timed by its own CPU (user + sys, from ``wait4``),
start-up included, on the raw fixture ``large-session`` scaled by ``generate.scaled_session``
(453 model calls per copy), config ``{"enabled": true}``:

- ``ours``: ``python -m pi_condense condense FILE -o OUT --summarizer default`` (the offline
  summarizer);
- ``reference``: the runner's ``src/replay.ts FILE --contexts none`` through Deno: the real
  extension replayed turn by turn with its offline fake summarizer (what ``condense`` does);
- ``startup``: ``condense`` of the fixture's first lines (one model call), the command's fixed
  cost, subtracted for the growth exponent's second form.

x1 and x3 alternate reference and ours within each round; x10 and x30 (and x100 with
``--x100``) are ours only (``--no-growth`` leaves them out: x1 and x3 only). Each figure is
the fastest of ``--rounds`` rounds (x30 and x100: ``--big-rounds``).
Both sides' model-call counts are checked (453 per copy).

The growth exponent is ``log(cpu_hi / cpu_lo) / log(hi / lo)`` from x10 to x100 when x100 is
measured, else from x10 to x30 (the output says which), once on the command's CPU and once
with the start-up subtracted (1.0 is linear).

Without the reference (``PI_CONDENSE_REFERENCE`` unset or not a directory, the runner or Deno
missing) the reference side is skipped with a loud message on stderr and only our figures are
printed (exit 0); ``--require-reference`` makes that exit 2.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).parent))
import generate

SOURCE = "large-session"
CALLS_PER_COPY = 453
CONFIG = {"enabled": True}
STARTUP_LINES = 3
"""Lines of the x1 fixture kept for the start-up session: header, user, assistant."""


def child_cpu(
    argv: list[str], cwd: Optional[Path] = None, env: Optional[dict[str, str]] = None
) -> tuple[float, str]:
    """Run ``argv``; its CPU seconds (user + sys of the child and what it waited for) and
    stdout. Fails loudly on a non-zero exit."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        if proc.returncode != 0:
            raise SystemExit(
                f"bench_reference: {' '.join(argv)} exited {proc.returncode}:\n"
                + err.read().decode("utf-8", "replace")[-2000:]
            )
    return usage.ru_utime + usage.ru_stime, stdout


class Reference:
    """The TypeScript reference run through the reference runner's replay driver."""

    def __init__(self, src: Path, runner: Path, deno: str) -> None:
        self.src, self.runner, self.deno = src, runner, deno

    @classmethod
    def locate(cls, args: argparse.Namespace) -> tuple[Optional[Reference], str]:
        """The reference, or None and why not."""
        src = args.reference or os.environ.get("PI_CONDENSE_REFERENCE")
        if not src or not Path(src).is_dir():
            return None, f"PI_CONDENSE_REFERENCE is {src!r}, not a reference checkout"
        runner = args.runner or os.environ.get("PI_CONDENSE_REFERENCE_RUNNER")
        if not runner:
            runner = str(generate.shared_root() / "reference-runner")
        if not (Path(runner) / "src" / "replay.ts").is_file():
            return None, f"no reference runner at {runner} (set PI_CONDENSE_REFERENCE_RUNNER)"
        deno = args.deno or os.environ.get("PI_CONDENSE_DENO") or shutil.which("deno")
        if not deno or not Path(deno).is_file():
            return None, f"no deno ({deno!r}; set PI_CONDENSE_DENO)"
        return cls(Path(src).resolve(), Path(runner).resolve(), deno), ""

    def condense(self, session: Path, config: Path, out: Path) -> tuple[float, int]:
        argv = [self.deno, "run", "-A", "--sloppy-imports", "--config", "deno.json"]
        argv += ["src/replay.ts", str(session), "--out-dir", str(out)]
        argv += ["--config", str(config), "--contexts", "none"]
        env = {**os.environ, "PI_CONDENSE_SRC": str(self.src)}
        cpu, _ = child_cpu(argv, cwd=self.runner, env=env)
        meta = json.loads((out / "meta.json").read_text(encoding="utf-8"))
        return cpu, int(meta["counts"]["llmCalls"])


def ours(session: Path, config: Path, out: Path) -> tuple[float, int]:
    argv = [sys.executable, "-m", "pi_condense", "condense", str(session), "-o", str(out)]
    argv += ["--config", str(config), "--summarizer", "default", "--json", "--force"]
    cpu, stdout = child_cpu(argv)
    return cpu, int(json.loads(stdout)["llmCalls"])


def exponent(lo: float, hi: float, scale: float) -> float:
    return math.log(hi / lo) / math.log(scale)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--rounds", type=int, default=3, help="rounds of x1, x3, x10 (fastest kept)"
    )
    parser.add_argument("--big-rounds", type=int, default=2, help="rounds of x30 and x100")
    parser.add_argument(
        "--x100", action="store_true", help="also ours at x100 (exponent x10->x100)"
    )
    parser.add_argument(
        "--no-growth",
        action="store_true",
        help="only x1 and x3 (and the start-up): no x10 / x30 / x100, no growth exponent",
    )
    parser.add_argument("--reference", help="reference checkout (default $PI_CONDENSE_REFERENCE)")
    parser.add_argument("--runner", help="reference runner (default $PI_CONDENSE_REFERENCE_RUNNER)")
    parser.add_argument("--deno", help="deno executable (default $PI_CONDENSE_DENO, then PATH)")
    parser.add_argument("--require-reference", action="store_true")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.big_rounds < 1:
        parser.error("--rounds and --big-rounds take at least 1")

    reference, why = Reference.locate(args)
    if reference is None:
        print(
            f"bench_reference: *** REFERENCE NOT AVAILABLE, ITS SIDE IS SKIPPED: {why} ***",
            file=sys.stderr,
        )
        if args.require_reference:
            return 2

    best: dict[tuple[str, int], float] = {}

    def keep(side: str, copies: int, cpu: float, calls: int) -> None:
        expected = CALLS_PER_COPY * copies if copies else 1
        if calls != expected:
            raise SystemExit(
                f"bench_reference: {side} x{copies} made {calls} model calls, not {expected}"
            )
        best[side, copies] = min(cpu, best.get((side, copies), math.inf))
        if not args.json:
            print(f"  {side:9} x{copies:<3} {cpu:8.2f} s", file=sys.stderr, flush=True)

    big = [] if args.no_growth else [30, 100] if args.x100 else [30]
    scales = (1, 3) if args.no_growth else (1, 3, 10, *big)
    with tempfile.TemporaryDirectory(prefix="pi-condense-refbench-") as tmp:
        work = Path(tmp)
        config = work / "config.json"
        config.write_text(json.dumps(CONFIG), encoding="utf-8")
        x1 = generate.scaled_session(SOURCE, 1)
        tiny = work / "startup.jsonl"
        with x1.open("rb") as f:
            tiny.write_bytes(b"".join(f.readline() for _ in range(STARTUP_LINES)))
        sessions = {copies: generate.scaled_session(SOURCE, copies) for copies in scales}
        for _ in range(args.rounds):
            keep("startup", 0, *ours(tiny, config, work / "startup.condensed.jsonl"))
            for copies in (1, 3):
                if reference is not None:
                    keep(
                        "reference",
                        copies,
                        *reference.condense(sessions[copies], config, work / f"ref{copies}"),
                    )
                keep("ours", copies, *ours(sessions[copies], config, work / f"x{copies}.jsonl"))
            if not args.no_growth:
                keep("ours", 10, *ours(sessions[10], config, work / "x10.jsonl"))
        for _ in range(args.big_rounds):
            for copies in big:
                keep("ours", copies, *ours(sessions[copies], config, work / f"x{copies}.jsonl"))

    startup = best["startup", 0]
    result: dict[str, object] = {
        "source": SOURCE,
        "config": CONFIG,
        "rounds": args.rounds,
        "bigRounds": args.big_rounds,
        "reference": str(reference.src) if reference else None,
        "cpuSeconds": {f"{side}-x{copies}": round(cpu, 3) for (side, copies), cpu in best.items()},
        "speedup": {
            f"x{copies}": round(best["reference", copies] / best["ours", copies], 2)
            for copies in (1, 3)
            if ("reference", copies) in best
        },
    }
    if big:
        hi = big[-1]
        result["growth"] = {
            "from": 10,
            "to": hi,
            "exponent": round(exponent(best["ours", 10], best["ours", hi], hi / 10), 3),
            "exponentLessStartup": round(
                exponent(best["ours", 10] - startup, best["ours", hi] - startup, hi / 10), 3
            ),
        }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"\ncondense CPU (s, fastest of {args.rounds} / {args.big_rounds} rounds), {SOURCE}")
    print(f"{'scale':>6} {'reference':>10} {'ours':>8} {'ref / ours':>11}")
    for copies in scales:
        ref = best.get(("reference", copies))
        ratio = f"{ref / best['ours', copies]:10.1f}x" if ref else f"{'-':>11}"
        shown = f"{ref:.2f}" if ref else "-"
        print(f"{'x' + str(copies):>6} {shown:>10} {best['ours', copies]:8.2f} {ratio}")
    print(f"start-up (one-call condense): {startup:.2f} s")
    if not big:
        return 0
    growth = result["growth"]
    assert isinstance(growth, dict)
    print(
        f"growth exponent x10 -> x{hi}: {growth['exponent']:.3f} "
        f"({growth['exponentLessStartup']:.3f} with the start-up subtracted)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

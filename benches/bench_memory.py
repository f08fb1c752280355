"""Peak memory of loading a session, against per-line ``orjson.loads`` in the same run.

Usage (from the repository root)::

    python benches/bench_memory.py            # x1 and x10; exit 1 if a bound is missed
    python benches/bench_memory.py --copies 1 10 100 --report-only
    python benches/bench_memory.py --copies 10 --corpus 300   # and a corpus of 300 sessions

Each measurement is a fresh child process (its peak RSS, ``VmHWM``, reset after the imports
through ``/proc/self/clear_refs``, less its RSS then; Linux only), on the raw fixture
``large-session`` scaled x N by ``generate.py``:

- ``baseline``: read the file, ``orjson.loads`` every line, keep the objects;
- ``load``: ``SessionFile.load`` (what ``session info`` and ``render`` start with);
- ``open``: ``Condenser.open`` plus its pruner state (``Condenser.state``);
- ``render``: ``load`` + ``build_context`` + ``render``;
- ``condense``: ``pi-condense condense FILE -o OUT`` (its entry point in the child, the
  command's modules imported before the peak is reset): the load, the replay of every model
  call, the write and the report;
- ``replay``: ``pi-condense replay FILE -o DIR`` (the conformance vectors' files, with the
  pool of every call's context).

The gate: each subject's peak is at most its bound times the file size (``BOUND``, or the
subject's in ``BOUNDS``; ``replay`` is measured only when asked for, see ``REPORTED_ONLY``).

With ``--corpus N``: ``pi-condense corpus condense`` of N copies of the raw fixture x1 in one
process (``--engine serial``, no cache) against one copy; the peak of N is at most
``CORPUS_BOUND`` times the peak of one (a session must leave nothing behind in its worker).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import generate

BOUND = 5.0

PRELUDE = """
import sys, orjson
from pi_condense.session import SessionFile
from pi_condense.condenser import Condenser
from pi_condense.config import Config
from pi_condense.render import render
from pi_condense.state import PrunerState
import pi_condense.cli._app, pi_condense.cli.condense_cmd
from pi_condense.cli import main
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # reset the peak (VmHWM) to the current RSS: imports are not counted
start = status("VmRSS")
path = sys.argv[1]
out = sys.argv[2]
def command(*argv):
    sys.argv = ["pi-condense", *argv]
    try:
        main()
    except SystemExit as exc:
        assert not exc.code, exc.code
"""
WORK = {
    "baseline": "with open(path, 'rb') as f:\n    keep = [orjson.loads(l) for l in f if l.strip()]",
    "load": "keep = SessionFile.load(path)",
    "open": (
        "c = Condenser.open(path, Config.from_settings_dict({'enabled': True}))\nkeep = c.state"
    ),
    "render": (
        "s = SessionFile.load(path)\n"
        "keep = render(s.build_context().messages, PrunerState.from_session(s),"
        " Config.from_settings_dict({'enabled': True}))"
    ),
    "condense": "command('condense', path, '-o', out + '/condensed.jsonl', '--quiet')",
    "replay": "command('replay', path, '-o', out + '/vector', '--quiet')",
    "corpus": (
        "command('corpus', 'condense', path, '-o', out + '/condensed', '--engine', 'serial',"
        " '--no-cache', '--quiet')"
    ),
}
CORPUS_BOUND = 1.2
"""``corpus condense`` of N sessions (``--corpus``) peaks at most this much above one session's:
what a session leaves behind in its worker adds up over a corpus."""
BOUNDS = {"condense": 5.5}
"""Subjects gated with another bound than ``BOUND``. ``condense``: target 5 (issue 41), met
late on 2026-12-07 (4.82-4.91 at x10, 4.47-4.48 at x100; 5.02 at x10 in CI's run with the
release wheel) and with a margin that night (4.41-4.45 at x10, 4.14 at x100, the fast build
and an LTO build alike: the source's strings shared as it is parsed, the C heap trimmed before
the report). The bound is a regression bound about 20% above the x10 figure CI can be expected
to read (about 4.6: the wheel read about 0.15 more than the helpers' builds that evening), for
a loaded 2-core CI machine (6 until that night; 5.37-5.66 at x10 that evening; 6.03 at x10 and
6.17 at x100 that afternoon; 9.45 and 8.3 that morning, 25 before; docs/performance.md,
"memory, 2026-12-07 (night)", says what is left)."""
SMALLEST_GATED = {"condense": 10}
"""Subjects gated only from this scale on: at x1 the command's fixed part (the event loop, the
config models, the summarizer, about 16 MB) outweighs the 1 MB session."""
REPORTED_ONLY = frozenset({"replay"})
"""Measured on request only (``--subjects``), never gated: the vectors' call log of ``replay``
names every message of every call (its size grows with the square of the session's)."""
EPILOGUE = """
print(status("VmHWM") - start)
"""


def corpus_rows(sessions: int) -> tuple[list[dict[str, object]], bool]:
    """``corpus condense`` (in one process, the serial engine: the process is the worker) of
    one copy and of ``sessions`` copies of the raw fixture x1; whether the bound is missed."""
    session = generate.scaled_session("large-session", 1)
    peaks = {}
    with tempfile.TemporaryDirectory(prefix="pi-condense-corpus-") as tmp:
        for count in (1, sessions):
            folder = Path(tmp) / f"n{count}"
            folder.mkdir()
            for n in range(count):
                (folder / f"s{n:04d}.jsonl").write_bytes(session.read_bytes())
            peaks[count] = peak_bytes("corpus", folder)
    ratio = peaks[sessions] / peaks[1]
    rows = [
        {
            "subject": "corpus",
            "sessions": count,
            "peakMB": round(peaks[count] / 2**20, 1),
            "xOneSession": round(peaks[count] / peaks[1], 2),
            "ok": count == 1 or ratio <= CORPUS_BOUND,
        }
        for count in (1, sessions)
    ]
    return rows, ratio > CORPUS_BOUND


def peak_bytes(kind: str, path: Path) -> int:
    code = PRELUDE + WORK[kind] + EPILOGUE
    with tempfile.TemporaryDirectory(prefix="pi-condense-memory-") as out:
        done = subprocess.run(
            [sys.executable, "-c", code, str(path), out],
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode != 0:
        raise SystemExit(f"bench_memory: {kind} on {path} failed:\n{done.stderr}")
    return int(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--copies", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument(
        "--subjects",
        nargs="+",
        choices=list(WORK),
        default=[kind for kind in WORK if kind not in (*REPORTED_ONLY, "corpus")],
        help="what to measure on each scale (default: all but replay and corpus)",
    )
    parser.add_argument(
        "--corpus",
        type=int,
        default=0,
        metavar="N",
        help="also corpus condense N copies of x1 against one (0: not measured)",
    )
    args = parser.parse_args(argv)
    failed = False
    rows = []
    for copies in args.copies:
        path = generate.scaled_session("large-session", copies)
        size = path.stat().st_size
        base = peak_bytes("baseline", path)
        for kind in args.subjects:
            peak = base if kind == "baseline" else peak_bytes(kind, path)
            ratio = peak / size
            gated = kind not in ("baseline", *REPORTED_ONLY)
            gated &= copies >= SMALLEST_GATED.get(kind, 1)
            over = gated and ratio > BOUNDS.get(kind, BOUND)
            failed |= over
            rows.append(
                {
                    "copies": copies,
                    "subject": kind,
                    "fileMB": round(size / 2**20, 1),
                    "peakMB": round(peak / 2**20, 1),
                    "xFile": round(ratio, 2),
                    "xBaseline": round(peak / base, 2),
                    "ok": not over,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    if args.corpus:
        corpus, missed = corpus_rows(args.corpus)
        failed |= missed
        for row in corpus:
            print(json.dumps(row), flush=True)
    return 1 if failed and not args.report_only else 0


if __name__ == "__main__":
    sys.exit(main())

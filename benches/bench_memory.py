"""Peak memory of loading a session, against per-line ``orjson.loads`` in the same run.

Usage (from the repository root)::

    python benches/bench_memory.py            # x1 and x10; exit 1 if a bound is missed
    python benches/bench_memory.py --copies 1 10 100 --report-only

Each measurement is a fresh child process (its peak RSS, ``VmHWM``, reset after the imports
through ``/proc/self/clear_refs``, less its RSS then; Linux only), on the raw fixture
``large-session`` scaled x N by ``generate.py``:

- ``baseline``: read the file, ``orjson.loads`` every line, keep the objects;
- ``load``: ``SessionFile.load`` (what ``session info`` and ``render`` start with);
- ``open``: ``Condenser.open`` plus its pruner state (``Condenser.state``);
- ``render``: ``load`` + ``build_context`` + ``render``.

The gate: each subject's peak is at most ``BOUND`` times the file size.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
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
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # reset the peak (VmHWM) to the current RSS: imports are not counted
start = status("VmRSS")
path = sys.argv[1]
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
}
EPILOGUE = """
print(status("VmHWM") - start)
"""


def peak_bytes(kind: str, path: Path) -> int:
    code = PRELUDE + WORK[kind] + EPILOGUE
    done = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True
    )
    return int(done.stdout.strip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--copies", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args(argv)
    failed = False
    rows = []
    for copies in args.copies:
        path = generate.scaled_session("large-session", copies)
        size = path.stat().st_size
        base = peak_bytes("baseline", path)
        for kind in ("baseline", "load", "open", "render"):
            peak = base if kind == "baseline" else peak_bytes(kind, path)
            ratio = peak / size
            over = kind != "baseline" and ratio > BOUND
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
    return 1 if failed and not args.report_only else 0


if __name__ == "__main__":
    sys.exit(main())

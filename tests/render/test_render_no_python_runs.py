"""No Python code runs during a native render, whatever the values (issue 37, finding 1).

The render borrows strings and members from the caller's messages while it reads and
decides. Reading an id that holds a lone surrogate, or a timestamp beyond the double range,
used to build and clear a Python exception; building one allocates, so the cyclic collector
could run, and with it a finalizer that frees the list's items or lets a host thread take the
GIL and change the list: the render then read freed memory (a segfault). Each case runs
``support/render_hostile_child.py`` in a subprocess under ``PYTHONMALLOC=debug`` (freed memory is
poisoned; a crash fails the test instead of killing pytest) and checks that the armed code
never ran during the render and that the output is the render of the same values with
nothing armed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from support import SUPPORT

CHILD = SUPPORT / "render_hostile_child.py"


def run_child(scenario: str, trigger: str, *extra: str, layout: str = "") -> dict[str, Any]:
    env = dict(os.environ, PYTHONMALLOC="debug", PYTHONFAULTHANDLER="1")
    if layout:
        env["PI_CONDENSE_LAYOUT"] = layout
    proc = subprocess.run(
        [sys.executable, str(CHILD), scenario, trigger, *extra],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, (
        f"exit {proc.returncode}\n{proc.stdout[-2000:]}{proc.stderr[-4000:]}"
    )
    result: dict[str, Any] = json.loads(proc.stdout.splitlines()[-1])
    return result


SCENARIOS = ["finalizer", "thread", "hooks"]


@pytest.mark.parametrize("trigger", ["surrogate", "bigint", "both"])
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_render_runs_no_python_code_while_it_borrows(scenario: str, trigger: str) -> None:
    check(scenario, trigger)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_with_the_layout_reads_off_too(scenario: str) -> None:
    """Every str and list read through the C API (``PI_CONDENSE_LAYOUT=off``)."""
    check(scenario, "both", layout="off")


def check(scenario: str, trigger: str, layout: str = "") -> None:
    got = run_child(scenario, trigger, layout=layout)
    expected = run_child(scenario, trigger, "unarmed", layout=layout)
    assert got["fired"] == 0, "Python code ran during the render"
    assert got["pruned"]
    assert got["messages"] == expected["messages"]
    assert got["chars"] == expected["chars"]
    assert got["diagnostics"] == expected["diagnostics"]
    # The hostile values were read as JSON reads them.
    stamps = [m.get("timestamp") for m in got["messages"] if isinstance(m, dict)]
    if trigger != "surrogate":
        assert 10**400 in stamps
    if trigger != "bigint":
        assert "lone-\ud800-" + "s" * 20 in [m.get("toolCallId") for m in got["messages"]]

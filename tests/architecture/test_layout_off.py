"""The native module with every direct layout read off (``PI_CONDENSE_LAYOUT=off``).

``rust/py/src/cpython.rs`` reads compact strs and list items in place where the
CPython layout is known; elsewhere (CPython 3.15+, PyPy, free-threaded builds) every read
goes through the C API. This runs the render correctness, size memo and safety tests in a
subprocess with the reads forced off, so the API path is the one tested: the same renders,
and the same memo hits (the memo walks lists through the C API when it cannot read them).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def run_off(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PI_CONDENSE_LAYOUT="off")
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), *filter(None, [os.environ.get("PYTHONPATH")])])
    return subprocess.run(
        [sys.executable, *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_the_environment_turns_every_layout_read_off(tmp_path: Path) -> None:
    proc = run_off(
        tmp_path,
        "-c",
        "from pi_condense import _core; print(sorted(_core.layout_features().items()))",
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(
        [
            ("ascii_text", False),
            ("dict_entries", False),
            ("list_items", False),
            ("prefetch", False),
            ("str_chars", False),
        ]
    )


def assert_tests_pass_off(tmp_path: Path, selection: str, *modules: str) -> None:
    """The ``selection`` (``-k``) of the test ``modules`` passes with the reads off."""
    proc = run_off(
        tmp_path,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-k",
        selection,
        *(str(TESTS / module) for module in modules),
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout
    assert "skipped" not in proc.stdout


def test_renders_and_memo_hits_are_the_same_without_layout_reads(tmp_path: Path) -> None:
    assert_tests_pass_off(
        tmp_path,
        "not debug_allocator",
        "render/test_size_memo.py",
        "render/test_render.py",
        "render/test_render_reads.py",
        "reliability/test_binding_safety.py",
    )


def test_string_lengths_are_the_same_without_layout_reads(tmp_path: Path) -> None:
    assert_tests_pass_off(
        tmp_path, "width or utf8_copy or subclasses or lengths", "js/test_jsjson.py"
    )

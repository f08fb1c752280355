"""The former module paths ``pi_condense.jsjson`` and ``pi_condense.jstime`` still work, warn on
import with the path to use and the version that removes them, and export the same objects."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

_PROBE = """
import importlib, sys, warnings
alias, home = sys.argv[1:]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    module = importlib.import_module(alias)
target = importlib.import_module(home)
assert module.__all__ == target.__all__
assert all(getattr(module, name) is getattr(target, name) for name in target.__all__)
for warning in caught:
    print(warning.category.__name__, warning.message, sep=": ")
"""


@pytest.mark.parametrize(
    ("alias", "home"),
    [("pi_condense.jsjson", "pi_condense.js.json"), ("pi_condense.jstime", "pi_condense.js.time")],
)
def test_alias_warns_with_replacement_and_removal_version(
    alias: str, home: str, tmp_path: Path
) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, alias, home],
        capture_output=True,
        cwd=tmp_path,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        f"DeprecationWarning: {alias} is deprecated and will be removed in pi-condense 0.2.0: "
        f"use {home} (from pi_condense.js import {home.rsplit('.', 1)[1]} as {alias[12:]})"
    ]


def test_the_package_imports_neither_alias(tmp_path: Path) -> None:
    code = (
        "import sys, pi_condense.condenser, pi_condense.cli\n"
        "print(sorted(m for m in ('pi_condense.jsjson', 'pi_condense.jstime') if m in sys.modules))"
    )
    proc = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-c", code],
        capture_output=True,
        cwd=tmp_path,
        text=True,
        timeout=120,
        check=True,
    )
    assert proc.stdout == "[]\n"

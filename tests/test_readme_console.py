"""The console examples of README.md and docs/**/*.md marked ``<!-- console: checked by
tests/test_readme_console.py -->`` run as written and print what the page shows.

They run in order in one scratch directory holding ``session.jsonl`` (a copy of the bundled
example) and ``example-session.condensed.jsonl`` (made by the quickstart's
``pi-condense condense --example``), through bash, stdout and stderr together.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from pi_condense.cli._common import EXAMPLE_SESSION

MARKER = "<!-- console: checked by tests/test_readme_console.py -->"
PAGES = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]
CONSOLE = re.compile(re.escape(MARKER) + r"\n```console\n(.*?)```", re.S)
BLOCKS = [block for page in PAGES for block in CONSOLE.findall(page.read_text("utf-8"))]


def steps(block: str) -> list[tuple[str, str]]:
    """(command, expected output) pairs of a console block."""
    pairs: list[tuple[str, str]] = []
    for line in block.splitlines(keepends=True):
        if line.startswith("$ "):
            pairs.append((line[2:].rstrip("\n"), ""))
        else:
            command, expected = pairs[-1]
            pairs[-1] = (command, expected + line)
    return pairs


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("readme-console")
    shutil.copy(EXAMPLE_SESSION, root / "session.jsonl")
    made = shell("pi-condense condense --example -q", root)
    assert made.returncode == 0, made.stdout
    assert (root / "example-session.condensed.jsonl").is_file()
    return root


def shell(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    cli = shlex.join([sys.executable, "-c", "from pi_condense.cli import main; main()"])
    script = (
        f'pi-condense() {{ {cli} "$@"; }}\npython() {{ {shlex.quote(sys.executable)} "$@"; }}\n'
    )
    env = {**os.environ, "PI_CODING_AGENT_DIR": str(cwd / "agent"), "COLUMNS": "100"}
    return subprocess.run(
        ["bash", "-c", script + command],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=600,
    )


def test_the_readme_has_checked_console_blocks() -> None:
    assert len(BLOCKS) >= 4


def test_checked_console_blocks_print_what_the_readme_shows(scratch: Path) -> None:
    for block in BLOCKS:
        for command, expected in steps(block):
            proc = shell(command, scratch)
            assert proc.stdout == expected, command

"""The corpus CLI run in a child process for the reliability tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def cli(
    args: list[str], tmp_path: Path, prelude: str = "", timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    code = f"{prelude}\nfrom pi_condense.cli import main\nmain()"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PI_CODING_AGENT_DIR": str(tmp_path / "agent"), "COLUMNS": "200"},
        timeout=timeout,
        check=False,
    )

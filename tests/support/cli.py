"""The pi-condense CLI run as a subprocess, isolated from the developer's Pi settings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from support.llm_servers import PROXY_ENV

CLI = [sys.executable, "-c", "from pi_condense.cli import main; main()"]
PROVIDER_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")
"""Provider settings :func:`run_offline` removes, so only the loopback server is reached."""


def env(agent_dir: Path) -> dict[str, str]:
    """Isolate from the user's Pi settings."""
    return {**os.environ, "PI_CODING_AGENT_DIR": str(agent_dir), "COLUMNS": "120"}


def run(args: list[str], agent_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env(agent_dir),
        timeout=600,
        check=False,
    )


def run_offline(args: list[str], agent_dir: Path) -> subprocess.CompletedProcess[str]:
    """The CLI as a subprocess that reaches 127.0.0.1 directly, with no provider settings."""
    environ = env(agent_dir)
    for name in (*PROXY_ENV, *PROVIDER_ENV):
        environ.pop(name, None)
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=environ,
        timeout=600,
        check=False,
    )

"""Run a test module again in a subprocess whose allocator poisons freed memory.

``PYTHONMALLOC=debug`` fills freed blocks with a pattern, so a Rust view still reading a freed
object reads garbage (a wrong result or a crash) instead of the old bytes by luck.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from support import TESTS


def run_under_debug_allocator(
    module: str, cwd: Path, deselect: str = "debug_allocator", timeout: float = 600
) -> str:
    """Runs the tests of ``module`` (a test file's ``__file__``) not matching ``deselect``
    under the debug allocator; returns pytest's output, failing if any test failed."""
    here = TESTS
    env = dict(os.environ, PYTHONMALLOC="debug")
    env["PYTHONPATH"] = os.pathsep.join([str(here), *filter(None, [env.get("PYTHONPATH")])])
    args = ["-q", "-p", "no:cacheprovider", "-k", f"not ({deselect})", str(Path(module))]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return proc.stdout

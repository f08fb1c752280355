"""Shared fixtures: where the read-only project material (../shared) lives."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings

# CI runs the property tests with a fixed seed sequence (reproducible failures, no flakes);
# locally they explore fresh examples on every run.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

REPO_ROOT = Path(__file__).resolve().parents[1]

# Hermetic runs: no test (nor any CLI subprocess it starts) may read or write the developer's
# real Pi settings in ~/.pi/agent; tests that need settings point this variable elsewhere.
_AGENT_DIR = tempfile.TemporaryDirectory(prefix="pi-condense-agent-")
os.environ["PI_CODING_AGENT_DIR"] = _AGENT_DIR.name


def shared_root() -> Path:
    """The shared/ folder: $PI_CONDENSE_SHARED, else the sibling of the repository."""
    env = os.environ.get("PI_CONDENSE_SHARED")
    root = Path(env) if env else REPO_ROOT.parent / "shared"
    if not root.is_dir():
        raise RuntimeError(
            f"shared material not found at {root}; set PI_CONDENSE_SHARED to the shared/ folder"
        )
    return root


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    return shared_root()


@pytest.fixture(scope="session")
def conformance_dir(shared_dir: Path) -> Path:
    return shared_dir / "conformance"


@pytest.fixture(scope="session")
def fixtures_dir(shared_dir: Path) -> Path:
    return shared_dir / "fixtures" / "pi-sessions"

"""The corpus tasks give the same results on a local Ray instance started by the test as on
the local process pool (one Ray instance for the module: starting Ray is slow)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from support import corpus as _corpus


@pytest.fixture(scope="module")
def ray_instance() -> Iterator[None]:
    import ray

    # Ray's socket paths must stay short: a short scratch dir of our own, removed afterwards.
    scratch = tempfile.mkdtemp(prefix="pcr")
    previous = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"  # no token file written to the home directory
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir=scratch)
    try:
        yield
    finally:
        ray.shutdown()
        if previous is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = previous
        shutil.rmtree(scratch, ignore_errors=True)


def test_ray_equals_local(tmp_path: Path, ray_instance: None) -> None:
    root = tmp_path / "sessions"
    plant = _corpus.make_corpus(root, 60)
    local = _corpus.run_both(root, engine="local", workers=2)
    scanned, whatif = _corpus.run_both(root, engine="ray")
    _corpus.check_same(local, scanned, whatif, plant)
    grace = {r.settings["recoveryGraceTurns"]: r for r in whatif.rows}
    assert grace[0].served_verbatim == 0
    assert grace[3].served_verbatim == sum(
        1
        for p in plant.paths
        if "--project-0--" in str(p)
        for g in plant.gaps_by_session[str(p)]
        if g <= 3
    )

"""Shared fixtures: where the read-only test material lives.

The material (conformance vectors and real Pi sessions) ships in ``tests/data/`` (see its
README). Files the tests read uncompressed are stored gzip'd under ``PACKED``; they are
unpacked once per run into a temporary mirror of ``tests/data/`` (the other files are linked),
so a test never writes into the checkout. ``$PI_CONDENSE_SHARED`` naming an existing directory
(a project ``shared/`` folder, uncompressed) overrides the in-repo copy; naming anything else,
it is ignored with a warning.
"""

from __future__ import annotations

import gzip
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

# CI runs the property tests with a fixed seed sequence (reproducible failures, no flakes);
# locally they explore fresh examples on every run.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

REPO_ROOT = Path(__file__).resolve().parent.parent
TESTS = REPO_ROOT / "tests"
DATA = TESTS / "data"
# Folders of DATA whose ``*.gz`` files are packed copies of files the tests read as they are.
PACKED = ("conformance/json", "conformance/session", "fixtures/pi-sessions")

# Hermetic runs: no test (nor any CLI subprocess it starts) may read or write the developer's
# real Pi settings in ~/.pi/agent; tests that need settings point this variable elsewhere.
_AGENT_DIR = tempfile.TemporaryDirectory(prefix="pi-condense-agent-")
os.environ["PI_CODING_AGENT_DIR"] = _AGENT_DIR.name
_RUN_DIR = tempfile.TemporaryDirectory(prefix="pi-condense-tests-")


def run_dir() -> Path:
    """A directory private to this test run (removed at exit), for files every test shares."""
    return Path(_RUN_DIR.name)


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        target.symlink_to(source)
    except OSError:
        shutil.copyfile(source, target)


def _unpacked_data() -> Path:
    """A mirror of DATA with every packed file unpacked (the rest linked)."""
    root = run_dir() / "shared"
    for source in sorted(DATA.rglob("*")):
        if not source.is_file():
            continue
        rel = source.relative_to(DATA)
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if rel.suffix == ".gz" and rel.parent.as_posix() in PACKED:
            target.with_suffix("").write_bytes(gzip.decompress(source.read_bytes()))
        else:
            _link_or_copy(source, target)
    return root


@cache
def shared_root() -> Path:
    """The test material, laid out as the project's shared/ folder: ``$PI_CONDENSE_SHARED``
    when it names a directory, else ``tests/data`` unpacked."""
    env = os.environ.get("PI_CONDENSE_SHARED")
    if env:
        if Path(env).is_dir():
            return Path(env)
        warnings.warn(
            f"PI_CONDENSE_SHARED={env!r} is not a directory; using the in-repo tests/data",
            stacklevel=1,
        )
    return _unpacked_data()


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    return shared_root()


@pytest.fixture(scope="session")
def conformance_dir(shared_dir: Path) -> Path:
    return shared_dir / "conformance"


@pytest.fixture(scope="session")
def fixtures_dir(shared_dir: Path) -> Path:
    return shared_dir / "fixtures" / "pi-sessions"


@pytest.fixture
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """No proxy settings: SDK clients reach the loopback servers on 127.0.0.1 directly."""
    from support.llm_servers import clear_proxy_env

    clear_proxy_env(monkeypatch)


@pytest.fixture
def server() -> Iterator[Any]:
    """A loopback LLM server (OpenAI and Anthropic wire protocols), stopped after the test."""
    from support.llm_servers import LoopbackLLMServer

    with LoopbackLLMServer() as srv:
        yield srv


# `pytest -m "not slow"`: the developer's run (under two minutes on 2 cores); .ci/run and a
# bare `python -m pytest` run everything. Measured with --durations on the whole suite: these
# modules are end-to-end CLI subprocesses, kill campaigns, the browser and conformance
# replays of the large session (about three quarters of the suite's time)...
SLOW_MODULES = frozenset(
    {
        "cli/test_cli.py",
        "cli/test_cli_polish.py",
        "cli/test_condense_cli.py",
        "summarize/test_condense_llm.py",
        "corpus/test_corpus.py",
        "corpus/test_corpus_engines.py",
        "corpus/test_corpus_ray.py",
        "architecture/test_layout_off.py",
        "cli/test_pruner_commands.py",
        "docs/test_docs.py",
        "reliability/test_reliability_appends_cli.py",
        "reliability/test_reliability_corpus.py",
        "reliability/test_reliability_corpus_scan.py",
        "reliability/test_reliability_inplace.py",
        "reliability/test_reliability_inputs.py",
        "reliability/test_reliability_kills.py",
        "reliability/test_reliability_kills_live.py",
        "conformance/test_replay_conformance.py",
        "report/test_report.py",
        "docs/test_first_hour.py",
    }
)
# ...and these single tests took 3 s or more each (debug allocator runs, the large session's
# chain vectors, generated-history round trips). ``module::function`` marks every parameter.
SLOW_TESTS = frozenset(
    {
        "hooks/test_adapters_anthropic.py::test_new_messages_encode_to_a_valid_request_and_decode_back",
        "hooks/test_adapters_openai_chat.py::test_decode_is_deterministic_and_json_shaped",
        "hooks/test_adapters_openai_chat.py::test_generated_histories_round_trip_untouched",
        "hooks/test_adapters_openai_chat.py::test_new_messages_encode_to_a_valid_request_and_decode_back",
        "hooks/test_adapters_openai_responses.py::test_decode_is_deterministic_and_json_shaped",
        "hooks/test_adapters_openai_responses.py::test_generated_histories_round_trip_untouched",
        "hooks/test_adapters_openai_responses.py::test_new_messages_encode_to_valid_items_and_decode_back",
        "bench/test_bench_quality_model.py::test_model_mode_recovers_through_the_tools",
        "reliability/test_binding_safety.py::test_probes_under_debug_allocator",
        "render/test_chains.py::test_vector_chain_entries[large-default]",
        "render/test_chains.py::test_vector_chain_entries[large-default-restart]",
        "render/test_chains.py::test_vector_chain_entries[large-protect-spill]",
        "render/test_chains.py::test_vector_chain_entries[large-recovery-grace0]",
        "config/test_config.py::test_normalize_is_idempotent",
        "config/test_config.py::test_reference_mode_never_raises",
        "js/test_jsjson.py::test_loads_takes_any_depth_as_json_parse[200000]",
        "render/test_render_frozen.py::test_the_frozen_replay_writes_what_fresh_copies_write",
        "render/test_render_frozen.py::test_under_the_debug_allocator",
        "render/test_render_frozen_outputs.py::test_under_the_debug_allocator",
        "render/test_render_frozen_prefix.py::test_under_the_debug_allocator",
        "render/test_render_resume.py::test_a_frozen_history_grown_step_by_step_renders_as_fresh",
        "render/test_render_resume.py::test_under_the_debug_allocator",
        "summarize/test_summarizer_runner.py::test_concurrency_limit",
    }
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        module = item.path.relative_to(TESTS).as_posix()
        function = getattr(item, "originalname", item.name)
        if (
            module in SLOW_MODULES
            or f"{module}::{function}" in SLOW_TESTS
            or f"{module}::{item.name}" in SLOW_TESTS
        ):
            item.add_marker(pytest.mark.slow)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """A banner naming what a run without a browser did not check (test_report.py)."""
    unchecked = [
        report.nodeid
        for report in terminalreporter.stats.get("skipped", [])
        if "NOT CHECKED" in str(report.longrepr)
    ]
    if unchecked:
        terminalreporter.write_sep("!", "NOT CHECKED: no chromium on PATH", red=True, bold=True)
        terminalreporter.write_line(
            f"{len(unchecked)} browser tests did not run: the report page's JavaScript, charts "
            "and screenshot are unchecked. Install Debian's chromium (apt-get install -y "
            "chromium) and run them again; .ci/run fails without it."
        )
        for nodeid in unchecked:
            terminalreporter.write_line(f"  not run: {nodeid}")

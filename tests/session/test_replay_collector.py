"""How a replay (``condense`` / ``replay``) manages the cyclic collector: the source and the
caller's objects frozen out of its reach while the replay runs, full collections rare, and
the caller's settings as it found them afterwards (issue 41)."""

from __future__ import annotations

import asyncio
import gc
import json
import subprocess
import sys
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pi_condense.condenser import Condenser
from pi_condense.config import Config
from pi_condense.corpus.run import config_settings
from pi_condense.corpus.tasks import Task, run_task
from pi_condense.render import RenderResult
from pi_condense.replay import FULL_COLLECTION_EVERY, ReplayOptions, replay, replay_async
from pi_condense.session import SessionFile
from pi_condense.summarize.factory import make_summarizer
from support.sessions import write_session

_CONFIG = Config.from_settings_dict({"enabled": True})


@pytest.fixture
def collector() -> Iterator[None]:
    """The test's own settings, given back whatever it leaves, in a process with nothing
    frozen: an earlier test of the same process may have left objects frozen (the command
    line's own freeze, run in process), and a replay leaves a process that froze objects as
    it is, which is not what these tests look at."""
    enabled, thresholds = gc.isenabled(), gc.get_threshold()
    gc.unfreeze()
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        (gc.enable if enabled else gc.disable)()
        gc.unfreeze()


class _Watched(Condenser):
    """A condenser noting the collector's settings at each model call."""

    seen: list[tuple[int, tuple[int, int, int]]]
    pause: Any = None

    def context(self, messages: list[Any]) -> RenderResult:
        type(self).seen.append((gc.get_freeze_count(), gc.get_threshold()))
        if type(self).pause is not None:
            type(self).pause()
            type(self).pause = None
        return super().context(messages)


def _watched(pause: Any = None) -> type[_Watched]:
    return type("Watched", (_Watched,), {"seen": [], "pause": pause})


def _replay(path: Path, tmp_path: Path, factory: Any = None) -> Any:
    options = ReplayOptions(session_dir=str(tmp_path), record_contexts=False)
    summarizer = make_summarizer("default", config=_CONFIG)
    return replay(SessionFile.load(path), _CONFIG, summarizer, options, condenser_factory=factory)


def test_a_replay_freezes_what_it_holds_and_gives_the_collector_back(
    tmp_path: Path, collector: None
) -> None:
    path = write_session(tmp_path / "s.jsonl", prompts=4)
    gc.enable()
    gc.set_threshold(500, 7, 9)
    assert gc.get_freeze_count() == 0
    watched = _watched()
    result = _replay(path, tmp_path, watched)
    assert result.counts["llmCalls"] == 8
    # while it ran: the objects alive at its start frozen, full collections rare
    assert len(watched.seen) == 8
    assert all(frozen > 1000 for frozen, _ in watched.seen)
    assert {thresholds for _, thresholds in watched.seen} == {(500, 7, FULL_COLLECTION_EVERY)}
    # after: as the caller left it
    assert gc.isenabled()
    assert gc.get_threshold() == (500, 7, 9)
    assert gc.get_freeze_count() == 0


def test_a_replay_leaves_a_disabled_collector_and_frozen_objects_alone(
    tmp_path: Path, collector: None
) -> None:
    path = write_session(tmp_path / "s.jsonl", prompts=4)
    gc.disable()
    gc.freeze()  # a process that manages its collector itself (a corpus worker)
    frozen = gc.get_freeze_count()
    watched = _watched()
    _replay(path, tmp_path, watched)
    # nothing more frozen (the count falls as frozen objects are freed)
    assert all(count <= frozen for count, _ in watched.seen)
    assert not gc.isenabled()
    assert gc.get_freeze_count() <= frozen
    assert gc.get_threshold()[2] != FULL_COLLECTION_EVERY


def test_replays_in_threads_give_the_settings_back_when_the_last_ends(
    tmp_path: Path, collector: None
) -> None:
    # The first replay starts, the second runs whole while the first waits in a model call,
    # then the first ends: its settings hold until then, the caller's come back after.
    path = write_session(tmp_path / "s.jsonl", prompts=3)
    gc.set_threshold(600, 8, 11)
    second_done = threading.Event()
    first = _watched(pause=lambda: second_done.wait(30))
    second = _watched()
    outcomes: list[Any] = []
    thread = threading.Thread(target=lambda: outcomes.append(_replay(path, tmp_path, first)))
    thread.start()
    while not first.seen:
        thread.join(0.01)
    _replay(path, tmp_path / "second", second)
    assert gc.get_threshold() == (600, 8, FULL_COLLECTION_EVERY)  # the first still runs
    second_done.set()
    thread.join(30)
    assert len(outcomes) == 1
    assert {t for _, t in first.seen + second.seen} == {(600, 8, FULL_COLLECTION_EVERY)}
    assert gc.get_threshold() == (600, 8, 11)
    assert gc.get_freeze_count() == 0


class _Probe:
    pass


def test_frozen_source_entries_are_still_freed_as_the_replay_passes_them(
    tmp_path: Path, collector: None
) -> None:
    # Frozen objects are out of the collector's reach, not of reference counting: a source
    # entry goes once the replay is past it, no collection needed.
    source = SessionFile.load(write_session(tmp_path / "s.jsonl", prompts=6))
    branch = source.branch()
    probes = [_Probe() for _ in branch]
    for entry, probe in zip(branch, probes, strict=True):
        entry["probe"] = probe
    refs = [weakref.ref(probe) for probe in probes]
    del probes, branch
    freed: list[int] = []

    def progress(done: int, total: int) -> None:
        if done == total // 2:
            freed.append(sum(ref() is None for ref in refs))
            freed.append(gc.get_freeze_count())

    gc.disable()  # no collection at all: whatever goes, goes by reference counting
    sources = [source]
    del source
    options = ReplayOptions(session_dir=str(tmp_path), record_contexts=False)
    summarizer = make_summarizer("default", config=_CONFIG)
    asyncio.run(replay_async(sources.pop(), _CONFIG, summarizer, options, on_progress=progress))
    assert freed[0] >= len(refs) // 2 - 1
    assert freed[1] > 1000  # and the source was frozen meanwhile
    assert sum(ref() is None for ref in refs) >= len(refs) - 1
    assert gc.get_freeze_count() == 0


def test_a_corpus_condense_task_in_process_leaves_the_collector_as_it_found_it(
    tmp_path: Path, collector: None
) -> None:
    path = write_session(tmp_path / "s.jsonl", prompts=4)
    settings = config_settings(_CONFIG)
    options = {"output": str(tmp_path / "out.jsonl"), "force": True}
    task = Task("condense", str(path), path.stat().st_size, settings, "key", None, options)
    # CPython 3.12 moves the objects it made immortal to the permanent generation at each
    # collection, where `get_freeze_count` counts them (375 at start-up): the task ends with
    # one, so those are all it may leave there
    gc.collect()
    immortal = gc.get_freeze_count()
    gc.unfreeze()
    gc.enable()
    gc.set_threshold(650, 9, 12)
    outcome = run_task(task)
    assert outcome.failure is None
    assert outcome.result is not None
    assert outcome.result["row"]["model_calls"] == 8
    assert gc.isenabled()
    assert gc.get_threshold() == (650, 9, 12)
    assert gc.get_freeze_count() <= immortal


# CPython 3.12 moves the containers it made immortal to the permanent generation at every
# collection, where `gc.get_freeze_count` counts them with nothing frozen (375 on 3.12.1; 0 on
# 3.11 and 3.13). The checks below start after a collection, so on 3.12 they fail for code that
# takes any count above 0 for a caller's freeze.


def test_after_a_collection_a_replay_still_freezes_and_gives_back(
    tmp_path: Path, collector: None
) -> None:
    path = write_session(tmp_path / "s.jsonl", prompts=4)
    gc.collect()
    start = gc.get_freeze_count()
    watched = _watched()
    _replay(path, tmp_path, watched)
    assert len(watched.seen) == 8
    assert all(frozen > start + 1000 for frozen, _ in watched.seen)
    assert gc.get_freeze_count() <= start


def test_after_a_collection_the_frozen_host_gives_back_what_it_froze(collector: None) -> None:
    from pi_condense.corpus.engines import _frozen_host

    held = [[i] for i in range(5_000)]
    gc.collect()
    start = gc.get_freeze_count()
    with _frozen_host(True):
        inside = gc.get_freeze_count()
    assert inside >= start + len(held)
    assert gc.get_freeze_count() <= start


def test_after_a_collection_an_in_process_condense_leaves_nothing_frozen(
    tmp_path: Path, collector: None
) -> None:
    from typer.testing import CliRunner

    from pi_condense.cli._app import app

    path = write_session(tmp_path / "s.jsonl", prompts=4)
    gc.collect()
    start = gc.get_freeze_count()
    result = CliRunner().invoke(app, ["condense", str(path), "-o", str(tmp_path / "out.jsonl")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out.jsonl").stat().st_size > 0
    assert gc.get_freeze_count() <= start


def test_a_condenser_let_go_after_its_replay_is_freed_by_reference_counting(
    tmp_path: Path, collector: None
) -> None:
    # Nothing the condenser holds refers back to it (its runtime, the runtime's summarize
    # and diagnostic sink, the summarizer runner, the replay's callbacks): `condense` drops it
    # without the full collection that finding a cycle would take (issue 41).
    path = write_session(tmp_path / "s.jsonl", prompts=6)
    gc.disable()  # no collection at all: whatever goes, goes by reference counting
    result = _replay(path, tmp_path)
    condenser = result.condenser
    assert condenser is not None
    rt = condenser.runtime
    assert result.summarizer.calls  # the summarizer runner was made (it notifies the UI)
    assert rt.live_summaries  # and the summaries written are tracked
    held = {
        "condenser": weakref.ref(condenser),
        "runtime": weakref.ref(rt),
        "state": weakref.ref(rt.state),
        "ui": weakref.ref(rt.ui),
        "replay": weakref.ref(rt.ui.notify.__self__),  # type: ignore[attr-defined]
    }
    del condenser, rt
    result.condenser = None
    assert [name for name, ref in held.items() if ref() is not None] == []
    assert len(result.session.entries) > 24  # the new session stays


_CHILD = """
import gc, json, sys
full = []
gc.callbacks.append(lambda phase, info: full.append(info["collected"])
                    if phase == "stop" and info["generation"] == 2 else None)
from pi_condense.cli import main
sys.argv = ["pi-condense", "condense", sys.argv[1], "-o", sys.argv[2], "--quiet", "--json"]
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
sys.stderr.write(json.dumps({"code": code, "full": full}) + "\\n")
"""


def test_condense_ends_without_a_full_collection(tmp_path: Path) -> None:
    # Before: `condense` collected the condenser's cycles at the end of the replay, walking
    # everything the run kept (the new session); a session this small makes no other.
    path = write_session(tmp_path / "s.jsonl", prompts=6)
    out = tmp_path / "out.jsonl"
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["llmCalls"] == 12
    assert report["batches"]["summarized"] > 0
    outcome = json.loads(done.stderr.strip().splitlines()[-1])
    assert outcome == {"code": 0, "full": []}
    assert out.read_bytes().count(b"\n") > 24

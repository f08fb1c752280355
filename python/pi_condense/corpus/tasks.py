"""The per-session task: one function every engine runs, on a path it reads itself.

:func:`run_task` takes a picklable :class:`Task` (a session's path and the options of its
kind) and returns a plain-dict :class:`Outcome`; it never raises for a bad session (the
failure comes back with the path and, when one is to blame, the line). With a cache
directory, a result already stored for the file's content and the task's config is returned
without recomputing it, and a computed result is stored before returning.
"""

from __future__ import annotations

import asyncio
import gc
import os
import shutil
import stat
import tempfile
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ..config import Config
from ..inplace import (
    Fingerprint,
    InPlaceError,
    check_output,
    in_place_paths,
    prior_run,
    replace_in_place,
    write_new,
)
from ..js import json as jsjson
from ..replay import ReplayOptions, ReplayResult, replay_async
from ..report.condense import cold_chars, condense_report
from ..session import SessionFile
from ..summarize.base import Summarizer
from ..summarize.factory import OFFLINE_SPECS, make_summarizer
from .cache import ResultCache
from .discover import is_url
from .facts import requery_gaps, scan_session
from .models import CondenseRow, Problem, TaskFailure, WhatIfSession
from .read import SessionReadError, content_hash, parse_session, read_bytes

__all__ = ["Outcome", "Task", "batches", "run_batch", "run_task", "waits"]

_FLUSH_METRICS = "context-prune-flush-metrics"
_STATS = "context-prune-stats"


@dataclass(frozen=True)
class Task:
    """One session's work: ``kind`` is ``scan``, ``whatif`` or ``condense``.

    ``settings`` is the ``contextPrune`` object of the config; ``config_key`` the digest of
    everything but the file the result depends on; ``options`` the kind's extras
    (``summarizer``, ``base_url``, ``output``, ``in_place``, ``force``).
    """

    kind: str
    path: str
    size: int
    settings: dict[str, Any]
    config_key: str
    cache_dir: Optional[str] = None
    options: dict[str, Any] = field(default_factory=dict)
    index: int = 0
    """The task's place in its run (e.g. the config of a what-if grid)."""


@dataclass
class Outcome:
    """What a task returned: ``result`` (a row as JSON) or ``failure``, and whether it came
    from the cache."""

    kind: str
    path: str
    size: int
    index: int
    result: Optional[dict[str, Any]] = None
    failure: Optional[dict[str, Any]] = None
    cached: bool = False


def run_task(task: Task) -> Outcome:
    """Run one task (module docstring). An in-place condense of a session that is already
    condensed in place (:func:`pi_condense.inplace.prior_run`) returns ``{"skipped":
    message}`` without reading it."""
    outcome = _run_task(task)
    # A replay (condense, what-if) builds what refers to itself in cycles (the condenser and
    # its replay, the runtime and its sinks, the event loop): reference counting frees none
    # of it, and the collector's full passes are rare, so a worker would hold several
    # sessions' worth of garbage at a time. Collected here, the worker is back where it
    # started. A scan builds no cycles, and a full pass per session would cost it more than
    # the scan itself; a cached task built nothing.
    if task.kind in REPLAYING_KINDS and outcome.result is not None and not outcome.cached:
        gc.collect()
    return outcome


REPLAYING_KINDS = frozenset({"condense", "whatif"})


def waits(task: Task) -> bool:
    """Whether ``task`` may wait on the network (a session read from a URL, a summarizer that
    calls a model) rather than only compute under the GIL: threads of one process overlap
    such waits, and nothing else (a second thread computing beside the first only makes the
    two take turns at the GIL)."""
    if is_url(task.path):
        return True
    if task.kind not in REPLAYING_KINDS:
        return False
    spec = task.options.get("summarizer") or "default"
    return str(spec).strip() not in OFFLINE_SPECS


BATCH_TASKS = 8
"""The most tasks :func:`batches` puts in one batch."""


def run_batch(tasks: Sequence[Task]) -> list[Outcome]:
    """:func:`run_task` of each task in turn (one cluster task for several sessions)."""
    return [run_task(task) for task in tasks]


def batches(tasks: Sequence[Task], threads: int, per_thread: int = 8) -> list[list[Task]]:
    """``tasks`` in order, cut into batches for a cluster of ``threads`` task threads: about
    ``per_thread`` batches a thread (no thread waits long for the last ones: a batch closes
    when it holds its share of the bytes or :data:`BATCH_TASKS` tasks), never an empty one.
    A cluster's own cost is per task (scheduling, its event loop's messages), not per
    session, so a corpus of small sessions pays it once a batch."""
    target = sum(task.size for task in tasks) / max(1, threads * per_thread)
    out: list[list[Task]] = []
    batch: list[Task] = []
    size = 0
    for task in tasks:
        batch.append(task)
        size += task.size
        if len(batch) >= BATCH_TASKS or size >= target:
            out.append(batch)
            batch, size = [], 0
    if batch:
        out.append(batch)
    return out


def _run_task(task: Task) -> Outcome:
    outcome = Outcome(task.kind, task.path, task.size, task.index)
    try:
        done = _done_in_place(task)
        if done is not None:
            outcome.result = {"skipped": done}
            return outcome
        data = read_bytes(task.path)
        digest = content_hash(data)
        # In place, what is done is told by the session itself (its header's mark and its
        # backup), never by the cache: a cached row cannot rewrite a file.
        in_place = task.kind == "condense" and bool(task.options.get("in_place"))
        cache = ResultCache(task.cache_dir) if task.cache_dir and not in_place else None
        if cache is not None:
            stored = cache.get(task.kind, digest, task.config_key)
            if stored is not None and _still_valid(task, stored):
                outcome.result, outcome.cached = stored, True
                return outcome
        result = _compute(task, data, digest)
        if cache is not None:
            cache.put(task.kind, digest, task.config_key, result)
        outcome.result = result
    except (SessionReadError, InPlaceError) as exc:
        outcome.failure = _failure(task.path, str(exc), getattr(exc, "line", None))
    except Exception as exc:  # a bad session must not stop the corpus
        where = traceback.extract_tb(exc.__traceback__)[-1]
        detail = f"{type(exc).__name__}: {exc} (at {Path(where.filename).name}:{where.lineno})"
        outcome.failure = _failure(task.path, detail, None)
    return outcome


def _done_in_place(task: Task) -> Optional[str]:
    """Why the session needs no in-place condense (it holds one already), or None."""
    if task.kind != "condense" or not task.options.get("in_place") or is_url(task.path):
        return None
    prior = prior_run(*in_place_paths(Path(task.path)))
    return prior.message if prior is not None and prior.done else None


def _failure(path: str, error: str, line: Optional[int]) -> dict[str, Any]:
    return TaskFailure(path=path, line=line, error=error).model_dump(mode="json")


def _still_valid(task: Task, stored: dict[str, Any]) -> bool:
    if task.kind != "condense":
        return True
    output = stored.get("row", {}).get("output")
    return isinstance(output, str) and os.path.exists(output)


def _compute(task: Task, data: bytes, digest: str) -> dict[str, Any]:
    session, problems = parse_session(data, task.path)
    config = Config.from_settings_dict(task.settings)
    if task.kind == "scan":
        row = scan_session(
            session,
            path=task.path,
            size=len(data),
            content_hash=digest,
            config=config,
            problems=problems,
        )
        return {"row": row.model_dump(mode="json")}
    summarizer = make_summarizer(
        task.options.get("summarizer") or "default",
        base_url=task.options.get("base_url"),
        config=config,
    )
    if task.kind == "whatif":
        return {"row": _whatif(task, session, config, summarizer, data, digest, problems)}
    if task.kind == "condense":
        return _condense(task, session, config, summarizer, data, problems)
    raise ValueError(f"unknown task kind {task.kind!r}")


def _replay(
    session: SessionFile, config: Config, summarizer: Summarizer, options: ReplayOptions
) -> ReplayResult:
    async def main() -> ReplayResult:
        try:
            return await replay_async(session, config, summarizer, options)
        finally:
            close = getattr(summarizer, "aclose", None)
            if close is not None:
                await close()

    return asyncio.run(main())


def _stats(result: ReplayResult) -> dict[str, Any]:
    stats: dict[str, Any] = {}
    for entry in result.session.entries:
        if entry.get("customType") == _STATS and isinstance(entry.get("data"), dict):
            stats = entry["data"]
    return stats


def _whatif(
    task: Task,
    session: SessionFile,
    config: Config,
    summarizer: Summarizer,
    data: bytes,
    digest: str,
    problems: list[Problem],
) -> dict[str, Any]:
    # Spill sidecars of the replay go to a scratch directory, removed afterwards.
    scratch = tempfile.mkdtemp(prefix="pi-condense-whatif-")
    try:
        options = ReplayOptions(session_dir=scratch, deterministic=True, record_contexts=False)
        result = _replay(session, config, summarizer, options)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    stats = _stats(result)
    flushes = sum(1 for e in result.session.entries if e.get("customType") == _FLUSH_METRICS)
    row = WhatIfSession(
        path=task.path,
        content_hash=digest,
        bytes=len(data),
        call_before=[s.before for s in result.contexts.sizes],
        call_after=[s.after for s in result.contexts.sizes],
        flushes=flushes,
        summarizer_calls=len(result.summarizer.calls),
        input_tokens=int(stats.get("totalInputTokens", 0) or 0),
        output_tokens=int(stats.get("totalOutputTokens", 0) or 0),
        cost=float(stats.get("totalCost", 0) or 0),
        requery_gaps=requery_gaps(session.branch()),
        handler_errors=[f"{event}: {message}" for event, message in result.handler_errors],
        problems=problems,
    )
    return row.model_dump(mode="json")


def _condense(
    task: Task,
    session: SessionFile,
    config: Config,
    summarizer: Summarizer,
    data: bytes,
    problems: list[Problem],
) -> dict[str, Any]:
    """Condense as ``pi-condense condense`` does: replay, then an atomic write; in place,
    through the same locked and re-checked swap (:mod:`pi_condense.inplace`)."""
    source = Path(task.path)
    in_place = bool(task.options.get("in_place"))
    backup: Optional[Path] = None
    mode: Optional[int] = None
    if is_url(task.path):
        if in_place:
            raise SessionReadError("--in-place needs a local session file (not an URL)")
    else:
        mode = stat.S_IMODE(os.stat(source).st_mode)
    if in_place:
        if source.name.endswith(".gz"):
            raise SessionReadError("--in-place needs a plain .jsonl session (not .gz)")
        target, backup = in_place_paths(source)
        prior = prior_run(target, backup)
        if prior is not None:  # done is told before the session is read (run_task)
            raise SessionReadError(prior.message)
    else:
        target = Path(str(task.options["output"]))
        if not task.options.get("force") and os.path.lexists(target):
            raise SessionReadError(f"{target} exists (use --force to overwrite it)")
        target = check_output(target, None if is_url(task.path) else source)
    options = ReplayOptions(
        session_dir=str(target.parent.resolve()),
        deterministic=False,
        record_contexts=False,
        blob_mode=mode,
    )
    result = _replay(session, config, summarizer, options)
    result.condenser = None  # the report needs the new session only
    chunks = result.session_chunks()
    if backup is not None:
        replace_in_place(target, chunks, backup, Fingerprint(len(data), content_hash(data)))
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        write_new(target, chunks, mode)
    raw_chars = jsjson.length(session.build_context().messages)
    _, condensed_chars = cold_chars(result.session, config)
    report = condense_report(result, raw_chars, condensed_chars)
    per_call = report["perCall"]
    row = CondenseRow(
        path=task.path,
        output=str(target),
        backup=str(backup) if backup is not None else None,
        model_calls=report["llmCalls"],
        before_chars=per_call["beforeChars"],
        after_chars=per_call["afterChars"],
        summarizer_calls=report["summarizerCalls"],
        summaries=report["batches"]["summarized"],
        chains=report["chains"],
        cost=float(report["summarizer"]["cost"] or 0),
        handler_errors=[f"{e['event']}: {e['error']}" for e in report["handlerErrors"]],
        problems=problems,
        report=report,
    )
    return {"row": row.model_dump(mode="json")}

"""``corpus.condense``: condense many sessions, into a mirrored tree or in place."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Union

from ..config import Config
from .discover import CorpusError, SessionSource
from .models import CondenseResult, CondenseRow, SkippedSession
from .run import OnOutcome, Paths, RunOptions, make_task, run_kind, sources_of

__all__ = ["condense", "output_path"]


def output_path(source: SessionSource, out_dir: Union[str, os.PathLike[str]]) -> Path:
    """Where ``source`` is written below ``out_dir``: its place below its input root, as
    plain JSONL (a ``.jsonl.gz`` input gives a ``.jsonl`` output)."""
    relative = source.relative
    if relative.endswith(".gz"):
        relative = relative[: -len(".gz")]
    return Path(out_dir) / relative


def _inside(path: str, folder: Path) -> bool:
    try:
        Path(path).resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True


def condense(
    paths: Paths,
    out_dir: Optional[Union[str, os.PathLike[str]]] = None,
    *,
    in_place: bool = False,
    force: bool = False,
    config: Optional[Config] = None,
    summarizer: str = "default",
    base_url: Optional[str] = None,
    engine: str = "local",
    address: Optional[str] = None,
    workers: Optional[int] = None,
    cache_dir: Optional[str] = None,
    on_outcome: Optional[OnOutcome] = None,
) -> CondenseResult:
    """Condense every session under ``paths`` as ``pi-condense condense`` does.

    Each output goes to ``out_dir`` mirroring the input tree, or (``in_place``) replaces
    its input as ``pi-condense condense --in-place`` does (:mod:`pi_condense.inplace`: the
    original kept as ``.bak``, only if the input did not change meanwhile). An existing
    output is a failure of that session unless ``force``; a backup is never overwritten: a
    session already condensed in place is skipped (``skipped``), and one whose ``.bak`` is
    not its original is a failure. A session
    that fails is a failure of the result (path and line); the others go on. Sessions below
    ``out_dir`` are not inputs. Raises :class:`CorpusError` when neither or both of
    ``out_dir`` and ``in_place`` are given, or two inputs would write the same output.
    """
    if (out_dir is None) == (not in_place):
        raise CorpusError("give an output directory or in_place=True (exactly one)")
    base = config or Config().with_value("enabled", True)
    run = RunOptions(engine, address, workers, cache_dir, on_outcome)
    sources = sources_of(paths)
    if out_dir is not None:
        sources = [s for s in sources if not _inside(s.path, Path(out_dir))]
    tasks = []
    targets: dict[str, str] = {}
    for source in sources:
        target = source.path if in_place else str(output_path(source, out_dir or "."))
        # In place, two links to one file are one session (realpath), else one output.
        key = os.path.realpath(target) if in_place else os.path.abspath(target)
        if key in targets:
            raise CorpusError(f"{source.path} and {targets[key]} would both write {target}")
        targets[key] = source.path
        options = {
            "summarizer": summarizer,
            "base_url": base_url,
            "output": target,
            "in_place": in_place,
            "force": force,
        }
        key_options = {k: v for k, v in options.items() if k != "force"}
        key_options["output"] = key
        tasks.append(make_task("condense", source, base, run, options, key_options=key_options))
    collected = run_kind(tasks, run)
    done = [(task, result) for task, result in collected.results if "row" in result]
    return CondenseResult(
        rows=[CondenseRow.model_validate(result["row"]) for _, result in done],
        skipped=[
            SkippedSession(path=task.path, reason=str(result["skipped"]))
            for task, result in collected.results
            if "skipped" in result
        ],
        failures=[failure for _, failure in collected.failures],
        computed=collected.computed,
        cached=collected.cached,
    )

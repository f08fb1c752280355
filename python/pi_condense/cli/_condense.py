"""What `pi-condense condense` and `pi-condense replay` run (see :mod:`.condense_cmd`, which
holds their typer signatures), importing neither typer nor rich until they print through it."""

from __future__ import annotations

import contextlib
import gc
import os
import stat
import sys
import tempfile
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, NoReturn, Optional

from ..branch_facts import forget_branch_facts
from ..collector import collector_paused
from ..config import Config
from ..errors import CondenseError, SessionError
from ..frozen import frozen_by_someone
from ..inplace import (
    InPlaceError,
    check_output,
    fingerprint,
    in_place_paths,
    prior_run,
    replace_in_place,
    write_new,
)
from ..js import json as jsjson
from ..replay import ReplayOptions, ReplayResult, replay_async
from ..report.condense import chars_change, cold_chars, condense_report, problems
from ..session import SessionFile
from ..summarize.base import Summarizer
from ._common import (
    EXAMPLE_SESSION,
    EXIT_HANDLER_ERRORS,
    EXIT_OK,
    check_leaf,
    err,
    err_console,
    exit_code,
    fail,
    fail_at,
    load_cli_config,
    make_cli_summarizers,
    out,
    print_warnings,
    read_session,
    resolve_file,
    run_with_summarizer,
    show_progress,
    shown_warnings,
)

__all__ = [
    "REPLAY_FILES",
    "example_folder",
    "exit_with",
    "fail_written",
    "inputs",
    "print_problems",
    "release",
    "run",
    "run_condense",
    "write_through_file",
]

REPLAY_FILES = ("session.jsonl", "contexts.jsonl", "summarizer.jsonl", "meta.json")
_PIECE = 1 << 16
"""Bytes of the new session copied to the output at a time (a larger piece raised the peak)."""


# ---------------------------------------------------------------------------------- inputs


def inputs(
    path: Path,
    leaf: Optional[str],
    config_file: Optional[Path],
    compat: Optional[str],
    spec: Optional[str],
    base_url: Optional[str],
    offline: str,
) -> tuple[SessionFile, Config, Summarizer, Optional[Summarizer]]:
    """The source session (its load warnings printed), the config (pruning on), the
    summarizer and its session model (None: the summarizer itself; see
    `make_cli_summarizers`), or exit 2 on the first that is wrong."""
    config = load_cli_config(config_file, compat, enable=True)
    with collector_paused():
        # The replay keeps the source's messages to its end (the new session and every
        # model call's context share them): their repeated strings once each.
        source = read_session(path, share_strings=True)
        if frozen_by_someone():
            # The command line froze its imports (`_main._preload`): the process is the
            # command's. What it loaded lives until the end or is freed by reference
            # counting (the replay frees each source entry after its point), so frozen now,
            # before a collection walks it, no collection ever does. In process (a test's
            # CliRunner) the replay freezes it and gives it back (`replay._collector_managed`).
            gc.freeze()
    check_leaf(source, path, leaf)
    print_warnings(source, path)
    summarizer, session_model = make_cli_summarizers(spec, base_url, config, offline)
    return source, config, summarizer, session_model


# --------------------------------------------------------------------------------- running


def run(
    sources: list[SessionFile],
    config: Config,
    summarizers: tuple[Summarizer, Optional[Summarizer]],
    options: ReplayOptions,
    progress_bar: bool,
    label: str,
) -> ReplayResult:
    """Replay in one event loop with (summarizer, session model) (the summarizer's client is
    closed at the end), with a progress bar on stderr when ``progress_bar``. ``sources``
    holds the source session, which the replay takes out: once the caller holds it no more,
    each source entry is freed after its point in the replay."""
    summarizer, session_model = summarizers
    if not progress_bar:
        return run_with_summarizer(
            summarizer,
            lambda: replay_async(
                sources.pop(), config, summarizer, options, session_model=session_model
            ),
        )
    # Imported here: a quiet or piped run does not pay for the progress machinery.
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("entries"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=err_console(), transient=False) as progress:
        task = progress.add_task(label, total=len(sources[0].branch(options.leaf)))

        def advance(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        return run_with_summarizer(
            summarizer,
            lambda: replay_async(
                sources.pop(),
                config,
                summarizer,
                options,
                on_progress=advance,
                session_model=session_model,
            ),
        )


@contextlib.contextmanager
def write_through_file(folder: Path) -> Iterator[IO[bytes]]:
    """An anonymous file for the new session's text as the replay writes it
    (``ReplayOptions.write_through``): in ``folder`` when it exists (the output's disk), else
    the temporary directory; gone when the block ends."""
    where = folder if folder.is_dir() else None
    try:
        spool = tempfile.TemporaryFile(dir=where)  # noqa: SIM115 (closed below)
    except OSError as exc:
        fail_at(folder, "cannot create a temporary file", exc)
    try:
        yield spool
    finally:
        # Closing flushes what the file still buffers: after a failed write (a full disk)
        # that fails again, and nothing in the file is needed any more.
        with contextlib.suppress(OSError):
            spool.close()


def fail_written(target: Path, exc: SessionError) -> NoReturn:
    """Exit 2 for a new session that could not be written through to its file."""
    cause = exc.__cause__
    fail_at(target, "cannot write", cause if isinstance(cause, OSError) else exc)


def release(result: ReplayResult) -> None:
    """Free what the run held that writing and reporting do not need: the condenser (and
    through it the replay's last context and the pruner's state). The caller drops the
    source session."""
    # The branch's facts (sizes, turns, metrics) served the condenser's model calls; the
    # write and the report read the session's entries only.
    forget_branch_facts(result.session)
    condenser = result.condenser
    if condenser is None:
        return
    # Nothing the condenser holds refers back to it, nor the runtime to itself: dropped, they
    # are freed by reference counting. A full collection would walk everything the run keeps
    # (the new session: 1.2 s at x100) to find them; it is made only if they survive.
    held: list[weakref.ReferenceType[Any]] = [
        weakref.ref(condenser),
        weakref.ref(condenser.runtime),
    ]
    result.condenser = None
    del condenser
    if any(ref() is not None for ref in held):
        gc.collect()
    if len(result.session) >= _TRIM_FROM_ENTRIES:
        _return_freed_memory()


# Below this many entries what the condenser frees is well under a megabyte, and loading
# ctypes for the trim (about 2 ms) would cost a one-call condense more than it saves.
_TRIM_FROM_ENTRIES = 5000


def _return_freed_memory() -> None:
    """Give the C heap's free pages back to the system (glibc's ``malloc_trim``; elsewhere
    nothing). What the condenser held (its native index and render caches: about 16 MB at
    x10) is freed in holes between what the session keeps, so it stays resident, and the
    report's reload render, which builds a new index in memory of other sizes, then peaked
    about 1.5 MB above the end of the replay (x10). Trimmed, the report's work faults in what
    it uses only."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes  # only here: nothing else of the command needs it

    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # a C library without it
        return
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    trim(0)


def exit_with(result: ReplayResult, load_code: int) -> None:
    """Exit 3 when a condenser event failed, else with ``load_code`` (see `exit_code`)."""
    code = EXIT_HANDLER_ERRORS if result.handler_errors else load_code
    if code != EXIT_OK:
        raise SystemExit(code)


def print_problems(result: ReplayResult) -> None:
    """Notifications, replay warnings and failed events on stderr."""
    for problem in problems(result):
        if problem["message"] in shown_warnings:
            continue  # already printed as it happened (cli.main's warning hook)
        times = f" (x{problem['count']})" if problem["count"] > 1 else ""
        err.print(f"pi-condense: {problem['level']}: {problem['message']}{times}", markup=False)
    for warning in dict.fromkeys(result.warnings):
        err.print(f"pi-condense: warning: {warning}", markup=False)
    for event, message in result.handler_errors:
        err.print(f"pi-condense: {event} failed: {message}", markup=False)


def _print_report(report: dict[str, Any], target: Path) -> None:
    from rich.table import Table

    table = Table(title=f"Condensed -> {target}", show_header=False, title_justify="left")
    table.add_column("what")
    table.add_column("value", justify="right")
    batches = report["batches"]
    per_call = report["perCall"]
    context = report["context"]
    money = report["summarizer"]
    rows = [
        ("LLM calls replayed", f"{report['llmCalls']}"),
        ("summarizer calls", f"{report['summarizerCalls']}"),
        ("batches summarized", f"{batches['summarized']}"),
        (
            "batches deduped / trivial / oversized",
            f"{batches['deduped']} / {batches['trivial']} / {batches['oversized']}",
        ),
        ("tool calls deduped", f"{report['dedupedToolCalls']}"),
        ("outputs spilled", f"{report['spilled']}"),
        ("chains compressed", f"{report['chains']}"),
        (
            "chars per call (avg)",
            chars_change(per_call["beforeChars"], per_call["afterChars"]),
        ),
        (
            "chars at the last call",
            f"{per_call['lastBeforeChars']:,} -> {per_call['lastAfterChars']:,}",
        ),
        (
            "context on reload",
            chars_change(context["rawChars"], context["condensedChars"]),
        ),
        ("summarizer tokens (in / out)", f"{money['inputTokens']:,} / {money['outputTokens']:,}"),
        ("summarizer cost", f"${money['cost']:.4f}"),
    ]
    for what, value in rows:
        table.add_row(what, value)
    out.print(table)


# -------------------------------------------------------------------------------- commands


def _targets(
    session_path: Path, out_file: Optional[Path], in_place: bool, example: bool
) -> tuple[Path, Path]:
    """(output file, backup file or the output) after checking they can be written."""
    if in_place and out_file is not None:
        fail("--out and --in-place are exclusive")
    if in_place:
        if example:
            fail("--in-place cannot rewrite the bundled example (use --out, or no option)")
        if session_path.name.endswith(".gz"):
            fail("--in-place needs a plain .jsonl session (not .gz)")
        return in_place_paths(session_path)
    if out_file is None:
        name = session_path.name
        for suffix in (".gz", ".jsonl"):
            name = name[: -len(suffix)] if name.endswith(suffix) else name
        folder = example_folder() if example else session_path.parent
        out_file = folder / f"{name}.condensed.jsonl"
    return out_file, out_file


def example_folder() -> Path:
    """Where ``condense --example`` writes: the current directory (in a clone of this project
    its .gitignore lists the file, so the checkout stays clean and the docs' examples, which
    read it, run from the clone's top)."""
    return Path()


def _is_example_output(path: Path) -> bool:
    """Whether ``path`` is an earlier ``--example`` output (a session with the example's id),
    which a new ``--example`` run may replace."""
    try:
        with open(path, "rb") as handle:
            first = handle.readline()
        example = EXAMPLE_SESSION.open("rb").readline()
        return bool(first) and jsjson.loads(first).get("id") == jsjson.loads(example).get("id")
    except (OSError, ValueError, AttributeError, CondenseError):
        return False


def _skipped(message: str, target: Path, backup: Path, as_json: bool) -> None:
    if as_json:
        report = {"output": str(target), "backup": str(backup), "skipped": message}
        sys.stdout.write(jsjson.dumps(report, 2) + "\n")
    else:
        err.print(f"pi-condense: {message}", markup=False)


def run_condense(
    session_path: Optional[Path],
    example: bool,
    out_file: Optional[Path],
    in_place: bool,
    force: bool,
    config_file: Optional[Path],
    summarizer_name: Optional[str],
    base_url: Optional[str],
    compat: Optional[str],
    leaf: Optional[str],
    as_json: bool,
    quiet: bool,
    strict: bool,
) -> None:
    """`pi-condense condense` with its parsed arguments (see :func:`.condense_cmd.condense`)."""
    path = resolve_file(session_path, example)
    target, backup = _targets(path, out_file, in_place, example)
    if in_place:
        path = target
        prior = prior_run(path, backup)
        if prior is not None and prior.done:
            _skipped(prior.message, target, backup, as_json)
            return
        if prior is not None:
            fail(prior.message)
    else:
        rerun = example and out_file is None and _is_example_output(target)
        if not force and not rerun and os.path.lexists(target):
            fail(f"{target} exists (use --force to overwrite it)")
        try:
            target = check_output(target, path)
        except InPlaceError as exc:
            fail(str(exc))
    try:
        before = fingerprint(path) if in_place else None
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError as exc:
        fail_at(path, "cannot read session file", exc)
    source, config, summarizer, session_model = inputs(
        path, leaf, config_file, compat, summarizer_name, base_url, "default"
    )
    progress = not as_json and show_progress(quiet)
    raw_chars = jsjson.length(source.build_context(leaf).messages)
    load_code = exit_code(source, strict)
    # The new session is written to a file as it grows (its pruner entries are not held),
    # then copied to the output.
    with write_through_file(target.parent) as spool:
        options = ReplayOptions(
            session_dir=str(target.parent.resolve()),
            leaf=leaf,
            deterministic=False,
            record_contexts=False,
            blob_mode=mode,
            write_through=spool,
        )
        sources = [source]
        del source  # the replay takes it (see `run`)
        try:
            result = run(
                sources, config, (summarizer, session_model), options, progress, "condensing"
            )
        except SessionError as exc:  # the new session could not be written through (a full disk)
            fail_written(target, exc)
        release(result)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            if before is not None:
                replace_in_place(path, result.session_chunks(_PIECE), backup, before)
            else:
                write_new(target, result.session_chunks(_PIECE), mode)
        except InPlaceError as exc:
            fail(str(exc))
        except SessionError as exc:
            fail_written(target, exc)
        except OSError as exc:
            fail_at(target, "cannot write", exc)
        _, condensed_chars = cold_chars(result.session, config)
        report = condense_report(result, raw_chars, condensed_chars)
        report["output"] = str(target)
        if in_place:
            report["backup"] = str(backup)
        if as_json:
            sys.stdout.write(jsjson.dumps(report, 2) + "\n")
        else:
            _print_report(report, target)
            print_problems(result)
        exit_with(result, load_code)

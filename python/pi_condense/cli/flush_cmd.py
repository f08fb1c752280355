"""`pi-condense flush`: summarize everything pending in a session now (`/pruner now`).

The pruner state is rebuilt from the session file, the pending batches are captured as the
reference's ``capturePendingBatches`` does, and the flush runs with runtime delivery: every
entry it produces (summaries, index, aliases, frontier, stats, chains, flush metrics) is
appended to the session file in the order of spec 02 section 9. Like the reference it refuses
when pruning is disabled, and prints the reference's result line.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Optional

import typer

from ..errors import CondenseError
from ..flush import FlushResult
from ..js import json as jsjson
from ._common import (
    EXIT_HANDLER_ERRORS,
    EXIT_OK,
    EXIT_UNREADABLE,
    base_url_option,
    check_leaf,
    compat_option,
    config_option,
    err,
    exit_code,
    fail,
    fail_at,
    json_option,
    leaf_option,
    load_cli_config,
    make_cli_summarizers,
    open_session,
    out,
    print_warnings,
    run_with_summarizer,
    strict_option,
    summarizer_option,
)

__all__ = ["DISABLED", "NOTHING_PENDING", "flush_command", "result_message"]

DISABLED = "Context pruning is disabled. Run /pruner on first."
NOTHING_PENDING = "pruner: nothing pending \u2014 no batches to summarize"


def _s(n: int, plural: str = "s") -> str:
    return "" if n == 1 else plural


def result_message(result: FlushResult, min_batch_chars: int) -> tuple[str, str]:
    """(level, text) of the reference's notification for a ``/pruner now`` result."""
    if not result.ok:
        suffix = f" ({result.error})" if result.error else ""
        level = "info" if result.reason == "empty" else "warning"
        return level, f"pruner: nothing flushed \u2014 {result.reason}{suffix}"
    n = result.tool_call_count
    if result.reason == "skipped-oversized":
        return "warning", (
            f"pruner: skipped pruning {n} tool call{_s(n)} \u2014 summary was "
            f"{result.summary_char_count} chars vs {result.raw_char_count} raw chars; "
            "frontier advanced past this range"
        )
    if result.reason == "skipped-trivial":
        return "info", (
            f"pruner: skipped {n} trivial tool call{_s(n)} \u2014 only {result.raw_char_count} "
            f"raw chars below minBatchChars={min_batch_chars}; no LLM call made; frontier "
            "advanced past this range"
        )
    if result.reason == "skipped-deduped":
        d = result.deduped_count or n
        return "info", (
            f"pruner: deduplicated {d} tool call{_s(d)} ({result.raw_char_count} raw chars) "
            "against earlier prunes; no LLM call made; frontier advanced past this range"
        )
    b = result.batch_count
    return "info", (
        f"pruner: pruned {n} tool call{_s(n)} from {b} batch{_s(b, 'es')} \u2014 summary "
        f"{result.summary_char_count} chars vs {result.raw_char_count} raw chars"
    )


class _OneLine(logging.Handler):
    """The pipeline's log records as one stderr line each: an error it survived (an entry it
    could not write) is reported, without a traceback."""

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            text = f"{text}: {record.exc_info[1]}"
        if not text.startswith("pi-condense"):
            text = f"pi-condense: {text}"
        err.print(text, markup=False)


@contextmanager
def _one_line_logs() -> Iterator[None]:
    logger = logging.getLogger("pi_condense")
    handler = _OneLine(logging.WARNING)
    logger.addHandler(handler)
    propagate, logger.propagate = logger.propagate, False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


def flush_command(
    session_file: Path = typer.Argument(
        ..., metavar="SESSION", help="Pi session file (.jsonl); the entries are appended to it."
    ),
    config_file: Optional[Path] = config_option(),
    summarizer_name: Optional[str] = summarizer_option("default"),
    base_url: Optional[str] = base_url_option(),
    compat: Optional[str] = compat_option(),
    leaf: Optional[str] = leaf_option(
        "Flush this entry's branch (the appended entries follow it)."
    ),
    as_json: bool = json_option(),
    quiet: bool = typer.Option(
        False, "--quiet", "-q", help="Leave out the per-batch notifications on stderr."
    ),
    strict: bool = strict_option(),
) -> None:
    """Summarize every pending batch now and append the result to SESSION (/pruner now).

    Refuses (exit 2) when pruning is disabled in the config, as the reference does. Exit 3
    when the flush failed (e.g. the summarizer failed) or an entry could not be written (a
    full disk); what it wrote stays written.
    """
    with _one_line_logs():
        _flush(
            session_file, config_file, summarizer_name, base_url, compat, leaf, as_json, quiet,
            strict,
        )  # fmt: skip


def _flush(
    session_file: Path,
    config_file: Optional[Path],
    summarizer_name: Optional[str],
    base_url: Optional[str],
    compat: Optional[str],
    leaf: Optional[str],
    as_json: bool,
    quiet: bool,
    strict: bool,
) -> None:
    if session_file.name.endswith(".gz"):
        fail(f"{session_file}: flush appends to the session, so it needs a plain .jsonl file")
    config = load_cli_config(config_file, compat)
    if not config.enabled:
        if as_json:
            sys.stdout.write(jsjson.dumps({"level": "warning", "message": DISABLED}, 2) + "\n")
        err.print(DISABLED, markup=False)
        err.print(
            "pi-condense: enable it with `pi-condense config on`, or give --config a block "
            'with "enabled": true',
            markup=False,
        )
        raise typer.Exit(EXIT_UNREADABLE)
    summarizer, session_model = make_cli_summarizers(summarizer_name, base_url, config, "default")
    session = open_session(session_file)
    try:
        # A read-only disk (or file) is told in one line before any summarizer work.
        os.close(os.open(session_file, os.O_WRONLY | os.O_APPEND))
    except OSError as exc:
        fail_at(session_file, "cannot write session file", exc)
    check_leaf(session, session_file, leaf)
    print_warnings(session, session_file)
    if leaf is not None:
        session.set_leaf(leaf)
    from ..condenser import Condenser  # the pipeline is loaded only when the command runs

    notices: list[tuple[str, str]] = []
    condenser = Condenser(
        session,
        config,
        summarizer=summarizer,
        session_model=session_model,
        notify=lambda message, level: notices.append((level, message)),
    )
    before = len(session)
    try:
        condenser.session_start()
        batches = condenser.capture_pending()
        result = run_with_summarizer(summarizer, condenser.flush_now)
    except (CondenseError, OSError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        err.print(f"pi-condense: {session_file}: flush failed: {reason}", markup=False)
        raise typer.Exit(EXIT_HANDLER_ERRORS) from None
    pending = {
        "batches": len(batches),
        "toolCalls": sum(len(b.tool_calls) for b in batches),
    }
    lines: list[tuple[str, str]] = []
    if not batches:
        lines.append(("info", NOTHING_PENDING))
    if batches:
        lines.append(result_message(result, config.min_batch_chars))
    report: dict[str, Any] = {
        "file": str(session_file),
        "pending": pending,
        "ok": result.ok,
        "reason": result.reason,
        "batchCount": result.batch_count,
        "toolCallCount": result.tool_call_count,
        "rawCharCount": result.raw_char_count,
        "summaryCharCount": result.summary_char_count,
        "dedupedCount": result.deduped_count,
        "error": result.error,
        "entriesAppended": len(session) - before,
        "messages": [{"level": level, "message": text} for level, text in lines],
        "notifications": [{"level": level, "message": text} for level, text in notices],
    }
    for level, text in [] if quiet else notices:
        err.print(f"{level}: {text}" if level != "info" else text, markup=False)
    if as_json:
        sys.stdout.write(jsjson.dumps(report, 2) + "\n")
    else:
        for level, text in lines:
            (out if level == "info" else err).print(text, markup=False)
    failed = not result.ok and result.reason != "empty"
    unwritten = session.failed_appends
    for text in dict.fromkeys(unwritten):
        err.print(f"pi-condense: {text}", markup=False)
    failed = failed or bool(unwritten)
    code = exit_code(session, strict, failed=failed)
    if code != EXIT_OK:
        raise typer.Exit(EXIT_HANDLER_ERRORS if failed else code)

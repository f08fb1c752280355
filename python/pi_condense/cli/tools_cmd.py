"""`pi-condense query` and `pi-condense recover`: run the model-facing tools from a shell."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable, Optional

import typer

from ..js import json as jsjson
from ..session import SessionFile
from ..state import PrunerState
from ..tools.base import ToolResult
from ..tools.query import ContextTreeQuery, missing_refs
from ..tools.recovery import SessionRecovery
from ._common import (
    EXIT_UNREADABLE,
    err,
    exit_for_warnings,
    json_option,
    leaf_option,
    open_at_leaf,
    print_warnings,
    strict_option,
)

recover_app = typer.Typer(
    help=(
        "Session recovery tools over a Pi session file (raw entries; the current branch, "
        "or every branch with --scope all)."
    ),
    no_args_is_help=True,
)

_LEAF_HELP = "Entry id to use as the leaf of the active branch."
_JSON_HELP = "Print {content, details} as JSON."
_SCOPE = typer.Option(
    "active", "--scope", help="active: the current branch; all: every branch, abandoned too."
)
_CURSOR = typer.Option(None, "--cursor", help="nextCursor of the previous call, to continue.")


def _write(text: str) -> None:
    """Write ``text`` as UTF-8 (a lone surrogate becomes U+FFFD, as Node writes it)."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        data = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def _emit(
    result: ToolResult, as_json: bool, newline: bool = True, refused: Optional[str] = None
) -> None:
    """Print the tool's answer; exit 2 when the tool refused the call (an error result) or,
    with ``refused``, after printing the answer the tool gives for what it did not find."""
    if result.is_error:
        err.print(f"pi-condense: {result.text}", markup=False)
        raise typer.Exit(EXIT_UNREADABLE)
    if as_json:
        _write(jsjson.dumps(result.to_dict(), 2) + "\n")
    else:
        _write(result.text + ("\n" if newline else ""))
        cursor = result.details.get("nextCursor")
        if isinstance(cursor, str) and cursor not in result.text:
            err.print(f"more available: continue with --cursor {cursor}", markup=False)
    if refused is not None:
        err.print(f"pi-condense: {refused}", markup=False)
        raise typer.Exit(EXIT_UNREADABLE)


def _not_found(result: ToolResult, what: str) -> Optional[str]:
    """Why a recovery call found nothing it was asked for (``found: false``), if so."""
    return f"{what} not found" if result.details.get("found") is False else None


def _session(path: Path, leaf: Optional[str]) -> SessionFile:
    session = open_at_leaf(path, leaf)
    print_warnings(session, path)
    return session


def query_command(
    session_file: Path = typer.Argument(..., metavar="SESSION", help="Pi session file (.jsonl)."),
    refs: list[str] = typer.Argument(..., metavar="REF", help="Short refs, keys or ids."),
    leaf: Optional[str] = leaf_option(_LEAF_HELP),
    recorded_session_dir: Optional[str] = typer.Option(
        None,
        "--recorded-session-dir",
        help="Directory the session was written in, if it has moved since (spill paths "
        "under it are looked up next to the session file instead).",
    ),
    full: bool = typer.Option(
        False,
        "--full",
        help="Print whole outputs (the tool cuts them at 2000 lines / 50 KB for the model).",
    ),
    as_json: bool = json_option(_JSON_HELP),
    strict: bool = strict_option(),
) -> None:
    """Print exactly what context_tree_query returns to the model for REF... .

    Exit 2 (after printing the answer) when a ref is not in the index.
    """
    session = _session(session_file, leaf)
    tool = ContextTreeQuery(
        PrunerState.from_session(session, leaf),
        session.session_dir,
        session.session_id,
        recorded_session_dir=recorded_session_dir,
        full=full,
    )
    result = tool.query(list(refs))
    missing = missing_refs(refs, result)
    refused = f"not in the index: {', '.join(missing)}" if missing else None
    _emit(result, as_json, newline=False, refused=refused)
    exit_for_warnings(session, strict)


@recover_app.callback()
def _recover(
    ctx: typer.Context,
    session_file: Path = typer.Argument(..., metavar="SESSION", help="Pi session file (.jsonl)."),
) -> None:
    """Run a session recovery tool: SESSION overview|read|search|context [OPTIONS]."""
    ctx.obj = session_file


def _given(**args: Any) -> dict[str, Any]:
    """The tool arguments that were given (None = leave to the tool's default)."""
    return {key: value for key, value in args.items() if value is not None}


def _run(
    ctx: typer.Context,
    leaf: Optional[str],
    as_json: bool,
    strict: bool,
    call: Callable[[SessionRecovery], ToolResult],
    refusal: Optional[Callable[[ToolResult], Optional[str]]] = None,
) -> None:
    path: Path = ctx.obj
    session = _session(path, leaf)
    result = call(SessionRecovery(session, leaf))
    _emit(result, as_json, refused=refusal(result) if refusal is not None else None)
    exit_for_warnings(session, strict)


@recover_app.command("overview")
def recover_overview(
    ctx: typer.Context,
    scope: str = _SCOPE,
    limit: Optional[int] = typer.Option(None, "--limit", help="Sections per page (1-100)."),
    cursor: Optional[str] = _CURSOR,
    leaf: Optional[str] = leaf_option(_LEAF_HELP),
    as_json: bool = json_option(_JSON_HELP),
    strict: bool = strict_option(),
) -> None:
    """Sections of the raw history with counts (session_overview)."""
    args = _given(scope=scope, max_sections=limit, cursor=cursor)
    _run(ctx, leaf, as_json, strict, lambda tools: tools.overview(args))


@recover_app.command("read")
def recover_read(
    ctx: typer.Context,
    target: Optional[str] = typer.Argument(None, help="A section id (section:...) or an entry id."),
    section: Optional[str] = typer.Option(None, "--section", help="Section id to read."),
    entry: Optional[str] = typer.Option(None, "--entry", help="Exact entry id to read."),
    scope: str = _SCOPE,
    limit: Optional[int] = typer.Option(None, "--limit", help="Entries per page (1-50)."),
    max_body_chars: Optional[int] = typer.Option(
        None, "--max-body-chars", help="Body characters per entry and page (100-8000)."
    ),
    cursor: Optional[str] = _CURSOR,
    leaf: Optional[str] = leaf_option(_LEAF_HELP),
    as_json: bool = json_option(_JSON_HELP),
    strict: bool = strict_option(),
) -> None:
    """One section or one exact entry, bounded; continue with --cursor."""
    if target is not None:
        if target.startswith("section:"):
            section = section or target
        else:
            entry = entry or target
    args = _given(
        section_id=section,
        entry_id=entry,
        scope=scope,
        max_entries=limit,
        max_body_chars=max_body_chars,
        cursor=cursor,
    )
    what = f"entry {entry}" if entry is not None else f"section {section}"
    _run(
        ctx,
        leaf,
        as_json,
        strict,
        lambda tools: tools.read_section(args),
        lambda result: _not_found(result, what),
    )


@recover_app.command("search")
def recover_search(
    ctx: typer.Context,
    query: str = typer.Argument(..., help="Literal text to find."),
    case_sensitive: bool = typer.Option(False, "--case-sensitive", help="Match case exactly."),
    scope: str = _SCOPE,
    limit: Optional[int] = typer.Option(None, "--limit", help="Matches per page (1-50)."),
    cursor: Optional[str] = _CURSOR,
    leaf: Optional[str] = leaf_option(_LEAF_HELP),
    as_json: bool = json_option(_JSON_HELP),
    strict: bool = strict_option(),
) -> None:
    """Literal search over the raw history (session_search)."""
    args = _given(
        query=query, case_sensitive=case_sensitive, scope=scope, limit=limit, cursor=cursor
    )
    _run(
        ctx,
        leaf,
        as_json,
        strict,
        lambda tools: tools.search(args),
        lambda result: "the search text is empty" if not query.strip() else None,
    )


@recover_app.command("context")
def recover_context(
    ctx: typer.Context,
    scope: str = _SCOPE,
    recent_errors: Optional[int] = typer.Option(
        None, "--recent-errors", help="Recent error results to list (1-20)."
    ),
    exclude_call: Optional[str] = typer.Option(
        None, "--exclude-call", help="Tool call id to leave out of the unmatched calls."
    ),
    leaf: Optional[str] = leaf_option(_LEAF_HELP),
    as_json: bool = json_option(_JSON_HELP),
    strict: bool = strict_option(),
) -> None:
    """First/latest requests, files, recent errors, unmatched calls (session_recovery_context)."""
    args = _given(scope=scope, recent_error_limit=recent_errors)
    _run(ctx, leaf, as_json, strict, lambda tools: tools.recovery_context(args, exclude_call))

"""Shared pieces of the `pi-condense` commands: consoles, exit codes, input resolution."""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn, Optional

import typer
from rich.console import Console

from ..errors import CondenseError
from ..session import SessionFile

EXIT_OK = 0
EXIT_WARNINGS = 1
EXIT_UNREADABLE = 2

EXAMPLE_SESSION = Path(__file__).parent.parent / "examples" / "example-session.jsonl"

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def fail(message: str) -> NoReturn:
    err.print(f"pi-condense: {message}", markup=False)
    raise typer.Exit(EXIT_UNREADABLE)


def resolve_file(file: Optional[Path], example: bool) -> Path:
    if example:
        return EXAMPLE_SESSION
    if file is None:
        fail("no session file given (pass FILE or --example)")
    return file


def open_session(path: Path) -> SessionFile:
    try:
        return SessionFile.load(path)
    except (CondenseError, OSError) as exc:
        fail(f"{path}: {exc}")


def check_leaf(session: SessionFile, path: Path, leaf: Optional[str]) -> None:
    if leaf is not None and session.get_entry(leaf) is None:
        fail(f"{path}: no entry with id {leaf!r}")


def print_warnings(session: SessionFile, path: Path) -> None:
    for warning in session.warnings:
        err.print(f"{path}:{warning.line}: warning: {warning.reason}", markup=False)


def exit_for_warnings(session: SessionFile, strict: bool) -> None:
    if strict and session.warnings:
        raise typer.Exit(EXIT_WARNINGS)

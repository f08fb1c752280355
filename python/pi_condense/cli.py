"""The `pi-condense` command line.

Exit codes scripts can rely on: 0 success, 1 warnings with --strict, 2 unreadable input.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any, NoReturn, Optional

import typer
from rich.console import Console
from rich.table import Table

from . import __version__, jsjson
from .errors import CondenseError
from .session import SessionFile

EXIT_OK = 0
EXIT_WARNINGS = 1
EXIT_UNREADABLE = 2

EXAMPLE_SESSION = Path(__file__).parent / "examples" / "example-session.jsonl"

app = typer.Typer(
    name="pi-condense",
    help="Keep long LLM-agent sessions cheap: inspect, render and condense Pi sessions.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
session_app = typer.Typer(help="Inspect Pi session files (no pruning).", no_args_is_help=True)
app.add_typer(session_app, name="session")

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def _version(value: bool) -> None:
    if value:
        out.print(f"pi-condense {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """pi-condense: a Rust-backed drop-in for the pi-condense Pi extension."""


def _fail(message: str) -> NoReturn:
    err.print(f"pi-condense: {message}", markup=False)
    raise typer.Exit(EXIT_UNREADABLE)


def _resolve_file(file: Optional[Path], example: bool) -> Path:
    if example:
        return EXAMPLE_SESSION
    if file is None:
        _fail("no session file given (pass FILE or --example)")
    return file


def _open(path: Path) -> SessionFile:
    try:
        return SessionFile.load(path)
    except (CondenseError, OSError) as exc:
        _fail(f"{path}: {exc}")


def _check_leaf(session: SessionFile, path: Path, leaf: Optional[str]) -> None:
    if leaf is not None and session.get_entry(leaf) is None:
        _fail(f"{path}: no entry with id {leaf!r}")


def _print_warnings(session: SessionFile, path: Path) -> None:
    for warning in session.warnings:
        err.print(f"{path}:{warning.line}: warning: {warning.reason}", markup=False)


def _exit_for_warnings(session: SessionFile, strict: bool) -> None:
    if strict and session.warnings:
        raise typer.Exit(EXIT_WARNINGS)


def _human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB"):
        if size < 1024 or unit == "MiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def session_summary(session: SessionFile, path: Path, leaf: Optional[str]) -> dict[str, Any]:
    """The facts `session info` reports, as a JSON-ready dict."""
    branch = session.branch(leaf)
    context = session.build_context(leaf)
    entry_types = Counter(str(e.get("type")) for e in session.entries)
    roles = Counter(str(m.get("role")) for m in context.messages if isinstance(m, dict))
    chars = jsjson.length(context.messages)
    return {
        "file": str(path),
        "sessionId": session.session_id,
        "version": session.version,
        "cwd": session.header.get("cwd"),
        "timestamp": session.header.get("timestamp"),
        "sizeBytes": path.stat().st_size,
        "entries": len(session.entries),
        "entriesByType": dict(sorted(entry_types.items())),
        "leaf": branch[-1]["id"] if branch else None,
        "branchLength": len(branch),
        "messages": len(context.messages),
        "messagesByRole": dict(sorted(roles.items())),
        "contextChars": chars,
        "contextTokensEstimate": (chars + 2) // 4,
        "thinkingLevel": context.thinking_level,
        "model": context.model,
        "warnings": [{"line": w.line, "reason": w.reason} for w in session.warnings],
    }


@session_app.command("info")
def session_info(
    file: Optional[Path] = typer.Argument(None, help="Pi session file (.jsonl)."),
    leaf: Optional[str] = typer.Option(None, "--leaf", help="Entry id to use as the leaf."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    strict: bool = typer.Option(False, "--strict", help="Exit 1 when the file had bad lines."),
    example: bool = typer.Option(False, "--example", help="Use the bundled example session."),
) -> None:
    """Header, entry counts, branch, messages by role, size and load warnings."""
    path = _resolve_file(file, example)
    session = _open(path)
    _check_leaf(session, path, leaf)
    info = session_summary(session, path, leaf)
    if as_json:
        sys.stdout.write(jsjson.dumps(info, indent=2) + "\n")
    else:
        _print_info_tables(info)
        _print_warnings(session, path)
    _exit_for_warnings(session, strict)


def _print_info_tables(info: dict[str, Any]) -> None:
    overview = Table(title=f"Session {info['sessionId']}", show_header=False, title_justify="left")
    overview.add_column("field", style="bold")
    overview.add_column("value", overflow="fold")
    model = info["model"]
    chars, tokens = info["contextChars"], info["contextTokensEstimate"]
    rows = [
        ("file", info["file"]),
        ("version", str(info["version"])),
        ("cwd", str(info["cwd"])),
        ("created", str(info["timestamp"])),
        ("size", _human_bytes(info["sizeBytes"])),
        ("entries", str(info["entries"])),
        ("leaf", str(info["leaf"])),
        ("branch length", str(info["branchLength"])),
        ("context messages", str(info["messages"])),
        ("context size", f"{chars:,} chars (~{tokens:,} tokens)"),
        ("thinking level", str(info["thinkingLevel"])),
        ("model", f"{model['provider']}/{model['modelId']}" if model else "-"),
        ("load warnings", str(len(info["warnings"]))),
    ]
    for name, value in rows:
        overview.add_row(name, value)
    out.print(overview)
    _print_counter("Entries by type", "type", info["entriesByType"])
    _print_counter("Context messages by role", "role", info["messagesByRole"])


def _print_counter(title: str, key: str, counts: dict[str, int]) -> None:
    table = Table(title=title, title_justify="left")
    table.add_column(key)
    table.add_column("count", justify="right")
    for name, count in counts.items():
        table.add_row(name, str(count))
    out.print(table)


@session_app.command("context")
def session_context(
    file: Optional[Path] = typer.Argument(None, help="Pi session file (.jsonl)."),
    leaf: Optional[str] = typer.Option(None, "--leaf", help="Entry id to use as the leaf."),
    strict: bool = typer.Option(False, "--strict", help="Exit 1 when the file had bad lines."),
    example: bool = typer.Option(False, "--example", help="Use the bundled example session."),
) -> None:
    """Print JSON.stringify of the context messages Pi would build (no pruning)."""
    path = _resolve_file(file, example)
    session = _open(path)
    _check_leaf(session, path, leaf)
    data = jsjson.dumps(session.build_context(leaf).messages)
    stdout = sys.stdout.buffer
    stdout.write(data.encode("utf-8"))
    stdout.flush()
    _print_warnings(session, path)
    _exit_for_warnings(session, strict)


def main() -> None:
    """Console-script entry point."""
    app()

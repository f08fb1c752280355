"""The `pi-condense` command line.

Exit codes, the same for every command (scripts can rely on them):

- ``0``: success.
- ``1``: ``--strict`` was given and the session file had lines that were skipped on load
  (one warning per line on stderr); the command still did its job. Commands with
  ``--strict``: ``session info``, ``session context``, ``query``, ``recover ...``,
  ``condense``, ``replay``, ``compact``, ``corpus ...``.
- ``2``: nothing was done. A session, config or messages file cannot be read; an argument is
  wrong (an unknown ``--leaf`` id, a ``--compat`` or ``--summarizer`` value, ``--base-url``
  without an API summarizer, conflicting options, an output that exists without ``--force``);
  a tool call of ``query`` / ``recover`` is refused; or an output cannot be written. Typer's
  own usage errors (an unknown option, a missing argument) exit 2 too.
- ``3``: a condenser event failed during ``condense`` or ``replay``, or ``compact`` stopped
  part-way, or a session of a ``corpus`` command failed (the others were done); what was
  written stays written, and the failure is reported on stderr.

3 wins over 1 when both apply.

Expected failures print one line on stderr, never a traceback: the commands turn a bad input
into ``pi-condense: FILE: why`` themselves, and :func:`main` does the same for what escapes
them from the system or from the input's size: an ``OSError`` (named by its own file), a
``MemoryError`` or a ``RecursionError`` (named by the command's file operands), all exit 2.
Any other exception is a bug and keeps its traceback; ``PI_CONDENSE_TRACEBACK=1`` shows the
traceback of those three too.

Each command's module is imported when that command runs (or its help is shown): the
start-up of ``pi-condense --version`` or ``pi-condense session info`` does not pay for the
pruner, pydantic, rich or the corpus engines it does not use.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
import warnings
from typing import Any, Optional, TextIO

import typer
import typer.main

from .. import __version__
from ._help import _Group, polish

# name -> (module of pi_condense.cli, attribute): a command function or a sub-app (typer.Typer).
# The order is the help's (commands first, then the groups, as typer lists them).
_COMMANDS: dict[str, tuple[str, str]] = {
    "compact": ("compact_cmd", "compact_command"),
    "query": ("tools_cmd", "query_command"),
    "condense": ("condense_cmd", "condense"),
    "replay": ("condense_cmd", "replay_command"),
    "render": ("render_cmd", "render_command"),
    "status": ("status_cmd", "status_command"),
    "stats": ("status_cmd", "stats_command"),
    "mcp": ("mcp_cmd", "mcp_command"),
    "tree": ("tree_cmd", "tree_command"),
    "flush": ("flush_cmd", "flush_command"),
    "report": ("report_cmd", "report_command"),
    "proxy": ("proxy_cmd", "proxy_command"),
    "session": ("session_cmd", "session_app"),
    "recover": ("tools_cmd", "recover_app"),
    "corpus": ("corpus_cmd", "corpus_app"),
    "config": ("config_cmd", "config_app"),
}


def load_command(name: str) -> Any:
    """The click command (or group) of ``name``, its module imported now."""
    module_name, attribute = _COMMANDS[name]
    target = getattr(importlib.import_module(f"{__name__}.{module_name}"), attribute)
    holder = typer.Typer(add_completion=False)
    if isinstance(target, typer.Typer):
        holder.add_typer(target, name=name)
    else:
        holder.command(name)(target)
    polish(holder)
    return typer.main.get_group(holder).commands[name]


class _LazyGroup(_Group):
    """The root group: lists every command, builds one only when it is asked for."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._loaded: dict[str, Any] = {}

    def list_commands(self, ctx: Any) -> list[str]:
        return list(_COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Optional[Any]:
        if cmd_name not in _COMMANDS:
            return None
        if cmd_name not in self._loaded:
            self._loaded[cmd_name] = load_command(cmd_name)
        return self._loaded[cmd_name]


app = typer.Typer(
    name="pi-condense",
    help="Keep long LLM-agent sessions cheap: inspect, render and condense Pi sessions.",
    epilog="Exit codes: 0 ok; 1 skipped lines in the session with --strict; 2 bad input or "
    "arguments, nothing done; 3 a condenser step failed, output written.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"pi-condense {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """pi-condense: a Rust-backed drop-in for the pi-condense Pi extension."""


polish(app)
app.info.cls = _LazyGroup


def _preload(argv: list[str]) -> None:
    """Import the module of the command ``argv`` starts with (which typer would import a
    moment later) with the cyclic GC paused, then freeze everything allocated so far.

    The imports leave tens of thousands of objects that live as long as the process (pydantic's
    schemas, typer, rich, our modules). Left to the GC they are walked by every older
    collection during the command and by the collections at exit, for nothing: about a sixth
    of the CPU time of a ``condense`` of the example. Frozen (``gc.freeze``), they never are;
    the command's own objects are collected as before.
    """
    if not argv or argv[0] not in _COMMANDS:
        return
    enabled = gc.isenabled()
    gc.disable()
    try:
        importlib.import_module(f"{__name__}.{_COMMANDS[argv[0]][0]}")
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Optional[TextIO] = None,
    line: Optional[str] = None,
) -> None:
    """A CondenseWarning is one line of its own text (no Python source location: the user
    ran a command, not our code); other warnings print as Python prints them."""
    from ..errors import CondenseWarning
    from ._common import shown_warnings

    if not issubclass(category, CondenseWarning):
        _python_show_warning(message, category, filename, lineno, file, line)
        return
    text = str(message)
    shown_warnings.add(text)
    if not text.startswith("pi-condense:"):
        text = f"pi-condense: warning: {text}"
    (file or sys.stderr).write(text + "\n")


_python_show_warning = warnings.showwarning


def main() -> None:
    """Console-script entry point."""
    warnings.showwarning = _show_warning
    # A lone surrogate (a tool call id cut inside a pair, a non-UTF-8 argument decoded with
    # surrogateescape) is printed as a \\udXXX escape instead of crashing the print.
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    _preload(sys.argv[1:2])
    try:
        app()
    except (OSError, MemoryError, RecursionError) as exc:
        if os.environ.get("PI_CONDENSE_TRACEBACK"):
            raise
        sys.stderr.write(f"pi-condense: {_one_line(exc, sys.argv[1:])}\n")
        raise SystemExit(2) from None
    except ValueError as exc:
        if not str(exc).startswith("JSON nesting deeper than"):
            raise
        from ..js import json as jsjson
        from ._common import DEEP_LINES, EXIT_UNREADABLE

        # A session line JSON.parse reads but our JSON.stringify refuses (see jsjson.MAX_DEPTH).
        lines = DEEP_LINES or [f"a value is nested deeper than {jsjson.MAX_DEPTH} levels"]
        for line in lines:
            sys.stderr.write(f"pi-condense: {line}\n")
        sys.stderr.write(
            f"pi-condense: cannot serialize a value nested deeper than {jsjson.MAX_DEPTH} "
            "levels (or a circular one)\n"
        )
        raise SystemExit(EXIT_UNREADABLE) from None


def _one_line(exc: BaseException, argv: list[str]) -> str:
    """What an ``OSError``, ``MemoryError`` or ``RecursionError`` that escaped a command
    says, naming the file: the error's own, else the command's operands that are files."""
    if isinstance(exc, OSError):
        reason = exc.strerror or str(exc)
        if exc.filename is not None:
            name = _name(exc.filename)
            if exc.filename2 is not None:
                name += f" -> {_name(exc.filename2)}"
            return f"{name}: {reason}"
    elif isinstance(exc, MemoryError):
        reason = "not enough memory"
    else:
        reason = "a value is nested too deeply to process (Python's recursion limit)"
    files = [a for a in argv if not a.startswith("-") and _is_file(a)]
    return f"{', '.join(files)}: {reason}" if files else reason


def _name(filename: Any) -> str:
    """An ``OSError``'s file: a path (``str`` or ``bytes``), or a descriptor."""
    if isinstance(filename, (str, bytes, os.PathLike)):
        return os.fsdecode(filename)
    return f"file descriptor {filename}"


def _is_file(arg: str) -> bool:
    try:
        return os.path.isfile(arg)
    except (OSError, ValueError):
        return False

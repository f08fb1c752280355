"""The `pi-condense` command line's entry point past ``--version`` (see the package docs:
:mod:`pi_condense.cli`): the warning hook, the one-line errors, and the command run through
typer (:mod:`._app`), or for ``condense`` with plain arguments without it (:func:`fast_condense`).
"""

from __future__ import annotations

import errno
import gc
import importlib
import os
import sys
import warnings
from pathlib import Path
from typing import Any, Callable, Optional, TextIO

__all__ = ["COMMANDS", "fast_condense", "main"]

# name -> (module of pi_condense.cli, attribute): a command function or a sub-app (typer.Typer).
# The order is the help's (commands first, then the groups, as typer lists them).
COMMANDS: dict[str, tuple[str, str]] = {
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


# `condense`'s options: flags, and options with a value (-> the parameter, its type).
_CONDENSE_FLAGS = {
    "--example": "example",
    "--in-place": "in_place",
    "--force": "force",
    "--json": "as_json",
    "--quiet": "quiet",
    "-q": "quiet",
    "--strict": "strict",
}
_CONDENSE_VALUES: dict[str, tuple[str, Callable[[str], Any]]] = {
    "--out": ("out_file", Path),
    "-o": ("out_file", Path),
    "--config": ("config_file", Path),
    "--summarizer": ("summarizer_name", str),
    "--base-url": ("base_url", str),
    "--compat": ("compat", str),
    "--leaf": ("leaf", str),
}


def fast_condense(args: list[str]) -> Optional[dict[str, Any]]:
    """The parameters of ``pi-condense condense ARGS`` when they are plain (known options,
    ``--name value`` or ``--name=value``, at most one SESSION, no value that starts with a dash
    or is empty, all valid UTF-8), as typer would pass them; else None, and typer parses them
    (its help, its usage errors and its conversions stay the only ones)."""
    params: dict[str, Any] = dict.fromkeys(_CONDENSE_FLAGS.values(), False)
    params.update({name: None for name, _ in _CONDENSE_VALUES.values()})
    positional: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if not _plain(arg):
            return None
        if not arg.startswith("-"):
            positional.append(arg)
            continue
        flag = _CONDENSE_FLAGS.get(arg)
        if flag is not None:
            params[flag] = True
            continue
        name, equals, value = arg.partition("=")
        option = _CONDENSE_VALUES.get(name)
        if option is None or (equals and not name.startswith("--")):
            return None
        if not equals:
            if index == len(args):
                return None
            value = args[index]
            index += 1
        if not _plain(value) or value.startswith("-"):
            return None
        params[option[0]] = option[1](value)
    if len(positional) > 1:
        return None
    params["session_path"] = Path(positional[0]) if positional else None
    return params


def _plain(arg: str) -> bool:
    """Not empty and valid UTF-8 (an undecodable byte arrives as a lone surrogate)."""
    if not arg:
        return False
    try:
        arg.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _preload(module: str) -> None:
    """Import ``module`` of this package (the module of the command about to run) with the
    cyclic GC paused, then freeze everything allocated so far.

    The imports leave tens of thousands of objects that live as long as the process (pydantic's
    schemas, typer, rich, our modules). Left to the GC they are walked by every older
    collection during the command and by the collections at exit, for nothing: about a sixth
    of the CPU time of a ``condense`` of the example. Frozen (``gc.freeze``), they never are;
    the command's own objects are collected as before.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        importlib.import_module(f"{__package__}.{module}")
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
    """Run the command line (what :func:`pi_condense.cli.main` runs past ``--version``)."""
    warnings.showwarning = _show_warning
    # A lone surrogate (a tool call id cut inside a pair, a non-UTF-8 argument decoded with
    # surrogateescape) is printed as a \\udXXX escape instead of crashing the print.
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    argv = sys.argv[1:]
    params = fast_condense(argv[1:]) if argv[:1] == ["condense"] else None
    command: Callable[[], Any]
    if params is not None:
        _preload("_condense")
        from ._condense import run_condense

        command = _standalone(lambda: run_condense(**params))
    else:
        app = importlib.import_module(f"{__package__}._app").app
        if argv and argv[0] in COMMANDS:
            _preload(COMMANDS[argv[0]][0])
        command = app
    try:
        command()
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


def _standalone(run: Callable[[], None]) -> Callable[[], None]:
    """``run`` with what click's standalone mode adds around a command: Ctrl-C (or an EOF)
    prints ``Aborted!`` and exits 1, a closed stdout (EPIPE) exits 1 quietly."""

    def command() -> None:
        try:
            run()
        except (EOFError, KeyboardInterrupt):
            sys.stderr.write("\nAborted!\n")
            raise SystemExit(1) from None
        except OSError as exc:
            if exc.errno != errno.EPIPE:
                raise
            _silence_stdout()
            raise SystemExit(1) from None

    return command


def _silence_stdout() -> None:
    """After a broken pipe: the interpreter's final flush of stdout must not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


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

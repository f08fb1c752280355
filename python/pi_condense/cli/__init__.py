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
start-up of ``pi-condense session info`` does not pay for the pruner, pydantic, rich or the
corpus engines it does not use, and ``pi-condense --version`` alone does not even import the
command line's framework (typer, in ``_app``); nor does ``pi-condense condense`` with plain
arguments (``_main.fast_condense``: its help, its usage errors and anything unusual still go
through typer).
"""

from __future__ import annotations

import importlib
import sys

from .. import __version__
from ..lazy import lazy_names

__all__ = ["app", "load_command", "main"]


def main() -> None:
    """Console-script entry point."""
    if sys.argv[1:] == ["--version"]:
        sys.stdout.write(f"pi-condense {__version__}\n")
        return
    importlib.import_module(f"{__name__}._main").main()


__getattr__, __dir__ = lazy_names(__name__, globals(), {"app": "_app", "load_command": "_app"})

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
"""

from __future__ import annotations

import sys

import typer

from .. import __version__
from ..js import json as jsjson
from ._common import DEEP_LINES, EXIT_OK, EXIT_UNREADABLE, out
from ._help import polish
from .compact_cmd import compact_command
from .condense_cmd import register as register_condense
from .config_cmd import config_app
from .corpus_cmd import corpus_app
from .flush_cmd import flush_command
from .render_cmd import register as register_render
from .report_cmd import report_command
from .session_cmd import session_app
from .status_cmd import register as register_status
from .tools_cmd import query_command, recover_app
from .tree_cmd import tree_command

app = typer.Typer(
    name="pi-condense",
    help="Keep long LLM-agent sessions cheap: inspect, render and condense Pi sessions.",
    epilog="Exit codes: 0 ok; 1 skipped lines in the session with --strict; 2 bad input or "
    "arguments, nothing done; 3 a condenser step failed, output written.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(session_app, name="session")
app.command("compact")(compact_command)
app.command("query")(query_command)
app.add_typer(recover_app, name="recover")
app.add_typer(corpus_app, name="corpus")
register_condense(app)
register_render(app)
app.add_typer(config_app, name="config")
register_status(app)
app.command("tree")(tree_command)
app.command("flush")(flush_command)
app.command("report")(report_command)


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


polish(app)


def main() -> None:
    """Console-script entry point."""
    # A lone surrogate (a tool call id cut inside a pair, a non-UTF-8 argument decoded with
    # surrogateescape) is printed as a \\udXXX escape instead of crashing the print.
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    try:
        app()
    except ValueError as exc:
        if not str(exc).startswith("JSON nesting deeper than"):
            raise
        # A session line JSON.parse reads but our JSON.stringify refuses (see jsjson.MAX_DEPTH).
        lines = DEEP_LINES or [f"a value is nested deeper than {jsjson.MAX_DEPTH} levels"]
        for line in lines:
            sys.stderr.write(f"pi-condense: {line}\n")
        sys.stderr.write(
            f"pi-condense: cannot serialize a value nested deeper than {jsjson.MAX_DEPTH} "
            "levels (or a circular one)\n"
        )
        raise SystemExit(EXIT_UNREADABLE) from None

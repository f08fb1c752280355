"""The `pi-condense` command line.

Exit codes scripts can rely on: 0 success, 1 warnings with --strict, 2 unreadable input.
"""

from __future__ import annotations

import typer

from .. import __version__
from ._common import EXIT_OK, out
from .compact_cmd import compact_command
from .condense_cmd import register as register_condense
from .render_cmd import register as register_render
from .session_cmd import session_app
from .tools_cmd import query_command, recover_app

app = typer.Typer(
    name="pi-condense",
    help="Keep long LLM-agent sessions cheap: inspect, render and condense Pi sessions.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(session_app, name="session")
app.command("compact")(compact_command)
app.command("query")(query_command)
app.add_typer(recover_app, name="recover")
register_condense(app)
register_render(app)


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


def main() -> None:
    """Console-script entry point."""
    app()

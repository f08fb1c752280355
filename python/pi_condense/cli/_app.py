"""The `pi-condense` command line's typer application (see the package docs:
:mod:`pi_condense.cli`; the entry point is :mod:`._main`)."""

from __future__ import annotations

import importlib
import sys
from typing import Any, Optional

import typer
import typer.main

from .. import __version__
from ._help import _Group, polish
from ._main import COMMANDS as _COMMANDS


def load_command(name: str) -> Any:
    """The click command (or group) of ``name``, its module imported now."""
    module_name, attribute = _COMMANDS[name]
    target = getattr(importlib.import_module(f"{__package__}.{module_name}"), attribute)
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

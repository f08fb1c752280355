"""Help text that reads cleanly on any terminal width, whatever typer release renders it.

Typer's rich help keeps the line breaks of a docstring, so a hard-wrapped paragraph breaks
mid-sentence on a narrower or wider terminal; recent releases also print ``<bool>`` after
every flag and wrap required arguments as ``{NAME}`` in the usage line. :func:`polish` walks
an app once, after every command is registered: docstring paragraphs are joined into single
lines (rich re-wraps them), flags show no type, and usage names arguments plainly.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

__all__ = ["polish", "reflow"]

_BRACED = re.compile(r"^\{(.+)\}(\.\.\.)?$")


def reflow(doc: str) -> str:
    """A docstring's paragraphs, each on one line (blank lines between them kept)."""
    paragraphs = inspect.cleandoc(doc).split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)


def _plain_usage(pieces: list[str]) -> list[str]:
    return [_BRACED.sub(r"\1\2", piece) for piece in pieces]


def _plain_param(param: Any) -> None:
    # Duck-typed: recent typer releases carry their own copy of click's classes.
    if getattr(param, "param_type_name", "") == "argument":
        pieces = type(param).get_usage_pieces
        param.get_usage_pieces = lambda ctx: _plain_usage(pieces(param, ctx))
    if getattr(param, "metavar", "") is not None:
        return
    if getattr(param, "is_flag", False):
        param.metavar = ""
    elif getattr(param, "param_type_name", "") == "argument" and param.nargs == 1:
        param.metavar = str(param.name).upper()


def _untyped_flags(command: Any) -> None:
    for param in command.params:
        _plain_param(param)


class _Command(TyperCommand):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _untyped_flags(self)

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        if option is not None:
            _plain_param(option)
        return option

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return _plain_usage(super().collect_usage_pieces(ctx))


class _Group(TyperGroup):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _untyped_flags(self)

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        if option is not None:
            _plain_param(option)
        return option

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return _plain_usage(super().collect_usage_pieces(ctx))


def polish(app: typer.Typer) -> None:
    """Apply the clean help rendering to ``app``, its commands and its sub-apps."""
    app.info.cls = _Group
    callback = app.registered_callback
    doc = callback.callback.__doc__ if callback is not None and callback.callback else None
    if callback is not None and callback.help is None and doc:
        callback.help = reflow(doc)
    for command in app.registered_commands:
        command.cls = _Command
        if command.help is None and command.callback is not None and command.callback.__doc__:
            command.help = reflow(command.callback.__doc__)
        elif command.help is not None:
            command.help = reflow(command.help)
    for group in app.registered_groups:
        group.cls = _Group
        if group.typer_instance is not None:
            polish(group.typer_instance)

"""Hand the tools to any model: definitions for OpenAI and Anthropic, and one dispatch call.

::

    tools = condense_tools("session.jsonl")
    client.chat.completions.create(..., tools=tools.openai())      # OpenAI
    client.messages.create(..., tools=tools.anthropic())           # Anthropic
    text = tools.execute(call.name, call.arguments, tool_call_id=call.id)

``execute`` takes the arguments as a dict or as the JSON text OpenAI delivers, and returns
the text to send back as the tool result; :meth:`ToolRegistry.call` returns the full
:class:`~pi_condense.tools.base.ToolResult` (text, details, error flag).
"""

from __future__ import annotations

import copy
import os
import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Union

from ..errors import CondenseWarning, JsonError, SessionError
from ..js import json as jsjson
from ..session import SessionFile
from ..state import PrunerState
from .base import ToolResult, ToolSpec
from .query import QUERY_TOOL, ContextTreeQuery
from .recovery import RECOVERY_TOOLS, SessionView
from .recovery.context import session_recovery_context
from .recovery.overview import session_overview
from .recovery.read import session_read_section
from .recovery.search import session_search

__all__ = ["Tool", "ToolRegistry", "condense_tools"]

Runner = Callable[[Mapping[str, Any], Optional[str]], ToolResult]
"""Runs a tool: ``(arguments, id of the running tool call or None) -> result``."""


def _arguments(args: Union[Mapping[str, Any], str, bytes, None]) -> Union[dict[str, Any], str]:
    """The arguments as a dict, or the reason they are unusable."""
    if args is None:
        return {}
    if isinstance(args, (str, bytes)):
        try:
            args = jsjson.loads(args) if args.strip() else {}
        except JsonError as exc:
            return f"the arguments are not valid JSON ({exc})"
    if not isinstance(args, Mapping):
        return "the arguments must be a JSON object"
    return dict(args)


@dataclass(frozen=True)
class Tool:
    """One tool: its registration and the function that runs it."""

    spec: ToolSpec
    runner: Runner

    @property
    def name(self) -> str:
        """The tool name the model calls."""
        return self.spec.name

    @property
    def description(self) -> str:
        """The description the model reads."""
        return self.spec.description

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the arguments (a copy)."""
        return copy.deepcopy(dict(self.spec.parameters))

    def call(
        self, args: Union[Mapping[str, Any], str, bytes, None], tool_call_id: Optional[str] = None
    ) -> ToolResult:
        """Run with ``args`` (dict or JSON text); a refused call has ``is_error`` set."""
        parsed = _arguments(args)
        if isinstance(parsed, str):
            return ToolResult(f"{self.name}: {parsed}.", {"error": True}, is_error=True)
        return self.runner(parsed, tool_call_id)

    def execute(
        self, args: Union[Mapping[str, Any], str, bytes, None], tool_call_id: Optional[str] = None
    ) -> str:
        """Run with ``args`` and return the text for the model."""
        return self.call(args, tool_call_id).text

    def openai(self) -> dict[str, Any]:
        """OpenAI Chat Completions definition: ``{"type": "function", "function": {...}}``."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    def openai_responses(self) -> dict[str, Any]:
        """OpenAI Responses API definition: ``{"type": "function", "name", ...}``.

        ``strict`` is false: the schemas have optional properties, which strict mode forbids.
        """
        return {"type": "function", **self.openai()["function"], "strict": False}

    def anthropic(self) -> dict[str, Any]:
        """Anthropic Messages definition: ``{"name", "description", "input_schema"}``."""
        return {"name": self.name, "description": self.description, "input_schema": self.parameters}


class ToolRegistry:
    """A set of tools, addressable by name, exportable for each provider."""

    def __init__(self, tools: Iterable[Tool]) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            if tool.name in self._tools:
                raise ValueError(f"duplicate tool name {tool.name!r}")
            self._tools[tool.name] = tool

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __getitem__(self, name: str) -> Tool:
        try:
            return self._tools[name]
        except KeyError:
            raise KeyError(f"no tool named {name!r} (have: {', '.join(self._tools)})") from None

    @property
    def names(self) -> list[str]:
        """Tool names in registration order."""
        return list(self._tools)

    def openai(self) -> list[dict[str, Any]]:
        """Every tool as an OpenAI Chat Completions function definition."""
        return [tool.openai() for tool in self]

    def openai_responses(self) -> list[dict[str, Any]]:
        """Every tool as an OpenAI Responses API function definition."""
        return [tool.openai_responses() for tool in self]

    def anthropic(self) -> list[dict[str, Any]]:
        """Every tool as an Anthropic tool definition."""
        return [tool.anthropic() for tool in self]

    def guidelines(self) -> list[str]:
        """Each tool's prompt guidelines, for a system prompt (Pi adds these itself)."""
        return [line for tool in self for line in tool.spec.prompt_guidelines]

    def call(
        self,
        name: str,
        args: Union[Mapping[str, Any], str, bytes, None],
        *,
        tool_call_id: Optional[str] = None,
    ) -> ToolResult:
        """Run tool ``name``; raises ``KeyError`` for an unknown name."""
        return self[name].call(args, tool_call_id)

    def execute(
        self,
        name: str,
        args: Union[Mapping[str, Any], str, bytes, None],
        *,
        tool_call_id: Optional[str] = None,
    ) -> str:
        """Run tool ``name`` and return the text for the model."""
        return self.call(name, args, tool_call_id=tool_call_id).text


_FORK_WARNING = ".*another writer appended entries that do not continue from"


class _LiveSession:
    """The session the tools read, kept current with the file, and its pruner state."""

    def __init__(self, session: SessionFile, leaf: Optional[str], refresh: bool) -> None:
        self.session = session
        self.leaf = leaf
        self.refresh = refresh and session.path is not None
        self._state_key: Optional[tuple[int, int, Optional[str]]] = None
        self._state: Optional[PrunerState] = None
        session.branch(leaf)  # an unknown leaf fails here, not at the first call

    def current(self) -> SessionFile:
        if self.refresh:
            try:
                with warnings.catch_warnings():
                    # (the warning is for a writer, whose next entries would stay on its leaf)
                    warnings.filterwarnings("ignore", _FORK_WARNING, CondenseWarning)
                    appended = self.session.refresh()
            except SessionError:
                path = self.session.path
                assert path is not None
                self.session = SessionFile.load(path)  # rewritten meanwhile: read it again
            else:
                tip = self.session.file_leaf_id
                if appended and self.leaf is None and tip is not None:
                    # the branch Pi loads: the file's last entry, even when the appended
                    # entries branch off an earlier one
                    self.session.set_leaf(tip)
        return self.session

    def state(self) -> PrunerState:
        session = self.current()
        key = (id(session), len(session), self.leaf or session.leaf_id)
        if self._state is None or key != self._state_key:
            self._state = PrunerState.from_session(session, self.leaf)
            self._state_key = key
        return self._state


def condense_tools(
    session: Union[SessionFile, str, os.PathLike[str]],
    *,
    leaf: Optional[str] = None,
    state: Optional[PrunerState] = None,
    recorded_session_dir: Optional[str] = None,
    refresh: bool = True,
    paging: bool = False,
) -> ToolRegistry:
    """``context_tree_query`` and the four session recovery tools over one session.

    ``session`` is a :class:`SessionFile` or the path of a session file. ``leaf`` fixes the
    active branch (default: the session's current leaf). ``state`` is the pruner state to
    query (default: rebuilt from the active branch whenever the session changed).
    ``recorded_session_dir`` is where the session was written when it has moved since (see
    :class:`~pi_condense.tools.query.ContextTreeQuery`). With ``refresh`` (default), a
    file-backed session picks up entries appended to the file before every call.
    ``paging`` makes a ``context_tree_query`` answer that is cut say how to get the rest
    (``<ref>#<line>``, see :mod:`pi_condense.tools.query`; off: the reference's answers).
    """
    if not isinstance(session, SessionFile):
        session = SessionFile.load(Path(session))
    live = _LiveSession(session, leaf, refresh)

    def query(args: Mapping[str, Any], _call_id: Optional[str]) -> ToolResult:
        current = live.current()
        tool = ContextTreeQuery(
            state if state is not None else live.state(),
            current.session_dir,
            current.session_id,
            recorded_session_dir=recorded_session_dir,
            paging=paging,
            branch=lambda: current.branch(leaf),
        )
        return tool.execute(args)

    def view() -> SessionView:
        return SessionView(live.current(), leaf)

    runners: dict[str, Runner] = {
        "session_overview": lambda args, _id: session_overview(view(), args),
        "session_read_section": lambda args, _id: session_read_section(view(), args),
        "session_search": lambda args, _id: session_search(view(), args),
        "session_recovery_context": lambda args, id_: session_recovery_context(view(), args, id_),
    }
    return ToolRegistry(
        [Tool(QUERY_TOOL, query), *(Tool(spec, runners[spec.name]) for spec in RECOVERY_TOOLS)]
    )

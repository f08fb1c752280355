"""The tools the MCP server serves, run over the chosen session (no MCP SDK here).

The tools are the in-process ones (:func:`pi_condense.tools.condense_tools`), so an answer is
the text ``context_tree_query`` or a recovery tool gives the model inside Pi or a hook, byte
for byte. Two things are added for a server that outlives many calls:

- the session is chosen again at every call (:class:`~pi_condense.mcp.sessions.SessionChoice`)
  and its file re-read from where the last call stopped, so entries appended while the
  server runs (new refs) are answered without a restart;
- a call that cannot be answered is an error result, never an exception: no session file
  (yet), an unreadable one, an unknown tool, or a ``context_tree_query`` ref that is not in
  the index (the text is still the tool's own, which says so).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional

from ..errors import CondenseError
from ..tools.base import ToolResult, ToolSpec
from ..tools.query import QUERY_TOOL, missing_refs
from ..tools.recovery import RECOVERY_TOOLS
from ..tools.registry import ToolRegistry, condense_tools
from .sessions import SessionChoice, SessionNotFound

__all__ = ["TOOL_SPECS", "SessionTools"]

TOOL_SPECS: tuple[ToolSpec, ...] = (QUERY_TOOL, *RECOVERY_TOOLS)
"""The tools served, in the order the in-process registry lists them."""

_KEPT = 4
"""Sessions whose loaded state is kept between calls (a client switching conversations)."""


def _refused(text: str) -> ToolResult:
    return ToolResult(text, {"error": True}, is_error=True)


class SessionTools:
    """Runs the served tools over ``choice``'s session; thread-safe (one call at a time).

    ``paging`` lets a ``context_tree_query`` answer over 2000 lines / 50 KB name the ref of
    its next part (``<ref>#<line>``), as the hooks' and the proxy's tools do; without it the
    answers are the reference extension's (cut, no next part).
    """

    def __init__(
        self,
        choice: SessionChoice,
        *,
        paging: bool = True,
        recorded_session_dir: Optional[str] = None,
    ) -> None:
        self.choice = choice
        self.paging = paging
        self.recorded_session_dir = recorded_session_dir
        self._lock = threading.Lock()
        self._registries: OrderedDict[Path, ToolRegistry] = OrderedDict()

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        """The served tools' registrations (name, description, JSON schema)."""
        return TOOL_SPECS

    def guidelines(self) -> str:
        """The tools' system-prompt guidelines, one per line (the server's instructions)."""
        return "\n".join(line for spec in TOOL_SPECS for line in spec.prompt_guidelines)

    def call(self, name: str, arguments: Optional[Mapping[str, Any]]) -> ToolResult:
        """Run tool ``name`` with ``arguments``; a call that cannot be answered gives an
        error result saying why."""
        if name not in {spec.name for spec in TOOL_SPECS}:
            names = ", ".join(spec.name for spec in TOOL_SPECS)
            return _refused(f"unknown tool {name!r} (this server has: {names})")
        with self._lock:
            try:
                registry = self._registry()
            except SessionNotFound as exc:
                return _refused(f"pi-condense: {exc}")
            except (CondenseError, OSError) as exc:
                return _refused(f"pi-condense: {self.choice.describe()}: {exc}")
            try:
                result = registry.call(name, arguments)
            except (CondenseError, OSError) as exc:  # the file went away or went bad meanwhile
                self._registries.clear()
                return _refused(f"pi-condense: {self.choice.describe()}: {exc}")
        if name == QUERY_TOOL.name and not result.is_error:
            ids = (arguments or {}).get("toolCallIds")
            missing = missing_refs(ids if isinstance(ids, list) else [], result)
            if missing:
                return ToolResult(result.text, result.details, True, result.images)
        return result

    def _registry(self) -> ToolRegistry:
        path = self.choice.resolve()
        registry = self._registries.get(path)
        if registry is None:
            registry = condense_tools(
                path, recorded_session_dir=self.recorded_session_dir, paging=self.paging
            )
            self._registries[path] = registry
            while len(self._registries) > _KEPT:
                self._registries.popitem(last=False)
        self._registries.move_to_end(path)
        return registry

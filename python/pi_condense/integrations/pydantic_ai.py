"""pi-condense for pydantic-ai: ``Agent(..., capabilities=[CondenseHistory(...)])``.

:class:`CondenseHistory` is a pydantic-ai capability whose ``before_model_request`` hook hands
the run's whole history to a :class:`~pi_condense.live.LiveDriver` and sends the model the
condensed list instead. It changes only what the model is sent: the run's history (and so
``result.all_messages()``, which an application saves and passes back as ``message_history``)
keeps the raw messages, and every stub's ref can be recovered with the hook's
:attr:`~CondenseHistory.tools` (``context_tree_query`` and the session recovery tools), given to
the agent as ``Agent(tools=hook.tools)``.

The same object is also a plain history processor (``hook(messages)`` / ``await
hook.acondense(messages)``): ``capabilities=[ProcessHistory(hook.acondense)]`` works too.
pydantic-ai's ``ProcessHistory`` writes the processed list back into the run's history; the
driver recognises its own output there and carries on against the raw history behind it.
pydantic-ai 2.x has no ``Agent(history_processors=...)`` any more
(:func:`has_history_processors` says whether the installed version does; where it does, pass the
hook itself).

One hook is one conversation (one session file): give each conversation its own hook.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Sequence
from typing import Any, Optional

from pydantic_ai import Agent, RunContext, Tool
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models import ModelRequestContext

from ..adapters.pydantic_ai import (
    HostItem,
    PydanticAICodec,
    RequestPart,
    assemble,
    expand,
    is_rendered,
)
from ..errors import CondenseWarning
from ..tools.registry import Tool as RecoveryTool
from ._hook import LiveHook

__all__ = ["CondenseHistory", "has_history_processors"]


def has_history_processors() -> bool:
    """Whether the installed pydantic-ai's ``Agent`` takes ``history_processors=``."""
    return "history_processors" in inspect.signature(Agent.__init__).parameters


def _pydantic_tool(tool: RecoveryTool) -> Tool[Any]:
    def run(ctx: RunContext[Any], **arguments: Any) -> str:
        return tool.call(arguments, ctx.tool_call_id).text

    run.__name__ = tool.name
    return Tool.from_schema(
        run,
        name=tool.name,
        description=tool.description,
        json_schema=tool.parameters,
        takes_ctx=True,
    )


class CondenseHistory(LiveHook[HostItem], AbstractCapability[Any]):
    """A pydantic-ai capability that condenses what the model is sent (module docstring).

    ``session`` is where the conversation and the pruner's entries are kept: a path (loaded, or
    created when missing; pass the same path after a restart), a
    :class:`~pi_condense.session.SessionFile`, ``":memory:"``, or None for the conversation's
    own file, which a restarted process finds again by the conversation's beginning (see
    :func:`~pi_condense.live.stable_session`). ``config`` is a
    :class:`~pi_condense.config.Config` or a ``contextPrune`` dict (enabled unless it says
    ``"enabled": false``); ``summarizer`` a summarizer object or spec string
    (``"openai:gpt-4o-mini"``), the offline summarizer by default. ``context_window`` sizes
    the budget triggers; ``clock`` gives epoch ms.
    """

    def _codec(self) -> PydanticAICodec:
        return PydanticAICodec()

    def _started(self) -> None:
        self._tools: Optional[list[Tool[Any]]] = None
        self._items: dict[int, RequestPart] = {}  # the last call's request parts, by id
        self._produced = False  # this hook has handed out condensed output
        self._warned = False

    @classmethod
    def get_serialization_name(cls) -> Optional[str]:
        """Not part of pydantic-ai agent specs (it holds a live session)."""
        return None

    # ------------------------------------------------------------------ the hook

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Send the model the condensed history; the run's own history stays raw."""
        request_context.messages = await self.acondense(request_context.messages)
        return request_context

    def condense(self, messages: Sequence[ModelMessage]) -> list[ModelMessage]:
        """The history to send instead of ``messages`` (sync; works inside a running loop)."""
        mapped = self.driver.stats.written_back
        out = self._done(self.driver.condense(expand(messages, self._items)))
        self._check(messages, mapped)
        return out

    async def acondense(self, messages: Sequence[ModelMessage]) -> list[ModelMessage]:
        """:meth:`condense` for async callers (a ``ProcessHistory`` processor)."""
        mapped = self.driver.stats.written_back
        out = self._done(await self.driver.acondense(expand(messages, self._items)))
        self._check(messages, mapped)
        return out

    def _check(self, messages: Sequence[ModelMessage], mapped: int) -> None:
        """Warn once when a history holding condensed output could not be mapped back to the
        raw messages behind it (it is then taken as it is)."""
        if self._warned or self.driver.stats.written_back > mapped or not is_rendered(messages):
            return
        self._warned = True
        warnings.warn(
            "pi-condense: this history holds condensed output (stubs) written back into it "
            "(ProcessHistory) that matches no earlier model call of this session, so it is "
            "taken as it is and the old stubs' refs may not be found. Use CondenseHistory as a "
            "capability (capabilities=[hook]): the run's history then stays raw.",
            CondenseWarning,
            stacklevel=3,
        )

    def _done(self, items: list[HostItem]) -> list[ModelMessage]:
        if not self._produced:
            self._produced = any(isinstance(i, RequestPart) and i.owner is None for i in items)
        return assemble(items)

    def __call__(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        """:meth:`condense`: the hook as a plain (sync) history processor."""
        return self.condense(messages)

    # ------------------------------------------------------------------ lifecycle

    def flush(self, messages: Optional[Sequence[ModelMessage]] = None) -> None:
        """Take in ``messages`` (e.g. ``result.all_messages()`` with the final reply), close the
        run as Pi does at its end and summarize everything still pending."""
        self.driver.flush(None if messages is None else expand(messages))

    async def aflush(self, messages: Optional[Sequence[ModelMessage]] = None) -> None:
        """:meth:`flush` for async callers."""
        await self.driver.aflush(None if messages is None else expand(messages))

    def close(self, messages: Optional[Sequence[ModelMessage]] = None) -> None:
        """:meth:`flush`, then stop the driver's worker thread."""
        self.driver.close(None if messages is None else expand(messages))

    async def aclose(self, messages: Optional[Sequence[ModelMessage]] = None) -> None:
        """:meth:`close` for async callers."""
        await self.driver.aclose(None if messages is None else expand(messages))

    # ------------------------------------------------------------------ tools and state

    @property
    def tools(self) -> list[Tool[Any]]:
        """The recovery tools as pydantic-ai tools, for ``Agent(tools=...)``."""
        if self._tools is None:
            self._tools = [_pydantic_tool(t) for t in self.driver.tools]
        return list(self._tools)

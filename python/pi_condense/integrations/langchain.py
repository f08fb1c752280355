"""pi-condense for LangChain v1 agents: one middleware for ``create_agent``.

::

    from langchain.agents import create_agent
    from pi_condense.integrations.langchain import CondenseMiddleware

    condense = CondenseMiddleware(session="agent.jsonl")
    agent = create_agent(model, tools=[...], middleware=[condense])
    agent.invoke({"messages": [{"role": "user", "content": "..."}]})

Before every model call the middleware hands the agent's whole message list to a
:class:`~pi_condense.live.LiveDriver` and lets the model see the condensed list instead; the
agent's state keeps the raw messages (nothing is written back). The system prompt
(``request.system_message``) is not part of the list and passes unchanged. The recovery tools
(``context_tree_query`` and the session tools) are registered with the agent through
:attr:`CondenseMiddleware.tools`, so a model can get any summarized output back by its ref.

Both ``invoke`` and ``ainvoke`` work (``wrap_model_call`` and ``awrap_model_call``). A run's
final reply reaches the session at the next model call; call :meth:`CondenseMiddleware.flush`
with the final messages before the process exits to summarize the last run too.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import BaseMessage
from langchain_core.tools import BaseTool, ToolException

from ..adapters.langchain_messages import LangChainCodec
from ..tools.registry import Tool
from ._hook import LiveHook

if TYPE_CHECKING:
    from langchain.agents.middleware.types import ModelCallResult, ModelRequest, ModelResponse

__all__ = ["CondenseMiddleware", "RecoveryTool"]


class RecoveryTool(BaseTool):
    """One of pi-condense's recovery tools as a LangChain tool.

    The arguments schema is the tool's JSON schema; the running tool call's id reaches the
    tool (``session_recovery_context`` leaves its own call out), and a refused call comes
    back as an error ``ToolMessage``.
    """

    handle_tool_error: Union[bool, str, Callable[[ToolException], str], None] = True
    tool: Tool

    @classmethod
    def of(cls, tool: Tool) -> RecoveryTool:
        """The LangChain tool for a :class:`~pi_condense.tools.registry.Tool`."""
        return cls(
            name=tool.name, description=tool.description, args_schema=tool.parameters, tool=tool
        )

    def _to_args_and_kwargs(
        self, tool_input: Union[str, dict[str, Any]], tool_call_id: Optional[str]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (tool_input, tool_call_id), {}

    def _run(self, arguments: Union[str, dict[str, Any]], tool_call_id: Optional[str]) -> str:
        result = self.tool.call(arguments, tool_call_id)
        if result.is_error:
            raise ToolException(result.text)
        return result.text


class CondenseMiddleware(LiveHook[Any], AgentMiddleware):
    """Condenses what the model of a ``create_agent`` agent sees, keeping outputs recoverable.

    ``session``: where the conversation and the pruner's entries are kept (a path, a
    :class:`~pi_condense.session.SessionFile`, ``":memory:"``, or None for the conversation's
    own file, which a restarted process finds again by the conversation's beginning: see
    :func:`~pi_condense.live.stable_session`); pass the same path after a restart to keep the
    refs. ``config``: a
    ``contextPrune`` dict (enabled unless it says ``"enabled": False``) or a
    :class:`~pi_condense.config.Config`. ``summarizer``: an object or a spec such as
    ``"openai:gpt-4o-mini"``; the default is the offline summarizer. ``cwd``,
    ``context_window``, ``clock`` and ``notify`` are passed to the
    :class:`~pi_condense.live.LiveDriver`.
    """

    def _codec(self) -> LangChainCodec:
        return LangChainCodec()

    def _started(self) -> None:
        self.tools: list[BaseTool] = [RecoveryTool.of(tool) for tool in self.driver.tools]

    def _history(self, items: Sequence[Any]) -> list[Any]:
        return list(items)

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelCallResult[Any]:
        """The model sees the condensed messages; the agent's state keeps its own."""
        return handler(request.override(messages=self.driver.condense(request.messages)))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelCallResult[Any]:
        """:meth:`wrap_model_call` for ``ainvoke`` (does not block the event loop)."""
        messages = await self.driver.acondense(request.messages)
        return await handler(request.override(messages=messages))

    def condense(self, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        """What the model would be sent for ``messages`` (the agent's whole list)."""
        return self.driver.condense(messages)

    async def acondense(self, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        """:meth:`condense` for async code."""
        return await self.driver.acondense(messages)

    def flush(self, messages: Optional[Sequence[BaseMessage]] = None) -> None:
        """Take in ``messages`` (e.g. ``result["messages"]`` with the run's final reply),
        close the run and summarize what is pending (call it before the process exits)."""
        self.driver.flush(messages)

    async def aflush(self, messages: Optional[Sequence[BaseMessage]] = None) -> None:
        """:meth:`flush` for async code."""
        await self.driver.aflush(messages)

    def close(self, messages: Optional[Sequence[BaseMessage]] = None) -> None:
        """:meth:`flush`, then stop the driver's worker thread."""
        self.driver.close(messages)

    async def aclose(self, messages: Optional[Sequence[BaseMessage]] = None) -> None:
        """:meth:`close` for async code."""
        await self.driver.aclose(messages)

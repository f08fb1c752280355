"""pi-condense for the OpenAI Agents SDK: a ``call_model_input_filter``.

::

    from agents import Agent, RunConfig, Runner

    condense = CondenseFilter(session="agent.jsonl")
    agent = Agent(name="coder", tools=[*my_tools, *condense.tools])
    config = RunConfig(call_model_input_filter=condense)
    result = await Runner.run(agent, "read the logs", run_config=config)
    history = result.to_input_list()                       # next prompt: history + a new message
    result = await Runner.run(agent, [*history, {"role": "user", "content": "and now?"}],
                              run_config=config)
    condense.close(result.to_input_list())                 # before the process exits

The SDK calls the filter before every model call with the whole Responses input (its own
history stays as it is) and sends what the filter returns; the filter is async, so it never
blocks the run's event loop (``Runner.run_sync`` works too). Items the pruner left alone are
the SDK's very same objects, in order. ``.tools`` are the recovery tools as the SDK's
``FunctionTool``, run by the SDK itself when the model calls them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Optional

from ..adapters.openai_responses import OpenAIResponsesCodec
from ._hook import LiveHook

if TYPE_CHECKING:
    from agents import FunctionTool
    from agents.run_config import CallModelData, ModelInputData
    from agents.tool_context import ToolContext

__all__ = ["CondenseFilter"]


class CondenseFilter(LiveHook[Any]):
    """``RunConfig(call_model_input_filter=CondenseFilter(...))``: the condensed input on
    every model call of an Agents SDK run.

    ``session``: where the conversation and the pruner's entries are kept (a path, a
    :class:`~pi_condense.session.SessionFile`, ``":memory:"``, or None for the conversation's
    own file, which a restarted process finds again by the conversation's beginning: see
    :func:`~pi_condense.live.stable_session`); pass the same path after a restart to keep the
    refs. ``config``: a
    ``contextPrune`` dict (enabled unless it says ``"enabled": False``) or a
    :class:`~pi_condense.config.Config`. ``summarizer``: an object or a spec such as
    ``"openai:gpt-4o-mini"``; the default is the offline summarizer.
    """

    _function_tools: Optional[list[FunctionTool]] = None

    def _codec(self) -> OpenAIResponsesCodec:
        return OpenAIResponsesCodec()

    async def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        """The filter the SDK calls: ``data.model_data.input`` condensed, same instructions."""
        from agents.run_config import ModelInputData

        model_data = data.model_data
        items = await self.driver.acondense(self._history(model_data.input))
        return ModelInputData(input=items, instructions=model_data.instructions)

    def condense(self, items: Sequence[Any]) -> list[Any]:
        """The Responses input items to send instead of ``items`` (outside a run)."""
        return self.driver.condense(self._history(items))

    async def acondense(self, items: Sequence[Any]) -> list[Any]:
        """:meth:`condense` for async code."""
        return await self.driver.acondense(self._history(items))

    @property
    def tools(self) -> list[FunctionTool]:
        """The recovery tools as the SDK's ``FunctionTool`` (add them to ``Agent(tools=...)``)."""
        if self._function_tools is None:
            from agents import FunctionTool

            self._function_tools = [
                FunctionTool(
                    name=tool.name,
                    description=tool.description,
                    params_json_schema=tool.parameters,
                    on_invoke_tool=self._invoker(tool.name),
                    strict_json_schema=False,
                )
                for tool in self.driver.tools
            ]
        return list(self._function_tools)

    def _invoker(self, name: str) -> Any:
        async def invoke(context: ToolContext[Any], arguments: str) -> str:
            call_id = getattr(context, "tool_call_id", None)
            return self.driver.execute(name, arguments, call_id)

        return invoke

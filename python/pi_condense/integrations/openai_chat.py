"""pi-condense for a plain OpenAI Chat Completions loop.

::

    hook = ChatCondenser(session="agent.jsonl")
    while True:
        reply = client.chat.completions.create(
            model=..., messages=hook.condense(messages), tools=[*my_tools, *hook.tools]
        )
        messages.append(reply.choices[0].message)
        for call in reply.choices[0].message.tool_calls or ():
            if hook.handles(call.function.name):
                text = hook.execute(call.function.name, call.function.arguments, call.id)
            ...

``messages`` is the loop's own, full history (system messages included): it is never changed.
``condense`` returns the list to send instead; messages the pruner left alone are the very
same objects, in order. Response objects of the ``openai`` SDK (``ChatCompletionMessage``)
may be appended as they are: they are read as their JSON form.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..adapters.openai_chat import OpenAIChatCodec
from ._hook import LiveHook

__all__ = ["ChatCondenser"]


class ChatCondenser(LiveHook[Any]):
    """Condenses an OpenAI Chat Completions ``messages`` list before every model call.

    ``session``: where the conversation and the pruner's entries are kept (a path, a
    :class:`~pi_condense.session.SessionFile`, ``":memory:"``, or None for a new file in Pi's
    sessions directory); pass the same path after a restart to keep the refs. ``config``: a
    ``contextPrune`` dict (enabled unless it says ``"enabled": False``) or a
    :class:`~pi_condense.config.Config`. ``summarizer``: an object or a spec such as
    ``"openai:gpt-4o-mini"``; the default is the offline summarizer.
    """

    def _codec(self) -> OpenAIChatCodec:
        return OpenAIChatCodec()

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The recovery tools as Chat Completions tool definitions (add them to ``tools=``)."""
        return self.driver.tools.openai()

    def condense(self, messages: Sequence[Any]) -> list[Any]:
        """The messages to send instead of ``messages`` (call before every model call)."""
        return self.driver.condense(self._history(messages))

    async def acondense(self, messages: Sequence[Any]) -> list[Any]:
        """:meth:`condense` for async loops (does not block the event loop)."""
        return await self.driver.acondense(self._history(messages))

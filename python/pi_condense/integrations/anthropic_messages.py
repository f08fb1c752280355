"""pi-condense for a plain Anthropic Messages loop.

::

    hook = MessagesCondenser(session="agent.jsonl")
    while True:
        reply = client.messages.create(
            model=..., max_tokens=..., system=SYSTEM,
            messages=hook.condense(messages, system=SYSTEM), tools=[*my_tools, *hook.tools],
        )
        messages.append({"role": "assistant", "content": reply.content})
        results = []
        for block in reply.content:
            if block.type == "tool_use" and hook.handles(block.name):
                text = hook.execute(block.name, block.input, block.id)
                results.append({"type": "tool_result", "tool_use_id": block.id, "content": text})
            ...
        messages.append({"role": "user", "content": results})

``messages`` is the loop's own, full history; it is never changed. ``condense`` returns the
messages list to send instead, and only that: the system prompt is not one of Anthropic's
messages, pi-condense never changes it, so the caller sends its ``system=`` as it would
without the hook. Messages the pruner left alone are the very same objects, in order; the
result starts with a user message, alternates roles (adjacent same-role messages are merged)
and keeps every ``tool_result`` in the user message right after its ``tool_use``. Content
blocks of the ``anthropic`` SDK (``reply.content``) may be appended as they are: they are read
as their JSON form.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional, Union

from ..adapters.anthropic_messages import AnthropicMessagesCodec
from ._hook import LiveHook, plain

__all__ = ["MessagesCondenser"]

System = Union[str, Sequence[Mapping[str, Any]], None]
"""Anthropic's ``system``: a string or a list of text blocks."""


def _check_system(system: System) -> None:
    if system is None or isinstance(system, str):
        return
    if isinstance(system, Sequence) and all(
        isinstance(block, Mapping) and block.get("type") == "text" for block in system
    ):
        return
    raise TypeError(
        "system must be a string or a list of text blocks (the system prompt, sent as "
        "messages.create(system=...)); were messages and system swapped?"
    )


class MessagesCondenser(LiveHook[Any]):
    """Condenses an Anthropic Messages ``messages`` list before every model call.

    ``session``: where the conversation and the pruner's entries are kept (a path, a
    :class:`~pi_condense.session.SessionFile`, ``":memory:"``, or None for the conversation's
    own file, which a restarted process finds again by the conversation's beginning: see
    :func:`~pi_condense.live.stable_session`); pass the same path after a restart to keep the
    refs. ``config``: a
    ``contextPrune`` dict (enabled unless it says ``"enabled": False``) or a
    :class:`~pi_condense.config.Config`. ``summarizer``: an object or a spec such as
    ``"anthropic:claude-haiku-4-5"``; the default is the offline summarizer.
    """

    def _codec(self) -> AnthropicMessagesCodec:
        return AnthropicMessagesCodec()

    def _history(self, items: Sequence[Any]) -> list[Any]:
        """The messages with the SDK's content blocks (``reply.content``) as dicts."""
        out: list[Any] = []
        for item in items:
            item = plain(item)
            content = item.get("content") if isinstance(item, dict) else None
            if isinstance(content, list) and not all(type(b) is dict for b in content):
                item = {**item, "content": [plain(b) for b in content]}
            out.append(item)
        return out

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The recovery tools as Anthropic tool definitions (add them to ``tools=``)."""
        return self.driver.tools.anthropic()

    def condense(self, messages: Sequence[Any], system: Optional[System] = None) -> list[Any]:
        """The messages to send instead of ``messages`` (call before every model call).

        ``system`` is the request's system prompt, accepted so the call mirrors
        ``messages.create``; it is checked, never changed, and not part of the result."""
        _check_system(system)
        return self.driver.condense(self._history(messages))

    async def acondense(
        self, messages: Sequence[Any], system: Optional[System] = None
    ) -> list[Any]:
        """:meth:`condense` for async loops (does not block the event loop)."""
        _check_system(system)
        return await self.driver.acondense(self._history(messages))

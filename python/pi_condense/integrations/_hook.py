"""What every hook shares: a :class:`~pi_condense.live.LiveDriver` and its lifecycle."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Generic, Optional, TypeVar, Union

from .. import _core
from ..adapters.base import Codec
from ..config import Config
from ..live import JoinMode, LiveDriver, LiveStats, SessionSpec
from ..session import SessionFile
from ..summarize.base import Summarizer
from ..tools.registry import ToolRegistry

__all__ = ["LiveHook", "plain"]


H = TypeVar("H")


def plain(value: Any) -> Any:
    """``value`` as JSON-shaped data: an SDK response object (a pydantic model) becomes the
    dict the SDK itself sends for it (``to_dict()``: the fields the API returned); anything
    else comes back as it is, the very same object (a byte-stable prefix)."""
    if type(value) is dict:
        return value
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return to_dict(mode="json")
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_unset=True, by_alias=True)
    return value


class LiveHook(ABC, Generic[H]):
    """A hook's driver, its session and its lifecycle (``flush``/``close``).

    Besides ``session``, ``config`` and ``summarizer`` (see the hooks), ``cwd`` is the working
    directory a new session records, ``context_window`` sizes the budget triggers' usage
    estimate, ``clock`` gives epoch ms and ``notify(text, level)`` receives the pruner's
    notices (default: the ``pi_condense.live`` logger), ``join`` what the first call on a
    conversation joined mid-way does with its backlog (:class:`~pi_condense.live.LiveDriver`).
    """

    def __init__(
        self,
        *,
        session: SessionSpec = None,
        config: Union[Config, Mapping[str, Any], None] = None,
        summarizer: Union[Summarizer, str, None] = None,
        cwd: Optional[str] = None,
        context_window: int = 200_000,
        clock: Optional[Callable[[], int]] = None,
        notify: Optional[Callable[[str, str], None]] = None,
        join: JoinMode = "flush",
    ) -> None:
        self.driver: LiveDriver[H] = LiveDriver(
            self._codec(),
            session=session,
            config=config,
            summarizer=summarizer,
            cwd=cwd,
            context_window=context_window,
            clock=clock,
            notify=notify,
            join=join,
        )
        self._started()

    @abstractmethod
    def _codec(self) -> Codec[H]:
        """The codec of the hook's format."""

    def _started(self) -> None:
        """Set up what a hook keeps beside the driver (called at the end of ``__init__``)."""

    @property
    def session(self) -> SessionFile:
        """The session file the conversation and the pruner's entries are kept in."""
        return self.driver.session

    @property
    def stats(self) -> LiveStats:
        """Calls, messages seen and chars in/out so far (this process)."""
        return self.driver.stats

    @property
    def registry(self) -> ToolRegistry:
        """The recovery tools as a :class:`~pi_condense.tools.registry.ToolRegistry`."""
        return self.driver.tools

    def execute(
        self,
        name: str,
        arguments: Union[Mapping[str, Any], str, None],
        tool_call_id: Optional[str] = None,
    ) -> str:
        """Run one of the recovery tools the model called; returns the tool result's text.
        ``arguments`` is a dict or the JSON text the model produced."""
        return self.driver.execute(name, arguments, tool_call_id)

    def handles(self, name: str) -> bool:
        """Whether ``name`` is one of the recovery tools (dispatch in an agent loop)."""
        return name in self.driver.tools

    def _history(self, items: Sequence[Any]) -> list[Any]:
        """The host's items with SDK objects as dicts (see :func:`plain`)."""
        if type(items) is list and _core.all_exact_dicts(items):
            return items  # all dicts already (the driver copies the list)
        return [item if type(item) is dict else plain(item) for item in items]

    def flush(self, history: Optional[Sequence[Any]] = None) -> None:
        """Take in ``history`` (with the run's final reply), close the run and summarize
        what is pending, as Pi does at the end of a run (call it before the process exits)."""
        self.driver.flush(None if history is None else self._history(history))

    async def aflush(self, history: Optional[Sequence[Any]] = None) -> None:
        """:meth:`flush` for async code."""
        await self.driver.aflush(None if history is None else self._history(history))

    def close(self, history: Optional[Sequence[Any]] = None) -> None:
        """:meth:`flush`, then stop the driver's worker thread."""
        self.driver.close(None if history is None else self._history(history))

    async def aclose(self, history: Optional[Sequence[Any]] = None) -> None:
        """:meth:`close` for async code."""
        await self.driver.aclose(None if history is None else self._history(history))

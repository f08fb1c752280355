"""Render: the per-call rewrite of the model context (the reference's ``pruneMessages``).

Before every model call the message list is rewritten, in four phases (spec 04):

1. summarized tool results become short stubs pointing at their ``tN`` ref (spilled ones point
   at their sidecar file), except protected ones and recent ``context_tree_query`` outputs
   (the recovery grace window); then an earlier read of a protected path read again later
   becomes a ``[Superseded: ...]`` stub (pi-condense 2.10.3, see ``supersede``);
2. the arguments of errored tool calls are replaced by a size marker after a cooldown;
3. compressed chains collapse into one synthetic ``<compressed-chain>`` user message;
4. tool results left without an open call are swept.

The output serializes to the same bytes as the TypeScript reference's for the same messages,
state and config, so the model's prompt cache survives a switch of implementation. Messages
that do not change are the caller's own objects; changed ones are new dicts. When nothing
changes, :attr:`RenderResult.messages` is the very list that was passed in.

The work runs in Rust (``pi_condense._core.render``); this module maps the configuration and
wraps the result.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Optional, cast

from ._core import RenderOptions, RenderOutcome, SupersedeState
from ._core import render as native_render
from .js import json as jsjson

if TYPE_CHECKING:
    from .config import Config
    from .state import PrunerState

__all__ = [
    "IMAGE_TOKEN_ESTIMATE",
    "DiagnosticKind",
    "RenderDiagnostic",
    "RenderResult",
    "image_price",
    "render",
    "render_options",
    "sized",
    "sized_without_images",
]

DiagnosticKind = Literal["unresolved-range", "range-id-mismatch", "orphan-sweep"]
"""The ``context-prune-diagnostic`` kinds a render reports."""


@dataclass(frozen=True)
class RenderDiagnostic:
    """A render-time degradation to persist as a ``context-prune-diagnostic`` entry.

    A session writes each ``(kind, dedup_key)`` at most once (spec 08 section 6); the entry's
    ``data`` is :meth:`entry_data`.
    """

    kind: DiagnosticKind
    dedup_key: str
    detail: str

    @property
    def sink_key(self) -> str:
        """The session-wide dedup key: ``kind + ":" + dedup_key``."""
        return f"{self.kind}:{self.dedup_key}"

    def entry_data(self) -> dict[str, str]:
        """The entry's ``data``: ``{"kind", "detail"}``."""
        return {"kind": self.kind, "detail": self.detail}


@dataclass(frozen=True)
class RenderResult:
    """What :func:`render` returns.

    ``pruned`` is False when nothing changed: ``messages`` is then the input list itself and
    both char counts are 0. Otherwise ``messages`` is a new list and the counts are the UTF-16
    lengths of ``JSON.stringify`` of the input and of the output (hidden fields included);
    :attr:`before_size` / :attr:`after_size` are the reference's own measure of the two.

    ``diagnostics`` are in report order, one per ``(kind, dedup_key)``; the caller persists
    them (deduplicated per session). ``threw`` marks inputs on which the reference throws (a
    malformed message): the list is then returned unchanged, with the diagnostics reported
    before the failure.
    """

    messages: list[Any]
    pruned: bool
    before_chars: int
    after_chars: int
    diagnostics: tuple[RenderDiagnostic, ...] = ()
    threw: bool = False
    source: Optional[list[Any]] = field(default=None, repr=False, compare=False)
    """The input list (for :attr:`before_size`)."""

    @functools.cached_property
    def before_size(self) -> int:
        """The reference's (2.11.3) ``beforeChars``: the sum of the input messages' JSON
        lengths with every image block priced at 1,600 tokens (see :func:`sized`); 0 when
        nothing changed."""
        if not self.pruned:
            return 0
        return sized(self.before_chars, self.messages if self.source is None else self.source)

    @functools.cached_property
    def after_size(self) -> int:
        """:attr:`before_size` of the output list."""
        return sized(self.after_chars, self.messages) if self.pruned else 0


IMAGE_TOKEN_ESTIMATE = 1600
"""Tokens an image block counts for in sizes (the reference's flat estimate, 4 chars each)."""
_IMAGE_MARK_LEN = len('{"type":"image"}')


def sized_without_images(list_chars: int, count: int) -> int:
    """:func:`sized` of a list of ``count`` messages known to hold no image block: its JSON
    length less the brackets and commas (no walk)."""
    return list_chars - count - 1 if count else 0


def sized(list_chars: int, messages: list[Any]) -> int:
    """The reference's ``sizeMessages(messages)`` (2.11.2) given ``list_chars``, the UTF-16
    length of ``JSON.stringify(messages)``: the per-message lengths summed (no brackets or
    commas), each image block counted as ``{"type":"image"}`` plus 1,600 tokens of 4 chars."""
    if not messages:
        return 0
    size = list_chars - len(messages) - 1
    for message in messages:
        size += image_price(message)
    return size


def image_price(message: Any) -> int:
    """What the reference's ``charsOf(message)`` (2.11.1) adds to ``JSON.stringify(message)
    .length``: each image block counts as ``{"type":"image"}`` plus 1,600 tokens of 4 chars
    instead of its JSON (0 for a message without image blocks)."""
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return 0
    delta = 0
    for block in content:
        if isinstance(block, dict) and block.get("type") == "image":
            delta += _IMAGE_MARK_LEN + IMAGE_TOKEN_ESTIMATE * 4 - jsjson.length(block)
    return delta


def _count(value: Optional[int]) -> Optional[float]:
    return None if value is None else float(value)


def render_options(config: Config, *, spill_paths: bool = True) -> RenderOptions:
    """What render (and chain detection) read of ``config``, compiled for ``_core`` once per
    distinct value: the grace window, phases 2 and 3, and the protection rule (tool names, or
    in reference mode a string ``protectedTools`` matched by substring; path globs).
    ``spill_paths=False`` makes spill stubs name only their ref (see :func:`render`)."""
    purge = config.purge_errors
    chain = config.chain_compression
    return _compiled_options(
        float(config.recovery_grace_turns),
        bool(purge.enabled),
        _count(purge.cooldown_turns),
        _count(purge.min_arg_chars),
        bool(chain.enabled),
        bool(chain.strip_final_assistant_thinking),
        tuple(config.protected_tools),
        tuple(config.protected_paths),
        config.protected_tools_substring,
        not spill_paths and not config.is_reference,
    )


@functools.lru_cache(maxsize=64)
def _compiled_options(
    grace: float,
    purge: bool,
    cooldown: Optional[float],
    min_args: Optional[float],
    chain: bool,
    strip_thinking: bool,
    tools: tuple[str, ...],
    paths: tuple[str, ...],
    substring: Optional[str],
    spill_ref_only: bool,
) -> RenderOptions:
    # Keyed by value, not by Config object: a derived Config (``with_value``, ``model_copy``)
    # never sees another's options, and equal configs share one compiled matcher.
    return RenderOptions(
        recovery_grace_turns=grace,
        purge_errors=purge,
        cooldown_turns=cooldown,
        min_arg_chars=min_args,
        chain_compression=chain,
        strip_final_assistant_thinking=strip_thinking,
        protected_tools=list(tools),
        protected_paths=list(paths),
        protected_tools_substring=substring,
        spill_stub_ref_only=spill_ref_only,
    )


def render(
    messages: list[Any],
    state: PrunerState,
    config: Config,
    *,
    frozen: bool = False,
    spill_paths: bool = True,
    supersede: Optional[SupersedeState] = None,
) -> RenderResult:
    """Rewrite ``messages`` (Pi ``AgentMessage`` dicts, in context order) for the model.

    ``state`` is the pruner state of the session's branch; ``config`` the effective
    configuration. ``config.enabled`` is not consulted: skipping render when the extension is
    off is the caller's decision, as in the reference's ``context`` handler. No input object is
    mutated. A message nested deeper than :data:`pi_condense.js.json.MAX_DEPTH` levels (or
    circular), which ``JSON.stringify`` refuses, makes ``threw`` true.

    ``frozen=True`` is a promise that no message object passed to an earlier render against
    this ``state`` has been changed in place since (nor anything inside it), and none that an
    earlier render returned: the size memo then reuses what it remembers of such an object
    without walking it again, and a new message (stub, assistant copy, chain message) made
    for the same plan item from the very same objects as in the previous frozen render is
    that render's object again. A broken promise renders stale lengths, stubs or messages,
    never unsafe memory.

    ``spill_paths`` says whether the model can read local files (Pi's ``read`` tool): the
    reference's spill stub tells it to read the sidecar at its absolute path. With False the
    stub names only its ``context_tree_query`` ref (ours; ``compat: "reference"`` always gives
    the reference's stub).

    ``supersede`` is the live supersession state (pi-condense 2.10.3: an earlier read of a
    protected path that was read again becomes a one-line ``[Superseded: ...]`` stub where
    the state's floor allows it); the render updates it. None renders as a fresh pruner
    would after a session start: every such earlier read is stubbed.
    """
    try:
        rendered = _render(messages, state, config, frozen, spill_paths, supersede)
    except ValueError as exc:
        if not str(exc).startswith("JSON nesting deeper than"):
            raise
        # The reference's JSON.stringify throws on such a value (RangeError, TypeError on a
        # cycle), so its render does too: the input list comes back as on any other throw.
        return RenderResult(messages, False, 0, 0, (), True)
    return RenderResult(
        messages=rendered.messages,
        pruned=rendered.pruned,
        before_chars=rendered.before_chars,
        after_chars=rendered.after_chars,
        diagnostics=tuple(
            RenderDiagnostic(cast(DiagnosticKind, kind), key, detail)
            for kind, key, detail in rendered.diagnostics
        ),
        threw=rendered.threw,
        source=messages,
    )


def _render(
    messages: list[Any],
    state: PrunerState,
    config: Config,
    frozen: bool = False,
    spill_paths: bool = True,
    supersede: Optional[SupersedeState] = None,
) -> RenderOutcome:
    options = render_options(config, spill_paths=spill_paths)
    return native_render(messages, state.index, options, state.render_cache, frozen, supersede)

"""The summarizer outage fallback state machine (spec 08 section 3).

When the configured summarizer model and the session model are distinct, a transient failure
of the configured model ("primary") moves every later call to the session model ("fallback")
until a probe of the primary succeeds; one probe is allowed per 10-minute cooldown. The
controller holds only state: the runner performs the calls and emits the notifications named
by the returned transitions. Auth failures and unusable replies never reach it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal, Optional

from .base import ModelRef

__all__ = [
    "COOLDOWN_MS",
    "CallTarget",
    "FallbackController",
    "FallbackTransition",
    "TargetDecision",
    "has_distinct_fallback",
]

COOLDOWN_MS = 10 * 60 * 1000
"""Time between probes of the primary while in fallback (not configurable, as in the
reference)."""

FallbackTransition = Literal["enter", "recover", "none"]
CallTarget = Literal["primary", "fallback"]


@dataclass(frozen=True)
class TargetDecision:
    """Which model the next call goes to, and whether it is the cooldown's probe."""

    target: CallTarget
    was_probe: bool


def has_distinct_fallback(primary: Optional[ModelRef], session: Optional[ModelRef]) -> bool:
    """True when both models exist and differ in provider or id (names are ignored)."""
    if primary is None or session is None:
        return False
    return primary.provider != session.provider or primary.id != session.id


class FallbackController:
    """Sticky outage fallback. `now` returns epoch milliseconds (injected for tests)."""

    def __init__(self, now: Callable[[], int]) -> None:
        self._now = now
        self.in_fallback = False
        self._last_probe_at = 0
        self._owed_enter_warning = False

    def reset(self) -> None:
        """Forget everything (a new session)."""
        self.in_fallback = False
        self._last_probe_at = 0
        self._owed_enter_warning = False

    def choose_target(self) -> TargetDecision:
        """Route the next call. Claims the cooldown's single probe synchronously, so calls
        started together in one flush see the claim and go to the fallback."""
        if not self.in_fallback:
            return TargetDecision("primary", was_probe=False)
        now = self._now()
        if now - self._last_probe_at >= COOLDOWN_MS:
            self._last_probe_at = now
            return TargetDecision("primary", was_probe=True)
        return TargetDecision("fallback", was_probe=False)

    def on_primary_fail_fallback_ok(self, was_probe: bool) -> FallbackTransition:
        """The primary failed transiently and the retry on the session model succeeded."""
        del was_probe  # a rescued probe and a first failure differ only by `in_fallback`
        self._last_probe_at = self._now()
        if self._owed_enter_warning or not self.in_fallback:
            self._owed_enter_warning = False
            self.in_fallback = True
            return "enter"
        return "none"

    def on_both_down(self) -> None:
        """The primary and the retry on the session model both failed."""
        self._last_probe_at = self._now()
        if not self.in_fallback:
            self.in_fallback = True
            self._owed_enter_warning = True

    def on_fallback_only_fail(self) -> None:
        """A call routed to the session model failed: no state change, so the next probe of
        the primary is not delayed."""

    def on_primary_success(self, was_probe: bool) -> FallbackTransition:
        """A primary call succeeded; only the probe recovers."""
        if was_probe and self.in_fallback:
            self.in_fallback = False
            self._owed_enter_warning = False
            return "recover"
        return "none"

    def on_fallback_success(self) -> FallbackTransition:
        """A call routed to the session model succeeded: emit the owed enter warning, once."""
        if self._owed_enter_warning:
            self._owed_enter_warning = False
            return "enter"
        return "none"

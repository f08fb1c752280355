"""Summarizer call mechanics: timeouts, outcome classification, outage fallback, retries,
concurrency (spec 05 section 13.3, spec 08 sections 3-4).

`SummarizerRunner.run` makes one summarizer call as the reference's `runSummarization` does:

- the call is bounded by an idle timer (`summarizerIdleTimeoutMs`, reset by every streamed
  event and also bounding the time to the first one) and a ceiling (`summarizerMaxTimeoutMs`);
  0 disables each;
- the outcome is `ok`, `transient` (any failure, timeouts included), `auth` (the provider
  refused the credentials) or `unusable` (blank text, or cut off at the length limit);
- when the configured model and the session model are distinct, the sticky outage fallback of
  `summarize.fallback` routes calls and retries a transient failure on the session model;
- notifications use the reference's texts and levels.

Ours (on by default, off with `compat: "reference"`): a transient HTTP failure (429, 5xx, 529,
connection errors) is retried up to `summarizerRetries` times with exponential backoff,
honouring `Retry-After`, inside the ceiling; and at most `summarizerConcurrency` calls are in
flight at once.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import math
import threading
import time
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Callable, Literal, Optional

from ..config import Config
from ..errors import CondenseError
from ..js.values import js_round
from .base import Completion, CompletionRequest, ModelRef, Summarizer, SummarizerError
from .fallback import FallbackController, TargetDecision, has_distinct_fallback

__all__ = [
    "BACKOFF_BASE_SECONDS",
    "BACKOFF_MAX_SECONDS",
    "MAX_RETRY_AFTER_SECONDS",
    "RETRYABLE_STATUS",
    "MissingExtraError",
    "Notify",
    "Outcome",
    "OutcomeKind",
    "ProviderError",
    "SummarizerRunner",
    "api_error_details",
    "require_sdk",
    "retry_after_seconds",
]

_log = logging.getLogger(__name__)

Notify = Callable[[str, str], None]
"""`notify(level, text)` with level `"info"`, `"warning"` or `"error"`."""

OutcomeKind = Literal["ok", "transient", "auth", "unusable"]

RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
"""HTTP statuses worth retrying (besides any other 5xx)."""

BACKOFF_BASE_SECONDS = 0.5
"""First retry delay without `Retry-After`; doubled for each further retry."""
BACKOFF_MAX_SECONDS = 8.0
"""Longest computed backoff."""
MAX_RETRY_AFTER_SECONDS = 60.0
"""A `Retry-After` longer than this is not waited for: the call fails at once."""

# JavaScript's String.prototype.trim whitespace set.
_JS_WS = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)


class ProviderError(SummarizerError):
    """A provider call failed with what the runner may retry.

    `status` is the HTTP status (None for connection errors and errors inside a stream),
    `retry_after` the server's requested delay in seconds, `retryable` whether a retry can
    help (rate limits, overload, server errors, broken connections).
    """

    def __init__(
        self,
        message: str,
        *,
        status: Optional[int] = None,
        retry_after: Optional[float] = None,
        retryable: bool = False,
        auth: bool = False,
    ) -> None:
        super().__init__(message, auth=auth)
        self.status = status
        self.retry_after = retry_after
        self.retryable = retryable


def retry_after_seconds(
    headers: Optional[Mapping[str, str]], *, now: Optional[float] = None
) -> Optional[float]:
    """The delay a response asks for: `retry-after-ms` (milliseconds), else `Retry-After`
    as seconds or an HTTP date (relative to `now`, epoch seconds, default the wall clock).
    None when absent, unparsable or negative."""
    if not headers:
        return None
    lowered = {key.lower(): value for key, value in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            value = float(millis) / 1000
        except ValueError:
            value = math.nan
        if math.isfinite(value) and value >= 0:
            return value
    text = lowered.get("retry-after")
    if text is None:
        return None
    text = text.strip()
    try:
        seconds = float(text)
    except ValueError:
        import email.utils  # only for an HTTP-date Retry-After: not at start-up

        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:  # older Pythons return None instead of raising
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
        return max(0.0, seconds)
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


class MissingExtraError(ImportError, CondenseError):
    """An optional SDK is not installed; the message names the extra to install."""


def require_sdk(module: str, extra: str) -> Any:
    """Import the SDK `module`, or raise `MissingExtraError` naming `pi-condense[extra]`."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(
            f"the {extra} summarizer needs the {module!r} package: "
            f"pip install 'pi-condense[{extra}]'",
            name=module,
        ) from exc


def api_error_details(body: object) -> tuple[Optional[str], Optional[str]]:
    """`(message, type or code)` of a provider error body: `{"error": {"message", "type"}}`
    (OpenAI, Anthropic), the inner object alone, or a bare string."""
    if isinstance(body, str):
        return (body or None), None
    if not isinstance(body, Mapping):
        return None, None
    inner = body.get("error", body)
    if isinstance(inner, str):
        return (inner or None), None
    if not isinstance(inner, Mapping):
        return None, None
    message = inner.get("message")
    kind = inner.get("type") or inner.get("code")
    return (
        message if isinstance(message, str) and message else None,
        str(kind) if kind is not None and kind != "" else None,
    )


def _exception_retry_info(exc: BaseException) -> tuple[bool, Optional[float]]:
    """Whether a failure may be retried, and the delay the server asked for."""
    if isinstance(exc, ProviderError):
        return exc.retryable, exc.retry_after
    if isinstance(exc, SummarizerError):
        return False, None
    # An SDK exception let through by a summarizer: read it by shape.
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None)
        delay = retry_after_seconds(headers) if isinstance(headers, Mapping) else None
        return status in RETRYABLE_STATUS or status >= 500, delay
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & {"APIConnectionError", "APITimeoutError"}:
        return True, None
    return isinstance(exc, (ConnectionError, TimeoutError)), None


def _is_auth_failure(exc: BaseException) -> bool:
    if isinstance(exc, SummarizerError):
        return exc.auth
    return getattr(exc, "status_code", None) in (401, 403)


def _message_of(exc: BaseException) -> str:
    text = str(exc)
    return text if text else type(exc).__name__


@dataclass(frozen=True)
class Outcome:
    """The classified result of running one model (with its retries)."""

    kind: OutcomeKind
    completion: Optional[Completion] = None
    message: str = ""
    timeout: bool = False
    retryable: bool = False
    retry_after: Optional[float] = None


class SummarizerRunner:
    """Runs summarizer calls for a session with the reference's call mechanics.

    `primary` is the configured summarizer model; `session_model` the session's own model
    (the outage fallback target; None or the same model disables the fallback). `clock`
    returns epoch milliseconds and drives the fallback's probe cooldown; `notify(level,
    text)` receives the user-visible notifications. `sleep` (default `asyncio.sleep`) waits
    between retries; `concurrency` and `retries` override `summarizerConcurrency` and
    `summarizerRetries` (reference mode: unlimited concurrency, no retries).
    """

    def __init__(
        self,
        primary: Summarizer,
        session_model: Optional[Summarizer],
        config: Config,
        *,
        clock: Callable[[], int],
        notify: Notify,
        sleep: Optional[Callable[[float], Awaitable[Any]]] = None,
        concurrency: Optional[int] = None,
        retries: Optional[int] = None,
    ) -> None:
        self.primary = primary
        self.session_model = session_model
        self.config = config
        self._clock = clock
        self._notify = notify
        self._sleep: Callable[[float], Awaitable[Any]] = sleep or asyncio.sleep
        if concurrency is None:
            concurrency = 0 if config.is_reference else config.summarizer_concurrency
        if retries is None:
            retries = 0 if config.is_reference else config.summarizer_retries
        if concurrency < 0 or retries < 0:
            raise ValueError("concurrency and retries must be >= 0")
        self.concurrency = concurrency
        """Most calls in flight at once; 0 = unlimited."""
        self.retries = retries
        """Retries of a retryable transient failure, per model and call."""
        self.controller = FallbackController(clock)
        self._engaged = session_model is not None and has_distinct_fallback(
            primary.model, session_model.model
        )
        self._semaphore: Optional[asyncio.Semaphore] = None
        self._semaphore_loop: Optional[asyncio.AbstractEventLoop] = None

    @property
    def fallback_engaged(self) -> bool:
        """True when the outage fallback is in use (distinct primary and session models)."""
        return self._engaged

    @property
    def in_fallback(self) -> bool:
        """True while calls are routed to the session model."""
        return self.controller.in_fallback

    def reset(self) -> None:
        """Forget the fallback state (the reference resets it on `session_start`)."""
        self.controller.reset()

    async def run_all(self, requests: Sequence[CompletionRequest]) -> list[Optional[Completion]]:
        """`run` every request concurrently (bounded by the concurrency limit), in order."""
        return list(await asyncio.gather(*(self.run(request) for request in requests)))

    async def run(self, request: CompletionRequest) -> Optional[Completion]:
        """One summarizer call; None when it failed (notified) or was unusable (silent).

        Cancelling the awaiting task (the caller's abort) cancels the call and propagates;
        it is never reported as a timeout.
        """
        if request.thinking is None and self.config.summarizer_thinking != "default":
            request = replace(request, thinking=self.config.summarizer_thinking)
        if not self._engaged or self.session_model is None:
            outcome = await self._run_target(self.primary, request)
            if outcome.kind == "ok":
                return outcome.completion
            if outcome.kind != "unusable":
                self._notify_failure(outcome)
            return None
        # Synchronous, before the first await: concurrent calls see the probe claim.
        decision: TargetDecision = self.controller.choose_target()
        if decision.target == "fallback":
            return await self._run_on_fallback(self.session_model, request)
        return await self._run_on_primary(self.session_model, request, decision.was_probe)

    # ------------------------------------------------------------------ fallback routing

    async def _run_on_fallback(
        self, session_model: Summarizer, request: CompletionRequest
    ) -> Optional[Completion]:
        outcome = await self._run_target(session_model, request)
        if outcome.kind == "ok":
            if self.controller.on_fallback_success() == "enter":
                self._notify_enter()
            return outcome.completion
        if outcome.kind == "transient":
            self.controller.on_fallback_only_fail()
            self._notify_failure(outcome)
        elif outcome.kind == "auth":
            self._notify_failure(outcome)
        return None

    async def _run_on_primary(
        self, session_model: Summarizer, request: CompletionRequest, was_probe: bool
    ) -> Optional[Completion]:
        outcome = await self._run_target(self.primary, request)
        if outcome.kind == "ok":
            if self.controller.on_primary_success(was_probe) == "recover":
                self._notify(
                    "info", f"pi-condense: summarizer model {_label(self.primary)} recovered"
                )
            return outcome.completion
        if outcome.kind == "auth":
            self._notify_failure(outcome)
            return None
        if outcome.kind == "unusable":
            return None
        rescue = await self._run_target(session_model, request)
        if rescue.kind == "ok":
            if self.controller.on_primary_fail_fallback_ok(was_probe) == "enter":
                self._notify_enter()
            return rescue.completion
        self.controller.on_both_down()
        self._notify_failure(rescue if rescue.kind in ("transient", "auth") else outcome)
        return None

    def _notify_enter(self) -> None:
        session = _label(self.session_model)
        self._notify(
            "warning",
            f"pi-condense: summarizer model {_label(self.primary)} failing, using session "
            f"model {session} until it recovers",
        )

    def _notify_failure(self, outcome: Outcome) -> None:
        if outcome.timeout:
            self._notify("warning", f"pi-condense: {outcome.message}; summarizer call abandoned")
        else:
            self._notify("error", f"pruner: summarization failed: {outcome.message}")

    # ------------------------------------------------------------------ one model

    def _limit(self) -> Optional[asyncio.Semaphore]:
        if self.concurrency <= 0:
            return None
        loop = asyncio.get_running_loop()
        if self._semaphore is None or self._semaphore_loop is not loop:
            self._semaphore = asyncio.Semaphore(self.concurrency)
            self._semaphore_loop = loop
        return self._semaphore

    async def _run_target(self, target: Summarizer, request: CompletionRequest) -> Outcome:
        """One model's call with its retries; the ceiling bounds attempts and waits."""
        loop = asyncio.get_running_loop()
        max_ms = self.config.summarizer_max_timeout_ms
        budget: Optional[float] = max_ms / 1000 if max_ms > 0 else None
        attempt = 0
        while True:
            limit = self._limit()
            if limit is not None:
                await limit.acquire()
            started = loop.time()
            try:
                outcome = await self._attempt(target, request, budget)
            finally:
                if limit is not None:
                    limit.release()
            if outcome.kind != "transient" or not outcome.retryable or attempt >= self.retries:
                return outcome
            if outcome.retry_after is not None:
                if outcome.retry_after > MAX_RETRY_AFTER_SECONDS:
                    return outcome
                delay = outcome.retry_after
            else:
                delay = min(BACKOFF_BASE_SECONDS * 2**attempt, BACKOFF_MAX_SECONDS)
            if budget is not None:
                budget -= loop.time() - started
                if delay >= budget:
                    return outcome
                budget -= delay
            attempt += 1
            _log.debug(
                "summarizer %s: %s; retry %d/%d in %.3fs",
                _label(target),
                outcome.message,
                attempt,
                self.retries,
                delay,
            )
            await self._sleep(delay)

    async def _attempt(
        self, target: Summarizer, request: CompletionRequest, ceiling: Optional[float]
    ) -> Outcome:
        """One request, bounded by the idle timer and `ceiling` seconds, classified."""
        loop = asyncio.get_running_loop()
        loop_thread = threading.get_ident()
        idle_ms = self.config.summarizer_idle_timeout_ms
        fired: list[str] = []
        handles: dict[str, asyncio.TimerHandle] = {}

        def fire(kind: str) -> None:
            if not fired and not task.done():
                fired.append(kind)
                task.cancel()

        def arm_idle() -> None:
            if fired or task.done():
                return
            old = handles.pop("idle", None)
            if old is not None:
                old.cancel()
            handles["idle"] = loop.call_later(idle_ms / 1000, fire, "idle")

        def on_event() -> None:
            if idle_ms <= 0:
                return
            if threading.get_ident() == loop_thread:
                arm_idle()
            else:
                loop.call_soon_threadsafe(arm_idle)

        task = asyncio.ensure_future(target.complete(request, on_event))
        if idle_ms > 0:
            arm_idle()
        if ceiling is not None:
            handles["ceiling"] = loop.call_later(max(ceiling, 0.0), fire, "ceiling")
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError:
            task.cancel()
            await asyncio.wait({task})
            raise
        finally:
            for handle in handles.values():
                handle.cancel()

        label = _label(target)
        error = None if task.cancelled() else task.exception()
        if error is not None and not isinstance(error, Exception):
            raise error  # KeyboardInterrupt, SystemExit: not ours to classify
        if fired:
            if fired[0] == "idle":
                message = f"summarizer {label} stalled (no output for {js_round(idle_ms / 1000)}s)"
            else:
                max_s = js_round(self.config.summarizer_max_timeout_ms / 1000)
                message = f"summarizer {label} exceeded {max_s}s ceiling"
            return Outcome("transient", message=message, timeout=True)
        if task.cancelled():
            return Outcome("transient", message=f"summarizer {label} call was cancelled")
        if error is not None:
            if _is_auth_failure(error):
                return Outcome("auth", message=_message_of(error))
            retryable, retry_after = _exception_retry_info(error)
            return Outcome(
                "transient",
                message=_message_of(error),
                retryable=retryable,
                retry_after=retry_after,
            )
        completion = task.result()
        if completion.stop_reason == "aborted":
            return Outcome("transient", message="summarize: stream stopped with reason aborted")
        if completion.stop_reason == "error":
            text = completion.error_message or "Summarizer stopped with reason: error"
            return Outcome("transient", message=text)
        if completion.text.strip(_JS_WS) == "" or completion.stop_reason == "length":
            return Outcome("unusable", completion=completion)
        return Outcome("ok", completion=completion)


def _label(summarizer: Optional[Summarizer]) -> str:
    if summarizer is None:
        return "unknown model"
    model: Optional[ModelRef] = summarizer.model
    return model.label if model is not None else "unknown model"

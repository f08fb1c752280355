"""A summarizer on the Anthropic messages API, through the official `anthropic` SDK.

Needs the extra: `pip install 'pi-condense[anthropic]'`. The request is one user message
holding the prompt, streamed so the runner's idle timer sees every content-block event. A
thinking level enables extended thinking with Pi's budget for that level. The SDK's own
retries are off: `SummarizerRunner` owns the retry policy.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping
from typing import Any, Callable, Optional, Union

from .base import Completion, CompletionRequest, Cost, ModelRef, StopReason, SummarizerError, Usage
from .pricing import ModelPrice, cost_of, find_price
from .runner import (
    RETRYABLE_STATUS,
    ProviderError,
    api_error_details,
    require_sdk,
    retry_after_seconds,
)

__all__ = ["THINKING_BUDGETS", "AnthropicSummarizer"]

Prices = Union[ModelPrice, Mapping[str, Mapping[str, float]]]

THINKING_BUDGETS: Mapping[str, int] = {
    "minimal": 1024,
    "low": 2048,
    "medium": 8192,
    "high": 16384,
    "xhigh": 16384,
}
"""Extended-thinking budget (tokens) per thinking level, as Pi sets them (`xhigh` is clamped
to `high`). `max_tokens` grows by the budget so the answer keeps its room."""

# Error types (from the body of an error response or an `error` stream event).
_TRANSIENT_TYPES = frozenset(
    {"overloaded_error", "rate_limit_error", "api_error", "timeout_error", "internal_server_error"}
)
_AUTH_TYPES = frozenset({"authentication_error", "permission_error"})
_NO_KEY = "not-needed"


def _stop_reason(reason: Optional[str]) -> tuple[StopReason, Optional[str]]:
    if reason is None:
        return "error", "stream ended without a stop reason"
    if reason == "max_tokens":
        return "length", None
    if reason == "tool_use":
        return "toolUse", None
    if reason == "refusal":
        return "error", "Provider stop_reason: refusal"
    return "stop", None  # end_turn, stop_sequence, pause_turn


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _field(obj: Any, name: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


class _Tokens:
    """Usage as the stream reports it: `message_start`, then cumulative `message_delta`s."""

    def __init__(self) -> None:
        self.input = 0
        self.output = 0
        self.cache_read = 0
        self.cache_write = 0

    def update(self, usage: Any) -> None:
        if usage is None:
            return
        for attr, name in (
            ("input", "input_tokens"),
            ("output", "output_tokens"),
            ("cache_read", "cache_read_input_tokens"),
            ("cache_write", "cache_creation_input_tokens"),
        ):
            value = _field(usage, name)
            if isinstance(value, int) and not isinstance(value, bool):
                setattr(self, attr, value)


class AnthropicSummarizer:
    """A summarizer calling `model` through the Anthropic messages API.

    `base_url` defaults to `ANTHROPIC_BASE_URL`, else Anthropic's API; `api_key` to
    `ANTHROPIC_API_KEY` (with a custom base URL and no key, a placeholder is sent).
    `max_tokens` bounds the answer (the API requires a bound). `stream=False` makes one
    plain request. `prices` is a `ModelPrice` or a `summarizerPrices` table over the
    built-in prices. `client` is an `anthropic.AsyncAnthropic` to use as is.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: Optional[str] = None,
        api_key: Optional[str] = None,
        provider: str = "anthropic",
        stream: bool = True,
        prices: Optional[Prices] = None,
        client: Any = None,
        name: Optional[str] = None,
        max_tokens: int = 4096,
    ) -> None:
        if client is None:
            require_sdk("anthropic", "anthropic")  # fail early, naming the extra
        self._model = ModelRef(provider=provider, id=model, name=name)
        self._base_url = base_url
        self._api_key = api_key
        self._stream = stream
        self._max_tokens = max_tokens
        self._price = (
            prices if isinstance(prices, ModelPrice) else find_price(provider, model, prices)
        )
        self._given_client = client
        self._loop_client: Optional[tuple[asyncio.AbstractEventLoop, Any]] = None

    @property
    def model(self) -> ModelRef:
        """The model's identity (`provider/id`, optional display name)."""
        return self._model

    @property
    def price(self) -> Optional[ModelPrice]:
        """The price used for the cost of each call (None: unknown, cost 0)."""
        return self._price

    def _resolve_key(self) -> str:
        if self._api_key:
            return self._api_key
        value = os.environ.get("ANTHROPIC_API_KEY")
        if value:
            return value
        if self._base_url or os.environ.get("ANTHROPIC_BASE_URL"):
            return _NO_KEY
        raise SummarizerError(
            f"no API key for {self._model.label}: set ANTHROPIC_API_KEY or pass api_key",
            auth=True,
        )

    def _client(self) -> Any:
        if self._given_client is not None:
            return self._given_client
        loop = asyncio.get_running_loop()
        if self._loop_client is not None and self._loop_client[0] is loop:
            return self._loop_client[1]
        sdk = require_sdk("anthropic", "anthropic")
        client = sdk.AsyncAnthropic(
            api_key=self._resolve_key(), base_url=self._base_url, max_retries=0
        )
        self._loop_client = (loop, client)
        return client

    async def aclose(self) -> None:
        """Close the HTTP connections of the client made for the running event loop."""
        current, self._loop_client = self._loop_client, None
        if current is not None:
            await current[1].close()

    def _params(self, request: CompletionRequest) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self._model.id,
            "max_tokens": self._max_tokens,
            "messages": [{"role": "user", "content": [{"type": "text", "text": request.prompt}]}],
        }
        budget = THINKING_BUDGETS.get(request.thinking or "")
        if budget is not None:
            params["max_tokens"] = self._max_tokens + budget
            # Sent through extra_body so SDK versions without the parameter still work.
            params["extra_body"] = {"thinking": {"type": "enabled", "budget_tokens": budget}}
        return params

    async def complete(
        self, request: CompletionRequest, on_event: Callable[[], None]
    ) -> Completion:
        """Send `request.prompt` as one user message; `on_event()` fires when the stream
        opens and on every content-block event (text, thinking, tool input)."""
        client = self._client()
        params = self._params(request)
        try:
            if self._stream:
                return await self._streamed(client, params, on_event)
            response = await client.messages.create(**params)
            on_event()
            return self._from_message(response)
        except SummarizerError:
            raise
        except json.JSONDecodeError as exc:
            raise ProviderError(f"{self._model.label}: malformed response: {exc}") from exc
        except Exception as exc:
            mapped = self._map_error(exc)
            if mapped is None:
                raise
            raise mapped from exc

    async def _streamed(
        self, client: Any, params: dict[str, Any], on_event: Callable[[], None]
    ) -> Completion:
        stream = await client.messages.create(stream=True, **params)
        on_event()
        blocks: list[list[str]] = []  # [kind, text]
        tokens = _Tokens()
        stop: Optional[str] = None
        try:
            async for event in stream:
                kind = _field(event, "type")
                if kind == "message_start":
                    tokens.update(_field(_field(event, "message"), "usage"))
                elif kind == "content_block_start":
                    block = _field(event, "content_block")
                    block_type = _field(block, "type")
                    if block_type == "text":
                        blocks.append(["text", _field(block, "text") or ""])
                    else:
                        blocks.append([str(block_type), ""])
                    on_event()
                elif kind == "content_block_delta":
                    delta = _field(event, "delta")
                    if _field(delta, "type") == "text_delta":
                        if not blocks or blocks[-1][0] != "text":
                            blocks.append(["text", ""])
                        blocks[-1][1] += _field(delta, "text") or ""
                    on_event()
                elif kind == "content_block_stop":
                    on_event()
                elif kind == "message_delta":
                    reason = _field(_field(event, "delta"), "stop_reason")
                    if reason:
                        stop = reason
                    tokens.update(_field(event, "usage"))
        finally:
            await stream.close()
        stop_reason, error = _stop_reason(stop)
        return Completion(
            text="\n".join(text for kind, text in blocks if kind == "text"),
            stop_reason=stop_reason,
            usage=self._usage(tokens),
            model=self._model,
            error_message=error,
        )

    def _from_message(self, message: Any) -> Completion:
        texts = [
            _field(block, "text") or ""
            for block in (_field(message, "content") or [])
            if _field(block, "type") == "text"
        ]
        tokens = _Tokens()
        tokens.update(_field(message, "usage"))
        stop_reason, error = _stop_reason(_field(message, "stop_reason"))
        return Completion(
            text="\n".join(texts),
            stop_reason=stop_reason,
            usage=self._usage(tokens),
            model=self._model,
            error_message=error,
        )

    def _usage(self, tokens: _Tokens) -> Usage:
        # input_tokens excludes the cache reads and writes, which are reported apart.
        cost: Cost = cost_of(
            self._price,
            input=tokens.input,
            output=tokens.output,
            cache_read=tokens.cache_read,
            cache_write=tokens.cache_write,
        )
        return Usage(
            input=tokens.input,
            output=tokens.output,
            cache_read=tokens.cache_read,
            cache_write=tokens.cache_write,
            total_tokens=tokens.input + tokens.output + tokens.cache_read + tokens.cache_write,
            cost=cost,
        )

    def _map_error(self, exc: Exception) -> Optional[SummarizerError]:
        """The SDK's exception as a `SummarizerError` (None: not an SDK error)."""
        sdk = require_sdk("anthropic", "anthropic")
        label = self._model.label
        if isinstance(exc, sdk.APIStatusError):
            status = int(exc.status_code)
            message, kind = api_error_details(getattr(exc, "body", None))
            detail = message or getattr(exc, "message", "") or str(exc)
            if status < 400:
                # An `error` event inside a 200 stream: its type says what happened.
                return ProviderError(
                    f"{label}: {kind or 'stream error'}: {detail}",
                    retryable=kind in _TRANSIENT_TYPES,
                    auth=kind in _AUTH_TYPES,
                )
            return ProviderError(
                f"{label}: HTTP {status}: {detail}",
                status=status,
                retry_after=retry_after_seconds(getattr(exc.response, "headers", None)),
                retryable=status in RETRYABLE_STATUS or status >= 500,
                auth=status in (401, 403),
            )
        if isinstance(exc, (sdk.APITimeoutError, sdk.APIConnectionError)):
            return ProviderError(f"{label}: connection error: {exc}", retryable=True)
        if isinstance(exc, sdk.AnthropicError):
            return SummarizerError(f"{label}: {exc}")
        return None

"""A summarizer on the Anthropic messages API, through the official `anthropic` SDK.

Needs the extra: `pip install 'pi-condense[anthropic]'`. The request is one user message
holding the prompt, streamed so the runner's idle timer sees every content-block event. A
thinking level enables extended thinking with Pi's budget for that level. The SDK's own
retries are off: `SummarizerRunner` owns the retry policy.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Callable, Optional

from ._client_common import (
    NO_KEY,
    Prices,
    SDKSummarizer,
    append_text,
    connection_error,
    field,
    http_error,
    joined_text,
    make_usage,
)
from .base import Completion, CompletionRequest, StopReason, SummarizerError, Usage
from .runner import ProviderError, api_error_details, require_sdk

__all__ = ["THINKING_BUDGETS", "AnthropicSummarizer"]

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
            value = field(usage, name)
            if isinstance(value, int) and not isinstance(value, bool):
                setattr(self, attr, value)


class AnthropicSummarizer(SDKSummarizer):
    """A summarizer calling `model` through the Anthropic messages API.

    `base_url` defaults to `ANTHROPIC_BASE_URL`, else Anthropic's API; `api_key` to
    `ANTHROPIC_API_KEY` (with a custom base URL and no key, a placeholder is sent).
    `max_tokens` bounds the answer (the API requires a bound). `stream=False` makes one
    plain request. `prices` is a `ModelPrice` or a `summarizerPrices` table over the
    built-in prices. `client` is an `anthropic.AsyncAnthropic` to use as is.
    """

    _sdk = "anthropic"

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
        super().__init__(
            model,
            provider=provider,
            base_url=base_url,
            api_key=api_key,
            stream=stream,
            prices=prices,
            client=client,
            name=name,
        )
        self._max_tokens = max_tokens

    def _resolve_key(self) -> str:
        if self._api_key:
            return self._api_key
        value = os.environ.get("ANTHROPIC_API_KEY")
        if value:
            return value
        if self._base_url or os.environ.get("ANTHROPIC_BASE_URL"):
            return NO_KEY
        raise SummarizerError(
            f"no API key for {self._model.label}: set ANTHROPIC_API_KEY or pass api_key",
            auth=True,
        )

    def _new_client(self, sdk: Any) -> Any:
        return sdk.AsyncAnthropic(
            api_key=self._resolve_key(), base_url=self._base_url, max_retries=0
        )

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
        if self._stream:
            return await self._guarded(self._streamed(client, params, on_event))
        return await self._guarded(self._plain(client, params, on_event))

    async def _plain(
        self, client: Any, params: dict[str, Any], on_event: Callable[[], None]
    ) -> Completion:
        response = await client.messages.create(**params)
        on_event()
        return self._from_message(response)

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
                kind = field(event, "type")
                if kind == "message_start":
                    tokens.update(field(field(event, "message"), "usage"))
                elif kind == "content_block_start":
                    block = field(event, "content_block")
                    block_type = field(block, "type")
                    if block_type == "text":
                        blocks.append(["text", field(block, "text") or ""])
                    else:
                        blocks.append([str(block_type), ""])
                    on_event()
                elif kind == "content_block_delta":
                    delta = field(event, "delta")
                    if field(delta, "type") == "text_delta":
                        append_text(blocks, "text", field(delta, "text") or "")
                    on_event()
                elif kind == "content_block_stop":
                    on_event()
                elif kind == "message_delta":
                    reason = field(field(event, "delta"), "stop_reason")
                    if reason:
                        stop = reason
                    tokens.update(field(event, "usage"))
        finally:
            await stream.close()
        return self._completion(joined_text(blocks), _stop_reason(stop), self._usage(tokens))

    def _from_message(self, message: Any) -> Completion:
        texts = [
            field(block, "text") or ""
            for block in (field(message, "content") or [])
            if field(block, "type") == "text"
        ]
        tokens = _Tokens()
        tokens.update(field(message, "usage"))
        stop = _stop_reason(field(message, "stop_reason"))
        return self._completion("\n".join(texts), stop, self._usage(tokens))

    def _usage(self, tokens: _Tokens) -> Usage:
        # input_tokens excludes the cache reads and writes, which are reported apart.
        return make_usage(
            self._price,
            input=tokens.input,
            output=tokens.output,
            cache_read=tokens.cache_read,
            cache_write=tokens.cache_write,
        )

    def _map_error(self, exc: Exception) -> Optional[SummarizerError]:
        """The SDK's exception as a `SummarizerError` (None: not an SDK error)."""
        sdk = require_sdk("anthropic", "anthropic")
        label = self._model.label
        if isinstance(exc, sdk.APIStatusError):
            status = int(exc.status_code)
            message, kind = api_error_details(getattr(exc, "body", None))
            if status < 400:
                # An `error` event inside a 200 stream: its type says what happened.
                detail = message or getattr(exc, "message", "") or str(exc)
                return ProviderError(
                    f"{label}: {kind or 'stream error'}: {detail}",
                    retryable=kind in _TRANSIENT_TYPES,
                    auth=kind in _AUTH_TYPES,
                )
            return http_error(label, exc, status, message)
        if isinstance(exc, (sdk.APITimeoutError, sdk.APIConnectionError)):
            return connection_error(label, exc)
        if isinstance(exc, sdk.AnthropicError):
            return SummarizerError(f"{label}: {exc}")
        return None

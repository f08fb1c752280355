"""A summarizer on the OpenAI chat completions API, through the official `openai` SDK.

Works with OpenAI and any OpenAI-compatible server given its `base_url` (vLLM, Ollama,
llama.cpp, OpenRouter, LiteLLM, ...). Needs the extra: `pip install 'pi-condense[openai]'`.

The request is one user message holding the prompt, streamed (`stream_options.include_usage`
asks for the usage chunk) so the runner's idle timer sees every delta. The SDK's own retries
are off: `SummarizerRunner` owns the retry policy.
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

__all__ = ["OpenAISummarizer"]

Prices = Union[ModelPrice, Mapping[str, Mapping[str, float]]]

# Errors inside a stream carry no HTTP status; these codes/types are worth a retry.
_TRANSIENT_STREAM_ERRORS = frozenset(
    {"rate_limit_exceeded", "rate_limit_error", "server_error", "overloaded_error", "api_error"}
)
# Fields OpenAI-compatible servers put streamed reasoning in (llama.cpp, vLLM, OpenRouter).
_REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_text")
# Placeholder key for servers that need none (a local vLLM / Ollama / llama.cpp).
_NO_KEY = "not-needed"


def _stop_reason(finish: Optional[str]) -> tuple[StopReason, Optional[str]]:
    if finish is None:
        return "error", "stream ended without a finish reason"
    if finish == "length":
        return "length", None
    if finish in ("tool_calls", "function_call"):
        return "toolUse", None
    if finish == "content_filter":
        return "error", "Provider finish_reason: content_filter"
    return "stop", None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _field(obj: Any, name: str) -> Any:
    """An attribute of an SDK object (or a key of a dict), None when absent."""
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


class OpenAISummarizer:
    """A summarizer calling `model` through the OpenAI chat completions API.

    `base_url` (default: `OPENAI_BASE_URL`, else OpenAI) selects the server; `api_key`
    defaults to `<PROVIDER>_API_KEY` (`OPENAI_API_KEY`, or e.g. `OPENROUTER_API_KEY` for
    provider `openrouter`); with a base URL and no key, a placeholder is sent (local servers
    need none). `provider` and `name` identify the model in messages and prices.
    `stream=False` makes one plain request. `prices` is a `ModelPrice` or a
    `summarizerPrices` table over the built-in prices. `client` is an `openai.AsyncOpenAI`
    to use as is (its retry settings are then the caller's).
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: Optional[str] = None,
        api_key: Optional[str] = None,
        provider: str = "openai",
        stream: bool = True,
        prices: Optional[Prices] = None,
        client: Any = None,
        name: Optional[str] = None,
        max_tokens: Optional[int] = None,
        stream_usage: bool = True,
    ) -> None:
        if client is None:
            require_sdk("openai", "openai")  # fail early, naming the extra
        self._model = ModelRef(provider=provider, id=model, name=name)
        self._base_url = base_url
        self._api_key = api_key
        self._stream = stream
        self._stream_usage = stream_usage
        self._max_tokens = max_tokens
        self._price = (
            prices
            if isinstance(prices, ModelPrice)
            else find_price(provider, model, prices if prices is not None else None)
        )
        self._given_client = client
        self._loop_client: Optional[tuple[asyncio.AbstractEventLoop, Any]] = None

    @property
    def model(self) -> ModelRef:
        """The model's identity (`provider/id`, optional display name)."""
        return self._model

    @property
    def price(self) -> Optional[ModelPrice]:
        """The price used for the cost of each call (None: unknown, cost 0 unless the
        server reports one)."""
        return self._price

    def _resolve_key(self) -> str:
        if self._api_key:
            return self._api_key
        env_name = self._model.provider.upper().replace("-", "_") + "_API_KEY"
        value = os.environ.get(env_name)
        if value:
            return value
        if self._base_url or os.environ.get("OPENAI_BASE_URL"):
            return _NO_KEY
        raise SummarizerError(
            f"no API key for {self._model.label}: set {env_name} or pass api_key", auth=True
        )

    def _client(self) -> Any:
        if self._given_client is not None:
            return self._given_client
        # An SDK client's connection pool belongs to one event loop.
        loop = asyncio.get_running_loop()
        if self._loop_client is not None and self._loop_client[0] is loop:
            return self._loop_client[1]
        sdk = require_sdk("openai", "openai")
        client = sdk.AsyncOpenAI(
            api_key=self._resolve_key(), base_url=self._base_url, max_retries=0
        )
        self._loop_client = (loop, client)
        return client

    async def aclose(self) -> None:
        """Close the HTTP connections of the client made for the running event loop."""
        current, self._loop_client = self._loop_client, None
        if current is not None:
            await current[1].close()

    async def complete(
        self, request: CompletionRequest, on_event: Callable[[], None]
    ) -> Completion:
        """Send `request.prompt` as one user message; `on_event()` fires when the stream
        opens and on every text, reasoning or tool-call delta."""
        client = self._client()
        kwargs: dict[str, Any] = {
            "model": self._model.id,
            "messages": [{"role": "user", "content": request.prompt}],
        }
        if self._max_tokens is not None:
            kwargs["max_tokens"] = self._max_tokens
        if request.thinking is not None and request.thinking != "off":
            # Sent through extra_body so SDK versions without the parameter still work.
            kwargs["extra_body"] = {"reasoning_effort": request.thinking}
        try:
            if self._stream:
                if self._stream_usage:
                    kwargs["stream_options"] = {"include_usage": True}
                return await self._streamed(client, kwargs, on_event)
            response = await client.chat.completions.create(**kwargs)
            on_event()
            return self._from_response(response)
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
        self, client: Any, kwargs: dict[str, Any], on_event: Callable[[], None]
    ) -> Completion:
        stream = await client.chat.completions.create(stream=True, **kwargs)
        on_event()
        blocks: list[list[str]] = []  # [kind, text]; kind "text" or "thinking"
        finish: Optional[str] = None
        usage: Any = None
        try:
            async for chunk in stream:
                if _field(chunk, "usage") is not None:
                    usage = _field(chunk, "usage")
                choices = _field(chunk, "choices") or []
                if not choices:
                    continue
                choice = choices[0]
                if _field(choice, "finish_reason"):
                    finish = _field(choice, "finish_reason")
                delta = _field(choice, "delta")
                if delta is None:
                    continue
                seen = False
                content = _field(delta, "content")
                if isinstance(content, str) and content:
                    if not blocks or blocks[-1][0] != "text":
                        blocks.append(["text", ""])
                    blocks[-1][1] += content
                    seen = True
                for name in _REASONING_FIELDS:
                    reasoning = _field(delta, name)
                    if isinstance(reasoning, str) and reasoning:
                        if not blocks or blocks[-1][0] != "thinking":
                            blocks.append(["thinking", ""])
                        blocks[-1][1] += reasoning
                        seen = True
                        break
                if _field(delta, "tool_calls"):
                    seen = True
                if seen:
                    on_event()
        finally:
            await stream.close()
        text = "\n".join(block[1] for block in blocks if block[0] == "text")
        stop, error = _stop_reason(finish)
        return Completion(
            text=text,
            stop_reason=stop,
            usage=self._usage(usage),
            model=self._model,
            error_message=error,
        )

    def _from_response(self, response: Any) -> Completion:
        choices = _field(response, "choices") or []
        if not choices:
            return Completion(
                text="",
                stop_reason="error",
                usage=self._usage(_field(response, "usage")),
                model=self._model,
                error_message="response has no choices",
            )
        choice = choices[0]
        message = _field(choice, "message")
        content = _field(message, "content") if message is not None else None
        stop, error = _stop_reason(_field(choice, "finish_reason"))
        return Completion(
            text=content if isinstance(content, str) else "",
            stop_reason=stop,
            usage=self._usage(_field(response, "usage")),
            model=self._model,
            error_message=error,
        )

    def _usage(self, usage: Any) -> Usage:
        if usage is None:
            return Usage()
        prompt = _int(_field(usage, "prompt_tokens"))
        completion = _int(_field(usage, "completion_tokens"))
        details = _field(usage, "prompt_tokens_details")
        cached = _int(_field(details, "cached_tokens")) if details is not None else 0
        # prompt_tokens includes the cached tokens; completion_tokens the reasoning tokens.
        input_tokens = max(0, prompt - cached)
        reported = _field(usage, "cost")  # OpenRouter and some proxies report the charge
        if isinstance(reported, (int, float)) and not isinstance(reported, bool):
            cost = Cost(total=float(reported))
        else:
            cost = cost_of(self._price, input=input_tokens, output=completion, cache_read=cached)
        return Usage(
            input=input_tokens,
            output=completion,
            cache_read=cached,
            cache_write=0,
            total_tokens=input_tokens + completion + cached,
            cost=cost,
        )

    def _map_error(self, exc: Exception) -> Optional[SummarizerError]:
        """The SDK's exception as a `SummarizerError` (None: not an SDK error)."""
        sdk = require_sdk("openai", "openai")
        label = self._model.label
        if isinstance(exc, sdk.APIStatusError):
            status = int(exc.status_code)
            message, _ = api_error_details(getattr(exc, "body", None))
            text = f"{label}: HTTP {status}: {message or getattr(exc, 'message', '') or exc}"
            headers = getattr(exc.response, "headers", None)
            return ProviderError(
                text,
                status=status,
                retry_after=retry_after_seconds(headers),
                retryable=status in RETRYABLE_STATUS or status >= 500,
                auth=status in (401, 403),
            )
        if isinstance(exc, (sdk.APITimeoutError, sdk.APIConnectionError)):
            return ProviderError(f"{label}: connection error: {exc}", retryable=True)
        if isinstance(exc, sdk.APIError):
            message, kind = api_error_details(getattr(exc, "body", None))
            text = f"{label}: stream error: {message or exc}"
            return ProviderError(text, retryable=kind in _TRANSIENT_STREAM_ERRORS)
        if isinstance(exc, sdk.OpenAIError):
            return SummarizerError(f"{label}: {exc}")
        return None

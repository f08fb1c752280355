"""A summarizer on the OpenAI chat completions API, through the official `openai` SDK.

Works with OpenAI and any OpenAI-compatible server given its `base_url` (vLLM, Ollama,
llama.cpp, OpenRouter, LiteLLM, ...). Needs the extra: `pip install 'pi-condense[openai]'`.

The request is one user message holding the prompt, streamed (`stream_options.include_usage`
asks for the usage chunk) so the runner's idle timer sees every delta. The SDK's own retries
are off: `SummarizerRunner` owns the retry policy.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Optional

from ._client_common import (
    NO_KEY,
    Prices,
    SDKSummarizer,
    append_text,
    as_int,
    connection_error,
    field,
    http_error,
    joined_text,
    make_usage,
)
from .base import Completion, CompletionRequest, Cost, StopReason, SummarizerError, Usage
from .runner import ProviderError, api_error_details, require_sdk

__all__ = ["OpenAISummarizer"]

# Errors inside a stream carry no HTTP status; these codes/types are worth a retry.
_TRANSIENT_STREAM_ERRORS = frozenset(
    {"rate_limit_exceeded", "rate_limit_error", "server_error", "overloaded_error", "api_error"}
)
# Fields OpenAI-compatible servers put streamed reasoning in (llama.cpp, vLLM, OpenRouter).
_REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_text")


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


class OpenAISummarizer(SDKSummarizer):
    """A summarizer calling `model` through the OpenAI chat completions API.

    `base_url` (default: `OPENAI_BASE_URL`, else OpenAI) selects the server; `api_key`
    defaults to `<PROVIDER>_API_KEY` (`OPENAI_API_KEY`, or e.g. `OPENROUTER_API_KEY` for
    provider `openrouter`); with a base URL and no key, a placeholder is sent (local servers
    need none). `provider` and `name` identify the model in messages and prices.
    `stream=False` makes one plain request. `prices` is a `ModelPrice` or a
    `summarizerPrices` table over the built-in prices. `client` is an `openai.AsyncOpenAI`
    to use as is (its retry settings are then the caller's).
    """

    _sdk = "openai"

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
        self._stream_usage = stream_usage
        self._max_tokens = max_tokens

    def _resolve_key(self) -> str:
        if self._api_key:
            return self._api_key
        env_name = self._model.provider.upper().replace("-", "_") + "_API_KEY"
        value = os.environ.get(env_name)
        if value:
            return value
        if self._base_url or os.environ.get("OPENAI_BASE_URL"):
            return NO_KEY
        raise SummarizerError(
            f"no API key for {self._model.label}: set {env_name} or pass api_key", auth=True
        )

    def _new_client(self, sdk: Any) -> Any:
        return sdk.AsyncOpenAI(api_key=self._resolve_key(), base_url=self._base_url, max_retries=0)

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
        if self._stream:
            if self._stream_usage:
                kwargs["stream_options"] = {"include_usage": True}
            return await self._guarded(self._streamed(client, kwargs, on_event))
        return await self._guarded(self._plain(client, kwargs, on_event))

    async def _plain(
        self, client: Any, kwargs: dict[str, Any], on_event: Callable[[], None]
    ) -> Completion:
        response = await client.chat.completions.create(**kwargs)
        on_event()
        return self._from_response(response)

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
                if field(chunk, "usage") is not None:
                    usage = field(chunk, "usage")
                choices = field(chunk, "choices") or []
                if not choices:
                    continue
                choice = choices[0]
                if field(choice, "finish_reason"):
                    finish = field(choice, "finish_reason")
                delta = field(choice, "delta")
                if delta is None:
                    continue
                seen = False
                content = field(delta, "content")
                if isinstance(content, str) and content:
                    append_text(blocks, "text", content)
                    seen = True
                for name in _REASONING_FIELDS:
                    reasoning = field(delta, name)
                    if isinstance(reasoning, str) and reasoning:
                        append_text(blocks, "thinking", reasoning)
                        seen = True
                        break
                if field(delta, "tool_calls"):
                    seen = True
                if seen:
                    on_event()
        finally:
            await stream.close()
        return self._completion(joined_text(blocks), _stop_reason(finish), self._usage(usage))

    def _from_response(self, response: Any) -> Completion:
        choices = field(response, "choices") or []
        usage = self._usage(field(response, "usage"))
        if not choices:
            return self._completion("", ("error", "response has no choices"), usage)
        choice = choices[0]
        message = field(choice, "message")
        content = field(message, "content") if message is not None else None
        stop = _stop_reason(field(choice, "finish_reason"))
        return self._completion(content if isinstance(content, str) else "", stop, usage)

    def _usage(self, usage: Any) -> Usage:
        if usage is None:
            return Usage()
        prompt = as_int(field(usage, "prompt_tokens"))
        completion = as_int(field(usage, "completion_tokens"))
        details = field(usage, "prompt_tokens_details")
        cached = as_int(field(details, "cached_tokens")) if details is not None else 0
        # prompt_tokens includes the cached tokens; completion_tokens the reasoning tokens.
        input_tokens = max(0, prompt - cached)
        reported = field(usage, "cost")  # OpenRouter and some proxies report the charge
        cost: Optional[Cost] = None
        if isinstance(reported, (int, float)) and not isinstance(reported, bool):
            cost = Cost(total=float(reported))
        return make_usage(
            self._price, input=input_tokens, output=completion, cache_read=cached, cost=cost
        )

    def _map_error(self, exc: Exception) -> Optional[SummarizerError]:
        """The SDK's exception as a `SummarizerError` (None: not an SDK error)."""
        sdk = require_sdk("openai", "openai")
        label = self._model.label
        if isinstance(exc, sdk.APIStatusError):
            status = int(exc.status_code)
            message, _ = api_error_details(getattr(exc, "body", None))
            return http_error(label, exc, status, message)
        if isinstance(exc, (sdk.APITimeoutError, sdk.APIConnectionError)):
            return connection_error(label, exc)
        if isinstance(exc, sdk.APIError):
            message, kind = api_error_details(getattr(exc, "body", None))
            text = f"{label}: stream error: {message or exc}"
            return ProviderError(text, retryable=kind in _TRANSIENT_STREAM_ERRORS)
        if isinstance(exc, sdk.OpenAIError):
            return SummarizerError(f"{label}: {exc}")
        return None

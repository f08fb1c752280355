"""What the SDK summarizers (`openai_client`, `anthropic_client`) share.

`SDKSummarizer` holds the model identity and price, builds one SDK client per event loop
(the SDK's own retries off), and turns SDK exceptions into `SummarizerError`s through the
subclass's `_map_error`; the helpers below read SDK objects, collect streamed text blocks and
assemble `Usage` and the HTTP / connection `ProviderError`s the same way for both APIs.
"""

from __future__ import annotations

import asyncio
import json
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Mapping
from typing import Any, Optional, Union

from .base import Completion, Cost, ModelRef, StopReason, SummarizerError, Usage
from .pricing import ModelPrice, cost_of, find_price
from .runner import RETRYABLE_STATUS, ProviderError, require_sdk, retry_after_seconds

__all__ = [
    "NO_KEY",
    "Prices",
    "SDKSummarizer",
    "append_text",
    "as_int",
    "connection_error",
    "field",
    "http_error",
    "joined_text",
    "make_usage",
]

Prices = Union[ModelPrice, Mapping[str, Mapping[str, float]]]

# Placeholder key for servers that need none (a local vLLM / Ollama / llama.cpp, a proxy).
NO_KEY = "not-needed"


def as_int(value: Any) -> int:
    """`value` if it is an int (not a bool), else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def field(obj: Any, name: str) -> Any:
    """An attribute of an SDK object (or a key of a dict), None when absent."""
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def append_text(blocks: list[list[str]], kind: str, text: str) -> None:
    """Add streamed `text` to the last block if it is of `kind`, else to a new one."""
    if not blocks or blocks[-1][0] != kind:
        blocks.append([kind, ""])
    blocks[-1][1] += text


def joined_text(blocks: list[list[str]]) -> str:
    """The text blocks (`[kind, text]` with kind "text") joined by newlines."""
    return "\n".join(text for kind, text in blocks if kind == "text")


def make_usage(
    price: Optional[ModelPrice],
    *,
    input: int,
    output: int,
    cache_read: int = 0,
    cache_write: int = 0,
    cost: Optional[Cost] = None,
) -> Usage:
    """The `Usage` of a call; `cost` defaults to the one `price` gives the tokens."""
    if cost is None:
        cost = cost_of(
            price, input=input, output=output, cache_read=cache_read, cache_write=cache_write
        )
    return Usage(
        input=input,
        output=output,
        cache_read=cache_read,
        cache_write=cache_write,
        total_tokens=input + output + cache_read + cache_write,
        cost=cost,
    )


def http_error(label: str, exc: Any, status: int, message: Optional[str]) -> ProviderError:
    """An HTTP error response (`exc`, an SDK `APIStatusError`) as a `ProviderError`."""
    detail = message or getattr(exc, "message", "") or str(exc)
    return ProviderError(
        f"{label}: HTTP {status}: {detail}",
        status=status,
        retry_after=retry_after_seconds(getattr(exc.response, "headers", None)),
        retryable=status in RETRYABLE_STATUS or status >= 500,
        auth=status in (401, 403),
    )


def connection_error(label: str, exc: Exception) -> ProviderError:
    """A timeout or a failed connection: always worth a retry."""
    return ProviderError(f"{label}: connection error: {exc}", retryable=True)


class SDKSummarizer(ABC):
    """The part of a summarizer on an official SDK that does not depend on the API.

    Subclasses set `_sdk` (the SDK module, also the name of its extra) and implement
    `_new_client` and `_map_error`.
    """

    _sdk: str

    def __init__(
        self,
        model: str,
        *,
        provider: str,
        base_url: Optional[str],
        api_key: Optional[str],
        stream: bool,
        prices: Optional[Prices],
        client: Any,
        name: Optional[str],
    ) -> None:
        if client is None:
            require_sdk(self._sdk, self._sdk)  # fail early, naming the extra
        self._model = ModelRef(provider=provider, id=model, name=name)
        self._base_url = base_url
        self._api_key = api_key
        self._stream = stream
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
        """The price used for the cost of each call (None: unknown, cost 0 unless the
        server reports one)."""
        return self._price

    @abstractmethod
    def _new_client(self, sdk: Any) -> Any:
        """A new SDK client (`sdk` is the SDK module), its own retries off."""

    @abstractmethod
    def _map_error(self, exc: Exception) -> Optional[SummarizerError]:
        """The SDK's exception as a `SummarizerError` (None: not an SDK error)."""

    def _client(self) -> Any:
        if self._given_client is not None:
            return self._given_client
        # An SDK client's connection pool belongs to one event loop.
        loop = asyncio.get_running_loop()
        if self._loop_client is not None and self._loop_client[0] is loop:
            return self._loop_client[1]
        client = self._new_client(require_sdk(self._sdk, self._sdk))
        self._loop_client = (loop, client)
        return client

    async def aclose(self) -> None:
        """Close the HTTP connections of the client made for the running event loop."""
        current, self._loop_client = self._loop_client, None
        if current is not None:
            await current[1].close()

    async def _guarded(self, call: Awaitable[Completion]) -> Completion:
        """Await `call`, raising SDK errors and malformed responses as `SummarizerError`s."""
        try:
            return await call
        except SummarizerError:
            raise
        except json.JSONDecodeError as exc:
            raise ProviderError(f"{self._model.label}: malformed response: {exc}") from exc
        except Exception as exc:
            mapped = self._map_error(exc)
            if mapped is None:
                raise
            raise mapped from exc

    def _completion(
        self, text: str, stop: tuple[StopReason, Optional[str]], usage: Usage
    ) -> Completion:
        """A completion of this model; `stop` is the stop reason and its error message."""
        return Completion(
            text=text, stop_reason=stop[0], usage=usage, model=self._model, error_message=stop[1]
        )

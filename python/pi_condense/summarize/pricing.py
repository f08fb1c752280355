"""Summarizer cost: per-million-token prices and the cost of one call's usage.

Pi computes a call's cost from its model registry as ``price / 1e6 * tokens`` for each kind
of token (input, output, cache read, cache write) and sums them; we do the same from a small
built-in table of well-known models, which the user extends or overrides with the
``summarizerPrices`` setting. A model with no known price costs 0, as an unpriced model does
in Pi.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional

from .base import Cost

__all__ = ["BUILTIN_PRICES", "ModelPrice", "cost_of", "find_price"]


@dataclass(frozen=True)
class ModelPrice:
    """Dollars per million tokens of each kind."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0

    @classmethod
    def from_settings(cls, entry: Mapping[str, float]) -> ModelPrice:
        """A price from a ``summarizerPrices`` entry (``input``, ``output``, ``cacheRead``,
        ``cacheWrite``; a missing key is 0)."""
        return cls(
            input=float(entry.get("input", 0.0)),
            output=float(entry.get("output", 0.0)),
            cache_read=float(entry.get("cacheRead", 0.0)),
            cache_write=float(entry.get("cacheWrite", 0.0)),
        )


def _p(
    input: float, output: float, cache_read: float = 0.0, cache_write: float = 0.0
) -> ModelPrice:
    return ModelPrice(input, output, cache_read, cache_write)


BUILTIN_PRICES: Mapping[str, ModelPrice] = {
    # OpenAI list prices (cached input is the cache-read price; no cache-write charge).
    "openai/gpt-4o": _p(2.5, 10.0, 1.25),
    "openai/gpt-4o-mini": _p(0.15, 0.6, 0.075),
    "openai/gpt-4.1": _p(2.0, 8.0, 0.5),
    "openai/gpt-4.1-mini": _p(0.4, 1.6, 0.1),
    "openai/gpt-4.1-nano": _p(0.1, 0.4, 0.025),
    "openai/gpt-5": _p(1.25, 10.0, 0.125),
    "openai/gpt-5-mini": _p(0.25, 2.0, 0.025),
    "openai/gpt-5-nano": _p(0.05, 0.4, 0.005),
    "openai/o3-mini": _p(1.1, 4.4, 0.55),
    "openai/o4-mini": _p(1.1, 4.4, 0.275),
    # Anthropic list prices (5-minute cache writes).
    "anthropic/claude-3-5-haiku": _p(0.8, 4.0, 0.08, 1.0),
    "anthropic/claude-haiku-4-5": _p(1.0, 5.0, 0.1, 1.25),
    "anthropic/claude-3-7-sonnet": _p(3.0, 15.0, 0.3, 3.75),
    "anthropic/claude-sonnet-4": _p(3.0, 15.0, 0.3, 3.75),
    "anthropic/claude-sonnet-4-5": _p(3.0, 15.0, 0.3, 3.75),
    "anthropic/claude-opus-4": _p(15.0, 75.0, 1.5, 18.75),
    "anthropic/claude-opus-4-1": _p(15.0, 75.0, 1.5, 18.75),
    "anthropic/claude-opus-4-5": _p(5.0, 25.0, 0.5, 6.25),
}
"""Built-in prices, keyed ``provider/model``; dated snapshots (``gpt-4o-2024-08-06``,
``claude-sonnet-4-5-20250929``) and ``-latest`` aliases match their family's entry."""


def _lookup(table: Mapping[str, ModelPrice], provider: str, model: str) -> Optional[ModelPrice]:
    for key in (f"{provider}/{model}", model):
        if key in table:
            return table[key]
    # A dated or aliased snapshot: the longest entry that the id extends with "-...".
    best: Optional[str] = None
    for key in table:
        name = key.split("/", 1)[1] if key.startswith(f"{provider}/") else key
        if "/" in name:
            continue
        if model.startswith(name + "-") and (best is None or len(name) > len(best)):
            best = name
    if best is None:
        return None
    return table.get(f"{provider}/{best}", table.get(best))


def find_price(
    provider: str,
    model: str,
    overrides: Optional[Mapping[str, Mapping[str, float]]] = None,
) -> Optional[ModelPrice]:
    """The price of ``provider``/``model``: from ``overrides`` (the ``summarizerPrices``
    setting, keyed ``provider/model`` or bare ``model``) first, else the built-in table.

    An exact key wins over a family match (``gpt-4o-mini-2024-07-18`` -> ``gpt-4o-mini``);
    None when neither table knows the model.
    """
    if overrides:
        table = {key: ModelPrice.from_settings(entry) for key, entry in overrides.items()}
        found = _lookup(table, provider, model)
        if found is not None:
            return found
    return _lookup(BUILTIN_PRICES, provider, model)


def cost_of(
    price: Optional[ModelPrice],
    *,
    input: int,
    output: int,
    cache_read: int = 0,
    cache_write: int = 0,
) -> Cost:
    """The cost of a call as Pi computes it: ``price / 1e6 * tokens`` per kind, summed."""
    if price is None:
        return Cost()
    parts = (
        price.input / 1_000_000 * input,
        price.output / 1_000_000 * output,
        price.cache_read / 1_000_000 * cache_read,
        price.cache_write / 1_000_000 * cache_write,
    )
    return Cost(
        input=parts[0],
        output=parts[1],
        cache_read=parts[2],
        cache_write=parts[3],
        total=parts[0] + parts[1] + parts[2] + parts[3],
    )

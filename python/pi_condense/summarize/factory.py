"""Build a summarizer from a short spec string (the CLI's `--summarizer`).

Specs:

- `default`: the embedded deterministic summarizer (no network, no cost);
- `conformance`: the conformance vectors' fake summarizer (offline);
- `openai:MODEL`: the OpenAI chat completions API (or any OpenAI-compatible server given
  `base_url`, e.g. vLLM, llama.cpp, LiteLLM);
- `anthropic:MODEL`: the Anthropic messages API;
- `openrouter:MODEL`, `ollama:MODEL`, `vllm:MODEL`, `llamacpp:MODEL`: OpenAI-compatible
  servers at their usual address (`base_url` overrides it); the key, if any, comes from
  `<PROVIDER>_API_KEY` (e.g. `OPENROUTER_API_KEY`).

The model part is everything after the first `:` (model ids may hold `/` and `:`, e.g.
`ollama:qwen2.5:7b`, `openrouter:anthropic/claude-3.5-haiku`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Optional

from ..config import Config
from ..errors import CondenseError
from .base import Summarizer
from .conformance import ConformanceSummarizer
from .deterministic import DeterministicSummarizer

if TYPE_CHECKING:  # the API clients load with the first one made (`condense` runs offline)
    from .anthropic_client import AnthropicSummarizer
    from .openai_client import OpenAISummarizer

__all__ = ["OPENAI_COMPATIBLE_SERVERS", "SummarizerSpecError", "make_summarizer"]

OPENAI_COMPATIBLE_SERVERS: Mapping[str, str] = {
    "openrouter": "https://openrouter.ai/api/v1",
    "ollama": "http://localhost:11434/v1",
    "vllm": "http://localhost:8000/v1",
    "llamacpp": "http://localhost:8080/v1",
}
"""Default base URL of each OpenAI-compatible provider prefix."""

OFFLINE_SPECS = frozenset({"default", "conformance"})
"""The specs of the summarizers that call no model (after ``strip()``)."""

_FORMS = "default, conformance, openai:MODEL, anthropic:MODEL, " + ", ".join(
    f"{name}:MODEL" for name in OPENAI_COMPATIBLE_SERVERS
)


class SummarizerSpecError(CondenseError, ValueError):
    """A summarizer spec names no known summarizer."""


def make_summarizer(
    spec: str, *, base_url: Optional[str] = None, config: Optional[Config] = None
) -> Summarizer:
    """The summarizer named by `spec` (forms in the module docstring).

    `base_url` points an API summarizer at another server; `config` supplies the
    `summarizerPrices` table. Raises `SummarizerSpecError` for an unknown or malformed spec,
    and `MissingExtraError` (an `ImportError`) when the SDK's extra is not installed.
    """
    text = spec.strip()
    prices = config.summarizer_prices if config is not None else None
    if text in OFFLINE_SPECS:
        if base_url is not None:
            raise SummarizerSpecError(f"--base-url does not apply to the {text!r} summarizer")
        if text == "default":
            return DeterministicSummarizer()
        return ConformanceSummarizer()
    kind, sep, model = text.partition(":")
    kind = kind.strip().lower()
    model = model.strip()
    if not sep or not model:
        raise SummarizerSpecError(f"unknown summarizer {spec!r}; expected one of: {_FORMS}")
    if kind == "anthropic":
        return _anthropic()(model, base_url=base_url, prices=prices)
    if kind == "openai":
        return _openai()(model, base_url=base_url, prices=prices)
    if kind in OPENAI_COMPATIBLE_SERVERS:
        return _openai()(
            model,
            base_url=base_url or OPENAI_COMPATIBLE_SERVERS[kind],
            provider=kind,
            prices=prices,
        )
    raise SummarizerSpecError(f"unknown summarizer {spec!r}; expected one of: {_FORMS}")


def _openai() -> type[OpenAISummarizer]:
    from .openai_client import OpenAISummarizer

    return OpenAISummarizer


def _anthropic() -> type[AnthropicSummarizer]:
    from .anthropic_client import AnthropicSummarizer

    return AnthropicSummarizer

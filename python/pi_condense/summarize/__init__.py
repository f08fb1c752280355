"""Summarizers: prompts, label rewriting, call mechanics and the built-in model clients."""

from __future__ import annotations

from .base import (
    Completion,
    CompletionRequest,
    Cost,
    ModelRef,
    Summarizer,
    SummarizerError,
    Usage,
)
from .factory import SummarizerSpecError, make_summarizer
from .resolve import resolve_summarizers
from .runner import MissingExtraError, ProviderError, SummarizerRunner

__all__ = [
    "Completion",
    "CompletionRequest",
    "Cost",
    "MissingExtraError",
    "ModelRef",
    "ProviderError",
    "Summarizer",
    "SummarizerError",
    "SummarizerRunner",
    "SummarizerSpecError",
    "Usage",
    "make_summarizer",
    "resolve_summarizers",
]

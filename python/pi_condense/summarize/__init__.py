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

__all__ = [
    "Completion",
    "CompletionRequest",
    "Cost",
    "ModelRef",
    "Summarizer",
    "SummarizerError",
    "Usage",
]

"""What every model-facing tool shares: its registration (:class:`ToolSpec`) and its result."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ToolResult", "ToolSpec"]


@dataclass(frozen=True)
class ToolSpec:
    """How a tool is registered with a model: the strings and the JSON schema it sees.

    ``label``, ``prompt_snippet`` and ``prompt_guidelines`` are Pi's extra registration
    fields (a human label, a one-line system-prompt snippet, system-prompt guideline lines);
    provider tool definitions carry only ``name``, ``description`` and ``parameters``.
    """

    name: str
    label: str
    description: str
    parameters: Mapping[str, Any]
    prompt_snippet: str = ""
    prompt_guidelines: tuple[str, ...] = ()


@dataclass(frozen=True)
class ToolResult:
    """A tool's answer: one text block for the model plus structured ``details``.

    ``is_error`` marks a call the tool refused (bad arguments, a rejected cursor); the text
    then says why. Pi reports such calls as error tool results.
    """

    text: str
    details: dict[str, Any] = field(default_factory=dict)
    is_error: bool = False
    images: tuple[dict[str, Any], ...] = ()
    """Image blocks that follow the text block (``context_tree_query``'s recovered images)."""

    @property
    def content(self) -> list[dict[str, Any]]:
        """The content blocks, as Pi's tools return them: ``[{"type": "text", "text": ...}]``
        and then the image blocks, if any."""
        return [{"type": "text", "text": self.text}, *self.images]

    def to_dict(self) -> dict[str, Any]:
        """``{"content", "details"}`` (plus ``"isError": true`` for a refused call)."""
        result: dict[str, Any] = {"content": self.content, "details": self.details}
        if self.is_error:
            result["isError"] = True
        return result

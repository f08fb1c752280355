"""Resolve the `summarizerModel` setting to the summarizers of a `SummarizerRunner`
(spec 05 section 13.3 "model resolution", spec 08 section 3).

`"default"` means the session model. Any other value names a model as `provider/model-id`,
split at the first `/` (the id may hold more `/`: `openrouter/anthropic/claude-3.5-haiku`).
Pi looks the pair up in its model registry; outside Pi the "registry" is the set of providers
we have a client for (`PROVIDERS`), so any non-empty model id of a known provider resolves.
A value without `/`, an unknown provider, an empty id, or a provider whose SDK extra is not
installed falls back to the session model with the reference's warning.

When the configured model resolves and differs from the session model, the runner's outage
fallback engages: the configured model is the primary, the session model the fallback.
"""

from __future__ import annotations

import logging
from typing import Callable, Optional

from ..config import Config
from ..errors import CondenseError
from .base import Summarizer
from .factory import OPENAI_COMPATIBLE_SERVERS, make_summarizer

__all__ = [
    "PROVIDERS",
    "invalid_model_warning",
    "model_not_found_warning",
    "resolve_summarizers",
]

_log = logging.getLogger(__name__)

PROVIDERS: tuple[str, ...] = ("openai", "anthropic", *OPENAI_COMPATIBLE_SERVERS)
"""Providers a `summarizerModel` of the form `provider/model-id` may name (exact spelling,
as Pi's registry compares them)."""


def invalid_model_warning(value: str) -> str:
    """The reference's warning for a `summarizerModel` without `/`."""
    return (
        f'pruner: invalid summarizerModel "{value}", expected "provider/model-id". '
        "Falling back to default model."
    )


def model_not_found_warning(value: str) -> str:
    """The reference's warning for a `summarizerModel` its registry does not know."""
    return f'pruner: model "{value}" not found in registry. Falling back to default model.'


def resolve_summarizers(
    config: Config,
    *,
    session_model: Optional[Summarizer],
    explicit: Optional[Summarizer] = None,
    base_url: Optional[str] = None,
    notify: Optional[Callable[[str, str], None]] = None,
) -> tuple[Optional[Summarizer], Optional[Summarizer]]:
    """`(primary, session_model)` for a `SummarizerRunner` under `config.summarizer_model`.

    An `explicit` summarizer wins over the setting (its fallback is `session_model`, if
    any). Otherwise `"default"` gives `(session_model, session_model)` (no fallback), and
    `"provider/model-id"` gives a new client for the model (`base_url` points it at another
    server) with `session_model` as its outage fallback. An unusable value warns through
    `notify(level, text)` (level `"warning"`; logged when `notify` is None) and gives the
    session model, as the reference does. The texts are the reference's; when the model's
    SDK extra is missing, ours adds the install hint (not with `compat: "reference"`).
    """
    if explicit is not None:
        return explicit, session_model
    value = config.summarizer_model
    if value == "default":
        return session_model, session_model

    def warn(text: str) -> tuple[Optional[Summarizer], Optional[Summarizer]]:
        if notify is not None:
            notify("warning", text)
        else:
            _log.warning("%s", text)
        return session_model, session_model

    provider, slash, model_id = value.partition("/")
    if not slash:
        return warn(invalid_model_warning(value))
    if provider not in PROVIDERS or not model_id.strip():
        return warn(model_not_found_warning(value))
    try:
        primary = make_summarizer(f"{provider}:{model_id}", base_url=base_url, config=config)
    except (ImportError, CondenseError, ValueError) as exc:  # e.g. MissingExtraError
        hint = "" if config.is_reference else f" ({exc})"
        return warn(model_not_found_warning(value) + hint)
    return primary, session_model

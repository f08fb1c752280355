"""Exception hierarchy of pi-condense."""

from __future__ import annotations

import warnings


class CondenseError(Exception):
    """Base class of every error raised by pi-condense."""


class SessionError(CondenseError):
    """A session file cannot be read or written."""


class ConfigError(CondenseError):
    """A configuration value or file is invalid."""


class JsonError(CondenseError, ValueError):
    """A text is not valid JSON as JavaScript's JSON.parse would accept it."""


class CondenseWarning(UserWarning):
    """Something pi-condense was asked to do will not happen as the caller likely expects
    (pruning disabled, an unknown config key, a message list in another format)."""


_WARNED: set[str] = set()


def warn_once(text: str, stacklevel: int = 2) -> bool:
    """Issue ``text`` as a :class:`CondenseWarning` the first time this process sees it
    (a config read by every hook call would otherwise repeat it); True if it was issued."""
    if text in _WARNED:
        return False
    _WARNED.add(text)
    warnings.warn(text, CondenseWarning, stacklevel=stacklevel + 1)
    return True

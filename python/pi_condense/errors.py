"""Exception hierarchy of pi-condense."""

from __future__ import annotations


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

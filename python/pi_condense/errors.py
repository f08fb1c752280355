"""Exception hierarchy of pi-condense."""

from __future__ import annotations

import os
import sys
import warnings
from types import FrameType
from typing import Optional


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


def _outside_frames() -> int:
    """The ``stacklevel`` (for a ``warnings.warn`` in the caller) of the first frame outside
    this package: the user's line that built the hook or the Condenser."""
    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame: Optional[FrameType] = sys._getframe(2)
    level = 2  # warn_once (1) is in the package: its caller is level 2
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame = frame.f_back
        level += 1
    return level


def warn_once(text: str) -> bool:
    """Issue ``text`` as a :class:`CondenseWarning` the first time this process sees it
    (a config read by every hook call would otherwise repeat it), attributed to the first
    caller outside pi-condense; True if it was issued."""
    if text in _WARNED:
        return False
    _WARNED.add(text)
    warnings.warn(text, CondenseWarning, stacklevel=_outside_frames())
    return True

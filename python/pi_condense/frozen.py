"""Whether this process keeps objects frozen out of the cyclic collector's reach
(``gc.freeze``). Imported by the package first (gc and sys only), so that it counts before
anything of ours freezes."""

from __future__ import annotations

import gc
import sys

# CPython 3.12 keeps the containers it made immortal at start-up in the permanent generation
# (where `gc.freeze` puts what it freezes), and every collection puts them back there after a
# `gc.unfreeze`: `gc.get_freeze_count()` counts them (375 on 3.12.1) with nothing frozen.
# Their number is fixed at start-up. 3.11 and 3.13 count only what was frozen.
_IMMORTAL = gc.get_freeze_count() if sys.version_info[:2] == (3, 12) else 0

_held: list[object] = []
"""A token for each freeze of ours in force (:func:`hold`); list appends and removals are
atomic, so threads may add and drop theirs at once."""


def frozen_by_someone() -> bool:
    """Whether objects of this process are frozen (``gc.freeze``): by its own code, or by an
    earlier step of ours that has not given them back. What a caller froze cannot be given
    back alone (``gc.unfreeze`` gives back everything), so a step that freezes for its own
    run does so only when this is false.

    While a freeze of ours is held (:func:`hold`) the answer is known without counting:
    ``gc.get_freeze_count()`` walks every frozen object, a few milliseconds with a framework
    loaded (Dask's: 70k objects, 5-6 ms), which a corpus paid once per replayed session."""
    return bool(_held) or gc.get_freeze_count() > _IMMORTAL


def hold() -> object:
    """Say that this process's code has just frozen its objects (``gc.freeze``) and keeps
    them frozen until :func:`release` of the token returned (never, in a process that is
    the run's own, such as a pool's worker)."""
    token = object()
    _held.append(token)
    return token


def release(token: object) -> None:
    """The freeze :func:`hold` said is in force is given back (or about to be)."""
    _held.remove(token)

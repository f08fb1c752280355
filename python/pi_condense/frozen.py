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


def frozen_by_someone() -> bool:
    """Whether objects of this process are frozen (``gc.freeze``): by its own code, or by an
    earlier step of ours that has not given them back. What a caller froze cannot be given
    back alone (``gc.unfreeze`` gives back everything), so a step that freezes for its own
    run does so only when this is false."""
    return gc.get_freeze_count() > _IMMORTAL

"""Deprecated alias of :mod:`pi_condense.js.time` (JavaScript ``Date`` semantics).

Importing it warns (:class:`DeprecationWarning`); it is removed in pi-condense 0.2.0. Import
``from pi_condense.js import time as jstime`` instead.
"""

from __future__ import annotations

import warnings

from .js.time import *  # noqa: F403  (the alias exports exactly what js.time does)
from .js.time import __all__ as __all__

warnings.warn(
    "pi_condense.jstime is deprecated and will be removed in pi-condense 0.2.0: "
    "use pi_condense.js.time (from pi_condense.js import time as jstime)",
    DeprecationWarning,
    stacklevel=2,
)

"""Deprecated alias of :mod:`pi_condense.js.json` (JSON with JavaScript semantics).

Importing it warns (:class:`DeprecationWarning`); it is removed in pi-condense 0.2.0. Import
``from pi_condense.js import json as jsjson`` instead.
"""

from __future__ import annotations

import warnings

from .js.json import *  # noqa: F403  (the alias exports exactly what js.json does)
from .js.json import __all__ as __all__

warnings.warn(
    "pi_condense.jsjson is deprecated and will be removed in pi-condense 0.2.0: "
    "use pi_condense.js.json (from pi_condense.js import json as jsjson)",
    DeprecationWarning,
    stacklevel=2,
)

"""Whole corpora of Pi sessions: scan, what-if replays over a config grid, batch condense.

Each session is an independent task run by :func:`~pi_condense.corpus.tasks.run_task` on a
local process pool, in-process, or on a Dask / Ray cluster (optional extras), with a
resumable result cache. Nothing here is imported by ``import pi_condense``.
"""

from __future__ import annotations

from .batch import condense
from .discover import CorpusError, SessionSource, discover
from .engines import ENGINES, EngineError
from .models import (
    CondenseResult,
    CondenseRow,
    GapTable,
    LengthTable,
    Problem,
    ScanAggregate,
    ScanResult,
    ScanRow,
    SkippedSession,
    TaskFailure,
    WhatIfResult,
    WhatIfRow,
    WhatIfSession,
)
from .scan import scan
from .whatif import whatif

__all__ = [
    "ENGINES",
    "CondenseResult",
    "CondenseRow",
    "CorpusError",
    "EngineError",
    "GapTable",
    "LengthTable",
    "Problem",
    "ScanAggregate",
    "ScanResult",
    "ScanRow",
    "SessionSource",
    "SkippedSession",
    "TaskFailure",
    "WhatIfResult",
    "WhatIfRow",
    "WhatIfSession",
    "condense",
    "discover",
    "scan",
    "whatif",
]

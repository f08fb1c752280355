"""The HTML report of a session: what the pruner did, call by call (``pi-condense report``).

:func:`~pi_condense.report.data.collect` computes the figures (no plotting library needed);
:func:`~pi_condense.report.html.render_html` draws them with plotly (the ``[report]`` extra).
"""

from __future__ import annotations

from .data import Call, Recovery, ReportData, collect, common_prefix_chars
from .html import SECTIONS, ReportExtraMissing, render_html

__all__ = [
    "SECTIONS",
    "Call",
    "Recovery",
    "ReportData",
    "ReportExtraMissing",
    "collect",
    "common_prefix_chars",
    "render_html",
]

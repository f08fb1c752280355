"""What the pruner did: the condense figures and the HTML report of a session.

:mod:`~pi_condense.report.condense` computes the figures ``pi-condense condense --json``
prints; :func:`~pi_condense.report.data.collect` computes the HTML report's figures (no
plotting library needed); :func:`~pi_condense.report.html.render_html` draws them with plotly
(the ``[report]`` extra).

The names below are imported on first use (PEP 562): the ``condense`` command imports
:mod:`.condense` without the HTML report's modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_names

if TYPE_CHECKING:
    from .data import Call, Recovery, ReportData, collect, common_prefix_chars
    from .html import SECTIONS, ReportExtraMissing, render_html

_HOME = {
    "Call": "data",
    "Recovery": "data",
    "ReportData": "data",
    "collect": "data",
    "common_prefix_chars": "data",
    "SECTIONS": "html",
    "ReportExtraMissing": "html",
    "render_html": "html",
}

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

# The submodules, also reachable as attributes (`pi_condense.report.html`).
__getattr__, __dir__ = lazy_names(__name__, globals(), _HOME, ("condense", "data", "html"))

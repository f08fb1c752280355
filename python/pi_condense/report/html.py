"""The report as one self-contained HTML file: plotly's JavaScript is inlined, nothing is
fetched when the page is viewed. Needs the ``[report]`` extra (plotly)."""

from __future__ import annotations

import html
from typing import Any

from ..status import cc, format_cost
from .condense import chars_change, per_call_chars
from .data import ReportData

__all__ = ["SECTIONS", "ReportExtraMissing", "render_html"]

SECTIONS = (
    "Context per model call",
    "Biggest tool outputs",
    "Summarizer",
    "Recovered refs",
)
"""The report's sections, in page order."""


class ReportExtraMissing(ImportError):
    """plotly is not installed."""


def _plotly() -> Any:
    try:
        import plotly.graph_objects as go
        import plotly.offline
    except ImportError as exc:
        raise ReportExtraMissing(
            'the report needs plotly: pip install "pi-condense[report]"'
        ) from exc
    return go, plotly.offline


# Before anything else runs, the page starts recording console errors and uncaught
# exceptions; once loaded it writes them, and each chart's id with the point count of each
# trace, into attributes of <body>, so a headless browser's DOM dump can be checked.
_PROBE = """
<script>
(function () {
  var errors = [];
  var original = console.error;
  function record(text) {
    errors.push(text);
    if (document.body) {
      document.body.setAttribute("data-console-errors", String(errors.length));
    }
  }
  console.error = function () {
    record(Array.prototype.join.call(arguments, " "));
    return original.apply(console, arguments);
  };
  window.addEventListener("error", function (event) { record(String(event.message)); });
  window.addEventListener("load", function () {
    var counts = [];
    document.querySelectorAll(".js-plotly-plot").forEach(function (plot) {
      var points = (plot.data || []).map(function (trace) {
        return trace.name + "=" + ((trace.x || trace.y || []).length);
      });
      counts.push(plot.id + ":" + points.join(","));
    });
    document.body.setAttribute("data-console-errors", String(errors.length));
    document.body.setAttribute("data-charts", counts.join(";"));
    document.body.setAttribute("data-ready", "1");
  });
})();
</script>
"""

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; }
table { border-collapse: collapse; font-size: 0.85em; width: 100%; }
td, th { border-bottom: 1px solid #ddd; padding: 4px 6px; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
.facts { display: flex; gap: 2em; flex-wrap: wrap; }
.facts div { background: #f4f6f8; padding: 0.6em 1em; border-radius: 6px; }
"""


def _figure_div(fig: Any, div_id: str, offline: Any) -> str:
    del offline
    config = {"displaylogo": False, "responsive": True}
    return str(fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id, config=config))


def _context_figure(data: ReportData, go: Any) -> Any:
    x = list(range(len(data.calls)))
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=x, y=[c.raw for c in data.calls], name="raw", mode="lines"))
    fig.add_trace(go.Scatter(x=x, y=[c.sent for c in data.calls], name="condensed", mode="lines"))
    fig.add_trace(
        go.Scatter(
            x=x,
            y=[c.cached_prefix for c in data.calls],
            name="cache prefix kept",
            mode="lines",
            line={"dash": "dot"},
        )
    )
    for name, calls, symbol in (
        ("flush", data.flush_calls, "triangle-down"),
        ("chain compression", data.chain_calls, "x"),
    ):
        fig.add_trace(
            go.Scatter(
                x=calls,
                y=[data.calls[i].sent for i in calls] if data.calls else [],
                name=name,
                mode="markers",
                marker={"symbol": symbol, "size": 9},
            )
        )
    fig.update_layout(
        xaxis_title="model call",
        yaxis_title="context chars",
        height=460,
        margin={"t": 30},
        legend={"orientation": "h"},
    )
    return fig


def _outputs_figure(data: ReportData, go: Any) -> Any:
    labels = [f"{row['ref']} {row['tool']}" for row in data.outputs]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=labels, y=[row["chars"] for row in data.outputs], name="raw chars"))
    fig.add_trace(
        go.Bar(x=labels, y=[row["summaryChars"] for row in data.outputs], name="its summary")
    )
    fig.update_layout(barmode="group", height=380, margin={"t": 30}, yaxis_title="chars")
    return fig


def _summarizer_figure(data: ReportData, go: Any) -> Any:
    x = [f"#{i + 1}" for i in range(len(data.summarizer))]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=x, y=[u["inputTokens"] for u in data.summarizer], name="input tokens"))
    fig.add_trace(go.Bar(x=x, y=[u["outputTokens"] for u in data.summarizer], name="output tokens"))
    fig.add_trace(
        go.Scatter(
            x=x,
            y=[u["calls"] for u in data.summarizer],
            name="calls",
            mode="markers",
            yaxis="y2",
        )
    )
    tokens = max((u["inputTokens"] + u["outputTokens"] for u in data.summarizer), default=0)
    calls = max((u["calls"] for u in data.summarizer), default=0)
    # Counts are whole: ticks at integers only, both axes from 0 (with no tokens at all, as
    # with the offline summarizer, plotly would centre an empty axis on 0: -1..1).
    yaxis: dict[str, Any] = {"title": "tokens", "rangemode": "tozero", "tickformat": ",d"}
    if tokens == 0:
        yaxis.update(title="tokens (none used)", range=[0, 1], dtick=1)
    fig.update_layout(
        barmode="stack",
        yaxis=yaxis,
        yaxis2={
            "title": "calls",
            "overlaying": "y",
            "side": "right",
            "rangemode": "tozero",
            "tickformat": "d",
            "dtick": max(1, -(-calls // 5)),
        },
        height=320,
        margin={"t": 30, "r": 70},  # room for the right axis's title
        xaxis_title="stats update (a flush or a compression)",
    )
    return fig


def _recovery_figure(data: ReportData, go: Any) -> Any:
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=[r.call for r in data.recoveries],
            y=[r.since_stub if r.since_stub is not None else -1 for r in data.recoveries],
            text=[r.ref for r in data.recoveries],
            name="user-turn groups since stubbed",
            mode="markers",
        )
    )
    fig.update_layout(height=300, margin={"t": 30}, xaxis_title="model call")
    return fig


def _table(rows: list[dict[str, Any]]) -> str:
    head = "<tr><th>ref</th><th>tool</th><th>args</th><th>chars</th><th>became</th></tr>"
    body = "".join(
        "<tr>"
        f"<td>{html.escape(str(r['ref']))}</td><td>{html.escape(str(r['tool']))}</td>"
        f"<td>{html.escape(str(r['args']))}</td><td class=n>{r['chars']:,}</td>"
        f"<td>{html.escape(str(r['fate']))}</td></tr>"
        for r in rows
    )
    return f"<table>{head}{body}</table>"


def render_html(data: ReportData) -> str:
    """The report page for ``data`` (raises :class:`ReportExtraMissing` without plotly)."""
    go, offline = _plotly()
    calls = data.calls
    per_call = per_call_chars([(c.raw, c.sent) for c in calls])
    stats = data.stats
    # The same figures, labels and wording as `pi-condense condense` prints for the same run.
    facts = [
        ("model calls", f"{len(calls):,}"),
        ("chars per call (avg)", chars_change(per_call["beforeChars"], per_call["afterChars"])),
        (
            "chars at the last call",
            f"{per_call['lastBeforeChars']:,} -> {per_call['lastAfterChars']:,}" if calls else "-",
        ),
        ("flushes", str(len(data.flush_calls))),
        ("batches summarized", str(data.summaries)),
        ("chain compressions", str(stats.get("chainsCompressed", 0))),
        ("summarizer calls", str(stats.get("callCount", 0))),
        (
            "summarizer tokens",
            f"{cc(stats.get('totalInputTokens', 0))} in / "
            f"{cc(stats.get('totalOutputTokens', 0))} out",
        ),
        ("summarizer cost", format_cost(stats.get("totalCost", 0))),
    ]
    how = (
        "replayed through the pruner (offline summarizer unless --summarizer is given)"
        if data.replayed
        else "measured from the pruner entries the session already holds"
    )
    recoveries = (
        _figure_div(_recovery_figure(data, go), "recoveries", offline)
        + "<p>"
        + ", ".join(
            html.escape(
                f"{r.ref}: {r.since_stub} UTG after its stub"
                + (
                    f", {r.since_previous_query} UTG after its previous query"
                    if r.since_previous_query is not None
                    else ""
                )
            )
            for r in data.recoveries
        )
        + "</p>"
        if data.recoveries
        else "<p>The model recovered no ref with context_tree_query in this session.</p>"
    )
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>pi-condense report: {html.escape(data.title)}</title>",
        f"<style>{_STYLE}</style>",
        _PROBE,
        f"<script>{offline.get_plotlyjs()}</script>",
        "</head><body>",
        f"<h1>pi-condense report: {html.escape(data.title)}</h1>",
        f"<p>The session was {how}.</p>",
        "<div class=facts>",
        "".join(f"<div><b>{k}</b><br>{html.escape(v)}</div>" for k, v in facts),
        "</div>",
        f"<h2>{SECTIONS[0]}</h2>",
        "<p>What each model call was sent, raw and condensed; the dotted line is the prefix "
        "of the request that matches the previous request (what a provider's prompt cache can "
        "reuse); markers show where summaries were written and chains compressed.</p>",
        _figure_div(_context_figure(data, go), "context", offline),
        f"<h2>{SECTIONS[1]}</h2>",
        _figure_div(_outputs_figure(data, go), "outputs", offline),
        _table(data.outputs),
        f"<h2>{SECTIONS[2]}</h2>",
        _figure_div(_summarizer_figure(data, go), "summarizer", offline),
        f"<h2>{SECTIONS[3]}</h2>",
        "<p>Refs queried with context_tree_query and how many user-turn groups (UTG) after "
        "their stub (spec 00's re-query gap).</p>",
        recoveries,
        "</body></html>",
    ]
    return "\n".join(parts)

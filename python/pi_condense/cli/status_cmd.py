"""`pi-condense status` and `pi-condense stats`: the `/pruner status` and `/pruner stats` texts
over a session file, plus the facts a user asks first (sizes, refs, summaries, what is pending).

Read-only: the pruner state is rebuilt from the branch's ``context-prune-*`` entries as a
reload does (the reload probe decides ``rearmed``), and nothing is written.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from ..config import BATCHING_MODES, PRUNE_ON_MODES, SUMMARIZER_THINKING_LEVELS, Config
from ..js import json as jsjson
from ..js import time as jstime
from ..js.values import js_round
from ..render import render
from ..session import SessionFile
from ..session_stats import raw_conversation, stats_report
from ..state import Stats
from ..status import cc, format_cost
from ._common import (
    check_leaf,
    compat_option,
    config_option,
    exit_for_warnings,
    json_option,
    leaf_option,
    load_cli_config,
    out,
    print_warnings,
    read_session,
    strict_option,
)

__all__ = ["register", "session_facts", "stats_text", "status_text"]

SUMMARY = "context-prune-summary"

_SESSION_HELP = "Pi session file (.jsonl or .jsonl.gz)."


def _label(table: tuple[tuple[str, str], ...], value: str) -> str:
    return next((label for v, label in table if v == value), value)


def _timeout(ms: int) -> str:
    return "disabled" if ms == 0 else f"{js_round(ms / 1000)}s"


def _tokens(chars: int) -> int:
    return (chars + 2) // 4


# --------------------------------------------------------------------------------- facts


def _summaries(branch: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        e for e in branch if e.get("type") == "custom_message" and e.get("customType") == SUMMARY
    ]


def session_facts(session: SessionFile, config: Config, leaf: Optional[str]) -> dict[str, Any]:
    """What `status` reports beyond the settings: the reload's stats, metrics and ``rearmed``
    flag, the context sizes raw and rendered, refs, summaries, chains and pending work."""
    from ..condenser import Condenser  # the pipeline is loaded only when the command runs

    if leaf is not None:
        session.set_leaf(leaf)
    condenser = Condenser(session, config)
    condenser.session_start()
    rt = condenser.runtime
    messages = session.build_context().messages
    conversation = raw_conversation(messages)
    raw = jsjson.length(conversation)
    rendered = render(messages, rt.state, config)
    after = rendered.after_chars if rendered.pruned else jsjson.length(messages)
    pending = condenser.capture_pending()
    calls = [call for batch in pending for call in batch.tool_calls]
    branch = session.branch()
    return {
        "stats": dict(condenser.stats),
        "metrics": dict(rt.metrics_cache) if rt.metrics_cache is not None else None,
        "rearmed": condenser.rearmed,
        "context": {
            "messages": len(conversation),
            "rawChars": raw,
            "rawTokens": _tokens(raw),
            "renderedMessages": len(rendered.messages),
            "renderedChars": after,
            "renderedTokens": _tokens(after),
        },
        "settingsEnabled": config.enabled,
        "refs": int(rt.state.next_short_ref_number) - 1,
        "summaries": len(_summaries(branch)),
        "chainsCompressed": len(rt.state.chain_entries()),
        "pending": {
            "batches": len(pending),
            "toolCalls": len(calls),
            "rawChars": sum(jsjson.utf16_len(str(c.get("resultText", ""))) for c in calls),
        },
    }


def status_text(config: Config, facts: dict[str, Any]) -> str:
    """The reference's ``/pruner status`` notification (spec 09 section 2.1)."""
    thinking = config.summarizer_thinking
    lines = [
        "pruner status:",
        f"  enabled:  {'true' if config.enabled else 'false'}",
        f"  model:    {config.summarizer_model}",
        f"  thinking: {_label(SUMMARIZER_THINKING_LEVELS, thinking)} ({thinking})",
        f"  idle to:  {_timeout(config.summarizer_idle_timeout_ms)}",
        f"  max to:   {_timeout(config.summarizer_max_timeout_ms)}",
        f"  trigger:  {_label(PRUNE_ON_MODES, config.prune_on)}",
        f"  batching: {_label(BATCHING_MODES, config.batching_mode)} ({config.batching_mode})",
        f"  dedup:    {'on' if config.dedup_by_content_hash else 'off'}",
        f"  status:   {'on' if config.show_prune_status_line else 'off'}",
    ]
    stats = facts["stats"]
    if stats["callCount"] > 0:
        lines += [
            "  --- summarizer ---",
            f"  calls:       {stats['callCount']}",
            f"  input:       {cc(stats['totalInputTokens'])} tokens",
            f"  output:      {cc(stats['totalOutputTokens'])} tokens",
            f"  cost:        {format_cost(stats['totalCost'])}",
        ]
    else:
        lines.append("  (no summarizer calls yet)")
    metrics = facts["metrics"]
    if metrics is not None:
        lines += [
            "  --- context ---",
            f"  thinking:     {cc(metrics['openCycleThinkingTokens'])} tokens (open segment)",
            f"  chain share:  {metrics['largestChainSharePct']}%",
            f"  frontier gap: {cc(metrics['frontierGapTokens'])} tokens",
        ]
        if facts["rearmed"]:
            lines.append("  rearmed:      yes")
    return "\n".join(lines)


def _session_lines(facts: dict[str, Any]) -> str:
    """Ours, after the reference's text: the live facts of the session file."""
    context = facts["context"]
    pending = facts["pending"]
    raw, after = context["rawChars"], context["renderedChars"]
    smaller = f" ({(raw - after) / raw * 100:.1f}% smaller)" if raw > 0 and after < raw else ""
    waiting = (
        f"{pending['batches']} batch(es), {pending['toolCalls']} tool call(s), "
        f"{pending['rawChars']:,} raw chars"
        if pending["batches"]
        else "nothing"
    )
    return "\n".join(
        [
            "  --- session ---",
            f"  context raw:      {raw:,} chars (~{context['rawTokens']:,} tokens), "
            f"{context['messages']} messages",
            f"  context rendered: {after:,} chars (~{context['renderedTokens']:,} tokens), "
            f"{context['renderedMessages']} messages{smaller}",
            f"  refs:             {facts['refs']}",
            f"  summaries:        {facts['summaries']}",
            f"  chains:           {facts['chainsCompressed']} compressed",
            f"  pending:          {waiting}",
            *_pruned_by(facts),
        ]
    )


def _pruned_by(facts: dict[str, Any]) -> list[str]:
    """A session a hook or the CLI pruned, read with Pi's settings off: say who did what."""
    if facts["settingsEnabled"] or not (facts["summaries"] or facts["chainsCompressed"]):
        return []
    return [
        "  pruned by:        a pruner with its own settings (a hook, `pi-condense condense`,",
        "                    or Pi; the session does not record them): 'enabled: false'",
        "                    above is the settings file's value, for Pi's own runs",
    ]


def stats_text(stats: Stats) -> str:
    """The reference's ``/pruner stats`` notification (spec 09 section 2.2)."""
    if stats["callCount"] == 0 and stats["chainsCompressed"] == 0:
        return "pruner stats: no summarizer calls yet."
    text = (
        "pruner stats:\n"
        f"  calls:       {stats['callCount']}\n"
        f"  input:       {cc(stats['totalInputTokens'])} tokens\n"
        f"  output:      {cc(stats['totalOutputTokens'])} tokens\n"
        f"  cost:        {format_cost(stats['totalCost'])}"
    )
    if stats["chainsCompressed"] > 0:
        text += f"\n  chains:      {stats['chainsCompressed']} compressed"
    return text


# ------------------------------------------------------------------------------ commands


def _open(path: Path, leaf: Optional[str]) -> SessionFile:
    session = read_session(path)
    check_leaf(session, path, leaf)
    print_warnings(session, path)
    return session


def status_command(
    session_file: Path = typer.Argument(..., metavar="SESSION", help=_SESSION_HELP),
    config_file: Optional[Path] = config_option(),
    compat: Optional[str] = compat_option(),
    leaf: Optional[str] = leaf_option(),
    as_json: bool = json_option(),
    strict: bool = strict_option(),
) -> None:
    """The pruner's settings, summarizer totals and context metrics (/pruner status), then
    the session's context size raw and rendered, refs, summaries, chains and pending work."""
    config = load_cli_config(config_file, compat)
    session = _open(session_file, leaf)
    facts = session_facts(session, config, leaf)
    if as_json:
        report = {"file": str(session_file), "config": config.to_settings_dict(), **facts}
        report["text"] = status_text(config, facts)
        sys.stdout.write(jsjson.dumps(report, 2) + "\n")
    else:
        out.print(status_text(config, facts), markup=False)
        out.print(_session_lines(facts), markup=False)
    exit_for_warnings(session, strict)


def _when(stamp: Any) -> str:
    if not isinstance(stamp, (int, float)):
        return "-"
    return jstime.to_iso_string(float(stamp))[:19].replace("T", " ")


def stats_command(
    session_file: Path = typer.Argument(..., metavar="SESSION", help=_SESSION_HELP),
    leaf: Optional[str] = leaf_option(),
    as_json: bool = json_option(),
    strict: bool = strict_option(),
) -> None:
    """Cumulative summarizer stats (/pruner stats) and one row per summarized batch."""
    session = _open(session_file, leaf)
    if leaf is not None:
        session.set_leaf(leaf)
    report = stats_report(session)
    text = stats_text(report["stats"])
    if as_json:
        sys.stdout.write(
            jsjson.dumps({"file": str(session_file), **report, "text": text}, 2) + "\n"
        )
        exit_for_warnings(session, strict)
        return
    out.print(text, markup=False)
    if report["batches"]:
        table = Table(title="summarized batches", title_justify="left")
        for column in ("#", "turn", "at (UTC)", "refs", "calls", "raw", "summary", "flush"):
            table.add_column(
                column,
                justify="left" if column in ("at (UTC)", "refs") else "right",
                no_wrap=True,
            )
        for number, batch in enumerate(report["batches"], 1):
            refs = batch["refs"]
            shown = ", ".join(refs) if len(refs) <= 2 else f"{refs[0]}\u2026{refs[-1]}"
            table.add_row(
                str(number),
                str(batch["turnIndex"]),
                _when(batch["timestamp"]),
                shown,
                str(batch["toolCalls"]),
                f"{batch['rawChars']:,}",
                f"{batch['summaryChars']:,}",
                str(batch["flush"]),
            )
        out.print(table)
    exit_for_warnings(session, strict)


def register(app: typer.Typer) -> None:
    """Add `status` and `stats` to the `pi-condense` app."""
    app.command("status")(status_command)
    app.command("stats")(stats_command)

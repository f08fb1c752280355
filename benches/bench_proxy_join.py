"""A late join through the proxy: the first request of a conversation that is already long,
with ``--join flush`` (the default) and ``--join defer``, against a pass-through proxy.

Usage (from the repository root; not part of the gate)::

    python benches/bench_proxy_join.py                  # 1k and 10k messages, 3 rounds
    python benches/bench_proxy_join.py --prompts 1000 --rounds 2

The servers, the history (``--prompts`` prompts of four ``read`` calls: 1k messages a 100)
and the loopback upstream are ``bench_proxy.py``'s, in this process. Each round sends a new
conversation (its own system prompt, so the proxies have no session for it) to the
pass-through proxy, a flushing ``pi-condense proxy`` and a deferring one, in turn, then the
next request (one more prompt) of the two pi-condense conversations. Printed per request:
the process CPU time (client, proxies and upstream: all in this process) as ratios to the
pass-through request's and to the flushing join's first request in the same round, the wall
time, and the part of the client's bytes the upstream received.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import httpx
from starlette.applications import Starlette
from starlette.routing import Route

from bench_proxy import RECEIVED, Served, _pass_through, _upstream, history
from pi_condense.live import JoinMode
from pi_condense.proxy import ProxySettings, create_app

JOINS: tuple[JoinMode, ...] = ("flush", "defer")
HEADERS = {"content-type": "application/json", "authorization": "Bearer x"}


def _send(client: httpx.Client, url: str, items: list[Any]) -> tuple[float, float, float]:
    """(CPU s, wall s, the upstream's bytes / the client's) of one request."""
    body = json.dumps({"model": "m", "messages": items}).encode()
    cpu, wall = time.process_time(), time.perf_counter()
    response = client.post(url + "/v1/chat/completions", content=body, headers=HEADERS)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    assert response.status_code == 200, response.text[:200]
    return cpu, wall, RECEIVED["bytes"] / len(body)


def run(prompts: int, rounds: int) -> None:
    directory = Path(tempfile.mkdtemp(prefix="bench-proxy-join-"))
    upstream = Served(
        Starlette(routes=[Route("/v1/chat/completions", _upstream, methods=["POST"])])
    )
    plain = Served(_pass_through(upstream.url + "/v1/chat/completions"))
    proxies = {
        join: Served(
            create_app(
                ProxySettings(
                    openai_base_url=upstream.url + "/v1",
                    sessions_dir=directory / join,
                    join=join,
                )
            )
        )
        for join in JOINS
    }
    print(f"{prompts} prompts ({len(history(prompts))} messages), {rounds} rounds")
    with httpx.Client(trust_env=False, timeout=900) as client:
        for r in range(rounds):
            rows: list[tuple[str, tuple[float, float, float]]] = []
            for name, url in (
                ("pass-through", plain.url),
                *((j, s.url) for j, s in proxies.items()),
            ):
                items = history(prompts)
                items[0] = {"role": "system", "content": f"be careful ({name}, round {r})"}
                rows.append((f"{name}, first", _send(client, url, items)))
                if name != "pass-through":
                    items += [
                        {"role": "assistant", "content": "ok"},
                        {"role": "user", "content": "and?"},
                    ]
                    rows.append((f"{name}, next", _send(client, url, items)))
            base, flush = rows[0][1][0], rows[1][1][0]
            for label, (cpu, wall, part) in rows:
                print(
                    f"  round {r} {label:<20} cpu {cpu:6.3f} s ({cpu / base:5.1f}x the "
                    f"pass-through, {cpu / flush:4.2f}x the flush)  wall {wall:6.3f} s  "
                    f"upstream got {part:.2f} of the bytes"
                )
    for served in (*proxies.values(), plain, upstream):
        served.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    for prompts in args.prompts:
        run(prompts, args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())

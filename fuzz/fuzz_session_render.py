"""Atheris fuzz target: the session parser and the render on arbitrary bytes.

Any input must either load (possibly with warnings) or raise ``SessionError``; a loaded
session's context must render without an exception. Run (not in CI):

    python -m venv /tmp/fuzz && /tmp/fuzz/bin/pip install atheris
    PYTHONPATH=python:<site-packages of an env with pi-condense's deps> \\
        /tmp/fuzz/bin/python fuzz/fuzz_session_render.py fuzz/corpus -max_total_time=60
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports(include=["pi_condense"]):
    from pi_condense.config import Config
    from pi_condense.errors import SessionError
    from pi_condense.render import render
    from pi_condense.session import SessionFile
    from pi_condense.state import PrunerState

CONFIG = Config.from_settings_dict({"enabled": True})


def one_input(data: bytes) -> None:
    try:
        session = SessionFile.parse(data)
    except SessionError:
        return
    messages = session.build_context().messages
    render(messages, PrunerState.from_session(session), CONFIG)


def main() -> None:
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()

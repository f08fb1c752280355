"""A stand-in for Pi's session writer: ``appendFileSync`` of whole JSON lines, no lock.

Run as ``python _appender.py SESSION ACK COUNT [PAUSE_S]``: appends COUNT ``message`` entries
(ids ``pi<n>``), each with one open(O_APPEND) + write + close as Node's appendFileSync does,
and after each write records ``n`` in ACK (so a killed run says what it acknowledged).
COUNT 0 means until killed; an existing ACK continues the numbering after it.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time


def pi_line(n: int, parent: str | None) -> bytes:
    entry = {
        "type": "message",
        "id": f"pi{n:06d}",
        "parentId": parent,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "message": {"role": "user", "content": f"from pi {n}", "timestamp": 1767225600000 + n},
    }
    return (json.dumps(entry, separators=(",", ":")) + "\n").encode()


def main() -> None:
    session, ack, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    pause = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    parent: str | None = None
    n = 0
    if os.path.exists(ack):  # a restarted appender continues its numbering
        with open(ack) as handle:
            n = int(handle.read()) + 1
        # A kill between the write and the acknowledgement leaves one line unacknowledged:
        # continue after it, or its id would be written twice.
        with open(session, "rb") as handle:
            written = [int(m) for m in re.findall(rb'"id":"pi(\d{6})"', handle.read())]
        n = max([n, *(w + 1 for w in written)])
        parent = f"pi{n - 1:06d}"
    end = n + count
    while count == 0 or n < end:
        fd = os.open(session, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, pi_line(n, parent))
        finally:
            os.close(fd)
        with open(ack + ".tmp", "w") as handle:
            handle.write(str(n))
        os.replace(ack + ".tmp", ack)
        parent = f"pi{n:06d}"
        n += 1
        if pause:
            time.sleep(pause)


if __name__ == "__main__":
    main()

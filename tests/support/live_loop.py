"""A live Condenser loop on a session file, for the kill campaign.

``python _live_loop.py SESSION ACK START`` appends turns (an assistant tool call, its result)
through a Condenser (turn_end after each, a flush every third turn) until killed; after each
append the entry id is added to ACK (one per line, written after the append returned).
"""

from __future__ import annotations

import asyncio
import sys

from pi_condense import Condenser
from pi_condense.config import Config
from pi_condense.summarize.factory import make_summarizer


async def main() -> None:
    session_path, ack, start = sys.argv[1], sys.argv[2], int(sys.argv[3])
    config = Config.from_settings_dict({"enabled": True, "minBatchChars": 0})
    condenser = Condenser.open(session_path, config, summarizer=make_summarizer("default"))
    condenser.session_start()
    session = condenser.session
    with open(ack, "a", encoding="utf-8") as log:
        for turn in range(start, start + 10_000):
            call_id = f"live{turn}"
            call = {"type": "toolCall", "id": call_id, "name": "read", "arguments": {"n": turn}}
            message = {"role": "assistant", "content": [call], "stopReason": "toolUse"}
            message["timestamp"] = 1767225600000 + turn * 10
            result = {
                "role": "toolResult",
                "toolCallId": call_id,
                "toolName": "read",
                "content": [{"type": "text", "text": f"output {turn} " + "y" * 800}],
                "isError": False,
                "timestamp": 1767225600000 + turn * 10 + 1,
            }
            for entry in (message, result):
                log.write(session.append_message(entry) + "\n")
                log.flush()
            await condenser.turn_end(message, [result], turn)
            if turn % 3 == 2:
                await condenser.flush_now()


if __name__ == "__main__":
    asyncio.run(main())

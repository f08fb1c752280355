"""The per-request image cap (``maxImagesPerRequest``, pi-condense 2.11.0).

The cases of the reference's src/image-cap.test.ts (2.11.x), and the cap in the live Condenser.
"""

from __future__ import annotations

import warnings
from typing import Any

from pi_condense.condenser import Condenser
from pi_condense.errors import CondenseWarning
from pi_condense.image_cap import IMAGE_OMITTED_NOTE, cap_images, image_limit
from support.agent import config, new_session


def image(n: int) -> dict[str, Any]:
    return {"type": "image", "data": f"img{n}", "mimeType": "image/png"}


def images_of(messages: list[Any]) -> list[Any]:
    return [b for m in messages for b in m.get("content", []) if b.get("type") == "image"]


def reads(count: int) -> list[dict[str, Any]]:
    return [
        {"role": "toolResult", "content": [{"type": "text", "text": "read"}, image(n)]}
        for n in range(count)
    ]


def test_the_oldest_images_go_in_steps_of_half_the_cap() -> None:
    out = cap_images(reads(31), 30)
    assert out is not None
    assert [b["data"] for b in images_of(out)] == [f"img{n + 15}" for n in range(16)]
    assert out[0]["content"] == [
        {"type": "text", "text": "read"},
        {"type": "text", "text": IMAGE_OMITTED_NOTE},
    ]


def test_the_omitted_prefix_is_stable_within_a_step() -> None:
    def omitted(count: int) -> int:
        out = cap_images(reads(count), 20) or reads(count)
        return sum(1 for m in out if m["content"][1]["type"] == "text")

    assert [omitted(n) for n in (20, 21, 25, 30, 31, 40, 41)] == [0, 10, 10, 10, 20, 20, 30]


def test_images_within_one_message_count_newest_last_and_the_input_is_kept() -> None:
    messages = [{"role": "user", "content": [image(1), image(2), image(3)]}]
    out = cap_images(messages, 2)
    assert out is not None
    assert [b.get("data", b.get("text")) for b in out[0]["content"]] == [
        IMAGE_OMITTED_NOTE,
        "img2",
        "img3",
    ]
    assert len(images_of(messages)) == 3
    under = [{"role": "user", "content": [image(1)]}, {"role": "assistant", "content": "text"}]
    assert cap_images(under, 5) is None


def test_the_limit_is_the_setting_else_the_apis_own() -> None:
    assert image_limit(30, "anthropic-messages") == 30
    assert image_limit(None, "anthropic-messages") == 100
    assert image_limit(None, "openai-completions") is None
    assert image_limit(None, None) is None


def test_the_condenser_caps_images_even_with_pruning_disabled() -> None:
    messages = reads(3)
    off = Condenser(new_session(), config(enabled=False, maxImagesPerRequest=2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CondenseWarning)
        result = off.context(messages)
    assert result.pruned
    assert [b["data"] for b in images_of(result.messages)] == ["img1", "img2"]
    assert len(images_of(messages)) == 3  # the caller's list is left alone
    on = Condenser(new_session(), config(), model_api="anthropic-messages")
    # User messages: tool results without their calls would be swept by the render.
    many = [{"role": "user", "content": [image(n)], "timestamp": n} for n in range(101)]
    capped = on.context(many)
    assert len(images_of(capped.messages)) == 51  # 100 per request, steps of 50
    assert on.context(many[:100]).pruned is False
    assert Condenser(new_session(), config()).context(many).messages is many  # no API limit

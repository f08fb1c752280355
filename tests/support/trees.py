"""Comparing JSON values strictly: equal, with the same types and key order everywhere."""

from __future__ import annotations

import math
from typing import Any


def same_tree(a: Any, b: Any) -> bool:
    """Equal, with the same types everywhere and dicts in the same key order (NaN equal to
    NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same_tree(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(same_tree, a, b))
    return bool(a == b) or (isinstance(a, float) and math.isnan(a) and math.isnan(b))

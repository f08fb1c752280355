"""The resumable result cache: one JSON file per finished task, written atomically.

A task's key is the SHA-256 of the session file's bytes plus a digest of everything else its
result depends on (the task kind, the config, the summarizer, the package version). Results
are written by the worker that computed them the moment they are ready, so a run killed part
way keeps everything it finished; the next run finds those and computes only the rest. On a
cluster the cache directory must be one the workers share.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
from pathlib import Path
from typing import Any, Optional

import orjson

from .._core import __version__

__all__ = ["ResultCache", "default_cache_dir", "digest"]

_ENV_CACHE = "PI_CONDENSE_CACHE_DIR"


def default_cache_dir() -> Path:
    """``$PI_CONDENSE_CACHE_DIR``, else ``$XDG_CACHE_HOME/pi-condense/corpus``, else
    ``~/.cache/pi-condense/corpus``."""
    configured = os.environ.get(_ENV_CACHE)
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME")
    root = Path(base).expanduser() if base else Path.home() / ".cache"
    return root / "pi-condense" / "corpus"


def digest(*parts: Any) -> str:
    """A short stable digest of JSON-able ``parts`` and the package version."""
    data = orjson.dumps([__version__, *parts], option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(data).hexdigest()[:24]


class ResultCache:
    """Results by (kind, content hash, config digest) under ``root``."""

    def __init__(self, root: os.PathLike[str] | str) -> None:
        self.root = Path(root)

    def _file(self, kind: str, content_hash: str, config_key: str) -> Path:
        return self.root / kind / content_hash[:2] / f"{content_hash}-{config_key}.json"

    def get(self, kind: str, content_hash: str, config_key: str) -> Optional[dict[str, Any]]:
        """The stored result, or None (also for an unreadable or torn file)."""
        try:
            value = orjson.loads(self._file(kind, content_hash, config_key).read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return None
        return value if isinstance(value, dict) else None

    def put(self, kind: str, content_hash: str, config_key: str, value: dict[str, Any]) -> None:
        """Store ``value`` atomically (a reader sees the old file, or the whole new one)."""
        target = self._file(kind, content_hash, config_key)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
        try:
            tmp.write_bytes(orjson.dumps(value))
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise

    def count(self, kind: Optional[str] = None) -> int:
        """Stored results (of one kind)."""
        base = self.root / kind if kind else self.root
        return sum(1 for _ in base.glob("**/*.json")) if base.is_dir() else 0

"""Where Pi keeps its settings (``$PI_CODING_AGENT_DIR``, ``~/.pi/agent``) and loading and
saving the ``contextPrune`` block of ``settings.json`` without touching the other keys."""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional, Union

from .._fs.atomic import read_regular, write_atomic
from ..errors import ConfigError, JsonError
from ..js import json as jsjson
from ..js.values import MISSING
from ._common import type_name
from .defaults import ENV_AGENT_DIR, SETTINGS_KEY, Compat
from .models import Config, normalize_settings

__all__ = [
    "agent_dir",
    "load_config",
    "save_config",
    "settings_path",
]


def _home(env: Mapping[str, str]) -> Path:
    home = env.get("USERPROFILE") if os.name == "nt" else env.get("HOME")
    return Path(home) if home else Path.home()


def agent_dir(env: Optional[Mapping[str, str]] = None) -> Path:
    """Pi's agent directory: ``$PI_CODING_AGENT_DIR`` (``~`` / ``~/`` expanded), else
    ``~/.pi/agent``. ``env`` defaults to ``os.environ``, read at every call."""
    environ: Mapping[str, str] = os.environ if env is None else env
    configured = environ.get(ENV_AGENT_DIR)
    if configured:
        if configured == "~":
            return _home(environ)
        if configured.startswith("~/"):
            return _home(environ) / configured[2:]
        return Path(configured)
    return _home(environ) / ".pi" / "agent"


def settings_path(env: Optional[Mapping[str, str]] = None) -> Path:
    """``<agent_dir>/settings.json``."""
    return agent_dir(env) / "settings.json"


def _read_json_object(path: Path) -> tuple[Optional[dict[str, Any]], Optional[str]]:
    """The parsed file and, when it is present but unusable, why."""
    try:
        raw = read_regular(path)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"cannot read it ({exc.strerror or exc})"
    try:
        parsed = jsjson.loads(raw)
    except JsonError as exc:
        return None, f"not valid JSON ({exc})"
    if not isinstance(parsed, dict):
        return None, f"the root is {type_name(parsed)}, not an object"
    return parsed, None


def load_config(
    path: Union[str, os.PathLike[str], None] = None, *, compat: Optional[Compat] = None
) -> Config:
    """Load the ``contextPrune`` block of ``path`` (default: ``settings_path()``).

    A missing or unreadable file, invalid JSON, a non-object root, or a missing or
    non-object ``contextPrune`` gives the defaults; the reason (if any) is in
    ``Config.warnings``. Only a value we refuse to guess at (default mode: a wrong-typed
    list or nested object) raises ``ConfigError``, naming the file and key.
    """
    file = Path(path) if path is not None else settings_path()
    settings, problem = _read_json_object(file)
    block = settings.get(SETTINGS_KEY, MISSING) if settings is not None else MISSING
    if isinstance(block, dict):
        try:
            return normalize_settings(block, compat)
        except ConfigError as exc:
            raise ConfigError(f"{file}: {exc}") from exc
    config = normalize_settings({}, compat)
    if problem is not None:
        config._warnings = (f"{file}: {problem}; using the defaults",)
    elif block is not MISSING:
        config._warnings = (
            f"{file}: {SETTINGS_KEY} is {type_name(block)}, not an object; using the defaults",
        )
    return config


def save_config(config: Config, path: Union[str, os.PathLike[str], None] = None) -> Path:
    """Write ``config`` as the ``contextPrune`` block of ``path`` (default:
    ``settings_path()``), keeping every other top-level key in place. Returns the path.

    The file is re-read first; the new text goes to ``<path>.<16 hex>.tmp``, is fsynced and
    renamed over ``path``. An existing file that is not a JSON object (unreadable, truncated,
    another type) is left untouched and ``ConfigError`` is raised, in both modes: only a
    missing file starts from empty (pi-condense 2.10.4; 2.9.1 replaced it with ``{}``).
    """
    file = Path(path) if path is not None else settings_path()
    current, problem = _read_json_object(file)
    if problem is not None:
        raise ConfigError(f"{file}: {problem}; not overwriting it (fix or remove the file)")
    document: dict[str, Any] = current if current is not None else {}
    document[SETTINGS_KEY] = config.to_settings_dict()
    try:
        text = jsjson.dumps(document, indent=2)
    except ValueError:  # a value nested deeper than JSON.stringify here writes
        raise ConfigError(
            f"{file}: a value in it is nested deeper than {jsjson.MAX_DEPTH} levels, more "
            "than pi-condense writes; not overwriting it"
        ) from None
    data = (text + "\n").encode("utf-8")
    file.parent.mkdir(parents=True, exist_ok=True)
    tmp = file.with_name(f"{file.name}.{secrets.token_hex(8)}.tmp")
    write_atomic(file, data, tmp, mode_from=file)
    return file

"""A package's names imported on first use (PEP 562): its ``__getattr__`` and ``__dir__``."""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # not typing's: the packages' start-up does not import typing
if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Mapping
    from typing import Any


def lazy_names(
    package: str,
    namespace: dict[str, Any],
    home: Mapping[str, str],
    submodules: Collection[str] = (),
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package`` (its ``globals()`` are ``namespace``).

    A name of ``home`` is imported from the submodule it maps to and kept in the package; a
    name of ``submodules`` is that submodule, imported.
    """

    def getattr_(name: str) -> Any:
        if name in submodules:
            return importlib.import_module(f".{name}", package)
        module = home.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{module}", package), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted({*namespace, *home, *submodules})

    return getattr_, dir_

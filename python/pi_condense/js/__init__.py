"""JavaScript semantics the port must reproduce exactly.

- :mod:`.values`: truthiness, ``String()``, ``Number()``, ``parseInt`` / ``parseFloat``,
  ``===``, ``typeof``, ``Map`` key identity, and the ``undefined`` sentinels.
- :mod:`.json`: ``JSON.parse`` / ``JSON.stringify``.
- :mod:`.time`: ``Date`` parsing and printing.

``pi_condense.jsjson`` and ``pi_condense.jstime``, the former paths of :mod:`.json` and
:mod:`.time`, warn on import (:class:`DeprecationWarning`) and are removed in pi-condense 0.2.0.
"""

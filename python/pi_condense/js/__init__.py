"""JavaScript semantics the port must reproduce exactly.

- :mod:`.values`: truthiness, ``String()``, ``Number()``, ``parseInt`` / ``parseFloat``,
  ``===``, ``typeof``, ``Map`` key identity, and the ``undefined`` sentinels.
- :mod:`.json`: ``JSON.parse`` / ``JSON.stringify`` (also importable as ``pi_condense.jsjson``).
- :mod:`.time`: ``Date`` parsing and printing (also importable as ``pi_condense.jstime``).
"""

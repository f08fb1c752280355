"""``python -m pi_condense.cli``: the ``pi-condense`` command."""

from . import main

main()

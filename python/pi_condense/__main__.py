"""``python -m pi_condense``: the ``pi-condense`` command line."""

from pi_condense.cli import main

main()

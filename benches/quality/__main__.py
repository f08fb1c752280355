"""``python -m benches.quality``: see :mod:`benches.quality.run`."""

import sys

from .run import main

sys.exit(main())

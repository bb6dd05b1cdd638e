"""``python -m broker.cli ...``: the ``samsa`` command."""

import sys

from . import main

sys.exit(main())

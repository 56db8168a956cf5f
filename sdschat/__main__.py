"""``python -m sdschat`` is the ``sdschat`` command."""

import sys

from sdschat.cli import main

sys.exit(main())

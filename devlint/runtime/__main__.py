"""``python -m devlint.runtime``: the runtime checker without the top-level devlint CLI."""

import sys

from .cli import main

sys.exit(main())

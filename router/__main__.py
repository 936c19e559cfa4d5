"""`python -m router` is the `router` command."""

import sys

from router.cli import main

sys.exit(main())

"""`python -m factory` runs the CLI."""

import sys

from factory.cli import main

sys.exit(main())

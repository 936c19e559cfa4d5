"""`python -m trainer` (and `torchrun -m trainer`) runs the CLI."""

import sys

from trainer.cli import main

sys.exit(main())

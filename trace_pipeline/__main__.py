import sys

from trace_pipeline.cli import main

sys.exit(main())

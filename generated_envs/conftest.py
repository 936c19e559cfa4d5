"""Lets `pytest generated_envs` run every package's tests without installing them.

Each package directory goes on sys.path, as `pip install -e` would do.
"""

import sys
from pathlib import Path

for package_dir in sorted(Path(__file__).parent.iterdir()):
    if (package_dir / "pyproject.toml").is_file() and str(package_dir) not in sys.path:
        sys.path.insert(0, str(package_dir))

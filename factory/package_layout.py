"""What a generated package is called and how its runtime copy is stamped.

A leaf module: generate writes packages by these names and validate checks them
by the same, and neither imports the other for it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

STAMP = "stamp.json"  # in a package's _runtime/: runtime version and content hash


@dataclass(frozen=True)
class PackageNames:
    """The names a capability gets in Python, on PyPI and in gymnasium."""

    capability: str

    @property
    def package(self) -> str:
        return f"trace_env_{self.capability}"

    @property
    def distribution(self) -> str:
        return f"trace-env-{self.capability.replace('_', '-')}"

    @property
    def camel(self) -> str:
        return "".join(part.capitalize() for part in self.capability.split("_"))

    @property
    def env_id(self) -> str:
        return f"trace/{self.camel}-v0"


def content_hash(files: dict[str, str]) -> str:
    """sha256 over the files' relative paths and texts, in path order."""
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(
            path.encode("utf-8") + b"\0" + files[path].encode("utf-8") + b"\0"
        )
    return digest.hexdigest()

"""The `_runtime/` folder of a package: the runtime and one kit, copied verbatim.

Every package of a kit gets byte-identical files and the same stamp (runtime
version, kit, sha256 over the files), so a test can prove the copies equal and
`factory validate` can tell an edited runtime from the factory's.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from factory.package_layout import STAMP, content_hash
from factory.runtime import RUNTIME_VERSION

RUNTIME_DIR = Path(__file__).resolve().parents[1] / "runtime"
_SHARED_KIT_MODULE = re.compile(r"^from \.\.(\w+) import ", re.MULTILINE)


def _kit_files(kit: str) -> list[Path]:
    """The kit's folder, plus the shared kit modules it imports (e.g. calculator)."""
    folder = RUNTIME_DIR / "kits" / kit
    files = sorted(p for p in folder.iterdir() if p.suffix in (".py", ".json"))
    shared = {
        name
        for path in files
        if path.suffix == ".py"
        for name in _SHARED_KIT_MODULE.findall(path.read_text(encoding="utf-8"))
    }
    extra = [RUNTIME_DIR / "kits" / f"{name}.py" for name in sorted(shared)]
    return [RUNTIME_DIR / "kits" / "__init__.py", *extra, *files]


def runtime_files(kit: str, kit_files: dict[str, str] | None = None) -> dict[str, str]:
    """{path relative to `_runtime/`: text} for the runtime core and `kit`, with the stamp.

    `kit_files` ({file name: text}) is a kit that is not built in (an inline
    target's, written by the LLM codegen); otherwise the kit's folder is copied.
    """
    core = sorted(RUNTIME_DIR.glob("*.py"))
    paths = core if kit_files is not None else [*core, *_kit_files(kit)]
    files = {
        path.relative_to(RUNTIME_DIR).as_posix(): path.read_text(encoding="utf-8")
        for path in paths
    }
    if kit_files is not None:
        init = RUNTIME_DIR / "kits" / "__init__.py"
        files["kits/__init__.py"] = init.read_text(encoding="utf-8")
        files.update({f"kits/{kit}/{name}": text for name, text in kit_files.items()})
    stamp = {
        "runtime_version": RUNTIME_VERSION,
        "kit": kit,
        "sha256": content_hash(files),
    }
    files[STAMP] = json.dumps(stamp, indent=2) + "\n"
    return files

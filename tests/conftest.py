"""Shared fixtures of the factory's own tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "capabilities"


@pytest.fixture
def example_spec() -> dict[str, Any]:
    """A valid spec as a dict (the phone permission example)."""
    return json.loads((EXAMPLES / "permission_error_recovery.json").read_text())


@pytest.fixture
def write_spec(tmp_path: Path):
    """Write a spec dict (or raw text) to a file and return its path."""

    def write(content: dict[str, Any] | str, name: str = "capability.json") -> Path:
        path = tmp_path / name
        path.write_text(content if isinstance(content, str) else json.dumps(content))
        return path

    return write


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A tiny random Qwen2-architecture chat model, built once per test session."""
    from trainer.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture
def tiny_tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)

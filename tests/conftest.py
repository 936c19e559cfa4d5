"""Shared fixtures of the factory's own tests."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

# Property tests check results, never time: a first example that imports scipy on a
# busy machine must not fail on hypothesis' default 200 ms deadline.
settings.register_profile("project", deadline=None)
settings.load_profile("project")

# A bug's traceback printed by every CLI the tests run (not kept in a file), so a
# failing test shows it (factory.settings.dispatch).
os.environ.setdefault("TRACE_TRACEBACK", "1")

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "capabilities"


def side_interpreter(library: str, variable: str, venv: str) -> Path:
    """The Python of the side venv that holds `library` (its pins clash with ours).

    `.ci/run` creates `venv`; `variable` may name another interpreter. A missing
    one skips the test locally and fails it in CI.
    """
    default = ROOT / venv / "bin" / "python"
    python = Path(os.environ.get(variable, default))
    if not python.is_file():
        message = f"no interpreter with {library}: create {default} or set {variable}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return python


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


# A chat template without a tool role or tool support: the trainer's fallback format.
NO_TOOL_ROLE = (
    "{% for m in messages %}{% if m.role not in ['system', 'user', 'assistant'] %}"
    "{{ raise_exception('roles must alternate') }}{% endif %}"
    "<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

ENVS = {
    name: str(ROOT / "generated_envs" / name)
    for name in ("permission_error_recovery", "date_time_recovery")
}
BASE_ENV = str(ROOT / "generated_envs" / "multi_step_task_completion")


@pytest.fixture(scope="session")
def adapters(tiny_model_dir, tmp_path_factory) -> Path:
    """Two tiny adapters (one GRPO iteration each) on two phone-kit capabilities."""
    import torch
    from safetensors.torch import load_file, save_file

    from trainer.cli import main as trainer_main

    folder = tmp_path_factory.mktemp("adapters")
    for seed, (name, env) in enumerate(ENVS.items()):
        code = trainer_main(
            ["train", "--env", env, "--model", str(tiny_model_dir), "--out", str(folder / name),
             "--iterations", "1", "--groups", "1", "--group-size", "2", "--max-new-tokens", "4",
             "--max-turns", "1", "--lora-rank", "4", "--seed", str(seed),
             "--max-total-tokens", "100000"]
        )  # fmt: skip
        assert code == 0
        # Random LoRA B starts at zero: make the two adapters differ from the base.
        path = folder / name / "adapter_model.safetensors"
        tensors = {
            k: v + 0.05 * torch.randn_like(v) for k, v in load_file(str(path)).items()
        }
        save_file(tensors, str(path))
    return folder


def assert_fresh_logprobs(
    model: Any, prompt: list[int], sample: Any, temperature: float
) -> None:
    """The log-probs a sampler returned equal a fresh pass over prompt + sample."""
    import torch

    from trainer.optimize import token_logprobs

    sequence = torch.tensor([prompt + sample.tokens])
    mask = torch.tensor([[0.0] * len(prompt) + [1.0] * len(sample.tokens)])
    with torch.no_grad():
        fresh = token_logprobs(
            model, sequence, torch.ones_like(sequence), temperature, mask
        )
    assert torch.allclose(
        fresh[0, len(prompt) :], torch.tensor(sample.logprobs), atol=1e-4
    )


@pytest.fixture
def own_packages():
    """A test that imports a run's generated packages in this process (a package of
    the same name as one in generated_envs/) leaves the modules, sys.path and gym
    ids as it found them, so later tests play the packages they imported."""
    import sys

    import gymnasium

    def ours(name: str) -> bool:
        return name.startswith("trace_env_")

    def packaged() -> dict[str, Any]:  # the gym ids generated packages registered
        return {k: v for k, v in gymnasium.registry.items() if ours(str(v.entry_point))}

    modules = {k: v for k, v in sys.modules.items() if ours(k)}
    path, registered = list(sys.path), packaged()
    yield
    for name in [k for k in sys.modules if ours(k)]:
        del sys.modules[name]
    sys.modules.update(modules)
    sys.path[:] = path
    for env_id in packaged():
        del gymnasium.registry[env_id]
    gymnasium.registry.update(registered)

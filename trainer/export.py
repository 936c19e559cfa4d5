"""The trained adapter, `adapters/<cap>/` (docs/contracts.md): PEFT files plus trace.json."""

from __future__ import annotations

import importlib
import json
import logging
from pathlib import Path
from typing import Any

from factory.outputs import write_json
from trainer import env_calls, vllm_adapter
from trainer.envs import EnvHandle
from trainer.errors import TrainerError

log = logging.getLogger("trainer.export")

# The adapter's subfolder holding the cold start alone (before any GRPO step): an
# adapter of its own (PEFT files and trace.json, 0 iterations), the SFT-only
# control an evaluation pairs with the trained adapter.
SFT_ONLY = "sft_only"


def example_trajectory(
    handle: EnvHandle, out: Path, seed: int, timeout: float
) -> list[dict[str, Any]]:
    """A successful trajectory: one of the run's own, else the gold policy's, else none.

    An environment that cannot even play its gold policy still gets its trace.json
    (with no example), so a finished run always leaves a complete adapter folder.
    """
    saved = out / "example_trajectory.json"
    if saved.is_file():
        try:
            example = json.loads(saved.read_text(encoding="utf-8"))
            if isinstance(example, list):
                return example
        except (OSError, ValueError, RecursionError):
            pass
        log.warning("%s is damaged; trace.json gets the gold policy's example", saved)

    def gold() -> list[dict[str, Any]]:
        package = importlib.import_module(handle.package)
        return list(package.run_episode(handle.make(), "gold", seed).info["messages"])

    try:
        return env_calls.guarded(gold, timeout, "the gold policy's example episode")
    except env_calls.EnvFault as exc:
        log.warning("trace.json gets no example trajectory: %s", exc)
        return []


def trained_with(adapter: str | None) -> dict[str, Any]:
    """The `training` record of an adapter's trace.json ({} without one)."""
    path = Path(adapter) / "trace.json" if adapter else None
    if path is None or not path.is_file():
        return {}
    try:
        trace = json.loads(path.read_text(encoding="utf-8"))
        training = trace.get("training") or {}
        if not isinstance(training, dict) or not isinstance(
            training.get("config", {}), dict
        ):
            raise ValueError("'training' is not an object with a 'config' object")
        if not isinstance(training.get("chat_template"), (str, type(None))):
            raise ValueError("'training.chat_template' is not text")
    except (OSError, ValueError, AttributeError, RecursionError) as exc:
        raise TrainerError(
            f"--adapter: {path} is not a trace.json `trainer train` wrote ({exc}); "
            "restore it or pass --chat-template and --tool-format yourself"
        ) from None
    return training


def export_adapter(
    out: Path,
    model: Any,
    tokenizer: Any,
    handle: EnvHandle,
    base_model: str,
    config: dict[str, Any],
    metrics: list[dict[str, Any]],
    seed: int,
    chat_template: str | None = None,
) -> str:
    """Write the PEFT adapter, its tokenizer and trace.json into `out`; the vLLM command.

    The adapter holds LoRA tensors only, never the embedding or LM head a chat
    template's new tokens resized (vLLM refuses those); the tokenizer saved
    beside it carries those tokens, and `trainer.models.load_base` rebuilds their
    rows the same way on every load. `chat_template` is the --chat-template a
    base model was trained with, so `trainer eval` and the router prompt it the same way.
    """
    model.save_pretrained(out, save_embedding_layers=False)
    tokenizer.save_pretrained(out)
    for problem in vllm_adapter.folder_problems(out):
        log.warning("vLLM will not load %s as is: %s", out, problem)
    trace = {
        "capability": handle.capability.get("name"),
        "title": handle.capability.get("title"),
        "description": handle.capability.get("description"),
        "base_model": base_model,
        "env_id": handle.env_id,
        "package": handle.package,
        # the capability environments of a mixture adapter (`--env` given several times)
        "envs": handle.capability.get("envs", [handle.capability.get("name")]),
        "example_trajectory": example_trajectory(
            handle, out, seed, config.get("step_timeout", 60.0)
        ),
        "training": {
            "iterations": len(metrics),
            "chat_template": chat_template,
            "config": config,
            "first": metrics[0] if metrics else None,
            "last": metrics[-1] if metrics else None,
        },
    }
    write_json(out / "trace.json", trace)
    name = str(handle.capability.get("name") or out.name)
    return vllm_adapter.serve_command(base_model, name, out, int(config["lora_rank"]))

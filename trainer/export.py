"""The trained adapter as DESIGN.md's `adapters/<cap>/`: PEFT files plus trace.json."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from trainer.envs import EnvHandle

log = logging.getLogger("trainer.export")


def vllm_problems(adapter_config: dict[str, Any], max_lora_rank: int = 64) -> list[str]:
    """What vLLM's LoRA loader would refuse in an adapter_config.json (its documented checks)."""
    problems = [
        f"missing '{k}'"
        for k in ("r", "lora_alpha", "target_modules")
        if k not in adapter_config
    ]
    if adapter_config.get("r", 0) > max_lora_rank:
        problems.append(f"rank {adapter_config['r']} > max_lora_rank {max_lora_rank}")
    if adapter_config.get("bias", "none") != "none":
        problems.append("bias adapters need bias_enabled")
    if adapter_config.get("use_dora"):
        problems.append("DoRA is not supported")
    if adapter_config.get("modules_to_save"):
        problems.append("modules_to_save is not supported")
    return problems


def example_trajectory(handle: EnvHandle, out: Path, seed: int) -> list[dict[str, Any]]:
    """A successful trajectory: one of the run's own, else the gold policy's."""
    saved = out / "example_trajectory.json"
    if saved.is_file():
        return json.loads(saved.read_text(encoding="utf-8"))
    import importlib

    package = importlib.import_module(handle.package)
    episode = package.run_episode(handle.make(), "gold", seed)
    return episode.info["messages"]


def trained_with(adapter: str | None) -> dict[str, Any]:
    """The `training` record of an adapter's trace.json ({} without one)."""
    path = Path(adapter) / "trace.json" if adapter else None
    if path is None or not path.is_file():
        return {}
    return json.loads(path.read_text(encoding="utf-8")).get("training") or {}


def export_adapter(
    out: Path,
    model: Any,
    handle: EnvHandle,
    base_model: str,
    config: dict[str, Any],
    metrics: list[dict[str, Any]],
    seed: int,
    chat_template: str | None = None,
) -> Path:
    """Write adapter_config.json, adapter_model.safetensors and trace.json into `out`.

    `chat_template` is the --chat-template a base model was trained with, so
    `trainer eval` and the router prompt it the same way.
    """
    model.save_pretrained(out)
    config_path = out / "adapter_config.json"
    for problem in vllm_problems(json.loads(config_path.read_text(encoding="utf-8"))):
        log.warning("vLLM will not load %s as is: %s", out, problem)
    trace = {
        "capability": handle.capability.get("name"),
        "title": handle.capability.get("title"),
        "description": handle.capability.get("description"),
        "base_model": base_model,
        "env_id": handle.env_id,
        "package": handle.package,
        "example_trajectory": example_trajectory(handle, out, seed),
        "training": {
            "iterations": len(metrics),
            "chat_template": chat_template,
            "config": config,
            "first": metrics[0] if metrics else None,
            "last": metrics[-1] if metrics else None,
        },
    }
    (out / "trace.json").write_text(
        json.dumps(trace, indent=2) + "\n", encoding="utf-8"
    )
    return out

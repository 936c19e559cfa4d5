"""Checkpoints: adapter, optimizer, RNG states, iteration and metrics, swapped in atomically.

A checkpoint is written to a staging folder and swapped into place
(`factory.outputs`), so a run killed at any moment keeps its previous checkpoint
and loses at most the iteration it was in.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import torch

from factory.outputs import recover, staging_beside, swap_in, write_text
from trainer.errors import TrainerError, first_line
from trainer.settings import TrainConfig

# Settings a resumed run may change (to extend a run, or to run with other hardware).
RESUMABLE_CHANGES = {
    "iterations",
    "generation_batch_size",
    "backend",
    "gradient_checkpointing",
    "micro_batch_size",
}


def _folder(out: Path) -> Path:
    return out / "checkpoint"


def exists(out: Path) -> bool:
    """Whether `out` holds a checkpoint (one a kill left retired mid-swap is put back)."""
    recover(out, _folder(out).name)
    return (_folder(out) / "state.json").is_file()


def adapter_dir(out: Path) -> Path:
    """Where the latest checkpoint's adapter lives (vLLM loads it as a LoRARequest)."""
    return _folder(out) / "adapter"


def save(
    out: Path,
    iteration: int,
    model: Any,
    optimizer: torch.optim.Optimizer,
    rng: random.Random,
    config: TrainConfig,
    metrics: list[dict[str, Any]],
    env_id: str = "",
) -> None:
    """Write the checkpoint of a finished iteration and the metrics so far.

    A write that fails (a full disk, say) leaves the previous checkpoint intact
    and is a TrainerError naming the folder.
    """
    staging = None
    try:
        staging = staging_beside(_folder(out))
        model.save_pretrained(staging / "adapter", save_embedding_layers=False)
        torch.save(optimizer.state_dict(), staging / "optimizer.pt")
        torch.save(
            {"torch": torch.get_rng_state(), "python": rng.getstate()},
            staging / "rng.pt",
        )
        state = {"iteration": iteration, "env_id": env_id, "config": config.as_dict()}
        (staging / "state.json").write_text(json.dumps(state, indent=2))
        write_text(
            out / "metrics.jsonl", "".join(json.dumps(row) + "\n" for row in metrics)
        )
        swap_in(staging, _folder(out))
    except (OSError, RuntimeError) as exc:
        raise TrainerError(
            f"cannot write the checkpoint in {out} ({first_line(exc, 200)}); "
            "free space or choose another --out (the previous checkpoint is intact)"
        ) from None
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)


def load(
    out: Path,
    model: Any,
    optimizer: torch.optim.Optimizer,
    rng: random.Random,
    config: TrainConfig,
    env_id: str = "",
) -> tuple[int, list[dict[str, Any]]]:
    """Restore the latest checkpoint; return the iteration reached and its metrics."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    folder = _folder(out)
    if not exists(out):
        raise TrainerError(f"--resume: no checkpoint in {out}; start without --resume")
    try:
        state = json.loads((folder / "state.json").read_text(encoding="utf-8"))
        saved, iteration = dict(state["config"]), state["iteration"]
        if (
            isinstance(iteration, bool)
            or not isinstance(iteration, int)
            or iteration < 0
        ):
            raise ValueError(f"iteration {iteration!r} is not a count")
        adapter = load_file(folder / "adapter" / "adapter_model.safetensors")
        optimizer_state = torch.load(folder / "optimizer.pt")
        states = torch.load(folder / "rng.pt", weights_only=True)
        lines = (
            (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
            if (out / "metrics.jsonl").exists()
            else []
        )
        metrics = [json.loads(line) for line in lines][:iteration]
    except Exception as exc:  # noqa: BLE001 - json, safetensors and pickle raise many kinds
        raise TrainerError(
            f"--resume: the checkpoint in {folder} is damaged ({first_line(exc, 200)}); "
            "start a new --out, or --force to start over in this one"
        ) from None
    if env_id and state.get("env_id") and state["env_id"] != env_id:
        raise TrainerError(
            f"--resume: the checkpoint in {out} trained {state['env_id']}, not {env_id}; "
            "resume with its environment or start a new --out"
        )
    now = json.loads(json.dumps(config.as_dict()))
    # A setting newer than the checkpoint ran at its default, which keeps the old behaviour.
    default = json.loads(json.dumps(TrainConfig().as_dict()))
    changed = sorted(
        k
        for k in now
        if k not in RESUMABLE_CHANGES and saved.get(k, default[k]) != now[k]
    )
    if changed:
        raise TrainerError(
            f"--resume: the checkpoint in {out} was trained with other settings ({', '.join(changed)}); "
            "resume with the same settings or start a new --out"
        )
    try:
        set_peft_model_state_dict(model, adapter)
        optimizer.load_state_dict(optimizer_state)
        torch.set_rng_state(states["torch"])
        rng.setstate(states["python"])
    except Exception as exc:  # noqa: BLE001 - shapes or states that do not fit this model
        raise TrainerError(
            f"--resume: the checkpoint in {folder} does not fit this model and settings "
            f"({first_line(exc, 200)}); start a new --out"
        ) from None
    return iteration, metrics


def record(out: Path, name: str, content: Any) -> None:
    """Write a JSON record of the run next to its checkpoint (atomically)."""
    write_text(out / name, json.dumps(content, indent=1))


def remember_example(out: Path, messages: list[dict[str, Any]]) -> None:
    """Keep one successful trajectory of the run (the router shows it as an example)."""
    record(out, "example_trajectory.json", messages)

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
from trainer.settings import COLD_START_SETTINGS, TrainConfig

# Settings a resumed run may change (to extend a run, or to run with other hardware).
RESUMABLE_CHANGES = {
    "iterations",
    "generation_batch_size",
    "backend",
    "gradient_checkpointing",
    "micro_batch_size",
    "trunk_cache_mib",
}


CHECKPOINT = "checkpoint"
# The cold start's own checkpoint, one per finished epoch but the last: its
# optimizer is not GRPO's, and the iteration-0 checkpoint replaces it.
COLD_START = "cold_start_checkpoint"


def _folder(out: Path, name: str = CHECKPOINT) -> Path:
    return out / name


def _present(out: Path, name: str) -> bool:
    """Whether checkpoint `name` is in `out` (one a kill left retired mid-swap is put back)."""
    recover(out, name)
    return (_folder(out, name) / "state.json").is_file()


def exists(out: Path) -> bool:
    """Whether `out` holds a GRPO checkpoint (iteration 0 on)."""
    return _present(out, CHECKPOINT)


def resumable(out: Path) -> bool:
    """Whether `out` holds a checkpoint to go on from: GRPO's, or a cold start's epochs."""
    return exists(out) or _present(out, COLD_START)


def clear(out: Path) -> None:
    """Remove the checkpoints of an earlier run in `out` (one started over with
    --force), so that a kill of this one never resumes that one's."""
    for name in (CHECKPOINT, COLD_START):
        shutil.rmtree(_folder(out, name), ignore_errors=True)


def adapter_dir(out: Path) -> Path:
    """Where the latest checkpoint's adapter lives (vLLM loads it as a LoRARequest)."""
    return _folder(out) / "adapter"


def _write(
    folder: Path,
    state: dict[str, Any],
    model: Any,
    optimizer: torch.optim.Optimizer,
    rng: random.Random,
    config: TrainConfig,
    env_id: str,
    metrics: tuple[Path, list[dict[str, Any]]] | None = None,
) -> None:
    """Stage adapter, optimizer, RNG states and `state` (with the settings), then swap
    them in as `folder`; a failed write is a TrainerError and the old folder stands."""
    staging = None
    try:
        staging = staging_beside(folder)
        model.save_pretrained(staging / "adapter", save_embedding_layers=False)
        torch.save(optimizer.state_dict(), staging / "optimizer.pt")
        torch.save(
            {"torch": torch.get_rng_state(), "python": rng.getstate()},
            staging / "rng.pt",
        )
        state = {**state, "env_id": env_id, "config": config.as_dict()}
        (staging / "state.json").write_text(json.dumps(state, indent=2))
        if metrics is not None:
            path, rows = metrics
            write_text(path, "".join(json.dumps(row) + "\n" for row in rows))
        swap_in(staging, folder)
    except (OSError, RuntimeError) as exc:
        raise TrainerError(
            f"cannot write the checkpoint in {folder.parent} ({first_line(exc, 200)}); "
            "free space or choose another --out (the previous checkpoint is intact)"
        ) from None
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)


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
    and is a TrainerError naming the folder. The first one (iteration 0, after
    the cold start) retires the cold start's own checkpoint.
    """
    _write(
        _folder(out), {"iteration": iteration}, model, optimizer, rng, config, env_id,
        (out / "metrics.jsonl", metrics),
    )  # fmt: skip
    shutil.rmtree(_folder(out, COLD_START), ignore_errors=True)


def save_cold_start(
    out: Path,
    losses: list[float],
    model: Any,
    optimizer: torch.optim.Optimizer,
    rng: random.Random,
    config: TrainConfig,
    env_id: str = "",
) -> None:
    """Write the cold start's checkpoint after its epoch `len(losses)`: a kill in the
    next epoch costs that epoch, not the whole cold start."""
    _write(
        _folder(out, COLD_START), {"epoch_losses": losses}, model, optimizer, rng,
        config, env_id,
    )  # fmt: skip


def _read(
    folder: Path,
    model: Any,
    optimizer: torch.optim.Optimizer,
    rng: random.Random,
    config: TrainConfig,
    env_id: str,
) -> dict[str, Any]:
    """Restore `folder`'s adapter, optimizer and RNG states after checking its
    environment and settings against this run's; its state.json.

    A checkpoint taken before GRPO's first step (the cold start's, or iteration
    0) holds the cold start's settings only: GRPO's may differ, and its
    optimizer, which has taken no step, starts afresh with this run's."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    out = folder.parent
    try:
        state = json.loads((folder / "state.json").read_text(encoding="utf-8"))
        saved = dict(state["config"])
        adapter = load_file(folder / "adapter" / "adapter_model.safetensors")
        optimizer_state = torch.load(folder / "optimizer.pt")
        states = torch.load(folder / "rng.pt", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - json, safetensors and pickle raise many kinds
        raise _damaged(folder, exc) from None
    if env_id and state.get("env_id") and state["env_id"] != env_id:
        raise TrainerError(
            f"--resume: the checkpoint in {out} trained {state['env_id']}, not {env_id}; "
            "resume with its environment or start a new --out"
        )
    now = json.loads(json.dumps(config.as_dict()))
    # A setting newer than the checkpoint ran at its default, which keeps the old behaviour.
    default = json.loads(json.dumps(TrainConfig().as_dict()))
    # Before GRPO's first step (a cold start's checkpoint has no iteration) only
    # the cold start's settings shaped the adapter.
    fixed = COLD_START_SETTINGS if state.get("iteration", 0) == 0 else now.keys()
    # GRPO's optimizer at iteration 0 has taken no step: it starts afresh, with
    # this run's rate; a cold start's own optimizer has, and goes on.
    grpo_unstepped = state.get("iteration") == 0
    changed = sorted(
        k
        for k in now
        if k in fixed
        and k not in RESUMABLE_CHANGES
        and saved.get(k, default[k]) != now[k]
    )
    if changed:
        raise TrainerError(
            f"--resume: the checkpoint in {out} was trained with other settings ({', '.join(changed)}); "
            "resume with the same settings or start a new --out"
        )
    try:
        set_peft_model_state_dict(model, adapter)
        if not grpo_unstepped:
            optimizer.load_state_dict(optimizer_state)
        torch.set_rng_state(states["torch"])
        rng.setstate(states["python"])
    except Exception as exc:  # noqa: BLE001 - shapes or states that do not fit this model
        raise TrainerError(
            f"--resume: the checkpoint in {folder} does not fit this model and settings "
            f"({first_line(exc, 200)}); start a new --out"
        ) from None
    return state


def _damaged(folder: Path, exc: Exception) -> TrainerError:
    return TrainerError(
        f"--resume: the checkpoint in {folder} is damaged ({first_line(exc, 200)}); "
        "start a new --out, or --force to start over in this one"
    )


def load(
    out: Path,
    model: Any,
    optimizer: torch.optim.Optimizer,
    rng: random.Random,
    config: TrainConfig,
    env_id: str = "",
) -> tuple[int, list[dict[str, Any]]]:
    """Restore the latest checkpoint; return the iteration reached and its metrics."""
    folder = _folder(out)
    if not exists(out):
        raise TrainerError(f"--resume: no checkpoint in {out}; start without --resume")
    state = _read(folder, model, optimizer, rng, config, env_id)
    try:
        iteration = state["iteration"]
        if (
            isinstance(iteration, bool)
            or not isinstance(iteration, int)
            or iteration < 0
        ):
            raise ValueError(f"iteration {iteration!r} is not a count")
        lines = (
            (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
            if (out / "metrics.jsonl").exists()
            else []
        )
        metrics = [json.loads(line) for line in lines][:iteration]
    except Exception as exc:  # noqa: BLE001 - a hand-edited state or metrics file
        raise _damaged(folder, exc) from None
    return iteration, metrics


def load_cold_start(
    out: Path,
    model: Any,
    optimizer: torch.optim.Optimizer,
    rng: random.Random,
    config: TrainConfig,
    env_id: str = "",
) -> list[float]:
    """Restore the cold start's checkpoint, if there is one; the losses of the epochs
    it finished ([] when there is none: the cold start begins)."""
    if not _present(out, COLD_START):
        return []
    folder = _folder(out, COLD_START)
    state = _read(folder, model, optimizer, rng, config, env_id)
    losses = state.get("epoch_losses")
    if not (
        isinstance(losses, list)
        and 0 < len(losses) < config.cold_start_epochs
        and all(isinstance(x, float) for x in losses)
    ):
        raise _damaged(folder, ValueError(f"epoch_losses {losses!r}"))
    return losses


def record(out: Path, name: str, content: Any) -> None:
    """Write a JSON record of the run next to its checkpoint (atomically)."""
    write_text(out / name, json.dumps(content, indent=1))


def remember_example(out: Path, messages: list[dict[str, Any]]) -> None:
    """Keep one successful trajectory of the run (the router shows it as an example)."""
    record(out, "example_trajectory.json", messages)

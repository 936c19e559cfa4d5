"""Trackers: where iteration metrics go besides metrics.jsonl (TensorBoard, W&B).

`--report-to none|tensorboard|wandb`, as TRL and transformers' Trainer spell it.
The library is imported when the run starts, so a missing one is a clear error
before any model is loaded, not a crash after the first iteration.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Protocol

from trainer.errors import TrainerError


class Reporter(Protocol):
    def log(self, step: int, row: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


class _Nowhere:
    def log(self, step: int, row: dict[str, Any]) -> None:
        """metrics.jsonl has it already."""

    def close(self) -> None:
        """Nothing to flush."""


def _numbers(row: dict[str, Any]) -> dict[str, float]:
    return {
        k: float(v)
        for k, v in row.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "iteration"
    }


class _TensorBoard:
    def __init__(self, folder: Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(folder))

    def log(self, step: int, row: dict[str, Any]) -> None:
        for key, value in _numbers(row).items():
            self.writer.add_scalar(f"train/{key}", value, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class _WandB:
    def __init__(self, name: str, config: dict[str, Any]) -> None:
        import wandb

        self.wandb = wandb
        self.run = wandb.init(project="trace-factory", name=name, config=config)

    def log(self, step: int, row: dict[str, Any]) -> None:
        self.run.log({f"train/{k}": v for k, v in _numbers(row).items()}, step=step)

    def close(self) -> None:
        self.run.finish()


LIBRARIES = {"tensorboard": "torch.utils.tensorboard", "wandb": "wandb"}


def require(kind: str) -> None:
    """Import the library `--report-to` names now, before any model is loaded."""
    if kind in LIBRARIES:
        try:
            importlib.import_module(LIBRARIES[kind])
        except ImportError:
            raise TrainerError(
                f"--report-to {kind} needs `pip install trace-factory[{kind}]`"
            ) from None


def open_reporter(kind: str, out: Path, config: dict[str, Any]) -> Reporter:
    """The reporter `--report-to` names; TensorBoard logs go to `out`/runs."""
    require(kind)
    try:
        if kind == "tensorboard":
            return _TensorBoard(out / "runs")
        if kind == "wandb":
            return _WandB(out.name, config)
    except Exception as exc:  # noqa: BLE001 - wandb's login and network errors
        raise TrainerError(f"--report-to {kind}: cannot start ({exc})") from None
    return _Nowhere()

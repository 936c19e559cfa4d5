"""Where a stage's independent jobs run: here, one after another, or on a Ray cluster.

A job names its work as `module:function`, called as `function(context,
folder, **arguments)`, and the inputs its result depends on (hashed into the
job's folder name under `.jobs/`); a resumable one finds in `folder` what a
killed try of it left there. `local` runs jobs in this process; `ray`
submits each as a Ray task with its declared CPUs and GPUs, retried on
failure, each rebuilding the run's context from the run folder's saved config
(so every node needs the project installed and the run folder on a shared
file system). Either way a finished job's folder is kept, so both give the
same results and a rerun reuses them.
"""

from __future__ import annotations

import importlib
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trace_pipeline.context import Context
from trace_pipeline.errors import PipelineError


@dataclass(frozen=True)
class Job:
    """One independent piece of a stage's work."""

    kind: str
    inputs: dict[str, Any]
    work: str  # "module:function", called as function(context, folder, **arguments)
    arguments: dict[str, Any]
    resumable: bool = False  # a killed one's folder is kept for the rerun to go on from


@dataclass(frozen=True)
class Done:
    """A finished job: its folder, and the host that ran it."""

    folder: Path
    host: str


def _call(context: Context, job: Job) -> Path:
    module, function = job.work.split(":")
    work = getattr(importlib.import_module(module), function)
    return context.job(
        job.kind,
        job.inputs,
        lambda folder: work(context, folder, **job.arguments),
        job.resumable,
    )


def _remote(root: str, job: Job) -> tuple[str, str]:
    """A job in a Ray worker: the run's context rebuilt from its folder."""
    from trace_pipeline.config import load_config
    from trace_pipeline.store import RunFolder

    saved = Path(root) / "config.yaml"
    context = Context(load_config(saved), RunFolder(Path(root)), saved)
    return str(_call(context, job)), socket.gethostname()


def run_jobs(context: Context, jobs: list[Job]) -> list[Done]:
    """Run every job (reusing finished ones) with the configured executor."""
    if context.config.executor == "local":
        return [Done(_call(context, job), socket.gethostname()) for job in jobs]
    try:
        import ray
    except ImportError:
        raise PipelineError(
            "executor: ray needs Ray: `pip install -e '.[ray]'` (or set executor: local)"
        ) from None
    settings = context.config.ray
    if not ray.is_initialized():
        ray.init(
            address=settings.address,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
    task = ray.remote(_remote).options(
        num_cpus=settings.cpus_per_job,
        num_gpus=settings.gpus_per_job,
        max_retries=settings.retries,
        retry_exceptions=True,
    )
    root = str(context.folder.root.resolve())
    finished = ray.get([task.remote(root, job) for job in jobs])
    return [Done(Path(folder), host) for folder, host in finished]

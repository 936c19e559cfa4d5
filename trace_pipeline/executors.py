"""Where a stage's independent jobs run: here, one after another, or on a Ray cluster.

A job names its work as `module:function`, called as `function(context,
folder, **arguments)`, and the inputs its result depends on (hashed into the
job's folder name under `.jobs/`); a resumable one finds in `folder` what a
killed try of it left there. `local` runs jobs in this process; `ray`
submits each as a Ray task with its declared CPUs and GPUs, each rebuilding the
run's context from the run folder's saved config (so every node needs the
project installed and the run folder on a shared file system). A job that
raises in a worker is tried again, up to `ray.retries` times, by the driver, so
that every try's host and error is recorded (`Done.tries`, kept in the stage's
manifest); Ray itself retries only a worker that died. A job that fails every
try stops the stage once the others have finished, naming the job, its host and
its error. Either way a finished job's folder is kept, so both give the same
results and a rerun reuses them (a failed stage goes on from its finished jobs).
"""

from __future__ import annotations

import importlib
import itertools
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trace_pipeline.context import Context
from trace_pipeline.errors import PipelineError
from trainer.errors import first_line


@dataclass(frozen=True)
class Job:
    """One independent piece of a stage's work."""

    kind: str
    inputs: dict[str, Any]
    work: str  # "module:function", called as function(context, folder, **arguments)
    arguments: dict[str, Any]
    resumable: bool = False  # a killed one's folder is kept for the rerun to go on from


@dataclass(frozen=True)
class Try:
    """One try of a job: the host it ran on, and its error (None: it finished)."""

    host: str
    error: str | None = None


@dataclass(frozen=True)
class Done:
    """A finished job: its folder, the host that ran it, and every try it took."""

    folder: Path
    host: str
    tries: tuple[Try, ...] = ()

    def record(self) -> list[dict[str, str | None]]:
        """The tries as a manifest keeps them."""
        return [{"host": t.host, "error": t.error} for t in self.tries]


def _name(job: Job) -> str:
    """A job as a message names it: its kind and what it is of."""
    about = job.inputs.get("env") or job.inputs.get("kind")
    return f"{job.kind} job" + (f" of {about}" if isinstance(about, str) else "")


def _call(context: Context, job: Job) -> Path:
    module, function = job.work.split(":")
    work = getattr(importlib.import_module(module), function)
    return context.job(
        job.kind,
        job.inputs,
        lambda folder: work(context, folder, **job.arguments),
        job.resumable,
    )


def _remote(root: str, job: Job) -> tuple[str | None, str, str | None]:
    """A job in a Ray worker, the run's context rebuilt from its folder: (its folder
    or None, this host, its error or None). An error is returned, not raised, so
    the driver learns the host of a failed try."""
    from trace_pipeline.config import load_config
    from trace_pipeline.store import RunFolder

    host = socket.gethostname()
    try:
        saved = Path(root) / "config.yaml"
        context = Context(load_config(saved), RunFolder(Path(root)), saved)
        return str(_call(context, job)), host, None
    except Exception as exc:  # noqa: BLE001 - any failure of a job's work is reported by the driver
        return (
            None,
            host,
            f"{type(exc).__name__}: {first_line(exc)}",
        )


def pieces(seeds: list[int], size: int) -> list[list[int]]:
    """`seeds` in the fewest consecutive pieces of at most `size`, their sizes
    differing by one at most (40 in 16s: 13, 13, 14, not 16, 16, 8), so that a
    stop loses one job's episodes at most and every job fills a batch alike."""
    count = -(-len(seeds) // size)  # ceiling
    if count == 0:
        return []
    cut = [len(seeds) * i // count for i in range(count + 1)]
    return [seeds[a:b] for a, b in itertools.pairwise(cut)]


def run_jobs(context: Context, jobs: list[Job]) -> list[Done]:
    """Run every job (reusing finished ones) with the configured executor."""
    if context.config.executor == "local":
        host = socket.gethostname()
        return [Done(_call(context, job), host, (Try(host),)) for job in jobs]
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
        max_retries=settings.retries,  # a worker that died; errors come back to us
        retry_exceptions=False,
    )
    root = str(context.folder.root.resolve())
    waiting = {task.remote(root, job): index for index, job in enumerate(jobs)}
    tries: list[list[Try]] = [[] for _ in jobs]
    done: dict[int, Done] = {}
    while waiting:
        (ready,), _ = ray.wait(list(waiting), num_returns=1)
        index = waiting.pop(ready)
        try:
            folder, host, error = ray.get(ready)
        except ray.exceptions.RayError as exc:  # its worker died every time Ray tried
            folder, host, error = None, "unknown host", first_line(exc, 300)
        tries[index].append(Try(host, error))
        if folder is not None:
            done[index] = Done(Path(folder), host, tuple(tries[index]))
            continue
        context.say(f"{_name(jobs[index])} failed on {host} ({error})")
        if len(tries[index]) <= settings.retries:
            waiting[task.remote(root, jobs[index])] = index
    failed = [index for index in range(len(jobs)) if index not in done]
    if failed:
        last = tries[failed[0]][-1]
        raise PipelineError(
            f"{_name(jobs[failed[0]])} failed {len(tries[failed[0]])} time(s), last on "
            f"{last.host}: {last.error}"
            + (f" ({len(failed) - 1} more job(s) failed)" if len(failed) > 1 else "")
            + "; finished jobs are kept: fix the cause and rerun `trace run` to go on"
        )
    return [done[index] for index in range(len(jobs))]

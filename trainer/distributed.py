"""Data parallel over torchrun ranks: groups are sharded, gradients all-reduced.

`torchrun --nproc_per_node N -m trainer train ...` sets RANK and WORLD_SIZE; each
rank rolls out its share of the groups, every rank takes the same number of
optimizer steps (ranks with fewer minibatches contribute zero gradients), and
rank 0 writes checkpoints and metrics. With one process everything is a no-op.
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# torch is imported only where a process group is used: the CLIs import this
# module at start-up, and loading torch there would put seconds (and a Ctrl-C
# traceback) before `main` runs.


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def rank() -> int:
    return int(os.environ.get("RANK", "0"))


def init() -> None:
    """Join the process group torchrun set up (gloo on CPU, nccl on GPUs), and
    leave it when the process exits: a group left to the interpreter's teardown
    can abort a rank whose work is done (gloo's threads are still joinable when
    their C++ objects are destroyed, "terminate called without an active
    exception"), which torchrun reports as a failed run."""
    if world_size() == 1:
        return
    import torch
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
        atexit.register(_leave)


def _leave() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


def average_gradients(parameters: Iterable[torch.nn.Parameter]) -> None:
    """All-reduce and average the gradients of the trainable parameters."""
    if world_size() == 1:
        return
    import torch
    import torch.distributed as dist

    for parameter in parameters:
        if parameter.grad is None:
            parameter.grad = torch.zeros_like(parameter)
        dist.all_reduce(parameter.grad)
        parameter.grad /= world_size()


def max_over_ranks(value: int) -> int:
    """The largest `value` of any rank (so all ranks take the same number of steps)."""
    if world_size() == 1:
        return value
    import torch
    import torch.distributed as dist

    tensor = torch.tensor([value], dtype=torch.long)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return int(tensor.item())


def mean_over_ranks(values: dict[str, float]) -> dict[str, float]:
    """Per-rank metrics averaged over ranks."""
    if world_size() == 1:
        return values
    import torch
    import torch.distributed as dist

    tensor = torch.tensor(list(values.values()), dtype=torch.float64)
    dist.all_reduce(tensor)
    return dict(zip(values, (tensor / world_size()).tolist(), strict=True))


def barrier() -> None:
    """Wait until every rank is here (rank 0 has finished writing a checkpoint)."""
    if world_size() > 1:
        import torch.distributed as dist

        dist.barrier()

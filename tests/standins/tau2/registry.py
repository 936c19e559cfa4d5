"""tau2.registry: the stand-in domain's task splits, tasks and tools."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from .environment.tool import Tool

SPLITS = {"train": ["r1", "r2", "r3", "r4"], "test": ["r5", "r6"]}


def get_reservation(reservation_id: str) -> str:
    """Get a reservation's details."""
    return f'{{"reservation_id": "{reservation_id}", "status": "booked"}}'


def cancel_reservation(reservation_id: str) -> str:
    """Cancel a reservation."""
    return f'{{"reservation_id": "{reservation_id}", "status": "cancelled"}}'


TOOLS = [Tool(get_reservation), Tool(cancel_reservation)]


def task(task_id: str) -> Any:
    action = SimpleNamespace(
        name="cancel_reservation", arguments={"reservation_id": task_id}
    )
    return SimpleNamespace(
        id=task_id, evaluation_criteria=SimpleNamespace(actions=[action])
    )


class _Registry:
    def get_task_splits_loader(self, name: str) -> Callable[[], dict[str, list[str]]]:
        return lambda: {k: list(v) for k, v in SPLITS.items()}

    def get_tasks_loader(self, name: str) -> Callable[[str | None], list[Any]]:
        return lambda split=None: [
            task(i) for i in (SPLITS[split] if split else sum(SPLITS.values(), []))
        ]

    def get_env_constructor(self, name: str) -> Callable[[], Any]:
        return lambda: SimpleNamespace(get_tools=lambda: list(TOOLS))


registry = _Registry()

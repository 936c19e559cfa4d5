"""The target's own solved tasks as a training environment: the untargeted control
"more training on this target" (`baselines.solved_tasks`).

The baselines stage writes it as a package folder (`write_package`): its
capability.json, a module naming `ENV_ID` and `run_episode`, and `solved.json`,
which holds how to make the target's env and, for each analysis-split task the
base agent solved, the assistant messages that solved it. Training seed s plays
solved task s mod n, and the package's gold policy replays the base agent's own
messages there, so its cold-start demonstrations are the agent's own successes
(each replay is checked to succeed when the package is written). An adapter
trained on it with a targeted adapter's budget tells targeting apart from more
training on the target itself.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import shutil
from pathlib import Path
from typing import Any, ClassVar

import gymnasium

from factory.outputs import write_json, write_text
from factory.runtime.policies import Episode

NAME = "solved_target_tasks"  # the package's capability, and its control's name
DESCRIPTION = (
    "The target's own analysis-split tasks the base agent already solved, its own "
    "successful replies as demonstrations: more training on this target, not on "
    "what the agent lacks (an untargeted control)."
)
MODULE = f'''"""{DESCRIPTION} Written by `trace run`'s baselines stage."""

from pathlib import Path

from trace_pipeline.targets.solved import register, run_episode

ENV_ID = register(Path(__file__).with_name("solved.json"))
__all__ = ["ENV_ID", "run_episode"]
'''


class SolvedTasksEnv(gymnasium.Env[str, str]):
    """The target's env on its solved tasks: seed s plays solved task s mod n; the
    replies that solved it are `replies` after `reset` (the gold policy's)."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, data: str, **kwargs: Any) -> None:
        spec = json.loads(Path(data).read_text(encoding="utf-8"))
        importlib.import_module(spec["package"])  # registers the target's env id
        self.inner = gymnasium.make(
            spec["env_id"], **spec["kwargs"], **kwargs
        ).unwrapped
        self.tasks: list[dict[str, Any]] = spec["tasks"]
        self.observation_space = self.inner.observation_space
        self.action_space = self.inner.action_space
        self.max_turns = getattr(self.inner, "max_turns", None)
        self.replies: list[dict[str, Any]] = []

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        task = self.tasks[(seed or 0) % len(self.tasks)]
        self.replies = task["replies"]
        return self.inner.reset(seed=task["seed"], options=options)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return self.inner.step(action)


def run_episode(env: SolvedTasksEnv, which: str, seed: int) -> Episode:
    """The gold policy (`which` "gold"): the base agent's own replies on the task of
    `seed`, replayed; there is no lacking policy."""
    if which != "gold":
        raise ValueError(f"{NAME} has only a gold policy (the agent's own replies)")
    env.reset(seed=seed)
    info: dict[str, Any] = {}
    for turn, reply in enumerate(env.replies, 1):
        _, reward, terminated, truncated, info = env.step(json.dumps(reply))
        if terminated or truncated:
            return Episode(reward, bool(info.get("success")), turn, info)
    return Episode(0.0, False, len(env.replies), info)


def register(data: Path) -> str:
    """Register the env of the package whose `solved.json` is `data` (an id of its
    own: two runs' packages in one process are two envs); its id."""
    digest = hashlib.sha256(data.read_bytes() + str(data).encode()).hexdigest()[:12]
    env_id = f"trace/SolvedTargetTasks-{digest}-v0"
    if env_id not in gymnasium.registry:
        gymnasium.register(
            env_id, entry_point=f"{__name__}:SolvedTasksEnv", kwargs={"data": str(data)}
        )
    return env_id


def write_package(
    folder: Path, handle: Any, records: list[dict[str, Any]]
) -> tuple[Path | None, str]:
    """The package of the target's solved tasks in `folder/solved_target_tasks`
    from collect's trajectory records, keeping the tasks whose replies replay to a
    success: (its folder, "") or (None, why there is none)."""
    tasks = [
        {
            "seed": int(row["metadata"]["seed"]),
            "replies": [m for m in row["messages"] if m.get("role") == "assistant"],
        }
        for row in records
        if row.get("success")
    ]
    if not tasks:
        return None, "the base agent solved no analysis-split task to train on"
    package = folder / NAME
    module = package / f"trace_env_{NAME}"
    spec = {
        "env_id": handle.env_id,
        "package": handle.package,
        "kwargs": dict(getattr(handle, "kwargs", {})),
        "tasks": tasks,
    }
    module.mkdir(parents=True, exist_ok=True)
    write_json(module / "solved.json", spec)
    kept = [task for task in tasks if _replays(module / "solved.json", task)]
    if not kept:
        shutil.rmtree(package)
        return None, "no solved task replays to a success (is the target seeded?)"
    write_json(module / "solved.json", spec | {"tasks": kept})
    write_text(module / "__init__.py", MODULE)
    write_json(
        package / "capability.json",
        {"name": NAME, "title": "Solved target tasks", "description": DESCRIPTION},
    )
    return package, ""


def _replays(data: Path, task: dict[str, Any]) -> bool:
    """Whether the base agent's replies on `task` succeed again."""
    env = SolvedTasksEnv(str(data))
    env.tasks = [task]
    return run_episode(env, "gold", 0).success

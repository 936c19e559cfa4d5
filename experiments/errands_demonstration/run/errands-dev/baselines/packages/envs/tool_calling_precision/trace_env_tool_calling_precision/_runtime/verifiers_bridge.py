"""Bridge to verifiers (`verifiers>=0.4`, its `verifiers.v1` API): a package's tasks as a Taskset.

One task per seed: the opening system and user messages as the prompt; the
kit's OpenAI tool schemas served verbatim by an MCP toolset that runs the kit's
tools on the episode's state (verifiers starts it as `python -m MODULE`); the
reward is the package's verifier over the final state and everything the agent
said. `validate()` replays the gold turns through the same tool path, so
`vf-validate` proves the gold policy earns full reward on every task.
This module is not annotated lazily: pydantic reads its class annotations.
"""

import copy
import json
from collections.abc import Iterator
from typing import Any, cast

from .env import TaskEnv, run_call
from .policies import run_episode
from .verifier import verify


def _said(messages: list[Any]) -> list[dict[str, Any]]:
    """The assistant messages of a verifiers trace, as `{"role", "content"}` dicts."""
    said = []
    for message in messages:
        data = message if isinstance(message, dict) else message.model_dump()
        if data.get("role") != "assistant":
            continue
        content = data.get("content") or ""
        if isinstance(content, list):  # content parts
            content = " ".join(
                str(p.get("text", "")) for p in content if isinstance(p, dict)
            )
        said.append({"role": "assistant", "content": str(content)})
    return said


def verifiers_classes(
    env_class: type[TaskEnv], module: str, tasks: int = 100
) -> tuple[type, type]:
    """(Taskset, Toolset) for `env_class`, their `__module__` set to `module`.

    `module` must export the Taskset in `__all__` (what `vf-validate MODULE`
    loads) and run the Toolset under `if __name__ == "__main__"`.
    """
    import verifiers.v1 as vf
    from mcp.types import CallToolResult, TextContent, Tool
    from pydantic import Field

    family = env_class.family
    toolkit = family.toolkit
    camel = env_class.__name__.removesuffix("Env")

    class EpisodeState(vf.State):
        world: dict[str, Any] = Field(default_factory=dict)

    class TaskToolset(vf.Toolset[vf.ToolsetConfig, EpisodeState]):
        """The kit's tools with their schemas as given (not rebuilt from signatures)."""

        TOOL_PREFIX = None

        def register(self, mcp: Any) -> None:
            server = cast(Any, mcp)
            server.list_tools = self._with_state(self.list_tools)
            server.call_tool = self._with_state(self.call_tool)

        async def list_tools(self) -> list[Any]:
            return [
                Tool(
                    name=schema["function"]["name"],
                    description=schema["function"].get("description"),
                    input_schema=schema["function"]["parameters"],
                )
                for schema in toolkit.schemas
            ]

        async def call_tool(
            self, name: str, arguments: dict[str, Any], context: Any = None
        ) -> Any:
            call = {
                "id": "mcp",
                "function": {"name": name, "arguments": arguments or {}},
            }
            message, world, ok = run_call(toolkit, self.state.world, call)
            self.state.world = world
            return CallToolResult(
                content=[TextContent(type="text", text=message["content"])],
                is_error=not ok,
            )

    class EpisodeData(vf.TaskData):
        seed: int

    class EpisodeTaskConfig(vf.TaskConfig):
        tools: vf.ToolsetConfig = vf.ToolsetConfig()

    class EpisodeTask(vf.Task[EpisodeData, EpisodeState, EpisodeTaskConfig]):
        @classmethod
        def toolsets(cls, config: EpisodeTaskConfig) -> list[Any]:
            return [TaskToolset(config.tools)]

        async def setup(self, trace: Any, runtime: Any) -> None:
            task = family.generate(self.data.seed)
            trace.state.world = copy.deepcopy(task.initial_state)

        @vf.reward(weight=1.0)
        async def verifier(self, trace: Any) -> float:
            task = family.generate(self.data.seed)
            messages = _said(list(trace.messages))
            return verify(
                task, toolkit, trace.state.world, messages, family.reward_mode
            ).reward

        async def validate(self, runtime: Any) -> bool:
            """Play the gold turns: the env calls tools through the same `run_call`."""
            return run_episode(env_class(), "gold", self.data.seed).success

    class EpisodesConfig(vf.TasksetConfig):
        num_tasks: int = tasks
        first_seed: int = 0
        task: EpisodeTaskConfig = EpisodeTaskConfig()

    class PackageTaskset(vf.Taskset[EpisodeTask, EpisodesConfig]):
        """One task per seed, `first_seed` to `first_seed + num_tasks - 1`."""

        def load(self) -> Iterator[EpisodeTask]:
            env = env_class()
            first = self.config.first_seed
            for seed in range(first, first + self.config.num_tasks):
                observation, _ = env.reset(seed=seed)
                system, *opening = json.loads(observation)
                yield EpisodeTask(
                    EpisodeData(
                        name=f"{family.name}#{seed}",
                        seed=seed,
                        system_prompt=system["content"],
                        prompt=opening,
                    ),
                    self.config.task,
                )

    for cls, name in ((PackageTaskset, "Taskset"), (TaskToolset, "Toolset")):
        cls.__name__ = cls.__qualname__ = f"{camel}{name}"
        cls.__module__ = module
    return PackageTaskset, TaskToolset

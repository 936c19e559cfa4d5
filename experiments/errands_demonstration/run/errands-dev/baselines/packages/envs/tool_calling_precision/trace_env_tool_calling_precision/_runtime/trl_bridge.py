"""Bridges from a package's environment to other training libraries.

TRL (`GRPOTrainer(environment_factory=...)`): TRL calls every public method of
the environment class as a tool, so each kit tool becomes a typed method with a
Google-style docstring (TRL builds the tool schema from them with transformers'
`get_json_schema`); `reset(**row)` starts the task of the row's `seed`; the
reward function hands the completion's final answer to the environment and
returns the verifier's reward. The libraries are imported only when called.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Literal, Optional

from .env import TaskEnv

_SCALARS: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "null": type(None),
}


def python_type(schema: dict[str, Any]) -> Any:
    """The Python annotation of a JSON-schema parameter (what get_json_schema reads)."""
    if schema.get("enum"):
        return Literal[tuple(schema["enum"])]
    kind = schema.get("type")
    if isinstance(kind, list):
        types = [python_type({**schema, "type": k}) for k in kind]
        annotation = types[0]
        for other in types[1:]:
            annotation = annotation | other
        return annotation
    if kind == "array":
        return list[python_type(schema.get("items", {}))]
    if kind == "object":
        return dict[str, Any]
    return _SCALARS.get(kind, Any)


class TRLEnvironment:
    """One episode at a time for TRL; the kit's tools are added as methods."""

    env_class: ClassVar[type[TaskEnv]]

    def __init__(self) -> None:
        self.env = self.env_class()
        self.reward = 0.0
        self.done = False
        self._calls = 0

    def reset(self, **row: Any) -> str | None:
        """Start the task of the dataset row's `seed` (its prompt already opens it)."""
        self.env.reset(seed=int(row["seed"]))
        self.reward, self.done, self._calls = 0.0, False, 0
        return None

    def _act(self, action: str) -> str:
        if self.done:
            return "Error: the episode is over."
        observation, reward, terminated, truncated, _ = self.env.step(action)
        if terminated or truncated:
            self.reward, self.done = reward, True
        messages = json.loads(observation)
        return "\n".join(str(m.get("content") or "") for m in messages)

    def _tool(self, name: str, arguments: dict[str, Any]) -> str:
        self._calls += 1
        call = {
            "id": f"trl_{self._calls}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
        return self._act(json.dumps({"role": "assistant", "tool_calls": [call]}))

    def _finish(self, answer: str) -> float:
        """Send the final answer to the user; the verifier's reward once the episode ends."""
        if not self.done:
            self._act(answer or "(no answer)")
        return self.reward


def _tool_method(function: dict[str, Any]) -> Callable[..., str]:
    """A method named as the tool, with typed parameters and an `Args:` docstring."""
    name = function["name"]
    parameters = function["parameters"].get("properties", {})
    required = set(function["parameters"].get("required", []))

    def method(self: TRLEnvironment, **arguments: Any) -> str:
        given = {k: v for k, v in arguments.items() if v is not None or k in required}
        return self._tool(name, given)

    signature = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    for key, schema in parameters.items():
        annotation = python_type(schema)
        if key not in required:
            annotation = Optional[annotation]  # noqa: UP045 - a runtime object, not syntax
        annotations[key] = annotation
        signature.append(
            inspect.Parameter(
                key,
                inspect.Parameter.KEYWORD_ONLY,
                default=inspect.Parameter.empty if key in required else None,
                annotation=annotation,
            )
        )
    annotations["return"] = str
    method.__name__ = method.__qualname__ = name
    method.__signature__ = inspect.Signature(signature, return_annotation=str)  # type: ignore[attr-defined]
    method.__annotations__ = annotations
    described = [
        f"    {key}: {' '.join(str(s.get('description') or key).split())}"
        for key, s in parameters.items()
    ]
    summary = " ".join(str(function.get("description") or name).split())
    method.__doc__ = summary + (
        "\n\nArgs:\n" + "\n".join(described) if described else ""
    )
    return method


def trl_environment_class(env_class: type[TaskEnv]) -> type[TRLEnvironment]:
    """The class to pass as `environment_factory`: one method per kit tool."""
    methods: dict[str, Any] = {"env_class": env_class}
    for schema in env_class.family.toolkit.schemas:
        methods[schema["function"]["name"]] = _tool_method(schema["function"])
    return type(f"{env_class.__name__}ForTRL", (TRLEnvironment,), methods)


def _final_answer(completion: Any) -> str:
    if isinstance(completion, str):
        return completion
    said = [
        str(m.get("content") or "")
        for m in completion
        if isinstance(m, dict) and m.get("role") == "assistant"
    ]
    return said[-1] if said else ""


def trl_reward(
    environments: Sequence[TRLEnvironment], completions: Sequence[Any]
) -> list[float]:
    """Each environment's verifier reward after the completion's final answer."""
    return [
        environment._finish(_final_answer(completion))
        for environment, completion in zip(environments, completions, strict=True)
    ]


def trl_rows(
    env_class: type[TaskEnv], size: int, first_seed: int = 0
) -> dict[str, list[Any]]:
    """Columns `prompt` (system and user messages of the task) and `seed`."""
    env = env_class()
    prompts, seeds = [], []
    for seed in range(first_seed, first_seed + size):
        observation, _ = env.reset(seed=seed)
        prompts.append(json.loads(observation))
        seeds.append(seed)
    return {"prompt": prompts, "seed": seeds}


def trl_dataset(env_class: type[TaskEnv], size: int, first_seed: int = 0) -> Any:
    """A `datasets.Dataset` of `{prompt, seed}` rows (needs the `datasets` library)."""
    from datasets import Dataset

    return Dataset.from_dict(trl_rows(env_class, size, first_seed))

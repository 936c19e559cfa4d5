"""Bridge to OpenEnv (`openenv>=0.10`): a package's environment as an OpenEnv server.

The action is the assistant's message with OpenAI's fields (`content`,
`tool_calls`); the observation carries the new messages (tool results or the
user's reply), the kit's tool schemas on reset, and OpenEnv's `reward` and
`done`. HTTP `/reset` and `/step` build a fresh environment per request (OpenEnv's
design), so an episode runs over the `/ws` session, as OpenEnv's `EnvClient`
does. OpenEnv and pydantic are imported only when called.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from .env import TaskEnv


def openenv_classes(env_class: type[TaskEnv]) -> tuple[type, type, type, type]:
    """(Environment subclass, Action, Observation, State) for `env_class`."""
    from typing import Literal, Optional

    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import (
        Action,
        EnvironmentMetadata,
        Observation,
        State,
    )
    from pydantic import BaseModel, Field

    family = env_class.family

    class FunctionCall(BaseModel):
        name: str
        arguments: str = "{}"

    class ToolCall(BaseModel):
        id: str
        type: Literal["function"] = "function"
        function: FunctionCall

    class MessageAction(Action):
        """An OpenAI assistant message: tool calls, or text for the user."""

        role: Literal["assistant"] = "assistant"
        content: Optional[str] = None  # noqa: UP045 - pydantic reads it at run time
        tool_calls: Optional[list[ToolCall]] = None  # noqa: UP045
        refusal: Optional[str] = None  # noqa: UP045 - sent by OpenAI clients

    class MessagesObservation(Observation):
        """The messages the environment adds; `tools` only on reset."""

        messages: list[dict[str, Any]] = Field(default_factory=list)
        tools: list[dict[str, Any]] = Field(default_factory=list)

    class EpisodeState(State):
        seed: Optional[int] = None  # noqa: UP045
        task_id: str = ""
        turn: int = 0

    class PackageEnvironment(Environment):
        SUPPORTS_CONCURRENT_SESSIONS = True  # every session builds its own TaskEnv

        def __init__(self) -> None:
            super().__init__()
            self.env = env_class()
            self._state = EpisodeState()

        def reset(
            self,
            seed: Optional[int] = None,  # noqa: UP045
            episode_id: Optional[str] = None,  # noqa: UP045
            **_: Any,
        ) -> MessagesObservation:
            observation, info = self.env.reset(seed=seed)
            self._state = EpisodeState(
                episode_id=episode_id or uuid.uuid4().hex,
                seed=seed,
                task_id=info["task_id"],
            )
            return MessagesObservation(
                messages=json.loads(observation),
                tools=list(info["tools"]),
                metadata={"task_id": info["task_id"]},
            )

        def step(
            self,
            action: MessageAction,
            timeout_s: Optional[float] = None,  # noqa: UP045
            **_: Any,
        ) -> MessagesObservation:
            message = action.model_dump(exclude_none=True, exclude={"metadata"})
            observation, reward, terminated, truncated, info = self.env.step(
                json.dumps(message)
            )
            self._state.step_count += 1
            self._state.turn = int(info.get("turn", self._state.turn + 1))
            ended = {k: info[k] for k in ("success", "verification") if k in info}
            return MessagesObservation(
                messages=json.loads(observation),
                reward=float(reward),
                done=bool(terminated or truncated),
                metadata={"truncated": bool(truncated), **ended},
            )

        @property
        def state(self) -> EpisodeState:
            return self._state

        def get_metadata(self) -> EnvironmentMetadata:
            return EnvironmentMetadata(
                name=family.name,
                description=f"{family.title}: {family.description}".strip(": "),
                version="0.1.0",
            )

    return PackageEnvironment, MessageAction, MessagesObservation, EpisodeState


def openenv_app(env_class: type[TaskEnv], max_sessions: int = 8) -> Any:
    """The FastAPI app (`create_app`) serving `env_class`; run it with uvicorn."""
    from openenv.core.env_server.http_server import create_app

    environment, action, observation, state = openenv_classes(env_class)
    return create_app(
        environment,
        action,
        observation,
        env_name=env_class.family.name,
        max_concurrent_envs=max_sessions,
        state_cls=state,
    )

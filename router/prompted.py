"""The prompted-base control: the base model told what the adapters were trained to do.

What training has to beat to be worth its cost: no adapter, the capabilities'
titles and descriptions (the specs the analysis wrote, kept in each adapter's
trace.json) appended to the target's system prompt. The target's environments
are wrapped (a gymnasium wrapper) so every episode opens with that prompt and
plays on unchanged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import gymnasium

from router.capabilities import CapabilitySet
from trainer.envs import EnvHandle

HEADING = "Some tasks need one of these skills; when a task needs one, apply it:"


def guidance(capabilities: CapabilitySet) -> str:
    """The text added to the system prompt: one line per capability."""
    lines = [f"- {c.title}: {c.description}" for c in capabilities.capabilities]
    return "\n".join([HEADING, *lines])


class Prompted(gymnasium.Wrapper, gymnasium.utils.RecordConstructorArgs):
    """An environment whose opening system message ends with `text` (one is added
    where the environment opens without one)."""

    def __init__(self, env: gymnasium.Env, text: str) -> None:
        gymnasium.utils.RecordConstructorArgs.__init__(self, text=text)
        gymnasium.Wrapper.__init__(self, env)
        self.text = text

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        observation, info = self.env.reset(seed=seed, options=options)
        messages = json.loads(observation)
        system = next((m for m in messages if m.get("role") == "system"), None)
        if system is None:
            messages.insert(0, {"role": "system", "content": self.text})
        else:
            system["content"] = f"{system.get('content') or ''}\n\n{self.text}".lstrip()
        return json.dumps(messages), info


@dataclass(frozen=True)
class PromptedHandle(EnvHandle):
    """Another handle's environments, each `Prompted` with `text`."""

    inner: EnvHandle | None = None
    text: str = ""

    def make(self, **kwargs: Any) -> gymnasium.Env:
        assert self.inner is not None  # set by `prompted`
        return Prompted(self.inner.make(**kwargs), self.text)


def prompted(handle: EnvHandle, text: str) -> PromptedHandle:
    """`handle` with `text` appended to the system prompt of every episode."""
    return PromptedHandle(
        handle.env_id, handle.package, handle.capability, handle, text
    )

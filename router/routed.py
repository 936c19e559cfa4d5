"""Routed inference: route each task on its first observation, hold the route, play it.

`Router` turns the scorer's label log-probs (or the probe's probabilities) into
a route per mode. `play` runs episodes with the trainer's rollout engine: the
route is taken once per task and the configuration it names stays active for
the whole episode; with the adapter bank's per-row configurations every task
shares one batch, otherwise each configuration plays in a batch of its own.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from router.adapters import row_config
from router.errors import RouterError
from router.modes import Route, argmax_route, top_p_route
from router.probe import Probe
from router.scorer import LabelScorer, Scores
from router.text import TextRouter
from trainer.envs import EnvHandle
from trainer.rollout import Episode, Generator, RolloutLimits, collect


@dataclass
class Task:
    """One evaluation or routing task: an environment, a seed, its true label, its first observation."""

    env: EnvHandle
    seed: int
    truth: str
    messages: list[dict[str, Any]]


def first_observation(env: EnvHandle, seed: int) -> list[dict[str, Any]]:
    """The messages an environment opens with on `seed` (system policy, user request)."""
    try:
        observation, _ = env.make().reset(seed=seed)
        messages = json.loads(observation)
    except Exception as exc:  # noqa: BLE001 - any environment failure is reported, not raised
        raise RouterError(
            f"{env.env_id} failed to reset on seed {seed} ({exc!r})"
        ) from None
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise RouterError(
            f"{env.env_id}: the first observation is not a JSON list of messages"
        )
    return messages


class Router:
    """Routes from one scoring pass: argmax and top-p on label probabilities, probe on features."""

    def __init__(
        self,
        scorer: LabelScorer,
        probe: Probe | None = None,
        top_p: float = 0.9,
        text: TextRouter | None = None,
    ) -> None:
        self.scorer = scorer
        self.probe = probe
        self.top_p = top_p
        self.text = text
        self.targets = scorer.prompt.targets

    def modes(self) -> list[str]:
        return (
            ["argmax", "top-p"]
            + (["probe"] if self.probe is not None else [])
            + (["text"] if self.text is not None else [])
        )

    def routes(
        self, scores: Scores, messages: list[dict[str, Any]]
    ) -> dict[str, Route]:
        """Every available mode's route for one task: its opening `messages` and their
        scores."""
        probabilities = self.scorer.probabilities(scores).tolist()
        routes = {
            "argmax": argmax_route(probabilities, self.targets),
            "top-p": top_p_route(probabilities, self.targets, self.top_p),
        }
        if self.probe is not None:
            features = scores.features.numpy()[None, :].astype(np.float64)
            routes["probe"] = argmax_route(
                self.probe.probabilities(features)[0].tolist(),
                self.probe.targets,
                "probe",
            )
        if self.text is not None:
            routes["text"] = argmax_route(
                self.text.probabilities(messages), self.text.targets, "text"
            )
        return routes

    def route(self, messages: list[dict[str, Any]], mode: str) -> Route:
        """The route of a first observation in `mode`."""
        routes = self.routes(self.scorer.score(messages), messages)
        if mode not in routes:
            raise RouterError(
                f"--mode {mode} is not available (have {', '.join(routes)}); "
                "`router fit` saves the probe and the text router"
            )
        return routes[mode]


def play(
    activate: Callable[[dict[str, float]], object],
    generator: Generator,
    tokenizer: Any,
    tasks: Sequence[Task],
    weights: Sequence[dict[str, float]],
    limits: RolloutLimits,
    tool_format: str,
    progress: str | None = None,
) -> list[Episode]:
    """One episode per task, task i played with configuration `weights[i]` held throughout.

    A generator with `configure` (`AdapterBank.generator`) decodes all tasks in
    one batch, whatever their environments, each row under its task's
    configuration. Any other plays one batch per configuration, made live by
    `activate(weights)` (`AdapterBank.activate_weights`, the vLLM generator's
    LoRARequest, llama.cpp's LoRA scales). `progress` names a bar of finished
    episodes (per batch).
    """
    if getattr(generator, "configure", None) is not None:
        configs = [row_config(w) for w in weights]
        return _together(
            tasks,
            lambda i, _: configs[i],
            generator,
            tokenizer,
            limits,
            tool_format,
            progress,
        )
    batches: dict[str, list[int]] = defaultdict(list)
    for index, chosen in enumerate(weights):
        batches[Route("play", "", chosen).key].append(index)
    played: list[Episode | None] = [None] * len(tasks)
    for indices in batches.values():
        activate(weights[indices[0]])
        episodes = _together(
            [tasks[i] for i in indices],
            lambda *_: None,
            generator,
            tokenizer,
            limits,
            tool_format,
            progress,
        )
        for index, episode in zip(indices, episodes, strict=True):
            played[index] = episode
    return [e for e in played if e is not None]


def _together(
    tasks: Sequence[Task],
    config_of: Callable[[int, Episode], Any],
    generator: Generator,
    tokenizer: Any,
    limits: RolloutLimits,
    tool_format: str,
    progress: str | None = None,
) -> list[Episode]:
    """One episode per task, every task in one batch (whatever its environment),
    each turn of task i decoded under `config_of(i, episode)`."""
    groups = collect(
        [task.env for task in tasks],
        generator,
        tokenizer,
        [task.seed for task in tasks],
        1,
        limits,
        tool_format,
        config_of=lambda episode: config_of(episode.group, episode),
        progress=progress,
    )
    return [episode for (episode,) in groups]


def new_errors(episode: Episode, seen: int) -> list[str]:
    """Texts of the episode's refused tool calls after the first `seen` ones."""
    errors = [
        str(m.get("content", ""))
        for m in episode.messages
        if m.get("role") == "tool" and m.get("error")
    ]
    return errors[seen:]


def with_observation(
    messages: list[dict[str, Any]], observation: str
) -> list[dict[str, Any]]:
    """A first observation whose request also shows what a tool just answered.

    The router reads the system policy and the first user message; re-routing
    gives it the request with the new observation appended, so a need the
    request could not show (a setting that is off) can now be seen.
    """
    system = next((m for m in messages if m.get("role") == "system"), None)
    user = next((m for m in messages if m.get("role") == "user"), {"content": ""})
    request = (
        f"{user.get('content') or ''}\n\nThe last tool call answered: {observation}"
    )
    return [*([system] if system else []), {"role": "user", "content": request}]


def play_rerouting(
    generator: Generator,
    router: Router,
    tokenizer: Any,
    tasks: Sequence[Task],
    first: Sequence[Route],
    mode: str,
    limits: RolloutLimits,
    tool_format: str,
    progress: str | None = None,
) -> tuple[list[Episode], list[list[str]]]:
    """Play each task from its first route, routing again whenever a tool call is refused.

    Held otherwise. The tasks share one batch, each turn decoded under its task's
    route of the moment, so `generator` must decode rows under their own
    configurations (see `play`); an episode routed elsewhere is encoded afresh
    under its new configuration. Returns the episodes and each task's sequence
    of route targets (one entry per route taken).
    """
    if getattr(generator, "configure", None) is None:
        raise RouterError(
            "re-routing needs a generator that decodes each row under its own "
            "configuration: TransformersGenerator(..., configure=bank.configure_rows)"
        )
    targets: list[list[str]] = [[route.target] for route in first]
    current = dict(enumerate(first))
    seen = dict.fromkeys(range(len(tasks)), 0)

    def config_of(index: int, episode: Episode) -> Any:
        errors = new_errors(episode, seen[index])
        if errors:
            seen[index] += len(errors)
            current[index] = router.route(
                with_observation(tasks[index].messages, errors[-1]), mode
            )
            targets[index].append(current[index].target)
        return row_config(current[index].weights)

    episodes = _together(
        tasks, config_of, generator, tokenizer, limits, tool_format, progress
    )
    return episodes, targets

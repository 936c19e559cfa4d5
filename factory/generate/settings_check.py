"""Refuse, before any build, settings that can never validate.

The task module runs in-process here on a few seeds (built-in archetypes are
this repository's own code; LLM-written ones are only ever run in the sandbox).
"""

from __future__ import annotations

import json
import time

from factory.errors import FactoryError
from factory.generate.render import exposed, resolve_difficulty, resolve_target
from factory.runtime import TaskEnv, TaskFamily, run_episode
from factory.spec import CapabilitySpec

PROBE_SEEDS = 8
MAX_SEEDS = 10_000
VALIDATION_BUDGET_S = 600.0


def check_seeds(seeds: int | None) -> None:
    """Exit-2 error for a `--seeds` outside [1, MAX_SEEDS]."""
    if seeds is not None and (isinstance(seeds, bool) or not 1 <= seeds <= MAX_SEEDS):
        raise FactoryError(
            f"--seeds must be an integer in [1, {MAX_SEEDS}], got {seeds}"
        )


def check_settings(
    spec: CapabilitySpec, seeds: int | None, budget_s: float = VALIDATION_BUDGET_S
) -> None:
    """Exit-2 errors for too few `max_turns`, or a validation over budget.

    Built-in archetypes only: an LLM-written module is never run outside the
    sandbox. `check_seeds` comes first, for every backend.
    """
    archetype, kit = resolve_target(spec)
    module = archetype.task_module(kit.id)
    resolve_difficulty(spec, archetype.knobs(kit.id))
    exposed(spec, kit)
    capability = json.loads(spec.to_json())
    capability["generation"]["max_turns"] = 10_000
    family = TaskFamily.from_module(module, capability)
    if spec.generation.tools is not None:
        called = {
            turn.name
            for seed in range(PROBE_SEEDS)
            for turn in family.generate(seed).gold_actions
            if turn.name in kit.tool_names
        }
        if missing := called - set(spec.generation.tools):
            raise FactoryError(
                f"generation.tools lacks {', '.join(sorted(missing))}, which the "
                "task's gold actions call; add them (or drop generation.tools)"
            )
    env_class = type("ProbeEnv", (TaskEnv,), {"family": family})
    started = time.perf_counter()
    longest = max(
        run_episode(env_class(), which, seed).turns
        for seed in range(PROBE_SEEDS)
        for which in ("gold", "lacking")
    )
    per_seed = (time.perf_counter() - started) / PROBE_SEEDS
    if longest > spec.generation.max_turns:
        raise FactoryError(
            f"generation.max_turns={spec.generation.max_turns} is too small: the scripted "
            f"policies need up to {longest} turns on seeds 0-{PROBE_SEEDS - 1}; set it "
            f"to at least {longest + 2}"
        )
    total = seeds or spec.generation.validation_seeds
    projected = per_seed * total
    if projected > budget_s:
        raise FactoryError(
            f"validating {total} seeds would take about {projected:.0f}s, over the "
            f"{budget_s:.0f}s limit; lower generation.validation_seeds or --seeds"
        )

"""generate: one verified training-environment package per retained capability
(and per archetype `generate.include` names, whatever the analysis found).

`factory generate` builds each package (template backend for a built-in
archetype on the target's kit, the LLM backend when an endpoint is configured)
and runs its property suite in the sandbox (each package shows the target's
prompt: the kit's tools the target shows the agent, and the target's policy,
so an adapter trains on the prompt it will be used with); a capability no
backend can build is reported with the reason, and the run goes on with the others.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from factory.outputs import write_json, write_text
from trace_pipeline.context import Context
from trace_pipeline.errors import PipelineError


@dataclass(frozen=True)
class Prompt:
    """What the target shows the agent: its tools' names and its policy text."""

    tools: list[str]
    policy: str | None  # None: a target whose policy is not a kit's (tau2, gym)


def target_prompt(context: Context) -> Prompt | None:
    """The target's prompt, when packages should show the same."""
    if not (context.config.generate.target_prompt and context.config.target.playable):
        return None
    env = context.target().make()
    try:
        tools = env.reset(seed=0)[1].get("tools") or []
        toolkit = getattr(env.unwrapped, "toolkit", None)
    finally:
        env.close()
    return Prompt(
        tools=[
            t["function"]["name"]
            for t in tools
            if isinstance(t, dict) and "function" in t
        ],
        policy=toolkit.policy
        if isinstance(getattr(toolkit, "policy", None), str)
        else None,
    )


def as_configured(
    spec: Path, prompt: Prompt | None, reward_mode: str, folder: Path
) -> Path:
    """`spec` as this run builds it (a copy where that changes it): paying
    `reward_mode` (`generation.reward_mode`), and showing the target's prompt:
    `generation.tools`, the target's tools of its kit, and `generation.policy`,
    the target's policy when every tool the target shows is the kit's (a policy
    written for another kit stays out)."""
    from factory.kits import kits

    data = json.loads(spec.read_text(encoding="utf-8"))
    generation = data.setdefault("generation", {})
    changed = generation.get("reward_mode", "binary") != reward_mode
    generation["reward_mode"] = reward_mode
    kit = kits().get(str(data.get("target")))
    shared = [
        name
        for name in (prompt.tools if prompt is not None else [])
        if kit is not None and name in kit.tool_names
    ]
    # another kit than the target's keeps all its tools and policy
    if prompt is not None and shared:
        generation["tools"] = shared
        if prompt.policy and len(shared) == len(prompt.tools):  # a policy of this kit
            generation["policy"] = prompt.policy
        changed = True
    if not changed:
        return spec
    folder.mkdir(parents=True, exist_ok=True)
    write_json(folder / spec.name, data)
    return folder / spec.name


def included_spec(name: str, kit: str, folder: Path, setting: str) -> Path:
    """The spec of archetype `name` on `kit` with its default knobs and no evidence:
    a capability `setting` (generate.include, baselines.untargeted) asks for
    whatever the analysis found."""
    from factory.archetypes import archetypes
    from factory.spec import CapabilitySpec

    archetype = archetypes()[name]
    if kit not in archetype.kits:
        raise PipelineError(
            f"{setting}: {name} has no task module for the target's kit {kit} "
            f"(it has {', '.join(archetype.kits)}); drop it from {setting}"
        )
    spec = CapabilitySpec(
        name=name,
        title=archetype.title,
        description=archetype.description,
        archetype=name,
        target=kit,
    )
    folder.mkdir(parents=True, exist_ok=True)
    write_text(folder / f"{name}.json", spec.to_json())
    return folder / f"{name}.json"


def build(
    context: Context, source: Path, prompt: Prompt | None, out: Path
) -> tuple[str | None, str]:
    """The verified package of spec `source` showing `prompt`, built in `out/envs`:
    (its folder relative to `out`, "") or (None, why no backend could build it)."""
    from factory.errors import FactoryError
    from factory.generate.build import Codegen, generate

    name = source.stem
    spec = as_configured(
        source, prompt, context.config.generate.reward_mode, out / "specs"
    )
    try:
        package, report = generate(
            spec,
            out / "envs",
            validate=True,
            seeds=context.config.generate.validation_seeds,
            codegen=Codegen(backend=context.config.generate.backend),
        )
    except FactoryError as exc:
        why = str(exc).splitlines()[0][:300]
        context.say(f"generate: {name} skipped ({why})")
        return None, why
    if report is not None and not report.tests_passed:
        return None, f"its property suite failed: {report.tests_summary[:200]}"
    context.say(f"generate: {name} -> {package}")
    return str(package.resolve().relative_to(out.resolve())), ""


def run(context: Context, out: Path) -> dict[str, Any]:
    """A verified package for each retained capability a backend can build, and for
    each archetype `generate.include` names."""
    analysis = context.folder.manifest("analyze") or {}
    specs = analysis.get("result", {}).get("specs", {})
    retained = analysis.get("result", {}).get("retained", [])
    include = [n for n in context.config.generate.include if n not in retained]
    if not retained and not include:
        why = analysis.get("result", {}).get("why_nothing") or "see its report"
        raise PipelineError(
            f"generate: the analysis retained no capability ({why}); nothing to train. "
            f"Read {context.folder.stage('analyze') / 'analysis' / 'report.md'}, or name "
            "archetypes in generate.include to train them anyway"
        )
    prompt = target_prompt(context)
    kit = context.config.target.kit
    built: dict[str, str] = {}
    skipped: dict[str, str] = {}
    for name in [*retained, *include]:
        if name in retained and len(built) == context.config.generate.max_packages:
            skipped[name] = f"generate.max_packages ({len(built)}) already built"
            continue
        source = (
            context.folder.stage("analyze") / specs[name]
            if name in retained
            else included_spec(name, kit, out / "included", "generate.include")
        )
        package, why = build(context, source, prompt, out)
        if package is None:
            skipped[name] = why
        else:
            built[name] = package
    if skipped and not built:  # nothing to train: kept as done, a rerun would skip it
        reasons = "; ".join(f"{name}: {why}" for name, why in skipped.items())
        raise PipelineError(
            f"generate: no package could be built ({reasons[:600]}); fix the cause "
            "and run again"
        )
    return {
        "packages": built,
        "included": [name for name in include if name in built],
        "skipped": skipped,
    }

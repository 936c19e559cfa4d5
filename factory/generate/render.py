"""Render a capability spec into the files of a standalone environment package.

Rendering is pure and deterministic: the same spec gives byte-identical files.
The capability is the archetype's task module, copied as `task.py`; the runtime
and the kit are copied verbatim into `_runtime/`; jinja2 renders only the
metadata files (pyproject, README, `__init__`, the integration modules, the
test stub).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Any

from factory.archetypes import Archetype, archetypes, supported_pairs
from factory.errors import FactoryError
from factory.generate.format import format_python
from factory.generate.runtime_copy import runtime_files
from factory.generate.task_module import package_task_source
from factory.kits import kits
from factory.package_layout import PackageNames
from factory.paths import templates
from factory.runtime import Knob, Toolkit
from factory.runtime.task import resolve_knobs
from factory.runtime.verifier import REWARD_SENTENCES
from factory.spec import CapabilitySpec


def resolve_target(spec: CapabilitySpec) -> tuple[Archetype, Toolkit]:
    """The archetype and kit a spec asks for, or a FactoryError saying what is supported."""
    known = archetypes()
    pairs = ", ".join(f"{a}/{k}" for a, k in supported_pairs())
    if spec.archetype is None or not isinstance(spec.target, str):
        raise FactoryError(
            f"capability '{spec.name}' is custom (archetype null or an inline target); "
            "the offline template backend builds built-in archetypes on built-in kits "
            f"only ({pairs}). Set 'archetype' and 'target' to one of those pairs."
        )
    if spec.archetype not in known:
        raise FactoryError(
            f"archetype: unknown archetype '{spec.archetype}'; "
            f"known: {', '.join(known)} (see `factory kits`)"
        )
    if spec.target not in kits():
        raise FactoryError(
            f"target: unknown kit '{spec.target}'; known: {', '.join(kits())} "
            "(see `factory kits`)"
        )
    archetype = known[spec.archetype]
    if spec.target not in archetype.kits:
        raise FactoryError(
            f"archetype '{archetype.id}' is not supported on kit '{spec.target}'; "
            f"it runs on: {', '.join(archetype.kits)} (see `factory kits`)"
        )
    return archetype, kits()[spec.target]


def resolve_difficulty(spec: CapabilitySpec, knobs: tuple[Knob, ...]) -> dict[str, int]:
    """The task module's default knobs updated with the spec's; bad knobs fail."""
    try:
        return resolve_knobs(knobs, spec.generation.difficulty, "generation.difficulty")
    except ValueError as exc:
        raise FactoryError(f"{exc}; see `factory kits` for every knob") from None


def exposed(spec: CapabilitySpec, kit: Toolkit) -> Toolkit:
    """The kit as the package shows it (`generation.tools`, `generation.policy`);
    unknown tools fail."""
    try:
        return kit.shown(spec.generation.tools, spec.generation.policy)
    except ValueError as exc:
        raise FactoryError(f"generation.tools: {exc}") from None


@dataclass(frozen=True)
class TaskSource:
    """A capability's task module and what the package's text says about it.

    The template backend takes it from a built-in archetype; the LLM codegen
    from the model's answer (whose code is never imported in this process).
    """

    kit: Toolkit
    source: str
    knobs: tuple[Knob, ...]
    summary: str  # how a seed builds a task
    family: str  # the task family's title
    about: str  # what the capability is
    lacking: str  # what an agent without it does
    origin: str  # where the task module came from, for the README
    kit_files: dict[str, str] | None = None  # an inline target's kit; None: built in


def template_task(spec: CapabilitySpec) -> TaskSource:
    """The built-in archetype's task module for `spec` (FactoryError if none fits)."""
    archetype, kit = resolve_target(spec)
    return TaskSource(
        kit=kit,
        source=archetype.task_source(kit.id).read_text(encoding="utf-8"),
        knobs=archetype.knobs(kit.id),
        summary=archetype.task_summary(kit.id),
        family=archetype.title,
        about=archetype.description,
        lacking=archetype.lacking_behaviour,
        origin=f"archetype `{archetype.id}`",
    )


def _task_docstring(spec: CapabilitySpec, task: TaskSource) -> str:
    """What `task.py` trains and how its reward is computed, in plain words."""
    paragraphs = [
        f"{spec.title}: the `{spec.name}` capability, on the {task.kit.title} tools.",
        spec.description,
        f"Each seed builds one task ({task.family.lower()} family): "
        + task.summary[0].lower()
        + task.summary[1:],
        "Reward (`_runtime/verifier.py`): the gold final state is the initial state "
        "with the gold tool calls replayed; reward mode "
        f"`{spec.generation.reward_mode}` pays "
        + REWARD_SENTENCES[spec.generation.reward_mode]
        + " Knob values come from capability.json (generation.difficulty).",
    ]
    return "\n\n".join(
        textwrap.fill(" ".join(p.split()), 76, break_on_hyphens=False)
        for p in paragraphs
    )


def render_package(
    spec: CapabilitySpec, task: TaskSource | None = None
) -> dict[str, str]:
    """All files of the package for `spec`, as {relative path: text}.

    `task` defaults to the built-in archetype's task module (template backend).
    """
    task = task or template_task(spec)
    names = PackageNames(spec.name)
    kit, knobs, summary = task.kit, task.knobs, task.summary
    context: dict[str, Any] = {
        "name": spec.name,
        "title": spec.title,
        "description": spec.description,
        "camel": names.camel,
        "package": names.package,
        "distribution": names.distribution,
        "env_id": names.env_id,
        "origin": task.origin,
        "about": task.about,
        "lacking": task.lacking,
        "task_summary": summary,
        "kit": exposed(spec, kit),
        "knobs": knobs,
        "difficulty": resolve_difficulty(spec, knobs),
        "max_turns": spec.generation.max_turns,
        "reward_mode": spec.generation.reward_mode,
        "reward_sentence": REWARD_SENTENCES[spec.generation.reward_mode],
    }
    env = templates()
    layout = {
        "pyproject.toml": "package/pyproject.toml.j2",
        "README.md": "package/README.md.j2",
        f"{names.package}/__init__.py": "package/__init__.py.j2",
        f"{names.package}/integrations.py": "package/integrations.py.j2",
        f"{names.package}/verifiers_env.py": "package/verifiers_env.py.j2",
        f"tests/test_{spec.name}_properties.py": "package/tests/test_properties.py.j2",
    }
    files = {path: env.get_template(t).render(context) for path, t in layout.items()}
    files[f"{names.package}/task.py"] = package_task_source(
        task.source, _task_docstring(spec, task)
    )
    files = format_python(files)
    files["capability.json"] = spec.to_json()
    for path, text in runtime_files(kit.id, task.kit_files).items():
        files[f"{names.package}/_runtime/{path}"] = text
    return files

"""Render a capability spec into the files of a standalone environment package.

Rendering is pure and deterministic: the same spec gives byte-identical files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import jinja2

from factory.catalog.archetypes import ARCHETYPES, Archetype, supported_pairs
from factory.catalog.kits import Kit, load_kits
from factory.errors import FactoryError
from factory.generate.format import format_python
from factory.paths import templates_dir
from factory.spec import CapabilitySpec

REWARD_SENTENCES = {
    "binary": (
        "1.0 when the final state matches the gold state and every required fact "
        "was told to the user, else 0.0."
    ),
    "partial": "the mean of the state match and of each required fact's check.",
}


@dataclass(frozen=True)
class PackageNames:
    """The names a capability gets in Python, on PyPI and in gymnasium."""

    capability: str

    @property
    def package(self) -> str:
        return f"trace_env_{self.capability}"

    @property
    def distribution(self) -> str:
        return f"trace-env-{self.capability.replace('_', '-')}"

    @property
    def camel(self) -> str:
        return "".join(part.capitalize() for part in self.capability.split("_"))

    @property
    def env_id(self) -> str:
        return f"trace/{self.camel}-v0"


def resolve_target(spec: CapabilitySpec) -> tuple[Archetype, Kit]:
    """The archetype and kit a spec asks for, or a FactoryError saying what is supported."""
    kits = load_kits()
    pairs = ", ".join(f"{a}/{k}" for a, k in supported_pairs())
    if spec.archetype is None or not isinstance(spec.target, str):
        raise FactoryError(
            f"capability '{spec.name}' is custom (archetype null or an inline target); "
            "the offline template backend builds built-in archetypes on built-in kits "
            f"only ({pairs}). Set 'archetype' and 'target' to one of those pairs."
        )
    if spec.archetype not in ARCHETYPES:
        raise FactoryError(
            f"archetype: unknown archetype '{spec.archetype}'; "
            f"known: {', '.join(ARCHETYPES)} (see `factory kits`)"
        )
    if spec.target not in kits:
        raise FactoryError(
            f"target: unknown kit '{spec.target}'; known: {', '.join(kits)} "
            "(see `factory kits`)"
        )
    archetype = ARCHETYPES[spec.archetype]
    if spec.target not in archetype.kits:
        raise FactoryError(
            f"archetype '{archetype.id}' is not supported on kit '{spec.target}'; "
            f"it runs on: {', '.join(archetype.kits)} (see `factory kits`)"
        )
    return archetype, kits[spec.target]


def resolve_difficulty(spec: CapabilitySpec, archetype: Archetype) -> dict[str, int]:
    """The archetype's default knobs updated with the spec's; bad knobs fail."""
    knobs = {knob.name: knob for knob in archetype.knobs}
    difficulty = archetype.default_difficulty()
    for key, value in spec.generation.difficulty.items():
        knob = knobs.get(key)
        if knob is None:
            raise FactoryError(
                f"generation.difficulty.{key}: unknown knob for archetype "
                f"'{archetype.id}'; allowed: {', '.join(knobs)}"
            )
        if not knob.minimum <= value <= knob.maximum:
            raise FactoryError(
                f"generation.difficulty.{key}: {value} is out of range; "
                f"allowed {knob.minimum}..{knob.maximum} ({knob.help})"
            )
        difficulty[key] = value
    return difficulty


def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )


def _schemas_literal(kit: Kit) -> str:
    """Tool schemas as a json.loads(...) of a raw string: readable and formatter-stable."""
    text = json.dumps(list(kit.tools), indent=4, ensure_ascii=True)
    if "'''" in text:
        raise FactoryError(f"kit '{kit.id}' tool schemas may not contain '''")
    return f"json.loads(\n    r'''\n{text}\n'''\n)"


def render_package(spec: CapabilitySpec) -> dict[str, str]:
    """All files of the package for `spec`, as {relative path: text}."""
    archetype, kit = resolve_target(spec)
    names = PackageNames(spec.name)
    context: dict[str, Any] = {
        "name": spec.name,
        "title": spec.title,
        "description": spec.description,
        "camel": names.camel,
        "package": names.package,
        "distribution": names.distribution,
        "env_id": names.env_id,
        "archetype": archetype,
        "archetype_template": archetype.template(kit.id),
        "kit": kit,
        "difficulty": resolve_difficulty(spec, archetype),
        "max_turns": spec.generation.max_turns,
        "reward_mode": spec.generation.reward_mode,
        "reward_sentence": REWARD_SENTENCES[spec.generation.reward_mode],
        "tool_schemas": _schemas_literal(kit),
    }
    env = _environment()
    layout = {
        "pyproject.toml": "package/pyproject.toml.j2",
        "README.md": "package/README.md.j2",
        f"{names.package}/__init__.py": "package/__init__.py.j2",
        f"{names.package}/tools.py": "package/tools.py.j2",
        f"{names.package}/generator.py": "package/generator.py.j2",
        f"{names.package}/verifier.py": "package/verifier.py.j2",
        f"{names.package}/policies.py": "package/policies.py.j2",
        f"{names.package}/env.py": "package/env.py.j2",
        f"tests/test_{spec.name}_properties.py": "package/tests/test_properties.py.j2",
    }
    files = {path: env.get_template(t).render(context) for path, t in layout.items()}
    files["capability.json"] = spec.to_json()
    return format_python(files)

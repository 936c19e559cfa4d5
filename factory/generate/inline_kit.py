"""The kit of an inline target: kit.json from the spec, tools and world from the model.

The spec fixes the interface (tool names, parameters, policy), so the model can
not change it: `kit.json` is written here from the spec, and the model's
`tools.py` must implement exactly those schemas (`code_checks.check_kit_modules`).
The kit's id is the capability's name, so it never collides with a built-in kit.
"""

from __future__ import annotations

import json

from factory.generate.format import format_python
from factory.paths import templates
from factory.runtime import Toolkit
from factory.spec import CapabilitySpec, InlineTarget

SYSTEM_PROMPT = (
    "You are an assistant that acts for the user through tools. Follow the policy; "
    "look values up with the tools instead of guessing them."
)


def _target(spec: CapabilitySpec) -> InlineTarget:
    if not isinstance(spec.target, InlineTarget):
        raise TypeError(
            f"capability '{spec.name}' has a built-in kit, not an inline target"
        )
    return spec.target


def kit_json(spec: CapabilitySpec) -> dict[str, object]:
    """kit.json of the inline target: the spec's schemas and policy, verbatim."""
    target = _target(spec)
    return {
        "id": spec.name,
        "title": spec.title,
        "benchmark": "the user's target (inline in capability.json)",
        "system_prompt": SYSTEM_PROMPT,
        "policy": target.policy,
        "tools": target.schemas(),
    }


def interface(spec: CapabilitySpec) -> Toolkit:
    """The kit's interface without implementations (what the prompt shows)."""
    data = kit_json(spec)
    return Toolkit(
        id=spec.name,
        title=spec.title,
        benchmark=str(data["benchmark"]),
        system_prompt=SYSTEM_PROMPT,
        policy=str(data["policy"]),
        schemas=tuple(data["tools"]),  # type: ignore[arg-type]
        implementations={},
    )


def kit_files(spec: CapabilitySpec, tools: str, world: str) -> dict[str, str]:
    """The kit folder's files: {name: text} for `_runtime/kits/<name>/`."""
    init = templates().get_template("codegen/kit_init.py.j2")
    modules = format_python(
        {
            "__init__.py": init.render(title=spec.title, name=spec.name),
            "tools.py": tools,
            "world.py": world,
        }
    )
    return {**modules, "kit.json": json.dumps(kit_json(spec), indent=2) + "\n"}

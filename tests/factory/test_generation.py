"""Every supported (archetype, kit) pair generates a package that validates."""

from __future__ import annotations

import pytest

from factory.archetypes import supported_pairs
from factory.generate.build import generate
from factory.generate.render import render_package
from factory.spec import CapabilitySpec, load_spec
from tests.conftest import EXAMPLES, ROOT


def fresh_spec(archetype: str, kit: str) -> CapabilitySpec:
    """A spec with a name and description not in the repository."""
    return CapabilitySpec(
        name=f"fresh_{archetype}_on_{kit}",
        title=f"Fresh {archetype} on {kit}",
        description=f"A capability spec written by the test for {archetype} on {kit}.",
        archetype=archetype,
        target=kit,
        generation={"max_turns": 25, "reward_mode": "partial"},
    )


@pytest.mark.parametrize(("archetype", "kit"), supported_pairs())
def test_every_supported_pair_generates_and_validates(tmp_path, archetype, kit):
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(fresh_spec(archetype, kit).to_json())
    destination, report = generate(spec_path, tmp_path / "envs", seeds=20)
    assert report is not None and report.problems == [], report.summary()
    assert report.success_rate("gold") == 1.0 and report.success_rate("lacking") == 0.0
    assert (destination / f"trace_env_fresh_{archetype}_on_{kit}" / "task.py").is_file()


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.json")), ids=lambda p: p.stem)
def test_committed_packages_are_exactly_what_the_factory_renders(path):
    files = render_package(load_spec(path))
    package_dir = ROOT / "generated_envs" / path.stem
    on_disk = {
        str(p.relative_to(package_dir)): p.read_text(encoding="utf-8")
        for p in package_dir.rglob("*")
        if p.is_file()
        and not any(
            part.startswith((".", "__pycache__"))
            for part in p.relative_to(package_dir).parts
        )
    }
    assert on_disk == files, "regenerate with: factory generate SPEC --force"


def test_rendering_is_deterministic():
    spec = load_spec(EXAMPLES / "date_time_recovery.json")
    assert render_package(spec) == render_package(spec)

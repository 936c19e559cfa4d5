"""generate: one verified training-environment package per retained capability.

`factory generate` builds each package (template backend for a built-in
archetype on the target's kit, the LLM backend when an endpoint is configured)
and runs its property suite in the sandbox; a capability no backend can build
is reported with the reason, and the run goes on with the others.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trace_pipeline.context import Context


def run(context: Context, out: Path) -> dict[str, Any]:
    from factory.errors import FactoryError
    from factory.generate.build import Codegen, generate

    analysis = context.folder.manifest("analyze") or {}
    specs = analysis.get("result", {}).get("specs", {})
    built, skipped = {}, {}
    for name in analysis.get("result", {}).get("retained", []):
        if len(built) == context.config.generate.max_packages:
            skipped[name] = f"generate.max_packages ({len(built)}) already built"
            continue
        spec = context.folder.stage("analyze") / specs[name]
        try:
            package, report = generate(
                spec,
                out / "envs",
                validate=True,
                seeds=context.config.generate.validation_seeds,
                codegen=Codegen(backend=context.config.generate.backend),
            )
        except FactoryError as exc:
            skipped[name] = str(exc).splitlines()[0][:300]
            context.say(f"generate: {name} skipped ({skipped[name]})")
            continue
        if report is not None and not report.tests_passed:
            skipped[name] = f"its property suite failed: {report.tests_summary[:200]}"
            continue
        built[name] = str(package.resolve().relative_to(out.resolve()))
        context.say(f"generate: {name} -> {package}")
    return {"packages": built, "skipped": skipped}

"""analyze: `factory analyze` on the agent's own trajectories, scored against the target's truth."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trace_pipeline.context import Context
from trace_pipeline.errors import PipelineError


def run(context: Context, out: Path) -> dict[str, Any]:
    """`factory analyze` on collect's trajectories, scored against the target's truth."""
    from factory.analyze.pipeline import run_analysis
    from factory.errors import FactoryError

    collected = context.folder.stage("collect")
    try:
        analysis, specs = run_analysis(
            [collected / "trajectories.jsonl"],
            context.config.target.kit,
            out / "analysis",
            context.config.analyze,
            truth=truth if (truth := collected / "truth.json").is_file() else None,
        )
    except FactoryError as exc:
        raise PipelineError(f"analyze: {exc}") from None
    rows = json.loads((out / "analysis" / "report.json").read_text(encoding="utf-8"))
    retained = sorted(
        (s for s in analysis.selections if s.retained),
        key=lambda s: -s.full.gap * s.full.coverage,
    )
    names = [s.capability for s in retained]
    context.say(f"analyze: retained {', '.join(names) or 'nothing'}")
    return {
        "retained": names,
        "specs": {p.stem: str(p.relative_to(out)) for p in specs if p.stem in names},
        "capabilities": rows["capabilities"],
        "labelling_accuracy": rows.get("labelling_accuracy"),
        "why_nothing": rows["settings"].get("why_nothing"),
    }

"""The probe's examples from the analysis split: labelled by the analysis, one surface."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trace_pipeline.config import PipelineConfig
from trace_pipeline.context import Context
from trace_pipeline.errors import PipelineError
from trace_pipeline.stages.route import analysis_examples
from trace_pipeline.store import RunFolder

TARGETS = ["date_time_recovery", "permission_error_recovery", "base"]


def _run(request: str, success: bool, lacking: tuple[str, ...]) -> tuple[dict, dict]:
    messages = [
        {"role": "system", "content": "policy"},
        {"role": "user", "content": request},
        {"role": "assistant", "content": "done"},
    ]
    labels = {
        name: {"label": "LACKING" if name in lacking else "HAS", "reason": ""}
        for name in ("date_time_recovery", "permission_error_recovery", "other")
    }
    return {"messages": messages}, {"success": success, "labels": labels}


def _context(tmp_path: Path, runs: list[tuple[dict, dict]]) -> Context:
    folder = tmp_path / "analyze" / "analysis"
    folder.mkdir(parents=True)
    for name, rows in (
        ("trajectories", [r for r, _ in runs]),
        ("labels", [row for _, row in runs]),
    ):
        (folder / f"{name}.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in rows)
        )
    return Context(
        PipelineConfig(model="tiny"), RunFolder(tmp_path), tmp_path / "c.yaml"
    )


def test_analysis_examples_label_successes_base_and_failures_by_what_they_lacked(
    tmp_path: Path,
) -> None:
    context = _context(
        tmp_path,
        [
            _run("plain", True, ()),
            _run("relative", False, ("date_time_recovery",)),
            _run("both", False, ("permission_error_recovery", "date_time_recovery")),
            _run("unknown", False, ("other",)),  # no adapter mends it: left out
            _run("plain again", True, ("permission_error_recovery",)),
            _run("plain, third", True, ()),
        ],
    )
    examples = analysis_examples(context, TARGETS, count=2)
    assert [(m[-1]["content"], label) for m, label in examples] == [
        ("plain", "base"),
        ("relative", "date_time_recovery"),
        ("both", "date_time_recovery"),  # the first routed capability, in label order
        ("plain again", "base"),  # a success needs nothing, whatever was flagged
    ]
    # Only the opening (policy and request) is kept: what the router sees.
    assert all(
        [m["role"] for m in messages] == ["system", "user"] for messages, _ in examples
    )


def test_an_analysis_row_of_the_wrong_shape_names_the_folder_and_the_fix(
    tmp_path: Path,
) -> None:
    context = _context(tmp_path, [({"messages": []}, {"labels": {}})])
    with pytest.raises(
        PipelineError, match="analysis holds a run the probe cannot read.*rerun"
    ):
        analysis_examples(context, TARGETS, count=2)

"""`factory analyze`: import runs, label them, contrast, select, write report and specs.

Outputs (written to a temporary folder and moved into place when complete):
report.md, report.json, capabilities.png, labels.jsonl, trajectories.jsonl and
capabilities/<name>.json, one spec per retained capability.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from tqdm import tqdm

from factory.analyze import report
from factory.analyze.detectors import builtin_dictionary, label_offline
from factory.analyze.importers import import_paths
from factory.analyze.settings import AnalysisSettings
from factory.analyze.specs import build_spec
from factory.analyze.statistics import (
    Labelled,
    Selection,
    bootstrap,
    majority,
    select,
    why_nothing,
)
from factory.analyze.truth import load_truth, score
from factory.errors import FactoryError
from factory.kits import kits as load_kits
from factory.outputs import (
    recover,
    regular_file,
    staging_beside,
    swap_in,
    unwritable_as,
)
from factory.spec import InlineTarget
from factory.trajectory.labels import Capability, Judgement, Label
from factory.trajectory.records import Trajectory, write_jsonl

# One labelling run: for each trajectory, a judgement per capability name.
LabelRun = list[dict[str, Judgement]]


@dataclass
class Analysis:
    """What the analysis found."""

    trajectories: list[Trajectory]
    capabilities: list[Capability]
    labels: LabelRun
    selections: list[Selection]
    skipped: list[str]
    ignored: list[str] = field(default_factory=list)  # input files holding no runs
    truth: dict[str, Any] | None = None  # accuracy against --truth labels


MAX_TARGET_BYTES = 10_000_000


def resolve_target(target: str, label: str = "--target") -> str | dict[str, Any]:
    """A built-in kit id, or an inline target read from a tools JSON file (errors name
    the setting as `label`)."""
    kits = load_kits()
    if target in kits:
        return target
    path = Path(target)
    if not path.is_file():
        raise FactoryError(
            f"{label}: '{target}' is neither a kit ({', '.join(kits)}) nor a tools JSON file"
        )
    try:
        with path.open(encoding="utf-8") as handle:
            text = handle.read(MAX_TARGET_BYTES + 1)
        data = json.loads(text)
    except UnicodeDecodeError as exc:
        raise FactoryError(
            f"{label} {path}: not UTF-8 text (byte {exc.start})"
        ) from None
    except json.JSONDecodeError as exc:
        raise FactoryError(f"{label} {path}: not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise FactoryError(f"{label} {path}: JSON nested too deeply") from None
    except OSError as exc:
        raise FactoryError(f"{label} {path}: cannot be read ({exc.strerror})") from None
    if len(text) > MAX_TARGET_BYTES:
        raise FactoryError(f"{label} {path}: larger than 10 MB; give the tools alone")
    if isinstance(data, list):
        data = {"tools": data}
    if not isinstance(data, dict):
        raise FactoryError(
            f"{label} {path}: give a list of OpenAI tool schemas, or an object with "
            "'tools' (that list), 'policy' and 'state'"
        )
    target = {
        "tools": data.get("tools"),
        "policy": data.get("policy") or "(not given: describe the target's policy)",
        "state": data.get("state") or "(not given: describe the target's state)",
    }
    try:  # checked whole now, not when the specs are written after the analysis
        InlineTarget.model_validate(target)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(file)"
        raise FactoryError(
            f"{label} {path}: field '{where}': {first['msg']}; give OpenAI tool schemas "
            '({"type": "function", "function": {"name": ..., "parameters": ...}})'
        ) from None
    return target


MARKER = ".trace-analysis"  # in every output folder analyze writes; --force needs it


def _inside(path: Path, folder: Path) -> bool:
    path, folder = path.resolve(), folder.resolve()
    return path == folder or folder in path.parents


def _check_writable(folder: Path, flag: str) -> None:
    """Refuse, before any work, a folder where the outputs cannot be written."""
    with unwritable_as(FactoryError, f"{flag} {folder}"):
        folder.mkdir(parents=True, exist_ok=True)
        os.rmdir(tempfile.mkdtemp(prefix=".trace-probe-", dir=folder))


def refuse_overwrite(output: Path, force: bool, inputs: Sequence[Path] = ()) -> None:
    """Refuse an output that is a file, holds or sits in an input, or is not ours to replace."""
    if output.is_symlink() or (output.exists() and not output.is_dir()):
        raise FactoryError(f"--out {output} is a file or a link; give a folder")
    for given in inputs:
        if _inside(given, output):
            raise FactoryError(
                f"--out {output} holds the input {given}; analyze never replaces its "
                "inputs: choose another --out"
            )
        if given.is_dir() and _inside(output, given):
            raise FactoryError(
                f"--out {output} is inside the input folder {given}; a later analysis "
                "of that folder would read these outputs: choose another --out"
            )
    if os.path.ismount(output):
        raise FactoryError(
            f"--out {output} is a mount point, which cannot be replaced atomically; "
            "give a folder inside it"
        )
    _check_writable(output.parent, "--out")
    if not (output.is_dir() and any(output.iterdir())):
        return
    if not force:
        raise FactoryError(
            f"{output} exists and is not empty; pass --force to replace it"
        )
    if not regular_file(output / MARKER):
        raise FactoryError(
            f"{output} was not written by factory analyze (no {MARKER}); --force "
            "replaces only analyze's own outputs: choose another --out"
        )


def label_all(
    trajectories: Sequence[Trajectory],
    capabilities: Sequence[Capability],
    labeller: Callable[[Trajectory, Capability], Judgement] = label_offline,
) -> LabelRun:
    """Judge every (trajectory, capability) pair, with a progress bar."""
    return [
        {c.name: labeller(t, c) for c in capabilities}
        for t in tqdm(trajectories, desc="labelling", unit="traj", leave=False)
    ]


def _labelled(run: LabelRun, success: list[bool]) -> Labelled:
    """(labels by capability, success) per trajectory, as the statistics take them."""
    return [
        ({name: judgement.label for name, judgement in row.items()}, passed)
        for row, passed in zip(run, success, strict=True)
    ]


def _merge_runs(label_runs: list[LabelRun]) -> LabelRun:
    """Per trajectory and capability: the majority label, with a reason given for it."""
    plain = [
        [{n: j.label for n, j in row.items()} for row in run] for run in label_runs
    ]
    merged = majority(plain)
    return [
        {
            name: next(
                run[i][name] for run in label_runs if run[i][name].label is label
            )
            for name, label in row.items()
        }
        for i, row in enumerate(merged)
    ]


def analyze(
    trajectories: list[Trajectory],
    settings: AnalysisSettings,
    capabilities: list[Capability] | None = None,
    label_runs: list[LabelRun] | None = None,
) -> Analysis:
    """Label (offline, unless LLM runs are given), then select capabilities as in the paper."""
    capabilities = capabilities or builtin_dictionary()
    success = [t.success for t in trajectories]
    if label_runs is None:
        labels = label_all(trajectories, capabilities)
        runs = bootstrap(_labelled(labels, success), settings.runs, settings.seed)
    else:
        labels = _merge_runs(label_runs)
        runs = [_labelled(run, success) for run in label_runs]
    selections = select(
        _labelled(labels, success),
        runs,
        [c.name for c in capabilities],
        settings.rho,
        settings.delta,
        settings.min_runs,
    )
    return Analysis(list(trajectories), list(capabilities), labels, selections, [])


def failure_patterns(
    analysis: Analysis, capability: str
) -> list[tuple[Trajectory, str]]:
    """(run, evidence) of the failed trajectories lacking the capability."""
    return [
        (t, row[capability].reason)
        for t, row in zip(analysis.trajectories, analysis.labels, strict=True)
        if not t.success and row[capability].label is Label.LACKING
    ]


def write_outputs(
    analysis: Analysis,
    output: Path,
    target: str | dict[str, Any],
    settings: AnalysisSettings,
    labeller: str,
    force: bool = False,
    inputs: Sequence[Path] = (),
) -> list[Path]:
    """Write every output into `output` atomically; return the spec paths."""
    refuse_overwrite(output, force, inputs)
    recover(output.parent, output.name)
    staging = staging_beside(output)  # makes the parent folder too
    try:
        by_name = {c.name: c for c in analysis.capabilities}
        examples = {
            c.name: [t.reference for t, _ in failure_patterns(analysis, c.name)]
            for c in analysis.capabilities
        }
        rows = report.report_rows(analysis.selections, examples)
        n_passed = sum(t.success for t in analysis.trajectories)
        summary = {
            "n_trajectories": len(analysis.trajectories),
            "n_passed": n_passed,
            "n_failed": len(analysis.trajectories) - n_passed,
            "labeller": labeller,
            "runs": settings.runs,
            "min_runs": settings.min_runs,
            "rho": settings.rho,
            "delta": settings.delta,
            "seed": settings.seed,
            "skipped_records": len(analysis.skipped),
            "ignored_files": analysis.ignored,
            "why_nothing": why_nothing(analysis.selections),
        }
        report.write_json(staging / "report.json", summary, rows, analysis.truth)
        report.write_markdown(staging / "report.md", summary, rows, analysis.truth)
        report.write_chart(
            staging / "capabilities.png", rows, settings.rho, settings.delta
        )
        write_jsonl(staging / "trajectories.jsonl", analysis.trajectories)
        with (staging / "labels.jsonl").open("w", encoding="utf-8") as handle:
            for t, row in zip(analysis.trajectories, analysis.labels, strict=True):
                handle.write(
                    json.dumps(
                        {
                            "task_id": t.task_id,
                            "run": t.reference,
                            "success": t.success,
                            "labels": {
                                n: {"label": j.label.value, "reason": j.reason}
                                for n, j in row.items()
                            },
                        }
                    )
                    + "\n"
                )
        (staging / "capabilities").mkdir()
        specs = []
        for selection in analysis.selections:
            if not selection.retained:
                continue
            spec = build_spec(
                by_name[selection.capability],
                selection,
                target,
                failure_patterns(analysis, selection.capability),
                analysis.trajectories,
            )
            path = staging / "capabilities" / f"{spec.name}.json"
            path.write_text(spec.to_json(), encoding="utf-8")
            specs.append(output / "capabilities" / path.name)
        (staging / MARKER).write_text('{"written_by": "factory analyze"}\n')
        swap_in(staging, output)  # checked above: new, empty, or analyze's own
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return specs


def run_analysis(
    paths: list[Path],
    target: str,
    output: Path,
    settings: AnalysisSettings,
    skip_bad: bool = False,
    force: bool = False,
    truth: Path | None = None,
) -> tuple[Analysis, list[Path]]:
    """The whole `factory analyze` command: offline detectors, or an LLM labeller."""
    resolved = resolve_target(target)
    inputs = [*paths, *([truth] if truth is not None else [])]
    refuse_overwrite(output, force, inputs)
    truth_labels = load_truth(truth) if truth is not None else None
    imported = import_paths(paths, skip_bad=skip_bad, threshold=settings.threshold)
    if settings.llm_model is None:
        analysis = analyze(imported.trajectories, settings)
        labeller = "offline detectors"
    else:
        from factory.analyze.llm_labeller import LLMLabeller

        llm = LLMLabeller(settings.llm_model, cache_dir=output.parent / ".trace_cache")
        capabilities = llm.discover(imported.trajectories)
        runs = [
            llm.label_run(imported.trajectories, capabilities, run)
            for run in range(settings.runs)
        ]
        analysis = analyze(imported.trajectories, settings, capabilities, runs)
        labeller = f"LLM {settings.llm_model}"
    analysis.skipped = imported.skipped
    analysis.ignored = imported.ignored
    if truth_labels is not None:
        analysis.truth = score(
            analysis.trajectories,
            analysis.labels,
            analysis.selections,
            truth_labels,
            str(truth),
        )
    specs = write_outputs(analysis, output, resolved, settings, labeller, force, inputs)
    return analysis, specs

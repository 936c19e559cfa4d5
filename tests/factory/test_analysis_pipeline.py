"""`factory analyze` end to end: known injected deficits are recovered, noise is not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from factory.analyze.importers import import_paths
from factory.analyze.pipeline import AnalysisSettings, analyze
from factory.analyze.simulate import simulate, truth_labels
from factory.cli import main
from tests.conftest import ROOT

TAU2 = [ROOT / "generated_envs" / n for n in (
    "structured_data_reasoning", "tool_calling_precision",
    "multi_step_task_completion", "precondition_verification",
)]  # fmt: skip
PHONE = [
    ROOT / "generated_envs" / n
    for n in ("permission_error_recovery", "date_time_recovery")
]


def retained(
    tmp_path: Path,
    packages: list[Path],
    deficits: dict[str, float],
    noise: float,
    seed: int,
) -> set[str]:
    path = tmp_path / "results.json"
    path.write_text(
        json.dumps(simulate(packages, deficits, 240, seed=seed, noise=noise))
    )
    analysis = analyze(import_paths([path]).trajectories, AnalysisSettings())
    return {s.capability for s in analysis.selections if s.retained}


@pytest.mark.parametrize(
    ("packages", "deficits"),
    [
        (TAU2, {"structured_data_reasoning": 0.7, "precondition_verification": 0.6}),
        (TAU2, {"tool_calling_precision": 0.8, "multi_step_task_completion": 0.7}),
        (PHONE, {"permission_error_recovery": 0.7}),
        (PHONE, {"date_time_recovery": 0.6}),
    ],
)
def test_injected_deficits_are_recovered_exactly(tmp_path, packages, deficits) -> None:
    assert retained(tmp_path, packages, deficits, noise=0.15, seed=3) == set(deficits)


def test_noise_and_rare_deficits_are_not_retained(tmp_path) -> None:
    # Unrelated failures (hand-offs to a human) and a deficit too rare to cover 10%
    # of failures must not be retained.
    found = retained(
        tmp_path, TAU2, {"tool_calling_precision": 0.1}, noise=0.35, seed=5
    )
    assert found == set()


def test_cli_analyze_then_generate(tmp_path, capsys) -> None:
    runs = tmp_path / "runs.json"
    runs.write_text(
        json.dumps(simulate(TAU2, {"precondition_verification": 0.8}, 120, seed=1))
    )
    out = tmp_path / "analysis"
    assert main(["analyze", str(runs), "--target", "airline", "--out", str(out)]) == 0
    assert {p.name for p in out.iterdir()} >= {
        "report.md",
        "report.json",
        "capabilities.png",
        "labels.jsonl",
    }
    report = json.loads((out / "report.json").read_text())
    rows = {r["capability"]: r for r in report["capabilities"]}
    assert rows["precondition_verification"]["retained"]
    spec_path = out / "capabilities" / "precondition_verification.json"
    spec = json.loads(spec_path.read_text())
    assert (
        spec["archetype"] == "precondition_verification" and spec["target"] == "airline"
    )
    assert spec["evidence"]["runs_selected"] >= 8 and spec["failure_patterns"]
    # Examples cite the tau2 simulation and trial, in the spec and the report.
    pattern = spec["failure_patterns"][0]
    assert pattern["run"].startswith(f"task {pattern['task_id']}, simulation sim-")
    cited = rows["precondition_verification"]["example_failed_runs"]
    assert cited and all(", trial 0" in run for run in cited)
    assert cited[0] in (out / "report.md").read_text()
    capsys.readouterr()
    assert (
        main(
            [
                "generate",
                str(spec_path),
                "--out",
                str(tmp_path / "envs"),
                "--seeds",
                "5",
            ]
        )
        == 0
    )
    assert "result             PASS" in capsys.readouterr().out
    # The output folder is not overwritten without --force.
    assert main(["analyze", str(runs), "--target", "airline", "--out", str(out)]) == 2
    # Nor with --force where its marker is a link: that names no folder analyze wrote.
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    (foreign / ".trace-analysis").symlink_to(out / ".trace-analysis")
    argv = ["analyze", str(runs), "--target", "airline", "--out", str(foreign)]
    assert main([*argv, "--force"]) == 2
    assert "was not written by factory analyze" in capsys.readouterr().err
    assert (foreign / "notes.txt").read_text() == "mine"


def test_custom_target_gives_an_inline_spec(tmp_path) -> None:
    runs = tmp_path / "runs.json"
    runs.write_text(
        json.dumps(simulate(TAU2, {"precondition_verification": 0.8}, 80, seed=2))
    )
    tools = tmp_path / "tools.json"
    tools.write_text(
        json.dumps(
            [
                {
                    "type": "function",
                    "function": {"name": "cancel_reservation", "parameters": {}},
                }
            ]
        )
    )
    assert (
        main(
            [
                "analyze",
                str(runs),
                "--target",
                str(tools),
                "--out",
                str(tmp_path / "a"),
            ]
        )
        == 0
    )
    spec = json.loads(
        (tmp_path / "a" / "capabilities" / "precondition_verification.json").read_text()
    )
    assert (
        spec["archetype"] is None
        and spec["target"]["tools"][0]["function"]["name"] == "cancel_reservation"
    )


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--target", "spaceship"], "neither a kit"),
        (["--target", "airline", "--runs", "3", "--min-runs", "5"], "--min-runs"),
        (["--target", "airline", "--rho", "2"], "--rho"),
    ],
)
def test_bad_analyze_arguments_exit_2(tmp_path, capsys, arguments, message) -> None:
    """A value out of range is refused while parsing (argparse exits 2), a bad kit or
    combination by the command (main returns 2): the same for the user."""
    runs = tmp_path / "runs.jsonl"
    runs.write_text("")
    try:
        code = main(["analyze", str(runs), "--out", str(tmp_path / "o"), *arguments])
    except SystemExit as stop:
        code = stop.code
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_truth_scores_the_labelling_in_the_report(tmp_path, capsys) -> None:
    """--truth: per-capability precision, recall and false LACKING, with intervals."""
    results = simulate(TAU2, {"tool_calling_precision": 0.7}, 160, seed=3)
    runs = tmp_path / "runs.json"
    runs.write_text(json.dumps(results))
    truth = tmp_path / "truth.json"
    truth.write_text(json.dumps(truth_labels(results)))
    out = tmp_path / "analysis"
    arguments = ["analyze", str(runs), "--target", "airline", "--out", str(out)]
    assert main([*arguments, "--truth", str(truth)]) == 0
    assert "labelling accuracy on 160 runs" in capsys.readouterr().out
    accuracy = json.loads((out / "report.json").read_text())["labelling_accuracy"]
    injected = accuracy["capabilities"]["tool_calling_precision"]
    lacking = sum(
        s["deficit"] == "tool_calling_precision" and not s["reward_info"]["reward"]
        for s in results["simulations"]
    )
    assert injected["recall"]["n"] == lacking > 0
    low, high = injected["precision"]["ci95"]
    assert 0 <= low <= injected["precision"]["value"] <= high <= 1
    assert accuracy["expected_retained"] == ["tool_calling_precision"]
    assert accuracy["retained_matches"] is (
        accuracy["retained"] == ["tool_calling_precision"]
    )
    assert "## Labelling accuracy" in (out / "report.md").read_text()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        ("folder", "a folder"),
        ("{", "not valid JSON"),
        ('{"labels": ["a"]}', "field 'labels'"),
        ('{"labels": {"sim-0": "tool_calling_precision"}}', "field 'labels.sim-0'"),
        ('{"labels": {"sim-0": [1]}}', "field 'labels.sim-0.0'"),
        ('{"labels": {}, "extra": 1}', "field 'extra'"),
        ('{"labels": {"nobody": []}}', "none of its run ids"),
    ],
)
def test_bad_truth_files_exit_2(tmp_path, capsys, content, message) -> None:
    runs = tmp_path / "runs.json"
    runs.write_text(json.dumps(simulate(TAU2[:1], {}, 4, seed=1)))
    truth = tmp_path / "truth.json"
    if content == "folder":
        truth.mkdir()
    elif content is not None:
        truth.write_text(content)
    out = tmp_path / "o"
    arguments = ["analyze", str(runs), "--target", "airline", "--out", str(out)]
    assert (
        main([*arguments, "--truth", str(truth), "--runs", "2", "--min-runs", "1"]) == 2
    )
    assert message in capsys.readouterr().err
    assert not out.exists() and runs.exists()

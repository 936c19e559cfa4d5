"""What the agent lacks before and after TRACE: `factory analyze` on the held-out
episodes of the base model, the routed agent (argmax) and the best single adapter
of a finished `trace run`.

The records are rebuilt from the evaluate stage's job transcripts (as `evaluate`
writes them in `evaluate/trajectories/`, so this also reads runs finished before
it did), each with its task's tools, expected actions and true needs; the
analysis is scored against those needs. Prints the capabilities each analysis
retains, with their ER-, coverage and truth precision, and writes each analysis
to OUT/<condition>/. Nothing is played.

    python experiments/phone_demonstration/second_round.py RUN_FOLDER OUT [--runs 10 --min-runs 8]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from factory.analyze.pipeline import run_analysis
from factory.analyze.settings import AnalysisSettings
from trace_pipeline.config import load_config
from trace_pipeline.context import Context
from trace_pipeline.stages.collect import record, write_records
from trace_pipeline.stages.evaluate import kept_episodes
from trace_pipeline.store import RunFolder

# Each condition, and the configuration job it played on a task (from the report).
CONDITIONS = {
    "base_model": lambda task: "base",
    "routed_argmax": lambda task: task["routes"]["argmax"]["target"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a finished `trace run` folder")
    parser.add_argument("out", type=Path, help="a new folder for the analyses")
    parser.add_argument("--runs", type=int, default=AnalysisSettings().runs)
    parser.add_argument("--min-runs", type=int, default=AnalysisSettings().min_runs)
    arguments = parser.parse_args()
    run, out = arguments.run, arguments.out
    evaluated = run / "evaluate" / "report.json"
    if not evaluated.is_file() or not (run / "config.yaml").is_file():
        parser.error(f"{run} is not a `trace run` folder whose evaluate stage finished")
    if out.exists():
        parser.error(f"{out} exists; give a new folder (nothing is replaced)")
    report = json.loads(evaluated.read_text("utf-8"))
    if "transcripts" not in report:
        parser.error(f"{evaluated} keeps no transcripts: rerun its evaluate stage")
    episodes = {key: kept_episodes(run, report, key) for key in report["transcripts"]}
    config = load_config(run / "config.yaml")
    env = Context(config, RunFolder(run), run / "config.yaml").target().make()
    settings = AnalysisSettings(runs=arguments.runs, min_runs=arguments.min_runs)
    records = out / "records"
    records.mkdir(parents=True)
    best = report["best_single"].removeprefix("single: ")
    conditions = {**CONDITIONS, f"single_{best}": lambda task: best}
    for name, job in conditions.items():
        played = [episodes[job(task)][task["seed"]] for task in report["per_task"]]
        path, truth = records / f"{name}.jsonl", records / f"{name}.truth.json"
        write_records([record(row, env) for row in played], path, truth)
        analysis, _ = run_analysis(
            [path], config.target.kit, out / name, settings, truth=truth
        )
        scored = analysis.truth["capabilities"] if analysis.truth else {}
        wins = sum(row["success"] for row in played)
        print(f"\n{name}: {wins}/{len(played)} succeeded; retained:")
        for selection in analysis.selections:
            if selection.retained:
                precision = scored.get(selection.capability, {}).get("precision", {})
                print(
                    f"  {selection.capability:28s} ER- {selection.full.er_neg:.2f} "
                    f"coverage {selection.full.coverage:.2f} truth precision "
                    f"{precision.get('hits', '-')}/{precision.get('n', '-')}"
                )


if __name__ == "__main__":
    main()

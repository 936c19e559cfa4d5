"""LLM labelling of real tau2-bench runs beside the offline detectors, scored on known truth.

    router serve --model models/qwen2.5-coder-0.5b-instruct.gguf --port 8011 &
    OPENAI_BASE_URL=http://127.0.0.1:8011/v1 OPENAI_API_KEY=local \\
      python experiments/llm_labelling/llm_labelling.py --domain airline --sample 24 --out OUT.json

Both labellers judge the same sampled runs of `tests/fixtures/tau2_runs/<domain>`
(half failed, half successful, seeded) against the built-in dictionary, whose
names the fixtures' truth uses; one LLM labelling run, one request per run,
`--concurrent` runs at a time (1: in turn, so the seconds per run are the served
model's; more: the time per 100 runs is the wall time's share). A run whose answers stay
invalid JSON after the labeller's retries counts as labelled NA throughout, and
is counted. Per capability: precision and recall of LACKING on failed runs and
false LACKING on successful ones, with 95% Wilson intervals (`factory.analyze.truth`).
"""

from __future__ import annotations

import argparse
import gzip
import random
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from factory.analyze.detectors import builtin_dictionary
from factory.analyze.importers import import_paths
from factory.analyze.llm_labeller import LLMLabeller
from factory.analyze.pipeline import label_all
from factory.analyze.truth import load_truth, score
from factory.errors import FactoryError
from factory.outputs import write_json
from factory.trajectory.evidence import NA
from factory.trajectory.labels import Label

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "tau2_runs"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--domain", choices=("airline", "retail"), default="airline")
    parser.add_argument(
        "--model", default="base", help="the model name the server serves"
    )
    parser.add_argument(
        "--sample", type=int, default=24, help="runs labelled (half failed)"
    )
    parser.add_argument("--seed", type=int, default=0, help="which runs are sampled")
    parser.add_argument(
        "--concurrent",
        type=int,
        default=1,
        help="runs labelled at once (a batching server decodes them together; 1: "
        "each run's seconds are its own)",
    )
    parser.add_argument("--out", type=Path, required=True, help="results JSON")
    args = parser.parse_args()
    if args.out.exists():
        parser.error(f"--out {args.out} exists; give a new file")

    with tempfile.TemporaryDirectory() as folder:
        results = Path(folder) / f"{args.domain}.json"
        with gzip.open(
            FIXTURES / f"{args.domain}.json.gz", "rt", encoding="utf-8"
        ) as packed:
            results.write_text(packed.read(), encoding="utf-8")
        trajectories = import_paths([results]).trajectories
    truth = load_truth(FIXTURES / f"{args.domain}.truth.json")
    rng = random.Random(args.seed)
    failed = [t for t in trajectories if not t.success and t.run_id in truth]
    passed = [t for t in trajectories if t.success and t.run_id in truth]
    half = args.sample // 2
    chosen = rng.sample(failed, min(half, len(failed)))
    chosen += rng.sample(passed, min(args.sample - len(chosen), len(passed)))

    dictionary = builtin_dictionary()
    offline = label_all(chosen, dictionary)
    with tempfile.TemporaryDirectory() as cache:
        labeller = LLMLabeller(args.model, Path(cache), concurrency=1)

        def label(trajectory: Any) -> tuple[dict[str, Any], float, str | None]:
            start = time.perf_counter()
            try:
                [row] = labeller.label_run([trajectory], dictionary, 0)
                problem = None
            except FactoryError as error:
                row, problem = {c.name: NA for c in dictionary}, str(error)[:300]
            return row, time.perf_counter() - start, problem

        begun = time.perf_counter()
        with ThreadPoolExecutor(max_workers=args.concurrent) as pool:
            done = []
            for number, result in enumerate(pool.map(label, chosen), 1):
                done.append(result)
                print(f"{number}/{len(chosen)} {result[1]:.0f} s", flush=True)
        wall = time.perf_counter() - begun
    labels = [row for row, _, _ in done]
    seconds = [s for _, s, _ in done]
    invalid = [
        {"run": t.run_id, "problem": problem}
        for t, (_, _, problem) in zip(chosen, done, strict=True)
        if problem is not None
    ]

    source = f"tests/fixtures/tau2_runs/{args.domain}.truth.json"
    summary = {
        "domain": args.domain,
        "model": args.model,
        "runs": {
            "failed": sum(not t.success for t in chosen),
            "passed": sum(t.success for t in chosen),
            "seed": args.seed,
        },
        "concurrent": args.concurrent,
        "seconds_per_run": sum(seconds) / len(seconds),  # each run's own latency
        "wall_seconds": wall,
        "seconds_per_100_runs": 100 * wall / len(chosen),
        "invalid_answers": invalid,
        "llm": score(chosen, labels, [], truth, source),
        "offline": score(chosen, offline, [], truth, source),
        "llm_labels": [
            {
                "run": t.run_id,
                "success": t.success,
                "truth": sorted(truth[t.run_id]),
                "lacking": sorted(
                    n for n, j in row.items() if j.label is Label.LACKING
                ),
            }
            for t, row in zip(chosen, labels, strict=True)
        ],
    }
    write_json(args.out, summary)
    for name in sorted(summary["llm"]["capabilities"]):
        line = [name]
        for who in ("llm", "offline"):
            rates = summary[who]["capabilities"][name]
            line.append(
                f"{who}: P {rates['precision']['hits']}/{rates['precision']['n']} "
                f"R {rates['recall']['hits']}/{rates['recall']['n']} "
                f"FL {rates['false_lacking_on_success']['hits']}/"
                f"{rates['false_lacking_on_success']['n']}"
            )
        print("  ".join(line))
    print(
        f"{summary['seconds_per_run']:.0f} s per run, {len(invalid)} invalid; "
        f"written to {args.out}"
    )


if __name__ == "__main__":
    main()

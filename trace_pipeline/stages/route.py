"""route: the adapters folder the router serves, and (optionally) its fitted probe.

The router's labels come from each adapter's `trace.json` (name, description,
one successful trajectory). The probe is fitted on tasks of the capability
environments (label: that capability) and on analysis-split target tasks the
base agent solved (label: base); the target's true needs are never used.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trace_pipeline.context import Context
from trace_pipeline.errors import PipelineError
from trace_pipeline.stages.train import generated_envs
from trace_pipeline.store import read_output

if TYPE_CHECKING:
    from router.build import Loaded


def load_router(context: Context, folder: Path) -> Loaded:
    """The router over the adapters in `folder` on a fresh base model, with this run's
    routing settings, precision and (batch calibration) analysis-split requests; its
    probe when one was fitted (none when the base agent solved no analysis task)."""
    from router.build import load
    from router.settings import RouterSettings, RoutingSettings

    routing = context.config.route.model_dump(include=set(RoutingSettings.model_fields))
    settings = RouterSettings(model=context.model_path, adapters=str(folder), **routing)
    batch = analysis_requests(context) if settings.calibration == "batch" else ()
    return load(settings, requests=batch, precision=context.config.precision)


def collected(context: Context) -> list[tuple[list[dict[str, Any]], bool, int]]:
    """(messages, success, seed) of each analysis-split trajectory collect wrote."""
    path = context.folder.stage("collect") / "trajectories.jsonl"
    try:
        return [
            (list(row["messages"]), bool(row["success"]), int(row["metadata"]["seed"]))
            for row in read_output(path)
        ]
    except KeyError as exc:
        problem = f"lacks {exc}"
    except (TypeError, ValueError) as exc:
        problem = f"holds a value of the wrong kind ({exc})"
    raise PipelineError(
        f"{path}: a record {problem} (edited after collect wrote it); rerun with "
        "--from collect"
    )


def analysis_requests(context: Context) -> list[list[dict[str, Any]]]:
    """The opening messages (policy and request) of every analysis-split trajectory,
    unlabelled: what batch calibration averages the label log-probs over."""
    openings = []
    for messages, _, _ in collected(context):
        user = next(
            (i for i, m in enumerate(messages) if m.get("role") == "user"), None
        )
        if user is not None:
            openings.append(messages[: user + 1])
    return openings


def _fit_probe(context: Context, folder: Path) -> dict[str, Any]:
    import numpy as np

    from router.probe import fit_probe, save_probe
    from router.prompt import BASE
    from router.routed import first_observation
    from trainer.envs import resolve_env

    count = context.config.route.probe_examples
    loaded = load_router(context, folder)
    bank, router = loaded.bank, loaded.router
    examples: list[tuple[Any, int, str]] = []
    envs = generated_envs(context)
    for capability in bank.capabilities.capabilities:
        handle = resolve_env(envs[capability.name])
        examples += [(handle, seed, capability.name) for seed in range(count)]
    solved = [seed for _, success, seed in collected(context) if success][:count]
    examples += [(context.target(), seed, BASE) for seed in solved]
    if not solved:
        return {
            "probe": "not fitted: the base agent solved no analysis task to label base"
        }
    features = np.stack(
        [
            router.scorer.score(first_observation(handle, seed)).features.numpy()
            for handle, seed, _ in examples
        ]
    ).astype(np.float64)
    prompt = router.scorer.prompt
    probe = fit_probe(
        features,
        [label for *_, label in examples],
        prompt.targets,
        prompt.fingerprint(),
        bank.capabilities.base_model,
    )
    save_probe(probe, folder, force=True)
    return {
        "probe": {"examples": len(examples), "train_accuracy": probe.train_accuracy}
    }


def run(context: Context, out: Path) -> dict[str, Any]:
    """The adapters folder the router serves, with its probe when one is asked for."""
    trained = context.folder.stage("train") / "adapters"
    if not trained.is_dir() or not any(trained.iterdir()):
        context.say(
            "route: no adapters were trained; evaluation will play the base model only"
        )
        return {"adapters": [], "probe": None}
    shutil.copytree(trained, out / "adapters")
    result: dict[str, Any] = {"adapters": sorted(p.name for p in trained.iterdir())}
    if context.config.route.probe_examples and context.config.target.playable:
        result |= _fit_probe(context, out / "adapters")
    return result

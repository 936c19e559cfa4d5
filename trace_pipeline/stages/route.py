"""route: the adapters folder the router serves, and (optionally) its fitted probe and text router.

The router's labels come from each adapter's `trace.json` (name, description,
one successful trajectory). The probe is fitted (`route.probe_data`) on the
target's analysis split as the analysis labelled it (`analysis`, the default:
one request surface), or on tasks of the capability packages (label: that
capability) and analysis-split target tasks the base agent solved (label: base)
(`packages`: two surfaces, so it can learn which wrote a request); the target's
true needs are never used. The text router (a bag-of-words classifier of the
request, `router.text`) is fitted on the same examples: the control that tells
whether reading the request through the model adds anything to its words.
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


def opening(messages: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """A trajectory's messages up to its first user message (policy and request: what
    the router sees), or None when it has no user message."""
    user = next((i for i, m in enumerate(messages) if m.get("role") == "user"), None)
    return None if user is None else messages[: user + 1]


def analysis_requests(context: Context) -> list[list[dict[str, Any]]]:
    """The opening messages (policy and request) of every analysis-split trajectory,
    unlabelled: what batch calibration averages the label log-probs over."""
    openings = [opening(messages) for messages, _, _ in collected(context)]
    return [messages for messages in openings if messages is not None]


def analysis_examples(
    context: Context, targets: list[str], count: int
) -> list[tuple[list[dict[str, Any]], str]]:
    """(opening messages, label) of up to `count` analysis-split runs per label, labelled
    by the analysis, never by the target's truth: a success is the base model's, a
    failure the first routed capability the analysis found LACKING in it; a failure
    with none is left out (no adapter is known to mend it). All share the target's
    one request surface, so the probe learns what in a request shows a need."""
    from router.prompt import BASE

    folder = context.folder.stage("analyze") / "analysis"
    runs = read_output(folder / "trajectories.jsonl")
    labels = read_output(folder / "labels.jsonl")
    examples: list[tuple[list[dict[str, Any]], str]] = []
    for run, row in zip(runs, labels, strict=False):
        try:
            lacking = {n for n, j in row["labels"].items() if j["label"] == "LACKING"}
            label = (
                BASE
                if row["success"]
                else next((t for t in targets if t in lacking), None)
            )
            messages = list(run["messages"])
        except (KeyError, TypeError, AttributeError) as exc:
            raise PipelineError(
                f"{folder} holds a run the probe cannot read ({exc!r}); remove "
                f"{folder.parent} and rerun to have it made again"
            ) from None
        request = opening(messages)
        if label is None or request is None:
            continue
        if sum(label == seen for _, seen in examples) < count:
            examples.append((request, label))
    return examples


def package_examples(
    context: Context, loaded: Loaded, count: int
) -> list[tuple[list[dict[str, Any]], str]]:
    """(first observation, label) of `count` training seeds of each capability's
    package (label: that capability) and of analysis-split target tasks the base
    agent solved (label: base)."""
    from router.prompt import BASE
    from router.routed import first_observation
    from trainer.envs import resolve_env

    envs = generated_envs(context)
    examples = []
    for capability in loaded.bank.capabilities.capabilities:
        handle = resolve_env(envs[capability.name])
        examples += [
            (first_observation(handle, seed), capability.name) for seed in range(count)
        ]
    solved = [seed for _, success, seed in collected(context) if success][:count]
    target = context.target()
    return examples + [(first_observation(target, seed), BASE) for seed in solved]


def _fit_routers(context: Context, folder: Path) -> dict[str, Any]:
    """The probe and the text router, fitted on the same labelled examples."""
    import numpy as np

    from router.probe import fit_probe, save_probe
    from router.text import fit_text, save_text

    route = context.config.route
    loaded = load_router(context, folder)
    prompt = loaded.router.scorer.prompt
    if route.probe_data == "analysis":
        examples = analysis_examples(context, prompt.targets, route.probe_examples)
    else:
        examples = package_examples(context, loaded, route.probe_examples)
    missing = sorted(set(prompt.targets) - {label for _, label in examples})
    if missing:
        why = f"not fitted: no {route.probe_data} example is labelled {', '.join(missing)}"
        return {"probe": why, "text": why}
    features = np.stack(
        [loaded.router.scorer.score(m).features.numpy() for m, _ in examples]
    ).astype(np.float64)
    probe = fit_probe(
        features,
        [label for _, label in examples],
        prompt.targets,
        prompt.fingerprint(),
        loaded.bank.capabilities.base_model,
    )
    save_probe(probe, folder, force=True)
    text = fit_text(examples, prompt.targets)
    save_text(text, folder, force=True)
    counts = {t: sum(label == t for _, label in examples) for t in prompt.targets}
    return {
        name: {
            "data": route.probe_data,
            "examples": counts,
            "train_accuracy": fitted.train_accuracy,
        }
        for name, fitted in (("probe", probe), ("text", text.linear))
    }


def run(context: Context, out: Path) -> dict[str, Any]:
    """The adapters folder the router serves, with its probe and text router when
    asked for."""
    trained = context.folder.stage("train") / "adapters"
    if not trained.is_dir() or not any(trained.iterdir()):
        context.say(
            "route: no adapters were trained; evaluation will play the base model only"
        )
        return {"adapters": [], "probe": None}
    shutil.copytree(trained, out / "adapters")
    result: dict[str, Any] = {"adapters": sorted(p.name for p in trained.iterdir())}
    if context.config.route.probe_examples and context.config.target.playable:
        result |= _fit_routers(context, out / "adapters")
    return result

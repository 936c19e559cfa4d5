"""evaluate: every way to use the adapters, on the target's held-out split, paired.

Conditions (Table 3 of the paper): the base model, each single adapter, the
uniform and TIES merges, one adapter trained on the mixture of the
environments, routed argmax / top-p / probe, and the oracle (each task's true
need). The controls that tell what training added: each trained adapter's
SFT-only snapshot (its cold start alone: did GRPO add to SFT?), each untargeted
adapter (a capability the analysis did not retain, with a targeted adapter's
budget: targeting, or more training on this kit?), the prompted base (no
adapter, the capabilities described in the system prompt: does training beat
telling?) and the text router (the request's words alone: does reading it
through the model help routing?). And a mode the paper has not: argmax routing
taken again whenever a tool call is refused (the error shows a need the
request could not), from the first-turn route or, with `route.reroute_from:
base`, from the base model. Every condition plays the same held-out tasks
greedily, so each pair of conditions is compared with the exact McNemar test
on the same seeds (Holm over the report's family).

Each model configuration a condition needs (the base model, an adapter, a
merge, a top-p mix) plays each task it is used on once; a routed condition's
outcome on a task is its configuration's outcome there. Configurations share
one batch, each row under its own (`AdapterBank.configure_rows`), in jobs of
at most `target.shard_episodes` episodes (a stop loses one job at most) of four
groups: the base model (which depends on neither adapters nor router: a
retrain reuses it), the configurations played on every task (adapters, merges:
a routing change reuses them), the top-p mixes, and the prompted base; and
re-routing, one job. Each job keeps its transcripts (`episodes.json`, each row
naming its configuration).
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from factory.outputs import write_json
from trace_pipeline.config import MODEL
from trace_pipeline.config import tasks as task_settings
from trace_pipeline.context import Context, transcript
from trace_pipeline.errors import PipelineError
from trace_pipeline.executors import Job, pieces, run_jobs
from trace_pipeline.protocol import first_seed, record
from trace_pipeline.stages import collect
from trace_pipeline.store import digest, read_output

REROUTE_MODE = "argmax"
PROMPTED = "prompted base"  # the condition, and its configuration's key
UNTARGETED = "untargeted: "  # before the capability's name, the condition's
BASE_GROUPS = ("base", "prompted")  # the job groups whose episodes use no adapter


def truth(context: Context, seed: int, names: list[str]) -> str:
    """The route a target task truly needs: the first capability it needs that has an
    adapter (of `names`), else base."""
    from router.prompt import BASE

    return next((n for n in context.needs(seed) if n in names), BASE)


def tasks(context: Context, names: list[str]) -> list[Any]:
    """The held-out tasks, each with its `truth`."""
    from router.routed import Task, first_observation

    handle = context.target()
    first = first_seed(context.config)
    seeds = range(first, first + context.config.target.heldout_episodes)
    return [
        Task(handle, seed, truth(context, seed, names), first_observation(handle, seed))
        for seed in seeds
    ]


def sft_only(context: Context, mixture: Path) -> dict[str, tuple[str, Path]]:
    """The SFT-only control of each trained adapter that kept one (its cold start,
    `trainer.export.SFT_ONLY`): condition -> (adapter name in the bank, folder)."""
    from trainer.export import SFT_ONLY

    adapters = context.folder.stage("route") / "adapters"
    found = {
        f"SFT only: {folder.name}": (f"sft_only_{folder.name}", folder / SFT_ONLY)
        for folder in sorted(adapters.iterdir())
        if (folder / SFT_ONLY).is_dir()
    }
    if (mixture / SFT_ONLY).is_dir():
        found["multi-capability SFT only"] = ("sft_only_mixture", mixture / SFT_ONLY)
    return found


def routed_model(context: Context) -> tuple[Any, Any, Any, dict[str, str]]:
    """(adapter bank, tokenizer, router, baselines) of this run, loaded once per
    process; baselines maps a condition to a loaded adapter played everywhere."""
    if "evaluate" not in context.loaded:
        from trace_pipeline.stages.route import load_router

        loaded = load_router(context, context.folder.stage("route") / "adapters")
        bank, tokenizer, router = loaded.bank, loaded.tokenizer, loaded.router
        baselines: dict[str, str] = {}
        # each adapter's PEFT folder, which llama.cpp plays converted (the TIES
        # merge has none until `lora_folder` saves it)
        folders = {c.name: c.path for c in bank.capabilities.capabilities}

        def add(condition: str, name: str, folder: Path | None = None) -> None:
            bank.add_baseline(name, folder)
            baselines[condition] = name
            if folder is not None:
                folders[name] = folder

        if len(bank.capabilities.names) >= 2:
            add("TIES merge", "ties")
        mixture = context.folder.stage("baselines") / "mixture"
        if mixture.is_dir():
            add("multi-capability GRPO", "mixture", mixture)
        controls = context.folder.stage("baselines") / "untargeted"
        for folder in sorted(controls.iterdir()) if controls.is_dir() else []:
            add(f"{UNTARGETED}{folder.name}", f"untargeted_{folder.name}", folder)
        if context.config.baselines.sft_only:
            for condition, (name, folder) in sft_only(context, mixture).items():
                add(condition, name, folder)
        context.loaded["evaluate"] = (bank, tokenizer, router, baselines)
        context.loaded["adapter folders"] = folders
    return context.loaded["evaluate"]


def held_out(context: Context) -> dict[int, Any]:
    """The held-out tasks by seed, built once per process (a reset per task, which
    for a tau2 target may call its user simulator): every job selects from them."""
    if "held-out" not in context.loaded:
        names = routed_model(context)[0].capabilities.names
        context.loaded["held-out"] = {t.seed: t for t in tasks(context, names)}
    return context.loaded["held-out"]


def _selected(
    context: Context, seeds: list[int], prompt: str | None = None
) -> list[Any]:
    """The held-out tasks of `seeds`; with `prompt`, each opening with it appended to
    the system prompt (the prompted-base control)."""
    from router.prompted import prompted
    from router.routed import Task, first_observation

    chosen = [held_out(context)[seed] for seed in seeds]
    if prompt is None:
        return chosen
    handle = prompted(context.target(), prompt)
    return [
        Task(handle, t.seed, t.truth, first_observation(handle, t.seed)) for t in chosen
    ]


@contextlib.contextmanager
def _rows(context: Context) -> Iterator[tuple[Any, Any, Any, Any]]:
    """(bank, tokenizer, router) of this run, and a generator whose rows each decode
    under their own configuration of the bank, at the run's precision; the bank is
    given back its activated configuration after, for the next job."""
    from trainer.models import mixed_precision

    bank, tokenizer, router, _ = routed_model(context)
    try:
        with mixed_precision(context.config.precision, bank.model):
            yield (
                bank,
                tokenizer,
                router,
                bank.generator(
                    tokenizer, batch_size=context.config.generation_batch_size
                ),
            )
    finally:
        bank.configure_rows(None)


def play_job(
    context: Context,
    folder: Path,
    plays: list[dict[str, Any]],
    prompt: str | None = None,
) -> None:
    """Configurations on held-out tasks, in one batch (a job): each of `plays` is a
    configuration's route key, weights, and the seeds it plays; `prompt` is added to
    every task's system prompt."""
    from router.routed import play

    keys = [p["key"] for p in plays for _ in p["seeds"]]
    weights = [p["weights"] for p in plays for _ in p["seeds"]]
    chosen = _selected(context, [seed for p in plays for seed in p["seeds"]], prompt)
    if context.config.backend == "llamacpp":
        generator, tokenizer = context.llama()
        activate = functools.partial(use_loras, context, generator, folder)
        episodes = play(
            activate,
            generator,
            tokenizer,
            chosen,
            weights,
            context.limits(),
            routed_model(context)[0].capabilities.tool_format(tokenizer),
            progress="evaluate",
        )
    else:
        with _rows(context) as (bank, tokenizer, _, generator):
            episodes = play(
                bank.activate_weights,
                generator,
                tokenizer,
                chosen,
                weights,
                context.limits(),
                bank.capabilities.tool_format(tokenizer),
                progress="evaluate",
            )
    rows = [
        transcript(e) | {"configuration": key}
        for e, key in zip(episodes, keys, strict=True)
    ]
    write_json(folder / "episodes.json", rows)


def use_loras(
    context: Context, generator: Any, folder: Path, weights: dict[str, float]
) -> None:
    """Make configuration `weights` live on llama.cpp: each adapter's GGUF LoRA
    (converted from its PEFT folder, cached) at its weight as llama.cpp's scale,
    which sums the scaled LoRA updates as the bank's mixes do; the TIES merge is
    saved as a PEFT adapter first, in the job's `folder` (each job's own: a job's
    folder is moved into place when it finishes, so a later job of the same
    process cannot read from it)."""
    from trainer.gguf_lora import lora_file

    folders = dict(context.loaded["adapter folders"])
    for name in weights.keys() - folders.keys():  # a merge the bank built
        saved = folder / name
        folders[name] = (
            saved
            if (saved / "adapter_config.json").is_file()
            else routed_model(context)[0].export({name: 1.0}, saved)
        )
    model = Path(context.gguf_path)
    generator.use_adapters(
        [
            (lora_file(Path(folders[name]), model), w)
            for name, w in sorted(weights.items())
        ]
    )


def rerouting_job(
    context: Context, folder: Path, seeds: list[int], first: list[dict[str, Any]]
) -> None:
    """The held-out tasks from their first routes, routed again on every refused
    tool call (a job); each episode keeps its chain of route targets."""
    from router.modes import Route
    from router.routed import play_rerouting

    with _rows(context) as (bank, tokenizer, router, generator):
        episodes, chains = play_rerouting(
            generator,
            router,
            tokenizer,
            _selected(context, seeds),
            [Route(r["mode"], r["target"], r["adapters"]) for r in first],
            REROUTE_MODE,
            context.limits(),
            bank.capabilities.tool_format(tokenizer),
            progress="re-routing",
        )
    rows = [
        transcript(e) | {"routes": c} for e, c in zip(episodes, chains, strict=True)
    ]
    write_json(folder / "episodes.json", rows)


def shards(plays: list[dict[str, Any]], size: int) -> list[list[dict[str, Any]]]:
    """`plays` in jobs of at most `size` episodes, so that a stop loses one job's
    episodes at most: a configuration's seeds cut in pieces of even size (one batch
    each), configurations of fewer seeds packed together in order."""
    cut = [
        play | {"seeds": part} for play in plays for part in pieces(play["seeds"], size)
    ]
    jobs: list[list[dict[str, Any]]] = []
    held = 0
    for piece in cut:
        if not jobs or held + len(piece["seeds"]) > size:
            jobs.append([])
            held = 0
        jobs[-1].append(piece)
        held += len(piece["seeds"])
    return jobs


def played_inputs(context: Context) -> dict[str, Any]:
    """What a configuration's episodes depend on: the adapters, the model, the
    tasks and the rollout limits (not the router)."""
    return {
        "adapters": {
            name: digest(context.folder.manifest(name))
            for name in ("train", "baselines")
        },
        "config": context.config.section(
            *MODEL, "backend", *task_settings(context.config), "rollout"
        ),
    }


def paired(report: dict[str, Any], first: str, second: str) -> dict[str, Any]:
    """Exact McNemar of two conditions on the report's tasks."""
    from trainer.evaluation import mcnemar

    rows = report["per_task"]
    return mcnemar(
        [r["success"][first] for r in rows], [r["success"][second] for r in rows]
    )


def controls(baselines: dict[str, str]) -> list[tuple[str, str]]:
    """(SFT-only condition, the trained condition it is the cold start of)."""
    pairs = []
    for condition in baselines:
        if condition == "multi-capability SFT only":
            pairs.append((condition, "multi-capability GRPO"))
        elif condition.startswith("SFT only: "):
            pairs.append((condition, f"single: {condition.removeprefix('SFT only: ')}"))
    return pairs


def played_split(context: Context) -> dict[str, Any]:
    """The split about to be played; a test split's play is recorded first
    (`protocol.json`, the ledger), so a check that refuses the run before any
    episode leaves no play behind."""
    protocol: dict[str, Any] = {"split": context.config.protocol.split}
    if context.config.protocol.split == "test":
        kept = record(context.folder, context.config, context.replay_test)
        protocol |= {
            "config_digest": kept["config_digest"],
            "plays": len(kept["plays"]),
            "configs": [c[:12] for c in kept["configs"]],
            "replay": kept["replay"],
        }
    return protocol


def compared(
    plan: Any,
    outcomes: dict[str, dict[int, tuple[bool, float]]],
    labels: dict[str, str],
    context: Context,
    baselines: dict[str, str],
    chosen: list[Any],
    prompted: list[tuple[bool, float]] | None,
    rerouted: tuple[list[tuple[bool, float]], list[list[str]]] | None,
) -> dict[str, Any]:
    """The report of the plan's outcomes ({configuration key: {task index:
    (success, reward)}}), with the prompted base's and re-routing's where they were
    played, and every paired test, Holm-adjusted in the families `protocol.primary`
    sets. Run on all-failure outcomes before anything is played, it checks that the
    pre-registered comparisons exist."""
    from router.evaluate import add_condition, add_rerouting, assemble
    from trainer.evaluation import with_holm

    report = assemble(plan, outcomes, labels, context.config.protocol.best_single)
    if prompted is not None:
        add_condition(report, PROMPTED, prompted, ("base model", report["best_single"]))
    if rerouted is not None:
        add_rerouting(
            report,
            chosen,
            *rerouted,
            REROUTE_MODE,
            context.config.route.reroute_from == "base",
        )
    sft = dict(controls(baselines))
    untargeted = [b for b in baselines if b.startswith(UNTARGETED)]
    for mode in report["routing"]:
        routed = f"routed: {mode}"
        others = [b for b in baselines if b not in sft and b not in untargeted]
        for other in ("base model", "uniform merge", *others):
            report["paired"][f"{routed} vs {other}"] = paired(report, routed, other)
    for control in untargeted:  # targeting, or more training on this kit?
        for other in (report["best_single"], "base model"):
            report["paired"][f"{other} vs {control}"] = paired(report, other, control)
    for condition, trained in sft.items():  # did GRPO add to its cold start?
        report["paired"][f"{trained} vs {condition}"] = paired(
            report, trained, condition
        )
    for better in (report["best_single"], "oracle"):  # did the adapters help at all?
        report["paired"][f"{better} vs base model"] = paired(
            report, better, "base model"
        )
    primary = context.config.protocol.primary or []
    try:
        report["paired"] = with_holm(report["paired"], primary)
    except ValueError as exc:
        raise PipelineError(
            f"protocol.primary: {exc}; this run's comparisons are "
            + "; ".join(report["paired"])
            + ". Name them as the dev report does"
        ) from None
    return report


def kept_episodes(root: Path, report: dict[str, Any], key: str) -> dict[int, Any]:
    """Configuration `key`'s held-out transcripts by seed, from the job folders a
    finished evaluate report names under `root`/.jobs (one folder, in reports
    written before evaluate's jobs were cut in shards)."""
    jobs = report["transcripts"][key]
    return {
        row["seed"]: row
        for job in ([jobs] if isinstance(jobs, str) else jobs)
        for row in read_output(root / ".jobs" / job / "episodes.json")
        if row.get("configuration", key) == key  # a job may play several
    }


def _played(done: Any) -> list[dict[str, Any]]:
    """The episodes a finished job wrote."""
    return read_output(done.folder / "episodes.json")


def trajectory_records(
    context: Context, conditions: dict[str, list[dict[str, Any]]], out: Path
) -> dict[str, str]:
    """Each condition's held-out episodes as trajectory records `factory analyze`
    reads (out/trajectories/<condition>.jsonl, with the true needs of its failed
    runs beside it): the analysis of the agent after TRACE, for another round."""
    folder = out / "trajectories"
    folder.mkdir()
    env = context.target().make()
    written = {}
    for name, episodes in conditions.items():
        stem = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
        records = [collect.record(episode, env) for episode in episodes]
        collect.write_records(
            records, folder / f"{stem}.jsonl", folder / f"{stem}.truth.json"
        )
        written[name] = f"trajectories/{stem}.jsonl"
    return written


def run(context: Context, out: Path) -> dict[str, Any]:
    """Every configuration on the held-out split, greedily, and the paired tests."""
    from router.evaluate import markdown, plan_evaluation, prompt_labels
    from router.plots import plot_confusion, plot_success
    from router.prompt import BASE
    from router.prompted import guidance
    from trainer.models import mixed_precision

    if not context.config.target.playable:
        note = (
            "a trajectories target has no held-out tasks to play; nothing was evaluated"
        )
        context.say(f"evaluate: {note}")
        write_json(out / "report.json", {"success": {}, "per_task": [], "note": note})
        return {"success": {}, "best_single": None, "note": note}
    if not (context.folder.stage("route") / "adapters").is_dir():
        protocol = played_split(context)
        return base_only(context, out) | {"protocol": protocol}
    bank, _, router, baselines = routed_model(context)
    names = bank.capabilities.names
    chosen = list(held_out(context).values())
    seeds = [t.seed for t in chosen]
    with mixed_precision(context.config.precision, bank.model):
        plan = plan_evaluation(router, names, chosen, baselines)
    inputs = played_inputs(context)
    groups: dict[str, list[dict[str, Any]]] = {
        "base": [],
        "everywhere": [],
        "mixes": [],
    }
    for key, (weights, indices) in plan.configurations.items():
        group = (
            "base" if not weights else "everywhere" if key in plan.fixed else "mixes"
        )
        played_seeds = [seeds[i] for i in indices]
        groups[group].append({"key": key, "weights": weights, "seeds": played_seeds})
    if context.config.baselines.prompted:
        groups["prompted"] = [{"key": PROMPTED, "weights": {}, "seeds": seeds}]
        prompt = guidance(bank.capabilities)  # once, for every prompted job
    size = context.config.target.shard_episodes
    jobs = []
    for group, plays in groups.items():
        # the base model's and the prompted base's episodes depend on no adapter:
        # a retrain reuses them
        depends = {"config": inputs["config"]} if group in BASE_GROUPS else inputs
        for part in shards(plays, size):
            arguments: dict[str, Any] = {"plays": part}
            if group == "prompted":
                arguments["prompt"] = prompt
            jobs.append(
                Job("evaluate", arguments | depends, f"{__name__}:play_job", arguments)
            )
    reroute_from = context.config.route.reroute_from
    if reroute_from != "none":
        first = [
            {"mode": "base", "target": BASE, "adapters": {}}
            if reroute_from == "base"
            else {"mode": r.mode, "target": r.target, "adapters": r.weights}
            for r in plan.routes[REROUTE_MODE]
        ]
        rerouting = {"seeds": seeds, "first": first}
        jobs.append(
            Job(
                "evaluate",
                rerouting
                | inputs
                | {
                    "route": digest(context.folder.manifest("route")),
                    "route_config": context.config.section("route"),
                },
                f"{__name__}:rerouting_job",
                rerouting,
            )
        )
    context.say(
        f"evaluate: {len(chosen)} held-out tasks, {len(names)} adapters; "
        f"{len(plan.configurations)} configurations"
        + (" and the prompted base" if context.config.baselines.prompted else "")
        + f" in {len(jobs)} jobs"
        + (" (the last re-routing)" if reroute_from != "none" else "")
    )
    labels = prompt_labels(router)
    best = context.config.protocol.best_single
    if best is not None and best not in names:
        raise PipelineError(
            f"protocol.best_single: {best} is not an adapter of this run (it has "
            f"{', '.join(names)}); name one of them, or none"
        )
    if context.config.protocol.primary:  # named right, before a test seed is played
        failed = [(False, 0.0)] * len(chosen)
        compared(
            plan,
            {
                key: dict.fromkeys(at, (False, 0.0))
                for key, (_, at) in plan.configurations.items()
            },
            labels,
            context,
            baselines,
            chosen,
            prompted=failed if context.config.baselines.prompted else None,
            rerouted=(failed, [[BASE]] * len(chosen))
            if reroute_from != "none"
            else None,
        )
    protocol = played_split(context)  # after the checks, before any episode
    played = run_jobs(context, jobs)
    rerouted = played.pop() if reroute_from != "none" else None
    rerouted_rows = {r["seed"]: r for r in _played(rerouted)} if rerouted else {}
    episodes: dict[str, dict[int, dict[str, Any]]] = {}  # transcripts by key, seed
    folders: dict[str, list[str]] = {}  # each configuration's job folders
    for done in played:
        for row in _played(done):
            key = row["configuration"]
            episodes.setdefault(key, {})[row["seed"]] = row
            if done.folder.name not in folders.setdefault(key, []):
                folders[key].append(done.folder.name)
    index_of = {seed: i for i, seed in enumerate(seeds)}
    outcomes = {
        key: {index_of[s]: (r["success"], r["reward"]) for s, r in rows.items()}
        for key, rows in episodes.items()
    }
    report = compared(
        plan,
        outcomes,
        labels,
        context,
        baselines,
        chosen,
        prompted=(
            [
                (episodes[PROMPTED][s]["success"], episodes[PROMPTED][s]["reward"])
                for s in seeds
            ]
            if PROMPTED in episodes
            else None
        ),
        rerouted=(
            [(rerouted_rows[s]["success"], rerouted_rows[s]["reward"]) for s in seeds],
            [rerouted_rows[s]["routes"] for s in seeds],
        )
        if rerouted is not None
        else None,
    )
    report["best_single_chosen_on"] = "dev" if best else protocol["split"]
    per_condition = {
        name: [episodes[key][seeds[i]] for i, key in enumerate(used)]
        for name, used in plan.conditions.items()
    }
    report["transcripts"] = folders
    report["backend"] = {"every condition": context.config.backend}
    if PROMPTED in episodes:
        per_condition[PROMPTED] = [episodes[PROMPTED][s] for s in seeds]
    if rerouted is not None:
        per_condition[report["rerouting"]["condition"]] = [
            rerouted_rows[s] for s in seeds
        ]
        report["transcripts"]["re-routed on errors"] = [rerouted.folder.name]
        report["backend"] = {  # what decoded the episodes
            "re-routed on errors": "transformers",
            "every other condition": context.config.backend,
        }
    report["trajectories"] = trajectory_records(context, per_condition, out)
    write_json(out / "report.json", report)
    (out / "report.md").write_text(markdown(report), encoding="utf-8")
    plot_confusion(report, out / "confusion.png")
    plot_success(report, out / "success.png")
    return {
        "success": report["success"],
        "best_single": report["best_single"],
        "protocol": protocol,
    }


def base_only(context: Context, out: Path) -> dict[str, Any]:
    """No adapter was trained: the base model's held-out success alone."""
    from trainer.evaluation import evaluate, rate
    from trainer.generation import TransformersGenerator

    model, tokenizer = context.base()
    played = evaluate(
        context.target(),
        TransformersGenerator(model, tokenizer),
        tokenizer,
        context.config.target.heldout_episodes,
        context.limits(),
        first_seed(context.config),
        context.config.rollout.tool_format,
    )
    success = {"base model": rate([float(o) for o in played["outcomes"]])}
    write_json(out / "report.json", {"success": success, "per_task": []})
    return {"success": success, "best_single": None}

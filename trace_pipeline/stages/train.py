"""train: one LoRA adapter per generated package (cold start on gold demonstrations, then GRPO).

Each adapter is one job (`trainer.run.open_run`, the code `trainer train`
runs), kept as it finishes, so a killed run redoes only the adapter it was
training. Then one more job plays each adapter, and the base model, on the
adapter's own environment's evaluation seeds, greedily, every row in one stream
(each under its own configuration, up to the generation batch at once), so the
report can show what training did where the capability is isolated.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from factory.outputs import recover, staged, write_json
from trace_pipeline.context import Context
from trace_pipeline.errors import PipelineError
from trace_pipeline.executors import Job, run_jobs
from trace_pipeline.store import contents, digest, read_output

if TYPE_CHECKING:
    from trainer.settings import TrainConfig


def generated_envs(context: Context) -> dict[str, str]:
    """Each package generate built: capability name -> its folder."""
    generated = context.folder.manifest("generate") or {}
    packages = generated.get("result", {}).get("packages", {})
    return {
        name: str(context.folder.stage("generate") / relative)
        for name, relative in sorted(packages.items())
    }


def train_config(context: Context) -> TrainConfig:
    """The TrainConfig every adapter of this run is trained with."""
    from trainer.settings import TrainConfig

    train = context.config.train.model_dump(exclude={"own_env_episodes"})
    rollout = context.config.rollout.model_dump(exclude={"temperature"})
    # A minibatch holds at most one iteration's episodes.
    episodes = train["groups"] * train["group_size"]
    train["minibatch_size"] = min(train["minibatch_size"], episodes)
    return TrainConfig(
        **train,
        **rollout,
        precision=context.config.precision,
        generation_batch_size=context.config.generation_batch_size,
    )


def train_adapter(
    context: Context,
    folder: Path,
    envs: str | list[str],
    name: str,
    config: TrainConfig,
    cold_kind: str = "cold-start",
) -> None:
    """An adapter trained on `envs` with `config` into `folder/adapter`, its GRPO
    iterations into `folder/summary.json` (the work of a resumable job, see
    `trace_pipeline.executors`: a killed one goes on from its last checkpoint; a
    stopped one keeps its checkpoint and stops the run, never finishes the job).

    GRPO starts from a copy of the cold start's own job (`cold_started`), which
    every GRPO setting tried on dev shares: a job of kind `cold_kind`, one of the
    jobs of the stage that trains the adapter, so its `--from` forgets them."""
    from trainer import checkpoint

    adapter = folder / "adapter"
    if config.cold_start and config.iterations and not checkpoint.resumable(adapter):
        cold = cold_started(context, envs, name, config, cold_kind)
        recover(folder, adapter.name)  # a copy that kill -9 cut short
        with staged(adapter) as staging:  # whole or not at all: never half a checkpoint
            shutil.copytree(
                cold / "adapter", staging, symlinks=True, dirs_exist_ok=True
            )
        context.say(
            f"train: {name}: {config.iterations} GRPO iterations from the cold start "
            f"of job {cold.name}"
        )
        _trainer_run(context, adapter, envs, name, config, resume=True)
    else:
        _start_or_go_on(context, adapter, envs, name, config)
    write_json(folder / "summary.json", grpo_summary(adapter / "metrics.jsonl"))


def cold_started(
    context: Context,
    envs: str | list[str],
    name: str,
    config: TrainConfig,
    kind: str = "cold-start",
) -> Path:
    """The folder of the cold start's job: `config`'s cold start alone (iterations
    0), keyed by what it depends on (the packages' files, the model, its chat
    template and `COLD_START_SETTINGS`), resumable after each epoch, of `kind`."""
    from trainer.settings import COLD_START_SETTINGS

    alone = config.replace(iterations=0)
    packages = [envs] if isinstance(envs, str) else envs
    inputs = {
        "envs": [digest(contents(Path(package))) for package in packages],
        "model": context.config.section("model", "chat_template"),
        "train": {k: v for k, v in alone.as_dict().items() if k in COLD_START_SETTINGS},
    }

    def work(job: Path) -> None:
        _start_or_go_on(context, job / "adapter", envs, name, alone)

    return context.job(kind, inputs, work, resumable=True)


def _start_or_go_on(
    context: Context,
    adapter: Path,
    envs: str | list[str],
    name: str,
    config: TrainConfig,
) -> None:
    """`trainer train` into `adapter`, going on from the checkpoint a stop left there,
    else from the start."""
    from trainer import checkpoint

    resume = checkpoint.resumable(adapter)
    if resume:
        context.say(f"train: {name}: going on from the checkpoint a stopped run left")
    else:
        shutil.rmtree(adapter, ignore_errors=True)  # what a kill before one left
        context.say(f"train: {name}: {_plan(config)}")
    _trainer_run(context, adapter, envs, name, config, resume)


def _plan(config: TrainConfig) -> str:
    cold = (
        f"cold start on {config.cold_start} demonstrations x "
        f"{config.cold_start_epochs} epochs"
    )
    grpo = f"{config.iterations} GRPO iterations"
    if not config.cold_start:
        return grpo
    return f"{cold}, then {grpo}" if config.iterations else cold


def _trainer_run(
    context: Context,
    adapter: Path,
    envs: str | list[str],
    name: str,
    config: TrainConfig,
    resume: bool,
) -> None:
    """`trainer train` into `adapter` (`trainer.run.open_run`); a stop keeps the
    checkpoint and stops the run (KeyboardInterrupt; a PipelineError Ray retries)."""
    from trainer.errors import TrainerError
    from trainer.run import open_run

    try:
        run = open_run(
            config,
            envs,
            context.model_path,
            adapter,
            chat_template=context.config.chat_template,
            resume=resume,
            sampler_model=context.gguf_path if config.backend == "llamacpp" else None,
        )
        outcome, _ = run.execute()
    except TrainerError as exc:
        if not resume:
            raise
        raise PipelineError(
            f"train: {name}, going on from the checkpoint in {adapter}: {exc} (remove "
            f"{adapter.parent} to train this adapter from the start)"
        ) from None
    if outcome.stopped_by is not None:  # the trainer kept its checkpoint: stop here
        if context.config.executor == "ray":  # an error Ray retries; the retry goes on
            raise PipelineError(
                f"train: {name}: stopped by signal {outcome.stopped_by}"
            )
        raise KeyboardInterrupt(outcome.stopped_by)


def grpo_summary(metrics: Path) -> dict[str, Any]:
    """What GRPO did over every iteration the adapter's metrics.jsonl holds (a resumed
    run's too): iterations, optimizer steps taken, and the share of groups dropped
    for equal rewards (a group with nothing to learn from)."""
    rows = read_output(metrics) if metrics.is_file() else []
    dropped = [float(r["dropped_groups"]) for r in rows if "dropped_groups" in r]
    return {
        "iterations": len(rows),
        "optimizer_steps": int(sum(float(r.get("optimizer_steps", 0)) for r in rows)),
        "dropped_groups": sum(dropped) / len(dropped) if dropped else None,
    }


def train_job(
    context: Context, folder: Path, env: str, cold_kind: str = "cold-start"
) -> None:
    """One capability's adapter (a job; see `train_adapter`)."""
    config = train_config(context)
    train_adapter(context, folder, env, Path(env).name, config, cold_kind)


def own_env_job(
    context: Context, folder: Path, adapters: dict[str, str], envs: dict[str, str]
) -> None:
    """The base model and each adapter (`adapters`: name -> its train job's folder)
    on the first evaluation seeds of the adapter's own environment (`envs`),
    greedily, by the run's backend (a job): `folder/own_env.json` holds each
    adapter's success before and after training."""
    from trainer.envs import resolve_env
    from trainer.evaluation import report_of
    from trainer.settings import EVAL_SEED_BASE

    seeds = [EVAL_SEED_BASE + i for i in range(context.config.train.own_env_episodes)]
    rows = [  # (adapter, "before" or "after", environment, seed)
        (name, when, resolve_env(envs[name]), seed)
        for name in adapters
        for when in ("before", "after")
        for seed in seeds
    ]
    trained = {
        name: context.folder.root / ".jobs" / job / "adapter"
        for name, job in adapters.items()
    }
    play = _own_env_llama if context.config.backend == "llamacpp" else _own_env_bank
    groups = play(context, folder, trained, rows)
    result: dict[str, dict[str, Any]] = {name: {} for name in adapters}
    for name in adapters:
        for when in ("before", "after"):
            played = [
                group[0]
                for group, (owner, moment, *_) in zip(groups, rows, strict=True)
                if (owner, moment) == (name, when)
            ]
            report = report_of(played, seeds)
            result[name][when] = {
                k: report[k]
                for k in ("episodes", "success_rate", "success_ci95", "outcomes")
            }
            context.say(f"train: {name}: own environment {when} {_rate(report)}")
    write_json(folder / "own_env.json", result)


def _own_env_bank(
    context: Context, folder: Path, trained: dict[str, Path], rows: list[tuple]
) -> list[Any]:
    """The own-environment rows in one transformers stream, each decoded under its
    configuration of an adapter bank (the base model before, its adapter after)."""
    from router.adapters import AdapterBank, row_config
    from trainer.models import mixed_precision
    from trainer.rollout import collect

    bank_folder = folder / "adapters"
    for name, adapter in trained.items():
        shutil.copytree(
            adapter, bank_folder / name, ignore=shutil.ignore_patterns("checkpoint")
        )
    bank, tokenizer = AdapterBank.load(
        bank_folder, context.model_path, context.config.precision
    )
    configs = [
        row_config({} if when == "before" else {name: 1.0}) for name, when, *_ in rows
    ]
    with mixed_precision(context.config.precision, bank.model):
        groups = collect(
            [env for _, _, env, _ in rows],
            bank.generator(tokenizer, batch_size=context.config.generation_batch_size),
            tokenizer,
            [seed for *_, seed in rows],
            1,
            context.limits(),
            bank.capabilities.tool_format(tokenizer),
            config_of=lambda episode: configs[episode.group],
        )
    shutil.rmtree(bank_folder)
    return groups


def _own_env_llama(
    context: Context, folder: Path, trained: dict[str, Path], rows: list[tuple]
) -> list[Any]:
    """The own-environment rows on llama.cpp: the base model's together, then each
    adapter's under its GGUF LoRA (llama.cpp applies one set of adapters at a time)."""
    from trainer.gguf_lora import lora_file
    from trainer.rollout import collect

    generator, tokenizer = context.llama()
    groups: list[Any] = [None] * len(rows)
    model = Path(context.gguf_path)
    for name in (None, *trained):  # None: the base model, every row "before"
        wanted = ("before",) if name is None else (name, "after")
        chosen = [
            i
            for i, (owner, when, *_) in enumerate(rows)
            if (when,) == wanted or (owner, when) == wanted
        ]
        files = [] if name is None else [lora_file(trained[name], model)]
        generator.use_adapters([(file, 1.0) for file in files])
        played = collect(
            [rows[i][2] for i in chosen],
            generator,
            tokenizer,
            [rows[i][3] for i in chosen],
            1,
            context.limits(),
            context.config.rollout.tool_format,
        )
        for i, group in zip(chosen, played, strict=True):
            groups[i] = group
    return groups


def _rate(report: dict[str, Any]) -> str:
    return f"{sum(report['outcomes'])}/{report['episodes']}"


def trained_inputs(context: Context) -> dict[str, Any]:
    """What every adapter of the run depends on besides its environment (not how
    many own-environment episodes judge it)."""
    generated = context.folder.manifest("generate") or {}
    config = context.config.section(
        "model", "chat_template", "precision", "train", "rollout"
    )
    del config["train"]["own_env_episodes"]
    return {"generate": generated.get("key"), "config": config}


def run(context: Context, out: Path) -> dict[str, Any]:
    """One adapter per generated package, then the own-environment job."""
    envs = generated_envs(context)
    context.say(
        f"train: {len(envs)} adapters, {context.config.train.iterations} GRPO "
        f"iterations each ({context.config.executor} executor)"
    )
    jobs = [
        Job(
            "train",
            {"env": name, **trained_inputs(context)},
            f"{__name__}:train_job",
            {"env": envs[name]},
            resumable=True,
        )
        for name in envs
    ]
    trained = dict(zip(envs, run_jobs(context, jobs), strict=True))
    own: dict[str, dict[str, Any]] = {}
    if trained and context.config.train.own_env_episodes:
        folders = {name: done.folder.name for name, done in trained.items()}
        arguments = {"adapters": folders, "envs": envs}
        inputs = {
            "adapters": folders,
            "config": context.config.section(
                "model", "chat_template", "precision", "backend", "rollout",
                "train.own_env_episodes",
            ),
        }  # fmt: skip
        context.say(
            f"train: {len(trained)} adapters and the base model on their own "
            f"environments ({context.config.backend})"
        )
        (done,) = run_jobs(
            context, [Job("own-env", inputs, f"{__name__}:own_env_job", arguments)]
        )
        own = read_output(done.folder / "own_env.json")
    adapters, hosts, tries = {}, {}, {}
    for name, done in trained.items():
        shutil.copytree(
            done.folder / "adapter",
            out / "adapters" / name,
            ignore=shutil.ignore_patterns("checkpoint"),
        )
        summary = read_output(done.folder / "summary.json")
        adapters[name] = {
            **summary,
            "before": own.get(name, {}).get("before"),
            "after": own.get(name, {}).get("after"),
        }
        hosts[name], tries[name] = done.host, done.record()
    return {"adapters": adapters, "ran_on": hosts, "tries": tries}

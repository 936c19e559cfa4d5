"""The whole loop as resumable stages: skip what still matches, redo what does not.

A stage's key hashes its config sections, its upstream manifests and the
project version; a stage whose manifest holds the same key is skipped, and a
stage that is redone changes its manifest, so every stage after it is redone
too. `start` (`--from STAGE`) forgets that stage and every one after it, their
finished jobs included (a job's key holds its inputs, not the code, and a code
fix is what --from is for), then redoes them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from factory.errors import one_line
from factory.outputs import write_text
from factory.version import project_version
from trace_pipeline.config import (
    PipelineConfig,
    Target,
    check_config,
    load_config,
    read_config,
)
from trace_pipeline.context import Context, TargetHandle, gym_target
from trace_pipeline.errors import PipelineError
from trace_pipeline.protocol import guard
from trace_pipeline.stages import NAMES, STAGES, Stage
from trace_pipeline.store import MANIFEST, RunFolder, digest


def stage_inputs(
    stage: Stage, config: PipelineConfig, folder: RunFolder
) -> dict[str, Any]:
    """What a stage is computed from (its manifest records these and hashes them)."""
    return {
        "config": config.section(*stage.settings(config)),
        "upstream": {name: digest(folder.manifest(name)) for name in stage.upstream},
        "version": project_version(),
    }


SHOWN_CHANGES = 4  # the changed inputs a rerun names before "and N more"


def changed_inputs(before: Any, now: dict[str, Any]) -> str:
    """What differs between the inputs a stage's manifest recorded and the ones it
    is about to run with ("model: 'a.gguf' -> 'b.gguf'; collect's output"), so a
    rerun that will play hours again says why before it starts ("" when the
    manifest recorded none to compare)."""

    def leaves(value: Any, key: str) -> dict[str, Any]:  # {"train.cold_start": 2}
        if isinstance(value, dict) and value:
            return {
                k: v
                for name, inner in value.items()
                for k, v in leaves(inner, f"{key}.{name}" if key else str(name)).items()
            }
        return {key: value}

    def settings(inputs: dict[str, Any]) -> dict[str, Any]:
        return leaves(inputs.get("config"), "") | {
            "the project's version": inputs.get("version")
        }

    def upstream(inputs: dict[str, Any]) -> dict[str, Any]:
        outputs = inputs.get("upstream")
        return outputs if isinstance(outputs, dict) else {}

    def differ(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
        return [
            key
            for key in sorted(old.keys() | new.keys())
            if key not in old or key not in new or old[key] != new[key]
        ]

    def shown(inputs: dict[str, Any], key: str) -> str:  # a setting newer than the run
        return one_line(repr(inputs[key]))[:60] if key in inputs else "(not recorded)"

    if not isinstance(before, dict) or not isinstance(before.get("config"), dict):
        return ""
    old, new = settings(before), settings(now)
    changes = [
        f"{key}: {shown(old, key)} -> {shown(new, key)}" for key in differ(old, new)
    ]
    changes += [f"{name}'s output" for name in differ(upstream(before), upstream(now))]
    more = len(changes) - SHOWN_CHANGES
    return "; ".join(changes[:SHOWN_CHANGES]) + (
        f"; and {more} more" if more > 0 else ""
    )


@dataclass(frozen=True)
class StageStatus:
    """One stage's line of `trace status`."""

    name: str
    # done, stale (inputs changed), changed (files edited), running or missing
    state: str
    wall_seconds: float | None
    jobs: int  # its finished jobs kept (a stage that is not done reuses them)
    changed: str = ""  # a stale stage's inputs that changed since it ran


def status(root: Path) -> list[StageStatus]:
    """Each stage of the run in `root`: done, stale, changed or missing (against its
    saved config)."""
    if not root.is_dir():
        raise PipelineError(
            f"{root} is {'a file' if root.exists() else 'not there'}; give the folder "
            "a `trace run` wrote (its --out)"
        )
    folder = RunFolder(root)
    config_file = root / "config.yaml"
    if not config_file.is_file():
        raise PipelineError(
            f"{root} holds no `trace run` (no config.yaml); give a run folder"
        )
    try:
        config = load_config(config_file)
    except PipelineError as exc:
        raise PipelineError(
            f"{root} is not a `trace run` folder, or its config.yaml was edited: {exc}"
        ) from None
    running = folder.running()
    rows = []
    for stage in STAGES:
        manifest = folder.manifest(stage.name)
        jobs = folder.finished_jobs(stage.jobs)
        changed = ""
        if manifest is None:
            written = (folder.stage(stage.name) / MANIFEST).is_file()
            state, seconds = "changed" if written else "missing", None
        else:
            inputs = stage_inputs(stage, config, folder)
            state = "done" if manifest["key"] == digest(inputs) else "stale"
            seconds = manifest.get("wall_seconds")
            if state == "stale":
                changed = changed_inputs(manifest.get("inputs"), inputs)
        if running and state != "done":  # a run does its stages in order
            state, running = "running", False
        rows.append(StageStatus(stage.name, state, seconds, jobs, changed))
    return rows


TASKS_CHECKED = 3  # tasks of each split `trace run` checks its target on


def contract_entry(target: Target) -> tuple[str, dict[str, Any]]:
    """The target contract's entry and settings for a config's target: a python
    target's own; the built-in phone target's and a gym target's task family
    (`contract.from_family`). A tau2 or trajectories target has none (a
    PipelineError): tau2-bench's tasks and user model are its own."""
    if target.kind == "python":
        return str(target.entry), dict(target.settings)
    if target.kind == "phone":
        entry = "trace_pipeline.targets.phone:contract_target"
        return entry, {"difficulty": dict(target.difficulty)}
    if target.kind == "gym":
        return "trace_pipeline.targets.contract:package_target", {
            "env": str(target.env)
        }
    raise PipelineError(
        f"a {target.kind} target is not checked through the target contract "
        + (
            "(tau2-bench's tasks and its user model are tau2's own)"
            if target.kind == "tau2"
            else "(it is runs already played: no tasks to check)"
        )
    )


def target_problems(entry: str, settings: dict[str, Any], tasks: int) -> list[str]:
    """What `trace check-target` finds wrong with the target `entry` makes, one line
    each, on `tasks` tasks of each split (a target that cannot be made: one line)."""
    from trace_pipeline.targets.check import check_target
    from trace_pipeline.targets.contract import ContractEnv, TargetError

    try:
        env = ContractEnv(entry, settings)
    except TargetError as exc:
        return [str(exc)]
    return [str(problem) for problem in check_target(env, tasks)]


def preflight(config: PipelineConfig) -> None:
    """Refuse, before any stage runs or the run folder is made, what the config
    names that is not on this machine: the model, its chat template file, the
    target's kit, a gym target's environment, a trajectories target's runs, vLLM
    for `train.backend: vllm`, llama.cpp and a GGUF model for `backend: llamacpp`
    (and `train.backend: llamacpp`),
    tau2-bench and the splits (and their sizes) of a tau2 target (each would
    otherwise fail only after the stages before it, hours in)."""
    from factory.analyze.pipeline import resolve_target
    from factory.errors import FactoryError
    from trainer.chat_templates import BUILTIN, template_file
    from trainer.errors import TrainerError
    from trainer.models import check_model
    from trainer.settings import check_backend

    target = config.target
    try:
        if config.model != "tiny":
            check_model(config.model, "model")
        if config.chat_template is not None and config.chat_template not in BUILTIN:
            template_file(config.chat_template, "chat_template")
        resolve_target(target.kit, "target.kit")
        through_contract = target.kind in ("python", "phone") or (
            target.kind == "gym"  # a package's task family (`gym_target`)
            and isinstance(gym_target(str(target.env)), TargetHandle)
        )
        if through_contract:
            problems = target_problems(*contract_entry(target), TASKS_CHECKED)
            if problems:
                raise PipelineError(
                    f"the {target.kind} target does not keep the target contract "
                    f"(`trace check-target` names every problem): {problems[0]}"
                    + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")
                )
        if (
            target.kind == "trajectories"
            and not Path(str(target.trajectories)).exists()
        ):
            raise PipelineError(
                f"target.trajectories: {target.trajectories} does not exist; give a "
                "file or folder of runs"
            )
        check_backend(config.train.backend, "train.backend:")
        check_backend(config.backend, "backend:")
        for key, backend in (
            ("backend", config.backend),
            ("train.backend", config.train.backend),
        ):
            if backend == "llamacpp" and config.model != "tiny":
                if Path(config.model).suffix != ".gguf":
                    raise PipelineError(
                        f"{key}: llamacpp plays a .gguf model file, and model "
                        f"{config.model} is not one; give the GGUF file (`trace model "
                        f"NAME` writes one) or set {key}: transformers"
                    )
        if target.kind == "tau2":
            from trace_pipeline.targets.tau2 import check_splits

            check_splits(
                target.tau2.domain,
                {
                    "analysis": (target.tau2.analysis_split, target.analysis_episodes),
                    "heldout": (target.tau2.heldout_split, target.heldout_episodes),
                },
            )
    except (FactoryError, TrainerError, RuntimeError, ValueError) as exc:
        raise PipelineError(str(exc)) from None


def run(
    config_file: Path,
    out: Path,
    start: str | None = None,
    overrides: Sequence[str] = (),
    replay_test: bool = False,
) -> Path:
    """Run every stage that is not already done; return the report folder.
    `overrides` (`--set KEY=VALUE`) change the config file's values for this run;
    `replay_test` lets evaluate play a test split played before under another
    config (trace_pipeline.protocol)."""
    if start is not None and start not in NAMES:
        raise PipelineError(
            f"--from {start}: not a stage; choose one of {', '.join(NAMES)}"
        )
    data = read_config(config_file, overrides)
    config = check_config(data, config_file, overrides)
    preflight(config)
    folder = RunFolder(out)
    folder.open(config_file)
    with folder.lock():
        guard(folder, config, replay_test)
        saved = out / "config.yaml"
        # The run folder keeps the config it ran: `trace status`, job workers and a
        # rerun read it. With overrides, that is the file's mapping with them applied.
        text = config_file.read_bytes().decode("utf-8")
        if overrides:
            said = " --set ".join(overrides)  # one comment line, whatever they hold
            text = f"# {one_line(config_file)} with --set {one_line(said)}\n" + (
                yaml.safe_dump(data, sort_keys=False)
            )
        if not saved.is_file() or saved.read_bytes() != text.encode():
            write_text(saved, text)  # a link there was refused when the folder opened
        context = Context(
            config, folder, saved if overrides else config_file, replay_test
        )
        if start is not None:  # forgotten first: a run killed half-way redoes them too
            for stage in STAGES[NAMES.index(start) :]:
                folder.forget(stage.name, stage.jobs)
        redo = False
        for number, stage in enumerate(STAGES, 1):
            redo = redo or stage.name == start
            inputs = stage_inputs(stage, config, folder)
            key = digest(inputs)
            manifest = folder.manifest(stage.name)
            label = f"[{number}/{len(STAGES)}] {stage.name}"
            if not redo and manifest is not None and manifest["key"] == key:
                context.say(f"{label}: done, skipped")
                continue
            changed = (
                changed_inputs(manifest.get("inputs"), inputs)
                if manifest is not None and not redo
                else ""
            )
            context.say(
                f"{label}: running"
                + (f" (changed since it ran: {changed})" if changed else "")
            )
            began = time.time()
            with folder.staging(stage.name) as staging:
                result = stage.work(context, staging)
                folder.finish(staging, stage.name, key, inputs, began, result=result)
            folder.drop_partials(stage.jobs)
            context.say(f"{label}: finished in {time.time() - began:.0f} s")
    return folder.stage("report")

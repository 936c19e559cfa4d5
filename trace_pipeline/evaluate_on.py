"""`trace eval RUN --target CONFIG --out DIR`: a finished run's adapters judged on
another target, without retraining.

Do these adapters help on a target they were not made from? The run's frozen
adapters, router, probe and calibration requests are copied into a new run
folder whose config is the run's own with CONFIG's `target` section in place of
its target; the `evaluate` stage then plays every condition (base, each single,
merges, the mixture, each routing mode, re-routing, the oracle where the target
knows needs) on the new target's split that the run's `protocol.split` names
(test once frozen, dev while choosing), greedily, in one batched stream, and
writes the same report (`DIR/evaluate/report.md`: success with intervals,
success by true need, routing accuracy, paired exact McNemar with Holm). The
adapters were trained on an interface: a target showing a tool that the run's
kit lacks, or with other parameters, is refused naming the difference. A
stopped evaluation goes on from the jobs kept in DIR when the same command is
given again (`evaluated.json` says what DIR evaluates; anything else is refused).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from factory.outputs import (
    LINK_REFUSED,
    regular_file,
    unwritable_as,
    write_json,
    write_text,
)
from trace_pipeline.config import (
    PipelineConfig,
    apply_overrides,
    check_config,
    read_config,
)
from trace_pipeline.context import Context, task_info
from trace_pipeline.errors import PipelineError
from trace_pipeline.protocol import guard
from trace_pipeline.run import preflight, stage_inputs
from trace_pipeline.stages import NAMES, STAGES
from trace_pipeline.store import RunFolder, digest

# What evaluate reads of the run: its adapters and router (route), the mixture
# (baselines), the calibration requests (collect), what they were trained for
# (analyze, generate, train), and the tiny test model (random weights of its own).
COPIED = (
    "collect",
    "analyze",
    "generate",
    "train",
    "baselines",
    "route",
    ".tiny-model",
)
NEEDED = ("train", "route")  # a run without these has no adapters to judge


def _finished(run: Path) -> RunFolder:
    folder = RunFolder(run)
    if run.is_symlink() or not run.is_dir() or not folder.made_here():
        raise PipelineError(
            f"{run} is not a folder `trace run` made; give a finished run's --out"
        )
    missing = [name for name in NEEDED if folder.manifest(name) is None]
    if missing:
        raise PipelineError(
            f"{run}: stage {missing[0]} is not done (see `trace status {run}`); "
            "finish the run first"
        )
    return folder


def merged_config(
    run: Path, target_config: Path, overrides: Sequence[str] = ()
) -> tuple[PipelineConfig, str, str]:
    """The run's config with `target_config`'s target section and then `overrides`
    (`--set KEY=VALUE`: where the model file is on this machine, the backend, ...),
    its YAML text, and the kit the run's packages were built on."""
    data = read_config(run / "config.yaml")
    kit = check_config(data, run / "config.yaml").target.kit
    other = read_config(target_config)
    if not isinstance(other.get("target"), dict):
        raise PipelineError(
            f"--target {target_config} has no target section; give a config whose "
            "`target:` names the target to evaluate on"
        )
    data["target"] = other["target"]
    config = check_config(apply_overrides(data, overrides), target_config, overrides)
    if not config.target.playable:
        raise PipelineError(
            f"--target {target_config}: target kind {config.target.kind} has nothing "
            "to play; give a target the agent can act on"
        )
    return config, yaml.safe_dump(data, sort_keys=False), kit


def interface_problems(config: PipelineConfig, run_kit: str, out: Path) -> list[str]:
    """Each tool the new target shows that the run's kit lacks, or shows with other
    parameters (the adapters learned the kit's interface)."""
    from factory.analyze.pipeline import resolve_target
    from factory.kits import kits
    from trainer.settings import EVAL_SEED_BASE

    kit = resolve_target(run_kit, "the run's target.kit")
    schemas = kits()[kit].schemas if isinstance(kit, str) else kit["tools"]
    known = {
        s["function"]["name"]: s["function"].get("parameters", {}) for s in schemas
    }
    context = Context(config, RunFolder(out), out / "config.yaml")  # its target only
    shown = task_info(context.target().make(), EVAL_SEED_BASE).get("tools") or []
    problems = []
    for schema in shown:
        function = schema.get("function", {}) if isinstance(schema, dict) else {}
        name = function.get("name")
        if name not in known:
            problems.append(f"tool {name!r:.60} is not in the run's kit {run_kit}")
        elif json.dumps(function.get("parameters", {}), sort_keys=True) != json.dumps(
            known[name], sort_keys=True
        ):
            problems.append(f"tool {name} takes other parameters than in kit {run_kit}")
    return problems


def _sha256(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            sha.update(block)
    return sha.hexdigest()


RECORD_BYTES = 1 << 20  # evaluated.json is a few hundred bytes


def _same_evaluation(
    out: Path,
    evaluated: dict[str, Any],
    config_text: str,
    run: Path,
    target_config: Path,
    locked: bool = False,
) -> None:
    """An existing --out goes on only where it is this evaluation, stopped: a
    folder trace eval set up for the same run, target config and target, with the
    run's adapters and config (and `--set` values) as they were, its copy of the run
    whole. An empty folder is a new one; `locked`: this process holds its lock."""
    if out.is_dir() and not out.is_symlink() and not any(out.iterdir()):
        return
    foreign = (
        f"--out {out} exists and is not a stopped `trace eval` of {run} on "
        f"{target_config}; give a new folder for this evaluation"
    )
    folder = RunFolder(out)
    if out.is_symlink() or not out.is_dir() or not folder.made_here():
        raise PipelineError(foreign)
    if not locked and folder.running():
        raise PipelineError(
            f"another `trace run` or `trace eval` is using {out}; wait for it or use "
            "another --out"
        )
    record = out / "evaluated.json"
    if not record.exists() and not record.is_symlink():
        if any((out / name).exists() for name in (*COPIED, "config.yaml")):
            raise PipelineError(
                f"--out {out} holds a `trace run` folder, or a `trace eval` stopped "
                "before its copy of the run was whole; give a new folder (or remove "
                "that one if it is such a copy)"
            )
        return  # opened by a trace eval stopped before it copied anything
    kept = None
    if regular_file(record) and record.stat().st_size <= RECORD_BYTES:
        with contextlib.suppress(OSError, ValueError, RecursionError):
            kept = json.loads(record.read_text(encoding="utf-8"))
    readback = json.loads(json.dumps(evaluated))  # as it reads back from JSON
    if kept == readback:
        kept_text = _kept_config(out)
        if (
            all(folder.manifest(name) is not None for name in NEEDED)
            and kept_text is not None
            and kept_text.endswith(config_text)
            and kept_text.startswith("# ")
        ):
            return
        raise PipelineError(
            f"--out {out}: its copy of the run ({', '.join(NEEDED)}, config.yaml) was "
            "changed since it was made; give a new folder for this evaluation"
        )
    if (
        isinstance(kept, dict)
        and kept.get("run") == evaluated["run"]
        and kept.get("target_config") == evaluated["target_config"]
    ):
        changed = [
            what
            for key, what in (
                ("target", "target section"),
                ("adapters", "run's adapters"),
                ("config_sha256", "run's config or a --set value"),
            )
            if kept.get(key) != readback[key]
        ] or ["record"]
        raise PipelineError(
            f"--out {out} evaluated {run} on {target_config} before the {changed[0]} "
            "changed; give a new folder for this evaluation (or the same --set values)"
        )
    raise PipelineError(foreign)


def _kept_config(out: Path) -> str | None:
    """The config text a trace eval wrote in `out` (a heading comment, the config)."""
    path = out / "config.yaml"
    if not regular_file(path) or path.stat().st_size > RECORD_BYTES * 8:
        return None
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, ValueError):
        return None


def _copy_run(
    source: RunFolder, out: Path, config_text: str, evaluated: dict[str, Any]
) -> None:
    """What evaluate reads of the run, copied into --out; `evaluated.json` last, so
    its presence says the copy is whole."""
    origins = [source.root / name for name in COPIED]
    for origin in origins:  # all of them before anything is copied
        if origin.is_symlink():
            raise PipelineError(f"{origin} {LINK_REFUSED}")
    with unwritable_as(PipelineError, f"--out {out}"):
        for origin in origins:
            if origin.is_dir():
                shutil.copytree(origin, out / origin.name, symlinks=True)
        write_text(out / "config.yaml", config_text)
        write_json(out / "evaluated.json", evaluated)


def evaluate_on(
    run: Path,
    target_config: Path,
    out: Path,
    replay_test: bool = False,
    overrides: Sequence[str] = (),
) -> Path:
    """Every condition of the finished run `run` on `target_config`'s split that
    the run's protocol names, in the new run folder `out`; return the evaluate
    report's folder. A test split is played under the protocol (`replay_test`:
    `--replay-test`); `overrides` change the evaluation's settings as `--set` does
    for `trace run` (the model must be the file the adapters were trained on)."""
    source = _finished(run)
    config, text, kit = merged_config(run, target_config, overrides)
    preflight(config)
    problems = interface_problems(config, kit, out)
    if problems:
        raise PipelineError(
            f"--target {target_config} shows another interface than the run's adapters "
            f"were trained on: {'; '.join(problems[:5])}"
            + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else "")
        )
    evaluated = {
        "run": str(run.resolve()),
        "target_config": str(target_config.resolve()),
        "target": config.section("target")["target"],
        "config_sha256": hashlib.sha256(text.encode()).hexdigest(),
        "adapters": {
            p.parent.name: _sha256(p)
            for p in sorted(
                (run / "route" / "adapters").glob("*/adapter_model.safetensors")
            )
        },
    }
    if out.exists() or out.is_symlink():
        _same_evaluation(out, evaluated, text, run, target_config)
    try:
        inside = run.resolve() in out.resolve().parents
    except (OSError, RuntimeError):  # a loop of links on the way
        raise PipelineError(
            f"--out {out} cannot be resolved (a loop of links?); give a plain folder"
        ) from None
    if inside:
        raise PipelineError(
            f"--out {out} is inside the run {run}, which is never written; give a "
            "folder outside it"
        )
    folder = RunFolder(out)
    folder.open(target_config)
    with folder.lock():
        # looked at again under the lock: another trace eval may have set it up
        _same_evaluation(out, evaluated, text, run, target_config, locked=True)
        guard(folder, config, replay_test)
        resumed = (out / "evaluated.json").exists()
        if not resumed:
            heading = " ".join(f"# {run} on {target_config}".split())  # one line
            _copy_run(source, out, f"{heading}\n{text}", evaluated)
        context = Context(config, folder, out / "config.yaml", replay_test)
        stage = STAGES[NAMES.index("evaluate")]
        inputs = stage_inputs(stage, config, folder)
        manifest = folder.manifest(stage.name)
        if manifest is not None and manifest["key"] == digest(inputs):
            context.say(
                f"evaluate: done, skipped (the report is in {out / 'evaluate'})"
            )
            return folder.stage("evaluate")
        began = time.time()
        context.say(
            f"evaluate: the adapters of {run} on {target_config}'s "
            f"{config.protocol.split} split"
            + (" (going on from the jobs kept in --out)" if resumed else "")
        )
        with folder.staging(stage.name) as staging:
            result = stage.work(context, staging)
            folder.finish(
                staging, stage.name, digest(inputs), inputs, began, result=result
            )
    return folder.stage("evaluate")

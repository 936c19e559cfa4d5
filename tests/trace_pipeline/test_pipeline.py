"""`trace run` end to end on the tiny model: every stage, skipping, --from, kill -9, bad configs."""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import gymnasium
import pytest
from hypothesis import given
from hypothesis import strategies as st

from router.prompted import HEADING
from trace_pipeline.cli import main
from trace_pipeline.stages import NAMES, evaluate

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "examples" / "pipelines" / "phone_tiny.yaml"


def _trace(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trace_pipeline", *argv],
        check=False,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=900,
    )


def _rerun_changed(
    finished: Path, tmp_path: Path, old: str, new: str, left: tuple[str, ...] = ()
) -> tuple[Path, Path, subprocess.CompletedProcess]:
    """A copy of the finished run, rerun with the tiny config's `old` text made `new`
    and these jobs' folders left behind as killed tries: (the copy, the changed
    config, the rerun)."""
    out = tmp_path / "run"
    shutil.copytree(finished, out, symlinks=True)
    for job in left:
        (out / ".jobs" / job / "checkpoint").mkdir(parents=True)
    changed = tmp_path / "changed.yaml"
    assert old in TINY.read_text()
    changed.write_text(TINY.read_text().replace(old, new))
    # a changed config replays the finished run's test split: --replay-test says so
    return out, changed, _trace("run", str(changed), "--out", str(out), "--replay-test")


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("pipeline") / "run"
    done = _trace("run", str(TINY), "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_every_stage_writes_its_folder_and_manifest(finished: Path) -> None:
    for name in NAMES:
        manifest = json.loads((finished / name / "manifest.json").read_text())
        assert manifest["stage"] == name and len(manifest["key"]) == 64
    report = (finished / "report" / "report.md").read_text()
    assert "Table 3" in report and "exact McNemar" in report
    for condition in ("base model", "uniform merge", "TIES merge", "multi-capability GRPO",
                      "routed: argmax", "routed: top-p", "oracle",
                      "SFT only: date_time_recovery", "multi-capability SFT only",
                      "prompted base"):  # fmt: skip
        assert f"| {condition} |" in report, condition
    trace = json.loads((finished / "baselines" / "mixture" / "trace.json").read_text())
    assert trace["capability"] == "mixture"
    assert trace["envs"] == ["date_time_recovery", "permission_error_recovery"]
    assert "<table>" in (finished / "report" / "report.html").read_text()
    evaluated = json.loads((finished / "evaluate" / "report.json").read_text())
    for better in (evaluated["best_single"], "oracle"):
        assert {"p_value", "only_first", "only_second"} <= set(
            evaluated["paired"][f"{better} vs base model"]
        )
    assert evaluated["best_single_chosen_on"] == "test"
    assert "choose it on dev and freeze it" in report
    # a trained adapter whose GRPO took no step is its cold start: the table says so
    steps = json.loads((finished / "train" / "manifest.json").read_text())["result"]
    for name, row in steps["adapters"].items():
        marked = f"| single: {name} (no GRPO step) |" in report
        assert marked == (row["optimizer_steps"] == 0), name
    # each adapter paired with its own cold start: did GRPO add to SFT?
    for name in ("date_time_recovery", "permission_error_recovery"):
        assert "p_holm" in evaluated["paired"][f"single: {name} vs SFT only: {name}"]
        sft = finished / "train" / "adapters" / name / "sft_only" / "trace.json"
        assert json.loads(sft.read_text())["training"]["iterations"] == 0
    assert "multi-capability GRPO vs multi-capability SFT only" in evaluated["paired"]
    # the prompted base saw the capabilities in its system prompt; the base did not
    assert f"prompted base vs {evaluated['best_single']}" in evaluated["paired"]
    prompted = [
        json.loads(line)
        for line in (finished / "evaluate" / "trajectories" / "prompted_base.jsonl")
        .read_text()
        .splitlines()
    ]
    base = (finished / "evaluate" / "trajectories" / "base_model.jsonl").read_text()
    assert len(prompted) == 6 and HEADING not in base
    assert all(HEADING in r["messages"][0]["content"] for r in prompted)
    collected = (finished / "collect" / "trajectories.jsonl").read_text().splitlines()
    assert len(collected) == 12
    record = json.loads(collected[0])
    assert record["expected_actions"] and "needs" in record["metadata"]
    success = json.loads((finished / "collect" / "manifest.json").read_text())[
        "result"
    ]["success"]
    assert success["all"]["n"] == 12  # every rate has the one shape evaluate's have
    for row in success.values():
        low, high = row["ci95"]
        assert low <= row["rate"] <= high and row["successes"] <= row["n"]
    assert not list(finished.glob(".*staging*"))


def test_packages_show_the_targets_tools_and_policy(finished: Path) -> None:
    from trace_pipeline.targets import phone

    target = phone.PhoneTargetEnv()
    tools = [t["function"]["name"] for t in target.reset(seed=0)[1]["tools"]]
    specs = sorted((finished / "generate" / "specs").glob("*.json"))
    assert specs
    for spec in specs:
        generation = json.loads(spec.read_text())["generation"]
        assert generation["tools"] == tools, spec.name
        assert generation["policy"] == target.toolkit.policy, spec.name


def test_a_policy_is_shown_only_by_packages_of_the_targets_kit(tmp_path: Path) -> None:
    from trace_pipeline.stages.generate import Prompt, as_configured

    spec = ROOT / "examples" / "capabilities" / "permission_error_recovery.json"
    own = as_configured(
        spec,
        Prompt(["search_contacts", "add_reminder"], "Be brief."),
        "binary",
        tmp_path / "a",
    )
    generation = json.loads(own.read_text())["generation"]
    assert generation["tools"] == ["search_contacts", "add_reminder"]
    assert generation["policy"] == "Be brief."
    # a target on another kit that shares a tool name: the tools narrow, its policy stays out
    other = as_configured(
        spec,
        Prompt(["search_contacts", "book_flight"], "Airline rules."),
        "binary",
        tmp_path / "b",
    )
    generation = json.loads(other.read_text())["generation"]
    assert generation["tools"] == ["search_contacts"] and "policy" not in generation


def test_generate_reward_mode_is_what_each_package_pays(tmp_path: Path) -> None:
    """`generate.reward_mode: partial` reaches the package's spec (its env reads it at
    run time); binary, the spec's own default, leaves a spec without a prompt as it is."""
    from trace_pipeline.stages.generate import as_configured

    spec = ROOT / "examples" / "capabilities" / "permission_error_recovery.json"
    assert as_configured(spec, None, "binary", tmp_path / "a") == spec
    graded = as_configured(spec, None, "partial", tmp_path / "b")
    assert json.loads(graded.read_text())["generation"]["reward_mode"] == "partial"
    assert (
        json.loads(spec.read_text()).get("generation", {}).get("reward_mode", "binary")
        == "binary"
    )  # the source is never written


def test_a_rerun_skips_every_stage_and_from_redoes_the_rest(finished: Path) -> None:
    again = _trace("run", str(TINY), "--out", str(finished))
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stderr.count("done, skipped") == len(NAMES)
    before = json.loads((finished / "collect" / "manifest.json").read_text())
    (mixture_job,) = (finished / ".jobs").glob("mixture-*")
    (mixture_job / "marker").write_text("from the first run")
    redo = _trace("run", str(TINY), "--out", str(finished), "--from", "baselines")
    assert redo.returncode == 0, redo.stderr[-2000:]
    assert redo.stderr.count("done, skipped") == NAMES.index("baselines")
    # --from redoes the stage's jobs too: a job's key holds its inputs, not the code
    assert "reusing the finished job" not in redo.stderr
    assert not (mixture_job / "marker").exists()
    assert json.loads((finished / "collect" / "manifest.json").read_text()) == before
    status = _trace("status", str(finished))
    assert status.stdout.count(" done") == len(NAMES), status.stdout
    for job in (finished / ".jobs").glob("train-*"):  # each job says what it is
        record = json.loads((job / "job.json").read_text())
        assert record["kind"] == "train" and record["inputs"]["env"] in {
            "permission_error_recovery",
            "date_time_recovery",
        }


def test_the_test_split_is_played_once_per_config_and_the_report_says_so(
    finished: Path, tmp_path: Path
) -> None:
    """The finished run wrote protocol.json before playing its test split and its
    report has a Protocol section; the same folder under another config is refused
    before any stage runs, naming --replay-test."""
    protocol = json.loads((finished / "protocol.json").read_text())
    assert protocol["test_seeds"] == {"first": 2**30, "count": 6}
    assert len(protocol["plays"]) == 1 and not protocol["replay"]
    assert "## Protocol" in (finished / "report" / "report.md").read_text()
    out = tmp_path / "run"
    shutil.copytree(finished, out, symlinks=True)
    changed = tmp_path / "changed.yaml"
    changed.write_text(TINY.read_text().replace("cold_start: 2", "cold_start: 3"))
    refused = _trace("run", str(changed), "--out", str(out))
    assert refused.returncode == 2 and "--replay-test" in refused.stderr
    assert "running" not in refused.stderr  # before any stage


def test_a_changed_setting_makes_its_stages_stale(
    finished: Path, tmp_path: Path
) -> None:
    changed = tmp_path / "changed.yaml"
    changed.write_text(TINY.read_text().replace("cold_start: 2", "cold_start: 3"))
    (finished / "config.yaml").write_text(changed.read_text())
    try:
        shown = _trace("status", str(finished)).stdout.splitlines()
    finally:
        (finished / "config.yaml").write_text(TINY.read_text())
    rows = dict(line.split()[:2] for line in shown)
    assert rows["collect"] == "done" and rows["train"] == "stale"
    train = next(line for line in shown if line.startswith("train "))
    assert train.endswith("(changed since it ran: train.cold_start: 2 -> 3)")


def test_set_changes_a_value_for_one_run_and_the_run_keeps_what_it_ran(
    finished: Path,
) -> None:
    """`--set` with the file's own value reruns nothing: the run folder's config.yaml
    (what status, job workers and reruns read) holds the file's mapping with the
    override applied, and gives the same stage keys as the file."""
    same = _trace(
        "run", str(TINY), "--out", str(finished), "--set", "train.cold_start=2"
    )
    try:
        assert same.returncode == 0, same.stderr[-2000:]
        assert same.stderr.count("done, skipped") == len(NAMES)
        saved = (finished / "config.yaml").read_text()
        assert saved.startswith(f"# {TINY} with --set train.cold_start=2\n")
        status = _trace("status", str(finished))
        assert status.stdout.count(" done") == len(NAMES), status.stdout
    finally:
        again = _trace("run", str(TINY), "--out", str(finished))
    assert again.stderr.count("done, skipped") == len(NAMES)
    assert (finished / "config.yaml").read_text() == TINY.read_text()


def test_set_values_are_yaml_and_bad_ones_exit_2_naming_them(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from trace_pipeline.config import load_config

    config = load_config(
        TINY, ["precision=bf16", "train.cold_start=3", "route.example_tokens=200"]
    )
    assert config.precision == "bf16" and config.train.cold_start == 3
    assert config.route.example_tokens == 200 and load_config(TINY).precision == "fp32"
    empty = tmp_path / "empty_section.yaml"
    empty.write_text("model: tiny\ntrain:\n")
    assert load_config(empty, ["train.iterations=2"]).train.iterations == 2
    out = str(tmp_path / "out")
    for bad, named in [
        ("precision", "write KEY=VALUE"),
        ("=bf16", "write KEY=VALUE"),
        ("train..iterations=2", "write KEY=VALUE"),
        ("model.name=x", "model is not a section"),
        ("train.cold_start=[", "the value is not YAML"),
        ("train.cold_start=" + "[" * 5000, "the value is not YAML"),
        ("train.nosuch=1", "--set train.nosuch=1: train.nosuch"),
        ("precision=fp64", "--set precision=fp64: precision"),
        (
            "train.iterations=true",
            "--set train.iterations=true: train.iterations: True",
        ),
    ]:
        assert main(["run", str(TINY), "--out", out, "--set", bad]) == 2, bad
        error = capsys.readouterr().err
        assert named in error and "Traceback" not in error, (bad, error)
    assert not Path(out).exists()


def test_kill_9_in_a_stage_then_a_rerun_finishes(tmp_path: Path) -> None:
    out = tmp_path / "run"
    process = subprocess.Popen(
        [sys.executable, "-m", "trace_pipeline", "run", str(TINY), "--out", str(out)],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    for line in process.stderr:
        if "train: running" in line:
            time.sleep(1.0)
            during = _trace("status", str(out)).stdout
            process.send_signal(signal.SIGKILL)
            break
    process.wait(timeout=60)
    assert not (out / "train" / "manifest.json").exists()
    # A fast machine may have finished some of the stage's jobs (a cold start, an
    # adapter) within that second; the stage itself is still running.
    assert re.search(r"^train +running(, \d+ finished jobs? kept)?$", during, re.M), (
        during
    )
    after = _trace("status", str(out)).stdout
    assert re.search(r"^train +missing", after, re.M), after
    done = _trace("run", str(TINY), "--out", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr.count("done, skipped") == NAMES.index("train")
    assert (out / "report" / "report.md").is_file()
    assert not list(out.glob(".*staging*")) and not list(
        (out / ".jobs").glob(".*staging*")
    )


def test_a_resumable_job_goes_on_from_what_a_killed_try_left(tmp_path: Path) -> None:
    """A job that raised keeps its `.partial` folder only when it is resumable; the
    next try sees it, and a finished job names its kind and inputs."""
    from trace_pipeline.config import PipelineConfig
    from trace_pipeline.context import Context
    from trace_pipeline.store import DONE, RunFolder, digest

    context = Context(PipelineConfig(model="tiny"), RunFolder(tmp_path), TINY)
    seen = []

    def work(folder: Path) -> None:
        seen.append(sorted(p.name for p in folder.iterdir()))
        (folder / "step").write_text("1")
        if len(seen) == 1:
            raise KeyboardInterrupt  # killed half-way

    for resumable, before_second in ((False, []), (True, ["step"])):
        seen.clear()
        inputs = {"resumable": resumable}
        with pytest.raises(KeyboardInterrupt):
            context.job("demo", inputs, work, resumable)
        final = context.job("demo", inputs, work, resumable)
        assert seen == [[], before_second]
        assert json.loads((final / "job.json").read_text()) == {
            "kind": "demo",
            "inputs": inputs,
        }
        assert not list(final.parent.glob("*.partial"))
    # Killed between finishing and the move: moved into place, not redone.
    key = digest({"kind": "demo", "x": 1})[:20]
    partial = tmp_path / ".jobs" / f"demo-{key}.partial"
    partial.mkdir()
    (partial / DONE).write_text("")
    seen.clear()
    assert context.job("demo", {"x": 1}, work, True).name == f"demo-{key}"
    assert seen == []


def test_a_job_says_when_it_starts_and_ends(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A long stage is not silent in a log file: each job it runs says when it starts
    and how long it took, and a finished one is said to be reused."""
    from trace_pipeline.config import PipelineConfig
    from trace_pipeline.context import Context
    from trace_pipeline.store import RunFolder

    context = Context(PipelineConfig(model="tiny"), RunFolder(tmp_path), TINY)
    name = context.job("demo", {"x": 1}, lambda folder: None).name
    context.job("demo", {"x": 1}, lambda folder: None)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == f"trace: demo: running job {name}"
    assert re.fullmatch(rf"trace: demo: job {name} done in \d+ s", lines[1]), lines
    assert lines[2:] == [f"trace: demo: reusing the finished job {name}"]


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGTERM])
def test_stopped_after_an_adapters_checkpoint_goes_on_from_it(
    tmp_path: Path, stop: signal.Signals
) -> None:
    """Killed, or stopped by SIGTERM (the trainer drops the iteration under way), after
    the cold start's checkpoint: no adapter is kept half-trained, the rerun trains on."""
    config = tmp_path / "longer.yaml"
    config.write_text(TINY.read_text().replace("iterations: 1", "iterations: 4"))
    out = tmp_path / "run"
    process = subprocess.Popen(
        [sys.executable, "-m", "trace_pipeline", "run", str(config), "--out", str(out)],
        cwd=ROOT,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 600
    while not list(out.glob(".jobs/train-*.partial/adapter/checkpoint/state.json")):
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    process.send_signal(stop)
    assert process.wait(timeout=300) == (-stop if stop == signal.SIGKILL else 143)
    assert not list(out.glob(".jobs/train-*/.done"))
    done = _trace("run", str(config), "--out", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "going on from the checkpoint a stopped run left" in done.stderr
    assert not list(out.glob(".jobs/*.partial"))
    summaries = [
        json.loads(p.read_text()) for p in out.glob(".jobs/train-*/summary.json")
    ]
    assert [s["iterations"] for s in summaries] == [4, 4]


def test_a_second_signal_in_training_stops_the_run_at_once_without_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """The trainer's second signal (`Interrupted`) is a stop of `trace run` like the first."""
    import trace_pipeline.run
    from trace_pipeline.cli import main
    from trainer.errors import Interrupted

    def interrupted(*_: object) -> None:
        raise Interrupted(signal.SIGTERM)

    monkeypatch.setattr(trace_pipeline.run, "run", interrupted)
    assert main(["run", str(TINY), "--out", str(tmp_path / "run")]) == 143
    assert capsys.readouterr().err == (
        "trace: stopped; rerun the same command to continue\n"
    )


def test_a_stop_while_the_cold_start_is_copied_leaves_nothing_to_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GRPO's job copies its cold start's checkpoint whole or not at all: a stop after
    the first file would otherwise leave a state.json without its adapter."""
    from types import SimpleNamespace

    from trace_pipeline.stages import train
    from trainer import checkpoint
    from trainer.settings import TrainConfig

    cold = tmp_path / "cold-start-1" / "adapter" / "checkpoint"
    cold.mkdir(parents=True)
    for name in ("state.json", "optimizer.pt", "rng.pt"):
        (cold / name).write_text("{}")
    monkeypatch.setattr(train, "cold_started", lambda *_: cold.parents[1])
    resumed: list[bool] = []
    monkeypatch.setattr(
        train, "_trainer_run", lambda *_, resume: resumed.append(resume)
    )
    whole = shutil.copytree

    def copy(one: str, other: str) -> None:
        if list((job / "adapter").parent.rglob("*.*")):
            raise KeyboardInterrupt(signal.SIGTERM)
        shutil.copy2(one, other)

    def stopped_after_one_file(source, target, *inner, **options):
        if inner:  # copytree's own call for a subfolder, our copy in it
            return whole(source, target, *inner, **options)
        return whole(source, target, copy_function=copy, **options)

    monkeypatch.setattr(shutil, "copytree", stopped_after_one_file)
    context, job = SimpleNamespace(say=lambda _: None), tmp_path / "train-1.partial"
    job.mkdir()
    config = TrainConfig(cold_start=2, iterations=1)
    with pytest.raises(KeyboardInterrupt):
        train.train_adapter(context, job, "env", "cap", config)
    assert not checkpoint.resumable(job / "adapter") and list(job.iterdir()) == []
    monkeypatch.setattr(shutil, "copytree", whole)
    train.train_adapter(context, job, "env", "cap", config)
    assert resumed == [True] and checkpoint.exists(job / "adapter")


def test_a_stopped_mixture_adapter_stops_the_run_and_is_never_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mixture job trains as an adapter job does: a stop keeps its checkpoint
    and stops the run, with no summary that would mark a half-trained adapter done."""
    from types import SimpleNamespace

    import trainer.run
    from trace_pipeline.config import PipelineConfig
    from trace_pipeline.context import Context
    from trace_pipeline.stages import baselines
    from trace_pipeline.store import RunFolder

    stopped = SimpleNamespace(stopped_by=signal.SIGTERM, metrics=[{}])
    run = SimpleNamespace(execute=lambda: (stopped, None))
    monkeypatch.setattr(trainer.run, "open_run", lambda *_, **__: run)
    config = PipelineConfig.model_validate({"model": "models/any.gguf"})
    context = Context(config, RunFolder(tmp_path), tmp_path / "config.yaml")
    with pytest.raises(KeyboardInterrupt):
        baselines.mixture_job(context, tmp_path / "job", ["a", "b"])
    assert not (tmp_path / "job" / "summary.json").exists()


def test_an_output_edited_after_it_was_written_is_named_with_the_fix(
    tmp_path: Path,
) -> None:
    """A finished job's or stage's file removed or edited: one line naming it and
    what makes it again, never a traceback."""
    from trace_pipeline.config import PipelineConfig
    from trace_pipeline.context import Context
    from trace_pipeline.errors import PipelineError
    from trace_pipeline.stages.route import collected
    from trace_pipeline.store import RunFolder, read_output

    job = tmp_path / ".jobs" / "evaluate-1"
    job.mkdir(parents=True)
    (job / "episodes.json").write_text('[{"seed": ')
    with pytest.raises(PipelineError, match=f"remove {job} and rerun"):
        read_output(job / "episodes.json")
    with pytest.raises(PipelineError, match="episodes.json was removed or edited"):
        read_output(job / "missing" / "episodes.json")
    (tmp_path / "collect").mkdir()
    lines = ['{"messages": [], "success": true, "metadata": {"seed": 3}}', "{}"]
    (tmp_path / "collect" / "trajectories.jsonl").write_text("\n".join(lines))
    config = PipelineConfig.model_validate({"model": "models/any.gguf"})
    context = Context(config, RunFolder(tmp_path), tmp_path / "config.yaml")
    with pytest.raises(PipelineError, match="lacks 'messages'.*--from collect"):
        collected(context)
    broken = '{"messages": [], "success": true, "metadata": null}'
    (tmp_path / "collect" / "trajectories.jsonl").write_text(broken)
    with pytest.raises(PipelineError, match="a record holds a value of the wrong kind"):
        collected(context)
    (tmp_path / "collect" / "trajectories.jsonl").write_text(lines[0])
    assert collected(context) == [([], True, 3)]


def test_a_stage_or_job_edited_by_hand_is_done_again(tmp_path: Path) -> None:
    """A manifest, a stage's file or a finished job's file edited, removed or added
    by hand no longer matches its seal: the stage is not done (status `changed`) and
    the job plays again, rather than handing the edit to what reads them."""
    import time as clock

    from trace_pipeline.config import PipelineConfig
    from trace_pipeline.context import Context
    from trace_pipeline.store import RunFolder

    folder = RunFolder(tmp_path)
    stage = tmp_path / "analyze"
    (stage / "specs").mkdir(parents=True)
    (stage / "specs" / "a.json").write_text("{}")
    result = {"retained": ["date_time_recovery"], 3: "a key that is no name"}
    folder.finish(stage, "analyze", "k" * 64, {}, clock.time(), result=result)
    path = stage / "manifest.json"
    assert folder.manifest("analyze")["result"]["3"] == "a key that is no name"
    (stage / "specs" / "__pycache__").mkdir()  # Python's own cache is no edit
    (stage / "specs" / "__pycache__" / "a.pyc").write_text("")
    assert folder.manifest("analyze") is not None
    written = json.loads(path.read_text())
    for edit in (
        lambda: path.write_text(json.dumps(written | {"result": {"retained": 3}})),
        lambda: (stage / "specs" / "a.json").write_text('{"name": 1}'),
        lambda: (stage / "specs" / "a.json").unlink(),
        lambda: (stage / "specs" / "b.json").write_text("{}"),
        lambda: os.mkfifo(stage / "specs" / "b.json"),  # never opened: it would block
    ):
        edit()
        assert folder.manifest("analyze") is None
        (stage / "specs" / "b.json").unlink(missing_ok=True)
        (stage / "specs" / "a.json").write_text("{}")
        path.write_text(json.dumps(written))
        assert folder.manifest("analyze") is not None
    old = {k: v for k, v in written.items() if k not in ("seal", "files")}
    (stage / "specs" / "a.json").write_text('{"name": 1}')
    path.write_text(json.dumps(old))
    assert folder.manifest("analyze") is not None  # written before seals
    path.write_text(json.dumps(written))
    (tmp_path / "config.yaml").write_text("model: tiny\n")
    (tmp_path / ".trace-run").write_text("")
    status = _trace("status", str(tmp_path))
    assert re.search(r"^analyze\s+changed", status.stdout, re.M), status.stdout

    config = PipelineConfig.model_validate({"model": "models/any.gguf"})
    context = Context(config, folder, tmp_path / "config.yaml")
    plays = []

    def work(out: Path) -> None:
        plays.append(out)
        (out / "episodes.json").write_text('[{"seed": 1}]')

    job = context.job("evaluate", {"seed": 1}, work)
    assert context.job("evaluate", {"seed": 1}, work) == job and len(plays) == 1
    (job / "episodes.json").write_text('[{"sed": 1}]')
    assert folder.finished_jobs(("evaluate",)) == 0  # not reused, so not counted
    assert context.job("evaluate", {"seed": 1}, work) == job and len(plays) == 2
    assert folder.finished_jobs(("evaluate",)) == 1
    assert json.loads((job / "episodes.json").read_text()) == [{"seed": 1}]
    (job / ".done").write_text("")  # a job finished before jobs were sealed
    (job / "episodes.json").write_text("[]")
    assert context.job("evaluate", {"seed": 1}, work) == job and len(plays) == 2


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("model: tiny\ntarget: {analysis_episodes: -3}\n", "target.analysis_episodes"),
        ("model: tiny\nrollout: {max_turns: many}\n", "rollout.max_turns"),
        ("model: tiny\nbogus: 1\n", "bogus"),
        ("target: {}\n", "model"),
        (
            "model: tiny\nrollout: {max_new_tokens: 100, max_total_tokens: 90}\n",
            "max_total_tokens",
        ),
        ("- a\n- b\n", "mapping"),
        ("1: x\nmodel: tiny\n", "1: Keys should be strings; write the key as a name"),
        ("model: [unclosed\n", "not valid YAML (line 2, column 1"),
        ("model: tiny\n\ttarget: {}\n", "line 2, column 1: found character '\\t'"),
        (
            "model: tiny\ntarget: {}\ntarget: {}\n",
            "line 3, column 1: 'target' is given twice",
        ),
        ("model: tiny\ntarget: {difficulty: {share_off: 500}}\n", "share_off"),
        ('model: ""\n', "model: String should have at least 1 character"),
        ("model: models/none.gguf\n", "model: GGUF file not found"),
        (
            "model: tiny\ntarget: {kit: nosuch}\n",
            "target.kit: 'nosuch' is neither a kit",
        ),
        (
            "model: tiny\ntarget: {kind: tau2, tau2: {domain: mock}}\n",
            "target.kit: 'mock'",
        ),
        # Found before any stage, not after the tiny model is built and collect begun.
        ("model: tiny\ntarget: {kind: gym, env: NoSuch-v0}\n", "unknown environment"),
        (
            "model: tiny\ntarget: {kind: trajectories, trajectories: /nonexistent}\n",
            "target.trajectories: /nonexistent does not exist",
        ),
        (
            "model: tiny\nchat_template: /nonexistent.jinja\n",
            "chat_template: '/nonexistent.jinja' is neither a built-in",
        ),
        (
            "model: tiny\ngenerate: {max_packages: true}\n",
            "generate.max_packages: True is a boolean, not a number",
        ),
        (
            "model: tiny\ntarget: {difficulty: {say_done: false}}\n",
            "target.difficulty.say_done: False is a boolean",
        ),
        (
            "model: tiny\ntrain: {temperature: .nan}\n",
            "train.temperature: nan is not a finite number",
        ),
        ("model: tiny\nroute: {top_p: -.inf}\n", "route.top_p: -inf is not a finite"),
        # Text pydantic would read as NaN is named so too, not called out of range.
        ("model: tiny\nrollout: {temperature: NaN}\n", "NaN is not a finite number"),
        ("model: tiny\nbackend: vllm\n", "collect and evaluate play on transformers"),
    ],
)
def test_a_bad_config_exits_2_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture, text: str, named: str
) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(text)
    assert main(["run", str(config), "--out", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert named in error and "Traceback" not in error
    assert not (tmp_path / "out").exists()  # a refused run leaves no folder


def test_missing_config_foreign_out_and_a_second_run_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert main(["run", str(tmp_path / "none.yaml")]) == 2
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "mine.txt").write_text("keep")
    assert main(["run", str(TINY), "--out", str(foreign)]) == 2
    assert (foreign / "mine.txt").read_text() == "keep"
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / ".trace-run").write_text("made by `trace run`\n")
    with open(busy / ".lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert main(["run", str(TINY), "--out", str(busy)]) == 2
    errors = capsys.readouterr().err
    assert "no such file" in errors and "not made by `trace run`" in errors
    assert "another `trace run`" in errors
    assert os.listdir(foreign) == ["mine.txt"]


def test_a_pipe_a_linked_config_and_a_foreign_manifest_are_handled(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A config that is a pipe is refused before --out is made (it would block); the
    run folder's config.yaml that is a link is refused by name, its target kept; a
    manifest this tool did not write counts as changed; status names a folder that
    is not there."""
    pipe = tmp_path / "pipe.yaml"
    os.mkfifo(pipe)
    assert main(["run", str(pipe), "--out", str(tmp_path / "a")]) == 2
    assert "is not a regular file" in capsys.readouterr().err
    assert not (tmp_path / "a").exists()
    precious = tmp_path / "precious.yaml"
    precious.write_text("mine\n")
    config = tmp_path / "c.yaml"
    config.write_text("model: tiny\n")
    run = tmp_path / "run"
    run.mkdir()
    (run / ".trace-run").write_text("made by `trace run`\n")
    (run / "config.yaml").symlink_to(precious)
    assert main(["run", str(config), "--out", str(run)]) == 2
    assert f"{run / 'config.yaml'} is a symbolic link" in capsys.readouterr().err
    assert precious.read_text() == "mine\n"
    (run / "config.yaml").unlink()
    (run / "config.yaml").write_text(config.read_text())
    (run / "collect").mkdir()
    (run / "collect" / "manifest.json").write_text(
        '{"key": "k", "wall_seconds": "soon"}'
    )
    assert main(["status", str(run)]) == 0
    assert main(["status", str(tmp_path / "nowhere")]) == 2
    out = capsys.readouterr()
    assert "collect    changed" in out.out and "is not there" in out.err
    (run / "config.yaml").write_text("hello: 1\n")
    assert main(["status", str(run)]) == 2
    assert "is not a `trace run` folder, or its config.yaml was edited" in (
        capsys.readouterr().err
    )


def test_the_ray_executor_trains_the_same_adapters(
    finished: Path, tmp_path: Path
) -> None:
    pytest.importorskip("ray")
    config = tmp_path / "ray.yaml"
    config.write_text(TINY.read_text() + "executor: ray\nray:\n  cpus_per_job: 1\n")
    out = tmp_path / "run"
    done = _trace("run", str(config), "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    manifest = json.loads((out / "train" / "manifest.json").read_text())
    assert set(manifest["result"]["ran_on"]) == {
        "date_time_recovery",
        "permission_error_recovery",
    }
    # What the executor decides is every job's output: the collected records and
    # each adapter, the mixture's included. Evaluation runs in the driver under
    # either executor, so its report is not the executor's to match: a tiny random
    # model's greedy near-ties are not bit-stable between two driver processes on
    # every CPU (CI once saw one re-routed episode differ).
    assert (out / "collect" / "trajectories.jsonl").read_bytes() == (
        finished / "collect" / "trajectories.jsonl"
    ).read_bytes()
    adapters = [
        *(finished / "train" / "adapters").iterdir(),
        finished / "baselines" / "mixture",
    ]
    # Equal up to float rounding: a Ray job runs torch on its own CPU count, and
    # another thread count sums matmuls in another order (last bits differ).
    from safetensors.torch import load_file

    for adapter in adapters:
        relative = adapter.relative_to(finished) / "adapter_model.safetensors"
        mine, reference = load_file(out / relative), load_file(finished / relative)
        assert mine.keys() == reference.keys(), adapter.name
        for key, tensor in reference.items():
            difference = (mine[key] - tensor).abs().max().item()
            assert difference <= 1e-4 * max(1.0, tensor.abs().max().item()), (
                adapter.name, key, difference,
            )  # fmt: skip
    assert "Table 3" in (out / "report" / "report.md").read_text()


def test_generate_fails_when_no_retained_capability_gets_a_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Analysis retained capabilities but none could be built (an LLM endpoint down):
    the stage fails naming each reason instead of being kept done with nothing."""
    import factory.generate.build as build
    from factory.errors import FactoryError
    from trace_pipeline.config import PipelineConfig
    from trace_pipeline.context import Context
    from trace_pipeline.errors import PipelineError
    from trace_pipeline.stages import generate
    from trace_pipeline.store import RunFolder

    def down(*args: object, **kwargs: object) -> None:
        raise FactoryError("no endpoint: set OPENAI_BASE_URL")

    monkeypatch.setattr(build, "generate", down)
    config = PipelineConfig.model_validate(
        {"model": "tiny", "generate": {"target_prompt": False}}
    )
    context = Context(config, RunFolder(tmp_path), TINY)
    analyze = tmp_path / "analyze"
    analyze.mkdir()
    (analyze / "a.json").write_text("{}")
    result = {"retained": ["a"], "specs": {"a": "a.json"}}
    (analyze / "manifest.json").write_text(json.dumps({"key": "k", "result": result}))
    with pytest.raises(
        PipelineError, match="no package could be built .a: no endpoint"
    ):
        generate.run(context, tmp_path / "generate")


def test_a_gym_target_gives_records_with_its_gold_actions(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from trace_pipeline.config import PipelineConfig
    from trace_pipeline.context import Context, transcript
    from trace_pipeline.stages.collect import record
    from trace_pipeline.store import RunFolder
    from trainer.rollout import Ending

    package = str(ROOT / "generated_envs" / "permission_error_recovery")
    config = PipelineConfig.model_validate(
        {"model": "tiny", "target": {"kind": "gym", "env": package}}
    )
    context = Context(config, RunFolder(tmp_path), TINY)
    assert context.needs(3) == []  # a package does not state needs: nothing is assumed
    episode = SimpleNamespace(
        seed=3, messages=[{"role": "user", "content": "hi"}], reward=0.0,
        success=False, turns=1, ending=Ending.FINISHED,
    )  # fmt: skip
    row = record(transcript(episode), context.target().make())
    assert row["expected_actions"] and row["tools"] and row["metadata"]["needs"] == []
    with pytest.raises(Exception, match="env exactly when kind is gym"):
        PipelineConfig.model_validate({"model": "tiny", "target": {"kind": "gym"}})


def test_a_held_out_change_redoes_only_evaluation_and_from_forgets_its_stages(
    finished: Path, tmp_path: Path
) -> None:
    assert (
        len(list((finished / ".jobs").glob("collect-*"))) == 1
    )  # 12 episodes, 16 a shard
    stale = ("evaluate-0123.partial", "train-0123.partial")
    out, changed, again = _rerun_changed(
        finished, tmp_path, "heldout_episodes: 6", "heldout_episodes: 5", stale
    )
    assert again.returncode == 0, again.stderr[-2000:]
    # a finished stage drops its own killed tries (their inputs are not its inputs)
    assert [p.name for p in (out / ".jobs").glob("*.partial")] == [stale[1]]
    assert again.stderr.count("done, skipped") == NAMES.index("evaluate")
    assert json.loads((out / "evaluate" / "report.json").read_text())["tasks"] == 5
    process = subprocess.Popen(
        [sys.executable, "-m", "trace_pipeline", "run", str(changed), "--out", str(out),
         "--from", "collect"],
        cwd=ROOT, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stderr is not None
    lines = []
    for line in process.stderr:
        lines.append(line)
        if "analyze: running" in line:
            process.send_signal(signal.SIGKILL)
            break
    process.wait(timeout=60)
    # --from forgets the stage's finished jobs: the shards are played again
    assert not any("reusing the finished job" in line for line in lines), lines
    # and the stages it forgot stay forgotten after the kill: a plain rerun redoes them
    rerun = _trace("run", str(changed), "--out", str(out))
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert rerun.stderr.count("done, skipped") == 1  # collect, finished before the kill
    assert "reusing the finished job" not in rerun.stderr


def test_another_split_on_a_copy_of_a_run_replays_only_evaluate(
    finished: Path, tmp_path: Path
) -> None:
    """Only evaluate's inputs name the split: the test split is played on a copy of
    the dev run (docs/pipeline.md), here the other way round, every other stage
    skipped and the dev seeds played."""
    from trainer.settings import DEV_SEED_BASE

    out, _, again = _rerun_changed(
        finished, tmp_path, "route:\n", "protocol: {split: dev}\nroute:\n"
    )
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stderr.count("done, skipped") == NAMES.index("evaluate")
    report = json.loads((out / "evaluate" / "report.json").read_text())
    assert report["seeds"][0] == DEV_SEED_BASE and report["tasks"] == 6


def test_a_routing_change_replays_only_what_routing_decides(
    finished: Path, tmp_path: Path
) -> None:
    """Each configuration's episodes are jobs that do not depend on the router:
    changing the calibration reuses them and replays only re-routing (and any new
    top-p mix); the transcripts of every job are kept."""
    report = json.loads((finished / "evaluate" / "report.json").read_text())
    played = report["transcripts"]
    assert {"base", "re-routed on errors"} <= set(played)
    for key in played:  # every configuration's episodes kept, each task once
        episodes = evaluate.kept_episodes(finished, report, key)
        assert set(episodes) <= set(report["seeds"]), key
        assert all(e["messages"][0]["role"] == "system" for e in episodes.values())
    assert sorted(evaluate.kept_episodes(finished, report, "base")) == report["seeds"]
    _, _, again = _rerun_changed(
        finished, tmp_path, "calibration: batch", "calibration: none"
    )
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stderr.count("done, skipped") == NAMES.index("route")
    for key in ("base", "ties", "date_time_recovery", "permission_error_recovery"):
        for job in played[key]:
            assert f"reusing the finished job {job}" in again.stderr, key
    assert played["re-routed on errors"][0] not in again.stderr


def test_re_routing_can_start_from_the_base_model(
    finished: Path, tmp_path: Path
) -> None:
    """`route.reroute_from: base` holds the base model until a tool call is refused:
    every chain starts on base, the condition is named for it, and only re-routing
    (and the route stage it belongs to) is played again."""
    played = json.loads((finished / "evaluate" / "report.json").read_text())[
        "transcripts"
    ]
    out, _, again = _rerun_changed(
        finished,
        tmp_path,
        "calibration: batch",
        "calibration: batch\n  reroute_from: base",
    )
    assert again.returncode == 0, again.stderr[-2000:]
    report = json.loads((out / "evaluate" / "report.json").read_text())
    name = "base model, routed (argmax) on errors"
    assert name in report["success"] and report["rerouting"]["first"] == "base"
    assert all(row["reroutes"][0] == "base" for row in report["per_task"])
    assert f"| {name} |" in (out / "report" / "report.md").read_text()
    assert "from the base model" in (out / "report" / "report.md").read_text()
    assert f"reusing the finished job {played['base'][0]}" in again.stderr


def test_a_new_own_environment_count_plays_only_the_own_environment_job(
    finished: Path, tmp_path: Path
) -> None:
    """The adapters' keys leave out how many own-environment episodes judge them: a
    new count reuses every trained adapter and plays the own-env job again; 0
    plays none and reports no before and after."""
    out, _, again = _rerun_changed(
        finished, tmp_path, "own_env_episodes: 2", "own_env_episodes: 3"
    )
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stderr.count("train: reusing the finished job train-") == 2
    assert "own-env: reusing" not in again.stderr
    trained = json.loads((out / "train" / "manifest.json").read_text())["result"]
    for adapter in trained["adapters"].values():
        assert adapter["before"]["episodes"] == adapter["after"]["episodes"] == 3
    out, _, none = _rerun_changed(
        finished, tmp_path / "none", "own_env_episodes: 2", "own_env_episodes: 0"
    )
    assert none.returncode == 0, none.stderr[-2000:]
    assert "own environments" not in none.stderr
    trained = json.loads((out / "train" / "manifest.json").read_text())["result"]
    assert all(
        a["before"] is None and a["after"] is None for a in trained["adapters"].values()
    )


def test_a_retrain_replays_every_configuration_but_the_base_models(
    finished: Path, tmp_path: Path
) -> None:
    played = json.loads((finished / "evaluate" / "report.json").read_text())[
        "transcripts"
    ]
    _, _, again = _rerun_changed(finished, tmp_path, "cold_start: 2", "cold_start: 3")
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stderr.count("done, skipped") == NAMES.index("train")
    # each stage that runs again says why first
    assert (
        "train: running (changed since it ran: train.cold_start: 2 -> 3)"
        in again.stderr
    )
    assert "evaluate: running (changed since it ran: " in again.stderr
    assert f"reusing the finished job {played['base'][0]}" in again.stderr
    for key in ("ties", "date_time_recovery", "permission_error_recovery"):
        assert not any(job in again.stderr for job in played[key]), key


def test_a_grpo_setting_changed_on_dev_replays_grpo_from_the_kept_cold_starts(
    finished: Path, tmp_path: Path
) -> None:
    """Each adapter's cold start is a job keyed by the cold start's settings alone:
    more GRPO iterations retrain from the finished cold starts, never repeat them."""
    out, _, again = _rerun_changed(finished, tmp_path, "iterations: 1", "iterations: 2")
    assert again.returncode == 0, again.stderr[-2000:]
    assert "cold-start: running job" not in again.stderr
    assert again.stderr.count("2 GRPO iterations from the cold start of job") >= 2
    summaries = [
        json.loads(p.read_text()) for p in out.glob(".jobs/train-*/summary.json")
    ]
    assert sorted(s["iterations"] for s in summaries) == [1, 1, 2, 2]


def test_evaluate_keeps_each_condition_as_records_for_another_analysis(
    finished: Path, tmp_path: Path
) -> None:
    """Every condition's held-out episodes are trajectory records with their truth,
    so `factory analyze` can run on the agent after TRACE."""
    from factory.cli import main as factory

    report = json.loads((finished / "evaluate" / "report.json").read_text())
    files = report["trajectories"]
    assert set(files) == set(report["success"])
    for name, path in files.items():
        rows = [
            json.loads(line)
            for line in (finished / "evaluate" / path).read_text().splitlines()
        ]
        assert [r["metadata"]["seed"] for r in rows] == report["seeds"], name
        assert sum(r["success"] for r in rows) == report["success"][name]["successes"]
        assert all(r["expected_actions"] and r["tools"] for r in rows), name
    routed = finished / "evaluate" / files["routed: argmax"]
    truth = routed.with_name(routed.stem + ".truth.json")
    out = tmp_path / "second_round"
    command = [
        str(routed),
        "--target",
        "phone",
        "--out",
        str(out),
        "--truth",
        str(truth),
    ]
    assert factory(["analyze", *command, "--runs", "2", "--min-runs", "1"]) == 0
    assert (out / "report.md").is_file()
    # The run's report gives that command.
    assert (
        f"factory analyze {routed} --target phone"
        in (finished / "report" / "report.md").read_text()
    )


def test_the_second_round_experiment_analyses_before_and_after(
    finished: Path, tmp_path: Path
) -> None:
    script = ROOT / "experiments" / "phone_demonstration" / "second_round.py"
    out = tmp_path / "round2"
    command = [str(finished), str(out), "--runs", "2", "--min-runs", "1"]
    done = subprocess.run(
        [sys.executable, str(script), *command], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "base_model: " in done.stdout and "routed_argmax: " in done.stdout
    for name in ("base_model", "routed_argmax"):
        assert (out / name / "report.md").is_file()
        assert (out / "records" / f"{name}.truth.json").is_file()


def test_a_trajectories_target_is_analysed_and_never_played(
    finished: Path, tmp_path: Path
) -> None:
    from trace_pipeline.config import PipelineConfig
    from trace_pipeline.context import Context
    from trace_pipeline.errors import PipelineError
    from trace_pipeline.stages import analyze, collect
    from trace_pipeline.store import RunFolder

    runs = finished / "collect" / "trajectories.jsonl"
    config = PipelineConfig.model_validate(
        {"model": "tiny", "target": {"kind": "trajectories", "trajectories": str(runs)},
         "analyze": {"runs": 2, "min_runs": 1}}
    )  # fmt: skip
    context = Context(config, RunFolder(tmp_path), TINY)
    (tmp_path / "collect").mkdir()
    summary = collect.run(context, tmp_path / "collect")
    assert summary["episodes"] == 12 and summary["lost"] == 0
    assert summary["success"]["all"]["n"] == 12
    assert not (tmp_path / "collect" / "truth.json").exists()
    imported = (tmp_path / "collect" / "trajectories.jsonl").read_text().splitlines()
    assert [json.loads(r)["messages"] for r in imported] == [
        json.loads(r)["messages"] for r in runs.read_text().splitlines()
    ]
    context.folder.manifest = lambda name: None  # type: ignore[method-assign]
    context.folder.stage = lambda name: tmp_path / name  # type: ignore[method-assign]
    (tmp_path / "analyze").mkdir()
    assert "retained" in analyze.run(context, tmp_path / "analyze")
    (tmp_path / "evaluate").mkdir()
    result = evaluate.run(context, tmp_path / "evaluate")
    assert result["success"] == {} and "nothing was evaluated" in result["note"]
    with pytest.raises(PipelineError, match="no environment to play"):
        context.target()
    for bad, message in (
        (tmp_path / "missing.jsonl", "does not exist"),
        (tmp_path / "evaluate" / "report.json", "tau2|record|JSONL|jsonl"),
    ):
        config.target.trajectories = str(bad)
        with pytest.raises(PipelineError, match=message):
            collect.run(context, tmp_path / "collect")
    with pytest.raises(
        Exception, match="trajectories exactly when kind is trajectories"
    ):
        PipelineConfig.model_validate(
            {"model": "tiny", "target": {"kind": "trajectories"}}
        )


@pytest.mark.parametrize(
    "example",
    sorted((ROOT / "examples" / "pipelines").glob("*.yaml")),
    ids=lambda p: p.name,
)
def test_every_example_config_is_valid(example: Path) -> None:
    from trace_pipeline.config import load_config

    config = load_config(example)
    assert config.target.analysis_episodes >= 4


def test_targets_lists_every_kind_and_knob(capsys) -> None:
    from trace_pipeline.targets.phone import KNOBS

    assert main(["targets"]) == 0
    shown = capsys.readouterr().out
    assert all(kind in shown for kind in ("phone", "gym", "tau2", "trajectories"))
    assert all(f"  {knob.name} " in shown for knob in KNOBS)


def test_settings_lists_every_key_the_example_configs_give(capsys) -> None:
    import yaml

    def keys(value: object, prefix: str = "") -> set[str]:
        if isinstance(value, dict) and prefix not in (
            "target.difficulty.",
            "target.settings.",
        ):
            return set().union(*(keys(v, f"{prefix}{k}.") for k, v in value.items()))
        return {prefix.rstrip(".")}

    assert main(["settings"]) == 0
    listed = {line.split()[0] for line in capsys.readouterr().out.splitlines()}
    for example in (ROOT / "examples" / "pipelines").glob("*.yaml"):
        assert keys(yaml.safe_load(example.read_text())) <= listed, example.name
    assert {"route.calibration", "analyze.seed", "train.hint_share"} <= listed


def test_the_mixture_baseline_can_be_left_out(finished: Path, tmp_path: Path) -> None:
    from trace_pipeline.config import load_config
    from trace_pipeline.context import Context
    from trace_pipeline.stages import baselines
    from trace_pipeline.store import RunFolder

    config = load_config(TINY)
    config.baselines.mixture = False
    context = Context(config, RunFolder(finished), TINY)
    result = baselines.run(context, tmp_path)
    assert result == {
        "mixture": None,
        "why": "not trained (baselines.mixture: false)",
        "untargeted": {},
    }
    assert not any(tmp_path.iterdir())


def test_the_probe_and_the_text_router_are_fitted_on_the_same_examples(
    finished: Path, tmp_path: Path, own_packages: None
) -> None:
    """A random model solves no task, so the tiny run fits neither; with two of its
    analysis-split runs marked solved (base examples), route fits both."""
    from trace_pipeline.config import load_config
    from trace_pipeline.context import Context
    from trace_pipeline.stages import route
    from trace_pipeline.store import RunFolder

    run = tmp_path / "run"
    shutil.copytree(finished, run, symlinks=True)
    collected = run / "collect" / "trajectories.jsonl"
    rows = [json.loads(line) for line in collected.read_text().splitlines()]
    for row in rows[:2]:
        row["success"] = True
    collected.write_text("".join(json.dumps(row) + "\n" for row in rows))
    context = Context(load_config(TINY), RunFolder(run), TINY)
    folder = tmp_path / "adapters"
    shutil.copytree(run / "route" / "adapters", folder)
    fitted = route._fit_routers(context, folder)
    assert fitted["probe"]["examples"] == fitted["text"]["examples"]
    assert fitted["text"]["examples"]["base"] == 2
    router = route.load_router(context, folder).router
    assert router.modes() == ["argmax", "top-p", "probe", "text"]
    opening = route.opening(rows[0]["messages"])
    assert set(router.routes(router.scorer.score(opening), opening)) == set(
        router.modes()
    )


def test_an_untargeted_control_is_trained_with_a_targeted_budget_and_played(
    finished: Path, tmp_path: Path, own_packages: None
) -> None:
    """baselines.untargeted: an archetype of the target's kit the analysis did not
    retain is built and trained as the train stage trains one, and so is
    (baselines.solved_tasks) the target's own tasks the base agent solved; evaluate
    plays both beside the adapters (never routed to), and each adapter's cold start
    alone."""
    from factory.runtime.policies import run_episode
    from trace_pipeline.config import load_config
    from trace_pipeline.context import Context
    from trace_pipeline.stages import baselines
    from trace_pipeline.store import RunFolder
    from trace_pipeline.targets import phone

    run = tmp_path / "run"
    shutil.copytree(finished, run, symlinks=True)
    config = load_config(TINY)
    config.baselines.untargeted = ["tool_calling_precision"]
    config.baselines.solved_tasks = True
    context = Context(config, RunFolder(run), TINY)
    # the tiny model solved nothing: one analysis task solved, as the gold policy
    records = run / "collect" / "trajectories.jsonl"
    rows = [json.loads(line) for line in records.read_text().splitlines()]
    seed = rows[0]["metadata"]["seed"]
    # the phone target's own env, whose episodes `trace run`'s are
    own = gymnasium.make(phone.ENV_ID, difficulty=config.target.difficulty).unwrapped
    rows[0] |= {
        "success": True,
        "messages": run_episode(own, "gold", seed).info["messages"],
    }
    records.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "baselines"
    result = baselines.untargeted(context, out)
    trained = result["tool_calling_precision"]
    assert trained["iterations"] == config.train.iterations
    assert result["solved_target_tasks"]["iterations"] == config.train.iterations
    adapter = out / "untargeted" / "tool_calling_precision"
    trace = json.loads((adapter / "trace.json").read_text())
    assert trace["capability"] == "tool_calling_precision"
    assert (adapter / "sft_only" / "adapter_model.safetensors").is_file()
    # the same package again: its job is the finished one, not trained twice
    assert "reusing the finished job" in _said(baselines.untargeted, context, tmp_path)
    shutil.copytree(out / "untargeted", run / "baselines" / "untargeted")
    bank, _, _, played = evaluate.routed_model(context)
    assert played["untargeted: tool_calling_precision"] in bank.baselines
    assert played["untargeted: solved_target_tasks"] in bank.baselines
    assert "tool_calling_precision" not in bank.capabilities.names
    assert {"SFT only: date_time_recovery", "multi-capability SFT only"} <= set(played)


def _said(work, context, tmp_path: Path) -> str:
    """What `work(context, a new folder)` said."""
    said: list[str] = []
    context.say = said.append
    work(context, tmp_path / "again")
    return "\n".join(said)


def test_a_capability_is_either_included_or_an_untargeted_control() -> None:
    from pydantic import ValidationError

    from trace_pipeline.config import load_config

    data = load_config(TINY).model_dump()
    data["baselines"]["untargeted"] = ["date_time_recovery"]
    with pytest.raises(ValidationError, match="either trained as a capability"):
        type(load_config(TINY)).model_validate(data)


def test_llamacpp_plays_collect_and_evaluate_with_the_adapters(
    finished: Path, tmp_path: Path, own_packages: None
) -> None:
    """`backend: llamacpp`: the tiny model's GGUF file plays collect, the
    own-environment checks and every condition of evaluate (re-routing, which only
    transformers plays, left out), each adapter converted to a GGUF LoRA and applied
    at its weight (a mix: each at its share; the TIES merge saved first), in 3
    sequences (`generation_batch_size`); `train.backend: llamacpp`: it samples
    GRPO's rollouts too."""
    pytest.importorskip("llama_cpp")
    from trace_pipeline.config import load_config
    from trace_pipeline.context import Context
    from trace_pipeline.store import RunFolder

    out = tmp_path / "run"
    done = _trace("run", str(TINY), "--out", str(out), "--set", "backend=llamacpp",
                  "--set", "train.backend=llamacpp", "--set", "route.reroute_from=none",
                  "--set", "generation_batch_size=3",
                  "--set", "target.shard_episodes=4")  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    # 6 held-out tasks in jobs of at most 4: every configuration played everywhere,
    # the TIES merge among them, in two jobs of one process
    assert "evaluate: running job" in done.stderr
    trained = [
        json.loads(path.read_text())["training"]["config"]["backend"]
        for path in (out / "route" / "adapters").glob("*/trace.json")
    ]
    assert trained and set(trained) == {"llamacpp"}
    assert "on their own environments (llamacpp)" in done.stderr
    collected = json.loads((out / "collect" / "manifest.json").read_text())
    assert collected["result"]["backend"] == "llamacpp"
    report = json.loads((out / "evaluate" / "report.json").read_text())
    # every condition through llama.cpp, re-routing (transformers) not played
    assert report["backend"] == {"every condition": "llamacpp"}
    assert "rerouting" not in report and "(the last re-routing)" not in done.stderr
    assert {"base model", "TIES merge", "prompted base", "routed: top-p"} <= set(
        report["success"]
    )

    class Recorder:
        applied: list = []

        def use_adapters(self, adapters) -> None:
            self.applied.append([(path.suffix, scale) for path, scale in adapters])

    config = load_config(TINY)
    config.backend, config.generation_batch_size = "llamacpp", 3
    context = Context(config, RunFolder(out), TINY)
    assert context.llama()[0].sequences == 3
    evaluate.routed_model(context)
    recorder = Recorder()
    mix = {"date_time_recovery": 0.25, "permission_error_recovery": 0.75}
    for weights in ({}, mix, {"ties": 1.0}):
        evaluate.use_loras(context, recorder, tmp_path / "job", weights)
    assert (tmp_path / "job" / "ties").is_dir()  # the merge the bank built, saved
    # the job's folder moves away when it finishes: the next job saves its own
    (tmp_path / "job").rename(tmp_path / "finished-job")
    evaluate.use_loras(context, recorder, tmp_path / "next-job", {"ties": 1.0})
    assert recorder.applied == [
        [],
        [(".gguf", 0.25), (".gguf", 0.75)],
        [(".gguf", 1.0)],
        [(".gguf", 1.0)],
    ]
    assert (tmp_path / "next-job" / "ties").is_dir()


@given(
    sizes=st.lists(st.integers(1, 45), min_size=1, max_size=12),
    size=st.integers(1, 20),
)
def test_evaluate_cuts_its_plays_in_jobs_of_at_most_a_shard(
    sizes: list[int], size: int
) -> None:
    """Every job holds at most `size` episodes; each configuration's seeds come back
    whole and in order, in as few pieces as fit, whose sizes differ by one at most."""
    plays, first = [], 0
    for i, n in enumerate(sizes):
        plays.append(
            {"key": f"c{i}", "weights": {}, "seeds": list(range(first, first + n))}
        )
        first += n
    jobs = evaluate.shards(plays, size)
    assert all(0 < sum(len(p["seeds"]) for p in job) <= size for job in jobs)
    for play in plays:
        pieces = [p["seeds"] for job in jobs for p in job if p["key"] == play["key"]]
        assert [s for piece in pieces for s in piece] == play["seeds"]
        assert len(pieces) == -(-len(play["seeds"]) // size)
        assert max(map(len, pieces)) - min(map(len, pieces)) <= 1


def test_evaluate_packs_small_configurations_and_splits_large_ones_evenly() -> None:
    """40 tasks of an adapter in 16-episode jobs are 13 + 13 + 14 (three full-ish
    batches, not 16 + 16 + 8); 20 one-task top-p mixes share two jobs."""
    adapter = {"key": "a", "weights": {"a": 1.0}, "seeds": list(range(40))}
    mixes = [{"key": f"m{i}", "weights": {}, "seeds": [i]} for i in range(20)]
    jobs = evaluate.shards([adapter], 16)
    assert [[len(p["seeds"]) for p in job] for job in jobs] == [[13], [13], [14]]
    assert [len(job) for job in evaluate.shards(mixes, 16)] == [16, 4]
    assert evaluate.shards([], 16) == [] and evaluate.pieces([], 16) == []


def test_pre_registered_comparisons_are_their_own_holm_family(
    finished: Path, tmp_path: Path
) -> None:
    """`protocol.primary` names comparisons chosen on dev: a name the run has not is
    refused before an episode is played, naming the ones it has; the right names
    are Holm-adjusted apart from the rest, in report.json and report.md."""
    chosen = "single: date_time_recovery vs SFT only: date_time_recovery"
    wrong = 'protocol:\n  best_single: date_time_recovery\n  primary: ["a vs b"]\n'
    folder, _, refused = _rerun_changed(
        finished, tmp_path / "wrong", "task_tokens: 128\n", f"task_tokens: 128\n{wrong}"
    )
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert "protocol.primary: no paired test is named 'a vs b'" in refused.stderr
    assert chosen in refused.stderr and "running job" not in refused.stderr
    assert "Traceback" not in refused.stderr
    # refused before the test split was played: no play of it recorded
    plays = json.loads((folder / "protocol.json").read_text())["plays"]
    assert plays == json.loads((finished / "protocol.json").read_text())["plays"]
    right = wrong.replace("a vs b", chosen)
    out, _, again = _rerun_changed(
        finished, tmp_path / "right", "task_tokens: 128\n", f"task_tokens: 128\n{right}"
    )
    assert again.returncode == 0, again.stderr[-2000:]
    paired = json.loads((out / "evaluate" / "report.json").read_text())["paired"]
    assert paired[chosen]["family"] == "primary"
    assert paired[chosen]["p_holm"] == paired[chosen]["p_value"]  # a family of one
    assert {r["family"] for n, r in paired.items() if n != chosen} == {"secondary"}
    assert f"| {chosen} |" in (out / "report" / "report.md").read_text()
    no_best = right.replace("  best_single: date_time_recovery\n", "")
    _, _, unchosen = _rerun_changed(
        finished,
        tmp_path / "no_best",
        "task_tokens: 128\n",
        f"task_tokens: 128\n{no_best}",
    )
    assert unchosen.returncode == 2 and "needs protocol.best_single" in unchosen.stderr


def test_a_stage_that_runs_again_names_what_changed() -> None:
    """Nested settings are named by their dotted key, an earlier stage's new output
    by its name, at most four then a count; nothing when the manifest recorded no
    inputs to compare (one written by hand, or by an older version)."""
    from trace_pipeline.run import changed_inputs

    before = {
        "config": {"model": "/work/m.gguf", "rollout": {"max_turns": 8, "top": 1}},
        "upstream": {"collect": "aa"},
        "version": "0.2.0",
    }
    now = {
        "config": {"model": "m.gguf", "rollout": {"max_turns": 9, "top": 1}},
        "upstream": {"collect": "bb"},
        "version": "0.2.0",
    }
    assert changed_inputs(before, now) == (
        "model: '/work/m.gguf' -> 'm.gguf'; rollout.max_turns: 8 -> 9; collect's output"
    )
    assert changed_inputs(before, before) == ""
    newer = {**before, "config": {**before["config"], "protocol.primary": None}}
    assert changed_inputs(before, newer) == "protocol.primary: (not recorded) -> None"
    assert changed_inputs(None, now) == changed_inputs({"config": 3}, now) == ""
    many = {**now, "config": {f"k{i}": i for i in range(7)}}
    assert changed_inputs(before, many).endswith("; and 7 more")  # 7 + 3 gone + 1
    long = {**now, "config": {"model": "x" * 500 + "\n"}}
    assert len(changed_inputs(before, long)) < 200 and "\n" not in changed_inputs(
        before, long
    )

"""The target contract: a user's target (examples/targets/errands, and handover)
plays as an env, passes `trace check-target`, and each deliberately broken copy
fails the check that names its fault."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from tests.trace_pipeline.contract_play import as_action
from trace_pipeline.cli import main
from trace_pipeline.errors import PipelineError
from trace_pipeline.targets.contract import (
    DEV_SEED_BASE,
    ENV_ID,
    ContractEnv,
    TargetError,
    split_of,
)
from trainer.settings import EVAL_SEED_BASE

ROOT = Path(__file__).resolve().parents[2]
ERRANDS = ROOT / "examples" / "targets" / "errands" / "errands.py"
ENTRY = f"{ERRANDS}:make_target"
TINY_ERRANDS = ROOT / "examples" / "pipelines" / "errands_tiny.yaml"
EXAMPLES = [
    ENTRY,
    f"{ROOT / 'examples' / 'targets' / 'handover' / 'handover.py'}:make_target",
]


def _config(tmp_path: Path, entry: str, settings: str = "{}") -> Path:
    config = tmp_path / "target.yaml"
    config.write_text(
        f"model: tiny\ntarget: {{kind: python, entry: '{entry}', settings: {settings}}}\n"
    )
    return config


def test_seeds_name_a_split_and_an_index() -> None:
    assert split_of(3) == ("analysis", 3)
    assert split_of(DEV_SEED_BASE + 4) == ("dev", 4)
    assert split_of(EVAL_SEED_BASE + 5) == ("test", 5)


@pytest.mark.parametrize("entry", EXAMPLES)
def test_an_example_target_plays_as_an_env_and_its_expected_actions_win(
    entry: str,
) -> None:
    """Gold play through the env's own step(): the expected actions succeed, the
    same seed gives the same observation, nothing done fails, a bad action is an
    error message that changes nothing."""
    env = ContractEnv(entry)
    wins = 0
    for seed in (0, 1, EVAL_SEED_BASE + 2):
        first, info = env.reset(seed=seed)
        assert env.reset(seed=seed)[0] == first and info["split"] in (
            "analysis",
            "test",
        )
        assert {"task_id", "tools", "needs", "expected_actions"} <= set(info)
        before = json.dumps(env._state, sort_keys=True)
        observation, *_ = env.step('{"tool_calls": [{"function": {"name": "nope"}}]}')
        assert '"error": true' in observation
        assert json.dumps(env._state, sort_keys=True) == before
        done = False
        assert all("name" in a for a in info["expected_actions"])  # records' form
        for action in env.task_of(seed).expected_actions:  # what the agent says too
            _, reward, done, truncated, step = env.step(as_action(action))
        assert done and step["success"] and reward == 1.0
        wins += 1
        env.reset(seed=seed)
        _, reward, done, _, step = env.step("All done!")
        assert done and not step["success"] and reward == 0.0
    assert wins == 3


@pytest.mark.parametrize("entry", EXAMPLES)
def test_check_target_passes_an_example(entry: str, tmp_path: Path, capsys) -> None:
    assert main(["check-target", str(_config(tmp_path, entry)), "--tasks", "8"]) == 0
    assert "every check passed on 8 tasks" in capsys.readouterr().out


BROKEN = {
    # an expected action that does not do the errand
    "wrong_action": (
        "def task(split, index):\n"
        "    t = good.task(split, index)\n"
        "    actions = [dict(a, arguments={**a['arguments'], 'content': 'something else'})\n"
        "               if a.get('name') in ('send_message_with_phone_number', 'add_reminder')\n"
        "               else a for a in t.expected_actions]\n"
        "    return replace(t, expected_actions=tuple(actions))\n",
        "expected actions: they do not pass the target's check",
    ),
    # the instruction gives away what the agent must find out
    "leaking": (
        "def task(split, index):\n"
        "    t = good.task(split, index)\n"
        "    return replace(t, instruction=t.instruction + ' ' + ' '.join(t.hidden))\n",
        "no leak: the instruction gives away",
    ),
    # every split the same tasks
    "overlapping": (
        "def task(split, index):\n    return good.task('analysis', index)\n",
        "disjoint splits: the same task as analysis task 0",
    ),
    # a read-only tool that changes the state and then refuses
    "state_changing_refusal": (
        "def search(state, **arguments):\n"
        "    state['settings']['cellular'] = False\n"
        "    raise ToolError('ValueError: try again')\n"
        "functions = {**good.functions, 'search_contacts': search}\n"
        "task = good.task\n",
        "refusals change nothing: search_contacts({}) is declared read-only",
    ),
    # a task that is not the same twice
    "unseeded": (
        "import random\n"
        "def task(split, index):\n"
        "    t = good.task(split, index + random.randrange(1000))\n"
        "    return replace(t, task_id='x')\n",
        "same index, same task: two calls gave different tasks",
    ),
    # a check that passes whatever the agent does
    "lenient": (
        "def task(split, index):\n"
        "    return replace(good.task(split, index), check=lambda state, messages: True)\n",
        "doing nothing fails: the untouched task passes its own check",
    ),
    # a tool that arrives with a later user turn, called before it
    "early_call": (
        "def task(split, index):\n"
        "    return replace(good.task(split, index), user_turns=('Thanks.',),\n"
        "                   arriving={1: ('search_contacts',)})\n",
        "expected actions: refused: action 0 (search_contacts): Error: unknown tool",
    ),
    # a tool that arrives with a user turn the task does not have
    "no_such_turn": (
        "def task(split, index):\n"
        "    return replace(good.task(split, index), arriving={2: ('shift_timestamp',)})\n",
        "arriving is keyed by a later user turn, 1 to 0",
    ),
    # a schema that is no OpenAI function schema
    "bad_schema": (
        "tools = [*good.tools[:-1], {'type': 'function', 'function': {'name': 'shift timestamp'}}]\n"
        "task = good.task\n",
        "tools: schemas: tools[13].function.name",
    ),
}


@pytest.mark.parametrize("fault", sorted(BROKEN))
def test_a_broken_copy_fails_the_check_that_names_its_fault(
    tmp_path: Path, capsys, fault: str
) -> None:
    body, expected = BROKEN[fault]
    module = tmp_path / f"{fault}.py"
    module.write_text(
        "from dataclasses import replace\n"
        "from trace_pipeline.targets.contract import ToolError\n"
        f"from trace_pipeline.targets.contract import load_target\n"
        f"good = load_target({ENTRY!r})\n"
        "functions, tools = good.functions, good.tools\n"
        + body
        + "def make_target():\n"
        "    return replace(good, task=task, functions=functions, tools=tools)\n"
    )
    assert main(["check-target", str(_config(tmp_path, f"{module}:make_target"))]) == 2
    captured = capsys.readouterr()
    assert expected in captured.out, captured.out[-2000:]
    assert "failed check(s)" in captured.err and "Traceback" not in captured.err


@pytest.mark.parametrize(
    ("entry", "settings", "message"),
    [
        ("no_colon", "{}", "write it as 'module:function'"),
        ("no_such_module_xyz:make", "{}", "cannot import it (ModuleNotFoundError"),
        (f"{ERRANDS}:nothing_here", "{}", "cannot import it (AttributeError"),
        (ENTRY, "{share_blocked: 500}", "share_blocked must be a whole percent"),
        (ENTRY, "{colour: red}", "unexpected keyword argument 'colour'"),
        (f"{ERRANDS}:_world", "{}", "missing 2 required positional arguments"),
    ],
)
def test_a_target_that_cannot_be_made_is_refused_before_any_stage(
    tmp_path: Path, capsys, entry: str, settings: str, message: str
) -> None:
    config = _config(tmp_path, entry, settings)
    assert main(["check-target", str(config)]) == 2
    assert message in capsys.readouterr().out
    assert main(["run", str(config), "--out", str(tmp_path / "run")]) == 2
    error = capsys.readouterr().err
    assert message in error and "Traceback" not in error
    assert not (tmp_path / "run").exists()
    with pytest.raises(TargetError):
        ContractEnv(entry, yaml.safe_load(settings))


def test_editing_a_targets_file_changes_what_its_plays_are_keyed_on(
    tmp_path: Path,
) -> None:
    """A user's target is code they edit between runs: its file's sha256 is one of
    the settings that define the target's tasks, so collect and evaluate play again
    (and the frozen config's digest moves) after an edit, and not without one."""
    from trace_pipeline.config import check_config, read_config, tasks
    from trace_pipeline.protocol import frozen_digest

    copy = tmp_path / "my_target.py"
    copy.write_bytes(ERRANDS.read_bytes())
    config_file = _config(tmp_path, f"{copy}:make_target")

    def keys() -> tuple[dict, str]:
        config = check_config(read_config(config_file), config_file)
        return config.section(*tasks(config)), frozen_digest(config)

    before = keys()
    assert before[0]["target.source"] is not None and keys() == before
    copy.write_text(copy.read_text().replace('"Please",', '"Kindly",'))
    after = keys()
    assert after[0]["target.source"] != before[0]["target.source"]
    assert after[1] != before[1]


@pytest.mark.parametrize(
    "target",
    ["{difficulty: {blockers: 2, give_numbers: 1}}",
     f"{{kind: gym, env: {ROOT / 'generated_envs' / 'permission_error_recovery'}}}"],
)  # fmt: skip
def test_check_target_checks_the_phone_target_and_a_package_through_the_contract(
    tmp_path: Path, capsys, target: str
) -> None:
    """The built-in phone target and a generated package are task families, served
    through the contract (`from_family`): their gold turns pass their verifier
    (the phone's recovery paths include the call a setting refuses)."""
    config = tmp_path / "target.yaml"
    config.write_text(f"model: tiny\ntarget: {target}\n")
    assert main(["check-target", str(config), "--tasks", "6"]) == 0
    assert "every check passed on 6 tasks" in capsys.readouterr().out


@pytest.mark.parametrize(
    "package", sorted(p.name for p in (ROOT / "generated_envs").iterdir() if p.is_dir())
)
def test_a_gym_target_built_on_a_task_family_plays_through_the_contract(
    package: str,
) -> None:
    """`trace run` plays a generated package named by a gym target through the
    contract, as it plays the phone target and a user's: episode for episode what
    the package's own env plays (here under a graded reward), judged by success;
    an env not built on a task family plays as itself."""
    from tests.trace_pipeline.contract_play import assert_plays_alike
    from trace_pipeline.context import TargetHandle, gym_target
    from trainer.envs import resolve_env

    folder = str(ROOT / "generated_envs" / package)
    handle = gym_target(folder)
    assert isinstance(handle, TargetHandle) and handle.env_id == ENV_ID
    own = resolve_env(folder).make(reward_mode="partial")
    seeds = [
        0,
        1,
        2,
        DEV_SEED_BASE,
        DEV_SEED_BASE + 1,
        EVAL_SEED_BASE,
        EVAL_SEED_BASE + 1,
    ]
    assert_plays_alike(own, handle.make(), seeds)
    assert not isinstance(gym_target("CartPole-v1"), TargetHandle)


def _needs_an_argument(size: int) -> None:
    raise AssertionError("never made")


def test_a_gym_target_that_cannot_be_made_is_one_clear_error() -> None:
    import gymnasium

    from trace_pipeline.context import gym_target
    from trace_pipeline.errors import PipelineError

    if "TraceTest/NeedsSize-v0" not in gymnasium.registry:
        gymnasium.register(id="TraceTest/NeedsSize-v0", entry_point=_needs_an_argument)
    with pytest.raises(PipelineError, match="gymnasium cannot make it .TypeError"):
        gym_target("TraceTest/NeedsSize-v0")


@pytest.mark.parametrize(
    ("target", "message"),
    [("{kind: tau2}", "tau2-bench's tasks and its user model"),
     ("{kind: gym, env: CartPole-v1}", "is not built on a task family")],
)  # fmt: skip
def test_check_target_refuses_a_target_it_cannot_check(
    tmp_path: Path, capsys, target: str, message: str
) -> None:
    config = tmp_path / "target.yaml"
    config.write_text(f"model: tiny\ntarget: {target}\n")
    assert main(["check-target", str(config)]) == 2
    said = capsys.readouterr()
    assert message in said.out + said.err and "Traceback" not in said.err


def test_the_minimal_target_in_the_docs_passes_check_target(
    tmp_path: Path, capsys
) -> None:
    """docs/targets.md's own example, as written there, keeps the contract."""
    page = (ROOT / "docs" / "targets.md").read_text()
    code = page.split("```python\n", 1)[1].split("```", 1)[0]
    module = tmp_path / "shopping.py"
    module.write_text(code)
    config = _config(tmp_path, f"{module}:make_target")
    assert main(["check-target", str(config), "--tasks", "5"]) == 0, capsys.readouterr()


@pytest.fixture(scope="module")
def errands_run(tmp_path_factory) -> Path:
    """examples/pipelines/errands_tiny.yaml run end to end (the tiny model)."""
    import subprocess
    import sys

    out = tmp_path_factory.mktemp("errands") / "run"
    done = subprocess.run(
        [sys.executable, "-m", "trace_pipeline", "run",
         "examples/pipelines/errands_tiny.yaml", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=1500, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_the_errands_config_runs_the_whole_loop_on_a_python_target(
    errands_run: Path,
) -> None:
    """Collect, analysis scored against the target's own needs, the included
    packages trained, every condition evaluated on the target's test split, and
    the report, from a target written outside the project's packages."""
    out = errands_run
    records = [
        json.loads(line)
        for line in (out / "collect" / "trajectories.jsonl").read_text().splitlines()
    ]
    assert [r["task_id"] for r in records] == [
        f"errands-analysis-{i}" for i in range(8)
    ]
    assert all(r["expected_actions"] and "needs" in r["metadata"] for r in records)
    report = (out / "report" / "report.md").read_text()
    assert "Retained: nothing (no run succeeded" in report
    assert "Built besides them (generate.include): date_time_recovery, " in report
    assert "| oracle |" in report and "| single: permission_error_recovery |" in report
    episodes = json.loads((out / "evaluate" / "report.json").read_text())
    assert len(episodes["per_task"]) == 4
    # one family of paired tests, each with its Holm-adjusted p beside the raw one
    assert all(r["p_holm"] >= r["p_value"] for r in episodes["paired"].values())
    assert "| p | p (Holm) |" in report
    # what GRPO did, per adapter: its optimizer steps and the share of flat groups
    trained = json.loads((out / "train" / "manifest.json").read_text())["result"]
    for summary in trained["adapters"].values():
        assert summary["iterations"] == 1 and summary["optimizer_steps"] >= 0
        assert 0 <= summary["dropped_groups"] <= 1
    assert "| GRPO steps | dropped |" in report
    # generate.reward_mode: partial reached every package GRPO trained on
    for package in (out / "generate" / "envs").iterdir():
        spec = json.loads((package / "capability.json").read_text())
        assert spec["generation"]["reward_mode"] == "partial", package.name


def test_trace_eval_judges_a_finished_run_on_another_target(
    errands_run: Path, tmp_path: Path, capsys
) -> None:
    """The errands run's adapters on the built-in phone target's test split: every
    condition, the report with the oracle by the phone target's needs; the run
    itself untouched; a target with another interface, a folder that is no run, an
    --out that exists and a config without a target are refused naming why."""
    before = (errands_run / "evaluate" / "manifest.json").read_text()
    out = tmp_path / "on_phone"
    phone = ROOT / "examples" / "pipelines" / "phone_tiny.yaml"
    assert (
        main(["eval", str(errands_run), "--target", str(phone), "--out", str(out)]) == 0
    )
    report = json.loads((out / "evaluate" / "report.json").read_text())
    # the phone target plays through the contract, as the errands target does
    assert report["environments"] == ["trace/ContractTarget-v0"]
    assert report["tasks"] == 6
    assert {"oracle", "base model", "single: permission_error_recovery"} <= set(
        report["success"]
    )
    assert all("p_holm" in r for r in report["paired"].values())
    evaluated = json.loads((out / "evaluated.json").read_text())
    assert sorted(evaluated["adapters"]) == [
        "date_time_recovery",
        "permission_error_recovery",
    ]
    assert (errands_run / "evaluate" / "manifest.json").read_text() == before
    capsys.readouterr()
    # the same evaluation again: done; stopped (its report gone, its jobs kept): it
    # goes on from the jobs and plays nothing again
    assert (
        main(["eval", str(errands_run), "--target", str(phone), "--out", str(out)]) == 0
    )
    assert "evaluate: done, skipped" in capsys.readouterr().err
    shutil.rmtree(out / "evaluate")
    assert (
        main(["eval", str(errands_run), "--target", str(phone), "--out", str(out)]) == 0
    )
    err = capsys.readouterr().err
    assert "going on from the jobs kept" in err and "reusing the finished job" in err
    assert (
        json.loads((out / "evaluate" / "report.json").read_text())["per_task"]
        == report["per_task"]
    )
    from trace_pipeline.store import RunFolder

    again = ["eval", str(errands_run), "--target", str(phone), "--out", str(out)]
    with RunFolder(out).lock():  # another evaluation holds it
        assert main(again) == 2
    assert "is using" in capsys.readouterr().err
    manifest = out / "route" / "manifest.json"
    kept_manifest = manifest.read_text()
    manifest.write_text(kept_manifest.replace('"route"', '"edited"', 1))
    assert main(again) == 2
    assert "was changed since it was made" in capsys.readouterr().err
    manifest.write_text(kept_manifest)
    record = json.loads((out / "evaluated.json").read_text())
    record["adapters"]["date_time_recovery"] = "0" * 64  # as if the run retrained it
    (out / "evaluated.json").write_text(json.dumps(record))
    assert main(again) == 2
    assert "before the run's adapters changed" in capsys.readouterr().err
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    shopping = tmp_path / "shopping.py"
    page = (ROOT / "docs" / "targets.md").read_text()
    shopping.write_text(page.split("```python\n", 1)[1].split("```", 1)[0])
    other = _config(tmp_path, f"{shopping}:make_target")
    for argv, message in (
        ([str(errands_run), "--target", str(other)], "tool 'add_item' is not in the run's kit phone"),
        ([str(tmp_path), "--target", str(phone)], "is not a folder `trace run` made"),
        ([str(errands_run), "--target", str(TINY_ERRANDS), "--out", str(out)], "is not a stopped `trace eval`"),
        ([str(errands_run), "--target", str(phone), "--out", str(errands_run.parent)], "is not a stopped `trace eval`"),
        ([str(errands_run), "--target", str(phone), "--out", str(errands_run)], "holds a `trace run` folder"),
        ([str(errands_run), "--target", str(phone), "--out", str(loop / "x")], "cannot be resolved"),
        ([str(errands_run), "--target", str(phone), "--out", str(errands_run)], "holds a `trace run` folder"),
        ([str(errands_run), "--target", str(phone), "--out", str(errands_run / "x")], "is inside the run"),
        ([str(errands_run), "--target", str(ROOT / "examples" / "pipelines" / "missing.yaml")], "no such file"),
    ):  # fmt: skip
        assert main(["eval", *argv]) == 2, argv
        error = capsys.readouterr().err
        assert message in error and "Traceback" not in error, error


def test_the_handover_eval_config_shows_the_phone_kits_interface(
    errands_run: Path, tmp_path: Path
) -> None:
    """examples/pipelines/handover_eval.yaml is a target a phone-kit run's
    adapters can be judged on: its tools are the kit's, parameters and all."""
    from trace_pipeline.evaluate_on import interface_problems, merged_config

    handover = ROOT / "examples" / "pipelines" / "handover_eval.yaml"
    config, _, kit = merged_config(errands_run, handover)
    assert kit == "phone" and config.target.entry.endswith("handover.py:make_target")
    assert interface_problems(config, kit, tmp_path / "out") == []
    # `trace eval --set`: the evaluation's settings on this machine, checked as
    # `trace run --set` checks them
    changed, text, _ = merged_config(errands_run, handover, ["rollout.max_turns=3"])
    assert changed.rollout.max_turns == 3 and "max_turns: 3" in text
    with pytest.raises(PipelineError, match="--set rollout.max_turns=lots"):
        merged_config(errands_run, handover, ["rollout.max_turns=lots"])


def test_the_handover_date_check_reads_whole_dates() -> None:
    """A date text names the day, in any of its usual forms, and never a day that
    only contains it ("March 14" is not March 4)."""
    import datetime
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "handover", ROOT / "examples" / "targets" / "handover" / "handover.py"
    )
    assert spec is not None and spec.loader is not None
    handover = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(handover)
    fourth = datetime.datetime(2027, 3, 4, tzinfo=datetime.timezone.utc)
    for text in (
        "it is on March 4",
        "4 March",
        "the 4th of March",
        "March 04.",
        "2027-03-04",
    ):
        assert handover._says_date(text, fourth), text
    for text in (
        "March 14",
        "14 March",
        "march 24th",
        "March 40",
        "2027-03-14",
        "April 4",
    ):
        assert not handover._says_date(text, fourth), text

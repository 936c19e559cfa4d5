"""`trainer` given careless or hostile settings and files: exit 2 naming the problem, never a traceback."""

from __future__ import annotations

import json
import os
import shutil
import sys

import gymnasium
import pytest

from tests.conftest import ROOT
from trainer.cli import main

PACKAGE = str(ROOT / "generated_envs" / "date_time_recovery")
FAST = ["--iterations", "1", "--groups", "1", "--group-size", "2", "--max-new-tokens", "4",
        "--max-turns", "1", "--lora-rank", "4", "--max-total-tokens", "100000"]  # fmt: skip


def _train(model, out, *extra: str) -> list[str]:
    return [
        "train",
        "--env",
        PACKAGE,
        "--model",
        str(model),
        "--out",
        str(out),
        *FAST,
        *extra,
    ]


def _fails(capsys, argv: list[str], *needles: str) -> str:
    """Exit 2 and the needles in stderr: from the command, or from argparse, which
    refuses an option out of its range while parsing (with a usage line)."""
    try:
        code = main(argv)
    except SystemExit as exit:
        code = exit.code
    assert code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, err
    return err


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--learning-rate", "inf"], "--learning-rate: must be a finite number"),
        (["--learning-rate", "nan"], "--learning-rate"),
        (["--max-grad-norm", "nan"], "--max-grad-norm"),
        (["--kl-beta", "nan"], "--kl-beta"),
        (
            ["--lora-dropout", "-0.5"],
            "--lora-dropout: must be greater than or equal to 0",
        ),
        (["--lora-dropout", "5"], "--lora-dropout"),
        (["--cold-start-learning-rate", "inf"], "--cold-start-learning-rate"),
        (["--step-timeout", "0"], "--step-timeout"),
    ],
)
def test_bad_numbers_are_refused_before_any_model_loads(
    extra, needle, tmp_path, capsys
) -> None:
    _fails(capsys, _train("no/such-model", tmp_path / "out", *extra), needle)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--max-turns", "0"], "--max-turns"),
        (["--temperature", "-1"], "--temperature"),
        (["--max-new-tokens", "0"], "--max-new-tokens"),
        (["--episodes", "0"], "--episodes"),
        (["--concurrent-episodes", "-1"], "--concurrent-episodes"),
    ],
)
def test_eval_refuses_limits_that_cannot_run(extra, needle, capsys) -> None:
    _fails(
        capsys, ["eval", "--env", PACKAGE, "--model", "no/such-model", *extra], needle
    )


def test_an_out_that_is_a_file_or_not_writable_fails_up_front(
    tiny_model_dir, tmp_path, capsys
) -> None:
    afile = tmp_path / "afile"
    afile.write_text("mine")
    _fails(capsys, _train(tiny_model_dir, afile), "is a file")
    _fails(capsys, _train(tiny_model_dir, afile / "below"), "not writable")
    assert afile.read_text() == "mine"


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"--env": "no/such/env"}, "unknown environment"),
        ({"--model": "no/such-model"}, "--model"),
        ({"--lora-target-modules": "nothing_like_this"}, "--lora-target-modules"),
        ({"--chat-template": "no-such-template"}, "--chat-template"),
    ],
)
def test_a_refused_run_leaves_no_folder_and_no_marker(
    change, needle, tiny_model_dir, tmp_path, capsys
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    for out in (tmp_path / "new" / "out", empty):
        argv = _train(tiny_model_dir, out)
        for flag, value in change.items():
            if flag in argv:
                argv[argv.index(flag) + 1] = value
            else:
                argv += [flag, value]
        _fails(capsys, argv, needle)
    assert not (tmp_path / "new").exists()
    assert list(empty.iterdir()) == []  # no marker: --force will not take it as ours


def _broken_copy(tiny_model_dir, tmp_path, name, damage):
    folder = tmp_path / name
    shutil.copytree(tiny_model_dir, folder)
    damage(folder)
    return folder


MODEL_DAMAGE = {
    "config.json is not JSON": lambda f: (f / "config.json").write_text("{not json"),
    "config.json has no model_type": lambda f: (f / "config.json").write_text("{}"),
    "truncated safetensors": lambda f: (f / "model.safetensors").write_bytes(
        (f / "model.safetensors").read_bytes()[:1000]
    ),
    "garbage tokenizer": lambda f: (f / "tokenizer.json").write_text("[1, 2"),
}


@pytest.mark.parametrize("damage", MODEL_DAMAGE, ids=list(MODEL_DAMAGE))
def test_a_damaged_model_folder_is_named(
    damage, tiny_model_dir, tmp_path, capsys
) -> None:
    model = _broken_copy(tiny_model_dir, tmp_path, "model", MODEL_DAMAGE[damage])
    _fails(capsys, _train(model, tmp_path / "out"), "--model", "cannot load")


def test_a_garbage_gguf_is_named(tmp_path, capsys, monkeypatch) -> None:
    from trainer import models

    monkeypatch.setattr(models, "GGUF_CACHE", tmp_path / "cache")
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF" + b"\x00garbage" * 64)
    _fails(capsys, _train(gguf, tmp_path / "out"), "--model", "GGUF")
    assert not any((tmp_path / "cache").glob("*")), "nothing half-written is cached"


def test_a_model_path_that_is_a_file_is_named(tmp_path, capsys) -> None:
    weights = tmp_path / "weights.bin"
    weights.write_bytes(b"\x00" * 10)
    _fails(capsys, _train(weights, tmp_path / "out"), "is a file")


def test_a_chat_template_that_breaks_every_prompt_exits_2(
    tiny_model_dir, tmp_path, capsys
) -> None:
    template = tmp_path / "broken.jinja"
    template.write_text("{{ raise_exception('no tools here') }}")
    _fails(
        capsys,
        _train(tiny_model_dir, tmp_path / "out", "--chat-template", str(template)),
        "--chat-template",
    )


@pytest.fixture(scope="module")
def trained(tiny_model_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("trained") / "adapter"
    assert main(_train(tiny_model_dir, out)) == 0
    return out


CHECKPOINT_DAMAGE = {
    "state.json": lambda c: (c / "state.json").write_text('{"iteration": '),
    "optimizer.pt": lambda c: (c / "optimizer.pt").write_bytes(
        (c / "optimizer.pt").read_bytes()[:50]
    ),
    "rng.pt": lambda c: (c / "rng.pt").write_bytes(b"PK\x03\x04junk"),
    "adapter": lambda c: (c / "adapter" / "adapter_model.safetensors").write_bytes(
        b"\x08\x00\x00\x00\x00\x00\x00\x00{}"
    ),
}


@pytest.mark.parametrize("damage", CHECKPOINT_DAMAGE, ids=list(CHECKPOINT_DAMAGE))
def test_a_damaged_checkpoint_is_named_on_resume(
    damage, trained, tiny_model_dir, tmp_path, capsys
) -> None:
    out = tmp_path / "run"
    shutil.copytree(trained, out)
    CHECKPOINT_DAMAGE[damage](out / "checkpoint")
    argv = _train(tiny_model_dir, out, "--resume")
    argv[argv.index("--iterations") + 1] = "2"
    _fails(capsys, argv, "--resume", "checkpoint")


def test_a_broken_adapter_or_trace_json_is_named_by_eval(
    trained, tiny_model_dir, tmp_path, capsys
) -> None:
    evaluate = ["eval", "--env", PACKAGE, "--model", str(tiny_model_dir), "--episodes", "1",
                "--max-turns", "1", "--max-new-tokens", "2", "--max-total-tokens", "100000"]  # fmt: skip
    broken_trace = tmp_path / "trace"
    shutil.copytree(trained, broken_trace)
    (broken_trace / "trace.json").write_text('{"training": [')
    _fails(capsys, [*evaluate, "--adapter", str(broken_trace)], "trace.json")
    (broken_trace / "trace.json").write_text('{"training": "yes"}')
    _fails(capsys, [*evaluate, "--adapter", str(broken_trace)], "trace.json")
    broken_weights = tmp_path / "weights"
    shutil.copytree(trained, broken_weights)
    (broken_weights / "adapter_model.safetensors").write_bytes(b"\x00" * 20)
    _fails(capsys, [*evaluate, "--adapter", str(broken_weights)], "--adapter", "broken")


def test_config_file_settings_apply_and_flags_override_them(
    tiny_model_dir, tmp_path, capsys
) -> None:
    config = tmp_path / "run.yaml"
    out = tmp_path / "out"
    config.write_text(
        f"env: {PACKAGE}\nmodel: {tiny_model_dir}\nout: {out}\n"
        "iterations: 3\ngroups: 1\ngroup-size: 2\nmax_new_tokens: 4\nmax_turns: 1\n"
        "lora_rank: 4\nmax_total_tokens: 100000\nlearning_rate: 1e-4\n"
        "lora_target_modules: [q_proj, v_proj]\ngradient_checkpointing: false\n"
    )
    assert main(["train", "--config", str(config), "--iterations", "1"]) == 0
    saved = json.loads((out / "trace.json").read_text())["training"]["config"]
    assert saved["iterations"] == 1 and saved["learning_rate"] == 1e-4
    assert saved["lora_target_modules"] == ["q_proj", "v_proj"]
    assert saved["gradient_checkpointing"] is False


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("iterations: [1, 2\n", "not valid YAML"),
        ("- a\n- b\n", "must be a mapping"),
        ("iteratoins: 3\n", "unknown setting 'iteratoins'"),
        ("iterations: many\n", "iterations: not an integer: 'many'"),
        ("precision: fp8\n", "precision must be one of"),
        ("learning_rate: {a: 1}\n", "learning_rate must be a number"),
    ],
)
def test_a_bad_config_file_is_named(text, needle, tmp_path, capsys) -> None:
    config = tmp_path / "run.yaml"
    config.write_text(text)
    _fails(capsys, ["train", "--config", str(config)], "--config", needle)


def test_help_shows_every_option_with_its_default(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = capsys.readouterr().out
    assert "--report-to" in text and "(default: 40)" in text and "--config" in text


class _ResetFails(gymnasium.Env):
    """An environment whose reset always raises."""

    observation_space = gymnasium.spaces.Text(10)
    action_space = gymnasium.spaces.Text(10)

    def reset(self, *, seed=None, options=None):
        raise RuntimeError("database offline")


def test_an_environment_that_never_resets_costs_episodes_and_trace_json_is_still_written(
    tiny_model_dir, tmp_path, capsys
) -> None:
    gymnasium.register("trace-test/ResetFails-v0", entry_point=_ResetFails)
    out = tmp_path / "out"
    argv = _train(tiny_model_dir, out)
    argv[argv.index("--env") + 1] = "trace-test/ResetFails-v0"
    assert main(argv) == 0
    metrics = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
    assert metrics["env_errors"] == 2 and metrics["dropped_groups"] == 1.0
    trace = json.loads((out / "trace.json").read_text())
    assert trace["example_trajectory"] == []


def test_an_adapter_trained_with_new_template_tokens_holds_lora_tensors_only(
    tiny_model_dir, tmp_path, capsys
) -> None:
    from safetensors import safe_open

    from trainer.models import load_base
    from trainer.vllm_adapter import folder_problems

    out = tmp_path / "gemma"
    assert main(_train(tiny_model_dir, out, "--chat-template", "gemma")) == 0
    assert "--max-lora-rank 8" in capsys.readouterr().out
    with safe_open(str(out / "adapter_model.safetensors"), framework="pt") as tensors:
        names = list(tensors.keys())
    assert names and all(".lora_A." in n or ".lora_B." in n for n in names)
    assert folder_problems(out) == []
    from transformers import AutoTokenizer

    shipped = AutoTokenizer.from_pretrained(out)
    assert "<end_of_turn>" in shipped.get_added_vocab()
    assert (
        "<start_of_turn>"
        not in AutoTokenizer.from_pretrained(tiny_model_dir).get_added_vocab()
    )
    # The new tokens' rows are rebuilt identically on every load.
    first, _ = load_base(str(tiny_model_dir), chat_template="gemma")
    second, _ = load_base(str(tiny_model_dir), chat_template="gemma")
    assert first.get_input_embeddings().weight.equal(
        second.get_input_embeddings().weight
    )


def test_force_never_starts_over_in_a_folder_trainer_did_not_write_or_an_input(
    tiny_model_dir, tmp_path, capsys
) -> None:
    foreign = tmp_path / "docs"
    foreign.mkdir()
    (foreign / "tokenizer.json").write_text("mine")
    _fails(capsys, _train(tiny_model_dir, foreign, "--force"), "did not write")
    assert (foreign / "tokenizer.json").read_text() == "mine"
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    before = {p.name: p.read_bytes() for p in model.iterdir()}
    _fails(capsys, _train(model, model, "--force"), "overlaps the input")
    _fails(capsys, _train(model, model / "adapter"), "overlaps the input")
    _fails(capsys, _train(tiny_model_dir, f"{PACKAGE}/adapter"), "overlaps the input")
    assert {p.name: p.read_bytes() for p in model.iterdir()} == before


def test_report_to_tensorboard_writes_events_and_a_missing_library_is_named(
    tiny_model_dir, tmp_path, capsys, monkeypatch
) -> None:
    pytest.importorskip("tensorboard")
    out = tmp_path / "tb"
    assert main(_train(tiny_model_dir, out, "--report-to", "tensorboard")) == 0
    assert list((out / "runs").glob("events.out.tfevents.*"))
    monkeypatch.setitem(sys.modules, "wandb", None)  # as if not installed
    _fails(
        capsys,
        _train(tiny_model_dir, tmp_path / "wb", "--report-to", "wandb"),
        "--report-to wandb needs `pip install trace-factory[wandb]`",
    )


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("iterations: .inf\n", "iterations: not an integer: inf"),
        (f"seed: {'9' * 5000}\n", "not valid YAML"),
        ("env: 123\n", "env must be text"),
        ("chat_template: 7\n", "chat_template must be text"),
        ("lora_target_modules: 5\n", "lora_target_modules must be text"),
        ("lora_target_modules: [q_proj, [k_proj]]\n", "must be a list of names"),
        ("force: 'false'\n", "force must be true or false"),
        ("gradient_checkpointing: 1\n", "gradient_checkpointing must be true or false"),
        ("iterations: 1.7\n", "iterations: not an integer: 1.7"),
        (
            "iterations: [&a [x, x, x, x, x, x, x, x, x], [*a, *a, *a, *a, *a, *a, *a],"
            " [*a, *a, *a, *a, *a, *a, *a, *a]]\n",
            "iterations must be a number",
        ),
    ],
)
def test_config_values_of_the_wrong_kind_are_named(
    text, needle, tmp_path, capsys
) -> None:
    config = tmp_path / "run.yaml"
    config.write_text(text)
    err = _fails(capsys, ["train", "--config", str(config)], "--config", needle)
    assert len(err) < 2000


def test_hostile_out_folders_are_refused(tiny_model_dir, tmp_path, capsys) -> None:
    looks_ours = tmp_path / "user"
    (looks_ours / "checkpoint").mkdir(parents=True)
    (looks_ours / "checkpoint" / "weights.bin").write_text("mine")
    _fails(capsys, _train(tiny_model_dir, looks_ours, "--force"), "did not write")
    assert (looks_ours / "checkpoint" / "weights.bin").read_text() == "mine"
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / ".trace-trainer").write_text("")
    victim = tmp_path / "victim.txt"
    victim.write_text("mine")
    (linked / "metrics.jsonl").symlink_to(victim)
    _fails(capsys, _train(tiny_model_dir, linked, "--force"), "symbolic links")
    assert victim.read_text() == "mine"
    marked = (
        tmp_path / "marked"
    )  # a marker that is a link makes no folder the trainer's
    marked.mkdir()
    (marked / ".trace-trainer").symlink_to(victim)
    (marked / "notes.txt").write_text("mine")
    _fails(capsys, _train(tiny_model_dir, marked, "--force"), "symbolic links")
    (marked / "notes.txt").unlink()
    _fails(capsys, _train(tiny_model_dir, marked), "symbolic links")
    assert victim.read_text() == "mine"
    _fails(capsys, _train(tiny_model_dir, tmp_path / ("a" * 300)), "File name too long")
    _fails(
        capsys,
        _train(tiny_model_dir, os.fsdecode(bytes(tmp_path) + b"/o\xff")),
        "UTF-8",
    )


def test_chat_template_files_that_cannot_work_are_named(
    tiny_model_dir, tmp_path, capsys
) -> None:
    binary = tmp_path / "bin.jinja"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    empty = tmp_path / "empty.jinja"
    empty.write_text("")
    silent = tmp_path / "silent.jinja"
    silent.write_text("{% for m in messages %}{% endfor %}")
    for template, needle in (
        (binary, "UTF-8"),
        (empty, "is empty"),
        (silent, "as nothing"),
    ):
        out = tmp_path / f"out-{template.stem}"
        _fails(
            capsys,
            _train(tiny_model_dir, out, "--chat-template", str(template)),
            needle,
        )


def test_a_checkpoint_of_another_environment_or_a_negative_iteration_is_refused(
    trained, tiny_model_dir, tmp_path, capsys
) -> None:
    other = tmp_path / "other"
    shutil.copytree(trained, other)
    argv = _train(tiny_model_dir, other, "--resume")
    argv[argv.index("--env") + 1] = str(
        ROOT / "generated_envs" / "multi_step_task_completion"
    )
    _fails(capsys, argv, "trained trace/DateTimeRecovery-v0")
    negative = tmp_path / "negative"
    shutil.copytree(trained, negative)
    state = json.loads((negative / "checkpoint" / "state.json").read_text())
    state["iteration"] = -3
    (negative / "checkpoint" / "state.json").write_text(json.dumps(state))
    _fails(capsys, _train(tiny_model_dir, negative, "--resume"), "not a count")


def test_the_cli_starts_without_torch_so_ctrl_c_while_it_loads_is_handled() -> None:
    import subprocess

    code = (
        "import sys, trainer.cli\n"
        "assert 'torch' not in sys.modules, 'torch loads before main() can catch Ctrl-C'\n"
        "trainer.cli.build_parser().parse_args(['train', '--help'])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_a_mistyped_local_model_path_fails_at_once_naming_the_folder(
    tmp_path, monkeypatch
) -> None:
    """`models/tinyy` reads like a hub id, but `models/` is a folder here: no hub retries."""
    from trainer.errors import TrainerError
    from trainer.models import load_base

    monkeypatch.chdir(tmp_path)
    (tmp_path / "models").mkdir()
    with pytest.raises(TrainerError, match="no folder models/tinyy"):
        load_base("models/tinyy")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(TrainerError, match="HF_HUB_OFFLINE"):
        load_base("someorg/somemodel")


def test_the_tiny_model_command_parses_its_arguments_and_keeps_folders(
    tmp_path, capsys, monkeypatch
) -> None:
    from trainer.tiny import main as tiny

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exited:
        tiny(["--help"])
    assert exited.value.code == 0 and not (tmp_path / "--help").exists()
    (tmp_path / "notes.txt").write_text("mine")
    assert tiny([str(tmp_path / "notes.txt")]) == 2
    assert tiny([str(tmp_path)]) == 2  # not empty
    assert "give a new or empty folder" in capsys.readouterr().err
    assert (tmp_path / "notes.txt").read_text() == "mine"
    assert tiny([str(tmp_path / "model")]) == 0
    assert (tmp_path / "model" / "config.json").is_file()

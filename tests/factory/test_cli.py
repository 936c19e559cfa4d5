"""The `factory` command: bad input exits 2 with a clear message and writes nothing."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from factory.archetypes import supported_pairs
from factory.cli import main
from tests.conftest import ROOT


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"archetype": "mind_reading"}, "unknown archetype 'mind_reading'"),
        ({"target": "spaceship"}, "unknown kit 'spaceship'"),
        (
            {"archetype": "date_time_recovery", "target": "airline"},
            "not supported on kit 'airline'",
        ),
        ({"archetype": None}, "custom"),
        ({"name": "rm -rf"}, "snake_case"),
        ({"generation": {"difficulty": {"speed": 3}}}, "unknown knob"),
        ({"generation": {"difficulty": {"contacts": 99}}}, "out of range"),
        (
            {"generation": {"tools": ["teleport"]}},
            "generation.tools: kit 'phone' has no tool teleport",
        ),
        ({"generation": {"tools": []}}, "generation.tools"),
        ({"generation": {"policy": ""}}, "generation.policy"),
        ({"generation": {"policy": 7}}, "generation.policy"),
        (
            {"description": "x" * 1_100_000},
            "over the 1,000,000 a package reads; shorten 'description'",
        ),
        ({"generation": {"tools": ["search_contacts"]}}, "generation.tools lacks"),
    ],
)
def test_bad_specs_exit_2_and_write_nothing(
    capsys, tmp_path, example_spec, write_spec, change, message
):
    example_spec.update(change)
    output = tmp_path / "out"
    code, _, err = run(
        capsys, "generate", str(write_spec(example_spec)), "--out", str(output)
    )
    assert code == 2
    assert message in err
    assert not output.exists() or not any(output.iterdir())


def test_malformed_json_exits_2(capsys, tmp_path, write_spec):
    code, _, err = run(
        capsys, "generate", str(write_spec("{oops")), "--out", str(tmp_path / "o")
    )
    assert code == 2 and "not valid JSON" in err


def test_existing_package_is_kept_without_force(
    capsys, tmp_path, example_spec, write_spec
):
    existing = tmp_path / "out" / example_spec["name"]
    existing.mkdir(parents=True)
    (existing / "mine.txt").write_text("user data")
    code, _, err = run(
        capsys,
        "generate",
        str(write_spec(example_spec)),
        "--out",
        str(tmp_path / "out"),
    )
    assert code == 2 and "--force" in err
    assert (existing / "mine.txt").read_text() == "user data"


def test_force_replaces_only_after_validation(
    capsys, tmp_path, example_spec, write_spec
):
    output = tmp_path / "out"
    existing = output / example_spec["name"]
    existing.mkdir(parents=True)
    (existing / "old.txt").write_text("old")
    (existing / "capability.json").write_text("{}")  # a package factory wrote
    code, out, _ = run(
        capsys,
        "generate",
        str(write_spec(example_spec)),
        "--out",
        str(output),
        "--force",
        "--seeds",
        "5",
    )
    assert code == 0, out
    assert "result             PASS" in out
    assert not (existing / "old.txt").exists()
    assert (existing / "capability.json").is_file()
    assert [p.name for p in output.iterdir()] == [
        example_spec["name"]
    ]  # no staging left


def test_force_never_replaces_a_folder_factory_did_not_write(
    capsys, tmp_path, example_spec, write_spec
):
    existing = tmp_path / "out" / example_spec["name"]
    existing.mkdir(parents=True)
    (existing / "mine.txt").write_text("user data")
    arguments = [str(write_spec(example_spec)), "--out", str(tmp_path / "out")]
    code, _, err = run(capsys, "generate", *arguments, "--force")
    assert code == 2 and "not a generated package" in err
    assert (existing / "mine.txt").read_text() == "user data"


def test_kits_lists_every_supported_pair(capsys):
    code, out, _ = run(capsys, "kits")
    assert code == 0
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[3:9]}
    kits = out.splitlines()[2].split()[1:]
    listed = {
        (a, k)
        for a, marks in rows.items()
        for k, m in zip(kits, marks, strict=True)
        if m == "yes"
    }
    assert listed == set(supported_pairs())


def test_schema_prints_json_schema(capsys):
    code, out, _ = run(capsys, "schema")
    assert code == 0 and json.loads(out)["title"] == "CapabilitySpec"


def test_console_script_entry_point_runs():
    result = subprocess.run(
        [sys.executable, "-m", "factory", "kits"], capture_output=True, text=True
    )
    assert result.returncode == 0 and "structured_data_reasoning" in result.stdout


def test_a_tool_subset_and_a_policy_are_all_the_package_shows_and_its_gold_passes(
    capsys, tmp_path, example_spec, write_spec
):
    from trace_pipeline.targets.phone import FOCUSED

    policy = (
        "- Answer in one sentence.\n- Never call a tool twice with the same arguments."
    )
    example_spec["generation"] = {
        **example_spec.get("generation", {}),
        "tools": list(FOCUSED),
        "policy": policy,
    }
    output = tmp_path / "out"
    code, out, _ = run(
        capsys, "generate", str(write_spec(example_spec)), "--out", str(output),
        "--seeds", "5",
    )  # fmt: skip
    assert code == 0 and "result             PASS" in out, out
    package = output / example_spec["name"]
    # In a child process: resolving the run's copy after the installed package
    # must play the copy, and this test must not leave the copy loaded here.
    script = (
        "import json, sys\nfrom trainer.envs import resolve_env\n"
        "resolve_env(sys.argv[1]).make()\n"
        "env = resolve_env(sys.argv[2]).make()\n"
        "info = env.reset(seed=0)[1]\n"
        "print(json.dumps([[t['function']['name'] for t in info['tools']],"
        " env.unwrapped.system_prompt]))\n"
    )
    installed = str(ROOT / "generated_envs" / example_spec["name"])
    shown, prompt = json.loads(
        subprocess.run(
            [sys.executable, "-c", script, installed, str(package)],
            capture_output=True, text=True, check=True, cwd=ROOT,
        ).stdout
    )  # fmt: skip
    assert sorted(shown) == sorted(FOCUSED)
    assert prompt.endswith(f"# Policy\n\n{policy}"), prompt
    readme = (package / "README.md").read_text()
    assert (
        "- `send_message_with_phone_number(" in readme
        and "- `search_stock(" not in readme
    )


@pytest.mark.parametrize("module", ["factory", "trainer", "router", "trace_pipeline"])
def test_every_cli_tells_its_version(module: str, capsys) -> None:
    from importlib import import_module

    from factory.version import project_version

    with pytest.raises(SystemExit) as exited:
        import_module(f"{module}.cli").main(["--version"])
    assert exited.value.code == 0
    assert f"(trace-factory {project_version()})" in capsys.readouterr().out


def test_a_refused_generate_leaves_no_out_it_made(
    capsys, tmp_path, example_spec, write_spec
):
    """A build refused after --out was made (an unknown --target) removes the folders
    it made, and never one that was there before."""
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    spec = str(write_spec(example_spec))
    new = tmp_path / "new" / "deeper"
    code, _, err = run(
        capsys, "generate", spec, "--target", str(bad), "--out", str(new)
    )
    assert code == 2 and "unknown kit" in err
    assert not (tmp_path / "new").exists()
    there = tmp_path / "there"
    there.mkdir()
    code, _, _ = run(
        capsys, "generate", spec, "--target", str(bad), "--out", str(there)
    )
    assert code == 2 and there.is_dir()

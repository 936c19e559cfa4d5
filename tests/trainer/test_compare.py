"""`trainer compare`: two evaluation reports paired on their shared seeds."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import ROOT
from trainer.cli import main
from trainer.compare import Report, compare, read_report
from trainer.errors import TrainerError
from trainer.settings import EVAL_SEED_BASE

ENV = "trace/PermissionErrorRecovery-v0"


def _write(path, data) -> str:
    path.write_text(json.dumps(data))
    return str(path)


def _report(outcomes: list[bool], first: int = 0, env: str | None = ENV) -> dict:
    """The fields `trainer eval` prints that a comparison reads."""
    return {
        "env": env,
        "seeds": [first, first + len(outcomes) - 1],
        "outcomes": outcomes,
    }


def test_two_eval_reports_are_paired_on_the_seeds_they_share(tmp_path) -> None:
    # Seeds 0..5 and 2..7: seeds 2..5 are paired, the rest are left out.
    first = _write(tmp_path / "a.json", _report([True, True, True, False, True, False]))
    second = _write(
        tmp_path / "b.json", _report([False, True, False, True, False, False], 2)
    )
    result = compare(read_report(first), read_report(second))
    assert result["seeds"] == [2, 5] and result["episodes"] == 4
    # first on 2..5: T F T F; second on 2..5: F T F T
    assert result["first"]["successes"] == 2 and result["second"]["successes"] == 2
    assert result["mcnemar"]["only_first"] == 2
    assert result["mcnemar"]["only_second"] == 2
    assert result["first"]["success_ci95"][0] < 0.5 < result["first"]["success_ci95"][1]


def test_a_learning_curve_point_is_read_by_name(tmp_path) -> None:
    # Older learning curves' points carry no seeds: they start at the first evaluation seed.
    curve = {
        "env": ENV,
        "points": [
            {"point": "after cold start", "outcomes": [False, True, False]},
            {"point": "after GRPO", "outcomes": [True, True, False]},
        ],
    }
    path = _write(tmp_path / "learning_curve.json", curve)
    report = read_report(path, "after GRPO")
    assert report.seeds == (EVAL_SEED_BASE, EVAL_SEED_BASE + 2)
    assert report.env == ENV
    with pytest.raises(TrainerError, match="'after cold start', 'after GRPO'"):
        read_report(path)
    with pytest.raises(TrainerError, match="has no points"):
        read_report(_write(tmp_path / "r.json", _report([True])), "after GRPO")


def test_a_learning_curve_point_is_named_whole_once_and_keeps_the_file_env(
    tmp_path,
) -> None:
    point = {"point": "p", "outcomes": [True], "env": None, "partial": True}
    curve = {"env": "trace/Other-v0", "points": [point, {**point, "point": 5}]}
    path = _write(tmp_path / "curve.json", curve)
    report = read_report(path, "p")
    assert report.env == "trace/Other-v0" and report.partial
    with pytest.raises(TrainerError, match="different environments"):
        compare(report, Report.model_validate(_report([True], EVAL_SEED_BASE)))
    with pytest.raises(TrainerError, match="is a learning curve"):
        read_report(path, "5")  # only text names match
    doubled = _write(tmp_path / "doubled.json", {"points": [point, point]})
    with pytest.raises(TrainerError, match="names two points"):
        read_report(doubled, "p")


def test_a_long_list_of_bad_outcomes_gives_one_error(tmp_path) -> None:
    outcomes = ",".join(["0"] * 2_000_000)
    path = tmp_path / "zeros.json"
    path.write_text(f'{{"seeds": [0, 1999999], "outcomes": [{outcomes}]}}')
    with pytest.raises(
        TrainerError, match="outcomes.0: Input should be a valid boolean"
    ):
        read_report(str(path))


@pytest.mark.parametrize(
    ("content", "named"),
    [
        ("{not json", "cannot read it as a JSON report"),
        ("[" * 100_000, "cannot read it as a JSON report"),
        ("[true, false]", "must hold a JSON object"),
        ('{"seeds": [0, 1]}', "outcomes: Field required"),
        ('{"outcomes": [true, 1], "seeds": [0, 1]}', "outcomes.1: Input should be a valid boolean"),
        ('{"outcomes": [true], "seeds": [0, true]}', "seeds.1"),
        ('{"outcomes": [true, false], "seeds": [0, 5]}', "seeds 0..5 and 2 outcomes"),
        ('{"outcomes": [], "seeds": [0, -1]}', "one outcome per seed"),
    ],
)  # fmt: skip
def test_a_malformed_report_is_refused_naming_the_problem(
    tmp_path, content, named
) -> None:
    path = tmp_path / "report.json"
    path.write_text(content)
    with pytest.raises(TrainerError, match=named):
        read_report(str(path))


def test_unreadable_huge_or_unrelated_reports_are_refused(tmp_path) -> None:
    with pytest.raises(TrainerError, match="is not a file"):
        read_report(str(tmp_path))
    with pytest.raises(TrainerError, match="is not a file"):
        read_report("/dev/zero")  # endless: refused before any read
    with pytest.raises(TrainerError, match="No such file"):
        read_report(str(tmp_path / "missing.json"))
    huge = tmp_path / "huge.json"
    with huge.open("wb") as handle:
        handle.truncate(51 << 20)  # sparse: no 51 MB written
    with pytest.raises(TrainerError, match="larger than 50 MB"):
        read_report(str(huge))
    other = Report.model_validate(_report([True], env="trace/Other-v0"))
    with pytest.raises(TrainerError, match="different environments"):
        compare(Report.model_validate(_report([True])), other)
    with pytest.raises(TrainerError, match="share no seed"):
        compare(
            Report.model_validate(_report([True])),
            Report.model_validate(_report([True], 5)),
        )


@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=60))
def test_swapping_the_reports_swaps_the_discordant_counts(pairs) -> None:
    first = Report.model_validate(_report([a for a, _ in pairs]))
    second = Report.model_validate(_report([b for _, b in pairs]))
    forward, backward = compare(first, second), compare(second, first)
    assert forward["mcnemar"]["only_first"] == backward["mcnemar"]["only_second"]
    assert forward["mcnemar"]["p_value"] == pytest.approx(
        backward["mcnemar"]["p_value"]
    )
    same = compare(first, first)["mcnemar"]
    assert (same["only_first"], same["only_second"], same["p_value"]) == (0, 0, 1.0)


def test_the_command_prints_json_and_exits_2_on_a_bad_report(tmp_path, capsys) -> None:
    first = _write(tmp_path / "a.json", _report([True] * 10))
    second = _write(tmp_path / "b.json", _report([False] * 10))
    assert main(["compare", first, second]) == 0
    printed = capsys.readouterr()
    result = json.loads(printed.out)
    assert (result["mcnemar"]["only_first"], result["mcnemar"]["only_second"]) == (
        10,
        0,
    )
    assert "exact McNemar p = 0.00195" in printed.err
    assert main(["compare", first, str(tmp_path)]) == 2
    assert "trainer: error:" in capsys.readouterr().err


def test_what_trainer_eval_prints_is_a_report_compare_reads(
    tiny_model_dir, tmp_path, capsys
) -> None:
    evaluate = ["eval", "--env", str(ROOT / "generated_envs" / "date_time_recovery"),
                "--model", str(tiny_model_dir), "--chat-template", "chatml",
                "--episodes", "3", "--max-turns", "1", "--max-new-tokens", "2",
                "--max-total-tokens", "100000"]  # fmt: skip
    assert main(evaluate) == 0
    report = _write(tmp_path / "report.json", json.loads(capsys.readouterr().out))
    assert main(["compare", report, report]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["episodes"] == 3 and result["seeds"][0] == EVAL_SEED_BASE
    assert result["mcnemar"] == {"only_first": 0, "only_second": 0, "p_value": 1.0}


def test_control_characters_in_a_report_never_reach_the_terminal(
    tmp_path, capsys
) -> None:
    hostile = "trace/\x1b[2J\x1b]0;owned\x07Env\u202e-v0"
    first = _write(tmp_path / "a.json", _report([True] * 4, env=hostile))
    second = _write(tmp_path / "b.json", _report([True] * 4))
    assert main(["compare", first, second]) == 2
    error = capsys.readouterr().err
    assert (
        "different environments" in error and "\\x1b[2J" in error and "\\u202e" in error
    )
    assert not any(ch in error for ch in "\x1b\x07\u202e")

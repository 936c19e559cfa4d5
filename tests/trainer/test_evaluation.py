"""Evaluation seeds, waves, intervals, paired-test power and the evaluation plot."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import ROOT
from tests.trainer.test_rollout import ScriptedGenerator
from trainer.envs import resolve_env
from trainer.evaluation import (
    confidence_interval,
    evaluate,
    mcnemar,
    mcnemar_power,
    paired_power,
)
from trainer.settings import EVAL_SEED_BASE, RolloutLimits, TrainConfig


def test_evaluation_plays_its_seeds_in_waves_of_concurrent_episodes(
    tiny_tokenizer,
) -> None:
    """Each wave's episodes keep their caches; no more than `concurrent` are played at once."""
    handle = resolve_env(str(ROOT / "generated_envs" / "date_time_recovery"))
    replies = [
        '<tool_call>{"name": "get_current_timestamp", "arguments": {}}</tool_call>'
    ]
    limits = RolloutLimits(max_turns=2, max_total_tokens=100_000)
    batches = []

    class Counting(ScriptedGenerator):
        def generate(self, prompts, *args, **kwargs):
            batches.append(len(prompts))
            return super().generate(prompts, *args, **kwargs)

    partial = []
    report = evaluate(handle, Counting(tiny_tokenizer, replies), tiny_tokenizer, 5, limits, 7,
                      concurrent=2, on_wave=partial.append)  # fmt: skip
    # Waves of 2, 2 and 1 episodes, two turns each (the first of a wave opens it).
    assert batches == [2, 2, 2, 2, 1, 1]
    assert report["episodes"] == len(report["outcomes"]) == 5
    assert report["seeds"] == [7, 11]
    # The seeds played so far after each wave but the last, as a report of their own.
    assert [(p["episodes"], p["seeds"]) for p in partial] == [(2, [7, 8]), (4, [7, 10])]
    assert partial[-1]["outcomes"] == report["outcomes"][:4]
    everything = evaluate(
        handle, Counting(tiny_tokenizer, replies), tiny_tokenizer, 5, limits, 7
    )
    assert batches[6:] == [5, 5] and everything["outcomes"] == report["outcomes"]


def test_training_and_evaluation_seeds_never_overlap() -> None:
    config = TrainConfig(groups=7, seed=123)
    train = {config.train_seed(i, g) for i in range(500) for g in range(7)}
    assert max(train) < EVAL_SEED_BASE


def test_confidence_intervals() -> None:
    mean, low, high = confidence_interval([1.0] * 8 + [0.0] * 2)
    assert mean == 0.8 and 0.49 < low < 0.5 and 0.94 < high < 0.95  # Wilson 95%
    assert confidence_interval([0.5, 0.7, 0.9])[0] == pytest.approx(0.7)


def test_mcnemar_power_matches_simulated_paired_tests() -> None:
    rng = np.random.default_rng(0)
    seeds, before, after, trials = 24, 0.2, 0.6, 1500
    rejected = 0
    for _ in range(trials):
        first = (rng.random(seeds) < before).tolist()
        second = (rng.random(seeds) < after).tolist()
        rejected += mcnemar(first, second)["p_value"] <= 0.05
    assert mcnemar_power(seeds, before, after) == pytest.approx(
        rejected / trials, abs=0.04
    )
    assert mcnemar_power(60, 0.3, 0.3) <= 0.05  # no change: at most the test's level
    assert mcnemar_power(30, 0.17, 0.4) < mcnemar_power(100, 0.17, 0.4)


def test_paired_power_matches_simulated_correlated_pairs() -> None:
    """Policies that agree on most seeds (an adapter that only adds wins): the
    power from the measured discordance, which independence understates."""
    rng = np.random.default_rng(1)
    seeds, gain, loss, trials = 40, 0.15, 0.02, 1500
    rejected = 0
    for _ in range(trials):
        draw = rng.random(seeds)
        both = rng.random(seeds) < 0.2  # concordant seeds: both win or both lose
        first = np.where(draw < gain, False, np.where(draw < gain + loss, True, both))
        second = np.where(draw < gain, True, np.where(draw < gain + loss, False, both))
        rejected += mcnemar(first.tolist(), second.tolist())["p_value"] <= 0.05
    assert paired_power(seeds, gain, loss) == pytest.approx(rejected / trials, abs=0.04)
    before, after = 0.2 * (1 - gain - loss) + loss, 0.2 * (1 - gain - loss) + gain
    assert mcnemar_power(seeds, before, after) < paired_power(seeds, gain, loss)
    assert paired_power(seeds, 0.0, 0.0) == 0.0
    assert paired_power(seeds, 0.0, 0.3) == 0.0  # only losses: no power to see a gain
    with pytest.raises(ValueError, match="probabilities"):
        paired_power(seeds, 0.8, 0.4)


def test_the_evaluation_plot_draws_every_point_with_its_interval(
    tmp_path, monkeypatch
) -> None:
    """One marker and one error bar per evaluated point, at the measured rates."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    from trainer.plots import plot_evaluations

    points = [
        {"point": "after cold start", "episodes": 30, "success_rate": 0.4,
         "success_ci95": [0.25, 0.58]},
        {"point": "after GRPO", "episodes": 30, "success_rate": 0.6,
         "success_ci95": [0.42, 0.75]},
    ]  # fmt: skip
    metrics = [
        {"iteration": i, "success_rate": 0.5, "dropped_groups": 0.25} for i in (1, 2)
    ]
    drawn = []
    original = plt.Axes.errorbar

    def recording(self, x, y, *args, **kwargs):
        drawn.append((list(x), list(y), kwargs["yerr"]))
        return original(self, x, y, *args, **kwargs)

    monkeypatch.setattr(plt.Axes, "errorbar", recording)
    plot_evaluations(points, metrics, tmp_path / "evaluation.png")
    assert (tmp_path / "evaluation.png").stat().st_size > 1000
    ((x, y, (below, above)),) = drawn
    assert x == [0, 1] and y == [0.4, 0.6]
    assert below == pytest.approx([0.15, 0.18]) and above == pytest.approx([0.18, 0.15])


def test_holm_adjusts_a_family_of_p_values_in_their_order() -> None:
    """By hand: sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1, made monotone and
    capped at 1."""
    from trainer.evaluation import holm, with_holm

    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.9]) == [1.0, 1.0] and holm([]) == []
    paired = with_holm({"a vs b": {"p_value": 0.02}, "c vs d": {"p_value": 0.3}})
    assert paired["a vs b"]["p_holm"] == pytest.approx(0.04)
    assert paired["c vs d"] == {"p_value": 0.3, "p_holm": 0.3, "family": "all"}


def test_holm_adjusts_pre_registered_tests_apart_from_the_rest() -> None:
    """Primary tests are one family and the others another: 0.02 stays 0.02 alone
    in its family where it would be 0.06 among three; the secondary pair is
    adjusted over two. A primary name the report lacks is refused."""
    from trainer.evaluation import with_holm

    paired = {
        "a vs b": {"p_value": 0.01},
        "c vs d": {"p_value": 0.02},
        "e vs f": {"p_value": 0.04},
    }
    adjusted = with_holm(paired, ["c vs d"])
    assert list(adjusted) == ["a vs b", "c vs d", "e vs f"]
    assert adjusted["c vs d"] == {"p_value": 0.02, "p_holm": 0.02, "family": "primary"}
    assert adjusted["a vs b"]["p_holm"] == pytest.approx(0.02)
    assert adjusted["e vs f"]["p_holm"] == pytest.approx(0.04)
    assert {r["family"] for n, r in adjusted.items() if n != "c vs d"} == {"secondary"}
    assert with_holm(paired)["c vs d"]["p_holm"] == pytest.approx(0.04)
    with pytest.raises(ValueError, match="'x vs y'"):
        with_holm(paired, ["x vs y"])

"""Contrastive statistics against hand-computed values."""

from __future__ import annotations

import pytest

from factory.analyze.statistics import (
    bootstrap,
    contrast,
    majority,
    select,
    why_nothing,
)
from factory.trajectory.labels import Label

L, P, N = Label.LACKING, Label.PRESENT, Label.NA


def labelled(passed: list[Label], failed: list[Label]) -> list:
    return [({"c": x}, True) for x in passed] + [({"c": x}, False) for x in failed]


def test_rates_match_a_hand_computation() -> None:
    stats = contrast(labelled([L, P, N, P], [L, L, N, P, L]), "c")
    assert (stats.n_passed, stats.n_failed) == (4, 5)
    assert stats.er_pos == pytest.approx(1 / 3)  # 1 lacking of 3 applicable successes
    assert stats.er_neg == pytest.approx(3 / 4)  # 3 lacking of 4 applicable failures
    assert stats.gap == pytest.approx(3 / 4 - 1 / 3)
    assert stats.coverage == pytest.approx(3 / 5)  # 3 of all 5 failures
    assert stats.selected(rho=0.1, delta=0.2)
    assert not stats.selected(rho=0.1, delta=0.5)
    assert not stats.selected(rho=0.7, delta=0.2)


def test_no_applicable_trajectories_give_zero_rates() -> None:
    stats = contrast(labelled([N, N], [N]), "c")
    assert (stats.er_pos, stats.er_neg, stats.gap, stats.coverage) == (0, 0, 0, 0)
    assert contrast([], "c").coverage == 0


def test_retained_only_when_selected_in_enough_runs() -> None:
    good = labelled([P, P], [L, L])
    bad = labelled([L, L], [L, L])  # gap 0
    runs = [good] * 7 + [bad] * 3
    (selection,) = select(good, runs, ["c"], rho=0.1, delta=0.2, min_runs=8)
    assert selection.runs_selected == 7 and not selection.retained
    assert selection.gap_mean == pytest.approx(0.7)
    assert selection.gap_std == pytest.approx((0.21) ** 0.5)
    (selection,) = select(good, runs, ["c"], rho=0.1, delta=0.2, min_runs=7)
    assert selection.retained


def test_bootstrap_is_seeded_and_keeps_size() -> None:
    data = labelled([P, L, N], [L, P])
    assert bootstrap(data, 4, seed=1) == bootstrap(data, 4, seed=1)
    assert bootstrap(data, 4, seed=1) != bootstrap(data, 4, seed=2)
    assert all(len(run) == len(data) for run in bootstrap(data, 4, seed=1))


def test_majority_vote_breaks_ties_toward_present() -> None:
    runs = [[{"c": L}], [{"c": P}], [{"c": L}], [{"c": P}]]
    assert majority(runs) == [{"c": P}]
    assert majority([[{"c": L}], [{"c": L}], [{"c": N}]]) == [{"c": L}]


def test_without_a_success_or_a_lacking_failure_nothing_is_retained() -> None:
    """Thresholds that admit anything (rho 0, delta -1) still retain no capability that
    no failed run lacks, and nothing at all when no run succeeded; the reason says so."""
    loose = {"rho": 0.0, "delta": -1.0, "min_runs": 1}
    all_failed = labelled([], [L, L, P])
    (only,) = select(all_failed, [all_failed], ["c"], **loose)
    assert only.runs_selected == 1 and not only.retained
    assert "no run succeeded" in str(why_nothing([only]))
    never_lacking = labelled([P, L], [P, N, P])
    assert not contrast(never_lacking, "c").selected(rho=0.0, delta=-1.0)
    (unexplained,) = select(never_lacking, [never_lacking], ["c"], **loose)
    assert not unexplained.retained
    assert "nothing LACKING" in str(why_nothing([unexplained]))
    contrasted = labelled([P, P], [L, P])
    (kept,) = select(contrasted, [contrasted], ["c"], **loose)
    assert kept.retained and why_nothing([kept]) is None

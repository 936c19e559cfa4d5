"""Contrastive statistics of capability labels (paper section 3.3).

For a capability c over labelled trajectories:
  ER+(c) = share of successful trajectories lacking c, among those where c applies;
  ER-(c) = the same among failed trajectories;
  gap(c) = ER-(c) - ER+(c);
  coverage(c) = failed trajectories lacking c / all failed trajectories.
C* = {c : gap(c) >= delta and coverage(c) >= rho}, and c is retained when it is in
C* in at least K of N labelling runs (LLM: independent runs; offline: bootstrap
resamples of the trajectories).
"""

from __future__ import annotations

import math
import random
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from factory.trajectory.labels import Label

Z95 = 1.959964


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The 95% Wilson score interval of `successes` out of `n` ((0, 1) when n = 0)."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # At p = 0 or 1 the bound is exactly 0 or 1; rounding would leave it just inside.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


Labelled = Sequence[tuple[Mapping[str, Label], bool]]  # (labels by capability, success)


@dataclass(frozen=True)
class CapabilityStats:
    """Counts of one labelling run and the rates derived from them."""

    n_passed: int
    n_failed: int
    passed_applicable: int
    passed_lacking: int
    failed_applicable: int
    failed_lacking: int

    @property
    def er_pos(self) -> float:
        return (
            self.passed_lacking / self.passed_applicable
            if self.passed_applicable
            else 0.0
        )

    @property
    def er_neg(self) -> float:
        return (
            self.failed_lacking / self.failed_applicable
            if self.failed_applicable
            else 0.0
        )

    @property
    def gap(self) -> float:
        return self.er_neg - self.er_pos

    @property
    def coverage(self) -> float:
        return self.failed_lacking / self.n_failed if self.n_failed else 0.0

    def selected(self, rho: float, delta: float) -> bool:
        """In C*: lacking far more often in failures, and in a real share of them; and,
        whatever the thresholds, lacking in at least one failure (a capability no
        failed run lacks explains no failure)."""
        return self.failed_lacking > 0 and self.gap >= delta and self.coverage >= rho


def contrast(run: Labelled, capability: str) -> CapabilityStats:
    """The statistics of `capability` over one labelled set of trajectories."""
    counts: Counter[tuple[bool, Label]] = Counter(
        (success, labels.get(capability, Label.NA)) for labels, success in run
    )
    n_passed = sum(n for (success, _), n in counts.items() if success)
    n_failed = sum(n for (success, _), n in counts.items() if not success)
    return CapabilityStats(
        n_passed=n_passed,
        n_failed=n_failed,
        passed_applicable=n_passed - counts[(True, Label.NA)],
        passed_lacking=counts[(True, Label.LACKING)],
        failed_applicable=n_failed - counts[(False, Label.NA)],
        failed_lacking=counts[(False, Label.LACKING)],
    )


@dataclass(frozen=True)
class Selection:
    """A capability's statistics over all runs, and whether it is retained."""

    capability: str
    full: CapabilityStats
    runs_selected: int
    runs_total: int
    gap_mean: float
    gap_std: float
    coverage_mean: float
    coverage_std: float
    retained: bool


def select(
    full: Labelled,
    runs: Sequence[Labelled],
    capabilities: Sequence[str],
    rho: float,
    delta: float,
    min_runs: int,
) -> list[Selection]:
    """Statistics on the full set and per run; retained when selected in >= min_runs
    runs and some run succeeded: the gap contrasts failed runs with successful ones,
    so with none (ER+ counts nothing) no capability is retained (`why_nothing`)."""
    selections = []
    for capability in capabilities:
        per_run = [contrast(run, capability) for run in runs]
        gaps = [s.gap for s in per_run]
        coverages = [s.coverage for s in per_run]
        chosen = sum(s.selected(rho, delta) for s in per_run)
        full_stats = contrast(full, capability)
        selections.append(
            Selection(
                capability=capability,
                full=full_stats,
                runs_selected=chosen,
                runs_total=len(runs),
                gap_mean=statistics.fmean(gaps),
                gap_std=statistics.pstdev(gaps),
                coverage_mean=statistics.fmean(coverages),
                coverage_std=statistics.pstdev(coverages),
                retained=chosen >= min_runs and full_stats.n_passed > 0,
            )
        )
    return sorted(selections, key=lambda s: (not s.retained, -s.gap_mean))


def why_nothing(selections: Sequence[Selection]) -> str | None:
    """Why no capability was retained, with what to do (None when one was)."""
    if not selections or any(s.retained for s in selections):
        return None
    full = selections[0].full
    if full.n_passed == 0:
        return (
            "no run succeeded: a capability is retained for lacking far more often in "
            "failed runs than in successful ones, and there is no successful run to "
            "compare with; make the target easier (its knobs) or collect more episodes"
        )
    if full.n_failed == 0:
        return "no run failed: there is no failure to explain"
    if not any(s.full.failed_lacking for s in selections):
        return (
            "no failed run lacks a capability of the dictionary (the labeller found "
            "nothing LACKING); read a few failed runs, or label with an LLM"
        )
    return (
        "no capability reached the thresholds (gap >= delta and coverage >= rho in "
        "min_runs runs); see each one's figures"
    )


def bootstrap(labelled: Labelled, runs: int, seed: int) -> list[Labelled]:
    """`runs` resamples with replacement (the offline stand-in for repeated labelling)."""
    rng = random.Random(seed)
    size = len(labelled)
    return [[labelled[rng.randrange(size)] for _ in range(size)] for _ in range(runs)]


def majority(runs: Sequence[Sequence[Mapping[str, Label]]]) -> list[dict[str, Label]]:
    """Per trajectory and capability, the label most runs gave (ties: PRESENT, then NA)."""
    preference = {Label.PRESENT: 2, Label.NA: 1, Label.LACKING: 0}
    merged = []
    for labels in zip(*runs, strict=True):
        names = {name for run_labels in labels for name in run_labels}
        merged.append(
            {
                name: max(
                    Counter(
                        run_labels.get(name, Label.NA) for run_labels in labels
                    ).items(),
                    key=lambda item: (item[1], preference[item[0]]),
                )[0]
                for name in sorted(names)
            }
        )
    return merged

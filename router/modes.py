"""From label probabilities to a route: which adapters, with which weights.

argmax (the paper): the top label's adapter alone, none for the base label.
top-p (the authors' later code): the smallest set of labels, by decreasing
probability, whose probability reaches p; weights are the probabilities
renormalised over that set (to two decimals, so that near-equal mixes are one
configuration), and W' = W + sum_c alpha_c B_c A_c. The base
label in the set adds no delta but keeps its share, pulling the mix toward W.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from router.errors import RouterError
from router.prompt import BASE


@dataclass(frozen=True)
class Route:
    """The route taken for one task and held for its whole episode."""

    mode: str
    target: str  # the top choice: a capability name or BASE
    weights: dict[str, float] = field(
        default_factory=dict
    )  # adapter -> alpha; {} = base
    probabilities: dict[str, float] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """Names the model configuration this route runs (same key, same weights)."""
        if not self.weights:
            return BASE
        if len(self.weights) == 1 and abs(next(iter(self.weights.values())) - 1) < 1e-9:
            return next(iter(self.weights))
        return "+".join(
            f"{name}*{weight:.4f}" for name, weight in sorted(self.weights.items())
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "mode": self.mode,
            "target": self.target,
            "adapters": self.weights,
            "probabilities": self.probabilities,
        }


def argmax_route(
    probabilities: Sequence[float], targets: Sequence[str], mode: str = "argmax"
) -> Route:
    """The single most probable label."""
    best = max(range(len(targets)), key=lambda i: probabilities[i])
    target = targets[best]
    return Route(
        mode,
        target,
        {} if target == BASE else {target: 1.0},
        dict(zip(targets, map(float, probabilities), strict=True)),
    )


def top_p_route(
    probabilities: Sequence[float], targets: Sequence[str], p: float
) -> Route:
    """The smallest most-probable set reaching mass `p`, weights renormalised over it."""
    if not 0 < p <= 1:
        raise RouterError(f"--top-p must be in (0, 1], not {p}")
    order = sorted(range(len(targets)), key=lambda i: -probabilities[i])
    chosen, mass = [], 0.0
    for index in order:
        chosen.append(index)
        mass += probabilities[index]
        if mass >= p - 1e-12:
            break
    weights = {
        targets[i]: round(float(probabilities[i]) / mass, 2)
        for i in chosen
        if targets[i] != BASE
    }
    return Route(
        "top-p",
        targets[order[0]],
        weights,
        dict(zip(targets, map(float, probabilities), strict=True)),
    )


def uniform_merge(names: Sequence[str]) -> dict[str, float]:
    """The paper's consolidation baseline: every adapter at weight 1/n."""
    return {name: round(1 / len(names), 4) for name in names}

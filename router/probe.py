"""The probe mode: logistic regression on the frozen base model's hidden state of a task.

`router fit` draws routing examples from each adapter's environment on training
seeds (and base examples from the base environments), fits scikit-learn's
multinomial logistic regression on standardised features, and saves it as JSON
beside the adapters (`router_probe.json`; JSON, not pickle, so loading runs no code).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from factory.outputs import unwritable_as, write_text
from router.capabilities import read_json
from router.errors import RouterError

PROBE_FILE = "router_probe.json"


@dataclass
class Probe:
    """Standardise, then softmax(W x + b) over the targets it was fitted on."""

    targets: list[str]
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: np.ndarray
    fingerprint: str
    base_model: str
    train_accuracy: float

    def probabilities(self, features: np.ndarray) -> np.ndarray:
        """[N, targets] probabilities for [N, D] features."""
        logits = ((features - self.mean) / self.scale) @ self.coef.T + self.intercept
        logits -= logits.max(axis=1, keepdims=True)
        exp = np.exp(logits)
        return exp / exp.sum(axis=1, keepdims=True)

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": "trace-router-probe",
            "targets": self.targets,
            "mean": self.mean.tolist(),
            "scale": self.scale.tolist(),
            "coef": self.coef.tolist(),
            "intercept": self.intercept.tolist(),
            "fingerprint": self.fingerprint,
            "base_model": self.base_model,
            "train_accuracy": self.train_accuracy,
        }


def fit_probe(
    features: np.ndarray,
    labels: list[str],
    targets: list[str],
    fingerprint: str,
    base_model: str,
    regularisation: float = 1.0,
) -> Probe:
    """Fit on [N, D] features with one target name per row (every target needs examples)."""
    from sklearn.linear_model import LogisticRegression

    missing = [t for t in targets if t not in labels]
    if missing:
        raise RouterError(
            f"no routing examples for {missing}; give their environments (--env / --base-env)"
        )
    mean = features.mean(axis=0)
    scale = features.std(axis=0) + 1e-6
    index = {t: i for i, t in enumerate(targets)}
    y = np.array([index[label] for label in labels])
    model = LogisticRegression(C=regularisation, max_iter=2000)
    model.fit((features - mean) / scale, y)
    coef = np.zeros((len(targets), features.shape[1]))
    intercept = np.zeros(len(targets))
    if len(model.classes_) == 2 and len(targets) == 2:
        # Binary sklearn models hold one row: logit(class 1) - logit(class 0).
        coef[1], intercept[1] = model.coef_[0], model.intercept_[0]
    else:
        coef[model.classes_], intercept[model.classes_] = model.coef_, model.intercept_
    probe = Probe(targets, mean, scale, coef, intercept, fingerprint, base_model, 0.0)
    predicted = probe.probabilities(features).argmax(axis=1)
    probe.train_accuracy = float((predicted == y).mean())
    return probe


def save_fitted(path: Path, content: dict[str, Any], force: bool) -> Path:
    """Write a fitted router (probe, text) as JSON at `path` atomically; an existing
    one needs `force`, and a folder or link there is never replaced."""
    if path.exists() and not force:
        raise RouterError(f"{path} exists; pass --force to replace it")
    if path.is_dir() or path.is_symlink():
        raise RouterError(f"{path} is a folder or a link; move it away first")
    with unwritable_as(RouterError, str(path), "give a writable folder"):
        write_text(path, json.dumps(content))
    return path


def save_probe(probe: Probe, folder: Path, force: bool) -> Path:
    """Write `folder/router_probe.json` (see `save_fitted`)."""
    return save_fitted(folder / PROBE_FILE, probe.as_dict(), force)


def load_probe(folder: Path, fingerprint: str, targets: list[str]) -> Probe | None:
    """The probe saved beside the adapters, if any; one fitted for another set is refused."""
    path = folder / PROBE_FILE
    if not path.exists():
        return None
    probe = probe_from(read_json(path, "refit it with `router fit --force`"), path)
    if probe.fingerprint != fingerprint or probe.targets != targets:
        raise RouterError(
            f"{path} was fitted for another capability set or routing prompt; "
            "refit with `router fit --force`"
        )
    return probe


def probe_from(data: Any, path: Path) -> Probe:
    """The probe `Probe.as_dict` wrote (read from `path`), its shapes checked."""
    try:
        probe = Probe(
            targets=[str(t) for t in data["targets"]],
            mean=np.asarray(data["mean"], dtype=float),
            scale=np.asarray(data["scale"], dtype=float),
            coef=np.asarray(data["coef"], dtype=float),
            intercept=np.asarray(data["intercept"], dtype=float),
            fingerprint=str(data["fingerprint"]),
            base_model=str(data["base_model"]),
            train_accuracy=float(data["train_accuracy"]),
        )
        width = probe.mean.shape[0]
        consistent = (
            probe.mean.ndim == 1
            and probe.scale.shape == (width,)
            and probe.coef.shape == (len(probe.targets), width)
            and probe.intercept.shape == (len(probe.targets),)
            and all(math.isfinite(v) for v in probe.coef.ravel())
            and bool((probe.scale > 0).all())
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise RouterError(
            f"{path} is not a router probe ({exc!r}); refit with `router fit --force`"
        ) from None
    if not consistent:
        raise RouterError(
            f"{path} has inconsistent shapes or values; refit with `router fit --force`"
        )
    return probe

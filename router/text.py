"""The text mode: a bag-of-words classifier of the request, the router that reads no model.

A control for the routers that read the base model (label logits, probe): if
the request's words alone route as well, the model's reading adds nothing.
TF-IDF of the request's words and word pairs (scikit-learn's vectorizer), then
the probe's multinomial logistic regression (`router.probe.fit_probe`), fitted
on the same labelled examples as the probe. Saved as JSON beside the adapters
(`router_text.json`; JSON, not pickle, so loading runs no code).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from router.capabilities import read_json
from router.errors import RouterError
from router.probe import Probe, fit_probe, probe_from, save_fitted

TEXT_FILE = "router_text.json"
KIND = "trace-router-text"
# Words and word pairs, as scikit-learn's vectorizer reads them; saved with the
# vocabulary so a loaded router reads a request exactly as the fitted one did.
VECTORIZER = {"ngram_range": (1, 2), "sublinear_tf": True, "lowercase": True}
MAX_FEATURES = 20_000


def request_text(messages: list[dict[str, Any]]) -> str:
    """What the text router reads: the user messages of a task's opening (the policy
    and tools are the same on every task, so they tell nothing apart)."""
    return "\n".join(
        m["content"]
        for m in messages
        if m.get("role") == "user" and isinstance(m.get("content"), str)
    )


@dataclass
class TextRouter:
    """TF-IDF features of the request, then the probe's softmax over the targets."""

    vocabulary: dict[str, int]
    idf: np.ndarray
    linear: Probe

    @property
    def targets(self) -> list[str]:
        return self.linear.targets

    def _vectorizer(self) -> Any:
        from sklearn.feature_extraction.text import TfidfVectorizer

        vectorizer = TfidfVectorizer(vocabulary=self.vocabulary, **VECTORIZER)
        vectorizer.idf_ = self.idf
        return vectorizer

    def probabilities(self, messages: list[dict[str, Any]]) -> list[float]:
        """The targets' probabilities for one task's opening messages."""
        features = self._vectorizer().transform([request_text(messages)]).toarray()
        return self.linear.probabilities(features)[0].tolist()

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": KIND,
            "vocabulary": self.vocabulary,
            "idf": self.idf.tolist(),
            "linear": self.linear.as_dict(),
        }


def fit_text(
    examples: list[tuple[list[dict[str, Any]], str]],
    targets: list[str],
    regularisation: float = 1.0,
) -> TextRouter:
    """Fit on (opening messages, label) examples; every target needs one."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    texts = [request_text(messages) for messages, _ in examples]
    vectorizer = TfidfVectorizer(max_features=MAX_FEATURES, **VECTORIZER)
    try:
        features = vectorizer.fit_transform(texts).toarray()
    except ValueError as exc:  # no word in any request
        raise RouterError(f"the text router has nothing to read ({exc})") from None
    linear = fit_probe(
        features.astype(np.float64),
        [label for _, label in examples],
        targets,
        KIND,
        "",
        regularisation,
    )
    vocabulary = {str(word): int(i) for word, i in vectorizer.vocabulary_.items()}
    return TextRouter(vocabulary, np.asarray(vectorizer.idf_, dtype=float), linear)


def save_text(router: TextRouter, folder: Path, force: bool) -> Path:
    """Write `folder/router_text.json` (see `router.probe.save_fitted`)."""
    return save_fitted(folder / TEXT_FILE, router.as_dict(), force)


def load_text(folder: Path, targets: list[str]) -> TextRouter | None:
    """The text router saved beside the adapters, if any; one fitted for other
    targets, or whose parts do not fit together, is refused."""
    path = folder / TEXT_FILE
    if not path.exists():
        return None
    data = read_json(path, "refit it with `router fit --force`")
    try:
        if data["kind"] != KIND:
            raise ValueError(f"kind {data['kind']!r:.40} is not {KIND}")
        vocabulary = {str(w): int(i) for w, i in dict(data["vocabulary"]).items()}
        idf = np.asarray(data["idf"], dtype=float)
        width = len(vocabulary)
        if idf.shape != (width,) or sorted(vocabulary.values()) != list(range(width)):
            raise ValueError("the vocabulary and the idf weights do not fit together")
        linear = probe_from(data["linear"], path)
        if linear.mean.shape != (width,):
            raise ValueError("the classifier does not read the vocabulary's features")
    except (KeyError, TypeError, ValueError) as exc:
        raise RouterError(
            f"{path} is not a text router ({exc}); refit with `router fit --force`"
        ) from None
    if linear.targets != targets:
        raise RouterError(
            f"{path} was fitted for other targets ({', '.join(linear.targets)}); "
            "refit with `router fit --force`"
        )
    return TextRouter(vocabulary, idf, linear)

"""Label log-probs (and the probe's features) from one forward pass of the frozen base model.

The static prefix's KV cache is computed once per capability set, and each
task policy's on top of it once per policy; a route copies the policy's cache
and runs only the request's tokens. The features for the probe are the
last hidden layer averaged over the task's tokens (the prefix is the same for
every task, so it carries nothing that tells tasks apart), taken from the same pass.
"""

from __future__ import annotations

import contextlib
import copy
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from router.errors import RouterError
from router.prompt import RoutingPrompt
from router.settings import BATCH_NEEDS_REQUESTS
from trainer.models import cache_kwargs, returned_cache

# A content-free task for contextual calibration (Zhao et al., 2021).
CONTENT_FREE = [
    {"role": "system", "content": "N/A"},
    {"role": "user", "content": "N/A"},
]


def label_prior(
    logprobs: Callable[[list[dict[str, Any]]], torch.Tensor],
    calibration: str,
    observations: Sequence[list[dict[str, Any]]] = (),
) -> torch.Tensor | None:
    """What label routing subtracts from a task's label log-probs (`calibration`, see
    router.settings): the mean label log-probs of unlabelled first observations
    (batch, Zhou et al., 2024), of a content-free task (Zhao et al., 2021), or
    nothing. Both remove the prompt's prior for one label, which zero-shot label
    tokens carry."""
    if calibration == "none":
        return None
    if calibration == "batch" and not observations:
        raise RouterError(BATCH_NEEDS_REQUESTS)
    batch = observations if calibration == "batch" else [CONTENT_FREE]
    return torch.stack([logprobs(messages) for messages in batch]).mean(0)


class Calibrated:
    """A label scorer that subtracts `label_prior` from its log-probs once `calibrate`d.

    The transformers scorer, the offline vLLM scorer and a vLLM server's backend
    share it; each gives `logprobs(messages)`, the uncalibrated label log-probs.
    """

    prior: torch.Tensor | None = None

    def logprobs(self, messages: list[dict[str, Any]]) -> torch.Tensor:
        raise NotImplementedError

    def calibrate(
        self, calibration: str, observations: Sequence[list[dict[str, Any]]] = ()
    ) -> None:
        """Later scores subtract `label_prior(self.logprobs, calibration, observations)`."""
        self.prior = label_prior(self.logprobs, calibration, observations)

    def calibrated(self, logprobs: torch.Tensor) -> torch.Tensor:
        """`logprobs` less the prior (unchanged before `calibrate` or with "none")."""
        return logprobs if self.prior is None else logprobs - self.prior


@dataclass
class Scores:
    """Log-probs of the label tokens (in label order) and the probe's feature vector."""

    logprobs: torch.Tensor
    features: torch.Tensor


@contextlib.contextmanager
def frozen(model: Any) -> Iterator[Any]:
    """The base model with every adapter off, in eval mode, without gradients."""
    disable = getattr(model, "disable_adapter", None)
    with (
        torch.no_grad(),
        disable() if disable is not None else contextlib.nullcontext(),
    ):
        was_training = model.training
        model.eval()
        try:
            yield model
        finally:
            model.train(was_training)


class LabelScorer(Calibrated):
    """Scores tasks against one routing prompt; `cached=False` recomputes everything.

    Two KV caches: the static prefix's (once per capability set) and, on top of
    it, each task policy's (the system message, shared by every task of an
    environment; the last `POLICIES` are kept), so a warm route runs only the
    request's tokens.
    """

    POLICIES = 16

    def __init__(self, model: Any, prompt: RoutingPrompt, cached: bool = True) -> None:
        self.model = model
        self.prompt = prompt
        self.cached = cached
        self.device = next(model.parameters()).device
        self.label_ids = torch.tensor(prompt.label_ids, device=self.device)
        self.prefix_cache = None
        self.policies: OrderedDict[tuple[int, ...], tuple[Any, torch.Tensor]] = (
            OrderedDict()
        )
        if cached:
            with frozen(model):
                self.prefix_cache = returned_cache(
                    model(input_ids=self._tensor(prompt.prefix_ids), use_cache=True)
                )

    def _tensor(self, ids: list[int]) -> torch.Tensor:
        return torch.tensor([ids], dtype=torch.long, device=self.device)

    def _policy(self, policy_ids: list[int]) -> tuple[Any, torch.Tensor]:
        """The KV cache after prefix + policy, and the sum of the policy's last hidden states."""
        key = tuple(policy_ids)
        if key in self.policies:
            self.policies.move_to_end(key)
            return self.policies[key]
        output = self.model(
            input_ids=self._tensor(policy_ids),
            **cache_kwargs(copy.deepcopy(self.prefix_cache)),
            use_cache=True,
            output_hidden_states=True,
            logits_to_keep=1,
        )
        entry = (returned_cache(output), output.hidden_states[-1][0].float().sum(0))
        self.policies[key] = entry
        if len(self.policies) > self.POLICIES:
            self.policies.popitem(last=False)
        return entry

    def score_parts(self, policy_ids: list[int], request_ids: list[int]) -> Scores:
        """Log-probs of the labels after prefix + policy + request (no calibration)."""
        with frozen(self.model):
            if self.cached:
                cache, policy_sum = self._policy(policy_ids)
                output = self.model(
                    input_ids=self._tensor(request_ids),
                    **cache_kwargs(copy.deepcopy(cache)),
                    use_cache=True,
                    output_hidden_states=True,
                    logits_to_keep=1,
                )
                hidden_sum = policy_sum + output.hidden_states[-1][0].float().sum(0)
            else:
                output = self.model(
                    input_ids=self._tensor(
                        self.prompt.prefix_ids + policy_ids + request_ids
                    ),
                    use_cache=False,
                    output_hidden_states=True,
                    logits_to_keep=1,
                )
                task = output.hidden_states[-1][0, len(self.prompt.prefix_ids) :]
                hidden_sum = task.float().sum(0)
            logprobs = torch.log_softmax(output.logits[0, -1].float(), dim=-1)
            features = hidden_sum / (len(policy_ids) + len(request_ids))
            return Scores(logprobs[self.label_ids].cpu(), features.cpu())

    def logprobs(self, messages: list[dict[str, Any]]) -> torch.Tensor:
        """The label log-probs of a task's first observation (no calibration)."""
        return self.score_parts(*self.prompt.task_parts(messages)).logprobs

    def score(self, messages: list[dict[str, Any]]) -> Scores:
        """Scores of a task's first observation (calibrated when `calibrate` was called)."""
        scores = self.score_parts(*self.prompt.task_parts(messages))
        scores.logprobs = self.calibrated(scores.logprobs)
        return scores

    def probabilities(self, scores: Scores) -> torch.Tensor:
        """The label log-probs renormalised over the labels."""
        return torch.softmax(scores.logprobs, dim=-1)

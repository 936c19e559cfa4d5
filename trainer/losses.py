"""The two objectives side by side: supervised (cold start) and GRPO's clipped surrogate.

Both take per-token log-probs [B, T] of a minibatch and a mask that is 1 on the
tokens being trained, and average per trajectory first (1/|o_i|), then over the
minibatch, as the paper's appendix A does.
"""

from __future__ import annotations

import torch


def per_trajectory_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """mean_i 1/|o_i| sum_t values_it over the masked tokens of each row."""
    return ((values * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)).mean()


def sft_loss(logprobs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """L_SFT = -mean_i 1/|o_i| sum_t log pi(o_t | o_<t) over demonstration tokens."""
    return -per_trajectory_mean(logprobs, mask)


def group_advantages(
    rewards: torch.Tensor, epsilon: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """A = (r - group mean) / (group std + eps) for rewards [G, K]; and which groups to keep.

    A group whose K rewards are all equal has zero advantage everywhere: it is
    dropped (keep = False) so no forward or backward pass is spent on it.
    """
    mean = rewards.mean(dim=1, keepdim=True)
    std = rewards.std(dim=1, keepdim=True, unbiased=False)  # population std
    keep = (rewards.max(dim=1).values - rewards.min(dim=1).values) > 0
    return (rewards - mean) / (std + epsilon), keep


def grpo_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    mask: torch.Tensor,
    advantages: torch.Tensor,
    clip_epsilon: float,
    ref_logprobs: torch.Tensor | None = None,
    kl_beta: float = 0.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """L = -mean_i 1/|o_i| sum_t min(rho_t A_i, clip(rho_t, 1-e, 1+e) A_i) + beta KL.

    `old_logprobs` are the sampler's log-probs of the tokens it sampled, so
    rho_t = pi_theta(o_t | prompt, o_<t) / pi_sampler(o_t | prompt, o_<t). A
    hinted episode (hint injection) was sampled with expert guidance in its
    prompt but is trained on the plain prompt; its `old_logprobs` are then the
    policy's own on the plain prompt before the update (`with_current_logprobs`),
    so the clipped ratio is pi_theta(o_t | plain, o_<t) / pi_theta_old(o_t | plain,
    o_<t): 1 at the first step, as the TRACE authors' hint swap computes it. The
    sampler's hinted log-probs are not used (they would make rho_t tiny wherever
    the hint made a token likely, and the clip would pass no gradient there).
    """
    ratio = torch.exp(logprobs - old_logprobs)  # rho_t = pi_theta / pi_old
    unclipped = ratio * advantages[:, None]  # rho_t * A_i
    clipped = (
        torch.clamp(ratio, 1 - clip_epsilon, 1 + clip_epsilon) * advantages[:, None]
    )
    per_token = -torch.min(unclipped, clipped)
    if ref_logprobs is not None and kl_beta > 0:
        # k3 estimator of KL(pi || pi_ref): exp(ref - logp) - (ref - logp) - 1
        delta = ref_logprobs - logprobs
        per_token = per_token + kl_beta * (torch.exp(delta) - delta - 1)
    loss = per_trajectory_mean(per_token, mask)
    with torch.no_grad():
        was_clipped = ((ratio - 1).abs() > clip_epsilon).float()
        clip_fraction = float((was_clipped * mask).sum() / mask.sum().clamp(min=1))
    return loss, {"clip_fraction": clip_fraction}

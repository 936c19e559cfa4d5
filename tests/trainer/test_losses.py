"""The GRPO loss and group advantages against hand computations."""

from __future__ import annotations

import math

import pytest
import torch

from trainer.losses import group_advantages, grpo_loss


def test_loss_equals_a_hand_computation() -> None:
    logprobs = torch.tensor([[0.0, -1.0, -0.5], [0.0, -2.0, -1.0]])
    old = torch.tensor([[0.0, -1.2, -0.5], [0.0, -1.0, -1.0]])
    mask = torch.tensor([[0.0, 1.0, 1.0], [0.0, 1.0, 0.0]])
    advantages = torch.tensor([1.0, -2.0])
    loss, stats = grpo_loss(logprobs, old, mask, advantages, clip_epsilon=0.2)
    r1 = math.exp(
        0.2
    )  # trajectory 1, token 1: ratio e^0.2 = 1.221 > 1.2 -> clipped for A > 0
    first = -(min(r1 * 1.0, 1.2 * 1.0) + min(1.0 * 1.0, 1.0 * 1.0)) / 2
    r2 = math.exp(
        -1.0
    )  # trajectory 2, token 1: ratio 0.368 < 0.8; A < 0 -> min picks clipped
    second = -(min(r2 * -2.0, 0.8 * -2.0)) / 1
    assert float(loss) == pytest.approx((first + second) / 2, rel=1e-5)
    assert stats["clip_fraction"] == pytest.approx(2 / 3)


def test_kl_term_is_added_with_beta() -> None:
    logprobs = torch.tensor([[0.0, -1.0]])
    mask = torch.tensor([[0.0, 1.0]])
    advantage = torch.tensor([0.0])
    loss, _ = grpo_loss(
        logprobs, logprobs, mask, advantage, 0.2, torch.tensor([[0.0, -1.5]]), 0.1
    )
    delta = -0.5
    assert float(loss) == pytest.approx(0.1 * (math.exp(delta) - delta - 1), rel=1e-5)


def test_equal_reward_groups_are_dropped_and_advantages_normalised() -> None:
    rewards = torch.tensor(
        [[1.0, 0.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]]
    )
    advantages, keep = group_advantages(rewards, epsilon=1e-4)
    assert keep.tolist() == [True, False, False]
    assert advantages[0].tolist() == pytest.approx(
        [0.5 / (0.5 + 1e-4), -0.5 / (0.5 + 1e-4)] * 2
    )
    assert advantages[1:].abs().sum() == 0

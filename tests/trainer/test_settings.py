"""Every number's range and help, declared once; bad configs and limits refused."""

from __future__ import annotations

import pytest

from trainer.config import TrainConfig
from trainer.errors import TrainerError
from trainer.rollout import RolloutLimits


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"group_size": 1}, "group-size"),
        ({"temperature": 0}, "temperature"),
        ({"backend": "jax"}, "backend"),
        ({"max_total_tokens": 10, "max_new_tokens": 20}, "max-total-tokens"),
        ({"learning_rate": float("inf")}, "--learning-rate must be a number in"),
        ({"learning_rate": float("nan")}, "--learning-rate"),
        ({"max_grad_norm": float("nan")}, "--max-grad-norm"),
        ({"kl_beta": float("nan")}, "--kl-beta"),
        ({"lora_dropout": -0.5}, "--lora-dropout must be a number in \\[0, 1\\)"),
        ({"lora_dropout": 5.0}, "--lora-dropout"),
        ({"cold_start_learning_rate": float("inf")}, "--cold-start-learning-rate"),
        ({"lora_rank": 1024}, "--lora-rank"),
        ({"iterations": 2.5}, "--iterations must be an integer"),
        ({"seed": True}, "--seed"),
        ({"step_timeout": 0}, "--step-timeout"),
        ({"report_to": "mlflow"}, "--report-to"),
        ({"lora_target_modules": ()}, "--lora-target-modules"),
    ],
)
def test_bad_configs_are_refused(change, message) -> None:
    with pytest.raises(TrainerError, match=message):
        TrainConfig(**change)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"max_turns": 0}, "--max-turns"),
        ({"temperature": -1}, "--temperature"),
        ({"max_new_tokens": 0}, "--max-new-tokens"),
        ({"step_timeout": float("inf")}, "--step-timeout"),
    ],
)
def test_bad_rollout_limits_are_refused(change, message) -> None:
    with pytest.raises(TrainerError, match=message):
        RolloutLimits(**change)


def test_temperature_0_is_greedy_for_evaluation_and_refused_for_training() -> None:
    from trainer.config import TrainConfig
    from trainer.rollout import RolloutLimits

    assert RolloutLimits(temperature=0.0).temperature == 0
    with pytest.raises(TrainerError, match="greedy"):
        TrainConfig(temperature=0.0)


def test_every_number_of_the_config_has_one_range_and_one_help() -> None:
    """A setting's default lives on TrainConfig, its range and help in SETTINGS only."""
    from dataclasses import fields

    from trainer.options import ROLLOUT_SETTINGS, TRAIN_SETTINGS
    from trainer.settings import SETTINGS

    numbers = {f.name for f in fields(TrainConfig) if f.type in ("int", "float")}
    assert numbers <= set(SETTINGS)
    assert set(SETTINGS) - numbers == {"episodes", "concurrent_episodes"}  # eval only
    assert numbers == set(TRAIN_SETTINGS) | set(ROLLOUT_SETTINGS)
    assert all(s.help and s.allowed and s.low <= s.high for s in SETTINGS.values())

"""Every number's range and help, declared once; bad configs and limits refused."""

from __future__ import annotations

import pytest

from trainer.errors import TrainerError
from trainer.settings import RolloutLimits, TrainConfig


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"group_size": 1}, "group-size"),
        ({"temperature": 0}, "temperature"),
        ({"backend": "jax"}, "backend"),
        ({"max_total_tokens": 10, "max_new_tokens": 20}, "max-total-tokens"),
        ({"learning_rate": float("inf")}, "--learning-rate must be a finite number"),
        ({"learning_rate": float("nan")}, "--learning-rate"),
        ({"max_grad_norm": float("nan")}, "--max-grad-norm"),
        ({"kl_beta": float("nan")}, "--kl-beta"),
        ({"lora_dropout": -0.5}, "--lora-dropout must be greater than or equal to 0"),
        ({"lora_dropout": 5.0}, "--lora-dropout"),
        ({"cold_start_learning_rate": float("inf")}, "--cold-start-learning-rate"),
        ({"lora_rank": 1024}, "--lora-rank"),
        ({"iterations": 2.5}, "--iterations must be a valid integer, not 2.5"),
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
    from trainer.settings import RolloutLimits, TrainConfig

    assert RolloutLimits(temperature=0.0).temperature == 0
    with pytest.raises(TrainerError, match="greedy"):
        TrainConfig(temperature=0.0)


def test_every_setting_is_declared_once_with_its_help_and_every_number_its_range() -> (
    None
):
    """A setting's type, default, range and help live on its model only; the CLI's
    options are derived from every field."""
    from trainer.options import OWN_OPTIONS, ROLLOUT_SETTINGS, TRAIN_SETTINGS
    from trainer.settings import Evaluation

    for model in (TrainConfig, RolloutLimits, Evaluation):
        for name, field in model.model_fields.items():
            assert field.description, name
            if field.annotation in (int, float):
                assert field.metadata, f"{name} has no range"
    assert set(TrainConfig.model_fields) == {
        *TRAIN_SETTINGS,
        *ROLLOUT_SETTINGS,
        *OWN_OPTIONS,
    }


def test_a_replaced_setting_is_validated_like_a_new_one() -> None:
    config = TrainConfig(groups=3)
    assert config.replace(groups=5).groups == 5 and config.groups == 3
    with pytest.raises(TrainerError, match="--groups"):
        config.replace(groups=0)


def test_the_vllm_backend_is_refused_where_vllm_cannot_be_imported(monkeypatch) -> None:
    """One check for the trainer, the router and `trace run`, naming the caller's key."""
    import sys

    from trainer.settings import check_backend

    monkeypatch.setitem(sys.modules, "vllm", None)  # as if not installed
    check_backend("transformers")
    with pytest.raises(TrainerError, match=r"^train.backend: vllm needs `pip install"):
        check_backend("vllm", "train.backend:")

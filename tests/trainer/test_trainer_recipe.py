"""The authors' recipe on top of GRPO: joint SFT + RL, dynamic resampling, hint injection."""

from __future__ import annotations

import importlib
import json
import random

import pytest
import torch

from tests.conftest import NO_TOOL_ROLE, ROOT
from trainer import cold_start, env_calls, grpo
from trainer.envs import resolve_env
from trainer.errors import TrainerError
from trainer.generation import TransformersGenerator
from trainer.losses import grpo_loss, sft_loss
from trainer.models import load_base, with_lora
from trainer.optimize import Batch, Row, Supervised, batch_logprobs, optimize
from trainer.settings import EVAL_SEED_BASE, TrainConfig

PACKAGE = str(ROOT / "generated_envs" / "permission_error_recovery")


def _rows(seed: int, advantages: list[float]) -> list[Row]:
    generator = torch.Generator().manual_seed(seed)
    rows = []
    for i, advantage in enumerate(advantages):
        length = 8 + 3 * i
        tokens = torch.randint(0, 200, (length,), generator=generator).tolist()
        old = (-torch.rand(length, generator=generator)).tolist()
        rows.append(Row(tokens, [0] * 3 + [1] * (length - 3), old, advantage))
    return rows


def _model(model_dir):
    base, _ = load_base(str(model_dir))
    torch.manual_seed(0)
    model = with_lora(base, TrainConfig(lora_rank=4))
    return model, [p for p in model.parameters() if p.requires_grad]


def _gradient(model, trainable, loss) -> list[torch.Tensor]:
    for p in trainable:
        p.grad = None
    loss.backward()
    return [p.grad.detach().clone() for p in trainable]


def _policy(model):
    def objective(batch: Batch):
        logprobs = batch_logprobs(model, batch, 1.0)
        return grpo_loss(
            logprobs, batch.old_logprobs, batch.mask, batch.advantages, 0.2
        )

    return objective


@pytest.mark.parametrize("weight", [0.1, 2.0])
def test_the_joint_step_is_the_policy_gradient_plus_weight_times_the_supervised_one(
    tiny_model_dir, weight
) -> None:
    """L = L_GRPO + c L_SFT: one SGD step (lr 1) moves each weight by -(g_GRPO + c g_SFT)."""
    policy_rows, demonstrations = _rows(0, [1.0, -0.5, 0.7]), _rows(1, [0.0, 0.0])
    model, trainable = _model(tiny_model_dir)
    before = [p.detach().clone() for p in trainable]
    policy = _policy(model)
    expected_policy = _gradient(
        model, trainable, policy(Batch.of(policy_rows, 0, "cpu"))[0]
    )
    batch = Batch.of(demonstrations, 0, "cpu")
    expected_sft = _gradient(
        model, trainable, sft_loss(batch_logprobs(model, batch, 1.0), batch.mask)
    )
    stats = optimize(
        model, torch.optim.SGD(trainable, lr=1.0), policy_rows, policy,
        minibatch_size=3, epochs=1, max_grad_norm=1e9, pad=0, rng=random.Random(0),
        desc="test", supervised=Supervised(demonstrations, weight), share_prefix=False,
    )  # fmt: skip
    for old, new, g, s in zip(
        before, trainable, expected_policy, expected_sft, strict=True
    ):
        torch.testing.assert_close(
            old - new.detach(), g + weight * s, rtol=1e-4, atol=1e-6
        )
    assert stats["optimizer_steps"] == 1 and stats["sft_loss"] > 0


def test_without_informative_groups_the_supervised_term_steps_alone(
    tiny_model_dir,
) -> None:
    """Every group flat: one pass over the demonstrations, a step per minibatch."""
    demonstrations = _rows(2, [0.0, 0.0, 0.0])
    model, trainable = _model(tiny_model_dir)
    before = [p.detach().clone() for p in trainable]
    stats = optimize(
        model, torch.optim.SGD(trainable, lr=1.0), [], _policy(model),
        minibatch_size=2, epochs=1, max_grad_norm=1e9, pad=0, rng=random.Random(0),
        desc="test", supervised=Supervised(demonstrations, 0.5),
    )  # fmt: skip
    assert stats["optimizer_steps"] == 2 and stats["sft_loss"] > 0
    assert any(not torch.equal(a, b) for a, b in zip(before, trainable, strict=True))
    plain = optimize(
        model, torch.optim.SGD(trainable, lr=1.0), [], _policy(model),
        minibatch_size=2, epochs=1, max_grad_norm=1e9, pad=0, rng=random.Random(0),
        desc="test",
    )  # fmt: skip
    assert plain["optimizer_steps"] == 0 and "sft_loss" not in plain


def _train(model_dir, out, monkeypatch, alter=None, **settings):
    """One GRPO iteration on the permission package (a random tiny model earns 0 there).

    Returns the config, the metrics and the seeds of each `collect` call;
    `alter(call, groups)` may change the groups a call returns.
    """
    played: list[list[int]] = []
    original = grpo.collect

    def recording(handle, generator, tokenizer, seeds, *rest):
        played.append(list(seeds))
        groups = original(handle, generator, tokenizer, seeds, *rest)
        if alter is not None:
            alter(len(played), groups)
        return groups

    monkeypatch.setattr(grpo, "collect", recording)
    config = TrainConfig(
        iterations=1, groups=2, group_size=2, max_new_tokens=4, max_turns=1,
        max_total_tokens=100_000, lora_rank=4, minibatch_size=2,
        tool_format="compact", **settings,
    )  # fmt: skip
    base, tokenizer = load_base(str(model_dir), chat_template="chatml")
    torch.manual_seed(0)
    model = with_lora(base, config)
    metrics = grpo.train(
        config, resolve_env(PACKAGE), model, tokenizer,
        TransformersGenerator(model, tokenizer), out,
    ).metrics  # fmt: skip
    return config, metrics, played


def test_flat_groups_are_replayed_on_fresh_seeds_up_to_the_tries(
    tiny_model_dir, tmp_path, monkeypatch
) -> None:
    config, metrics, played = _train(
        tiny_model_dir, tmp_path, monkeypatch, resample_tries=2
    )
    first = [config.train_seed(0, g) for g in range(2)]
    assert played == [
        first,
        [config.resample_seed(0, 1, 0), config.resample_seed(0, 1, 1)],
        [config.resample_seed(0, 2, 0), config.resample_seed(0, 2, 1)],
    ]
    assert metrics[0]["resampled_groups"] == 4 and metrics[0]["dropped_groups"] == 1.0
    _, plain, played = _train(tiny_model_dir, tmp_path / "plain", monkeypatch)
    assert played == [first] and plain[0]["resampled_groups"] == 0


def test_a_group_that_turns_informative_is_kept_and_not_replayed_again(
    tiny_model_dir, tmp_path, monkeypatch
) -> None:
    """The first replay of group 1 earns different rewards: only group 0 plays on."""

    def informative(call: int, groups) -> None:
        if call == 2:
            groups[1][0].reward = 1.0

    config, metrics, played = _train(
        tiny_model_dir, tmp_path, monkeypatch, informative, resample_tries=3
    )
    assert played[1] == [config.resample_seed(0, 1, 0), config.resample_seed(0, 1, 1)]
    assert played[2:] == [[config.resample_seed(0, a, 0)] for a in (2, 3)]
    assert metrics[0]["resampled_groups"] == 4 and metrics[0]["dropped_groups"] == 0.5
    assert metrics[0]["optimizer_steps"] == 1.0  # the informative group was trained on


def test_joint_sft_trains_where_every_group_is_flat_and_0_is_plain_grpo(
    tiny_model_dir, tmp_path, monkeypatch
) -> None:
    _, joint, _ = _train(
        tiny_model_dir, tmp_path / "joint", monkeypatch, sft_coef=0.1, sft_examples=3
    )
    assert joint[0]["dropped_groups"] == 1.0
    assert joint[0]["optimizer_steps"] == 2.0 and joint[0]["sft_loss"] > 0

    def never(*args, **kwargs):
        raise AssertionError("sft_coef 0 must not build demonstrations")

    monkeypatch.setattr(cold_start, "demonstrations", never)
    _, plain, _ = _train(tiny_model_dir, tmp_path / "plain", monkeypatch)
    assert plain[0]["optimizer_steps"] == 0.0 and "sft_loss" not in plain[0]


def test_resample_seeds_are_fresh_training_seeds() -> None:
    config = TrainConfig(groups=4, resample_tries=3, seed=12345)
    seeds = {
        config.resample_seed(i, a, g)
        for i in range(50)
        for a in (1, 2, 3)
        for g in range(4)
    }
    assert len(seeds) == 50 * 3 * 4
    assert all(2**29 <= s < EVAL_SEED_BASE - 2**20 for s in seeds)
    assert not seeds & {config.train_seed(i, g) for i in range(50) for g in range(4)}
    assert not seeds & set(cold_start.demonstration_seeds(1000))


def test_the_hint_is_the_capability_and_the_gold_policys_first_reply() -> None:
    handle = resolve_env(PACKAGE)
    hint = cold_start.hint(handle, 5)
    gold = handle.make()
    gold.reset(seed=5)
    package = importlib.import_module(handle.package)
    replies = [
        m
        for m in package.run_episode(gold, "gold", 5).info["messages"]
        if m["role"] == "assistant"
    ]
    assert hint.description == handle.capability["description"]
    assert hint.first_turn == replies[0]
    assert hint.first_turn["tool_calls"][0]["function"]["name"] == "search_contacts"


@pytest.mark.parametrize(
    ("template", "tool_format"), [(None, "json"), (NO_TOOL_ROLE, "compact")]
)
def test_the_hint_writes_its_first_reply_as_the_policy_would(
    tiny_tokenizer, template, tool_format
) -> None:
    """In the chat format's own call syntax (a native template's, or the fallback's
    `<tool_call>` JSON), so the step is one the policy can copy and the parser reads."""
    from trainer.chat import ChatFormat
    from trainer.parsing import parse_tool_calls

    if template is not None:
        tiny_tokenizer.chat_template = template
    handle = resolve_env(PACKAGE)
    messages, tools = env_calls.reset(handle.make(), 5, 60)
    chat = ChatFormat(tiny_tokenizer, tools, tool_format)
    assert chat.native is (template is None)
    hint = cold_start.hint(handle, 5)
    text = hint.text(chat, messages)
    step = chat.turn(messages, hint.first_turn).strip()
    assert text.startswith("# Expert guidance\n" + hint.description)
    assert text.endswith(step) and "<expert" not in text
    _, calls = parse_tool_calls(step)
    (call,) = hint.first_turn["tool_calls"]
    assert [(c["name"], c["arguments"]) for c in calls] == [
        (call["function"]["name"], json.loads(call["function"]["arguments"]))
    ]


def test_a_hinted_episode_samples_with_the_hint_and_trains_on_the_plain_prompt(
    tiny_model_dir,
) -> None:
    from trainer.chat import ChatFormat
    from trainer.rollout import Hint, collect, with_hint
    from trainer.settings import RolloutLimits

    base, tokenizer = load_base(str(tiny_model_dir), chat_template="chatml")
    handle = resolve_env(PACKAGE)
    limits = RolloutLimits(max_turns=2, max_new_tokens=4, max_total_tokens=100_000)
    hint = Hint("HINT", {"role": "assistant", "content": "Hello."})
    torch.manual_seed(0)
    (group,) = collect(
        handle, TransformersGenerator(base, tokenizer), tokenizer, [7], 2, limits,
        "compact", None, {7: hint}, 1,
    )  # fmt: skip
    hinted, plain = group
    messages, tools = env_calls.reset(handle.make(max_turns=2), 7, 60)
    chat = ChatFormat(tokenizer, tools, "compact")
    hinted_prompt = chat.prompt(with_hint(messages, hint.text(chat, messages)))
    assert hinted.tokens[: len(hinted_prompt)] == hinted_prompt
    assert plain.plain_prompt is None and plain.tokens[
        : len(chat.prompt(messages))
    ] == chat.prompt(messages)
    tokens, mask = hinted.plain()
    assert tokens == chat.prompt(messages) + hinted.tokens[len(hinted_prompt) :]
    assert sum(mask) == hinted.generated and mask[: len(chat.prompt(messages))] == [
        0
    ] * len(chat.prompt(messages))
    assert "HINT" not in tokenizer.decode(tokens)


def test_the_update_scores_hinted_episodes_on_the_plain_prompt_from_a_ratio_of_1(
    tiny_model_dir, tmp_path, monkeypatch
) -> None:
    seen = {}
    original = grpo.optimize

    def capture(model, optimizer, rows, *args, **kwargs):
        seen["rows"] = rows
        batch = Batch.of(rows, 0, "cpu")
        with torch.no_grad():
            seen["now"] = batch_logprobs(model, batch, 1.0)
        return original(model, optimizer, rows, *args, **kwargs)

    monkeypatch.setattr(grpo, "optimize", capture)

    def informative(call: int, groups) -> None:
        for group in groups:
            group[0].reward = 1.0  # the hinted episode of each group did better

    _, metrics, _ = _train(
        tiny_model_dir, tmp_path, monkeypatch, informative, hint_share=0.2
    )  # 0.2 x K = 0.4 episodes: at least one of each group is hinted
    rows = seen["rows"]
    assert len(rows) == 4 and metrics[0]["hinted_success_rate"] == 0.0
    texts = [tokenizer_text(tiny_model_dir, row.tokens) for row in rows]
    assert not any("Expert guidance" in text for text in texts)
    for i, row in enumerate(rows[2:], start=2):  # the swapped rows come last
        trained = torch.tensor(row.mask, dtype=torch.bool)
        torch.testing.assert_close(
            torch.tensor(row.old_logprobs)[trained],
            seen["now"][i, : len(row.tokens)][trained],
        )  # pi_old = the policy's own log-prob on the plain prompt: ratio 1


def tokenizer_text(model_dir, tokens: list[int]) -> str:
    _, tokenizer = load_base(str(model_dir), chat_template="chatml")
    return tokenizer.decode(tokens)


@pytest.mark.parametrize(
    ("change", "option"),
    [
        ({"sft_coef": -0.1}, "--sft-coef"),
        ({"sft_coef": float("nan")}, "--sft-coef"),
        ({"sft_examples": 0}, "--sft-examples"),
        ({"resample_tries": 101}, "--resample-tries"),
        ({"resample_tries": 1.5}, "--resample-tries"),
        ({"hint_share": 1.5}, "--hint-share"),
    ],
)
def test_recipe_settings_are_checked(change, option) -> None:
    with pytest.raises(TrainerError, match=option):
        TrainConfig(**change)

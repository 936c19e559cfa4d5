"""GRPO pieces on fixed tensors and scripted generators (no model download)."""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import types

import numpy as np
import pytest
import torch

from tests.conftest import ROOT
from trainer import grpo
from trainer.chat import ChatFormat
from trainer.config import EVAL_SEED_BASE, TrainConfig
from trainer.envs import resolve_env
from trainer.errors import Interrupted, TrainerError
from trainer.evaluation import confidence_interval, evaluate, mcnemar, mcnemar_power
from trainer.generation import VLLMGenerator
from trainer.losses import group_advantages, grpo_loss
from trainer.parsing import parse_tool_calls, to_action
from trainer.rollout import Ending, RolloutLimits, Sample, collect


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


def test_tool_calls_are_parsed_from_hermes_and_plain_json() -> None:
    text, calls = parse_tool_calls(
        'ok <tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>'
    )
    assert text == "ok" and calls == [{"name": "f", "arguments": {"a": 1}}]
    assert parse_tool_calls('{"name": "g", "arguments": "{\\"b\\": 2}"}')[1] == [
        {"name": "g", "arguments": {"b": 2}}
    ]
    assert parse_tool_calls("<tool_call>{broken</tool_call>") == (
        "<tool_call>{broken</tool_call>",
        [],
    )
    action, message = to_action(
        '<tool_call>{"name": "f", "arguments": {}}</tool_call>', 3
    )
    assert (
        json.loads(action)["tool_calls"][0]["id"] == "call_3_0"
        and message["role"] == "assistant"
    )
    assert to_action("plain reply", 1)[0] == "plain reply"


class ScriptedGenerator:
    """Returns fixed token sequences, turn after turn, and records what it was asked."""

    def __init__(self, tokenizer, replies: list[str]) -> None:
        self.tokenizer, self.replies, self.calls = tokenizer, replies, 0
        self.samples: list[list[int]] = []
        self.resumed: list[bool] = []

    def generate(self, prompts, max_new_tokens, temperature, resume=False):
        self.resumed.append(resume)
        out = []
        for _ in prompts:
            ids = self.tokenizer(
                self.replies[min(self.calls, len(self.replies) - 1)],
                add_special_tokens=False,
            )["input_ids"]
            ids = ids + [self.tokenizer.eos_token_id]
            self.samples.append(ids)
            out.append(Sample(ids, [-0.5] * len(ids)))
        self.calls += 1
        return out


def test_mask_covers_exactly_the_sampled_tokens(tiny_tokenizer) -> None:
    handle = resolve_env(str(ROOT / "generated_envs" / "date_time_recovery"))
    generator = ScriptedGenerator(
        tiny_tokenizer,
        [
            '<tool_call>{"name": "get_current_timestamp", "arguments": {}}</tool_call>',
            "All set.",
        ],
    )
    ((episode,),) = collect(
        handle,
        generator,
        tiny_tokenizer,
        [5],
        1,
        RolloutLimits(max_turns=5, max_total_tokens=100_000),
    )
    assert len(episode.tokens) == len(episode.mask) == len(episode.logprobs)
    sampled = [t for t, m in zip(episode.tokens, episode.mask, strict=True) if m]
    assert sampled == [t for sample in generator.samples for t in sample]
    # Only the turns after the first extend what the generator saw before.
    assert generator.resumed == [False, True]
    assert all(
        lp == 0.0 for lp, m in zip(episode.logprobs, episode.mask, strict=True) if not m
    )
    text = tiny_tokenizer.decode(
        [t for t, m in zip(episode.tokens, episode.mask, strict=True) if not m]
    )
    assert "<|im_start|>tool" in text and "All set." not in text
    assert [m["role"] for m in episode.messages][-4:] == [
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert episode.done and episode.turns == 2 and episode.reward == 0.0


def test_collect_counts_finished_episodes_on_its_progress_bar(
    tiny_tokenizer, monkeypatch
) -> None:
    bars = []

    class Bar:
        def __init__(self, **kwargs) -> None:
            self.kwargs, self.n, self.closed = kwargs, 0, False
            bars.append(self)

        def update(self, n: int) -> None:
            self.n += n

        def close(self) -> None:
            self.closed = True

    monkeypatch.setattr("trainer.rollout.tqdm", Bar)
    handle = resolve_env(str(ROOT / "generated_envs" / "date_time_recovery"))
    replies = [
        '<tool_call>{"name": "get_current_timestamp", "arguments": {}}</tool_call>',
        "All set.",
    ]
    limits = RolloutLimits(max_turns=5, max_total_tokens=100_000)
    collect(
        handle,
        ScriptedGenerator(tiny_tokenizer, replies),
        tiny_tokenizer,
        [1, 2, 3],
        2,
        limits,
        progress="evaluation",
    )
    collect(
        handle,
        ScriptedGenerator(tiny_tokenizer, replies),
        tiny_tokenizer,
        [1],
        1,
        limits,
    )
    shown, quiet = bars
    assert shown.kwargs["desc"] == "evaluation" and shown.kwargs["total"] == 6
    assert shown.n == 6 and shown.closed and shown.kwargs["disable"] is None
    assert quiet.kwargs["disable"] is True


def test_evaluation_plays_its_seeds_in_waves_of_concurrent_episodes(
    tiny_tokenizer,
) -> None:
    """Each wave's episodes keep their caches; no more than `concurrent` are played at once."""
    handle = resolve_env(str(ROOT / "generated_envs" / "date_time_recovery"))
    replies = [
        '<tool_call>{"name": "get_current_timestamp", "arguments": {}}</tool_call>'
    ]
    limits = RolloutLimits(max_turns=2, max_total_tokens=100_000)
    batches = []

    class Counting(ScriptedGenerator):
        def generate(self, prompts, *args, **kwargs):
            batches.append(len(prompts))
            return super().generate(prompts, *args, **kwargs)

    partial = []
    report = evaluate(handle, Counting(tiny_tokenizer, replies), tiny_tokenizer, 5, limits, 7,
                      concurrent=2, on_wave=partial.append)  # fmt: skip
    # Waves of 2, 2 and 1 episodes, two turns each (the first of a wave opens it).
    assert batches == [2, 2, 2, 2, 1, 1]
    assert report["episodes"] == len(report["outcomes"]) == 5
    assert report["seeds"] == [7, 11]
    # The seeds played so far after each wave but the last, as a report of their own.
    assert [(p["episodes"], p["seeds"]) for p in partial] == [(2, [7, 8]), (4, [7, 10])]
    assert partial[-1]["outcomes"] == report["outcomes"][:4]
    everything = evaluate(
        handle, Counting(tiny_tokenizer, replies), tiny_tokenizer, 5, limits, 7
    )
    assert batches[6:] == [5, 5] and everything["outcomes"] == report["outcomes"]


def _hang(*args, **kwargs):
    import time

    time.sleep(30)


def _faulty(where: str, answer):
    """A make() whose environments misbehave at `where` ("make", "reset" or "step")."""
    handle = resolve_env(str(ROOT / "generated_envs" / "date_time_recovery"))
    original = handle.make

    def make(self, **kwargs):
        if where == "make":
            return answer()
        env = original(**kwargs)
        setattr(env, where, answer)
        return env

    return handle, make


def _exits(*args, **kwargs):
    sys.exit(3)


def _raises(*args, **kwargs):
    raise RuntimeError("boom")


GOOD_OBS = json.dumps([{"role": "user", "content": "hi"}])
FAULTS = {
    "constructor raises": ("make", _raises, "boom"),
    "constructor exits": ("make", _exits, "SystemExit"),
    "reset returns a JSON object": (
        "reset", lambda seed=None, options=None: ('{"role": "user"}', {"tools": []}),
        "not a list of chat messages",
    ),
    "reset returns a list of strings": (
        "reset", lambda seed=None, options=None: (json.dumps(["hi"]), {"tools": []}),
        "not a list of chat messages",
    ),
    "reset returns no tools": (
        "reset", lambda seed=None, options=None: (GOOD_OBS, None), "'tools'",
    ),
    "step raises": ("step", _raises, "boom"),
    "step calls sys.exit": ("step", _exits, "SystemExit"),
    "step reward is None": (
        "step", lambda action: (GOOD_OBS, None, True, False, {}), "NoneType reward",
    ),
    "step reward is a string": (
        "step", lambda action: (GOOD_OBS, "1", True, False, {}), "str reward",
    ),
    "step reward is NaN": (
        "step", lambda action: (GOOD_OBS, float("nan"), True, False, {}), "finite",
    ),
    "step info is None": (
        "step", lambda action: (GOOD_OBS, 1.0, True, False, None), "NoneType info",
    ),
    "step observation is a dict": (
        "step", lambda action: ({"role": "user"}, 1.0, True, False, {}), "dict observation",
    ),
    "step returns three values": ("step", lambda action: (GOOD_OBS, 1.0, True), "(observation"),
    "step hangs": ("step", _hang, "longer than 0.5 s"),
}  # fmt: skip


@pytest.mark.parametrize("fault", FAULTS, ids=list(FAULTS))
def test_a_faulty_environment_costs_its_episodes_not_the_run(
    fault, tiny_tokenizer, monkeypatch
) -> None:
    where, answer, message = FAULTS[fault]
    handle, make = _faulty(where, answer)
    monkeypatch.setattr(type(handle), "make", make)
    groups = collect(
        handle,
        ScriptedGenerator(tiny_tokenizer, ["hi"]),
        tiny_tokenizer,
        [1, 2],
        2,
        RolloutLimits(step_timeout=0.5),
    )
    episodes = [e for g in groups for e in g]
    assert [len(g) for g in groups] == [2, 2]
    assert all(
        e.ending is Ending.ENV_FAULT and e.reward == 0.0 and message in e.error
        for e in episodes
    ), [e.error for e in episodes]


def test_chat_format_falls_back_when_the_template_has_no_tool_role(
    tiny_tokenizer,
) -> None:
    tiny_tokenizer.chat_template = (
        "{% for m in messages %}{% if m.role not in ['system', 'user', 'assistant'] %}"
        "{{ raise_exception('roles must alternate') }}{% endif %}"
        "<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    chat = ChatFormat(tiny_tokenizer, [{"type": "function", "function": {"name": "f"}}])
    assert not chat.native
    history = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "U"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}],
        },
    ]
    text = tiny_tokenizer.decode(
        chat.continuation(history, [{"role": "tool", "name": "f", "content": "R"}])
    )
    assert "Tool result (f): R" in text and text.endswith("<|im_start|>assistant\n")
    assert '"name": "f"' in chat.render(history[:2], True)


def test_vllm_generator_sends_the_adapter_as_a_lora_request(monkeypatch) -> None:
    sent = {}

    class SamplingParams:
        def __init__(self, **kwargs):
            sent["params"] = kwargs

    class LoRARequest:
        def __init__(self, name, version, path):
            self.name, self.version, self.path = name, version, path

    vllm = types.ModuleType("vllm")
    vllm.SamplingParams = SamplingParams
    lora = types.ModuleType("vllm.lora")
    request = types.ModuleType("vllm.lora.request")
    request.LoRARequest = LoRARequest
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.lora", lora)
    monkeypatch.setitem(sys.modules, "vllm.lora.request", request)

    class Logprob:
        def __init__(self, value):
            self.logprob = value

    class Engine:
        def generate(self, prompts, params, lora_request=None, use_tqdm=False):
            sent["prompts"], sent["lora"] = prompts, lora_request
            completion = types.SimpleNamespace(
                token_ids=[7, 2, 9],
                logprobs=[{7: Logprob(-0.1)}, {2: Logprob(-0.2)}, {9: Logprob(-0.3)}],
            )
            return [types.SimpleNamespace(outputs=[completion]) for _ in prompts]

    generator = VLLMGenerator(Engine(), stops={2})
    generator.use_adapter("/adapters/x/checkpoint/adapter", 3)
    (sample,) = generator.generate([[1, 2, 3]], 16, 1.0)
    assert sample.tokens == [7, 2] and sample.logprobs == [-0.1, -0.2]
    assert sent["prompts"] == [{"prompt_token_ids": [1, 2, 3]}]
    assert (sent["lora"].name, sent["lora"].version, sent["lora"].path) == (
        "trace-policy",
        3,
        "/adapters/x/checkpoint/adapter",
    )
    assert sent["params"]["logprobs"] == 0 and sent["params"]["max_tokens"] == 16
    assert sent["params"]["stop"] == ["</tool_call>"]
    assert sent["params"]["include_stop_str_in_output"] is True


def test_a_turn_ends_where_its_tool_call_closes(tiny_tokenizer) -> None:
    from trainer.generation import STOP_STRINGS, _cut

    text = 'ok <tool_call>{"name": "f", "arguments": {}}</tool_call> and more'
    tokens = tiny_tokenizer(text, add_special_tokens=False)["input_ids"]
    eos = tiny_tokenizer.eos_token_id
    sample = _cut(
        tokens + [eos], [-1.0] * (len(tokens) + 1), {eos}, tiny_tokenizer, STOP_STRINGS
    )
    assert tiny_tokenizer.decode(sample.tokens).endswith("</tool_call>")
    assert len(sample.logprobs) == len(sample.tokens) < len(tokens)
    plain = _cut(tokens[:2] + [eos, 5], [-1.0] * 4, {eos}, tiny_tokenizer, STOP_STRINGS)
    assert plain.tokens == tokens[:2] + [eos]


def test_training_and_evaluation_seeds_never_overlap() -> None:
    config = TrainConfig(groups=7, seed=123)
    train = {config.train_seed(i, g) for i in range(500) for g in range(7)}
    assert max(train) < EVAL_SEED_BASE


def test_confidence_intervals() -> None:
    mean, low, high = confidence_interval([1.0] * 8 + [0.0] * 2)
    assert mean == 0.8 and 0.49 < low < 0.5 and 0.94 < high < 0.95  # Wilson 95%
    assert confidence_interval([0.5, 0.7, 0.9])[0] == pytest.approx(0.7)


def test_the_tiny_task_takes_a_long_shared_system_prompt() -> None:
    import gymnasium

    from trainer.tiny import TASK_ID, register_task, system_prompt

    long = system_prompt(1600)
    assert 1500 < len(long) <= 1600 and system_prompt(3) == "Reply."
    try:
        register_task(long)
        _, info = gymnasium.make(TASK_ID).reset(seed=1)
        assert info["messages"][0]["content"] == long
    finally:
        register_task()  # the other tests' short prompt
    _, info = gymnasium.make(TASK_ID).reset(seed=1)
    assert info["messages"][0]["content"] == "Reply."


def test_warm_up_raises_the_learning_rate_linearly_and_continues_after_a_resume() -> (
    None
):
    from trainer.optimize import warm_up

    def steps(optimizer: torch.optim.Optimizer, weight: torch.Tensor, n: int) -> list:
        rates = []
        for _ in range(n):
            weight.grad = torch.ones(2)
            warm_up(optimizer, 4)
            rates.append(optimizer.param_groups[0]["lr"])
            optimizer.step()
        return rates

    weight = torch.nn.Parameter(torch.ones(2))
    optimizer = torch.optim.AdamW([weight], lr=0.1, weight_decay=0.0)
    assert steps(optimizer, weight, 2) == pytest.approx([0.025, 0.05])
    assert float(weight.detach()[0]) == pytest.approx(
        1 - 0.025 - 0.05, abs=1e-4
    )  # Adam: ~lr
    resumed = torch.optim.AdamW([weight], lr=0.1, weight_decay=0.0)
    resumed.load_state_dict(optimizer.state_dict())  # as checkpoint.load does
    assert steps(resumed, weight, 3) == pytest.approx([0.075, 0.1, 0.1])
    weight.grad = torch.ones(2)
    plain = torch.optim.AdamW([weight], lr=0.1)
    warm_up(plain, 0)  # no warmup: the learning rate as given
    assert plain.param_groups[0]["lr"] == 0.1


def test_micro_batches_take_the_same_optimizer_step_as_one_pass(tiny_model_dir) -> None:
    """--micro-batch-size lowers peak memory only: the same step, loss and gradient norm."""
    import random

    from trainer.losses import grpo_loss
    from trainer.models import load_base, with_lora
    from trainer.optimize import Row, batch_logprobs, optimize

    generator = torch.Generator().manual_seed(0)
    rows = []
    for length, advantage in ((9, 1.0), (14, -0.5), (6, 0.7), (11, -1.2), (8, 0.3)):
        tokens = torch.randint(0, 200, (length,), generator=generator).tolist()
        mask = [0] * 3 + [1] * (length - 3)  # different trained lengths per row
        old = (-torch.rand(length, generator=generator)).tolist()
        rows.append(Row(tokens, mask, old, advantage))
    results = {}
    for micro in (0, 2):
        base, _ = load_base(str(tiny_model_dir))
        model = with_lora(base, TrainConfig(lora_rank=4))
        optimizer = torch.optim.AdamW(
            [p for p in model.parameters() if p.requires_grad], lr=1e-2
        )

        def objective(batch, model=model):
            logprobs = batch_logprobs(model, batch, 1.0)
            return grpo_loss(
                logprobs, batch.old_logprobs, batch.mask, batch.advantages, 0.2
            )

        stats = optimize(
            model, optimizer, rows, objective, minibatch_size=5, epochs=1,
            max_grad_norm=1.0, pad=0, rng=random.Random(0), desc="test",
            micro_batch_size=micro,
        )  # fmt: skip
        weights = [p.detach().clone() for p in model.parameters() if p.requires_grad]
        results[micro] = (stats, weights)
    (whole, whole_weights), (micro, micro_weights) = results[0], results[2]
    assert micro["loss"] == pytest.approx(whole["loss"], abs=1e-6)
    assert micro["grad_norm"] == pytest.approx(whole["grad_norm"], rel=1e-4)
    assert 0 <= micro["clip_fraction"] <= 1  # averaged over passes by row share
    for one, other in zip(whole_weights, micro_weights, strict=True):
        torch.testing.assert_close(one, other, rtol=1e-4, atol=1e-6)


def test_mcnemar_power_matches_simulated_paired_tests() -> None:
    rng = np.random.default_rng(0)
    seeds, before, after, trials = 24, 0.2, 0.6, 1500
    rejected = 0
    for _ in range(trials):
        first = (rng.random(seeds) < before).tolist()
        second = (rng.random(seeds) < after).tolist()
        rejected += mcnemar(first, second)["p_value"] <= 0.05
    assert mcnemar_power(seeds, before, after) == pytest.approx(
        rejected / trials, abs=0.04
    )
    assert mcnemar_power(60, 0.3, 0.3) <= 0.05  # no change: at most the test's level
    assert mcnemar_power(30, 0.17, 0.4) < mcnemar_power(100, 0.17, 0.4)


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


def test_base_models_need_and_accept_a_chat_template(tiny_model_dir, tmp_path) -> None:
    import shutil

    from trainer.models import load_base

    bare = tmp_path / "bare"
    shutil.copytree(tiny_model_dir, bare)
    config = json.loads((bare / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (bare / "tokenizer_config.json").write_text(json.dumps(config))
    (bare / "chat_template.jinja").unlink(missing_ok=True)
    with pytest.raises(TrainerError, match="--chat-template"):
        load_base(str(bare))
    _, tokenizer = load_base(str(bare), chat_template="chatml")
    chat = ChatFormat(tokenizer, [{"type": "function", "function": {"name": "f"}}])
    assert not chat.native and tokenizer.eos_token == "<|im_end|>"
    assert chat.render([{"role": "user", "content": "hi"}], True).endswith(
        "<|im_start|>assistant\n"
    )
    with pytest.raises(TrainerError, match="neither a built-in"):
        load_base(str(bare), chat_template="no-such-template")


def test_log_probs_are_computed_only_where_tokens_were_sampled(tiny_model_dir) -> None:
    from transformers import AutoModelForCausalLM

    from trainer.optimize import token_logprobs

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tokens = torch.randint(0, model.config.vocab_size, (2, 12))
    mask = torch.zeros(2, 12)
    mask[0, 4:7], mask[1, 9:12] = 1, 1
    attention = torch.ones_like(tokens)
    with torch.no_grad():
        picked = token_logprobs(model, tokens, attention, 0.7, mask)
        full = torch.log_softmax(model(input_ids=tokens).logits[:, :-1] / 0.7, dim=-1)
    expected = full.gather(-1, tokens[:, 1:].unsqueeze(-1)).squeeze(-1)
    marked = mask[:, 1:].bool()
    assert torch.allclose(picked[:, 1:][marked], expected[marked], atol=1e-5)
    assert picked[:, 0].eq(0).all() and picked[:, 1:4].eq(0).all()


def test_chunked_head_gives_the_full_log_softmax_and_its_gradient(
    tiny_model_dir, monkeypatch
) -> None:
    from transformers import AutoModelForCausalLM

    from trainer import optimize

    monkeypatch.setattr(optimize, "HEAD_CHUNK", 3)  # several chunks on a tiny batch
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tokens = torch.randint(0, model.config.vocab_size, (3, 9))
    mask = (torch.rand(3, 9) > 0.4).float()
    attention = torch.ones_like(tokens)
    chunked = optimize.token_logprobs(model, tokens, attention, 0.8, mask)
    (chunked * mask).sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    full = torch.log_softmax(model(input_ids=tokens).logits[:, :-1] / 0.8, dim=-1)
    reference = torch.zeros_like(chunked)
    reference[:, 1:] = (
        full.gather(-1, tokens[:, 1:].unsqueeze(-1)).squeeze(-1) * mask[:, 1:]
    )
    reference.sum().backward()
    assert torch.allclose(chunked * mask, reference * mask, atol=1e-5)
    for grad, parameter in zip(grads, model.parameters(), strict=True):
        assert torch.allclose(grad, parameter.grad, atol=1e-5)


def test_bf16_stored_base_weights_keep_fp32_lora_and_close_log_probs(
    tiny_model_dir,
) -> None:
    from trainer.models import load_base, mixed_precision, with_lora
    from trainer.optimize import token_logprobs

    config = TrainConfig(lora_rank=4)
    fp32, _ = load_base(str(tiny_model_dir))
    bf16, _ = load_base(str(tiny_model_dir), precision="bf16")
    fp32, bf16 = with_lora(fp32, config), with_lora(bf16, config)
    lora = [p for n, p in bf16.named_parameters() if "lora_" in n]
    frozen = [p for n, p in bf16.named_parameters() if "lora_" not in n]
    assert lora and all(p.dtype == torch.float32 and p.requires_grad for p in lora)
    assert all(p.dtype == torch.bfloat16 and not p.requires_grad for p in frozen)
    tokens = torch.randint(0, 256, (2, 10))
    mask, attention = torch.ones(2, 10), torch.ones_like(tokens)
    with torch.no_grad():
        with mixed_precision("bf16", fp32):
            autocast_only = token_logprobs(fp32, tokens, attention, 1.0, mask)
        with mixed_precision("bf16", bf16):
            stored = token_logprobs(bf16, tokens, attention, 1.0, mask)
    # Stated tolerance: bf16 storage rounds each weight once (relative error 2^-8).
    assert (stored - autocast_only).abs().max() < 0.05


def test_bf16_mixed_precision_keeps_log_probs_close(tiny_model_dir) -> None:
    from transformers import AutoModelForCausalLM

    from trainer.models import mixed_precision
    from trainer.optimize import token_logprobs

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tokens = torch.randint(0, model.config.vocab_size, (2, 10))
    mask = torch.ones(2, 10)
    attention = torch.ones_like(tokens)
    with torch.no_grad():
        exact = token_logprobs(model, tokens, attention, 1.0, mask)
        with mixed_precision("bf16", model):
            mixed = token_logprobs(model, tokens, attention, 1.0, mask)
        with mixed_precision("fp32", model):
            same = token_logprobs(model, tokens, attention, 1.0, mask)
    assert torch.equal(same, exact)
    assert not torch.equal(mixed, exact) and torch.allclose(mixed, exact, atol=0.1)
    with pytest.raises(TrainerError, match="precision"):
        TrainConfig(precision="fp8")


def test_an_optimizer_step_inside_one_bf16_context_is_seen_by_the_next_pass(
    tiny_model_dir,
) -> None:
    """A long-lived autocast context must not serve stale cached casts of the weights."""
    from trainer.models import load_base, mixed_precision, with_lora
    from trainer.optimize import token_logprobs

    base, _ = load_base(str(tiny_model_dir))
    model = with_lora(base, TrainConfig(lora_rank=4))
    tokens = torch.randint(0, base.config.vocab_size, (1, 10))
    mask, attention = torch.ones(1, 10), torch.ones_like(tokens)
    optimizer = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad], lr=0.1
    )
    with mixed_precision("bf16", model):
        losses = []
        for _ in range(2):
            loss = -token_logprobs(model, tokens, attention, 1.0, mask).sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(float(loss.detach()))
    assert losses[1] != losses[0]  # a stale cached cast gives the very same loss


def test_gradient_checkpointing_off_keeps_activations_and_the_same_gradients(
    tiny_model_dir,
) -> None:
    """--no-gradient-checkpointing trades memory for time only: same loss, same gradients."""
    from trainer.models import load_base, with_lora
    from trainer.optimize import token_logprobs

    tokens = torch.randint(0, 200, (2, 12))
    mask, attention = torch.ones(2, 12), torch.ones_like(tokens)
    gradients = {}
    for on in (True, False):
        base, _ = load_base(str(tiny_model_dir))
        model = with_lora(base, TrainConfig(lora_rank=4, gradient_checkpointing=on))
        recomputing = [
            m
            for m in model.modules()
            if getattr(m, "gradient_checkpointing", False) is True
        ]
        assert bool(recomputing) == on
        model.train()
        (-token_logprobs(model, tokens, attention, 1.0, mask).sum()).backward()
        gradients[on] = [p.grad.clone() for p in model.parameters() if p.requires_grad]
    for with_, without in zip(gradients[True], gradients[False], strict=True):
        torch.testing.assert_close(with_, without)
    with pytest.raises(
        TrainerError, match="gradient-checkpointing must be true or false"
    ):
        TrainConfig(gradient_checkpointing="no")


def test_sampled_log_probs_are_the_policys_own(tiny_model_dir) -> None:
    """The sampler's log-probs equal a fresh pass over the finished sequences, so GRPO's
    first ratio is exactly 1: left padding, rows that stop early and leave the batch,
    and the cached steps change nothing."""
    from trainer.generation import TransformersGenerator
    from trainer.models import load_base, with_lora
    from trainer.optimize import token_logprobs

    base, tokenizer = load_base(str(tiny_model_dir))
    model = with_lora(base, TrainConfig(lora_rank=4))
    torch.manual_seed(0)
    prompts = [
        tokenizer(text)["input_ids"]
        for text in ("a", "a longer prompt here", "mid prompt", "x" * 30)
    ]
    generator = TransformersGenerator(model, tokenizer, batch_size=4)
    generator.stops |= set(tokenizer("abcdefghijklmnopqrst")["input_ids"])  # stop early
    samples = generator.generate(prompts, 12, 0.7)
    assert len({len(s.tokens) for s in samples}) > 1, (
        "rows must stop at different steps"
    )
    for prompt, sample in zip(prompts, samples, strict=True):
        sequence = torch.tensor([prompt + sample.tokens])
        mask = torch.tensor([[0.0] * len(prompt) + [1.0] * len(sample.tokens)])
        with torch.no_grad():
            fresh = token_logprobs(
                model, sequence, torch.ones_like(sequence), 0.7, mask
            )
        assert torch.allclose(
            fresh[0, len(prompt) :], torch.tensor(sample.logprobs), atol=1e-4
        )


@pytest.mark.parametrize("sliding_window", [None, 6], ids=["qwen2", "gemma3-sliding"])
def test_kept_caches_across_turns_change_no_log_prob(tmp_path, sliding_window) -> None:
    """Turn after turn with `resume=True`, each prompt extending the previous call's
    prompt and sample by an answer of its own length: the sampled log-probs still
    equal a fresh pass over the whole sequence, with sequences far past a 6-token
    sliding window, rows that stop early, and identical prompts encoded once; and
    far fewer prompt tokens are encoded than the prompts hold."""
    from trainer.generation import TransformersGenerator
    from trainer.models import load_base, with_lora
    from trainer.optimize import token_logprobs
    from trainer.tiny import build_tiny_model

    folder = build_tiny_model(tmp_path / "m", layers=4, sliding_window=sliding_window)
    base, tokenizer = load_base(str(folder))
    model = with_lora(base, TrainConfig(lora_rank=4))
    torch.manual_seed(0)
    generator = TransformersGenerator(model, tokenizer, batch_size=3)
    generator.stops |= set(tokenizer("abcdefg")["input_ids"])  # rows stop early
    prompts = [
        tokenizer(text)["input_ids"]
        for text in ("a prompt", "a prompt", "a prompt here longer", "a pr")
    ]
    held = 0
    for turn in range(4):
        samples = generator.generate(prompts, 10, 0.7, resume=turn > 0)
        held += sum(len(p) for p in prompts)
        for prompt, sample in zip(prompts, samples, strict=True):
            sequence = torch.tensor([prompt + sample.tokens])
            mask = torch.tensor([[0.0] * len(prompt) + [1.0] * len(sample.tokens)])
            with torch.no_grad():
                fresh = token_logprobs(
                    model, sequence, torch.ones_like(sequence), 0.7, mask
                )
            assert torch.allclose(
                fresh[0, len(prompt) :], torch.tensor(sample.logprobs), atol=1e-4
            )
        prompts = [
            p + s.tokens + tokenizer(f" answer {turn}" * (i + 1))["input_ids"]
            for i, (p, s) in enumerate(zip(prompts, samples, strict=True))
        ]
    assert max(len(p) for p in prompts) > 10 * 6
    assert generator.encoded < 0.6 * held


def test_the_evaluation_plot_draws_every_point_with_its_interval(
    tmp_path, monkeypatch
) -> None:
    """One marker and one error bar per evaluated point, at the measured rates."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    from trainer.plots import plot_evaluations

    points = [
        {"point": "after cold start", "episodes": 30, "success_rate": 0.4,
         "success_ci95": [0.25, 0.58]},
        {"point": "after GRPO", "episodes": 30, "success_rate": 0.6,
         "success_ci95": [0.42, 0.75]},
    ]  # fmt: skip
    metrics = [
        {"iteration": i, "success_rate": 0.5, "dropped_groups": 0.25} for i in (1, 2)
    ]
    drawn = []
    original = plt.Axes.errorbar

    def recording(self, x, y, *args, **kwargs):
        drawn.append((list(x), list(y), kwargs["yerr"]))
        return original(self, x, y, *args, **kwargs)

    monkeypatch.setattr(plt.Axes, "errorbar", recording)
    plot_evaluations(points, metrics, tmp_path / "evaluation.png")
    assert (tmp_path / "evaluation.png").stat().st_size > 1000
    ((x, y, (below, above)),) = drawn
    assert x == [0, 1] and y == [0.4, 0.6]
    assert below == pytest.approx([0.15, 0.18]) and above == pytest.approx([0.18, 0.15])


@pytest.mark.parametrize(
    ("sliding_window", "checkpointing", "micro"),
    [(None, True, 0), (None, False, 2), (6, True, 2), (6, False, 0)],
)
def test_a_shared_prefix_encoded_once_gives_every_row_its_own_gradient(
    tmp_path, sliding_window, checkpointing, micro
) -> None:
    """The update's shared-prefix pass (trainer.shared_prefix) is exact: the same loss,
    gradient and step as running every row whole, with sliding-window layers (the
    prefix longer than the window), checkpointed or not, in one pass or several."""
    import random

    from trainer.losses import grpo_loss
    from trainer.models import load_base, with_lora
    from trainer.optimize import Row, batch_logprobs, optimize
    from trainer.shared_prefix import shared_length
    from trainer.tiny import build_tiny_model

    folder = build_tiny_model(tmp_path / "m", layers=4, sliding_window=sliding_window)
    generator = torch.Generator().manual_seed(1)
    prefix = torch.randint(0, 200, (20,), generator=generator).tolist()
    rows = []
    for extra, trained, advantage in (
        (3, 6, 1.0),
        (5, 9, -0.5),
        (2, 4, 0.7),
        (0, 7, -1.2),
    ):
        tokens = (
            prefix
            + torch.randint(0, 200, (extra + trained,), generator=generator).tolist()
        )
        mask = [0] * (len(prefix) + extra) + [1] * trained
        old = (-torch.rand(len(tokens), generator=generator)).tolist()
        rows.append(Row(tokens, mask, old, advantage))
    assert shared_length([(r.tokens, r.mask) for r in rows]) == len(prefix) - 1
    results = {}
    for share in (False, True):
        base, _ = load_base(str(folder))
        model = with_lora(
            base, TrainConfig(lora_rank=4, gradient_checkpointing=checkpointing)
        )
        optimizer = torch.optim.AdamW(
            [p for p in model.parameters() if p.requires_grad], lr=1e-2
        )
        used = []

        def objective(batch, model=model, used=used):
            used.append(batch.prefix is not None)
            logprobs = batch_logprobs(model, batch, 0.9)
            reference = batch_logprobs(model, batch, 0.9, prefix=False)
            loss, extra = grpo_loss(
                logprobs, batch.old_logprobs, batch.mask, batch.advantages, 0.2,
                reference.detach(), 0.1,
            )  # fmt: skip
            return loss, extra

        stats = optimize(
            model, optimizer, rows, objective, minibatch_size=4, epochs=2,
            max_grad_norm=1.0, pad=0, rng=random.Random(0), desc="test",
            micro_batch_size=micro, share_prefix=share,
        )  # fmt: skip
        assert set(used) == {share}
        weights = [p.detach().clone() for p in model.parameters() if p.requires_grad]
        results[share] = (stats, weights)
    (whole, whole_weights), (shared, shared_weights) = results[False], results[True]
    assert shared["epoch_losses"] == pytest.approx(whole["epoch_losses"], abs=1e-5)
    assert shared["grad_norm"] == pytest.approx(whole["grad_norm"], rel=1e-4)
    for one, other in zip(whole_weights, shared_weights, strict=True):
        torch.testing.assert_close(one, other, rtol=1e-4, atol=1e-6)


def test_the_shared_prefix_stops_before_the_first_trained_token() -> None:
    from trainer.shared_prefix import shared_length

    assert (
        shared_length(
            [([1, 2, 3, 4, 5], [0, 0, 0, 1, 1]), ([1, 2, 3, 4, 6], [0, 0, 0, 0, 1])]
        )
        == 2
    )
    assert (
        shared_length([([1, 2, 3, 4], [0, 0, 0, 1]), ([1, 9, 3, 4], [0, 0, 0, 1])]) == 1
    )
    assert shared_length([([1, 2], [1, 1]), ([1, 2], [1, 1])]) == 0
    assert shared_length([([1, 2, 3], [0, 0, 0]), ([1, 2, 3], [0, 0, 0])]) == 2


def test_rows_run_whole_where_transformers_would_drop_the_prefix_cache(
    tiny_model_dir, monkeypatch
) -> None:
    """Before `_can_checkpoint_with_cache`, checkpointed layers drop any cache: the
    suffixes would attend to nothing, so the prefix is not shared there."""
    from transformers.modeling_layers import GradientCheckpointingLayer

    from trainer.models import load_base, with_lora
    from trainer.shared_prefix import supported

    base, _ = load_base(str(tiny_model_dir))
    checkpointed = with_lora(base, TrainConfig(lora_rank=4))
    assert supported(checkpointed)
    monkeypatch.delattr(GradientCheckpointingLayer, "_can_checkpoint_with_cache")
    assert not supported(checkpointed)
    base, _ = load_base(str(tiny_model_dir))
    plain = with_lora(base, TrainConfig(lora_rank=4, gradient_checkpointing=False))
    assert supported(plain)


def _moved_then(event):
    """A model, and work that moves its weights, then `event()` (a signal, say)."""
    model = torch.nn.Linear(2, 2)
    before = [p.detach().clone() for p in model.parameters()]

    def work() -> str:
        with torch.no_grad():
            for weight in model.parameters():
                weight.add_(1.0)
        event()
        return "finished"

    return model, before, work


def _sigterm() -> None:
    os.kill(os.getpid(), signal.SIGTERM)


def _swallowed_sigterm() -> None:
    try:  # environment code with a bare except
        _sigterm()
    except BaseException:  # noqa: BLE001, S110 - what careless user code does
        pass


@pytest.mark.parametrize("event", [_sigterm, _swallowed_sigterm])
def test_a_first_signal_during_an_iteration_drops_it_and_puts_the_weights_back(
    event,
) -> None:
    model, before, work = _moved_then(event)
    with grpo._Stop(droppable=True) as stop:
        assert stop.unless_stopped(model, work) is None
    assert stop.signal == signal.SIGTERM
    for weight, saved in zip(model.parameters(), before, strict=True):
        assert torch.equal(weight, saved)


def test_a_signal_that_came_before_the_iteration_drops_it_before_it_starts() -> None:
    model, _, work = _moved_then(lambda: None)
    ran = []
    with grpo._Stop(droppable=True) as stop:
        _sigterm()
        assert stop.unless_stopped(model, lambda: ran.append(work())) is None
    assert ran == []


def test_with_several_ranks_a_signal_lets_the_iteration_finish() -> None:
    model, before, work = _moved_then(_sigterm)
    with grpo._Stop(droppable=False) as stop:
        assert stop.unless_stopped(model, work) == "finished"
    assert stop.signal == signal.SIGTERM
    assert not torch.equal(next(model.parameters()), before[0])


def test_a_second_signal_stops_at_once() -> None:
    with grpo._Stop(droppable=True), pytest.raises(Interrupted):
        _sigterm()
        _sigterm()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


# What Qwen2.5-Coder-0.5B-Instruct wrote on the phone environments (greedy).
QWEN_FENCED = (
    '```json\n{\n  "name": "get_current_timestamp",\n  "arguments": {\n'
    '    "timestamp": 1639984000\n  }\n}\n```'
)
QWEN_BARE = (
    '{"name": "add_reminder", "arguments": {"content": "Pick up the dry cleaning", '
    '"reminder_timestamp": "1609459200", "latitude": "37.7749"}}'
)


@pytest.mark.parametrize(
    ("text", "name", "arguments"),
    [
        (QWEN_FENCED, "get_current_timestamp", {"timestamp": 1639984000}),
        (QWEN_BARE, "add_reminder", {"content": "Pick up the dry cleaning",
                                     "reminder_timestamp": "1609459200", "latitude": "37.7749"}),
        ('```\n{"name": "f", // the tool\n "arguments": {"url": "http://x/y",}}\n```',
         "f", {"url": "http://x/y"}),
        ('{"name": "f", /* note */ "arguments": "{\\"a\\": 1}"}', "f", {"a": 1}),
        ('send(phone_number="+1234", content="hi")', "send",
         {"phone_number": "+1234", "content": "hi"}),
        ('{"type": "function", "function": {"name": "g", "arguments": {}}}', "g", {}),
    ],
)  # fmt: skip
def test_tool_calls_are_read_in_the_forms_small_models_write(
    text: str, name: str, arguments: dict
) -> None:
    assert parse_tool_calls(text)[1] == [{"name": name, "arguments": arguments}]


def test_a_fenced_list_gives_every_call_and_prose_stays_text() -> None:
    text = 'Sure:\n```json\n[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"x": 1}}]\n```'
    content, calls = parse_tool_calls(text)
    assert content == "Sure:" and [c["name"] for c in calls] == ["a", "b"]
    for prose in (
        "I will call you (later).",
        "```python\nprint(1)\n```",
        "f(1, 2)",
        "{" * 5000,
    ):
        assert parse_tool_calls(prose)[1] == []


def test_temperature_0_is_greedy_for_evaluation_and_refused_for_training() -> None:
    from trainer.config import TrainConfig
    from trainer.rollout import RolloutLimits

    assert RolloutLimits(temperature=0.0).temperature == 0
    with pytest.raises(TrainerError, match="greedy"):
        TrainConfig(temperature=0.0)


def test_env_given_twice_is_a_uniform_mixture_whose_gold_policy_plays() -> None:
    from trainer.envs import MixtureHandle, resolve_envs

    folders = [
        str(ROOT / "generated_envs" / n)
        for n in ("date_time_recovery", "permission_error_recovery")
    ]
    handle = resolve_envs(folders)
    assert isinstance(handle, MixtureHandle) and handle.capability["envs"] == [
        "date_time_recovery",
        "permission_error_recovery",
    ]
    env = handle.make()
    played = set()
    for seed in range(4):
        episode = __import__(handle.package).run_episode(env, "gold", seed)
        assert episode.success
        played.add(env.active.family.name)
    assert played == {"date_time_recovery", "permission_error_recovery"}
    with pytest.raises(TrainerError, match="twice"):
        resolve_envs([folders[0], folders[0]])


def test_every_number_of_the_config_has_one_range_and_one_help() -> None:
    """A setting's default lives on TrainConfig, its range and help in SETTINGS only."""
    from dataclasses import fields

    from trainer.cli import ROLLOUT_SETTINGS, TRAIN_SETTINGS
    from trainer.settings import SETTINGS

    numbers = {f.name for f in fields(TrainConfig) if f.type in ("int", "float")}
    assert numbers <= set(SETTINGS)
    assert set(SETTINGS) - numbers == {"episodes", "concurrent_episodes"}  # eval only
    assert numbers == set(TRAIN_SETTINGS) | set(ROLLOUT_SETTINGS)
    assert all(s.help and s.allowed and s.low <= s.high for s in SETTINGS.values())

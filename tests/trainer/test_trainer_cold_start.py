"""Cold start: gold demonstrations in the rollout's token space, and supervised epochs."""

from __future__ import annotations

import importlib
import json
import signal

import pytest
import torch
from safetensors.torch import load_file

from tests.conftest import NO_TOOL_ROLE, ROOT
from trainer import checkpoint, cold_start, grpo
from trainer.chat import ChatFormat, tool_listing
from trainer.envs import resolve_env
from trainer.errors import TrainerError
from trainer.generation import TransformersGenerator
from trainer.models import load_base, with_lora
from trainer.rollout import Sample, collect
from trainer.settings import EVAL_SEED_BASE, RolloutLimits, TrainConfig

PHONE = str(ROOT / "generated_envs" / "permission_error_recovery")


class Replay:
    """A generator that samples, turn after turn, the given token runs."""

    def __init__(self, runs: list[list[int]]) -> None:
        self.runs = runs

    def generate(self, prompts, max_new_tokens, temperature, resume=False):
        assert len(prompts) == 1
        run = self.runs.pop(0)
        return [Sample(run, [0.0] * len(run))]


def _runs(tokens: list[int], mask: list[int]) -> list[list[int]]:
    """The maximal runs of mask-1 tokens: one per assistant turn."""
    runs: list[list[int]] = []
    for index, (token, marked) in enumerate(zip(tokens, mask, strict=True)):
        if marked:
            if index == 0 or not mask[index - 1]:
                runs.append([])
            runs[-1].append(token)
    return runs


@pytest.mark.parametrize(
    ("template", "tool_format"), [(None, "json"), (NO_TOOL_ROLE, "compact")]
)
def test_a_demonstration_is_exactly_what_a_rollout_of_it_samples(
    tiny_tokenizer, template, tool_format
) -> None:
    if template is not None:
        tiny_tokenizer.chat_template = template
    handle = resolve_env(PHONE)
    seed = 11
    env = handle.make()
    tools = env.reset(seed=seed)[1]["tools"]
    package = importlib.import_module(handle.package)
    gold = package.run_episode(env, "gold", seed).info["messages"]
    chat = ChatFormat(tiny_tokenizer, tools, tool_format)
    assert chat.native is (template is None)
    row = cold_start.demonstration(chat, gold)
    tokens, mask = row.tokens, row.mask

    ((episode,),) = collect(
        handle,
        Replay(_runs(tokens, mask)),
        tiny_tokenizer,
        [seed],
        1,
        RolloutLimits(max_turns=20, max_total_tokens=100_000),
        tool_format,
    )
    assert episode.success and episode.reward == 1.0
    assert episode.tokens == tokens and episode.mask == mask


def test_compact_tool_listing_is_one_signature_per_tool() -> None:
    tool = {
        "type": "function",
        "function": {
            "name": "add_reminder",
            "description": "Add a reminder.",
            "parameters": {
                "type": "object",
                "properties": {
                    "content": {"type": "string", "description": "What."},
                    "latitude": {"type": "number", "description": "Where."},
                },
                "required": ["content"],
            },
        },
    }
    assert (
        tool_listing([tool], "compact")
        == "- add_reminder(content: string, latitude?: number): Add a reminder."
    )
    assert json.loads(tool_listing([tool], "json")) == tool


def test_demonstration_seeds_are_training_seeds() -> None:
    seeds = cold_start.demonstration_seeds(5)
    assert len(set(seeds)) == 5 and all(0 <= s < EVAL_SEED_BASE for s in seeds)


def _train(model_dir, out, iterations, resume=False, **overrides):
    config = TrainConfig(
        iterations=iterations,
        groups=1,
        group_size=2,
        max_new_tokens=4,
        max_turns=1,
        max_total_tokens=100_000,
        lora_rank=4,
        minibatch_size=2,
        cold_start=4,
        cold_start_epochs=3,
        cold_start_learning_rate=2e-2,
        tool_format="compact",
    ).replace(**overrides)
    base, tokenizer = load_base(str(model_dir), chat_template="chatml")
    torch.manual_seed(0)
    model = with_lora(base, config)
    seen = []
    outcome = grpo.train(
        config,
        resolve_env(PHONE),
        model,
        tokenizer,
        TransformersGenerator(model, tokenizer),
        out,
        resume=resume,
        on_iteration=lambda i, row: seen.append((i, row)),
    )
    metrics = outcome.metrics
    return metrics, seen


def test_cold_start_lowers_the_loss_once_and_resume_skips_it(
    tiny_model_dir, tmp_path, monkeypatch
) -> None:
    out = tmp_path / "run"
    metrics, seen = _train(tiny_model_dir, out, 1)
    losses = json.loads((out / "cold_start.json").read_text())["epoch_losses"]
    # a random tiny model's logits are nearly uniform, so the drop is small (and
    # epochs shuffle the demonstrations, so it need not be monotone)
    assert len(losses) == 3 and losses[2] < losses[0]
    assert seen[0] == (0, {"cold_start_epoch_losses": losses}) and len(metrics) == 1

    def again(*args, **kwargs):
        raise AssertionError("a resumed run must not repeat the cold start")

    monkeypatch.setattr(cold_start, "run", again)
    metrics, seen = _train(tiny_model_dir, out, 2, resume=True)
    assert len(metrics) == 2 and [i for i, _ in seen] == [2]


def _adapter(out):
    return load_file(out / "checkpoint" / "adapter" / "adapter_model.safetensors")


def test_a_cold_start_stopped_after_an_epoch_goes_on_from_it_as_if_never_stopped(
    tiny_model_dir, tmp_path, monkeypatch
) -> None:
    _, straight = _train(tiny_model_dir, tmp_path / "straight", 1)
    out = tmp_path / "stopped"
    keep = checkpoint.save_cold_start

    def signal_after_the_first(*args, **kwargs):
        keep(*args, **kwargs)
        signal.raise_signal(signal.SIGTERM)

    monkeypatch.setattr(checkpoint, "save_cold_start", signal_after_the_first)
    metrics, seen = _train(tiny_model_dir, out, 1)
    assert metrics == [] and seen == []  # no iteration 0: the cold start is not done
    assert checkpoint.resumable(out) and not checkpoint.exists(out)
    state = json.loads((out / checkpoint.COLD_START / "state.json").read_text())
    assert state["epoch_losses"] == straight[0][1]["cold_start_epoch_losses"][:1]
    monkeypatch.setattr(checkpoint, "save_cold_start", keep)
    _, resumed = _train(tiny_model_dir, out, 1, resume=True)
    assert resumed[0] == straight[0]  # the same three epoch losses
    assert not (out / checkpoint.COLD_START).exists()  # iteration 0 replaced it
    weights, expected = _adapter(out), _adapter(tmp_path / "straight")
    assert weights.keys() == expected.keys()
    for key in weights:
        torch.testing.assert_close(weights[key], expected[key])


def test_grpo_goes_on_from_a_cold_start_alone_under_its_own_settings(
    tiny_model_dir, tmp_path
) -> None:
    """`iterations 0` is the cold start alone; GRPO's settings are free after it
    (chosen on dev from one cold start), the cold start's are not."""
    out, once = tmp_path / "run", {"cold_start_epochs": 1}
    metrics, seen = _train(tiny_model_dir, out, 0, **once)
    assert metrics == [] and [i for i, _ in seen] == [0]
    assert json.loads((out / "checkpoint" / "state.json").read_text())["iteration"] == 0
    with pytest.raises(
        TrainerError, match=r"other settings \(cold_start_learning_rate\)"
    ):
        _train(tiny_model_dir, out, 1, True, **once, cold_start_learning_rate=1e-3)
    metrics, seen = _train(
        tiny_model_dir, out, 1, True, **once, temperature=0.5, learning_rate=3e-3
    )
    assert len(metrics) == 1 and [i for i, _ in seen] == [1]
    state = json.loads((out / "checkpoint" / "state.json").read_text())
    assert state["iteration"] == 1 and state["config"]["temperature"] == 0.5
    lr = torch.load(out / "checkpoint" / "optimizer.pt")["param_groups"][0]["lr"]
    assert lr == 3e-3  # GRPO's optimizer started with this run's rate


def test_cold_start_settings_are_checked() -> None:
    with pytest.raises(TrainerError, match="trains nothing"):
        TrainConfig(iterations=0)
    with pytest.raises(TrainerError, match="cold-start"):
        TrainConfig(cold_start=-1)
    with pytest.raises(TrainerError, match="tool-format"):
        TrainConfig(tool_format="yaml")


class _Recording(TransformersGenerator):
    """The transformers sampler, recording which adapter a separate sampler would load."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.loaded: list[tuple[str, int]] = []

    def use_adapter(self, path: str, version: int) -> None:
        self.loaded.append((path, version))


def test_a_separate_sampler_takes_the_cold_started_adapter_in_the_first_iteration(
    tiny_model_dir, tmp_path
) -> None:
    config = TrainConfig(
        iterations=2, groups=1, group_size=2, max_new_tokens=4, max_turns=1,
        max_total_tokens=100_000, lora_rank=4, minibatch_size=2, cold_start=2,
        cold_start_epochs=1, tool_format="compact",
    )  # fmt: skip
    base, tokenizer = load_base(str(tiny_model_dir), chat_template="chatml")
    model = with_lora(base, config)
    sampler = _Recording(model, tokenizer)
    out = tmp_path / "run"
    grpo.train(config, resolve_env(PHONE), model, tokenizer, sampler, out)
    adapter = str(out / "checkpoint" / "adapter")
    assert sampler.loaded == [(adapter, 1), (adapter, 2)]


def test_demonstrations_spell_markup_tokens_and_write_argument_objects(
    tiny_model_dir,
) -> None:
    """A reply's target reaches `<tool_call>` through ordinary tokens (an added token's
    row may be untrained), and a `| tojson` template gets arguments as JSON objects."""
    from transformers import AutoTokenizer

    from trainer.parsing import parse_tool_calls
    from trainer.tiny import CHAT_TEMPLATE

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tokenizer.chat_template = CHAT_TEMPLATE.replace(
        "{{ call.function.arguments }}", "{{ call.function.arguments | tojson }}"
    )
    handle = resolve_env(PHONE)
    env = handle.make()
    tools = env.reset(seed=11)[1]["tools"]
    gold = importlib.import_module(handle.package).run_episode(env, "gold", 11)
    messages = gold.info["messages"]
    chat = ChatFormat(tokenizer, tools, "json")
    assert chat.native and chat.argument_objects
    row = cold_start.demonstration(chat, messages)
    runs = _runs(row.tokens, row.mask)
    markup = set(tokenizer.convert_tokens_to_ids(["<tool_call>", "</tool_call>"]))
    assert not markup & {token for run in runs for token in run}
    replies = [m for m in messages if m["role"] == "assistant"]
    assert len(runs) == len(replies)
    for run, reply in zip(runs, replies, strict=True):
        assert run[-1] == tokenizer.eos_token_id
        text = tokenizer.decode(run[:-1])
        assert '\\"' not in text  # not a double-encoded arguments string
        _, calls = parse_tool_calls(text)
        assert [(c["name"], c["arguments"]) for c in calls] == [
            (c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in reply.get("tool_calls") or []
        ]
    # and it is still exactly what a rollout sampling those tokens builds
    ((episode,),) = collect(
        handle, Replay(runs), tokenizer, [11], 1,
        RolloutLimits(max_turns=20, max_total_tokens=100_000), "json",
    )  # fmt: skip
    assert episode.success and episode.tokens == row.tokens


def test_a_template_that_writes_arguments_as_is_keeps_the_strings(
    tiny_tokenizer,
) -> None:
    chat = ChatFormat(tiny_tokenizer, [{"type": "function", "function": {"name": "f"}}])
    assert chat.native and not chat.argument_objects
    call = {"id": "c", "type": "function"}
    call["function"] = {"name": "f", "arguments": '{"on": true}'}
    text = chat.render(
        [{"role": "assistant", "content": "", "tool_calls": [call]}], False
    )
    assert '"arguments": {"on": true}' in text

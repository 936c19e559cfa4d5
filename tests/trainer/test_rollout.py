"""Rollouts: sampled-token masks, progress, faulty environments, kept caches, mixtures."""

from __future__ import annotations

import json
import sys
import types

import pytest
import torch

from tests.conftest import ROOT, assert_fresh_logprobs
from trainer.envs import resolve_env
from trainer.errors import TrainerError
from trainer.generation import VLLMGenerator
from trainer.rollout import Ending, Sample, collect
from trainer.settings import RolloutLimits, TrainConfig


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


def test_episodes_of_several_environments_share_one_collect(tiny_tokenizer) -> None:
    """One environment per seed: each episode opens on its own environment."""
    envs = [
        resolve_env(str(ROOT / "generated_envs" / name))
        for name in ("date_time_recovery", "permission_error_recovery")
    ]
    limits = RolloutLimits(max_turns=2, max_total_tokens=100_000)
    generator = ScriptedGenerator(tiny_tokenizer, ["All set."])
    groups = collect(envs, generator, tiny_tokenizer, [5, 5], 1, limits)
    for env, (episode,) in zip(envs, groups, strict=True):
        opening = json.loads(env.make().reset(seed=5)[0])
        assert episode.messages[: len(opening)] == opening
    assert groups[0][0].messages[:2] != groups[1][0].messages[:2]
    with pytest.raises(TrainerError, match="2 environments for 1 seeds"):
        collect(envs, generator, tiny_tokenizer, [5], 1, limits)


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
    # shown in a log file too, not only on a terminal: a long job in a log is seen moving
    assert shown.n == 6 and shown.closed and shown.kwargs["disable"] is False
    assert quiet.kwargs["disable"] is True


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


@pytest.mark.parametrize("sliding_window", [None, 6], ids=["qwen2", "gemma3-sliding"])
def test_kept_caches_across_turns_change_no_log_prob(tmp_path, sliding_window) -> None:
    """Turn after turn with `resume=True`, each prompt extending the previous call's
    prompt and sample by an answer of its own length: the sampled log-probs still
    equal a fresh pass over the whole sequence, with sequences far past a 6-token
    sliding window, rows that stop early, and identical prompts encoded once; and
    far fewer prompt tokens are encoded than the prompts hold."""
    from trainer.generation import TransformersGenerator
    from trainer.models import load_base, with_lora
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
            assert_fresh_logprobs(model, prompt, sample, 0.7)
        prompts = [
            p + s.tokens + tokenizer(f" answer {turn}" * (i + 1))["input_ids"]
            for i, (p, s) in enumerate(zip(prompts, samples, strict=True))
        ]
    assert max(len(p) for p in prompts) > 10 * 6
    assert generator.encoded < 0.6 * held


def test_a_draw_follows_the_distribution_and_never_picks_an_impossible_token() -> None:
    """The sampler's inverse-CDF draw: token frequencies over 40,000 rows match the
    softmax within 0.01, and a token of probability 0 (log-prob -inf) never comes."""
    from trainer.generation import _draw

    torch.manual_seed(0)
    logits = torch.randn(50) * 2
    logits[[0, 17, 49]] = float("-inf")
    logprobs = torch.log_softmax(logits, -1)
    drawn = _draw(logprobs.expand(40_000, -1)).squeeze(-1)
    frequencies = torch.bincount(drawn, minlength=50) / len(drawn)
    assert frequencies[[0, 17, 49]].sum() == 0
    assert (frequencies - logprobs.exp()).abs().max() < 0.01


def _play(flight, prompts: list[list[int]], turns: int, tokenizer, live=None):
    """Each prompt an episode of `turns` turns, its next prompt its sequence plus an
    answer of its own length; returns each episode's turns as (prompt, sample)."""
    played: dict[int, list] = {key: [] for key in range(len(prompts))}
    for key, prompt in enumerate(prompts):
        flight.submit(key, prompt, 10)
    current = dict(enumerate(prompts))
    while flight.live:
        for key, sample in flight.step():
            played[key].append((current[key], sample))
            if len(played[key]) < turns:
                answer = tokenizer(f" answer {len(played[key])}" * (key + 1))
                current[key] = current[key] + sample.tokens + answer["input_ids"]
                flight.submit(key, current[key], 10)
        if live is not None:
            live.append(flight.rows.live)
    return played


def test_a_configuration_is_refused_where_nothing_can_apply_it(
    tiny_model_dir, tiny_tokenizer
) -> None:
    """A turn naming its configuration needs a generator with `configure` (a lockstep
    generator, or a stream without it, would decode it under whatever is active)."""
    from trainer.generation import TransformersGenerator
    from trainer.models import load_base
    from trainer.rollout import Lockstep

    model, _ = load_base(str(tiny_model_dir))
    plain = TransformersGenerator(model, tiny_tokenizer)
    for turns in (plain.stream(0.0), Lockstep(plain, 0.0)):
        with pytest.raises(TrainerError, match="configur"):
            turns.submit("a", [1, 2, 3], 4, (("adapter", 1.0),))
    seen = []
    configured = TransformersGenerator(model, tiny_tokenizer, configure=seen.append)
    stream = configured.stream(0.0)
    stream.submit("a", [1, 2, 3], 2, (("adapter", 1.0),))
    while stream.live:
        stream.step()
    # every forward pass was told its rows' configurations
    assert seen and all(rows == [(("adapter", 1.0),)] for rows in seen)


def test_a_first_turn_leaves_what_it_shares_to_the_queued_ones(
    tiny_model_dir, tiny_tokenizer
) -> None:
    """A configuration's first row joining alone keeps the prefix (the system prompt)
    it shares with the next queued row of that configuration, which then encodes
    only the rest; a group's sibling gets the whole prompt but its last token."""
    from trainer.generation import MIN_HELD, DecodeStream, TransformersGenerator, _held
    from trainer.models import load_base

    system = list(range(10, 10 + 2 * MIN_HELD))
    first, second, other = system + [5, 6], system + [7, 8, 9], system + [5, 6]
    queued = [("b", second, 2, "B"), ("c", other, 2, "A")]
    assert _held([("a", first, 2, "B")], queued) == [("B", system)]
    assert _held([("c0", other, 2, "A")], queued) == [("A", other[:-1])]
    assert _held([("a", first, 2, "C")], queued) == []
    assert _held([("a", [1] * (MIN_HELD - 1) + [2], 2, "B")], queued) == []
    model, _ = load_base(str(tiny_model_dir))
    generator = TransformersGenerator(
        model, tiny_tokenizer, configure=lambda rows: None
    )
    stream = DecodeStream(generator, 0.0, [])
    stream.admit([("a", first, 1)], hold=[("B", system)], configs=["B"])
    assert generator.encoded == len(first)
    stream.admit([("b", second, 1)], configs=["B"])
    assert generator.encoded == len(first) + len(second) - len(system)
    stream.admit([("c", other, 1)], configs=["A"])  # another configuration: whole
    assert generator.encoded == len(first) + len(second) - len(system) + len(other)


@pytest.mark.parametrize("sliding_window", [None, 6], ids=["qwen2", "gemma3-sliding"])
def test_turns_decoded_continuously_match_lockstep_and_keep_the_batch_full(
    tmp_path, sliding_window
) -> None:
    """`EpisodeTurns`: an episode's next turn joins the running batch as its last
    one ends. Greedy, every episode writes what lockstep rounds write; sampled, each
    log-prob equals a fresh pass over the whole sequence; no more than `batch_size`
    rows decode at once; first turns that join late start from the prefix encoded
    for the first ones, and far fewer prompt tokens are encoded than the prompts hold."""
    from trainer.generation import TransformersGenerator
    from trainer.models import load_base, with_lora
    from trainer.rollout import Lockstep
    from trainer.tiny import build_tiny_model

    folder = build_tiny_model(tmp_path / "m", layers=4, sliding_window=sliding_window)
    base, tokenizer = load_base(str(folder))
    model = with_lora(base, TrainConfig(lora_rank=4))
    system = "a shared system prompt with the tools listed " * 3
    prompts = [
        tokenizer(system + text)["input_ids"]
        for text in ("one", "one", "two is longer", "two is longer", "five")
    ]

    def generator() -> TransformersGenerator:
        made = TransformersGenerator(model, tokenizer, batch_size=3)
        made.stops |= set(tokenizer("abcdefg")["input_ids"])  # turns of other lengths
        return made

    rounds = generator()
    lockstep = _play(Lockstep(rounds, 0.0), prompts, 4, tokenizer)
    continuous = generator()
    live: list[int] = []
    greedy = _play(continuous.stream(0.0), prompts, 4, tokenizer, live)
    for key in lockstep:
        assert [s.tokens for _, s in greedy[key]] == [
            s.tokens for _, s in lockstep[key]
        ], key
    assert max(live) == 3 and live[-1] == 0
    # the two first turns that joined late started from what the first admission
    # kept: the third task's prompt for its sibling (its last token encoded),
    # the system prompt for the fifth; lockstep's second round encoded both again
    assert continuous.encoded == rounds.encoded - len(prompts[3]) + 1

    torch.manual_seed(0)
    sampling = generator()
    played = _play(sampling.stream(0.7), prompts, 4, tokenizer)
    held = 0
    for turns in played.values():
        for prompt, sample in turns:
            held += len(prompt)
            assert_fresh_logprobs(model, prompt, sample, 0.7)
    assert sampling.encoded < 0.5 * held


@pytest.mark.parametrize("sliding_window", [None, 6], ids=["qwen2", "gemma3-sliding"])
def test_a_pool_of_kept_caches_serves_conversations_in_any_order(
    tmp_path, sliding_window
) -> None:
    """With `keep_tokens` the kept sequences outlive the next call (a server's
    conversations return in any order), bounded in tokens; a prompt that diverges
    from a kept sequence part-way (an earlier turn re-rendered) reuses the shared
    prefix where no sliding window dropped it; the log-probs equal a fresh pass."""
    from trainer.generation import TransformersGenerator
    from trainer.models import load_base
    from trainer.tiny import build_tiny_model

    folder = build_tiny_model(tmp_path / "m", layers=2, sliding_window=sliding_window)
    model, tokenizer = load_base(str(folder))
    generator = TransformersGenerator(model, tokenizer, batch_size=4, keep_tokens=400)
    first = [tokenizer(t)["input_ids"] for t in ("the first chat", "another one here")]
    generator.generate(first, 8, 0.0)
    assert len(generator.kept) == 2
    generator.generate([tokenizer("a third chat alone")["input_ids"]], 8, 0.0)
    assert len(generator.kept) == 3  # the first call's are still kept
    before = generator.encoded
    later = [first[0][:-1] + tokenizer(" diverges after all")["input_ids"]]
    (sample,) = generator.generate(later, 8, 0.0)
    assert_fresh_logprobs(model, later[0], sample, 1.0)
    encoded = generator.encoded - before
    assert encoded == (
        len(later[0]) if sliding_window else len(later[0]) - len(first[0]) + 1
    )
    small = TransformersGenerator(model, tokenizer, keep_tokens=len(first[0]) + 12)
    small.generate(first, 8, 0.0)
    assert sum(len(k.tokens) for k in small.kept) <= len(first[0]) + 12


@pytest.mark.parametrize("sliding_window", [None, 6], ids=["qwen2", "gemma3-sliding"])
def test_rows_that_join_a_running_stream_decode_as_they_would_alone(
    tmp_path, sliding_window
) -> None:
    """Continuous batching: rows admitted while others are mid-way, each with its own
    budget, sample the tokens and log-probs they would sample decoded alone."""
    from trainer.generation import DecodeStream, TransformersGenerator
    from trainer.models import load_base
    from trainer.tiny import build_tiny_model

    folder = build_tiny_model(tmp_path / "m", layers=2, sliding_window=sliding_window)
    model, tokenizer = load_base(str(folder))
    prompts = {
        name: tokenizer(text)["input_ids"]
        for name, text in (("a", "first prompt"), ("b", "a much longer second prompt"),
                           ("c", "third"))
    }  # fmt: skip
    budgets = {"a": 12, "b": 5, "c": 9}
    generator = TransformersGenerator(model, tokenizer, stop_strings=())
    stream = DecodeStream(generator, 0.0, [])
    done = dict(stream.admit([("a", prompts["a"], budgets["a"])]))
    for _ in range(3):
        done.update(stream.step())
    done.update(stream.admit([(k, prompts[k], budgets[k]) for k in ("b", "c")]))
    assert stream.live == 3
    while stream.live:
        done.update(stream.step())
    for name, prompt in prompts.items():
        alone = TransformersGenerator(model, tokenizer, stop_strings=()).generate(
            [prompt], budgets[name], 0.0
        )[0]
        assert done[name].tokens == alone.tokens, name
        assert len(alone.tokens) == budgets[name]  # random weights: no stop token
        assert torch.allclose(
            torch.tensor(done[name].logprobs), torch.tensor(alone.logprobs), atol=1e-4
        )
    assert len(generator.kept) == 3
    (nothing,) = generator.generate([prompts["a"]], 0, 0.0)
    assert nothing.tokens == [] and nothing.logprobs == []
    # rows at their own temperatures in one stream: the greedy row is still greedy
    mixed = DecodeStream(
        TransformersGenerator(model, tokenizer, stop_strings=()), 0.0, []
    )
    rows = [(k, prompts[k], budgets[k]) for k in ("a", "b")]
    together = dict(mixed.admit(rows, [0.0, 1.0]))
    while mixed.live:
        together.update(mixed.step())
    greedy = TransformersGenerator(model, tokenizer, stop_strings=()).generate(
        [prompts["a"]], budgets["a"], 0.0
    )[0]
    assert together["a"].tokens == greedy.tokens
    assert len(together["b"].tokens) == budgets["b"]


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

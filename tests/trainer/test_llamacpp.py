"""llama.cpp decoding (`--backend llamacpp`): the tiny model written as a GGUF file
decodes the same greedy turns as transformers, a PEFT adapter converted to a GGUF
LoRA changes them exactly as peft does, and `trainer eval` plays through it.
Needs llama-cpp-python (the `llamacpp` extra; CI builds it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from trainer.cli import main as trainer_main
from trainer.errors import TrainerError
from trainer.generation import TransformersGenerator
from trainer.settings import TrainConfig
from trainer.tiny import TASK_ID, register_task, write_tiny_gguf

llama_cpp = pytest.importorskip("llama_cpp")

PROMPTS = ["<|im_start|>user\nhello there<|im_end|>\n<|im_start|>assistant\n", "abc"]


@pytest.fixture(scope="module")
def tiny_gguf(tiny_model_dir: Path, tmp_path_factory) -> Path:
    """The session's tiny model, copied and written beside itself as tiny.gguf."""
    import shutil

    folder = tmp_path_factory.mktemp("gguf") / "model"
    shutil.copytree(tiny_model_dir, folder)
    return write_tiny_gguf(folder)


@pytest.fixture(scope="module")
def adapter(tiny_model_dir: Path, tmp_path_factory) -> Path:
    """A LoRA adapter on the tiny model whose B is not zero, so it changes the output."""
    return _adapter(tiny_model_dir, tmp_path_factory, 0)


def _adapter(tiny_model_dir: Path, tmp_path_factory, layers: int) -> Path:
    """A LoRA adapter (on the top `layers` layers; 0: every one) with B not zero."""
    from trainer.models import load_base, with_lora

    base, _ = load_base(str(tiny_model_dir))
    config = TrainConfig(lora_rank=4, lora_alpha=8.0, lora_layers=layers)
    model = with_lora(base, config)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, weight in model.named_parameters():
            if "lora_B" in name:
                weight.copy_(torch.randn(weight.shape, generator=generator) * 0.5)
    folder = tmp_path_factory.mktemp("adapter") / "adapter"
    model.save_pretrained(folder)
    return folder


def _greedy_transformers(folder: Path, adapter: Path | None) -> list[list[int]]:
    from trainer.models import load_adapter, load_base

    base, tokenizer = load_base(str(folder))
    policy = load_adapter(base, str(adapter)) if adapter else base
    generator = TransformersGenerator(policy, tokenizer)
    prompts = [tokenizer.encode(p) for p in PROMPTS]
    return [s.tokens for s in generator.generate(prompts, 12, 0.0)]


def _greedy_llamacpp(gguf: Path, adapter: Path | None) -> list[list[int]]:
    from trainer.llamacpp import open_generator
    from trainer.models import load_tokenizer

    tokenizer = load_tokenizer(str(gguf))
    generator = open_generator(str(gguf), tokenizer, [adapter] if adapter else [])
    prompts = [tokenizer.encode(p) for p in PROMPTS]
    # twice: the second pass reuses the KV cache of shared prefixes
    first = [s.tokens for s in generator.generate(prompts, 12, 0.0)]
    assert [s.tokens for s in generator.generate(prompts, 12, 0.0)] == first
    return first


def test_greedy_turns_match_transformers_on_the_same_weights(tiny_gguf: Path) -> None:
    expected = _greedy_transformers(tiny_gguf.parent, None)
    assert _greedy_llamacpp(tiny_gguf, None) == expected
    assert all(expected)


def test_a_converted_adapter_changes_the_turns_as_peft_does(
    tiny_gguf: Path, adapter: Path
) -> None:
    expected = _greedy_transformers(tiny_gguf.parent, adapter)
    assert expected != _greedy_transformers(tiny_gguf.parent, None)
    assert _greedy_llamacpp(tiny_gguf, adapter) == expected


def test_an_adapter_of_the_top_layers_converts_and_plays_as_peft_does(
    tiny_gguf: Path, tmp_path_factory
) -> None:
    """--lora-layers: the GGUF LoRA holds the adapted layers' tensors only."""
    top = _adapter(tiny_gguf.parent, tmp_path_factory, 1)
    expected = _greedy_transformers(tiny_gguf.parent, top)
    assert expected != _greedy_transformers(tiny_gguf.parent, None)
    assert _greedy_llamacpp(tiny_gguf, top) == expected


def test_trainer_eval_plays_through_llamacpp(
    tiny_gguf: Path, adapter: Path, capsys
) -> None:
    register_task()
    reports = {}
    for backend, model in (("transformers", tiny_gguf.parent), ("llamacpp", tiny_gguf)):
        code = trainer_main(
            ["eval", "--env", TASK_ID, "--model", str(model), "--adapter", str(adapter),
             "--episodes", "6", "--max-new-tokens", "6", "--max-turns", "1",
             "--max-total-tokens", "512", "--temperature", "0", "--backend", backend]
        )  # fmt: skip
        assert code == 0
        reports[backend] = json.loads(capsys.readouterr().out)
    assert reports["llamacpp"]["backend"] == "llamacpp"
    assert reports["llamacpp"]["outcomes"] == reports["transformers"]["outcomes"]


def test_llamacpp_is_refused_where_it_does_not_decode(
    tiny_model_dir: Path, capsys
) -> None:
    register_task()
    code = trainer_main(
        ["eval", "--env", TASK_ID, "--model", str(tiny_model_dir), "--backend", "llamacpp",
         "--episodes", "1"]
    )  # fmt: skip
    assert code == 2
    assert "reads a .gguf model file" in capsys.readouterr().err
    from router.cli import main as router_main

    code = router_main(
        [
            "serve",
            "--model",
            str(tiny_model_dir),
            "--backend",
            "llamacpp",
            "--port",
            "0",
        ]
    )
    assert code == 2
    assert "reads a .gguf model file" in capsys.readouterr().err
    code = router_main(
        ["eval", "--model", str(tiny_model_dir), "--adapters", str(tiny_model_dir),
         "--backend", "llamacpp", "--out", str(tiny_model_dir / "none")]
    )  # fmt: skip
    assert code == 2
    assert "`router eval` and `router route` decode with" in capsys.readouterr().err


def test_an_adapter_of_an_unconverted_architecture_is_refused(tmp_path: Path) -> None:
    from trainer.gguf_lora import convert

    (tmp_path / "adapter_config.json").write_text(json.dumps({"r": 4, "lora_alpha": 8}))
    with pytest.raises(
        TrainerError, match="llama adapters are not converted|on a llama"
    ):
        convert(tmp_path, "llama", 2, tmp_path / "out.gguf")


def test_llamacpp_scales_give_the_adapter_banks_mix(
    tiny_gguf: Path, adapters: Path
) -> None:
    """A mix of two adapters played by `trace run`'s llama.cpp backend (each GGUF
    LoRA at its weight as llama.cpp's scale) decodes what the adapter bank's mix
    (peft's concatenated LoRA) decodes: a mix is the sum of the scaled updates."""
    from router.adapters import AdapterBank
    from trainer.gguf_lora import lora_file
    from trainer.llamacpp import open_generator
    from trainer.models import load_tokenizer

    mix = {"date_time_recovery": 2.0, "permission_error_recovery": 3.0}
    bank, tokenizer = AdapterBank.load(adapters, str(tiny_gguf.parent))
    prompts = [tokenizer.encode(p) for p in PROMPTS]
    played = {}
    for name, weights in (("base", {}), ("mix", mix)):
        bank.activate_weights(weights)
        generator = TransformersGenerator(bank.model, tokenizer)
        played[name] = [s.tokens for s in generator.generate(prompts, 12, 0.0)]
    assert played["mix"] != played["base"]
    llama = open_generator(str(tiny_gguf), load_tokenizer(str(tiny_gguf)))
    llama.use_adapters(
        [(lora_file(adapters / name, tiny_gguf), w) for name, w in mix.items()]
    )
    assert [s.tokens for s in llama.generate(prompts, 12, 0.0)] == played["mix"]


def test_grpo_samples_its_rollouts_through_llamacpp(
    tiny_gguf: Path, tmp_path: Path, monkeypatch
) -> None:
    """`trainer train --backend llamacpp`: each iteration's rollouts are sampled by
    llama.cpp under the policy's adapter, converted from the last checkpoint (the
    previous version's file removed), and the trainer scores every sampled episode
    of a kept group itself, so pi_old is its own policy's log-prob."""
    from trainer import grpo
    from trainer.llamacpp import LlamaCppGenerator

    versions: list[tuple[int, list[str]]] = []
    use_adapter = LlamaCppGenerator.use_adapter

    def recorded(self, path: str, version: int) -> None:
        use_adapter(self, path, version)
        assert [file for file, _ in self.applied] == [
            self.policy / f"policy-{version}.gguf"
        ]
        versions.append((version, sorted(p.name for p in self.policy.iterdir())))

    scored: list[int] = []
    score = grpo.with_current_logprobs

    def spied(model, rows, *args):
        scored.append(len(rows))
        assert all(row.old_logprobs is None for row in rows)
        return score(model, rows, *args)

    monkeypatch.setattr(LlamaCppGenerator, "use_adapter", recorded)
    monkeypatch.setattr(grpo, "with_current_logprobs", spied)
    register_task()
    out = tmp_path / "adapter"
    code = trainer_main(
        ["train", "--env", TASK_ID, "--model", str(tiny_gguf), "--out", str(out),
         "--backend", "llamacpp", "--iterations", "3", "--groups", "2",
         "--group-size", "4", "--max-new-tokens", "4", "--max-turns", "1",
         "--max-total-tokens", "512", "--lora-rank", "4", "--temperature", "1.0"]
    )  # fmt: skip
    assert code == 0
    # iteration 1 samples the base (no checkpoint yet: B is zero), then each one the
    # adapter the iteration before saved, one converted file at a time
    assert versions == [(2, ["policy-2.gguf"]), (3, ["policy-3.gguf"])]
    metrics = [
        json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()
    ]
    kept = [round((1 - m["dropped_groups"]) * 2) * 4 for m in metrics]  # episodes
    assert sum(kept) > 0 and scored == [k for k in kept if k]


def test_sequences_decoded_together_give_each_ones_turn_alone(tiny_gguf: Path) -> None:
    """Greedy turns of five prompts streamed through two slots are the turns each
    prompt gets alone in a fresh generator; a next turn goes to the slot holding its
    conversation and evaluates only its new tokens (and the reply's last token,
    which was sampled, never decoded)."""
    from trainer.llamacpp import LlamaCppGenerator
    from trainer.models import load_tokenizer

    tokenizer = load_tokenizer(str(tiny_gguf))
    prompts = [
        tokenizer.encode(
            f"<|im_start|>user\nhello {'there ' * i}<|im_end|>\n<|im_start|>assistant\n"
        )
        for i in range(5)
    ]
    together = LlamaCppGenerator(tiny_gguf, tokenizer, context=512, sequences=2)
    turns = together.generate(prompts, 10, 0.0)
    alone = [
        LlamaCppGenerator(tiny_gguf, tokenizer, context=512, sequences=1).generate(
            [prompt], 10, 0.0
        )[0]
        for prompt in prompts
    ]
    assert [t.tokens for t in turns] == [t.tokens for t in alone]
    assert all(t.tokens for t in turns)
    more = tokenizer.encode("<|im_start|>user\nmore<|im_end|>\n")
    evaluated: list[int] = []
    decode = together._decode

    def counted(entries, logits) -> None:
        evaluated.append(len(entries))
        decode(entries, logits)

    together._decode = counted
    # the slots hold prompts 4 and 2 (each prompt took the free slot sharing most)
    together.generate([prompts[i] + turns[i].tokens + more for i in (2, 4)], 10, 0.0)
    assert evaluated[:2] == [len(more) + 1, len(more) + 1]
    # forgotten (a job's start): the whole prompt is evaluated again, and the turn is
    # a fresh generator's
    together.forget()
    evaluated.clear()
    follow = prompts[2] + turns[2].tokens + more
    (turn,) = together.generate([follow], 10, 0.0)
    assert evaluated[0] == len(follow)
    fresh = LlamaCppGenerator(tiny_gguf, tokenizer, context=512, sequences=2)
    assert turn.tokens == fresh.generate([follow], 10, 0.0)[0].tokens


class ChattyEnv:
    """Three turns whatever the agent says: the user answers each reply with more."""

    def __init__(self, max_turns: int = 3) -> None:
        self.max_turns, self.turn = max_turns, 0

    def reset(self, *, seed=None, options=None):
        self.turn = 0
        messages = [
            {"role": "system", "content": "Reply."},
            {
                "role": "user",
                "content": f"Tell me about {'the sea ' * (seed % 4)}{seed}.",
            },
        ]
        return json.dumps(messages), {"tools": [], "messages": messages}

    def step(self, action: str):
        self.turn += 1
        done = self.turn >= self.max_turns
        answer = "###STOP###" if done else f"And then {self.turn}?"
        observation = json.dumps([{"role": "user", "content": answer}])
        return observation, 0.0, done, False, {"success": False}


def test_slots_stream_the_episodes_turns_as_lockstep_rounds_would(
    tiny_gguf: Path,
) -> None:
    """Five three-turn episodes through two slots, streamed (a continuing turn
    admitted before any first one, into the slot holding its conversation) give
    greedily the episodes that lockstep rounds of one episode at a time give; no
    more than two turns decode at once, and a continuing turn evaluates only the
    user's answer (and its reply's last token, sampled and never decoded)."""
    from types import SimpleNamespace

    from trainer.llamacpp import LlamaCppGenerator
    from trainer.models import load_tokenizer
    from trainer.rollout import collect
    from trainer.settings import RolloutLimits

    tokenizer = load_tokenizer(str(tiny_gguf))
    handle = SimpleNamespace(make=lambda max_turns: ChattyEnv(max_turns))
    limits = RolloutLimits(
        max_turns=3, max_new_tokens=6, max_total_tokens=2048, temperature=0.0
    )
    seeds = [0, 1, 2, 3, 4]
    streamed = LlamaCppGenerator(tiny_gguf, tokenizer, context=1024, sequences=2)
    widths: list[int] = []  # slots in each llama_decode call
    evaluated = 0  # tokens through llama_decode
    decode = streamed._decode

    def counted(entries, logits) -> None:
        nonlocal evaluated
        widths.append(len({slot for _, slot in entries}))
        evaluated += len(entries)
        decode(entries, logits)

    streamed._decode = counted
    groups = collect(handle, streamed, tokenizer, seeds, 1, limits)
    alone = []
    for seed in seeds:  # a generator without `stream` plays lockstep rounds
        single = LlamaCppGenerator(tiny_gguf, tokenizer, context=1024, sequences=1)
        rounds = SimpleNamespace(generate=single.generate)
        alone += collect(handle, rounds, tokenizer, [seed], 1, limits)
    assert [g[0].turns for g in groups] == [3] * 5
    assert [g[0].tokens for g in groups] == [g[0].tokens for g in alone]
    assert max(widths) == 2
    # no token evaluated twice: each turn resumed its episode's own cache, and a
    # first turn copied the system prompt another slot held
    assert evaluated <= sum(len(g[0].tokens) for g in groups)

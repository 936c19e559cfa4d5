"""The vLLM side of routing: label log-probs from prompt log-probs, mixes as adapter files.

Written against vLLM's documented APIs (offline `LLM.generate` with token
prompts and `SamplingParams(prompt_logprobs=0)`, `LoRARequest`; the OpenAI
server's `/v1/completions` with token prompts, `echo` and `logprobs`, and
`/v1/load_lora_adapter`); tested here with fakes. A label's log-prob is the
prompt log-prob of its token at the end of prefix + task + label, so vLLM's
prefix caching serves the shared prefix.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from router.capabilities import CapabilitySet
from router.errors import RouterError
from router.prompt import RoutingPrompt
from router.scorer import Calibrated, Scores


def label_prompts(
    prompt: RoutingPrompt, messages: list[dict[str, Any]]
) -> list[list[int]]:
    """One token prompt per label: prefix + task + that label's token."""
    ids = prompt.prefix_ids + prompt.task_ids(messages)
    return [ids + [label] for label in prompt.label_ids]


def offline_label_logprobs(
    engine: Any, prompt: RoutingPrompt, messages: list[dict[str, Any]]
) -> list[float]:
    """Label log-probs from an offline `vllm.LLM` (prompt log-probs, one new token each)."""
    from vllm import SamplingParams

    prompts = label_prompts(prompt, messages)
    outputs = engine.generate(
        [{"prompt_token_ids": p} for p in prompts],
        SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0),
        use_tqdm=False,
    )
    return [
        out.prompt_logprobs[-1][ids[-1]].logprob
        for out, ids in zip(outputs, prompts, strict=True)
    ]


def server_label_logprobs(
    client: Any, model: str, prompt: RoutingPrompt, messages: list[dict[str, Any]]
) -> list[float]:
    """Label log-probs from a vLLM OpenAI server (`completions` with `echo` and `logprobs`)."""
    values = []
    for ids in label_prompts(prompt, messages):
        answer = client.completions.create(
            model=model,
            prompt=ids,
            max_tokens=1,
            temperature=0.0,
            echo=True,
            logprobs=0,
        )
        logprobs = answer.choices[0].logprobs.token_logprobs
        value = (
            logprobs[len(ids) - 1] if logprobs and len(logprobs) >= len(ids) else None
        )
        if value is None or not math.isfinite(value):
            raise RouterError(
                f"the vLLM server at {client.base_url} returned no prompt log-probs for {model}"
            )
        values.append(float(value))
    return values


def write_mix(
    capabilities: CapabilitySet, weights: dict[str, float], folder: Path
) -> Path:
    """sum_c alpha_c s_c B_c A_c as one PEFT adapter of rank sum r_c (lora_alpha = rank: scale 1).

    The same "cat" combination as peft's `add_weighted_adapter`, done on the
    adapter files so the vLLM path never loads the base model in torch. A module
    that one adapter lacks gets zero rows there.
    """
    from safetensors.torch import load_file, save_file

    names = sorted(weights)
    tensors, configs = {}, {}
    for name in names:
        capability = capabilities.get(name)
        tensors[name] = load_file(str(capability.path / "adapter_model.safetensors"))
        configs[name] = json.loads(
            (capability.path / "adapter_config.json").read_text(encoding="utf-8")
        )
    modules = sorted(
        {
            key.rsplit(".lora_", 1)[0]
            for t in tensors.values()
            for key in t
            if ".lora_A." in key
        }
    )
    mixed = {}
    for module in modules:
        parts_a, parts_b = [], []
        shape_a = next(
            t[f"{module}.lora_A.weight"].shape[1]
            for t in tensors.values()
            if f"{module}.lora_A.weight" in t
        )
        shape_b = next(
            t[f"{module}.lora_B.weight"].shape[0]
            for t in tensors.values()
            if f"{module}.lora_B.weight" in t
        )
        for name in names:
            config = configs[name]
            rank = int(config["r"])
            scale = config["lora_alpha"] / (
                math.sqrt(rank) if config.get("use_rslora") else rank
            )
            a = tensors[name].get(f"{module}.lora_A.weight", torch.zeros(rank, shape_a))
            b = tensors[name].get(f"{module}.lora_B.weight", torch.zeros(shape_b, rank))
            parts_a.append(a.float() * weights[name] * scale)
            parts_b.append(b.float())
        mixed[f"{module}.lora_A.weight"] = torch.cat(parts_a, dim=0).contiguous()
        mixed[f"{module}.lora_B.weight"] = torch.cat(parts_b, dim=1).contiguous()
    rank = sum(int(configs[n]["r"]) for n in names)
    config = dict(configs[names[0]])
    config.update(
        r=rank,
        lora_alpha=rank,
        use_rslora=False,
        rank_pattern={},
        alpha_pattern={},
        target_modules=sorted(
            {m for c in configs.values() for m in c.get("target_modules") or []}
        ),
    )
    folder.mkdir(parents=True, exist_ok=True)
    save_file(mixed, str(folder / "adapter_model.safetensors"))
    (folder / "adapter_config.json").write_text(
        json.dumps(config, indent=2), encoding="utf-8"
    )
    return folder


class AdapterFiles:
    """Adapter folders for vLLM: a capability's own folder, or a mix written once under `cache`."""

    def __init__(self, capabilities: CapabilitySet, cache: Path) -> None:
        self.capabilities = capabilities
        self.cache = cache
        self.ids: dict[str, int] = {}

    def path(self, weights: dict[str, float]) -> tuple[str, int, str]:
        """(name, id, path) of the configuration, as `LoRARequest` takes them."""
        from router.modes import Route

        key = Route("", "", weights).key
        self.ids.setdefault(key, len(self.ids) + 1)
        if len(weights) == 1 and key in self.capabilities.names:
            return key, self.ids[key], str(self.capabilities.get(key).path)
        folder = self.cache / f"mix{self.ids[key]}"
        if not (folder / "adapter_config.json").is_file():
            write_mix(self.capabilities, weights, folder)
        return f"mix{self.ids[key]}", self.ids[key], str(folder)


def activation(
    generator: Any, files: AdapterFiles
) -> Callable[[dict[str, float]], None]:
    """What `play` calls to hold a configuration on a `trainer.generation.VLLMGenerator`."""

    def activate(weights: dict[str, float]) -> None:
        if not weights:
            generator.adapter = None
            return
        name, number, path = files.path(weights)
        generator.adapter = (name, number, path)

    return activate


class VLLMScorer(Calibrated):
    """Label log-probs from an offline engine; the same interface as `LabelScorer` (no features)."""

    def __init__(self, engine: Any, prompt: RoutingPrompt) -> None:
        self.engine = engine
        self.prompt = prompt

    def logprobs(self, messages: list[dict[str, Any]]) -> torch.Tensor:
        values = offline_label_logprobs(self.engine, self.prompt, messages)
        return torch.tensor(values, dtype=torch.float32)

    def score(self, messages: list[dict[str, Any]]) -> Scores:
        return Scores(self.calibrated(self.logprobs(messages)), torch.zeros(0))

    def probabilities(self, scores: Scores) -> torch.Tensor:
        return torch.softmax(scores.logprobs, dim=-1)

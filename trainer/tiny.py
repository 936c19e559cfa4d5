"""A tiny random chat model and a one-turn task, for tests and benchmarks.

The model (Qwen2 architecture, byte-level tokenizer, a chat template with tools)
runs the real transformers + peft code paths with no download; the task rewards
a reply by its first letter, so a random policy gets varied rewards.
"""

from __future__ import annotations

import json
import string
import sys
from pathlib import Path
from typing import Any

import gymnasium
from gymnasium import spaces

CHAT_TEMPLATE = (
    "{% if tools %}<|im_start|>system\n"
    "{% if messages[0].role == 'system' %}{{ messages[0].content }}\n\n{% endif %}"
    "# Tools\n{% for tool in tools %}{{ tool | tojson }}\n{% endfor %}"
    'Call a tool as <tool_call>{"name": ..., "arguments": ...}</tool_call><|im_end|>\n'
    "{% elif messages[0].role == 'system' %}<|im_start|>system\n{{ messages[0].content }}<|im_end|>\n"
    "{% endif %}"
    "{% for message in messages %}"
    "{% if message.role == 'system' %}"
    "{% elif message.role == 'assistant' %}<|im_start|>assistant\n{{ message.content or '' }}"
    '{% for call in message.tool_calls or [] %}<tool_call>{"name": "{{ call.function.name }}", '
    '"arguments": {{ call.function.arguments }}}</tool_call>{% endfor %}<|im_end|>\n'
    "{% else %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIALS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<tool_call>",
    "</tool_call>",
]


def build_tiny_model(
    folder: Path,
    hidden: int = 32,
    layers: int = 2,
    seed: int = 0,
    sliding_window: int | None = None,
) -> Path:
    """Save a tiny chat model and its tokenizer under `folder`.

    Qwen2's architecture; with `sliding_window`, Gemma 3's instead, whose layers
    alternate sliding-window and full attention as Gemma 3 270M's do.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import (
        Gemma3ForCausalLM,
        Gemma3TextConfig,
        PreTrainedTokenizerFast,
        Qwen2Config,
        Qwen2ForCausalLM,
    )

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {token: index for index, token in enumerate(sorted(alphabet))}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=SPECIALS[1:2] + SPECIALS[3:],
    )
    tokenizer.add_special_tokens({"additional_special_tokens": SPECIALS})
    tokenizer.chat_template = CHAT_TEMPLATE
    torch.manual_seed(seed)
    shape = dict(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=32768,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    if sliding_window is None:
        model = Qwen2ForCausalLM(Qwen2Config(**shape))
    else:
        model = Gemma3ForCausalLM(
            Gemma3TextConfig(
                **shape,
                head_dim=hidden // 2,
                sliding_window=sliding_window,
                layer_types=[
                    "full_attention" if (i + 1) % 2 == 0 else "sliding_attention"
                    for i in range(layers)
                ],
            )
        )
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


TINY_GGUF = "tiny.gguf"  # the file `write_tiny_gguf` writes in the model's folder


def write_tiny_gguf(folder: Path) -> Path:
    """The tiny Qwen2 model of `folder` (from `build_tiny_model`) as `folder/tiny.gguf`
    in float32, so llama.cpp runs the same weights and vocabulary as transformers:
    the tests' stand-in for a GGUF model from a hub."""
    import gguf
    import numpy as np
    from safetensors.numpy import load_file
    from transformers import AutoConfig, AutoTokenizer

    config = AutoConfig.from_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    weights = load_file(str(folder / "model.safetensors"))
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.QWEN2, config.num_hidden_layers)
    out = folder / TINY_GGUF
    writer = gguf.GGUFWriter(str(out), "qwen2")
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_rope_freq_base(float(config.rope_parameters["rope_theta"]))
    writer.add_layer_norm_rms_eps(float(config.rms_norm_eps))
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    specials = set(tokenizer.all_special_ids)
    tokens = [t for t, _ in sorted(tokenizer.get_vocab().items(), key=lambda i: i[1])]
    # llama.cpp's BPE vocabulary needs merges, and transformers reads one only if its
    # result is a token: one merge of two control bytes no text holds (NUL, then
    # 0x01), its token last, with an embedding row of zeros.
    joined = "\u0100\u0101"
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list([*tokens, joined])
    writer.add_token_types(
        [
            gguf.TokenType.CONTROL if index in specials else gguf.TokenType.NORMAL
            for index in range(len(tokens))
        ]
        + [gguf.TokenType.NORMAL]
    )
    writer.add_token_merges(["\u0100 \u0101"])
    writer.add_token_scores([0.0] * (len(tokens) + 1))
    writer.add_eos_token_id(tokenizer.eos_token_id)
    writer.add_pad_token_id(tokenizer.pad_token_id)
    writer.add_chat_template(tokenizer.chat_template)
    embeddings = weights["model.embed_tokens.weight"]
    weights["model.embed_tokens.weight"] = np.concatenate(
        [embeddings, np.zeros((1, embeddings.shape[1]), embeddings.dtype)]
    )
    for name, tensor in weights.items():
        if name == "lm_head.weight":  # tied to the embeddings
            continue
        writer.add_tensor(
            names.get_name(name, try_suffixes=(".weight", ".bias")), tensor
        )
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


TASK_ID = "trace-test/FirstLetter-v0"


def first_letter_reward(text: str) -> float:
    """1.0 when the reply starts with a letter from a to m."""
    text = text.strip().lower()
    return float(bool(text) and text[0] in "abcdefghijklm")


class FirstLetterEnv(gymnasium.Env[str, str]):
    """One turn: reward 1 when the reply starts with a letter from a to m."""

    def __init__(self, max_turns: int = 1, system: str = "Reply.") -> None:
        self.observation_space = spaces.Text(
            10_000, charset=string.printable, min_length=0
        )
        self.action_space = spaces.Text(10_000, charset=string.printable, min_length=0)
        self.max_turns = max_turns
        self.system = system

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        messages = [
            {"role": "system", "content": self.system},
            {"role": "user", "content": f"Task {seed}"},
        ]
        return json.dumps(messages), {
            "tools": [],
            "messages": messages,
            "task_id": str(seed),
        }

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        reward = first_letter_reward(action)
        observation = json.dumps([{"role": "user", "content": "###STOP###"}])
        return observation, reward, True, False, {"success": reward == 1.0}


def system_prompt(length: int) -> str:
    """A system prompt of about `length` characters (tokens, with the byte-level tokenizer).

    "Reply." when short; longer ones read like an agent's policy, so a benchmark
    can give the tiny task the long shared prompt that real agent tasks have.
    """
    if length <= len("Reply."):
        return "Reply."
    lines, size, i = ["Reply."], len("Reply."), 1
    while True:
        rule = f"Rule {i}: confirm the account and the order before changing anything."
        if size + 1 + len(rule) > length:
            return "\n".join(lines)
        lines.append(rule)
        size, i = size + 1 + len(rule), i + 1


def register_task(system: str = "Reply.") -> None:
    """Register the one-turn task's gymnasium id with this system prompt."""
    spec = gymnasium.registry.get(TASK_ID)
    if spec is None or spec.kwargs.get("system") != system:
        gymnasium.registry.pop(TASK_ID, None)  # registered with another prompt
        gymnasium.register(
            TASK_ID, entry_point=FirstLetterEnv, kwargs={"system": system}
        )


def main(argv: list[str] | None = None) -> int:
    """`python -m trainer.tiny FOLDER`: a tiny random chat model for trying the pipeline."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m trainer.tiny",
        description="Write a tiny random chat model (Qwen2 shape, byte-level tokenizer) "
        "into a new or empty folder, for trying the trainer and the pipeline.",
    )
    parser.add_argument("folder", type=Path, help="a new or empty folder for the model")
    folder = parser.parse_args(argv).folder
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        what = "a folder that is not empty" if folder.is_dir() else "a file"
        print(
            f"python -m trainer.tiny: {folder} is {what}; give a new or empty folder",
            file=sys.stderr,
        )
        return 2
    print(build_tiny_model(folder))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Chat formats, precision and log-probs of the policy model."""

from __future__ import annotations

import json

import pytest
import torch

from tests.conftest import NO_TOOL_ROLE, assert_fresh_logprobs
from trainer.chat import ChatFormat
from trainer.errors import TrainerError
from trainer.settings import TrainConfig


def test_chat_format_falls_back_when_the_template_has_no_tool_role(
    tiny_tokenizer,
) -> None:
    tiny_tokenizer.chat_template = NO_TOOL_ROLE
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
        TrainerError, match="gradient-checkpointing must be a valid boolean"
    ):
        TrainConfig(gradient_checkpointing="no")


@pytest.mark.parametrize("checkpointing", [True, False])
def test_lora_on_the_top_layers_trains_those_and_stops_the_backward_there(
    tiny_model_dir, checkpointing
) -> None:
    """--lora-layers N adapts the top N decoder layers only, and the backward pass
    goes no lower than the first of them (what makes the step cheaper): the layers
    below run without autograd; too many layers is refused, naming the count."""
    from trainer.models import load_base, with_lora
    from trainer.optimize import token_logprobs

    base, _ = load_base(str(tiny_model_dir))
    depth = base.config.num_hidden_layers
    config = TrainConfig(
        lora_rank=4, lora_layers=1, gradient_checkpointing=checkpointing
    )
    model = with_lora(base, config)
    adapted = {
        int(name.split(".layers.")[1].split(".")[0])
        for name, p in model.named_parameters()
        if p.requires_grad
    }
    assert adapted == {depth - 1}
    graphed = []
    for layer in model.get_decoder().layers:
        layer.register_forward_hook(
            lambda _m, _i, out: graphed.append(
                (out[0] if isinstance(out, tuple) else out).requires_grad
            )
        )
    model.train()
    tokens = torch.randint(0, 200, (2, 12))
    loss = -token_logprobs(
        model, tokens, torch.ones_like(tokens), 1.0, torch.ones(2, 12)
    )
    loss.sum().backward()
    assert graphed[:depth] == [False] * (depth - 1) + [True]
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)
    with pytest.raises(TrainerError, match=f"this model has {depth} decoder layers"):
        with_lora(load_base(str(tiny_model_dir))[0], TrainConfig(lora_layers=depth + 1))


def test_sampled_log_probs_are_the_policys_own(tiny_model_dir) -> None:
    """The sampler's log-probs equal a fresh pass over the finished sequences, so GRPO's
    first ratio is exactly 1: left padding, rows that stop early and leave the batch,
    and the cached steps change nothing."""
    from trainer.generation import TransformersGenerator
    from trainer.models import load_base, with_lora

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
        assert_fresh_logprobs(model, prompt, sample, 0.7)


def test_bf16_weights_on_a_cpu_without_bf16_matmuls_are_warned_of_at_load(
    tiny_model_dir, monkeypatch, caplog
) -> None:
    import trainer.models
    from trainer.models import load_base

    monkeypatch.setattr(trainer.models, "fast_cpu_bf16", lambda: False)
    with caplog.at_level("WARNING", logger=trainer.models.log.name):
        load_base(str(tiny_model_dir), device="cpu", precision="fp32")
        assert "AVX512-BF16" not in caplog.text
        load_base(str(tiny_model_dir), device="cpu", precision="bf16")
    assert "use --precision fp32 here" in caplog.text

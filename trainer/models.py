"""Load the base model and tokenizer, wrap it with LoRA (peft), load adapters.

MODEL is a local folder (transformers format), a `.gguf` file (dequantised once,
then cached as safetensors), or a Hugging Face id (needs the hub).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from trainer.chat_templates import apply_chat_template
from trainer.errors import TrainerError, first_line
from trainer.settings import PRECISION, Precision, TrainConfig

log = logging.getLogger("trainer.models")
GGUF_CACHE = Path.home() / ".cache" / "trace-factory" / "gguf"


@functools.cache
def _cache_name() -> str:
    from packaging.version import Version
    from transformers import __version__

    return (
        "cache" if Version(__version__) >= Version("5.24.0.dev0") else "past_key_values"
    )


def cache_kwargs(cache: Any) -> dict[str, Any]:
    """The forward keyword that passes a KV cache, under this transformers' name.

    transformers 5.24 renamed `past_key_values` to `cache` (the old name warns
    and goes in 5.40); the project supports versions on both sides.
    """
    return {_cache_name(): cache}


def returned_cache(output: Any) -> Any:
    """The KV cache a forward returned, under this transformers' name."""
    return getattr(output, _cache_name())


def _from_gguf(path: Path) -> Path:
    """A transformers folder for a GGUF file, dequantised on first use and cached."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    key = hashlib.sha256(
        f"{path.resolve()}:{path.stat().st_size}".encode()
    ).hexdigest()[:16]
    folder = GGUF_CACHE / key
    if not (folder / "config.json").is_file():
        try:
            model = AutoModelForCausalLM.from_pretrained(
                path.parent, gguf_file=path.name
            )
            tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
        except Exception as exc:  # noqa: BLE001 - the GGUF readers raise many kinds
            raise TrainerError(
                f"--model: {path} is not a GGUF model transformers can read "
                f"({first_line(exc)}); give a valid .gguf file or a model folder"
            ) from None
        # The weights are dequantised on load; drop the GGUF quantizer so they save as
        # plain safetensors.
        model.hf_quantizer = None
        model.is_quantized = False
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        GGUF_CACHE.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f"{key}.", dir=GGUF_CACHE))
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        try:
            staging.rename(folder)
        except OSError:  # another run cached it first
            shutil.rmtree(staging, ignore_errors=True)
    return folder


def _grow_vocabulary(base: Any, tokenizer: Any) -> None:
    """Rows for the tokens a chat template added, identical on every load.

    The adapter holds LoRA tensors only (vLLM refuses embedding layers in one),
    so the new rows must be rebuilt the same way wherever the adapter is used:
    each is the mean embedding plus noise of the embeddings' spread, seeded by
    the token's own text.
    """
    import torch

    old = base.get_input_embeddings().num_embeddings
    base.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    layers = [base.get_input_embeddings().weight]
    output = base.get_output_embeddings()
    if output is not None and output.weight is not layers[0]:
        layers.append(output.weight)
    with torch.no_grad():
        for salt, weight in enumerate(layers):
            mean, spread = weight[:old].mean(dim=0), weight[:old].std(dim=0)
            for index in range(old, weight.shape[0]):
                text = f"{salt}:{tokenizer.convert_ids_to_tokens(index)}"
                seed = int.from_bytes(
                    hashlib.sha256(text.encode()).digest()[:8], "little"
                )
                noise = torch.randn(
                    weight.shape[1], generator=torch.Generator().manual_seed(seed)
                )
                weight[index] = mean + spread * noise.to(weight.dtype)


def _offline() -> bool:
    """Whether the hub's offline variables forbid downloads (as huggingface_hub reads them)."""
    return any(
        os.environ.get(name, "").strip().lower() in ("1", "on", "yes", "true")
        for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def check_model(model: str, label: str = "--model") -> None:
    """Refuse a model that names nothing loadable here (a TrainerError naming `label`):
    a missing .gguf file, a local path that is not a model folder, a hub id with the
    hub off. Cheap, so a run checks it before hours of earlier stages."""
    path = Path(model)
    if path.suffix == ".gguf":
        if not path.is_file():
            raise TrainerError(f"{label}: GGUF file not found: {path}")
    elif not path.exists() and (model.startswith((".", "/")) or model.count("/") != 1):
        raise TrainerError(
            f"{label}: '{model}' is not a local folder, a .gguf file or a Hugging Face id (org/name)"
        )
    elif not path.exists() and path.parent.is_dir():
        # `models/tinyy` reads like a hub id (org/name), but its `models/` is a folder
        # here: a typo of a local path, which must not wait on a minute of hub retries.
        raise TrainerError(
            f"{label}: no folder {path} (there is a folder {path.parent} here, so this "
            "names a local model); check the name, or give a .gguf file"
        )
    elif not path.exists() and _offline():
        raise TrainerError(
            f"{label}: '{model}' is not a local folder and the Hugging Face hub is off "
            "(HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE); give a local model folder or a .gguf file"
        )
    elif path.exists() and not path.is_dir():
        raise TrainerError(
            f"{label}: {path} is a file; give a model folder or a .gguf file"
        )
    elif path.is_dir() and not (path / "config.json").is_file():
        raise TrainerError(
            f"{label}: {path} has no config.json (not a transformers model folder)"
        )


def _prepare(tokenizer: Any, model: str, chat_template: str | None) -> None:
    """The chat template (given, or the model's own) and the special tokens every
    rollout needs, checked: a model without a template or an end of sequence is
    refused by name."""
    if chat_template is not None:
        apply_chat_template(tokenizer, chat_template)
    if getattr(tokenizer, "chat_template", None) is None:
        raise TrainerError(
            f"--model: {model} has no chat template (a base model?); pass --chat-template "
            "gemma, chatml or a jinja file"
        )
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    if tokenizer.eos_token_id is None:
        raise TrainerError(
            f"--model: the tokenizer of {model} has no end-of-sequence token"
        )


def load_tokenizer(model: str, chat_template: str | None = None) -> Any:
    """The model's tokenizer alone, prepared as `load_base` prepares it; a GGUF
    file's is read from the file (no weights are dequantized)."""
    from transformers import AutoTokenizer

    check_model(model)
    path = Path(model)
    try:
        if path.suffix == ".gguf":
            tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
        else:
            tokenizer = AutoTokenizer.from_pretrained(
                str(path) if path.exists() else model
            )
    except Exception as exc:  # noqa: BLE001 - the tokenizer readers raise many kinds
        raise TrainerError(
            f"--model: cannot read the tokenizer of '{model}' ({first_line(exc)})"
        ) from None
    _prepare(tokenizer, model, chat_template)
    return tokenizer


def load_base(
    model: str,
    device: str | None = None,
    chat_template: str | None = None,
    precision: Precision = PRECISION,
) -> tuple[Any, Any]:
    """(model, tokenizer) on `device` (default: cuda if available).

    The weights are stored in float32, or in bfloat16 with `precision="bf16"`:
    frozen base weights then need no cast on each pass (LoRA weights that
    `with_lora` adds stay float32). `chat_template` (a built-in name or a jinja
    file) is for base models without one.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    check_model(model)
    path = Path(model)
    if path.suffix == ".gguf":
        path = _from_gguf(path)
    source = str(path) if path.exists() else model
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        base = AutoModelForCausalLM.from_pretrained(source, dtype=dtype)
    except Exception as exc:  # noqa: BLE001 - config, tokenizer and weight readers raise many kinds
        raise TrainerError(
            f"--model: cannot load '{model}' ({first_line(exc)}); give a complete local "
            "model folder or a Hugging Face id this machine can download"
        ) from None
    _prepare(tokenizer, model, chat_template)
    if (
        chat_template is not None
        and len(tokenizer) > base.get_input_embeddings().num_embeddings
    ):
        _grow_vocabulary(base, tokenizer)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if precision == "bf16" and device == "cpu" and not fast_cpu_bf16():
        log.warning(
            "--precision bf16 on a CPU without AVX512-BF16 or AMX (%s): bfloat16 "
            "matmuls are emulated, several times slower than float32; use "
            "--precision fp32 here",
            torch.backends.cpu.get_cpu_capability(),
        )
    return base.to(device), tokenizer


def pad_id(tokenizer: Any) -> int:
    """The id that pads batches: the tokenizer's pad token, else its end of sequence."""
    if tokenizer.pad_token_id is not None:
        return tokenizer.pad_token_id
    return tokenizer.eos_token_id


def fast_cpu_bf16() -> bool:
    """Whether this CPU has bfloat16 matmul instructions (AVX512-BF16 or AMX).

    AVX512 alone is not enough: on an AVX512 CPU without the BF16 extension a
    512 x 1536 x 8960 bfloat16 matmul took 4.7x as long as in float32 (`experiments/inference_speed/bf16_matmul.py`) (and the
    1.5B demo's cold start ran at that pace).
    """
    import torch

    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(torch.cpu, name, lambda: False)() for name in checks)


def mixed_precision(precision: str, model: Any) -> Any:
    """A context where forward and backward passes run in `precision` (fp32: as loaded).

    bf16 autocasts matmuls to bfloat16 (over base weights that `load_base`
    stores in bfloat16 and LoRA weights in float32): about 1.45x faster training
    steps for Gemma 3 270M on a CPU with AVX512-BF16, and the usual choice on GPUs.
    """
    import torch

    device = next(model.parameters()).device.type
    # No weight-cast cache: it lives as long as the context, which spans optimizer
    # steps here, so cached bf16 copies of the LoRA weights would go stale.
    return torch.autocast(
        device,
        dtype=torch.bfloat16,
        enabled=precision == "bf16",
        cache_enabled=False,
    )


@contextlib.contextmanager
def peft_quietly() -> Iterator[None]:
    """Silence peft's read of transformers' deprecated `is_gradient_checkpointing`.

    The FutureWarning is about peft's code, not the user's, and would show on every run.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "`is_gradient_checkpointing`", FutureWarning)
        yield


def with_lora(base: Any, config: TrainConfig) -> Any:
    """The base model wrapped with a fresh LoRA adapter drawn from `config.seed`.

    Only the adapter trains; its weights are float32 even over bfloat16 base
    weights (peft's `autocast_adapter_dtype`), so optimizer steps keep full precision.
    `config.lora_layers` keeps it to the top decoder layers, the backward pass
    stops at the lowest of them (`_no_input_grads`), and the outputs of the
    frozen layers below are kept for later passes (`frozen_trunk`). The decoder is
    gradient-checkpointed unless `config.gradient_checkpointing` is off.
    """
    import torch
    from peft import LoraConfig, get_peft_model

    names = {
        n.rsplit(".", 1)[-1]
        for n, m in base.named_modules()
        if isinstance(m, torch.nn.Linear)
    }
    missing = [t for t in config.lora_target_modules if t not in names]
    if missing:
        raise TrainerError(
            f"--lora-target-modules: {missing} are not linear layers of this model; "
            f"it has {sorted(names)}"
        )
    decoder = base.get_decoder()
    depth = getattr(decoder.config, "num_hidden_layers", None)
    top = config.lora_layers
    if top and (depth is None or top > depth):
        raise TrainerError(
            f"--lora-layers {top}: this model has {depth or 'no counted'} decoder "
            "layers; give at most that many (0: every layer)"
        )
    if top:  # peft counts layers by the first index in a name, a vision tower's too
        inside = {id(m) for m in decoder.modules()}
        if any(
            isinstance(m, torch.nn.Linear)
            and n.rsplit(".", 1)[-1] in config.lora_target_modules
            and id(m) not in inside
            for n, m in base.named_modules()
        ):
            raise TrainerError(
                f"--lora-layers {top}: this model has {config.lora_target_modules} "
                "outside its decoder (a vision tower); use --lora-layers 0"
            )
    lora = LoraConfig(
        r=config.lora_rank,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=list(config.lora_target_modules),
        layers_to_transform=list(range(depth - top, depth)) if top else None,
        bias="none",
        task_type="CAUSAL_LM",
    )
    if config.gradient_checkpointing and base.supports_gradient_checkpointing:
        # Decoder layers keep only their inputs and recompute the rest in the
        # backward pass: the update's memory no longer grows with layers x tokens
        # x MLP width. It applies in train mode only, so sampling keeps its cache.
        # transformers 5 renamed it "activation checkpointing"; 4.x has only the old name.
        if hasattr(base, "activation_checkpointing_enable"):
            base.activation_checkpointing_enable(
                activation_checkpointing_kwargs={"use_reentrant": False}
            )
        else:
            base.gradient_checkpointing_enable(
                gradient_checkpointing_kwargs={"use_reentrant": False}
            )
        _no_input_grads(base)
    torch.manual_seed(config.seed)  # LoRA A is drawn at random: --seed must fix it
    with peft_quietly():
        model = get_peft_model(base, lora)
    _no_input_grads(base)
    if top:
        from trainer import frozen_trunk

        frozen_trunk.attach(model, config.trunk_cache_mib)
    return model


def _no_input_grads(base: Any) -> None:
    """Drop the hook that makes the embeddings' output require grad.

    transformers (enabling checkpointing), then peft, add it; non-reentrant
    checkpointing needs no such input, and with it the backward pass would run
    down through every layer below the lowest adapted one (--lora-layers). Each is
    dropped right after its maker (5.x keeps the last one only); transformers 4.x
    removes its hook without checking there is one.
    """
    if getattr(base, "_require_grads_hooks", None) or hasattr(
        base, "_require_grads_hook"
    ):
        base.disable_input_require_grads()


def load_adapter(base: Any, adapter: str) -> Any:
    """A trained adapter on the base model, checked before loading."""
    from peft import PeftModel

    folder = Path(adapter)
    for name in ("adapter_config.json", "adapter_model.safetensors"):
        if not (folder / name).is_file():
            raise TrainerError(
                f"--adapter: {folder} has no {name}; give a folder written by `trainer train`"
            )
    try:
        with peft_quietly():
            return PeftModel.from_pretrained(base, folder)
    except Exception as exc:  # noqa: BLE001 - peft and safetensors raise many kinds
        raise TrainerError(
            f"--adapter: {folder} is broken or does not fit this base model "
            f"({first_line(exc)}); give a folder written by `trainer train` for it"
        ) from None

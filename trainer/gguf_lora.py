"""A PEFT LoRA adapter as a GGUF LoRA file, the form llama.cpp applies to a GGUF model.

llama.cpp adds `scale * B (A x)` to each adapted projection, with scale =
alpha / rank: the same update PEFT's LoRA makes, so the file holds PEFT's A and B
under the base GGUF's tensor names (`blk.N.attn_q.weight.lora_a`, `.lora_b`),
with `general.type = adapter`, `adapter.type = lora` and `adapter.lora.alpha`.
Written here with the `gguf` package rather than by llama.cpp's
convert_lora_to_gguf.py, which is a script outside any installed package and
needs the base model's Hugging Face config. The conversion is cached under
GGUF_CACHE, keyed by the adapter's files and the base model's architecture.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from pathlib import Path

from trainer.errors import TrainerError
from trainer.models import GGUF_CACHE

# Architectures whose GGUF conversion keeps the projections' weights as they are in
# the Hugging Face checkpoint (llama's, for one, permutes q and k rows for its RoPE
# layout, which an adapter's B would have to follow).
AS_IS = ("qwen2", "qwen3", "gemma2", "gemma3")
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")


def base_architecture(model_file: Path) -> tuple[str, int]:
    """The GGUF model's architecture name and block count."""
    from gguf import GGUFReader

    try:
        reader = GGUFReader(model_file)
        architecture = str(reader.fields["general.architecture"].contents())
        blocks = int(reader.fields[f"{architecture}.block_count"].contents())
    except (OSError, ValueError, KeyError, IndexError) as exc:
        raise TrainerError(
            f"--model: {model_file} is not a GGUF model file llama.cpp can read ({exc})"
        ) from None
    return architecture, blocks


def lora_file(adapter: Path, model_file: Path) -> Path:
    """The adapter's GGUF LoRA file for `model_file`, converted on first use."""
    architecture, blocks = base_architecture(model_file)
    digest = hashlib.sha256(f"{architecture}:{blocks}".encode())
    for name in ADAPTER_FILES:
        if not (adapter / name).is_file():
            raise TrainerError(
                f"--adapter: {adapter} has no {name}; give a folder `trainer train` wrote"
            )
        digest.update((adapter / name).read_bytes())
    cached = GGUF_CACHE / "lora" / f"{digest.hexdigest()[:32]}.gguf"
    if not cached.is_file():
        cached.parent.mkdir(parents=True, exist_ok=True)
        handle, staging = tempfile.mkstemp(
            prefix=".lora-", suffix=".gguf", dir=cached.parent
        )
        os.close(handle)
        try:
            convert(adapter, architecture, blocks, Path(staging))
            os.replace(staging, cached)  # whole, or not there (another run may race)
        finally:
            Path(staging).unlink(missing_ok=True)
    return cached


def convert(adapter: Path, architecture: str, blocks: int, out: Path) -> None:
    """Write `adapter` (PEFT LoRA) as a GGUF LoRA file for a model of `architecture`."""
    import gguf
    from safetensors.numpy import load_file

    if architecture not in AS_IS:
        raise TrainerError(
            f"--backend llamacpp: adapters on a {architecture} model are not converted "
            f"(supported: {', '.join(AS_IS)}); use --backend transformers"
        )
    config = json.loads((adapter / "adapter_config.json").read_text(encoding="utf-8"))
    if config.get("modules_to_save") or config.get("fan_in_fan_out"):
        raise TrainerError(
            f"--adapter: {adapter} saves whole modules or uses fan_in_fan_out, which a "
            "GGUF LoRA cannot hold; use --backend transformers"
        )
    rank, alpha = int(config["r"]), float(config["lora_alpha"])
    # PEFT's rsLoRA scales by alpha / sqrt(r), llama.cpp always by alpha / r
    if config.get("use_rslora"):
        alpha *= math.sqrt(rank)
    names = gguf.get_tensor_name_map(
        gguf.MODEL_ARCH[architecture.upper()], blocks
    )  # fmt: skip
    pairs: dict[str, dict[str, object]] = {}
    for key, tensor in load_file(str(adapter / "adapter_model.safetensors")).items():
        part = "a" if ".lora_A." in key else "b" if ".lora_B." in key else None
        if part is None:
            raise TrainerError(
                f"--adapter: {adapter} holds {key}, not a LoRA A or B matrix; use "
                "--backend transformers"
            )
        hf_name = key.removeprefix("base_model.model.").replace(
            f".lora_{part.upper()}.weight", ".weight"
        )
        name = names.get_name(hf_name, try_suffixes=(".weight",))
        if name is None:
            raise TrainerError(
                f"--adapter: {hf_name} has no tensor in a {architecture} GGUF model"
            )
        pairs.setdefault(name, {})[part] = tensor.astype("float32")
    writer = gguf.GGUFWriter(str(out), architecture)
    writer.add_type(gguf.GGUFType.ADAPTER)
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, alpha)
    for name, pair in sorted(pairs.items()):
        if set(pair) != {"a", "b"}:
            raise TrainerError(f"--adapter: {adapter} lacks half of the LoRA of {name}")
        writer.add_tensor(f"{name}.lora_a", pair["a"])  # (rank, in), as PEFT's A
        writer.add_tensor(f"{name}.lora_b", pair["b"])  # (out, rank), as PEFT's B
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

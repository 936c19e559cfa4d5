"""What vLLM accepts in a LoRA adapter folder, and the command that serves one.

vLLM's LoRA loader reads `adapter_config.json` and `adapter_model.safetensors`
and refuses: ranks above `--max-lora-rank` (whose only legal values are listed
below; `vllm serve` defaults to 16), bias, DoRA and `modules_to_save`
adapters, and any tensor that is not a `lora_A`/`lora_B` weight of a target
module (a resized embedding or LM head saved into the adapter, for instance).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from trainer.errors import TrainerError

# The values `vllm serve --max-lora-rank` and `LLM(max_lora_rank=...)` accept.
LEGAL_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
# peft's names of LoRA tensors, as vLLM parses them.
LORA_TENSOR = re.compile(r"^base_model\.model\.(?P<module>.+)\.lora_(?:A|B)\.weight$")


def legal_rank(rank: int) -> int:
    """The smallest `--max-lora-rank` vLLM accepts that holds `rank`."""
    for legal in LEGAL_RANKS:
        if legal >= rank:
            return legal
    raise TrainerError(
        f"rank {rank} is over vLLM's largest --max-lora-rank ({LEGAL_RANKS[-1]})"
    )


def problems(adapter_config: dict[str, Any], tensor_names: list[str]) -> list[str]:
    """What vLLM's loader would refuse in an adapter (its documented checks)."""
    found = [
        f"adapter_config.json has no '{k}'"
        for k in ("r", "lora_alpha", "target_modules")
        if k not in adapter_config
    ]
    rank = adapter_config.get("r", 0)
    if not isinstance(rank, int) or rank > LEGAL_RANKS[-1]:
        found.append(f"rank {rank!r} is over vLLM's largest --max-lora-rank")
    if adapter_config.get("bias", "none") != "none":
        found.append("bias adapters are not supported")
    if adapter_config.get("use_dora"):
        found.append("DoRA is not supported")
    if adapter_config.get("modules_to_save"):
        found.append("modules_to_save is not supported")
    targets = adapter_config.get("target_modules") or []
    for name in tensor_names:
        match = LORA_TENSOR.match(name)
        if match is None:
            found.append(f"tensor {name} is not a LoRA weight (lora_A/lora_B)")
        elif (
            isinstance(targets, list)
            and match["module"].rsplit(".", 1)[-1] not in targets
        ):
            found.append(f"tensor {name} is outside the target modules {targets}")
    return found


def folder_problems(folder: Path) -> list[str]:
    """`problems` of a saved adapter folder."""
    import json

    from safetensors import safe_open

    config = json.loads((folder / "adapter_config.json").read_text(encoding="utf-8"))
    with safe_open(
        str(folder / "adapter_model.safetensors"), framework="pt"
    ) as tensors:
        names = list(tensors.keys())
    return problems(config, names)


def serve_command(base_model: str, name: str, folder: Path, rank: int) -> str:
    """The `vllm serve` command line that serves `folder` as the model `name`."""
    return (
        f"vllm serve {base_model} --enable-lora --max-lora-rank {legal_rank(rank)} "
        f"--lora-modules {name}={folder}"
    )

"""The capability set: every adapter folder `DIR/<cap>/` that `trainer train` wrote.

Each folder holds the PEFT files and `trace.json` (capability name, description,
base model, chat template, tool format, one successful trajectory). The set is
checked as a whole: one base model, one prompt format, distinct names.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from router.errors import RouterError
from trainer.settings import TOOL_FORMATS

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
MAX_TRACE_BYTES = 20_000_000
PEFT_FILES = ("adapter_config.json", "adapter_model.safetensors")


@dataclass(frozen=True)
class Capability:
    """One trained adapter and what the router tells the model about it."""

    name: str
    title: str
    description: str
    path: Path
    base_model: str
    env_id: str
    package: str
    rank: int
    example: tuple[dict[str, Any], ...]
    layers: tuple[int, ...] | None = None  # the adapted decoder layers; None: all


@dataclass(frozen=True)
class CapabilitySet:
    """All adapters of one base model, sorted by name (labels follow this order)."""

    folder: Path
    capabilities: tuple[Capability, ...]
    base_model: str
    chat_template: str | None
    tool_formats: tuple[str, ...]  # each adapter's --tool-format, in name order

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.capabilities]

    def tool_format(self, tokenizer: Any) -> str:
        """The tool listing the adapters were trained with. It is used only where the
        chat template has no tool role, so only there must the adapters agree on it."""
        from trainer.chat import ChatFormat

        formats = sorted(set(self.tool_formats))
        if len(formats) > 1 and not ChatFormat(tokenizer, [], formats[0]).native:
            names = dict(zip(self.names, self.tool_formats, strict=True))
            raise RouterError(
                f"the adapters in {self.folder} were trained with different tool formats "
                f"({names}) and the chat template has no tool role, so the prompt "
                "depends on it; retrain them with one --tool-format"
            )
        return formats[0]

    def get(self, name: str) -> Capability:
        for capability in self.capabilities:
            if capability.name == name:
                return capability
        raise RouterError(
            f"no adapter named '{name}' in {self.folder}; have {self.names}"
        )


def read_json(path: Path, what: str) -> Any:
    """A JSON file's content, or a RouterError naming the file and the problem."""
    try:
        if path.stat().st_size > MAX_TRACE_BYTES:
            raise RouterError(f"{path} is over {MAX_TRACE_BYTES} bytes; {what}")
        return json.loads(path.read_text(encoding="utf-8"))
    except RouterError:
        raise
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise RouterError(f"{path} cannot be read as JSON ({exc}); {what}") from None


def _field(trace: dict[str, Any], key: str, path: Path, kind: type) -> Any:
    value = trace.get(key)
    if not isinstance(value, kind) or (kind is str and not value.strip()):
        raise RouterError(
            f"{path}: field '{key}' must be a non-empty {kind.__name__}, not {value!r:.80}; "
            "re-export the adapter with `trainer train`"
        )
    return value


def _capability(folder: Path) -> tuple[Capability, dict[str, Any]]:
    trace_path = folder / "trace.json"
    if not trace_path.is_file():
        raise RouterError(
            f"{folder} has no trace.json, so it is not an adapter written by `trainer train`; "
            "move it out of the adapters folder or retrain it"
        )
    for name in PEFT_FILES:
        if not (folder / name).is_file():
            raise RouterError(
                f"{folder} has no {name}; it is not a complete PEFT adapter (retrain it)"
            )
    hint = "re-export the adapter with `trainer train`"
    trace = read_json(trace_path, hint)
    if not isinstance(trace, dict):
        raise RouterError(f"{trace_path} must hold a JSON object; {hint}")
    name = _field(trace, "capability", trace_path, str)
    if not NAME.match(name) or name in ("base", "trace-router"):
        raise RouterError(
            f"{trace_path}: capability name {name!r:.80} must be a snake_case id "
            "(letters, digits, _ or -, at most 64; 'base' and 'trace-router' are reserved)"
        )
    example = trace.get("example_trajectory") or []
    if not isinstance(example, list) or not all(isinstance(m, dict) for m in example):
        raise RouterError(
            f"{trace_path}: 'example_trajectory' must be a list of messages"
        )
    training = trace.get("training") or {}
    config = training.get("config") if isinstance(training, dict) else None
    if not isinstance(training, dict) or not isinstance(config, dict):
        raise RouterError(f"{trace_path}: 'training.config' must be an object; {hint}")
    tool_format = config.get("tool_format", "json")
    if tool_format not in TOOL_FORMATS:
        raise RouterError(
            f"{trace_path}: 'training.config.tool_format' must be one of "
            f"{', '.join(TOOL_FORMATS)}, not {tool_format!r:.40}; {hint}"
        )
    template = training.get("chat_template")
    if template is not None and not isinstance(template, str):
        raise RouterError(
            f"{trace_path}: 'training.chat_template' must be a string or null; {hint}"
        )
    adapter_config = read_json(folder / "adapter_config.json", hint)
    rank = adapter_config.get("r") if isinstance(adapter_config, dict) else None
    if not isinstance(rank, int) or rank < 1:
        raise RouterError(
            f"{folder / 'adapter_config.json'}: 'r' must be a positive integer"
        )
    layers = adapter_config.get("layers_to_transform")
    if isinstance(layers, int) and not isinstance(layers, bool):
        layers = [layers]  # peft takes one index for a list of one
    if layers is not None and (
        not isinstance(layers, list)
        or not all(isinstance(i, int) and not isinstance(i, bool) for i in layers)
    ):
        raise RouterError(
            f"{folder / 'adapter_config.json'}: 'layers_to_transform' must be null or "
            "a list of layer indices"
        )
    capability = Capability(
        name=name,
        title=str(trace.get("title") or name),
        description=str(trace.get("description") or ""),
        path=folder,
        base_model=_field(trace, "base_model", trace_path, str),
        env_id=str(trace.get("env_id") or ""),
        package=str(trace.get("package") or ""),
        rank=rank,
        example=tuple(example),
        layers=None if layers is None else tuple(sorted(set(layers))),
    )
    return capability, training


def _layers(capability: Capability) -> str:
    return (
        "all" if capability.layers is None else ", ".join(map(str, capability.layers))
    )


def same_model(a: str, b: str) -> bool:
    """Whether two model references name one model (same string, path or file name)."""
    if a == b or Path(a).name == Path(b).name:
        return True
    return (
        Path(a).exists() and Path(b).exists() and Path(a).resolve() == Path(b).resolve()
    )


def load_capabilities(folder: str | Path, model: str | None = None) -> CapabilitySet:
    """Every adapter under `folder`, checked; `model` (if given) must be their base model."""
    root = Path(folder)
    if not root.is_dir():
        raise RouterError(
            f"--adapters {root} is not a folder; give the folder holding adapters/<cap>/"
        )
    try:
        children = sorted(
            p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")
        )
    except OSError as exc:
        raise RouterError(f"--adapters {root} cannot be listed ({exc})") from None
    if not children:
        raise RouterError(
            f"--adapters {root} holds no adapter folders; train some with "
            f"`trainer train --env ... --out {root}/<cap>`"
        )
    loaded = [_capability(child) for child in children]
    by_name: dict[str, Path] = {}
    for capability, _ in loaded:
        if capability.name in by_name:
            raise RouterError(
                f"{by_name[capability.name]} and {capability.path} both hold capability "
                f"'{capability.name}'; keep one of them in {root}"
            )
        by_name[capability.name] = capability.path
    first, first_training = loaded[0]
    for capability, training in loaded[1:]:
        if not same_model(capability.base_model, first.base_model):
            raise RouterError(
                f"{capability.path} was trained on {capability.base_model} but {first.path} on "
                f"{first.base_model}; the router needs one base model: move one of them out"
            )
        if training.get("chat_template") != first_training.get("chat_template"):
            raise RouterError(
                f"{capability.path} was trained with chat template "
                f"{training.get('chat_template')!r} but {first.path} with "
                f"{first_training.get('chat_template')!r}; retrain one so they match"
            )
        if capability.layers != first.layers:  # peft mixes on the first one's layers
            raise RouterError(
                f"{capability.path} adapts layers {_layers(capability)} but "
                f"{first.path} layers {_layers(first)}; mixes and merges need one "
                "set of layers: retrain one with the other's --lora-layers"
            )
    if model is not None and not same_model(model, first.base_model):
        raise RouterError(
            f"--model {model} is not the base model the adapters in {root} were trained on "
            f"({first.base_model}); pass that model"
        )
    ordered = sorted(loaded, key=lambda pair: pair[0].name)
    return CapabilitySet(
        folder=root,
        capabilities=tuple(c for c, _ in ordered),
        base_model=first.base_model,
        chat_template=first_training.get("chat_template"),
        tool_formats=tuple(
            str(training["config"].get("tool_format") or "json")
            for _, training in ordered
        ),
    )

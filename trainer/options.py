"""The trainer's command-line options and `--config` YAML files, both derived from
and checked against the settings' models (`trainer.settings`, `TrainConfig`): the
trainer CLI, `router eval` and the benchmarks share them.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Hashable
from pathlib import Path
from typing import Any

from trainer.errors import TrainerError, first_line
from trainer.settings import RolloutLimits, TrainConfig

# Options of both commands that set how long an episode and its calls may run.
ROLLOUT_SETTINGS = tuple(RolloutLimits.model_fields)
# Options every command sets its own way: the tool format (eval: the adapter's own),
# the LoRA modules (one comma-separated option) and the precision (common to both).
OWN_OPTIONS = ("tool_format", "lora_target_modules", "precision")
# `trainer train` options: every other setting of TrainConfig, in its order.
TRAIN_SETTINGS = tuple(
    name
    for name in TrainConfig.model_fields
    if name not in ROLLOUT_SETTINGS and name not in OWN_OPTIONS
)
# Settings a --config file may give as a list.
CONFIG_LISTS = {"lora_target_modules", "env"}


def train_config(arguments: argparse.Namespace) -> TrainConfig:
    """The TrainConfig of parsed arguments (defaults where an option was not given)."""
    values = {
        name: getattr(arguments, name)
        for name in TrainConfig.model_fields
        if getattr(arguments, name, None) is not None
    }
    modules = values.get("lora_target_modules")
    if isinstance(modules, str):
        values["lora_target_modules"] = tuple(m.strip() for m in modules.split(","))
    return TrainConfig(**values)


def require(arguments: argparse.Namespace, *names: str) -> None:
    """Refuse a run whose required options came neither as flags nor from --config."""
    for name in names:
        if not getattr(arguments, name, None):
            raise TrainerError(
                f"--{name} is required (on the command line or in the --config file)"
            )


MAX_CONFIG_BYTES = 1_000_000


def _setting(path: str, key: object, value: object, action: argparse.Action) -> object:
    """One --config value, checked against its option's kind and converted like a flag."""
    shown = repr(value)[:80]
    if action.nargs == 0:  # --resume, --force: only true or false
        if not isinstance(value, bool):
            raise TrainerError(
                f"--config {path}: {key} must be true or false, not {shown}"
            )
        return value
    if action.dest == "env" and isinstance(value, str):
        value = [value]
    if action.dest in CONFIG_LISTS and isinstance(value, list):
        if not value or not all(isinstance(v, str) and v for v in value):
            raise TrainerError(f"--config {path}: {key} must be a list of names")
        return value if action.dest == "env" else ",".join(value)
    if action.type is None:  # paths, names and choices: text only
        if not isinstance(value, str):
            raise TrainerError(f"--config {path}: {key} must be text, not {shown}")
        converted: object = value
    else:  # a number, parsed and range-checked by the option's own type
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise TrainerError(f"--config {path}: {key} must be a number, not {shown}")
        try:
            converted = action.type(value)
        except argparse.ArgumentTypeError as exc:
            raise TrainerError(f"--config {path}: {key}: {exc}") from None
    if action.choices is not None and converted not in action.choices:
        raise TrainerError(
            f"--config {path}: {key} must be one of {', '.join(map(str, action.choices))}"
        )
    return converted


def read_yaml(path: str | Path, label: str) -> Any:
    """The YAML in `path`, read whole; a TrainerError naming `label` and the file when
    it is not a regular file, cannot be read as text, is larger than 1 MB, is not
    YAML (with the line and column) or repeats a key (`--config` files and
    `trace run` configs share this)."""
    import stat

    import yaml

    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a pipe would block the open
            raise TrainerError(
                f"{label} {path} is not a regular file; save the settings to a file "
                "and give its path"
            )
        with open(path, encoding="utf-8") as handle:
            text = handle.read(MAX_CONFIG_BYTES + 1)
    except (OSError, UnicodeDecodeError) as exc:
        raise TrainerError(
            f"{label} {path}: cannot read it as UTF-8 text ({exc})"
        ) from None
    if len(text) > MAX_CONFIG_BYTES:
        raise TrainerError(
            f"{label} {path} is larger than 1 MB; settings fit in a few lines"
        )
    try:
        return yaml.load(text, Loader=_unique_keys())  # noqa: S506 - a SafeLoader
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise TrainerError(
            f"{label} {path} is not valid YAML ({where}{exc.problem or exc.context})"
        ) from None
    except Exception as exc:  # noqa: BLE001 - PyYAML raises YAMLError, ValueError, RecursionError
        raise TrainerError(
            f"{label} {path} is not valid YAML ({first_line(exc, 200)})"
        ) from None


@functools.cache
def _unique_keys() -> type:
    """PyYAML's safe loader, refusing a repeated key: PyYAML keeps the last one
    silently, so a second `target:` would drop the first without a word."""
    import yaml

    class UniqueKeys(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
            seen = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":  # `<<:` may be overridden
                    continue
                key = self.construct_object(key_node, deep=deep)
                if not isinstance(key, Hashable):  # the safe loader refuses it below
                    continue
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None,
                        None,
                        f"{str(key)[:80]!r} is given twice",
                        key_node.start_mark,
                    )
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return UniqueKeys


def config_file(path: str, command: argparse.ArgumentParser) -> dict[str, Any]:
    """The settings of a --config YAML file, keyed by option destination and checked."""
    values = read_yaml(path, "--config")
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise TrainerError(
            f"--config {path} must be a mapping of option names to values"
        )
    known = {
        a.dest: a
        for a in command._actions  # argparse has no public list of a parser's options
        if a.option_strings and a.dest not in ("help", "config")
    }
    settings = {}
    for key, value in values.items():
        dest = str(key).replace("-", "_")
        if dest not in known:
            raise TrainerError(
                f"--config {path}: unknown setting {str(key)[:80]!r}; "
                f"known: {', '.join(sorted(known))}"
            )
        settings[dest] = _setting(path, key, value, known[dest])
    return settings


def parse(
    parser: argparse.ArgumentParser,
    commands: dict[str, argparse.ArgumentParser],
    argv: list[str] | None,
) -> argparse.Namespace:
    """Command-line arguments over the --config file's settings over the defaults."""
    arguments = parser.parse_args(argv)
    if getattr(arguments, "config", None):  # `compare` reads no --config
        command = commands[arguments.command]
        settings = config_file(arguments.config, command)
        given = sys.argv[1:] if argv is None else argv
        if any(a == "--env" or a.startswith("--env=") for a in given):
            settings.pop(
                "env", None
            )  # --env on the command line replaces the file's list
        command.set_defaults(**settings)
        arguments = parser.parse_args(argv)
    return arguments

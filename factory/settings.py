"""Settings declared once, as pydantic fields; command-line options and their checks
are derived from them.

A setting's type, default, range and help live in its model (`setting(...)`); the
CLIs add the model's fields as options (`add_options`) and build the model from
what was parsed (`from_arguments`), and the library and `trace run`'s config
validate the same model, so no default or range is written twice.

Written here rather than with pydantic-settings' CLI source or tyro: those build a
parser per model, while our commands put a model's fields on argparse subcommands
beside other options, and `trainer --config` files read those options back.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import re
import signal
import sys
import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, Field, TypeAdapter, ValidationError
from pydantic_core import PydanticUndefined

from factory.errors import CONTROL, FactoryError, one_line, printable
from factory.version import add_version

Model = TypeVar("Model", bound=BaseModel)


# Tokens per model turn: factory calibrate, the trainer, the router and trace run
# all take it, so it is declared here, in the lowest layer, once.
MAX_NEW_TOKENS = 256
# The engine that decodes a local model: transformers (CPU or GPU), vLLM (GPU) or
# llama.cpp (the GGUF file as it is, on a CPU); factory calibrate takes it too.
Backend = Literal["transformers", "vllm", "llamacpp"]
BACKEND: Backend = "transformers"  # the default of every backend setting and parameter


def setting(
    default: Any,
    help: str,
    *,
    flag: str | None = None,
    **limits: Any,
) -> Any:
    """A field with its default, help, range (`ge`, `le`, `gt`, `lt`), and its option
    when that is not `--field-name` (`flag`); one name only, so that a name means one
    thing in every CLI."""
    extra = {"flag": flag or ""}
    return Field(default, description=help, json_schema_extra=extra, **limits)


MAX_NEW_TOKENS_SETTING = setting(
    MAX_NEW_TOKENS, "tokens the model may write per turn", ge=1, le=10**6
)


class DefaultsFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows an option's default once, after its help, and none where it is unset
    (None, off, an empty list)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        default = action.default
        if default is None or default is False or default == () or default == []:
            return action.help
        if default is argparse.SUPPRESS:
            return action.help
        return super()._get_help_string(action)


def _extra(model: type[BaseModel], name: str) -> dict[str, Any]:
    extra = model.model_fields[name].json_schema_extra
    return extra if isinstance(extra, dict) else {}


def flag(model: type[BaseModel], name: str) -> str:
    """The option of a field: its own `flag`, else `min_runs` -> `--min-runs`."""
    return str(_extra(model, name).get("flag") or "--" + name.replace("_", "-"))


def _plain(annotation: Any) -> Any:
    """The annotation without `| None`."""
    if get_origin(annotation) in (Union, types.UnionType):
        kept = [a for a in get_args(annotation) if a is not type(None)]
        if len(kept) == 1:
            return kept[0]
    return annotation


def _reason(error: dict[str, Any]) -> str:
    """pydantic's message about one value, as words after the option's name."""
    message = error["msg"].removeprefix("Value error, ")
    return re.sub(r"^\w+ should", "must", message)


def explain(model: type[BaseModel], error: ValidationError) -> str:
    """pydantic's first complaint about `model` as one sentence about options:
    `--groups must be greater than or equal to 1, not 0`; a check of the whole model
    has its field names written as the options the user typed."""
    first = error.errors()[0]
    reason = _reason(first)
    location = [str(part) for part in first["loc"]]
    if location and location[0] in model.model_fields:
        shown = repr(first.get("input"))[:80]
        return f"{flag(model, location[0])} {reason}, not {shown}"
    if location:
        return f"unknown setting {location[0][:80]!r} ({reason.lower()})"
    for name in model.model_fields:
        reason = re.sub(rf"(?<![-\w]){name}\b", flag(model, name), reason)
    return reason


def number(kind: type, *limits: Any) -> Callable[[str], Any]:
    """argparse type: the text as a finite `kind` within pydantic's `limits`
    (`annotated_types.Interval(ge=1)`, a field's metadata), so a bad value is refused
    while parsing (usage line, exit 2)."""
    checker = TypeAdapter(Annotated[(kind, *limits)] if limits else kind)

    def parse(text: str | float) -> Any:
        try:
            value = kind(text)
            if kind is int and isinstance(text, float) and value != text:
                raise ValueError  # a YAML 2.5 is not the integer 2
        except (ValueError, OverflowError):
            word = "an integer" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"not {word}: {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, not {text}")
        try:
            return checker.validate_python(value)
        except ValidationError as exc:
            raise argparse.ArgumentTypeError(
                f"{_reason(exc.errors()[0])}, not {text}"
            ) from None

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


def add_options(
    parser: argparse.ArgumentParser,
    model: type[BaseModel],
    names: Iterable[str] | None = None,
    required: Iterable[str] = (),
) -> None:
    """One option per field of `model` (or the `names` among them): typed, ranged,
    defaulted and helped by the field; a field without a default, or named in
    `required` (a command that cannot do without it), is required."""
    for name in names if names is not None else model.model_fields:
        field = model.model_fields[name]
        annotation = _plain(field.annotation)
        options: dict[str, Any] = {"dest": name, "help": field.description}
        if field.default is PydanticUndefined or name in required:
            options["required"] = True
        else:
            options["default"] = field.default
        if annotation is bool:
            options["action"] = (
                argparse.BooleanOptionalAction if field.default else "store_true"
            )
        elif get_origin(annotation) is Literal:
            options["choices"] = get_args(annotation)
        elif get_origin(annotation) in (tuple, list):
            # several values: the option given once each, as `trainer --env A --env B`
            options.update(action="append", default=None)
        elif annotation in (int, float):
            options["type"] = number(annotation, *field.metadata)
        parser.add_argument(flag(model, name), **options)


def from_arguments(model: type[Model], arguments: argparse.Namespace) -> Model:
    """`model` built from the parsed options of its fields; a value it refuses (one
    setting against another) is a FactoryError naming the options (`explain`)."""
    values = {
        name: getattr(arguments, name)
        for name in model.model_fields
        if getattr(arguments, name, None) is not None
    }
    try:
        return model(**values)
    except ValidationError as exc:
        raise FactoryError(explain(model, exc)) from None


@dataclass(frozen=True)
class Derived:
    """Options derived from a settings model: its fields (or `names` among them),
    with `required` marked required on this command."""

    model: type[BaseModel]
    names: tuple[str, ...] | None = None
    required: tuple[str, ...] = ()


@dataclass(frozen=True)
class Command:
    """One subcommand: the function it runs, its help, its own options (flags then
    argparse's keyword arguments) and the options derived from settings models."""

    run: Callable[[argparse.Namespace], int]
    help: str
    options: tuple[tuple[Any, ...], ...] = ()
    derived: tuple[Derived, ...] = ()


def command_parser(
    prog: str, description: str, commands: Mapping[str, Command], epilog: str = ""
) -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """Every CLI's parser: `--version` and one subcommand per entry of `commands`
    (each shows its defaults once; `arguments.run` is its function). Returns the
    parser and each subcommand's, which `trainer --config` files are checked against."""
    parser = argparse.ArgumentParser(
        prog=prog, description=description, epilog=epilog or None
    )
    add_version(parser)
    subcommands = parser.add_subparsers(dest="command", required=True)
    built = {}
    for name, command in commands.items():
        sub = subcommands.add_parser(
            name, help=command.help, formatter_class=DefaultsFormatter
        )
        for *flags, options in command.options:
            sub.add_argument(*flags, **options)
        for derived in command.derived:
            add_options(sub, derived.model, derived.names, derived.required)
        sub.set_defaults(run=command.run)
        built[name] = sub
    return parser, built


def _paths_on_one_line(message: str, arguments: argparse.Namespace) -> str:
    """`message` with each argument that holds a newline or tab (a path, most often)
    written escaped wherever it appears, so an error stays one line per problem."""
    for value in vars(arguments).values():
        for item in value if isinstance(value, list) else [value]:
            text = os.fspath(item) if isinstance(item, (str, os.PathLike)) else ""
            if CONTROL.search(text):
                message = message.replace(text, one_line(text))
    return message


def _stop(number: int, frame: object) -> None:
    raise KeyboardInterrupt(number)


def _internal_error(prog: str, exc: Exception) -> int:
    """A bug (an exception no check names): one line saying where, the traceback in
    a file of the system's temporary folder (printed instead with TRACE_TRACEBACK=1),
    exit 1. What the command finished is kept: every output is moved into place
    only when complete."""
    import tempfile
    import traceback

    text = "".join(traceback.format_exception(exc))
    if os.environ.get("TRACE_TRACEBACK"):
        print(text, file=sys.stderr, end="")
        kept = ""
    else:
        with tempfile.NamedTemporaryFile(
            "w", prefix=f"{prog}-error-", suffix=".txt", delete=False
        ) as handle:
            handle.write(text)
        kept = f"; the traceback is in {handle.name}"
    frame = traceback.extract_tb(exc.__traceback__)[-1]
    where = f"{os.path.basename(frame.filename)}:{frame.lineno}"
    print(
        f"{prog}: internal error: {type(exc).__name__}: {printable(one_line(str(exc)))[:300]} "
        f"(at {where}); this is a bug in TRACE factory, please report it{kept}",
        file=sys.stderr,
    )
    return 1


def dispatch(
    prog: str,
    parse: Callable[[], argparse.Namespace],
    errors: tuple[type[BaseException], ...],
    stopped: str,
    stops: tuple[type[BaseException], ...] = (),
) -> int:
    """Run the parsed command with the exit codes every CLI shares, one line each.

    2 for `errors` (their message names the fix; an error with an `exit_code` exits
    with that) and for paths the system refuses; 1 for a bug (`_internal_error`);
    128 + N when stopped by signal N:
    SIGTERM is raised like Ctrl-C, `stops` are the command's own stop exceptions
    (carrying the signal's `number`), and `stopped` says what is left. A command
    that handles signals itself (a GRPO run) installs its own handlers meanwhile."""
    logging.basicConfig(
        level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    previous = signal.signal(signal.SIGTERM, _stop)
    arguments = argparse.Namespace()
    try:
        arguments = parse()
        return arguments.run(arguments)
    except errors as exc:
        message = _paths_on_one_line(str(exc), arguments)
        print(f"{prog}: error: {printable(message)}", file=sys.stderr)
        return getattr(exc, "exit_code", 2)
    except OSError as exc:  # a path too long, a full disk, a folder we may not read
        where = f"{one_line(exc.filename)}: " if exc.filename else ""
        print(
            f"{prog}: error: {where}{printable(exc.strerror or exc)}", file=sys.stderr
        )
        return 2
    except (KeyboardInterrupt, *stops) as exc:
        number = getattr(exc, "number", exc.args[0] if exc.args else signal.SIGINT)
        print(f"{prog}: {stopped}", file=sys.stderr)
        return 128 + int(number)
    except Exception as exc:  # noqa: BLE001 - a bug of ours: one line, the trace kept
        return _internal_error(prog, exc)
    finally:
        signal.signal(signal.SIGTERM, previous)  # callers in-process get theirs back

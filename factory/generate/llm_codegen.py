"""The LLM backend of `factory generate`: a model writes the task module, repaired until it validates.

Each attempt: ask the model (prompts in `templates/codegen/`), parse its JSON
answer, refuse it statically (`code_checks`), render it into a temporary
package and validate that in the sandbox. A refusal is fed back (the problems,
the failing property and seed, a trimmed traceback) for the next attempt.
Every attempt (messages, answer, module, problems, validation output) is kept
under the debug folder, whatever the outcome.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from factory.archetypes import archetypes
from factory.errors import FactoryError
from factory.generate.code_checks import (
    ALLOWED_STDLIB,
    FORBIDDEN_NAMES,
    check_kit_modules,
    check_task_module,
    literal_knobs,
)
from factory.generate.inline_kit import kit_files
from factory.generate.render import TaskSource
from factory.kits import KITS_DIR
from factory.llm import EndpointTimeout, chat, json_payload
from factory.paths import templates, templates_dir
from factory.runtime import Toolkit
from factory.spec import CapabilitySpec, InlineTarget, describe_error
from factory.validate.runner import ValidationFailed, ValidationReport

# Stages a rendered attempt: (its temporary folder, its validation report).
Stage = Callable[[TaskSource], tuple[Path, ValidationReport | None]]
OUTPUT_CHARS = 3_000
EXAMPLE_KIT = "phone"  # the worked example of a kit for inline targets


class CodegenAnswer(BaseModel):
    """What the model must answer: a summary for the README and the module."""

    summary: str = Field(min_length=10, max_length=2_000)
    task_module: str = Field(min_length=50, max_length=100_000)
    lacking_behaviour: str = Field(
        default="makes the mistake its lacking turns play (see `task.py`)",
        min_length=5,
        max_length=500,
    )


class KitAnswer(CodegenAnswer):
    """For an inline target, the kit's tools and world modules as well."""

    tools_module: str = Field(min_length=50, max_length=200_000)
    world_module: str = Field(min_length=20, max_length=200_000)


def _answer_type(spec: CapabilitySpec) -> type[CodegenAnswer]:
    return KitAnswer if isinstance(spec.target, InlineTarget) else CodegenAnswer


@dataclass
class Attempt:
    """One round trip: what was asked, answered, refused and measured."""

    number: int
    answer: str = ""
    problems: list[str] = field(default_factory=list)
    output: str = ""


def _example_kit(spec: CapabilitySpec, kit: Toolkit) -> str:
    """The kit the worked examples are on: the spec's, or for an inline target
    (whose kit the model writes) the phone kit."""
    return EXAMPLE_KIT if isinstance(spec.target, InlineTarget) else kit.id


def shown_example(spec: CapabilitySpec, kit: Toolkit) -> tuple[str, str]:
    """The built-in task module shown as the worked example (name, source): the
    longest one on the example kit (the most of the runtime's helpers in use) that
    trains another capability than `spec`'s, so the answer cannot be the example
    itself."""
    kit_id = _example_kit(spec, kit)
    shown = {
        f"{archetype.id}/{kit_id}.py": archetype.task_source(kit_id).read_text(
            encoding="utf-8"
        )
        for archetype in archetypes().values()
        if kit_id in archetype.kits and archetype.id != spec.name
    }
    if not shown:
        raise FactoryError(
            f"no built-in task module on kit '{kit_id}' to show the model"
        )
    name = max(sorted(shown), key=lambda n: shown[n].count("\n"))
    return name, shown[name]


# Built-in task modules on one kit share at most 0.39 of their code lines (measured
# over every pair); the 1.5B model's copy of the example under a new docstring
# shared about 0.95 (experiments/codegen/results).
COPY_SHARE = 0.7


def copied(module: str, example: tuple[str, str]) -> list[str]:
    """The problem when `module` is a near copy of the shown example, else none."""
    name, source = example

    def code(text: str) -> list[str]:
        lines = (line.strip() for line in text.splitlines())
        return [line for line in lines if line and not line.startswith("#")]

    # difflib's line matching (stdlib) is what `diff` does: no library needed
    share = difflib.SequenceMatcher(None, code(module), code(source), autojunk=False)
    if share.ratio() < COPY_SHARE:
        return []
    return [
        f"the task module is a near copy of the worked example `{name}` ("
        f"{share.ratio():.0%} of its code lines): that example trains another "
        "capability; write tasks that need this one, with their own instructions, "
        "gold turns, lacking turns and checks"
    ]


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def prompt(
    spec: CapabilitySpec, kit: Toolkit, shown: tuple[str, str]
) -> list[dict[str, str]]:
    """The opening system and user messages for `spec` on `kit`, with the `shown`
    worked example (`shown_example`).

    An inline target's request also shows a whole built-in kit as the example of
    the kit modules to write (the phone kit: self-contained, no shared modules).
    """
    codegen = templates_dir() / "codegen"
    inline = isinstance(spec.target, InlineTarget)
    example_kit = _example_kit(spec, kit)
    example_name, example = shown
    system = (
        templates()
        .get_template("codegen/system.j2")
        .render(
            contract=_text(codegen / "contract.md"),
            kit_contract=_text(codegen / "kit_contract.md"),
            allowed=sorted(ALLOWED_STDLIB),
            forbidden=sorted(FORBIDDEN_NAMES),
            inline=inline,
        )
    )
    kit_example = {
        name: _text(KITS_DIR / example_kit / name)
        for name in ("__init__.py", "tools.py", "world.py")
    }
    request = (
        templates()
        .get_template("codegen/request.j2")
        .render(
            spec=spec,
            kit=kit,
            inline=inline,
            target=spec.target if inline else None,
            samples=json.dumps(spec.target.samples, indent=1) if inline else "",
            tools=json.dumps(list(kit.schemas), indent=1),
            world="" if inline else kit_example["world.py"],
            example_kit=example_kit,
            example_kit_files=kit_example if inline else {},
            example_name=example_name,
            example=example,
        )
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": request}]


# Tokens an answer may take, sent with each request: a server's own default can be
# short (`router serve` gives a chat reply 256 tokens, a fraction of a task module).
ANSWER_TOKENS = 8192
TEMPERATURE = 0.2  # attempts differ a little, each close to the model's best answer


def _ask(
    client: Any, model: str, messages: list[dict[str, str]], temperature: float
) -> str:
    """The model's answer text (an `EndpointTimeout` is an attempt's problem)."""
    message = chat(
        client,
        model=model,
        messages=messages,
        temperature=temperature,
        max_tokens=ANSWER_TOKENS,
    )
    return message.content or ""


# The task module as a python code block beside the JSON object (the answer format
# for a built-in kit): code inside a JSON string needs every quote and newline
# escaped, which small models do not manage (they name a file instead).
PYTHON_BLOCK = re.compile(
    r"```(?:python|py)[ \t]*\n(.*?)\n```", re.DOTALL | re.IGNORECASE
)


def _parse(spec: CapabilitySpec, text: str) -> CodegenAnswer:
    """The answer: its JSON object, with the task module from its python code block
    when it has one (a module inside the JSON object is read too)."""
    block = PYTHON_BLOCK.search(text)
    if block is None or _answer_type(spec) is KitAnswer:
        return _answer_type(spec).model_validate(json_payload(text))
    payload = json_payload(text[: block.start()] + text[block.end() :])
    if not isinstance(payload, dict):
        raise ValueError("the JSON part of the answer is not an object")
    return CodegenAnswer.model_validate({**payload, "task_module": block.group(1)})


def _review(
    spec: CapabilitySpec,
    kit: Toolkit,
    shown: tuple[str, str],
    text: str,
    stage: Stage,
    attempt: Attempt,
) -> tuple[Path, ValidationReport | None] | None:
    """Check and validate one answer; record why it is refused (None) or return its stage."""
    try:
        answer = _parse(spec, text)
    except ValidationError as exc:  # each field named: a count alone does not help
        attempt.problems += [
            f"the answer's {describe_error(error)}" for error in exc.errors()[:5]
        ]
        return None
    except ValueError as exc:
        attempt.problems.append(
            "the answer is not the JSON object asked for "
            f"({str(exc).splitlines()[0][:300]})"
        )
        return None
    attempt.problems += check_task_module(answer.task_module, kit.schemas)
    attempt.problems += copied(answer.task_module, shown)
    if isinstance(answer, KitAnswer):
        attempt.problems += check_kit_modules(
            answer.tools_module, answer.world_module, kit.schemas
        )
    if attempt.problems:
        return None
    files = (
        kit_files(spec, answer.tools_module, answer.world_module)
        if isinstance(answer, KitAnswer)
        else None
    )
    try:
        knobs = literal_knobs(answer.task_module)
    except ValueError as exc:
        attempt.problems.append(str(exc))
        return None
    task = TaskSource(
        kit=kit,
        source=answer.task_module,
        knobs=knobs,
        summary=answer.summary,
        family=spec.title,
        about=spec.description,
        lacking=answer.lacking_behaviour,
        origin="task module written by the LLM codegen",
        kit_files=files,
    )
    try:
        staging, report = stage(task)
    except (FactoryError, ValidationFailed) as exc:
        attempt.problems.append(str(exc).splitlines()[0])
        return None
    if report is not None and report.problems:
        attempt.problems += report.problems
        attempt.output = report.tests_output[-OUTPUT_CHARS:]
        if not report.tests_passed or report.calibration.get("check_env") != "ok":
            attempt.output += "\n" + str(report.calibration.get("check_env", ""))[:1000]
        return None
    return staging, report


def _keep(folder: Path, attempt: Attempt, messages: list[dict[str, str]]) -> None:
    """Write one attempt's record under the debug folder."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "messages.json").write_text(
        json.dumps(messages, indent=1), encoding="utf-8"
    )
    (folder / "answer.txt").write_text(attempt.answer, encoding="utf-8")
    try:
        answer = json_payload(attempt.answer)
    except ValueError:
        answer = None
    names = {
        "task_module": "task.py",
        "tools_module": "tools.py",
        "world_module": "world.py",
    }
    for key, filename in names.items():
        if isinstance(answer, dict) and isinstance(answer.get(key), str):
            (folder / filename).write_text(answer[key], encoding="utf-8")
    block = PYTHON_BLOCK.search(attempt.answer)
    if block is not None:
        (folder / "task.py").write_text(block.group(1), encoding="utf-8")
    (folder / "problems.txt").write_text(
        "\n".join(attempt.problems) + "\n", encoding="utf-8"
    )
    (folder / "validation.txt").write_text(attempt.output, encoding="utf-8")


def debug_folder(output_dir: Path, name: str) -> Path:
    """Where this run keeps its attempts: `<output>/.codegen/<name>-<UTC time>-<pid>/`."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return output_dir / ".codegen" / f"{name}-{stamp}-{os.getpid()}"


def write_task(
    spec: CapabilitySpec,
    kit: Toolkit,
    client: Any,
    model: str,
    stage: Stage,
    debug: Path,
    attempts: int = 4,
    temperature: float = TEMPERATURE,
) -> tuple[Path, ValidationReport | None]:
    """Attempts until one validates: its staged folder and report; else ValidationFailed."""
    # One example for the whole build: the prompt shows it, the copy check compares with it.
    shown = shown_example(spec, kit)
    messages = prompt(spec, kit, shown)
    history: list[Attempt] = []
    for number in range(1, attempts + 1):
        attempt = Attempt(number)
        history.append(attempt)
        try:
            attempt.answer = _ask(client, model, messages, temperature)
            staged = _review(spec, kit, shown, attempt.answer, stage, attempt)
        except EndpointTimeout as exc:
            attempt.problems.append(str(exc))
            staged = None
        _keep(debug / f"attempt-{number}", attempt, messages)
        if staged is not None:
            return staged
        feedback = (
            templates()
            .get_template("codegen/feedback.j2")
            .render(
                number=number, problems=attempt.problems[:20], output=attempt.output
            )
        )
        if attempt.answer:
            messages = [*messages, {"role": "assistant", "content": attempt.answer}]
        messages = [*messages, {"role": "user", "content": feedback}]
    lines = [
        f"model {model} wrote no valid task module for '{spec.name}' in {attempts} "
        f"attempt(s); every attempt is kept in {debug}"
    ]
    for attempt in history:
        first = attempt.problems[0] if attempt.problems else "?"
        lines.append(f"  attempt {attempt.number}: {first[:200]}")
    raise ValidationFailed("\n".join(lines))

"""Static checks on model-written code (a task module), before it is ever run.

The LLM codegen writes what an archetype author writes (templates/README.md: the
task-module contract). Its answer is parsed with libcst and refused unless it
imports only an allow-list (pure standard-library modules and the factory's
runtime and kits), calls no dangerous builtin, touches no dunder attribute, runs
nothing at import (every top-level statement, decorator, class body and default
argument is a definition or a constant-like expression), defines the contract's
names with their signatures, and calls only the target's tools with their
parameters. The sandbox still confines whatever these checks miss.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from typing import Any

import libcst as cst
import libcst.matchers as m

from factory.runtime import Knob
from factory.validate.import_time import (
    DOCSTRING,
    dotted,
    line,
    side_effects,
    walk,
)
from factory.validate.static_checks import check_tool_signatures, contract_problems

# Standard-library modules with no file, process, network or interpreter access.
ALLOWED_STDLIB = frozenset(
    {
        "__future__",
        "bisect",
        "calendar",
        "collections",
        "collections.abc",
        "copy",
        "dataclasses",
        "datetime",
        "decimal",
        "enum",
        "fractions",
        "functools",
        "hashlib",
        "heapq",
        "itertools",
        "json",
        "math",
        "operator",
        "random",
        "re",
        "statistics",
        "string",
        "textwrap",
        "typing",
        "uuid",
    }
)
RUNTIME_PREFIX = "factory.runtime"
FORBIDDEN_NAMES = frozenset(
    {
        "__builtins__",
        "__import__",
        "__loader__",
        "__spec__",
        "breakpoint",
        "compile",
        "delattr",
        "eval",
        "exec",
        "exit",
        "getattr",
        "globals",
        "help",
        "input",
        "locals",
        "memoryview",
        "open",
        "quit",
        "setattr",
        "vars",
    }
)
TASK_MODULE_CONTRACT: dict[str, tuple[str, ...] | None] = {
    "TOOLKIT": None,
    "KNOBS": None,
    "build_task": ("rng", "knobs", "task_id"),
}


# Relative imports a kit module may make: (level, module) as in `from ...schema import`.
KIT_RELATIVE = frozenset({(3, "schema"), (3, "toolkit"), (1, "world"), (1, "")})


def _import_problems(
    module: cst.Module, relative: frozenset[tuple[int, str]] = frozenset()
) -> Iterable[str]:
    for node in walk(module):
        if isinstance(node, cst.Import):
            for alias in node.names:
                name = dotted(alias.name)
                if not _allowed_module(name):
                    yield f"imports `{name}`, which is not on the allow-list"
        elif isinstance(node, cst.ImportFrom):
            name = dotted(node.module) if node.module else ""
            if node.relative:
                if (len(node.relative), name) not in relative:
                    yield f"relative import `{line(module, node)}` is not allowed here"
            elif not _allowed_module(name):
                yield f"imports from `{name}`, which is not on the allow-list"
            if isinstance(node.names, cst.ImportStar):
                yield f"star import from `{name}`"


def _allowed_module(name: str) -> bool:
    return (
        name in ALLOWED_STDLIB
        or name == RUNTIME_PREFIX
        or name.startswith(RUNTIME_PREFIX + ".")
    )


def _dangerous(module: cst.Module) -> Iterable[str]:
    nodes = list(walk(module))
    # `re.compile` is fine, bare `compile` is not: attribute names are not names in scope.
    attribute_names = {id(n.attr) for n in nodes if isinstance(n, cst.Attribute)}
    for node in nodes:
        if (
            isinstance(node, cst.Name)
            and node.value in FORBIDDEN_NAMES
            and id(node) not in attribute_names
        ):
            yield f"uses `{node.value}`, which generated code may not use"
        elif isinstance(node, cst.Attribute) and node.attr.value.startswith("__"):
            yield f"accesses the dunder attribute `{node.attr.value}`"
        elif isinstance(node, (cst.Global, cst.Nonlocal)):
            yield f"uses `{line(module, node)}`"


def _tool_call_problems(
    module: cst.Module, tools: Mapping[str, set[str]]
) -> Iterable[str]:
    """`call("tool", ...)`, `run(state, "tool", ...)` and `fails(...)` name real tools and parameters."""
    for node in walk(module):
        if not isinstance(node, cst.Call):
            continue
        name = dotted(node.func).rsplit(".", 1)[-1]
        position = {"call": 0, "run": 1, "fails": 1}.get(name)
        if position is None or len(node.args) <= position:
            continue
        tool = node.args[position].value
        if not isinstance(tool, cst.SimpleString):
            continue
        tool_name = tool.evaluated_value
        if tool_name not in tools:
            yield f"`{line(module, node)}` calls `{tool_name}`, which is not a target tool"
            continue
        for argument in node.args[position + 1 :]:
            keyword = argument.keyword.value if argument.keyword else None
            if keyword is not None and keyword not in tools[tool_name]:
                yield f"`{tool_name}` has no parameter `{keyword}` (has: {', '.join(sorted(tools[tool_name]))})"


def _parse(source: str) -> tuple[cst.Module | None, list[str]]:
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        return None, [f"does not parse: {exc.message} (line {exc.raw_line})"]
    if not (module.body and m.matches(module.body[0], DOCSTRING)):
        return module, ["has no module docstring"]
    return module, []


def check_kit_modules(
    tools_source: str, world_source: str, tool_schemas: Iterable[Mapping[str, Any]]
) -> list[str]:
    """Every reason to refuse a model-written kit (`tools.py` and `world.py`).

    Besides the rules for task modules: relative imports only of the runtime's
    `schema`/`toolkit` and the kit's own `world` and `TOOLKIT`, `IMPLEMENTATIONS`
    defined, and one function per tool taking (state, the schema's parameters).
    """
    schemas = list(tool_schemas)
    problems = []
    for filename, source, contract in (
        ("tools.py", tools_source, {"IMPLEMENTATIONS": None}),
        ("world.py", world_source, {}),
    ):
        module, found = _parse(source)
        if module is not None:
            found += [
                *_import_problems(module, KIT_RELATIVE),
                *_dangerous(module),
                *side_effects(module),
                *contract_problems(module, contract),
            ]
        problems += [f"{filename}: {problem}" for problem in found]
    if not any(p.startswith("tools.py: does not parse") for p in problems):
        problems += [
            f"tools.py: {p}" for p in check_tool_signatures(tools_source, schemas)
        ]
    return list(dict.fromkeys(problems))


def check_task_module(
    source: str, tool_schemas: Iterable[Mapping[str, Any]]
) -> list[str]:
    """Every reason to refuse a model-written task module (empty when it may be run)."""
    module, problems = _parse(source)
    if module is None:
        return problems
    tools = {
        schema["function"]["name"]: set(
            schema["function"]["parameters"].get("properties", {})
        )
        for schema in tool_schemas
    }
    problems += [
        *_import_problems(module),
        *_dangerous(module),
        *side_effects(module),
        *contract_problems(module, TASK_MODULE_CONTRACT),
        *_tool_call_problems(module, tools),
    ]
    return list(dict.fromkeys(problems))


def literal_knobs(source: str) -> tuple[Knob, ...]:
    """`KNOBS` read without running the module: a tuple of `Knob(...)` with literal arguments.

    Raises ValueError naming what is not literal (model-written code is never
    imported in the factory's own process).
    """
    module = cst.parse_module(source)
    for statement in module.body:
        if not m.matches(
            statement,
            m.SimpleStatementLine(
                body=[m.Assign(targets=[m.AssignTarget(m.Name("KNOBS"))])]
            ),
        ):
            continue
        value = statement.body[0].value  # type: ignore[attr-defined]
        if not isinstance(value, (cst.Tuple, cst.List)):
            raise ValueError("KNOBS must be a tuple of Knob(...) calls")
        knobs = []
        for element in value.elements:
            call = element.value
            if not (isinstance(call, cst.Call) and dotted(call.func) == "Knob"):
                raise ValueError("every element of KNOBS must be a Knob(...) call")
            try:
                positional = [
                    ast.literal_eval(module.code_for_node(a.value))
                    for a in call.args
                    if not a.keyword
                ]
                named = {
                    a.keyword.value: ast.literal_eval(module.code_for_node(a.value))
                    for a in call.args
                    if a.keyword
                }
                knob = Knob(*positional, **named)
            except (ValueError, TypeError, SyntaxError) as exc:
                raise ValueError(
                    f"`{line(module, call)}` must be Knob(name, default, minimum, maximum, help) "
                    f"with literal values ({exc})"
                ) from None
            if not (
                isinstance(knob.name, str)
                and all(
                    isinstance(v, int)
                    for v in (knob.default, knob.minimum, knob.maximum)
                )
                and knob.minimum <= knob.default <= knob.maximum
            ):
                raise ValueError(
                    f"`{line(module, call)}` needs minimum <= default <= maximum, integers"
                )
            knobs.append(knob)
        return tuple(knobs)
    raise ValueError("the module does not define KNOBS")

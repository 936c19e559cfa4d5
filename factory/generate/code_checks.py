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
# Calls allowed at import time (building constants), by their last name part.
CONSTANT_BUILDERS = frozenset(
    {"Knob", "tuple", "frozenset", "dict", "list", "set", "range", "sorted", "date",
     "timedelta", "Decimal", "compile", "field"}
)  # fmt: skip
TASK_MODULE_CONTRACT: dict[str, tuple[str, ...] | None] = {
    "TOOLKIT": None,
    "KNOBS": None,
    "build_task": ("rng", "knobs", "task_id"),
}


DOCSTRING = m.SimpleStatementLine(body=[m.Expr(value=m.SimpleString())])


def _dotted(node: cst.BaseExpression) -> str:
    """`a.b.c` for a Name/Attribute chain, "" otherwise."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr.value}" if inner else ""
    return ""


def _line(module: cst.Module, node: cst.CSTNode) -> str:
    return module.code_for_node(node).strip().splitlines()[0][:120]


# Relative imports a kit module may make: (level, module) as in `from ...schema import`.
KIT_RELATIVE = frozenset({(3, "schema"), (3, "toolkit"), (1, "world"), (1, "")})


def _import_problems(
    module: cst.Module, relative: frozenset[tuple[int, str]] = frozenset()
) -> Iterable[str]:
    for node in _walk(module):
        if isinstance(node, cst.Import):
            for alias in node.names:
                name = _dotted(alias.name)
                if not _allowed_module(name):
                    yield f"imports `{name}`, which is not on the allow-list"
        elif isinstance(node, cst.ImportFrom):
            name = _dotted(node.module) if node.module else ""
            if node.relative:
                if (len(node.relative), name) not in relative:
                    yield f"relative import `{_line(module, node)}` is not allowed here"
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


def _walk(node: cst.CSTNode) -> Iterable[cst.CSTNode]:
    """Every node below `node` (libcst has visitors; a generator reads simpler here)."""
    yield node
    for child in node.children:
        yield from _walk(child)


def _dangerous(module: cst.Module) -> Iterable[str]:
    nodes = list(_walk(module))
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
            yield f"uses `{_line(module, node)}`"


def _constant_like(node: cst.CSTNode) -> bool:
    """An expression safe to evaluate at import: literals, names, and constant builders."""
    for inner in _walk(node):
        if isinstance(inner, (cst.Lambda, cst.Await, cst.Yield, cst.NamedExpr)):
            return False
        if isinstance(inner, cst.Call):
            name = _dotted(inner.func).rsplit(".", 1)[-1]
            if name not in CONSTANT_BUILDERS:
                return False
    return True


def _side_effects(module: cst.Module) -> Iterable[str]:
    """Anything that would run at import beyond defining names and constants."""
    for index, statement in enumerate(module.body):
        if index == 0 and m.matches(statement, DOCSTRING):
            continue
        if isinstance(statement, cst.FunctionDef):
            yield from _definition_problems(module, statement)
        elif isinstance(statement, cst.ClassDef):
            yield from _class_problems(module, statement)
        elif isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                yield from _small_problems(module, small)
        else:
            yield f"top-level statement runs at import: `{_line(module, statement)}`"


def _small_problems(module: cst.Module, small: cst.BaseSmallStatement) -> Iterable[str]:
    if isinstance(small, (cst.Import, cst.ImportFrom, cst.Pass)):
        return
    if isinstance(small, cst.Assign) and _constant_like(small.value):
        return
    if isinstance(small, cst.AnnAssign) and (
        small.value is None or _constant_like(small.value)
    ):
        return
    yield f"top-level code runs at import: `{_line(module, small)}`"


def _definition_problems(
    module: cst.Module, function: cst.FunctionDef
) -> Iterable[str]:
    for decorator in function.decorators:
        if _dotted(decorator.decorator) not in {
            "staticmethod",
            "classmethod",
            "property",
        }:
            yield f"decorator runs at import: `@{_line(module, decorator.decorator)}`"
    parameters = function.params
    every = [*parameters.posonly_params, *parameters.params, *parameters.kwonly_params]
    for parameter in every:
        if parameter.default is not None and not _constant_like(parameter.default):
            yield f"default argument runs at import: `{_line(module, parameter.default)}`"
        if parameter.annotation is not None and not _constant_like(
            parameter.annotation
        ):
            yield f"annotation runs code: `{_line(module, parameter.annotation)}`"


def _class_problems(module: cst.Module, cls: cst.ClassDef) -> Iterable[str]:
    for decorator in cls.decorators:
        target = decorator.decorator
        name = _dotted(target.func if isinstance(target, cst.Call) else target)
        if name not in {"dataclass", "dataclasses.dataclass"} or not _constant_like(
            target
        ):
            yield f"class decorator runs at import: `@{_line(module, target)}`"
    for base in cls.bases:
        if not _dotted(base.value):
            yield f"class base is computed: `{_line(module, base.value)}`"
    if cls.keywords:
        yield f"class `{cls.name.value}` takes keywords (a metaclass runs at import)"
    body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else []
    for statement in body:
        if isinstance(statement, cst.FunctionDef):
            yield from _definition_problems(module, statement)
        elif isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Expr) and isinstance(
                    small.value, cst.SimpleString
                ):
                    continue
                yield from _small_problems(module, small)
        else:
            yield f"class body runs code: `{_line(module, statement)}`"


def _tool_call_problems(
    module: cst.Module, tools: Mapping[str, set[str]]
) -> Iterable[str]:
    """`call("tool", ...)`, `run(state, "tool", ...)` and `fails(...)` name real tools and parameters."""
    for node in _walk(module):
        if not isinstance(node, cst.Call):
            continue
        name = _dotted(node.func).rsplit(".", 1)[-1]
        position = {"call": 0, "run": 1, "fails": 1}.get(name)
        if position is None or len(node.args) <= position:
            continue
        tool = node.args[position].value
        if not isinstance(tool, cst.SimpleString):
            continue
        tool_name = tool.evaluated_value
        if tool_name not in tools:
            yield f"`{_line(module, node)}` calls `{tool_name}`, which is not a target tool"
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
                *_side_effects(module),
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
        *_side_effects(module),
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
            if not (isinstance(call, cst.Call) and _dotted(call.func) == "Knob"):
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
                    f"`{_line(module, call)}` must be Knob(name, default, minimum, maximum, help) "
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
                    f"`{_line(module, call)}` needs minimum <= default <= maximum, integers"
                )
            knobs.append(knob)
        return tuple(knobs)
    raise ValueError("the module does not define KNOBS")

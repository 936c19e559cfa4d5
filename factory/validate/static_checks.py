"""Static checks of a generated package's modules, with libcst.

Each module must parse, carry a module docstring, define its required symbols
with the contract's signatures, import only the standard library, gymnasium and
the package itself (never a process, network or foreign-code module), and run
nothing at import but constant builders and the package's own code
(`factory.validate.import_time`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import libcst as cst
import libcst.matchers as m

from factory.package_layout import STAMP, content_hash
from factory.ruff_runner import run_ruff
from factory.validate.import_time import (
    builds_constant,
    dotted,
    refused_imports,
    side_effects,
    walk,
)

# Symbols every package module must define (functions with their parameters).
REQUIRED: dict[str, dict[str, tuple[str, ...] | None]] = {
    "__init__.py": {
        "ENV_ID": None,
        "CAPABILITY": None,
        "FAMILY": None,
        "register_env": (),
    },
    "task.py": {
        "KNOBS": None,
        "TOOLKIT": None,
        "build_task": ("rng", "knobs", "task_id"),
    },
    "integrations.py": {},
    "verifiers_env.py": {},
}
ALLOWED_THIRD_PARTY = {"gymnasium"}
TEST_THIRD_PARTY = {"gymnasium", "hypothesis", "pytest"}


def _parameters(function: cst.FunctionDef) -> tuple[str, ...]:
    params = function.params
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    return tuple(p.name.value for p in every)


def _is_docstring(statement: cst.BaseStatement) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(
            statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString)
        )
    )


def _is_main_guard(statement: cst.BaseStatement) -> bool:
    """`if __name__ == "__main__":` (runs only when executed, never on import)."""
    return m.matches(
        statement,
        m.If(
            test=m.Comparison(
                left=m.Name("__name__"),
                comparisons=[
                    m.ComparisonTarget(
                        operator=m.Equal(),
                        comparator=m.SimpleString('"__main__"')
                        | m.SimpleString("'__main__'"),
                    )
                ],
            ),
            orelse=None,
        ),
    )


def _registers(statement: cst.BaseStatement) -> bool:
    """`register_env()` alone on a line: what `__init__.py` runs on import."""
    return m.matches(
        statement,
        m.SimpleStatementLine(
            body=[m.Expr(value=m.Call(func=m.Name("register_env"), args=[]))]
        ),
    )


def _own_names(module: cst.Module, package: str, roots: set[str]) -> set[str]:
    """Names bound by imports from the package itself (its verbatim, stamped runtime
    among them) or from the modules named in `roots`: calls to them at import are
    the package's own business."""
    names = set()
    for node in walk(module):
        if isinstance(node, cst.ImportFrom) and not isinstance(
            node.names, cst.ImportStar
        ):
            source = dotted(node.module) if node.module else ""
            if node.relative or source.split(".")[0] in {package, *roots}:
                names |= {
                    dotted(a.asname.name if a.asname else a.name) for a in node.names
                }
        elif isinstance(node, cst.Import):
            names |= {
                dotted(a.asname.name if a.asname else a.name).split(".")[0]
                for a in node.names
                if dotted(a.name).split(".")[0] in {package, *roots}
            }
    return names | roots


def _import_time_problems(
    module: cst.Module, filename: str, package: str, roots: set[str]
) -> Iterable[str]:
    """Top-level code may import, define, and build constants; calls at import go
    only to constant builders and the package's own code (`__init__` may also call
    register_env(), and `if __name__ == "__main__":` runs only when executed)."""
    own = _own_names(module, package, roots)

    def trusted(name: str) -> bool:
        return builds_constant(name) or name.split(".")[0] in own

    def statement_ok(statement: cst.BaseStatement) -> bool:
        return _is_main_guard(statement) or (
            filename == "__init__.py" and _registers(statement)
        )

    yield from side_effects(module, trusted, statement_ok, lambdas=True)
    yield from refused_imports(module)


def _import_problems(
    module: cst.Module, package: str, allowed: set[str]
) -> Iterable[str]:
    permitted = set(sys.stdlib_module_names) | allowed | {package, "__future__"}
    for node in _walk_imports(module):
        if isinstance(node, cst.ImportFrom):
            if node.relative:
                continue
            roots = (
                [module.code_for_node(node.module).split(".")[0]] if node.module else []
            )
        else:
            roots = [module.code_for_node(a.name).split(".")[0] for a in node.names]
        for root in roots:
            if root not in permitted:
                yield f"imports '{root}' (only the standard library, {', '.join(sorted(allowed))} and the package itself are allowed)"


def _walk_imports(module: cst.Module) -> list[cst.Import | cst.ImportFrom]:
    found: list[cst.Import | cst.ImportFrom] = []

    class _Collector(cst.CSTVisitor):
        def visit_Import(self, node: cst.Import) -> None:
            found.append(node)

        def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
            found.append(node)

    module.visit(_Collector())
    return found


def _definitions(module: cst.Module) -> dict[str, cst.CSTNode]:
    names: dict[str, cst.CSTNode] = {}
    for statement in module.body:
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            names[statement.name.value] = statement
        elif isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                targets = []
                if isinstance(small, cst.Assign):
                    targets = [t.target for t in small.targets]
                elif isinstance(small, cst.AnnAssign):
                    targets = [small.target]
                for target in targets:
                    if isinstance(target, cst.Name):
                        names[target.value] = small
    return names


def check_module(
    source: str,
    filename: str,
    package: str,
    required: dict[str, tuple[str, ...] | None],
    allowed: set[str] = ALLOWED_THIRD_PARTY,
) -> list[str]:
    """Problems found in one module's source (empty when it passes)."""
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        return [f"does not parse: {exc.message} (line {exc.raw_line})"]
    problems = []
    if not module.body or not _is_docstring(module.body[0]):
        problems.append("has no module docstring")
    problems += list(
        _import_time_problems(module, filename, package, allowed - ALLOWED_THIRD_PARTY)
    )
    problems += list(_import_problems(module, package, allowed))
    problems += contract_problems(module, required)
    return problems


def contract_problems(
    module: cst.Module, required: Mapping[str, tuple[str, ...] | None]
) -> list[str]:
    """Names the module must define at top level, functions with these parameters."""
    defined = _definitions(module)
    problems = []
    for name, parameters in required.items():
        node = defined.get(name)
        if node is None:
            problems.append(f"does not define `{name}`")
        elif parameters is not None:
            if not isinstance(node, cst.FunctionDef):
                problems.append(f"`{name}` must be a function")
            elif _parameters(node) != parameters:
                problems.append(
                    f"`{name}` must take ({', '.join(parameters)}), "
                    f"takes ({', '.join(_parameters(node))})"
                )
    return problems


def check_tool_signatures(source: str, tools: Iterable[dict]) -> list[str]:
    """Every tool schema has a function `(<world>, <schema parameters>)`.

    The first parameter receives the state; tools with a `state` parameter of
    their own name it differently and make it positional-only.
    """
    defined = _definitions(cst.parse_module(source))
    problems = []
    for tool in tools:
        function = tool["function"]
        expected = set(function["parameters"].get("properties", {}))
        node = defined.get(function["name"])
        if not isinstance(node, cst.FunctionDef):
            problems.append(f"tool `{function['name']}` has no implementation")
        elif not _parameters(node) or set(_parameters(node)[1:]) != expected:
            problems.append(
                f"tool `{function['name']}` takes ({', '.join(_parameters(node))}); "
                f"its schema needs (state, {', '.join(sorted(expected))})"
            )
    return problems


def lint_problems(root: Path) -> list[str]:
    """Pyflakes-class errors (undefined or unused names, syntax) found by ruff."""
    result = run_ruff(
        "check",
        "--isolated",
        "--no-cache",
        "--select",
        "F,E9",
        "--output-format",
        "concise",
        "--quiet",
        ".",
        cwd=root,
    )
    return [line for line in result.stdout.splitlines() if line.strip()]


def check_runtime(root: Path, package: str) -> list[str]:
    """`_runtime/` must match its stamp, and its kit's tools their schemas."""
    runtime = root / package / "_runtime"
    stamp_path = runtime / STAMP
    try:
        stamp = json.loads(stamp_path.read_text(encoding="utf-8"))
        kit = stamp["kit"]
    except (OSError, ValueError, KeyError, TypeError):
        return [
            f"{package}/_runtime/{STAMP}: missing or unreadable; regenerate the package"
        ]
    files = {
        path.relative_to(runtime).as_posix(): path.read_text(encoding="utf-8")
        for path in sorted(runtime.rglob("*"))
        if path.is_file() and path.name != STAMP and "__pycache__" not in path.parts
    }
    problems = []
    if content_hash(files) != stamp.get("sha256"):
        problems.append(
            f"{package}/_runtime: its files differ from the stamped runtime "
            f"{stamp.get('runtime_version')} (edited by hand?); regenerate the package"
        )
    kit_json = runtime / "kits" / str(kit) / "kit.json"
    tools = runtime / "kits" / str(kit) / "tools.py"
    if kit_json.is_file() and tools.is_file():
        schemas = json.loads(kit_json.read_text(encoding="utf-8"))["tools"]
        # Tools may come from the kit's other modules (e.g. the phone kit's utilities)
        # and from the shared kit modules beside the kit (e.g. calculator).
        modules = sorted(tools.parent.glob("*.py")) + sorted(
            (runtime / "kits").glob("*.py")
        )
        sources = [path.read_text(encoding="utf-8") for path in modules]
        found = check_tool_signatures("\n".join(sources), schemas)
        problems += [f"{package}/_runtime/kits/{kit}/tools.py: {p}" for p in found]
    return problems


def check_package(root: Path, package: str, camel: str) -> list[str]:
    """All static problems of the package at `root`, each prefixed with its file."""
    problems = lint_problems(root)
    for filename, required in REQUIRED.items():
        path = root / package / filename
        if not path.is_file():
            problems.append(f"{package}/{filename}: missing")
            continue
        needed = dict(required)
        if filename == "__init__.py":
            needed[f"{camel}Env"] = None
        source = path.read_text(encoding="utf-8")
        found = check_module(source, filename, package, needed)
        problems += [f"{package}/{filename}: {problem}" for problem in found]
    problems += check_runtime(root, package)
    for path in sorted((root / "tests").glob("test_*.py")):
        found = check_module(
            path.read_text(encoding="utf-8"), path.name, package, {}, TEST_THIRD_PARTY
        )
        problems += [f"tests/{path.name}: {problem}" for problem in found]
    return problems

"""What a module runs when it is imported, read with libcst before it is ever run.

Importing a package must define names and nothing else: no process started, no
socket opened, no file written, before the sandbox or a user has chosen to run
anything. Each top-level statement, decorator, default argument, annotation and
class body is read here; a call in any of them is allowed only where the caller
says the callee builds constants (`Knob(...)`, `tuple(...)`, the package's own
runtime). The checks of model-written code (`factory.generate.code_checks`) and
of every package `factory validate` reads (`static_checks`) share these rules;
the sandbox confines whatever they miss.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import libcst as cst
import libcst.matchers as m

# Calls allowed at import time everywhere (building constants), by their last name part.
CONSTANT_BUILDERS = frozenset(
    {"Knob", "tuple", "frozenset", "dict", "list", "set", "range", "sorted", "date",
     "timedelta", "Decimal", "compile", "field"}
)  # fmt: skip
# Modules that reach processes, the network or foreign code: never imported.
REFUSED_MODULES = frozenset(
    {"subprocess", "socket", "ctypes", "multiprocessing", "pty", "asyncio",
     "socketserver", "http", "urllib", "ftplib", "smtplib", "telnetlib", "ssl",
     "webbrowser", "_posixsubprocess", "cffi", "mmap"}
)  # fmt: skip
# `os` functions that start or replace processes (`os.system` and its kin).
PROCESS_CALLS = ("system", "popen", "fork", "forkpty", "posix_spawn", "exec", "spawn")
DOCSTRING = m.SimpleStatementLine(body=[m.Expr(value=m.SimpleString())])
# A callee's dotted name -> whether calling it at import only builds a constant.
Trusted = Callable[[str], bool]


def builds_constant(name: str) -> bool:
    """Whether `name` is one of the constant builders (by its last part)."""
    return name.rsplit(".", 1)[-1] in CONSTANT_BUILDERS


def dotted(node: cst.BaseExpression) -> str:
    """`a.b.c` for a Name/Attribute chain, "" otherwise."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        inner = dotted(node.value)
        return f"{inner}.{node.attr.value}" if inner else ""
    return ""


def line(module: cst.Module, node: cst.CSTNode) -> str:
    """The node's first line of code (for a message)."""
    return module.code_for_node(node).strip().splitlines()[0][:120]


def walk(node: cst.CSTNode) -> Iterable[cst.CSTNode]:
    """Every node below `node` (libcst has visitors; a generator reads simpler here)."""
    yield node
    for child in node.children:
        yield from walk(child)


def refused_imports(module: cst.Module) -> Iterable[str]:
    """Imports of process, network and foreign-code modules, and `os.system`-like
    calls, anywhere in the module (inside functions too: they run in the sandbox,
    which is the last line, not the first)."""
    for node in walk(module):
        names: list[str] = []
        if isinstance(node, cst.Import):
            names = [dotted(alias.name) for alias in node.names]
        elif isinstance(node, cst.ImportFrom) and not node.relative and node.module:
            names = [dotted(node.module)]
        for name in names:
            if name.split(".")[0] in REFUSED_MODULES:
                yield f"imports `{name}` (process, network and foreign-code modules are refused)"
        if isinstance(node, cst.Call):
            name = dotted(node.func)
            if name.startswith("os.") and name[3:].startswith(PROCESS_CALLS):
                yield f"calls `{name}`, which starts a process"


def _constant_like(node: cst.CSTNode, trusted: Trusted, lambdas: bool) -> bool:
    """An expression safe to evaluate at import: literals, names, and trusted calls
    (a lambda only defines a function, its body unread: allowed where `lambdas`)."""
    if isinstance(node, cst.Lambda) and lambdas:
        return True
    if isinstance(node, (cst.Lambda, cst.Await, cst.Yield, cst.NamedExpr)):
        return False
    if isinstance(node, cst.Call) and not trusted(dotted(node.func)):
        return False
    return all(_constant_like(child, trusted, lambdas) for child in node.children)


def side_effects(
    module: cst.Module,
    trusted: Trusted = builds_constant,
    statement_ok: Callable[[cst.BaseStatement], bool] = lambda _: False,
    lambdas: bool = False,
) -> Iterable[str]:
    """Anything that would run at import beyond defining names and constants:
    calls `trusted` does not accept in assignments, annotated assignments,
    decorators, default arguments, annotations and class bodies, and any other
    top-level statement `statement_ok` does not accept."""
    reader = _Reader(module, trusted, lambdas)
    for index, statement in enumerate(module.body):
        if (index == 0 and m.matches(statement, DOCSTRING)) or statement_ok(statement):
            continue
        if isinstance(statement, cst.FunctionDef):
            yield from reader.definition(statement)
        elif isinstance(statement, cst.ClassDef):
            yield from reader.cls(statement)
        elif isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                yield from reader.small(small)
        else:
            yield f"top-level statement runs at import: `{line(module, statement)}`"


class _Reader:
    """The rules of `side_effects` for one module and one notion of trusted calls."""

    def __init__(self, module: cst.Module, trusted: Trusted, lambdas: bool) -> None:
        self.module, self.trusted, self.lambdas = module, trusted, lambdas

    def constant(self, node: cst.CSTNode) -> bool:
        return _constant_like(node, self.trusted, self.lambdas)

    def small(self, small: cst.BaseSmallStatement) -> Iterable[str]:
        if isinstance(small, (cst.Import, cst.ImportFrom, cst.Pass)):
            return
        if isinstance(small, cst.Assign) and self.constant(small.value):
            return
        if isinstance(small, cst.AnnAssign) and (
            small.value is None or self.constant(small.value)
        ) and self.constant(small.annotation):  # fmt: skip
            return
        yield f"top-level code runs at import: `{line(self.module, small)}`"

    def definition(self, function: cst.FunctionDef) -> Iterable[str]:
        for decorator in function.decorators:
            target = decorator.decorator
            plain = dotted(target) in {"staticmethod", "classmethod", "property"}
            if not (plain or (isinstance(target, cst.Call) and self.constant(target))):
                yield f"decorator runs at import: `@{line(self.module, target)}`"
        parameters = function.params
        every = [
            *parameters.posonly_params,
            *parameters.params,
            *parameters.kwonly_params,
        ]
        for parameter in every:
            if parameter.default is not None and not self.constant(parameter.default):
                yield f"default argument runs at import: `{line(self.module, parameter.default)}`"
            if parameter.annotation is not None and not self.constant(
                parameter.annotation
            ):
                yield f"annotation runs code: `{line(self.module, parameter.annotation)}`"
        if function.returns is not None and not self.constant(function.returns):
            yield f"annotation runs code: `{line(self.module, function.returns)}`"

    def cls(self, cls: cst.ClassDef) -> Iterable[str]:
        for decorator in cls.decorators:
            target = decorator.decorator
            name = dotted(target.func if isinstance(target, cst.Call) else target)
            if name not in {"dataclass", "dataclasses.dataclass"} or not self.constant(
                target
            ):
                yield f"class decorator runs at import: `@{line(self.module, target)}`"
        for base in cls.bases:
            if not dotted(base.value):
                yield f"class base is computed: `{line(self.module, base.value)}`"
        if cls.keywords:
            yield f"class `{cls.name.value}` takes keywords (a metaclass runs at import)"
        body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else []
        for statement in body:
            if isinstance(statement, cst.FunctionDef):
                yield from self.definition(statement)
            elif isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    if isinstance(small, cst.Expr) and isinstance(
                        small.value, cst.SimpleString
                    ):
                        continue
                    yield from self.small(small)
            else:
                yield f"class body runs code: `{line(self.module, statement)}`"

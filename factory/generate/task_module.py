"""Turn an archetype's task module into a package's `task.py`.

Two rewrites, with libcst so nothing else in the module moves: imports of
`factory.runtime...` become relative imports of the package's `_runtime`, and
the module docstring names the capability the package trains and how reward is
computed.
"""

from __future__ import annotations

import libcst as cst

RUNTIME = "factory.runtime"


def _relative(module: str) -> cst.Attribute | cst.Name:
    """`factory.runtime.kits.airline` -> the dotted name `_runtime.kits.airline`."""
    parts = ["_runtime", *module.split(".")[2:]]
    node: cst.Attribute | cst.Name = cst.Name(parts[0])
    for part in parts[1:]:
        node = cst.Attribute(value=node, attr=cst.Name(part))
    return node


class _Rewrite(cst.CSTTransformer):
    def __init__(self, docstring: str) -> None:
        self.docstring = docstring

    def leave_ImportFrom(
        self, original: cst.ImportFrom, updated: cst.ImportFrom
    ) -> cst.ImportFrom:
        if updated.module is None or updated.relative:
            return updated
        name = cst.Module([]).code_for_node(updated.module)
        if name != RUNTIME and not name.startswith(RUNTIME + "."):
            return updated
        return updated.with_changes(module=_relative(name), relative=[cst.Dot()])

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        first = updated.body[0] if updated.body else None
        if (
            isinstance(first, cst.SimpleStatementLine)
            and isinstance(first.body[0], cst.Expr)
            and isinstance(first.body[0].value, cst.SimpleString)
        ):
            text = self.docstring.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
            docstring = cst.Expr(cst.SimpleString(f'"""{text}\n"""'))
            return updated.with_changes(
                body=[first.with_changes(body=[docstring]), *updated.body[1:]]
            )
        return updated


def package_task_source(source: str, docstring: str) -> str:
    """The archetype module `source` as a package's `task.py` with `docstring`."""
    return cst.parse_module(source).visit(_Rewrite(docstring)).code

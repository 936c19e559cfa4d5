"""The `calculate` tool shared by the tau2-bench kits: + - * / arithmetic, no eval."""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

from ..schema import ToolError

State = dict[str, Any]

_ARITHMETIC_CHARS = frozenset("0123456789+-*/(). ")
_OPERATORS: dict[type, Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


def _arithmetic(node: ast.AST) -> float:
    """Evaluate a parsed + - * / expression; any other construct is refused."""
    if isinstance(node, ast.Expression):
        return _arithmetic(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        value = _arithmetic(node.operand)
        return value if isinstance(node.op, ast.UAdd) else -value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](
            _arithmetic(node.left), _arithmetic(node.right)
        )
    raise ToolError(
        "the expression may only combine numbers with + - * / and parentheses"
    )


def calculate(state: State, expression: str) -> str:
    """Evaluate an arithmetic expression, rounded to 2 decimals (no eval: ast only)."""
    if not expression.strip() or not set(expression) <= _ARITHMETIC_CHARS:
        raise ToolError(
            "the expression may contain only numbers, + - * /, parentheses and spaces"
        )
    try:
        value = _arithmetic(ast.parse(expression, mode="eval"))
    except (SyntaxError, ValueError, ZeroDivisionError, OverflowError, RecursionError):
        raise ToolError(f"cannot evaluate the expression '{expression[:60]}'") from None
    if not math.isfinite(value):
        raise ToolError("the result is not a finite number")
    return str(round(value, 2))

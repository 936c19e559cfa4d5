"""The `calculate` tool shared by the tau2-bench kits: tau2's arithmetic, without eval.

tau2 passes the expression to `eval` once it holds only digits, `+-*/().` and
spaces; this walks the parsed expression instead, with Python's own number
types and messages, so results and errors read the same. Two differences, both
listed in README: a power whose result would exceed 4096 bits is refused (tau2's
`eval('9**9**9')` never returns), and the few non-arithmetic forms those
characters allow (`()`, `...`, `(1)(2)`) get a plain refusal instead of
Python's TypeError text.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

from ..schema import ToolError

State = dict[str, Any]
Number = int | float

_ARITHMETIC_CHARS = frozenset("0123456789+-*/(). ")
_MAX_POWER_BITS = 4096
_OPERATORS: dict[type, Callable[[Number, Number], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
}


def _power(base: Number, exponent: Number) -> Number:
    """`base ** exponent`, refused when an integer result would be astronomically large."""
    if isinstance(base, int) and isinstance(exponent, int) and abs(base) > 1:
        if exponent * math.log2(abs(base)) > _MAX_POWER_BITS:
            raise ToolError("the result is too large")
    return base**exponent


def _arithmetic(node: ast.AST) -> Number:
    """Evaluate a parsed expression of numbers, + - * / // ** and parentheses."""
    if isinstance(node, ast.Expression):
        return _arithmetic(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        value = _arithmetic(node.operand)
        return +value if isinstance(node.op, ast.UAdd) else -value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        return _power(_arithmetic(node.left), _arithmetic(node.right))
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](
            _arithmetic(node.left), _arithmetic(node.right)
        )
    raise ToolError("the expression is not arithmetic on numbers")


def calculate(state: State, expression: str) -> str:
    """Evaluate an arithmetic expression and round it to 2 decimals, as tau2 does."""
    if not set(expression) <= _ARITHMETIC_CHARS:
        raise ToolError("Invalid characters in expression")
    try:
        value = _arithmetic(ast.parse(expression, "<string>", "eval"))
        result = round(float(value), 2)
    except (SyntaxError, ArithmeticError, TypeError, ValueError) as exc:
        raise ToolError(str(exc)) from None
    except (RecursionError, MemoryError):
        raise ToolError("the expression is nested too deeply") from None
    return str(result)

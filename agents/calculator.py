"""The safe arithmetic evaluator behind the `calculate` tool: exact Decimal arithmetic, no `eval`.

This module owns `evaluate`. An expression is parsed by `ast` (mode "eval") and walked against an
allow-list: number literals (read from their source text, so `0.1` is exactly one tenth), the
binary operators `+ - * / // % **`, unary `+ -`, parentheses, comparisons (chained, giving a
boolean), the names `pi` and `e`, and calls of `min max abs round sqrt log exp` with positional
arguments. Anything else (names, attributes, subscripts, strings, keywords, lambdas, f-strings)
is refused before anything runs. Limits bound the work: the expression's length, its nesting
depth and node count, and the size of an exponent; the Decimal context (28 digits, exponent range
+-9999) traps overflow, division by zero and invalid operations. `//` and `%` follow Python's
floor semantics, not Decimal's truncation. Every failure is a `CalculationError` with a code,
a message and a hint, shaped for `ToolError`.
"""

from __future__ import annotations

import ast
import decimal
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Final

MAX_EXPRESSION_CHARS: Final = 500
MAX_DEPTH: Final = 32
MAX_NODES: Final = 200
MAX_EXPONENT: Final = 1000
MAX_ROUND_DIGITS: Final = 28

_CONTEXT: Final = decimal.Context(
    prec=28,
    rounding=decimal.ROUND_HALF_EVEN,
    Emax=9999,
    Emin=-9999,
    traps=[decimal.Overflow, decimal.DivisionByZero, decimal.InvalidOperation],
)

_CONSTANTS: Final = {
    "pi": Decimal("3.141592653589793238462643383"),
    "e": Decimal("2.718281828459045235360287471"),
}

Value = Decimal | bool


class CalculationError(Exception):
    """An expression that cannot be evaluated: `code` is `invalid_expression` (refused before
    running) or `arithmetic_error` (refused while running), with a message and a hint."""

    def __init__(self, code: str, message: str, hint: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.hint = hint


def _invalid(message: str, hint: str = "") -> CalculationError:
    return CalculationError(
        "invalid_expression",
        message,
        hint
        or "Use numbers, + - * / // % **, parentheses, comparisons and "
        "min, max, abs, round, sqrt, log, exp.",
    )


def _arithmetic(message: str, hint: str = "Check the operands.") -> CalculationError:
    return CalculationError("arithmetic_error", message, hint)


def evaluate(expression: str) -> Value:
    """The exact value of `expression` (a Decimal, or a bool for a comparison)."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise _invalid(
            f"The expression is {len(expression)} characters long; the limit is "
            f"{MAX_EXPRESSION_CHARS}.",
            "Split the computation into several calls.",
        )
    if not expression.strip():
        raise _invalid("The expression is empty.")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise _invalid(f"The expression does not parse: {type(exc).__name__}.") from exc
    _check_shape(tree.body)
    try:
        with decimal.localcontext(_CONTEXT):
            return _Evaluator(expression.strip()).value(tree.body)
    except decimal.DivisionByZero as exc:
        raise _arithmetic("Division by zero.") from exc
    except decimal.Overflow as exc:
        raise _arithmetic("The result is too large.", "Keep magnitudes below 1e9999.") from exc
    except decimal.InvalidOperation as exc:
        raise _arithmetic("An operation is undefined for its operands (say 0/0).") from exc


def _check_shape(root: ast.AST) -> None:
    """Refuse trees that are too deep or too large, before walking them recursively."""
    count = 0
    stack: list[tuple[ast.AST, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        count += 1
        if depth > MAX_DEPTH:
            raise _invalid(f"The expression nests deeper than {MAX_DEPTH} levels.")
        if count > MAX_NODES:
            raise _invalid(f"The expression has more than {MAX_NODES} parts.")
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


def _sqrt(x: Decimal) -> Decimal:
    if x < 0:
        raise _arithmetic("sqrt of a negative number.")
    return x.sqrt()


def _log(x: Decimal, base: Decimal | None = None) -> Decimal:
    if x <= 0 or (base is not None and (base <= 0 or base == 1)):
        raise _arithmetic("log needs a positive argument (and a positive base other than 1).")
    return x.ln() if base is None else x.ln() / base.ln()


def _round(x: Decimal, digits: Decimal | None = None) -> Decimal:
    places = 0 if digits is None else _whole(digits, "round's digits")
    if abs(places) > MAX_ROUND_DIGITS:
        raise _invalid(f"round's digits must be within +-{MAX_ROUND_DIGITS}.")
    return x.quantize(Decimal(1).scaleb(-places), rounding=decimal.ROUND_HALF_EVEN)


def _exp(x: Decimal) -> Decimal:
    if x > 23000:  # e**23000 is past the context's largest exponent
        raise _arithmetic("The result is too large.", "Keep magnitudes below 1e9999.")
    return x.exp()


def _whole(value: Decimal, what: str) -> int:
    if value != value.to_integral_value():
        raise _invalid(f"{what} must be a whole number.")
    return int(value)


#: name -> (function, least and most arguments)
_FUNCTIONS: Final[dict[str, tuple[Callable[..., Decimal], int, int]]] = {
    "min": (lambda *xs: min(xs), 1, 50),
    "max": (lambda *xs: max(xs), 1, 50),
    "abs": (abs, 1, 1),
    "round": (_round, 1, 2),
    "sqrt": (_sqrt, 1, 1),
    "log": (_log, 1, 2),
    "exp": (_exp, 1, 1),
}


def _floordiv(a: Decimal, b: Decimal) -> Decimal:
    quotient, remainder = divmod(a, b)
    if remainder and (remainder < 0) != (b < 0):
        quotient -= 1
    return quotient


def _mod(a: Decimal, b: Decimal) -> Decimal:
    remainder = a % b
    if remainder and (remainder < 0) != (b < 0):
        remainder += b
    return remainder


def _power(base: Decimal, exponent: Decimal) -> Decimal:
    if abs(exponent) > MAX_EXPONENT:
        raise _invalid(
            f"Exponent {exponent} is too large; exponents must be within +-{MAX_EXPONENT}.",
            "Use log and exp for very large powers, or a smaller exponent.",
        )
    if base == 0 and exponent < 0:
        raise _arithmetic("Division by zero (zero to a negative power).")
    if base < 0 and exponent != exponent.to_integral_value():
        raise _arithmetic("A negative number to a fractional power is not a real number.")
    return base**exponent


_BINARY: Final[dict[type[ast.operator], Callable[[Decimal, Decimal], Decimal]]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: _floordiv,
    ast.Mod: _mod,
    ast.Pow: _power,
}

_COMPARE: Final[dict[type[ast.cmpop], Callable[[Decimal, Decimal], bool]]] = {
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
}


class _Evaluator:
    """Walks an allow-listed tree; every node type not handled here is refused."""

    def __init__(self, source: str) -> None:
        self._source = source

    def value(self, node: ast.expr) -> Value:
        if isinstance(node, ast.Compare):
            return self._compare(node)
        return self.number(node)

    def number(self, node: ast.expr) -> Decimal:
        if isinstance(node, ast.Constant):
            return self._constant(node)
        if isinstance(node, ast.Name) and node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd | ast.USub):
            operand = self.number(node.operand)
            return +operand if isinstance(node.op, ast.UAdd) else -operand
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right = self.number(node.left), self.number(node.right)
            if right == 0 and isinstance(node.op, ast.Div | ast.FloorDiv | ast.Mod):
                raise _arithmetic("Division by zero.")
            return +_BINARY[type(node.op)](left, right)
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.Compare):
            raise _invalid("A comparison can only be the whole expression.")
        raise _invalid(f"{_describe(node)} is not allowed.")

    def _constant(self, node: ast.Constant) -> Decimal:
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise _invalid(f"{_describe(node)} is not allowed.")
        text = ast.get_source_segment(self._source, node)
        try:
            number = Decimal(text if text is not None else str(node.value))
        except decimal.InvalidOperation as exc:
            raise _invalid(f"{text!r} is not a number.") from exc
        return +number  # applies the context: an out-of-range literal overflows here

    def _call(self, node: ast.Call) -> Decimal:
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
            called = node.func.id if isinstance(node.func, ast.Name) else "this"
            raise _invalid(f"Calling {called} is not allowed.")
        name = node.func.id
        if node.keywords:
            raise _invalid(f"{name} takes positional arguments only.")
        function, least, most = _FUNCTIONS[name]
        if not least <= len(node.args) <= most:
            raise _invalid(f"{name} takes {least} to {most} arguments, got {len(node.args)}.")
        if any(isinstance(arg, ast.Starred) for arg in node.args):
            raise _invalid("Unpacking (*) is not allowed.")
        args: Sequence[Decimal] = [self.number(arg) for arg in node.args]
        return +function(*args)

    def _compare(self, node: ast.Compare) -> bool:
        left = self.number(node.left)
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            compare = _COMPARE.get(type(op))
            if compare is None:
                raise _invalid(f"The comparison {type(op).__name__} is not allowed.")
            right = self.number(right_node)
            if not compare(left, right):
                return False
            left = right
        return True


def _describe(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return f"The name {node.id!r}"
    if isinstance(node, ast.Attribute):
        return "Attribute access"
    if isinstance(node, ast.Constant):
        return f"The literal {type(node.value).__name__}"
    return f"A {type(node).__name__} expression"

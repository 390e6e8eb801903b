"""The safe evaluator: exact Decimal results, Python's floor semantics, and every refusal (names,
attributes, calls, huge exponents, long or deep input) a structured error, never an exception."""

from __future__ import annotations

from decimal import Decimal

import pytest

from openbell.agents.calculator import MAX_EXPRESSION_CHARS, CalculationError, evaluate

D = Decimal


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("0.1 + 0.2", D("0.3")),
        ("1 / 3", D("0.3333333333333333333333333333")),
        ("10000 * 0.25 / 200", D("12.5")),
        ("2 ** 10", D(1024)),
        ("2 ** -2", D("0.25")),
        ("-7 // 2", D(-4)),
        ("-7 % 2", D(1)),
        ("7 % -2", D(-1)),
        ("(1 + 2) * -3", D(-9)),
        ("+5", D(5)),
        ("1_000 * 3", D(3000)),
        ("1e3 / 4", D(250)),
        ("min(3, 1, 2) + max(4, 5)", D(6)),
        ("abs(-2.5)", D("2.5")),
        ("round(2.675, 2)", D("2.68")),
        ("round(1234.5)", D(1234)),
        ("sqrt(16)", D(4)),
        ("log(100, 10)", D(2)),
        ("log(exp(2))", D(2)),
        ("pi > 3.14159", True),
        ("1 < 2 < 3", True),
        ("1 < 3 < 2", False),
        ("0.1 * 3 == 0.3", True),
        ("(" * 100 + "1" + ")" * 100, D(1)),
    ],
)
def test_exact_values(expression: str, value: Decimal | bool) -> None:
    found = evaluate(expression)
    assert type(found) is type(value)
    assert found == value


@pytest.mark.parametrize(
    ("expression", "code", "mentions"),
    [
        ("__import__('os')", "invalid_expression", "__import__"),
        ("__import__('os').system('ls')", "invalid_expression", "not allowed"),
        ("(1).real", "invalid_expression", "Attribute"),
        ("().__class__.__bases__", "invalid_expression", "Attribute"),
        ("open('/etc/passwd')", "invalid_expression", "open"),
        ("x + 1", "invalid_expression", "'x'"),
        ("'a' * 3", "invalid_expression", "str"),
        ("True + 1", "invalid_expression", "bool"),
        ("[1, 2][0]", "invalid_expression", "not allowed"),
        ("lambda: 1", "invalid_expression", "not allowed"),
        ("min(*[1, 2])", "invalid_expression", "not allowed"),
        ("round(1.5, ndigits=1)", "invalid_expression", "positional"),
        ("sqrt()", "invalid_expression", "arguments"),
        ("1j * 2", "invalid_expression", "complex"),
        ("f'{1}'", "invalid_expression", "not allowed"),
        ("1 +", "invalid_expression", "parse"),
        ("", "invalid_expression", "empty"),
        ("9 ** 9 ** 9", "invalid_expression", "Exponent"),
        ("2 ** 1001", "invalid_expression", "Exponent"),
        ("(10 ** 999) ** 999", "arithmetic_error", "too large"),
        ("1e99999", "arithmetic_error", "too large"),
        ("exp(100000)", "arithmetic_error", "too large"),
        ("1 / 0", "arithmetic_error", "zero"),
        ("5 // 0", "arithmetic_error", "zero"),
        ("5 % 0", "arithmetic_error", "zero"),
        ("0 ** -1", "arithmetic_error", "zero"),
        ("sqrt(-1)", "arithmetic_error", "negative"),
        ("log(0)", "arithmetic_error", "positive"),
        ("(-8) ** 0.5", "arithmetic_error", "fractional"),
        ("1 < (2 < 3)", "invalid_expression", "comparison"),
        ("-" * 40 + "1", "invalid_expression", "deeper"),
        ("+".join(["1"] * 150), "invalid_expression", "deeper"),
        ("+".join(["max(" + ",".join(["1"] * 49) + ")"] * 4), "invalid_expression", "parts"),
        ("(" * 300 + "1" + ")" * 300, "invalid_expression", "characters"),
        ("(" * 240 + "1" + ")" * 240, "invalid_expression", "parse"),
        ("1+" * 300 + "1", "invalid_expression", str(MAX_EXPRESSION_CHARS)),
    ],
)
def test_refusals_are_structured(expression: str, code: str, mentions: str) -> None:
    with pytest.raises(CalculationError) as caught:
        evaluate(expression)
    assert caught.value.code == code
    assert mentions in caught.value.message
    assert caught.value.hint

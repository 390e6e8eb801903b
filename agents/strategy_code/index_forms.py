"""The values of the row analysis (`index_proof.py`): where an integer points, as an anchor and an
interval.

This module owns `Form` (`anchor + [lo, hi]`, `None` meaning unbounded), `Unknown` (what cannot be
placed, with the anchors it depends on), their `join`, the widening that stops a growing interval,
and the integer arithmetic on plain integers. Anchors: none (a plain integer: a row from the
start, or from the end when negative), `LENGTH` (`len(x)`), a row variable, or a position found
in the data.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace
from typing import Final

from openbell.agents.strategy_code.bindings import Key


@dataclass(frozen=True, slots=True)
class Anchor:
    """What a position is counted from: a length or a row variable."""

    key: Key
    name: str
    nonneg: bool = False  # the anchor itself is >= 0 (a length, a range or enumerate index)
    variable: bool = True  # a loop's row or a parameter (not a length or a found position)


LENGTH: Final = Anchor(key=(0, "len"), name="len(...)", nonneg=True, variable=False)
MOVED_LABEL: Final = Anchor(key=(0, "label"), name="a label moved by an offset", variable=False)
SENT: Final = Anchor(key=(0, "sent"), name="a value sent into a generator")


@dataclass(frozen=True, slots=True)
class Form:
    """`anchor + [lo, hi]`; `label`: a label of the index at that position (`x.index[i]`);
    `text`: may as well be a key (a column name) as a position; `many`: an array of such
    positions (`np.where(mask)[0]`)."""

    anchor: Anchor | None
    lo: int | None
    hi: int | None
    label: bool = False
    text: bool = False
    many: bool = False

    @property
    def nonneg(self) -> bool:
        base = self.anchor is None or self.anchor.nonneg
        return base and self.lo is not None and self.lo >= 0

    def shifted(self, lo: int | None, hi: int | None) -> Form:
        return replace(self, lo=add(self.lo, lo), hi=add(self.hi, hi))


@dataclass(frozen=True, slots=True)
class Unknown:
    """Not a position the check can place; `mentions`: the anchors it depends on; `many`: a
    collection (a list, an array, a mask) rather than one value."""

    mentions: frozenset[Anchor] = frozenset()
    many: bool = False


Position = Form | Unknown


def mentions(position: Position | None) -> frozenset[Anchor]:
    if isinstance(position, Form):
        return frozenset() if position.anchor is None else frozenset({position.anchor})
    return position.mentions if position is not None else frozenset()


def join(a: Position | None, b: Position | None) -> Position | None:
    if a is None or b is None:
        return a if b is None else b
    if isinstance(a, Form) and isinstance(b, Form) and a.anchor == b.anchor and a.label == b.label:
        return Form(
            anchor=a.anchor,
            lo=None if a.lo is None or b.lo is None else min(a.lo, b.lo),
            hi=None if a.hi is None or b.hi is None else max(a.hi, b.hi),
            label=a.label,
            text=a.text or b.text,
            many=a.many or b.many,
        )
    return Unknown(mentions(a) | mentions(b), many=a.many or b.many)


def fixed_arithmetic(op: ast.operator, left: Form, right: Form) -> Form:
    """Plain integers combined: exact for constants, unbounded otherwise (except `% k`)."""
    a, b = left.lo, right.lo
    if isinstance(op, ast.Mod) and b is not None and b == right.hi and b > 0:
        if a is not None and a == left.hi:
            return Form(anchor=None, lo=a % b, hi=a % b)
        return Form(anchor=None, lo=0, hi=b - 1)
    if a is not None and b is not None and a == left.hi and b == right.hi:
        if isinstance(op, ast.Mult):
            return Form(anchor=None, lo=a * b, hi=a * b)
        if isinstance(op, ast.FloorDiv) and b:
            return Form(anchor=None, lo=a // b, hi=a // b)
    return Form(anchor=None, lo=None, hi=None)


def widen(old: Position | None, new: Position) -> Position:
    if isinstance(old, Form) and isinstance(new, Form) and old.anchor == new.anchor:
        lo = new.lo if new.lo == old.lo else None
        hi = new.hi if new.hi == old.hi else None
        return replace(new, lo=lo, hi=hi)
    return new


def add(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a + b


def subtract(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a - b


def negate(a: int | None) -> int | None:
    return None if a is None else -a

"""Where an integer used as a row index points, and the proof that it is at or before the current
row.

This module owns `IndexProof`, a small interval analysis over the binding sites of
`bindings.py`. Every integer expression gets a `Form` (`index_forms.py`): an anchor plus an
offset in `[lo, hi]` (`None`: unbounded).

- No anchor: a plain integer, a row counted from the start (>= 0) or from the end (< 0). Any such
  row is one of the rows given, so at or before the last one.
- `LENGTH`: `len(x)`, `x.shape[0]` or `x.size` plus the offset; a row at `len(x) + k` is at or
  before the last one only when `k <= -1`.
- A row variable: the current row of a loop (a `range` or `enumerate` index, a loop element, a
  counter bumped with `+=`), a parameter (bound from every call's argument, so a helper given
  `i + 1` reads `i + 1`), or a position found in the data (`argmax`, `np.where(...)[0]`); a row
  at `i + k` is at or before the current row only when `k <= 0`.

What the check cannot place is `Unknown`, with the anchors it was computed from: it is accepted
only when it depends on no row variable and no length. A position counted back from the end
(`-n`, `-n - 1`) is a plain integer whatever `n` is. Slices clip to the rows there are, so a
slice reads a later row only through a bound anchored on a row variable.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import replace
from typing import Final

from openbell.agents.strategy_code.bindings import Bindings, How, Key, Site, solve
from openbell.agents.strategy_code.index_forms import (
    LENGTH,
    MOVED_LABEL,
    SENT,
    Anchor,
    Form,
    Position,
    Unknown,
    add,
    fixed_arithmetic,
    join,
    mentions,
    negate,
    subtract,
    widen,
)

_POSITION_FINDERS: Final = frozenset(
    {"argmax", "argmin", "nanargmax", "nanargmin", "flatnonzero", "argwhere", "get_loc",
     "get_indexer"}
)  # fmt: skip
_ARRAY_FINDERS: Final = frozenset({"flatnonzero", "argwhere", "get_indexer"})


class IndexProof:
    """The forms of every name, and of any expression, in one module."""

    def __init__(self, bindings: Bindings) -> None:
        self.bindings = bindings
        self._with_sites = {site.key for site in bindings.sites if site.how is not How.STORE}
        self._counters = {site.key for site in bindings.sites if site.how is How.AUGMENT}
        self.env: dict[Key, Position] = {}
        self._memo: dict[int, Position | None] | None = None
        sites = [site for site in bindings.sites if site.how is not How.STORE]
        self.settled = solve(bindings, sites, self.env, self._site, join, widen)
        self._memo = {}  # the names are solved: an expression's form no longer changes

    # -- proofs ----------------------------------------------------------------------------

    def at_or_before(self, node: ast.expr, *, inclusive_of: int = 0) -> str | None:
        """None when the row `node` points at is provably at or before the current row (plus
        `inclusive_of` rows: 1 for the exclusive end of a slice); otherwise why not."""
        position = self.form(node)
        if isinstance(position, Unknown) or position is None:
            named = sorted(anchor.name for anchor in mentions(position))
            if not named:
                return None
            return f"cannot be shown to be at or before the current row (from {', '.join(named)})"
        if position.anchor is None:
            return None
        if position.anchor == LENGTH:
            if inclusive_of or (position.hi is not None and position.hi <= -1):
                return None  # a slice clips at the end; len(x) - 1 is the last row
            return "is past the last row" if position.nonneg else "may be past the last row"
        if position.hi is not None and position.hi <= inclusive_of:
            return None
        later = position.lo is not None and position.lo > inclusive_of
        verb = "reads" if later else "may read"
        return f"{verb} a later row than {position.anchor.name}"

    def slice_problem(self, index: ast.Slice, *, inclusive: bool) -> tuple[str, str] | None:
        """(rule, message) when a slice reverses the rows or reads past the current row."""
        if index.step is not None:
            step = self.form(index.step)
            if not (isinstance(step, Form) and step.anchor is None and (step.lo or 0) >= 1):
                return "reversed", "a negative or unknown step reverses the rows"
        if index.upper is not None:
            problem = self.at_or_before(index.upper, inclusive_of=0 if inclusive else 1)
            return ("future_index", f"the end of the slice {problem}") if problem else None
        if index.lower is not None:
            rows = [a.name for a in mentions(self.form(index.lower)) if a != LENGTH]
            if rows:
                return "future_index", f"a slice from {rows[0]} to the end reads later rows"
        return None

    def negative(self, node: ast.expr) -> bool:
        """Whether `node` is provably a plain integer < 0."""
        position = self.form(node)
        return isinstance(position, Form) and position.anchor is None and (position.hi or 0) < 0

    def nonneg(self, node: ast.expr) -> bool:
        """Whether `node` is provably an integer >= 0."""
        position = self.form(node)
        return isinstance(position, Form) and position.nonneg

    def bounded_count(self, node: ast.expr) -> bool:
        """Whether `node` is a count the check can bound (a window's length: `tail(n)`)."""
        position = self.form(node)
        return isinstance(position, Form) and position.anchor is None and position.hi is not None

    def trailing(self, index: ast.Slice) -> bool:
        """A window of a bounded number of rows: `[-k:]`, `[-k:-j]`, `[len(x) - k:]`, or both
        ends on one row variable (`[i - 5:i + 1]`; whether it ends after the current row is
        `slice_problem`'s question)."""
        if index.lower is None or index.step is not None:
            return False
        lower = self.form(index.lower)
        if not (isinstance(lower, Form) and lower.lo is not None and lower.hi is not None):
            return False
        if index.upper is None:
            return lower.anchor == LENGTH or (lower.anchor is None and lower.hi < 0)
        upper = self.form(index.upper)
        if not (isinstance(upper, Form) and upper.hi is not None):
            return False
        if lower.anchor is None:  # counted from the end, or a window of fixed rows
            return lower.hi < 0 and (
                upper.anchor == LENGTH or (upper.anchor is None and upper.hi < 0)
            )
        return upper.anchor == lower.anchor

    def starts_at_first(self, index: ast.Slice) -> bool:
        """Whether a slice keeps the first row (no lower bound, or 0)."""
        if index.lower is None:
            return True
        lower = self.form(index.lower)
        return isinstance(lower, Form) and lower.anchor is None and lower.lo == lower.hi == 0

    def single(self, node: ast.expr) -> bool:
        """Whether `node` is one position (not a key, a list, a mask or a slice)."""
        position = self.form(node)
        return isinstance(position, Form) and not position.text and not position.many

    def many(self, node: ast.expr) -> bool:
        """Whether `node` is a collection of positions or a mask, not one value."""
        position = self.form(node)
        return position is not None and position.many

    def in_order(self, node: ast.expr) -> bool:
        """Whether picking rows by `node` keeps their order: a mask, positions found in the data
        (`np.where`), `range`/`np.arange` counting up, or a list of rows in ascending order."""
        if isinstance(node, ast.Compare | ast.BoolOp) or (
            isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not | ast.Invert)
        ):
            return True
        if isinstance(node, ast.Call) and _function_name(node) in ("range", "arange"):
            step = node.args[2] if len(node.args) > 2 else None
            return step is None or self.nonneg(step)
        if isinstance(node, ast.List | ast.Tuple):
            forms = [self.form(part) for part in node.elts]
            anchors = {form.anchor for form in forms if isinstance(form, Form)}
            keys = [_row_order(form) for form in forms]
            known = [key for key in keys if key is not None]
            return len(anchors) == 1 and len(known) == len(keys) and known == sorted(known)
        if isinstance(node, ast.Name):
            key = self.bindings.key(node)
            sites = self.bindings.by_key.get(key, [])
            sources = [site.source for site in sites]
            plain = [site for site in sites if site.how is How.VALUE]
            if sources and len(plain) == len(sources) and all(not site.path for site in plain):
                return all(
                    source is not None and source is not node and self._in_order_once(source)
                    for source in sources
                )
        position = self.form(node)
        return isinstance(position, Form) and position.anchor is not None and position.many

    def _in_order_once(self, node: ast.expr) -> bool:
        return not isinstance(node, ast.Name) and self.in_order(node)

    def row_variables(self, node: ast.expr) -> list[str]:
        """The row variables (not lengths) any name in `node` is placed from."""
        found: set[str] = set()
        for inner in ast.walk(node):
            if isinstance(inner, ast.Name):
                found.update(a.name for a in mentions(self.form(inner)) if a.variable)
        return sorted(found)

    # -- forms -----------------------------------------------------------------------------

    def form(self, node: ast.expr) -> Position | None:
        """The form of an expression (None while the fixpoint has not reached its names)."""
        if self._memo is None:
            return self._form(node)
        if id(node) not in self._memo:
            self._memo[id(node)] = self._form(node)
        return self._memo[id(node)]

    def _form(self, node: ast.expr) -> Position | None:  # noqa: C901
        if isinstance(node, ast.Constant):
            if isinstance(node.value, int) and not isinstance(node.value, bool):
                return Form(anchor=None, lo=node.value, hi=node.value)
            return Unknown()
        if isinstance(node, ast.Name):
            key = self.bindings.key(node)
            if key in self.env:
                return self.env[key]
            return None if key in self._with_sites else Unknown()
        if isinstance(node, ast.UnaryOp):
            return self._unary(node)
        if isinstance(node, ast.BinOp):
            return self._binary(node.op, self.form(node.left), self.form(node.right))
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.Attribute):
            return Form(anchor=LENGTH, lo=0, hi=0) if node.attr == "size" else Unknown()
        if isinstance(node, ast.Subscript):
            return self._subscript(node)
        if isinstance(node, ast.IfExp):
            return join(self.form(node.body), self.form(node.orelse))
        if isinstance(node, ast.BoolOp):
            found: Position | None = None
            for value in node.values:
                found = join(found, self.form(value))
            return found
        if isinstance(node, ast.NamedExpr):
            return self.form(node.value)
        if isinstance(node, ast.Yield | ast.YieldFrom):
            return Unknown(frozenset({SENT}))
        many = (ast.List, ast.Tuple, ast.Set, ast.ListComp, ast.SetComp, ast.GeneratorExp,
                ast.Compare, ast.Dict, ast.DictComp)  # fmt: skip
        return Unknown(many=isinstance(node, many))

    def _unary(self, node: ast.UnaryOp) -> Position | None:
        inner = self.form(node.operand)
        if inner is None or isinstance(node.op, ast.UAdd):
            return inner
        if isinstance(node.op, ast.Not):
            return Unknown()
        if isinstance(inner, Form) and inner.anchor is None:
            lo, hi = negate(inner.hi), negate(inner.lo)
            if isinstance(node.op, ast.Invert):  # ~x == -x - 1
                lo, hi = add(lo, -1), add(hi, -1)
            return Form(anchor=None, lo=lo, hi=hi)
        if isinstance(inner, Form):  # counted back from the end: a plain integer
            return Form(anchor=None, lo=None, hi=None)
        return Unknown()

    def _binary(
        self, op: ast.operator, left: Position | None, right: Position | None
    ) -> Position | None:
        if left is None or right is None:
            return None
        if any(isinstance(side, Form) and side.label for side in (left, right)):
            # Only a label moved back by a plain integer stays a label.
            if (
                isinstance(op, ast.Sub)
                and isinstance(left, Form)
                and left.label
                and isinstance(right, Form)
                and right.anchor is None
                and right.nonneg
            ):
                return left.shifted(negate(right.hi), negate(right.lo))
            return Unknown(mentions(left) | mentions(right) | {MOVED_LABEL})
        if not (isinstance(left, Form) and isinstance(right, Form)):
            return Unknown(mentions(left) | mentions(right))
        if isinstance(op, ast.Add):
            if right.anchor is None:
                return left.shifted(right.lo, right.hi)
            if left.anchor is None:
                return right.shifted(left.lo, left.hi)
        elif isinstance(op, ast.Sub):
            if right.anchor is None:
                return left.shifted(negate(right.hi), negate(right.lo))
            if left.anchor == right.anchor:
                return Form(
                    anchor=None, lo=subtract(left.lo, right.hi), hi=subtract(left.hi, right.lo)
                )
        elif left.anchor is None and right.anchor is None:
            return fixed_arithmetic(op, left, right)
        return Unknown(mentions(left) | mentions(right))

    def _call(self, node: ast.Call) -> Position | None:
        name = _function_name(node)
        builtin = isinstance(node.func, ast.Name)
        if name == "len" and builtin:
            return Form(anchor=LENGTH, lo=0, hi=0)
        if name in ("int", "round") and builtin and node.args:
            inner = self.form(node.args[0])
            return Unknown(inner.mentions) if isinstance(inner, Unknown) else inner
        if name in ("min", "max") and builtin and len(node.args) > 1:
            return self._extreme(name, [self.form(argument) for argument in node.args])
        if name in _POSITION_FINDERS:
            return Form(anchor=_found_in_data(node), lo=0, hi=0, many=name in _ARRAY_FINDERS)
        if name == "searchsorted":  # the insertion point may be one past the row found
            return Form(anchor=_found_in_data(node), lo=0, hi=1)
        functions = self.bindings.function_of(node.func)
        if functions:  # a helper: what it returns (solved with the names)
            found: Position | None = None
            for function in functions:
                found = join(found, self.env.get(self.bindings.return_key(function)))
            return found
        parts = [self.form(argument) for argument in node.args]
        anchors = frozenset().union(*(mentions(part) for part in parts))
        scalar = name in ("float", "abs", "bool", "str")
        return Unknown(anchors, many=not scalar)

    def _extreme(self, name: str, parts: list[Position | None]) -> Position | None:
        """min(a, b) and max(a, b) of one anchor; min(a, b) is also at most any one of them."""
        if any(part is None for part in parts):
            return None
        forms = [part for part in parts if isinstance(part, Form)]
        if len(forms) == len(parts) and len({form.anchor for form in forms}) == 1:
            pick: Callable[[list[int]], int] = min if name == "min" else max
            los = [form.lo for form in forms if form.lo is not None]
            his = [form.hi for form in forms if form.hi is not None]
            lo = pick(los) if len(los) == len(forms) else None
            hi = pick(his) if len(his) == len(forms) else None
            return Form(anchor=forms[0].anchor, lo=lo, hi=hi)
        bounded = [form for form in forms if form.anchor is not None and form.hi is not None]
        if name == "min" and len({form.anchor for form in bounded}) == 1:
            return Form(anchor=bounded[0].anchor, lo=None, hi=min(f.hi or 0 for f in bounded))
        return Unknown(frozenset().union(*(mentions(part) for part in parts)))

    def _subscript(self, node: ast.Subscript) -> Position | None:
        value = node.value
        if isinstance(value, ast.Attribute) and value.attr == "shape":
            return Form(anchor=LENGTH, lo=0, hi=0)
        if isinstance(value, ast.Call) and _function_name(value) in ("where", "nonzero"):
            return Form(anchor=_found_in_data(value), lo=0, hi=0, many=True)
        if isinstance(node.slice, ast.Slice):
            return Unknown(many=True)
        if _is_index(value):
            position = self.form(node.slice)
            if isinstance(position, Form):
                return replace(position, label=True, text=False)
            return position
        return Unknown()

    # -- sites -----------------------------------------------------------------------------

    def _site(self, site: Site) -> Position | None:
        anchor = Anchor(key=site.key, name=site.key[1])
        if site.key in self._counters:  # `i = 0; ... i += 1`: the loop's current row
            return Form(anchor=anchor, lo=0, hi=0)
        if site.how in (How.UNKNOWN, How.RECEIVER):
            return Form(anchor=anchor, lo=0, hi=0, text=True)
        if site.how in (How.ENTRY, How.RAISED) or site.source is None:
            return Unknown()
        if site.how is How.ELEMENT:
            return self._element(site.source, site.path, anchor)
        return self._project(site.source, site.path)

    def _project(self, source: ast.expr, path: tuple[int, ...]) -> Position | None:
        if not path:
            return self.form(source)
        if isinstance(source, ast.Tuple | ast.List) and 0 <= path[0] < len(source.elts):
            element = source.elts[path[0]]
            if not isinstance(element, ast.Starred):
                return self._project(element, path[1:])
        return Unknown()

    def _element(self, source: ast.expr, path: tuple[int, ...], anchor: Anchor) -> Position | None:
        """The form of (a part of) one element of iterating `source`."""
        name = source.func.id if isinstance(source, ast.Call) and isinstance(
            source.func, ast.Name
        ) else None  # fmt: skip
        arguments = source.args if isinstance(source, ast.Call) else []
        if name == "range" and not path:
            start = self.form(arguments[0]) if len(arguments) > 1 else Form(None, 0, 0)
            nonneg = isinstance(start, Form) and start.nonneg and len(arguments) < 3
            return Form(anchor=replace(anchor, nonneg=nonneg), lo=0, hi=0)
        if name == "enumerate" and path and arguments:
            if path[0] == 0:
                return Form(anchor=replace(anchor, nonneg=True), lo=0, hi=0)
            return self._element(arguments[0], path[1:], anchor)
        if name == "zip" and path and 0 <= path[0] < len(arguments):
            return self._element(arguments[path[0]], path[1:], anchor)
        if name in ("reversed", "sorted", "list", "tuple") and arguments:
            return self._element(arguments[0], path, anchor)
        if isinstance(source, ast.Tuple | ast.List | ast.Set) and not any(
            isinstance(element, ast.Starred) for element in source.elts
        ):
            found: Position | None = None
            for element in source.elts:
                found = join(found, self._project(element, path))
            return found
        return Form(anchor=anchor, lo=0, hi=0, text=True)


def _function_name(node: ast.Call) -> str | None:
    if isinstance(node.func, ast.Name):
        return node.func.id
    return node.func.attr if isinstance(node.func, ast.Attribute) else None


def _row_order(position: Position | None) -> tuple[int, int] | None:
    """A sort key for one known row: rows from the start come before rows from the end; rows
    on one variable by their offset."""
    if isinstance(position, Form) and position.lo is not None and position.lo == position.hi:
        value = position.lo
        return (1, value) if value < 0 and position.anchor is None else (0, value)
    return None


def _is_index(node: ast.expr) -> bool:
    """`x.index`, `x.index.values`, `x.index.to_numpy()`: labels in row order."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        node = node.func.value if node.func.attr == "to_numpy" else node
    if isinstance(node, ast.Attribute) and node.attr in ("values", "array"):
        node = node.value
    return isinstance(node, ast.Attribute) and node.attr == "index"


def _found_in_data(node: ast.AST) -> Anchor:
    return Anchor(
        key=(id(node), "data"), name="a position found in the data", nonneg=True, variable=False
    )
